/* plan - the planning arithmetic of a training run, from its flags alone.
 *
 * Before every run the BigScience teams worked these numbers out by hand, with one-liners pasted
 * into their READMEs; plan_make() computes them from the same flags the run will get, and
 * report.c prints them.  Nothing is allocated for the model and no data is read beyond the
 * index headers and sizes.  The sections, and the formulas (train(1) has them with examples):
 *
 * Parameters: exact, from the layer structure Megatron builds: word embeddings Vp*h (Vp the padded
 *   vocab), learned position embeddings max_pos*h (none with alibi/rotary), the embedding
 *   LayerNorm 2h, per layer 4ph + 2fh + 3p + f + 6h (p = heads * kv-channels, f = ffn size;
 *   12h^2 + 13h for p = h, f = 4h), the final LayerNorm 2h; output weights tied to the
 *   embedding.  BERT adds token types K*h and its heads (p_heads below).  T5: an encoder and a
 *   decoder of L layers each, a decoder layer adding its cross-attention (query [p, h] + p,
 *   key_value [2p, h] + 2p, dense [h, p] + h, layer norm 2h: 4ph + 3p + 3h), a final layer norm
 *   per stack and the LM head's vocab-parallel bias Vp; its activations are each stack's over its
 *   own length, the cross-attention's on top (model.c), the logits over the decoder's length.
 * T5's time: FLOPs per token from the model (model_flops_per_token, per encoder token), times
 *   4/3 with --checkpoint-activations, instead of F x params.  Per GPU: column/row-parallel weights and the embedding are split over TP, layer
 *   norms and row-parallel biases replicated; each pipeline stage holds its layers, the first also
 *   the embeddings and the last the final norm and a tied copy of the word embedding.  The runs'
 *   sanity formula l*(12h^2 + 13h) + V*h + s*h (unpadded V) is shown beside the exact count.
 * Batch: the ramp-up table (ramp.h), micro-batches GBS/(MBS*DP), and the first iteration whose
 *   GBS >= PP*MBS*DP, i.e. the first with at least PP micro-batches per pipeline, filling it.
 * Schedule: warmup and decay in samples (Megatron counts the lr schedule in samples), converted
 *   to iterations through the ramp and to tokens (* seq).
 * Memory per GPU (an estimate): weights 2 B/param (4 in fp32), gradients 4 B/param (fp32
 *   accumulation: always with bf16, with fp16 under --accumulate-allreduce-grads-in-fp32, else 2),
 *   Adam state 12 B/param (fp32 master + two moments; 8 in fp32), divided over DP with ZeRO-1
 *   (--zero-stage 1, or --bf16 under --deepspeed, whose BF16 optimizer shards the same way).
 *   Activations per layer per micro-batch, what train's model allocates (model.c): with e bytes
 *   per activation (2 with --bf16/--fp16, 4 in fp32) e*s*b*(6h + (4p + 2f)/t) + 4*s*b*(4 + a/t)
 *   - not Korthikanti et al.'s s*b*h*(34 + 5as/h) for 16-bit, as train's attention keeps no
 *   (s,s) probabilities or dropout masks.  With --checkpoint-activations and
 *   --checkpoint-num-layers n, each chunk's output, ceil(layers/n)*e*s*b*h per micro-batch, plus
 *   one chunk's full activations, n layers, while it is recomputed.  Under
 *   1F1B stage i holds min(PP - i, micro-batches) micro-batches in flight; the last stage adds
 *   the fp32 logits, s*b*Vp/t*4 (and a BERT its LM head's three s*b*h activations).  The stage
 *   with the largest total is the one that must fit.
 * Checkpoints: weights only 2 B/param (4 in fp32); full 14 B/param (bf16 weights + fp32 master +
 *   Adam; 12 in fp32); save time at --checkpoint-bandwidth.
 * Time: days = tokens * F * params / (GPUs * TFLOPs * 1e12 * 86400) with F = 8 (6 forward and
 *   backward + 2 recompute; 6 without --checkpoint-activations), the runs' formula, the TFLOPs
 *   being what Megatron logs.  Ramp-aware: those TFLOPs are measured at the full GBS, whose
 *   1F1B step takes m + PP - 1 micro-batch slots for m micro-batches; so a slot lasts
 *   t_iter / (m_full + PP - 1) and a ramp iteration with m micro-batches takes that times
 *   m + PP - 1: at GBS 16 BLOOM-176B runs 1 micro-batch through 12 stages, 9% of full speed.
 *   Without --assumed-tflops the step model (gpumodel.h) prices the CUDA backend's iteration on
 *   --gpu-model's device: a slot is the slowest stage's micro-batch, an iteration m + PP - 1
 *   slots plus the tail after the last backward; days are the tokens at the full batch's time
 *   per token, ramp-aware each ramp iteration at its own m; the TFLOPs are train's log line's.
 *
 * Constraints (check.h): plan_make() checks every rule Megatron asserts that the plan depends on,
 * and collects each violation as an error naming the flags (all of them, not the first); errors
 * that leave the arithmetic undefined (a missing --num-layers, a world size not divisible by
 * TP*PP) make it stop before computing, the rest are reported beside a complete plan. */
#ifndef TRAIN_PLAN_H
#define TRAIN_PLAN_H

#include <stdint.h>

#include "train/args.h"
#include "train/data/datasize.h"
#include "train/data/ramp.h"
#include "train/plan/gpumodel.h"

