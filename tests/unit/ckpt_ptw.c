/* ckpt_ptw.c - the .pt writer (src/ckpt/pklw.c, ptw.c) read back by lmtk's reader (pt.c): every
 * integer form at its edges, floats, UTF-8 strings, bytes with every high bit, the containers
 * and classes Megatron-DeepSpeed's files hold, tensors; ZIP64 records (forced on a small file
 * by lowering ptw_zip64_at); a member shorter than declared and an unclosed container refused.
 * tests/cli/ckpt-mds-write.sh loads the same file (`ckpt_ptw write FILE [zip64]`) with the real
 * torch.load and compares it with the values below. */
#include "t.h"

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "ckpt/pklw.h"
#include "ckpt/ptw.h"

static const int64_t ints[] = {0, 1, 255, 256, 65535, 65536, -1, -256, INT32_MAX,
			       (int64_t)INT32_MAX + 1, INT32_MIN, (int64_t)INT32_MIN - 1,
			       4294967295ll, 1ll << 40, INT64_MAX, INT64_MIN, -129, 128, 32768};
enum { NINTS = sizeof ints / sizeof *ints };
static const float f32s[6] = {1.5f, -2.25f, 0.0f, 3e38f, -1e-30f, 7.0f};

/* {'ints': [...], 'f': 1.5, 'neg': -0.125, 's': 'héllo ✓', 'b': bytes(range(256)),
 *  'none': None, 't': True, 'tup': (1, 'x'), 'od': OrderedDict(a=1), 'set': set(),
 *  'ns': Namespace(x=2), 'size': torch.Size([2, 3]), 'dtype': torch.bfloat16,
 *  'w': tensor f32 [2, 3], 'h': tensor u8 [3]} */
static int write_file(const char *path, char *err, size_t errlen)
{
	struct pklw p;
	uint8_t b[256];
	for (int i = 0; i < 256; i++)
		b[i] = (uint8_t)i;
	int64_t shape[2] = {2, 3}, three = 3;
	pklw_init(&p);
	pklw_dict(&p);
	pklw_str(&p, "ints");
	pklw_list(&p);
	for (int i = 0; i < NINTS; i++)
		pklw_int(&p, ints[i]);
	pklw_end(&p);
	pklw_str(&p, "f");
	pklw_float(&p, 1.5);
	pklw_str(&p, "neg");
	pklw_float(&p, -0.125);
	pklw_str(&p, "s");
	pklw_str(&p, "h\xc3\xa9llo \xe2\x9c\x93");
	pklw_str(&p, "b");
	pklw_bytes(&p, b, sizeof b);
	pklw_str(&p, "none");
	pklw_none(&p);
	pklw_str(&p, "t");
	pklw_bool(&p, 1);
	pklw_str(&p, "tup");
	pklw_tuple(&p);
	pklw_int(&p, 1);
	pklw_str(&p, "x");
	pklw_end(&p);
	pklw_str(&p, "od");
	pklw_odict(&p);
	pklw_str(&p, "a");
	pklw_int(&p, 1);
	pklw_end(&p);
	pklw_str(&p, "set");
	pklw_set(&p);
	pklw_end(&p);
	pklw_str(&p, "ns");
	pklw_object(&p, "argparse", "Namespace");
	pklw_str(&p, "x");
	pklw_int(&p, 2);
	pklw_end(&p);
	pklw_str(&p, "size");
	pklw_size(&p, 2, shape);
	pklw_str(&p, "dtype");
	pklw_global(&p, "torch", "bfloat16");
	pklw_str(&p, "w");
	pklw_tensor(&p, PTD_F32, "0", 2, shape);
	pklw_str(&p, "h");
	pklw_tensor(&p, PTD_U8, "1", 1, &three);
	pklw_end(&p);
	if (pklw_finish(&p) < 0)
		return snprintf(err, errlen, "pklw_finish"), -1;
	struct ptw *w = ptw_create(path, "archive", err, errlen);
	if (!w)
		return -1;
	if (ptw_member(w, "data.pkl", p.b, p.n) < 0 || ptw_begin(w, "data/0", sizeof f32s) < 0 ||
	    ptw_write(w, f32s, 8) < 0 || ptw_write(w, (const char *)f32s + 8, sizeof f32s - 8) < 0 ||
	    ptw_end(w) < 0 || ptw_member(w, "data/1", "\x01\x80\xff", 3) < 0) {
		snprintf(err, errlen, "%s", ptw_error(w));
		ptw_abort(w);
		pklw_free(&p);
		return -1;
	}
	pklw_free(&p);
	return ptw_close(w, err, errlen);
}

