/* dsconfig - the DeepSpeed configuration file of --deepspeed_config, read as Megatron-DeepSpeed
 * and DeepSpeed read it.
 *
 * Under --deepspeed, DeepSpeed's engine - not Megatron's flags - decides the loss scaling
 * (the fp16 block), gradient clipping (gradient_clipping, 0 = none, DeepSpeed's default), the
 * ZeRO stage (zero_optimization.stage, default 0) and bf16 (bf16.enabled); and it derives its
 * batch from train_batch_size / train_micro_batch_size_per_gpu / gradient_accumulation_steps,
 * asserting train_batch_size == micro * accumulation * data-parallel size.  So:
 * - the file is read, or the run is refused (exit 2): a missing file names the path, malformed
 *   JSON the path, line and column;
 * - every key is known: the ones above are applied (the Megatron flags they override -
 *   --clip-grad, --zero-stage, the loss-scale flags - when given with other values, are named in
 *   the start-up "no effect here" line with the file's value, which is what the engine uses);
 *   steps_per_print, wall_clock_breakdown, zero_allow_untested_optimizer and ZeRO's
 *   communication knobs cannot matter here and are named there too; a DeepSpeed block switched
 *   off ({"enabled": false, ...}) is accepted; curriculum_learning is DeepSpeed's sequence-length
 *   curriculum (curriculum.h), on when its "enabled" is true (or with --curriculum-learning),
 *   every key checked as DeepSpeed's scheduler asserts them; activation_checkpointing's keys are
 *   checked and the ones set are named in one start-up line (they place the checkpointed inputs -
 *   partitioned, contiguous, in CPU memory - or time them, and change no number:
 *   --checkpoint-activations is what recomputes); anything else (optimizer, scheduler, ZeRO
 *   stage 2 or 3...) is refused by name,
 *   saying why, and so is a key DeepSpeed does not know (DeepSpeed would ignore a typo);
 * - fp16.enabled and bf16.enabled must agree with --fp16 and --bf16, as Megatron-DeepSpeed
 *   asserts ("megatron fp16 config does not match deepspeed");
 * - the batch keys are resolved as DeepSpeed does and must agree with the flags and the layout
 *   (dsconfig_check_batch): with --rampup-batch-size, train_batch_size is the final batch, which
 *   Megatron-DeepSpeed hands the engine as the ramp-up goes.
 * Without --deepspeed, Megatron-DeepSpeed never opens the file: it is still read and checked (a
 * typo'd path is an error), and the start-up line says it has no effect. */
#ifndef TRAIN_DSCONFIG_H
#define TRAIN_DSCONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "train/args.h"

/* What the file set; -1 where it said nothing. */
struct dsconfig {
	int64_t train_batch_size, micro_batch, grad_acc;
	double gradient_clipping;
	int zero_stage;
	int overlap_comm;                    /* zero_optimization.overlap_comm: 1, 0, -1 absent */
	int64_t reduce_bucket_size;          /* zero_optimization.reduce_bucket_size, -1 absent */
	int fp16, bf16;                      /* enabled: 1, 0, or -1 absent */
	double loss_scale;                   /* fp16.loss_scale: 0 dynamic */
	int initial_scale_power;
	int64_t loss_scale_window, hysteresis;
	double min_loss_scale;
	int curriculum_block;                /* curriculum_learning.enabled: 1, 0, -1 not said,
					      * -2 no block */
	struct curriculum curriculum;        /* read when it applies */
};

/* Reads a->deepspeed_config into c and, under --deepspeed, applies it to a (the loss-scale
 * fields, clip_grad, zero_stage); the flags it overrides and the keys without effect are added
 * to a's start-up line.  0, or -1 + err (exit 2: the file, or a key, or a conflict with the
 * flags).  A no-op returning 0 without --deepspeed_config. */
int dsconfig_apply(struct train_args *a, struct dsconfig *c, char *err, size_t errlen);

/* DeepSpeed's batch resolution against data-parallel size dp, checked against the flags' micro
 * batch mbs and final global batch gbs.  0, or -1 + err. */
int dsconfig_check_batch(const struct train_args *a, const struct dsconfig *c, int64_t dp,
			 int64_t mbs, int64_t gbs, char *err, size_t errlen);

#endif
