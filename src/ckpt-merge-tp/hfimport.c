/* hfimport - see hfimport.h. */
#include "ckpt-merge-tp/hfimport.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "file.h"
#include "fsx.h"
#include "msg.h"
#include "ckpt/pt.h"
#include "ckpt/safetensors.h"
#include "ckpt/tokrec.h"
#include "xalloc.h"

/* ---- the directory's files, confined ---- */

struct hfile {
	char *path;
	struct st_file *st;
	struct pt_file *pt;
};

/* one tensor of the files */
struct hft {
	const char *name;
	int file;
	const struct st_tensor *st;
	const struct pt_tensor *pt;
	int ndim;
	int64_t shape[PT_MAXDIM];
	int64_t numel;
	int used;
};

/* How an lmtk tensor is made of HF tensors (elements of its row-major shape). */
enum rop {
	R_COPY,       /* src[0] as it is; rows past real_rows (the vocabulary's padding) zero */
	R_T,          /* Conv1D [in, out] -> Linear [out, in] */
	R_GQKV_W,     /* GPT-2 c_attn.weight [h, 3h]: transposed, columns [3, heads, hd] -> rows
		       * [heads, 3, hd] */
	R_GQKV_B,     /* its bias */
	R_BQKV_W,     /* BERT query, key, value [h, h] (src[0..2]) interleaved per head */
	R_BQKV_B,
};

struct recipe {
	enum rop op;
	int src[3];
	int64_t real_rows;
};

#define HFI_CACHE 3

struct hfi {
	char *dir;
	struct hfile *files;
	int nfiles;
	struct hft *t;
	int nt;
	struct recipe *r;        /* [m.n] */
	int64_t hidden, heads;
	struct { int src; float *v; uint64_t used; } cache[HFI_CACHE];
	uint64_t clock;
};

static void hfi_free(void *ctx)
{
	struct hfi *h = ctx;
	if (!h)
		return;
	for (int i = 0; i < h->nfiles; i++) {
		st_close(h->files[i].st);
		pt_close(h->files[i].pt);
		free(h->files[i].path);
	}
	for (int i = 0; i < HFI_CACHE; i++)
		free(h->cache[i].v);
	free(h->files);
	free(h->t);
	free(h->r);
	free(h->dir);
	free(h);
}

/* DIR/name, which must be a regular file inside DIR once links are resolved.  1 there, 0 not
 * there (ENOENT), -1 + err (EXIT_USAGE: a link out, not a file; the caller says). */
static int confined(const char *dir, const char *name, char *path, size_t n, char *err,
		    size_t errlen)
{
	char why[PATH_MAX + 200];
	struct stat sb;
	snprintf(path, n, "%s/%s", dir, name);
	if (lstat(path, &sb) < 0 && errno == ENOENT)
		return 0;
	int rc = fsx_confined(dir, path, why, sizeof why);
	if (rc < 0 && errno == ENOENT)   /* a dangling link */
		return errf(err, errlen, "%s: a symbolic link to nothing", path);
	if (rc)   /* the Hub's cache: snapshots/REV/NAME -> ../../blobs/HASH */
		return errf(err, errlen, "%s: %s: a link out of the model directory is not followed "
			    "(a copy with the links resolved, cp -rL, is read)", path, why);
	if (stat(path, &sb) < 0 || !S_ISREG(sb.st_mode))
		return errf(err, errlen, "%s: not a regular file", path);
	return 1;
}

static json_t *read_json(const char *dir, const char *name, int required, int *rc, char *err,
			 size_t errlen)
{
	char path[PATH_MAX + 64];
	char *data;
	size_t len;
	json_error_t je;
	int in = confined(dir, name, path, sizeof path, err, errlen);
	*rc = EXIT_USAGE;
	if (in < 0)
		return NULL;
	if (in == 0) {
		if (required)
			errf(err, errlen, "%s: not there: not a Hugging Face model directory", path);
		return NULL;
	}
	struct stat sb;
	if (stat(path, &sb) == 0 && sb.st_size > (64 << 20)) {   /* a config, not a corpus */
		errf(err, errlen, "%s: %lld bytes: not a configuration file", path,
		     (long long)sb.st_size);
		return NULL;
	}
	if (file_read_all(path, &data, &len, err, errlen) < 0) {
		*rc = EXIT_FAILED;
		return NULL;
	}
	json_t *j = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
	free(data);
	if (!j || !json_is_object(j)) {
		errf(err, errlen, "%s:%d: %s", path, j ? 1 : je.line, j ? "not a JSON object" : je.text);
		json_decref(j);
		return NULL;
	}
	return j;
}

/* ---- config.json's numbers, every one range-checked ---- */

struct cfgr {
	json_t *j;
	const char *path;
	char *err;
	size_t errlen;
};

/* The first of keys that is there (a null counts as absent), an integer in [lo, hi]; dflt when
 * none is (LLONG_MIN: required).  0, or -1 + err. */
static int cint(struct cfgr *c, const char *const *keys, long long lo, long long hi,
		long long dflt, long long *out)
{
	for (; *keys; keys++) {
		json_t *x = json_object_get(c->j, *keys);
		if (!x || json_is_null(x))
			continue;
		if (!json_is_integer(x) || json_integer_value(x) < lo || json_integer_value(x) > hi) {
			char *s = json_dumps(x, JSON_ENCODE_ANY | JSON_COMPACT);
			errf(c->err, c->errlen, "%s: %s is %.40s: not an integer from %lld to %lld",
			     c->path, *keys, s ? s : "?", lo, hi);
			free(s);
			return -1;
		}
		*out = json_integer_value(x);
		return 0;
	}
	if (dflt == LLONG_MIN) {
		return errf(c->err, c->errlen, "%s: no %s", c->path, keys[-1]);
	}
	*out = dflt;
	return 0;
}

static int cnum(struct cfgr *c, const char *const *keys, double lo, double hi, double dflt,
		double *out)
{
	for (; *keys; keys++) {
		json_t *x = json_object_get(c->j, *keys);
		if (!x || json_is_null(x))
			continue;
		double v = json_number_value(x);
		if (!json_is_number(x) || !(v >= lo && v <= hi)) {
			char *s = json_dumps(x, JSON_ENCODE_ANY | JSON_COMPACT);
			errf(c->err, c->errlen, "%s: %s is %.40s: not a number from %g to %g", c->path,
			     *keys, s ? s : "?", lo, hi);
			free(s);
			return -1;
		}
		*out = v;
		return 0;
	}
	*out = dflt;
	return 0;
}

