/* num - numbers read from flags, config files and log lines: whole ones with their range, and
 * Python float()'s reals (num_float).
 *
 * atoi() and sscanf("%d") take "8x" as 8, wrap 4294967297 to 1 and are undefined past INT_MAX;
 * strtol() accepts leading blanks and a sign where a count has none.  Every number a program
 * reads from outside goes through here instead: the whole string must be the number, the
 * overflow is detected before it happens, and the range is the caller's.
 *
 * Syntax: an optional '-' (only where lo < 0), then decimal digits; an underscore is allowed
 * between two digits (Python's and so Megatron's "5_000_000").  Nothing else: no blanks, no '+',
 * no hex, no suffix. */
#ifndef LMTK_NUM_H
#define LMTK_NUM_H

#include <stddef.h>
#include <stdint.h>

enum { NUM_OK = 0, NUM_SYNTAX = -1, NUM_RANGE = -2 };

/* s as a whole number in [lo, hi]: NUM_OK and *v; NUM_SYNTAX (not a number; *v untouched) or
 * NUM_RANGE (a number outside [lo, hi], however large; *v untouched). */
int num_int(const char *s, int64_t lo, int64_t hi, int64_t *v);

/* num_int() for the common case of a count in [lo, hi] from a flag: 0, or -1 with err holding
 * "'8x' is not a whole number" / "4294967297 is outside 1..256" (the caller adds the flag). */
int num_flag(const char *s, int64_t lo, int64_t hi, int64_t *v, char *err, size_t errlen);

/* Scans the digits at *p, up to end (NULL: the string's NUL), with no sign or underscore (text
 * written by a program, such as a log line) into *v and advances *p past them.  NUM_OK;
 * NUM_SYNTAX when *p is not at a digit; NUM_RANGE when the digits pass UINT64_MAX (*p is still
 * advanced past them all, *v untouched). */
int num_scan(const char **p, const char *end, uint64_t *v);

/* s as a finite real number, Python's float() as Megatron reads a flag: strtod's syntax, with an
 * underscore allowed between two digits ("1_000.5"), no leading blank, nothing after it.  0 and
 * *v, or -1 (*v untouched). */
int num_float(const char *s, double *v);

#endif
