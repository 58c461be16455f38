/* opt - command-line and config-file options from one table.
 *
 * Each program declares its options once, as a table of {name, key, metavar, help}; the same
 * table parses argv, prints --help, and (for programs with --config) parses a config file whose
 * lines are the long option names without the dashes ("check /work:space=85%").  Handlers get
 * each occurrence in order, so repeatable options (--mail-to A --mail-to B) are just handlers that
 * append.  Programs can stack several tables (groups), e.g. their own plus the alert options that
 * every watchdog shares, so shared options are declared and documented in exactly one place.
 *
 * Options and operands come in any order ("tokenize --json-keys text corpus.jsonl --workers 4",
 * "mkindex dump PREFIX --doc 3"); opt_parse() hands the operands back together, and "--" ends
 * the options.  A metavar ending in "..." ("KEY...") or of several words ("START INCR SAMPLES")
 * declares a flag that takes several values after one flag, as argparse's nargs: they run up to
 * the next option ("-1" is a value), and - unless the metavar says FILE - a value after the first
 * that names an existing file ends them too, since that file is an operand ("--json-keys text
 * corpus.jsonl": one key, one input).  The group's handler gets each value, or its opt_multi_fn
 * the whole occurrence.
 *
 * One parser, so every program gets the same rules, the same --help from the table, and the
 * same messages: "did you mean --vocab-file?" for a misspelled long option (edit distance and
 * prefixes, as git's help.c), the candidates of an ambiguous abbreviation (for the programs that
 * allow abbreviations: train, as argparse), and a program's own hints for flags that belong to
 * another program (struct opt_hint).
 *
 * Errors: opt_parse() prints "prog: --flag: reason" plus the one-line usage and exits 2;
 * opt_parse_file() reports "FILE:LINE: reason" to the caller, who decides (a watchdog alerts). */
#ifndef LMTK_OPT_H
#define LMTK_OPT_H

#include <stddef.h>
#include <stdio.h>

struct opt {
	const char *name;   /* long name, without "--" */
	int key;            /* given to the handler; a letter also works as "-k" */
	const char *arg;    /* metavar; NULL for a flag; "X..." several values (see above) */
	const char *help;   /* NULL: accepted but not listed by --help (the program lists it itself) */
};

/* returns 0, or -1 with err filled (the caller adds the option name).  `arg` lives only for the
 * call (config lines reuse their buffer): keep a copy, not the pointer. */
typedef int (*opt_fn)(void *ctx, int key, const char *arg, char *err, size_t errlen);

/* One occurrence of a several-values flag at once: for a program whose repeated flag replaces the
 * earlier values (argparse's way, train's).  Without it the group's opt_fn gets each value. */
typedef int (*opt_multi_fn)(void *ctx, int key, const char *const *vals, int n, char *err,
			    size_t errlen);

struct optgroup {
	const struct opt *opts;  /* terminated by {0} */
	opt_fn fn;
	void *ctx;
	opt_multi_fn multi;      /* optional */
};

/* A flag this program does not take but a user may bring from elsewhere (Megatron's
 * preprocess_data.py, an old script): refused, exit 2, with `text` instead of "unknown option".
 * A "%s" in text is replaced by the value given (or by `arg` when none was). */
struct opt_hint {
	const char *name;   /* without "--" */
	const char *arg;    /* its metavar, NULL for a flag: what follows it is not an operand */
	const char *text;   /* the whole message after "prog: " */
};

struct optspec {
	const char *usage;            /* after "usage: prog ", e.g. "--job-name NAME [options]" */
	const char *about;            /* one paragraph shown by --help */
	const struct optgroup *groups;/* terminated by {0} */
	const struct opt_hint *hints; /* optional, terminated by {0} */
	int abbrev;                   /* a long option may be cut to a unique prefix (argparse) */
};

/* Parses argv and permutes it: the options (in the order given, each with its values, and a "--")
 * first, then the operands in the order given.  Returns the index of the first operand, so the
 * operands are argv[result .. argc-1].  --help, --version exit 0; errors exit 2. */
int opt_parse(const struct optspec *spec, int argc, char **argv);

/* opt_parse without printing or exiting: the same result, or -1 with err (the message after
 * "prog: ") for a usage error, OPT_HELP or OPT_VERSION when asked for those.  argv is permuted
 * only on success.  For a caller that must not exit (the fuzz harness, a library user). */
enum { OPT_HELP = -2, OPT_VERSION = -3 };
int opt_parse_err(const struct optspec *spec, int argc, char **argv, char *err, size_t errlen);

/* Parses a config file of "name value" lines ('#' comments, also after whitespace at the end of a
 * line; blank lines ignored).  Options named in `deny` (NULL-terminated, e.g. "config") are
 * refused.  A bad line does not stop the parse: every good line is applied and every bad one is
 * described in err ("FILE:3: ...; FILE:7: ...").  0, or -1 if any line was bad. */
int opt_parse_file(const struct optspec *spec, const char *path, const char *const *deny,
		   char *err, size_t errlen);

/* The value of --name in argv, if given, before parsing: lets a program read its --config file
 * first so that the command line overrides it. */
const char *opt_peek(int argc, char **argv, const char *name);

void opt_usage(const struct optspec *spec, FILE *f);
void opt_help(const struct optspec *spec, FILE *f);

#endif
