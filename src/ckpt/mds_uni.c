/* mds_uni - DeepSpeed's universal checkpoint (tests/ref/mds-format.md section 2.9) for mds.h:
 * what Megatron-DeepSpeed's tools/convert_checkpoint/ds_to_universal.py makes of a bf16 ZeRO
 * checkpoint.  SAVE/latest_universal names the step directory (STEP_universal), which holds
 * the source's mp_rank_MM_model_states.pt (copied: args, counters, schedule, and param_shapes,
 * the stages' inventories at the source's TP) and, per DeepSpeed parameter name,
 * zero/NAME/fp32.pt, exp_avg.pt and exp_avg_sq.pt: torch.save of {'param': the whole tensor
 * over TP ranks, 'cat_dim': the dim its TP slices were joined on}, replicated tensors averaged
 * over the ranks and saved whole without a cat_dim, the word embeddings with their vocabulary
 * padding.  There are no layer files (no model weights: the masters are the weights) and no
 * Adam step.
 *
 * Each stage and TP rank's inventory comes from its mp_rank file as for a ZeRO checkpoint; a
 * parameter's part on rank r is a view of the whole tensor - the r-th of TP equal blocks along
 * cat_dim, or the whole when it has the TP-local shape - so nothing is copied or re-cut.  The
 * last stage's copy of the word embeddings, which ds_to_universal.py does not save, reads the
 * first stage's; position embeddings, which it skips, are missing: such a checkpoint (GPT-2's
 * learned positions) is refused naming the file.  Names in param_shapes become paths: one that
 * could leave zero/ is refused. */
#include <stdlib.h>

#include "ckpt/mds_int.h"

