/* model - see model.h.  Forward and backward of one micro-batch, over the ops interface.
 *
 * The forward keeps every activation the backward needs; the backward walks the layers in
 * reverse with one residual-stream gradient (dres) that each block's layer-norm backward
 * accumulates into, exactly as the residual connections add.
 *
 * Activation checkpointing (cfg.ckpt_layers = n > 0, Megatron's --checkpoint-activations with
 * --checkpoint-num-layers n): the layers of a stage are cut into chunks of n from its first
 * layer.  A slot keeps only each chunk's output (the next chunk's input; the last one is the
 * stage's output); every other layer activation lives in one workspace of n layers that all
 * slots share, since a forward or a backward runs to its end before the next starts, 1F1B
 * included.  The backward recomputes a chunk from its input into the workspace - layer_fwd,
 * the very code of the forward, with the slot's dropout key and place in the batch, so the
 * same masks and the same bits - then runs its layers' backward.  Under TP the recomputation
 * repeats the forward's all-reduces, on every rank in the same order.  The embedding, the final
 * layer norm and the logits are not recomputed (Megatron checkpoints the transformer layers). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/model/model.h"
#include "train/optim/bnb.h"
#include "train/model/philox.h"

/* Activations for micro-batch (B,T).  act type unless noted; N = B*T. */
struct model_acts {
	void *emb;                  /* (N,C) word embeddings before the embedding LN (embed_ln) */
	float *eln_mean, *eln_rstd; /* (N) */
	void *encoded;              /* (N,C) the residual stream entering layer 0 */
	struct {
		void *ln1, *qkv, *atty, *attproj, *res2, *ln2, *fch, *fchg, *fcproj, *res3;
		float *ln1_mean, *ln1_rstd, *lse, *ln2_mean, *ln2_rstd;
	} *l;
	void *lnf, *logits;         /* (N,C), (N,Vp) */
	float *lnf_mean, *lnf_rstd;
	/* gradient scratch */
	void *dres, *dbtc, *dbtc2, *dqkv, *dbtf;
	int32_t *tokens, *tokens_local;   /* (B,T) device: the embedding backward needs this slot's */
	int32_t *positions;         /* (B,T) device: t, or t - its document's start (reset_position_ids) */
	int32_t *kstart;            /* (B,T) device: the first key each query sees (reset_attention_mask) */
	uint64_t rng, sample0;      /* the forward's dropout key and place in the batch, for the backward */
	void *act_block;
	float *f32_block;
};

int model_padded_vocab(int vocab, int divisible_by, int tp, int pad_to)
{
	if (pad_to > 0)
		return pad_to;
	int mult = (divisible_by > 0 ? divisible_by : 1) * (tp > 0 ? tp : 1);
	return (vocab + mult - 1) / mult * mult;
}

static void slopes_pow2(int n, double *out)
{
	double start = pow(2.0, -8.0 / n);
	for (int h = 0; h < n; h++)
		out[h] = pow(start, h + 1);
}

void model_alibi_slopes(int n, float *out)
{
	int p = 1;
	while (p * 2 <= n)
		p *= 2;
	double a[p], b[2 * p];
	slopes_pow2(p, a);
	for (int h = 0; h < p; h++)
		out[h] = (float)a[h];
	if (p < n) {
		slopes_pow2(2 * p, b);
		for (int h = 0; h < n - p; h++)
			out[p + h] = (float)b[2 * h];
	}
}

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

static int add_tensor(struct model *m, const char *name, int64_t d0, int64_t d1, int decay,
		      enum split split, float init)
{
	struct model_tensor *t = &m->tensors[m->ntensors];
	int tp = m->cfg.tp;
	snprintf(t->name, sizeof t->name, "%s", name);
	t->ndim = d1 ? 2 : 1;
	t->shape[0] = d0;
	t->shape[1] = d1;
	t->decay = decay;
	t->split = split;
	t->init = init;
	t->numel = (size_t)d0 * (d1 ? d1 : 1);
	if (split != SPLIT_NONE)
		t->numel /= tp;
	t->offset = m->nparams;
	m->nparams += t->numel;
	return m->ntensors++;
}

void *model_param(const struct model *m, int i)
{
	return (char *)m->params + m->tensors[i].offset * m->ops->act_size;
}
float *model_grad(const struct model *m, int i) { return m->grads + m->tensors[i].offset; }
float *model_master(const struct model *m, int i) { return m->master + m->tensors[i].offset; }

int model_layer_tensor(const struct model *m, int layer, int which)
{
	return m->layer0 + layer * LAYER_TENSORS + which;
}

int model_find(const struct model *m, const char *name)
{
	for (int i = 0; i < m->ntensors; i++)
		if (strcmp(m->tensors[i].name, name) == 0)
			return i;
	return -1;
}

static void build_table(struct model *m)
{
	const struct model_config *c = &m->cfg;
	float std = c->init_std, out_std = c->init_std / sqrtf(2.0f * c->layers);
	char n[64];
	m->ntensors = 0;
	m->nparams = 0;
	m->wte = m->wpe = m->eln_w = m->eln_b = m->lnf_w = m->lnf_b = -1;
	if (m->first) {
		m->wte = add_tensor(m, "word_embeddings.weight", c->padded_vocab, c->hidden, 1,
				    SPLIT_VOCAB, std);
		m->wpe = c->alibi ? -1 : add_tensor(m, "position_embeddings.weight", c->max_pos,
						    c->hidden, 1, SPLIT_NONE, std);
		if (c->embed_ln) {
			m->eln_w = add_tensor(m, "embed_layernorm.weight", c->hidden, 0, 0, SPLIT_NONE, -1);
			m->eln_b = add_tensor(m, "embed_layernorm.bias", c->hidden, 0, 0, SPLIT_NONE, 0);
		}
	}
	m->layer0 = m->ntensors;
	for (int l = m->l0; l < m->l0 + m->nl; l++) {
		static const struct {
			const char *name;
			int d0, d1;     /* 1 C, 3 3C, 4 F */
			int decay;
			enum split split;
			int init;       /* 0 zero, -1 one, 1 std, 2 output std */
		} spec[LAYER_TENSORS] = {
			{"input_layernorm.weight", 1, 0, 0, SPLIT_NONE, -1},
			{"input_layernorm.bias", 1, 0, 0, SPLIT_NONE, 0},
			{"attention.query_key_value.weight", 3, 1, 1, SPLIT_COLUMN, 1},
			{"attention.query_key_value.bias", 3, 0, 0, SPLIT_COLUMN, 0},
			{"attention.dense.weight", 1, 1, 1, SPLIT_ROW, 2},
			{"attention.dense.bias", 1, 0, 0, SPLIT_NONE, 0},
			{"post_attention_layernorm.weight", 1, 0, 0, SPLIT_NONE, -1},
			{"post_attention_layernorm.bias", 1, 0, 0, SPLIT_NONE, 0},
			{"mlp.dense_h_to_4h.weight", 4, 1, 1, SPLIT_COLUMN, 1},
			{"mlp.dense_h_to_4h.bias", 4, 0, 0, SPLIT_COLUMN, 0},
			{"mlp.dense_4h_to_h.weight", 1, 4, 1, SPLIT_ROW, 2},
			{"mlp.dense_4h_to_h.bias", 1, 0, 0, SPLIT_NONE, 0},
		};
		for (int k = 0; k < LAYER_TENSORS; k++) {
			int64_t dim[5] = {0, c->hidden, 0, 3 * (int64_t)c->hidden, c->ffn};
			float init = spec[k].init == 1 ? std : spec[k].init == 2 ? out_std : spec[k].init;
			snprintf(n, sizeof n, "layers.%d.%s", l, spec[k].name);
			int i = add_tensor(m, n, dim[spec[k].d0], dim[spec[k].d1], spec[k].decay,
					   spec[k].split, init);
			m->tensors[i].qkv = k == QKV_W || k == QKV_B;
		}
	}
	if (m->last) {
		m->lnf_w = add_tensor(m, "final_layernorm.weight", c->hidden, 0, 0, SPLIT_NONE, -1);
		m->lnf_b = add_tensor(m, "final_layernorm.bias", c->hidden, 0, 0, SPLIT_NONE, 0);
		if (!m->first)   /* the tied output layer: a copy, kept equal by summing gradients */
			m->wte = add_tensor(m, "word_embeddings.weight", c->padded_vocab, c->hidden, 1,
					    SPLIT_VOCAB, std);
	}
}

