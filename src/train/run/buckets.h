/* buckets - one step's data-parallel gradient reduction, in buckets overlapped with the backward.
 *
 * Megatron-LM's --overlap-grad-reduce (DeepSpeed's overlap_comm): the flat gradient buffer is
 * cut into buckets - contiguous ranges of whole tensors, of at least --ddp-bucket-size elements
 * (DeepSpeed's reduce_bucket_size) - in the order the backward finishes them, the last layer
 * first.  Only during the last micro-batch's backward are they final (the earlier ones
 * accumulate into the same buffer), so the run arms the buckets just before it; then each time
 * the model says a layer's gradients are final (model.h grads_ready), the layer joins the pending
 * bucket, and a bucket that is big enough goes to the transport (dist.h bucket_*), which queues
 * it on a stream of its own behind the kernels so far: the sum runs while the backward goes on.
 * What no layer hook covered - the embeddings, the final layer norm, the heads - goes last,
 * after the backward (and after the pipeline's tied-embedding sum, so the word embedding's DP
 * sum still adds the two stages' sums, as before), then the compute stream waits for them all.
 *
 * The buckets' cuts and order depend only on the model and the flags, the same on every rank and
 * every run, and each element is summed once over the same ranks (the transport's reduce is
 * elementwise), so the bits are those of the one sum after the backward that they replace.
 *
 * ZeRO-1 (zero): the buckets are the model's (model.h zb: fixed at init, whole tensors, padded
 * to equal chunks, Megatron's distributed optimizer), and a bucket goes once the backward has
 * finished all its tensors; it is reduce-scattered, not all-reduced - each rank receives the sum
 * of its own chunk only (dist.h bucket_reduce_f32); the rest of the buffer is not the global
 * gradient, and the optimizer reads the shard only (optim.c), then all-gathers each bucket's
 * updated weights (dist.h gather_f32).  What the backward did not finish goes after it, from
 * the top bucket down. */
#ifndef TRAIN_RUN_BUCKETS_H
#define TRAIN_RUN_BUCKETS_H

#include <stddef.h>

#include "train/parallel/dist.h"
#include "train/model/model.h"

struct bucket_range {
	size_t lo, hi;
};

struct buckets {
	struct model *m;
	struct dist *d;
	int overlap;               /* reduce during the last backward (else all after it) */
	size_t size;               /* elements: a bucket goes once it holds at least this many */
	int zero;                  /* ZeRO-1: the model's buckets, reduce-scattered */
	size_t *left;              /* ZeRO-1: per bucket, elements the backward has not finished */
	unsigned char *done;       /* ZeRO-1: per tensor, finished; per bucket (zsent), sent */
	unsigned char *zsent;
	int armed;                 /* the last micro-batch's backward is running */
	size_t lo, hi;             /* the pending bucket: final, not sent (lo == hi: none) */
	struct bucket_range *sent; /* this step's buckets, in the order they went */
	int nsent, cap;
	int steps_sent;            /* buckets sent during the backward, all steps (for the tests) */
};

/* Hooks the model (m->grads_ready).  size: elements per bucket, > 0. */
void buckets_init(struct buckets *b, struct model *m, struct dist *d, int overlap, size_t size,
		  int zero);
void buckets_free(struct buckets *b);
/* Before the last micro-batch's backward. */
void buckets_arm(struct buckets *b);
/* After the backward: the pending bucket, then what no bucket held; the backend's next work
 * waits for every bucket. */
void buckets_finish(struct buckets *b);

#endif
