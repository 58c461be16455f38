/* mt19937 - numpy's legacy RandomState, as far as Megatron's sample order uses it.
 *
 * Megatron shuffles its GPT index arrays with np.random.RandomState(seed).shuffle(), so the
 * training order is a function of that generator's exact output.  This is the subset needed
 * to reproduce it bit for bit:
 *
 *   mt_seed       init_genrand(seed): the reference MT19937 seeding that RandomState(int) uses
 *                 (numpy's mt19937_seed; an integer seed never goes through init_by_array),
 *                 and torch's CPU generator's manual_seed
 *   mt_seed_by_array  init_by_array(key, n): Python's random.seed(int) over the integer's
 *                 32-bit words, low word first (ckpt/mdsw.c writes the state it leaves)
 *   mt_next32     the tempered 32-bit output (genrand_int32)
 *   mt_interval   numpy's random_interval(max): a uniform value in [0, max] by masking to the
 *                 smallest 2^k-1 >= max and rejecting; above 0xffffffff each draw takes two
 *                 outputs, high word first (numpy's mt19937_next64)
 *   mt_shuffle_*  legacy RandomState.shuffle of a 1-D array: for i = n-1 down to 1,
 *                 j = random_interval(i), swap a[i] and a[j] (a Python list is shuffled the
 *                 same way)
 *   mt_double     random_sample() / random(): (a >> 5) * 2^26 + (b >> 6), over 2^53, from two
 *                 outputs a, b: a double in [0, 1) with 53 random bits
 *   mt_randint    randint(lo, hi) of the default int64 dtype: lo + random_interval(hi-lo-1)
 *                 (the legacy masked rejection; no draw when hi - lo is 1)
 *   mt_choice_p   choice(n, p=p) for one value: cdf = cumsum(p), cdf /= cdf[-1], then the
 *                 first index whose cdf exceeds one random_sample (searchsorted side='right')
 *   mt_geometric  geometric(p): for p >= 1/3 a search (one random_sample, walking the
 *                 cumulative probabilities), else inversion, ceil(log(1 - U) / log(1 - p))
 *
 * Megatron's BERT and T5 datasets (data/bertdata.h) draw their masks with these, one
 * RandomState(seed + i) per sample.  The geometric inversion is the legacy one (mtrand's
 * rk_geometric_inversion, kept for RandomState when numpy 1.21 moved Generator.geometric to
 * ziggurat exponentials), checked against numpy 1.24 on 2000 seeds.
 *
 * mt64_* is another generator: C++'s std::mt19937_64 (MT19937-64 with the standard's seeding),
 * which Megatron's helpers.cpp shuffles the BERT samples mapping with.  Check value, from the C++
 * standard: the 10000th output of a default-constructed (seed 5489) engine is
 * 9981545732273789042; for std::mt19937 it is 4123659995, which mt_seed/mt_next32 give too
 * (std::mt19937(seed) and RandomState(seed) seed alike).
 *
 * numpy's permutation(n) is arange(n) followed by that shuffle.  The newer Generator API draws
 * differently (Lemire's bounded integers); nothing here reproduces it.  Check values, from
 * numpy: RandomState(1234) first outputs 822569775, 2137449171; permutation(10) is
 * [2,8,4,9,1,6,7,3,0,5] with seed 0 and [8,1,5,0,7,2,9,4,3,6] with seed 42. */
#ifndef LMTK_MT19937_H
#define LMTK_MT19937_H

#include <stdint.h>

#define MT_N 624

struct mt19937 {
	uint32_t key[MT_N];
	int pos;              /* next word of key to temper; MT_N: regenerate first */
};

void mt_seed(struct mt19937 *mt, uint32_t seed);
/* 1 <= n */
void mt_seed_by_array(struct mt19937 *mt, const uint32_t *key, int n);
uint32_t mt_next32(struct mt19937 *mt);
/* two outputs, the first one in the high word */
uint64_t mt_next64(struct mt19937 *mt);
/* uniform in [0, max], inclusive; 0 for max 0 without drawing */
uint64_t mt_interval(struct mt19937 *mt, uint64_t max);

void mt_shuffle_i32(struct mt19937 *mt, int32_t *a, int64_t n);
void mt_shuffle_u32(struct mt19937 *mt, uint32_t *a, int64_t n);
void mt_shuffle_i64(struct mt19937 *mt, int64_t *a, int64_t n);

double mt_double(struct mt19937 *mt);
/* lo < hi */
int64_t mt_randint(struct mt19937 *mt, int64_t lo, int64_t hi);
/* p: n >= 1 non-negative weights summing to (about) 1, as numpy's choice checks them */
int64_t mt_choice_p(struct mt19937 *mt, const double *p, int n);
/* 0 < p <= 1 */
int64_t mt_geometric(struct mt19937 *mt, double p);

#define MT64_N 312

struct mt19937_64 {
	uint64_t key[MT64_N];
	int pos;
};

void mt64_seed(struct mt19937_64 *mt, uint64_t seed);
uint64_t mt64_next(struct mt19937_64 *mt);

#endif
