/* shards - see shards.h. */
#include "ckpt/shards.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "file.h"
#include "msg.h"
#include "ckpt/safetensors.h"
#include "ckpt/steplock.h"

int sh_step_dir(const char *path, char **dir, char *err, size_t errlen)
{
	char p[4400], base[4096], *latest = NULL, why[512];
	struct stat sb;
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/')
		n--;
	if (n >= sizeof base)
		return errf(err, errlen, "%s: path too long", path), EXIT_USAGE;
	snprintf(base, sizeof base, "%.*s", (int)n, path);
	if (stat(base, &sb) < 0) {
		int e = errno;
		errf(err, errlen, "%s: %s", base, strerror(e));
		return e == ENOENT || e == ENOTDIR ? EXIT_USAGE : EXIT_FAILED;
	}
	if (!S_ISDIR(sb.st_mode))
		return errf(err, errlen, "%s: not a directory", base), EXIT_USAGE;
	snprintf(p, sizeof p, "%s/manifest.json", base);
	if (access(p, F_OK) == 0) {
		*dir = strdup(base);
		return 0;
	}
	snprintf(p, sizeof p, "%s/latest", base);
	if (file_read_all(p, &latest, NULL, why, sizeof why) == 0) {
		latest[strcspn(latest, "\r\n")] = 0;
		if (!*latest || strchr(latest, '/')) {
			errf(err, errlen, "%s: does not name a step directory", p);
			free(latest);
			return EXIT_USAGE;
		}
		snprintf(p, sizeof p, "%s/%s/manifest.json", base, latest);
		if (access(p, F_OK) != 0) {
			errf(err, errlen, "%s/latest names %s, which has no manifest.json", base, latest);
			free(latest);
			return EXIT_USAGE;
		}
		snprintf(p, sizeof p, "%s/%s", base, latest);
		free(latest);
		*dir = strdup(p);
		return 0;
	}
	/* no latest: the newest complete step */
	DIR *d = opendir(base);
	struct dirent *e;
	long long best = -1;
	while (d && (e = readdir(d))) {
		char *end;
		if (strncmp(e->d_name, "global_step", 11) != 0)
			continue;
		long long s = strtoll(e->d_name + 11, &end, 10);
		snprintf(p, sizeof p, "%s/%s/manifest.json", base, e->d_name);
		if (end != e->d_name + 11 && !*end && s > best && access(p, F_OK) == 0)
			best = s;
	}
	if (d)
		closedir(d);
	if (best < 0)
		return errf(err, errlen, "%s: not a checkpoint (no manifest.json, no latest, no "
			    "global_stepN with a manifest)", base), EXIT_USAGE;
	warn("%s has no 'latest': using its newest step, global_step%lld", base, best);
	snprintf(p, sizeof p, "%s/global_step%lld", base, best);
	*dir = strdup(p);
	return 0;
}

static int jint(json_t *o, const char *k, int64_t *v)
{
	json_t *x = json_object_get(o, k);
	if (!json_is_integer(x))
		return -1;
	*v = json_integer_value(x);
	return 0;
}

static const float **slot(struct sh_ckpt *c, int t, int g, int r, int s)
{
	return &c->at[(((size_t)t * LT_GROUPS + g) * c->tp + r) * c->pp + s];
}

uint64_t sh_stages(const struct sh_ckpt *c, int t)
{
	uint64_t mask = 0;
	for (int s = 0; s < c->pp && s < 64; s++)
		if (sh_at(c, t, 0, 0, s))
			mask |= 1ull << s;
	return mask;
}

