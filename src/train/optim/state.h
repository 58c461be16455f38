/* state - the optimizer's state on the model: how big it is, where each tensor's part lives,
 * and its buffers.  The model (model.h) holds the buffers; this is what sizes and fills them.
 *
 * AdamW, LAMB and SGD keep two fp32 moments per element this rank updates (the whole model, or
 * its ZeRO-1 shard: model_zero_chunk); --use-bnb-optimizer keeps 8-bit codes and per-block
 * absmax for tensors of BNB_MIN_8BIT elements or more (bnb.h), fp32 moments for the rest and
 * the word embedding.  Under ZeRO-1 each rank quantizes whole blocks only when the parameter
 * layout puts those tensors and every chunk on block boundaries: optim_state_rule() gives the
 * model that rule before model_init lays the parameters out.
 *
 * Use: optim_state_rule(&cfg); model_init(&m, &cfg, ...); optim_state_init(&m, ...).  The
 * buffers are freed with the model (model_free). */
#ifndef TRAIN_OPTIM_STATE_H
#define TRAIN_OPTIM_STATE_H

#include <stddef.h>

#include "train/model/model.h"

/* The parameter-layout rule the state needs, into cfg (state_block, state_block_min): none
 * for fp32 state; under cfg->bnb, bnb's blocks. */
void optim_state_rule(struct model_config *cfg);

/* The state layout of DP rank r's elements (its ZeRO-1 shard; r < 0 or no ZeRO-1: the whole
 * model): ost[ntensors] (may be NULL), and the counts of fp32-state elements, 8-bit elements
 * and absmax blocks it needs. */
void optim_state_layout(const struct model *m, int r, struct model_ostate *ost, size_t *n32,
			size_t *n8, size_t *nblk);

/* m->ost and the state's buffers for this rank (adam_m/adam_v; under bnb q1/q2, absmax1/absmax2
 * and the maps; the multi-tensor AdamW table where the backend has one), zeroed, counted in
 * m->opt_bytes and the model's memory.  0, or -1 + err (a layout made without
 * optim_state_rule's, out of memory naming how much). */
int optim_state_init(struct model *m, char *err, size_t errlen);

/* A fresh state (zero moments; under bnb zero codes and absmax, which decode to 0). */
void optim_state_zero(struct model *m);

#endif
