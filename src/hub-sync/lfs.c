#include "lfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <git2/sys/filter.h>

#include "digest.h"
#include "msg.h"
#include "outfile.h"
#include "xalloc.h"

#define SPEC_V1 "version https://git-lfs.github.com/spec/v1\n"

/* --- pointers ------------------------------------------------------------------------------ */

static int is_hex64(const char *s)
{
	for (int i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

int lfs_pointer_parse(const char *data, size_t len, struct lfs_pointer *p)
{
	char buf[LFS_POINTER_MAX + 1];
	char *line, *save = NULL;
	int have_oid = 0, have_size = 0, first = 1;

	if (len == 0 || len >= LFS_POINTER_MAX || memchr(data, '\0', len))
		return -1;
	memcpy(buf, data, len);
	buf[len] = '\0';
	if (buf[len - 1] != '\n')
		return -1;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (first) {
			/* git-lfs also accepts the pre-1.0 "hawser" spec URL */
			if (strcmp(line, "version https://git-lfs.github.com/spec/v1") != 0 &&
			    strcmp(line, "version https://hawser.github.com/spec/v1") != 0)
				return -1;
			first = 0;
		} else if (strncmp(line, "oid sha256:", 11) == 0) {
			if (strlen(line + 11) != 64 || !is_hex64(line + 11))
				return -1;
			memcpy(p->oid, line + 11, 65);
			have_oid = 1;
		} else if (strncmp(line, "size ", 5) == 0) {
			char *end;
			if (line[5] < '0' || line[5] > '9')
				return -1;
			errno = 0;
			p->size = strtoull(line + 5, &end, 10);
			if (*end || errno)
				return -1;
			have_size = 1;
		} else if (strncmp(line, "ext-", 4) != 0) {
			return -1;  /* extensions ("ext-0-foo sha256:...") are allowed, nothing else */
		}
	}
	return have_oid && have_size ? 0 : -1;
}

size_t lfs_pointer_format(const struct lfs_pointer *p, char *buf, size_t len)
{
	int n = snprintf(buf, len, SPEC_V1 "oid sha256:%s\nsize %llu\n", p->oid, p->size);
	return n < 0 ? 0 : (size_t)n;
}

void lfs_object_path(const char *gitdir, const char *oid, char *out, size_t len)
{
	snprintf(out, len, "%s/lfs/objects/%.2s/%.2s/%s", gitdir, oid, oid + 2, oid);
}

/* --- the store --------------------------------------------------------------------------- */

static int mkdirs(char *path)  /* mkdir -p of path's directory part; path is restored */
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		int rc = mkdir(path, 0755);
		*p = '/';
		if (rc < 0 && errno != EEXIST)
			return -1;
	}
	return 0;
}

/* An object being written: bytes go to an anonymous file (outfile.h) as they are hashed, and
 * it is named by the hash once the last byte is in. */
struct objw {
	struct outfile out;
	int open;
	struct digest_stream sha;
	unsigned long long size;
	char head[LFS_POINTER_MAX];  /* the first bytes: is the input already a pointer? */
	size_t nhead;
};

static int objw_open(struct objw *w, const char *gitdir, char *err, size_t errlen)
{
	char tmp[PATH_MAX + 64];
	w->open = 0;
	w->size = 0;
	w->nhead = 0;
	snprintf(tmp, sizeof tmp, "%s/lfs/tmp/hub-sync-object", gitdir);
	if (mkdirs(tmp) < 0)
		return errf(err, errlen, "%s: %s", tmp, strerror(errno));
	if (outfile_open(&w->out, tmp, 1 << 16, err, errlen) < 0)
		return -1;
	w->out.mode = 0644;
	digest_sha256_begin(&w->sha);
	w->open = 1;
	return 0;
}

static int objw_write(struct objw *w, const char *buf, size_t len, char *err, size_t errlen)
{
	digest_sha256_add(&w->sha, buf, len);
	if (w->nhead < sizeof w->head) {
		size_t n = sizeof w->head - w->nhead < len ? sizeof w->head - w->nhead : len;
		memcpy(w->head + w->nhead, buf, n);
		w->nhead += n;
	}
	w->size += len;
	return outfile_write(&w->out, buf, len, err, errlen);
}

