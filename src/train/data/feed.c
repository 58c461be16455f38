/* feed - see feed.h. */
#include "train/data/feed.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file.h"
#include "msg.h"
#include "num.h"
#include "xalloc.h"

static const char *split_names[3] = {"train", "valid", "test"};

/* One dataset of a set before it is built: its prefix, weight and sequence range. */
struct member {
	char *prefix;
	double w;
	int frac;                  /* range given as fractions [s, e) (weighted split paths) */
	double s, e;
};

/* Opens a dataset once, and says where its index caches go when that is not beside it. */
static int open_ds(struct feed *f, const char *prefix, void (*say)(const char *), char *err,
		   size_t errlen)
{
	char note[1024];
	for (int i = 0; i < f->nds; i++)
		if (strcmp(f->ds[i].prefix, prefix) == 0)
			return i;
	struct gptdata_ds *n = realloc(f->ds, (f->nds + 1) * sizeof *n);
	if (!n)
		return xalloc_err(err, errlen, "the list of opened datasets", (f->nds + 1) * sizeof *n);
	f->ds = n;
	memset(&f->ds[f->nds], 0, sizeof *n);
	if (gptdata_open(&f->ds[f->nds], prefix, err, errlen) < 0)
		return -1;
	if (!f->cache_dir) {
		f->ds[f->nds].cache_dir = gptdata_cache_fallback(prefix, note, sizeof note);
		if (note[0])
			say(note);
	}
	return f->nds++;
}

/* Builds one set from its members. */
static int build_set(struct feed *f, int split, const char *name, struct member *mb, int n,
		     int64_t samples, const char *split_str, int seq, uint32_t seed,
		     void (*say)(const char *), char *err, size_t errlen)
{
	struct feed_set *set;
	char line[1024];
	double *raw = calloc(n, sizeof *raw);
	struct feed_set *grown = realloc(f->sets[split], (f->nsets[split] + 1) * sizeof *grown);
	if (!raw || !grown) {
		free(raw);
		return xalloc_err(err, errlen, "a blended dataset's weights and its split's list of sets",
				  0);
	}
	f->sets[split] = grown;
	set = &grown[f->nsets[split]++];
	memset(set, 0, sizeof *set);
	set->name = name ? strdup(name) : NULL;
	set->n = n;
	set->ds = calloc(n, sizeof *set->ds);
	set->weights = calloc(n, sizeof *set->weights);
	set->x = calloc(n, sizeof *set->x);
	if (!set->ds || !set->weights || !set->x) {
		free(raw);
		return xalloc_err(err, errlen, "a blended dataset's members", 0);
	}
	for (int i = 0; i < n; i++)
		raw[i] = mb[i].w;
	int rc = gptdata_blend_weights(raw, n, set->weights, err, errlen);
	free(raw);
	if (rc < 0)
		return -1;
	int empty = 0;
	for (int i = 0; i < n; i++) {
		int d = open_ds(f, mb[i].prefix, say, err, errlen);
		int64_t idx[4], lo, hi;
		if (d < 0)
			return -1;
		set->ds[i] = d;
		if (mb[i].frac) {
			lo = llround(mb[i].s * f->ds[d].n);   /* Python's round: half to even */
			hi = llround(mb[i].e * f->ds[d].n);
			if (fabs(mb[i].s * f->ds[d].n - trunc(mb[i].s * f->ds[d].n)) == 0.5)
				lo = 2 * llround(mb[i].s * f->ds[d].n / 2);
			if (fabs(mb[i].e * f->ds[d].n - trunc(mb[i].e * f->ds[d].n)) == 0.5)
				hi = 2 * llround(mb[i].e * f->ds[d].n / 2);
		} else {
			if (gptdata_split(split_str, f->ds[d].n, idx, err, errlen) < 0)
				return -1;
			lo = idx[split];
			hi = idx[split + 1];
		}
		if (hi <= lo || samples <= 0) {
			empty = 1;
			continue;
		}
		struct gptdata_key k = {.start = lo, .end = hi,
					.num_samples = n == 1 ? samples
							      : gptdata_blend_samples(samples, set->weights[i]),
					.seq_length = seq, .seed = seed};
		char why[512] = "";
		if (gptdata_index_get(&set->x[i], &f->ds[d], &k, f->cache_dir, why, sizeof why) < 0)
			return errf(err, errlen, "%s", why);
		snprintf(line, sizeof line, "%s%s%s: %s split, sequences [%lld, %lld): %lld samples of %d "
			 "tokens, %d epoch%s, index %s%s%s", name ? name : "", name ? ": " : "",
			 f->ds[d].prefix, split_names[split], (long long)lo, (long long)hi,
			 (long long)set->x[i].ns, seq, set->x[i].epochs, set->x[i].epochs > 1 ? "s" : "",
			 set->x[i].cache == GPTDATA_CACHE_HIT ? "from its cache" :
			 set->x[i].cache == GPTDATA_BUILT ? "built and cached" : "built, not cached",
			 set->x[i].cache == GPTDATA_BUILT_UNSAVED ? ": " : "",
			 set->x[i].cache == GPTDATA_BUILT_UNSAVED ? why : "");
		say(line);
	}
	if (empty)
		return 0;   /* a blend needs every dataset in the split: the set stays empty */
	int64_t total = 0;
	for (int i = 0; i < n; i++)
		total += set->x[i].ns;
	set->size = total;
	if (n > 1) {
		set->bidx = malloc(total);
		set->bsample = malloc(total * sizeof *set->bsample);
		if (!set->bidx || !set->bsample)
			return xalloc_err(err, errlen, "a blended dataset's sample index",
					  total * (1 + sizeof *set->bsample));
		if (gptdata_blend(set->weights, n, total, set->bidx, set->bsample) < 0)
			return errf(err, errlen, "cannot blend %d datasets", n);
	}
	return 0;
}

