/* mds - see mds.h.  Section numbers (2.3, 3.2 ...) are tests/ref/mds-format.md's. */
#include "ckpt/mds.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"
#include "msg.h"
#include "ckpt/pt.h"

const char *const mds_buf_name[MDS_NBUFS] = {"fp32 master", "exp_avg", "exp_avg_sq",
					     "model weight"};

struct mds_file {
	char *path;
	struct pt_file *pf;      /* NULL while closed */
	uint64_t used;
};

/* elements [a, a + n) of tensor t (row-major) of file `file`, whose storage is the file's
 * storages[storage]; file -1: n zeros */
struct mds_ext {
	int file, storage;
	struct pt_tensor t;
	int64_t a, n;
};

/* ---- errors ---- */

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return EXIT_USAGE;
}

/* ---- files ---- */

static int file_add(struct mds *c, const char *path)
{
	struct mds_file *f = realloc(c->files, (c->nfiles + 1) * sizeof *f);
	if (!f)
		return -1;
	c->files = f;
	f[c->nfiles] = (struct mds_file){strdup(path), NULL, 0};
	if (!f[c->nfiles].path)
		return -1;
	struct stat sb;
	if (stat(path, &sb) == 0)
		c->bytes += (uint64_t)sb.st_size;
	return c->nfiles++;
}

/* File i open (its pickle read), the least recently used one closed beyond MDS_OPEN.  Values
 * of a file stay valid until the next file_get of another file. */
static struct pt_file *file_get(struct mds *c, int i, char *err, size_t errlen)
{
	struct mds_file *f = &c->files[i];
	f->used = ++c->clock;
	if (f->pf)
		return f->pf;
	if (c->nopen >= MDS_OPEN) {
		int lru = -1;
		for (int j = 0; j < c->nfiles; j++)
			if (c->files[j].pf && (lru < 0 || c->files[j].used < c->files[lru].used))
				lru = j;
		pt_close(c->files[lru].pf);
		c->files[lru].pf = NULL;
		c->nopen--;
	}
	if (!(f->pf = pt_open(f->path, err, errlen)))
		return NULL;
	c->nopen++;
	return f->pf;
}

/* ---- parts and their extents ---- */

static size_t part_index(const struct mds *c, int t, int b, int r, int s)
{
	return (((size_t)t * MDS_NBUFS + b) * c->tp + r) * c->pp + s;
}

int mds_has(const struct mds *c, int t, int b, int r, int s)
{
	return c->count[part_index(c, t, b, r, s)] > 0;
}

static int storage_index(const struct pt_file *pf, const struct pt_storage *s)
{
	for (size_t i = 0; i < pf->nstorages; i++)
		if (pf->storages[i] == s)
			return (int)i;
	return -1;
}

/* Appends an extent to part (t, b, r, s), whose extents must be added one after another:
 * elements [a, a + n) of tensor x of file `file`, x's storage being the file's storages[st]. */
static int ext_add(struct mds *c, int t, int b, int r, int s, int file, int st,
		   const struct pt_tensor *x, int64_t a, int64_t n, char *err, size_t errlen)
{
	size_t p = part_index(c, t, b, r, s);
	if (c->count[p] && (size_t)(c->first[p] + c->count[p]) != c->next)
		return fail(err, errlen, "%s: %s %s of TP rank %d, stage %d appears twice",
			    file >= 0 ? c->files[file].path : c->dir, c->m.t[t].name,
			    mds_buf_name[b], r, s);
	if (c->next == c->capext) {
		size_t cap = c->capext ? 2 * c->capext : 1024;
		struct mds_ext *e = realloc(c->ext, cap * sizeof *e);
		if (!e)
			return fail(err, errlen, "out of memory");
		c->ext = e;
		c->capext = cap;
	}
	struct mds_ext *e = &c->ext[c->next];
	memset(e, 0, sizeof *e);
	e->file = file;
	e->storage = st;
	if (x) {
		e->t = *x;
		e->t.storage = NULL;
	}
	e->a = a;
	e->n = n;
	if (!c->count[p])
		c->first[p] = (int32_t)c->next;
	c->count[p]++;
	c->next++;
	return 0;
}

int mds_read(struct mds *c, int t, int b, int r, int s, int64_t a, int64_t e, float *dst,
	     char *err, size_t errlen)
{
	size_t p = part_index(c, t, b, r, s);
	int64_t pos = 0, a0 = a;
	if (!c->count[p])
		return errf(err, errlen, "%s: no %s of %s on TP rank %d, stage %d", c->dir,
			    mds_buf_name[b], c->m.t[t].name, r, s);
	for (int32_t k = c->first[p]; k < c->first[p] + c->count[p] && a < e; k++) {
		const struct mds_ext *x = &c->ext[k];
		int64_t lo = a > pos ? a : pos, hi = e < pos + x->n ? e : pos + x->n;
		if (lo < hi) {
			if (x->file < 0) {
				memset(dst + (lo - a0), 0, (size_t)(hi - lo) * sizeof *dst);
			} else {
				struct pt_file *pf = file_get(c, x->file, err, errlen);
				if (!pf)
					return -1;
				struct pt_tensor tt = x->t;
				if (x->storage < 0 || (size_t)x->storage >= pf->nstorages ||
				    pf->storages[x->storage]->dtype != tt.dtype)
					return errf(err, errlen, "%s: changed while it was read", pf->path);
				tt.storage = pf->storages[x->storage];
				if (pt_read_f32(pf, &tt, x->a + lo - pos, x->a + hi - pos, dst + (lo - a0)) < 0)
					return errf(err, errlen, "%s", pt_error(pf));
			}
			a = hi;
		}
		pos += x->n;
	}
	if (a < e)
		return errf(err, errlen, "%s: %s of %s on TP rank %d, stage %d ends at element %lld",
			    c->dir, mds_buf_name[b], c->m.t[t].name, r, s, (long long)pos);
	return 0;
}

/* ---- pickled values ---- */

/* d[key] as an int (bools count); 0, or -1 */
static int v_int(const struct pt_value *d, const char *key, int64_t *out)
{
	const struct pt_value *v = pt_dict_get(d, key);
	if (!v || (v->kind != PT_INT && v->kind != PT_BOOL))
		return -1;
	*out = v->kind == PT_INT ? v->u.i : v->u.b;
	return 0;
}

static int v_num(const struct pt_value *d, const char *key, double *out)
{
	const struct pt_value *v = pt_dict_get(d, key);
	if (!v || (v->kind != PT_INT && v->kind != PT_FLOAT))
		return -1;
	*out = v->kind == PT_INT ? (double)v->u.i : v->u.f;
	return 0;
}

static int v_true(const struct pt_value *d, const char *key)
{
	const struct pt_value *v = pt_dict_get(d, key);
	return v && ((v->kind == PT_BOOL && v->u.b) || (v->kind == PT_INT && v->u.i));
}

static int v_none(const struct pt_value *d, const char *key)
{
	const struct pt_value *v = pt_dict_get(d, key);
	return !v || v->kind == PT_NONE;
}

static const char *v_str(const struct pt_value *d, const char *key)
{
	const struct pt_value *v = pt_dict_get(d, key);
	return v && v->kind == PT_STR ? v->u.str.s : NULL;
}

/* a required positive int of args */
static int arg_int(const struct pt_file *f, const struct pt_value *args, const char *key,
		   int64_t *out, char *err, size_t errlen)
{
	if (v_int(args, key, out) < 0 || *out <= 0 || *out > (1 << 30))
		return fail(err, errlen, "%s: args.%s is missing or not a positive integer", f->path,
			    key);
	return 0;
}

/* Does tensor x have the TP-local shape of lmtk tensor t? */
static int shape_ok(const struct mds *c, int t, const int64_t *shape, int ndim)
{
	const struct lt_tensor *T = &c->m.t[t];
	int64_t lsh[2];
	lt_local_shape(T, c->tp, lsh);
	if (ndim != T->ndim || shape[0] != lsh[0])
		return 0;
	return T->ndim == 1 || shape[1] == lsh[1];
}

static void shape_str(const int64_t *shape, int ndim, char *out, size_t n)
{
	size_t used = 0;
	out[0] = 0;
	for (int d = 0; d < ndim && used + 24 < n; d++)
		used += (size_t)snprintf(out + used, n - used, "%s%lld", d ? ", " : "",
					 (long long)shape[d]);
}

static int shape_fail(const struct mds *c, const char *path, const char *what, int t,
		      const int64_t *shape, int ndim, char *err, size_t errlen)
{
	char got[96], want[96];
	int64_t lsh[2];
	lt_local_shape(&c->m.t[t], c->tp, lsh);
	shape_str(shape, ndim, got, sizeof got);
	shape_str(lsh, c->m.t[t].ndim, want, sizeof want);
	return fail(err, errlen, "%s: %s (lmtk's %s) has shape [%s]; the model in args needs [%s] "
		    "at TP=%d", path, what, c->m.t[t].name, got, want, c->tp);
}

/* ---- names (section 4) ---- */

/* A transformer layer's key ("self_attention.dense.weight") as lmtk's ("layers.L.attention...") */
static int layer_name(const struct lt_model *m, int l, const char *key)
{
	char n[160];
	if (strncmp(key, "self_attention.", 15) == 0)
		snprintf(n, sizeof n, "layers.%d.attention.%s", l, key + 15);
	else
		snprintf(n, sizeof n, "layers.%d.%s", l, key);
	return lt_find(m, n);
}

enum { NAME_UNKNOWN = -1, NAME_IGNORED = -2 };

/* DeepSpeed's parameter name on stage s (2.5): the lmtk table index, NAME_IGNORED for a copy
 * lmtk does not keep (the last stage's position embeddings and embedding norm), or
 * NAME_UNKNOWN. */
