/* logscan - has the training made progress lately?  Read off the training's main log.
 *
 * Megatron (and lmtk train) print one " iteration   N/  M | ..." line per logged step.  Those lines
 * carry no timestamp and other programs (this one included) append to the same log, so the
 * file's mtime says little.  What we can know: the number of the last iteration line, and since
 * when we have been seeing that same number (kept in the state file between runs).  Without an
 * earlier sighting, the file's mtime is an upper bound on when that line was written, so a hang is
 * never reported early. */
#ifndef PULSE_LOGSCAN_H
#define PULSE_LOGSCAN_H

#include <stddef.h>
#include <time.h>

/* Returns 1 and sets *iter if an iteration line was found, 0 if none, -1 + err if the file can't
 * be read.  *mtime gets the file's mtime in both non-error cases. */
int logscan_last_iteration(const char *path, long long *iter, time_t *mtime,
			    char *err, size_t errlen);

#endif