static const char *cstr(struct cfgr *c, const char *key)
{
	return json_string_value(json_object_get(c->j, key));
}

#define K(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ---- the tensors ---- */

static int find(const struct hfi *h, const char *name)
{
	for (int i = 0; i < h->nt; i++)
		if (strcmp(h->t[i].name, name) == 0)
			return i;
	return -1;
}

static int add_tensor(struct hfi *h, int file, const char *name, const struct st_tensor *st,
		      const struct pt_tensor *pt, char *err, size_t errlen)
{
	if (find(h, name) >= 0)
		return errf(err, errlen, "%s: tensor %s is also in %s: which one?", h->files[file].path,
			    name, h->files[h->t[find(h, name)].file].path);
	struct hft *n = realloc(h->t, (h->nt + 1) * sizeof *n);
	if (!n)
		return xalloc_err(err, errlen, "the tensor list", (h->nt + 1) * sizeof *n);
	h->t = n;
	struct hft *x = &h->t[h->nt++];
	memset(x, 0, sizeof *x);
	x->name = name;
	x->file = file;
	x->st = st;
	x->pt = pt;
	x->ndim = st ? st->ndim : pt->ndim;
	x->numel = 1;
	for (int d = 0; d < x->ndim; d++) {
		x->shape[d] = st ? st->shape[d] : pt->shape[d];
		x->numel *= x->shape[d];
	}
	return 0;
}

/* Is a tensor the class has that carries no weight lmtk keeps (buffers: the causal
 * mask GPT-2 files carry, BERT's position ids)?  Never read, whatever their dtype. */
static int buffer_name(const char *n)
{
	size_t l = strlen(n);
	static const char *const ends[] = {".attn.bias", ".attn.masked_bias", "position_ids", NULL};
	for (int i = 0; ends[i]; i++) {
		size_t e = strlen(ends[i]);
		if (l >= e && strcmp(n + l - e, ends[i]) == 0)
			return 1;
	}
	return 0;
}

static int open_file(struct hfi *h, const char *name, int *rc, char *err, size_t errlen)
{
	char path[PATH_MAX + 64];
	int in = confined(h->dir, name, path, sizeof path, err, errlen);
	*rc = EXIT_USAGE;
	if (in <= 0) {
		if (in == 0)
			errf(err, errlen, "%s: not there", path);
		return -1;
	}
	struct hfile *n = realloc(h->files, (h->nfiles + 1) * sizeof *n);
	if (!n)
		return *rc = EXIT_FAILED, xalloc_err(err, errlen, "the file list", 0);
	h->files = n;
	struct hfile *f = &h->files[h->nfiles++];
	memset(f, 0, sizeof *f);
	if (!(f->path = strdup(path)))
		return *rc = EXIT_FAILED, xalloc_err(err, errlen, "a file name", 0);
	size_t l = strlen(name);
	int fi = h->nfiles - 1;
	if (l > 12 && strcmp(name + l - 12, ".safetensors") == 0) {
		if (!(f->st = st_open(path, err, errlen)))
			return -1;
		for (int i = 0; i < f->st->ntensors; i++) {
			const struct st_tensor *t = &f->st->tensors[i];
			if (buffer_name(t->name))
				continue;
			if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16 &&
			    t->dtype != ST_F64)
				return errf(err, errlen, "%s: tensor %s is %s: the weights are F32, F16, "
					    "BF16 or F64", path, t->name, st_dtype_name(t->dtype));
			if (add_tensor(h, fi, t->name, t, NULL, err, errlen) < 0)
				return -1;
		}
		return 0;
	}
	if (!(f->pt = pt_open(path, err, errlen)))
		return -1;
	const struct pt_value *root = f->pt->root;
	if (root->kind != PT_DICT)
		return errf(err, errlen, "%s: a %s, not a state dict (name -> tensor)", path,
			    pt_kind_name(root->kind));
	for (size_t i = 0; i < root->u.dict.n; i++) {
		const struct pt_value *k = root->u.dict.k[i], *v = root->u.dict.v[i];
		if (k->kind != PT_STR)
			return errf(err, errlen, "%s: a key of the state dict is a %s, not a name", path,
				    pt_kind_name(k->kind));
		if (buffer_name(k->u.str.s))
			continue;
		if (v->kind != PT_TENSOR)
			return errf(err, errlen, "%s: %s is a %s, not a tensor", path, k->u.str.s,
				    pt_kind_name(v->kind));
		enum pt_dtype d = v->u.t.dtype;
		if (d != PTD_F32 && d != PTD_F16 && d != PTD_BF16 && d != PTD_F64)
			return errf(err, errlen, "%s: tensor %s is %s: the weights are float32, "
				    "float16, bfloat16 or float64", path, k->u.str.s, pt_dtype_name(d));
		if (add_tensor(h, fi, k->u.str.s, NULL, &v->u.t, err, errlen) < 0)
			return -1;
	}
	return 0;
}

/* The index's files (a weight_map's values: plain names in DIR), each opened once. */
static int open_index(struct hfi *h, const char *iname, int *rc, char *err, size_t errlen)
{
	json_t *idx = read_json(h->dir, iname, 1, rc, err, errlen), *wm, *v;
	const char *k;
	if (!idx)
		return -1;
	*rc = EXIT_USAGE;
	wm = json_object_get(idx, "weight_map");
	int ret = 0;
	if (!json_is_object(wm) || json_object_size(wm) == 0) {
		ret = errf(err, errlen, "%s/%s: no weight_map object", h->dir, iname);
		goto done;
	}
	json_object_foreach(wm, k, v) {
		const char *fn = json_string_value(v);
		if (!fn || !*fn || strchr(fn, '/') || !strcmp(fn, ".") || !strcmp(fn, "..") ||
		    strlen(fn) > 255) {
			ret = errf(err, errlen, "%s/%s: weight_map.%s is not a file name in the "
				   "directory", h->dir, iname, k);
			goto done;
		}
		int seen = 0;
		size_t fl = strlen(fn);
		for (int i = 0; i < h->nfiles && !seen; i++) {
			size_t pl = strlen(h->files[i].path);
			seen = pl > fl && h->files[i].path[pl - fl - 1] == '/' &&
			       strcmp(h->files[i].path + pl - fl, fn) == 0;
		}
		if (!seen && (ret = open_file(h, fn, rc, err, errlen)) < 0)
			goto done;
	}
	json_object_foreach(wm, k, v) {
		int t = find(h, k);
		const char *fn = json_string_value(v);
		size_t pl = t >= 0 ? strlen(h->files[h->t[t].file].path) : 0, fl = strlen(fn);
		if (t < 0 || pl < fl || strcmp(h->files[h->t[t].file].path + pl - fl, fn) != 0) {
			ret = errf(err, errlen, "%s/%s: weight_map puts %s in %s, which does not hold it",
				   h->dir, iname, k, fn);
			goto done;
		}
	}
done:
	json_decref(idx);
	return ret;
}

