/* fuzz: Megatron's sample index as train caches it (src/train/data/gptdata.c gptdata_cache_load), for
 * a dataset of 8 sequences filled in by hand and one key.  With LMTK_FUZZ_SEED=PATH set, the
 * first call writes a valid cache for them there (the seed corpus is made that way), so the
 * fuzzer starts from files that pass the header and reaches the arrays. */
#include "fuzz.h"
#include "train/data/gptdata.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int32_t sizes[8] = {5, 7, 3, 9, 4, 6, 8, 2};
	static struct gptdata_ds ds = {.prefix = "fuzz", .dtype = 8, .itemsize = 2, .n = 8,
				       .sizes = sizes, .bin_len = 88, .idx_size = 226,
				       .bin_size = 88, .idx_mtime_ns = 1, .bin_mtime_ns = 2};
	static const struct gptdata_key k = {0, 8, 20, 4, 1234};
	static int seeded;
	struct gptdata_index x;
	char err[512];
	const char *seed = getenv("LMTK_FUZZ_SEED");
	if (seed && !seeded++) {
		memset(&x, 0, sizeof x);
		if (gptdata_build(&x, sizes, &k, err, sizeof err) < 0 ||
		    gptdata_cache_save(&x, &ds, seed, err, sizeof err) < 0) {
			fprintf(stderr, "train_cache: %s\n", err);
			abort();
		}
		gptdata_index_free(&x);
	}
	memset(&x, 0, sizeof x);
	if (gptdata_cache_load(&x, &ds, &k, fuzz_file("c.map", data, size), err, sizeof err) == 0) {
		for (int64_t i = 0; i < x.ns; i++)   /* what it loaded indexes the dataset */
			if (gptdata_shuffle_at(&x, i) >= x.ns)
				abort();
		gptdata_index_free(&x);
	}
	return 0;
}
