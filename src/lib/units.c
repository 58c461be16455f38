#include "units.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int units_size(const char *s, unsigned long long *bytes)
{
	static const char suffix[] = "BKMGTPE";
	char *end;
	double v;
	const char *p;

	if (!s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s)
		return -1;
	if (*end) {
		p = strchr(suffix, toupper((unsigned char)*end));
		if (!p)
			return -1;
		v *= pow(1024.0, (double)(p - suffix));
		end++;
		/* accept "10M", "10MB", "10MiB" alike */
		if (p != suffix && (strcasecmp(end, "iB") == 0 || strcasecmp(end, "B") == 0))
			end += strlen(end);
		if (*end)
			return -1;
	}
	if (v > 18446744073709549568.0)
		return -1;
	*bytes = (unsigned long long)v;
	return 0;
}

int units_duration(const char *s, long *seconds)
{
	char *end;
	double v;
	long mult = 60;

	if (!s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s)
		return -1;
	if (*end) {
		switch (*end) {
		case 's': mult = 1; break;
		case 'm': mult = 60; break;
		case 'h': mult = 3600; break;
		case 'd': mult = 86400; break;
		default: return -1;
		}
		if (end[1])
			return -1;
	}
	/* past LONG_MAX the cast is undefined; on x86 "1e20d" would turn negative, i.e. "never" */
	if (v * mult + 0.5 >= (double)LONG_MAX)
		return -1;
	*seconds = (long)(v * mult + 0.5);
	return 0;
}

int units_percent(const char *s, double *pct)
{
	char *end;
	double v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || (*end && strcmp(end, "%") != 0) || v < 0 || v > 100 || isnan(v))
		return -1;
	*pct = v;
	return 0;
}

char *units_fmt_size(unsigned long long bytes, char *buf, size_t len)
{
	static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	double v = (double)bytes;
	int i = 0;

	while (v >= 1024 && i < 6) {
		v /= 1024;
		i++;
	}
	if (i == 0)
		snprintf(buf, len, "%llu B", bytes);
	else
		snprintf(buf, len, "%.2f %s", v, unit[i]);
	return buf;
}

char *units_fmt_delta(long s, char *buf, size_t len)
{
	const char *sign = "";
	long d;

	if (s < 0) {
		sign = "-";
		s = -s;
	}
	d = s / 86400;
	s %= 86400;
	if (d)
		snprintf(buf, len, "%s%ld day%s, %ld:%02ld:%02ld", sign, d, d == 1 ? "" : "s",
			 s / 3600, s / 60 % 60, s % 60);
	else
		snprintf(buf, len, "%s%ld:%02ld:%02ld", sign, s / 3600, s / 60 % 60, s % 60);
	return buf;
}

char *units_fmt_time(time_t t, char *buf, size_t len)
{
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
	return buf;
}

double units_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
