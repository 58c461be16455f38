/* punkt_train - PunktTrainer(text).get_params(), NLTK 3.8's defaults (ABBREV 0.3, ABBREV_BACKOFF
 * 5, COLLOCATION 7.88, SENT_STARTER 30, only initials and ordinals as collocation candidates,
 * MIN_COLLOC_FREQ 1, the abbreviation penalty on).
 *
 * NLTK keeps every token of the text in a list; here the text is scanned three times instead,
 * keeping only per-type numbers, so memory grows with the vocabulary, not the text:
 *
 *   1. type frequencies and the count of period-final tokens; then abbreviations: every type
 *      "w." whose Dunning log-likelihood, scaled by length, period count and a penalty for the
 *      occurrences of "w" without the period, reaches 0.3;
 *   2. the first annotation pass against those abbreviations, the orthographic contexts of every
 *      type (upper/lower case at a sentence start, inside a sentence, or unknown), and the
 *      number of sentence breaks;
 *   3. over consecutive token pairs whose first ends in a period, again annotated as in 2:
 *      rare abbreviations (added as found, as NLTK does, after pass 2's annotation was made),
 *      sentence-starter candidates and collocation candidates;
 *
 * then sentence starters and collocations by log-likelihood.  The decisions are NLTK's formulas
 * in NLTK's order of floating-point operations, Python's ValueError and ZeroDivisionError cases
 * included, so the same text gives the same tables.
 *
 * Two of NLTK's steps depend on the order of a Python set, and cannot matter: re-scoring a type
 * "w" already taken as an abbreviation uses the same counts as when "w." put it there, so it is
 * never removed; and a type ending in ".." (which would make "w." a candidate) never has a
 * letter, since word tokens stop before "..". */
#include <math.h>
#include <stdlib.h>

#include "msg.h"
#include "progress.h"
#include "tokenize/punkt_int.h"

enum { RECLASSIFIED = 1, RARE = 2 };   /* how a type became an abbreviation */

struct trainer {
	const char *text;
	size_t len;
	struct progress *pg;         /* NULL: none; else 3 * len bytes, the three scans' */
	struct strtab types;
	uint64_t *fdist, *starter;   /* per string id: type frequency, count at a sentence start */
	uint8_t *ortho, *abbr;
	uint32_t cap;
	uint64_t *pair_key, *pair_count; /* collocation candidates: (a + 1) << 32 | (b + 1) -> count */
	size_t npair, pair_slots;
	uint64_t n, nperiod, nbreak;
	struct pk_buf buf;
	int oom;
};

static uint32_t intern(struct trainer *tr, const char *s, size_t len)
{
	uint32_t id = strtab_intern(&tr->types, s, len);
	if (id == PK_NONE) {
		tr->oom = 1;
		return PK_NONE;
	}
	if (id >= tr->cap) {
		uint32_t cap = tr->cap ? 2 * tr->cap : 4096;
		uint64_t *f = realloc(tr->fdist, cap * sizeof *f);
		if (f)
			tr->fdist = f;
		uint64_t *st = f ? realloc(tr->starter, cap * sizeof *st) : NULL;
		if (st)
			tr->starter = st;
		uint8_t *o = st ? realloc(tr->ortho, cap) : NULL;
		if (o)
			tr->ortho = o;
		uint8_t *a = o ? realloc(tr->abbr, cap) : NULL;
		if (!a) {
			tr->oom = 1;
			return PK_NONE;
		}
		tr->abbr = a;
		memset(tr->fdist + tr->cap, 0, (cap - tr->cap) * sizeof *f);
		memset(tr->starter + tr->cap, 0, (cap - tr->cap) * sizeof *st);
		memset(tr->ortho + tr->cap, 0, cap - tr->cap);
		memset(tr->abbr + tr->cap, 0, cap - tr->cap);
		tr->cap = cap;
	}
	return id;
}

/* the frequency of a string, 0 if it was never a type */
static uint64_t freq(const struct trainer *tr, const char *s, size_t len)
{
	uint32_t id = strtab_find(&tr->types, s, len);
	return id == PK_NONE ? 0 : tr->fdist[id];
}

