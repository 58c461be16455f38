/* logs - see logs.h. */
#include "train/run/logs.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "file.h"
#include "msg.h"
#include "units.h"
#include "xalloc.h"
#include "train/model/philox.h"
#include "train/optim/bnb.h"
#include "train/optim/sched.h"
#include "train/optim/state.h"

/* Only world rank 0 prints (every rank computes the same numbers); warnings come from any rank. */
static int quiet;

void logs_quiet(int q)
{
	quiet = q;
}

int logs_out(const char *fmt, ...)
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

void logs_line(const char *line)
{
	logs_out("%s\n", line);
	fflush(stdout);
}

void logs_scalar(struct run *r, const char *tag, int64_t step, double v)
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

/* " time remaining: H:MM:SS |", after Megatron's fields on the log line (which stay as they
 * are, for slurm-pulse and users' greps): the iterations left to the last one at the mean wall
 * time of this run's iterations so far, evaluations and saves included since they recur; a
 * resumed run's mean is its own. */
static void time_remaining(const struct run *r, const struct loop *L, int64_t it, double now)
{
	char d[48];
	if (L->iters_run <= 0 || it > r->iters)
		return;
	double left = (double)(r->iters - it) * (now - L->t_train) / (double)L->iters_run;
	logs_out(" time remaining: %s |", units_fmt_delta(left < 1e9 ? lround(left) : 999999999L, d, sizeof d));
}

/* The start-up lines that say what a flag did not do here: the Megatron flags with no effect,
 * and the ones whose effect differs on this backend.  Nothing given is ever silently dropped. */
static void startup_notes(const struct train_args *a, const struct ops *ops)
{
	char *nofx = args_noeffect_line(a);
	int cpu = strcmp(ops->name, "cpu") == 0;
	if (nofx)
		logs_out("train: accepted, no effect here: %s\n", nofx);
	free(nofx);
	if ((a->bf16 || a->fp16) && cpu)
		logs_out("train: --%s: the cpu backend computes in fp32 (%s is the cuda backend's type)%s\n",
		    a->bf16 ? "bf16" : "fp16", a->bf16 ? "bf16" : "fp16",
		    a->fp16 ? "; fp16's loss scaling runs as Megatron's" : "");
	else if (a->fp16 && !cpu)
		logs_out("train: --fp16: the %s backend computes in %s (half activations and working "
		    "weights, fp32 master weights and accumulation, as Megatron's fp16); the loss "
		    "scaler skips the steps that overflow fp16\n", ops->name, ops->act_type);
	if (a->loss_scale > 0 && !a->fp16)
		logs_out("train: --loss-scale: no effect without --fp16, as in Megatron\n");
	if (a->profile_range_given && !a->profile)
		logs_out("train: --profile-step-start, --profile-step-end, --profile-ranks: no effect "
		    "without --profile, as in Megatron-LM\n");
	if (a->gpu_model)
		logs_out("train: --gpu-model: no effect without --dry-run (it picks the device whose step "
		    "model --dry-run's time estimate uses)\n");
	if (a->step_model)
		logs_out("train: --step-model: no effect without --dry-run (it picks what --dry-run's step "
		    "model prices)\n");
	if (a->sgd_momentum_given && strcmp(a->optimizer, "sgd"))
		logs_out("train: --sgd-momentum: no effect without --optimizer sgd, as in Megatron\n");
	if (a->lamb_noise_given && a->lamb_layerwise_noise == 0)
		logs_out("train: --lamb-layerwise-noise 0: no effect (no noise is LAMB's own update)\n");
	if (a->embedding_lr_mult_given && a->embedding_lr_mult == 1)
		logs_out("train: %s 1: no effect (the word embedding's learning rate is the others')\n",
		    a->embedding_lr_mult_given);
	if ((a->finetune || a->no_load_optim) && !a->load)
		logs_out("train: --%s: no effect without --load\n", a->finetune ? "finetune" : "no-load-optim");
}

