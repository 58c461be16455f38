#include "train/plan/plan.h"
#include "train/optim/bnb.h"
#include "train/model/model.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "xalloc.h"
#include "train/plan/check.h"
#include "train/plan/diag.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

#define LL(x) ((long long)(x))

int64_t plan_pad_vocab(int64_t vocab, int64_t divisible_by, int64_t tp, int64_t pad_to)
{
	if (pad_to > 0)
		return pad_to;
	int64_t multiple = divisible_by * tp;
	return (vocab + multiple - 1) / multiple * multiple;
}

/* --- the plan -------------------------------------------------------------------------------- */

static void count_params(struct plan *p)
{
	const struct train_args *a = p->a;
	int64_t h = p->h;

	p->p_word = p->vocab_padded * h;
	p->p_pos = a->pos_emb == POS_LEARNED ? p->maxpos * h : 0;
	p->p_emb_ln = a->embed_layernorm || a->use_bnb_optimizer ? 2 * h : 0;   /* StableEmbedding's LN */
	p->p_final_ln = 2 * h;
	/* QKV [3p, h] + 3p, dense [h, p] + h, MLP [f, h] + f and [h, f] + h, two LayerNorms */
	p->p_layer = 4 * p->proj * h + 2 * p->f * h + 3 * p->proj + p->f + 6 * h;
	p->p_layer_rank = (4 * p->proj * h + 2 * p->f * h + 3 * p->proj + p->f) / p->tp + 6 * h;
	p->p_types = p->p_heads = 0;
	if (a->model_type == MT_BERT) {
		int64_t K = a->num_tokentypes >= 0 ? a->num_tokentypes : 2;
		p->p_types = K * h;
		p->p_heads = h * h + h + 2 * h + p->vocab_padded +
			     (a->bert_no_binary_head ? 0 : h * h + h + 2 * h + 2);
	}
	if (a->model_type == MT_T5) {   /* two stacks, the decoder's cross-attention, the LM bias */
		p->p_xlayer = 4 * p->proj * h + 3 * p->proj + 3 * h;
		p->p_xlayer_rank = (4 * p->proj * h + 3 * p->proj) / p->tp + 3 * h;
		p->p_heads = p->vocab_padded;
	}
	p->p_total = p->p_word + p->p_pos + p->p_emb_ln + p->L * p->p_layer + p->p_final_ln +
		     p->p_types + p->p_heads;
	if (a->model_type == MT_T5)
		p->p_total += p->L * (p->p_layer + p->p_xlayer) + p->p_final_ln;
	p->p_sanity = p->L * (12 * h * h + 13 * h) + p->vocab * h + p->s * h;
	p->params_used = a->assumed_params > 0 ? a->assumed_params : (double)p->p_total;
}

/* The layout: needs the layer count, MBS and a world size that TP x PP divides. */
static int layout_known(const struct train_args *a)
{
	return a->num_layers > 0 && a->micro_batch_size > 0 && a->nodes > 0 &&
	       a->gpus_per_node > 0 && (a->nodes * a->gpus_per_node) % (a->tp * a->pp) == 0;
}

static void resolve_layout(struct plan *p)
{
	const struct train_args *a = p->a;
	p->L = a->num_layers;
	p->tp = a->tp;
	p->pp = a->pp;
	p->world = a->nodes * a->gpus_per_node;
	p->dp = p->world / (p->tp * p->pp);
	p->mbs = a->micro_batch_size;
	p->gbs = a->global_batch_size > 0 ? a->global_batch_size : p->mbs * p->dp;
	p->m_full = p->gbs / (p->mbs * p->dp);
	if (p->m_full < 1)
		p->m_full = 1;
	p->partition = a->pp_partition_method ? a->pp_partition_method : "type:transformer";
}

static void make_ramp(struct plan *p, int *blocking)
{
	const struct train_args *a = p->a;
	char err[512];

	if (a->nrampup == 3) {
		if (ramp_init(&p->ramp, a->rampup[0], a->rampup[1], a->rampup[2], p->gbs, err,
			      sizeof err) < 0) {
			plan_error(p, "--rampup-batch-size %lld %lld %lld: %s", LL(a->rampup[0]), LL(a->rampup[1]),
			           LL(a->rampup[2]), err);
			*blocking = 1;
			return;
		}
	} else {
		ramp_constant(&p->ramp, p->gbs);
	}
	if (ramp_build(&p->ramp) < 0)
		xalloc_die("the batch-size ramp's schedule", 0);
}