static int by_offset(const void *a, const void *b)
{
	const struct st_tensor *x = *(const struct st_tensor *const *)a,
				*y = *(const struct st_tensor *const *)b;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Maps shard (r, s), checks its tensors' types and shapes, records where each one is.  The
 * tensors of the model are collected in *known for the checksum. */
static int open_shard(struct sh_ckpt *c, int r, int s, const struct st_tensor ***known, int *nknown,
		      char *err, size_t errlen)
{
	char name[64], path[4200];
	struct stat sb;
	snprintf(name, sizeof name, SH_SHARD, r, s);
	snprintf(path, sizeof path, "%s/%s", c->dir, name);
	if (stat(path, &sb) < 0) {
		int e = errno;
		errf(err, errlen, "%s: %s (the manifest's layout is TP=%d PP=%d)", path,
		     e == ENOENT ? "missing" : strerror(e), c->tp, c->pp);
		return e == ENOENT ? EXIT_USAGE : EXIT_FAILED;
	}
	struct st_file *f = st_open(path, err, errlen);
	if (!f)
		return EXIT_USAGE;
	c->shard[s * c->tp + r] = f;
	*known = calloc(f->ntensors + 1, sizeof **known);
	*nknown = 0;
	if (!*known)
		return errf(err, errlen, "out of memory"), EXIT_FAILED;
	int ignored = 0;
	for (int i = 0; i < f->ntensors; i++) {
		const struct st_tensor *x = &f->tensors[i];
		int g, t = lt_parse(&c->m, x->name, &g);
		if (t < 0) {
			if (ignored++ < 3)
				warn("%s: ignoring tensor %s: no parameter of this model", path, x->name);
			continue;
		}
		const struct lt_tensor *T = &c->m.t[t];
		int64_t want[2];
		lt_local_shape(T, c->tp, want);
		if (x->dtype != ST_F32)
			return errf(err, errlen, "%s: tensor %s is %s, not F32", path, x->name,
				    st_dtype_name(x->dtype)), EXIT_USAGE;
		if (x->ndim != T->ndim || x->shape[0] != want[0] || (T->ndim == 2 && x->shape[1] != want[1])) {
			char got[64] = "", w[64];
			for (int d = 0; d < x->ndim; d++)
				snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? ", " : "",
					 (long long)x->shape[d]);
			if (T->ndim == 2)
				snprintf(w, sizeof w, "%lld, %lld", (long long)want[0], (long long)want[1]);
			else
				snprintf(w, sizeof w, "%lld", (long long)want[0]);
			return errf(err, errlen, "%s: tensor %s has shape [%s]; at TP=%d the model needs "
				    "[%s]", path, x->name, got, c->tp, w), EXIT_USAGE;
		}
		*slot(c, t, g, r, s) = x->data;
		(*known)[(*nknown)++] = x;
	}
	if (ignored > 3)
		warn("%s: ignoring %d more tensors that are no parameters of this model", path,
		     ignored - 3);
	return 0;
}

/* The shard in which a missing tensor belongs, for the message. */
static int expected_stage(const struct sh_ckpt *c, int t, int r)
{
	const struct lt_tensor *T = &c->m.t[t];
	if (T->place == LT_FIRST || T->place == LT_EMBED || c->pp == 1)
		return 0;
	if (T->place == LT_LAST)
		return c->pp - 1;
	int first = c->m.layer0 + T->layer * LT_LAYER_TENSORS;
	for (int k = first; k < first + LT_LAYER_TENSORS; k++)
		for (int g = 0; g < LT_GROUPS; g++)
			for (int s = 0; s < c->pp; s++)
				if (sh_at(c, k, g, r, s))
					return s;
	return lt_stage_of_layer(T->layer, c->m.layers, c->pp, 0);
}

#define CHUNK (64u << 20)

/* Asks the kernel to start reading [p, p+len) of f's mapping now: a cold checkpoint then streams
 * from disk while the previous chunk is checksummed, instead of 4 KiB page faults one by one. */
static void read_ahead(const struct st_file *f, const void *p, size_t len)
{
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)4095, base = (uintptr_t)f->map,
		  end = base + f->size;
	if (a < base || a >= end)
		return;
	if (a + len > end)
		len = end - a;
	madvise((void *)a, len, MADV_WILLNEED);
}

