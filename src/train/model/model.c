/* model - see model.h.  What every architecture shares: the tensor table and the buffers of
 * the same layout (working weights, fp32 master, gradients; the optimizer state's buffers,
 * which optim/state.c sizes), initialisation, ZeRO-1's shards, the activation slots and the recompute workspace,
 * the pipeline stage's hand-over points.  The architecture (gpt.c, bert.c, t5.c; layers.h) lists
 * its tensors and composes the forward and backward. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"
#include "train/model/model.h"
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

void model_zero_chunk(const struct model *m, int k, int r, size_t *lo, size_t *hi)
{
	size_t c = (m->zb[k].hi - m->zb[k].lo) / (size_t)m->cfg.zero_dp;
	*lo = m->zb[k].lo + (size_t)r * c;
	*hi = *lo + c;
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

void *model_alloc(struct model *m, size_t bytes, int act)
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

int model_positions_init(struct model *m)
{
	m->Tcur = 0;
	if (m->nstk > 1) {   /* T5: each stack's positions 0..T-1, once (no curriculum) */
		for (int s = 0; s < m->nstk; s++)
			if (set_positions(m, s == m->nstk - 1 ? m->act : m->xact, m->stk[s].T) < 0)
				return -1;
		m->Tcur = m->T;
		return 0;
	}
	return model_set_seq(m, m->T);
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
	void *p = model_alloc(m, bytes, 1);
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
