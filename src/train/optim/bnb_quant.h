/* bnb_quant - bitsandbytes' nearest-code search, shared by the host (bnb.c) and the CUDA
 * backend's 8-bit Adam kernel (cuda/bnb.cu), so both pick the same code for the same value.
 *
 * code is a sorted 256-value map; x (already divided by its block's absmax) is NaN-free.  Seven
 * halvings from index 127, then a comparison against the fp32 midpoint of the two neighbours
 * (bnb's dQuantize).  A file compiled for the device defines BNB_HD as __host__ __device__
 * before including this. */
#ifndef TRAIN_BNB_QUANT_H
#define TRAIN_BNB_QUANT_H

#include <stdint.h>

#ifndef BNB_HD
#define BNB_HD
#endif

BNB_HD static inline uint8_t bnb_nearest_code(const float *code, float x)
{
	int pivot = 127, up = 255, lo = 0;
	float upper = code[255], lower = code[0], val = code[pivot];
	for (int i = 64; i > 0; i >>= 1) {
		if (x > val) {
			lo = pivot;
			lower = val;
			pivot += i;
		} else {
			up = pivot;
			upper = val;
			pivot -= i;
		}
		val = code[pivot];
	}
	if (x > val)
		return (uint8_t)(x > (upper + val) * 0.5f ? up : pivot);
	return (uint8_t)(x < (lower + val) * 0.5f ? lo : pivot);
}

#endif
