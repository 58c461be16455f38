/* ckpt - see ckpt.h. */
#include "train/run/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "file.h"
#include "fsx.h"
#include "lock.h"
#include "msg.h"
#include "xalloc.h"
#include "ckpt/manifest.h"
#include "ckpt/mds.h"
#include "ckpt/save.h"
#include "ckpt/safetensors.h"
#include "ckpt/steplock.h"
#include "train/optim/bnb.h"
#include "train/optim/state.h"

#define SHARD "rank_tp%02d_pp%03d.safetensors"

/* The --save directory's lock (ckpt_save_lock), held by world rank 0 for the run's life. */
static struct lock save_lock = {.fd = -1};
static char save_locked[4096];

/* At exit: the holder's record cleared (the lock itself goes with the process anyway). */
static void save_unlock(void)
{
	lock_release(&save_lock);
}

int ckpt_save_lock(const char *dir, char *err, size_t errlen)
{
	char path[4200], why[4400];
	snprintf(path, sizeof path, "%s/" CKPT_SAVE_LOCK, dir);
	int rc = lock_take(&save_lock, path, LOCK_RECORD, 0, why, sizeof why);
	switch (rc) {
	case LOCK_OK:
		snprintf(save_locked, sizeof save_locked, "%s", dir);
		atexit(save_unlock);
		return CKPT_LOCK_HELD;
	case LOCK_BUSY:
		errf(err, errlen, "--save %s is in use by another run (%s): it holds %s; one run saves "
		     "into a directory at a time (wait for it to end, or give this run another --save)",
		     dir, save_lock.holder, path);
		return CKPT_LOCK_TAKEN;
	case LOCK_NOFLOCK:
		errf(err, errlen, "--save %s: %s: a second run saving here is not detected, and only "
		     "temporaries of this host's dead processes are cleaned up", dir, why);
		return CKPT_LOCK_NONE;
	case LOCK_UNSAFE:
		errf(err, errlen, "--save %s", why);
		return CKPT_LOCK_TAKEN;
	}
	errf(err, errlen, "--save %s: cannot take its lock: %s", dir, why);
	return CKPT_LOCK_ERROR;
}

static json_t *sched_json(const struct sched *s)
{
	return json_pack("{s:f,s:f,s:I,s:I,s:s,s:b,s:I,s:I,s:I}", "max_lr", s->max_lr, "min_lr",
			 s->min_lr, "warmup", (json_int_t)s->warmup, "decay", (json_int_t)s->decay,
			 "style", sched_style_name(s->style), "by_tokens", s->by_tokens, "num_steps",
			 (json_int_t)s->num_steps, "num_tokens", (json_int_t)s->num_tokens,
			 "warmup_tokens", (json_int_t)s->warmup_tokens);
}

static json_t *model_json(const struct model_config *c)
{
	json_t *j = json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:s,s:b,s:f,s:f,s:f,s:f,s:I}",
			 "num_layers", c->layers, "hidden_size", c->hidden, "num_attention_heads",
			 c->heads, "ffn_hidden_size", c->ffn, "seq_length", c->seq,
			 "max_position_embeddings", c->max_pos, "vocab_size", c->vocab,
			 "padded_vocab_size", c->padded_vocab, "position_embedding_type",
			 c->alibi ? "alibi" : "learned", "embed_layernorm", c->embed_ln,
			 "layernorm_epsilon", (double)c->eps, "init_method_std", (double)c->init_std,
			 "hidden_dropout", (double)c->hidden_dropout, "attention_dropout",
			 (double)c->attention_dropout, "seed", (json_int_t)c->seed);
	/* what an export needs to know of the block (ckpt-merge-tp --format hf) */
	json_object_set_new(j, "apply_residual_connection_post_layernorm",
			    json_boolean(c->post_ln_residual));
	if (c->arch == MODEL_BERT) {   /* absent: a GPT */
		json_object_set_new(j, "model_type", json_string("bert"));
		json_object_set_new(j, "num_tokentypes", json_integer(c->num_tokentypes));
		json_object_set_new(j, "binary_head", json_boolean(c->binary_head));
		json_object_set_new(j, "openai_gelu", json_boolean(c->head_gelu_tanh));
	}
	if (c->arch == MODEL_T5) {   /* seq_length is the encoder's, as Megatron's args.seq_length */
		json_object_set_new(j, "model_type", json_string("t5"));
		json_object_set_new(j, "decoder_seq_length", json_integer(c->dec_seq));
	}
	return j;
}

/* ---- the optimizer state on the host ----
 *
 * A checkpoint holds a (TP, PP) position's whole optimizer state whatever the ZeRO-1 sharding, in
 * the layout one rank without ZeRO-1 has (optim_state_layout over [0, nparams)): the "image".
 * Each DP rank packs its own state (fp32 moments, then absmax, then codes), the packs are
 * gathered, and each is unpacked into the image by its rank's layout.  ZeRO-1 chunks start on
 * block boundaries under bnb (model_zero_chunk), so a rank's blocks are whole blocks of the
 * image. */
struct ostate_img {
	struct model_ostate *ost;
	size_t n32, n8, nblk;
	float *m32, *v32, *a1, *a2;
	uint8_t *q1, *q2;
};

static size_t pack_bytes(size_t n32, size_t n8, size_t nblk)
{
	return (2 * n32 + 2 * nblk) * sizeof(float) + 2 * n8;
}

/* Carves m32, v32, a1, a2, q1, q2 out of buf (pack order). */
static void carve_state(char *buf, size_t n32, size_t n8, size_t nblk, float **m32, float **v32,
			float **a1, float **a2, uint8_t **q1, uint8_t **q2)
{
	*m32 = (float *)buf;
	*v32 = *m32 + n32;
	*a1 = *v32 + n32;
	*a2 = *a1 + nblk;
	*q1 = (uint8_t *)(*a2 + nblk);
	*q2 = *q1 + n8;
}

