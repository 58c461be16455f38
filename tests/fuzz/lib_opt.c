/* fuzz: the one option parser (src/lib/opt.c).  Each input is read twice: as the "name value"
 * configuration file of fs-watchdog and slurm-pulse (opt_parse_file), with values read as those
 * programs read them (src/lib/units.c); and as a command line, one argument per line, through
 * opt_parse_err - options and operands mixed, several-values flags (KEY..., FILE..., a metavar
 * of words) with and without a whole-occurrence handler, abbreviations (when the first byte is
 * odd), hints, "--", "=" values.  Never a crash, and a parse that succeeds hands back every
 * argument exactly once, the operands after the options. */
#include "fuzz.h"
#include "opt.h"
#include "units.h"

static int handle(void *ctx, int key, const char *arg, char *err, size_t errlen)
{
	unsigned long long b;
	long s;
	double p;
	(void)ctx;
	if ((key == 1 && units_size(arg, &b) < 0) || (key == 2 && units_duration(arg, &s) < 0) ||
	    (key == 3 && units_percent(arg, &p) < 0))
		return snprintf(err, errlen, "bad value '%s'", arg), -1;
	return 0;
}

static int handle_multi(void *ctx, int key, const char *const *vals, int n, char *err, size_t errlen)
{
	if (n < 1)
		abort();   /* the parser promises at least one value */
	for (int i = 0; i < n; i++)
		if (handle(ctx, key, vals[i], err, errlen) < 0)
			return -1;
	return 0;
}

static const struct opt opts[] = {
	{"min-free", 1, "SIZE", "size"}, {"interval", 2, "TIME", "duration"},
	{"max-used", 3, "PCT", "percent"}, {"path", 4, "DIR", "text"}, {"quiet", 5, NULL, "flag"},
	{"keys", 6, "KEY...", "several"}, {"files", 7, "FILE...", "several files"},
	{"range", 8, "START END", "words"}, {"num-layers", 9, "N", NULL}, {"num-layers-per-stage", 10, "N", NULL},
	{"verbose", 'v', NULL, "short"}, {"jobs", 'j', "N", "short with a value"},
	{0}};
static const struct opt_hint hints[] = {
	{"output-prefix", "PREFIX", "--output-prefix belongs to mkindex: ... | mkindex --output-prefix %s"},
	{"no-email", NULL, "--no-email: mail goes out only with --mail-to"},
	{"percent", "X", "%s%s%%s %"},
	{0}};

static void parse_argv(const uint8_t *data, size_t size)
{
	char *copy = malloc(size + 1), *argv[66], *orig[66], err[1024];
	int argc = 0, abbrev = size && (data[0] & 1);
	struct optgroup plain[] = {{opts, handle, NULL, NULL}, {0}};
	struct optgroup whole[] = {{opts, handle, NULL, handle_multi}, {0}};
	struct optspec spec = {"[options] FILE...", "fuzz", size && (data[0] & 2) ? whole : plain, hints, abbrev};

	if (!copy)
		abort();
	memcpy(copy, data, size);
	copy[size] = '\0';
	argv[argc++] = "fuzz";
	for (char *p = copy, *nl; p && argc < 65; p = nl ? nl + 1 : NULL) {
		nl = memchr(p, '\n', (size_t)(copy + size - p));
		if (nl)
			*nl = '\0';
		argv[argc++] = p;
	}
	argv[argc] = NULL;
	memcpy(orig, argv, sizeof argv);
	int first = opt_parse_err(&spec, argc, argv, err, sizeof err);
	if (first >= 0) {
		if (first < 1 || first > argc)
			abort();
		/* a permutation of the arguments: each pointer once */
		for (int i = 1; i < argc; i++) {
			int seen = 0;
			for (int j = 1; j < argc; j++)
				seen += argv[j] == orig[i];
			if (seen != 1)
				abort();
		}
		for (int i = first; i < argc; i++)   /* an operand is no option, unless after "--" */
			if (argv[i][0] == '-' && argv[i][1] && strcmp(argv[first - 1], "--") != 0)
				abort();
	} else if (first == -1 && !err[0]) {
		abort();   /* an error always says what */
	}
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct optgroup groups[] = {{opts, handle, NULL, NULL}, {0}};
	struct optspec spec = {"[options]", "fuzz", groups, NULL, 0};
	static const char *const deny[] = {"config", NULL};
	char err[2048];
	opt_parse_file(&spec, fuzz_file("watchdog.conf", data, size), deny, err, sizeof err);
	parse_argv(data, size);
	return 0;
}
