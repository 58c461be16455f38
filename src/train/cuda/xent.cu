/* xent - fused softmax cross-entropy: loss and logit gradient in one kernel, in place.
 *
 * The logits (N,Vp) are the largest activation of a GPT step (8192 x 50304 x 2 bytes = 824 MB for
 * GPT-2 at B*T = 8192), so they are never copied or converted: one block per row reads its row
 * twice - once for the log-sum-exp over the first V columns, once to overwrite it with the
 * gradient - and the second read mostly hits L2.
 *
 * Pass one is an online softmax: each thread keeps a running (max m, sum l of exp(x - m)) over its
 * columns, V-wide chunks updating it once per chunk; the block combines the pairs in a fixed tree
 * (warp butterfly, then thread 0 over the warps' pairs in order), so lse = m + log(l) is the same
 * bits every run.  The row's loss is lse - x[target].  Pass two writes, for every column c < Vp,
 *   (exp(x_c - lse) - [c == target]) * dscale   for c < V,   0 for the padded columns,
 * rounded once to the activation type.  All arithmetic is fp32 (as Megatron's fused
 * cross-entropy, which never does softmax in fp16).  In fp16 the gradient is the first tensor the
 * loss scale reaches: with a scale too large for it, (softmax - 1) * dscale overflows to -inf
 * right here, and the scaler's overflow check sees it.
 *
 * A target outside [0, V) (a corrupt index, a padded id) is counted with an integer atomicAdd into
 * *bad - integer addition is exact, so the count is deterministic - and its row gets loss 0 and a
 * zero gradient, so one bad token cannot poison a step; the caller decides what the count means.
 *
 * Vocab-parallel (TP > 1) splits the same two passes around the collectives: xent_stats is pass
 * one on this rank's slice (the slice's max, sum and the target's logit when this rank owns the
 * target), the model all-reduces them into a global lse, and xent_grad is pass two with that
 * lse.  A target of -1 means another rank owns it: no one-hot term here. */
#include "train/cuda/common.h"

#define XENT_T 512

struct ml {
	float m, l;
};

/* (m1,l1) + (m2,l2) as one softmax normaliser; -inf max means "empty" */
__device__ __forceinline__ struct ml ml_combine(struct ml a, struct ml b)
{
	float m = fmaxf(a.m, b.m);
	if (m == -INFINITY)
		return a;
	struct ml r = {m, a.l * expf(a.m - m) + b.l * expf(b.m - m)};
	return r;
}

/* The (max, sum of exp(x - max)) of x[0..Vv) for the whole block; every thread gets the result.
 * x is one row, V-aligned (V = 8 needs Vp % 8 == 0 so a chunk never leaves the row).
 * Max -inf and sum 0 when Vv is 0.  Must be called by all threads of the block. */
template <int V, typename A> __device__ struct ml row_ml(const A *x, int Vv)
{
	__shared__ struct ml wred[XENT_T / 32];
	__shared__ struct ml total;
	struct ml acc = {-INFINITY, 0.0f};
	for (int c = threadIdx.x * V; c < Vv; c += XENT_T * V) {
		float v[V];
		ld_act<V>(v, x + c);
		float cm = -INFINITY;
#pragma unroll
		for (int k = 0; k < V; k++)
			if (c + k < Vv)
				cm = fmaxf(cm, v[k]);
		float m = fmaxf(acc.m, cm);
		if (m == -INFINITY)
			continue; /* only -inf logits so far: nothing to add */
		float s = 0.0f;
#pragma unroll
		for (int k = 0; k < V; k++)
			if (c + k < Vv)
				s += expf(v[k] - m);
		acc.l = acc.l * expf(acc.m - m) + s; /* acc.m = -inf: exp(-inf) = 0 */
		acc.m = m;
	}
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) {
		struct ml other = {__shfl_xor_sync(0xffffffffu, acc.m, o),
				   __shfl_xor_sync(0xffffffffu, acc.l, o)};
		acc = ml_combine(acc, other);
	}
	if ((threadIdx.x & 31) == 0)
		wred[threadIdx.x >> 5] = acc;
	__syncthreads();
	if (threadIdx.x == 0) {
		struct ml t = wred[0];
		for (int w = 1; w < XENT_T / 32; w++)
			t = ml_combine(t, wred[w]);
		total = t;
	}
	__syncthreads();
	return total;
}

/* x[c] <- (exp(x[c] - lse) - [c == tgt]) * dscale for c < Vv, 0 for Vv <= c < Vp; all 0 when
 * zero_all.  tgt < 0: no one-hot term. */
template <int V, typename A>
__device__ void row_grad(A *x, int Vv, int Vp, float lse, int tgt, float dscale, bool zero_all)
{
	for (int c = threadIdx.x * V; c < Vp; c += XENT_T * V) {
		float v[V];
		ld_act<V>(v, x + c);
#pragma unroll
		for (int k = 0; k < V; k++) {
			int col = c + k;
			float g = 0.0f;
			if (!zero_all && col < Vv)
				g = (expf(v[k] - lse) - (col == tgt ? 1.0f : 0.0f)) * dscale;
			v[k] = g;
		}
		st_act<V>(x + c, v);
	}
}

/* losses(N) = lse - logit[target]; logits(N,Vp) <- dloss/dlogits * dscale.  Block per row. */
template <int V, typename A>
__global__ __launch_bounds__(XENT_T) void xent_k(float *losses, A *logits,
						 const int32_t *targets, int Vv, int Vp,
						 float dscale, int *bad)
{
	int n = blockIdx.x;
	A *x = logits + (size_t)n * Vp;
	int tgt = targets[n];
	bool valid = tgt >= 0 && tgt < Vv;
	float xt = valid ? act_f(x[tgt]) : 0.0f; /* read before row_grad overwrites it */
	struct ml t = row_ml<V>(x, Vv);
	float lse = t.m + logf(t.l);
	if (threadIdx.x == 0) {
		losses[n] = valid ? lse - xt : 0.0f;
		if (!valid && bad)
			atomicAdd(bad, 1);
	}
	row_grad<V>(x, Vv, Vp, lse, tgt, dscale, !valid);
}

