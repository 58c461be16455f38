/* reshard - see reshard.h. */
#include "ckpt/reshard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "crc32c.h"
#include "file.h"
#include "ckpt/stop.h"
#include "msg.h"
#include "ckpt/safetensors.h"
#include "ckpt/save.h"
#include "xalloc.h"

/* Does stage s of the target layout hold tensor t? */
static int holds(const struct sh_ckpt *in, const struct lt_model *out, const struct rs_target *tg,
		 int t, int s)
{
	if (tg->pp == in->pp)
		return (sh_stages(in, t) >> s) & 1;
	return lt_on_stage(out, &out->t[t], s, tg->pp, tg->pp_embedding);
}

struct stage {
	const struct sh_ckpt *in;
	const struct lt_model *out;
	const struct rs_target *tg;
	int s;
};

static int stage_holds(const void *ctx, int t)
{
	const struct stage *st = ctx;
	return holds(st->in, st->out, st->tg, t, st->s);
}

/* Rank r's part of tensor t (group g) in the target layout, block by block into the writer. */
static int write_part(const struct sh_ckpt *in, const struct lt_model *out,
		      const struct rs_target *tg, int t, int g, int r, struct st_writer *w,
		      float *buf, uint32_t *crc, uint64_t *bytes, struct progress *pg)
{
	const struct lt_tensor *T = &out->t[t];
	int64_t lsh[2], r0 = 0, c0 = 0;
	lt_local_shape(T, tg->tp, lsh);
	if (T->split == LT_COLUMN || T->split == LT_VOCAB)
		r0 = (int64_t)r * lsh[0];
	else if (T->split == LT_ROW)
		c0 = (int64_t)r * lsh[1];
	int64_t step = RS_BLOCK / lsh[1] ? RS_BLOCK / lsh[1] : 1;
	for (int64_t a = 0; a < lsh[0]; a += step) {
		int64_t b = a + step < lsh[0] ? a + step : lsh[0];
		size_t n = (size_t)(b - a) * lsh[1] * sizeof(float);
		const float *p = lsh[1] == T->shape[1] ? sh_rows(in, t, g, r0 + a, r0 + b, tg->average)
						       : NULL;
		if (!p) {
			if (sh_read(in, t, g, r0 + a, r0 + b, c0, c0 + lsh[1], tg->average, buf) < 0)
				return -3;
			p = buf;
		}
		*crc = crc32c_update(*crc, p, n);
		*bytes += n;
		if (st_write(w, p, n) < 0)
			return -1;
		progress_add(pg, n);
		if (stop_requested())
			return -2;
	}
	return 0;
}

static int write_shard(const struct sh_ckpt *in, const struct lt_model *out,
		       const struct rs_target *tg, int r, int s, const char *stepdir, float *buf,
		       int *order, json_t *files, struct progress *pg, char *err, size_t errlen)
{
	char name[64], path[4200];
	uint32_t crc = 0;
	uint64_t bytes = 0;
	int rc = 0;
	struct stage st = {in, out, tg, s};
	int n = lt_stage_order(out, s, stage_holds, &st, order);
	snprintf(name, sizeof name, SH_SHARD, r, s);
	snprintf(path, sizeof path, "%s/%s", stepdir, name);
	struct st_writer *w = st_create(path, err, errlen);
	if (!w)
		return EXIT_FAILED;
	for (int g = 0; g < LT_GROUPS; g++)
		for (int i = 0; i < n; i++) {
			int t = order[i];
			char tn[96];
			int64_t lsh[2];
			lt_local_shape(&out->t[t], tg->tp, lsh);
			snprintf(tn, sizeof tn, "%s%s", lt_group_prefix[g], out->t[t].name);
			st_declare(w, tn, ST_F32, out->t[t].ndim, lsh);
		}
	const char *kind = json_string_value(json_object_get(json_object_get(in->manifest,
									     "optimizer"), "kind"));
	save_shard_metadata(w, in->iteration, kind ? kind : "adamw");
	for (int g = 0; g < LT_GROUPS && !rc; g++)
		for (int i = 0; i < n && !rc; i++)
			rc = write_part(in, out, tg, order[i], g, r, w, buf, &crc, &bytes, pg);
	if (rc == -2) {
		st_abort(w);
		return errf(err, errlen, "interrupted"), EXIT_FAILED;
	}
	if (rc == -3) {   /* the input could not be read: a damaged .pt file is bad input */
		errf(err, errlen, "%s", sh_error(in));
		st_abort(w);
		return EXIT_USAGE;
	}
	if (rc < 0 || st_commit(w) < 0) {
		errf(err, errlen, "%s", st_werror(w));
		st_abort(w);
		return EXIT_FAILED;
	}
	if (save_files_add(files, name, bytes, crc) < 0)
		return xalloc_err(err, errlen, "the manifest's list of files", 0), EXIT_FAILED;
	return 0;
}

