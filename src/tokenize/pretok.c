/* pretok.c - see pretok.h.  The semantics below are the reference's, tested piece for piece
 * against the tokenizers npm package in tests/unit/tokenize_pretok.c. */
#include "tokenize/pretok.h"

#include "tokenize/unicode.h"

/* Code points 0-255 are ucd_blocks[0]: gen_unicode.js numbers blocks in order of first use, and
 * the block of U+0000-U+00FF comes first.  Indexing it directly by an ASCII byte saves the
 * ucd_index load on the path almost every byte of English takes. */
#define ASCII_BITS(c) (ucd_blocks[0][(c)])

static inline int cont(uint8_t b)
{
	return (b & 0xC0) == 0x80;
}

/* The class byte of the multi-byte sequence at s[i] (s[i] >= 0x80), its length in *len.
 * Anything not well-formed (stray continuation byte, overlong form, surrogate, > U+10FFFF,
 * truncated) is one OTHER byte, so that bad input still tiles and never reads past n. */
static inline uint8_t bits_mb(const uint8_t *s, size_t n, size_t i, size_t *len)
{
	uint32_t c = s[i], cp;
	size_t left = n - i;

	if (c >= 0xC2 && c <= 0xDF && left >= 2 && cont(s[i + 1])) {
		*len = 2;
		cp = (c & 0x1F) << 6 | (s[i + 1] & 0x3F);
	} else if (c >= 0xE0 && c <= 0xEF && left >= 3 && cont(s[i + 1]) && cont(s[i + 2])) {
		cp = (c & 0x0F) << 12 | (uint32_t)(s[i + 1] & 0x3F) << 6 | (s[i + 2] & 0x3F);
		if (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))
			goto bad;
		*len = 3;
	} else if (c >= 0xF0 && c <= 0xF4 && left >= 4 && cont(s[i + 1]) && cont(s[i + 2]) &&
		   cont(s[i + 3])) {
		cp = (c & 0x07) << 18 | (uint32_t)(s[i + 1] & 0x3F) << 12 |
		     (uint32_t)(s[i + 2] & 0x3F) << 6 | (s[i + 3] & 0x3F);
		if (cp < 0x10000 || cp > 0x10FFFF)
			goto bad;
		*len = 4;
	} else {
		goto bad;
	}
	return ucd_bits(cp);
bad:
	*len = 1;
	return UCD_OTHER;
}

static inline uint8_t bits_at(const uint8_t *s, size_t n, size_t i, size_t *len)
{
	if (s[i] < 0x80) {
		*len = 1;
		return ASCII_BITS(s[i]);
	}
	return bits_mb(s, n, i, len);
}

/* End of the run of code points c from i with (bits(c) & mask) == want. */
static inline size_t run_end(const uint8_t *s, size_t n, size_t i, uint8_t mask, uint8_t want)
{
	while (i < n) {
		uint8_t c = s[i];
		if (c < 0x80) {
			if ((ASCII_BITS(c) & mask) != want)
				break;
			i++;
		} else {
			size_t len;
			if ((bits_mb(s, n, i, &len) & mask) != want)
				break;
			i += len;
		}
	}
	return i;
}

/* The alternatives that can match at i, in the pattern's order; returns the piece's end.
 * Every position matches one of them (the last two take any \s, the first six anything else),
 * which is why the GPT-2 pieces tile the input. */
static inline size_t gpt2_piece(const uint8_t *s, size_t n, size_t i)
{
	uint8_t c = s[i];
	size_t len;

	/* 's 't 're 've 'm 'll 'd: ASCII apostrophe, lower case, whatever follows ("'sup" -> 's up) */
	if (c == '\'' && i + 1 < n) {
		uint8_t d = s[i + 1];
		if (d == 's' || d == 't' || d == 'm' || d == 'd')
			return i + 2;
		if (i + 2 < n && ((d == 'r' && s[i + 2] == 'e') || (d == 'v' && s[i + 2] == 'e') ||
				  (d == 'l' && s[i + 2] == 'l')))
			return i + 3;
	}

	/* " ?" is U+0020 only, and only in front of a non-space; " word" is the most common piece
	 * in English, so this comes first (a space is never L, N or other, so no order changes) */
	uint8_t cls;
	if (c == ' ') {
		len = 1;
		if (i + 1 < n) {
			size_t len2;
			cls = bits_at(s, n, i + 1, &len2) & UCD_CLASS_MASK;
			if (cls != UCD_SPACE)
				return run_end(s, n, i + 1 + len2, UCD_CLASS_MASK, cls);
		}
	} else {
		cls = bits_at(s, n, i, &len) & UCD_CLASS_MASK;
		if (cls != UCD_SPACE)	/* \p{L}+ | \p{N}+ | [^\s\p{L}\p{N}]+ */
			return run_end(s, n, i + len, UCD_CLASS_MASK, cls);
	}

	/* \s+(?!\S) | \s+: a run that ends the text is taken whole; one followed by a non-space
	 * backtracks by one code point, so that its last space can prefix the next word, unless it
	 * is a single code point, which \s+ then takes alone */
	size_t last = i, j = i + len;
	while (j < n) {
		if ((bits_at(s, n, j, &len) & UCD_CLASS_MASK) != UCD_SPACE)
			return last > i ? last : j;
		last = j;
		j += len;
	}
	return j;
}

size_t pretok_gpt2(const uint8_t *s, size_t n, size_t *pos, struct pretok_piece *out, size_t cap)
{
	size_t i = *pos, k = 0;

	while (i < n && k < cap) {
		size_t e = gpt2_piece(s, n, i);
		out[k].off = i;
		out[k].len = e - i;
		k++;
		i = e;
	}
	*pos = i;
	return k;
}

/* BLOOM: where a match of " ?[^(\s|[.,!?…。，、।۔،])]+" starting at i ends, or i if none does. */
static inline size_t bloom_match(const uint8_t *s, size_t n, size_t i)
{
	size_t len;
	uint8_t b = bits_at(s, n, i, &len);

	if (!(b & UCD_BLOOM_EXCL))
		return run_end(s, n, i + len, UCD_BLOOM_EXCL, 0);
	if (s[i] == ' ' && i + 1 < n && !(bits_at(s, n, i + 1, &len) & UCD_BLOOM_EXCL))
		return run_end(s, n, i + 1 + len, UCD_BLOOM_EXCL, 0);
	return i;
}

size_t pretok_bloom(const uint8_t *s, size_t n, size_t *pos, struct pretok_piece *out, size_t cap)
{
	size_t i = *pos, k = 0;
	size_t match_end = 0;	/* when > i: the end of the match at i, found by the gap scan */

	/* Isolated: each match is a piece, and so is each non-empty gap; a gap is a run of excluded
	 * code points at none of which a match starts */
	while (i < n && k < cap) {
		size_t e = match_end > i ? match_end : bloom_match(s, n, i);
		if (e == i) {
			for (;;) {
				size_t len;
				bits_at(s, n, e, &len);
				e += len;
				if (e == n || (match_end = bloom_match(s, n, e)) > e)
					break;
			}
		}
		out[k].off = i;
		out[k].len = e - i;
		k++;
		i = e;
	}
	*pos = i;
	return k;
}
