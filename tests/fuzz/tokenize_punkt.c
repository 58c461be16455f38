/* fuzz: Punkt (src/tokenize/punkt*.c): the input is read as a parameters file (the JSON loader),
 * and, when it is valid UTF-8, trained on (every table the trainer keeps) and split with the
 * parameters it gave, with NLTK's and Megatron's --keep-newlines period contexts - so the word
 * scanner, the context search and the realignment see every byte pattern.  The spans must be
 * in order, inside the text and not empty. */
#include "fuzz.h"
#include "tokenize/punkt.h"
#include "tokenize/unicode.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	struct punkt_params *p = punkt_params_parse((const char *)data, size, "<fuzz>", err, sizeof err);
	punkt_params_free(p);
	for (size_t i = 0, l; i < size; i += l)
		if (!(l = utf8_valid_len(data + i, size - i)))
			return 0;
	p = punkt_train((const char *)data, size, NULL, NULL, err, sizeof err);
	if (!p)
		abort();
	struct punkt_state *st = punkt_state_new();
	struct punkt_span *spans = NULL;
	size_t n = 0, cap = 0;
	for (int keep = 0; keep < 2; keep++) {
		if (punkt_split(p, keep, st, (const char *)data, size, &spans, &n, &cap) < 0)
			abort();
		for (size_t i = 0; i < n; i++)
			if (spans[i].start >= spans[i].end || spans[i].end > size ||
			    (i && spans[i].start < spans[i - 1].end))
				abort();
	}
	free(spans);
	punkt_state_free(st);
	punkt_params_free(p);
	return 0;
}
