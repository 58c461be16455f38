/* ops - the math of one GPT/BLOOM training step, behind one interface with two backends.
 *
 * model.c says what to compute; a backend says how.  cpu/ (fp32, OpenBLAS GEMMs, OpenMP loops)
 * and cuda/ (bf16 or fp16 activations and working weights, fp32 master weights and gradients,
 * cuBLAS GEMMs, hand-written kernels) fill the same table of function pointers, so the model code
 * never names a device and never says #ifdef.  The CUDA backend lives in a shared object that
 * train loads only when asked for a GPU (device.h), so a CPU-only machine needs no CUDA
 * libraries.
 *
 * Memory conventions, which both backends follow:
 * - every pointer is device memory of the backend (the CPU backend's device is the host);
 * - "act" buffers hold activations and activation gradients in the backend's activation type
 *   (act_size bytes: 4 on CPU, 2 for bf16 or fp16 on CUDA; act_type names it); they are passed
 *   as void *;
 * - "param" buffers are the working weights the forward reads, also in the activation type;
 * - gradients, master weights, Adam moments and statistics (layer-norm mean/rstd, attention
 *   log-sum-exp, per-token losses) are always fp32 (float *);
 * - token ids are int32 in device memory.
 * Shapes are written (B,T,C): batch, sequence, channels, with N = B*T rows where the batch
 * structure does not matter.  Weights are [out, in] as in PyTorch and Megatron (y = x W^T + b).
 * Gradient outputs named d<param> ACCUMULATE (+=), so micro-batches sum into one gradient;
 * activation gradients named d<act> are OVERWRITTEN unless the comment says they accumulate.
 *
 * Randomness (dropout) is counter-based: philox.h draws the mask of element i from
 * (seed, offset + i), so the backward pass regenerates the forward's mask instead of storing
 * it.  The counter is the element's global coordinate - its sample's place in the iteration's
 * global batch, its global head, its position - so any backend, any parallel layout and any
 * micro-batch size draw the same mask for the same element. */
#ifndef TRAIN_OPS_H
#define TRAIN_OPS_H

#include <stddef.h>
#include <stdint.h>

/* What an attention call needs besides its tensors: the positional bias, the document mask,
 * and where its dropout mask comes from.  Probability (b, h, i, j) of a micro-batch draws
 * philox_keep(seed, ((sample0 + b) * heads + head0 + h) * T * T + i * T + j, p). */
struct ops_attn {
	const float *slopes;       /* ALiBi slopes of the local heads (device), or NULL */
	const int32_t *kstart;     /* (B,T) device: the first key query i may see, or NULL (0) */
	float p;                   /* attention dropout */
	uint64_t seed;             /* the site's stream: step, layer */
	uint64_t sample0;          /* the micro-batch's first sample, counted in the global batch */
	int head0, heads;          /* this rank's first head; the model's head count */
	/* bidirectional (BERT's padding mask): query i of sample b sees keys [0, klen[b]) (klen
	 * device (B); NULL: T), whatever i - padded queries included, whose outputs no real
	 * position reads; kstart does not apply.  0: causal as above. */
	int bidir;
	const int32_t *klen;
};

/* One tensor's place in a multi-tensor AdamW launch (ops.adamw_multi) */
struct adam_seg {
	uint64_t a, s, n, first;   /* flat offset, moment offset, elements, elements before it */
	int32_t decay;             /* 1: weight decay applies */
	int32_t lr_mult;           /* 1: its lr is lr * the launch's lr_mult (--embedding-lr-mult:
				    * the word embedding), 0: lr */
};

/* --lamb-layerwise-noise on one tensor (ops.lamb_apply): local element i of the n gets
 * scale * z added to its update, z = philox_normal(key, g) with g its global (unsplit) index
 * in the tensor, g = (e / cols) * stride + base + e % cols for e = e0 + i (model_tensor_gmap:
 * a tensor-parallel shard draws exactly the full tensor's draws for its elements). */
struct lamb_noise {
	uint64_t key;
	uint64_t e0, base, cols, stride;
	float scale;               /* 0: no noise, nothing drawn */
};

/* One training step's scalars in device memory, so that a step needs no host synchronisation:
 * the host fills the inputs before it queues the step, the device accumulates the losses and the
 * gradients' sum of squares, decides the update (ops.step_decide) and the optimizer reads that
 * decision from here (ops.adamw_multi_step); the host reads the struct back once the next step
 * is queued (ops.step_fetch, ops.step_wait).  A step's outcome the host does not know yet - the
 * previous one's, still in flight - is the device's: the learning rate and Adam's bias
 * corrections come in two versions, for the previous step skipped [0] or taken [1]. */
