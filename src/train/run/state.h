/* state - what the files of a training run share: the run's parts (struct run), one iteration
 * in flight (struct iter) and the loop's counters between log lines (struct loop).
 *
 * run.c builds a struct run with setup.c, then drives the loop; each job of the loop has its
 * file: batch.c (the micro-batches from the data), step.c (forward and backward, 1F1B), iter.c
 * (an iteration queued, read back and accounted), eval.c, save.c, logs.c (the log line,
 * TensorBoard, energy) and signals.c (when to stop).  They read and write struct run; none of
 * them calls back into a file above it. */
#ifndef TRAIN_RUN_STATE_H
#define TRAIN_RUN_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "train/args.h"
#include "train/data/feed.h"
#include "train/parallel/dist.h"
#include "train/model/model.h"
#include "train/run/buckets.h"
#include "train/run/ckpt.h"
#include "train/run/energy.h"
#include "train/plan/plan.h"
#include "train/run/tfevents.h"

#define SPIKE_WARMUP 20        /* iterations before the running mean is trusted */
#define SPIKE_ALPHA 0.02       /* running mean: exponential, about the last 50 iterations */
#define MAX_ROLLBACKS 10

struct run {
	const struct train_args *a;
	const struct plan *p;
	const char *cmdline;
	char *tokrec;                  /* the manifests' "tokenizer" (tokrec.h), world rank 0's */
	struct model m;
	struct dist dist;
	struct feed feed;
	struct ckpt_state st;
	struct tfevents *tb;
	int64_t iters, mbs, seq;
	int64_t cur;                   /* the micro-batches' length now: seq, or the curriculum's */
	struct curriculum cl;          /* its scheduler, at iteration cl_it */
	int64_t cl_it;
	int32_t *sample, *tok, *tgt;   /* one sample (seq+1), a micro-batch's inputs and targets */
	/* --model-type bert: a micro-batch's token types, loss mask, real lengths and sentence-order
	 * labels beside tok (tokens) and tgt (labels); one BertDataset sample */
	int bert;
	int32_t *types, *lens, *sop;
	uint8_t *lmask;
	struct bert_sample bs;
	/* --model-type t5: the decoder's input beside tok (the encoder's), tgt and lmask its labels
	 * and loss mask (B, dseq), lens the encoder's real tokens; one T5Dataset sample */
	int t5;
	int64_t dseq;
	int32_t *dtok;
	struct t5_sample ts;
	int64_t t5_nonprefix;          /* samples with a masked (id 0) position inside them */
	struct model_batch mb;         /* the micro-batch load_micro filled, for model_forward_batch */
	double it_lm, it_sop;          /* the last iteration's lm and sop losses (step_grads) */
	double peak;                   /* FLOP/s, for MFU; 0 unknown */
	/* validation positions: r->st.valid_position[set], carried across evaluations and resumes
	 * (Megatron's consumed_valid_samples) */
	int rollbacks;
	struct energy en;              /* --codecarbon-dir */
	int have_energy;
	int bad_data;                  /* a sample held ids outside the vocabulary: exit 2 */
	int fail_code;                 /* exit status when setup fails */
	int fail_said;                 /* the failure is the same on every rank: world rank 0 says it */
	struct buckets bk;             /* the DP gradient reduction (buckets.h) */
	int64_t graph_first;           /* --cuda-graph: the first iteration this process queued */
	void *dsteps;                  /* device: the deferred iterations' scalars by parity, one
				        * struct ops_step per DSTEP_BYTES (the same sectors for both) */
};

/* One iteration: queued, then read back and accounted (iter.c) */
struct iter {
	int64_t it, gbs, cur, micro;
	int deferred, slot;
	double loss, lm, sop, grad_norm;
	int stepped, nonfinite, spike, bad;
	int64_t nzeros;
	int read;                  /* deferred: s holds its struct, read back */
	struct ops_step s;
};

struct loop {   /* the loop's state between log lines, and how it ends */
	double t_start, t_log, loss_sum, sop_sum;
	double t_train;      /* when this run's first iteration began */
	int64_t log_iters, log_skipped, log_nan, loss_n, last_saved;
	int64_t iters_run;   /* iterations this run finished */
	int rc, stop;
	const char *why_stop;
};

#endif
