/* reduce - deterministic reductions: column sums (bias and layer-norm weight gradients, where no
 * GEMM epilogue or layer-norm kernel computes them on the way: matmul.cu, norm.cu) and the
 * whole-array sum of squares and finiteness check the optimizer needs.
 *
 * No float atomics anywhere: the order in which partial sums meet is fixed by the problem size,
 * so a run repeats bit for bit and a test can compare gradients for equality.  Both reductions
 * work in two passes.
 *
 * Column sums of a (N,C) activation matrix: the rows are cut into S slices of R consecutive rows
 * (S and R depend only on N).  Pass one launches a (channel tile, slice) grid; a block is 32 x 8
 * threads, each thread owning V consecutive channels (V = 8 with 16-byte loads, else 1) and
 * summing every 8th row of the slice in increasing order; the 8 row-lanes are then added in order
 * through shared memory and the block writes one fp32 partial per channel and slice.  Pass two
 * adds the S partials of each channel in slice order into the destination (+=).  The layer-norm
 * variant sums dy * xhat next to dy in the same pass, recomputing xhat from the saved mean and
 * rstd instead of storing it.  Reading a row slice per block keeps loads coalesced along
 * channels; the partials cost S * C floats of scratch (S <= 256).
 *
 * Sum of squares: a grid whose size depends only on n accumulates x*x in fp64 per thread
 * (grid-stride), reduces each block in a fixed tree, and a one-thread pass adds the block
 * partials in order.  The result is copied to pinned host memory and the stream synchronised;
 * the interface returns a double, so every call is a synchronisation point (call it on the one
 * flat gradient buffer, not per tensor).  all_within raises a device flag on any Inf/NaN (or value
 * beyond the limit: fp16's overflow) with an
 * atomic store: an fp16 overflow makes many threads of many blocks find one, and plain stores of
 * the same word from unordered threads are a data race in CUDA's memory model even when they
 * store the same value (the CPU executor reports it). */
#include "train/cuda/common.h"

#define CS_TX 32 /* channel lanes per block (each V channels) */
#define CS_TY 8  /* row lanes per block */

/* part(S,C) = per-slice column sums of dy(N,C); with LN also part(S..2S, C) of dy * xhat.
 * grid (ceil(C / (32 V)), S), block (32, 8). */
template <int V, bool LN, typename A>
__global__ __launch_bounds__(CS_TX *CS_TY) void colsum_part_k(float *part, const A *dy,
							      const A *x, const float *mean,
							      const float *rstd, int N, int C,
							      int R, int S)
{
	__shared__ float red[LN ? 2 : 1][CS_TY][CS_TX * V];
	int tx = threadIdx.x, ty = threadIdx.y;
	int c = (blockIdx.x * CS_TX + tx) * V; /* first of this thread's V channels */
	int s = blockIdx.y;
	int r0 = s * R, r1 = min(N, r0 + R);
	float a0[V], a1[V];
#pragma unroll
	for (int k = 0; k < V; k++)
		a0[k] = a1[k] = 0.0f;
	if (c < C) {
		for (int n = r0 + ty; n < r1; n += CS_TY) {
			float g[V];
			ld_act<V>(g, dy + (size_t)n * C + c);
			if constexpr (LN) {
				float xv[V];
				ld_act<V>(xv, x + (size_t)n * C + c);
				float mu = mean[n], rs = rstd[n];
#pragma unroll
				for (int k = 0; k < V; k++)
					a1[k] += g[k] * ((xv[k] - mu) * rs);
			}
#pragma unroll
			for (int k = 0; k < V; k++)
				a0[k] += g[k];
		}
	}
#pragma unroll
	for (int k = 0; k < V; k++) {
		red[0][ty][tx * V + k] = a0[k];
		if constexpr (LN)
			red[LN ? 1 : 0][ty][tx * V + k] = a1[k];
	}
	__syncthreads();
	if (ty == 0 && c < C) {
#pragma unroll
		for (int k = 0; k < V; k++) {
			float t0 = 0.0f, t1 = 0.0f;
			for (int y = 0; y < CS_TY; y++) {
				t0 += red[0][y][tx * V + k];
				if constexpr (LN)
					t1 += red[LN ? 1 : 0][y][tx * V + k];
			}
			part[(size_t)s * C + c + k] = t0;
			if constexpr (LN)
				part[(size_t)(S + s) * C + c + k] = t1;
		}
	}
}

