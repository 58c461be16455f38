/* progress - "checking 1.2 GiB of 3.0 GiB, 850 MiB/s, 2 s left" on stderr, when it is a terminal.
 *
 * Long work over a checkpoint (hundreds of GB for a 176B model) shows where it is, redrawn in
 * place at most five times a second; nothing is printed when stderr is a file or a pipe, so logs
 * of batch jobs stay clean.  pg_stopped() tells a loop that SIGINT or SIGTERM arrived: the caller
 * unwinds and removes its temporaries instead of dying half way. */
#ifndef CKPT_PROGRESS_H
#define CKPT_PROGRESS_H

#include <stdint.h>

struct progress {
	int tty;
	const char *what;
	uint64_t done, total;
	double start, last;
	int drawn;
};

/* Installs the SIGINT/SIGTERM handlers (once). */
void pg_signals(void);
int pg_stopped(void);

void pg_begin(struct progress *p, const char *what, uint64_t total);
void pg_add(struct progress *p, uint64_t bytes);
/* Erases the line; returns the seconds since pg_begin. */
double pg_end(struct progress *p);

#endif
