/* slurm-pulse - is the training RUNNING or SCHEDULED, and making progress?  Else alert.
 *
 * The hourly successor of the BigScience runs' slurm-status script: one grep-able
 * "[stamp] PULSE: ..." line per matching job, in that script's wording, then the checks it
 * lacked - exclusive-reservation mode, hang detection from the training log, drained/down nodes,
 * SLURM itself unreachable - each raised through the alert module, which mails once, reminds,
 * and says when it is over.  Exit: 0 healthy, 1 alert, 2 usage, 3 SLURM unreachable.
 *
 * --json gives a script the same report as one object on stdout (jsonout.h): every matching job
 * as squeue described it, each alert under its key, the bad nodes; the PULSE lines go to stderr
 * then, and to --log as always. */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alert.h"
#include "jsonout.h"
#include "msg.h"
#include "opt.h"
#include "logscan.h"
#include "slurm.h"
#include "tlog.h"
#include "units.h"

struct cfg {
	const char *name;
	int regex;
	char users[8192];
	const char *group;
	char partitions[4096];
	int require_running;
	long grace;
	const char *progress_log;
	long stale_after;
	int json;
	struct alert_cfg alert;
};

enum { O_NAME = 'j', O_USER = 'u', O_REGEX = 1, O_GROUP, O_PART, O_REQ, O_GRACE, O_PLOG, O_STALE,
       O_JSON };

static const struct opt opts[] = {
	{"job-name", O_NAME, "NAME", "the training's SLURM job name (required)"},
	{"regex", O_REGEX, NULL, "NAME is an extended regular expression matched against whole job names"},
	{"user", O_USER, "USER", "only jobs of USER (repeatable; default: every user)"},
	{"group", O_GROUP, "GROUP", "only jobs of the members of GROUP (as the old script did)"},
	{"partition", O_PART, "PART", "also check the nodes of PART (repeatable)"},
	{"require-running", O_REQ, NULL, "pending is not enough: alert unless a job RUNS (exclusive reservations)"},
	{"grace", O_GRACE, "DURATION", "with --require-running: tolerate pending this long (default 0; bare number = minutes)"},
	{"progress-log", O_PLOG, "FILE", "the training's main log: alert when no new 'iteration' line appears"},
	{"stale-after", O_STALE, "DURATION", "with --progress-log: how long without a new iteration is a hang (default 60m)"},
	{"json", O_JSON, NULL, "print the jobs, alerts and bad nodes as one JSON object on stdout; the PULSE lines go to stderr (slurm-pulse(1), JSON OUTPUT)"},
	{0},
};

/* Is `item` one of the comma-separated names in `list`? (exact: "gpu" is not in "gpu_p5") */
static int list_has(const char *list, const char *item)
{
	size_t n = strlen(item);
	for (const char *p = list; *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == n && strncmp(p, item, n) == 0)
			return 1;
		if (!e)
			break;
		p = e + 1;
	}
	return 0;
}

/* Appends to a comma-separated list, once. */
static int list_add(char *list, size_t cap, const char *item, char *err, size_t errlen)
{
	if (!*item || strchr(item, ','))
		return errf(err, errlen, "'%s' is not a name", item);
	if (list_has(list, item))
		return 0;
	if (strlen(list) + strlen(item) + 2 > cap)
		return errf(err, errlen, "too many names");
	if (*list)
		strcat(list, ",");
	strcat(list, item);
	return 0;
}

