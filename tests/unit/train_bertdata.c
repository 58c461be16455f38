/* train_bertdata - Megatron's BERT and T5 samples (src/train/data/bertdata.c): the numpy and
 * C++ generators they draw from, the vocabulary as Megatron's tokenizer numbers it, the samples
 * mapping on hand-counted documents, the errors where Megatron would fail, and the invariants
 * of every sample of a made-up sentence dataset.  With BERTDATA_DUMP=1 the program instead
 * prints what tests/ref/bert-samples.py prints, for tests/cli/train-bertdata.sh to compare:
 *
 *   BERTDATA_DUMP=1 train_bertdata PREFIX VOCAB KIND SPLIT WHICH NUM_SAMPLES SEQ DEC SEED
 *                                  MASK_PROB SHORT_PROB EXTRA_IDS NPRINT
 *
 * KIND is bert, bert-nobinary or t5. */
#include "t.h"
#include "train/data/bertdata.h"
#include "mt19937.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* --- the dump driver ----------------------------------------------------------------------- */

static void line_i32(const char *name, const int32_t *a, int64_t n)
{
	printf("%s", name);
	for (int64_t i = 0; i < n; i++)
		printf(" %d", a[i]);
	putchar('\n');
}

static void line_u8(const char *name, const uint8_t *a, int64_t n)
{
	printf("%s", name);
	for (int64_t i = 0; i < n; i++)
		printf(" %d", a[i]);
	putchar('\n');
}

/* an (n, m) mask as Megatron's matrix, row after row */
static void rows(const char *name, const struct t5_sample *s, int n, int m,
		 int (*at)(const struct t5_sample *, int, int))
{
	printf("%s", name);
	for (int i = 0; i < n; i++) {
		putchar(' ');
		for (int j = 0; j < m; j++)
			putchar('0' + at(s, i, j));
	}
	putchar('\n');
}

static int dump_main(int argc, char **argv)
{
	struct bertdata_vocab v;
	struct bertdata_config c;
	struct bertdata b;
	char err[1024];
	int t5, nprint;

	if (argc != 14) {
		fprintf(stderr, "usage: BERTDATA_DUMP=1 train_bertdata PREFIX VOCAB bert|bert-nobinary|t5 "
			"SPLIT WHICH NUM_SAMPLES SEQ DEC SEED MASK_PROB SHORT_PROB EXTRA_IDS NPRINT\n");
		return 2;
	}
	t5 = strcmp(argv[3], "t5") == 0;
	bertdata_config_default(&c, t5 ? BERTDATA_T5 : BERTDATA_BERT);
	c.binary_head = strcmp(argv[3], "bert") == 0;
	c.split = argv[4];
	c.which = atoi(argv[5]);
	c.num_samples = strtoull(argv[6], NULL, 10);
	c.seq_length = atoi(argv[7]);
	c.dec_seq_length = atoi(argv[8]);
	c.seed = atoi(argv[9]);
	c.mask_prob = strtod(argv[10], NULL);
	c.short_seq_prob = strtod(argv[11], NULL);
	nprint = atoi(argv[13]);
	if (bertdata_vocab_load(&v, argv[2], atoi(argv[12]), err, sizeof err) < 0 ||
	    bertdata_open(&b, argv[1], &c, &v, err, sizeof err) < 0) {
		fprintf(stderr, "train_bertdata: %s\n", err);
		return 1;
	}
	printf("split %lld %lld %lld %lld\n", (long long)b.split[0], (long long)b.split[1],
	       (long long)b.split[2], (long long)b.split[3]);
	printf("samples %lld\nmapping", (long long)b.n);
	for (int64_t i = 0; i < b.n; i++) {
		int64_t first, end;
		int32_t target;
		bertdata_map_row(&b.map, i, &first, &end, &target);
		printf(" %lld %lld %d", (long long)first, (long long)end, target);
	}
	putchar('\n');
	for (int64_t i = 0; i < nprint && i < b.n; i++) {
		if (t5) {
			struct t5_sample s;
			if (t5_sample_alloc(&b, &s) < 0 || bertdata_t5_get(&b, i, &s, err, sizeof err) < 0) {
				fprintf(stderr, "train_bertdata: %s\n", err);
				return 1;
			}
			printf("sample %lld truncated %d\n", (long long)i, s.truncated);
			line_i32("enc", s.text_enc, s.enc_len);
			line_i32("dec", s.text_dec, s.dec_len);
			line_i32("labels", s.labels, s.dec_len);
			line_u8("loss_mask", s.loss_mask, s.dec_len);
			rows("enc_mask", &s, s.enc_len, s.enc_len, t5_enc_mask);
			rows("dec_mask", &s, s.dec_len, s.dec_len, t5_dec_mask);
			rows("enc_dec_mask", &s, s.dec_len, s.enc_len, t5_enc_dec_mask);
			t5_sample_free(&s);
		} else {
			struct bert_sample s;
			if (bert_sample_alloc(&b, &s) < 0 ||
			    bertdata_bert_get(&b, i, &s, err, sizeof err) < 0) {
				fprintf(stderr, "train_bertdata: %s\n", err);
				return 1;
			}
			printf("sample %lld is_random %d truncated %d\n", (long long)i, s.is_random,
			       s.truncated);
			line_i32("tokens", s.tokens, s.len);
			line_i32("types", s.types, s.len);
			line_i32("labels", s.labels, s.len);
			line_u8("padding_mask", s.padding_mask, s.len);
			line_u8("loss_mask", s.loss_mask, s.len);
			bert_sample_free(&s);
		}
	}
	bertdata_close(&b);
	bertdata_vocab_free(&v);
	return 0;
}

