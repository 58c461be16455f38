/* iter - see iter.h. */
#include "train/run/iter.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "train/plan/check.h"
#include "train/run/eval.h"
#include "train/run/logs.h"
#include "train/run/save.h"
#include "train/run/signals.h"
#include "train/run/step.h"
#include "train/optim/optim.h"
#include "train/optim/sched.h"

/* Added to a rank's count of masked targets when it read ids outside the vocabulary (deferred,
 * several ranks): the world's bad-target count (bad - masked, step_decide) goes below 0, which
 * no real count does, so every rank skips the step and stops (iter_finish) */
#define BAD_DATA_MARK (1 << 20)

static struct ops_step *dstep(const struct run *r, int slot)
{
	return (struct ops_step *)((char *)r->dsteps + (size_t)slot * DSTEP_BYTES);
}

/* NULL when this run's steps can keep their scalars on the device, else why not */
const char *iter_defer_blocker(const struct run *r)
{
	const struct train_args *a = r->a;
	const struct ops *o = r->m.ops;
	const char *e = getenv("LMTK_TRAIN_SYNC_STEP");
	if (!o->step_decide || !o->adamw_multi_step)
		return "the backend reads every value back at once";
	if (e && *e && strcmp(e, "0") != 0)
		return "LMTK_TRAIN_SYNC_STEP is set";
	if (r->dist.world > 1 && !r->dist.dev_reduce)
		return "the transport reads every value back";
	if (!r->m.aseg || r->st.optim.kind != OPT_ADAMW)
		return "an optimizer other than the one-launch AdamW";
	return check_defer_flags(a);
}

/* --cuda-graph: NULL when the step can be captured once and replayed, else why not.  A replay
 * repeats the captured kernels with their captured arguments; only the host copies (tokens,
 * targets, the step's struct) are refreshed, through the backend's staging.  So the step must
 * read nothing back (defer_blocker), keep its shapes (no batch-size ramp, no curriculum) and pass
 * no per-iteration value as a kernel argument: the dropout masks' seed is one (keyed by the
 * iteration's data position), and so is the loss's 1/kept when a loss mask changes the kept
 * count per micro-batch; the per-sample attention masks and position ids of
 * --reset-attention-mask and --reset-position-ids are host copies whose number depends on the
 * data.  T5 and BERT take loss masks from the data. */
const char *iter_graph_blocker(const struct run *r)
{
	const struct train_args *a = r->a;
	const char *why = iter_defer_blocker(r);
	if (!r->m.ops->graph_mode)
		return "the backend has no CUDA graphs (use --device cuda)";
	if (why)
		return why;
	if (r->p->ramp.on)
		return "--rampup-batch-size changes the step's shapes";
	if (r->cl.enabled)
		return "curriculum learning changes the step's shapes";
	return check_graph_flags(a);   /* the rest is in the flags: refused before the run */
}

/* the iteration must be read back before the next one is queued (see above) */
int iter_drain_after(const struct run *r, int64_t it)
{
	const struct train_args *a = r->a;
	return it >= r->iters || a->fp16 || (a->eval_interval > 0 && it % a->eval_interval == 0) ||
	       (a->save && a->save_interval > 0 && it % a->save_interval == 0) ||
	       (a->exit_interval > 0 && it % a->exit_interval == 0) ||
	       (a->log_params_norm && it % a->log_interval == 0);
}

/* a loss spike: counted, and said when finite */
static int spike_check(struct run *r, int64_t it, double loss, int *nonfinite)
{
	const struct train_args *a = r->a;
	struct ckpt_state *st = &r->st;
	*nonfinite = !isfinite(loss);
	int spike = *nonfinite || (st->loss_count >= SPIKE_WARMUP && loss > a->spike_factor * st->loss_mean);
	if (spike) {
		st->spikes_total++;
		if (!*nonfinite)
			logs_out("loss spike at iteration %lld: lm loss %.6E is above %g x its running "
			       "mean %.6E%s\n", (long long)it, loss, a->spike_factor, st->loss_mean,
			       a->spike_policy == 1 ? ": update skipped" : a->spike_policy == 2 ?
			       ": rolling back" : "");
	}
	return spike;
}

