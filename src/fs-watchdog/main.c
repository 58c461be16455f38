/* fs-watchdog - space, inode and budget watchdog for a training run's filesystems.
 *
 * The successor of the BigScience runs' daily fs-watchdog script, with its checks made
 * configurable (they were hard-coded, with comments contradicting the code):
 *
 *   --check PATH:space=85%,inodes=85%   filesystem usage through statvfs, as df computes it
 *   --budget DIR:400T[,at=75%]          bytes under DIR (apparent sizes, hard links once: du -sb)
 *   --min-free PATH:100T                space left to unprivileged users (df's Avail)
 *   --checkpoint SAVE[,BACKUP]          the newest checkpoint train saved (SAVE/latest) is
 *   --max-age AGE[,BACKUP_AGE]          younger than AGE, and BACKUP holds it (or one younger
 *                                       than BACKUP_AGE): a run that stopped saving, a backup
 *                                       that stopped copying (slurm/ckpt-backup.slurm)
 *
 * Budgets are measured by walk.c, a parallel tree walk (du over 400 TB took the old script a
 * 2-hour job).  Anything that cannot be checked - a missing mount, an unreadable tree, a bad
 * config line - is itself an alert and makes the exit status 3, never a crash: a watchdog that
 * silently stops watching is worse than none.  Exit: 0 all fine, 1 alert, 2 usage, 3 could not
 * check.
 *
 * --json is for a monitoring script: every check made, with its numbers and its status (ok, alert,
 * error), as one object on stdout (jsonout.h); the timestamped lines go to stderr then, and to
 * --log as always, so the main log reads the same either way. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "alert.h"
#include "jsonout.h"
#include "msg.h"
#include "num.h"
#include "opt.h"
#include "tlog.h"
#include "units.h"
#include "walk.h"
#include "xalloc.h"

enum kind { K_CHECK, K_BUDGET, K_MINFREE, K_CKPT };

struct rule {
	enum kind kind;
	char *path;
	char *backup;                /* K_CKPT: the backup directory, or NULL */
	double space, inodes;        /* K_CHECK: thresholds in %, < 0 = not checked */
	unsigned long long size;     /* K_BUDGET: budget; K_MINFREE: minimum free bytes */
	double at;                   /* K_BUDGET: alert at this % of the budget */
};

struct cfg {
	struct rule *rules;
	int nrules;
	int threads;
	int verbose;
	int one_fs;
	int json;
	long max_age, backup_age;    /* --max-age AGE[,BACKUP_AGE], seconds; -1 not given */
	struct alert_cfg alert;
};

enum { O_VERBOSE = 'v', O_CONFIG = 1, O_CHECK, O_BUDGET, O_MINFREE, O_THREADS, O_XDEV, O_CKPT,
       O_MAXAGE, O_JSON };

static const struct opt opts[] = {
	{"config", O_CONFIG, "FILE", "read settings from FILE: one option per line, without the dashes"},
	{"check", O_CHECK, "PATH:space=P%,inodes=P%", "alert when PATH's filesystem is this full (repeatable)"},
	{"budget", O_BUDGET, "DIR:SIZE[,at=P%]", "alert when the tree under DIR reaches P% (default 100%) of SIZE"},
	{"min-free", O_MINFREE, "PATH:SIZE", "alert when PATH's filesystem has less than SIZE available"},
	{"checkpoint", O_CKPT, "SAVE[,BACKUP]", "alert when train's newest checkpoint in SAVE is older than --max-age, or not in BACKUP"},
	{"max-age", O_MAXAGE, "AGE[,BACKUP_AGE]", "--checkpoint: the newest may be AGE old; BACKUP's, when not the newest, BACKUP_AGE (default 0)"},
	{"threads", O_THREADS, "N", "threads for the budget walk (default: online CPUs)"},
	{"one-file-system", O_XDEV, NULL, "budget walks stay on DIR's filesystem (du -x)"},
	{"verbose", O_VERBOSE, NULL, "also print each measurement, not only findings"},
	{"json", O_JSON, NULL, "print every check, its numbers and status as one JSON object on stdout; "
	 "the report lines go to stderr (fs-watchdog(1), JSON OUTPUT)"},
	{0},
};

