/* run - see run.h. */
#include "train/run/run.h"
#include "train/optim/bnb.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "file.h"
#include "memlimit.h"
#include "msg.h"
#include "num.h"
#include "units.h"
#include "xalloc.h"
#include "train/run/buckets.h"
#include "train/plan/check.h"
#include "train/run/ckpt.h"
#include "train/run/energy.h"
#include "train/dist/dist.h"
#include "train/data/feed.h"
#include "train/model/model.h"
#include "train/optim/optim.h"
#include "train/model/philox.h"
#include "train/data/ramp.h"
#include "train/optim/sched.h"
#include "train/run/tfevents.h"
#include "train/data/vocab.h"
#include "ckpt/tokrec.h"

#define SPIKE_WARMUP 20        /* iterations before the running mean is trusted */
#define SPIKE_ALPHA 0.02       /* running mean: exponential, about the last 50 iterations */
#define MAX_ROLLBACKS 10

static volatile sig_atomic_t got_signal;
static void on_signal(int sig) { got_signal = sig; }

struct run {
	const struct train_args *a;
	const struct plan *p;
	const char *cmdline;
	char *tokrec;                  /* the manifests' "tokenizer" (tokrec.h), world rank 0's */
	struct model m;
	struct dist dist;
	struct feed feed;
	struct ckpt_state st;
	struct tfevents *tb;
	int64_t iters, mbs, seq;
	int64_t cur;                   /* the micro-batches' length now: seq, or the curriculum's */
	struct curriculum cl;          /* its scheduler, at iteration cl_it */
	int64_t cl_it;
	int32_t *sample, *tok, *tgt;   /* one sample (seq+1), a micro-batch's inputs and targets */
	/* --model-type bert: a micro-batch's token types, loss mask, real lengths and sentence-order
	 * labels beside tok (tokens) and tgt (labels); one BertDataset sample */
	int bert;
	int32_t *types, *lens, *sop;
	uint8_t *lmask;
	struct bert_sample bs;
	/* --model-type t5: the decoder's input beside tok (the encoder's), tgt and lmask its labels
	 * and loss mask (B, dseq), lens the encoder's real tokens; one T5Dataset sample */
	int t5;
	int64_t dseq;
	int32_t *dtok;
	struct t5_sample ts;
	int64_t t5_nonprefix;          /* samples with a masked (id 0) position inside them */
	struct model_batch mb;         /* the micro-batch load_micro filled, for model_forward_batch */
	double it_lm, it_sop;          /* the last iteration's lm and sop losses (step_grads) */
	double peak;                   /* FLOP/s, for MFU; 0 unknown */
	/* validation positions: r->st.valid_position[set], carried across evaluations and resumes
	 * (Megatron's consumed_valid_samples) */
	int rollbacks;
	struct energy en;              /* --codecarbon-dir */
	int have_energy;
	int bad_data;                  /* a sample held ids outside the vocabulary: exit 2 */
	int fail_code;                 /* exit status when setup fails */
	int fail_said;                 /* the failure is the same on every rank: world rank 0 says it */
	struct buckets bk;             /* the DP gradient reduction (buckets.h) */
	int64_t graph_first;           /* --cuda-graph: the first iteration this process queued */
	void *dsteps;                  /* device: the deferred iterations' scalars by parity, one
				        * struct ops_step per DSTEP_BYTES (the same sectors for both) */
};

/* Only world rank 0 prints (every rank computes the same numbers); warnings come from any rank. */
static int quiet;
static int out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int out(const char *fmt, ...)
{
	va_list ap;
	int n = 0;
	if (quiet)
		return 0;
	va_start(ap, fmt);
	n = vprintf(fmt, ap);
	va_end(ap);
	return n;
}

static void say(const char *line)
{
	out("%s\n", line);
	fflush(stdout);
}

/* Megatron's cumulative-skip rule: the ranges of --skip-train-iteration-range, sorted, merged */
static int cmp_range(const void *x, const void *y)
{
	const int64_t *a = x, *b = y;
	return a[0] < b[0] ? -1 : a[0] > b[0];
}

/* A rough fp32 FMA peak for MFU on the CPU: cores x clock x 32 FLOP/cycle (two 256-bit FMA
 * pipes, or one 512-bit).  --peak-tflops overrides it. */
static double cpu_peak(int threads)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];
	double mhz = 0;
	while (f && fgets(line, sizeof line, f))
		if (strncmp(line, "cpu MHz", 7) == 0) {
			char *c = strchr(line, ':');
			if (c)
				mhz = atof(c + 1);
			break;
		}
	if (f)
		fclose(f);
	if (threads <= 0)
		threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
	return mhz * 1e6 * threads * 32;
}

/* Fills micro-batch `k` of the iteration whose first sample is `first`, Megatron's pretraining
 * sampler: the iteration's samples go in chunks of mbs*DP, DP rank r taking [r*mbs, (r+1)*mbs)
 * of each.  Input tokens [0,seq), targets [1,seq]. */
static int load_micro_bert(struct run *r, int split, int64_t first, int k)
{
	char err[512];
	int T = (int)r->seq, K = r->m.cfg.num_tokentypes;
	for (int b = 0; b < r->mbs; b++) {
		int64_t i = first + (int64_t)k * r->mbs * r->dist.dp + (int64_t)r->dist.dp_rank * r->mbs + b;
		struct bert_sample *s = &r->bs;
		int32_t *tk = r->tok + (size_t)b * T, *ty = r->types + (size_t)b * T;
		if (feed_get_bert(&r->feed, split, i, s, err, sizeof err) < 0) {
			warn("%s", err);
			goto harmless;
		}
		for (int t = 0; t < T; t++) {
			int lab = s->loss_mask[t] ? s->labels[t] : -1;
			if (s->tokens[t] < 0 || s->tokens[t] >= r->m.cfg.vocab || lab >= r->m.cfg.vocab) {
				warn("%s sample %lld holds token id %d, outside the vocabulary of %d: the "
				     "data was not tokenized with this --vocab-file", split == FEED_TRAIN
				     ? "training" : split == FEED_VALID ? "validation" : "test", (long long)i,
				     lab >= r->m.cfg.vocab ? lab : s->tokens[t], r->m.cfg.vocab);
				r->bad_data = 1;
				goto harmless;
			}
			if (s->types[t] < 0 || (K > 0 && s->types[t] >= K) || (K == 0 && s->types[t])) {
				warn("%s sample %lld holds token type %d, outside --num-tokentypes %d",
				     split == FEED_TRAIN ? "training" : "held-out", (long long)i,
				     s->types[t], K);
				r->bad_data = 1;
				goto harmless;
			}
			tk[t] = s->tokens[t];
			ty[t] = s->types[t];
			r->tgt[(size_t)b * T + t] = lab;
			r->lmask[(size_t)b * T + t] = s->loss_mask[t];
		}
		r->lens[b] = s->n_tokens;
		r->sop[b] = s->is_random;
	}
	return 0;
harmless:   /* so that every stage can still run the step in lockstep */
	memset(r->tok, 0, r->mbs * r->seq * sizeof *r->tok);
	memset(r->types, 0, r->mbs * r->seq * sizeof *r->types);
	memset(r->tgt, 0xff, r->mbs * r->seq * sizeof *r->tgt);
	memset(r->lmask, 0, r->mbs * r->seq);
	for (int b = 0; b < r->mbs; b++)
		r->lens[b] = (int32_t)r->seq, r->sop[b] = 0;
	return -1;
}

/* The last real position + 1 of a T5 sample's validity vector (Megatron's id >= 1), counting
 * the samples whose vector is not a prefix: their masked inner positions are real keys here
 * (model/t5.c), which only a vocabulary with a word at id 0 and [PAD] elsewhere makes. */
static int32_t t5_prefix(const uint8_t *valid, int n, int *inner)
{
	int last = 0;
	for (int t = 0; t < n; t++)
		if (valid[t])
			last = t + 1;
	for (int t = 0; t < last; t++)
		*inner |= !valid[t];
	return last;
}

/* T5's micro-batch k, as load_micro_bert's */
static int load_micro_t5(struct run *r, int split, int64_t first, int k)
{
	char err[512];
	int Te = (int)r->seq, Td = (int)r->dseq, V = r->m.cfg.vocab;
	for (int b = 0; b < r->mbs; b++) {
		int64_t i = first + (int64_t)k * r->mbs * r->dist.dp + (int64_t)r->dist.dp_rank * r->mbs + b;
		struct t5_sample *s = &r->ts;
		int inner = 0, bad = -1;
		if (feed_get_t5(&r->feed, split, i, s, err, sizeof err) < 0) {
			warn("%s", err);
			goto harmless;
		}
		for (int t = 0; t < Te; t++)
			if (s->text_enc[t] < 0 || s->text_enc[t] >= V)
				bad = s->text_enc[t];
		for (int t = 0; t < Td; t++)
			if (s->text_dec[t] < 0 || s->text_dec[t] >= V ||
			    (s->loss_mask[t] && (s->labels[t] < 0 || s->labels[t] >= V)))
				bad = s->text_dec[t] < 0 || s->text_dec[t] >= V ? s->text_dec[t] : s->labels[t];
		if (bad != -1) {
			warn("%s sample %lld holds token id %d, outside the vocabulary of %d: the data was "
			     "not tokenized with this --vocab-file and --vocab-extra-ids", split == FEED_TRAIN
			     ? "training" : split == FEED_VALID ? "validation" : "test", (long long)i, bad,
			     V);
			r->bad_data = 1;
			goto harmless;
		}
		memcpy(r->tok + (size_t)b * Te, s->text_enc, Te * sizeof *r->tok);
		memcpy(r->dtok + (size_t)b * Td, s->text_dec, Td * sizeof *r->dtok);
		for (int t = 0; t < Td; t++) {
			r->tgt[(size_t)b * Td + t] = s->loss_mask[t] ? s->labels[t] : -1;
			r->lmask[(size_t)b * Td + t] = s->loss_mask[t];
		}
		r->lens[b] = t5_prefix(s->enc_valid, Te, &inner);
		t5_prefix(s->dec_valid, Td, &inner);
		if (inner && !r->t5_nonprefix++)
			warn("warning: %s sample %lld has a token of id 0 among its real tokens: Megatron's "
			     "T5 masks would hide it as padding, lmtk's attention sees it (train(1), "
			     "--model-type t5); counted, not warned again", split == FEED_TRAIN ?
			     "training" : "held-out", (long long)i);
	}
	return 0;
harmless:   /* so that every rank can still run the step in lockstep */
	memset(r->tok, 0, r->mbs * Te * sizeof *r->tok);
	memset(r->dtok, 0, r->mbs * Td * sizeof *r->dtok);
	memset(r->tgt, 0xff, r->mbs * Td * sizeof *r->tgt);
	memset(r->lmask, 0, r->mbs * Td);
	for (int b = 0; b < r->mbs; b++)
		r->lens[b] = Te;
	return -1;
}

static int load_micro(struct run *r, int split, int set, int64_t first, int k)
{
	char err[512];
	if (r->t5)
		return load_micro_t5(r, split, first, k);
	if (r->bert)
		return load_micro_bert(r, split, first, k);
	for (int b = 0; b < r->mbs; b++) {
		int64_t i = first + (int64_t)k * r->mbs * r->dist.dp + (int64_t)r->dist.dp_rank * r->mbs + b;
		if (feed_get(&r->feed, split, set, i, r->sample, err, sizeof err) < 0) {
			warn("%s", err);
			memset(r->tok, 0, r->mbs * r->seq * sizeof *r->tok);
			memset(r->tgt, 0, r->mbs * r->seq * sizeof *r->tgt);
			return -1;
		}
		for (int t = 0; t <= r->seq; t++)
			if (r->sample[t] < 0 || r->sample[t] >= r->m.cfg.vocab) {
				warn("%s sample %lld holds token id %d, outside the vocabulary of %d: the data "
				     "was not tokenized with this --vocab-file/--tokenizer-name-or-path",
				     split == FEED_TRAIN ? "training" : split == FEED_VALID ? "validation" : "test",
				     (long long)i, r->sample[t], r->m.cfg.vocab);
				r->bad_data = 1;
				/* harmless ids, so every stage can still run the step in lockstep */
				memset(r->tok, 0, r->mbs * r->seq * sizeof *r->tok);
				memset(r->tgt, 0, r->mbs * r->seq * sizeof *r->tgt);
				return -1;
			}
		for (int t = 0; t < r->cur; t++) {   /* the first cur tokens (curriculum.h) */
			r->tok[b * r->cur + t] = r->sample[t];
			r->tgt[b * r->cur + t] = r->sample[t + 1];
		}
	}
	return 0;
}

