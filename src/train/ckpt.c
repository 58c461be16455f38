/* ckpt - see ckpt.h. */
#include "train/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "file.h"
#include "msg.h"
#include "ckpt/safetensors.h"

#define SHARD "rank_tp%02d_pp%03d.safetensors"

/* Removes stray temporaries of interrupted saves. */
static void clean_tmp(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[4096];
	if (!d)
		return;
	while ((e = readdir(d)))
		if (strncmp(e->d_name, ".global_step", 12) == 0 && strstr(e->d_name, ".tmp.")) {
			snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
			file_rm_tree(p);
		}
	closedir(d);
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
	return json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:s,s:b,s:f,s:f,s:f,s:f,s:I}",
			 "num_layers", c->layers, "hidden_size", c->hidden, "num_attention_heads",
			 c->heads, "ffn_hidden_size", c->ffn, "seq_length", c->seq,
			 "max_position_embeddings", c->max_pos, "vocab_size", c->vocab,
			 "padded_vocab_size", c->padded_vocab, "position_embedding_type",
			 c->alibi ? "alibi" : "learned", "embed_layernorm", c->embed_ln,
			 "layernorm_epsilon", (double)c->eps, "init_method_std", (double)c->init_std,
			 "hidden_dropout", (double)c->hidden_dropout, "attention_dropout",
			 (double)c->attention_dropout, "seed", (json_int_t)c->seed);
}

/* The shard: for every tensor its fp32 master weights, then both Adam moments, streamed one
 * tensor at a time through a host buffer the size of the largest tensor. */
static int write_shard(const char *path, const struct model *m, const float *exp_avg,
		       const float *exp_avg_sq, int64_t iteration, uint32_t *crc, uint64_t *bytes,
		       char *err, size_t errlen)
{
	static const char *prefix[3] = {"", "exp_avg.", "exp_avg_sq."};
	const float *bufs[3] = {m->master, exp_avg, exp_avg_sq};
	char name[128], it[32];
	size_t most = 0;
	struct st_writer *w = st_create(path, err, errlen);
	if (!w)
		return -1;
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < m->ntensors; i++) {
			const struct model_tensor *t = &m->tensors[i];
			int64_t shape[2] = {t->shape[0], t->shape[1]};
			/* the rank's own shard of a split tensor */
			if (t->split == SPLIT_COLUMN || t->split == SPLIT_VOCAB)
				shape[0] /= m->cfg.tp;
			else if (t->split == SPLIT_ROW)
				shape[1] /= m->cfg.tp;
			snprintf(name, sizeof name, "%s%s", prefix[k], t->name);
			st_declare(w, name, ST_F32, t->ndim, shape);
			most = t->numel > most ? t->numel : most;
		}
	snprintf(it, sizeof it, "%lld", (long long)iteration);
	st_metadata(w, "format", "lmtk-checkpoint");
	st_metadata(w, "iteration", it);
	float *buf = malloc(most * sizeof *buf);
	if (!buf) {
		st_abort(w);
		return errf(err, errlen, "out of memory");
	}
	*crc = 0;
	*bytes = 0;
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < m->ntensors; i++) {
			size_t n = m->tensors[i].numel * sizeof *buf;
			model_get(m, bufs[k], i, buf);
			*crc = crc32c_update(*crc, buf, n);
			*bytes += n;
			if (st_write(w, buf, n) < 0)
				break;
		}
	free(buf);
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

