/* optim - see optim.h. */
#include "train/optim/optim.h"

#include <math.h>

#include "train/parallel/dist.h"
#include "train/model/philox.h"

#define FP16_MAX 65504.0f   /* the largest finite fp16 value */
#define LAMB_MAX_GRAD_NORM 1.0   /* apex FusedLAMB's max_grad_norm default */
#define NOISE_STREAM 0x6e6f697365ull   /* "noise": --lamb-layerwise-noise's stream under --seed */

void optim_init(struct optim *o, float b1, float b2, float eps, float wd, float clip, int fp16,
		float initial_scale, float min_scale, int window, int hysteresis)
{
	*o = (struct optim){.b1 = b1, .b2 = b2, .eps = eps, .wd = wd, .clip = clip, .fp16 = fp16,
			    .loss_scale = fp16 ? initial_scale : 1.0f, .min_scale = min_scale,
			    .window = window, .hysteresis = hysteresis,
			    .hysteresis_left = hysteresis, .emb_lr_mult = 1.0f};
}

/* Megatron's DynamicGradScaler: an overflow spends one unit of hysteresis, and once it is
 * spent, halves the scale (not below min); `window` clean steps in a row double it and restore
 * the hysteresis - unless
 * doubling would make the scale itself infinite.  Megatron's fp16 gradients overflow long
 * before that (at 65504); lmtk's are fp32 or bf16, with fp32's range, so on a long run the
 * doublings would otherwise reach infinity after some 96 windows from 2^32, and every later
 * step would overflow and be skipped, the halvings of an infinite scale never finite again. */
static void scaler_update(struct optim *o, int overflow)
{
	if (o->static_scale)   /* Megatron's ConstantGradScaler */
		return;
	if (overflow) {
		o->good_steps = 0;
		/* the hysteresis is not restored here: once spent, every overflow halves, until
		 * a window of clean steps restores it (megatron/optimizer/grad_scaler.py) */
		if (--o->hysteresis_left <= 0)
			o->loss_scale = fmaxf(o->loss_scale * 0.5f, o->min_scale);
	} else if (++o->good_steps == o->window) {
		o->good_steps = 0;
		o->hysteresis_left = o->hysteresis;
		if (isfinite(o->loss_scale * 2.0f))
			o->loss_scale *= 2.0f;
	}
}

void optim_scaler(struct optim *o, int overflow)
{
	if (o->fp16)
		scaler_update(o, overflow);
}

/* tensor i's learning rate: the word embedding's (either copy) times --embedding-lr-mult, as a
 * float product (what adamw_multi computes for it on the device) */
static float tensor_lr(const struct optim *o, const struct model *m, int i, float lr)
{
	return i == m->wte ? lr * o->emb_lr_mult : lr;
}

/* The gradient's range k of those this rank holds reduced over DP: its chunk of ZeRO-1's bucket
 * k (model.h zb; the padding's gradients are zero), or the whole buffer (k = 0).  0 past the
 * last. */
static int held(const struct model *m, int k, size_t *lo, size_t *hi)
{
	if (m->zb && m->cfg.zero_dp > 1) {
		if (k >= m->nzb)
			return 0;
		model_zero_chunk(m, k, m->cfg.zero_rank, lo, hi);
		return 1;
	}
	*lo = 0;
	*hi = m->nparams;
	return k == 0;
}

/* The k-th part [lo, hi) of the gradients the global norm counts on this rank, 0 past the
 * last: with TP or PP each split tensor's part this rank holds, each replicated tensor only
 * on TP rank 0, the tied word embeddings only on the first stage; else held()'s parts (the
 * whole buffer, or ZeRO-1's chunks).  *k advances past skipped tensors. */
static int norm_part(const struct model *m, int *k, size_t *lo, size_t *hi)
{
	if (m->dist && (m->dist->tp > 1 || m->dist->pp > 1)) {
		for (; *k < m->ntensors; (*k)++) {
			int i = *k;
			if (m->tensors[i].split == SPLIT_NONE && m->dist->tp_rank != 0)
				continue;
			if (i == m->wte && !m->first)
				continue;
			if (m->ost[i].lo < m->ost[i].hi) {
				*lo = m->ost[i].lo;
				*hi = m->ost[i].hi;
				return 1;
			}
		}
		return 0;
	}
	return held(m, *k, lo, hi);
}

