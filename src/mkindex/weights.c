/* weights - a catalogue of datasets and sampling ratios -> Megatron-DeepSpeed's weighted split
 * paths, as BigScience built the 176B run's data mix.
 *
 * The catalogue is a JSON list of {"dataset_path": PREFIX, "ratio": R} (and an optional "name").
 * Megatron-DeepSpeed takes the mix as groups "NAME: W S:E PREFIX, W S:E PREFIX, ...": one group
 * for training (--train-weighted-split-paths), any number for validation and test, each a named
 * set with its own loss in the log and TensorBoard.  S:E is the fraction of each dataset's
 * sequences that the group reads, so one catalogue gives disjoint train and valid sets: the
 * train group reads every dataset's [0, 0.95) at its ratio, the valid group the same datasets'
 * [0.95, 1] at the same ratios, and one more valid group per dataset, valid_NAME, reads that
 * dataset's [0.95, 1] alone - the per-language validation losses of the 176B run.  Megatron
 * normalises the weights within a group, so the ratios need not sum to 1; they are printed as
 * given, in the shortest form that reads back as the same double.
 *
 * The group syntax has no quoting: Megatron splits a group at its first ':', the datasets at ','
 * and each dataset at blanks, and a -path file separates groups with '" "'.  A prefix or name
 * that would be cut there is refused here, naming the catalogue entry, rather than read back as
 * something else by train.  Only the text is made: the datasets are not opened (train does). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "msg.h"
#include "xalloc.h"

/* the shortest %g that strtod() reads back as x (Python's repr does the same for its floats) */
static void shortest(double x, char *buf, size_t len)
{
	for (int p = 1; p <= 17; p++) {
		snprintf(buf, len, "%.*g", p, x);
		if (strtod(buf, NULL) == x)
			return;
	}
}

/* the name of a per-dataset set: the directory the prefix is in (BigScience kept one directory
 * per language), or the prefix itself when it has none */
static const char *dir_name(const char *path, char *buf, size_t len)
{
	const char *slash = strrchr(path, '/'), *start;
	if (!slash)
		return path;
	while (slash > path && slash[-1] == '/')
		slash--;
	for (start = slash; start > path && start[-1] != '/'; start--)
		;
	if (start == slash)   /* "/x" or "x//y" at the root: no directory name */
		return path;
	snprintf(buf, len, "%.*s", (int)(slash - start), start);
	return buf;
}

/* what in s the group syntax would cut at (bad: the characters a name or prefix may not hold) */
static const char *cut_at(const char *s, const char *bad)
{
	for (const char *p = s; *p; p++)
		if (strchr(bad, *p) || (unsigned char)*p < 0x20)
			return p;
	return NULL;
}

/* the message for the character p of v (entry i's key) that the group syntax would cut at */
static int bad_char(char *err, size_t errlen, const char *file, size_t i, const char *key,
		    const char *v, const char *p)
{
	char c[8];
	if (*p == ' ')
		snprintf(c, sizeof c, "a blank");
	else if ((unsigned char)*p < 0x20)
		snprintf(c, sizeof c, "\\x%02x", (unsigned char)*p);
	else
		snprintf(c, sizeof c, "'%c'", *p);
	return errf(err, errlen, "%s: [%zu].%s: '%s' holds %s, which Megatron's weighted split paths "
		    "cannot: %s", file, i, key, v, c,
		    strcmp(key, "name") == 0 ? "pick another name"
		    : *p != ':' ? "rename or link the dataset to a path without it"
				: "give the entry a \"name\" without it");   /* its directory's name */
}

void weights_free(struct weights_cat *c)
{
	for (size_t i = 0; c->e && i < c->n; i++)
		free(c->e[i].name);
	free(c->e);
	json_decref(c->doc);
	memset(c, 0, sizeof *c);
}

#define BAD(...) do { errf(err, errlen, __VA_ARGS__); goto fail; } while (0)

