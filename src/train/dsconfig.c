/* dsconfig - see dsconfig.h.  Key names, defaults and the batch rules are DeepSpeed's
 * (runtime/config.py, runtime/zero/config.py, runtime/fp16 loss scaler). */
#include "train/dsconfig.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "msg.h"

/* DeepSpeed's defaults for what the file leaves out */
#define DS_INITIAL_SCALE_POWER 16
#define DS_LOSS_SCALE_WINDOW 1000
#define DS_HYSTERESIS 2
#define DS_MIN_LOSS_SCALE 1.0
#define DS_REDUCE_BUCKET_SIZE 500000000   /* zero_optimization.reduce_bucket_size, elements */

/* Top-level keys refused, with what to do instead.  Any other unknown key is refused too. */
static const struct {
	const char *key, *why;
} refused[] = {
	{"optimizer", "lmtk trains with Megatron's AdamW from the --adam-*/--weight-decay flags; "
		      "remove the block and give them as flags"},
	{"scheduler", "the learning-rate schedule comes from Megatron's --lr-* flags; remove the block"},
	{"flops_profiler", "DeepSpeed's profiler is not here; the log line carries TFLOPs"},
	{"tensorboard", "use --tensorboard-dir"},
	{"amp", "apex AMP is not here: use the fp16 or bf16 block"},
	{"sparse_attention", "sparse attention is not implemented"},
	{"pipeline", "the pipeline comes from --pipeline-model-parallel-size"},
	{"elasticity", "elastic training is not implemented"},
	{"compression_training", "compression is not implemented"},
	{"data_efficiency", "data efficiency (curriculum, random-LTD) is not implemented"},
	{"fp8", "fp8 training is not implemented"},
};

/* Keys accepted without effect, and why they cannot matter. */
static const struct {
	const char *key, *why;
} inert[] = {
	{"steps_per_print", "DeepSpeed's own progress print; train's log line follows --log-interval"},
	{"wall_clock_breakdown", "DeepSpeed's timers; train's log line has the iteration time"},
	{"zero_allow_untested_optimizer", "the optimizer is AdamW, which ZeRO-1 is tested with"},
	{"gradient_predivide_factor", "a numerical order of DeepSpeed's all-reduce; the gradient is the same mean"},
	{"prescale_gradients", "a numerical order of DeepSpeed's all-reduce; the gradient is the same mean"},
	{"communication_data_type", "the gradients are reduced in fp32"},
	{"dump_state", "DeepSpeed's debugging dump"},
	{"memory_breakdown", "DeepSpeed's memory print"},
	{"comms_logger", "DeepSpeed's communication log"},
};

/* zero_optimization keys that only tune DeepSpeed's communication and memory */
static const char *zero_inert[] = {
	"allgather_partitions", "allgather_bucket_size", "reduce_scatter", "contiguous_gradients", "round_robin_gradients", "elastic_checkpoint",
	"load_from_fp32_weights", "ignore_unused_parameters", "cpu_offload", NULL,
};

