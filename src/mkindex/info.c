/* info - what a dataset holds: counts, dtype, id range, lengths, sequences per document (one for
 * a dataset of documents, the sentences of each for one of sentences), file sizes.
 *
 * Everything but the id range comes from the .idx; the id range reads the whole .bin once (at
 * disk speed, a chunk's minimum and maximum at a time).  --json gives the same facts as one object
 * (mkindex(1), JSON OUTPUT): the numbers unrounded, the histogram as rows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "idx.h"
#include "jsonout.h"
#include "msg.h"

struct range {
	int dtype;
	unsigned itemsize;
	int64_t lo, hi;
};

static int minmax(void *ctx, const unsigned char *p, size_t ntok, uint64_t tok0)
{
	struct range *r = ctx;
	int64_t lo = r->lo, hi = r->hi;
	(void)tok0;
	/* specialised loops: this reads up to a terabyte */
	if (r->dtype == IDX_U16) {
		for (size_t i = 0; i < ntok; i++) {
			int64_t v = p[2 * i] | p[2 * i + 1] << 8;
			lo = v < lo ? v : lo;
			hi = v > hi ? v : hi;
		}
	} else if (r->dtype == IDX_I32) {
		for (size_t i = 0; i < ntok; i++) {
			int64_t v = (int32_t)idx_le32(p + 4 * i);
			lo = v < lo ? v : lo;
			hi = v > hi ? v : hi;
		}
	} else {
		for (size_t i = 0; i < ntok; i++) {
			int64_t v = idx_token(r->dtype, p + i * r->itemsize);
			lo = v < lo ? v : lo;
			hi = v > hi ? v : hi;
		}
	}
	r->lo = lo;
	r->hi = hi;
	return 0;
}

static json_t *minmeanmax(uint64_t lo, double mean, uint64_t hi)
{
	return json_pack("{s:I, s:f, s:I}", "min", (json_int_t)lo, "mean", mean, "max", (json_int_t)hi);
}

static json_t *info_json(const struct idx *x, const struct range *r, const uint64_t *hist,
			 uint64_t zeros)
{
	json_t *o = json_object(), *hrows = json_array();
	json_object_set_new(o, "prefix", jsonout_str(x->prefix));
	json_object_set_new(o, "idx_path", jsonout_str(x->idx_path));
	json_object_set_new(o, "bin_path", jsonout_str(x->bin_path));
	json_object_set_new(o, "format", json_string("MMIDIDX"));
	json_object_set_new(o, "version", json_integer(1));
	json_object_set_new(o, "sequence_mode_array", json_boolean(x->lay.seqmode));
	json_object_set_new(o, "dtype", json_string(idx_dtype_name(x->dtype)));
	json_object_set_new(o, "dtype_code", json_integer(x->dtype));
	json_object_set_new(o, "documents", json_integer((json_int_t)(x->d - 1)));
	json_object_set_new(o, "sequences", json_integer((json_int_t)x->n));
	json_t *per_doc = json_null();
	if (x->d > 1) {
		uint64_t lo = UINT64_MAX, hi = 0;
		for (uint64_t i = 0; i + 1 < x->d; i++) {
			uint64_t k = idx_doc(x, i + 1) - idx_doc(x, i);
			lo = k < lo ? k : lo;
			hi = k > hi ? k : hi;
		}
		per_doc = minmeanmax(lo, (double)x->n / (double)(x->d - 1), hi);
	}
	json_object_set_new(o, "sequences_per_document", per_doc);
	json_object_set_new(o, "tokens", json_integer((json_int_t)x->tokens));
	json_object_set_new(o, "ids", x->tokens ? json_pack("{s:I, s:I}", "min", (json_int_t)r->lo, "max",
							     (json_int_t)r->hi) : json_null());
	json_object_set_new(o, "idx_bytes", json_integer((json_int_t)x->len));
	json_object_set_new(o, "bin_bytes", json_integer((json_int_t)x->bin_len));
	json_object_set_new(o, "lengths", x->n ? minmeanmax((uint64_t)x->lay.min_size,
		(double)x->tokens / (double)x->n, (uint64_t)x->lay.max_size) : json_null());
	if (zeros)
		json_array_append_new(hrows, json_pack("{s:I, s:I, s:I}", "min", (json_int_t)0, "max",
						       (json_int_t)0, "sequences", (json_int_t)zeros));
	int first = 0, last = 32;   /* the text's rows: from the first bucket used to the last */
	while (first < 32 && !hist[first])
		first++;
	while (last > 0 && !hist[last])
		last--;
	for (int k = first; k <= last; k++)
		json_array_append_new(hrows, json_pack("{s:I, s:I, s:I}", "min", (json_int_t)(1ull << k),
			"max", (json_int_t)((2ull << k) - 1), "sequences", (json_int_t)hist[k]));
	json_object_set_new(o, "length_histogram", hrows);
	return o;
}