struct plan_stage {
	int64_t layers;           /* transformer layers */
	int embed_units;          /* embeddings counted as layers by the partition (0-2) */
	int first, last;          /* holds the embeddings / the final norm and tied output */
	int64_t params;           /* per GPU: this stage's share on one TP rank */
	int64_t inflight;         /* micro-batches whose activations it holds at peak (1F1B) */
	double weights, grads, optim, optim_zero;      /* bytes */
	double act, act_ckpt, logits;                  /* bytes; logits included in act, act_ckpt */
	double total;             /* as configured (ZeRO-1 and checkpointing as given) */
};

struct plan_point {           /* a point of the schedule: warmup end, decay end */
	int64_t samples, iters, tokens;
	const char *from;         /* the flag it came from, or "default" */
};

struct plan {
	const struct train_args *a;

	/* resolved model and layout */
	int64_t L, h, heads, f, kv, proj, s, maxpos;
	int64_t tp, pp, dp, world, mbs, gbs, m_full;
	int64_t vocab, vocab_padded;
	const char *vocab_from;   /* "--vocab-file", "--tokenizer-name-or-path", "--vocab-size" */
	const char *partition;    /* the --pp-partition-method in effect */

	/* parameters */
	int64_t p_word, p_pos, p_emb_ln, p_final_ln, p_layer, p_layer_rank, p_total, p_sanity;
	/* --model-type bert: token types K*h (first stage); the heads (last stage): the LM head's
	 * dense h^2 + h, layer norm 2h and vocab-parallel bias Vp, with the binary head also the
	 * pooler h^2 + h and the binary head 2h + 2 */
	int64_t p_types, p_heads;
	/* --model-type t5: the decoder's length, a decoder layer's cross-attention (whole, one TP
	 * rank's); p_heads is then the LM head's bias Vp, p_final_ln each stack's */
	int64_t dec_s, p_xlayer, p_xlayer_rank;
	double flops_token;       /* t5: training FLOPs per token (have_time) */
	double params_used;       /* for time and checkpoint size: --assumed-params or p_total */

	/* per pipeline stage, and the one that needs the most memory */
	struct plan_stage *st;
	int worst;
	int zero1;                /* optimizer state sharded over DP */
	int wbytes, gbytes, obytes;
	double act_layer;         /* bytes, one layer, one micro-batch, one TP rank */
	int abytes;               /* bytes per activation: 2 (bf16/fp16) or 4 */
	int64_t ckpt_layers;      /* layers per checkpointed chunk */
	double gpu_bytes;
	int fits;

	/* batch and length */
	struct ramp ramp;
	int64_t iters, samples, tokens;
	int64_t fill_gbs, fill_step;  /* 0: the pipeline never fills */
	char *indivisible;        /* GBS values of the run not divisible by MBS*DP, or NULL */

	/* schedule */
	struct plan_point warmup, decay;

	/* checkpoints, bytes and seconds */
	double ckpt_weights, ckpt_full, ckpt_weights_s, ckpt_full_s;
	/* with --save: the saves of the run, how many --save-keep keeps at most, their bytes as lmtk
	 * writes them (12 B/param; 6 under --use-bnb-optimizer, absmax aside) */
	int64_t ckpt_saves, ckpt_kept;
	double ckpt_disk;

	/* time (have_time: from --assumed-tflops, or from the step model when it is not given) */
	int have_time, flops_factor;
	double t_iter, t_slot, days, ramp_days, ramp_days_full_speed, ramp_aware_days;
	double ramp_tflops;       /* average modelled TFLOPs over the ramp phase */
	/* the step model (gpumodel.h): time_model set when it gave the numbers above; tflops as
	 * train logs them (Megatron's formula), mfu of the dense bf16 peak */
	int time_model;
	struct gpumodel gm;
	double model_tflops, model_mfu, model_mfu_palm;   /* mfu: llm.c's count; PaLM's beside */
	double model_tokens_s;    /* tokens per second, all GPUs */
	/* the same step with other attention kernels (gpu-model.tsv attn.variants; not with
	 * --step-model megatron-deepspeed, whose attention is unfused) */
	int n_attn_var;
	struct {
		const char *name;
		double t_iter, tokens_s, mfu;
	} attn_var[GM_ATTN_VARIANTS];

	/* the sequence-length curriculum (curriculum.h): tokens are counted at each iteration's
	 * length; cl_full_iter is the first iteration at the full --seq-length (0: none) */
	int64_t cl_full_iter, cl_tokens_ramp;   /* tokens consumed before cl_full_iter */

	/* data */
	struct dataset *ds;       /* epochs of dataset i: tokens * weight / its train-split tokens */
	int nds;

	/* problems: errors exit 2; warnings and notes are printed with the plan */
	char **errors, **warnings, **notes;
	int nerrors, nwarnings, nnotes;
	int complete;             /* the numbers above are all computed */
};

/* Resolves defaults, checks every constraint, and computes the plan.  Returns 0 when the plan is
 * complete (p->errors may still hold violations: exit 2 after printing), -1 when errors made it
 * impossible (print p->errors only). */
int plan_make(struct plan *p, const struct train_args *a);

/* Tokens consumed by the first n iterations, as Megatron-DeepSpeed counts them: samples x the
 * iteration's sequence length (the curriculum's, else --seq-length). */
int64_t plan_tokens_at(const struct plan *p, int64_t n);
void plan_free(struct plan *p);

/* The padded vocabulary (Megatron's _vocab_size_with_padding without the error cases). */
int64_t plan_pad_vocab(int64_t vocab, int64_t divisible_by, int64_t tp, int64_t pad_to);

#endif