/* the frequency of string id + "." */
static uint64_t freq_dot(struct trainer *tr, uint32_t id)
{
	size_t len;
	const char *s = strtab_str(&tr->types, id, &len);
	if (pk_buf_reserve(&tr->buf, len + 1) < 0) {
		tr->oom = 1;
		return 0;
	}
	memcpy(tr->buf.p, s, len);
	tr->buf.p[len] = '.';
	return freq(tr, tr->buf.p, len + 1);
}

/* --- the statistics ------------------------------------------------------------------------------- */

/* _dunning_log_likelihood */
static double dunning_ll(int64_t a, int64_t b, int64_t ab, int64_t n)
{
	double p1 = (double)b / (double)n, p2 = 0.99;
	double null_hypo = (double)ab * log(p1) + (double)(a - ab) * log(1.0 - p1);
	double alt_hypo = (double)ab * log(p2) + (double)(a - ab) * log(1.0 - p2);
	return -2.0 * (null_hypo - alt_hypo);
}

/* _col_log_likelihood; math.log's ValueError (an argument <= 0) makes a summand 0, as NLTK's
 * try/except does, and a zero denominator makes p2 1 */
static double col_ll(int64_t a, int64_t b, int64_t ab, int64_t n)
{
	double p = (double)b / (double)n, p1 = (double)ab / (double)a;
	double p2 = n - a ? (double)(b - ab) / (double)(n - a) : 1;
	double s1 = 0, s2 = 0, s3 = 0, s4 = 0;
	if (p > 0 && 1.0 - p > 0) {
		s1 = (double)ab * log(p) + (double)(a - ab) * log(1.0 - p);
		s2 = (double)(b - ab) * log(p) + (double)(n - a - b + ab) * log(1.0 - p);
	}
	if (!(a == ab || p1 <= 0 || p1 >= 1))
		s3 = (double)ab * log(p1) + (double)(a - ab) * log(1.0 - p1);
	if (!(b == ab || p2 <= 0 || p2 >= 1))
		s4 = (double)(b - ab) * log(p2) + (double)(n - a - b + ab) * log(1.0 - p2);
	return -2.0 * (s1 + s2 - s3 - s4);
}

static size_t cp_count(const char *s, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += ((unsigned char)s[i] & 0xc0) != 0x80;
	return k;
}

/* _reclassify_abbrev_types over the types of pass 1 (ids below ntypes) */
static void find_abbrevs(struct trainer *tr, uint32_t ntypes)
{
	for (uint32_t id = 0; id < ntypes && !tr->oom; id++) {
		size_t len, i, l;
		const char *typ = strtab_str(&tr->types, id, &len);
		for (i = 0; i < len && !(pk_bits_at(typ + i, &l) & PKU_WORD); i += l)
			;
		if (i == len || (len == PK_NUMBER_LEN && memcmp(typ, PK_NUMBER, len) == 0) || typ[len - 1] != '.')
			continue;
		size_t clen = len - 1, periods = 1;
		for (i = 0; i < clen; i++)
			periods += typ[i] == '.';
		int64_t nonperiods = (int64_t)cp_count(typ, clen) - (int64_t)periods + 1;
		int64_t with = (int64_t)tr->fdist[id], without = (int64_t)freq(tr, typ, clen);
		double ll = dunning_ll(with + without, (int64_t)tr->nperiod, with, (int64_t)tr->n);
		double score = ll * exp((double)-nonperiods) * (double)periods * pow((double)nonperiods, (double)-without);
		if (score >= 0.3) {
			/* intern may move the bytes typ points into (and a type may hold a NUL) */
			char *cand = malloc(clen + 1);
			if (cand)
				memcpy(cand, typ, clen);
			uint32_t c = cand ? intern(tr, cand, clen) : PK_NONE;
			free(cand);
			if (c == PK_NONE)
				tr->oom = 1;
			else
				tr->abbr[c] |= RECLASSIFIED;
		}
	}
}

/* --- the passes ----------------------------------------------------------------------------------- */

struct ttok {
	uint32_t type, tnp;   /* ids of type and type_no_period */
	uint32_t flags;
	char first;           /* tok[0] */
};

static int reclassified_abbrev(const struct trainer *tr, const char *s, size_t n)
{
	uint32_t id = strtab_find(&tr->types, s, n);
	return id != PK_NONE && (tr->abbr[id] & RECLASSIFIED);
}

