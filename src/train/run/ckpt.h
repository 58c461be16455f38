/* ckpt - checkpoints that a kill -9 at any instant cannot damage (lmtk-checkpoint(5)).
 *
 *   SAVE/global_stepN/rank_tp00_pp000.safetensors   fp32 master weights, exp_avg.*, exp_avg_sq.*
 *   SAVE/global_stepN/manifest.json                 iteration, counters, schedule, optimizer,
 *                                                   layout, model, checksums
 *   SAVE/global_stepN/.lock                         the readers' lock (ckpt/steplock.h)
 *   SAVE/latest                                     "global_stepN" (DeepSpeed's name)
 *   SAVE/latest_checkpointed_iteration.txt          "N" (Megatron's name)
 *
 * A save builds the step directory under a temporary name, fsyncs every file and the directory,
 * renames it into place, fsyncs SAVE, and only then replaces `latest` (atomically, last).  At any
 * instant a crash leaves the previous checkpoint intact and `latest` naming a complete one; the
 * worst case is a stray .global_stepN.tmp.* (or, pruning, .global_stepN.deleting) directory,
 * removed by the next save.
 *
 * A load verifies before it trusts: the manifest parses, every shard has the recorded size and
 * CRC-32C of its data, every tensor the model needs is there with its shape.  If the checkpoint
 * `latest` names fails, the newest intact global_step* is loaded instead, saying why.  A step is
 * loaded under its readers' lock, so a run pruning the same directory (--save-keep, keep.h) does
 * not remove it meanwhile. */
#ifndef TRAIN_CKPT_H
#define TRAIN_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "train/dist/dist.h"
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

/* Saves iteration st->iteration; collective over the world: the ranks of DP rank 0 each write
 * their shard into one temporary directory, world rank 0 writes the manifest (every shard's
 * checksum, gathered) and publishes.  `args` (the command line) is stored for the record.  Once
 * published, world rank 0 prunes the older steps by `keep` (keep.h; NULL keeps them all) and
 * says what it did in *pruned (when not NULL; on rank 0 only).  0, or -1 + err; a failed save
 * leaves the previous checkpoints as they were. */
int ckpt_save(const char *dir, const struct model *m, struct dist *d,
	      const struct ckpt_state *st, const char *args, const struct keep *keep,
	      struct keep_report *pruned, char *err, size_t errlen);

/* Loads the newest intact checkpoint under dir into m and st.  1 loaded (path in `loaded`),
 * 0 there is none (a fresh start), -1 + err when checkpoints exist but none can be used, or the
 * model does not match them.  Fallbacks are reported through warn(). */
int ckpt_load(const char *dir, struct model *m, struct ckpt_state *st, char *loaded,
	      size_t loadedlen, char *err, size_t errlen);

#endif
