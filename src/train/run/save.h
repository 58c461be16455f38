/* save - a checkpoint of the run (ckpt.h) every --save-interval iterations and at the end, with
 * what --save-keep pruned said; and --spike-policy rollback, which reloads the last one. */
#ifndef TRAIN_RUN_SAVE_H
#define TRAIN_RUN_SAVE_H

#include <stddef.h>
#include <stdint.h>

#include "train/run/state.h"

/* Saves r's iteration to --save (none given: nothing).  0, or -1 (warned). */
int save_checkpoint(struct run *r);

/* A loss spike at `iteration`: back to --save's newest checkpoint, skipping the samples trained
 * on since.  0, or -1 + err (no --save, no checkpoint, too many rollbacks). */
int save_rollback(struct run *r, int64_t iteration, double loss, char *err, size_t errlen);

#endif
