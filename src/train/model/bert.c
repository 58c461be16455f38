/* bert - Megatron-LM's BertModel (megatron/model/bert_model.py, language_model.py,
 * transformer.py, as of 2021-22), composed from layers.h:
 *
 *   h      = word[tokens] + position[0..T-1] + tokentype[types] -> dropout
 *   h      = the blocks: pre-LN as GPT's (Megatron's post-LN residual with
 *            --apply-residual-connection-post-layernorm), BIDIRECTIONAL attention under the
 *            padding mask, then the final layer norm
 *   lm     = LN(gelu(h W_d + b_d)) wte^T + bias        BertLMHead: dense, torch's erf GeLU (tanh
 *            with --openai-gelu), layer norm, the tied word embeddings, a vocab-parallel bias
 *   pooled = tanh(h[:, 0] W_p + b_p)                    Pooler, position 0 ([CLS])
 *   sop    = pooled W_b + b_b                           binary head (2 logits)
 *   loss   = sum(CE(lm, labels) * loss_mask) / sum(loss_mask) + CE(sop, is_random) (mean over
 *            the samples); --bert-no-binary-head drops the pooler, the binary head and the
 *            sop loss (Megatron adds the pooler only with the binary head)
 *
 * The padding mask.  Megatron's bert_extended_attention_mask masks score (i, j) when position i
 * or position j is padding, and FusedScaleMaskSoftmax fills masked scores with -10000: a real
 * query's padded keys get weight exp(-10000 - max) = 0 in fp32, so a real position attends to
 * exactly the real keys; a padded query's row is all -10000, a uniform average over every key.
 * BertDataset's padding is a suffix, so lmtk's attention takes each sample's real length
 * klen[b] and lets every query - padded ones too - see keys [0, klen[b]).  Real positions get
 * Megatron's values; padded positions get other values, which no real position ever reads (no
 * real query attends to them, the loss mask is 0 there, the pooler reads position 0), so the
 * losses and every gradient are Megatron's.  Only the logits at padded positions differ, and
 * those are outside the loss.
 *
 * Tensor parallelism: the blocks split as GPT's; the word embeddings, the LM logits, their bias
 * and the cross-entropy are vocab-parallel; the LM head's dense and layer norm, the pooler and
 * the binary head are replicated - every rank computes them from the same all-reduced inputs,
 * so their values and gradients are bit-identical across ranks.  Pipeline parallelism: the
 * embeddings on the first stage, the heads and a copy of the word embeddings (tied, gradients
 * summed) on the last, as Megatron's pre_process/post_process. */
#include <stdlib.h>
#include <string.h>

#include "train/model/layers.h"

static void bert_table(struct model *m)
{
	const struct model_config *c = &m->cfg;
	float std = c->init_std;
	int C = c->hidden;
	if (m->first) {
		m->wte = model_add_tensor(m, "word_embeddings.weight", c->padded_vocab, C, 1,
					  SPLIT_VOCAB, std);
		m->wpe = model_add_tensor(m, "position_embeddings.weight", c->max_pos, C, 1,
					  SPLIT_NONE, std);
		if (c->num_tokentypes > 0)
			m->tte = model_add_tensor(m, "tokentype_embeddings.weight", c->num_tokentypes, C,
						  1, SPLIT_NONE, std);
	}
	m->layer0 = m->ntensors;
	for (int l = m->l0; l < m->l0 + m->nl; l++)
		block_add_tensors(m, l);
	if (!m->last)
		return;
	m->lnf_w = model_add_tensor(m, "final_layernorm.weight", C, 0, 0, SPLIT_NONE, -1);
	m->lnf_b = model_add_tensor(m, "final_layernorm.bias", C, 0, 0, SPLIT_NONE, 0);
	if (c->binary_head) {
		m->pool_w = model_add_tensor(m, "pooler.dense.weight", C, C, 1, SPLIT_NONE, std);
		m->pool_b = model_add_tensor(m, "pooler.dense.bias", C, 0, 0, SPLIT_NONE, 0);
	}
	m->hd_w = model_add_tensor(m, "lm_head.dense.weight", C, C, 1, SPLIT_NONE, std);
	m->hd_b = model_add_tensor(m, "lm_head.dense.bias", C, 0, 0, SPLIT_NONE, 0);
	m->hd_ln_w = model_add_tensor(m, "lm_head.layernorm.weight", C, 0, 0, SPLIT_NONE, -1);
	m->hd_ln_b = model_add_tensor(m, "lm_head.layernorm.bias", C, 0, 0, SPLIT_NONE, 0);
	m->lm_bias = model_add_tensor(m, "lm_head.bias", c->padded_vocab, 0, 0, SPLIT_VOCAB, 0);
	if (c->binary_head) {
		m->bin_w = model_add_tensor(m, "binary_head.weight", 2, C, 1, SPLIT_NONE, std);
		m->bin_b = model_add_tensor(m, "binary_head.bias", 2, 0, 0, SPLIT_NONE, 0);
	}
	if (!m->first)   /* the tied output layer: a copy, kept equal by summing gradients */
		m->wte = model_add_tensor(m, "word_embeddings.weight", c->padded_vocab, C, 1,
					  SPLIT_VOCAB, std);
}

