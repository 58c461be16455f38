/* iter - one iteration: queued, then read back and accounted.
 *
 * A step needs no host synchronisation when its scalars stay on the device (ops.h struct
 * ops_step): the losses and the gradients' sum of squares accumulate there, the device decides
 * the update (skip on a non-finite loss or norm, or on bad targets; the clip coefficient) and
 * AdamW reads that decision.  The host queues iteration k+1 before it reads iteration k's
 * struct back, so the GPU always has a step queued while the host logs, and every per-iteration
 * meaning is kept, one iteration late: the log line, the TensorBoard scalars, the skipped and
 * nan counts, the spike statistics are iteration k's.  The learning rate and Adam's step count
 * of k+1 depend on whether k was skipped (the scheduler and the step counter advance only on a
 * taken step): the host sends both candidates and the device picks (ops_step's pairs).
 *
 * Where that changes behaviour: a stop on a signal, the kill switch or --exit-duration-in-mins
 * is seen while the next iteration is already queued - that one is completed and counted
 * (applied, logged, saved) before the stop, so the run stops one iteration later than a
 * synchronous one would; targets outside the vocabulary (exit 2) skip their own update on the
 * device and the run ends after the iteration in flight, saving nothing.  Whatever reads the
 * weights or needs the iteration finished - an evaluation, a save, --exit-interval, the last
 * iteration, --log-params-norm's log line, a --skip-train-iteration-range - reads that
 * iteration back before the next one is queued (iter_drain_after).
 *
 * fp16: the next step's loss scale (a kernel argument: the loss gradient's scale) and learning
 * rate hang on this step's overflow flag, as in Megatron (found_inf.item()).  The host keeps
 * Megatron's scaler state machine (optim.c) and reads each fp16 step back once, at its end,
 * after the optimizer is queued (iter_drain_after): one wait per step, none inside it; the overflow
 * check itself runs on the device into the struct (ops.within_acc).  Keeping the state machine
 * on the device as well would save that wait but put the hysteresis, the window and the
 * scheduler's skip into kernels for a path Megatron itself syncs on.
 *
 * The synchronous path (every value read at once, as before) remains where a value is needed
 * on the host inside the step (iter_defer_blocker says which): --spike-policy skip/rollback (a host
 * decision before the update), BERT (the sentence-order loss comes back per micro-batch), tensor
 * parallelism (the vocabulary-parallel cross-entropy combines its statistics on the host),
 * optimizers other than the one-launch AdamW, and --log-num-zeros-in-grad.
 * LMTK_TRAIN_SYNC_STEP=1 forces it, to compare the two.
 *
 * Several ranks (DP, PP, ZeRO-1): what the synchronous step agrees on through host collectives
 * travels with the step's scalars instead, summed or maximised on the device (dist.h
 * dev_reduce): the loss over PP and DP, the masked and bad-target counts over the world (a
 * rank that read ids outside the vocabulary adds BAD_DATA_MARK), the norm's squares as
 * optim_grad_norm sums them, the fp16 overflow flag, and each rank's stop code
 * (signals_stop_code), read back with the struct.  A micro-batch a rank could not read makes
 * its loss NaN, and the world's with it. */
#ifndef TRAIN_RUN_ITER_H
#define TRAIN_RUN_ITER_H

#include <stdint.h>

#include "train/run/state.h"

#define DSTEP_BYTES 256

/* NULL when this run's steps can keep their scalars on the device, else why not */
const char *iter_defer_blocker(const struct run *r);

/* --cuda-graph: NULL when the step can be captured once and replayed, else why not */
const char *iter_graph_blocker(const struct run *r);

/* 1 when iteration `it` must be read back before the next one is queued (see above) */
int iter_drain_after(const struct run *r, int64_t it);

/* The synchronous iteration q: every value read back as it is computed.  0: queued and
 * decided, 1: rolled back (nothing to finish), -1: stop with L->rc. */
int iter_sync(struct run *r, struct loop *L, struct iter *q, uint64_t key);

/* The deferred iteration q: queued whole with nothing read back (prev: the iteration still in
 * flight, or NULL).  0, or -1: stop with L->rc. */
int iter_queue(struct run *r, struct loop *L, struct iter *q, const struct iter *prev,
	       uint64_t key);

/* A deferred iteration's scalars, read back (once) */
void iter_read(struct run *r, struct iter *q);

/* q's bookkeeping, once its scalars are known: the scheduler, the counters, the log line and
 * TensorBoard, evaluation, saving, the stop decisions (L->stop, L->why_stop).  0, or -1: stop
 * with L->rc. */
int iter_finish(struct run *r, struct loop *L, struct iter *q);

#endif
