/* lib_run.c - run_capture: separate stdout/stderr, exit codes, signals, timeouts, no shell, and no
 * deadlock on a chatty child. */
#include "t.h"
#include "run.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

#define ARGV(...) ((char *const[]){__VA_ARGS__, NULL})

/* every byte of buf is the repeating pattern `pat` */
static int is_pattern(const char *buf, size_t len, const char *pat)
{
	size_t pl = strlen(pat);
	for (size_t i = 0; i < len; i++)
		if (buf[i] != pat[i % pl])
			return 0;
	return 1;
}

/* process state letter from /proc/PID/stat, or 0 if it is gone */
static char proc_state(pid_t pid)
{
	char path[64], buf[512], *p;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

int main(void)
{
	struct run_result r;
	char err[1024];
	double t0;

	T_CASE("run_captures_stdout_and_stderr_separately_with_exit_code") {
		T_ASSERT(run_capture(ARGV("sh", "-c", "printf 'to out\\n'; printf 'to err' >&2; printf more; exit 3"),
				     10, &r, err, sizeof err) == 0);
		T_STREQ(r.out, "to out\nmore");
		T_ASSERT(r.out_len == 11);
		T_STREQ(r.err, "to err");
		T_ASSERT(r.err_len == 6);
		T_ASSERT(r.status == 3);
		T_ASSERT(r.timed_out == 0);
		run_free(&r);
		T_ASSERT(r.out == NULL && r.err == NULL);
	}

	T_CASE("run_silent_success_gives_empty_strings_and_status_0") {
		T_ASSERT(run_capture(ARGV("true"), 0, &r, err, sizeof err) == 0);
		T_ASSERT(r.status == 0);
		T_ASSERT(r.out && r.out[0] == '\0' && r.out_len == 0);
		T_ASSERT(r.err && r.err[0] == '\0' && r.err_len == 0);
		run_free(&r);
	}

	T_CASE("run_binary_output_kept_with_length") {
		T_ASSERT(run_capture(ARGV("printf", "a\\000b\\000"), 10, &r, err, sizeof err) == 0);
		T_ASSERT(r.out_len == 4);
		T_ASSERT(memcmp(r.out, "a\0b\0", 5) == 0);
		run_free(&r);
	}

	T_CASE("run_killed_child_reports_128_plus_signal") {
		T_ASSERT(run_capture(ARGV("sh", "-c", "kill -TERM $$"), 10, &r, err, sizeof err) == 0);
		T_ASSERT(r.status == 128 + 15);
		T_ASSERT(r.timed_out == 0);
		run_free(&r);
		T_ASSERT(run_capture(ARGV("sh", "-c", "echo partial; kill -KILL $$"), 10, &r, err, sizeof err) == 0);
		T_ASSERT(r.status == 128 + 9);
		T_STREQ(r.out, "partial\n");
		run_free(&r);
	}

	T_CASE("run_timeout_kills_a_hung_child_near_the_limit") {
		t0 = now_s();
		T_ASSERT(run_capture(ARGV("sleep", "30"), 1, &r, err, sizeof err) == 0);
		double took = now_s() - t0;
		T_ASSERT(r.timed_out == 1);
		T_ASSERT(r.status == 128 + 9);
		T_ASSERT(took >= 0.9 && took < 3.0);
		run_free(&r);
	}

	T_CASE("run_timeout_keeps_what_was_printed_before") {
		T_ASSERT(run_capture(ARGV("sh", "-c", "echo started; echo warn >&2; exec sleep 30"), 1, &r, err,
				     sizeof err) == 0);
		T_ASSERT(r.timed_out == 1);
		T_STREQ(r.out, "started\n");
		T_STREQ(r.err, "warn\n");
		run_free(&r);
	}

	T_CASE("run_timeout_kills_the_whole_process_group") {
		/* the shell's background sleep holds the pipes too; it must die with the shell */
		t0 = now_s();
		T_ASSERT(run_capture(ARGV("sh", "-c", "sleep 30 & echo $!; wait"), 1, &r, err, sizeof err) == 0);
		T_ASSERT(now_s() - t0 < 3.0);
		T_ASSERT(r.timed_out == 1);
		pid_t bg = (pid_t)atoi(r.out);
		T_ASSERT(bg > 1);
		for (int i = 0; i < 50 && bg > 1 && proc_state(bg) != 0 && proc_state(bg) != 'Z'; i++)
			usleep(20000);
		T_ASSERT(bg > 1 && (proc_state(bg) == 0 || proc_state(bg) == 'Z'));
		run_free(&r);
	}

	T_CASE("run_timeout_holds_even_after_the_child_closes_its_pipes") {
		t0 = now_s();
		T_ASSERT(run_capture(ARGV("sh", "-c", "exec >/dev/null 2>&1; exec sleep 30"), 1, &r, err,
				     sizeof err) == 0);
		T_ASSERT(now_s() - t0 < 3.0);
		T_ASSERT(r.timed_out == 1);
		T_ASSERT(r.status == 128 + 9);
		run_free(&r);
	}

	T_CASE("run_fast_child_is_not_marked_timed_out") {
		t0 = now_s();
		T_ASSERT(run_capture(ARGV("sh", "-c", "exec >/dev/null; sleep 0.2; exit 4"), 5, &r, err,
				     sizeof err) == 0);
		T_ASSERT(r.timed_out == 0);
		T_ASSERT(r.status == 4);
		T_ASSERT(now_s() - t0 < 2.0);
		run_free(&r);
	}

	T_CASE("run_missing_program_returns_minus_1_with_enoent") {
		err[0] = '\0';
		T_ASSERT(run_capture(ARGV("lmtk-no-such-program-x"), 5, &r, err, sizeof err) == -1);
		T_STREQ(err, "lmtk-no-such-program-x: No such file or directory");
		T_ASSERT(r.status == -1);
	}

	T_CASE("run_non_executable_file_reports_why") {
		char path[4200];
		const char *tmp = getenv("LMTK_TMP");
		snprintf(path, sizeof path, "%s/lib_run.%d.noexec", tmp ? tmp : "/tmp", (int)getpid());
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		T_ASSERT(fd >= 0 && write(fd, "#!/bin/sh\necho hi\n", 18) == 18);
		close(fd);
		T_ASSERT(run_capture(ARGV(path), 5, &r, err, sizeof err) == -1);
		T_ASSERT(strncmp(err, path, strlen(path)) == 0);
		T_ASSERT(strstr(err, "Permission denied") != NULL);
		unlink(path);
	}

	T_CASE("run_arguments_are_passed_verbatim_without_a_shell") {
		static const char want[] = "a; rm -rf /tmp/x\n$(id)\n`id`\n\"q\" 'q'\nsp  ace\n*\n$HOME\n\n";
		T_ASSERT(run_capture(ARGV("printf", "%s\\n", "a; rm -rf /tmp/x", "$(id)", "`id`", "\"q\" 'q'",
					  "sp  ace", "*", "$HOME", ""),
				     10, &r, err, sizeof err) == 0);
		T_STREQ(r.out, want);
		T_ASSERT(r.status == 0);
		run_free(&r);
	}

	T_CASE("run_child_stdin_is_empty_not_ours") {
		/* cat would hang on an inherited terminal or pipe; /dev/null ends it at once */
		t0 = now_s();
		T_ASSERT(run_capture(ARGV("cat"), 5, &r, err, sizeof err) == 0);
		T_ASSERT(r.timed_out == 0 && r.status == 0 && r.out_len == 0);
		T_ASSERT(now_s() - t0 < 2.0);
		run_free(&r);
	}

	T_CASE("run_child_inherits_no_stray_descriptors") {
		/* beyond 0-2 the child may hold only what we hold without close-on-exec ourselves
		 * (whatever the harness handed us), same number and target; never run_capture's
		 * pipes or its /dev/null */
		char inherited[8192] = "\n", *line, *save = NULL;
		DIR *d = opendir("/proc/self/fd");
		struct dirent *e;
		while (d && (e = readdir(d))) {
			int fd = atoi(e->d_name);
			char link[300], target[4096];
			if (fd <= 2 || fd == dirfd(d) || (fcntl(fd, F_GETFD) & FD_CLOEXEC))
				continue;
			snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
			ssize_t n = readlink(link, target, sizeof target - 1);
			if (n > 0 && strlen(inherited) + (size_t)n + 16 < sizeof inherited) {
				target[n] = '\0';
				snprintf(inherited + strlen(inherited), sizeof inherited - strlen(inherited),
					 "%d %s\n", fd, target);
			}
		}
		if (d)
			closedir(d);
		/* find lists the shell's descriptors from outside, so it adds none of its own */
		T_ASSERT(run_capture(ARGV("sh", "-c", "find /proc/$$/fd -mindepth 1 -printf '%f %l\\n'; true"),
				     10, &r, err, sizeof err) == 0);
		T_ASSERT(r.status == 0 && r.out_len > 0);
		for (line = strtok_r(r.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			char want[4200];
			if (atoi(line) <= 2)
				continue;
			snprintf(want, sizeof want, "\n%s\n", line);
			if (!strstr(inherited, want))
				printf("# the child holds %s, which we did not give it\n", line);
			T_ASSERT(strstr(inherited, want) != NULL);
		}
		run_free(&r);
	}

	T_CASE("run_large_output_on_both_pipes_does_not_deadlock") {
		/* 3 MB to stderr first, then to stdout: far past a 64 KiB pipe buffer on both */
		t0 = now_s();
		T_ASSERT(run_capture(ARGV("sh", "-c", "yes 0123456 | head -c 3000000 >&2;"
					  " yes abcdefg | head -c 3000000; yes 0123456 | head -c 8 >&2"),
				     60, &r, err, sizeof err) == 0);
		T_ASSERT(r.timed_out == 0);
		T_ASSERT(r.status == 0);
		T_ASSERT(r.out_len == 3000000);
		T_ASSERT(r.err_len == 3000008);
		T_ASSERT(is_pattern(r.out, r.out_len, "abcdefg\n"));
		T_ASSERT(is_pattern(r.err, 3000000, "0123456\n"));
		T_ASSERT(r.out[r.out_len] == '\0' && r.err[r.err_len] == '\0');
		T_ASSERT(now_s() - t0 < 30.0);
		run_free(&r);
	}

	T_DONE();
}
