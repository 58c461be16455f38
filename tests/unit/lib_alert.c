/* lib_alert.c - alerts_begin/raise/end over several "runs" of a watchdog: mail once, stay quiet,
 * remind, recover, retry failed mail, keep program data, survive a broken state file.  Mail goes
 * to the SMTP sink of tests/run.sh and is counted as LMTK_SMTP_DIR/NNNNNN.eml files. */
#include "t.h"
#include "alert.h"
#include "file.h"
#include "msg.h"

#include <fcntl.h>
#include <glob.h>
#include <jansson.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *sink_dir;
static char url[128], top[4096];
static const char *to[] = {"ops@example.org"};

/* --- the sink ------------------------------------------------------------------------------ */

static int mails(glob_t *g)
{
	char pat[4200];
	snprintf(pat, sizeof pat, "%s/*.eml", sink_dir);
	return glob(pat, 0, NULL, g) == 0 ? (int)g->gl_pathc : 0;
}

static void mail_clear(void)
{
	glob_t g;
	for (int i = 0, n = mails(&g); i < n; i++)
		unlink(g.gl_pathv[i]);
	globfree(&g);
}

static int mail_count(void)
{
	glob_t g;
	int n = mails(&g);
	globfree(&g);
	return n;
}

/* mails are stored before the server answers 250, i.e. before mail_send returns; the short poll
 * only covers a slow disk */
static int mail_wait(int want)
{
	for (int i = 0; i < 30 && mail_count() < want; i++)
		usleep(100000);
	return mail_count();
}

/* the Subject of every stored mail, "|"-joined in the sink's order, and the bodies in *bodies */
static const char *subjects(char *bodies, size_t blen)
{
	static char out[8192];
	glob_t g;
	int n = mails(&g);
	out[0] = '\0';
	if (bodies)
		bodies[0] = '\0';
	for (int i = 0; i < n; i++) {
		char *m = NULL, err[512];
		if (file_read_all(g.gl_pathv[i], &m, NULL, err, sizeof err) < 0)
			continue;
		char *s = strstr(m, "\r\nSubject: "), *e = s ? strstr(s + 2, "\r\n") : NULL;
		if (s && e)
			snprintf(out + strlen(out), sizeof out - strlen(out), "%s%.*s", i ? "|" : "",
				 (int)(e - s - 11), s + 11);
		char *b = strstr(m, "\r\n\r\n");
		if (bodies && b)
			snprintf(bodies + strlen(bodies), blen - strlen(bodies), "%s%s", i ? "|" : "", b + 4);
		free(m);
	}
	globfree(&g);
	return out;
}

/* --- runs ---------------------------------------------------------------------------------- */

static const char *at(const char *name)
{
	static char path[8][4300];
	static int i;
	i = (i + 1) % 8;
	snprintf(path[i], sizeof path[i], "%s/%s", top, name);
	return path[i];
}

static void cfg_for(struct alert_cfg *c, const char *state, const char *smtp)
{
	alert_cfg_init(c);
	c->mail.url = smtp;
	c->mail.from = "watchdog@example.org";
	c->mail.to = to;
	c->mail.nto = 1;
	c->state = state;
}

static char run_err[16384], run_out[16384];

static void slurp_into(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, len - 1, f) : 0;
	buf[n] = '\0';
	if (f)
		fclose(f);
}

/* One watchdog run that finds the conditions in `keys` (space-separated, "" for none): each is
 * raised with subject "[ALERT] KEY" and body "body of KEY".  stdout and stderr go to run_out and
 * run_err.  Returns what alerts_end returns (-2 if alerts_begin failed). */