static void tb_scalar(struct run *r, const char *tag, int64_t step, double v)
{
	if (r->tb && tfevents_scalar(r->tb, tag, step, v) < 0) {
		warn("warning: TensorBoard: %s; no more events are written", tfevents_error(r->tb));
		tfevents_close(r->tb);
		r->tb = NULL;
	}
}

/* Megatron-DeepSpeed's training_log throughput: 24 (32 with GLU) * passes * B s L h^2 *
 * (1 + s/6h + V/16Lh) per iteration, over the iteration time and the world size; passes = 3
 * (forward, backward counted twice), 4 when --checkpoint-activations recomputes the forward - 8
 * instead of 6 FLOPs per parameter and token. */
static double hw_tflops(const struct run *r, int64_t gbs, double secs)
{
	const struct model_config *c = &r->m.cfg;
	if (c->arch == MODEL_T5)   /* Megatron-DeepSpeed has no T5 formula: the model's count (model.h) */
		return model_flops_per_token(c) * (c->ckpt_layers ? 4.0 / 3.0 : 1.0) * (double)gbs *
		       (double)r->cur / (secs * r->dist.world * 1e12);
	double s = (double)r->cur, h = c->hidden, L = c->layers, V = c->padded_vocab;
	double coeff = r->a->glu_activation ? 32 : 24, act = c->ckpt_layers ? 4 : 3;
	double f = coeff * act * gbs * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
	return f / (secs * r->dist.world * 1e12);
}

static int save(struct run *r)
{
	char err[1024];
	if (!r->a->save)
		return 0;
	double t0 = units_now();
	struct keep k = {r->a->save_keep, r->a->save_keep_every};
	struct keep_report pr;
	r->st.tokenizer = r->tokrec;
	if (ckpt_save(r->a->save, &r->m, &r->dist, &r->st, r->cmdline, &k, &pr, err, sizeof err) < 0) {
		warn("saving checkpoint at iteration %lld failed: %s", (long long)r->st.iteration, err);
		return -1;
	}
	out("saved checkpoint at iteration %8lld to %s (%.2f s)\n", (long long)r->st.iteration,
	       r->a->save, units_now() - t0);
	/* what the pruning did (world rank 0's report; the others' is empty) */
	char policy[96];
	snprintf(policy, sizeof policy, "--save-keep %lld", (long long)k.newest);
	if (k.every > 0)
		snprintf(policy + strlen(policy), sizeof policy - strlen(policy),
			 " --save-keep-every %lld", (long long)k.every);
	if (pr.removed)
		out("removed %s from %s (%s)\n", pr.removed_names, r->a->save, policy);
	fflush(stdout);
	if (pr.held)
		warn("%s: kept %s for now: a reader holds %s .lock; tried again after the next save",
		     r->a->save, pr.held_names, pr.held > 1 ? "their" : "its");
	if (pr.linked)
		warn("%s: kept %s: %s a symbolic link, and pruning removes only step directories "
		     "inside --save (remove the link by hand to let it go)", r->a->save, pr.linked_names,
		     pr.linked > 1 ? "each is" : "it is");
	if (pr.nolock)
		warn("%s: %s removes nothing: %s", r->a->save, policy, pr.err);
	else if (*pr.err)
		warn("%s: %s could not remove a step: %s", r->a->save, policy, pr.err);
	return 0;
}

/* The sequence length of iteration `it`: DeepSpeed's scheduler asked for it, as Megatron-DeepSpeed
 * asks before each step (update_difficulty(iteration + 1)), advanced from where it stood - or
 * replayed from its start when the run went back (a resume, a rollback), so the lengths are a
 * function of the iteration alone.  Sets the model's length too. */
static void curriculum_at(struct run *r, int64_t it)
{
	if (!r->cl.enabled)
		return;
	if (it < r->cl_it) {
		r->cl.current = r->cl.min_difficulty;
		r->cl_it = 0;
	}
	for (; r->cl_it < it; r->cl_it++)
		cl_update(&r->cl, r->cl_it + 1);
	r->cur = r->cl.current < r->seq ? r->cl.current : r->seq;
	model_set_seq(&r->m, (int)r->cur);   /* 1..seq: checked at start-up (cl_check) */
}

/* --eval-iters global batches of each set of a split, without dropout.  `label` is Megatron's:
 * "at iteration N" during training, "at the end of training for val data" / "... for test data"
 * after it; a named set (weighted split paths) prints "{name} loss at ..." and gets its own
 * TensorBoard prefix.  Validation positions carry on across evaluations, as Megatron's
 * iterators do. */
static void evaluate(struct run *r, int split, const char *label, int64_t iteration)
{
	int64_t gbs = ramp_gbs(&r->p->ramp, r->st.consumed_samples), micro = gbs / (r->mbs * r->dist.dp);
	for (int si = 0; si < r->feed.nsets[split] && si < 64; si++) {
		const struct feed_set *set = &r->feed.sets[split][si];
		int64_t test_position = 0;
		int64_t *pos = split == FEED_VALID ? &r->st.valid_position[si] : &test_position;
		double sum = 0, part[2] = {0, 0};
		int n = 0, bad;
		if (set->size == 0 || r->a->eval_iters <= 0)
			continue;
		struct model *m = &r->m;
		struct dist *dd = &r->dist;
		size_t xb = (size_t)r->mbs * r->seq * m->cfg.hidden * m->ops->act_size;
		int failed = 0, cur = (int)r->cur;
		/* evaluation sees whole samples, also under a curriculum (Megatron-DeepSpeed's
		 * evaluate() lifts curriculum_seqlen to --seq-length, then rolls it back) */
		r->cur = r->seq;
		model_set_seq(m, (int)r->seq);
		m->eval_mode = 1;
		model_use_slot(m, 0);
		for (int64_t e = 0; e < r->a->eval_iters && !failed; e++) {
			for (int k = 0; k < micro; k++) {
				/* forward only, through the pipeline: receive, compute, pass on */
				failed |= load_micro(r, split, si, *pos, k) < 0;
				if (!m->first)
					dd->p2p(dd, NULL, 0, 0, model_stage_input(m), xb, dd->pp_rank - 1);
				sum += model_forward_batch(m, &r->mb, 0.0f, 0, 0, NULL, &bad);
				part[0] += m->loss_lm;
				part[1] += m->loss_sop;
				if (!m->last)
					dd->p2p(dd, model_stage_output(m), xb, dd->pp_rank + 1, NULL, 0, 0);
				n++;
			}
			*pos += gbs;
		}
		m->eval_mode = 0;
		r->cur = cur;
		model_set_seq(m, cur);
		if (dist_any(dd, DIST_WORLD, failed) || !n)
			continue;
		/* Megatron's evaluate: each loss of the loss dict averaged, printed as "KEY value" and
		 * "KEY PPL" in its order - lm loss, then BERT's sop loss */
		double v[3] = {m->last ? sum / n : 0, m->last ? part[0] / n : 0, m->last ? part[1] / n : 0};
		dd->sum_f64(dd, DIST_PP, v, 3);
		dd->sum_f64(dd, DIST_DP, v, 3);
		for (int q = 0; q < 3; q++)
			v[q] /= dd->dp;
		double loss = r->bert ? v[1] : v[0], ppl = exp(fmin(20, loss));
		int sop = r->bert && m->cfg.binary_head;
		char line[512], prefix[160], tag[256];
		int len = snprintf(line, sizeof line, " %s%s loss %s | lm loss value: %.6E | lm loss "
				   "PPL: %.6E | ", set->name ? set->name : "validation", "", label,
				   loss, ppl);
		if (sop && len < (int)sizeof line)
			len += snprintf(line + len, sizeof line - len, "sop loss value: %.6E | sop loss "
					"PPL: %.6E | ", v[2], exp(fmin(20, v[2])));
		char dash[520];
		if (len > (int)sizeof dash - 2)
			len = sizeof dash - 2;
		memset(dash, '-', len + 1);
		dash[len + 1] = 0;
		out("%s\n%s\n%s\n", dash, line, dash);
		fflush(stdout);
		if (split != FEED_VALID || iteration < 0)
			continue;
		snprintf(prefix, sizeof prefix, "lm-loss-validation%s%s", set->name ? "/" : "",
			 set->name ? set->name : "");
		snprintf(tag, sizeof tag, "%s/lm loss validation", prefix);
		tb_scalar(r, tag, iteration, loss);
		snprintf(tag, sizeof tag, "%s/lm loss validation vs samples", prefix);
		tb_scalar(r, tag, r->st.consumed_samples, loss);
		snprintf(tag, sizeof tag, "%s/lm loss validation vs tokens", prefix);
		tb_scalar(r, tag, r->st.consumed_tokens, loss);
		if (r->a->tb_ppl) {
			snprintf(tag, sizeof tag, "%s/lm loss validation ppl", prefix);
			tb_scalar(r, tag, iteration, ppl);
			snprintf(tag, sizeof tag, "%s/lm loss validation ppl vs samples", prefix);
			tb_scalar(r, tag, r->st.consumed_samples, ppl);
		}
		if (sop) {
			snprintf(tag, sizeof tag, "%s/sop loss validation", prefix);
			tb_scalar(r, tag, iteration, v[2]);
			snprintf(tag, sizeof tag, "%s/sop loss validation vs samples", prefix);
			tb_scalar(r, tag, r->st.consumed_samples, v[2]);
			snprintf(tag, sizeof tag, "%s/sop loss validation vs tokens", prefix);
			tb_scalar(r, tag, r->st.consumed_tokens, v[2]);
			if (r->a->tb_ppl) {
				snprintf(tag, sizeof tag, "%s/sop loss validation ppl", prefix);
				tb_scalar(r, tag, iteration, exp(fmin(20, v[2])));
				snprintf(tag, sizeof tag, "%s/sop loss validation ppl vs samples", prefix);
				tb_scalar(r, tag, r->st.consumed_samples, exp(fmin(20, v[2])));
			}
		}
	}
}

static int kill_switch(const struct run *r)
{
	return r->a->kill_switch_path && access(r->a->kill_switch_path, F_OK) == 0;
}

/* The start-up lines that say what a flag did not do here: the Megatron flags with no effect,
 * and the ones whose effect differs on this backend.  Nothing given is ever silently dropped. */
static void startup_notes(const struct train_args *a, const struct ops *ops)
{
	char *nofx = args_noeffect_line(a);
	int cpu = strcmp(ops->name, "cpu") == 0;
	if (nofx)
		out("train: accepted, no effect here: %s\n", nofx);
	free(nofx);
	if ((a->bf16 || a->fp16) && cpu)
		out("train: --%s: the cpu backend computes in fp32 (%s is the cuda backend's type)%s\n",
		    a->bf16 ? "bf16" : "fp16", a->bf16 ? "bf16" : "fp16",
		    a->fp16 ? "; fp16's loss scaling runs as Megatron's" : "");
	else if (a->fp16 && !cpu)
		out("train: --fp16: the %s backend computes in %s (half activations and working "
		    "weights, fp32 master weights and accumulation, as Megatron's fp16); the loss "
		    "scaler skips the steps that overflow fp16\n", ops->name, ops->act_type);
	if (a->loss_scale > 0 && !a->fp16)
		out("train: --loss-scale: no effect without --fp16, as in Megatron\n");
	if (a->profile_range_given && !a->profile)
		out("train: --profile-step-start, --profile-step-end, --profile-ranks: no effect "
		    "without --profile, as in Megatron-LM\n");
	if (a->gpu_model)
		out("train: --gpu-model: no effect without --dry-run (it picks the device whose step "
		    "model --dry-run's time estimate uses)\n");
	if (a->step_model)
		out("train: --step-model: no effect without --dry-run (it picks what --dry-run's step "
		    "model prices)\n");
	if (a->sgd_momentum_given && strcmp(a->optimizer, "sgd"))
		out("train: --sgd-momentum: no effect without --optimizer sgd, as in Megatron\n");
	if (a->lamb_noise_given && a->lamb_layerwise_noise == 0)
		out("train: --lamb-layerwise-noise 0: no effect (no noise is LAMB's own update)\n");
	if (a->embedding_lr_mult_given && a->embedding_lr_mult == 1)
		out("train: %s 1: no effect (the word embedding's learning rate is the others')\n",
		    a->embedding_lr_mult_given);
	if ((a->finetune || a->no_load_optim) && !a->load)
		out("train: --%s: no effect without --load\n", a->finetune ? "finetune" : "no-load-optim");
}

