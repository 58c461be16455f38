/* progress - see progress.h. */
#include "progress.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "msg.h"
#include "units.h"

static int forced = -1;

void progress_force(int on)
{
	forced = on < 0 ? -1 : !!on;
}

int progress_wanted(void)
{
	const char *e = getenv("LMTK_PROGRESS");
	if (forced >= 0)
		return forced;
	if (e && (strcmp(e, "1") == 0 || strcmp(e, "0") == 0))
		return *e == '1';
	return isatty(2);
}

void progress_begin(struct progress *p, const char *what, const char *unit, uint64_t total)
{
	memset(p, 0, sizeof *p);
	p->what = what;
	p->unit = unit;
	p->total = total;
	p->on = progress_wanted();
	p->tty = isatty(2);
	p->start = units_now();
	p->next = p->start + PROGRESS_INTERVAL;
}

void progress_extra(struct progress *p, const char *fmt, ...)
{
	va_list ap;
	p->extra[0] = 0;
	if (!fmt)
		return;
	va_start(ap, fmt);
	vsnprintf(p->extra, sizeof p->extra, fmt, ap);
	va_end(ap);
}

/* an amount in the line's unit: "1.20 GiB" or "1234" */
static char *amount(const struct progress *p, double v, char *buf, size_t len)
{
	if (!p->unit)
		return units_fmt_size((unsigned long long)v, buf, len);
	snprintf(buf, len, "%.0f", v);
	return buf;
}

char *progress_format(const struct progress *p, double elapsed, char *buf, size_t len)
{
	char d[32], t[32], r[32], eta[48] = "", pct[16] = "";
	double rate = elapsed > 0 ? (double)p->done / elapsed : 0;
	const char *noun = p->unit ? p->unit : "";
	const char *sp = p->unit ? " " : "";

	amount(p, (double)p->done, d, sizeof d);
	amount(p, rate, r, sizeof r);
	if (p->total) {
		amount(p, (double)p->total, t, sizeof t);
		/* floor, so 100% means done */
		snprintf(pct, sizeof pct, " (%d%%)", p->done >= p->total ? 100 :
			 (int)floor(100.0 * (double)p->done / (double)p->total));
		if (rate > 0 && p->done < p->total) {
			char dl[32];
			double left = (double)(p->total - p->done) / rate;
			snprintf(eta, sizeof eta, ", ETA %s",
				 units_fmt_delta(left < 1e9 ? lround(left) : 999999999L, dl, sizeof dl));
		} else if (p->done >= p->total) {
			snprintf(eta, sizeof eta, ", ETA 0:00:00");
		}
		snprintf(buf, len, "%s%s%s of %s%s%s%s, %s%s%s/s%s%s%s", p->what ? p->what : "",
			 p->what && *p->what ? " " : "", d, t, sp, noun, pct, r, sp, noun, eta,
			 p->extra[0] ? ", " : "", p->extra);
	} else {
		snprintf(buf, len, "%s%s%s%s%s, %s%s%s/s%s%s", p->what ? p->what : "",
			 p->what && *p->what ? " " : "", d, sp, noun, r, sp, noun,
			 p->extra[0] ? ", " : "", p->extra);
	}
	return buf;
}

int progress_due(const struct progress *p)
{
	return p->on && units_now() >= p->next;
}

static void draw(struct progress *p, double now)
{
	char line[512];
	progress_format(p, now - p->start, line, sizeof line);
	if (p->tty)
		fprintf(stderr, "\r%s: %s\033[K", prog_name, line);
	else
		fprintf(stderr, "%s: %s\n", prog_name, line);
	p->drawn = 1;
	p->shown = p->done;
	p->shown_total = p->total;
}

/* whether the numbers moved since the last line (a total may grow: hub-sync's) */
static int news(const struct progress *p)
{
	return p->done != p->shown || p->total != p->shown_total;
}

void progress_update(struct progress *p, uint64_t done)
{
	double now;

	p->done = done;
	if (!p->on || (now = units_now()) < p->next)
		return;
	p->next = now + PROGRESS_INTERVAL;
	/* a file gets a line only when there is news (a wait, hub-sync's push, adds none); a
	 * terminal's is redrawn, its rate falling while nothing moves */
	if (!p->tty && p->drawn && !news(p))
		return;
	draw(p, now);
}

double progress_end(struct progress *p)
{
	double now = units_now();
	/* a forced line in a file or a pipe ends where the job did (its 100%), unless the last
	 * line already said so; a terminal's is erased for the summary */
	if (p->on && !p->tty && news(p) && (p->drawn || p->done))
		draw(p, now);
	if (p->drawn && p->tty)
		fputs("\r\033[K", stderr);
	p->drawn = 0;
	p->on = 0;
	return now - p->start;
}
