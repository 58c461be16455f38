/* args - Megatron-DeepSpeed's command line, as train reads it.
 *
 * Users bring sbatch scripts written for Megatron-DeepSpeed (the BigScience fork), so train takes
 * the same flags with the same meaning: the arguments of tr1-13B-round1.slurm or tr11-176B-ml.slurm
 * work unchanged after the launcher line.  Three things make that more than an option table:
 *
 * - argparse conventions: a few flags take several values after one flag (--rampup-batch-size
 *   START INCR SAMPLES, --data-path [W] PREFIX ...), and a repeated one replaces the earlier
 *   values; numbers may have '_' separators (9_765_625, Python's int()); a long flag may be
 *   abbreviated to any unique prefix (the 13B README writes --train-iter).  opt_parse() reads
 *   them all (opt.h: abbrev, several values); args_groups() gives it the tables.
 * - no flag is accepted and silently ignored.  A Megatron-DeepSpeed flag train does not act on
 *   is in args_other with its reason: either it cannot matter here (a fusion switch, a loader's
 *   worker count: accepted, and named once in a start-up line "accepted, no effect here"), or it
 *   would change the run and lmtk does not do it (refused: exit 2 before anything starts, saying
 *   what to use instead; --dry-run plans anyway and warns).  Both lists are in --help and
 *   train(1).  An unknown flag is still an error: a typo must not pass silently.
 * - cross-flag rules (--rampup-batch-size needs --train-samples, ...) are not checked here but in
 *   plan_check(), which reports every violation at once, naming the flags.
 *
 * Values are kept as given; -1 (or NULL) means "not given", so plan.c applies Megatron's defaults
 * and can tell a default from an explicit value in its messages. */
#ifndef TRAIN_ARGS_H
#define TRAIN_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "opt.h"
#include "train/data/curriculum.h"

#define ARGS_MAX_DATA 256
#define ARGS_MAX_SKIP 64
#define ARGS_MAX_PROFRANKS 64
/* joins the values of a multi-value flag into the one argument opt_parse() passes on */
#define ARGS_SEP "\x1f"

enum pos_emb { POS_LEARNED, POS_ALIBI, POS_ROTARY };
enum model_type { MT_GPT, MT_BERT, MT_T5 };
enum fmt { FMT_TEXT, FMT_JSON };

struct train_args {
	/* model */
	enum model_type model_type;    /* --model-type (lmtk's: Megatron picks by script) */
	int64_t num_tokentypes;        /* bert: -1 not given (2) */
	int bert_no_binary_head;
	double mask_prob, short_seq_prob;   /* bert's and t5's data (bertdata.h) */
	const char *bert_flag;         /* the last BERT-only flag given (an error without bert) */
	const char *masklm_flag;       /* --mask-prob or --short-seq-prob: BERT's and T5's data */
	/* t5: --encoder-seq-length sets seq_length (Megatron's args.seq_length, exclusive with
	 * --seq-length); --decoder-seq-length (-1 not given); the sentinels --vocab-extra-ids */
	int encoder_seq_given, seq_given;   /* which of the two set seq_length */
	int64_t decoder_seq_length, vocab_extra_ids;
	const char *t5_flag;           /* the last T5-only flag given (an error without t5) */
	int64_t num_layers, hidden_size, ffn_hidden_size, num_attention_heads, kv_channels;
	int64_t seq_length, max_position_embeddings;
	enum pos_emb pos_emb;
	int embed_layernorm;
	int use_bnb_optimizer;         /* bitsandbytes' Adam8bit + StableEmbedding (bnb.h) */
	int64_t make_vocab_size_divisible_by, pad_vocab_size_to;
	double init_method_std, layernorm_epsilon, hidden_dropout, attention_dropout;
	const char *glu_activation;

	/* parallelism and batch */
	int64_t tp, pp;
	const char *pp_partition_method;
	int pp_embedding;              /* --pp-partition-method counts embeddings as layers */
	int zero_stage;                /* -1: not given */
	/* --overlap-grad-reduce (under --deepspeed: zero_optimization.overlap_comm): DP gradient
	 * buckets reduced during the last backward; --ddp-bucket-size (under --deepspeed:
	 * reduce_bucket_size) elements per bucket, 0 not given (Megatron-LM's max(4e7, 1e6 x DP)) */
	int overlap_grad_reduce;
	int64_t ddp_bucket_size;
	int deepspeed;
	int checkpoint_activations;    /* recompute each chunk of layers in the backward */
	int64_t checkpoint_num_layers; /* layers per checkpointed chunk; -1 not given (1) */
	int ds_activation_checkpointing;   /* --deepspeed-activation-checkpointing */
	/* the --deepspeed_config activation_checkpointing keys set (dsconfig.c), "" none: the
	 * start-up line that says they have nothing to act on */
	char ds_act_keys[200];
	int64_t micro_batch_size, global_batch_size;
	int64_t rampup[3];             /* START INCR SAMPLES */
	int nrampup;                   /* values given to --rampup-batch-size */
	int64_t train_samples, train_iters, train_tokens;