/* The synchronous iteration: every value read back as it is computed.  0: queued and decided,
 * 1: rolled back (nothing to finish), -1: stop with L->rc. */
int iter_sync(struct run *r, struct loop *L, struct iter *q, uint64_t key)
{
	const struct train_args *a = r->a;
	struct ckpt_state *st = &r->st;
	char err[2048];
	double lr = sched_lr(&st->sched);
	int bad = 0;
	double loss = step_grads(r, st->data_position, q->micro, key, &bad);
	if (dist_any(&r->dist, DIST_WORLD, r->bad_data)) {
		L->rc = EXIT_USAGE;
		return -1;
	}
	if (bad) {
		warn("iteration %lld: %d target tokens are outside the vocabulary of %d: the data "
		     "does not match --vocab-file/--tokenizer-name-or-path", (long long)q->it, bad,
		     r->m.cfg.vocab);
		L->rc = EXIT_USAGE;
		return -1;
	}
	st->data_position += q->gbs;
	q->loss = loss;
	q->lm = r->it_lm;
	q->sop = r->it_sop;
	/* spikes: a non-finite loss, or one far above the running mean */
	q->spike = spike_check(r, q->it, loss, &q->nonfinite);
	if (q->spike && a->spike_policy == 2 && !q->nonfinite) {
		if (save_rollback(r, q->it, loss, err, sizeof err) < 0) {
			warn("%s", err);
			L->rc = EXIT_FAILED;
			return -1;
		}
		return 1;
	}
	q->stepped = 0;
	if (!(q->spike && a->spike_policy >= 1) && !q->nonfinite)
		q->stepped = optim_step(&st->optim, &r->m, (float)lr, &q->grad_norm);
	else
		q->grad_norm = optim_grad_norm(&st->optim, &r->m);
	q->nzeros = 0;
	if (a->log_zeros) {
		/* count on the host: rare, only with --log-num-zeros-in-grad */
		size_t zn = r->m.nparams;
		float *g = malloc((zn ? zn : 1) * sizeof *g);
		if (g) {   /* each tensor's part this rank holds reduced (all, without ZeRO-1) */
			r->m.ops->to_host(g, r->m.grads, zn * sizeof *g);
			for (int t = 0; t < r->m.ntensors; t++)
				for (size_t i = r->m.ost[t].lo; i < r->m.ost[t].hi; i++)
					q->nzeros += g[i] == 0.0f;
			free(g);
		}
		if (r->m.zb) {   /* ZeRO-1: each rank holds its shard's reduced gradient */
			double z = (double)q->nzeros;
			r->dist.sum_f64(&r->dist, DIST_DP, &z, 1);
			q->nzeros = (int64_t)z;
		}
	}
	return 0;
}

/* The deferred iteration: queued whole - forward, backward, the decision, AdamW, the copy of
 * its scalars - with nothing read back (prev: the iteration still in flight, or NULL).
 * 0, or -1: stop with L->rc. */