static int img_alloc(const struct model *m, struct ostate_img *g)
{
	memset(g, 0, sizeof *g);
	g->ost = calloc(m->ntensors ? m->ntensors : 1, sizeof *g->ost);
	if (!g->ost)
		return -1;
	optim_state_layout(m, -1, g->ost, &g->n32, &g->n8, &g->nblk);
	char *buf = malloc(pack_bytes(g->n32, g->n8, g->nblk) + 1);
	if (!buf) {
		free(g->ost);
		return -1;
	}
	carve_state(buf, g->n32, g->n8, g->nblk, &g->m32, &g->v32, &g->a1, &g->a2, &g->q1, &g->q2);
	return 0;
}

static void img_free(struct ostate_img *g)
{
	free(g->m32);
	free(g->ost);
}

/* This rank's state, device -> buf in pack order. */
static void pack_own(const struct model *m, size_t n32, size_t n8, size_t nblk, char *buf)
{
	float *m32, *v32, *a1, *a2;
	uint8_t *q1, *q2;
	carve_state(buf, n32, n8, nblk, &m32, &v32, &a1, &a2, &q1, &q2);
	const struct ops *o = m->ops;
	o->to_host(m32, m->adam_m, n32 * sizeof *m32);
	o->to_host(v32, m->adam_v, n32 * sizeof *v32);
	if (m->cfg.bnb) {
		o->to_host(a1, m->absmax1, nblk * sizeof *a1);
		o->to_host(a2, m->absmax2, nblk * sizeof *a2);
		o->to_host(q1, m->q1, n8);
		o->to_host(q2, m->q2, n8);
	}
}

/* A pack made with layout ost -> the image. */
static void img_unpack(const struct model *m, struct ostate_img *g, const struct model_ostate *ost,
		       size_t n32, size_t n8, size_t nblk, char *buf)
{
	float *m32, *v32, *a1, *a2;
	uint8_t *q1, *q2;
	carve_state(buf, n32, n8, nblk, &m32, &v32, &a1, &a2, &q1, &q2);
	for (int i = 0; i < m->ntensors; i++) {
		const struct model_ostate *r = &ost[i], *f = &g->ost[i];
		size_t n = r->hi - r->lo, e = r->lo - m->tensors[i].offset;
		if (!n)
			continue;
		if (r->q8) {
			memcpy(g->q1 + f->s + e, q1 + r->s, n);
			memcpy(g->q2 + f->s + e, q2 + r->s, n);
			memcpy(g->a1 + f->blk + e / BNB_BLOCK, a1 + r->blk, bnb_blocks(n) * sizeof *a1);
			memcpy(g->a2 + f->blk + e / BNB_BLOCK, a2 + r->blk, bnb_blocks(n) * sizeof *a2);
		} else {
			memcpy(g->m32 + f->s + e, m32 + r->s, n * sizeof *m32);
			memcpy(g->v32 + f->s + e, v32 + r->s, n * sizeof *v32);
		}
	}
}

/* The image of the whole (TP, PP) position, gathered over DP under ZeRO-1 (collective). */
static int img_gather(const struct model *m, struct dist *d, struct ostate_img *g)
{
	int n = m->cfg.zero_dp > 1 ? m->cfg.zero_dp : 1;
	size_t most = 0, c[3];
	struct model_ostate *ost = calloc(m->ntensors ? m->ntensors : 1, sizeof *ost);
	if (!ost || img_alloc(m, g) < 0) {
		free(ost);
		return -1;
	}
	for (int r = 0; r < n; r++) {
		optim_state_layout(m, n > 1 ? r : -1, NULL, &c[0], &c[1], &c[2]);
		size_t b = pack_bytes(c[0], c[1], c[2]);
		most = b > most ? b : most;
	}
	char *all = calloc(n, most + 1), *own = calloc(1, most + 1);
	if (!all || !own) {
		free(all);
		free(own);
		free(ost);
		img_free(g);
		return -1;
	}
	optim_state_layout(m, n > 1 ? m->cfg.zero_rank : -1, NULL, &c[0], &c[1], &c[2]);
	pack_own(m, c[0], c[1], c[2], own);
	if (n > 1)
		d->allgather(d, DIST_DP, own, most + 1, all);
	else
		memcpy(all, own, most + 1);
	for (int r = 0; r < n; r++) {
		optim_state_layout(m, n > 1 ? r : -1, ost, &c[0], &c[1], &c[2]);
		img_unpack(m, g, ost, c[0], c[1], c[2], all + (size_t)r * (most + 1));
	}
	free(all);
	free(own);
	free(ost);
	return 0;
}

/* ---- the shard's tensors ----
 * For every tensor its fp32 master weights; then its first and second moments: "exp_avg.NAME" /
 * "exp_avg_sq.NAME", fp32 (AdamW; bnb's fp32-state tensors) or uint8 codes of the tensor's shape
 * (bnb's 8-bit tensors) with "exp_avg_absmax.NAME" / "exp_avg_sq_absmax.NAME" (fp32, one per
 * block); under bnb also the two maps that decode the codes ("bnb.qmap_exp_avg",
 * "bnb.qmap_exp_avg_sq", fp32 [256]).  One list, used to write and to verify. */
struct entry {
	char name[128];
	enum st_dtype dtype;
	int ndim;
	int64_t shape[2];
	size_t bytes;
	int tensor;            /* the model tensor (-1: a map) */
	const void *data;      /* host data of state entries (NULL when verifying) */
	int kind;              /* 0 master, 1/2 moment, 3/4 absmax, 5/6 map */
};

static float qmaps[512];