/* "NAME: W S:E PREFIX, W S:E PREFIX" (Megatron-DeepSpeed's parse_data_paths) */
static int parse_group(char *g, char **name, struct member *mb, int max, int *n, const char *flag,
		       char *err, size_t errlen)
{
	char *colon = strchr(g, ':');
	if (!colon)
		return errf(err, errlen, "%s: '%s' is not 'NAME: WEIGHT START:END PREFIX, ...'", flag, g);
	*colon = 0;
	*name = g;
	while (**name == ' ')
		(*name)++;
	*n = 0;
	char *save = NULL;
	for (char *d = strtok_r(colon + 1, ",", &save); d; d = strtok_r(NULL, ",", &save)) {
		char w[64], range[64], prefix[4096], extra[2];
		if (*n == max)
			return errf(err, errlen, "%s: more than %d datasets in group '%s'", flag, max, *name);
		if (sscanf(d, "%63s %63s %4095s %1s", w, range, prefix, extra) != 3)
			return errf(err, errlen, "%s: group '%s': '%s' is not 'WEIGHT START:END PREFIX'",
				    flag, *name, d);
		char *c = strchr(range, ':');
		struct member *m = &mb[(*n)++];
		m->frac = 1;
		if (!c || num_float(w, &m->w) < 0 || m->w < 0)
			return errf(err, errlen, "%s: group '%s': bad weight or range in '%s'", flag, *name, d);
		*c = 0;
		if (num_float(range, &m->s) < 0 || num_float(c + 1, &m->e) < 0 || m->s < 0 || m->e > 1 ||
		    m->s >= m->e)
			return errf(err, errlen, "%s: group '%s': the range in '%s' must be START:END with "
				    "0 <= START < END <= 1", flag, *name, d);
		m->prefix = strdup(prefix);
	}
	if (!*n)
		return errf(err, errlen, "%s: group '%s' has no datasets", flag, *name);
	return 0;
}

/* The groups of one split: from the flag's values, or its -path file's one line of
 * double-quoted groups separated by spaces. */
static int groups_of(const struct feed_config *fc, int split, char ***out, int *n, char *err,
		     size_t errlen)
{
	char *text = NULL;
	size_t len;
	static const char *flags[3] = {"--train-weighted-split-paths", "--valid-weighted-split-paths",
				       "--test-weighted-split-paths"};
	*n = 0;
	*out = NULL;
	if (!fc->wsplit[split])
		return 0;
	if (fc->wsplit_file[split]) {
		if (file_read_all(fc->wsplit[split], &text, &len, err, errlen) < 0)
			return -1;
		while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
			text[--len] = 0;
		if (len < 2 || text[0] != '"' || text[len - 1] != '"' || strchr(text, '\n')) {
			free(text);
			return errf(err, errlen, "%s-path %s: expected one line of double-quoted groups",
				    flags[split], fc->wsplit[split]);
		}
		text[len - 1] = 0;
		char *p = text + 1, *q;
		char **v = NULL;
		int k = 0;
		while (p) {
			q = strstr(p, "\" \"");
			if (q)
				*q = 0;
			v = realloc(v, (k + 1) * sizeof *v);
			v[k++] = strdup(p);
			p = q ? q + 3 : NULL;
		}
		free(text);
		*out = v;
		*n = k;
	} else {
		char *copy = strdup(fc->wsplit[split]), *save = NULL;
		char **v = NULL;
		int k = 0;
		for (char *t = strtok_r(copy, fc->wsplit_sep, &save); t;
		     t = strtok_r(NULL, fc->wsplit_sep, &save)) {
			v = realloc(v, (k + 1) * sizeof *v);
			v[k++] = strdup(t);
		}
		free(copy);
		*out = v;
		*n = k;
	}
	if (split == FEED_TRAIN && *n != 1)
		return errf(err, errlen, "%s: exactly one group, not %d", flags[split], *n);
	return 0;
}

