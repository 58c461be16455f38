/* ckpt-merge-tp - merge the TP (and PP) shards of a checkpoint, re-split it, or export it to HF.
 *
 *   ckpt-merge-tp [--from lmtk|megatron-deepspeed|hf] [--input] DIR --output OUT [--force] [--optimizer]
 *                 [--target-tp N] [--target-pp N] [--pp-partition-method M]
 *                 [--padded-vocab-size N | --make-vocab-size-divisible-by N] [--average] [--tolerance X]
 *                 [--format hf [--dtype fp32|bf16] [--max-shard-size SIZE] [--tokenizer-files FILE...]]
 *                 [--format megatron-deepspeed [--dtype bf16|fp16] [--target-dp N]]
 *
 * This file parses options and wires the modules: shards.h opens and verifies the input (every
 * shard mapped, checksums, shapes) - or mds.h reads a Megatron-DeepSpeed checkpoint's .pt
 * files and presents it the same way, streamed, and hfimport.h a Hugging Face model directory -
 * and measures the drift of replicated tensors;
 * reshard.h writes another TP/PP layout, hfexport.h a transformers model directory, mdsw.h a
 * Megatron-DeepSpeed checkpoint (DeepSpeed's pipeline files, ZeRO partitions); outdir.h
 * makes OUT appear whole or not at all.  Exit: 0 done, 1 replicated tensors differ (refused
 * without --average), 2 usage or bad input, 3 I/O. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "msg.h"
#include "opt.h"
#include "units.h"
#include "ckpt-merge-tp/hf_int.h"
#include "ckpt-merge-tp/hfexport.h"
#include "ckpt-merge-tp/hfimport.h"
#include "ckpt/mds.h"
#include "ckpt/mdsw.h"
#include "outdir.h"
#include "progress.h"
#include "ckpt/stop.h"
#include "ckpt/reshard.h"
#include "ckpt/shards.h"
#include "xalloc.h"

enum { O_INPUT = 1000, O_OUTPUT, O_TP, O_PP, O_FORMAT, O_AVERAGE, O_TOLERANCE, O_DTYPE, O_MAXSHARD,
       O_TOKFILES, O_VOCAB, O_PARTITION, O_FROM, O_OPTIMIZER, O_FORCE, O_DIVISIBLE, O_DP };

struct cfg {
	const char *input, *output;
	int tp, pp, hf, average, bf16, padded_vocab, pp_embedding, mds, optimizer, force;
	int set_tp, set_pp, set_dtype, set_shard;
	int from_hf, divisible;   /* --from hf; --make-vocab-size-divisible-by (0: not given) */
	int mdsout, dp, fp16;   /* --format megatron-deepspeed: its DP, --dtype fp16 */
	double tolerance;
	unsigned long long max_shard;
	char **tokfiles;
	int ntokfiles;
};

static const struct opt opts[] = {
	{"input", O_INPUT, "DIR", "the checkpoint: a step directory, or a save directory (its latest); also as the one operand"},
	{"from", O_FROM, "FMT", "the input's format: lmtk (default), megatron-deepspeed (DeepSpeed pipeline, universal or plain Megatron .pt files) or hf (a Hugging Face model directory)"},
	{"make-vocab-size-divisible-by", O_DIVISIBLE, "N", "hf: pad the vocabulary to a multiple of N x the target TP, as train's flag (default 128)"},
	{"optimizer", O_OPTIMIZER, NULL, "megatron-deepspeed: carry Adam's moments and step (default: weights only, a fresh optimizer)"},
	{"output", O_OUTPUT, "OUT", "a new directory (or an empty one) for the result"},
	{"force", O_FORCE, NULL, "replace OUT if it is an earlier output (an export's config.json, a checkpoint's latest), atomically"},
	{"target-tp", O_TP, "N", "tensor-parallel ranks to write (default 1: merged)"},
	{"target-pp", O_PP, "N", "pipeline stages to write (default 1)"},
	{"pp-partition-method", O_PARTITION, "M", "layers per stage as train cuts them: 'type:transformer' (default) or 'type:transformer|embedding'"},
	{"format", O_FORMAT, "FMT", "lmtk (a checkpoint train can --load; default), hf, or megatron-deepspeed (DeepSpeed's pipeline checkpoint with ZeRO partitions)"},
	{"target-dp", O_DP, "N", "megatron-deepspeed: data-parallel ranks the ZeRO partitions are cut for (default: the run's)"},
	{"average", O_AVERAGE, NULL, "average replicated tensors whose copies differ, instead of refusing"},
	{"tolerance", O_TOLERANCE, "X", "largest |difference| between copies accepted (default 0: bit-exact)"},
	{"dtype", O_DTYPE, "T", "hf: fp32 (default) or bf16; megatron-deepspeed: bf16 or fp16 (default: the run's)"},
	{"max-shard-size", O_MAXSHARD, "SIZE", "hf: bytes per safetensors file (default 5GB = 5e9; 2GiB, 500MB)"},
	{"tokenizer-files", O_TOKFILES, "FILE...", "hf: also copy these files (default: the tokenizer files the manifest records, while unchanged)"},
	{"padded-vocab-size", O_VOCAB, "N", "lmtk: pad the vocabulary to N rows (default: Megatron's for the target TP)"},
	{0},
};

