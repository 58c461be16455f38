#include "train/plan/report.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#define GIB (1024.0 * 1024.0 * 1024.0)
#define LL(x) ((long long)(x))

/* 176247271424 -> "176,247,271,424"; buffers rotate so one printf can hold several */
static const char *num(int64_t v)
{
	static char bufs[16][32];
	static int k;
	char tmp[32], *out = bufs[k++ % 16];
	int n = snprintf(tmp, sizeof tmp, "%lld", LL(v < 0 ? -v : v)), j = 0;
	if (v < 0)
		out[j++] = '-';
	for (int i = 0; i < n; i++) {
		if (i && (n - i) % 3 == 0)
			out[j++] = ',';
		out[j++] = tmp[i];
	}
	out[j] = '\0';
	return out;
}

static const char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static const char *fmt(const char *f, ...)
{
	static char bufs[16][128];
	static int k;
	char *out = bufs[k++ % 16];
	va_list ap;
	va_start(ap, f);
	vsnprintf(out, 128, f, ap);
	va_end(ap);
	return out;
}

/* "  label ......... value  note" */
static void row(FILE *f, const char *label, const char *value, const char *note)
{
	fprintf(f, "  %-44s %16s%s%s\n", label, value, note && *note ? "  " : "", note ? note : "");
}

static const char *ratio(int64_t a, int64_t b)
{
	if (a % b == 0)
		return fmt("%lld", LL(a / b));
	return fmt("%.1f", (double)a / (double)b);
}

static const char *billions(double n)
{
	return fmt("%.0fB", n / 1e9);
}

/* Truncated, not rounded, to two decimals: 176e9 bf16 weights are 327.8255 GiB, which the
 * 176B planning figures (and so the tests) give as 327.82. */
static const char *gib(double bytes)
{
	return fmt("%.2f", floor(bytes / GIB * 100) / 100);
}

static const char *precision(const struct train_args *a)
{
	return a->bf16 ? "bf16" : a->fp16 ? "fp16" : "fp32";
}

/* --- text ------------------------------------------------------------------------------------ */

static void text_model(const struct plan *p, FILE *f)
{
	const struct train_args *a = p->a;
	int classic = p->f == 4 * p->h && p->proj == p->h;

	fprintf(f, "\nmodel\n");
	if (a->model_type == MT_BERT)
		row(f, "architecture", "BERT", a->bert_no_binary_head ? "Megatron's BertModel, "
		    "--bert-no-binary-head" : "Megatron's BertModel with the binary head");
	if (a->model_type == MT_T5)
		row(f, "architecture", "T5", fmt("Megatron's T5Model: encoder of %lld and decoder of "
						 "%lld tokens, --num-layers each", LL(p->s),
						 LL(p->dec_s)));
	row(f, "vocabulary", num(p->vocab), fmt("from %s", p->vocab_from));
	row(f, "padded vocabulary", num(p->vocab_padded), a->pad_vocab_size_to > 0 ?
	    "--pad-vocab-size-to" : fmt("multiple of --make-vocab-size-divisible-by %lld x TP %lld",
					LL(a->make_vocab_size_divisible_by), LL(p->tp)));
	row(f, "parameters", num(p->p_total), fmt("%s, exact count", billions((double)p->p_total)));
	row(f, "  word embeddings", num(p->p_word), fmt("%s x %s, tied with the output layer",
							num(p->vocab_padded), num(p->h)));
	row(f, "  position embeddings", num(p->p_pos), a->pos_emb == POS_LEARNED ?
	    fmt("learned: --max-position-embeddings %lld x h", LL(p->maxpos)) :
	    a->pos_emb == POS_ALIBI ? "alibi: none" : "rotary: none");
	if (p->p_emb_ln)
		row(f, "  embedding layer norm", num(p->p_emb_ln), a->use_bnb_optimizer && !a->embed_layernorm
			    ? "StableEmbedding (--use-bnb-optimizer): 2h" : "--embed-layernorm: 2h");
	if (a->model_type == MT_BERT)
		row(f, "  token-type embeddings", num(p->p_types),
		    fmt("--num-tokentypes %lld x h", LL(p->p_types / p->h)));
	row(f, "  per transformer layer", num(p->p_layer), classic ? "12h^2 + 13h" :
	    "4ph + 2fh + 3p + f + 6h (p = heads x kv-channels, f = ffn)");
	if (a->model_type == MT_T5) {
		row(f, "  encoder layers", num(p->L * p->p_layer), fmt("%lld layers", LL(p->L)));
		row(f, "  cross-attention per decoder layer", num(p->p_xlayer), classic ?
		    "4h^2 + 6h: query, key_value, dense, layer norm" : "4ph + 3p + 3h");
		row(f, "  decoder layers", num(p->L * (p->p_layer + p->p_xlayer)),
		    fmt("%lld layers", LL(p->L)));
		row(f, "  final layer norms", num(2 * p->p_final_ln), "2h each stack");
		row(f, "  LM head bias", num(p->p_heads), "Vp, split with the vocabulary");
	} else {
		row(f, "  transformer layers", num(p->L * p->p_layer), fmt("%lld layers", LL(p->L)));
		row(f, "  final layer norm", num(p->p_final_ln), "2h");
	}
	if (a->model_type == MT_BERT)
		row(f, "  heads", num(p->p_heads), a->bert_no_binary_head ?
		    "LM head: dense h^2 + h, layer norm 2h, bias Vp" :
		    "LM head h^2 + 3h + Vp; pooler h^2 + h; binary head 2h + 2");
	row(f, "  non-embedding", num(p->p_total - p->p_word - p->p_pos - p->p_types), "");
	if (a->model_type != MT_T5)   /* a GPT's */
		row(f, "runs' sanity formula", num(p->p_sanity),
		    fmt("%s: l*(12h^2 + 13h) + V*h + s*h, V = %s unpadded",
			billions((double)p->p_sanity), num(p->vocab)));
	row(f, "hidden/layers", ratio(p->h, p->L), p->h % p->L ? fmt("int %lld", LL(p->h / p->L)) : "");
	row(f, "hidden/heads", ratio(p->h, p->heads), p->h % p->heads ?
	    fmt("int %lld", LL(p->h / p->heads)) : "");
	row(f, "ffn hidden size", num(p->f), p->f == 4 * p->h ? "4h" : "--ffn-hidden-size");
}

