/* lib_progress.c - the progress line's arithmetic and text (rate = done / elapsed, ETA = what is
 * left / rate, to the nearest second; binary units), worked out by hand; and the line itself, forced on
 * into a pipe (LMTK_PROGRESS=1 and progress_force), off by default there, at most one redraw per
 * PROGRESS_INTERVAL, and ending on the job's final state (its 100%) when forced. */
#include "t.h"
#include "msg.h"
#include "progress.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

static struct progress at(const char *what, const char *unit, uint64_t done, uint64_t total)
{
	struct progress p;
	memset(&p, 0, sizeof p);
	p.what = what;
	p.unit = unit;
	p.done = done;
	p.total = total;
	return p;
}

/* what progress writes to stderr while fn runs, stderr being a pipe */
static char got[4096];
static void capture(void (*fn)(void))
{
	int fd[2], saved = dup(2);
	ssize_t n;
	if (pipe(fd) < 0)
		abort();
	fflush(stderr);
	dup2(fd[1], 2);
	close(fd[1]);
	fn();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = read(fd[0], got, sizeof got - 1);
	got[n > 0 ? n : 0] = 0;
	close(fd[0]);
}

static void three_updates(void)
{
	struct progress p;
	progress_begin(&p, "reading", NULL, 4u << 20);
	progress_update(&p, 1u << 20);          /* not due yet: nothing */
	p.start -= 2;                           /* as if begun 2 s ago, and due */
	p.next = 0;
	progress_update(&p, 1u << 20);          /* 1 MiB in 2 s: 512 KiB/s, 3 MiB left: 6 s */
	progress_update(&p, 1u << 20);          /* due again only PROGRESS_INTERVAL later */
	progress_end(&p);                       /* the last line showed 1 MiB: no other */
}

static void ends_at_the_total(void)
{
	struct progress p;
	progress_begin(&p, "reading", NULL, 4u << 20);
	p.start -= 200;                         /* as if begun 200 s ago, and due */
	p.next = 0;
	progress_update(&p, 1u << 20);          /* 1 MiB in 200 s: 5.12 KiB/s, 3 MiB left: 600 s */
	progress_update(&p, 4u << 20);          /* not due: the end draws it */
	progress_end(&p);
}

static void stalled(void)
{
	struct progress p;
	progress_begin(&p, "LFS uploads: sent", NULL, 0);
	p.start -= 2;
	p.next = 0;
	progress_update(&p, 1u << 20);          /* 1 MiB in 2 s */
	p.next = 0;
	progress_update(&p, 1u << 20);          /* due, no news: no line into a file */
	p.next = 0;
	progress_update(&p, 1u << 20);
	progress_end(&p);                       /* the last line said it all */
}

static void total_settles(void)
{
	struct progress p;
	progress_begin(&p, "LFS uploads: sent", NULL, 3u << 20);
	p.start -= 2;
	p.next = 0;
	progress_update(&p, 1u << 20);          /* 1 MiB of 3 MiB in 2 s */
	p.total = 1u << 20;                     /* what was left was not sent after all */
	progress_end(&p);                       /* the same done, a new total: a last line */
}

static void short_job(void)
{
	struct progress p;
	progress_begin(&p, "merging", NULL, 1000);
	progress_update(&p, 1000);              /* never due */
	progress_end(&p);
}

static void nothing_done(void)
{
	struct progress p;
	progress_begin(&p, "LFS uploads: sent", NULL, 0);
	progress_update(&p, 0);
	progress_end(&p);
}

