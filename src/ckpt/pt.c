/* pt - the zip side of .pt files, tensor reads and lookups (see pt.h; the pickle is
 * pickle.c's).
 *
 * libzip (Debian's libzip-dev) opens the archive and checks its structure (ZIP_CHECKCONS: the
 * central directory agrees with the local headers), which is what tells a truncated file from
 * a good one: the central directory sits at the end.  Storage entries are read with
 * zip_fseek + zip_fread, which libzip allows on stored (uncompressed) entries only: torch.save
 * never compresses, and a compressed storage is refused by name rather than read O(n^2).
 * libzip computes the CRC-32 of an entry read in order from its start (the cost of a read is
 * mostly that, at ~3 GB/s); when such a read reaches the entry's end the CRC is compared with
 * the zip's, so a conversion that reads whole tensors also proves their bytes intact.
 *
 * A read of elements [a, b) walks the tensor's layout as runs of elements adjacent in the
 * storage (the innermost dimensions whose strides are those of a contiguous tensor).  Long runs
 * are read straight into the caller's buffer; a layout of short runs (a transposed view) reads
 * the storage window the range touches once and gathers from it, when that window is not much
 * larger than the range. */
#include "ckpt/pt.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "ckpt/pickle.h"
#include "ckpt/safetensors.h"
#include "xalloc.h"

#define PKL_MAX (1u << 30)           /* data.pkl holds metadata only: 1 GiB is forged */

size_t pt_dtype_size(enum pt_dtype d)
{
	static const size_t sz[PTD_N] = {4, 8, 2, 2, 8, 4, 2, 1, 1, 1};
	return (unsigned)d < PTD_N ? sz[d] : 0;
}

const char *pt_dtype_name(enum pt_dtype d)
{
	static const char *const nm[PTD_N] = {"float32", "float64", "float16", "bfloat16", "int64",
					      "int32", "int16", "int8", "uint8", "bool"};
	return (unsigned)d < PTD_N ? nm[d] : "?";
}

const char *pt_kind_name(enum pt_kind k)
{
	static const char *const nm[PT_NKINDS] = {
		"None", "bool", "int", "float", "str", "bytes", "list", "tuple", "dict", "tensor",
		"dtype", "numpy array", "global", "storage", "numpy dtype"};
	return (unsigned)k < PT_NKINDS ? nm[k] : "?";
}

static int ferr(struct pt_file *f, const char *fmt, ...)
{
	int n = snprintf(f->err, sizeof f->err, "%s: ", f->path);
	va_list ap;
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < sizeof f->err)
		vsnprintf(f->err + n, sizeof f->err - n, fmt, ap);
	va_end(ap);
	return -1;
}

const char *pt_error(const struct pt_file *f) { return f->err; }

void pt_close(struct pt_file *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->nvals_; i++) {
		struct pt_value *v = f->vals_[i];
		if (v->kind == PT_STR || v->kind == PT_BYTES)
			free(v->u.str.s);
		else if (v->kind == PT_LIST || v->kind == PT_TUPLE)
			free(v->u.seq.v);
		else if (v->kind == PT_DICT) {
			free(v->u.dict.k);
			free(v->u.dict.v);
		}
		free(v);
	}
	free(f->vals_);
	for (size_t i = 0; i < f->nstorages; i++) {
		free(f->storages[i]->key);
		free(f->storages[i]->location);
		free(f->storages[i]);
	}
	free(f->storages);
	if (f->zf_)
		zip_fclose(f->zf_);
	if (f->zip_)
		zip_discard(f->zip_);
	free(f->pkl_);
	free(f->archive);
	free(f->path);
	free(f);
}

/* what libzip itself would not refuse before it reads (1.7 crashes seeking in a stored entry
 * whose two sizes differ): an encrypted entry, or a stored one whose sizes disagree */
