/* state - see state.h. */
#include "train/optim/state.h"

#include <stdio.h>
#include <stdlib.h>

#include "msg.h"
#include "train/optim/bnb.h"

void optim_state_rule(struct model_config *cfg)
{
	cfg->state_block = cfg->bnb ? BNB_BLOCK : 0;
	cfg->state_block_min = cfg->bnb ? BNB_MIN_8BIT : 0;
}

/* 1 when tensor i keeps 8-bit state: bnb, at least BNB_MIN_8BIT local elements, not the word
 * embedding (StableEmbedding's state stays fp32: GlobalOptimManager's optim_bits 32) */
static int tensor_q8(const struct model *m, int i)
{
	return m->cfg.bnb && i != m->wte && bnb_is_8bit(m->tensors[i].numel);
}

void optim_state_layout(const struct model *m, int r, struct model_ostate *ost, size_t *n32,
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

/* One state buffer of `bytes`, or `least` when that is 0, counted in the model's memory; adds
 * to *total. */
static void *state_alloc(struct model *m, size_t bytes, size_t least, size_t *total)
{
	bytes = bytes ? bytes : least;
	*total += bytes;
	return model_alloc(m, bytes, 0);
}

int optim_state_init(struct model *m, char *err, size_t errlen)
{
	const struct ops *ops = m->ops;
	struct model_config rule = m->cfg;
	size_t n32, n8, nblk, asked = 0;
	optim_state_rule(&rule);
	if (m->cfg.state_block != rule.state_block || m->cfg.state_block_min != rule.state_block_min)
		return errf(err, errlen, "internal error: the model's parameters were laid out without "
			    "the optimizer's rule (optim_state_rule before model_init)");
	if (!(m->ost = calloc(m->ntensors ? m->ntensors : 1, sizeof *m->ost)))
		goto oom;
	optim_state_layout(m, m->cfg.zero_dp > 1 ? m->cfg.zero_rank : -1, m->ost, &n32, &n8, &nblk);
	m->adam_m = state_alloc(m, n32 * sizeof(float), sizeof(float), &asked);
	m->adam_v = state_alloc(m, n32 * sizeof(float), sizeof(float), &asked);
	if (!m->adam_m || !m->adam_v)
		goto oom;
	m->opt_bytes = 2 * n32 * sizeof(float);
	if (m->cfg.bnb) {
		float map[512];
		m->q1 = state_alloc(m, n8, 1, &asked);
		m->q2 = state_alloc(m, n8, 1, &asked);
		m->absmax1 = state_alloc(m, nblk * sizeof(float), sizeof(float), &asked);
		m->absmax2 = state_alloc(m, nblk * sizeof(float), sizeof(float), &asked);
		m->qmap = state_alloc(m, sizeof map, 1, &asked);
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
		if (m->naseg && !(m->aseg = state_alloc(m, m->naseg * sizeof *sg, 1, &asked))) {
			free(sg);
			goto oom;
		}
		if (m->naseg)
			ops->to_device(m->aseg, sg, m->naseg * sizeof *sg);
		free(sg);
	}
	return 0;
oom:
	return errf(err, errlen, "out of memory on the %s device: the optimizer state of %zu "
		    "parameters (%zu bytes asked for so far, after %zu for the model); try ZeRO-1 "
		    "(--zero-stage 1 over data-parallel ranks) or a smaller model", ops->name, m->nparams, asked,
		    m->mem_now);
}

void optim_state_zero(struct model *m)
{
	size_t n32, n8, nblk;
	optim_state_layout(m, m->cfg.zero_rank, NULL, &n32, &n8, &nblk);
	m->ops->zero(m->adam_m, n32 * sizeof(float));
	m->ops->zero(m->adam_v, n32 * sizeof(float));
	if (m->cfg.bnb) {
		m->ops->zero(m->q1, n8);
		m->ops->zero(m->q2, n8);
		m->ops->zero(m->absmax1, nblk * sizeof(float));
		m->ops->zero(m->absmax2, nblk * sizeof(float));
	}
}
