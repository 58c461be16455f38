#include "opt.h"

#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"

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

static void bad(const struct optspec *spec, const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "%s: ", prog_name);
	fprintf(stderr, fmt, a, b);
	fputc('\n', stderr);
	opt_usage(spec, stderr);
	fprintf(stderr, "Try '%s --help'.\n", prog_name);
	exit(EXIT_USAGE);
}

static void call(const struct optspec *spec, const struct optgroup *g, const struct opt *o,
		 const char *arg)
{
	char err[512] = "";
	if (g->fn(g->ctx, o->key, arg, err, sizeof err) != 0)
		bad(spec, "--%s: %s", o->name, err[0] ? err : "invalid value");
}

int opt_parse(const struct optspec *spec, int argc, char **argv)
{
	int i;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		const struct optgroup *g = NULL;
		const struct opt *o;
		const char *val = NULL;

		if (strcmp(a, "--") == 0)
			return i + 1;
		if (a[0] != '-' || a[1] == '\0')
			return i;  /* operands end the options, as POSIX getopt does */
		if (a[1] == '-') {
			const char *name = a + 2, *eq = strchr(name, '=');
			size_t n = eq ? (size_t)(eq - name) : strlen(name);
			if (n == 4 && strncmp(name, "help", 4) == 0) {
				opt_help(spec, stdout);
				exit(EXIT_OK);
			}
			if (n == 7 && strncmp(name, "version", 7) == 0) {
				printf("%s (lmtk) %s\n", prog_name, LMTK_VERSION);
				exit(EXIT_OK);
			}
			o = find_long(spec, name, n, &g);
			if (!o)
				bad(spec, "unknown option '%s'%s", a, "");
			if (eq) {
				if (!o->arg)
					bad(spec, "--%s takes no value%s", o->name, "");
				val = eq + 1;
			}
		} else {
			o = find_short(spec, a[1], &g);
			if (!o)
				bad(spec, "unknown option '%s'%s", a, "");
			if (a[2]) {
				if (!o->arg)
					bad(spec, "-%s takes no value (write flags separately)%s", a + 1, "");
				val = a + 2;
			}
		}
		if (o->arg && !val) {
			if (i + 1 >= argc)
				bad(spec, "--%s needs a value (%s)", o->name, o->arg);
			val = argv[++i];
		}
		call(spec, g, o, val);
	}
	return i;
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
		if (!o)
			rc = add_problem(err, errlen, "%s:%d: unknown setting '%s'", path, lineno, name);
		else if (o->arg && !*val)
			rc = add_problem(err, errlen, "%s:%d: '%s' needs a value (%s)", path, lineno, name, o->arg);
		else if (!o->arg && *val)
			rc = add_problem(err, errlen, "%s:%d: '%s' takes no value", path, lineno, name);
		else if (g->fn(g->ctx, o->key, o->arg ? val : NULL, why, sizeof why) != 0)
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