/* --log-path: this run's command line in DIR/args_TIME.txt (Megatron-DeepSpeed writes its
 * argparse namespace there; the command line is what holds the same information here). */
static int write_args_file(const char *dir, const char *cmdline, char *err, size_t errlen)
{
	char path[4200], stamp[32], why[1024], *text;
	time_t now = time(NULL);
	strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", localtime(&now));
	if (file_mkdirs(dir, why, sizeof why) < 0)
		return errf(err, errlen, "--log-path %s: %s", dir, why);
	snprintf(path, sizeof path, "%s/args_%s.txt", dir, stamp);
	if (asprintf(&text, "%s\n", cmdline) < 0)
		return xalloc_err_in(err, errlen, path, "the command line", strlen(cmdline) + 2);
	int rc = file_write_atomic(path, text, strlen(text), 0644, why, sizeof why);
	free(text);
	return rc < 0 ? errf(err, errlen, "--log-path: %s", why) : 0;
}

/* The ranks sharing this node's memory, as the launcher says (1 when none does) */
static int64_t local_ranks(void)
{
	static const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
				     "LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"};
	for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
		int64_t n;
		const char *v = getenv(vars[i]);
		if (v && args_int(v, &n) == 0 && n >= 1 && n <= 4096)
			return n;
	}
	return 1;
}

/* The cpu backend allocates the model, its optimizer and the activations in host memory, all
 * at once: more than the cgroup (or the machine) allows is a SIGKILL from the OOM killer and an
 * empty log.  Compared before allocating, with the plan's figure for this rank's stage (what the
 * model allocates, within a few per cent: train's "device memory" line shows both), times the
 * ranks on this node.  -1 + err naming both numbers and what to change. */
static int fits_in_memory(const struct plan *p, int stage, char *err, size_t errlen)
{
	const struct plan_stage *ps = &p->st[stage];
	const double gib = 1073741824.0;
	int64_t ranks = local_ranks();
	double need = ps->total * (double)ranks;
	uint64_t avail;
	char what[600];
	if (memlimit_available(&avail, what, sizeof what) < 0 || need <= (double)avail)
		return 0;
	return errf(err, errlen, "the model needs about %.2f GiB of memory%s, and this process may "
		    "allocate %.2f GiB (%s): it would be killed by the OOM killer. Ask for more memory "
		    "(sbatch --mem), or make it smaller: --micro-batch-size, --checkpoint-activations, "
		    "fewer or smaller layers (train --dry-run shows the sizes)", need / gib,
		    ranks > 1 ? " on this node" : "", (double)avail / gib, what);
}

