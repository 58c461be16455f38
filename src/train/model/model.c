/* model - see model.h.  What every architecture shares: the tensor table and the buffers of
 * the same layout (working weights, fp32 master, gradients, optimizer state), initialisation,
 * the optimizer's layout and ZeRO-1 shards, the activation slots and the recompute workspace,
 * the pipeline stage's hand-over points.  The architecture (gpt.c, bert.c, t5.c; layers.h) lists
 * its tensors and composes the forward and backward. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"
#include "train/model/model.h"
#include "train/model/layers.h"
#include "train/optim/bnb.h"
#include "train/model/philox.h"

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
	float *buf = xmalloc(most * sizeof *buf, "the weight initializer's staging tensor");
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

/* ZeRO-1's buckets (model.h zb): whole tensors from the top of the table down (the order the
 * backward finishes them) until a bucket holds zero_bucket elements; then the offsets again,
 * bucket by bucket upwards, each bucket padded to a multiple of zero_dp x A elements (A = 64,
 * 256-byte chunks; BNB_BLOCK under bnb, where an 8-bit tensor also starts on a block) so that
 * one reduce-scatter and one all-gather of equal chunks move it.  The padding is never a
 * tensor's: its gradients stay zero and no optimizer reads it. */
static int zero_layout(struct model *m)
{
	size_t P = (size_t)m->cfg.zero_dp, A = m->cfg.bnb ? BNB_BLOCK : 64, unit = P * A;
	size_t want = m->cfg.zero_bucket ? m->cfg.zero_bucket : 1, acc = 0;
	int n = m->ntensors, nb = 0;
	m->tbucket = calloc(n ? n : 1, sizeof *m->tbucket);
	m->zb = calloc(n ? n : 1, sizeof *m->zb);
	if (!m->tbucket || !m->zb)
		return -1;
	for (int i = n - 1; i >= 0; i--) {   /* bucket ids from the top: 0 is the last tensors' */
		m->tbucket[i] = nb;
		acc += m->tensors[i].numel;
		if (acc >= want || i == 0) {
			nb++;
			acc = 0;
		}
	}
	size_t off = 0;
	for (int i = 0; i < n; i++) {        /* ascending: bucket k holds ids nb - 1 - k */
		int k = nb - 1 - m->tbucket[i];
		m->tbucket[i] = k;
		if (i == 0 || m->tbucket[i - 1] != k) {
			if (i > 0)
				m->zb[k - 1].hi = off = m->zb[k - 1].lo + (off - m->zb[k - 1].lo + unit - 1) / unit * unit;
			m->zb[k].lo = off;
		}
		if (tensor_q8(m, i))
			off = (off + BNB_BLOCK - 1) / BNB_BLOCK * BNB_BLOCK;
		m->tensors[i].offset = off;
		off += m->tensors[i].numel;
	}
	if (nb)
		m->zb[nb - 1].hi = off = m->zb[nb - 1].lo + (off - m->zb[nb - 1].lo + unit - 1) / unit * unit;
	m->nzb = nb;
	m->nparams = off;
	return 0;
}

void model_zero_chunk(const struct model *m, int k, int r, size_t *lo, size_t *hi)
{
	size_t c = (m->zb[k].hi - m->zb[k].lo) / (size_t)m->cfg.zero_dp;
	*lo = m->zb[k].lo + (size_t)r * c;
	*hi = *lo + c;
}

