#include "repo.h"

#include <errno.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "file.h"
#include "lfs.h"
#include "msg.h"
#include "token.h"
#include "xalloc.h"

static int lib_err(char *err, size_t errlen, const char *fmt, const char *arg)
{
	const git_error *e = git_error_last();
	char what[PATH_MAX + 128];
	snprintf(what, sizeof what, fmt, arg);
	errf(err, errlen, "%s: %s", what, e ? e->message : "unknown libgit2 error");
	token_scrub(err);
	return -1;
}

/* libgit2's pack builder searches deltas between every blob and the ten before it: for a
 * log's 8 MiB segments that took 3 s for 45 MB at the first sync (minutes for a 1 GB log) and
 * saved 8% of the pack, as different parts of a log share little.  So blobs over 1 MiB are
 * packed without deltas, as git does above core.bigFileThreshold.  libgit2 1.5 reads that
 * threshold from "pack.deltaCacheSize" (a slip in pack-objects.c); later versions and git use
 * "pack.bigFileThreshold": both are set, in a file of our own added at the application level
 * of the repository's configuration - .git/config is never written. */
int repo_tune_pack(struct repo *r, char *err, size_t errlen)
{
	static const char text[] =
		"# written by hub-sync (lmtk) for itself; git never reads this file\n"
		"[pack]\n\tbigFileThreshold = 1048576\n\tdeltaCacheSize = 1048576\n";
	char path[PATH_MAX + 32], *old = NULL, ferr[PATH_MAX + 100];
	size_t oldlen = 0;
	git_config *cfg = NULL;
	int rc = 0;

	snprintf(path, sizeof path, "%s/hub-sync.config", r->gitdir);
	if (file_read_all(path, &old, &oldlen, ferr, sizeof ferr) < 0 || oldlen != sizeof text - 1 ||
	    memcmp(old, text, oldlen) != 0)
		if (file_write_atomic(path, text, sizeof text - 1, 0644, ferr, sizeof ferr) < 0)
			rc = errf(err, errlen, "%s", ferr);
	free(old);
	if (rc == 0 && (git_repository_config(&cfg, r->git) < 0 ||
			git_config_add_file_ondisk(cfg, path, GIT_CONFIG_LEVEL_APP, r->git, 1) < 0))
		rc = lib_err(err, errlen, "%s", path);
	git_config_free(cfg);
	return rc;
}