static const char *stage_layers(const struct plan *p, const struct plan_stage *s)
{
	if (!p->a->pp_embedding)
		return fmt("%lld", LL(s->layers));
	if (s->embed_units == 2)
		return fmt("emb+%lld+emb", LL(s->layers));
	if (s->embed_units && s->first)
		return fmt("emb+%lld", LL(s->layers));
	if (s->embed_units)
		return fmt("%lld+emb", LL(s->layers));
	return fmt("%lld", LL(s->layers));
}

static void text_layout(const struct plan *p, FILE *f)
{
	const struct train_args *a = p->a;
	int64_t units = p->L + (a->pp_embedding ? 2 : 0);

	fprintf(f, "\nlayout\n");
	row(f, "GPUs", num(p->world), fmt("%lld nodes x %lld (%s, %s)", LL(a->nodes),
					  LL(a->gpus_per_node), a->nodes_from, a->gpus_from));
	row(f, "TP x PP x DP", fmt("%lld x %lld x %lld", LL(p->tp), LL(p->pp), LL(p->dp)), "");
	row(f, "micro-batch size (MBS)", num(p->mbs), "");
	row(f, "global batch size (GBS)", num(p->gbs),
	    fmt("%lld micro-batches per pipeline x MBS x DP = %lld", LL(p->m_full), LL(p->mbs * p->dp)));
	row(f, "pipeline partition units", num(units), fmt("%s per stage (--pp-partition-method %s)",
							    ratio(units, p->pp), p->partition));
	row(f, "precision", precision(a), "");
	row(f, "optimizer state sharded over DP", p->zero1 ? "yes" : "no",
	    p->zero1 ? "ZeRO-1" : "--zero-stage 0");
	row(f, "activation checkpointing", a->checkpoint_activations ? "yes" : "no",
	    a->checkpoint_activations ? fmt("chunks of %lld layer%s recomputed in the backward",
					    LL(p->ckpt_layers), p->ckpt_layers > 1 ? "s" : "") : "");
	fprintf(f, "\n  %5s %12s %16s %9s %9s %9s %9s %9s\n", "stage", "layers", "params/GPU",
		"weights", "grads", "optim", "activ", "total");
	for (int64_t i = 0; i < p->pp; i++) {
		const struct plan_stage *s = &p->st[i];
		fprintf(f, "  %5lld %12s %16s %9s %9s %9s %9s %9s%s\n", LL(i), stage_layers(p, s),
			num(s->params), gib(s->weights), gib(s->grads),
			gib(p->zero1 ? s->optim_zero : s->optim),
			gib(a->checkpoint_activations ? s->act_ckpt : s->act), gib(s->total),
			i == p->worst ? "  <-" : "");
	}
	fprintf(f, "  (GiB per GPU, as configured)\n");
}

static void text_memory(const struct plan *p, FILE *f)
{
	const struct train_args *a = p->a;
	const struct plan_stage *s = &p->st[p->worst];
	int ck = a->checkpoint_activations;
	double base = s->weights + s->grads;

	fprintf(f, "\nmemory per GPU in GiB, an estimate: pipeline stage %d, the fullest\n", p->worst);
	row(f, fmt("weights (%s, %d B/param)", precision(a), p->wbytes), gib(s->weights), "");
	row(f, fmt("gradients (%s, %d B/param)", p->gbytes == 4 ? "fp32" : "fp16", p->gbytes),
	    gib(s->grads), "");
	if (a->use_bnb_optimizer)
		row(f, fmt("optimizer (%sbnb 8-bit Adam, %.2f B/param)", p->obytes == 12 ?
			   "fp32 master + " : "", s->params ? s->optim / (double)s->params : 0.0),
		    gib(s->optim), p->zero1 ? "without ZeRO-1" : "without ZeRO-1 (configured)");
	else
		row(f, fmt("optimizer (%s, %d B/param)", p->obytes == 12 ? "fp32 master + Adam" : "Adam",
			   p->obytes), gib(s->optim), p->zero1 ? "without ZeRO-1" : "without ZeRO-1 (configured)");
	row(f, "", gib(s->optim_zero), fmt("with ZeRO-1 over DP %lld%s", LL(p->dp),
					   p->zero1 ? " (configured)" : ""));
	row(f, fmt("activations (%lld of %lld micro-batches)", LL(s->inflight), LL(p->m_full)),
	    gib(s->act), ck ? "without checkpointing" : "without checkpointing (configured)");
	row(f, "", gib(s->act_ckpt), fmt("with --checkpoint-activations%s", ck ? " (configured)" : ""));
	if (s->logits)
		row(f, "  of which logits", gib(s->logits), "s x MBS x Vp/TP x e B, no fp32 copy");
	row(f, "total as configured", gib(s->total), fmt("of --gpu-memory %g GiB: %s", a->gpu_memory_gib,
		p->fits ? (s->total > 0.9 * p->gpu_bytes ? "fits, tight" : "fits") : "DOES NOT FIT"));
	row(f, "total without ZeRO-1", gib(base + s->optim + (ck ? s->act_ckpt : s->act)), "");
	row(f, "total without checkpointing", gib(base + (p->zero1 ? s->optim_zero : s->optim) + s->act),
	    "");
	row(f, "total with ZeRO-1 and checkpointing", gib(base + s->optim_zero + s->act_ckpt), "");
}

