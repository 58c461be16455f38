#include "bpe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ids.h"
#include "strtab.h"
#include "xalloc.h"

#define SCAN_MAX 48          /* symbols; above this the heap's log n beats the scan's n */
#define CACHE_BITS 16
#define CACHE_KEY 24         /* bytes; longer pieces are rare and not cached */
#define CACHE_IDS 12

struct ment {                /* merge hash entry: (a, b) -> (rank, id) */
	uint64_t key;            /* a << 32 | b, plus 1 so that 0 means empty */
	uint32_t rank, id;
};

struct bpe {
	struct strtab vocab;     /* token bytes <-> id */
	struct ment *mt;
	size_t mt_cap, mt_n;
	int byte_level, fuse_unk, byte_fallback, ignore_merges;
	uint32_t unk;
	uint32_t byte_id[256];   /* byte-level: the id of each byte's stand-in character */
	uint32_t fb_id[256];     /* byte_fallback: the id of "<0xNN>" */
};

struct centry {
	uint64_t hash;
	uint8_t klen, nids;
	uint8_t key[CACHE_KEY];
	uint32_t ids[CACHE_IDS];
};

struct bpe_cache {
	struct centry e[1 << CACHE_BITS];
};

static char byte_chars[256][3];
static uint8_t byte_char_len[256];

/* GPT-2's map: printable Latin-1 bytes stand for themselves, the other 68 bytes take
 * U+0100.. in order, so every byte is a visible character in vocab.json. */
static void init_byte_chars(void)
{
	static int done;
	int extra = 0;
	if (done)
		return;
	for (int b = 0; b < 256; b++) {
		int printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
		unsigned cp = printable ? (unsigned)b : 0x100u + (unsigned)extra++;
		if (cp < 0x80) {
			byte_chars[b][0] = (char)cp;
			byte_char_len[b] = 1;
		} else {
			byte_chars[b][0] = (char)(0xc0 | (cp >> 6));
			byte_chars[b][1] = (char)(0x80 | (cp & 0x3f));
			byte_char_len[b] = 2;
		}
	}
	done = 1;
}

const char *bpe_byte_char(uint8_t b, size_t *len)
{
	init_byte_chars();
	*len = byte_char_len[b];
	return byte_chars[b];
}

static uint64_t mix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

struct bpe *bpe_new(void)
{
	struct bpe *m = calloc(1, sizeof *m);
	if (!m)
		return NULL;
	init_byte_chars();
	m->unk = BPE_NONE;
	m->mt_cap = 1024;
	m->mt = calloc(m->mt_cap, sizeof *m->mt);
	if (!m->mt) {
		bpe_free(m);
		return NULL;
	}
	return m;
}

void bpe_free(struct bpe *m)
{
	if (!m)
		return;
	strtab_free(&m->vocab);
	free(m->mt);
	free(m);
}

int bpe_add_token(struct bpe *m, const char *s, size_t len, uint32_t id, char *err, size_t errlen)
{
	uint32_t had;
	if (id > STRTAB_ID_MAX || len > UINT32_MAX / 2) {
		snprintf(err, errlen, "token id %u out of range", id);
		return -1;
	}
	switch (strtab_put(&m->vocab, s, len, id, &had)) {
	case 0:
		return 0;
	case STRTAB_DUP_STR:
		snprintf(err, errlen, "token '%.*s' appears twice (ids %u and %u)", (int)len, s, had, id);
		return -1;
	case STRTAB_DUP_ID:
		snprintf(err, errlen, "id %u is given to two tokens", id);
		return -1;
	}
	xalloc_err(err, errlen, "the tokenizer's vocabulary table", 0);
	return -1;
}

uint32_t bpe_lookup(const struct bpe *m, const char *s, size_t len)
{
	return strtab_find(&m->vocab, s, len);
}

const char *bpe_token(const struct bpe *m, uint32_t id, size_t *len)
{
	return strtab_str(&m->vocab, id, len);
}

uint32_t bpe_vocab_end(const struct bpe *m)
{
	return strtab_id_end(&m->vocab);
}

size_t bpe_merge_count(const struct bpe *m)
{
	return m->mt_n;
}

static struct ment *mfind(const struct bpe *m, uint64_t key)
{
	size_t mask = m->mt_cap - 1, i = mix64(key) & mask;
	for (;; i = (i + 1) & mask)
		if (m->mt[i].key == key || m->mt[i].key == 0)
			return &m->mt[i];
}

