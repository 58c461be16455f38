/* embed - token and position embeddings, forward and a deterministic backward.
 *
 * The forward is a gather: out[b,t] = wte[tok[b,t]] + wpe[t], added in fp32 and rounded once.
 *
 * The backward is a scatter-add, dwte[tok[n]] += dout[n], and the obvious kernel (a thread per
 * element, atomicAdd) gives different bits from run to run whenever a token repeats in the batch.
 * ops.h asks for determinism, so the scatter becomes a gather over a sorted list:
 *   1. sort the pairs (tok[n], n) by token with CUB's radix sort, which is stable, so equal
 *      tokens stay in increasing n;
 *   2. launch a block per sorted position k and channel tile; a block whose position is not the
 *      first of its run of equal tokens exits at once, the first one walks the run in order,
 *      sums dout rows in fp32 registers and adds the sum to dwte[token] once.
 * Each vocabulary row is written by exactly one block, the summation order is the token order
 * of the batch, and nothing depends on scheduling.  Everything stays on the device (no copy of
 * the tokens to the host as llm.c's host-side bucketing needs); the sort of B*T int pairs costs
 * a few tens of microseconds, the extra blocks that exit immediately even less.  The cost that
 * remains is a token repeated thousands of times (padding, end-of-text runs): its single block
 * walks that many rows serially; fine for real text, slow for a batch of one repeated id.
 *
 * dwpe[t] += sum over b of dout[b,t]: a thread per (t, channel unit) loops over b in order.
 *
 * Token ids are not range-checked against the vocabulary (the interface passes no vocabulary
 * size): train checks them when the data is read.  A negative id (-1: the token belongs to
 * another tensor-parallel rank's vocabulary slice) gives a zero row forward and is skipped in
 * the backward. */
#include <cub/device/device_radix_sort.cuh>

#include "train/cuda/common.h"

#define EMB_T 128

/* out(B,T,C) = wte[tok] + wpe[t] (wpe may be NULL); a row whose token is negative (-1: not in
 * this rank's vocabulary slice) is zero.  Units of V channels; V divides C. */
template <int V, typename A>
__global__ void embed_fwd_k(A *out, const int32_t *tok, const A *wte, const A *wpe, int T, int C,
			    size_t units)
{
	for (size_t u = blockIdx.x * (size_t)blockDim.x + threadIdx.x; u < units;
	     u += (size_t)gridDim.x * blockDim.x) {
		size_t e = u * V;                  /* flat element index into out */
		size_t row = e / (size_t)C;        /* b*T + t */
		int c = (int)(e - row * (size_t)C);
		int t = (int)(row % (size_t)T);
		int id = tok[row];
		float a[V];
		if (id < 0) {
#pragma unroll
			for (int k = 0; k < V; k++)
				a[k] = 0.0f;
			st_act<V>(out + e, a);
			continue;
		}
		ld_act<V>(a, wte + (size_t)id * C + c);
		if (wpe) {
			float p[V];
			ld_act<V>(p, wpe + (size_t)t * C + c);
#pragma unroll
			for (int k = 0; k < V; k++)
				a[k] += p[k];
		}
		st_act<V>(out + e, a);
	}
}

/* v(n) = 0, 1, ..., n-1: the row index each token carries through the sort */
__global__ void iota_k(int32_t *v, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		v[i] = i;
}

/* dwte(Vp,C) += rows of dout(N,C) grouped by token.  keys(N): sorted tokens, pos(N): the row n of
 * each.  grid (N, ceil(C / (EMB_T V))), block EMB_T. */
template <int V, typename A>
__global__ __launch_bounds__(EMB_T) void embed_bwd_wte_k(float *dwte, const A *dout,
							 const int32_t *keys, const int32_t *pos,
							 int N, int C)
{
	int k = blockIdx.x;
	int id = keys[k];
	if (id < 0 || (k > 0 && keys[k - 1] == id))
		return; /* not the first of its run */
	int c = (blockIdx.y * EMB_T + threadIdx.x) * V;
	if (c >= C)
		return;
	int end = k + 1;
	while (end < N && keys[end] == id)
		end++;
	float acc[V];
#pragma unroll
	for (int j = 0; j < V; j++)
		acc[j] = 0.0f;
	for (int j = k; j < end; j++) {
		float g[V];
		ld_act<V>(g, dout + (size_t)pos[j] * C + c);
#pragma unroll
		for (int q = 0; q < V; q++)
			acc[q] += g[q];
	}
	float *dst = dwte + (size_t)id * C + c;
	float d[V];
	ld_f32<V>(d, dst);
#pragma unroll
	for (int q = 0; q < V; q++)
		d[q] += acc[q];
	st_f32<V>(dst, d);
}

