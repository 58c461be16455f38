/* diag - a plan's errors, warnings and notes (struct plan's lists, plan.h).
 *
 * plan.c computes the plan and calls check.c's rules; both add what they find here, so check.c
 * needs plan.h's types and this file, never plan.c: the planning folder has no call running back
 * up from the rules to the planner.  main.c adds the errors of its own flag parsing the same way.
 * Errors make train exit 2; warnings and notes are printed with the plan. */
#ifndef TRAIN_PLAN_DIAG_H
#define TRAIN_PLAN_DIAG_H

#include "train/plan/plan.h"

void plan_error(struct plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void plan_warning(struct plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void plan_note(struct plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
