/* curriculum - DeepSpeed's sequence-length curriculum (the tr8b-104B-cl recipe), as
 * Megatron-DeepSpeed drives it.
 *
 * The DeepSpeed config's "curriculum_learning" block (dsconfig.h) names a schedule of
 * "difficulty" - here the sequence length every training micro-batch is cut to:
 *   fixed_linear   d = floor(step / total_curriculum_step * (max - min) + min),
 *                  rounded down to a multiple of difficulty_step, at most max
 *   fixed_root     the same with (step / total_curriculum_step) ^ (1 / root_degree)
 *   fixed_discrete difficulty[i] while step <= max_step[i]; difficulty[last] after max_step[last]
 * (deepspeed/runtime/data_pipeline/curriculum_scheduler.py).  Megatron-DeepSpeed's training loop
 * (megatron/training.py) asks for the difficulty of iteration + 1 before each step; the
 * scheduler holds its last value and stops moving once it reached max_difficulty.  Each
 * micro-batch's tokens, targets, loss mask and positions are its first d tokens
 * (pretrain_gpt.py get_batch), consumed tokens grow by samples x d, and evaluation runs at the
 * full --seq-length.  Nothing here depends on anything but the iteration, so a resumed run
 * recomputes the same lengths. */
#ifndef TRAIN_CURRICULUM_H
#define TRAIN_CURRICULUM_H

#include <stddef.h>
#include <stdint.h>

enum cl_schedule { CL_FIXED_LINEAR, CL_FIXED_ROOT, CL_FIXED_DISCRETE };

#define CL_MAX_DISCRETE 64

struct curriculum {
	int enabled;
	enum cl_schedule type;
	int64_t min_difficulty, max_difficulty;
	int64_t total_step, difficulty_step;   /* fixed_linear, fixed_root */
	double root_degree;                    /* fixed_root */
	int ndiscrete;                         /* fixed_discrete: difficulty[n], max_step[n-1] */
	int64_t difficulty[CL_MAX_DISCRETE], max_step[CL_MAX_DISCRETE];
	int64_t current;                       /* the scheduler's state: min_difficulty at start */
};

/* The schedule's difficulty at global step `step` (DeepSpeed's get_difficulty). */
int64_t cl_difficulty(const struct curriculum *c, int64_t step);

/* DeepSpeed's update_difficulty: moves c->current to step's difficulty unless it already
 * reached max_difficulty; returns it. */
int64_t cl_update(struct curriculum *c, int64_t step);

/* The sequence length micro-batches of iteration `it` (1-based) are cut to, for a run of
 * --seq-length seq: the scheduler's value for it, the whole sample when that is longer.  The
 * scheduler is replayed from its start, as a resumed Megatron-DeepSpeed run rebuilds it. */
int64_t cl_seqlen_at(const struct curriculum *c, int64_t it, int64_t seq);

/* The block's checks that depend on --seq-length: 0, or -1 + err. */
int cl_check(const struct curriculum *c, int64_t seq, char *err, size_t errlen);

const char *cl_schedule_name(enum cl_schedule t);

#endif