/* --log-path: this run's command line in DIR/args_TIME.txt (Megatron-DeepSpeed writes its
 * argparse namespace there; the command line is what holds the same information here). */
int logs_write_args(const char *dir, const char *cmdline, char *err, size_t errlen)
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

void logs_startup(const struct run *r, const struct model_config *c)
{
	const struct train_args *a = r->a;
	const struct plan *p = r->p;
	const struct ops *ops = r->m.ops;
	int lamb = strcmp(a->optimizer, "lamb") == 0, sgd = strcmp(a->optimizer, "sgd") == 0;
	char kind[96];
	snprintf(kind, sizeof kind, "%s", c->alibi ? "BLOOM-style" : "GPT-2-style");
	if (r->bert)
		snprintf(kind, sizeof kind, "BERT (%s, %d token types)", c->binary_head ?
			 "binary head" : "no binary head", c->num_tokentypes);
	if (r->t5)
		snprintf(kind, sizeof kind, "T5 (encoder of %d and decoder of %d tokens, %d layers "
			 "each)", c->seq, c->dec_seq, c->layers);
	logs_out("train: %s model, %lld parameters (%lld layers, hidden %lld, %lld heads, vocab %lld "
	       "padded to %lld) on %s\n", kind,
	       (long long)p->p_total, (long long)p->L, (long long)p->h, (long long)p->heads,
	       (long long)p->vocab, (long long)p->vocab_padded, ops->device ? ops->device : ops->name);
	logs_out("train: %lld iterations, %lld samples, %lld tokens; micro-batch %lld, global batch "
	       "%lld%s; %d rank%s: DP=%d TP=%d PP=%d%s%s\n", (long long)p->iters, (long long)p->samples,
	       (long long)p->tokens, (long long)p->mbs, (long long)p->gbs,
	       p->ramp.on ? " after the ramp-up" : "", r->dist.world, r->dist.world > 1 ? "s" : "",
	       r->dist.dp, r->dist.tp, r->dist.pp, r->dist.world > 1 ? ", collectives over " : "",
	       r->dist.world > 1 ? r->dist.transport : "");
	{
		size_t n32, n8, nblk, own;
		optim_state_layout(&r->m, c->zero_dp > 1 ? c->zero_rank : -1, NULL, &n32, &n8, &nblk);
		own = n32 + n8;
		if (c->bnb)
			logs_out("train: optimizer: bitsandbytes' 8-bit Adam, %zu bytes of state allocated on "
			    "this rank for %zu weights (%.3f B each): %zu in 8-bit blocks of %d (%zu "
			    "absmax each moment), %zu with fp32 moments (the word embedding and tensors "
			    "under %d elements)\n", r->m.opt_bytes, own, own ? (double)r->m.opt_bytes / own : 0.0,
			    n8, BNB_BLOCK, nblk, n32, BNB_MIN_8BIT);
		else
			logs_out("train: optimizer: %s, %zu bytes of state allocated on this rank for %zu "
			    "weights (%.3f B each)\n", lamb ? "LAMB (apex FusedLAMB)" : sgd
			    ? "SGD" : "AdamW", r->m.opt_bytes, own,
			    own ? (double)r->m.opt_bytes / own : 0.0);
		if (lamb && a->lamb_layerwise_noise > 0)
			logs_out("train: --lamb-layerwise-noise %g: each tensor's update u gets %g x "
			    "||u||/sqrt(n) x N(0,1) added after the trust ratio, drawn per element from "
			    "--seed, the step and the tensor\n", a->lamb_layerwise_noise,
			    a->lamb_layerwise_noise);
		if (a->embedding_lr_mult != 1)
			logs_out("train: %s %g: the word embedding, the tied output layer with it, learns at "
			    "%g x the learning rate (the position embeddings at 1 x)\n",
			    a->embedding_lr_mult_given, a->embedding_lr_mult, a->embedding_lr_mult);
		if (c->zero_dp > 1)
			logs_out("train: ZeRO-1: %d buckets of whole tensors, at least %zu elements each, "
			    "padded to %d equal chunks (%zu elements of padding%s), one reduce-scatter and "
			    "one all-gather each; this rank's optimizer shard is its chunk of each: %zu of "
			    "%zu weights\n", r->m.nzb, c->zero_bucket, c->zero_dp,
			    r->m.nparams - r->m.nweights,
			    c->bnb ? ", 8-bit tensors and chunks starting on blocks" : "", own,
			    r->m.nweights);
		if (a->overlap_grad_reduce && r->dist.dp > 1)
			logs_out("train: DP gradients in buckets of whole layers, at least %zu elements, "
			    "reduced during the last micro-batch's backward%s%s\n", r->bk.size,
			    strncmp(r->dist.transport, "NCCL", 4) == 0 ? " on a second stream"
			    : " (MPI: each summed at once)",
			    c->zero_dp > 1 ? ", each reduce-scattered over ZeRO-1's shards" : "");
		else if (a->overlap_grad_reduce)
			logs_out("train: --overlap-grad-reduce: DP=1, no gradients to reduce\n");
	}
	startup_notes(a, ops);
	{
		/* what the model allocated - the step allocates nothing more - beside --dry-run's
		 * activation figure for this rank's stage, in the same unit */
		const struct plan_stage *ps = &p->st[r->dist.pp_rank];
		double g = 1024.0 * 1024.0 * 1024.0;
		logs_out("train: device memory: %.3f GiB allocated at peak: weights, gradients and optimizer "
		    "%.3f GiB, activations %.3f GiB, of which the layers' and the logits %.3f GiB "
		    "(--dry-run: %.3f GiB)", (double)r->m.mem_peak / g,
		    (double)(r->m.mem_peak - r->m.mem_act) / g, (double)r->m.mem_act / g,
		    (double)r->m.mem_act_layers / g,
		    (a->checkpoint_activations ? ps->act_ckpt : ps->act) / g);
		if (c->ckpt_layers)
			logs_out("; --checkpoint-activations: each chunk of %d layer%s keeps only its output, the "
			    "backward recomputes it", c->ckpt_layers, c->ckpt_layers > 1 ? "s" : "");
		logs_out("\n");
	}
	fflush(stdout);
}

