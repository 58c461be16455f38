/* hub-sync - commit and push a training run's logs, tfevents and checkpoints from a clone of a
 * Hub repository, hourly, safely.
 *
 * The successor of the BigScience runs' hourly `git add PATTERNS; git commit; git push`, which
 * lacked retries, a lock, protection against syncing the scratch purge's deletions, token
 * hygiene, and re-uploaded the growing main log whole every hour.  One run:
 *
 *   1. lock .git/hub-sync.lock (lib/lock.h): a run that finds it held waits --lock-wait, then
 *      exits 3 naming the holder.  Cron-driven runs overlap when a sync takes longer than the
 *      period; the second one then just waits its turn (and usually finds little left to do).
 *      A lock file that is a symbolic link, or not the user's own, is refused (exit 2).
 *   2. plan and stage (plan.c): git status over the patterns; each file as a plain blob, an
 *      LFS pointer or log segments (segment.c); deletions only with --allow-deletions.  LFS
 *      files are hashed in parallel (lfs_preclean) and each object's upload starts as soon as it
 *      is stored, while the rest is staged.
 *   3. commit, if the index differs from HEAD; then, if HEAD is ahead of the remote-tracking
 *      branch (this commit, or ones a failed earlier run left behind), upload the LFS objects
 *      of every unpushed commit (batch.c) and only then push the branch (repo.c).  Transient
 *      failures are retried with exponential backoff; authentication failures are not.
 *
 * Exit: 0 synced or nothing to do, 2 usage or bad input (no clone, detached HEAD, credentials
 * in the remote URL, an unsafe lock file), 3 could not do the job (network, authentication, rejected push, lock). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <git2.h>

#include "batch.h"
#include "lfs.h"
#include "lock.h"
#include "msg.h"
#include "progress.h"
#include "opt.h"
#include "plan.h"
#include "repo.h"
#include "token.h"
#include "units.h"
#include "xalloc.h"

#define HUB_LIMIT (10ULL << 20)  /* the Hub rejects plain git files over 10 MiB */

struct cfg {
	const char *repo_path;
	char **patterns;
	int npatterns;
	unsigned long long lfs_threshold, segment_size;
	const char *message, *token_file, *remote, *branch;
	int allow_deletions, dry_run, verbose, retries, jobs;
	double retry_delay;
	long lock_wait;
};

enum {
	O_VERBOSE = 'v', O_DRY = 'n', O_REPO = 1, O_PATTERNS, O_THRESHOLD, O_SEGMENT, O_MESSAGE,
	O_TOKEN_FILE, O_REMOTE, O_BRANCH, O_DELETIONS, O_RETRIES, O_RETRY_DELAY, O_LOCK_WAIT, O_JOBS,
};

static const struct opt opts[] = {
	{"repo-path", O_REPO, "DIR", "the clone of the Hub repository to sync"},
	{"patterns", O_PATTERNS, "PATTERN...", "what to sync, as git pathspecs ('logs/*/*.txt'); operands are patterns too"},
	{"lfs-threshold", O_THRESHOLD, "SIZE", "files larger than this go to LFS, or into segments if text (default 10M)"},
	{"segment-size", O_SEGMENT, "SIZE", "segments of growing text logs (default 8M; 0: large text files go to LFS whole)"},
	{"message", O_MESSAGE, "MSG", "commit message (default: 'hub-sync: N files')"},
	{"token-file", O_TOKEN_FILE, "FILE", "read the Hub token from FILE's first line (default: $HF_TOKEN)"},
	{"remote", O_REMOTE, "NAME", "remote to push to (default origin)"},
	{"branch", O_BRANCH, "NAME", "branch to commit and push; must be HEAD's (default: HEAD's)"},
	{"allow-deletions", O_DELETIONS, NULL, "also sync deletions of files matching the patterns"},
	{"dry-run", O_DRY, NULL, "print what would be committed and pushed; change nothing"},
	{"retries", O_RETRIES, "N", "retries of a failed upload or push (default 4)"},
	{"retry-delay", O_RETRY_DELAY, "SECONDS", "wait before the first retry, doubled for each next (default 5)"},
	{"lock-wait", O_LOCK_WAIT, "DURATION", "how long to wait for another hub-sync on the clone (default 10m)"},
	{"jobs", O_JOBS, "N", "LFS files hashed, and uploaded, in parallel (default 4)"},
	{"verbose", O_VERBOSE, NULL, "say more: the LFS endpoint, each upload, each log's segments, timings"},
	{0},
};

