/* optim - see optim.h. */
#include "train/optim.h"

#include <math.h>

void optim_init(struct optim *o, float b1, float b2, float eps, float wd, float clip, int fp16,
		float initial_scale, float min_scale, int window, int hysteresis)
{
	*o = (struct optim){.b1 = b1, .b2 = b2, .eps = eps, .wd = wd, .clip = clip, .fp16 = fp16,
			    .loss_scale = fp16 ? initial_scale : 1.0f, .min_scale = min_scale,
			    .window = window, .hysteresis = hysteresis,
			    .hysteresis_left = hysteresis};
}

/* Megatron's DynamicGradScaler: an overflow spends one unit of hysteresis, and once it is
 * spent, halves the scale (not below min); `window` clean steps in a row double it. */
static void scaler_update(struct optim *o, int overflow)
{
	if (o->static_scale)   /* Megatron's ConstantGradScaler */
		return;
	if (overflow) {
		o->good_steps = 0;
		if (--o->hysteresis_left <= 0) {
			o->loss_scale = fmaxf(o->loss_scale * 0.5f, o->min_scale);
			o->hysteresis_left = o->hysteresis;
		}
	} else if (++o->good_steps == o->window) {
		o->good_steps = 0;
		o->hysteresis_left = o->hysteresis;
		o->loss_scale *= 2.0f;
	}
}

int optim_step(struct optim *o, struct model *m, float lr, double *grad_norm)
{
	const struct ops *ops = m->ops;
	double ss = 0;
	if (m->dist && (m->dist->tp > 1 || m->dist->pp > 1)) {
		/* each split tensor's shard once per rank, each replicated tensor once (TP rank 0's),
		 * the tied word embeddings once (the first stage's), then over TP and PP */
		for (int i = 0; i < m->ntensors; i++) {
			if (m->tensors[i].split == SPLIT_NONE && m->dist->tp_rank != 0)
				continue;
			if (i == m->wte && !m->first)
				continue;
			ss += ops->sumsq(m->grads + m->tensors[i].offset, m->tensors[i].numel);
		}
		m->dist->sum_f64(m->dist, DIST_TP, &ss, 1);
		m->dist->sum_f64(m->dist, DIST_PP, &ss, 1);
	} else {
		ss = ops->sumsq(m->grads, m->nparams);
	}
	double norm = sqrt(ss) / o->loss_scale;
	*grad_norm = norm;
	if (!isfinite(norm)) {
		if (o->fp16)
			scaler_update(o, 1);
		return 0;
	}
	if (o->fp16)
		scaler_update(o, 0);
	float gscale = 1.0f / o->loss_scale;
	if (o->clip > 0) {
		double coeff = o->clip / (norm + 1e-6);
		if (coeff < 1.0)
			gscale *= (float)coeff;
	}
	o->step++;
	/* AdamW (or bitsandbytes' Adam) on this rank's elements [opt_lo, opt_hi): every tensor that
	 * overlaps them (the whole model without ZeRO-1), each from its own state */
	for (int i = 0; i < m->ntensors; i++) {
		const struct model_ostate *os = &m->ost[i];
		size_t a = os->lo, n = os->hi - os->lo;
		if (!n)
			continue;
		float wd = m->tensors[i].decay ? o->wd : 0.0f;
		void *param = (char *)m->params + a * ops->act_size;
		if (!m->cfg.bnb)
			ops->adamw(m->master + a, param, m->grads + a, m->adam_m + os->s,
				   m->adam_v + os->s, n, lr, o->b1, o->b2, o->eps, wd, gscale, o->step);
		else if (os->q8)
			ops->adam8bit(m->master + a, param, m->grads + a, m->q1 + os->s, m->q2 + os->s,
				      m->absmax1 + os->blk, m->absmax2 + os->blk, n, m->qmap, lr, o->b1,
				      o->b2, o->eps, wd, gscale, o->step);
		else
			ops->adam32(m->master + a, param, m->grads + a, m->adam_m + os->s,
				    m->adam_v + os->s, n, lr, o->b1, o->b2, o->eps, wd, gscale, o->step);
	}
	if (m->cfg.zero_dp > 1) {   /* ZeRO-1: every DP rank gets the others' updated shards */
		int n = m->cfg.zero_dp, counts[n], displs[n];
		for (int r = 0; r < n; r++) {
			size_t a, b;
			model_zero_range(m, n, r, &a, &b);
			displs[r] = (int)a;
			counts[r] = (int)(b - a);
		}
		ops->sync();
		m->dist->allgatherv_f32(m->dist, DIST_DP, m->master, counts, displs);
		model_sync_params(m);
	}
	return 1;
}