/* World rank 0's half of a save: the manifest over every shard, then the publish. */
static int publish(const char *dir, const char *name, const char *tmp, const struct model *m,
		   const struct ckpt_state *st, const struct shard_info *info, int world,
		   const char *args, char *err, size_t errlen)
{
	char final[4096], path[4200], old[4200];
	json_t *files = json_object();
	for (int r = 0; r < world; r++)
		if (info[r].writer) {
			char shard[64], crchex[16];
			snprintf(shard, sizeof shard, SHARD, info[r].tp, info[r].pp);
			snprintf(crchex, sizeof crchex, "%08x", info[r].crc);
			json_object_set_new(files, shard, json_pack("{s:I,s:s}", "bytes",
								    (json_int_t)info[r].bytes, "crc32c", crchex));
		}
	const struct optim *o = &st->optim;
	json_t *man = json_pack(
		"{s:s,s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:o,s:o,"
		"s:{s:i,s:f,s:i,s:i,s:f,s:f,s:f,s:f,s:f},"
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
		"optimizer", "step", o->step, "loss_scale", (double)o->loss_scale, "good_steps",
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
	char *js = man ? json_dumps(man, JSON_INDENT(1) | JSON_PRESERVE_ORDER) : NULL;
	json_decref(man);
	if (!js)
		return errf(err, errlen, "out of memory");
	snprintf(path, sizeof path, "%s/manifest.json", tmp);
	size_t jl = strlen(js);
	js[jl] = '\n';
	int rc = file_write_atomic(path, js, jl + 1, 0644, err, errlen);
	free(js);
	if (rc < 0)
		return -1;
	file_fsync_dir(tmp);

	/* publish: an existing step directory of the same number (a re-save) is moved aside first */
	snprintf(final, sizeof final, "%s/%s", dir, name);
	snprintf(old, sizeof old, "%s/.%s.tmp.old.%d", dir, name, (int)getpid());
	struct stat sb;
	if (stat(final, &sb) == 0 && rename(final, old) < 0)
		return errf(err, errlen, "%s: %s", final, strerror(errno));
	if (rename(tmp, final) < 0)
		return errf(err, errlen, "%s: %s", final, strerror(errno));
	file_fsync_dir(dir);
	char line[80];
	snprintf(path, sizeof path, "%s/latest", dir);
	snprintf(line, sizeof line, "%s\n", name);
	if (file_write_atomic(path, line, strlen(line), 0644, err, errlen) < 0)
		return -1;
	snprintf(path, sizeof path, "%s/latest_checkpointed_iteration.txt", dir);
	snprintf(line, sizeof line, "%lld\n", (long long)st->iteration);
	if (file_write_atomic(path, line, strlen(line), 0644, err, errlen) < 0)
		return -1;
	file_rm_tree(old);
	return 0;
}

int ckpt_save(const char *dir, const struct model *m, struct dist *d,
	      const struct ckpt_state *st, const char *args, char *err, size_t errlen)
{
	char name[64], tmp[4000], path[4200];
	int world = d->world, pid = (int)getpid(), pid0, rc = 0;
	struct shard_info me = {0}, *info = calloc(world, sizeof *info);
	int *pids = calloc(world, sizeof *pids);
	if (!info || !pids) {
		free(info);
		free(pids);
		return errf(err, errlen, "out of memory");
	}
	/* one temporary directory for all ranks, named after world rank 0's pid */
	d->allgather(d, DIST_WORLD, &pid, sizeof pid, pids);
	pid0 = pids[0];
	free(pids);
	snprintf(name, sizeof name, "global_step%lld", (long long)st->iteration);
	snprintf(tmp, sizeof tmp, "%s/.%s.tmp.%d", dir, name, pid0);
	if (d->rank == 0) {
		if (mkdir(dir, 0755) < 0 && errno != EEXIST)
			rc = errf(err, errlen, "--save %s: %s", dir, strerror(errno));
		else {
			clean_tmp(dir);
			if (mkdir(tmp, 0755) < 0)
				rc = errf(err, errlen, "%s: %s", tmp, strerror(errno));
		}
	}
	d->barrier(d);
	/* DP rank 0 of each (TP, PP) position writes its shard: DP replicas hold the same bits */
	me.writer = d->dp_rank == 0;
	me.tp = m->cfg.tp_rank;
	me.pp = m->cfg.pp_rank;
	me.ok = 1;
	/* the moments in full: with ZeRO-1 each DP rank holds a shard, gathered for the save so the
	 * checkpoint is the same whatever the sharding (and loads with or without it) */
	const float *ea = m->adam_m, *eas = m->adam_v;
	float *full = NULL;
	if (m->cfg.zero_dp > 1) {
		int n = m->cfg.zero_dp, counts[n], displs[n];
		full = malloc(2 * m->nparams * sizeof *full);
		if (!full) {
			free(info);
			return errf(err, errlen, "out of memory gathering the optimizer state");
		}
		for (int r = 0; r < n; r++) {
			size_t a, b;
			model_zero_range(m->nparams, n, r, &a, &b);
			displs[r] = (int)a;
			counts[r] = (int)(b - a);
		}
		m->ops->to_host(full + m->opt_lo, m->adam_m, (m->opt_hi - m->opt_lo) * sizeof *full);
		m->ops->to_host(full + m->nparams + m->opt_lo, m->adam_v,
				(m->opt_hi - m->opt_lo) * sizeof *full);
		d->allgatherv_f32(d, DIST_DP, full, counts, displs);
		d->allgatherv_f32(d, DIST_DP, full + m->nparams, counts, displs);
		ea = full;
		eas = full + m->nparams;
	}
	if (me.writer) {
		char shard[64];
		snprintf(shard, sizeof shard, SHARD, me.tp, me.pp);
		snprintf(path, sizeof path, "%s/%s", tmp, shard);
		if (access(tmp, F_OK) != 0 && !rc)
			rc = errf(err, errlen, "%s: %s", tmp, strerror(errno));
		else if (!rc && write_shard(path, m, ea, eas, st->iteration, &me.crc, &me.bytes, err,
					    errlen) < 0)
			rc = -1;
		me.ok = rc == 0;
	}
	free(full);
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
		}
		if (rc)
			file_rm_tree(tmp);
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

/* Loads one step directory.  0, or -1 + err saying what is wrong with it. */
static int load_step(const char *sdir, struct model *m, struct ckpt_state *st, char *err,
		     size_t errlen)
{
	char path[4200], shard[128];
	json_error_t je;
	snprintf(path, sizeof path, "%s/manifest.json", sdir);
	json_t *man = json_load_file(path, 0, &je);
	if (!man)
		return errf(err, errlen, "%s: %s", path, access(path, F_OK) ? "missing" : je.text);
	int64_t v[10] = {0};
	json_t *sc = json_object_get(man, "scheduler"), *op = json_object_get(man, "optimizer"),
	       *lay = json_object_get(man, "layout"), *lt = json_object_get(man, "loss_tracker");
	const char *style = json_string_value(json_object_get(sc, "style"));
	double d[8];
	int64_t tp = 1, pp = 1;
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
	    jint(lt, "count", &st->loss_count) || jint(lay, "tp", &tp) || jint(lay, "pp", &pp)) {
		json_decref(man);
		return errf(err, errlen, "%s: a field is missing or has the wrong type", path);
	}
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
		if (jint(mo, mf[i].key, &got) || got != mf[i].want) {
			json_decref(man);
			return errf(err, errlen, "%s: %s is %lld in the checkpoint, %lld in this run: it is "
				    "another model", path, mf[i].flag, (long long)got, (long long)mf[i].want);
		}
	}
	if (!pe || strcmp(pe, c->alibi ? "alibi" : "learned") != 0 ||
	    json_is_true(json_object_get(mo, "embed_layernorm")) != !!c->embed_ln) {
		json_decref(man);
		return errf(err, errlen, "%s: --position-embedding-type or --embed-layernorm differs from "
			    "the checkpoint's model", path);
	}
	st->optim.step = v[0];
	st->optim.loss_scale = d[0];
	st->optim.good_steps = v[1];
	st->optim.hysteresis_left = v[2];
	st->tp = tp;
	st->pp = pp;
	if (tp != m->cfg.tp || pp != m->cfg.pp) {
		json_decref(man);
		return errf(err, errlen, "%s: saved with TP=%lld PP=%lld, this run is TP=%d PP=%d; "
			    "re-shard it with ckpt-merge-tp --target-tp/--target-pp", path, (long long)tp,
			    (long long)pp, m->cfg.tp, m->cfg.pp);
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
	static const char *prefix[3] = {"", "exp_avg.", "exp_avg_sq."};
	float *bufs[3] = {m->master, m->adam_m, m->adam_v};
	uint32_t crc = 0;
	uint64_t bytes = 0;
	char name[128];
	/* check everything before changing anything */
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < m->ntensors; i++) {
			const struct model_tensor *t = &m->tensors[i];
			snprintf(name, sizeof name, "%s%s", prefix[k], t->name);
			const struct st_tensor *s = st_find(f, name);
			int64_t d0 = t->shape[0], d1 = t->shape[1];
			if (t->split == SPLIT_COLUMN || t->split == SPLIT_VOCAB)
				d0 /= m->cfg.tp;
			else if (t->split == SPLIT_ROW)
				d1 /= m->cfg.tp;
			if (!s || s->dtype != ST_F32 || s->numel != t->numel || s->ndim != t->ndim ||
			    s->shape[0] != d0 || (t->ndim == 2 && s->shape[1] != d1)) {
				errf(err, errlen, "%s: tensor %s %s (the model needs %zu fp32 elements: "
				     "is this checkpoint from another model?)", path, name,
				     !s ? "is missing" : "has another shape or type", t->numel);
				st_close(f);
				return -1;
			}
			crc = crc32c_update(crc, s->data, s->nbytes);
			bytes += s->nbytes;
		}
	snprintf(name, sizeof name, "%08x", crc);
	if ((int64_t)bytes != want_bytes || strcmp(name, crcbuf) != 0) {
		errf(err, errlen, "%s: checksum mismatch (CRC-32C %s, manifest says %s): the shard is "
		     "corrupt", path, name, crcbuf);
		st_close(f);
		return -1;
	}
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < m->ntensors; i++) {
			const struct model_tensor *t = &m->tensors[i];
			snprintf(name, sizeof name, "%s%s", prefix[k], t->name);
			const float *data = st_find(f, name)->data;
			if (k == 0) {
				model_put(m, bufs[k], i, data);
				continue;
			}
			/* the moments: only what this rank's optimizer shard holds */
			size_t a = t->offset > m->opt_lo ? t->offset : m->opt_lo;
			size_t b = t->offset + t->numel < m->opt_hi ? t->offset + t->numel : m->opt_hi;
			if (a < b)
				m->ops->to_device(bufs[k] + (a - m->opt_lo), data + (a - t->offset),
						  (b - a) * sizeof *data);
		}
	st_close(f);
	return 0;
}

