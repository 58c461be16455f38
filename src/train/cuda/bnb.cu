/* bnb - bitsandbytes' 8-bit and 32-bit Adam for --use-bnb-optimizer (train/bnb.h has the update).
 *
 * The 8-bit kernel runs one thread block per quantization block of BNB_BLOCK (2048) elements,
 * eight elements per thread, strided by the block's width so loads and stores coalesce.  Both
 * 256-value maps sit in shared memory (2 KiB); each thread decodes its moments, updates them in
 * fp32 and keeps them in registers while the block takes the two new absmax values (fmaxf: exact,
 * so the order of the reduction cannot matter), then updates the weights from the fp32 moments
 * and re-encodes them with the host's nearest-code search (bnb_quant.h).
 *
 * Every product and sum is an explicitly rounded intrinsic in the CPU backend's order (bnb.c):
 * the compiler may not contract them into FMAs, so a GPU writes the same codes, absmax, master
 * weights and moments as the CPU backend, bit for bit (train_cudaops checks it through the
 * executor).  One pass over g, master, the codes and the 16-bit weights: memory bound, about 8.5
 * bytes per element (bitsandbytes' kernel moves the same bytes). */
#include <math.h>

#include "train/cuda/common.h"
#define BNB_HD __host__ __device__
#include "train/optim/bnb.h"
#include "train/optim/bnb_quant.h"

#define BNB_T 256
#define BNB_PER (BNB_BLOCK / BNB_T)
#define ADAM32_T 256

__device__ __forceinline__ float block_max(float v, float *red)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	if (threadIdx.x % 32 == 0)
		red[threadIdx.x / 32] = v;
	__syncthreads();
	float r = red[0];
	for (int w = 1; w < BNB_T / 32; w++)
		r = fmaxf(r, red[w]);
	return r;
}

template <typename A>
__global__ void adam8bit_k(float *master, A *param, const float *g, uint8_t *c1, uint8_t *c2,
			   float *absmax1, float *absmax2, size_t n, const float *qmap, float b1,
			   float b2, float step_size, float decay, float ceps, int has_wd,
			   float gscale)
{
	__shared__ float code1[256], code2[256], red1[BNB_T / 32], red2[BNB_T / 32];
	for (int i = threadIdx.x; i < 256; i += BNB_T) {
		code1[i] = qmap[i];
		code2[i] = qmap[256 + i];
	}
	size_t b = blockIdx.x, a = b * BNB_BLOCK;
	size_t e = a + BNB_BLOCK < n ? a + BNB_BLOCK : n;
	float am1 = absmax1[b], am2 = absmax2[b];
	__syncthreads();
	float s1[BNB_PER], s2[BNB_PER], m1 = 0.0f, m2 = 0.0f;
#pragma unroll
	for (int k = 0; k < BNB_PER; k++) {
		size_t i = a + threadIdx.x + (size_t)k * BNB_T;
		s1[k] = s2[k] = 0.0f;
		if (i >= e)
			continue;
		float gi = __fmul_rn(g[i], gscale);
		float v = __fmul_rn(code2[c2[i]], am2);
		v = __fadd_rn(__fmul_rn(v, b2), __fmul_rn(__fmul_rn(1.0f - b2, gi), gi));
		float m = __fmul_rn(code1[c1[i]], am1);
		m = __fadd_rn(__fmul_rn(m, b1), __fmul_rn(1.0f - b1, gi));
		s1[k] = m;
		s2[k] = v;
		m1 = fmaxf(m1, fabsf(m));
		m2 = fmaxf(m2, fabsf(v));
	}
	m1 = block_max(m1, red1);
	m2 = block_max(m2, red2);
	if (threadIdx.x == 0) {   /* every thread has read the old values before the barrier */
		absmax1[b] = m1;
		absmax2[b] = m2;
	}
#pragma unroll
	for (int k = 0; k < BNB_PER; k++) {
		size_t i = a + threadIdx.x + (size_t)k * BNB_T;
		if (i >= e)
			continue;
		float m = s1[k], v = s2[k];
		float w = __fadd_rn(master[i],
				    __fmul_rn(step_size, __fdiv_rn(m, __fadd_rn(__fsqrt_rn(v), ceps))));
		if (has_wd)
			w = __fmul_rn(w, decay);
		master[i] = w;
		if (param)
			param[i] = f_act<A>(w);
		uint8_t q = bnb_nearest_code(code1, m1 > 0.0f ? __fdiv_rn(m, m1) : 0.0f);
		if ((signbit(code1[q]) != 0) != (signbit(m) != 0))
			q = m > 0.0f ? q + 1 : q - 1;
		c1[i] = q;
		c2[i] = bnb_nearest_code(code2, m2 > 0.0f ? __fdiv_rn(v, m2) : 0.0f);
	}
}

