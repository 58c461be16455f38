/* bnb - see bnb.h. */
#include "train/optim/bnb.h"
#include "train/optim/bnb_quant.h"

#include <math.h>
#include <stdlib.h>

/* torch.linspace(start, end, steps) in fp32 as ATen's AVX2 CPU kernel computes it (the map
 * bitsandbytes builds on the host): the first half counts up from start, the second half down
 * from end, by one fp32 step; runs of 16 elements are two 8-lane vectors, each lane its
 * vector's base plus j * step (two roundings), the base and the leftover elements one fused
 * multiply-add from start or end. */
static float linspace_at(float start, float end, int steps, int i)
{
	float step = (end - start) / (float)(steps - 1);
	int half = steps / 2, vec = i < steps / 16 * 16;
	int idx = vec ? i / 8 * 8 : i, j = i - idx;
	float base = idx < half ? fmaf(step, (float)idx, start) : fmaf(-step, (float)(steps - idx - 1), end);
	if (!vec)
		return base;
	volatile float lane = (float)j * step;   /* rounded on its own, as the vector code does */
	return base + lane;
}

static int by_value(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

void bnb_dynamic_map(int is_signed, float code[256])
{
	/* create_dynamic_map(signed, max_exponent_bits=7, total_bits=8): exponent i = 0..6 holds
	 * 2^i (signed) or 2^(i+1) (unsigned) fractions, the midpoints of linspace(0.1, 1, k + 1),
	 * each scaled by 10^(i-6) in double (Python floats) and stored as fp32; then 0 and 1. */
	static const double scale[7] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1e0};
	int n = 0;
	for (int i = 0; i < 7; i++) {
		int k = is_signed ? 1 << i : 1 << (i + 1);
		for (int j = 0; j < k; j++) {
			float lo = linspace_at(0.1f, 1.0f, k + 1, j), hi = linspace_at(0.1f, 1.0f, k + 1, j + 1);
			float mean = (lo + hi) / 2.0f;
			code[n++] = (float)(scale[i] * (double)mean);
			if (is_signed)
				code[n++] = (float)(-scale[i] * (double)mean);
		}
	}
	code[n++] = 0.0f;
	code[n++] = 1.0f;
	qsort(code, 256, sizeof *code, by_value);
}

uint8_t bnb_quantize(const float code[256], float x)
{
	return bnb_nearest_code(code, x);
}

void bnb_quantize_blockwise(const float code[256], const float *x, size_t n, uint8_t *q,
			    float *absmax)
{
#pragma omp parallel for schedule(static)
	for (size_t b = 0; b < bnb_blocks(n); b++) {
		size_t a = b * BNB_BLOCK, e = a + BNB_BLOCK < n ? a + BNB_BLOCK : n;
		float mx = 0.0f;
		for (size_t i = a; i < e; i++)
			mx = fmaxf(mx, fabsf(x[i]));
		absmax[b] = mx;
		float r = 1.0f / mx;
		for (size_t i = a; i < e; i++)
			q[i] = bnb_quantize(code, mx > 0.0f ? x[i] * r : 0.0f);
	}
}

void bnb_dequantize_blockwise(const float code[256], const uint8_t *q, const float *absmax,
			      size_t n, float *x)
{
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++)
		x[i] = code[q[i]] * absmax[i / BNB_BLOCK];
}

void bnb_adam8bit(float *master, float *param, const float *g, uint8_t *c1, uint8_t *c2,
		  float *absmax1, float *absmax2, size_t n, const float code1[256],
		  const float code2[256], float lr, float b1, float b2, float eps, float wd,
		  float gscale, int step)
{
	float corr1 = 1.0f - powf(b1, (float)step), corr2 = sqrtf(1.0f - powf(b2, (float)step));
	float step_size = -lr * corr2 / corr1, decay = 1.0f - lr * wd, ceps = corr2 * eps;
	/* blocks are independent: any thread count gives the same bits */
#pragma omp parallel for schedule(static)
	for (size_t b = 0; b < bnb_blocks(n); b++) {
		size_t a = b * BNB_BLOCK, e = a + BNB_BLOCK < n ? a + BNB_BLOCK : n;
		float s1[BNB_BLOCK], s2[BNB_BLOCK], m1 = 0.0f, m2 = 0.0f;
		for (size_t i = a; i < e; i++) {
			float gi = g[i] * gscale;
			float v = code2[c2[i]] * absmax2[b];
			v = v * b2 + (1.0f - b2) * gi * gi;
			float m = code1[c1[i]] * absmax1[b];
			m = m * b1 + (1.0f - b1) * gi;
			s1[i - a] = m;
			s2[i - a] = v;
			m1 = fmaxf(m1, fabsf(m));
			m2 = fmaxf(m2, fabsf(v));
		}
		absmax1[b] = m1;
		absmax2[b] = m2;
		for (size_t i = a; i < e; i++) {
			float m = s1[i - a], v = s2[i - a];
			float w = master[i] + step_size * (m / (sqrtf(v) + ceps));
			if (wd > 0.0f)
				w = w * decay;
			master[i] = w;
			if (param != master)
				param[i] = w;
			uint8_t q = bnb_quantize(code1, m1 > 0.0f ? m / m1 : 0.0f);
			if (signbit(code1[q]) != signbit(m))
				q = m > 0.0f ? q + 1 : q - 1;
			c1[i] = q;
			c2[i] = bnb_quantize(code2, m2 > 0.0f ? v / m2 : 0.0f);
		}
	}
}

void bnb_adam32(float *master, float *param, const float *g, float *s1, float *s2, size_t n,
		float lr, float b1, float b2, float eps, float wd, float gscale, int step)
{
	float corr1 = 1.0f - powf(b1, (float)step), corr2 = sqrtf(1.0f - powf(b2, (float)step));
	float step_size = -lr * corr2 / corr1, decay = 1.0f - lr * wd, ceps = eps * corr2;
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++) {
		float gi = g[i] * gscale;
		float m = s1[i] * b1 + (1.0f - b1) * gi;
		float v = s2[i] * b2 + (1.0f - b2) * (gi * gi);
		s1[i] = m;
		s2[i] = v;
		float w = master[i] + step_size * (m / (sqrtf(v) + ceps));
		if (wd > 0.0f)
			w = w * decay;
		master[i] = w;
		if (param != master)
			param[i] = w;
	}
}
