/* train_gptdata.c - Megatron's GPT sample order (src/train/data/gptdata.c, mt19937.c).
 *
 * The check values are numpy's own (RandomState outputs, permutations, randint above 2^32) and
 * arrays printed by tests/ref/megatron-index.py, the numpy port of Megatron-DeepSpeed's
 * _build_index_mappings, for a ten-document toy dataset (TOY below, documents [2, 9), seq 4,
 * seed 1234).  With GPTDATA_DUMP=1 the program instead prints what the reference prints, for
 * tests/cli/train-gptdata.sh to compare on Megatron's real data:
 *
 *   GPTDATA_DUMP=1 train_gptdata index PREFIX SPLIT WHICH NUM_SAMPLES SEQ SEED [CACHE_DIR]
 *   GPTDATA_DUMP=1 train_gptdata blend SPLIT WHICH NUM_SAMPLES SEQ SEED W1 PREFIX1 W2 PREFIX2 ...
 *   GPTDATA_DUMP=1 train_gptdata blend-only SIZE W1 W2 ...
 *
 * (with CACHE_DIR the index goes through the cache, whose verdict goes to stderr). */
#include "t.h"
#include "train/data/gptdata.h"
#include "mt19937.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

/* --- the dump driver ----------------------------------------------------------------------- */

static void dump_line(const char *name, int64_t n, int64_t (*at)(const void *, int64_t),
		      const void *ctx)
{
	printf("%s %lld:", name, (long long)n);
	for (int64_t i = 0; i < n; i++)
		printf(" %lld", (long long)at(ctx, i));
	putchar('\n');
}

static int64_t at_i32(const void *p, int64_t i) { return ((const int32_t *)p)[i]; }
static int64_t at_u8(const void *p, int64_t i) { return ((const uint8_t *)p)[i]; }
static int64_t at_i64(const void *p, int64_t i) { return ((const int64_t *)p)[i]; }
static int64_t at_shuffle(const void *p, int64_t i)
{
	return gptdata_shuffle_at(p, i);
}

static void dump_tokens(const char *what, int64_t i, const int32_t *t, int64_t n)
{
	char name[64];
	snprintf(name, sizeof name, "%s %lld", what, (long long)i);
	dump_line(name, n, at_i32, t);
}

/* the samples the reference prints: every n/40th and the last */
static int64_t dump_step(int64_t n)
{
	return n / 40 > 1 ? n / 40 : 1;
}

static void dump_index(const struct gptdata_ds *ds, const struct gptdata_index *x)
{
	int32_t *tok = malloc(((size_t)x->key.seq_length + 1) * sizeof *tok);
	char err[512];

	printf("epochs %d separate %d tokens_per_epoch %lld ns %lld\n", x->epochs,
	       x->separate_last_epoch, (long long)x->tokens_per_epoch, (long long)x->ns);
	dump_line("doc_idx", x->ndoc, at_i32, x->doc_idx);
	dump_line("sample_idx", 2 * (x->ns + 1), at_i32, x->sample_idx);
	dump_line("shuffle_idx", x->ns, at_shuffle, x);
	for (int64_t i = 0; i < x->ns; i += dump_step(x->ns)) {
		if (gptdata_sample(ds, x, i, tok, err, sizeof err) < 0)
			printf("error %s\n", err);
		dump_tokens("sample", i, tok, x->key.seq_length + 1);
		if (i + dump_step(x->ns) >= x->ns && i != x->ns - 1)
			i = x->ns - 1 - dump_step(x->ns);
	}
	free(tok);
}

static int dump_open(struct gptdata_ds *ds, const char *prefix)
{
	char err[512];
	if (gptdata_open(ds, prefix, err, sizeof err) < 0) {
		fprintf(stderr, "train_gptdata: %s\n", err);
		return -1;
	}
	return 0;
}