static void add_pattern(struct cfg *c, const char *p)
{
	c->patterns = xrealloc(c->patterns, sizeof *c->patterns * (size_t)(c->npatterns + 1),
			       "the list of --patterns");
	c->patterns[c->npatterns++] = xstrdup(p, "a --patterns pattern");
}

static int parse_seconds(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || v < 0)
		return -1;
	if (*end == 's' && !end[1])
		;
	else if (*end == 'm' && !end[1])
		v *= 60;
	else if (strcmp(end, "ms") == 0)
		v /= 1000;
	else if (*end)
		return -1;
	*out = v;
	return 0;
}

static int on_opt(void *ctx, int key, const char *arg, char *err, size_t errlen)
{
	struct cfg *c = ctx;
	char *end;

	switch (key) {
	case O_REPO: c->repo_path = xstrdup(arg, "the --repo path"); return 0;
	case O_PATTERNS:
		if (!*arg)
			return errf(err, errlen, "empty pattern");
		add_pattern(c, arg);
		return 0;
	case O_THRESHOLD:
		if (units_size(arg, &c->lfs_threshold) < 0 || c->lfs_threshold == 0)
			return errf(err, errlen, "'%s' is not a size such as 10M", arg);
		return 0;
	case O_SEGMENT:
		if (units_size(arg, &c->segment_size) < 0)
			return errf(err, errlen, "'%s' is not a size such as 8M", arg);
		return 0;
	case O_MESSAGE: c->message = strdup(arg); return 0;
	case O_TOKEN_FILE: c->token_file = strdup(arg); return 0;
	case O_REMOTE: c->remote = strdup(arg); return 0;
	case O_BRANCH: c->branch = strdup(arg); return 0;
	case O_DELETIONS: c->allow_deletions = 1; return 0;
	case O_DRY: c->dry_run = 1; return 0;
	case O_VERBOSE: c->verbose = 1; return 0;
	case O_RETRIES:
		c->retries = (int)strtol(arg, &end, 10);
		if (*end || end == arg || c->retries < 0 || c->retries > 30)
			return errf(err, errlen, "'%s' is not a retry count (0-30)", arg);
		return 0;
	case O_RETRY_DELAY:
		if (parse_seconds(arg, &c->retry_delay) < 0 || c->retry_delay > 3600)
			return errf(err, errlen, "'%s' is not a delay such as 5, 0.5 or 2m", arg);
		return 0;
	case O_LOCK_WAIT:
		if (units_duration(arg, &c->lock_wait) < 0)
			return errf(err, errlen, "'%s' is not a duration such as 30s or 10m", arg);
		return 0;
	case O_JOBS:
		c->jobs = (int)strtol(arg, &end, 10);
		if (*end || end == arg || c->jobs < 1 || c->jobs > 64)
			return errf(err, errlen, "'%s' is not a job count (1-64)", arg);
		return 0;
	}
	return errf(err, errlen, "unhandled option");
}

/* Operands anywhere are patterns: `--patterns A B --dry-run` as the old script was called. */
static void parse_all(const struct optspec *spec, struct cfg *c, int argc, char **argv)
{
	for (int i = opt_parse(spec, argc, argv); i < argc; i++) {
		if (!argv[i][0])
			die(EXIT_USAGE, "empty pattern");
		add_pattern(c, argv[i]);
	}
}

/* --- the lock ------------------------------------------------------------------------------ */

/* Held until exit.  A lock file that is a link or not the user's is a clone in a state a person
 * must look at, as a detached HEAD is: exit 2.  Held past --lock-wait, or no flock: exit 3. */