/* whole 16-byte pieces (8 bf16), so the buffers after a small one stay aligned */
static size_t rnd8(size_t n)
{
	return (n + 7) / 8 * 8;
}

static void bert_carve(struct model *m, struct model_acts *a, struct carver *k)
{
	size_t B = m->B, N = B * m->T, C = m->cfg.hidden, Vp = m->cfg.padded_vocab / m->cfg.tp;
	if (!m->last)
		return;
	a->lnf = carve_act(k, N * C);
	a->lnf_mean = carve_f32(k, N);
	a->lnf_rstd = carve_f32(k, N);
	a->hd_pre = carve_act(k, N * C);
	a->hd_act = carve_act(k, N * C);
	a->hd_ln = carve_act(k, N * C);
	a->hd_mean = carve_f32(k, N);
	a->hd_rstd = carve_f32(k, N);
	a->logits = carve_act(k, N * Vp);
	k->counted += 3 * N * C + N * Vp;
	if (!m->cfg.binary_head)
		return;
	a->pool_in = carve_act(k, rnd8(B * C));
	a->pool_pre = carve_act(k, rnd8(B * C));
	a->pool_out = carve_act(k, rnd8(B * C));
	a->dpool = carve_act(k, rnd8(B * C));
	a->dpool2 = carve_act(k, rnd8(B * C));
	a->bin_logits = carve_act(k, rnd8(2 * B));
	a->bin_losses = carve_f32(k, rnd8(B));
	a->bin_targets = carve_i32(k, rnd8(B));
}

