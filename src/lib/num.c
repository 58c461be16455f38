/* num - see num.h. */
#include "num.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int num_int(const char *s, int64_t lo, int64_t hi, int64_t *v)
{
	int neg = 0, digits = 0, over = 0;
	uint64_t x = 0;
	/* the magnitude's limit: INT64_MIN's is one past INT64_MAX's */
	const uint64_t lim_pos = (uint64_t)INT64_MAX, lim_neg = (uint64_t)INT64_MAX + 1;
	if (!s)
		return NUM_SYNTAX;
	if (*s == '-') {
		neg = 1;
		s++;
	}
	if (*s < '0' || *s > '9')
		return NUM_SYNTAX;
	for (const char *p = s; *p; p++) {
		if (*p == '_') {
			if (p == s || p[-1] < '0' || p[-1] > '9' || p[1] < '0' || p[1] > '9')
				return NUM_SYNTAX;
			continue;
		}
		if (*p < '0' || *p > '9')
			return NUM_SYNTAX;
		unsigned d = (unsigned)(*p - '0');
		if (!over && x > ((neg ? lim_neg : lim_pos) - d) / 10)
			over = 1;   /* keep reading: a letter after it is still a syntax error */
		if (!over)
			x = x * 10 + d;
		digits++;
	}
	if (!digits)
		return NUM_SYNTAX;
	if (over)
		return NUM_RANGE;
	if (neg && x == 0)
		neg = 0;   /* "-0" */
	int64_t r = neg ? (x == lim_neg ? INT64_MIN : -(int64_t)x) : (int64_t)x;
	if (neg && lo >= 0)
		return NUM_RANGE;
	if (r < lo || r > hi)
		return NUM_RANGE;
	*v = r;
	return NUM_OK;
}

int num_flag(const char *s, int64_t lo, int64_t hi, int64_t *v, char *err, size_t errlen)
{
	int rc = num_int(s, lo, hi, v);
	if (rc == NUM_OK)
		return 0;
	if (err && errlen) {
		if (rc == NUM_SYNTAX)
			snprintf(err, errlen, "'%s' is not a whole number", s ? s : "");
		else
			snprintf(err, errlen, "%s is outside %lld..%lld", s, (long long)lo, (long long)hi);
	}
	return -1;
}

int num_scan(const char **p, const char *end, uint64_t *v)
{
	const char *s = *p;
	uint64_t x = 0;
	int over = 0;
#define AT_DIGIT (!(end && s >= end) && *s >= '0' && *s <= '9')
	if (!AT_DIGIT)
		return NUM_SYNTAX;
	for (; AT_DIGIT; s++) {
		unsigned d = (unsigned)(*s - '0');
		if (!over && x > (UINT64_MAX - d) / 10)
			over = 1;
		if (!over)
			x = x * 10 + d;
	}
#undef AT_DIGIT
	*p = s;
	if (over)
		return NUM_RANGE;
	*v = x;
	return NUM_OK;
}

int num_float(const char *s, double *v)
{
	char buf[128], *end;
	size_t n = 0;
	if (!s || !*s || strlen(s) >= sizeof buf)
		return -1;
	for (const char *p = s; *p; p++) {
		if (*p == '_') {
			if (p == s || !isdigit((unsigned char)p[-1]) || !isdigit((unsigned char)p[1]))
				return -1;
			continue;
		}
		buf[n++] = *p;
	}
	buf[n] = '\0';
	errno = 0;
	double x = strtod(buf, &end);
	if (*end || errno || !isfinite(x) || isspace((unsigned char)buf[0]))
		return -1;
	*v = x;
	return 0;
}