/* --- fixtures -------------------------------------------------------------------------------- */

static char tmpdir[] = "/tmp/lmtk-bertdata-XXXXXX";

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

/* vocab.txt: [PAD] [UNK] [CLS] [SEP] [MASK], w0..w19, ##p0..##p9 (ids 25-34), then extra */
static char *make_vocab(const char *name, const char *extra)
{
	char *path, buf[4096];
	int n = 0;
	n += snprintf(buf + n, sizeof buf - n, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n");
	for (int i = 0; i < 20; i++)
		n += snprintf(buf + n, sizeof buf - n, "w%d\n", i);
	for (int i = 0; i < 10; i++)
		n += snprintf(buf + n, sizeof buf - n, "##p%d\n", i);
	n += snprintf(buf + n, sizeof buf - n, "%s", extra);
	if (asprintf(&path, "%s/%s", tmpdir, name) < 0)
		exit(1);
	write_file(path, buf, (size_t)n);
	return path;
}

/* PREFIX.bin/.idx, uint16, of the given sentences (sizes[k] tokens each, from toks) and doc_idx */
static char *make_dataset(const char *name, const int32_t *sizes, int64_t n, const uint16_t *toks,
			  const int64_t *doc_idx, int64_t d)
{
	char *prefix, *path;
	int64_t total = 0;
	unsigned char hdr[34];
	FILE *f;

	if (asprintf(&prefix, "%s/%s", tmpdir, name) < 0 || asprintf(&path, "%s.bin", prefix) < 0)
		exit(1);
	for (int64_t i = 0; i < n; i++)
		total += sizes[i];
	write_file(path, toks, (size_t)total * 2 + (total == 0));
	free(path);
	if (asprintf(&path, "%s.idx", prefix) < 0 || !(f = fopen(path, "wb")))
		exit(1);
	uint64_t ver = 1, un = (uint64_t)n, ud = (uint64_t)d;
	memcpy(hdr, "MMIDIDX\0\0", 9);
	memcpy(hdr + 9, &ver, 8);
	hdr[17] = 8;
	memcpy(hdr + 18, &un, 8);
	memcpy(hdr + 26, &ud, 8);
	fwrite(hdr, 1, 34, f);
	fwrite(sizes, 4, (size_t)n, f);
	for (int64_t i = 0, off = 0; i < n; off += 2 * sizes[i], i++)
		fwrite(&off, 8, 1, f);
	fwrite(doc_idx, 8, (size_t)d, f);
	fclose(f);
	free(path);
	return prefix;
}

static int row_is(const struct bertdata_map *m, int64_t i, int64_t first, int64_t end,
		  int32_t target)
{
	int64_t f, e;
	int32_t t;
	bertdata_map_row(m, i, &f, &e, &t);
	return f == first && e == end && t == target;
}

/* the rows of m, in any order, are exactly want (triples) */
static int rows_are(const struct bertdata_map *m, const int64_t *want, int64_t n)
{
	if (m->n != n)
		return 0;
	for (int64_t k = 0; k < n; k++) {
		int found = 0;
		for (int64_t i = 0; i < m->n && !found; i++)
			found = row_is(m, i, want[3 * k], want[3 * k + 1], (int32_t)want[3 * k + 2]);
		if (!found)
			return 0;
	}
	return 1;
}

/* --- unit cases ------------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
	char err[1024];

	if (getenv("BERTDATA_DUMP"))
		return dump_main(argc, argv);
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}

	/* --- the generators ---------------------------------------------------------------- */
	T_CASE("std_mt19937_and_mt19937_64_10000th_outputs_match_the_cpp_standard") {
		struct mt19937 g;
		struct mt19937_64 g64;
		uint32_t x = 0;
		uint64_t y = 0;
		mt_seed(&g, 5489);
		mt64_seed(&g64, 5489);
		for (int i = 0; i < 10000; i++)
			x = mt_next32(&g), y = mt64_next(&g64);
		T_ASSERT(x == 4123659995U);
		T_ASSERT(y == 9981545732273789042ULL);
		mt64_seed(&g64, 5489);
		T_ASSERT(mt64_next(&g64) == 14514284786278117030ULL);
	}
	T_CASE("random_sample_randint_match_numpy_seed_1234") {
		/* RandomState(1234).random_sample(3); then randint(0,7) x8, randint(5,6) x2,
		 * randint(0,30524) from a fresh RandomState(1234) */
		struct mt19937 g;
		static const int64_t r7[8] = {3, 6, 5, 4, 4, 0, 1, 1};
		mt_seed(&g, 1234);
		T_ASSERT(mt_double(&g) == 0x1.883b597f66e2cp-3);
		T_ASSERT(mt_double(&g) == 0x1.3e850a7457770p-1);
		T_ASSERT(mt_double(&g) == 0x1.c03bb34e59aeap-2);
		mt_seed(&g, 1234);
		for (int i = 0; i < 8; i++)
			T_ASSERT(mt_randint(&g, 0, 7) == r7[i]);
		T_ASSERT(mt_randint(&g, 5, 6) == 5 && mt_randint(&g, 5, 6) == 5);
		T_ASSERT(mt_randint(&g, 0, 30524) == 8471);
	}
	T_CASE("geometric_matches_numpy_inversion_and_search") {
		/* RandomState(42).geometric(0.2) x10, then geometric(0.5) x10 */
		static const int64_t a[10] = {3, 14, 6, 5, 1, 1, 1, 10, 5, 6};
		static const int64_t b[10] = {1, 6, 3, 1, 1, 1, 1, 2, 1, 1};
		struct mt19937 g;
		mt_seed(&g, 42);
		for (int i = 0; i < 10; i++)
			T_ASSERT(mt_geometric(&g, 0.2) == a[i]);
		for (int i = 0; i < 10; i++)
			T_ASSERT(mt_geometric(&g, 0.5) == b[i]);
	}
	T_CASE("choice_with_p_matches_numpy") {
		/* RandomState(7).choice([1,2,3], p=pvals) x12, pvals as numpy has them */
		static const int64_t want[12] = {1, 2, 1, 2, 3, 1, 1, 1, 1, 1, 2, 2};
		static const double pv[3] = {0x1.1745d1745d174p-1, 0x1.1745d1745d174p-2,
					     0x1.745d1745d1745p-3};
		struct mt19937 g;
		mt_seed(&g, 7);
		for (int i = 0; i < 12; i++)
			T_ASSERT(1 + mt_choice_p(&g, pv, 3) == want[i]);
	}

	/* --- the vocabulary ---------------------------------------------------------------- */
	T_CASE("vocab_adds_bos_eos_and_extra_ids_after_the_file") {
		struct bertdata_vocab v;
		char *p = make_vocab("v1.txt", "");
		T_ASSERT(bertdata_vocab_load(&v, p, 3, err, sizeof err) == 0);
		T_ASSERT(v.cls == 2 && v.sep == 3 && v.mask == 4 && v.pad == 0);
		T_ASSERT(v.bos == 35 && v.eos == 36 && v.n_extra == 3);
		T_ASSERT(v.extra[0] == 37 && v.extra[1] == 38 && v.extra[2] == 39 && v.size == 40);
		T_ASSERT(v.cont[25] && v.cont[34] && !v.cont[24] && !v.cont[35] && !v.cont[39]);
		bertdata_vocab_free(&v);
		free(p);
	}
	T_CASE("vocab_keeps_ids_of_tokens_it_already_has") {
		struct bertdata_vocab v;
		char *p = make_vocab("v2.txt", "[EOS]\n<extra_id_1>\n  ##q  \r\n");
		T_ASSERT(bertdata_vocab_load(&v, p, 2, err, sizeof err) == 0);
		/* file: ids 0-34, [EOS] 35, <extra_id_1> 36, ##q 37; added: [BOS] 38, extra_0 39 */
		T_ASSERT(v.eos == 35 && v.extra[1] == 36 && v.cont[37]);
		T_ASSERT(v.bos == 38 && v.extra[0] == 39 && v.size == 40);
		bertdata_vocab_free(&v);
		free(p);
	}
	T_CASE("vocab_refuses_duplicates_and_a_missing_mask") {
		struct bertdata_vocab v;
		char *p = make_vocab("v3.txt", "w3\n");
		T_ASSERT(bertdata_vocab_load(&v, p, 0, err, sizeof err) == -1);
		T_ASSERT(strstr(err, "'w3'") && strstr(err, "lines 9 and 36"));
		free(p);
		p = make_vocab("v4.txt", "");
		FILE *f = fopen(p, "w");
		fputs("[PAD]\n[CLS]\n[SEP]\n", f);
		fclose(f);
		T_ASSERT(bertdata_vocab_load(&v, p, 0, err, sizeof err) == -1 && strstr(err, "[MASK]"));
		free(p);
		T_ASSERT(bertdata_vocab_load(&v, "/nonexistent/vocab.txt", 0, err, sizeof err) == -1);
		T_ASSERT(strstr(err, "/nonexistent/vocab.txt") != NULL);
	}

	/* --- the samples mapping ----------------------------------------------------------- */
	/* documents: [5 5 5] [7] [2 2 2 2] [] [600] [3 513] */
	static const int32_t SZ[10] = {5, 5, 5, 7, 2, 2, 2, 2, 600, 3};
	static const int32_t SZL[11] = {5, 5, 5, 7, 2, 2, 2, 2, 600, 3, 513};
	static const int64_t DOCS[7] = {0, 3, 4, 8, 8, 9, 11};
	T_CASE("mapping_two_sentence_minimum_counts_as_helpers_cpp") {
		struct bertdata_map m;
		/* no short sequences: target 8 always.  doc 0: 10 >= 8 after two but only one is
		 * left, so all three; doc 1 one sentence; doc 2 only at its end; doc 4 one
		 * sentence; doc 5 has a sentence over 512 */
		static const int64_t want[6] = {0, 3, 8, 4, 8, 8};
		T_ASSERT(bertdata_map_build(&m, DOCS, 6, SZL, 1, 0, 8, 0, 1234, 2, err, sizeof err) == 0);
		T_ASSERT(rows_are(&m, want, 2));
		bertdata_map_free(&m);
	}
	T_CASE("mapping_one_sentence_minimum_keeps_single_and_long_single_sentences") {
		struct bertdata_map m;
		/* doc 4 (one 600-token sentence) is not checked for length: only documents of
		 * more than one sentence are */
		static const int64_t want[12] = {0, 3, 8, 3, 4, 8, 4, 8, 8, 8, 9, 8};
		T_ASSERT(bertdata_map_build(&m, DOCS, 6, SZL, 1, 0, 8, 0, 1234, 1, err, sizeof err) == 0);
		T_ASSERT(rows_are(&m, want, 4));
		bertdata_map_free(&m);
	}
	T_CASE("mapping_takes_whole_epochs_until_num_samples") {
		struct bertdata_map m;
		/* 4 samples per epoch: 5 asked for takes two epochs, 8 rows */
		T_ASSERT(bertdata_map_build(&m, DOCS, 6, SZL, 0, 5, 8, 0, 1234, 1, err, sizeof err) == 0);
		T_ASSERT(m.n == 8 && !m.wide);
		bertdata_map_free(&m);
		T_ASSERT(bertdata_map_build(&m, DOCS, 6, SZL, 0, 4, 8, 0, 1234, 1, err, sizeof err) == 0);
		T_ASSERT(m.n == 4);
		bertdata_map_free(&m);
	}
	T_CASE("mapping_shuffle_is_mt19937_64_of_seed_plus_one") {
		struct bertdata_map m;
		struct mt19937_64 g;
		int64_t order[4] = {0, 1, 2, 3};
		static const int64_t rows4[12] = {0, 3, 8, 3, 4, 8, 4, 8, 8, 8, 9, 8};
		T_ASSERT(bertdata_map_build(&m, DOCS, 6, SZL, 1, 0, 8, 0, 77, 1, err, sizeof err) == 0);
		mt64_seed(&g, 78);
		for (int64_t i = 3; i > 0; i--) {
			int64_t j = (int64_t)(mt64_next(&g) % (uint64_t)(i + 1)), t = order[i];
			order[i] = order[j], order[j] = t;
		}
		for (int i = 0; i < 4; i++)
			T_ASSERT(row_is(&m, i, rows4[3 * order[i]], rows4[3 * order[i] + 1], 8));
		bertdata_map_free(&m);
	}
	T_CASE("mapping_short_targets_come_from_mt19937_of_the_seed") {
		struct bertdata_map m;
		struct mt19937 g;
		int64_t docs1[2] = {0, 10};
		int32_t ones[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
		/* short_seq_prob 1: ratio 1, every target is 2 + r % 99; one document of ten
		 * one-token sentences, so the first sample ends at its target */
		T_ASSERT(bertdata_map_build(&m, docs1, 1, ones, 1, 0, 100, 1.0, 5, 1, err, sizeof err) == 0);
		mt_seed(&g, 5);
		int32_t t0 = (int32_t)(2 + (uint64_t)mt_next32(&g) % 99);
		int found = 0;
		for (int64_t i = 0; i < m.n; i++) {
			int64_t f, e;
			int32_t t;
			bertdata_map_row(&m, i, &f, &e, &t);
			found |= f == 0 && t == t0 && (e == (t0 < 9 ? t0 : 10));
		}
		T_ASSERT(found);
		bertdata_map_free(&m);
	}
	T_CASE("mapping_refuses_what_megatron_asserts_or_loops_on") {
		struct bertdata_map m;
		T_ASSERT(bertdata_map_build(&m, DOCS, 6, SZL, 0, 10, 8, 0.1, 0, 1, err, sizeof err) == -1);
		T_ASSERT(strstr(err, "seed 0") != NULL);
		T_ASSERT(bertdata_map_build(&m, DOCS, 6, SZL, 0, 10, 1, 0.1, 1, 1, err, sizeof err) == -1);
		T_ASSERT(bertdata_map_build(&m, DOCS, 6, SZL, 0, 10, 8, 1.5, 1, 1, err, sizeof err) == -1);
		T_ASSERT(bertdata_map_build(&m, DOCS, 6, SZL, 0, 0, 8, 0.1, 1, 1, err, sizeof err) == -1);
		/* only documents 1 and 4 (one sentence each): nothing for the binary head, which
		 * Megatron would look for through 2^31 epochs */
		T_ASSERT(bertdata_map_build(&m, DOCS + 1, 1, SZL, 0, 10, 8, 0.1, 1, 2, err, sizeof err) == -1);
		T_ASSERT(strstr(err, "no sample") != NULL);
		(void)SZ;
	}

	/* --- the dataset and its samples ------------------------------------------------------ */
	char *vpath = make_vocab("vocab.txt", "");
	struct bertdata_vocab v;
	if (bertdata_vocab_load(&v, vpath, 4, err, sizeof err) < 0) {
		printf("FAIL vocab: %s\n", err);
		return 1;
	}
	/* 40 documents of 1-6 sentences of 0-30 tokens, a third "##" pieces (ids 25-34) */
	enum { NDOC = 40 };
	int32_t sizes[400];
	uint16_t toks[12000];
	int64_t doc_idx[NDOC + 1], ns = 0, nt = 0;
	{
		struct mt19937 g;
		mt_seed(&g, 99);
		doc_idx[0] = 0;
		for (int d = 0; d < NDOC; d++) {
			int k = 1 + (int)mt_randint(&g, 0, 6);
			for (int s = 0; s < k; s++) {
				int len = (int)mt_randint(&g, 1, 31);
				sizes[ns++] = len;
				for (int j = 0; j < len; j++)
					toks[nt++] = (uint16_t)(j && mt_double(&g) < 0.33 ? 25 + mt_randint(&g, 0, 10)
										: 5 + mt_randint(&g, 0, 20));
			}
			doc_idx[d + 1] = ns;
		}
	}
	char *prefix = make_dataset("sent", sizes, ns, toks, doc_idx, NDOC + 1);

	T_CASE("bert_samples_are_well_formed") {
		struct bertdata_config c;
		struct bertdata b;
		struct bert_sample s;
		int random = 0, bad = 0, masked_any = 0, piece_masked_alone = 0;
		bertdata_config_default(&c, BERTDATA_BERT);
		c.split = "1";
		c.num_samples = 200;
		c.seq_length = 40;
		T_ASSERT(bertdata_open(&b, prefix, &c, &v, err, sizeof err) == 0);
		T_ASSERT(b.n >= 200 && bert_sample_alloc(&b, &s) == 0);
		/* 1 / arange(1, 4) normalised twice, bit for bit as numpy prints it */
		T_ASSERT(b.pvals[0] == 0x1.1745d1745d174p-1 && b.pvals[1] == 0x1.1745d1745d174p-2 &&
			 b.pvals[2] == 0x1.745d1745d1745p-3);
		for (int64_t i = 0; i < b.n && !bad; i++) {
			int64_t f, e;
			int32_t target, nmask = 0, seps = 0;
			bertdata_map_row(&b.map, i, &f, &e, &target);
			if (bertdata_bert_get(&b, i, &s, err, sizeof err) < 0) {
				bad = 1;
				break;
			}
			random += s.is_random;
			bad |= s.tokens[0] != v.cls || s.n_tokens > target + 3 || s.n_tokens < 4;
			for (int k = 0; k < s.len; k++) {
				bad |= s.padding_mask[k] != (k < s.n_tokens);
				bad |= (s.labels[k] != -1) != s.loss_mask[k];
				nmask += s.loss_mask[k];
				if (k < s.n_tokens && s.labels[k] == -1 && s.tokens[k] == v.sep)
					bad |= s.types[k] != (seps++ ? 1 : 0);
				if (k >= s.n_tokens)
					bad |= s.tokens[k] != v.pad || s.types[k] != v.pad;
				/* whole words: a masked "##" piece has its word's start masked too */
				if (s.loss_mask[k] && k > 0 && v.cont[s.labels[k]] && !s.loss_mask[k - 1] &&
				    s.tokens[k - 1] != v.sep && s.tokens[k - 1] != v.cls)
					piece_masked_alone = 1;
			}
			bad |= seps != 2;  /* the binary head: two segments */
			bad |= nmask > (int32_t)fmax(1, nearbyint(s.n_tokens * 0.15));
			masked_any |= nmask > 0;
		}
		T_ASSERT(!bad);
		T_ASSERT(!piece_masked_alone);
		T_ASSERT(masked_any);
		/* the sentence order is swapped about half the time */
		T_ASSERT(random > b.n / 4 && random < 3 * b.n / 4);
		bert_sample_free(&s);
		bertdata_close(&b);
	}
	T_CASE("t5_samples_are_well_formed") {
		struct bertdata_config c;
		struct bertdata b;
		struct t5_sample s;
		int bad = 0;
		bertdata_config_default(&c, BERTDATA_T5);
		c.split = "1";
		c.num_samples = 100;
		c.seq_length = 40;
		c.dec_seq_length = 20;
		T_ASSERT(bertdata_open(&b, prefix, &c, &v, err, sizeof err) == 0);
		T_ASSERT(t5_sample_alloc(&b, &s) == 0);
		for (int64_t i = 0; i < b.n && !bad; i++) {
			if (bertdata_t5_get(&b, i, &s, err, sizeof err) < 0) {
				printf("# %s\n", err);
				bad = 1;
				break;
			}
			bad |= s.text_dec[0] != v.bos || s.labels[s.n_dec - 1] != v.eos;
			for (int k = 0; k + 1 < s.n_dec; k++)
				bad |= s.labels[k] != s.text_dec[k + 1];
			for (int k = 0; k < s.dec_len; k++)
				bad |= s.loss_mask[k] != (k < s.n_dec) || (k >= s.n_dec && s.labels[k] != -1);
			/* each sentinel once in the encoder and once in the decoder, in order */
			int next = 0;
			for (int k = 0; k < s.n_enc; k++)
				if (s.text_enc[k] >= v.extra[0] && s.text_enc[k] <= v.extra[3])
					bad |= s.text_enc[k] != v.extra[next++];
			for (int k = 0, d = 0; k < s.n_dec; k++)
				if (s.text_dec[k] >= v.extra[0] && s.text_dec[k] <= v.extra[3])
					bad |= s.text_dec[k] != v.extra[d++];
			bad |= t5_dec_mask(&s, 0, 1) != 0 || t5_dec_mask(&s, 1, 0) != (s.n_dec > 1);
		}
		T_ASSERT(!bad);
		t5_sample_free(&s);
		bertdata_close(&b);
	}
	T_CASE("t5_refuses_more_spans_than_sentinels_and_a_short_decoder") {
		struct bertdata_vocab v1;
		struct bertdata_config c;
		struct bertdata b;
		struct t5_sample s;
		int more = 0, shorter = 0;
		T_ASSERT(bertdata_vocab_load(&v1, vpath, 1, err, sizeof err) == 0);
		bertdata_config_default(&c, BERTDATA_T5);
		c.split = "1";
		c.num_samples = 50;
		c.seq_length = 40;
		c.dec_seq_length = 4;
		c.mask_prob = 0.5;
		T_ASSERT(bertdata_open(&b, prefix, &c, &v1, err, sizeof err) == 0);
		T_ASSERT(t5_sample_alloc(&b, &s) == 0);
		for (int64_t i = 0; i < b.n; i++)
			if (bertdata_t5_get(&b, i, &s, err, sizeof err) < 0) {
				more |= strstr(err, "sentinels") != NULL;
				shorter |= strstr(err, "decoder tokens") != NULL;
			}
		T_ASSERT(more);
		t5_sample_free(&s);
		bertdata_close(&b);
		bertdata_vocab_free(&v1);
		c.dec_seq_length = 4;
		T_ASSERT(bertdata_open(&b, prefix, &c, &v, err, sizeof err) == 0);
		T_ASSERT(t5_sample_alloc(&b, &s) == 0);
		for (int64_t i = 0; i < b.n; i++)
			if (bertdata_t5_get(&b, i, &s, err, sizeof err) < 0)
				shorter |= strstr(err, "decoder tokens") != NULL;
		T_ASSERT(shorter);
		t5_sample_free(&s);
		bertdata_close(&b);
	}
	T_CASE("t5_seed_past_2_32_is_refused_as_numpy_does") {
		struct bertdata_config c;
		struct bertdata b;
		struct t5_sample s;
		bertdata_config_default(&c, BERTDATA_T5);
		c.split = "1";
		c.num_samples = 10;
		c.seq_length = 40;
		c.dec_seq_length = 30;
		c.seed = INT32_MAX - 1;
		T_ASSERT(bertdata_open(&b, prefix, &c, &v, err, sizeof err) == 0);
		T_ASSERT(t5_sample_alloc(&b, &s) == 0);
		T_ASSERT(bertdata_t5_get(&b, 0, &s, err, sizeof err) == 0);  /* 2^31 - 2 */
		T_ASSERT(bertdata_t5_get(&b, b.n, &s, err, sizeof err) == -1);
		b.n = (int64_t)1 << 33;  /* as if the mapping were that long: refused before it is read */
		T_ASSERT(bertdata_t5_get(&b, 3000000000LL, &s, err, sizeof err) == -1);
		T_ASSERT(strstr(err, "numpy") != NULL);
		t5_sample_free(&s);
		bertdata_close(&b);
	}
	T_CASE("bert_token_outside_the_vocabulary_names_the_sample") {
		struct bertdata_vocab small;
		struct bertdata_config c;
		struct bertdata b;
		struct bert_sample s;
		char *p = make_vocab("small.txt", "");
		FILE *f = fopen(p, "w");
		fputs("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nw0\n", f);  /* ids 0-5, data goes to 34 */
		fclose(f);
		T_ASSERT(bertdata_vocab_load(&small, p, 0, err, sizeof err) == 0);
		bertdata_config_default(&c, BERTDATA_BERT);
		c.split = "1";
		c.num_samples = 5;
		c.seq_length = 40;
		T_ASSERT(bertdata_open(&b, prefix, &c, &small, err, sizeof err) == 0);
		T_ASSERT(bert_sample_alloc(&b, &s) == 0);
		T_ASSERT(bertdata_bert_get(&b, 0, &s, err, sizeof err) == -1);
		T_ASSERT(strstr(err, "sample 0") && strstr(err, "not in the vocabulary"));
		bert_sample_free(&s);
		bertdata_close(&b);
		bertdata_vocab_free(&small);
		free(p);
	}
	T_CASE("open_refuses_bad_settings_and_non_sentence_data") {
		struct bertdata_config c;
		struct bertdata b;
		bertdata_config_default(&c, BERTDATA_BERT);
		c.num_samples = 10;
		c.seq_length = 4;  /* leaves 1 token */
		T_ASSERT(bertdata_open(&b, prefix, &c, &v, err, sizeof err) == -1 &&
			 strstr(err, "--seq-length 4"));
		c.seq_length = 40;
		c.split = "100,0,0";
		c.which = 2;
		T_ASSERT(bertdata_open(&b, prefix, &c, &v, err, sizeof err) == -1 &&
			 strstr(err, "test split"));
		c.split = "a,b";
		c.which = 0;
		T_ASSERT(bertdata_open(&b, prefix, &c, &v, err, sizeof err) == -1 &&
			 strstr(err, "--split"));
		c.split = "1";
		T_ASSERT(bertdata_open(&b, "/nonexistent/x", &c, &v, err, sizeof err) == -1 &&
			 strstr(err, "/nonexistent/x.idx"));
		/* doc_idx that does not end at the number of sentences (lib/idx.c's check) */
		int64_t wrong[3] = {0, 3, 5};
		char *p = make_dataset("wrong", sizes, 10, toks, wrong, 3);
		T_ASSERT(bertdata_open(&b, p, &c, &v, err, sizeof err) == -1 &&
			 strstr(err, "wrong.idx: doc_idx[2] (the last) = 5, expected N = 10"));
		free(p);
		/* T5 without sentinels */
		struct bertdata_vocab v0;
		T_ASSERT(bertdata_vocab_load(&v0, vpath, 0, err, sizeof err) == 0);
		bertdata_config_default(&c, BERTDATA_T5);
		c.split = "1";
		c.num_samples = 10;
		c.seq_length = 40;
		c.dec_seq_length = 20;
		T_ASSERT(bertdata_open(&b, prefix, &c, &v0, err, sizeof err) == -1 &&
			 strstr(err, "--vocab-extra-ids"));
		bertdata_vocab_free(&v0);
	}
	T_CASE("gpt_style_data_gives_the_binary_head_no_sample") {
		/* one sentence per document, as a GPT dataset: doc_idx 0..n */
		int64_t each[11];
		struct bertdata_config c;
		struct bertdata b;
		for (int i = 0; i <= 10; i++)
			each[i] = i;
		char *p = make_dataset("gpt", sizes, 10, toks, each, 11);
		bertdata_config_default(&c, BERTDATA_BERT);
		c.split = "1";
		c.num_samples = 10;
		c.seq_length = 40;
		T_ASSERT(bertdata_open(&b, p, &c, &v, err, sizeof err) == -1 && strstr(err, "no sample"));
		c.binary_head = 0;  /* without it, each document is a sample */
		T_ASSERT(bertdata_open(&b, p, &c, &v, err, sizeof err) == 0 && b.n == 10);
		bertdata_close(&b);
		free(p);
	}

	bertdata_vocab_free(&v);
	free(vpath);
	free(prefix);
	{
		char cmd[128];
		snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
		if (system(cmd) != 0)
			printf("# could not remove %s\n", tmpdir);
	}
	T_DONE();
}
