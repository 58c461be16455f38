#include "outfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "msg.h"
#include "xalloc.h"

/* Named temporaries still to remove if a signal ends the program: the handler may only call
 * async-signal-safe functions, so it walks a fixed table of strings set before it can look. */
#define MAX_SLOTS 256
int outfile_no_tmpfile;
static char *volatile slots[MAX_SLOTS];
static int handlers_set;
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;   /* writers on several threads */

static void on_signal(int sig)
{
	for (int i = 0; i < MAX_SLOTS; i++)
		if (slots[i])
			unlink(slots[i]);
	signal(sig, SIG_DFL);
	raise(sig);
}

static int slot_add(const char *path)
{
	pthread_mutex_lock(&slots_lock);
	if (!handlers_set) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_signal;
		sigemptyset(&sa.sa_mask);
		for (const int *s = (const int[]){SIGINT, SIGTERM, SIGHUP, SIGPIPE, 0}; *s; s++) {
			struct sigaction old;
			/* leave a signal alone if the caller ignores it (nohup) or handles it */
			if (sigaction(*s, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
			    old.sa_handler == SIG_DFL)
				sigaction(*s, &sa, NULL);
		}
		handlers_set = 1;
	}
	int got = -1;
	for (int i = 0; i < MAX_SLOTS; i++)
		if (!slots[i]) {
			slots[i] = strdup(path);
			got = slots[i] ? i : -1;
			break;
		}
	pthread_mutex_unlock(&slots_lock);
	return got;
}

static void slot_drop(int i)
{
	if (i < 0)
		return;
	pthread_mutex_lock(&slots_lock);
	char *p = slots[i];
	slots[i] = NULL;
	pthread_mutex_unlock(&slots_lock);
	free(p);
}

static mode_t file_mode(void)
{
	mode_t mask = umask(0);
	umask(mask);
	return 0666 & ~mask;
}

static void split(const char *path, char *dir, size_t dlen, const char **base)
{
	const char *slash = strrchr(path, '/');
	if (!slash) {
		snprintf(dir, dlen, ".");
		*base = path;
	} else {
		snprintf(dir, dlen, "%.*s", slash == path ? 1 : (int)(slash - path), path);
		*base = slash + 1;
	}
}

int outfile_open(struct outfile *o, const char *path, size_t bufsize, char *err, size_t errlen)
{
	char dir[4096], tmp[4096 + 300];
	const char *base;
	int e;

	memset(o, 0, sizeof *o);
	o->fd = o->dirfd = o->slot = -1;
	o->cap = bufsize ? bufsize : 1 << 20;
	split(path, dir, sizeof dir, &base);
	if (!*base || strlen(path) >= 4096)
		return errf(err, errlen, "%s: not a file name", path);
	if (!(o->path = strdup(path)))
		return xalloc_err_in(err, errlen, path, "a copy of the path", strlen(path) + 1);
	o->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (o->dirfd < 0) {
		e = errno;
		outfile_discard(o);
		return errf(err, errlen, "%s: cannot write in %s: %s", path, dir, strerror(e));
	}
	/* publishing an anonymous file links /proc/self/fd/N: no /proc, no anonymous file */
	if (!outfile_no_tmpfile && access("/proc/self/fd", X_OK) == 0) {
		o->fd = openat(o->dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
		if (o->fd >= 0) {
			o->anon = 1;
			return 0;
		}
		if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL && errno != ENOENT) {
			e = errno;
			outfile_discard(o);
			return errf(err, errlen, "%s: cannot create a file in %s: %s", path, dir, strerror(e));
		}
	}
	snprintf(tmp, sizeof tmp, "%s/.%s.tmp.XXXXXX", dir, base);
	o->fd = mkostemp(tmp, O_CLOEXEC);
	if (o->fd < 0) {
		e = errno;
		outfile_discard(o);
		return errf(err, errlen, "%s: cannot create a temporary file in %s: %s", path, dir,
			    strerror(e));
	}
	o->slot = slot_add(tmp);
	if (o->slot < 0) {
		unlink(tmp);
		outfile_discard(o);
		return errf(err, errlen, "%s: too many output files", path);
	}
	return 0;
}

