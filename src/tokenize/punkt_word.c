/* punkt_word - Punkt's word tokens: PunktLanguageVars.word_tokenize as a scanner, PunktToken's
 * properties, Python's str.lower(), and the first annotation pass.
 *
 * The word tokenizer is NLTK's regular expression
 *
 *     MultiChar  |  (?=WordStart) \S+? (?= \s | $ | NonWord | MultiChar | ,(?=$|\s|NonWord|MultiChar))  |  \S
 *
 * with MultiChar = -{2,} | \.{2,} | (?:\.\s){2,}\. , NonWord = [)";}\]*:@'({[?!] and WordStart
 * any character but ("`{[:;&#*@)}]-, ; findall() tries the alternatives in that order at each
 * position and steps over a character none of them matches (whitespace).  The lazy \S+? stops at
 * the first place where its lookahead holds, which is what the loop in pk_word_next tests before
 * taking each character.  So a period stays on its word ("Dr.", "U.S.A."), a comma is split off
 * only where it ends a word, and "...", "--", ". . ." are tokens of their own. */
#include <stdlib.h>

#include "tokenize/punkt_int.h"

int pk_buf_reserve(struct pk_buf *b, size_t more)
{
	if (b->len + more <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + more)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p)
		return -1;
	b->p = p;
	b->cap = cap;
	return 0;
}

/* [)";}\]*:@'({[?!]: NonWord, the characters that cannot be inside a word */
static const uint8_t nonword[128] = {
	[')'] = 1, ['"'] = 1, [';'] = 1, ['}'] = 1, [']'] = 1, ['*'] = 1, [':'] = 1, ['@'] = 1,
	['\''] = 1, ['('] = 1, ['{'] = 1, ['['] = 1, ['?'] = 1, ['!'] = 1,
};
/* the characters WordStart excludes: they are tokens of one character */
static const uint8_t notstart[128] = {
	['('] = 1, ['"'] = 1, ['`'] = 1, ['{'] = 1, ['['] = 1, [':'] = 1, [';'] = 1, ['&'] = 1,
	['#'] = 1, ['*'] = 1, ['@'] = 1, [')'] = 1, ['}'] = 1, [']'] = 1, ['-'] = 1, [','] = 1,
};

static int space_at(const char *s, size_t *len)
{
	return pk_bits_at(s, len) & PKU_SPACE;
}

/* the length of MultiChar's match at s[i] (i < end), 0 if none */
static size_t multichar(const char *s, size_t i, size_t end)
{
	size_t j, l;
	if (s[i] == '-' || (s[i] == '.' && i + 1 < end && s[i + 1] == '.')) {
		if (i + 1 >= end || s[i + 1] != s[i])
			return 0;
		for (j = i + 2; j < end && s[j] == s[i]; j++)
			;
		return j - i;
	}
	if (s[i] != '.')
		return 0;
	/* (?:\.\s){2,}\. : k repetitions of ". " end at j; without a '.' there, one fewer (the next
	 * repetition starts with one) */
	size_t k = 0, last = i;
	for (j = i; j + 1 < end && s[j] == '.' && space_at(s + j + 1, &l); j += 1 + l, k++)
		last = j;
	if (k >= 2 && j < end && s[j] == '.')
		return j + 1 - i;
	if (k >= 3)
		return last + 1 - i;
	return 0;
}

static int multichar_at(const char *s, size_t i, size_t end)
{
	return (s[i] == '-' || s[i] == '.') && multichar(s, i, end);
}