static int entry_sane(const zip_stat_t *st, const char *name, char *msg, size_t msglen)
{
	if ((st->valid & ZIP_STAT_ENCRYPTION_METHOD) && st->encryption_method != ZIP_EM_NONE) {
		snprintf(msg, msglen, "entry %s is encrypted; torch.save never encrypts", name);
		return 0;
	}
	if (st->comp_method == ZIP_CM_STORE && (st->valid & ZIP_STAT_COMP_SIZE) &&
	    st->comp_size != st->size) {
		snprintf(msg, msglen, "entry %s is stored uncompressed but its zip sizes differ (%llu "
			 "and %llu bytes): a damaged zip", name, (unsigned long long)st->size,
			 (unsigned long long)st->comp_size);
		return 0;
	}
	return 1;
}

const struct pt_storage *pt_storage_add_(struct pt_file *f, const char *key, enum pt_dtype dtype,
					 int64_t numel, const char *location, char *msg,
					 size_t msglen)
{
	for (size_t i = 0; i < f->nstorages; i++) {
		struct pt_storage *s = f->storages[i];
		if (strcmp(s->key, key) != 0)
			continue;
		if (s->dtype != dtype || s->numel != numel) {
			snprintf(msg, msglen, "storage '%s' is %s x %lld here and %s x %lld before",
				 key, pt_dtype_name(dtype), (long long)numel, pt_dtype_name(s->dtype),
				 (long long)s->numel);
			return NULL;
		}
		return s;
	}
	char name[300];
	snprintf(name, sizeof name, "%s/data/%s", f->archive, key);
	zip_int64_t idx = zip_name_locate(f->zip_, name, 0);
	if (idx < 0) {
		snprintf(msg, msglen, "storage '%s' has no entry %s in the zip", key, name);
		return NULL;
	}
	zip_stat_t st;
	if (zip_stat_index(f->zip_, (zip_uint64_t)idx, 0, &st) != 0) {
		snprintf(msg, msglen, "%s: %s", name, zip_strerror(f->zip_));
		return NULL;
	}
	if (!entry_sane(&st, name, msg, msglen))
		return NULL;
	if (st.comp_method != ZIP_CM_STORE) {
		snprintf(msg, msglen, "entry %s is compressed (zip method %u); torch.save stores "
			 "storages uncompressed: re-save it with torch.save or re-zip with zip -0",
			 name, (unsigned)st.comp_method);
		return NULL;
	}
	size_t es = pt_dtype_size(dtype);
	if (numel > (INT64_C(1) << 60) / (int64_t)es || st.size != (zip_uint64_t)numel * es) {
		snprintf(msg, msglen, "entry %s holds %llu bytes, not the %lld x %zu of a %s storage "
			 "of %lld elements", name, (unsigned long long)st.size, (long long)numel, es,
			 pt_dtype_name(dtype), (long long)numel);
		return NULL;
	}
	size_t c = f->capstorages_;
	if (c == f->nstorages) {
		c = c ? 2 * c : 16;
		struct pt_storage **q = realloc(f->storages, c * sizeof *q);
		if (!q)
			goto oom;
		f->storages = q;
		f->capstorages_ = c;
	}
	struct pt_storage *s = calloc(1, sizeof *s);
	if (!s)
		goto oom;
	f->storages[f->nstorages++] = s;
	s->key = strdup(key);
	s->location = strdup(location);
	if (!s->key || !s->location)
		goto oom;
	s->dtype = dtype;
	s->numel = numel;
	s->index = idx;
	return s;
oom:
	snprintf(msg, msglen, "entry %s: ", name);
	xalloc_msg(msg + strlen(msg), msglen - strlen(msg), "the storage's record", 0);
	return NULL;
}