static void check_file(const char *path)
{
	char err[700];
	struct pt_file *f = pt_open(path, err, sizeof err);
	T_ASSERT(f);
	if (!f) {
		printf("# %s\n", err);
		return;
	}
	const struct pt_value *l = pt_get(f, NULL, PT_LIST, "ints", NULL);
	T_ASSERT(l && l->u.seq.n == NINTS);
	for (int i = 0; l && i < NINTS; i++)
		T_ASSERT(l->u.seq.v[i]->kind == PT_INT && l->u.seq.v[i]->u.i == ints[i]);
	T_ASSERT(pt_get(f, NULL, PT_FLOAT, "f", NULL)->u.f == 1.5);
	T_ASSERT(pt_get(f, NULL, PT_FLOAT, "neg", NULL)->u.f == -0.125);
	T_STREQ(pt_get(f, NULL, PT_STR, "s", NULL)->u.str.s, "h\xc3\xa9llo \xe2\x9c\x93");
	const struct pt_value *b = pt_get(f, NULL, PT_BYTES, "b", NULL);
	T_ASSERT(b && b->u.str.len == 256);
	for (int i = 0; b && i < 256; i++)
		T_ASSERT((uint8_t)b->u.str.s[i] == i);
	T_ASSERT(pt_get(f, NULL, PT_NONE, "none", NULL));
	T_ASSERT(pt_get(f, NULL, PT_BOOL, "t", NULL)->u.b == 1);
	T_STREQ(pt_get(f, NULL, PT_STR, "tup", "1", NULL)->u.str.s, "x");
	T_ASSERT(pt_get(f, NULL, PT_INT, "od", "a", NULL)->u.i == 1);
	T_STREQ(pt_get(f, NULL, PT_DICT, "od", NULL)->cls, "collections.OrderedDict");
	T_ASSERT(pt_get(f, NULL, PT_LIST, "set", NULL)->u.seq.n == 0);
	T_STREQ(pt_get(f, NULL, PT_DICT, "ns", NULL)->cls, "argparse.Namespace");
	T_ASSERT(pt_get(f, NULL, PT_INT, "ns", "x", NULL)->u.i == 2);
	T_ASSERT(pt_get(f, NULL, PT_INT, "size", "1", NULL)->u.i == 3);
	T_ASSERT(pt_get(f, NULL, PT_DTYPE, "dtype", NULL)->u.dtype == PTD_BF16);
	const struct pt_value *w = pt_get(f, NULL, PT_TENSOR, "w", NULL);
	float got[6] = {0};
	T_ASSERT(w && w->u.t.ndim == 2 && w->u.t.shape[0] == 2 && w->u.t.shape[1] == 3);
	T_ASSERT(w && pt_read_f32(f, &w->u.t, 0, 6, got) == 0 && !memcmp(got, f32s, sizeof got));
	const struct pt_value *h = pt_get(f, NULL, PT_TENSOR, "h", NULL);
	uint8_t hb[3] = {0};
	T_ASSERT(h && pt_read(f, &h->u.t, 0, 3, hb) == 0 && !memcmp(hb, "\x01\x80\xff", 3));
	pt_close(f);
}

int main(int argc, char **argv)
{
	char err[700], dir[] = "/tmp/ckpt_ptw.XXXXXX", path[64];
	if (argc >= 3 && !strcmp(argv[1], "write")) {
		ptw_zip64_at = argc > 3 && !strcmp(argv[3], "zip64") ? 0 : ptw_zip64_at;
		if (write_file(argv[2], err, sizeof err) < 0) {
			fprintf(stderr, "ckpt_ptw: %s\n", err);
			return 3;
		}
		return 0;
	}
	if (!mkdtemp(dir))
		return 3;
	snprintf(path, sizeof path, "%s/x.pt", dir);
	T_CASE("every_value_reads_back_as_written") {
		T_ASSERT(write_file(path, err, sizeof err) == 0);
		check_file(path);
	}
	T_CASE("zip64_records_read_back") {
		ptw_zip64_at = 0;   /* every member and offset "past 4 GiB" */
		T_ASSERT(write_file(path, err, sizeof err) == 0);
		ptw_zip64_at = 0xffffffffull;
		check_file(path);
	}
	T_CASE("member_shorter_than_declared_refused") {
		struct ptw *w = ptw_create(path, "a", err, sizeof err);
		T_ASSERT(w && ptw_begin(w, "data/0", 8) == 0 && ptw_write(w, "1234", 4) == 0);
		T_ASSERT(w && ptw_end(w) < 0 && strstr(ptw_error(w), "4 bytes written, 8 declared"));
		ptw_abort(w);
	}
	T_CASE("unclosed_container_refused") {
		struct pklw p;
		pklw_init(&p);
		pklw_dict(&p);
		T_ASSERT(pklw_finish(&p) < 0);
		pklw_free(&p);
	}
	unlink(path);
	rmdir(dir);
	T_DONE();
}
