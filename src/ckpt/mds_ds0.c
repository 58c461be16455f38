/* mds_ds0 - DeepSpeed's pipeline checkpoint saved without ZeRO (stage 0; tests/ref/mds-format.md
 * 2.8) for mds_ds.c: engine.py then saves no param_shapes and puts the optimizer's state dict
 * itself in every mp_rank_MM_model_states.pt - fp16's FP16_Optimizer (one flat fp32 group per
 * param group, unpadded, unpartitioned, with its moments and loss scaler), or fp32's base
 * optimizer (moments per parameter, the fp32 layer files being the masters).
 *
 * Nothing names a stage's parameters then, so the inventory is rebuilt: DeepSpeed's module
 * order (2.5) over the layers the stage holds - the tied embedding module on the first and last
 * stage (its norm on the first only; learned position embeddings on both, unused on the last
 * but a parameter there too), the layers, the final norm - cut into the optimizer's groups by
 * Megatron's weight-decay rule.  Which layers a stage holds is found from the size of its
 * optimizer state: every layer is the same size, so what the stage holds beyond its embeddings
 * and norms is a whole number of layers, and the stages' numbers add up to the model's.  A flat
 * group of another size than its parameters', or a moment of another shape, is refused naming
 * the file. */
#include <stdlib.h>

#include "ckpt/mds_int.h"

/* Stage s's parameters in DeepSpeed's module order (2.5), its layers [l0, l0 + nl): the tied
 * embedding module (first and last stage; its norm on the first only, its position embeddings
 * - unused on the last stage, but a parameter there too - when learned), the layers, the final
 * norm.  Each entry: the lmtk index (NAME_IGNORED for the last stage's position embeddings),
 * TP-local numel and a name.  The count, or -1 (no room: cap entries). */
static int module_order(const struct mds *c, int s, int l0, int nl, struct ds_param *q, int cap)
{
	const struct lt_model *m = &c->m;
	int n = 0, last = s == c->pp - 1;
	int64_t sh[2];
#define ADD(T, NAME) do { if (n >= cap) return -1; \
		q[n].t = (T); snprintf(q[n].name, sizeof q[n].name, "%s", (NAME)); \
		lt_local_shape(&m->t[(T) >= 0 ? (T) : m->wpe], c->tp, sh); \
		q[n].numel = (int64_t)lt_numel(sh); q[n].off = 0; n++; } while (0)
	if (s == 0 || last) {
		ADD(m->wte, m->t[m->wte].name);
		if (s == 0 && m->eln_w >= 0) {
			ADD(m->eln_w, m->t[m->eln_w].name);
			ADD(m->eln_b, m->t[m->eln_b].name);
		}
		if (m->wpe >= 0)
			ADD(s == 0 ? m->wpe : NAME_IGNORED, m->t[m->wpe].name);
	}
	for (int t = 0; t < m->n; t++)
		if (m->t[t].place == LT_LAYER && m->t[t].layer >= l0 && m->t[t].layer < l0 + nl)
			ADD(t, m->t[t].name);
	if (last) {
		ADD(m->lnf_w, m->t[m->lnf_w].name);
		ADD(m->lnf_b, m->t[m->lnf_b].name);
	}
#undef ADD
	return n;
}

/* The stage's parameters cut into the optimizer's ng groups by Megatron's rule (2.5): with
 * three, the decayed ones' first half, their second half, the rest; with two, decayed, rest. */
int mds_ds0_groups_(const struct mds *c, const char *path, int s, int l0, int nl, int ng,
			    struct ds_group **out, char *err, size_t errlen)
{
	int cap = c->m.n + 8, ndec = 0, k = 0;
	struct ds_param *q = calloc(cap, sizeof *q);
	struct ds_group *g = calloc(ng, sizeof *g);
	*out = g;
	if (!q || !g) {
		free(q);
		return fail_oom(err, errlen, "the stage's parameter groups", cap * sizeof *q);
	}
	int n = module_order(c, s, l0, nl, q, cap);
	if (n < 0) {
		free(q);
		return fail(err, errlen, "%s: more parameters than lmtk's model has", path);
	}
	for (int i = 0; i < n; i++)
		ndec += !mds_no_decay_(q[i].name);
	for (int gi = 0; gi < ng; gi++)
		if (!(g[gi].p = calloc(n ? n : 1, sizeof *g[gi].p))) {
			free(q);
			return fail_oom(err, errlen, "the stage's parameter groups", n * sizeof *q);
		}
	for (int i = 0; i < n; i++) {
		int gi = mds_no_decay_(q[i].name) ? ng - 1 : ng == 3 && k++ >= ndec / 2 ? 1 : 0;
		struct ds_group *G = &g[gi];
		G->p[G->n] = q[i];
		G->p[G->n].off = G->used;
		G->used += q[i].numel;
		G->n++;
	}
	free(q);
	return 0;
}

/* *u: the units of the optimizer state of stage s (TP rank 0): FP16_Optimizer's flat fp32
 * elements, or the base optimizer's parameters.  0, or an exit code + err. */
