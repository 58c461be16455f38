/* mdsw - an lmtk checkpoint written as Megatron-DeepSpeed writes one (the reverse of mds.h).
 *
 * DeepSpeed's pipeline checkpoint (tests/ref/mds-format.md, section 2), as DeepSpeed 0.7 under
 * Megatron-DeepSpeed saves a GPT or BLOOM run, for any TP, PP and DP:
 *
 *   OUT/latest                                        "global_stepN", no newline
 *   OUT/global_stepN/layer_XX-model_TT-model_states.pt   the model weights of layer spec XX
 *                                                     (1 the embedding, l+3 layer l, L+4 the
 *                                                     final norm) on TP rank TT, in the run's
 *                                                     precision: the fp32 masters rounded to
 *                                                     nearest even
 *   OUT/global_stepN/mp_rank_MM_model_states.pt       MM = stage * TP + rank: the engine's state
 *                                                     (param_shapes: the stage's parameters by
 *                                                     group), Megatron's args Namespace with the
 *                                                     consumed samples, iteration, tokens, the
 *                                                     AnnealingLR state, the RNG states as
 *                                                     Megatron seeds them
 *   bf16:  bf16_zero_pp_rank_D_mp_rank_MM_optim_states.pt  BF16_Optimizer's partition D of
 *                                                     each flat group: fp32 master, exp_avg,
 *                                                     exp_avg_sq, paddings, slice mappings
 *   fp16:  zero_pp_rank_D_mp_rank_MM_optim_states.pt  ZeRO stage 1's partition (the fp32 one
 *                                                     saved without its padding) and the
 *                                                     DynamicLossScaler
 *
 * A flat group is Megatron's parameter group over the stage's parameters in module order (2.5:
 * first half of the decayed, second half, the not decayed), padded to a multiple of 2 x DP and
 * cut into DP equal partitions (2.6).  Adam's step is lmtk's: DeepSpeed's step counts a
 * start-up step that Adam's bias correction sees, so writing lmtk's count makes the next
 * update of a resumed run lmtk's next update; the reader takes the step as it finds it, so
 * lmtk -> Megatron-DeepSpeed -> lmtk is the same checkpoint.  The fp16 loss scaler's state is
 * lmtk's as DeepSpeed counts it (the reader's rule, mds_ds.c, inverted).
 *
 * Files are torch zip pickles (ptw.h, pklw.h), each written whole or not at all; tensor data is
 * streamed from the input a block at a time (RS_BLOCK), so memory stays bounded.  Classes the
 * pickles name are the ones real checkpoints name (megatron.enums.PositionEmbeddingType,
 * deepspeed.runtime.bf16_optimizer.fragment_address, ...): torch.load(weights_only=False) in
 * Megatron-DeepSpeed's environment reads them. */
#ifndef CKPT_MDSW_H
#define CKPT_MDSW_H

#include <stddef.h>

#include "progress.h"
#include "ckpt/shards.h"

enum mdsw_precision { MDSW_BF16, MDSW_FP16 };

struct mdsw_target {
	int tp, pp, dp;
	int padded_vocab;
	int average;            /* replicated tensors: the mean of their copies */
	int pp_embedding;       /* the PP cut counts the embeddings as units (layout.h) */
	enum mdsw_precision precision;
};

/* The run's precision from the manifest's recorded command line (--bf16, --fp16): 0 and *p,
 * or -1 + err (an fp32 run, or none recorded: DeepSpeed's formats here hold bf16 or fp16). */
int mdsw_precision(const struct sh_ckpt *in, enum mdsw_precision *p, char *err, size_t errlen);
/* The data-parallel size the run recorded (manifest layout.dp), 1 if none. */
int mdsw_run_dp(const struct sh_ckpt *in);

/* Writes dir/global_stepN and dir/latest (dir: an output's temporary, existing).  0, or
 * EXIT_USAGE (the model or layout cannot be written so) / EXIT_FAILED + err. */
int mdsw_write(const struct sh_ckpt *in, const struct mdsw_target *tg, const char *dir,
	       struct progress *pg, char *err, size_t errlen);

#endif
