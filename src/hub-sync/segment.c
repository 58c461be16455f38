#include "segment.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "msg.h"
#include "xalloc.h"

void segment_name(const char *path, unsigned k, char *out, size_t len)
{
	snprintf(out, len, "%s.%05u", path, k);
}

static void manifest_name(const char *path, char *out, size_t len)
{
	snprintf(out, len, "%s.manifest", path);
}

int segment_tracked(git_index *index, const char *path)
{
	char name[PATH_MAX];
	manifest_name(path, name, sizeof name);
	return git_index_get_bypath(index, name, 0) != NULL;
}

int segment_sources(git_index *index, char ***out, size_t *n)
{
	size_t count = git_index_entrycount(index), k = 0;
	char **list = calloc(count + 1, sizeof *list);

	if (!list)
		return -1;
	for (size_t i = 0; i < count; i++) {
		const git_index_entry *e = git_index_get_byindex(index, i);
		size_t len = strlen(e->path);
		if (len > 9 && strcmp(e->path + len - 9, ".manifest") == 0 &&
		    (e->flags_extended & GIT_INDEX_ENTRY_SKIP_WORKTREE))
			list[k++] = strndup(e->path, len - 9);
	}
	*out = list;
	*n = k;
	return 0;
}

static int lib_err(char *err, size_t errlen, const char *what)
{
	const git_error *e = git_error_last();
	return errf(err, errlen, "%s: %s", what, e ? e->message : "unknown libgit2 error");
}

/* Puts a virtual file (in git, not in the working tree) into the index. */
static int put_entry(git_repository *repo, git_index *index, const char *name, const char *data,
		     size_t len, char *err, size_t errlen)
{
	git_index_entry e;
	git_oid id;

	if (git_blob_create_from_buffer(&id, repo, data, len) < 0)
		return lib_err(err, errlen, name);
	memset(&e, 0, sizeof e);
	e.path = name;
	e.id = id;
	e.mode = GIT_FILEMODE_BLOB;
	e.file_size = (uint32_t)len;
	e.flags_extended = GIT_INDEX_ENTRY_SKIP_WORKTREE;
	if (git_index_add(index, &e) < 0)
		return lib_err(err, errlen, name);
	return 0;
}