static void hub_lock(const char *gitdir, long wait_s)
{
	static struct lock l;
	char path[PATH_MAX + 32], err[PATH_MAX + 512], w[32];
	int rc;

	snprintf(path, sizeof path, "%s/hub-sync.lock", gitdir);
	rc = lock_take(&l, path, LOCK_RECORD, 0, err, sizeof err);
	if (rc == LOCK_BUSY && wait_s > 0) {
		warn("waiting for another hub-sync (%s) to finish (at most %s)", l.holder,
		     units_fmt_delta(wait_s, w, sizeof w));
		rc = lock_take(&l, path, LOCK_RECORD, (double)wait_s, err, sizeof err);
	}
	if (rc == LOCK_BUSY)
		die(EXIT_FAILED, "another hub-sync (%s) holds %s; gave up after %s", l.holder, path,
		    units_fmt_delta(wait_s, w, sizeof w));
	if (rc == LOCK_UNSAFE)
		die(EXIT_USAGE, "%s", err);
	if (rc != LOCK_OK)
		die(EXIT_FAILED, "%s", err);
}

/* Objects half-written by a killed run (we hold the lock: no other hub-sync writes there). */
static void clean_stale_tmp(const char *gitdir)
{
	char dir[PATH_MAX + 16], p[PATH_MAX + 300];
	struct dirent *de;
	DIR *d;

	snprintf(dir, sizeof dir, "%s/lfs/tmp", gitdir);
	if (!(d = opendir(dir)))
		return;
	while ((de = readdir(d)))
		if (strncmp(de->d_name, "hub-sync-", 9) == 0) {
			snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
			unlink(p);
		}
	closedir(d);
}

/* SLURM's time limit sends TERM, then KILL after a grace period: hold TERM (and INT, HUP) while
 * the index and HEAD are being written, so a kill lands before or after, not in the middle. */
static void critical(int enter)
{
	static sigset_t old;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	if (enter)
		sigprocmask(SIG_BLOCK, &set, &old);
	else
		sigprocmask(SIG_SETMASK, &old, NULL);
}

/* --- main ------------------------------------------------------------------------------------- */

static void on_object_ready(void *ctx, const char *path, const struct lfs_pointer *p, const char *file)
{
	batch_add(ctx, p->oid, p->size, file, path);
}

/* the user name for HTTP Basic: the URL's, else any (the Hub only looks at the token) */
static void url_user(const char *url, char *out, size_t len)
{
	const char *p = strstr(url, "://"), *at, *end;
	snprintf(out, len, "hub-sync");
	if (!p)
		return;
	p += 3;
	end = p + strcspn(p, "/");
	at = memchr(p, '@', (size_t)(end - p));
	if (at && at > p)
		snprintf(out, len, "%.*s", (int)(at - p), p);
}

/* The progress line (lib/progress.h: a terminal's, or LMTK_PROGRESS=1's), polled by a thread of
 * its own since the work runs in lfs_preclean's threads and inside libcurl: first the LFS bytes
 * hashed of the files' sizes while lfs_preclean runs, then the LFS bytes sent of those the
 * server asked for so far, the rate and the ETA.  The upload total grows as objects are hashed
 * and asked about. */
static struct {
	pthread_t th;
	int on, stop, hashing;   /* hashing: 1 while its line is drawn, 2 once it is over */
	struct progress hash, pg;
	pthread_mutex_t mu;
	pthread_cond_t cv;
} ticker = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* The hashing line while lfs_preclean runs; 1 while it owns the line */
static int hash_tick(void)
{
	unsigned long long done, total;
	int over = lfs_preclean_progress(&done, &total);

	if (ticker.hashing == 2 || total == 0)
		return 0;   /* over, or none: a run with no LFS file to hash draws none */
	if (ticker.hashing == 0) {
		progress_begin(&ticker.hash, "LFS files: hashed", NULL, total);
		ticker.hashing = 1;
	}
	ticker.hash.total = total;
	if (!over) {
		progress_update(&ticker.hash, done);
		return 1;
	}
	ticker.hash.done = done;   /* a forced line ends on the final numbers */
	progress_end(&ticker.hash);
	ticker.hashing = 2;
	return 0;
}

static void *tick(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&ticker.mu);
	while (!ticker.stop) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += (long)(PROGRESS_INTERVAL * 1e9);
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&ticker.cv, &ticker.mu, &until);
		if (ticker.stop || hash_tick())
			continue;
		unsigned long long b = batch_bytes_sent();
		ticker.pg.total = batch_bytes_asked();
		if (!ticker.stop && b > 0)
			progress_update(&ticker.pg, b);
	}
	pthread_mutex_unlock(&ticker.mu);
	return NULL;
}