static int ds_err(char *err, size_t errlen, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int ds_err(char *err, size_t errlen, const char *path, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return errf(err, errlen, "--deepspeed_config %s: %s", path, msg);
}

/* A positive integer (JSON integer, or a real with no fraction as Python writes 1.0). */
static int get_int(json_t *v, int64_t lo, int64_t *out)
{
	double d;
	if (json_is_integer(v))
		d = (double)json_integer_value(v);
	else if (json_is_real(v))
		d = json_real_value(v);
	else
		return -1;
	if (d != floor(d) || d < (double)lo || d > 9.0e15)
		return -1;
	*out = (int64_t)d;
	return 0;
}

static int get_num(json_t *v, double lo, double *out)
{
	if (!json_is_number(v) || json_number_value(v) < lo || !isfinite(json_number_value(v)))
		return -1;
	*out = json_number_value(v);
	return 0;
}

/* A block switched off: {"enabled": false, ...}.  DeepSpeed and Megatron-DeepSpeed read nothing
 * else of such a block (curriculum_learning's difficulty settings, flops_profiler's output file),
 * so its other keys cannot matter either. */
static int disabled(json_t *v)
{
	return json_is_object(v) && json_is_false(json_object_get(v, "enabled"));
}

static int read_fp16(const char *path, json_t *o, struct dsconfig *c, char *err, size_t errlen)
{
	const char *k;
	json_t *v;
	int64_t n;
	if (!json_is_object(o))
		return ds_err(err, errlen, path, "fp16: not an object");
	json_object_foreach(o, k, v) {
		if (strcmp(k, "enabled") == 0) {
			if (!json_is_boolean(v))
				return ds_err(err, errlen, path, "fp16.enabled: not true or false");
			c->fp16 = json_is_true(v);
		} else if (strcmp(k, "loss_scale") == 0) {
			if (get_num(v, 0, &c->loss_scale) < 0)
				return ds_err(err, errlen, path, "fp16.loss_scale: not a number >= 0 "
					      "(0 is the dynamic scale)");
		} else if (strcmp(k, "initial_scale_power") == 0) {
			if (get_int(v, 0, &n) < 0 || n > 127)
				return ds_err(err, errlen, path, "fp16.initial_scale_power: not an integer "
					      "in 0..127");
			c->initial_scale_power = (int)n;
		} else if (strcmp(k, "loss_scale_window") == 0) {
			if (get_int(v, 1, &c->loss_scale_window) < 0)
				return ds_err(err, errlen, path, "fp16.loss_scale_window: not a positive "
					      "integer");
		} else if (strcmp(k, "hysteresis") == 0) {
			if (get_int(v, 1, &c->hysteresis) < 0)
				return ds_err(err, errlen, path, "fp16.hysteresis: not a positive integer");
		} else if (strcmp(k, "min_loss_scale") == 0) {
			if (get_num(v, 0, &c->min_loss_scale) < 0 || c->min_loss_scale <= 0)
				return ds_err(err, errlen, path, "fp16.min_loss_scale: not a number > 0");
		} else {
			return ds_err(err, errlen, path, "fp16.%s: not implemented (lmtk's fp16 block "
				      "reads enabled, loss_scale, initial_scale_power, loss_scale_window, "
				      "hysteresis, min_loss_scale)", k);
		}
	}
	return 0;
}

static int read_zero(const char *path, json_t *o, struct train_args *a, struct dsconfig *c,
		     char *err, size_t errlen)
{
	const char *k;
	json_t *v;
	int64_t n;
	if (!json_is_object(o))
		return ds_err(err, errlen, path, "zero_optimization: not an object");
	json_object_foreach(o, k, v) {
		int known = 0;
		if (strcmp(k, "stage") == 0) {
			if (get_int(v, 0, &n) < 0 || n > 3)
				return ds_err(err, errlen, path, "zero_optimization.stage: not 0, 1, 2 or 3");
			if (n >= 2)
				return ds_err(err, errlen, path, "zero_optimization.stage %lld: ZeRO stages 2 "
					      "and 3 are not implemented; use stage 1 (the optimizer state "
					      "sharded over DP) or 0", (long long)n);
			c->zero_stage = (int)n;
			continue;
		}
		if (strcmp(k, "overlap_comm") == 0) {   /* DeepSpeed's default: false */
			if (!json_is_boolean(v))
				return ds_err(err, errlen, path, "zero_optimization.overlap_comm: not true "
					      "or false");
			c->overlap_comm = json_is_true(v);
			continue;
		}
		if (strcmp(k, "reduce_bucket_size") == 0) {   /* elements; default 5e8 */
			if (get_int(v, 1, &n) < 0)
				return ds_err(err, errlen, path, "zero_optimization.reduce_bucket_size: not "
					      "a positive whole number of elements");
			c->reduce_bucket_size = n;
			continue;
		}
		for (int i = 0; zero_inert[i]; i++)
			known |= strcmp(k, zero_inert[i]) == 0;
		if (!known)
			return ds_err(err, errlen, path, "zero_optimization.%s: not implemented (offload "
				      "and the stage 2/3 knobs are not here)", k);
		if (strcmp(k, "cpu_offload") == 0 && !json_is_false(v))
			return ds_err(err, errlen, path, "zero_optimization.cpu_offload: offloading is "
				      "not implemented; set it to false");
		if (a->deepspeed)   /* else the whole file is named as without effect */
			args_noeffect_add(a, "deepspeed_config", "%s: zero_optimization.%s tunes "
					  "DeepSpeed's communication, not the math", path, k);
	}
	return 0;
}

/* An integer array of at most CL_MAX_DISCRETE entries, each >= lo */
static int get_ints(json_t *v, int64_t lo, int64_t *out, int *n)
{
	size_t i;
	json_t *e;
	if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > CL_MAX_DISCRETE)
		return -1;
	json_array_foreach(v, i, e)
		if (get_int(e, lo, &out[i]) < 0)
			return -1;
	*n = (int)json_array_size(v);
	return 0;
}