static struct rule *new_rule(struct cfg *c, enum kind k, const char *spec, char **rest,
			     char *err, size_t errlen)
{
	const char *colon = strrchr(spec, ':');
	struct rule *r;

	/* the last colon: paths may contain colons, the settings after it never do */
	if (!colon || colon == spec || !colon[1]) {
		errf(err, errlen, "'%s': expected PATH:SETTINGS", spec);
		return NULL;
	}
	r = realloc(c->rules, sizeof *r * (size_t)(c->nrules + 1));
	if (!r) {
		xalloc_err(err, errlen, "the watch rules", sizeof *r * (size_t)(c->nrules + 1));
		return NULL;
	}
	c->rules = r;
	r = &c->rules[c->nrules];
	memset(r, 0, sizeof *r);
	r->kind = k;
	r->path = strndup(spec, (size_t)(colon - spec));
	r->space = r->inodes = -1;
	r->at = 100;
	*rest = strdup(colon + 1);
	return r;
}

static int on_opt(void *ctx, int key, const char *arg, char *err, size_t errlen)
{
	struct cfg *c = ctx;
	struct rule *r;
	char *rest = NULL, *save = NULL, *item;
	int rc = 0;
	int64_t n;

	switch (key) {
	case O_CONFIG:
		return 0;  /* read before the command line, see main() */
	case O_VERBOSE:
		c->verbose = 1;
		return 0;
	case O_JSON:
		c->json = 1;
		return 0;
	case O_XDEV:
		c->one_fs = 1;
		return 0;
	case O_THREADS:
		if (num_int(arg, 1, 1024, &n) != NUM_OK)
			return errf(err, errlen, "'%s' is not a thread count (1-1024)", arg);
		c->threads = (int)n;
		return 0;
	case O_CHECK:
		if (!(r = new_rule(c, K_CHECK, arg, &rest, err, errlen)))
			return -1;
		for (item = strtok_r(rest, ",", &save); item && rc == 0; item = strtok_r(NULL, ",", &save)) {
			double *dst = strncmp(item, "space=", 6) == 0 ? &r->space
				    : strncmp(item, "inodes=", 7) == 0 ? &r->inodes : NULL;
			if (!dst)
				rc = errf(err, errlen, "'%s': expected space=P%% or inodes=P%%", item);
			else if (units_percent(strchr(item, '=') + 1, dst) < 0)
				rc = errf(err, errlen, "'%s': not a percentage", item);
		}
		if (rc == 0 && r->space < 0 && r->inodes < 0)
			rc = errf(err, errlen, "'%s': give space=P%% and/or inodes=P%%", arg);
		break;
	case O_BUDGET:
		if (!(r = new_rule(c, K_BUDGET, arg, &rest, err, errlen)))
			return -1;
		item = strtok_r(rest, ",", &save);
		if (!item || units_size(item, &r->size) < 0 || r->size == 0)
			rc = errf(err, errlen, "'%s': expected a size such as 400T or 512G", item ? item : "");
		while (rc == 0 && (item = strtok_r(NULL, ",", &save)))
			if (strncmp(item, "at=", 3) != 0 || units_percent(item + 3, &r->at) < 0 || r->at <= 0)
				rc = errf(err, errlen, "'%s': expected at=P%%", item);
		break;
	case O_MINFREE:
		if (!(r = new_rule(c, K_MINFREE, arg, &rest, err, errlen)))
			return -1;
		if (units_size(rest, &r->size) < 0)
			rc = errf(err, errlen, "'%s': expected a size such as 100T", rest);
		break;
	case O_CKPT: {
		/* SAVE,BACKUP: the last comma, as the other rules take the last colon */
		const char *comma = strrchr(arg, ',');
		if (!*arg || comma == arg || (comma && !comma[1]))
			return errf(err, errlen, "'%s': expected SAVE or SAVE,BACKUP", arg);
		r = realloc(c->rules, sizeof *r * (size_t)(c->nrules + 1));
		if (!r)
			return xalloc_err(err, errlen, "the watch rules", sizeof *r * (size_t)(c->nrules + 1));
		c->rules = r;
		r = &c->rules[c->nrules++];
		memset(r, 0, sizeof *r);
		r->kind = K_CKPT;
		r->path = comma ? strndup(arg, (size_t)(comma - arg)) : strdup(arg);
		r->backup = comma ? strdup(comma + 1) : NULL;
		return 0;
	}
	case O_MAXAGE: {
		char *copy = strdup(arg), *comma = strchr(copy, ',');
		if (comma)
			*comma++ = 0;
		c->backup_age = 0;
		if (units_duration(copy, &c->max_age) < 0 || c->max_age <= 0 ||
		    (comma && (units_duration(comma, &c->backup_age) < 0 || c->backup_age < 0)))
			rc = errf(err, errlen, "'%s': expected AGE[,BACKUP_AGE], durations such as 3h or 26h",
				  arg);
		free(copy);
		return rc;
	}
	default:
		return errf(err, errlen, "unhandled option");
	}
	free(rest);
	if (rc == 0)
		c->nrules++;
	else
		free(c->rules[c->nrules].path);
	return rc;
}

