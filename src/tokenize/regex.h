/* regex - Hugging Face's Split pre-tokenizer for any pattern, on PCRE2.
 *
 * tokenizer.json's Split {pattern: {Regex|String}, behavior, invert} runs an Oniguruma regex in
 * the reference.  We run PCRE2 (UTF + UCP, JIT-compiled) on a translation of the pattern that
 * fixes the differences which matter for tokenizer patterns:
 *
 *   \s \S      Oniguruma: the 25 White_Space code points.  PCRE2 10.42 adds U+180E.  Written
 *              out as an explicit class.
 *   \w \d \h   Oniguruma: \w = Alphabetic|M|Nd|Pc plus ² ³ ¹ ¼ ½ ¾ (its Latin-1 table
 *              disagrees with its Unicode one there), \d = Nd, \h = hex digit (PCRE2: \w =
 *              L|N|_, \h = horizontal space).  Written out.
 *   \p{..}     For general categories (L, Lu, .., N, Nd, .., P, S, M, Z and their subclasses,
 *              short or long names, \p{^X}, \P{X}) and Alphabetic: the code points Unicode 16.0
 *              added since the library's Unicode version are added, the one it moved out
 *              (U+1171E, Mn -> Mc) removed; the deltas are generated with the tables (unicode.h).
 *   [a[bc]] [a&&b]  Oniguruma's nested classes and intersections (BLOOM's pattern has one; PCRE2
 *              10.42 would read "[^(\s|[.,]" as the class and stumble on ")]") become unions
 *              and lookaheads over one-character alternatives.
 *   \uHHHH     -> \x{HHHH};  x{,n} -> x{0,n};  (?m) (Ruby: dot matches newline) -> (?s);
 *              ^ $ are line anchors in Oniguruma's Ruby syntax, so PCRE2_MULTILINE is set.
 *
 * Known residual differences, none of them in the patterns of GPT-2, BLOOM, Llama 3 (Qwen2's
 * is the same but for \p{N}) or DeepSeek-V3, all of which the unit test runs against the
 * reference: scripts and other binary properties (\p{Han}, \p{Emoji}) keep PCRE2's Unicode
 * version; \b \B \X \R, POSIX brackets ([:alpha:]) and case folding follow PCRE2's definitions
 * (PCRE2's \b uses its own \w); Oniguruma-only syntax (the absence operator (?~..), (?W) (?D)
 * options) either fails to compile, which regex_compile() reports, or means what PCRE2 says.
 *
 * The search loop is the onig crate's find_iter, which the reference uses: an empty match right
 * after a match is skipped and the search moves one character on; the behaviours then fold the
 * (span, is_match) list exactly as tokenizers' NormalizedString::split does, and empty pieces are
 * dropped at the end, as PreTokenizedString::split does.  Literal String patterns match bytes.
 *
 * A struct regex holds its match data and JIT stack, so it is not for concurrent use: compile one
 * per thread.  regex_split() grows the caller's piece array with realloc and keeps its own
 * scratch list, so steady state allocates nothing. */
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
 * pattern.  NULL and a message in err on failure ("offset 12: missing closing parenthesis"). */
struct regex *regex_compile(const char *pattern, int literal, char *err, size_t errlen);
void regex_free(struct regex *re);

/* "Removed" -> REGEX_REMOVED, ...; -1 if unknown. */
int regex_behavior_parse(const char *name);

/* Splits s[0, n) into pieces appended to *out (room for *cap, grown with realloc), starting at
 * index 0.  Returns the number of pieces, or -1 with err (invalid UTF-8, out of memory, a match
 * limit hit). */
ssize_t regex_split(struct regex *re, const uint8_t *s, size_t n, enum regex_behavior behavior,
		    int invert, struct pretok_piece **out, size_t *cap, char *err, size_t errlen);

/* The next match at or after start, as the reference's search would find it (no empty-match
 * skipping: that is regex_split's business).  1 and [*ms, *me), 0 if none, -1 with err. */
int regex_find(struct regex *re, const uint8_t *s, size_t n, size_t start, size_t *ms, size_t *me,
	       char *err, size_t errlen);

/* The PCRE2 pattern an Oniguruma pattern translates to; malloc'd, NULL with err.  For tests. */
char *regex_translate(const char *pattern, char *err, size_t errlen);

#endif
