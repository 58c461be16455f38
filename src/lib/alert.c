#include "alert.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "file.h"
#include "lock.h"
#include "msg.h"
#include "tlog.h"
#include "units.h"
#include "xalloc.h"

enum { A_MAIL_TO = 1000, A_SMTP_URL, A_MAIL_FROM, A_SMTP_AUTH, A_LOG, A_STATE, A_REMIND, A_NO_MAIL };

const struct opt alert_opts[] = {
	{"mail-to", A_MAIL_TO, "ADDR", "mail alerts to ADDR (repeatable)"},
	{"smtp-url", A_SMTP_URL, "URL", "SMTP server (default smtp://localhost:25; smtps:// for TLS)"},
	{"mail-from", A_MAIL_FROM, "ADDR", "sender address (default USER@HOST)"},
	{"smtp-auth-file", A_SMTP_AUTH, "FILE", "SMTP user/password/tls settings (never on the command line)"},
	{"no-mail", A_NO_MAIL, NULL, "report and log only, send no mail"},
	{"log", A_LOG, "FILE", "also append every report line to FILE (e.g. the training's main log)"},
	{"state-file", A_STATE, "FILE", "remember alerts here: mail once, remind, mail when recovered"},
	{"remind-every", A_REMIND, "DURATION", "repeat an unresolved alert this often (default 6h; 0 = never)"},
	{0},
};

void alert_cfg_init(struct alert_cfg *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->remind_every = 6 * 3600;
}

const struct opt_hint alert_hints[] = {
	{"no-email", NULL, "--no-email (the old scripts' flag): mail goes out only with --mail-to ADDR, "
	 "so without it none is sent: drop --no-email (--no-mail silences a --mail-to)"},
	{0},
};

int alert_opt(void *ctx, int key, const char *arg, char *err, size_t errlen)
{
	struct alert_cfg *c = ctx;
	switch (key) {
	case A_MAIL_TO: {
		const char **to = realloc(c->mail.to, sizeof *to * (size_t)(c->mail.nto + 1));
		if (!to)
			return xalloc_err(err, errlen, "the --mail-to list",
					  sizeof *to * (size_t)(c->mail.nto + 1));
		if (!strchr(arg, '@') || strpbrk(arg, " \t\r\n<>,"))
			return errf(err, errlen, "'%s' is not a mail address", arg);
		to[c->mail.nto++] = strdup(arg);
		c->mail.to = to;
		return 0;
	}
	case A_SMTP_URL: {
		const char *host = strstr(arg, "://");
		if (!host || (strncmp(arg, "smtp://", 7) != 0 && strncmp(arg, "smtps://", 8) != 0))
			return errf(err, errlen, "'%s' is not an smtp:// or smtps:// URL", arg);
		/* a password in argv is visible to every user through ps */
		if (strchr(host, '@'))
			return errf(err, errlen, "credentials do not belong in the URL; use --smtp-auth-file");
		c->mail.url = strdup(arg);
		return 0;
	}
	case A_MAIL_FROM:
		c->mail.from = strdup(arg);
		return 0;
	case A_SMTP_AUTH:
		c->mail.auth_file = strdup(arg);
		return 0;
	case A_NO_MAIL:
		c->no_mail = 1;
		return 0;
	case A_LOG:
		c->log = strdup(arg);
		return 0;
	case A_STATE:
		c->state = strdup(arg);
		return 0;
	case A_REMIND:
		if (units_duration(arg, &c->remind_every) < 0)
			return errf(err, errlen, "'%s' is not a duration (e.g. 90m, 6h, 1d)", arg);
		return 0;
	}
	return errf(err, errlen, "unhandled option");
}

struct raised {
	char *key, *subject, *body;
	struct raised *next;
};

struct alerts {
	struct alert_cfg *cfg;
	int hold_all;
	struct raised *held;   /* keys (only) that must not clear this run */
	json_t *state;     /* {"alerts": {key: {subject, since, mailed}}, "data": {...}} */
	struct raised *raised;
	struct lock lock;
};

