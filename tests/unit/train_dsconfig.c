/* train_dsconfig.c - --deepspeed_config read as DeepSpeed reads it.  The anchors: the ds_config
 * BigScience's 13B script wrote (tr1-13B-round1.slurm: micro batch 1, train_batch_size 1024,
 * clipping 1.0, ZeRO 1, a dynamic fp16 scale from 2^12), DeepSpeed's batch resolution and its
 * assertion's words (runtime/config.py, _set_batch_related_parameters and _batch_assertion),
 * and jansson's line numbers for JSON that does not parse. */
#include "t.h"
#include "train/args.h"
#include "train/dsconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define DS13B "{\n"                                              \
	"  \"train_micro_batch_size_per_gpu\": 1,\n"               \
	"  \"train_batch_size\": 1024,\n"                          \
	"  \"gradient_clipping\": 1.0,\n"                          \
	"  \"zero_optimization\": {\n    \"stage\": 1\n  },\n"     \
	"  \"fp16\": {\n"                                          \
	"    \"enabled\": true,\n"                                 \
	"    \"loss_scale\": 0,\n"                                 \
	"    \"loss_scale_window\": 500,\n"                        \
	"    \"hysteresis\": 2,\n"                                 \
	"    \"min_loss_scale\": 1,\n"                             \
	"    \"initial_scale_power\": 12\n"                        \
	"  },\n"                                                   \
	"  \"steps_per_print\": 2000,\n"                           \
	"  \"wall_clock_breakdown\": false\n"                      \
	"}\n"

static char dir[] = "/tmp/train_dsconfig.XXXXXX";
static char path[64];
static struct train_args a;
static struct dsconfig c;
static char err[512];

/* Writes text as the config file and sets up flags as the 13B's: --fp16 [--deepspeed]. */
static const char *config(const char *text, int deepspeed)
{
	FILE *f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0)
		abort();
	free(a.noeffect_more);
	args_init(&a);
	a.fp16 = 1;
	a.deepspeed = deepspeed;
	a.deepspeed_config = path;
	err[0] = 0;
	return path;
}

static int apply(void)
{
	return dsconfig_apply(&a, &c, err, sizeof err);
}

static int has(const char *s, const char *needle)
{
	return s && strstr(s, needle) != NULL;
}

/* the start-up line of flags and keys without effect */
static int said(const char *needle)
{
	return has(a.noeffect_more, needle);
}

