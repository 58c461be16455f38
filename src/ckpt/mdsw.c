/* mdsw - see mdsw.h.  Section numbers (2.4, 2.6 ...) are tests/ref/mds-format.md's. */
#include "ckpt/mdsw.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "file.h"
#include "msg.h"
#include "mt19937.h"
#include "ckpt/mds_int.h"
#include "ckpt/pklw.h"
#include "ckpt/ptw.h"
#include "ckpt/reshard.h"
#include "ckpt/safetensors.h"
#include "ckpt/stop.h"

#define DS_VERSION "0.7.0"

/* ---- the run's recorded command line ---- */

/* The value after `flag` in the manifest's "args" (a command line, words split at spaces), or
 * NULL.  Copied into buf. */
static const char *flag_value(const struct sh_ckpt *in, const char *flag, char *buf, size_t n)
{
	const char *a = json_string_value(json_object_get(in->manifest, "args"));
	size_t fl = strlen(flag);
	for (const char *p = a; p && *p;) {
		while (*p == ' ')
			p++;
		const char *e = strchr(p, ' ');
		size_t wl = e ? (size_t)(e - p) : strlen(p);
		if (wl == fl && strncmp(p, flag, fl) == 0) {
			if (!e)
				return NULL;
			p = e + 1;
			while (*p == ' ')
				p++;
			e = strchr(p, ' ');
			wl = e ? (size_t)(e - p) : strlen(p);
			if (!wl || wl >= n || strncmp(p, "--", 2) == 0)
				return NULL;
			memcpy(buf, p, wl);
			buf[wl] = 0;
			return buf;
		}
		p += wl;
	}
	return NULL;
}

static int has_flag(const struct sh_ckpt *in, const char *flag)
{
	const char *a = json_string_value(json_object_get(in->manifest, "args"));
	size_t fl = strlen(flag);
	for (const char *p = a; p && (p = strstr(p, flag)); p += fl)
		if ((p == a || p[-1] == ' ') && (p[fl] == 0 || p[fl] == ' '))
			return 1;
	return 0;
}

static int64_t flag_int(const struct sh_ckpt *in, const char *flag, int64_t dflt)
{
	char b[64], *end;
	const char *v = flag_value(in, flag, b, sizeof b);
	if (!v)
		return dflt;
	long long x = strtoll(v, &end, 10);
	return *end ? dflt : x;
}

static double flag_num(const struct sh_ckpt *in, const char *flag, double dflt)
{
	char b[64], *end;
	const char *v = flag_value(in, flag, b, sizeof b);
	if (!v)
		return dflt;
	double x = strtod(v, &end);
	return *end ? dflt : x;
}

int mdsw_precision(const struct sh_ckpt *in, enum mdsw_precision *p, char *err, size_t errlen)
{
	int bf = has_flag(in, "--bf16"), fp = has_flag(in, "--fp16");
	if (bf == fp)
		return errf(err, errlen, "%s: the run's recorded precision is %s: Megatron-DeepSpeed's "
			    "checkpoints here are bf16 (BF16_Optimizer) or fp16 (ZeRO stage 1); give "
			    "--dtype bf16 or --dtype fp16", in->dir, bf ? "both --bf16 and --fp16" :
			    "fp32 (no --bf16 or --fp16 recorded)"), -1;
	*p = bf ? MDSW_BF16 : MDSW_FP16;
	return 0;
}

int mdsw_run_dp(const struct sh_ckpt *in)
{
	json_int_t dp = json_integer_value(json_object_get(json_object_get(in->manifest, "layout"),
							   "dp"));
	return dp >= 1 && dp <= 1 << 20 ? (int)dp : 1;
}

static json_t *man(const struct sh_ckpt *in, const char *obj, const char *key)
{
	json_t *o = obj ? json_object_get(in->manifest, obj) : in->manifest;
	return json_object_get(o, key);
}