double optim_grad_norm(const struct optim *o, struct model *m)
{
	const struct ops *ops = m->ops;
	double ss = 0;
	size_t lo, hi;
	for (int k = 0; norm_part(m, &k, &lo, &hi); k++)
		ss += ops->sumsq(m->grads + lo, hi - lo);
	if (m->cfg.zero_dp > 1)   /* ZeRO-1: the shards' squares, summed over DP */
		m->dist->sum_f64(m->dist, DIST_DP, &ss, 1);
	if (m->dist && (m->dist->tp > 1 || m->dist->pp > 1)) {
		m->dist->sum_f64(m->dist, DIST_TP, &ss, 1);
		m->dist->sum_f64(m->dist, DIST_PP, &ss, 1);
	}
	return sqrt(ss) / o->loss_scale;
}

void optim_queue_norm_check(const struct optim *o, struct model *m, double *sumsq,
			    int32_t *overflow)
{
	const struct ops *ops = m->ops;
	struct dist *d = m->dist;
	size_t lo, hi;
	for (int k = 0; norm_part(m, &k, &lo, &hi); k++)
		ops->sumsq_acc(sumsq, m->grads + lo, hi - lo);
	if (m->cfg.zero_dp > 1)
		d->dev_reduce(d, DIST_DP, sumsq, 1, DIST_F64, DIST_SUM);
	if (d && (d->tp > 1 || d->pp > 1)) {
		d->dev_reduce(d, DIST_TP, sumsq, 1, DIST_F64, DIST_SUM);
		d->dev_reduce(d, DIST_PP, sumsq, 1, DIST_F64, DIST_SUM);
	}
	if (!o->fp16)
		return;
	for (int k = 0; held(m, k, &lo, &hi); k++)   /* beyond 65504: what fp16 could not hold */
		ops->within_acc(overflow, m->grads + lo, hi - lo, FP16_MAX);
	if (d && d->world > 1)   /* the shards of TP, PP (and ZeRO-1) ranks */
		d->dev_reduce(d, DIST_WORLD, overflow, 1, DIST_I32, DIST_MAX);
}

