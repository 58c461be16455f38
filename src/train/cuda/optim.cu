/* optim - the optimizer's element-wise kernels: AdamW and scaling of fp32 buffers.
 *
 * AdamW follows apex FusedAdam in adam_w_mode (Megatron-DeepSpeed's optimizer), which is also
 * torch.optim.AdamW up to the order of operations:
 *   g = grad * gscale                (loss-scale removal and clipping folded into one factor)
 *   m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2
 *   master -= lr * ((m / bc1) / (sqrt(v / bc2) + eps) + wd * master)
 *   param = act(master)              (the 16-bit working copy the next forward reads)
 * with bc1 = 1 - b1^step, bc2 = 1 - b2^step computed once on the host in double.  Master weights
 * and both moments stay fp32; the bf16 or fp16 copy is rounded to nearest even once per step from
 * the fp32 master, never updated in 16 bits, which is what keeps small updates from vanishing
 * (Megatron's fp16 and bf16 optimizers alike).  Each element is independent, so a grid-stride
 * loop with plain 4-byte coalesced accesses runs at memory bandwidth; nothing here reduces, so
 * nothing can depend on scheduling.  The one-launch AdamW gives a segment marked lr_mult (the
 * word embedding) lr * lr_mult: --embedding-lr-mult. */
#include <math.h>

#include "train/cuda/common.h"
#include "train/model/philox.h"

#define OPT_T 256

/* x(n) *= s */
__global__ void scale_k(float *x, float s, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		x[i] *= s;
}

/* One element of AdamW: master, m, v updated in place, the 16-bit copy written when p is set.
 * Shared by the per-tensor and the multi-tensor kernels so both round the same way. */
template <typename A>
__device__ __forceinline__ void adamw_elem(float *master, A *p, float g, float *m, float *v,
					   float lr, float b1, float b2, float eps, float wd,
					   float gscale, float bc1, float bc2)
{
	float gi = g * gscale;
	float mi = b1 * *m + (1.0f - b1) * gi;
	float vi = b2 * *v + (1.0f - b2) * gi * gi;
	float w = *master;
	w -= lr * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + wd * w);
	*m = mi;
	*v = vi;
	*master = w;
	if (p)
		*p = f_act<A>(w);
}

/* master, m, v (n) fp32 updated in place; param (n) written when not NULL */
template <typename A>
__global__ void adamw_k(float *master, A *param, const float *g, float *m, float *v, size_t n,
			float lr, float b1, float b2, float eps, float wd, float gscale, float bc1,
			float bc2)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		adamw_elem(master + i, param ? param + i : NULL, g[i], m + i, v + i, lr, b1, b2, eps,
			   wd, gscale, bc1, bc2);
}

/* All tensors in one launch.  The tensors' elements laid end to end ([0, total), seg[k] holding
 * [first, first + n)) are cut into chunks of MULTI_CHUNK; a block takes chunks in a grid-stride
 * loop, finds the tensor holding the chunk's first element by bisection (one thread, into
 * shared memory), and each thread walks forward from there over its elements of the chunk:
 * a chunk spans few tensors, so the walk costs nothing next to the memory traffic. */