static int by_step_desc(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

int ckpt_load(const char *dir, struct model *m, struct ckpt_state *st, char *loaded,
	      size_t loadedlen, char *err, size_t errlen)
{
	char path[4200], *latest = NULL, why[1024] = "";
	size_t len;
	int64_t steps[4096];
	int n = 0, tried_latest = -1;
	DIR *d = opendir(dir);
	struct dirent *e;
	if (!d)
		return errno == ENOENT ? 0 : errf(err, errlen, "--load %s: %s", dir, strerror(errno));
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

	snprintf(path, sizeof path, "%s/latest", dir);
	if (file_read_all(path, &latest, &len, why, sizeof why) == 0) {
		latest[strcspn(latest, "\n")] = 0;
		snprintf(path, sizeof path, "%s/%s", dir, latest);
		if (load_step(path, m, st, why, sizeof why) == 0) {
			snprintf(loaded, loadedlen, "%s", path);
			free(latest);
			return 1;
		}
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
		if (load_step(path, m, st, why, sizeof why) == 0) {
			warn("warning: fell back to %s, the newest intact checkpoint", path);
			snprintf(loaded, loadedlen, "%s", path);
			return 1;
		}
		warn("warning: %s cannot be loaded: %s", path, why);
	}
	return errf(err, errlen, "--load %s: none of its %d checkpoints can be loaded (last error: %s)",
		    dir, n, why);
}
