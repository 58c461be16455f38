#include "train/data/ramp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"

int ramp_init(struct ramp *r, int64_t start, int64_t incr, int64_t rsamples, int64_t gbs,
	      char *err, size_t errlen)
{
	memset(r, 0, sizeof *r);
	if (start <= 0)
		return errf(err, errlen, "START %lld must be positive", (long long)start);
	if (incr <= 0)
		return errf(err, errlen, "INCR %lld must be positive", (long long)incr);
	if (gbs < start)
		return errf(err, errlen, "START %lld is larger than --global-batch-size %lld",
			    (long long)start, (long long)gbs);
	if ((gbs - start) % incr)
		return errf(err, errlen, "--global-batch-size %lld minus START %lld = %lld is not a "
			    "multiple of INCR %lld", (long long)gbs, (long long)start,
			    (long long)(gbs - start), (long long)incr);
	r->on = 1;
	r->start = start;
	r->incr = incr;
	r->rsamples = rsamples;
	r->gbs = gbs;
	r->num_incr = (gbs - start) / incr;
	/* num_incr == 0: Megatron divides by zero; a ramp to where it starts is no ramp */
	r->per = r->num_incr ? (double)rsamples / (double)r->num_incr : 0;
	if (!r->num_incr)
		r->on = 0;
	return 0;
}

void ramp_constant(struct ramp *r, int64_t gbs)
{
	memset(r, 0, sizeof *r);
	r->start = r->gbs = gbs;
}

int64_t ramp_gbs(const struct ramp *r, int64_t consumed)
{
	if (!r->on || consumed > r->rsamples)
		return r->gbs;
	/* Python's int(consumed / per): the float quotient, truncated */
	int64_t k = (int64_t)((double)consumed / r->per);
	return r->start + k * r->incr;
}

static int push(struct ramp *r, int *cap, int64_t gbs, int64_t first_step, int64_t start_samples)
{
	if (r->nst == *cap) {
		int n = *cap ? *cap * 2 : 64;
		struct ramp_stage *st = realloc(r->st, (size_t)n * sizeof *st);
		if (!st)
			return -1;
		r->st = st;
		*cap = n;
	}
	struct ramp_stage *s = &r->st[r->nst++];
	memset(s, 0, sizeof *s);
	s->gbs = gbs;
	s->first_step = first_step;
	s->start_samples = start_samples;
	s->hand_steps = r->on && gbs != r->gbs ? (int64_t)(r->per / (double)gbs) : 0;
	return 0;
}

int ramp_build(struct ramp *r)
{
	int cap = 0;
	int64_t consumed = 0, step = 0;

	r->nst = 0;
	if (r->on) {
		/* update_train_iters(): while consumed <= SAMPLES */
		while (consumed <= r->rsamples) {
			int64_t g = ramp_gbs(r, consumed);
			if (!r->nst || r->st[r->nst - 1].gbs != g)
				if (push(r, &cap, g, step + 1, consumed) < 0)
					return -1;
			r->st[r->nst - 1].steps++;
			r->st[r->nst - 1].samples += g;
			consumed += g;
			step++;
		}
	}
	r->ramp_steps = step;
	r->ramp_consumed = consumed;
	/* the 176B README's one-liner: perl -le '$x+=76894/(16*$_) for 1..$ARGV[0]/16; print int $x' */
	double hand = 0;
	for (int i = 0; i < r->nst; i++) {
		hand += floor(r->per) / (double)r->st[i].gbs;
		r->st[i].hand_cum = (int64_t)hand;
	}
	/* the constant phase; a ramp whose last stage already ran at GBS continues that row */
	if (!r->nst || r->st[r->nst - 1].gbs != r->gbs)
		if (push(r, &cap, r->gbs, step + 1, consumed) < 0)
			return -1;
	return 0;
}

void ramp_finish(struct ramp *r, int64_t iters)
{
	struct ramp_stage *s = &r->st[r->nst - 1];
	r->iters = iters;
	/* the constant row (maybe continuing the ramp's last row, see ramp_build) runs to the end */
	s->steps = iters >= s->first_step ? iters - s->first_step + 1 : 0;
	s->samples = s->steps * s->gbs;
}

int64_t ramp_row_steps(const struct ramp *r, int i)
{
	const struct ramp_stage *s = &r->st[i];
	if (r->iters < s->first_step)
		return 0;
	return r->iters - s->first_step + 1 < s->steps ? r->iters - s->first_step + 1 : s->steps;
}

void ramp_free(struct ramp *r)
{
	free(r->st);
	r->st = NULL;
	r->nst = 0;
}

int64_t ramp_train_iters(const struct ramp *r, int64_t train_samples)
{
	if (!r->on)
		return train_samples / r->gbs;
	/* Python's //, which rounds down: a run shorter than its ramp loses iterations */
	int64_t d = train_samples - r->ramp_consumed, q = d / r->gbs;
	if (d % r->gbs && d < 0)
		q--;
	return r->ramp_steps + q;
}

int64_t ramp_consumed(const struct ramp *r, int64_t n)
{
	if (n <= 0)
		return 0;
	if (n > r->ramp_steps)
		return r->ramp_consumed + (n - r->ramp_steps) * r->gbs;
	int i = ramp_stage_of(r, n);
	const struct ramp_stage *s = &r->st[i];
	return s->start_samples + (n - s->first_step + 1) * s->gbs;
}

int64_t ramp_iter_at(const struct ramp *r, int64_t samples)
{
	if (samples <= 0)
		return 0;
	if (samples > r->ramp_consumed) {
		int64_t more = samples - r->ramp_consumed;
		return r->ramp_steps + (more + r->gbs - 1) / r->gbs;
	}
	/* the ramp stages are in order of start_samples: the last one starting below `samples` */
	int i = 0;
	while (i + 1 < r->nst && r->st[i + 1].start_samples < samples &&
	       r->st[i + 1].first_step <= r->ramp_steps)
		i++;
	const struct ramp_stage *s = &r->st[i];
	return s->first_step - 1 + (samples - s->start_samples + s->gbs - 1) / s->gbs;
}

int ramp_stage_of(const struct ramp *r, int64_t n)
{
	int lo = 0, hi = r->nst - 1;
	/* the last row with first_step <= n */
	while (lo < hi) {
		int mid = (lo + hi + 1) / 2;
		if (r->st[mid].first_step <= n)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}
