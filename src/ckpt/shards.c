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
#include "fsx.h"
#include "ckpt/stop.h"
#include "msg.h"
#include "ckpt/manifest.h"
#include "ckpt/safetensors.h"
#include "ckpt/steplock.h"
#include "xalloc.h"

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
		if (fsx_confined(base, p, why, sizeof why) == 1) {   /* a step linked to elsewhere */
			errf(err, errlen, "%s/latest names %s, which %s: `latest` must name a step "
			     "inside the directory", base, latest, why);
			free(latest);
			return EXIT_USAGE;
		}
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
	if (fsx_confined(base, p, why, sizeof why) == 1)
		return errf(err, errlen, "%s %s: a step must lie inside the directory", p, why),
		       EXIT_USAGE;
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
		if (sh_held(c, t, 0, 0, s))
			mask |= 1ull << s;
	return mask;
}

/* A source's reads: buffers grown to the largest block asked for, and the last error. */
struct sh_io {
	float *rows, *tmp;       /* whole rows of a part; one copy's rectangle */
	double *acc;             /* the sum of the copies, when averaging */
	size_t nrows, ntmp, nacc;
	char err[1024];
};

int sh_init_source(struct sh_ckpt *c, const struct sh_source *src, char *err, size_t errlen)
{
	c->src = *src;
	c->held = calloc((size_t)c->m.n * LT_GROUPS * c->tp * c->pp, 1);
	c->io = calloc(1, sizeof *c->io);
	if (!c->held || !c->io)
		return xalloc_err(err, errlen, "the checkpoint's shard bookkeeping", 0);
	return 0;
}

const char *sh_error(const struct sh_ckpt *c)
{
	return c->io ? c->io->err : "no error";
}

static int io_grow(struct sh_ckpt const *c, void **p, size_t *cap, size_t n, size_t size,
		   const char *what)
{
	if (n <= *cap)
		return 0;
	void *q = realloc(*p, n * size);
	if (!q)
		return xalloc_err(c->io->err, sizeof c->io->err, what, n * size);
	*p = q;
	*cap = n;
	return 0;
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
		return xalloc_err_in(err, errlen, path, "its list of tensors",
				     ((size_t)f->ntensors + 1) * sizeof **known), EXIT_FAILED;
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
			progress_add(pg, len);
			if (stop_requested())
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
	if (manifest_check(c->manifest, mpath, err, errlen) < 0)
		return EXIT_USAGE;
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
		rc = (xalloc_err(err, errlen, "the checkpoint's table of shards and tensors", 0),
		      EXIT_FAILED);
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
	progress_begin(pg, "verifying", NULL, total);
	for (int s = 0; s < c->pp; s++)
		for (int r = 0; r < c->tp; r++) {
			char name[64];
			snprintf(name, sizeof name, SH_SHARD, r, s);
			if ((rc = verify_shard(c, r, s, known[s * c->tp + r], nknown[s * c->tp + r],
					       json_object_get(files, name), pg, err, errlen)))
				goto out;
		}
	progress_end(pg);
	rc = 0;
out:
	progress_end(pg);
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
	free(c->held);
	if (c->src.release)
		c->src.release(c->src.ctx);
	if (c->io) {
		free(c->io->rows);
		free(c->io->tmp);
		free(c->io->acc);
		free(c->io);
	}
	json_decref(c->manifest);
	lt_free(&c->m);
	free(c->dir);
	steplock_release(c->lock);
	memset(c, 0, sizeof *c);
	c->lock = -1;
}

/* The copies of tensor t's part on rank r (all ranks when r < 0), first copy first: pointers
 * into the mappings (NULL with a source), and where each copy is. */
static int copies(const struct sh_ckpt *c, int t, int g, int r, const float **out, int *rank,
		  int *stage)
{
	int n = 0;
	for (int rr = r < 0 ? 0 : r; rr < (r < 0 ? c->tp : r + 1); rr++)
		for (int s = 0; s < c->pp; s++)
			if (sh_held(c, t, g, rr, s)) {
				if (rank) {
					rank[n] = rr;
					stage[n] = s;
				}
				out[n++] = sh_at(c, t, g, rr, s);
			}
	return n;
}

/* Elements [off, off + n) of one copy: a pointer into its mapping, or read from the source
 * into buf.  NULL when the source failed (c->io->err). */
