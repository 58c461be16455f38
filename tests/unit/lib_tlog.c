/* lib_tlog.c - report lines: "[YYYY-mm-dd HH:MM:SS] text" to stdout and appended to the log. */
#include "t.h"
#include "tlog.h"
#include "file.h"

#include <fcntl.h>
#include <stdlib.h>
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

/* stdout goes to a file between these two; what was printed comes back malloc'd */
static int saved_out = -1;
static void out_begin(void)
{
	fflush(stdout);
	int fd = open(at("stdout"), O_RDWR | O_CREAT | O_TRUNC, 0600);
	saved_out = dup(1);
	dup2(fd, 1);
	close(fd);
}
static char *out_end(void)
{
	char *s = NULL, err[512];
	fflush(stdout);
	dup2(saved_out, 1);
	close(saved_out);
	if (file_read_all(at("stdout"), &s, NULL, err, sizeof err) < 0)
		s = strdup("");
	return s;
}

static char *slurp(const char *path)
{
	char *s = NULL, err[512];
	if (file_read_all(path, &s, NULL, err, sizeof err) < 0)
		return strdup("<unreadable>");
	return s;
}

/* "[YYYY-mm-dd HH:MM:SS] " at p, read as local time, within [lo, hi] */
static int stamp_ok(const char *p, time_t lo, time_t hi)
{
	struct tm tm = {0};
	const char *end;
	if (p[0] != '[' || strlen(p) < 22 || p[20] != ']' || p[21] != ' ')
		return 0;
	for (int i = 1; i < 20; i++)
		if (!strchr(i == 5 || i == 8 ? "-" : i == 11 ? " " : i == 14 || i == 17 ? ":" : "0123456789",
			    p[i]))
			return 0;
	end = strptime(p + 1, "%Y-%m-%d %H:%M:%S", &tm);
	if (!end || *end != ']')
		return 0;
	tm.tm_isdst = -1;
	time_t t = mktime(&tm);
	return t >= lo && t <= hi;
}

