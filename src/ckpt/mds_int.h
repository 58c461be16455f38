/* mds_int - what mds.c, mds_ds.c and mds_meg.c share (see mds.h; internal to src/ckpt, as
 * pickle.h is).  mds.c holds the files, the extents and reads, the model and manifest from the
 * saved args, and the view; mds_ds.c DeepSpeed's pipeline layout (mds-format.md section 2),
 * mds_meg.c plain Megatron's (section 3): each fills the parts' extents of a struct mds. */
#ifndef CKPT_MDS_INT_H
#define CKPT_MDS_INT_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "msg.h"
#include "ckpt/mds.h"
#include "ckpt/pt.h"
#include "xalloc.h"

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

enum { NAME_UNKNOWN = -1, NAME_IGNORED = -2 };   /* ds_name(), meg_name() */

/* ---- small helpers ---- */

static inline int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* An allocation that failed: "out of memory for WHAT: BYTES" (xalloc.h) and EXIT_FAILED, could not
 * do the job, as every program's out of memory (not fail()'s EXIT_USAGE: the input is not at fault) */
static inline int fail_oom(char *err, size_t errlen, const char *what, size_t bytes)
{
	xalloc_err(err, errlen, what, bytes);
	return EXIT_FAILED;
}

static inline int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return EXIT_USAGE;
}

/* d[key] as an int (bools count); 0, or -1 */
static inline int v_int(const struct pt_value *d, const char *key, int64_t *out)
{
	const struct pt_value *v = pt_dict_get(d, key);
	if (!v || (v->kind != PT_INT && v->kind != PT_BOOL))
		return -1;
	*out = v->kind == PT_INT ? v->u.i : v->u.b;
	return 0;
}

static inline int v_num(const struct pt_value *d, const char *key, double *out)
{
	const struct pt_value *v = pt_dict_get(d, key);
	if (!v || (v->kind != PT_INT && v->kind != PT_FLOAT))
		return -1;
	*out = v->kind == PT_INT ? (double)v->u.i : v->u.f;
	return 0;
}

static inline int v_true(const struct pt_value *d, const char *key)
{
	const struct pt_value *v = pt_dict_get(d, key);
	return v && ((v->kind == PT_BOOL && v->u.b) || (v->kind == PT_INT && v->u.i));
}

static inline int v_none(const struct pt_value *d, const char *key)
{
	const struct pt_value *v = pt_dict_get(d, key);
	return !v || v->kind == PT_NONE;
}

static inline const char *v_str(const struct pt_value *d, const char *key)
{
	const struct pt_value *v = pt_dict_get(d, key);
	return v && v->kind == PT_STR ? v->u.str.s : NULL;
}

static inline double f32(double x)
{
	return (double)(float)x;
}