uint64_t model_hash_name(const char *name)
{
	return fnv1a(name);
}

void model_tensor_gmap(const struct model *m, int i, uint64_t *base, uint64_t *cols,
		       uint64_t *stride)
{
	const struct model_tensor *t = &m->tensors[i];
	int tp = m->cfg.tp, r = m->cfg.tp_rank;
	*base = 0;
	*cols = t->numel ? t->numel : 1;
	*stride = 0;
	switch (t->split) {
	case SPLIT_NONE:
		break;
	case SPLIT_COLUMN:
	case SPLIT_VOCAB:   /* dim 0 split: the rank's rows are one contiguous block */
		*base = (uint64_t)r * t->numel;
		break;
	case SPLIT_ROW:     /* dim 1 split: each row holds the rank's block of columns */
		*cols = (uint64_t)t->shape[1] / tp;
		*stride = (uint64_t)t->shape[1];
		*base = (uint64_t)r * *cols;
		break;
	}
}


void model_init_weights(struct model *m)
{
	size_t most = 0;
	for (int i = 0; i < m->ntensors; i++)
		most = m->tensors[i].numel > most ? m->tensors[i].numel : most;
	float *buf = malloc(most * sizeof *buf);
	if (!buf)
		abort();
	for (int i = 0; i < m->ntensors; i++) {
		const struct model_tensor *t = &m->tensors[i];
		uint64_t key = philox_mix(m->cfg.seed, fnv1a(t->name)), gb, gc, gs;
		model_tensor_gmap(m, i, &gb, &gc, &gs);
		if (m->cfg.bnb && i == m->wte) {
			/* StableEmbedding: xavier_uniform_ on the full [Vp, C] (fan_out counts every TP
			 * rank's rows), drawn per global element like the normal inits */
			double a = sqrt(6.0 / ((double)m->cfg.padded_vocab + (double)m->cfg.hidden));
			for (size_t e = 0; e < t->numel; e++) {
				uint32_t u = philox_u32(key, philox_gindex(e, gb, gc, gs));
				buf[e] = (float)(a * (2.0 * ((double)u + 0.5) / 4294967296.0 - 1.0));
			}
			model_put(m, m->master, i, buf);
			continue;
		}
		for (size_t e = 0; e < t->numel; e++)
			buf[e] = t->init > 0
				 ? (float)(t->init * philox_normal(key, philox_gindex(e, gb, gc, gs)))
				 : t->init < 0 ? 1.0f : 0.0f;
		model_put(m, m->master, i, buf);
	}
	free(buf);
}

void model_get(const struct model *m, const float *buf, int i, float *out)
{
	m->ops->to_host(out, buf + m->tensors[i].offset, m->tensors[i].numel * sizeof *out);
}

void model_put(struct model *m, float *buf, int i, const float *in)
{
	const struct model_tensor *t = &m->tensors[i];
	m->ops->to_device(buf + t->offset, in, t->numel * sizeof *in);
	if (buf == m->master && m->params != (void *)m->master)
		m->ops->f32_to_act(model_param(m, i), buf + t->offset, t->numel);
}

/* 1 when tensor i keeps 8-bit state: bnb, at least BNB_MIN_8BIT local elements, not the word
 * embedding (StableEmbedding's state stays fp32: GlobalOptimManager's optim_bits 32) */
static int tensor_q8(const struct model *m, int i)
{
	return m->cfg.bnb && i != m->wte && bnb_is_8bit(m->tensors[i].numel);
}

static size_t zero_cut(const struct model *m, size_t x)
{
	for (int i = 0; i < m->ntensors; i++) {
		const struct model_tensor *t = &m->tensors[i];
		if (x > t->offset && x < t->offset + t->numel && tensor_q8(m, i))
			return t->offset + (x - t->offset) / BNB_BLOCK * BNB_BLOCK;
	}
	return x;
}

void model_zero_range(const struct model *m, int n, int r, size_t *lo, size_t *hi)
{
	*lo = zero_cut(m, m->nparams * (size_t)r / (size_t)n);
	*hi = zero_cut(m, m->nparams * (size_t)(r + 1) / (size_t)n);
}

void model_opt_layout(const struct model *m, size_t lo, size_t hi, struct model_ostate *ost,
		      size_t *n32, size_t *n8, size_t *nblk)
{
	*n32 = *n8 = *nblk = 0;
	for (int i = 0; i < m->ntensors; i++) {
		const struct model_tensor *t = &m->tensors[i];
		size_t a = t->offset > lo ? t->offset : lo, b = t->offset + t->numel;
		b = b < hi ? b : hi;
		struct model_ostate o = {.lo = a, .hi = a < b ? b : a, .q8 = tensor_q8(m, i)};
		if (o.q8) {
			o.s = *n8;
			o.blk = *nblk;
			*n8 += o.hi - o.lo;
			*nblk += bnb_blocks(o.hi - o.lo);
		} else {
			o.s = *n32;
			*n32 += o.hi - o.lo;
		}
		if (ost)
			ost[i] = o;
	}
}

void model_sync_params(struct model *m)
{
	if (m->params != (void *)m->master)
		m->ops->f32_to_act(m->params, m->master, m->nparams);
}

