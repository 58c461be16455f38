#include "train/data/bertdata.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idx.h"
#include "msg.h"
#include "mt19937.h"
#include "xalloc.h"

/* helpers.cpp: a document with a sentence longer than this gives no sample */
#define BD_LONG_SENTENCE 512
/* T5's masking: n-grams up to 10 words, lengths geometric with p 0.2 (SpanBERT's) */
#define BD_T5_MAX_NGRAMS 10
#define BD_T5_GEOMETRIC_P 0.2
#define BD_BERT_MAX_NGRAMS 3

/* --- the vocabulary ------------------------------------------------------------------------- */

struct bd_tok {
	char *s;
	int32_t id;
};

static int bd_tok_cmp(const void *a, const void *b)
{
	return strcmp(((const struct bd_tok *)a)->s, ((const struct bd_tok *)b)->s);
}

/* the id of s among the sorted toks, or -1 */
static int32_t bd_find(const struct bd_tok *t, int32_t n, const char *s)
{
	struct bd_tok key = {(char *)s, 0};
	const struct bd_tok *f = bsearch(&key, t, (size_t)n, sizeof *t, bd_tok_cmp);
	return f ? f->id : -1;
}

/* Python's str.strip() for the ASCII whitespace a vocab.txt line can carry */
static char *bd_strip(char *s)
{
	size_t n;
	while (*s == ' ' || (*s >= '\t' && *s <= '\r') || (*s >= 0x1c && *s <= 0x1f))
		s++;
	n = strlen(s);
	while (n && (s[n - 1] == ' ' || (s[n - 1] >= '\t' && s[n - 1] <= '\r') ||
		     (s[n - 1] >= 0x1c && s[n - 1] <= 0x1f)))
		s[--n] = 0;
	return s;
}