/* curriculum_learning, as DeepSpeed's CurriculumScheduler asserts it (the legacy block that
 * Megatron-DeepSpeed reads): every key it needs, nothing it does not know. */
static int read_curriculum(const char *path, json_t *o, struct curriculum *cl, char *err,
			   size_t errlen)
{
	json_t *v, *sc = json_object_get(o, "schedule_config");
	const char *k, *st;
	int nmax = 0;
	if (!json_is_object(o))
		return ds_err(err, errlen, path, "curriculum_learning: not an object");
	json_object_foreach(o, k, v)
		if (strcmp(k, "enabled") && strcmp(k, "curriculum_type") && strcmp(k, "min_difficulty") &&
		    strcmp(k, "max_difficulty") && strcmp(k, "schedule_type") &&
		    strcmp(k, "schedule_config"))
			return ds_err(err, errlen, path, "curriculum_learning.%s: unknown to DeepSpeed's "
				      "curriculum scheduler; remove it", k);
	v = json_object_get(o, "curriculum_type");
	if (!json_is_string(v) || strcmp(json_string_value(v), "seqlen") != 0)
		return ds_err(err, errlen, path, "curriculum_learning.curriculum_type: %s; lmtk "
			      "implements \"seqlen\" (Megatron-DeepSpeed's only one)",
			      v ? "not \"seqlen\"" : "missing");
	if (get_int(json_object_get(o, "min_difficulty"), 1, &cl->min_difficulty) < 0 ||
	    get_int(json_object_get(o, "max_difficulty"), 1, &cl->max_difficulty) < 0)
		return ds_err(err, errlen, path, "curriculum_learning: min_difficulty and "
			      "max_difficulty must be positive integers (sequence lengths)");
	if (cl->min_difficulty > cl->max_difficulty)
		return ds_err(err, errlen, path, "curriculum_learning: min_difficulty %lld exceeds "
			      "max_difficulty %lld", (long long)cl->min_difficulty,
			      (long long)cl->max_difficulty);
	st = json_string_value(json_object_get(o, "schedule_type"));
	if (!st)
		return ds_err(err, errlen, path, "curriculum_learning.schedule_type: missing "
			      "(fixed_linear, fixed_root or fixed_discrete)");
	if (strcmp(st, "fixed_linear") == 0)
		cl->type = CL_FIXED_LINEAR;
	else if (strcmp(st, "fixed_root") == 0)
		cl->type = CL_FIXED_ROOT;
	else if (strcmp(st, "fixed_discrete") == 0)
		cl->type = CL_FIXED_DISCRETE;
	else
		return ds_err(err, errlen, path, "curriculum_learning.schedule_type \"%s\": not "
			      "fixed_linear, fixed_root or fixed_discrete%s", st,
			      strcmp(st, "custom") == 0 ? " (a custom schedule is Python code)" : "");
	if (!json_is_object(sc))
		return ds_err(err, errlen, path, "curriculum_learning.schedule_config: %s",
			      sc ? "not an object" : "missing");
	json_object_foreach(sc, k, v) {
		int ok = cl->type == CL_FIXED_DISCRETE
				 ? !strcmp(k, "difficulty") || !strcmp(k, "max_step")
				 : !strcmp(k, "total_curriculum_step") || !strcmp(k, "difficulty_step") ||
					   (cl->type == CL_FIXED_ROOT && !strcmp(k, "root_degree"));
		if (!ok)
			return ds_err(err, errlen, path, "curriculum_learning.schedule_config.%s: not a "
				      "key of the %s schedule", k, st);
	}
	if (cl->type == CL_FIXED_DISCRETE) {
		if (get_ints(json_object_get(sc, "difficulty"), 1, cl->difficulty, &cl->ndiscrete) < 0 ||
		    get_ints(json_object_get(sc, "max_step"), 0, cl->max_step, &nmax) < 0)
			return ds_err(err, errlen, path, "curriculum_learning.schedule_config: fixed_discrete "
				      "needs \"difficulty\" (positive integers) and \"max_step\" (integers "
				      ">= 0), each a list of 1 to %d", CL_MAX_DISCRETE);
		if (cl->ndiscrete != nmax + 1)
			return ds_err(err, errlen, path, "curriculum_learning.schedule_config: difficulty "
				      "has %d entries and max_step %d; difficulty needs one more (the last "
				      "applies after the last max_step)", cl->ndiscrete, nmax);
		return 0;
	}
	if (get_int(json_object_get(sc, "total_curriculum_step"), 1, &cl->total_step) < 0 ||
	    get_int(json_object_get(sc, "difficulty_step"), 1, &cl->difficulty_step) < 0)
		return ds_err(err, errlen, path, "curriculum_learning.schedule_config: %s needs "
			      "total_curriculum_step and difficulty_step, positive integers", st);
	if (cl->type == CL_FIXED_ROOT &&
	    (get_num(json_object_get(sc, "root_degree"), 0, &cl->root_degree) < 0 || cl->root_degree <= 0))
		return ds_err(err, errlen, path, "curriculum_learning.schedule_config.root_degree: "
			      "fixed_root needs a positive number");
	return 0;
}

