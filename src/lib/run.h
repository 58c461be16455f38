/* run - run a child command from an argument vector and capture what it prints.
 *
 * No shell is involved: argv goes straight to execvp, so a job name like "x; rm -rf ~" is just
 * a string.  stdout and stderr are captured separately (squeue's data vs its error message) by
 * polling both pipes, so a chatty child can't deadlock us on a full pipe.  A timeout kills the
 * child's process group: a hung squeue must not hang the watchdog that is meant to notice hangs. */
#ifndef LMTK_RUN_H
#define LMTK_RUN_H

#include <stddef.h>

struct run_result {
	char *out;        /* NUL-terminated, malloc'd */
	size_t out_len;
	char *err;
	size_t err_len;
	int status;       /* exit code; 128+signal if killed; -1 if it could not start */
	int timed_out;
};

/* Runs argv[0] (PATH lookup) with argv; waits at most timeout_s seconds (0 = no limit).
 * Returns 0 if the child ran (whatever its exit code), -1 with err filled if it could not be
 * started (e.g. "squeue: No such file or directory"). */
int run_capture(char *const argv[], int timeout_s, struct run_result *r, char *err, size_t errlen);
void run_free(struct run_result *r);

#endif