struct run {
	struct alerts *alerts;
	int findings, errors;
	char host[256];
	json_t *checks;      /* --json: one object per check made; NULL without */
	char line[4096];     /* the last finding's line */
};

/* --json: the object of one check, {check, path, key, status: "ok", message: null}, appended to
 * the report; the caller adds its numbers, finding() its alert.  NULL without --json (jansson's
 * setters then do nothing). */
static json_t *entry(struct run *run, const char *check, const char *path)
{
	char key[4200];
	if (!run->checks)
		return NULL;
	json_t *e = json_object();
	snprintf(key, sizeof key, "%s:%s", check, path);
	json_object_set_new(e, "check", json_string(check));
	json_object_set_new(e, "path", jsonout_str(path));
	json_object_set_new(e, "key", jsonout_str(key));
	json_object_set_new(e, "status", json_string("ok"));
	json_object_set_new(e, "message", json_null());
	json_array_append_new(run->checks, e);
	return e;
}

static void set_status(json_t *e, const char *status, const char *line)
{
	json_object_set_new(e, "status", json_string(status));
	json_object_set_new(e, "message", jsonout_str(line));
}

static void finding(struct run *run, json_t *e, const char *key, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static void finding(struct run *run, json_t *e, const char *key, const char *path, const char *fmt, ...)
{
	char *line = run->line, subject[1024], body[8192], stamp[32];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof run->line, fmt, ap);
	va_end(ap);
	tlog_line("%s", line);
	set_status(e, strncmp(key, "error:", 6) == 0 ? "error" : "alert", line);
	if (strncmp(key, "error:", 6) == 0)
		snprintf(subject, sizeof subject, "[ALERT] %s cannot check %s", prog_name, path);
	else if (strncmp(key, "checkpoint-age:", 15) == 0)
		snprintf(subject, sizeof subject, "[ALERT] %s: no recent checkpoint", path);
	else if (strncmp(key, "checkpoint-backup:", 18) == 0)
		snprintf(subject, sizeof subject, "[ALERT] %s: the newest checkpoint is not backed up", path);
	else
		snprintf(subject, sizeof subject, "[ALERT] %s filesystem is getting close to being full", path);
	snprintf(body, sizeof body,
		 "***ALERT: %s needs attention***\n\n%s\n\nChecked by %s on %s at %s.\n"
		 "Please reply to this email once the issue has been taken care of.\n",
		 path, line, prog_name, run->host, units_fmt_time(time(NULL), stamp, sizeof stamp));
	alerts_raise(run->alerts, key, subject, body);
	run->findings++;
}

/* `checks`: the names of the checks this makes impossible, each an "error" entry of --json
 * (NULL-terminated; the alert itself is one, under error:PATH) */
static void cannot_check(struct run *run, const char *path, const char *why, const char *const *checks)
{
	char key[4200];
	/* silence about this path is not a recovery */
	for (const char *const *k = (const char *const[]){"space", "inodes", "min-free", "budget",
							  "checkpoint-age", "checkpoint-backup",
							  NULL}; *k; k++) {
		snprintf(key, sizeof key, "%s:%s", *k, path);
		alerts_hold(run->alerts, key);
	}
	snprintf(key, sizeof key, "error:%s", path);
	finding(run, NULL, key, path, "[ALERT] cannot check %s: %s", path, why);
	for (const char *const *k = checks; run->checks && *k; k++) {
		json_t *e = entry(run, *k, path);
		json_object_set_new(e, "key", jsonout_str(key));
		set_status(e, "error", run->line);
	}
	run->errors++;
}

