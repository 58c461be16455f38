/* setup - see setup.h. */
#include "train/run/setup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file.h"
#include "memlimit.h"
#include "msg.h"
#include "num.h"
#include "xalloc.h"
#include "train/data/vocab.h"
#include "train/optim/sched.h"
#include "train/optim/state.h"
#include "train/run/batch.h"
#include "train/run/logs.h"
#include "ckpt/tokrec.h"
#include "train/device.h"

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

/* The data flags, for feed_open */
static struct feed_config feed_config_of(const struct train_args *a, int seq)
{
	_Static_assert(ARGS_MAX_DATA <= FEED_MAX_DATA, "FEED_MAX_DATA");
	struct feed_config c = {
		.kind = a->model_type == MT_T5 ? FEED_T5 : a->model_type == MT_BERT ? FEED_BERT
		      : FEED_GPT,
		.data_path = a->data_path, .ndata_path = a->ndata_path,
		.weighted_split_paths = a->weighted_split_paths, .wsplit_sep = ARGS_SEP,
		.split = a->split, .cache_dir = a->data_cache_path, .seq = seq, .seed = a->seed,
		.vocab_file = a->vocab_file, .vocab_extra_ids = a->vocab_extra_ids,
		.mask_prob = a->mask_prob, .short_seq_prob = a->short_seq_prob,
		.binary_head = !a->bert_no_binary_head, .dec_seq = a->decoder_seq_length,
	};
	for (int s = 0; s < 3; s++) {
		c.wsplit[s] = a->wsplit[s];
		c.wsplit_file[s] = a->wsplit_file[s];
	}
	return c;
}

#define BIND_LINE 400

/* The device: --threads (else what SLURM gave this task), the GPU of this rank (bind_line says
 * which, and why, when several ranks share a node's GPUs), the backend opened. */
static int setup_device(const struct train_args *a, int *threads_out, char bind_line[BIND_LINE],
			const struct ops **ops_out, char *err, size_t errlen)
{
	int threads = (int)a->threads;
	const char *cpt = getenv("SLURM_CPUS_PER_TASK");
	int64_t ncpt;
	if (threads <= 0 && num_int(cpt, 1, 4096, &ncpt) == NUM_OK)
		threads = (int)ncpt;   /* what SLURM gave this task, not the whole node */
	/* Several ranks on GPUs: each binds its node-local index modulo the GPUs it sees, so
	 * `--device cuda` means one GPU per rank whether the launcher shows every rank all of the
	 * node's GPUs (mpirun, srun --gpu-bind=none) or one each (srun --gpus-per-task=1). */
	char bound[32];
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
			snprintf(bind_line, BIND_LINE, "%s (local rank %d from %s, modulo %d "
				 "visible GPU%s%s%.100s)", bound, local, lfrom, n, n > 1 ? "s" : "",
				 vis ? "; CUDA_VISIBLE_DEVICES=" : "", vis ? vis : "");
		} else if (strcmp(device, "cuda") == 0) {
			return errf(err, errlen, "--device cuda: %s", why);
		}
	} else if (world > 1 && strncmp(device, "cuda:", 5) == 0) {
		snprintf(bind_line, BIND_LINE, "%s, as --device says", device);
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
	*threads_out = threads;
	*ops_out = ops;
	return 0;
}

/* The flags' kernels: refused now when this backend has none */
static int check_backend(const struct train_args *a, const struct ops *ops, char *err,
			 size_t errlen)
{
	if (a->use_bnb_optimizer && !ops->adam8bit)
		return errf(err, errlen, "--use-bnb-optimizer: the %s backend has no 8-bit Adam kernel; "
			    "use --device cpu, or drop the flag to train with AdamW", ops->name);
	int lamb = strcmp(a->optimizer, "lamb") == 0, sgd = strcmp(a->optimizer, "sgd") == 0;
	if ((lamb && !ops->lamb_update) || (sgd && !ops->sgd))
		return errf(err, errlen, "--optimizer %s: the %s backend has no %s kernels in this "
			    "build; use --device cpu", a->optimizer, ops->name, a->optimizer);
	return 0;
}

