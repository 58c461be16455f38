/* build - a model put together: the architecture chosen (gpt.c, bert.c, t5.c) builds its tensor
 * table, the parameters are laid out (ZeRO-1's buckets), every buffer but the optimizer
 * state's is allocated and the activation slots are carved (model_init); and a step dispatched
 * to the architecture (model_forward, model_backward).  The file above both the model's
 * buffers (model.c) and the pieces (layers.c), so that neither needs the other's top. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/model/model.h"
#include "train/model/layers.h"

/* 1 when tensor i starts on a block of the optimizer's state (model.h state_block_min) */
static int tensor_blocked(const struct model *m, int i)
{
	return m->cfg.state_block && i != m->wte && m->tensors[i].numel >= m->cfg.state_block_min;
}

/* ZeRO-1's buckets (model.h zb): whole tensors from the top of the table down (the order the
 * backward finishes them) until a bucket holds zero_bucket elements; then the offsets again,
 * bucket by bucket upwards, each bucket padded to a multiple of zero_dp x A elements (A = 64,
 * 256-byte chunks; state_block under bnb, where a blocked tensor also starts on a block) so
 * that one reduce-scatter and one all-gather of equal chunks move it.  The padding is never a
 * tensor's: its gradients stay zero and no optimizer reads it. */
static int zero_layout(struct model *m)
{
	size_t dp = (size_t)m->cfg.zero_dp, A = m->cfg.state_block ? m->cfg.state_block : 64;
	size_t unit = dp * A;
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
		if (tensor_blocked(m, i))
			off = (off + A - 1) / A * A;
		m->tensors[i].offset = off;
		off += m->tensors[i].numel;
	}
	if (nb)
		m->zb[nb - 1].hi = off = m->zb[nb - 1].lo + (off - m->zb[nb - 1].lo + unit - 1) / unit * unit;
	m->nzb = nb;
	m->nparams = off;
	return 0;
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

	size_t pbytes;
	m->nweights = m->nparams;
	if (m->cfg.zero_dp > 1 && zero_layout(m) < 0)
		goto oom;
	pbytes = m->nparams * sizeof(float);
	m->master = model_alloc(m, pbytes, 0);
	m->grads = model_alloc(m, pbytes, 0);
	if (!m->master || !m->grads)
		goto oom;
	m->params = ops->act_size == sizeof(float) ? (void *)m->master
						   : model_alloc(m, m->nparams * ops->act_size, 0);
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
		(*ws)->act_block = model_alloc(m, na * ops->act_size, 1);
		(*ws)->f32_block = model_alloc(m, nf * sizeof(float), 1);
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
		a->act_block = model_alloc(m, na * ops->act_size, 1);
		a->f32_block = model_alloc(m, nf * sizeof(float), 1);
		a->tokens = model_alloc(m, NB, 1);
		a->tokens_local = model_alloc(m, NB, 1);
		a->positions = model_alloc(m, NB, 1);
		a->kstart = model_alloc(m, NB, 1);
		if (!a->act_block || !a->f32_block || !a->tokens || !a->tokens_local ||
		    !a->positions || !a->kstart)
			goto oom;
		if (m->tte >= 0 && !(a->types = model_alloc(m, NB, 1)))
			goto oom;
		if ((a->stk->mask == ATTN_BIDIR || a->stk->cross) &&
		    !(a->klen = model_alloc(m, (size_t)B * sizeof(int32_t), 1)))
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
	m->tokens = model_alloc(m, (size_t)B * m->T * sizeof *m->tokens, 1);
	m->targets = model_alloc(m, (size_t)B * m->T * sizeof *m->targets, 1);
	m->losses = model_alloc(m, (size_t)B * m->T * sizeof *m->losses, 1);
	m->bad_targets = model_alloc(m, sizeof *m->bad_targets, 1);
	m->tokens_local = model_alloc(m, (size_t)B * m->T * sizeof *m->tokens_local, 1);
	m->targets_local = model_alloc(m, (size_t)B * m->T * sizeof *m->targets_local, 1);
	m->dev_stats = model_alloc(m, (size_t)4 * B * m->T * sizeof *m->dev_stats, 1);
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

	if (model_positions_init(m) < 0)
		goto oom;
	if (c->alibi) {
		int nh = c->heads / m->cfg.tp;
		float all[c->heads];
		model_alibi_slopes(c->heads, all);
		if (!(m->slopes = model_alloc(m, nh * sizeof *m->slopes, 0)))
			goto oom;
		ops->to_device(m->slopes, all + m->cfg.tp_rank * nh, nh * sizeof *m->slopes);
	}
	return 0;
oom:
	snprintf(err, errlen, "out of memory on the %s device: %zu parameters (fp32 master and "
		 "gradients) and activations for micro-batch %d x %d; try a smaller "
		 "--micro-batch-size",
		 ops->name, m->nparams, B, T);
	model_free(m);
	return -1;
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
