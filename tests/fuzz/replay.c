/* replay - runs a fuzz harness's LLVMFuzzerTestOneInput over files, without libFuzzer: what
 * `make check` does with the seed corpus and the inputs that once crashed (tests/fuzz/fuzz.h).
 *
 *   build/fuzz-replay/<name> FILE|DIR...
 *
 * Every regular file named, or found directly in a named directory, is one input.  Exit 0 when
 * all ran (a crash ends the process: the test fails), 2 when a path cannot be read. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int one(const char *path, long *count)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t n = 0, cap = 0, got;
	if (!f) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	do {
		if (n + 65536 > cap && !(buf = realloc(buf, cap = (cap + 65536) * 2)))
			abort();
		got = fread(buf + n, 1, cap - n, f);
		n += got;
	} while (got > 0);
	fclose(f);
	LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	(*count)++;
	return 0;
}

int main(int argc, char **argv)
{
	long count = 0;
	int bad = 0;
	for (int i = 1; i < argc; i++) {
		struct stat sb;
		if (stat(argv[i], &sb) < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			bad = 1;
			continue;
		}
		if (!S_ISDIR(sb.st_mode)) {
			bad |= one(argv[i], &count) < 0;
			continue;
		}
		DIR *d = opendir(argv[i]);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			char p[4096];
			snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
			if (e->d_name[0] != '.' && stat(p, &sb) == 0 && S_ISREG(sb.st_mode))
				bad |= one(p, &count) < 0;
		}
		if (d)
			closedir(d);
	}
	printf("replay: %ld inputs\n", count);
	return bad ? 2 : 0;
}