struct ops_step {
	/* inputs, from the host */
	float lr_if[2];            /* the learning rate */
	float bc1_if[2], bc2_if[2];   /* 1 - b1^step, 1 - b2^step (rounded from double) */
	float loss_scale;          /* 1 without fp16 */
	float clip;                /* --clip-grad; 0: none */
	int32_t masked;            /* targets masked out (-1): counted by the cross-entropy, not bad */
	int32_t prev_pending;      /* 1: index the pairs above by the previous struct's `taken` */
	/* accumulated by the step */
	double loss[2];            /* sum over micro-batches of each one's mean lm and sop loss */
	double sumsq;              /* the gradients' sum of squares (loss-scaled) */
	int32_t bad;               /* target tokens outside the vocabulary (ops.xent_fwd_bwd's count) */
	int32_t overflow;          /* fp16: a gradient beyond fp16's range (ops.within_acc) */
	/* decided by ops.step_decide */
	int32_t taken;             /* 1: the optimizer updates; 0: skipped (non-finite loss or
				    * gradient norm, or bad targets) */
	float gscale;              /* the gradients' factor: 1/loss_scale, times the clip coefficient */
	float lr, bc1, bc2;        /* the chosen pair entries */
	/* several ranks: the stop this rank saw as it queued the step (signals_stop_code), then the
	 * world's maximum (the run's dist.h dev_reduce); no kernel reads it */
	int32_t stop;
};

struct ops {
	const char *name;          /* "cpu", "cuda" */
	const char *device;        /* human description: "2 threads, OpenBLAS 0.3.21", "NVIDIA H100 ..." */
	size_t act_size;           /* bytes per activation / working-weight element */
	const char *act_type;      /* and its type: "fp32" (cpu), "bf16" or "fp16" (cuda) */
	double peak_flops;         /* dense fp32 (cpu), bf16/fp16 (cuda) peak, FLOP/s; 0: unknown */

	/* --- memory --- */
	void *(*alloc)(size_t bytes);                      /* zeroed; NULL when out of memory */
	void (*free)(void *p);
	void (*zero)(void *p, size_t bytes);
	void (*to_device)(void *dst, const void *src, size_t bytes);
	void (*to_host)(void *dst, const void *src, size_t bytes);
	void (*copy)(void *dst, const void *src, size_t bytes);   /* device to device, queued */
	void (*sync)(void);                                /* wait for queued work */
	/* fp32 host/device <-> activation type */
	void (*f32_to_act)(void *dst, const float *src, size_t n);  /* both device pointers */
	void (*act_to_f32)(float *dst, const void *src, size_t n);

	/* --- forward / backward pairs --- */

	/* out(N,C) = wte[tok] (+ wpe[t] when wpe != NULL), t = row % T.  (B,T) tokens; a token of
	 * -1 (not in this tensor-parallel rank's vocabulary slice) gives a zero row. */
	void (*embed_fwd)(void *out, const int32_t *tok, const void *wte, const void *wpe,
			  int B, int T, int C);
	/* dwte[tok] += dout (rows of the token ids; -1 skipped), dwpe[t] += sum over b (when dwpe
	 * != NULL).  Must be deterministic: the same result whatever the thread count. */
	void (*embed_bwd)(float *dwte, float *dwpe, const void *dout, const int32_t *tok,
			  int B, int T, int C);

	/* out(N,C) = (inp - mean) * rstd * w + b; mean, rstd (N) saved for the backward. */
	void (*layernorm_fwd)(void *out, float *mean, float *rstd, const void *inp,
			      const void *w, const void *b, int N, int C, float eps);
	/* dinp(N,C) += ..., dw(C) += ..., db(C) += ... */
	void (*layernorm_bwd)(void *dinp, float *dw, float *db, const void *dout, const void *inp,
			      const void *w, const float *mean, const float *rstd, int N, int C);

	/* out(N,OC) = inp(N,IC) w(OC,IC)^T + bias(OC) (bias may be NULL) */
	void (*matmul_fwd)(void *out, const void *inp, const void *w, const void *bias,
			   int N, int IC, int OC);
	/* dinp(N,IC) = dout w (overwritten; skipped when dinp is NULL), dw(OC,IC) += dout^T inp,
	 * dbias(OC) += column sums of dout (skipped when NULL) */
	void (*matmul_bwd)(void *dinp, float *dw, float *dbias, const void *dout, const void *inp,
			   const void *w, int N, int IC, int OC);