static int dump_main(int argc, char **argv)
{
	char err[1024];

	if (argc >= 8 && !strcmp(argv[1], "index")) {
		struct gptdata_ds ds;
		struct gptdata_index x;
		int64_t s[4];
		int which = atoi(argv[4]);
		if (dump_open(&ds, argv[2]) < 0)
			return 3;
		if (gptdata_split(argv[3], ds.n, s, err, sizeof err) < 0) {
			fprintf(stderr, "train_gptdata: %s\n", err);
			return 2;
		}
		printf("split %lld %lld %lld %lld\n", (long long)s[0], (long long)s[1],
		       (long long)s[2], (long long)s[3]);
		struct gptdata_key k = {s[which], s[which + 1], atoll(argv[5]), atoi(argv[6]),
					(uint32_t)strtoul(argv[7], NULL, 10)};
		if (argc >= 9) {
			if (gptdata_index_get(&x, &ds, &k, argv[8], err, sizeof err) < 0) {
				fprintf(stderr, "train_gptdata: %s\n", err);
				return 2;
			}
			fprintf(stderr, "cache: %s%s%s\n", x.cache == GPTDATA_CACHE_HIT ? "hit" :
				x.cache == GPTDATA_BUILT ? "built" : "unsaved", *err ? ": " : "", err);
		} else if (gptdata_build(&x, ds.sizes, &k, err, sizeof err) < 0) {
			fprintf(stderr, "train_gptdata: %s\n", err);
			return 2;
		}
		dump_index(&ds, &x);
		gptdata_index_free(&x);
		gptdata_close(&ds);
		return 0;
	}
	if (argc >= 9 && !strcmp(argv[1], "blend") && argc % 2 == 1) {
		int n = (argc - 7) / 2, which = atoi(argv[3]);
		int64_t ns = atoll(argv[4]), size = 0;
		double w[256], wn[256];
		struct gptdata_ds ds[256];
		struct gptdata_index x[256];
		int32_t *tok;
		for (int i = 0; i < n; i++)
			w[i] = strtod(argv[7 + 2 * i], NULL);
		if (gptdata_blend_weights(w, n, wn, err, sizeof err) < 0) {
			fprintf(stderr, "train_gptdata: %s\n", err);
			return 2;
		}
		for (int i = 0; i < n; i++) {
			int64_t s[4];
			if (dump_open(&ds[i], argv[8 + 2 * i]) < 0)
				return 3;
			if (gptdata_split(argv[2], ds[i].n, s, err, sizeof err) < 0)
				return 2;
			struct gptdata_key k = {s[which], s[which + 1], gptdata_blend_samples(ns, wn[i]),
						atoi(argv[5]), (uint32_t)strtoul(argv[6], NULL, 10)};
			printf("dataset %d weight %.17g num_samples %lld split %lld %lld\n", i, wn[i],
			       (long long)k.num_samples, (long long)k.start, (long long)k.end);
			if (gptdata_build(&x[i], ds[i].sizes, &k, err, sizeof err) < 0) {
				fprintf(stderr, "train_gptdata: %s\n", err);
				return 2;
			}
			dump_index(&ds[i], &x[i]);
			size += x[i].ns;
		}
		uint8_t *di = malloc((size_t)size + 1);
		int64_t *dsi = malloc(((size_t)size + 1) * sizeof *dsi);
		double wb[256];
		gptdata_blend_normalise(wn, n, wb);
		printf("blend size %lld weights", (long long)size);
		for (int i = 0; i < n; i++)
			printf(" %.17g", wb[i]);
		putchar('\n');
		if (gptdata_blend(wn, n, size, di, dsi) < 0)
			return 2;
		dump_line("dataset_index", size, at_u8, di);
		dump_line("dataset_sample_index", size, at_i64, dsi);
		/* the first NUM_SAMPLES, which training reads: past them a dataset can run out */
		int64_t used = ns < size ? ns : size;
		tok = malloc(((size_t)atoi(argv[5]) + 1) * sizeof *tok);
		for (int64_t i = 0; i < used; i += dump_step(used)) {
			if (gptdata_sample(&ds[di[i]], &x[di[i]], dsi[i], tok, err, sizeof err) < 0)
				printf("error %s\n", err);
			dump_tokens("blended", i, tok, atoi(argv[5]) + 1);
			if (i + dump_step(used) >= used && i != used - 1)
				i = used - 1 - dump_step(used);
		}
		for (int i = 0; i < n; i++) {
			gptdata_index_free(&x[i]);
			gptdata_close(&ds[i]);
		}
		free(tok);
		free(di);
		free(dsi);
		return 0;
	}
	if (argc >= 4 && !strcmp(argv[1], "blend-only")) {
		int n = argc - 3;
		int64_t size = atoll(argv[2]);
		double w[256], wb[256];
		uint8_t *di = malloc((size_t)size + 1);
		int64_t *dsi = malloc(((size_t)size + 1) * sizeof *dsi);
		for (int i = 0; i < n && i < 256; i++)
			w[i] = strtod(argv[3 + i], NULL);
		if (n > 254 || gptdata_blend_normalise(w, n, wb) < 0 || gptdata_blend(w, n, size, di, dsi) < 0)
			return 2;
		printf("weights");
		for (int i = 0; i < n; i++)
			printf(" %.17g", wb[i]);
		putchar('\n');
		dump_line("dataset_index", size, at_u8, di);
		dump_line("dataset_sample_index", size, at_i64, dsi);
		free(di);
		free(dsi);
		return 0;
	}
	fprintf(stderr, "usage: GPTDATA_DUMP=1 train_gptdata index|blend|blend-only ...\n");
	return 2;
}

/* --- unit cases ------------------------------------------------------------------------------ */

/* TOY: ten sequences; the split [2, 9) has 8+1+0+7+4+6+2 = 28 tokens (one empty sequence), so
 * with seq 4 an epoch is (28-1)/4 = 6 samples and int(0.95 * 6) = 5 */
static const int32_t TOY[10] = {5, 3, 8, 1, 0, 7, 4, 6, 2, 9};

static struct gptdata_key toy_key(int64_t num_samples)
{
	struct gptdata_key k = {2, 9, num_samples, 4, 1234};
	return k;
}

