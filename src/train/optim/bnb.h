/* bnb - bitsandbytes' 8-bit Adam (Dettmers et al. 2021, "8-bit Optimizers via Block-wise
 * Quantization"), as --use-bnb-optimizer runs it: bnb.optim.Adam8bit with Megatron-DeepSpeed's
 * settings (block-wise, percentile clipping off, no update-norm cap, min_8bit_size 4096).
 *
 * The state of a tensor of n >= BNB_MIN_8BIT elements is two uint8 codes per element plus one
 * fp32 absmax per block of BNB_BLOCK elements, per moment: about 2 bytes per parameter instead
 * of 8.  Blocks count from the start of each tensor (the last one may be short), so a block is
 * a property of the tensor and never of the way the state is sharded.  Smaller tensors, and the
 * word embedding (StableEmbedding: Megatron-DeepSpeed overrides its optim_bits to 32), keep
 * two fp32 moments and run bnb's 32-bit Adam.
 *
 * The code books are bitsandbytes' dynamic ("tree") maps: a sign bit (first moment only), a
 * run of zero bits giving the decimal exponent 10^-6 .. 10^0, and the remaining bits a linear
 * fraction between 0.1 and 1 (create_dynamic_map(signed) with 7 exponent bits): 256 sorted
 * values in [-1, 1] for the first moment, [0, 1] for the second, 0 and 1 included.  The
 * fractions are midpoints of torch.linspace(0.1, 1, k) in fp32, reproduced here bit for bit.
 *
 * Quantizing x (already divided by its block's absmax) picks the nearest code by bnb's binary
 * search: seven halvings from index 127 and a final comparison against the fp32 midpoint of the
 * two neighbours.
 *
 * One step on a block (bnb's kOptimizerStatic8bit2StateBlockwise, in this order):
 *   g  = g * gscale                              (unscale + clip, folded in as optim.c does)
 *   s2 = code2[c2] * absmax2 * b2 + (1 - b2) * g * g
 *   s1 = code1[c1] * absmax1 * b1 + (1 - b1) * g
 *   absmax1, absmax2 = max |s1|, max |s2| over the block's elements (the new ones)
 *   p += -lr * sqrt(1 - b2^t) / (1 - b1^t) * s1 / (sqrt(s2) + sqrt(1 - b2^t) * eps)
 *   p *= 1 - lr * wd                             (when wd > 0: decoupled, after the update)
 *   c1 = quantize(code1, s1 / absmax1), moved one code towards s1's sign when the nearest code
 *        has the other sign; c2 = quantize(code2, s2 / absmax2)
 * The update reads the fresh fp32 moments, not their quantized copies.  Two choices of ours where
 * the CUDA kernel has no exact CPU counterpart: s / absmax is an IEEE division (bnb's
 * __fdividef is a 2-ulp approximation), and a block whose new absmax is 0 stores the code of 0
 * (bnb divides 0 by 0 there; the decoded moments are 0 either way). */
#ifndef TRAIN_BNB_H
#define TRAIN_BNB_H

#include <stddef.h>
#include <stdint.h>

#define BNB_BLOCK 2048          /* elements per absmax block (bitsandbytes' 2-state blockwise) */
#define BNB_MIN_8BIT 4096       /* smaller tensors keep fp32 state (Optimizer8bit's min_8bit_size) */

/* The 256-value dynamic map: signed (first moment) or unsigned (second moment), sorted. */
void bnb_dynamic_map(int is_signed, float code[256]);

/* The index of the code nearest x (bnb's search).  x is NaN-free. */
uint8_t bnb_quantize(const float code[256], float x);

/* Blocks of x(n) -> codes q(n) and absmax(ceil(n / BNB_BLOCK)), bnb's quantize_blockwise:
 * absmax = max |x| over the block, q = quantize(x * (1 / absmax)); and back: x = code[q] *
 * absmax. */
void bnb_quantize_blockwise(const float code[256], const float *x, size_t n, uint8_t *q,
			    float *absmax);
void bnb_dequantize_blockwise(const float code[256], const uint8_t *q, const float *absmax,
			      size_t n, float *x);

/* 8-bit Adam on n elements starting at a block boundary of their tensor (see above); absmax1/2
 * hold the n elements' blocks.  master is updated, and param too when it is another buffer
 * (fp32 here: the CPU backend's working weights). */
void bnb_adam8bit(float *master, float *param, const float *g, uint8_t *c1, uint8_t *c2,
		  float *absmax1, float *absmax2, size_t n, const float code1[256],
		  const float code2[256], float lr, float b1, float b2, float eps, float wd,
		  float gscale, int step);

/* bnb's 32-bit Adam (kOptimizer32bit2State, ADAM): the same update with fp32 moments s1, s2. */
void bnb_adam32(float *master, float *param, const float *g, float *s1, float *s2, size_t n,
		float lr, float b1, float b2, float eps, float wd, float gscale, int step);

/* Blocks of a tensor of n elements: ceil(n / BNB_BLOCK). */
static inline size_t bnb_blocks(size_t n) { return (n + BNB_BLOCK - 1) / BNB_BLOCK; }

/* 1 when a tensor of n elements gets 8-bit state (the word embedding never does). */
static inline int bnb_is_8bit(size_t n) { return n >= BNB_MIN_8BIT; }

/* Optimizer-state bytes of a tensor of n elements: 8 per element in fp32, else 2 codes per
 * element and 2 absmax per block. */
static inline size_t bnb_state_bytes(size_t n, int fp32)
{
	return fp32 || !bnb_is_8bit(n) ? 8 * n : 2 * n + 8 * bnb_blocks(n);
}

#endif
