/* ckpt-sync-ln - find, measure and repair replicated parameters that drifted apart across ranks.
 *
 *   ckpt-sync-ln DIR[/global_stepN] [--check | --fix] [--tolerance X] [--output OUT | --in-place]
 *   ckpt-sync-ln --verify DIR[/global_stepN] [--json]
 *   ckpt-sync-ln --from megatron-deepspeed DIR [--check] [--tolerance X] [--json]
 *
 * Layer norms and row-parallel biases (and BERT's replicated heads: layout.h) are whole on every
 * TP rank and must stay equal; in the
 * 104B and 176B runs they did not (shared/spec/megatron-train.md, "Layer norms drifting apart
 * across TP ranks").  --check prints, for every replicated tensor and each of its three buffers
 * (fp32 master weights, exp_avg, exp_avg_sq), the largest difference between the ranks' copies
 * and which ranks differ; --fix writes the checkpoint back with every replicated tensor replaced
 * by the mean of its copies - the all-reduce AVG over the TP group that repaired the 176B run, of
 * the master weights and both moments.  (The bf16 working weights are not in a checkpoint: a
 * resumed run rounds them from the master weights, so they follow.)
 *
 * A Megatron-DeepSpeed checkpoint (the 176B's desync was found in exactly those files) is read
 * through mds.h: its fp32 masters and moments, and its bf16 model weights - the layer files
 * hold a copy per TP rank too - are compared the same way; repairing one means converting it
 * (ckpt-merge-tp --from megatron-deepspeed --optimizer), then --fix.
 *
 * --verify checks only that every file is what the manifest recorded (checksums.h): the check a
 * backup makes of its copy (slurm/ckpt-backup.slurm), for any lmtk checkpoint.
 *
 * --json (with --check or --verify) prints the table or the file list and the verdict as one
 * object on stdout instead (jsonout.h), for a script such as that backup; --fix reports in words.
 *
 * The checkpoint library (src/ckpt: shards.h verifies and compares, reshard.h writes the same
 * layout back, outdir.h publishes, mds.h reads Megatron-DeepSpeed's files).  Exit: 0 all
 * copies equal (or repaired; --verify: every file matches), 1 copies differ beyond the tolerance
 * (--verify: a file does not match), 2 usage or bad input, 3 I/O. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"
#include "fsx.h"
#include "jsonout.h"
#include "msg.h"
#include "opt.h"
#include "units.h"
#include "ckpt/checksums.h"
#include "ckpt/mds.h"
#include "outdir.h"
#include "progress.h"
#include "ckpt/stop.h"
#include "ckpt/reshard.h"
#include "ckpt/save.h"
#include "ckpt/shards.h"
#include "xalloc.h"

enum { O_CHECK = 1000, O_FIX, O_TOLERANCE, O_OUTPUT, O_INPLACE, O_VERIFY, O_FROM, O_JSON };

struct cfg {
	int fix, check, in_place, verify, tolerance_set, mds, json;
	double tolerance;
	const char *output;
};

static const struct opt opts[] = {
	{"check", O_CHECK, NULL, "compare the copies and print the table (the default)"},
	{"fix", O_FIX, NULL, "replace every replicated tensor by the mean of its copies"},
	{"tolerance", O_TOLERANCE, "X", "largest |difference| that counts as equal (default 0: bit-exact)"},
	{"output", O_OUTPUT, "OUT", "--fix: write the repaired checkpoint to the new directory OUT"},
	{"in-place", O_INPLACE, NULL, "--fix: replace the step directory where it is"},
	{"verify", O_VERIFY, NULL, "only check every file's size and CRC-32C against the manifest"},
	{"from", O_FROM, "FMT", "the checkpoint's format: lmtk (default) or megatron-deepspeed (--check only)"},
	{"json", O_JSON, NULL, "--check, --verify: print the findings and the verdict as one JSON object (ckpt-sync-ln(1), JSON OUTPUT)"},
	{0},
};

static int on_opt(void *ctx, int key, const char *arg, char *err, size_t errlen)
{
	struct cfg *c = ctx;
	switch (key) {
	case O_CHECK:
		c->check = 1;
		return 0;
	case O_FIX:
		c->fix = 1;
		return 0;
	case O_VERIFY:
		c->verify = 1;
		return 0;
	case O_JSON:
		c->json = 1;
		return 0;
	case O_TOLERANCE: {
		c->tolerance_set = 1;
		char *end;
		c->tolerance = strtod(arg, &end);
		if (end == arg || *end || !(c->tolerance >= 0))
			return errf(err, errlen, "'%s' is not a number >= 0", arg);
		return 0;
	}
	case O_OUTPUT:
		c->output = strdup(arg);
		return 0;
	case O_INPLACE:
		c->in_place = 1;
		return 0;
	case O_FROM:
		if (strcmp(arg, "lmtk") && strcmp(arg, "megatron-deepspeed"))
			return errf(err, errlen, "'%s' is not lmtk or megatron-deepspeed", arg);
		c->mds = strcmp(arg, "megatron-deepspeed") == 0;
		return 0;
	}
	return errf(err, errlen, "unhandled option");
}

static void usage_error(const struct optspec *spec, const char *msg)
{
	fprintf(stderr, "%s: %s\n", prog_name, msg);
	opt_usage(spec, stderr);
	exit(EXIT_USAGE);
}

/* --verify --json: the files and the verdict */
static json_t *verify_json(const struct cs_result *r, double seconds)
{
	json_t *o = json_object(), *files = json_array();
	json_object_set_new(o, "dir", jsonout_str(r->dir));
	json_object_set_new(o, "ok", json_boolean(r->bad == 0));
	json_object_set_new(o, "file_count", json_integer(r->n));
	json_object_set_new(o, "bad_files", json_integer(r->bad));
	json_object_set_new(o, "bytes", json_integer((json_int_t)r->bytes));
	json_object_set_new(o, "seconds", json_real(seconds));
	for (int i = 0; i < r->n; i++) {
		const struct cs_file *f = &r->files[i];
		json_t *e = json_object();
		json_object_set_new(e, "name", jsonout_str(f->name));
		json_object_set_new(e, "bytes", json_integer((json_int_t)f->bytes));
		json_object_set_new(e, "crc32c", *f->crc ? json_string(f->crc) : json_null());
		json_object_set_new(e, "ok", json_boolean(f->ok));
		json_object_set_new(e, "problem", f->ok ? json_null() : jsonout_str(f->why));
		json_array_append_new(files, e);
	}
	json_object_set_new(o, "files", files);
	return o;
}

