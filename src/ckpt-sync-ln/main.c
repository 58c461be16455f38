/* ckpt-sync-ln - find, measure and repair replicated parameters that drifted apart across ranks.
 *
 *   ckpt-sync-ln DIR[/global_stepN] [--check | --fix] [--tolerance X] [--output OUT | --in-place]
 *   ckpt-sync-ln --verify DIR[/global_stepN]
 *
 * Layer norms and row-parallel biases are whole on every TP rank and must stay equal; in the
 * 104B and 176B runs they did not (shared/spec/megatron-train.md, "Layer norms drifting apart
 * across TP ranks").  --check prints, for every replicated tensor and each of its three buffers
 * (fp32 master weights, exp_avg, exp_avg_sq), the largest difference between the ranks' copies
 * and which ranks differ; --fix writes the checkpoint back with every replicated tensor replaced
 * by the mean of its copies - the all-reduce AVG over the TP group that repaired the 176B run, of
 * the master weights and both moments.  (The bf16 working weights are not in a checkpoint: a
 * resumed run rounds them from the master weights, so they follow.)
 *
 * The checkpoint modules are ckpt-merge-tp's (shards.h verifies and compares, reshard.h writes
 * the same layout back, outdir.h publishes), from the checkpoint library (src/ckpt).
 * --verify checks only that every file is what the manifest recorded (checksums.h): the check a
 * backup makes of its copy (slurm/ckpt-backup.slurm), for any lmtk checkpoint.  Exit: 0 all
 * copies equal (or repaired; --verify: every file matches), 1 copies differ beyond the tolerance
 * (--verify: a file does not match), 2 usage or bad input, 3 I/O. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"
#include "msg.h"
#include "opt.h"
#include "units.h"
#include "ckpt/checksums.h"
#include "ckpt/outdir.h"
#include "ckpt/progress.h"
#include "ckpt/reshard.h"
#include "ckpt/shards.h"

enum { O_CHECK = 1000, O_FIX, O_TOLERANCE, O_OUTPUT, O_INPLACE, O_VERIFY };

struct cfg {
	int fix, check, in_place, verify, tolerance_set;
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
	}
	return errf(err, errlen, "unhandled option");
}

static void usage_error(const struct optspec *spec, const char *msg)
{
	fprintf(stderr, "%s: %s\n", prog_name, msg);
	opt_usage(spec, stderr);
	exit(EXIT_USAGE);
}

/* --verify: one line per file, then the verdict. */
static int verify(const char *dir)
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

/* The table: one line per replicated tensor and buffer; returns the lines over tolerance. */
static int print_table(const struct sh_ckpt *in, const struct sh_drift *d, int n, int *worst)
{
	int w = 6, bad = 0;
	*worst = -1;
	for (int i = 0; i < n; i++) {
		int l = (int)strlen(in->m.t[d[i].t].name);
		w = l > w ? l : w;
	}
	printf("%-*s  %-10s  %14s  %s\n", w, "tensor", "kind", "max abs diff", "ranks that differ");
	for (int i = 0; i < n; i++) {
		printf("%-*s  %-10s  %14.8e  %s\n", w, in->m.t[d[i].t].name, lt_group_name[d[i].g],
		       d[i].maxdiff, d[i].ndiffer ? d[i].differ : "-");
		if (d[i].ndiffer) {
			bad++;
			if (*worst < 0 || d[i].maxdiff > d[*worst].maxdiff)
				*worst = i;
		}
	}
	return bad;
}

int main(int argc, char **argv)
{
	static struct cfg c;
	struct optgroup groups[] = {{opts, on_opt, &c}, {0}};
	struct optspec spec = {
		"DIR[/global_stepN] [--check | --fix | --verify] [--tolerance X] [--output OUT | --in-place]",
		"Compare every replicated tensor of a train checkpoint (layer norms, row-parallel biases,\n"
		"position embeddings; the tied word embeddings across pipeline stages) across its ranks -\n"
		"fp32 master weights, exp_avg and exp_avg_sq - and print, per tensor and buffer, the\n"
		"largest difference and the ranks whose copy differs from rank 0's.  --fix replaces each\n"
		"by the mean of its copies (the all-reduce AVG that repaired the 176B run) and writes the\n"
		"checkpoint to --output OUT, or over itself with --in-place, atomically.  The bf16\n"
		"working weights are rounded from the master weights on resume, so they follow.\n"
		"--verify only checks that every file has the size and CRC-32C the manifest records\n"
		"(a copy's check: any lmtk checkpoint, 8-bit Adam's too).\n"
		"Exit 0 all equal (or repaired, or verified), 1 copies differ (or a file does not\n"
		"match), 2 usage or bad input, 3 I/O error.",
		groups};
	char err[8192];
	int rc;

	msg_init(argv[0]);
	int k = opt_parse(&spec, argc, argv);
	const char *dir = k < argc ? argv[k++] : NULL;
	if (k < argc) {   /* options after DIR */
		int j = k - 1 + opt_parse(&spec, argc - (k - 1), argv + k - 1);
		if (j < argc)
			usage_error(&spec, "one checkpoint directory at a time");
	}
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
	pg_signals();
	if (c.verify)
		return verify(dir);
	double t0 = units_now();

	struct sh_ckpt in;
	struct progress pg;
	if ((rc = sh_open(&in, dir, &pg, err, sizeof err)))
		die(rc, "%s", err);
	int n, worst;
	struct sh_drift *d = sh_compare(&in, c.tolerance, &pg, &n);
	if (pg_stopped())
		die(EXIT_FAILED, "interrupted");
	if (n == 0) {
		printf("%s: TP=%d PP=%d: no tensor has two copies; nothing to compare\n", in.dir, in.tp,
		       in.pp);
		sh_close(&in);
		return EXIT_OK;
	}
	int bad = print_table(&in, d, n, &worst);
	char tol[64] = "bit-exact";
	if (c.tolerance > 0)
		snprintf(tol, sizeof tol, "tolerance %g", c.tolerance);
	if (bad)
		printf("%s: TP=%d PP=%d: %d of %d replicated tensor buffers differ across ranks (%s); "
		       "the largest difference is %.8e, %s %s\n", in.dir, in.tp, in.pp, bad, n, tol,
		       d[worst].maxdiff, in.m.t[d[worst].t].name, lt_group_name[d[worst].g]);
	else
		printf("%s: TP=%d PP=%d: all %d replicated tensor buffers are equal across ranks (%s)\n",
		       in.dir, in.tp, in.pp, n, tol);
	fflush(stdout);
	free(d);
	if (!c.fix) {
		if (bad)
			warn("%s: %d replicated tensor buffer%s differ%s across ranks; repair with --fix",
			     in.dir, bad, bad > 1 ? "s" : "", bad > 1 ? "" : "s");
		sh_close(&in);
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
		file_rm_tree(sdir);
		if (mkdir(sdir, 0755) < 0)
			die(EXIT_FAILED, "%s: %s", sdir, strerror(errno));
		rc = rs_write(&in, &tg, sdir, &pg, err, sizeof err);
		if (rc) {
			file_rm_tree(sdir);
			die(rc, "%s; %s left as it was", err, in.dir);
		}
		if (od_swap(sdir, in.dir, err, sizeof err) < 0) {
			file_rm_tree(sdir);
			die(EXIT_FAILED, "%s; %s left as it was", err, in.dir);
		}
		warn("repaired %d replicated tensor buffer%s of %s in place in %.1f s", bad,
		     bad == 1 ? "" : "s", in.dir, units_now() - t0);
	}
	sh_close(&in);
	return EXIT_OK;
}