/* CRC-32C and size of a shard's parameters in file order, against the manifest. */
static int verify_shard(struct sh_ckpt *c, int r, int s, const struct st_tensor **known, int n,
			json_t *entry, struct progress *pg, char *err, size_t errlen)
{
	char name[64], got[16];
	int64_t want_bytes;
	const char *want_crc = json_string_value(json_object_get(entry, "crc32c"));
	snprintf(name, sizeof name, SH_SHARD, r, s);
	if (!json_is_object(entry) || jint(entry, "bytes", &want_bytes) < 0 || !want_crc)
		return errf(err, errlen, "%s/manifest.json: no \"files\" entry (bytes, crc32c) for %s",
			    c->dir, name), EXIT_USAGE;
	qsort(known, n, sizeof *known, by_offset);
	uint32_t crc = 0;
	uint64_t bytes = 0;
	const struct st_file *f = c->shard[s * c->tp + r];
	for (int i = 0; i < n; i++) {
		const unsigned char *p = known[i]->data;
		for (size_t off = 0; off < known[i]->nbytes; off += CHUNK) {
			size_t len = known[i]->nbytes - off < CHUNK ? known[i]->nbytes - off : CHUNK;
			read_ahead(f, p + off + CHUNK, CHUNK);
			crc = crc32c_update(crc, p + off, len);
			pg_add(pg, len);
			if (pg_stopped())
				return errf(err, errlen, "interrupted"), EXIT_FAILED;
		}
		bytes += known[i]->nbytes;
	}
	snprintf(got, sizeof got, "%08x", crc);
	if ((int64_t)bytes != want_bytes || strcmp(got, want_crc) != 0)
		return errf(err, errlen, "%s/%s: checksum mismatch (CRC-32C %s of %llu bytes, the "
			    "manifest says %s of %lld): the shard is corrupt", c->dir, name, got,
			    (unsigned long long)bytes, want_crc, (long long)want_bytes), EXIT_USAGE;
	c->bytes += bytes;
	return 0;
}

int sh_open_manifest(struct sh_ckpt *c, const char *path, char *err, size_t errlen)
{
	char mpath[4200];
	json_error_t je;
	int64_t tp, pp;
	int rc;
	memset(c, 0, sizeof *c);
	c->lock = -1;
	/* the step, locked for reading; a step removed between the two (a pruner's: `latest` has
	 * moved on) is looked for again */
	for (int tries = 0;; tries++) {
		if ((rc = sh_step_dir(path, &c->dir, err, errlen)))
			return rc;
		c->lock = steplock_shared(c->dir, err, errlen);
		if (c->lock == STEPLOCK_ERROR)
			return EXIT_FAILED;
		if (c->lock != STEPLOCK_GONE || tries == 3)
			break;
		free(c->dir);
		c->dir = NULL;
	}
	if (c->lock == STEPLOCK_GONE)
		return errf(err, errlen, "%s: the step was removed while it was being opened", path),
		       EXIT_FAILED;
	snprintf(mpath, sizeof mpath, "%s/manifest.json", c->dir);
	c->manifest = json_load_file(mpath, 0, &je);
	if (!c->manifest)
		return errf(err, errlen, "%s: %s", mpath, je.text), EXIT_USAGE;
	json_t *lay = json_object_get(c->manifest, "layout"),
	       *files = json_object_get(c->manifest, "files");
	if (jint(c->manifest, "iteration", &c->iteration) < 0 || c->iteration < 0)
		return errf(err, errlen, "%s: \"iteration\" is missing or not a count", mpath), EXIT_USAGE;
	if (jint(lay, "tp", &tp) < 0 || jint(lay, "pp", &pp) < 0 || tp < 1 || pp < 1 || tp > 1024 ||
	    pp > 64)
		return errf(err, errlen, "%s: \"layout\" needs tp (1-1024) and pp (1-64)", mpath),
		       EXIT_USAGE;
	if (!json_is_object(files))
		return errf(err, errlen, "%s: no \"files\" object", mpath), EXIT_USAGE;
	/* 8-bit Adam keeps quantized moments (u8 codes and per-block absmax) that no layout
	 * change can split at a TP boundary without requantizing: refused by name.  LAMB and SGD
	 * keep AdamW's two fp32 buffers (train's ckpt.c), which split like any tensor. */
	const char *kind = json_string_value(json_object_get(json_object_get(c->manifest,
									     "optimizer"), "kind"));
	if (kind && strcmp(kind, "adamw") && strcmp(kind, "lamb") && strcmp(kind, "sgd"))
		return errf(err, errlen, "%s: the optimizer state is \"%s\" (--use-bnb-optimizer); "
			    "only AdamW, LAMB and SGD checkpoints can be resharded or repaired: train it on with "
			    "the same layout, or save one without --use-bnb-optimizer", mpath, kind),
		       EXIT_USAGE;
	c->tp = (int)tp;
	c->pp = (int)pp;
	/* The model's sizes size tables before any shard is read: every tensor holds at least one
	 * 2-byte element, so a model with more tensors (or a wider one) than the shards on disk
	 * have bytes is a corrupt manifest, refused before it costs memory. */
	{
		const char *fname;
		json_t *fv;
		uint64_t disk = 0;
		int64_t layers = 0, widest = 0;
		json_object_foreach(files, fname, fv) {
			char fp[4400];
			struct stat sb;
			snprintf(fp, sizeof fp, "%s/%s", c->dir, fname);
			if (stat(fp, &sb) == 0)
				disk += (uint64_t)sb.st_size;
		}
		json_t *mo = json_object_get(c->manifest, "model");
		static const char *wide[] = {"hidden_size", "ffn_hidden_size", "padded_vocab_size",
					     "max_position_embeddings"};
		for (size_t i = 0; i < sizeof wide / sizeof *wide; i++) {
			int64_t v;
			if (jint(mo, wide[i], &v) == 0 && v > widest)
				widest = v;
		}
		if (jint(mo, "num_layers", &layers) == 0 &&
		    ((uint64_t)layers > disk / (2 * LT_LAYER_TENSORS) || (uint64_t)widest > disk / 2))
			return errf(err, errlen, "%s: model of %lld layers and sizes up to %lld cannot be "
				    "held by the %llu bytes of its shards: a corrupt manifest", mpath,
				    (long long)layers, (long long)widest, (unsigned long long)disk),
			       EXIT_USAGE;
	}
	if (lt_from_manifest(&c->m, json_object_get(c->manifest, "model"), mpath, err, errlen) < 0)
		return EXIT_USAGE;
	char why[256];
	if (lt_check_tp(&c->m, c->tp, why, sizeof why) < 0)
		return errf(err, errlen, "%s: the layout does not fit the model: %s", mpath, why),
		       EXIT_USAGE;
	if (c->pp > c->m.layers)
		return errf(err, errlen, "%s: PP=%d stages for %d layers", mpath, c->pp, c->m.layers),
		       EXIT_USAGE;
	return 0;
}