	/* Self-attention over qkv(B,T,NH,3,HD) (Megatron's per-rank [heads, 3, head_dim]
	 * order: q, k, v of head h are adjacent) -> out(B,T,NH,HD).  scores = q.k / sqrt(HD)
	 * + slopes[h] * j for key j when k.slopes != NULL (ALiBi); causal: query i sees keys
	 * [k.kstart[b*T+i], i] (kstart NULL: [0, i]; --reset-attention-mask starts a row at its
	 * document); k.bidir: keys [0, k.klen[b]); softmax in fp32; attention dropout with probability k.p on the probabilities.
	 * lse(B,NH,T) keeps each row's log-sum-exp so the backward recomputes the probabilities
	 * instead of storing a (T,T) matrix per head. */
	void (*attention_fwd)(void *out, float *lse, const void *qkv, int B, int T, int NH, int HD,
			      struct ops_attn k);
	/* dqkv(B,T,NH,3,HD) overwritten */
	void (*attention_bwd)(void *dqkv, const void *dout, const void *qkv, const void *out,
			      const float *lse, int B, int T, int NH, int HD, struct ops_attn k);

	/* Cross-attention (T5's inter_attention): queries q(B,Tq,NH,HD) against keys and values
	 * kv(B,Tk,NH,2,HD) (Megatron's key_value projection: per head [k, v]) -> out(B,Tq,NH,HD),
	 * lse(B,NH,Tq).  Every query of sample b - padded ones too - sees keys [0, k.klen[b]) (klen
	 * NULL: Tk); k.bidir must be set; no ALiBi, no kstart.  Attention dropout of probability
	 * (b, h, i, j) draws philox_keep(seed, ((sample0 + b) * heads + head0 + h) * Tq * Tk +
	 * i * Tk + j, p): the self-attention's rule where Tq = Tk.  NULL: no cross-attention. */
	void (*xattn_fwd)(void *out, float *lse, const void *q, const void *kv, int B, int Tq,
			  int Tk, int NH, int HD, struct ops_attn k);
	/* dq(B,Tq,NH,HD) and dkv(B,Tk,NH,2,HD) overwritten */
	void (*xattn_bwd)(void *dq, void *dkv, const void *dout, const void *q, const void *kv,
			  const void *out, const float *lse, int B, int Tq, int Tk, int NH, int HD,
			  struct ops_attn k);

	/* The MLP's first linear layer and its GeLU in one pass, when a backend fuses them (NULL:
	 * the model calls matmul_fwd + gelu_fwd, and matmul_bwd + gelu_bwd): pre(N,OC) = inp w^T +
	 * bias, out = gelu(pre), pre kept for the backward; and dinp(N,IC) = (dout w) * gelu'(pre)
	 * with dw, dbias as matmul_bwd's - the GeLU's gradient applied to the product before it is
	 * stored.  Results may differ from the unfused pair by the rounding the fusion saves. */
	void (*matmul_gelu_fwd)(void *out, void *pre, const void *inp, const void *w,
				const void *bias, int N, int IC, int OC);
	void (*matmul_dgelu_bwd)(void *dinp, float *dw, float *dbias, const void *dout,
				 const void *inp, const void *w, const void *pre, int N, int IC,
				 int OC);

	/* GeLU, tanh approximation (Megatron's fused bias-gelu, HF BLOOM) */
	void (*gelu_fwd)(void *out, const void *inp, size_t n);
	void (*gelu_bwd)(void *dinp, const void *inp, const void *dout, size_t n); /* overwrites */

	/* GeLU exact, x * Phi(x) with erf (torch.nn.functional.gelu: BERT's LM head) */
	void (*gelu_erf_fwd)(void *out, const void *inp, size_t n);
	void (*gelu_erf_bwd)(void *dinp, const void *inp, const void *dout, size_t n); /* overwrites */
	/* tanh (BERT's pooler); the backward from the output: dinp = dout * (1 - out^2) */
	void (*tanh_fwd)(void *out, const void *inp, size_t n);
	void (*tanh_bwd)(void *dinp, const void *out, const void *dout, size_t n);   /* overwrites */

