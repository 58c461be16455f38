/* mds - Megatron-DeepSpeed checkpoints read as lmtk's tensors, streaming.
 *
 * Three layouts (tests/ref/mds-format.md says what every file holds, and from which source):
 *
 *   DeepSpeed's pipeline engine (BLOOM):  SAVE/latest -> "global_stepN", and in SAVE/global_stepN
 *     layer_XX-model_TT-model_states.pt             the weights of layer spec XX, TP rank TT
 *     mp_rank_MM_model_states.pt                    MM = stage * TP + rank: args, counters, the
 *                                                   stage's parameters by group (param_shapes)
 *                                                   or, without ZeRO, the optimizer's state
 *     [bf16_]zero_pp_rank_D_mp_rank_MM_optim_states.pt  DP rank D's ZeRO partition of every
 *                                                   flat group: fp32 master, exp_avg, exp_avg_sq
 *                                                   (mds_ds.c: bf16, fp16 ZeRO, ZeRO stage 0)
 *   DeepSpeed's universal checkpoint: SAVE/latest_universal -> its directory, which holds the
 *     mp_rank files and zero/NAME/{fp32,exp_avg,exp_avg_sq}.pt, whole over TP (mds_uni.c)
 *   plain Megatron (GPT-2):  SAVE/latest_checkpointed_iteration.txt -> N, and in SAVE/iter_%07d
 *     mp_rank_TT[_SSS]/model_optim_rng.pt           weights, fp32 masters, moments, counters
 *
 * mds_open() finds the step, reads every pickle (pt.h: nothing is executed), learns TP, PP, DP
 * and the model from the saved args, and maps every parameter to lmtk's name (layout.h), its TP
 * rank and stage, and - for each of four buffers: the fp32 master, exp_avg, exp_avg_sq, and the
 * bf16 (or fp16) model weight - to where its elements lie: extents of tensors in files.  A
 * parameter's master and moments under ZeRO are a run of the flat group, cut into DP partitions
 * (the last one padded): one extent per partition it touches.  Nothing else is read then;
 * tensor data is read on demand (mds_read), a window at a time, so a 176B conversion holds a
 * block, never a tensor.  At most MDS_OPEN files are open at once; others are reopened (their
 * pickles read again) when needed.
 *
 * Everything is checked against everything else before it is used: the args against the file
 * names, every parameter's shape against the model's TP-local shape, the ZeRO partitions'
 * sizes, paddings and slice mappings against the groups, every buffer present for every rank,
 * counters equal across files.  What lmtk's model cannot hold (rotary positions, GLU, the
 * residual after the layer norm, virtual pipelines, checkpoint versions before 3.0, an unknown
 * .pt file or parameter) is refused naming the file and what.  An optimizer state of a kind
 * lmtk does not read, or none, leaves the model weights alone (has_optimizer 0, left_out
 * saying what and why): a conversion of the weights only.
 *
 * mds_view() presents the checkpoint as shards.h's struct sh_ckpt (a source, not mappings) with
 * a manifest train understands, so reshard.h writes it as an lmtk checkpoint in any layout,
 * hfexport exports it, sh_compare measures its replicas' drift - unchanged. */
#ifndef CKPT_MDS_H
#define CKPT_MDS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt/layout.h"
#include "ckpt/shards.h"

#define MDS_OPEN 48

enum mds_kind { MDS_DEEPSPEED, MDS_MEGATRON, MDS_UNIVERSAL };
/* the buffers a parameter has; MDS_ZERO feeds a view zeros */
enum mds_buf { MDS_MASTER, MDS_EXP_AVG, MDS_EXP_AVG_SQ, MDS_BF16, MDS_NBUFS, MDS_ZERO = -1 };
extern const char *const mds_buf_name[MDS_NBUFS];   /* "fp32 master", ..., "bf16 weight" */

struct mds_file;
struct mds_ext;

struct mds {
	char *dir;               /* the step directory */
	enum mds_kind kind;
	int tp, pp, dp;
	int has_optimizer;       /* masters and both moments are there */
	int has_weights;         /* the model weights (MDS_BF16) are there: not in a universal one */
	const char *weights_dtype;   /* the model weights' (MDS_BF16's) dtype: "bfloat16" ... */
	const char *optim;       /* what saved the optimizer state ("fp16 ZeRO (...)"), or NULL */
	char left_out[600];      /* without optimizer state: what is missing and why; else "" */
	int64_t iteration, consumed_samples, consumed_tokens, adam_step;
	struct lt_model m;
	json_t *manifest;        /* an lmtk manifest of it (no "files"; layout the input's) */
	uint64_t bytes;          /* of every .pt file read */
	/* private */
	struct mds_file *files;
	int nfiles, nopen;
	uint64_t clock;
	int32_t *first, *count;  /* [((t * MDS_NBUFS + b) * tp + r) * pp + s]: its extents */
	struct mds_ext *ext;
	size_t next, capext;
};

/* path: a save directory (its `latest` or latest_checkpointed_iteration.txt) or a step
 * directory (global_stepN, iter_NNNNNNN).  0, or EXIT_USAGE (not such a checkpoint, or one
 * lmtk cannot hold) / EXIT_FAILED (I/O) + err naming the file. */
int mds_open(struct mds **out, const char *path, char *err, size_t errlen);
void mds_close(struct mds *c);

/* Does path look like a Megatron-DeepSpeed checkpoint (for a hint when --from is missing)? */
int mds_detect(const char *path);

/* Does rank r's part of tensor t exist on stage s in buffer b? */
int mds_has(const struct mds *c, int t, int b, int r, int s);
/* Elements [a, b) of that part (row-major in its TP-local shape) as floats.  0, or -1 + err. */
int mds_read(struct mds *c, int t, int buf, int r, int s, int64_t a, int64_t b, float *dst,
	     char *err, size_t errlen);

/* The checkpoint as an sh_ckpt: lmtk group g (weights, exp_avg, exp_avg_sq) fed by buffer
 * bufs[g] (MDS_ZERO: zeros - with moments zero the manifest's Adam step is 0, a fresh
 * optimizer).  A view of the bf16 weights gives the last stage its copy of the tied word
 * embeddings (never saved as a layer file) from stage 0's when tied_copy.  c borrows m: close
 * c (sh_close) before m.  0, or -1 + err. */
int mds_view(struct sh_ckpt *c, struct mds *m, const int bufs[LT_GROUPS], int tied_copy,
	     char *err, size_t errlen);

#endif
