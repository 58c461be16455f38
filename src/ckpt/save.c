/* save - see save.h. */
#include "ckpt/save.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"
#include "fsx.h"
#include "lock.h"
#include "msg.h"
#include "outfile.h"
#include "xalloc.h"
#include "ckpt/steplock.h"

void save_owner(char *buf, size_t len)
{
	snprintf(buf, len, "%ld@%s", (long)getpid(), lock_hostname());
}

/* A temporary's owner: ".global_stepN.tmp.PID@HOST" (a save) or ".global_stepN.tmp.old.PID@HOST"
 * (a re-saved step moved aside), PID being world rank 0's.  1 with *pid and *host; 0 for a name
 * without one (an lmtk before the names had an owner). */
static int tmp_owner(const char *name, long *pid, const char **host)
{
	const char *t = strstr(name, ".tmp.");
	char *end;
	if (!t)
		return 0;
	t += 5;
	if (strncmp(t, "old.", 4) == 0)
		t += 4;
	if (*t < '0' || *t > '9')
		return 0;
	*pid = strtol(t, &end, 10);
	if (*end != '@' || !end[1] || *pid <= 0)
		return 0;
	*host = end + 1;
	return 1;
}

void save_clean(const char *dir, int all)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[4096];
	if (!d)
		return;
	while ((e = readdir(d)))
		if (strncmp(e->d_name, ".global_step", 12) == 0 && strstr(e->d_name, ".tmp.")) {
			long pid;
			const char *host;
			if (!all && (!tmp_owner(e->d_name, &pid, &host) ||
					strcmp(host, lock_hostname()) != 0 ||
					(pid != (long)getpid() && !(kill((pid_t)pid, 0) < 0 && errno == ESRCH))))
				continue;
			snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
			fsx_rm_tree(p);
		}
	closedir(d);
	/* the small files a publish writes: a kill inside one's link-and-rename leaves a link */
	if (all) {
		outfile_sweep(dir, "latest");
		outfile_sweep(dir, "latest_checkpointed_iteration.txt");
		outfile_sweep(dir, SAVE_PUBLISHING);
	}
}

int save_step_begin(const char *stepdir, char *err, size_t errlen)
{
	if (mkdir(stepdir, 0755) < 0)
		return errf(err, errlen, "%s: %s", stepdir, strerror(errno));
	return steplock_create(stepdir, err, errlen);
}

void save_shard_metadata(struct st_writer *w, int64_t iteration, const char *kind)
{
	char it[32];
	snprintf(it, sizeof it, "%lld", (long long)iteration);
	st_metadata(w, "format", "lmtk-checkpoint");
	st_metadata(w, "iteration", it);
	st_metadata(w, "optimizer", kind);
}

int save_files_add(json_t *files, const char *shard, uint64_t bytes, uint32_t crc)
{
	char hex[16];
	snprintf(hex, sizeof hex, "%08x", crc);
	return json_object_set_new(files, shard, json_pack("{s:I,s:s}", "bytes", (json_int_t)bytes,
							   "crc32c", hex));
}

