#include "opt.h"

#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "msg.h"
#include "xalloc.h"

/* isalpha() is defined only for unsigned char values: the long-only keys (alert_opts uses 1000
 * and up) would index past its table, and "-\xc3" would pass a negative char */
static int is_short(int key)
{
	return key > 0 && key < 128 && isalpha(key);
}

static const struct opt *find_long(const struct optspec *spec, const char *name, size_t n,
				   const struct optgroup **grp)
{
	for (const struct optgroup *g = spec->groups; g->opts; g++)
		for (const struct opt *o = g->opts; o->name; o++)
			if (strlen(o->name) == n && strncmp(o->name, name, n) == 0) {
				*grp = g;
				return o;
			}
	return NULL;
}

static const struct opt *find_short(const struct optspec *spec, int c, const struct optgroup **grp)
{
	for (const struct optgroup *g = spec->groups; g->opts; g++)
		for (const struct opt *o = g->opts; o->name; o++)
			if (o->key == c && is_short(c)) {
				*grp = g;
				return o;
			}
	return NULL;
}

/* "KEY..." (or a metavar of several words, "START INCR SAMPLES") takes several values; "FILE..."
 * several files (a file then is not an operand) */
static int is_multi(const struct opt *o)
{
	size_t n = o->arg ? strlen(o->arg) : 0;
	return (n > 3 && strcmp(o->arg + n - 3, "...") == 0) || (n && strchr(o->arg, ' '));
}

static int values_are_files(const struct opt *o)
{
	return strncmp(o->arg, "FILE", 4) == 0;
}

/* argparse reads "-1" or "-.5" as a value, anything else starting with '-' as an option */
static int is_value(const char *s)
{
	return s[0] != '-' || isdigit((unsigned char)s[1]) || (s[1] == '.' && s[2]);
}

static int names_a_file(const char *s)
{
	struct stat st;
	return stat(s, &st) == 0 && !S_ISDIR(st.st_mode);
}

void opt_usage(const struct optspec *spec, FILE *f)
{
	fprintf(f, "usage: %s %s\n", prog_name, spec->usage);
}

void opt_help(const struct optspec *spec, FILE *f)
{
	opt_usage(spec, f);
	if (spec->about)
		fprintf(f, "\n%s\n", spec->about);
	fprintf(f, "\noptions:\n");
	for (const struct optgroup *g = spec->groups; g->opts; g++)
		for (const struct opt *o = g->opts; o->name; o++) {
			char left[128], shrt[8] = "    ";
			if (!o->help)
				continue;
			if (is_short(o->key))
				snprintf(shrt, sizeof shrt, "-%c, ", o->key);
			snprintf(left, sizeof left, "%s--%s%s%s", shrt, o->name, o->arg ? " " : "",
				 o->arg ? o->arg : "");
			fprintf(f, "  %-30s %s\n", left, o->help);
		}
	fprintf(f, "  %-30s %s\n  %-30s %s\n", "    --help", "show this help and exit",
		"    --version", "show the version and exit");
	fprintf(f, "\nSee %s(1).\n", prog_name);
}

/* one parse of argv: an error anywhere in it ends the parse (longjmp) with its message */
struct pstate {
	const struct optspec *spec;
	jmp_buf jb;
	char *err;
	size_t errlen;
};

