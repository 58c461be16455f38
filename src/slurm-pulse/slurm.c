#include "slurm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "msg.h"
#include "run.h"
#include "xalloc.h"

#define SEP "\x1f"
#define TIMEOUT_S 120  /* squeue retries an unresponsive controller for a while on its own */

time_t slurm_time(const char *s)
{
	struct tm tm = {0};
	if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))
		return 0;
	tm.tm_isdst = -1;
	return mktime(&tm);
}

/* Splits `line` at most nf-1 times on SEP; the last field keeps the rest. */
static int split(char *line, char **f, int nf)
{
	int i = 0;
	f[i++] = line;
	while (i < nf) {
		char *p = strchr(f[i - 1], SEP[0]);
		if (!p)
			break;
		*p = '\0';
		f[i++] = p + 1;
	}
	return i;
}

static int run_slurm(char *const argv[], struct run_result *r, char *err, size_t errlen)
{
	if (run_capture(argv, TIMEOUT_S, r, err, errlen) < 0)
		return -1;
	if (r->timed_out || r->status != 0) {
		/* one line for the log: squeue's own lines joined */
		char *e = r->err;
		for (char *p = e; *p; p++)
			if (*p == '\n')
				*p = p[1] ? ';' : '\0';
		while (*e == ';' || *e == ' ')
			e++;
		if (r->timed_out)
			errf(err, errlen, "%s gave no answer in %d s", argv[0], TIMEOUT_S);
		else
			errf(err, errlen, "%s failed (exit %d): %s", argv[0], r->status,
			     *e ? e : "no message");
		run_free(r);
		return -1;
	}
	return 0;
}

int slurm_jobs(const char *users, struct job **jobs, char *err, size_t errlen)
{
	char ubuf[8192];
	char *argv[] = {"squeue", "--noheader",
			"--format=%i" SEP "%P" SEP "%T" SEP "%M" SEP "%S" SEP "%r" SEP "%N" SEP "%u" SEP "%V" SEP "%j",
			NULL, NULL};
	struct run_result r;
	struct job *v = NULL;
	int n = 0, cap = 0;

	if (users) {
		snprintf(ubuf, sizeof ubuf, "--user=%s", users);
		argv[3] = ubuf;
	}
	if (run_slurm(argv, &r, err, errlen) < 0)
		return -1;
	for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
		char *f[10];
		if (split(line, f, 10) != 10) {
			warn("squeue: unexpected line ignored: %s", line);
			continue;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			struct job *nv = realloc(v, sizeof *v * (size_t)cap);
			if (!nv)
				xalloc_die("squeue's list of jobs", sizeof *v * (size_t)cap);
			v = nv;
		}
		struct job *j = &v[n++];
		j->id = strdup(f[0]);
		j->partition = strdup(f[1]);
		j->state = strdup(f[2]);
		j->elapsed = strdup(f[3]);
		j->start = strdup(f[4]);
		j->reason = strdup(f[5]);
		j->nodelist = strdup(f[6]);
		j->user = strdup(f[7]);
		j->submit_t = slurm_time(f[8]);
		j->name = strdup(f[9]);
		j->start_t = slurm_time(f[4]);
	}
	run_free(&r);
	*jobs = v;
	return n;
}

void slurm_jobs_free(struct job *jobs, int n)
{
	for (int i = 0; i < n; i++) {
		struct job *j = &jobs[i];
		free(j->id), free(j->partition), free(j->state), free(j->elapsed), free(j->start);
		free(j->reason), free(j->nodelist), free(j->user), free(j->name);
	}
	free(jobs);
}

static int is_bad(const char *state)
{
	/* sinfo %T: "drained", "draining", "down*", "fail", "failing", "mixed+drain", ...
	 * A trailing '*' means the node is not responding. */
	return strcasestr(state, "drain") || strcasestr(state, "down") || strcasestr(state, "fail") ||
	       strchr(state, '*');
}

static int add_nodes(char *const argv[], struct node **v, int *n, int *cap, char *err, size_t errlen)
{
	struct run_result r;
	if (run_slurm(argv, &r, err, errlen) < 0)
		return -1;
	for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
		char *f[4];
		int dup = 0;
		if (split(line, f, 4) != 4 || !is_bad(f[1]))
			continue;
		for (int i = 0; i < *n; i++)
			dup |= strcmp((*v)[i].name, f[0]) == 0;
		if (dup)
			continue;
		if (*n == *cap) {
			*cap = *cap ? *cap * 2 : 8;
			struct node *nv = realloc(*v, sizeof **v * (size_t)*cap);
			if (!nv)
				xalloc_die("sinfo's list of nodes", sizeof **v * (size_t)*cap);
			*v = nv;
		}
		struct node *nd = &(*v)[(*n)++];
		nd->name = strdup(f[0]);
		nd->state = strdup(f[1]);
		nd->partition = strdup(f[2]);
		nd->partition[strcspn(nd->partition, "*")] = '\0';  /* "debug*": the default partition */
		nd->reason = strdup(strcmp(f[3], "none") ? f[3] : "no reason given");
	}
	run_free(&r);
	return 0;
}

int slurm_bad_nodes(const char *partitions, const char *nodelist, struct node **nodes,
		    char *err, size_t errlen)
{
	struct node *v = NULL;
	int n = 0, cap = 0;
	char sel[8192];
	char *argv[] = {"sinfo", "--noheader", "--Node", "--format=%N" SEP "%T" SEP "%P" SEP "%E", sel, NULL};

	*nodes = NULL;
	if (partitions && *partitions) {
		snprintf(sel, sizeof sel, "--partition=%s", partitions);
		if (add_nodes(argv, &v, &n, &cap, err, errlen) < 0)
			goto fail;
	}
	if (nodelist && *nodelist) {
		snprintf(sel, sizeof sel, "--nodes=%s", nodelist);
		if (add_nodes(argv, &v, &n, &cap, err, errlen) < 0)
			goto fail;
	}
	*nodes = v;
	return n;
fail:
	slurm_nodes_free(v, n);
	return -1;
}

void slurm_nodes_free(struct node *nodes, int n)
{
	for (int i = 0; i < n; i++)
		free(nodes[i].name), free(nodes[i].state), free(nodes[i].reason), free(nodes[i].partition);
	free(nodes);
}