static const float *copy_span(const struct sh_ckpt *c, int t, int g, int r, int s, size_t off,
			      size_t n, float *buf)
{
	if (!c->src.read)
		return sh_at(c, t, g, r, s) + off;
	if (c->src.read(c->src.ctx, t, g, r, s, (int64_t)off, (int64_t)(off + n), buf, c->io->err,
			sizeof c->io->err) < 0)
		return NULL;
	return buf;
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

#define CMP_CHUNK ((size_t)1 << 20)   /* floats per copy compared at a time, from a source */
#define SRC_ROWS ((size_t)4 << 20)    /* floats of whole rows read to cut a narrower window */

struct sh_drift *sh_compare(const struct sh_ckpt *c, double tolerance, struct progress *pg, int *n)
{
	int ncp = c->tp * c->pp, cap = 0, failed = 0;
	const float **cp = malloc(ncp * sizeof *cp);
	int *rk = malloc(ncp * sizeof *rk), *st = malloc(ncp * sizeof *st),
	    *bits = malloc(ncp * sizeof *bits);
	double *md = malloc(ncp * sizeof *md);
	float *ref = c->src.read ? malloc(CMP_CHUNK * sizeof *ref) : NULL,
	      *oth = c->src.read ? malloc(CMP_CHUNK * sizeof *oth) : NULL;
	struct sh_drift *rows = NULL;
	uint64_t total = 0;
	*n = 0;
	if (!cp || !rk || !st || !bits || !md || (c->src.read && (!ref || !oth)))
		goto out;
	for (int t = 0; t < c->m.n; t++) {
		int64_t shp[2];
		lt_local_shape(&c->m.t[t], c->tp, shp);
		int k = copies(c, t, 0, c->m.t[t].split == LT_NONE ? -1 : 0, cp, NULL, NULL);
		if (k > 1)
			total += (uint64_t)(c->m.t[t].split == LT_NONE ? k : k * c->tp) * LT_GROUPS *
				 lt_numel(shp) * sizeof(float);
	}
	progress_begin(pg, "comparing", NULL, total);
	for (int t = 0; t < c->m.n && !failed; t++) {
		const struct lt_tensor *T = &c->m.t[t];
		int64_t shp[2];
		lt_local_shape(T, c->tp, shp);
		size_t numel = lt_numel(shp);
		for (int g = 0; g < LT_GROUPS && !failed; g++) {
			struct sh_drift d = {t, g, 0, 0, 0, ""};
			/* a replicated tensor: every copy on every rank; a split one: per rank, the
			 * stages holding that rank's part (the tied word embeddings) */
			for (int r = T->split == LT_NONE ? -1 : 0; r < (T->split == LT_NONE ? 0 : c->tp) && !failed; r++) {
				int k = copies(c, t, g, r, cp, rk, st);
				if (k < 2)
					continue;
				d.ncopies += k;
				for (int i = 1; i < k; i++)
					md[i] = 0, bits[i] = 0;
				/* mapped: each copy whole; a source: chunk by chunk */
				size_t step = c->src.read ? CMP_CHUNK : numel ? numel : 1;
				for (size_t off = 0; off < numel && !failed; off += step) {
					size_t len = numel - off < step ? numel - off : step;
					const float *a = copy_span(c, t, g, rk[0], st[0], off, len, ref);
					for (int i = 1; i < k && a; i++) {
						const float *b = copy_span(c, t, g, rk[i], st[i], off, len, oth);
						int bi;
						if (!b) {
							a = NULL;
							break;
						}
						double m = max_diff(b, a, len, &bi);
						md[i] = m > md[i] ? m : md[i];
						bits[i] |= bi;
					}
					failed = !a;
				}
				for (int i = 1; i < k && !failed; i++) {
					if (md[i] > d.maxdiff)
						d.maxdiff = md[i];
					if (tolerance > 0 ? md[i] > tolerance : bits[i]) {
						d.ndiffer++;
						add_label(c, &d, rk[i], st[i]);
					}
				}
				progress_add(pg, (uint64_t)k * numel * sizeof(float));
			}
			if (failed || d.ncopies < 2)
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
	progress_end(pg);
	if (failed) {
		free(rows);
		rows = NULL;
		*n = -1;
	}
	free(cp);
	free(rk);
	free(st);
	free(bits);
	free(md);
	free(ref);
	free(oth);
	return rows;
}

/* Rows [i0,i1) x columns [j0,j1) of one copy's part (local coordinates), from the source, into
 * dst with ds floats per row.  Whole rows are one read; a narrower window reads whole rows
 * through a buffer when it is at least a quarter of them, else row by row. */
static int src_rect(const struct sh_ckpt *c, int t, int g, int r, int s, int64_t i0, int64_t i1,
		    int64_t j0, int64_t j1, float *dst, int64_t ds)
{
	struct sh_io *io = c->io;
	int64_t lsh[2], w = j1 - j0;
	lt_local_shape(&c->m.t[t], c->tp, lsh);
	int64_t W = lsh[1];
	if (i0 >= i1 || w <= 0)
		return 0;
	if (w == W && ds == W)
		return c->src.read(c->src.ctx, t, g, r, s, i0 * W, i1 * W, dst, io->err, sizeof io->err);
	if (w * 4 >= W) {
		int64_t per = (int64_t)(SRC_ROWS / (size_t)W);
		per = per > 0 ? per : 1;
		if (i1 - i0 < per)
			per = i1 - i0;
		if (io_grow(c, (void **)&io->rows, &io->nrows, (size_t)(per * W), sizeof *io->rows,
			    "the rows read from a shard for a narrower block") < 0)
			return -1;
		for (int64_t i = i0; i < i1; i += per) {
			int64_t e = i + per < i1 ? i + per : i1;
			if (c->src.read(c->src.ctx, t, g, r, s, i * W, e * W, io->rows, io->err,
					sizeof io->err) < 0)
				return -1;
			for (int64_t k = i; k < e; k++)
				memcpy(dst + (k - i0) * ds, io->rows + (k - i) * W + j0, w * sizeof *dst);
		}
		return 0;
	}
	for (int64_t i = i0; i < i1; i++)
		if (c->src.read(c->src.ctx, t, g, r, s, i * W + j0, i * W + j1, dst + (i - i0) * ds,
				io->err, sizeof io->err) < 0)
			return -1;
	return 0;
}

/* One window of a part, rank r (every rank's copies when r < 0), from a source: the first copy,
 * or the mean of all copies in the order the mapped path sums them. */
static int src_window(const struct sh_ckpt *c, int t, int g, int r, int64_t i0, int64_t i1,
		      int64_t j0, int64_t j1, int average, float *dst, int64_t ds)
{
	int ncp = c->tp * c->pp, rk[ncp], st[ncp];
	const float *cp[ncp];
	int k = copies(c, t, g, r, cp, rk, st);
	struct sh_io *io = c->io;
	if (k == 0)
		return errf(io->err, sizeof io->err, "%s: tensor %s%s has no copy on rank %d", c->dir,
			    lt_group_prefix[g], c->m.t[t].name, r < 0 ? 0 : r);
	if (!average || k == 1)
		return src_rect(c, t, g, rk[0], st[0], i0, i1, j0, j1, dst, ds);
	size_t h = (size_t)(i1 - i0), w = (size_t)(j1 - j0);
	if (io_grow(c, (void **)&io->tmp, &io->ntmp, h * w, sizeof *io->tmp,
		    "a replica's block, read for --average") < 0 ||
	    io_grow(c, (void **)&io->acc, &io->nacc, h * w, sizeof *io->acc,
		    "the sum of the replicas' blocks (--average)") < 0)
		return -1;
	for (size_t e = 0; e < h * w; e++)
		io->acc[e] = 0;
	for (int j = 0; j < k; j++) {
		if (src_rect(c, t, g, rk[j], st[j], i0, i1, j0, j1, io->tmp, (int64_t)w) < 0)
			return -1;
		for (size_t e = 0; e < h * w; e++)
			io->acc[e] += io->tmp[e];
	}
	for (size_t i = 0; i < h; i++)
		for (size_t e = 0; e < w; e++)
			dst[i * ds + e] = (float)(io->acc[i * w + e] / k);
	return 0;
}

/* sh_read from a source: the block cut into the windows of the ranks' parts. */
static int src_read(const struct sh_ckpt *c, int t, int g, int64_t r0, int64_t r1, int64_t c0,
		    int64_t c1, int average, float *out)
{
	const struct lt_tensor *T = &c->m.t[t];
	int64_t rows = T->shape[0], w = c1 - c0, lsh[2];
	lt_local_shape(T, c->tp, lsh);
	for (int64_t i = r0 > rows ? r0 : rows; i < r1; i++)   /* a vocabulary padded further */
		memset(out + (i - r0) * w, 0, w * sizeof *out);
	int64_t re = r1 < rows ? r1 : rows;
	if (T->split == LT_COLUMN || T->split == LT_VOCAB) {
		for (int64_t i = r0; i < re;) {
			int r = (int)(i / lsh[0]);
			int64_t e = (int64_t)(r + 1) * lsh[0] < re ? (int64_t)(r + 1) * lsh[0] : re;
			if (src_window(c, t, g, r, i - r * lsh[0], e - r * lsh[0], c0, c1, average,
				       out + (i - r0) * w, w) < 0)
				return -1;
			i = e;
		}
	} else if (T->split == LT_ROW) {
		for (int64_t j = c0; j < c1;) {
			int r = (int)(j / lsh[1]);
			int64_t e = (int64_t)(r + 1) * lsh[1] < c1 ? (int64_t)(r + 1) * lsh[1] : c1;
			if (src_window(c, t, g, r, r0, re, j - r * lsh[1], e - r * lsh[1], average,
				       out + (j - c0), w) < 0)
				return -1;
			j = e;
		}
	} else if (r0 < re) {
		return src_window(c, t, g, -1, r0, re, c0, c1, average, out, w);
	}
	return 0;
}

int sh_read(const struct sh_ckpt *c, int t, int g, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
	    int average, float *out)
{
	if (c->src.read)
		return src_read(c, t, g, r0, r1, c0, c1, average, out);
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
	return 0;
}

const float *sh_rows(const struct sh_ckpt *c, int t, int g, int64_t r0, int64_t r1, int average)
{
	const struct lt_tensor *T = &c->m.t[t];
	int64_t lsh[2];
	int ncp = c->tp * c->pp, r = -1;
	const float *cp[ncp];
	lt_local_shape(T, c->tp, lsh);
	if (c->src.read || r1 > T->shape[0] || r0 >= r1)
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
