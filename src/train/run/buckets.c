/* buckets - see buckets.h. */
#include "train/run/buckets.h"

#include <stdlib.h>

#include "msg.h"
#include "xalloc.h"

static void send(struct buckets *b, size_t lo, size_t hi)
{
	if (hi <= lo)
		return;
	if (b->zero)
		b->d->bucket_reduce_f32(b->d, DIST_DP, b->m->grads + lo, hi - lo);
	else
		b->d->bucket_sum_f32(b->d, DIST_DP, b->m->grads + lo, hi - lo);
	if (b->nsent == b->cap) {
		b->cap = b->cap ? 2 * b->cap : 16;
		b->sent = xrealloc(b->sent, (size_t)b->cap * sizeof *b->sent,
				   "the list of gradient buckets sent");
	}
	b->sent[b->nsent++] = (struct bucket_range){lo, hi};
}

/* ZeRO-1: bucket k of the model's, once */
static void send_zero(struct buckets *b, int k)
{
	if (b->zsent[k])
		return;
	b->zsent[k] = 1;
	send(b, b->m->zb[k].lo, b->m->zb[k].hi);
}

/* model.h grads_ready: tensors [t0, t1) are final */
static void ready(struct model *m, int t0, int t1, void *ctx)
{
	struct buckets *b = ctx;
	if (!b->armed || t1 <= t0)
		return;
	if (b->zero) {   /* the model's buckets: each goes when its last tensor is final */
		for (int i = t0; i < t1; i++) {
			int k = m->tbucket[i];
			if (b->done[i])
				continue;
			b->done[i] = 1;
			b->left[k] -= m->tensors[i].numel;
			if (!b->left[k]) {
				send_zero(b, k);
				b->steps_sent++;
			}
		}
		return;
	}
	size_t lo = m->tensors[t0].offset, hi = m->tensors[t1 - 1].offset + m->tensors[t1 - 1].numel;
	if (b->lo == b->hi) {
		b->lo = lo;
		b->hi = hi;
	} else if (hi == b->lo) {   /* the layer below the pending ones: the usual case */
		b->lo = lo;
	} else {                    /* not adjacent (another stack): the pending bucket goes as is */
		send(b, b->lo, b->hi);
		b->steps_sent++;
		b->lo = lo;
		b->hi = hi;
	}
	if (b->hi - b->lo >= b->size) {
		send(b, b->lo, b->hi);
		b->steps_sent++;
		b->lo = b->hi = 0;
	}
}

/* ZeRO-1: no tensor finished, no bucket sent */
static void zero_reset(struct buckets *b)
{
	struct model *m = b->m;
	for (int k = 0; k < m->nzb; k++) {
		b->left[k] = 0;
		b->zsent[k] = 0;
	}
	for (int i = 0; i < m->ntensors; i++) {
		b->done[i] = 0;
		b->left[m->tbucket[i]] += m->tensors[i].numel;
	}
}

void buckets_init(struct buckets *b, struct model *m, struct dist *d, int overlap, size_t size,
		  int zero)
{
	*b = (struct buckets){.m = m, .d = d, .overlap = overlap, .size = size ? size : 1,
			      .zero = zero && m->zb};
	if (b->zero) {
		b->left = xmalloc((size_t)m->nzb * sizeof *b->left, "ZeRO-1's bucket counts");
		b->zsent = xmalloc((size_t)m->nzb, "ZeRO-1's bucket flags");
		b->done = xmalloc(m->ntensors ? (size_t)m->ntensors : 1, "ZeRO-1's tensor flags");
		zero_reset(b);
	}
	if (overlap) {
		m->grads_ready = ready;
		m->grads_ctx = b;
	}
}

void buckets_free(struct buckets *b)
{
	if (b->m && b->m->grads_ctx == b) {
		b->m->grads_ready = NULL;
		b->m->grads_ctx = NULL;
	}
	free(b->sent);
	free(b->left);
	free(b->zsent);
	free(b->done);
	b->left = NULL;
	b->zsent = b->done = NULL;
	b->sent = NULL;
	b->nsent = b->cap = 0;
}

void buckets_arm(struct buckets *b)
{
	b->armed = b->overlap;
	b->lo = b->hi = 0;
	b->nsent = 0;
	if (b->zero)
		zero_reset(b);
}

static int by_lo(const void *x, const void *y)
{
	const struct bucket_range *p = x, *q = y;
	return p->lo < q->lo ? -1 : p->lo > q->lo;
}

void buckets_finish(struct buckets *b)
{
	b->armed = 0;
	if (b->zero) {   /* what the backward left, from the top bucket down */
		for (int k = b->m->nzb - 1; k >= 0; k--)
			send_zero(b, k);
		zero_reset(b);
		b->d->bucket_wait(b->d);
		return;
	}
	if (!b->overlap) {   /* one sum on the compute stream, as without buckets */
		b->d->sum_f32(b->d, DIST_DP, b->m->grads, b->m->nparams);
		return;
	}
	send(b, b->lo, b->hi);
	b->lo = b->hi = 0;
	/* the gaps between this step's buckets, from the top down as the backward went */
	int n = b->nsent;
	struct bucket_range *s = xmalloc(((size_t)n + 1) * sizeof *s,
					 "the gaps between the gradient buckets");
	for (int i = 0; i < n; i++)
		s[i] = b->sent[i];
	qsort(s, (size_t)n, sizeof *s, by_lo);
	size_t top = b->m->nparams;
	for (int i = n - 1; i >= -1; i--) {
		size_t hi = i >= 0 ? s[i].hi : 0;
		send(b, hi, top);
		top = i >= 0 ? s[i].lo : 0;
	}
	free(s);
	b->d->bucket_wait(b->d);
}
