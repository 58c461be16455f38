/* model - the models Megatron builds (GPT/BLOOM decoder: gpt.c; BERT: bert.c; T5: t5.c), over
 * the ops interface, from the pieces of layers.h.  model.c holds the tensor table and the
 * buffers every layer reads; build.c, above the pieces, puts a model together (model_init) and
 * dispatches its step; optim/state.c sizes the optimizer state the model holds.
 *
 * Layout (llm.c style): the parameters are one allocation, described by a table of named
 * tensors (model_tensor) in a fixed order - the embeddings (words, positions, token types,
 * embedding layer norm), then each layer's twelve tensors, then the final layer norm and the
 * heads.  The gradients,
 * the fp32 master copy and both Adam moments are allocations of the same length and the same
 * offsets, so "tensor i" is one offset into any of them and a checkpoint writes each buffer
 * tensor by tensor.  Activations are another single allocation, sized once for (B,T); the step
 * allocates nothing.
 *
 * The names are Megatron's (layers.N.attention.query_key_value.weight ...) so checkpoints and
 * the PyTorch reference (tests/ref/gpt-ref.py) speak the same language, and shapes are the
 * full model's.  Partition-aware from the start: each tensor knows how it splits across
 * tensor-parallel ranks (column, row, vocab, replicated), and the local sizes used by the math
 * (heads, ffn, vocab rows) are the rank's own; with TP=1 they are the whole model.
 *
 * Initialisation draws element i of tensor X from philox(seed ^ hash(X), global index of i), so
 * the same seed gives the same model whatever the parallel layout, and a rank never draws the
 * elements of another rank's shard. */
#ifndef TRAIN_MODEL_H
#define TRAIN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "train/parallel/dist.h"
#include "train/model/ops.h"

enum model_kind { MODEL_GPT, MODEL_BERT, MODEL_T5 };

/* The epsilon of the layer norm after the word embedding (--embed-layernorm, BLOOM's
 * word_embeddings_layernorm).  Megatron-DeepSpeed builds that norm as LayerNorm(hidden) in
 * VocabParallelEmbedding (megatron/mpu/layers.py), so it keeps MixedFusedLayerNorm's default
 * 1e-5 whatever --layernorm-epsilon says; lmtk does the same, so that a checkpoint trained by
 * either computes the same embedding.  (HF's BloomModel uses config.layer_norm_epsilon for it:
 * the two agree at the default, which every BLOOM run used.) */
#define EMBED_LN_EPS 1e-5f

