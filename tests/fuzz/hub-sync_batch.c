/* fuzz: an LFS batch API answer (src/hub-sync/batch.c batch_parse_answer, the parser an upload
 * round uses) for two objects, one of them empty; the answer comes from the network. */
#include "fuzz.h"
#include "hub-sync/batch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct batch_object objs[2] = {
		{"4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393", 12345, "a", "a.bin"},
		{"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", 0, "b", "b.bin"}};
	char *body = malloc(size + 1), err[1024];
	if (!body)
		return 0;
	memcpy(body, data, size);
	body[size] = 0;   /* curl hands the parser a NUL-terminated body */
	batch_parse_answer(body, objs, 2, err, sizeof err);
	free(body);
	return 0;
}
