/* plan - what a sync does with each changed path, and staging it.
 *
 * Each new or modified file matching the patterns goes one way, by the first rule that applies:
 *   - seg: a log already committed as segments, or a text file (no NUL byte in its first 8000
 *     bytes, git's test) over the LFS threshold: a growing log (segment.h);
 *   - lfs: a file .gitattributes sends to LFS (the Hub's default attributes cover *tfevents*,
 *     *.bin, *.pt, *.safetensors, ...), or a binary file over the threshold, for which
 *     .gitattributes gains a line matching exactly its path;
 *   - git: anything else, a plain blob.
 * A deleted file is kept (not staged) unless deletions are allowed: a scratch purge must not
 * delete the Hub's copy.  Logs committed as segments are excluded from git status (see
 * repo_exclude) and found from their manifests instead.
 *
 * Staging goes plain files first: a file that grew past the threshold between the look and the
 * read (a log being written) is then moved to lfs or seg, since the Hub would refuse the push
 * for good.  .gitattributes is committed whenever LFS files are, so that a clone smudges them. */
#include "plan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"
#include "lfs.h"
#include "msg.h"
#include "token.h"
#include "units.h"
#include "xalloc.h"

static const char *how_name[] = {"git", "lfs", "lfs", "seg", "git", "-", "git", "-"};

/* git's own binary heuristic: a NUL in the first 8000 bytes */
static int is_text(const char *full)
{
	char buf[8000];
	ssize_t n;
	int fd = open(full, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof buf);
	close(fd);
	return n > 0 && !memchr(buf, '\0', (size_t)n);
}

static void classify(const struct plan_opts *o, struct repo *r, struct item *it)
{
	char full[PATH_MAX * 2];
	struct stat st;
	const char *path = it->ch->path;

	if (it->ch->kind == CH_STAGED) {
		it->how = H_STAGED;
		return;
	}
	snprintf(full, sizeof full, "%s%s", r->workdir, path);
	if (it->ch->kind == CH_DELETED || lstat(full, &st) < 0) {
		if (segment_tracked(r->index, path)) {
			it->how = o->allow_deletions ? H_DELETE : H_KEEP;
			it->seg.was_tracked = 1;
		} else {
			it->how = it->ch->kind == CH_DELETED ? (o->allow_deletions ? H_DELETE : H_KEEP) : H_SKIP;
		}
		return;
	}
	it->size = (unsigned long long)st.st_size;
	if (!S_ISREG(st.st_mode)) {
		it->how = S_ISLNK(st.st_mode) ? H_GIT : H_SKIP;
		return;
	}
	if (segment_tracked(r->index, path))
		it->how = H_SEG;
	else if (repo_is_lfs(r, path))
		it->how = H_LFS;
	else if (it->size > o->lfs_threshold)
		it->how = o->segment_size && is_text(full) ? H_SEG : H_LFS_NEW;
	else
		it->how = H_GIT;
}

static int track_lfs(struct repo *r, struct item *items, size_t n, int *added, char *err, size_t errlen)
{
	char path[PATH_MAX + 32], pat[PATH_MAX * 2], ferr[PATH_MAX + 300];
	char *old = NULL, *text;
	size_t oldlen = 0, cap, len;

	*added = 0;
	snprintf(path, sizeof path, "%s.gitattributes", r->workdir);
	if (file_read_all(path, &old, &oldlen, ferr, sizeof ferr) < 0 && errno != ENOENT)
		return errf(err, errlen, "%s", ferr);
	cap = oldlen + 2;
	for (size_t i = 0; i < n; i++)
		if (items[i].how == H_LFS_NEW)
			cap += strlen(items[i].ch->path) * 12 + 64;
	text = malloc(cap);
	if (!text) {
		free(old);
		return xalloc_err_in(err, errlen, path, "the new .gitattributes", cap);
	}
	memcpy(text, old ? old : "", oldlen);
	len = oldlen;
	if (len && text[len - 1] != '\n')
		text[len++] = '\n';
	for (size_t i = 0; i < n; i++) {
		if (items[i].how != H_LFS_NEW)
			continue;
		repo_path_pattern(items[i].ch->path, pat, sizeof pat);
		len += (size_t)snprintf(text + len, cap - len, "%s filter=lfs diff=lfs merge=lfs -text\n", pat);
		(*added)++;
	}
	free(old);
	if (*added && file_write_atomic(path, text, len, 0644, ferr, sizeof ferr) < 0) {
		free(text);
		return errf(err, errlen, "%s", ferr);
	}
	free(text);
	git_attr_cache_flush(r->git);
	/* LFS files whose attribute is not committed would reach clones as pointer text: commit
	 * .gitattributes with them, also when it was edited by hand */
	int lfs = *added > 0;
	for (size_t i = 0; i < n && !lfs; i++)
		lfs = items[i].how == H_LFS;
	return lfs && access(path, F_OK) == 0 ? repo_add(r, ".gitattributes", err, errlen) : 0;
}

