/* fuzz: Megatron's .idx (src/train/data/gptdata.c gptdata_open), with a 64 KiB .bin beside it. */
#include "fuzz.h"
#include "train/data/gptdata.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t bin[65536];
	struct gptdata_ds ds;
	char err[512];
	fuzz_file("d.bin", bin, sizeof bin);
	const char *idx = fuzz_file("d.idx", data, size);
	char prefix[256];
	snprintf(prefix, sizeof prefix, "%.*s", (int)(strlen(idx) - 4), idx);
	memset(&ds, 0, sizeof ds);
	if (gptdata_open(&ds, prefix, err, sizeof err) == 0)
		gptdata_close(&ds);
	return 0;
}