/* Elements [a, a+n) of HF tensor s, row-major, as floats. */
static int run(struct hfi *h, int s, int64_t a, int64_t n, float *dst, char *err, size_t errlen)
{
	const struct hft *x = &h->t[s];
	for (int i = 0; i < HFI_CACHE; i++)
		if (h->cache[i].v && h->cache[i].src == s) {
			memcpy(dst, h->cache[i].v + a, (size_t)n * sizeof *dst);
			return 0;
		}
	if (x->pt) {
		struct pt_file *pf = h->files[x->file].pt;
		if (pt_read_f32(pf, x->pt, a, a + n, dst) < 0)
			return errf(err, errlen, "%s", pt_error(pf));
		return 0;
	}
	const uint8_t *p = (const uint8_t *)x->st->data + (size_t)a * st_dtype_size(x->st->dtype);
	switch (x->st->dtype) {
	case ST_F32:
		memcpy(dst, p, (size_t)n * sizeof *dst);
		break;
	case ST_BF16:
	case ST_F16:
		for (int64_t i = 0; i < n; i++) {
			uint16_t u;
			memcpy(&u, p + 2 * i, 2);
			dst[i] = x->st->dtype == ST_BF16 ? st_bf16_to_f32(u) : st_f16_to_f32(u);
		}
		break;
	default:
		for (int64_t i = 0; i < n; i++) {
			double d;
			memcpy(&d, p + 8 * i, 8);
			dst[i] = (float)d;
		}
	}
	return 0;
}

/* HF tensor s whole, as floats, for the reorderings (never the embeddings: those are
 * copied): kept in a small cache. */
static const float *whole(struct hfi *h, int s, char *err, size_t errlen)
{
	int lru = 0;
	for (int i = 0; i < HFI_CACHE; i++) {
		if (h->cache[i].v && h->cache[i].src == s) {
			h->cache[i].used = ++h->clock;
			return h->cache[i].v;
		}
		if (h->cache[i].used < h->cache[lru].used)
			lru = i;
	}
	free(h->cache[lru].v);
	h->cache[lru].v = NULL;
	float *v = malloc((size_t)h->t[s].numel * sizeof *v);
	if (!v) {
		xalloc_err(err, errlen, h->t[s].name, (size_t)h->t[s].numel * sizeof *v);
		return NULL;
	}
	if (run(h, s, 0, h->t[s].numel, v, err, errlen) < 0) {
		free(v);
		return NULL;
	}
	h->cache[lru].v = v;
	h->cache[lru].src = s;
	h->cache[lru].used = ++h->clock;
	return v;
}

/* GPT-2's c_attn column of Megatron's qkv row R ([heads, 3, hd] -> [3, heads, hd]) */
static int64_t qkv_col(const struct hfi *h, int64_t R, int64_t *which, int64_t *within)
{
	int64_t hd = h->hidden / h->heads, head = R / (3 * hd), w = R / hd % 3, d = R % hd;
	if (which)
		*which = w;
	if (within)
		*within = head * hd + d;
	return w * h->hidden + head * hd + d;
}

/* the source: elements [a, b) of tensor t's weights (moments: zeros; one rank, one stage) */
static int src_read(void *ctx, int t, int g, int r, int s, int64_t a, int64_t b, float *dst,
		    char *err, size_t errlen)
{
	struct hfi *h = ctx;
	(void)r, (void)s;
	if (g != 0) {
		memset(dst, 0, (size_t)(b - a) * sizeof *dst);
		return 0;
	}
	const struct recipe *rc = &h->r[t];
	const struct hft *x = &h->t[rc->src[0]];
	int64_t cols = x->ndim == 2 ? (rc->op == R_T || rc->op == R_GQKV_W ? x->shape[0] : x->shape[1])
				    : 1;
	const float *w;
	switch (rc->op) {
	case R_COPY: {
		int64_t lim = rc->real_rows * cols, e = b < lim ? b : lim;
		if (a < e && run(h, rc->src[0], a, e - a, dst, err, errlen) < 0)
			return -1;
		if (b > (a > lim ? a : lim))
			memset(dst + ((a > lim ? a : lim) - a), 0,
			       (size_t)(b - (a > lim ? a : lim)) * sizeof *dst);
		return 0;
	}
	case R_T: {   /* lmtk [O, I] (o, i) = HF [I, O] (i, o) */
		int64_t O = x->shape[1];
		if (!(w = whole(h, rc->src[0], err, errlen)))
			return -1;
		for (int64_t e = a; e < b; e++)
			dst[e - a] = w[e % cols * O + e / cols];
		return 0;
	}
	case R_GQKV_W:
		if (!(w = whole(h, rc->src[0], err, errlen)))
			return -1;
		for (int64_t e = a; e < b; e++)
			dst[e - a] = w[e % cols * 3 * h->hidden + qkv_col(h, e / cols, NULL, NULL)];
		return 0;
	case R_GQKV_B:
		if (!(w = whole(h, rc->src[0], err, errlen)))
			return -1;
		for (int64_t e = a; e < b; e++)
			dst[e - a] = w[qkv_col(h, e, NULL, NULL)];
		return 0;
	case R_BQKV_W:
	case R_BQKV_B: {   /* row by row: each a run of one of query, key, value */
		int64_t c = rc->op == R_BQKV_W ? h->hidden : 1;
		for (int64_t e = a; e < b;) {
			int64_t R = e / c, i = e % c, n = c - i < b - e ? c - i : b - e, which, row;
			qkv_col(h, R, &which, &row);
			if (run(h, rc->src[which], row * c + i, n, dst + (e - a), err, errlen) < 0)
				return -1;
			e += n;
		}
		return 0;
	}
	}
	return errf(err, errlen, "unknown recipe");
}

