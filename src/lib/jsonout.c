#include "jsonout.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "msg.h"

static int report_fd = -1;   /* the real stdout, while reserved */

int jsonout_begin(void)
{
	fflush(stdout);
	if (report_fd >= 0)
		return 0;
	int fd = fcntl(1, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return -1;
	if (dup2(2, 1) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	report_fd = fd;
	return 0;
}

int jsonout_end(json_t *obj)
{
	FILE *f = stdout;
	int rc = 0;

	fflush(stdout);   /* what went to stderr meanwhile comes before the report */
	if (!obj) {       /* a json_*() constructor could not allocate */
		warn("stdout: no JSON report: memory ran out while building it");
		return -1;
	}
	if (report_fd >= 0 && !(f = fdopen(report_fd, "w"))) {
		warn("stdout: %s", strerror(errno));
		json_decref(obj);
		return -1;
	}
	errno = 0;
	if (json_dumpf(obj, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) < 0 ||
	    fputc('\n', f) == EOF)
		rc = -1;
	if (fflush(f) == EOF || ferror(f))
		rc = -1;
	if (rc < 0)
		warn("stdout: could not write the JSON report%s%s", errno ? ": " : "",
		     errno ? strerror(errno) : "");
	if (f != stdout) {
		fclose(f);
		report_fd = -1;
	}
	json_decref(obj);
	return rc;
}

/* length of the valid UTF-8 sequence at p (n bytes left), 0 if none starts there */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	size_t len;
	unsigned min;
	unsigned c = p[0];
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c < 0xe0)
		len = 2, min = 0x80, c &= 0x1f;
	else if (c >= 0xe0 && c < 0xf0)
		len = 3, min = 0x800, c &= 0x0f;
	else if (c >= 0xf0 && c < 0xf5)
		len = 4, min = 0x10000, c &= 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (p[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c < 0xe000))
		return 0;
	return len;
}

json_t *jsonout_str(const char *s)
{
	if (!s)
		return json_null();
	json_t *j = json_string(s);
	if (j)
		return j;
	/* not UTF-8 (a path is bytes): each stray byte becomes U+FFFD */
	size_t n = strlen(s), o = 0;
	char *buf = malloc(3 * n + 1);
	if (!buf)
		return NULL;
	for (size_t i = 0; i < n;) {
		size_t k = utf8_len((const unsigned char *)s + i, n - i);
		if (k) {
			memcpy(buf + o, s + i, k);
			o += k;
			i += k;
		} else {
			memcpy(buf + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	j = json_stringn(buf, o);
	free(buf);
	return j;
}