static int stage_units(struct mds *c, int fp16, int s, int64_t *u, char *err, size_t errlen)
{
	char p[4400];
	snprintf(p, sizeof p, "%s/mp_rank_%02d_model_states.pt", c->dir, s * c->tp);
	int fi = mds_file_add_(c, p);
	struct pt_file *f = fi < 0 ? NULL : mds_file_get_(c, fi, err, errlen);
	if (!f)
		return fi < 0 ? fail_oom(err, errlen, "the list of checkpoint files", 0) : EXIT_USAGE;
	const struct pt_value *l = fp16 ?
		pt_get(f, NULL, PT_LIST, "optimizer", "fp32_groups_flat", NULL) :
		pt_get(f, NULL, PT_LIST, "optimizer", "param_groups", NULL);
	if (!l)
		return fail(err, errlen, "%s", pt_error(f));
	*u = 0;
	for (size_t i = 0; i < l->u.seq.n; i++) {
		const struct pt_value *x = l->u.seq.v[i], *ids;
		if (fp16 && x->kind == PT_TENSOR)
			*u += x->u.t.numel;
		else if (!fp16 && x->kind == PT_DICT && (ids = pt_dict_get(x, "params")) &&
			 ids->kind == PT_LIST)
			*u += (int64_t)ids->u.seq.n;
		else
			return fail(err, errlen, "%s: optimizer.%s[%zu] is a %s", p, fp16 ?
				    "fp32_groups_flat" : "param_groups", i, pt_kind_name(x->kind));
	}
	return 0;
}

/* The layers of each stage, when no param_shapes says: from the size of each stage's optimizer
 * state, every layer being the same size (2.8). */
int mds_ds0_stage_layers_(struct mds *c, int fp16, int *l0, int *nl, char *err,
			   size_t errlen)
{
	struct ds_param q[16];
	int64_t per = 0;
	int total = 0;
	/* a layer's units: its tensors' elements, or their count */
	for (int t = 0; t < c->m.n; t++)
		if (c->m.t[t].place == LT_LAYER && c->m.t[t].layer == 0) {
			int64_t sh[2];
			lt_local_shape(&c->m.t[t], c->tp, sh);
			per += fp16 ? (int64_t)lt_numel(sh) : 1;
		}
	if (per <= 0)
		return fail(err, errlen, "%s: the model in args has no layer tensors", c->dir);
	for (int s = 0; s < c->pp; s++) {
		int64_t u = 0, fixed = 0;
		int rc = stage_units(c, fp16, s, &u, err, errlen);
		if (rc)
			return rc;
		int n = module_order(c, s, 0, 0, q, 16);
		for (int i = 0; i < n; i++)
			fixed += fp16 ? q[i].numel : 1;
		if (u < fixed || (u - fixed) % per || (u - fixed) / per > c->m.layers - total)
			return fail(err, errlen, "%s/mp_rank_%02d_model_states.pt: its optimizer state holds "
				    "%lld %s, which is no whole number of layers (%lld each) beside the "
				    "stage's embeddings and norms (%lld) within the model's %d layers", c->dir,
				    s * c->tp, (long long)u, fp16 ? "elements" : "parameters",
				    (long long)per, (long long)fixed, c->m.layers);
		l0[s] = total;
		nl[s] = (int)((u - fixed) / per);
		total += nl[s];
	}
	if (total != c->m.layers)
		return fail(err, errlen, "%s: the stages' optimizer states hold %d layers; args say %d",
			    c->dir, total, c->m.layers);
	return 0;
}

/* FP16_Optimizer's state in mp_rank_MM (stage 0, fp16): each group one flat fp32 tensor and
 * its moments, unpartitioned and unpadded - a ZeRO group of one partition. */
int mds_ds0_flat16_(struct mds *c, int s, int r, const struct ds_group *g, int ngroups,
		     struct ds_slice *sl, int64_t *ps, double *clip, char *err, size_t errlen)
{
	char p[4400];
	int rc;
	snprintf(p, sizeof p, "%s/mp_rank_%02d_model_states.pt", c->dir, s * c->tp + r);
	int fi = mds_file_add_(c, p);
	struct pt_file *f = fi < 0 ? NULL : mds_file_get_(c, fi, err, errlen);
	if (!f)
		return fi < 0 ? fail_oom(err, errlen, "the list of checkpoint files", 0) : EXIT_USAGE;
	const struct pt_value *o = pt_get(f, NULL, PT_DICT, "optimizer", NULL), *fl, *st, *pgs;
	if (!o || !(fl = pt_get(f, o, PT_LIST, "fp32_groups_flat", NULL)) ||
	    !(st = pt_get(f, o, PT_DICT, "optimizer_state_dict", "state", NULL)) ||
	    !(pgs = pt_get(f, o, PT_LIST, "optimizer_state_dict", "param_groups", NULL)))
		return fail(err, errlen, "%s", pt_error(f));
	if (fl->u.seq.n != (size_t)ngroups || pgs->u.seq.n != (size_t)ngroups)
		return fail(err, errlen, "%s: optimizer: %zu flat groups, %zu param groups; mp_rank_00's "
			    "has %d", p, fl->u.seq.n, pgs->u.seq.n, ngroups);
	if (v_num(o, "clip_grad", clip) < 0)
		*clip = -1;
	for (int gi = 0; gi < ngroups; gi++) {
		char k[16];
		snprintf(k, sizeof k, "%d", gi);
		const struct pt_value *ea = pt_get(f, st, PT_TENSOR, k, "exp_avg", NULL),
				      *eas = ea ? pt_get(f, st, PT_TENSOR, k, "exp_avg_sq", NULL) : NULL;
		if (!eas)
			return fail(err, errlen, "%s: optimizer.optimizer_state_dict.state: %s", p,
				    pt_error(f));
		ps[gi] = g[gi].used;
		sl[gi].pad = 0;
		if ((rc = mds_ds_put_(&sl[gi], f, fi, gi, 0, fl->u.seq.v[gi], ps[gi], "fp32_groups_flat",
				 err, errlen)) ||
		    (rc = mds_ds_put_(&sl[gi], f, fi, gi, 1, ea, ps[gi], "exp_avg", err, errlen)) ||
		    (rc = mds_ds_put_(&sl[gi], f, fi, gi, 2, eas, ps[gi], "exp_avg_sq", err, errlen)) ||
		    (rc = mds_ds_step_(c, p, pgs->u.seq.v[gi], gi, err, errlen)))
			return rc;
	}
	return 0;
}

