/* reshard - write a checkpoint step in another TP/PP layout, streaming.
 *
 * Every output shard is written as train writes its own (lmtk-checkpoint(5)): the master
 * weights, then exp_avg, then exp_avg_sq, each in table order, the header's metadata
 * {"format": "lmtk-checkpoint", "iteration": N}, CRC-32C and size recorded in the manifest.  So
 * a checkpoint re-split and merged back is the original byte for byte, and train --load takes
 * it as its own.
 *
 * Each tensor part is produced block by block (at most RS_BLOCK floats at a time) straight from
 * the input's mappings: whole rows that lie back to back in one input shard (all of a TP=1 merge
 * of vocab- and column-parallel tensors, and every replicated one) go to write(2) from the
 * mapping without a copy; row-parallel tensors, whose rows are interleaved across ranks, are
 * gathered through the block buffer.  Memory stays at one block whatever the model's size.
 *
 * A new layout keeps the input's stage of every tensor when PP does not change; otherwise the
 * layers are cut as train's plan cuts them (layout.h), in train's order within each shard.  A vocabulary padded for another TP grows with zero rows or
 * loses padding rows; both are beyond vocab_size, outside the softmax, and never looked up. */
#ifndef CKPT_RESHARD_H
#define CKPT_RESHARD_H

#include <stddef.h>

#include "progress.h"
#include "ckpt/shards.h"

#define RS_BLOCK (4u << 20)   /* floats: 16 MiB */

struct rs_target {
	int tp, pp;
	int padded_vocab;
	int average;            /* replicated tensors: the mean of their copies (sh_read) */
	int pp_embedding;       /* a new PP cut counts the embeddings as units (layout.h) */
};

/* Writes the shards and manifest.json into stepdir (a new step directory, save_step_begin).  0, or
 * EXIT_USAGE (the layout does not fit the model) / EXIT_FAILED (I/O) + err. */
int rs_write(const struct sh_ckpt *in, const struct rs_target *tg, const char *stepdir,
	     struct progress *pg, char *err, size_t errlen);

/* A whole checkpoint in directory `dir` (an output's temporary): global_stepN re-split by
 * rs_write() and published as train publishes its saves (save.h), `latest` naming it.  0, or an
 * exit status + err. */
int rs_write_checkpoint(const struct sh_ckpt *in, const struct rs_target *tg, const char *dir,
			struct progress *pg, char *err, size_t errlen);

#endif