/* The state's lock (lock.h), held until alerts_end.  -1 + err when it cannot be had; a
 * filesystem without flock is watched unlocked, saying so: a watchdog that stopped would be worse
 * than an overlapping run's lost update. */
static int lock_state(struct alerts *a, const char *path, char *err, size_t errlen)
{
	char lp[4096];

	if (snprintf(lp, sizeof lp, "%s.lock", path) >= (int)sizeof lp)
		return errf(err, errlen, "%s: path too long", path);
	/* an overlapping run finishes in seconds; a minute means something is stuck */
	int rc = lock_take(&a->lock, lp, LOCK_RECORD, 60, err, errlen);
	if (rc == LOCK_OK)
		return 0;
	if (rc == LOCK_NOFLOCK) {
		warn("%s; going on without it (overlapping runs may lose an update)", err);
		return 0;
	}
	if (rc == LOCK_BUSY)
		return errf(err, errlen, "%s: held by %s for over a minute (another run stuck?)", lp,
			    a->lock.holder);
	return -1;
}

struct alerts *alerts_begin(struct alert_cfg *cfg, char *err, size_t errlen)
{
	struct alerts *a = calloc(1, sizeof *a);
	json_error_t je;

	if (!a) {
		xalloc_err(err, errlen, "the alerts' state", sizeof *a);
		return NULL;
	}
	a->cfg = cfg;
	a->lock.fd = -1;
	if (tlog_open(cfg->log, err, errlen) < 0)
		goto fail;
	if (cfg->state) {
		if (lock_state(a, cfg->state, err, errlen) < 0)
			goto fail;
		if (access(cfg->state, F_OK) == 0) {
			a->state = json_load_file(cfg->state, 0, &je);
			if (!a->state || !json_is_object(a->state)) {
				/* forgetting is safer than refusing to watch: worst case one extra mail */
				if (a->state)  /* valid JSON leaves je without a line or a reason */
					warn("%s: state is not a JSON object; starting afresh", cfg->state);
				else
					warn("%s:%d: unreadable state (%s); starting afresh", cfg->state,
					     je.line, je.text);
				json_decref(a->state);
				a->state = NULL;
			}
		}
	}
	if (!a->state)
		a->state = json_object();
	if (!json_is_object(json_object_get(a->state, "alerts")))
		json_object_set_new(a->state, "alerts", json_object());
	if (!json_is_object(json_object_get(a->state, "data")))
		json_object_set_new(a->state, "data", json_object());
	return a;
fail:
	lock_release(&a->lock);
	free(a);
	return NULL;
}

json_t *alerts_data(struct alerts *a)
{
	return json_object_get(a->state, "data");
}

void alerts_raise(struct alerts *a, const char *key, const char *subject, const char *body)
{
	struct raised *r = calloc(1, sizeof *r);
	if (!r)
		return;
	r->key = strdup(key);
	r->subject = strdup(subject);
	r->body = strdup(body);
	r->next = a->raised;
	a->raised = r;
}

void alerts_hold(struct alerts *a, const char *key)
{
	struct raised *r;
	if (!key) {
		a->hold_all = 1;
		return;
	}
	if (!(r = calloc(1, sizeof *r)) || !(r->key = strdup(key))) {
		free(r);
		a->hold_all = 1;  /* out of memory: err on the side of silence */
		return;
	}
	r->next = a->held;
	a->held = r;
}

static int deliver(struct alerts *a, const char *subject, const char *body)
{
	char err[1024];
	if (a->cfg->no_mail || a->cfg->mail.nto == 0)
		return 0;
	if (mail_send(&a->cfg->mail, subject, body, err, sizeof err) < 0) {
		warn("%s", err);
		return -1;
	}
	return 0;
}

