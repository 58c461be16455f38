/* save - the one writer of a checkpoint step, for train's saves and the tools' outputs
 * (ckpt-merge-tp, ckpt-sync-ln): what lmtk-checkpoint(5) says a step holds and how it is put in
 * place, written by one piece of code so that a step train saves and the same step a tool
 * rewrites are the same files, byte for byte.
 *
 * What the writers share:
 *   save_clean           the temporaries of interrupted saves removed (step 1)
 *   save_step_begin      the step's directory under its temporary name, with the readers'
 *                        empty .lock in it from its first instant (steplock.h)
 *   save_shard_metadata  a shard's safetensors metadata: format, iteration, optimizer kind
 *   save_files_add       a shard's entry in the manifest's "files": its data's size and CRC-32C
 *   save_manifest        manifest.json: indented by one space, keys in the writer's order, a
 *                        final newline; written atomically and the step directory fsynced
 *   save_publish         the step renamed into place and named by `latest` ("Saving", steps 3
 *                        to 6): the intent recorded in SAVE/.lmtk-publishing first, an earlier
 *                        copy of the step moved aside, the rename, `latest` and
 *                        latest_checkpointed_iteration.txt, the record dropped, the old copy
 *                        removed
 *   save_finish_publish  a publish a kill cut short, finished by the next writer
 *
 * What each writer keeps: the manifest's content (train builds it from its state; a tool copies
 * its input's and replaces the layout and files), the shards' tensors, and where the save
 * directory lives (train's --save, under its lock; a tool's output directory, outdir.h). */
#ifndef CKPT_SAVE_H
#define CKPT_SAVE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt/safetensors.h"

#define SAVE_PUBLISHING ".lmtk-publishing"

/* "PID@HOST": the owner of this process's temporaries, in their names */
void save_owner(char *buf, size_t len);
/* Removes the temporaries of interrupted saves in dir (".global_stepN.tmp.PID@HOST", and
 * ".tmp.old." ones: "Saving", step 1): all of them when `all` (the caller holds dir's lock, so
 * no other writer saves there), else only those of this host whose process is gone.  Another
 * writer's save in progress is never taken for a leftover.  With `all`, also the leftovers of
 * a kill inside the publish's small writes (`latest`, latest_checkpointed_iteration.txt,
 * SAVE_PUBLISHING: outfile_sweep). */
void save_clean(const char *dir, int all);
/* mkdir stepdir (it must not exist) and its .lock.  0, or -1 + err. */
int save_step_begin(const char *stepdir, char *err, size_t errlen);
void save_shard_metadata(struct st_writer *w, int64_t iteration, const char *kind);
/* files[shard] = {"bytes": bytes, "crc32c": "%08x"}.  0, or -1 out of memory. */
int save_files_add(json_t *files, const char *shard, uint64_t bytes, uint32_t crc);
/* The manifest's text as it is written (malloc'd, NUL-terminated), or NULL. */
char *save_manifest_text(json_t *man);
/* stepdir/manifest.json, then stepdir fsynced.  0, or -1 + err. */
int save_manifest(const char *stepdir, json_t *man, char *err, size_t errlen);
/* Puts the complete step directory tmp (inside dir) in place as dir/global_step<it> and names
 * it in `latest`; an existing dir/global_step<it> is replaced (the caller decides whether it
 * may be).  0, or -1 + err (the record then finishes the publish: save_finish_publish). */
int save_publish(const char *dir, const char *tmp, int64_t it, char *err, size_t errlen);
/* dir/.lmtk-publishing left by a kill: the step it names is in place (`latest` names it now),
 * or its earlier copy was moved aside (it goes back).  0 nothing to do, 1 done (msg says what),
 * -1 + err (a record that is not one a writer wrote). */
int save_finish_publish(const char *dir, char *msg, size_t msglen, char *err, size_t errlen);

#endif