/* --model-type bert: BertDataset over each split of the one sentence dataset (t5: T5Dataset).  A
 * split without documents (or asked for no samples) is an empty set, as Megatron builds no
 * dataset for it. */
static int open_bert(struct feed *f, const struct feed_config *fc, const int64_t samples[3],
		     int seq, void (*say)(const char *), char *err, size_t errlen)
{
	char why[1024], line[1200];
	int t5 = fc->kind == FEED_T5;
	const char *kind = t5 ? "T5" : "BERT";
	if (fc->ndata_path != 1)
		return errf(err, errlen, "--model-type %s: --data-path takes one sentence dataset "
			    "PREFIX (blends are not implemented for %s)", t5 ? "t5" : "bert", kind);
	if (bertdata_vocab_load(&f->bvocab, fc->vocab_file, t5 ? (int32_t)fc->vocab_extra_ids : 0,
				err, errlen) < 0)
		return -1;
	f->bert = 1;
	f->t5 = t5;
	for (int s = 0; s < 3; s++) {
		struct feed_set *set = calloc(1, sizeof *set);
		if (!set)
			return xalloc_err(err, errlen, "a masked-LM dataset split", sizeof *set);
		f->sets[s] = set;
		f->nsets[s] = 1;
		if (samples[s] <= 0)
			continue;
		struct bertdata_config c;
		bertdata_config_default(&c, t5 ? BERTDATA_T5 : BERTDATA_BERT);
		c.split = fc->split ? fc->split : "969, 30, 1";
		c.which = s;
		c.num_samples = (uint64_t)samples[s];
		c.seq_length = seq;
		c.mask_prob = fc->mask_prob;
		c.short_seq_prob = fc->short_seq_prob;
		c.seed = (int32_t)fc->seed;
		c.binary_head = !t5 && fc->binary_head;
		if (t5)
			c.dec_seq_length = (int32_t)fc->dec_seq;
		if (bertdata_open(&f->bd[s], fc->data_path[0], &c, &f->bvocab, why, sizeof why) < 0) {
			if (s > 0 && strstr(why, "has no documents"))
				continue;   /* Megatron: no valid/test dataset */
			return errf(err, errlen, "--data-path %s", why);
		}
		f->bd_open[s] = 1;
		set->size = f->bd[s].n;
		char len[64];
		snprintf(len, sizeof len, t5 ? "%d + %lld" : "%d", seq, (long long)fc->dec_seq);
		snprintf(line, sizeof line, "%s: %s split, documents [%lld, %lld): %lld %s samples of "
			 "%s tokens for the %lld asked (Megatron's samples mapping, seed %lld)",
			 fc->data_path[0], split_names[s], (long long)f->bd[s].split[s],
			 (long long)f->bd[s].split[s + 1], (long long)set->size, kind, len,
			 (long long)samples[s], (long long)fc->seed);
		say(line);
	}
	return 0;
}

/* sample i of a split's BertDataset or T5Dataset, wrapped around its size: -1 + err when the
 * split is empty */
static int64_t masked_index(struct feed *f, int split, int64_t i, char *err, size_t errlen)
{
	if (!f->bd_open[split] || f->sets[split][0].size == 0)
		return errf(err, errlen, "the %s split is empty: check --split", split_names[split]);
	int64_t n = f->sets[split][0].size;
	if (i >= n) {
		if (!f->wrapped++)
			warn("warning: the %s set has %lld samples and sample %lld was asked for: "
			     "wrapping around (skipped or rolled-back iterations consumed extra data)",
			     split_names[split], (long long)n, (long long)i);
		i %= n;
	}
	return i;
}

int feed_get_bert(struct feed *f, int split, int64_t i, struct bert_sample *s, char *err,
		  size_t errlen)
{
	if ((i = masked_index(f, split, i, err, errlen)) < 0)
		return -1;
	return bertdata_bert_get(&f->bd[split], i, s, err, errlen);
}

int feed_get_t5(struct feed *f, int split, int64_t i, struct t5_sample *s, char *err,
		size_t errlen)
{
	if ((i = masked_index(f, split, i, err, errlen)) < 0)
		return -1;
	return bertdata_t5_get(&f->bd[split], i, s, err, errlen);
}

