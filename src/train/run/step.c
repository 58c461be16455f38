/* step - see step.h. */
#include "train/run/step.h"

#include <math.h>

#include "train/run/batch.h"

/* Where micro-batch k of this data-parallel rank starts in the iteration's global batch
 * (batch_load's order): the dropout masks are keyed by it, so DP 2 x 1 micro-batch and DP 1 x
 * 2 micro-batches draw the same masks for the same sample. */
static uint64_t sample0(const struct run *r, int64_t k)
{
	return (uint64_t)(k * r->mbs * r->dist.dp + (int64_t)r->dist.dp_rank * r->mbs);
}

/* One iteration's forward and backward over its micro-batches, Megatron's 1F1B pipeline
 * schedule (forward_backward_pipelining_without_interleaving): stage s runs pp-s-1 warm-up
 * forwards, then alternates one forward and one backward, then drains the remaining backwards.
 * Each exchange with a neighbour sends and receives at once (dist p2p), so stages passing
 * activations forward and gradients backward never deadlock.  Micro-batch k lives in
 * activation slot k % (pp - s): no more are ever in flight.  With one stage this is the plain
 * loop: forward k, backward k.  The DP gradient buckets (buckets.h) are armed for the last
 * backward only, and what they did not take is reduced after the tied embedding's stage sum.
 * Returns the mean loss (on every stage), or NaN; deferred (m->dstep) over several ranks, this
 * rank's part only (the device has the loss: iter_queue sums it), NaN when one of its
 * micro-batches could not be read. */
double step_grads(struct run *r, int64_t first, int64_t micro, uint64_t key, int *bad)
{
	struct model *m = &r->m;
	struct dist *dd = &r->dist;
	int pp = dd->pp, s = dd->pp_rank;
	size_t xb = (size_t)r->mbs * r->cur * m->cfg.hidden * m->ops->act_size;
	int warm = pp - s - 1 < micro ? pp - s - 1 : (int)micro, rest = (int)micro - warm;
	int64_t fwd = 0, bwd = 0;
	double sum = 0, part[2] = {0, 0};
	float dscale = r->st.optim.loss_scale / (float)(micro * dd->dp);
	int failed = 0;
#define FORWARD() do { \
		int b_ = 0; \
		model_use_slot(m, (int)fwd); \
		if (batch_load(r, FEED_TRAIN, 0, first, (int)fwd) < 0) \
			failed = 1; \
		sum += model_forward_batch(m, &r->mb, dscale, key, sample0(r, fwd), NULL, &b_); \
		part[0] += m->loss_lm; \
		part[1] += m->loss_sop; \
		*bad += b_; \
	} while (0)
#define BACKWARD() do { \
		model_use_slot(m, (int)bwd); \
		if (bwd == micro - 1 && dd->dp > 1) /* only now are the gradients final */ \
			buckets_arm(&r->bk); \
		model_backward(m); \
	} while (0)
	model_zero_grad(m);
	for (int i = 0; i < warm; i++) {
		model_use_slot(m, (int)fwd);
		if (!m->first)
			dd->p2p(dd, NULL, 0, 0, model_stage_input(m), xb, s - 1);
		FORWARD();
		if (!m->last)
			dd->p2p(dd, model_stage_output(m), xb, s + 1, NULL, 0, 0);
		fwd++;
	}
	if (rest > 0 && !m->first) {
		model_use_slot(m, (int)fwd);
		dd->p2p(dd, NULL, 0, 0, model_stage_input(m), xb, s - 1);
	}
	for (int i = 0; i < rest; i++) {
		FORWARD();
		if (!m->last) {   /* send this output, receive the oldest micro-batch's gradient */
			void *out = model_stage_output(m);
			model_use_slot(m, (int)bwd);
			dd->p2p(dd, out, xb, s + 1, model_stage_dout(m), xb, s + 1);
		}
		fwd++;
		BACKWARD();
		if (!m->first) {
			void *din = model_stage_dinput(m);
			if (i == rest - 1) {
				dd->p2p(dd, din, xb, s - 1, NULL, 0, 0);
			} else {   /* send this gradient back, receive the next micro-batch's input */
				model_use_slot(m, (int)fwd);
				dd->p2p(dd, din, xb, s - 1, model_stage_input(m), xb, s - 1);
			}
		}
		bwd++;
	}
	for (int i = 0; i < warm; i++) {
		model_use_slot(m, (int)bwd);
		if (!m->last)
			dd->p2p(dd, NULL, 0, 0, model_stage_dout(m), xb, s + 1);
		BACKWARD();
		if (!m->first)
			dd->p2p(dd, model_stage_dinput(m), xb, s - 1, NULL, 0, 0);
		bwd++;
	}
#undef FORWARD
#undef BACKWARD
	/* deferred over several ranks (iter.h): the loss and the failure stay on the device (a
	 * failed read makes this rank's loss NaN, and the world's sum with it), and every rank
	 * goes on to queue the same collectives */
	int dev = m->dstep && dd->world > 1;
	if (!dev && dist_any(dd, DIST_WORLD, failed))
		return NAN;
	double v[3] = {sum, part[0], part[1]};   /* the loss, and its lm and sop parts */
	if (pp > 1) {
		/* the loss is the last stage's; the tied word embeddings' gradient is the sum of the
		 * input lookup's (first stage) and the output layer's (last stage) */
		if (!m->last)
			v[0] = v[1] = v[2] = 0;
		if (!dev)
			dd->sum_f64(dd, DIST_PP, v, 3);
		if (m->first || m->last)
			dd->sum_f32(dd, DIST_EMB, model_grad(m, m->wte), m->tensors[m->wte].numel);
	}
	struct dist *d = dd;
	for (int q = 0; q < 3; q++)
		v[q] /= micro;
	if (d->dp > 1) {   /* the gradient of the global batch's mean loss, on every DP rank (under
			    * ZeRO-1, of its shard): what the buckets did not reduce yet, then wait */
		buckets_finish(&r->bk);
		if (!dev)
			d->sum_f64(d, DIST_DP, v, 3);
		for (int q = 0; q < 3; q++)
			v[q] /= d->dp;
	}
	double loss = v[0];
	r->it_lm = v[1];
	r->it_sop = v[2];
	if (d->tp > 1) {
		/* Replicated tensors (layer norms, row-parallel biases, positions) got identical
		 * gradients by construction; averaging them over the TP group anyway makes identical
		 * updates - and no 176B-style drift - a guarantee rather than a property. */
		for (int i = 0; i < r->m.ntensors; i++)
			if (r->m.tensors[i].split == SPLIT_NONE) {
				float *g = model_grad(&r->m, i);
				d->sum_f32(d, DIST_TP, g, r->m.tensors[i].numel);
				r->m.ops->scale(g, 1.0f / d->tp, r->m.tensors[i].numel);
			}
	}
	if (dev)   /* the device counts the bad targets (ops_step) */
		return failed ? NAN : loss;
	*bad = dist_any(d, DIST_WORLD, *bad != 0) ? (*bad ? *bad : 1) : 0;
	return loss;
}
