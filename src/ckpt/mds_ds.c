/* mds_ds - DeepSpeed's pipeline checkpoint (BLOOM, the 13B; tests/ref/mds-format.md section 2)
 * for mds.h: the stages' inventories, the optimizer's fp32 masters and Adam moments cut back
 * into parameters, and the layer files' model weights.
 *
 * Which optimizer saved the state decides where it lies (2.6, 2.8), and mp_rank_00 says which:
 *   param_shapes a list, bf16_zero_* files    BF16_Optimizer: DP partitions of flat groups
 *   param_shapes a list, zero_pp_rank_* files fp16 ZeRO stage 1/2: the same partitions, the
 *                                             fp32 one saved without its padding, a loss scaler
 *   param_shapes None, 'optimizer' holds      ZeRO stage 0: fp16's FP16_Optimizer (one flat
 *                                             fp32 group each, unpartitioned, a loss scaler), or
 *                                             fp32's base optimizer (a state per parameter, the
 *                                             masters being the fp32 layer files themselves)
 * Without param_shapes a stage's inventory is rebuilt (mds_ds0.c): DeepSpeed's module order
 * (2.5) over the layers the stage holds, their count found from the sizes its optimizer state
 * has (every layer being the same size), grouped by Megatron's weight-decay rule.
 * An optimizer state of another kind (ZeRO's elastic or stage 3 files, the unfused fp16
 * optimizer), or none, leaves the weights only: mds.left_out says what was left and why. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>

#include "ckpt/mds_int.h"

/* DeepSpeed's parameter name on stage s (2.5): the lmtk table index, NAME_IGNORED for a copy
 * lmtk does not keep (the last stage's position embeddings and embedding norm), or
 * NAME_UNKNOWN. */
int mds_ds_name_(const struct mds *c, const char *name, int s)
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
	int t = mds_layer_name_(m, (int)spec - 3, end + 1);
	return t >= 0 ? t : NAME_UNKNOWN;
}
/* ---- DeepSpeed's pipeline checkpoint (section 2) ---- */

static const char *const ds_opt_name[] = {
	NULL, "bf16 (BF16_Optimizer's ZeRO partitions)",
	"fp16 ZeRO (DeepSpeedZeroOptimizer's partitions)", "fp16 without ZeRO (FP16_Optimizer)",
	"fp32 without ZeRO (the base optimizer)"};