/* The input's manifest with the new layout, padded vocabulary and files, or NULL. */
static json_t *new_manifest(const struct sh_ckpt *in, const struct rs_target *tg, json_t *files)
{
	json_t *man = json_deep_copy(in->manifest);
	if (!man)
		return NULL;
	json_t *lay = json_object_get(man, "layout"), *mo = json_object_get(man, "model");
	json_object_set_new(lay, "tp", json_integer(tg->tp));
	json_object_set_new(lay, "pp", json_integer(tg->pp));
	json_object_set_new(mo, "padded_vocab_size", json_integer(tg->padded_vocab));
	json_object_set(man, "files", files);
	return man;
}

int rs_write(const struct sh_ckpt *in, const struct rs_target *tg, const char *stepdir,
	     struct progress *pg, char *err, size_t errlen)
{
	struct lt_model out;
	char why[256];
	int rc = 0;
	if (lt_copy(&out, &in->m, tg->padded_vocab) < 0)
		return xalloc_err(err, errlen, "the target layout's copy of the model", 0), EXIT_FAILED;
	if (lt_check_tp(&out, tg->tp, why, sizeof why) < 0) {
		lt_free(&out);
		return errf(err, errlen, "cannot write TP=%d: %s", tg->tp, why), EXIT_USAGE;
	}
	if (tg->pp > out.layers) {
		lt_free(&out);
		return errf(err, errlen, "cannot write PP=%d: the model has %d layers", tg->pp,
			    out.layers), EXIT_USAGE;
	}
	size_t widest = RS_BLOCK;
	uint64_t total = 0;
	for (int t = 0; t < out.n; t++) {
		int64_t lsh[2];
		lt_local_shape(&out.t[t], tg->tp, lsh);
		if ((size_t)lsh[1] > widest)
			widest = lsh[1];
		for (int s = 0; s < tg->pp; s++)
			if (holds(in, &out, tg, t, s))
				total += (uint64_t)LT_GROUPS * tg->tp * lt_numel(lsh) * sizeof(float);
	}
	float *buf = malloc(widest * sizeof *buf);
	int *order = malloc((out.n + 1) * sizeof *order);
	json_t *files = json_object();
	if (!buf || !order || !files) {
		rc = (xalloc_err(err, errlen, "the resharding buffers", 0), EXIT_FAILED);
		goto out;
	}
	progress_begin(pg, "writing", NULL, total);
	for (int s = 0; s < tg->pp && !rc; s++)
		for (int r = 0; r < tg->tp && !rc; r++)
			rc = write_shard(in, &out, tg, r, s, stepdir, buf, order, files, pg, err, errlen);
	progress_end(pg);
	if (rc)
		goto out;
	json_t *man = new_manifest(in, tg, files);
	if (!man) {
		rc = (xalloc_err(err, errlen, "the resharded checkpoint's manifest", 0), EXIT_FAILED);
		goto out;
	}
	if (save_manifest(stepdir, man, err, errlen) < 0)
		rc = EXIT_FAILED;
	json_decref(man);
out:
	json_decref(files);
	free(order);
	free(buf);
	lt_free(&out);
	return rc;
}

int rs_write_checkpoint(const struct sh_ckpt *in, const struct rs_target *tg, const char *dir,
			struct progress *pg, char *err, size_t errlen)
{
	char owner[96], tmp[8400];
	/* as train saves: the step under a temporary name, then published (save.h) */
	save_owner(owner, sizeof owner);
	snprintf(tmp, sizeof tmp, "%s/.global_step%lld.tmp.%s", dir, (long long)in->iteration, owner);
	if (save_step_begin(tmp, err, errlen) < 0)
		return EXIT_FAILED;
	int rc = rs_write(in, tg, tmp, pg, err, errlen);
	if (!rc && save_publish(dir, tmp, in->iteration, err, errlen) < 0)
		rc = EXIT_FAILED;
	return rc;
}