int main(void)
{
	const char *tmp = getenv("LMTK_TMP");
	char err[1024];
	char *out, *log;
	time_t lo, hi;

	snprintf(top, sizeof top, "%s/lib_tlog.XXXXXX", tmp ? tmp : "/tmp");
	if (!mkdtemp(top)) {
		perror(top);
		return 2;
	}

	T_CASE("tlog_line_goes_to_stdout_and_log_with_current_stamp") {
		lo = time(NULL);
		T_ASSERT(tlog_open(at("a.log"), err, sizeof err) == 0);
		out_begin();
		int rc1 = tlog_line("disk %s at %d%%", "/work", 95);
		int rc2 = tlog_line("second");
		out = out_end();
		tlog_close();
		hi = time(NULL);
		log = slurp(at("a.log"));
		T_ASSERT(rc1 == 0 && rc2 == 0);
		T_STREQ(out, log);
		T_ASSERT(strlen(log) == 22 + 18 + 22 + 7);
		T_ASSERT(stamp_ok(log, lo, hi));
		T_ASSERT(strncmp(log + 22, "disk /work at 95%\n", 18) == 0);
		T_ASSERT(stamp_ok(log + 40, lo, hi));
		T_STREQ(log + 62, "second\n");
		free(out);
		free(log);
	}

	T_CASE("tlog_appending_preserves_existing_content") {
		char p[4300];
		snprintf(p, sizeof p, "%s", at("b.log"));  /* out_begin() reuses at()'s buffers */
		T_ASSERT(file_write_atomic(p, "training step 1\nno newline at end", 33, 0644, err, sizeof err) == 0);
		T_ASSERT(tlog_open(p, err, sizeof err) == 0);
		out_begin();
		tlog_line("first run");
		out = out_end();
		tlog_close();
		T_ASSERT(tlog_open(p, err, sizeof err) == 0);
		out_begin();
		tlog_line("second run");
		free(out_end());
		tlog_close();
		log = slurp(p);
		T_ASSERT(strncmp(log, "training step 1\nno newline at end[", 34) == 0);
		T_ASSERT(strstr(log, "] first run\n[") != NULL);
		T_ASSERT(strlen(log) == 33 + 22 + 10 + 22 + 11);
		T_ASSERT(strcmp(log + strlen(log) - 13, "] second run\n") == 0);
		free(out);
		free(log);
	}

	T_CASE("tlog_raw_writes_text_verbatim_to_both") {
		T_ASSERT(tlog_open(at("c.log"), err, sizeof err) == 0);
		out_begin();
		int rc = tlog_raw("  as is, no stamp\n");
		out = out_end();
		tlog_close();
		log = slurp(at("c.log"));
		T_ASSERT(rc == 0);
		T_STREQ(out, "  as is, no stamp\n");
		T_STREQ(log, "  as is, no stamp\n");
		free(out);
		free(log);
	}

	T_CASE("tlog_without_a_log_writes_stdout_only") {
		lo = time(NULL);
		T_ASSERT(tlog_open(NULL, err, sizeof err) == 0);
		out_begin();
		int rc = tlog_line("only here");
		out = out_end();
		tlog_close();
		hi = time(NULL);
		T_ASSERT(rc == 0);
		T_ASSERT(stamp_ok(out, lo, hi));
		T_STREQ(out + 21, " only here\n");
		free(out);
	}

	T_CASE("tlog_lines_after_close_no_longer_reach_the_log") {
		T_ASSERT(tlog_open(at("d.log"), err, sizeof err) == 0);
		out_begin();
		tlog_raw("kept\n");
		tlog_close();
		tlog_raw("stdout only\n");
		out = out_end();
		log = slurp(at("d.log"));
		T_STREQ(log, "kept\n");
		T_STREQ(out, "kept\nstdout only\n");
		free(out);
		free(log);
	}

	T_CASE("tlog_open_in_missing_dir_fails_naming_the_path") {
		const char *p = at("missing/x.log");
		T_ASSERT(tlog_open(p, err, sizeof err) == -1);
		T_ASSERT(strstr(err, p) != NULL);
		T_ASSERT(strstr(err, "No such file or directory") != NULL);
	}

	T_CASE("tlog_concurrent_writers_never_interleave_mid_line") {
		/* 4 processes x 300 lines of ~3 KiB: stdio-sized chunks would tear; one write() won't */
		enum { PROCS = 4, LINES = 300, WIDTH = 3000 };
		char p[4300];
		snprintf(p, sizeof p, "%s", at("shared.log"));
		for (int k = 0; k < PROCS; k++) {
			fflush(stdout);
			if (fork() == 0) {
				static char body[WIDTH + 1];
				int nul = open("/dev/null", O_WRONLY);
				dup2(nul, 1);
				memset(body, 'a' + k, WIDTH);
				if (tlog_open(p, err, sizeof err) < 0)
					_exit(1);
				for (int i = 0; i < LINES; i++)
					tlog_line("%c%s", 'a' + k, body);
				_exit(0);
			}
		}
		int all_ok = 1, st;
		for (int k = 0; k < PROCS; k++) {
			wait(&st);
			all_ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
		}
		T_ASSERT(all_ok);
		log = slurp(p);
		int lines = 0, bad = 0;
		for (char *l = log, *nl; *l; l = nl + 1) {
			nl = strchr(l, '\n');
			if (!nl)
				break;
			lines++;
			/* "[stamp] " then WIDTH + 1 copies of one letter */
			if (nl - l != 22 + WIDTH + 1 || l[0] != '[' || l[20] != ']')
				bad++;
			else
				for (int i = 23; i < 22 + WIDTH + 1; i++)
					if (l[i] != l[22]) {
						bad++;
						break;
					}
		}
		T_ASSERT(lines == PROCS * LINES);
		T_ASSERT(bad == 0);
		T_ASSERT(strlen(log) == (size_t)PROCS * LINES * (22 + WIDTH + 2));
		free(log);
	}

	char cmd[8300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", top);
	T_DONE();
}