/* Stage s, TP rank r's groups from mp_rank_MM's param_shapes. */
int mds_ds_inventory_(struct mds *c, int s, int r, struct ds_group **out, int *ngroups,
			int *stage_of, char *err, size_t errlen)
{
	char p[4400];
	int mm = s * c->tp + r, rc;
	snprintf(p, sizeof p, "%s/mp_rank_%02d_model_states.pt", c->dir, mm);
	int fi = mds_file_add_(c, p);
	if (fi < 0)
		return fail_oom(err, errlen, "the list of checkpoint files", 0);
	struct pt_file *f = mds_file_get_(c, fi, err, errlen);
	if (!f)
		return EXIT_USAGE;
	if ((rc = mds_check_layout_(c, f, f->root, err, errlen)))
		return rc;
	const struct pt_value *ps = pt_get(f, NULL, PT_LIST, "param_shapes", NULL);
	if (!ps)
		return fail(err, errlen, "%s", pt_error(f));
	struct ds_group *g = calloc(ps->u.seq.n ? ps->u.seq.n : 1, sizeof *g);
	if (!g)
		return fail_oom(err, errlen, "the param_shapes groups",
				(ps->u.seq.n ? ps->u.seq.n : 1) * sizeof *g);
	*out = g;
	*ngroups = (int)ps->u.seq.n;
	for (size_t gi = 0; gi < ps->u.seq.n; gi++) {
		const struct pt_value *d = ps->u.seq.v[gi];
		if (d->kind != PT_DICT)
			return fail(err, errlen, "%s: param_shapes[%zu] is a %s, not a dict", f->path,
				    gi, pt_kind_name(d->kind));
		g[gi].p = calloc(d->u.dict.n ? d->u.dict.n : 1, sizeof *g[gi].p);
		if (!g[gi].p)
			return fail_oom(err, errlen, "a param_shapes group's tensors",
					(d->u.dict.n ? d->u.dict.n : 1) * sizeof *g[gi].p);
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
			q->t = mds_ds_name_(c, k->u.str.s, s);
			q->numel = numel;
			q->off = g[gi].used;
			g[gi].used += numel;
			if (q->t == NAME_UNKNOWN)
				return fail(err, errlen, "%s: param_shapes names parameter '%s', which is "
					    "no part of lmtk's GPT/BLOOM model of %d layers", f->path,
					    k->u.str.s, c->m.layers);
			if (q->t < 0)
				continue;
			if (!mds_shape_ok_(c, q->t, shape, (int)v->u.seq.n))
				return mds_shape_fail_(c, f->path, k->u.str.s, q->t, shape, (int)v->u.seq.n,
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


void mds_ds_groups_free_(struct ds_group *g, int n)
{
	for (int i = 0; g && i < n; i++)
		free(g[i].p);
	free(g);
}

/* ---- the optimizer state of stage s, TP rank r ---- */

/* Adam's step of a param group: the same in every group and file */
int mds_ds_step_(struct mds *c, const char *path, const struct pt_value *pg, int gi, char *err,
		   size_t errlen)
{
	int64_t step;
	if (v_int(pg, "step", &step) < 0)
		return 0;
	if (c->adam_step < 0)
		c->adam_step = step;
	else if (step != c->adam_step)
		return fail(err, errlen, "%s: param group %d has taken %lld Adam steps, others %lld",
			    path, gi, (long long)step, (long long)c->adam_step);
	return 0;
}

/* one group's buffer b (0 master, 1, 2 moments) in a slice: a 1-D float32 tensor of n elements */
int mds_ds_put_(struct ds_slice *sl, const struct pt_file *f, int fi, int gi, int b,
		  const struct pt_value *x, int64_t n, const char *what, char *err, size_t errlen)
{
	if (x->kind != PT_TENSOR || x->u.t.ndim != 1 || x->u.t.dtype != PTD_F32)
		return fail(err, errlen, "%s: group %d's %s is not a 1-D float32 tensor (%s)", f->path,
			    gi, what, x->kind != PT_TENSOR ? pt_kind_name(x->kind) :
			    pt_dtype_name(x->u.t.dtype));
	if (x->u.t.numel != n)
		return fail(err, errlen, "%s: group %d's %s has %lld elements; the partition holds "
			    "%lld (DP rank 0's size%s)", f->path, gi, what, (long long)x->u.t.numel,
			    (long long)n, b ? ", padding included" : ", less what is padding here");
	sl->t[b] = x->u.t;
	sl->storage[b] = mds_storage_index_(f, x->u.t.storage);
	sl->file = fi;
	return 0;
}

/* DP rank d's optim file for (s, r), a ZeRO kind: each group's three flat partitions, checked.
 * ps[gi]: the partition size, padding included (set by d = 0). */
static int ds_partition(struct mds *c, enum ds_opt opt, int s, int r, int d,
			const struct ds_group *g, int ngroups, struct ds_slice *sl, int64_t *ps,
			double *clip, char *err, size_t errlen)
{
	char p[4400];
	int mm = s * c->tp + r, rc;
	const char *pre = opt == DSO_BF16 ? "bf16_" : "";
	snprintf(p, sizeof p, "%s/%szero_pp_rank_%d_mp_rank_%02d_optim_states.pt", c->dir, pre, d, mm);
	if (!is_file(p))
		return fail(err, errlen, "%s: missing (the checkpoint has DP=%d, and other "
			    "%szero_* optimizer files)", p, c->dp, pre);
	int fi = mds_file_add_(c, p);
	if (fi < 0)
		return fail_oom(err, errlen, "the list of checkpoint files", 0);
	struct pt_file *f = mds_file_get_(c, fi, err, errlen);
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
	maps = pt_dict_get(o, "param_slice_mappings");   /* bf16 >= 0.7.0, fp16 ZeRO >= 0.7.3 */
	if (maps && maps->kind == PT_NONE)
		maps = NULL;
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
		if (pad->u.i < 0 || (d < c->dp - 1 && pad->u.i != 0))
			return fail(err, errlen, "%s: group %d has padding %lld on DP rank %d; only the "
				    "last DP rank's partition is padded", f->path, gi,
				    (long long)pad->u.i, d);
		/* the moments hold the whole partition, padding included; bf16 saves the fp32
		 * partition whole too, fp16 ZeRO without its padding (2.8) */
		int64_t size = ea->u.t.numel;
		if (d == 0)
			ps[gi] = size;
		if (size != ps[gi])
			return fail(err, errlen, "%s: group %d's partition (its exp_avg) has %lld elements; "
				    "DP rank 0's has %lld", f->path, gi, (long long)size, (long long)ps[gi]);
		if (pad->u.i > ps[gi])
			return fail(err, errlen, "%s: group %d's padding %lld is more than its partition "
				    "(%lld)", f->path, gi, (long long)pad->u.i, (long long)ps[gi]);
		if ((rc = mds_ds_put_(&sl[gi], f, fi, gi, 0, m32, ps[gi] - (opt == DSO_ZERO ? pad->u.i : 0),
				 "fp32 partition", err, errlen)) ||
		    (rc = mds_ds_put_(&sl[gi], f, fi, gi, 1, ea, ps[gi], "exp_avg", err, errlen)) ||
		    (rc = mds_ds_put_(&sl[gi], f, fi, gi, 2, eas, ps[gi], "exp_avg_sq", err, errlen)) ||
		    (rc = mds_ds_step_(c, f->path, pg, gi, err, errlen)))
			return rc;
		sl[gi].pad = pad->u.i;
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

/* ---- which optimizer, and the loss scaler ---- */

/* What mp_rank_00 and the file names say saved the optimizer state; DSO_NONE with c->left_out
 * saying why when there is none lmtk reads.  0, or an exit code + err. */
static int ds_which(struct mds *c, const struct pt_file *f0, int nbf16, int nzero,
		    enum ds_opt *opt, char *err, size_t errlen)
{
	const struct pt_value *ps = pt_dict_get(f0->root, "param_shapes"),
			      *o = pt_dict_get(f0->root, "optimizer");
	*opt = DSO_NONE;
	if (ps && ps->kind == PT_LIST) {
		if (nbf16) {
			*opt = DSO_BF16;
			return 0;
		}
		if (!nzero) {
			snprintf(c->left_out, sizeof c->left_out, "no optimizer files (*zero_pp_rank_*"
				 "_optim_states.pt)");
			return 0;
		}
		/* fp16 ZeRO: stage 1 or 2 with the optimizer's own state dict is read; the elastic
		 * form (per-group states without padding or Adam's step) and stage 3 are not */
		char p[4400], why[700];
		snprintf(p, sizeof p, "%s/zero_pp_rank_0_mp_rank_00_optim_states.pt", c->dir);
		struct pt_file *f = pt_open(p, why, sizeof why);
		if (!f)
			return fail(err, errlen, "%s", why);
		const struct pt_value *osd = pt_dict_get(f->root, "optimizer_state_dict"),
				      *b = pt_dict_get(osd, "base_optimizer_state");
		int64_t stage = 1;
		v_int(osd, "zero_stage", &stage);
		if (!pt_dict_get(osd, "single_partition_of_fp32_groups") || stage > 2)
			snprintf(c->left_out, sizeof c->left_out, "ZeRO stage %lld partitions (%.300s), "
				 "which lmtk does not read", (long long)stage, p);
		else if (b && b->kind == PT_LIST)
			snprintf(c->left_out, sizeof c->left_out, "an elastic ZeRO checkpoint (%.300s: "
				 "base_optimizer_state per group, without Adam's step), which lmtk does "
				 "not read", p);
		else
			*opt = DSO_ZERO;
		pt_close(f);
		return 0;
	}
	if (ps && ps->kind != PT_NONE)
		return fail(err, errlen, "%s: param_shapes is a %s, not a list or None", f0->path,
			    pt_kind_name(ps->kind));
	if (nbf16 || nzero)
		return fail(err, errlen, "%s: param_shapes is None (no ZeRO), yet there are ZeRO "
			    "optimizer files: files of two saves mixed?", f0->path);
	/* ZeRO stage 0: the optimizer's state dict itself */
	if (!o || o->kind == PT_NONE)
		snprintf(c->left_out, sizeof c->left_out, "no optimizer state (%.300s's 'optimizer' is "
			 "None)", f0->path);
	else if (o->kind == PT_DICT && pt_dict_get(o, "fp32_groups_flat"))
		*opt = DSO_FP16;
	else if (o->kind == PT_DICT && pt_dict_get(o, "fp32_groups"))
		snprintf(c->left_out, sizeof c->left_out, "the unfused fp16 optimizer's state (%.300s: "
			 "fp32_groups), which lmtk does not read", f0->path);
	else if (o->kind == PT_DICT && pt_dict_get(o, "state") && pt_dict_get(o, "param_groups"))
		*opt = DSO_FP32;
	else
		snprintf(c->left_out, sizeof c->left_out, "an optimizer state of a kind lmtk does not "
			 "know (%.300s's 'optimizer')", f0->path);
	return 0;
}

/* lmtk's loss scaler state (2.8) from DeepSpeed's: the scale; the clean steps counted towards
 * the next doubling, so that lmtk doubles on the step DeepSpeed would; the hysteresis left.
 * DeepSpeedZeroOptimizer's DynamicLossScaler doubles when (cur_iter - last_overflow_iter) is
 * a multiple of the window; FP16_Optimizer one step later, when (cur_iter -
 * last_overflow_iter - 1) is, a positive one, and halves on every overflow. */
static void ds_scaler(const struct pt_value *sc, int fused, int64_t args_hyst, double *scale,
		      int64_t *good, int64_t *hyst)
{
	int64_t it, lo, w, h;
	double v;
	if (v_num(sc, "cur_scale", &v) == 0 && v > 0)
		*scale = v;
	*good = 0;
	*hyst = fused ? 1 : args_hyst;
	if (v_int(sc, "cur_iter", &it) < 0 || v_int(sc, "last_overflow_iter", &lo) < 0 ||
	    v_int(sc, "scale_window", &w) < 0 || w < 1)
		return;   /* a static scale */
	int64_t clean = it - lo - (fused ? 1 : 0);
	if (!fused)
		*good = ((clean - 1) % w + w) % w;
	else
		*good = clean < 1 ? 0 : (clean - 1) % w;
	if (!fused && v_int(sc, "cur_hysteresis", &h) == 0 && h >= 1)
		*hyst = h;
}

/* ---- open ---- */

/* Stage s, TP rank r: the inventory and where the optimizer's buffers of each parameter lie. */
static int ds_rank(struct mds *c, enum ds_opt opt, int s, int r, const int *l0, const int *nl,
		   int ng0, int *stage_of, double *clip, char *err, size_t errlen)
{
	struct ds_group *g = NULL;
	struct ds_slice *sl = NULL;
	int64_t *ps = NULL;
	int ngroups = ng0, rc, nparts = opt == DSO_BF16 || opt == DSO_ZERO ? c->dp : 1;
	char p[4400];
	snprintf(p, sizeof p, "%s/mp_rank_%02d_model_states.pt", c->dir, s * c->tp + r);
	if (opt == DSO_FP16 || opt == DSO_FP32) {
		int fi = mds_file_add_(c, p);
		struct pt_file *f = fi < 0 ? NULL : mds_file_get_(c, fi, err, errlen);
		if (!f)
			return fi < 0 ? fail_oom(err, errlen, "the list of checkpoint files", 0) : EXIT_USAGE;
		if ((rc = mds_check_layout_(c, f, f->root, err, errlen)))
			return rc;
		rc = mds_ds0_groups_(c, p, s, l0[s], nl[s], ngroups, &g, err, errlen);
		for (int gi = 0; !rc && r == 0 && gi < ngroups; gi++)
			for (int j = 0; j < g[gi].n; j++) {
				int t = g[gi].p[j].t;
				if (t >= 0 && !(t == c->m.wte && s == c->pp - 1 && s != 0))
					stage_of[t] = s;
			}
	} else {
		rc = mds_ds_inventory_(c, s, r, &g, &ngroups, stage_of, err, errlen);
	}
	if (!rc && opt != DSO_NONE && opt != DSO_FP32) {
		sl = calloc((size_t)nparts * ngroups, sizeof *sl);
		ps = calloc(ngroups, sizeof *ps);
		if (!sl || !ps)
			rc = fail_oom(err, errlen, "the optimizer partitions' slices",
				      (size_t)nparts * ngroups * sizeof *sl + ngroups * sizeof *ps);
	}
	if (!rc && opt == DSO_FP32)
		rc = mds_ds0_state32_(c, s, r, g, ngroups, err, errlen);
	if (!rc && opt == DSO_FP16)
		rc = mds_ds0_flat16_(c, s, r, g, ngroups, sl, ps, clip, err, errlen);
	for (int d = 0; !rc && sl && opt != DSO_FP16 && d < nparts; d++) {
		double cg = -1;
		rc = ds_partition(c, opt, s, r, d, g, ngroups, sl + (size_t)d * ngroups, ps, &cg, err,
				  errlen);
		if (!rc && cg >= 0)
			*clip = cg;
	}
	for (int gi = 0; !rc && sl && gi < ngroups; gi++) {
		int64_t total = ps[gi] * nparts, pad = sl[(size_t)(nparts - 1) * ngroups + gi].pad;
		if (g[gi].used + pad != total)
			rc = fail(err, errlen, "%s/%s_mp_rank_%02d: group %d holds %d x %lld elements with "
				  "padding %lld; its parameters are %lld", c->dir, opt == DSO_FP16 ?
				  "optimizer.fp32_groups_flat" : opt == DSO_BF16 ? "bf16_zero_pp_rank_*" :
				  "zero_pp_rank_*", s * c->tp + r, gi, nparts, (long long)ps[gi],
				  (long long)pad, (long long)g[gi].used);
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
					rc = mds_ext_add_(c, q->t, b, r, s, z->file, z->storage[b], &z->t[b],
							  x - (int64_t)d * ps[gi], e - x, err, errlen);
					x = e;
				}
		}
	}
	mds_ds_groups_free_(g, ngroups);
	free(sl);
	free(ps);
	return rc;
}

/* The layer files: each one's model weights on the stage that holds them (2.3); with fp32 and
 * no ZeRO they are the masters too. */
static int ds_layer_files(struct mds *c, enum ds_opt opt, const int *stage_of, char *err,
			  size_t errlen)
{
	char p[4400];
	int rc = 0;
	DIR *dh = opendir(c->dir);
	struct dirent *e;
	if (!dh)
		return fail(err, errlen, "%s: %s", c->dir, strerror(errno)), EXIT_FAILED;
	while (!rc && (e = readdir(dh))) {
		int spec, r;
		if (!name_is(e->d_name, "layer_%d-model_%d-model_states.pt%n", &spec, &r))
			continue;
		snprintf(p, sizeof p, "%s/%s", c->dir, e->d_name);
		if (r >= c->tp) {
			rc = fail(err, errlen, "%s: TP rank %d; the checkpoint has TP=%d", p, r, c->tp);
			break;
		}
		int fi = mds_file_add_(c, p);
		struct pt_file *f = fi < 0 ? NULL : mds_file_get_(c, fi, err, errlen);
		if (!f) {
			rc = fi < 0 ? fail_oom(err, errlen, "the list of checkpoint files", 0) : EXIT_USAGE;
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
			int t = mds_ds_name_(c, pname, 0);
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
			if (opt == DSO_FP32 && x->dtype != PTD_F32) {
				rc = fail(err, errlen, "%s: %s is %s; the optimizer state is fp32's without "
					  "ZeRO, whose masters are the model's float32 weights", p,
					  k->u.str.s, pt_dtype_name(x->dtype));
				break;
			}
			if (!mds_shape_ok_(c, t, x->shape, x->ndim)) {
				rc = mds_shape_fail_(c, p, k->u.str.s, t, x->shape, x->ndim, err, errlen);
				break;
			}
			c->weights_dtype = pt_dtype_name(x->dtype);
			int st = mds_storage_index_(f, x->storage);
			rc = mds_ext_add_(c, t, MDS_BF16, r, stage_of[t], fi, st, x, 0, x->numel, err,
					  errlen);
			if (!rc && opt == DSO_FP32)
				rc = mds_ext_add_(c, t, MDS_MASTER, r, stage_of[t], fi, st, x, 0, x->numel,
						  err, errlen);
			/* the last stage's copy of the tied word embeddings is never a layer file:
			 * DeepSpeed keeps it equal to the first stage's, whose it is here */
			if (!rc && opt == DSO_FP32 && t == c->m.wte && c->pp > 1)
				rc = mds_ext_add_(c, t, MDS_MASTER, r, c->pp - 1, fi, st, x, 0, x->numel,
						  err, errlen);
		}
	}
	closedir(dh);
	return rc;
}

int mds_open_ds_(struct mds *c, char *err, size_t errlen)
{
	char p[4400];
	int rc, nmm = 0, nbf16 = 0, nzero = 0;
	DIR *dh = opendir(c->dir);
	struct dirent *e;
	if (!dh)
		return fail(err, errlen, "%s: %s", c->dir, strerror(errno)), EXIT_FAILED;
	/* every .pt file is one of the four kinds; anything else is refused by name */
	while ((e = readdir(dh))) {
		int a, b;
		const char *n = e->d_name;
		size_t l = strlen(n);
		if (name_is(n, "mp_rank_%d_model_states.pt%n", &a, NULL))
			nmm++;
		else if (name_is(n, "bf16_zero_pp_rank_%d_mp_rank_%d_optim_states.pt%n", &a, &b))
			nbf16++;
		else if (name_is(n, "zero_pp_rank_%d_mp_rank_%d_optim_states.pt%n", &a, &b))
			nzero++;
		else if (name_is(n, "layer_%d-model_%d-model_states.pt%n", &a, &b))
			;
		else if (l > 3 && strcmp(n + l - 3, ".pt") == 0) {
			closedir(dh);
			return fail(err, errlen, "%s/%s: a .pt file that is not one of DeepSpeed's "
				    "(layer_XX-model_TT-model_states.pt, mp_rank_MM_model_states.pt, "
				    "[bf16_]zero_pp_rank_D_mp_rank_MM_optim_states.pt)", c->dir, n);
		}
	}
	closedir(dh);
	if (nbf16 && nzero)
		return fail(err, errlen, "%s: both bf16_zero_* and zero_* optimizer files: files of "
			    "two saves mixed?", c->dir);

	snprintf(p, sizeof p, "%s/mp_rank_00_model_states.pt", c->dir);
	int f0i = mds_file_add_(c, p);
	struct pt_file *f0 = f0i < 0 ? NULL : mds_file_get_(c, f0i, err, errlen);
	if (!f0)
		return f0i < 0 ? fail_oom(err, errlen, "the list of checkpoint files", 0) : EXIT_USAGE;
	const struct pt_value *root = f0->root, *args = pt_dict_get(root, "args");
	int64_t tp, pp, dp, mpw, skipped = 0, hyst_arg = 2;
	if (root->kind != PT_DICT || !args)
		return fail(err, errlen, "%s: not DeepSpeed's model states (no args)", f0->path);
	if ((rc = mds_arg_int_(f0, args, "tensor_model_parallel_size", &tp, err, errlen)) ||
	    (rc = mds_arg_int_(f0, args, "pipeline_model_parallel_size", &pp, err, errlen)))
		return rc;
	if (v_int(root, "dp_world_size", &dp) < 0 || dp < 1 || dp > 1 << 20)
		return fail(err, errlen, "%s: no dp_world_size", f0->path);
	if (v_int(root, "mp_world_size", &mpw) == 0 && mpw != tp * pp)
		return fail(err, errlen, "%s: mp_world_size %lld is not TP=%lld x PP=%lld", f0->path,
			    (long long)mpw, (long long)tp, (long long)pp);
	if (tp > 1024 || pp > 64)
		return fail(err, errlen, "%s: TP=%lld PP=%lld: lmtk reads TP <= 1024, PP <= 64",
			    f0->path, (long long)tp, (long long)pp);
	v_int(args, "hysteresis", &hyst_arg);
	c->tp = (int)tp;
	c->pp = (int)pp;
	c->dp = (int)dp;
	enum ds_opt opt;
	if ((rc = ds_which(c, f0, nbf16, nzero, &opt, err, errlen)))
		return rc;
	c->has_optimizer = opt != DSO_NONE;
	c->optim = ds_opt_name[opt];
	const char *pre = opt == DSO_BF16 ? "bf16_" : "";
	int nopt = opt == DSO_BF16 ? nbf16 : opt == DSO_ZERO ? nzero : 0;
	/* the files the layout names: the first one missing is named */
	for (int mm = 0; mm < c->tp * c->pp; mm++) {
		snprintf(p, sizeof p, "%s/mp_rank_%02d_model_states.pt", c->dir, mm);
		if (!is_file(p))
			return fail(err, errlen, "%s: missing (args say TP=%d PP=%d)", p, c->tp, c->pp);
		for (int d = 0; nopt && d < c->dp; d++) {
			snprintf(p, sizeof p, "%s/%szero_pp_rank_%d_mp_rank_%02d_optim_states.pt",
				 c->dir, pre, d, mm);
			if (!is_file(p))
				return fail(err, errlen, "%s: missing (TP=%d PP=%d DP=%d, and the other "
					    "optimizer partitions are there)", p, c->tp, c->pp, c->dp);
		}
	}
	if (nmm != c->tp * c->pp)
		return fail(err, errlen, "%s: %d mp_rank_*_model_states.pt files; TP=%d x PP=%d "
			    "needs %d", c->dir, nmm, c->tp, c->pp, c->tp * c->pp);
	if (nopt && nopt != c->tp * c->pp * c->dp)
		return fail(err, errlen, "%s: %d %szero_*_optim_states.pt files; TP=%d x PP=%d x "
			    "DP=%d needs %d", c->dir, nopt, pre, c->tp, c->pp, c->dp,
			    c->tp * c->pp * c->dp);
	/* the groups' count, for an inventory rebuilt (ZeRO stage 0) */
	int ng = 0;
	if (opt == DSO_FP16 || opt == DSO_FP32) {
		const struct pt_value *pgs = pt_get(f0, NULL, PT_LIST, "optimizer",
			opt == DSO_FP16 ? "fp32_groups_flat" : "param_groups", NULL);
		if (!pgs)
			return fail(err, errlen, "%s", pt_error(f0));
		ng = (int)pgs->u.seq.n;
		if (ng != 2 && ng != 3)
			return fail(err, errlen, "%s: optimizer: %d param groups: Megatron makes 2 (decay, "
				    "no decay) or, BigScience's, 3 (decay halves, no decay)", f0->path, ng);
	}
	json_t *model = NULL;
	if ((rc = mds_read_model_(c, f0, root, &model, err, errlen)) ||
	    (rc = mds_read_counters_(c, f0, root, err, errlen)))
		goto out;
	v_int(root, "skipped_steps", &skipped);
	if (c->m.layers < c->pp) {
		rc = fail(err, errlen, "%s: PP=%d stages for %d layers", f0->path, c->pp, c->m.layers);
		goto out;
	}
	if ((rc = mds_alloc_parts_(c, err, errlen)))
		goto out;
	/* the manifest needs root's values: built before another file is opened */
	double clip = -1, aclip = 1.0;
	v_num(args, "clip_grad", &aclip);
	c->adam_step = -1;
	int *stage_of = malloc((c->m.n + 2 * c->pp) * sizeof *stage_of), *l0 = stage_of + c->m.n,
	    *nl = l0 + c->pp;
	if (!stage_of) {
		rc = fail_oom(err, errlen, "the stage of each tensor", c->m.n * sizeof *stage_of);
		goto out;
	}
	for (int t = 0; t < c->m.n; t++)
		stage_of[t] = -1;
	const struct pt_value *ps = pt_dict_get(root, "param_shapes");
	if (opt == DSO_FP16 || opt == DSO_FP32) {
		if ((rc = mds_ds0_stage_layers_(c, opt == DSO_FP16, l0, nl, err, errlen)))
			goto done;
	} else if (!ps || ps->kind != PT_LIST) {
		/* neither param_shapes nor an optimizer state says where the layers are: they are
		 * where DeepSpeed's 'type:transformer' cut puts them (only the tied embedding's
		 * place matters for the weights, and it is on the first and last stage) */
		for (int t = 0; t < c->m.n; t++) {
			const struct lt_tensor *T = &c->m.t[t];
			stage_of[t] = T->place == LT_LAYER ? lt_stage_of_layer(T->layer, c->m.layers, c->pp, 0)
				      : T->place == LT_LAST ? c->pp - 1 : 0;
		}
	}
	/* per stage and rank: the inventory, and where the optimizer's buffers lie */
	for (int s = 0; s < c->pp && !rc; s++)
		for (int r = 0; r < c->tp && !rc && (c->has_optimizer || (ps && ps->kind == PT_LIST)); r++)
			rc = ds_rank(c, opt, s, r, l0, nl, ng, stage_of, &clip, err, errlen);
	if (!rc)
		rc = ds_layer_files(c, opt, stage_of, err, errlen);
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
	if (c->adam_step < 0)
		c->adam_step = 0;
	if (!c->weights_dtype)
		c->weights_dtype = "bfloat16";
	c->has_weights = 1;
	/* the loss scaler (fp16) and Adam's hyper-parameters: from mp_rank_00 (stage 0) or the
	 * first optimizer file */
	double scale = 1.0;
	int64_t good = 0, hyst = hyst_arg;
	const struct pt_value *pg = NULL;
	struct pt_file *fo = NULL;
	if (opt == DSO_BF16 || opt == DSO_ZERO) {
		snprintf(p, sizeof p, "%s/%szero_pp_rank_0_mp_rank_00_optim_states.pt", c->dir, pre);
		for (int i = 0; i < c->nfiles && !fo; i++)
			if (strcmp(c->files[i].path, p) == 0 &&
			    !(fo = mds_file_get_(c, i, err, errlen))) {
				rc = EXIT_USAGE;
				goto done;
			}
		const struct pt_value *osd = fo ? pt_dict_get(fo->root, "optimizer_state_dict") : NULL;
		pg = osd ? pt_get(fo, osd, PT_DICT, "base_optimizer_state", "param_groups", "0", NULL) : NULL;
		const struct pt_value *sc = pt_dict_get(osd, "loss_scaler");
		if (opt == DSO_ZERO && sc && sc->kind == PT_DICT)
			ds_scaler(sc, 0, hyst_arg, &scale, &good, &hyst);
	}
	if (!(f0 = mds_file_get_(c, f0i, err, errlen))) {
		rc = EXIT_USAGE;
		goto done;
	}
	if (opt == DSO_FP16) {
		const struct pt_value *o = pt_dict_get(f0->root, "optimizer");
		ds_scaler(o, 1, hyst_arg, &scale, &good, &hyst);
		pg = pt_get(f0, o, PT_DICT, "optimizer_state_dict", "param_groups", "0", NULL);
	} else if (opt == DSO_FP32) {
		pg = pt_get(f0, NULL, PT_DICT, "optimizer", "param_groups", "0", NULL);
	}
	/* pg's file is f0 or fo: both open (MDS_OPEN > 2) while the manifest is built */
	rc = mds_build_manifest_(c, f0, f0->root, model, pg, clip >= 0 ? clip : aclip, scale, good,
				 hyst, skipped, err, errlen);
done:
	free(stage_of);
out:
	json_decref(model);
	return rc;
}