static int setup(struct run *r, char *err, size_t errlen)
{
	const struct train_args *a = r->a;
	const struct plan *p = r->p;
	int threads = (int)a->threads;
	const char *cpt = getenv("SLURM_CPUS_PER_TASK");
	int64_t ncpt;
	if (threads <= 0 && num_int(cpt, 1, 4096, &ncpt) == NUM_OK)
		threads = (int)ncpt;   /* what SLURM gave this task, not the whole node */
	/* Several ranks on GPUs: each binds its node-local index modulo the GPUs it sees, so
	 * `--device cuda` means one GPU per rank whether the launcher shows every rank all of the
	 * node's GPUs (mpirun, srun --gpu-bind=none) or one each (srun --gpus-per-task=1). */
	char bound[32], bind_line[400] = "";
	const char *device = a->device, *lfrom = NULL, *wfrom = NULL;
	int world = dist_launched_world(&wfrom);
	if (world > 1 && (strcmp(device, "cuda") == 0 || strcmp(device, "auto") == 0)) {
		char why[512];
		int local = dist_local_rank(&lfrom), n = ops_cuda_devices(why, sizeof why);
		if (n > 0 && local == -2)
			return errf(err, errlen, "launched as %d ranks (%s), but %s=%.40s is not a local "
				    "rank (0, 1, ...), so it cannot pick its GPU", world, wfrom, lfrom,
				    getenv(lfrom));
		if (n > 0 && local < 0)
			return errf(err, errlen, "launched as %d ranks (%s), but nothing says which of this "
				    "node's ranks this one is (no OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, "
				    "MV2_COMM_WORLD_LOCAL_RANK, PALS_LOCAL_RANKID, LOCAL_RANK or "
				    "SLURM_LOCALID), so it cannot pick its GPU: launch with srun or mpirun, "
				    "or give each rank --device cuda:N", world, wfrom);
		if (n > 0) {
			const char *vis = getenv("CUDA_VISIBLE_DEVICES");
			snprintf(bound, sizeof bound, "cuda:%d", local % n);
			device = bound;
			snprintf(bind_line, sizeof bind_line, "%s (local rank %d from %s, modulo %d "
				 "visible GPU%s%s%.100s)", bound, local, lfrom, n, n > 1 ? "s" : "",
				 vis ? "; CUDA_VISIBLE_DEVICES=" : "", vis ? vis : "");
		} else if (strcmp(device, "cuda") == 0) {
			return errf(err, errlen, "--device cuda: %s", why);
		}
	} else if (world > 1 && strncmp(device, "cuda:", 5) == 0) {
		snprintf(bind_line, sizeof bind_line, "%s, as --device says", device);
	}
	/* --fp16 asks the CUDA backend for real fp16 arithmetic; the CPU computes in fp32 anyway */
	const struct ops *ops = ops_open(device, threads, a->fp16 ? OPS_FP16 : OPS_BF16, err,
					 errlen);
	if (!ops)
		return -1;
	if (a->profile && !ops->profiler)
		return errf(err, errlen, "--profile brackets iterations with CUDA profiler ranges; "
			    "the %s backend has none (profile it with perf, or use --device cuda)",
			    ops->name);
	struct model_config c = {
		.layers = p->L, .hidden = p->h, .heads = p->heads, .ffn = p->f, .seq = p->s,
		.max_pos = p->maxpos, .vocab = p->vocab, .padded_vocab = p->vocab_padded,
		.alibi = a->pos_emb == POS_ALIBI, .embed_ln = a->embed_layernorm || a->use_bnb_optimizer,
		.bnb = a->use_bnb_optimizer,
		.eps = a->layernorm_epsilon, .init_std = a->init_method_std,
		.hidden_dropout = a->hidden_dropout, .attention_dropout = a->attention_dropout,
		.seed = (uint64_t)a->seed, .tp = 1, .eod = -1,
	};
	r->bert = a->model_type == MT_BERT;
	r->t5 = a->model_type == MT_T5;
	if (r->t5) {   /* pretrain_t5.py's T5Model: --num-layers each, seq the encoder's */
		c.arch = MODEL_T5;
		c.dec_seq = (int)a->decoder_seq_length;
		r->dseq = a->decoder_seq_length;
	}
	if (r->bert) {   /* pretrain_bert.py's BertModel */
		c.arch = MODEL_BERT;
		c.num_tokentypes = a->num_tokentypes >= 0 ? (int)a->num_tokentypes : 2;
		c.binary_head = !a->bert_no_binary_head;
		c.head_gelu_tanh = a->openai_gelu;
	}
	if (a->use_bnb_optimizer && !ops->adam8bit)
		return errf(err, errlen, "--use-bnb-optimizer: the %s backend has no 8-bit Adam kernel; "
			    "use --device cpu, or drop the flag to train with AdamW", ops->name);
	int lamb = strcmp(a->optimizer, "lamb") == 0, sgd = strcmp(a->optimizer, "sgd") == 0;
	if ((lamb && !ops->lamb_update) || (sgd && !ops->sgd))
		return errf(err, errlen, "--optimizer %s: the %s backend has no %s kernels in this "
			    "build; use --device cpu", a->optimizer, ops->name, a->optimizer);
	if (a->data_cache_path && file_mkdirs(a->data_cache_path, err, errlen) < 0)
		return errf(err, errlen, "--data-cache-path %s: %s", a->data_cache_path, strerror(errno));
	/* --save is made now, as Megatron makes it, so a typo is found before the first iteration
	 * and not at the first save hours later */
	if (a->save) {
		char why[1024];
		if (file_mkdirs(a->save, why, sizeof why) < 0)
			return errf(err, errlen, "--save %s: %s", a->save, why);
		if (access(a->save, W_OK | X_OK) < 0)
			return errf(err, errlen, "--save %s: %s: checkpoints cannot be written there",
				    a->save, strerror(errno));
	}
	if (a->eod_mask_loss || a->reset_position_ids || a->reset_attention_mask) {
		int64_t eod = -1;
		const char *flag = a->eod_mask_loss ? "--eod-mask-loss" : a->reset_position_ids
				   ? "--reset-position-ids" : "--reset-attention-mask";
		char why[1024];
		int vr = a->tokenizer_name_or_path ? vocab_eod_hf(a->tokenizer_name_or_path, &eod, why, sizeof why)
			 : a->vocab_file ? vocab_eod_gpt2(a->vocab_file, &eod, why, sizeof why)
			 : errf(why, sizeof why, "no --vocab-file or --tokenizer-name-or-path");
		if (vr < 0)
			return errf(err, errlen, "%s needs the end-of-document token: %s", flag, why);
		if (eod < 0 || eod >= p->vocab)
			return errf(err, errlen, "%s: the end-of-document id %lld is outside the vocabulary "
				    "of %lld", flag, (long long)eod, (long long)p->vocab);
		c.eod = (int)eod;
		c.eod_mask_loss = a->eod_mask_loss;
		c.reset_position_ids = a->reset_position_ids;
		c.reset_attention_mask = a->reset_attention_mask;
	}
	c.post_ln_residual = a->post_ln_residual;
	int drc = dist_init(&r->dist, (int)p->tp, (int)p->pp, ops->name, a->save, err, errlen);
	if (drc < 0) {
		if (drc == DIST_NOT_MET)
			r->fail_code = EXIT_FAILED;   /* ranks that never met: not the flags' fault */
		return -1;
	}
	quiet = r->dist.rank != 0;
	if (a->save) {
		/* one run per --save (ckpt.h): rank 0 holds its lock from here to exit, and every
		 * rank learns whether it could, so that all of them stop before training if not */
		struct { int rc; char why[1536]; } lk = {CKPT_LOCK_HELD, ""};
		char done[1536] = "";
		if (r->dist.rank == 0)
			lk.rc = ckpt_save_lock(a->save, lk.why, sizeof lk.why);
		/* a publish a kill cut short is finished before anyone reads `latest` */
		if (r->dist.rank == 0 && lk.rc == CKPT_LOCK_HELD &&
		    ckpt_finish_publish(a->save, done, sizeof done, lk.why, sizeof lk.why) < 0)
			lk.rc = CKPT_LOCK_TAKEN;
		if (*done)
			out("train: %s\n", done);
		r->dist.bcast(&r->dist, DIST_WORLD, &lk, sizeof lk, 0);
		if (lk.rc == CKPT_LOCK_NONE && r->dist.rank == 0)
			warn("warning: %s", lk.why);
		if (lk.rc < 0) {
			if (lk.rc == CKPT_LOCK_ERROR)
				r->fail_code = EXIT_FAILED;
			r->fail_said = r->dist.rank != 0;   /* rank 0's answer, broadcast */
			return errf(err, errlen, "%s", lk.why);
		}
	}
	/* hashed now, as trained with: a file changed later no longer matches the record */
	if (a->save && r->dist.rank == 0 &&
	    !(r->tokrec = tokrec_json(a->tokenizer_type, a->vocab_file, a->merge_file,
				      a->tokenizer_name_or_path)))
		return xalloc_err(err, errlen, "the record of the tokenizer files", 0);
	if (bind_line[0] && strcmp(ops->name, "cpu") != 0) {   /* every rank: which GPU is whose */
		printf("train: rank %d of %d: GPU %s\n", r->dist.rank, r->dist.world, bind_line);
		fflush(stdout);
	}
	if (r->dist.dp != p->dp)
		return errf(err, errlen, "the plan has DP=%lld but %d ranks / (TP=%d x PP=%d) = %d",
			    (long long)p->dp, r->dist.world, r->dist.tp, r->dist.pp, r->dist.dp);
	c.tp = r->dist.tp;
	c.tp_rank = r->dist.tp_rank;
	/* the pipeline stage: its layers from the plan's partition (--pp-partition-method) */
	c.pp = r->dist.pp;
	c.pp_rank = r->dist.pp_rank;
	for (int i = 0; i < r->dist.pp_rank; i++)
		c.stage_l0 += (int)p->st[i].layers;
	c.stage_nl = (int)p->st[r->dist.pp_rank].layers;
	/* 1F1B keeps at most min(PP - stage, micro-batches) in flight: the plan's count, and the
	 * micro-batches of the full batch are the most any iteration has (the ramp only grows) */
	c.slots = r->dist.pp - r->dist.pp_rank;
	if (p->m_full >= 1 && p->m_full < c.slots)
		c.slots = (int)p->m_full;
	if (a->checkpoint_activations)
		c.ckpt_layers = a->checkpoint_num_layers > 0 ? (int)a->checkpoint_num_layers : 1;
	if (p->zero1 && r->dist.dp > 1 && strcmp(a->optimizer, "adam"))
		return errf(err, errlen, "--optimizer %s with ZeRO-1 over %d data-parallel ranks: "
			    "LAMB's trust ratio needs each tensor whole on a rank, and DeepSpeed's "
			    "ZeRO shards only Adam; use --zero-stage 0", a->optimizer, r->dist.dp);
	if (p->zero1 && r->dist.dp > 1) {   /* ZeRO-1: Adam's moments sharded over the DP group */
		c.zero_dp = r->dist.dp;
		c.zero_rank = r->dist.dp_rank;
	}
	r->mbs = p->mbs;
	r->seq = p->s;
	r->cur = p->s;
	r->cl = a->curriculum;
	r->cl_it = 0;
	r->iters = p->iters;
	if (strcmp(ops->name, "cpu") == 0 && fits_in_memory(p, r->dist.pp_rank, err, errlen) < 0) {
		r->fail_code = EXIT_FAILED;
		return -1;
	}
	/* Megatron-LM's default bucket: max(4e7, 1e6 x DP) elements; ZeRO-1's are the model's */
	int64_t bs = a->ddp_bucket_size > 0 ? a->ddp_bucket_size
		     : r->dist.dp * 1000000 > 40000000 ? r->dist.dp * 1000000 : 40000000;
	c.zero_bucket = (size_t)bs;
	if (model_init(&r->m, &c, ops, (int)r->mbs, (int)r->seq, err, errlen) < 0)
		return -1;
	r->m.dist = &r->dist;
	if (r->dist.dp > 1)
		buckets_init(&r->bk, &r->m, &r->dist, a->overlap_grad_reduce, (size_t)bs, c.zero_dp > 1);
	int64_t rows = r->dseq > r->seq ? r->dseq : r->seq;   /* T5: the longer of its two */
	r->sample = malloc((r->seq + 1) * sizeof *r->sample);
	r->tok = malloc(r->mbs * r->seq * sizeof *r->tok);
	r->tgt = malloc(r->mbs * rows * sizeof *r->tgt);
	r->types = calloc(r->mbs * r->seq, sizeof *r->types);
	r->lmask = calloc(r->mbs * rows, 1);
	r->lens = calloc(r->mbs, sizeof *r->lens);
	r->sop = calloc(r->mbs, sizeof *r->sop);
	r->dtok = calloc(r->mbs * (r->dseq > 0 ? r->dseq : 1), sizeof *r->dtok);
	if (!r->sample || !r->tok || !r->tgt || !r->types || !r->lmask || !r->lens || !r->sop ||
	    !r->dtok)
		return xalloc_err(err, errlen, "the micro-batch's token buffers", 0);
	r->mb = (struct model_batch){.tokens = r->tok, .targets = r->tgt};
	if (r->bert)
		r->mb = (struct model_batch){.tokens = r->tok, .targets = r->tgt, .types = r->types,
					     .loss_mask = r->lmask, .lens = r->lens, .sop = r->sop};
	if (r->t5)
		r->mb = (struct model_batch){.tokens = r->tok, .dec_tokens = r->dtok,
					     .targets = r->tgt, .loss_mask = r->lmask,
					     .lens = r->lens};
	r->peak = a->peak_tflops > 0 ? a->peak_tflops * 1e12
		  : ops->peak_flops > 0 ? ops->peak_flops : cpu_peak(threads);
	char kind[96];
	snprintf(kind, sizeof kind, "%s", c.alibi ? "BLOOM-style" : "GPT-2-style");
	if (r->bert)
		snprintf(kind, sizeof kind, "BERT (%s, %d token types)", c.binary_head ?
			 "binary head" : "no binary head", c.num_tokentypes);
	if (r->t5)
		snprintf(kind, sizeof kind, "T5 (encoder of %d and decoder of %d tokens, %d layers "
			 "each)", c.seq, c.dec_seq, c.layers);
	out("train: %s model, %lld parameters (%lld layers, hidden %lld, %lld heads, vocab %lld "
	       "padded to %lld) on %s\n", kind,
	       (long long)p->p_total, (long long)p->L, (long long)p->h, (long long)p->heads,
	       (long long)p->vocab, (long long)p->vocab_padded, ops->device ? ops->device : ops->name);
	out("train: %lld iterations, %lld samples, %lld tokens; micro-batch %lld, global batch "
	       "%lld%s; %d rank%s: DP=%d TP=%d PP=%d%s%s\n", (long long)p->iters, (long long)p->samples,
	       (long long)p->tokens, (long long)p->mbs, (long long)p->gbs,
	       p->ramp.on ? " after the ramp-up" : "", r->dist.world, r->dist.world > 1 ? "s" : "",
	       r->dist.dp, r->dist.tp, r->dist.pp, r->dist.world > 1 ? ", collectives over " : "",
	       r->dist.world > 1 ? r->dist.transport : "");
	{
		size_t n32, n8, nblk, own;
		model_opt_layout(&r->m, c.zero_dp > 1 ? c.zero_rank : -1, NULL, &n32, &n8, &nblk);
		own = n32 + n8;
		if (c.bnb)
			out("train: optimizer: bitsandbytes' 8-bit Adam, %zu bytes of state allocated on "
			    "this rank for %zu weights (%.3f B each): %zu in 8-bit blocks of %d (%zu "
			    "absmax each moment), %zu with fp32 moments (the word embedding and tensors "
			    "under %d elements)\n", r->m.opt_bytes, own, own ? (double)r->m.opt_bytes / own : 0.0,
			    n8, BNB_BLOCK, nblk, n32, BNB_MIN_8BIT);
		else
			out("train: optimizer: %s, %zu bytes of state allocated on this rank for %zu "
			    "weights (%.3f B each)\n", lamb ? "LAMB (apex FusedLAMB)" : sgd
			    ? "SGD" : "AdamW", r->m.opt_bytes, own,
			    own ? (double)r->m.opt_bytes / own : 0.0);
		if (lamb && a->lamb_layerwise_noise > 0)
			out("train: --lamb-layerwise-noise %g: each tensor's update u gets %g x "
			    "||u||/sqrt(n) x N(0,1) added after the trust ratio, drawn per element from "
			    "--seed, the step and the tensor\n", a->lamb_layerwise_noise,
			    a->lamb_layerwise_noise);
		if (a->embedding_lr_mult != 1)
			out("train: %s %g: the word embedding, the tied output layer with it, learns at "
			    "%g x the learning rate (the position embeddings at 1 x)\n",
			    a->embedding_lr_mult_given, a->embedding_lr_mult, a->embedding_lr_mult);
		if (c.zero_dp > 1)
			out("train: ZeRO-1: %d buckets of whole tensors, at least %zu elements each, "
			    "padded to %d equal chunks (%zu elements of padding%s), one reduce-scatter and "
			    "one all-gather each; this rank's optimizer shard is its chunk of each: %zu of "
			    "%zu weights\n", r->m.nzb, (size_t)bs, c.zero_dp, r->m.nparams - r->m.nweights,
			    c.bnb ? ", 8-bit tensors and chunks starting on blocks" : "", own,
			    r->m.nweights);
		if (a->overlap_grad_reduce && r->dist.dp > 1)
			out("train: DP gradients in buckets of whole layers, at least %zu elements, "
			    "reduced during the last micro-batch's backward%s%s\n", r->bk.size,
			    strncmp(r->dist.transport, "NCCL", 4) == 0 ? " on a second stream"
			    : " (MPI: each summed at once)",
			    c.zero_dp > 1 ? ", each reduce-scattered over ZeRO-1's shards" : "");
		else if (a->overlap_grad_reduce)
			out("train: --overlap-grad-reduce: DP=1, no gradients to reduce\n");
	}
	startup_notes(a, ops);
	{
		/* what the model allocated - the step allocates nothing more - beside --dry-run's
		 * activation figure for this rank's stage, in the same unit */
		const struct plan_stage *ps = &p->st[r->dist.pp_rank];
		double g = 1024.0 * 1024.0 * 1024.0;
		out("train: device memory: %.3f GiB allocated at peak: weights, gradients and optimizer "
		    "%.3f GiB, activations %.3f GiB, of which the layers' and the logits %.3f GiB "
		    "(--dry-run: %.3f GiB)", (double)r->m.mem_peak / g,
		    (double)(r->m.mem_peak - r->m.mem_act) / g, (double)r->m.mem_act / g,
		    (double)r->m.mem_act_layers / g,
		    (a->checkpoint_activations ? ps->act_ckpt : ps->act) / g);
		if (c.ckpt_layers)
			out("; --checkpoint-activations: each chunk of %d layer%s keeps only its output, the "
			    "backward recomputes it", c.ckpt_layers, c.ckpt_layers > 1 ? "s" : "");
		out("\n");
	}
	fflush(stdout);
	if (a->log_path && r->dist.rank == 0 && write_args_file(a->log_path, r->cmdline, err, errlen) < 0)
		return -1;

	/* data: the samples Megatron would ask each split for */
	int64_t samples[3] = {p->samples,
			      (p->iters / a->eval_interval + 1) * a->eval_iters * p->gbs,
			      a->eval_iters * p->gbs};
	gptdata_show_progress(r->dist.rank == 0);
	if (feed_open(&r->feed, a, samples, (int)r->seq, (uint32_t)a->seed, say, err, errlen) < 0)
		return -1;
	r->st.nvalid = r->feed.nsets[FEED_VALID] < 64 ? r->feed.nsets[FEED_VALID] : 64;
	if (r->feed.nsets[FEED_TRAIN] == 0 || r->feed.sets[FEED_TRAIN][0].size == 0)
		return errf(err, errlen, "the train split is empty: check --split and --data-path");
	if (r->bert && bert_sample_alloc(&r->feed.bd[FEED_TRAIN], &r->bs) < 0)
		return xalloc_err(err, errlen, "a BERT sample's buffers", 0);
	if (r->t5 && t5_sample_alloc(&r->feed.bd[FEED_TRAIN], &r->ts) < 0)
		return xalloc_err(err, errlen, "a T5 sample's buffers", 0);

	/* the schedule, in samples (tokens with --lr-decay-tokens) */
	struct sched *s = &r->st.sched;
	s->max_lr = a->lr;
	s->min_lr = a->min_lr;
	sched_style_parse(a->lr_decay_style, &s->style);
	s->by_tokens = a->lr_decay_tokens > 0;
	s->warmup = p->warmup.samples;   /* samples, also when the decay counts tokens */
	s->decay = s->by_tokens ? a->lr_decay_tokens : p->decay.samples;
	optim_init(&r->st.optim, a->adam_beta1, a->adam_beta2, a->adam_eps, a->weight_decay,
		   a->clip_grad, a->fp16, a->initial_loss_scale, a->min_loss_scale,
		   (int)a->loss_scale_window, (int)a->hysteresis);
	r->st.optim.kind = !strcmp(a->optimizer, "lamb") ? OPT_LAMB
			   : !strcmp(a->optimizer, "sgd") ? OPT_SGD : OPT_ADAMW;
	r->st.optim.momentum = (float)a->sgd_momentum;
	r->st.optim.emb_lr_mult = (float)a->embedding_lr_mult;
	r->st.optim.lamb_noise = lamb ? (float)a->lamb_layerwise_noise : 0.0f;
	r->st.optim.seed = (uint64_t)a->seed;
	if (a->fp16 && a->loss_scale > 0) {   /* --loss-scale: static */
		r->st.optim.static_scale = 1;
		r->st.optim.loss_scale = (float)a->loss_scale;
	}
	r->st.tp = r->dist.tp;
	r->st.pp = r->dist.pp;
	r->st.dp = r->dist.dp;

	model_init_weights(&r->m);
	if (a->load) {
		struct ckpt_state ck = r->st;
		char loaded[4200];
		ck.weights_only = a->finetune || a->no_load_optim;
		int rc = ckpt_load(a->load, &r->m, &ck, loaded, sizeof loaded, err, errlen);
		if (rc < 0) {
			/* checkpoints that fail verification are bad input (train(1)); an unreadable
			 * directory is not the flags' fault */
			r->fail_code = rc == -3 ? EXIT_FAILED : EXIT_USAGE;
			return -1;
		}
		if (rc == 0) {
			out("train: no checkpoint in --load %s: starting from scratch\n", a->load);
		} else if (a->finetune || a->no_load_optim) {
			/* Megatron's load_checkpoint without the optimizer: Adam starts afresh (zero
			 * moments, step 0, the initial loss scale) from the loaded weights, and so does
			 * the schedule (not loaded), except under --deepspeed with --no-load-optim, whose
			 * engine loads the scheduler anyway.  --finetune also sets the iteration to 0 and
			 * the tokens with it; Megatron-DeepSpeed still takes the consumed samples from the
			 * checkpoint's args, so the data order goes on where it was. */
			struct ckpt_state fresh = r->st;
			model_zero_optim(&r->m);
			if (a->finetune) {
				fresh.consumed_samples = ck.consumed_samples;
				fresh.data_position = ck.data_position;
				memcpy(fresh.valid_position, ck.valid_position, sizeof fresh.valid_position);
			} else {
				struct sched flags = fresh.sched;
				fresh = ck;
				fresh.optim = r->st.optim;
				fresh.sched = flags;
				if (a->deepspeed && sched_resume(&fresh.sched, &ck.sched, a->override_lr_scheduler,
								 a->use_checkpoint_lr_scheduler, err, errlen) < 0)
					return -1;
			}
			fresh.dp = r->dist.dp;
			fresh.nvalid = r->feed.nsets[FEED_VALID] < 64 ? r->feed.nsets[FEED_VALID] : 64;
			r->st = fresh;
			out("train: loaded the weights of %s (--%s): iteration %lld, %lld samples consumed, "
			    "a fresh optimizer%s\n", loaded, a->finetune ? "finetune" : "no-load-optim",
			    (long long)r->st.iteration, (long long)r->st.consumed_samples,
			    a->no_load_optim && a->deepspeed && !a->finetune ? "" : " and schedule");
		} else {
			struct sched flags = r->st.sched;
			/* the optimizer's hyper-parameters are the flags'; its state the checkpoint's */
			struct optim o = r->st.optim;
			o.step = ck.optim.step;
			if (!o.static_scale)
				o.loss_scale = a->fp16 ? ck.optim.loss_scale : 1.0f;
			o.good_steps = ck.optim.good_steps;
			o.hysteresis_left = ck.optim.hysteresis_left;
			r->st = ck;
			r->st.optim = o;
			r->st.sched = flags;
			r->st.dp = r->dist.dp;   /* DP may change between runs: replicas hold the same bits */
			r->st.nvalid = r->feed.nsets[FEED_VALID] < 64 ? r->feed.nsets[FEED_VALID] : 64;
			if (sched_resume(&r->st.sched, &ck.sched, a->override_lr_scheduler,
					 a->use_checkpoint_lr_scheduler, err, errlen) < 0)
				return -1;
			out("train: resumed from %s: iteration %lld, %lld samples consumed\n", loaded,
			       (long long)r->st.iteration, (long long)r->st.consumed_samples);
			if (ck.seed >= 0 && ck.seed != a->seed)
				warn("warning: --seed %lld differs from the checkpoint's %lld: the data order "
				     "and dropout change from here on", (long long)a->seed, (long long)ck.seed);
		}
		fflush(stdout);
	}
	/* never save over a step this run did not write (lmtk-checkpoint(5)): refused now, not at
	 * the save that would have replaced it */
	if (a->save && ckpt_check_ahead(a->save, r->st.iteration, r->iters, err, errlen) < 0) {
		r->fail_code = EXIT_USAGE;
		r->fail_said = r->dist.rank != 0;   /* every rank read the same directory */
		return -1;
	}
	if (a->tensorboard_dir && r->dist.rank == 0) {
		r->tb = tfevents_open(a->tensorboard_dir, err, errlen);
		if (!r->tb) {
			r->fail_code = EXIT_FAILED;
			return -1;
		}
		if (tfevents_text(r->tb, "args", r->st.iteration, r->cmdline) < 0)
			return errf(err, errlen, "%s", tfevents_error(r->tb));
	}
	if (a->codecarbon_dir) {
		/* each tracker its own run id, a UUID as CodeCarbon's */
		static char id[40];
		unsigned char u[16] = {0};
		FILE *f = fopen("/dev/urandom", "r");
		if (!f || fread(u, 1, sizeof u, f) != sizeof u)
			for (int i = 0; i < 16; i++)
				u[i] = (unsigned char)(philox_u32((uint64_t)units_now() * 1000003u, (uint32_t)i));
		if (f)
			fclose(f);
		u[6] = (u[6] & 0x0f) | 0x40;
		u[8] = (u[8] & 0x3f) | 0x80;
		snprintf(id, sizeof id, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
			 u[13], u[14], u[15]);
		int cuda = strcmp(r->m.ops->name, "cpu") != 0;
		if (energy_open(&r->en, a->codecarbon_dir, r->dist.rank, id, a->carbon_intensity,
				a->cpu_tdp, cuda ? 0 : -1, err, errlen) < 0) {
			r->fail_code = EXIT_FAILED;
			return -1;
		}
		r->have_energy = 1;
		out("train: --codecarbon-dir %s: emissions-RRR.csv per rank, a row per log interval; "
		    "CPU by %s, GPU by %s, RAM 3 W per 8 GB, %g g CO2eq per kWh\n", a->codecarbon_dir,
		    energy_cpu_source(&r->en), r->en.gpu ? "NVML" : cuda ? "nothing (NVML not found)" :
		    "nothing (CPU backend)", a->carbon_intensity);
		fflush(stdout);
	}
	return 0;
}

