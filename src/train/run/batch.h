/* batch - a micro-batch from the data: the samples Megatron's pretraining sampler gives this
 * data-parallel rank, checked against the vocabulary, in the model's input buffers (struct
 * model_batch) - tokens and targets for GPT; token types, loss mask, lengths and sentence-order
 * labels beside them for BERT; the decoder's input for T5.
 *
 * A sample that cannot be read, or that holds an id outside the vocabulary, fills the
 * micro-batch with harmless ids instead, so that every stage and rank still runs the step in
 * lockstep; the caller learns it from the return value (and r->bad_data for ids outside the
 * vocabulary, exit 2) and stops after the step. */
#ifndef TRAIN_RUN_BATCH_H
#define TRAIN_RUN_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "train/run/state.h"

/* The micro-batch's buffers for r->mbs samples of r->seq tokens (r->dseq for T5's decoder).
 * 0, or -1 + err. */
int batch_alloc(struct run *r, char *err, size_t errlen);

/* Fills micro-batch `k` of the iteration whose first sample is `first`, from set `set` of
 * split `split` (FEED_TRAIN, ...).  0, or -1 (warned) with harmless ids in its place. */
int batch_load(struct run *r, int split, int set, int64_t first, int k);

/* Frees them; says how many T5 samples had id 0 among their real tokens. */
void batch_free(struct run *r);

#endif