	/* learning-rate schedule */
	double lr, min_lr, lr_warmup_fraction;   /* lr, fraction: -1 not given; min_lr default 0 */
	int min_lr_set;
	const char *lr_decay_style;
	int64_t lr_warmup_samples, lr_warmup_iters;
	int64_t lr_decay_samples, lr_decay_iters, lr_decay_tokens;

	/* precision */
	int bf16, fp16, accumulate_fp32;

	/* data and tokenizer */
	const char *data_path[ARGS_MAX_DATA];
	int ndata_path;
	const char *split;
	const char *data_cache_path;
	int weighted_split_paths;      /* --train-weighted-split-paths[-path] given */
	const char *wsplit[3];         /* train/valid/test weighted split paths: groups joined by
	                                  ARGS_SEP, or (wsplit_file) the file holding them */
	int wsplit_file[3];
	const char *tokenizer_type, *vocab_file, *merge_file, *tokenizer_name_or_path;

	/* checkpoints */
	const char *save, *load;
	int64_t save_interval;
	int64_t save_keep, save_keep_every;   /* --save-keep N, --save-keep-every M (keep.h); 0 not given */

	/* optimizer */
	int64_t seed;
	double weight_decay, clip_grad, adam_beta1, adam_beta2, adam_eps;
	double initial_loss_scale, min_loss_scale;
	int64_t loss_scale_window, hysteresis;

	/* logging, evaluation, stopping */
	int64_t log_interval, eval_interval, eval_iters, exit_interval;
	double exit_duration_mins;
	const char *tensorboard_dir, *kill_switch_path;
	int tb_timers, tb_batch, tb_ppl, log_zeros, log_params_norm;
	int64_t skip[ARGS_MAX_SKIP][2];
	int nskip;
	int cuda_graph;                /* --cuda-graph: the step replayed as a CUDA graph */
	int profile;                   /* --profile: cudaProfilerStart/Stop around */
	int64_t profile_step_start, profile_step_end;   /* iterations [start, end), from 0 */
	int64_t profile_ranks[ARGS_MAX_PROFRANKS];
	int nprofile_ranks;
	int profile_range_given;       /* --profile-step-start/-end or --profile-ranks given */
	int override_lr_scheduler, use_checkpoint_lr_scheduler;

	/* flags of args_other this run was given (args_normalize), each once */
#define ARGS_MAX_OTHER 64
	const struct args_other *noeffect[ARGS_MAX_OTHER], *refused[ARGS_MAX_OTHER];
	int nnoeffect, nrefused;

	/* Megatron-DeepSpeed flags implemented beyond the model shape (train(1)) */
	int optimizer_given;           /* --optimizer given */
	const char *optimizer;         /* adam (default), lamb, sgd */
	double sgd_momentum;           /* --sgd-momentum (default 0.9) */
	int sgd_momentum_given;
	double embedding_lr_mult;      /* --embedding-lr-mult / --alpha (default 1) */
	const char *embedding_lr_mult_given;   /* which of the two spelled it, or NULL */
	double lamb_layerwise_noise;   /* --lamb-layerwise-noise STD (default 0) */
	int lamb_noise_given;
	int eval_only;                 /* --eval-only True: evaluate, do not train */
	int finetune, no_load_optim;   /* --load: weights only / weights + counters, fresh optimizer */
	double loss_scale;             /* --loss-scale: static fp16 loss scale; 0 dynamic */
	int64_t tb_log_interval;       /* --tensorboard-log-interval (default 1) */
	int tb_no_lr, tb_no_loss_scale;   /* --no-log-learnig-rate/loss-scale-to-tensorboard */
	const char *log_path;          /* --log-path: the arguments file goes here */
	int eod_mask_loss, reset_position_ids, reset_attention_mask, post_ln_residual;
	int openai_gelu;
	const char *deepspeed_config;  /* --deepspeed_config FILE (dsconfig.h) */
	int curriculum_flag;           /* --curriculum-learning: the config's block must be there */
	struct curriculum curriculum;  /* from the config's curriculum_learning block (dsconfig.h) */
	unsigned given;                /* ARGS_GIVEN_*: flags given, where the default is not enough */
	uint64_t seen[4];              /* every option of args_opts given, by its key (args_given) */
	char *noeffect_more;           /* more of the start-up line: "--x (why), ..." (malloc'd) */

