/* lib_xalloc.c - a failed allocation names what it was for and how much, and the dying
 * allocators end the program with exit 3 (EXIT_FAILED). */
#include "t.h"
#include "msg.h"
#include "xalloc.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
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
		msg_init("train");
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

/* SIZE_MAX/2 bytes is more than any address space holds: malloc says no at once */
static void do_malloc(void) { xmalloc(SIZE_MAX / 2, "the token index"); }
static void do_calloc(void) { xcalloc(SIZE_MAX / 16, 4, "the merge table"); }
static void do_calloc_overflow(void) { xcalloc(SIZE_MAX / 2, 3, "the attention scratch"); }
static void do_realloc(void)
{
	void *p = xmalloc(16, "a small start");
	xrealloc(p, SIZE_MAX / 2, "the grown id list");
}
static void do_strdup(void)
{
	/* a 64 MiB address-space limit so a 128 MiB string cannot be copied */
	size_t n = (size_t)128 << 20;
	char *s = malloc(n);
	if (!s)
		_exit(43);
	memset(s, 'a', n - 1);
	s[n - 1] = '\0';
	struct rlimit rl = {(rlim_t)256 << 20, (rlim_t)256 << 20};
	struct rlimit cur;
	getrlimit(RLIMIT_AS, &cur);
	if (cur.rlim_max != RLIM_INFINITY && cur.rlim_max < rl.rlim_max)
		rl.rlim_max = cur.rlim_max;
	setrlimit(RLIMIT_AS, &rl);
	/* use the rest of the limit so the copy cannot fit */
	while (malloc((size_t)8 << 20))
		;
	xstrdup(s, "the run's name");
}
static void do_ok(void)
{
	char *p = xmalloc(0, "nothing");
	char *q = xcalloc(0, 8, "nothing");
	char *s = xstrdup("abc", "a copy");
	p = xrealloc(p, 100, "a grown buffer");
	if (p && q && strcmp(s, "abc") == 0)
		_exit(0);
	_exit(1);
}

int main(void)
{
	const char *tmp = getenv("LMTK_TMP");
	char text[4096], err[256];
	int st;

	snprintf(errpath, sizeof errpath, "%s/lib_xalloc.%d.err", tmp ? tmp : "/tmp", (int)getpid());

	T_CASE("xmalloc_failure_names_what_and_size_and_exits_3") {
		st = in_child(do_malloc, text, sizeof text);
		T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 3);
		T_STREQ(text, "train: out of memory for the token index: 8.00 EiB\n");
	}

	T_CASE("xcalloc_failure_names_what_and_size") {
		st = in_child(do_calloc, text, sizeof text);
		T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 3);
		T_STREQ(text, "train: out of memory for the merge table: 4.00 EiB\n");
	}

	T_CASE("xcalloc_count_times_size_overflow_is_caught") {
		st = in_child(do_calloc_overflow, text, sizeof text);
		T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 3);
		T_ASSERT(strncmp(text, "train: out of memory for the attention scratch: more than ", 58) == 0);
		size_t n;
		T_ASSERT(xalloc_mul(SIZE_MAX / 2, 3, &n) == -1 && n == SIZE_MAX);
		T_ASSERT(xalloc_mul(1 << 20, 1 << 10, &n) == 0 && n == (size_t)1 << 30);
		T_ASSERT(xalloc_mul(0, SIZE_MAX, &n) == 0 && n == 0);
	}

	T_CASE("xrealloc_failure_names_what_and_size") {
		st = in_child(do_realloc, text, sizeof text);
		T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 3);
		T_STREQ(text, "train: out of memory for the grown id list: 8.00 EiB\n");
	}

	T_CASE("xstrdup_failure_names_what_and_size") {
		st = in_child(do_strdup, text, sizeof text);
		T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 3);
		T_STREQ(text, "train: out of memory for the run's name: 128.00 MiB\n");
	}

	T_CASE("xalloc_success_returns_usable_memory") {
		st = in_child(do_ok, text, sizeof text);
		T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		T_STREQ(text, "");
	}

	T_CASE("xalloc_err_fills_err_and_returns_minus_1") {
		T_ASSERT(xalloc_err(err, sizeof err, "the tokenizer's merge table", (size_t)3 << 29) == -1);
		T_STREQ(err, "out of memory for the tokenizer's merge table: 1.50 GiB");
		T_ASSERT(xalloc_err(err, sizeof err, "the vocabulary's strings", 0) == -1);
		T_STREQ(err, "out of memory for the vocabulary's strings");
		T_ASSERT(xalloc_err_in(err, sizeof err, "model.pt", "data.pkl", 512) == -1);
		T_STREQ(err, "model.pt: out of memory for data.pkl: 512 B");
		T_ASSERT(xalloc_err(NULL, 0, "x", 1) == -1);
		char small[12];
		T_ASSERT(xalloc_err(small, sizeof small, "the token index", 1 << 20) == -1);
		T_STREQ(small, "out of memo");
	}

	unlink(errpath);
	T_DONE();
}
