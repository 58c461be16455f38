/* hfimport - see hfimport.h. */
#include "ckpt-merge-tp/hfimport.h"
#include "ckpt-merge-tp/hfimport_int.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "msg.h"
#include "ckpt/pt.h"
#include "ckpt/safetensors.h"
#include "xalloc.h"

/* ---- the files and their tensors ---- */

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
	int in = hfc_confined(h->dir, name, path, sizeof path, err, errlen);
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
	json_t *idx = hfc_read_json(h->dir, iname, 1, rc, err, errlen), *wm, *v;
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

int hfi_open(struct sh_ckpt *c, const char *dir, int divisible_by, const char **clsp, char *err,
	     size_t errlen)
{
	memset(c, 0, sizeof *c);
	c->lock = -1;
	struct stat sb;
	int rc = EXIT_USAGE;
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
	if (!(cfg = hfc_read_json(h->dir, "config.json", 1, &rc, err, errlen)))
		goto fail;
	snprintf(cpath, sizeof cpath, "%s/config.json", h->dir);
	struct cfgr cr = {cfg, cpath, err, errlen};
	enum cls k = C_GPT2;
	rc = EXIT_USAGE;
	if (hfc_class(&cr, &k) < 0)
		goto fail;
	/* the weights */
	char p[PATH_MAX + 64];
	static const char *const wfiles[] = {"model.safetensors.index.json", "model.safetensors",
					     "pytorch_model.bin.index.json", "pytorch_model.bin"};
	int w = -1;
	for (int i = 0; i < 4 && w < 0; i++) {
		int in = hfc_confined(h->dir, wfiles[i], p, sizeof p, err, errlen);
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
	/* one all-zero token-type row: what an export of a BERT without token types writes */
	int zt = find(h, "bert.embeddings.token_type_embeddings.weight"), zero_types = 0;
	if (zt >= 0 && h->t[zt].ndim == 2 && h->t[zt].shape[0] == 1 && h->t[zt].shape[1] <= 1 << 17) {
		float *row = malloc((size_t)h->t[zt].shape[1] * sizeof *row);
		zero_types = row && run(h, zt, 0, h->t[zt].shape[1], row, err, errlen) == 0;
		for (int64_t i = 0; zero_types && i < h->t[zt].shape[1]; i++)
			zero_types = row[i] == 0;
		free(row);
	}
	long long hid, heads;
	if (!(mo = hfc_model(&cr, k, divisible_by, zero_types, &hid, &heads)))
		goto fail;
	h->hidden = hid;
	h->heads = heads;
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
	struct planner pl = {h, hfc_class_names[k], err, errlen};
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
		     extra > 1 ? "s" : "", hfc_class_names[k], names, extra > 3 ? ", ..." : "");
	if ((rc = hfc_tokenizer(h->dir, k, &tok, err, errlen)))
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
		"converted_from", "format", "hf", "class", hfc_class_names[k], "path", abs ? abs : h->dir,
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
	*clsp = hfc_class_names[k];
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