/* ---- the plan: each lmtk tensor from which HF tensor(s), shapes checked ---- */

struct planner {
	struct hfi *h;
	const char *cls;
	char *err;
	size_t errlen;
};

static void shape_str(char *s, size_t n, int ndim, const int64_t *shape)
{
	int k = snprintf(s, n, "[");
	for (int d = 0; d < ndim && k > 0 && (size_t)k < n; d++)
		k += snprintf(s + k, n - k, "%s%lld", d ? ", " : "", (long long)shape[d]);
	if (k > 0 && (size_t)k < n)
		snprintf(s + k, n - k, "]");
}

/* HF tensor `name` with shape {d0[, d1]} (d1 0: 1-D): its index, or -1 + err. */
static int need(struct planner *p, const char *name, int64_t d0, int64_t d1)
{
	struct hfi *h = p->h;
	int s = find(h, name);
	if (s < 0)
		return errf(p->err, p->errlen, "%s: no tensor %s, which %s has: an incomplete "
			    "model", h->dir, name, p->cls);
	struct hft *x = &h->t[s];
	int64_t want[2] = {d0, d1};
	int nd = d1 ? 2 : 1;
	if (x->ndim != nd || x->shape[0] != d0 || (nd == 2 && x->shape[1] != d1)) {
		char got[120], exp[64];
		shape_str(got, sizeof got, x->ndim, x->shape);
		shape_str(exp, sizeof exp, nd, want);
		return errf(p->err, p->errlen, "%s: tensor %s is %s; config.json makes it %s",
			    h->files[x->file].path, name, got, exp);
	}
	x->used = 1;
	return s;
}

static int set(struct planner *p, int t, enum rop op, const char *name, int64_t d0, int64_t d1,
	       int64_t real_rows)
{
	int s = need(p, name, d0, d1);
	if (s < 0)
		return -1;
	p->h->r[t] = (struct recipe){op, {s, s, s}, real_rows};
	return 0;
}

/* Tensor `name`, if there, must equal tensor s (a tied copy): 0, or -1 + err. */
static int tied(struct planner *p, const char *name, int s, const char *what)
{
	struct hfi *h = p->h;
	int c = find(h, name);
	if (c < 0)
		return 0;
	struct hft *x = &h->t[c], *y = &h->t[s];
	if (x->ndim != y->ndim || x->numel != y->numel || memcmp(x->shape, y->shape,
								 sizeof x->shape[0] * x->ndim)) {
		char a[120], b[120];
		shape_str(a, sizeof a, x->ndim, x->shape);
		shape_str(b, sizeof b, y->ndim, y->shape);
		return errf(p->err, p->errlen, "%s: tensor %s is %s; config.json makes it %s (as %s)",
			    h->files[x->file].path, name, a, b, y->name);
	}
	x->used = 1;
	enum { N = 1 << 16 };
	float *u = malloc(2 * N * sizeof *u);
	if (!u)
		return xalloc_err(p->err, p->errlen, "the tied-weights comparison", 2 * N * sizeof *u);
	int ret = 0;
	for (int64_t a = 0; a < x->numel && !ret; a += N) {
		int64_t n = x->numel - a < N ? x->numel - a : N;
		if (run(h, c, a, n, u, p->err, p->errlen) < 0 ||
		    run(h, s, a, n, u + N, p->err, p->errlen) < 0) {
			ret = -1;
			break;
		}
		for (int64_t i = 0; i < n; i++)
			if (memcmp(&u[i], &u[N + i], sizeof *u)) {
				ret = errf(p->err, p->errlen, "%s: %s differs from %s (element %lld): %s; "
					   "lmtk's %s is the word embeddings, as Megatron's, and cannot "
					   "hold another", h->files[x->file].path, name, y->name,
					   (long long)(a + i), what, what);
				break;
			}
	}
	free(u);
	return ret;
}

/* the layer tensors: HF suffixes per lmtk `which` (NULL: the qkv, done by the caller) */
static int plan_layers(struct planner *p, const struct lt_model *m, const char *fmt,
		       const char *const names[LT_LAYER_TENSORS], int conv1d)
{
	char name[200], pre[160];
	int64_t h = m->hidden;
	for (int t = m->layer0; t < m->layer0 + m->layers * LT_LAYER_TENSORS; t++) {
		const struct lt_tensor *T = &m->t[t];
		snprintf(pre, sizeof pre, fmt, T->layer);
		if (!names[T->which]) {   /* the qkv */
			int w = T->which == LT_QKV_W;
			if (conv1d) {
				snprintf(name, sizeof name, "%sattn.c_attn.%s", pre, w ? "weight" : "bias");
				if (set(p, t, w ? R_GQKV_W : R_GQKV_B, name, w ? h : 3 * h, w ? 3 * h : 0,
					0) < 0)
					return -1;
				continue;
			}
			static const char *q[3] = {"query", "key", "value"};
			p->h->r[t].op = w ? R_BQKV_W : R_BQKV_B;
			for (int k = 0; k < 3; k++) {
				snprintf(name, sizeof name, "%sattention.self.%s.%s", pre, q[k],
					 w ? "weight" : "bias");
				if ((p->h->r[t].src[k] = need(p, name, h, w ? h : 0)) < 0)
					return -1;
			}
			continue;
		}
		snprintf(name, sizeof name, "%s%s", pre, names[T->which]);
		if (conv1d && T->ndim == 2) {
			if (set(p, t, R_T, name, T->shape[1], T->shape[0], 0) < 0)
				return -1;
		} else if (set(p, t, R_COPY, name, T->shape[0], T->ndim == 2 ? T->shape[1] : 0,
			       T->shape[0]) < 0) {
			return -1;
		}
	}
	return 0;
}

enum cls { C_GPT2, C_BLOOM, C_BERT_PT, C_BERT_MLM };