/* The base optimizer's state in mp_rank_MM (stage 0, fp32): param_groups[g].params[j] is the
 * id of group g's j-th parameter, state[id] its moments, shaped as it. */
int mds_ds0_state32_(struct mds *c, int s, int r, const struct ds_group *g, int ngroups,
		      char *err, size_t errlen)
{
	char p[4400];
	int rc;
	snprintf(p, sizeof p, "%s/mp_rank_%02d_model_states.pt", c->dir, s * c->tp + r);
	int fi = mds_file_add_(c, p);
	struct pt_file *f = fi < 0 ? NULL : mds_file_get_(c, fi, err, errlen);
	if (!f)
		return fi < 0 ? fail_oom(err, errlen, "the list of checkpoint files", 0) : EXIT_USAGE;
	const struct pt_value *st = pt_get(f, NULL, PT_DICT, "optimizer", "state", NULL),
			      *pgs = st ? pt_get(f, NULL, PT_LIST, "optimizer", "param_groups", NULL) : NULL;
	if (!pgs)
		return fail(err, errlen, "%s", pt_error(f));
	if (pgs->u.seq.n != (size_t)ngroups)
		return fail(err, errlen, "%s: optimizer: %zu param groups; mp_rank_00's has %d", p,
			    pgs->u.seq.n, ngroups);
	for (int gi = 0; gi < ngroups; gi++) {
		const struct pt_value *pg = pgs->u.seq.v[gi], *ids = pt_dict_get(pg, "params");
		if (!ids || ids->kind != PT_LIST || ids->u.seq.n != (size_t)g[gi].n)
			return fail(err, errlen, "%s: param group %d holds %zu parameters; the stage's "
				    "by Megatron's weight-decay rule put %d in it", p, gi,
				    ids && ids->kind == PT_LIST ? ids->u.seq.n : 0, g[gi].n);
		if ((rc = mds_ds_step_(c, p, pg, gi, err, errlen)))
			return rc;
		for (int j = 0; j < g[gi].n; j++) {
			const struct ds_param *q = &g[gi].p[j];
			const struct pt_value *id = ids->u.seq.v[j];
			char key[32];
			if (id->kind != PT_INT)
				return fail(err, errlen, "%s: param group %d: a parameter id that is no int",
					    p, gi);
			snprintf(key, sizeof key, "%lld", (long long)id->u.i);
			for (int b = 1; b < 3; b++) {
				const struct pt_value *x = pt_get(f, st, PT_TENSOR, key,
								  b == 1 ? "exp_avg" : "exp_avg_sq", NULL);
				if (!x)
					return fail(err, errlen, "%s: optimizer state: %s", p, pt_error(f));
				if (q->t < 0) {
					if (x->u.t.numel != q->numel)
						return fail(err, errlen, "%s: the %s of %s has %lld elements, "
							    "not %lld", p, mds_buf_name[b], q->name,
							    (long long)x->u.t.numel, (long long)q->numel);
					continue;
				}
				if (x->u.t.dtype != PTD_F32)
					return fail(err, errlen, "%s: the %s of %s is %s, not float32", p,
						    mds_buf_name[b], q->name, pt_dtype_name(x->u.t.dtype));
				if (!mds_shape_ok_(c, q->t, x->u.t.shape, x->u.t.ndim))
					return mds_shape_fail_(c, p, mds_buf_name[b], q->t, x->u.t.shape,
							       x->u.t.ndim, err, errlen);
				if ((rc = mds_ext_add_(c, q->t, b, r, s, fi,
						       mds_storage_index_(f, x->u.t.storage), &x->u.t, 0,
						       x->u.t.numel, err, errlen)))
					return rc;
			}
		}
	}
	return 0;
}

