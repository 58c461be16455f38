/* mkindex - token stream -> Megatron .bin/.idx (MMIDIDX v1); merge, inspect, dump, check.
 *
 *   mkindex --output-prefix PREFIX [--dtype T] [--vocab-size N] < STREAM
 *   mkindex merge OUT IN...         mkindex info PREFIX [--json]
 *   mkindex dump PREFIX [--doc N | --range A:B] [--sequences]
 *   mkindex check PREFIX [--vocab-size N] [--json]
 *   mkindex weights CATALOGUE.json [--split S] [--train-range S:E] ...
 *
 * This file parses options and hands over to the subcommands (cmd.h); the format is idx.h, the
 * atomic streamed output outfile.h.  Exit: 0 ok, 1 check found a problem, 2 usage or bad input,
 * 3 I/O. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "idx.h"
#include "msg.h"
#include "opt.h"

struct cfg {
	const char *prefix;
	int dtype;
	uint64_t vocab;
	int has_range, sequences, json;
	uint64_t first, end;
	struct weights_opts w;
};

enum { O_PREFIX = 'o', O_DTYPE = 1, O_VOCAB, O_DOC, O_RANGE, O_SEQUENCES, O_SPLIT, O_TRANGE,
       O_VRANGE, O_XRANGE, O_NOPER, O_JSON };

static const struct opt build_opts[] = {
	{"output-prefix", O_PREFIX, "PREFIX", "write PREFIX_KEY_document.bin/.idx per key, or "
	 "PREFIX_KEY_sentence.bin/.idx for a stream of sentences (required)"},
	{"dtype", O_DTYPE, "TYPE", "uint16, int32, uint8, int8, int16, int64 (default: Megatron's)"},
	{"vocab-size", O_VOCAB, "N", "unpadded vocab size: picks the dtype, bounds the ids"},
	{0},
};
static const struct opt dump_opts[] = {
	{"doc", O_DOC, "N", "only document N (from 0)"},
	{"range", O_RANGE, "A:B", "documents A to B-1 (either end may be left out)"},
	{"sequences", O_SEQUENCES, NULL, "a line per sequence (sentence), an empty line after each document"},
	{0},
};
static const struct opt check_opts[] = {
	{"vocab-size", O_VOCAB, "N", "also read the .bin and check that every id is in 0..N-1"},
	{"json", O_JSON, NULL, "print the findings and the verdict as one JSON object (mkindex(1), JSON OUTPUT)"},
	{0},
};
static const struct opt info_opts[] = {
	{"json", O_JSON, NULL, "print the description as one JSON object (mkindex(1), JSON OUTPUT)"},
	{0},
};
static const struct opt weights_opts[] = {
	{"split", O_SPLIT, "S", "print only split S (train, valid or test) as a --S-weighted-split-paths-path "
	 "file holds it: one line of double-quoted groups"},
	{"train-range", O_TRANGE, "S:E", "the fraction of each dataset that trains (default 0:0.95)"},
	{"valid-range", O_VRANGE, "S:E", "the fraction that validates (default 0.95:1)"},
	{"test-range", O_XRANGE, "S:E", "the fraction that tests (default: no test sets)"},
	{"no-per-dataset", O_NOPER, NULL, "only the blended valid and test sets, no valid_NAME set per dataset"},
	{0},
};
static const struct opt no_opts[] = {{0}};

/* flags of Megatron's preprocess_data.py that tokenize takes, or that mean nothing here */
static const struct opt_hint hints[] = {
	{"dataset-impl", "IMPL", "--dataset-impl: mkindex always writes Megatron's mmap dataset (MMIDIDX v1); drop it"},
	{"json-keys", "KEY...", "--json-keys belongs to tokenize: tokenize --json-keys %s ... | mkindex --output-prefix PREFIX"},
	{"vocab-file", "FILE", "--vocab-file belongs to tokenize: tokenize --vocab-file %s ... | mkindex --vocab-size N ..."},
	{"merge-file", "FILE", "--merge-file belongs to tokenize: tokenize --merge-file %s ... | mkindex ..."},
	{"tokenizer-type", "TYPE", "--tokenizer-type belongs to tokenize: tokenize --tokenizer-type %s ... | mkindex ..."},
	{"append-eod", NULL, "--append-eod belongs to tokenize: tokenize --append-eod ... | mkindex ..."},
	{"input", "FILE", "--input belongs to tokenize: tokenize ... %s | mkindex --output-prefix PREFIX "
	 "(mkindex reads the token stream on standard input)"},
	{"workers", "N", "--workers belongs to tokenize: tokenize --workers %s ... | mkindex ..."},
	{0},
};

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;
	if (!*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	unsigned long long x = strtoull(s, &end, 10);
	if (errno || *end)
		return -1;
	*v = x;
	return 0;
}

