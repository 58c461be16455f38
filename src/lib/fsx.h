/* fsx - file-system walks that stay inside the tree they were given.
 *
 * A checkpoint directory is a place users reorganise by hand: a step moved to another disk and
 * symlinked back, a `latest` edited to point somewhere, a scratch filesystem mounted inside a
 * run's directory.  A program that removes or reads "the steps under --save" must not let any of
 * those carry it outside: a recursive removal that follows a symlink deletes the target's files,
 * a `latest` of "../other/global_step8" loads another run's weights.
 *
 * fsx_rm_tree() removes by descriptors (openat, fdopendir, unlinkat), never by re-resolving
 * path strings, so a link met on the way is unlinked as a name and never entered, and a name
 * swapped for a link during the walk is not followed either.  It does not descend into another
 * filesystem (a mount point inside the tree keeps its contents and makes the removal fail with
 * EXDEV) and gives up below FSX_MAX_DEPTH levels (ELOOP): a checkpoint is three levels deep.
 *
 * fsx_inside() answers "does this name, with every link and .. resolved, lie under that
 * directory?" for readers that take a name from a file (`latest`) or a listing. */
#ifndef LMTK_FSX_H
#define LMTK_FSX_H

#include <stddef.h>

#define FSX_MAX_DEPTH 64

/* Removes path: a file or a symlink is unlinked (a link's target is never touched, whatever it
 * is), a directory is emptied and removed as the header says.  0, or -1 with errno set to the
 * first failure (ENOENT when path is not there); what could be removed is removed either way. */
int fsx_rm_tree(const char *path);

/* 1 when path, resolved (realpath), lies strictly below root, resolved; 0 when it is root
 * itself or outside it; -1 (errno) when either cannot be resolved (ENOENT: not there). */
int fsx_inside(const char *root, const char *path);

/* fsx_inside() for a reader about to open path: 0 when it lies below root; 1 when it does not
 * (err: "resolves to REAL, outside ROOT"), -1 when it cannot be resolved (err: why; errno). */
int fsx_confined(const char *root, const char *path, char *err, size_t errlen);

/* 1 when path itself (its last component) is a symbolic link, 0 when it is not, -1 (errno)
 * when it cannot be looked at. */
int fsx_is_link(const char *path);

#endif