#define JSET(e, k, v) json_object_set_new(e, k, v)
#define JINT(v) json_integer((json_int_t)(v))

static void check_fs(struct cfg *c, struct run *run, const struct rule *r)
{
	struct statvfs sv;
	char key[4200], a[64], b[64];
	json_t *e;

	if (statvfs(r->path, &sv) < 0) {
		const char *checks[3] = {NULL, NULL, NULL}, **k = checks;
		if (r->kind == K_MINFREE)
			*k++ = "min-free";
		if (r->kind == K_CHECK && r->space >= 0)
			*k++ = "space";
		if (r->kind == K_CHECK && r->inodes >= 0)
			*k++ = "inodes";
		cannot_check(run, r->path, strerror(errno), checks);
		return;
	}
	unsigned long long used = (unsigned long long)(sv.f_blocks - sv.f_bfree) * sv.f_frsize;
	unsigned long long avail = (unsigned long long)sv.f_bavail * sv.f_frsize;

	if (r->kind == K_MINFREE) {
		e = entry(run, "min-free", r->path);
		JSET(e, "available_bytes", JINT(avail));
		JSET(e, "minimum_bytes", JINT(r->size));
		if (c->verbose)
			tlog_line("%s: %s available (minimum %s)", r->path,
				  units_fmt_size(avail, a, sizeof a), units_fmt_size(r->size, b, sizeof b));
		if (avail < r->size) {
			snprintf(key, sizeof key, "min-free:%s", r->path);
			finding(run, e, key, r->path,
				"[ALERT] %s is getting close to being full: %s available, less than the %s minimum",
				r->path, units_fmt_size(avail, a, sizeof a), units_fmt_size(r->size, b, sizeof b));
		}
		return;
	}
	if (r->space >= 0) {
		/* df's Use%: the root-reserved blocks count as neither used nor available */
		double pct = used + avail ? 100.0 * (double)used / (double)(used + avail) : 0;
		e = entry(run, "space", r->path);
		JSET(e, "used_percent", json_real(pct));
		JSET(e, "used_bytes", JINT(used));
		JSET(e, "total_bytes", JINT(used + avail));
		JSET(e, "alert_percent", json_real(r->space));
		if (c->verbose)
			tlog_line("%s: space %.2f%% used (%s of %s; alert at %g%%)", r->path, pct,
				  units_fmt_size(used, a, sizeof a), units_fmt_size(used + avail, b, sizeof b), r->space);
		if (pct >= r->space) {
			snprintf(key, sizeof key, "space:%s", r->path);
			finding(run, e, key, r->path,
				"[ALERT] %s is getting close to being full: space at %.2f%% (%s of %s; alert at %g%%)",
				r->path, pct, units_fmt_size(used, a, sizeof a),
				units_fmt_size(used + avail, b, sizeof b), r->space);
		}
	}
	if (r->inodes >= 0) {
		e = entry(run, "inodes", r->path);
		JSET(e, "alert_percent", json_real(r->inodes));
		if (sv.f_files == 0) {  /* btrfs and some network filesystems have no inode limit */
			JSET(e, "used_percent", json_null());
			JSET(e, "used", json_null());
			JSET(e, "total", json_null());
			if (c->verbose)
				tlog_line("%s: no inode limit on this filesystem", r->path);
			return;
		}
		unsigned long long iu = sv.f_files - sv.f_ffree;
		double pct = 100.0 * (double)iu / (double)sv.f_files;
		JSET(e, "used_percent", json_real(pct));
		JSET(e, "used", JINT(iu));
		JSET(e, "total", JINT(sv.f_files));
		if (c->verbose)
			tlog_line("%s: inodes %.2f%% used (%llu of %llu; alert at %g%%)", r->path, pct, iu,
				  (unsigned long long)sv.f_files, r->inodes);
		if (pct >= r->inodes) {
			snprintf(key, sizeof key, "inodes:%s", r->path);
			finding(run, e, key, r->path,
				"[ALERT] %s is getting close to being full: inodes at %.2f%% (%llu of %llu; alert at %g%%)",
				r->path, pct, iu, (unsigned long long)sv.f_files, r->inodes);
		}
	}
}

