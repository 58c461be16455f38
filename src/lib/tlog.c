#include "tlog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "msg.h"
#include "units.h"

static int log_fd = -1;
static const char *log_path;

int tlog_open(const char *path, char *err, size_t errlen)
{
	if (!path)
		return 0;
	log_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (log_fd < 0)
		return errf(err, errlen, "%s: %s", path, strerror(errno));
	log_path = path;
	return 0;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int tlog_raw(const char *text)
{
	size_t n = strlen(text);
	fputs(text, stdout);
	fflush(stdout);
	if (log_fd >= 0 && write_all(log_fd, text, n) < 0) {
		warn("%s: %s", log_path, strerror(errno));
		return -1;
	}
	return 0;
}

int tlog_line(const char *fmt, ...)
{
	char stamp[32], body[8192], *line;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(body, sizeof body, fmt, ap);
	va_end(ap);
	units_fmt_time(time(NULL), stamp, sizeof stamp);
	if (asprintf(&line, "[%s] %s\n", stamp, body) < 0)
		return -1;
	rc = tlog_raw(line);
	free(line);
	return rc;
}

void tlog_close(void)
{
	if (log_fd >= 0)
		close(log_fd);
	log_fd = -1;
}