char *save_manifest_text(json_t *man)
{
	char *js = json_dumps(man, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	if (!js)
		return NULL;
	size_t n = strlen(js);
	char *s = realloc(js, n + 2);
	if (!s) {
		free(js);
		return NULL;
	}
	s[n] = '\n';
	s[n + 1] = 0;
	return s;
}

int save_manifest(const char *stepdir, json_t *man, char *err, size_t errlen)
{
	char path[4200];
	char *js = save_manifest_text(man);
	if (!js)
		return xalloc_err(err, errlen, "the checkpoint manifest's text", 0);
	snprintf(path, sizeof path, "%s/manifest.json", stepdir);
	int rc = file_write_atomic(path, js, strlen(js), 0644, err, errlen);
	free(js);
	if (rc < 0)
		return -1;
	file_fsync_dir(stepdir);
	return 0;
}

/* Points `latest` and latest_checkpointed_iteration.txt at global_step<it>, then drops the
 * publish record (the publish is done).  0, or -1 + err. */
static int name_latest(const char *dir, int64_t it, char *err, size_t errlen)
{
	char path[4200], line[80];
	snprintf(path, sizeof path, "%s/latest", dir);
	snprintf(line, sizeof line, "global_step%lld\n", (long long)it);
	if (file_write_atomic(path, line, strlen(line), 0644, err, errlen) < 0)
		return -1;
	snprintf(path, sizeof path, "%s/latest_checkpointed_iteration.txt", dir);
	snprintf(line, sizeof line, "%lld\n", (long long)it);
	if (file_write_atomic(path, line, strlen(line), 0644, err, errlen) < 0)
		return -1;
	snprintf(path, sizeof path, "%s/" SAVE_PUBLISHING, dir);
	if (unlink(path) < 0 && errno != ENOENT)
		return errf(err, errlen, "%s: %s", path, strerror(errno));
	file_fsync_dir(dir);
	return 0;
}

/* The directory entry dir/name, when it is a real directory (not a link) holding a regular
 * manifest.json: 1, else 0. */
static int is_step_dir(const char *dir, const char *name)
{
	char p[4200];
	struct stat sb;
	snprintf(p, sizeof p, "%s/%s", dir, name);
	if (lstat(p, &sb) < 0 || !S_ISDIR(sb.st_mode))
		return 0;
	snprintf(p, sizeof p, "%s/%s/manifest.json", dir, name);
	return lstat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

int save_publish(const char *dir, const char *tmp, int64_t it, char *err, size_t errlen)
{
	char name[64], final[4200], old[4400], path[4200], owner[96], line[80];
	struct stat sb;
	snprintf(name, sizeof name, "global_step%lld", (long long)it);
	snprintf(final, sizeof final, "%s/%s", dir, name);
	save_owner(owner, sizeof owner);
	snprintf(old, sizeof old, "%s/.%s.tmp.old.%s", dir, name, owner);
	/* the intent, first: a kill from here until `latest` names the step leaves this record,
	 * and the next writer on dir finishes the publish (save_finish_publish) */
	snprintf(path, sizeof path, "%s/" SAVE_PUBLISHING, dir);
	snprintf(line, sizeof line, "%s\n", name);
	if (file_write_atomic(path, line, strlen(line), 0644, err, errlen) < 0)
		return -1;
	if (lstat(final, &sb) == 0 && rename(final, old) < 0)
		return errf(err, errlen, "%s: %s", final, strerror(errno));
	if (rename(tmp, final) < 0)
		return errf(err, errlen, "%s: %s", final, strerror(errno));
	file_fsync_dir(dir);
	if (name_latest(dir, it, err, errlen) < 0)
		return -1;
	fsx_rm_tree(old);
	return 0;
}

int save_finish_publish(const char *dir, char *msg, size_t msglen, char *err, size_t errlen)
{
	char path[4200], buf[64], name[64];
	*msg = 0;
	snprintf(path, sizeof path, "%s/" SAVE_PUBLISHING, dir);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		return errf(err, errlen, "%s: %s (remove it: it is not one train wrote)", path,
			    errno == ELOOP ? "a symbolic link" : strerror(errno));
	}
	struct stat sb;
	ssize_t n = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) ? read(fd, buf, sizeof buf - 1) : -1;
	close(fd);
	long long it = -1;
	int used = 0;
	if (n > 0) {
		buf[n] = 0;
		if (sscanf(buf, "global_step%lld\n%n", &it, &used) != 1 || used != n || it < 0 ||
		    buf[11] < '0' || buf[11] > '9')
			it = -1;
	}
	if (it < 0)
		return errf(err, errlen, "%s: not a record of a step being published (\"global_stepN\" "
			    "and a newline); remove it", path);
	snprintf(name, sizeof name, "global_step%lld", it);
	if (is_step_dir(dir, name)) {
		/* killed between renaming the step into place and naming it in `latest` */
		if (name_latest(dir, it, err, errlen) < 0)
			return -1;
		snprintf(msg, msglen, "--save %s: %s was saved in full by a run killed before "
			 "`latest` named it; latest names it now", dir, name);
		return 1;
	}
	/* killed while a re-saved step was moved aside: its earlier copy goes back into place */
	DIR *d = opendir(dir);
	struct dirent *e;
	char prefix[96], from[4400], to[4200];
	int back = 0;
	snprintf(prefix, sizeof prefix, ".%s.tmp.old.", name);
	while (d && !back && (e = readdir(d)))
		if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && is_step_dir(dir, e->d_name)) {
			snprintf(from, sizeof from, "%s/%s", dir, e->d_name);
			snprintf(to, sizeof to, "%s/%s", dir, name);
			if (rename(from, to) < 0) {
				closedir(d);
				return errf(err, errlen, "%s: %s", from, strerror(errno));
			}
			file_fsync_dir(dir);
			back = 1;
		}
	if (d)
		closedir(d);
	if (unlink(path) < 0 && errno != ENOENT)
		return errf(err, errlen, "%s: %s", path, strerror(errno));
	file_fsync_dir(dir);
	if (back) {
		snprintf(msg, msglen, "--save %s: %s is back in place: a run was killed while it "
			 "replaced it", dir, name);
		return 1;
	}
	return 0;
}