int repo_open(struct repo *r, const char *path, char *err, size_t errlen)
{
	const char *wd, *cd;
	size_t n;

	memset(r, 0, sizeof *r);
	if (git_repository_open_ext(&r->git, path, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0)
		return lib_err(err, errlen, "%s: not a git clone", path);
	if (!(wd = git_repository_workdir(r->git))) {
		errf(err, errlen, "%s: a bare repository; hub-sync needs a clone with a working tree", path);
		return -1;
	}
	snprintf(r->workdir, sizeof r->workdir, "%s", wd);
	cd = git_repository_commondir(r->git);
	snprintf(r->gitdir, sizeof r->gitdir, "%s", cd);
	n = strlen(r->gitdir);
	while (n > 1 && r->gitdir[n - 1] == '/')
		r->gitdir[--n] = '\0';
	if (git_repository_index(&r->index, r->git) < 0)
		return lib_err(err, errlen, "%s: cannot read the index", path);
	return 0;
}

void repo_close(struct repo *r)
{
	git_index_free(r->index);
	git_repository_free(r->git);
	memset(r, 0, sizeof *r);
}

int repo_branch(struct repo *r, char *out, size_t len, char *err, size_t errlen)
{
	git_reference *head = NULL;
	const char *target;

	if (git_reference_lookup(&head, r->git, "HEAD") < 0)
		return lib_err(err, errlen, "%s", "HEAD");
	target = git_reference_symbolic_target(head);
	if (!target || strncmp(target, "refs/heads/", 11) != 0) {
		git_reference_free(head);
		return errf(err, errlen, "HEAD is detached; check out the branch to sync (git checkout main)");
	}
	snprintf(out, len, "%s", target + 11);
	git_reference_free(head);
	return 0;
}

int repo_remote_url(struct repo *r, const char *remote, char *out, size_t len, char *err, size_t errlen)
{
	git_remote *rm = NULL;
	const char *url;

	if (git_remote_lookup(&rm, r->git, remote) < 0)
		return lib_err(err, errlen, "remote '%s'", remote);
	url = git_remote_pushurl(rm) ? git_remote_pushurl(rm) : git_remote_url(rm);
	snprintf(out, len, "%s", url ? url : "");
	git_remote_free(rm);
	return 0;
}

static int skip_worktree(struct repo *r, const char *path)
{
	const git_index_entry *e = git_index_get_bypath(r->index, path, 0);
	return e && (e->flags_extended & GIT_INDEX_ENTRY_SKIP_WORKTREE);
}

int repo_changes(struct repo *r, char *const *patterns, int npatterns, struct change **out,
		 size_t *n, char *err, size_t errlen)
{
	git_status_options so;
	git_status_list *list = NULL;
	struct change *c;
	size_t count, k = 0;

	git_status_options_init(&so, GIT_STATUS_OPTIONS_VERSION);

	*out = NULL;
	*n = 0;
	/* another process may have changed it (a second hub-sync, after our lock wait) */
	if (git_index_read(r->index, 1) < 0)
		return lib_err(err, errlen, "%s", "reading the index");
	so.show = GIT_STATUS_SHOW_INDEX_AND_WORKDIR;
	so.flags = GIT_STATUS_OPT_INCLUDE_UNTRACKED | GIT_STATUS_OPT_RECURSE_UNTRACKED_DIRS |
		   GIT_STATUS_OPT_EXCLUDE_SUBMODULES;
	so.pathspec.strings = (char **)patterns;
	so.pathspec.count = (size_t)npatterns;
	if (git_status_list_new(&list, r->git, &so) < 0)
		return lib_err(err, errlen, "%s", "git status");
	count = git_status_list_entrycount(list);
	c = calloc(count + 1, sizeof *c);
	if (!c) {
		git_status_list_free(list);
		return xalloc_err(err, errlen, "the list of changed files", (count + 1) * sizeof *c);
	}
	for (size_t i = 0; i < count; i++) {
		const git_status_entry *s = git_status_byindex(list, i);
		const git_diff_delta *d = s->index_to_workdir ? s->index_to_workdir : s->head_to_index;
		const char *path = d->new_file.path ? d->new_file.path : d->old_file.path;
		enum change_kind kind;

		if (s->status & GIT_STATUS_WT_NEW)
			kind = CH_NEW;
		else if (s->status & GIT_STATUS_WT_DELETED)
			kind = CH_DELETED;
		else if (s->status & GIT_STATUS_WT_TYPECHANGE)
			kind = CH_TYPECHANGE;
		else if (s->status & GIT_STATUS_WT_MODIFIED)
			kind = CH_MODIFIED;
		else if (s->status & (GIT_STATUS_INDEX_NEW | GIT_STATUS_INDEX_MODIFIED |
				      GIT_STATUS_INDEX_DELETED | GIT_STATUS_INDEX_TYPECHANGE))
			kind = CH_STAGED;
		else
			continue;  /* ignored, conflicted, unreadable */
		if (kind == CH_DELETED && skip_worktree(r, path))
			continue;  /* a log segment: lives in git only */
		c[k].path = strdup(path);
		c[k].kind = kind;
		k++;
	}
	git_status_list_free(list);
	*out = c;
	*n = k;
	return 0;
}

void repo_changes_free(struct change *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(c[i].path);
	free(c);
}

int repo_is_lfs(struct repo *r, const char *path)
{
	const char *v = NULL;
	if (git_attr_get(&v, r->git, 0, path, "filter") < 0) {
		git_error_clear();
		return 0;
	}
	return git_attr_value(v) == GIT_ATTR_VALUE_STRING && strcmp(v, "lfs") == 0;
}

int repo_tracked(struct repo *r, const char *path)
{
	return git_index_get_bypath(r->index, path, 0) != NULL;
}

void repo_path_pattern(const char *path, char *out, size_t len)
{
	size_t o = 0;
	if (len < 2)
		return;
	out[o++] = '/';
	for (const char *p = path; *p && o + 12 < len; p++) {
		if (*p == ' ' || *p == '\t') {
			memcpy(out + o, "[[:space:]]", 11);
			o += 11;
			continue;
		}
		if (strchr("*?[]\\!#\"", *p))
			out[o++] = '\\';
		out[o++] = *p;
	}
	out[o] = '\0';
}

int repo_exclude(struct repo *r, const char *path, char *err, size_t errlen)
{
	char file[PATH_MAX + 32], pat[PATH_MAX * 2], line[PATH_MAX * 2 + 2], ferr[PATH_MAX + 100];
	char *old = NULL, *text;
	size_t oldlen = 0, len;
	static const char head[] = "# hub-sync: logs committed as segments (hub-sync(1)), not as files\n";

	snprintf(file, sizeof file, "%s/info/exclude", r->gitdir);
	repo_path_pattern(path, pat, sizeof pat);
	snprintf(line, sizeof line, "%s\n", pat);
	if (file_read_all(file, &old, &oldlen, ferr, sizeof ferr) < 0 && errno != ENOENT)
		return errf(err, errlen, "%s", ferr);
	for (char *p = old; p && (p = strstr(p, line)); p++)
		if (p == old || p[-1] == '\n') {
			free(old);
			return 0;
		}
	text = malloc(oldlen + sizeof head + strlen(line) + 2);
	if (!text) {
		free(old);
		return xalloc_err_in(err, errlen, file, "the new exclude file",
				     oldlen + sizeof head + strlen(line) + 2);
	}
	len = oldlen;
	memcpy(text, old ? old : "", oldlen);
	if (len && text[len - 1] != '\n')
		text[len++] = '\n';
	if (!old || !strstr(old, head)) {
		memcpy(text + len, head, sizeof head - 1);
		len += sizeof head - 1;
	}
	memcpy(text + len, line, strlen(line));
	len += strlen(line);
	free(old);
	snprintf(pat, sizeof pat, "%s/info", r->gitdir);
	mkdir(pat, 0755);
	if (file_write_atomic(file, text, len, 0644, ferr, sizeof ferr) < 0) {
		free(text);
		return errf(err, errlen, "%s", ferr);
	}
	free(text);
	return 0;
}

int repo_add(struct repo *r, const char *path, char *err, size_t errlen)
{
	if (git_index_add_bypath(r->index, path) < 0)
		return lib_err(err, errlen, "%s", path);
	return 0;
}

int repo_remove(struct repo *r, const char *path, char *err, size_t errlen)
{
	if (git_index_remove_bypath(r->index, path) < 0)
		return lib_err(err, errlen, "%s", path);
	return 0;
}

long long repo_staged_size(struct repo *r, const char *path)
{
	const git_index_entry *e = git_index_get_bypath(r->index, path, 0);
	git_odb *odb = NULL;
	size_t len = 0;
	git_object_t type;
	long long size = -1;

	if (e && git_repository_odb(&odb, r->git) == 0 &&
	    git_odb_read_header(&len, &type, odb, &e->id) == 0)
		size = (long long)len;
	git_odb_free(odb);
	return size;
}

static int signature(git_repository *repo, git_signature **sig)
{
	char host[256] = "localhost", mail[300];

	if (git_signature_default(sig, repo) == 0)
		return 0;
	/* no user.name/user.email configured: say who did it */
	git_error_clear();
	gethostname(host, sizeof host - 1);
	snprintf(mail, sizeof mail, "hub-sync@%s", host);
	return git_signature_now(sig, "hub-sync", mail);
}

int repo_commit(struct repo *r, const char *message, int *made, char *id, size_t idlen,
		char *err, size_t errlen)
{
	git_oid tree_id, commit_id;
	git_tree *tree = NULL;
	git_commit *parent = NULL;
	git_signature *sig = NULL;
	git_object *head = NULL;
	int rc = -1;

	*made = 0;
	if (git_index_write(r->index) < 0)
		return lib_err(err, errlen, "%s", "writing the index");
	if (git_index_write_tree(&tree_id, r->index) < 0)
		return lib_err(err, errlen, "%s", "writing the tree");
	if (git_revparse_single(&head, r->git, "HEAD^{commit}") == 0) {
		parent = (git_commit *)head;
		if (git_oid_equal(git_commit_tree_id(parent), &tree_id)) {
			rc = 0;  /* nothing new */
			goto out;
		}
	} else if (git_index_entrycount(r->index) == 0) {
		rc = 0;  /* no commit yet, and nothing to make the first one of */
		goto out;
	}
	git_error_clear();
	if (git_tree_lookup(&tree, r->git, &tree_id) < 0 || signature(r->git, &sig) < 0 ||
	    git_commit_create(&commit_id, r->git, "HEAD", sig, sig, NULL, message, tree,
			      parent ? 1 : 0, (const git_commit **)&parent) < 0) {
		lib_err(err, errlen, "%s", "commit");
		goto out;
	}
	*made = 1;
	rc = 0;
out:
	if (rc == 0) {
		git_object *h = NULL;
		if (git_revparse_single(&h, r->git, "HEAD^{commit}") == 0)
			git_oid_tostr(id, idlen, git_object_id(h));
		else
			snprintf(id, idlen, "none");
		git_object_free(h);
		git_error_clear();
	}
	git_signature_free(sig);
	git_tree_free(tree);
	git_object_free(head);
	return rc;
}

/* A revwalk over HEAD's commits that the remote-tracking branch lacks; NULL walk if HEAD is
 * unborn. */
static int unpushed_walk(struct repo *r, const char *remote, const char *branch, git_revwalk **out,
			 char *err, size_t errlen)
{
	git_oid head, tracking;
	char ref[512];

	*out = NULL;
	if (git_reference_name_to_id(&head, r->git, "HEAD") < 0) {
		git_error_clear();
		return 0;
	}
	if (git_revwalk_new(out, r->git) < 0 || git_revwalk_push(*out, &head) < 0)
		return lib_err(err, errlen, "%s", "revwalk");
	snprintf(ref, sizeof ref, "refs/remotes/%s/%s", remote, branch);
	if (git_reference_name_to_id(&tracking, r->git, ref) == 0 && git_revwalk_hide(*out, &tracking) < 0) {
		git_revwalk_free(*out);
		*out = NULL;
		return lib_err(err, errlen, "%s", ref);
	}
	git_error_clear();
	return 0;
}

int repo_unpushed(struct repo *r, const char *remote, const char *branch, size_t *count,
		  char *err, size_t errlen)
{
	git_revwalk *w;
	git_oid id;

	*count = 0;
	if (unpushed_walk(r, remote, branch, &w, err, errlen) < 0)
		return -1;
	while (w && git_revwalk_next(&id, w) == 0)
		(*count)++;
	git_revwalk_free(w);
	git_error_clear();
	return 0;
}

static int add_pointer(struct repo *r, git_odb *odb, const git_diff_file *f, struct batch_object **objs,
		       size_t *n, size_t *cap)
{
	size_t len;
	git_object_t type;
	git_odb_object *obj = NULL;
	struct lfs_pointer p;
	char file[PATH_MAX + 128];

	if (!git_oid_is_zero(&f->id) && (f->mode == GIT_FILEMODE_BLOB || f->mode == GIT_FILEMODE_BLOB_EXECUTABLE) &&
	    git_odb_read_header(&len, &type, odb, &f->id) == 0 && len < LFS_POINTER_MAX &&
	    git_odb_read(&obj, odb, &f->id) == 0 &&
	    lfs_pointer_parse(git_odb_object_data(obj), git_odb_object_size(obj), &p) == 0) {
		for (size_t i = 0; i < *n; i++)
			if (strcmp((*objs)[i].oid, p.oid) == 0)
				goto done;
		if (*n == *cap) {
			size_t nc = *cap ? *cap * 2 : 64;
			struct batch_object *no = realloc(*objs, nc * sizeof *no);
			if (!no) {
				git_odb_object_free(obj);
				return -1;
			}
			*objs = no;
			*cap = nc;
		}
		lfs_object_path(r->gitdir, p.oid, file, sizeof file);
		memcpy((*objs)[*n].oid, p.oid, sizeof p.oid);
		(*objs)[*n].size = p.size;
		(*objs)[*n].file = strdup(file);
		(*objs)[*n].name = strdup(f->path);
		(*n)++;
	}
done:
	git_odb_object_free(obj);
	git_error_clear();
	return 0;
}

int repo_lfs_objects(struct repo *r, const char *remote, const char *branch,
		     struct batch_object **out, size_t *n, char *err, size_t errlen)
{
	git_revwalk *w = NULL;
	git_odb *odb = NULL;
	git_oid id;
	size_t cap = 0;
	int rc = -1;

	*out = NULL;
	*n = 0;
	if (unpushed_walk(r, remote, branch, &w, err, errlen) < 0)
		return -1;
	if (!w)
		return 0;
	if (git_repository_odb(&odb, r->git) < 0) {
		lib_err(err, errlen, "%s", "object database");
		goto out;
	}
	while (git_revwalk_next(&id, w) == 0) {
		git_commit *c = NULL, *parent = NULL;
		git_tree *t = NULL, *pt = NULL;
		git_diff *diff = NULL;
		git_diff_options dopts;

		git_diff_options_init(&dopts, GIT_DIFF_OPTIONS_VERSION);
		dopts.flags = GIT_DIFF_SKIP_BINARY_CHECK;
		if (git_commit_lookup(&c, r->git, &id) < 0 || git_commit_tree(&t, c) < 0 ||
		    (git_commit_parentcount(c) > 0 &&
		     (git_commit_parent(&parent, c, 0) < 0 || git_commit_tree(&pt, parent) < 0)) ||
		    git_diff_tree_to_tree(&diff, r->git, pt, t, &dopts) < 0) {
			lib_err(err, errlen, "%s", "reading the commits to push");
			git_commit_free(c), git_commit_free(parent), git_tree_free(t), git_tree_free(pt);
			goto out;
		}
		for (size_t i = 0; i < git_diff_num_deltas(diff); i++) {
			const git_diff_delta *d = git_diff_get_delta(diff, i);
			if (d->status == GIT_DELTA_DELETED)
				continue;
			if (add_pointer(r, odb, &d->new_file, out, n, &cap) < 0) {
				xalloc_err(err, errlen, "the list of LFS pointers", 0);
				git_diff_free(diff);
				git_commit_free(c), git_commit_free(parent), git_tree_free(t), git_tree_free(pt);
				goto out;
			}
		}
		git_diff_free(diff);
		git_commit_free(c), git_commit_free(parent), git_tree_free(t), git_tree_free(pt);
	}
	rc = 0;
out:
	git_odb_free(odb);
	git_revwalk_free(w);
	git_error_clear();
	return rc;
}

void repo_lfs_objects_free(struct batch_object *o, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(o[i].file);
		free(o[i].name);
	}
	free(o);
}

