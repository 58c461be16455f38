/* fuzz: BERT's vocab.txt (src/tokenize/tok.c tok_load_bert) and the WordPiece encoder
 * (src/tokenize/wordpiece.c): the input is loaded as a vocab.txt, and, when it is valid UTF-8,
 * also encoded as text under a fixed small vocabulary with all 16 normalizer configurations,
 * with and without the pre-tokenizer - so the normalizer's output buffer, the combining-mark
 * runs and the greedy matcher see every byte pattern. */
#include "fuzz.h"
#include "tokenize/tok.h"
#include "tokenize/unicode.h"
#include "tokenize/wordpiece.h"

#include <stdlib.h>

static struct wp *model(void)
{
	static struct wp *m;
	static const char *v[] = {"[UNK]", "a", "##a", "##b", "ab", "\xc3\xa9", "##\xcc\x81", "\xe4\xb8\xad", "##", ".", "i"};
	char err[256];
	if (m)
		return m;
	m = wp_new();
	for (uint32_t i = 0; i < sizeof v / sizeof v[0]; i++)
		wp_add_token(m, v[i], strlen(v[i]), i, err, sizeof err);
	wp_finish(m, "[UNK]", "##", 12, err, sizeof err);
	return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	struct tok *t = tok_load_bert(fuzz_file("vocab.txt", data, size), (int)(size & 1), err, sizeof err);
	if (t)
		tok_free(t);
	for (size_t i = 0, l; i < size; i += l)
		if (!(l = utf8_valid_len(data + i, size - i)))
			return 0;
	struct wp_state *st = wp_state_new();
	uint8_t *buf = NULL;
	uint32_t *ids = NULL;
	size_t cap = 0, icap = 0;
	for (int k = 0; k < 32; k++) {
		struct wp_norm n = {k & 1, k >> 1 & 1, k >> 2 & 1, k >> 3 & 1};
		size_t len = 0, nids = 0;
		if (wp_normalize(&n, st, data, size, &buf, &len, &cap) == 0)
			wp_encode(model(), st, k >> 4, buf, len, &ids, &nids, &icap);
	}
	free(buf);
	free(ids);
	wp_state_free(st);
	return 0;
}
