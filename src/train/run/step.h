/* step - one iteration's forward and backward over its micro-batches: Megatron's 1F1B pipeline
 * schedule, the gradient reductions over the pipeline (the tied embedding), data-parallel (the
 * buckets) and tensor-parallel (replicated tensors) groups. */
#ifndef TRAIN_RUN_STEP_H
#define TRAIN_RUN_STEP_H

#include <stdint.h>

#include "train/run/state.h"

/* The gradients of `micro` micro-batches from sample `first` (dropout keyed by `key`); *bad gets
 * the count of targets outside the vocabulary.  The mean loss on every stage, or NaN. */
double step_grads(struct run *r, int64_t first, int64_t micro, uint64_t key, int *bad);

#endif