static int parse_int(const char *s, int lo, int hi, int *v)
{
	char *end;
	errno = 0;
	long x = strtol(s, &end, 10);
	if (errno || end == s || *end || x < lo || x > hi)
		return -1;
	*v = (int)x;
	return 0;
}

/* HF's sizes ("5GB" = 5e9, as save_pretrained reads them) and lmtk's binary ones ("2G", "2GiB"). */
static int parse_size(const char *s, unsigned long long *v)
{
	static const char *dec[] = {"KB", "MB", "GB", "TB"};
	char *end;
	size_t n = strlen(s);
	for (int i = 0; i < 4 && n > 2; i++)
		if (strcasecmp(s + n - 2, dec[i]) == 0 && (s[n - 3] >= '0' && s[n - 3] <= '9')) {
			double x = strtod(s, &end);
			if (end != s + n - 2 || x <= 0)
				return -1;
			for (int k = 0; k <= i; k++)
				x *= 1000;
			*v = (unsigned long long)x;
			return 0;
		}
	return units_size(s, v) < 0 || *v == 0 ? -1 : 0;
}

static int on_opt(void *ctx, int key, const char *arg, char *err, size_t errlen)
{
	struct cfg *c = ctx;
	switch (key) {
	case O_INPUT:
		if (c->input)
			return errf(err, errlen, "one input checkpoint at a time");
		c->input = strdup(arg);
		return 0;
	case O_FROM:
		if (strcmp(arg, "lmtk") && strcmp(arg, "megatron-deepspeed") && strcmp(arg, "hf"))
			return errf(err, errlen, "'%s' is not lmtk, megatron-deepspeed or hf", arg);
		c->mds = strcmp(arg, "megatron-deepspeed") == 0;
		c->from_hf = strcmp(arg, "hf") == 0;
		return 0;
	case O_DIVISIBLE:
		return parse_int(arg, 1, 1 << 20, &c->divisible) ? errf(err, errlen, "'%s' is not 1 to "
									 "1048576", arg) : 0;
	case O_OPTIMIZER:
		c->optimizer = 1;
		return 0;
	case O_FORCE:
		c->force = 1;
		return 0;
	case O_OUTPUT:
		c->output = strdup(arg);
		return 0;
	case O_TP:
		c->set_tp = 1;
		return parse_int(arg, 1, 1024, &c->tp) ? errf(err, errlen, "'%s' is not 1 to 1024", arg) : 0;
	case O_PP:
		c->set_pp = 1;
		return parse_int(arg, 1, 64, &c->pp) ? errf(err, errlen, "'%s' is not 1 to 64", arg) : 0;
	case O_FORMAT:
		if (strcmp(arg, "lmtk") && strcmp(arg, "hf") && strcmp(arg, "megatron-deepspeed"))
			return errf(err, errlen, "'%s' is not lmtk, hf or megatron-deepspeed", arg);
		c->hf = strcmp(arg, "hf") == 0;
		c->mdsout = strcmp(arg, "megatron-deepspeed") == 0;
		return 0;
	case O_DP:
		return parse_int(arg, 1, 1 << 20, &c->dp) ? errf(err, errlen, "'%s' is not 1 to 1048576",
								    arg) : 0;
	case O_AVERAGE:
		c->average = 1;
		return 0;
	case O_TOLERANCE: {
		char *end;
		c->tolerance = strtod(arg, &end);
		if (end == arg || *end || !(c->tolerance >= 0))
			return errf(err, errlen, "'%s' is not a number >= 0", arg);
		return 0;
	}
	case O_DTYPE:
		c->set_dtype = 1;
		c->bf16 = c->fp16 = 0;
		if (!strcmp(arg, "fp32") || !strcmp(arg, "float32"))
			c->bf16 = 0;
		else if (!strcmp(arg, "bf16") || !strcmp(arg, "bfloat16"))
			c->bf16 = 1;
		else if (!strcmp(arg, "fp16") || !strcmp(arg, "float16"))
			c->fp16 = 1;
		else
			return errf(err, errlen, "'%s' is not fp32, bf16 or fp16", arg);
		return 0;
	case O_MAXSHARD:
		c->set_shard = 1;
		return parse_size(arg, &c->max_shard) ? errf(err, errlen, "'%s' is not a size (5GB, 2GiB, "
							     "500MB, 1000000)", arg) : 0;
	case O_TOKFILES: {
		char **n = realloc(c->tokfiles, (c->ntokfiles + 1) * sizeof *n);
		if (!n)
			return xalloc_err(err, errlen, "the --tokenizer-files list", (c->ntokfiles + 1) * sizeof *n);
		c->tokfiles = n;
		c->tokfiles[c->ntokfiles++] = strdup(arg);
		return 0;
	}
	case O_PARTITION: {
		/* train's --pp-partition-method: the words in either order, in any case */
		char buf[128];
		int tr = 0, emb = 0, bad = strncasecmp(arg, "type:", 5) != 0 || strlen(arg) >= sizeof buf;
		snprintf(buf, sizeof buf, "%s", bad ? "" : arg + 5);
		for (char *save = NULL, *w = strtok_r(buf, "|", &save); w; w = strtok_r(NULL, "|", &save))
			if (strcasecmp(w, "transformer") == 0)
				tr = 1;
			else if (strcasecmp(w, "embedding") == 0)
				emb = 1;
			else
				bad = 1;
		if (bad || !tr)
			return errf(err, errlen, "'%s' is not 'type:transformer' or "
				    "'type:transformer|embedding'", arg);
		c->pp_embedding = emb;
		c->set_pp = c->set_pp ? c->set_pp : 2;   /* an lmtk-format option */
		return 0;
	}
	case O_VOCAB:
		return parse_int(arg, 1, 1 << 30, &c->padded_vocab) ? errf(err, errlen, "'%s' is not a "
									   "row count", arg) : 0;
	}
	return errf(err, errlen, "unhandled option");
}