static int ds_name(const struct mds *c, const char *name, int s)
{
	const struct lt_model *m = &c->m;
	const char *tied = "tied_modules.embed.";
	if (strncmp(name, tied, strlen(tied)) == 0) {
		const char *k = name + strlen(tied);
		int first = s == 0;
		if (strcmp(k, "word_embeddings.weight") == 0)
			return m->wte;
		if (strcmp(k, "word_embeddings.norm.weight") == 0)
			return !first ? NAME_IGNORED : m->eln_w >= 0 ? m->eln_w : NAME_UNKNOWN;
		if (strcmp(k, "word_embeddings.norm.bias") == 0)
			return !first ? NAME_IGNORED : m->eln_b >= 0 ? m->eln_b : NAME_UNKNOWN;
		if (strcmp(k, "position_embeddings.weight") == 0)
			return !first ? NAME_IGNORED : m->wpe >= 0 ? m->wpe : NAME_UNKNOWN;
		return NAME_UNKNOWN;
	}
	char *end;
	long spec = strtol(name, &end, 10);
	if (end == name || *end != '.')
		return NAME_UNKNOWN;
	if (spec == m->layers + 4) {
		if (strcmp(end + 1, "weight") == 0)
			return m->lnf_w;
		if (strcmp(end + 1, "bias") == 0)
			return m->lnf_b;
		return NAME_UNKNOWN;
	}
	if (spec < 3 || spec >= 3 + m->layers)
		return NAME_UNKNOWN;
	int t = layer_name(m, (int)spec - 3, end + 1);
	return t >= 0 ? t : NAME_UNKNOWN;
}

/* Plain Megatron's flattened model key on stage s (3.2). */
static int meg_name(const struct mds *c, const char *key, int s)
{
	const struct lt_model *m = &c->m;
	static const struct { const char *key; int which; } fixed[] = {
		{"language_model.embedding.word_embeddings.weight", 0},
		{"language_model.embedding.word_embeddings.norm.weight", 1},
		{"language_model.embedding.word_embeddings.norm.bias", 2},
		{"language_model.embedding.position_embeddings.weight", 3},
		{"language_model.encoder.final_layernorm.weight", 4},
		{"language_model.encoder.final_layernorm.bias", 5},
		{"word_embeddings_for_head.weight", 0},
	};
	int idx[6] = {m->wte, m->eln_w, m->eln_b, m->wpe, m->lnf_w, m->lnf_b};
	for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
		if (strcmp(key, fixed[i].key) == 0)
			return idx[fixed[i].which] >= 0 ? idx[fixed[i].which] : NAME_UNKNOWN;
	const char *enc = "language_model.encoder.layers.";
	if (strncmp(key, enc, strlen(enc)) != 0)
		return NAME_UNKNOWN;
	char *end;
	long i = strtol(key + strlen(enc), &end, 10);
	int per = m->layers / c->pp;
	if (end == key + strlen(enc) || *end != '.' || i < 0 || i >= per)
		return NAME_UNKNOWN;
	int t = layer_name(m, s * per + (int)i, end + 1);
	return t >= 0 ? t : NAME_UNKNOWN;
}

/* Megatron's weight decay rule (2.5): layer norms and biases are not decayed. */
static int no_decay(const struct lt_model *m, int t)
{
	const char *n = m->t[t].name;
	size_t l = strlen(n);
	return strstr(n, "layernorm") != NULL || (l > 5 && strcmp(n + l - 5, ".bias") == 0);
}

/* ---- the model, counters and schedule from args (2.4, 2.7) ---- */

static double f32(double x)
{
	return (double)(float)x;
}

static int read_model(struct mds *c, const struct pt_file *f, const struct pt_value *root,
		      json_t **model, char *err, size_t errlen)
{
	const struct pt_value *a = pt_dict_get(root, "args");
	int64_t L, h, heads, ffn = 0, P, padded, seq, vocab, kv;
	double eps = 1e-5, std = 0.02, hd = 0.1, ad = 0.1;
	int64_t seed = 1234;
	if (!a || a->kind != PT_DICT)
		return fail(err, errlen, "%s: no args (an argparse.Namespace): not a Megatron "
			    "checkpoint", f->path);
	int rc;
	if ((rc = arg_int(f, a, "num_layers", &L, err, errlen)) ||
	    (rc = arg_int(f, a, "hidden_size", &h, err, errlen)) ||
	    (rc = arg_int(f, a, "num_attention_heads", &heads, err, errlen)) ||
	    (rc = arg_int(f, a, "max_position_embeddings", &P, err, errlen)) ||
	    (rc = arg_int(f, a, "padded_vocab_size", &padded, err, errlen)))
		return rc;
	if (v_int(a, "ffn_hidden_size", &ffn) < 0 || ffn <= 0)
		ffn = 4 * h;
	if (v_int(a, "seq_length", &seq) < 0 || seq <= 0)
		seq = P;
	if (v_int(a, "kv_channels", &kv) == 0 && kv * heads != h)
		return fail(err, errlen, "%s: args.kv_channels %lld x %lld heads is not hidden_size "
			    "%lld: lmtk's attention has hidden_size / heads channels", f->path,
			    (long long)kv, (long long)heads, (long long)h);
	const struct pt_value *pe = pt_dict_get(a, "position_embedding_type");
	int alibi;
	if (!pe || pe->kind == PT_NONE)
		alibi = 0;   /* Megatron-LM before the option: learned absolute positions */
	else if ((pe->kind == PT_INT && pe->u.i == 2) ||
		 (pe->kind == PT_STR && strcmp(pe->u.str.s, "absolute") == 0))
		alibi = 0;
	else if ((pe->kind == PT_INT && pe->u.i == 3) ||
		 (pe->kind == PT_STR && strcmp(pe->u.str.s, "alibi") == 0))
		alibi = 1;
	else
		return fail(err, errlen, "%s: args.position_embedding_type is %s: lmtk's models have "
			    "learned absolute positions or ALiBi", f->path,
			    pe->kind == PT_STR ? pe->u.str.s : pe->kind == PT_INT && pe->u.i == 1 ?
			    "rotary" : "not one lmtk knows");
	if (v_true(a, "apply_residual_connection_post_layernorm"))
		return fail(err, errlen, "%s: args.apply_residual_connection_post_layernorm is True: "
			    "lmtk's layers add the residual before the layer norm", f->path);
	if (!v_none(a, "glu_activation"))
		return fail(err, errlen, "%s: args.glu_activation is set (%s): lmtk's MLP is a GeLU "
			    "MLP", f->path, v_str(a, "glu_activation") ? v_str(a, "glu_activation") : "?");
	const struct pt_value *info = pt_dict_get(root, "checkpoint_info");
	int64_t ipad;
	if (v_int(info, "original_vocab_size", &vocab) < 0 || vocab <= 0) {
		warn("warning: %s has no checkpoint_info.original_vocab_size: the vocabulary is taken "
		     "as the padded one, %lld rows", f->path, (long long)padded);
		vocab = padded;
	}
	if (v_int(info, "padded_vocab_size", &ipad) == 0 && ipad != padded)
		return fail(err, errlen, "%s: checkpoint_info.padded_vocab_size %lld and "
			    "args.padded_vocab_size %lld differ", f->path, (long long)ipad,
			    (long long)padded);
	v_num(a, "layernorm_epsilon", &eps);
	v_num(a, "init_method_std", &std);
	v_num(a, "hidden_dropout", &hd);
	v_num(a, "attention_dropout", &ad);
	v_int(a, "seed", &seed);
	*model = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:s,s:b,s:f,s:f,s:f,s:f,s:I}",
			   "num_layers", (json_int_t)L, "hidden_size", (json_int_t)h,
			   "num_attention_heads", (json_int_t)heads, "ffn_hidden_size", (json_int_t)ffn,
			   "seq_length", (json_int_t)seq, "max_position_embeddings", (json_int_t)P,
			   "vocab_size", (json_int_t)vocab, "padded_vocab_size", (json_int_t)padded,
			   "position_embedding_type", alibi ? "alibi" : "learned", "embed_layernorm",
			   v_true(a, "embed_layernorm"), "layernorm_epsilon", f32(eps),
			   "init_method_std", f32(std), "hidden_dropout", f32(hd),
			   "attention_dropout", f32(ad), "seed", (json_int_t)seed);
	if (!*model)
		return fail(err, errlen, "out of memory");
	char where[4200];
	snprintf(where, sizeof where, "%s: args", f->path);
	if (lt_from_manifest(&c->m, *model, where, err, errlen) < 0)
		return EXIT_USAGE;
	char why[256];
	if (lt_check_tp(&c->m, c->tp, why, sizeof why) < 0)
		return fail(err, errlen, "%s: %s", f->path, why);
	return 0;
}

/* The schedule (AnnealingLR.state_dict, or upstream's opt_param_scheduler); from args when the
 * checkpoint has none (--no-save-optim). */