static int64_t man_int(const struct sh_ckpt *in, const char *obj, const char *key, int64_t dflt)
{
	json_t *v = man(in, obj, key);
	return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

static double man_num(const struct sh_ckpt *in, const char *obj, const char *key, double dflt)
{
	json_t *v = man(in, obj, key);
	return json_is_number(v) ? json_number_value(v) : dflt;
}

/* ---- the writer's state ---- */

struct param {
	int t;                  /* lmtk table index (out's = in's) */
	char name[128];         /* DeepSpeed's parameter name */
	int64_t numel;          /* TP-local */
};

struct group {
	struct param *p;
	int n;
	int64_t used, padded;   /* elements of the parameters; with the alignment padding */
};

/* a storage of the file being written, in key order */
enum job_kind { J_PART, J_FLAT, J_MEM };
struct job {
	enum job_kind kind;
	enum pt_dtype dtype;
	int64_t numel;
	int t, g;               /* J_PART: tensor, lmtk group; J_FLAT: group index, lmtk group */
	int64_t lo;             /* J_FLAT: first element of the flat group */
	const void *mem;        /* J_MEM */
};

struct w {
	const struct sh_ckpt *in;
	const struct mdsw_target *tg;
	struct lt_model out;
	char step[64], dir[4400];
	int r, s;               /* the rank being written */
	struct group grp[3];
	struct job *jobs;
	int njobs, capjobs;
	float *buf;             /* RS_BLOCK + a row */
	void *cbuf;             /* converted elements */
	size_t bufn;
	struct progress *pg;
	char *err;
	size_t errlen;
};

/* ---- rank r's part of a tensor, in the target layout, as a stream of elements ---- */

static uint16_t f16(float f)
{
	return st_f32_to_f16(f);
}

/* Elements [a, b) (row-major in the TP-local shape) of rank w->r's part of tensor t, group g,
 * converted to dtype, into the member being written. */
static int put_part(struct w *w, struct ptw *f, int t, int g, int64_t a, int64_t b,
		    enum pt_dtype dtype)
{
	const struct lt_tensor *T = &w->out.t[t];
	int64_t lsh[2], r0 = 0, c0 = 0;
	lt_local_shape(T, w->tg->tp, lsh);
	if (T->split == LT_COLUMN || T->split == LT_VOCAB)
		r0 = (int64_t)w->r * lsh[0];
	else if (T->split == LT_ROW)
		c0 = (int64_t)w->r * lsh[1];
	int64_t cols = lsh[1], rows = (int64_t)(w->bufn / (size_t)cols);
	while (a < b) {
		int64_t row = a / cols, end = row + rows;
		if (end * cols > b)
			end = (b + cols - 1) / cols;
		if (sh_read(w->in, t, g, r0 + row, r0 + end, c0, c0 + cols, w->tg->average, w->buf) < 0)
			return errf(w->err, w->errlen, "%s", sh_error(w->in)), EXIT_USAGE;
		int64_t lo = a - row * cols, hi = (end * cols < b ? end * cols : b) - row * cols;
		size_t n = (size_t)(hi - lo);
		const float *x = w->buf + lo;
		const void *p = x;
		if (dtype == PTD_BF16 || dtype == PTD_F16) {
			uint16_t *h = w->cbuf;
			for (size_t i = 0; i < n; i++)
				h[i] = dtype == PTD_BF16 ? st_f32_to_bf16(x[i]) : f16(x[i]);
			p = h;
		}
		size_t bytes = n * pt_dtype_size(dtype);
		if (ptw_write(f, p, bytes) < 0)
			return errf(w->err, w->errlen, "%s", ptw_error(f)), EXIT_FAILED;
		progress_add(w->pg, bytes);
		if (stop_requested())
			return errf(w->err, w->errlen, "interrupted"), EXIT_FAILED;
		a = row * cols + hi;
	}
	return 0;
}

static int put_zeros(struct w *w, struct ptw *f, int64_t n, enum pt_dtype dtype)
{
	memset(w->cbuf, 0, w->bufn * sizeof(float));
	while (n > 0) {
		int64_t k = n < (int64_t)w->bufn ? n : (int64_t)w->bufn;
		if (ptw_write(f, w->cbuf, (size_t)k * pt_dtype_size(dtype)) < 0)
			return errf(w->err, w->errlen, "%s", ptw_error(f)), EXIT_FAILED;
		n -= k;
	}
	return 0;
}

/* Elements [lo, lo + n) of flat group gi (buffer g): its parameters back to back, then zeros. */
static int put_flat(struct w *w, struct ptw *f, int gi, int g, int64_t lo, int64_t n)
{
	const struct group *G = &w->grp[gi];
	int64_t off = 0, hi = lo + n;
	int rc;
	for (int i = 0; i < G->n && lo < hi; i++) {
		int64_t a = lo > off ? lo : off, b = hi < off + G->p[i].numel ? hi : off + G->p[i].numel;
		if (a < b) {
			if ((rc = put_part(w, f, G->p[i].t, g, a - off, b - off, PTD_F32)))
				return rc;
			lo = b;
		}
		off += G->p[i].numel;
	}
	return lo < hi ? put_zeros(w, f, hi - lo, PTD_F32) : 0;
}

/* ---- files ---- */

static void jobs_reset(struct w *w)
{
	w->njobs = 0;
}

/* A storage for the pickle being built: its key (the job's index), registered. */
static const char *job(struct w *w, struct job j, char *key, size_t n)
{
	if (w->njobs == w->capjobs) {
		int cap = w->capjobs ? 2 * w->capjobs : 64;
		struct job *p = realloc(w->jobs, (size_t)cap * sizeof *p);
		if (!p)
			return NULL;
		w->jobs = p;
		w->capjobs = cap;
	}
	w->jobs[w->njobs] = j;
	snprintf(key, n, "%d", w->njobs++);
	return key;
}

/* a tensor of the pickle, its storage one job */
static void tensor(struct w *w, struct pklw *p, struct job j, int ndim, const int64_t *shape)
{
	char key[16];
	if (!job(w, j, key, sizeof key)) {
		p->oom = 1;
		return;
	}
	pklw_tensor(p, j.dtype, key, ndim, shape);
}

/* Writes file `name` of the step: the pickle, then every job's storage, in key order. */
static int write_file(struct w *w, const char *name, const char *archive, struct pklw *p)
{
	char path[4600];
	int rc = 0;
	snprintf(path, sizeof path, "%s/%s", w->dir, name);
	if (pklw_finish(p) < 0) {
		pklw_free(p);
		return xalloc_err(w->err, w->errlen, "the pickle of", 0), EXIT_FAILED;
	}
	struct ptw *f = ptw_create(path, archive, w->err, w->errlen);
	if (!f) {
		pklw_free(p);
		return EXIT_FAILED;
	}
	if (ptw_member(f, "data.pkl", p->b, p->n) < 0)
		rc = (errf(w->err, w->errlen, "%s", ptw_error(f)), EXIT_FAILED);
	pklw_free(p);
	for (int k = 0; k < w->njobs && !rc; k++) {
		const struct job *j = &w->jobs[k];
		char member[32];
		snprintf(member, sizeof member, "data/%d", k);
		if (ptw_begin(f, member, (uint64_t)j->numel * pt_dtype_size(j->dtype)) < 0) {
			rc = (errf(w->err, w->errlen, "%s", ptw_error(f)), EXIT_FAILED);
			break;
		}
		if (j->kind == J_PART)
			rc = put_part(w, f, j->t, j->g, 0, j->numel, j->dtype);
		else if (j->kind == J_FLAT)
			rc = put_flat(w, f, j->t, j->g, j->lo, j->numel);
		else if (ptw_write(f, j->mem, (size_t)j->numel * pt_dtype_size(j->dtype)) < 0)
			rc = (errf(w->err, w->errlen, "%s", ptw_error(f)), EXIT_FAILED);
		if (!rc && ptw_end(f) < 0)
			rc = (errf(w->err, w->errlen, "%s", ptw_error(f)), EXIT_FAILED);
	}
	jobs_reset(w);
	if (rc) {
		ptw_abort(f);
		return rc;
	}
	return ptw_close(f, w->err, w->errlen) < 0 ? EXIT_FAILED : 0;
}

/* ---- names and groups (2.5) ---- */

/* DeepSpeed's key of a transformer layer's tensor: lmtk's without "layers.N.", attention as
 * self_attention (mds.c's mds_layer_name_ the other way) */
static const char *layer_key(const struct lt_tensor *T, char *buf, size_t n)
{
	const char *k = strchr(T->name + 7, '.') + 1;   /* past "layers.N." */
	snprintf(buf, n, "%s%s", strncmp(k, "attention.", 10) == 0 ? "self_" : "", k);
	return buf;
}

/* The layer-file spec of tensor t and its key in that file (2.3) */
static int spec_of(const struct lt_model *m, int t, char *key, size_t n)
{
	const struct lt_tensor *T = &m->t[t];
	if (T->place == LT_LAYER) {
		layer_key(T, key, n);
		return T->layer + 3;
	}
	if (t == m->lnf_w || t == m->lnf_b) {
		snprintf(key, n, "%s", t == m->lnf_w ? "weight" : "bias");
		return m->layers + 4;
	}
	snprintf(key, n, "%s", t == m->wte ? "word_embeddings.weight" : t == m->eln_w ?
		 "word_embeddings.norm.weight" : t == m->eln_b ? "word_embeddings.norm.bias" :
		 "position_embeddings.weight");
	return 1;
}

static int on_stage(const struct w *w, int t, int s)
{
	const struct lt_model *m = &w->out;
	if (t == m->wte || t == m->wpe)   /* tied_modules.embed: first and last stage */
		return s == 0 || s == w->tg->pp - 1;
	return lt_on_stage(m, &m->t[t], s, w->tg->pp, w->tg->pp_embedding);
}

/* Stage s's parameters in module order (tied_modules.embed, the layers, the final norm), cut
 * into Megatron's three groups; their TP-local sizes; the flat groups' padding to 2 x DP. */
static int make_groups(struct w *w, int s)
{
	const struct lt_model *m = &w->out;
	struct param *all = calloc((size_t)m->n, sizeof *all);
	int n = 0, ndecay = 0;
	if (!all)
		return xalloc_err(w->err, w->errlen, "the stage's parameter list", 0), EXIT_FAILED;
	int embed[4] = {m->wte, s == 0 ? m->eln_w : -1, s == 0 ? m->eln_b : -1, m->wpe};
	for (int i = 0; i < 4; i++)
		if (embed[i] >= 0 && on_stage(w, embed[i], s)) {
			char key[96];
			spec_of(m, embed[i], key, sizeof key);
			all[n].t = embed[i];
			snprintf(all[n++].name, sizeof all->name, "tied_modules.embed.%s", key);
		}
	for (int t = 0; t < m->n; t++) {
		if (t == m->wte || t == m->wpe || t == m->eln_w || t == m->eln_b || !on_stage(w, t, s))
			continue;
		char key[96];
		int spec = spec_of(m, t, key, sizeof key);
		all[n].t = t;
		snprintf(all[n++].name, sizeof all->name, "%d.%s", spec, key);
	}
	for (int i = 0; i < n; i++) {
		int64_t lsh[2];
		lt_local_shape(&m->t[all[i].t], w->tg->tp, lsh);
		all[i].numel = lsh[0] * lsh[1];
		ndecay += !mds_no_decay_(m->t[all[i].t].name);
	}
	for (int gi = 0; gi < 3; gi++) {
		free(w->grp[gi].p);
		w->grp[gi] = (struct group){calloc((size_t)n + 1, sizeof(struct param)), 0, 0, 0};
		if (!w->grp[gi].p) {
			free(all);
			return xalloc_err(w->err, w->errlen, "the parameter groups", 0), EXIT_FAILED;
		}
	}
	for (int i = 0, k = 0; i < n; i++) {
		int nd = mds_no_decay_(m->t[all[i].t].name);
		int gi = nd ? 2 : k++ < ndecay / 2 ? 0 : 1;
		struct group *G = &w->grp[gi];
		G->p[G->n++] = all[i];
		G->used += all[i].numel;
	}
	int64_t align = 2 * (int64_t)w->tg->dp;   /* nccl_start_alignment_factor x DP */
	for (int gi = 0; gi < 3; gi++)
		w->grp[gi].padded = w->grp[gi].used + (align - w->grp[gi].used % align) % align;
	free(all);
	return 0;
}

/* ---- the layer files (2.3) ---- */

static int write_layers(struct w *w, int s)
{
	const struct lt_model *m = &w->out;
	enum pt_dtype lowp = w->tg->precision == MDSW_BF16 ? PTD_BF16 : PTD_F16;
	int specs[3] = {1, -1, m->layers + 4}, rc;
	/* the specs of stage s in order: the embedding (stage 0), its layers, the final norm */
	for (int k = 0; k < 3; k++) {
		int lo = specs[k], hi = specs[k];
		if (k == 1) {
			lo = 3;
			hi = m->layers + 2;
		}
		for (int spec = lo; spec <= hi; spec++) {
			struct pklw p;
			int any = 0;
			pklw_init(&p);
			pklw_odict(&p);
			/* layer_01 in EmbeddingPipe's state_dict order (2.3), the others in table order */
			int emb[4] = {m->wte, m->eln_w, m->eln_b, m->wpe};
			for (int i = 0; i < (spec == 1 ? 4 : m->n); i++) {
				int t = spec == 1 ? emb[i] : i;
				char key[96];
				if (t < 0 || spec_of(m, t, key, sizeof key) != spec ||
				    !lt_on_stage(m, &m->t[t], s, w->tg->pp, w->tg->pp_embedding))
					continue;
				if (spec == 1 && s != 0)
					continue;   /* the last stage's tied copy is never saved */
				int64_t lsh[2];
				lt_local_shape(&m->t[t], w->tg->tp, lsh);
				pklw_str(&p, key);
				tensor(w, &p, (struct job){J_PART, lowp, lsh[0] * lsh[1], t, 0, 0, NULL},
				       m->t[t].ndim, lsh);
				any = 1;
			}
			pklw_end(&p);
			if (!any) {
				pklw_free(&p);
				jobs_reset(w);
				continue;
			}
			char name[112], arch[96];
			snprintf(arch, sizeof arch, "layer_%02d-model_%02d-model_states", spec, w->r);
			snprintf(name, sizeof name, "%s.pt", arch);
			if ((rc = write_file(w, name, arch, &p)))
				return rc;
		}
	}
	return 0;
}

/* ---- the optimizer partitions (2.6, 2.8) ---- */

/* Megatron's AnnealingLR at the checkpoint (megatron/learning_rates.py get_lr): the param
 * groups' lr */
static double lr_now(const struct sh_ckpt *in)
{
	double max = man_num(in, "scheduler", "max_lr", 0), min = man_num(in, "scheduler", "min_lr", 0);
	double n = (double)man_int(in, "scheduler", "num_steps", 0);
	double wu = (double)man_int(in, "scheduler", "warmup", 0);
	double d = (double)man_int(in, "scheduler", "decay", 0);
	const char *style = json_string_value(man(in, "scheduler", "style"));
	if (json_is_true(man(in, "scheduler", "by_tokens"))) {
		if (wu > 0 && n <= wu)
			return max * n / wu;
		n = (double)man_int(in, "scheduler", "num_tokens", 0);
		wu = (double)man_int(in, "scheduler", "warmup_tokens", 0);
	} else if (wu > 0 && n <= wu) {
		return max * n / wu;
	}
	if (!style || strcmp(style, "constant") == 0)
		return max;
	if (n > d)
		return min;
	double ratio = d > wu ? (n - wu) / (d - wu) : 1.0;
	double coeff = strcmp(style, "linear") == 0 ? 1.0 - ratio : 0.5 * (cos(M_PI * ratio) + 1.0);
	return min + coeff * (max - min);
}

/* apex FusedAdam's param_groups, one per flat group (params [g]) */
static void param_groups(const struct w *w, struct pklw *p)
{
	const struct sh_ckpt *in = w->in;
	double lr = lr_now(in), wd = man_num(in, "optimizer", "weight_decay", 0.01);
	pklw_list(p);
	for (int gi = 0; gi < 3; gi++) {
		pklw_dict(p);
		if (gi == 2) {   /* Megatron's no-decay dict had weight_decay first */
			pklw_str(p, "weight_decay");
			pklw_float(p, 0.0);
		}
		pklw_str(p, "lr");
		pklw_float(p, lr);
		pklw_str(p, "bias_correction");
		pklw_bool(p, 1);
		pklw_str(p, "betas");
		pklw_tuple(p);
		pklw_float(p, man_num(in, "optimizer", "beta1", 0.9));
		pklw_float(p, man_num(in, "optimizer", "beta2", 0.999));
		pklw_end(p);
		pklw_str(p, "eps");
		pklw_float(p, man_num(in, "optimizer", "eps", 1e-8));
		if (gi != 2) {
			pklw_str(p, "weight_decay");
			pklw_float(p, wd);
		}
		pklw_str(p, "step");
		pklw_int(p, man_int(in, "optimizer", "step", 0));
		pklw_str(p, "params");
		pklw_list(p);
		pklw_int(p, gi);
		pklw_end(p);
		pklw_end(p);
	}
	pklw_end(p);
}

struct run {   /* what the args and the DeepSpeed config say of the run */
	int64_t mbs, gbs, window, hyst, initial_power;
	double min_scale, clip;
	int static_scale;
	double loss_scale;
};

static void ds_config(const struct w *w, const struct run *rn, struct pklw *p)
{
	int fp16 = w->tg->precision == MDSW_FP16;
	pklw_dict(p);
	pklw_str(p, "train_micro_batch_size_per_gpu");
	pklw_int(p, rn->mbs);
	pklw_str(p, "train_batch_size");
	pklw_int(p, rn->gbs);
	if (rn->gbs % (rn->mbs * w->tg->dp) == 0) {
		pklw_str(p, "gradient_accumulation_steps");
		pklw_int(p, rn->gbs / (rn->mbs * w->tg->dp));
	}
	pklw_str(p, "gradient_clipping");
	pklw_float(p, rn->clip);
	pklw_str(p, "zero_optimization");
	pklw_dict(p);
	pklw_str(p, "stage");
	pklw_int(p, fp16 ? 1 : 0);
	pklw_end(p);
	pklw_str(p, fp16 ? "fp16" : "bf16");
	pklw_dict(p);
	pklw_str(p, "enabled");
	pklw_bool(p, 1);
	if (fp16) {
		pklw_str(p, "loss_scale");
		pklw_float(p, rn->static_scale ? rn->loss_scale : 0);
		pklw_str(p, "loss_scale_window");
		pklw_int(p, rn->window);
		pklw_str(p, "hysteresis");
		pklw_int(p, rn->hyst);
		pklw_str(p, "min_loss_scale");
		pklw_float(p, rn->min_scale);
		pklw_str(p, "initial_scale_power");
		pklw_int(p, rn->initial_power);
	}
	pklw_end(p);
	pklw_str(p, "steps_per_print");
	pklw_int(p, 2000);
	pklw_str(p, "wall_clock_breakdown");
	pklw_bool(p, 0);
	pklw_end(p);
}

/* DeepSpeed's loss scaler as stage_1_and_2.py pickles it: lmtk's scale, and its clean steps
 * and hysteresis as DynamicLossScaler counts them (mds_ds.c's ds_scaler, inverted: good =
 * (cur_iter - last_overflow_iter - 1) mod window) */
static void loss_scaler(const struct w *w, const struct run *rn, struct pklw *p)
{
	const struct sh_ckpt *in = w->in;
	double scale = man_num(in, "optimizer", "loss_scale", rn->loss_scale);
	int64_t it = in->iteration, good = man_int(in, "optimizer", "good_steps", 0);
	if (rn->static_scale) {
		pklw_object(p, "deepspeed.runtime.fp16.loss_scaler", "LossScaler");
		pklw_str(p, "cur_scale");
		pklw_float(p, scale);
		pklw_str(p, "dynamic");
		pklw_bool(p, 0);
		pklw_end(p);
		return;
	}
	pklw_object(p, "deepspeed.runtime.fp16.loss_scaler", "DynamicLossScaler");
	pklw_str(p, "cur_scale");
	pklw_float(p, scale);
	pklw_str(p, "dynamic");
	pklw_bool(p, 1);
	pklw_str(p, "cur_iter");
	pklw_int(p, it);
	pklw_str(p, "last_overflow_iter");
	pklw_int(p, it - 1 - good);
	pklw_str(p, "scale_factor");
	pklw_float(p, 2.0);
	pklw_str(p, "scale_window");
	pklw_int(p, rn->window);
	pklw_str(p, "min_scale");
	pklw_float(p, rn->min_scale);
	pklw_str(p, "delayed_shift");
	pklw_int(p, rn->hyst);
	pklw_str(p, "cur_hysteresis");
	pklw_int(p, man_int(in, "optimizer", "hysteresis_left", rn->hyst));
	pklw_str(p, "consecutive_hysteresis");
	pklw_bool(p, 0);
	pklw_str(p, "raise_error_at_min_scale");
	pklw_bool(p, 1);
	pklw_end(p);
}

/* DP rank d's partition of every flat group: bf16_zero_* (BF16_Optimizer) or zero_* (ZeRO 1) */
static int write_optim(struct w *w, const struct run *rn, int d)
{
	int bf16 = w->tg->precision == MDSW_BF16, dp = w->tg->dp;
	struct pklw p;
	pklw_init(&p);
	pklw_dict(&p);
	pklw_str(&p, "optimizer_state_dict");
	pklw_dict(&p);
	if (!bf16) {
		pklw_str(&p, "loss_scaler");
		loss_scaler(w, rn, &p);
		pklw_str(&p, "dynamic_loss_scale");
		pklw_bool(&p, !rn->static_scale);
		pklw_str(&p, "overflow");
		pklw_bool(&p, 0);
	}
	pklw_str(&p, "clip_grad");
	pklw_float(&p, rn->clip);
	pklw_str(&p, "base_optimizer_state");
	pklw_dict(&p);
	pklw_str(&p, "state");
	pklw_dict(&p);
	for (int gi = 0; gi < 3; gi++) {
		int64_t ps = w->grp[gi].padded / dp;
		pklw_int(&p, gi);
		pklw_odict(&p);
		for (int g = 1; g <= 2; g++) {
			pklw_str(&p, lt_group_name[g]);
			tensor(w, &p, (struct job){J_FLAT, PTD_F32, ps, gi, g, d * ps, NULL}, 1, &ps);
		}
		pklw_end(&p);
	}
	pklw_end(&p);
	pklw_str(&p, "param_groups");
	param_groups(w, &p);
	pklw_end(&p);
	pklw_str(&p, "single_partition_of_fp32_groups");
	pklw_list(&p);
	for (int gi = 0; gi < 3; gi++) {
		int64_t ps = w->grp[gi].padded / dp;
		int64_t pad = d == dp - 1 ? w->grp[gi].padded - w->grp[gi].used : 0;
		int64_t n = bf16 ? ps : ps - pad;   /* ZeRO saves it without the padding (2.8) */
		tensor(w, &p, (struct job){J_FLAT, PTD_F32, n, gi, 0, d * ps, NULL}, 1, &n);
	}
	pklw_end(&p);
	if (!bf16) {
		pklw_str(&p, "zero_stage");
		pklw_enum(&p, "deepspeed.runtime.zero.config", "ZeroStageEnum", 1);
	}
	pklw_str(&p, "group_paddings");
	pklw_list(&p);
	for (int gi = 0; gi < 3; gi++)
		pklw_int(&p, d == dp - 1 ? w->grp[gi].padded - w->grp[gi].used : 0);
	pklw_end(&p);
	pklw_str(&p, "partition_count");
	pklw_list(&p);
	for (int gi = 0; gi < 3; gi++)
		pklw_int(&p, dp);
	pklw_end(&p);
	pklw_str(&p, "ds_version");
	pklw_str(&p, DS_VERSION);
	if (bf16) {   /* 0.7.0's _create_param_mapping */
		pklw_str(&p, "param_slice_mappings");
		pklw_list(&p);
		for (int gi = 0; gi < 3; gi++) {
			const struct group *G = &w->grp[gi];
			int64_t ps = G->padded / dp, lo = d * ps, hi = lo + ps, off = 0;
			pklw_odict(&p);
			for (int i = 0; i < G->n; i++) {
				int64_t a = lo > off ? lo : off;
				int64_t b = hi < off + G->p[i].numel ? hi : off + G->p[i].numel;
				if (a < b) {
					pklw_str(&p, G->p[i].name);
					pklw_object(&p, "deepspeed.runtime.bf16_optimizer", "fragment_address");
					pklw_str(&p, "numel");
					pklw_int(&p, b - a);
					pklw_str(&p, "start");
					pklw_int(&p, a - lo);
					pklw_end(&p);
				}
				off += G->p[i].numel;
			}
			pklw_end(&p);
		}
		pklw_end(&p);
	}
	pklw_end(&p);   /* optimizer_state_dict */
	pklw_str(&p, "ds_config");
	ds_config(w, rn, &p);
	pklw_str(&p, "ds_version");
	pklw_str(&p, DS_VERSION);
	pklw_end(&p);
	char name[128];
	snprintf(name, sizeof name, "%szero_pp_rank_%d_mp_rank_%02d_optim_states.pt",
		 bf16 ? "bf16_" : "", d, w->s * w->tg->tp + w->r);
	/* DeepSpeed saves these through an open file: the folder inside is "archive" */
	return write_file(w, name, "archive", &p);
}

/* ---- RNG states as Megatron's _set_random_seed(seed + 100 * pp rank) leaves them (2.4) ---- */

static void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* torch.Generator().manual_seed(s).get_state(): CPUGeneratorImpl's THGeneratorStateNew - the
 * seed, left 1, seeded 1, next 0, the 624 words as uint64, no cached normal sample */
enum { TORCH_RNG = 5056, CUDA_RNG = 816 };
static void torch_rng(uint8_t *b, uint64_t seed)
{
	struct mt19937 mt;
	memset(b, 0, TORCH_RNG);
	mt_seed(&mt, (uint32_t)seed);
	put_le(b, seed, 8);
	put_le(b + 8, 1, 4);
	put_le(b + 12, 1, 4);
	for (int i = 0; i < MT_N; i++)
		put_le(b + 24 + 8 * i, mt.key[i], 8);
}

/* torch.cuda.get_rng_state(): 800 bytes kept for compatibility, the Philox seed and offset */
static void cuda_rng(uint8_t *b, uint64_t seed)
{
	memset(b, 0, CUDA_RNG);
	put_le(b + 800, seed, 8);
}

/* np.random.get_state() as numpy pickles it: ('MT19937', ndarray uint32[624], 624, 0, 0.0) */
static void np_state(struct pklw *p, uint32_t seed)
{
	struct mt19937 mt;
	uint8_t raw[MT_N * 4];
	mt_seed(&mt, seed);
	for (int i = 0; i < MT_N; i++)
		put_le(raw + 4 * i, mt.key[i], 4);
	int64_t n = 624;
	pklw_tuple(p);
	pklw_str(p, "MT19937");
	pklw_call(p, "numpy.core.multiarray", "_reconstruct");
	pklw_global(p, "numpy", "ndarray");
	pklw_tuple(p);
	pklw_int(p, 0);
	pklw_end(p);
	pklw_bytes(p, "b", 1);
	pklw_end(p);
	pklw_tuple(p);   /* ndarray.__setstate__: version, shape, dtype, Fortran order, data */
	pklw_int(p, 1);
	pklw_tuple(p);
	pklw_int(p, n);
	pklw_end(p);
	pklw_call(p, "numpy", "dtype");
	pklw_str(p, "u4");
	pklw_bool(p, 0);
	pklw_bool(p, 1);
	pklw_end(p);
	pklw_tuple(p);   /* dtype.__setstate__ */
	pklw_int(p, 3);
	pklw_str(p, "<");
	pklw_none(p);
	pklw_none(p);
	pklw_none(p);
	pklw_int(p, -1);
	pklw_int(p, -1);
	pklw_int(p, 0);
	pklw_end(p);
	pklw_build(p);
	pklw_bool(p, 0);
	pklw_bytes(p, raw, sizeof raw);
	pklw_end(p);
	pklw_build(p);
	pklw_int(p, 624);
	pklw_int(p, 0);
	pklw_float(p, 0.0);
	pklw_end(p);
}

/* ---- mp_rank_MM_model_states.pt (2.4) ---- */

static void kv_int(struct pklw *p, const char *k, int64_t v)
{
	pklw_str(p, k);
	pklw_int(p, v);
}

static void kv_num(struct pklw *p, const char *k, double v)
{
	pklw_str(p, k);
	pklw_float(p, v);
}

static void kv_str(struct pklw *p, const char *k, const char *v)
{
	pklw_str(p, k);
	if (v)
		pklw_str(p, v);
	else
		pklw_none(p);
}

static void kv_bool(struct pklw *p, const char *k, int v)
{
	pklw_str(p, k);
	pklw_bool(p, v);
}

static void kv_none(struct pklw *p, const char *k)
{
	pklw_str(p, k);
	pklw_none(p);
}

/* an int flag of the run, or None */
static void kv_flag(struct pklw *p, const struct sh_ckpt *in, const char *k, const char *flag)
{
	int64_t v = flag_int(in, flag, INT64_MIN);
	if (v == INT64_MIN)
		kv_none(p, k);
	else
		kv_int(p, k, v);
}

/* the tokenizer file of a role, as the manifest recorded it (absolute), else the flag's */
static const char *tok_file(const struct sh_ckpt *in, const char *role, const char *flag,
			    char *buf, size_t n)
{
	json_t *files = json_object_get(json_object_get(in->manifest, "tokenizer"), "files");
	size_t i;
	json_t *f;
	json_array_foreach(files, i, f) {
		const char *r = json_string_value(json_object_get(f, "role"));
		const char *path = json_string_value(json_object_get(f, "path"));
		if (r && path && strcmp(r, role) == 0 && strlen(path) < n)
			return strcpy(buf, path);
	}
	return flag_value(in, flag, buf, n);
}

/* Megatron-DeepSpeed's arguments (megatron/arguments.py dest names) for rank `rank` */
static void megatron_args(const struct w *w, const struct run *rn, int64_t rank, struct pklw *p)
{
	const struct sh_ckpt *in = w->in;
	const struct lt_model *m = &w->out;
	const struct mdsw_target *tg = w->tg;
	int fp16 = tg->precision == MDSW_FP16, by_tokens = json_is_true(man(in, "scheduler",
									      "by_tokens"));
	char b1[4200], b2[4200], b3[256];
	pklw_object(p, "argparse", "Namespace");
	kv_int(p, "num_layers", m->layers);
	kv_int(p, "hidden_size", m->hidden);
	kv_int(p, "ffn_hidden_size", m->ffn);
	kv_int(p, "num_attention_heads", m->heads);
	kv_int(p, "kv_channels", m->hidden / m->heads);
	kv_int(p, "max_position_embeddings", m->max_pos);
	kv_int(p, "make_vocab_size_divisible_by", flag_int(in, "--make-vocab-size-divisible-by", 128));
	kv_none(p, "pad_vocab_size_to");
	kv_num(p, "layernorm_epsilon", m->eps);
	kv_bool(p, "sync_tp_duplicated_parameters", 0);
	kv_bool(p, "apply_residual_connection_post_layernorm", 0);
	kv_bool(p, "embed_layernorm", m->embed_ln);
	kv_bool(p, "openai_gelu", has_flag(in, "--openai-gelu"));
	pklw_str(p, "position_embedding_type");   /* megatron/enums.py: absolute 2, alibi 3 */
	pklw_enum(p, "megatron.enums", "PositionEmbeddingType", m->alibi ? 3 : 2);
	kv_none(p, "glu_activation");
	kv_num(p, "attention_dropout", m->attention_dropout);
	kv_num(p, "hidden_dropout", m->hidden_dropout);
	kv_num(p, "weight_decay", man_num(in, "optimizer", "weight_decay", 0.01));
	kv_num(p, "clip_grad", rn->clip);
	kv_num(p, "adam_beta1", man_num(in, "optimizer", "beta1", 0.9));
	kv_num(p, "adam_beta2", man_num(in, "optimizer", "beta2", 0.999));
	kv_num(p, "adam_eps", man_num(in, "optimizer", "eps", 1e-8));
	kv_int(p, "micro_batch_size", rn->mbs);
	kv_int(p, "global_batch_size", rn->gbs);
	kv_none(p, "rampup_batch_size");
	kv_bool(p, "checkpoint_activations", has_flag(in, "--checkpoint-activations"));
	kv_flag(p, in, "train_iters", "--train-iters");
	kv_flag(p, in, "train_samples", "--train-samples");
	kv_flag(p, in, "train_tokens", "--train-tokens");
	kv_int(p, "log_interval", flag_int(in, "--log-interval", 100));
	kv_flag(p, in, "exit_interval", "--exit-interval");
	kv_str(p, "optimizer", "adam");
	kv_int(p, "seed", man_int(in, "model", "seed", 1234));
	kv_num(p, "init_method_std", m->init_std);
	kv_num(p, "lr", man_num(in, "scheduler", "max_lr", 0));
	kv_str(p, "lr_decay_style", json_string_value(man(in, "scheduler", "style")));
	kv_flag(p, in, "lr_decay_iters", "--lr-decay-iters");
	kv_flag(p, in, "lr_decay_samples", "--lr-decay-samples");
	if (by_tokens)
		kv_int(p, "lr_decay_tokens", man_int(in, "scheduler", "decay", 0));
	else
		kv_none(p, "lr_decay_tokens");
	kv_none(p, "lr_warmup_fraction");
	kv_int(p, "lr_warmup_iters", flag_int(in, "--lr-warmup-iters", 0));
	kv_int(p, "lr_warmup_samples", flag_int(in, "--lr-warmup-samples", 0));
	kv_int(p, "lr_warmup_tokens", man_int(in, "scheduler", "warmup_tokens", 0));
	kv_num(p, "min_lr", man_num(in, "scheduler", "min_lr", 0));
	kv_none(p, "save");
	kv_flag(p, in, "save_interval", "--save-interval");
	kv_none(p, "load");
	kv_bool(p, "fp16", fp16);
	kv_bool(p, "bf16", !fp16);
	if (rn->static_scale)
		kv_num(p, "loss_scale", rn->loss_scale);
	else
		kv_none(p, "loss_scale");
	kv_num(p, "initial_loss_scale", ldexp(1.0, (int)rn->initial_power));
	kv_num(p, "min_loss_scale", rn->min_scale);
	kv_int(p, "loss_scale_window", rn->window);
	kv_int(p, "hysteresis", rn->hyst);
	kv_int(p, "tensor_model_parallel_size", tg->tp);
	kv_int(p, "pipeline_model_parallel_size", tg->pp);
	kv_none(p, "virtual_pipeline_model_parallel_size");
	kv_str(p, "pp_partition_method", tg->pp_embedding ? "type:transformer|embedding"
							  : "type:transformer");
	kv_str(p, "distributed_backend", "nccl");
	kv_int(p, "seq_length", man_int(in, "model", "seq_length", m->max_pos));
	kv_int(p, "encoder_seq_length", man_int(in, "model", "seq_length", m->max_pos));
	kv_str(p, "tokenizer_type", json_string_value(json_object_get(json_object_get(
		in->manifest, "tokenizer"), "type")) ? json_string_value(json_object_get(
		json_object_get(in->manifest, "tokenizer"), "type")) : flag_value(in,
		"--tokenizer-type", b3, sizeof b3) ? b3 : "GPT2BPETokenizer");
	kv_str(p, "vocab_file", tok_file(in, "vocab-file", "--vocab-file", b1, sizeof b1));
	kv_str(p, "merge_file", tok_file(in, "merge-file", "--merge-file", b2, sizeof b2));
	kv_str(p, "data_impl", "mmap");
	kv_str(p, "split", flag_value(in, "--split", b3, sizeof b3) ? b3 : "969, 30, 1");
	kv_int(p, "rank", rank);
	kv_int(p, "local_rank", rank % 8);
	kv_int(p, "world_size", (int64_t)tg->tp * tg->pp * tg->dp);
	kv_int(p, "data_parallel_size", tg->dp);
	pklw_str(p, "params_dtype");
	pklw_global(p, "torch", fp16 ? "float16" : "bfloat16");
	kv_int(p, "padded_vocab_size", m->padded_vocab);
	kv_int(p, "consumed_train_samples", man_int(in, NULL, "consumed_samples", 0));
	json_t *vp = json_array_get(man(in, NULL, "valid_positions"), 0);
	kv_int(p, "consumed_valid_samples", json_is_integer(vp) ? json_integer_value(vp) : 0);
	kv_int(p, "consumed_train_tokens", man_int(in, NULL, "consumed_tokens", 0));
	kv_int(p, "gigaflos_no_embeds", 0);
	kv_bool(p, "curriculum_learning", 0);
	kv_int(p, "iteration", in->iteration);
	kv_bool(p, "deepspeed", 1);
	kv_str(p, "deepspeed_config", "ds_config.json");
	kv_int(p, "zero_stage", fp16 ? 1 : 0);
	kv_bool(p, "deepscale", 0);
	kv_none(p, "deepscale_config");
	kv_bool(p, "deepspeed_mpi", 0);
	pklw_end(p);
}

static int write_model_states(struct w *w, const struct run *rn)
{
	const struct sh_ckpt *in = w->in;
	const struct mdsw_target *tg = w->tg;
	int64_t seed = man_int(in, "model", "seed", 1234), s = w->s, r = w->r;
	int64_t ps = seed + 100 * s;   /* Megatron's _set_random_seed: seed + 100 x pp rank */
	static uint8_t trng[TORCH_RNG], crng[CUDA_RNG], mrng[CUDA_RNG];
	struct pklw p;
	pklw_init(&p);
	pklw_dict(&p);
	kv_none(&p, "module");   /* the pipeline engine saves the layers itself */
	pklw_str(&p, "buffer_names");
	pklw_list(&p);
	pklw_end(&p);
	kv_none(&p, "optimizer");
	pklw_str(&p, "param_shapes");
	pklw_list(&p);
	for (int gi = 0; gi < 3; gi++) {
		pklw_odict(&p);
		for (int i = 0; i < w->grp[gi].n; i++) {
			int64_t lsh[2];
			const struct param *q = &w->grp[gi].p[i];
			lt_local_shape(&w->out.t[q->t], tg->tp, lsh);
			pklw_str(&p, q->name);
			pklw_size(&p, w->out.t[q->t].ndim, lsh);
		}
		pklw_end(&p);
	}
	pklw_end(&p);
	pklw_str(&p, "lr_scheduler");   /* AnnealingLR.state_dict: steps are samples */
	pklw_dict(&p);
	kv_num(&p, "max_lr", man_num(in, "scheduler", "max_lr", 0));
	kv_int(&p, "warmup_steps", man_int(in, "scheduler", "warmup", 0));
	kv_int(&p, "num_steps", man_int(in, "scheduler", "num_steps", 0));
	kv_int(&p, "warmup_tokens", man_int(in, "scheduler", "warmup_tokens", 0));
	kv_int(&p, "num_tokens", man_int(in, "scheduler", "num_tokens", 0));
	kv_str(&p, "decay_style", json_string_value(man(in, "scheduler", "style")));
	kv_int(&p, "decay_steps", man_int(in, "scheduler", "decay", 0));
	kv_num(&p, "min_lr", man_num(in, "scheduler", "min_lr", 0));
	pklw_end(&p);
	pklw_str(&p, "sparse_tensor_module_names");
	pklw_set(&p);
	pklw_end(&p);
	kv_int(&p, "skipped_steps", man_int(in, NULL, "skipped_iterations", 0));
	kv_int(&p, "global_steps", in->iteration);
	kv_int(&p, "global_samples", man_int(in, NULL, "consumed_samples", 0));
	kv_int(&p, "dp_world_size", tg->dp);
	kv_int(&p, "mp_world_size", (int64_t)tg->tp * tg->pp);
	pklw_str(&p, "ds_config");
	ds_config(w, rn, &p);
	kv_str(&p, "ds_version", DS_VERSION);
	/* Megatron's client state (checkpointing.py save_checkpoint) */
	pklw_str(&p, "args");
	megatron_args(w, rn, s * tg->dp * tg->tp + r, &p);
	kv_num(&p, "checkpoint_version", 3.0);
	kv_int(&p, "iteration", in->iteration);
	kv_int(&p, "tokens", man_int(in, NULL, "consumed_tokens", 0));
	pklw_str(&p, "checkpoint_info");
	pklw_dict(&p);
	kv_int(&p, "padded_vocab_size", w->out.padded_vocab);
	kv_int(&p, "original_vocab_size", w->out.vocab);
	pklw_end(&p);
	/* random.getstate(): (3, the 624 words and the index 624, None) */
	struct mt19937 mt;
	uint32_t words[2] = {(uint32_t)(uint64_t)ps, (uint32_t)((uint64_t)ps >> 32)};
	mt_seed_by_array(&mt, words, words[1] ? 2 : 1);
	pklw_str(&p, "random_rng_state");
	pklw_tuple(&p);
	pklw_int(&p, 3);
	pklw_tuple(&p);
	for (int i = 0; i < MT_N; i++)
		pklw_int(&p, mt.key[i]);
	pklw_int(&p, 624);
	pklw_end(&p);
	pklw_none(&p);
	pklw_end(&p);
	pklw_str(&p, "np_rng_state");
	np_state(&p, (uint32_t)ps);
	torch_rng(trng, (uint64_t)ps);
	cuda_rng(crng, (uint64_t)ps);
	cuda_rng(mrng, (uint64_t)(ps + 2718 + r));   /* mpu's model-parallel seed */
	int64_t nt = TORCH_RNG, nc = CUDA_RNG;
	pklw_str(&p, "torch_rng_state");
	tensor(w, &p, (struct job){J_MEM, PTD_U8, nt, 0, 0, 0, trng}, 1, &nt);
	pklw_str(&p, "cuda_rng_state");
	tensor(w, &p, (struct job){J_MEM, PTD_U8, nc, 0, 0, 0, crng}, 1, &nc);
	pklw_str(&p, "rng_tracker_states");
	pklw_dict(&p);
	pklw_str(&p, "model-parallel-rng");
	tensor(w, &p, (struct job){J_MEM, PTD_U8, nc, 0, 0, 0, mrng}, 1, &nc);
	pklw_end(&p);
	pklw_end(&p);
	char arch[64], name[80];
	snprintf(arch, sizeof arch, "mp_rank_%02d_model_states", w->s * tg->tp + w->r);
	snprintf(name, sizeof name, "%s.pt", arch);
	return write_file(w, name, arch, &p);
}

/* ---- the whole step ---- */

int mdsw_write(const struct sh_ckpt *in, const struct mdsw_target *tg, const char *dir,
	       struct progress *pg, char *err, size_t errlen)
{
	struct w w = {.in = in, .tg = tg, .pg = pg, .err = err, .errlen = errlen};
	char why[256];
	int rc = 0;
	if (in->m.type != LT_GPT)
		return errf(err, errlen, "%s: a %s: Megatron-DeepSpeed's pipeline checkpoint holds a "
			    "GPT or BLOOM (GPTModelPipe)", in->dir, in->m.type_name), EXIT_USAGE;
	if (in->m.post_ln == 1)
		return errf(err, errlen, "%s: the residual after the layer norm: Megatron-DeepSpeed's "
			    "GPTModelPipe adds it before", in->dir), EXIT_USAGE;
	if (lt_copy(&w.out, &in->m, tg->padded_vocab) < 0)
		return xalloc_err(err, errlen, "the target layout's copy of the model", 0), EXIT_FAILED;
	if (lt_check_tp(&w.out, tg->tp, why, sizeof why) < 0) {
		rc = (errf(err, errlen, "cannot write TP=%d: %s", tg->tp, why), EXIT_USAGE);
		goto out;
	}
	if (tg->pp > w.out.layers || tg->dp < 1) {
		rc = (errf(err, errlen, "cannot write PP=%d DP=%d: the model has %d layers", tg->pp,
			   tg->dp, w.out.layers), EXIT_USAGE);
		goto out;
	}
	struct run rn = {
		.mbs = flag_int(in, "--micro-batch-size", 1),
		.window = flag_int(in, "--loss-scale-window", 1000),
		.hyst = flag_int(in, "--hysteresis", 2),
		.min_scale = flag_num(in, "--min-loss-scale", 1.0),
		.clip = man_num(in, "optimizer", "clip_grad", 1.0),
		.loss_scale = flag_num(in, "--loss-scale", 0),
	};
	rn.static_scale = rn.loss_scale > 0;
	int64_t it = in->iteration > 0 ? in->iteration : 1;
	rn.gbs = flag_int(in, "--global-batch-size", man_int(in, NULL, "consumed_samples", 0) / it);
	if (rn.gbs < 1)
		rn.gbs = rn.mbs * tg->dp;
	double init = flag_num(in, "--initial-loss-scale", 4294967296.0);
	rn.initial_power = init > 1 ? (int64_t)lrint(log2(init)) : 0;
	snprintf(w.step, sizeof w.step, "global_step%lld", (long long)in->iteration);
	snprintf(w.dir, sizeof w.dir, "%.4000s/%s", dir, w.step);
	if (mkdir(w.dir, 0755) < 0) {
		rc = (errf(err, errlen, "%s: %s", w.dir, strerror(errno)), EXIT_FAILED);
		goto out;
	}
	size_t widest = RS_BLOCK;
	uint64_t total = 0;   /* the tensor bytes put_part writes: progress */
	for (int t = 0; t < w.out.n; t++) {
		int64_t lsh[2];
		lt_local_shape(&w.out.t[t], tg->tp, lsh);
		if ((size_t)lsh[1] > widest)
			widest = (size_t)lsh[1];
		/* the model weights once (2 bytes), masters and moments per stage that holds them */
		total += (uint64_t)tg->tp * lt_numel(lsh) * 2;
		for (int s = 0; s < tg->pp; s++)
			if (on_stage(&w, t, s))
				total += (uint64_t)tg->tp * lt_numel(lsh) * 12;
	}
	w.bufn = widest;
	w.buf = malloc(w.bufn * sizeof *w.buf);
	w.cbuf = malloc(w.bufn * sizeof(float));
	if (!w.buf || !w.cbuf) {
		rc = (xalloc_err(err, errlen, "the writer's buffers", 2 * w.bufn * sizeof(float)),
		      EXIT_FAILED);
		goto out;
	}
	progress_begin(pg, "writing", NULL, total);
	for (w.s = 0; w.s < tg->pp && !rc; w.s++) {
		if ((rc = make_groups(&w, w.s)))
			break;
		for (w.r = 0; w.r < tg->tp && !rc; w.r++) {
			rc = write_layers(&w, w.s);
			for (int d = 0; d < tg->dp && !rc; d++)
				rc = write_optim(&w, &rn, d);
			if (!rc)
				rc = write_model_states(&w, &rn);
		}
	}
	progress_end(pg);
	if (!rc) {   /* DeepSpeed writes the tag without a newline */
		char path[4200];
		snprintf(path, sizeof path, "%.4000s/latest", dir);
		if (file_write_atomic(path, w.step, strlen(w.step), 0644, err, errlen) < 0)
			rc = EXIT_FAILED;
	}
out:
	for (int gi = 0; gi < 3; gi++)
		free(w.grp[gi].p);
	free(w.jobs);
	free(w.buf);
	free(w.cbuf);
	lt_free(&w.out);
	return rc;
}