int sh_open(struct sh_ckpt *c, const char *path, struct progress *pg, char *err, size_t errlen)
{
	int rc = sh_open_manifest(c, path, err, errlen);
	if (rc)
		return rc;
	json_t *files = json_object_get(c->manifest, "files");
	int nsh = c->tp * c->pp;
	c->shard = calloc(nsh, sizeof *c->shard);
	c->at = calloc((size_t)c->m.n * LT_GROUPS * nsh, sizeof *c->at);
	const struct st_tensor ***known = calloc(nsh, sizeof *known);
	int *nknown = calloc(nsh, sizeof *nknown);
	if (!c->shard || !c->at || !known || !nknown) {
		rc = (errf(err, errlen, "out of memory"), EXIT_FAILED);
		goto out;
	}
	for (int s = 0; s < c->pp; s++)
		for (int r = 0; r < c->tp; r++)
			if ((rc = open_shard(c, r, s, &known[s * c->tp + r], &nknown[s * c->tp + r], err,
					     errlen)))
				goto out;
	/* every parameter, every group, every rank: on some stage */
	for (int t = 0; t < c->m.n; t++)
		for (int r = 0; r < c->tp; r++)
			for (int g = 0; g < LT_GROUPS; g++) {
				int held = 0;
				for (int s = 0; s < c->pp; s++)
					held |= sh_at(c, t, g, r, s) != NULL;
				if (!held) {
					char name[64];
					snprintf(name, sizeof name, SH_SHARD, r, expected_stage(c, t, r));
					errf(err, errlen, "%s/%s: tensor %s%s is missing", c->dir, name,
					     lt_group_prefix[g], c->m.t[t].name);
					rc = EXIT_USAGE;
					goto out;
				}
			}
	uint64_t total = 0;
	for (int i = 0; i < nsh; i++)
		for (int k = 0; k < nknown[i]; k++)
			total += known[i][k]->nbytes;
	pg_begin(pg, "verifying", total);
	for (int s = 0; s < c->pp; s++)
		for (int r = 0; r < c->tp; r++) {
			char name[64];
			snprintf(name, sizeof name, SH_SHARD, r, s);
			if ((rc = verify_shard(c, r, s, known[s * c->tp + r], nknown[s * c->tp + r],
					       json_object_get(files, name), pg, err, errlen)))
				goto out;
		}
	pg_end(pg);
	rc = 0;
out:
	pg_end(pg);
	for (int i = 0; known && i < nsh; i++)
		free(known[i]);
	free(known);
	free(nknown);
	return rc;
}