/* a parameter name used as a directory under zero/: letters, digits, '_', '-' and inner dots */
static int safe_name(const char *n)
{
	if (!*n || *n == '.')
		return 0;
	for (const char *p = n; *p; p++)
		if (!(*p == '_' || *p == '-' || *p == '.' || (*p >= '0' && *p <= '9') ||
		      (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) ||
		    (*p == '.' && p[1] == '.'))
			return 0;
	return 1;
}

static const char *const uni_file[3] = {"fp32", "exp_avg", "exp_avg_sq"};

/* rank r's part of parameter q (lmtk's t) on stage s: buffer b from zero/NAME/FILE.pt */
static int uni_part(struct mds *c, const struct ds_param *q, int b, int r, int s, char *err,
		    size_t errlen)
{
	char p[4400];
	snprintf(p, sizeof p, "%s/zero/%s/%s.pt", c->dir, q->name, uni_file[b]);
	if (!is_file(p))
		return fail(err, errlen, "%s: missing%s", p, q->t == c->m.wpe ? " (ds_to_universal.py leaves position embeddings out: "
			    "convert the checkpoint it was made from)" : "");
	int fi = mds_file_add_(c, p);
	struct pt_file *f = fi < 0 ? NULL : mds_file_get_(c, fi, err, errlen);
	if (!f)
		return fi < 0 ? fail_oom(err, errlen, "the list of checkpoint files", 0) : EXIT_USAGE;
	const struct pt_value *x = pt_get(f, NULL, PT_TENSOR, "param", NULL);
	if (!x)
		return fail(err, errlen, "%s", pt_error(f));
	int64_t cd = 0, lsh[2];
	const struct pt_value *cdv = pt_dict_get(f->root, "cat_dim");
	if (cdv && cdv->kind != PT_NONE && (cdv->kind != PT_INT || cdv->u.i < 0 || cdv->u.i > 1))
		return fail(err, errlen, "%s: cat_dim is not 0 or 1", p);
	if (cdv && cdv->kind == PT_INT)
		cd = cdv->u.i;
	const struct pt_tensor *w = &x->u.t;
	const struct lt_tensor *T = &c->m.t[q->t];
	lt_local_shape(T, c->tp, lsh);
	if (w->dtype != PTD_F32)
		return fail(err, errlen, "%s: param is %s, not float32", p, pt_dtype_name(w->dtype));
	struct pt_tensor v = *w;
	if (!mds_shape_ok_(c, q->t, w->shape, w->ndim)) {
		/* the TP ranks' slices joined along cat_dim: rank r's is the r-th block */
		int ok = w->ndim == T->ndim && cd < w->ndim;
		for (int d = 0; ok && d < w->ndim; d++)
			ok = w->shape[d] == lsh[d] * (d == cd ? c->tp : 1);
		if (!ok) {
			int64_t full[2] = {lsh[0] * (cd == 0 ? c->tp : 1), lsh[1] * (cd == 1 ? c->tp : 1)};
			char what[160];
			snprintf(what, sizeof what, "param (TP=%d slices of [%lld%s%.0lld] joined on dim "
				 "%lld: [%lld%s%.0lld])", c->tp, (long long)lsh[0], T->ndim == 2 ? ", " : "",
				 (long long)(T->ndim == 2 ? lsh[1] : 0), (long long)cd, (long long)full[0],
				 T->ndim == 2 ? ", " : "", (long long)(T->ndim == 2 ? full[1] : 0));
			return mds_shape_fail_(c, p, what, q->t, w->shape, w->ndim, err, errlen);
		}
		v.shape[cd] = lsh[cd];
		v.offset += r * lsh[cd] * w->stride[cd];
		v.numel = (int64_t)lt_numel(lsh);
	}
	return mds_ext_add_(c, q->t, b, r, s, fi, mds_storage_index_(f, w->storage), &v, 0, v.numel,
			    err, errlen);
}

int mds_open_uni_(struct mds *c, char *err, size_t errlen)
{
	char p[4400];
	int rc;
	snprintf(p, sizeof p, "%s/mp_rank_00_model_states.pt", c->dir);
	int f0i = mds_file_add_(c, p);
	struct pt_file *f0 = f0i < 0 ? NULL : mds_file_get_(c, f0i, err, errlen);
	if (!f0)
		return f0i < 0 ? fail_oom(err, errlen, "the list of checkpoint files", 0) : EXIT_USAGE;
	const struct pt_value *root = f0->root, *args = pt_dict_get(root, "args");
	int64_t tp, pp, dp = 1, skipped = 0;
	if (root->kind != PT_DICT || !args)
		return fail(err, errlen, "%s: not DeepSpeed's model states (no args)", f0->path);
	if ((rc = mds_arg_int_(f0, args, "tensor_model_parallel_size", &tp, err, errlen)) ||
	    (rc = mds_arg_int_(f0, args, "pipeline_model_parallel_size", &pp, err, errlen)))
		return rc;
	if (tp < 1 || pp < 1 || tp > 1024 || pp > 64)
		return fail(err, errlen, "%s: TP=%lld PP=%lld: lmtk reads TP <= 1024, PP <= 64",
			    f0->path, (long long)tp, (long long)pp);
	v_int(root, "dp_world_size", &dp);
	c->tp = (int)tp;
	c->pp = (int)pp;
	c->dp = dp >= 1 && dp <= 1 << 20 ? (int)dp : 1;
	for (int mm = 0; mm < c->tp * c->pp; mm++) {
		snprintf(p, sizeof p, "%s/mp_rank_%02d_model_states.pt", c->dir, mm);
		if (!is_file(p))
			return fail(err, errlen, "%s: missing (args say TP=%d PP=%d)", p, c->tp, c->pp);
	}
	json_t *model = NULL;
	int *stage_of = NULL;
	if ((rc = mds_read_model_(c, f0, root, &model, err, errlen)) ||
	    (rc = mds_read_counters_(c, f0, root, err, errlen)) ||
	    (rc = mds_alloc_parts_(c, err, errlen)))
		goto out;
	v_int(root, "skipped_steps", &skipped);
	if (!(stage_of = malloc(c->m.n * sizeof *stage_of))) {
		rc = fail_oom(err, errlen, "the stage of each tensor", c->m.n * sizeof *stage_of);
		goto out;
	}
	for (int t = 0; t < c->m.n; t++)
		stage_of[t] = -1;
	for (int s = 0; s < c->pp && !rc; s++)
		for (int r = 0; r < c->tp && !rc; r++) {
			struct ds_group *g = NULL;
			int ng = 0;
			rc = mds_ds_inventory_(c, s, r, &g, &ng, stage_of, err, errlen);
			for (int gi = 0; !rc && gi < ng; gi++)
				for (int j = 0; !rc && j < g[gi].n; j++) {
					const struct ds_param *q = &g[gi].p[j];
					if (q->t < 0)
						continue;
					if (!safe_name(q->name)) {
						rc = fail(err, errlen, "%s/mp_rank_%02d_model_states.pt: "
							  "param_shapes names '%s', which is no directory "
							  "name under zero/", c->dir, s * c->tp + r, q->name);
						break;
					}
					for (int b = 0; b < 3 && !rc; b++)
						rc = uni_part(c, q, b, r, s, err, errlen);
				}
			mds_ds_groups_free_(g, ng);
		}
	for (int t = 0; t < c->m.n && !rc; t++)
		for (int r = 0; r < c->tp && !rc; r++) {
			int held = 0;
			for (int s = 0; s < c->pp; s++)
				held |= mds_has(c, t, MDS_MASTER, r, s);
			if (!held)
				rc = fail(err, errlen, "%s: no mp_rank_*_model_states.pt's param_shapes lists "
					  "lmtk's %s for TP rank %d", c->dir, c->m.t[t].name, r);
		}
	if (rc)
		goto out;
	c->has_optimizer = 1;
	c->has_weights = 0;
	c->weights_dtype = "float32";
	c->optim = "universal (zero/*/fp32.pt, exp_avg.pt, exp_avg_sq.pt)";
	/* no Adam step is saved: the bf16 optimizer it came from had taken one per update and
	 * one at start-up (2.6) */
	c->adam_step = c->iteration - skipped + 1;
	if (!(f0 = mds_file_get_(c, f0i, err, errlen))) {
		rc = EXIT_USAGE;
		goto out;
	}
	double clip = 1.0;
	v_num(pt_dict_get(f0->root, "args"), "clip_grad", &clip);
	rc = mds_build_manifest_(c, f0, f0->root, model, NULL, clip, 1.0, 0, 2, skipped, err, errlen);
out:
	free(stage_of);
	json_decref(model);
	return rc;
}