static void progress(int start)
{
	if (start && progress_wanted()) {
		progress_begin(&ticker.pg, "LFS uploads: sent", NULL, 0);
		ticker.on = pthread_create(&ticker.th, NULL, tick, NULL) == 0;
	} else if (!start && ticker.on) {
		pthread_mutex_lock(&ticker.mu);
		ticker.stop = 1;
		pthread_cond_signal(&ticker.cv);
		pthread_mutex_unlock(&ticker.mu);
		pthread_join(ticker.th, NULL);
		ticker.on = 0;
		hash_tick();   /* lfs_preclean is over: its line ends, if it had not yet */
		ticker.pg.total = batch_bytes_asked();   /* a forced line ends on the final numbers */
		ticker.pg.done = batch_bytes_sent();
		progress_end(&ticker.pg);
	}
}

/* The run cannot be done: the progress line ends first, then the message, exit 3. */
static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
	char msg[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	progress(0);
	token_say("%s", msg);
	exit(EXIT_FAILED);
}

/* One run's state, from the clone's settings to the summary. */
struct run {
	struct cfg *c;
	struct repo r;
	char url[4096], endpoint[4096], branch[256], user[256], ref[300], head[8];
	struct plan_opts po;
	struct plan plan;
	size_t unpushed;
	int made;
	struct batch_opts bo;
	struct batch_result early, lfs;
	size_t nobjs;
	struct push_result push;
	double t0;
};

/* The clone, its branch, remote and LFS server; anything wrong with them is bad input (2). */
static void open_clone(struct run *x)
{
	struct cfg *c = x->c;
	char err[2048];

	if (repo_open(&x->r, c->repo_path, err, sizeof err) < 0)
		die(EXIT_USAGE, "%s", err);
	if (repo_branch(&x->r, x->branch, sizeof x->branch, err, sizeof err) < 0)
		die(EXIT_USAGE, "%s: %s", c->repo_path, err);
	if (c->branch && strcmp(c->branch, x->branch) != 0)
		die(EXIT_USAGE, "%s: HEAD is on '%s', not '%s'; check out %s first", c->repo_path, x->branch,
		    c->branch, c->branch);
	if (repo_remote_url(&x->r, c->remote, x->url, sizeof x->url, err, sizeof err) < 0)
		die(EXIT_USAGE, "%s: %s", c->repo_path, err);
	if (token_url_has_password(x->url)) {
		token_scrub(x->url);
		die(EXIT_USAGE, "the URL of remote '%s' (%s) has credentials in it: they end up in logs and "
		    "in .git/config; remove them (git remote set-url %s URL) and give the token with "
		    "--token-file or HF_TOKEN", c->remote, x->url, c->remote);
	}
	if (strncmp(x->url, "http://", 7) != 0 && strncmp(x->url, "https://", 8) != 0)
		die(EXIT_USAGE, "remote '%s' is '%s': only http(s) remotes are supported (the Hub's are)",
		    c->remote, x->url);
	if (lfs_endpoint(x->r.git, c->remote, x->url, x->endpoint, sizeof x->endpoint, err, sizeof err) < 0)
		die(EXIT_USAGE, "%s", err);
	if (token_url_has_password(x->endpoint))
		die(EXIT_USAGE, "the LFS URL has credentials in it (lfs.url or .lfsconfig); remove them");
	url_user(x->url, x->user, sizeof x->user);
	snprintf(x->ref, sizeof x->ref, "refs/heads/%s", x->branch);
	x->bo = (struct batch_opts){x->endpoint, x->user, token_get(), x->ref, c->jobs, c->retries,
				    c->retry_delay, c->verbose};
	if (c->verbose)
		token_say("repository %s, branch %s, remote %s, LFS endpoint %s", x->r.workdir, x->branch,
			  x->url, x->endpoint);
}

/* What changed and how each file goes; then staged, with the LFS files hashed in parallel and
 * each uploaded as soon as it is stored.  Returns the early upload session (or NULL). */