void sh_close(struct sh_ckpt *c)
{
	for (int i = 0; c->shard && i < c->tp * c->pp; i++)
		st_close(c->shard[i]);
	free(c->shard);
	free((void *)c->at);
	json_decref(c->manifest);
	lt_free(&c->m);
	free(c->dir);
	steplock_release(c->lock);
	memset(c, 0, sizeof *c);
	c->lock = -1;
}

/* The copies of tensor t's part on rank r (all ranks when r < 0), first copy first. */
static int copies(const struct sh_ckpt *c, int t, int g, int r, const float **out, int *rank,
		  int *stage)
{
	int n = 0;
	for (int rr = r < 0 ? 0 : r; rr < (r < 0 ? c->tp : r + 1); rr++)
		for (int s = 0; s < c->pp; s++)
			if (sh_at(c, t, g, rr, s)) {
				if (rank) {
					rank[n] = rr;
					stage[n] = s;
				}
				out[n++] = sh_at(c, t, g, rr, s);
			}
	return n;
}

static void add_label(const struct sh_ckpt *c, struct sh_drift *d, int r, int s)
{
	char l[32];
	size_t used = strlen(d->differ);
	if (c->pp > 1)
		snprintf(l, sizeof l, "%stp%02d/pp%03d", used ? "," : "", r, s);
	else
		snprintf(l, sizeof l, "%stp%02d", used ? "," : "", r);
	if (used + strlen(l) + 5 < sizeof d->differ)
		strcat(d->differ, l);
	else if (!strstr(d->differ, ",..."))
		strcat(d->differ, ",...");
}

/* max |x - ref| over n elements; 0 when bit-identical, inf for a NaN against a number */
static double max_diff(const float *x, const float *ref, size_t n, int *bits_differ)
{
	*bits_differ = memcmp(x, ref, n * sizeof *x) != 0;
	if (!*bits_differ)
		return 0;
	double m = 0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)x[i] - (double)ref[i]);
		if (d != d)   /* NaN: the same NaN bits count as equal */
			d = memcmp(&x[i], &ref[i], sizeof *x) ? INFINITY : 0;
		if (d > m)
			m = d;
	}
	return m;
}