static int run_once(struct alert_cfg *c, const char *keys)
{
	char ko[4300], ke[4300], err[1024] = "", list[1024], *save = NULL;
	int so, se, fo, fe, rc = -2;
	struct alerts *a;

	snprintf(ko, sizeof ko, "%s/run.out", top);
	snprintf(ke, sizeof ke, "%s/run.err", top);
	fflush(stdout);
	fflush(stderr);
	so = dup(1);
	se = dup(2);
	fo = open(ko, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	fe = open(ke, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	dup2(fo, 1);
	dup2(fe, 2);
	close(fo);
	close(fe);
	a = alerts_begin(c, err, sizeof err);
	if (a) {
		snprintf(list, sizeof list, "%s", keys);
		for (char *k = strtok_r(list, " ", &save); k; k = strtok_r(NULL, " ", &save)) {
			char subj[256], body[256];
			snprintf(subj, sizeof subj, "[ALERT] %s", k);
			snprintf(body, sizeof body, "body of %s", k);
			alerts_raise(a, k, subj, body);
		}
		rc = alerts_end(a, err, sizeof err);
	}
	if (err[0])
		fprintf(stderr, "(err: %s)\n", err);
	fflush(stdout);
	fflush(stderr);
	dup2(so, 1);
	dup2(se, 2);
	close(so);
	close(se);
	slurp_into(ko, run_out, sizeof run_out);
	slurp_into(ke, run_err, sizeof run_err);
	return rc;
}

/* the keys of "alerts" in the state file, sorted and space-separated; "<bad>" if unreadable */
static const char *state_keys(const char *state)
{
	static char out[4096];
	json_error_t je;
	json_t *root = json_load_file(state, 0, &je), *al = json_object_get(root, "alerts");
	const char *k;
	json_t *v;
	snprintf(out, sizeof out, "%s", json_is_object(al) ? "" : "<bad>");
	if (json_is_object(al)) {
		/* jansson keeps insertion order; sort by building from a sorted dump */
		char *names[64];
		int n = 0;
		json_object_foreach(al, k, v)
			if (n < 64)
				names[n++] = (char *)k;
		for (int i = 0; i < n; i++)
			for (int j = i + 1; j < n; j++)
				if (strcmp(names[j], names[i]) < 0) {
					char *t = names[i];
					names[i] = names[j];
					names[j] = t;
				}
		for (int i = 0; i < n; i++)
			snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", i ? " " : "", names[i]);
	}
	json_decref(root);
	return out;
}

static void write_file(const char *path, const char *text)
{
	char err[512];
	if (file_write_atomic(path, text, strlen(text), 0644, err, sizeof err) < 0) {
		fprintf(stderr, "%s\n", err);
		exit(2);
	}
}

/* the key alert_opts gives option --name */
static int key_of(const char *name)
{
	for (int i = 0; alert_opts[i].name; i++)
		if (strcmp(alert_opts[i].name, name) == 0)
			return alert_opts[i].key;
	return -1;
}

static void sleep_s(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
	nanosleep(&ts, NULL);
}

int main(void)
{
	const char *port = getenv("LMTK_SMTP_PORT"), *tmp = getenv("LMTK_TMP");
	int sink = port && *port && getenv("LMTK_SMTP_DIR");
	struct alert_cfg c;
	char bodies[16384];

	snprintf(top, sizeof top, "%s/lib_alert.XXXXXX", tmp ? tmp : "/tmp");
	if (!mkdtemp(top)) {
		perror(top);
		return 2;
	}
	msg_init("lib_alert");
	setenv("TZ", "UTC", 1);
	sink_dir = getenv("LMTK_SMTP_DIR");
	if (sink)
		snprintf(url, sizeof url, "smtp://127.0.0.1:%s", port);

	static const char *const needs_sink[] = {
		"alert_first_raise_mails_once_then_stays_quiet",
		"alert_cleared_key_mails_recovered_once_and_is_forgotten",
		"alert_each_key_is_tracked_on_its_own",
		"alert_reminder_once_remind_every_has_passed",
		"alert_remind_every_zero_never_reminds",
		"alert_failed_mail_is_counted_and_retried_next_run",
		"alert_failed_recovery_mail_is_retried_next_run",
		"alert_never_mailed_alert_clears_without_a_recovery_mail",
		"alert_without_state_file_every_run_mails",
		"alert_corrupt_state_file_is_recovered_from_with_a_warning",
		"alert_no_mail_sends_nothing",
	};
	if (!sink)
		for (size_t i = 0; i < sizeof needs_sink / sizeof *needs_sink; i++)
			printf("skip %s: no SMTP sink\n", needs_sink[i]);

	if (sink) {
		T_CASE("alert_first_raise_mails_once_then_stays_quiet") {
			const char *st = at("once.json");
			cfg_for(&c, st, url);
			mail_clear();
			T_ASSERT(run_once(&c, "disk-full") == 0);
			T_ASSERT(mail_wait(1) == 1);
			T_STREQ(subjects(bodies, sizeof bodies), "[ALERT] disk-full");
			T_ASSERT(strncmp(bodies, "body of disk-full", 17) == 0);
			T_STREQ(state_keys(st), "disk-full");
			for (int run = 0; run < 3; run++)
				T_ASSERT(run_once(&c, "disk-full") == 0);
			T_ASSERT(mail_count() == 1);
			T_STREQ(state_keys(st), "disk-full");
		}

		T_CASE("alert_cleared_key_mails_recovered_once_and_is_forgotten") {
			const char *st = at("recover.json");
			cfg_for(&c, st, url);
			c.log = at("recover.log");
			mail_clear();
			T_ASSERT(run_once(&c, "disk-full") == 0);
			T_ASSERT(mail_wait(1) == 1);
			mail_clear();
			T_ASSERT(run_once(&c, "") == 0);
			T_ASSERT(mail_wait(1) == 1);
			T_STREQ(subjects(bodies, sizeof bodies), "[RECOVERED] disk-full");
			T_ASSERT(strstr(bodies, "Recovered: disk-full") != NULL);
			T_STREQ(state_keys(st), "");
			T_ASSERT(strstr(run_out, "] RECOVERED: disk-full\n") != NULL);
			char *log = NULL, e[256];
			T_ASSERT(file_read_all(c.log, &log, NULL, e, sizeof e) == 0);
			T_ASSERT(log && strstr(log, "] RECOVERED: disk-full\n") != NULL);
			free(log);
			T_ASSERT(run_once(&c, "") == 0);
			T_ASSERT(mail_count() == 1);
			/* raised again later: a new alert, not silence */
			T_ASSERT(run_once(&c, "disk-full") == 0);
			T_ASSERT(mail_wait(2) == 2);
			T_STREQ(subjects(NULL, 0), "[RECOVERED] disk-full|[ALERT] disk-full");
		}

		T_CASE("alert_each_key_is_tracked_on_its_own") {
			const char *st = at("keys.json");
			cfg_for(&c, st, url);
			mail_clear();
			T_ASSERT(run_once(&c, "node:n1 node:n2") == 0);
			T_ASSERT(mail_wait(2) == 2);
			T_STREQ(state_keys(st), "node:n1 node:n2");
			mail_clear();
			T_ASSERT(run_once(&c, "node:n2 space:/work") == 0);
			T_ASSERT(mail_wait(2) == 2);
			const char *s = subjects(NULL, 0);
			T_ASSERT(strstr(s, "[RECOVERED] node:n1") != NULL);
			T_ASSERT(strstr(s, "[ALERT] space:/work") != NULL);
			T_ASSERT(strstr(s, "n2") == NULL);
			T_STREQ(state_keys(st), "node:n2 space:/work");
		}

		T_CASE("alert_reminder_once_remind_every_has_passed") {
			const char *st = at("remind.json");
			cfg_for(&c, st, url);
			c.remind_every = 1;
			mail_clear();
			T_ASSERT(run_once(&c, "hung") == 0);
			T_ASSERT(mail_wait(1) == 1);
			sleep_s(1.2);
			T_ASSERT(run_once(&c, "hung") == 0);
			T_ASSERT(mail_wait(2) == 2);
			T_STREQ(subjects(bodies, sizeof bodies), "[ALERT] hung|[ALERT] hung");
			T_ASSERT(strstr(bodies, "|Reminder: body of hung") != NULL);
			T_ASSERT(strstr(bodies, "still active") != NULL);
			/* reminded just now: with a longer period the next run is quiet again */
			c.remind_every = 3600;
			T_ASSERT(run_once(&c, "hung") == 0);
			T_ASSERT(mail_count() == 2);
		}

		T_CASE("alert_remind_every_zero_never_reminds") {
			const char *st = at("noremind.json");
			cfg_for(&c, st, url);
			c.remind_every = 0;
			mail_clear();
			T_ASSERT(run_once(&c, "hung") == 0);
			T_ASSERT(mail_wait(1) == 1);
			sleep_s(1.2);
			T_ASSERT(run_once(&c, "hung") == 0);
			T_ASSERT(mail_count() == 1);
		}

		T_CASE("alert_failed_mail_is_counted_and_retried_next_run") {
			const char *st = at("retry.json");
			cfg_for(&c, st, "smtp://127.0.0.1:1");
			mail_clear();
			T_ASSERT(run_once(&c, "a b") == 2);
			T_ASSERT(strstr(run_err, "lib_alert: mail to ops@example.org via smtp://127.0.0.1:1 failed") != NULL);
			T_STREQ(state_keys(st), "a b");
			c.mail.url = url;
			T_ASSERT(run_once(&c, "a b") == 0);
			T_ASSERT(mail_wait(2) == 2);
			const char *s = subjects(bodies, sizeof bodies);
			T_ASSERT(strstr(s, "[ALERT] a") && strstr(s, "[ALERT] b"));
			T_ASSERT(strstr(bodies, "Reminder") == NULL);  /* it was never sent: not a reminder */
			T_ASSERT(run_once(&c, "a b") == 0);
			T_ASSERT(mail_count() == 2);
		}

		T_CASE("alert_failed_recovery_mail_is_retried_next_run") {
			const char *st = at("recretry.json");
			cfg_for(&c, st, url);
			mail_clear();
			T_ASSERT(run_once(&c, "gone") == 0);
			T_ASSERT(mail_wait(1) == 1);
			c.mail.url = "smtp://127.0.0.1:1";
			T_ASSERT(run_once(&c, "") == 1);
			T_STREQ(state_keys(st), "gone");
			c.mail.url = url;
			mail_clear();
			T_ASSERT(run_once(&c, "") == 0);
			T_ASSERT(mail_wait(1) == 1);
			T_STREQ(subjects(NULL, 0), "[RECOVERED] gone");
			T_STREQ(state_keys(st), "");
		}

		T_CASE("alert_never_mailed_alert_clears_without_a_recovery_mail") {
			const char *st = at("nevermailed.json");
			cfg_for(&c, st, "smtp://127.0.0.1:1");
			mail_clear();
			T_ASSERT(run_once(&c, "blip") == 1);
			c.mail.url = url;
			T_ASSERT(run_once(&c, "") == 0);
			usleep(200000);
			T_ASSERT(mail_count() == 0);
			T_STREQ(state_keys(st), "");
		}

		T_CASE("alert_without_state_file_every_run_mails") {
			cfg_for(&c, NULL, url);
			mail_clear();
			T_ASSERT(run_once(&c, "x") == 0);
			T_ASSERT(run_once(&c, "x") == 0);
			T_ASSERT(mail_wait(2) == 2);
			T_ASSERT(run_once(&c, "") == 0);  /* no memory, so nothing to call recovered */
			usleep(200000);
			T_STREQ(subjects(NULL, 0), "[ALERT] x|[ALERT] x");
		}

		T_CASE("alert_corrupt_state_file_is_recovered_from_with_a_warning") {
			const char *st = at("corrupt.json");
			char want[4400];
			cfg_for(&c, st, url);
			write_file(st, "{\"alerts\": {\"x\": {\"subject\": \"[ALERT] x\"");  /* cut short */
			mail_clear();
			T_ASSERT(run_once(&c, "x") == 0);
			snprintf(want, sizeof want, "lib_alert: %s", st);
			T_ASSERT(strstr(run_err, want) != NULL);
			T_ASSERT(strstr(run_err, "starting afresh") != NULL);
			T_ASSERT(mail_wait(1) == 1);  /* forgotten, so mailed again: the safe side */
			T_STREQ(state_keys(st), "x");
			T_ASSERT(run_once(&c, "x") == 0);
			T_STREQ(run_err, "");
			T_ASSERT(mail_count() == 1);
		}

		T_CASE("alert_no_mail_sends_nothing") {
			const char *st = at("nomail.json");
			cfg_for(&c, st, url);
			c.no_mail = 1;
			mail_clear();
			T_ASSERT(run_once(&c, "x y") == 0);
			T_ASSERT(run_once(&c, "") == 0);
			usleep(200000);
			T_ASSERT(mail_count() == 0);
		}
	}

	/* --- no mail server needed ----------------------------------------------------------- */

	T_CASE("alert_non_object_state_is_replaced_with_a_warning_naming_it") {
		const char *st = at("array.json");
		char want[4400];
		cfg_for(&c, st, "smtp://127.0.0.1:1");
		c.no_mail = 1;
		write_file(st, "[1, 2, 3]\n");
		T_ASSERT(run_once(&c, "k") == 0);
		snprintf(want, sizeof want, "lib_alert: %s: ", st);
		T_ASSERT(strstr(run_err, want) != NULL);
		T_ASSERT(strstr(run_err, "JSON object") != NULL);
		T_STREQ(state_keys(st), "k");
		write_file(st, "{\"alerts\": 5, \"data\": \"x\"}");
		T_ASSERT(run_once(&c, "") == 0);
		T_STREQ(state_keys(st), "");
	}

	T_CASE("alert_data_persists_between_runs") {
		const char *st = at("data.json");
		char err[1024];
		struct alerts *a;
		cfg_for(&c, st, "smtp://127.0.0.1:1");
		c.no_mail = 1;
		a = alerts_begin(&c, err, sizeof err);
		T_ASSERT(a != NULL);
		if (a) {
			json_t *d = alerts_data(a);
			T_ASSERT(json_is_object(d) && json_object_size(d) == 0);
			json_object_set_new(d, "last_iteration", json_integer(4711));
			json_object_set_new(d, "seen", json_string("job 42"));
			T_ASSERT(alerts_end(a, err, sizeof err) == 0);
		}
		T_ASSERT(run_once(&c, "") == 0);  /* a run that does not touch the data */
		a = alerts_begin(&c, err, sizeof err);
		T_ASSERT(a != NULL);
		if (a) {
			json_t *d = alerts_data(a);
			T_ASSERT(json_integer_value(json_object_get(d, "last_iteration")) == 4711);
			T_ASSERT(json_string_value(json_object_get(d, "seen")) &&
				 strcmp(json_string_value(json_object_get(d, "seen")), "job 42") == 0);
			alerts_end(a, err, sizeof err);
		}
	}

	T_CASE("alert_state_lock_serialises_overlapping_runs") {
		/* two processes each add 1 to a counter 30 times, one run per increment; a lost
		 * update would show as a total below 60 */
		enum { PROCS = 2, RUNS = 30 };
		const char *st = at("lock.json");
		char err[1024];
		cfg_for(&c, st, "smtp://127.0.0.1:1");
		c.no_mail = 1;
		for (int p = 0; p < PROCS; p++) {
			fflush(stdout);
			if (fork() == 0) {
				int nul = open("/dev/null", O_WRONLY);
				dup2(nul, 1);
				for (int i = 0; i < RUNS; i++) {
					struct alerts *a = alerts_begin(&c, err, sizeof err);
					if (!a)
						_exit(1);
					json_t *d = alerts_data(a);
					json_int_t n = json_integer_value(json_object_get(d, "n"));
					usleep(2000);  /* widen the read-modify-write window */
					json_object_set_new(d, "n", json_integer(n + 1));
					if (alerts_end(a, err, sizeof err) != 0)
						_exit(1);
				}
				_exit(0);
			}
		}
		int ok = 1, wst;
		for (int p = 0; p < PROCS; p++) {
			wait(&wst);
			ok &= WIFEXITED(wst) && WEXITSTATUS(wst) == 0;
		}
		T_ASSERT(ok);
		json_error_t je;
		json_t *root = json_load_file(st, 0, &je);
		T_ASSERT(json_integer_value(json_object_get(json_object_get(root, "data"), "n")) == PROCS * RUNS);
		json_decref(root);
	}

	T_CASE("alert_state_in_missing_dir_fails_naming_the_path") {
		char err[1024] = "";
		cfg_for(&c, at("no-such-dir/state.json"), "smtp://127.0.0.1:1");
		T_ASSERT(alerts_begin(&c, err, sizeof err) == NULL);
		T_ASSERT(strstr(err, at("no-such-dir/state.json")) != NULL);
	}

	T_CASE("alert_opt_validates_addresses_urls_and_durations") {
		char err[512];
		struct alert_cfg a;
		int to_k = key_of("mail-to"), url_k = key_of("smtp-url"), rem_k = key_of("remind-every");
		alert_cfg_init(&a);
		T_ASSERT(a.remind_every == 6 * 3600);
		T_ASSERT(to_k != -1 && url_k != -1 && rem_k != -1);
		T_ASSERT(alert_opt(&a, to_k, "a@example.org", err, sizeof err) == 0);
		T_ASSERT(alert_opt(&a, to_k, "b@example.org", err, sizeof err) == 0);
		T_ASSERT(a.mail.nto == 2 && strcmp(a.mail.to[1], "b@example.org") == 0);
		T_ASSERT(alert_opt(&a, to_k, "nobody", err, sizeof err) == -1);
		T_ASSERT(strstr(err, "'nobody'") != NULL);
		T_ASSERT(alert_opt(&a, to_k, "a@b, c@d", err, sizeof err) == -1);
		T_ASSERT(alert_opt(&a, to_k, "a@b\r\nBcc: c@d", err, sizeof err) == -1);
		T_ASSERT(a.mail.nto == 2);
		T_ASSERT(alert_opt(&a, url_k, "smtps://mail.example.org:465", err, sizeof err) == 0);
		T_STREQ(a.mail.url, "smtps://mail.example.org:465");
		T_ASSERT(alert_opt(&a, url_k, "http://mail.example.org", err, sizeof err) == -1);
		T_ASSERT(alert_opt(&a, url_k, "smtp://bob:hunter2@mail.example.org", err, sizeof err) == -1);
		T_ASSERT(strstr(err, "hunter2") == NULL);
		T_STREQ(a.mail.url, "smtps://mail.example.org:465");
		T_ASSERT(alert_opt(&a, rem_k, "90m", err, sizeof err) == 0 && a.remind_every == 5400);
		T_ASSERT(alert_opt(&a, rem_k, "0", err, sizeof err) == 0 && a.remind_every == 0);
		T_ASSERT(alert_opt(&a, rem_k, "soon", err, sizeof err) == -1 && a.remind_every == 0);
	}

	T_CASE("alert_opts_stack_into_a_program_table") {
		/* the way every watchdog uses them: its own table, then alert_opts */
		static const struct opt own[] = {{"verbose", 'v', NULL, "more"}, {0}};
		struct alert_cfg a;
		int verbose = 0;
		alert_cfg_init(&a);
		struct optgroup groups[] = {{own, NULL, &verbose, NULL}, {alert_opts, alert_opt, &a, NULL}, {0}};
		struct optspec spec = {"[options]", NULL, groups, NULL, 0};
		char *argv[] = {"w", "--mail-to", "x@example.org", "--no-mail", "--state-file=/s.json",
				"--remind-every", "1d", "--log", "/l.log", NULL};
		T_ASSERT(opt_parse(&spec, 9, argv) == 9);
		T_ASSERT(a.mail.nto == 1 && strcmp(a.mail.to[0], "x@example.org") == 0);
		T_ASSERT(a.no_mail == 1);
		T_ASSERT(a.state && strcmp(a.state, "/s.json") == 0);
		T_ASSERT(a.log && strcmp(a.log, "/l.log") == 0);
		T_ASSERT(a.remind_every == 86400);
	}

	char cmd[8300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", top);
	T_DONE();
}
