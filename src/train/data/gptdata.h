/* gptdata - Megatron's GPT samples: which tokens sample i is, in Megatron's order, and blending.
 *
 * A GPT dataset is a split [start, end) of the sequences of a PREFIX.bin/.idx pair (Megatron
 * calls them documents; its doc_idx array in the .idx plays no part).  Megatron-DeepSpeed's
 * megatron/data/gpt_dataset.py (_build_index_mappings) and helpers.cpp (build_sample_idx,
 * build_blending_indices) turn it into three arrays, and training reads sample i as:
 *
 *   doc_idx      (epochs * docs) int32: the split's documents, repeated once per epoch and
 *                shuffled; with a "separate last epoch" the first epochs-1 copies are shuffled
 *                together and the last copy on its own, so a small final epoch is not spread
 *                over the whole run
 *   sample_idx   (ns+1, 2) int32: where sample k starts, as (position in doc_idx, token offset);
 *                samples are seq_length+1 tokens and overlap by one (the last target of sample k
 *                is the first input of k+1), so ns = (epochs * tokens_per_epoch - 1) / seq_length
 *   shuffle_idx  ns entries, uint32 (int64 from 2^32-2 samples on): the order samples are read
 *                in; with a separate last epoch the samples of the first epochs-1 epochs are
 *                shuffled among themselves and those of the last epoch among themselves
 *
 * Epochs are the fewest that give num_samples samples; the last epoch is "separate" when it
 * contributes fewer than int(0.95 * samples per epoch) samples.  Every shuffle is numpy's legacy
 * RandomState.shuffle from ONE RandomState(seed) (mt19937.h), drawn in Megatron's order: doc_idx
 * (one or two shuffles), then shuffle_idx (one or two).  A different draw order, generator or
 * rounding would give a different but equally plausible order, and a run resumed across Megatron
 * and lmtk would silently see other data; so the arithmetic here follows the Python line by line
 * and tests/cli/train-gptdata.sh compares all three arrays with a numpy port of Megatron's code.
 *
 * Building walks every sample once (ns+1 steps) and shuffles both arrays; for BLOOM-scale runs that is
 * seconds to minutes and gigabytes, so, like Megatron (which keeps three .npy files), the result
 * is cached next to the data (or, when that directory is not writable, in the user's own cache
 * directory: gptdata_cache_fallback) in one file, PREFIX_lmtk_indexmap_{ns}ns_{sl}sl_{seed}s_{start}-{end}
 * .map: a 128-byte header (magic, version, the key, the sizes and mtimes of the .idx and .bin it
 * was built from, the array lengths, a 64-bit checksum of header and arrays) and the three
 * arrays, each padded to 8 bytes.  It is written to a temporary file, fsynced and renamed, so
 * ranks racing to build it each publish a whole, identical file.  Loading maps it and trusts
 * nothing: a different key, a dataset whose size or mtime changed, a length that does not
 * match, a bad checksum or an out-of-range entry makes it stale or corrupt, and it is rebuilt.
 * Megatron trusts its .npy files by name alone and happily reuses them for a changed dataset.
 *
 * Blending (--data-path W1 P1 W2 P2 ...): weights are normalised (Python's sequential sum); each
 * dataset's split builds ceil(N * w * 1.005) samples; the blend has as many samples as were
 * built in total, and sample i comes from the dataset whose count lags its share of max(i, 1)
 * the most (strict >, so the first dataset wins ties), after normalising the weights again as
 * BlendableDataset does with np.sum.  The 0.5% margin is there for the first N blended samples,
 * the ones training reads; further on a dataset's share can exceed what it built (Megatron would
 * raise IndexError there, gptdata_sample returns an error).
 *
 * The 0.95 cutoff is BigScience's (Megatron-DeepSpeed 846c0879, November 2021); NVIDIA's
 * Megatron-LM and earlier BigScience code used 0.80, and give another order whenever the last
 * epoch's share falls between the two.
 *
 * Host byte order is assumed little-endian, as the .bin/.idx format and the cache both are. */
#ifndef TRAIN_GPTDATA_H
#define TRAIN_GPTDATA_H

#include <stddef.h>
#include <stdint.h>

