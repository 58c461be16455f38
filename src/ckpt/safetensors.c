/* safetensors - see safetensors.h. */
#include "ckpt/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"
#include "xalloc.h"

#define ST_MAX_HEADER (100u << 20)   /* the format's own limit on the JSON header */

static const struct {
	const char *name;
	size_t size;
} dtypes[ST_NDTYPES] = {
	[ST_F32] = {"F32", 4}, [ST_F16] = {"F16", 2}, [ST_BF16] = {"BF16", 2},
	[ST_F64] = {"F64", 8}, [ST_I32] = {"I32", 4}, [ST_I64] = {"I64", 8}, [ST_U8] = {"U8", 1},
};

size_t st_dtype_size(enum st_dtype d) { return dtypes[d].size; }
const char *st_dtype_name(enum st_dtype d) { return dtypes[d].name; }

float st_bf16_to_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

uint16_t st_f32_to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	if ((u & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((u >> 16) | 0x40);   /* NaN stays NaN */
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

uint16_t st_f32_to_f16(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
	uint32_t a = u & 0x7fffffff;
	if (a > 0x7f800000)                  /* NaN: quiet, top mantissa bits kept */
		return sign | 0x7e00 | (uint16_t)((a >> 13) & 0x3ff);
	if (a >= 0x477ff000)                 /* >= 65520 rounds past the largest half: inf */
		return sign | 0x7c00;
	if (a < 0x38800000) {                /* below 2^-14: a subnormal half, units of 2^-24 */
		float x;
		memcpy(&x, &a, sizeof x);
		return sign | (uint16_t)lrintf(x * 16777216.0f);   /* exact scaling; ties to even */
	}
	uint32_t h = ((a >> 23) - 112) << 10 | ((a >> 13) & 0x3ff), rest = a & 0x1fff;
	if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
		h++;                         /* a carry into the exponent is right too */
	return sign | (uint16_t)h;
}

/* ---- writer ---- */

struct st_writer {
	char *path;
	struct outfile out;   /* published by st_commit, dropped by st_abort */
	int open;
	json_t *header, *meta;
	uint64_t declared, written;
	int started, failed;
	char err[512];
};

static int werr(struct st_writer *w, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->err, sizeof w->err, fmt, ap);
	va_end(ap);
	w->failed = 1;
	return -1;
}

const char *st_werror(const struct st_writer *w) { return w->err; }

struct st_writer *st_create(const char *path, char *err, size_t errlen)
{
	struct st_writer *w = calloc(1, sizeof *w);
	if (!w || !(w->path = strdup(path))) {
		xalloc_err_in(err, errlen, path, "the safetensors writer", sizeof *w + strlen(path) + 1);
		free(w);
		return NULL;
	}
	if (outfile_open(&w->out, path, 1 << 20, err, errlen) < 0) {
		free(w->path);
		free(w);
		return NULL;
	}
	w->out.mode = 0644;
	w->open = 1;
	w->header = json_object();
	w->meta = json_object();
	return w;
}

int st_declare(struct st_writer *w, const char *name, enum st_dtype dtype, int ndim,
	       const int64_t *shape)
{
	size_t n = dtypes[dtype].size;
	json_t *sh = json_array(), *t = json_object();
	if (w->started)
		return werr(w, "%s: tensor '%s' declared after data was written", w->path, name);
	if (json_object_get(w->header, name))
		return werr(w, "%s: tensor '%s' declared twice", w->path, name);
	for (int i = 0; i < ndim; i++) {
		json_array_append_new(sh, json_integer(shape[i]));
		n *= (size_t)shape[i];
	}
	json_object_set_new(t, "dtype", json_string(dtypes[dtype].name));
	json_object_set_new(t, "shape", sh);
	json_object_set_new(t, "data_offsets",
			    json_pack("[II]", (json_int_t)w->declared, (json_int_t)(w->declared + n)));
	json_object_set_new(w->header, name, t);
	w->declared += n;
	return 0;
}

int st_metadata(struct st_writer *w, const char *key, const char *value)
{
	json_object_set_new(w->meta, key, json_string(value));
	return 0;
}

static int write_all(struct st_writer *w, const void *p, size_t n)
{
	if (outfile_write(&w->out, p, n, w->err, sizeof w->err) < 0) {
		w->failed = 1;
		return -1;
	}
	return 0;
}

int st_write(struct st_writer *w, const void *data, size_t bytes)
{
	if (w->failed)
		return -1;
	if (!w->started) {
		if (json_object_size(w->meta))
			json_object_set(w->header, "__metadata__", w->meta);
		char *js = json_dumps(w->header, JSON_COMPACT | JSON_SORT_KEYS);
		if (!js) {
			char msg[200];
			return werr(w, "%s: %s", w->path,
				    xalloc_msg(msg, sizeof msg, "the safetensors header's text", 0));
		}
		size_t len = strlen(js), pad = (8 - len % 8) % 8;  /* data section 8-byte aligned */
		uint64_t hl = len + pad;
		unsigned char le[8];
		for (int i = 0; i < 8; i++)
			le[i] = (unsigned char)(hl >> (8 * i));
		int rc = write_all(w, le, 8) || write_all(w, js, len) ||
			 write_all(w, "        ", pad);
		free(js);
		if (rc)
			return -1;
		w->started = 1;
	}
	if (w->written + bytes > w->declared)
		return werr(w, "%s: more data than the declared tensors hold", w->path);
	w->written += bytes;
	return write_all(w, data, bytes);
}

int st_commit(struct st_writer *w)
{
	if (!w->started && st_write(w, "", 0) < 0)
		return -1;
	if (w->failed)
		return -1;
	if (w->written != w->declared)
		return werr(w, "%s: %llu of %llu declared bytes written", w->path,
			    (unsigned long long)w->written, (unsigned long long)w->declared);
	if (outfile_sync(&w->out, w->err, sizeof w->err) < 0 ||
	    outfile_publish(&w->out, w->err, sizeof w->err) < 0) {
		w->failed = 1;
		return -1;
	}
	st_abort(w);
	return 0;
}

void st_abort(struct st_writer *w)
{
	if (!w)
		return;
	if (w->open)
		outfile_discard(&w->out);   /* after st_commit: only frees */
	json_decref(w->header);
	json_decref(w->meta);
	free(w->path);
	free(w);
}

/* ---- reader ---- */

/* err = "PATH: " + the message; then f is closed */
static struct st_file *vfail(struct st_file *f, char *err, size_t errlen, const char *fmt,
			     va_list ap)
{
	int n = snprintf(err, errlen, "%s: ", f->path);
	if (n >= 0 && (size_t)n < errlen)
		vsnprintf(err + n, errlen - n, fmt, ap);
	st_close(f);
	return NULL;
}

static struct st_file *rfail(struct st_file *f, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(f, err, errlen, fmt, ap);
	va_end(ap);
	return NULL;
}

/* rfail for errors inside the header's tree: the message is formatted first, since its
 * arguments (tensor names) live in h, and only then is h freed. */
static struct st_file *rfail_h(json_t *h, struct st_file *f, char *err, size_t errlen,
			       const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(f, err, errlen, fmt, ap);
	va_end(ap);
	json_decref(h);
	return NULL;
}

static int parse_dtype(const char *s)
{
	for (int i = 0; i < ST_NDTYPES; i++)
		if (strcmp(s, dtypes[i].name) == 0)
			return i;
	return -1;
}

static int by_offset(const void *a, const void *b)
{
	const struct st_tensor *x = a, *y = b;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

struct st_file *st_open(const char *path, char *err, size_t errlen)
{
	struct st_file *f = calloc(1, sizeof *f);
	struct stat st;
	json_error_t je;
	if (!f || !(f->path = strdup(path))) {
		xalloc_err_in(err, errlen, path, "the safetensors reader", sizeof *f + strlen(path) + 1);
		free(f);
		return NULL;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return rfail(f, err, errlen, "%s", strerror(errno));
	if (fstat(fd, &st) < 0) {
		close(fd);
		return rfail(f, err, errlen, "%s", strerror(errno));
	}
	f->size = st.st_size;
	if (f->size < 8) {
		close(fd);
		return rfail(f, err, errlen, "truncated: %zu bytes, not even a header length", f->size);
	}
	f->map = mmap(NULL, f->size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (f->map == MAP_FAILED) {
		f->map = NULL;
		return rfail(f, err, errlen, "cannot map: %s", strerror(errno));
	}
	const unsigned char *b = f->map;
	uint64_t hl = 0;
	for (int i = 0; i < 8; i++)
		hl |= (uint64_t)b[i] << (8 * i);
	if (hl > ST_MAX_HEADER || hl > f->size - 8)
		return rfail(f, err, errlen, "truncated or not a safetensors file (header length %llu, "
			     "file %zu bytes)", (unsigned long long)hl, f->size);
	json_t *h = json_loadb((const char *)b + 8, hl, 0, &je);
	if (!h || !json_is_object(h)) {
		json_decref(h);
		return rfail(f, err, errlen, "corrupt header: %s", h ? "not a JSON object" : je.text);
	}
	uint64_t data_size = f->size - 8 - hl;
	size_t n = json_object_size(h);
	f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
	f->meta_keys = calloc(n ? n : 1, sizeof *f->meta_keys);
	f->meta_values = calloc(n ? n : 1, sizeof *f->meta_values);
	const char *key;
	json_t *v;
	json_object_foreach(h, key, v) {
		if (strcmp(key, "__metadata__") == 0) {
			const char *mk;
			json_t *mv;
			if (!json_is_object(v))
				goto bad_meta;
			size_t nm = json_object_size(v);
			free(f->meta_keys);
			free(f->meta_values);
			f->meta_keys = calloc(nm + 1, sizeof *f->meta_keys);
			f->meta_values = calloc(nm + 1, sizeof *f->meta_values);
			json_object_foreach(v, mk, mv) {
				if (!json_is_string(mv))
					goto bad_meta;
				f->meta_keys[f->nmeta] = strdup(mk);
				f->meta_values[f->nmeta++] = strdup(json_string_value(mv));
			}
			continue;
		}
		struct st_tensor *t = &f->tensors[f->ntensors];
		json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
		       *off = json_object_get(v, "data_offsets");
		t->name = strdup(key);
		f->ntensors++;
		int d = json_is_string(dt) ? parse_dtype(json_string_value(dt)) : -1;
		if (d < 0 || !json_is_array(sh) || json_array_size(sh) > 8 || !json_is_array(off) ||
		    json_array_size(off) != 2 || !json_is_integer(json_array_get(off, 0)) ||
		    !json_is_integer(json_array_get(off, 1))) {
			return rfail_h(h, f, err, errlen, "tensor '%s': bad dtype, shape or data_offsets", key);
		}
		t->dtype = d;
		t->ndim = json_array_size(sh);
		t->numel = 1;
		for (int i = 0; i < t->ndim; i++) {
			json_t *e = json_array_get(sh, i);
			if (!json_is_integer(e) || json_integer_value(e) < 0) {
				return rfail_h(h, f, err, errlen, "tensor '%s': bad shape", key);
			}
			t->shape[i] = json_integer_value(e);
			/* no more elements than the data section has bytes: checked before the
			 * product can wrap (a wrapped size could match crafted data_offsets) */
			if (t->shape[i] && t->numel > data_size / (uint64_t)t->shape[i]) {
				return rfail_h(h, f, err, errlen, "tensor '%s': its shape has more elements than "
					     "the file's %llu data bytes", key, (unsigned long long)data_size);
			}
			t->numel *= (size_t)t->shape[i];
		}
		json_int_t o0 = json_integer_value(json_array_get(off, 0)),
			   o1 = json_integer_value(json_array_get(off, 1));
		t->nbytes = t->numel * dtypes[d].size;
		if (o0 < 0 || o1 < o0 || (uint64_t)(o1 - o0) != t->nbytes) {
			return rfail_h(h, f, err, errlen, "tensor '%s': data_offsets [%lld, %lld) do not hold "
				     "its %zu bytes", key, (long long)o0, (long long)o1, t->nbytes);
		}
		if ((uint64_t)o1 > data_size) {
			return rfail_h(h, f, err, errlen, "truncated: tensor '%s' ends at byte %llu of the data "
				     "section, which has %llu", key, (unsigned long long)o1,
				     (unsigned long long)data_size);
		}
		t->offset = o0;
		t->data = b + 8 + hl + o0;
	}
	json_decref(h);
	/* overlapping tensors would alias each other: refuse */
	struct st_tensor *s = malloc((f->ntensors + 1) * sizeof *s);
	if (s) {
		memcpy(s, f->tensors, f->ntensors * sizeof *s);
		qsort(s, f->ntensors, sizeof *s, by_offset);
		for (int i = 1; i < f->ntensors; i++)
			if (s[i].offset < s[i - 1].offset + s[i - 1].nbytes) {
				char msg[300];
				snprintf(msg, sizeof msg, "tensors '%s' and '%s' overlap", s[i - 1].name,
					 s[i].name);
				free(s);
				return rfail(f, err, errlen, "%s", msg);
			}
		free(s);
	}
	return f;
bad_meta:
	json_decref(h);
	return rfail(f, err, errlen, "corrupt header: __metadata__ must map strings to strings");
}

const struct st_tensor *st_find(const struct st_file *f, const char *name)
{
	for (int i = 0; i < f->ntensors; i++)
		if (strcmp(f->tensors[i].name, name) == 0)
			return &f->tensors[i];
	return NULL;
}

const char *st_meta(const struct st_file *f, const char *key)
{
	for (int i = 0; i < f->nmeta; i++)
		if (strcmp(f->meta_keys[i], key) == 0)
			return f->meta_values[i];
	return NULL;
}

void st_close(struct st_file *f)
{
	if (!f)
		return;
	if (f->map)
		munmap(f->map, f->size);
	for (int i = 0; i < f->ntensors; i++)
		free(f->tensors[i].name);
	for (int i = 0; i < f->nmeta; i++) {
		free(f->meta_keys[i]);
		free(f->meta_values[i]);
	}
	free(f->meta_keys);
	free(f->meta_values);
	free(f->tensors);
	free(f->path);
	free(f);
}