int bertdata_vocab_load(struct bertdata_vocab *v, const char *path, int32_t extra_ids, char *err,
			size_t errlen)
{
	FILE *f;
	struct bd_tok *t = NULL;
	int32_t n = 0, cap = 0;
	char *line = NULL;
	size_t lcap = 0;
	ssize_t len;
	int rc = -1;

	memset(v, 0, sizeof *v);
	if (extra_ids < 0)
		return errf(err, errlen, "--vocab-extra-ids %d: must be 0 or more", extra_ids);
	f = fopen(path, "r");
	if (!f)
		return errf(err, errlen, "%s: %s", path, strerror(errno));
	while ((len = getline(&line, &lcap, f)) > 0) {
		if (n == cap) {
			cap = cap ? 2 * cap : 1024;
			t = realloc(t, (size_t)cap * sizeof *t);
			if (!t)
				xalloc_die("the BERT vocabulary's tokens", (size_t)cap * sizeof *t);
		}
		t[n].s = strdup(bd_strip(line));
		if (!t[n].s)
			xalloc_die("a BERT vocabulary token", strlen(bd_strip(line)) + 1);
		t[n].id = n;
		n++;
	}
	if (ferror(f)) {
		errf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	/* [BOS], [EOS] and the extra ids join unless present: at most 2 + extra_ids more */
	if (n > INT32_MAX - 2 - extra_ids) {
		errf(err, errlen, "%s: too many tokens", path);
		goto out;
	}
	t = realloc(t, ((size_t)n + 2 + (size_t)extra_ids) * sizeof *t);
	if (!t)
		xalloc_die("the BERT vocabulary's tokens", ((size_t)n + 2 + (size_t)extra_ids) * sizeof *t);
	v->size = n;
	v->cont = malloc((size_t)n + 2 + (size_t)extra_ids);
	v->extra = malloc(((size_t)extra_ids + 1) * sizeof *v->extra);
	if (!v->cont || !v->extra)
		xalloc_die("the BERT vocabulary's word-continuation flags and extra ids", 0);
	for (int32_t i = 0; i < n; i++)
		v->cont[i] = strncmp(t[i].s, "##", 2) == 0;
	qsort(t, (size_t)n, sizeof *t, bd_tok_cmp);
	for (int32_t i = 1; i < n; i++)
		if (strcmp(t[i - 1].s, t[i].s) == 0) {
			errf(err, errlen, "%s: token '%s' is on lines %d and %d; Megatron's tokenizer "
			     "numbers such a vocabulary inconsistently", path, t[i].s,
			     (t[i - 1].id < t[i].id ? t[i - 1].id : t[i].id) + 1,
			     (t[i - 1].id < t[i].id ? t[i].id : t[i - 1].id) + 1);
			goto out;
		}
	{
		static const char *need[4] = {"[CLS]", "[SEP]", "[PAD]", "[MASK]"};
		int32_t *dst[4] = {&v->cls, &v->sep, &v->pad, &v->mask};
		for (int k = 0; k < 4; k++)
			if ((*dst[k] = bd_find(t, n, need[k])) < 0) {
				errf(err, errlen, "%s: no %s token; not a BERT WordPiece vocabulary?",
				     path, need[k]);
				goto out;
			}
	}
	/* add_token(): a token not in vocab.txt takes the next id (a new one is never "##") */
	{
		char name[32];
		int32_t *slot;
		for (int32_t k = -2; k < extra_ids; k++) {
			if (k == -2)
				snprintf(name, sizeof name, "[BOS]"), slot = &v->bos;
			else if (k == -1)
				snprintf(name, sizeof name, "[EOS]"), slot = &v->eos;
			else
				snprintf(name, sizeof name, "<extra_id_%d>", k), slot = &v->extra[k];
			*slot = bd_find(t, n, name);
			if (*slot < 0) {
				*slot = v->size;
				v->cont[v->size++] = 0;
			}
		}
	}
	v->n_extra = extra_ids;
	rc = 0;
out:
	for (int32_t i = 0; i < n; i++)
		free(t[i].s);
	free(t);
	free(line);
	fclose(f);
	if (rc < 0)
		bertdata_vocab_free(v);
	return rc;
}

void bertdata_vocab_free(struct bertdata_vocab *v)
{
	free(v->cont);
	free(v->extra);
	memset(v, 0, sizeof *v);
}

/* --- the samples mapping -------------------------------------------------------------------- */

void bertdata_map_free(struct bertdata_map *m)
{
	free(m->rows);
	memset(m, 0, sizeof *m);
}

/* get_target_sample_len(): one 32-bit draw when short sequences are on */
static int32_t bd_target(int32_t ratio, int32_t max_len, struct mt19937 *g)
{
	if (ratio == 0)
		return max_len;
	uint64_t r = mt_next32(g);  /* std::mt19937's result_type is 64 bits wide here */
	if (r % (uint64_t)ratio == 0)
		return (int32_t)(2 + r % (uint64_t)(max_len - 1));
	return max_len;
}

static void bd_put(struct bertdata_map *m, int64_t k, int64_t first, int64_t end, int32_t target)
{
	if (m->wide) {
		uint64_t *r = (uint64_t *)m->rows + 3 * k;
		r[0] = (uint64_t)first, r[1] = (uint64_t)end, r[2] = (uint64_t)target;
	} else {
		uint32_t *r = (uint32_t *)m->rows + 3 * k;
		r[0] = (uint32_t)first, r[1] = (uint32_t)end, r[2] = (uint32_t)target;
	}
}

int bertdata_map_build(struct bertdata_map *m, const int64_t *doc_idx, int64_t ndocs,
		       const int32_t *sizes, int32_t num_epochs, uint64_t num_samples,
		       int32_t max_len, double short_seq_prob, int32_t seed, int min_num_sent,
		       char *err, size_t errlen)
{
	int32_t ratio = 0;
	int64_t count = -1;

	memset(m, 0, sizeof *m);
	if (num_epochs == 0 && num_samples == 0)
		return errf(err, errlen, "neither a number of samples nor of epochs");
	if (num_epochs == 0)
		num_epochs = INT32_MAX - 1;  /* np.iinfo(np.int32).max - 1 */
	if (num_samples == 0)
		num_samples = INT64_MAX - 1;
	if (num_epochs < 0)
		return errf(err, errlen, "%d epochs", num_epochs);
	if (max_len < 2)
		return errf(err, errlen, "a target length of %d tokens; it must be at least 2 (a "
			    "longer sequence length)", max_len);
	if (!(short_seq_prob >= 0 && short_seq_prob <= 1))
		return errf(err, errlen, "short sequence probability %g: not in [0, 1]",
			    short_seq_prob);
	if (seed < 1 || seed == INT32_MAX)  /* helpers.cpp asserts seed > 0 and adds 1 */
		return errf(err, errlen, "seed %d: Megatron's samples mapping needs 1..%d", seed,
			    INT32_MAX - 1);
	if (ndocs < 1)
		return errf(err, errlen, "no documents");
	if (short_seq_prob > 0) {
		double r = round(1.0 / short_seq_prob);
		if (r > INT32_MAX)  /* helpers.cpp's int32 ratio would overflow */
			return errf(err, errlen, "short sequence probability %g: too small for "
				    "Megatron's int32 ratio (use 0)", short_seq_prob);
		ratio = (int32_t)r;
	}
	m->wide = doc_idx[ndocs] > (int64_t)UINT32_MAX;

	/* two passes as helpers.cpp: count, then fill; the generator restarts for each */
	for (int pass = 0; pass < 2; pass++) {
		struct mt19937 g;
		uint64_t k = 0;

		mt_seed(&g, (uint32_t)seed);
		for (int32_t epoch = 0; epoch < num_epochs; epoch++) {
			if (k >= num_samples)
				break;
			if (epoch == 1 && k == 0)  /* Megatron would loop through 2^31 empty epochs */
				return errf(err, errlen, "no document of the split has %d sentence%s and "
					    "none over %d tokens: no sample", min_num_sent,
					    min_num_sent > 1 ? "s" : "", BD_LONG_SENTENCE);
			for (int64_t d = 0; d < ndocs; d++) {
				int64_t first = doc_idx[d], last = doc_idx[d + 1], start = first;
				int64_t remain = last - first;
				int long_sentence = 0;

				if (remain > 1)
					for (int64_t s = first; s < last; s++)
						if (sizes[s] > BD_LONG_SENTENCE) {
							long_sentence = 1;
							break;
						}
				if (remain < min_num_sent || long_sentence)
					continue;
				int32_t len = 0, nsent = 0;
				int32_t target = bd_target(ratio, max_len, &g);
				for (int64_t s = first; s < last; s++) {
					len += sizes[s];
					nsent++;
					remain--;
					if ((len >= target && remain > 1 && nsent >= min_num_sent) ||
					    remain == 0) {
						if (pass == 1)
							bd_put(m, (int64_t)k, start, s + 1, target);
						k++;
						start = s + 1;
						target = bd_target(ratio, max_len, &g);
						len = 0;
						nsent = 0;
					}
				}
			}
		}
		if (pass == 0) {
			if (k == 0)
				return errf(err, errlen, "no document of the split has %d sentence%s and "
					    "none over %d tokens: no sample", min_num_sent,
					    min_num_sent > 1 ? "s" : "", BD_LONG_SENTENCE);
			if (k > (uint64_t)INT64_MAX / 24)
				return errf(err, errlen, "%llu samples: too many",
					    (unsigned long long)k);
			count = (int64_t)k;
			m->rows = malloc((size_t)count * 3 * (m->wide ? 8 : 4));
			if (!m->rows)
				return errf(err, errlen, "out of memory for a mapping of %lld samples",
					    (long long)count);
		}
	}
	m->n = count;

	/* std::mt19937_64(seed + 1), j = next() % (i + 1), rows swapped whole */
	{
		struct mt19937_64 g;
		mt64_seed(&g, (uint64_t)(seed + 1));
		for (int64_t i = count - 1; i > 0; i--) {
			int64_t j = (int64_t)(mt64_next(&g) % (uint64_t)(i + 1));
			if (m->wide) {
				uint64_t *r = m->rows, t[3];
				memcpy(t, r + 3 * i, sizeof t);
				memcpy(r + 3 * i, r + 3 * j, sizeof t);
				memcpy(r + 3 * j, t, sizeof t);
			} else {
				uint32_t *r = m->rows, t[3];
				memcpy(t, r + 3 * i, sizeof t);
				memcpy(r + 3 * i, r + 3 * j, sizeof t);
				memcpy(r + 3 * j, t, sizeof t);
			}
		}
	}
	return 0;
}

/* --- the dataset ---------------------------------------------------------------------------- */

void bertdata_config_default(struct bertdata_config *c, int kind)
{
	memset(c, 0, sizeof *c);
	c->kind = kind;
	c->split = "969, 30, 1";
	c->mask_prob = 0.15;
	c->short_seq_prob = 0.1;
	c->seed = 1234;
	c->binary_head = kind == BERTDATA_BERT;
}

void bertdata_close(struct bertdata *b)
{
	gptdata_close(&b->ds);
	free(b->doc_idx);
	bertdata_map_free(&b->map);
	memset(b, 0, sizeof *b);
}

int bertdata_open(struct bertdata *b, const char *prefix, const struct bertdata_config *cfg,
		  const struct bertdata_vocab *vocab, char *err, size_t errlen)
{
	static const char *names[3] = {"train", "valid", "test"};
	const unsigned char *m;
	uint64_t d;
	int32_t max_len;
	char why[512];

	memset(b, 0, sizeof *b);
	b->cfg = *cfg;
	b->vocab = vocab;
	if (cfg->kind != BERTDATA_BERT && cfg->kind != BERTDATA_T5)
		return errf(err, errlen, "unknown dataset kind %d", cfg->kind);
	if (cfg->which < 0 || cfg->which > 2)
		return errf(err, errlen, "split number %d: 0 train, 1 valid, 2 test", cfg->which);
	if (cfg->kind == BERTDATA_T5 && cfg->binary_head)
		return errf(err, errlen, "T5 has no binary head");
	if (!(cfg->mask_prob >= 0 && cfg->mask_prob <= 1))
		return errf(err, errlen, "--mask-prob %g: not in [0, 1]", cfg->mask_prob);
	if (cfg->kind == BERTDATA_T5 && vocab->n_extra < 1)
		return errf(err, errlen, "T5 needs sentinel tokens: --vocab-extra-ids 100, say");
	if (cfg->kind == BERTDATA_T5 && cfg->dec_seq_length < 1)
		return errf(err, errlen, "--decoder-seq-length %d: the decoder needs room for [BOS]",
			    cfg->dec_seq_length);
	max_len = cfg->seq_length - (cfg->kind == BERTDATA_BERT ? 3 : 2);
	if (max_len < 2)
		return errf(err, errlen, "--%s %d leaves %d tokens for text; Megatron needs 2",
			    cfg->kind == BERTDATA_BERT ? "seq-length" : "encoder-seq-length",
			    cfg->seq_length, max_len);
	if (gptdata_open(&b->ds, prefix, err, errlen) < 0)
		return -1;

	/* doc_idx: D int64 after the sizes and the pointers, unaligned */
	m = b->ds.idx_map;
	memcpy(&d, m + 26, 8);   /* D, in the header idx_open checked */
	if (d < 2) {
		errf(err, errlen, "%s.idx: %llu document offsets; no documents", b->ds.prefix,
		     (unsigned long long)d);
		goto bad;
	}
	b->ndocs = (int64_t)d - 1;
	b->doc_idx = malloc(d * sizeof *b->doc_idx);
	if (!b->doc_idx)
		xalloc_die("the BERT dataset's document index", d * sizeof *b->doc_idx);
	memcpy(b->doc_idx, m + IDX_HEADER + 12 * (uint64_t)b->ds.n, d * 8);
	/* idx_open (through gptdata_open) checked doc_idx runs from 0 to N without decreasing */
	if (gptdata_split(cfg->split, b->ndocs, b->split, why, sizeof why) < 0) {
		errf(err, errlen, "--split %s", why);
		goto bad;
	}
	{
		int64_t s0 = b->split[cfg->which], s1 = b->split[cfg->which + 1];
		if (s1 <= s0) {
			errf(err, errlen, "%s: the %s split of '%s' has no documents (of %lld)", prefix,
			     names[cfg->which], cfg->split, (long long)b->ndocs);
			goto bad;
		}
		if (bertdata_map_build(&b->map, b->doc_idx + s0, s1 - s0, b->ds.sizes,
				       cfg->num_epochs, cfg->num_samples, max_len,
				       cfg->short_seq_prob, cfg->seed,
				       cfg->kind == BERTDATA_BERT && cfg->binary_head ? 2 : 1, why,
				       sizeof why) < 0) {
			errf(err, errlen, "%s (%s split, documents [%lld, %lld)): %s", prefix,
			     names[cfg->which], (long long)s0, (long long)s1, why);
			goto bad;
		}
	}
	b->n = b->map.n;
	/* pvals = 1 / arange(1, 4); pvals /= pvals.sum(); choice() gets pvals / pvals.sum() */
	{
		double pv[BD_BERT_MAX_NGRAMS], s = 0, s2 = 0;
		for (int k = 0; k < BD_BERT_MAX_NGRAMS; k++)
			pv[k] = 1.0 / (double)(k + 1);
		for (int k = 0; k < BD_BERT_MAX_NGRAMS; k++)
			s += pv[k];
		for (int k = 0; k < BD_BERT_MAX_NGRAMS; k++)
			pv[k] /= s;
		for (int k = 0; k < BD_BERT_MAX_NGRAMS; k++)
			s2 += pv[k];
		for (int k = 0; k < BD_BERT_MAX_NGRAMS; k++)
			b->pvals[k] = pv[k] / s2;
	}
	return 0;
bad:
	bertdata_close(b);
	return -1;
}

/* --- samples -------------------------------------------------------------------------------- */

int bert_sample_alloc(const struct bertdata *b, struct bert_sample *s)
{
	size_t n = (size_t)b->cfg.seq_length;
	memset(s, 0, sizeof *s);
	s->len = b->cfg.seq_length;
	s->tokens = malloc(n * 4);
	s->types = malloc(n * 4);
	s->labels = malloc(n * 4);
	s->padding_mask = malloc(n);
	s->loss_mask = malloc(n);
	if (!s->tokens || !s->types || !s->labels || !s->padding_mask || !s->loss_mask) {
		bert_sample_free(s);
		return -1;
	}
	return 0;
}

void bert_sample_free(struct bert_sample *s)
{
	free(s->tokens);
	free(s->types);
	free(s->labels);
	free(s->padding_mask);
	free(s->loss_mask);
	memset(s, 0, sizeof *s);
}

int t5_sample_alloc(const struct bertdata *b, struct t5_sample *s)
{
	size_t e = (size_t)b->cfg.seq_length, d = (size_t)b->cfg.dec_seq_length;
	memset(s, 0, sizeof *s);
	s->enc_len = b->cfg.seq_length;
	s->dec_len = b->cfg.dec_seq_length;
	s->text_enc = malloc(e * 4);
	s->enc_valid = malloc(e);
	s->text_dec = malloc(d * 4);
	s->labels = malloc(d * 4);
	s->loss_mask = malloc(d);
	s->dec_valid = malloc(d);
	if (!s->text_enc || !s->enc_valid || !s->text_dec || !s->labels || !s->loss_mask ||
	    !s->dec_valid) {
		t5_sample_free(s);
		return -1;
	}
	return 0;
}

void t5_sample_free(struct t5_sample *s)
{
	free(s->text_enc);
	free(s->text_dec);
	free(s->labels);
	free(s->loss_mask);
	free(s->enc_valid);
	free(s->dec_valid);
	memset(s, 0, sizeof *s);
}

/* The sentences [first, end) of the dataset, concatenated into a malloc'd array; starts[k] is
 * where sentence k begins (starts[n] the total).  NULL when out of memory. */
static int32_t *bd_read(const struct gptdata_ds *ds, int64_t first, int64_t end, int64_t **starts)
{
	int64_t n = end - first, total = 0;
	int32_t *t;

	*starts = malloc((size_t)(n + 1) * sizeof **starts);
	if (!*starts)
		return NULL;
	for (int64_t k = 0; k < n; k++) {
		(*starts)[k] = total;
		total += ds->sizes[first + k];
	}
	(*starts)[n] = total;
	t = malloc(total ? (size_t)total * 4 : 1);
	if (!t) {
		free(*starts);
		return NULL;
	}
	for (int64_t k = 0; k < n; k++) {
		uint64_t p;
		const unsigned char *src;
		int64_t len = ds->sizes[first + k];
		int32_t *dst = t + (*starts)[k];
		memcpy(&p, ds->pointers + 8 * (first + k), 8);
		src = ds->bin + p;
		if (ds->dtype == 8) {
			for (int64_t j = 0; j < len; j++)
				dst[j] = (int32_t)((uint32_t)src[2 * j] | (uint32_t)src[2 * j + 1] << 8);
		} else {
			memcpy(dst, src, (size_t)len * 4);
		}
	}
	return t;
}

/* One masked position: create_masked_lm_predictions' MaskedLmInstance */
struct bd_lm {
	int32_t index, label;
};

/* A masked span: positions pos[from, to) of the masking's candidate list (already flattened) */
struct bd_span {
	int32_t first, last;    /* its first and last token position */
	int32_t from, to;       /* into the span positions list */
};

struct bd_masked {
	int32_t n_lm;
	struct bd_lm *lm;       /* sorted by index */
	int32_t n_span;
	struct bd_span *span;   /* sorted by first */
	int32_t *span_pos;      /* the spans' positions, in the order they were masked */
};

static int bd_lm_cmp(const void *a, const void *b)
{
	int32_t x = ((const struct bd_lm *)a)->index, y = ((const struct bd_lm *)b)->index;
	return (x > y) - (x < y);
}

static int bd_span_cmp(const void *a, const void *b)
{
	int32_t x = ((const struct bd_span *)a)->first, y = ((const struct bd_span *)b)->first;
	return (x > y) - (x < y);
}

/* create_masked_lm_predictions() over tok[0..n) in place (the output tokens); orig keeps the
 * originals.  t5 selects the T5 variant (geometric n-grams up to 10, always [MASK]).  0, or -1 +
 * err for a token outside the vocabulary. */
static int bd_mask(const struct bertdata *b, struct mt19937 *g, int t5, int32_t *tok,
		   const int32_t *orig, int32_t n, double max_predictions, struct bd_masked *out,
		   char *err, size_t errlen)
{
	const struct bertdata_vocab *v = b->vocab;
	int32_t *pos = malloc(((size_t)n + 1) * sizeof *pos);      /* candidate positions */
	int32_t *gs = malloc(((size_t)n + 2) * sizeof *gs);        /* group g: pos[gs[g], gs[g+1]) */
	int32_t *order = malloc(((size_t)n + 1) * sizeof *order);
	uint8_t *covered = calloc((size_t)n + 1, 1);
	int32_t np = 0, ng = 0;
	int max_ngrams = t5 ? BD_T5_MAX_NGRAMS : BD_BERT_MAX_NGRAMS;
	double num_to_predict;
	int rc = -1;

	memset(out, 0, sizeof *out);
	out->lm = malloc(((size_t)n + 1) * sizeof *out->lm);
	out->span = malloc(((size_t)n + 1) * sizeof *out->span);
	out->span_pos = malloc(((size_t)n + 1) * sizeof *out->span_pos);
	if (!pos || !gs || !order || !covered || !out->lm || !out->span || !out->span_pos)
		xalloc_die("a sample's masking scratch", 0);

	for (int32_t i = 0; i < n; i++) {
		int32_t t = orig[i];
		if (t == v->cls || t == v->sep)
			continue;
		if (t < 0 || t >= v->size) {
			errf(err, errlen, "token id %d is not in the vocabulary of %d ids", t, v->size);
			goto out;
		}
		if (!(ng >= 1 && v->cont[t]))  /* a "##" piece joins the word before it */
			gs[ng++] = np;
		pos[np++] = i;
	}
	gs[ng] = np;
	rc = 0;
	if (b->cfg.mask_prob == 0)
		goto out;
	num_to_predict = fmax(1.0, nearbyint((double)n * b->cfg.mask_prob));
	if (max_predictions < num_to_predict)  /* min(max_predictions_per_seq, ...) */
		num_to_predict = max_predictions;

	for (int32_t k = 0; k < ng; k++)
		order[k] = k;
	mt_shuffle_i32(g, order, ng);

	for (int32_t oi = 0; oi < ng; oi++) {
		int32_t idx = order[oi], ngram, count, end;
		if ((double)out->n_lm >= num_to_predict)
			break;
		if (t5) {
			int64_t x = mt_geometric(g, BD_T5_GEOMETRIC_P);
			ngram = x < max_ngrams ? (int32_t)x : max_ngrams;
		} else {
			ngram = 1 + (int32_t)mt_choice_p(g, b->pvals, max_ngrams);
		}
		/* the n-gram's tokens; shorter n-grams while they would pass num_to_predict */
		for (;; ngram--) {
			end = idx + ngram < ng ? idx + ngram : ng;
			count = gs[end] - gs[idx];
			if ((double)(out->n_lm + count) <= num_to_predict || ngram == 1)
				break;
		}
		if ((double)(out->n_lm + count) > num_to_predict)
			continue;
		int any = 0;
		for (int32_t p = gs[idx]; p < gs[end]; p++)
			if (covered[pos[p]]) {
				any = 1;
				break;
			}
		if (any)
			continue;
		struct bd_span *sp = &out->span[out->n_span++];
		sp->from = out->n_lm;
		for (int32_t p = gs[idx]; p < gs[end]; p++) {
			int32_t i = pos[p], m;
			covered[i] = 1;
			if (t5) {
				m = v->mask;
			} else if (mt_double(g) < 0.8) {
				m = v->mask;
			} else if (mt_double(g) < 0.5) {
				m = orig[i];
			} else {
				m = (int32_t)mt_randint(g, 0, v->size);  /* vocab_id_list[k] is k */
			}
			tok[i] = m;
			out->span_pos[out->n_lm] = i;
			out->lm[out->n_lm].index = i;
			out->lm[out->n_lm].label = orig[i];
			out->n_lm++;
		}
		sp->to = out->n_lm;
		sp->first = pos[gs[idx]];
		sp->last = pos[gs[end] - 1];
	}
	qsort(out->lm, (size_t)out->n_lm, sizeof *out->lm, bd_lm_cmp);
	qsort(out->span, (size_t)out->n_span, sizeof *out->span, bd_span_cmp);
out:
	free(pos);
	free(gs);
	free(order);
	free(covered);
	return rc;
}

static void bd_masked_free(struct bd_masked *m)
{
	free(m->lm);
	free(m->span);
	free(m->span_pos);
}

/* A segment: tokens t[off, off + len) of the sample's buffer */
struct bd_seg {
	int64_t off, len;
};

int bertdata_bert_get(const struct bertdata *b, int64_t i, struct bert_sample *s, char *err,
		      size_t errlen)
{
	const struct bertdata_vocab *v = b->vocab;
	int64_t first, end, *starts = NULL, nsent;
	int32_t target, *t = NULL, *tok = NULL, *orig = NULL, n = 0;
	struct bd_seg a, bs;
	struct mt19937 g;
	struct bd_masked mk = {0};
	char why[256];
	int rc = -1;

	if (i < 0 || i >= b->n)
		return errf(err, errlen, "sample %lld of %lld", (long long)i, (long long)b->n);
	bertdata_map_row(&b->map, i, &first, &end, &target);
	nsent = end - first;
	t = bd_read(&b->ds, first, end, &starts);
	if (!t)
		xalloc_die("a BERT sample's sentences", 0);
	mt_seed(&g, (uint32_t)((uint64_t)(int64_t)b->cfg.seed + (uint64_t)i));  /* % 2**32 */
	s->is_random = 0;
	if (b->cfg.binary_head) {
		int64_t a_end = 1;
		if (nsent < 2) {
			errf(err, errlen, "sample %lld: one sentence, and the binary head needs two",
			     (long long)i);
			goto out;
		}
		if (nsent >= 3)
			a_end = mt_randint(&g, 1, nsent);
		a.off = 0, a.len = starts[a_end];
		bs.off = starts[a_end], bs.len = starts[nsent] - starts[a_end];
		if (mt_double(&g) < 0.5) {
			struct bd_seg x = a;
			a = bs, bs = x;
			s->is_random = 1;
		}
	} else {
		a.off = 0, a.len = starts[nsent];
		bs.off = 0, bs.len = 0;
	}
	/* truncate_segments */
	if (a.len <= 0) {
		errf(err, errlen, "sample %lld (sentences [%lld, %lld)): segment A is empty",
		     (long long)i, (long long)first, (long long)end);
		goto out;
	}
	s->truncated = a.len + bs.len > target;
	while (a.len + bs.len > target) {
		struct bd_seg *x = a.len > bs.len ? &a : &bs;
		x->len--;
		if (mt_double(&g) < 0.5)  /* del tokens[0], else tokens.pop() */
			x->off++;
	}
	/* [CLS] A [SEP] B [SEP] */
	n = (int32_t)(a.len + bs.len + 2 + (bs.len > 0));
	if (n > s->len) {  /* cannot be: target <= seq_length - 3 */
		errf(err, errlen, "sample %lld: %d tokens for a sequence of %d", (long long)i, n,
		     s->len);
		goto out;
	}
	tok = s->tokens;
	orig = malloc((size_t)n * sizeof *orig);
	if (!orig)
		xalloc_die("a BERT sample's unmasked tokens", (size_t)n * sizeof *orig);
	{
		int32_t k = 0;
		tok[k] = v->cls, s->types[k++] = 0;
		for (int64_t j = 0; j < a.len; j++)
			tok[k] = t[a.off + j], s->types[k++] = 0;
		tok[k] = v->sep, s->types[k++] = 0;
		for (int64_t j = 0; j < bs.len; j++)
			tok[k] = t[bs.off + j], s->types[k++] = 1;
		if (bs.len > 0)
			tok[k] = v->sep, s->types[k++] = 1;
	}
	memcpy(orig, tok, (size_t)n * sizeof *orig);
	if (bd_mask(b, &g, 0, tok, orig, n, b->cfg.mask_prob * (double)target, &mk, why,
		    sizeof why) < 0) {
		errf(err, errlen, "sample %lld (sentences [%lld, %lld)): %s", (long long)i,
		     (long long)first, (long long)end, why);
		goto out;
	}
	s->n_tokens = n;
	for (int32_t k = n; k < s->len; k++)
		tok[k] = v->pad, s->types[k] = v->pad;
	for (int32_t k = 0; k < s->len; k++) {
		s->padding_mask[k] = k < n;
		s->labels[k] = -1;
		s->loss_mask[k] = 0;
	}
	for (int32_t k = 0; k < mk.n_lm; k++) {
		s->labels[mk.lm[k].index] = mk.lm[k].label;
		s->loss_mask[mk.lm[k].index] = 1;
	}
	rc = 0;
out:
	bd_masked_free(&mk);
	free(orig);
	free(t);
	free(starts);
	return rc;
}

int bertdata_t5_get(const struct bertdata *b, int64_t i, struct t5_sample *s, char *err,
		    size_t errlen)
{
	const struct bertdata_vocab *v = b->vocab;
	int64_t first, end, *starts = NULL, total;
	int32_t target, *t = NULL, *orig = NULL, n;
	uint64_t seed = (uint64_t)(int64_t)b->cfg.seed + (uint64_t)i;
	struct mt19937 g;
	struct bd_masked mk = {0};
	char why[256];
	int rc = -1;

	if (i < 0 || i >= b->n)
		return errf(err, errlen, "sample %lld of %lld", (long long)i, (long long)b->n);
	if (seed > UINT32_MAX)  /* T5Dataset has no % 2**32: numpy refuses the seed */
		return errf(err, errlen, "sample %lld: seed %d + %lld is over 2^32 - 1, which numpy "
			    "refuses", (long long)i, b->cfg.seed, (long long)i);
	bertdata_map_row(&b->map, i, &first, &end, &target);
	t = bd_read(&b->ds, first, end, &starts);
	if (!t)
		xalloc_die("a T5 sample's sentences", 0);
	total = starts[end - first];
	s->truncated = total > target;
	n = (int32_t)(total < target ? total : target);
	orig = malloc(((size_t)n + 1) * sizeof *orig);
	if (!orig)
		xalloc_die("a T5 sample's unmasked tokens", ((size_t)n + 1) * sizeof *orig);
	memcpy(orig, t, (size_t)n * sizeof *orig);
	mt_seed(&g, (uint32_t)seed);
	if (bd_mask(b, &g, 1, t, orig, n, b->cfg.mask_prob * (double)target, &mk, why,
		    sizeof why) < 0) {
		errf(err, errlen, "sample %lld (sentences [%lld, %lld)): %s", (long long)i,
		     (long long)first, (long long)end, why);
		goto out;
	}
	if (mk.n_span > v->n_extra) {
		errf(err, errlen, "sample %lld: %d spans and %d sentinels (--vocab-extra-ids)",
		     (long long)i, mk.n_span, v->n_extra);
		goto out;
	}
	{
		int32_t ne = 0, nd = 0, start = 0;
		/* the lengths first: Megatron asserts both fit */
		for (int32_t k = 0; k < mk.n_span; k++) {
			const struct bd_span *sp = &mk.span[k];
			ne += (sp->first > start ? sp->first - start : 0) + 1;
			nd += 1 + (sp->to - sp->from);
			start = sp->last + 1;
		}
		ne += n > start ? n - start : 0;
		nd += 1;  /* [BOS] */
		if (ne > s->enc_len || nd > s->dec_len) {
			errf(err, errlen, "sample %lld: %d encoder and %d decoder tokens for lengths %d "
			     "and %d (a longer --decoder-seq-length?)", (long long)i, ne, nd,
			     s->enc_len, s->dec_len);
			goto out;
		}
		ne = 0, nd = 0, start = 0;
		s->text_dec[nd++] = v->bos;
		for (int32_t k = 0; k < mk.n_span; k++) {
			const struct bd_span *sp = &mk.span[k];
			int32_t flag = v->extra[k];
			s->labels[nd - 1] = flag;
			s->text_dec[nd++] = flag;
			for (int32_t p = sp->from; p < sp->to; p++) {
				int32_t label = orig[mk.span_pos[p]];
				s->labels[nd - 1] = label;
				s->text_dec[nd++] = label;
			}
			for (int32_t j = start; j < sp->first; j++)
				s->text_enc[ne++] = t[j];
			s->text_enc[ne++] = flag;
			start = sp->last + 1;
		}
		s->labels[nd - 1] = v->eos;
		for (int32_t j = start; j < n; j++)
			s->text_enc[ne++] = t[j];
		s->n_enc = ne;
		s->n_dec = nd;
		for (int32_t j = ne; j < s->enc_len; j++)
			s->text_enc[j] = v->pad;
		for (int32_t j = 0; j < s->enc_len; j++)
			s->enc_valid[j] = s->text_enc[j] >= 1;
		for (int32_t j = 0; j < s->dec_len; j++) {
			if (j >= nd) {
				s->text_dec[j] = v->pad;
				s->labels[j] = -1;
			}
			s->loss_mask[j] = j < nd;
			s->dec_valid[j] = s->text_dec[j] >= 1;
		}
	}
	rc = 0;
out:
	bd_masked_free(&mk);
	free(orig);
	free(t);
	free(starts);
	return rc;
}