static int plan(struct planner *p, const struct lt_model *m, enum cls k, const char *prefix)
{
	char name[200], fmt[160];
	int64_t h = m->hidden, V = m->vocab;
	if (k == C_GPT2) {
		static const char *const g[LT_LAYER_TENSORS] = {
			"ln_1.weight", "ln_1.bias", NULL, NULL, "attn.c_proj.weight", "attn.c_proj.bias",
			"ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
			"mlp.c_proj.weight", "mlp.c_proj.bias"};
		snprintf(name, sizeof name, "%swte.weight", prefix);
		if (set(p, m->wte, R_COPY, name, V, h, V) < 0)
			return -1;
		snprintf(name, sizeof name, "%swpe.weight", prefix);
		if (set(p, m->wpe, R_COPY, name, m->max_pos, h, m->max_pos) < 0)
			return -1;
		snprintf(fmt, sizeof fmt, "%sh.%%d.", prefix);
		if (plan_layers(p, m, fmt, g, 1) < 0)
			return -1;
	} else if (k == C_BLOOM) {
		static const char *const b[LT_LAYER_TENSORS] = {
			"input_layernorm.weight", "input_layernorm.bias",
			"self_attention.query_key_value.weight", "self_attention.query_key_value.bias",
			"self_attention.dense.weight", "self_attention.dense.bias",
			"post_attention_layernorm.weight", "post_attention_layernorm.bias",
			"mlp.dense_h_to_4h.weight", "mlp.dense_h_to_4h.bias",
			"mlp.dense_4h_to_h.weight", "mlp.dense_4h_to_h.bias"};
		snprintf(name, sizeof name, "%sword_embeddings.weight", prefix);
		if (set(p, m->wte, R_COPY, name, V, h, V) < 0)
			return -1;
		snprintf(name, sizeof name, "%sword_embeddings_layernorm.weight", prefix);
		if (set(p, m->eln_w, R_COPY, name, h, 0, h) < 0)
			return -1;
		snprintf(name, sizeof name, "%sword_embeddings_layernorm.bias", prefix);
		if (set(p, m->eln_b, R_COPY, name, h, 0, h) < 0)
			return -1;
		snprintf(fmt, sizeof fmt, "%sh.%%d.", prefix);
		if (plan_layers(p, m, fmt, b, 0) < 0)
			return -1;
	}
	if (k == C_GPT2 || k == C_BLOOM) {
		snprintf(name, sizeof name, "%sln_f.weight", prefix);
		if (set(p, m->lnf_w, R_COPY, name, h, 0, h) < 0)
			return -1;
		snprintf(name, sizeof name, "%sln_f.bias", prefix);
		if (set(p, m->lnf_b, R_COPY, name, h, 0, h) < 0)
			return -1;
		return tied(p, "lm_head.weight", p->h->r[m->wte].src[0], "output layer");
	}
	/* BERT */
	static const char *const e[LT_LAYER_TENSORS] = {
		"attention.ln.weight", "attention.ln.bias", NULL, NULL,
		"attention.output.dense.weight", "attention.output.dense.bias",
		"ln.weight", "ln.bias", "intermediate.dense.weight", "intermediate.dense.bias",
		"output.dense.weight", "output.dense.bias"};
	snprintf(name, sizeof name, "%sembeddings.word_embeddings.weight", prefix);
	if (set(p, m->wte, R_COPY, name, V, h, V) < 0)
		return -1;
	snprintf(name, sizeof name, "%sembeddings.position_embeddings.weight", prefix);
	if (set(p, m->wpe, R_COPY, name, m->max_pos, h, m->max_pos) < 0)
		return -1;
	snprintf(name, sizeof name, "%sembeddings.token_type_embeddings.weight", prefix);
	if (m->tte >= 0 ? set(p, m->tte, R_COPY, name, m->num_tokentypes, h, m->num_tokentypes) < 0
			: need(p, name, 1, h) < 0)   /* the zero row of a model without types */
		return -1;
	snprintf(fmt, sizeof fmt, "%sencoder.layer.%%d.", prefix);
	if (plan_layers(p, m, fmt, e, 0) < 0)
		return -1;
	static const struct { size_t off; const char *name; } heads[] = {
		{offsetof(struct lt_model, lnf_w), "encoder.ln.weight"},
		{offsetof(struct lt_model, lnf_b), "encoder.ln.bias"},
		{offsetof(struct lt_model, pool_w), "pooler.dense.weight"},
		{offsetof(struct lt_model, pool_b), "pooler.dense.bias"},
		{offsetof(struct lt_model, hd_w), "cls.predictions.transform.dense.weight"},
		{offsetof(struct lt_model, hd_b), "cls.predictions.transform.dense.bias"},
		{offsetof(struct lt_model, hd_ln_w), "cls.predictions.transform.LayerNorm.weight"},
		{offsetof(struct lt_model, hd_ln_b), "cls.predictions.transform.LayerNorm.bias"},
		{offsetof(struct lt_model, lm_bias), "cls.predictions.bias"},
		{offsetof(struct lt_model, bin_w), "cls.seq_relationship.weight"},
		{offsetof(struct lt_model, bin_b), "cls.seq_relationship.bias"},
	};
	for (size_t i = 0; i < sizeof heads / sizeof *heads; i++) {
		int t = *(const int *)((const char *)m + heads[i].off);
		if (t < 0)
			continue;
		const struct lt_tensor *T = &m->t[t];
		snprintf(name, sizeof name, "%s%s", strncmp(heads[i].name, "cls.", 4) ? prefix : "",
			 heads[i].name);
		int64_t rows = t == m->lm_bias ? V : T->shape[0];
		if (set(p, t, R_COPY, name, rows, T->ndim == 2 ? T->shape[1] : 0, rows) < 0)
			return -1;
	}
	if (tied(p, "cls.predictions.decoder.weight", p->h->r[m->wte].src[0], "LM head's decoder") < 0)
		return -1;
	return tied(p, "cls.predictions.decoder.bias", p->h->r[m->lm_bias].src[0],
		    "LM head's decoder bias");
}

/* ---- the tokenizer the directory has, recorded as train records its own ---- */

