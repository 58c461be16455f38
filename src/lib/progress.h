/* progress - the one progress line of every long job, on stderr.
 *
 *   tokenize: reading 1.20 GiB of 3.00 GiB (40%), 85.00 MiB/s, ETA 0:00:21, 1000 documents
 *   mkindex: 120 of 1000 documents (12%), 3456 documents/s, ETA 0:00:00
 *
 * done/total in the job's unit (bytes, or a noun: "documents"), the rate since the start, and the
 * time left at that rate; without a total (a pipe on stdin) only done and the rate.  Bytes are
 * always binary units (B, KiB, MiB, GiB, TiB: units_fmt_size), the ones df -h and du -h print,
 * so a rate and a size on any lmtk line compare without conversion.
 *
 * The line is drawn only when stderr is a terminal, redrawn in place ("\r", erase to the end of
 * the line) at most four times a second, and erased by progress_end(), after which the program
 * prints its one-line summary as it always did.  LMTK_PROGRESS=1 (or a program's --progress,
 * progress_force) draws it anyway, one line per redraw ending in "\n" so a log file stays
 * readable (none while the numbers stay as the last line showed them), and progress_end() then
 * draws the last state once more unless the last line showed it (so such a log always ends on
 * the job's 100%, even a job shorter than one interval); LMTK_PROGRESS=0 never draws it.  A
 * batch job's log thus stays clean unless asked.
 *
 * Updating costs one monotonic clock read (a vDSO call, tens of nanoseconds) and a compare: cheap
 * enough for a call per document or per buffer, never per token.  Not thread-safe: one thread
 * updates a given line (hub-sync's ticker thread owns its own). */
#ifndef LMTK_PROGRESS_H
#define LMTK_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

#define PROGRESS_INTERVAL 0.25   /* seconds between redraws */

struct progress {
	const char *what;      /* "verifying", "reading"; NULL or "" for none */
	const char *unit;      /* NULL: bytes; else the noun counted ("documents") */
	uint64_t done, total;  /* total 0: unknown, so no percentage and no ETA; may grow */
	uint64_t shown, shown_total;   /* done and total, as the last line drawn showed them */
	double start, next;    /* units_now() at begin, and when the next redraw is due */
	int on, tty, drawn;
	char extra[160];       /* appended after ", ": counts the unit does not show */
};

/* Whether a progress line is drawn: progress_force()'s choice, else LMTK_PROGRESS (1/0), else
 * whether stderr is a terminal. */
int progress_wanted(void);
/* --progress: 1 draws it even into a file or a pipe, 0 never, -1 back to the default. */
void progress_force(int on);

void progress_begin(struct progress *p, const char *what, const char *unit, uint64_t total);
/* done so far (absolute); redraws when due */
void progress_update(struct progress *p, uint64_t done);
static inline void progress_add(struct progress *p, uint64_t n)
{
	progress_update(p, p->done + n);
}
/* Whether the next progress_update() redraws: for a caller whose progress_extra() costs more
 * than the update (a formatted count per document). */
int progress_due(const struct progress *p);
/* Sets the text after the numbers (NULL or "" clears it); shown from the next redraw. */
void progress_extra(struct progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Erases a terminal line; a forced one in a file stays, and gets a last line for the final
 * numbers (see above) unless the last one drawn showed them, or nothing was done.  Returns the
 * seconds since begin. */
double progress_end(struct progress *p);

/* The line's text (no program name, no "\r"), as drawn `elapsed` seconds after the start:
 * "reading 1.20 GiB of 3.00 GiB (40%), 85.00 MiB/s, ETA 0:00:21".  Returns buf. */
char *progress_format(const struct progress *p, double elapsed, char *buf, size_t len);

#endif
