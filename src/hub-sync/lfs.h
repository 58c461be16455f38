/* lfs - Git LFS on the client side, without git-lfs: pointers, the local object store, the
 * "lfs" filter registered with libgit2, and where a repository's LFS server is.
 *
 * libgit2 has no LFS and runs no external filter drivers: a path whose attributes say
 * filter=lfs would be committed raw.  So the filter is ours: registered under the name "lfs"
 * with GIT_FILTER_DRIVER_PRIORITY, its clean step streams the file through SHA-256 into a
 * temporary file under .git/lfs/tmp, fsyncs it, renames it to .git/lfs/objects/OID[0:2]/
 * OID[2:4]/OID (git-lfs's layout, so `git lfs` commands in the same clone see the objects) and
 * hands libgit2 the pointer text in place of the content.  Memory use is a 64 KiB buffer
 * whatever the file size.  As in git-lfs, an empty file stays empty and a file that already
 * is a pointer passes through unchanged.
 *
 * The filter also runs when libgit2 merely hashes a working file to see whether it changed
 * (status), and there libgit2 reads the whole file into memory first: a 300 GB checkpoint with
 * a new mtime would be read into RAM.  lfs_filter_mode(LFS_PASSTHROUGH) makes the filter step
 * aside; status then hashes raw bytes, which never equal a pointer's, so such a file shows as
 * modified, and adding it again produces the same pointer: no new commit, nothing uploaded. */
#ifndef HUBSYNC_LFS_H
#define HUBSYNC_LFS_H

#include <stddef.h>
#include <git2.h>

#define LFS_POINTER_MAX 1024  /* git-lfs never reads a blob this large as a pointer */

struct lfs_pointer {
	char oid[65];                /* sha256, lowercase hex */
	unsigned long long size;     /* bytes of the object */
};

/* 0 if data is an LFS pointer (version line, "oid sha256:", "size"), else -1 */
int lfs_pointer_parse(const char *data, size_t len, struct lfs_pointer *p);
/* the canonical pointer text git-lfs writes; returns its length */
size_t lfs_pointer_format(const struct lfs_pointer *p, char *buf, size_t len);

/* gitdir/lfs/objects/OID[0:2]/OID[2:4]/OID */
void lfs_object_path(const char *gitdir, const char *oid, char *out, size_t len);

enum lfs_mode { LFS_PASSTHROUGH, LFS_CLEAN };

/* Registers the filter (once per process); it stores objects under gitdir/lfs.  workdir ends
 * with '/'. */
int lfs_filter_register(const char *gitdir, const char *workdir, char *err, size_t errlen);
void lfs_filter_mode(enum lfs_mode mode);

/* What the clean steps did since the last call (for the summary), then reset. */
struct lfs_clean_stats {
	unsigned files;              /* files cleaned into pointers */
	unsigned new_objects;        /* of which not already in the store */
	unsigned long long bytes;    /* their bytes */
};
void lfs_filter_stats(struct lfs_clean_stats *out);

/* Cleans files ahead of libgit2, `jobs` at a time: hashing and copying the bytes into the store
 * is most of the cost of adding a large file, and libgit2 adds one file at a time.  A file
 * whose stat (inode, size, mtime and ctime to the nanosecond) did not change while it was read
 * is remembered, and when libgit2 then adds it, the filter lets the bytes stream by and emits
 * the remembered pointer if the stat still matches and the byte count agrees - the same trust
 * in stat data that git's index puts in it.  Any other file is cleaned by the filter as usual.
 * `ready` (may be NULL) is called from the worker threads as each object is stored, which lets
 * its upload start while the others are still being hashed. */
typedef void (*lfs_ready_fn)(void *ctx, const char *path, const struct lfs_pointer *p,
			     const char *object_file);
void lfs_preclean(char *const *paths, size_t n, int jobs, lfs_ready_fn ready, void *ctx);
/* For a progress line, from any thread: the bytes lfs_preclean hashed so far, of the sizes of
 * the files it was given (a file that grows while it is read can overshoot); 1 once it is over,
 * 0 while it runs or before it starts. */
int lfs_preclean_progress(unsigned long long *done, unsigned long long *total);

/* The LFS server URL for `remote`, as git-lfs finds it: lfs.url, then remote.NAME.lfsurl from
 * git config, then the same keys in the working tree's .lfsconfig, else the remote URL plus
 * ".git/info/lfs" (plus "/info/lfs" when the URL already ends in .git).  0 or -1 + err. */
int lfs_endpoint(git_repository *repo, const char *remote, const char *remote_url,
		 char *out, size_t len, char *err, size_t errlen);

/* Drops the "/info/lfs" derivation tail etc.: exposed for the unit test */
int lfs_endpoint_from_url(const char *remote_url, char *out, size_t len);

#endif
