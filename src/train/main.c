/* train - GPT/BLOOM and BERT pretraining with Megatron-DeepSpeed's flags.
 *
 *   train MEGATRON-DEEPSPEED FLAGS... [--device cpu|cuda|auto] [--threads N]
 *   train --dry-run [--format text|json] [--nodes N --gpus-per-node G] FLAGS...
 *
 * The flags of a BigScience slurm script work unchanged after the launcher line (args.h: the
 * abbreviations, multi-value flags and the flags it does not act on).  plan.c resolves and checks
 * them - every violated constraint reported at once, naming its flags - and then either prints
 * the plan (--dry-run: parameters, ramp-up, schedule, memory, checkpoint sizes, days; report.h)
 * or trains (run.h: the model of model.h on the backend of ops.h, Megatron's data order, log
 * line and TensorBoard tags, checkpoints that survive kill -9, signals and the kill switch).
 * Exit: 0 a valid plan / training done or stopped on purpose, 2 usage, a violated constraint
 * or bad data, 3 I/O (output, checkpoints) or a run that cannot go on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "opt.h"
#include "train/args.h"
#include "train/parallel/dist.h"
#include "train/dsconfig.h"
#include "train/plan/gpumodel.h"
#include "train/plan/plan.h"
#include "train/plan/report.h"
#include "train/plan/diag.h"
#include "train/run/run.h"
#include "xalloc.h"

int main(int argc, char **argv)
{
	static struct train_args a;
	static struct plan p;
	struct dsconfig ds;
	struct optgroup groups[3];
	char *about, *noeffect, *refused, err[512];
	int first, rc;

	msg_init(argv[0]);
	args_init(&a);
	noeffect = args_other_list(ARG_NOEFFECT, 80, 2);
	refused = args_other_list(ARG_REFUSED, 80, 2);
	if (asprintf(&about,
		     "Train a GPT-2, BLOOM, BERT (--model-type bert) or T5 (--model-type t5) model with\n"
		     "Megatron-DeepSpeed's flags, data order, log line, TensorBoard tags and checkpoint\n"
		     "semantics, on the CPU or a GPU, in one process or as DP x TP x PP ranks under\n"
		     "srun/mpirun; or, with --dry-run, plan the run instead: parameters, the batch-size\n"
		     "ramp-up, the schedule, memory per GPU, checkpoint sizes and days.  Every violated\n"
		     "constraint is an error naming its flags.  SIGUSR1/SIGTERM or the kill switch:\n"
		     "finish the iteration, save, exit 0.\n"
		     "Exit 0 done or stopped on purpose, 2 usage or bad data, 3 I/O or a failed run.\n\n"
		     "Multi-value flags take their values after one flag (--rampup-batch-size 16 16\n"
		     "9_765_625); numbers may use '_'; flags may be abbreviated to a unique prefix.\n\n"
		     "Accepted, no effect here (named in a start-up line; train(1) says why):\n  %s.\n\n"
		     "Refused, exit 2 (they would change the run and lmtk does not do them; the\n"
		     "message says what to use instead; --dry-run plans anyway and warns):\n  %s.",
		     noeffect, refused) < 0)
		xalloc_die("the --help text", 0);
	struct optspec spec = {
		"MEGATRON-FLAGS... [--device cpu|cuda|auto] [--threads N] [--spike-policy P]\n"
		"       train --dry-run [--format text|json] [--nodes N --gpus-per-node G] MEGATRON-FLAGS...",
		about, groups, NULL, 1};

	args_groups(&a, groups);
	first = opt_parse(&spec, argc, argv);
	if (first < argc)
		die(EXIT_USAGE, "unexpected argument '%s'; see --help", argv[first]);
	if (a.gpu_model && !gpumodel_device(a.gpu_model))
		die(EXIT_USAGE, "--gpu-model: '%s' is not one of %s", a.gpu_model, gpumodel_device_keys());
	for (int i = 0; i < a.nrefused; i++)
		warn("%s--%s: %s", a.dry_run ? "warning: training would refuse " : "",
		     a.refused[i]->name, a.refused[i]->why);
	if (a.nrefused && !a.dry_run)
		die(EXIT_USAGE, "%d flag%s refused: nothing trained (see train(1), FLAGS NOT ACTED ON)",
		    a.nrefused, a.nrefused > 1 ? "s" : "");
	if (!a.dry_run) {
		/* a training run: one process, unless launched as several ranks */
		if (a.nodes < 0) {
			a.nodes = 1;
			a.nodes_from = "this process";
		}
		if (a.gpus_per_node < 0) {   /* the ranks the launcher started are the world */
			const char *from = NULL;
			a.gpus_per_node = dist_launched_world(&from);
			a.gpus_from = from ? from : "this process";
		}
	} else if (args_from_slurm(&a, err, sizeof err) < 0) {
		die(EXIT_USAGE, "%s", err);
	}

	if (dsconfig_apply(&a, &ds, err, sizeof err) < 0)
		die(EXIT_USAGE, "%s", err);
	/* Megatron-DeepSpeed: --checkpoint-num-layers sizes the chunks of --checkpoint-activations;
	 * --deepspeed-activation-checkpointing swaps in DeepSpeed's checkpoint function, only under
	 * --deepspeed, and checkpoints nothing by itself */
	if (a.checkpoint_num_layers > 0 && !a.checkpoint_activations)
		args_noeffect_add(&a, "checkpoint-num-layers", "without --checkpoint-activations no layer "
				  "is checkpointed");
	/* the bucket size cuts only the overlapped sums (buckets.c); otherwise the gradients are
	 * reduced in one call after the backward (under --deepspeed dsconfig.c says it for the file) */
	if (a.ddp_bucket_size > 0 && !a.deepspeed && !a.overlap_grad_reduce)
		args_noeffect_add(&a, "ddp-bucket-size", "without --overlap-grad-reduce the DP gradients "
				  "are reduced in one call after the backward");
	if (a.ds_activation_checkpointing && !a.deepspeed)
		args_noeffect_add(&a, "deepspeed-activation-checkpointing", "without --deepspeed "
				  "Megatron-DeepSpeed does not configure DeepSpeed's checkpointing");
	else if (a.ds_activation_checkpointing && !a.checkpoint_activations)
		args_noeffect_add(&a, "deepspeed-activation-checkpointing", "without "
				  "--checkpoint-activations no layer is checkpointed: it only chooses "
				  "DeepSpeed's checkpoint function");
	args_name_inert(&a);
	rc = plan_make(&p, &a);
	if (p.nerrors == 0 && dsconfig_check_batch(&a, &ds, p.dp, p.mbs, p.gbs, err, sizeof err) < 0)
		plan_error(&p, "%s", err);
	if (!a.dry_run) {
		for (int i = 0; i < p.nerrors; i++)
			warn("%s", p.errors[i]);
		if (p.nerrors)
			die(EXIT_USAGE, "%d error%s in the flags: nothing trained (train --dry-run shows "
			    "the whole plan)", p.nerrors, p.nerrors > 1 ? "s" : "");
		size_t len = 0;
		for (int i = 0; i < argc; i++)
			len += strlen(argv[i]) + 1;
		char *cmd = calloc(len + 1, 1);
		for (int i = 0; cmd && i < argc; i++) {
			strcat(cmd, argv[i]);
			strcat(cmd, i + 1 < argc ? " " : "");
		}
		rc = run_train(&a, &p, cmd ? cmd : "");
		free(cmd);
		plan_free(&p);
		free(about);
		free(noeffect);
		free(refused);
		return rc;
	}
	if (rc == 0) {
		if (a.format == FMT_JSON ? report_json(&p, stdout) < 0 : (report_text(&p, stdout), 0))
			die(EXIT_FAILED, "could not write the plan");
	} else if (a.format == FMT_JSON) {
		report_json(&p, stdout);
	}
	if (fflush(stdout) != 0 || ferror(stdout))
		die(EXIT_FAILED, "writing the plan: output error");
	for (int i = 0; i < p.nwarnings; i++)
		warn("warning: %s", p.warnings[i]);
	char *nofx = args_noeffect_line(&a);
	if (nofx)
		warn("accepted, no effect here: %s", nofx);
	free(nofx);
	for (int i = 0; i < p.nerrors; i++)
		warn("%s", p.errors[i]);
	if (p.nerrors) {
		warn("%d error%s%s", p.nerrors, p.nerrors > 1 ? "s" : "",
		     rc == 0 ? ": the plan above cannot run as it is" : ": nothing to plan");
		plan_free(&p);
		return EXIT_USAGE;
	}
	plan_free(&p);
	free(about);
	free(noeffect);
	free(refused);
	return EXIT_OK;
}
