/* units - the sizes, durations and percentages users type in flags and config files.
 *
 * Sizes are binary (K = KiB, ..., P = PiB; "10M" = 10 MiB, a bare number is bytes, "B" allowed)
 * because that is what df -h and du -h print.  Durations accept s/m/h/d suffixes; a bare number
 * is minutes, the unit the old scripts' flags used (--grace 30 = 30 minutes). */
#ifndef LMTK_UNITS_H
#define LMTK_UNITS_H

#include <stddef.h>
#include <time.h>

int units_size(const char *s, unsigned long long *bytes);   /* 0 or -1 */
int units_duration(const char *s, long *seconds);            /* 0 or -1 */
int units_percent(const char *s, double *pct);               /* "85%" or "85" -> 85.0; 0 or -1 */

/* "1.50 GiB", "512 B"; returns buf */
char *units_fmt_size(unsigned long long bytes, char *buf, size_t len);
/* Python timedelta style, as the old scripts printed: "7:24:19", "3 days, 7:24:19" */
char *units_fmt_delta(long seconds, char *buf, size_t len);
/* Seconds on the monotonic clock: for durations and rates, never for dates */
double units_now(void);
/* "2021-08-08 01:49:40" local time */
char *units_fmt_time(time_t t, char *buf, size_t len);

#endif