static int mgrow(struct bpe *m)
{
	struct ment *old = m->mt;
	size_t oc = m->mt_cap;
	m->mt_cap *= 2;
	m->mt = calloc(m->mt_cap, sizeof *m->mt);
	if (!m->mt)
		return -1;
	for (size_t i = 0; i < oc; i++)
		if (old[i].key)
			*mfind(m, old[i].key) = old[i];
	free(old);
	return 0;
}

static inline uint64_t pair_key(uint32_t a, uint32_t b)
{
	return ((uint64_t)a << 32 | b) + 1;
}

int bpe_add_merge(struct bpe *m, const char *a, size_t alen, const char *b, size_t blen,
		  char *err, size_t errlen)
{
	uint32_t ia = bpe_lookup(m, a, alen), ib = bpe_lookup(m, b, blen), ic;
	char *cat;

	if (ia == BPE_NONE || ib == BPE_NONE) {
		snprintf(err, errlen, "merge '%.*s %.*s': '%.*s' is not in the vocabulary", (int)alen, a,
			 (int)blen, b, ia == BPE_NONE ? (int)alen : (int)blen, ia == BPE_NONE ? a : b);
		return -1;
	}
	cat = malloc(alen + blen);
	if (!cat) {
		xalloc_err(err, errlen, "a merge's joined token", alen + blen);
		return -1;
	}
	memcpy(cat, a, alen);
	memcpy(cat + alen, b, blen);
	ic = bpe_lookup(m, cat, alen + blen);
	free(cat);
	if (ic == BPE_NONE) {
		snprintf(err, errlen, "merge '%.*s %.*s': the result '%.*s%.*s' is not in the vocabulary",
			 (int)alen, a, (int)blen, b, (int)alen, a, (int)blen, b);
		return -1;
	}
	if ((m->mt_n + 1) * 2 > m->mt_cap && mgrow(m) < 0) {
		xalloc_err(err, errlen, "the tokenizer's merge table", m->mt_cap * sizeof *m->mt);
		return -1;
	}
	struct ment *e = mfind(m, pair_key(ia, ib));
	if (e->key)  /* HF keeps the first rank of a repeated merge */
		return 0;
	e->key = pair_key(ia, ib);
	e->rank = (uint32_t)m->mt_n++;
	e->id = ic;
	return 0;
}

int bpe_finish(struct bpe *m, int byte_level, const char *unk, int fuse_unk, int byte_fallback,
	       int ignore_merges, char *err, size_t errlen)
{
	char name[8];
	m->byte_level = byte_level;
	m->fuse_unk = fuse_unk;
	m->byte_fallback = byte_fallback;
	m->ignore_merges = ignore_merges;
	if (unk) {
		m->unk = bpe_lookup(m, unk, strlen(unk));
		if (m->unk == BPE_NONE) {
			snprintf(err, errlen, "unk_token '%s' is not in the vocabulary", unk);
			return -1;
		}
	}
	for (int b = 0; b < 256; b++) {
		m->byte_id[b] = bpe_lookup(m, byte_chars[b], byte_char_len[b]);
		snprintf(name, sizeof name, "<0x%02X>", b);
		m->fb_id[b] = bpe_lookup(m, name, 6);
	}
	return 0;
}

struct bpe_cache *bpe_cache_new(void)
{
	return calloc(1, sizeof(struct bpe_cache));
}

void bpe_cache_free(struct bpe_cache *c)
{
	free(c);
}

static inline int utf8_len(uint8_t c)
{
	return c < 0x80 ? 1 : c < 0xc0 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : c < 0xf8 ? 4 : 1;
}

static inline uint64_t merge_of(const struct bpe *m, uint32_t a, uint32_t b, uint32_t *id)
{
	const struct ment *e = mfind(m, pair_key(a, b));
	if (!e->key)
		return UINT64_MAX;
	*id = e->id;
	return e->rank;
}