/* mx, se, zt (N): this slice's max, sum of exp(z - max) over logits(N, 0..Vv), and the logit of
 * tl[n] (0 when tl[n] < 0).  Block per row; the logits are only read. */
template <int V, typename A>
__global__ __launch_bounds__(XENT_T) void xent_stats_k(float *mx, float *se, float *zt,
						       const A *logits, const int32_t *tl,
						       int Vv, int Vp)
{
	int n = blockIdx.x;
	const A *x = logits + (size_t)n * Vp;
	struct ml t = row_ml<V>(x, Vv);
	if (threadIdx.x == 0) {
		int tg = tl[n];
		mx[n] = t.m;
		se[n] = t.l;
		zt[n] = tg >= 0 ? act_f(x[tg]) : 0.0f;
	}
}

/* logits(N,Vp) <- (softmax - onehot(tl)) * dscale with the global lse(N).  Block per row. */
template <int V, typename A>
__global__ __launch_bounds__(XENT_T) void xent_grad_k(A *logits, const float *lse,
						      const int32_t *tl, int Vv, int Vp,
						      float dscale)
{
	int n = blockIdx.x;
	row_grad<V>(logits + (size_t)n * Vp, Vv, Vp, lse[n], tl[n], dscale, false);
}

/* The vocab-parallel statistics combined on the device (ops.h xent_rescale, xent_finish): one
 * thread per row, the host path's float arithmetic */
__global__ void xent_rescale_k(float *se, const float *mx, const float *gmx, int N)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < N)
		se[i] = mx[i] == -INFINITY ? 0.0f : se[i] * expf(mx[i] - gmx[i]);
}

__global__ void xent_finish_k(float *losses, float *lse, const float *gmx, const float *se,
			      const float *zt, const int32_t *targets, int N, int V, int *bad)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= N)
		return;
	int ok = targets[i] >= 0 && targets[i] < V;
	float l = ok ? gmx[i] + logf(se[i]) : INFINITY;
	lse[i] = l;
	losses[i] = ok ? l - zt[i] : 0.0f;
	if (!ok)
		atomicAdd(bad, 1);
}

void cu_xent_rescale(float *se, const float *mx, const float *gmx, int N)
{
	CU_ENTER();
	if (N <= 0)
		return;
	cu_launch(xent_rescale_k, (unsigned)((N + 255) / 256), 256, 0, cu.stream, se, mx, gmx, N);
	CU_LAUNCHED("xent_rescale");
}

void cu_xent_finish(float *losses, float *lse, const float *gmx, const float *se, const float *zt,
		    const int32_t *targets, int N, int V, int *bad)
{
	CU_ENTER();
	if (N <= 0)
		return;
	cu_launch(xent_finish_k, (unsigned)((N + 255) / 256), 256, 0, cu.stream, losses, lse, gmx,
		  se, zt, targets, N, V, bad);
	CU_LAUNCHED("xent_finish");
}

void cu_xent_fwd_bwd(float *losses, void *logits, const int32_t *targets, int N, int V, int Vp,
		     float dscale, int *bad)
{
	CU_ENTER();
	if (N <= 0 || Vp <= 0)
		return;
	int v8 = cu_vec8((size_t)Vp, logits);
	CU_ACT(A, if (v8) cu_launch(xent_k<8, A>, (unsigned)N, XENT_T, 0, cu.stream, losses,
				    (A *)logits, targets, V, Vp, dscale, bad);
		  else cu_launch(xent_k<1, A>, (unsigned)N, XENT_T, 0, cu.stream, losses,
				 (A *)logits, targets, V, Vp, dscale, bad));
	CU_LAUNCHED("xent");
}

void cu_xent_stats(float *mx, float *se, float *zt, const void *logits,
		   const int32_t *targets_local, int N, int Vvalid, int Vp)
{
	CU_ENTER();
	if (N <= 0 || Vp <= 0)
		return;
	int v8 = cu_vec8((size_t)Vp, logits);
	CU_ACT(A, if (v8) cu_launch(xent_stats_k<8, A>, (unsigned)N, XENT_T, 0, cu.stream, mx, se,
				    zt, (const A *)logits, targets_local, Vvalid, Vp);
		  else cu_launch(xent_stats_k<1, A>, (unsigned)N, XENT_T, 0, cu.stream, mx, se, zt,
				 (const A *)logits, targets_local, Vvalid, Vp));
	CU_LAUNCHED("xent_stats");
}

void cu_xent_grad(void *logits, const float *lse, const int32_t *targets_local, int N, int Vvalid,
		  int Vp, float dscale)
{
	CU_ENTER();
	if (N <= 0 || Vp <= 0)
		return;
	int v8 = cu_vec8((size_t)Vp, logits);
	CU_ACT(A, if (v8) cu_launch(xent_grad_k<8, A>, (unsigned)N, XENT_T, 0, cu.stream,
				    (A *)logits, lse, targets_local, Vvalid, Vp, dscale);
		  else cu_launch(xent_grad_k<1, A>, (unsigned)N, XENT_T, 0, cu.stream, (A *)logits,
				 lse, targets_local, Vvalid, Vp, dscale));
	CU_LAUNCHED("xent_grad");
}