static int shard_entries(const struct model *m, const struct ostate_img *g, struct entry **out)
{
	int n = 0, cap = 5 * m->ntensors + 2;
	struct entry *e = calloc(cap, sizeof *e);
	struct model_ostate *ost = g ? g->ost : calloc(m->ntensors ? m->ntensors : 1, sizeof *ost);
	size_t c[3];
	if (!e || !ost) {
		free(e);
		if (!g)
			free(ost);
		return -1;
	}
	if (!g)
		optim_state_layout(m, -1, ost, &c[0], &c[1], &c[2]);
	bnb_dynamic_map(1, qmaps);
	bnb_dynamic_map(0, qmaps + 256);
	static const char *prefix[5] = {"", "exp_avg.", "exp_avg_sq.", "exp_avg_absmax.",
					"exp_avg_sq_absmax."};
	for (int k = 0; k < 5; k++)
		for (int i = 0; i < m->ntensors; i++) {
			const struct model_tensor *t = &m->tensors[i];
			const struct model_ostate *f = &ost[i];
			if (k >= 3 && !f->q8)
				continue;
			struct entry *x = &e[n++];
			snprintf(x->name, sizeof x->name, "%s%s", prefix[k], t->name);
			x->kind = k;
			x->tensor = i;
			x->ndim = t->ndim;
			x->shape[0] = t->shape[0];
			x->shape[1] = t->shape[1];
			/* the rank's own shard of a split tensor */
			if (t->split == SPLIT_COLUMN || t->split == SPLIT_VOCAB)
				x->shape[0] /= m->cfg.tp;
			else if (t->split == SPLIT_ROW)
				x->shape[1] /= m->cfg.tp;
			x->dtype = k > 0 && k < 3 && f->q8 ? ST_U8 : ST_F32;
			x->bytes = t->numel * (x->dtype == ST_U8 ? 1 : sizeof(float));
			if (k >= 3) {
				x->ndim = 1;
				x->shape[0] = (int64_t)bnb_blocks(t->numel);
				x->bytes = bnb_blocks(t->numel) * sizeof(float);
			}
			if (g && k == 1)
				x->data = f->q8 ? (const void *)(g->q1 + f->s) : (const void *)(g->m32 + f->s);
			else if (g && k == 2)
				x->data = f->q8 ? (const void *)(g->q2 + f->s) : (const void *)(g->v32 + f->s);
			else if (g && k == 3)
				x->data = g->a1 + f->blk;
			else if (g && k == 4)
				x->data = g->a2 + f->blk;
		}
	for (int k = 0; m->cfg.bnb && k < 2; k++) {
		struct entry *x = &e[n++];
		snprintf(x->name, sizeof x->name, "bnb.qmap_%s", k ? "exp_avg_sq" : "exp_avg");
		x->kind = 5 + k;
		x->tensor = -1;
		x->dtype = ST_F32;
		x->ndim = 1;
		x->shape[0] = 256;
		x->bytes = 256 * sizeof(float);
		x->data = qmaps + 256 * k;
	}
	if (!g)
		free(ost);
	*out = e;
	return n;
}

/* The optimizer-state kind a checkpoint names (manifest "optimizer.kind", shard metadata
 * "optimizer"): LAMB and SGD keep their state in AdamW's two fp32 buffers (SGD's momentum in
 * exp_avg, exp_avg_sq zero), so three kinds share one shard layout; 8-bit Adam has its own. */
static const char *opt_kind(const struct model *m, const struct optim *o)
{
	return m->cfg.bnb ? "bnb-adam8bit" : o->kind == OPT_LAMB ? "lamb" : o->kind == OPT_SGD ? "sgd"
												    : "adamw";
}

/* the flag that trains with a kind */
static const char *opt_kind_flag(const char *kind)
{
	return !strcmp(kind, "bnb-adam8bit") ? "--use-bnb-optimizer" : !strcmp(kind, "lamb")
		? "--optimizer lamb" : !strcmp(kind, "sgd") ? "--optimizer sgd" : "--optimizer adam";
}

static int write_shard(const char *path, const struct model *m, const char *kind,
		       const struct ostate_img *g,
		       int64_t iteration, uint32_t *crc, uint64_t *bytes, char *err, size_t errlen)
{
	size_t most = 0;
	struct entry *e;
	int n = shard_entries(m, g, &e);
	if (n < 0)
		return xalloc_err_in(err, errlen, path, "the list of tensors to save", 0);
	struct st_writer *w = st_create(path, err, errlen);
	if (!w) {
		free(e);
		return -1;
	}
	for (int k = 0; k < n; k++) {
		st_declare(w, e[k].name, e[k].dtype, e[k].ndim, e[k].shape);
		most = e[k].bytes > most ? e[k].bytes : most;
	}
	save_shard_metadata(w, iteration, kind);
	float *buf = malloc(most ? most : 1);
	if (!buf) {
		st_abort(w);
		free(e);
		return xalloc_err_in(err, errlen, path, "the fp32 staging copy of the largest tensor",
				     most ? most : 1);
	}
	*crc = 0;
	*bytes = 0;
	for (int k = 0; k < n; k++) {
		const void *data = e[k].data;
		if (e[k].kind == 0) {
			model_get(m, m->master, e[k].tensor, buf);
			data = buf;
		}
		*crc = crc32c_update(*crc, data, e[k].bytes);
		*bytes += e[k].bytes;
		if (st_write(w, data, e[k].bytes) < 0)
			break;
	}
	free(buf);
	free(e);
	if (st_commit(w) < 0) {
		errf(err, errlen, "%s", st_werror(w));
		st_abort(w);
		return -1;
	}
	return 0;
}

static json_t *valid_json(const struct ckpt_state *st)
{
	json_t *a = json_array();
	for (int i = 0; i < st->nvalid && i < 64; i++)
		json_array_append_new(a, json_integer(st->valid_position[i]));
	return a;
}

struct shard_info {            /* what each rank reports after writing its shard */
	uint64_t bytes;
	uint32_t crc;
	int32_t ok, writer, tp, pp;
};

/* The steps this process has published: a save replaces an existing step directory only when
 * it is one of these (a rollback re-running its iterations); any other is another run's, or an
 * earlier numbering's, and is never saved over (ckpt_check_ahead() refuses such a run before its
 * first step). */
static int64_t *written;
static size_t nwritten, capwritten;

static int was_written(int64_t it)
{
	for (size_t i = 0; i < nwritten; i++)
		if (written[i] == it)
			return 1;
	return 0;
}

static void note_written(int64_t it)
{
	if (was_written(it))
		return;
	if (nwritten == capwritten) {
		size_t cap = capwritten ? 2 * capwritten : 64;
		int64_t *w = realloc(written, cap * sizeof *w);
		if (!w)
			return;   /* only makes a later re-save of this step refuse: never loses data */
		written = w;
		capwritten = cap;
	}
	written[nwritten++] = it;
}