int weights_load(const char *file, struct weights_cat *c, char *err, size_t errlen)
{
	json_error_t je;
	char buf[4096];

	memset(c, 0, sizeof *c);
	c->doc = json_load_file(file, JSON_REJECT_DUPLICATES, &je);
	if (!c->doc) {
		if (je.line <= 0)   /* not read at all (missing, unreadable): jansson's text says why */
			return errf(err, errlen, "%s: %s", file, je.text);
		return errf(err, errlen, "%s:%d:%d: %s", file, je.line, je.column, je.text);
	}
	if (!json_is_array(c->doc))
		BAD("%s: not a JSON list of {\"dataset_path\": PREFIX, \"ratio\": R} objects", file);
	if (json_array_size(c->doc) == 0)
		BAD("%s: the catalogue lists no datasets", file);
	c->e = xcalloc(json_array_size(c->doc), sizeof *c->e, "the catalogue's entries");
	for (size_t i = 0; i < json_array_size(c->doc); i++) {
		struct weights_entry *e = &c->e[i];
		json_t *o = json_array_get(c->doc, i), *v;
		const char *k, *p;
		c->n = i + 1;
		if (!json_is_object(o))
			BAD("%s: [%zu]: not an object {\"dataset_path\": PREFIX, \"ratio\": R}", file, i);
		json_object_foreach(o, k, v) {
			if (strcmp(k, "dataset_path") == 0 || strcmp(k, "name") == 0) {
				int name = k[0] == 'n';
				const char *sv = json_string_value(v);
				if (!sv || !sv[0] || strlen(sv) != json_string_length(v))
					BAD("%s: [%zu].%s: not a non-empty string", file, i, k);
				/* a name is before the group's first ':'; a prefix may hold ':' */
				if ((p = cut_at(sv, name ? " \t:,\"'" : " \t,\"'"))) {
					bad_char(err, errlen, file, i, k, sv, p);
					goto fail;
				}
				if (name)
					e->name = xstrdup(sv, "a validation set's name");
				else
					e->path = sv;
			} else if (strcmp(k, "ratio") == 0) {
				if (!json_is_number(v))
					BAD("%s: [%zu].ratio: not a number", file, i);
				e->ratio = json_number_value(v);
				if (!(e->ratio > 0) || !isfinite(e->ratio)) {
					shortest(e->ratio, buf, sizeof buf);
					BAD("%s: [%zu].ratio: %s is not a positive number (a dataset that is "
					    "not sampled is left out of the catalogue)", file, i, buf);
				}
			} else {
				BAD("%s: [%zu]: unknown key \"%s\"; an entry has dataset_path, ratio and "
				    "optionally name", file, i, k);
			}
		}
		if (!e->path || !json_object_get(o, "ratio"))
			BAD("%s: [%zu]: no \"%s\"", file, i, e->path ? "ratio" : "dataset_path");
		if (!e->name) {
			const char *d = dir_name(e->path, buf, sizeof buf);
			if ((p = cut_at(d, " \t:,\"'"))) {   /* the directory's name becomes a set's name */
				bad_char(err, errlen, file, i, "dataset_path", e->path, p);
				goto fail;
			}
			e->name = xstrdup(d, "a validation set's name");
		}
		for (size_t j = 0; j < i; j++) {
			if (strcmp(c->e[j].path, e->path) == 0)
				BAD("%s: [%zu] and [%zu] both list %s: give each dataset once, with its "
				    "whole ratio", file, j, i, e->path);
			if (strcmp(c->e[j].name, e->name) == 0)
				BAD("%s: [%zu] and [%zu] would both name a set '%s' (%s and %s): give one "
				    "of them a \"name\"", file, j, i, e->name, c->e[j].path, e->path);
		}
	}
	return 0;
fail:
	weights_free(c);
	return -1;
}

/* The groups of one split, each written as `quote` GROUP `quote`, separated by `sep`. */
static void print_groups(const struct weights_opts *o, const struct weights_entry *e, size_t n, int split,
			 const char *quote, const char *sep)
{
	static const char *names[3] = {"train", "valid", "test"};
	char w[64], s[64], t[64], range[160];
	shortest(o->range[split][0], s, sizeof s);
	shortest(o->range[split][1], t, sizeof t);
	snprintf(range, sizeof range, "%s:%s", s, t);
	printf("%s%s:", quote, names[split]);
	for (size_t i = 0; i < n; i++) {
		shortest(e[i].ratio, w, sizeof w);
		printf("%s %s %s %s", i ? "," : "", w, range, e[i].path);
	}
	printf("%s", quote);
	if (split == 0 || o->no_per_dataset)
		return;
	for (size_t i = 0; i < n; i++)
		printf("%s%s%s_%s: 1 %s %s%s", sep, quote, names[split], e[i].name, range, e[i].path,
		       quote);
}

int cmd_weights(const char *file, const struct weights_opts *o)
{
	static const char *flags[3] = {"--train-weighted-split-paths", "--valid-weighted-split-paths",
				       "--test-weighted-split-paths"};
	struct weights_cat c;
	char err[8192];

	if (weights_load(file, &c, err, sizeof err) < 0)
		die(EXIT_USAGE, "%s", err);

	/* overlapping ranges are allowed (Megatron does not mind) but rarely meant */
	for (int a = 0; a < 3; a++)
		for (int b = a + 1; b < 3; b++)
			if (o->has_range[a] && o->has_range[b] && o->range[a][0] < o->range[b][1] &&
			    o->range[b][0] < o->range[a][1])
				warn("warning: the %s range overlaps the %s range: those sequences are in "
				     "both sets", a == 0 ? "train" : "valid",
				     b == 1 ? "valid" : "test");
	if (o->split >= 0) {
		/* a --SPLIT-weighted-split-paths-path file: one line of double-quoted groups */
		print_groups(o, c.e, c.n, o->split, "\"", " ");
		printf("\n");
	} else {
		/* the flags, for a shell (eval, or pasted into a script): single-quoted groups, which
		 * hold no ' (refused above) */
		int first = 1;
		for (int s = 0; s < 3; s++) {
			if (!o->has_range[s])
				continue;
			printf("%s%s ", first ? "" : " \\\n", flags[s]);
			print_groups(o, c.e, c.n, s, "'", " \\\n    ");
			first = 0;
		}
		printf("\n");
	}
	if (fflush(stdout) != 0 || ferror(stdout))
		die(EXIT_FAILED, "standard output: write error");
	weights_free(&c);
	return EXIT_OK;
}
