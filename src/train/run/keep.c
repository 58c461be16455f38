/* keep - see keep.h. */
#include "train/run/keep.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file.h"
#include "fsx.h"
#include "xalloc.h"
#include "ckpt/steplock.h"

#define DELETING ".deleting"

static int by_step_desc(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

void keep_select(const struct keep *k, const int64_t *steps, int n, int64_t latest, char *keep)
{
	/* the rank of each step at or below latest, newest first: the N newest are kept */
	int64_t *below = malloc((n ? n : 1) * sizeof *below);
	int nb = 0;
	for (int i = 0; below && i < n; i++)
		if (steps[i] <= latest)
			below[nb++] = steps[i];
	if (below)
		qsort(below, nb, sizeof *below, by_step_desc);
	int64_t cut = k->newest > 0 && below && nb > k->newest ? below[k->newest - 1] : INT64_MIN;
	for (int i = 0; i < n; i++) {
		int64_t s = steps[i];
		keep[i] = k->newest <= 0 || !below || s > latest || s == latest || s >= cut ||
			  (k->every > 0 && s % k->every == 0);
	}
	free(below);
}

/* "global_stepN" -> N; -1 for any other name */
static int64_t step_of(const char *name)
{
	char *end;
	if (strncmp(name, "global_step", 11) != 0 || name[11] < '0' || name[11] > '9')
		return -1;
	long long s = strtoll(name + 11, &end, 10);
	return *end || s < 0 ? -1 : s;
}

void keep_finish(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[4400];
	if (!d)
		return;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name), sl = strlen(DELETING);
		if (l > 12 + sl && strncmp(e->d_name, ".global_step", 12) == 0 &&
		    strcmp(e->d_name + l - sl, DELETING) == 0) {
			snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
			fsx_rm_tree(p);
		}
	}
	closedir(d);
}

static void add_name(char *list, size_t cap, const char *name)
{
	size_t used = strlen(list);
	if (strstr(list, "..."))
		return;
	if (used + strlen(name) + 6 < cap)
		snprintf(list + used, cap - used, "%s%s", used ? " " : "", name);
	else
		snprintf(list + used, cap - used, " ...");
}

/* Removes one step, as keep.h says.  1 removed, 0 held by a reader, 2 already gone, -1 failed
 * (r->err), -2 the filesystem cannot lock. */
static int remove_step(const char *dir, const char *name, struct keep_report *r)
{
	char path[4400], hidden[4400], why[512];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	snprintf(hidden, sizeof hidden, "%s/.%s" DELETING, dir, name);
	int fd = steplock_exclusive(path, why, sizeof why);
	switch (fd) {
	case STEPLOCK_BUSY:
		return 0;
	case STEPLOCK_GONE:
		return 2;   /* someone else removed it */
	case STEPLOCK_NONE:
		snprintf(why, sizeof why, "%.400s/" STEPLOCK_FILE ": cannot be locked (no flock on "
			 "this filesystem, or not writable)", path);
		/* fall through */
	case STEPLOCK_ERROR:
		if (!*r->err)
			snprintf(r->err, sizeof r->err, "%s", why);
		return fd == STEPLOCK_NONE ? -2 : -1;
	}
	fsx_rm_tree(hidden);   /* an older leftover of the same name */
	if (rename(path, hidden) < 0) {
		if (!*r->err)
			snprintf(r->err, sizeof r->err, "%.250s: cannot rename it to .%.40s" DELETING
				 ": %s", path, name, strerror(errno));
		steplock_release(fd);
		return -1;
	}
	file_fsync_dir(dir);
	steplock_release(fd);
	fsx_rm_tree(hidden);
	return 1;
}

void keep_prune(const char *dir, const struct keep *k, int64_t latest, struct keep_report *r)
{
	memset(r, 0, sizeof *r);
	keep_finish(dir);
	if (k->newest <= 0)
		return;
	int n = 0, cap = 64;
	int64_t *steps = malloc(cap * sizeof *steps);
	DIR *d = opendir(dir);
	struct dirent *e;
	if (!steps || !d) {
		if (steps)
			snprintf(r->err, sizeof r->err, "%s: %s", dir, strerror(errno));
		else
			xalloc_err_in(r->err, sizeof r->err, dir, "the list of saved steps",
				      cap * sizeof *steps);
		free(steps);
		if (d)
			closedir(d);
		return;
	}
	while ((e = readdir(d))) {
		int64_t s = step_of(e->d_name);
		if (s < 0)
			continue;
		if (n == cap) {
			int64_t *m = realloc(steps, 2 * cap * sizeof *steps);
			if (!m)
				break;
			steps = m;
			cap *= 2;
		}
		steps[n++] = s;
	}
	closedir(d);
	qsort(steps, n, sizeof *steps, by_step_desc);
	char *keep = malloc(n ? n : 1);
	if (!keep) {
		free(steps);
		xalloc_err_in(r->err, sizeof r->err, dir, "the saved steps' keep flags", n ? n : 1);
		return;
	}
	keep_select(k, steps, n, latest, keep);
	/* oldest first: a save that is stopped half way has removed the least useful steps */
	for (int i = n - 1; i >= 0; i--) {
		char name[64];
		if (keep[i])
			continue;
		snprintf(name, sizeof name, "global_step%lld", (long long)steps[i]);
		char path[4400];
		snprintf(path, sizeof path, "%s/%s", dir, name);
		if (fsx_is_link(path) == 1) {   /* not ours to remove: keep.h */
			r->linked++;
			add_name(r->linked_names, sizeof r->linked_names, name);
			continue;
		}
		int rc = remove_step(dir, name, r);
		if (rc == 1) {
			r->removed++;
			add_name(r->removed_names, sizeof r->removed_names, name);
		} else if (rc == 0) {
			r->held++;
			add_name(r->held_names, sizeof r->held_names, name);
		} else if (rc == -2) {
			r->nolock = 1;
			break;
		}
	}
	free(keep);
	free(steps);
}