int ckpt_check_ahead(const char *dir, int64_t from, int64_t last, char *err, size_t errlen)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int64_t first = -1;
	if (!d)
		return errno == ENOENT ? 0 : errf(err, errlen, "--save %s: %s", dir, strerror(errno));
	while ((e = readdir(d))) {
		char *end;
		if (strncmp(e->d_name, "global_step", 11) != 0 || e->d_name[11] < '0' ||
		    e->d_name[11] > '9')
			continue;
		long long n = strtoll(e->d_name + 11, &end, 10);
		if (*end || n <= from || n > last || was_written(n))
			continue;
		if (first < 0 || n < first)
			first = n;
	}
	closedir(d);
	if (first < 0)
		return 0;
	return errf(err, errlen, "--save %s: global_step%lld is there, past iteration %lld where this "
		    "run starts, so the run would save over it; a run never replaces a checkpoint it "
		    "did not write. Move %s/global_step%lld aside (or give another --save), or --load "
		    "it if it is the one to resume", dir, (long long)first, (long long)from, dir,
		    (long long)first);
}

int ckpt_finish_publish(const char *dir, char *msg, size_t msglen, char *err, size_t errlen)
{
	return save_finish_publish(dir, msg, msglen, err, errlen);
}

/* World rank 0's half of a save: the manifest over every shard, then the publish. */
static int publish(const char *dir, const char *name, const char *tmp, const struct model *m,
		   const struct ckpt_state *st, const struct shard_info *info, int world,
		   const char *args, char *err, size_t errlen)
{
	char final[4096];
	json_t *files = json_object();
	for (int r = 0; r < world; r++)
		if (info[r].writer) {
			char shard[64];
			snprintf(shard, sizeof shard, SHARD, info[r].tp, info[r].pp);
			save_files_add(files, shard, info[r].bytes, info[r].crc);
		}
	const struct optim *o = &st->optim;
	json_t *man = json_pack(
		"{s:s,s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:o,s:o,"
		"s:{s:s,s:i,s:f,s:i,s:i,s:f,s:f,s:f,s:f,s:f},"
		"s:{s:f,s:I},s:{s:I,s:s},s:{s:i,s:i,s:i},s:o,s:o,s:s}",
		"format", "lmtk-checkpoint", "version", 1,
		"iteration", (json_int_t)st->iteration,
		"consumed_samples", (json_int_t)st->consumed_samples,
		"consumed_tokens", (json_int_t)st->consumed_tokens,
		"data_position", (json_int_t)st->data_position,
		"skipped_iterations", (json_int_t)st->skipped_total,
		"nan_iterations", (json_int_t)st->nan_total,
		"loss_spikes", (json_int_t)st->spikes_total,
		"skip_ranges_done_through", (json_int_t)st->skip_through,
		"valid_positions", valid_json(st),
		"scheduler", sched_json(&st->sched),
		"optimizer", "kind", opt_kind(m, o), "step", o->step, "loss_scale", (double)o->loss_scale, "good_steps",
		o->good_steps, "hysteresis_left", o->hysteresis_left, "beta1", (double)o->b1, "beta2",
		(double)o->b2, "eps", (double)o->eps, "weight_decay", (double)o->wd, "clip_grad",
		(double)o->clip,
		"loss_tracker", "mean", st->loss_mean, "count", (json_int_t)st->loss_count,
		"rng", "seed", (json_int_t)m->cfg.seed, "generator",
		"philox4x32-10, counter-based: keyed by the seed, the data position and each element's sample, head and position",
		"layout", "tp", st->tp, "pp", st->pp, "dp", st->dp,
		"model", model_json(&m->cfg),
		"files", files,
		"args", args ? args : "");
	/* the tokenizer files by path, size and hash: what an export may copy (never "args") */
	json_t *tok = st->tokenizer ? json_loads(st->tokenizer, 0, NULL) : NULL;
	if (man && tok)
		json_object_set_new(man, "tokenizer", tok);
	else
		json_decref(tok);
	if (!man)
		return xalloc_err(err, errlen, "the checkpoint manifest", 0);
	int rc = save_manifest(tmp, man, err, errlen);
	json_decref(man);
	if (rc < 0)
		return -1;
	/* publish: an existing step directory of the same number (a re-save) is replaced only when
	 * this run wrote it */
	snprintf(final, sizeof final, "%s/%s", dir, name);
	struct stat sb;
	if (lstat(final, &sb) == 0 && !was_written(st->iteration))
		return errf(err, errlen, "%s is there and this run did not write it: a run never "
			    "replaces a checkpoint it did not write (move it aside)", final);
	if (save_publish(dir, tmp, st->iteration, err, errlen) < 0)
		return -1;
	note_written(st->iteration);
	return 0;
}