/* DeepSpeed's activation_checkpointing block (DeepSpeedActivationCheckpointingConfig): where
 * the checkpointed layer inputs live (partitioned over the TP ranks, in one contiguous buffer of
 * number_checkpoints, in CPU memory), whether the checkpoint boundaries synchronize, and a
 * profiler.  None changes a number: they are checked, and the ones set are named at start-up.
 * The block turns nothing on: --checkpoint-activations does. */
static int read_act_ckpt(const char *path, json_t *o, struct train_args *a, char *err,
			 size_t errlen)
{
	static const char *flags[] = {"partition_activations", "contiguous_memory_optimization",
				      "cpu_checkpointing", "synchronize_checkpoint_boundary",
				      "profile", NULL};
	const char *k;
	json_t *v;
	int64_t n;
	if (!json_is_object(o))
		return ds_err(err, errlen, path, "activation_checkpointing: not an object");
	a->ds_act_keys[0] = 0;
	json_object_foreach(o, k, v) {
		int known = 0, set = 0;
		for (int i = 0; flags[i]; i++)
			known |= strcmp(k, flags[i]) == 0;
		if (known) {
			if (!json_is_boolean(v))
				return ds_err(err, errlen, path, "activation_checkpointing.%s: not true or "
					      "false", k);
			set = json_is_true(v);
		} else if (strcmp(k, "number_checkpoints") == 0) {
			if (!json_is_null(v) && get_int(v, 1, &n) < 0)
				return ds_err(err, errlen, path, "activation_checkpointing.number_checkpoints: "
					      "not a positive integer or null");
			set = !json_is_null(v);
		} else {
			return ds_err(err, errlen, path, "activation_checkpointing.%s: unknown to DeepSpeed "
				      "(it reads partition_activations, contiguous_memory_optimization, "
				      "cpu_checkpointing, number_checkpoints, "
				      "synchronize_checkpoint_boundary, profile)", k);
		}
		size_t len = strlen(a->ds_act_keys);
		if (set)
			snprintf(a->ds_act_keys + len, sizeof a->ds_act_keys - len, "%s%s", len ? ", " : "",
				 k);
	}
	return 0;
}

