/* keep - which checkpoints a --save directory keeps, and the removal of the others
 * (train --save-keep N --save-keep-every M; train(1) "Pruning checkpoints").
 *
 * A 176B checkpoint is 2.1 TB (12 bytes per parameter); saved every 100 iterations, a 100-hour
 * job array writes a petabyte.  The policy: after a save has completed and `latest` names it,
 * keep the newest N steps, every step that is a multiple of M (forever: the milestones an
 * evaluation or a rollback may want), and always the one `latest` names; remove the rest.
 * Steps numbered above `latest` (a run that went further, then resumed from an earlier step
 * because the later ones were broken) are neither counted nor removed: the run replaces them as
 * it passes them, and a human may want to look at them.
 *
 * Removal is crash-safe and never pulls a step from under a reader:
 *   1. the step's lock is taken exclusive, without waiting (steplock.h): a step a reader holds
 *      (a train --load elsewhere, ckpt-merge-tp, ckpt-sync-ln, a backup) is kept for now and
 *      tried again after the next save;
 *   2. holding it, the step is renamed to .global_stepN.deleting, so from that instant no reader
 *      and no fallback (train's load takes global_stepN names only) can find it half removed;
 *   3. the lock is let go and the tree removed.
 * Removal never leaves --save: a global_stepN that is itself a symbolic link (a step moved to
 * another disk and linked back) is not a step this run made, and is kept, named in the report
 * (the user removes the link if it should go); inside a step, a link is unlinked, never followed
 * (fsx_rm_tree), so nothing outside the directory loses a file.
 * A kill between 2 and 3 leaves a .global_stepN.deleting directory, which the next save finishes
 * (keep_finish, also without --save-keep).  Only world rank 0 prunes, after its save is
 * published. */
#ifndef TRAIN_KEEP_H
#define TRAIN_KEEP_H

#include <stdint.h>

struct keep {
	int64_t newest;   /* --save-keep N; 0: keep every step (no pruning) */
	int64_t every;    /* --save-keep-every M; 0: none kept for being a multiple */
};

/* What one prune did, for the run's log. */
struct keep_report {
	int removed, held;
	int linked;               /* steps the policy would remove that are symbolic links: kept */
	int nolock;               /* the filesystem has no flock: nothing was removed */
	char removed_names[400];  /* "global_step3 global_step4", "..." when longer */
	char held_names[400];
	char linked_names[400];
	char err[600];            /* the first step that could not be removed, and why ("" none) */
};

/* The policy alone: keep[i] = 1 for each steps[i] (any order, no duplicates) that is kept when
 * `latest` names step `latest`. */
void keep_select(const struct keep *k, const int64_t *steps, int n, int64_t latest, char *keep);

/* Removes the .global_stepN.deleting leftovers of interrupted removals under dir. */
void keep_finish(const char *dir);

/* After a save of step `latest` in dir: keep_finish, then every step the policy does not keep
 * and no reader holds is removed.  Never fails the save: what went wrong is in the report. */
void keep_prune(const char *dir, const struct keep *k, int64_t latest, struct keep_report *r);

#endif
