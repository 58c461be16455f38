#include "wordpiece.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ids.h"

#include "msg.h"
#include "strtab.h"
#include "xalloc.h"

#define CACHE_BITS 15
#define CACHE_KEY 30         /* bytes; longer words are rare and not cached */
#define CACHE_IDS 7

struct wp {
	struct strtab vocab;     /* token bytes <-> id */
	uint32_t unk;
	char *prefix;
	size_t prefix_len;
	uint64_t prefix_state;   /* strtab_hash_step's state after the prefix's bytes */
	size_t max_len, max_cont_len; /* longest token; longest continuation after its prefix (bytes) */
	unsigned max_chars;
};

struct centry {              /* a cached word: its bytes -> its ids */
	uint64_t hash;
	uint8_t klen, nids;      /* nids 0: empty slot */
	char key[CACHE_KEY];
	uint32_t ids[CACHE_IDS];
};

struct run {                 /* a combining sequence being put in canonical order */
	uint32_t cp;
	uint8_t rank, mn;
};

struct wp_state {
	struct centry *cache;
	struct run *run, *run2;
	size_t nrun, run_cap;
	uint32_t ids[128];       /* one word's pieces before they are cached */
};

/* ---------------------------------------------------------------------------------------------
 * the generated tables */

static const struct wpu_map *map_find(const struct wpu_map *v, size_t n, uint32_t cp)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (v[mid].cp < cp)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo].cp == cp ? &v[lo] : NULL;
}

size_t wpu_nfd(uint32_t cp, uint32_t out[4])
{
	/* Hangul syllables decompose by arithmetic (Unicode 3.12) */
	if (cp >= 0xAC00 && cp <= 0xD7A3) {
		uint32_t s = cp - 0xAC00, t = s % 28;
		out[0] = 0x1100 + s / 588;
		out[1] = 0x1161 + s % 588 / 28;
		if (t)
			out[2] = 0x11A7 + t;
		return t ? 3 : 2;
	}
	if (!(wpu_flags(cp) & WPU_DECOMP))
		return 0;
	const struct wpu_map *e = map_find(wpu_decomp, wpu_decomp_n, cp);
	if (!e)
		return 0;
	memcpy(out, wpu_decomp_cps + e->off, e->len * sizeof *out);
	return e->len;
}

size_t wpu_tolower(uint32_t cp, uint32_t out[3])
{
	if (!(wpu_flags(cp) & WPU_LOWER))
		return 0;
	const struct wpu_map *e = map_find(wpu_lower, wpu_lower_n, cp);
	if (!e)
		return 0;
	memcpy(out, wpu_lower_cps + e->off, e->len * sizeof *out);
	return e->len;
}

unsigned wpu_ccc_rank(uint32_t cp)
{
	if (!(wpu_flags(cp) & WPU_CCC))
		return 0;
	size_t lo = 0, hi = wpu_ccc_n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (wpu_ccc[mid].cp < cp)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < wpu_ccc_n && wpu_ccc[lo].cp == cp ? wpu_ccc[lo].rank : 0;
}

/* ---------------------------------------------------------------------------------------------
 * the vocabulary */

struct wp *wp_new(void)
{
	struct wp *m = calloc(1, sizeof *m);
	if (!m)
		return NULL;
	m->unk = WP_NONE;
	return m;
}

void wp_free(struct wp *m)
{
	if (!m)
		return;
	strtab_free(&m->vocab);
	free(m->prefix);
	free(m);
}

int wp_add_token(struct wp *m, const char *s, size_t len, uint32_t id, char *err, size_t errlen)
{
	uint32_t had;
	if (len > UINT32_MAX / 2 || id >= WP_NONE - 1 || id > STRTAB_ID_MAX)
		return errf(err, errlen, "token %u is too long or its id too large", id);
	switch (strtab_put(&m->vocab, s, len, id, &had)) {
	case 0:
		return 0;
	case STRTAB_DUP_STR:
		return errf(err, errlen, "token '%.*s' is there twice (ids %u and %u)", (int)(len > 80 ? 80 : len), s,
			    had, id);
	case STRTAB_DUP_ID:
		return errf(err, errlen, "id %u is given to two tokens", id);
	}
	return xalloc_err(err, errlen, "the vocabulary", 0);
}