int iter_queue(struct run *r, struct loop *L, struct iter *q, const struct iter *prev,
		      uint64_t key)
{
	struct model *m = &r->m;
	const struct ops *o = m->ops;
	struct ckpt_state *st = &r->st;
	struct optim *op = &st->optim;
	struct ops_step in;
	memset(&in, 0, sizeof in);
	/* the learning rate and the bias corrections, if prev is skipped [0] or taken [1]: the
	 * scheduler steps as iteration_finish will step it (Megatron: before this one's tokens) */
	struct sched s1 = st->sched;
	if (prev)
		sched_step(&s1, prev->gbs, st->consumed_tokens);
	in.lr_if[0] = (float)sched_lr(&st->sched);
	in.lr_if[1] = (float)sched_lr(&s1);
	for (int k = 0; k < 2; k++) {
		int step = op->step + 1 + (prev ? k : 0);
		in.bc1_if[k] = (float)(1.0 - pow((double)op->b1, step));
		in.bc2_if[k] = (float)(1.0 - pow((double)op->b2, step));
	}
	in.loss_scale = op->loss_scale;
	in.stop = r->dist.world > 1 ? signals_stop_code(r, L->t_start) : 0;
	in.clip = op->clip;
	in.prev_pending = prev != NULL;
	struct ops_step *ds = dstep(r, q->slot);
	/* --cuda-graph: the first iteration runs as usual and sizes the graph's host inputs, the
	 * next two are captured (one graph per parity: the struct slot differs), the rest replayed:
	 * the host walks the step only to fill the inputs (ops.h graph_mode) */
	int gm = OPS_GRAPH_OFF;
	if (r->a->cuda_graph) {
		if (!r->graph_first)
			r->graph_first = q->it;
		gm = q->it == r->graph_first ? OPS_GRAPH_SIZE
		   : q->it <= r->graph_first + 2 ? OPS_GRAPH_CAPTURE : OPS_GRAPH_FILL;
		o->graph_mode(gm, q->slot);
	}
	o->to_device(ds, &in, sizeof in);
	o->zero(m->bad_targets, sizeof *m->bad_targets);
	m->dstep = ds;
	m->dstep_masked = 0;
	int bad = 0;
	double l = step_grads(r, st->data_position, q->micro, key, &bad);
	m->dstep = NULL;
	int many = r->dist.world > 1;
	if (!many && r->bad_data) {
		L->rc = EXIT_USAGE;
		return -1;
	}
	st->data_position += q->gbs;
	if (isnan(l)) {   /* a micro-batch could not be read: the step's loss is NaN, as before */
		if (gm != OPS_GRAPH_OFF)   /* an extra host copy no graph holds */
			die(EXIT_FAILED, "iteration %lld: a micro-batch could not be read; a "
			    "--cuda-graph run stops there", (long long)q->it);
		double nan = NAN;
		o->to_device(&ds->loss[0], &nan, sizeof nan);
	}
	/* a sample with ids outside the vocabulary on some rank (batch.c said which): that rank's
	 * mark makes the world's bad count negative, so every rank skips the step and stops */
	int32_t masked = m->dstep_masked + (many && r->bad_data ? BAD_DATA_MARK : 0);
	o->to_device(&ds->masked, &masked, sizeof masked);
	if (many) {   /* the world's loss (the last stages', over DP) and counts, on the device */
		struct dist *d = &r->dist;
		d->dev_reduce(d, DIST_PP, ds->loss, 2, DIST_F64, DIST_SUM);
		d->dev_reduce(d, DIST_DP, ds->loss, 2, DIST_F64, DIST_SUM);
		d->dev_reduce(d, DIST_WORLD, &ds->masked, 1, DIST_I32, DIST_SUM);
		d->dev_reduce(d, DIST_WORLD, m->bad_targets, 1, DIST_I32, DIST_SUM);
		d->dev_reduce(d, DIST_WORLD, &ds->stop, 1, DIST_I32, DIST_MAX);
	}
	optim_queue_norm_check(op, m, &ds->sumsq, &ds->overflow);
	o->step_decide(ds, dstep(r, q->slot ^ 1), m->bad_targets);
	o->adamw_multi_step(m->master, m->params, m->grads, m->adam_m, m->adam_v, m->aseg,
			    m->naseg, m->aseg_total, op->emb_lr_mult, op->b1, op->b2, op->eps,
			    op->wd, ds);
	optim_zero_gather(m);
	if (gm == OPS_GRAPH_SIZE)
		o->graph_mode(OPS_GRAPH_OFF, 0);
	else if (gm != OPS_GRAPH_OFF)
		o->graph_launch(q->slot);
	o->step_fetch(ds, q->slot);   /* outside the graph: its event is waited for */
	return 0;
}

/* a deferred iteration's struct, read back (once) */
void iter_read(struct run *r, struct iter *q)
{
	if (q->deferred && !q->read) {
		q->s = *r->m.ops->step_wait(q->slot);
		q->read = 1;
	}
}