int ckpt_save(const char *dir, const struct model *m, struct dist *d,
	      const struct ckpt_state *st, const char *args, const struct keep *keep,
	      struct keep_report *pruned, char *err, size_t errlen)
{
	char name[64], tmp[4000], path[4200];
	char owner[96];
	int world = d->world, rc = 0;
	struct shard_info me = {0}, *info = calloc(world, sizeof *info);
	if (pruned)
		memset(pruned, 0, sizeof *pruned);
	if (!info)
		return xalloc_err(err, errlen, "every rank's shard report", (size_t)world * sizeof *info);
	/* one temporary directory for all ranks, named after world rank 0's pid and host, so that
	 * a later run can tell a leftover from another run's save in progress (save_clean) */
	save_owner(owner, sizeof owner);
	d->bcast(d, DIST_WORLD, owner, sizeof owner, 0);
	snprintf(name, sizeof name, "global_step%lld", (long long)st->iteration);
	snprintf(tmp, sizeof tmp, "%s/.%s.tmp.%s", dir, name, owner);
	if (d->rank == 0) {
		if (mkdir(dir, 0755) < 0 && errno != EEXIST)
			rc = errf(err, errlen, "--save %s: %s", dir, strerror(errno));
		else {
			/* holding the --save lock, no other run saves here: every temporary is a leftover */
			save_clean(dir, save_lock.fd >= 0 && strcmp(save_locked, dir) == 0);
			rc = save_step_begin(tmp, err, errlen);
		}
	}
	d->barrier(d);
	/* DP rank 0 of each (TP, PP) position writes its shard: DP replicas hold the same bits */
	me.writer = d->dp_rank == 0;
	me.tp = m->cfg.tp_rank;
	me.pp = m->cfg.pp_rank;
	me.ok = 1;
	/* the optimizer state in full: with ZeRO-1 each DP rank holds a shard, gathered for the
	 * save so the checkpoint is the same whatever the sharding (and loads with or without it) */
	struct ostate_img img;
	if (img_gather(m, d, &img) < 0) {
		free(info);
		return xalloc_err(err, errlen, "the optimizer state gathered for the save", 0);
	}
	if (me.writer) {
		char shard[64];
		snprintf(shard, sizeof shard, SHARD, me.tp, me.pp);
		snprintf(path, sizeof path, "%s/%s", tmp, shard);
		if (access(tmp, F_OK) != 0 && !rc)
			rc = errf(err, errlen, "%s: %s", tmp, strerror(errno));
		else if (!rc && write_shard(path, m, opt_kind(m, &st->optim), &img, st->iteration, &me.crc, &me.bytes, err,
					    errlen) < 0)
			rc = -1;
		me.ok = rc == 0;
	}
	img_free(&img);
	d->allgather(d, DIST_WORLD, &me, sizeof me, info);
	int all_ok = 1;
	for (int r = 0; r < world; r++)
		all_ok &= info[r].ok;
	int status[2] = {0, 0}, *st_all = calloc(world, sizeof status);
	if (d->rank == 0) {
		if (!all_ok) {
			if (!rc)
				errf(err, errlen, "another rank failed to write its shard of %s", name);
			rc = -1;
		} else if (!rc) {
			rc = publish(dir, name, tmp, m, st, info, world, args, err, errlen);
			/* `latest` names the new step: the older ones beyond the policy can go */
			struct keep none = {0, 0};
			struct keep_report r;
			if (!rc)
				keep_prune(dir, keep ? keep : &none, st->iteration, pruned ? pruned : &r);
		}
		if (rc)
			fsx_rm_tree(tmp);
		status[0] = rc;
	}
	d->allgather(d, DIST_WORLD, status, sizeof status, st_all);
	if (st_all && st_all[0] && !rc)
		rc = errf(err, errlen, "rank 0 could not publish %s", name);
	free(st_all);
	free(info);
	return rc ? -1 : 0;
}

/* ---- load ---- */

static int jint(json_t *o, const char *k, int64_t *v)
{
	json_t *x = json_object_get(o, k);
	if (!json_is_integer(x))
		return -1;
	*v = json_integer_value(x);
	return 0;
}

static int jreal(json_t *o, const char *k, double *v)
{
	json_t *x = json_object_get(o, k);
	if (!json_is_number(x))
		return -1;
	*v = json_number_value(x);
	return 0;
}

/* A step's manifest (path: for messages): counters, schedule and the optimizer's scalars into
 * st, the model checked against the run's, and whether the optimizer state is of another kind
 * (*other_kind; *bnb_state when not NULL: whether it is 8-bit Adam's).  layout: the step's
 * TP x PP and padded vocabulary must be the run's (an lmtk step); 0: it is re-split as it is read (a Megatron-DeepSpeed checkpoint, mds.h).  0, or -1 + err. */
