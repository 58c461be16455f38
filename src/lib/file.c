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
#include "outfile.h"

int file_write_atomic(const char *path, const void *data, size_t len, mode_t mode,
		 char *err, size_t errlen)
{
	struct outfile o;
	if (outfile_open(&o, path, 1 << 16, err, errlen) < 0)
		return -1;
	o.mode = mode;
	int rc = outfile_write(&o, data, len, err, errlen) < 0 || outfile_sync(&o, err, errlen) < 0 ||
		 outfile_publish(&o, err, errlen) < 0 ? -1 : 0;
	outfile_discard(&o);
	return rc;
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