#define MULTI_CHUNK 4096
template <typename A>
__global__ void adamw_multi_k(float *master, A *param, const float *g, float *m, float *v,
			      const struct adam_seg *seg, int nseg, size_t total, float lr,
			      float lr_mult, float b1, float b2, float eps, float wd, float gscale,
			      float bc1, float bc2, const struct ops_step *ds)
{
	__shared__ int k0;
	if (ds) {   /* the device's decision (ops_step): the same for every thread */
		if (!ds->taken)
			return;
		lr = ds->lr;
		gscale = ds->gscale;
		bc1 = ds->bc1;
		bc2 = ds->bc2;
	}
	size_t nchunk = (total + MULTI_CHUNK - 1) / MULTI_CHUNK;
	for (size_t c = blockIdx.x; c < nchunk; c += gridDim.x) {
		size_t c0 = c * MULTI_CHUNK, c1 = c0 + MULTI_CHUNK < total ? c0 + MULTI_CHUNK : total;
		if (threadIdx.x == 0) {
			int lo = 0, hi = nseg - 1;   /* the last seg with first <= c0 */
			while (lo < hi) {
				int mid = (lo + hi + 1) / 2;
				if (seg[mid].first <= c0)
					lo = mid;
				else
					hi = mid - 1;
			}
			k0 = lo;
		}
		__syncthreads();
		int k = k0;
		for (size_t j = c0 + threadIdx.x; j < c1; j += blockDim.x) {
			while (j >= seg[k].first + seg[k].n)
				k++;
			size_t e = j - seg[k].first, a = seg[k].a + e, s = seg[k].s + e;
			adamw_elem(master + a, param ? param + a : NULL, g[a], m + s, v + s,
				   seg[k].lr_mult ? lr * lr_mult : lr, b1, b2, eps,
				   seg[k].decay ? wd : 0.0f, gscale, bc1, bc2);
		}
		__syncthreads();   /* k0 is rewritten for the next chunk */
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
	void *p = param == (void *)master ? NULL : param;
	CU_ACT(A, cu_launch(adamw_k<A>, cu_grid(n, OPT_T), OPT_T, 0, cu.stream, master, (A *)p, g,
			    m, v, n, lr, b1, b2, eps, wd, gscale, bc1, bc2));
	CU_LAUNCHED("adamw");
}

void cu_adamw_multi(float *master, void *param, const float *g, float *m, float *v,
		    const struct adam_seg *seg, int nseg, size_t total, float lr, float lr_mult,
		    float b1, float b2, float eps, float wd, float gscale, int step)
{
	CU_ENTER();
	if (!total || nseg < 1)
		return;
	if (step < 1)
		cu_die("adamw: step %d; steps count from 1 (bias correction divides by "
		       "1 - b^step)", step);
	float bc1 = (float)(1.0 - pow((double)b1, step));
	float bc2 = (float)(1.0 - pow((double)b2, step));
	void *p = param == (void *)master ? NULL : param;
	size_t nchunk = (total + MULTI_CHUNK - 1) / MULTI_CHUNK;
	CU_ACT(A, cu_launch(adamw_multi_k<A>, cu_grid(nchunk, 1), OPT_T, 0, cu.stream, master,
			    (A *)p, g, m, v, seg, nseg, total, lr, lr_mult, b1, b2, eps, wd, gscale,
			    bc1, bc2, (const struct ops_step *)NULL));
	CU_LAUNCHED("adamw_multi");
}

void cu_adamw_multi_step(float *master, void *param, const float *g, float *m, float *v,
			 const struct adam_seg *seg, int nseg, size_t total, float lr_mult,
			 float b1, float b2, float eps, float wd, const struct ops_step *s)
{
	CU_ENTER();
	if (!total || nseg < 1)
		return;
	void *p = param == (void *)master ? NULL : param;
	size_t nchunk = (total + MULTI_CHUNK - 1) / MULTI_CHUNK;
	CU_ACT(A, cu_launch(adamw_multi_k<A>, cu_grid(nchunk, 1), OPT_T, 0, cu.stream, master,
			    (A *)p, g, m, v, seg, nseg, total, 0.0f, lr_mult, b1, b2, eps, wd, 0.0f,
			    1.0f, 1.0f, s));
	CU_LAUNCHED("adamw_multi");
}

/* The update decision of ops.h step_decide, one thread: optim.c's arithmetic, in the same
 * types, so a deferred step decides what a synchronous one would. */
__global__ void step_decide_k(struct ops_step *s, const struct ops_step *prev, const int *bad)
{
	/* every read before the first write (the step model counts the struct's sectors so) */
	int nbad = *bad - s->masked;
	double norm = sqrt(s->sumsq) / (double)s->loss_scale;
	int finite = isfinite(s->loss[0]) && isfinite(s->loss[1]) && isfinite(norm);
	int taken = finite && nbad == 0 && !s->overflow;
	float gscale = 1.0f / s->loss_scale;
	if (s->clip > 0) {
		double coeff = (double)s->clip / (norm + 1e-6);
		if (coeff < 1.0)
			gscale *= (float)coeff;
	}
	int k = s->prev_pending && prev->taken ? 1 : 0;
	float lr = s->lr_if[k], bc1 = s->bc1_if[k], bc2 = s->bc2_if[k];
	s->bad = nbad;
	s->taken = taken;
	s->gscale = gscale;
	s->lr = lr;
	s->bc1 = bc1;
	s->bc2 = bc2;
}

void cu_step_decide(struct ops_step *s, const struct ops_step *prev, const int *bad)
{
	CU_ENTER();
	cu_launch(step_decide_k, 1, 1, 0, cu.stream, s, prev, bad);
	CU_LAUNCHED("step_decide");
}

/* --- LAMB (apex FusedLAMB) and SGD: see ops.h ---------------------------------------------------
 * lamb_update writes the update u into a buffer of its own and leaves its norm to cu_sumsq (the
 * same fixed-order reduction as the gradient norm); lamb_apply recomputes u from m, v and the
 * weights, which are unchanged in between, so it equals the one whose norm was taken, and adds
 * --lamb-layerwise-noise's draws: philox_normal at each element's global index, the CPU's z
 * (in double, rounded to float; only the fused multiply-add may round the sum differently). */
__device__ __forceinline__ float lamb_u(float m, float v, float w, float bc1, float bc2, float eps,
					float wd)
{
	return (m / bc1) / (sqrtf(v / bc2) + eps) + wd * w;
}

__global__ void lamb_update_k(float *u, const float *master, const float *g, float *m, float *v,
			      size_t n, float b1, float b2, float eps, float wd, float gscale,
			      float clipdiv, float bc1, float bc2)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float gi = g[i] * gscale / clipdiv;
		float mi = b1 * m[i] + (1.0f - b1) * gi;
		float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
		m[i] = mi;
		v[i] = vi;
		u[i] = lamb_u(mi, vi, master[i], bc1, bc2, eps, wd);
	}
}

