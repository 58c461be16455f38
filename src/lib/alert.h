/* alert - what every watchdog does with a finding: print it, log it, mail it once.
 *
 * The old hourly scripts mailed the same alert every hour until someone fixed the problem, and
 * never said when it was fixed.  Here a run "raises" each condition it finds under a stable key
 * ("not-scheduled", "node:n2", "space:/work"); alerts_end() compares the set with the state file:
 *
 *   new key                -> alert mail
 *   key still raised       -> nothing, or a reminder once every --remind-every (default 6h)
 *   key no longer raised   -> one "recovered" mail, key forgotten
 *
 * A mail that fails is not recorded as sent, so the next run tries again.  The state file is a
 * small JSON document written atomically under a lock file, so overlapping cron runs can't lose
 * each other's updates; programs may keep their own memory in it too (alerts_data()).  Without
 * --state-file there is no memory: every run mails every alert, as the old scripts did.
 *
 * The options are shared: every watchdog stacks alert_opts after its own table. */
#ifndef LMTK_ALERT_H
#define LMTK_ALERT_H

#include <jansson.h>
#include <stddef.h>

#include "mail.h"
#include "opt.h"

struct alert_cfg {
	struct mail_cfg mail;
	const char *log;        /* --log: report lines appended here too */
	const char *state;      /* --state-file */
	long remind_every;      /* seconds; 0 = never remind */
	int no_mail;            /* --no-mail */
};

extern const struct opt alert_opts[];
/* the old BigScience watchdog scripts' flags these options replace (opt.h hints) */
extern const struct opt_hint alert_hints[];
void alert_cfg_init(struct alert_cfg *cfg);
int alert_opt(void *cfg, int key, const char *arg, char *err, size_t errlen);

struct alerts;

/* Opens the log and loads the state (waiting for the lock).  NULL + err on failure. */
struct alerts *alerts_begin(struct alert_cfg *cfg, char *err, size_t errlen);
/* Program-owned object kept in the state file between runs (never NULL). */
json_t *alerts_data(struct alerts *a);
void alerts_raise(struct alerts *a, const char *key, const char *subject, const char *body);
/* This run could not check `key` ("node:*": any key so prefixed; NULL: anything): keep its alert as it is instead of taking a
 * silence for a recovery - a "[RECOVERED]" mail while SLURM is down would be a lie. */
void alerts_hold(struct alerts *a, const char *key);
/* Sends what is due, saves the state, frees a.  Returns the number of mails that failed
 * (each reported on stderr), or -1 with err filled if the state could not be saved. */
int alerts_end(struct alerts *a, char *err, size_t errlen);

#endif