int main(void)
{
	char b[512];
	struct progress p;

	msg_init("lib_progress");
	T_CASE("bytes_rate_and_eta_in_binary_units") {
		p = at("reading", NULL, 3ull << 30, 12ull << 30);
		/* 3 GiB in 10 s: 307.2 MiB/s; 9 GiB left at that rate: 30 s */
		T_STREQ(progress_format(&p, 10, b, sizeof b),
			"reading 3.00 GiB of 12.00 GiB (25%), 307.20 MiB/s, ETA 0:00:30");
	}
	T_CASE("eta_rounds_to_the_second_and_shows_hours_and_days") {
		p = at("x", NULL, 1000, 3051);          /* 100 B/s, 2051 B left: 20.51 s -> 21 */
		T_STREQ(progress_format(&p, 10, b, sizeof b), "x 1000 B of 2.98 KiB (32%), 100 B/s, ETA 0:00:21");
		p = at("x", NULL, 1000, 3049);          /* 20.49 s -> 20 */
		T_ASSERT(strstr(progress_format(&p, 10, b, sizeof b), "ETA 0:00:20") != NULL);
		p = at("x", NULL, 1, 360001);           /* 1 B/s: 360000 s = 4 days, 4:00:00 */
		T_STREQ(progress_format(&p, 1, b, sizeof b), "x 1 B of 351.56 KiB (0%), 1 B/s, ETA 4 days, 4:00:00");
	}
	T_CASE("counts_use_the_noun") {
		p = at(NULL, "documents", 120, 1000);   /* 120 in 4 s: 30/s; 880 left: 29.33 s -> 29 */
		T_STREQ(progress_format(&p, 4, b, sizeof b),
			"120 of 1000 documents (12%), 30 documents/s, ETA 0:00:29");
	}
	T_CASE("no_total_no_percentage_no_eta") {
		p = at("LFS uploads: sent", NULL, 5ull << 20, 0);
		T_STREQ(progress_format(&p, 2, b, sizeof b), "LFS uploads: sent 5.00 MiB, 2.50 MiB/s");
	}
	T_CASE("no_time_yet_no_rate_no_eta") {
		p = at("reading", NULL, 0, 1024);
		T_STREQ(progress_format(&p, 0, b, sizeof b), "reading 0 B of 1.00 KiB (0%), 0 B/s");
	}
	T_CASE("done_is_100_percent_eta_zero") {
		p = at("reading", NULL, 1024, 1024);
		T_STREQ(progress_format(&p, 1, b, sizeof b), "reading 1.00 KiB of 1.00 KiB (100%), 1.00 KiB/s, ETA 0:00:00");
		p = at("reading", NULL, 1023, 1024);   /* floor: not 100% before the end */
		T_ASSERT(strstr(progress_format(&p, 1, b, sizeof b), "(99%)") != NULL);
	}
	T_CASE("extra_text_follows") {
		p = at("reading", NULL, 2048, 0);
		progress_extra(&p, "%d documents", 7);
		T_STREQ(progress_format(&p, 2, b, sizeof b), "reading 2.00 KiB, 1.00 KiB/s, 7 documents");
		progress_extra(&p, NULL);
		T_STREQ(progress_format(&p, 2, b, sizeof b), "reading 2.00 KiB, 1.00 KiB/s");
	}
	T_CASE("a_pipe_gets_nothing_by_default") {
		unsetenv("LMTK_PROGRESS");
		progress_force(-1);
		capture(three_updates);
		T_STREQ(got, "");
	}
	T_CASE("forced_on_a_pipe_gets_whole_lines_at_most_once_per_interval") {
		setenv("LMTK_PROGRESS", "1", 1);
		capture(three_updates);
		T_STREQ(got, "lib_progress: reading 1.00 MiB of 4.00 MiB (25%), 512.00 KiB/s, ETA 0:00:06\n");
		unsetenv("LMTK_PROGRESS");
		progress_force(1);
		capture(three_updates);
		T_STREQ(got, "lib_progress: reading 1.00 MiB of 4.00 MiB (25%), 512.00 KiB/s, ETA 0:00:06\n");
		progress_force(-1);
	}
	T_CASE("forced_line_ends_on_the_final_state_once") {
		progress_force(-1);
		setenv("LMTK_PROGRESS", "1", 1);
		capture(ends_at_the_total);
		T_STREQ(got, "lib_progress: reading 1.00 MiB of 4.00 MiB (25%), 5.12 KiB/s, ETA 0:10:00\n"
			"lib_progress: reading 4.00 MiB of 4.00 MiB (100%), 20.48 KiB/s, ETA 0:00:00\n");
		capture(short_job);   /* shorter than an interval: the final line alone */
		T_ASSERT(strncmp(got, "lib_progress: merging 1000 B of 1000 B (100%), ", 47) == 0);
		T_ASSERT(strstr(got, "/s, ETA 0:00:00\n") != NULL);
		T_ASSERT(strchr(got, '\n') == got + strlen(got) - 1);
		capture(nothing_done);   /* nothing to show: no line */
		T_STREQ(got, "");
		unsetenv("LMTK_PROGRESS");
		capture(ends_at_the_total);   /* not forced: nothing, end included */
		T_STREQ(got, "");
	}
	T_CASE("forced_into_a_file_no_line_without_news") {
		setenv("LMTK_PROGRESS", "1", 1);
		capture(stalled);
		T_STREQ(got, "lib_progress: LFS uploads: sent 1.00 MiB, 512.00 KiB/s\n");
		capture(total_settles);   /* a total that changed is news */
		T_ASSERT(strncmp(got, "lib_progress: LFS uploads: sent 1.00 MiB of 3.00 MiB (33%), 512.00 KiB/s, "
				 "ETA 0:00:04\nlib_progress: LFS uploads: sent 1.00 MiB of 1.00 MiB (100%), ", 147) == 0);
		T_ASSERT(strstr(got, "/s, ETA 0:00:00\n") != NULL);
		unsetenv("LMTK_PROGRESS");
	}
	T_CASE("forced_off_beats_the_environment") {
		setenv("LMTK_PROGRESS", "1", 1);
		progress_force(0);
		capture(three_updates);
		T_STREQ(got, "");
		progress_force(-1);
		setenv("LMTK_PROGRESS", "0", 1);
		T_ASSERT(progress_wanted() == 0);
		unsetenv("LMTK_PROGRESS");
	}
	T_DONE();
}