/* the first pass with the abbreviations found in pass 1 (not the rare ones pass 3 adds) */
static void first_pass(const struct trainer *tr, struct pk_tok *t)
{
	if (t->flags & PKT_END_CHAR) {
		t->flags |= PKT_SENTBREAK;
	} else if (t->flags & PKT_IS_ELLIPSIS) {
		t->flags |= PKT_ELLIPSIS;
	} else if ((t->flags & PKT_PERIOD_FINAL) && !(t->flags & PKT_TWO_DOTS)) {
		const char *key = tr->buf.p + t->low;
		size_t n = t->low_len - 1;
		const char *dash = memrchr(key, '-', n);
		if (reclassified_abbrev(tr, key, n) ||
		    (dash && reclassified_abbrev(tr, dash + 1, n - (size_t)(dash + 1 - key))))
			t->flags |= PKT_ABBR;
		else
			t->flags |= PKT_SENTBREAK;
	}
}

/* the token at text[ts, te), annotated for passes 2 and 3 */
static void annotate(struct trainer *tr, size_t ts, size_t te, uint32_t flags, struct ttok *o)
{
	struct pk_tok t;
	size_t n;
	tr->buf.len = 0;
	if (pk_tok_make(&t, tr->text, ts, te, flags, &tr->buf) < 0) {
		tr->oom = 1;
		return;
	}
	first_pass(tr, &t);
	/* intern may grow buf? no: it copies into the table; the token's strings stay in buf */
	const char *typ = pk_tok_type(&t, &tr->buf, &n);
	o->type = intern(tr, typ, n);
	typ = pk_tok_type_np(&t, &tr->buf, &n);
	o->tnp = intern(tr, typ, n);
	o->flags = t.flags;
	o->first = tr->text[ts];
}

static uint32_t tnsp(const struct ttok *t)
{
	return t->flags & PKT_SENTBREAK ? t->tnp : t->type;
}

enum { INTERNAL, INITIAL, UNKNOWN };

struct pass2 {
	int context;
};

static void ortho_data(struct trainer *tr, struct pass2 *ps, const struct ttok *t)
{
	static const uint8_t flag[3][2] = {
		[INITIAL] = {PK_BEG_UC, PK_BEG_LC}, [INTERNAL] = {PK_MID_UC, PK_MID_LC},
		[UNKNOWN] = {PK_UNK_UC, PK_UNK_LC},
	};
	if ((t->flags & PKT_PARASTART) && ps->context != UNKNOWN)
		ps->context = INITIAL;
	if ((t->flags & PKT_LINESTART) && ps->context == INTERNAL)
		ps->context = UNKNOWN;
	if (t->flags & PKT_FIRST_LOWER)
		tr->ortho[tnsp(t)] |= flag[ps->context][1];
	else if (t->flags & PKT_FIRST_UPPER)
		tr->ortho[tnsp(t)] |= flag[ps->context][0];
	if (t->flags & PKT_SENTBREAK)
		ps->context = t->flags & (PKT_IS_NUMBER | PKT_IS_INITIAL) ? UNKNOWN : INITIAL;
	else if (t->flags & (PKT_ELLIPSIS | PKT_ABBR))
		ps->context = UNKNOWN;
	else
		ps->context = INTERNAL;
}

static uint64_t pair_hash(uint64_t k, size_t mask)
{
	return (size_t)((k * 0x9e3779b97f4a7c15ull) >> 17) & mask;
}

static void count_pair(struct trainer *tr, uint32_t a, uint32_t b)
{
	uint64_t k = (uint64_t)(a + 1) << 32 | (b + 1);
	if (2 * (tr->npair + 1) > tr->pair_slots) {
		size_t n = tr->pair_slots ? 2 * tr->pair_slots : 1024;
		uint64_t *keys = calloc(n, sizeof *keys), *counts = calloc(n, sizeof *counts);
		if (!keys || !counts) {
			free(keys);
			free(counts);
			tr->oom = 1;
			return;
		}
		for (size_t i = 0; i < tr->pair_slots; i++) {
			if (!tr->pair_key[i])
				continue;
			size_t j = pair_hash(tr->pair_key[i], n - 1);
			while (keys[j])
				j = (j + 1) & (n - 1);
			keys[j] = tr->pair_key[i];
			counts[j] = tr->pair_count[i];
		}
		free(tr->pair_key);
		free(tr->pair_count);
		tr->pair_key = keys;
		tr->pair_count = counts;
		tr->pair_slots = n;
	}
	size_t i = pair_hash(k, tr->pair_slots - 1);
	while (tr->pair_key[i] && tr->pair_key[i] != k)
		i = (i + 1) & (tr->pair_slots - 1);
	if (!tr->pair_key[i]) {
		tr->pair_key[i] = k;
		tr->npair++;
	}
	tr->pair_count[i]++;
}