static struct batch_session *plan_and_stage(struct run *x)
{
	struct batch_session *early = NULL;
	char err[2048];

	if (plan_make(&x->r, &x->po, &x->plan, err, sizeof err) < 0)
		die(EXIT_FAILED, "%s", err);
	if (!x->po.dry_run) {
		size_t np;
		char **paths = plan_lfs_paths(&x->plan, &np);
		if (np) {
			early = batch_begin(&x->bo);
			lfs_preclean(paths, np, x->c->jobs, early ? on_object_ready : NULL, early);
		}
		free(paths);
	}
	if (plan_stage(&x->po, &x->r, &x->plan, err, sizeof err) < 0)
		fail("%s", err);
	if (x->po.verbose)
		warn("status and staging: %.2f s", units_now() - x->t0);
	plan_report(&x->po, &x->plan);
	return early;
}

static void commit(struct run *x)
{
	char msg[256], err[2048];

	if (x->c->message)
		snprintf(msg, sizeof msg, "%s", x->c->message);
	else
		snprintf(msg, sizeof msg, "hub-sync: %u file%s", x->plan.nfiles, x->plan.nfiles == 1 ? "" : "s");
	critical(1);
	if (repo_commit(&x->r, msg, &x->made, x->head, sizeof x->head, err, sizeof err) < 0)
		fail("%s", err);
	critical(0);
	if (repo_unpushed(&x->r, x->c->remote, x->branch, &x->unpushed, err, sizeof err) < 0)
		fail("%s", err);
}

/* The LFS objects of every unpushed commit, then the branch.  A pushed pointer whose object is
 * missing would be a broken file on the Hub, so nothing is pushed unless they are all there. */
static void upload_and_push(struct run *x)
{
	struct batch_object *objs = NULL;
	struct push_opts po = {x->c->remote, x->branch, x->user, token_get(), x->c->retries, x->c->retry_delay};
	char err[2048];

	if (repo_lfs_objects(&x->r, x->c->remote, x->branch, &objs, &x->nobjs, err, sizeof err) < 0)
		fail("%s", err);
	if (x->nobjs) {
		double t1 = units_now();
		if (batch_upload(&x->bo, objs, x->nobjs, &x->lfs, err, sizeof err) < 0)
			fail("%s; the commit stays local and the next run pushes it", err);
		if (x->c->verbose)
			warn("LFS uploads: %.2f s", units_now() - t1);
	}
	repo_lfs_objects_free(objs, x->nobjs);
	if (repo_push(&x->r, &po, &x->push, err, sizeof err) < 0)
		fail("%s%s", err, x->push.auth_failed || x->push.rejected ? "" :
		     "; the commit stays local and the next run pushes it");
	if (x->c->verbose)
		warn("push: %llu bytes in %d attempt%s", x->push.bytes, x->push.attempts,
		     x->push.attempts == 1 ? "" : "s");
}

static void summary(const struct run *x)
{
	char done[1024], a[32], b[32];
	size_t used = 0;

	if (x->made)
		used += (size_t)snprintf(done + used, sizeof done - used, "committed %s (%u file%s: %u LFS, "
					 "%u in segments, %u deleted); ", x->head, x->plan.nfiles, x->plan.nfiles == 1 ? "" : "s",
					 x->plan.counts[H_LFS] + x->plan.counts[H_LFS_NEW], x->plan.counts[H_SEG], x->plan.counts[H_DELETE]);
	if (x->nobjs) {
		/* objects that went up early are "already there" for the final pass */
		unsigned up = x->lfs.uploaded + x->early.uploaded;
		unsigned had = x->lfs.present > x->early.uploaded ? x->lfs.present - x->early.uploaded : 0;
		used += (size_t)snprintf(done + used, sizeof done - used, "uploaded %u LFS object%s (%s), "
					 "%u already on the server; ", up, up == 1 ? "" : "s",
					 units_fmt_size(x->lfs.bytes + x->early.bytes, a, sizeof a), had);
	}
	snprintf(done + used, sizeof done - used, "pushed %zu commit%s to %s/%s (%s) in %.1f s",
		 x->unpushed, x->unpushed == 1 ? "" : "s", x->c->remote, x->branch,
		 units_fmt_size(x->push.bytes, b, sizeof b), units_now() - x->t0);
	token_say("%s", done);
}