/* the whole entry, NUL-terminated */
static uint8_t *read_entry(struct pt_file *f, zip_int64_t idx, const char *name, size_t max,
			   size_t *len)
{
	zip_stat_t st;
	if (zip_stat_index(f->zip_, (zip_uint64_t)idx, 0, &st) != 0)
		return ferr(f, "%s: %s", name, zip_strerror(f->zip_)), NULL;
	char msg[300];
	if (!entry_sane(&st, name, msg, sizeof msg))
		return ferr(f, "%s", msg), NULL;
	if (st.size > max)
		return ferr(f, "%s is %llu bytes, more than the %zu a %s can be", name,
			    (unsigned long long)st.size, max, name), NULL;
	uint8_t *b = malloc((size_t)st.size + 1);
	zip_file_t *zf = b ? zip_fopen_index(f->zip_, (zip_uint64_t)idx, 0) : NULL;
	if (!zf) {
		char oom[200];
		ferr(f, "%s: %s", name, b ? zip_strerror(f->zip_)
			 : xalloc_msg(oom, sizeof oom, "the zip entry's bytes", (size_t)st.size + 1));
		free(b);
		return NULL;
	}
	zip_int64_t got = zip_fread(zf, b, st.size);
	if (got != (zip_int64_t)st.size) {
		ferr(f, "%s: %s", name, got < 0 ? zip_file_strerror(zf) : "short read");
		zip_fclose(zf);
		free(b);
		return NULL;
	}
	zip_fclose(zf);
	b[st.size] = 0;
	*len = (size_t)st.size;
	return b;
}

/* what the file is when libzip will not open it */
static void not_zip(struct pt_file *f, int zerr)
{
	unsigned char h[4] = {0};
	FILE *fp = fopen(f->path, "rb");
	size_t n = fp ? fread(h, 1, sizeof h, fp) : 0;
	if (fp)
		fclose(fp);
	zip_error_t ze;
	zip_error_init_with_code(&ze, zerr);
	if (n >= 2 && h[0] == 0x80 && h[1] <= 5)
		ferr(f, "a legacy PyTorch file (torch < 1.6, or saved with "
		     "_use_new_zipfile_serialization=False), not the zip format lmtk reads: load it "
		     "with torch >= 1.6 and torch.save it again");
	else if (n == 4 && !memcmp(h, "PK\3\4", 4))
		ferr(f, "a damaged or truncated zip (%s): copy it again", zip_error_strerror(&ze));
	else if (zerr == ZIP_ER_NOENT || zerr == ZIP_ER_OPEN || zerr == ZIP_ER_READ)
		ferr(f, "%s", zip_error_strerror(&ze));
	else
		ferr(f, "not a PyTorch .pt file (neither a zip nor torch's legacy format): %s",
		     zip_error_strerror(&ze));
	zip_error_fini(&ze);
}

struct pt_file *pt_open(const char *path, char *err, size_t errlen)
{
	struct pt_file *f = calloc(1, sizeof *f);
	if (!f || !(f->path = strdup(path))) {
		xalloc_err_in(err, errlen, path, "the checkpoint reader", sizeof *f + strlen(path) + 1);
		free(f);
		return NULL;
	}
	f->zf_index_ = -1;
	int zerr = 0;
	if (!(f->zip_ = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &zerr))) {
		not_zip(f, zerr);
		goto fail;
	}
	/* ARCHIVE/data.pkl: exactly one, ARCHIVE any name */
	zip_int64_t n = zip_get_num_entries(f->zip_, 0), pkl = -1;
	for (zip_int64_t i = 0; i < n; i++) {
		const char *e = zip_get_name(f->zip_, (zip_uint64_t)i, 0);
		const char *sl = e ? strchr(e, '/') : NULL;
		if (!sl || sl == e || strcmp(sl, "/data.pkl") != 0)
			continue;
		if (pkl >= 0) {
			ferr(f, "two pickles in the zip (%s and %s)", f->archive, e);
			goto fail;
		}
		pkl = i;
		if (!(f->archive = strndup(e, (size_t)(sl - e)))) {
			char oom[200];
			ferr(f, "%s", xalloc_msg(oom, sizeof oom, "the zip's archive name",
						  (size_t)(sl - e) + 1));
			goto fail;
		}
	}
	if (pkl < 0) {
		ferr(f, "a zip without ARCHIVE/data.pkl: not written by torch.save");
		goto fail;
	}
	char name[300];
	snprintf(name, sizeof name, "%s/byteorder", f->archive);
	zip_int64_t bo = zip_name_locate(f->zip_, name, 0);
	if (bo >= 0) {
		size_t len;
		uint8_t *b = read_entry(f, bo, name, 64, &len);
		if (!b)
			goto fail;
		int little = !strcmp((char *)b, "little"), big = !strcmp((char *)b, "big");
		free(b);
		if (big) {
			ferr(f, "%s says 'big': a big-endian file; lmtk reads little-endian .pt files "
			     "only (load and re-save it on a little-endian machine)", name);
			goto fail;
		}
		if (!little) {
			ferr(f, "%s is neither 'little' nor 'big'", name);
			goto fail;
		}
	}
	snprintf(name, sizeof name, "%s/data.pkl", f->archive);
	size_t len;
	if (!(f->pkl_ = read_entry(f, pkl, name, PKL_MAX, &len)))
		goto fail;
	if (pkl_load(f, f->pkl_, len, name) != 0)
		goto fail;
	return f;
