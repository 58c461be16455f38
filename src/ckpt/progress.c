/* progress - see progress.h. */
#include "ckpt/progress.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "msg.h"
#include "units.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = sig;
}

void pg_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

int pg_stopped(void)
{
	return stop != 0;
}

void pg_begin(struct progress *p, const char *what, uint64_t total)
{
	memset(p, 0, sizeof *p);
	p->tty = isatty(2);
	p->what = what;
	p->total = total;
	p->start = p->last = units_now();
}

static void draw(struct progress *p, double now)
{
	char a[32], b[32], r[32], eta[32] = "";
	double dt = now - p->start, rate = dt > 0 ? p->done / dt : 0;
	units_fmt_size(p->done, a, sizeof a);
	units_fmt_size(p->total, b, sizeof b);
	units_fmt_size((unsigned long long)rate, r, sizeof r);
	if (rate > 0 && p->total > p->done)
		snprintf(eta, sizeof eta, ", %.0f s left", (p->total - p->done) / rate);
	fprintf(stderr, "\r%s: %s %s of %s, %s/s%s\033[K", prog_name, p->what, a, b, r, eta);
	p->drawn = 1;
}

void pg_add(struct progress *p, uint64_t bytes)
{
	p->done += bytes;
	if (!p->tty)
		return;
	double now = units_now();
	if (now - p->last >= 0.2) {
		p->last = now;
		draw(p, now);
	}
}

double pg_end(struct progress *p)
{
	if (p->drawn)
		fprintf(stderr, "\r\033[K");
	p->drawn = 0;
	return units_now() - p->start;
}
