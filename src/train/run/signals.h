/* signals - when a run stops before its last iteration.
 *
 * SIGUSR1, SIGTERM and SIGINT (sbatch --signal=B:USR1@600, scancel, a preemption) are only
 * noted by the handler; the loop asks after each iteration, so the iteration in flight finishes
 * and is saved.  The kill switch (--kill-switch-path) is a file whose presence stops the run: at
 * start-up before anything is done, during training like a signal.  --exit-duration-in-mins and
 * --exit-interval are Megatron's.  Every rank takes the decision together (the world's maximum
 * of each rank's stop code), so that no rank waits in a collective for one that left. */
#ifndef TRAIN_RUN_SIGNALS_H
#define TRAIN_RUN_SIGNALS_H

#include <stdint.h>

#include "train/run/state.h"

/* SIGUSR1, SIGTERM, SIGINT: noted, for signals_stop_reason */
void signals_install(void);

/* 1 when --kill-switch-path names a file that exists */
int signals_kill_switch(const struct run *r);

/* After iteration `it` (every rank calls it): NULL to go on, else why the run stops - a
 * signal or the kill switch seen by any rank, the longest elapsed time since t_start of all,
 * --exit-interval. */
const char *signals_stop_reason(struct run *r, double t_start, int64_t it);

/* The same in two halves, for a deferred step over several ranks, whose scalars carry the
 * decision with no host collective (iter.c): the stop this rank sees now, as a code in the
 * order signals_stop_reason weighs them (0 none, 1 --exit-duration-in-mins, 2 the kill switch,
 * 3 a signal), whose maximum over the world is the world's decision; and that decision's words
 * after iteration `it` (--exit-interval's too). */
int signals_stop_code(const struct run *r, double t_start);
const char *signals_stop_why(const struct run *r, int code, int64_t it);

#endif
