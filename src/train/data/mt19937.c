#include "train/data/mt19937.h"

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