static int flush(struct outfile *o, char *err, size_t errlen)
{
	const unsigned char *p = o->buf;
	size_t left = o->len;
	while (left) {
		ssize_t w = write(o->fd, p, left);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return errf(err, errlen, "%s: write error after %llu bytes: %s", o->path,
				    (unsigned long long)(o->size - left), strerror(errno));
		p += w;
		left -= (size_t)w;
	}
	o->len = 0;
	return 0;
}

unsigned char *outfile_room(struct outfile *o, size_t n, char *err, size_t errlen)
{
	if (!o->buf && !(o->buf = malloc(o->cap))) {
		xalloc_err_in(err, errlen, o->path, "the output buffer", o->cap);
		return NULL;
	}
	if (n > o->cap - o->len && flush(o, err, errlen) < 0)
		return NULL;
	return o->buf + o->len;
}

int outfile_patch(struct outfile *o, uint64_t off, const void *p, size_t n, char *err,
		  size_t errlen)
{
	if (off + n > o->size)
		return errf(err, errlen, "%s: a patch of bytes %llu-%llu past the %llu written",
			    o->path, (unsigned long long)off, (unsigned long long)(off + n),
			    (unsigned long long)o->size);
	uint64_t flushed = o->size - o->len;   /* bytes already in the file; the rest buffered */
	const unsigned char *s = p;
	while (n && off < flushed) {
		size_t k = flushed - off < n ? (size_t)(flushed - off) : n;
		ssize_t w = pwrite(o->fd, s, k, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return errf(err, errlen, "%s: write error at byte %llu: %s", o->path,
				    (unsigned long long)off, w < 0 ? strerror(errno) : "nothing written");
		s += w;
		off += (uint64_t)w;
		n -= (size_t)w;
	}
	if (n)
		memcpy(o->buf + (off - flushed), s, n);
	return 0;
}

int outfile_write(struct outfile *o, const void *p, size_t n, char *err, size_t errlen)
{
	const unsigned char *s = p;
	if (n >= o->cap) {   /* a large piece: from the caller's memory, not through the buffer */
		if (flush(o, err, errlen) < 0)
			return -1;
		while (n) {
			ssize_t w = write(o->fd, s, n < (1u << 30) ? n : 1u << 30);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return errf(err, errlen, "%s: write error after %llu bytes: %s", o->path,
					    (unsigned long long)o->size, strerror(errno));
			s += w;
			n -= (size_t)w;
			o->size += (uint64_t)w;
		}
		return 0;
	}
	while (n) {
		size_t chunk = n < o->cap ? n : o->cap;
		unsigned char *d = outfile_room(o, chunk, err, errlen);
		if (!d)
			return -1;
		memcpy(d, s, chunk);
		outfile_advance(o, chunk);
		s += chunk;
		n -= chunk;
	}
	return 0;
}

int outfile_copy(struct outfile *o, int fd, uint64_t off, uint64_t n, const char *src, char *err,
		 size_t errlen)
{
	loff_t in = (loff_t)off;
	int fallback = 0;

	if (!o->buf && !(o->buf = malloc(o->cap)))
		return xalloc_err_in(err, errlen, o->path, "the output buffer", o->cap);
	if (flush(o, err, errlen) < 0)
		return -1;
	while (n) {
		size_t want = n < (1u << 30) ? (size_t)n : 1u << 30;
		ssize_t got;
		if (!fallback) {
			got = copy_file_range(fd, &in, o->fd, NULL, want, 0);
			if (got < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL ||
					errno == EOPNOTSUPP || errno == EBADF)) {
				fallback = 1;
				continue;
			}
			if (got < 0 && errno == EINTR)
				continue;
			if (got < 0)
				return errf(err, errlen, "%s: copying %s: %s", o->path, src, strerror(errno));
		} else {
			got = pread(fd, o->buf, want < o->cap ? want : o->cap, in);
			if (got < 0 && errno == EINTR)
				continue;
			if (got < 0)
				return errf(err, errlen, "%s: read error at byte %llu: %s", src,
					    (unsigned long long)in, strerror(errno));
			o->len = (size_t)got;
			if (got > 0 && flush(o, err, errlen) < 0)
				return -1;
			in += got;
		}
		if (got == 0)
			return errf(err, errlen, "%s: ends at byte %llu, %llu bytes short (changed while "
				    "being read?)", src, (unsigned long long)in, (unsigned long long)n);
		o->size += (uint64_t)got;
		n -= (uint64_t)got;
	}
	return 0;
}