fail:
	snprintf(err, errlen, "%s", f->err);
	pt_close(f);
	return NULL;
}

/* after a failed seek or read libzip's file is in an error state (and 1.7 crashes seeking in
 * it): the next read opens the entry again */
static int zf_fail(struct pt_file *f)
{
	zip_fclose(f->zf_);
	f->zf_ = NULL;
	f->zf_index_ = -1;
	return -1;
}

/* bytes [off, off + n) of storage s into dst */
static int read_bytes(struct pt_file *f, const struct pt_storage *s, uint64_t off, void *dst,
		      size_t n)
{
	if (f->zf_index_ != s->index) {
		if (f->zf_)
			zip_fclose(f->zf_);
		f->zf_index_ = -1;
		if (!(f->zf_ = zip_fopen_index(f->zip_, (zip_uint64_t)s->index, 0)))
			return ferr(f, "%s/data/%s: %s", f->archive, s->key, zip_strerror(f->zip_));
		f->zf_index_ = s->index;
	}
	if (zip_fseek(f->zf_, (zip_int64_t)off, SEEK_SET) != 0) {
		ferr(f, "%s/data/%s: seek to %llu: %s", f->archive, s->key,
		     (unsigned long long)off, zip_file_strerror(f->zf_));
		return zf_fail(f);
	}
	for (size_t done = 0; done < n;) {
		zip_int64_t r = zip_fread(f->zf_, (char *)dst + done, n - done);
		if (r <= 0) {
			ferr(f, "%s/data/%s: %s at byte %llu", f->archive, s->key,
			     r < 0 ? zip_file_strerror(f->zf_) : "unexpected end",
			     (unsigned long long)(off + done));
			return zf_fail(f);
		}
		done += (size_t)r;
	}
	/* at the entry's end: libzip has computed the CRC-32 of an entry read through in order
	 * from its start (sequential reads of a whole tensor are), and compares it with the zip's
	 * when the reader asks for more */
	if (off + n == (uint64_t)s->numel * pt_dtype_size(s->dtype)) {
		char c;
		if (zip_fread(f->zf_, &c, 1) < 0) {
			ferr(f, "%s/data/%s: %s: the storage's bytes are damaged", f->archive, s->key,
			     zip_file_strerror(f->zf_));
			return zf_fail(f);
		}
	}
	return 0;
}

/* the layout as runs: dims 0..outer-1 are walked, the rest are `inner` adjacent elements */
struct runs {
	const struct pt_tensor *t;
	int outer;
	int64_t inner, idx[PT_MAXDIM], base;    /* base: storage position of the run's start */
};

static void runs_init(struct runs *R, const struct pt_tensor *t, int64_t i)
{
	R->t = t;
	R->inner = 1;
	int d = t->ndim - 1;
	while (d >= 0 && (t->shape[d] == 1 || t->stride[d] == R->inner))
		R->inner *= t->shape[d--];
	R->outer = d + 1;
	int64_t q = i / R->inner;
	R->base = t->offset + i % R->inner;
	for (d = R->outer - 1; d >= 0; d--) {
		R->idx[d] = q % t->shape[d];
		q /= t->shape[d];
		R->base += R->idx[d] * t->stride[d];
	}
}