struct model_config {
	int arch;                            /* MODEL_GPT (GPT/BLOOM), MODEL_BERT, MODEL_T5 */
	/* BERT (Megatron's BertModel): --num-tokentypes token-type embeddings (0: none); the
	 * pooler and binary (sentence-order) head unless --bert-no-binary-head; the LM head's GeLU
	 * is torch's erf GeLU, the tanh one with --openai-gelu (head_gelu_tanh) */
	int num_tokentypes, binary_head, head_gelu_tanh;
	int layers, hidden, heads, ffn;      /* L, C, NH, F */
	int seq, max_pos;                    /* T, learned positions available */
	/* T5 (Megatron's T5Model): an encoder of `layers` layers over seq (--encoder-seq-length)
	 * tokens and a decoder of as many over dec_seq (--decoder-seq-length) */
	int dec_seq;
	int vocab, padded_vocab;             /* V (real), Vp (padded: softmax over V only) */
	int alibi, embed_ln;                 /* BLOOM: ALiBi instead of learned positions; LN after the embedding */
	float eps, init_std;
	float hidden_dropout, attention_dropout;
	uint64_t seed;
	int tp, tp_rank;                     /* tensor-parallel size and rank */
	/* pipeline: this stage holds global layers [stage_l0, stage_l0 + stage_nl); the first stage
	 * the embeddings, the last the final LN and the tied output layer (a copy of the word
	 * embeddings, same name, same initial values).  pp <= 1: the whole model. */
	int pp, pp_rank, stage_l0, stage_nl;
	int slots;                           /* activation sets: micro-batches in flight (>= 1) */
	/* --checkpoint-activations: 0 keeps every layer's activations; n > 0 keeps only the output
	 * of each chunk of n layers (Megatron's --checkpoint-num-layers, chunks counted from the
	 * stage's first layer) and the backward recomputes a chunk's layers from its input into one
	 * workspace of n layers shared by all slots, with the same dropout masks */
	int ckpt_layers;
	int zero_dp, zero_rank;              /* ZeRO-1: optimizer state sharded over zero_dp ranks */
	size_t zero_bucket;                  /* ZeRO-1: elements a bucket holds at least (>= 1) */
	/* Megatron's get_ltor_masks_and_position_ids and the residual ordering (train(1)): */
	int eod;                             /* the end-of-document token id (-1: unknown) */
	int eod_mask_loss;                   /* --eod-mask-loss: no loss where the input token is eod */
	int reset_position_ids;              /* --reset-position-ids: positions restart after each eod */
	int reset_attention_mask;            /* --reset-attention-mask: no attention across an eod */
	int post_ln_residual;                /* --apply-residual-connection-post-layernorm */
	/* --use-bnb-optimizer: bitsandbytes' 8-bit Adam (bnb.h) and the StableEmbedding Megatron-
	 * DeepSpeed pairs with it - a layer norm after the word embedding (embed_ln is set too) and a
	 * xavier-uniform word embedding, U(-a, a), a = sqrt(6 / (Vp + C)) on the full padded
	 * vocabulary whatever the TP split (its xavier_uniform_tensor_parallel_) */
	int bnb;
	/* The optimizer state's blocks (optim_state_rule, optim/state.h; 0: none): under ZeRO-1
	 * the chunks are multiples of state_block elements, and every tensor but the word
	 * embedding of state_block_min elements or more starts on a block, so that each rank's
	 * shard holds whole blocks */
	size_t state_block, state_block_min;
};

enum split { SPLIT_NONE, SPLIT_COLUMN, SPLIT_ROW, SPLIT_VOCAB };

struct model_tensor {
	char name[64];
	int ndim;
	int64_t shape[2];          /* full (unsplit) shape */
	size_t offset, numel;      /* in elements, local to this rank */
	int decay;                 /* AdamW weight decay applies (not biases, not layer norms) */
	enum split split;
	float init;                /* std of N(0,std); 0: zeros; -1: ones */
	int qkv;                   /* rows in Megatron's [heads, 3, head_dim] order */
};

/* One tensor's optimizer state on this rank: the elements [lo, hi) of the flat buffers it
 * updates (lo == hi: none), and where their state lives - fp32 moments at adam_m/adam_v + s, or
 * (q8, --use-bnb-optimizer) 8-bit codes at q1/q2 + s with absmax1/absmax2 from block `blk`. */
struct model_ostate {
	size_t lo, hi;
	int q8;
	size_t s, blk;
};

/* One micro-batch, host arrays.  GPT: tokens and targets (the next tokens).  BERT: tokens,
 * types, targets (the original token where loss_mask is 1), loss_mask, lens (each sample's real
 * tokens: its padding mask, which is a prefix) and the binary head's label per sample
 * (is_random). */
struct model_batch {
	const int32_t *tokens, *targets;   /* (B,T) */
	/* T5: tokens are the encoder's input (B, seq) and lens its real tokens; dec_tokens the
	 * decoder's input, targets and loss_mask its labels (B, dec_seq) */
	const int32_t *dec_tokens;
	const int32_t *types;              /* (B,T), NULL without token types */
	const uint8_t *loss_mask;          /* (B,T), NULL: every target counts */
	const int32_t *lens;               /* (B), NULL: T each */
	const int32_t *sop;                /* (B), the binary head's labels */
};