/* --verify: one line per file, then the verdict. */
static int verify(const char *dir, int json)
{
	struct cs_result r;
	struct progress pg;
	char err[8192];
	double t0 = units_now();
	int rc = cs_verify_step(dir, &pg, &r, err, sizeof err);
	if (rc != EXIT_OK && rc != EXIT_FINDING) {
		cs_free(&r);
		die(rc, "%s", err);
	}
	if (json) {
		for (int i = 0; i < r.n; i++)
			if (!r.files[i].ok)
				warn("%s/%s: %s", r.dir, r.files[i].name, r.files[i].why);
		if (jsonout_end(verify_json(&r, units_now() - t0)) < 0)
			rc = EXIT_FAILED;
		cs_free(&r);
		return rc;
	}
	int w = 4;
	for (int i = 0; i < r.n; i++)
		w = (int)strlen(r.files[i].name) > w ? (int)strlen(r.files[i].name) : w;
	printf("%-*s  %14s  %-8s  %s\n", w, "file", "bytes", "crc32c", "status");
	for (int i = 0; i < r.n; i++) {
		const struct cs_file *f = &r.files[i];
		printf("%-*s  %14llu  %-8s  %s\n", w, f->name, (unsigned long long)f->bytes,
		       *f->crc ? f->crc : "-", f->ok ? "ok" : "BAD");
	}
	if (r.bad) {
		for (int i = 0; i < r.n; i++)
			if (!r.files[i].ok)
				warn("%s/%s: %s", r.dir, r.files[i].name, r.files[i].why);
		printf("%s: %d of %d files do not match the manifest\n", r.dir, r.bad, r.n);
	} else {
		printf("%s: every file matches the manifest (%d file%s, %llu bytes, CRC-32C) in %.1f s\n",
		       r.dir, r.n, r.n == 1 ? "" : "s", (unsigned long long)r.bytes, units_now() - t0);
	}
	cs_free(&r);
	return rc;
}

