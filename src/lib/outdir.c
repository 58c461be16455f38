/* outdir - see outdir.h. */
#include "outdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"
#include "fsx.h"
#include "msg.h"

static void parent_of(const char *path, char *dir, size_t n)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		snprintf(dir, n, ".");
	else if (slash == path)
		snprintf(dir, n, "/");
	else
		snprintf(dir, n, "%.*s", (int)(slash - path), path);
}

static int is_empty_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int empty = 1;
	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			empty = 0;
			break;
		}
	closedir(d);
	return empty;
}

int od_begin(struct od *o, const char *final, char *err, size_t errlen)
{
	return od_begin_replace(o, final, NULL, err, errlen);
}

/* The destination's name in o->final, whether it is to be replaced, its parent there: 0 or
 * EXIT_USAGE + err. */
static int check(struct od *o, const char *final, const char *mark, char *err, size_t errlen)
{
	struct stat sb;
	char parent[4096], marked[4200];
	size_t n = strlen(final);
	while (n > 1 && final[n - 1] == '/')
		n--;
	if (n == 0 || n >= sizeof o->final)
		return errf(err, errlen, "'%s': not a usable output path", final), EXIT_USAGE;
	snprintf(o->final, sizeof o->final, "%.*s", (int)n, final);
	o->tmp[0] = 0;
	o->replace = 0;
	if (stat(o->final, &sb) == 0 && !(S_ISDIR(sb.st_mode) && is_empty_dir(o->final))) {
		/* a replacement: a directory itself (not a link to one) that has the mark */
		struct stat lb, mb;
		int dir = lstat(o->final, &lb) == 0 && S_ISDIR(lb.st_mode);
		snprintf(marked, sizeof marked, "%s/%s", o->final, mark ? mark : "");
		if (!mark || !dir || lstat(marked, &mb) < 0 || !S_ISREG(mb.st_mode)) {
			if (mark && dir)
				errf(err, errlen, "%s: exists, is not empty and has no %s: not an output "
				     "to replace; give a new directory", o->final, mark);
			else
				errf(err, errlen, "%s: exists%s; give a new directory", o->final,
				     S_ISDIR(sb.st_mode) ? " and is not empty" : "");
			return EXIT_USAGE;
		}
		o->replace = 1;
	}
	parent_of(o->final, parent, sizeof parent);
	if (stat(parent, &sb) < 0 || !S_ISDIR(sb.st_mode)) {
		errf(err, errlen, "%s: no directory %s to create it in", o->final, parent);
		return EXIT_USAGE;
	}
	return 0;
}

int od_check(const char *final, const char *mark, char *err, size_t errlen)
{
	struct od o;
	return check(&o, final, mark, err, errlen);
}

int od_begin_replace(struct od *o, const char *final, const char *mark, char *err,
		     size_t errlen)
{
	char parent[4096];
	int rc = check(o, final, mark, err, errlen);
	if (rc)
		return rc;
	parent_of(o->final, parent, sizeof parent);
	const char *base = strrchr(o->final, '/') ? strrchr(o->final, '/') + 1 : o->final;
	snprintf(o->tmp, sizeof o->tmp, "%s/.%s.tmp.%d", parent, base, (int)getpid());
	fsx_rm_tree(o->tmp);   /* left by an earlier run with our pid */
	if (mkdir(o->tmp, 0755) < 0) {
		int e = errno;
		errf(err, errlen, "%s: %s", o->tmp, strerror(e));
		o->tmp[0] = 0;
		return EXIT_FAILED;
	}
	return 0;
}

int od_commit(struct od *o, char *err, size_t errlen)
{
	char parent[4096];
	if (o->replace && access(o->final, F_OK) == 0) {
		if (od_swap(o->tmp, o->final, err, errlen) < 0) {
			od_abort(o);
			return EXIT_FAILED;
		}
		o->tmp[0] = 0;
		return 0;
	}
	file_fsync_dir(o->tmp);
	if (rename(o->tmp, o->final) < 0) {
		int e = errno;
		errf(err, errlen, "%s: %s", o->final, strerror(e));
		od_abort(o);
		return e == ENOTEMPTY || e == EEXIST ? EXIT_USAGE : EXIT_FAILED;
	}
	o->tmp[0] = 0;
	parent_of(o->final, parent, sizeof parent);
	file_fsync_dir(parent);
	return 0;
}

void od_abort(struct od *o)
{
	if (o->tmp[0])
		fsx_rm_tree(o->tmp);
	o->tmp[0] = 0;
}

int od_swap(const char *fresh, const char *old, char *err, size_t errlen)
{
	char parent[4096], aside[4400];
	parent_of(old, parent, sizeof parent);
	file_fsync_dir(fresh);
	if (renameat2(AT_FDCWD, fresh, AT_FDCWD, old, RENAME_EXCHANGE) == 0) {
		file_fsync_dir(parent);
		fsx_rm_tree(fresh);     /* now the old step */
		return 0;
	}
	if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
		return errf(err, errlen, "%s: %s", old, strerror(errno));
	/* no exchange here: move the old step aside, the new one in, then remove the old */
	const char *base = strrchr(old, '/') ? strrchr(old, '/') + 1 : old;
	snprintf(aside, sizeof aside, "%s/.%s.tmp.old.%d", parent, base, (int)getpid());
	if (rename(old, aside) < 0)
		return errf(err, errlen, "%s: %s", old, strerror(errno));
	if (rename(fresh, old) < 0) {
		int e = errno;
		rename(aside, old);
		return errf(err, errlen, "%s: %s", old, strerror(e));
	}
	file_fsync_dir(parent);
	fsx_rm_tree(aside);
	return 0;
}