/* Logs committed as segments are listed in .git/info/exclude (so that `git status` and a
 * hand-typed `git add -A` leave them alone), hence not in git status: they are found from
 * their manifests instead.  One whose file is gone (the scratch purge) is a deletion, which is
 * then kept or synced like any other. */
static void add_segment_logs(struct repo *r, const struct plan_opts *o, struct change **changes, size_t *n)
{
	git_strarray sa = {o->patterns, (size_t)o->npatterns};
	git_pathspec *ps = NULL;
	char **src = NULL, full[PATH_MAX * 2];
	size_t nsrc = 0;
	struct stat st;

	if (git_pathspec_new(&ps, &sa) < 0 || segment_sources(r->index, &src, &nsrc) < 0) {
		git_pathspec_free(ps);
		git_error_clear();
		return;
	}
	for (size_t i = 0; i < nsrc; i++) {
		int known = 0, gone;
		struct change *nc;

		snprintf(full, sizeof full, "%s%s", r->workdir, src[i]);
		gone = lstat(full, &st) < 0 && errno == ENOENT;
		for (size_t k = 0; k < *n && !known; k++)
			known = strcmp((*changes)[k].path, src[i]) == 0;
		if (!known && git_pathspec_matches_path(ps, 0, src[i]) &&
		    (nc = realloc(*changes, sizeof *nc * (*n + 1)))) {
			*changes = nc;
			nc[*n].path = src[i];
			nc[*n].kind = gone ? CH_DELETED : CH_MODIFIED;
			(*n)++;
			src[i] = NULL;
		}
		free(src[i]);
	}
	free(src);
	git_pathspec_free(ps);
}

int plan_stage(const struct plan_opts *o, struct repo *r, struct plan *pl, char *err, size_t errlen)
{
	struct segment_opts so = {o->segment_size, o->allow_deletions, o->dry_run};
	struct item *items = pl->items;
	size_t n = pl->n;
	int added;

	/* 1. plain files first: one that grew past the threshold since we looked gets the LFS or
	 *    segment treatment below instead (the Hub would refuse the push for good) */
	lfs_filter_mode(LFS_CLEAN);
	for (size_t i = 0; i < n; i++) {
		struct item *it = &items[i];
		if (it->how != H_GIT || o->dry_run)
			continue;
		int rc = -1;
		for (int t = 0; t < 3 && rc < 0; t++)  /* a log appended to while read: read again */
			rc = repo_add(r, it->ch->path, err, errlen);
		if (rc < 0) {
			token_say("%s; not syncing it this time", err);
			it->how = H_SKIP;
			continue;
		}
		long long sz = repo_staged_size(r, it->ch->path);
		if (sz > (long long)o->lfs_threshold) {
			char full[PATH_MAX * 2];
			snprintf(full, sizeof full, "%s%s", r->workdir, it->ch->path);
			it->size = (unsigned long long)sz;
			it->how = o->segment_size && is_text(full) ? H_SEG : repo_is_lfs(r, it->ch->path) ? H_LFS : H_LFS_NEW;
		}
	}
	/* 2. .gitattributes for binaries over the threshold, then the LFS files */
	if (!o->dry_run && track_lfs(r, items, n, &added, err, errlen) < 0)
		return -1;
	for (size_t i = 0; i < n && !o->dry_run; i++) {
		struct item *it = &items[i];
		if (it->how != H_LFS && it->how != H_LFS_NEW)
			continue;
		if (repo_add(r, it->ch->path, err, errlen) < 0)
			return -1;
		if (!repo_is_lfs(r, it->ch->path))  /* an attribute we wrote that did not take */
			return errf(err, errlen, "%s: .gitattributes does not send it to LFS", it->ch->path);
	}
	/* 3. growing logs */
	for (size_t i = 0; i < n; i++) {
		struct item *it = &items[i];
		if (it->how != H_SEG)
			continue;
		if (segment_sync(r->git, r->index, it->ch->path, &so, &it->seg, err, errlen) < 0)
			return -1;
		if (it->seg.shrunk) {
			char a[32], b[32];
			warn("%s: shorter (%s) than its committed segments (%s); left as committed "
			     "(--allow-deletions replaces them)", it->ch->path,
			     units_fmt_size(it->seg.file_size, a, sizeof a),
			     units_fmt_size(it->seg.committed, b, sizeof b));
			it->how = H_SKIP;
			continue;
		}
		/* it was a plain file before: now the segments hold it */
		if (!o->dry_run && repo_tracked(r, it->ch->path) && repo_remove(r, it->ch->path, err, errlen) < 0)
			return -1;
		if (!o->dry_run && repo_exclude(r, it->ch->path, err, errlen) < 0)
			return -1;
		if (!it->seg.changed && !it->seg.removed && it->seg.was_tracked)
			it->how = H_SKIP;  /* nothing new in it */
	}
	/* 4. deletions, only when allowed */
	for (size_t i = 0; i < n; i++) {
		struct item *it = &items[i];
		if (it->how != H_DELETE || o->dry_run)
			continue;
		if (segment_tracked(r->index, it->ch->path))
			segment_remove(r->index, it->ch->path);
		if (repo_tracked(r, it->ch->path) && repo_remove(r, it->ch->path, err, errlen) < 0)
			return -1;
	}
	lfs_filter_mode(LFS_PASSTHROUGH);
	for (size_t i = 0; i < n; i++)
		pl->counts[items[i].how]++;
	pl->nfiles = pl->counts[H_GIT] + pl->counts[H_LFS] + pl->counts[H_LFS_NEW] + pl->counts[H_SEG] +
		     pl->counts[H_DELETE];
	return 0;
}