static double bert_forward(struct model *m, const struct model_batch *b, float dscale,
			   uint64_t rng, uint64_t sample0, float *logits_out, int *bad)
{
	const struct ops *o = m->ops;
	const struct model_config *c = &m->cfg;
	struct model_acts *a = &m->act[m->slot];
	int B = m->B, T = m->Tcur, N = B * T, C = c->hidden, kept;

	*bad = 0;
	a->rng = rng;
	a->sample0 = sample0;
	/* the padding mask, every stage's attention: each sample's real tokens, a prefix */
	for (int i = 0; i < B; i++) {
		int len = b->lens ? b->lens[i] : T;
		m->host_ids[i] = len < 1 ? 1 : len > T ? T : len;
	}
	o->to_device(a->klen, m->host_ids, (size_t)B * sizeof *m->host_ids);
	if (m->first) {
		const int32_t *types = b->types;
		if (m->tte >= 0 && !types) {   /* all type 0 */
			memset(m->host_tgt, 0, (size_t)N * sizeof *m->host_tgt);
			types = m->host_tgt;
		}
		embedding_fwd(m, a, b->tokens, types);
	}
	stack_fwd(m, a);
	if (!m->last)
		return 0;

	int act = c->head_gelu_tanh ? DENSE_GELU_TANH : DENSE_GELU_ERF;
	ln_fwd(m, a->lnf, a->lnf_mean, a->lnf_rstd, stack_out(m, a), m->lnf_w, m->lnf_b, N, c->eps);
	dense_fwd(m, a->hd_act, a->hd_pre, a->lnf, m->hd_w, m->hd_b, N, C, C, act);
	ln_fwd(m, a->hd_ln, a->hd_mean, a->hd_rstd, a->hd_act, m->hd_ln_w, m->hd_ln_b, N, c->eps);
	m->loss_lm = lm_xent_fwd(m, a, a->hd_ln, m->lm_bias, b->targets, b->loss_mask, dscale,
				 logits_out, bad, &kept);
	m->loss_sop = 0;
	if (!c->binary_head)
		return m->loss_lm;

	/* the pooler on position 0 and the binary head: (B,C) -> (B,2), its cross-entropy (the
	 * mean over the samples) with the gradient fused as the LM's */
	o->gather_rows(a->pool_in, a->lnf, B, C, (size_t)T * C);
	dense_fwd(m, a->pool_out, a->pool_pre, a->pool_in, m->pool_w, m->pool_b, B, C, C, DENSE_TANH);
	dense_fwd(m, a->bin_logits, NULL, a->pool_out, m->bin_w, m->bin_b, B, C, 2, DENSE_NONE);
	int badsop = 0;
	for (int i = 0; i < B; i++) {
		int s = b->sop ? b->sop[i] : 0;
		m->host_ids[i] = s;
		badsop += s < 0 || s > 1;
	}
	o->to_device(a->bin_targets, m->host_ids, (size_t)B * sizeof *m->host_ids);
	o->zero(m->bad_targets, sizeof *m->bad_targets);
	o->xent_fwd_bwd(a->bin_losses, a->bin_logits, a->bin_targets, B, 2, 2, dscale / B,
			m->bad_targets);
	float *losses = m->host_stats;
	o->to_host(losses, a->bin_losses, (size_t)B * sizeof *losses);
	double sum = 0;
	for (int i = 0; i < B; i++)
		sum += losses[i];
	m->loss_sop = sum / B;
	*bad += badsop;
	return m->loss_lm + m->loss_sop;
}

static void bert_backward(struct model *m)
{
	const struct ops *o = m->ops;
	const struct model_config *c = &m->cfg;
	struct model_acts *a = &m->act[m->slot];
	int B = m->B, T = m->Tcur, N = B * T, C = c->hidden;
	size_t NC = (size_t)N * C;

	if (m->last) {
		int act = c->head_gelu_tanh ? DENSE_GELU_TANH : DENSE_GELU_ERF;
		/* the LM head: dbtc = d hd_ln, dbtc2 = d hd_act, then d lnf into dbtc */
		lm_logits_bwd(m, a, a->dbtc, a->hd_ln, m->lm_bias);
		o->zero(a->dbtc2, NC * o->act_size);
		ln_bwd(m, a->dbtc2, a->dbtc, a->hd_act, m->hd_ln_w, m->hd_ln_b, a->hd_mean, a->hd_rstd,
		       N);
		dense_bwd(m, a->dbtc, a->dbtc2, a->dbtc2, a->hd_act, a->hd_pre, a->lnf, m->hd_w,
			  m->hd_b, N, C, C, act);
		if (c->binary_head) {   /* + the pooler's, at position 0 */
			dense_bwd(m, a->dpool, NULL, a->bin_logits, NULL, NULL, a->pool_out, m->bin_w,
				  m->bin_b, B, C, 2, DENSE_NONE);
			dense_bwd(m, a->dpool2, a->dpool, a->dpool, a->pool_out, a->pool_pre, a->pool_in,
				  m->pool_w, m->pool_b, B, C, C, DENSE_TANH);
			o->scatter_add_rows(a->dbtc, a->dpool2, B, C, (size_t)T * C);
		}
		o->zero(a->dres, NC * o->act_size);
		ln_bwd(m, a->dres, a->dbtc, stack_out(m, a), m->lnf_w, m->lnf_b, a->lnf_mean,
		       a->lnf_rstd, N);
	}
	stack_bwd(m, a);
	if (m->first)
		embedding_bwd(m, a);
}

const struct model_arch model_arch_bert = {
	.name = "bert",
	.build_table = bert_table,
	.carve = bert_carve,
	.forward = bert_forward,
	.backward = bert_backward,
	.max_tensors = 17,
};
