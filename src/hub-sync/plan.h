/* plan - what a sync does with each changed path (git, lfs, segments, keep or delete), and
 * staging it; see plan.c for the rules. */
#ifndef HUBSYNC_PLAN_H
#define HUBSYNC_PLAN_H

#include <stddef.h>

#include "repo.h"
#include "segment.h"

struct plan_opts {
	char **patterns;
	int npatterns;
	unsigned long long lfs_threshold, segment_size;
	int allow_deletions, dry_run, verbose;
};

/* H_LFS_NEW: over the threshold, .gitattributes gains a line for it; H_KEEP: deleted, not
 * synced; H_STAGED: staged earlier, committed as it is; H_SKIP: nothing to do */
enum how { H_GIT, H_LFS, H_LFS_NEW, H_SEG, H_DELETE, H_KEEP, H_STAGED, H_SKIP };

struct item {
	struct change *ch;
	enum how how;
	unsigned long long size;
	struct segment_result seg;
};

struct plan {
	struct change *changes;
	size_t n;
	struct item *items;          /* one per change */
	unsigned counts[H_SKIP + 1];
	unsigned nfiles;             /* paths the commit changes */
};

/* git status over the patterns, the segmented logs, and a way for each.  0 or -1 + err. */
int plan_make(struct repo *r, const struct plan_opts *o, struct plan *p, char *err, size_t errlen);
/* the paths that go to LFS (pointers into p), for lfs_preclean; free() the array */
char **plan_lfs_paths(const struct plan *p, size_t *n);
/* Stages everything (dry run: computes only).  0 or -1 + err. */
int plan_stage(const struct plan_opts *o, struct repo *r, struct plan *p, char *err, size_t errlen);
/* "A lfs 1234 path" lines on stdout; a warning naming deleted files that were kept */
void plan_report(const struct plan_opts *o, const struct plan *p);
void plan_free(struct plan *p);

#endif