void model_opt_layout(const struct model *m, int r, struct model_ostate *ost, size_t *n32,
		      size_t *n8, size_t *nblk)
{
	*n32 = *n8 = *nblk = 0;
	for (int i = 0; i < m->ntensors; i++) {
		const struct model_tensor *t = &m->tensors[i];
		size_t lo = 0, hi = (size_t)-1;
		if (r >= 0 && m->zb)
			model_zero_chunk(m, m->tbucket[i], r, &lo, &hi);
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
	model_opt_layout(m, m->cfg.zero_rank, NULL, &n32, &n8, &nblk);
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

static int chunk_end(const struct model *m, const struct model_stack *sk, int l)
{
	int n = m->cfg.ckpt_layers;
	return (l + 1) % n == 0 || l == sk->nl - 1;
}

/* Carves the activation blocks of a stack: sizes first (ptr == NULL), then pointers.
 * *layer_bytes gets the part --dry-run's activation figure counts (layers, chunk outputs,
 * logits).  The sizes are the stack's full length's (stk->T: GPT's and BERT's m->T). */
static void carve(struct model *m, struct model_acts *a, enum carve_kind kind, size_t *act_elems,
		  size_t *f32_elems, size_t *layer_bytes)
{
	const struct model_config *c = &m->cfg;
	const struct model_stack *sk = a->stk;
	size_t N = (size_t)m->B * sk->T, C = c->hidden, F = c->ffn / c->tp, C3 = 3 * C / c->tp;
	size_t Cl = C / c->tp, NHl = c->heads / c->tp, Nk = (size_t)m->B * a->xT;
	size_t la = 0, lf = 0;
	struct carver k = {.ab = a->act_block, .fb = a->f32_block, .as = m->ops->act_size};
	int ck = c->ckpt_layers > 0;
	int nl = kind == CARVE_WS ? (c->ckpt_layers < sk->nl ? c->ckpt_layers : sk->nl) : sk->nl;
	if (kind == CARVE_SLOT) {
		if (c->embed_ln && m->first) {
			a->emb = carve_act(&k, N * C);
			a->eln_mean = carve_f32(&k, N);
			a->eln_rstd = carve_f32(&k, N);
		}
		a->encoded = carve_act(&k, N * C);
	}
	la = k.na;
	lf = k.nf;
	for (int l = 0; l < nl; l++) {
		struct block_acts *y = &a->l[l];
		if (kind == CARVE_SLOT && ck) {   /* the chunk outputs only: the next chunk's input */
			if (chunk_end(m, sk, l))
				y->res3 = carve_act(&k, N * C);
			continue;
		}
		y->ln1 = carve_act(&k, N * C);
		y->ln1_mean = carve_f32(&k, N);
		y->ln1_rstd = carve_f32(&k, N);
		y->qkv = carve_act(&k, N * C3);
		y->atty = carve_act(&k, N * Cl);
		y->lse = carve_f32(&k, (size_t)m->B * NHl * sk->T);
		y->attproj = carve_act(&k, N * C);
		y->res2 = carve_act(&k, N * C);
		y->ln2 = carve_act(&k, N * C);
		y->ln2_mean = carve_f32(&k, N);
		y->ln2_rstd = carve_f32(&k, N);
		y->fch = carve_act(&k, N * F);
		y->fchg = carve_act(&k, N * F);
		y->fcproj = carve_act(&k, N * C);
		y->res3 = carve_act(&k, N * C);
		if (sk->cross) {
			y->xq = carve_act(&k, N * Cl);
			y->xkv = carve_act(&k, Nk * 2 * Cl);
			y->xatty = carve_act(&k, N * Cl);
			y->xlse = carve_f32(&k, (size_t)m->B * NHl * sk->T);
			y->xproj = carve_act(&k, N * C);
			y->xres = carve_act(&k, N * C);
			y->xln = carve_act(&k, N * C);
			y->xln_mean = carve_f32(&k, N);
			y->xln_rstd = carve_f32(&k, N);
		}
	}
	la = k.na - la;
	lf = k.nf - lf;
	if (kind == CARVE_SLOT) {
		m->arch->carve(m, a, &k);   /* the heads (the last stage's) */
		la += k.counted;
		a->dres = carve_act(&k, N * C);
		a->dbtc = carve_act(&k, N * C);
		a->dbtc2 = carve_act(&k, N * C);
		a->dqkv = carve_act(&k, N * C3);
		a->dbtf = carve_act(&k, N * F);
		if (sk->cross) {
			a->dxsrc = carve_act(&k, Nk * C);
			a->dxkv = carve_act(&k, Nk * 2 * Cl);
			a->dxin = carve_act(&k, Nk * C);
		}
	}
	*act_elems = k.na;
	*f32_elems = k.nf;
	*layer_bytes = la * k.as + lf * sizeof(float);
}

/* Checkpointing: a slot's layers work in the workspace, but for the chunk outputs it keeps. */
static void link_workspace(struct model *m, struct model_acts *a)
{
	int n = m->cfg.ckpt_layers;
	for (int l = 0; l < a->stk->nl; l++) {
		void *keep = a->l[l].res3;
		a->l[l] = m->ws->l[l % n];
		if (chunk_end(m, a->stk, l))
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

static int set_positions(struct model *m, struct model_acts *set, int len);

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
	m->arch = c->arch == MODEL_BERT ? &model_arch_bert : c->arch == MODEL_T5 ? &model_arch_t5
									 : &model_arch_gpt;
	m->attn_mask = c->arch == MODEL_BERT ? ATTN_BIDIR : ATTN_CAUSAL;
	if (c->arch == MODEL_T5 && c->dec_seq > T)   /* host scratch for either stack's rows */
		m->T = c->dec_seq;
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
	if (c->arch == MODEL_BERT && (c->alibi || c->embed_ln || c->eod_mask_loss ||
				      c->reset_position_ids || c->reset_attention_mask)) {
		snprintf(err, errlen, "a BERT model has learned positions and no embedding layer norm "
			 "or document masks (its attention mask is the padding mask)");
		return -1;
	}
	if (c->arch == MODEL_BERT && (!ops->gelu_erf_fwd || !ops->tanh_fwd || !ops->gather_rows)) {
		snprintf(err, errlen, "the %s backend has no BERT heads (erf GeLU, tanh) in this "
			 "build: use --device cpu", ops->name);
		return -1;
	}
	if (!c->alibi && T > c->max_pos) {
		snprintf(err, errlen, "--seq-length %d exceeds --max-position-embeddings %d", T,
			 c->max_pos);
		return -1;
	}
	if (c->arch == MODEL_T5) {
		const char *why = c->dec_seq < 1 ? "needs a decoder length (--decoder-seq-length)"
				  : c->dec_seq > c->max_pos ? "--decoder-seq-length exceeds "
				  "--max-position-embeddings"
				  : c->alibi || c->embed_ln || c->eod_mask_loss || c->reset_position_ids ||
				  c->reset_attention_mask || c->num_tokentypes || c->bnb
				  ? "has learned positions and no ALiBi, embedding layer norm, token "
				  "types, StableEmbedding or document masks (its masks are the padding "
				  "masks)"
				  : c->pp > 1 ? "is not split over pipeline stages here (Megatron's T5 needs "
				  "--pipeline-model-parallel-split-rank)"
				  : !ops->xattn_fwd || !ops->xattn_bwd ? "needs cross-attention, which "
				  "this backend lacks" : NULL;
		if (why) {
			snprintf(err, errlen, "a T5 model %s", why);
			return -1;
		}
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
	int per = m->arch->layer_tensors ? m->arch->layer_tensors : LAYER_TENSORS;
	m->tensors = calloc(m->arch->max_tensors + (size_t)m->nl * per, sizeof *m->tensors);
	if (!m->tensors)
		goto oom;
	m->ntensors = 0;
	m->nparams = 0;
	m->wte = m->wpe = m->eln_w = m->eln_b = m->lnf_w = m->lnf_b = m->tte = -1;
	m->hd_w = m->hd_b = m->hd_ln_w = m->hd_ln_b = m->lm_bias = -1;
	m->pool_w = m->pool_b = m->bin_w = m->bin_b = -1;
	m->elnf_w = m->elnf_b = -1;
	m->arch->build_table(m);
	if (m->arch->stacks) {
		m->arch->stacks(m);
	} else {   /* one stack: the stage's layers */
		m->nstk = 1;
		m->stk[0] = (struct model_stack){.t0 = m->layer0, .per = LAYER_TENSORS, .nl = m->nl,
						 .l0 = m->l0, .mask = m->attn_mask, .T = T};
	}
	/* a set of activations per stack and slot: the last stack's in act, T5's encoder's in
	 * xact */
	for (int s = 0; s < m->nstk; s++) {
		struct model_acts **set = s == m->nstk - 1 ? &m->act : &m->xact;
		if (!(*set = calloc(m->cfg.slots, sizeof **set)))
			goto oom;
		for (int k = 0; k < m->cfg.slots; k++) {
			struct model_acts *a = &(*set)[k];
			a->stk = &m->stk[s];
			a->xT = m->stk[s].cross ? m->stk[0].T : 0;
			if (!(a->l = calloc(m->stk[s].nl ? m->stk[s].nl : 1, sizeof *a->l)))
				goto oom;
		}
	}

	size_t P = m->nparams * sizeof(float), n32, n8, nblk;
	m->nweights = m->nparams;
	if (m->cfg.zero_dp > 1 && zero_layout(m) < 0)
		goto oom;
	P = m->nparams * sizeof(float);
	if (!(m->ost = calloc(m->ntensors ? m->ntensors : 1, sizeof *m->ost)))
		goto oom;
	model_opt_layout(m, m->cfg.zero_dp > 1 ? m->cfg.zero_rank : -1, m->ost, &n32, &n8, &nblk);
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
	size_t NB = (size_t)B * m->T * sizeof(int32_t);
	m->mem_act_layers = 0;
	for (int s = 0; s < m->nstk; s++) {
		const struct model_stack *sk = &m->stk[s];
		struct model_acts **ws = s == m->nstk - 1 ? &m->ws : &m->xws;
		if (!m->cfg.ckpt_layers || !sk->nl)
			continue;
		/* one recompute workspace for every slot */
		int wl = m->cfg.ckpt_layers < sk->nl ? m->cfg.ckpt_layers : sk->nl;
		if (!(*ws = calloc(1, sizeof **ws)) || !((*ws)->l = calloc(wl, sizeof *(*ws)->l)))
			goto oom;
		(*ws)->stk = sk;
		(*ws)->xT = sk->cross ? m->stk[0].T : 0;
		carve(m, *ws, CARVE_WS, &na, &nf, &lb);
		(*ws)->act_block = dalloc(m, na * ops->act_size, 1);
		(*ws)->f32_block = dalloc(m, nf * sizeof(float), 1);
		if (!(*ws)->act_block || !(*ws)->f32_block)
			goto oom;
		carve(m, *ws, CARVE_WS, &na, &nf, &lb);
		m->mem_act_layers += lb;
	}
	for (int k = 0; k < m->cfg.slots * m->nstk; k++) {
		int s = k / m->cfg.slots;
		struct model_acts *a = s == m->nstk - 1 ? &m->act[k % m->cfg.slots]
							 : &m->xact[k % m->cfg.slots];
		struct model_acts *ws = s == m->nstk - 1 ? m->ws : m->xws;
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
		if (m->tte >= 0 && !(a->types = dalloc(m, NB, 1)))
			goto oom;
		if ((a->stk->mask == ATTN_BIDIR || a->stk->cross) &&
		    !(a->klen = dalloc(m, (size_t)B * sizeof(int32_t), 1)))
			goto oom;
		carve(m, a, CARVE_SLOT, &na, &nf, &lb);
		m->mem_act_layers += lb;
		if (ws) {
			struct model_acts *keep = m->ws;
			m->ws = ws;   /* link_workspace's */
			link_workspace(m, a);
			m->ws = keep;
		}
	}
	m->tokens = dalloc(m, (size_t)B * m->T * sizeof *m->tokens, 1);
	m->targets = dalloc(m, (size_t)B * m->T * sizeof *m->targets, 1);
	m->losses = dalloc(m, (size_t)B * m->T * sizeof *m->losses, 1);
	m->bad_targets = dalloc(m, sizeof *m->bad_targets, 1);
	m->tokens_local = dalloc(m, (size_t)B * m->T * sizeof *m->tokens_local, 1);
	m->targets_local = dalloc(m, (size_t)B * m->T * sizeof *m->targets_local, 1);
	m->dev_stats = dalloc(m, (size_t)4 * B * m->T * sizeof *m->dev_stats, 1);
	m->host_ids = malloc((size_t)B * m->T * sizeof *m->host_ids);
	m->host_tgt = malloc((size_t)B * m->T * sizeof *m->host_tgt);
	m->host_stats = malloc((size_t)4 * B * m->T * sizeof *m->host_stats);
	m->host_mask = malloc((size_t)B * m->T);
	if (!m->tokens_local || !m->targets_local || !m->dev_stats || !m->host_ids || !m->host_stats ||
	    !m->host_tgt || !m->host_mask)
		goto oom;
	if (!m->tokens || !m->targets || !m->losses ||
	    !m->bad_targets)
		goto oom;
	m->acts_bytes = m->mem_act;

	m->Tcur = 0;
	if (m->nstk > 1) {   /* T5: each stack's positions 0..T-1, once (no curriculum) */
		for (int s = 0; s < m->nstk; s++)
			if (set_positions(m, s == m->nstk - 1 ? m->act : m->xact, m->stk[s].T) < 0)
				goto oom;
		m->Tcur = T;
	} else if (model_set_seq(m, T) < 0) {
		goto oom;
	}
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
	free(m->zb);
	free(m->tbucket);
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
	free(m->host_mask);
	for (int s = 0; s < 2; s++) {
		struct model_acts *set = s ? m->xact : m->act, *ws = s ? m->xws : m->ws;
		for (int k = 0; set && k < m->cfg.slots; k++) {
			o->free(set[k].act_block);
			o->free(set[k].f32_block);
			o->free(set[k].tokens);
			o->free(set[k].tokens_local);
			o->free(set[k].positions);
			o->free(set[k].kstart);
			o->free(set[k].types);
			o->free(set[k].klen);
			free(set[k].l);
		}
		if (ws) {
			o->free(ws->act_block);
			o->free(ws->f32_block);
			free(ws->l);
			free(ws);
		}
	}
	free(m->act);
	free(m->xact);
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

/* Positions 0..len-1 of every sample, into each slot's set of a stack's activations */
static int set_positions(struct model *m, struct model_acts *set, int len)
{
	int32_t *pos = malloc((size_t)m->B * len * sizeof *pos);
	if (!pos)
		return -1;
	for (int i = 0; i < m->B * len; i++)
		pos[i] = i % len;
	for (int k = 0; k < m->cfg.slots; k++)
		m->ops->to_device(set[k].positions, pos, (size_t)m->B * len * sizeof *pos);
	free(pos);
	return 0;
}

int model_set_seq(struct model *m, int len)
{
	if (len < 1 || len > m->T)
		return -1;
	if (len == m->Tcur)
		return 0;
	if (m->nstk > 1 || set_positions(m, m->act, len) < 0)   /* T5: its lengths are fixed */
		return -1;
	m->Tcur = len;
	m->stk[0].T = len;
	return 0;
}

void *model_alloc_transient(struct model *m, size_t bytes)
{
	void *p = dalloc(m, bytes, 1);
	if (!p) {
		char what[80];
		snprintf(what, sizeof what, "a transient buffer on the %s device", m->ops->name);
		xalloc_die(what, bytes);
	}
	return p;
}

void model_free_transient(struct model *m, void *p, size_t bytes)
{
	m->ops->free(p);
	m->mem_now -= bytes;
	m->mem_act -= bytes;
}

double model_forward_batch(struct model *m, const struct model_batch *b, float dscale,
			   uint64_t rng, uint64_t sample0, float *logits_out, int *bad)
{
	return m->arch->forward(m, b, dscale, rng, sample0, logits_out, bad);
}

double model_forward(struct model *m, const int32_t *tokens, const int32_t *targets, float dscale,
		     uint64_t rng, uint64_t sample0, float *logits_out, int *bad)
{
	struct model_batch b = {.tokens = tokens, .targets = targets};
	return m->arch->forward(m, &b, dscale, rng, sample0, logits_out, bad);
}

void model_backward(struct model *m)
{
	m->arch->backward(m);
}

double model_flops_per_token(const struct model_config *c)
{
	double L = c->layers, C = c->hidden, F = c->ffn, V = c->padded_vocab, T = c->seq;
	if (c->arch == MODEL_T5) {
		/* Per sample, forward, 2 FLOPs a multiply-add, the attention matrices whole (as GPT's
		 * below): each stack's layers (QKV, dense, MLP) over its own tokens, the encoder's
		 * scores and weighted sums Te x Te, the decoder's Td x Td, the cross-attention's query
		 * and dense over Td, its key/value over Te and its Td x Te; the logits over Td.  The
		 * backward twice that.  Per token of the encoder: Megatron counts samples x
		 * --seq-length tokens, and T5's seq_length is the encoder's. */
		double Te = c->seq, Td = c->dec_seq, layer = 2 * (4 * C * C + 2 * C * F);
		double fwd = L * Te * (layer + 4 * Te * C) +
			     L * Td * (layer + 4 * C * C + 4 * Td * C + 4 * Te * C) +
			     L * Te * 4 * C * C + Td * 2 * V * C;
		return 3 * fwd / Te;
	}
	double n = L * (4 * C * C + 2 * C * F) + V * C;   /* matmul weights, lm head included */
	if (c->arch == MODEL_BERT)
		n += C * C;   /* the LM head's dense (the pooler's is per sample) */
	return 6 * n + 12 * L * C * T;
}