static int on_opt(void *ctx, int key, const char *arg, char *err, size_t errlen)
{
	struct cfg *c = ctx;
	switch (key) {
	case O_PREFIX:
		if (!*arg)
			return errf(err, errlen, "empty prefix");
		c->prefix = strdup(arg);
		return 0;
	case O_DTYPE:
		if (!(c->dtype = idx_dtype_parse(arg)))
			return errf(err, errlen, "'%s' is not one of uint16, int32, uint8, int8, int16, int64", arg);
		return 0;
	case O_VOCAB:
		if (parse_u64(arg, &c->vocab) < 0 || c->vocab == 0 || c->vocab > 0xFFFFFFFFull)
			return errf(err, errlen, "'%s' is not a vocabulary size (1 to 4294967295)", arg);
		return 0;
	case O_DOC:
		if (c->has_range)
			return errf(err, errlen, "give --doc or --range once");
		if (parse_u64(arg, &c->first) < 0 || c->first == UINT64_MAX)
			return errf(err, errlen, "'%s' is not a document number", arg);
		c->end = c->first + 1;
		c->has_range = 1;
		return 0;
	case O_RANGE: {
		const char *colon = strchr(arg, ':');
		char a[32];
		if (c->has_range)
			return errf(err, errlen, "give --doc or --range once");
		if (!colon || (size_t)(colon - arg) >= sizeof a)
			return errf(err, errlen, "'%s' is not A:B", arg);
		snprintf(a, sizeof a, "%.*s", (int)(colon - arg), arg);
		c->first = 0;
		c->end = UINT64_MAX;  /* to the end */
		if ((*a && parse_u64(a, &c->first) < 0) || (colon[1] && parse_u64(colon + 1, &c->end) < 0))
			return errf(err, errlen, "'%s' is not A:B (document numbers)", arg);
		c->has_range = 1;
		return 0;
	}
	case O_SEQUENCES:
		c->sequences = 1;
		return 0;
	case O_SPLIT:
		if ((c->w.split = strcmp(arg, "train") == 0 ? 0 : strcmp(arg, "valid") == 0 ? 1
				  : strcmp(arg, "test") == 0 ? 2 : -1) < 0)
			return errf(err, errlen, "'%s' is not one of train, valid, test", arg);
		return 0;
	case O_TRANGE: case O_VRANGE: case O_XRANGE: {
		int s = key - O_TRANGE;
		double *r = c->w.range[s];
		char a[64], *end;
		const char *colon = strchr(arg, ':');
		if (!colon || (size_t)(colon - arg) >= sizeof a)
			return errf(err, errlen, "'%s' is not S:E", arg);
		snprintf(a, sizeof a, "%.*s", (int)(colon - arg), arg);
		r[0] = strtod(a, &end);
		if (!*a || *end || !(r[0] >= 0))
			return errf(err, errlen, "'%s': the start is not a fraction 0 <= S < 1", arg);
		r[1] = strtod(colon + 1, &end);
		if (!colon[1] || *end || !(r[1] > r[0] && r[1] <= 1))
			return errf(err, errlen, "'%s': the end is not a fraction S < E <= 1", arg);
		c->w.has_range[s] = 1;
		return 0;
	}
	case O_NOPER:
		c->w.no_per_dataset = 1;
		return 0;
	case O_JSON:
		c->json = 1;
		return 0;
	}
	return errf(err, errlen, "unhandled option");
}

/* Options and operands in any order (`dump PREFIX --doc 3`); at most max operands. */
static int parse_all(const struct optspec *spec, int argc, char **argv, char **ops, int max)
{
	int first = opt_parse(spec, argc, argv), nops = argc - first;
	if (nops > max) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", prog_name, argv[first + max]);
		opt_usage(spec, stderr);
		exit(EXIT_USAGE);
	}
	memcpy(ops, argv + first, sizeof *ops * (size_t)nops);
	return nops;
}

static void need(const struct optspec *spec, int have, int want)
{
	if (have >= want)
		return;
	fprintf(stderr, "%s: missing argument\n", prog_name);
	opt_usage(spec, stderr);
	exit(EXIT_USAGE);
}