int outfile_sync(struct outfile *o, char *err, size_t errlen)
{
	if (flush(o, err, errlen) < 0)
		return -1;
	if ((o->mode || !o->anon) && fchmod(o->fd, o->mode ? (mode_t)o->mode : file_mode()) < 0)
		return errf(err, errlen, "%s: chmod: %s", o->path, strerror(errno));
	if (fsync(o->fd) < 0)
		return errf(err, errlen, "%s: fsync: %s", o->path, strerror(errno));
	return 0;
}

/* Links or renames the synced file to path, whose directory is open at dfd. */
static int publish_at(struct outfile *o, int dfd, const char *path, char *err, size_t errlen)
{
	char dir[4096], tmp[4096 + 300];
	const char *base;

	split(path, dir, sizeof dir, &base);
	if (o->anon) {
		/* linkat cannot replace a name: link under a hidden name, then rename over */
		char proc[64];
		snprintf(proc, sizeof proc, "/proc/self/fd/%d", o->fd);
		for (unsigned k = 0;; k++) {
			snprintf(tmp, sizeof tmp, ".%s.tmp.%ld.%u", base, (long)getpid(), k);
			if (linkat(AT_FDCWD, proc, dfd, tmp, AT_SYMLINK_FOLLOW) == 0)
				break;
			if (errno != EEXIST || k > 1000)
				return errf(err, errlen, "%s: cannot link the finished file: %s", path,
					    strerror(errno));
		}
		if (renameat(dfd, tmp, dfd, base) < 0) {
			int e = errno;
			unlinkat(dfd, tmp, 0);
			return errf(err, errlen, "%s: rename: %s", path, strerror(e));
		}
		o->anon = 0;
	} else {
		if (o->slot < 0)
			return errf(err, errlen, "%s: already published", path);
		if (rename(slots[o->slot], path) < 0)
			return errf(err, errlen, "%s: rename: %s", path, strerror(errno));
		slot_drop(o->slot);
		o->slot = -1;
	}
	fsync(dfd);  /* best effort: some filesystems refuse fsync on directories */
	return 0;
}

int outfile_publish(struct outfile *o, char *err, size_t errlen)
{
	return publish_at(o, o->dirfd, o->path, err, errlen);
}

int outfile_publish_as(struct outfile *o, const char *path, char *err, size_t errlen)
{
	char dir[4096];
	const char *base;
	char *p = strdup(path);
	split(path, dir, sizeof dir, &base);
	if (!p || !*base || strlen(path) >= 4096) {
		free(p);
		return errf(err, errlen, "%s: not a file name", path);
	}
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		int e = errno;
		free(p);
		return errf(err, errlen, "%s: cannot write in %s: %s", path, dir, strerror(e));
	}
	int rc = publish_at(o, dfd, path, err, errlen);
	close(dfd);
	if (rc < 0) {
		free(p);
		return -1;
	}
	free(o->path);
	o->path = p;
	return 0;
}

void outfile_discard(struct outfile *o)
{
	if (o->slot >= 0) {
		unlink(slots[o->slot]);
		slot_drop(o->slot);
		o->slot = -1;
	}
	if (o->fd >= 0)
		close(o->fd);
	if (o->dirfd >= 0)
		close(o->dirfd);
	free(o->buf);
	free(o->path);
	memset(o, 0, sizeof *o);
	o->fd = o->dirfd = o->slot = -1;
}

int outfile_sweep(const char *dir, const char *base)
{
	char prefix[300];
	int n = 0;
	if (snprintf(prefix, sizeof prefix, ".%s.tmp.", base) >= (int)sizeof prefix)
		return 0;
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	struct dirent *e;
	struct stat sb;
	while ((e = readdir(d)))
		if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 &&
		    fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(sb.st_mode) && unlinkat(dirfd(d), e->d_name, 0) == 0)
			n++;
	closedir(d);
	return n;
}