int iter_finish(struct run *r, struct loop *L, struct iter *q)
{
	const struct train_args *a = r->a;
	struct ckpt_state *st = &r->st;
	iter_read(r, q);
	if (q->deferred) {
		const struct ops_step *s = &q->s;
		q->loss = s->loss[0] / q->micro / r->dist.dp;   /* the world's sum over DP */
		q->lm = q->loss;
		q->sop = s->loss[1] / q->micro / r->dist.dp;
		q->grad_norm = sqrt(s->sumsq) / st->optim.loss_scale;
		q->stepped = s->taken;
		q->bad = s->bad;
		if (q->bad < 0) {   /* BAD_DATA_MARK: a rank read ids outside the vocabulary */
			warn("iteration %lld: a rank read token ids outside the vocabulary of %d (its "
			     "message above says which sample): the data does not match "
			     "--vocab-file/--tokenizer-name-or-path", (long long)q->it, r->m.cfg.vocab);
			L->rc = EXIT_USAGE;
			return -1;
		}
		if (q->bad) {
			warn("iteration %lld: %d target tokens are outside the vocabulary of %d: the "
			     "data does not match --vocab-file/--tokenizer-name-or-path",
			     (long long)q->it, q->bad, r->m.cfg.vocab);
			L->rc = EXIT_USAGE;
			return -1;
		}
		if (q->stepped)
			st->optim.step++;   /* the device's count, mirrored for checkpoints */
		/* the scaler as optim_step runs it: not on a non-finite loss (no step was tried),
		 * else an overflow (a non-finite norm, or a gradient beyond fp16's range) halves */
		if (isfinite(q->loss))
			optim_scaler(&st->optim, !q->stepped);
		q->spike = spike_check(r, q->it, q->loss, &q->nonfinite);
		r->it_lm = q->lm;
		r->it_sop = q->sop;
	}
	int64_t it = q->it, gbs = q->gbs, cur_now = r->cur;
	r->cur = q->cur;   /* the curriculum's length of this iteration, not the queued one's */
	if (q->stepped) {
		sched_step(&st->sched, gbs, st->consumed_tokens);   /* Megatron: before this one's */
		if (!q->spike) {
			st->loss_mean = st->loss_count ? st->loss_mean + SPIKE_ALPHA * (q->loss - st->loss_mean)
						       : q->loss;
			st->loss_count++;
		}
		L->loss_sum += r->bert ? r->it_lm : q->loss;   /* BERT: the lm loss, then the sop loss */
		L->sop_sum += r->it_sop;
		L->loss_n++;
	} else {
		st->skipped_total++;
		L->log_skipped++;
		/* under --fp16 an infinite gradient is the scaler's overflow (real fp16
		 * arithmetic overflows at 65504), which Megatron does not count as a nan
		 * iteration: only a loss that is not finite is one there */
		if (q->nonfinite || (!isfinite(q->grad_norm) && !a->fp16)) {
			st->nan_total++;
			L->log_nan++;
		}
	}
	st->iteration = it;
	st->consumed_samples += gbs;
	st->consumed_tokens += gbs * r->cur;
	L->log_iters++;
	L->iters_run++;
	logs_iteration(r, L, q);
	if (a->eval_interval > 0 && it % a->eval_interval == 0) {
		char label[64];
		snprintf(label, sizeof label, "at iteration %lld", (long long)it);
		eval_split(r, FEED_VALID, label, it);
	}
	if (a->save && a->save_interval > 0 && it % a->save_interval == 0) {
		if (save_checkpoint(r) < 0) {
			r->cur = cur_now;
			L->rc = EXIT_FAILED;
			return -1;
		}
		L->last_saved = it;
	}
	/* deferred over several ranks, the world's decision came with the step's scalars */
	const char *why_stop = q->deferred && r->dist.world > 1 ? signals_stop_why(r, q->s.stop, it)
			       : signals_stop_reason(r, L->t_start, it);
	r->cur = cur_now;
	if (why_stop) {
		L->why_stop = why_stop;
		L->stop = 1;   /* saved below, then said: Megatron saves before it says it exits */
	}
	return 0;
}