static void objw_abort(struct objw *w)
{
	if (w->open) {
		outfile_discard(&w->out);
		digest_sha256_drop(&w->sha);   /* a no-op once the hash is taken */
	}
	w->open = 0;
}

/* Finishes the object: fills p; *is_new = 0 if the store already had it.  Durable: the data
 * and the rename are fsynced, since the commit that points at it may be pushed much later. */
static int objw_commit(struct objw *w, const char *gitdir, struct lfs_pointer *p, int *is_new,
		       char *err, size_t errlen)
{
	char final[PATH_MAX + 128];
	struct stat st;

	digest_sha256_end(&w->sha, p->oid);
	p->size = w->size;
	lfs_object_path(gitdir, p->oid, final, sizeof final);
	*is_new = 0;
	if (stat(final, &st) == 0 && (unsigned long long)st.st_size == w->size) {
		objw_abort(w);
		return 0;
	}
	if (outfile_sync(&w->out, err, errlen) < 0) {
		objw_abort(w);
		return -1;
	}
	if (mkdirs(final) < 0) {
		errf(err, errlen, "%s: %s", final, strerror(errno));
		objw_abort(w);
		return -1;
	}
	int rc = outfile_publish_as(&w->out, final, err, errlen);
	objw_abort(w);
	if (rc < 0)
		return -1;
	*is_new = 1;
	return 0;
}

/* Stores the bytes of the file open on fd (path names it in messages). */
/* lfs_preclean's bytes to hash and hashed so far, and whether it is over (lfs_preclean_progress) */
static unsigned long long pre_total, pre_done;
static int pre_over;

static int store_fd(const char *gitdir, int fd, const char *path, struct lfs_pointer *p, int *is_new,
		    char *err, size_t errlen)
{
	enum { BUF = 1 << 20 };
	char *buf = malloc(BUF);
	struct objw w;
	ssize_t n = -1;

	if (!buf)
		return xalloc_err_in(err, errlen, path, "the LFS object's copy buffer", BUF);
	if (objw_open(&w, gitdir, err, errlen) < 0) {
		free(buf);
		return -1;
	}
	while ((n = read(fd, buf, BUF)) > 0) {
		if (objw_write(&w, buf, (size_t)n, err, errlen) < 0)
			break;
		__atomic_add_fetch(&pre_done, (unsigned long long)n, __ATOMIC_RELAXED);
	}
	free(buf);
	if (n != 0) {
		if (n < 0)
			errf(err, errlen, "%s: %s", path, strerror(errno));
		objw_abort(&w);
		return -1;
	}
	return objw_commit(&w, gitdir, p, is_new, err, errlen);
}

/* --- the libgit2 filter -------------------------------------------------------------------- */

/* A file cleaned ahead of libgit2 (lfs_preclean), and the stat it had while it was read. */
struct cached {
	char *path;
	struct lfs_pointer p;
	struct stat st;
};

static struct {
	git_filter base;
	char gitdir[PATH_MAX], workdir[PATH_MAX];
	enum lfs_mode mode;
	struct lfs_clean_stats stats;
	struct cached *cache;
	size_t ncache;
	pthread_mutex_t mu;      /* stats and cache, written by the preclean threads */
} lfs_filter = {.mu = PTHREAD_MUTEX_INITIALIZER};

struct clean_stream {
	git_writestream base;
	git_writestream *next;
	struct objw w;
	const struct cached *hit;  /* cleaned already: count the bytes, emit its pointer */
	unsigned long long seen;
	char path[PATH_MAX];
};

