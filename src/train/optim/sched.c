/* sched - see sched.h. */
#include "train/optim/sched.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *names[] = {"linear", "cosine", "constant"};

const char *sched_style_name(enum sched_style st) { return names[st]; }

int sched_style_parse(const char *name, enum sched_style *st)
{
	for (int i = 0; i < 3; i++)
		if (strcmp(name, names[i]) == 0) {
			*st = i;
			return 0;
		}
	return -1;
}

double sched_lr(const struct sched *s)
{
	int64_t n = s->num_steps, w = s->warmup;
	if (s->warmup > 0 && n <= s->warmup)
		return s->max_lr * (double)n / (double)s->warmup;
	if (s->style == SCHED_CONSTANT)
		return s->max_lr;
	if (s->by_tokens)
		n = s->num_tokens, w = s->warmup_tokens;
	if (n > s->decay)
		return s->min_lr;
	double r = (double)(n - w) / (double)(s->decay - w), c;
	c = s->style == SCHED_COSINE ? 0.5 * (cos(M_PI * r) + 1.0) : 1.0 - r;
	return s->min_lr + c * (s->max_lr - s->min_lr);
}

void sched_step(struct sched *s, int64_t samples, int64_t tokens)
{
	s->num_steps += samples;
	s->num_tokens = tokens;
	if (s->by_tokens && s->warmup > 0 && s->num_steps == s->warmup)
		s->warmup_tokens = s->num_tokens;
}

int sched_resume(struct sched *s, const struct sched *ck, int override, int use_ckpt, char *err,
		 size_t errlen)
{
	const char *what = NULL;
	char a[64] = "", b[64] = "";
	if (ck->max_lr != s->max_lr)
		what = "--lr", snprintf(a, sizeof a, "%g", ck->max_lr), snprintf(b, sizeof b, "%g", s->max_lr);
	else if (ck->min_lr != s->min_lr)
		what = "--min-lr", snprintf(a, sizeof a, "%g", ck->min_lr), snprintf(b, sizeof b, "%g", s->min_lr);
	else if (ck->warmup != s->warmup)
		what = "the warmup", snprintf(a, sizeof a, "%lld", (long long)ck->warmup),
		snprintf(b, sizeof b, "%lld", (long long)s->warmup);
	else if (ck->decay != s->decay)
		what = "the decay", snprintf(a, sizeof a, "%lld", (long long)ck->decay),
		snprintf(b, sizeof b, "%lld", (long long)s->decay);
	else if (ck->style != s->style)
		what = "--lr-decay-style", snprintf(a, sizeof a, "%s", names[ck->style]),
		snprintf(b, sizeof b, "%s", names[s->style]);
	int64_t steps = ck->num_steps, tokens = ck->num_tokens, wtokens = ck->warmup_tokens;
	if (what && use_ckpt)
		*s = *ck;
	else if (what && !override) {
		snprintf(err, errlen, "the checkpoint's learning-rate schedule differs from the flags: "
			 "%s is %s in the checkpoint, %s now; add --override-lr-scheduler to use the "
			 "flags or --use-checkpoint-lr-scheduler to keep the checkpoint's", what, a, b);
		return -1;
	}
	s->num_steps = steps;
	s->num_tokens = tokens;
	s->warmup_tokens = wtokens;
	return 0;
}