/* --data-cache-path and --save made now, as Megatron makes them */
static int make_dirs(const struct train_args *a, char *err, size_t errlen)
{
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
	return 0;
}

/* The model's shape and the flags that change its layers, from the plan and the flags; its
 * layout over the ranks comes with model_layout. */
static int model_config_of(struct run *r, const struct ops *ops, struct model_config *cp,
			   char *err, size_t errlen)
{
	const struct train_args *a = r->a;
	const struct plan *p = r->p;
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
	if (check_backend(a, ops, err, errlen) < 0 || make_dirs(a, err, errlen) < 0)
		return -1;
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
	*cp = c;
	return 0;
}

/* The ranks and their groups (dist.h), the --save lock, the tokenizer's record, the GPU line */
static int setup_dist(struct run *r, const struct ops *ops, const char *bind_line, char *err,
		      size_t errlen)
{
	const struct train_args *a = r->a;
	const struct plan *p = r->p;
	int drc = dist_init(&r->dist, (int)p->tp, (int)p->pp, ops->name, a->save, err, errlen);
	if (drc < 0) {
		if (drc == DIST_NOT_MET)
			r->fail_code = EXIT_FAILED;   /* ranks that never met: not the flags' fault */
		return -1;
	}
	logs_quiet(r->dist.rank != 0);
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
			logs_out("train: %s\n", done);
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
	return 0;
}

/* This rank's part of the model: its tensor-parallel rank, pipeline stage, activation slots,
 * ZeRO-1 shard */
static int model_layout(struct run *r, struct model_config *c, char *err, size_t errlen)
{
	const struct train_args *a = r->a;
	const struct plan *p = r->p;
	c->tp = r->dist.tp;
	c->tp_rank = r->dist.tp_rank;
	/* the pipeline stage: its layers from the plan's partition (--pp-partition-method) */
	c->pp = r->dist.pp;
	c->pp_rank = r->dist.pp_rank;
	for (int i = 0; i < r->dist.pp_rank; i++)
		c->stage_l0 += (int)p->st[i].layers;
	c->stage_nl = (int)p->st[r->dist.pp_rank].layers;
	/* 1F1B keeps at most min(PP - stage, micro-batches) in flight: the plan's count, and the
	 * micro-batches of the full batch are the most any iteration has (the ramp only grows) */
	c->slots = r->dist.pp - r->dist.pp_rank;
	if (p->m_full >= 1 && p->m_full < c->slots)
		c->slots = (int)p->m_full;
	if (a->checkpoint_activations)
		c->ckpt_layers = a->checkpoint_num_layers > 0 ? (int)a->checkpoint_num_layers : 1;
	if (p->zero1 && r->dist.dp > 1 && strcmp(a->optimizer, "adam"))
		return errf(err, errlen, "--optimizer %s with ZeRO-1 over %d data-parallel ranks: "
			    "LAMB's trust ratio needs each tensor whole on a rank, and DeepSpeed's "
			    "ZeRO shards only Adam; use --zero-stage 0", a->optimizer, r->dist.dp);
	if (p->zero1 && r->dist.dp > 1) {   /* ZeRO-1: Adam's moments sharded over the DP group */
		c->zero_dp = r->dist.dp;
		c->zero_rank = r->dist.dp_rank;
	}
	return 0;
}

/* The model allocated (what fits checked first on the cpu backend), the DP gradient buckets,
 * the micro-batch's buffers */
static int setup_model(struct run *r, const struct model_config *cfg, const struct ops *ops,
		       int threads, char *err, size_t errlen)
{
	const struct train_args *a = r->a;
	const struct plan *p = r->p;
	struct model_config c = *cfg;
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
	optim_state_rule(&c);
	if (model_init(&r->m, &c, ops, (int)r->mbs, (int)r->seq, err, errlen) < 0 ||
	    optim_state_init(&r->m, err, errlen) < 0)
		return -1;
	r->m.dist = &r->dist;
	if (r->dist.dp > 1)
		buckets_init(&r->bk, &r->m, &r->dist, a->overlap_grad_reduce, (size_t)bs, c.zero_dp > 1);
	if (batch_alloc(r, err, errlen) < 0)
		return -1;
	r->peak = a->peak_tflops > 0 ? a->peak_tflops * 1e12
		  : ops->peak_flops > 0 ? ops->peak_flops : cpu_peak(threads);
	return 0;
}