static int on_opt(void *ctx, int key, const char *arg, char *err, size_t errlen)
{
	struct cfg *c = ctx;
	switch (key) {
	case O_NAME: c->name = strdup(arg); return 0;
	case O_REGEX: c->regex = 1; return 0;
	case O_USER:
		/* squeue fails on an unknown user, which would read as "SLURM unreachable" */
		if (!getpwnam(arg))
			return errf(err, errlen, "no such user '%s'", arg);
		return list_add(c->users, sizeof c->users, arg, err, errlen);
	case O_GROUP: c->group = strdup(arg); return 0;
	case O_PART: return list_add(c->partitions, sizeof c->partitions, arg, err, errlen);
	case O_REQ: c->require_running = 1; return 0;
	case O_GRACE:
		if (units_duration(arg, &c->grace) < 0)
			return errf(err, errlen, "'%s' is not a duration (e.g. 30, 30m, 2h)", arg);
		return 0;
	case O_PLOG: c->progress_log = strdup(arg); return 0;
	case O_STALE:
		if (units_duration(arg, &c->stale_after) < 0 || c->stale_after <= 0)
			return errf(err, errlen, "'%s' is not a positive duration (e.g. 45, 45m, 3h)", arg);
		return 0;
	case O_JSON: c->json = 1; return 0;
	}
	return errf(err, errlen, "unhandled option");
}

/* Members of a group: its member list plus users whose primary group it is. */
static void add_group(struct cfg *c)
{
	struct group *g = getgrnam(c->group);
	char err[256];
	struct passwd *pw;

	if (!g)
		die(EXIT_USAGE, "--group: no such group '%s'", c->group);
	for (char **m = g->gr_mem; *m; m++)
		if (list_add(c->users, sizeof c->users, *m, err, sizeof err) < 0)
			die(EXIT_USAGE, "--group %s: %s", c->group, err);
	gid_t gid = g->gr_gid;
	setpwent();
	while ((pw = getpwent()))
		if (pw->pw_gid == gid)
			list_add(c->users, sizeof c->users, pw->pw_name, err, sizeof err);
	endpwent();
	if (!*c->users)
		die(EXIT_USAGE, "--group: group '%s' has no members", c->group);
}

/* --json: the report being built (slurm-pulse(1), JSON OUTPUT); NULL without, and jansson's
 * setters then do nothing */
static json_t *report;

