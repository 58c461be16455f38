/* punkt - PunktSentenceTokenizer.tokenize(text), NLTK 3.8's steps in order (see punkt.h):
 *
 *   1. candidates: every match of the period-context pattern, [.?!] followed by closing
 *      punctuation or by whitespace and a word (Megatron's --keep-newlines pattern also takes the
 *      word before and the whitespace after: \S*[.?!]\s* followed by punctuation or a word);
 *   2. contexts (_match_potential_end_contexts): each candidate with the word before it, where a
 *      candidate whose word overlaps the next one's is dropped in favour of the next ("acting!!!"
 *      is one candidate, its last '!'); "the word before" starts after the last ASCII whitespace
 *      (string.whitespace: NLTK's test, not \s) since the previous candidate;
 *   3. each context is split into word tokens and annotated (first pass: sentence-end
 *      characters, ellipses, known abbreviations; second pass: collocations, the orthographic
 *      heuristic, frequent sentence starters, initials and ordinals); the candidate ends a
 *      sentence if some token marked as a break is followed by another token;
 *   4. sentences run from one break to the next (the next starting at the word after the
 *      whitespace), the last one up to the text without its trailing whitespace;
 *   5. realignment: closing quotes and brackets at the start of a sentence, followed by
 *      whitespace, "--" or the end, move to the sentence before.
 *
 * Everything is offsets into the caller's text; the only copies are each context's lowercase
 * tokens, in the state's buffer. */
#include <stdlib.h>

#include "tokenize/punkt_int.h"

struct punkt_state {
	struct pk_buf buf;
	struct pk_tok *tok;
	size_t ntok, tokcap;
	struct punkt_span *raw;   /* sentence slices before realignment */
	size_t nraw, rawcap;
};

struct punkt_state *punkt_state_new(void)
{
	return calloc(1, sizeof(struct punkt_state));
}

void punkt_state_free(struct punkt_state *s)
{
	if (!s)
		return;
	free(s->buf.p);
	free(s->tok);
	free(s->raw);
	free(s);
}

static int is_end_char(char c)
{
	return c == '.' || c == '?' || c == '!';
}

/* the NonWord class of the period context: [)";}\]*:@'({[?!] */
static int nonword(char c)
{
	switch (c) {
	case ')': case '"': case ';': case '}': case ']': case '*': case ':': case '@': case '\'':
	case '(': case '{': case '[': case '?': case '!':
		return 1;
	}
	return 0;
}

static size_t skip_space(const char *s, size_t i, size_t len)
{
	size_t l;
	while (i < len && (pk_bits_at(s + i, &l) & PKU_SPACE))
		i += l;
	return i;
}

static size_t skip_nonspace(const char *s, size_t i, size_t len)
{
	size_t l;
	while (i < len && !(pk_bits_at(s + i, &l) & PKU_SPACE))
		i += l;
	return i;
}

/* --- annotation of one context -------------------------------------------------------------------- */

static int push_tok(struct punkt_state *st, const char *text, size_t ts, size_t te, uint32_t flags)
{
	if (st->ntok == st->tokcap) {
		size_t cap = st->tokcap ? 2 * st->tokcap : 64;
		struct pk_tok *t = realloc(st->tok, cap * sizeof *t);
		if (!t)
			return -1;
		st->tok = t;
		st->tokcap = cap;
	}
	return pk_tok_make(&st->tok[st->ntok++], text, ts, te, flags, &st->buf);
}

/* _tokenize_words: the words of each line ('\n' only), the first of a line marked as such, and
 * as a paragraph start after a line with no word */
static int words(struct punkt_state *st, const char *text, size_t a, size_t b)
{
	int parastart = 0;
	st->ntok = 0;
	st->buf.len = 0;
	while (a <= b) {
		const char *nl = memchr(text + a, '\n', b - a);
		size_t end = nl ? (size_t)(nl - text) : b, pos = a, ts, te;
		uint32_t flags = PKT_LINESTART | (parastart ? PKT_PARASTART : 0);
		int any = 0;
		while (pk_word_next(text, end, &pos, &ts, &te)) {
			if (push_tok(st, text, ts, te, flags) < 0)
				return -1;
			flags = 0;
			any = 1;
		}
		parastart = any ? 0 : 1;
		a = end + 1;
	}
	return 0;
}

enum { NO, YES, UNKNOWN };

/* _ortho_heuristic: does the token start a sentence? */
static int ortho_heuristic(const struct punkt_params *p, const struct pk_tok *t, const struct pk_buf *buf,
			   const char *text)
{
	size_t n;
	if (t->end - t->start == 1 && memchr(";:,.!?", text[t->start], 6))
		return NO;
	const char *typ = pk_tok_type_nsp(t, buf, &n);
	uint32_t id = pk_params_find(p, typ, n);
	int oc = id == PK_NONE ? 0 : p->ortho[id];
	if ((t->flags & PKT_FIRST_UPPER) && (oc & PK_LC) && !(oc & PK_MID_UC))
		return YES;
	if ((t->flags & PKT_FIRST_LOWER) && ((oc & PK_UC) || !(oc & PK_BEG_LC)))
		return NO;
	return UNKNOWN;
}