/* --- the data: PREFIX.idx and PREFIX.bin, mapped ------------------------------------------- */

struct gptdata_ds {
	char *prefix;
	int dtype;                      /* 8 uint16 or 4 int32: the only token dtypes */
	unsigned itemsize;              /* bytes per token */
	int64_t n;                      /* sequences ("documents" to GPT) */
	int32_t *sizes;                 /* n tokens per sequence, copied: the .idx has them unaligned */
	const unsigned char *pointers;  /* n little-endian int64 byte offsets into bin, in the .idx */
	const unsigned char *bin;       /* the token data */
	uint64_t bin_len;
	/* what the cache compares to know the data did not change */
	uint64_t idx_size, bin_size;
	int64_t idx_mtime_ns, bin_mtime_ns;
	void *idx_map, *bin_map;        /* NULL when the fields above were filled by hand */
	size_t idx_map_len, bin_map_len;
	char *cache_dir;                /* where its index caches go when no directory is given:
					 * NULL beside the data, else gptdata_cache_fallback's */
};

/* Opens PREFIX.bin/.idx through lib/idx.h (every field checked against the file sizes, so
 * sampling needs no checks; prefix may be the .idx's or .bin's name) and maps the .bin.  0; -1 +
 * err when a file cannot be read; -2 + err when it is not a valid MMIDIDX v1 index of uint16 or
 * int32 tokens matching its .bin, or names no dataset but one mkindex wrote ("did you mean"). */
int gptdata_open(struct gptdata_ds *ds, const char *prefix, char *err, size_t errlen);
void gptdata_close(struct gptdata_ds *ds);

/* Megatron's get_train_valid_test_split_(): "949,50,1" (or '/'-separated, or one number) padded
 * to three, normalised, idx[i+1] = idx[i] + round(f_i * n) (half to even), then idx[1..3] -=
 * idx[3] - n.  0, or -1 + err when the string is not three non-negative numbers with a positive
 * sum (where Python's float() or Megatron's assert would fail). */
int gptdata_split(const char *s, int64_t n_docs, int64_t idx[4], char *err, size_t errlen);

/* --- one split's index -------------------------------------------------------------------- */

struct gptdata_key {
	int64_t start, end;     /* the split: sequences [start, end) */
	int64_t num_samples;    /* asked for; ns built is at least this */
	int32_t seq_length;
	uint32_t seed;          /* Megatron's --seed (default 1234) */
};

enum { GPTDATA_BUILT = 0, GPTDATA_CACHE_HIT, GPTDATA_BUILT_UNSAVED };

struct gptdata_index {
	struct gptdata_key key;
	int64_t tokens_per_epoch;
	int32_t epochs;
	int separate_last_epoch;
	int64_t shuffle_first;  /* shuffle_idx[0, shuffle_first) is one shuffle, the rest another */
	int64_t ndoc;           /* doc_idx entries: epochs * (end - start) */
	int64_t ns;             /* samples: sample_idx has ns+1 rows, shuffle_idx ns entries */
	int32_t *doc_idx;       /* (ndoc) sequence numbers */
	int32_t *sample_idx;    /* (ns+1, 2) position in doc_idx, token offset in that sequence */
	int shuffle_wide;       /* shuffle_idx is int64 (ns >= 2^32-2), else uint32 */
	void *shuffle_idx;      /* (ns) */
	int cache;              /* GPTDATA_BUILT, _CACHE_HIT or _BUILT_UNSAVED (gptdata_index_get) */
	void *map;              /* the cache file the arrays point into, when loaded from one */
	size_t map_len;
};

/* Builds the three arrays as _build_index_mappings does, sizes being the whole dataset's tokens
 * per sequence.  0, or -1 + err for a key Megatron would reject or overflow on (empty split,
 * fewer than 2 tokens, seq_length < 2, more than 2^31-1 doc_idx entries) or out of memory. */
int gptdata_build(struct gptdata_index *x, const int32_t *sizes, const struct gptdata_key *k,
		  char *err, size_t errlen);
/* on: gptdata_build draws the progress line (lib/progress.h, on stderr) - entries of doc_idx,
 * sample_idx and shuffle_idx made, of ndoc + 2 * ns - for the one rank that reports; off by
 * default.  A large corpus's index takes seconds to minutes. */