void plan_report(const struct plan_opts *o, const struct plan *pl)
{
	for (size_t i = 0; i < pl->n; i++) {
		const struct item *it = &pl->items[i];
		char st = it->ch->kind == CH_NEW ? 'A' : it->how == H_DELETE ? 'D' : 'M';
		if (it->how == H_KEEP || it->how == H_SKIP)
			continue;
		if (it->how == H_SEG)
			st = it->seg.was_tracked || it->ch->kind != CH_NEW ? 'M' : 'A';
		printf("%c %s %llu %s\n", st, it->how == H_DELETE && it->seg.was_tracked ? "seg" : how_name[it->how],
		       it->size, it->ch->path);
		if (it->how == H_SEG && o->verbose) {
			char a[32];
			token_say("%s: %u segments, %u %s (%s)", it->ch->path, it->seg.segments, it->seg.changed,
				  o->dry_run ? "to write" : "written", units_fmt_size(it->seg.changed_bytes, a, sizeof a));
		}
	}
	fflush(stdout);
	if (pl->counts[H_KEEP]) {
		char list[512] = "";
		size_t used = 0;
		for (size_t i = 0, shown = 0; i < pl->n && shown < 3; i++)
			if (pl->items[i].how == H_KEEP) {
				used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", shown ? ", " : "",
							 pl->items[i].ch->path);
				shown++;
			}
		warn("%u deleted file%s not synced, the Hub keeps %s (--allow-deletions to sync deletions): %s%s",
		     pl->counts[H_KEEP], pl->counts[H_KEEP] == 1 ? "" : "s", pl->counts[H_KEEP] == 1 ? "it" : "them",
		     list, pl->counts[H_KEEP] > 3 ? ", ..." : "");
	}
}

int plan_make(struct repo *r, const struct plan_opts *o, struct plan *pl, char *err, size_t errlen)
{
	memset(pl, 0, sizeof *pl);
	lfs_filter_mode(LFS_PASSTHROUGH);
	if (repo_changes(r, o->patterns, o->npatterns, &pl->changes, &pl->n, err, errlen) < 0)
		return -1;
	add_segment_logs(r, o, &pl->changes, &pl->n);
	pl->items = calloc(pl->n + 1, sizeof *pl->items);
	if (!pl->items)
		return xalloc_err(err, errlen, "the plan's items", (pl->n + 1) * sizeof *pl->items);
	for (size_t i = 0; i < pl->n; i++) {
		pl->items[i].ch = &pl->changes[i];
		classify(o, r, &pl->items[i]);
	}
	return 0;
}

char **plan_lfs_paths(const struct plan *pl, size_t *n)
{
	char **paths = calloc(pl->n + 1, sizeof *paths);
	*n = 0;
	for (size_t i = 0; paths && i < pl->n; i++)
		if (pl->items[i].how == H_LFS || pl->items[i].how == H_LFS_NEW)
			paths[(*n)++] = pl->items[i].ch->path;
	return paths;
}

void plan_free(struct plan *pl)
{
	repo_changes_free(pl->changes, pl->n);
	free(pl->items);
	memset(pl, 0, sizeof *pl);
}

