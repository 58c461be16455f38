/* slurm - what slurm-pulse asks SLURM: the jobs in the queue and the health of nodes.
 *
 * Both questions go through the real client commands (squeue, sinfo) run with an argument vector,
 * so they honour SLURM_CONF and whatever auth the site uses, exactly as the user's own shell
 * would.  The output format separates fields with the ASCII unit separator (0x1f) instead of
 * spaces, and puts the job name last: the old script split on whitespace and broke on job names
 * with spaces; a 0x1f cannot be typed into a job name, and even if it were, a name in the last
 * field keeps everything it contains. */
#ifndef PULSE_SLURM_H
#define PULSE_SLURM_H

#include <stddef.h>
#include <time.h>

struct job {
	char *id;         /* "123", "123_4", "123_[5-9%1]" */
	char *partition;
	char *state;      /* RUNNING, PENDING, ... (squeue %T) */
	char *elapsed;    /* squeue %M, e.g. "1-02:03:04" */
	char *start;      /* %S: start time (actual or expected) or "N/A" */
	char *reason;     /* %r */
	char *nodelist;   /* %N, compressed ("n[1-2]"), empty while pending */
	char *user;
	char *name;
	time_t start_t;   /* 0 if unknown */
	time_t submit_t;
};

struct node {
	char *name, *state, *reason, *partition;
};

/* Runs squeue for `users` (comma list, or NULL = every user).  Returns the number of jobs (>= 0)
 * with *jobs malloc'd, or -1 with err naming what failed (SLURM unreachable, squeue missing). */
int slurm_jobs(const char *users, struct job **jobs, char *err, size_t errlen);
void slurm_jobs_free(struct job *jobs, int n);

/* Nodes of `partitions` (comma list) and of `nodelist` (hostlist expression) whose state is
 * drained/draining/down/fail/failing/not responding.  Count or -1 + err. */
int slurm_bad_nodes(const char *partitions, const char *nodelist, struct node **nodes,
		    char *err, size_t errlen);
void slurm_nodes_free(struct node *nodes, int n);

/* "2021-08-11T11:21:14" (local time) -> time_t; 0 for "N/A", "Unknown", "" */
time_t slurm_time(const char *s);

#endif