/* A "PULSE: ***ALERT: ...***" line, also kept in the report's alerts under its key. */
static void alert_line(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void alert_line(const char *key, const char *fmt, ...)
{
	char line[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	tlog_line("%s", line);
	json_t *o = json_object();
	json_object_set_new(o, "alert", jsonout_str(key));
	json_object_set_new(o, "message", jsonout_str(line));
	json_array_append_new(json_object_get(report, "alerts"), o);
}

/* A job's PULSE line, also its "line" in the report. */
static void pulse(json_t *job, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pulse(json_t *job, const char *fmt, ...)
{
	char line[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	tlog_line("%s", line);
	json_object_set_new(job, "line", jsonout_str(line));
}

static json_t *job_json(const struct job *j)
{
	if (!report)
		return NULL;
	json_t *o = json_object();
	json_object_set_new(o, "id", jsonout_str(j->id));
	json_object_set_new(o, "name", jsonout_str(j->name));
	json_object_set_new(o, "user", jsonout_str(j->user));
	json_object_set_new(o, "state", jsonout_str(j->state));
	json_object_set_new(o, "partition", jsonout_str(j->partition));
	json_object_set_new(o, "nodelist", jsonout_str(j->nodelist));
	json_object_set_new(o, "elapsed", jsonout_str(j->elapsed));
	json_object_set_new(o, "start", jsonout_str(j->start));
	json_object_set_new(o, "start_time", j->start_t ? json_integer((json_int_t)j->start_t) : json_null());
	json_object_set_new(o, "submit_time", j->submit_t ? json_integer((json_int_t)j->submit_t) : json_null());
	json_object_set_new(o, "reason", jsonout_str(j->reason));
	json_array_append_new(json_object_get(report, "jobs"), o);
	return o;
}

static const char *job_on_partition(const struct job *j, char *buf, size_t len)
{
	snprintf(buf, len, "%s on '%s' partition", j->id, j->partition);
	return buf;
}

/* One PULSE line, in the old script's wording.  Returns 1 running, 2 pending, 0 other. */
static int report_job(const struct job *j, time_t now)
{
	char where[512], delta[64];
	json_t *o = job_json(j);

	job_on_partition(j, where, sizeof where);
	if (strcmp(j->state, "RUNNING") == 0 || strcmp(j->state, "CONFIGURING") == 0) {
		/* the unbalanced parenthesis is the original's; dashboards grep for this line */
		json_object_set_new(o, "status", json_string("running"));
		pulse(o, "PULSE: %s is running for %s since %s (%s (%s)", j->name, j->elapsed, j->start,
		      where, j->nodelist);
		return 1;
	}
	if (strcmp(j->state, "PENDING") == 0) {
		json_object_set_new(o, "status", json_string("pending"));
		if (strcmp(j->reason, "JobArrayTaskLimit") == 0)
			pulse(o, "PULSE: %s is waiting for the previous Job Array job to finish before "
			      "scheduling a new one (%s)", j->name, where);
		else if (strcmp(j->reason, "Dependency") == 0)
			pulse(o, "PULSE: %s is waiting for the previous job to finish before scheduling a "
			      "new one using the dependency mechanism (%s)", j->name, where);
		else if (j->start_t)
			pulse(o, "PULSE: %s is scheduled to start in %s (at %s) (%s)", j->name,
			      units_fmt_delta(j->start_t > now ? (long)(j->start_t - now) : 0, delta,
					      sizeof delta),
			      j->start, where);
		else
			pulse(o, "PULSE: %s is waiting to be scheduled (%s)", j->name, where);
		return 2;
	}
	json_object_set_new(o, "status", json_string("other"));
	pulse(o, "PULSE: %s is %s (%s) (%s)", j->name, j->state, where, j->reason);
	return 0;
}

static void raisef(struct alerts *a, const char *key, const char *subject, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void raisef(struct alerts *a, const char *key, const char *subject, const char *fmt, ...)
{
	char body[8192], host[256] = "?", stamp[32], *full;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(body, sizeof body, fmt, ap);
	va_end(ap);
	gethostname(host, sizeof host - 1);
	if (asprintf(&full, "%s\n\nChecked by %s on %s at %s.\n"
		     "Please reply to this email once the issue has been taken care of.\n",
		     body, prog_name, host, units_fmt_time(time(NULL), stamp, sizeof stamp)) < 0)
		return;
	alerts_raise(a, key, subject, full);
	free(full);
}

/* Hang detection for a running job: see logscan.h for what can be known and how.
 * Returns 1 if it raised an alert. */
struct progress {
	int r;            /* logscan_last_iteration()'s result */
	long long iter;
	time_t mtime;
	char err[1024];
};

static int check_progress(struct cfg *c, struct alerts *a, const struct job *run,
			  const struct progress *pg, time_t now)
{
	json_t *data = alerts_data(a);
	json_t *seen = json_object_get(data, "progress");
	long long iter = pg->iter, prev_iter = -2;
	time_t since, ref;
	char stamp[32], delta[64], subject[1024];
	const char *err = pg->err;
	int r = pg->r;

	if (r < 0 && run->start_t && now - run->start_t < c->stale_after)
		return 0;  /* the job may not have created its log yet */
	if (r < 0) {
		alert_line("progress-log", "PULSE: ***ALERT: %s is running but its progress log cannot be "
			   "read: %s***", run->name, err);
		snprintf(subject, sizeof subject, "[ALERT] %s is running but its progress log is unreadable",
			 c->name);
		raisef(a, "progress-log", subject, "%s: %s", run->name, err);
		return 1;
	}
	if (seen && json_string_value(json_object_get(seen, "log")) &&
	    strcmp(json_string_value(json_object_get(seen, "log")), c->progress_log) == 0)
		prev_iter = json_integer_value(json_object_get(seen, "iteration"));
	if (r == 1 && iter == prev_iter)
		since = (time_t)json_integer_value(json_object_get(seen, "since"));
	else
		since = pg->mtime < now ? pg->mtime : now;  /* upper bound on when that line was written */
	json_object_set_new(data, "progress", json_pack("{s:s, s:I, s:I}", "log", c->progress_log,
		"iteration", (json_int_t)iter, "since", (json_int_t)since));

	/* a job that started after the last iteration line gets the full period from its start; with
	 * no iteration line at all, only the start counts (other writers keep touching the file) */
	if (r == 0 && run->start_t)
		ref = run->start_t;
	else
		ref = run->start_t > since ? run->start_t : since;
	if (now - ref < c->stale_after)
		return 0;
	units_fmt_delta((long)(now - ref), delta, sizeof delta);
	units_fmt_time(since, stamp, sizeof stamp);
	snprintf(subject, sizeof subject, "[ALERT] %s seems to hang: no progress for %s", c->name, delta);
	if (r == 1) {
		alert_line("stale", "PULSE: ***ALERT: %s is RUNNING but seems to hang: no new iteration "
			   "line in %s for %s (last: iteration %lld, seen at %s)***",
			   run->name, c->progress_log, delta, iter, stamp);
		raisef(a, "stale", subject,
		       "***ALERT: %s (%s) is RUNNING but seems to hang***\n\nNo new iteration line in %s "
		       "for %s.\nLast seen: iteration %lld, at %s.\nNodes: %s",
		       run->name, run->id, c->progress_log, delta, iter, stamp, run->nodelist);
	} else {
		alert_line("stale", "PULSE: ***ALERT: %s is RUNNING but seems to hang: no iteration line "
			   "in %s since it started %s ago***", run->name, c->progress_log, delta);
		raisef(a, "stale", subject,
		       "***ALERT: %s (%s) is RUNNING but seems to hang***\n\nNo iteration line in %s "
		       "since the job started, %s ago.\nNodes: %s",
		       run->name, run->id, c->progress_log, delta, run->nodelist);
	}
	return 1;
}

static void check_nodes(struct cfg *c, struct alerts *a, const struct job *jobs, int n,
			const int *match, int *findings)
{
	char parts[8192], nodes[8192], err[1024], subject[1024];
	struct node *bad;
	int nb;

	snprintf(parts, sizeof parts, "%s", c->partitions);
	nodes[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (!match[i])
			continue;
		/* a pending job may list several partitions ("a,b") */
		char *plist = strdup(jobs[i].partition), *save = NULL;
		for (char *p = strtok_r(plist, ",", &save); p; p = strtok_r(NULL, ",", &save))
			list_add(parts, sizeof parts, p, err, sizeof err);
		free(plist);
		if (*jobs[i].nodelist && strlen(nodes) + strlen(jobs[i].nodelist) + 2 < sizeof nodes) {
			if (*nodes)
				strcat(nodes, ",");
			strcat(nodes, jobs[i].nodelist);
		}
	}
	nb = slurm_bad_nodes(parts, nodes, &bad, err, sizeof err);
	if (nb < 0) {
		warn("checking node health: %s", err);
		json_object_set_new(report, "node_error", jsonout_str(err));
		alerts_hold(a, "node:*");  /* can't tell which node alerts still stand */
		return;
	}
	for (int i = 0; i < nb; i++) {
		char key[512];
		snprintf(key, sizeof key, "node:%s", bad[i].name);
		alert_line(key, "PULSE: ***ALERT: node %s is %s: %s ('%s' partition) - add --exclude=%s "
			   "to the next sbatch***", bad[i].name, bad[i].state, bad[i].reason,
			   bad[i].partition, bad[i].name);
		json_t *o = json_object();
		json_object_set_new(o, "name", jsonout_str(bad[i].name));
		json_object_set_new(o, "state", jsonout_str(bad[i].state));
		json_object_set_new(o, "reason", jsonout_str(bad[i].reason));
		json_object_set_new(o, "partition", jsonout_str(bad[i].partition));
		json_array_append_new(json_object_get(report, "bad_nodes"), o);
		snprintf(subject, sizeof subject, "[ALERT] %s: node %s is %s", c->name, bad[i].name,
			 bad[i].state);
		raisef(a, key, subject,
		       "***ALERT: node %s used by %s is %s***\n\nReason given to SLURM: %s\nPartition: %s\n\n"
		       "Until it is repaired, submit with: sbatch --exclude=%s ...",
		       bad[i].name, c->name, bad[i].state, bad[i].reason, bad[i].partition, bad[i].name);
		(*findings)++;
	}
	slurm_nodes_free(bad, nb);
}

/* --json: the mail and state outcome into the report, and the report onto stdout */
static int finish_report(int failed_mail, const char *err)
{
	if (!report)
		return 0;
	json_object_set_new(report, "mail_failures", json_integer(failed_mail > 0 ? failed_mail : 0));
	json_object_set_new(report, "state_error", failed_mail < 0 ? jsonout_str(err) : json_null());
	int rc = jsonout_end(report);
	report = NULL;
	return rc;
}

int main(int argc, char **argv)
{
	static struct cfg c;
	struct optgroup groups[] = {{opts, on_opt, &c, NULL}, {alert_opts, alert_opt, &c.alert, NULL}, {0}};
	struct optspec spec = {
		"--job-name NAME [--regex] [--user U]... [--group G] [--mail-to ADDR]... [options]",
		"Report whether the SLURM job NAME is RUNNING or SCHEDULED, one '[stamp] PULSE:' line per\n"
		"matching job; alert (stdout, --log, mail) when it is neither, when it hangs, or when its\n"
		"nodes are drained or down.  --json: one JSON object of the jobs, alerts and bad nodes\n"
		"instead (the lines go to stderr).  Exit 0 healthy, 1 alert, 2 usage error, 3 SLURM\n"
		"unreachable.",
		groups, alert_hints, 0};
	struct alerts *a;
	struct job *jobs = NULL;
	regex_t re;
	char err[1024], subject[1024];
	int n, running = 0, pending = 0, findings = 0, failed_mail, rc;
	time_t now = time(NULL), oldest_pending = 0;
	const struct job *first_running = NULL;
	struct progress pg = {0, -1, 0, ""};

	msg_init(argv[0]);
	alert_cfg_init(&c.alert);
	c.stale_after = 3600;
	if (opt_parse(&spec, argc, argv) != argc)
		die(EXIT_USAGE, "unexpected argument; see --help");
	if (!c.name)
		die(EXIT_USAGE, "--job-name is required; see --help");
	if (c.grace && !c.require_running)
		die(EXIT_USAGE, "--grace only makes sense with --require-running");
	if (c.regex) {
		char pat[4096];
		snprintf(pat, sizeof pat, "^(%s)$", c.name);
		if ((rc = regcomp(&re, pat, REG_EXTENDED | REG_NOSUB)) != 0) {
			regerror(rc, &re, err, sizeof err);
			die(EXIT_USAGE, "--job-name '%s': bad regular expression: %s", c.name, err);
		}
	}
	if (c.group)
		add_group(&c);
	if (c.json) {
		if (jsonout_begin() < 0)
			die(EXIT_FAILED, "stdout: %s", strerror(errno));
		report = json_object();
		json_object_set_new(report, "job_name", jsonout_str(c.name));
		json_object_set_new(report, "regex", json_boolean(c.regex));
		json_object_set_new(report, "ok", json_false());
		json_object_set_new(report, "running", json_integer(0));
		json_object_set_new(report, "pending", json_integer(0));
		json_object_set_new(report, "jobs", json_array());
		json_object_set_new(report, "alerts", json_array());
		json_object_set_new(report, "bad_nodes", json_array());
		json_object_set_new(report, "node_error", json_null());
		json_object_set_new(report, "progress", json_null());
		json_object_set_new(report, "slurm_error", json_null());
		json_object_set_new(report, "mail_failures", json_integer(0));
		json_object_set_new(report, "state_error", json_null());
	}

	a = alerts_begin(&c.alert, err, sizeof err);
	if (!a)
		die(EXIT_FAILED, "%s", err);
	/* read the progress log before writing anything: it is often also the --log */
	if (c.progress_log) {
		pg.r = logscan_last_iteration(c.progress_log, &pg.iter, &pg.mtime, pg.err, sizeof pg.err);
		json_object_set_new(report, "progress", json_pack("{s:o, s:o, s:o, s:I}",
			"log", jsonout_str(c.progress_log),
			"iteration", pg.r == 1 ? json_integer(pg.iter) : json_null(),
			"error", pg.r < 0 ? jsonout_str(pg.err) : json_null(),
			"stale_after_seconds", (json_int_t)c.stale_after));
	}

	n = slurm_jobs(*c.users ? c.users : NULL, &jobs, err, sizeof err);
	if (n < 0) {
		alert_line("slurm-unreachable", "PULSE: ***ALERT: cannot check %s: SLURM is unreachable: "
			   "%s***", c.name, err);
		json_object_set_new(report, "slurm_error", jsonout_str(err));
		snprintf(subject, sizeof subject, "[ALERT] cannot check %s: SLURM is unreachable", c.name);
		raisef(a, "slurm-unreachable", subject,
		       "***ALERT: slurm-pulse could not ask SLURM about %s***\n\n%s\n\nThe training may be "
		       "fine, but nobody can vouch for it until SLURM answers again.", c.name, err);
		alerts_hold(a, NULL);
		failed_mail = alerts_end(a, err, sizeof err);
		if (failed_mail < 0)
			warn("%s", err);
		finish_report(failed_mail, err);
		return EXIT_FAILED;
	}

	int *match = calloc((size_t)n + 1, sizeof *match);
	for (int i = 0; i < n; i++) {
		match[i] = c.regex ? regexec(&re, jobs[i].name, 0, NULL, 0) == 0
				   : strcmp(jobs[i].name, c.name) == 0;
		if (!match[i])
			continue;
		rc = report_job(&jobs[i], now);
		if (rc == 1) {
			running++;
			if (!first_running)
				first_running = &jobs[i];
		} else if (rc == 2) {
			pending++;
			if (jobs[i].submit_t && (!oldest_pending || jobs[i].submit_t < oldest_pending))
				oldest_pending = jobs[i].submit_t;
		}
	}

	if (!running && !pending) {
		alert_line("not-scheduled", "PULSE: ***ALERT: %s is not RUNNING or SCHEDULED! Alert someone "
			   "at Eng WG***", c.name);
		snprintf(subject, sizeof subject, "[ALERT] %s is neither running nor scheduled to run", c.name);
		raisef(a, "not-scheduled", subject,
		       "***ALERT: %s is neither RUNNING nor SCHEDULED! Alert someone at Eng WG***", c.name);
		findings++;
	} else if (c.require_running && !running) {
		long waited = oldest_pending ? (long)(now - oldest_pending) : 0;
		if (waited >= c.grace) {
			char d[64];
			units_fmt_delta(waited, d, sizeof d);
			alert_line("not-running", "PULSE: ***ALERT: %s is SCHEDULED but not RUNNING (pending "
				   "for %s) on an exclusive reservation***", c.name, d);
			snprintf(subject, sizeof subject, "[ALERT] %s is pending but not running", c.name);
			raisef(a, "not-running", subject,
			       "***ALERT: %s has been pending for %s and nothing runs***\n\nWith an exclusive "
			       "reservation a pending job means the reservation is idle.", c.name, d);
			findings++;
		}
	}
	if (running && c.progress_log)
		findings += check_progress(&c, a, first_running, &pg, now);
	check_nodes(&c, a, jobs, n, match, &findings);

	failed_mail = alerts_end(a, err, sizeof err);
	if (failed_mail < 0 && !report)
		die(EXIT_FAILED, "%s", err);
	free(match);
	slurm_jobs_free(jobs, n);
	rc = failed_mail ? EXIT_FAILED : findings ? EXIT_FINDING : EXIT_OK;
	if (report) {
		if (failed_mail < 0)
			warn("%s", err);
		json_object_set_new(report, "ok", json_boolean(rc == EXIT_OK));
		json_object_set_new(report, "running", json_integer(running));
		json_object_set_new(report, "pending", json_integer(pending));
		if (finish_report(failed_mail, err) < 0)
			return EXIT_FAILED;
	}
	return rc;
}