static int load_manifest(json_t *man, const char *path, struct model *m, struct ckpt_state *st,
			 int layout, int *other_kind, int *bnb_state, char *err, size_t errlen)
{
	int64_t v[10] = {0};
	json_t *sc = json_object_get(man, "scheduler"), *op = json_object_get(man, "optimizer"),
	       *lay = json_object_get(man, "layout"), *lt = json_object_get(man, "loss_tracker");
	const char *style = json_string_value(json_object_get(sc, "style"));
	double d[8];
	int64_t tp = 1, pp = 1;
	if (manifest_check(man, path, err, errlen) < 0)   /* every counter in its range first */
		return -1;
	if (jint(man, "iteration", &st->iteration) || jint(man, "consumed_samples", &st->consumed_samples) ||
	    jint(man, "consumed_tokens", &st->consumed_tokens) ||
	    jint(man, "data_position", &st->data_position) ||
	    jint(man, "skipped_iterations", &st->skipped_total) ||
	    jint(man, "nan_iterations", &st->nan_total) || jint(man, "loss_spikes", &st->spikes_total) ||
	    jreal(sc, "max_lr", &st->sched.max_lr) || jreal(sc, "min_lr", &st->sched.min_lr) ||
	    jint(sc, "warmup", &st->sched.warmup) || jint(sc, "decay", &st->sched.decay) ||
	    !style || sched_style_parse(style, &st->sched.style) ||
	    jint(sc, "num_steps", &st->sched.num_steps) || jint(sc, "num_tokens", &st->sched.num_tokens) ||
	    jint(op, "step", &v[0]) || jreal(op, "loss_scale", &d[0]) || jint(op, "good_steps", &v[1]) ||
	    jint(op, "hysteresis_left", &v[2]) || jreal(lt, "mean", &st->loss_mean) ||
	    jint(lt, "count", &st->loss_count) || jint(lay, "tp", &tp) || jint(lay, "pp", &pp))
		return errf(err, errlen, "%s: a field is missing or has the wrong type", path);
	st->sched.by_tokens = json_is_true(json_object_get(sc, "by_tokens"));
	st->sched.warmup_tokens = 0;
	jint(sc, "warmup_tokens", &st->sched.warmup_tokens);   /* absent in older manifests */
	st->skip_through = 0;
	jint(man, "skip_ranges_done_through", &st->skip_through);   /* absent in older manifests */
	json_t *vp = json_object_get(man, "valid_positions");
	st->nvalid = 0;
	memset(st->valid_position, 0, sizeof st->valid_position);
	for (size_t i = 0; json_is_array(vp) && i < json_array_size(vp) && i < 64; i++)
		st->valid_position[st->nvalid++] = json_integer_value(json_array_get(vp, i));
	json_t *rng = json_object_get(man, "rng");
	st->seed = -1;
	jint(rng, "seed", &st->seed);
	/* the model: every shape-defining field must be the flags' */
	json_t *mo = json_object_get(man, "model");
	const struct model_config *c = &m->cfg;
	const char *pe = json_string_value(json_object_get(mo, "position_embedding_type"));
	struct { const char *key, *flag; int64_t want; } mf[] = {
		{"num_layers", "--num-layers", c->layers}, {"hidden_size", "--hidden-size", c->hidden},
		{"num_attention_heads", "--num-attention-heads", c->heads},
		{"ffn_hidden_size", "--ffn-hidden-size", c->ffn},
		{"max_position_embeddings", "--max-position-embeddings", c->max_pos},
		{"vocab_size", "the vocabulary", c->vocab}, {"padded_vocab_size", "the padded vocabulary", c->padded_vocab},
	};
	for (size_t i = 0; i < sizeof mf / sizeof *mf; i++) {
		int64_t got = -1;
		if (!layout && strcmp(mf[i].key, "padded_vocab_size") == 0)
			continue;   /* re-split: padding rows come and go */
		if (jint(mo, mf[i].key, &got) || got != mf[i].want)
			return errf(err, errlen, "%s: %s is %lld in the checkpoint, %lld in this run: it is "
				    "another model", path, mf[i].flag, (long long)got, (long long)mf[i].want);
	}
	const char *mt = json_string_value(json_object_get(mo, "model_type"));
	int bert = mt && strcmp(mt, "bert") == 0, t5 = mt && strcmp(mt, "t5") == 0;
	if (t5 != (c->arch == MODEL_T5))
		return errf(err, errlen, "%s: the checkpoint's model is %s, this run's %s: it is "
			    "another model", path, t5 ? "a T5" : bert ? "a BERT" : "a GPT",
			    c->arch == MODEL_T5 ? "a T5" : c->arch == MODEL_BERT ? "a BERT" : "a GPT");
	int64_t types = 0;
	jint(mo, "num_tokentypes", &types);
	int bin = json_is_true(json_object_get(mo, "binary_head"));
	if (bert != (c->arch == MODEL_BERT) ||
	    (bert && (types != c->num_tokentypes || bin != !!c->binary_head))) {
		char was[96], is[96];
		snprintf(was, sizeof was, bert ? "a BERT %s the binary head, %lld token types" : "a GPT",
			 bin ? "with" : "without", (long long)types);
		snprintf(is, sizeof is, c->arch == MODEL_BERT ? "a BERT %s the binary head, %d token "
			 "types" : "a GPT", c->binary_head ? "with" : "without", c->num_tokentypes);
		return errf(err, errlen, "%s: the checkpoint's model is %s, this run's %s: it is "
			    "another model", path, was, is);
	}
	if (!pe || strcmp(pe, c->alibi ? "alibi" : "learned") != 0 ||
	    json_is_true(json_object_get(mo, "embed_layernorm")) != !!c->embed_ln)
		return errf(err, errlen, "%s: --position-embedding-type or --embed-layernorm differs from "
			    "the checkpoint's model", path);
	st->optim.step = v[0];
	st->optim.loss_scale = d[0];
	st->optim.good_steps = v[1];
	st->optim.hysteresis_left = v[2];
	st->tp = layout ? tp : m->cfg.tp;
	st->pp = layout ? pp : m->cfg.pp;
	if (layout && (tp != m->cfg.tp || pp != m->cfg.pp))
		return errf(err, errlen, "%s: saved with TP=%lld PP=%lld, this run is TP=%d PP=%d; "
			    "re-shard it with ckpt-merge-tp --target-tp/--target-pp", path, (long long)tp,
			    (long long)pp, m->cfg.tp, m->cfg.pp);
	/* the optimizer kind: absent in manifests from before --use-bnb-optimizer (AdamW) */
	const char *kind = json_string_value(json_object_get(op, "kind")), *want = opt_kind(m, &st->optim);
	if (!kind)
		kind = "adamw";
	int saved_bnb = strcmp(kind, "bnb-adam8bit") == 0;
	int known = saved_bnb || !strcmp(kind, "adamw") || !strcmp(kind, "lamb") || !strcmp(kind, "sgd");
	int other = strcmp(kind, want) != 0;
	if (other && (!st->weights_only || !known)) {
		errf(err, errlen, "%s: the optimizer state is %s, this run's optimizer is %s: resume it "
		     "with %s (the states do not convert; --finetune or --no-load-optim take the "
		     "weights only)", path,
		     !strcmp(kind, "adamw") ? "AdamW's (fp32 moments)" : saved_bnb
		     ? "bitsandbytes' 8-bit Adam's (--use-bnb-optimizer)" : !strcmp(kind, "lamb")
		     ? "LAMB's (--optimizer lamb)" : !strcmp(kind, "sgd") ? "SGD's (--optimizer sgd)" : kind,
		     want, known ? opt_kind_flag(kind) : "the program that wrote it");
		return -1;
	}
	*other_kind = other;
	if (bnb_state)
		*bnb_state = saved_bnb;
	return 0;
}

