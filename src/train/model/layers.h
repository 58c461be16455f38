/* layers - the pieces every architecture is built from, over the ops interface, once.
 *
 * model.c and build.c own what all architectures share - the tensor table, the one-allocation
 * buffers, the activation slots, initialisation - and an architecture (gpt.c, bert.c,
 * t5.c) is a short file that lists its tensors and composes a forward and a backward from the
 * pieces here:
 *   embedding     words (vocab-parallel under TP) [-> layer norm] [+ learned positions]
 *                 [+ token types] -> dropout                       embedding_fwd / _bwd
 *   block         one transformer layer: pre-LN (or Megatron's post-LN residual) attention
 *                 and MLP sub-blocks with bias-dropout-add, TP's column/row split
 *                 and all-reduces; the attention's mask is the block's ATTN_* mode
 *                 (causal, causal within documents, bidirectional over each sample's first
 *                 klen[b] keys); a decoder stack's layers add a cross-attention sub-block
 *                 (below)                                          block_fwd / _bwd
 *   stack         a stage's blocks with activation checkpointing   stack_fwd / _bwd
 *   layer norm    the final one, and any head's                    ln_fwd / _bwd
 *   LM logits     hidden (N,C) x tied word embeddings [+ vocab-parallel bias], the
 *                 cross-entropy (vocab-parallel under TP) fused with its gradient, a loss mask
 *                                                                  lm_xent_fwd / lm_logits_bwd
 *   dense         a replicated linear layer with its activation (GeLU erf/tanh, tanh), for
 *                 heads: BERT's LM transform, pooler               dense_fwd / _bwd
 * Each forward has its backward beside it and allocates nothing: the activations a piece keeps
 * live in the slot's struct model_acts (model.h), carved once by build.c (layers' part) and by
 * the architecture (its heads' part, arch->carve).
 *
 * Stacks.  The blocks come in stacks (model.h struct model_stack): a run of layers over one
 * sequence, with its own length, mask mode and place in the table.  GPT and BERT have one; T5
 * has two, the encoder (bidirectional over each sample's klen) and the decoder (causal), each
 * with its own set of activations (struct model_acts names its stack).  A decoder layer adds a
 * cross-attention sub-block between the self-attention and the MLP - Megatron's inter_attention:
 * queries from the decoder's stream after post_attention_layernorm, keys and values from the
 * encoder's output (a->xsrc, (B,Tk,C)), every query seeing the encoder's first klen[b] keys,
 * then bias-dropout-add and post_inter_attention_layernorm, which feeds the MLP.  Its backward
 * accumulates the gradient of the encoder's output into a->dxsrc, summed over the TP ranks by
 * the caller once the decoder is done (each rank's key/value columns contribute). */
#ifndef TRAIN_MODEL_LAYERS_H
#define TRAIN_MODEL_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "train/model/model.h"

/* Carving a block of activations: sizes first (ab, fb NULL), then pointers. */
struct carver {
	char *ab;
	float *fb;
	size_t na, nf, as;         /* elements so far (act, f32); act element size */
	size_t counted;            /* act elements beyond the layers' that --dry-run's activation
				      figure counts (the logits) */
};
void *carve_act(struct carver *k, size_t n);
float *carve_f32(struct carver *k, size_t n);
int32_t *carve_i32(struct carver *k, size_t n);   /* from the f32 block: same size */

/* An architecture: its tensor table, its activations beyond the blocks', its step. */
struct model_arch {
	const char *name;
	/* appends the architecture's tensors to m's table (model_add_tensor) and sets its indices */
	void (*build_table)(struct model *m);
	/* the activations of its embedding and heads, beyond build.c's: carve_act/carve_f32 on k */
	void (*carve)(struct model *m, struct model_acts *a, struct carver *k);
	double (*forward)(struct model *m, const struct model_batch *b, float dscale, uint64_t rng,
			  uint64_t sample0, float *logits_out, int *bad);
	void (*backward)(struct model *m);
	int max_tensors;   /* beyond the layers' */
	int layer_tensors; /* tensors per layer index over all stacks (0: LAYER_TENSORS) */
	/* lays out the stacks (m->stk, m->nstk) once the table is built (NULL: one stack of the
	 * model's layers from m->layer0, masked by m->attn_mask, over the micro-batch's T) */
	void (*stacks)(struct model *m);
};
extern const struct model_arch model_arch_gpt, model_arch_bert, model_arch_t5;

/* The table: one tensor appended (d1 = 0: 1-D), returns its index; a layer's LAYER_TENSORS. */
int model_add_tensor(struct model *m, const char *name, int64_t d0, int64_t d1, int decay,
		     enum split split, float init);
