/* ckpt_pt.c - the .pt reader (src/ckpt/pt.c, pickle.c) on files built here byte by byte: each
 * opcode's meaning, integers at the edges of int64, strided reads, and every refusal (unknown
 * opcode, unknown global, overrunning tensor, missing or compressed storage, big-endian,
 * legacy and truncated files, cycles) with its message.  tests/cli/ckpt-pt.sh checks the same
 * reader against files the real torch.save wrote.
 *
 * `ckpt_pt dump FILE [CHUNK]` is the JSON dump that script compares with Python's view of the
 * object: floats as their bits, tensors' elements read CHUNK at a time (pt_read and
 * pt_read_f32), so the comparison is exact.  `ckpt_pt read FILE` reads every tensor as a
 * conversion would, for tests/bench/ckpt-pt.sh. */
#include "t.h"

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <zip.h>

#include "ckpt/pt.h"

/* ---- dump ---- */
static void hex(const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		printf("%02x", b[i]);
}

static void jstr(const char *s, size_t n)
{
	putchar('"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static int dump(struct pt_file *f, const struct pt_value *v, int64_t chunk)
{
	int rc = 0;
	if (v->cls)
		printf("{\"cls\":\"%s\",\"value\":", v->cls);
	switch (v->kind) {
	case PT_NONE: printf("null"); break;
	case PT_BOOL: printf(v->u.b ? "true" : "false"); break;
	case PT_INT: printf("%" PRId64, v->u.i); break;
	case PT_FLOAT: printf("{\"float\":\""); { uint64_t u; memcpy(&u, &v->u.f, 8);
		printf("%016" PRIx64, u); } printf("\"}"); break;
	case PT_STR: jstr(v->u.str.s, v->u.str.len); break;
	case PT_BYTES: printf("{\"bytes\":\""); hex(v->u.str.s, v->u.str.len); printf("\"}"); break;
	case PT_LIST: case PT_TUPLE:
		printf(v->kind == PT_TUPLE ? "{\"tuple\":[" : "[");
		for (size_t i = 0; i < v->u.seq.n && !rc; i++) {
			printf(i ? "," : "");
			rc = dump(f, v->u.seq.v[i], chunk);
		}
		printf(v->kind == PT_TUPLE ? "]}" : "]");
		break;
	case PT_DICT:
		printf("{\"dict\":[");
		for (size_t i = 0; i < v->u.dict.n && !rc; i++) {
			printf(i ? ",[" : "[");
			dump(f, v->u.dict.k[i], chunk);
			printf(",");
			rc = dump(f, v->u.dict.v[i], chunk);
			printf("]");
		}
		printf("]}");
		break;
	case PT_TENSOR: {
		const struct pt_tensor *t = &v->u.t;
		printf("{\"tensor\":{\"dtype\":\"%s\",\"shape\":[", pt_dtype_name(t->dtype));
		for (int d = 0; d < t->ndim; d++)
			printf("%s%" PRId64, d ? "," : "", t->shape[d]);
		printf("],\"stride\":[");
		for (int d = 0; d < t->ndim; d++)
			printf("%s%" PRId64, d ? "," : "", t->stride[d]);
		printf("],\"offset\":%" PRId64 ",\"storage\":\"%s\",\"storage_numel\":%" PRId64
		       ",\"location\":\"%s\",\"data\":\"", t->offset, t->storage->key,
		       t->storage->numel, t->storage->location);
		size_t es = pt_dtype_size(t->dtype);
		uint8_t *raw = malloc((size_t)t->numel * es + 1);
		float *fl = malloc((size_t)t->numel * sizeof *fl + 1);
		for (int64_t a = 0; a < t->numel && !rc; a += chunk) {
			int64_t b = a + chunk < t->numel ? a + chunk : t->numel;
			rc = pt_read(f, t, a, b, raw + a * es) || pt_read_f32(f, t, a, b, fl + a);
		}
		hex(raw, (size_t)t->numel * es);
		printf("\",\"f32\":\"");
		hex(fl, (size_t)t->numel * sizeof *fl);
		printf("\"}}");
		free(raw);
		free(fl);
		break;
	}
	case PT_DTYPE: printf("{\"dtype\":\"%s\"}", pt_dtype_name(v->u.dtype)); break;
	case PT_NDARRAY:
		printf("{\"ndarray\":{\"dtype\":\"%s\",\"shape\":[", v->u.nd.dtype);
		for (int d = 0; d < v->u.nd.ndim; d++)
			printf("%s%" PRId64, d ? "," : "", v->u.nd.shape[d]);
		printf("],\"data\":\"");
		hex(v->u.nd.data, v->u.nd.nbytes);
		printf("\"}}");
		break;
	default: printf("\"?\""); rc = 1; break;
	}
	if (v->cls)
		printf("}");
	return rc;
}

static int dump_main(int argc, char **argv)
{
	char err[1024];
	struct pt_file *f = pt_open(argv[2], err, sizeof err);
	if (!f) {
		fprintf(stderr, "ckpt_pt: %s\n", err);
		return 2;
	}
	int64_t chunk = argc > 3 ? atoll(argv[3]) : INT64_MAX / 2;
	int rc = dump(f, f->root, chunk > 0 ? chunk : 1);
	printf("\n");
	if (rc)
		fprintf(stderr, "ckpt_pt: %s\n", pt_error(f));
	pt_close(f);
	return rc ? 3 : 0;
}

/* `ckpt_pt read FILE [CHUNK [noxor]]`: every tensor read as float, CHUNK elements at a time
 * (default 2^20), as a conversion would; prints counts and the XOR of the floats' bits (for
 * tests/bench/ckpt-pt.sh; noxor: the reads alone) */
struct rd { int64_t tensors, elems, bytes; uint32_t x; float *buf; int64_t chunk; int noxor; };
static int read_all(struct pt_file *f, const struct pt_value *v, struct rd *r)
{
	if (v->kind == PT_TENSOR) {
		const struct pt_tensor *t = &v->u.t;
		for (int64_t a = 0; a < t->numel; a += r->chunk) {
			int64_t b = a + r->chunk < t->numel ? a + r->chunk : t->numel;
			if (pt_read_f32(f, t, a, b, r->buf) != 0)
				return -1;
			const uint32_t *u = (const uint32_t *)r->buf;
			for (int64_t i = 0; i < b - a && !r->noxor; i++)
				r->x ^= u[i];
		}
		r->tensors++;
		r->elems += t->numel;
		r->bytes += t->numel * (int64_t)pt_dtype_size(t->dtype);
	} else if (v->kind == PT_LIST || v->kind == PT_TUPLE) {
		for (size_t i = 0; i < v->u.seq.n; i++)
			if (read_all(f, v->u.seq.v[i], r) != 0)
				return -1;
	} else if (v->kind == PT_DICT) {
		for (size_t i = 0; i < v->u.dict.n; i++)
			if (read_all(f, v->u.dict.v[i], r) != 0)
				return -1;
	}
	return 0;
}

static int read_main(int argc, char **argv)
{
	char err[1024];
	struct pt_file *f = pt_open(argv[2], err, sizeof err);
	if (!f) {
		fprintf(stderr, "ckpt_pt: %s\n", err);
		return 2;
	}
	struct rd r = {.chunk = argc > 3 ? atoll(argv[3]) : 1 << 20,
		       .noxor = argc > 4 && !strcmp(argv[4], "noxor")};
	if (r.chunk < 1 || !(r.buf = malloc((size_t)r.chunk * sizeof *r.buf))) {
		pt_close(f);
		return 2;
	}
	int rc = read_all(f, f->root, &r);
	if (rc)
		fprintf(stderr, "ckpt_pt: %s\n", pt_error(f));
	else
		printf("tensors %lld elements %lld bytes %lld xor %08x\n", (long long)r.tensors,
		       (long long)r.elems, (long long)r.bytes, r.x);
	free(r.buf);
	pt_close(f);
	return rc ? 3 : 0;
}

/* ---- pickles written by hand ---- */
struct pk { uint8_t b[8192]; size_t n; };
static void op(struct pk *p, int c) { p->b[p->n++] = (uint8_t)c; }
static void bytes(struct pk *p, const void *s, size_t n) { memcpy(p->b + p->n, s, n); p->n += n; }
static void u32(struct pk *p, uint32_t x) { for (int i = 0; i < 4; i++) op(p, (int)(x >> 8 * i & 0xff)); }
static void ustr(struct pk *p, const char *s) { op(p, 'X'); u32(p, (uint32_t)strlen(s)); bytes(p, s, strlen(s)); }
static void glob(struct pk *p, const char *m, const char *n)
{
	op(p, 'c');
	bytes(p, m, strlen(m));
	op(p, '\n');
	bytes(p, n, strlen(n));
	op(p, '\n');
}
static void i1(struct pk *p, int x) { op(p, 'K'); op(p, x); }
static void begin(struct pk *p) { p->n = 0; op(p, 0x80); op(p, 2); op(p, '}'); }
static void end(struct pk *p) { op(p, '.'); }
/* a tensor: storage key of type T (numel n), offset, shape/stride tuples of nd <= 3 */
static void tensor(struct pk *p, const char *type, const char *key, int n, int off, int nd,
		   const int *shape, const int *stride)
{
	glob(p, "torch._utils", "_rebuild_tensor_v2");
	op(p, '(');
	op(p, '(');
	ustr(p, "storage");
	glob(p, "torch", type);
	ustr(p, key);
	ustr(p, "cpu");
	i1(p, n);
	op(p, 't');
	op(p, 'Q');
	i1(p, off);
	op(p, '(');
	for (int d = 0; d < nd; d++)
		i1(p, shape[d]);
	op(p, 't');
	op(p, '(');
	for (int d = 0; d < nd; d++)
		i1(p, stride[d]);
	op(p, 't');
	op(p, 0x89);
	glob(p, "collections", "OrderedDict");
	op(p, ')');
	op(p, 'R');
	op(p, 't');
	op(p, 'R');
}

static char dir[64];

/* a zip ARCHIVE/data.pkl + storages (key, bytes, n) + optional byteorder; compressed: the
 * storages deflated */
struct ent { const char *name; const void *data; size_t n; };
static const char *make_pt(const char *name, const struct pk *p, const struct ent *e, int ne,
			   int compress)
{
	static char path[256];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	int ze;
	zip_t *z = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &ze);
	if (!z)
		abort();
	zip_source_t *s = zip_source_buffer(z, p->b, p->n, 0);
	zip_int64_t i = zip_file_add(z, "arch/data.pkl", s, ZIP_FL_OVERWRITE);
	zip_set_file_compression(z, (zip_uint64_t)i, ZIP_CM_STORE, 0);
	for (int k = 0; k < ne; k++) {
		s = zip_source_buffer(z, e[k].data, e[k].n, 0);
		i = zip_file_add(z, e[k].name, s, ZIP_FL_OVERWRITE);
		zip_set_file_compression(z, (zip_uint64_t)i, compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0);
	}
	if (zip_close(z) != 0)
		abort();
	return path;
}

static char err[1024];
static struct pt_file *open_pk(const struct pk *p, const struct ent *e, int ne)
{
	err[0] = 0;
	return pt_open(make_pt("t.pt", p, e, ne, 0), err, sizeof err);
}

/* opening must fail with all the patterns in err */
static int refused(const struct pk *p, const struct ent *e, int ne, const char *w1, const char *w2)
{
	struct pt_file *f = open_pk(p, e, ne);
	if (f) {
		pt_close(f);
		printf("    opened, expected a refusal naming '%s'\n", w1);
		return 0;
	}
	int ok = strstr(err, w1) && (!w2 || strstr(err, w2));
	if (!ok)
		printf("    message: %s\n", err);
	return ok;
}

static float f32s[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "dump"))
		return dump_main(argc, argv);
	if (argc >= 3 && !strcmp(argv[1], "read"))
		return read_main(argc, argv);
	snprintf(dir, sizeof dir, "/tmp/ckpt_pt.XXXXXX");
	if (!mkdtemp(dir))
		return 3;
	struct ent st0 = {"arch/data/0", f32s, sizeof f32s};
	struct pk p;

	T_CASE("scalars_strings_and_containers_read_as_pickled") {
		begin(&p);
		op(&p, '(');
		ustr(&p, "i"); op(&p, 'J'); u32(&p, (uint32_t)-5);
		ustr(&p, "m"); op(&p, 'M'); op(&p, 0x34); op(&p, 0x12);
		ustr(&p, "f"); op(&p, 'G'); bytes(&p, "\x3f\xf8\0\0\0\0\0\0", 8);  /* 1.5 */
		ustr(&p, "n"); op(&p, 'N');
		ustr(&p, "t"); op(&p, 0x88);
		i1(&p, 7); ustr(&p, "int key");
		ustr(&p, "l"); op(&p, ']'); op(&p, 'q'); op(&p, 0); op(&p, '('); i1(&p, 1); i1(&p, 2); op(&p, 'e');
		ustr(&p, "shared"); op(&p, 'h'); op(&p, 0);
		ustr(&p, "tup"); i1(&p, 1); i1(&p, 2); op(&p, 0x86);
		ustr(&p, "b"); glob(&p, "_codecs", "encode"); ustr(&p, "a\xc3\xbf"); ustr(&p, "latin1"); op(&p, 0x86); op(&p, 'R');
		ustr(&p, "i"); i1(&p, 9);   /* a key set again keeps its place */
		op(&p, 'u');
		end(&p);
		struct pt_file *f = open_pk(&p, NULL, 0);
		T_ASSERT(f);
		if (!f)
			printf("    %s\n", err);
		if (f) {
			const struct pt_value *r = f->root;
			T_ASSERT(r->kind == PT_DICT && r->u.dict.n == 10);
			T_ASSERT(pt_get(f, NULL, PT_INT, "i", NULL)->u.i == 9);
			T_STREQ(r->u.dict.k[0]->u.str.s, "i");
			T_ASSERT(pt_get(f, NULL, PT_INT, "m", NULL)->u.i == 0x1234);
			T_ASSERT(pt_get(f, NULL, PT_FLOAT, "f", NULL)->u.f == 1.5);
			T_ASSERT(pt_get(f, NULL, PT_NONE, "n", NULL));
			T_ASSERT(pt_get(f, NULL, PT_BOOL, "t", NULL)->u.b == 1);
			T_STREQ(pt_get(f, NULL, PT_STR, "7", NULL)->u.str.s, "int key");
			T_ASSERT(pt_get(f, NULL, PT_INT, "l", "1", NULL)->u.i == 2);
			T_ASSERT(pt_get(f, NULL, PT_LIST, "shared", NULL) == pt_get(f, NULL, -1, "l", NULL));
			T_ASSERT(pt_get(f, NULL, PT_TUPLE, "tup", NULL)->u.seq.n == 2);
			const struct pt_value *b = pt_get(f, NULL, PT_BYTES, "b", NULL);
			T_ASSERT(b && b->u.str.len == 2 && !memcmp(b->u.str.s, "a\xff", 2));
			T_ASSERT(!pt_get(f, NULL, PT_INT, "l", "5", NULL));
			T_ASSERT(strstr(pt_error(f), "l: no item 5 in a list of 2"));
			T_ASSERT(!pt_get(f, NULL, PT_STR, "i", NULL));
			T_ASSERT(strstr(pt_error(f), "i is a int, not a str"));
			T_ASSERT(!pt_get(f, NULL, -1, "nope", NULL));
			T_ASSERT(strstr(pt_error(f), "the top level: no key 'nope'"));
			T_ASSERT(!pt_get(f, NULL, -1, "m", "x", NULL));
			T_ASSERT(strstr(pt_error(f), "m is a int: no 'x' in it"));
			pt_close(f);
		}
	}

	T_CASE("long1_reads_all_of_int64_and_refuses_beyond") {
		static const struct { const char *b; int n; int64_t v; } ok[] = {
			{"", 0, 0}, {"\xff", 1, -1}, {"\x80", 1, -128},
			{"\xff\xff\xff\xff\xff\xff\xff\x7f", 8, INT64_MAX},
			{"\0\0\0\0\0\0\0\x80", 8, INT64_MIN},
			{"\xff\xff\xff\xff\xff\xff\xff\x7f\0", 9, INT64_MAX},  /* sign byte only */
			{"\0\0\0\x80\0", 5, INT64_C(2147483648)},
		};
		for (size_t k = 0; k < sizeof ok / sizeof *ok; k++) {
			begin(&p);
			ustr(&p, "x"); op(&p, 0x8a); op(&p, ok[k].n); bytes(&p, ok[k].b, (size_t)ok[k].n);
			op(&p, 's');
			end(&p);
			struct pt_file *f = open_pk(&p, NULL, 0);
			T_ASSERT(f && pt_get(f, NULL, PT_INT, "x", NULL)->u.i == ok[k].v);
			pt_close(f);
		}
		static const struct { const char *b; int n; } bad[] = {
			{"\0\0\0\0\0\0\0\x80\0", 9},       /* 2^63 */
			{"\0\0\0\0\0\0\0\0\x01", 9},       /* 2^64 */
			{"\xff\xff\xff\xff\xff\xff\xff\x7f\xff", 9},
		};
		for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
			begin(&p);
			ustr(&p, "x"); op(&p, 0x8a); op(&p, bad[k].n); bytes(&p, bad[k].b, (size_t)bad[k].n);
			op(&p, 's');
			end(&p);
			T_ASSERT(refused(&p, NULL, 0, "offset 9 (LONG1): an integer of 9 bytes beyond int64", NULL));
		}
	}

	T_CASE("tensor_views_read_in_row_major_order_in_any_range") {
		/* storage 0..11; a (4,2) view at offset 1 with strides (1, 4): element (i,j) = 1+i+4j */
		begin(&p);
		op(&p, '(');
		ustr(&p, "w");
		tensor(&p, "FloatStorage", "0", 12, 1, 2, (int[]){4, 2}, (int[]){1, 4});
		ustr(&p, "s");   /* a slice: (2, 3) at offset 5, strides (4, 1) */
		tensor(&p, "FloatStorage", "0", 12, 5, 2, (int[]){2, 3}, (int[]){4, 1});
		op(&p, 'u');
		end(&p);
		struct pt_file *f = open_pk(&p, &st0, 1);
		T_ASSERT(f);
		if (!f)
			printf("    %s\n", err);
		if (f) {
			const struct pt_value *w = pt_get(f, NULL, PT_TENSOR, "w", NULL);
			const struct pt_value *s = pt_get(f, NULL, PT_TENSOR, "s", NULL);
			T_ASSERT(f->nstorages == 1 && w->u.t.storage == s->u.t.storage);
			T_ASSERT(w->u.t.numel == 8 && w->u.t.offset == 1 && w->u.t.dtype == PTD_F32);
			int bad = 0;
			for (int a = 0; a <= 8; a++)
				for (int b = a; b <= 8; b++) {
					float o[8] = {0};
					bad += pt_read_f32(f, &w->u.t, a, b, o) != 0;
					for (int e = a; e < b; e++)
						bad += o[e - a] != 1 + e / 2 + 4 * (e % 2);
				}
			T_ASSERT(bad == 0);
			float o[6];
			T_ASSERT(pt_read(f, &s->u.t, 0, 6, o) == 0);
			T_ASSERT(o[0] == 5 && o[2] == 7 && o[3] == 9 && o[5] == 11);
			T_ASSERT(pt_read(f, &s->u.t, 0, 7, o) != 0);
			T_ASSERT(strstr(pt_error(f), "elements [0, 7) of a tensor of 6"));
			pt_close(f);
		}
	}

	T_CASE("half_and_bfloat16_convert_exactly") {
		uint16_t h[6] = {0x3c00, 0x0001, 0x7bff, 0xfc00, 0x8400, 0x03ff};
		float want_h[6] = {1.0f, ldexpf(1, -24), 65504.0f, -INFINITY, -ldexpf(1, -14),
				   ldexpf(1023, -24)};
		uint16_t bf[3] = {0x3f80, 0xc2f7, 0x0001};
		float want_bf[3] = {1.0f, -123.5f, ldexpf(1, -133)};
		struct ent e[2] = {{"arch/data/0", h, sizeof h}, {"arch/data/1", bf, sizeof bf}};
		begin(&p);
		op(&p, '(');
		ustr(&p, "h"); tensor(&p, "HalfStorage", "0", 6, 0, 1, (int[]){6}, (int[]){1});
		ustr(&p, "b"); tensor(&p, "BFloat16Storage", "1", 3, 0, 1, (int[]){3}, (int[]){1});
		op(&p, 'u');
		end(&p);
		struct pt_file *f = open_pk(&p, e, 2);
		T_ASSERT(f);
		if (!f)
			printf("    %s\n", err);
		if (f) {
			float o[6];
			T_ASSERT(pt_read_f32(f, &pt_get(f, NULL, PT_TENSOR, "h", NULL)->u.t, 0, 6, o) == 0);
			T_ASSERT(!memcmp(o, want_h, sizeof want_h));
			T_ASSERT(pt_read_f32(f, &pt_get(f, NULL, PT_TENSOR, "b", NULL)->u.t, 0, 3, o) == 0);
			T_ASSERT(!memcmp(o, want_bf, sizeof want_bf));
			pt_close(f);
		}
	}

	T_CASE("tensor_overrunning_its_storage_is_refused") {
		begin(&p);
		ustr(&p, "w");
		tensor(&p, "FloatStorage", "0", 12, 3, 2, (int[]){4, 3}, (int[]){3, 1});
		op(&p, 's');
		end(&p);
		T_ASSERT(refused(&p, &st0, 1, "(REDUCE): a tensor of shape (4, 3), strides (3, 1) at "
				 "storage offset 3 reaches element 14 of storage '0', which holds 12", NULL));
	}

	T_CASE("storage_size_or_entry_wrong_is_refused") {
		begin(&p);
		ustr(&p, "w");
		tensor(&p, "FloatStorage", "0", 13, 0, 1, (int[]){13}, (int[]){1});
		op(&p, 's');
		end(&p);
		T_ASSERT(refused(&p, &st0, 1, "entry arch/data/0 holds 48 bytes, not the 13 x 4", NULL));
		T_ASSERT(refused(&p, NULL, 0, "(BINPERSID): storage '0' has no entry arch/data/0", NULL));
		begin(&p);
		op(&p, '(');
		ustr(&p, "w"); tensor(&p, "FloatStorage", "0", 12, 0, 1, (int[]){12}, (int[]){1});
		ustr(&p, "v"); tensor(&p, "IntStorage", "0", 12, 0, 1, (int[]){12}, (int[]){1});
		op(&p, 'u');
		end(&p);
		T_ASSERT(refused(&p, &st0, 1, "storage '0' is int32 x 12 here and float32 x 12 before", NULL));
	}

	T_CASE("damaged_storage_bytes_fail_the_crc_of_a_whole_read") {
		begin(&p);
		ustr(&p, "w"); tensor(&p, "FloatStorage", "0", 12, 0, 1, (int[]){12}, (int[]){1});
		op(&p, 's');
		end(&p);
		const char *path = make_pt("crc.pt", &p, &st0, 1, 0);
		FILE *fp = fopen(path, "r+b");
		uint8_t zb[4096];
		size_t zn = fread(zb, 1, sizeof zb, fp);
		uint8_t *at = memmem(zb, zn, f32s, sizeof f32s);
		T_ASSERT(at);
		if (at) {
			fseek(fp, (long)(at - zb) + 21, SEEK_SET);
			fputc(at[21] ^ 0x10, fp);
		}
		fclose(fp);
		struct pt_file *f = pt_open(path, err, sizeof err);
		T_ASSERT(f);
		if (f) {
			const struct pt_tensor *t = &pt_get(f, NULL, PT_TENSOR, "w", NULL)->u.t;
			float o[12];
			T_ASSERT(pt_read_f32(f, t, 0, 6, o) == 0 && o[5] != 5);  /* no check on a part */
			T_ASSERT(pt_read_f32(f, t, 6, 12, o) != 0);
			T_ASSERT(strstr(pt_error(f), "arch/data/0: CRC error: the storage's bytes are damaged"));
			pt_close(f);
		}
	}

	T_CASE("compressed_storage_is_refused_by_name") {
		begin(&p);
		ustr(&p, "w"); tensor(&p, "FloatStorage", "0", 12, 0, 1, (int[]){12}, (int[]){1});
		op(&p, 's');
		end(&p);
		struct pt_file *f = pt_open(make_pt("c.pt", &p, &st0, 1, 1), err, sizeof err);
		T_ASSERT(!f && strstr(err, "entry arch/data/0 is compressed"));
		pt_close(f);
	}

	T_CASE("unknown_opcode_is_named_with_its_offset") {
		begin(&p);
		op(&p, 0x95);       /* FRAME, protocol 4 */
		end(&p);
		T_ASSERT(refused(&p, NULL, 0, "arch/data.pkl offset 3 (FRAME): opcode 0x95 FRAME is not one torch.save writes", NULL));
		begin(&p);
		op(&p, 'i');        /* INST: protocol 0 calls */
		end(&p);
		T_ASSERT(refused(&p, NULL, 0, "offset 3 (INST)", NULL));
		begin(&p);
		op(&p, 0xfe);
		end(&p);
		T_ASSERT(refused(&p, NULL, 0, "opcode 0xfe (no pickle opcode)", NULL));
	}

	T_CASE("unknown_global_is_named_and_never_run") {
		begin(&p);
		ustr(&p, "x"); glob(&p, "os", "system"); ustr(&p, "touch /tmp/ckpt_pt_pwned"); op(&p, 0x85); op(&p, 'R');
		op(&p, 's');
		end(&p);
		unlink("/tmp/ckpt_pt_pwned");
		T_ASSERT(refused(&p, NULL, 0, "offset 9 (GLOBAL): global 'os.system' is not one torch.save writes", NULL));
		T_ASSERT(access("/tmp/ckpt_pt_pwned", F_OK) != 0);
		/* a known global called the wrong way */
		begin(&p);
		ustr(&p, "x"); glob(&p, "torch", "FloatStorage"); op(&p, ')'); op(&p, 'R');
		op(&p, 's');
		end(&p);
		T_ASSERT(refused(&p, NULL, 0, "torch.FloatStorage is not called by REDUCE", NULL));
		/* a global left as a value */
		begin(&p);
		ustr(&p, "x"); glob(&p, "collections", "OrderedDict");
		op(&p, 's');
		end(&p);
		T_ASSERT(refused(&p, NULL, 0, "'collections.OrderedDict' itself as a value", NULL));
	}

	T_CASE("truncated_pickle_and_cycles_are_refused") {
		begin(&p);
		ustr(&p, "x");
		T_ASSERT(refused(&p, NULL, 0, "data.pkl ends before STOP", NULL));
		begin(&p);
		p.n -= 1;
		op(&p, ']'); op(&p, 'q'); op(&p, 0); op(&p, 'h'); op(&p, 0); op(&p, 'a');
		end(&p);
		T_ASSERT(refused(&p, NULL, 0, "a list that contains itself", NULL));
		begin(&p);
		ustr(&p, "x"); op(&p, 'X'); u32(&p, 100); ustr(&p, "short");
		T_ASSERT(refused(&p, NULL, 0, "(BINUNICODE): data.pkl ends inside the opcode", NULL));
		begin(&p);
		op(&p, 'h'); op(&p, 3);
		end(&p);
		T_ASSERT(refused(&p, NULL, 0, "memo index 3 was never stored", NULL));
		begin(&p);
		op(&p, 'u');
		end(&p);
		T_ASSERT(refused(&p, NULL, 0, "(SETITEMS): no MARK before it", NULL));
	}

	T_CASE("namespace_ordereddict_size_set_and_numpy_are_plain_values") {
		begin(&p);
		op(&p, '(');
		ustr(&p, "args");
		glob(&p, "argparse", "Namespace"); op(&p, ')'); op(&p, 0x81);
		op(&p, '}'); op(&p, '('); ustr(&p, "lr"); op(&p, 'G'); bytes(&p, "\x3f\x50\x62\x4d\xd2\xf1\xa9\xfc", 8);
		ustr(&p, "dt"); glob(&p, "torch", "bfloat16"); op(&p, 'u'); op(&p, 'b');
		ustr(&p, "size"); glob(&p, "torch", "Size"); i1(&p, 2); i1(&p, 3); op(&p, 0x86); op(&p, 0x85); op(&p, 'R');
		ustr(&p, "set"); glob(&p, "__builtin__", "set"); op(&p, ']'); i1(&p, 4); op(&p, 'a'); op(&p, 0x85); op(&p, 'R');
		ustr(&p, "np");
		glob(&p, "numpy.core.multiarray", "_reconstruct"); glob(&p, "numpy", "ndarray");
		i1(&p, 0); op(&p, 0x85); glob(&p, "_codecs", "encode"); ustr(&p, "b"); ustr(&p, "latin1");
		op(&p, 0x86); op(&p, 'R'); op(&p, 0x87); op(&p, 'R');
		op(&p, '('); i1(&p, 1); i1(&p, 2); op(&p, 0x85);
		glob(&p, "numpy", "dtype"); ustr(&p, "u2"); op(&p, 0x89); op(&p, 0x88); op(&p, 0x87); op(&p, 'R');
		op(&p, '('); i1(&p, 3); ustr(&p, "<"); op(&p, 'N'); op(&p, 'N'); op(&p, 'N');
		op(&p, 'J'); u32(&p, (uint32_t)-1); op(&p, 'J'); u32(&p, (uint32_t)-1); i1(&p, 0); op(&p, 't'); op(&p, 'b');
		op(&p, 0x89);
		glob(&p, "_codecs", "encode"); ustr(&p, "\x01\x02\x03\x04"); ustr(&p, "latin1"); op(&p, 0x86); op(&p, 'R');
		op(&p, 't'); op(&p, 'b');
		op(&p, 'u');
		end(&p);
		struct pt_file *f = open_pk(&p, NULL, 0);
		T_ASSERT(f);
		if (!f)
			printf("    %s\n", err);
		if (f) {
			const struct pt_value *a = pt_get(f, NULL, PT_DICT, "args", NULL);
			T_ASSERT(a && a->cls && !strcmp(a->cls, "argparse.Namespace"));
			T_ASSERT(pt_get(f, a, PT_FLOAT, "lr", NULL)->u.f == 1e-3);
			T_ASSERT(pt_get(f, a, PT_DTYPE, "dt", NULL)->u.dtype == PTD_BF16);
			const struct pt_value *s = pt_get(f, NULL, PT_TUPLE, "size", NULL);
			T_ASSERT(s && !strcmp(s->cls, "torch.Size") && s->u.seq.n == 2 && s->u.seq.v[1]->u.i == 3);
			s = pt_get(f, NULL, PT_LIST, "set", NULL);
			T_ASSERT(s && !strcmp(s->cls, "set") && s->u.seq.n == 1);
			const struct pt_value *n = pt_get(f, NULL, PT_NDARRAY, "np", NULL);
			T_ASSERT(n && !strcmp(n->u.nd.dtype, "<u2") && n->u.nd.ndim == 1 &&
				 n->u.nd.shape[0] == 2 && n->u.nd.nbytes == 4 &&
				 !memcmp(n->u.nd.data, "\x01\x02\x03\x04", 4));
			pt_close(f);
		}
	}

	T_CASE("megatron_enum_ordereddict_metadata_and_fragment_address_are_plain_values") {
		/* Megatron-DeepSpeed's pickles: args.position_embedding_type as (VALUE,) REDUCE
		 * (Python <= 3.10) and as getattr(CLASS, 'NAME') (>= 3.11); a state_dict()'s
		 * OrderedDict with its _metadata BUILD; DeepSpeed 0.7.0's fragment_address */
		begin(&p);
		op(&p, '(');
		ustr(&p, "pe_value");
		glob(&p, "megatron.enums", "PositionEmbeddingType"); i1(&p, 3); op(&p, 0x85); op(&p, 'R');
		ustr(&p, "pe_name");
		glob(&p, "__builtin__", "getattr"); glob(&p, "megatron.enums", "PositionEmbeddingType");
		ustr(&p, "alibi"); op(&p, 0x86); op(&p, 'R');
		ustr(&p, "sd");
		glob(&p, "collections", "OrderedDict"); op(&p, ')'); op(&p, 'R');
		ustr(&p, "w"); i1(&p, 7); op(&p, 's');
		op(&p, '}'); ustr(&p, "_metadata"); glob(&p, "collections", "OrderedDict"); op(&p, ')');
		op(&p, 'R'); op(&p, 's'); op(&p, 'b');
		ustr(&p, "fa");
		glob(&p, "deepspeed.runtime.bf16_optimizer", "fragment_address"); op(&p, ')'); op(&p, 0x81);
		op(&p, '}'); op(&p, '('); ustr(&p, "numel"); i1(&p, 96); ustr(&p, "start"); i1(&p, 24);
		op(&p, 'u'); op(&p, 'b');
		op(&p, 'u');
		end(&p);
		struct pt_file *f = open_pk(&p, NULL, 0);
		T_ASSERT(f);
		if (!f)
			printf("    %s\n", err);
		if (f) {
			const struct pt_value *v = pt_get(f, NULL, PT_INT, "pe_value", NULL);
			T_ASSERT(v && v->u.i == 3 && !strcmp(v->cls, "megatron.enums.PositionEmbeddingType"));
			v = pt_get(f, NULL, PT_STR, "pe_name", NULL);
			T_ASSERT(v && !strcmp(v->u.str.s, "alibi") &&
				 !strcmp(v->cls, "megatron.enums.PositionEmbeddingType"));
			v = pt_get(f, NULL, PT_DICT, "sd", NULL);
			T_ASSERT(v && v->u.dict.n == 1 && pt_get(f, v, PT_INT, "w", NULL)->u.i == 7 &&
				 !pt_dict_get(v, "_metadata"));
			v = pt_get(f, NULL, PT_DICT, "fa", NULL);
			T_ASSERT(v && pt_get(f, v, PT_INT, "numel", NULL)->u.i == 96 &&
				 pt_get(f, v, PT_INT, "start", NULL)->u.i == 24 &&
				 !strcmp(v->cls, "deepspeed.runtime.bf16_optimizer.fragment_address"));
			pt_close(f);
		}
		/* DeepSpeed's fp16 ZeRO optimizer pickles its DynamicLossScaler (NEWOBJ, BUILD with its
		 * __dict__) and zero_stage as a ZeroStageEnum, by value or (Python >= 3.11) by name */
		begin(&p);
		op(&p, '(');
		ustr(&p, "loss_scaler");
		glob(&p, "deepspeed.runtime.fp16.loss_scaler", "DynamicLossScaler"); op(&p, ')');
		op(&p, 0x81);
		op(&p, '}'); op(&p, '('); ustr(&p, "cur_scale"); op(&p, 'G');
		bytes(&p, "\x40\xa0\0\0\0\0\0\0", 8);  /* 2048.0 */
		ustr(&p, "cur_iter"); i1(&p, 4); ustr(&p, "last_overflow_iter"); i1(&p, 1);
		ustr(&p, "cur_hysteresis"); i1(&p, 1); op(&p, 'u'); op(&p, 'b');
		ustr(&p, "stage_value");
		glob(&p, "deepspeed.runtime.zero.config", "ZeroStageEnum"); i1(&p, 1); op(&p, 0x85);
		op(&p, 'R');
		ustr(&p, "stage_name");
		glob(&p, "__builtin__", "getattr"); glob(&p, "deepspeed.runtime.zero.config", "ZeroStageEnum");
		ustr(&p, "gradients"); op(&p, 0x86); op(&p, 'R');
		op(&p, 'u');
		end(&p);
		f = open_pk(&p, NULL, 0);
		T_ASSERT(f);
		if (f) {
			const struct pt_value *v = pt_get(f, NULL, PT_DICT, "loss_scaler", NULL);
			T_ASSERT(v && !strcmp(v->cls, "deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler") &&
				 pt_get(f, v, PT_FLOAT, "cur_scale", NULL)->u.f == 2048.0 &&
				 pt_get(f, v, PT_INT, "last_overflow_iter", NULL)->u.i == 1);
			v = pt_get(f, NULL, PT_INT, "stage_value", NULL);
			T_ASSERT(v && v->u.i == 1 && !strcmp(v->cls, "deepspeed.runtime.zero.config.ZeroStageEnum"));
			v = pt_get(f, NULL, PT_STR, "stage_name", NULL);
			T_ASSERT(v && !strcmp(v->u.str.s, "gradients") &&
				 !strcmp(v->cls, "deepspeed.runtime.zero.config.ZeroStageEnum"));
			pt_close(f);
		}
		/* getattr of anything but an enum lmtk knows is a call, refused */
		begin(&p);
		ustr(&p, "x");
		glob(&p, "__builtin__", "getattr"); glob(&p, "collections", "OrderedDict");
		ustr(&p, "fromkeys"); op(&p, 0x86); op(&p, 'R'); op(&p, 's');
		end(&p);
		T_ASSERT(refused(&p, NULL, 0, "(REDUCE): __builtin__.getattr other than (an enum class",
				 NULL));
		/* a second BUILD on an OrderedDict, or one that is not a dict of attributes */
		begin(&p);
		ustr(&p, "x");
		glob(&p, "collections", "OrderedDict"); op(&p, ')'); op(&p, 'R');
		op(&p, '}'); op(&p, 'b'); op(&p, '}'); op(&p, 'b'); op(&p, 's');
		end(&p);
		T_ASSERT(refused(&p, NULL, 0, "(BUILD): BUILD on a collections.OrderedDict", NULL));
		begin(&p);
		ustr(&p, "x");
		glob(&p, "collections", "OrderedDict"); op(&p, ')'); op(&p, 'R');
		op(&p, ')'); op(&p, 'b'); op(&p, 's');
		end(&p);
		T_ASSERT(refused(&p, NULL, 0, "the state of an OrderedDict is a tuple", NULL));
	}

	T_CASE("big_endian_and_non_torch_files_are_refused") {
		begin(&p);
		end(&p);
		struct ent bo = {"arch/byteorder", "big", 3};
		T_ASSERT(refused(&p, &bo, 1, "byteorder says 'big'", NULL));
		struct ent lo = {"arch/byteorder", "little", 6};
		struct pt_file *f = open_pk(&p, &lo, 1);
		T_ASSERT(f && f->root->kind == PT_DICT && !strcmp(f->archive, "arch"));
		pt_close(f);
		char path[128];
		snprintf(path, sizeof path, "%s/legacy.pt", dir);
		FILE *fp = fopen(path, "wb");
		fwrite("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 1, 15, fp);
		fclose(fp);
		T_ASSERT(!pt_open(path, err, sizeof err) && strstr(err, "a legacy PyTorch file") &&
			 strstr(err, "torch >= 1.6"));
		/* a zip cut short: its central directory is gone */
		const char *z = make_pt("t.pt", &p, &lo, 1, 0);
		T_ASSERT(truncate(z, 40) == 0);
		T_ASSERT(!pt_open(z, err, sizeof err) && strstr(err, "damaged or truncated zip"));
		fp = fopen(path, "wb");
		fputs("{\"not\": \"torch\"}", fp);
		fclose(fp);
		T_ASSERT(!pt_open(path, err, sizeof err) && strstr(err, "not a PyTorch .pt file"));
		snprintf(path, sizeof path, "%s/missing.pt", dir);
		T_ASSERT(!pt_open(path, err, sizeof err) && strstr(err, "missing.pt: No such file"));
	}

	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		return 3;
	T_DONE();
}