/* The data: the samples Megatron would ask each split for */
static int setup_data(struct run *r, char *err, size_t errlen)
{
	const struct train_args *a = r->a;
	const struct plan *p = r->p;
	int64_t samples[3] = {p->samples,
			      (p->iters / a->eval_interval + 1) * a->eval_iters * p->gbs,
			      a->eval_iters * p->gbs};
	gptdata_show_progress(r->dist.rank == 0);
	struct feed_config fc = feed_config_of(a, (int)r->seq);
	if (feed_open(&r->feed, &fc, samples, logs_line, err, errlen) < 0)
		return -1;
	r->st.nvalid = r->feed.nsets[FEED_VALID] < 64 ? r->feed.nsets[FEED_VALID] : 64;
	if (r->feed.nsets[FEED_TRAIN] == 0 || r->feed.sets[FEED_TRAIN][0].size == 0)
		return errf(err, errlen, "the train split is empty: check --split and --data-path");
	if (r->bert && bert_sample_alloc(&r->feed.bd[FEED_TRAIN], &r->bs) < 0)
		return xalloc_err(err, errlen, "a BERT sample's buffers", 0);
	if (r->t5 && t5_sample_alloc(&r->feed.bd[FEED_TRAIN], &r->ts) < 0)
		return xalloc_err(err, errlen, "a T5 sample's buffers", 0);
	return 0;
}

/* The optimizer and the learning-rate schedule, from the flags */
static void setup_optim(struct run *r)
{
	const struct train_args *a = r->a;
	const struct plan *p = r->p;
	int lamb = strcmp(a->optimizer, "lamb") == 0;
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
}

/* The weights: initialised, then --load's checkpoint if there is one (resume, --finetune,
 * --no-load-optim); and no step ahead of this run in --save */
static int setup_resume(struct run *r, char *err, size_t errlen)
{
	const struct train_args *a = r->a;
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
			logs_out("train: no checkpoint in --load %s: starting from scratch\n", a->load);
		} else if (a->finetune || a->no_load_optim) {
			/* Megatron's load_checkpoint without the optimizer: Adam starts afresh (zero
			 * moments, step 0, the initial loss scale) from the loaded weights, and so does
			 * the schedule (not loaded), except under --deepspeed with --no-load-optim, whose
			 * engine loads the scheduler anyway.  --finetune also sets the iteration to 0 and
			 * the tokens with it; Megatron-DeepSpeed still takes the consumed samples from the
			 * checkpoint's args, so the data order goes on where it was. */
			struct ckpt_state fresh = r->st;
			optim_state_zero(&r->m);
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
			logs_out("train: loaded the weights of %s (--%s): iteration %lld, %lld samples consumed, "
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
			logs_out("train: resumed from %s: iteration %lld, %lld samples consumed\n", loaded,
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
	return 0;
}

int setup_run(struct run *r, char *err, size_t errlen)
{
	const struct train_args *a = r->a;
	const struct ops *ops = NULL;
	struct model_config c;
	char bind_line[BIND_LINE] = "";
	int threads = 0;
	if (setup_device(a, &threads, bind_line, &ops, err, errlen) < 0 ||
	    model_config_of(r, ops, &c, err, errlen) < 0 ||
	    setup_dist(r, ops, bind_line, err, errlen) < 0 ||
	    model_layout(r, &c, err, errlen) < 0 ||
	    setup_model(r, &c, ops, threads, err, errlen) < 0)
		return -1;
	logs_startup(r, &c);
	if (a->log_path && r->dist.rank == 0 && logs_write_args(a->log_path, r->cmdline, err, errlen) < 0)
		return -1;
	if (setup_data(r, err, errlen) < 0)
		return -1;
	setup_optim(r);
	if (setup_resume(r, err, errlen) < 0)
		return -1;
	return logs_open(r, err, errlen);
}