template <typename A>
__global__ void adam32_k(float *master, A *param, const float *g, float *s1, float *s2,
			 size_t n, float b1, float b2, float step_size, float decay, float ceps,
			 int has_wd, float gscale)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float gi = __fmul_rn(g[i], gscale);
		float m = __fadd_rn(__fmul_rn(s1[i], b1), __fmul_rn(1.0f - b1, gi));
		float v = __fadd_rn(__fmul_rn(s2[i], b2), __fmul_rn(1.0f - b2, __fmul_rn(gi, gi)));
		s1[i] = m;
		s2[i] = v;
		float w = __fadd_rn(master[i],
				    __fmul_rn(step_size, __fdiv_rn(m, __fadd_rn(__fsqrt_rn(v), ceps))));
		if (has_wd)
			w = __fmul_rn(w, decay);
		master[i] = w;
		if (param)
			param[i] = f_act<A>(w);
	}
}

/* The step's constants, computed on the host as bnb.c computes them. */
struct bnb_consts {
	float step_size, decay, ceps;
};

static struct bnb_consts consts(const char *what, float lr, float b1, float b2, float eps,
				float wd, int step)
{
	if (step < 1)
		cu_die("%s: step %d; steps count from 1 (bias correction divides by 1 - b^step)",
		       what, step);
	float corr1 = 1.0f - powf(b1, (float)step), corr2 = sqrtf(1.0f - powf(b2, (float)step));
	struct bnb_consts c;
	c.step_size = -lr * corr2 / corr1;
	c.decay = 1.0f - lr * wd;
	c.ceps = corr2 * eps;
	return c;
}

void cu_adam8bit(float *master, void *param, const float *g, uint8_t *c1, uint8_t *c2,
		 float *absmax1, float *absmax2, size_t n, const float *qmap, float lr, float b1,
		 float b2, float eps, float wd, float gscale, int step)
{
	CU_ENTER();
	if (!n)
		return;
	struct bnb_consts c = consts("adam8bit", lr, b1, b2, eps, wd, step);
	size_t nb = (n + BNB_BLOCK - 1) / BNB_BLOCK;
	if (nb > 0x7fffffffu)
		cu_die("adam8bit: %zu blocks of %d elements exceed one launch's grid", nb, BNB_BLOCK);
	void *p = param == (void *)master ? NULL : param;
	CU_ACT(A, cu_launch(adam8bit_k<A>, dim3((unsigned)nb), BNB_T, 0, cu.stream, master, (A *)p,
			    g, c1, c2, absmax1, absmax2, n, qmap, b1, b2, c.step_size, c.decay,
			    c.ceps, (int)(wd > 0.0f), gscale));
	CU_LAUNCHED("adam8bit");
}

void cu_adam32(float *master, void *param, const float *g, float *m, float *v, size_t n, float lr,
	       float b1, float b2, float eps, float wd, float gscale, int step)
{
	CU_ENTER();
	if (!n)
		return;
	struct bnb_consts c = consts("adam32", lr, b1, b2, eps, wd, step);
	void *p = param == (void *)master ? NULL : param;
	CU_ACT(A, cu_launch(adam32_k<A>, cu_grid(n, ADAM32_T), ADAM32_T, 0, cu.stream, master,
			    (A *)p, g, m, v, n, b1, b2, c.step_size, c.decay, c.ceps,
			    (int)(wd > 0.0f), gscale));
	CU_LAUNCHED("adam32");
}
