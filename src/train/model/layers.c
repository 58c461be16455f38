/* layers - see layers.h.  The pieces, forward beside backward.
 *
 * The blocks' backward walks the layers in reverse with one residual-stream gradient (dres)
 * that each block's layer-norm backward accumulates into, exactly as the residual connections
 * add.
 *
 * Activation checkpointing (cfg.ckpt_layers = n > 0, Megatron's --checkpoint-activations with
 * --checkpoint-num-layers n): the layers of a stage are cut into chunks of n from its first
 * layer.  A slot keeps only each chunk's output (the next chunk's input; the last one is the
 * stage's output); every other layer activation lives in one workspace of n layers that all
 * slots share, since a forward or a backward runs to its end before the next starts, 1F1B
 * included.  The backward recomputes a chunk from its input into the workspace - block_fwd,
 * the very code of the forward, with the slot's dropout key and place in the batch, so the
 * same masks and the same bits - then runs its layers' backward.  Under TP the recomputation
 * repeats the forward's all-reduces, on every rank in the same order.  The embedding, the final
 * layer norm and the heads are not recomputed (Megatron checkpoints the transformer layers). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/model/layers.h"
#include "train/model/philox.h"

void *carve_act(struct carver *k, size_t n)
{
	void *p = k->ab ? (void *)(k->ab + k->na * k->as) : NULL;
	k->na += n;
	return p;
}

float *carve_f32(struct carver *k, size_t n)
{
	float *p = k->fb ? k->fb + k->nf : NULL;
	k->nf += n;
	return p;
}

int32_t *carve_i32(struct carver *k, size_t n)
{
	return (int32_t *)carve_f32(k, n);
}

int model_add_tensor(struct model *m, const char *name, int64_t d0, int64_t d1, int decay,
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

void stack_add_layer(struct model *m, const char *prefix, int l, int cross)
{
	const struct model_config *c = &m->cfg;
	float std = c->init_std, out_std = c->init_std / sqrtf(2.0f * c->layers);
	static const struct {
		const char *name;
		int d0, d1;     /* 1 C, 2 2C, 3 3C, 4 F */
		int decay;
		enum split split;
		int init;       /* 0 zero, -1 one, 1 std, 2 output std */
	} spec[XLAYER_TENSORS] = {
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
		/* Megatron's inter_attention (T5's decoder): ColumnParallelLinear query and key_value
		 * (rows per head [k, v]), the RowParallelLinear dense with the output init, and the
		 * layer norm that feeds the MLP */
		{"inter_attention.query.weight", 1, 1, 1, SPLIT_COLUMN, 1},
		{"inter_attention.query.bias", 1, 0, 0, SPLIT_COLUMN, 0},
		{"inter_attention.key_value.weight", 2, 1, 1, SPLIT_COLUMN, 1},
		{"inter_attention.key_value.bias", 2, 0, 0, SPLIT_COLUMN, 0},
		{"inter_attention.dense.weight", 1, 1, 1, SPLIT_ROW, 2},
		{"inter_attention.dense.bias", 1, 0, 0, SPLIT_NONE, 0},
		{"post_inter_attention_layernorm.weight", 1, 0, 0, SPLIT_NONE, -1},
		{"post_inter_attention_layernorm.bias", 1, 0, 0, SPLIT_NONE, 0},
	};
	char n[64];
	for (int k = 0; k < (cross ? XLAYER_TENSORS : LAYER_TENSORS); k++) {
		int64_t dim[5] = {0, c->hidden, 2 * (int64_t)c->hidden, 3 * (int64_t)c->hidden, c->ffn};
		float init = spec[k].init == 1 ? std : spec[k].init == 2 ? out_std : spec[k].init;
		snprintf(n, sizeof n, "%slayers.%d.%s", prefix, l, spec[k].name);
		int i = model_add_tensor(m, n, dim[spec[k].d0], dim[spec[k].d1], spec[k].decay,
					 spec[k].split, init);
		m->tensors[i].qkv = k == QKV_W || k == QKV_B;
	}
}

void block_add_tensors(struct model *m, int l)
{
	stack_add_layer(m, "", l, 0);
}

uint64_t layers_site(uint64_t rng, int layer, int which)
{
	return philox_mix(rng, (uint64_t)(layer + 1) * 8 + which);
}
#define site layers_site