int64_t plan_tokens_at(const struct plan *p, int64_t n)
{
	const struct curriculum *c = &p->a->curriculum;
	if (!c->enabled)
		return ramp_consumed(&p->ramp, n) * p->s;
	/* iteration by iteration until the curriculum reaches the full length, then in one go */
	struct curriculum s = *c;
	int64_t tok = 0, i;
	s.current = s.min_difficulty;
	for (i = 1; i <= n; i++) {
		int64_t len = cl_update(&s, i);
		if (len >= p->s && s.current >= s.max_difficulty)
			break;
		tok += (ramp_consumed(&p->ramp, i) - ramp_consumed(&p->ramp, i - 1)) * (len < p->s ? len : p->s);
	}
	if (i <= n)
		tok += (ramp_consumed(&p->ramp, n) - ramp_consumed(&p->ramp, i - 1)) * p->s;
	return tok;
}

/* the first iteration after which at least `tokens` were consumed (a binary search: tokens
 * only grow) */
static int64_t iter_at_tokens(const struct plan *p, int64_t tokens, int64_t hi)
{
	int64_t lo = 0;
	if (plan_tokens_at(p, hi) < tokens)
		return hi + 1;
	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;
		if (plan_tokens_at(p, mid) >= tokens)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* iterations, samples and tokens of the run */
static void run_length(struct plan *p)
{
	const struct train_args *a = p->a;
	const struct curriculum *c = &a->curriculum;
	struct ramp *r = &p->ramp;
	char err[300];

	if (c->enabled && cl_check(c, p->s, err, sizeof err) < 0)
		plan_error(p, "--deepspeed_config %s: %s", a->deepspeed_config, err);
	p->iters = a->train_iters > 0 ? a->train_iters : ramp_train_iters(r, a->train_samples);
	if (a->train_tokens > 0) {
		/* Megatron-DeepSpeed: while iteration < train_iters and consumed tokens < train_tokens */
		int64_t n = c->enabled ? iter_at_tokens(p, a->train_tokens, p->iters > 0 ? p->iters : 0)
				       : ramp_iter_at(r, (a->train_tokens + p->s - 1) / p->s);
		if (n < p->iters)
			p->iters = n;
	}
	if (p->iters < 0)
		p->iters = 0;
	ramp_finish(r, p->iters);
	p->samples = ramp_consumed(r, p->iters);
	p->tokens = plan_tokens_at(p, p->iters);
	if (c->enabled) {
		p->cl_full_iter = 0;
		struct curriculum s = *c;
		s.current = s.min_difficulty;
		for (int64_t i = 1; i <= p->iters; i++)
			if (cl_update(&s, i) >= p->s) {
				p->cl_full_iter = i;
				break;
			}
		p->cl_tokens_ramp = plan_tokens_at(p, p->cl_full_iter ? p->cl_full_iter - 1 : p->iters);
	}
	if (a->train_samples > 0 && a->nrampup == 3 && a->train_samples < r->ramp_consumed)
		plan_warning(p, "--train-samples %lld ends inside the ramp-up (%lld samples): Megatron "
			"counts %lld iterations", LL(a->train_samples), LL(r->ramp_consumed), LL(p->iters));
}

/* the iteration at which the pipeline first fills: one with PP micro-batches per replica */
static void pipeline_fill(struct plan *p)
{
	const struct ramp *r = &p->ramp;

	p->fill_gbs = p->pp * p->mbs * p->dp;
	p->fill_step = 0;
	for (int i = 0; i < r->nst; i++)
		if (r->st[i].gbs >= p->fill_gbs && ramp_row_steps(r, i)) {
			p->fill_step = r->st[i].first_step;
			break;
		}
	if (p->pp > 1 && p->gbs < p->fill_gbs)
		plan_warning(p, "--global-batch-size %lld < PP x MBS x DP = %lld: the pipeline never fills, "
			"%lld of every %lld micro-batch slots idle", LL(p->gbs), LL(p->fill_gbs),
			LL(p->pp - 1), LL(p->m_full + p->pp - 1));
}

static void partition(struct plan *p)
{
	const struct train_args *a = p->a;
	int64_t units = p->L + (a->pp_embedding ? 2 : 0);
	int64_t per = (units + p->pp - 1) / p->pp;

	p->st = xcalloc((size_t)p->pp, sizeof *p->st, "the pipeline stages' plan");
	for (int64_t i = 0; i < p->pp; i++) {
		struct plan_stage *s = &p->st[i];
		int64_t lo = i * per, hi = (i + 1) * per;
		if (lo > units)
			lo = units;
		if (hi > units)
			hi = units;
		s->layers = hi - lo;
		if (a->pp_embedding) {
			if (lo == 0 && hi > 0) {
				s->embed_units++;
				s->layers--;
			}
			if (hi == units && lo < units) {
				s->embed_units++;
				s->layers--;
			}
		}
		s->first = i == 0;
		s->last = i == p->pp - 1;
	}
}

/* bitsandbytes' optimizer-state bytes of a stage's tensors on one rank (bnb.h): 8 B per element
 * of the word embedding and of tensors under BNB_MIN_8BIT elements, else 2 B per element plus
 * two fp32 absmax per block - what optim_state_layout allocates without ZeRO-1 */
static double bnb_stage_bytes(const struct plan *p, const struct plan_stage *s)
{
	int64_t h = p->h, t = p->tp;
	int64_t layer[LAYER_TENSORS] = {h, h, 3 * p->proj * h / t, 3 * p->proj / t, h * p->proj / t, h,
					h, h, p->f * h / t, p->f / t, h * p->f / t, h};
	double b = 0;
	for (int k = 0; k < LAYER_TENSORS; k++)
		b += (double)bnb_state_bytes((size_t)layer[k], 0) * (double)s->layers;
	if (s->first)
		b += (double)bnb_state_bytes((size_t)(p->p_word / t), 1) +
		     (double)bnb_state_bytes((size_t)p->p_pos, 0) + 2.0 * (double)bnb_state_bytes((size_t)h, 0);
	if (s->last)
		b += 2.0 * (double)bnb_state_bytes((size_t)h, 0) +
		     (p->pp > 1 ? (double)bnb_state_bytes((size_t)(p->p_word / t), 1) : 0);
	return b;
}

/* T5's activations (one stage: PP = 1): each stack's layers over its own length - the
 * encoder's as act_layer, the decoder's at its length with the cross-attention's on top (q,
 * its output 2p/t, the dense's output, residual and layer norm 3h over the decoder's tokens;
 * k/v 2p/t over the encoder's; fp32 statistics and log-sum-exp) - and the logits over the
 * decoder's; checkpointed, each stack's chunk outputs and one chunk of each recomputed. */
static void t5_memory(const struct plan *p, struct plan_stage *s)
{
	double b = (double)p->mbs, tp = (double)p->tp, h = (double)p->h, e = p->abytes;
	double se = (double)p->s * b, sd = (double)p->dec_s * b;
	double dlayer = e * sd * (6.0 * h + (4.0 * (double)p->proj + 2.0 * (double)p->f) / tp) +
			4.0 * sd * (4.0 + (double)p->heads / tp) +
			e * (sd * (3.0 * h + 2.0 * (double)p->proj / tp) + se * 2.0 * (double)p->proj / tp) +
			4.0 * sd * (2.0 + (double)p->heads / tp);
	int64_t L = s->layers, n = p->ckpt_layers < L ? p->ckpt_layers : L;
	int64_t chunks = n ? (L + n - 1) / n : 0;
	s->logits = sd * (double)p->vocab_padded / tp * e;   /* in the activation type */
	s->act = (double)L * (p->act_layer + dlayer) + s->logits;
	s->act_ckpt = (double)chunks * e * h * (se + sd) + (double)n * (p->act_layer + dlayer) +
		      s->logits;
}

static void memory(struct plan *p)
{
	const struct train_args *a = p->a;
	int mixed = a->bf16 || a->fp16;
	int zs = a->zero_stage >= 0 ? a->zero_stage : a->deepspeed ? 1 : 0;
	double sbh = (double)p->s * (double)p->mbs * (double)p->h;

	p->wbytes = mixed ? 2 : 4;
	p->gbytes = a->bf16 || !a->fp16 || a->accumulate_fp32 ? 4 : 2;
	p->obytes = mixed ? 12 : 8;
	p->zero1 = zs >= 1 || (a->bf16 && a->deepspeed);
	if (zs == 0 && p->zero1)
		plan_note(p, "--bf16 under --deepspeed: DeepSpeed's BF16 optimizer shards the fp32 state over "
		          "DP like ZeRO-1 even at --zero-stage 0 (the 176B script's 'bf16 must use z0')");
	/* What train's model allocates per layer and micro-batch (model.c carve): ln1, attention
	 * projection, res2, ln2, MLP output, res3 whole (6h), q/k/v and the attention output split
	 * over TP (4p/t), the MLP's pre- and post-GeLU (2f/t), in the activation type; fp32 layer-norm
	 * statistics (4 per token) and the attention's log-sum-exp (heads/t per token).  Not
	 * Korthikanti et al.'s 34 + 5as/h bytes: the attention keeps no (s,s) probabilities and no
	 * dropout mask (both recomputed from the log-sum-exp and the counter-based masks). */
	double sb = (double)p->s * (double)p->mbs, tp = (double)p->tp;
	p->abytes = mixed ? 2 : 4;
	p->act_layer = p->abytes * sb * (6.0 * (double)p->h + (4.0 * (double)p->proj +
		       2.0 * (double)p->f) / tp) + 4.0 * sb * (4.0 + (double)p->heads / tp);
	p->ckpt_layers = a->checkpoint_num_layers > 0 ? a->checkpoint_num_layers : 1;
	p->gpu_bytes = a->gpu_memory_gib * GIB;
	p->worst = 0;
	for (int64_t i = 0; i < p->pp; i++) {
		struct plan_stage *s = &p->st[i];
		int64_t prm = s->layers * p->p_layer_rank;
		if (s->first)
			prm += p->p_word / p->tp + p->p_pos + p->p_emb_ln + p->p_types;
		if (s->last)   /* BERT's heads: replicated but for the LM bias, split with the vocab */
			prm += p->p_final_ln + (p->pp > 1 ? p->p_word / p->tp : 0) +
			       (p->p_heads ? p->p_heads - p->vocab_padded + p->vocab_padded / p->tp : 0);
		if (a->model_type == MT_T5)   /* PP = 1: the decoder too */
			prm += p->L * (p->p_layer_rank + p->p_xlayer_rank) + p->p_final_ln;
		s->params = prm;
		s->weights = (double)prm * p->wbytes;
		s->grads = (double)prm * p->gbytes;
		s->optim = (double)prm * p->obytes;
		if (a->use_bnb_optimizer)   /* the fp32 master (mixed precision) + bnb's state */
			s->optim = (double)prm * (p->obytes - 8) + bnb_stage_bytes(p, s);
		s->optim_zero = s->optim / (double)p->dp;
		s->inflight = p->pp == 1 ? 1 : (p->pp - i < p->m_full ? p->pp - i : p->m_full);
		if (s->inflight < 1)
			s->inflight = 1;
		/* the logits in the activation type: the cross-entropy reads them and writes their
		 * gradient in place, in chunks of rows, with no fp32 copy (Megatron's has one) */
		s->logits = s->last ? sbh / (double)p->h * (double)p->vocab_padded / (double)p->tp *
				      p->abytes : 0;
		if (s->last && a->model_type == MT_BERT)   /* the LM head's dense, GeLU and LN outputs */
			s->logits += 3.0 * sbh * p->abytes;
		s->act = (double)s->layers * p->act_layer * (double)s->inflight + s->logits;

		/* checkpointed: each chunk's output per micro-batch in flight, and one chunk's
		 * full activations, the recompute workspace all micro-batches share */
		int64_t n = p->ckpt_layers < s->layers ? p->ckpt_layers : s->layers;
		int64_t chunks = n ? (s->layers + n - 1) / n : 0;
		s->act_ckpt = (double)chunks * p->abytes * sbh * (double)s->inflight +
			      (double)n * p->act_layer + s->logits;
		if (a->model_type == MT_T5)
			t5_memory(p, s);
		s->total = s->weights + s->grads + (p->zero1 ? s->optim_zero : s->optim) +
			   (a->checkpoint_activations ? s->act_ckpt : s->act);
		if (s->total > p->st[p->worst].total)
			p->worst = (int)i;
	}
	const struct plan_stage *w = &p->st[p->worst];
	p->fits = w->total <= p->gpu_bytes;
	if (!p->fits)
		plan_warning(p, "does not fit: pipeline stage %d needs about %.1f GiB per GPU, more than "
			"--gpu-memory %g GiB%s", p->worst, w->total / GIB, a->gpu_memory_gib,
			!a->checkpoint_activations ? "; try --checkpoint-activations" :
			!p->zero1 && p->dp > 1 ? "; try --zero-stage 1" : "; try more TP or PP");
	else if (w->total > 0.9 * p->gpu_bytes)
		plan_warning(p, "tight: pipeline stage %d needs about %.1f GiB of the %g GiB per GPU; the CUDA "
			"context, NCCL buffers and fragmentation take a few more", p->worst,
			w->total / GIB, a->gpu_memory_gib);
}

static void point(struct plan *p, struct plan_point *pt, int64_t samples, const char *from)
{
	pt->samples = samples;
	pt->iters = ramp_iter_at(&p->ramp, samples);
	pt->tokens = p->a->curriculum.enabled ? plan_tokens_at(p, pt->iters) : samples * p->s;
	pt->from = from;
}

static void schedule(struct plan *p)
{
	const struct train_args *a = p->a;
	int64_t decay, warmup;
	const char *dfrom, *wfrom;

	if (a->train_iters > 0) {
		decay = (a->lr_decay_iters > 0 ? a->lr_decay_iters : a->train_iters) * p->gbs;
		dfrom = a->lr_decay_iters > 0 ? "--lr-decay-iters" : "--train-iters";
		warmup = a->lr_warmup_iters > 0 ? a->lr_warmup_iters * p->gbs : 0;
		wfrom = a->lr_warmup_iters > 0 ? "--lr-warmup-iters" : "default";
	} else {
		decay = a->lr_decay_samples > 0 ? a->lr_decay_samples : a->train_samples;
		dfrom = a->lr_decay_samples > 0 ? "--lr-decay-samples" : "--train-samples";
		warmup = a->lr_warmup_samples > 0 ? a->lr_warmup_samples : 0;
		wfrom = a->lr_warmup_samples > 0 ? "--lr-warmup-samples" : "default";
	}
	if (a->lr_warmup_fraction >= 0) {
		warmup = (int64_t)(a->lr_warmup_fraction * (double)decay);
		wfrom = "--lr-warmup-fraction";
	}
	if (warmup >= decay)
		plan_error(p, "the warmup (%lld samples, %s) is not shorter than the decay (%lld samples, %s)",
		           LL(warmup), wfrom, LL(decay), dfrom);
	point(p, &p->warmup, warmup, wfrom);
	if (a->lr_decay_tokens > 0) {
		/* decay by tokens (BigScience): the lr reaches --min-lr once that many are consumed */
		if (a->curriculum.enabled) {   /* the iteration whose tokens first pass it */
			int64_t n = iter_at_tokens(p, a->lr_decay_tokens, a->lr_decay_tokens);
			point(p, &p->decay, ramp_consumed(&p->ramp, n), "--lr-decay-tokens");
		} else {
			point(p, &p->decay, (a->lr_decay_tokens + p->s - 1) / p->s, "--lr-decay-tokens");
		}
		p->decay.tokens = a->lr_decay_tokens;
	} else {
		point(p, &p->decay, decay, dfrom);
	}
	if (p->warmup.iters > p->iters)
		plan_warning(p, "the warmup ends after the run (iteration %lld of %lld): the lr never reaches "
			"--lr", LL(p->warmup.iters), LL(p->iters));
	if (strcmp(a->lr_decay_style, "constant") == 0)
		plan_note(p, "--lr-decay-style constant: the decay point is not used");
	else if (p->decay.iters > p->iters)
		plan_note(p, "the decay ends after the run (iteration %lld of %lld): the lr never reaches "
		          "--min-lr", LL(p->decay.iters), LL(p->iters));
}

static void checkpoints(struct plan *p)
{
	const struct train_args *a = p->a;
	int mixed = a->bf16 || a->fp16;
	p->ckpt_weights = p->params_used * p->wbytes;
	p->ckpt_full = p->params_used * (p->wbytes + (mixed ? 4 : 0) + 8);
	p->ckpt_weights_s = p->ckpt_weights / (a->checkpoint_gbps * 1e9);
	p->ckpt_full_s = p->ckpt_full / (a->checkpoint_gbps * 1e9);
	/* every --save-interval and at the end; --save-keep keeps the newest N, the multiples of M,
	 * and for a moment the new one beside them */
	if (a->save && a->save_interval > 0 && p->iters > 0) {
		p->ckpt_saves = p->iters / a->save_interval + (p->iters % a->save_interval != 0);
		p->ckpt_kept = p->ckpt_saves;
		if (a->save_keep > 0) {
			int64_t k = a->save_keep + 1 +
				    (a->save_keep_every > 0 ? p->iters / a->save_keep_every : 0);
			p->ckpt_kept = k < p->ckpt_saves ? k : p->ckpt_saves;
		}
		p->ckpt_disk = (double)p->ckpt_kept * p->params_used * (a->use_bnb_optimizer ? 6 : 12);
	}
}

/* Time from the step model (gpumodel.h) of the CUDA backend on --gpu-model's device: an
 * iteration of m micro-batches per pipeline takes (m + PP - 1) slots of the slowest stage's
 * micro-batch plus its tail (norm, optimizer, the DP gradients' exposed sum); the TFLOPs are what train would
 * log for that iteration time (run.c hw_tflops: Megatron's formula). */
static void model_timing(struct plan *p)
{
	const struct train_args *a = p->a;
	const struct ramp *r = &p->ramp;
	const struct gpumodel_device *dev = gpumodel_device(a->gpu_model ? a->gpu_model : "a100");
	int64_t *layers = xmalloc((size_t)p->pp * sizeof *layers, "the layers per pipeline stage");
	if (!dev)
		die(EXIT_FAILED, "--gpu-model %s: no such GPU model", a->gpu_model);
	for (int64_t i = 0; i < p->pp; i++)
		layers[i] = p->st[i].layers;
	struct gpumodel_cfg c = {
		.h = p->h, .heads = p->heads, .ffn = p->f, .seq = p->s, .mbs = p->mbs,
		.vocab = p->vocab, .vocab_padded = p->vocab_padded, .maxpos = p->maxpos,
		.tp = p->tp, .pp = p->pp, .dp = p->dp, .micro = p->m_full,
		.gpus_per_node = a->gpus_per_node, .stage_layers = layers,
		.ckpt_layers = a->checkpoint_activations ? p->ckpt_layers : 0,
		.alibi = a->pos_emb != POS_LEARNED, .embed_ln = a->embed_layernorm || a->use_bnb_optimizer,
		.fp16 = a->fp16, .zero1 = p->zero1, .post_ln = a->post_ln_residual,
		.overlap = a->overlap_grad_reduce,
		/* Megatron-LM's default bucket, as run.c's */
		.bucket = a->ddp_bucket_size > 0 ? (double)a->ddp_bucket_size
			  : p->dp * 1e6 > 4e7 ? p->dp * 1e6 : 4e7,
		.reset_pos = a->reset_position_ids, .reset_attn = a->reset_attention_mask,
		.hidden_dropout = a->hidden_dropout, .sgd_momentum = a->sgd_momentum,
		/* run.c defer_blocker's conditions, as far as the plan knows them */
		.deferred = a->model_type != MT_BERT &&
			    !a->use_bnb_optimizer && strcmp(a->optimizer, "adam") == 0 &&
			    !a->spike_policy && !a->log_zeros,
		.graph = a->cuda_graph,
		.mds = a->step_model && strcmp(a->step_model, "megatron-deepspeed") == 0,
		.attn_dropout = a->attention_dropout,
		.opt = a->use_bnb_optimizer ? GM_BNB : strcmp(a->optimizer, "lamb") == 0 ? GM_LAMB
		       : strcmp(a->optimizer, "sgd") == 0 ? GM_SGD : GM_ADAMW,
	};
	int rc = gpumodel_run(&p->gm, &c, dev);
	const struct gpumodel_attn_variant *var;
	int nvar = c.mds ? 0 : gpumodel_attn_variants(&var);
	for (int i = 0; i < nvar && rc == 0; i++) {
		struct gpumodel g;
		c.attn = &var[i];
		rc = gpumodel_run(&g, &c, dev);
		if (rc < 0)
			break;
		double tok = (double)p->gbs * (double)p->s / g.t_iter;
		p->attn_var[i].name = var[i].name;
		p->attn_var[i].t_iter = g.t_iter;
		p->attn_var[i].tokens_s = tok;
		p->attn_var[i].mfu = (6 * (double)p->p_total + 6 * (double)p->L * (double)p->h *
				      (double)p->s) * tok / (dev->tc * (double)p->world);
		p->n_attn_var = i + 1;
		gpumodel_free(&g);
	}
	free(layers);
	if (rc < 0)
		xalloc_die("the GPU memory and timing model", 0);
	p->have_time = 1;
	p->time_model = 1;
	p->flops_factor = a->checkpoint_activations ? 8 : 6;
	p->t_slot = p->gm.t_slot;
	p->t_iter = p->gm.t_iter;
	double per_token = p->t_iter / ((double)p->gbs * (double)p->s), total = 0, ramp_s = 0;
	int64_t ramp_tokens = 0;
	p->days = (double)p->tokens * per_token / 86400;
	for (int i = 0; i < r->nst; i++) {
		int64_t steps = ramp_row_steps(r, i), g = r->st[i].gbs;
		int64_t m = (g + p->mbs * p->dp - 1) / (p->mbs * p->dp);
		double t = gpumodel_iter_seconds(&p->gm, p->pp, m);
		total += (double)steps * t;
		if (i < r->nst - 1) {
			ramp_s += (double)steps * t;
			ramp_tokens += steps * g * p->s;
		}
	}
	p->ramp_aware_days = total / 86400;
	p->ramp_days = ramp_s / 86400;
	p->ramp_days_full_speed = (double)ramp_tokens * per_token / 86400;
	/* what train logs: run.c hw_tflops, and the MFU of its log line */
	double s = (double)p->s, h = (double)p->h, L = (double)p->L, V = (double)p->vocab_padded;
	double coeff = a->glu_activation ? 32 : 24, act = a->checkpoint_activations ? 4 : 3;
	double f = coeff * act * (double)p->gbs * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
	p->model_tflops = f / (p->t_iter * (double)p->world * 1e12);
	struct model_config mc = {.layers = (int)p->L, .hidden = (int)p->h, .ffn = (int)p->f,
				  .padded_vocab = (int)p->vocab_padded, .seq = (int)p->s};
	/* MFU as llm.c counts it (train_gpt2.cu gpt2_estimate_mfu): 6N + 6 L h s FLOPs per token, N
	 * every parameter (the tied embedding included), attention's causal half; PaLM's (appendix
	 * B) counts the whole T x T, 6N + 12 L h s, N the matmul weights */
	p->model_tokens_s = (double)p->gbs * s / p->t_iter;
	p->model_mfu = (6 * (double)p->p_total + 6 * L * h * s) * p->model_tokens_s /
		       (dev->tc * (double)p->world);
	p->model_mfu_palm = model_flops_per_token(&mc) * p->model_tokens_s / (dev->tc * (double)p->world);
	p->ramp_tflops = ramp_s > 0 ? p->model_tflops * p->ramp_days_full_speed / p->ramp_days : 0;
	if (a->glu_activation)
		plan_note(p, "the step model prices a GeLU MLP, not --glu-activation %s", a->glu_activation);
}

static void timing(struct plan *p)
{
	const struct train_args *a = p->a;
	const struct ramp *r = &p->ramp;
	double T = a->assumed_tflops * 1e12, P = p->params_used, total = 0, ramp_s = 0;
	int64_t ramp_tokens = 0;

	if (a->assumed_tflops <= 0 && a->model_type == MT_T5) {   /* the step model is GPT's */
		if (a->gpu_model)
			plan_error(p, "--gpu-model %s: the step model prices a GPT's operations, not a "
				   "T5's; give --assumed-tflops for its days", a->gpu_model);
		return;
	}
	if (a->assumed_tflops <= 0) {
		model_timing(p);
		return;
	}
	if (a->gpu_model)
		plan_note(p, "--gpu-model %s: not used, --assumed-tflops gives the speed", a->gpu_model);
	p->have_time = 1;
	p->flops_factor = a->checkpoint_activations ? 8 : 6;
	if (a->model_type == MT_T5) {   /* the model's count per token, not F x params */
		struct model_config c = {.arch = MODEL_T5, .layers = (int)p->L, .hidden = (int)p->h,
					 .ffn = (int)p->f, .padded_vocab = (int)p->vocab_padded,
					 .seq = (int)p->s, .dec_seq = (int)p->dec_s};
		p->flops_token = model_flops_per_token(&c) * p->flops_factor / 6.0;
		P = p->flops_token / p->flops_factor;   /* the "params" of the GPT formula below */
	}
	p->t_iter = (double)p->gbs * (double)p->s * p->flops_factor * P / ((double)p->world * T);
	p->t_slot = p->t_iter / (double)(p->m_full + p->pp - 1);
	p->days = (double)p->tokens * p->flops_factor * P / ((double)p->world * T * 86400);
	for (int i = 0; i < r->nst; i++) {
		int64_t steps = ramp_row_steps(r, i), g = r->st[i].gbs;
		int64_t m = (g + p->mbs * p->dp - 1) / (p->mbs * p->dp);
		double t = g == p->gbs ? p->t_iter : p->t_slot * (double)(m + p->pp - 1);
		total += (double)steps * t;
		if (i < r->nst - 1) {
			ramp_s += (double)steps * t;
			ramp_tokens += steps * g * p->s;
		}
	}
	p->ramp_aware_days = total / 86400;
	p->ramp_days = ramp_s / 86400;
	p->ramp_days_full_speed = (double)ramp_tokens * p->flops_factor * P /
				  ((double)p->world * T * 86400);
	p->ramp_tflops = ramp_s > 0 ? a->assumed_tflops * p->ramp_days_full_speed / p->ramp_days : 0;
}

static void data(struct plan *p)
{
	const struct train_args *a = p->a;
	const char *split = a->split ? a->split : "969, 30, 1";
	char err[1024];
	int n = a->ndata_path;
	double wsum = 0;

	if (!n)
		return;
	if (n > 1 && n % 2) {
		plan_error(p, "--data-path takes PREFIX, or pairs of WEIGHT PREFIX; got %d values", n);
		return;
	}
	p->nds = n == 1 ? 1 : n / 2;
	p->ds = xcalloc((size_t)p->nds, sizeof *p->ds, "the --data-path datasets");
	for (int i = 0; i < p->nds; i++) {
		double w = 1;
		const char *prefix = n == 1 ? a->data_path[0] : a->data_path[2 * i + 1];
		if (n > 1 && (args_float(a->data_path[2 * i], &w) < 0 || w < 0)) {
			plan_error(p, "--data-path: '%s' is not a weight (values go WEIGHT PREFIX ...)",
			           a->data_path[2 * i]);
			w = 0;
		}
		if (datasize_read(&p->ds[i], prefix, split, err, sizeof err) < 0)
			plan_error(p, "--data-path: %s", err);
		p->ds[i].prefix = prefix;
		p->ds[i].weight = w;
		wsum += w;
	}
	if (wsum <= 0) {
		plan_error(p, "--data-path: the weights sum to zero");
		return;
	}
	for (int i = 0; i < p->nds; i++) {
		p->ds[i].weight /= wsum;
		if (p->ds[i].docs && !p->ds[i].tokens[0])
			plan_error(p, "--data-path %s: the train split (--split %s) has no documents", p->ds[i].prefix,
			           split);
		if (p->ds[i].dtype == 8 && p->vocab > 65535)
			plan_error(p, "--data-path %s holds uint16 ids but the vocabulary has %lld: not "
			           "tokenized with this tokenizer", p->ds[i].prefix, LL(p->vocab));
	}
}

/* The run's counts - samples, tokens, the schedule's points, the iterations' samples - are
 * 64-bit integers; each flag is bounded (args.c) but their products are not.  Checked in floating
 * point before any is formed, so that a long run at a large batch is refused with the product
 * instead of wrapping into a negative (or zero) schedule.  1 when every product fits. */
static int in_64_bits(struct plan *p)
{
	const struct train_args *a = p->a;
	const double lim = 0x1p62;
	double gbs = (double)p->gbs, s = (double)(p->s > 0 ? p->s : 1);
	struct { const char *what; double n; } c[] = {
		{"--train-iters x --global-batch-size x --seq-length tokens",
		 (double)(a->train_iters > 0 ? a->train_iters : 0) * gbs * s},
		{"--lr-decay-iters x --global-batch-size samples",
		 (double)(a->lr_decay_iters > 0 ? a->lr_decay_iters : 0) * gbs * s},
		{"--lr-warmup-iters x --global-batch-size samples",
		 (double)(a->lr_warmup_iters > 0 ? a->lr_warmup_iters : 0) * gbs * s},
		{"--train-samples x --seq-length tokens",
		 (double)(a->train_samples > 0 ? a->train_samples : 0) * s},
		{"--lr-decay-samples x --seq-length tokens",
		 (double)(a->lr_decay_samples > 0 ? a->lr_decay_samples : 0) * s},
	};
	for (size_t i = 0; i < sizeof c / sizeof *c; i++)
		if (c[i].n > lim) {
			plan_error(p, "%s: %.3g, beyond the 2^62 that the run's 64-bit counters hold",
				   c[i].what, c[i].n);
			return 0;
		}
	return 1;
}

int plan_make(struct plan *p, const struct train_args *a)
{
	int blocking;

	memset(p, 0, sizeof *p);
	p->a = a;
	blocking = check_flags(p);
	if (layout_known(a)) {
		resolve_layout(p);
		check_layout(p);
	}
	if (blocking)
		return -1;

	p->h = a->hidden_size;
	p->heads = a->num_attention_heads;
	p->f = a->ffn_hidden_size > 0 ? a->ffn_hidden_size : 4 * p->h;
	p->kv = a->kv_channels > 0 ? a->kv_channels : p->h / p->heads;
	p->proj = p->kv * p->heads;
	p->s = a->seq_length;
	p->dec_s = a->model_type == MT_T5 ? a->decoder_seq_length : 0;
	p->maxpos = a->max_position_embeddings;
	p->vocab_padded = plan_pad_vocab(p->vocab, a->make_vocab_size_divisible_by, p->tp,
					 a->pad_vocab_size_to);

	make_ramp(p, &blocking);
	if (blocking || !in_64_bits(p))
		return -1;
	count_params(p);
	run_length(p);
	check_ramp(p);
	pipeline_fill(p);
	partition(p);
	memory(p);
	schedule(p);
	checkpoints(p);
	timing(p);
	data(p);
	p->complete = 1;
	return 0;
}

void plan_free(struct plan *p)
{
	for (int i = 0; i < p->nerrors; i++)
		free(p->errors[i]);
	for (int i = 0; i < p->nwarnings; i++)
		free(p->warnings[i]);
	for (int i = 0; i < p->nnotes; i++)
		free(p->notes[i]);
	free(p->errors);
	free(p->warnings);
	free(p->notes);
	free(p->st);
	free(p->ds);
	free(p->indivisible);
	ramp_free(&p->ramp);
	gpumodel_free(&p->gm);
}
