/* lib_idx.c - the MMIDIDX reader and verifier (lib/idx.h), against the real Megatron file
 * (CI's ../shared/data/megatron, or $LMTK_MEGATRON_DIR) and against files built byte by byte from
 * the spec.  Without the real file (a bare clone) the verifier's cases on it run on one built
 * from the spec with its shape (1000 sequences, 1001 documents, 1,361,845 uint16 tokens), so their
 * numbers stay the same; only "Megatron's own file verifies clean" is skipped.  The writer and
 * merge are tests/unit/mkindex_idxwrite.c's. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "t.h"
#include "idx.h"

#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64] = "/tmp/lib-idx.XXXXXX";

#include "t_idx.h"

/* every problem and note, one per line */
struct seen {
	int problems, notes;
	char text[1 << 17];
};

static int collect(void *ctx, enum idx_note kind, const char *what, const char *msg)
{
	struct seen *s = ctx;
	size_t n = strlen(s->text);
	if (kind == IDX_PROBLEM)
		s->problems++;
	else
		s->notes++;
	snprintf(s->text + n, sizeof s->text - n, "%s: %s\n", what, msg);
	return 0;
}

static int count_only(void *ctx, enum idx_note kind, const char *what, const char *msg)
{
	(void)ctx, (void)kind, (void)what, (void)msg;
	return 1;  /* the first problem is enough */
}

static uint64_t verify(const unsigned char *p, size_t len, int64_t bin_len, struct seen *s,
		       struct idx_layout *lay)
{
	struct idx_layout l;
	memset(s, 0, sizeof *s);
	/* a private copy of exactly len bytes: reading past it is a sanitizer error, not luck */
	unsigned char *copy = malloc(len ? len : 1);
	memcpy(copy, p, len);
	uint64_t n = idx_verify(copy, len, bin_len, lay ? lay : &l, collect, s);
	free(copy);
	return n;
}

static void write_dataset(const char *prefix, int dtype, const int32_t *sizes, uint64_t n,
			  const int64_t *doc, uint64_t d, uint32_t first_id)
{
	static unsigned char b[1 << 16], bin[1 << 16];
	size_t len = build_idx(b, dtype, sizes, n, doc, d), blen = 0;
	uint32_t id = first_id;
	char path[512];
	for (uint64_t i = 0; i < n; i++)
		for (int32_t k = 0; k < sizes[i]; k++, id++) {
			if (dtype == IDX_U16) {
				bin[blen++] = (unsigned char)id;
				bin[blen++] = (unsigned char)(id >> 8);
			} else {
				idx_put32(bin + blen, id);
				blen += 4;
			}
		}
	snprintf(path, sizeof path, "%s.idx", prefix);
	spit(path, b, len);
	snprintf(path, sizeof path, "%s.bin", prefix);
	spit(path, bin, blen);
}

/* an .idx shaped like Megatron's reference (N = 1000, D = 1001, one sequence per document,
 * 1361845 uint16 tokens: 2723690 bytes of .bin), the lengths uneven but summing to that */
static unsigned char *megatron_shaped_idx(size_t *len, size_t *blen)
{
	static int32_t sizes[1000];
	static int64_t doc[1001];
	unsigned char *b = malloc(34 + 12 * 1000 + 8 * 1001);
	for (int i = 0; i < 1000; i++)
		sizes[i] = 1361 + (i < 845);           /* 1000 * 1361 + 845 = 1361845 */
	for (int i = 0; i < 1000; i += 2) {         /* pairs: one longer, one shorter, same sum */
		int32_t d = (int32_t)((i * 37u) % 1200);
		sizes[i] += d;
		sizes[i + 1] -= d;
	}
	for (int i = 0; i <= 1000; i++)
		doc[i] = i;
	*len = build_idx(b, IDX_U16, sizes, 1000, doc, 1001);
	*blen = 2723690;
	return b;
}

