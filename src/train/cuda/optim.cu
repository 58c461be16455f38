/* optim - the optimizer's element-wise kernels: AdamW and scaling of fp32 buffers.
 *
 * AdamW follows apex FusedAdam in adam_w_mode (Megatron-DeepSpeed's optimizer), which is also
 * torch.optim.AdamW up to the order of operations:
 *   g = grad * gscale                (loss-scale removal and clipping folded into one factor)
 *   m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2
 *   master -= lr * ((m / bc1) / (sqrt(v / bc2) + eps) + wd * master)
 *   param = bf16(master)             (the working copy the next forward reads)
 * with bc1 = 1 - b1^step, bc2 = 1 - b2^step computed once on the host in double.  Master weights
 * and both moments stay fp32; the bf16 copy is rounded to nearest even once per step from the
 * fp32 master, never updated in bf16, which is what keeps small updates from vanishing.  Each
 * element is independent, so a grid-stride loop with plain 4-byte coalesced accesses runs at
 * memory bandwidth; nothing here reduces, so nothing can depend on scheduling. */
#include <math.h>

#include "train/cuda/common.h"

#define OPT_T 256

/* x(n) *= s */
__global__ void scale_k(float *x, float s, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		x[i] *= s;
}

/* master, m, v (n) fp32 updated in place; param (n) bf16 written when not NULL */
__global__ void adamw_k(float *master, bf16 *param, const float *g, float *m, float *v, size_t n,
			float lr, float b1, float b2, float eps, float wd, float gscale, float bc1,
			float bc2)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float gi = g[i] * gscale;
		float mi = b1 * m[i] + (1.0f - b1) * gi;
		float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
		float w = master[i];
		w -= lr * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + wd * w);
		m[i] = mi;
		v[i] = vi;
		master[i] = w;
		if (param)
			param[i] = __float2bfloat16(w);
	}
}

void cu_scale(float *x, float s, size_t n)
{
	CU_ENTER();
	if (!n || s == 1.0f)
		return;
	cu_launch(scale_k, cu_grid(n, OPT_T), OPT_T, 0, cu.stream, x, s, n);
	CU_LAUNCHED("scale");
}

void cu_adamw(float *master, void *param, const float *g, float *m, float *v, size_t n, float lr,
	      float b1, float b2, float eps, float wd, float gscale, int step)
{
	CU_ENTER();
	if (!n)
		return;
	if (step < 1)
		cu_die("adamw: step %d; steps count from 1 (bias correction divides by "
		       "1 - b^step)", step);
	float bc1 = (float)(1.0 - pow((double)b1, step));
	float bc2 = (float)(1.0 - pow((double)b2, step));
	bf16 *p = param == (void *)master ? NULL : (bf16 *)param;
	cu_launch(adamw_k, cu_grid(n, OPT_T), OPT_T, 0, cu.stream, master, p, g, m, v, n, lr, b1,
		b2, eps, wd, gscale, bc1, bc2);
	CU_LAUNCHED("adamw");
}