int optim_step(struct optim *o, struct model *m, float lr, double *grad_norm)
{
	const struct ops *ops = m->ops;
	size_t zlo, zhi;
	double norm = optim_grad_norm(o, m);
	*grad_norm = norm;
	/* fp16: Megatron's fp16 gradients overflow beyond 65504; lmtk's weight gradients are fp32
	 * (on a GPU under --fp16 summed from fp16 activation gradients, whose own overflows arrive
	 * here as inf or NaN), so an element that fp16 could not hold is the overflow Megatron's
	 * scaler would also see */
	int over = !isfinite(norm);
	for (int k = 0; o->fp16 && !over && held(m, k, &zlo, &zhi); k++)
		over = !ops->all_within(m->grads + zlo, zhi - zlo, FP16_MAX);
	if (o->fp16 && m->dist && m->dist->world > 1)   /* the shards of TP, PP (and ZeRO-1) ranks */
		over = dist_any(m->dist, DIST_WORLD, over);
	if (over) {
		if (o->fp16)
			scaler_update(o, 1);
		return 0;
	}
	/* unscaled by the scale the gradients carry, then the scaler moves (Megatron: unscale,
	 * grad_scaler.update, then clip and step) - a window's doubling is for the next step */
	float gscale = 1.0f / o->loss_scale;
	if (o->fp16)
		scaler_update(o, 0);
	if (o->clip > 0) {
		double coeff = o->clip / (norm + 1e-6);
		if (coeff < 1.0)
			gscale *= (float)coeff;
	}
	o->step++;
	/* AdamW (or bitsandbytes' Adam) on this rank's elements: every tensor's part of them (the
	 * whole model without ZeRO-1), each from its own state */
	if (o->kind == OPT_LAMB) {
		/* FusedLAMB sees the gradients after Megatron's clipping and clips their norm
		 * again at its max_grad_norm (1.0) */
		double gn = norm * (o->clip > 0 && o->clip / (norm + 1e-6) < 1.0 ? o->clip / (norm + 1e-6)
										    : 1.0);
		float clipdiv = gn > LAMB_MAX_GRAD_NORM ? (float)(gn / LAMB_MAX_GRAD_NORM) : 1.0f;
		uint64_t nkey = philox_mix(philox_mix(o->seed, NOISE_STREAM), (uint64_t)o->step);
		for (int i = 0; i < m->ntensors; i++) {
			const struct model_ostate *os = &m->ost[i];
			size_t a = os->lo, n = os->hi - os->lo;
			if (!n)
				continue;
			float wd = m->tensors[i].decay ? o->wd : 0.0f, lri = tensor_lr(o, m, i, lr);
			float pnorm = (float)sqrt(ops->sumsq(m->master + a, n));
			float unorm = (float)sqrt(ops->lamb_update(m->master + a, m->grads + a,
								   m->adam_m + os->s, m->adam_v + os->s,
								   n, o->b1, o->b2, o->eps, wd, gscale,
								   clipdiv, o->step));
			float ratio = lri;
			if (wd != 0.0f && pnorm != 0.0f && unorm != 0.0f)
				ratio = lri * (pnorm / unorm);
			struct lamb_noise nz = {.cols = 1};
			if (o->lamb_noise > 0 && unorm != 0.0f) {
				nz.key = philox_mix(nkey, model_hash_name(m->tensors[i].name));
				nz.e0 = a - m->tensors[i].offset;
				model_tensor_gmap(m, i, &nz.base, &nz.cols, &nz.stride);
				nz.scale = (float)(o->lamb_noise * (double)unorm / sqrt((double)n));
			}
			ops->lamb_apply(m->master + a, (char *)m->params + a * ops->act_size,
					m->adam_m + os->s, m->adam_v + os->s, n, o->b1, o->b2, o->eps,
					wd, ratio, o->step, &nz);
		}
		goto updated;
	}
	if (o->kind == OPT_SGD) {
		for (int i = 0; i < m->ntensors; i++) {
			const struct model_ostate *os = &m->ost[i];
			size_t a = os->lo, n = os->hi - os->lo;
			if (!n)
				continue;
			ops->sgd(m->master + a, (char *)m->params + a * ops->act_size, m->grads + a,
				 m->adam_m + os->s, n, tensor_lr(o, m, i, lr), o->momentum,
				 m->tensors[i].decay ? o->wd : 0.0f, gscale, o->step == 1);
		}
		goto updated;
	}
	if (m->aseg) {   /* the backend's one launch over them all */
		ops->adamw_multi(m->master, m->params, m->grads, m->adam_m, m->adam_v, m->aseg,
				 m->naseg, m->aseg_total, lr, o->emb_lr_mult, o->b1, o->b2, o->eps,
				 o->wd, gscale, o->step);
		goto updated;
	}
	for (int i = 0; i < m->ntensors; i++) {
		const struct model_ostate *os = &m->ost[i];
		size_t a = os->lo, n = os->hi - os->lo;
		if (!n)
			continue;
		float wd = m->tensors[i].decay ? o->wd : 0.0f, lri = tensor_lr(o, m, i, lr);
		void *param = (char *)m->params + a * ops->act_size;
		if (!m->cfg.bnb)
			ops->adamw(m->master + a, param, m->grads + a, m->adam_m + os->s,
				   m->adam_v + os->s, n, lri, o->b1, o->b2, o->eps, wd, gscale, o->step);
		else if (os->q8)
			ops->adam8bit(m->master + a, param, m->grads + a, m->q1 + os->s, m->q2 + os->s,
				      m->absmax1 + os->blk, m->absmax2 + os->blk, n, m->qmap, lri, o->b1,
				      o->b2, o->eps, wd, gscale, o->step);
		else
			ops->adam32(m->master + a, param, m->grads + a, m->adam_m + os->s,
				    m->adam_v + os->s, n, lri, o->b1, o->b2, o->eps, wd, gscale, o->step);
	}
updated:
	optim_zero_gather(m);
	return 1;
}

void optim_zero_gather(struct model *m)
{
	if (m->zb && m->cfg.zero_dp > 1) {   /* ZeRO-1: every DP rank gets the others' chunks */
		for (int k = 0; k < m->nzb; k++)
			m->dist->gather_f32(m->dist, DIST_DP, m->master + m->zb[k].lo,
					    m->zb[k].hi - m->zb[k].lo);
		model_sync_params(m);
	}
}