void model_zero_grad(struct model *m)
{
	m->ops->zero(m->grads, m->nparams * sizeof *m->grads);
}

void model_zero_optim(struct model *m)
{
	size_t n32, n8, nblk;
	model_opt_layout(m, m->opt_lo, m->opt_hi, NULL, &n32, &n8, &nblk);
	m->ops->zero(m->adam_m, n32 * sizeof(float));
	m->ops->zero(m->adam_v, n32 * sizeof(float));
	if (m->cfg.bnb) {
		m->ops->zero(m->q1, n8);
		m->ops->zero(m->q2, n8);
		m->ops->zero(m->absmax1, nblk * sizeof(float));
		m->ops->zero(m->absmax2, nblk * sizeof(float));
	}
}

/* What a block of activations holds: a micro-batch's slot, keeping every layer's activations
 * or (checkpointing) only each chunk's output; or the recompute workspace, ckpt_layers layers. */
enum carve_kind { CARVE_SLOT, CARVE_WS };

static int chunk_end(const struct model *m, int l)
{
	int n = m->cfg.ckpt_layers;
	return (l + 1) % n == 0 || l == m->nl - 1;
}

/* Carves the activation blocks: sizes first (ptr == NULL), then pointers.  *layer_bytes gets
 * the part --dry-run's activation figure counts (layers, chunk outputs, logits). */
static void carve(struct model *m, struct model_acts *a, enum carve_kind kind, size_t *act_elems,
		  size_t *f32_elems, size_t *layer_bytes)
{
	const struct model_config *c = &m->cfg;
	size_t N = (size_t)m->B * m->T, C = c->hidden, F = c->ffn / c->tp, C3 = 3 * C / c->tp;
	size_t Cl = C / c->tp, NHl = c->heads / c->tp, Vp = c->padded_vocab / c->tp;
	size_t na = 0, nf = 0, as = m->ops->act_size, la = 0, lf = 0;
	char *ab = a->act_block;
	float *fb = a->f32_block;
	int ck = c->ckpt_layers > 0;
	int nl = kind == CARVE_WS ? (c->ckpt_layers < m->nl ? c->ckpt_layers : m->nl) : m->nl;
#define A(p, n) (p = ab ? (void *)(ab + na * as) : NULL, na += (n))
#define F32(p, n) (p = fb ? fb + nf : NULL, nf += (n))
	if (kind == CARVE_SLOT) {
		if (c->embed_ln && m->first) {
			A(a->emb, N * C);
			F32(a->eln_mean, N);
			F32(a->eln_rstd, N);
		}
		A(a->encoded, N * C);
	}
	la = na;
	lf = nf;
	for (int l = 0; l < nl; l++) {
		if (kind == CARVE_SLOT && ck) {   /* the chunk outputs only: the next chunk's input */
			if (chunk_end(m, l))
				A(a->l[l].res3, N * C);
			continue;
		}
		A(a->l[l].ln1, N * C);
		F32(a->l[l].ln1_mean, N);
		F32(a->l[l].ln1_rstd, N);
		A(a->l[l].qkv, N * C3);
		A(a->l[l].atty, N * Cl);
		F32(a->l[l].lse, (size_t)m->B * NHl * m->T);
		A(a->l[l].attproj, N * C);
		A(a->l[l].res2, N * C);
		A(a->l[l].ln2, N * C);
		F32(a->l[l].ln2_mean, N);
		F32(a->l[l].ln2_rstd, N);
		A(a->l[l].fch, N * F);
		A(a->l[l].fchg, N * F);
		A(a->l[l].fcproj, N * C);
		A(a->l[l].res3, N * C);
	}
	la = na - la;
	lf = nf - lf;
	if (kind == CARVE_SLOT) {
		if (m->last) {
			A(a->lnf, N * C);
			F32(a->lnf_mean, N);
			F32(a->lnf_rstd, N);
			A(a->logits, N * Vp);
			la += N * Vp;
		}
		A(a->dres, N * C);
		A(a->dbtc, N * C);
		A(a->dbtc2, N * C);
		A(a->dqkv, N * C3);
		A(a->dbtf, N * F);
	}
#undef A
#undef F32
	*act_elems = na;
	*f32_elems = nf;
	*layer_bytes = la * as + lf * sizeof(float);
}

/* Checkpointing: a slot's layers work in the workspace, but for the chunk outputs it keeps. */
static void link_workspace(struct model *m, struct model_acts *a)
{
	int n = m->cfg.ckpt_layers;
	for (int l = 0; l < m->nl; l++) {
		void *keep = a->l[l].res3;
		a->l[l] = m->ws->l[l % n];
		if (chunk_end(m, l))
			a->l[l].res3 = keep;
	}
}

/* Every device allocation of the model goes through here, for the peak the start-up line and
 * README report. */
static void *dalloc(struct model *m, size_t bytes, int act)
{
	void *p = m->ops->alloc(bytes);
	if (!p)
		return NULL;
	m->mem_now += bytes;
	m->mem_act += act ? bytes : 0;
	if (m->mem_now > m->mem_peak)
		m->mem_peak = m->mem_now;
	return p;
}

