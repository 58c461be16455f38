/* fuzz: GPT-2 vocab.json + merges.txt (src/tokenize/tok.c tok_load_gpt2): the input is the
 * vocabulary, a NUL byte, then the merges (no NUL: merges "#version: 0.2"). */
#include "fuzz.h"
#include "tokenize/tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t vn = nul ? (size_t)(nul - data) : size;
	char err[512];
	const char *v = fuzz_file("vocab.json", data, vn);
	const char *m = nul ? fuzz_file("merges.txt", nul + 1, size - vn - 1)
			    : fuzz_file("merges.txt", "#version: 0.2\n", 14);
	struct tok *t = tok_load_gpt2(v, m, err, sizeof err);
	if (t)
		tok_free(t);
	return 0;
}