uint32_t wp_lookup(const struct wp *m, const char *s, size_t len)
{
	return strtab_find(&m->vocab, s, len);
}

const char *wp_token(const struct wp *m, uint32_t id, size_t *len)
{
	return strtab_str(&m->vocab, id, len);
}

uint32_t wp_vocab_end(const struct wp *m) { return strtab_id_end(&m->vocab); }
size_t wp_vocab_count(const struct wp *m) { return strtab_count(&m->vocab); }
const char *wp_prefix(const struct wp *m) { return m->prefix; }

int wp_finish(struct wp *m, const char *unk, const char *prefix, unsigned max_chars, char *err, size_t errlen)
{
	if (strtab_count(&m->vocab) == 0)
		return errf(err, errlen, "the vocabulary is empty");
	m->unk = wp_lookup(m, unk, strlen(unk));
	if (m->unk == WP_NONE)
		return errf(err, errlen, "the unk token '%s' is not in the vocabulary", unk);
	if (!(m->prefix = strdup(prefix)))
		return xalloc_err(err, errlen, "the continuing-subword prefix", strlen(prefix) + 1);
	m->prefix_len = strlen(prefix);
	m->prefix_state = strtab_hash_step(STRTAB_HASH0, prefix, m->prefix_len);
	m->max_chars = max_chars;
	for (uint32_t id = 0; id < strtab_id_end(&m->vocab); id++) {
		size_t len;
		const char *s = strtab_str(&m->vocab, id, &len);
		if (!s)
			continue;
		if (len > m->max_len)
			m->max_len = len;
		if (len >= m->prefix_len && memcmp(s, prefix, m->prefix_len) == 0 && len - m->prefix_len > m->max_cont_len)
			m->max_cont_len = len - m->prefix_len;
	}
	return 0;
}

/* ---------------------------------------------------------------------------------------------
 * state */

struct wp_state *wp_state_new(void)
{
	struct wp_state *s = calloc(1, sizeof *s);
	if (!s || !(s->cache = calloc((size_t)1 << CACHE_BITS, sizeof *s->cache))) {
		free(s);
		return NULL;
	}
	return s;
}

void wp_state_free(struct wp_state *s)
{
	if (!s)
		return;
	free(s->cache);
	free(s->run);
	free(s->run2);
	free(s);
}

/* ---------------------------------------------------------------------------------------------
 * the normalizer */

/* the code point at s[*i] (valid UTF-8), advancing *i */
static inline uint32_t utf8_next(const uint8_t *s, size_t *i)
{
	uint8_t c = s[*i];
	uint32_t cp;
	if (c < 0x80) {
		(*i)++;
		return c;
	}
	if (c < 0xE0) {
		cp = (uint32_t)(c & 0x1F) << 6 | (s[*i + 1] & 0x3F);
		*i += 2;
	} else if (c < 0xF0) {
		cp = (uint32_t)(c & 0x0F) << 12 | (uint32_t)(s[*i + 1] & 0x3F) << 6 | (s[*i + 2] & 0x3F);
		*i += 3;
	} else {
		cp = (uint32_t)(c & 0x07) << 18 | (uint32_t)(s[*i + 1] & 0x3F) << 12 |
		     (uint32_t)(s[*i + 2] & 0x3F) << 6 | (s[*i + 3] & 0x3F);
		*i += 4;
	}
	return cp;
}

struct nctx {
	const struct wp_norm *n;
	struct wp_state *st;
	uint8_t *out;
	size_t len, cap;
};