/* One row of --codecarbon-dir's CSV, and its TensorBoard scalars */
static void energy_row(struct run *r, int64_t it)
{
	char err[600];
	if (!r->have_energy)
		return;
	if (energy_log(&r->en, err, sizeof err) < 0) {
		warn("warning: %s; no more energy rows are written", err);
		energy_close(&r->en);
		r->have_energy = 0;
		return;
	}
	struct energy *e = &r->en;
	tb_scalar(r, "energy/energy consumed (kWh)", it, e->cpu_kwh + e->gpu_kwh + e->ram_kwh);
	tb_scalar(r, "energy/emissions (kg CO2eq)", it, e->last_emissions);
	tb_scalar(r, "energy/cpu power (W)", it, e->cpu_w);
	tb_scalar(r, "energy/gpu power (W)", it, e->gpu_w);
	tb_scalar(r, "energy/ram power (W)", it, e->ram_w);
}

/* Where micro-batch k of this data-parallel rank starts in the iteration's global batch
 * (load_micro's order): the dropout masks are keyed by it, so DP 2 x 1 micro-batch and DP 1 x
 * 2 micro-batches draw the same masks for the same sample. */
static uint64_t sample0(const struct run *r, int64_t k)
{
	return (uint64_t)(k * r->mbs * r->dist.dp + (int64_t)r->dist.dp_rank * r->mbs);
}

/* One iteration's forward and backward over its micro-batches, Megatron's 1F1B pipeline
 * schedule (forward_backward_pipelining_without_interleaving): stage s runs pp-s-1 warm-up
 * forwards, then alternates one forward and one backward, then drains the remaining backwards.
 * Each exchange with a neighbour sends and receives at once (dist p2p), so stages passing
 * activations forward and gradients backward never deadlock.  Micro-batch k lives in
 * activation slot k % (pp - s): no more are ever in flight.  With one stage this is the plain
 * loop: forward k, backward k.  The DP gradient buckets (buckets.h) are armed for the last
 * backward only, and what they did not take is reduced after the tied embedding's stage sum.
 * Returns the mean loss (on every stage), or NaN. */
static double step_grads(struct run *r, int64_t first, int64_t micro, uint64_t key, int *bad)
{
	struct model *m = &r->m;
	struct dist *dd = &r->dist;
	int pp = dd->pp, s = dd->pp_rank;
	size_t xb = (size_t)r->mbs * r->cur * m->cfg.hidden * m->ops->act_size;
	int warm = pp - s - 1 < micro ? pp - s - 1 : (int)micro, rest = (int)micro - warm;
	int64_t fwd = 0, bwd = 0;
	double sum = 0, part[2] = {0, 0};
	float dscale = r->st.optim.loss_scale / (float)(micro * dd->dp);
	int failed = 0;
#define FORWARD() do { \
		int b_ = 0; \
		model_use_slot(m, (int)fwd); \
		if (load_micro(r, FEED_TRAIN, 0, first, (int)fwd) < 0) \
			failed = 1; \
		sum += model_forward_batch(m, &r->mb, dscale, key, sample0(r, fwd), NULL, &b_); \
		part[0] += m->loss_lm; \
		part[1] += m->loss_sop; \
		*bad += b_; \
	} while (0)
#define BACKWARD() do { \
		model_use_slot(m, (int)bwd); \
		if (bwd == micro - 1 && dd->dp > 1) /* only now are the gradients final */ \
			buckets_arm(&r->bk); \
		model_backward(m); \
	} while (0)
	model_zero_grad(m);
	for (int i = 0; i < warm; i++) {
		model_use_slot(m, (int)fwd);
		if (!m->first)
			dd->p2p(dd, NULL, 0, 0, model_stage_input(m), xb, s - 1);
		FORWARD();
		if (!m->last)
			dd->p2p(dd, model_stage_output(m), xb, s + 1, NULL, 0, 0);
		fwd++;
	}
	if (rest > 0 && !m->first) {
		model_use_slot(m, (int)fwd);
		dd->p2p(dd, NULL, 0, 0, model_stage_input(m), xb, s - 1);
	}
	for (int i = 0; i < rest; i++) {
		FORWARD();
		if (!m->last) {   /* send this output, receive the oldest micro-batch's gradient */
			void *out = model_stage_output(m);
			model_use_slot(m, (int)bwd);
			dd->p2p(dd, out, xb, s + 1, model_stage_dout(m), xb, s + 1);
		}
		fwd++;
		BACKWARD();
		if (!m->first) {
			void *din = model_stage_dinput(m);
			if (i == rest - 1) {
				dd->p2p(dd, din, xb, s - 1, NULL, 0, 0);
			} else {   /* send this gradient back, receive the next micro-batch's input */
				model_use_slot(m, (int)fwd);
				dd->p2p(dd, din, xb, s - 1, model_stage_input(m), xb, s - 1);
			}
		}
		bwd++;
	}
	for (int i = 0; i < warm; i++) {
		model_use_slot(m, (int)bwd);
		if (!m->last)
			dd->p2p(dd, NULL, 0, 0, model_stage_dout(m), xb, s + 1);
		BACKWARD();
		if (!m->first)
			dd->p2p(dd, model_stage_dinput(m), xb, s - 1, NULL, 0, 0);
		bwd++;
	}
