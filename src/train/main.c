/* train - GPT/BLOOM pretraining with Megatron-DeepSpeed's flags.  This release plans only.
 *
 *   train --dry-run [--format text|json] [--nodes N --gpus-per-node G] [--assumed-tflops T]
 *         MEGATRON-DEEPSPEED FLAGS...
 *
 * --dry-run takes the flags of the real run (a BigScience slurm script's argument list works
 * as it is: see args.h for abbreviations, multi-value flags and the flags that are ignored) and
 * prints the arithmetic the runs' READMEs did by hand - parameters, the ramp-up table, the
 * schedule in samples, iterations and tokens, memory per GPU, checkpoint sizes, days - without
 * allocating the model or reading data beyond the index headers (plan.h, report.h).  Every
 * violated constraint is reported, naming its flags.  Without --dry-run it refuses: training
 * itself arrives with the next release, and nothing here pretends to train.
 * Exit: 0 a valid plan, 2 usage or a violated constraint (the plan is still printed when it can
 * be computed), 3 the output could not be written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "opt.h"
#include "train/args.h"
#include "train/plan.h"
#include "train/report.h"
#include "train/run.h"

int main(int argc, char **argv)
{
	static struct train_args a;
	static struct plan p;
	struct optgroup groups[] = {{args_opts, args_opt, &a}, {0}};
	char *about, *ignored, err[512];
	int ac, nignored, first, rc;
	char **av;

	msg_init(argv[0]);
	args_init(&a);
	ignored = args_ignored_list(80, 0);
	if (asprintf(&about,
		     "Plan a Megatron-DeepSpeed pretraining run from its own flags: parameters, the\n"
		     "batch-size ramp-up, the schedule in samples/iterations/tokens, memory per GPU,\n"
		     "checkpoint sizes and days, computed instead of done by hand.  Every violated\n"
		     "constraint is an error naming its flags.  This release plans only (--dry-run);\n"
		     "training arrives with the next one.  Exit 0 valid plan, 2 usage or violated\n"
		     "constraint, 3 output error.\n\n"
		     "Multi-value flags take their values after one flag (--rampup-batch-size 16 16\n"
		     "9_765_625); numbers may use '_'; flags may be abbreviated to a unique prefix.\n\n"
		     "Accepted and ignored, as they do not change a plan:\n%s.", ignored) < 0)
		die(EXIT_FAILED, "out of memory");
	struct optspec spec = {
		"--dry-run [--format text|json] [--nodes N --gpus-per-node G] [--assumed-tflops T]\n"
		"       [--assumed-params N] [--gpu-memory GIB] MEGATRON-FLAGS...",
		about, groups};

	av = args_normalize(argc, argv, &ac, &nignored);
	first = opt_parse(&spec, ac, av);
	if (first < ac)
		die(EXIT_USAGE, "unexpected argument '%s'; see --help", av[first]);
	if (!a.dry_run) {
		/* a training run: one process, unless launched as several ranks (not in this build) */
		if (a.nodes < 0) {
			a.nodes = 1;
			a.nodes_from = "this process";
		}
		if (a.gpus_per_node < 0) {
			a.gpus_per_node = 1;
			a.gpus_from = "this process";
		}
	} else if (args_from_slurm(&a, err, sizeof err) < 0) {
		die(EXIT_USAGE, "%s", err);
	}

	rc = plan_make(&p, &a);
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
		free(ignored);
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
	free(ignored);
	return EXIT_OK;
}