void gptdata_show_progress(int on);
void gptdata_index_free(struct gptdata_index *x);

static inline int64_t gptdata_shuffle_at(const struct gptdata_index *x, int64_t i)
{
	return x->shuffle_wide ? ((const int64_t *)x->shuffle_idx)[i]
			       : (int64_t)((const uint32_t *)x->shuffle_idx)[i];
}

/* The seq_length+1 tokens of sample i (0 <= i < ns), in training order, into out: what
 * GPTDataset.__getitem__(i) returns.  0, or -1 + err if i is out of range or the index does not
 * belong to ds (it then names the sample). */
int gptdata_sample(const struct gptdata_ds *ds, const struct gptdata_index *x, int64_t i,
		   int32_t *out, char *err, size_t errlen);

/* --- the cache ---------------------------------------------------------------------------- */

enum { GPTDATA_CACHE_MISSING = 1, GPTDATA_CACHE_STALE, GPTDATA_CACHE_CORRUPT };

/* PREFIX_lmtk_indexmap_{ns}ns_{sl}sl_{seed}s_{start}-{end}.map, in dir instead of next to the
 * data when dir is not NULL.  malloc'd. */
char *gptdata_cache_path(const char *prefix, const char *dir, const struct gptdata_key *k);
/* 0 with x filled (pointing into the mapped file); else GPTDATA_CACHE_MISSING, _STALE or
 * _CORRUPT with err saying why, and x empty: rebuild. */
int gptdata_cache_load(struct gptdata_index *x, const struct gptdata_ds *ds,
		       const struct gptdata_key *k, const char *path, char *err, size_t errlen);
/* Writes x atomically (temporary file, fsync, rename, fsync of the directory).  0 or -1 + err. */
int gptdata_cache_save(const struct gptdata_index *x, const struct gptdata_ds *ds,
		       const char *path, char *err, size_t errlen);
/* Where the index caches of the dataset at prefix go when no cache directory is given: NULL
 * (beside the data) when the data's directory is writable.  Else the data is someone else's, or
 * on a read-only filesystem: a private directory, ${XDG_CACHE_HOME:-$HOME/.cache}/lmtk, made if
 * need be (malloc'd), so such data costs one index build per user, not one per run; or NULL
 * again when there is none (the index is then built in memory each run).  note gets the one
 * line that says which ("" when beside the data). */
char *gptdata_cache_fallback(const char *prefix, char *note, size_t notelen);
/* The cached index if it is good, else builds it and saves it: in cache_dir when given, else
 * where ds->cache_dir says (a cache beside the data is still used first when there is one).
 * 0 with x->cache telling which happened and, unless it was a hit, err saying why the cache was
 * not used or not saved; -1 + err when it cannot be built (see gptdata_build; also k->end beyond
 * the dataset). */
int gptdata_index_get(struct gptdata_index *x, const struct gptdata_ds *ds,
		      const struct gptdata_key *k, const char *cache_dir, char *err, size_t errlen);

/* --- blending ----------------------------------------------------------------------------- */

/* analyze_data_prefix(): out[i] = w[i] / sum, summed left to right.  0, or -1 + err when a weight
 * is negative or not finite or they sum to zero. */
int gptdata_blend_weights(const double *w, int n, double *out, char *err, size_t errlen);
/* Samples a dataset of normalised weight w builds for a blend of n: ceil(n * w * 1.005). */
int64_t gptdata_blend_samples(int64_t n, double w);
/* BlendableDataset's normalisation: out[i] = w[i] / np.sum(w), np.sum being numpy's pairwise
 * summation (which differs from a left-to-right sum from 8 weights on).  0, or -1 when the sum
 * is not positive. */
int gptdata_blend_normalise(const double *w, int n, double *out);
/* build_blending_indices() over weights renormalised with np.sum's pairwise summation, as
 * BlendableDataset does: blended sample i is sample dataset_sample_index[i] of dataset
 * dataset_index[i].  size is the sum of the datasets' ns.  0, or -1 when n is not in 1..254 or
 * the weights sum to zero. */
int gptdata_blend(const double *weights, int n, int64_t size, uint8_t *dataset_index,
		  int64_t *dataset_sample_index);

#endif
