/* optim - one optimizer step: loss-scale check, global-norm clipping, AdamW, as Megatron does.
 *
 * The gradients arrive summed over the step's micro-batches, each scaled by loss_scale /
 * micro-batches, so they are the gradient of the mean loss times the loss scale.  The step:
 * - fp16 only: any non-finite gradient skips the step and backs the scale off (dynamic loss
 *   scaling with Megatron's hysteresis and window); bf16 and fp32 run with scale 1;
 * - the global norm sqrt(sum g^2) over every gradient (unscaled; with tensor parallelism each
 *   split tensor's shards once and each replicated tensor once, summed over the TP group, so
 *   every rank clips by the same number), and Megatron's clip
 *   coefficient clip / (norm + 1e-6) when that is below 1;
 * - AdamW on each tensor, weight decay only where the tensor table says so (not biases, not
 *   layer norms), unscaling and clipping folded into the one pass over the gradients; with
 *   --use-bnb-optimizer bitsandbytes' Adam8bit instead (bnb.h): 8-bit block-wise state for
 *   tensors of 4096 elements or more, bnb's 32-bit Adam for the rest and the word embedding.
 * - or, with --optimizer lamb, apex FusedLAMB as Megatron would construct it (its defaults:
 *   max_grad_norm 1.0, grad averaging, bias correction, decoupled decay, no NVLAMB): the norm of
 *   the gradients after Megatron's clipping is clipped again at 1.0, the moments as Adam's, the
 *   update u = m^/(sqrt(v^)+eps) + wd w, and each tensor with weight decay steps by
 *   lr ||w||/||u|| (lr when either norm is 0; tensors without decay by lr: apex's rule);
 *   norms are of this rank's part of a tensor, as apex sees its TP shard;
 *   --lamb-layerwise-noise STD then adds to each tensor's update u the draws
 *   STD * (||u|| / sqrt(n)) * z, z ~ N(0,1) - noise at STD times the RMS of the tensor's own
 *   update, so the step is ratio * (u + noise) - after the trust ratio was taken from u.  z
 *   is philox_normal(key(seed, step, the tensor's name), the element's global index): no
 *   state, the same draws on any DP/TP/PP layout (the tied output copy draws the word
 *   embedding's), and a resumed run draws what the straight run drew;
 * - or, with --optimizer sgd, torch.optim.SGD with --sgd-momentum and the same decay groups.
 * --embedding-lr-mult ALPHA: the word embedding (and its tied copy on the last pipeline
 * stage, which is the same parameter) steps at lr * ALPHA in every optimizer - everything the
 * lr multiplies, decoupled weight decay included, as a torch param group with that lr would.
 * The step count only advances on steps that were taken, as apex's optimizers count. */
#ifndef TRAIN_OPTIM_H
#define TRAIN_OPTIM_H

#include "train/model/model.h"

/* --optimizer */
enum optim_kind { OPT_ADAMW, OPT_LAMB, OPT_SGD };

struct optim {
	enum optim_kind kind;      /* set after optim_init (which makes it AdamW) */
	float momentum;            /* --sgd-momentum */
	float emb_lr_mult;         /* --embedding-lr-mult (1: optim_init's) */
	float lamb_noise;          /* --lamb-layerwise-noise STD (0: none) */
	uint64_t seed;             /* --seed: keys the noise */
	float b1, b2, eps, wd, clip;
	int fp16;
	/* dynamic loss scaling (fp16) */
	float loss_scale, min_scale;
	int window, hysteresis;
	int good_steps, hysteresis_left;
	int static_scale;          /* --loss-scale: the scale never changes; an overflow still skips */
	int step;                  /* Adam steps taken */
};

void optim_init(struct optim *o, float b1, float b2, float eps, float wd, float clip, int fp16,
		float initial_scale, float min_scale, int window, int hysteresis);

/* One step at learning rate lr.  Returns 1 when taken, 0 when skipped (fp16 overflow, or a
 * non-finite gradient norm: then nothing is updated).  *grad_norm gets the unscaled, unclipped
 * global norm (NaN/inf when not finite). */
int optim_step(struct optim *o, struct model *m, float lr, double *grad_norm);
/* The fp16 loss scaler's update after a step decided elsewhere (run.c's device-side step):
 * overflow 1 for an overflowing one.  Nothing without fp16. */
void optim_scaler(struct optim *o, int overflow);

/* The unscaled global gradient norm optim_step takes: each split tensor's shard once per TP rank,
 * each replicated tensor once, the tied word embedding once; under ZeRO-1 each DP rank's own
 * shard of the gradient (the only part it holds reduced, buckets.h), summed over DP. */
double optim_grad_norm(const struct optim *o, struct model *m);
/* The same on the device, for a deferred step (run/iter.h): the squares optim_grad_norm sums
 * accumulated into *sumsq and summed over the same groups, and under fp16 any gradient beyond
 * fp16's range flagged into *overflow over the world (device pointers: struct ops_step's;
 * m->dist's dev_reduce queues the sums).  Nothing is read back. */
/* ZeRO-1, after an update: every DP rank gathers the others' updated chunks of the master
 * weights, then refreshes its working copy (nothing without ZeRO-1). */
void optim_zero_gather(struct model *m);
void optim_queue_norm_check(const struct optim *o, struct model *m, double *sumsq,
			    int32_t *overflow);

#endif
