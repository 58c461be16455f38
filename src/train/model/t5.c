/* t5 - Megatron-LM's T5Model (megatron/model/t5_model.py, language_model.py with add_decoder,
 * transformer.py's LayerType.decoder, as of 2021-22: fabad461, September 2022), composed from
 * layers.h:
 *
 *   e      = word[enc] + position[0..Te-1] -> dropout          one Embedding, shared
 *   e      = the encoder's blocks, BIDIRECTIONAL under the padding mask (each sample's first
 *            klen[b] = real encoder tokens), then encoder.final_layernorm
 *   d      = word[dec] + position[0..Td-1] -> dropout          the same tables
 *   d      = the decoder's blocks: CAUSAL self-attention, then cross-attention (queries from d,
 *            keys and values from e, every query seeing e's first klen[b] positions), then the
 *            MLP, each a bias-dropout-add; then decoder.final_layernorm
 *   logits = d wte^T + bias                                     T5LMHead: the tied word
 *            embeddings and a vocab-parallel bias, no transform
 *   loss   = sum(CE(logits, labels) * loss_mask) / sum(loss_mask)  pretrain_t5.py's lm loss
 *
 * Both stacks have --num-layers layers (this Megatron has no --encoder-num-layers; it came in
 * October 2022), both output layers scaled by 1/sqrt(2 num_layers) at initialisation
 * (scaled_init_method_normal(init_method_std, num_layers)), no token types.
 *
 * The masks.  pretrain_t5.py passes T5Dataset's three (S, S) masks (bertdata.h): enc_mask
 * (both positions real), dec_mask (both real, key not after query) and enc_dec_mask (decoder
 * query real, encoder key real), and FusedScaleMaskSoftmax fills masked scores with -10000.
 * The samples' padding is a suffix (real = id >= 1, and the pad id is [PAD] = 0 in BERT's
 * vocabularies), so as with BERT (bert.c) each attention here takes the encoder's real length
 * klen[b] and lets every query - padded ones too - see keys [0, klen[b]) of the encoder, and
 * the decoder's self-attention is causal alone: a real decoder query's keys j <= i are real.
 * Real positions get Megatron's values; padded positions get other values (Megatron's padded
 * queries average every key uniformly), which no real position reads - no real query attends
 * to them, the loss mask is 0 on the decoder's padding - so the loss and every gradient are
 * Megatron's; only the logits at padded decoder positions differ.  (A token of id 0 inside a
 * sample - possible only with a vocabulary that gives [PAD] another id and a word id 0 - would
 * be a masked key to Megatron and a real one here.)
 *
 * Tensor parallelism: the blocks split as GPT's, the cross-attention's query and key_value
 * column-parallel (a rank's heads), its dense row-parallel; the encoder output's gradient, to
 * which every decoder layer's key/value projection contributes, is summed over the TP ranks
 * once the decoder is done; the word embeddings, the logits, their bias and the cross-entropy
 * are vocab-parallel.  No pipeline parallelism (Megatron's T5 needs
 * --pipeline-model-parallel-split-rank to place the encoder and decoder; train refuses PP > 1).
 *
 * Dropout keys: the encoder's layers are layers 0..L-1, the decoder's L..2L-1 (layers.h), so no
 * two sites share a stream. */
#include <string.h>

#include "train/model/layers.h"

static void t5_table(struct model *m)
{
	const struct model_config *c = &m->cfg;
	float std = c->init_std;
	int C = c->hidden;
	m->wte = model_add_tensor(m, "word_embeddings.weight", c->padded_vocab, C, 1, SPLIT_VOCAB,
				  std);
	m->wpe = model_add_tensor(m, "position_embeddings.weight", c->max_pos, C, 1, SPLIT_NONE,
				  std);
	m->layer0 = m->ntensors;
	for (int l = 0; l < m->nl; l++)
		stack_add_layer(m, "encoder.", l, 0);
	m->elnf_w = model_add_tensor(m, "encoder.final_layernorm.weight", C, 0, 0, SPLIT_NONE, -1);
	m->elnf_b = model_add_tensor(m, "encoder.final_layernorm.bias", C, 0, 0, SPLIT_NONE, 0);
	for (int l = 0; l < m->nl; l++)
		stack_add_layer(m, "decoder.", l, 1);
	m->lnf_w = model_add_tensor(m, "decoder.final_layernorm.weight", C, 0, 0, SPLIT_NONE, -1);
	m->lnf_b = model_add_tensor(m, "decoder.final_layernorm.bias", C, 0, 0, SPLIT_NONE, 0);
	m->lm_bias = model_add_tensor(m, "lm_head.bias", c->padded_vocab, 0, 0, SPLIT_VOCAB, 0);
}