/* --- push ---------------------------------------------------------------------------------- */

struct push_ctx {
	const struct push_opts *o;
	int cred_calls;          /* this attempt */
	int auth_failed;
	char rejected[512];      /* "refs/heads/main: non-fast-forward" */
	char remote_msg[1024];   /* what the server printed (sideband), last lines */
	unsigned long long bytes;
};

static int on_credentials(git_credential **out, const char *url, const char *user_from_url,
			  unsigned int allowed, void *payload)
{
	struct push_ctx *c = payload;
	(void)url;

	if (!(allowed & GIT_CREDENTIAL_USERPASS_PLAINTEXT)) {
		c->auth_failed = 1;
		git_error_set_str(GIT_ERROR_HTTP, "authentication failed: the server wants a kind of "
				  "credentials other than a user name and token");
		return GIT_EAUTH;
	}
	if (!c->o->token) {
		c->auth_failed = 1;
		git_error_set_str(GIT_ERROR_HTTP, "authentication failed: the server asks for credentials "
				  "and no token was given (--token-file or HF_TOKEN)");
		return GIT_EAUTH;
	}
	/* a second call means the server refused the token: libgit2 would ask forever */
	if (c->cred_calls++ > 0) {
		c->auth_failed = 1;
		git_error_set_str(GIT_ERROR_HTTP, "authentication failed: check the token "
				  "(the git server refused it)");
		return GIT_EAUTH;
	}
	return git_credential_userpass_plaintext_new(out, user_from_url && *user_from_url ?
						     user_from_url : c->o->user, c->o->token);
}