	/* Rows of a strided matrix (BERT's pooler reads position 0 of each sample: stride T*C):
	 * out(rows,C) = inp[r*stride .. r*stride+C); the backward dinp[r*stride + c] += dout(r,c) */
	void (*gather_rows)(void *out, const void *inp, int rows, int C, size_t stride);
	void (*scatter_add_rows)(void *dinp, const void *dout, int rows, int C, size_t stride);

	/* out = res + dropout(x, p): the residual add after attention and MLP (Megatron's
	 * bias-dropout-add; the bias is already in x).  Element i's mask is
	 * philox_keep(seed, off + i, p): off places the tensor in the iteration's whole batch. */
	void (*residual_fwd)(void *out, const void *res, const void *x, size_t n, float p,
			     uint64_t seed, uint64_t off);
	/* dx = dropout(dout) with the same mask (overwrites); dres is dout itself, which the model
	 * keeps accumulating in place. */
	void (*dropout_bwd)(void *dx, const void *dout, size_t n, float p, uint64_t seed,
			    uint64_t off);
	/* Fused pairs, when a backend has them (NULL: the model makes the two calls).
	 * residual_layernorm_fwd: residual_fwd(res_out, res, x, N*C, p, seed, off), then
	 * layernorm_fwd(ln_out, mean, rstd, res_out, w, b, N, C, eps), reading each row once.
	 * layernorm_bwd_dropout: layernorm_bwd(dinp, dw, db, dout, inp, w, mean, rstd, N, C), then
	 * dropout_bwd(dx, dinp, N*C, p, seed, off); dx may be dout.  Same results as the pairs. */
	void (*residual_layernorm_fwd)(void *res_out, void *ln_out, float *mean, float *rstd,
				       const void *res, const void *x, const void *w, const void *b,
				       int N, int C, float eps, float p, uint64_t seed, uint64_t off);
	void (*layernorm_bwd_dropout)(void *dinp, void *dx, float *dw, float *db, const void *dout,
				      const void *inp, const void *w, const float *mean,
				      const float *rstd, int N, int C, float p, uint64_t seed,
				      uint64_t off);
	/* x = dropout(x) in place (embedding dropout) */
	void (*dropout_fwd)(void *x, size_t n, float p, uint64_t seed, uint64_t off);
	/* acc += x (activation type), for the residual stream's gradient */
	void (*add)(void *acc, const void *x, size_t n);

	/* Cross-entropy of logits(N,Vp) over the first V columns (padded vocab columns are outside
	 * the softmax) against targets(N).  losses(N) = -log softmax[target].  Then overwrites the
	 * logits with dloss/dlogits * dscale (the padded columns get 0), where dscale is the
	 * gradient of the total loss with respect to each token's loss (1/(B*T*micro) times the
	 * loss scale).  A target outside [0,V) is counted in *bad (device int) and gets loss 0. */
	void (*xent_fwd_bwd)(float *losses, void *logits, const int32_t *targets, int N, int V,
			     int Vp, float dscale, int *bad);

	/* Vocab-parallel cross-entropy (TP > 1), in two halves around the TP collectives.  Each
	 * rank holds logits(N,Vp) for its slice of the vocabulary, of which the first Vvalid columns
	 * are real.  stats: per row the slice's max mx, sum of exp(z - mx) se, and the target's
	 * logit zt (0 when targets_local[r] is -1: another rank owns it).  grad: with lse(N) the
	 * global log-sum-exp, overwrites the logits with (softmax - onehot) * dscale (padded
	 * columns 0).  NULL in a backend without tensor parallelism. */
	void (*xent_stats)(float *mx, float *se, float *zt, const void *logits,
			   const int32_t *targets_local, int N, int Vvalid, int Vp);
	void (*xent_grad)(void *logits, const float *lse, const int32_t *targets_local, int N,
			  int Vvalid, int Vp, float dscale);
	/* The same with the statistics never leaving the device (the deferred step, TP > 1):
	 * after xent_stats and the group's max of mx into gmx (dist.h dev_reduce), xent_rescale
	 * brings this slice's se to it (se *= exp(mx - gmx); 0 where mx is -inf); after se and zt
	 * are summed over the group, xent_finish writes lse(N) = gmx + log(se) and the per-token
	 * losses lse - zt for the targets (global ids) in [0, V), lse +inf and loss 0 for the
	 * others, which it adds to *bad (device int) - the host path's arithmetic, in float.  lse
	 * may be gmx.  NULL where xent_stats is. */
	void (*xent_rescale)(float *se, const float *mx, const float *gmx, int N);
	void (*xent_finish)(float *losses, float *lse, const float *gmx, const float *se,
			    const float *zt, const int32_t *targets, int N, int V, int *bad);

