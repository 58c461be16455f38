/* eval - the held-out evaluation: --eval-iters global batches of each set of a split, forward
 * only through the pipeline, without dropout, at full --seq-length; Megatron's validation line
 * and TensorBoard tags. */
#ifndef TRAIN_RUN_EVAL_H
#define TRAIN_RUN_EVAL_H

#include <stdint.h>

#include "train/run/state.h"

void eval_split(struct run *r, int split, const char *label, int64_t iteration);

#endif