/* Sum of activations over the tensor-parallel group, in place, in the backend's memory and
 * activation type (dist.h: ordered with the backend's work, no synchronisation needed). */
void layers_tp_sum(struct model *m, void *x, size_t n)
{
	m->dist->sum_act(m->dist, DIST_TP, x, n);
}
#define tp_sum layers_tp_sum

/* ---- embedding ---- */

/* Megatron's get_ltor_masks_and_position_ids: after an end-of-document token at t, positions
 * restart at 0 (reset_position_ids) and queries past t no longer see keys up to t
 * (reset_attention_mask).  Both are "t minus where its document starts" - the position after
 * the last eod before t - so one host pass fills the slot's positions and first keys. */
void layers_doc_masks(struct model *m, struct model_acts *a, const int32_t *tokens)
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

void embedding_fwd(struct model *m, struct model_acts *a, const int32_t *tokens,
		   const int32_t *types)
{
	const struct ops *o = m->ops;
	const struct model_config *c = &m->cfg;
	int B = m->B, T = a->stk->T, N = B * T, C = c->hidden, tp = c->tp;
	size_t NC = (size_t)N * C;
	float hd = m->eval_mode ? 0 : c->hidden_dropout;
	int tpar = tp > 1;
	uint64_t off = a->sample0 * (uint64_t)T * (uint64_t)C;   /* dropout: the batch's element index */

	o->to_device(a->tokens, tokens, (size_t)N * sizeof *tokens);
	const int32_t *words = a->tokens;
	if (tpar) {   /* vocab-parallel: this rank looks up the ids of its slice, the rest 0 */
		int vl = c->padded_vocab / tp;
		for (int i = 0; i < N; i++)
			m->host_ids[i] = tokens[i] >= m->vocab_start && tokens[i] < m->vocab_start + vl
						 ? tokens[i] - m->vocab_start : -1;
		o->to_device(a->tokens_local, m->host_ids, (size_t)N * sizeof *m->host_ids);
		words = a->tokens_local;
	}
	/* (B,T,C): words [-> LN] [+ positions] [+ token types] -> dropout */
	if (c->embed_ln || tpar || c->reset_position_ids) {
		void *w = c->embed_ln ? a->emb : a->encoded;
		o->embed_fwd(w, words, model_param(m, m->wte), NULL, B, T, C);
		if (tpar)
			tp_sum(m, w, NC);
		if (c->embed_ln)
			o->layernorm_fwd(a->encoded, a->eln_mean, a->eln_rstd, a->emb,
					 model_param(m, m->eln_w), model_param(m, m->eln_b), N, C,
					 EMBED_LN_EPS);
		if (m->wpe >= 0) {   /* positions after the LN: looked up by position "tokens" */
			o->embed_fwd(a->dbtc, a->positions, model_param(m, m->wpe), NULL, B, T, C);
			o->add(a->encoded, a->dbtc, NC);
		}
	} else {
		o->embed_fwd(a->encoded, a->tokens, model_param(m, m->wte),
			     m->wpe >= 0 ? model_param(m, m->wpe) : NULL, B, T, C);
	}
	if (m->tte >= 0) {   /* Megatron: (words + positions) + token types */
		o->to_device(a->types, types, (size_t)N * sizeof *types);
		o->embed_fwd(a->dbtc, a->types, model_param(m, m->tte), NULL, B, T, C);
		o->add(a->encoded, a->dbtc, NC);
	}
	o->dropout_fwd(a->encoded, NC, hd, site(a->rng, a->stk->l0 - 1, SITE_EMBED), off);
}

/* a->dres = d encoded: back through dropout, token types, positions, the embedding LN, the
 * words */