/* The per-layer tensors, in table order. */
enum { LN1_W, LN1_B, QKV_W, QKV_B, PROJ_W, PROJ_B, LN2_W, LN2_B, FC_W, FC_B, FCPROJ_W, FCPROJ_B,
       LAYER_TENSORS };
/* A T5 decoder layer's cross-attention (Megatron's inter_attention and the layer norm after it),
 * after its LAYER_TENSORS */
enum { XQ_W = LAYER_TENSORS, XQ_B, XKV_W, XKV_B, XPROJ_W, XPROJ_B, XLN_W, XLN_B, XLAYER_TENSORS };

/* Activations for micro-batch (B,T).  act type unless noted; N = B*T. */
struct model_acts {
	const struct model_stack *stk;   /* the stack these activations are for (build.c) */
	void *emb;                  /* (N,C) word embeddings before the embedding LN (embed_ln) */
	float *eln_mean, *eln_rstd; /* (N) */
	void *encoded;              /* (N,C) the residual stream entering layer 0 */
	struct block_acts {
		void *ln1, *qkv, *atty, *attproj, *res2, *ln2, *fch, *fchg, *fcproj, *res3;
		float *ln1_mean, *ln1_rstd, *lse, *ln2_mean, *ln2_rstd;
		/* cross-attention (stk->cross): q (N,C/tp), kv (B*Tk, 2C/tp) in Megatron's per-head
		 * [k, v] order, its output (N,C/tp), the dense's (N,C), the residual and the layer
		 * norm after it (N,C); lse (B,NH/tp,T) */
		void *xq, *xkv, *xatty, *xproj, *xres, *xln;
		float *xlse, *xln_mean, *xln_rstd;
	} *l;
	void *lnf, *logits;         /* (N,C), (N,Vp) */
	float *lnf_mean, *lnf_rstd;
	/* gradient scratch */
	void *dres, *dbtc, *dbtc2, *dqkv, *dbtf;
	/* cross-attention (T5's decoder): the encoder's output its layers read (B,Tk,C) and that
	 * output's gradient, accumulated over the layers (B,Tk,C); scratch for the key/value
	 * gradient (B*Tk, 2C/tp) and its input gradient (B*Tk, C) */
	const void *xsrc;
	void *dxsrc, *dxkv, *dxin;
	int xT;                     /* Tk: the encoder's length */
	int32_t *tokens, *tokens_local;   /* (B,T) device: the embedding backward needs this slot's */
	int32_t *positions;         /* (B,T) device: t, or t - its document's start (reset_position_ids) */
	int32_t *kstart;            /* (B,T) device: the first key each query sees (reset_attention_mask) */
	int32_t *types;             /* (B,T) device: token types (num_tokentypes > 0) */
	int32_t *klen;              /* (B) device: keys each sample's queries see (bidirectional) */
	uint64_t rng, sample0;      /* the forward's dropout key and place in the batch, for the backward */
	/* BERT's heads (bert.c): LM transform dense -> GeLU -> LN (N,C) each; pooler input, dense,
	 * tanh (B,C) each; the binary head's logits (B,2); scratch for their gradients (B,C) */
	void *hd_pre, *hd_act, *hd_ln, *pool_in, *pool_pre, *pool_out, *bin_logits;
	float *hd_mean, *hd_rstd, *bin_losses;   /* (N), (N), (B) */
	int32_t *bin_targets;       /* (B) device */
	void *dpool, *dpool2;
	void *act_block;
	float *f32_block;
};

/* A stack of transformer layers over one sequence (layers.h): GPT's and BERT's one, T5's encoder
 * and decoder.  Its layers' tensors are `per` consecutive table entries each from t0. */
struct model_stack {
	int t0, per;              /* first local layer's first tensor; tensors per layer */
	int nl, l0;               /* local layers; global index of the first (dropout keys) */
	int mask;                 /* ATTN_CAUSAL or ATTN_BIDIR (layers.h) */
	int cross;                /* its layers attend to another stack's output (T5's decoder) */
	int T;                    /* its sequence length now */
};