static int same_i32(const int32_t *a, const int32_t *b, int64_t n)
{
	return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

static int same_shuffle(const struct gptdata_index *x, const int64_t *want, int64_t n)
{
	if (x->ns != n)
		return 0;
	for (int64_t i = 0; i < n; i++)
		if (gptdata_shuffle_at(x, i) != want[i])
			return 0;
	return 1;
}

/* an in-memory dataset over TOY whose token at (sequence s, offset o) is 100*s + o */
struct toy {
	struct gptdata_ds ds;
	unsigned char bin[2 * 64 * 4], ptr[8 * 10];
};

static void toy_init(struct toy *t, int dtype)
{
	uint64_t off = 0;
	memset(t, 0, sizeof *t);
	t->ds.dtype = dtype;
	t->ds.itemsize = dtype == 8 ? 2 : 4;
	t->ds.n = 10;
	t->ds.sizes = (int32_t *)TOY;
	t->ds.pointers = t->ptr;
	t->ds.bin = t->bin;
	for (int s = 0; s < 10; s++) {
		memcpy(t->ptr + 8 * s, &off, 8);
		for (int o = 0; o < TOY[s]; o++) {
			uint32_t v = (uint32_t)(100 * s + o);
			memcpy(t->bin + off, &v, t->ds.itemsize);
			off += t->ds.itemsize;
		}
	}
	t->ds.bin_len = off;
}

/* writes DIR/NAME.{bin,idx} (uint16) for TOY */
static void toy_write(const char *dir, const char *name)
{
	char path[512];
	struct toy t;
	unsigned char hdr[34];
	uint64_t v;
	FILE *f;

	toy_init(&t, 8);
	snprintf(path, sizeof path, "%s/%s.bin", dir, name);
	f = fopen(path, "wb");
	fwrite(t.bin, 1, t.ds.bin_len, f);
	fclose(f);
	memcpy(hdr, "MMIDIDX\0\0", 9);
	v = 1;
	memcpy(hdr + 9, &v, 8);
	hdr[17] = 8;
	v = 10;
	memcpy(hdr + 18, &v, 8);
	v = 11;
	memcpy(hdr + 26, &v, 8);
	snprintf(path, sizeof path, "%s/%s.idx", dir, name);
	f = fopen(path, "wb");
	fwrite(hdr, 1, 34, f);
	fwrite(TOY, 4, 10, f);
	fwrite(t.ptr, 8, 10, f);
	for (v = 0; v <= 10; v++)
		fwrite(&v, 8, 1, f);
	fclose(f);
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	if (d)
		closedir(d);
	return n;
}

static void flip_byte(const char *path, long at)
{
	int fd = open(path, O_RDWR);
	unsigned char c;
	if (pread(fd, &c, 1, at) == 1) {
		c ^= 0x40;
		if (pwrite(fd, &c, 1, at) != 1)
			abort();
	}
	close(fd);
}

static void rm_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[512];
	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

int main(int argc, char **argv)
{
	char err[1024];

	if (getenv("GPTDATA_DUMP"))
		return dump_main(argc, argv);

	/* --- the generator ------------------------------------------------------------------ */
	T_CASE("mt_seed_1234_first_outputs_match_numpy") {
		struct mt19937 m;
		mt_seed(&m, 1234);
		T_ASSERT(mt_next32(&m) == 822569775U);
		T_ASSERT(mt_next32(&m) == 2137449171U);
		T_ASSERT(mt_next32(&m) == 2671936806U);
		for (int i = 3; i < 700; i++)  /* across the first regeneration */
			mt_next32(&m);
		mt_seed(&m, 1234);
		T_ASSERT(mt_next32(&m) == 822569775U);
	}
	T_CASE("mt_permutation_matches_numpy_seeds_0_and_42") {
		static const int32_t p0[10] = {2, 8, 4, 9, 1, 6, 7, 3, 0, 5};
		static const int32_t p42[10] = {8, 1, 5, 0, 7, 2, 9, 4, 3, 6};
		int32_t a[10];
		struct mt19937 m;
		for (int i = 0; i < 10; i++)
			a[i] = i;
		mt_seed(&m, 0);
		mt_shuffle_i32(&m, a, 10);
		T_ASSERT(same_i32(a, p0, 10));
		for (int i = 0; i < 10; i++)
			a[i] = i;
		mt_seed(&m, 42);
		mt_shuffle_i32(&m, a, 10);
		T_ASSERT(same_i32(a, p42, 10));
	}
	T_CASE("mt_interval_above_2_32_takes_two_words_high_first_as_numpy_randint") {
		/* RandomState(7).randint(0, 12884901894, dtype=np.int64), five times */
		static const uint64_t want[5] = {5664942582ULL, 1322904761ULL, 9723251223ULL,
						 372560217ULL, 10391124522ULL};
		struct mt19937 m;
		mt_seed(&m, 7);
		for (int i = 0; i < 5; i++)
			T_ASSERT(mt_interval(&m, 12884901893ULL) == want[i]);
		/* RandomState(7).randint(0, 1000000008): the 32-bit path */
		mt_seed(&m, 7);
		T_ASSERT(mt_interval(&m, 1000000007) == 327741615);
		T_ASSERT(mt_interval(&m, 1000000007) == 976413892);
	}
	T_CASE("mt_interval_of_zero_draws_nothing") {
		struct mt19937 m;
		mt_seed(&m, 1234);
		T_ASSERT(mt_interval(&m, 0) == 0);
		T_ASSERT(mt_next32(&m) == 822569775U);
	}
	T_CASE("mt_shuffles_of_every_width_draw_alike") {
		int32_t a[1000];
		uint32_t b[1000];
		int64_t c[1000];
		struct mt19937 m;
		int ok = 1;
		for (int i = 0; i < 1000; i++)
			a[i] = i, b[i] = (uint32_t)i, c[i] = i;
		mt_seed(&m, 5);
		mt_shuffle_i32(&m, a, 1000);
		mt_seed(&m, 5);
		mt_shuffle_u32(&m, b, 1000);
		mt_seed(&m, 5);
		mt_shuffle_i64(&m, c, 1000);
		for (int i = 0; i < 1000; i++)
			ok &= (uint32_t)a[i] == b[i] && a[i] == c[i];
		T_ASSERT(ok);
	}

	/* --- split --------------------------------------------------------------------------- */
	T_CASE("split_rounds_half_to_even_and_corrects_the_end_as_megatron") {
		static const struct { const char *s; int64_t n, idx[4]; } t[] = {
			{"949,50,1", 1000, {0, 949, 999, 1000}},
			{"1,1,1", 10, {0, 4, 7, 10}},        /* 3+3+3 = 9: every boundary moves up */
			{"1,1", 1, {0, 1, 1, 1}},            /* round(0.5) = 0 twice, then corrected */
			{"1,1", 3, {0, 1, 3, 3}},            /* round(1.5) = 2 twice: one too many */
			{"1,1,2", 2, {0, 1, 1, 2}},
			{"2.5,2.5,5", 3, {0, 0, 1, 3}},
			{"98/2", 1000, {0, 980, 1000, 1000}},
			{"100", 7, {0, 7, 7, 7}},
			{" 969, 30, 1 ", 17, {0, 16, 17, 17}},
			{"1,1,1,5", 9, {0, 3, 6, 9}},        /* a fourth field is read, then dropped */
			{"0,1,0", 5, {0, 0, 5, 5}},
		};
		for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
			int64_t idx[4];
			T_ASSERT(gptdata_split(t[i].s, t[i].n, idx, err, sizeof err) == 0);
			T_ASSERT(memcmp(idx, t[i].idx, sizeof idx) == 0);
		}
	}
	T_CASE("split_refuses_what_python_float_or_megatron_refuses") {
		static const char *bad[] = {"", "1,,1", "a", "1,b", "0,0,0", "inf,1", "nan", "0x10",
					    "-1,2", "1,2,"};
		for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
			int64_t idx[4];
			err[0] = 0;
			T_ASSERT(gptdata_split(bad[i], 100, idx, err, sizeof err) < 0);
			T_ASSERT(err[0] != 0);
		}
	}

	/* --- index: arrays printed by tests/ref/megatron-index.py for TOY ------------------------ */
	T_CASE("one_epoch_matches_numpy") {
		static const int32_t doc[] = {4, 3, 8, 2, 6, 7, 5};
		static const int32_t smp[] = {0, 0, 3, 1, 3, 5, 4, 1, 5, 1, 5, 5, 6, 3};
		static const int64_t shf[] = {0, 4, 3, 2, 5, 1};
		struct gptdata_key k = toy_key(5);
		struct gptdata_index x;
		T_ASSERT(gptdata_build(&x, TOY, &k, err, sizeof err) == 0);
		T_ASSERT(x.epochs == 1 && !x.separate_last_epoch && x.tokens_per_epoch == 28);
		T_ASSERT(x.ns == 6 && x.ndoc == 7 && x.shuffle_first == 6 && !x.shuffle_wide);
		T_ASSERT(same_i32(x.doc_idx, doc, 7));
		T_ASSERT(same_i32(x.sample_idx, smp, 14));
		T_ASSERT(same_shuffle(&x, shf, 6));
		gptdata_index_free(&x);
	}
	T_CASE("three_epochs_with_a_full_last_epoch_shuffle_as_one_like_numpy") {
		/* 18 samples: 13 from two epochs, 5 from the third, not < int(0.95 * 6) */
		static const int32_t doc[] = {5, 8, 4, 4, 2, 7, 6, 2, 3, 6, 5, 6, 5, 4, 2, 3, 8, 7, 8,
					      7, 3};
		static const int32_t smp[] = {0, 0, 0, 4, 1, 1, 4, 3, 4, 7, 5, 3, 6, 1, 7, 1, 7, 5, 9,
					      0, 10, 0, 10, 4, 11, 1, 12, 1, 12, 5, 14, 2, 14, 6, 16,
					      1, 17, 3, 18, 1, 19, 3};
		static const int64_t shf[] = {8, 19, 13, 1, 4, 17, 14, 11, 9, 0, 7, 3, 10, 6, 2, 5,
					      12, 16, 18, 15};
		struct gptdata_key k = toy_key(18);
		struct gptdata_index x;
		T_ASSERT(gptdata_build(&x, TOY, &k, err, sizeof err) == 0);
		T_ASSERT(x.epochs == 3 && !x.separate_last_epoch && x.ns == 20 && x.ndoc == 21);
		T_ASSERT(same_i32(x.doc_idx, doc, 21));
		T_ASSERT(same_i32(x.sample_idx, smp, 42));
		T_ASSERT(same_shuffle(&x, shf, 20));
		gptdata_index_free(&x);
	}
	T_CASE("three_epochs_with_a_short_last_epoch_shuffle_it_apart_like_numpy") {
		/* 15 samples: 2 from the third epoch, < 5: doc_idx = shuffle(2 epochs) ++
		 * shuffle(1 epoch), shuffle_idx = shuffle(0..12) ++ shuffle(13..19) */
		static const int32_t doc[] = {7, 5, 2, 6, 8, 4, 4, 2, 3, 3, 6, 7, 8, 5, 7, 3, 5, 6, 2,
					      8, 4};
		static const int32_t smp[] = {0, 0, 0, 4, 1, 2, 1, 6, 2, 3, 2, 7, 3, 3, 7, 1, 7, 5, 9,
					      0, 10, 3, 11, 3, 12, 1, 13, 3, 14, 0, 14, 4, 16, 1, 16,
					      5, 17, 2, 18, 2, 18, 6};
		static const int64_t shf[] = {8, 1, 7, 10, 11, 5, 4, 3, 12, 2, 6, 9, 0, 15, 17, 18, 19,
					      14, 13, 16};
		struct gptdata_key k = toy_key(15);
		struct gptdata_index x;
		T_ASSERT(gptdata_build(&x, TOY, &k, err, sizeof err) == 0);
		T_ASSERT(x.epochs == 3 && x.separate_last_epoch && x.ns == 20 && x.shuffle_first == 13);
		T_ASSERT(same_i32(x.doc_idx, doc, 21));
		T_ASSERT(same_i32(x.sample_idx, smp, 42));
		T_ASSERT(same_shuffle(&x, shf, 20));
		gptdata_index_free(&x);
	}
	T_CASE("two_epochs_with_a_short_last_epoch_match_numpy") {
		static const int32_t doc[] = {4, 3, 8, 2, 6, 7, 5, 7, 2, 5, 6, 4, 8, 3};
		static const int64_t shf[] = {1, 0, 3, 5, 2, 4, 9, 11, 8, 7, 12, 10, 6};
		struct gptdata_key k = toy_key(7);
		struct gptdata_index x;
		T_ASSERT(gptdata_build(&x, TOY, &k, err, sizeof err) == 0);
		T_ASSERT(x.epochs == 2 && x.separate_last_epoch && x.ns == 13 && x.shuffle_first == 6);
		/* the first epoch alone is shuffled as the one-epoch index: same draws so far */
		T_ASSERT(same_i32(x.doc_idx, doc, 14));
		T_ASSERT(same_shuffle(&x, shf, 13));
		gptdata_index_free(&x);
	}
	T_CASE("a_last_epoch_one_sample_too_long_is_refused_as_megatron_asserts") {
		/* 13 samples: two epochs give 13, the first gives 6, and 7 > 6 per epoch */
		struct gptdata_key k = toy_key(13);
		struct gptdata_index x;
		T_ASSERT(gptdata_build(&x, TOY, &k, err, sizeof err) < 0);
		T_ASSERT(strstr(err, "Megatron refuses this too") != NULL);
		k.num_samples = 12;
		T_ASSERT(gptdata_build(&x, TOY, &k, err, sizeof err) == 0);
		gptdata_index_free(&x);
	}
	T_CASE("zero_samples_still_build_one_epoch") {
		struct gptdata_key k = toy_key(0);
		struct gptdata_index x;
		T_ASSERT(gptdata_build(&x, TOY, &k, err, sizeof err) == 0);
		T_ASSERT(x.epochs == 1 && x.ns == 6);
		gptdata_index_free(&x);
	}
	T_CASE("degenerate_keys_are_refused") {
		struct gptdata_index x;
		struct gptdata_key k = toy_key(5);
		k.end = k.start;
		T_ASSERT(gptdata_build(&x, TOY, &k, err, sizeof err) < 0);
		k = toy_key(5);
		k.seq_length = 1;
		T_ASSERT(gptdata_build(&x, TOY, &k, err, sizeof err) < 0);
		k = toy_key(5);
		k.start = 3, k.end = 5;  /* 1 + 0 tokens */
		T_ASSERT(gptdata_build(&x, TOY, &k, err, sizeof err) < 0);
		T_ASSERT(strstr(err, "a sample needs 2") != NULL);
		k = toy_key(-1);
		T_ASSERT(gptdata_build(&x, TOY, &k, err, sizeof err) < 0);
		k = toy_key(INT64_MAX / 2);
		T_ASSERT(gptdata_build(&x, TOY, &k, err, sizeof err) < 0);
	}

	/* --- samples ------------------------------------------------------------------------- */
	T_CASE("samples_are_seq_plus_one_tokens_in_doc_idx_order_overlapping_by_one") {
		struct toy t;
		struct gptdata_key k = toy_key(15);
		struct gptdata_index x;
		int32_t tok[20][5], want[5];
		toy_init(&t, 8);
		T_ASSERT(gptdata_build(&x, TOY, &k, err, sizeof err) == 0);
		for (int64_t i = 0; i < x.ns; i++) {
			int64_t j = gptdata_shuffle_at(&x, i), d = x.sample_idx[2 * j];
			int64_t o = x.sample_idx[2 * j + 1];
			T_ASSERT(gptdata_sample(&t.ds, &x, i, tok[j], err, sizeof err) == 0);
			/* walk the flattened doc_idx from the row's start: 5 tokens */
			for (int n = 0; n < 5; n++) {
				while (o >= TOY[x.doc_idx[d]])
					d++, o = 0;
				want[n] = 100 * x.doc_idx[d] + (int32_t)o++;
			}
			T_ASSERT(same_i32(tok[j], want, 5));
		}
		for (int64_t j = 0; j + 1 < x.ns; j++)
			T_ASSERT(tok[j][4] == tok[j + 1][0]);
		gptdata_index_free(&x);
	}
	T_CASE("first_sample_of_one_epoch_steps_over_an_empty_sequence") {
		/* one-epoch doc_idx 4 3 8 2 6 7 5 (sizes 0 1 2 8 4 6 7); row 0 starts at (0, 0):
		 * sequence 4 is empty, 3 gives 300, 8 gives 800 801, 2 gives 200 201 */
		static const int32_t want[5] = {300, 800, 801, 200, 201};
		struct toy t;
		struct gptdata_key k = toy_key(5);
		struct gptdata_index x;
		int32_t tok[5];
		toy_init(&t, 4);
		T_ASSERT(gptdata_build(&x, TOY, &k, err, sizeof err) == 0);
		T_ASSERT(gptdata_shuffle_at(&x, 0) == 0);
		T_ASSERT(gptdata_sample(&t.ds, &x, 0, tok, err, sizeof err) == 0);
		T_ASSERT(same_i32(tok, want, 5));
		T_ASSERT(gptdata_sample(&t.ds, &x, 6, tok, err, sizeof err) < 0);
		T_ASSERT(gptdata_sample(&t.ds, &x, -1, tok, err, sizeof err) < 0);
		gptdata_index_free(&x);
	}
	T_CASE("uint16_and_int32_data_give_the_same_samples") {
		struct toy a, b;
		struct gptdata_key k = toy_key(18);
		struct gptdata_index x;
		int32_t ta[5], tb[5];
		int ok = 1;
		toy_init(&a, 8);
		toy_init(&b, 4);
		T_ASSERT(gptdata_build(&x, TOY, &k, err, sizeof err) == 0);
		for (int64_t i = 0; i < x.ns; i++)
			ok &= gptdata_sample(&a.ds, &x, i, ta, err, sizeof err) == 0 &&
			      gptdata_sample(&b.ds, &x, i, tb, err, sizeof err) == 0 && same_i32(ta, tb, 5);
		T_ASSERT(ok);
		gptdata_index_free(&x);
	}
	T_CASE("an_index_of_other_data_is_refused_not_read_astray") {
		struct toy t;
		struct gptdata_key k = toy_key(5);
		struct gptdata_index x;
		int32_t tok[5];
		int32_t small[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
		toy_init(&t, 8);
		T_ASSERT(gptdata_build(&x, TOY, &k, err, sizeof err) == 0);
		t.ds.sizes = small;  /* the data shrank under the index */
		int bad = 0;
		for (int64_t i = 0; i < x.ns; i++)
			bad += gptdata_sample(&t.ds, &x, i, tok, err, sizeof err) < 0;
		T_ASSERT(bad > 0);
		T_ASSERT(strstr(err, "does not lie in the data") != NULL);
		gptdata_index_free(&x);
	}

	/* --- files and the cache ------------------------------------------------------------- */
	char tmpl[512];
	const char *tmp = getenv("LMTK_TMP") ? getenv("LMTK_TMP") : "/tmp";
	snprintf(tmpl, sizeof tmpl, "%s/train_gptdata.XXXXXX", tmp);
	char *dir = mkdtemp(tmpl);
	char prefix[600], cdir[700];
	snprintf(prefix, sizeof prefix, "%s/toy", dir);
	snprintf(cdir, sizeof cdir, "%s/none/such", dir);
	toy_write(dir, "toy");

	T_CASE("open_reads_megatron_files_and_the_cache_round_trips") {
		struct gptdata_ds ds;
		struct gptdata_key k = toy_key(15);
		struct gptdata_index built, a, b;
		T_ASSERT(gptdata_open(&ds, prefix, err, sizeof err) == 0);
		T_ASSERT(ds.n == 10 && ds.dtype == 8 && ds.sizes[2] == 8);
		T_ASSERT(gptdata_build(&built, ds.sizes, &k, err, sizeof err) == 0);
		T_ASSERT(gptdata_index_get(&a, &ds, &k, NULL, err, sizeof err) == 0);
		T_ASSERT(a.cache == GPTDATA_BUILT && strstr(err, "none yet"));
		T_ASSERT(gptdata_index_get(&b, &ds, &k, NULL, err, sizeof err) == 0);
		T_ASSERT(b.cache == GPTDATA_CACHE_HIT && b.map != NULL);
		T_ASSERT(b.ns == built.ns && b.ndoc == built.ndoc && b.epochs == 3);
		T_ASSERT(b.separate_last_epoch && b.shuffle_first == 13 && b.tokens_per_epoch == 28);
		T_ASSERT(same_i32(b.doc_idx, built.doc_idx, built.ndoc));
		T_ASSERT(same_i32(b.sample_idx, built.sample_idx, 2 * (built.ns + 1)));
		T_ASSERT(memcmp(b.shuffle_idx, built.shuffle_idx, (size_t)built.ns * 4) == 0);
		int32_t t1[5], t2[5];
		T_ASSERT(gptdata_sample(&ds, &b, 3, t1, err, sizeof err) == 0);
		T_ASSERT(gptdata_sample(&ds, &built, 3, t2, err, sizeof err) == 0 && same_i32(t1, t2, 5));
		T_ASSERT(count_entries(dir) == 3);  /* toy.bin, toy.idx, one .map, no temporaries */
		gptdata_index_free(&a);
		gptdata_index_free(&b);
		gptdata_index_free(&built);
		gptdata_close(&ds);
	}
	T_CASE("cache_is_named_by_every_key_value") {
		struct gptdata_key k = toy_key(15);
		char *p = gptdata_cache_path("/d/x_text_document", NULL, &k);
		T_STREQ(p, "/d/x_text_document_lmtk_indexmap_15ns_4sl_1234s_2-9.map");
		free(p);
		p = gptdata_cache_path("/d/x_text_document", "/c", &k);
		T_STREQ(p, "/c/x_text_document_lmtk_indexmap_15ns_4sl_1234s_2-9.map");
		free(p);
	}
	T_CASE("a_changed_bin_makes_the_cache_stale") {
		struct gptdata_ds ds;
		struct gptdata_key k = toy_key(15);
		struct gptdata_index x;
		char bin[700];
		struct timeval tv[2] = {{1000000000, 0}, {1000000000, 0}};
		snprintf(bin, sizeof bin, "%s.bin", prefix);
		utimes(bin, tv);
		T_ASSERT(gptdata_open(&ds, prefix, err, sizeof err) == 0);
		char *path = gptdata_cache_path(prefix, NULL, &k);
		T_ASSERT(gptdata_cache_load(&x, &ds, &k, path, err, sizeof err) == GPTDATA_CACHE_STALE);
		T_ASSERT(strstr(err, "changed since it was built") != NULL);
		T_ASSERT(gptdata_index_get(&x, &ds, &k, NULL, err, sizeof err) == 0);
		T_ASSERT(x.cache == GPTDATA_BUILT);
		gptdata_index_free(&x);
		T_ASSERT(gptdata_cache_load(&x, &ds, &k, path, err, sizeof err) == 0);
		gptdata_index_free(&x);
		free(path);
		gptdata_close(&ds);
	}
	T_CASE("a_flipped_byte_or_a_cut_makes_the_cache_corrupt_and_rebuilt") {
		struct gptdata_ds ds;
		struct gptdata_key k = toy_key(15);
		struct gptdata_index x;
		T_ASSERT(gptdata_open(&ds, prefix, err, sizeof err) == 0);
		char *path = gptdata_cache_path(prefix, NULL, &k);
		/* a byte of each array: doc_idx, sample_idx, shuffle_idx (at 128, 216, 384); the
		 * magic; the .idx mtime */
		long at[] = {130, 250, 400, 5, 60};
		for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
			flip_byte(path, at[i]);
			int rc = gptdata_cache_load(&x, &ds, &k, path, err, sizeof err);
			T_ASSERT(rc == GPTDATA_CACHE_CORRUPT || rc == GPTDATA_CACHE_STALE);
			T_ASSERT(gptdata_index_get(&x, &ds, &k, NULL, err, sizeof err) == 0);
			T_ASSERT(x.cache == GPTDATA_BUILT);
			gptdata_index_free(&x);
		}
		T_ASSERT(truncate(path, 300) == 0);
		T_ASSERT(gptdata_cache_load(&x, &ds, &k, path, err, sizeof err) == GPTDATA_CACHE_CORRUPT);
		T_ASSERT(strstr(err, "truncated") != NULL);
		T_ASSERT(gptdata_index_get(&x, &ds, &k, NULL, err, sizeof err) == 0);
		gptdata_index_free(&x);
		T_ASSERT(gptdata_cache_load(&x, &ds, &k, path, err, sizeof err) == 0);
		gptdata_index_free(&x);
		free(path);
		gptdata_close(&ds);
	}
	T_CASE("a_cache_of_another_key_is_stale") {
		struct gptdata_ds ds;
		struct gptdata_key k = toy_key(15), k2 = toy_key(16);
		struct gptdata_index x;
		T_ASSERT(gptdata_open(&ds, prefix, err, sizeof err) == 0);
		char *p = gptdata_cache_path(prefix, NULL, &k), *p2 = gptdata_cache_path(prefix, NULL, &k2);
		T_ASSERT(rename(p, p2) == 0);
		T_ASSERT(gptdata_cache_load(&x, &ds, &k2, p2, err, sizeof err) == GPTDATA_CACHE_STALE);
		T_ASSERT(gptdata_cache_load(&x, &ds, &k, p, err, sizeof err) == GPTDATA_CACHE_MISSING);
		unlink(p2);
		free(p);
		free(p2);
		gptdata_close(&ds);
	}
	T_CASE("an_unwritable_cache_dir_still_builds") {
		struct gptdata_ds ds;
		struct gptdata_key k = toy_key(15);
		struct gptdata_index x;
		T_ASSERT(gptdata_open(&ds, prefix, err, sizeof err) == 0);
		T_ASSERT(gptdata_index_get(&x, &ds, &k, cdir, err, sizeof err) == 0);
		T_ASSERT(x.cache == GPTDATA_BUILT_UNSAVED && strstr(err, "not saved") != NULL);
		T_ASSERT(x.ns == 20);
		gptdata_index_free(&x);
		k.end = 11;
		T_ASSERT(gptdata_index_get(&x, &ds, &k, NULL, err, sizeof err) < 0);
		gptdata_close(&ds);
	}
	T_CASE("open_refuses_a_bin_shorter_than_its_index") {
		struct gptdata_ds ds;
		char bin[700];
		snprintf(bin, sizeof bin, "%s.bin", prefix);
		T_ASSERT(truncate(bin, 50) == 0);  /* of 90 bytes */
		T_ASSERT(gptdata_open(&ds, prefix, err, sizeof err) == -2);
		T_ASSERT(strstr(err, ".bin: is 50 bytes, expected 90") && strstr(err, "truncated?"));
		snprintf(bin, sizeof bin, "%s/nothing", dir);
		T_ASSERT(gptdata_open(&ds, bin, err, sizeof err) == -1);
	}
	rm_dir(dir);

	/* --- blending ------------------------------------------------------------------------ */
	T_CASE("blend_follows_the_weights_and_the_first_dataset_wins_ties") {
		/* build_blending_indices in Python (tests/ref/megatron-index.py) */
		static const uint8_t d37[12] = {1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1};
		static const int64_t s37[12] = {0, 0, 1, 2, 1, 3, 4, 2, 5, 6, 3, 7};
		static const uint8_t d11[6] = {0, 1, 0, 1, 0, 1};
		static const int64_t s11[6] = {0, 0, 1, 1, 2, 2};
		static const uint8_t d123[12] = {2, 1, 0, 2, 1, 2, 0, 2, 1, 2, 1, 2};
		static const int64_t s123[12] = {0, 0, 0, 1, 1, 2, 1, 3, 2, 4, 3, 5};
		uint8_t di[12];
		int64_t si[12];
		double w37[2] = {0.3, 0.7}, w11[2] = {1, 1}, w123[3] = {1, 2, 3};
		T_ASSERT(gptdata_blend(w37, 2, 12, di, si) == 0);
		T_ASSERT(!memcmp(di, d37, 12) && !memcmp(si, s37, sizeof s37));
		T_ASSERT(gptdata_blend(w11, 2, 6, di, si) == 0);
		T_ASSERT(!memcmp(di, d11, 6) && !memcmp(si, s11, sizeof s11));
		T_ASSERT(gptdata_blend(w123, 3, 12, di, si) == 0);
		T_ASSERT(!memcmp(di, d123, 12) && !memcmp(si, s123, sizeof s123));
		T_ASSERT(gptdata_blend(w37, 0, 12, di, si) < 0);
		T_ASSERT(gptdata_blend(w37, 255, 12, di, si) < 0);
	}
	T_CASE("blend_renormalises_with_numpys_pairwise_sum") {
		/* ten weights whose np.sum (0x1.a53f7ced91688p+2) is one ulp above the sequential sum
		 * that analyze_data_prefix uses (0x1.a53f7ced91687p+2) */
		static const double w[10] = {0.632, 0.817, 0.566, 0.635, 0.812, 0.927, 0.913, 0.825,
					     0.094, 0.361};
		double pw[10], sw[10];
		T_ASSERT(gptdata_blend_normalise(w, 10, pw) == 0);
		T_ASSERT(gptdata_blend_weights(w, 10, sw, err, sizeof err) == 0);
		T_ASSERT(pw[0] == 0x1.894bb008b655bp-4 && sw[0] == 0x1.894bb008b655cp-4);
		T_ASSERT(pw[4] == 0x1.f94f6be44eb8ap-4 && sw[4] == 0x1.f94f6be44eb8cp-4);
		T_ASSERT(pw[9] == 0x1.c14d8df682872p-5 && sw[9] == 0x1.c14d8df682873p-5);
	}
	T_CASE("each_blended_dataset_builds_half_a_percent_more") {
		T_ASSERT(gptdata_blend_samples(1000, 0.3) == 302);   /* ceil(301.5) */
		T_ASSERT(gptdata_blend_samples(200, 0.5) == 101);    /* ceil(100.5) */
		T_ASSERT(gptdata_blend_samples(1000, 1.0) == 1005);
		double w[3] = {1, 0, 3}, out[3];
		T_ASSERT(gptdata_blend_weights(w, 3, out, err, sizeof err) == 0 && out[2] == 0.75);
		w[1] = -1;
		T_ASSERT(gptdata_blend_weights(w, 3, out, err, sizeof err) < 0);
	}
	T_DONE();
}