static void text_ramp(const struct plan *p, FILE *f)
{
	const struct ramp *r = &p->ramp;
	int64_t cum = 0, maxdiff = 0;
	int compared = 0;

	fprintf(f, "\nbatch size\n");
	if (!r->on) {
		row(f, "global batch size", num(p->gbs), "constant: no --rampup-batch-size");
	} else {
		row(f, "ramp-up", fmt("%lld -> %lld", LL(r->start), LL(r->gbs)),
		    fmt("by %lld: %lld increments over %s samples", LL(r->incr), LL(r->num_incr),
			num(r->rsamples)));
		row(f, "samples per increment", fmt("%.1f", r->per),
		    fmt("%s / %lld (the READMEs: %lld)", num(r->rsamples), LL(r->num_incr),
			LL((int64_t)r->per)));
		fprintf(f, "\n  %6s %6s %8s %7s %10s %10s %10s %12s %14s %18s\n", "GBS", "micro", "steps",
			"README", "cum steps", "README cum", "first step", "samples", "cum samples",
			"cum tokens");
		for (int i = 0; i < r->nst; i++) {
			const struct ramp_stage *s = &r->st[i];
			int64_t steps = ramp_row_steps(r, i);
			int constant = i == r->nst - 1;
			if (!steps)
				continue;
			/* the hand figure is a whole stage's: not for the constant phase, nor for a stage
			 * the run ends inside */
			int whole = !constant && steps == s->steps;
			cum += steps;
			if (whole) {
				int64_t d = llabs(s->steps - s->hand_steps);
				if (d > maxdiff)
					maxdiff = d;
				compared++;
			}
			fprintf(f, "  %6lld %6s %8s %7s %10s %10s %10s %12s %14s %18s\n", LL(s->gbs),
				s->gbs % (p->mbs * p->dp) ? fmt("%.1f", (double)s->gbs / (double)(p->mbs * p->dp))
							  : num(s->gbs / (p->mbs * p->dp)),
				num(steps), whole ? num(s->hand_steps) : "-", num(cum),
				whole ? num(s->hand_cum) : "-", num(s->first_step), num(steps * s->gbs),
				num(s->start_samples + steps * s->gbs),
				num(plan_tokens_at(p, s->first_step - 1 + steps)));
		}
		fprintf(f, "  (steps: Megatron's count; README: floor(%lld / GBS), the runs' hand count; "
			"micro: micro-batches per pipeline)\n", LL((int64_t)r->per));
		row(f, "ramp-up iterations", num(r->ramp_steps),
		    fmt("%s samples, %s tokens", num(r->ramp_consumed), num(plan_tokens_at(p, r->ramp_steps))));
		row(f, "hand count vs Megatron's, per stage", compared ? fmt("<= %lld", LL(maxdiff)) : "-",
		    compared ? fmt("steps apart, over %d whole stages", compared) : "no whole stage");
	}
	row(f, "pipeline fills at GBS >= PP x MBS x DP", num(p->fill_gbs),
	    p->fill_step ? fmt("from iteration %s (GBS %lld)", num(p->fill_step),
			       LL(r->st[ramp_stage_of(r, p->fill_step)].gbs)) : "never");
	if (p->indivisible)
		row(f, "GBS not divisible by MBS x DP", "ERROR", p->indivisible);
}

static void text_point(const struct plan *p, FILE *f, const char *what, const struct plan_point *pt)
{
	const struct ramp *r = &p->ramp;
	int64_t gbs = pt->iters ? r->st[ramp_stage_of(r, pt->iters)].gbs : 0;
	fprintf(f, "  %-36s %16s %12s %18s %6s\n", fmt("%s (%s)", what, pt->from), num(pt->samples),
		num(pt->iters), num(pt->tokens), gbs ? num(gbs) : "-");
}

static void text_schedule(const struct plan *p, FILE *f)
{
	const struct train_args *a = p->a;
	struct plan_point end = {p->samples, p->iters, p->tokens,
				 a->train_iters > 0 ? "--train-iters" : "--train-samples"};
	if (a->train_tokens > 0 && p->tokens >= a->train_tokens)
		end.from = "--train-tokens";

	fprintf(f, "\nschedule (in samples, as Megatron counts it; iterations through the ramp-up)\n");
	fprintf(f, "  %-36s %16s %12s %18s %6s\n", "", "samples", "iteration", "tokens", "GBS");
	text_point(p, f, "warmup ends", &p->warmup);
	text_point(p, f, "decay ends", &p->decay);
	text_point(p, f, "training ends", &end);
	row(f, "learning rate", a->lr >= 0 ? fmt("%g -> %g", a->lr, a->min_lr) : "-",
	    fmt("%s decay", a->lr_decay_style));
	if (a->curriculum.enabled) {
		const struct curriculum *c = &a->curriculum;
		row(f, "curriculum (sequence length)", fmt("%lld -> %lld", LL(cl_seqlen_at(c, 1, p->s)),
							   LL(c->max_difficulty)),
		    c->type == CL_FIXED_DISCRETE ? "fixed_discrete"
		    : fmt("%s over %s steps, multiples of %lld", cl_schedule_name(c->type),
			  num(c->total_step), LL(c->difficulty_step)));
		row(f, "  full --seq-length from iteration", p->cl_full_iter ? num(p->cl_full_iter) : "never",
		    fmt("%s tokens before it (%s at full length)", num(p->cl_tokens_ramp),
			num(ramp_consumed(&p->ramp, p->cl_full_iter ? p->cl_full_iter - 1 : p->iters) * p->s)));
	}
}

static const char *duration(double s)
{
	if (s < 120)
		return fmt("%.1f s", s);
	if (s < 7200)
		return fmt("%.1f min", s / 60);
	return fmt("%.1f h", s / 3600);
}

