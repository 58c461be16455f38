/* sched - Megatron's AnnealingLR, counted in samples (or tokens with --lr-decay-tokens).
 *
 * With --lr-decay-tokens (BigScience's Megatron-DeepSpeed, megatron/learning_rates.py) the
 * warmup still counts samples; the decay counts tokens from warmup_tokens - the tokens consumed
 * when num_steps met the warmup exactly (0 if it never did) - to the decay's tokens, where
 * num_tokens is set by each step to the run's consumed tokens before that iteration (the
 * scheduler steps inside train_step, before the loop adds the iteration's tokens).  Under a
 * curriculum (curriculum.h) those tokens are counted at the curriculum's lengths.
 *
 * The scheduler's clock is num_steps: the samples consumed by successful steps (a skipped
 * iteration does not move it), as Megatron's optimizer-param scheduler counts.  The learning
 * rate a step applies is the one computed before it; the log line shows the one after it,
 * which is also Megatron's behaviour (the first iteration of a warmup trains at lr 0).
 * A checkpoint keeps max/min lr, warmup, decay, style and num_steps; sched_resume() applies
 * Megatron's rules for a checkpoint whose schedule differs from the flags. */
#ifndef TRAIN_SCHED_H
#define TRAIN_SCHED_H

#include <stddef.h>
#include <stdint.h>

enum sched_style { SCHED_LINEAR, SCHED_COSINE, SCHED_CONSTANT };

struct sched {
	double max_lr, min_lr;
	int64_t warmup, decay;      /* samples (tokens when by_tokens) */
	enum sched_style style;
	int by_tokens;
	int64_t num_steps;          /* samples of successful steps */
	int64_t num_tokens;         /* by_tokens: the tokens consumed before the last step */
	int64_t warmup_tokens;      /* by_tokens: num_tokens when num_steps met the warmup */
};

double sched_lr(const struct sched *s);
/* A successful step of `samples`; `tokens`: the run's consumed tokens before this iteration. */
void sched_step(struct sched *s, int64_t samples, int64_t tokens);
const char *sched_style_name(enum sched_style st);
int sched_style_parse(const char *name, enum sched_style *st);

/* On --load: `ck` is the checkpoint's schedule, `s` the flags'.  num_steps and num_tokens always
 * come from the checkpoint.  If any of max_lr, min_lr, warmup, decay, style differs: with
 * override the flags win, with use_ckpt the checkpoint's win, else -1 + err naming the first
 * difference and both options. */
int sched_resume(struct sched *s, const struct sched *ck, int override, int use_ckpt, char *err,
		 size_t errlen);

#endif