static int read_file(const char *path, struct train_args *a, struct dsconfig *c, char *err,
		     size_t errlen)
{
	json_error_t je;
	json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je), *v;
	const char *k;
	int rc = -1;

	if (!root) {
		if (je.line <= 0)   /* could not open or read it: jansson's text has the reason */
			return errf(err, errlen, "--deepspeed_config %s: %s", path, je.text);
		return errf(err, errlen, "--deepspeed_config %s: line %d, column %d: %s", path, je.line,
			    je.column, je.text);
	}
	if (!json_is_object(root)) {
		ds_err(err, errlen, path, "not a JSON object");
		goto out;
	}
	json_object_foreach(root, k, v) {
		int done = 0;
		if (strcmp(k, "train_batch_size") == 0 || strcmp(k, "train_micro_batch_size_per_gpu") == 0 ||
		    strcmp(k, "gradient_accumulation_steps") == 0) {
			int64_t *dst = strcmp(k, "train_batch_size") == 0 ? &c->train_batch_size
				       : strcmp(k, "gradient_accumulation_steps") == 0 ? &c->grad_acc
				       : &c->micro_batch;
			if (get_int(v, 1, dst) < 0) {
				ds_err(err, errlen, path, "%s: not a positive integer", k);
				goto out;
			}
			continue;
		}
		if (strcmp(k, "gradient_clipping") == 0) {
			if (get_num(v, 0, &c->gradient_clipping) < 0) {
				ds_err(err, errlen, path, "gradient_clipping: not a number >= 0");
				goto out;
			}
			continue;
		}
		if (strcmp(k, "fp16") == 0) {
			if (read_fp16(path, v, c, err, errlen) < 0)
				goto out;
			continue;
		}
		if (strcmp(k, "bf16") == 0 || strcmp(k, "bfloat16") == 0) {
			/* "bfloat16" is DeepSpeed's old name, read when "bf16" is absent */
			json_t *e = json_object_get(v, "enabled");
			if (!json_is_object(v) || json_object_size(v) != (e ? 1u : 0u) ||
			    (e && !json_is_boolean(e))) {
				ds_err(err, errlen, path, "%s: lmtk reads only {\"enabled\": true|false}", k);
				goto out;
			}
			if (json_object_get(root, "bf16") && json_object_get(root, "bfloat16")) {
				ds_err(err, errlen, path, "bf16 and bfloat16 (its old name) both given: "
				       "keep one");
				goto out;
			}
			c->bf16 = e ? json_is_true(e) : -1;
			continue;
		}
		if (strcmp(k, "activation_checkpointing") == 0) {
			if (read_act_ckpt(path, v, a, err, errlen) < 0)
				goto out;
			continue;
		}
		if (strcmp(k, "curriculum_learning") == 0) {
			/* Megatron-DeepSpeed turns it on by "enabled" alone (or lmtk's
			 * --curriculum-learning) and then reads the rest; off, nothing else is read */
			json_t *e = json_object_get(v, "enabled");
			if (!json_is_object(v)) {
				ds_err(err, errlen, path, "curriculum_learning: not an object");
				goto out;
			}
			if (e && !json_is_boolean(e)) {
				ds_err(err, errlen, path, "curriculum_learning.enabled: not true or false");
				goto out;
			}
			c->curriculum_block = e ? (json_is_true(e) ? 1 : 0) : -1;
			if ((json_is_true(e) || (a->curriculum_flag && !e)) &&
			    read_curriculum(path, v, &c->curriculum, err, errlen) < 0)
				goto out;
			continue;
		}
		if (strcmp(k, "zero_optimization") == 0) {
			if (json_is_boolean(v))   /* DeepSpeed's deprecated form: true is stage 1 */
				c->zero_stage = json_is_true(v);
			else if (read_zero(path, v, a, c, err, errlen) < 0)
				goto out;
			continue;
		}
		for (size_t i = 0; i < sizeof inert / sizeof inert[0] && !done; i++)
			if (strcmp(k, inert[i].key) == 0) {
				if (a->deepspeed)
					args_noeffect_add(a, "deepspeed_config", "%s: %s: %s", path, k,
							  inert[i].why);
				done = 1;
			}
		for (size_t i = 0; i < sizeof refused / sizeof refused[0] && !done; i++)
			if (strcmp(k, refused[i].key) == 0) {
				if (!disabled(v)) {
					ds_err(err, errlen, path, "%s: %s", k, refused[i].why);
					goto out;
				}
				done = 1;
			}
		if (!done) {   /* a typo must not pass as a key DeepSpeed would ignore */
			ds_err(err, errlen, path, "%s: unknown to lmtk; remove it (train(1) lists the "
			       "keys read)", k);
			goto out;
		}
	}
	rc = 0;