static void text_checkpoint(const struct plan *p, FILE *f)
{
	const struct train_args *a = p->a;
	int mixed = a->bf16 || a->fp16;
	fprintf(f, "\ncheckpoint in GiB (%s parameters, %s)\n", num((int64_t)p->params_used),
		a->assumed_params > 0 ? "--assumed-params" : "exact count");
	row(f, fmt("weights only (%s, %d B/param)", precision(a), p->wbytes), gib(p->ckpt_weights),
	    fmt("save %s at %g GB/s", duration(p->ckpt_weights_s), a->checkpoint_gbps));
	row(f, fmt("full (%s%d B/param)", mixed ? "+ fp32 master + Adam, " : "+ Adam, ",
		   p->wbytes + (mixed ? 4 : 0) + 8), gib(p->ckpt_full),
	    fmt("save %s at %g GB/s", duration(p->ckpt_full_s), a->checkpoint_gbps));
	if (p->ckpt_saves > 0)
		row(f, fmt("on disk: %s saves of lmtk's %d B/param", num(p->ckpt_saves),
			   a->use_bnb_optimizer ? 6 : 12), gib(p->ckpt_disk),
		    a->save_keep > 0 ? fmt("at most %s kept (--save-keep %lld%s)", num(p->ckpt_kept),
					   LL(a->save_keep), a->save_keep_every > 0 ?
					   fmt(" --save-keep-every %lld", LL(a->save_keep_every)) : "")
				     : "all kept: see --save-keep");
}

/* the step model's part of the time section: how one iteration is made up, and its largest
 * operations */
static void text_model_time(const struct plan *p, FILE *f)
{
	const struct gpumodel *g = &p->gm;
	const struct gpumodel_device *d = g->dev;
	const struct train_args *a = p->a;
	row(f, "device", d->name, fmt("--gpu-model %s%s: %.0f dense bf16 TFLOP/s, %.0f GB/s HBM", d->key,
				      a->gpu_model ? "" : " (default)", d->tc / 1e12, d->hbm / 1e9));
	row(f, "interconnect", "", d->network);
	row(f, "step model", g->step_model_name, g->step_model_name[0] == 'l' ?
	    "--step-model lmtk (default): this backend's kernels" :
	    "--step-model megatron-deepspeed: its kernels, unfused attention, DeepSpeed's pipeline");
	row(f, "micro-batch slot, slowest stage", duration(g->t_slot),
	    fmt("forward, backward%s, p2p: MBS %lld x seq %lld", a->checkpoint_activations ?
		", recompute" : "", LL(p->mbs), LL(p->s)));
	row(f, "after the last backward", duration(g->t_post), "gradient norm, optimizer, the DP gradients' exposed sum");
	row(f, fmt("iteration at GBS %lld", LL(p->gbs)), duration(p->t_iter),
	    fmt("(%lld + PP %lld - 1) slots + the tail; bubble %.1f%%", LL(p->m_full), LL(p->pp),
		100.0 * (double)(p->pp - 1) / (double)(p->m_full + p->pp - 1)));
	row(f, "TFLOPs per GPU", fmt("%.1f", p->model_tflops), "Megatron's formula, as train logs it");
	row(f, "tokens/s", fmt("%.0f", p->model_tokens_s),
	    fmt("%.0f per GPU", p->model_tokens_s / (double)p->world));
	row(f, "MFU", fmt("%.1f%%", 100 * p->model_mfu),
	    fmt("llm.c's count: 6N + 6 L h s FLOPs per token, of the peak (PaLM's 6N + 12 L h s: %.1f%%)",
		100 * p->model_mfu_palm));
	fprintf(f, "  share of stage %d's iteration: GEMMs %.1f%%, attention %.1f%%, NCCL %.1f%%, "
		"the rest %.1f%%; %.0f launches\n", g->stage, 100 * g->share[GM_KIND_GEMM],
		100 * g->share[GM_KIND_ATTN], 100 * g->share[GM_KIND_COMM],
		100 * g->share[GM_KIND_OTHER], g->launches);
	/* its largest operations */
	int idx[8], n = 0;
	for (int k = 0; k < 8 && k < g->nrows; k++) {
		int best = -1;
		for (int i = 0; i < g->nrows; i++) {
			int used = 0;
			for (int j = 0; j < n; j++)
				used |= idx[j] == i;
			if (!used && (best < 0 || g->rows[i].seconds > g->rows[best].seconds))
				best = i;
		}
		idx[n++] = best;
	}
	double busy = 0;
	for (int i = 0; i < g->nrows; i++)
		busy += g->rows[i].seconds;
	fprintf(f, "  %-40s %-9s %10s %12s %6s\n", "largest operations", "kind", "per iter", "seconds",
		"share");
	for (int k = 0; k < n; k++) {
		const struct gpumodel_row *r = &g->rows[idx[k]];
		fprintf(f, "  %-40.40s %-9s %10.0f %12.4f %5.1f%%\n", r->name, gpumodel_kind_name[r->kind],
			r->count, r->seconds, busy > 0 ? 100 * r->seconds / busy : 0.0);
	}
}