/* One line of the table: a row of sh_compare() and the name of its buffer. */
struct row {
	struct sh_drift d;
	const char *kind;
};

/* The rows of one comparison appended to *rows; keep: which groups count (a bf16 view has only
 * its weights), kinds: their names. */
static void add_rows(const struct sh_ckpt *in, double tolerance, struct progress *pg, int keep,
		     const char *const *kinds, struct row **rows, int *nrows)
{
	int n;
	struct sh_drift *d = sh_compare(in, tolerance, pg, &n);
	if (stop_requested())
		die(EXIT_FAILED, "interrupted");
	if (n < 0)
		die(EXIT_USAGE, "%s", sh_error(in));
	struct row *r = realloc(*rows, (*nrows + n + 1) * sizeof *r);
	if (!r)
		xalloc_die("the table of layer-norm comparisons", (*nrows + n + 1) * sizeof *r);
	*rows = r;
	for (int i = 0; i < n; i++)
		if (keep & 1 << d[i].g)
			r[(*nrows)++] = (struct row){d[i], kinds[d[i].g]};
	free(d);
}

/* --check --json: the table and the verdict as one object */
static json_t *table_json(const struct sh_ckpt *in, const struct row *d, int n, int mds,
			  double tolerance)
{
	json_t *o = json_object(), *rows = json_array(), *largest = json_null();
	int bad = 0, worst = -1;
	for (int i = 0; i < n; i++) {
		json_t *e = json_object(), *ranks = json_array();
		json_object_set_new(e, "tensor", jsonout_str(in->m.t[d[i].d.t].name));
		json_object_set_new(e, "kind", jsonout_str(d[i].kind));
		/* an infinite difference (a NaN against a number) has no JSON number */
		json_object_set_new(e, "max_abs_diff", isfinite(d[i].d.maxdiff) ? json_real(d[i].d.maxdiff)
										 : json_null());
		json_object_set_new(e, "copies", json_integer(d[i].d.ncopies));
		json_object_set_new(e, "differ_count", json_integer(d[i].d.ndiffer));
		char labels[sizeof d[i].d.differ], *save = NULL;
		snprintf(labels, sizeof labels, "%s", d[i].d.differ);
		for (char *l = strtok_r(labels, ",", &save); l; l = strtok_r(NULL, ",", &save))
			if (strcmp(l, "...") != 0)
				json_array_append_new(ranks, jsonout_str(l));
		json_object_set_new(e, "ranks_that_differ", ranks);
		json_array_append_new(rows, e);
		if (d[i].d.ndiffer) {
			bad++;
			if (worst < 0 || d[i].d.maxdiff > d[worst].d.maxdiff)
				worst = i;
		}
	}
	if (worst >= 0) {
		largest = json_object();
		json_object_set_new(largest, "tensor", jsonout_str(in->m.t[d[worst].d.t].name));
		json_object_set_new(largest, "kind", jsonout_str(d[worst].kind));
		json_object_set_new(largest, "max_abs_diff", isfinite(d[worst].d.maxdiff) ?
				    json_real(d[worst].d.maxdiff) : json_null());
	}
	json_object_set_new(o, "dir", jsonout_str(in->dir));
	json_object_set_new(o, "format", json_string(mds ? "megatron-deepspeed" : "lmtk"));
	json_object_set_new(o, "tp", json_integer(in->tp));
	json_object_set_new(o, "pp", json_integer(in->pp));
	json_object_set_new(o, "tolerance", json_real(tolerance));
	json_object_set_new(o, "ok", json_boolean(bad == 0));
	json_object_set_new(o, "buffers", json_integer(n));
	json_object_set_new(o, "differ", json_integer(bad));
	json_object_set_new(o, "largest", largest);
	json_object_set_new(o, "tensors", rows);
	return o;
}

