/* sched - Megatron's AnnealingLR, counted in samples (or tokens with --lr-decay-tokens).
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
	int64_t num_steps, num_tokens;   /* samples and tokens of successful steps */
};

double sched_lr(const struct sched *s);
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
