/* tlog - timestamped report lines, to stdout and appended to a log file.
 *
 * The watchdogs' output is meant to land in the training's main log (that is how the on-call
 * person reads it, and how it gets synced to the Hub), so every line starts with
 * "[YYYY-mm-dd HH:MM:SS]" and is appended with a single write(2) on an O_APPEND descriptor:
 * lines from concurrent writers (the trainer, another watchdog) never interleave mid-line. */
#ifndef LMTK_TLOG_H
#define LMTK_TLOG_H

#include <stddef.h>

/* Opens (creating) the log for appending; NULL path = stdout only.  0 or -1 + err. */
int tlog_open(const char *path, char *err, size_t errlen);
/* "[stamp] text\n" to stdout and the log; returns -1 if the log write failed */
int tlog_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* text verbatim (no stamp), same destinations */
int tlog_raw(const char *text);
void tlog_close(void);

#endif