/* dwpe(T,C) += sum over b of dout(B,T,C), b in order.  Units of V channels. */
template <int V, typename A>
__global__ void embed_bwd_wpe_k(float *dwpe, const A *dout, int B, int T, int C, size_t units)
{
	for (size_t u = blockIdx.x * (size_t)blockDim.x + threadIdx.x; u < units;
	     u += (size_t)gridDim.x * blockDim.x) {
		size_t e = u * V; /* flat index into dwpe: t*C + c */
		float acc[V];
#pragma unroll
		for (int q = 0; q < V; q++)
			acc[q] = 0.0f;
		for (int b = 0; b < B; b++) {
			float g[V];
			ld_act<V>(g, dout + (size_t)b * T * C + e);
#pragma unroll
			for (int q = 0; q < V; q++)
				acc[q] += g[q];
		}
		float d[V];
		ld_f32<V>(d, dwpe + e);
#pragma unroll
		for (int q = 0; q < V; q++)
			d[q] += acc[q];
		st_f32<V>(dwpe + e, d);
	}
}

void cu_embed_fwd(void *out, const int32_t *tok, const void *wte, const void *wpe, int B, int T,
		  int C)
{
	CU_ENTER();
	size_t n = (size_t)B * T * C;
	if (!n)
		return;
	int v = cu_vec8((size_t)C, out, wte, wpe);
	size_t units = v ? n / 8 : n;
	CU_ACT(A, if (v) cu_launch(embed_fwd_k<8, A>, cu_grid(units, 256), 256, 0, cu.stream,
				   (A *)out, tok, (const A *)wte, (const A *)wpe, T, C, units);
		  else cu_launch(embed_fwd_k<1, A>, cu_grid(units, 256), 256, 0, cu.stream,
				 (A *)out, tok, (const A *)wte, (const A *)wpe, T, C, units));
	CU_LAUNCHED("embed_fwd");
}

void cu_embed_bwd(float *dwte, float *dwpe, const void *dout, const int32_t *tok, int B, int T,
		  int C)
{
	CU_ENTER();
	int N = B * T;
	if (N <= 0 || C <= 0)
		return;

	if (dwte) {
		size_t temp = 0;
		CU_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp, tok, (int32_t *)nullptr,
							 (const int32_t *)nullptr,
							 (int32_t *)nullptr, N, 0, 32, cu.stream));
		size_t vec = cu_round256((size_t)N * sizeof(int32_t));
		char *s = (char *)cu_scratch(3 * vec + cu_round256(temp));
		int32_t *iota = (int32_t *)s, *keys = (int32_t *)(s + vec);
		int32_t *pos = (int32_t *)(s + 2 * vec);
		void *tmp = s + 3 * vec;
		cu_launch(iota_k, (N + 255) / 256, 256, 0, cu.stream, iota, N);
		CU_LAUNCHED("iota");
		CU_CHECK(cub::DeviceRadixSort::SortPairs(tmp, temp, tok, keys, iota, pos, N, 0, 32,
							 cu.stream));
		int v = cu_vec8((size_t)C, dwte, dout);
		int per = EMB_T * (v ? 8 : 1);
		dim3 grid((unsigned)N, (unsigned)((C + per - 1) / per));
		CU_ACT(A, if (v) cu_launch(embed_bwd_wte_k<8, A>, grid, EMB_T, 0, cu.stream, dwte,
					   (const A *)dout, keys, pos, N, C);
			  else cu_launch(embed_bwd_wte_k<1, A>, grid, EMB_T, 0, cu.stream, dwte,
					 (const A *)dout, keys, pos, N, C));
		CU_LAUNCHED("embed_bwd_wte");
	}

	if (dwpe) {
		size_t n = (size_t)T * C;
		int v = cu_vec8((size_t)C, dwpe, dout);
		size_t units = v ? n / 8 : n;
		CU_ACT(A, if (v) cu_launch(embed_bwd_wpe_k<8, A>, cu_grid(units, 256), 256, 0,
					   cu.stream, dwpe, (const A *)dout, B, T, C, units);
			  else cu_launch(embed_bwd_wpe_k<1, A>, cu_grid(units, 256), 256, 0,
					 cu.stream, dwpe, (const A *)dout, B, T, C, units));
		CU_LAUNCHED("embed_bwd_wpe");
	}
}