static void check_budget(struct cfg *c, struct run *run, const struct rule *r)
{
	struct walk_result w;
	char err[1024], key[4200], a[64], b[64];

	static const char *const budget[] = {"budget", NULL};

	if (walk_tree(r->path, c->threads, c->one_fs, &w, err, sizeof err) < 0) {
		cannot_check(run, r->path, err, budget);
		return;
	}
	if (w.errors) {
		/* a partial sum could hide the very growth we watch for */
		snprintf(err, sizeof err, "%llu unreadable entries, e.g. %s", w.errors, w.first_error);
		cannot_check(run, r->path, err, budget);
	}
	double pct = 100.0 * (double)w.bytes / (double)r->size;
	json_t *e = entry(run, "budget", r->path);
	JSET(e, "bytes", JINT(w.bytes));
	JSET(e, "inodes", JINT(w.inodes));
	JSET(e, "budget_bytes", JINT(r->size));
	JSET(e, "used_percent", json_real(pct));
	JSET(e, "alert_percent", json_real(r->at));
	if (c->verbose)
		tlog_line("%s: %llu bytes (%s) in %llu inodes, %.2f%% of its %s budget (alert at %g%%)",
			  r->path, w.bytes, units_fmt_size(w.bytes, a, sizeof a), w.inodes, pct,
			  units_fmt_size(r->size, b, sizeof b), r->at);
	if (pct >= r->at) {
		snprintf(key, sizeof key, "budget:%s", r->path);
		finding(run, e, key, r->path,
			"[ALERT] %s is getting close to being full: %s used, %.2f%% of its %s budget (alert at %g%%)",
			r->path, units_fmt_size(w.bytes, a, sizeof a), pct, units_fmt_size(r->size, b, sizeof b),
			r->at);
	}
}

/* The step `latest` names in dir and its save time (its manifest's modification time).
 * 1 found, 0 none (*why says what is there instead), -1 dir cannot be read (*why). */
static int newest_step(const char *dir, char *name, size_t namelen, time_t *saved, char *why,
		       size_t whylen)
{
	char p[4400], buf[300];
	struct stat sb;
	if (stat(dir, &sb) < 0)
		return errf(why, whylen, "%s", strerror(errno)), -1;
	if (!S_ISDIR(sb.st_mode))
		return errf(why, whylen, "not a directory"), -1;
	snprintf(p, sizeof p, "%s/latest", dir);
	FILE *f = fopen(p, "r");
	if (!f) {
		if (errno != ENOENT)
			return errf(why, whylen, "%s: %s", p, strerror(errno)), -1;
		snprintf(why, whylen, "no checkpoint (no %s)", p);
		return 0;
	}
	if (!fgets(buf, sizeof buf, f))
		buf[0] = 0;
	fclose(f);
	buf[strcspn(buf, "\r\n")] = 0;
	char *end;
	if (strncmp(buf, "global_step", 11) != 0 || buf[11] < '0' || buf[11] > '9' ||
	    (strtoll(buf + 11, &end, 10), *end)) {
		snprintf(why, whylen, "%s names '%.100s', not a step", p, buf);
		return 0;
	}
	snprintf(p, sizeof p, "%s/%s/manifest.json", dir, buf);
	if (stat(p, &sb) < 0) {
		snprintf(why, whylen, "%s/latest names %s, which has no manifest.json", dir, buf);
		return 0;
	}
	snprintf(name, namelen, "%s", buf);
	*saved = sb.st_mtime;
	return 1;
}

