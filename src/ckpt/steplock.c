/* steplock - see steplock.h. */
#include "ckpt/steplock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "msg.h"

static int no_flock(int e)
{
	return e == ENOSYS || e == ENOLCK || e == EOPNOTSUPP || e == EINVAL;
}

int steplock_create(const char *stepdir, char *err, size_t errlen)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/" STEPLOCK_FILE, stepdir);
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return errf(err, errlen, "%s: %s", path, strerror(errno));
	close(fd);
	return 0;
}

/* Opens STEPDIR/.lock (mode: O_RDONLY for a reader; O_RDWR for the pruner, as NFS wants for an
 * exclusive lock), creating it in a step that lacks one.  A descriptor, or a STEPLOCK_ code. */
static int open_lock(const char *stepdir, const char *path, int mode, char *err, size_t errlen)
{
	int fd = open(path, mode | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	int e = errno;
	struct stat sb;
	if (e == ENOENT) {
		if (stat(stepdir, &sb) < 0 || !S_ISDIR(sb.st_mode))
			return errno == ENOENT || errno == ENOTDIR || !S_ISDIR(sb.st_mode) ? STEPLOCK_GONE
			       : (errf(err, errlen, "%s: %s", stepdir, strerror(errno)), STEPLOCK_ERROR);
		/* a step saved before steps had a lock file, or written by another tool */
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (fd >= 0)
			return fd;
		e = errno;
		if (e == ENOENT)
			return STEPLOCK_GONE;   /* removed in between */
	}
	if (e == ENOTDIR)
		return STEPLOCK_GONE;
	if (e == EACCES || e == EPERM || e == EROFS)
		return STEPLOCK_NONE;   /* another user's step, a read-only filesystem */
	errf(err, errlen, "%s: %s", path, strerror(e));
	return STEPLOCK_ERROR;
}

/* After the lock: is STEPDIR/.lock still the file locked?  (A pruner may have renamed the step
 * away, or a re-save put a new step in its place, between the open and the lock.) */
static int still_there(int fd, const char *path)
{
	struct stat a, b;
	return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

static int lock(const char *stepdir, int exclusive, char *err, size_t errlen)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/" STEPLOCK_FILE, stepdir);
	int fd = open_lock(stepdir, path, exclusive ? O_RDWR : O_RDONLY, err, errlen);
	if (fd < 0)
		return fd;
	while (flock(fd, exclusive ? LOCK_EX | LOCK_NB : LOCK_SH) < 0) {
		int e = errno;
		if (e == EINTR)
			continue;
		close(fd);
		if (e == EWOULDBLOCK)
			return STEPLOCK_BUSY;
		if (no_flock(e))
			return STEPLOCK_NONE;
		errf(err, errlen, "%s: flock: %s", path, strerror(e));
		return STEPLOCK_ERROR;
	}
	if (!still_there(fd, path)) {
		close(fd);
		return STEPLOCK_GONE;
	}
	return fd;
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