	const char *codecarbon_dir;    /* --codecarbon-dir: energy and emissions (energy.h) */
	double carbon_intensity, cpu_tdp;   /* g CO2eq/kWh; W, when RAPL is not readable */

	/* lmtk's own */
	const char *device;
	int64_t threads;
	int spike_policy;              /* 0 none, 1 skip, 2 rollback */
	double spike_factor, peak_tflops;

	/* --dry-run only */
	int dry_run;
	enum fmt format;
	int64_t nodes, gpus_per_node, vocab_size;
	double assumed_tflops, assumed_params, gpu_memory_gib, checkpoint_gbps;
	const char *nodes_from, *gpus_from;   /* "--nodes" or the SLURM variable it came from */
	const char *step_model;        /* --step-model lmtk|megatron-deepspeed; NULL: lmtk */
	const char *gpu_model;         /* --gpu-model h100|a100 (gpumodel.h); NULL: not given (a100) */
};

/* The option table (one entry per flag that train uses) and its handler. */
extern const struct opt args_opts[];
int args_opt(void *ctx, int key, const char *arg, char *err, size_t errlen);

/* Megatron-DeepSpeed flags train knows but does not act on. */
enum arg_class { ARG_NOEFFECT, ARG_REFUSED };
/* train_args.given: the flags a --deepspeed_config can override */
enum { ARGS_GIVEN_CLIP = 1, ARGS_GIVEN_LOSS_SCALE = 2, ARGS_GIVEN_INITIAL_LOSS_SCALE = 4,
       ARGS_GIVEN_MIN_LOSS_SCALE = 8, ARGS_GIVEN_LOSS_SCALE_WINDOW = 16, ARGS_GIVEN_HYSTERESIS = 32 };

/* Names in a's start-up line (args_noeffect_add) the flags that were given but are inert in
 * this combination of flags - the fp16 scaler's flags without --fp16, the schedule's resume flags
 * without --load, TensorBoard's without --tensorboard-dir, CodeCarbon's without --codecarbon-dir,
 * --split beside weighted split paths, --pp-partition-method at PP=1, a DeepSpeed
 * activation_checkpointing block - so that --dry-run and a run name the same ones. */
void args_name_inert(struct train_args *a);

/* Adds "--name (why)" to a's start-up line of flags without effect (printf-style why). */
void args_noeffect_add(struct train_args *a, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

struct args_other {
	const char *name;   /* without "--" */
	int values;         /* 0 a switch, 1 one value, 2 any number of values */
	enum arg_class cls;
	const char *why;    /* NOEFFECT: why it cannot matter here; REFUSED: what to use instead */
};
extern const struct args_other args_other[];

/* Defaults: everything "not given", the dry-run's device defaults. */
void args_init(struct train_args *a);

/* The option groups for opt_parse() (with abbrev on, as argparse): the table, whose several-values
 * flags reach args_opt() as one argument joined by ARGS_SEP (a repeated flag replaces the values,
 * as in argparse), and args_other, whose flags are recorded in a->noeffect / a->refused instead;
 * g has room for 3. */
void args_groups(struct train_args *a, struct optgroup *g);

/* The args_other flags of one class, "--a, --b, ...", wrapped at `width` columns with later
 * lines indented by `indent`, for --help.  Freed by the caller. */
char *args_other_list(enum arg_class cls, int width, int indent);

/* "--a (why), --b (why)": the no-effect flags this run was given, for the start-up line; NULL
 * when none.  Freed by the caller. */
char *args_noeffect_line(const struct train_args *a);

/* Python int() for the non-negative integers Megatron flags take: digits, single '_' between
 * digits.  0 or -1. */
int args_int(const char *s, int64_t *v);
/* Python float(): also "6e-5", "176e9", "1_000.5" (num_float).  0 or -1. */
int args_float(const char *s, double *v);

/* Fills nodes/gpus_per_node from SLURM_JOB_NUM_NODES / SLURM_GPUS_ON_NODE where the flags were not
 * given (SLURM_NNODES and SLURM_GPUS_PER_NODE as fallbacks).  0, or -1 + err for a variable that
 * is set but not a number. */
int args_from_slurm(struct train_args *a, char *err, size_t errlen);

#endif
