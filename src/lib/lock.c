/* lock - see lock.h. */
#include "lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "msg.h"
#include "units.h"

static int no_flock(int e)
{
	/* EINVAL: some FUSE and old NFS mounts answer flock with it */
	return e == ENOSYS || e == ENOLCK || e == EOPNOTSUPP || e == EINVAL;
}

const char *lock_hostname(void)
{
	static char host[72];
	if (!host[0]) {
		if (gethostname(host, sizeof host - 1) < 0 || !host[0])
			snprintf(host, sizeof host, "?");
		/* it goes into file names (train's temporaries) and one-line records */
		for (char *p = host; *p; p++)
			if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			      (*p >= '0' && *p <= '9') || *p == '.' || *p == '-' || *p == '_'))
				*p = '_';
	}
	return host;
}

char *lock_holder(int fd, char *buf, size_t len)
{
	ssize_t n = len > 1 ? pread(fd, buf, len - 1, 0) : -1;
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (!buf[0])
		snprintf(buf, len, "holder unknown");
	return buf;
}

/* The open, and the checks that make it safe to lock (and write) the file: LOCK_OK with l->fd
 * set, or a code + err. */
static int open_checked(struct lock *l, int flags, char *err, size_t errlen)
{
	const char *path = l->path;
	int ro = flags & LOCK_RDONLY;
	/* O_NONBLOCK: a FIFO planted at the path must not hang the open; it is refused below */
	int oflags = (ro ? O_RDONLY : O_RDWR) | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK |
		     (ro || (flags & LOCK_NOCREATE) ? 0 : O_CREAT);
	int fd = open(path, oflags, 0644);
	if (fd < 0) {
		int e = errno;
		struct stat sb;
		if (e == ELOOP && lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode)) {
			errf(err, errlen, "%s: is a symbolic link; refusing", path);
			return LOCK_UNSAFE;
		}
		errf(err, errlen, "%s: %s", path, strerror(e));
		if (e == ENOENT || e == ENOTDIR)
			return LOCK_ABSENT;
		if (e == EACCES || e == EPERM || e == EROFS)
			return LOCK_DENIED;
		return LOCK_ERROR;
	}
	struct stat sb;
	const char *why = NULL;
	char buf[128];
	if (fstat(fd, &sb) < 0) {
		errf(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return LOCK_ERROR;
	}
	if (!S_ISREG(sb.st_mode)) {
		why = "is not a regular file";
	} else if (!ro && sb.st_uid != geteuid()) {
		snprintf(buf, sizeof buf, "belongs to uid %ld, not to this user (uid %ld)",
			 (long)sb.st_uid, (long)geteuid());
		why = buf;
	} else if (!ro && sb.st_nlink != 1) {
		snprintf(buf, sizeof buf, "has %ld hard links (a lock file has one)", (long)sb.st_nlink);
		why = buf;
	}
	if (why) {
		errf(err, errlen, "%s: %s; refusing", path, why);
		close(fd);
		return LOCK_UNSAFE;
	}
	/* back to blocking I/O for the record */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	l->fd = fd;
	return LOCK_OK;
}

static void record(struct lock *l)
{
	char line[256], stamp[32];
	int n = snprintf(line, sizeof line, "pid %ld on %s since %s\n", (long)getpid(),
			 lock_hostname(), units_fmt_time(time(NULL), stamp, sizeof stamp));
	/* the new line first, then the old tail cut: a reader sees one whole line or the old one */
	if (n > 0 && (size_t)n < sizeof line && pwrite(l->fd, line, (size_t)n, 0) == n)
		(void)!ftruncate(l->fd, n);
}

int lock_take(struct lock *l, const char *path, int flags, double wait, char *err, size_t errlen)
{
	l->fd = -1;
	l->flags = flags;
	l->holder[0] = '\0';
	if (snprintf(l->path, sizeof l->path, "%s", path) >= (int)sizeof l->path)
		return errf(err, errlen, "%.200s...: path too long", path), LOCK_ERROR;
	if ((flags & LOCK_RDONLY) && !(flags & LOCK_SHARED))
		return errf(err, errlen, "%s: an exclusive lock needs the file open for writing", path),
		       LOCK_ERROR;
	int rc = open_checked(l, flags, err, errlen);
	if (rc != LOCK_OK)
		return rc;
	int op = flags & LOCK_SHARED ? LOCK_SH : LOCK_EX;
	struct timespec nap = {0, 100 * 1000 * 1000};
	double until = units_now() + (wait > 0 ? wait : 0);
	while (flock(l->fd, wait < 0 ? op : op | LOCK_NB) < 0) {
		int e = errno;
		if (e == EINTR)
			continue;
		if (e == EWOULDBLOCK && wait > 0 && units_now() < until) {
			nanosleep(&nap, NULL);
			continue;
		}
		if (e == EWOULDBLOCK) {
			lock_holder(l->fd, l->holder, sizeof l->holder);
			errf(err, errlen, "%s: held by %s", path, l->holder);
			rc = LOCK_BUSY;
		} else if (no_flock(e)) {
			errf(err, errlen, "%s: this filesystem cannot lock files (flock: %s)", path,
			     strerror(e));
			rc = LOCK_NOFLOCK;
		} else {
			errf(err, errlen, "%s: flock: %s", path, strerror(e));
			rc = LOCK_ERROR;
		}
		close(l->fd);
		l->fd = -1;
		return rc;
	}
	if ((flags & LOCK_RECORD) && !(flags & LOCK_SHARED))
		record(l);
	return LOCK_OK;
}

int lock_still_there(const struct lock *l)
{
	struct stat a, b;
	return l->fd >= 0 && fstat(l->fd, &a) == 0 && lstat(l->path, &b) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

void lock_release(struct lock *l)
{
	if (l->fd < 0)
		return;
	if ((l->flags & LOCK_RECORD) && !(l->flags & LOCK_SHARED))
		(void)!ftruncate(l->fd, 0);
	close(l->fd);
	l->fd = -1;
}
