#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "msg.h"

static void split(const char *path, char *dir, size_t dlen, const char **base)
{
	const char *slash = strrchr(path, '/');
	if (!slash) {
		snprintf(dir, dlen, ".");
		*base = path;
	} else if (slash == path) {
		snprintf(dir, dlen, "/");
		*base = slash + 1;
	} else {
		snprintf(dir, dlen, "%.*s", (int)(slash - path), path);
		*base = slash + 1;
	}
}

int file_write_atomic(const char *path, const void *data, size_t len, mode_t mode,
		 char *err, size_t errlen)
{
	char dir[4096], tmp[4096 + 64];
	const char *base, *p = data;
	int fd, e;

	split(path, dir, sizeof dir, &base);
	snprintf(tmp, sizeof tmp, "%s/.%s.tmp.XXXXXX", dir, base);
	fd = mkstemp(tmp);
	if (fd < 0)
		return errf(err, errlen, "%s: cannot create a temporary file in %s: %s", path, dir,
			    strerror(errno));
	while (len) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			goto fail;
		p += w;
		len -= (size_t)w;
	}
	if (fchmod(fd, mode) < 0 || fsync(fd) < 0)
		goto fail;
	if (close(fd) < 0) {
		fd = -1;
		goto fail;
	}
	fd = -1;
	if (rename(tmp, path) < 0)
		goto fail;
	file_fsync_dir(dir);
	return 0;
fail:
	e = errno;
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return errf(err, errlen, "%s: %s", path, strerror(e));
}

int file_read_all(const char *path, char **data, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0, cap = 0;
	int e;

	if (!f)
		goto fail;
	for (;;) {
		if (cap - n < 4096) {
			char *nb = realloc(buf, cap ? cap * 2 : 8192);
			if (!nb)
				goto fail;
			buf = nb;
			cap = cap ? cap * 2 : 8192;
		}
		size_t r = fread(buf + n, 1, cap - n - 1, f);
		n += r;
		if (r == 0)
			break;
	}
	if (ferror(f))
		goto fail;
	fclose(f);
	buf[n] = '\0';
	*data = buf;
	if (len)
		*len = n;
	return 0;
fail:
	e = errno;
	if (f)
		fclose(f);
	free(buf);
	errno = e;
	return errf(err, errlen, "%s: %s", path, strerror(e));
}

void file_fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);   /* best effort: some filesystems refuse fsync on directories */
		close(fd);
	}
}

int file_mkdirs(const char *path, char *err, size_t errlen)
{
	char p[4096];
	struct stat sb;
	size_t n = strlen(path);
	if (n == 0 || n >= sizeof p)
		return errf(err, errlen, "'%s': not a usable directory name", path);
	memcpy(p, path, n + 1);
	for (char *s = p + 1; ; s++) {
		if (*s != '/' && *s)
			continue;
		char c = *s;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return errf(err, errlen, "cannot create %s: %s", p, strerror(errno));
		if (stat(p, &sb) < 0 || !S_ISDIR(sb.st_mode))
			return errf(err, errlen, "%s exists and is not a directory", p);
		*s = c;
		if (!c)
			break;
	}
	return 0;
}