static json_t *read_sched(struct mds *c, const struct pt_file *f, const struct pt_value *root,
			  char *err, size_t errlen)
{
	const struct pt_value *a = pt_dict_get(root, "args"), *s = pt_dict_get(root, "lr_scheduler");
	if (!s || s->kind != PT_DICT)
		s = pt_dict_get(root, "opt_param_scheduler");
	double max_lr, min_lr = 0;
	int64_t warmup = 0, decay = 0, num = c->consumed_samples, ntok = 0, wtok = 0, dtok = 0;
	const char *style = NULL;
	if (s && s->kind == PT_DICT) {
		if (v_num(s, "max_lr", &max_lr) < 0 ||
		    (v_int(s, "warmup_steps", &warmup) < 0 && v_int(s, "lr_warmup_steps", &warmup) < 0) ||
		    (v_int(s, "decay_steps", &decay) < 0 && v_int(s, "lr_decay_steps", &decay) < 0) ||
		    v_int(s, "num_steps", &num) < 0 ||
		    (!(style = v_str(s, "decay_style")) && !(style = v_str(s, "lr_decay_style")))) {
			fail(err, errlen, "%s: lr_scheduler lacks max_lr, warmup_steps, decay_steps, "
			     "num_steps or decay_style", f->path);
			return NULL;
		}
		v_num(s, "min_lr", &min_lr);
		v_int(s, "num_tokens", &ntok);
		v_int(s, "warmup_tokens", &wtok);
		if (v_int(s, "decay_tokens", &dtok) < 0)
			dtok = 0;
	} else {
		/* --no-save-optim: Megatron's own rules (training.py get_learning_rate_scheduler) */
		int64_t gbs = 0, it;
		warn("warning: %s has no lr_scheduler: the schedule is rebuilt from args", f->path);
		if (v_num(a, "lr", &max_lr) < 0 || v_int(a, "global_batch_size", &gbs) < 0 || gbs <= 0) {
			fail(err, errlen, "%s: no lr_scheduler, and args lack lr or global_batch_size",
			     f->path);
			return NULL;
		}
		v_num(a, "min_lr", &min_lr);
		style = v_str(a, "lr_decay_style");
		if (v_int(a, "lr_decay_samples", &decay) < 0) {
			if (v_int(a, "lr_decay_iters", &it) == 0 || v_int(a, "train_iters", &it) == 0)
				decay = it * gbs;
			else if (v_int(a, "train_samples", &decay) < 0)
				decay = 0;
		}
		if (v_int(a, "lr_warmup_samples", &warmup) < 0 || !warmup) {
			double frac;
			if (v_int(a, "lr_warmup_iters", &it) == 0)
				warmup = it * gbs;
			else if (v_num(a, "lr_warmup_fraction", &frac) == 0)
				warmup = (int64_t)(frac * (double)decay);
		}
		ntok = c->consumed_tokens;
	}
	int64_t dt;
	if (!dtok && v_int(a, "lr_decay_tokens", &dt) == 0)
		dtok = dt;
	if (!style || (strcmp(style, "linear") && strcmp(style, "cosine") && strcmp(style, "constant"))) {
		fail(err, errlen, "%s: learning-rate decay style '%s': lmtk's schedules are linear, "
		     "cosine and constant", f->path, style ? style : "(none)");
		return NULL;
	}
	json_t *j = json_pack("{s:f,s:f,s:I,s:I,s:s,s:b,s:I,s:I,s:I}", "max_lr", max_lr, "min_lr",
			      min_lr, "warmup", (json_int_t)warmup, "decay",
			      (json_int_t)(dtok ? dtok : decay), "style", style, "by_tokens",
			      dtok != 0, "num_steps", (json_int_t)num, "num_tokens", (json_int_t)ntok,
			      "warmup_tokens", (json_int_t)wtok);
	if (!j)
		fail(err, errlen, "out of memory");
	return j;
}

/* The counters of the first file (2.7); every other file must agree on the iteration. */
static int read_counters(struct mds *c, const struct pt_file *f, const struct pt_value *root,
			 char *err, size_t errlen)
{
	const struct pt_value *a = pt_dict_get(root, "args");
	double ver;
	if (v_num(root, "checkpoint_version", &ver) == 0 && ver < 3.0)
		return fail(err, errlen, "%s: checkpoint_version %g: query_key_value rows of versions "
			    "before 3.0 are in another order; load and save it with Megatron-DeepSpeed "
			    "first", f->path, ver);
	if (v_int(root, "iteration", &c->iteration) < 0 || c->iteration < 0)
		return fail(err, errlen, "%s: no iteration", f->path);
	if (v_int(a, "consumed_train_samples", &c->consumed_samples) < 0) {
		warn("warning: %s: args has no consumed_train_samples: taking iteration x "
		     "global_batch_size", f->path);
		int64_t gbs = 0;
		v_int(a, "global_batch_size", &gbs);
		c->consumed_samples = c->iteration * gbs;
	}
	if (v_int(root, "tokens", &c->consumed_tokens) < 0 &&
	    v_int(a, "consumed_train_tokens", &c->consumed_tokens) < 0)
		c->consumed_tokens = 0;
	return 0;
}

/* The args a checkpoint's files must agree on. */
static int check_layout(const struct mds *c, const struct pt_file *f, const struct pt_value *root,
			char *err, size_t errlen)
{
	const struct pt_value *a = pt_dict_get(root, "args");
	int64_t tp, pp, it = -1;
	if (v_int(a, "tensor_model_parallel_size", &tp) < 0 || tp != c->tp ||
	    v_int(a, "pipeline_model_parallel_size", &pp) < 0 || pp != c->pp)
		return fail(err, errlen, "%s: args say TP=%lld PP=%lld, the checkpoint's files TP=%d "
			    "PP=%d", f->path, (long long)(v_int(a, "tensor_model_parallel_size", &tp)
			    ? -1 : tp), (long long)(v_int(a, "pipeline_model_parallel_size", &pp) ?
			    -1 : pp), c->tp, c->pp);
	if (v_int(root, "iteration", &it) < 0 || it != c->iteration)
		return fail(err, errlen, "%s: iteration %lld, the other files' %lld: files of two "
			    "saves mixed", f->path, (long long)it, (long long)c->iteration);
	return 0;
}

/* ---- the lmtk manifest ---- */

static int build_manifest(struct mds *c, const struct pt_file *f, const struct pt_value *root,
			  json_t *model, const struct pt_value *pgroup, double clip,
			  double loss_scale, int64_t good, int64_t hyst, int64_t skipped,
			  char *err, size_t errlen)
{
	const struct pt_value *a = pt_dict_get(root, "args");
	json_t *sched = read_sched(c, f, root, err, errlen);
	if (!sched)
		return EXIT_USAGE;
	double b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
	v_num(a, "adam_beta1", &b1);
	v_num(a, "adam_beta2", &b2);
	v_num(a, "adam_eps", &eps);
	v_num(a, "weight_decay", &wd);
	if (pgroup) {
		const struct pt_value *betas = pt_dict_get(pgroup, "betas");
		if (betas && betas->kind == PT_TUPLE && betas->u.seq.n == 2) {
			const struct pt_value *x = betas->u.seq.v[0], *y = betas->u.seq.v[1];
			if (x->kind == PT_FLOAT)
				b1 = x->u.f;
			if (y->kind == PT_FLOAT)
				b2 = y->u.f;
		}
		v_num(pgroup, "eps", &eps);
		v_num(pgroup, "weight_decay", &wd);
	}
	int64_t cvs = 0;
	v_int(a, "consumed_valid_samples", &cvs);
	/* the tokenizer, for an export's tokenizer files (hfexport reads "--flag value") */
	char args[8192];
	int n = snprintf(args, sizeof args, "(converted from Megatron-DeepSpeed %s)", c->dir);
	static const char *const tok[][2] = {{"vocab_file", "--vocab-file"},
					     {"merge_file", "--merge-file"},
					     {"tokenizer_name_or_path", "--tokenizer-name-or-path"}};
	for (size_t i = 0; i < 3; i++) {
		const char *v = v_str(a, tok[i][0]);
		if (v && !strchr(v, ' ') && n > 0 && (size_t)n < sizeof args)
			n += snprintf(args + n, sizeof args - n, " %s %s", tok[i][1], v);
	}
	const char *dsv = v_str(root, "ds_version");
	char *abs = realpath(c->dir, NULL);
	c->manifest = json_pack(
		"{s:s,s:i,s:I,s:I,s:I,s:I,s:I,s:i,s:i,s:i,s:[I],s:o,"
		"s:{s:s,s:I,s:f,s:I,s:I,s:f,s:f,s:f,s:f,s:f},"
		"s:{s:f,s:i},s:{s:I},s:{s:i,s:i,s:i},s:o,s:{},s:s,"
		"s:{s:s,s:s,s:s,s:s*,s:s}}",
		"format", "lmtk-checkpoint", "version", 1,
		"iteration", (json_int_t)c->iteration,
		"consumed_samples", (json_int_t)c->consumed_samples,
		"consumed_tokens", (json_int_t)c->consumed_tokens,
		/* Megatron's sample order is indexed by consumed_train_samples, skipped iterations
		 * included: lmtk's data position */
		"data_position", (json_int_t)c->consumed_samples,
		"skipped_iterations", (json_int_t)skipped,
		"nan_iterations", 0, "loss_spikes", 0, "skip_ranges_done_through", 0,
		"valid_positions", (json_int_t)cvs,
		"scheduler", sched,
		"optimizer", "kind", "adamw", "step", (json_int_t)c->adam_step, "loss_scale", loss_scale,
		"good_steps", (json_int_t)good, "hysteresis_left", (json_int_t)hyst,
		"beta1", f32(b1), "beta2", f32(b2), "eps", f32(eps), "weight_decay", f32(wd),
		"clip_grad", f32(clip),
		"loss_tracker", "mean", 0.0, "count", 0,
		"rng", "seed", (json_int_t)json_integer_value(json_object_get(model, "seed")),
		"layout", "tp", c->tp, "pp", c->pp, "dp", c->dp,
		"model", json_incref(model),
		"files",
		"args", args,
		"converted_from", "format", "megatron-deepspeed", "layout",
		c->kind == MDS_DEEPSPEED ? "deepspeed pipeline (layer_*, mp_rank_*, bf16_zero_*)" :
		"megatron (mp_rank_*/model_optim_rng.pt)", "path", abs ? abs : c->dir, "ds_version", dsv,
		"weights", c->has_optimizer ? "fp32 master" : c->weights_dtype);
	free(abs);
	if (!c->manifest)
		return fail(err, errlen, "out of memory");
	return 0;
}

/* ---- the step directory ---- */

