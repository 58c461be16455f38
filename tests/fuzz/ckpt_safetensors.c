/* fuzz: a safetensors file (src/ckpt/safetensors.c st_open): checkpoint shards. */
#include "fuzz.h"
#include "ckpt/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	struct st_file *f = st_open(fuzz_file("x.safetensors", data, size), err, sizeof err);
	if (f)
		st_close(f);
	return 0;
}
