/* fsx - see fsx.h. */
#include "fsx.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Empties the directory open at dfd (which it closes), entries on filesystem dev only.  The
 * first errno is kept in *first. */
static void empty_dir(int dfd, dev_t dev, int depth, int *first)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;
	if (!d) {
		if (!*first)
			*first = errno;
		close(dfd);
		return;
	}
	while ((e = readdir(d))) {
		const char *n = e->d_name;
		struct stat sb;
		if (!strcmp(n, ".") || !strcmp(n, ".."))
			continue;
		int isdir = e->d_type == DT_DIR;
		if (e->d_type == DT_DIR || e->d_type == DT_UNKNOWN) {
			if (fstatat(dirfd(d), n, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
				if (errno != ENOENT && !*first)
					*first = errno;
				continue;
			}
			isdir = S_ISDIR(sb.st_mode);
			if (isdir && sb.st_dev != dev) {   /* a mount point: not ours to empty */
				if (!*first)
					*first = EXDEV;
				continue;
			}
		}
		if (isdir) {
			if (depth + 1 >= FSX_MAX_DEPTH) {
				if (!*first)
					*first = ELOOP;
				continue;
			}
			/* O_NOFOLLOW: a directory swapped for a link since the fstatat is not entered */
			int cfd = openat(dirfd(d), n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cfd < 0) {
				if (errno == ENOTDIR || errno == ELOOP)
					isdir = 0;   /* now a link or a file: unlink the name */
				else {
					if (errno != ENOENT && !*first)
						*first = errno;
					continue;
				}
			} else
				empty_dir(cfd, dev, depth + 1, first);
		}
		if (unlinkat(dirfd(d), n, isdir ? AT_REMOVEDIR : 0) < 0 && errno != ENOENT &&
		    !*first)
			*first = errno;
	}
	closedir(d);
}

int fsx_rm_tree(const char *path)
{
	char parent[PATH_MAX], base[NAME_MAX + 1];
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/')
		n--;
	size_t b = n;
	while (b > 0 && path[b - 1] != '/')
		b--;
	if (n == 0 || n - b > NAME_MAX || b >= sizeof parent) {
		errno = n == 0 ? ENOENT : ENAMETOOLONG;
		return -1;
	}
	snprintf(base, sizeof base, "%.*s", (int)(n - b), path + b);
	if (!strcmp(base, ".") || !strcmp(base, "..") || !strcmp(base, "/")) {
		errno = EINVAL;   /* "remove ." is never what a caller means */
		return -1;
	}
	if (b == 0)
		snprintf(parent, sizeof parent, ".");
	else
		snprintf(parent, sizeof parent, "%.*s", b == 1 ? 1 : (int)(b - 1), path);

	int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		return -1;
	int rc = 0, first = 0;
	int fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		/* a link (to a directory or not) or a file: the name goes, nothing it points to */
		if (errno == ENOTDIR || errno == ELOOP)
			rc = unlinkat(pfd, base, 0);
		else
			rc = -1;
	} else {
		struct stat sb;
		if (fstat(fd, &sb) < 0) {
			first = errno;
			close(fd);
		} else
			empty_dir(fd, sb.st_dev, 0, &first);
		if (unlinkat(pfd, base, AT_REMOVEDIR) < 0)
			rc = -1;
		else if (first) {
			errno = first;
			rc = -1;
		}
		if (rc < 0 && first)
			errno = first;
	}
	int e = errno;
	close(pfd);
	errno = e;
	return rc;
}

int fsx_inside(const char *root, const char *path)
{
	char *r = realpath(root, NULL), *p = r ? realpath(path, NULL) : NULL;
	int rc;
	if (!r || !p) {
		int e = errno;
		free(r);
		errno = e;
		return -1;
	}
	size_t n = strlen(r);
	if (n == 1)   /* root is "/" */
		rc = strcmp(p, "/") != 0;
	else
		rc = strncmp(p, r, n) == 0 && p[n] == '/';
	free(r);
	free(p);
	return rc;
}

int fsx_confined(const char *root, const char *path, char *err, size_t errlen)
{
	int in = fsx_inside(root, path);
	if (in == 1)
		return 0;
	if (in < 0) {
		int e = errno;
		snprintf(err, errlen, "%s", strerror(e));
		errno = e;
		return -1;
	}
	char *real = realpath(path, NULL);
	snprintf(err, errlen, "resolves to %s, outside %s", real ? real : path, root);
	free(real);
	return 1;
}

int fsx_is_link(const char *path)
{
	struct stat sb;
	if (lstat(path, &sb) < 0)
		return -1;
	return S_ISLNK(sb.st_mode) ? 1 : 0;
}
