/* curriculum - see curriculum.h.  The arithmetic is DeepSpeed's CurriculumScheduler's, in
 * Python's float and floor semantics. */
#include "train/data/curriculum.h"

#include <math.h>

#include "msg.h"

static const char *names[] = {"fixed_linear", "fixed_root", "fixed_discrete"};

const char *cl_schedule_name(enum cl_schedule t) { return names[t]; }

/* Python's a % b for b > 0: the result has b's sign */
static int64_t pymod(int64_t a, int64_t b)
{
	int64_t r = a % b;
	return r < 0 ? r + b : r;
}

int64_t cl_difficulty(const struct curriculum *c, int64_t step)
{
	if (c->type == CL_FIXED_DISCRETE) {
		int n = c->ndiscrete - 1;   /* max_step entries */
		if (step > c->max_step[n - 1])
			return c->difficulty[n];
		for (int i = 0; i < n; i++)
			if (step <= c->max_step[i])
				return c->difficulty[i];
		return c->difficulty[n];
	}
	double degree = c->type == CL_FIXED_LINEAR ? 1.0 : c->root_degree;
	double x = pow((double)step / (double)c->total_step, 1.0 / degree);
	double y = floor(x * (double)(c->max_difficulty - c->min_difficulty) + (double)c->min_difficulty);
	int64_t d = y > 9.0e15 ? (int64_t)9e15 : (int64_t)y;
	d -= pymod(d, c->difficulty_step);
	return d < c->max_difficulty ? d : c->max_difficulty;
}

int64_t cl_update(struct curriculum *c, int64_t step)
{
	if (c->current < c->max_difficulty)
		c->current = cl_difficulty(c, step);
	return c->current;
}

int64_t cl_seqlen_at(const struct curriculum *c, int64_t it, int64_t seq)
{
	struct curriculum s = *c;
	s.current = s.min_difficulty;
	int64_t d = s.current;
	for (int64_t i = 1; i <= it; i++)
		d = cl_update(&s, i);
	return d < seq ? d : seq;
}

int cl_check(const struct curriculum *c, int64_t seq, char *err, size_t errlen)
{
	if (!c->enabled)
		return 0;
	if (c->max_difficulty > seq)
		return errf(err, errlen, "curriculum_learning.max_difficulty %lld exceeds --seq-length "
			    "%lld: the curriculum cuts samples, it cannot lengthen them",
			    (long long)c->max_difficulty, (long long)seq);
	/* every length the schedule can give must be a real sequence: Megatron-DeepSpeed would
	 * slice to nothing and fail in the middle of a run */
	int64_t lo = c->min_difficulty;
	if (c->type == CL_FIXED_DISCRETE) {
		for (int i = 0; i < c->ndiscrete; i++) {
			if (c->difficulty[i] > seq)
				return errf(err, errlen, "curriculum_learning.schedule_config.difficulty[%d] "
					    "= %lld exceeds --seq-length %lld", i,
					    (long long)c->difficulty[i], (long long)seq);
			if (c->difficulty[i] < lo)
				lo = c->difficulty[i];
		}
	} else {
		lo -= pymod(lo, c->difficulty_step);
	}
	if (lo < 1)
		return errf(err, errlen, "curriculum_learning: the schedule starts at sequence length "
			    "%lld (min_difficulty %lld rounded down to a multiple of difficulty_step): "
			    "make min_difficulty at least difficulty_step", (long long)lo,
			    (long long)c->min_difficulty);
	return 0;
}