/* [0] the encoder over --encoder-seq-length, [1] the decoder over --decoder-seq-length */
static void t5_stacks(struct model *m)
{
	int L = m->nl;
	m->nstk = 2;
	m->stk[0] = (struct model_stack){.t0 = m->layer0, .per = LAYER_TENSORS, .nl = L, .l0 = 0,
					 .mask = ATTN_BIDIR, .T = m->cfg.seq};
	m->stk[1] = (struct model_stack){.t0 = m->elnf_b + 1, .per = XLAYER_TENSORS, .nl = L,
					 .l0 = L, .mask = ATTN_CAUSAL, .cross = 1,
					 .T = m->cfg.dec_seq};
}

/* the encoder's output (its final layer norm), the decoder's and its logits */
static void t5_carve(struct model *m, struct model_acts *a, struct carver *k)
{
	size_t N = (size_t)m->B * a->stk->T, C = m->cfg.hidden, Vp = m->cfg.padded_vocab / m->cfg.tp;
	a->lnf = carve_act(k, N * C);
	a->lnf_mean = carve_f32(k, N);
	a->lnf_rstd = carve_f32(k, N);
	if (!a->stk->cross)
		return;
	a->logits = carve_act(k, N * Vp);
	k->counted += N * Vp;
}

static double t5_forward(struct model *m, const struct model_batch *b, float dscale,
			 uint64_t rng, uint64_t sample0, float *logits_out, int *bad)
{
	const struct ops *o = m->ops;
	const struct model_config *c = &m->cfg;
	struct model_acts *e = &m->xact[m->slot], *d = &m->act[m->slot];
	int B = m->B, Te = e->stk->T, Td = d->stk->T, kept;

	*bad = 0;
	e->rng = d->rng = rng;
	e->sample0 = d->sample0 = sample0;
	/* the padding mask of the encoder's keys, for its self-attention and the cross-attention */
	for (int i = 0; i < B; i++) {
		int len = b->lens ? b->lens[i] : Te;
		m->host_ids[i] = len < 1 ? 1 : len > Te ? Te : len;
	}
	o->to_device(e->klen, m->host_ids, (size_t)B * sizeof *m->host_ids);
	o->to_device(d->klen, m->host_ids, (size_t)B * sizeof *m->host_ids);

	embedding_fwd(m, e, b->tokens, NULL);
	stack_fwd(m, e);
	ln_fwd(m, e->lnf, e->lnf_mean, e->lnf_rstd, stack_out(m, e), m->elnf_w, m->elnf_b, B * Te,
	       c->eps);
	d->xsrc = e->lnf;
	embedding_fwd(m, d, b->dec_tokens, NULL);
	stack_fwd(m, d);
	ln_fwd(m, d->lnf, d->lnf_mean, d->lnf_rstd, stack_out(m, d), m->lnf_w, m->lnf_b, B * Td,
	       c->eps);
	m->loss_lm = lm_xent_fwd(m, d, d->lnf, m->lm_bias, b->targets, b->loss_mask, dscale,
				 logits_out, bad, &kept);
	m->loss_sop = 0;
	return m->loss_lm;
}

static void t5_backward(struct model *m)
{
	const struct ops *o = m->ops;
	struct model_acts *e = &m->xact[m->slot], *d = &m->act[m->slot];
	size_t C = m->cfg.hidden, Ne = (size_t)m->B * e->stk->T, Nd = (size_t)m->B * d->stk->T;

	/* the LM head and the decoder's final layer norm: dres = d (decoder stack output) */
	lm_logits_bwd(m, d, d->dbtc, d->lnf, m->lm_bias);
	o->zero(d->dres, Nd * C * o->act_size);
	ln_bwd(m, d->dres, d->dbtc, stack_out(m, d), m->lnf_w, m->lnf_b, d->lnf_mean, d->lnf_rstd,
	       (int)Nd);
	/* the decoder, its layers adding their key/value input gradients into dxsrc */
	o->zero(d->dxsrc, Ne * C * o->act_size);
	stack_bwd(m, d);
	embedding_bwd(m, d);
	if (m->cfg.tp > 1)   /* each rank's heads' share of the encoder output's gradient */
		layers_tp_sum(m, d->dxsrc, Ne * C);
	/* the encoder's final layer norm, the encoder, the shared embeddings again */
	o->zero(e->dres, Ne * C * o->act_size);
	ln_bwd(m, e->dres, d->dxsrc, stack_out(m, e), m->elnf_w, m->elnf_b, e->lnf_mean, e->lnf_rstd,
	       (int)Ne);
	stack_bwd(m, e);
	embedding_bwd(m, e);
}

const struct model_arch model_arch_t5 = {
	.name = "t5",
	.build_table = t5_table,
	.carve = t5_carve,
	.forward = t5_forward,
	.backward = t5_backward,
	.max_tensors = 7,
	.layer_tensors = LAYER_TENSORS + XLAYER_TENSORS,
	.stacks = t5_stacks,
};