/* d0(C) += sum over slices of part(S,C); d1(C) += sum of part(S..2S, C).  One thread a channel. */
__global__ void colsum_fin_k(float *d0, float *d1, const float *part, int C, int S)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= C)
		return;
	if (d0) {
		float t = 0.0f;
		for (int s = 0; s < S; s++)
			t += part[(size_t)s * C + c];
		d0[c] += t;
	}
	if (d1) {
		float t = 0.0f;
		for (int s = 0; s < S; s++)
			t += part[(size_t)(S + s) * C + c];
		d1[c] += t;
	}
}

template <int V, bool LN, typename A>
static void colsum_launch(float *part, const void *dy, const void *x, const float *mean,
			  const float *rstd, int N, int C, int R, int S)
{
	dim3 grid((unsigned)((C + CS_TX * V - 1) / (CS_TX * V)), (unsigned)S), block(CS_TX, CS_TY);
	cu_launch(colsum_part_k<V, LN, A>, grid, block, 0, cu.stream, part, (const A *)dy,
		  (const A *)x, mean, rstd, N, C, R, S);
	CU_LAUNCHED("colsum_part");
}

void cu_colsum(float *d0, float *d1, const void *dy, const void *x, const float *mean,
	       const float *rstd, int N, int C)
{
	int ln = x && d1;
	if (N <= 0 || C <= 0 || !(d0 || ln))
		return;
	int S = (N + 255) / 256; /* slices of 256 rows, at most 256 slices */
	if (S > 256)
		S = 256;
	int R = (N + S - 1) / S;
	float *part = (float *)cu_scratch((size_t)S * C * (ln ? 2 : 1) * sizeof(float));
	int v8 = cu_vec8((size_t)C, dy, ln ? x : nullptr);
	CU_ACT(A, if (ln && v8) colsum_launch<8, true, A>(part, dy, x, mean, rstd, N, C, R, S);
		  else if (ln) colsum_launch<1, true, A>(part, dy, x, mean, rstd, N, C, R, S);
		  else if (v8) colsum_launch<8, false, A>(part, dy, x, mean, rstd, N, C, R, S);
		  else colsum_launch<1, false, A>(part, dy, x, mean, rstd, N, C, R, S));
	cu_colsum_fin(d0, ln ? d1 : nullptr, part, C, S);
}

void cu_colsum_fin(float *d0, float *d1, const float *part, int C, int S)
{
	if (C <= 0 || !(d0 || d1))
		return;
	cu_launch(colsum_fin_k, (C + 255) / 256, 256, 0, cu.stream, d0, d1, part, C, S);
	CU_LAUNCHED("colsum_fin");
}

/* d(n) += s(n), one thread an element: a bias gradient a GEMM epilogue wrote (matmul.cu) */
__global__ void vec_acc_k(float *d, const float *s, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		d[i] += s[i];
}

void cu_vec_acc(float *d, const float *s, int n)
{
	if (n <= 0)
		return;
	cu_launch(vec_acc_k, (n + 255) / 256, 256, 0, cu.stream, d, s, n);
	CU_LAUNCHED("vec_acc");
}

/* --- sum of squares, finiteness --- */

#define RED_T 256

/* part(G) = per-block sums of g(n)^2 in fp64; grid G fixed by n. */
__global__ __launch_bounds__(RED_T) void sumsq_part_k(double *part, const float *g, size_t n)
{
	__shared__ double wsum[RED_T / 32];
	double acc = 0.0;
	for (size_t i = blockIdx.x * (size_t)RED_T + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * RED_T) {
		double x = g[i];
		acc = fma(x, x, acc);
	}
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		acc += __shfl_xor_sync(0xffffffffu, acc, o);
	if ((threadIdx.x & 31) == 0)
		wsum[threadIdx.x >> 5] = acc;
	__syncthreads();
	if (threadIdx.x == 0) {
		double t = 0.0;
		for (int w = 0; w < RED_T / 32; w++)
			t += wsum[w];
		part[blockIdx.x] = t;
	}
}