#undef FORWARD
#undef BACKWARD
	if (dist_any(dd, DIST_WORLD, failed))
		return NAN;
	double v[3] = {sum, part[0], part[1]};   /* the loss, and its lm and sop parts */
	if (pp > 1) {
		/* the loss is the last stage's; the tied word embeddings' gradient is the sum of the
		 * input lookup's (first stage) and the output layer's (last stage) */
		if (!m->last)
			v[0] = v[1] = v[2] = 0;
		dd->sum_f64(dd, DIST_PP, v, 3);
		if (m->first || m->last)
			dd->sum_f32(dd, DIST_EMB, model_grad(m, m->wte), m->tensors[m->wte].numel);
	}
	struct dist *d = dd;
	for (int q = 0; q < 3; q++)
		v[q] /= micro;
	if (d->dp > 1) {   /* the gradient of the global batch's mean loss, on every DP rank (under
			    * ZeRO-1, of its shard): what the buckets did not reduce yet, then wait */
		buckets_finish(&r->bk);
		d->sum_f64(d, DIST_DP, v, 3);
		for (int q = 0; q < 3; q++)
			v[q] /= d->dp;
	}
	double loss = v[0];
	r->it_lm = v[1];
	r->it_sop = v[2];
	if (d->tp > 1) {
		/* Replicated tensors (layer norms, row-parallel biases, positions) got identical
		 * gradients by construction; averaging them over the TP group anyway makes identical
		 * updates - and no 176B-style drift - a guarantee rather than a property. */
		for (int i = 0; i < r->m.ntensors; i++)
			if (r->m.tensors[i].split == SPLIT_NONE) {
				float *g = model_grad(&r->m, i);
				d->sum_f32(d, DIST_TP, g, r->m.tensors[i].numel);
				r->m.ops->scale(g, 1.0f / d->tp, r->m.tensors[i].numel);
			}
	}
	*bad = dist_any(d, DIST_WORLD, *bad != 0) ? (*bad ? *bad : 1) : 0;
	return loss;
}

static int rollback(struct run *r, int64_t iteration, double loss, char *err, size_t errlen)
{
	int64_t spike_end = r->st.data_position;
	char loaded[4200];
	struct ckpt_state ck = r->st;
	if (!r->a->save)
		return errf(err, errlen, "--spike-policy rollback needs --save");
	if (++r->rollbacks > MAX_ROLLBACKS)
		return errf(err, errlen, "%d rollbacks and the loss still spikes (iteration %lld, loss "
			    "%g): stopping so a human can look", MAX_ROLLBACKS, (long long)iteration, loss);
	int rc = ckpt_load(r->a->save, &r->m, &ck, loaded, sizeof loaded, err, errlen);
	if (rc <= 0)
		return rc < 0 ? -1 : errf(err, errlen, "loss spike at iteration %lld but no checkpoint "
					  "in --save %s to roll back to", (long long)iteration, r->a->save);
	int64_t skipped = spike_end - ck.data_position;
	struct optim o = r->st.optim;
	o.step = ck.optim.step;
	o.good_steps = ck.optim.good_steps;
	o.hysteresis_left = ck.optim.hysteresis_left;
	o.loss_scale = ck.optim.loss_scale;
	struct sched s = r->st.sched;
	s.num_steps = ck.sched.num_steps;
	s.num_tokens = ck.sched.num_tokens;
	s.warmup_tokens = ck.sched.warmup_tokens;
	int64_t spikes = r->st.spikes_total;
	r->st = ck;
	r->st.optim = o;
	r->st.sched = s;
	r->st.spikes_total = spikes;
	r->st.data_position = spike_end;   /* the data between the checkpoint and the spike is skipped */
	out("loss spike at iteration %lld (lm loss %.6E): rolled back to %s (iteration %lld) and "
	       "skipped the %lld samples it trained on since\n", (long long)iteration, loss, loaded,
	       (long long)ck.iteration, (long long)skipped);
	fflush(stdout);
	return 0;
}

/* ---- one iteration: queued, then its bookkeeping ----
 *
 * A step needs no host synchronisation when its scalars stay on the device (ops.h struct
 * ops_step): the losses and the gradients' sum of squares accumulate there, the device decides
 * the update (skip on a non-finite loss or norm, or on bad targets; the clip coefficient) and
 * AdamW reads that decision.  The host queues iteration k+1 before it reads iteration k's
 * struct back, so the GPU always has a step queued while the host logs, and every per-iteration
 * meaning is kept, one iteration late: the log line, the TensorBoard scalars, the skipped and
 * nan counts, the spike statistics are iteration k's.  The learning rate and Adam's step count
 * of k+1 depend on whether k was skipped (the scheduler and the step counter advance only on a
 * taken step): the host sends both candidates and the device picks (ops_step's pairs).
 *
 * Where that changes behaviour: a stop on a signal, the kill switch or --exit-duration-in-mins
 * is seen while the next iteration is already queued - that one is completed and counted
 * (applied, logged, saved) before the stop, so the run stops one iteration later than a
 * synchronous one would; targets outside the vocabulary (exit 2) skip their own update on the
 * device and the run ends after the iteration in flight, saving nothing.  Whatever reads the
 * weights or needs the iteration finished - an evaluation, a save, --exit-interval, the last
 * iteration, --log-params-norm's log line, a --skip-train-iteration-range - reads that
 * iteration back before the next one is queued (drain_after).
 *
 * fp16: the next step's loss scale (a kernel argument: the loss gradient's scale) and learning
 * rate hang on this step's overflow flag, as in Megatron (found_inf.item()).  The host keeps
 * Megatron's scaler state machine (optim.c) and reads each fp16 step back once, at its end,
 * after the optimizer is queued (drain_after): one wait per step, none inside it; the overflow
 * check itself runs on the device into the struct (ops.within_acc).  Keeping the state machine
 * on the device as well would save that wait but put the hysteresis, the window and the
 * scheduler's skip into kernels for a path Megatron itself syncs on.
 *
 * The synchronous path (every value read at once, as before) remains where a value is needed
 * on the host inside the step (defer_blocker says which): --spike-policy skip/rollback (a host
 * decision before the update), BERT (the sentence-order loss comes back per micro-batch), more
 * than one rank (host collectives of the loss), optimizers other than the one-launch AdamW, and
 * --log-num-zeros-in-grad.  LMTK_TRAIN_SYNC_STEP=1 forces it, to compare the two. */
struct iter {
	int64_t it, gbs, cur, micro;
	int deferred, slot;
	double loss, lm, sop, grad_norm;
	int stepped, nonfinite, spike, bad;
	int64_t nzeros;
	int read;                  /* deferred: s holds its struct, read back */
	struct ops_step s;
};

struct loop {   /* run_train's state between log lines, and how it ends */
	double t_start, t_log, loss_sum, sop_sum;
	double t_train;      /* when this run's first iteration began */
	int64_t log_iters, log_skipped, log_nan, loss_n, last_saved;
	int64_t iters_run;   /* iterations this run finished */
	int rc, stop;
	const char *why_stop;
};

#define DSTEP_BYTES 256

static struct ops_step *dstep(const struct run *r, int slot)
{
	return (struct ops_step *)((char *)r->dsteps + (size_t)slot * DSTEP_BYTES);
}

/* NULL when this run's steps can keep their scalars on the device, else why not */
static const char *defer_blocker(const struct run *r)
{
	const struct train_args *a = r->a;
	const struct ops *o = r->m.ops;
	const char *e = getenv("LMTK_TRAIN_SYNC_STEP");
	if (!o->step_decide || !o->adamw_multi_step)
		return "the backend reads every value back at once";
	if (e && *e && strcmp(e, "0") != 0)
		return "LMTK_TRAIN_SYNC_STEP is set";
	if (r->dist.world > 1)
		return "more than one rank";
	if (!r->m.aseg || r->st.optim.kind != OPT_ADAMW)
		return "an optimizer other than the one-launch AdamW";
	return check_defer_flags(a);
}

/* --cuda-graph: NULL when the step can be captured once and replayed, else why not.  A replay
 * repeats the captured kernels with their captured arguments; only the host copies (tokens,
 * targets, the step's struct) are refreshed, through the backend's staging.  So the step must
 * read nothing back (defer_blocker), keep its shapes (no batch-size ramp, no curriculum) and pass
 * no per-iteration value as a kernel argument: the dropout masks' seed is one (keyed by the
 * iteration's data position), and so is the loss's 1/kept when a loss mask changes the kept
 * count per micro-batch; the per-sample attention masks and position ids of
 * --reset-attention-mask and --reset-position-ids are host copies whose number depends on the
 * data.  T5 and BERT take loss masks from the data. */
static const char *graph_blocker(const struct run *r)
{
	const struct train_args *a = r->a;
	const char *why = defer_blocker(r);
	if (!r->m.ops->graph_mode)
		return "the backend has no CUDA graphs (use --device cuda)";
	if (why)
		return why;
	if (r->p->ramp.on)
		return "--rampup-batch-size changes the step's shapes";
	if (r->cl.enabled)
		return "curriculum learning changes the step's shapes";
	return check_graph_flags(a);   /* the rest is in the flags: refused before the run */
}

/* the iteration must be read back before the next one is queued (see above) */
static int drain_after(const struct run *r, int64_t it)
{
	const struct train_args *a = r->a;
	return it >= r->iters || a->fp16 || (a->eval_interval > 0 && it % a->eval_interval == 0) ||
	       (a->save && a->save_interval > 0 && it % a->save_interval == 0) ||
	       (a->exit_interval > 0 && it % a->exit_interval == 0) ||
	       (a->log_params_norm && it % a->log_interval == 0);
}

/* a loss spike: counted, and said when finite */
static int spike_check(struct run *r, int64_t it, double loss, int *nonfinite)
{
	const struct train_args *a = r->a;
	struct ckpt_state *st = &r->st;
	*nonfinite = !isfinite(loss);
	int spike = *nonfinite || (st->loss_count >= SPIKE_WARMUP && loss > a->spike_factor * st->loss_mean);
	if (spike) {
		st->spikes_total++;
		if (!*nonfinite)
			out("loss spike at iteration %lld: lm loss %.6E is above %g x its running "
			       "mean %.6E%s\n", (long long)it, loss, a->spike_factor, st->loss_mean,
			       a->spike_policy == 1 ? ": update skipped" : a->spike_policy == 2 ?
			       ": rolling back" : "");
	}
	return spike;
}

/* The synchronous iteration: every value read back as it is computed.  0: queued and decided,
 * 1: rolled back (nothing to finish), -1: stop with L->rc. */
static int iter_sync(struct run *r, struct loop *L, struct iter *q, uint64_t key)
{
	const struct train_args *a = r->a;
	struct ckpt_state *st = &r->st;
	char err[2048];
	double lr = sched_lr(&st->sched);
	int bad = 0;
	double loss = step_grads(r, st->data_position, q->micro, key, &bad);
	if (dist_any(&r->dist, DIST_WORLD, r->bad_data)) {
		L->rc = EXIT_USAGE;
		return -1;
	}
	if (bad) {
		warn("iteration %lld: %d target tokens are outside the vocabulary of %d: the data "
		     "does not match --vocab-file/--tokenizer-name-or-path", (long long)q->it, bad,
		     r->m.cfg.vocab);
		L->rc = EXIT_USAGE;
		return -1;
	}
	st->data_position += q->gbs;
	q->loss = loss;
	q->lm = r->it_lm;
	q->sop = r->it_sop;
	/* spikes: a non-finite loss, or one far above the running mean */
	q->spike = spike_check(r, q->it, loss, &q->nonfinite);
	if (q->spike && a->spike_policy == 2 && !q->nonfinite) {
		if (rollback(r, q->it, loss, err, sizeof err) < 0) {
			warn("%s", err);
			L->rc = EXIT_FAILED;
			return -1;
		}
		return 1;
	}
	q->stepped = 0;
	if (!(q->spike && a->spike_policy >= 1) && !q->nonfinite)
		q->stepped = optim_step(&st->optim, &r->m, (float)lr, &q->grad_norm);
	else
		q->grad_norm = optim_grad_norm(&st->optim, &r->m);
	q->nzeros = 0;
	if (a->log_zeros) {
		/* count on the host: rare, only with --log-num-zeros-in-grad */
		size_t zn = r->m.nparams;
		float *g = malloc((zn ? zn : 1) * sizeof *g);
		if (g) {   /* each tensor's part this rank holds reduced (all, without ZeRO-1) */
			r->m.ops->to_host(g, r->m.grads, zn * sizeof *g);
			for (int t = 0; t < r->m.ntensors; t++)
				for (size_t i = r->m.ost[t].lo; i < r->m.ost[t].hi; i++)
					q->nzeros += g[i] == 0.0f;
			free(g);
		}
		if (r->m.zb) {   /* ZeRO-1: each rank holds its shard's reduced gradient */
			double z = (double)q->nzeros;
			r->dist.sum_f64(&r->dist, DIST_DP, &z, 1);
			q->nzeros = (int64_t)z;
		}
	}
	return 0;
}