/* _is_rare_abbrev_type */
static int rare_abbrev(struct trainer *tr, const struct ttok *t1, const struct ttok *t2)
{
	if ((t1->flags & PKT_ABBR) || !(t1->flags & PKT_SENTBREAK))
		return 0;
	uint32_t typ = t1->tnp;   /* type_no_sentperiod of a break */
	size_t len;
	const char *s = strtab_str(&tr->types, typ, &len);
	/* NLTK adds the frequency of typ[:-1], the type without its last character */
	uint64_t count = tr->fdist[typ] + (len ? freq(tr, s, pk_prev(s, len)) : 0);
	if (tr->abbr[typ] || count >= 5)
		return 0;
	if (t2->first == ',' || t2->first == ':' || t2->first == ';')
		return 1;
	if (t2->flags & PKT_FIRST_LOWER) {
		uint8_t oc = tr->ortho[tnsp(t2)];
		if ((oc & PK_BEG_UC) && !(oc & PK_MID_UC))
			return 1;
	}
	return 0;
}

static void pair(struct trainer *tr, const struct ttok *t1, const struct ttok *t2)
{
	if (!(t1->flags & PKT_PERIOD_FINAL))
		return;
	if (rare_abbrev(tr, t1, t2))
		tr->abbr[t1->tnp] |= RARE;
	int num_or_initial = t1->flags & (PKT_IS_NUMBER | PKT_IS_INITIAL);
	if ((t1->flags & PKT_SENTBREAK) && !num_or_initial && (t2->flags & PKT_IS_ALPHA))
		tr->starter[t2->type]++;
	if ((t1->flags & PKT_SENTBREAK) && num_or_initial && (t1->flags & PKT_NON_PUNCT) &&
	    (t2->flags & PKT_NON_PUNCT))
		count_pair(tr, t1->tnp, tnsp(t2));
}

/* one scan of the text: _tokenize_words, each token given to the pass */
static void scan(struct trainer *tr, int pass)
{
	const char *text = tr->text;
	size_t a = 0, len = tr->len;
	int parastart = 0, have_prev = 0;
	struct pass2 ps = {INTERNAL};
	struct ttok prev = {0}, cur;
	while (a <= len && !tr->oom) {
		const char *nl = memchr(text + a, '\n', len - a);
		size_t end = nl ? (size_t)(nl - text) : len, pos = a, ts, te;
		uint32_t flags = PKT_LINESTART | (parastart ? PKT_PARASTART : 0);
		int any = 0;
		while (pk_word_next(text, end, &pos, &ts, &te) && !tr->oom) {
			any = 1;
			if (pass == 1) {
				struct pk_tok t;
				size_t n;
				tr->buf.len = 0;
				if (pk_tok_make(&t, text, ts, te, flags, &tr->buf) < 0) {
					tr->oom = 1;
					break;
				}
				const char *typ = pk_tok_type(&t, &tr->buf, &n);
				uint32_t id = intern(tr, typ, n);
				if (id == PK_NONE)
					break;
				tr->fdist[id]++;
				tr->n++;
				tr->nperiod += (t.flags & PKT_PERIOD_FINAL) != 0;
			} else {
				annotate(tr, ts, te, flags, &cur);
				if (tr->oom)
					break;
				if (pass == 2) {
					ortho_data(tr, &ps, &cur);
					tr->nbreak += (cur.flags & PKT_SENTBREAK) != 0;
				} else {
					if (have_prev)
						pair(tr, &prev, &cur);
					prev = cur;
					have_prev = 1;
				}
			}
			flags = 0;
		}
		parastart = !any;
		a = end + 1;
		if (tr->pg && progress_due(tr->pg))
			progress_update(tr->pg, (uint64_t)(pass - 1) * len + (a < len ? a : len));
	}
	if (tr->pg)
		progress_update(tr->pg, (uint64_t)pass * len);
}