struct model_arch;
struct model {
	struct model_config cfg;
	const struct model_arch *arch;     /* the architecture's table and step (layers.h) */
	int attn_mask;                     /* its blocks' attention mask (layers.h ATTN_*) */
	const struct ops *ops;
	int B, T;                          /* micro-batch shape the activations are sized for */
	int Tcur;                          /* the length micro-batches have now: T, or less under a
					    * curriculum (model_set_seq) */
	int eval_mode;                     /* 1: no dropout (validation) */
	struct dist *dist;                 /* tensor-parallel collectives (NULL: one rank) */
	int vocab_start, vocab_valid;      /* this rank's vocabulary slice: first id, real columns */
	int32_t *tokens_local, *targets_local;   /* (B,T) device: ids in the slice, else -1 */
	int32_t *host_ids, *host_tgt;      /* (B,T) host scratch */
	uint8_t *host_mask;                /* (B,T) host scratch */
	float *host_stats;                 /* (4,B,T) host scratch: max, sum, target logit, lse */
	float *dev_stats;                  /* (4,B,T) device */

	struct model_tensor *tensors;
	int ntensors;
	int wte, wpe, eln_w, eln_b, lnf_w, lnf_b, layer0;   /* table indices (-1 absent) */
	int tte;                           /* BERT: token types */
	int hd_w, hd_b, hd_ln_w, hd_ln_b, lm_bias;   /* BERT's LM head: transform, output bias
							(T5's: the bias only) */
	int elnf_w, elnf_b;                /* T5: the encoder's final layer norm (lnf: the decoder's) */
	int pool_w, pool_b, bin_w, bin_b;  /* BERT's pooler and binary head */
	int first, last, nl, l0;           /* pipeline stage: holds the input / the output; layers */
	size_t nparams;                    /* elements in every parameter-shaped buffer */
	size_t nweights;                   /* the tensors' elements: nparams less ZeRO-1's padding */
	/* ZeRO-1 (cfg.zero_dp > 1; else NULL, 0): the flat buffer cut into buckets of whole tensors,
	 * from the top down, each at least cfg.zero_bucket elements and padded to a multiple of
	 * zero_dp (x 64, x cfg.state_block under bnb) - Megatron's distributed optimizer.  Bucket k is
	 * [zb[k].lo, zb[k].hi) in ascending order; tbucket[i] is tensor i's. */
	struct model_zbucket { size_t lo, hi; } *zb;
	int nzb;
	int *tbucket;

	void *params;                      /* working weights, activation type */
	float *master, *grads;             /* fp32, nparams; master == params on the CPU */
	float *adam_m, *adam_v;            /* fp32 Adam moments of this rank's elements only: the
	                                      whole model, or its ZeRO-1 shard (under bnb: of the
	                                      tensors that keep fp32 state) */
	struct model_ostate *ost;          /* per tensor: its part of this rank's elements
	                                      (optim_state_layout) */
	uint8_t *q1, *q2;                  /* bnb: 8-bit codes of both moments (device) */
	float *absmax1, *absmax2;          /* bnb: one absmax per block of state (device) */
	float *qmap;                       /* bnb: the signed map, then the unsigned one (512, device) */
	struct adam_seg *aseg;             /* ost as one multi-tensor AdamW launch's table (device;
	                                      NULL: the backend updates tensor by tensor) */
	int naseg;
	size_t aseg_total;                 /* elements the table covers */
	size_t opt_bytes;                  /* optimizer-state bytes allocated on this rank */
	float *slopes;                     /* ALiBi slopes of this rank's heads (device) */

