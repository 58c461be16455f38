/* fuzz: Megatron's .idx (src/lib/idx.c idx_open, idx_open_index: the reader mkindex and train
 * share), with a 64 KiB .bin beside it; every accessor walked on what it accepts. */
#include "fuzz.h"
#include "idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t bin[65536];
	struct idx x;
	char err[512];
	fuzz_file("d.bin", bin, sizeof bin);
	const char *idx = fuzz_file("d.idx", data, size);
	if (idx_open(&x, idx, err, sizeof err) == 0) {   /* the file's name: its suffix is dropped */
		uint64_t sum = 0;
		for (uint64_t i = 0; i < x.n; i++)
			sum += idx_size(&x, i) + idx_pointer(&x, i);
		for (uint64_t i = 0; i < x.d; i++)
			sum += idx_doc(&x, i);
		if (x.n && idx_seq_start(&x, x.n) != x.tokens)
			abort();
		(void)sum;
	}
	idx_close(&x);
	if (idx_open_index(&x, idx, err, sizeof err) == 0 && x.bin_fd != -1)
		abort();
	idx_close(&x);
	return 0;
}
