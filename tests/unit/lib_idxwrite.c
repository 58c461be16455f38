/* lib_idxwrite.c - the .bin/.idx writer and merge (src/lib/idxwrite.h): round trips through
 * lib/idx.h's reader, byte layout, refusals. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "t.h"
#include "idxwrite.h"

#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64] = "/tmp/mkindex-idxwrite.XXXXXX";

#include "t_idx.h"

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

static int collect_ids(void *ctx, const unsigned char *p, size_t ntok, uint64_t tok0)
{
	int64_t *out = ctx;
	(void)p;
	for (size_t i = 0; i < ntok; i++)
		out[tok0 + i] = idx_token((int)out[-1], p + i * idx_dtype_size((int)out[-1]));
	return 0;
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 2;
	}
	T_CASE("writer_round_trips_every_integer_dtype") {
		static const uint32_t doc0[] = {0, 1, 127}, doc1[] = {5}, doc2[] = {100, 7, 0, 126};
		const uint32_t *docs[] = {doc0, doc1, doc2};
		const uint32_t lens[] = {3, 1, 4};
		for (int dt = 1; dt <= 8; dt++) {
			if (!idx_dtype_is_int(dt))
				continue;
			struct idx_writer w;
			struct idx x;
			char err[1024];
			const char *prefix = tmp("rt%d", dt);
			int64_t got[1 + 8] = {dt};
			T_ASSERT(idx_writer_open(&w, prefix, dt, 16, err, sizeof err) == 0); /* tiny buffer: flushes */
			for (int k = 0; k < 3; k++)
				T_ASSERT(idx_writer_add(&w, docs[k], lens[k], err, sizeof err) == 0);
			T_ASSERT(idx_writer_finish(&w, err, sizeof err) == 0);
			T_ASSERT(idx_writer_publish(&w, err, sizeof err) == 0);
			idx_writer_close(&w);
			T_ASSERT(idx_open(&x, prefix, err, sizeof err) == 0);
			T_ASSERT(x.dtype == dt && x.n == 3 && x.d == 4 && x.tokens == 8);
			T_ASSERT(x.bin_len == 8 * idx_dtype_size(dt) && x.len == 34 + 12 * 3 + 8 * 4);
			T_ASSERT(idx_doc(&x, 0) == 0 && idx_doc(&x, 3) == 3 && idx_size(&x, 2) == 4);
			T_ASSERT(idx_pointer(&x, 2) == 4 * idx_dtype_size(dt));
			T_ASSERT(idx_scan(&x, 0, 8, collect_ids, got + 1, err, sizeof err) == 0);
			T_ASSERT(got[1] == 0 && got[3] == 127 && got[4] == 5 && got[5] == 100 && got[8] == 126);
			idx_close(&x);
		}
	}

	T_CASE("writer_uint16_bytes_are_little_endian") {
		struct idx_writer w;
		char err[1024];
		const uint32_t ids[] = {0x1234, 0xfffe};
		size_t n;
		T_ASSERT(idx_writer_open(&w, tmp("le"), IDX_U16, 1 << 20, err, sizeof err) == 0);
		T_ASSERT(idx_writer_add(&w, ids, 2, err, sizeof err) == 0);
		T_ASSERT(idx_writer_finish(&w, err, sizeof err) == 0 && idx_writer_publish(&w, err, sizeof err) == 0);
		idx_writer_close(&w);
		unsigned char *b = slurp(tmp("le.bin"), &n);
		T_ASSERT(b && n == 4 && b[0] == 0x34 && b[1] == 0x12 && b[2] == 0xfe && b[3] == 0xff);
		free(b);
	}

	T_CASE("writer_refuses_an_id_the_dtype_cannot_hold") {
		struct idx_writer w;
		char err[1024];
		const uint32_t ok[] = {255}, bad[] = {3, 256};
		T_ASSERT(idx_writer_open(&w, tmp("fit"), IDX_U8, 1 << 20, err, sizeof err) == 0);
		T_ASSERT(idx_writer_add(&w, ok, 1, err, sizeof err) == 0);
		T_ASSERT(idx_writer_add(&w, bad, 2, err, sizeof err) == -2);
		T_ASSERT(strstr(err, "id 256 (document 1, token 1) does not fit dtype uint8 (at most 255)"));
		idx_writer_close(&w);
		T_ASSERT(access(tmp("fit.bin"), F_OK) != 0 && access(tmp("fit.idx"), F_OK) != 0);
	}

	T_CASE("merge_extends_doc_idx_by_offset_plus_tail") {
		/* A: 3 sequences in 3 documents, the second empty (newer Megatron's repeated entry);
		 * B: 2 sequences in 1 document (sentence level) */
		int32_t sa[3] = {2, 1, 3}, sb[2] = {4, 1};
		int64_t da[4] = {0, 1, 1, 3}, db[2] = {0, 2};
		struct idx in[2];
		char err[1024];
		write_dataset(tmp("ma"), IDX_U16, sa, 3, da, 4, 10);
		write_dataset(tmp("mb"), IDX_U16, sb, 2, db, 2, 100);
		T_ASSERT(idx_open(&in[0], tmp("ma"), err, sizeof err) == 0);
		T_ASSERT(idx_open(&in[1], tmp("mb"), err, sizeof err) == 0);
		struct progress pg;
		T_ASSERT(idx_merge(tmp("mm"), in, 2, &pg, err, sizeof err) == 0);
		idx_close(&in[0]);
		idx_close(&in[1]);
		unsigned char want[4096];
		int32_t sm[5] = {2, 1, 3, 4, 1};
		int64_t dm[5] = {0, 1, 1, 3, 5};
		size_t wl = build_idx(want, IDX_U16, sm, 5, dm, 5), gl, bl;
		unsigned char *got = slurp(tmp("mm.idx"), &gl), *bin = slurp(tmp("mm.bin"), &bl);
		T_ASSERT(got && gl == wl && memcmp(got, want, wl) == 0);
		T_ASSERT(bin && bl == 22 && bin[0] == 10 && bin[12] == 100 && bin[20] == 104);
		/* the progress: of both files' bytes (22 + 34 + 12 x 5 + 8 x 5 = 156), all of them */
		T_ASSERT(pg.total == 156 && pg.total == bl + gl && pg.done == pg.total);
		free(got);
		free(bin);
	}

	T_CASE("merge_refuses_mixed_dtypes_naming_the_file") {
		int32_t sz[1] = {1};
		int64_t dc[2] = {0, 1};
		struct idx in[2];
		char err[1024];
		write_dataset(tmp("d16"), IDX_U16, sz, 1, dc, 2, 1);
		write_dataset(tmp("d32"), IDX_I32, sz, 1, dc, 2, 1);
		T_ASSERT(idx_open(&in[0], tmp("d16"), err, sizeof err) == 0);
		T_ASSERT(idx_open(&in[1], tmp("d32"), err, sizeof err) == 0);
		T_ASSERT(idx_merge(tmp("dmix"), in, 2, NULL, err, sizeof err) == -2);
		T_ASSERT(strstr(err, "d32.idx: dtype int32 (4), but ") && strstr(err, "d16.idx is uint16 (8)"));
		T_ASSERT(access(tmp("dmix.idx"), F_OK) != 0 && access(tmp("dmix.bin"), F_OK) != 0);
		idx_close(&in[0]);
		idx_close(&in[1]);
	}

	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
	T_DONE();
}