struct sh_drift *sh_compare(const struct sh_ckpt *c, double tolerance, struct progress *pg, int *n)
{
	int ncp = c->tp * c->pp, cap = 0;
	const float **cp = malloc(ncp * sizeof *cp);
	int *rk = malloc(ncp * sizeof *rk), *st = malloc(ncp * sizeof *st);
	struct sh_drift *rows = NULL;
	uint64_t total = 0;
	*n = 0;
	if (!cp || !rk || !st)
		goto out;
	for (int t = 0; t < c->m.n; t++) {
		int64_t shp[2];
		lt_local_shape(&c->m.t[t], c->tp, shp);
		int k = copies(c, t, 0, c->m.t[t].split == LT_NONE ? -1 : 0, cp, NULL, NULL);
		if (k > 1)
			total += (uint64_t)(c->m.t[t].split == LT_NONE ? k : k * c->tp) * LT_GROUPS *
				 lt_numel(shp) * sizeof(float);
	}
	pg_begin(pg, "comparing", total);
	for (int t = 0; t < c->m.n; t++) {
		const struct lt_tensor *T = &c->m.t[t];
		int64_t shp[2];
		lt_local_shape(T, c->tp, shp);
		size_t numel = lt_numel(shp);
		for (int g = 0; g < LT_GROUPS; g++) {
			struct sh_drift d = {t, g, 0, 0, 0, ""};
			/* a replicated tensor: every copy on every rank; a split one: per rank, the
			 * stages holding that rank's part (the tied word embeddings) */
			for (int r = T->split == LT_NONE ? -1 : 0; r < (T->split == LT_NONE ? 0 : c->tp); r++) {
				int k = copies(c, t, g, r, cp, rk, st);
				if (k < 2)
					continue;
				d.ncopies += k;
				for (int i = 1; i < k; i++) {
					int bits;
					double m = max_diff(cp[i], cp[0], numel, &bits);
					if (m > d.maxdiff)
						d.maxdiff = m;
					if (tolerance > 0 ? m > tolerance : bits) {
						d.ndiffer++;
						add_label(c, &d, rk[i], st[i]);
					}
				}
				pg_add(pg, (uint64_t)k * numel * sizeof(float));
			}
			if (d.ncopies < 2)
				continue;
			if (*n == cap) {
				cap = cap ? 2 * cap : 256;
				struct sh_drift *nr = realloc(rows, cap * sizeof *rows);
				if (!nr)
					goto out;
				rows = nr;
			}
			rows[(*n)++] = d;
		}
	}
out:
	pg_end(pg);
	free(cp);
	free(rk);
	free(st);
	return rows;
}

void sh_read(const struct sh_ckpt *c, int t, int g, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
	     int average, float *out)
{
	const struct lt_tensor *T = &c->m.t[t];
	int64_t rows = T->shape[0], w = c1 - c0, lsh[2];
	lt_local_shape(T, c->tp, lsh);
	int ncp = c->tp * c->pp;
	const float *cp[ncp];
	for (int64_t i = r0; i < r1; i++) {
		float *o = out + (i - r0) * w;
		if (i >= rows) {   /* a vocabulary padded further than the checkpoint's */
			memset(o, 0, w * sizeof *o);
			continue;
		}
		for (int64_t col = c0; col < c1;) {
			int r = -1;
			int64_t li = i, lc = col, run = c1 - col;
			if (T->split == LT_COLUMN || T->split == LT_VOCAB) {
				r = (int)(i / lsh[0]);
				li = i % lsh[0];
			} else if (T->split == LT_ROW) {
				r = (int)(col / lsh[1]);
				lc = col % lsh[1];
				if (run > lsh[1] - lc)
					run = lsh[1] - lc;
			}
			int k = copies(c, t, g, r, cp, NULL, NULL);
			size_t off = (size_t)li * lsh[1] + lc;
			float *dst = o + (col - c0);
			if (!average || k == 1) {
				memcpy(dst, cp[0] + off, run * sizeof *dst);
			} else {
				for (int64_t e = 0; e < run; e++) {
					double sum = 0;
					for (int j = 0; j < k; j++)
						sum += cp[j][off + e];
					dst[e] = (float)(sum / k);
				}
			}
			col += run;
		}
	}
}

const float *sh_rows(const struct sh_ckpt *c, int t, int g, int64_t r0, int64_t r1, int average)
{
	const struct lt_tensor *T = &c->m.t[t];
	int64_t lsh[2];
	int ncp = c->tp * c->pp, r = -1;
	const float *cp[ncp];
	lt_local_shape(T, c->tp, lsh);
	if (r1 > T->shape[0] || r0 >= r1)
		return NULL;
	if (T->split == LT_COLUMN || T->split == LT_VOCAB) {
		r = (int)(r0 / lsh[0]);
		if ((r1 - 1) / lsh[0] != r)
			return NULL;
	} else if (T->split == LT_ROW) {
		if (c->tp != 1)
			return NULL;
		r = 0;
	}
	int k = copies(c, t, g, r, cp, NULL, NULL);
	if (average && k > 1)
		return NULL;
	return cp[0] + (size_t)(r0 % lsh[0]) * lsh[1];
}