static void text_time(const struct plan *p, FILE *f)
{
	const struct train_args *a = p->a;
	if (!p->have_time) {
		fprintf(f, "\ntime\n");
		row(f, "days", "-", "give --assumed-tflops (TFLOPs per GPU as Megatron logs them)");
		return;
	}
	if (p->time_model) {
		fprintf(f, "\ntime: predicted by the step model (gpu-model), not measured\n");
		text_model_time(p, f);
	} else {
		fprintf(f, "\ntime\n");
		row(f, "assumed TFLOPs per GPU", fmt("%g", a->assumed_tflops), fmt("%s GPUs", num(p->world)));
		row(f, "parameters", num((int64_t)p->params_used),
		    a->assumed_params > 0 ? "--assumed-params" : "exact count");
	}
	row(f, "tokens", num(p->tokens), "");
	if (p->time_model) {
		row(f, "days", fmt("%.2f", p->days), "tokens at the full batch's time per token");
	} else if (a->model_type == MT_T5) {
		row(f, "FLOPs per token", fmt("%.4g", p->flops_token), p->flops_factor == 8 ?
		    "the encoder-decoder's count (train(1)) x 4/3: forward, backward, recompute" :
		    "the encoder-decoder's count (train(1)): forward and backward");
		row(f, fmt("iteration at GBS %lld", LL(p->gbs)), duration(p->t_iter), "");
		row(f, "days", fmt("%.2f", p->days),
		    "tokens x FLOPs per token / (GPUs x TFLOPs x 1e12 x 86400)");
	} else {
		row(f, "FLOPs per token per parameter", fmt("%d", p->flops_factor),
		    p->flops_factor == 8 ? "6 forward and backward + 2 recompute" : "6 forward and backward");
		row(f, fmt("iteration at GBS %lld", LL(p->gbs)), duration(p->t_iter), "");
		row(f, "days", fmt("%.2f", p->days),
		    fmt("tokens x %d x params / (GPUs x TFLOPs x 1e12 x 86400)", p->flops_factor));
	}
	if (p->ramp.on) {
		row(f, "ramp-up, days at full speed", fmt("%.2f", p->ramp_days_full_speed), "");
		row(f, "ramp-up, days modelled", fmt("%.2f", p->ramp_days),
		    fmt("%.1f TFLOPs average: the pipeline bubble of small batches", p->ramp_tflops));
	}
	row(f, "days, ramp-aware", fmt("%.2f", p->ramp_aware_days),
	    "an iteration of m micro-batches takes (m + PP - 1) slots");
	if (p->time_model)
		fprintf(f, "  (no failures, restarts, evaluation or checkpoint saves: the step alone)\n");
}

static void text_data(const struct plan *p, FILE *f)
{
	const struct train_args *a = p->a;
	if (!p->nds)
		return;
	fprintf(f, "\ndata (--split %s)\n", a->split ? a->split : "969, 30, 1");
	fprintf(f, "  %7s %14s %18s %18s %8s  %s\n", "weight", "documents", "tokens", "train tokens",
		"epochs", "prefix");
	for (int i = 0; i < p->nds; i++) {
		const struct dataset *d = &p->ds[i];
		double want = (double)p->samples * (double)p->s * d->weight;   /* drawn, whole */
		if (!d->ok) {
			fprintf(f, "  %7.4f %14s %18s %18s %8s  %s (unreadable)\n", d->weight, "-", "-", "-",
				"-", d->prefix);
			continue;
		}
		fprintf(f, "  %7.4f %14s %18s %18s %8s  %s\n", d->weight, num((int64_t)d->docs),
			num((int64_t)d->total_tokens), num((int64_t)d->tokens[0]),
			d->tokens[0] ? fmt("%.2f", want / (double)d->tokens[0]) : "-", d->prefix);
	}
	fprintf(f, "  (epochs: the run's tokens x weight / the train split's tokens)\n");
}

void report_text(const struct plan *p, FILE *f)
{
	fprintf(f, "train --dry-run: %lld layers, hidden %lld, %lld heads, seq %lld, on %lld GPUs "
		"(TP %lld x PP %lld x DP %lld)\n", LL(p->L), LL(p->h), LL(p->heads), LL(p->s),
		LL(p->world), LL(p->tp), LL(p->pp), LL(p->dp));
	text_model(p, f);
	text_layout(p, f);
	text_memory(p, f);
	text_ramp(p, f);
	text_schedule(p, f);
	text_checkpoint(p, f);
	text_time(p, f);
	text_data(p, f);
	if (p->nwarnings || p->nnotes || p->nerrors) {
		fprintf(f, "\nnotes\n");
		for (int i = 0; i < p->nerrors; i++)
			fprintf(f, "  error: %s\n", p->errors[i]);
		for (int i = 0; i < p->nwarnings; i++)
			fprintf(f, "  warning: %s\n", p->warnings[i]);
		for (int i = 0; i < p->nnotes; i++)
			fprintf(f, "  %s\n", p->notes[i]);
	}
}

/* --- JSON ------------------------------------------------------------------------------------ */

static json_t *strings(char *const *v, int n)
{
	json_t *arr = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(arr, json_string(v[i]));
	return arr;
}

static json_t *jpoint(const struct plan_point *pt)
{
	return json_pack("{s:I, s:I, s:I, s:s}", "samples", (json_int_t)pt->samples, "iterations",
			 (json_int_t)pt->iters, "tokens", (json_int_t)pt->tokens, "from", pt->from);
}

static json_t *jstage(const struct plan *p, const struct plan_stage *s, int i)
{
	json_t *o = json_pack("{s:i, s:I, s:i, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}",
			      "stage", i, "layers", (json_int_t)s->layers, "embedding_units",
			      s->embed_units, "params_per_gpu", (json_int_t)s->params, "in_flight",
			      (json_int_t)s->inflight, "weights_bytes", s->weights, "grads_bytes", s->grads,
			      "optimizer_bytes", s->optim, "optimizer_zero1_bytes", s->optim_zero,
			      "activations_bytes", s->act, "activations_checkpointed_bytes", s->act_ckpt,
			      "logits_bytes", s->logits, "total_bytes", s->total);
	(void)p;
	return o;
}