int main(void)
{
	if (!mkdtemp(dir))
		abort();
	snprintf(path, sizeof path, "%s/ds.json", dir);

	T_CASE("reads_the_13b_config") {
		config(DS13B, 1);
		T_ASSERT(apply() == 0);
		T_ASSERT(c.train_batch_size == 1024 && c.micro_batch == 1 && c.grad_acc == -1);
		T_ASSERT(c.gradient_clipping == 1.0 && c.zero_stage == 1);
		T_ASSERT(c.fp16 == 1 && c.bf16 == -1 && c.loss_scale == 0);
		T_ASSERT(c.initial_scale_power == 12 && c.loss_scale_window == 500);
		T_ASSERT(c.hysteresis == 2 && c.min_loss_scale == 1);
	}
	T_CASE("fp16_block_sets_the_loss_scaler_under_deepspeed") {
		config(DS13B, 1);
		a.loss_scale = 12;   /* the 13B script's --loss-scale 12 */
		a.given |= ARGS_GIVEN_LOSS_SCALE;
		T_ASSERT(apply() == 0);
		T_ASSERT(a.loss_scale == 0);               /* dynamic, as the file says */
		T_ASSERT(a.initial_loss_scale == 4096);    /* 2^12 */
		T_ASSERT(a.loss_scale_window == 500 && a.hysteresis == 2 && a.min_loss_scale == 1);
		T_ASSERT(a.clip_grad == 1.0 && a.zero_stage == 1);
		T_ASSERT(said("--loss-scale (under --deepspeed "));
		T_ASSERT(said("fp16.loss_scale = 0 applies"));
		T_ASSERT(!said("--initial-loss-scale"));   /* not given: nothing to name */
	}
	T_CASE("inert_keys_named_in_the_startup_line") {
		config(DS13B, 1);
		T_ASSERT(apply() == 0);
		T_ASSERT(said("--deepspeed_config (") && said(": steps_per_print: "));
		T_ASSERT(said(": wall_clock_breakdown: "));
	}
	T_CASE("fp16_defaults_are_deepspeeds") {
		config("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true}}", 1);
		T_ASSERT(apply() == 0);
		T_ASSERT(a.initial_loss_scale == 65536 && a.loss_scale == 0);   /* 2^16 */
		T_ASSERT(a.loss_scale_window == 1000 && a.hysteresis == 2 && a.min_loss_scale == 1);
		T_ASSERT(a.clip_grad == 0);   /* DeepSpeed clips nothing unless told */
	}
	T_CASE("static_loss_scale") {
		config("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true, \"loss_scale\": 128}}", 1);
		T_ASSERT(apply() == 0);
		T_ASSERT(a.loss_scale == 128);
	}
	T_CASE("gradient_clipping_overrides_clip_grad_and_names_it") {
		config("{\"train_batch_size\": 8, \"gradient_clipping\": 0.5, \"fp16\": {\"enabled\": true}}", 1);
		a.clip_grad = 1.0;
		a.given |= ARGS_GIVEN_CLIP;
		T_ASSERT(apply() == 0);
		T_ASSERT(a.clip_grad == 0.5);
		T_ASSERT(said("--clip-grad (under --deepspeed ") && said("gradient_clipping = 0.5 applies"));
	}
	T_CASE("same_clip_grad_not_named") {
		config(DS13B, 1);
		a.given |= ARGS_GIVEN_CLIP;
		T_ASSERT(apply() == 0);
		T_ASSERT(!said("--clip-grad"));
	}
	T_CASE("without_deepspeed_read_but_not_applied") {
		config(DS13B, 0);
		double ils = a.initial_loss_scale;
		T_ASSERT(apply() == 0);
		T_ASSERT(a.initial_loss_scale == ils && a.clip_grad == 1.0 && a.zero_stage == -1);
		T_ASSERT(said("without --deepspeed Megatron-DeepSpeed does not read it"));
		T_ASSERT(has(a.noeffect_more, path));
		T_ASSERT(!said("steps_per_print"));   /* the whole file is named, not its keys */
		/* nor is its batch checked: nothing told the engine about it */
		T_ASSERT(dsconfig_check_batch(&a, &c, 16, 1, 512, err, sizeof err) == 0);
	}
	T_CASE("missing_file_names_the_path") {
		config(DS13B, 1);
		a.deepspeed_config = "/nonexistent/ds_config.4242.json";
		T_ASSERT(apply() < 0);
		T_ASSERT(has(err, "--deepspeed_config /nonexistent/ds_config.4242.json: "));
		T_ASSERT(has(err, "No such file"));
	}
	T_CASE("malformed_json_names_line_and_column") {
		config("{\n  \"train_batch_size\": 1024,\n  \"fp16\": {\"enabled\": true,}\n}\n", 1);
		T_ASSERT(apply() < 0);
		T_ASSERT(has(err, path) && has(err, ": line 3, column "));
	}
	T_CASE("malformed_json_refused_without_deepspeed_too") {
		config("{\"train_batch_size\": 1024", 0);
		T_ASSERT(apply() < 0);
		T_ASSERT(has(err, ": line 1, column "));
	}
	T_CASE("duplicate_key_refused") {   /* DeepSpeed: dict_raise_error_on_duplicate_keys */
		config("{\"train_batch_size\": 8,\n\"train_batch_size\": 16}", 1);
		T_ASSERT(apply() < 0);
		T_ASSERT(has(err, ": line 2, column ") && has(err, "duplicate"));
	}
	T_CASE("not_an_object_refused") {
		config("[1, 2]", 1);
		T_ASSERT(apply() < 0);
		T_ASSERT(has(err, "not a JSON object"));
	}
	T_CASE("batch_agrees_with_the_13b_flags") {
		config(DS13B, 1);
		T_ASSERT(apply() == 0);
		/* DP 16 (32 nodes x 4 / TP 2 x PP 4): accumulation 1024 / 1 / 16 = 64 */
		T_ASSERT(dsconfig_check_batch(&a, &c, 16, 1, 1024, err, sizeof err) == 0);
	}
	T_CASE("batch_mismatch_with_global_batch_size") {
		config(DS13B, 1);
		T_ASSERT(apply() == 0);
		T_ASSERT(dsconfig_check_batch(&a, &c, 16, 1, 512, err, sizeof err) < 0);
		T_ASSERT(has(err, path));
		T_ASSERT(has(err, "train_batch_size 1024 but --global-batch-size 512: make them agree"));
		a.nrampup = 3;   /* with a ramp-up, the flag is the batch it ends with */
		T_ASSERT(dsconfig_check_batch(&a, &c, 16, 1, 512, err, sizeof err) < 0);
		T_ASSERT(has(err, "(the batch at the end of the ramp-up)"));
	}
	T_CASE("batch_mismatch_with_micro_batch_size") {
		config(DS13B, 1);
		T_ASSERT(apply() == 0);
		T_ASSERT(dsconfig_check_batch(&a, &c, 16, 2, 1024, err, sizeof err) < 0);
		T_ASSERT(has(err, "train_micro_batch_size_per_gpu 1 but --micro-batch-size 2"));
	}
	T_CASE("deepspeed_assertion_in_its_words") {
		config("{\"train_batch_size\": 1024, \"train_micro_batch_size_per_gpu\": 1,"
		       " \"gradient_accumulation_steps\": 3, \"fp16\": {\"enabled\": true}}", 1);
		T_ASSERT(apply() == 0);
		T_ASSERT(dsconfig_check_batch(&a, &c, 16, 1, 1024, err, sizeof err) < 0);
		T_ASSERT(has(err, path));
		T_ASSERT(has(err, "Check batch related parameters. train_batch_size is not equal to "
			     "micro_batch_per_gpu * gradient_acc_step * world_size 1024 != 1 * 3 * 16"));
	}
	T_CASE("assertion_holds_when_all_three_agree") {
		config("{\"train_batch_size\": 1024, \"train_micro_batch_size_per_gpu\": 1,"
		       " \"gradient_accumulation_steps\": 64, \"fp16\": {\"enabled\": true}}", 1);
		T_ASSERT(apply() == 0);
		T_ASSERT(dsconfig_check_batch(&a, &c, 16, 1, 1024, err, sizeof err) == 0);
	}
	T_CASE("deepspeed_resolution_rules") {
		/* train_batch_size alone: accumulation 1, micro batch tbs / dp */
		config("{\"train_batch_size\": 64, \"fp16\": {\"enabled\": true}}", 1);
		T_ASSERT(apply() == 0);
		T_ASSERT(dsconfig_check_batch(&a, &c, 8, 8, 64, err, sizeof err) == 0);
		T_ASSERT(dsconfig_check_batch(&a, &c, 8, 4, 64, err, sizeof err) < 0);
		/* micro batch alone: tbs = micro * dp */
		config("{\"train_micro_batch_size_per_gpu\": 2, \"fp16\": {\"enabled\": true}}", 1);
		T_ASSERT(apply() == 0);
		T_ASSERT(dsconfig_check_batch(&a, &c, 4, 2, 8, err, sizeof err) == 0);
		T_ASSERT(dsconfig_check_batch(&a, &c, 4, 2, 16, err, sizeof err) < 0);
		/* micro batch and accumulation: tbs = micro * gas * dp */
		config("{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 4,"
		       " \"fp16\": {\"enabled\": true}}", 1);
		T_ASSERT(apply() == 0);
		T_ASSERT(dsconfig_check_batch(&a, &c, 4, 2, 32, err, sizeof err) == 0);
		/* tbs and accumulation: micro = tbs // dp // gas, which can leave a remainder */
		config("{\"train_batch_size\": 100, \"gradient_accumulation_steps\": 4,"
		       " \"fp16\": {\"enabled\": true}}", 1);
		T_ASSERT(apply() == 0);
		T_ASSERT(dsconfig_check_batch(&a, &c, 8, 3, 100, err, sizeof err) < 0);
		T_ASSERT(has(err, "100 != 3 * 4 * 8"));
	}
	T_CASE("resolved_accumulation_of_0_is_deepspeeds_error") {
		config("{\"train_batch_size\": 4, \"train_micro_batch_size_per_gpu\": 8,"
		       " \"fp16\": {\"enabled\": true}}", 1);
		T_ASSERT(apply() == 0);
		T_ASSERT(dsconfig_check_batch(&a, &c, 1, 8, 4, err, sizeof err) < 0);
		T_ASSERT(has(err, "Gradient accumulation steps: 0 has to be greater than 0"));
	}
	T_CASE("no_batch_key_is_deepspeeds_error") {
		config("{\"gradient_accumulation_steps\": 4, \"fp16\": {\"enabled\": true}}", 1);
		T_ASSERT(apply() == 0);
		T_ASSERT(dsconfig_check_batch(&a, &c, 1, 1, 4, err, sizeof err) < 0);
		T_ASSERT(has(err, "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided"));
	}
	T_CASE("batch_key_not_a_positive_integer") {
		config("{\"train_batch_size\": 0}", 1);
		T_ASSERT(apply() < 0 && has(err, "train_batch_size: not a positive integer"));
		config("{\"train_batch_size\": \"auto\"}", 1);
		T_ASSERT(apply() < 0 && has(err, "train_batch_size: not a positive integer"));
		config("{\"train_batch_size\": 8.0, \"fp16\": {\"enabled\": true}}", 1);   /* Python's 8.0 */
		T_ASSERT(apply() == 0 && c.train_batch_size == 8);
	}
	T_CASE("zero_stage_2_and_3_refused_saying_what_to_use") {
		config("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2}}", 1);
		T_ASSERT(apply() < 0);
		T_ASSERT(has(err, path) && has(err, "zero_optimization.stage 2: ZeRO stages 2 and 3 are "
						 "not implemented; use stage 1"));
		config("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3}}", 1);
		T_ASSERT(apply() < 0 && has(err, "zero_optimization.stage 3: "));
		config("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 4}}", 1);
		T_ASSERT(apply() < 0 && has(err, "zero_optimization.stage: not 0, 1, 2 or 3"));
	}
	T_CASE("zero_stage_from_the_file_applies") {
		config(DS13B, 1);
		a.zero_stage = 0;   /* --zero-stage 0: the engine partitions as the file says */
		T_ASSERT(apply() == 0);
		T_ASSERT(a.zero_stage == 1);
		T_ASSERT(said("--zero-stage (under --deepspeed ") && said("zero_optimization.stage = 1 applies"));
		config("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true}}", 1);
		a.zero_stage = 1;   /* no zero_optimization: DeepSpeed's default, no ZeRO */
		T_ASSERT(apply() == 0);
		T_ASSERT(a.zero_stage == 0 && said("stage = 0 (absent: DeepSpeed's default) applies"));
		config("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true}}", 1);
		T_ASSERT(apply() == 0 && a.zero_stage == 0 && !said("--zero-stage"));
	}
	T_CASE("zero_optimization_old_boolean_form") {
		config("{\"train_batch_size\": 8, \"zero_optimization\": true, \"fp16\": {\"enabled\": true}}", 1);
		T_ASSERT(apply() == 0 && a.zero_stage == 1);
		config("{\"train_batch_size\": 8, \"zero_optimization\": false, \"fp16\": {\"enabled\": true}}", 1);
		T_ASSERT(apply() == 0 && a.zero_stage == 0);
	}
	T_CASE("overlap_comm_and_reduce_bucket_size_set_the_dp_buckets") {
		config("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true}, \"zero_optimization\":"
		       " {\"stage\": 1, \"overlap_comm\": true, \"reduce_bucket_size\": 5e7}}", 1);
		T_ASSERT(apply() == 0);
		T_ASSERT(a.overlap_grad_reduce == 1 && a.ddp_bucket_size == 50000000);
		T_ASSERT(!said("overlap_comm tunes") && !said("reduce_bucket_size tunes"));
		T_ASSERT(!said("without overlap_comm the DP"));
		/* a bucket size with nothing to cut (ZeRO-1 reduces in one call too): named */
		config("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true}, \"zero_optimization\":"
		       " {\"stage\": 1, \"reduce_bucket_size\": 5e7}}", 1);
		T_ASSERT(apply() == 0);
		T_ASSERT(said("zero_optimization.reduce_bucket_size: without overlap_comm the DP"));
		/* absent: DeepSpeed's defaults, and Megatron-LM's flags that disagree are named */
		config("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true}}", 1);
		a.overlap_grad_reduce = 1;
		a.ddp_bucket_size = 1000;
		T_ASSERT(apply() == 0);
		T_ASSERT(a.overlap_grad_reduce == 0 && a.ddp_bucket_size == 500000000);
		T_ASSERT(said("--overlap-grad-reduce (under --deepspeed ") &&
			 said("overlap_comm = false (absent: DeepSpeed's default) applies"));
		T_ASSERT(said("--ddp-bucket-size (under --deepspeed ") &&
			 said("reduce_bucket_size = 500000000 (absent: DeepSpeed's default) applies"));
		config("{\"train_batch_size\": 8, \"zero_optimization\": {\"overlap_comm\": 1}}", 1);
		T_ASSERT(apply() < 0 && has(err, "zero_optimization.overlap_comm: not true or false"));
		config("{\"train_batch_size\": 8, \"zero_optimization\": {\"reduce_bucket_size\": 0}}", 1);
		T_ASSERT(apply() < 0 && has(err, "zero_optimization.reduce_bucket_size: not a positive"));
	}
	T_CASE("zero_communication_knobs_named_offload_refused") {
		config("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true}, \"zero_optimization\":"
		       " {\"stage\": 1, \"contiguous_gradients\": true, \"allgather_bucket_size\": 5e8}}", 1);
		T_ASSERT(apply() == 0);
		T_ASSERT(said("zero_optimization.contiguous_gradients tunes") && said("zero_optimization.allgather_bucket_size"));
		config("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 1,"
		       " \"offload_optimizer\": {\"device\": \"cpu\"}}}", 1);
		T_ASSERT(apply() < 0 && has(err, "zero_optimization.offload_optimizer: not implemented"));
	}
	T_CASE("fp16_mismatch_refused") {
		config(DS13B, 1);
		a.fp16 = 0;
		T_ASSERT(apply() < 0);
		T_ASSERT(has(err, path) && has(err, "fp16.enabled is true but --fp16 is not given: make them agree"));
		config("{\"train_batch_size\": 8}", 1);   /* --fp16 given, the file says nothing */
		T_ASSERT(apply() < 0 && has(err, "fp16.enabled is absent (false) but --fp16 is given"));
	}
	T_CASE("bf16_mismatch_refused") {
		config("{\"train_batch_size\": 8, \"bf16\": {\"enabled\": true}}", 1);
		a.fp16 = 0;
		T_ASSERT(apply() < 0 && has(err, "bf16.enabled is true but --bf16 is not given"));
		config("{\"train_batch_size\": 8, \"bf16\": {\"enabled\": true}}", 1);
		a.fp16 = 0;
		a.bf16 = 1;
		T_ASSERT(apply() == 0 && c.bf16 == 1);
	}
	T_CASE("bfloat16_is_bf16s_old_name") {
		config("{\"train_batch_size\": 8, \"bfloat16\": {\"enabled\": true}}", 1);
		a.fp16 = 0;
		a.bf16 = 1;
		T_ASSERT(apply() == 0 && c.bf16 == 1);
		config("{\"train_batch_size\": 8, \"bf16\": {\"enabled\": true}, \"bfloat16\": {\"enabled\": false}}", 1);
		a.fp16 = 0;
		a.bf16 = 1;
		T_ASSERT(apply() < 0 && has(err, "bf16 and bfloat16 (its old name) both given"));
	}
	T_CASE("fp16_bad_values_refused") {
		config("{\"fp16\": {\"enabled\": true, \"initial_scale_power\": 12.5}}", 1);
		T_ASSERT(apply() < 0 && has(err, "fp16.initial_scale_power: not an integer"));
		config("{\"fp16\": {\"enabled\": true, \"min_loss_scale\": 0}}", 1);
		T_ASSERT(apply() < 0 && has(err, "fp16.min_loss_scale: not a number > 0"));
		config("{\"fp16\": {\"enabled\": \"yes\"}}", 1);
		T_ASSERT(apply() < 0 && has(err, "fp16.enabled: not true or false"));
		config("{\"fp16\": {\"enabled\": true, \"auto_cast\": true}}", 1);
		T_ASSERT(apply() < 0 && has(err, "fp16.auto_cast: not implemented"));
	}
	T_CASE("unknown_key_refused_by_name") {
		config("{\"train_batch_size\": 8, \"stepz_per_print\": 10}", 1);
		T_ASSERT(apply() < 0);
		T_ASSERT(has(err, path) && has(err, ": stepz_per_print: unknown to lmtk"));
		/* even switched off: a typo must not pass */
		config("{\"train_batch_size\": 8, \"curiculum_learning\": {\"enabled\": false}}", 1);
		T_ASSERT(apply() < 0 && has(err, "curiculum_learning: unknown to lmtk"));
	}
	T_CASE("unknown_key_refused_without_deepspeed_too") {
		config("{\"train_batch_size\": 8, \"stepz_per_print\": 10}", 0);
		T_ASSERT(apply() < 0 && has(err, "stepz_per_print: unknown to lmtk"));
	}
	T_CASE("refused_blocks_say_why") {
		config("{\"train_batch_size\": 8, \"curriculum_learning\": {\"enabled\": true,"
		       " \"curriculum_type\": \"seqlen\"}}", 1);
		T_ASSERT(apply() < 0 && has(err, "curriculum_learning: min_difficulty and max_difficulty must be"));
		config("{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"Adam\"}}", 1);
		T_ASSERT(apply() < 0 && has(err, "optimizer: lmtk trains with Megatron's AdamW"));
		config("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"WarmupLR\"}}", 1);
		T_ASSERT(apply() < 0 && has(err, "scheduler: the learning-rate schedule comes from"));
		config("{\"train_batch_size\": 8, \"tensorboard\": {\"enabled\": true}}", 1);
		T_ASSERT(apply() < 0 && has(err, "tensorboard: use --tensorboard-dir"));
	}
	T_CASE("activation_checkpointing_keys_checked_and_the_ones_set_named") {
		config("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true}, \"activation_checkpointing\": {\"partition_activations\": true,"
		       " \"contiguous_memory_optimization\": false, \"cpu_checkpointing\": true,"
		       " \"number_checkpoints\": null, \"synchronize_checkpoint_boundary\": false,"
		       " \"profile\": true}}", 1);
		T_ASSERT(apply() == 0);
		T_ASSERT(strcmp(a.ds_act_keys, "partition_activations, cpu_checkpointing, profile") == 0);
		/* nothing to say when nothing is set, and nothing turned on: the flags recompute */
		config("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true}, \"activation_checkpointing\": {\"partition_activations\": false}}", 1);
		T_ASSERT(apply() == 0 && a.ds_act_keys[0] == 0 && !a.checkpoint_activations);
		/* without --deepspeed the whole file is named as inert instead */
		config("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true}, \"activation_checkpointing\": {\"profile\": true}}", 0);
		T_ASSERT(apply() == 0 && a.ds_act_keys[0] == 0 && has(a.noeffect_more, "deepspeed_config"));
		config("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true}, \"activation_checkpointing\": {\"partition_activation\": true}}", 1);
		T_ASSERT(apply() < 0 && has(err, "activation_checkpointing.partition_activation: unknown to DeepSpeed"));
		config("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true}, \"activation_checkpointing\": {\"profile\": 1}}", 1);
		T_ASSERT(apply() < 0 && has(err, "activation_checkpointing.profile: not true or false"));
		config("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true}, \"activation_checkpointing\": {\"number_checkpoints\": 0}}", 1);
		T_ASSERT(apply() < 0 && has(err, "number_checkpoints: not a positive integer or null"));
		config("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true}, \"activation_checkpointing\": true}", 1);
		T_ASSERT(apply() < 0 && has(err, "activation_checkpointing: not an object"));
	}
	T_CASE("enabled_false_block_accepted") {
		config("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true},"
		       " \"curriculum_learning\": {\"enabled\": false},"
		       " \"flops_profiler\": {\"enabled\": false, \"profile_step\": 1},"
		       " \"tensorboard\": {\"enabled\": false, \"output_path\": \"tb\"}}", 1);
		T_ASSERT(apply() == 0);
	}
	T_CASE("no_config_is_a_no_op") {
		config(DS13B, 1);
		a.deepspeed_config = NULL;
		double ils = a.initial_loss_scale;
		T_ASSERT(apply() == 0 && a.initial_loss_scale == ils && a.noeffect_more == NULL);
		T_ASSERT(dsconfig_check_batch(&a, &c, 16, 1, 512, err, sizeof err) == 0);
	}

	free(a.noeffect_more);
	unlink(path);
	rmdir(dir);
	T_DONE();
}