int main(int argc, char **argv)
{
	static struct cfg c = {
		.lfs_threshold = HUB_LIMIT, .segment_size = 8ULL << 20, .remote = "origin",
		.retries = 4, .retry_delay = 5, .lock_wait = 600, .jobs = 4,
	};
	struct optgroup groups[] = {{opts, on_opt, &c, NULL}, {0}};
	struct optspec spec = {
		"--repo-path DIR --patterns PATTERN... [options]",
		"Commit the files of a clone of a Hub repository that match the patterns (git pathspecs)\n"
		"and push them: LFS for what .gitattributes says and for binaries over --lfs-threshold,\n"
		"growing text logs in never-changing segments, the rest as plain git files.  Deletions\n"
		"are not synced unless --allow-deletions.  The token comes from --token-file or\n"
		"$HF_TOKEN, never from the command line.  Prints one line per path synced:\n"
		"'A|M|D git|lfs|seg BYTES PATH'.  Exit 0 done, 2 usage error, 3 could not sync.",
		groups, NULL, 0};
	static struct run x;
	struct batch_session *early;
	char err[2048];

	x.c = &c;
	x.t0 = units_now();
	msg_init(argv[0]);
	signal(SIGPIPE, SIG_IGN);  /* a server that goes away mid-push is an error to report, not a kill */
	parse_all(&spec, &c, argc, argv);
	if (!c.repo_path)
		die(EXIT_USAGE, "give --repo-path DIR (a clone of the Hub repository)");
	if (!c.npatterns)
		die(EXIT_USAGE, "nothing to sync: give --patterns, e.g. 'logs/*/*.txt' 'tensorboard/*/*tfevents*'");
	if (c.segment_size > c.lfs_threshold)
		die(EXIT_USAGE, "--segment-size %llu is above --lfs-threshold %llu: segments are plain git files",
		    c.segment_size, c.lfs_threshold);
	if (token_load(c.token_file, err, sizeof err) < 0)
		die(EXIT_USAGE, "%s", err);
	x.po = (struct plan_opts){c.patterns, c.npatterns, c.lfs_threshold, c.segment_size,
				  c.allow_deletions, c.dry_run, c.verbose};
	git_libgit2_init();
	curl_global_init(CURL_GLOBAL_DEFAULT);

	open_clone(&x);
	if (!token_get() && !c.dry_run)
		warn("no token (--token-file or HF_TOKEN): pushing without credentials");
	if (!c.dry_run) {
		hub_lock(x.r.gitdir, c.lock_wait);
		clean_stale_tmp(x.r.gitdir);
		if (repo_tune_pack(&x.r, err, sizeof err) < 0)
			die(EXIT_FAILED, "%s", err);
	}
	if (lfs_filter_register(x.r.gitdir, x.r.workdir, err, sizeof err) < 0)
		die(EXIT_FAILED, "%s", err);

	if (!c.dry_run)
		progress(1);
	early = plan_and_stage(&x);
	if (c.dry_run) {
		if (repo_unpushed(&x.r, c.remote, x.branch, &x.unpushed, err, sizeof err) == 0 && x.unpushed)
			warn("dry run: %zu local commit%s not on %s/%s yet would be pushed", x.unpushed,
			     x.unpushed == 1 ? "" : "s", c.remote, x.branch);
		warn("dry run: %u file%s to commit; nothing changed", x.plan.nfiles, x.plan.nfiles == 1 ? "" : "s");
		return EXIT_OK;
	}
	commit(&x);
	if (early && batch_end(early, &x.early, err, sizeof err) < 0)
		fail("%s; the commit stays local and the next run pushes it", err);
	if (!x.unpushed) {
		progress(0);
		warn("nothing to sync: %s/%s is up to date", c.remote, x.branch);
		return EXIT_OK;
	}
	upload_and_push(&x);
	progress(0);
	summary(&x);
	plan_free(&x.plan);
	repo_close(&x.r);
	git_libgit2_shutdown();
	curl_global_cleanup();
	return EXIT_OK;
}