int model_init(struct model *m, const struct model_config *cfg, const struct ops *ops, int B,
	       int T, char *err, size_t errlen)
{
	const struct model_config *c = cfg;
	memset(m, 0, sizeof *m);
	m->cfg = *cfg;
	if (m->cfg.bnb)   /* StableEmbedding: the layer norm after the lookup */
		m->cfg.embed_ln = 1;
	m->ops = ops;
	m->B = B;
	m->T = T;
	if (c->tp < 1)
		m->cfg.tp = 1;
	if (c->layers < 1 || c->hidden < 1 || c->heads < 1 || c->ffn < 1 || c->vocab < 1 || B < 1 ||
	    T < 1) {
		snprintf(err, errlen, "model: layers, hidden size, heads, ffn size, vocabulary, "
			 "micro-batch and sequence length must all be positive");
		return -1;
	}
	if (c->hidden % c->heads) {
		snprintf(err, errlen, "--hidden-size %d is not divisible by --num-attention-heads %d",
			 c->hidden, c->heads);
		return -1;
	}
	{
		int vl = c->padded_vocab / m->cfg.tp;
		m->vocab_start = m->cfg.tp_rank * vl;
		m->vocab_valid = c->vocab - m->vocab_start;
		m->vocab_valid = m->vocab_valid < 0 ? 0 : m->vocab_valid > vl ? vl : m->vocab_valid;
	}
	if (m->cfg.tp > 1 && (!ops->xent_stats || !ops->xent_grad)) {
		snprintf(err, errlen, "the %s backend has no tensor parallelism in this build: use "
			 "--tensor-model-parallel-size 1", ops->name);
		return -1;
	}
	if (c->heads % m->cfg.tp || c->ffn % m->cfg.tp || c->padded_vocab % m->cfg.tp) {
		snprintf(err, errlen, "heads (%d), ffn size (%d) and padded vocabulary (%d) must be "
			 "divisible by the tensor-parallel size %d", c->heads, c->ffn,
			 c->padded_vocab, m->cfg.tp);
		return -1;
	}
	if (c->padded_vocab < c->vocab) {
		snprintf(err, errlen, "padded vocabulary %d is smaller than the vocabulary %d",
			 c->padded_vocab, c->vocab);
		return -1;
	}
	if (!c->alibi && T > c->max_pos) {
		snprintf(err, errlen, "--seq-length %d exceeds --max-position-embeddings %d", T,
			 c->max_pos);
		return -1;
	}
	if (m->cfg.pp <= 1) {
		m->cfg.pp = 1;
		m->cfg.pp_rank = 0;
		m->cfg.stage_l0 = 0;
		m->cfg.stage_nl = c->layers;
	}
	if (m->cfg.slots < 1)
		m->cfg.slots = 1;
	if (m->cfg.ckpt_layers < 0)
		m->cfg.ckpt_layers = 0;
	m->first = m->cfg.pp_rank == 0;
	m->last = m->cfg.pp_rank == m->cfg.pp - 1;
	m->l0 = m->cfg.stage_l0;
	m->nl = m->cfg.stage_nl;
	m->tensors = calloc(7 + (size_t)m->nl * LAYER_TENSORS, sizeof *m->tensors);
	m->act = calloc(m->cfg.slots, sizeof *m->act);
	if (!m->tensors || !m->act)
		goto oom;
	for (int k = 0; k < m->cfg.slots; k++)
		if (!(m->act[k].l = calloc(m->nl ? m->nl : 1, sizeof *m->act[k].l)))
			goto oom;
	build_table(m);

	size_t P = m->nparams * sizeof(float), n32, n8, nblk;
	m->opt_lo = 0;
	m->opt_hi = m->nparams;
	if (m->cfg.zero_dp > 1)
		model_zero_range(m, m->cfg.zero_dp, m->cfg.zero_rank, &m->opt_lo, &m->opt_hi);
	if (!(m->ost = calloc(m->ntensors ? m->ntensors : 1, sizeof *m->ost)))
		goto oom;
	model_opt_layout(m, m->opt_lo, m->opt_hi, m->ost, &n32, &n8, &nblk);
	size_t PO = n32 * sizeof(float);
	m->master = dalloc(m, P, 0);
	m->grads = dalloc(m, P, 0);
	m->adam_m = dalloc(m, PO ? PO : sizeof(float), 0);
	m->adam_v = dalloc(m, PO ? PO : sizeof(float), 0);
	if (!m->master || !m->grads || !m->adam_m || !m->adam_v)
		goto oom;
	m->opt_bytes = 2 * PO;
	if (m->cfg.bnb) {
		float map[512];
		m->q1 = dalloc(m, n8 ? n8 : 1, 0);
		m->q2 = dalloc(m, n8 ? n8 : 1, 0);
		m->absmax1 = dalloc(m, nblk ? nblk * sizeof(float) : sizeof(float), 0);
		m->absmax2 = dalloc(m, nblk ? nblk * sizeof(float) : sizeof(float), 0);
		m->qmap = dalloc(m, sizeof map, 0);
		if (!m->q1 || !m->q2 || !m->absmax1 || !m->absmax2 || !m->qmap)
			goto oom;
		bnb_dynamic_map(1, map);
		bnb_dynamic_map(0, map + 256);
		ops->to_device(m->qmap, map, sizeof map);
		m->opt_bytes += 2 * n8 + 2 * nblk * sizeof(float);
	}
	if (!m->cfg.bnb && ops->adamw_multi) {   /* ost as one launch's table */
		struct adam_seg *sg = calloc(m->ntensors ? m->ntensors : 1, sizeof *sg);
		if (!sg)
			goto oom;
		for (int i = 0; i < m->ntensors; i++) {
			const struct model_ostate *os = &m->ost[i];
			if (os->hi > os->lo)
				sg[m->naseg++] = (struct adam_seg){os->lo, os->s, os->hi - os->lo,
								   m->aseg_total, m->tensors[i].decay,
								   i == m->wte};
			m->aseg_total += os->hi - os->lo;
		}
		if (m->naseg && !(m->aseg = dalloc(m, m->naseg * sizeof *sg, 0))) {
			free(sg);
			goto oom;
		}
		if (m->naseg)
			ops->to_device(m->aseg, sg, m->naseg * sizeof *sg);
		free(sg);
	}
	m->params = ops->act_size == sizeof(float) ? (void *)m->master
						   : dalloc(m, m->nparams * ops->act_size, 0);
	if (!m->params)
		goto oom;

	size_t na = 0, nf = 0, lb = 0;
	size_t NB = (size_t)B * T * sizeof(int32_t);
	m->mem_act_layers = 0;
	if (m->cfg.ckpt_layers && m->nl) {   /* one recompute workspace for every slot */
		int wl = m->cfg.ckpt_layers < m->nl ? m->cfg.ckpt_layers : m->nl;
		if (!(m->ws = calloc(1, sizeof *m->ws)) || !(m->ws->l = calloc(wl, sizeof *m->ws->l)))
			goto oom;
		carve(m, m->ws, CARVE_WS, &na, &nf, &lb);
		m->ws->act_block = dalloc(m, na * ops->act_size, 1);
		m->ws->f32_block = dalloc(m, nf * sizeof(float), 1);
		if (!m->ws->act_block || !m->ws->f32_block)
			goto oom;
		carve(m, m->ws, CARVE_WS, &na, &nf, &lb);
		m->mem_act_layers += lb;
	}
	for (int k = 0; k < m->cfg.slots; k++) {
		struct model_acts *a = &m->act[k];
		carve(m, a, CARVE_SLOT, &na, &nf, &lb);
		a->act_block = dalloc(m, na * ops->act_size, 1);
		a->f32_block = dalloc(m, nf * sizeof(float), 1);
		a->tokens = dalloc(m, NB, 1);
		a->tokens_local = dalloc(m, NB, 1);
		a->positions = dalloc(m, NB, 1);
		a->kstart = dalloc(m, NB, 1);
		if (!a->act_block || !a->f32_block || !a->tokens || !a->tokens_local ||
		    !a->positions || !a->kstart)
			goto oom;
		carve(m, a, CARVE_SLOT, &na, &nf, &lb);
		m->mem_act_layers += lb;
		if (m->ws)
			link_workspace(m, a);
	}
	m->tokens = dalloc(m, (size_t)B * T * sizeof *m->tokens, 1);
	m->targets = dalloc(m, (size_t)B * T * sizeof *m->targets, 1);
	m->losses = dalloc(m, (size_t)B * T * sizeof *m->losses, 1);
	m->bad_targets = dalloc(m, sizeof *m->bad_targets, 1);
	m->tokens_local = dalloc(m, (size_t)B * T * sizeof *m->tokens_local, 1);
	m->targets_local = dalloc(m, (size_t)B * T * sizeof *m->targets_local, 1);
	m->dev_stats = dalloc(m, (size_t)4 * B * T * sizeof *m->dev_stats, 1);
	m->host_ids = malloc((size_t)B * T * sizeof *m->host_ids);
	m->host_tgt = malloc((size_t)B * T * sizeof *m->host_tgt);
	m->host_stats = malloc((size_t)4 * B * T * sizeof *m->host_stats);
	if (!m->tokens_local || !m->targets_local || !m->dev_stats || !m->host_ids || !m->host_stats ||
	    !m->host_tgt)
		goto oom;
	if (!m->tokens || !m->targets || !m->losses ||
	    !m->bad_targets)
		goto oom;
	m->acts_bytes = m->mem_act;

	m->Tcur = 0;
	if (model_set_seq(m, T) < 0)
		goto oom;
	if (c->alibi) {
		int nh = c->heads / m->cfg.tp;
		float all[c->heads];
		model_alibi_slopes(c->heads, all);
		if (!(m->slopes = dalloc(m, nh * sizeof *m->slopes, 0)))
			goto oom;
		ops->to_device(m->slopes, all + m->cfg.tp_rank * nh, nh * sizeof *m->slopes);
	}
	return 0;
oom:
	snprintf(err, errlen, "out of memory on the %s device: %zu parameters (x4 fp32 buffers) and "
		 "activations for micro-batch %d x %d; try a smaller --micro-batch-size",
		 ops->name, m->nparams, B, T);
	model_free(m);
	return -1;
}

