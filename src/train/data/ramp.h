/* ramp - Megatron's batch-size ramp-up (--rampup-batch-size START INCR SAMPLES), counted exactly.
 *
 * Megatron's rule (megatron/microbatches.py, RampupBatchsizeNumMicroBatches): num_incr =
 * (GBS - START) / INCR must be whole; per = SAMPLES / num_incr, a float; before every iteration
 * the global batch size is GBS if consumed > SAMPLES, else START + int(consumed / per) * INCR.
 * The iteration then consumes that many samples.  update_train_iters() counts the iterations of a
 * --train-samples run the same way: step while consumed <= SAMPLES, then add
 * (train_samples - consumed) // GBS full batches; a last partial batch is dropped.
 *
 * Because consumed only moves in whole batches, a stage lasts ceil((end - start) / gbs) steps
 * and overshoots its share a little, which the next stage starts from.  The runs' READMEs counted
 * floor(per / gbs) instead; both are in the table so the two can be compared (they agree within
 * one step per stage).
 *
 * A run without ramp-up is one stage at GBS.  The table is small (one row per GBS value: 128 for
 * BLOOM-176B) and everything else - the iteration at which N samples are reached, the samples
 * consumed after N iterations - is read off it, so no function here walks iterations one by one
 * except ramp_build(), which walks the ramp phase once (26,076 steps for BLOOM-176B). */
#ifndef TRAIN_RAMP_H
#define TRAIN_RAMP_H

#include <stddef.h>
#include <stdint.h>

struct ramp_stage {
	int64_t gbs;
	int64_t first_step;    /* 1-based iteration that first runs at this gbs */
	int64_t steps;         /* iterations at this gbs (Megatron's count) */
	int64_t hand_steps;    /* floor(per / gbs): the READMEs' figure; 0 for the constant phase */
	int64_t hand_cum;      /* the READMEs' steps through this stage: int(sum of int(per) / gbs) */
	int64_t start_samples; /* consumed before the stage's first iteration */
	int64_t samples;       /* consumed by the stage: steps * gbs */
};

struct ramp {
	int on;                          /* a ramp-up was given */
	int64_t start, incr, rsamples, gbs;
	int64_t num_incr;
	double per;                      /* samples per increment */
	struct ramp_stage *st;           /* ramp stages, then the constant stage at gbs */
	int nst;
	int64_t ramp_steps, ramp_consumed;  /* when the simulation stops (consumed > rsamples) */
	int64_t iters;                   /* the run's iterations, from ramp_finish() */
};

/* Checks Megatron's asserts and sets up the rule: 0, or -1 with err naming the problem.  With
 * start == gbs and no ramp (on = 0) use ramp_constant(). */
int ramp_init(struct ramp *r, int64_t start, int64_t incr, int64_t rsamples, int64_t gbs,
	      char *err, size_t errlen);
void ramp_constant(struct ramp *r, int64_t gbs);

/* The global batch size of the iteration that starts with `consumed` samples done. */
int64_t ramp_gbs(const struct ramp *r, int64_t consumed);

/* Walks the ramp phase and builds the stage table, the constant stage last.  0, or -1 on out of
 * memory.  ramp_finish() then gives the constant stage the steps up to the run's `iters`. */
int ramp_build(struct ramp *r);
void ramp_finish(struct ramp *r, int64_t iters);
/* Steps of row i that the run (ramp_finish's iters) gets to: a short run ends inside the ramp. */
int64_t ramp_row_steps(const struct ramp *r, int i);
void ramp_free(struct ramp *r);

/* Iterations of a run trained on train_samples (update_train_iters). */
int64_t ramp_train_iters(const struct ramp *r, int64_t train_samples);
/* Samples consumed after n iterations. */
int64_t ramp_consumed(const struct ramp *r, int64_t n);
/* The first iteration after which at least `samples` are consumed (0 for 0). */
int64_t ramp_iter_at(const struct ramp *r, int64_t samples);
/* The row of the stage iteration n (1-based) runs in. */
int ramp_stage_of(const struct ramp *r, int64_t n);

#endif