static json_t *jmodel(const struct plan *p)
{
	const struct train_args *a = p->a;
	json_t *j = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:b, s:I, s:I, s:s, s:{s:I, s:I, "
			 "s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}, s:{s:f, s:I, s:f, s:I}}",
			 "num_layers", (json_int_t)p->L, "hidden_size", (json_int_t)p->h,
			 "num_attention_heads", (json_int_t)p->heads, "ffn_hidden_size", (json_int_t)p->f,
			 "kv_channels", (json_int_t)p->kv, "seq_length", (json_int_t)p->s,
			 "max_position_embeddings", (json_int_t)p->maxpos,
			 "position_embedding_type", a->pos_emb == POS_LEARNED ? "absolute" :
			 a->pos_emb == POS_ALIBI ? "alibi" : "rotary",
			 "embed_layernorm", a->embed_layernorm,
			 "vocab_size", (json_int_t)p->vocab, "padded_vocab_size", (json_int_t)p->vocab_padded,
			 "vocab_from", p->vocab_from,
			 "params",
			 "total", (json_int_t)p->p_total, "word_embeddings", (json_int_t)p->p_word,
			 "position_embeddings", (json_int_t)p->p_pos, "embedding_layernorm",
			 (json_int_t)p->p_emb_ln, "per_layer", (json_int_t)p->p_layer, "layers",
			 (json_int_t)(p->L * p->p_layer), "final_layernorm", (json_int_t)p->p_final_ln,
			 "non_embedding", (json_int_t)(p->p_total - p->p_word - p->p_pos - p->p_types),
			 "sanity_formula", (json_int_t)p->p_sanity, "per_layer_per_tp_rank",
			 (json_int_t)p->p_layer_rank,
			 "ratios",
			 "hidden_per_layer", (double)p->h / (double)p->L,
			 "hidden_per_layer_int", (json_int_t)(p->h / p->L),
			 "hidden_per_head", (double)p->h / (double)p->heads,
			 "hidden_per_head_int", (json_int_t)(p->h / p->heads));
	json_object_set_new(j, "model_type", json_string(a->model_type == MT_BERT ? "bert" :
							 a->model_type == MT_T5 ? "t5" : "gpt"));
	if (a->model_type == MT_T5) {
		json_t *prm = json_object_get(j, "params");
		json_object_set_new(prm, "cross_attention_per_decoder_layer", json_integer(p->p_xlayer));
		json_object_set_new(prm, "decoder_layers", json_integer(p->L * (p->p_layer + p->p_xlayer)));
		json_object_set_new(prm, "lm_head_bias", json_integer(p->p_heads));
		json_object_set_new(j, "encoder_seq_length", json_integer(p->s));
		json_object_set_new(j, "decoder_seq_length", json_integer(p->dec_s));
	}
	if (a->model_type == MT_BERT) {
		json_t *prm = json_object_get(j, "params");
		json_object_set_new(prm, "tokentype_embeddings", json_integer(p->p_types));
		json_object_set_new(prm, "heads", json_integer(p->p_heads));
		json_object_set_new(j, "binary_head", json_boolean(!a->bert_no_binary_head));
	}
	return j;
}

static json_t *jlayout(const struct plan *p)
{
	const struct train_args *a = p->a;
	json_t *stages = json_array();
	for (int i = 0; i < (int)p->pp; i++)
		json_array_append_new(stages, jstage(p, &p->st[i], i));
	return json_pack("{s:I, s:I, s:I, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:s, s:b, s:b, "
			 "s:I, s:o}",
			 "gpus", (json_int_t)p->world, "nodes", (json_int_t)a->nodes, "gpus_per_node",
			 (json_int_t)a->gpus_per_node, "nodes_from", a->nodes_from, "gpus_from",
			 a->gpus_from, "tp", (json_int_t)p->tp, "pp", (json_int_t)p->pp, "dp",
			 (json_int_t)p->dp, "micro_batch_size", (json_int_t)p->mbs, "global_batch_size",
			 (json_int_t)p->gbs, "micro_batches", (json_int_t)p->m_full,
			 "pp_partition_method", p->partition, "precision", precision(a),
			 "zero1", p->zero1, "checkpoint_activations", a->checkpoint_activations,
			 "checkpoint_num_layers", (json_int_t)p->ckpt_layers, "stages", stages);
}

static json_t *jmemory(const struct plan *p)
{
	const struct plan_stage *s = &p->st[p->worst];
	/* 8-bit Adam's bytes per weight depend on the tensors (blocks, absmax, the fp32 embedding) */
	json_t *obpp = p->a->use_bnb_optimizer ? json_real(s->params ? s->optim / (double)s->params : 0.0)
					       : json_integer(p->obytes);
	return json_pack("{s:s, s:i, s:i, s:i, s:o, s:f, s:f, s:f, s:b, s:{s:f, s:f, s:f, s:f, s:f, s:f, "
			 "s:f, s:f, s:f}}",
			 "optimizer", p->a->use_bnb_optimizer ? "bnb-adam8bit" : "adamw",
			 "worst_stage", p->worst, "weight_bytes_per_param", p->wbytes,
			 "grad_bytes_per_param", p->gbytes, "optimizer_bytes_per_param", obpp,
			 "activation_bytes_per_layer", p->act_layer, "gpu_memory_bytes", p->gpu_bytes,
			 "gpu_memory_gib", p->a->gpu_memory_gib, "fits", p->fits,
			 "worst_stage_gib",
			 "weights", s->weights / GIB, "grads", s->grads / GIB, "optimizer", s->optim / GIB,
			 "optimizer_zero1", s->optim_zero / GIB, "activations", s->act / GIB,
			 "activations_checkpointed", s->act_ckpt / GIB, "logits", s->logits / GIB,
			 "total", s->total / GIB,
			 "total_zero1_checkpointed", (s->weights + s->grads + s->optim_zero + s->act_ckpt) / GIB);
}

static json_t *jramp(const struct plan *p)
{
	const struct ramp *r = &p->ramp;
	json_t *rows = json_array();
	int64_t cum = 0;
	for (int i = 0; i < r->nst; i++) {
		const struct ramp_stage *s = &r->st[i];
		int64_t steps = ramp_row_steps(r, i);
		int constant = i == r->nst - 1, whole = !constant && steps == s->steps;
		if (!steps)
			continue;
		cum += steps;
		json_array_append_new(rows, json_pack(
			"{s:I, s:f, s:b, s:I, s:o, s:I, s:o, s:I, s:I, s:I, s:I, s:b}",
			"gbs", (json_int_t)s->gbs, "micro_batches",
			(double)s->gbs / (double)(p->mbs * p->dp), "constant", constant,
			"steps", (json_int_t)steps,
			"hand_steps", whole ? json_integer(s->hand_steps) : json_null(),
			"cum_steps", (json_int_t)cum,
			"hand_cum_steps", whole ? json_integer(s->hand_cum) : json_null(),
			"first_step", (json_int_t)s->first_step,
			"samples", (json_int_t)(steps * s->gbs),
			"cum_samples", (json_int_t)(s->start_samples + steps * s->gbs),
			"cum_tokens", (json_int_t)plan_tokens_at(p, s->first_step - 1 + steps),
			"divisible", s->gbs % (p->mbs * p->dp) == 0));
	}
	return json_pack("{s:b, s:I, s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:o, s:I, s:o}",
			 "on", r->on, "start", (json_int_t)r->start, "increment", (json_int_t)r->incr,
			 "rampup_samples", (json_int_t)r->rsamples, "global_batch_size", (json_int_t)r->gbs,
			 "increments", (json_int_t)r->num_incr, "samples_per_increment", r->per,
			 "ramp_iterations", (json_int_t)r->ramp_steps, "ramp_samples",
			 (json_int_t)r->ramp_consumed, "stages", rows,
			 "pipeline_fill_gbs", (json_int_t)p->fill_gbs,
			 "pipeline_fill_iteration", p->fill_step ? json_integer(p->fill_step) : json_null());
}