static int read_at(int fd, char *buf, size_t len, off_t off)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = pread(fd, buf + got, len - got, off + (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

unsigned segment_remove(git_index *index, const char *path)
{
	char name[PATH_MAX];
	unsigned n = 0;

	for (unsigned k = 0;; k++) {
		segment_name(path, k, name, sizeof name);
		if (!git_index_get_bypath(index, name, 0) || git_index_remove_bypath(index, name) < 0)
			break;
		n++;
	}
	manifest_name(path, name, sizeof name);
	if (git_index_get_bypath(index, name, 0) && git_index_remove_bypath(index, name) == 0)
		n++;
	return n;
}

int segment_sync(git_repository *repo, git_index *index, const char *path,
		 const struct segment_opts *o, struct segment_result *r, char *err, size_t errlen)
{
	const char *wd = git_repository_workdir(repo);
	char full[PATH_MAX], name[PATH_MAX], *buf = NULL, *man = NULL;
	unsigned long long *sizes = NULL, committed = 0, off = 0;
	unsigned m = 0, k, start;
	size_t mancap, manlen;
	struct stat st;
	int fd, rc = -1;

	memset(r, 0, sizeof *r);
	snprintf(full, sizeof full, "%s%s", wd, path);
	fd = open(full, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		errf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	r->file_size = (unsigned long long)st.st_size;

	/* what is committed: segments 0..m-1 */
	for (;; m++) {
		const git_index_entry *e;
		segment_name(path, m, name, sizeof name);
		if (!(e = git_index_get_bypath(index, name, 0)))
			break;
		unsigned long long *ns = realloc(sizes, sizeof *sizes * (m + 1));
		if (!ns) {
			xalloc_err_in(err, errlen, path, "the list of segment sizes", 0);
			goto out;
		}
		sizes = ns;
		sizes[m] = e->file_size;
		committed += e->file_size;
	}
	r->was_tracked = m > 0 || segment_tracked(index, path);
	r->committed = committed;
	if (r->file_size < committed && !o->allow_shrink) {
		r->shrunk = 1;
		r->segments = m;
		rc = 0;
		goto out;
	}
	buf = malloc(o->size ? o->size : 1);
	if (!buf) {
		xalloc_err_in(err, errlen, path, "a segment's buffer", o->size ? o->size : 1);
		goto out;
	}

	/* Append-only: resume at the last committed segment (it may have been the partial one).
	 * Segment 0 is re-hashed to notice a file that was replaced rather than appended to. */
	start = m >= 2 && r->file_size >= committed ? m - 1 : 0;
	if (start) {
		git_oid id;
		segment_name(path, 0, name, sizeof name);
		if (read_at(fd, buf, sizes[0], 0) < 0 ||
		    git_odb_hash(&id, buf, sizes[0], GIT_OBJECT_BLOB) < 0 ||
		    !git_oid_equal(&id, &git_index_get_bypath(index, name, 0)->id))
			start = 0;
	}
	for (k = 0; k < start; k++)
		off += sizes[k];

	for (k = start; off < r->file_size; k++) {
		unsigned long long want = r->file_size - off < o->size ? r->file_size - off : o->size;
		size_t len = (size_t)want;
		const git_index_entry *e;
		git_oid id;

		if (read_at(fd, buf, len, (off_t)off) < 0) {
			errf(err, errlen, "%s: read error at byte %llu: %s", path, off, strerror(errno));
			goto out;
		}
		if (want == o->size) {  /* complete: end after its last newline */
			char *nl = memrchr(buf, '\n', len);
			if (nl)
				len = (size_t)(nl - buf) + 1;
		}
		segment_name(path, k, name, sizeof name);
		e = git_index_get_bypath(index, name, 0);
		if (git_odb_hash(&id, buf, len, GIT_OBJECT_BLOB) < 0) {
			lib_err(err, errlen, name);
			goto out;
		}
		if (!e || !git_oid_equal(&id, &e->id)) {
			if (!o->dry_run && put_entry(repo, index, name, buf, len, err, errlen) < 0)
				goto out;
			r->changed++;
			r->changed_bytes += len;
		}
		unsigned long long *ns = k >= m ? realloc(sizes, sizeof *sizes * (k + 1)) : sizes;
		if (!ns) {
			xalloc_err_in(err, errlen, path, "the list of segment sizes", 0);
			goto out;
		}
		sizes = ns;
		sizes[k] = len;
		off += len;
	}
	r->segments = k;
	for (; k < m; k++) {  /* the file shrank and that is allowed */
		segment_name(path, k, name, sizeof name);
		if (!o->dry_run)
			git_index_remove_bypath(index, name);
		r->removed++;
	}

	/* the manifest: how to rebuild the file, and every segment's size */
	mancap = 512 + strlen(path) * 2 + (size_t)r->segments * 32;
	man = malloc(mancap);
	if (!man) {
		xalloc_err_in(err, errlen, path, "the segment manifest", mancap);
		goto out;
	}
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	manlen = (size_t)snprintf(man, mancap,
		"# %s is stored as the segments listed below (hub-sync, lmtk): a growing log is\n"
		"# committed in pieces that never change once complete, so that a sync uploads only\n"
		"# what is new.  To rebuild it:  cat %s.[0-9]* > %s\n"
		"version 1\nsource %s\nsize %llu\nsegment-size %llu\nsegments %u\n",
		base, base, base, base, off, o->size, r->segments);
	for (k = 0; k < r->segments && manlen < mancap; k++)
		manlen += (size_t)snprintf(man + manlen, mancap - manlen, "%s.%05u %llu\n", base, k, sizes[k]);
	manifest_name(path, name, sizeof name);
	{
		const git_index_entry *e = git_index_get_bypath(index, name, 0);
		git_oid id;
		if (git_odb_hash(&id, man, manlen, GIT_OBJECT_BLOB) < 0) {
			lib_err(err, errlen, name);
			goto out;
		}
		if ((!e || !git_oid_equal(&id, &e->id)) && !o->dry_run &&
		    put_entry(repo, index, name, man, manlen, err, errlen) < 0)
			goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	free(man);
	free(sizes);
	return rc;
}
