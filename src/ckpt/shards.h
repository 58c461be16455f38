/* shards - one checkpoint step, every shard of every TP rank and PP stage, mapped and verified.
 *
 * sh_open() trusts nothing it has not checked, as train's load does (lmtk-checkpoint(5),
 * "Loading"): the manifest parses and describes a model; every shard the layout names exists,
 * has an entry in "files", and is valid safetensors; every tensor is F32 with its rank's shape;
 * every parameter is there for every rank, weights and both Adam moments, on some stage; and
 * each shard's CRC-32C and byte count are the manifest's.  Only then does anything read the
 * values.  Errors name the file and the tensor.  Tensors that are no parameter of the model are
 * ignored (with a warning), as train ignores them, and stay outside the checksum.
 *
 * The shards stay mapped: nothing is copied until a writer asks for a block of a full tensor
 * (sh_read), which is gathered from the ranks' parts, so memory stays bounded by the writer's
 * buffer whatever the model's size.  A replicated tensor has one copy per TP rank (and the word
 * embeddings one per stage that holds them); sh_compare() measures how far the copies have
 * drifted, and sh_read(..., average) hands out their mean instead of the first copy - the
 * all-reduce AVG that repaired the 104B and 176B runs. */
#ifndef CKPT_SHARDS_H
#define CKPT_SHARDS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt/layout.h"
#include "progress.h"

#define SH_SHARD "rank_tp%02d_pp%03d.safetensors"

/* A checkpoint whose values are not safetensors shards in memory - a Megatron-DeepSpeed
 * checkpoint read through mds.h - hands them out through a source: elements [a, b) of rank r's
 * part of tensor t, group g, on stage s (row-major in the part's local shape) as floats into
 * dst.  0, or -1 + err.  Readers then gather blocks from it as they do from mappings, through
 * buffers of at most the block they are asked for, so memory stays bounded the same way. */
struct sh_source {
	int (*read)(void *ctx, int t, int g, int r, int s, int64_t a, int64_t b, float *dst,
		    char *err, size_t errlen);
	void (*release)(void *ctx);   /* sh_close() calls it, if set */
	void *ctx;
};

struct sh_io;

struct sh_ckpt {
	char *dir;               /* the step directory */
	json_t *manifest;
	int64_t iteration;
	int tp, pp;
	struct lt_model m;
	struct st_file **shard;  /* [s * tp + r] */
	const float **at;        /* see sh_at() */
	int lock;                /* the step's reader lock (steplock.h), held until sh_close; -1 none */
	uint64_t bytes;          /* the parameters' bytes in all shards (a source: its files) */
	struct sh_source src;    /* src.read set: the values come from it (shard, at unused) */
	unsigned char *held;     /* with a source: 1 where a part exists, indexed as at[] */
	struct sh_io *io;        /* buffers of a source's reads, the last error (shards.c) */
};

/* The step directory that path names: path itself when it holds a manifest.json, else the step
 * its `latest` names, else its newest global_stepN with a manifest (saying so).  *dir is
 * malloc'd.  0, or EXIT_USAGE / EXIT_FAILED + err. */
int sh_step_dir(const char *path, char **dir, char *err, size_t errlen);

/* path: a step directory (with manifest.json) or a save directory (its `latest`, else its
 * newest global_stepN).  The step is locked for reading (steplock.h) from here to sh_close(), so
 * a train --save-keep writing into the same directory does not remove it meanwhile.  0, or
 * EXIT_USAGE (bad input) / EXIT_FAILED (I/O) + err. */
int sh_open(struct sh_ckpt *c, const char *path, struct progress *pg, char *err, size_t errlen);
/* Only the first part: finds the step and reads its manifest (c->dir, manifest, iteration, tp,
 * pp, m), so a caller can refuse early.  sh_open() does it again.  After either, also after a
 * failure, sh_close() frees what was read. */
int sh_open_manifest(struct sh_ckpt *c, const char *path, char *err, size_t errlen);
void sh_close(struct sh_ckpt *c);

/* Rank r's part of tensor t, group g, on stage s: a pointer into the mapping, or NULL (also
 * always with a source: sh_held() says whether the part exists). */
static inline size_t sh_index(const struct sh_ckpt *c, int t, int g, int r, int s)
{
	return (((size_t)t * LT_GROUPS + g) * c->tp + r) * c->pp + s;
}
static inline const float *sh_at(const struct sh_ckpt *c, int t, int g, int r, int s)
{
	return c->src.read ? NULL : c->at[sh_index(c, t, g, r, s)];
}
static inline int sh_held(const struct sh_ckpt *c, int t, int g, int r, int s)
{
	return c->src.read ? c->held[sh_index(c, t, g, r, s)] : c->at[sh_index(c, t, g, r, s)] != NULL;
}

/* A checkpoint over a source (the caller fills dir, manifest, iteration, tp, pp, m, bytes
 * first): the tables sized by them, every part absent until marked held.  0, or -1 + err. */
int sh_init_source(struct sh_ckpt *c, const struct sh_source *src, char *err, size_t errlen);
/* The last error of sh_read() or sh_compare(): which file and what. */
const char *sh_error(const struct sh_ckpt *c);
/* The stages that hold tensor t (TP rank 0's weights), as a bit mask. */
uint64_t sh_stages(const struct sh_ckpt *c, int t);

/* One row of the drift report: tensor t, group g, copies n, the largest |copy - first copy|,
 * and which copies differ from the first one by more than the tolerance ("tp01", "tp01/pp003"). */
struct sh_drift {
	int t, g, ncopies, ndiffer;
	double maxdiff;
	char differ[200];
};
/* One row per tensor and group that has two copies or more, in table order.  tolerance 0 is
 * bit for bit.  Returns the rows (malloc'd; *n of them), or NULL with *n = 0; NULL with
 * *n = -1 when a source could not be read (sh_error). */
struct sh_drift *sh_compare(const struct sh_ckpt *c, double tolerance, struct progress *pg,
			    int *n);

/* Rows [r0,r1) x columns [c0,c1) of the full tensor t, group g, into out (row-major, c1-c0 per
 * row; a 1-D tensor is one column).  Rows past the tensor's (a vocabulary padded further) are
 * zeros.  average: the mean of a replicated tensor's copies, else its first copy.  0, or -1
 * when a source could not be read (sh_error; mapped shards cannot fail). */
int sh_read(const struct sh_ckpt *c, int t, int g, int64_t r0, int64_t r1, int64_t c0,
	    int64_t c1, int average, float *out);
/* Whole rows [r0,r1) when they lie back to back in one mapping and nothing is averaged: a
 * pointer into the mapping, so a writer can pass it on without a copy.  NULL otherwise (and
 * always for a source). */
const float *sh_rows(const struct sh_ckpt *c, int t, int g, int64_t r0, int64_t r1, int average);

#endif