out:
	json_decref(root);
	return rc;
}

/* One Megatron flag the config overrides: said in the start-up line when it was given with
 * another value than the one that applies. */
static void overridden(struct train_args *a, unsigned bit, const char *flag, double given,
		       double applies, const char *path, const char *key)
{
	if ((a->given & bit) && given != applies)
		args_noeffect_add(a, flag, "under --deepspeed %s's %s = %g applies", path, key, applies);
}

int dsconfig_apply(struct train_args *a, struct dsconfig *c, char *err, size_t errlen)
{
	const char *path = a->deepspeed_config;
	*c = (struct dsconfig){.train_batch_size = -1, .micro_batch = -1, .grad_acc = -1,
			       .gradient_clipping = 0, .zero_stage = -1, .overlap_comm = -1,
			       .reduce_bucket_size = -1, .fp16 = -1, .bf16 = -1,
			       .loss_scale = 0, .initial_scale_power = DS_INITIAL_SCALE_POWER,
			       .loss_scale_window = DS_LOSS_SCALE_WINDOW, .hysteresis = DS_HYSTERESIS,
			       .min_loss_scale = DS_MIN_LOSS_SCALE};
	c->curriculum_block = -2;
	if (a->curriculum_flag && (!path || !a->deepspeed))
		return errf(err, errlen, "--curriculum-learning: the schedule is DeepSpeed's: give "
			    "--deepspeed and a --deepspeed_config with a curriculum_learning block");
	if (!path)
		return 0;
	if (read_file(path, a, c, err, errlen) < 0)
		return -1;
	if (!a->deepspeed) {
		a->ds_act_keys[0] = 0;   /* the file is named as without effect: all of it */
		args_noeffect_add(a, "deepspeed_config", "%s: without --deepspeed Megatron-DeepSpeed "
				  "does not read it (checked all the same)", path);
		return 0;
	}
	/* precision: the flags and the config must tell the same story */
	if (a->fp16 != (c->fp16 == 1))
		return ds_err(err, errlen, path, "fp16.enabled is %s but --fp16 is %s: make them agree",
			      c->fp16 == 1 ? "true" : c->fp16 == 0 ? "false" : "absent (false)",
			      a->fp16 ? "given" : "not given");
	if (a->bf16 != (c->bf16 == 1))
		return ds_err(err, errlen, path, "bf16.enabled is %s but --bf16 is %s: make them agree",
			      c->bf16 == 1 ? "true" : c->bf16 == 0 ? "false" : "absent (false)",
			      a->bf16 ? "given" : "not given");
	/* The engine partitions as its config says; Megatron-DeepSpeed reads --zero-stage only
	 * for stage 3's zero.Init, which lmtk refuses anyway.  So the file's stage applies, and a
	 * --zero-stage that said otherwise is named, as the other flags the file overrides. */
	int stage = c->zero_stage >= 0 ? c->zero_stage : 0;   /* DeepSpeed's default: no ZeRO */
	if (a->zero_stage >= 0 && a->zero_stage != stage)
		args_noeffect_add(a, "zero-stage", "under --deepspeed %s's zero_optimization.stage = %d%s "
				  "applies", path, stage, c->zero_stage < 0 ? " (absent: DeepSpeed's "
				  "default)" : "");
	a->zero_stage = stage;
	/* the DP gradient buckets likewise: ZeRO's overlap_comm (DeepSpeed's default false) and
	 * reduce_bucket_size (elements, default 5e8) in place of Megatron-LM's flags */
	int overlap = c->overlap_comm == 1;
	if (a->overlap_grad_reduce && !overlap)
		args_noeffect_add(a, "overlap-grad-reduce", "under --deepspeed %s's "
				  "zero_optimization.overlap_comm = false%s applies", path,
				  c->overlap_comm < 0 ? " (absent: DeepSpeed's default)" : "");
	a->overlap_grad_reduce = overlap;
	int64_t bucket = c->reduce_bucket_size > 0 ? c->reduce_bucket_size : DS_REDUCE_BUCKET_SIZE;
	if (a->ddp_bucket_size > 0 && a->ddp_bucket_size != bucket)
		args_noeffect_add(a, "ddp-bucket-size", "under --deepspeed %s's "
				  "zero_optimization.reduce_bucket_size = %lld%s applies", path,
				  (long long)bucket, c->reduce_bucket_size < 0 ? " (absent: DeepSpeed's "
				  "default)" : "");
	a->ddp_bucket_size = bucket;
	if (c->reduce_bucket_size > 0 && !overlap)
		args_noeffect_add(a, "deepspeed_config", "%s: zero_optimization.reduce_bucket_size: "
				  "without overlap_comm the DP gradients are reduced in one call after "
				  "the backward", path);

	/* the curriculum: "enabled": true, or --curriculum-learning with a block that does not
	 * say "enabled" */
	if (a->curriculum_flag && c->curriculum_block == -2)
		return ds_err(err, errlen, path, "--curriculum-learning: no curriculum_learning block");
	if (a->curriculum_flag && c->curriculum_block == 0)
		return ds_err(err, errlen, path, "curriculum_learning.enabled is false but "
			      "--curriculum-learning is given: make them agree");
	if (c->curriculum_block == 1 || (a->curriculum_flag && c->curriculum_block == -1)) {
		a->curriculum = c->curriculum;
		a->curriculum.enabled = 1;
		a->curriculum.current = a->curriculum.min_difficulty;
	} else if (c->curriculum_block == -1) {
		args_noeffect_add(a, "deepspeed_config", "%s: curriculum_learning without \"enabled\": "
				  "true is off, as in Megatron-DeepSpeed", path);
	}

	/* DeepSpeed clips (its default: not at all) and scales the loss, not Megatron */
	overridden(a, ARGS_GIVEN_CLIP, "clip-grad", a->clip_grad, c->gradient_clipping, path,
		   "gradient_clipping");
	a->clip_grad = c->gradient_clipping;
	if (c->fp16 == 1) {
		double init = ldexp(1.0, c->initial_scale_power);
		overridden(a, ARGS_GIVEN_LOSS_SCALE, "loss-scale", a->loss_scale, c->loss_scale, path,
			   "fp16.loss_scale");
		overridden(a, ARGS_GIVEN_INITIAL_LOSS_SCALE, "initial-loss-scale", a->initial_loss_scale,
			   init, path, "2^fp16.initial_scale_power");
		overridden(a, ARGS_GIVEN_MIN_LOSS_SCALE, "min-loss-scale", a->min_loss_scale,
			   c->min_loss_scale, path, "fp16.min_loss_scale");
		overridden(a, ARGS_GIVEN_LOSS_SCALE_WINDOW, "loss-scale-window",
			   (double)a->loss_scale_window, (double)c->loss_scale_window, path,
			   "fp16.loss_scale_window");
		overridden(a, ARGS_GIVEN_HYSTERESIS, "hysteresis", (double)a->hysteresis,
			   (double)c->hysteresis, path, "fp16.hysteresis");
		a->loss_scale = c->loss_scale;
		a->initial_loss_scale = init;
		a->min_loss_scale = c->min_loss_scale;
		a->loss_scale_window = c->loss_scale_window;
		a->hysteresis = c->hysteresis;
	}
	return 0;
}

