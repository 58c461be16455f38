#include "logscan.h"

#include <limits.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "msg.h"
#include "num.h"
#include "xalloc.h"

#define CHUNK (1 << 16)
#define OVERLAP 128               /* longer than "iteration" + its number, for lines cut by a chunk */
#define MAX_SCAN (256LL << 20)    /* a log without any iteration line in its last 256 MiB: give up */

/* The last "iteration <spaces> N <spaces>/" in buf[0..n), or -1. */
static long long last_in(const char *buf, size_t n)
{
	long long found = -1;
	const char *p = buf, *end = buf + n;
	while ((p = memmem(p, (size_t)(end - p), "iteration", 9))) {
		const char *q = p + 9;
		p += 9;
		if (q >= end || *q != ' ')
			continue;
		while (q < end && *q == ' ')
			q++;
		if (q >= end || !isdigit((unsigned char)*q))
			continue;
		uint64_t v;
		int rc = num_scan(&q, end, &v);
		while (q < end && *q == ' ')
			q++;
		/* a number too big for a count is no iteration of a real run: not progress */
		if (q < end && *q == '/' && rc == NUM_OK && v <= (uint64_t)LLONG_MAX)
			found = (long long)v;
	}
	return found;
}

int logscan_last_iteration(const char *path, long long *iter, time_t *mtime,
			    char *err, size_t errlen)
{
	struct stat st;
	char *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	long long end, scanned = 0;

	if (fd < 0 || fstat(fd, &st) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return errf(err, errlen, "%s: %s", path, strerror(e));
	}
	*mtime = st.st_mtime;
	buf = malloc(CHUNK + OVERLAP);
	if (!buf) {
		close(fd);
		return xalloc_err_in(err, errlen, path, "its read buffer", CHUNK + OVERLAP);
	}
	/* read backwards: the interesting line is near the end of a file that can be gigabytes */
	end = st.st_size;
	while (end > 0 && scanned < MAX_SCAN) {
		long long start = end > CHUNK ? end - CHUNK : 0;
		size_t want = (size_t)(end - start) + (end < st.st_size ? OVERLAP : 0);
		if (start + (long long)want > st.st_size)
			want = (size_t)(st.st_size - start);
		ssize_t r = pread(fd, buf, want, start);
		if (r < 0) {
			int e = errno;
			free(buf);
			close(fd);
			return errf(err, errlen, "%s: %s", path, strerror(e));
		}
		long long v = last_in(buf, (size_t)r);
		if (v >= 0) {
			*iter = v;
			free(buf);
			close(fd);
			return 1;
		}
		scanned += end - start;
		end = start;
	}
	free(buf);
	close(fd);
	return 0;
}