static int same_stat(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static int clean_fail(struct clean_stream *s, const char *why)
{
	char msg[2 * PATH_MAX + 600];
	snprintf(msg, sizeof msg, "lfs clean of %s: %s", s->path, why);
	git_error_set_str(GIT_ERROR_FILTER, msg);
	return -1;
}

static int clean_write(git_writestream *ws, const char *buf, size_t len)
{
	struct clean_stream *s = (struct clean_stream *)ws;
	char err[PATH_MAX + 256];

	if (s->hit) {
		s->seen += len;
		return 0;
	}
	if (objw_write(&s->w, buf, len, err, sizeof err) < 0)
		return clean_fail(s, err);
	return 0;
}

static int clean_close(git_writestream *ws)
{
	struct clean_stream *s = (struct clean_stream *)ws;
	struct lfs_pointer p;
	char text[LFS_POINTER_MAX], err[PATH_MAX + 256];
	size_t n;
	int is_new, rc;

	if (s->hit) {
		/* the stat said unchanged; the byte count must agree too */
		if (s->seen != s->hit->p.size)
			return clean_fail(s, "changed while being added; run hub-sync again");
		n = lfs_pointer_format(&s->hit->p, text, sizeof text);
		if ((rc = s->next->write(s->next, text, n)) < 0)
			return rc;
		return s->next->close(s->next);
	}
	if (s->w.size == 0 || (s->w.size < LFS_POINTER_MAX &&
			       lfs_pointer_parse(s->w.head, s->w.nhead, &p) == 0)) {
		/* empty, or already a pointer: as git-lfs, pass it through */
		objw_abort(&s->w);
		rc = s->w.size ? s->next->write(s->next, s->w.head, s->w.nhead) : 0;
		return rc < 0 ? rc : s->next->close(s->next);
	}
	if (objw_commit(&s->w, lfs_filter.gitdir, &p, &is_new, err, sizeof err) < 0)
		return clean_fail(s, err);
	pthread_mutex_lock(&lfs_filter.mu);
	lfs_filter.stats.files++;
	if (is_new) {
		lfs_filter.stats.new_objects++;
		lfs_filter.stats.bytes += p.size;
	}
	pthread_mutex_unlock(&lfs_filter.mu);
	n = lfs_pointer_format(&p, text, sizeof text);
	if ((rc = s->next->write(s->next, text, n)) < 0)
		return rc;
	return s->next->close(s->next);
}

static void clean_free(git_writestream *ws)
{
	struct clean_stream *s = (struct clean_stream *)ws;
	if (!s->hit)
		objw_abort(&s->w);
	free(s);
}

static const struct cached *cache_find(const char *path)
{
	char full[2 * PATH_MAX];
	struct stat st;

	for (size_t i = 0; i < lfs_filter.ncache; i++)
		if (strcmp(lfs_filter.cache[i].path, path) == 0) {
			snprintf(full, sizeof full, "%s%s", lfs_filter.workdir, path);
			if (stat(full, &st) == 0 && same_stat(&st, &lfs_filter.cache[i].st))
				return &lfs_filter.cache[i];
			return NULL;
		}
	return NULL;
}

static int filter_check(git_filter *self, void **payload, const git_filter_source *src,
			const char **attr_values)
{
	(void)self, (void)payload, (void)attr_values;
	/* smudge (checkout) is not our job: hub-sync never writes the working tree */
	if (git_filter_source_mode(src) != GIT_FILTER_TO_ODB || lfs_filter.mode != LFS_CLEAN)
		return GIT_PASSTHROUGH;
	return 0;
}

static int filter_stream(git_writestream **out, git_filter *self, void **payload,
			 const git_filter_source *src, git_writestream *next)
{
	struct clean_stream *s = calloc(1, sizeof *s);
	char err[PATH_MAX + 256];

	(void)self, (void)payload;
	if (!s) {
		git_error_set_oom();
		return -1;
	}
	s->base.write = clean_write;
	s->base.close = clean_close;
	s->base.free = clean_free;
	s->next = next;
	snprintf(s->path, sizeof s->path, "%s", git_filter_source_path(src));
	if ((s->hit = cache_find(s->path))) {
		*out = &s->base;
		return 0;
	}
	if (objw_open(&s->w, lfs_filter.gitdir, err, sizeof err) < 0) {
		clean_fail(s, err);
		free(s);
		return -1;
	}
	*out = &s->base;
	return 0;
}

int lfs_filter_register(const char *gitdir, const char *workdir, char *err, size_t errlen)
{
	static int done;
	int rc;

	snprintf(lfs_filter.gitdir, sizeof lfs_filter.gitdir, "%s", gitdir);
	snprintf(lfs_filter.workdir, sizeof lfs_filter.workdir, "%s", workdir);
	if (done)
		return 0;
	git_filter_init(&lfs_filter.base, GIT_FILTER_VERSION);
	lfs_filter.base.attributes = "filter=lfs";
	lfs_filter.base.check = filter_check;
	lfs_filter.base.stream = filter_stream;
	lfs_filter.mode = LFS_PASSTHROUGH;
	rc = git_filter_register("lfs", &lfs_filter.base, GIT_FILTER_DRIVER_PRIORITY);
	if (rc < 0)
		return errf(err, errlen, "cannot register the lfs filter: %s",
			    git_error_last() ? git_error_last()->message : "?");
	done = 1;
	return 0;
}

void lfs_filter_mode(enum lfs_mode mode)
{
	lfs_filter.mode = mode;
}

void lfs_filter_stats(struct lfs_clean_stats *out)
{
	*out = lfs_filter.stats;
	memset(&lfs_filter.stats, 0, sizeof lfs_filter.stats);
}

/* --- cleaning ahead of libgit2, in parallel ------------------------------------------------- */

struct pre {
	char *const *paths;
	size_t n, next;
	lfs_ready_fn ready;
	void *ctx;
	pthread_mutex_t mu;
};

static void *pre_worker(void *arg)
{
	struct pre *pr = arg;
	char full[2 * PATH_MAX], obj[PATH_MAX + 128], err[PATH_MAX + 256];

	for (;;) {
		struct stat before, after;
		struct lfs_pointer p;
		size_t i;
		int fd, is_new, ok;

		pthread_mutex_lock(&pr->mu);
		i = pr->next++;
		pthread_mutex_unlock(&pr->mu);
		if (i >= pr->n)
			break;
		snprintf(full, sizeof full, "%s%s", lfs_filter.workdir, pr->paths[i]);
		fd = open(full, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;  /* libgit2 will say what is wrong with it */
		/* only a file that did not change while it was read is worth remembering */
		ok = fstat(fd, &before) == 0 && S_ISREG(before.st_mode) && before.st_size >= LFS_POINTER_MAX &&
		     store_fd(lfs_filter.gitdir, fd, pr->paths[i], &p, &is_new, err, sizeof err) == 0 &&
		     fstat(fd, &after) == 0 && same_stat(&before, &after) && (unsigned long long)after.st_size == p.size;
		close(fd);
		if (!ok)
			continue;
		pthread_mutex_lock(&lfs_filter.mu);
		struct cached *c = realloc(lfs_filter.cache, sizeof *c * (lfs_filter.ncache + 1));
		if (c) {
			lfs_filter.cache = c;
			c[lfs_filter.ncache].path = strdup(pr->paths[i]);
			c[lfs_filter.ncache].p = p;
			c[lfs_filter.ncache].st = after;
			lfs_filter.ncache++;
			lfs_filter.stats.files++;
			if (is_new) {
				lfs_filter.stats.new_objects++;
				lfs_filter.stats.bytes += p.size;
			}
		}
		pthread_mutex_unlock(&lfs_filter.mu);
		if (pr->ready) {
			lfs_object_path(lfs_filter.gitdir, p.oid, obj, sizeof obj);
			pr->ready(pr->ctx, pr->paths[i], &p, obj);
		}
	}
	return NULL;
}

void lfs_preclean(char *const *paths, size_t n, int jobs, lfs_ready_fn ready, void *ctx)
{
	struct pre pr = {paths, n, 0, ready, ctx, PTHREAD_MUTEX_INITIALIZER};
	pthread_t th[64];
	int nth = jobs < 1 ? 1 : jobs > 64 ? 64 : jobs;

	unsigned long long total = 0;
	__atomic_store_n(&pre_done, 0, __ATOMIC_RELAXED);
	for (size_t i = 0; i < n; i++) {
		char full[2 * PATH_MAX];
		struct stat st;
		snprintf(full, sizeof full, "%s%s", lfs_filter.workdir, paths[i]);
		if (stat(full, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= LFS_POINTER_MAX)
			total += (unsigned long long)st.st_size;
	}
	__atomic_store_n(&pre_total, total, __ATOMIC_RELAXED);
	__atomic_store_n(&pre_over, 0, __ATOMIC_RELEASE);
	if ((size_t)nth > n)
		nth = (int)n;
	for (int i = 0; i < nth; i++)
		if (pthread_create(&th[i], NULL, pre_worker, &pr) != 0)
			nth = i;
	if (nth == 0)
		pre_worker(&pr);
	for (int i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	__atomic_store_n(&pre_over, 1, __ATOMIC_RELEASE);
}

int lfs_preclean_progress(unsigned long long *done, unsigned long long *total)
{
	int over = __atomic_load_n(&pre_over, __ATOMIC_ACQUIRE);
	*done = __atomic_load_n(&pre_done, __ATOMIC_RELAXED);
	*total = __atomic_load_n(&pre_total, __ATOMIC_RELAXED);
	return over;
}

/* --- the endpoint ------------------------------------------------------------------------- */

int lfs_endpoint_from_url(const char *url, char *out, size_t len)
{
	size_t n = strlen(url);
	int w;

	while (n && url[n - 1] == '/')
		n--;
	if (n >= 4 && strncmp(url + n - 4, ".git", 4) == 0)
		w = snprintf(out, len, "%.*s/info/lfs", (int)n, url);
	else
		w = snprintf(out, len, "%.*s.git/info/lfs", (int)n, url);
	return w < 0 || (size_t)w >= len ? -1 : 0;
}

static int config_url(git_config *cfg, const char *key, char *out, size_t len)
{
	git_buf b = {0};
	int found = 0;

	if (cfg && git_config_get_string_buf(&b, cfg, key) == 0 && b.size) {
		snprintf(out, len, "%s", b.ptr);
		found = 1;
	}
	git_buf_dispose(&b);
	git_error_clear();
	return found;
}

int lfs_endpoint(git_repository *repo, const char *remote, const char *remote_url,
		 char *out, size_t len, char *err, size_t errlen)
{
	git_config *cfg = NULL, *lfscfg = NULL, *snap = NULL;
	char key[512], path[PATH_MAX];
	const char *wd = git_repository_workdir(repo);
	int found = 0;

	snprintf(key, sizeof key, "remote.%s.lfsurl", remote);
	if (git_repository_config_snapshot(&snap, repo) == 0)
		found = config_url(snap, "lfs.url", out, len) || config_url(snap, key, out, len);
	if (!found && wd) {
		struct stat st;
		snprintf(path, sizeof path, "%s.lfsconfig", wd);
		if (stat(path, &st) == 0 && git_config_open_ondisk(&cfg, path) == 0 &&
		    git_config_snapshot(&lfscfg, cfg) == 0)
			found = config_url(lfscfg, "lfs.url", out, len) || config_url(lfscfg, key, out, len);
	}
	git_config_free(lfscfg);
	git_config_free(cfg);
	git_config_free(snap);
	git_error_clear();
	if (!found && lfs_endpoint_from_url(remote_url, out, len) < 0)
		return errf(err, errlen, "remote URL too long");
	while ((len = strlen(out)) && out[len - 1] == '/')
		out[len - 1] = '\0';
	if (strncmp(out, "http://", 7) != 0 && strncmp(out, "https://", 8) != 0)
		return errf(err, errlen, "LFS endpoint '%s' is not http(s); only HTTP remotes are supported", out);
	return 0;
}