int main(void)
{
	const char *megdir = getenv("LMTK_MEGATRON_DIR") ? getenv("LMTK_MEGATRON_DIR")
							  : "../shared/data/megatron";
	char meg_idx[512], meg_bin[512];
	size_t len = 0, blen = 0;
	static struct seen s;
	struct idx_layout lay;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 2;
	}
	snprintf(meg_idx, sizeof meg_idx, "%s/meg-gpt2-openwebtext_text_document.idx", megdir);
	snprintf(meg_bin, sizeof meg_bin, "%s/meg-gpt2-openwebtext_text_document.bin", megdir);
	unsigned char *meg = slurp(meg_idx, &len), *megb = slurp(meg_bin, &blen);

	if (!meg || !megb) {
		printf("skip real_megatron_file_verifies_clean: %s not found (set LMTK_MEGATRON_DIR); "
		       "the other cases run on an .idx built from the spec with its shape\n", meg_idx);
		free(meg);
		free(megb);
		megb = NULL;
		meg = megatron_shaped_idx(&len, &blen);
	}
	T_CASE(megb ? "real_megatron_file_verifies_clean" : "spec_built_file_of_its_shape_verifies_clean") {
		T_ASSERT(verify(meg, len, (int64_t)blen, &s, &lay) == 0);
		T_ASSERT(s.notes == 0);
		T_ASSERT(lay.n == 1000 && lay.d == 1001 && lay.dtype == IDX_U16);
		T_ASSERT(lay.tokens * 2 == 2723690 && len == 20042);
	}
	T_CASE("every_truncation_of_the_idx_is_a_problem") {
		int bad = 0;
		for (size_t l = 0; l < len; l++) {
			if (verify(meg, l, (int64_t)blen, &s, NULL) == 0 || !strstr(s.text, "truncated"))
				bad++;
		}
		T_ASSERT(bad == 0);
		verify(meg, 20000, (int64_t)blen, &s, NULL);
		T_ASSERT(strstr(s.text, "file is 20000 bytes, expected 34 + 12*N + 8*D = 20042 (N = 1000, "
				"D = 1001): truncated inside doc_idx, at entry 995 of 1001"));
		verify(meg, 5000, (int64_t)blen, &s, NULL);
		T_ASSERT(strstr(s.text, "truncated inside pointers, at entry 120 of 1000"));
		verify(meg, 33, (int64_t)blen, &s, NULL);
		T_ASSERT(strstr(s.text, "33 bytes, shorter than the 34-byte header"));
	}
	T_CASE("every_bit_flip_of_the_idx_is_a_problem_or_still_valid") {
		/* every field is pinned by an invariant, except that doc_idx may legally repeat an
		 * entry (an empty document): a flip there may give another valid file, and then
		 * an independent look must agree that it is one */
		unsigned char *b = malloc(len);
		const size_t doc0 = 34 + 12 * 1000;
		int missed = 0;
		memcpy(b, meg, len);
		for (size_t i = 0; i < len; i++)
			for (int bit = 0; bit < 8; bit++) {
				struct idx_layout l;
				b[i] ^= (unsigned char)(1 << bit);
				if (idx_verify(b, len, (int64_t)blen, &l, count_only, NULL) == 0) {
					size_t e = (i - doc0) / 8;
					int64_t v = (int64_t)idx_le64(b + doc0 + 8 * e);
					int valid = i >= doc0 && e > 0 && e < 1000 &&
						    (int64_t)idx_le64(b + doc0 + 8 * (e - 1)) <= v &&
						    v <= (int64_t)idx_le64(b + doc0 + 8 * (e + 1));
					if (!valid && missed++ < 5)
						printf("    missed: byte %zu bit %d\n", i, bit);
				}
				b[i] ^= (unsigned char)(1 << bit);
			}
		T_ASSERT(missed == 0);
		free(b);
	}
	T_CASE("bin_shorter_than_sizes_names_the_sequence") {
		uint64_t p500 = idx_le64(meg + 34 + 4 * 1000 + 8 * 500);
		verify(meg, len, (int64_t)p500 + 2, &s, NULL);
		T_ASSERT(s.problems == 1);
		T_ASSERT(strstr(s.text, "bin: is ") && strstr(s.text, "expected 2723690 (1361845 tokens x 2 "
			"bytes): it ends inside sequence 500 of 1000"));
		verify(meg, len, 2723691, &s, NULL);
		T_ASSERT(strstr(s.text, "1 bytes too many"));
	}
	T_CASE("trailing_sequence_mode_array_is_accepted_with_a_note") {
		unsigned char *b = calloc(1, len + 1000);
		memcpy(b, meg, len);
		T_ASSERT(verify(b, len + 1000, (int64_t)blen, &s, &lay) == 0);
		T_ASSERT(lay.seqmode == 1 && s.notes == 1 && strstr(s.text, "sequence-mode"));
		T_ASSERT(verify(b, len + 999, (int64_t)blen, &s, NULL) == 1);
		T_ASSERT(strstr(s.text, "999 more than 34 + 12*N + 8*D = 20042"));
		free(b);
	}
	T_CASE("problems_name_field_index_expected_and_found") {
		unsigned char *b = malloc(len);
		memcpy(b, meg, len);
		idx_put64(b + 34 + 12000 + 8 * 3, 1);          /* doc_idx[3] = 1 < doc_idx[2] = 2 */
		idx_put32(b + 34 + 4 * 5, (uint32_t)-7);       /* sizes[5] = -7 */
		idx_put64(b + 34 + 4000 + 8 * 900, 12345);     /* pointers[900] */
		b[9] = 2;                                      /* version 2 */
		b[0] = 'X';
		verify(b, len, -1, &s, NULL);
		T_ASSERT(strstr(s.text, "doc_idx: doc_idx[3] = 1 is less than doc_idx[2] = 2: must not decrease"));
		T_ASSERT(strstr(s.text, "sizes: sizes[5] = -7: negative"));
		T_ASSERT(strstr(s.text, "pointers: pointers[900] = 12345, expected "));
		T_ASSERT(strstr(s.text, "version: version is 2, expected 1"));
		T_ASSERT(strstr(s.text, "magic: magic is 58 4d 49 44 49 44 58 00 00, expected"));
		free(b);
	}

	T_CASE("dtype_follows_megatron_best_fitting_dtype") {
		T_ASSERT(idx_dtype_for_vocab(5000) == IDX_U16);
		T_ASSERT(idx_dtype_for_vocab(50257) == IDX_U16);
		T_ASSERT(idx_dtype_for_vocab(65499) == IDX_U16);
		T_ASSERT(idx_dtype_for_vocab(65500) == IDX_I32);
		T_ASSERT(idx_dtype_for_vocab(250880) == IDX_I32);
		T_ASSERT(idx_dtype_parse("uint16") == 8 && idx_dtype_parse("int32") == 4);
		T_ASSERT(idx_dtype_parse("float64") == 0 && idx_dtype_parse("u16") == 0);
	}

	T_CASE("doc_idx_rules") {
		unsigned char b[4096];
		int32_t sz[3] = {2, 0, 5};
		int64_t ok[4] = {0, 1, 1, 3}, first[4] = {1, 1, 2, 3}, last[3] = {0, 1, 2}, big[4] = {0, 9, 2, 3};
		T_ASSERT(verify(b, build_idx(b, IDX_U16, sz, 3, ok, 4), 14, &s, NULL) == 0);
		T_ASSERT(verify(b, build_idx(b, IDX_U16, sz, 3, first, 4), 14, &s, NULL) == 1);
		T_ASSERT(strstr(s.text, "doc_idx[0] = 1, expected 0"));
		T_ASSERT(verify(b, build_idx(b, IDX_U16, sz, 3, last, 3), 14, &s, NULL) == 1);
		T_ASSERT(strstr(s.text, "doc_idx[2] (the last) = 2, expected N = 3"));
		verify(b, build_idx(b, IDX_U16, sz, 3, big, 4), 14, &s, NULL);
		T_ASSERT(strstr(s.text, "doc_idx[1] = 9 is outside 0..N = 3"));
		T_ASSERT(verify(b, build_idx(b, IDX_U16, sz, 3, ok, 0), 14, &s, NULL) == 1);
		T_ASSERT(strstr(s.text, "D = 0"));
		T_ASSERT(verify(b, build_idx(b, 9, sz, 3, ok, 4), 14, &s, NULL) == 1);
		T_ASSERT(strstr(s.text, "dtype code 9 is unknown"));
	}

	T_CASE("open_names_the_file_and_the_field_of_a_hostile_idx") {
		int32_t sz[2] = {3, 1};
		int64_t dc[3] = {0, 1, 2};
		struct idx x;
		char err[1024], path[600];
		size_t n;
		write_dataset(tmp("h"), IDX_U16, sz, 2, dc, 3, 1);
		T_ASSERT(idx_open(&x, tmp("h"), err, sizeof err) == 0 && x.n == 2 && x.tokens == 4);
		idx_close(&x);
		snprintf(path, sizeof path, "%s", tmp("h.idx"));
		unsigned char *b = slurp(path, &n);
		idx_put64(b + 18, 1ull << 60);                  /* N */
		spit(path, b, n);
		T_ASSERT(idx_open(&x, tmp("h"), err, sizeof err) == IDX_EBAD);
		T_ASSERT(strstr(err, "h.idx: N = 1152921504606846976 and D = 3 are impossibly large") &&
			 strstr(err, "run 'mkindex check "));
		idx_close(&x);
		idx_put64(b + 18, 2);
		idx_put32(b + 34 + 4, (uint32_t)-1);            /* sizes[1] */
		spit(path, b, n);
		T_ASSERT(idx_open_index(&x, tmp("h"), err, sizeof err) == IDX_EBAD);
		T_ASSERT(strstr(err, "h.idx: sizes[1] = -1: negative"));
		idx_close(&x);
		free(b);
	}
	T_CASE("open_index_needs_no_bin") {
		int32_t sz[1] = {2};
		int64_t dc[2] = {0, 1};
		struct idx x;
		char err[1024];
		write_dataset(tmp("nb"), IDX_U16, sz, 1, dc, 2, 1);
		T_ASSERT(unlink(tmp("nb.bin")) == 0);
		T_ASSERT(idx_open(&x, tmp("nb"), err, sizeof err) == IDX_EIO && strstr(err, "nb.bin: "));
		idx_close(&x);
		T_ASSERT(idx_open_index(&x, tmp("nb"), err, sizeof err) == 0 && x.n == 1 && x.bin_fd == -1);
		T_ASSERT(x.tokens == 2 && idx_size(&x, 0) == 2);
		idx_close(&x);
	}
	T_CASE("a_bin_or_idx_suffix_names_the_prefix") {
		int32_t sz[1] = {2};
		int64_t dc[2] = {0, 1};
		struct idx x;
		char err[1024], *p;
		write_dataset(tmp("sx"), IDX_U16, sz, 1, dc, 2, 1);
		p = idx_prefix(tmp("sx.idx"));
		T_ASSERT(p && strcmp(p, tmp("sx")) == 0);
		free(p);
		p = idx_prefix(tmp("sx.bin"));
		T_ASSERT(p && strcmp(p, tmp("sx")) == 0);
		free(p);
		p = idx_prefix(tmp("sx"));
		T_ASSERT(p && strcmp(p, tmp("sx")) == 0);
		free(p);
		T_ASSERT(idx_open(&x, tmp("sx.idx"), err, sizeof err) == 0 && strcmp(x.prefix, tmp("sx")) == 0);
		idx_close(&x);
		T_ASSERT(idx_open(&x, tmp("sx.bin"), err, sizeof err) == 0 && x.n == 1);
		idx_close(&x);
		/* a dataset whose prefix really ends in .idx keeps it */
		write_dataset(tmp("odd.idx"), IDX_U16, sz, 1, dc, 2, 1);
		p = idx_prefix(tmp("odd.idx"));
		T_ASSERT(p && strcmp(p, tmp("odd.idx")) == 0);
		free(p);
	}
	T_CASE("a_missing_prefix_suggests_the_key_documents_beside_it") {
		int32_t sz[1] = {2};
		int64_t dc[2] = {0, 1};
		struct idx x;
		char err[1024], hint[512], want[1024];
		write_dataset(tmp("ds_text_document"), IDX_U16, sz, 1, dc, 2, 1);
		T_ASSERT(idx_open(&x, tmp("ds"), err, sizeof err) == IDX_EBAD);   /* bad input: exit 2 */
		snprintf(want, sizeof want, "%s.idx: No such file or directory; did you mean %s?", tmp("ds"),
			 tmp("ds_text_document"));
		T_ASSERT(strcmp(err, want) == 0);
		idx_close(&x);
		T_ASSERT(idx_open(&x, tmp("ds.bin"), err, sizeof err) == IDX_EBAD && strcmp(err, want) == 0);
		idx_close(&x);
		write_dataset(tmp("ds_code_sentence"), IDX_U16, sz, 1, dc, 2, 1);
		write_dataset(tmp("ds_other"), IDX_U16, sz, 1, dc, 2, 1);   /* not a key's dataset */
		T_ASSERT(idx_suggest(tmp("ds"), hint, sizeof hint) == 1);
		snprintf(want, sizeof want, "did you mean %s or %s?", tmp("ds_code_sentence"),
			 tmp("ds_text_document"));
		T_ASSERT(strcmp(hint, want) == 0);
		T_ASSERT(idx_suggest(tmp("nothing"), hint, sizeof hint) == 0 && hint[0] == 0);
		T_ASSERT(idx_open(&x, tmp("nothing"), err, sizeof err) == IDX_EIO && !strstr(err, "did you mean"));
		idx_close(&x);
	}

	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
	free(meg);
	free(megb);
	T_DONE();
}