	struct model_stack stk[2];         /* the stacks: [0] GPT's, BERT's, T5's encoder; [1] T5's
					      decoder */
	int nstk;
	struct model_acts *act;            /* activations (build.c), one set per slot (T5: the
					      decoder's) */
	struct model_acts *xact;           /* T5: the encoder's, one set per slot; else NULL */
	int slot;                          /* the set forward/backward use (model_use_slot) */
	size_t acts_bytes;
	/* allocation accounting, bytes on the backend's device: everything the model allocates now
	 * and at peak (the step's transient buffers included); of it the activations (every slot,
	 * the recompute workspace, the gradient scratch) and, of those, what --dry-run's activation
	 * figure counts (the layers' activations, the checkpointed chunk outputs, the logits) */
	size_t mem_now, mem_peak, mem_act, mem_act_layers;
	struct model_acts *ws;             /* the recompute workspace (ckpt_layers > 0), else NULL */
	struct model_acts *xws;            /* T5: the encoder's, else NULL */
	int32_t *tokens, *targets;         /* (B,T) device */
	float *losses;                     /* (B,T) device */
	int *bad_targets;                  /* device int */
	double loss_lm, loss_sop;          /* the last forward's losses (last stage; sop: BERT's
	                                      binary head, else 0) */
	/* Called by the backward as soon as the gradients of table entries [t0, t1) - one layer's -
	 * are final for this micro-batch, right after that layer's backward is queued (run.c
	 * reduces them over DP meanwhile); the other tensors' are final when the backward
	 * returns.  NULL: no one asks. */
	void (*grads_ready)(struct model *m, int t0, int t1, void *ctx);
	void *grads_ctx;
	/* A step whose scalars stay on the device (train's deferred read-back; NULL: read at
	 * once): the cross-entropy adds each micro-batch's mean loss into dstep->loss[0] (ops.h
	 * loss_acc) and leaves its bad-target count summing in bad_targets (zeroed by the caller
	 * once per step) instead of copying either back; the forward then returns 0 and *bad 0,
	 * and dstep_masked counts the masked targets the caller must not call bad. */
	struct ops_step *dstep;
	int dstep_masked;
};

/* Megatron's padded vocabulary: the smallest multiple of divisible_by*tp >= vocab, unless
 * pad_to (> 0) is given. */
int model_padded_vocab(int vocab, int divisible_by, int tp, int pad_to);

/* ALiBi slopes for n heads (Press et al.; BLOOM's build_alibi_tensor for non-powers of two). */
void model_alibi_slopes(int n, float *out);

/* Builds the tensor table and allocates every buffer for micro-batch (B,T) but the optimizer
 * state's (optim_state_init, after it).  0, or -1 + err (invalid shapes, out of memory, naming
 * the size asked for). */
int model_init(struct model *m, const struct model_config *cfg, const struct ops *ops, int B,
	       int T, char *err, size_t errlen);
void model_free(struct model *m);

/* Fills the parameters (master and working copy) from the seed. */
void model_init_weights(struct model *m);

/* Tensor i's local elements by their global (unsplit) index: element e is element
 * philox_gindex(e, base, cols, stride) of the full tensor (philox.h), on any TP layout. */
void model_tensor_gmap(const struct model *m, int i, uint64_t *base, uint64_t *cols,
		       uint64_t *stride);
/* The 64-bit FNV-1a hash of a tensor's name: its part of the keys of its random draws (the
 * initial weights, --lamb-layerwise-noise). */
uint64_t model_hash_name(const char *name);

/* Pointers into a parameter-shaped buffer for tensor i. */
void *model_param(const struct model *m, int i);
float *model_grad(const struct model *m, int i);
float *model_master(const struct model *m, int i);
int model_layer_tensor(const struct model *m, int layer, int which);
int model_find(const struct model *m, const char *name);

/* Pipeline stages: which activation set the next forward/backward use (micro-batch k in slot
 * k % slots); where a middle or last stage receives its input (N,C) before the forward, what a
 * non-last stage sends on after it; where a non-last stage receives the gradient of its output
 * before the backward, and what a non-first stage sends back after it. */
void model_use_slot(struct model *m, int slot);
void *model_stage_input(struct model *m);
void *model_stage_output(struct model *m);
void *model_stage_dout(struct model *m);
void *model_stage_dinput(struct model *m);