/* Loads one step directory.  0, or -1 + err saying what is wrong with it. */
static int load_step(const char *sdir, struct model *m, struct ckpt_state *st, char *err,
		     size_t errlen)
{
	char path[4200], shard[128];
	json_error_t je;
	int other, saved_bnb;
	snprintf(path, sizeof path, "%s/manifest.json", sdir);
	json_t *man = json_load_file(path, 0, &je);
	if (!man)
		return errf(err, errlen, "%s: %s", path, access(path, F_OK) ? "missing" : je.text);
	if (load_manifest(man, path, m, st, 1, &other, &saved_bnb, err, errlen) < 0) {
		json_decref(man);
		return -1;
	}
	/* the step's name is its iteration: a manifest that says otherwise would make the run save
	 * other steps' numbers (and a resumed run, over them) */
	const char *base = strrchr(sdir, '/');
	base = base ? base + 1 : sdir;
	char *end;
	long long named = strncmp(base, "global_step", 11) == 0 ? strtoll(base + 11, &end, 10) : -1;
	if (named >= 0 && !*end && named != st->iteration) {
		json_decref(man);
		return errf(err, errlen, "%s: \"iteration\" is %lld in a directory named %s: the "
			    "manifest is damaged or was edited; refusing to load it", path,
			    (long long)st->iteration, base);
	}
	snprintf(shard, sizeof shard, SHARD, m->cfg.tp_rank, m->cfg.pp_rank);
	json_t *fe = json_object_get(json_object_get(man, "files"), shard);
	int64_t want_bytes;
	const char *want_crc = json_string_value(json_object_get(fe, "crc32c"));
	if (!fe || jint(fe, "bytes", &want_bytes) || !want_crc) {
		json_decref(man);
		return errf(err, errlen, "%s: no entry for %s", path, shard);
	}
	char crcbuf[16];
	snprintf(crcbuf, sizeof crcbuf, "%s", want_crc);
	json_decref(man);

	snprintf(path, sizeof path, "%s/%s", sdir, shard);
	struct st_file *f = st_open(path, err, errlen);
	if (!f)
		return -1;
	/* the entries the checkpoint's optimizer kind has (another kind: weights only are loaded) */
	struct model as_saved = *m;
	as_saved.cfg.bnb = saved_bnb;
	struct entry *e;
	int n = shard_entries(&as_saved, NULL, &e);
	if (n < 0) {
		st_close(f);
		return xalloc_err_in(err, errlen, path, "the list of tensors to load", 0);
	}
	const struct st_tensor **found = calloc(n, sizeof *found);
	uint32_t crc = 0;
	uint64_t bytes = 0;
	char name[128];
	/* check everything before changing anything */
	for (int k = 0; found && k < n; k++) {
		const struct st_tensor *s = st_find(f, e[k].name);
		if (!s || s->dtype != e[k].dtype || s->nbytes != e[k].bytes || s->ndim != e[k].ndim ||
		    s->shape[0] != e[k].shape[0] || (e[k].ndim == 2 && s->shape[1] != e[k].shape[1])) {
			errf(err, errlen, "%s: tensor %s %s (the model needs %zu %s bytes: is this "
			     "checkpoint from another model or optimizer?)", path, e[k].name,
			     !s ? "is missing" : "has another shape or type", e[k].bytes,
			     st_dtype_name(e[k].dtype));
			goto bad;
		}
		if (e[k].kind >= 5 && memcmp(s->data, e[k].data, e[k].bytes) != 0) {
			errf(err, errlen, "%s: %s differs from this build's quantization map: the codes "
			     "would decode to other values", path, e[k].name);
			goto bad;
		}
		found[k] = s;
		crc = crc32c_update(crc, s->data, s->nbytes);
		bytes += s->nbytes;
	}
	if (!found) {
		xalloc_err_in(err, errlen, path, "the tensors found to load", (size_t)n * sizeof *found);
		goto bad;
	}
	snprintf(name, sizeof name, "%08x", crc);
	if ((int64_t)bytes != want_bytes || strcmp(name, crcbuf) != 0) {
		errf(err, errlen, "%s: checksum mismatch (CRC-32C %s, manifest says %s): the shard is "
		     "corrupt", path, name, crcbuf);
		goto bad;
	}
	for (int k = 0; k < n; k++) {
		const void *data = found[k]->data;
		if (e[k].kind == 0) {
			model_put(m, m->master, e[k].tensor, data);
			continue;
		}
		if (e[k].kind >= 5 || other)
			continue;
		/* the state: only what this rank's optimizer shard holds */
		int i = e[k].tensor;
		const struct model_ostate *os = &m->ost[i];
		size_t cnt = os->hi - os->lo, off = os->lo - m->tensors[i].offset;
		if (!cnt)
			continue;
		const struct ops *o = m->ops;
		switch (e[k].kind) {
		case 1:
		case 2:
			if (os->q8)
				o->to_device((e[k].kind == 1 ? m->q1 : m->q2) + os->s,
					     (const uint8_t *)data + off, cnt);
			else
				o->to_device((e[k].kind == 1 ? m->adam_m : m->adam_v) + os->s,
					     (const float *)data + off, cnt * sizeof(float));
			break;
		case 3:
		case 4:
			o->to_device((e[k].kind == 3 ? m->absmax1 : m->absmax2) + os->blk,
				     (const float *)data + off / BNB_BLOCK, bnb_blocks(cnt) * sizeof(float));
			break;
		}
	}
	free(found);
	free(e);
	st_close(f);
	return 0;
bad:
	free(found);
	free(e);
	st_close(f);
	return -1;
}

/* load_step() holding the step's reader lock (steplock.h), so that a train --save-keep saving
 * into this directory meanwhile does not remove it.  -2 + err: the step is not there (any more:
 * pruned since `latest` or the listing named it). */
static int load_locked(const char *sdir, struct model *m, struct ckpt_state *st, char *err,
		       size_t errlen)
{
	int fd = steplock_shared(sdir, err, errlen);
	if (fd == STEPLOCK_GONE)
		return errf(err, errlen, "%s: no such directory", sdir), -2;
	if (fd == STEPLOCK_ERROR)
		return -1;
	int rc = load_step(sdir, m, st, err, errlen);
	steplock_release(fd);
	return rc;
}