/* The attention kernels the step prices, the same step with each what-if kernel of
 * gpu-model.tsv (attn.variants), and FlashAttention-2's forward, which the attention constants
 * are fit to (gpu-model.tsv's attn.ref.* lines have its published figures). */
static json_t *jattention(const struct plan *p)
{
	json_t *var = json_array(), *ref = json_object();
	for (int i = 0; i < p->n_attn_var; i++)
		json_array_append_new(var, json_pack("{s:s, s:f, s:f, s:f}", "kernels",
						     p->attn_var[i].name, "iteration_seconds",
						     p->attn_var[i].t_iter, "tokens_per_s",
						     p->attn_var[i].tokens_s, "mfu", p->attn_var[i].mfu));
	/* FlashAttention-2's causal forward on an H100 as the FlashAttention-3 paper benchmarks it
	 * (B x T = 16k, 2048 = heads x head dim), priced, beside its published TFLOPs */
	const struct gpumodel_device *h = gpumodel_device("h100");
	for (int hd = 64; h && hd <= 128; hd += 64) {
		json_t *pts = json_array();
		for (int64_t T = 512; T <= 16384; T *= 2) {
			double heads = (double)(16384 / T) * (2048 / hd);
			double sec = gpumodel_attn_seconds(h, gpumodel_attn_fa2(hd), heads, T, hd);
			json_array_append_new(pts, json_pack("{s:I, s:f}", "seq", (json_int_t)T,
							     "tflops", 2 * heads * (double)T *
									   (double)T * hd / sec / 1e12));
		}
		json_object_set_new(ref, hd == 64 ? "h100_hd64" : "h100_hd128", pts);
	}
	return json_pack("{s:s, s:o, s:o}", "kernels",
			 p->gm.step_model_name && strcmp(p->gm.step_model_name, "lmtk") == 0
				 ? gpumodel_attn_current()->name
				 : "Megatron-DeepSpeed's, unfused (the scores materialised)",
			 "variants", var, "fa2_causal_forward", ref);
}

static json_t *jstep_model(const struct plan *p)
{
	const struct gpumodel *g = &p->gm;
	const struct gpumodel_device *d = g->dev;
	const struct gpumodel_consts *k = gpumodel_consts();
	json_t *ops = json_array();
	for (int i = 0; i < g->nrows; i++) {
		const struct gpumodel_row *r = &g->rows[i];
		json_array_append_new(ops, json_pack("{s:s, s:s, s:f, s:f, s:f, s:f}", "op", r->name,
						     "kind", gpumodel_kind_name[r->kind], "count", r->count,
						     "flops", r->flops, "bytes", r->bytes, "seconds",
						     r->seconds));
	}
	json_t *tiles = json_array();
	for (int i = 0; i < k->ntiles; i++)
		json_array_append_new(tiles, json_pack("[i,i,f]", k->tile_m[i], k->tile_n[i], k->tile_eff[i]));
	json_t *o = json_pack(
		"{s:s, s:s, s:s, s:s, s:{s:f, s:f, s:f, s:f, s:i, s:f, s:f, s:f, s:f, s:f, s:f}, "
		"s:{s:f, s:f, s:f, s:f, s:o, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}, "
		"s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:s, "
		"s:{s:f, s:f, s:f, s:f}, s:f, s:o}",
		"note", "predicted by the step model (gpu-model), not measured",
		"step_model", g->step_model_name,
		"gpu_model", d->key, "device", d->name,
		"peaks", "tc", d->tc, "simt", d->simt, "hbm", d->hbm, "pcie", d->pcie, "sms", d->sms,
		"mamf", d->mamf, "clock", d->clock, "mma_sync", d->mma_sync, "smem_sm", d->smem_sm,
		"nvlink", d->nvlink, "nic", d->nic,
		"efficiencies", "gemm_train", k->gemm_train, "k_half", k->k_half, "split_k", k->split_k,
		"simt", k->simt, "tiles", tiles, "hbm", k->hbm,
		"gap_s", p->a->cuda_graph ? k->gap_graph : k->gap, "sync_s", k->sync,
		"nccl_base_s", k->nccl_base, "ring_hop_nvlink_s", k->ring_hop[0],
		"ring_hop_net_s", k->ring_hop[1], "tree_hop_nvlink_s", k->tree_hop[0],
		"tree_hop_net_s", k->tree_hop[1], "eff_nvlink", k->eff_link[0], "eff_net", k->eff_link[1],
		"slowest_stage", g->stage, "slot_seconds", g->t_slot, "tail_seconds", g->t_post,
		"iteration_seconds", g->t_iter, "bubble",
		(double)(p->pp - 1) / (double)(p->m_full + p->pp - 1),
		"tflops_per_gpu", p->model_tflops, "mfu", p->model_mfu, "mfu_palm", p->model_mfu_palm,
		"tokens_per_s", p->model_tokens_s, "tokens_per_s_per_gpu", p->model_tokens_s / (double)p->world,
		"mfu_counts", "llm.c: 6N + 6 L h s FLOPs per token (N all parameters); PaLM: 6N + 12 L h s",
		"shares", "gemm", g->share[GM_KIND_GEMM], "attention", g->share[GM_KIND_ATTN],
		"comm", g->share[GM_KIND_COMM], "other", g->share[GM_KIND_OTHER],
		"launches", g->launches, "ops", ops);
	if (o)
		json_object_set_new(o, "attention", jattention(p));
	return o;
}