void embedding_bwd(struct model *m, struct model_acts *a)
{
	const struct ops *o = m->ops;
	const struct model_config *c = &m->cfg;
	int B = m->B, T = a->stk->T, N = B * T, C = c->hidden, tp = c->tp;
	size_t NC = (size_t)N * C;
	float hd = m->eval_mode ? 0 : c->hidden_dropout;
	int tpar = tp > 1;
	uint64_t off = a->sample0 * (uint64_t)T * (uint64_t)C;

	o->dropout_bwd(a->dres, a->dres, NC, hd, site(a->rng, a->stk->l0 - 1, SITE_EMBED), off);
	if (m->tte >= 0)
		o->embed_bwd(model_grad(m, m->tte), NULL, a->dres, a->types, B, T, C);
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

/* ---- transformer blocks ---- */

static struct ops_attn attn_keys(const struct model *m, const struct model_acts *a, int layer,
				 float p)
{
	int nh = m->cfg.heads / m->cfg.tp, bidir = a->stk->mask == ATTN_BIDIR;
	return (struct ops_attn){.slopes = m->slopes,
				 .kstart = m->cfg.reset_attention_mask ? a->kstart : NULL,
				 .p = p, .seed = site(a->rng, layer, SITE_ATTN), .sample0 = a->sample0,
				 .head0 = m->cfg.tp_rank * nh, .heads = m->cfg.heads,
				 .bidir = bidir, .klen = bidir ? a->klen : NULL};
}

/* The cross-attention's: every query sees the encoder's first klen[b] keys */
static struct ops_attn xattn_keys(const struct model *m, const struct model_acts *a, int layer,
				  float p)
{
	int nh = m->cfg.heads / m->cfg.tp;
	return (struct ops_attn){.p = p, .seed = site(a->rng, layer, SITE_XATTN),
				 .sample0 = a->sample0, .head0 = m->cfg.tp_rank * nh,
				 .heads = m->cfg.heads, .bidir = 1, .klen = a->klen};
}

/* Table index of tensor `which` of local layer l of the activations' stack */
static int layer_tensor(const struct model_acts *a, int l, int which)
{
	return a->stk->t0 + l * a->stk->per + which;
}

#define P(which) model_param(m, layer_tensor(a, l, which))
#define G(which) model_grad(m, layer_tensor(a, l, which))

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

/* The cross-attention sub-block of decoder layer l (Megatron's inter_attention and what
 * follows it): from y->ln2 (the queries' input) and res (the residual: res2, or ln2 under
 * the post-LN residual) to y->xres = res + dropout(dense(attention(q, kv))) and y->xln =
 * LN(y->xres), the MLP's input.  Under TP each rank holds its heads' query and key/value
 * columns, the dense's rows of them; the dense's partial sums are all-reduced, its bias added
 * once. */
static void xattn_fwd(struct model *m, struct model_acts *a, int l, const void *res)
{
	const struct ops *o = m->ops;
	const struct model_config *c = &m->cfg;
	int B = m->B, T = a->stk->T, Tk = a->xT, N = B * T, C = c->hidden, tp = c->tp;
	int NH = c->heads / tp, HD = C / c->heads;
	size_t NC = (size_t)N * C;
	float hd = m->eval_mode ? 0 : c->hidden_dropout, ad = m->eval_mode ? 0 : c->attention_dropout;
	uint64_t off = a->sample0 * (uint64_t)T * (uint64_t)C;
	struct block_acts *y = &a->l[l];
	int gl = a->stk->l0 + l;

	o->matmul_fwd(y->xq, y->ln2, P(XQ_W), P(XQ_B), N, C, C / tp);
	o->matmul_fwd(y->xkv, a->xsrc, P(XKV_W), P(XKV_B), B * Tk, C, 2 * C / tp);
	o->xattn_fwd(y->xatty, y->xlse, y->xq, y->xkv, B, T, Tk, NH, HD, xattn_keys(m, a, gl, ad));
	o->matmul_fwd(y->xproj, y->xatty, P(XPROJ_W), c->tp_rank ? NULL : P(XPROJ_B), N, C / tp, C);
	if (tp > 1)
		tp_sum(m, y->xproj, NC);
	if (o->residual_layernorm_fwd) {
		o->residual_layernorm_fwd(y->xres, y->xln, y->xln_mean, y->xln_rstd, res, y->xproj,
					  P(XLN_W), P(XLN_B), N, C, c->eps, hd,
					  site(a->rng, gl, SITE_RESX), off);
	} else {
		o->residual_fwd(y->xres, res, y->xproj, NC, hd, site(a->rng, gl, SITE_RESX), off);
		o->layernorm_fwd(y->xln, y->xln_mean, y->xln_rstd, y->xres, P(XLN_W), P(XLN_B), N, C,
				 c->eps);
	}
}

/* Its backward, from a->dbtc = d xln (the MLP's input gradient, the post-LN residual's part
 * added) and a->dres = d xres's identity part: a->dres becomes d xres, a->dbtc d ln2 (summed
 * over the TP ranks); the key/value input gradient is added to a->dxsrc (this rank's part) */
static void xattn_bwd(struct model *m, struct model_acts *a, int l)
{
	const struct ops *o = m->ops;
	const struct model_config *c = &m->cfg;
	int B = m->B, T = a->stk->T, Tk = a->xT, N = B * T, C = c->hidden, tp = c->tp;
	int NH = c->heads / tp, HD = C / c->heads;
	size_t NC = (size_t)N * C;
	float hd = m->eval_mode ? 0 : c->hidden_dropout, ad = m->eval_mode ? 0 : c->attention_dropout;
	uint64_t off = a->sample0 * (uint64_t)T * (uint64_t)C;
	struct block_acts *y = &a->l[l];
	int gl = a->stk->l0 + l;

	/* dres = d xres, dbtc = d xproj through the residual dropout */
	if (o->layernorm_bwd_dropout) {
		o->layernorm_bwd_dropout(a->dres, a->dbtc, G(XLN_W), G(XLN_B), a->dbtc, y->xres,
					 P(XLN_W), y->xln_mean, y->xln_rstd, N, C, hd,
					 site(a->rng, gl, SITE_RESX), off);
	} else {
		o->layernorm_bwd(a->dres, G(XLN_W), G(XLN_B), a->dbtc, y->xres, P(XLN_W), y->xln_mean,
				 y->xln_rstd, N, C);
		o->dropout_bwd(a->dbtc, a->dres, NC, hd, site(a->rng, gl, SITE_RESX), off);
	}
	o->matmul_bwd(a->dbtc2, G(XPROJ_W), G(XPROJ_B), a->dbtc, y->xatty, P(XPROJ_W), N, C / tp, C);
	/* dq into dqkv's first N*C/tp, dkv into dxkv */
	o->xattn_bwd(a->dqkv, a->dxkv, a->dbtc2, y->xq, y->xkv, y->xatty, y->xlse, B, T, Tk, NH, HD,
		     xattn_keys(m, a, gl, ad));
	o->matmul_bwd(a->dbtc, G(XQ_W), G(XQ_B), a->dqkv, y->ln2, P(XQ_W), N, C, C / tp);
	if (tp > 1)
		tp_sum(m, a->dbtc, NC);
	o->matmul_bwd(a->dxin, G(XKV_W), G(XKV_B), a->dxkv, a->xsrc, P(XKV_W), B * Tk, C, 2 * C / tp);
	o->add(a->dxsrc, a->dxin, (size_t)B * Tk * C);
}

void block_fwd(struct model *m, struct model_acts *a, int l, const void *res)
{
	const struct ops *o = m->ops;
	const struct model_config *c = &m->cfg;
	const struct model_stack *sk = a->stk;
	int B = m->B, T = sk->T, N = B * T, C = c->hidden, tp = c->tp;
	int NH = c->heads / tp, HD = C / c->heads, F = c->ffn / tp;
	size_t NC = (size_t)N * C;
	float hd = m->eval_mode ? 0 : c->hidden_dropout, ad = m->eval_mode ? 0 : c->attention_dropout;
	int tpar = tp > 1, fuse = o->residual_layernorm_fwd != NULL;
	uint64_t rng = a->rng, off = a->sample0 * (uint64_t)T * (uint64_t)C;
	struct block_acts *y = &a->l[l];
	int gl = sk->l0 + l;   /* dropout keys by global layer: any pipeline split, same masks */

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
	/* the MLP's input and residual: post_attention_layernorm's, or in a decoder layer
	 * post_inter_attention_layernorm's after the cross-attention */
	const void *mlp_in = y->ln2, *mlp_res = c->post_ln_residual ? y->ln2 : y->res2;
	if (sk->cross) {
		xattn_fwd(m, a, l, mlp_res);
		mlp_in = y->xln;
		mlp_res = c->post_ln_residual ? y->xln : y->xres;
	}
	if (o->matmul_gelu_fwd) {   /* one pass: the GEMM's epilogue applies the GeLU */
		o->matmul_gelu_fwd(y->fchg, y->fch, mlp_in, P(FC_W), P(FC_B), N, C, F);
	} else {
		o->matmul_fwd(y->fch, mlp_in, P(FC_W), P(FC_B), N, C, F);
		o->gelu_fwd(y->fchg, y->fch, (size_t)N * F);
	}
	o->matmul_fwd(y->fcproj, y->fchg, P(FCPROJ_W), c->tp_rank ? NULL : P(FCPROJ_B), N, F, C);
	if (tpar)
		tp_sum(m, y->fcproj, NC);
	if (fuse && l + 1 < sk->nl && !starts_chunk(m, l + 1)) {   /* with the next layer's LN1 */
		struct block_acts *z = &a->l[l + 1];
		o->residual_layernorm_fwd(y->res3, z->ln1, z->ln1_mean, z->ln1_rstd, mlp_res,
					  y->fcproj, model_param(m, layer_tensor(a, l + 1, LN1_W)),
					  model_param(m, layer_tensor(a, l + 1, LN1_B)), N, C,
					  c->eps, hd, site(rng, gl, SITE_RES3), off);
	} else {
		o->residual_fwd(y->res3, mlp_res, y->fcproj, NC, hd, site(rng, gl, SITE_RES3), off);
	}
}

void block_bwd(struct model *m, struct model_acts *a, int l)
{
	const struct ops *o = m->ops;
	const struct model_config *c = &m->cfg;
	const struct model_stack *sk = a->stk;
	int B = m->B, T = sk->T, N = B * T, C = c->hidden, tp = c->tp;
	int NH = c->heads / tp, HD = C / c->heads, F = c->ffn / tp;
	size_t NC = (size_t)N * C;
	float hd = m->eval_mode ? 0 : c->hidden_dropout, ad = m->eval_mode ? 0 : c->attention_dropout;
	int tpar = tp > 1, fuse = o->layernorm_bwd_dropout != NULL;
	uint64_t rng = a->rng, off = a->sample0 * (uint64_t)T * (uint64_t)C;
	struct block_acts *y = &a->l[l];
	int gl = sk->l0 + l;
	void *res = l ? a->l[l - 1].res3 : a->encoded;
	const void *mlp_in = sk->cross ? y->xln : y->ln2;

	/* dres = d res3: through the MLP branch; the identity path keeps dres as it is (the layer
	 * above's fused layer-norm backward already did it, within a chunk) */
	if (!fuse || l == sk->nl - 1 || starts_chunk(m, l + 1))
		o->dropout_bwd(a->dbtc, a->dres, NC, hd, site(rng, gl, SITE_RES3), off);
	if (o->matmul_dgelu_bwd) {
		o->matmul_dgelu_bwd(a->dbtf, G(FCPROJ_W), G(FCPROJ_B), a->dbtc, y->fchg, P(FCPROJ_W),
				    y->fch, N, F, C);
	} else {
		o->matmul_bwd(a->dbtf, G(FCPROJ_W), G(FCPROJ_B), a->dbtc, y->fchg, P(FCPROJ_W), N, F, C);
		o->gelu_bwd(a->dbtf, y->fch, a->dbtf, (size_t)N * F);
	}
	o->matmul_bwd(a->dbtc, G(FC_W), G(FC_B), a->dbtf, mlp_in, P(FC_W), N, C, F);
	if (tpar)   /* column-parallel: the input gradient is a sum over the ranks */
		tp_sum(m, a->dbtc, NC);
	if (c->post_ln_residual) {   /* the identity path enters at the LN's output */
		o->add(a->dbtc, a->dres, NC);
		o->zero(a->dres, NC * o->act_size);
	}
	if (sk->cross) {   /* dres = d xres, dbtc = d ln2 */
		xattn_bwd(m, a, l);
		if (c->post_ln_residual) {
			o->add(a->dbtc, a->dres, NC);
			o->zero(a->dres, NC * o->act_size);
		}
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

void stack_fwd(struct model *m, struct model_acts *a)
{
	void *res = a->encoded;
	for (int l = 0; l < a->stk->nl; l++) {
		block_fwd(m, a, l, res);
		res = a->l[l].res3;
	}
}

void *stack_out(struct model *m, struct model_acts *a)
{
	(void)m;
	return a->stk->nl ? a->l[a->stk->nl - 1].res3 : a->encoded;
}

/* layer l's backward is queued: its tensors' gradients are final (model.h grads_ready) */
static void layer_done(struct model *m, const struct model_stack *st, int l)
{
	if (m->grads_ready)
		m->grads_ready(m, st->t0 + l * st->per, st->t0 + (l + 1) * st->per, m->grads_ctx);
}

void stack_bwd(struct model *m, struct model_acts *a)
{
	int nl = a->stk->nl;
	if (!m->cfg.ckpt_layers) {
		for (int l = nl - 1; l >= 0; l--) {
			block_bwd(m, a, l);
			layer_done(m, a->stk, l);
		}
		return;
	}
	/* chunk by chunk from the last: recompute its layers from its input (the previous chunk's
	 * kept output, or the stage's input), then their backward */
	int n = m->cfg.ckpt_layers;
	for (int hi = nl; hi > 0;) {
		int lo = (hi - 1) / n * n;
		for (int l = lo; l < hi; l++)
			block_fwd(m, a, l, l ? a->l[l - 1].res3 : a->encoded);
		for (int l = hi - 1; l >= lo; l--) {
			block_bwd(m, a, l);
			layer_done(m, a->stk, l);
		}
		hi = lo;
	}
}

/* ---- layer norm, dense ---- */

void ln_fwd(struct model *m, void *out, float *mean, float *rstd, const void *inp, int w, int b,
	    int N, float eps)
{
	m->ops->layernorm_fwd(out, mean, rstd, inp, model_param(m, w), model_param(m, b), N,
			      m->cfg.hidden, eps);
}

void ln_bwd(struct model *m, void *dinp, const void *dout, const void *inp, int w, int b,
	    const float *mean, const float *rstd, int N)
{
	m->ops->layernorm_bwd(dinp, model_grad(m, w), model_grad(m, b), dout, inp,
			      model_param(m, w), mean, rstd, N, m->cfg.hidden);
}

void dense_fwd(struct model *m, void *out, void *pre, const void *inp, int w, int b, int N,
	       int IC, int OC, int act)
{
	const struct ops *o = m->ops;
	size_t n = (size_t)N * OC;
	o->matmul_fwd(act == DENSE_NONE ? out : pre, inp, model_param(m, w),
		      b >= 0 ? model_param(m, b) : NULL, N, IC, OC);
	if (act == DENSE_GELU_TANH)
		o->gelu_fwd(out, pre, n);
	else if (act == DENSE_GELU_ERF)
		o->gelu_erf_fwd(out, pre, n);
	else if (act == DENSE_TANH)
		o->tanh_fwd(out, pre, n);
}

void dense_bwd(struct model *m, void *dinp, void *dpre, const void *dout, const void *out,
	       const void *pre, const void *inp, int w, int b, int N, int IC, int OC, int act)
{
	const struct ops *o = m->ops;
	size_t n = (size_t)N * OC;
	const void *d = dout;
	if (act == DENSE_GELU_TANH)
		o->gelu_bwd(dpre, pre, dout, n);
	else if (act == DENSE_GELU_ERF)
		o->gelu_erf_bwd(dpre, pre, dout, n);
	else if (act == DENSE_TANH)
		o->tanh_bwd(dpre, out, dout, n);
	if (act != DENSE_NONE)
		d = dpre;
	o->matmul_bwd(dinp, model_grad(m, w), b >= 0 ? model_grad(m, b) : NULL, d, inp,
		      model_param(m, w), N, IC, OC);
}

/* ---- the LM logits and loss ---- */

/* Cross-entropy over a vocabulary split across the TP ranks: each rank's slice statistics
 * (max, sum of exponentials, the target's logit where it owns the target) are combined into
 * the global log-sum-exp - B*T numbers - and each rank then writes the gradient of its slice.
 * Targets outside the real vocabulary get loss 0 and gradient 0 (lse = +inf).  Combined on the
 * host, or in a deferred step (m->dstep) on the device with the same float arithmetic (ops.h
 * xent_rescale, xent_finish): the loss summed into dstep, the bad targets counted in
 * bad_targets, nothing read back. */
static void vocab_parallel_xent(struct model *m, struct model_acts *a, const int32_t *targets,
				float dscale, int *bad)
{
	const struct ops *o = m->ops;
	int N = m->B * a->stk->T, Vp = m->cfg.padded_vocab / m->cfg.tp;
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
	o->xent_stats(m->dev_stats, m->dev_stats + N, m->dev_stats + 2 * N, a->logits,
		      m->targets_local, N, m->vocab_valid, Vp);
	if (m->dstep) {
		float *dmx = m->dev_stats, *dse = dmx + N, *dzt = dse + N, *dl = dzt + N;
		o->copy(dl, dmx, (size_t)N * sizeof *dl);   /* dl: the group's max, then lse */
		m->dist->dev_reduce(m->dist, DIST_TP, dl, (size_t)N, DIST_F32, DIST_MAX);
		o->xent_rescale(dse, dmx, dl, N);
		m->dist->sum_f32(m->dist, DIST_TP, dse, 2 * (size_t)N);   /* se and zt, adjacent */
		o->xent_finish(m->losses, dl, dl, dse, dzt, m->targets, N, m->cfg.vocab,
			       m->bad_targets);
		o->xent_grad(a->logits, dl, m->targets_local, N, m->vocab_valid, Vp, dscale);
		*bad = 0;
		return;
	}
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
	o->xent_grad(a->logits, m->dev_stats + 3 * N, m->targets_local, N, m->vocab_valid, Vp, dscale);
}

double lm_xent_fwd(struct model *m, struct model_acts *a, const void *x, int bias,
		   const int32_t *targets, const uint8_t *mask, float dscale, float *logits_out,
		   int *bad, int *kept_out)
{
	const struct ops *o = m->ops;
	const struct model_config *c = &m->cfg;
	int N = m->B * a->stk->T, C = c->hidden, tp = c->tp, Vp = c->padded_vocab / tp;
	/* a masked target is -1 (loss 0 and gradient 0 in the cross-entropy), and the mean is
	 * over the rest, so each kept token weighs 1/kept as in Megatron's sum(loss*mask) /
	 * sum(mask) */
	int masked = 0;
	if (mask) {
		for (int i = 0; i < N; i++) {
			m->host_tgt[i] = mask[i] ? targets[i] : -1;
			masked += !mask[i];
		}
		targets = m->host_tgt;
	}
	int kept = N - masked;
	float tscale = kept ? dscale / kept : 0.0f;
	o->to_device(m->targets, targets, (size_t)N * sizeof *targets);
	o->matmul_fwd(a->logits, x, model_param(m, m->wte), bias >= 0 ? model_param(m, bias) : NULL,
		      N, C, Vp);
	if (logits_out) {
		size_t bytes = (size_t)N * Vp * sizeof(float);
		float *tmp = model_alloc_transient(m, bytes);
		o->act_to_f32(tmp, a->logits, (size_t)N * Vp);
		o->to_host(logits_out, tmp, bytes);
		model_free_transient(m, tmp, bytes);
	}
	if (m->dstep) {   /* nothing comes back to the host (model.h dstep) */
		if (tp > 1)
			vocab_parallel_xent(m, a, targets, tscale, bad);
		else
			o->xent_fwd_bwd(m->losses, a->logits, m->targets, N, c->vocab, Vp, tscale,
					m->bad_targets);
		o->loss_acc(&m->dstep->loss[0], m->losses, N, kept);
		m->dstep_masked += masked;
		*bad = 0;
		*kept_out = kept;
		return 0.0;
	}
	o->zero(m->bad_targets, sizeof *m->bad_targets);
	if (tp > 1) {
		vocab_parallel_xent(m, a, targets, tscale, bad);
	} else {
		o->xent_fwd_bwd(m->losses, a->logits, m->targets, N, c->vocab, Vp, tscale,
				m->bad_targets);
	}
	float *losses = m->host_stats;   /* (N) host scratch, allocated once */
	o->to_host(losses, m->losses, (size_t)N * sizeof *losses);
	if (tp == 1)
		o->to_host(bad, m->bad_targets, sizeof *bad);
	*bad -= masked;   /* the masked targets are not bad data */
	double sum = 0;
	for (int i = 0; i < N; i++)
		sum += losses[i];
	*kept_out = kept;
	return kept ? sum / kept : 0.0;
}

void lm_logits_bwd(struct model *m, struct model_acts *a, void *dx, const void *x, int bias)
{
	const struct ops *o = m->ops;
	const struct model_config *c = &m->cfg;
	int N = m->B * a->stk->T, C = c->hidden, tp = c->tp, Vp = c->padded_vocab / tp;
	/* logits already hold dloss/dlogits (fused into the forward's cross-entropy) */
	o->matmul_bwd(dx, model_grad(m, m->wte), bias >= 0 ? model_grad(m, bias) : NULL, a->logits,
		      x, model_param(m, m->wte), N, C, Vp);
	if (tp > 1)   /* each rank's slice of the vocabulary contributes to dx */
		tp_sum(m, dx, (size_t)N * C);
}
