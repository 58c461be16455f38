/* xalloc - allocation that names what it sizes and how much (see xalloc.h). */
#include "xalloc.h"

#include "msg.h"
#include "units.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *xalloc_msg(char *buf, size_t len, const char *what, size_t bytes)
{
	char sz[32];

	if (!what || !*what)
		what = "a buffer";
	if (bytes == SIZE_MAX)   /* an overflowed count * size: no byte count to print */
		snprintf(buf, len, "out of memory for %s: more than %zu bytes", what, (size_t)SIZE_MAX);
	else if (bytes)
		snprintf(buf, len, "out of memory for %s: %s", what, units_fmt_size(bytes, sz, sizeof sz));
	else
		snprintf(buf, len, "out of memory for %s", what);
	return buf;
}

int xalloc_err(char *err, size_t errlen, const char *what, size_t bytes)
{
	if (err && errlen)
		xalloc_msg(err, errlen, what, bytes);
	return -1;
}

int xalloc_err_in(char *err, size_t errlen, const char *path, const char *what, size_t bytes)
{
	char msg[512];

	return errf(err, errlen, "%s: %s", path, xalloc_msg(msg, sizeof msg, what, bytes));
}

int xalloc_mul(size_t count, size_t size, size_t *bytes)
{
	if (size && count > SIZE_MAX / size) {
		*bytes = SIZE_MAX;
		return -1;
	}
	*bytes = count * size;
	return 0;
}

void xalloc_die(const char *what, size_t bytes)
{
	char msg[512];

	die(EXIT_FAILED, "%s", xalloc_msg(msg, sizeof msg, what, bytes));
}

void *xmalloc(size_t n, const char *what)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		xalloc_die(what, n);
	return p;
}

void *xcalloc(size_t count, size_t size, const char *what)
{
	size_t n;
	void *p;

	if (xalloc_mul(count, size, &n) < 0)
		xalloc_die(what, n);
	p = calloc(n ? count : 1, n ? size : 1);
	if (!p)
		xalloc_die(what, n);
	return p;
}

void *xrealloc(void *p, size_t n, const char *what)
{
	void *q = realloc(p, n ? n : 1);

	if (!q)
		xalloc_die(what, n);
	return q;
}

char *xstrdup(const char *s, const char *what)
{
	size_t n = strlen(s) + 1;
	char *p = xmalloc(n, what);

	return memcpy(p, s, n);
}
