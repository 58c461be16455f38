/* lib_msg.c - the shared message style: "prog: text" on stderr, die() exit codes, errf(). */
#include "t.h"
#include "msg.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static char errpath[4096];

/* Runs fn in a child with stderr in a file; returns the wait status, *text what it printed. */
static int in_child(void (*fn)(void), char *text, size_t len)
{
	int st;
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, 2);
		fn();
		_exit(42);
	}
	waitpid(pid, &st, 0);
	FILE *f = fopen(errpath, "r");
	size_t n = f ? fread(text, 1, len - 1, f) : 0;
	text[n] = '\0';
	if (f)
		fclose(f);
	return st;
}

static void do_warn(void)
{
	msg_init("/opt/lmtk/bin/slurm-pulse");
	warn("%s: %d jobs", "squeue", 3);
	warn("second");
}

static void do_die(void)
{
	msg_init("fs-watchdog");
	die(EXIT_FAILED, "cannot read %s", "/work");
}

static void do_long(void)
{
	static char big[6000];
	memset(big, 'x', sizeof big - 1);
	msg_init("p");
	warn("%s", big);
}

int main(void)
{
	const char *tmp = getenv("LMTK_TMP");
	char text[16384];
	int st;

	snprintf(errpath, sizeof errpath, "%s/lib_msg.%d.err", tmp ? tmp : "/tmp", (int)getpid());

	T_CASE("msg_init_takes_the_basename_of_argv0") {
		msg_init("/usr/local/bin/fs-watchdog");
		T_STREQ(prog_name, "fs-watchdog");
		msg_init("slurm-pulse");
		T_STREQ(prog_name, "slurm-pulse");
		msg_init(NULL);
		T_STREQ(prog_name, "lmtk");
	}

	T_CASE("msg_warn_prefixes_program_name_one_line_each") {
		st = in_child(do_warn, text, sizeof text);
		T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 42);
		T_STREQ(text, "slurm-pulse: squeue: 3 jobs\nslurm-pulse: second\n");
	}

	T_CASE("msg_die_prints_and_exits_with_the_given_code") {
		st = in_child(do_die, text, sizeof text);
		T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 3);
		T_STREQ(text, "fs-watchdog: cannot read /work\n");
	}

	T_CASE("msg_overlong_message_is_cut_but_stays_one_line") {
		st = in_child(do_long, text, sizeof text);
		T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 42);
		T_ASSERT(strncmp(text, "p: xxx", 6) == 0);
		T_ASSERT(strchr(text, '\n') == text + strlen(text) - 1);
		T_ASSERT(strlen(text) < 6000);
	}

	T_CASE("msg_errf_returns_minus_1_and_truncates_safely") {
		char small[8];
		memset(small, '#', sizeof small);
		T_ASSERT(errf(small, sizeof small, "%s:%d", "abcdefgh", 12) == -1);
		T_STREQ(small, "abcdefg");
		T_ASSERT(errf(NULL, 0, "ignored %d", 1) == -1);
		T_ASSERT(errf(small, 0, "x") == -1);
		T_STREQ(small, "abcdefg");
	}

	unlink(errpath);
	T_DONE();
}