static void check_checkpoint(struct cfg *c, struct run *run, const struct rule *r)
{
	char key[4200], why[4600], step[300], bstep[300], d1[64], d2[64], t[32];
	time_t saved, bsaved, now = time(NULL);
	json_t *e = NULL;
	int rc = newest_step(r->path, step, sizeof step, &saved, why, sizeof why);
	if (rc < 0) {
		const char *checks[3] = {NULL, NULL, NULL}, **k = checks;
		if (c->max_age > 0)
			*k++ = "checkpoint-age";
		if (r->backup)
			*k++ = "checkpoint-backup";
		cannot_check(run, r->path, why, checks);
		return;
	}
	snprintf(key, sizeof key, "checkpoint-age:%s", r->path);
	if (c->max_age > 0) {
		e = entry(run, "checkpoint-age", r->path);
		JSET(e, "step", rc == 1 ? jsonout_str(step) : json_null());
		JSET(e, "saved", rc == 1 ? JINT(saved) : json_null());
		JSET(e, "age_seconds", rc == 1 ? JINT(now - saved) : json_null());
		JSET(e, "max_age_seconds", JINT(c->max_age));
	}
	if (rc == 0) {
		if (c->max_age > 0)
			finding(run, e, key, r->path, "[ALERT] %s has no usable checkpoint: %s", r->path, why);
		else
			alerts_hold(run->alerts, key);
		if (r->backup) {   /* nothing to back up yet: the backup's alert stays as it is */
			snprintf(key, sizeof key, "checkpoint-backup:%s", r->path);
			alerts_hold(run->alerts, key);
		}
		return;
	}
	long age = (long)(now - saved);
	if (c->verbose)
		tlog_line("%s: the newest checkpoint is %s, saved %s ago (%s)%s%s", r->path, step,
			  units_fmt_delta(age, d1, sizeof d1), units_fmt_time(saved, t, sizeof t),
			  c->max_age > 0 ? "; alert after " : "",
			  c->max_age > 0 ? units_fmt_delta(c->max_age, d2, sizeof d2) : "");
	if (c->max_age > 0 && age > c->max_age)
		finding(run, e, key, r->path, "[ALERT] %s: the newest checkpoint, %s, was saved %s ago (%s), "
			"more than %s: is the run still saving?", r->path, step,
			units_fmt_delta(age, d1, sizeof d1), units_fmt_time(saved, t, sizeof t),
			units_fmt_delta(c->max_age, d2, sizeof d2));
	if (!r->backup)
		return;

	snprintf(key, sizeof key, "checkpoint-backup:%s", r->path);
	rc = newest_step(r->backup, bstep, sizeof bstep, &bsaved, why, sizeof why);
	if (rc < 0) {
		static const char *const backup[] = {"checkpoint-backup", NULL};
		cannot_check(run, r->backup, why, backup);
		alerts_hold(run->alerts, key);
		return;
	}
	e = entry(run, "checkpoint-backup", r->path);
	JSET(e, "backup", jsonout_str(r->backup));
	JSET(e, "step", jsonout_str(step));
	JSET(e, "backup_step", rc == 1 ? jsonout_str(bstep) : json_null());
	JSET(e, "backup_age_seconds", rc == 1 ? JINT(now - bsaved) : json_null());
	JSET(e, "backup_max_age_seconds", JINT(c->backup_age > 0 ? c->backup_age : 0));
	if (rc == 1 && strcmp(bstep, step) == 0) {
		if (c->verbose)
			tlog_line("%s: holds %s, the newest checkpoint", r->backup, bstep);
		return;
	}
	long bage = rc == 1 ? (long)(now - bsaved) : -1;
	if (rc == 1 && c->verbose)
		tlog_line("%s: its newest is %s, saved %s ago%s%s", r->backup, bstep,
			  units_fmt_delta(bage, d1, sizeof d1), c->backup_age > 0 ?
			  "; the newest checkpoint may be missing from it for " : "",
			  c->backup_age > 0 ? units_fmt_delta(c->backup_age, d2, sizeof d2) : "");
	if (rc == 1 && c->backup_age > 0 && bage <= c->backup_age)
		return;
	if (rc == 0)
		finding(run, e, key, r->path, "[ALERT] %s: the newest checkpoint, %s, is not backed up: %s "
			"has %s", r->path, step, r->backup, why);
	else
		finding(run, e, key, r->path, "[ALERT] %s: the newest checkpoint, %s, is not backed up: the "
			"newest in %s is %s, saved %s ago", r->path, step, r->backup, bstep,
			units_fmt_delta(bage, d1, sizeof d1));
}

