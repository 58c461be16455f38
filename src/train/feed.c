/* feed - see feed.h. */
#include "train/feed.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"

static const char *split_names[3] = {"train", "valid", "test"};

int feed_open(struct feed *f, const struct train_args *a, const int64_t samples[3], int seq,
	      uint32_t seed, void (*say)(const char *line), char *err, size_t errlen)
{
	char line[1024];
	memset(f, 0, sizeof *f);
	f->seq = seq;
	if (a->ndata_path < 1)
		return errf(err, errlen, "no --data-path: train needs a Megatron dataset (tokenize | "
			    "mkindex makes one)");
	int n = a->ndata_path == 1 ? 1 : a->ndata_path / 2;
	if (a->ndata_path > 1 && a->ndata_path % 2)
		return errf(err, errlen, "--data-path: %d values; expected PREFIX or pairs WEIGHT "
			    "PREFIX", a->ndata_path);
	double *w = calloc(n, sizeof *w);
	f->weights = calloc(n, sizeof *f->weights);
	f->ds = calloc(n, sizeof *f->ds);
	for (int s = 0; s < 3; s++)
		f->x[s] = calloc(n, sizeof *f->x[s]);
	if (!w || !f->weights || !f->ds || !f->x[0] || !f->x[1] || !f->x[2])
		return errf(err, errlen, "out of memory");
	f->nds = n;
	for (int i = 0; i < n; i++) {
		const char *prefix = n == 1 && a->ndata_path == 1 ? a->data_path[0] : a->data_path[2 * i + 1];
		if (a->ndata_path > 1 && (args_float(a->data_path[2 * i], &w[i]) < 0 || w[i] < 0)) {
			free(w);
			return errf(err, errlen, "--data-path: '%s' is not a weight (pairs WEIGHT PREFIX)",
				    a->data_path[2 * i]);
		}
		if (a->ndata_path == 1)
			w[i] = 1;
		if (gptdata_open(&f->ds[i], prefix, err, errlen) < 0) {
			free(w);
			return -1;
		}
	}
	if (gptdata_blend_weights(w, n, f->weights, err, errlen) < 0) {
		free(w);
		return -1;
	}
	free(w);
	for (int i = 0; i < n; i++) {
		int64_t idx[4];
		if (gptdata_split(a->split ? a->split : "969, 30, 1", f->ds[i].n, idx, err, errlen) < 0)
			return -1;
		for (int s = 0; s < 3; s++) {
			if (idx[s + 1] <= idx[s] || samples[s] <= 0)
				continue;
			struct gptdata_key k = {.start = idx[s], .end = idx[s + 1],
						.num_samples = n == 1 ? samples[s]
							: gptdata_blend_samples(samples[s], f->weights[i]),
						.seq_length = seq, .seed = seed};
			char why[512] = "";
			if (gptdata_index_get(&f->x[s][i], &f->ds[i], &k, NULL, why, sizeof why) < 0)
				return errf(err, errlen, "%s", why);
			snprintf(line, sizeof line, "%s: %s split, sequences [%lld, %lld): %lld samples of "
				 "%d tokens, %d epoch%s, index %s%s%s", f->ds[i].prefix, split_names[s],
				 (long long)idx[s], (long long)idx[s + 1], (long long)f->x[s][i].ns, seq,
				 f->x[s][i].epochs, f->x[s][i].epochs > 1 ? "s" : "",
				 f->x[s][i].cache == GPTDATA_CACHE_HIT ? "from its cache" :
				 f->x[s][i].cache == GPTDATA_BUILT ? "built and cached" : "built, not cached",
				 f->x[s][i].cache == GPTDATA_BUILT_UNSAVED ? ": " : "",
				 f->x[s][i].cache == GPTDATA_BUILT_UNSAVED ? why : "");
			say(line);
		}
	}
	for (int s = 0; s < 3; s++) {
		int64_t total = 0;
		int empty = 0;
		for (int i = 0; i < n; i++) {
			total += f->x[s][i].ns;
			empty |= f->x[s][i].ns == 0;
		}
		if (empty || total == 0)
			continue;   /* a blend needs every dataset in the split */
		f->size[s] = total;
		if (n > 1) {
			f->bidx[s] = malloc(total);
			f->bsample[s] = malloc(total * sizeof *f->bsample[s]);
			if (!f->bidx[s] || !f->bsample[s])
				return errf(err, errlen, "out of memory");
			if (gptdata_blend(f->weights, n, total, f->bidx[s], f->bsample[s]) < 0)
				return errf(err, errlen, "--data-path: cannot blend %d datasets", n);
		}
	}
	return 0;
}

int feed_get(struct feed *f, int split, int64_t i, int32_t *tokens, char *err, size_t errlen)
{
	if (f->size[split] == 0)
		return errf(err, errlen, "the %s split is empty: check --split", split_names[split]);
	if (i >= f->size[split]) {
		if (!f->wrapped++)
			warn("warning: the %s split has %lld samples and sample %lld was asked for: "
			     "wrapping around (skipped or rolled-back iterations consumed extra data)",
			     split_names[split], (long long)f->size[split], (long long)i);
		i %= f->size[split];
	}
	int d = 0;
	int64_t j = i;
	if (f->nds > 1) {
		d = f->bidx[split][i];
		j = f->bsample[split][i];
	}
	return gptdata_sample(&f->ds[d], &f->x[split][d], j, tokens, err, errlen);
}

void feed_close(struct feed *f)
{
	for (int s = 0; s < 3; s++) {
		for (int i = 0; i < f->nds && f->x[s]; i++)
			gptdata_index_free(&f->x[s][i]);
		free(f->x[s]);
		free(f->bidx[s]);
		free(f->bsample[s]);
	}
	for (int i = 0; i < f->nds; i++)
		gptdata_close(&f->ds[i]);
	free(f->ds);
	free(f->weights);
	memset(f, 0, sizeof *f);
}
