/* mds_meg - plain Megatron's checkpoint (GPT-2; tests/ref/mds-format.md section 3) for mds.h:
 * each mp_rank_TT[_SSS]/model_optim_rng.pt's model leaves, in order, are the parameters; the
 * optimizer's groups by Megatron's weight-decay rule give their masters and moments. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>

#include "ckpt/mds_int.h"

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
	int t = mds_layer_name_(m, s * per + (int)i, end + 1);
	return t >= 0 ? t : NAME_UNKNOWN;
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
	int fi = mds_file_add_(c, p);
	struct pt_file *f = fi < 0 ? NULL : mds_file_get_(c, fi, err, errlen);
	if (!f)
		return fi < 0 ? fail_oom(err, errlen, "the list of checkpoint files", 0) : EXIT_USAGE;
	const struct pt_value *root = f->root, *model;
	if ((rc = mds_check_layout_(c, f, root, err, errlen)))
		return rc;
	if (pt_dict_get(root, "model0"))
		return fail(err, errlen, "%s: model0, model1 ...: a virtual (interleaved) pipeline, "
			    "which lmtk does not read", p);
	if (!(model = pt_get(f, NULL, PT_DICT, "model", NULL)))
		return fail(err, errlen, "%s", pt_error(f));
	struct meg_leaf *lv = calloc(cap, sizeof *lv);
	if (!lv)
		return fail_oom(err, errlen, "the model's leaf tensors", cap * sizeof *lv);
	if ((rc = meg_leaves(f, model, prefix, lv, &n, cap, err, errlen)))
		goto out;
	for (int i = 0; i < n && !rc; i++) {
		lv[i].t = meg_name(c, lv[i].name, s);
		if (lv[i].t < 0)
			rc = fail(err, errlen, "%s: model.%s is no part of lmtk's GPT/BLOOM model (%d "
				  "layers, %d per stage)", p, lv[i].name, c->m.layers,
				  c->m.layers / c->pp);
		else if (!mds_shape_ok_(c, lv[i].t, lv[i].x->shape, lv[i].x->ndim))
			rc = mds_shape_fail_(c, p, lv[i].name, lv[i].t, lv[i].x->shape, lv[i].x->ndim, err,
					errlen);
		else if (lv[i].x->dtype != PTD_BF16 && lv[i].x->dtype != PTD_F16 &&
			 lv[i].x->dtype != PTD_F32)
			rc = fail(err, errlen, "%s: model.%s is %s, not a floating-point weight", p,
				  lv[i].name, pt_dtype_name(lv[i].x->dtype));
		else {
			c->weights_dtype = pt_dtype_name(lv[i].x->dtype);
			rc = mds_ext_add_(c, lv[i].t, MDS_BF16, r, s, fi, mds_storage_index_(f, lv[i].x->storage),
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
		rc = fail_oom(err, errlen, "the param group of each tensor", n * sizeof *grp);
		goto out;
	}
	for (int i = 0; i < n; i++)
		ndec += !mds_no_decay_(c->m.t[lv[i].t].name);
	for (int i = 0, k = 0; i < n; i++) {
		if (mds_no_decay_(c->m.t[lv[i].t].name))
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
				else if (!mds_shape_ok_(c, lv[i].t, x[b]->shape, x[b]->ndim))
					rc = mds_shape_fail_(c, p, mds_buf_name[b], lv[i].t, x[b]->shape,
							x[b]->ndim, err, errlen);
				else
					rc = mds_ext_add_(c, lv[i].t, b, r, s, fi, mds_storage_index_(f, x[b]->storage),
						     x[b], 0, x[b]->numel, err, errlen);
			}
		}
	}
	free(grp);
out:
	free(lv);
	return rc;
}

int mds_open_meg_(struct mds *c, char *err, size_t errlen)
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
	int f0i = mds_file_add_(c, p);
	struct pt_file *f0 = f0i < 0 ? NULL : mds_file_get_(c, f0i, err, errlen);
	if (!f0)
		return f0i < 0 ? fail_oom(err, errlen, "the list of checkpoint files", 0) : EXIT_USAGE;
	json_t *model = NULL;
	const struct pt_value *root = f0->root;
	if (root->kind != PT_DICT)
		return fail(err, errlen, "%s: a %s, not Megatron's checkpoint dict", p,
			    pt_kind_name(root->kind));
	if ((rc = mds_read_model_(c, f0, root, &model, err, errlen)) ||
	    (rc = mds_read_counters_(c, f0, root, err, errlen)))
		goto out;
	if (c->m.layers % c->pp) {
		rc = fail(err, errlen, "%s: %d layers over PP=%d: Megatron's stages hold L/PP layers "
			  "each", p, c->m.layers, c->pp);
		goto out;
	}
	if ((rc = mds_alloc_parts_(c, err, errlen)))
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
	if (!(f0 = mds_file_get_(c, f0i, err, errlen))) {
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
	c->has_weights = 1;
	if (c->has_optimizer)
		c->optim = pt_dict_get(opt, "fp32_from_fp16_params") ? "Megatron's mixed-precision optimizer" : "Megatron's fp32 optimizer";
	else
		snprintf(c->left_out, sizeof c->left_out, "no optimizer state (%.300s/mp_rank_* have no "
			 "'optimizer': saved with --no-save-optim)", c->dir);
	rc = mds_build_manifest_(c, f0, root, model, pgs && pgs->kind == PT_LIST && pgs->u.seq.n ?
			    pgs->u.seq.v[0] : NULL, clip, scale, good, hyst, 0, err, errlen);
out:
	json_decref(model);
	return rc;
}