static json_t *jtime(const struct plan *p)
{
	if (!p->have_time)
		return json_null();
	json_t *o = json_pack("{s:s, s:f, s:I, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f}",
			      "source", p->time_model ? "step-model" : "assumed-tflops",
			      "params", p->params_used, "tokens", (json_int_t)p->tokens,
			      "flops_per_token_per_param", p->flops_factor, "iteration_seconds", p->t_iter,
			      "slot_seconds", p->t_slot, "days", p->days, "rampup_days_full_speed",
			      p->ramp_days_full_speed, "rampup_days", p->ramp_days, "rampup_tflops",
			      p->ramp_tflops, "ramp_aware_days", p->ramp_aware_days);
	if (!o)
		return NULL;
	json_object_set_new(o, "assumed_tflops", p->time_model ? json_null()
							       : json_real(p->a->assumed_tflops));
	json_object_set_new(o, "step_model", p->time_model ? jstep_model(p) : json_null());
	if (p->a->model_type == MT_T5) {   /* the encoder-decoder's count, not F x params */
		json_object_del(o, "flops_per_token_per_param");
		json_object_set_new(o, "flops_per_token", json_real(p->flops_token));
	}
	return o;
}

static json_t *jdata(const struct plan *p)
{
	json_t *arr = json_array();
	for (int i = 0; i < p->nds; i++) {
		const struct dataset *d = &p->ds[i];
		json_array_append_new(arr, json_pack(
			"{s:s, s:f, s:b, s:I, s:[I,I,I,I], s:I, s:[I,I,I], s:o}", "prefix", d->prefix,
			"weight", d->weight, "readable", d->ok, "documents", (json_int_t)d->docs, "split_bounds",
			(json_int_t)d->bounds[0], (json_int_t)d->bounds[1], (json_int_t)d->bounds[2],
			(json_int_t)d->bounds[3], "tokens", (json_int_t)d->total_tokens, "split_tokens",
			(json_int_t)d->tokens[0], (json_int_t)d->tokens[1], (json_int_t)d->tokens[2],
			"epochs", d->tokens[0] ? json_real((double)p->samples * (double)p->s * d->weight /
							  (double)d->tokens[0]) : json_null()));
	}
	return arr;
}

int report_json(const struct plan *p, FILE *f)
{
	const struct train_args *a = p->a;
	json_t *root;
	int rc;

	if (p->complete) {
		root = json_pack(
			"{s:b, s:o, s:o, s:o, s:o, s:{s:I, s:I, s:I, s:o, s:o, s:s, s:o, s:o}, "
			"s:{s:f, s:f, s:f, s:f, s:f, s:f}, s:o, s:o}",
			"valid", p->nerrors == 0, "model", jmodel(p), "layout", jlayout(p),
			"memory", jmemory(p), "rampup", jramp(p),
			"schedule", "iterations", (json_int_t)p->iters, "samples", (json_int_t)p->samples,
			"tokens", (json_int_t)p->tokens, "warmup", jpoint(&p->warmup), "decay",
			jpoint(&p->decay), "lr_decay_style", a->lr_decay_style,
			"lr", a->lr >= 0 ? json_real(a->lr) : json_null(), "min_lr", json_real(a->min_lr),
			"checkpoint", "params", p->params_used, "bandwidth_gb_s", a->checkpoint_gbps,
			"weights_bytes", p->ckpt_weights, "weights_gib", p->ckpt_weights / GIB,
			"full_bytes", p->ckpt_full, "full_gib", p->ckpt_full / GIB,
			"time", jtime(p), "data", jdata(p));
		if (root) {
			json_object_set_new(json_object_get(root, "checkpoint"), "weights_save_seconds",
					    json_real(p->ckpt_weights_s));
			json_object_set_new(json_object_get(root, "checkpoint"), "full_save_seconds",
					    json_real(p->ckpt_full_s));
			if (p->ckpt_saves > 0)
				json_object_set_new(json_object_get(root, "checkpoint"), "on_disk", json_pack(
					"{s:I, s:I, s:f, s:f}", "saves", (json_int_t)p->ckpt_saves, "kept_at_most",
					(json_int_t)p->ckpt_kept, "bytes", p->ckpt_disk, "gib", p->ckpt_disk / GIB));
			const struct curriculum *c = &a->curriculum;
			if (c->enabled)
				json_object_set_new(json_object_get(root, "schedule"), "curriculum", json_pack(
					"{s:s, s:I, s:I, s:I, s:I, s:I}", "schedule_type", cl_schedule_name(c->type),
					"first_seqlen", (json_int_t)cl_seqlen_at(c, 1, p->s),
					"max_seqlen", (json_int_t)c->max_difficulty,
					"full_from_iteration", (json_int_t)p->cl_full_iter,
					"tokens_before_full", (json_int_t)p->cl_tokens_ramp,
					"samples_before_full", (json_int_t)ramp_consumed(&p->ramp,
						p->cl_full_iter ? p->cl_full_iter - 1 : p->iters)));
		}
	} else {
		root = json_pack("{s:b}", "valid", 0);
	}
	if (!root)
		return -1;
	json_object_set_new(root, "errors", strings(p->errors, p->nerrors));
	json_object_set_new(root, "warnings", strings(p->warnings, p->nwarnings));
	json_object_set_new(root, "notes", strings(p->notes, p->nnotes));
	rc = json_dumpf(root, f, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
	fputc('\n', f);
	json_decref(root);
	return rc;
}