/* The deferred iteration: queued whole - forward, backward, the decision, AdamW, the copy of
 * its scalars - with nothing read back (prev: the iteration still in flight, or NULL).
 * 0, or -1: stop with L->rc. */
static int iter_queue(struct run *r, struct loop *L, struct iter *q, const struct iter *prev,
		      uint64_t key)
{
	struct model *m = &r->m;
	const struct ops *o = m->ops;
	struct ckpt_state *st = &r->st;
	struct optim *op = &st->optim;
	struct ops_step in;
	memset(&in, 0, sizeof in);
	/* the learning rate and the bias corrections, if prev is skipped [0] or taken [1]: the
	 * scheduler steps as iteration_finish will step it (Megatron: before this one's tokens) */
	struct sched s1 = st->sched;
	if (prev)
		sched_step(&s1, prev->gbs, st->consumed_tokens);
	in.lr_if[0] = (float)sched_lr(&st->sched);
	in.lr_if[1] = (float)sched_lr(&s1);
	for (int k = 0; k < 2; k++) {
		int step = op->step + 1 + (prev ? k : 0);
		in.bc1_if[k] = (float)(1.0 - pow((double)op->b1, step));
		in.bc2_if[k] = (float)(1.0 - pow((double)op->b2, step));
	}
	in.loss_scale = op->loss_scale;
	in.clip = op->clip;
	in.prev_pending = prev != NULL;
	struct ops_step *ds = dstep(r, q->slot);
	/* --cuda-graph: the first iteration runs as usual and sizes the graph's host inputs, the
	 * next two are captured (one graph per parity: the struct slot differs), the rest replayed:
	 * the host walks the step only to fill the inputs (ops.h graph_mode) */
	int gm = OPS_GRAPH_OFF;
	if (r->a->cuda_graph) {
		if (!r->graph_first)
			r->graph_first = q->it;
		gm = q->it == r->graph_first ? OPS_GRAPH_SIZE
		   : q->it <= r->graph_first + 2 ? OPS_GRAPH_CAPTURE : OPS_GRAPH_FILL;
		o->graph_mode(gm, q->slot);
	}
	o->to_device(ds, &in, sizeof in);
	o->zero(m->bad_targets, sizeof *m->bad_targets);
	m->dstep = ds;
	m->dstep_masked = 0;
	int bad = 0;
	double l = step_grads(r, st->data_position, q->micro, key, &bad);
	m->dstep = NULL;
	if (dist_any(&r->dist, DIST_WORLD, r->bad_data)) {
		L->rc = EXIT_USAGE;
		return -1;
	}
	st->data_position += q->gbs;
	if (isnan(l)) {   /* a micro-batch could not be read: the step's loss is NaN, as before */
		if (gm != OPS_GRAPH_OFF)   /* an extra host copy no graph holds */
			die(EXIT_FAILED, "iteration %lld: a micro-batch could not be read; a "
			    "--cuda-graph run stops there", (long long)q->it);
		double nan = NAN;
		o->to_device(&ds->loss[0], &nan, sizeof nan);
	}
	int32_t masked = m->dstep_masked;
	o->to_device(&ds->masked, &masked, sizeof masked);
	o->sumsq_acc(&ds->sumsq, m->grads, m->nparams);
	if (op->fp16)   /* beyond 65504: what fp16 gradients could not hold (optim.c) */
		o->within_acc(&ds->overflow, m->grads, m->nparams, 65504.0f);
	o->step_decide(ds, dstep(r, q->slot ^ 1), m->bad_targets);
	o->adamw_multi_step(m->master, m->params, m->grads, m->adam_m, m->adam_v, m->aseg,
			    m->naseg, m->aseg_total, op->emb_lr_mult, op->b1, op->b2, op->eps,
			    op->wd, ds);
	if (gm == OPS_GRAPH_SIZE)
		o->graph_mode(OPS_GRAPH_OFF, 0);
	else if (gm != OPS_GRAPH_OFF)
		o->graph_launch(q->slot);
	o->step_fetch(ds, q->slot);   /* outside the graph: its event is waited for */
	return 0;
}

/* a deferred iteration's struct, read back (once) */
static void iter_read(struct run *r, struct iter *q)
{
	if (q->deferred && !q->read) {
		q->s = *r->m.ops->step_wait(q->slot);
		q->read = 1;
	}
}

/* An iteration's bookkeeping, once its scalars are known: the scheduler, the counters, the
 * log line, TensorBoard, evaluation, saving, the stop decisions.  0, or -1: stop with L->rc. */
/* " time remaining: H:MM:SS |", after Megatron's fields on the log line (which stay as they
 * are, for slurm-pulse and users' greps): the iterations left to the last one at the mean wall
 * time of this run's iterations so far, evaluations and saves included since they recur; a
 * resumed run's mean is its own. */
static void log_time_remaining(const struct run *r, const struct loop *L, int64_t it, double now)
{
	char d[48];
	if (L->iters_run <= 0 || it > r->iters)
		return;
	double left = (double)(r->iters - it) * (now - L->t_train) / (double)L->iters_run;
	out(" time remaining: %s |", units_fmt_delta(left < 1e9 ? lround(left) : 999999999L, d, sizeof d));
}

static int iter_finish(struct run *r, struct loop *L, struct iter *q)
{
	const struct train_args *a = r->a;
	struct ckpt_state *st = &r->st;
	iter_read(r, q);
	if (q->deferred) {
		const struct ops_step *s = &q->s;
		q->loss = s->loss[0] / q->micro;
		q->lm = q->loss;
		q->sop = s->loss[1] / q->micro;
		q->grad_norm = sqrt(s->sumsq) / st->optim.loss_scale;
		q->stepped = s->taken;
		q->bad = s->bad;
		if (q->bad) {
			warn("iteration %lld: %d target tokens are outside the vocabulary of %d: the "
			     "data does not match --vocab-file/--tokenizer-name-or-path",
			     (long long)q->it, q->bad, r->m.cfg.vocab);
			L->rc = EXIT_USAGE;
			return -1;
		}
		if (q->stepped)
			st->optim.step++;   /* the device's count, mirrored for checkpoints */
		/* the scaler as optim_step runs it: not on a non-finite loss (no step was tried),
		 * else an overflow (a non-finite norm, or a gradient beyond fp16's range) halves */
		if (isfinite(q->loss))
			optim_scaler(&st->optim, !q->stepped);
		q->spike = spike_check(r, q->it, q->loss, &q->nonfinite);
		r->it_lm = q->lm;
		r->it_sop = q->sop;
	}
	int64_t it = q->it, gbs = q->gbs, cur_now = r->cur;
	int stepped = q->stepped, spike = q->spike, nonfinite = q->nonfinite;
	double loss = q->loss, t_start = L->t_start, t_log = L->t_log, loss_sum = L->loss_sum;
	double sop_sum = L->sop_sum, grad_norm = q->grad_norm;
	int64_t log_iters = L->log_iters, log_skipped = L->log_skipped, log_nan = L->log_nan;
	int64_t loss_n = L->loss_n, last_saved = L->last_saved, nzeros = q->nzeros;
	int rc = EXIT_OK;
	const char *why_stop = NULL;
	r->cur = q->cur;   /* the curriculum's length of this iteration, not the queued one's */
	if (stepped) {
		sched_step(&st->sched, gbs, st->consumed_tokens);   /* Megatron: before this one's */
		if (!spike) {
			st->loss_mean = st->loss_count ? st->loss_mean + SPIKE_ALPHA * (loss - st->loss_mean)
						       : loss;
			st->loss_count++;
		}
		loss_sum += r->bert ? r->it_lm : loss;   /* BERT: the lm loss, then the sop loss */
		sop_sum += r->it_sop;
		loss_n++;
	} else {
		st->skipped_total++;
		log_skipped++;
		/* under --fp16 an infinite gradient is the scaler's overflow (real fp16
		 * arithmetic overflows at 65504), which Megatron does not count as a nan
		 * iteration: only a loss that is not finite is one there */
		if (nonfinite || (!isfinite(grad_norm) && !a->fp16)) {
			st->nan_total++;
			log_nan++;
		}
	}
	st->iteration = it;
	st->consumed_samples += gbs;
	st->consumed_tokens += gbs * r->cur;
	log_iters++;
	L->iters_run++;

	/* TensorBoard, every --tensorboard-log-interval iterations, with Megatron's tags */
	if (r->tb && it % a->tb_log_interval == 0) {
		double lr_now = sched_lr(&st->sched);
		if (!a->tb_no_lr) {
			tb_scalar(r, "learning-rate/learning-rate", it, lr_now);
			tb_scalar(r, "learning-rate/learning-rate vs samples", st->consumed_samples, lr_now);
			tb_scalar(r, "learning-rate/learning-rate vs tokens", st->consumed_tokens, lr_now);
		}
		if (a->tb_batch) {
			tb_scalar(r, "batch-size/batch-size", it, gbs);
			tb_scalar(r, "batch-size/batch-size vs samples", st->consumed_samples, gbs);
		}
		if (stepped) {
			double gflos = 6.0 * (r->m.nweights - r->m.tensors[r->m.wte].numel -
					      (r->m.wpe >= 0 ? r->m.tensors[r->m.wpe].numel : 0)) *
				       (double)st->consumed_samples * (double)r->seq / 1e9;   /* at --seq-length */
			/* Megatron-DeepSpeed: each key of the loss dict under lm-loss-training/ */
			double lm = r->bert ? r->it_lm : loss;
			tb_scalar(r, "lm-loss-training/lm loss", it, lm);
			tb_scalar(r, "lm-loss-training/lm loss vs samples", st->consumed_samples, lm);
			tb_scalar(r, "lm-loss-training/lm loss vs tokens", st->consumed_tokens, lm);
			tb_scalar(r, "lm-loss-training/lm loss vs gigaflos (without embeddings)",
				  (int64_t)gflos, lm);
			if (r->bert && r->m.cfg.binary_head) {
				tb_scalar(r, "lm-loss-training/sop loss", it, r->it_sop);
				tb_scalar(r, "lm-loss-training/sop loss vs samples",
					  st->consumed_samples, r->it_sop);
				tb_scalar(r, "lm-loss-training/sop loss vs tokens",
					  st->consumed_tokens, r->it_sop);
				tb_scalar(r, "lm-loss-training/sop loss vs gigaflos (without "
					  "embeddings)", (int64_t)gflos, r->it_sop);
			}
		}
		if (a->fp16 && !a->tb_no_loss_scale) {
			tb_scalar(r, "loss-scale/loss-scale", it, st->optim.loss_scale);
			tb_scalar(r, "loss-scale/loss-scale vs samples", st->consumed_samples,
				  st->optim.loss_scale);
			tb_scalar(r, "loss-scale/loss-scale vs tokens", st->consumed_tokens,
				  st->optim.loss_scale);
		}
		tb_scalar(r, "grad-norm/grad-norm", it, grad_norm);
		tb_scalar(r, "grad-norm/grad-norm vs samples", st->consumed_samples, grad_norm);
		if (a->log_zeros)
			tb_scalar(r, "num-zeros/num-zeros", it, (double)nzeros);
		tb_scalar(r, "steps-vs-samples/y=steps,x=samples", st->consumed_samples, it);
		tb_scalar(r, "steps-vs-samples/y=samples,x=steps", it, st->consumed_samples);
		tb_scalar(r, "steps-vs-tokens/y=steps,x=tokens", st->consumed_tokens, it);
		tb_scalar(r, "steps-vs-tokens/y=tokens,x=steps", it, st->consumed_tokens);
		if (r->cl.enabled)
			tb_scalar(r, "curriculum_seqlen", it, (double)r->cur);
	}

	if (r->have_energy)
		energy_poll(&r->en);   /* every iteration: a RAPL counter must not wrap twice unseen */
	if (it % a->log_interval == 0) {
		double now = units_now(), per = (now - t_log) / log_iters;
		double tfl = hw_tflops(r, gbs, per);
		/* per GPU, as the TFLOPs: the batch's model FLOPs over every rank's peak */
		double mfu = r->peak > 0 ? model_flops_per_token(&r->m.cfg) * gbs * r->cur / per /
						  (r->peak * r->dist.world) : 0;
		out(" iteration %8lld/%8lld | consumed samples: %12lld | consumed tokens: %12lld |"
		       " elapsed time per iteration (s): %.2f | learning rate: %.3E |"
		       " global batch size: %5lld |", (long long)it, (long long)r->iters,
		       (long long)st->consumed_samples, (long long)st->consumed_tokens, per,
		       sched_lr(&st->sched), (long long)gbs);
		if (loss_n)
			out(" lm loss: %.6E |", loss_sum / loss_n);
		if (loss_n && r->bert && r->m.cfg.binary_head)
			out(" sop loss: %.6E |", sop_sum / loss_n);
		if (a->fp16)
			out(" loss scale: %.1f |", st->optim.loss_scale);
		out(" grad norm: %.3f | num zeros: %.1f |", grad_norm, (double)nzeros);
		if (a->log_params_norm)
			out(" params norm: %.3f |", sqrt(r->m.ops->sumsq(r->m.master, r->m.nparams)));
		if (r->cl.enabled)
			out(" curriculum seqlen: %5lld |", (long long)r->cur);
		out(" number of skipped iterations: %3lld | number of nan iterations: %3lld |"
		       " samples per second: %.3f | TFLOPs: %.2f |", (long long)log_skipped,
		       (long long)log_nan, gbs / per, tfl);
		if (mfu > 0)
			out(" MFU: %.2f%% |", 100 * mfu);
		log_time_remaining(r, L, it, now);
		out("\n");
		fflush(stdout);
		if (r->tb && a->tb_timers) {
			tb_scalar(r, "iteration-time/iteration-time", it, per);
			tb_scalar(r, "iteration-time/samples per second", it, gbs / per);
			tb_scalar(r, "iteration-time/TFLOPs per gpu (estimated)", it, tfl);
		}
		energy_row(r, it);
		t_log = now;
		loss_sum = sop_sum = 0;
		loss_n = log_iters = log_skipped = log_nan = 0;
	}
	if (a->eval_interval > 0 && it % a->eval_interval == 0) {
		char label[64];
		snprintf(label, sizeof label, "at iteration %lld", (long long)it);
		evaluate(r, FEED_VALID, label, it);
	}
	if (a->save && a->save_interval > 0 && it % a->save_interval == 0) {
		if (save(r) < 0) {
			rc = EXIT_FAILED;
			goto out;
		}
		last_saved = it;
	}
	/* decisions every rank takes together: a signal or the kill switch seen by one, the
	 * longest elapsed time of all (Megatron's max over ranks) */
	if (dist_any(&r->dist, DIST_WORLD, got_signal != 0))
		why_stop = got_signal == SIGUSR1 ? "SIGUSR1" : got_signal == SIGTERM ? "SIGTERM" :
			   got_signal == SIGINT ? "SIGINT" : "a signal on another rank";
	else if (dist_any(&r->dist, DIST_WORLD, kill_switch(r)))
		why_stop = "the kill switch";
	else if (a->exit_duration_mins > 0 &&
		 dist_max(&r->dist, DIST_WORLD, units_now() - t_start) > a->exit_duration_mins * 60)
		why_stop = "--exit-duration-in-mins";
	else if (a->exit_interval > 0 && it % a->exit_interval == 0)
		why_stop = "--exit-interval";
out:
	r->cur = cur_now;
	L->t_log = t_log;
	L->loss_sum = loss_sum;
	L->sop_sum = sop_sum;
	L->log_iters = log_iters;
	L->log_skipped = log_skipped;
	L->log_nan = log_nan;
	L->loss_n = loss_n;
	L->last_saved = last_saved;
	if (why_stop) {
		L->why_stop = why_stop;
		L->stop = 1;   /* saved below, then said: Megatron saves before it says it exits */
	}
	if (rc != EXIT_OK) {
		L->rc = rc;
		return -1;
	}
	return 0;
}

