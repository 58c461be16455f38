/* check - the constraints a Megatron-DeepSpeed run must meet, checked all at once.
 *
 * Megatron asserts its rules one at a time, at start-up or, for a ramp-up batch size that does
 * not split over the data-parallel ranks, hours into the run; a plan reports every one of them
 * before the allocation, each as an error that names the flags involved and says what to change.
 * check_flags() needs only the flags (and the tokenizer's file, for the vocabulary), and says
 * whether the plan can be computed at all; check_layout() needs the layout (plan.c resolves it
 * when it can, even if something else already stops the plan, so that a layout problem is never
 * hidden behind a missing flag); check_ramp() needs the ramp-up table.  The list is in train(1),
 * CONSTRAINTS. */
#ifndef TRAIN_CHECK_H
#define TRAIN_CHECK_H

#include "train/plan/plan.h"

/* Flag-level rules; resolves p->vocab.  Returns 1 when the plan cannot be computed. */
int check_flags(struct plan *p);
/* What in the flags alone makes each step read its values back at once (train's deferred
 * read-back needs none of it), or NULL. */
const char *check_defer_flags(const struct train_args *a);
/* --cuda-graph: what in the flags alone keeps the step from being captured once and replayed
 * (a value that changes per iteration is a kernel argument, or the shapes change, or the step
 * reads values back), or NULL.  run.c adds what only the run knows (the backend, the ranks). */
const char *check_graph_flags(const struct train_args *a);
/* GBS vs MBS x DP, layers (and embeddings) vs PP. */
void check_layout(struct plan *p);
/* Every GBS the ramp-up reaches within the run vs MBS x DP; sets p->indivisible. */
void check_ramp(struct plan *p);

#endif