static void bad(struct pstate *st, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void bad(struct pstate *st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(st->err, st->errlen, fmt, ap);
	va_end(ap);
	longjmp(st->jb, 1);
}

/* --- did you mean ------------------------------------------------------------------------- */

/* Edit distance with adjacent swaps (Damerau's optimal string alignment), '_' and '-' the same:
 * Megatron spells a few flags with '_'.  Only the short names of options are compared. */
static size_t distance(const char *a, size_t n, const char *b)
{
	size_t m = strlen(b), d[64][64];
	if (n >= 64 || m >= 64)
		return 64;
	for (size_t i = 0; i <= n; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= m; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= n; i++)
		for (size_t j = 1; j <= m; j++) {
			char x = a[i - 1] == '_' ? '-' : a[i - 1], y = b[j - 1] == '_' ? '-' : b[j - 1];
			size_t v = d[i - 1][j - 1] + (x != y);
			if (d[i - 1][j] + 1 < v)
				v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	return d[n][m];
}

/* How far the typed name is from an option's: 0 when it is a prefix of it (of 3 or more
 * characters: "--verb"), else the edit distance if small for its length (a third of it, as a
 * typo is a letter or two), else -1. */
static int similarity(const char *typed, size_t n, const char *name)
{
	size_t d;
	if (n >= 3 && strncmp(name, typed, n) == 0)
		return 0;
	d = distance(typed, n, name);
	return d <= (n < 6 ? 1 : n / 3 > 3 ? 3 : n / 3) ? (int)d : -1;
}

/* "; did you mean --a, --b?" for an unknown "--typed", or "" */
static void suggest(const struct optspec *spec, const char *typed, size_t n, const char *dashes,
		    char *out, size_t len)
{
	int best = 99, count = 0;
	size_t used;
	out[0] = '\0';
	for (int pass = 0; pass < 2; pass++)
		for (const struct optgroup *g = spec->groups; g->opts; g++)
			for (const struct opt *o = g->opts; o->name; o++) {
				int s = similarity(typed, n, o->name);
				if (s < 0)
					continue;
				if (pass == 0 && s < best)
					best = s;
				if (pass == 1 && s == best && count < 4) {
					used = strlen(out);
					snprintf(out + used, len - used, "%s%s%s", count == 0 ? "; did you mean " :
						 count == 3 ? ", ..." : ", ", count == 3 ? "" : dashes,
						 count == 3 ? "" : o->name);
					count++;
				}
			}
	if (count) {
		used = strlen(out);
		snprintf(out + used, len - used, "?");
	}
}

/* --- argv --------------------------------------------------------------------------------- */

/* Calls the handler for one option: a flag or a value, or the values of one occurrence of a
 * several-values flag. */
static int handle(const struct optgroup *g, const struct opt *o, const char *const *vals, int n,
		  char *err, size_t errlen)
{
	int rc = 0;
	if (is_multi(o) && g->multi)
		return g->multi(g->ctx, o->key, vals, n, err, errlen);
	if (n == 0)
		return g->fn(g->ctx, o->key, NULL, err, errlen);
	for (int i = 0; i < n && rc == 0; i++)
		rc = g->fn(g->ctx, o->key, vals[i], err, errlen);
	return rc;
}

static void call(struct pstate *st, const struct optgroup *g, const struct opt *o,
		 const char *const *vals, int n)
{
	char err[512] = "";
	if (handle(g, o, vals, n, err, sizeof err) != 0)
		bad(st, "--%s: %s", o->name, err[0] ? err : "invalid value");
}

/* A long name that is not an option: a hint, an abbreviation (where allowed), or an error */
static const struct opt *resolve_long(struct pstate *st, const char *arg, const char *name,
				      size_t n, const char *eqval, const char *next,
				      const struct optgroup **grp)
{
	const struct optspec *spec = st->spec;
	const struct opt *o = find_long(spec, name, n, grp), *hit = NULL;
	char cands[1024] = "", more[256];
	int hits = 0;
	if (o)
		return o;
	for (const struct opt_hint *h = spec->hints; h && h->name; h++) {
		const char *pct;
		if (strlen(h->name) != n || strncmp(h->name, name, n) != 0)
			continue;
		const char *val = eqval ? eqval : !h->arg ? "" : next && is_value(next) ? next : h->arg;
		pct = strstr(h->text, "%s");
		if (!pct)
			bad(st, "%s", h->text);
		bad(st, "%.*s%s%s", (int)(pct - h->text), h->text, val, pct + 2);
	}
	if (spec->abbrev && n > 0)
		for (const struct optgroup *g = spec->groups; g->opts; g++)
			for (const struct opt *p = g->opts; p->name; p++)
				if (strncmp(p->name, name, n) == 0) {
					size_t used = strlen(cands);
					if (hits < 12)
						snprintf(cands + used, sizeof cands - used, "%s--%s", hits ? ", " : "", p->name);
					else if (hits == 12)
						snprintf(cands + used, sizeof cands - used, ", ...");
					hit = p;
					*grp = g;
					hits++;
				}
	if (hits == 1)
		return hit;
	if (hits > 1)
		bad(st, "--%.*s is ambiguous: %s?", (int)n, name, cands);
	suggest(spec, name, n, "--", more, sizeof more);
	bad(st, "unknown option '%s'%s", arg, more);
}

int opt_parse_err(const struct optspec *spec, int argc, char **argv, char *err, size_t errlen)
{
	/* options (with their values) and operands, each in order, put back into argv at the end */
	char **optv = malloc(sizeof *optv * (size_t)(argc + 1));
	char **opsv = malloc(sizeof *opsv * (size_t)(argc + 1));
	const char **vals = malloc(sizeof *vals * (size_t)(argc + 1));
	struct pstate st = {.spec = spec, .err = err, .errlen = errlen};
	int nopt = 0, nops = 0, i, rc = 0;

	if (!optv || !opsv || !vals)
		xalloc_die("the command line's parsed arguments", 0);
	if (errlen)
		err[0] = '\0';
	if (setjmp(st.jb)) {
		rc = -1;
		goto out;
	}
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		const struct optgroup *g = NULL;
		const struct opt *o;
		const char *val = NULL;
		int nval = 0;

		if (strcmp(a, "--") == 0) {
			optv[nopt++] = argv[i++];
			while (i < argc)
				opsv[nops++] = argv[i++];
			break;
		}
		if (a[0] != '-' || a[1] == '\0') {
			opsv[nops++] = argv[i];  /* operands anywhere, handed back after the options */
			continue;
		}
		optv[nopt++] = argv[i];
		if (a[1] == '-') {
			const char *name = a + 2, *eq = strchr(name, '=');
			size_t n = eq ? (size_t)(eq - name) : strlen(name);
			if (n == 4 && strncmp(name, "help", 4) == 0) {
				rc = OPT_HELP;
				goto out;
			}
			if (n == 7 && strncmp(name, "version", 7) == 0) {
				rc = OPT_VERSION;
				goto out;
			}
			o = resolve_long(&st, a, name, n, eq ? eq + 1 : NULL, i + 1 < argc ? argv[i + 1] : NULL, &g);
			if (eq) {
				if (!o->arg)
					bad(&st, "--%s takes no value", o->name);
				val = eq + 1;
			}
		} else {
			o = find_short(spec, a[1], &g);
			if (!o) {
				char more[256];
				suggest(spec, a + 1, strlen(a + 1), "--", more, sizeof more);
				bad(&st, "unknown option '%s'%s", a, strlen(a) > 2 ? more : "");
			}
			if (a[2]) {
				if (!o->arg)
					bad(&st, "-%s takes no value (write flags separately)", a + 1);
				val = a + 2;
			}
		}
		if (val) {
			vals[nval++] = val;
		} else if (o->arg && !is_multi(o)) {
			if (i + 1 >= argc)
				bad(&st, "--%s needs a value (%s)", o->name, o->arg);
			vals[nval++] = argv[++i];
			optv[nopt++] = argv[i];
		} else if (o->arg) {
			/* several values: up to the next option, or a file that is an operand */
			while (i + 1 < argc && is_value(argv[i + 1]) &&
			       (nval == 0 || values_are_files(o) || !names_a_file(argv[i + 1]))) {
				vals[nval++] = argv[++i];
				optv[nopt++] = argv[i];
			}
			if (nval == 0)
				bad(&st, "--%s needs a value (%s)", o->name, o->arg);
		}
		call(&st, g, o, vals, nval);
	}
	memcpy(argv + 1, optv, sizeof *optv * (size_t)nopt);
	memcpy(argv + 1 + nopt, opsv, sizeof *opsv * (size_t)nops);
	rc = 1 + nopt;
out:
	free(optv);
	free(opsv);
	free(vals);
	return rc;
}

int opt_parse(const struct optspec *spec, int argc, char **argv)
{
	char err[1024];
	int rc = opt_parse_err(spec, argc, argv, err, sizeof err);
	if (rc == OPT_HELP) {
		opt_help(spec, stdout);
		exit(EXIT_OK);
	}
	if (rc == OPT_VERSION) {
		printf("%s (lmtk) %s\n", prog_name, LMTK_VERSION);
		exit(EXIT_OK);
	}
	if (rc < 0) {
		fprintf(stderr, "%s: %s\n", prog_name, err);
		opt_usage(spec, stderr);
		fprintf(stderr, "Try '%s --help'.\n", prog_name);
		exit(EXIT_USAGE);
	}
	return rc;
}



/* Adds one "FILE:LINE: ..." problem to err ("; "-separated): every bad line is reported, not
 * just the first, so one typo does not hide the rest of a watchdog's config. */
static int add_problem(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int add_problem(char *err, size_t errlen, const char *fmt, ...)
{
	size_t used = strnlen(err, errlen);
	va_list ap;
	if (used && used + 2 < errlen) {
		memcpy(err + used, "; ", 3);
		used += 2;
	}
	va_start(ap, fmt);
	if (used < errlen)
		vsnprintf(err + used, errlen - used, fmt, ap);
	va_end(ap);
	return -1;
}

int opt_parse_file(const struct optspec *spec, const char *path, const char *const *deny,
		   char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int lineno = 0, rc = 0;

	if (!f)
		return errf(err, errlen, "%s: %s", path, strerror(errno));
	if (errlen)
		err[0] = '\0';
	while ((len = getline(&line, &cap, f)) >= 0) {
		char *p = line, *name, *val, *end, *hash;
		const struct optgroup *g = NULL;
		const struct opt *o;
		char why[512] = "";

		lineno++;
		/* a NUL byte would cut the line short unseen ("mail-to a@b\0c@evil" read as
		 * "mail-to a@b"): the whole line is refused, naming where the byte is */
		const char *nul = memchr(line, '\0', (size_t)len);
		if (nul) {
			rc = add_problem(err, errlen, "%s:%d: a NUL byte at column %d; the line is refused "
					 "(is this a text file?)", path, lineno, (int)(nul - line) + 1);
			continue;
		}
		/* a '#' after whitespace starts a comment: "check /x:space=85%  # scratch" */
		for (hash = line; (hash = strchr(hash, '#')); hash++)
			if (hash > line && isspace((unsigned char)hash[-1])) {
				*hash = '\0';
				len = hash - line;
				break;
			}
		while (len > 0 && isspace((unsigned char)line[len - 1]))
			line[--len] = '\0';
		while (isspace((unsigned char)*p))
			p++;
		if (*p == '\0' || *p == '#')
			continue;
		name = p;
		while (*p && !isspace((unsigned char)*p))
			p++;
		end = p;
		while (isspace((unsigned char)*p))
			p++;
		val = p;
		*end = '\0';
		o = find_long(spec, name, strlen(name), &g);
		for (const char *const *d = deny; o && d && *d; d++)
			if (strcmp(*d, name) == 0)
				o = NULL;
		if (!o) {
			char more[256];
			suggest(spec, name, strlen(name), "", more, sizeof more);
			rc = add_problem(err, errlen, "%s:%d: unknown setting '%s'%s", path, lineno, name, more);
		}
		else if (o->arg && !*val)
			rc = add_problem(err, errlen, "%s:%d: '%s' needs a value (%s)", path, lineno, name, o->arg);
		else if (!o->arg && *val)
			rc = add_problem(err, errlen, "%s:%d: '%s' takes no value", path, lineno, name);
		else if (handle(g, o, (const char *const[]){val}, o->arg ? 1 : 0, why, sizeof why) != 0)
			rc = add_problem(err, errlen, "%s:%d: %s: %s", path, lineno, name,
					 why[0] ? why : "invalid value");
	}
	if (ferror(f))
		rc = add_problem(err, errlen, "%s: read error", path);
	free(line);
	fclose(f);
	return rc;
}

const char *opt_peek(int argc, char **argv, const char *name)
{
	size_t n = strlen(name);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0)
			break;
		if (strncmp(a, "--", 2) != 0 || strncmp(a + 2, name, n) != 0)
			continue;
		if (a[2 + n] == '=')
			return a + 3 + n;
		if (a[2 + n] == '\0' && i + 1 < argc)
			return argv[i + 1];
	}
	return NULL;
}