static int tokenizer(const char *dir, enum cls k, json_t **rec, char *err, size_t errlen)
{
	static const char *const names[] = {"vocab.json", "merges.txt", "tokenizer.json",
					    "vocab.txt", "special_tokens_map.json",
					    "tokenizer_config.json"};
	char path[6][PATH_MAX + 64];
	int has[6];
	for (int i = 0; i < 6; i++)
		if ((has[i] = confined(dir, names[i], path[i], sizeof path[i], err, errlen)) < 0)
			return EXIT_USAGE;
	const char *type = NULL, *vocab = NULL, *merges = NULL, *nop = NULL;
	if (k == C_BERT_PT || k == C_BERT_MLM) {
		if (has[3]) {
			int lower = 1, rc;
			json_t *tc = has[5] ? read_json(dir, names[5], 0, &rc, err, errlen) : NULL;
			if (has[5] && !tc)
				return rc;
			if (json_is_false(json_object_get(tc, "do_lower_case")))
				lower = 0;
			json_decref(tc);
			type = lower ? "BertWordPieceLowerCase" : "BertWordPieceCase";
			vocab = path[3];
		}
	} else if (has[0] && has[1]) {
		type = "GPT2BPETokenizer";
		vocab = path[0];
		merges = path[1];
	} else if (has[2]) {
		type = "PretrainedFromHF";
		nop = dir;
	}
	if (!type) {
		*rec = NULL;
		return 0;
	}
	char *s = tokrec_json(type, vocab, merges, nop);
	json_error_t je;
	if (!s || !(*rec = json_loads(s, 0, &je))) {
		free(s);
		return xalloc_err(err, errlen, "the tokenizer record", 0), EXIT_FAILED;
	}
	free(s);
	return 0;
}

/* ---- config.json -> the model ---- */

static const char *const class_names[] = {"GPT2LMHeadModel", "BloomForCausalLM",
					  "MegatronBertForPreTraining", "MegatronBertForMaskedLM"};

static int read_class(struct cfgr *c, enum cls *k)
{
	json_t *a = json_object_get(c->j, "architectures");
	const char *arch = json_is_array(a) && json_array_size(a) == 1
				   ? json_string_value(json_array_get(a, 0)) : NULL;
	const char *mt = cstr(c, "model_type");
	if (json_is_array(a) && json_array_size(a) > 1)
		return errf(c->err, c->errlen, "%s: architectures lists %zu classes: which one?",
			    c->path, json_array_size(a));
	static const struct { const char *name; enum cls k; } known[] = {
		{"GPT2LMHeadModel", C_GPT2}, {"GPT2Model", C_GPT2}, {"BloomForCausalLM", C_BLOOM},
		{"BloomModel", C_BLOOM}, {"MegatronBertForPreTraining", C_BERT_PT},
		{"MegatronBertForMaskedLM", C_BERT_MLM}};
	if (!arch && a && !json_is_null(a))
		return errf(c->err, c->errlen, "%s: architectures is not a list of one class name",
			    c->path);
	if (!arch && mt && !strcmp(mt, "gpt2"))
		arch = "GPT2LMHeadModel";
	if (!arch && mt && !strcmp(mt, "bloom"))
		arch = "BloomForCausalLM";
	for (size_t i = 0; arch && i < sizeof known / sizeof *known; i++)
		if (strcmp(arch, known[i].name) == 0) {
			*k = known[i].k;
			return 0;
		}
	return errf(c->err, c->errlen, "%s: %s%.100s%s: ckpt-merge-tp --from hf reads "
		    "GPT2LMHeadModel, BloomForCausalLM, MegatronBertForPreTraining and "
		    "MegatronBertForMaskedLM (the classes lmtk's models are)", c->path,
		    arch ? "architecture " : mt ? "model_type " : "no architectures nor model_type",
		    arch ? arch : mt ? mt : "", arch || mt ? " is not one lmtk holds" : "");
}