void model_free(struct model *m)
{
	const struct ops *o = m->ops;
	if (!o)
		return;
	if (m->params != (void *)m->master)
		o->free(m->params);
	o->free(m->master);
	o->free(m->grads);
	o->free(m->adam_m);
	o->free(m->adam_v);
	if (m->q1) {
		o->free(m->q1);
		o->free(m->q2);
		o->free(m->absmax1);
		o->free(m->absmax2);
		o->free(m->qmap);
	}
	free(m->ost);
	if (m->aseg)
		o->free(m->aseg);
	o->free(m->slopes);
	o->free(m->tokens);
	o->free(m->targets);
	o->free(m->losses);
	o->free(m->bad_targets);
	o->free(m->tokens_local);
	o->free(m->targets_local);
	o->free(m->dev_stats);
	free(m->host_ids);
	free(m->host_tgt);
	free(m->host_stats);
	for (int k = 0; m->act && k < m->cfg.slots; k++) {
		o->free(m->act[k].act_block);
		o->free(m->act[k].f32_block);
		o->free(m->act[k].tokens);
		o->free(m->act[k].tokens_local);
		o->free(m->act[k].positions);
		o->free(m->act[k].kstart);
		free(m->act[k].l);
	}
	if (m->ws) {
		o->free(m->ws->act_block);
		o->free(m->ws->f32_block);
		free(m->ws->l);
		free(m->ws);
	}
	free(m->act);
	free(m->tensors);
	memset(m, 0, sizeof *m);
}

void model_use_slot(struct model *m, int slot) { m->slot = slot % m->cfg.slots; }
void *model_stage_input(struct model *m) { return m->act[m->slot].encoded; }
void *model_stage_output(struct model *m)
{
	struct model_acts *a = &m->act[m->slot];
	return m->nl ? a->l[m->nl - 1].res3 : a->encoded;
}
void *model_stage_dout(struct model *m) { return m->act[m->slot].dres; }
void *model_stage_dinput(struct model *m) { return m->act[m->slot].dres; }

/* Dropout sites of one micro-batch: the embedding, and per layer attention probabilities and
 * the two residual adds. */
enum { SITE_EMBED, SITE_ATTN, SITE_RES2, SITE_RES3 };
static uint64_t site(uint64_t rng, int layer, int which)
{
	return philox_mix(rng, (uint64_t)(layer + 1) * 8 + which);
}

/* Sum of activations over the tensor-parallel group, in place, in the backend's memory and
 * activation type (dist.h: ordered with the backend's work, no synchronisation needed). */
static void tp_sum(struct model *m, void *x, size_t n)
{
	m->dist->sum_act(m->dist, DIST_TP, x, n);
}

/* Cross-entropy over a vocabulary split across the TP ranks: each rank's slice statistics
 * (max, sum of exponentials, the target's logit where it owns the target) are combined into
 * the global log-sum-exp on the host - B*T numbers - and each rank then writes the gradient of
 * its slice.  Targets outside the real vocabulary get loss 0 and gradient 0 (lse = +inf). */
static void vocab_parallel_xent(struct model *m, const int32_t *targets, float dscale, int *bad)
{
	const struct ops *o = m->ops;
	int N = m->B * m->Tcur, Vp = m->cfg.padded_vocab / m->cfg.tp;
	float *mx = m->host_stats, *se = mx + N, *zt = se + N, *lse = zt + N;
	*bad = 0;
	for (int i = 0; i < N; i++) {
		int t = targets[i];
		if (t < 0 || t >= m->cfg.vocab)
			(*bad)++;
		m->host_ids[i] = t >= m->vocab_start && t < m->vocab_start + m->vocab_valid
					 ? t - m->vocab_start : -1;
	}
	o->to_device(m->targets_local, m->host_ids, (size_t)N * sizeof *m->host_ids);
	o->xent_stats(m->dev_stats, m->dev_stats + N, m->dev_stats + 2 * N, m->act[m->slot].logits,
		      m->targets_local, N, m->vocab_valid, Vp);
	o->to_host(mx, m->dev_stats, (size_t)3 * N * sizeof *mx);
	memcpy(lse, mx, N * sizeof *lse);
	m->dist->host_max_f32(m->dist, DIST_TP, lse, N);   /* lse holds the global max for now */
	for (int i = 0; i < N; i++)
		se[i] = mx[i] == -INFINITY ? 0.0f : se[i] * expf(mx[i] - lse[i]);
	m->dist->host_sum_f32(m->dist, DIST_TP, se, 2 * (size_t)N);   /* se and zt, adjacent */
	for (int i = 0; i < N; i++) {
		int t = targets[i];
		int ok = t >= 0 && t < m->cfg.vocab;
		lse[i] = ok ? lse[i] + logf(se[i]) : INFINITY;
		mx[i] = ok ? lse[i] - zt[i] : 0.0f;   /* the per-token loss */
	}
	o->to_device(m->losses, mx, (size_t)N * sizeof *mx);
	o->to_device(m->dev_stats + 3 * N, lse, (size_t)N * sizeof *lse);
	o->xent_grad(m->act[m->slot].logits, m->dev_stats + 3 * N, m->targets_local, N, m->vocab_valid, Vp,
		     dscale);
}