/* One micro-batch.  tokens/targets are host (B,T) arrays (tokens on every pipeline stage: the
 * document masks come from them).  The forward returns the mean loss over the B*T tokens - over
 * those whose input is not the end of document with eod_mask_loss, Megatron's
 * sum(loss * mask) / sum(mask) - targets outside the vocabulary are counted in *bad and get
 * loss 0.  The loss gradient is fused into the forward's cross-entropy, so the forward takes its
 * scale: backward then accumulates into grads the gradient of (mean loss * dscale), dscale = loss
 * scale / micro-batches.  Dropout masks are keyed by `rng` (the step's key) and by global
 * coordinates: sample0 is the index of the micro-batch's first sample in the iteration's global
 * batch, so any DP/TP/PP layout and micro-batch size draws the same masks for the same sample.
 * The backward uses the rng and sample0 its slot's forward was given.  logits_out (host,
 * (B,T,Vp) fp32) receives the logits when not NULL. */
double model_forward(struct model *m, const int32_t *tokens, const int32_t *targets, float dscale,
		     uint64_t rng, uint64_t sample0, float *logits_out, int *bad);
/* The same for any architecture's batch.  BERT returns lm loss + sop loss (Megatron's total:
 * the lm loss the mean over the loss-masked targets, the sop loss the mean over the samples),
 * each also in m->loss_lm, m->loss_sop; the gradient is of the total times dscale. */
double model_forward_batch(struct model *m, const struct model_batch *b, float dscale,
			   uint64_t rng, uint64_t sample0, float *logits_out, int *bad);
void model_backward(struct model *m);

/* The sequence length of the next micro-batches, 1..T (the curriculum's, curriculum.h): their
 * tokens and targets are (B, len) arrays, activations are used as (B, len, ...), positions are
 * 0..len-1.  0, or -1 when len is out of range.  Call between micro-batches only. */
int model_set_seq(struct model *m, int len);

void model_zero_grad(struct model *m);

/* ZeRO-1: DP rank r's chunk of bucket k, [lo, hi): the r-th of zero_dp equal parts, what a
 * reduce-scatter of the bucket leaves reduced on rank r.  A rank's shard is its chunk of every
 * bucket, so each tensor meets it in one range at most; under bnb the chunks and the 8-bit
 * tensors start on cfg.state_block boundaries, so each rank quantizes whole blocks, as one rank
 * would. */
void model_zero_chunk(const struct model *m, int k, int r, size_t *lo, size_t *hi);

/* Copies tensor i of an fp32 parameter-shaped device buffer (master, grads; the moments when
 * they are not sharded) to
 * the host, and host fp32 into one (model_put refreshes the working weights when buf is the
 * master copy). */
void model_get(const struct model *m, const float *buf, int i, float *out);
void model_put(struct model *m, float *buf, int i, const float *in);
/* After the master copy changed outside the optimizer: refresh the working weights. */
void model_sync_params(struct model *m);

/* FLOPs of one training step over `tokens` tokens, model FLOPs (6N + attention, no recompute),
 * for MFU; and Megatron's hardware-FLOPs formula for the TFLOPs field of the log line.  T5: the
 * same accounting over both stacks, the cross-attention and the logits, per encoder token
 * (model.c has the formula). */
double model_flops_per_token(const struct model_config *c);

/* A device buffer the model holds until model_free (act: one of the activations'), counted in
 * its memory: every device allocation of the model goes through here, for the peak the
 * start-up line and README report (the optimizer state's too: optim/state.h).  NULL when out
 * of memory. */
void *model_alloc(struct model *m, size_t bytes, int act);
/* Every stack's positions 0..T-1 (model_init; T5's stay so).  0, or -1 out of memory. */
int model_positions_init(struct model *m);
/* A transient device buffer (counted in the peak), for the step's rare host copies. */
void *model_alloc_transient(struct model *m, size_t bytes);
void model_free_transient(struct model *m, void *p, size_t bytes);

#endif