int main(int argc, char **argv)
{
	static struct cfg c;
	const char *sub = argc > 1 ? argv[1] : "";
	char *ops[4096];
	int nops;

	msg_init(argv[0]);

	if (strcmp(sub, "merge") == 0) {
		struct optgroup g[] = {{no_opts, on_opt, &c, NULL}, {0}};
		struct optspec spec = {"merge OUT IN...",
			"Concatenate the datasets IN... (prefixes) into OUT.bin/.idx, as Megatron's merge does:\n"
			"same dtype required, sequences appended, doc_idx shifted, pointers recomputed.", g, hints, 0};
		nops = parse_all(&spec, argc - 1, argv + 1, ops, 4096);
		need(&spec, nops, 2);
		return cmd_merge(ops[0], ops + 1, nops - 1);
	}
	if (strcmp(sub, "info") == 0 || strcmp(sub, "dump") == 0 || strcmp(sub, "check") == 0) {
		int dump = sub[0] == 'd', check = sub[0] == 'c';
		struct optgroup g[] = {{dump ? dump_opts : check ? check_opts : info_opts, on_opt, &c, NULL}, {0}};
		struct optspec spec = {
			dump ? "dump PREFIX [--doc N | --range A:B] [--sequences]"
			: check ? "check PREFIX [--vocab-size N] [--json]" : "info PREFIX [--json]",
			dump ? "Print the token ids of PREFIX's documents, one document per line; with --sequences\n"
			       "one sequence (sentence) per line and an empty line after each document."
			: check ? "Check every invariant of PREFIX.idx/.bin; print each problem.\n"
				  "Exit 0 ok, 1 problems found, 3 unreadable."
				: "Describe the dataset PREFIX.idx/.bin: counts, dtype, id range, lengths, sizes.\n"
				  "Exit 0, 2 not a valid dataset (run mkindex check), 3 unreadable.",
			g, hints, 0};
		nops = parse_all(&spec, argc - 1, argv + 1, ops, 1);
		need(&spec, nops, 1);
		if (dump)
			return cmd_dump(ops[0], c.has_range, c.first, c.end, c.sequences);
		return check ? cmd_check(ops[0], c.vocab, c.json) : cmd_info(ops[0], c.json);
	}

	if (strcmp(sub, "weights") == 0) {
		struct optgroup g[] = {{weights_opts, on_opt, &c, NULL}, {0}};
		struct optspec spec = {"weights CATALOGUE.json [--split S] [--train-range S:E] [--valid-range S:E] "
				       "[--test-range S:E] [--no-per-dataset]",
			"Turn a catalogue of datasets and sampling ratios - a JSON list of\n"
			"{\"dataset_path\": PREFIX, \"ratio\": R} - into Megatron-DeepSpeed's weighted split paths,\n"
			"as BigScience made the 176B run's: one train group of every dataset's first 95% at its\n"
			"ratio, one valid group of the rest at the same ratios, and a valid_NAME group per dataset\n"
			"(NAME: the entry's \"name\", else the prefix's directory).  Prints the flags, quoted for\n"
			"a shell:  eval \"train ... $(mkindex weights catalogue.json)\";  with --split, that split's\n"
			"line for a --*-weighted-split-paths-path file.  Exit 2 for a bad catalogue (its\n"
			"line or the entry and key at fault).", g, hints, 0};
		c.w.split = -1;
		c.w.range[0][1] = c.w.range[1][0] = 0.95;
		c.w.range[1][1] = 1;
		c.w.has_range[0] = c.w.has_range[1] = 1;
		nops = parse_all(&spec, argc - 1, argv + 1, ops, 1);
		need(&spec, nops, 1);
		if (c.w.split >= 0 && !c.w.has_range[c.w.split]) {
			fprintf(stderr, "%s: --split test needs --test-range S:E: there is no test split by "
				"default\n", prog_name);
			return EXIT_USAGE;
		}
		return cmd_weights(ops[0], &c.w);
	}

	struct optgroup g[] = {{build_opts, on_opt, &c, NULL}, {0}};
	struct optspec spec = {
		"--output-prefix PREFIX [--dtype T] [--vocab-size N] < STREAM | merge | info | dump | check | weights",
		"Read a token stream (lmtk-tokens(5), from tokenize) on standard input and write Megatron's\n"
		"indexed dataset PREFIX_KEY_document.bin/.idx (MMIDIDX v1) for each key, atomically; for a\n"
		"stream of sentences (tokenize --split-sentences) PREFIX_KEY_sentence.bin/.idx, a sequence\n"
		"per sentence and doc_idx over the documents, as Megatron's preprocessor writes them.\n"
		"\n"
		"  mkindex merge OUT IN...                      concatenate datasets\n"
		"  mkindex info PREFIX [--json]                 counts, dtype, id range, lengths\n"
		"  mkindex dump PREFIX [--doc N | --range A:B] [--sequences]\n"
		"                                               token ids, one document per line\n"
		"  mkindex check PREFIX [--vocab-size N] [--json]\n"
		"                                               verify every invariant\n"
		"  mkindex weights CATALOGUE.json [--split S]   a data mix as Megatron's weighted split paths\n"
		"\n"
		"Exit 0 ok, 1 check found problems, 2 usage or bad input, 3 I/O error.",
		g, hints, 0};
	int k = opt_parse(&spec, argc, argv);
	if (k != argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", prog_name, argv[k]);
		opt_usage(&spec, stderr);
		return EXIT_USAGE;
	}
	if (!c.prefix) {
		fprintf(stderr, "%s: --output-prefix is required\n", prog_name);
		opt_usage(&spec, stderr);
		return EXIT_USAGE;
	}
	return cmd_build(c.prefix, c.dtype, c.vocab);
}
