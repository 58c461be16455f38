#include "mt19937.h"

#include <math.h>

#define MT_M 397
#define MT_MATRIX_A 0x9908b0dfU
#define MT_UPPER 0x80000000U
#define MT_LOWER 0x7fffffffU

void mt_seed(struct mt19937 *mt, uint32_t seed)
{
	mt->key[0] = seed;
	for (uint32_t i = 1; i < MT_N; i++) {
		uint32_t p = mt->key[i - 1];
		mt->key[i] = 1812433253U * (p ^ (p >> 30)) + i;  /* mod 2^32 by uint32_t */
	}
	mt->pos = MT_N;
}

void mt_seed_by_array(struct mt19937 *mt, const uint32_t *key, int n)
{
	uint32_t *k = mt->key, i = 1, j = 0;
	mt_seed(mt, 19650218U);
	for (uint32_t c = MT_N > n ? MT_N : (uint32_t)n; c; c--) {
		k[i] = (k[i] ^ ((k[i - 1] ^ (k[i - 1] >> 30)) * 1664525U)) + key[j] + j;
		if (++i >= MT_N) {
			k[0] = k[MT_N - 1];
			i = 1;
		}
		if (++j >= (uint32_t)n)
			j = 0;
	}
	for (uint32_t c = MT_N - 1; c; c--) {
		k[i] = (k[i] ^ ((k[i - 1] ^ (k[i - 1] >> 30)) * 1566083941U)) - i;
		if (++i >= MT_N) {
			k[0] = k[MT_N - 1];
			i = 1;
		}
	}
	k[0] = 0x80000000U;   /* MSB 1: a non-zero initial state */
	mt->pos = MT_N;
}

/* the next 624 words of the recurrence, in place */
static void mt_generate(struct mt19937 *mt)
{
	uint32_t *k = mt->key, y;
	int i;

	for (i = 0; i < MT_N - MT_M; i++) {
		y = (k[i] & MT_UPPER) | (k[i + 1] & MT_LOWER);
		k[i] = k[i + MT_M] ^ (y >> 1) ^ (-(y & 1U) & MT_MATRIX_A);
	}
	for (; i < MT_N - 1; i++) {
		y = (k[i] & MT_UPPER) | (k[i + 1] & MT_LOWER);
		k[i] = k[i + (MT_M - MT_N)] ^ (y >> 1) ^ (-(y & 1U) & MT_MATRIX_A);
	}
	y = (k[MT_N - 1] & MT_UPPER) | (k[0] & MT_LOWER);
	k[MT_N - 1] = k[MT_M - 1] ^ (y >> 1) ^ (-(y & 1U) & MT_MATRIX_A);
	mt->pos = 0;
}

uint32_t mt_next32(struct mt19937 *mt)
{
	if (mt->pos >= MT_N)
		mt_generate(mt);
	uint32_t y = mt->key[mt->pos++];
	y ^= y >> 11;
	y ^= (y << 7) & 0x9d2c5680U;
	y ^= (y << 15) & 0xefc60000U;
	y ^= y >> 18;
	return y;
}

uint64_t mt_next64(struct mt19937 *mt)
{
	uint64_t hi = mt_next32(mt);  /* sequenced: numpy's compiled order, checked against randint */
	return hi << 32 | mt_next32(mt);
}

uint64_t mt_interval(struct mt19937 *mt, uint64_t max)
{
	uint64_t mask = max, v;

	if (max == 0)
		return 0;
	mask |= mask >> 1;
	mask |= mask >> 2;
	mask |= mask >> 4;
	mask |= mask >> 8;
	mask |= mask >> 16;
	mask |= mask >> 32;
	if (max <= 0xffffffffU) {
		while ((v = mt_next32(mt) & mask) > max)
			;
	} else {
		while ((v = mt_next64(mt) & mask) > max)
			;
	}
	return v;
}

#define MT_SHUFFLE(name, type)                                               \
	void name(struct mt19937 *mt, type *a, int64_t n)                    \
	{                                                                    \
		for (int64_t i = n - 1; i >= 1; i--) {                       \
			int64_t j = (int64_t)mt_interval(mt, (uint64_t)i);   \
			type t = a[i];                                       \
			a[i] = a[j];                                         \
			a[j] = t;                                            \
		}                                                            \
	}

MT_SHUFFLE(mt_shuffle_i32, int32_t)
MT_SHUFFLE(mt_shuffle_u32, uint32_t)
MT_SHUFFLE(mt_shuffle_i64, int64_t)

double mt_double(struct mt19937 *mt)
{
	uint32_t a = mt_next32(mt) >> 5;  /* sequenced: the high bits come from the first output */
	uint32_t b = mt_next32(mt) >> 6;
	return ((double)a * 67108864.0 + (double)b) / 9007199254740992.0;
}

int64_t mt_randint(struct mt19937 *mt, int64_t lo, int64_t hi)
{
	return lo + (int64_t)mt_interval(mt, (uint64_t)(hi - lo - 1));
}

int64_t mt_choice_p(struct mt19937 *mt, const double *p, int n)
{
	double cdf[n], last, u;
	int i;

	cdf[0] = p[0];
	for (i = 1; i < n; i++)  /* cumsum: left to right */
		cdf[i] = cdf[i - 1] + p[i];
	last = cdf[n - 1];       /* cdf /= cdf[-1]: every element by the same scalar */
	for (i = 0; i < n; i++)
		cdf[i] /= last;
	u = mt_double(mt);
	for (i = 0; i < n && cdf[i] <= u; i++)  /* searchsorted(u, side='right') */
		;
	return i;
}

int64_t mt_geometric(struct mt19937 *mt, double p)
{
	if (p >= 0.333333333333333333333333) {
		double u = mt_double(mt), prod = p, sum = p, q = 1.0 - p;
		int64_t x = 1;
		while (u > sum) {
			prod *= q;
			sum += prod;
			x++;
		}
		return x;
	}
	return (int64_t)ceil(log(1.0 - mt_double(mt)) / log(1.0 - p));
}

/* --- std::mt19937_64 ---------------------------------------------------------------------- */

#define MT64_M 156
#define MT64_MATRIX_A 0xb5026f5aa96619e9ULL
#define MT64_UPPER 0xffffffff80000000ULL  /* the top 33 bits (r = 31) */
#define MT64_LOWER 0x7fffffffULL

void mt64_seed(struct mt19937_64 *mt, uint64_t seed)
{
	mt->key[0] = seed;
	for (uint64_t i = 1; i < MT64_N; i++) {
		uint64_t p = mt->key[i - 1];
		mt->key[i] = 6364136223846793005ULL * (p ^ (p >> 62)) + i;
	}
	mt->pos = MT64_N;
}

static void mt64_generate(struct mt19937_64 *mt)
{
	uint64_t *k = mt->key, y;

	for (int i = 0; i < MT64_N; i++) {
		y = (k[i] & MT64_UPPER) | (k[(i + 1) % MT64_N] & MT64_LOWER);
		k[i] = k[(i + MT64_M) % MT64_N] ^ (y >> 1) ^ (-(y & 1ULL) & MT64_MATRIX_A);
	}
	mt->pos = 0;
}

uint64_t mt64_next(struct mt19937_64 *mt)
{
	if (mt->pos >= MT64_N)
		mt64_generate(mt);
	uint64_t y = mt->key[mt->pos++];
	y ^= (y >> 29) & 0x5555555555555555ULL;
	y ^= (y << 17) & 0x71d67fffeda60000ULL;
	y ^= (y << 37) & 0xfff7eee000000000ULL;
	y ^= y >> 43;
	return y;
}