int main(int argc, char **argv)
{
	static struct cfg c;
	struct optgroup groups[] = {{opts, on_opt, &c, NULL}, {alert_opts, alert_opt, &c.alert, NULL}, {0}};
	struct optspec spec = {
		"[--config FILE] [--check PATH:space=85%,inodes=85%]... [--budget DIR:SIZE]... "
		"[--min-free PATH:SIZE]... [--checkpoint SAVE[,BACKUP]]... [--max-age AGE[,BACKUP_AGE]] "
		"[--mail-to ADDR]... [options]",
		"Check the run's filesystems: usage and inodes (statvfs), the bytes of directory trees\n"
		"against budgets (a parallel walk, hard links counted once), and the space left; that\n"
		"train's newest checkpoint is recent and backed up.  Prints\n"
		"one '[ALERT] ...' line per finding, or 'All partitions are in a good standing';\n"
		"with --json, one JSON object of every check instead (the lines go to stderr).\n"
		"Exit 0 fine, 1 alert, 2 usage error, 3 something could not be checked.",
		groups, alert_hints, 0};
	static const char *const deny[] = {"config", NULL};
	struct run run = {0};
	char err[1024], cfg_err[1024] = "";
	const char *config;
	int failed_mail;

	msg_init(argv[0]);
	alert_cfg_init(&c.alert);
	c.max_age = c.backup_age = -1;
	/* the config file first, so that the command line overrides it */
	config = opt_peek(argc, argv, "config");
	if (config)
		opt_parse_file(&spec, config, deny, cfg_err, sizeof cfg_err);  /* reported as an alert below */
	if (opt_parse(&spec, argc, argv) != argc)
		die(EXIT_USAGE, "unexpected argument; see --help");
	if (!c.nrules && !cfg_err[0])
		die(EXIT_USAGE, "nothing to check: give --check, --budget, --min-free, --checkpoint or "
		    "--config");
	for (int i = 0; i < c.nrules; i++)
		if (c.rules[i].kind == K_CKPT && !c.rules[i].backup && c.max_age <= 0)
			die(EXIT_USAGE, "--checkpoint %s: nothing to check without --max-age (or a ,BACKUP)",
			    c.rules[i].path);

	gethostname(run.host, sizeof run.host - 1);
	if (c.json) {
		if (jsonout_begin() < 0)
			die(EXIT_FAILED, "stdout: %s", strerror(errno));
		run.checks = json_array();
	}
	run.alerts = alerts_begin(&c.alert, err, sizeof err);
	if (!run.alerts)
		die(EXIT_FAILED, "%s", err);
	if (cfg_err[0]) {
		static const char *const config_check[] = {"config", NULL};
		cannot_check(&run, config, cfg_err, config_check);
	}
	for (int i = 0; i < c.nrules; i++) {
		if (c.rules[i].kind == K_BUDGET)
			check_budget(&c, &run, &c.rules[i]);
		else if (c.rules[i].kind == K_CKPT)
			check_checkpoint(&c, &run, &c.rules[i]);
		else
			check_fs(&c, &run, &c.rules[i]);
	}
	if (!run.findings)
		tlog_line("All partitions are in a good standing");
	failed_mail = alerts_end(run.alerts, err, sizeof err);
	if (failed_mail < 0 && !c.json)
		die(EXIT_FAILED, "%s", err);
	int rc = run.errors || failed_mail ? EXIT_FAILED : run.findings ? EXIT_FINDING : EXIT_OK;
	if (c.json) {
		if (failed_mail < 0)
			warn("%s", err);
		json_t *o = json_object();
		json_object_set_new(o, "host", jsonout_str(run.host));
		json_object_set_new(o, "ok", json_boolean(rc == EXIT_OK));
		json_object_set_new(o, "alerts", json_integer(run.findings - run.errors));
		json_object_set_new(o, "errors", json_integer(run.errors));
		json_object_set_new(o, "mail_failures", json_integer(failed_mail > 0 ? failed_mail : 0));
		json_object_set_new(o, "state_error", failed_mail < 0 ? jsonout_str(err) : json_null());
		json_object_set_new(o, "checks", run.checks);
		if (jsonout_end(o) < 0)
			return EXIT_FAILED;
	}
	return rc;
}
