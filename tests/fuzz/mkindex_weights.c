/* fuzz: a catalogue of datasets and ratios (src/mkindex/weights.c weights_load), the JSON that
 * mkindex weights turns into Megatron's weighted split paths. */
#include "fuzz.h"
#include "mkindex/cmd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct weights_cat c;
	char err[8192];
	if (weights_load(fuzz_file("catalogue.json", data, size), &c, err, sizeof err) == 0)
		weights_free(&c);
	return 0;
}