static int reserve(struct nctx *c, size_t more)
{
	if (c->len + more <= c->cap)
		return 0;
	size_t cap = c->cap ? c->cap : 4096;
	while (cap < c->len + more)
		cap *= 2;
	uint8_t *p = realloc(c->out, cap);
	if (!p)
		return -1;
	c->out = p;
	c->cap = cap;
	return 0;
}

static void put_utf8(struct nctx *c, uint32_t cp)  /* room for 4 bytes reserved */
{
	uint8_t *p = c->out + c->len;
	if (cp < 0x80) {
		p[0] = (uint8_t)cp;
		c->len += 1;
	} else if (cp < 0x800) {
		p[0] = (uint8_t)(0xC0 | cp >> 6);
		p[1] = (uint8_t)(0x80 | (cp & 0x3F));
		c->len += 2;
	} else if (cp < 0x10000) {
		p[0] = (uint8_t)(0xE0 | cp >> 12);
		p[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
		p[2] = (uint8_t)(0x80 | (cp & 0x3F));
		c->len += 3;
	} else {
		p[0] = (uint8_t)(0xF0 | cp >> 18);
		p[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
		p[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
		p[3] = (uint8_t)(0x80 | (cp & 0x3F));
		c->len += 4;
	}
}

/* the last step: lowercase, then out */
static int emit_lower(struct nctx *c, uint32_t cp)
{
	uint32_t l[3];
	size_t n = c->n->lowercase ? wpu_tolower(cp, l) : 0;
	if (reserve(c, 12) < 0)
		return -1;
	if (n == 0)
		put_utf8(c, cp);
	for (size_t i = 0; i < n; i++)
		put_utf8(c, l[i]);
	return 0;
}

/* Canonical ordering of the pending combining sequence (a stable sort by class), then out
 * without its nonspacing marks.  Runs are a few marks; a pathological one (thousands of
 * stacked marks) is counting-sorted so that it stays linear. */
static int flush_run(struct nctx *c)
{
	struct wp_state *st = c->st;
	size_t n = st->nrun;
	struct run *r = st->run;
	if (n == 0)
		return 0;
	if (n <= 32) {
		for (size_t i = 1; i < n; i++) {
			struct run x = r[i];
			size_t j = i;
			for (; j > 0 && r[j - 1].rank > x.rank; j--)
				r[j] = r[j - 1];
			r[j] = x;
		}
	} else {
		size_t count[257] = {0};
		for (size_t i = 0; i < n; i++)
			count[r[i].rank + 1]++;
		for (int k = 1; k < 257; k++)
			count[k] += count[k - 1];
		for (size_t i = 0; i < n; i++)
			st->run2[count[r[i].rank]++] = r[i];
		r = st->run2;
	}
	st->nrun = 0;
	for (size_t i = 0; i < n; i++)
		if (!r[i].mn && emit_lower(c, r[i].cp) < 0)
			return -1;
	return 0;
}

/* strip_accents: NFD, canonical order, nonspacing marks dropped; then lowercase */
static int emit_strip(struct nctx *c, uint32_t cp)
{
	uint32_t d[4];
	size_t n;
	if (!c->n->strip_accents)
		return emit_lower(c, cp);
	n = wpu_nfd(cp, d);
	if (n == 0)
		d[0] = cp, n = 1;
	for (size_t i = 0; i < n; i++) {
		uint8_t f = wpu_flags(d[i]);
		unsigned rank = f & WPU_CCC ? wpu_ccc_rank(d[i]) : 0;
		if (rank) {
			struct wp_state *st = c->st;
			if (st->nrun == st->run_cap) {
				size_t cap = st->run_cap ? st->run_cap * 2 : 64;
				struct run *a = realloc(st->run, cap * sizeof *a), *b;
				if (!a)
					return -1;
				st->run = a;
				if (!(b = realloc(st->run2, cap * sizeof *b)))
					return -1;
				st->run2 = b;
				st->run_cap = cap;
			}
			st->run[st->nrun++] = (struct run){d[i], (uint8_t)rank, (uint8_t)!!(f & WPU_MN)};
			continue;
		}
		if (flush_run(c) < 0)
			return -1;
		if (!(f & WPU_MN) && emit_lower(c, d[i]) < 0)
			return -1;
	}
	return 0;
}

/* U+0000-U+00FF are the tables' first block (gen_wordpiece.js numbers blocks by first use) */
#define ascii_flags wpu_blocks[0]

int wp_normalize(const struct wp_norm *n, struct wp_state *st, const uint8_t *s, size_t len,
		 uint8_t **out, size_t *outlen, size_t *cap)
{
	struct nctx c = {n, st, *out, 0, *cap};
	int rc = 0;
	for (size_t i = 0; i < len && rc == 0;) {
		if (s[i] < 0x80) {
			/* an ASCII run: no decomposition, no combining class, case by arithmetic; a
			 * dropped control does not end a combining sequence (NFD runs after the drop) */
			size_t j = i;
			while (j < len && s[j] < 0x80)
				j++;
			if ((rc = reserve(&c, j - i)) < 0)
				break;
			for (; i < j; i++) {
				uint8_t b = s[i], f = ascii_flags[b];
				if (n->clean_text && (f & (WPU_DROP | WPU_WS))) {
					if (f & WPU_DROP)
						continue;
					b = ' ';
				}
				if (st->nrun) {
					if ((rc = flush_run(&c)) < 0 || (rc = reserve(&c, j - i)) < 0)
						break;
				}
				if (n->lowercase && b >= 'A' && b <= 'Z')
					b += 32;
				c.out[c.len++] = b;
			}
			continue;
		}
		uint32_t cp = utf8_next(s, &i);
		uint8_t f = wpu_flags(cp);
		if (n->clean_text && (f & (WPU_DROP | WPU_WS))) {
			if (f & WPU_DROP)
				continue;
			cp = ' ';
		}
		if (n->handle_chinese && (f & WPU_CJK)) {
			rc = emit_strip(&c, ' ');
			if (rc == 0)
				rc = emit_strip(&c, cp);
			if (rc == 0)
				rc = emit_strip(&c, ' ');
		} else {
			rc = emit_strip(&c, cp);
		}
	}
	if (rc == 0)
		rc = flush_run(&c);
	*out = c.out;
	*cap = c.cap;
	*outlen = c.len;
	return rc;
}

/* ---------------------------------------------------------------------------------------------
 * the pre-tokenizer and the model */

/* The longest vocabulary token at w[start, wl) - looked up with the prefix unless start is 0 -
 * as HF finds it: from the longest candidate down, one character at a time.  Its id and *endp,
 * or WP_NONE.  The candidates' hashes share their bytes, so they are computed in one pass. */
static uint32_t longest_at(const struct wp *m, const uint8_t *w, size_t wl, size_t start, size_t *endp)
{
	size_t lim = start ? m->max_cont_len : m->max_len, end = wl - start > lim ? start + lim : wl;
	uint64_t hs[257], h0 = start ? m->prefix_state : STRTAB_HASH0, h = h0;
	const char *a = start ? m->prefix : "";
	size_t al = start ? m->prefix_len : 0;
	int inc = end - start < sizeof hs / sizeof *hs;

	if (inc)
		for (size_t i = start; i < end; i++)
			hs[i - start + 1] = h = strtab_hash_step(h, w + i, 1);
	while (end < wl && (w[end] & 0xC0) == 0x80)  /* back to a character boundary */
		end--;
	for (; end > start; end--) {
		if (end < wl && (w[end] & 0xC0) == 0x80)
			continue;
		uint64_t hh = strtab_hash_fin(inc ? hs[end - start] : strtab_hash_step(h0, w + start, end - start));
		uint32_t id = strtab_find_hash2(&m->vocab, hh, a, al, (const char *)w + start, end - start);
		if (id != STRTAB_NONE) {
			*endp = end;
			return id;
		}
	}
	return WP_NONE;
}

/* greedy longest-match-first over one word of nchars characters */
static int encode_word(const struct wp *m, struct wp_state *st, const uint8_t *w, size_t wl, size_t nchars,
		       uint32_t **out, size_t *n, size_t *cap)
{
	uint64_t h = 0;
	struct centry *ce = NULL;
	size_t k = 0, end = 0;

	if (nchars > m->max_chars)
		return ids_push(out, n, cap, m->unk);
	if (wl <= CACHE_KEY) {
		h = strtab_hash(w, wl);
		ce = &st->cache[h & (((size_t)1 << CACHE_BITS) - 1)];
		if (ce->nids && ce->hash == h && ce->klen == wl && memcmp(ce->key, w, wl) == 0) {
			for (size_t i = 0; i < ce->nids; i++)
				if (ids_push(out, n, cap, ce->ids[i]) < 0)
					return -1;
			return 0;
		}
	}
	for (size_t start = 0; start < wl; start = end) {
		uint32_t id = longest_at(m, w, wl, start, &end);
		if (id == WP_NONE) {
			k = 0;
			st->ids[k++] = m->unk;  /* the whole word, as HF */
			break;
		}
		if (k < sizeof st->ids / sizeof *st->ids)
			st->ids[k] = id;
		k++;
	}
	if (k > sizeof st->ids / sizeof *st->ids) {
		/* more pieces than the scratch holds (a long word of single characters): again, into out */
		for (size_t start = 0; start < wl; start = end)
			if (ids_push(out, n, cap, longest_at(m, w, wl, start, &end)) < 0)
				return -1;
		return 0;
	}
	for (size_t i = 0; i < k; i++)
		if (ids_push(out, n, cap, st->ids[i]) < 0)
			return -1;
	if (ce && k <= CACHE_IDS) {
		ce->hash = h;
		ce->klen = (uint8_t)wl;
		ce->nids = (uint8_t)k;
		memcpy(ce->key, w, wl);
		memcpy(ce->ids, st->ids, k * sizeof *st->ids);
	}
	return 0;
}

int wp_next_word(const uint8_t *s, size_t len, size_t *pos, size_t *start, size_t *wlen, size_t *nchars)
{
	size_t i = *pos;
	while (i < len) {
		size_t at = i, k;
		uint32_t cp = s[i] < 0x80 ? s[i++] : utf8_next(s, &i);
		uint8_t f = cp < 0x80 ? ascii_flags[cp] : wpu_flags(cp);
		if (f & WPU_WS)
			continue;
		k = 1;
		if (!(f & WPU_PUNCT))
			for (; i < len; k++) {
				size_t j = i;
				cp = s[j] < 0x80 ? s[j++] : utf8_next(s, &j);
				f = cp < 0x80 ? ascii_flags[cp] : wpu_flags(cp);
				if (f & (WPU_WS | WPU_PUNCT))
					break;
				i = j;
			}
		*start = at;
		*wlen = i - at;
		*nchars = k;
		*pos = i;
		return 1;
	}
	*pos = i;
	return 0;
}

int wp_encode(const struct wp *m, struct wp_state *st, int pretok, const uint8_t *s, size_t len,
	      uint32_t **out, size_t *n, size_t *cap)
{
	size_t pos = 0, at, wl, nchars;
	if (!pretok) {
		nchars = 0;
		for (size_t i = 0; i < len; i++)
			nchars += (s[i] & 0xC0) != 0x80;
		return len ? encode_word(m, st, s, len, nchars, out, n, cap) : 0;
	}
	while (wp_next_word(s, len, &pos, &at, &wl, &nchars))
		if (encode_word(m, st, s + at, wl, nchars, out, n, cap) < 0)
			return -1;
	return 0;
}