/* The manifest's "model" object from config.json; 0, or -1 + err. */
static json_t *read_model(struct cfgr *c, enum cls k, struct hfi *h, int divisible_by, int *post_ln,
			  int *tokentypes)
{
	long long L, H, NH, F, P, V, seq, NT = 0;
	double eps, std, hd, ad;
	int bert = k == C_BERT_PT || k == C_BERT_MLM, gelu_tanh = 0;
	const char *act;
	*post_ln = 0;
	if (k == C_GPT2) {
		if (cint(c, K("n_layer"), 1, 4096, LLONG_MIN, &L) || cint(c, K("n_embd"), 1, 1 << 17, LLONG_MIN, &H) ||
		    cint(c, K("n_head"), 1, 1 << 17, LLONG_MIN, &NH) ||
		    cint(c, K("n_inner"), 1, 1 << 20, 4 * H, &F) ||
		    cint(c, K("n_positions"), 1, 1 << 22, LLONG_MIN, &P) ||
		    cint(c, K("n_ctx"), 1, 1 << 22, P, &seq) ||
		    cint(c, K("vocab_size"), 1, 1 << 24, LLONG_MIN, &V) ||
		    cnum(c, K("layer_norm_epsilon"), 1e-30, 0.5, 1e-5, &eps) ||
		    cnum(c, K("initializer_range"), 0, 10, 0.02, &std) ||
		    cnum(c, K("resid_pdrop"), 0, 1, 0.1, &hd) || cnum(c, K("attn_pdrop"), 0, 1, 0.1, &ad))
			return NULL;
		act = cstr(c, "activation_function");
		if (act && strcmp(act, "gelu_new") && strcmp(act, "gelu_pytorch_tanh")) {
			errf(c->err, c->errlen, "%s: activation_function \"%.40s\": lmtk's GPT MLP is the "
			     "tanh GeLU (\"gelu_new\")", c->path, act);
			return NULL;
		}
		if (json_is_false(json_object_get(c->j, "scale_attn_weights")) ||
		    json_is_true(json_object_get(c->j, "scale_attn_by_inverse_layer_idx")) ||
		    json_is_true(json_object_get(c->j, "add_cross_attention"))) {
			errf(c->err, c->errlen, "%s: scale_attn_weights false, "
			     "scale_attn_by_inverse_layer_idx or add_cross_attention: lmtk's attention "
			     "is scaled by 1/sqrt(head_dim) alone, without cross-attention", c->path);
			return NULL;
		}
		if (seq > P)
			seq = P;
	} else if (k == C_BLOOM) {
		if (cint(c, K("n_layer", "num_hidden_layers"), 1, 4096, LLONG_MIN, &L) ||
		    cint(c, K("hidden_size", "n_embed"), 1, 1 << 17, LLONG_MIN, &H) ||
		    cint(c, K("n_head", "num_attention_heads"), 1, 1 << 17, LLONG_MIN, &NH) ||
		    cint(c, K("vocab_size"), 1, 1 << 24, LLONG_MIN, &V) ||
		    cint(c, K("seq_length", "n_positions", "max_position_embeddings"), 1, 1 << 22, -1, &P) ||
		    cnum(c, K("layer_norm_epsilon"), 1e-30, 0.5, 1e-5, &eps) ||
		    cnum(c, K("initializer_range"), 0, 10, 0.02, &std) ||
		    cnum(c, K("hidden_dropout"), 0, 1, 0, &hd) || cnum(c, K("attention_dropout"), 0, 1, 0, &ad))
			return NULL;
		if (P < 0) {   /* ALiBi has no table: the length BLOOM trained at */
			P = 2048;
			warn("note: %s gives no seq_length: the checkpoint records "
			     "--max-position-embeddings 2048 (BLOOM's; ALiBi has no position table, so "
			     "train may use another --seq-length up to it)", c->path);
		}
		F = 4 * H;
		seq = P;
		*post_ln = json_is_true(json_object_get(c->j, "apply_residual_connection_post_layernorm"));
	} else {
		if (cint(c, K("num_hidden_layers"), 1, 4096, LLONG_MIN, &L) ||
		    cint(c, K("hidden_size"), 1, 1 << 17, LLONG_MIN, &H) ||
		    cint(c, K("num_attention_heads"), 1, 1 << 17, LLONG_MIN, &NH) ||
		    cint(c, K("intermediate_size"), 1, 1 << 20, 4 * H, &F) ||
		    cint(c, K("max_position_embeddings"), 1, 1 << 22, LLONG_MIN, &P) ||
		    cint(c, K("vocab_size"), 1, 1 << 24, LLONG_MIN, &V) ||
		    cint(c, K("type_vocab_size"), 1, 1 << 10, 2, &NT) ||
		    cnum(c, K("layer_norm_eps"), 1e-30, 0.5, 1e-12, &eps) ||
		    cnum(c, K("initializer_range"), 0, 10, 0.02, &std) ||
		    cnum(c, K("hidden_dropout_prob"), 0, 1, 0.1, &hd) ||
		    cnum(c, K("attention_probs_dropout_prob"), 0, 1, 0.1, &ad))
			return NULL;
		seq = P;
		act = cstr(c, "hidden_act");
		if (!act || !strcmp(act, "gelu"))
			gelu_tanh = 0;
		else if (!strcmp(act, "gelu_new") || !strcmp(act, "gelu_pytorch_tanh"))
			gelu_tanh = 1;
		else {
			errf(c->err, c->errlen, "%s: hidden_act \"%.40s\": lmtk's BERT has the GeLU "
			     "(\"gelu\", or \"gelu_new\" with --openai-gelu)", c->path, act);
			return NULL;
		}
		const char *pe = cstr(c, "position_embedding_type");
		if (pe && strcmp(pe, "absolute")) {
			errf(c->err, c->errlen, "%s: position_embedding_type \"%.40s\": lmtk's BERT has "
			     "learned absolute positions", c->path, pe);
			return NULL;
		}
		/* a model without token types exports one zero row (hfbert.c): back to none */
		int z = -1;
		char name[128];
		snprintf(name, sizeof name, "bert.embeddings.token_type_embeddings.weight");
		if (NT == 1 && (z = find(h, name)) >= 0 && h->t[z].ndim == 2 && h->t[z].shape[0] == 1 &&
		    h->t[z].shape[1] == H) {
			float *row = malloc((size_t)H * sizeof *row);
			int zero = row && run(h, z, 0, H, row, c->err, c->errlen) == 0;
			for (long long i = 0; zero && i < H; i++)
				zero = row[i] == 0;
			free(row);
			if (zero)
				NT = 0;
		}
	}
	if (H % NH) {
		errf(c->err, c->errlen, "%s: %lld heads do not divide the hidden size %lld", c->path, NH, H);
		return NULL;
	}
	*tokentypes = (int)NT;
	int padded = lt_padded_vocab((int)V, divisible_by, 1);
	if (padded < 0) {
		errf(c->err, c->errlen, "%s: vocab_size %lld padded to a multiple of %d is too large",
		     c->path, V, divisible_by);
		return NULL;
	}
	json_t *mo = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:s,s:b,s:f,s:f,s:f,s:f,s:I,s:b}",
			       "num_layers", (json_int_t)L, "hidden_size", (json_int_t)H,
			       "num_attention_heads", (json_int_t)NH, "ffn_hidden_size", (json_int_t)F,
			       "seq_length", (json_int_t)seq, "max_position_embeddings", (json_int_t)P,
			       "vocab_size", (json_int_t)V, "padded_vocab_size", (json_int_t)padded,
			       "position_embedding_type", k == C_BLOOM ? "alibi" : "learned",
			       "embed_layernorm", k == C_BLOOM, "layernorm_epsilon", (double)(float)eps,
			       "init_method_std", (double)(float)std, "hidden_dropout", (double)(float)hd,
			       "attention_dropout", (double)(float)ad, "seed", (json_int_t)1234,
			       "apply_residual_connection_post_layernorm", *post_ln);
	if (mo && bert) {
		json_object_set_new(mo, "model_type", json_string("bert"));
		json_object_set_new(mo, "num_tokentypes", json_integer(NT));
		json_object_set_new(mo, "binary_head", json_boolean(k == C_BERT_PT));
		json_object_set_new(mo, "openai_gelu", json_boolean(gelu_tanh));
	}
	if (!mo)
		xalloc_err(c->err, c->errlen, "the model's settings", 0);
	h->hidden = H;
	h->heads = NH;
	return mo;
}