int run_train(const struct train_args *a, const struct plan *p, const char *cmdline)
{
	static struct run r;
	char err[2048];
	r.a = a;
	r.p = p;
	r.cmdline = cmdline;

	if (kill_switch(&r)) {
		out("train: kill switch %s exists: exiting without training\n", a->kill_switch_path);
		return EXIT_OK;
	}
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	double t_start = units_now();
	r.fail_code = EXIT_USAGE;
	if (setup(&r, err, sizeof err) < 0) {
		if (!r.fail_said)
			warn("%s", err);
		return strstr(err, "out of memory") ? EXIT_FAILED : r.fail_code;
	}
	if (a->cuda_graph) {
		const char *why = graph_blocker(&r);
		if (why) {
			warn("train: --cuda-graph cannot replay this run's step: %s", why);
			return EXIT_USAGE;
		}
	}

	/* skip ranges: sorted, merged */
	int64_t skip[ARGS_MAX_SKIP][2];
	int nskip = 0, next_skip = 0;
	memcpy(skip, a->skip, sizeof skip);
	qsort(skip, a->nskip, sizeof skip[0], cmp_range);
	for (int i = 0; i < a->nskip; i++) {
		if (nskip && skip[i][0] <= skip[nskip - 1][1] + 1) {
			if (skip[i][1] > skip[nskip - 1][1])
				skip[nskip - 1][1] = skip[i][1];
		} else {
			skip[nskip][0] = skip[i][0];
			skip[nskip++][1] = skip[i][1];
		}
	}

	struct ckpt_state *st = &r.st;
	struct loop L = {.t_start = t_start, .t_log = units_now(), .t_train = units_now(),
			 .last_saved = st->iteration, .rc = EXIT_OK};   /* a resumed run has nothing new to save yet */
	const char *blocker = defer_blocker(&r);
	int deferred = blocker == NULL;
	_Static_assert(sizeof(struct ops_step) <= DSTEP_BYTES, "DSTEP_BYTES");
	if (deferred && !(r.dsteps = r.m.ops->alloc(2 * DSTEP_BYTES))) {
		char oom[200];
		warn("%s; the step is not deferred", xalloc_msg(oom, sizeof oom,
			"the step scalars on the device", 2 * DSTEP_BYTES));
		deferred = 0;
	}

	int profiling = 0;   /* --profile on this rank */
	for (int i = 0; a->profile && i < a->nprofile_ranks; i++)
		profiling |= a->profile_ranks[i] == r.dist.rank;
	if (a->eval_only)   /* Megatron's do_train = False: straight to the final evaluation */
		out("train: --eval-only: evaluating at iteration %lld, training nothing\n",
		    (long long)st->iteration);
	struct iter pend, q;
	int have_pend = 0;
	while (!a->eval_only && !L.stop) {
		int64_t it = (have_pend ? pend.it : st->iteration) + 1;
		if (it > r.iters)
			break;
		/* ranges already skipped before a checkpoint are done: the iteration counter does not
		 * move through a skip, so a resumed run would otherwise skip them again */
		while (next_skip < nskip && (skip[next_skip][1] < it || skip[next_skip][1] <= st->skip_through))
			next_skip++;
		if (next_skip < nskip && skip[next_skip][0] <= it) {
			if (have_pend) {   /* the counters below are the finished iterations' */
				have_pend = 0;
				if (iter_finish(&r, &L, &pend) < 0 || L.stop)
					break;
			}
			int64_t n = 0;
			for (int64_t k = it; k <= skip[next_skip][1]; k++)
				n += ramp_gbs(&p->ramp, st->consumed_samples);
			out("Skipped iterations %lld to %lld due to --skip-train-iteration-range flag.\n",
			       (long long)it, (long long)skip[next_skip][1]);
			fflush(stdout);
			st->data_position += n;
			st->skip_through = skip[next_skip][1];
			next_skip++;
			continue;
		}
		if (profiling && it - 1 == a->profile_step_start)   /* Megatron-LM's points */
			r.m.ops->profiler(1);
		/* the batch-size ramp counts the samples of the iteration in flight too */
		int64_t gbs = ramp_gbs(&p->ramp, st->consumed_samples + (have_pend ? pend.gbs : 0));
		int64_t micro = gbs / (r.mbs * r.dist.dp);
		curriculum_at(&r, it);
		uint64_t key = philox_mix(philox_mix((uint64_t)a->seed, 0x7472616e), (uint64_t)st->data_position);
		memset(&q, 0, sizeof q);
		q.it = it;
		q.gbs = gbs;
		q.cur = r.cur;
		q.micro = micro;
		q.deferred = deferred;
		q.slot = (int)(it & 1);
		int qrc = deferred ? iter_queue(&r, &L, &q, have_pend ? &pend : NULL, key)
				   : iter_sync(&r, &L, &q, key);
		if (qrc < 0)
			break;
		if (qrc > 0)
			continue;
		int drain = !deferred || L.stop || drain_after(&r, it);
		if (profiling && it == a->profile_step_end && !drain)
			r.m.ops->profiler(0);
		if (have_pend) {   /* iteration it is queued: now read it - 1 */
			have_pend = 0;
			if (iter_finish(&r, &L, &pend) < 0)
				break;
			/* a stop decided there comes after q, already applied: finished below */
		}
		if (drain || L.stop) {
			/* a read-back that drains the device is part of the profiled step */
			if (profiling && it == a->profile_step_end) {
				iter_read(&r, &q);
				r.m.ops->profiler(0);
			}
			if (iter_finish(&r, &L, &q) < 0)
				break;
		} else {
			pend = q;
			have_pend = 1;
		}
	}
	if (have_pend && L.rc == EXIT_OK)
		iter_finish(&r, &L, &pend);
	int rc = L.rc, stop = L.stop;
	int64_t last_saved = L.last_saved;
	const char *why_stop = L.why_stop;
	if (rc == EXIT_OK && a->save && last_saved != st->iteration && st->iteration > 0 &&
	    save(&r) < 0)
		rc = EXIT_FAILED;
	if (stop && why_stop)
		out("train: stopping at iteration %lld on %s\n", (long long)st->iteration, why_stop);
	if (rc == EXIT_OK && !stop && (a->eval_only || st->iteration >= r.iters)) {
		/* as Megatron: both held-out splits once more when training is complete */
		evaluate(&r, FEED_VALID, "at the end of training for val data", -1);
		evaluate(&r, FEED_TEST, "at the end of training for test data", -1);
	}
	out("train: %s at iteration %lld/%lld: %lld samples, %lld tokens, %lld skipped and %lld "
	       "nan iterations, %lld loss spikes, %.1f s\n", rc ? "failed" : stop ? "stopped" : "done",
	       (long long)st->iteration, (long long)r.iters, (long long)st->consumed_samples,
	       (long long)st->consumed_tokens, (long long)st->skipped_total, (long long)st->nan_total,
	       (long long)st->spikes_total, units_now() - t_start);
	{
		/* the model's allocations at their peak (transient buffers included), and what the
		 * kernel measured: the process's peak resident set (the device memory itself on the
		 * cpu backend, host memory beside the GPU's on cuda) */
		struct rusage ru;
		double g = 1024.0 * 1024.0 * 1024.0;
		getrusage(RUSAGE_SELF, &ru);
		out("train: memory: the model's %s allocations peaked at %.3f GiB (activations %.3f "
		    "GiB); the process's peak resident set was %.3f GiB\n", r.m.ops->name,
		    (double)r.m.mem_peak / g, (double)r.m.mem_act / g, (double)ru.ru_maxrss * 1024.0 / g);
	}
	fflush(stdout);
	energy_row(&r, st->iteration);   /* the last row: at exit */
	if (r.have_energy)
		energy_close(&r.en);
	if (r.tb)
		tfevents_close(r.tb);
	if (r.bert)
		bert_sample_free(&r.bs);
	if (r.t5) {
		t5_sample_free(&r.ts);
		if (r.t5_nonprefix)
			warn("warning: %lld T5 samples had a token of id 0 among their real tokens, "
			     "seen by lmtk's attention where Megatron's masks hide it",
			     (long long)r.t5_nonprefix);
	}
	free(r.dtok);
	feed_close(&r.feed);
	buckets_free(&r.bk);
	if (r.dsteps)
		r.m.ops->free(r.dsteps);
	model_free(&r.m);
	if (r.dist.finish)
		r.dist.finish(&r.dist);
	return rc;
}
