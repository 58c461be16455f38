/* wordpiece - BERT's tokenizer exactly as Hugging Face tokenizers runs it: BertNormalizer,
 * BertPreTokenizer and the WordPiece model.
 *
 * Normalizer (each step optional, in this order, as HF's BertNormalizer):
 *   clean_text       drop U+0000, U+FFFD and the controls (Cc Cf Co, but not \t \n \r); every
 *                    White_Space character becomes ' ';
 *   handle_chinese   a space before and after every CJK ideograph;
 *   strip_accents    NFD, then drop the nonspacing marks (Mn);
 *   lowercase        per character (no final sigma: HF maps Σ to σ everywhere).
 * Pre-tokenizer: split on White_Space (dropped) and around every punctuation character (each its
 * own word): Unicode P* plus the ASCII symbols 33-47, 58-64, 91-96, 123-126.
 * Model: a word of more than max_input_chars_per_word characters is the unk token; otherwise
 * greedy longest-match-first from the left, every piece after the first looked up with the
 * continuing-subword prefix ("##"), and a word any position of which matches nothing is one unk.
 *
 * The Unicode behind these answers is not one version but three, because that is what the
 * reference does (gen_wordpiece.js says which and why), so the tables are generated for this
 * module alone and the pre-tokenizers' unicode.h is not used.
 *
 * Speed: text is normalized into a UTF-8 buffer in one pass (ASCII never leaves its fast path:
 * no decomposition, no class, a byte compare for case), then split and looked up.  A word's
 * pieces are cached per thread (word bytes -> ids), because text repeats its words; the vocab is
 * one open-addressing table; the candidates at a position (longest first) are hashed in one pass
 * over their bytes, the continuation prefix once for all.
 *
 * A struct wp is read-only once finished; each thread encodes with its own struct wp_state. */
#ifndef LMTK_TOKENIZE_WORDPIECE_H
#define LMTK_TOKENIZE_WORDPIECE_H

#include <stddef.h>
#include <stdint.h>

#define WP_NONE 0xFFFFFFFFu

struct wp_norm {
	int clean_text, handle_chinese, strip_accents, lowercase;
};

struct wp;
struct wp_state;

struct wp *wp_new(void);
void wp_free(struct wp *m);
/* A vocabulary entry.  0, or -1 + err (the string is there already). */
int wp_add_token(struct wp *m, const char *s, size_t len, uint32_t id, char *err, size_t errlen);
/* After the vocabulary: the unk token (must be in it), the continuation prefix, the longest word.
 * 0 or -1 + err. */
int wp_finish(struct wp *m, const char *unk, const char *prefix, unsigned max_chars, char *err, size_t errlen);

uint32_t wp_lookup(const struct wp *m, const char *s, size_t len);  /* id or WP_NONE */
const char *wp_token(const struct wp *m, uint32_t id, size_t *len); /* NULL if no such id */
uint32_t wp_vocab_end(const struct wp *m);                          /* max id + 1 */
size_t wp_vocab_count(const struct wp *m);                          /* tokens */
const char *wp_prefix(const struct wp *m);

struct wp_state *wp_state_new(void);
void wp_state_free(struct wp_state *s);

/* Normalizes s[0,len) (valid UTF-8) into *out (grown with realloc; *cap updated), *outlen bytes.
 * 0, or -1 on out of memory. */
int wp_normalize(const struct wp_norm *n, struct wp_state *st, const uint8_t *s, size_t len,
		 uint8_t **out, size_t *outlen, size_t *cap);
/* BertPreTokenizer as an iterator: the next word of s[*pos, len) (valid UTF-8) at s + *start,
 * *wlen bytes, *nchars characters; 1, or 0 when there is none left. */
int wp_next_word(const uint8_t *s, size_t len, size_t *pos, size_t *start, size_t *wlen, size_t *nchars);
/* Pre-tokenizes (pretok: BertPreTokenizer, else the whole text is one word) and encodes
 * normalized text, appending ids to *out as bpe_encode does.  0, or -1 on out of memory. */
int wp_encode(const struct wp *m, struct wp_state *st, int pretok, const uint8_t *s, size_t len,
	      uint32_t **out, size_t *n, size_t *cap);

/* ---- the generated tables (wordpiece_tables.c) ---- */
enum {
	WPU_DROP = 1,     /* clean_text removes it */
	WPU_WS = 2,       /* White_Space */
	WPU_PUNCT = 4,    /* BertPreTokenizer isolates it */
	WPU_MN = 8,       /* strip_accents removes it after NFD */
	WPU_DECOMP = 16,  /* NFD changes it */
	WPU_LOWER = 32,   /* lowercase changes it */
	WPU_CCC = 64,     /* nonzero canonical combining class */
	WPU_CJK = 128,    /* handle_chinese pads it */
};
struct wpu_map {
	uint32_t cp, off, len;
};
struct wpu_ccc {
	uint32_t cp, rank;
};
extern const uint8_t wpu_index[0x1100];
extern const uint8_t wpu_blocks[][256];
extern const struct wpu_map wpu_decomp[], wpu_lower[];
extern const uint32_t wpu_decomp_cps[], wpu_lower_cps[];
extern const struct wpu_ccc wpu_ccc[];
extern const size_t wpu_decomp_n, wpu_lower_n, wpu_ccc_n;

static inline uint8_t wpu_flags(uint32_t cp)
{
	return cp > 0x10FFFF ? 0 : wpu_blocks[wpu_index[cp >> 8]][cp & 0xff];
}

/* The code points cp becomes under NFD (strip_accents), lowercase; their count (<= 4 for NFD,
 * <= 3 for lowercase), 0 if it stays itself. */
size_t wpu_nfd(uint32_t cp, uint32_t out[4]);
size_t wpu_tolower(uint32_t cp, uint32_t out[3]);
unsigned wpu_ccc_rank(uint32_t cp);  /* 0 for class 0 */

#endif