int hfi_open(struct sh_ckpt *c, const char *dir, int divisible_by, const char **clsp, char *err,
	     size_t errlen)
{
	memset(c, 0, sizeof *c);
	c->lock = -1;
	struct stat sb;
	int rc = EXIT_USAGE, post_ln, types;
	char cpath[PATH_MAX + 64];
	json_t *cfg = NULL, *mo = NULL, *tok = NULL;
	struct hfi *h = calloc(1, sizeof *h);
	if (!h)
		return xalloc_err(err, errlen, "the import", sizeof *h), EXIT_FAILED;
	if (stat(dir, &sb) < 0 || !S_ISDIR(sb.st_mode)) {
		errf(err, errlen, "%s: %s", dir, stat(dir, &sb) < 0 ? strerror(errno) : "not a directory");
		goto fail;
	}
	if (!(h->dir = strdup(dir)))
		goto oom;
	for (size_t n = strlen(h->dir); n > 1 && h->dir[n - 1] == '/'; n--)
		h->dir[n - 1] = 0;
	if (!(cfg = read_json(h->dir, "config.json", 1, &rc, err, errlen)))
		goto fail;
	snprintf(cpath, sizeof cpath, "%s/config.json", h->dir);
	struct cfgr cr = {cfg, cpath, err, errlen};
	enum cls k = C_GPT2;
	rc = EXIT_USAGE;
	if (read_class(&cr, &k) < 0)
		goto fail;
	/* the weights */
	char p[PATH_MAX + 64];
	static const char *const wfiles[] = {"model.safetensors.index.json", "model.safetensors",
					     "pytorch_model.bin.index.json", "pytorch_model.bin"};
	int w = -1;
	for (int i = 0; i < 4 && w < 0; i++) {
		int in = confined(h->dir, wfiles[i], p, sizeof p, err, errlen);
		if (in < 0)
			goto fail;
		if (in)
			w = i;
	}
	if (w < 0) {
		errf(err, errlen, "%s: no model.safetensors, model.safetensors.index.json, "
		     "pytorch_model.bin or pytorch_model.bin.index.json: no weights", h->dir);
		goto fail;
	}
	if ((w % 2 == 0 ? open_index(h, wfiles[w], &rc, err, errlen)
			: open_file(h, wfiles[w], &rc, err, errlen)) < 0)
		goto fail;
	rc = EXIT_USAGE;
	if (!(mo = read_model(&cr, k, h, divisible_by, &post_ln, &types)))
		goto fail;
	char where[PATH_MAX + 64];
	snprintf(where, sizeof where, "%s", cpath);
	if (lt_from_manifest(&c->m, mo, where, err, errlen) < 0)
		goto fail;
	if (!(h->r = calloc((size_t)c->m.n, sizeof *h->r)))
		goto oom;
	/* names: with the class's prefix, or a base model's files without it */
	const char *prefix = k == C_GPT2 || k == C_BLOOM ? "transformer." : "bert.";
	const char *probe = k == C_GPT2 ? "wte.weight" : k == C_BLOOM ? "word_embeddings.weight"
						      : "embeddings.word_embeddings.weight";
	snprintf(p, sizeof p, "%s%s", prefix, probe);
	if (find(h, p) < 0 && find(h, probe) >= 0 && k != C_BERT_PT && k != C_BERT_MLM)
		prefix = "";
	struct planner pl = {h, class_names[k], err, errlen};
	if (plan(&pl, &c->m, k, prefix) < 0)
		goto fail;
	int extra = 0;
	char names[300] = "";
	for (int i = 0; i < h->nt; i++)
		if (!h->t[i].used && extra++ < 3)
			snprintf(names + strlen(names), sizeof names - strlen(names), "%s%.80s",
				 extra > 1 ? ", " : "", h->t[i].name);
	if (extra)
		warn("warning: %s: %d tensor%s %s has not, left out: %s%s", h->dir, extra,
		     extra > 1 ? "s" : "", class_names[k], names, extra > 3 ? ", ..." : "");
	if ((rc = tokenizer(h->dir, k, &tok, err, errlen)))
		goto fail;
	rc = EXIT_USAGE;
	/* the manifest */
	char args[PATH_MAX + 64];
	snprintf(args, sizeof args, "(converted from Hugging Face %s)", h->dir);
	char *abs = realpath(h->dir, NULL);
	const char *dt = h->t[h->r[c->m.wte].src[0]].st
		? st_dtype_name(h->t[h->r[c->m.wte].src[0]].st->dtype)
		: pt_dtype_name(h->t[h->r[c->m.wte].src[0]].pt->dtype);
	c->manifest = json_pack(
		"{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:[i],"
		"s:{s:f,s:f,s:i,s:i,s:s,s:b,s:i,s:i,s:i},"
		"s:{s:s,s:i,s:f,s:i,s:i,s:f,s:f,s:f,s:f,s:f},"
		"s:{s:f,s:i},s:{s:i},s:{s:i,s:i,s:i},s:O,s:{},s:s,s:{s:s,s:s,s:s,s:s,s:s}}",
		"format", "lmtk-checkpoint", "version", 1, "iteration", 0, "consumed_samples", 0,
		"consumed_tokens", 0, "data_position", 0, "skipped_iterations", 0,
		"nan_iterations", 0, "loss_spikes", 0, "skip_ranges_done_through", 0,
		"valid_positions", 0,
		"scheduler", "max_lr", 0.0, "min_lr", 0.0, "warmup", 0, "decay", 0, "style", "constant",
		"by_tokens", 0, "num_steps", 0, "num_tokens", 0, "warmup_tokens", 0,
		"optimizer", "kind", "adamw", "step", 0, "loss_scale", 1.0, "good_steps", 0,
		"hysteresis_left", 2, "beta1", (double)0.9f, "beta2", (double)0.999f,
		"eps", (double)1e-8f, "weight_decay", (double)0.01f, "clip_grad", 1.0,
		"loss_tracker", "mean", 0.0, "count", 0,
		"rng", "seed", 1234,
		"layout", "tp", 1, "pp", 1, "dp", 1,
		"model", mo,
		"files",
		"args", args,
		"converted_from", "format", "hf", "class", class_names[k], "path", abs ? abs : h->dir,
		"weights", wfiles[w], "dtype", dt);
	free(abs);
	if (!c->manifest)
		goto oom;
	if (tok)
		json_object_set_new(c->manifest, "tokenizer", tok);
	tok = NULL;
	if (!(c->dir = strdup(h->dir)))
		goto oom;
	c->iteration = 0;
	c->tp = c->pp = 1;
	for (int i = 0; i < h->nfiles; i++)
		if (stat(h->files[i].path, &sb) == 0)
			c->bytes += (uint64_t)sb.st_size;
	struct sh_source src = {src_read, hfi_free, h};
	if (sh_init_source(c, &src, err, errlen) < 0) {
		h = NULL;   /* sh_close releases it */
		rc = EXIT_FAILED;
		goto fail;
	}
	for (int t = 0; t < c->m.n; t++)
		for (int g = 0; g < LT_GROUPS; g++)
			c->held[sh_index(c, t, g, 0, 0)] = 1;
	json_decref(cfg);
	json_decref(mo);
	*clsp = class_names[k];
	return 0;
oom:
	xalloc_err(err, errlen, "the import's tables", 0);
	rc = EXIT_FAILED;
fail:
	json_decref(cfg);
	json_decref(mo);
	json_decref(tok);
	if (h && c->src.ctx != h)
		hfi_free(h);
	return rc;
}
