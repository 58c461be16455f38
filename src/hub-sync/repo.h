/* repo - the git side of hub-sync, through libgit2: what changed, staging it, the commit, the
 * LFS objects a push will need, and the push itself.
 *
 * Nothing here writes .git/config: the remote's URL is read, never rewritten, and the token
 * reaches libgit2 only through the credentials callback.  libgit2 calls that callback again
 * after every 401, forever; ours gives the token once per push attempt and fails the second
 * call, which turns a wrong token into one clear error instead of a request storm.
 *
 * What changed comes from git status with the user's patterns as pathspecs (git's own glob
 * rules: `*` also matches `/`), untracked files included, ignored files not.  A failed push
 * leaves its commit in place; the next run sees HEAD ahead of the remote-tracking branch and
 * pushes it, together with any LFS object of any commit not yet on the remote. */
#ifndef HUBSYNC_REPO_H
#define HUBSYNC_REPO_H

#include <git2.h>
#include <limits.h>
#include <stddef.h>

#include "batch.h"

struct repo {
	git_repository *git;
	git_index *index;
	char workdir[PATH_MAX];  /* with a trailing '/' */
	char gitdir[PATH_MAX];   /* the common .git directory, no trailing '/' */
};

enum change_kind { CH_NEW, CH_MODIFIED, CH_DELETED, CH_TYPECHANGE, CH_STAGED };

struct change {
	char *path;
	enum change_kind kind;
};

int repo_open(struct repo *r, const char *path, char *err, size_t errlen);
void repo_close(struct repo *r);

/* Packs blobs over 1 MiB without delta search (see repo.c); writes .git/hub-sync.config. */
int repo_tune_pack(struct repo *r, char *err, size_t errlen);

/* The branch HEAD is on ("main"), also when it has no commit yet.  -1 + err if detached. */
int repo_branch(struct repo *r, char *out, size_t len, char *err, size_t errlen);

/* The URL pushes go to (pushurl, else url).  -1 + err if there is no such remote. */
int repo_remote_url(struct repo *r, const char *remote, char *out, size_t len, char *err, size_t errlen);

/* Files matching the patterns that differ from the index, plus paths staged but not committed.
 * Segment entries (skip-worktree) are never reported. */
int repo_changes(struct repo *r, char *const *patterns, int npatterns, struct change **out,
		 size_t *n, char *err, size_t errlen);
void repo_changes_free(struct change *c, size_t n);

/* 1 if path's attributes send it to LFS (filter=lfs) */
int repo_is_lfs(struct repo *r, const char *path);
/* 1 if path is in the index */
int repo_tracked(struct repo *r, const char *path);

/* A path as a .gitattributes or .gitignore pattern that matches exactly it: anchored with
 * '/', glob characters escaped, blanks as [[:space:]] (as `git lfs track` writes them). */
void repo_path_pattern(const char *path, char *out, size_t len);

/* Adds path to .git/info/exclude, if not there yet. */
int repo_exclude(struct repo *r, const char *path, char *err, size_t errlen);

/* git add PATH (filters per .gitattributes) / git rm --cached PATH */
int repo_add(struct repo *r, const char *path, char *err, size_t errlen);
int repo_remove(struct repo *r, const char *path, char *err, size_t errlen);
/* size of path's blob in the index, or -1 */
long long repo_staged_size(struct repo *r, const char *path);

/* Writes the index and, if its tree differs from HEAD's, commits it on HEAD.
 * *made = 1 if a commit was made; id gets HEAD's abbreviated id. */
int repo_commit(struct repo *r, const char *message, int *made, char *id, size_t idlen,
		char *err, size_t errlen);

/* Commits on HEAD that refs/remotes/REMOTE/BRANCH does not have (all of them if it does not
 * exist); 0 = nothing to push. */
int repo_unpushed(struct repo *r, const char *remote, const char *branch, size_t *count,
		  char *err, size_t errlen);

/* The LFS objects those commits point at (deduplicated), with their local store paths. */
int repo_lfs_objects(struct repo *r, const char *remote, const char *branch,
		     struct batch_object **out, size_t *n, char *err, size_t errlen);
void repo_lfs_objects_free(struct batch_object *o, size_t n);

struct push_opts {
	const char *remote, *branch;
	const char *user, *token;
	int retries;
	double retry_delay;
};

struct push_result {
	int auth_failed;         /* the server refused the token */
	int rejected;            /* the server refused the update (non-fast-forward, hook) */
	unsigned long long bytes;/* pack bytes sent */
	int attempts;
};

/* Pushes refs/heads/BRANCH, retrying transient failures with backoff.  0 or -1 + err. */
int repo_push(struct repo *r, const struct push_opts *o, struct push_result *res,
	      char *err, size_t errlen);

#endif
