/* punkt - NLTK's Punkt sentence splitter (PunktSentenceTokenizer) and its trainer (PunktTrainer),
 * the splitter Megatron's preprocessor runs for --split-sentences.
 *
 * Punkt (Kiss & Strunk 2006) decides, for each '.', '?' and '!' that is followed by whitespace
 * and a word or by closing punctuation, whether it ends a sentence, from four learned tables
 * (struct punkt_params): abbreviation types ("dr", "u.s"), collocations (("s", "bach"): a
 * period-final word that does not end a sentence before that word), frequent sentence starters,
 * and for every word type the orthographic contexts it was seen in (upper or lower case; at a
 * sentence start, inside, or unknown).  This is NLTK 3.8's algorithm step for step, on the same
 * regular expressions written out as scanners: the word tokenizer of PunktLanguageVars, the
 * first pass (sentence ends, ellipses, known abbreviations), the second pass (collocations, the
 * orthographic heuristic, sentence starters, initials and ordinals), candidate contexts found as
 * _match_potential_end_contexts finds them (its overlap rule and its ASCII-only whitespace test
 * included), and the realignment of closing quotes and brackets.  Megatron's --keep-newlines
 * swaps in its CustomLanguageVars, whose period context also takes the word before and the
 * whitespace after, so that whitespace ends up inside the sentence before it.
 *
 * Text is UTF-8 and every offset a byte offset; where NLTK's answer depends on a character
 * (Python's \s, \d, [^\W\d], isupper, islower, lower() with its final sigma) the answer comes
 * from tables generated from the Python that runs NLTK (punkt_unicode.c, gen_punkt_unicode.py).
 *
 * Parameters are a JSON file (see punkt_params_json()); the built-in English ones were trained
 * by punkt_train() on share/lmtk's corpus and are compiled in (punkt_builtin.c).  A struct
 * punkt_params is read-only once made; each thread splits with its own struct punkt_state. */
#ifndef LMTK_TOKENIZE_PUNKT_H
#define LMTK_TOKENIZE_PUNKT_H

#include <stddef.h>
#include <stdint.h>

/* --- characters (punkt_unicode.c) --------------------------------------------------------------- */

enum {
	PKU_SPACE = 1,      /* str.isspace(): \s */
	PKU_WORD = 2,       /* [^\W\d]: a word character that is not a decimal digit */
	PKU_DIGIT = 4,      /* \d: a decimal digit */
	PKU_UPPER = 8,      /* str.isupper() */
	PKU_LOWER = 16,     /* str.islower() */
	PKU_CASE_IGN = 32,  /* Case_Ignorable (for the final sigma) */
	PKU_CASED = 64,     /* Cased, where not case-ignorable */
	PKU_HASLOWER = 128, /* str.lower() changes it */
};
extern const uint8_t pku_index[4352];
extern const uint8_t pku_blocks[][256];
extern const uint32_t pku_lower[][2];   /* (code point, its lowercase), sorted */
extern const size_t pku_nlower;

static inline uint8_t pku_bits(uint32_t cp)
{
	return cp > 0x10FFFF ? 0 : pku_blocks[pku_index[cp >> 8]][cp & 0xff];
}

/* --- parameters ---------------------------------------------------------------------------------- */

struct punkt_params;

/* The parameters of a JSON file written by punkt_params_json() (or by tests/ref/punkt-ref.py from
 * an NLTK PunktParameters).  NULL + err naming the file and what is wrong. */
struct punkt_params *punkt_params_load(const char *path, char *err, size_t errlen);
struct punkt_params *punkt_params_parse(const char *json, size_t len, const char *name, char *err,
					size_t errlen);
/* The built-in English parameters (share/lmtk/punkt-english.json, compiled in). */
struct punkt_params *punkt_params_builtin(char *err, size_t errlen);
void punkt_params_free(struct punkt_params *p);
/* Serialises p as JSON: {"format", "trained_on", "abbrev_types": [...], "collocations": [[a, b],
 * ...], "sent_starters": [...], "ortho_context": [["type", flags], ...]}, every list sorted by
 * bytes, zero ortho_context entries left out, an item a line.  malloc'd, NUL-terminated; NULL if out of memory. */
char *punkt_params_json(const struct punkt_params *p, const char *trained_on);
/* sizes of the four tables, for messages */
void punkt_params_counts(const struct punkt_params *p, size_t *abbrevs, size_t *collocations,
			 size_t *starters, size_t *ortho);

/* --- splitting ----------------------------------------------------------------------------------- */

struct punkt_span {
	size_t start, end;   /* a sentence: text[start, end), never empty */
};

struct punkt_state;
struct punkt_state *punkt_state_new(void);
void punkt_state_free(struct punkt_state *s);

/* The sentences of text[0, len) (valid UTF-8), as PunktSentenceTokenizer.tokenize(text) returns
 * them (realign_boundaries on); keep_newlines: Megatron's CustomLanguageVars.  The spans go to
 * *spans (grown with realloc; *cap updated), *n of them.  0, or -1 when out of memory. */
int punkt_split(const struct punkt_params *p, int keep_newlines, struct punkt_state *st, const char *text,
		size_t len, struct punkt_span **spans, size_t *n, size_t *cap);

/* --- training ------------------------------------------------------------------------------------ */

struct punkt_train_stats {
	uint64_t tokens, period_tokens, sentbreaks, types;
};

/* What PunktTrainer(text).get_params() learns from text[0, len) (valid UTF-8), with NLTK's default
 * settings.  NULL + err when out of memory.  pg (may be NULL): a progress line begun with a total
 * of 3 * len, the bytes of its three scans of the text, updated as they go. */
struct progress;
struct punkt_params *punkt_train(const char *text, size_t len, struct punkt_train_stats *stats,
				 struct progress *pg, char *err, size_t errlen);

#endif
