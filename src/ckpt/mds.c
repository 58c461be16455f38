/* mds - see mds.h (and mds_int.h: mds_ds.c and mds_meg.c read the two layouts).  Section
 * numbers (2.3, 3.2 ...) are tests/ref/mds-format.md's. */
#include "ckpt/mds.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "file.h"
#include "fsx.h"
#include "ckpt/mds_int.h"

const char *const mds_buf_name[MDS_NBUFS] = {"fp32 master", "exp_avg", "exp_avg_sq",
					     "model weight"};

/* ---- files ---- */

int mds_file_add_(struct mds *c, const char *path)
{
	for (int i = 0; i < c->nfiles; i++)   /* once each: its bytes counted once */
		if (strcmp(c->files[i].path, path) == 0)
			return i;
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
struct pt_file *mds_file_get_(struct mds *c, int i, char *err, size_t errlen)
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

int mds_storage_index_(const struct pt_file *pf, const struct pt_storage *s)
{
	for (size_t i = 0; i < pf->nstorages; i++)
		if (pf->storages[i] == s)
			return (int)i;
	return -1;
}

/* Appends an extent to part (t, b, r, s), whose extents must be added one after another:
 * elements [a, a + n) of tensor x of file `file`, x's storage being the file's storages[st]. */
int mds_ext_add_(struct mds *c, int t, int b, int r, int s, int file, int st,
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
			return fail_oom(err, errlen, "the list of tensor extents", cap * sizeof *e);
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
				struct pt_file *pf = mds_file_get_(c, x->file, err, errlen);
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
/* ---- args and shapes ---- */

/* a required positive int of args */
int mds_arg_int_(const struct pt_file *f, const struct pt_value *args, const char *key,
		   int64_t *out, char *err, size_t errlen)
{
	if (v_int(args, key, out) < 0 || *out <= 0 || *out > (1 << 30))
		return fail(err, errlen, "%s: args.%s is missing or not a positive integer", f->path,
			    key);
	return 0;
}

/* Does tensor x have the TP-local shape of lmtk tensor t? */
int mds_shape_ok_(const struct mds *c, int t, const int64_t *shape, int ndim)
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

int mds_shape_fail_(const struct mds *c, const char *path, const char *what, int t,
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

int mds_no_decay_(const char *n)
{
	size_t l = strlen(n);
	return strstr(n, "layernorm") != NULL || (l > 5 && strcmp(n + l - 5, ".bias") == 0);
}


/* A transformer layer's key ("self_attention.dense.weight") as lmtk's ("layers.L.attention...") */
int mds_layer_name_(const struct lt_model *m, int l, const char *key)
{
	char n[160];
	if (strncmp(key, "self_attention.", 15) == 0)
		snprintf(n, sizeof n, "layers.%d.attention.%s", l, key + 15);
	else
		snprintf(n, sizeof n, "layers.%d.%s", l, key);
	return lt_find(m, n);
}

/* ---- the model, counters and schedule from args (2.4, 2.7) ---- */

int mds_read_model_(struct mds *c, const struct pt_file *f, const struct pt_value *root,
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
	if ((rc = mds_arg_int_(f, a, "num_layers", &L, err, errlen)) ||
	    (rc = mds_arg_int_(f, a, "hidden_size", &h, err, errlen)) ||
	    (rc = mds_arg_int_(f, a, "num_attention_heads", &heads, err, errlen)) ||
	    (rc = mds_arg_int_(f, a, "max_position_embeddings", &P, err, errlen)) ||
	    (rc = mds_arg_int_(f, a, "padded_vocab_size", &padded, err, errlen)))
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
		return fail_oom(err, errlen, "the converted model's settings", 0);
	/* pre-LN: the post-LN residual is refused above */
	json_object_set_new(*model, "apply_residual_connection_post_layernorm", json_false());
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
 * checkpoint has none (--no-save-optim).  NULL with *rc the exit code: EXIT_USAGE for a checkpoint
 * that lacks it, EXIT_FAILED when memory ran out. */
static json_t *read_sched(struct mds *c, const struct pt_file *f, const struct pt_value *root,
			  int *rc, char *err, size_t errlen)
{
	*rc = EXIT_USAGE;
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
		*rc = fail_oom(err, errlen, "the converted learning-rate schedule", 0);
	return j;
}

/* The counters of the first file (2.7); every other file must agree on the iteration. */
int mds_read_counters_(struct mds *c, const struct pt_file *f, const struct pt_value *root,
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
int mds_check_layout_(const struct mds *c, const struct pt_file *f, const struct pt_value *root,
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

int mds_build_manifest_(struct mds *c, const struct pt_file *f, const struct pt_value *root,
			  json_t *model, const struct pt_value *pgroup, double clip,
			  double loss_scale, int64_t good, int64_t hyst, int64_t skipped,
			  char *err, size_t errlen)
{
	const struct pt_value *a = pt_dict_get(root, "args");
	int rc;
	json_t *sched = read_sched(c, f, root, &rc, err, errlen);
	if (!sched)
		return rc;
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
	char *abs = realpath(c->dir, NULL), layout[200];
	if (c->kind == MDS_MEGATRON)
		snprintf(layout, sizeof layout, "megatron (mp_rank_*/model_optim_rng.pt)");
	else if (c->kind == MDS_UNIVERSAL)
		snprintf(layout, sizeof layout, "deepspeed universal (zero/*/fp32.pt, mp_rank_*)");
	else
		snprintf(layout, sizeof layout, "deepspeed pipeline (layer_*, mp_rank_*; optimizer: "
			 "%s)", c->optim ? c->optim : "none read");
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
		"converted_from", "format", "megatron-deepspeed", "layout", layout, "path", abs ? abs : c->dir, "ds_version", dsv,
		"weights", c->has_optimizer ? "fp32 master" : c->weights_dtype);
	free(abs);
	if (!c->manifest)
		return fail_oom(err, errlen, "the converted checkpoint's manifest", 0);
	return 0;
}
/* ---- the step directory ---- */

static int is_dir(const char *p)
{
	struct stat sb;
	return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
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

/* A universal checkpoint's step directory (ds_to_universal.py): the mp_rank files and zero/ */
static int uni_step(const char *dir)
{
	char p[4400];
	snprintf(p, sizeof p, "%.4300s/zero", dir);
	return ds_step(dir) && is_dir(p);
}

/* A `latest`/`latest_universal` tag without the whitespace around it (in place). */
static char *trim_tag(char *tag)
{
	char *s = tag, *e;
	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
		s++;
	for (e = s + strlen(s); e > s && (e[-1] == ' ' || e[-1] == '\n' || e[-1] == '\r' ||
					  e[-1] == '\t'); e--)
		;
	*e = 0;
	return s;
}

/* The step directory path names, and its kind.  A save directory's `latest` (DeepSpeed's own
 * checkpoint) is read before its `latest_universal` (one ds_to_universal.py made from it). */
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
		c->kind = uni_step(base) ? MDS_UNIVERSAL : ds_step(base) ? MDS_DEEPSPEED : MDS_MEGATRON;
		c->dir = strdup(base);
		return 0;
	}
	snprintf(p, sizeof p, "%s/latest", base);
	if (file_read_all(p, &tag, NULL, why, sizeof why) == 0) {
		char *s = trim_tag(tag);   /* DeepSpeed writes it without a newline */
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
		if (fsx_confined(base, p, why, sizeof why) == 1)
			return fail(err, errlen, "%s/latest names %s, which %s: `latest` must name a "
				    "step inside the directory", base, p + strlen(base) + 1, why);
		c->kind = uni_step(p) ? MDS_UNIVERSAL : MDS_DEEPSPEED;
		c->dir = strdup(p);
		return 0;
	}
	snprintf(p, sizeof p, "%s/latest_universal", base);
	if (file_read_all(p, &tag, NULL, why, sizeof why) == 0) {
		char *s = trim_tag(tag);
		snprintf(p, sizeof p, "%s/%s", base, s);
		int ok = *s && !strchr(s, '/') && uni_step(p);
		snprintf(why, sizeof why, "%s", s);
		free(tag);
		if (!ok)
			return fail(err, errlen, "%s/latest_universal names '%s', which holds no "
				    "mp_rank_00_model_states.pt and zero/ (a universal checkpoint)", base,
				    why);
		if (fsx_confined(base, p, why, sizeof why) == 1)
			return fail(err, errlen, "%s/latest_universal names %s, which %s: it must name a "
				    "step inside the directory", base, p + strlen(base) + 1, why);
		c->kind = MDS_UNIVERSAL;
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
		if (fsx_confined(base, p, why, sizeof why) == 1)
			return fail(err, errlen, "%s (named by %s/latest_checkpointed_iteration.txt) %s: "
				    "a step must lie inside the directory", p, base, why);
		c->kind = MDS_MEGATRON;
		c->dir = strdup(p);
		return 0;
	}
	snprintf(p, sizeof p, "%s/manifest.json", base);
	if (is_file(p))
		return fail(err, errlen, "%s is an lmtk checkpoint step, not a Megatron-DeepSpeed one",
			    base);
	return fail(err, errlen, "%s: not a Megatron-DeepSpeed checkpoint (no latest, no "
		    "latest_universal, no latest_checkpointed_iteration.txt, no mp_rank_00_model_states.pt, no "
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

int mds_alloc_parts_(struct mds *c, char *err, size_t errlen)
{
	size_t n = (size_t)c->m.n * MDS_NBUFS * c->tp * c->pp;
	c->first = calloc(n, sizeof *c->first);
	c->count = calloc(n, sizeof *c->count);
	if (!c->first || !c->count)
		return fail_oom(err, errlen, "the index of tensor parts",
				n * (sizeof *c->first + sizeof *c->count));
	return 0;
}
/* ---- open, close ---- */

int mds_open(struct mds **out, const char *path, char *err, size_t errlen)
{
	struct mds *c = calloc(1, sizeof *c);
	int rc;
	*out = NULL;
	if (!c)
		return fail_oom(err, errlen, "the checkpoint reader", sizeof *c), EXIT_FAILED;
	if ((rc = resolve(c, path, err, errlen)) ||
	    (rc = c->kind == MDS_DEEPSPEED ? mds_open_ds_(c, err, errlen) :
		  c->kind == MDS_UNIVERSAL ? mds_open_uni_(c, err, errlen) :
		  mds_open_meg_(c, err, errlen))) {
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
	c->lock = -1;   /* no step lock: the files are Megatron-DeepSpeed's */
	struct view *v = calloc(1, sizeof *v);
	if (!v)
		return xalloc_err(err, errlen, "the checkpoint view", sizeof *v);
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
		return xalloc_err(err, errlen, "the checkpoint view's layout and manifest", 0);
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