static inline int is_file(const char *p)
{
	struct stat sb;
	return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* A file name of the form fmt ("mp_rank_%d_model_states.pt" ...), all of it: the ints. */
static inline int name_is(const char *name, const char *fmt, int *a, int *b)
{
	int end = -1;
	int k = b ? sscanf(name, fmt, a, b, &end) : sscanf(name, fmt, a, &end);
	return k == (b ? 2 : 1) && end > 0 && name[end] == 0 && *a >= 0 && (!b || *b >= 0);
}

/* ---- mds.c ---- */

/* file i of c->files: added (its size counted), or opened (its pickle read; the least recently
 * used file closed beyond MDS_OPEN: a file's values stay valid until another file is got) */
int mds_file_add_(struct mds *c, const char *path);
struct pt_file *mds_file_get_(struct mds *c, int i, char *err, size_t errlen);
int mds_storage_index_(const struct pt_file *pf, const struct pt_storage *s);
/* appends elements [a, a + n) of tensor x of file `file` (its storage: storages[st]) to part
 * (t, b, r, s), whose extents are added one after another */
int mds_ext_add_(struct mds *c, int t, int b, int r, int s, int file, int st,
		 const struct pt_tensor *x, int64_t a, int64_t n, char *err, size_t errlen);
int mds_alloc_parts_(struct mds *c, char *err, size_t errlen);
int mds_arg_int_(const struct pt_file *f, const struct pt_value *args, const char *key,
		 int64_t *out, char *err, size_t errlen);
/* does a tensor of this shape hold lmtk tensor t's TP-local part?  If not, the message */
int mds_shape_ok_(const struct mds *c, int t, const int64_t *shape, int ndim);
int mds_shape_fail_(const struct mds *c, const char *path, const char *what, int t,
		    const int64_t *shape, int ndim, char *err, size_t errlen);
/* a transformer layer's key ("self_attention.dense.weight") as lmtk's table index, or -1 */
int mds_layer_name_(const struct lt_model *m, int l, const char *key);
/* from the first file read: the model (c->m; *model its manifest object), the counters; every
 * other file must agree on the layout and the iteration */
int mds_read_model_(struct mds *c, const struct pt_file *f, const struct pt_value *root,
		    json_t **model, char *err, size_t errlen);
int mds_read_counters_(struct mds *c, const struct pt_file *f, const struct pt_value *root,
		       char *err, size_t errlen);
int mds_check_layout_(const struct mds *c, const struct pt_file *f, const struct pt_value *root,
		      char *err, size_t errlen);
/* c->manifest, from the first file's root (pgroup: Adam's first param group, or NULL) */
int mds_build_manifest_(struct mds *c, const struct pt_file *f, const struct pt_value *root,
			json_t *model, const struct pt_value *pgroup, double clip,
			double loss_scale, int64_t good, int64_t hyst, int64_t skipped,
			char *err, size_t errlen);

/* Megatron's weight-decay rule (2.5): layer norms and biases are not decayed (lmtk's names) */
int mds_no_decay_(const char *lmtk_name);

/* ---- DeepSpeed's parameters and groups (mds_ds.c; mds_uni.c reads them too) ---- */

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

/* what one DP rank's optim file (or FP16_Optimizer's state) holds of one group */
struct ds_slice {
	struct pt_tensor t[3];   /* master, exp_avg, exp_avg_sq */
	int storage[3];          /* their storages' indices in the file */
	int file;
	int64_t pad;
};

/* the optimizers DeepSpeed saves a pipeline run's state with (mds_ds.c's header comment) */
enum ds_opt { DSO_NONE, DSO_BF16, DSO_ZERO, DSO_FP16, DSO_FP32 };
/* Adam's step of a param group (pg): the same in every group and file (c->adam_step) */
int mds_ds_step_(struct mds *c, const char *path, const struct pt_value *pg, int gi, char *err,
		 size_t errlen);
/* one group's buffer b (0 master, 1, 2 moments) into a slice: x must be a 1-D float32 tensor
 * of n elements */
int mds_ds_put_(struct ds_slice *sl, const struct pt_file *f, int fi, int gi, int b,
		const struct pt_value *x, int64_t n, const char *what, char *err, size_t errlen);

/* ZeRO stage 0 (mds_ds0.c): each stage's layers [l0[s], l0[s] + nl[s]) from the size of its
 * optimizer state (fp16: FP16_Optimizer's, else fp32's base optimizer's); stage s's groups
 * rebuilt (ng of them); where FP16_Optimizer's flat groups (slices of one partition, ps[g] their
 * sizes) or fp32's moments (extents added) lie */
int mds_ds0_stage_layers_(struct mds *c, int fp16, int *l0, int *nl, char *err, size_t errlen);
int mds_ds0_groups_(const struct mds *c, const char *path, int s, int l0, int nl, int ng,
		    struct ds_group **out, char *err, size_t errlen);
int mds_ds0_flat16_(struct mds *c, int s, int r, const struct ds_group *g, int ngroups,
		    struct ds_slice *sl, int64_t *ps, double *clip, char *err, size_t errlen);
int mds_ds0_state32_(struct mds *c, int s, int r, const struct ds_group *g, int ngroups,
		     char *err, size_t errlen);

/* DeepSpeed's parameter name on stage s as an lmtk table index, NAME_IGNORED or NAME_UNKNOWN */
int mds_ds_name_(const struct mds *c, const char *name, int s);
/* stage s, TP rank r's groups from mp_rank_MM's param_shapes (stage_of[t]: the stage each
 * parameter is on, filled on rank 0) */
int mds_ds_inventory_(struct mds *c, int s, int r, struct ds_group **out, int *ngroups,
		      int *stage_of, char *err, size_t errlen);
void mds_ds_groups_free_(struct ds_group *g, int n);

/* ---- the layouts: c->dir, c->kind set; fill everything else but the view ---- */
int mds_open_ds_(struct mds *c, char *err, size_t errlen);
int mds_open_meg_(struct mds *c, char *err, size_t errlen);
int mds_open_uni_(struct mds *c, char *err, size_t errlen);

#endif