/* --tokenizer-files takes every word up to the next option (opt.h: "FILE..."); the one
 * operand is the input. */
static void parse(const struct optspec *spec, struct cfg *c, int argc, char **argv)
{
	for (int k = opt_parse(spec, argc, argv); k < argc; k++) {
		if (c->input) {
			fprintf(stderr, "%s: unexpected argument '%s'\n", prog_name, argv[k]);
			opt_usage(spec, stderr);
			exit(EXIT_USAGE);
		}
		c->input = strdup(argv[k]);
	}
}

/* Is path `p` the directory `dir` or inside it (links resolved)? */
static int inside(const char *p, const char *dir)
{
	char rp[PATH_MAX], rd[PATH_MAX];
	if (!realpath(p, rp) || !realpath(dir, rd))
		return 0;
	size_t n = strlen(rd);
	return strncmp(rp, rd, n) == 0 && (rp[n] == 0 || rp[n] == '/' || n == 1);
}

static void usage_error(const struct optspec *spec, const char *msg)
{
	fprintf(stderr, "%s: %s\n", prog_name, msg);
	opt_usage(spec, stderr);
	exit(EXIT_USAGE);
}

/* Replicated tensors whose copies differ: reported on stderr; returns how many. */
static int report_drift(const struct sh_ckpt *in, double tolerance, int average)
{
	struct progress pg;
	int n, bad = 0;
	struct sh_drift *d = sh_compare(in, tolerance, &pg, &n);
	if (stop_requested())
		die(EXIT_FAILED, "interrupted");
	if (n < 0)
		die(EXIT_USAGE, "%s", sh_error(in));
	for (int i = 0; i < n; i++)
		if (d[i].ndiffer) {
			bad++;
			warn("%s %s: copies differ by up to %.8e (%s differ%s from tp00%s)%s",
			     in->m.t[d[i].t].name, lt_group_name[d[i].g], d[i].maxdiff, d[i].differ,
			     d[i].ndiffer > 1 ? "" : "s", in->pp > 1 ? "/pp000" : "",
			     average ? ": averaged" : "");
		}
	free(d);
	return bad;
}