/* The table: one line per replicated tensor and buffer; returns the lines over tolerance. */
static int print_table(const struct sh_ckpt *in, const struct row *d, int n, int *worst)
{
	int w = 6, kw = 10, bad = 0;
	*worst = -1;
	for (int i = 0; i < n; i++) {
		int l = (int)strlen(in->m.t[d[i].d.t].name), k = (int)strlen(d[i].kind);
		w = l > w ? l : w;
		kw = k > kw ? k : kw;
	}
	printf("%-*s  %-*s  %14s  %s\n", w, "tensor", kw, "kind", "max abs diff", "ranks that differ");
	for (int i = 0; i < n; i++) {
		printf("%-*s  %-*s  %14.8e  %s\n", w, in->m.t[d[i].d.t].name, kw, d[i].kind,
		       d[i].d.maxdiff, d[i].d.ndiffer ? d[i].d.differ : "-");
		if (d[i].d.ndiffer) {
			bad++;
			if (*worst < 0 || d[i].d.maxdiff > d[*worst].d.maxdiff)
				*worst = i;
		}
	}
	return bad;
}

int main(int argc, char **argv)
{
	static struct cfg c;
	struct optgroup groups[] = {{opts, on_opt, &c, NULL}, {0}};
	struct optspec spec = {
		"[--from lmtk|megatron-deepspeed] DIR[/global_stepN] [--check | --fix | --verify]\n"
		"       [--tolerance X] [--output OUT | --in-place] [--json]",
		"Compare every replicated tensor of a train checkpoint (layer norms, row-parallel biases,\n"
		"position embeddings; BERT's token types, pooler, LM-head dense and layer norm and binary\n"
		"head; the tied word embeddings across pipeline stages) across its ranks -\n"
		"fp32 master weights, exp_avg and exp_avg_sq - and print, per tensor and buffer, the\n"
		"largest difference and the ranks whose copy differs from rank 0's.  --fix replaces each\n"
		"by the mean of its copies (the all-reduce AVG that repaired the 176B run) and writes the\n"
		"checkpoint to --output OUT, or over itself with --in-place, atomically.  The bf16\n"
		"working weights are rounded from the master weights on resume, so they follow.\n"
		"--from megatron-deepspeed checks a Megatron-DeepSpeed checkpoint: its fp32 masters and\n"
		"moments, and its bf16 model weights (a copy per TP rank in its files too).\n"
		"--verify only checks that every file has the size and CRC-32C the manifest records\n"
		"(a copy's check: any lmtk checkpoint, 8-bit Adam's too).  --json prints --check's\n"
		"table or --verify's files and the verdict as one JSON object instead.\n"
		"Exit 0 all equal (or repaired, or verified), 1 copies differ (or a file does not\n"
		"match), 2 usage or bad input, 3 I/O error.",
		groups, NULL, 0};
	char err[8192];
	int rc;

	msg_init(argv[0]);
	int k = opt_parse(&spec, argc, argv);   /* options before or after DIR */
	const char *dir = k < argc ? argv[k++] : NULL;
	if (k < argc)
		usage_error(&spec, "one checkpoint directory at a time");
	if (!dir)
		usage_error(&spec, "which checkpoint? give DIR");
	if (c.fix + c.check + c.verify > 1)
		usage_error(&spec, "one of --check, --fix or --verify");
	if (c.verify && (c.tolerance_set || c.output || c.in_place))
		usage_error(&spec, "--verify checks the files against the manifest: --tolerance, --output "
			    "and --in-place go with --check or --fix");
	if (!c.fix && (c.output || c.in_place))
		usage_error(&spec, "--output and --in-place go with --fix");
	if (c.fix && !c.output == !c.in_place)
		usage_error(&spec, "--fix needs --output OUT or --in-place");
	if (c.verify && c.mds)
		usage_error(&spec, "--verify checks an lmtk checkpoint's files against its manifest; a "
			    "Megatron-DeepSpeed checkpoint has none: --check it");
	if (c.fix && c.mds)
		usage_error(&spec, "--fix writes lmtk checkpoints: convert a Megatron-DeepSpeed one first "
			    "(ckpt-merge-tp --from megatron-deepspeed --optimizer), then --fix that");
	if (c.fix && c.json)
		usage_error(&spec, "--json goes with --check or --verify; --fix reports in words");
	if (c.json && jsonout_begin() < 0)
		die(EXIT_FAILED, "stdout: %s", strerror(errno));
	stop_catch();
	if (c.verify)
		return verify(dir, c.json);
	double t0 = units_now();

	struct sh_ckpt in;
	struct progress pg;
	struct mds *md = NULL;
	struct row *d = NULL;
	int n = 0, worst;
	if (c.mds) {
		if ((rc = mds_open(&md, dir, err, sizeof err)))
			die(rc, "%s", err);
		/* the masters and moments (if saved), then the model weights of the layer files */
		static const char *const opt_kinds[LT_GROUPS] = {"fp32 master", "exp_avg", "exp_avg_sq"};
		static char wk[40];   /* the rows point at it until the end: not this block's stack */
		snprintf(wk, sizeof wk, "%s weight", strcmp(md->weights_dtype, "bfloat16") == 0 ? "bf16" :
			 strcmp(md->weights_dtype, "float16") == 0 ? "fp16" : md->weights_dtype);
		const char *const w_kinds[LT_GROUPS] = {wk, "", ""};
		int obufs[LT_GROUPS] = {MDS_MASTER, MDS_EXP_AVG, MDS_EXP_AVG_SQ},
		    wbufs[LT_GROUPS] = {MDS_BF16, MDS_ZERO, MDS_ZERO};
		if (md->has_optimizer) {
			if (mds_view(&in, md, obufs, 0, err, sizeof err) < 0)
				die(EXIT_FAILED, "%s", err);
			add_rows(&in, c.tolerance, &pg, 7, opt_kinds, &d, &n);
			sh_close(&in);
		}
		/* a universal checkpoint has no model weights: its masters are them */
		if (!md->has_weights && mds_view(&in, md, obufs, 0, err, sizeof err) < 0)
			die(EXIT_FAILED, "%s", err);
		else if (md->has_weights) {
			if (mds_view(&in, md, wbufs, 0, err, sizeof err) < 0)
				die(EXIT_FAILED, "%s", err);
			add_rows(&in, c.tolerance, &pg, 1, w_kinds, &d, &n);
		}
	} else {
		if ((rc = sh_open(&in, dir, &pg, err, sizeof err))) {
			if (mds_detect(dir))
				die(rc, "%s; %s is a Megatron-DeepSpeed checkpoint: add --from "
				    "megatron-deepspeed", err, dir);
			die(rc, "%s", err);
		}
		add_rows(&in, c.tolerance, &pg, 7, lt_group_name, &d, &n);
	}
	if (c.json) {   /* --check: the fix below has no --json */
		int bad = 0;
		for (int i = 0; i < n; i++)
			bad += d[i].d.ndiffer > 0;
		rc = jsonout_end(table_json(&in, d, n, md != NULL, c.tolerance));
		if (bad)
			warn("%s: %d replicated tensor buffer%s differ%s across ranks; repair with %s",
			     in.dir, bad, bad > 1 ? "s" : "", bad > 1 ? "" : "s", md ?
			     "ckpt-merge-tp --from megatron-deepspeed --optimizer, then ckpt-sync-ln --fix" :
			     "--fix");
		free(d);
		sh_close(&in);
		mds_close(md);
		return rc < 0 ? EXIT_FAILED : bad ? EXIT_FINDING : EXIT_OK;
	}
	if (n == 0) {
		printf("%s: TP=%d PP=%d: no tensor has two copies; nothing to compare\n", in.dir, in.tp,
		       in.pp);
		sh_close(&in);
		mds_close(md);
		return EXIT_OK;
	}
	int bad = print_table(&in, d, n, &worst);
	char tol[64] = "bit-exact";
	if (c.tolerance > 0)
		snprintf(tol, sizeof tol, "tolerance %g", c.tolerance);
	if (bad)
		printf("%s: TP=%d PP=%d: %d of %d replicated tensor buffers differ across ranks (%s); "
		       "the largest difference is %.8e, %s %s\n", in.dir, in.tp, in.pp, bad, n, tol,
		       d[worst].d.maxdiff, in.m.t[d[worst].d.t].name, d[worst].kind);
	else
		printf("%s: TP=%d PP=%d: all %d replicated tensor buffers are equal across ranks (%s)\n",
		       in.dir, in.tp, in.pp, n, tol);
	fflush(stdout);
	free(d);
	if (!c.fix) {
		if (bad)
			warn("%s: %d replicated tensor buffer%s differ%s across ranks; repair with %s",
			     in.dir, bad, bad > 1 ? "s" : "", bad > 1 ? "" : "s", md ?
			     "ckpt-merge-tp --from megatron-deepspeed --optimizer, then ckpt-sync-ln --fix" :
			     "--fix");
		sh_close(&in);
		mds_close(md);
		return bad ? EXIT_FINDING : EXIT_OK;
	}
	if (!bad && c.in_place) {
		warn("%s: nothing to repair; left as it was", in.dir);
		sh_close(&in);
		return EXIT_OK;
	}

	/* --fix: the same layout, replicated tensors averaged */
	struct rs_target tg = {in.tp, in.pp, in.m.padded_vocab, 1, 0};   /* PP kept: stages as they are */
	char step[64], sdir[8400];
	snprintf(step, sizeof step, "global_step%lld", (long long)in.iteration);
	if (c.output) {
		struct od od;
		if ((rc = od_begin(&od, c.output, err, sizeof err)))
			die(rc, "%s", err);
		rc = rs_write_checkpoint(&in, &tg, od.tmp, &pg, err, sizeof err);
		if (rc) {
			od_abort(&od);
			die(rc, "%s; nothing written to %s", err, c.output);
		}
		if ((rc = od_commit(&od, err, sizeof err)))
			die(rc, "%s", err);
		warn("repaired %d replicated tensor buffer%s: wrote %s/%s in %.1f s", bad, bad == 1 ? "" : "s",
		     od.final, step, units_now() - t0);
	} else {
		/* a new step directory beside the old one, under the name train's saves clean up */
		char parent[4096];
		const char *slash = strrchr(in.dir, '/');
		snprintf(parent, sizeof parent, "%.*s", slash ? (int)(slash - in.dir) : 1,
			 slash ? in.dir : ".");
		snprintf(sdir, sizeof sdir, "%s/.%s.tmp.%d", parent, slash ? slash + 1 : in.dir,
			 (int)getpid());
		fsx_rm_tree(sdir);
		if (save_step_begin(sdir, err, sizeof err) < 0)
			die(EXIT_FAILED, "%s", err);
		rc = rs_write(&in, &tg, sdir, &pg, err, sizeof err);
		if (rc) {
			fsx_rm_tree(sdir);
			die(rc, "%s; %s left as it was", err, in.dir);
		}
		if (od_swap(sdir, in.dir, err, sizeof err) < 0) {
			fsx_rm_tree(sdir);
			die(EXIT_FAILED, "%s; %s left as it was", err, in.dir);
		}
		warn("repaired %d replicated tensor buffer%s of %s in place in %.1f s", bad,
		     bad == 1 ? "" : "s", in.dir, units_now() - t0);
	}
	sh_close(&in);
	return EXIT_OK;
}