static int is_dir(const char *p)
{
	struct stat sb;
	return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int is_file(const char *p)
{
	struct stat sb;
	return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* A Megatron step directory holds mp_rank_TT/ or mp_rank_TT_SSS/ with model_optim_rng.pt. */
static int meg_step(const char *dir)
{
	char p[4400];
	snprintf(p, sizeof p, "%.4300s/mp_rank_00/model_optim_rng.pt", dir);
	if (is_file(p))
		return 1;
	snprintf(p, sizeof p, "%.4300s/mp_rank_00_000/model_optim_rng.pt", dir);
	return is_file(p);
}

static int ds_step(const char *dir)
{
	char p[4400];
	snprintf(p, sizeof p, "%.4300s/mp_rank_00_model_states.pt", dir);
	return is_file(p);
}

/* The step directory path names, and its kind. */
static int resolve(struct mds *c, const char *path, char *err, size_t errlen)
{
	char base[4096], p[8800], *tag = NULL, why[4300];
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/')
		n--;
	if (n >= sizeof base)
		return fail(err, errlen, "%s: path too long", path);
	snprintf(base, sizeof base, "%.*s", (int)n, path);
	if (!is_dir(base))
		return fail(err, errlen, "%s: %s", base, access(base, F_OK) ? strerror(errno) :
			    "not a directory");
	if (ds_step(base) || meg_step(base)) {
		c->kind = ds_step(base) ? MDS_DEEPSPEED : MDS_MEGATRON;
		c->dir = strdup(base);
		return 0;
	}
	snprintf(p, sizeof p, "%s/latest", base);
	if (file_read_all(p, &tag, NULL, why, sizeof why) == 0) {
		/* DeepSpeed writes the tag without a newline; strip whitespace anyway */
		char *s = tag, *e;
		while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
			s++;
		for (e = s + strlen(s); e > s && (e[-1] == ' ' || e[-1] == '\n' || e[-1] == '\r' ||
						  e[-1] == '\t'); e--)
			;
		*e = 0;
		snprintf(p, sizeof p, "%s/%s", base, s);
		int ok = *s && !strchr(s, '/') && ds_step(p);
		if (!ok) {
			snprintf(why, sizeof why, "%s", s);
			free(tag);
			snprintf(p, sizeof p, "%s/%s/manifest.json", base, why);
			if (is_file(p))
				return fail(err, errlen, "%s is an lmtk checkpoint (%s/manifest.json), "
					    "not a Megatron-DeepSpeed one", base, why);
			return fail(err, errlen, "%s/latest names '%s', which holds no "
				    "mp_rank_00_model_states.pt", base, why);
		}
		free(tag);
		c->kind = MDS_DEEPSPEED;
		c->dir = strdup(p);
		return 0;
	}
	snprintf(p, sizeof p, "%s/latest_checkpointed_iteration.txt", base);
	if (file_read_all(p, &tag, NULL, why, sizeof why) == 0) {
		char *end;
		long long it = strtoll(tag, &end, 10);
		while (*end == ' ' || *end == '\n' || *end == '\r')
			end++;
		if (strncmp(tag, "release", 7) == 0)
			snprintf(p, sizeof p, "%s/release", base);
		else if (end != tag && !*end && it >= 0)
			snprintf(p, sizeof p, "%s/iter_%07lld", base, it);
		else
			snprintf(p, sizeof p, "%s", "");
		free(tag);
		if (!*p)
			return fail(err, errlen, "%s/latest_checkpointed_iteration.txt holds no "
				    "iteration", base);
		if (!meg_step(p)) {
			snprintf(why, sizeof why, "%s/global_step%lld/manifest.json", base, it);
			if (is_file(why))
				return fail(err, errlen, "%s is an lmtk checkpoint, not a "
					    "Megatron-DeepSpeed one", base);
			return fail(err, errlen, "%s: no mp_rank_00[_000]/model_optim_rng.pt (named by "
				    "%s/latest_checkpointed_iteration.txt)", p, base);
		}
		c->kind = MDS_MEGATRON;
		c->dir = strdup(p);
		return 0;
	}
	snprintf(p, sizeof p, "%s/manifest.json", base);
	if (is_file(p))
		return fail(err, errlen, "%s is an lmtk checkpoint step, not a Megatron-DeepSpeed one",
			    base);
	return fail(err, errlen, "%s: not a Megatron-DeepSpeed checkpoint (no latest, no "
		    "latest_checkpointed_iteration.txt, no mp_rank_00_model_states.pt, no "
		    "mp_rank_00[_000]/model_optim_rng.pt)", base);
}

int mds_detect(const char *path)
{
	struct mds c = {0};
	char err[64];
	int ok = resolve(&c, path, err, sizeof err) == 0;
	free(c.dir);
	return ok;
}

static int alloc_parts(struct mds *c, char *err, size_t errlen)
{
	size_t n = (size_t)c->m.n * MDS_NBUFS * c->tp * c->pp;
	c->first = calloc(n, sizeof *c->first);
	c->count = calloc(n, sizeof *c->count);
	if (!c->first || !c->count)
		return fail(err, errlen, "out of memory");
	return 0;
}

/* A file name of the form fmt ("mp_rank_%d_model_states.pt" ...), all of it: the ints. */
static int name_is(const char *name, const char *fmt, int *a, int *b)
{
	int end = -1;
	int k = b ? sscanf(name, fmt, a, b, &end) : sscanf(name, fmt, a, &end);
	return k == (b ? 2 : 1) && end > 0 && name[end] == 0 && *a >= 0 && (!b || *b >= 0);
}

/* ---- DeepSpeed's pipeline checkpoint (section 2) ---- */

struct ds_param {
	int t;                   /* lmtk table index, or NAME_IGNORED */
	int64_t numel, off;      /* in the flat group */
	char name[128];
};

struct ds_group {
	struct ds_param *p;
	int n;
	int64_t used;            /* elements of its parameters */
};

/* what one DP rank's optim file holds of one group */
struct ds_slice {
	struct pt_tensor t[3];   /* master, exp_avg, exp_avg_sq */
	int storage[3];          /* their storages' indices in the file */
	int file;
	int64_t pad;
};

/* Stage s, TP rank r's groups from mp_rank_MM's param_shapes. */
static int ds_inventory(struct mds *c, int s, int r, struct ds_group **out, int *ngroups,
			int *stage_of, char *err, size_t errlen)
{
	char p[4400];
	int mm = s * c->tp + r, rc;
	snprintf(p, sizeof p, "%s/mp_rank_%02d_model_states.pt", c->dir, mm);
	int fi = file_add(c, p);
	if (fi < 0)
		return fail(err, errlen, "out of memory");
	struct pt_file *f = file_get(c, fi, err, errlen);
	if (!f)
		return EXIT_USAGE;
	if ((rc = check_layout(c, f, f->root, err, errlen)))
		return rc;
	const struct pt_value *ps = pt_get(f, NULL, PT_LIST, "param_shapes", NULL);
	if (!ps)
		return fail(err, errlen, "%s", pt_error(f));
	struct ds_group *g = calloc(ps->u.seq.n ? ps->u.seq.n : 1, sizeof *g);
	if (!g)
		return fail(err, errlen, "out of memory");
	*out = g;
	*ngroups = (int)ps->u.seq.n;
	for (size_t gi = 0; gi < ps->u.seq.n; gi++) {
		const struct pt_value *d = ps->u.seq.v[gi];
		if (d->kind != PT_DICT)
			return fail(err, errlen, "%s: param_shapes[%zu] is a %s, not a dict", f->path,
				    gi, pt_kind_name(d->kind));
		g[gi].p = calloc(d->u.dict.n ? d->u.dict.n : 1, sizeof *g[gi].p);
		if (!g[gi].p)
			return fail(err, errlen, "out of memory");
		for (size_t j = 0; j < d->u.dict.n; j++) {
			const struct pt_value *k = d->u.dict.k[j], *v = d->u.dict.v[j];
			struct ds_param *q = &g[gi].p[g[gi].n++];
			int64_t shape[PT_MAXDIM], numel = 1;
			if (k->kind != PT_STR || v->kind != PT_TUPLE || v->u.seq.n < 1 ||
			    v->u.seq.n > 2)
				return fail(err, errlen, "%s: param_shapes[%zu] entry %zu is not a name "
					    "and a 1- or 2-D torch.Size", f->path, gi, j);
			for (size_t e = 0; e < v->u.seq.n; e++) {
				if (v->u.seq.v[e]->kind != PT_INT || v->u.seq.v[e]->u.i < 0)
					return fail(err, errlen, "%s: param_shapes: %s has a bad size",
						    f->path, k->u.str.s);
				shape[e] = v->u.seq.v[e]->u.i;
				numel *= shape[e];
			}
			snprintf(q->name, sizeof q->name, "%s", k->u.str.s);
			q->t = ds_name(c, k->u.str.s, s);
			q->numel = numel;
			q->off = g[gi].used;
			g[gi].used += numel;
			if (q->t == NAME_UNKNOWN)
				return fail(err, errlen, "%s: param_shapes names parameter '%s', which is "
					    "no part of lmtk's GPT/BLOOM model of %d layers", f->path,
					    k->u.str.s, c->m.layers);
			if (q->t < 0)
				continue;
			if (!shape_ok(c, q->t, shape, (int)v->u.seq.n))
				return shape_fail(c, f->path, k->u.str.s, q->t, shape, (int)v->u.seq.n,
						  err, errlen);
			int last = q->t == c->m.wte && s == c->pp - 1 && s != 0;
			if (!last && r == 0) {
				if (stage_of[q->t] >= 0 && stage_of[q->t] != s)
					return fail(err, errlen, "%s: %s is on stages %d and %d", f->path,
						    k->u.str.s, stage_of[q->t], s);
				stage_of[q->t] = s;
			}
		}
	}
	if (*ngroups < 1)
		return fail(err, errlen, "%s: param_shapes lists no parameter group", f->path);
	return 0;
}

/* DP rank d's optim file for (s, r): each group's three flat partitions, checked. */
static int ds_partition(struct mds *c, int s, int r, int d, const struct ds_group *g,
			int ngroups, struct ds_slice *sl, int64_t *ps, double *clip, char *err,
			size_t errlen)
{
	char p[4400];
	int mm = s * c->tp + r;
	snprintf(p, sizeof p, "%s/bf16_zero_pp_rank_%d_mp_rank_%02d_optim_states.pt", c->dir, d, mm);
	if (!is_file(p))
		return fail(err, errlen, "%s: missing (the checkpoint has DP=%d, and other "
			    "bf16_zero_* optimizer files)", p, c->dp);
	int fi = file_add(c, p);
	if (fi < 0)
		return fail(err, errlen, "out of memory");
	struct pt_file *f = file_get(c, fi, err, errlen);
	if (!f)
		return EXIT_USAGE;
	const struct pt_value *o = pt_get(f, NULL, PT_DICT, "optimizer_state_dict", NULL), *fp, *pc,
			      *pads, *st, *pgs, *maps;
	if (!o || !(fp = pt_get(f, o, PT_LIST, "single_partition_of_fp32_groups", NULL)) ||
	    !(pc = pt_get(f, o, PT_LIST, "partition_count", NULL)) ||
	    !(st = pt_get(f, o, PT_DICT, "base_optimizer_state", "state", NULL)) ||
	    !(pgs = pt_get(f, o, PT_LIST, "base_optimizer_state", "param_groups", NULL)))
		return fail(err, errlen, "%s", pt_error(f));
	pads = pt_dict_get(o, "group_paddings");
	if (!pads)
		pads = pt_dict_get(o, "groups_padding");   /* DeepSpeed 0.6.x */
	maps = pt_dict_get(o, "param_slice_mappings");   /* >= 0.7.0 */
	if (!pads || pads->kind != PT_LIST || pads->u.seq.n != (size_t)ngroups)
		return fail(err, errlen, "%s: no group_paddings for %d groups", f->path, ngroups);
	if (fp->u.seq.n != (size_t)ngroups || pc->u.seq.n != (size_t)ngroups ||
	    pgs->u.seq.n != (size_t)ngroups)
		return fail(err, errlen, "%s: %zu flat groups; mp_rank_%02d_model_states.pt's "
			    "param_shapes has %d", f->path, fp->u.seq.n, mm, ngroups);
	if (v_num(o, "clip_grad", clip) < 0)
		*clip = -1;
	for (int gi = 0; gi < ngroups; gi++) {
		char k[16];
		snprintf(k, sizeof k, "%d", gi);
		const struct pt_value *m32 = fp->u.seq.v[gi], *cnt = pc->u.seq.v[gi],
				      *pad = pads->u.seq.v[gi], *pg = pgs->u.seq.v[gi],
				      *ea = pt_get(f, st, PT_TENSOR, k, "exp_avg", NULL),
				      *eas = ea ? pt_get(f, st, PT_TENSOR, k, "exp_avg_sq", NULL) : NULL;
		if (!ea || !eas)
			return fail(err, errlen, "%s: base_optimizer_state: %s", f->path, pt_error(f));
		if (m32->kind != PT_TENSOR || cnt->kind != PT_INT || pad->kind != PT_INT ||
		    pg->kind != PT_DICT)
			return fail(err, errlen, "%s: group %d: the fp32 partition, partition_count, "
				    "padding or param_groups entry has the wrong type", f->path, gi);
		if (cnt->u.i != c->dp)
			return fail(err, errlen, "%s: group %d is partitioned %lld ways; dp_world_size "
				    "is %d", f->path, gi, (long long)cnt->u.i, c->dp);
		const struct pt_tensor *x[3] = {&m32->u.t, &ea->u.t, &eas->u.t};
		for (int b = 0; b < 3; b++) {
			if (x[b]->ndim != 1 || x[b]->dtype != PTD_F32)
				return fail(err, errlen, "%s: group %d's %s partition is not a 1-D float32 "
					    "tensor (%s, %d-D)", f->path, gi, mds_buf_name[b],
					    pt_dtype_name(x[b]->dtype), x[b]->ndim);
			if (x[b]->numel != x[0]->numel)
				return fail(err, errlen, "%s: group %d: the master's partition has %lld "
					    "elements, its %s %lld", f->path, gi,
					    (long long)x[0]->numel, mds_buf_name[b],
					    (long long)x[b]->numel);
			sl[gi].t[b] = *x[b];
			sl[gi].storage[b] = storage_index(f, x[b]->storage);
		}
		if (d == 0)
			ps[gi] = x[0]->numel;
		else if (x[0]->numel != ps[gi])
			return fail(err, errlen, "%s: group %d's partition has %lld elements; DP rank "
				    "0's has %lld", f->path, gi, (long long)x[0]->numel,
				    (long long)ps[gi]);
		sl[gi].file = fi;
		sl[gi].pad = pad->u.i;
		if (d < c->dp - 1 && pad->u.i != 0)
			return fail(err, errlen, "%s: group %d has padding %lld on DP rank %d; only the "
				    "last DP rank's partition is padded", f->path, gi,
				    (long long)pad->u.i, d);
		int64_t step;
		if (v_int(pg, "step", &step) == 0) {
			if (c->adam_step < 0)
				c->adam_step = step;
			else if (step != c->adam_step)
				return fail(err, errlen, "%s: param group %d has taken %lld Adam steps, "
					    "others %lld", f->path, gi, (long long)step,
					    (long long)c->adam_step);
		}
		/* the slice mappings say what the partition holds: they must be the groups' cut */
		const struct pt_value *mp = maps && maps->kind == PT_LIST && (size_t)gi < maps->u.seq.n
					    ? maps->u.seq.v[gi] : NULL;
		if (maps && (!mp || mp->kind != PT_DICT))
			return fail(err, errlen, "%s: param_slice_mappings[%d] is missing", f->path, gi);
		int64_t lo = (int64_t)d * ps[gi], hi = lo + ps[gi];
		size_t seen = 0;
		for (int j = 0; mp && j < g[gi].n; j++) {
			const struct ds_param *q = &g[gi].p[j];
			int64_t a = q->off > lo ? q->off : lo, e = q->off + q->numel < hi ?
				    q->off + q->numel : hi;
			const struct pt_value *fa = pt_dict_get(mp, q->name);
			int64_t start, numel;
			if (a >= e && !fa)
				continue;
			seen++;
			if (a >= e || !fa || v_int(fa, "start", &start) < 0 ||
			    v_int(fa, "numel", &numel) < 0 || start != a - lo || numel != e - a)
				return fail(err, errlen, "%s: param_slice_mappings[%d] puts %s elsewhere "
					    "than its place in the flat group (elements [%lld, %lld) of "
					    "this partition): partitions of other ranks or groups mixed?",
					    f->path, gi, q->name, (long long)(a - lo), (long long)(e - lo));
		}
		if (mp && seen != mp->u.dict.n)
			return fail(err, errlen, "%s: param_slice_mappings[%d] names %zu parameters, "
				    "param_shapes puts %zu in this partition", f->path, gi,
				    mp->u.dict.n, seen);
	}
	return 0;
}

static int open_ds(struct mds *c, char *err, size_t errlen)
{
	char p[4400];
	int rc, nmm = 0, noptim = 0;
	DIR *dh = opendir(c->dir);
	struct dirent *e;
	if (!dh)
		return fail(err, errlen, "%s: %s", c->dir, strerror(errno)), EXIT_FAILED;
	/* every .pt file is one of the three kinds; anything else is refused by name */
	while ((e = readdir(dh))) {
		int a, b;
		const char *n = e->d_name;
		size_t l = strlen(n);
		if (name_is(n, "mp_rank_%d_model_states.pt%n", &a, NULL))
			nmm++;
		else if (name_is(n, "bf16_zero_pp_rank_%d_mp_rank_%d_optim_states.pt%n", &a, &b))
			noptim++;
		else if (name_is(n, "layer_%d-model_%d-model_states.pt%n", &a, &b))
			;
		else if (name_is(n, "zero_pp_rank_%d_mp_rank_%d_optim_states.pt%n", &a, &b)) {
			closedir(dh);
			return fail(err, errlen, "%s/%s: an fp16 ZeRO optimizer partition "
				    "(DeepSpeedZeroOptimizer; the 13B's setup): lmtk reads the bf16 "
				    "optimizer's (bf16_zero_*) only", c->dir, n);
		} else if (l > 3 && strcmp(n + l - 3, ".pt") == 0) {
			closedir(dh);
			return fail(err, errlen, "%s/%s: a .pt file that is not one of DeepSpeed's "
				    "(layer_XX-model_TT-model_states.pt, mp_rank_MM_model_states.pt, "
				    "bf16_zero_pp_rank_D_mp_rank_MM_optim_states.pt)", c->dir, n);
		}
	}
	closedir(dh);

	snprintf(p, sizeof p, "%s/mp_rank_00_model_states.pt", c->dir);
	int f0i = file_add(c, p);
	struct pt_file *f0 = f0i < 0 ? NULL : file_get(c, f0i, err, errlen);
	if (!f0)
		return f0i < 0 ? fail(err, errlen, "out of memory") : EXIT_USAGE;
	const struct pt_value *root = f0->root, *args = pt_dict_get(root, "args");
	int64_t tp, pp, dp, mpw, skipped = 0;
	if (root->kind != PT_DICT || !args)
		return fail(err, errlen, "%s: not DeepSpeed's model states (no args)", f0->path);
	if ((rc = arg_int(f0, args, "tensor_model_parallel_size", &tp, err, errlen)) ||
	    (rc = arg_int(f0, args, "pipeline_model_parallel_size", &pp, err, errlen)))
		return rc;
	if (v_int(root, "dp_world_size", &dp) < 0 || dp < 1 || dp > 1 << 20)
		return fail(err, errlen, "%s: no dp_world_size", f0->path);
	if (v_int(root, "mp_world_size", &mpw) == 0 && mpw != tp * pp)
		return fail(err, errlen, "%s: mp_world_size %lld is not TP=%lld x PP=%lld", f0->path,
			    (long long)mpw, (long long)tp, (long long)pp);
	if (tp > 1024 || pp > 64)
		return fail(err, errlen, "%s: TP=%lld PP=%lld: lmtk reads TP <= 1024, PP <= 64",
			    f0->path, (long long)tp, (long long)pp);
	c->tp = (int)tp;
	c->pp = (int)pp;
	c->dp = (int)dp;
	/* the files the layout names: the first one missing is named */
	for (int mm = 0; mm < c->tp * c->pp; mm++) {
		snprintf(p, sizeof p, "%s/mp_rank_%02d_model_states.pt", c->dir, mm);
		if (!is_file(p))
			return fail(err, errlen, "%s: missing (args say TP=%d PP=%d)", p, c->tp, c->pp);
		for (int d = 0; noptim && d < c->dp; d++) {
			snprintf(p, sizeof p, "%s/bf16_zero_pp_rank_%d_mp_rank_%02d_optim_states.pt",
				 c->dir, d, mm);
			if (!is_file(p))
				return fail(err, errlen, "%s: missing (TP=%d PP=%d DP=%d, and the other "
					    "optimizer partitions are there)", p, c->tp, c->pp, c->dp);
		}
	}
	if (nmm != c->tp * c->pp)
		return fail(err, errlen, "%s: %d mp_rank_*_model_states.pt files; TP=%d x PP=%d "
			    "needs %d", c->dir, nmm, c->tp, c->pp, c->tp * c->pp);
	c->has_optimizer = noptim > 0;
	if (noptim && noptim != c->tp * c->pp * c->dp)
		return fail(err, errlen, "%s: %d bf16_zero_*_optim_states.pt files; TP=%d x PP=%d x "
			    "DP=%d needs %d", c->dir, noptim, c->tp, c->pp, c->dp,
			    c->tp * c->pp * c->dp);
	json_t *model = NULL;
	if ((rc = read_model(c, f0, root, &model, err, errlen)) ||
	    (rc = read_counters(c, f0, root, err, errlen)))
		goto out;
	v_int(root, "skipped_steps", &skipped);
	if (c->m.layers < c->pp) {
		rc = fail(err, errlen, "%s: PP=%d stages for %d layers", f0->path, c->pp, c->m.layers);
		goto out;
	}
	if ((rc = alloc_parts(c, err, errlen)))
		goto out;
	/* the manifest needs root's values: built before another file is opened */
	double clip = -1, aclip = 1.0;
	v_num(args, "clip_grad", &aclip);
	c->adam_step = -1;
	int *stage_of = malloc(c->m.n * sizeof *stage_of);
	struct ds_group *g = NULL;
	int ngroups = 0;
	if (!stage_of) {
		rc = fail(err, errlen, "out of memory");
		goto out;
	}
	for (int t = 0; t < c->m.n; t++)
		stage_of[t] = -1;
	/* per stage and rank: the inventory, then each DP rank's partitions */
	for (int s = 0; s < c->pp && !rc; s++)
		for (int r = 0; r < c->tp && !rc; r++) {
			rc = ds_inventory(c, s, r, &g, &ngroups, stage_of, err, errlen);
			struct ds_slice *sl = rc ? NULL : calloc((size_t)c->dp * ngroups, sizeof *sl);
			int64_t *ps = rc ? NULL : calloc(ngroups, sizeof *ps);
			if (!rc && (!sl || !ps))
				rc = fail(err, errlen, "out of memory");
			for (int d = 0; d < c->dp && !rc && c->has_optimizer; d++) {
				double cg = -1;
				rc = ds_partition(c, s, r, d, g, ngroups, sl + (size_t)d * ngroups, ps,
						  &cg, err, errlen);
				if (!rc && cg >= 0)
					clip = cg;
			}
			for (int gi = 0; gi < ngroups && !rc && c->has_optimizer; gi++) {
				int64_t total = ps[gi] * c->dp, pad = sl[(size_t)(c->dp - 1) * ngroups + gi].pad;
				if (g[gi].used + pad != total)
					rc = fail(err, errlen, "%s/bf16_zero_pp_rank_*_mp_rank_%02d: group %d "
						  "holds %d x %lld elements with padding %lld; its parameters "
						  "are %lld", c->dir, s * c->tp + r, gi, c->dp,
						  (long long)ps[gi], (long long)pad, (long long)g[gi].used);
				/* each parameter: a run of the flat group, cut by the DP partitions */
				for (int j = 0; j < g[gi].n && !rc; j++) {
					const struct ds_param *q = &g[gi].p[j];
					if (q->t < 0)
						continue;
					for (int b = 0; b < 3 && !rc; b++)
						for (int64_t x = q->off; x < q->off + q->numel && !rc;) {
							int d = (int)(x / ps[gi]);
							int64_t e = (int64_t)(d + 1) * ps[gi];
							if (e > q->off + q->numel)
								e = q->off + q->numel;
							const struct ds_slice *z = &sl[(size_t)d * ngroups + gi];
							rc = ext_add(c, q->t, b, r, s, z->file, z->storage[b],
								     &z->t[b], x - (int64_t)d * ps[gi], e - x,
								     err, errlen);
							x = e;
						}
				}
			}
			for (int gi = 0; g && gi < ngroups; gi++)
				free(g[gi].p);
			free(g);
			g = NULL;
			free(sl);
			free(ps);
		}
	/* the bf16 weights: layer files (2.3), on the stage whose inventory holds them */
	dh = rc ? NULL : opendir(c->dir);
	while (dh && !rc && (e = readdir(dh))) {
		int spec, r;
		if (!name_is(e->d_name, "layer_%d-model_%d-model_states.pt%n", &spec, &r))
			continue;
		snprintf(p, sizeof p, "%s/%s", c->dir, e->d_name);
		if (r >= c->tp) {
			rc = fail(err, errlen, "%s: TP rank %d; the checkpoint has TP=%d", p, r, c->tp);
			break;
		}
		int fi = file_add(c, p);
		struct pt_file *f = fi < 0 ? NULL : file_get(c, fi, err, errlen);
		if (!f) {
			rc = fi < 0 ? fail(err, errlen, "out of memory") : EXIT_USAGE;
			break;
		}
		const struct pt_value *sd = f->root;
		if (sd->kind != PT_DICT) {
			rc = fail(err, errlen, "%s: a %s, not a state dict", p, pt_kind_name(sd->kind));
			break;
		}
		for (size_t j = 0; j < sd->u.dict.n && !rc; j++) {
			const struct pt_value *k = sd->u.dict.k[j], *v = sd->u.dict.v[j];
			char pname[200];
			if (k->kind != PT_STR || v->kind != PT_TENSOR) {
				rc = fail(err, errlen, "%s: entry %zu is not a name and a tensor", p, j);
				break;
			}
			if (spec == 1)
				snprintf(pname, sizeof pname, "tied_modules.embed.%s", k->u.str.s);
			else
				snprintf(pname, sizeof pname, "%d.%s", spec, k->u.str.s);
			int t = ds_name(c, pname, 0);
			if (t == NAME_UNKNOWN || t == NAME_IGNORED) {
				rc = fail(err, errlen, "%s: '%s' is no part of lmtk's model of %d layers",
					  p, k->u.str.s, c->m.layers);
				break;
			}
			if (stage_of[t] < 0) {
				rc = fail(err, errlen, "%s: holds %s, which no stage's param_shapes lists",
					  p, k->u.str.s);
				break;
			}
			const struct pt_tensor *x = &v->u.t;
			if (x->dtype != PTD_BF16 && x->dtype != PTD_F16 && x->dtype != PTD_F32) {
				rc = fail(err, errlen, "%s: %s is %s, not a floating-point weight", p,
					  k->u.str.s, pt_dtype_name(x->dtype));
				break;
			}
			if (!shape_ok(c, t, x->shape, x->ndim)) {
				rc = shape_fail(c, p, k->u.str.s, t, x->shape, x->ndim, err, errlen);
				break;
			}
			c->weights_dtype = pt_dtype_name(x->dtype);
			rc = ext_add(c, t, MDS_BF16, r, stage_of[t], fi, storage_index(f, x->storage), x,
				     0, x->numel, err, errlen);
		}
	}
	if (dh)
		closedir(dh);
	if (rc)
		goto done;
	/* every parameter, every rank: its weights, and master and moments if saved */
	for (int t = 0; t < c->m.n && !rc; t++)
		for (int r = 0; r < c->tp && !rc; r++) {
			int held[MDS_NBUFS] = {0};
			for (int s = 0; s < c->pp; s++)
				for (int b = 0; b < MDS_NBUFS; b++)
					held[b] |= mds_has(c, t, b, r, s);
			if (!held[MDS_BF16])
				rc = fail(err, errlen, "%s/layer_*-model_%02d-model_states.pt: no file holds "
					  "lmtk's %s", c->dir, r, c->m.t[t].name);
			else if (c->has_optimizer && !held[MDS_MASTER])
				rc = fail(err, errlen, "%s: no mp_rank_*_model_states.pt's param_shapes "
					  "lists lmtk's %s for TP rank %d", c->dir, c->m.t[t].name, r);
		}
	if (rc)
		goto done;
	if (!c->has_optimizer)
		c->adam_step = 0;
	if (!c->weights_dtype)
		c->weights_dtype = "bfloat16";
	/* the manifest from mp_rank_00 again (its values may have been closed meanwhile) */
	if (!(f0 = file_get(c, f0i, err, errlen))) {
		rc = EXIT_USAGE;
		goto done;
	}
	rc = build_manifest(c, f0, f0->root, model, NULL, clip >= 0 ? clip : aclip, 1.0, 0,
			    2, skipped, err, errlen);
	if (!rc && c->has_optimizer) {
		/* Adam's hyper-parameters from the first optimizer file's first group */
		snprintf(p, sizeof p, "%s/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt", c->dir);
		for (int i = 0; i < c->nfiles; i++)
			if (strcmp(c->files[i].path, p) == 0) {
				struct pt_file *f = file_get(c, i, err, errlen);
				const struct pt_value *pg = f ? pt_get(f, NULL, PT_DICT,
					"optimizer_state_dict", "base_optimizer_state", "param_groups", "0",
					NULL) : NULL;
				json_t *op = json_object_get(c->manifest, "optimizer");
				const struct pt_value *betas = pt_dict_get(pg, "betas");
				double v;
				if (betas && betas->kind == PT_TUPLE && betas->u.seq.n == 2 &&
				    betas->u.seq.v[0]->kind == PT_FLOAT && betas->u.seq.v[1]->kind == PT_FLOAT) {
					json_object_set_new(op, "beta1", json_real(f32(betas->u.seq.v[0]->u.f)));
					json_object_set_new(op, "beta2", json_real(f32(betas->u.seq.v[1]->u.f)));
				}
				if (v_num(pg, "eps", &v) == 0)
					json_object_set_new(op, "eps", json_real(f32(v)));
				if (v_num(pg, "weight_decay", &v) == 0)
					json_object_set_new(op, "weight_decay", json_real(f32(v)));
			}
	}
done:
	free(stage_of);
out:
	json_decref(model);
	return rc;
}

/* ---- plain Megatron (section 3) ---- */

struct meg_leaf {
	char name[200];
	int t;
	const struct pt_tensor *x;
};

/* The model's tensors in order (3.2): dicts of dicts, leaves keyed by path. */
static int meg_leaves(const struct pt_file *f, const struct pt_value *v, char *prefix,
		      struct meg_leaf *out, int *n, int cap, char *err, size_t errlen)
{
	size_t pl = strlen(prefix);
	for (size_t i = 0; i < v->u.dict.n; i++) {
		const struct pt_value *k = v->u.dict.k[i], *x = v->u.dict.v[i];
		if (k->kind != PT_STR)
			return fail(err, errlen, "%s: model: a key that is no string", f->path);
		if (pl + k->u.str.len + 2 >= 200)
			return fail(err, errlen, "%s: model: key %s... too long", f->path, prefix);
		snprintf(prefix + pl, 200 - pl, "%s%s", pl ? "." : "", k->u.str.s);
		if (x->kind == PT_DICT) {
			int rc = meg_leaves(f, x, prefix, out, n, cap, err, errlen);
			if (rc)
				return rc;
		} else if (x->kind == PT_TENSOR) {
			if (*n >= cap)
				return fail(err, errlen, "%s: model: more tensors than lmtk's model has",
					    f->path);
			snprintf(out[*n].name, sizeof out[*n].name, "%s", prefix);
			out[*n].x = &x->u.t;
			(*n)++;
		} else if (x->kind != PT_NONE) {
			return fail(err, errlen, "%s: model: %s is a %s, not a tensor", f->path, prefix,
				    pt_kind_name(x->kind));
		}
		prefix[pl] = 0;
	}
	return 0;
}

static int meg_file(struct mds *c, int s, int r, char *p, size_t n)
{
	if (c->pp == 1)
		snprintf(p, n, "%s/mp_rank_%02d/model_optim_rng.pt", c->dir, r);
	else
		snprintf(p, n, "%s/mp_rank_%02d_%03d/model_optim_rng.pt", c->dir, r, s);
	return is_file(p);
}

/* Stage s, TP rank r: weights, masters and moments. */
static int meg_rank(struct mds *c, int s, int r, int first, char *err, size_t errlen)
{
	char p[4400], prefix[200] = "";
	int rc, n = 0, cap = c->m.n + 8;
	meg_file(c, s, r, p, sizeof p);
	int fi = file_add(c, p);
	struct pt_file *f = fi < 0 ? NULL : file_get(c, fi, err, errlen);
	if (!f)
		return fi < 0 ? fail(err, errlen, "out of memory") : EXIT_USAGE;
	const struct pt_value *root = f->root, *model;
	if ((rc = check_layout(c, f, root, err, errlen)))
		return rc;
	if (pt_dict_get(root, "model0"))
		return fail(err, errlen, "%s: model0, model1 ...: a virtual (interleaved) pipeline, "
			    "which lmtk does not read", p);
	if (!(model = pt_get(f, NULL, PT_DICT, "model", NULL)))
		return fail(err, errlen, "%s", pt_error(f));
	struct meg_leaf *lv = calloc(cap, sizeof *lv);
	if (!lv)
		return fail(err, errlen, "out of memory");
	if ((rc = meg_leaves(f, model, prefix, lv, &n, cap, err, errlen)))
		goto out;
	for (int i = 0; i < n && !rc; i++) {
		lv[i].t = meg_name(c, lv[i].name, s);
		if (lv[i].t < 0)
			rc = fail(err, errlen, "%s: model.%s is no part of lmtk's GPT/BLOOM model (%d "
				  "layers, %d per stage)", p, lv[i].name, c->m.layers,
				  c->m.layers / c->pp);
		else if (!shape_ok(c, lv[i].t, lv[i].x->shape, lv[i].x->ndim))
			rc = shape_fail(c, p, lv[i].name, lv[i].t, lv[i].x->shape, lv[i].x->ndim, err,
					errlen);
		else if (lv[i].x->dtype != PTD_BF16 && lv[i].x->dtype != PTD_F16 &&
			 lv[i].x->dtype != PTD_F32)
			rc = fail(err, errlen, "%s: model.%s is %s, not a floating-point weight", p,
				  lv[i].name, pt_dtype_name(lv[i].x->dtype));
		else {
			c->weights_dtype = pt_dtype_name(lv[i].x->dtype);
			rc = ext_add(c, lv[i].t, MDS_BF16, r, s, fi, storage_index(f, lv[i].x->storage),
				     lv[i].x, 0, lv[i].x->numel, err, errlen);
		}
	}
	if (rc)
		goto out;
	const struct pt_value *opt = pt_dict_get(root, "optimizer");
	int has = opt && opt->kind == PT_DICT;
	if (first)
		c->has_optimizer = has;
	else if (has != c->has_optimizer) {
		rc = fail(err, errlen, "%s: %s an optimizer state, the first file %s", p,
			  has ? "has" : "has no", has ? "has none" : "has one");
		goto out;
	}
	if (!has)
		goto out;
	/* Float16OptimizerWithFloat16Params: {optimizer, fp32_from_fp16_params[, grad_scaler]};
	 * FP32Optimizer: the apex state dict itself, masters = the model's weights */
	const struct pt_value *masters = pt_dict_get(opt, "fp32_from_fp16_params"),
			      *inner = masters ? pt_dict_get(opt, "optimizer") : opt, *pgs, *st;
	if (!inner || !(pgs = pt_get(f, inner, PT_LIST, "param_groups", NULL)) ||
	    !(st = pt_get(f, inner, PT_DICT, "state", NULL))) {
		rc = fail(err, errlen, "%s: optimizer: %s", p, pt_error(f));
		goto out;
	}
	int ng = (int)pgs->u.seq.n;
	if (masters && (masters->kind != PT_LIST || masters->u.seq.n != (size_t)ng)) {
		rc = fail(err, errlen, "%s: optimizer.fp32_from_fp16_params has no list per param "
			  "group (%d)", p, ng);
		goto out;
	}
	if (ng != 2 && ng != 3) {
		rc = fail(err, errlen, "%s: %d param groups: Megatron makes 2 (decay, no decay) or, "
			  "BigScience's, 3 (decay halves, no decay)", p, ng);
		goto out;
	}
	/* the groups (2.5): model order, decayed ones cut in halves when there are three */
	int *grp = malloc(n * sizeof *grp), ndec = 0;
	if (!grp) {
		rc = fail(err, errlen, "out of memory");
		goto out;
	}
	for (int i = 0; i < n; i++)
		ndec += !no_decay(&c->m, lv[i].t);
	for (int i = 0, k = 0; i < n; i++) {
		if (no_decay(&c->m, lv[i].t))
			grp[i] = ng - 1;
		else
			grp[i] = ng == 3 && k++ >= ndec / 2 ? 1 : 0;
	}
	for (int gi = 0, j; gi < ng && !rc; gi++) {
		const struct pt_value *pg = pgs->u.seq.v[gi], *ids = pt_dict_get(pg, "params"),
				      *ml = masters ? masters->u.seq.v[gi] : NULL;
		int cnt = 0;
		for (int i = 0; i < n; i++)
			cnt += grp[i] == gi;
		if (pg->kind != PT_DICT || !ids || ids->kind != PT_LIST || ids->u.seq.n != (size_t)cnt ||
		    (ml && (ml->kind != PT_LIST || ml->u.seq.n != (size_t)cnt))) {
			rc = fail(err, errlen, "%s: param group %d holds %zu parameters; the model's "
				  "tensors by Megatron's weight-decay rule put %d in it", p, gi,
				  ids && ids->kind == PT_LIST ? ids->u.seq.n : 0, cnt);
			break;
		}
		int64_t step;
		if (v_int(pg, "step", &step) == 0) {
			if (c->adam_step < 0)
				c->adam_step = step;
			else if (step != c->adam_step)
				rc = fail(err, errlen, "%s: param group %d has taken %lld Adam steps, "
					  "others %lld", p, gi, (long long)step, (long long)c->adam_step);
		}
		j = 0;
		for (int i = 0; i < n && !rc; i++) {
			if (grp[i] != gi)
				continue;
			const struct pt_value *id = ids->u.seq.v[j], *m = ml ? ml->u.seq.v[j] : NULL, *sv;
			j++;
			char key[32];
			if (id->kind != PT_INT) {
				rc = fail(err, errlen, "%s: param group %d: a parameter id that is no int",
					  p, gi);
				break;
			}
			snprintf(key, sizeof key, "%lld", (long long)id->u.i);
			const struct pt_tensor *x[3] = {m && m->kind == PT_TENSOR ? &m->u.t : lv[i].x,
							NULL, NULL};
			if (m && m->kind != PT_TENSOR) {
				rc = fail(err, errlen, "%s: fp32_from_fp16_params[%d][%d] is a %s", p, gi,
					  j - 1, pt_kind_name(m->kind));
				break;
			}
			for (int b = 1; b < 3; b++) {
				sv = pt_get(f, st, PT_TENSOR, key, b == 1 ? "exp_avg" : "exp_avg_sq", NULL);
				if (!sv) {
					rc = fail(err, errlen, "%s: optimizer state: %s", p, pt_error(f));
					break;
				}
				x[b] = &sv->u.t;
			}
			for (int b = 0; b < 3 && !rc; b++) {
				if (x[b]->dtype != PTD_F32)
					rc = fail(err, errlen, "%s: the %s of model.%s is %s, not float32", p,
						  mds_buf_name[b], lv[i].name, pt_dtype_name(x[b]->dtype));
				else if (!shape_ok(c, lv[i].t, x[b]->shape, x[b]->ndim))
					rc = shape_fail(c, p, mds_buf_name[b], lv[i].t, x[b]->shape,
							x[b]->ndim, err, errlen);
				else
					rc = ext_add(c, lv[i].t, b, r, s, fi, storage_index(f, x[b]->storage),
						     x[b], 0, x[b]->numel, err, errlen);
			}
		}
	}
	free(grp);
out:
	free(lv);
	return rc;
}

static int open_meg(struct mds *c, char *err, size_t errlen)
{
	char p[4400];
	int rc, maxr = -1, maxs = -1, nstaged = 0, nplain = 0;
	DIR *dh = opendir(c->dir);
	struct dirent *e;
	if (!dh)
		return fail(err, errlen, "%s: %s", c->dir, strerror(errno)), EXIT_FAILED;
	while ((e = readdir(dh))) {
		int r, s;
		if (e->d_name[0] == '.')
			continue;
		if (name_is(e->d_name, "mp_rank_%d_%d%n", &r, &s)) {
			nstaged++;
		} else if (name_is(e->d_name, "mp_rank_%d%n", &r, NULL)) {
			s = 0;
			nplain++;
		} else {
			closedir(dh);
			return fail(err, errlen, "%s/%s: not a Megatron rank directory (mp_rank_TT or "
				    "mp_rank_TT_SSS)", c->dir, e->d_name);
		}
		maxr = r > maxr ? r : maxr;
		maxs = s > maxs ? s : maxs;
	}
	closedir(dh);
	if (nstaged && nplain)
		return fail(err, errlen, "%s: both mp_rank_TT and mp_rank_TT_SSS directories", c->dir);
	if (maxr < 0)
		return fail(err, errlen, "%s: no mp_rank_* directories", c->dir);
	if (maxr >= 1024 || maxs >= 64)
		return fail(err, errlen, "%s: TP=%d PP=%d: lmtk reads TP <= 1024, PP <= 64", c->dir,
			    maxr + 1, maxs + 1);
	c->tp = maxr + 1;
	c->pp = maxs + 1;
	c->dp = 1;
	for (int s = 0; s < c->pp; s++)
		for (int r = 0; r < c->tp; r++)
			if (!meg_file(c, s, r, p, sizeof p))
				return fail(err, errlen, "%s: missing (the directories name TP=%d PP=%d)",
					    p, c->tp, c->pp);
	meg_file(c, 0, 0, p, sizeof p);
	int f0i = file_add(c, p);
	struct pt_file *f0 = f0i < 0 ? NULL : file_get(c, f0i, err, errlen);
	if (!f0)
		return f0i < 0 ? fail(err, errlen, "out of memory") : EXIT_USAGE;
	json_t *model = NULL;
	const struct pt_value *root = f0->root;
	if (root->kind != PT_DICT)
		return fail(err, errlen, "%s: a %s, not Megatron's checkpoint dict", p,
			    pt_kind_name(root->kind));
	if ((rc = read_model(c, f0, root, &model, err, errlen)) ||
	    (rc = read_counters(c, f0, root, err, errlen)))
		goto out;
	if (c->m.layers % c->pp) {
		rc = fail(err, errlen, "%s: %d layers over PP=%d: Megatron's stages hold L/PP layers "
			  "each", p, c->m.layers, c->pp);
		goto out;
	}
	if ((rc = alloc_parts(c, err, errlen)))
		goto out;
	c->adam_step = -1;
	for (int s = 0; s < c->pp && !rc; s++)
		for (int r = 0; r < c->tp && !rc; r++)
			rc = meg_rank(c, s, r, s == 0 && r == 0, err, errlen);
	for (int t = 0; t < c->m.n && !rc; t++)
		for (int r = 0; r < c->tp && !rc; r++) {
			int held = 0;
			for (int s = 0; s < c->pp; s++)
				held |= mds_has(c, t, MDS_BF16, r, s);
			if (!held)
				rc = fail(err, errlen, "%s: no model_optim_rng.pt of TP rank %d holds lmtk's "
					  "%s", c->dir, r, c->m.t[t].name);
		}
	if (rc)
		goto out;
	if (c->adam_step < 0)
		c->adam_step = 0;
	/* counters, schedule and the optimizer's scalars from the first file */
	if (!(f0 = file_get(c, f0i, err, errlen))) {
		rc = EXIT_USAGE;
		goto out;
	}
	root = f0->root;
	const struct pt_value *opt = pt_dict_get(root, "optimizer"),
			      *inner = pt_dict_get(opt, "fp32_from_fp16_params") ?
				       pt_dict_get(opt, "optimizer") : opt,
			      *pgs = pt_dict_get(inner, "param_groups"),
			      *gs = pt_dict_get(opt, "grad_scaler"),
			      *a = pt_dict_get(root, "args");
	double scale = 1.0, clip = 1.0;
	int64_t good = 0, hyst = 2;
	v_num(a, "clip_grad", &clip);
	v_int(a, "hysteresis", &hyst);
	if (gs && gs->kind == PT_DICT) {
		const struct pt_value *sc = pt_dict_get(gs, "scale");
		float v;
		if (sc && sc->kind == PT_TENSOR && sc->u.t.numel == 1 &&
		    pt_read_f32(f0, &sc->u.t, 0, 1, &v) == 0)
			scale = v;
		else if (sc && sc->kind == PT_FLOAT)
			scale = sc->u.f;
		v_int(gs, "growth_tracker", &good);
		v_int(gs, "hysteresis_tracker", &hyst);
	}
	if (!c->weights_dtype)
		c->weights_dtype = "bfloat16";
	rc = build_manifest(c, f0, root, model, pgs && pgs->kind == PT_LIST && pgs->u.seq.n ?
			    pgs->u.seq.v[0] : NULL, clip, scale, good, hyst, 0, err, errlen);
out:
	json_decref(model);
	return rc;
}

/* ---- open, close ---- */

int mds_open(struct mds **out, const char *path, char *err, size_t errlen)
{
	struct mds *c = calloc(1, sizeof *c);
	int rc;
	*out = NULL;
	if (!c)
		return fail(err, errlen, "out of memory"), EXIT_FAILED;
	if ((rc = resolve(c, path, err, errlen)) ||
	    (rc = c->kind == MDS_DEEPSPEED ? open_ds(c, err, errlen) : open_meg(c, err, errlen))) {
		mds_close(c);
		return rc;
	}
	/* the files' pickles are no longer needed: reopened on the first read */
	for (int i = 0; i < c->nfiles; i++)
		if (c->files[i].pf) {
			pt_close(c->files[i].pf);
			c->files[i].pf = NULL;
		}
	c->nopen = 0;
	*out = c;
	return 0;
}

void mds_close(struct mds *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->nfiles; i++) {
		pt_close(c->files[i].pf);
		free(c->files[i].path);
	}
	free(c->files);
	free(c->first);
	free(c->count);
	free(c->ext);
	json_decref(c->manifest);
	lt_free(&c->m);
	free(c->dir);
	free(c);
}

/* ---- the view as an sh_ckpt ---- */

struct view {
	struct mds *m;
	int bufs[LT_GROUPS];
	int tied_copy;
};

/* the stage a view's part is read from: the last stage's tied copy of the bf16 word
 * embeddings is stage 0's */
static int view_stage(const struct view *v, int t, int b, int s)
{
	return v->tied_copy && b == MDS_BF16 && t == v->m->m.wte && s == v->m->pp - 1 && s > 0 ? 0 : s;
}

static int view_read(void *ctx, int t, int g, int r, int s, int64_t a, int64_t b, float *dst,
		     char *err, size_t errlen)
{
	struct view *v = ctx;
	int buf = v->bufs[g];
	if (buf == MDS_ZERO) {
		memset(dst, 0, (size_t)(b - a) * sizeof *dst);
		return 0;
	}
	return mds_read(v->m, t, buf, r, view_stage(v, t, buf, s), a, b, dst, err, errlen);
}

int mds_view(struct sh_ckpt *c, struct mds *m, const int bufs[LT_GROUPS], int tied_copy,
	     char *err, size_t errlen)
{
	memset(c, 0, sizeof *c);
	struct view *v = calloc(1, sizeof *v);
	if (!v)
		return errf(err, errlen, "out of memory");
	v->m = m;
	memcpy(v->bufs, bufs, sizeof v->bufs);
	v->tied_copy = tied_copy && m->pp > 1;
	c->dir = strdup(m->dir);
	c->manifest = json_deep_copy(m->manifest);
	c->iteration = m->iteration;
	c->tp = m->tp;
	c->pp = m->pp;
	c->bytes = m->bytes;
	struct sh_source src = {view_read, free, v};
	if (!c->dir || !c->manifest || lt_copy(&c->m, &m->m, m->m.padded_vocab) < 0) {
		free(v);
		return errf(err, errlen, "out of memory");
	}
	if (sh_init_source(c, &src, err, errlen) < 0)
		return -1;
	json_t *op = json_object_get(c->manifest, "optimizer"),
	       *from = json_object_get(c->manifest, "converted_from");
	if (bufs[1] == MDS_ZERO)   /* no moments: a fresh optimizer */
		json_object_set_new(op, "step", json_integer(0));
	json_object_set_new(from, "weights", json_string(bufs[0] == MDS_BF16 ? m->weights_dtype :
							  "fp32 master"));
	for (int t = 0; t < c->m.n; t++)
		for (int g = 0; g < LT_GROUPS; g++)
			for (int r = 0; r < c->tp; r++)
				for (int s = 0; s < c->pp; s++) {
					/* zeros stand where the weights are */
					int b = bufs[g] == MDS_ZERO ? bufs[0] : bufs[g];
					c->held[sh_index(c, t, g, r, s)] =
						mds_has(m, t, b, r, view_stage(v, t, b, s));
				}
	return 0;
}