int dsconfig_check_batch(const struct train_args *a, const struct dsconfig *c, int64_t dp,
			 int64_t mbs, int64_t gbs, char *err, size_t errlen)
{
	const char *path = a->deepspeed_config;
	int64_t tbs = c->train_batch_size, mb = c->micro_batch, gas = c->grad_acc;
	if (!path || !a->deepspeed || dp <= 0)
		return 0;
	/* DeepSpeed's _set_batch_related_parameters, then _batch_assertion */
	if (tbs > 0 && mb > 0 && gas > 0) {
		/* all given: only the assertion */
	} else if (tbs > 0 && mb > 0) {
		gas = tbs / mb / dp;
	} else if (tbs > 0 && gas > 0) {
		mb = tbs / dp / gas;
	} else if (mb > 0 && gas > 0) {
		tbs = mb * gas * dp;
	} else if (tbs > 0) {
		gas = 1;
		mb = tbs / dp;
	} else if (mb > 0) {
		tbs = mb * dp;
		gas = 1;
	} else {
		return ds_err(err, errlen, path, "Either train_batch_size or "
			      "train_micro_batch_size_per_gpu needs to be provided (DeepSpeed)");
	}
	/* its assertions, in its order and words: a resolved value can round down to 0 */
	if (mb <= 0)
		return ds_err(err, errlen, path, "Micro batch size per gpu: %lld has to be greater than 0 "
			      "(DeepSpeed: train_batch_size %lld / gradient_accumulation_steps %lld / "
			      "data-parallel size %lld)", (long long)mb, (long long)tbs, (long long)gas,
			      (long long)dp);
	if (gas <= 0)
		return ds_err(err, errlen, path, "Gradient accumulation steps: %lld has to be greater "
			      "than 0 (DeepSpeed: train_batch_size %lld / train_micro_batch_size_per_gpu "
			      "%lld / data-parallel size %lld)", (long long)gas, (long long)tbs,
			      (long long)mb, (long long)dp);
	if (tbs != mb * gas * dp)
		return ds_err(err, errlen, path, "Check batch related parameters. train_batch_size is "
			      "not equal to micro_batch_per_gpu * gradient_acc_step * world_size "
			      "%lld != %lld * %lld * %lld (DeepSpeed; world_size is the data-parallel "
			      "size)", (long long)tbs, (long long)mb, (long long)gas, (long long)dp);
	if (mb != mbs)
		return ds_err(err, errlen, path, "train_micro_batch_size_per_gpu %lld but "
			      "--micro-batch-size %lld: make them agree", (long long)mb, (long long)mbs);
	if (tbs != gbs)
		return ds_err(err, errlen, path, "train_batch_size %lld but --global-batch-size %lld%s: "
			      "make them agree", (long long)tbs, (long long)gbs,
			      a->nrampup ? " (the batch at the end of the ramp-up)" : "");
	return 0;
}
