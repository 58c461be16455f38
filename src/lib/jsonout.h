/* jsonout - a program's --json report: exactly one JSON object on stdout, and nothing else there.
 *
 * A script that runs `mkindex check --json` or `fs-watchdog --json` reads all of stdout as one
 * document.  A program's text lines come from many places - tlog's timestamped report lines, the
 * alert module's RECOVERED line, a printf in a subcommand - and trusting each of them to know
 * about --json would break the first time one is added.  So jsonout_begin() reserves stdout: it
 * keeps a duplicate of descriptor 1 for the report and points descriptor 1 (and so the stdout
 * FILE, and any child's stdout) at stderr, where whatever else is printed becomes a human message.
 * jsonout_end() then writes the object there: indented by 2, keys in the order they were set,
 * reals to 17 significant digits (exact for a double), as train --dry-run --json writes its plan,
 * and a newline.
 *
 * A run that stops before it has a report (a usage error, an input it cannot read) writes nothing
 * on stdout: its message is on stderr and its exit status says which failure it was, so a script
 * tests the status before it parses. */
#ifndef LMTK_JSONOUT_H
#define LMTK_JSONOUT_H

#include <jansson.h>

/* Reserves stdout for the report; 0, or -1 (errno) when the descriptors cannot be duplicated. */
int jsonout_begin(void);
/* Writes obj (stealing the reference) to the reserved stdout, or to stdout when jsonout_begin()
 * was not called.  0, or -1 when it could not be written (reported on stderr: the caller exits
 * EXIT_FAILED). */
int jsonout_end(json_t *obj);
/* s as a JSON string, any byte that is not UTF-8 (a path is bytes) replaced by U+FFFD, where
 * json_string() would give NULL; JSON null for a NULL s (an optional fact).  Every string from
 * outside - paths, names, messages - goes in through here. */
json_t *jsonout_str(const char *s);

#endif