int main(int argc, char **argv)
{
	static struct cfg c = {.tp = 1, .pp = 1, .max_shard = 5000000000ull};
	struct optgroup groups[] = {{opts, on_opt, &c, NULL}, {0}};
	struct optspec spec = {
		"[--from lmtk|megatron-deepspeed|hf] [--input] DIR --output OUT [--force] [--optimizer]\n"
		"       [--target-tp N] [--target-pp N] [--pp-partition-method M] [--padded-vocab-size N]\n"
		"       [--make-vocab-size-divisible-by N]\n"
		"       [--average] [--tolerance X]\n"
		"       [--format hf [--dtype fp32|bf16] [--max-shard-size SIZE] [--tokenizer-files FILE...]]\n"
		"       [--format megatron-deepspeed [--dtype bf16|fp16] [--target-dp N]]",
		"Merge the tensor-parallel (and pipeline) shards of a train checkpoint - fp32 master\n"
		"weights and both Adam moments - and write it in another layout (default TP=1 PP=1) as a\n"
		"checkpoint that train --load resumes from, or (--format hf) as a Hugging Face\n"
		"GPT2LMHeadModel / BloomForCausalLM / MegatronBertForPreTraining (a BERT;\n"
		"MegatronBertForMaskedLM without the binary head) directory: model.safetensors,\n"
		"config.json, tokenizer files.  Every shard is verified first (checksums, shapes);\n"
		"replicated tensors (layer norms, row-parallel biases, position embeddings, BERT's\n"
		"replicated heads) must be equal on every rank, else the merge is refused, naming them,\n"
		"unless --average.  OUT appears complete or not at all; --force replaces an earlier\n"
		"output there in one step.\n"
		"--from megatron-deepspeed reads a Megatron-DeepSpeed checkpoint instead (DeepSpeed's\n"
		"pipeline files with bf16 or fp16 ZeRO partitions or without ZeRO, DeepSpeed's\n"
		"universal checkpoint, or plain Megatron's model_optim_rng.pt): the weights from its\n"
		"fp32 masters, and with --optimizer Adam's moments and step, un-partitioned, and the\n"
		"fp16 loss scaler; its iteration, consumed samples and schedule.  Without optimizer\n"
		"state lmtk reads, the model weights alone, saying what was left out.\n"
		"--from hf reads a Hugging Face GPT2LMHeadModel, BloomForCausalLM or MegatronBert\n"
		"directory (config.json; model.safetensors, sharded with its index, or\n"
		"pytorch_model.bin) into a checkpoint at iteration 0 with a fresh optimizer, the model's\n"
		"flags and tokenizer recorded, the vocabulary padded as Megatron pads it: train --load\n"
		"OUT --finetune continues from it.  Every number and shape is checked against\n"
		"config.json; a link out of DIR is refused.\n"
		"--format megatron-deepspeed writes what Megatron-DeepSpeed resumes from: OUT/latest and\n"
		"OUT/global_stepN with DeepSpeed's layer_XX-model_TT-model_states.pt (the weights in the\n"
		"run's bf16 or fp16), mp_rank_MM_model_states.pt (args, iteration, consumed samples,\n"
		"schedule, RNG states) and the optimizer as ZeRO partitions for --target-dp ranks:\n"
		"bf16_zero_pp_rank_D_mp_rank_MM_optim_states.pt (bf16) or zero_pp_rank_D_... (fp16,\n"
		"ZeRO stage 1, with the loss scaler), every one a torch zip pickle.\n"
		"Exit 0 done, 1 replicated tensors differ, 2 usage or bad input, 3 I/O error.",
		groups, NULL, 0};
	char err[8192], step[64];
	int rc;

	msg_init(argv[0]);
	parse(&spec, &c, argc, argv);
	if (!c.input || !c.output)
		usage_error(&spec, c.input ? "--output is required" : "which checkpoint? give DIR (or --input DIR)");
	if (c.optimizer && !c.mds)
		usage_error(&spec, "--optimizer goes with --from megatron-deepspeed (an lmtk checkpoint's "
			    "optimizer state is always carried)");
	if (c.optimizer && c.hf)
		usage_error(&spec, "--optimizer goes with --format lmtk: an export holds no optimizer state");
	if (c.mdsout && c.set_dtype && !c.bf16 && !c.fp16)
		usage_error(&spec, "--format megatron-deepspeed: --dtype is bf16 or fp16 (DeepSpeed's "
			    "BF16_Optimizer or fp16 ZeRO); an fp32 run has neither");
	if (!c.mdsout && (c.fp16 || c.dp))
		usage_error(&spec, c.dp ? "--target-dp goes with --format megatron-deepspeed"
			    : "--dtype fp16 goes with --format megatron-deepspeed");
	if (c.hf && (c.set_tp || c.set_pp || c.padded_vocab))
		usage_error(&spec, "--target-tp, --target-pp, --pp-partition-method and --padded-vocab-size "
			    "go with --format lmtk");
	if (!c.hf && ((c.set_dtype && !c.mdsout) || c.set_shard || c.ntokfiles))
		usage_error(&spec, "--dtype, --max-shard-size and --tokenizer-files go with --format hf"
			    " (--dtype also with megatron-deepspeed)");
	if (c.divisible && !c.from_hf)
		usage_error(&spec, "--make-vocab-size-divisible-by goes with --from hf (the padding of "
			    "another input is its own, or --padded-vocab-size)");
	if (c.divisible && c.padded_vocab)
		usage_error(&spec, "--make-vocab-size-divisible-by or --padded-vocab-size, not both");
	/* an output that is there already is refused before any reading (and again when written) */
	const char *mark = !c.force ? NULL : c.hf ? "config.json" : "latest";
	if ((rc = od_check(c.output, mark, err, sizeof err)))
		die(rc, "%s%s", err, !c.force && access(c.output, F_OK) == 0
		    ? " (or --force to replace it)" : "");
	stop_catch();
	double t0 = units_now();   /* the summary's time: verifying, comparing, writing */

	struct sh_ckpt in;
	struct progress pg;
	struct mds *md = NULL;
	const char *hf_in = NULL;   /* --from hf: the class read */
	/* the model's shape first: an export no class can hold, or a layout that does not fit the
	 * model, is refused before any reading */
	if (c.from_hf) {
		if ((rc = hfi_open(&in, c.input, c.divisible ? c.divisible : 128, &hf_in, err,
				   sizeof err)))
			die(rc, "%s", err);
	} else if (c.mds) {
		if ((rc = mds_open(&md, c.input, err, sizeof err)))
			die(rc, "%s", err);
		if (c.optimizer && !md->has_optimizer)
			die(EXIT_USAGE, "%s: no optimizer state lmtk reads (%s): drop --optimizer to "
			    "convert the weights", md->dir, md->left_out);
		if (!md->has_optimizer)
			warn("warning: %s: weights only, its %s model weights: left out the fp32 master "
			     "weights and Adam's state (%s)", md->dir, md->weights_dtype, md->left_out);
		int bufs[LT_GROUPS] = {md->has_optimizer ? MDS_MASTER : MDS_BF16,
				       c.optimizer ? MDS_EXP_AVG : MDS_ZERO,
				       c.optimizer ? MDS_EXP_AVG_SQ : MDS_ZERO};
		if (mds_view(&in, md, bufs, 1, err, sizeof err) < 0)
			die(EXIT_FAILED, "%s", err);
	} else if ((rc = sh_open_manifest(&in, c.input, err, sizeof err))) {
		if (mds_detect(c.input))
			die(rc, "%s; %s is a Megatron-DeepSpeed checkpoint: add --from megatron-deepspeed",
			    err, c.input);
		die(rc, "%s", err);
	}
	enum mdsw_precision prec = c.fp16 ? MDSW_FP16 : MDSW_BF16;
	if (c.mdsout && !c.set_dtype && mdsw_precision(&in, &prec, err, sizeof err) < 0)
		die(EXIT_USAGE, "%s", err);
	if (c.hf && !hf_class(&in, err, sizeof err))
		die(EXIT_USAGE, "%s%s: %s", in.dir, md ? "" : "/manifest.json", err);
	struct rs_target tg = {c.tp, c.pp, c.padded_vocab, c.average, c.pp_embedding};
	if (!tg.padded_vocab && hf_in)   /* Megatron's for the target TP */
		tg.padded_vocab = lt_padded_vocab(in.m.vocab, c.divisible ? c.divisible : 128, c.tp);
	if (!tg.padded_vocab)   /* Megatron's padding for the target TP, if it was for the input's */
		tg.padded_vocab = in.m.padded_vocab == lt_megatron_padded_vocab(in.m.vocab, in.tp)
					  ? lt_megatron_padded_vocab(in.m.vocab, c.tp)
					  : in.m.padded_vocab;
	if (tg.padded_vocab < in.m.vocab)
		die(EXIT_USAGE, "--padded-vocab-size %d is below the vocabulary's %d", tg.padded_vocab,
		    in.m.vocab);
	if (!c.hf) {
		struct lt_model shape = in.m;   /* the scalars lt_check_tp reads */
		shape.padded_vocab = tg.padded_vocab;
		if (lt_check_tp(&shape, c.tp, err, sizeof err) < 0)
			die(EXIT_USAGE, "cannot write TP=%d: %s%s", c.tp, err, shape.padded_vocab % c.tp
			    ? "; give --padded-vocab-size" : "");
		if (c.pp > in.m.layers)
			die(EXIT_USAGE, "cannot write PP=%d: the model has %d layers", c.pp, in.m.layers);
		if (c.pp > 1 && in.m.type == LT_T5)
			die(EXIT_USAGE, "cannot write PP=%d: a T5 is not split over pipeline stages "
			    "(train trains it with --pipeline-model-parallel-size 1); re-split its TP "
			    "with --target-tp", c.pp);
	}
	if (!md && !hf_in) {
		sh_close(&in);
		if ((rc = sh_open(&in, c.input, &pg, err, sizeof err)))
			die(rc, "%s", err);
	}

	int bad = report_drift(&in, c.tolerance, c.average);
	if (bad && !c.average)
		die(EXIT_FINDING, "%s: %d replicated tensor buffer%s differ%s across ranks%s: not merged "
		    "(repair with ckpt-sync-ln --fix, or average them here with --average)", in.dir, bad,
		    bad > 1 ? "s" : "", bad > 1 ? "" : "s",
		    c.tolerance > 0 ? " beyond --tolerance" : "");

	struct od od;
	if (c.force && inside(in.dir, c.output))
		die(EXIT_USAGE, "--force: the input %s lies in %s, which would be replaced; give "
		    "another --output", in.dir, c.output);
	if ((rc = od_begin_replace(&od, c.output, mark, err, sizeof err)))
		die(rc, "%s%s", err, rc == EXIT_USAGE && !c.force && access(c.output, F_OK) == 0
		    ? " (or --force to replace it)" : "");
	snprintf(step, sizeof step, "global_step%lld", (long long)in.iteration);
	if (c.hf) {
		struct hf_opts ho = {c.bf16, c.max_shard, c.tokfiles, c.ntokfiles, c.average};
		rc = hf_export(&in, &ho, od.tmp, &pg, err, sizeof err);
	} else if (c.mdsout) {
		struct mdsw_target mt = {tg.tp, tg.pp, c.dp ? c.dp : mdsw_run_dp(&in), tg.padded_vocab,
					 tg.average, tg.pp_embedding, prec};
		c.dp = mt.dp;
		rc = mdsw_write(&in, &mt, od.tmp, &pg, err, sizeof err);
	} else {
		rc = rs_write_checkpoint(&in, &tg, od.tmp, &pg, err, sizeof err);
	}
	if (rc) {
		od_abort(&od);
		die(rc, "%s; nothing written to %s", err, c.output);
	}
	if ((rc = od_commit(&od, err, sizeof err)))
		die(rc, "%s", err);

	char size[32], rate[32];
	double dt = units_now() - t0;
	units_fmt_size(in.bytes, size, sizeof size);
	units_fmt_size(dt > 0 ? (unsigned long long)(in.bytes / dt) : 0, rate, sizeof rate);
	if (c.hf) {
		char out[32];
		units_fmt_size(pg.total, out, sizeof out);   /* the export's tensors */
		warn("%s (TP=%d PP=%d, %s, iteration %lld) -> %s: %s, %s %s, in %.1f s", in.dir, in.tp,
		     in.pp, size, (long long)in.iteration, od.final, hf_class(&in, err, sizeof err), out,
		     c.bf16 ? "bf16" : "fp32", dt);
		if (in.m.type == LT_BERT && strcmp(hf_bert_hidden_act(&in), "gelu") == 0)
			warn("note: MegatronBert has one GeLU for the MLPs and the LM head: the export's "
			     "is the LM head's (erf, \"gelu\"); this model's MLPs used the tanh GeLU, "
			     "so HF's logits differ slightly from train's (about 1e-4 relative; "
			     "--openai-gelu models export exactly)");
	} else if (hf_in) {
		warn("%s (Hugging Face %s, %s) -> %s/%s (TP=%d PP=%d, vocabulary %d padded to %d) in "
		     "%.1f s (%s/s): iteration 0, a fresh optimizer; train --load it with --finetune",
		     in.dir, hf_in, size, od.final, step, tg.tp, tg.pp, in.m.vocab, tg.padded_vocab, dt,
		     rate);
	} else if (c.mdsout) {
		warn("%s (TP=%d PP=%d, %s, iteration %lld) -> %s/%s: Megatron-DeepSpeed, TP=%d PP=%d "
		     "DP=%d, %s in %.1f s (%s/s)", in.dir, in.tp, in.pp, size, (long long)in.iteration,
		     od.final, step, tg.tp, tg.pp, c.dp, prec == MDSW_FP16 ?
		     "fp16 weights, fp16 ZeRO-1 partitions with the loss scaler," :
		     "bf16 weights, bf16 ZeRO partitions (BF16_Optimizer),", dt, rate);
	} else if (md) {
		warn("%s (Megatron-DeepSpeed TP=%d PP=%d DP=%d, %s, iteration %lld, %lld samples) -> %s/%s "
		     "(TP=%d PP=%d%s) in %.1f s (%s/s): %s", in.dir, md->tp, md->pp, md->dp, size,
		     (long long)md->iteration, (long long)md->consumed_samples, od.final, step, tg.tp,
		     tg.pp, bad ? ", replicated tensors averaged" : "", dt, rate,
		     c.optimizer ? "fp32 masters, Adam's moments and step" :
		     md->has_optimizer ? "fp32 masters; Adam starts afresh (--optimizer carries its state)"
		     : "model weights only; Adam starts afresh");
	} else {
		warn("%s (TP=%d PP=%d, %s) -> %s/%s (TP=%d PP=%d%s) in %.1f s (%s/s)", in.dir, in.tp, in.pp,
		     size, od.final, step, tg.tp, tg.pp, bad ? ", replicated tensors averaged" : "", dt,
		     rate);
	}
	sh_close(&in);
	mds_close(md);
	return EXIT_OK;
}
