/* pretok - the GPT-2 and BLOOM pre-tokenizers, hand-coded over code point classes.
 *
 * Both are exact re-implementations of what Hugging Face tokenizers does with Oniguruma:
 *
 *   GPT-2 (ByteLevel use_regex):  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *   BLOOM (Split, Isolated):      " ?[^(\s|[.,!?…。，、।۔،])]+"   (matches and the gaps between them)
 *
 * A regex engine spends most of its time trying alternatives that a class table answers at once;
 * here each position costs one table load per byte for ASCII and one UTF-8 decode plus a
 * two-level lookup otherwise (unicode.h).  The only backtracking in the GPT-2 pattern is
 * \s+(?!\S), which gives back exactly one character of a whitespace run followed by a
 * non-space, and is coded as that.
 *
 * Output is an array of pieces the caller owns, filled up to cap and resumable: a piece never
 * depends on anything before its start (neither pattern looks behind), so a call that fills the
 * array stops at a piece boundary, stores it in *pos, and the next call carries on from there
 * with results identical to one call over the whole buffer.  Nothing is allocated.
 *
 * For both patterns the pieces tile the input: they are contiguous, non-empty, and cover every
 * byte, so off is redundant with the previous piece's end; it is kept so that the same struct can
 * carry the output of regex.c, whose Removed behaviour leaves holes.
 *
 * Input must be valid UTF-8 (the caller validates).  An invalid byte is not an error here: it is
 * classed as OTHER and taken as one byte, so the output still tiles the input. */
#ifndef LMTK_TOKENIZE_PRETOK_H
#define LMTK_TOKENIZE_PRETOK_H

#include <stddef.h>
#include <stdint.h>

struct pretok_piece {
	size_t off;	/* byte offset of the piece in the buffer given */
	size_t len;	/* bytes, > 0 */
};

/* Splits s[*pos, n) into at most cap pieces written to out; returns how many and advances *pos
 * past them.  Done when *pos == n.  cap must be > 0. */
size_t pretok_gpt2(const uint8_t *s, size_t n, size_t *pos, struct pretok_piece *out, size_t cap);
size_t pretok_bloom(const uint8_t *s, size_t n, size_t *pos, struct pretok_piece *out, size_t cap);

#endif
