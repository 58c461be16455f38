/* lock - an advisory lock file, the one every lmtk program takes (hub-sync's .git/hub-sync.lock,
 * the watchdogs' STATE.lock, train's SAVE/.lmtk-save.lock, a checkpoint step's .lock).
 *
 * A lock is flock(2) on a file that is never removed: removing it would let a second process
 * lock a new file of the same name while the first still holds the old one.  Lock files often
 * live in directories other people can write to (a shared project space, a clone), so the file
 * is opened without following a symbolic link (O_NOFOLLOW) and never truncated on open; after the
 * open, fstat must show a regular file, owned by our effective uid, with one link.  Anything else
 * is refused with a message naming the path and why: a lock file that is a link to another file
 * would otherwise be the file the holder's record is written into, and a dangling link would
 * create its target.
 *
 * An exclusive lock may record its holder, "pid N on HOST since TIME", in the file: written only
 * once the lock is held (so a loser never clobbers the winner's record), cleared on release, and
 * read back by a process that finds the lock busy, to name who has it.  Shared locks record
 * nothing (there are several holders).
 *
 * A reader's shared lock on someone else's files (a checkpoint another user saved) is opened
 * read-only (LOCK_RDONLY): it writes nothing, so only the symlink and regular-file checks apply;
 * whose the file is and how many links it has do not matter.
 *
 * Waiting: wait < 0 blocks in flock(2); wait == 0 tries once; wait > 0 polls every 100 ms up to
 * that many seconds.  flock(2) must reach every node that takes the lock: NFSv4, GPFS and Lustre
 * mounted with -o flock do; Lustre's -o localflock does not.  A filesystem without flock at all
 * (ENOSYS, ENOLCK, EOPNOTSUPP) gives LOCK_NOFLOCK, and the caller decides whether to go on
 * unlocked (a reader), do nothing (a pruner) or give up. */
#ifndef LMTK_LOCK_H
#define LMTK_LOCK_H

#include <stddef.h>

enum {                     /* flags of lock_take */
	LOCK_SHARED = 1,        /* a shared lock (else exclusive) */
	LOCK_RDONLY = 2,        /* open read-only, never create (with LOCK_SHARED only) */
	LOCK_NOCREATE = 4,      /* the file must exist already */
	LOCK_RECORD = 8,        /* (exclusive) write the holder into the file once held */
};

enum {                     /* what lock_take returns */
	LOCK_OK = 0,
	LOCK_BUSY = -1,         /* another process holds it (past the wait): l->holder names it */
	LOCK_NOFLOCK = -2,      /* the filesystem has no flock(2) */
	LOCK_UNSAFE = -3,       /* refused: a symbolic link, not a regular file, not ours, links */
	LOCK_ABSENT = -4,       /* LOCK_NOCREATE or LOCK_RDONLY and there is no such file (ENOENT,
	                         * ENOTDIR) */
	LOCK_DENIED = -5,       /* no permission to open or create it, a read-only filesystem */
	LOCK_ERROR = -6,        /* another error */
};

struct lock {
	int fd;                 /* -1 when not held */
	int flags;
	char path[4096];
	char holder[256];       /* LOCK_BUSY: "pid N on HOST since TIME", or "holder unknown" */
};

/* Takes the lock on path, as flags and wait say.  LOCK_OK, or one of the codes above with err
 * naming the path and why ("PATH: is a symbolic link; refusing", "PATH: held by pid N on HOST
 * since TIME").  l->fd is -1 unless LOCK_OK. */
int lock_take(struct lock *l, const char *path, int flags, double wait, char *err, size_t errlen);

/* Whether path still names the file that is locked (the same device and inode): a directory
 * holding the lock file may have been renamed away or replaced between the open and the lock. */
int lock_still_there(const struct lock *l);

/* Reads the holder recorded in an open lock file into buf: "pid N on HOST since TIME", or
 * "holder unknown" if nothing is recorded.  Returns buf. */
char *lock_holder(int fd, char *buf, size_t len);

/* Lets go (clearing the holder record of a LOCK_RECORD lock); a lock not held is ignored. */
void lock_release(struct lock *l);

/* This host's name, as the holder record writes it ("?" when unknown). */
const char *lock_hostname(void);

#endif
