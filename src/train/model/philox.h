/* philox - counter-based random numbers (Philox4x32-10, Salmon et al., SC'11), host and device.
 *
 * Every random number in training is a pure function of (key, element index): the initial
 * weights draw element i of tensor X from (seed ^ hash(X), i), a dropout mask draws element i
 * from (the site's seed, i).  Nothing carries generator state, so:
 * - the same seed gives the same model whatever the parallel layout: a rank draws exactly the
 *   elements of its own shard by their global index, never the full tensor;
 * - the backward pass regenerates the forward's dropout mask instead of storing it;
 * - the CPU and CUDA backends draw identical masks, and resuming needs no RNG state beyond the
 *   seed and the step.
 * Header-only so the CUDA plugin compiles the same code for the device. */
#ifndef TRAIN_PHILOX_H
#define TRAIN_PHILOX_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define PHILOX_FN static inline __host__ __device__
#else
#define PHILOX_FN static inline
#endif

struct philox4 {
	uint32_t v[4];
};

PHILOX_FN struct philox4 philox(uint64_t key, uint64_t c_lo, uint64_t c_hi)
{
	uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
	uint32_t c0 = (uint32_t)c_lo, c1 = (uint32_t)(c_lo >> 32);
	uint32_t c2 = (uint32_t)c_hi, c3 = (uint32_t)(c_hi >> 32);
	for (int r = 0; r < 10; r++) {
		uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
		uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
		c1 = (uint32_t)p1;
		c3 = (uint32_t)p0;
		c0 = n0;
		c2 = n2;
		k0 += 0x9E3779B9u;
		k1 += 0xBB67AE85u;
	}
	struct philox4 r = {{c0, c1, c2, c3}};
	return r;
}

/* A 32-bit draw for element i of stream `key`: four consecutive elements share one block. */
PHILOX_FN uint32_t philox_u32(uint64_t key, uint64_t i)
{
	return philox(key, i >> 2, 0).v[i & 3];
}

/* Dropout: element i is kept (and scaled by 1/(1-p)) when its uniform draw is >= p. */
PHILOX_FN float philox_keep(uint64_t key, uint64_t i, float p)
{
	float u = (float)(philox_u32(key, i) >> 8) * (1.0f / 16777216.0f);
	return u >= p ? 1.0f / (1.0f - p) : 0.0f;
}

/* N(0,1) for element i of stream `key` (Box-Muller on two 32-bit draws of its own block). */
PHILOX_FN double philox_normal(uint64_t key, uint64_t i)
{
	struct philox4 r = philox(key, i, 1);
	double u1 = ((double)r.v[0] + 1.0) * (1.0 / 4294967296.0);   /* (0, 1] */
	double u2 = (double)r.v[1] * (1.0 / 4294967296.0);
	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
}

/* The global (unsplit) index of element e of a tensor-parallel shard whose elements come in
 * rows of `cols`, `stride` apart in the full tensor, the first at `base`: a row-split weight's
 * rows (cols = its columns per rank, stride = all columns, base = rank * cols); a column- or
 * vocab-split one is one row (base = rank * its elements, cols = its elements); a replicated
 * tensor is base 0, cols = its elements.  Draws keyed by this index are the layout's own. */
PHILOX_FN uint64_t philox_gindex(uint64_t e, uint64_t base, uint64_t cols, uint64_t stride)
{
	return e / cols * stride + base + e % cols;
}

/* Mixes a stream key from parts (seed, step, layer, site ...): splitmix64's finaliser. */
PHILOX_FN uint64_t philox_mix(uint64_t a, uint64_t b)
{
	uint64_t z = a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2));
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

#endif
