/* run - a training run with Megatron-DeepSpeed's semantics, built to survive its environment.
 *
 * The loop is Megatron's train(): each iteration draws the global batch's samples in order from
 * the blended sample index, runs the micro-batches (gradient accumulation), steps AdamW at the
 * scheduler's learning rate, then logs (Megatron's line, TensorBoard tags), validates, saves
 * and checks the exit conditions in Megatron's order.
 *
 * What a 100-hour job array needs on top:
 * - SIGUSR1/SIGTERM (sbatch --signal=B:USR1@600, scancel, preemption): the current iteration
 *   finishes, a checkpoint is saved, exit 0, and the next array task resumes from it;
 * - the kill switch: present at start-up, exit 0 at once (the rest of the array stops);
 *   appearing during training, save and exit 0;
 * - --exit-duration-in-mins and --exit-interval as Megatron;
 * - loss spikes: a non-finite loss or gradient norm, or a loss above --spike-factor times its
 *   running mean, is counted and logged; --spike-policy skip drops that update, rollback
 *   reloads the last checkpoint and skips every sample between it and the spike - the manual
 *   recovery of the 104B run, automated;
 * - resume is exact: every random number is a function of (seed, iteration, micro-batch), the
 *   data position is in the checkpoint, so N steps straight and N/2 + kill + N/2 give the same
 *   bits on the CPU.
 * Exit: 0 done (or stopped on purpose, checkpoint saved), 2 usage or bad data, 3 I/O or a
 * failed save/load, or spikes that keep coming back after rollbacks. */
#ifndef TRAIN_RUN_H
#define TRAIN_RUN_H

#include "train/args.h"
#include "train/plan/plan.h"

int run_train(const struct train_args *a, const struct plan *p, const char *cmdline);

#endif