	/* --profile: on 1 cudaProfilerStart, on 0 cudaProfilerStop (the range nsys
	 * --capture-range=cudaProfilerApi and the executor's profile record).  NULL: the backend
	 * has no profiler (cpu). */
	void (*profiler)(int on);

	/* --- optimizer --- */

	/* sum of squares of g(n), accumulated in double: the global gradient norm is the square
	 * root of the sum of these over all gradient buffers (and, later, ranks). */
	double (*sumsq)(const float *g, size_t n);
	/* 1 when every element of g(n) is finite and at most `limit` in magnitude (the fp16
	 * overflow check: limit 65504, fp16's largest finite value; INFINITY: just finite) */
	int (*all_within)(const float *g, size_t n, float limit);
	void (*scale)(float *x, float s, size_t n);
	/* AdamW as apex FusedAdam (adam_w_mode) / torch.optim.AdamW, on n elements:
	 *   g' = g * gscale (unscale + clip), m = b1 m + (1-b1) g', v = b2 v + (1-b2) g'^2,
	 *   master -= lr * (m/bc1 / (sqrt(v/bc2) + eps) + wd * master),
	 *   param = master in the activation type (skipped when param == master, the CPU case).
	 * bc1 = 1 - b1^step, bc2 = 1 - b2^step, step >= 1. */
	void (*adamw)(float *master, void *param, const float *g, float *m, float *v, size_t n,
		      float lr, float b1, float b2, float eps, float wd, float gscale, int step);
	/* AdamW over many tensors in one launch (NULL: the model calls adamw per tensor).  seg
	 * (device, nseg entries, ordered by `first`) places each tensor: its elements are master,
	 * param, g + a and m, v + s, n of them; decay 0 means wd is 0 for it; lr_mult 1 means its
	 * lr is lr * lr_mult (a float product); first is the sum of the n before it, total the sum
	 * of all.  Bit for bit what adamw gives tensor by tensor. */
	void (*adamw_multi)(float *master, void *param, const float *g, float *m, float *v,
			    const struct adam_seg *seg, int nseg, size_t total, float lr,
			    float lr_mult, float b1, float b2, float eps, float wd, float gscale,
			    int step);
	/* --optimizer lamb: apex FusedLAMB (adam_w_mode, grad averaging, bias correction
	 * bc = 1 - b^step computed in double, rounded to float), in two passes over a tensor.
	 * lamb_update: g' = g * gscale / clipdiv, m = b1 m + (1-b1) g', v = b2 v + (1-b2) g'^2,
	 * returns sum u^2 (double) of the update u = (m/bc1) / (sqrt(v/bc2) + eps) + wd * master.
	 * lamb_apply: u recomputed from m, v, master the same way; master -= ratio * (u + s z)
	 * with s z the noise of *nz (struct lamb_noise; NULL or scale 0: none, master -= ratio *
	 * u); param = master in the activation type (skipped when param == master).  Both NULL:
	 * no LAMB. */
	double (*lamb_update)(const float *master, const float *g, float *m, float *v, size_t n,
			      float b1, float b2, float eps, float wd, float gscale, float clipdiv,
			      int step);
	void (*lamb_apply)(float *master, void *param, const float *m, const float *v, size_t n,
			   float b1, float b2, float eps, float wd, float ratio, int step,
			   const struct lamb_noise *nz);
	/* --optimizer sgd: torch.optim.SGD (dampening 0, no Nesterov): d = g * gscale + wd *
	 * master; buf = d on the first step (first != 0), else momentum buf + d; master -= lr buf
	 * (momentum 0: lr d, buf untouched); param as above.  NULL: no SGD. */
	void (*sgd)(float *master, void *param, const float *g, float *buf, size_t n, float lr,
		    float momentum, float wd, float gscale, int first);
	/* --use-bnb-optimizer (bnb.h has the exact update).  adam8bit: bitsandbytes' block-wise
	 * 8-bit Adam on n elements that start at a block boundary of their tensor; codes c1/c2
	 * (uint8, n), absmax1/absmax2 (one per BNB_BLOCK elements, the last block may be short),
	 * qmap the signed then the unsigned 256-value map.  adam32: bitsandbytes' 32-bit Adam
	 * (eps scaled by sqrt(bc2), decoupled decay after the update), for the word embedding and
	 * tensors under BNB_MIN_8BIT elements.  NULL in a backend without them (train refuses
	 * --use-bnb-optimizer there). */
	void (*adam8bit)(float *master, void *param, const float *g, uint8_t *c1, uint8_t *c2,
			 float *absmax1, float *absmax2, size_t n, const float *qmap, float lr,
			 float b1, float b2, float eps, float wd, float gscale, int step);
	void (*adam32)(float *master, void *param, const float *g, float *m, float *v, size_t n,
		       float lr, float b1, float b2, float eps, float wd, float gscale, int step);

