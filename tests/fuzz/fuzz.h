/* fuzz.h - what the harnesses share.
 *
 * Each harness tests/fuzz/<prog>_<what>.c defines LLVMFuzzerTestOneInput() over one parser that
 * reads a file a user or another program hands us, and is built twice: by `make fuzz` with clang
 * and libFuzzer under AddressSanitizer and UBSan, and by `make check` with gcc and
 * tests/fuzz/replay.c, which replays the seed corpus and every input that once crashed
 * (tests/fuzz/regress/<name>/) through the same function.  The parsers read paths, as the
 * programs do, so the input becomes a file in a private directory first. */
#ifndef LMTK_FUZZ_H
#define LMTK_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The directory this process writes its inputs to, made once and removed at exit. */
static char fuzz_dir_path[64];
static void fuzz_dir_remove(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir_path);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz: could not remove %s\n", fuzz_dir_path);
}
static inline const char *fuzz_dir(void)
{
	if (!fuzz_dir_path[0]) {
		const char *t = getenv("TMPDIR");
		snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/lmtk-fuzz.XXXXXX", t && *t ? t : "/tmp");
		if (!mkdtemp(fuzz_dir_path))
			abort();
		atexit(fuzz_dir_remove);
	}
	return fuzz_dir_path;
}

/* dir/name holding data[0..n); its path (static storage, one per name slot). */
static inline const char *fuzz_file(const char *name, const void *data, size_t n)
{
	static char path[4][256];
	static int slot;
	char *p = path[slot++ & 3];
	snprintf(p, 256, "%s/%s", fuzz_dir(), name);
	FILE *f = fopen(p, "wb");
	if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0)
		abort();
	return p;
}

#endif