/* Megatron's get_ltor_masks_and_position_ids: after an end-of-document token at t, positions
 * restart at 0 (reset_position_ids) and queries past t no longer see keys up to t
 * (reset_attention_mask).  Both are "t minus where its document starts" - the position after
 * the last eod before t - so one host pass fills the slot's positions and first keys. */
static void doc_masks(struct model *m, struct model_acts *a, const int32_t *tokens)
{
	const struct model_config *c = &m->cfg;
	int B = m->B, T = m->Tcur;
	int32_t *start = m->host_ids;
	for (int b = 0; b < B; b++) {
		int s0 = 0;
		for (int t = 0; t < T; t++) {
			start[b * T + t] = s0;
			if (tokens[b * T + t] == c->eod)
				s0 = t + 1;
		}
	}
	if (c->reset_attention_mask)
		m->ops->to_device(a->kstart, start, (size_t)B * T * sizeof *start);
	if (c->reset_position_ids && m->first) {
		for (int i = 0; i < B * T; i++)
			start[i] = i % T - start[i];
		m->ops->to_device(a->positions, start, (size_t)B * T * sizeof *start);
	}
}

static struct ops_attn attn_keys(const struct model *m, const struct model_acts *a, int layer,
				 float p)
{
	int nh = m->cfg.heads / m->cfg.tp;
	return (struct ops_attn){.slopes = m->slopes,
				 .kstart = m->cfg.reset_attention_mask ? a->kstart : NULL,
				 .p = p, .seed = site(a->rng, layer, SITE_ATTN), .sample0 = a->sample0,
				 .head0 = m->cfg.tp_rank * nh, .heads = m->cfg.heads};
}

int model_set_seq(struct model *m, int len)
{
	if (len < 1 || len > m->T)
		return -1;
	if (len == m->Tcur)
		return 0;
	int32_t *pos = malloc((size_t)m->B * len * sizeof *pos);
	if (!pos)
		return -1;
	for (int i = 0; i < m->B * len; i++)
		pos[i] = i % len;
	for (int k = 0; k < m->cfg.slots; k++)
		m->ops->to_device(m->act[k].positions, pos, (size_t)m->B * len * sizeof *pos);
	free(pos);
	m->Tcur = len;
	return 0;
}

#define P(which) model_param(m, model_layer_tensor(m, l, which))
#define G(which) model_grad(m, model_layer_tensor(m, l, which))

/* Local layer l of the slot's micro-batch, from its input res (B,T,C): the forward, and again
 * the recomputation of a checkpointed chunk - the same ops on the same inputs with the same
 * dropout keys (the slot's rng and sample0), so the same bits. */
/* Whether layer l starts a chunk of --checkpoint-num-layers (or the stage): its first layer
 * norm is computed on its own, as a recompute starts there.  The fused residual add + layer
 * norm (ops.h) otherwise computes it with the layer below's last residual add, and the fused
 * layer-norm backward applies the layer below's MLP dropout - never across a chunk boundary,
 * where the two layers' activations do not live together. */
static int starts_chunk(const struct model *m, int l)
{
	int n = m->cfg.ckpt_layers;
	return l == 0 || (n > 0 && l % n == 0);
}

static void layer_fwd(struct model *m, struct model_acts *a, int l, const void *res)
{
	const struct ops *o = m->ops;
	const struct model_config *c = &m->cfg;
	int B = m->B, T = m->Tcur, N = B * T, C = c->hidden, tp = c->tp;
	int NH = c->heads / tp, HD = C / c->heads, F = c->ffn / tp;
	size_t NC = (size_t)N * C;
	float hd = m->eval_mode ? 0 : c->hidden_dropout, ad = m->eval_mode ? 0 : c->attention_dropout;
	int tpar = tp > 1, fuse = o->residual_layernorm_fwd != NULL;
	uint64_t rng = a->rng, off = a->sample0 * (uint64_t)T * (uint64_t)C;
	typeof(a->l[0]) *y = &a->l[l];
	int gl = m->l0 + l;   /* dropout keys by global layer: any pipeline split, same masks */

	if (!fuse || starts_chunk(m, l))   /* else the layer below's residual add computed it */
		o->layernorm_fwd(y->ln1, y->ln1_mean, y->ln1_rstd, res, P(LN1_W), P(LN1_B), N, C,
				 c->eps);
	o->matmul_fwd(y->qkv, y->ln1, P(QKV_W), P(QKV_B), N, C, 3 * C / tp);
	o->attention_fwd(y->atty, y->lse, y->qkv, B, T, NH, HD, attn_keys(m, a, gl, ad));
	/* row-parallel: partial sums of every rank, the bias added once */
	o->matmul_fwd(y->attproj, y->atty, P(PROJ_W), c->tp_rank ? NULL : P(PROJ_B), N, C / tp, C);
	if (tpar)
		tp_sum(m, y->attproj, NC);
	/* Megatron's apply_residual_connection_post_layernorm: the residual is the layer
	 * norm's output instead of its input */
	if (fuse) {
		o->residual_layernorm_fwd(y->res2, y->ln2, y->ln2_mean, y->ln2_rstd,
					  c->post_ln_residual ? y->ln1 : res, y->attproj, P(LN2_W),
					  P(LN2_B), N, C, c->eps, hd, site(rng, gl, SITE_RES2), off);
	} else {
		o->residual_fwd(y->res2, c->post_ln_residual ? y->ln1 : res, y->attproj, NC, hd,
				site(rng, gl, SITE_RES2), off);
		o->layernorm_fwd(y->ln2, y->ln2_mean, y->ln2_rstd, y->res2, P(LN2_W), P(LN2_B), N, C,
				 c->eps);
	}
	if (o->matmul_gelu_fwd) {   /* one pass: the GEMM's epilogue applies the GeLU */
		o->matmul_gelu_fwd(y->fchg, y->fch, y->ln2, P(FC_W), P(FC_B), N, C, F);
	} else {
		o->matmul_fwd(y->fch, y->ln2, P(FC_W), P(FC_B), N, C, F);
		o->gelu_fwd(y->fchg, y->fch, (size_t)N * F);
	}
	o->matmul_fwd(y->fcproj, y->fchg, P(FCPROJ_W), c->tp_rank ? NULL : P(FCPROJ_B), N, F, C);
	if (tpar)
		tp_sum(m, y->fcproj, NC);
	if (fuse && l + 1 < m->nl && !starts_chunk(m, l + 1)) {   /* with the next layer's LN1 */
		typeof(a->l[0]) *z = &a->l[l + 1];
		o->residual_layernorm_fwd(y->res3, z->ln1, z->ln1_mean, z->ln1_rstd,
					  c->post_ln_residual ? y->ln2 : y->res2, y->fcproj,
					  model_param(m, model_layer_tensor(m, l + 1, LN1_W)),
					  model_param(m, model_layer_tensor(m, l + 1, LN1_B)), N, C,
					  c->eps, hd, site(rng, gl, SITE_RES3), off);
	} else {
		o->residual_fwd(y->res3, c->post_ln_residual ? y->ln2 : y->res2, y->fcproj, NC, hd,
				site(rng, gl, SITE_RES3), off);
	}
}