	/* --- step scalars on the device (struct ops_step); all NULL in a backend without them
	 * (the CPU's, whose device is the host: reading a value back costs it nothing), and train
	 * then reads every value at once --- */
	/* *acc += kept ? (sum of losses(N), in double, in a fixed order) / kept : 0 */
	void (*loss_acc)(double *acc, const float *losses, int N, int kept);
	/* *acc += sum of squares of g(n), as sumsq computes it */
	void (*sumsq_acc)(double *acc, const float *g, size_t n);
	/* *flag = 1 when some element of g(n) is not finite or beyond limit (never cleared): the
	 * fp16 overflow check of all_within, left on the device */
	void (*within_acc)(int32_t *flag, const float *g, size_t n, float limit);
	/* s->bad = *bad - s->masked; the norm = sqrt(s->sumsq) / s->loss_scale; taken = the loss
	 * and the norm finite, no overflow and no bad target; gscale = 1/loss_scale times min(1,
	 * clip / (norm + 1e-6)) when clip > 0 (optim.c's arithmetic); lr, bc1, bc2 = entry
	 * prev->taken of their pairs when s->prev_pending, else entry 0 */
	void (*step_decide)(struct ops_step *s, const struct ops_step *prev, const int *bad);
	/* adamw_multi with lr, gscale and the bias corrections from s, doing nothing unless
	 * s->taken */
	void (*adamw_multi_step)(float *master, void *param, const float *g, float *m, float *v,
				 const struct adam_seg *seg, int nseg, size_t total,
				 float lr_mult, float b1, float b2, float eps, float wd,
				 const struct ops_step *s);
	/* queue a copy of *s into host buffer `slot` (0 or 1) and mark it; step_wait(slot) waits
	 * for that copy alone (not for work queued after it) and returns the buffer */
	void (*step_fetch)(const struct ops_step *s, int slot);
	const struct ops_step *(*step_wait)(int slot);

	/* --- a step as a CUDA graph (train --cuda-graph); NULL: the backend has none ---
	 * graph_mode(OPS_GRAPH_SIZE, -): the ops run as usual and to_device records its copies'
	 *   destinations and sizes in order (a warm-up step: the graph's host inputs);
	 * graph_mode(OPS_GRAPH_CAPTURE, slot): the ops are captured into graph slot (0 or 1), not
	 *   run; to_device's k-th copy goes through entry k of the slot's pinned staging;
	 * graph_mode(OPS_GRAPH_FILL, slot): the ops do nothing but fill the slot's staging: the host
	 *   walks the same step to compute its inputs (tokens, targets, the step's struct);
	 * graph_launch(slot) ends a capture or a fill and queues graph slot.  A copy that differs
	 * from the recorded ones in number, destination or size, or a capture the runtime refuses
	 * (a host synchronisation or an allocation inside the step), ends the program (exit 3). */
	void (*graph_mode)(int mode, int slot);
	void (*graph_launch)(int slot);
};
enum { OPS_GRAPH_OFF, OPS_GRAPH_SIZE, OPS_GRAPH_CAPTURE, OPS_GRAPH_FILL };

/* The activation type asked of a backend that has a choice: the CUDA backend computes in bf16
 * (OPS_BF16) or IEEE fp16 (OPS_FP16, train --fp16); the CPU backend in fp32 either way. */
enum ops_prec { OPS_BF16 = 0, OPS_FP16 = 1 };

/* The symbols the CUDA plugin (train-cuda.so) exports. */
typedef const struct ops *(*ops_cuda_fn)(int device, int prec, char *err, size_t errlen);
#define OPS_CUDA_SYMBOL "lmtk_ops_cuda"
typedef int (*ops_cuda_count_fn)(void);
#define OPS_CUDA_COUNT_SYMBOL "lmtk_cuda_devices"

#endif
