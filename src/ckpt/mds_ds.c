/* mds_ds - DeepSpeed's pipeline checkpoint (BLOOM; tests/ref/mds-format.md section 2) for mds.h:
 * the stages' inventories (param_shapes), each DP rank's ZeRO partitions of the bf16 optimizer's
 * flat groups cut back into parameters, and the layer files' bf16 weights. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>

#include "ckpt/mds_int.h"

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
	int t = mds_layer_name_(m, (int)spec - 3, end + 1);
	return t >= 0 ? t : NAME_UNKNOWN;
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
			sl[gi].storage[b] = mds_storage_index_(f, x[b]->storage);
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

int mds_open_ds_(struct mds *c, char *err, size_t errlen)
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
	int f0i = mds_file_add_(c, p);
	struct pt_file *f0 = f0i < 0 ? NULL : mds_file_get_(c, f0i, err, errlen);
	if (!f0)
		return f0i < 0 ? fail_oom(err, errlen, "the list of checkpoint files", 0) : EXIT_USAGE;
	const struct pt_value *root = f0->root, *args = pt_dict_get(root, "args");
	int64_t tp, pp, dp, mpw, skipped = 0;
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
	int *stage_of = malloc(c->m.n * sizeof *stage_of);
	struct ds_group *g = NULL;
	int ngroups = 0;
	if (!stage_of) {
		rc = fail_oom(err, errlen, "the stage of each tensor", c->m.n * sizeof *stage_of);
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
				rc = fail_oom(err, errlen, "the ZeRO partitions' slices",
					      (size_t)c->dp * ngroups * sizeof *sl + ngroups * sizeof *ps);
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
							rc = mds_ext_add_(c, q->t, b, r, s, z->file, z->storage[b],
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
			if (!mds_shape_ok_(c, t, x->shape, x->ndim)) {
				rc = mds_shape_fail_(c, p, k->u.str.s, t, x->shape, x->ndim, err, errlen);
				break;
			}
			c->weights_dtype = pt_dtype_name(x->dtype);
			rc = mds_ext_add_(c, t, MDS_BF16, r, stage_of[t], fi, mds_storage_index_(f, x->storage), x,
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
	if (!(f0 = mds_file_get_(c, f0i, err, errlen))) {
		rc = EXIT_USAGE;
		goto done;
	}
	rc = mds_build_manifest_(c, f0, f0->root, model, NULL, clip >= 0 ? clip : aclip, 1.0, 0,
			    2, skipped, err, errlen);
	if (!rc && c->has_optimizer) {
		/* Adam's hyper-parameters from the first optimizer file's first group */
		snprintf(p, sizeof p, "%s/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt", c->dir);
		for (int i = 0; i < c->nfiles; i++)
			if (strcmp(c->files[i].path, p) == 0) {
				struct pt_file *f = mds_file_get_(c, i, err, errlen);
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