int logs_open(struct run *r, char *err, size_t errlen)
{
	const struct train_args *a = r->a;
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
		logs_out("train: --codecarbon-dir %s: emissions-RRR.csv per rank, a row per log interval; "
		    "CPU by %s, GPU by %s, RAM 3 W per 8 GB, %g g CO2eq per kWh\n", a->codecarbon_dir,
		    energy_cpu_source(&r->en), r->en.gpu ? "NVML" : cuda ? "nothing (NVML not found)" :
		    "nothing (CPU backend)", a->carbon_intensity);
		fflush(stdout);
	}
	return 0;
}

/* One row of --codecarbon-dir's CSV, and its TensorBoard scalars */
void logs_energy_row(struct run *r, int64_t it)
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
	logs_scalar(r, "energy/energy consumed (kWh)", it, e->cpu_kwh + e->gpu_kwh + e->ram_kwh);
	logs_scalar(r, "energy/emissions (kg CO2eq)", it, e->last_emissions);
	logs_scalar(r, "energy/cpu power (W)", it, e->cpu_w);
	logs_scalar(r, "energy/gpu power (W)", it, e->gpu_w);
	logs_scalar(r, "energy/ram power (W)", it, e->ram_w);
}

void logs_iteration(struct run *r, struct loop *L, const struct iter *q)
{
	const struct train_args *a = r->a;
	struct ckpt_state *st = &r->st;
	int64_t it = q->it, gbs = q->gbs, nzeros = q->nzeros;
	int stepped = q->stepped;
	double loss = q->loss, grad_norm = q->grad_norm, t_log = L->t_log, loss_sum = L->loss_sum;
	double sop_sum = L->sop_sum;
	int64_t log_iters = L->log_iters, log_skipped = L->log_skipped, log_nan = L->log_nan;
	int64_t loss_n = L->loss_n;

	/* TensorBoard, every --tensorboard-log-interval iterations, with Megatron's tags */
	if (r->tb && it % a->tb_log_interval == 0) {
		double lr_now = sched_lr(&st->sched);
		if (!a->tb_no_lr) {
			logs_scalar(r, "learning-rate/learning-rate", it, lr_now);
			logs_scalar(r, "learning-rate/learning-rate vs samples", st->consumed_samples, lr_now);
			logs_scalar(r, "learning-rate/learning-rate vs tokens", st->consumed_tokens, lr_now);
		}
		if (a->tb_batch) {
			logs_scalar(r, "batch-size/batch-size", it, gbs);
			logs_scalar(r, "batch-size/batch-size vs samples", st->consumed_samples, gbs);
		}
		if (stepped) {
			double gflos = 6.0 * (r->m.nweights - r->m.tensors[r->m.wte].numel -
					      (r->m.wpe >= 0 ? r->m.tensors[r->m.wpe].numel : 0)) *
				       (double)st->consumed_samples * (double)r->seq / 1e9;   /* at --seq-length */
			/* Megatron-DeepSpeed: each key of the loss dict under lm-loss-training/ */
			double lm = r->bert ? r->it_lm : loss;
			logs_scalar(r, "lm-loss-training/lm loss", it, lm);
			logs_scalar(r, "lm-loss-training/lm loss vs samples", st->consumed_samples, lm);
			logs_scalar(r, "lm-loss-training/lm loss vs tokens", st->consumed_tokens, lm);
			logs_scalar(r, "lm-loss-training/lm loss vs gigaflos (without embeddings)",
				  (int64_t)gflos, lm);
			if (r->bert && r->m.cfg.binary_head) {
				logs_scalar(r, "lm-loss-training/sop loss", it, r->it_sop);
				logs_scalar(r, "lm-loss-training/sop loss vs samples",
					  st->consumed_samples, r->it_sop);
				logs_scalar(r, "lm-loss-training/sop loss vs tokens",
					  st->consumed_tokens, r->it_sop);
				logs_scalar(r, "lm-loss-training/sop loss vs gigaflos (without "
					  "embeddings)", (int64_t)gflos, r->it_sop);
			}
		}
		if (a->fp16 && !a->tb_no_loss_scale) {
			logs_scalar(r, "loss-scale/loss-scale", it, st->optim.loss_scale);
			logs_scalar(r, "loss-scale/loss-scale vs samples", st->consumed_samples,
				  st->optim.loss_scale);
			logs_scalar(r, "loss-scale/loss-scale vs tokens", st->consumed_tokens,
				  st->optim.loss_scale);
		}
		logs_scalar(r, "grad-norm/grad-norm", it, grad_norm);
		logs_scalar(r, "grad-norm/grad-norm vs samples", st->consumed_samples, grad_norm);
		if (a->log_zeros)
			logs_scalar(r, "num-zeros/num-zeros", it, (double)nzeros);
		logs_scalar(r, "steps-vs-samples/y=steps,x=samples", st->consumed_samples, it);
		logs_scalar(r, "steps-vs-samples/y=samples,x=steps", it, st->consumed_samples);
		logs_scalar(r, "steps-vs-tokens/y=steps,x=tokens", st->consumed_tokens, it);
		logs_scalar(r, "steps-vs-tokens/y=tokens,x=steps", it, st->consumed_tokens);
		if (r->cl.enabled)
			logs_scalar(r, "curriculum_seqlen", it, (double)r->cur);
	}

	if (r->have_energy)
		energy_poll(&r->en);   /* every iteration: a RAPL counter must not wrap twice unseen */
	if (it % a->log_interval == 0) {
		double now = units_now(), per = (now - t_log) / log_iters;
		double tfl = hw_tflops(r, gbs, per);
		/* per GPU, as the TFLOPs: the batch's model FLOPs over every rank's peak */
		double mfu = r->peak > 0 ? model_flops_per_token(&r->m.cfg) * gbs * r->cur / per /
						  (r->peak * r->dist.world) : 0;
		logs_out(" iteration %8lld/%8lld | consumed samples: %12lld | consumed tokens: %12lld |"
		       " elapsed time per iteration (s): %.2f | learning rate: %.3E |"
		       " global batch size: %5lld |", (long long)it, (long long)r->iters,
		       (long long)st->consumed_samples, (long long)st->consumed_tokens, per,
		       sched_lr(&st->sched), (long long)gbs);
		if (loss_n)
			logs_out(" lm loss: %.6E |", loss_sum / loss_n);
		if (loss_n && r->bert && r->m.cfg.binary_head)
			logs_out(" sop loss: %.6E |", sop_sum / loss_n);
		if (a->fp16)
			logs_out(" loss scale: %.1f |", st->optim.loss_scale);
		logs_out(" grad norm: %.3f | num zeros: %.1f |", grad_norm, (double)nzeros);
		if (a->log_params_norm)
			logs_out(" params norm: %.3f |", sqrt(r->m.ops->sumsq(r->m.master, r->m.nparams)));
		if (r->cl.enabled)
			logs_out(" curriculum seqlen: %5lld |", (long long)r->cur);
		logs_out(" number of skipped iterations: %3lld | number of nan iterations: %3lld |"
		       " samples per second: %.3f | TFLOPs: %.2f |", (long long)log_skipped,
		       (long long)log_nan, gbs / per, tfl);
		if (mfu > 0)
			logs_out(" MFU: %.2f%% |", 100 * mfu);
		time_remaining(r, L, it, now);
		logs_out("\n");
		fflush(stdout);
		if (r->tb && a->tb_timers) {
			logs_scalar(r, "iteration-time/iteration-time", it, per);
			logs_scalar(r, "iteration-time/samples per second", it, gbs / per);
			logs_scalar(r, "iteration-time/TFLOPs per gpu (estimated)", it, tfl);
		}
		logs_energy_row(r, it);
		t_log = now;
		loss_sum = sop_sum = 0;
		loss_n = log_iters = log_skipped = log_nan = 0;
	}
	L->t_log = t_log;
	L->loss_sum = loss_sum;
	L->sop_sum = sop_sum;
	L->log_iters = log_iters;
	L->log_skipped = log_skipped;
	L->log_nan = log_nan;
	L->loss_n = loss_n;
}