static int by_step_desc(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

/* A Megatron-DeepSpeed checkpoint (mds.h): the manifest mds.c writes for it, and this rank's
 * part of every tensor cut from it in the run's layout as it is read (as ckpt-merge-tp would
 * re-split it, without writing it).  1 loaded, -1 + err. */
static int load_mds(const char *dir, struct model *m, struct ckpt_state *st, char *loaded,
		    size_t loadedlen, char *err, size_t errlen)
{
	struct mds *md = NULL;
	struct sh_ckpt in;
	struct entry *e = NULL;
	float *buf = NULL;
	size_t cap = 0;
	int rc = -1, other = 0, viewed = 0;
	if (mds_open(&md, dir, err, errlen))
		return -1;
	if (!md->has_optimizer && !st->weights_only) {
		errf(err, errlen, "--load %s: a Megatron-DeepSpeed checkpoint without optimizer state "
		     "lmtk reads (%s): --no-load-optim or --finetune take its weights with a fresh "
		     "optimizer", md->dir, md->left_out);
		goto out;
	}
	int state = !st->weights_only;
	int bufs[LT_GROUPS] = {md->has_optimizer ? MDS_MASTER : MDS_BF16,
			       state ? MDS_EXP_AVG : MDS_ZERO, state ? MDS_EXP_AVG_SQ : MDS_ZERO};
	if (mds_view(&in, md, bufs, 1, err, errlen) < 0)
		goto out;
	viewed = 1;
	if (load_manifest(in.manifest, md->dir, m, st, 0, &other, NULL, err, errlen) < 0)
		goto out;
	int n = shard_entries(m, NULL, &e);
	if (n < 0) {
		xalloc_err_in(err, errlen, md->dir, "the list of tensors to load", 0);
		goto out;
	}
	/* the values: each tensor's part for this rank, in the run's TP, from the fp32 masters
	 * and moments wherever the source's layout put them */
	for (int k = 0; k < n; k++) {
		if (e[k].kind >= 3 || (e[k].kind > 0 && (other || !state)))
			continue;
		int i = e[k].tensor, g = e[k].kind;
		const struct model_tensor *mt = &m->tensors[i];
		const struct model_ostate *os = &m->ost[i];
		size_t cnt = os->hi - os->lo, off = os->lo - mt->offset;
		if (g > 0 && !cnt)
			continue;
		int t = lt_find(&in.m, mt->name);
		if (t < 0) {
			errf(err, errlen, "%s: no tensor %s", md->dir, mt->name);
			goto out;
		}
		int64_t rows = e[k].shape[0], cols = e[k].ndim == 2 ? e[k].shape[1] : 1, r0 = 0, c0 = 0;
		if (mt->split == SPLIT_COLUMN || mt->split == SPLIT_VOCAB)
			r0 = (int64_t)m->cfg.tp_rank * rows;
		else if (mt->split == SPLIT_ROW)
			c0 = (int64_t)m->cfg.tp_rank * cols;
		if ((size_t)(rows * cols) > cap) {
			float *nb = realloc(buf, (size_t)(rows * cols) * sizeof *buf);
			if (!nb) {
				xalloc_err_in(err, errlen, md->dir, mt->name, (size_t)(rows * cols) * sizeof *buf);
				goto out;
			}
			buf = nb;
			cap = (size_t)(rows * cols);
		}
		if (sh_read(&in, t, g, r0, r0 + rows, c0, c0 + cols, 0, buf) < 0) {
			errf(err, errlen, "%s", sh_error(&in));
			goto out;
		}
		const struct ops *o = m->ops;
		if (g == 0)
			model_put(m, m->master, i, buf);
		else if (os->q8) {
			errf(err, errlen, "%s: AdamW's moments cannot load into 8-bit Adam's", md->dir);
			goto out;
		} else
			o->to_device((g == 1 ? m->adam_m : m->adam_v) + os->s, buf + off,
				     cnt * sizeof(float));
	}
	snprintf(loaded, loadedlen, "%s (Megatron-DeepSpeed, TP=%d PP=%d DP=%d, re-split to TP=%d "
		 "PP=%d)", md->dir, md->tp, md->pp, md->dp, m->cfg.tp, m->cfg.pp);
	rc = 1;
out:
	free(buf);
	free(e);
	if (viewed)
		sh_close(&in);
	mds_close(md);
	return rc;
}

int ckpt_load(const char *dir, struct model *m, struct ckpt_state *st, char *loaded,
	      size_t loadedlen, char *err, size_t errlen)
{
	if (mds_detect(dir))
		return load_mds(dir, m, st, loaded, loadedlen, err, errlen);
	char path[4200], *latest = NULL, why[1024] = "";
	size_t len;
	int64_t steps[4096];
	int n = 0, tried_latest = -1;
	DIR *d = opendir(dir);
	struct dirent *e;
	if (!d)
		return errno == ENOENT ? 0 : (errf(err, errlen, "--load %s: %s", dir, strerror(errno)), -3);
	while ((e = readdir(d)) && n < 4096) {
		char *end;
		if (strncmp(e->d_name, "global_step", 11) == 0) {
			long long s = strtoll(e->d_name + 11, &end, 10);
			if (!*end && end != e->d_name + 11)
				steps[n++] = s;
		}
	}
	closedir(d);
	if (n == 0)
		return 0;
	qsort(steps, n, sizeof *steps, by_step_desc);

	/* `latest` again when the step it named is gone and it names another one now: a save in
	 * progress elsewhere has moved it on and pruned the step in between */
	char before[256] = "";
	for (int tries = 0;; tries++) {
		snprintf(path, sizeof path, "%s/latest", dir);
		if (file_read_all(path, &latest, &len, why, sizeof why) < 0)
			break;
		latest[strcspn(latest, "\n")] = 0;
		if (tries > 0 && strcmp(latest, before) == 0)
			break;   /* why: the step it names is not there */
		snprintf(path, sizeof path, "%s/%s", dir, latest);
		char w[1024];
		if (fsx_confined(dir, path, w, sizeof w) == 1) {   /* ../other/global_step8, a link */
			errf(err, errlen, "--load %s: %s/latest names %s, which %s: `latest` must name a "
			     "step inside --load", dir, dir, latest, w);
			free(latest);
			return -2;
		}
		int rc = load_locked(path, m, st, why, sizeof why);
		if (rc == 0) {
			snprintf(loaded, loadedlen, "%s", path);
			free(latest);
			return 1;
		}
		if (rc != -2 || tries == 3)
			break;
		snprintf(before, sizeof before, "%s", latest);
		free(latest);
		latest = NULL;
	}
	if (latest) {
		char *end;
		if (strncmp(latest, "global_step", 11) == 0)
			tried_latest = (int)strtoll(latest + 11, &end, 10);
		warn("warning: %s/latest names %s, which cannot be loaded: %s", dir, latest, why);
		free(latest);
	} else {
		warn("warning: %s has checkpoints but no readable 'latest' (%s)", dir, why);
	}
	for (int i = 0; i < n; i++) {
		if (steps[i] == tried_latest)
			continue;
		snprintf(path, sizeof path, "%s/global_step%lld", dir, (long long)steps[i]);
		char w[1024];
		if (fsx_confined(dir, path, w, sizeof w) == 1)
			return errf(err, errlen, "--load %s: %s %s: a step must lie inside --load", dir,
				    path, w), -2;
		if (load_locked(path, m, st, why, sizeof why) == 0) {
			warn("warning: fell back to %s, the newest intact checkpoint", path);
			snprintf(loaded, loadedlen, "%s", path);
			return 1;
		}
		warn("warning: %s cannot be loaded: %s", path, why);
	}
	return errf(err, errlen, "--load %s: none of its %d checkpoints can be loaded (last error: %s)",
		    dir, n, why);
}