/* to the start of the next run */
static void runs_next(struct runs *R)
{
	const struct pt_tensor *t = R->t;
	for (int d = R->outer - 1; d >= 0; d--) {
		R->base += t->stride[d];
		if (++R->idx[d] < t->shape[d])
			break;
		R->base -= t->stride[d] * t->shape[d];
		R->idx[d] = 0;
	}
}

int pt_read(struct pt_file *f, const struct pt_tensor *t, int64_t a, int64_t b, void *dst)
{
	if (a < 0 || b < a || b > t->numel)
		return ferr(f, "elements [%lld, %lld) of a tensor of %lld", (long long)a,
			    (long long)b, (long long)t->numel);
	if (a == b)
		return 0;
	size_t es = pt_dtype_size(t->dtype);
	const struct pt_storage *s = t->storage;
	struct runs R;
	runs_init(&R, t, a);
	int64_t r0 = a % R.inner;
	if (R.inner < 64 && b - a > 1) {
		/* short runs: the window of the storage the range touches, if it is small */
		int64_t lo = INT64_MAX, hi = -1;
		struct runs W = R;
		for (int64_t i = a, r = r0; i < b; r = 0) {
			int64_t k = R.inner - r < b - i ? R.inner - r : b - i;
			lo = W.base < lo ? W.base : lo;
			hi = W.base + k - 1 > hi ? W.base + k - 1 : hi;
			i += k;
			if (i < b) {
				W.base -= r;
				runs_next(&W);
			}
		}
		int64_t w = hi - lo + 1;
		if (w <= 4 * (b - a) + 65536 && w * (int64_t)es <= (INT64_C(256) << 20)) {
			uint8_t *buf = malloc((size_t)w * es);
			if (!buf) {
				char oom[200];
				return ferr(f, "%s", xalloc_msg(oom, sizeof oom, "a window of the storage",
								 (size_t)w * es));
			}
			if (read_bytes(f, s, (uint64_t)lo * es, buf, (size_t)w * es) != 0) {
				free(buf);
				return -1;
			}
			uint8_t *o = dst;
			for (int64_t i = a, r = r0; i < b; r = 0) {
				int64_t k = R.inner - r < b - i ? R.inner - r : b - i;
				memcpy(o, buf + (size_t)(R.base - lo) * es, (size_t)k * es);
				o += (size_t)k * es;
				i += k;
				if (i < b) {
					R.base -= r;
					runs_next(&R);
				}
			}
			free(buf);
			return 0;
		}
	}
	uint8_t *o = dst;
	for (int64_t i = a, r = r0; i < b; r = 0) {
		int64_t k = R.inner - r < b - i ? R.inner - r : b - i;
		if (read_bytes(f, s, (uint64_t)R.base * es, o, (size_t)k * es) != 0)
			return -1;
		o += (size_t)k * es;
		i += k;
		if (i < b) {
			R.base -= r;
			runs_next(&R);
		}
	}
	return 0;
}

/* n elements of dtype d at src to float; one loop per dtype, so each vectorises */
static void to_f32(enum pt_dtype d, const uint8_t *src, float *o, int64_t n)
{
#define CONV(T, expr) do {                                   \
		for (int64_t j = 0; j < n; j++) {                   \
			T x;                                        \
			memcpy(&x, src + j * sizeof x, sizeof x);   \
			o[j] = (expr);                              \
		}                                                   \
	} while (0)
	switch (d) {
	case PTD_F32: memcpy(o, src, (size_t)n * 4); break;
	case PTD_F64: CONV(double, (float)x); break;
	case PTD_F16: CONV(uint16_t, st_f16_to_f32(x)); break;
	case PTD_BF16:
		for (int64_t j = 0; j < n; j++) {
			uint16_t h;
			memcpy(&h, src + 2 * j, 2);
			uint32_t u = (uint32_t)h << 16;
			memcpy(&o[j], &u, 4);
		}
		break;
	case PTD_I64: CONV(int64_t, (float)x); break;
	case PTD_I32: CONV(int32_t, (float)x); break;
	case PTD_I16: CONV(int16_t, (float)x); break;
	case PTD_I8: CONV(int8_t, (float)x); break;
	case PTD_U8: CONV(uint8_t, (float)x); break;
	case PTD_BOOL: CONV(uint8_t, x ? 1.0f : 0.0f); break;
	default: memset(o, 0, (size_t)n * 4); break;
	}
