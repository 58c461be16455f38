/* lib_outfile.c - streamed output files that nobody sees half-written: the anonymous
 * (O_TMPFILE) path, the named-temporary fallback, signals, a full filesystem. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "t.h"
#include "outfile.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64] = "/tmp/lib-outfile.XXXXXX";

/* the names in dir, space-separated, sorted by readdir order (tests use at most one or two) */
static const char *listing(const char *d)
{
	static char out[4096];
	DIR *dp = opendir(d);
	struct dirent *e;
	out[0] = '\0';
	while (dp && (e = readdir(dp)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", *out ? " " : "", e->d_name);
	if (dp)
		closedir(dp);
	return out;
}

static const char *path(const char *name)
{
	static char buf[4][512];
	static int i;
	i = (i + 1) % 4;
	snprintf(buf[i], sizeof buf[i], "%s/%s", dir, name);
	return buf[i];
}

static const char *content(const char *p)
{
	static char buf[256];
	FILE *f = fopen(p, "r");
	size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
	buf[n] = '\0';
	if (f)
		fclose(f);
	return f ? buf : "(missing)";
}

static volatile sig_atomic_t got_sig;
static void on_term(int sig) { got_sig = sig; }

/* The child of a_program_s_own_signal_handler_is_kept: its SIGTERM handler set first, then a
 * named temporary; SIGTERM must reach the handler, and the program goes on to clean up. */
static int own_handler(const char *p)
{
	char err[1024];
	struct outfile o;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	outfile_no_tmpfile = 1;
	if (outfile_open(&o, p, 1 << 20, err, sizeof err) < 0)
		return 9;
	raise(SIGTERM);
	outfile_discard(&o);
	return got_sig == SIGTERM ? 0 : 7;
}

int main(int argc, char **argv)
{
	char err[1024];
	struct outfile o;
	struct stat st;

	if (argc == 3 && strcmp(argv[1], "--own-handler") == 0)
		return own_handler(argv[2]);

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 2;
	}
	umask(022);

	T_CASE("anonymous_file_is_invisible_until_published") {
		T_ASSERT(outfile_open(&o, path("a.bin"), 4, err, sizeof err) == 0);  /* tiny buffer */
		T_ASSERT(o.anon == 1);
		T_ASSERT(outfile_write(&o, "hello world", 11, err, sizeof err) == 0);
		T_ASSERT(outfile_sync(&o, err, sizeof err) == 0);
		T_STREQ(listing(dir), "");
		T_ASSERT(outfile_publish(&o, err, sizeof err) == 0);
		T_STREQ(listing(dir), "a.bin");
		T_STREQ(content(path("a.bin")), "hello world");
		T_ASSERT(stat(path("a.bin"), &st) == 0 && (st.st_mode & 0777) == 0644);
		outfile_discard(&o);
		T_STREQ(listing(dir), "a.bin");  /* discard after publish keeps it */
	}

	T_CASE("publish_replaces_the_old_file") {
		T_ASSERT(outfile_open(&o, path("a.bin"), 1 << 20, err, sizeof err) == 0);
		T_ASSERT(outfile_write(&o, "new", 3, err, sizeof err) == 0);
		T_STREQ(content(path("a.bin")), "hello world");
		T_ASSERT(outfile_sync(&o, err, sizeof err) == 0 && outfile_publish(&o, err, sizeof err) == 0);
		T_STREQ(content(path("a.bin")), "new");
		T_STREQ(listing(dir), "a.bin");
		outfile_discard(&o);
		unlink(path("a.bin"));
	}

	T_CASE("discarded_anonymous_file_leaves_nothing") {
		T_ASSERT(outfile_open(&o, path("b.bin"), 1 << 20, err, sizeof err) == 0);
		T_ASSERT(outfile_write(&o, "x", 1, err, sizeof err) == 0);
		outfile_discard(&o);
		T_STREQ(listing(dir), "");
	}

	T_CASE("named_fallback_is_hidden_then_renamed") {
		outfile_no_tmpfile = 1;
		T_ASSERT(outfile_open(&o, path("c.idx"), 1 << 20, err, sizeof err) == 0);
		T_ASSERT(o.anon == 0);
		T_ASSERT(strncmp(listing(dir), ".c.idx.tmp.", 11) == 0);
		T_ASSERT(outfile_write(&o, "abc", 3, err, sizeof err) == 0);
		T_ASSERT(outfile_sync(&o, err, sizeof err) == 0 && outfile_publish(&o, err, sizeof err) == 0);
		T_STREQ(listing(dir), "c.idx");
		T_ASSERT(stat(path("c.idx"), &st) == 0 && (st.st_mode & 0777) == 0644);
		outfile_discard(&o);
		T_ASSERT(outfile_open(&o, path("d.idx"), 1 << 20, err, sizeof err) == 0);
		outfile_discard(&o);
		T_STREQ(listing(dir), "c.idx");
		unlink(path("c.idx"));
		outfile_no_tmpfile = 0;
	}

	T_CASE("sweep_removes_only_the_named_files_leftovers") {
		const char *names[] = {".latest.tmp.123.0", ".latest.tmp.aB3xYz", "latest",
				       ".latest.tmpx", ".other.tmp.1.0", "x.latest.tmp.1"};
		for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
			FILE *f = fopen(path(names[i]), "w");
			T_ASSERT(f && fclose(f) == 0);
		}
		T_ASSERT(symlink("latest", path(".latest.tmp.link")) == 0);
		T_ASSERT(mkdir(path(".latest.tmp.dir"), 0755) == 0);
		T_ASSERT(outfile_sweep(dir, "latest") == 2);
		T_ASSERT(access(path(".latest.tmp.123.0"), F_OK) != 0);
		T_ASSERT(access(path(".latest.tmp.aB3xYz"), F_OK) != 0);
		for (size_t i = 2; i < sizeof names / sizeof *names; i++)
			T_ASSERT(access(path(names[i]), F_OK) == 0);
		struct stat lsb;
		T_ASSERT(lstat(path(".latest.tmp.link"), &lsb) == 0 && S_ISLNK(lsb.st_mode));
		T_ASSERT(stat(path(".latest.tmp.dir"), &lsb) == 0 && S_ISDIR(lsb.st_mode));
		T_ASSERT(outfile_sweep(dir, "latest") == 0);
		T_ASSERT(outfile_sweep(path("no-such-dir"), "latest") == 0);
		for (size_t i = 2; i < sizeof names / sizeof *names; i++)
			unlink(path(names[i]));
		unlink(path(".latest.tmp.link"));
		rmdir(path(".latest.tmp.dir"));
		T_STREQ(listing(dir), "");
	}

	T_CASE("named_fallback_is_removed_when_a_signal_ends_the_program") {
		int sigs[] = {SIGTERM, SIGINT, SIGHUP};
		for (int k = 0; k < 3; k++) {
			pid_t pid = fork();
			if (pid == 0) {
				outfile_no_tmpfile = 1;
				if (outfile_open(&o, path("e.bin"), 1 << 20, err, sizeof err) < 0 ||
				    outfile_write(&o, "data", 4, err, sizeof err) < 0)
					_exit(9);
				raise(sigs[k]);
				_exit(8);
			}
			int status = 0;
			waitpid(pid, &status, 0);
			T_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == sigs[k]);
			T_STREQ(listing(dir), "");
		}
	}

	T_CASE("a_program_s_own_signal_handler_is_kept") {
		/* train stops cleanly on SIGTERM: an output file must not replace that with "die".
		 * A fresh process (exec), so no earlier output file has set the handlers already. */
		pid_t pid = fork();
		if (pid == 0) {
			execl("/proc/self/exe", "lib_outfile", "--own-handler", path("k.bin"), (char *)NULL);
			_exit(10);
		}
		int status = 0;
		waitpid(pid, &status, 0);
		T_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		T_STREQ(listing(dir), "");
	}

	T_CASE("mode_is_the_one_asked_for_on_both_paths") {
		for (int named = 0; named < 2; named++) {
			outfile_no_tmpfile = named;
			T_ASSERT(outfile_open(&o, path("m.bin"), 0, err, sizeof err) == 0);
			o.mode = 0600;
			T_ASSERT(outfile_write(&o, "x", 1, err, sizeof err) == 0);
			T_ASSERT(outfile_sync(&o, err, sizeof err) == 0);
			T_ASSERT(outfile_publish(&o, err, sizeof err) == 0);
			outfile_discard(&o);
			T_ASSERT(stat(path("m.bin"), &st) == 0 && (st.st_mode & 0777) == 0600);
			unlink(path("m.bin"));
		}
		outfile_no_tmpfile = 0;
	}

	T_CASE("a_large_write_bypasses_the_buffer_with_the_same_bytes") {
		static char big[3 * 4096 + 5];
		for (size_t i = 0; i < sizeof big; i++)
			big[i] = (char)('a' + i % 26);
		T_ASSERT(outfile_open(&o, path("big.bin"), 4096, err, sizeof err) == 0);
		T_ASSERT(outfile_write(&o, "<", 1, err, sizeof err) == 0);   /* buffered first */
		T_ASSERT(outfile_write(&o, big, sizeof big, err, sizeof err) == 0);
		T_ASSERT(outfile_write(&o, ">", 1, err, sizeof err) == 0);
		T_ASSERT(o.size == sizeof big + 2);
		T_ASSERT(outfile_sync(&o, err, sizeof err) == 0);
		T_ASSERT(outfile_publish(&o, err, sizeof err) == 0);
		outfile_discard(&o);
		FILE *f = fopen(path("big.bin"), "rb");
		static char back[sizeof big + 8];
		size_t n = f ? fread(back, 1, sizeof back, f) : 0;
		if (f)
			fclose(f);
		T_ASSERT(n == sizeof big + 2 && back[0] == '<' && back[n - 1] == '>' &&
			 memcmp(back + 1, big, sizeof big) == 0);
		unlink(path("big.bin"));
	}

	T_CASE("publish_as_names_the_file_once_written_in_another_directory") {
		for (int named = 0; named < 2; named++) {
			outfile_no_tmpfile = named;
			mkdir(path("store"), 0755);
			T_ASSERT(outfile_open(&o, path("obj"), 0, err, sizeof err) == 0);
			T_ASSERT(outfile_write(&o, "object", 6, err, sizeof err) == 0);
			T_ASSERT(outfile_sync(&o, err, sizeof err) == 0);
			T_ASSERT(outfile_publish_as(&o, path("store/ab12"), err, sizeof err) == 0);
			T_ASSERT(strcmp(o.path, path("store/ab12")) == 0);
			outfile_discard(&o);
			T_STREQ(listing(path("store")), "ab12");
			T_STREQ(content(path("store/ab12")), "object");
			T_STREQ(listing(dir), "store");
			unlink(path("store/ab12"));
			rmdir(path("store"));
		}
		outfile_no_tmpfile = 0;
	}

	T_CASE("copy_appends_a_range_of_another_file") {
		FILE *f = fopen(path("src"), "w");
		fputs("0123456789", f);
		fclose(f);
		int fd = open(path("src"), O_RDONLY);
		T_ASSERT(outfile_open(&o, path("f.bin"), 1 << 20, err, sizeof err) == 0);
		T_ASSERT(outfile_write(&o, "<", 1, err, sizeof err) == 0);
		T_ASSERT(outfile_copy(&o, fd, 2, 5, "src", err, sizeof err) == 0);
		T_ASSERT(outfile_write(&o, ">", 1, err, sizeof err) == 0);
		T_ASSERT(o.size == 7);
		T_ASSERT(outfile_copy(&o, fd, 8, 5, "src", err, sizeof err) == -1);
		T_ASSERT(strstr(err, "src: ends at byte 10, 3 bytes short"));
		T_ASSERT(outfile_sync(&o, err, sizeof err) == 0 && outfile_publish(&o, err, sizeof err) == 0);
		T_STREQ(content(path("f.bin")), "<23456>89");
		outfile_discard(&o);
		close(fd);
		unlink(path("src"));
		unlink(path("f.bin"));
	}

	T_CASE("missing_directory_is_an_error_naming_it") {
		T_ASSERT(outfile_open(&o, path("no/such/g.bin"), 1 << 20, err, sizeof err) == -1);
		T_ASSERT(strstr(err, "cannot write in ") && strstr(err, "no/such: No such file or directory"));
	}

	/* a real full filesystem: 64 KiB of tmpfs (needs root, as the fs-watchdog tests do) */
	char mnt[600];
	snprintf(mnt, sizeof mnt, "%s/full", dir);
	mkdir(mnt, 0755);
	if (mount("lmtk-test", mnt, "tmpfs", 0, "size=64k") != 0) {
		printf("skip full_filesystem_is_a_write_error: cannot mount tmpfs (need root)\n");
	} else {
		T_CASE("full_filesystem_is_a_write_error_and_leaves_nothing") {
			static char block[1 << 16];
			char p[700];
			int rc = 0;
			snprintf(p, sizeof p, "%s/h.bin", mnt);
			T_ASSERT(outfile_open(&o, p, 1 << 16, err, sizeof err) == 0);
			for (int i = 0; i < 4 && rc == 0; i++)
				rc = outfile_write(&o, block, sizeof block, err, sizeof err);
			if (rc == 0)
				rc = outfile_sync(&o, err, sizeof err);
			T_ASSERT(rc == -1 && strstr(err, "No space left on device"));
			outfile_discard(&o);
			T_STREQ(listing(mnt), "");
		}
		umount2(mnt, MNT_DETACH);
	}
	rmdir(mnt);
	rmdir(dir);
	T_DONE();
}