int feed_open(struct feed *f, const struct feed_config *fc, const int64_t samples[3],
	      void (*say)(const char *line), char *err, size_t errlen)
{
	struct member mb[FEED_MAX_DATA];
	int seq = fc->seq;
	uint32_t seed = (uint32_t)fc->seed;
	memset(f, 0, sizeof *f);
	f->seq = seq;
	f->cache_dir = fc->cache_dir;
	if (fc->kind == FEED_BERT || fc->kind == FEED_T5)
		return open_bert(f, fc, samples, seq, say, err, errlen);
	if (fc->weighted_split_paths || fc->wsplit[1] || fc->wsplit[2]) {
		if (fc->ndata_path)
			return errf(err, errlen, "--data-path and --*-weighted-split-paths are mutually "
				    "exclusive");
		if (!fc->weighted_split_paths)
			return errf(err, errlen, "--valid/test-weighted-split-paths need "
				    "--train-weighted-split-paths");
		for (int s = 0; s < 3; s++) {
			char **g;
			int ng, n;
			if (groups_of(fc, s, &g, &ng, err, errlen) < 0)
				return -1;
			for (int i = 0; i < ng; i++) {
				char *name = NULL;
				n = 0;
				memset(mb, 0, sizeof mb);
				if (parse_group(g[i], &name, mb, FEED_MAX_DATA, &n,
						split_names[s], err, errlen) < 0 ||
				    build_set(f, s, name, mb, n, samples[s], NULL, seq, seed, say, err,
					      errlen) < 0)
					return -1;
				for (int k = 0; k < n; k++)
					free(mb[k].prefix);
				free(g[i]);
			}
			free(g);
		}
		return 0;
	}
	if (fc->ndata_path < 1)
		return errf(err, errlen, "no --data-path: train needs a Megatron dataset (tokenize | "
			    "mkindex makes one)");
	if (fc->ndata_path > 1 && fc->ndata_path % 2)
		return errf(err, errlen, "--data-path: %d values; expected PREFIX or pairs WEIGHT "
			    "PREFIX", fc->ndata_path);
	int n = fc->ndata_path == 1 ? 1 : fc->ndata_path / 2;
	memset(mb, 0, sizeof mb);
	for (int i = 0; i < n; i++) {
		mb[i].prefix = (char *)(fc->ndata_path == 1 ? fc->data_path[0]
					: fc->data_path[2 * i + 1]);
		mb[i].w = 1;
		if (fc->ndata_path > 1 && (num_float(fc->data_path[2 * i], &mb[i].w) < 0 || mb[i].w < 0))
			return errf(err, errlen, "--data-path: '%s' is not a weight (pairs WEIGHT PREFIX)",
				    fc->data_path[2 * i]);
	}
	for (int s = 0; s < 3; s++)
		if (build_set(f, s, NULL, mb, n, samples[s], fc->split ? fc->split : "969, 30, 1", seq,
			      seed, say, err, errlen) < 0)
			return -1;
	return 0;
}

int feed_get(struct feed *f, int split, int si, int64_t i, int32_t *tokens, char *err,
	     size_t errlen)
{
	struct feed_set *set = si < f->nsets[split] ? &f->sets[split][si] : NULL;
	if (!set || set->size == 0)
		return errf(err, errlen, "the %s split is empty: check --split or the weighted split "
			    "paths", split_names[split]);
	if (i >= set->size) {
		if (!f->wrapped++)
			warn("warning: the %s set has %lld samples and sample %lld was asked for: "
			     "wrapping around (skipped or rolled-back iterations consumed extra data)",
			     split_names[split], (long long)set->size, (long long)i);
		i %= set->size;
	}
	int d = 0;
	int64_t j = i;
	if (set->n > 1) {
		d = set->bidx[i];
		j = set->bsample[i];
	}
	return gptdata_sample(&f->ds[set->ds[d]], &set->x[d], j, tokens, err, errlen);
}

void feed_close(struct feed *f)
{
	for (int s = 0; s < 3; s++) {
		for (int k = 0; k < f->nsets[s]; k++) {
			struct feed_set *set = &f->sets[s][k];
			for (int i = 0; i < set->n && set->x; i++)
				gptdata_index_free(&set->x[i]);
			free(set->x);
			free(set->ds);
			free(set->weights);
			free(set->bidx);
			free(set->bsample);
			free(set->name);
		}
		free(f->sets[s]);
	}
	for (int i = 0; i < f->nds; i++)
		gptdata_close(&f->ds[i]);
	free(f->ds);
	for (int s = 0; s < 3; s++)
		if (f->bd_open[s])
			bertdata_close(&f->bd[s]);
	if (f->bert)
		bertdata_vocab_free(&f->bvocab);
	memset(f, 0, sizeof *f);
}
