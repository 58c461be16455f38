/* regex - Hugging Face's Split pre-tokenizer for any pattern, on Oniguruma.
 *
 * tokenizer.json's Split {pattern: {Regex|String}, behavior, invert} runs an Oniguruma regex in
 * the reference (tokenizers' onig crate: Regex::new, so UTF-8, ONIG_OPTION_NONE and the default
 * syntax, ONIG_SYNTAX_ONIGURUMA).  We run the same library (libonig, Debian's libonig-dev) the
 * same way, so the pattern means what it means there: \s \w \d \h, nested classes and &&, POSIX
 * brackets, \b \X \R, (?m), ^ $ as line anchors, case folding, the absence operator.
 *
 * The one thing a system library cannot give us is the reference's Unicode version.  The npm
 * package bundles Oniguruma 6.9.10 (Unicode 16.0); Debian 12 ships 6.9.8 (Unicode 14.0, and
 * [[:punct:]] still meaning \p{P} alone, which 6.9.9 made \p{P}|\p{S}).  So when the library is
 * older, regex_catch_up() rewrites the constructs whose code points moved, before compiling:
 *
 *   \p{X} \P{X} \p{^X}   for a general category (short, long or alias name) or Alphabetic:
 *                        [\p{X}<gained>] or [\p{X}<gained>&&[^<lost>]], negated as [^...]
 *   \w \W \d \D          [\w<gained by Alphabetic, M, Nd, Pc>], [\d<gained by Nd>]
 *   [:alpha:] [:alnum:] [:digit:] [:word:] [:punct:] (and [:^x:]), \p{Alnum} \p{Word}
 *   \p{Digit} \p{PosixPunct}: likewise, [:punct:] and PosixPunct as \p{P}\p{S} below 6.9.9
 *
 * <gained> and <lost> are unicode.h's ucd_deltas (Unicode 14.0 -> 16.0), Oniguruma class items,
 * and a nested class is Oniguruma's own syntax, so the rewrite needs no parser: it copies the
 * pattern and replaces those escapes where they stand.  It leaves a construct alone where the
 * replacement would change how the pattern parses ("[\w-z]" is an error, and stays one) and
 * leaves the whole pattern alone when it asks for ASCII classes ((?W) (?D) (?P)).
 *
 * Known residual differences on such a library, all of them confined to the code points
 * Unicode 15.0-16.0 assigned or moved: scripts and other binary properties (\p{Han},
 * \p{Emoji}), [:upper:] [:lower:] [:graph:] [:print:] [:cntrl:], \b \B and \X (the engine's own
 * word and grapheme tables), case folding; and the matcher fixes of 6.9.9 and 6.9.10 (empty
 * matches next to anchors, oniguruma issues 284 and 295).  On 6.9.10 or later nothing is
 * rewritten and there is no difference at all.
 *
 * The search loop is the onig crate's find_iter, which the reference uses: an empty match right
 * after a match is skipped and the search moves one character on; the behaviours then fold the
 * (span, is_match) list exactly as tokenizers' NormalizedString::split does, and empty pieces are
 * dropped at the end, as PreTokenizedString::split does.  A String pattern is matched literally
 * (ONIG_SYNTAX_ASIS), as the reference's escaped pattern is.
 *
 * A struct regex holds its match region, so it is not for concurrent use: compile one per
 * thread.  regex_split() grows the caller's piece array with realloc and keeps its own scratch
 * list, so steady state allocates nothing. */
#ifndef LMTK_TOKENIZE_REGEX_H
#define LMTK_TOKENIZE_REGEX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tokenize/pretok.h"

enum regex_behavior {
	REGEX_REMOVED,
	REGEX_ISOLATED,
	REGEX_MERGED_WITH_PREVIOUS,
	REGEX_MERGED_WITH_NEXT,
	REGEX_CONTIGUOUS,
};

struct regex;

/* pattern is UTF-8 as it stands in tokenizer.json after JSON unescaping; literal: a String
 * pattern.  NULL and Oniguruma's message in err on failure ("premature end of char-class"). */
struct regex *regex_compile(const char *pattern, int literal, char *err, size_t errlen);
void regex_free(struct regex *re);

/* "Removed" -> REGEX_REMOVED, ...; -1 if unknown. */
int regex_behavior_parse(const char *name);

/* Splits s[0, n) into pieces appended to *out (room for *cap, grown with realloc), starting at
 * index 0.  Returns the number of pieces, or -1 with err (invalid UTF-8, out of memory, a match
 * limit hit). */
ssize_t regex_split(struct regex *re, const uint8_t *s, size_t n, enum regex_behavior behavior,
		    int invert, struct pretok_piece **out, size_t *cap, char *err, size_t errlen);

/* The pattern regex_compile() hands an Oniguruma of version onig_version (6.9.8 is 60908: see
 * the header comment); malloc'd, NULL with err if out of memory.  For tests. */
char *regex_catch_up(const char *pattern, int onig_version, char *err, size_t errlen);

/* The linked library's version in that form. */
int regex_onig_version(void);

#endif
