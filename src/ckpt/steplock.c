/* steplock - see steplock.h. */
#include "ckpt/steplock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lock.h"
#include "msg.h"

int steplock_create(const char *stepdir, char *err, size_t errlen)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/" STEPLOCK_FILE, stepdir);
	/* a step directory just made: nothing can be there yet, least of all a link */
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return errf(err, errlen, "%s: %s", path, strerror(errno));
	close(fd);
	return 0;
}

/* A lock_take code -> a STEPLOCK_ one. */
static int steplock_code(int rc)
{
	switch (rc) {
	case LOCK_BUSY:
		return STEPLOCK_BUSY;
	case LOCK_ABSENT:
		return STEPLOCK_GONE;
	case LOCK_NOFLOCK:   /* no flock here: readers read unlocked, the pruner removes nothing */
	case LOCK_DENIED:    /* another user's step, a read-only filesystem */
		return STEPLOCK_NONE;
	}
	return STEPLOCK_ERROR;   /* LOCK_UNSAFE (a link, not ours, ...) and I/O errors: err says */
}

static int lock(const char *stepdir, int exclusive, char *err, size_t errlen)
{
	char path[4200];
	struct lock l;
	int rc;
	snprintf(path, sizeof path, "%s/" STEPLOCK_FILE, stepdir);
	if (exclusive) {
		/* O_RDWR, as NFS wants for an exclusive lock; the step is the pruner's own */
		rc = lock_take(&l, path, 0, 0, err, errlen);
	} else {
		rc = lock_take(&l, path, LOCK_SHARED | LOCK_RDONLY, -1, err, errlen);
		if (rc == LOCK_ABSENT) {
			struct stat sb;
			if (stat(stepdir, &sb) < 0 || !S_ISDIR(sb.st_mode))
				return errno == ENOENT || errno == ENOTDIR || !S_ISDIR(sb.st_mode)
				       ? STEPLOCK_GONE
				       : (errf(err, errlen, "%s: %s", stepdir, strerror(errno)), STEPLOCK_ERROR);
			/* a step saved before steps had a lock file, or written by another tool */
			rc = lock_take(&l, path, LOCK_SHARED, -1, err, errlen);
		}
	}
	if (rc != LOCK_OK)
		return steplock_code(rc);
	if (!lock_still_there(&l)) {
		lock_release(&l);
		return STEPLOCK_GONE;
	}
	return l.fd;   /* no holder record: steplock_release() is a close */
}

int steplock_shared(const char *stepdir, char *err, size_t errlen)
{
	return lock(stepdir, 0, err, errlen);
}

int steplock_exclusive(const char *stepdir, char *err, size_t errlen)
{
	return lock(stepdir, 1, err, errlen);
}

void steplock_release(int fd)
{
	if (fd >= 0)
		close(fd);
}
