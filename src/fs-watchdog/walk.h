/* walk.h - parallel directory-tree usage walk, the equivalent of `du -sb` plus
 * `du -s --inodes`.  Standalone: depends only on libc and pthreads. */
#ifndef FS_WATCHDOG_WALK_H
#define FS_WATCHDOG_WALK_H

#include <stddef.h>

struct walk_result {
    unsigned long long bytes;   /* apparent size (st_size), like du -sb */
    unsigned long long inodes;  /* distinct inodes, like du -s --inodes */
    unsigned long long errors;  /* entries or directories that could not be read */
    char first_error[512];      /* "PATH: strerror" of one of them, "" if none */
};

/* Walks the tree at `root` with `threads` workers (0 = online CPUs).  Every entry
 * is counted once with lstat semantics, the root and directories included; a
 * non-directory with several hard links inside the tree is counted once.  A
 * symlink given as `root` is followed (as with `du -sbD`), nothing below is.  If
 * `one_fs`, entries on another device than the root are skipped (du -x).
 * Returns 0 with `r` filled, unreadable parts of the tree counted in r->errors
 * (du's "partial" exit status), or -1 with `err` set to "ROOT: strerror" if the
 * root itself cannot be stat'ed or read. */
int walk_tree(const char *root, int threads, int one_fs, struct walk_result *r,
              char *err, size_t errlen);

#endif