int alerts_end(struct alerts *a, char *err, size_t errlen)
{
	json_t *known = json_object_get(a->state, "alerts");
	time_t now = time(NULL);
	int failed = 0, rc = 0;
	const char *key;
	json_t *v, *tmp;
	char stamp[32], *text;

	for (struct raised *r = a->raised; r; r = r->next) {
		json_t *k = json_object_get(known, r->key);
		if (!k || !a->cfg->state) {
			if (deliver(a, r->subject, r->body) < 0) {
				failed++;
				if (!k)  /* remember since when, but not as mailed: retried next run */
					json_object_set_new(known, r->key,
						json_pack("{s:s, s:I, s:I}", "subject", r->subject,
							  "since", (json_int_t)now, "mailed", (json_int_t)0));
				continue;
			}
			json_object_set_new(known, r->key,
					    json_pack("{s:s, s:I, s:I}", "subject", r->subject, "since",
						      (json_int_t)now, "mailed", (json_int_t)now));
			continue;
		}
		time_t since = (time_t)json_integer_value(json_object_get(k, "since"));
		time_t mailed = (time_t)json_integer_value(json_object_get(k, "mailed"));
		if (mailed && (a->cfg->remind_every <= 0 || now - mailed < a->cfg->remind_every))
			continue;
		units_fmt_time(since, stamp, sizeof stamp);
		if (asprintf(&text, "%s%s\n(This alert was first raised at %s and is still active.)\n",
			     mailed ? "Reminder: " : "", r->body, stamp) < 0)
			continue;
		if (deliver(a, r->subject, text) == 0)
			json_object_set_new(k, "mailed", json_integer((json_int_t)now));
		else
			failed++;
		free(text);
	}

	/* conditions that were raised before and are not now have cleared */
	json_object_foreach_safe(known, tmp, key, v) {
		int still = a->hold_all;
		for (struct raised *r = a->raised; r && !still; r = r->next)
			still = strcmp(r->key, key) == 0;
		for (struct raised *r = a->held; r && !still; r = r->next) {
			size_t hl = strlen(r->key);
			still = hl && r->key[hl - 1] == '*' ? strncmp(r->key, key, hl - 1) == 0
							    : strcmp(r->key, key) == 0;
		}
		if (still)
			continue;
		const char *subj = json_string_value(json_object_get(v, "subject"));
		time_t since = (time_t)json_integer_value(json_object_get(v, "since"));
		char *s2 = NULL;
		subj = subj ? subj : key;
		if (strncmp(subj, "[ALERT] ", 8) == 0)
			subj += 8;
		units_fmt_time(since, stamp, sizeof stamp);
		if (json_integer_value(json_object_get(v, "mailed")) == 0) {
			json_object_del(known, key);  /* never announced, so nothing to take back */
			continue;
		}
		if (asprintf(&s2, "[RECOVERED] %s", subj) < 0 ||
		    asprintf(&text, "Recovered: %s\n(Raised at %s; cleared at the check of %s.)\n", subj,
			     stamp, units_fmt_time(now, (char[32]){0}, 32)) < 0) {
			free(s2);
			continue;
		}
		tlog_line("RECOVERED: %s", subj);
		if (deliver(a, s2, text) == 0)
			json_object_del(known, key);
		else
			failed++;
		free(s2);
		free(text);
	}

	if (a->cfg->state) {
		char *dump = json_dumps(a->state, JSON_INDENT(1) | JSON_SORT_KEYS);
		if (!dump || file_write_atomic(a->cfg->state, dump, strlen(dump), 0644, err, errlen) < 0)
			rc = -1;
		free(dump);
	}
	while (a->held) {
		struct raised *r = a->held;
		a->held = r->next;
		free(r->key);
		free(r);
	}
	while (a->raised) {
		struct raised *r = a->raised;
		a->raised = r->next;
		free(r->key);
		free(r->subject);
		free(r->body);
		free(r);
	}
	json_decref(a->state);
	lock_release(&a->lock);
	tlog_close();
	free(a);
	return rc < 0 ? -1 : failed;
}