/* Lowest rank first, leftmost on ties, by scanning: n small. */
static size_t merge_scan(const struct bpe *m, uint32_t *sym, size_t n)
{
	uint32_t rank[SCAN_MAX], nid[SCAN_MAX];
	for (size_t i = 0; i + 1 < n; i++)
		rank[i] = (uint32_t)merge_of(m, sym[i], sym[i + 1], &nid[i]);
	while (n > 1) {
		size_t best = 0;
		for (size_t i = 1; i + 1 < n; i++)
			if (rank[i] < rank[best])
				best = i;
		if (rank[best] == UINT32_MAX)
			break;
		sym[best] = nid[best];
		memmove(sym + best + 1, sym + best + 2, (n - best - 2) * sizeof *sym);
		memmove(rank + best + 1, rank + best + 2, (n - best - 2 > 0 ? n - best - 2 : 0) * sizeof *rank);
		memmove(nid + best + 1, nid + best + 2, (n - best - 2 > 0 ? n - best - 2 : 0) * sizeof *nid);
		n--;
		if (best > 0)
			rank[best - 1] = (uint32_t)merge_of(m, sym[best - 1], sym[best], &nid[best - 1]);
		if (best + 1 < n)
			rank[best] = (uint32_t)merge_of(m, sym[best], sym[best + 1], &nid[best]);
		else
			rank[best] = UINT32_MAX;
	}
	return n;
}

struct hent {
	uint32_t rank, pos, id;
};

static int hless(const struct hent *a, const struct hent *b)
{
	return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void hpush(struct hent *h, size_t *n, struct hent e)
{
	size_t i = (*n)++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!hless(&e, &h[p]))
			break;
		h[i] = h[p];
		i = p;
	}
	h[i] = e;
}

static struct hent hpop(struct hent *h, size_t *n)
{
	struct hent top = h[0], last = h[--(*n)];
	size_t i = 0;
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, s = i;
		const struct hent *cur = &last;
		if (l < *n && hless(&h[l], cur)) {
			s = l;
			cur = &h[l];
		}
		if (r < *n && hless(&h[r], cur))
			s = r;
		if (s == i)
			break;
		h[i] = h[s];
		i = s;
	}
	if (*n)
		h[i] = last;
	return top;
}

/* The same order with a heap of (rank, position) over a linked list: n large. */
static size_t merge_heap(const struct bpe *m, uint32_t *sym, size_t n)
{
	int32_t *prev = malloc(n * sizeof *prev), *next = malloc(n * sizeof *next);
	struct hent *h = malloc((n * 3 + 1) * sizeof *h);  /* n-1 pairs, then at most 2 per merge */
	size_t hn = 0, out = 0;
	uint32_t id;

	if (!prev || !next || !h) {
		free(prev), free(next), free(h);
		return merge_scan(m, sym, n < SCAN_MAX ? n : SCAN_MAX);  /* unreachable in practice */
	}
	for (size_t i = 0; i < n; i++) {
		prev[i] = (int32_t)i - 1;
		next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
	}
	for (size_t i = 0; i + 1 < n; i++) {
		uint64_t r = merge_of(m, sym[i], sym[i + 1], &id);
		if (r != UINT64_MAX)
			hpush(h, &hn, (struct hent){(uint32_t)r, (uint32_t)i, id});
	}
	while (hn) {
		struct hent e = hpop(h, &hn);
		int32_t p = (int32_t)e.pos, q = next[p];
		/* stale: the symbol was merged away, or its right neighbour changed */
		if (sym[p] == BPE_NONE || q < 0)
			continue;
		uint64_t r = merge_of(m, sym[p], sym[q], &id);
		if (r != e.rank || id != e.id)
			continue;
		sym[p] = id;
		sym[q] = BPE_NONE;
		next[p] = next[q];
		if (next[q] >= 0)
			prev[next[q]] = p;
		if (prev[p] >= 0 && (r = merge_of(m, sym[prev[p]], sym[p], &id)) != UINT64_MAX)
			hpush(h, &hn, (struct hent){(uint32_t)r, (uint32_t)prev[p], id});
		if (next[p] >= 0 && (r = merge_of(m, sym[p], sym[next[p]], &id)) != UINT64_MAX)
			hpush(h, &hn, (struct hent){(uint32_t)r, (uint32_t)p, id});
	}
	for (size_t i = 0; i < n; i++)
		if (sym[i] != BPE_NONE)
			sym[out++] = sym[i];
	free(prev), free(next), free(h);
	return out;
}

