/* mt19937 - numpy's legacy RandomState, as far as Megatron's sample order uses it.
 *
 * Megatron shuffles its GPT index arrays with np.random.RandomState(seed).shuffle(), so the
 * training order is a function of that generator's exact output.  This is the subset needed
 * to reproduce it bit for bit:
 *
 *   mt_seed       init_genrand(seed): the reference MT19937 seeding that RandomState(int) uses
 *                 (numpy's mt19937_seed; an integer seed never goes through init_by_array)
 *   mt_next32     the tempered 32-bit output (genrand_int32)
 *   mt_interval   numpy's random_interval(max): a uniform value in [0, max] by masking to the
 *                 smallest 2^k-1 >= max and rejecting; above 0xffffffff each draw takes two
 *                 outputs, high word first (numpy's mt19937_next64)
 *   mt_shuffle_*  legacy RandomState.shuffle of a 1-D array: for i = n-1 down to 1,
 *                 j = random_interval(i), swap a[i] and a[j]
 *
 * numpy's permutation(n) is arange(n) followed by that shuffle.  The newer Generator API draws
 * differently (Lemire's bounded integers); nothing here reproduces it.  Check values, from
 * numpy: RandomState(1234) first outputs 822569775, 2137449171; permutation(10) is
 * [2,8,4,9,1,6,7,3,0,5] with seed 0 and [8,1,5,0,7,2,9,4,3,6] with seed 42. */
#ifndef TRAIN_MT19937_H
#define TRAIN_MT19937_H

#include <stdint.h>

#define MT_N 624

struct mt19937 {
	uint32_t key[MT_N];
	int pos;              /* next word of key to temper; MT_N: regenerate first */
};

void mt_seed(struct mt19937 *mt, uint32_t seed);
uint32_t mt_next32(struct mt19937 *mt);
/* two outputs, the first one in the high word */
uint64_t mt_next64(struct mt19937 *mt);
/* uniform in [0, max], inclusive; 0 for max 0 without drawing */
uint64_t mt_interval(struct mt19937 *mt, uint64_t max);

void mt_shuffle_i32(struct mt19937 *mt, int32_t *a, int64_t n);
void mt_shuffle_u32(struct mt19937 *mt, uint32_t *a, int64_t n);
void mt_shuffle_i64(struct mt19937 *mt, int64_t *a, int64_t n);

#endif
