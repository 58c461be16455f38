/* punkt_int - what the Punkt modules share and nobody else needs: the parameters' layout (their
 * types interned in a strtab), and the word tokens (punkt_word.c) that the splitter and the
 * trainer both annotate.
 *
 * A word token is NLTK's PunktToken: its bytes, its type (the lowercased text, or "##number##"
 * for a number), and the properties the passes ask about, computed once when the token is made.
 * Strings a token owns (its lowercase form) live in a caller's growable buffer, by offset, so a
 * context's tokens cost no allocation once the buffer has grown. */
#ifndef LMTK_TOKENIZE_PUNKT_INT_H
#define LMTK_TOKENIZE_PUNKT_INT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "strtab.h"
#include "tokenize/punkt.h"

#define PK_NONE STRTAB_NONE
#define PK_NUMBER "##number##"
#define PK_NUMBER_LEN 10

/* orthographic contexts (NLTK's _ORTHO_*) */
enum {
	PK_BEG_UC = 1 << 1, PK_MID_UC = 1 << 2, PK_UNK_UC = 1 << 3,
	PK_BEG_LC = 1 << 4, PK_MID_LC = 1 << 5, PK_UNK_LC = 1 << 6,
	PK_UC = PK_BEG_UC | PK_MID_UC | PK_UNK_UC,
	PK_LC = PK_BEG_LC | PK_MID_LC | PK_UNK_LC,
};

/* --- UTF-8 (the text is valid) -------------------------------------------------------------------- */

static inline uint32_t pk_cp(const unsigned char *s, size_t *len)
{
	unsigned c = s[0];
	if (c < 0x80)
		return *len = 1, c;
	if (c < 0xe0)
		return *len = 2, (uint32_t)(c & 0x1f) << 6 | (s[1] & 0x3f);
	if (c < 0xf0)
		return *len = 3, (uint32_t)(c & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
	return *len = 4, (uint32_t)(c & 0x07) << 18 | (uint32_t)(s[1] & 0x3f) << 12 |
		(uint32_t)(s[2] & 0x3f) << 6 | (s[3] & 0x3f);
}

/* the class bits of the code point at s (end: one past the text), and its length */
static inline uint8_t pk_bits_at(const char *s, size_t *len)
{
	unsigned char c = (unsigned char)*s;
	if (c < 0x80) {
		*len = 1;
		return pku_blocks[pku_index[0]][c];
	}
	return pku_bits(pk_cp((const unsigned char *)s, len));
}

/* start of the code point before s[i] */
static inline size_t pk_prev(const char *s, size_t i)
{
	do
		i--;
	while (i && ((unsigned char)s[i] & 0xc0) == 0x80);
	return i;
}

/* --- parameters ----------------------------------------------------------------------------------- */

enum { PK_P_ABBREV = 1, PK_P_STARTER = 2 };

struct punkt_params {
	struct strtab types;
	uint8_t *ortho, *flags;    /* per type id: ortho context bits, PK_P_* */
	uint32_t cap;              /* of ortho and flags */
	uint64_t *colloc;          /* open addressing: (a + 1) << 32 | (b + 1), 0 empty */
	size_t ncolloc, colloc_slots;
	size_t nabbrev, nstarter, northo;
};

struct punkt_params *pk_params_new(void);
/* the id of a type, added if new, with room in ortho/flags; PK_NONE when out of memory */
uint32_t pk_params_type(struct punkt_params *p, const char *s, size_t len);
int pk_params_add_colloc(struct punkt_params *p, uint32_t a, uint32_t b);   /* 0, -1 out of memory */
int pk_params_has_colloc(const struct punkt_params *p, uint32_t a, uint32_t b);
static inline uint32_t pk_params_find(const struct punkt_params *p, const char *s, size_t len)
{
	return strtab_find(&p->types, s, len);
}

/* --- word tokens ---------------------------------------------------------------------------------- */

enum {
	PKT_PARASTART = 1 << 0,
	PKT_LINESTART = 1 << 1,
	PKT_PERIOD_FINAL = 1 << 2,  /* tok.endswith(".") */
	PKT_FIRST_UPPER = 1 << 3,
	PKT_FIRST_LOWER = 1 << 4,
	PKT_IS_ELLIPSIS = 1 << 5,   /* \.\.+$ */
	PKT_IS_NUMBER = 1 << 6,     /* the type starts with ##number## */
	PKT_IS_INITIAL = 1 << 7,    /* [^\W\d]\.$ */
	PKT_IS_ALPHA = 1 << 8,      /* [^\W\d]+$ */
	PKT_NON_PUNCT = 1 << 9,     /* the type has a [^\W\d] */
	PKT_END_CHAR = 1 << 10,     /* the token is ".", "?" or "!" */
	PKT_TWO_DOTS = 1 << 11,     /* tok.endswith("..") */
	PKT_NUMERIC = 1 << 12,      /* the type is ##number## (not the lowercase text) */
	/* annotations */
	PKT_SENTBREAK = 1 << 13,
	PKT_ABBR = 1 << 14,
	PKT_ELLIPSIS = 1 << 15,
};

struct pk_tok {
	size_t start, end;       /* the token's bytes in the text it came from */
	uint32_t low, low_len;   /* tok.lower(), in the caller's buffer */
	uint32_t flags;
};

struct pk_buf {
	char *p;
	size_t len, cap;
};

/* Words of one line text[*pos, end) (no '\n' inside), as PunktLanguageVars.word_tokenize finds
 * them: 1 with the next token in [*ts, *te) and *pos past it, 0 when the line has no more. */
int pk_word_next(const char *text, size_t end, size_t *pos, size_t *ts, size_t *te);

/* Makes the token text[ts, te): its properties and lowercase form (appended to buf).  flags: the
 * PKT_PARASTART / PKT_LINESTART it was found with.  0, or -1 out of memory. */
int pk_tok_make(struct pk_tok *t, const char *text, size_t ts, size_t te, uint32_t flags, struct pk_buf *buf);

/* the token's type and type_no_period (NLTK's properties), pointing into buf or a constant */
static inline const char *pk_tok_type(const struct pk_tok *t, const struct pk_buf *buf, size_t *len)
{
	if (t->flags & PKT_NUMERIC)
		return *len = PK_NUMBER_LEN, PK_NUMBER;
	*len = t->low_len;
	return buf->p + t->low;
}
static inline const char *pk_tok_type_np(const struct pk_tok *t, const struct pk_buf *buf, size_t *len)
{
	const char *s = pk_tok_type(t, buf, len);
	if (*len > 1 && s[*len - 1] == '.')
		(*len)--;
	return s;
}
/* type_no_sentperiod */
static inline const char *pk_tok_type_nsp(const struct pk_tok *t, const struct pk_buf *buf, size_t *len)
{
	return t->flags & PKT_SENTBREAK ? pk_tok_type_np(t, buf, len) : pk_tok_type(t, buf, len);
}

/* Python's str.lower() of s[0, n) appended to buf.  0, or -1 out of memory. */
int pk_lower(const char *s, size_t n, struct pk_buf *buf);

/* NLTK's first pass over one token (_first_pass_annotation), against p's abbreviations. */
void pk_first_pass(struct pk_tok *t, const struct pk_buf *buf, const struct punkt_params *p);

int pk_buf_reserve(struct pk_buf *b, size_t more);

#endif