#undef CONV
}

int pt_read_f32(struct pt_file *f, const struct pt_tensor *t, int64_t a, int64_t b, float *dst)
{
	if (t->dtype == PTD_F32)
		return pt_read(f, t, a, b, dst);
	if (a < 0 || b < a || b > t->numel)
		return ferr(f, "elements [%lld, %lld) of a tensor of %lld", (long long)a,
			    (long long)b, (long long)t->numel);
	enum { CHUNK = 1 << 18 };            /* 2 MiB of int64: stays in cache for the conversion */
	size_t es = pt_dtype_size(t->dtype);
	uint8_t *buf = malloc(CHUNK * es);
	if (!buf) {
		char oom[200];
		return ferr(f, "%s", xalloc_msg(oom, sizeof oom, "the conversion chunk", CHUNK * es));
	}
	for (int64_t i = a; i < b;) {
		int64_t k = b - i < CHUNK ? b - i : CHUNK;
		if (pt_read(f, t, i, i + k, buf) != 0) {
			free(buf);
			return -1;
		}
		to_f32(t->dtype, buf, dst + (i - a), k);
		i += k;
	}
	free(buf);
	return 0;
}

const struct pt_value *pt_dict_get(const struct pt_value *d, const char *key)
{
	if (!d || d->kind != PT_DICT)
		return NULL;
	char *end;
	long long ik = *key ? strtoll(key, &end, 10) : 0;
	int is_int = *key && !*end;
	for (size_t i = 0; i < d->u.dict.n; i++) {
		const struct pt_value *k = d->u.dict.k[i];
		if (k->kind == PT_STR ? !strcmp(k->u.str.s, key) : is_int && k->u.i == ik)
			return d->u.dict.v[i];
	}
	return NULL;
}

const struct pt_value *pt_get(struct pt_file *f, const struct pt_value *from, int want, ...)
{
	const struct pt_value *v = from ? from : f->root;
	char path[400] = "";
	size_t pl = 0;
	va_list ap;
	va_start(ap, want);
	for (const char *k; (k = va_arg(ap, const char *));) {
		const struct pt_value *next = NULL;
		const char *where = pl ? path : "the top level";
		if (v->kind == PT_DICT) {
			if (!(next = pt_dict_get(v, k))) {
				ferr(f, "%s: no key '%s'", where, k);
				goto out;
			}
		} else if (v->kind == PT_LIST || v->kind == PT_TUPLE) {
			char *end;
			long long i = strtoll(k, &end, 10);
			if (!*k || *end || i < 0 || (unsigned long long)i >= v->u.seq.n) {
				ferr(f, "%s: no item %s in a %s of %zu", where, k, pt_kind_name(v->kind),
				     v->u.seq.n);
				goto out;
			}
			next = v->u.seq.v[i];
		} else {
			ferr(f, "%s is a %s: no '%s' in it", pl ? path : "the top level",
			     pt_kind_name(v->kind), k);
			goto out;
		}
		int m = snprintf(path + pl, sizeof path - pl, "%s%s", pl ? "/" : "", k);
		if (m > 0)
			pl = pl + (size_t)m < sizeof path ? pl + (size_t)m : sizeof path - 1;
		v = next;
	}
	if (want >= 0 && v->kind != (enum pt_kind)want) {
		ferr(f, "%s is a %s, not a %s", pl ? path : "the top level", pt_kind_name(v->kind),
		     pt_kind_name((enum pt_kind)want));
		v = NULL;
	}
	va_end(ap);
	return v;
out:
	va_end(ap);
	return NULL;
}
