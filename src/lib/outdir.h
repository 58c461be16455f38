/* outdir - an output directory that appears complete or not at all.
 *
 * od_begin() makes a temporary directory beside the destination (".NAME.tmp.PID" in the same
 * parent, so the final rename stays within one filesystem); everything is written into it;
 * od_commit() fsyncs it and renames it onto the destination, which must not exist or be an empty
 * directory (rename(2) replaces an empty directory atomically).  A failure, a full disk or an
 * interrupt removes the temporary: nothing is left at the destination.
 *
 * od_swap() replaces an existing directory by a new one in place - a checkpoint step repaired
 * where it lies - with renameat2(RENAME_EXCHANGE), one atomic step, so a reader sees the old
 * step or the new one, never none; where the filesystem cannot exchange, it falls back to two
 * renames, as train's own saves do (lmtk-checkpoint(5), "Saving", steps 3 and 4).
 *
 * od_begin_replace() also accepts a destination that exists and holds `mark` (a file that the
 * program's own earlier output has: an export's config.json): od_commit() then exchanges the
 * new directory for it with od_swap, so a reader sees the old output or the new one, never
 * none and never a mixture, and removes the old.  A directory without the mark is refused as
 * od_begin refuses it: --force must not delete a home directory given by mistake.
 *
 * Files inside are published one by one with outfile.h; this module publishes the directory
 * that holds them (ckpt-merge-tp's and ckpt-sync-ln's output checkpoints).  The temporaries are
 * removed with fsx_rm_tree, which never follows a link out of them. */
#ifndef LMTK_OUTDIR_H
#define LMTK_OUTDIR_H

#include <stddef.h>

struct od {
	char final[4096], tmp[8320];
	int replace;   /* od_commit swaps: the destination exists */
};

/* 0, or EXIT_USAGE (the destination exists and is not empty) / EXIT_FAILED + err. */
int od_begin(struct od *o, const char *final, char *err, size_t errlen);
/* The same, but an existing directory holding the file `mark` is to be replaced; EXIT_USAGE
 * when the destination exists otherwise (not a directory, or without the mark). */
int od_begin_replace(struct od *o, const char *final, const char *mark, char *err,
		     size_t errlen);
/* od_begin_replace's judgement of the destination alone, nothing made: a program checks it
 * before hours of reading, and begins when it has something to write. */
int od_check(const char *final, const char *mark, char *err, size_t errlen);
int od_commit(struct od *o, char *err, size_t errlen);
void od_abort(struct od *o);

/* Puts directory `fresh` in place of `old` (same parent), then removes what was at `old`. */
int od_swap(const char *fresh, const char *old, char *err, size_t errlen);

#endif