/* --- finishing ------------------------------------------------------------------------------------ */

static struct punkt_params *finish(struct trainer *tr)
{
	struct punkt_params *p = pk_params_new();
	int64_t n = (int64_t)tr->n;
	uint32_t ntypes = strtab_count(&tr->types);
	if (!p)
		return NULL;
	/* the tables' strings, in the trainer's id order */
	for (uint32_t id = 0; id < ntypes; id++) {
		int keep = tr->abbr[id] || tr->ortho[id] || tr->starter[id];
		size_t len;
		const char *s = strtab_str(&tr->types, id, &len);
		if (!keep)
			continue;
		uint32_t pid = pk_params_type(p, s, len);
		if (pid == PK_NONE)
			goto oom;
		if (tr->abbr[id]) {
			p->flags[pid] |= PK_P_ABBREV;
			p->nabbrev++;
		}
		if (tr->ortho[id]) {
			p->ortho[pid] = tr->ortho[id];
			p->northo++;
		}
		/* _find_sent_starters */
		if (tr->starter[id]) {
			int64_t at_break = (int64_t)tr->starter[id];
			int64_t count = (int64_t)(tr->fdist[id] + freq_dot(tr, id));
			if (count < at_break)
				continue;
			double ll = col_ll((int64_t)tr->nbreak, count, at_break, n);
			if (ll >= 30 && (double)n / (double)tr->nbreak > (double)count / (double)at_break) {
				p->flags[pid] |= PK_P_STARTER;
				p->nstarter++;
			}
		}
	}
	/* _find_collocations */
	for (size_t i = 0; i < tr->pair_slots; i++) {
		if (!tr->pair_key[i])
			continue;
		uint32_t a = (uint32_t)(tr->pair_key[i] >> 32) - 1, b = (uint32_t)tr->pair_key[i] - 1;
		size_t la, lb;
		const char *sa = strtab_str(&tr->types, a, &la), *sb = strtab_str(&tr->types, b, &lb);
		uint32_t pb = pk_params_find(p, sb, lb);
		if (pb != PK_NONE && (p->flags[pb] & PK_P_STARTER))
			continue;
		int64_t col = (int64_t)tr->pair_count[i];
		int64_t c1 = (int64_t)(tr->fdist[a] + freq_dot(tr, a)), c2 = (int64_t)(tr->fdist[b] + freq_dot(tr, b));
		if (!(c1 > 1 && c2 > 1 && 1 < col && col <= (c1 < c2 ? c1 : c2)))
			continue;
		double ll = col_ll(c1, c2, col, n);
		if (ll >= 7.88 && (double)n / (double)c1 > (double)c2 / (double)col) {
			uint32_t x = pk_params_type(p, sa, la), y = x == PK_NONE ? PK_NONE : pk_params_type(p, sb, lb);
			if (y == PK_NONE || pk_params_add_colloc(p, x, y) < 0)
				goto oom;
		}
	}
	if (tr->oom)
		goto oom;
	return p;
oom:
	punkt_params_free(p);
	return NULL;
}

struct punkt_params *punkt_train(const char *text, size_t len, struct punkt_train_stats *stats,
				 struct progress *pg, char *err, size_t errlen)
{
	struct trainer tr = {0};
	struct punkt_params *p = NULL;
	tr.text = text;
	tr.len = len;
	tr.pg = pg;
	scan(&tr, 1);
	if (!tr.oom) {
		if (stats)
			stats->types = strtab_count(&tr.types);
		find_abbrevs(&tr, strtab_count(&tr.types));
	}
	if (!tr.oom)
		scan(&tr, 2);
	if (!tr.oom)
		scan(&tr, 3);
	if (!tr.oom)
		p = finish(&tr);
	if (!p)
		errf(err, errlen, "out of memory training Punkt on %zu bytes of text", len);
	if (stats) {
		stats->tokens = tr.n;
		stats->period_tokens = tr.nperiod;
		stats->sentbreaks = tr.nbreak;
	}
	strtab_free(&tr.types);
	free(tr.fdist);
	free(tr.starter);
	free(tr.ortho);
	free(tr.abbr);
	free(tr.pair_key);
	free(tr.pair_count);
	free(tr.buf.p);
	return p;
}