/* out = sum of part(G) in order (acc: out += that sum); one thread */
__global__ void sumsq_fin_k(double *out, const double *part, int G, int acc)
{
	double t = 0.0;
	for (int i = 0; i < G; i++)
		t += part[i];
	*out = acc ? *out + t : t;
}

static void sumsq_queue(double *dres, const float *g, size_t n, int acc)
{
	size_t per_block = (size_t)RED_T * 16;
	size_t G = (n + per_block - 1) / per_block;
	if (G > 1024)
		G = 1024;
	double *part = (double *)cu_scratch(G * sizeof(double));
	cu_launch(sumsq_part_k, (unsigned)G, RED_T, 0, cu.stream, part, g, n);
	CU_LAUNCHED("sumsq_part");
	cu_launch(sumsq_fin_k, 1, 1, 0, cu.stream, dres, part, (int)G, acc);
	CU_LAUNCHED("sumsq_fin");
}

double cu_sumsq(const float *g, size_t n)
{
	CU_ENTER();
	if (n == 0)
		return 0.0;
	double *dres = (double *)cu.dsmall, *hres = (double *)cu.hsmall;
	sumsq_queue(dres, g, n, 0);
	CU_CHECK(cudaMemcpyAsync(hres, dres, sizeof(double), cudaMemcpyDeviceToHost, cu.stream));
	CU_CHECK(cudaStreamSynchronize(cu.stream));
	return *hres;
}

/* the step's sum of squares, left on the device (ops.h sumsq_acc): no synchronisation */
void cu_sumsq_acc(double *acc, const float *g, size_t n)
{
	CU_ENTER();
	if (n)
		sumsq_queue(acc, g, n, 1);
}

/* *acc += sum(losses(N)) / kept, one block: thread t sums elements t, t + RED_T, ... in fp64,
 * then a fixed tree - the same bits at every launch, whatever the schedule */
__global__ __launch_bounds__(RED_T) void loss_acc_k(double *acc, const float *losses, int N,
						     int kept)
{
	__shared__ double part[RED_T];
	double t = 0.0;
	for (int i = (int)threadIdx.x; i < N; i += RED_T)
		t += losses[i];
	part[threadIdx.x] = t;
	__syncthreads();
	for (int h = RED_T / 2; h > 0; h >>= 1) {
		if ((int)threadIdx.x < h)
			part[threadIdx.x] += part[threadIdx.x + h];
		__syncthreads();
	}
	if (threadIdx.x == 0 && kept)
		*acc += part[0] / kept;
}

void cu_loss_acc(double *acc, const float *losses, int N, int kept)
{
	CU_ENTER();
	if (N <= 0 || !kept)
		return;
	cu_launch(loss_acc_k, 1, RED_T, 0, cu.stream, acc, losses, N, kept);
	CU_LAUNCHED("loss_acc");
}

/* *flag = 1 when some g(n) is Inf or NaN (exponent bits all ones) or above limit in magnitude */
__global__ void nonfinite_k(int *flag, const float *g, size_t n, float limit)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		if ((__float_as_uint(g[i]) & 0x7f800000u) == 0x7f800000u || fabsf(g[i]) > limit)
			atomicExch(flag, 1);
}

void cu_within_acc(int32_t *flag, const float *g, size_t n, float limit)
{
	CU_ENTER();
	if (n)
		cu_launch(nonfinite_k, cu_grid(n, RED_T), RED_T, 0, cu.stream, (int *)flag, g, n,
			  limit);
	CU_LAUNCHED("nonfinite");
}

int cu_all_within(const float *g, size_t n, float limit)
{
	CU_ENTER();
	if (n == 0)
		return 1;
	int *dflag = (int *)((char *)cu.dsmall + 64), *hflag = (int *)((char *)cu.hsmall + 64);
	CU_CHECK(cudaMemsetAsync(dflag, 0, sizeof(int), cu.stream));
	cu_launch(nonfinite_k, cu_grid(n, RED_T), RED_T, 0, cu.stream, dflag, g, n, limit);
	CU_LAUNCHED("nonfinite");
	CU_CHECK(cudaMemcpyAsync(hflag, dflag, sizeof(int), cudaMemcpyDeviceToHost, cu.stream));
	CU_CHECK(cudaStreamSynchronize(cu.stream));
	return *hflag == 0;
}