static int on_update_ref(const char *refname, const char *status, void *payload)
{
	struct push_ctx *c = payload;
	if (status)
		snprintf(c->rejected, sizeof c->rejected, "%s: %s", refname, status);
	return 0;
}

static int on_sideband(const char *str, int len, void *payload)
{
	struct push_ctx *c = payload;
	size_t have = strlen(c->remote_msg), room = sizeof c->remote_msg - 1;

	if ((size_t)len > room)
		str += (size_t)len - room, len = (int)room;
	if (have + (size_t)len > room) {  /* keep the end: the reason comes last */
		size_t drop = have + (size_t)len - room;
		memmove(c->remote_msg, c->remote_msg + drop, have - drop + 1);
		have -= drop;
	}
	memcpy(c->remote_msg + have, str, (size_t)len);
	c->remote_msg[have + (size_t)len] = '\0';
	return 0;
}

static int on_push_progress(unsigned int current, unsigned int total, size_t bytes, void *payload)
{
	struct push_ctx *c = payload;
	(void)current, (void)total;
	c->bytes = bytes;
	return 0;
}

static void sleep_s(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* "remote: line\n" for each line the server printed, joined with "; " */
static void remote_lines(const char *msg, char *out, size_t len)
{
	char buf[1024], *save = NULL, *line;
	size_t used = 0;

	snprintf(buf, sizeof buf, "%s", msg);
	out[0] = '\0';
	for (line = strtok_r(buf, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save)) {
		int w = snprintf(out + used, len - used, "%sremote: %s", used ? "; " : "", line);
		if (w < 0 || (size_t)w >= len - used)
			break;
		used += (size_t)w;
	}
}

int repo_push(struct repo *r, const struct push_opts *o, struct push_result *res,
	      char *err, size_t errlen)
{
	git_remote *rm = NULL;
	char spec[600], *specs[1] = {spec}, lines[1024];
	git_strarray refspecs = {specs, 1};
	int rc = -1;

	memset(res, 0, sizeof *res);
	snprintf(spec, sizeof spec, "refs/heads/%s:refs/heads/%s", o->branch, o->branch);
	if (git_remote_lookup(&rm, r->git, o->remote) < 0)
		return lib_err(err, errlen, "remote '%s'", o->remote);
	for (int attempt = 0;; attempt++) {
		struct push_ctx c = {0};
		git_push_options po;
		const git_error *e;
		int prc;

		git_push_options_init(&po, GIT_PUSH_OPTIONS_VERSION);

		c.o = o;
		po.callbacks.credentials = on_credentials;
		po.callbacks.push_update_reference = on_update_ref;
		po.callbacks.sideband_progress = on_sideband;
		po.callbacks.push_transfer_progress = on_push_progress;
		po.callbacks.payload = &c;
		po.proxy_opts.type = GIT_PROXY_AUTO;
		res->attempts = attempt + 1;
		prc = git_remote_push(rm, &refspecs, &po);
		res->bytes += c.bytes;
		remote_lines(c.remote_msg, lines, sizeof lines);
		if (prc == 0 && !c.rejected[0]) {
			rc = 0;
			break;
		}
		if (prc == GIT_ENONFASTFORWARD && !c.rejected[0])  /* libgit2 saw it before sending */
			snprintf(c.rejected, sizeof c.rejected, "refs/heads/%s: non-fast-forward", o->branch);
		if (c.rejected[0]) {
			res->rejected = 1;
			if (strstr(c.rejected, "fast-forward") || strstr(c.rejected, "fetch first"))
				errf(err, errlen, "push rejected (%s): the remote's %s has commits this clone "
				     "lacks; git pull in %s, then run hub-sync again",
				     c.rejected, o->branch, r->workdir);
			else
				errf(err, errlen, "push rejected (%s)%s%s", c.rejected, lines[0] ? ": " : "", lines);
			token_scrub(err);
			break;
		}
		e = git_error_last();
		errf(err, errlen, "push to %s: %s%s%s", o->remote, e ? e->message : "failed",
		     lines[0] ? "; " : "", lines);
		token_scrub(err);
		if (c.auth_failed || prc == GIT_EAUTH) {
			res->auth_failed = 1;
			if (!strstr(err, "authentication failed"))
				errf(err, errlen, "authentication failed: check the token (push to %s: %s)",
				     o->remote, e ? e->message : "refused");
			token_scrub(err);
			break;
		}
		/* a 4xx other than auth, or a bad certificate, will not get better by asking again */
		if (prc == GIT_ECERTIFICATE || (e && strstr(e->message, "unexpected http status code: 4")))
			break;
		if (attempt >= o->retries) {
			if (attempt > 0) {
				size_t l = strlen(err);
				snprintf(err + l, errlen - l, " (gave up after %d attempts)", attempt + 1);
			}
			break;
		}
		double wait = o->retry_delay * (double)(1u << (attempt < 16 ? attempt : 16));
		token_say("%s; retrying in %.3g s (attempt %d of %d)", err, wait, attempt + 2, o->retries + 1);
		sleep_s(wait);
	}
	git_remote_free(rm);
	return rc;
}