static void layer_bwd(struct model *m, struct model_acts *a, int l)
{
	const struct ops *o = m->ops;
	const struct model_config *c = &m->cfg;
	int B = m->B, T = m->Tcur, N = B * T, C = c->hidden, tp = c->tp;
	int NH = c->heads / tp, HD = C / c->heads, F = c->ffn / tp;
	size_t NC = (size_t)N * C;
	float hd = m->eval_mode ? 0 : c->hidden_dropout, ad = m->eval_mode ? 0 : c->attention_dropout;
	int tpar = tp > 1, fuse = o->layernorm_bwd_dropout != NULL;
	uint64_t rng = a->rng, off = a->sample0 * (uint64_t)T * (uint64_t)C;
	typeof(a->l[0]) *y = &a->l[l];
	int gl = m->l0 + l;
	void *res = l ? a->l[l - 1].res3 : a->encoded;

	/* dres = d res3: through the MLP branch; the identity path keeps dres as it is (the layer
	 * above's fused layer-norm backward already did it, within a chunk) */
	if (!fuse || l == m->nl - 1 || starts_chunk(m, l + 1))
		o->dropout_bwd(a->dbtc, a->dres, NC, hd, site(rng, gl, SITE_RES3), off);
	if (o->matmul_dgelu_bwd) {
		o->matmul_dgelu_bwd(a->dbtf, G(FCPROJ_W), G(FCPROJ_B), a->dbtc, y->fchg, P(FCPROJ_W),
				    y->fch, N, F, C);
	} else {
		o->matmul_bwd(a->dbtf, G(FCPROJ_W), G(FCPROJ_B), a->dbtc, y->fchg, P(FCPROJ_W), N, F, C);
		o->gelu_bwd(a->dbtf, y->fch, a->dbtf, (size_t)N * F);
	}
	o->matmul_bwd(a->dbtc, G(FC_W), G(FC_B), a->dbtf, y->ln2, P(FC_W), N, C, F);
	if (tpar)   /* column-parallel: the input gradient is a sum over the ranks */
		tp_sum(m, a->dbtc, NC);
	if (c->post_ln_residual) {   /* the identity path enters at the LN's output */
		o->add(a->dbtc, a->dres, NC);
		o->zero(a->dres, NC * o->act_size);
	}
	/* dres = d res2, then through attention's dropout */
	if (fuse) {
		o->layernorm_bwd_dropout(a->dres, a->dbtc, G(LN2_W), G(LN2_B), a->dbtc, y->res2,
					 P(LN2_W), y->ln2_mean, y->ln2_rstd, N, C, hd,
					 site(rng, gl, SITE_RES2), off);
	} else {
		o->layernorm_bwd(a->dres, G(LN2_W), G(LN2_B), a->dbtc, y->res2, P(LN2_W), y->ln2_mean,
				 y->ln2_rstd, N, C);
		o->dropout_bwd(a->dbtc, a->dres, NC, hd, site(rng, gl, SITE_RES2), off);
	}
	o->matmul_bwd(a->dbtc2, G(PROJ_W), G(PROJ_B), a->dbtc, y->atty, P(PROJ_W), N, C / tp, C);
	o->attention_bwd(a->dqkv, a->dbtc2, y->qkv, y->atty, y->lse, B, T, NH, HD,
			 attn_keys(m, a, gl, ad));
	o->matmul_bwd(a->dbtc, G(QKV_W), G(QKV_B), a->dqkv, y->ln1, P(QKV_W), N, C, 3 * C / tp);
	if (tpar)
		tp_sum(m, a->dbtc, NC);
	if (c->post_ln_residual) {
		o->add(a->dbtc, a->dres, NC);
		o->zero(a->dres, NC * o->act_size);
	}
	if (fuse && !starts_chunk(m, l))   /* and the layer below's MLP dropout */
		o->layernorm_bwd_dropout(a->dres, a->dbtc, G(LN1_W), G(LN1_B), a->dbtc, res, P(LN1_W),
					 y->ln1_mean, y->ln1_rstd, N, C, hd,
					 site(rng, gl - 1, SITE_RES3), off);
	else
		o->layernorm_bwd(a->dres, G(LN1_W), G(LN1_B), a->dbtc, res, P(LN1_W), y->ln1_mean,
				 y->ln1_rstd, N, C);
}

