/* fuzz: a Hugging Face tokenizer.json (src/tokenize/tok.c tok_load_hf). */
#include "fuzz.h"
#include "tokenize/tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	struct tok *t = tok_load_hf(fuzz_file("tokenizer.json", data, size), NULL, err, sizeof err);
	if (t)
		tok_free(t);
	return 0;
}
