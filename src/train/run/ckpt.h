/* ckpt - checkpoints that a kill -9 at any instant cannot damage (lmtk-checkpoint(5)).
 *
 *   SAVE/global_stepN/rank_tp00_pp000.safetensors   fp32 master weights, exp_avg.*, exp_avg_sq.*
 *   SAVE/global_stepN/manifest.json                 iteration, counters, schedule, optimizer,
 *                                                   layout, model, checksums
 *   SAVE/global_stepN/.lock                         the readers' lock (ckpt/steplock.h)
 *   SAVE/latest                                     "global_stepN" (DeepSpeed's name)
 *   SAVE/latest_checkpointed_iteration.txt          "N" (Megatron's name)
 *   SAVE/.lmtk-save.lock                            the run saving here (ckpt_save_lock)
 *   SAVE/.lmtk-publishing                           "global_stepN": a publish under way
 *                                                   (ckpt_finish_publish)
 *
 * A save builds the step directory under a temporary name, fsyncs every file and the directory,
 * renames it into place, fsyncs SAVE, and only then replaces `latest` (atomically, last).  At any
 * instant a crash leaves the previous checkpoint intact and `latest` naming a complete one; the
 * worst case is a stray .global_stepN.tmp.PID@HOST (or, pruning, .global_stepN.deleting)
 * directory, removed by the next save.
 *
 * One run saves into a directory at a time: world rank 0 holds SAVE/.lmtk-save.lock (lib/lock.h)
 * from start-up to exit, and a second run on the same --save is refused before it trains.  Two
 * runs saving into one directory would otherwise each take the other's save in progress for a
 * leftover of a crash and remove it.  The temporaries are named after their owner, world rank 0's
 * pid and host, so that where no lock can be had (a filesystem without flock) a save removes only
 * the leftovers of this host's dead processes.
 *
 * A load verifies before it trusts: the manifest parses, every shard has the recorded size and
 * CRC-32C of its data, every tensor the model needs is there with its shape.  If the checkpoint
 * `latest` names fails, the newest intact global_step* is loaded instead, saying why.  A step is
 * loaded under its readers' lock, so a run pruning the same directory (--save-keep, keep.h) does
 * not remove it meanwhile.  A load never leaves dir: a `latest` naming "../other/global_step8",
 * or a step that is a link to elsewhere, is refused (resolved with fsx_confined), not followed
 * and not fallen back from - someone else's weights are not a checkpoint of this run. */
#ifndef TRAIN_CKPT_H
#define TRAIN_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt/save.h"
#include "train/parallel/dist.h"
#include "train/run/keep.h"
#include "train/model/model.h"
#include "train/optim/optim.h"
#include "train/optim/sched.h"

struct ckpt_state {
	int64_t iteration, consumed_samples, consumed_tokens;
	int64_t data_position;         /* training samples drawn, skipped iterations included */
	int64_t skipped_total, nan_total, spikes_total;
	int64_t skip_through;          /* --skip-train-iteration-range ranges ending here or before are done */
	int64_t seed;                  /* --seed of the run that saved it */
	int64_t valid_position[64];    /* samples consumed per validation set */
	int nvalid;
	struct sched sched;
	struct optim optim;
	double loss_mean;              /* running mean of the loss, for spike detection */
	int64_t loss_count;
	int tp, pp, dp;
	int weights_only;              /* in: --finetune/--no-load-optim; the optimizer state is not
	                                * wanted, so another optimizer kind's checkpoint loads too */
	const char *tokenizer;         /* in (save): the manifest's "tokenizer" object as JSON text
	                                * (tokrec.h), NULL none */
};

#define CKPT_SAVE_LOCK ".lmtk-save.lock"
#define CKPT_PUBLISHING SAVE_PUBLISHING  /* ckpt/save.h */

enum { CKPT_LOCK_HELD = 0, CKPT_LOCK_NONE = 1, CKPT_LOCK_TAKEN = -1, CKPT_LOCK_ERROR = -2 };

/* Takes dir's lock, DIR/.lmtk-save.lock, for the life of the process (world rank 0, at start-up,
 * before anything is trained): CKPT_LOCK_HELD; CKPT_LOCK_NONE + err: the filesystem cannot lock,
 * go on saying so; CKPT_LOCK_TAKEN + err: another run holds it (err names its pid, host and start)
 * or the lock file is not a safe one (a symbolic link, another user's) - bad input;
 * CKPT_LOCK_ERROR + err: it could not be opened (I/O). */
int ckpt_save_lock(const char *dir, char *err, size_t errlen);

/* Finishes a publish that a kill cut short (world rank 0, holding dir's lock, before anything
 * reads `latest`).  A save records the step it publishes in dir/.lmtk-publishing before it
 * moves anything, and drops the record once `latest` names the step.  A record left behind
 * means: the step is in place and complete but `latest` still names an older one - `latest`
 * names it now; or the step's earlier copy was moved aside to be replaced - it goes back.
 * 1 + msg (what was done), 0 nothing to do, -1 + err: the record is not one a save wrote
 * (a link, not a regular file, not "global_stepN\n") or the fix failed. */
int ckpt_finish_publish(const char *dir, char *msg, size_t msglen, char *err, size_t errlen);

/* Saves iteration st->iteration; collective over the world: the ranks of DP rank 0 each write
 * their shard into one temporary directory, world rank 0 writes the manifest (every shard's
 * checksum, gathered) and publishes.  `args` (the command line) is stored for the record.  Once
 * published, world rank 0 prunes the older steps by `keep` (keep.h; NULL keeps them all) and
 * says what it did in *pruned (when not NULL; on rank 0 only).  0, or -1 + err; a failed save
 * leaves the previous checkpoints as they were. */
int ckpt_save(const char *dir, const struct model *m, struct dist *d,
	      const struct ckpt_state *st, const char *args, const struct keep *keep,
	      struct keep_report *pruned, char *err, size_t errlen);

/* Before the first step of a run that saves into dir, starting after iteration `from` and
 * ending at `last` at the latest: -1 + err (exit 2) when dir holds a global_stepN with
 * from < N <= last that this process did not write - the run would save over another run's
 * checkpoint (or one it fell back past).  0 when there is none (or dir does not exist yet). */
int ckpt_check_ahead(const char *dir, int64_t from, int64_t last, char *err, size_t errlen);

/* Loads the newest intact checkpoint under dir into m and st.  1 loaded (path in `loaded`),
 * 0 there is none (a fresh start), -1 + err when checkpoints exist but none can be used (each
 * failed verification, or a manifest field is out of its range), or the model does not match
 * them, or `latest` or a step resolves outside dir: bad input, exit 2; -3 + err when the directory cannot be read at all (exit 3).
 * Fallbacks are reported through warn(). */
int ckpt_load(const char *dir, struct model *m, struct ckpt_state *st, char *loaded,
	      size_t loadedlen, char *err, size_t errlen);

#endif
