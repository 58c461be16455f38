/* lib_file.c - file_write_atomic and file_read_all: exact bytes, the mode, no leftovers, errors
 * that name the path, and a writer killed mid-write never leaving a torn destination. */
#include "t.h"
#include "file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char top[4096];

static const char *at(const char *name)
{
	static char path[4][4300];
	static int i;
	i = (i + 1) % 4;
	snprintf(path[i], sizeof path[i], "%s/%s", top, name);
	return path[i];
}

/* entries in dir other than . and .., with the first name seen (if any) in *first */
static int entries(const char *dir, char *first, size_t len)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	if (first)
		first[0] = '\0';
	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			if (first && !n)
				snprintf(first, len, "%s", e->d_name);
			n++;
		}
	closedir(d);
	return n;
}

static void rm_tree(const char *dir)
{
	char cmd[8300];
	snprintf(cmd, sizeof cmd, "chmod -R u+rwx '%s' 2>/dev/null; rm -rf '%s'", dir, dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

static int same_file(const char *path, const void *data, size_t len)
{
	char *got = NULL, err[512];
	size_t n = 0;
	int same;
	if (file_read_all(path, &got, &n, err, sizeof err) < 0)
		return 0;
	same = n == len && memcmp(got, data, len) == 0;
	free(got);
	return same;
}

/* a crash-test payload: `len` bytes of `c`, with the length and letter at both ends so that a
 * file that is a mix of two payloads or cut short is told apart from either */
static char *payload(char c, size_t len)
{
	char *p = malloc(len);
	memset(p, c, len);
	snprintf(p, 32, "<%c %zu>", c, len);
	p[len - 1] = '!';
	return p;
}

int main(void)
{
	const char *tmp = getenv("LMTK_TMP");
	char err[8192], name[256];
	char *data = NULL;
	size_t len = 0;
	struct stat st;

	snprintf(top, sizeof top, "%s/lib_file.XXXXXX", tmp ? tmp : "/tmp");
	if (!mkdtemp(top)) {
		perror(top);
		return 2;
	}

	T_CASE("file_write_then_read_returns_exact_bytes_with_nuls") {
		static const char bytes[] = {'a', 0, 'b', 0, 0, '\n', (char)0xff, '\r', 0};
		T_ASSERT(file_write_atomic(at("nul.bin"), bytes, sizeof bytes, 0644, err, sizeof err) == 0);
		T_ASSERT(stat(at("nul.bin"), &st) == 0 && st.st_size == (off_t)sizeof bytes);
		T_ASSERT(file_read_all(at("nul.bin"), &data, &len, err, sizeof err) == 0);
		T_ASSERT(len == sizeof bytes);
		T_ASSERT(data && memcmp(data, bytes, sizeof bytes) == 0);
		T_ASSERT(data && data[len] == '\0');  /* NUL-terminated past the data too */
		free(data);
		data = NULL;
	}

	T_CASE("file_zero_length_roundtrip") {
		T_ASSERT(file_write_atomic(at("empty"), "ignored", 0, 0644, err, sizeof err) == 0);
		T_ASSERT(stat(at("empty"), &st) == 0 && st.st_size == 0);
		len = 99;
		T_ASSERT(file_read_all(at("empty"), &data, &len, err, sizeof err) == 0);
		T_ASSERT(len == 0);
		T_ASSERT(data && data[0] == '\0');
		free(data);
		data = NULL;
	}

	T_CASE("file_read_all_grows_past_its_first_buffer") {
		size_t n = 3 * 1024 * 1024 + 17;  /* many doublings of the 8 KiB start, not a power of 2 */
		unsigned char *big = malloc(n);
		unsigned x = 12345;
		for (size_t i = 0; i < n; i++) {
			x = x * 1103515245u + 12345u;
			big[i] = (unsigned char)(x >> 16);
		}
		T_ASSERT(file_write_atomic(at("big.bin"), big, n, 0600, err, sizeof err) == 0);
		T_ASSERT(file_read_all(at("big.bin"), &data, &len, err, sizeof err) == 0);
		T_ASSERT(len == n);
		T_ASSERT(data && memcmp(data, big, n) == 0);
		free(data);
		data = NULL;
		/* the length pointer is optional */
		T_ASSERT(file_read_all(at("big.bin"), &data, NULL, err, sizeof err) == 0);
		free(data);
		data = NULL;
		free(big);
	}

	T_CASE("file_write_applies_mode_exactly_not_umask") {
		mode_t old = umask(077);
		T_ASSERT(file_write_atomic(at("m644"), "x", 1, 0644, err, sizeof err) == 0);
		T_ASSERT(stat(at("m644"), &st) == 0 && (st.st_mode & 07777) == 0644);
		T_ASSERT(file_write_atomic(at("m640"), "x", 1, 0640, err, sizeof err) == 0);
		T_ASSERT(stat(at("m640"), &st) == 0 && (st.st_mode & 07777) == 0640);
		umask(old);
	}

	T_CASE("file_write_replaces_content_and_mode_of_existing_file") {
		T_ASSERT(file_write_atomic(at("over"), "first version, long", 19, 0600, err, sizeof err) == 0);
		T_ASSERT(file_write_atomic(at("over"), "second", 6, 0644, err, sizeof err) == 0);
		T_ASSERT(same_file(at("over"), "second", 6));
		T_ASSERT(stat(at("over"), &st) == 0 && (st.st_mode & 07777) == 0644);
	}

	T_CASE("file_write_leaves_no_temp_file_after_success") {
		T_ASSERT(mkdir(at("clean"), 0755) == 0);
		T_ASSERT(file_write_atomic(at("clean/state.json"), "{}", 2, 0644, err, sizeof err) == 0);
		T_ASSERT(file_write_atomic(at("clean/state.json"), "{ }", 3, 0644, err, sizeof err) == 0);
		T_ASSERT(entries(at("clean"), name, sizeof name) == 1);
		T_STREQ(name, "state.json");
	}

	T_CASE("file_write_relative_path_lands_in_cwd") {
		char cwd[4096];
		T_ASSERT(getcwd(cwd, sizeof cwd) != NULL);
		T_ASSERT(mkdir(at("rel"), 0755) == 0 && chdir(at("rel")) == 0);
		T_ASSERT(file_write_atomic("here.txt", "rel", 3, 0644, err, sizeof err) == 0);
		T_ASSERT(chdir(cwd) == 0);
		T_ASSERT(same_file(at("rel/here.txt"), "rel", 3));
		T_ASSERT(entries(at("rel"), NULL, 0) == 1);
	}

	T_CASE("file_write_into_missing_dir_fails_naming_the_path") {
		const char *p = at("no-such-dir/out.txt");
		err[0] = '\0';
		T_ASSERT(file_write_atomic(p, "x", 1, 0644, err, sizeof err) == -1);
		T_ASSERT(strstr(err, p) != NULL);
		T_ASSERT(strstr(err, "No such file or directory") != NULL);
		T_ASSERT(access(at("no-such-dir"), F_OK) != 0);
	}

	T_CASE("file_write_unwritable_dir_fails_and_keeps_the_old_file") {
		/* root ignores directory permissions, so the write is tried by an unprivileged child;
		 * the directory sits in /tmp because LMTK_TMP is private to root */
		char dir[] = "/tmp/lmtk-lib_file.XXXXXX", path[64];
		struct passwd *nobody = getpwnam("nobody");
		int fds[2], st2 = 0;
		T_ASSERT(mkdtemp(dir) != NULL);
		snprintf(path, sizeof path, "%s/keep.txt", dir);
		T_ASSERT(file_write_atomic(path, "old content\n", 12, 0644, err, sizeof err) == 0);
		T_ASSERT(chmod(dir, 0555) == 0);
		T_ASSERT(pipe(fds) == 0);
		pid_t pid = fork();
		if (pid == 0) {
			char e[8192] = "";
			if (geteuid() == 0 && (!nobody || setgid(nobody->pw_gid) || setuid(nobody->pw_uid)))
				_exit(50);
			int rc = file_write_atomic(path, "new!", 4, 0644, e, sizeof e);
			if (write(fds[1], e, strlen(e)) < 0)
				_exit(51);
			_exit(rc == -1 ? 0 : 1);
		}
		close(fds[1]);
		ssize_t n = read(fds[0], err, sizeof err - 1);
		err[n > 0 ? n : 0] = '\0';
		close(fds[0]);
		waitpid(pid, &st2, 0);
		T_ASSERT(WIFEXITED(st2) && WEXITSTATUS(st2) == 0);
		T_ASSERT(strstr(err, path) != NULL);
		T_ASSERT(strstr(err, "Permission denied") != NULL);
		T_ASSERT(same_file(path, "old content\n", 12));
		T_ASSERT(entries(dir, NULL, 0) == 1);
		rm_tree(dir);
	}

	T_CASE("file_write_failed_rename_removes_its_temp_file") {
		/* the destination is a non-empty directory: everything works until rename() */
		T_ASSERT(mkdir(at("fr"), 0755) == 0 && mkdir(at("fr/dest"), 0755) == 0);
		T_ASSERT(mkdir(at("fr/dest/sub"), 0755) == 0);
		T_ASSERT(file_write_atomic(at("fr/dest"), "x", 1, 0644, err, sizeof err) == -1);
		T_ASSERT(strstr(err, at("fr/dest")) != NULL);
		T_ASSERT(entries(at("fr"), name, sizeof name) == 1);
		T_STREQ(name, "dest");
	}

	T_CASE("file_read_missing_file_fails_with_path_and_errno") {
		const char *p = at("absent");
		data = NULL;
		errno = 0;
		T_ASSERT(file_read_all(p, &data, &len, err, sizeof err) == -1);
		T_ASSERT(errno == ENOENT);
		T_ASSERT(strstr(err, p) != NULL);
		T_ASSERT(strstr(err, "No such file or directory") != NULL);
		data = NULL;
	}

	T_CASE("file_read_directory_fails") {
		errno = 0;
		T_ASSERT(file_read_all(top, &data, &len, err, sizeof err) == -1);
		T_ASSERT(errno == EISDIR);
		T_ASSERT(strstr(err, top) != NULL);
		data = NULL;
	}

	T_CASE("file_write_killed_mid_write_leaves_old_or_new_never_torn") {
		/* A child rewrites the file forever, alternating two 2 MiB payloads; it is SIGKILLed
		 * at varying moments and the destination must always be one whole payload. */
		enum { N = 2 * 1024 * 1024, ROUNDS = 25 };
		const char *p = at("crash/target");
		char *pa = payload('A', N), *pb = payload('B', N);
		int torn = 0, checked = 0, a_seen = 0, b_seen = 0;
		T_ASSERT(mkdir(at("crash"), 0755) == 0);
		T_ASSERT(file_write_atomic(p, pa, N, 0644, err, sizeof err) == 0);
		for (int round = 0; round < ROUNDS; round++) {
			fflush(stdout);
			pid_t pid = fork();
			if (pid == 0) {
				char e[512];
				for (unsigned i = 0;; i++)
					if (file_write_atomic(p, i % 2 ? pa : pb, N, 0644, e, sizeof e) < 0)
						_exit(1);
			}
			struct timespec ts = {0, (long)(1 + round * 7 % 40) * 1000000L};  /* 1..40 ms */
			nanosleep(&ts, NULL);
			kill(pid, SIGKILL);
			int st3;
			waitpid(pid, &st3, 0);
			T_ASSERT(WIFSIGNALED(st3));  /* it was still writing, not failed */
			checked++;
			if (same_file(p, pa, N))
				a_seen++;
			else if (same_file(p, pb, N))
				b_seen++;
			else
				torn++;
		}
		T_ASSERT(checked == ROUNDS);
		T_ASSERT(torn == 0);
		T_ASSERT(a_seen + b_seen == ROUNDS);
		if (torn || !(a_seen && b_seen))
			printf("# crash test: %d A, %d B, %d torn\n", a_seen, b_seen, torn);
		free(pa);
		free(pb);
	}

	rm_tree(top);
	T_DONE();
}
