/* segment - a log that grows all run long, committed as never-changing pieces.
 *
 * The old hourly sync committed the training's main log as one file: past 10 MiB it had to go
 * to LFS, and then every hour the whole file (1 GB by the end) was hashed and uploaded again.
 * Here a text file above the LFS threshold is committed as segments instead:
 *
 *     logs/main_log.txt.00000  logs/main_log.txt.00001  ...  logs/main_log.txt.manifest
 *
 * Segment k holds at most --segment-size bytes (default 8 MiB, under the Hub's 10 MiB limit for
 * plain git files, so the logs stay readable in the Hub's web viewer and are zlib-compressed in
 * the push).  A segment is complete once the file extends a full segment-size past its start;
 * it then ends after the last newline in that window (lines are never split between segments
 * unless a single line is longer than a segment), and never changes again.  Only the last,
 * partial segment and the small manifest change from one sync to the next, so an hourly sync
 * uploads about segment-size/2 of compressed text plus what was appended, whatever the
 * log's size.  `cat logs/main_log.txt.[0-9]*` rebuilds the file; the manifest lists every
 * segment's size and says so.
 *
 * The segments exist only in git (index and commits), not as files in the working tree: their
 * index entries carry the skip-worktree bit, which git status and libgit2 both honour, so
 * neither reports them as deleted.  The log itself stays where the trainer writes it, untracked.
 *
 * A sync reads only what can have changed: the file is taken to be append-only, so complete
 * segments already committed are not read again, except the first one, re-hashed as a cheap
 * check that the file was not replaced (then every segment is recomputed).  A file shorter
 * than what was committed (truncated, or a new run that did not append) is left alone, with a
 * warning, unless deletions are allowed: its committed segments are the only copy of the lost
 * part once the scratch copy is gone. */
#ifndef HUBSYNC_SEGMENT_H
#define HUBSYNC_SEGMENT_H

#include <git2.h>
#include <stddef.h>

struct segment_opts {
	unsigned long long size;   /* bytes per segment */
	int allow_shrink;          /* --allow-deletions: a shorter file replaces its segments */
	int dry_run;               /* compute, write nothing */
};

struct segment_result {
	unsigned segments;         /* segments the file has now */
	unsigned changed;          /* segments written (new or changed) */
	unsigned removed;          /* segments dropped (shrink with allow_shrink) */
	unsigned long long changed_bytes;
	unsigned long long file_size;
	unsigned long long committed;  /* bytes in the segments committed before */
	int shrunk;                /* the file is shorter than what is committed: left alone */
	int was_tracked;           /* the file had segments before this sync */
};

/* 1 if path is committed as segments (its manifest is in the index) */
int segment_tracked(git_index *index, const char *path);

/* Brings path's segments in the index up to date with the file (workdir-relative path).
 * 0 or -1 + err. */
int segment_sync(git_repository *repo, git_index *index, const char *path,
		 const struct segment_opts *o, struct segment_result *r, char *err, size_t errlen);

/* Removes path's segments and manifest from the index (its source is gone and deletions are
 * allowed); returns how many entries went. */
unsigned segment_remove(git_index *index, const char *path);

/* Every path committed as segments (from the manifests in the index); *out is malloc'd, each
 * string too.  0 or -1. */
int segment_sources(git_index *index, char ***out, size_t *n);

/* "path.00042" for segment k; the manifest is "path.manifest" */
void segment_name(const char *path, unsigned k, char *out, size_t len);

#endif
