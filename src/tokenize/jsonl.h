/* jsonl - pull the wanted string fields out of one JSON line, validating all of it.
 *
 * A general JSON library builds a tree of every value in the line only for us to read one string
 * and free the rest; that was half of tokenize's time.  This is a single pass over the line that
 * checks the whole document as strictly as jansson does (RFC 8259 grammar, valid UTF-8, no raw
 * control characters in strings, no lone surrogates, nothing after the object) but decodes only
 * the strings of the wanted keys, into a caller-owned buffer.  A repeated key keeps its last value,
 * as Python's json (Megatron's preprocessor) does. */
#ifndef LMTK_TOKENIZE_JSONL_H
#define LMTK_TOKENIZE_JSONL_H

#include <stddef.h>

struct jsonl_field {
	size_t off, len;   /* the decoded string in the caller's buffer */
	int found;         /* 0 missing, 1 a string, -1 present but not a string */
};

/* Parses s[0, n) as one JSON object.  For each keys[i] fills out[i]; decoded strings are written
 * to *buf (grown with realloc; *cap updated).  0, or -1 with err ("column 17: ..."). */
int jsonl_extract(const char *s, size_t n, const char *const *keys, int nkeys,
		  struct jsonl_field *out, char **buf, size_t *cap, char *err, size_t errlen);

/* The top-level keys of the JSON object s[0, n), as "'text', 'meta'" (cut at outlen), for a
 * message about a line that lacks a wanted key; returns how many. */
int jsonl_keys(const char *s, size_t n, char *out, size_t outlen);

#endif