int pk_word_next(const char *s, size_t end, size_t *pos, size_t *ts, size_t *te)
{
	size_t i = *pos, l, m;
	while (i < end) {
		unsigned char c = (unsigned char)s[i];
		if ((c == '-' || c == '.') && (m = multichar(s, i, end))) {
			*ts = i, *te = *pos = i + m;
			return 1;
		}
		if (space_at(s + i, &l)) {
			i += l;
			continue;
		}
		*ts = i;
		if (c < 0x80 && notstart[c]) {   /* \S */
			*te = *pos = i + 1;
			return 1;
		}
		size_t j = i + l;
		while (j < end) {
			unsigned char d = (unsigned char)s[j];
			if (d < 0x80) {
				if (nonword[d] || multichar_at(s, j, end) || space_at(s + j, &l))
					break;
				if (d == ',') {
					size_t k = j + 1;
					unsigned char e = k < end ? (unsigned char)s[k] : 0;
					if (k == end || space_at(s + k, &l) || (e < 0x80 && nonword[e]) || multichar_at(s, k, end))
						break;
				}
				j++;
			} else {
				if (space_at(s + j, &l))
					break;
				j += l;
			}
		}
		*te = *pos = j;
		return 1;
	}
	*pos = end;
	return 0;
}

/* --- str.lower() ---------------------------------------------------------------------------------- */

static uint32_t lower_of(uint32_t cp)
{
	size_t lo = 0, hi = pku_nlower;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (pku_lower[mid][0] < cp)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < pku_nlower && pku_lower[lo][0] == cp ? pku_lower[lo][1] : cp;
}

static size_t put_utf8(char *p, uint32_t cp)
{
	if (cp < 0x80)
		return p[0] = (char)cp, 1;
	if (cp < 0x800)
		return p[0] = (char)(0xc0 | cp >> 6), p[1] = (char)(0x80 | (cp & 0x3f)), 2;
	if (cp < 0x10000)
		return p[0] = (char)(0xe0 | cp >> 12), p[1] = (char)(0x80 | (cp >> 6 & 0x3f)),
		       p[2] = (char)(0x80 | (cp & 0x3f)), 3;
	return p[0] = (char)(0xf0 | cp >> 18), p[1] = (char)(0x80 | (cp >> 12 & 0x3f)),
	       p[2] = (char)(0x80 | (cp >> 6 & 0x3f)), p[3] = (char)(0x80 | (cp & 0x3f)), 4;
}

/* CPython's handle_capital_sigma: the sigma at s[i] is final when a cased letter comes before it
 * and none after it, case-ignorable characters skipped on both sides, within the string lowered */
static int final_sigma(const char *s, size_t n, size_t i)
{
	size_t j = i, l;
	uint8_t b = 0;
	int found = 0;
	while (j > 0) {
		j = pk_prev(s, j);
		b = pku_bits(pk_cp((const unsigned char *)s + j, &l));
		if (!(b & PKU_CASE_IGN)) {
			found = 1;
			break;
		}
	}
	if (!found || !(b & PKU_CASED))
		return 0;
	for (j = i + 2; j < n; j += l) {
		b = pku_bits(pk_cp((const unsigned char *)s + j, &l));
		if (!(b & PKU_CASE_IGN))
			return !(b & PKU_CASED);
	}
	return 1;
}

int pk_lower(const char *s, size_t n, struct pk_buf *buf)
{
	/* a lowercase code point never takes more bytes than its original, but U+0130 becomes two
	 * (3 bytes for 2) */
	if (pk_buf_reserve(buf, n * 3 / 2 + 4) < 0)
		return -1;
	char *o = buf->p + buf->len;
	for (size_t i = 0, l; i < n; i += l) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x80) {
			*o++ = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
			l = 1;
			continue;
		}
		uint32_t cp = pk_cp((const unsigned char *)s + i, &l);
		if (!(pku_bits(cp) & PKU_HASLOWER)) {
			memcpy(o, s + i, l);
			o += l;
		} else if (cp == 0x130) {
			o += put_utf8(o, 'i');
			o += put_utf8(o, 0x307);
		} else if (cp == 0x3a3) {
			o += put_utf8(o, final_sigma(s, n, i) ? 0x3c2 : 0x3c3);
		} else {
			o += put_utf8(o, lower_of(cp));
		}
	}
	buf->len = (size_t)(o - buf->p);
	return 0;
}

/* --- PunktToken ----------------------------------------------------------------------------------- */

