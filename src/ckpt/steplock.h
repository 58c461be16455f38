/* steplock - a reader's hold on a checkpoint step, so that pruning never removes a step that is
 * being read (train --save-keep, lmtk-checkpoint(5) "Pruning").
 *
 * The lock is flock(2) on STEPDIR/.lock, an empty file that every save creates inside the step
 * (a reader creates it in an older step that lacks it).  Inside the step rather than beside it
 * (SAVE/global_stepN.lock) so the lock lives and dies with the directory: nothing is left to
 * clean up, and a step renamed away takes its lock file with it.
 *
 *   readers  (train --load, the checkpoint library's sh_open: ckpt-merge-tp, ckpt-sync-ln, and
 *            slurm/ckpt-backup.slurm through flock(1)) take it shared and blocking, for as long
 *            as they read;
 *   pruner   (train after a save) takes it exclusive and non-blocking: a step it cannot lock is
 *            kept for now and tried again after the next save.  Holding it, the pruner renames
 *            the step to a hidden name, then lets go and removes the tree.
 *
 * A reader may open the lock file just before the pruner renames the step, and get the lock
 * once the pruner lets go: it then holds the lock of a step that is no longer there.  So after
 * locking, the reader checks that STEPDIR/.lock is still the file it locked (same device and
 * inode); if not, the step is gone (STEPLOCK_GONE) and the reader looks again (`latest` has
 * moved on).
 *
 * flock(2) locks must be seen by every node that reads or prunes: NFSv4, GPFS and Lustre mounted
 * with -o flock are fine; Lustre's -o localflock is not (the lock holds on one node only).  Where
 * the filesystem has no flock at all (ENOSYS, ENOLCK, EOPNOTSUPP), readers read without a lock
 * and the pruner removes nothing, saying why.
 *
 * The locking itself is lib/lock.h's: a .lock that is a symbolic link or not a regular file is
 * refused (STEPLOCK_ERROR, err says why); readers open it read-only, so another user's step is
 * read under its lock, while the pruner, which opens it for writing, also wants it to be the
 * user's own file with one link. */
#ifndef CKPT_STEPLOCK_H
#define CKPT_STEPLOCK_H

#include <stddef.h>

#define STEPLOCK_FILE ".lock"

enum {
	STEPLOCK_GONE = -1,     /* the step does not exist (any more) */
	STEPLOCK_NONE = -2,     /* no lock possible here (read-only step without a .lock, no flock) */
	STEPLOCK_ERROR = -3,    /* an I/O error: err says which */
	STEPLOCK_BUSY = -4,     /* (exclusive) someone holds it */
};

/* Creates the empty lock file in a step being written (before it is published).  0 or -1 + err. */
int steplock_create(const char *stepdir, char *err, size_t errlen);

/* The shared lock of a reader: a file descriptor (>= 0) to hand to steplock_release(), or one of
 * STEPLOCK_GONE, STEPLOCK_NONE (read on without a lock), STEPLOCK_ERROR + err. */
int steplock_shared(const char *stepdir, char *err, size_t errlen);

/* The pruner's exclusive lock, never waiting: a descriptor, or STEPLOCK_BUSY, STEPLOCK_GONE,
 * STEPLOCK_NONE (the filesystem has no flock: do not remove), STEPLOCK_ERROR + err. */
int steplock_exclusive(const char *stepdir, char *err, size_t errlen);

/* Lets go of a lock; a negative value (no lock) is ignored. */
void steplock_release(int fd);

#endif