/* _second_pass_annotation of t1, followed by t2 (annotated by the first pass only) */
static void second_pass(const struct punkt_params *p, struct pk_tok *t1, const struct pk_tok *t2,
			const struct pk_buf *buf, const char *text)
{
	size_t n1, n2;
	if (!(t1->flags & PKT_PERIOD_FINAL))
		return;
	const char *typ = pk_tok_type_np(t1, buf, &n1), *next = pk_tok_type_nsp(t2, buf, &n2);
	uint32_t id1 = pk_params_find(p, typ, n1), id2 = pk_params_find(p, next, n2);
	int initial = t1->flags & PKT_IS_INITIAL;

	if (id1 != PK_NONE && id2 != PK_NONE && pk_params_has_colloc(p, id1, id2)) {
		t1->flags = (t1->flags & ~PKT_SENTBREAK) | PKT_ABBR;
		return;
	}
	if ((t1->flags & (PKT_ABBR | PKT_ELLIPSIS)) && !initial) {
		if (ortho_heuristic(p, t2, buf, text) == YES) {
			t1->flags |= PKT_SENTBREAK;
			return;
		}
		if ((t2->flags & PKT_FIRST_UPPER) && id2 != PK_NONE && (p->flags[id2] & PK_P_STARTER)) {
			t1->flags |= PKT_SENTBREAK;
			return;
		}
	}
	if (initial || (n1 == PK_NUMBER_LEN && memcmp(typ, PK_NUMBER, PK_NUMBER_LEN) == 0)) {
		int r = ortho_heuristic(p, t2, buf, text);
		if (r == NO) {
			t1->flags = (t1->flags & ~PKT_SENTBREAK) | PKT_ABBR;
			return;
		}
		if (r == UNKNOWN && initial && (t2->flags & PKT_FIRST_UPPER) &&
		    !((id2 == PK_NONE ? 0 : p->ortho[id2]) & PK_LC))
			t1->flags = (t1->flags & ~PKT_SENTBREAK) | PKT_ABBR;
	}
}

/* text_contains_sentbreak(text[a, b)): 1 yes, 0 no, -1 out of memory */
static int contains_sentbreak(const struct punkt_params *p, struct punkt_state *st, const char *text, size_t a,
			      size_t b)
{
	if (words(st, text, a, b) < 0)
		return -1;
	for (size_t i = 0; i < st->ntok; i++)
		pk_first_pass(&st->tok[i], &st->buf, p);
	for (size_t i = 0; i + 1 < st->ntok; i++) {
		second_pass(p, &st->tok[i], &st->tok[i + 1], &st->buf, text);
		if (st->tok[i].flags & PKT_SENTBREAK)
			return 1;
	}
	return 0;
}

/* --- candidates and their contexts ---------------------------------------------------------------- */

struct match {
	size_t start, end;       /* the period context's match */
	size_t next_tok;         /* where its next_tok group starts; SIZE_MAX when it did not match */
	size_t after_end;        /* where its after_tok group ends */
};

struct slicer {
	const struct punkt_params *p;
	struct punkt_state *st;
	const char *text;
	size_t len;
	int have_prev;
	size_t prev_start, prev_stop;   /* previous_slice */
	struct match prev;
	size_t last_break;
};

static int push_raw(struct punkt_state *st, size_t start, size_t end)
{
	if (st->nraw == st->rawcap) {
		size_t cap = st->rawcap ? 2 * st->rawcap : 64;
		struct punkt_span *r = realloc(st->raw, cap * sizeof *r);
		if (!r)
			return -1;
		st->raw = r;
		st->rawcap = cap;
	}
	st->raw[st->nraw++] = (struct punkt_span){start, end};
	return 0;
}

/* _slices_from_text's loop body, for one (match, context) */
static int decide(struct slicer *s, const struct match *m, size_t ctx_start)
{
	int r = contains_sentbreak(s->p, s->st, s->text, ctx_start, m->after_end);
	if (r <= 0)
		return r;
	if (push_raw(s->st, s->last_break, m->end) < 0)
		return -1;
	s->last_break = m->next_tok != SIZE_MAX ? m->next_tok : m->end;
	return 0;
}

static int is_ascii_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* _match_potential_end_contexts' loop body: yields the previous match unless its word overlaps
 * this one's */
static int candidate(struct slicer *s, const struct match *m)
{
	size_t from = s->prev_stop, i = m->start, idx = 0, start;
	while (i > from) {
		if (is_ascii_space(s->text[--i])) {
			idx = i - from;
			break;
		}
	}
	start = idx ? s->prev_stop + idx + 1 : s->prev_start;
	if (s->have_prev && s->prev_stop <= start && decide(s, &s->prev, s->prev_start) < 0)
		return -1;
	s->prev = *m;
	s->prev_start = start;
	s->prev_stop = m->start;
	s->have_prev = 1;
	return 0;
}