/* _RE_NUMERIC, ^-?[\.,]?\d[\d,\.-]*\.?$, on the lowercase text */
static int numeric(const char *s, size_t n)
{
	size_t i = 0, l;
	if (i < n && s[i] == '-')
		i++;
	if (i < n && (s[i] == '.' || s[i] == ','))
		i++;
	if (i >= n || !(pk_bits_at(s + i, &l) & PKU_DIGIT))
		return 0;
	for (i += l; i < n; i += l) {
		if (s[i] == ',' || s[i] == '.' || s[i] == '-') {
			l = 1;
			continue;
		}
		if (!(pk_bits_at(s + i, &l) & PKU_DIGIT))
			return 0;
	}
	return 1;
}

int pk_tok_make(struct pk_tok *t, const char *text, size_t ts, size_t te, uint32_t flags, struct pk_buf *buf)
{
	const char *s = text + ts;
	size_t n = te - ts, l, i;
	uint8_t b = pk_bits_at(s, &l);

	t->start = (uint32_t)ts;
	t->end = (uint32_t)te;
	if (b & PKU_UPPER)
		flags |= PKT_FIRST_UPPER;
	if (b & PKU_LOWER)
		flags |= PKT_FIRST_LOWER;
	if (s[n - 1] == '.') {
		flags |= PKT_PERIOD_FINAL;
		if (n >= 2 && s[n - 2] == '.')
			flags |= PKT_TWO_DOTS;
		if ((b & PKU_WORD) && l + 1 == n)
			flags |= PKT_IS_INITIAL;
	}
	if (n == 1 && (s[0] == '.' || s[0] == '?' || s[0] == '!'))
		flags |= PKT_END_CHAR;
	for (i = 0; i < n && s[i] == '.'; i++)
		;
	if (i == n && n >= 2)
		flags |= PKT_IS_ELLIPSIS;
	for (i = 0; i < n && (pk_bits_at(s + i, &l) & PKU_WORD); i += l)
		;
	if (i == n)
		flags |= PKT_IS_ALPHA;

	t->low = (uint32_t)buf->len;
	if (pk_lower(s, n, buf) < 0)
		return -1;
	t->low_len = (uint32_t)(buf->len - t->low);
	const char *low = buf->p + t->low;
	if (numeric(low, t->low_len))
		flags |= PKT_NUMERIC | PKT_IS_NUMBER | PKT_NON_PUNCT;
	else {
		if (t->low_len >= PK_NUMBER_LEN && memcmp(low, PK_NUMBER, PK_NUMBER_LEN) == 0)
			flags |= PKT_IS_NUMBER;
		for (i = 0; i < t->low_len; i += l)
			if (pk_bits_at(low + i, &l) & PKU_WORD) {
				flags |= PKT_NON_PUNCT;
				break;
			}
	}
	t->flags = flags;
	return 0;
}

static int is_abbrev(const struct punkt_params *p, const char *s, size_t n)
{
	uint32_t id = pk_params_find(p, s, n);
	return id != PK_NONE && (p->flags[id] & PK_P_ABBREV);
}

void pk_first_pass(struct pk_tok *t, const struct pk_buf *buf, const struct punkt_params *p)
{
	if (t->flags & PKT_END_CHAR) {
		t->flags |= PKT_SENTBREAK;
	} else if (t->flags & PKT_IS_ELLIPSIS) {
		t->flags |= PKT_ELLIPSIS;
	} else if ((t->flags & PKT_PERIOD_FINAL) && !(t->flags & PKT_TWO_DOTS)) {
		/* tok[:-1].lower(), which is tok.lower()[:-1]: '.' is case-ignorable, so dropping it
		 * changes no final sigma */
		const char *key = buf->p + t->low;
		size_t n = t->low_len - 1;
		const char *dash = memrchr(key, '-', n);
		if (is_abbrev(p, key, n) || (dash && is_abbrev(p, dash + 1, n - (size_t)(dash + 1 - key))))
			t->flags |= PKT_ABBR;
		else
			t->flags |= PKT_SENTBREAK;
	}
}