double model_forward(struct model *m, const int32_t *tokens, const int32_t *targets, float dscale,
		     uint64_t rng, uint64_t sample0, float *logits_out, int *bad)
{
	const struct ops *o = m->ops;
	const struct model_config *c = &m->cfg;
	struct model_acts *a = &m->act[m->slot];
	int B = m->B, T = m->Tcur, N = B * T, C = c->hidden, tp = c->tp;
	size_t NC = (size_t)N * C;
	float hd = m->eval_mode ? 0 : c->hidden_dropout;
	int tpar = tp > 1;
	uint64_t off = sample0 * (uint64_t)T * (uint64_t)C;   /* dropout: the batch's element index */

	*bad = 0;
	a->rng = rng;
	a->sample0 = sample0;
	if (c->reset_attention_mask || (c->reset_position_ids && m->first && m->wpe >= 0))
		doc_masks(m, a, tokens);
	if (m->first) {
		o->to_device(a->tokens, tokens, (size_t)N * sizeof *tokens);
		const int32_t *words = a->tokens;
		if (tpar) {   /* vocab-parallel: this rank looks up the ids of its slice, the rest 0 */
			int vl = c->padded_vocab / tp;
			for (int i = 0; i < N; i++)
				m->host_ids[i] = tokens[i] >= m->vocab_start &&
							 tokens[i] < m->vocab_start + vl
						 ? tokens[i] - m->vocab_start : -1;
			o->to_device(a->tokens_local, m->host_ids, (size_t)N * sizeof *m->host_ids);
			words = a->tokens_local;
		}
		/* (B,T,C): words [-> LN] [+ positions] -> dropout */
		if (c->embed_ln || tpar || c->reset_position_ids) {
			void *w = c->embed_ln ? a->emb : a->encoded;
			o->embed_fwd(w, words, model_param(m, m->wte), NULL, B, T, C);
			if (tpar)
				tp_sum(m, w, NC);
			if (c->embed_ln)
				o->layernorm_fwd(a->encoded, a->eln_mean, a->eln_rstd, a->emb,
						 model_param(m, m->eln_w), model_param(m, m->eln_b), N, C,
						 1e-5f);
			if (m->wpe >= 0) {   /* positions after the LN: looked up by position "tokens" */
				o->embed_fwd(a->dbtc, a->positions, model_param(m, m->wpe), NULL, B, T, C);
				o->add(a->encoded, a->dbtc, NC);
			}
		} else {
			o->embed_fwd(a->encoded, a->tokens, model_param(m, m->wte),
				     m->wpe >= 0 ? model_param(m, m->wpe) : NULL, B, T, C);
		}
		o->dropout_fwd(a->encoded, NC, hd, site(rng, -1, SITE_EMBED), off);
	}
	/* else: the previous stage's output was received into a->encoded */

	void *res = a->encoded;
	for (int l = 0; l < m->nl; l++) {
		layer_fwd(m, a, l, res);
		res = a->l[l].res3;
	}
	if (!m->last)
		return 0;   /* res goes on to the next stage */

	/* --eod-mask-loss: no loss, and no gradient, where the input token is the end of document
	 * (target -1, which the cross-entropy gives loss 0 and gradient 0); the mean is over the
	 * rest, so each kept token weighs 1/kept as in Megatron's sum(loss*mask)/sum(mask) */
	int masked = 0;
	if (c->eod_mask_loss) {
		for (int i = 0; i < N; i++) {
			int eod = tokens[i] == c->eod;
			m->host_tgt[i] = eod ? -1 : targets[i];
			masked += eod;
		}
		targets = m->host_tgt;
	}
	int kept = N - masked;
	float tscale = kept ? dscale / kept : 0.0f;
	o->to_device(m->targets, targets, (size_t)N * sizeof *targets);
	o->layernorm_fwd(a->lnf, a->lnf_mean, a->lnf_rstd, res, model_param(m, m->lnf_w),
			 model_param(m, m->lnf_b), N, C, c->eps);
	int Vp = c->padded_vocab / tp;
	o->matmul_fwd(a->logits, a->lnf, model_param(m, m->wte), NULL, N, C, Vp);
	if (logits_out) {
		size_t bytes = (size_t)N * Vp * sizeof(float);
		float *tmp = dalloc(m, bytes, 1);
		if (!tmp)
			abort();
		o->act_to_f32(tmp, a->logits, (size_t)N * Vp);
		o->to_host(logits_out, tmp, bytes);
		o->free(tmp);
		m->mem_now -= bytes;
		m->mem_act -= bytes;
	}
	o->zero(m->bad_targets, sizeof *m->bad_targets);
	if (tpar) {
		vocab_parallel_xent(m, targets, tscale, bad);
	} else {
		o->xent_fwd_bwd(m->losses, a->logits, m->targets, N, c->vocab, Vp, tscale,
				m->bad_targets);
	}
	float *losses = m->host_stats;   /* (N) host scratch, allocated once */
	o->to_host(losses, m->losses, (size_t)N * sizeof *losses);
	if (!tpar)
		o->to_host(bad, m->bad_targets, sizeof *bad);
	*bad -= masked;   /* the masked targets are not bad data */
	double sum = 0;
	for (int i = 0; i < N; i++)
		sum += losses[i];
	return kept ? sum / kept : 0.0;
}

void model_backward(struct model *m)
{
	const struct ops *o = m->ops;
	const struct model_config *c = &m->cfg;
	struct model_acts *a = &m->act[m->slot];
	int B = m->B, T = m->Tcur, N = B * T, C = c->hidden, tp = c->tp;
	int Vp = c->padded_vocab / tp;
	size_t NC = (size_t)N * C;
	float hd = m->eval_mode ? 0 : c->hidden_dropout;
	int tpar = tp > 1;
	uint64_t rng = a->rng, off = a->sample0 * (uint64_t)T * (uint64_t)C;

	if (m->last) {
		/* logits already hold dloss/dlogits (fused into the forward's cross-entropy) */
		o->matmul_bwd(a->dbtc, model_grad(m, m->wte), NULL, a->logits, a->lnf,
			      model_param(m, m->wte), N, C, Vp);
		if (tpar)   /* each rank's slice of the vocabulary contributes to d lnf */
			tp_sum(m, a->dbtc, NC);
		o->zero(a->dres, NC * o->act_size);
		void *out = m->nl ? a->l[m->nl - 1].res3 : a->encoded;
		o->layernorm_bwd(a->dres, model_grad(m, m->lnf_w), model_grad(m, m->lnf_b), a->dbtc,
				 out, model_param(m, m->lnf_w), a->lnf_mean, a->lnf_rstd, N, C);
	}
	/* else: the next stage's gradient of this stage's output was received into a->dres */

	if (!c->ckpt_layers) {
		for (int l = m->nl - 1; l >= 0; l--)
			layer_bwd(m, a, l);
	} else {
		/* chunk by chunk from the last: recompute its layers from its input (the previous
		 * chunk's kept output, or the stage's input), then their backward */
		int n = c->ckpt_layers;
		for (int hi = m->nl; hi > 0;) {
			int lo = (hi - 1) / n * n;
			for (int l = lo; l < hi; l++)
				layer_fwd(m, a, l, l ? a->l[l - 1].res3 : a->encoded);
			for (int l = hi - 1; l >= lo; l--)
				layer_bwd(m, a, l);
			hi = lo;
		}
	}
	if (!m->first)
		return;   /* a->dres, the gradient of this stage's input, goes back to the previous */

	/* dres = d encoded: back through dropout, positions, the embedding LN, the words */
	o->dropout_bwd(a->dres, a->dres, NC, hd, site(rng, -1, SITE_EMBED), off);
	const int32_t *words = tpar ? a->tokens_local : a->tokens;
	if (c->embed_ln || tpar || c->reset_position_ids) {
		if (m->wpe >= 0)
			o->embed_bwd(model_grad(m, m->wpe), NULL, a->dres, a->positions, B, T, C);
		void *dw = a->dres;
		if (c->embed_ln) {
			o->zero(a->dbtc, NC * o->act_size);
			o->layernorm_bwd(a->dbtc, model_grad(m, m->eln_w), model_grad(m, m->eln_b),
					 a->dres, a->emb, model_param(m, m->eln_w), a->eln_mean,
					 a->eln_rstd, N, C);
			dw = a->dbtc;
		}
		o->embed_bwd(model_grad(m, m->wte), NULL, dw, words, B, T, C);
	} else {
		o->embed_bwd(model_grad(m, m->wte), m->wpe >= 0 ? model_grad(m, m->wpe) : NULL,
			     a->dres, a->tokens, B, T, C);
	}
}

double model_flops_per_token(const struct model_config *c)
{
	double L = c->layers, C = c->hidden, F = c->ffn, V = c->padded_vocab, T = c->seq;
	double n = L * (4 * C * C + 2 * C * F) + V * C;   /* matmul weights, lm head included */
	return 6 * n + 12 * L * C * T;
}