void logs_close(struct run *r, int rc, int stop, double t_start)
{
	const struct ckpt_state *st = &r->st;
	logs_out("train: %s at iteration %lld/%lld: %lld samples, %lld tokens, %lld skipped and %lld "
	       "nan iterations, %lld loss spikes, %.1f s\n", rc ? "failed" : stop ? "stopped" : "done",
	       (long long)st->iteration, (long long)r->iters, (long long)st->consumed_samples,
	       (long long)st->consumed_tokens, (long long)st->skipped_total, (long long)st->nan_total,
	       (long long)st->spikes_total, units_now() - t_start);
	{
		/* the model's allocations at their peak (transient buffers included), and what the
		 * kernel measured: the process's peak resident set (the device memory itself on the
		 * cpu backend, host memory beside the GPU's on cuda) */
		struct rusage ru;
		double g = 1024.0 * 1024.0 * 1024.0;
		getrusage(RUSAGE_SELF, &ru);
		logs_out("train: memory: the model's %s allocations peaked at %.3f GiB (activations %.3f "
		    "GiB); the process's peak resident set was %.3f GiB\n", r->m.ops->name,
		    (double)r->m.mem_peak / g, (double)r->m.mem_act / g, (double)ru.ru_maxrss * 1024.0 / g);
	}
	fflush(stdout);
	logs_energy_row(r, st->iteration);   /* the last row: at exit */
	if (r->have_energy)
		energy_close(&r->en);
	if (r->tb)
		tfevents_close(r->tb);
}
