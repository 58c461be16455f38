/* gpt - the GPT/BLOOM decoder as Megatron builds it (GPTModel; BLOOM's ALiBi and embedding
 * layer norm), composed from layers.h: embedding, causal blocks (within documents under
 * --reset-attention-mask), the final layer norm, the logits of the tied word embeddings and the
 * cross-entropy against the next token (without the end-of-document positions under
 * --eod-mask-loss). */
#include "train/model/layers.h"

static void gpt_table(struct model *m)
{
	const struct model_config *c = &m->cfg;
	float std = c->init_std;
	if (m->first) {
		m->wte = model_add_tensor(m, "word_embeddings.weight", c->padded_vocab, c->hidden, 1,
					  SPLIT_VOCAB, std);
		m->wpe = c->alibi ? -1 : model_add_tensor(m, "position_embeddings.weight", c->max_pos,
							  c->hidden, 1, SPLIT_NONE, std);
		if (c->embed_ln) {
			m->eln_w = model_add_tensor(m, "embed_layernorm.weight", c->hidden, 0, 0,
						    SPLIT_NONE, -1);
			m->eln_b = model_add_tensor(m, "embed_layernorm.bias", c->hidden, 0, 0,
						    SPLIT_NONE, 0);
		}
	}
	m->layer0 = m->ntensors;
	for (int l = m->l0; l < m->l0 + m->nl; l++)
		block_add_tensors(m, l);
	if (m->last) {
		m->lnf_w = model_add_tensor(m, "final_layernorm.weight", c->hidden, 0, 0, SPLIT_NONE, -1);
		m->lnf_b = model_add_tensor(m, "final_layernorm.bias", c->hidden, 0, 0, SPLIT_NONE, 0);
		if (!m->first)   /* the tied output layer: a copy, kept equal by summing gradients */
			m->wte = model_add_tensor(m, "word_embeddings.weight", c->padded_vocab, c->hidden,
						  1, SPLIT_VOCAB, std);
	}
}

static void gpt_carve(struct model *m, struct model_acts *a, struct carver *k)
{
	size_t N = (size_t)m->B * m->T, C = m->cfg.hidden, Vp = m->cfg.padded_vocab / m->cfg.tp;
	if (!m->last)
		return;
	a->lnf = carve_act(k, N * C);
	a->lnf_mean = carve_f32(k, N);
	a->lnf_rstd = carve_f32(k, N);
	a->logits = carve_act(k, N * Vp);
	k->counted += N * Vp;
}

static double gpt_forward(struct model *m, const struct model_batch *b, float dscale,
			  uint64_t rng, uint64_t sample0, float *logits_out, int *bad)
{
	const struct model_config *c = &m->cfg;
	struct model_acts *a = &m->act[m->slot];
	int N = m->B * m->Tcur, kept;

	*bad = 0;
	a->rng = rng;
	a->sample0 = sample0;
	if (c->reset_attention_mask || (c->reset_position_ids && m->first && m->wpe >= 0))
		layers_doc_masks(m, a, b->tokens);
	if (m->first)
		embedding_fwd(m, a, b->tokens, NULL);
	/* else: the previous stage's output was received into a->encoded */
	stack_fwd(m, a);
	if (!m->last)
		return 0;   /* the stack's output goes on to the next stage */

	/* --eod-mask-loss: no loss, and no gradient, where the input token is the end of
	 * document */
	const uint8_t *mask = NULL;
	if (c->eod_mask_loss) {
		for (int i = 0; i < N; i++)
			m->host_mask[i] = b->tokens[i] != c->eod;
		mask = m->host_mask;
	}
	ln_fwd(m, a->lnf, a->lnf_mean, a->lnf_rstd, stack_out(m, a), m->lnf_w, m->lnf_b, N, c->eps);
	m->loss_lm = lm_xent_fwd(m, a, a->lnf, -1, b->targets, mask, dscale, logits_out, bad, &kept);
	m->loss_sop = 0;
	return m->loss_lm;
}

static void gpt_backward(struct model *m)
{
	const struct ops *o = m->ops;
	struct model_acts *a = &m->act[m->slot];
	int N = m->B * m->Tcur;

	if (m->last) {
		lm_logits_bwd(m, a, a->dbtc, a->lnf, -1);
		o->zero(a->dres, (size_t)N * m->cfg.hidden * o->act_size);
		ln_bwd(m, a->dres, a->dbtc, stack_out(m, a), m->lnf_w, m->lnf_b, a->lnf_mean,
		       a->lnf_rstd, N);
	}
	/* else: the next stage's gradient of this stage's output was received into a->dres */
	stack_bwd(m, a);
	if (m->first)
		embedding_bwd(m, a);
	/* else: a->dres, the gradient of this stage's input, goes back to the previous stage */
}

const struct model_arch model_arch_gpt = {
	.name = "gpt",
	.build_table = gpt_table,
	.carve = gpt_carve,
	.forward = gpt_forward,
	.backward = gpt_backward,
	.max_tensors = 7,
};