/* the after_tok / next_tok groups of a lookahead at a */
static void after(const char *text, size_t len, size_t a, struct match *m)
{
	if (nonword(text[a])) {
		m->next_tok = SIZE_MAX;
		m->after_end = a + 1;
	} else {
		m->next_tok = a;
		m->after_end = skip_nonspace(text, a, len);
	}
}

/* PunktLanguageVars' period context: [.?!](?=(?P<after_tok>NonWord|\s+(?P<next_tok>\S+))) */
static int candidates_standard(struct slicer *s)
{
	const char *text = s->text;
	size_t len = s->len;
	for (size_t p = 0; p < len; p++) {
		if (!is_end_char(text[p]) || p + 1 == len)
			continue;
		struct match m = {p, p + 1, SIZE_MAX, p + 2};
		if (!nonword(text[p + 1])) {
			size_t w = skip_space(text, p + 1, len);
			if (w == p + 1 || w == len)
				continue;
			m.next_tok = w;
			m.after_end = skip_nonspace(text, w, len);
		}
		if (candidate(s, &m) < 0)
			return -1;
	}
	return 0;
}

/* Megatron's CustomLanguageVars: \S*[.?!]\s*(?=(?P<after_tok>NonWord|(?P<next_tok>\S+))).  From
 * where the search stands, \S* takes the rest of the word and gives back up to its last [.?!]
 * after which the lookahead can hold: anywhere inside the word, or at its end when a word follows
 * the whitespace. */
static int candidates_keep_newlines(struct slicer *s)
{
	const char *text = s->text;
	size_t len = s->len, pos = 0;
	while (pos < len) {
		size_t st = skip_space(text, pos, len), e, k, w;
		if (st >= len)
			break;
		e = skip_nonspace(text, st, len);
		struct match m = {st, 0, SIZE_MAX, 0};
		for (k = e; k > st;) {
			if (!is_end_char(text[--k]))
				continue;
			if (k + 1 < e) {
				m.end = k + 1;
				break;
			}
			if ((w = skip_space(text, e, len)) < len) {
				m.end = w;
				break;
			}
		}
		if (!m.end) {
			pos = e;
			continue;
		}
		after(text, len, m.end, &m);
		if (candidate(s, &m) < 0)
			return -1;
		pos = m.end;
	}
	return 0;
}

/* --- realignment ---------------------------------------------------------------------------------- */

/* re_boundary_realignment, ["\')\]}]+?(?:\s+|(?=--)|$) with MULTILINE, matched at the start of
 * text[a, b): 1 with the closing characters' length and the match's, else 0 */
static int realignment(const char *text, size_t a, size_t b, size_t *nclose, size_t *mlen)
{
	size_t i = a;
	while (i < b && memchr("\"')]}", text[i], 5))
		i++;
	if (i == a)
		return 0;
	/* the lazy +? can only stop at the end of the run: inside it the next character closes */
	size_t l;
	if (i < b && (pk_bits_at(text + i, &l) & PKU_SPACE)) {
		*nclose = i - a;
		*mlen = skip_space(text, i, b) - a;
		return 1;
	}
	if (i == b || (i + 1 < b && text[i] == '-' && text[i + 1] == '-')) {
		*nclose = *mlen = i - a;
		return 1;
	}
	return 0;
}

static int push_span(struct punkt_span **spans, size_t *n, size_t *cap, size_t start, size_t end)
{
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 64;
		struct punkt_span *t = realloc(*spans, c * sizeof *t);
		if (!t)
			return -1;
		*spans = t;
		*cap = c;
	}
	(*spans)[(*n)++] = (struct punkt_span){start, end};
	return 0;
}

int punkt_split(const struct punkt_params *p, int keep_newlines, struct punkt_state *st, const char *text,
		size_t len, struct punkt_span **spans, size_t *n, size_t *cap)
{
	struct slicer s = {p, st, text, len, 0, 0, 0, {0}, 0};
	size_t end = len, realign = 0, nclose, mlen;

	*n = 0;
	st->nraw = 0;
	if ((keep_newlines ? candidates_keep_newlines(&s) : candidates_standard(&s)) < 0)
		return -1;
	if (s.have_prev && decide(&s, &s.prev, s.prev_start) < 0)
		return -1;
	while (end > 0) {   /* len(text.rstrip()) */
		size_t q = pk_prev(text, end), l;
		if (!(pk_bits_at(text + q, &l) & PKU_SPACE))
			break;
		end = q;
	}
	if (push_raw(st, s.last_break, end) < 0)
		return -1;

	for (size_t i = 0; i < st->nraw; i++) {
		size_t a = st->raw[i].start + realign, b = st->raw[i].end;
		if (i + 1 < st->nraw && realignment(text, st->raw[i + 1].start, st->raw[i + 1].end, &nclose, &mlen)) {
			if (push_span(spans, n, cap, a, st->raw[i + 1].start + nclose) < 0)
				return -1;
			realign = mlen;
			continue;
		}
		realign = 0;
		if (b > a && push_span(spans, n, cap, a, b) < 0)
			return -1;
	}
	return 0;
}