/* nscale != 0: --lamb-layerwise-noise, element i's draw keyed by its global index (ops.h) */
template <typename A>
__global__ void lamb_apply_k(float *master, A *param, const float *m, const float *v, size_t n,
			     float eps, float wd, float ratio, float bc1, float bc2, float nscale,
			     uint64_t nkey, uint64_t e0, uint64_t base, uint64_t cols,
			     uint64_t stride)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float w = master[i];
		float u = lamb_u(m[i], v[i], w, bc1, bc2, eps, wd);
		if (nscale != 0.0f)
			u += nscale * (float)philox_normal(nkey, philox_gindex(e0 + i, base, cols,
									       stride));
		w -= ratio * u;
		master[i] = w;
		if (param)
			param[i] = f_act<A>(w);
	}
}

template <typename A>
__global__ void sgd_k(float *master, A *param, const float *g, float *buf, size_t n, float lr,
		      float momentum, float wd, float gscale, int first)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float w = master[i];
		float d = g[i] * gscale + wd * w;
		if (momentum != 0.0f) {
			d = first ? d : momentum * buf[i] + d;
			buf[i] = d;
		}
		w -= lr * d;
		master[i] = w;
		if (param)
			param[i] = f_act<A>(w);
	}
}

static float lamb_bc(float b, int step)   /* apex: std::pow(float, int) is a double */
{
	return (float)(1.0 - pow((double)b, step));
}

double cu_lamb_update(const float *master, const float *g, float *m, float *v, size_t n, float b1,
		      float b2, float eps, float wd, float gscale, float clipdiv, int step)
{
	CU_ENTER();
	if (!n)
		return 0;
	if (step < 1)
		cu_die("lamb: step %d; steps count from 1", step);
	/* u has its own buffer: cu_sumsq takes the scratch for its partial sums */
	static float *u;
	static size_t have;
	if (n > have) {
		if (u)
			CU_CHECK(cudaFree(u));
		CU_CHECK(cudaMalloc((void **)&u, n * sizeof(float)));
		have = n;
	}
	cu_launch(lamb_update_k, cu_grid(n, OPT_T), OPT_T, 0, cu.stream, u, master, g, m, v, n, b1,
		  b2, eps, wd, gscale, clipdiv, lamb_bc(b1, step), lamb_bc(b2, step));
	CU_LAUNCHED("lamb_update");
	return cu_sumsq(u, n);
}

void cu_lamb_apply(float *master, void *param, const float *m, const float *v, size_t n, float b1,
		   float b2, float eps, float wd, float ratio, int step, const struct lamb_noise *nz)
{
	CU_ENTER();
	if (!n)
		return;
	void *p = param == (void *)master ? NULL : param;
	struct lamb_noise z = nz ? *nz : (struct lamb_noise){0, 0, 0, 1, 0, 0.0f};
	CU_ACT(A, cu_launch(lamb_apply_k<A>, cu_grid(n, OPT_T), OPT_T, 0, cu.stream, master,
			    (A *)p, m, v, n, eps, wd, ratio, lamb_bc(b1, step), lamb_bc(b2, step),
			    z.scale, z.key, z.e0, z.base, z.cols, z.stride));
	CU_LAUNCHED("lamb_apply");
}

void cu_sgd(float *master, void *param, const float *g, float *buf, size_t n, float lr,
	    float momentum, float wd, float gscale, int first)
{
	CU_ENTER();
	if (!n)
		return;
	void *p = param == (void *)master ? NULL : param;
	CU_ACT(A, cu_launch(sgd_k<A>, cu_grid(n, OPT_T), OPT_T, 0, cu.stream, master, (A *)p, g,
			    buf, n, lr, momentum, wd, gscale, first));
	CU_LAUNCHED("sgd");
}
