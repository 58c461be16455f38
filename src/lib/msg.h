/* msg - one message style for every lmtk program.
 *
 * Human messages go to stderr prefixed with the program's name ("slurm-pulse: ..."), data goes to
 * stdout.  die() ends the program with one of the exit codes every lmtk program shares, so a cron
 * wrapper or sbatch script can tell "found a problem" from "could not even look". */
#ifndef LMTK_MSG_H
#define LMTK_MSG_H

#include <stdarg.h>
#include <stddef.h>

enum {
	EXIT_OK = 0,       /* success, healthy */
	EXIT_FINDING = 1,  /* a watchdog alert, a failed check */
	EXIT_USAGE = 2,    /* usage error or bad input */
	EXIT_FAILED = 3,   /* could not do the job: I/O, network, SLURM unreachable */
};

extern const char *prog_name;

void msg_init(const char *argv0);
void warnx_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* snprintf into an error buffer; returns -1 so callers can `return errf(...)` */
int errf(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define warn warnx_

#endif