int cmd_info(const char *prefix, int json)
{
	static struct idx x;
	char err[2048];
	uint64_t hist[33] = {0}, zeros = 0;
	int rc = idx_open(&x, prefix, err, sizeof err);

	if (rc < 0) {
		warn("%s", err);
		idx_close(&x);
		return rc == IDX_EIO ? EXIT_FAILED : EXIT_USAGE;
	}
	struct range r = {x.dtype, x.itemsize, INT64_MAX, INT64_MIN};
	if (idx_scan(&x, 0, x.tokens, minmax, &r, err, sizeof err) != 0) {
		warn("%s", err);
		idx_close(&x);
		return EXIT_FAILED;
	}
	for (uint64_t i = 0; i < x.n; i++) {
		uint32_t s = idx_size(&x, i);
		if (!s)
			zeros++;
		else
			hist[31 - __builtin_clz(s)]++;
	}
	if (json) {
		rc = jsonout_end(info_json(&x, &r, hist, zeros));
		idx_close(&x);
		return rc < 0 ? EXIT_FAILED : EXIT_OK;
	}

	printf("prefix       %s\n", x.prefix);
	printf("format       MMIDIDX version 1%s\n", x.lay.seqmode ?
	       ", with a sequence-mode array (newer Megatron-LM)" : "");
	printf("dtype        %s (%d)\n", idx_dtype_name(x.dtype), x.dtype);
	printf("documents    %llu\n", (unsigned long long)(x.d - 1));
	printf("sequences    %llu\n", (unsigned long long)x.n);
	if (x.d > 1) {   /* a dataset of sentences has several per document */
		uint64_t lo = UINT64_MAX, hi = 0;
		for (uint64_t i = 0; i + 1 < x.d; i++) {
			uint64_t k = idx_doc(&x, i + 1) - idx_doc(&x, i);
			lo = k < lo ? k : lo;
			hi = k > hi ? k : hi;
		}
		printf("per document min %llu, mean %.1f, max %llu sequences\n", (unsigned long long)lo,
		       (double)x.n / (double)(x.d - 1), (unsigned long long)hi);
	}
	printf("tokens       %llu\n", (unsigned long long)x.tokens);
	if (x.tokens)
		printf("ids          %lld..%lld\n", (long long)r.lo, (long long)r.hi);
	else
		printf("ids          none\n");
	printf("idx bytes    %zu\n", x.len);
	printf("bin bytes    %llu\n", (unsigned long long)x.bin_len);
	if (x.n) {
		printf("lengths      min %d, mean %.1f, max %d tokens per sequence\n", x.lay.min_size,
		       (double)x.tokens / (double)x.n, x.lay.max_size);
		if (zeros)
			printf("  %21s  %llu\n", "0", (unsigned long long)zeros);
		int first = 0, last = 32;
		while (first < 32 && !hist[first])
			first++;
		while (last > 0 && !hist[last])
			last--;
		for (int k = first; k <= last && first < 32; k++) {
			char span[32];
			snprintf(span, sizeof span, "%llu..%llu", 1ull << k, (2ull << k) - 1);
			printf("  %21s  %llu\n", span, (unsigned long long)hist[k]);
		}
	}
	idx_close(&x);
	return EXIT_OK;
}