/* The symbols of one character (given as its bytes) missing from the vocabulary. */
static int unknown_char(const struct bpe *m, const uint8_t *c, size_t clen, uint32_t *sym, size_t *ns,
			int *pending_unk)
{
	if (m->byte_fallback) {
		size_t i;
		for (i = 0; i < clen && m->fb_id[c[i]] != BPE_NONE; i++)
			;
		if (i == clen) {
			if (*pending_unk) {
				sym[(*ns)++] = m->unk;
				*pending_unk = 0;
			}
			for (i = 0; i < clen; i++)
				sym[(*ns)++] = m->fb_id[c[i]];
			return 0;
		}
	}
	if (m->unk == BPE_NONE)
		return 0;  /* HF drops it silently */
	if (*pending_unk && !m->fuse_unk)
		sym[(*ns)++] = m->unk;
	*pending_unk = 1;
	return 0;
}

int bpe_encode(const struct bpe *m, struct bpe_cache *c, const uint8_t *s, size_t len,
	       uint32_t **out, size_t *n, size_t *cap)
{
	struct centry *ce = NULL;
	uint64_t h = 0;
	uint32_t stack[SCAN_MAX * 4], *sym = stack;
	size_t ns = 0;
	int pending_unk = 0;

	if (c && len <= CACHE_KEY) {
		h = strtab_hash(s, len);
		ce = &c->e[h & ((1 << CACHE_BITS) - 1)];
		if (ce->hash == h && ce->klen == len && ce->nids && memcmp(ce->key, s, len) == 0) {
			for (size_t i = 0; i < ce->nids; i++)
				if (ids_push(out, n, cap, ce->ids[i]) < 0)
					return -1;
			return 0;
		}
	}
	/* a symbol per byte at most, plus a pending unk */
	if (len + 1 > sizeof stack / sizeof *stack) {
		sym = malloc((len + 1) * 2 * sizeof *sym);
		if (!sym)
			return -1;
	}

	if (m->ignore_merges) {
		/* a piece that is itself a token is emitted whole, merges or not */
		uint32_t id;
		if (m->byte_level) {
			char tmp[512];
			size_t tl = 0;
			for (size_t i = 0; i < len && tl + 2 < sizeof tmp; i++) {
				memcpy(tmp + tl, byte_chars[s[i]], byte_char_len[s[i]]);
				tl += byte_char_len[s[i]];
			}
			id = len * 2 < sizeof tmp ? bpe_lookup(m, tmp, tl) : BPE_NONE;
		} else {
			id = bpe_lookup(m, (const char *)s, len);
		}
		if (id != BPE_NONE) {
			sym[ns++] = id;
			goto done;
		}
	}

	if (m->byte_level) {
		for (size_t i = 0; i < len; i++) {
			uint32_t id = m->byte_id[s[i]];
			if (id != BPE_NONE) {
				if (pending_unk) {
					sym[ns++] = m->unk;
					pending_unk = 0;
				}
				sym[ns++] = id;
			} else {
				unknown_char(m, (const uint8_t *)byte_chars[s[i]], byte_char_len[s[i]], sym, &ns,
					     &pending_unk);
			}
		}
	} else {
		for (size_t i = 0; i < len;) {
			size_t cl = (size_t)utf8_len(s[i]);
			if (i + cl > len)
				cl = len - i;
			uint32_t id = bpe_lookup(m, (const char *)s + i, cl);
			if (id != BPE_NONE) {
				if (pending_unk) {
					sym[ns++] = m->unk;
					pending_unk = 0;
				}
				sym[ns++] = id;
			} else {
				unknown_char(m, s + i, cl, sym, &ns, &pending_unk);
			}
			i += cl;
		}
	}
	if (pending_unk)
		sym[ns++] = m->unk;
	ns = ns <= SCAN_MAX ? merge_scan(m, sym, ns) : merge_heap(m, sym, ns);

done:
	for (size_t i = 0; i < ns; i++)
		if (ids_push(out, n, cap, sym[i]) < 0)
			return -1;
	if (ce && ns <= CACHE_IDS) {
		ce->hash = h;
		ce->klen = (uint8_t)len;
		ce->nids = (uint8_t)ns;
		memcpy(ce->key, s, len);
		memcpy(ce->ids, sym, ns * sizeof *sym);
	}
	if (sym != stack)
		free(sym);
	return 0;
}