void block_add_tensors(struct model *m, int layer);
/* The same under a prefix ("encoder.", "decoder."), with the cross-attention's tensors after the
 * layer's LAYER_TENSORS when cross (XQ_W ... XLN_B) */
void stack_add_layer(struct model *m, const char *prefix, int layer, int cross);

/* Dropout sites of one micro-batch: the embedding, and per layer attention probabilities and
 * the two residual adds (a decoder layer's cross-attention: its probabilities and its residual
 * add too).  A stack's embedding is layer stk->l0 - 1's SITE_EMBED (-1 for the first stack,
 * as before stacks; T5's decoder, l0 = the encoder's layers, takes the encoder's last layer's
 * SITE_EMBED, which no layer uses). */
enum { SITE_EMBED, SITE_ATTN, SITE_RES2, SITE_RES3, SITE_XATTN, SITE_RESX };
uint64_t layers_site(uint64_t rng, int layer, int which);
/* Sum over the tensor-parallel group, in place (dist.h). */
void layers_tp_sum(struct model *m, void *x, size_t n);

/* The attention mask of a model's blocks */
enum { ATTN_CAUSAL, ATTN_BIDIR };

/* Embedding of the slot's micro-batch, tokens (and types, when the model has them) host (B,T):
 * into a->encoded; the backward from a->dres into the tables' gradients. */
void embedding_fwd(struct model *m, struct model_acts *a, const int32_t *tokens,
		   const int32_t *types);
void embedding_bwd(struct model *m, struct model_acts *a);

/* Local layer l of the slot's micro-batch from its input res (B,T,C) (forward, and the
 * recomputation of a checkpointed chunk: the same ops, inputs and dropout keys, the same bits);
 * its backward from a->dres (d res3) to a->dres (d res). */
void block_fwd(struct model *m, struct model_acts *a, int l, const void *res);
void block_bwd(struct model *m, struct model_acts *a, int l);
/* The stage's layers from a->encoded to stack_out(); backward from a->dres, recomputing
 * checkpointed chunks. */
void stack_fwd(struct model *m, struct model_acts *a);
void stack_bwd(struct model *m, struct model_acts *a);
void *stack_out(struct model *m, struct model_acts *a);

/* out(N,C) = LN(inp); backward: dinp += d, dw, db += (dinp accumulates, as ops.h's) */
void ln_fwd(struct model *m, void *out, float *mean, float *rstd, const void *inp, int w, int b,
	    int N, float eps);
void ln_bwd(struct model *m, void *dinp, const void *dout, const void *inp, int w, int b,
	    const float *mean, const float *rstd, int N);

/* Replicated linear layer of tensors w [OC,IC], b [OC] with an activation: pre = inp w^T + b,
 * out = act(pre) (pre may be out when act is DENSE_NONE); backward: dinp(N,IC) overwritten
 * (skipped when NULL) from dout, dpre scratch (N,OC) (may be dout: overwritten). */
enum { DENSE_NONE, DENSE_GELU_TANH, DENSE_GELU_ERF, DENSE_TANH };
void dense_fwd(struct model *m, void *out, void *pre, const void *inp, int w, int b, int N,
	       int IC, int OC, int act);
void dense_bwd(struct model *m, void *dinp, void *dpre, const void *dout, const void *out,
	       const void *pre, const void *inp, int w, int b, int N, int IC, int OC, int act);

/* The LM loss of hidden x (N,C) against the tied word embeddings (plus the vocab-parallel bias
 * tensor `bias`, -1 none): logits into a->logits (N, Vp/tp), the cross-entropy over the real
 * vocabulary against host targets (N) - vocab-parallel under TP - with its gradient fused:
 * a->logits then hold dloss/dlogits for the mean over the kept targets times dscale.  mask
 * (host (N), NULL: all kept): 0 leaves the position out of the loss (no loss, no gradient).
 * Targets outside [0, V) are counted in *bad and get loss 0.  Returns the mean loss over the
 * kept targets (0 with none); *kept gets their count.  logits_out (host, (N, Vp/tp) fp32)
 * receives the logits when not NULL. */
double lm_xent_fwd(struct model *m, struct model_acts *a, const void *x, int bias,
		   const int32_t *targets, const uint8_t *mask, float dscale, float *logits_out,
		   int *bad, int *kept);
/* dx(N,C) = dlogits W (summed over TP ranks), dW, dbias += */
void lm_logits_bwd(struct model *m, struct model_acts *a, void *dx, const void *x, int bias);

/* Megatron's get_ltor_masks_and_position_ids on the host tokens: fills the slot's positions
 * and first keys (GPT's --reset-position-ids / --reset-attention-mask). */
void layers_doc_masks(struct model *m, struct model_acts *a, const int32_t *tokens);

#endif
