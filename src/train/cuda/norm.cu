/* norm - layer normalisation, forward and backward, one warp per row.
 *
 * A row of C activations (C = 768 for GPT-2 small, 14336 for BLOOM-176B) is read by one warp,
 * each lane taking V consecutive channels at a stride of 32 V (V = 8, 16-byte loads, when C is a
 * multiple of 8 and the pointers are aligned; else 1).  The statistics are computed in fp32 with
 * two passes over the row - the mean, then the mean of squared deviations - rather than the
 * one-pass E[x^2] - E[x]^2, which cancels badly when |mean| >> std; the second and third reads of
 * the row hit L1/L2 (a 14336-wide row is 28 KiB).  Variance is the biased one (/C) as in
 * PyTorch; rstd = 1/sqrt(var + eps).  mean and rstd (N) are saved in fp32 for the backward.
 *
 * The backward splits its two jobs.  dinp is a per-row computation,
 *   dinp += rstd * (dy*w - mean(dy*w) - xhat * mean(dy*w * xhat)),
 * again warp-per-row, reading dinp, adding in fp32 and writing it once (the residual
 * stream's gradient accumulates here).  dw += sum_n dy*xhat and db += sum_n dy are column sums
 * over all rows, taken in the same pass (ln_bwd_k): the dinp pass reads dy and x and forms xhat
 * anyway, so each lane also adds dy and dy*xhat of its channels into registers.  A block owns a
 * slice of R consecutive rows (R = 32, more when N > 16384 rows so that there are at most 512
 * slices; R and the slices depend on N only; the partials, 2 S C floats, are 4 MB at C = 1024,
 * against the 96+ MB the pass moves), its warp w the rows w, w + 8, ... of the slice in
 * increasing order; at the end the 8 warps' sums meet in shared memory in warp order and the
 * block writes one fp32 partial per channel and slice, and cu_colsum_fin (reduce.cu) adds the
 * slices' partials in slice order into dw and db - fixed orders throughout, no float atomics, so
 * the bits repeat.  The registers bound the width: a lane holds LN_NCH chunks of V channels
 * (C <= 1024 with 16-byte loads, 128 without; ptxas gives the V = 8 kernels 112-126 registers
 * on sm_90 and no spills: two blocks an SM); a wider layer norm (or one without a weight
 * gradient) keeps the dinp-only kernel ln_bwd_dinp_k and the separate two-pass cu_colsum, which
 * reads dy and x a second time.
 *
 * Fused with the residual stream (cu_residual_layernorm_fwd, cu_layernorm_bwd_dropout): the
 * residual add (res + dropout(x)) that precedes every layer norm is done by the same warp in its
 * first pass, which stores the sum, rounded to the activation type, and takes the statistics of
 * the rounded values - exactly what the layer norm would read back; and the dropout of the branch
 * that the layer norm's input gradient flows into is applied as that gradient is stored (the
 * rounded value times the mask, as cu_dropout_bwd would compute it).  The bits equal the separate
 * kernels'; one read and one write of the (N,C) tensor are saved each way. */
#include "train/cuda/common.h"
#include "train/model/philox.h"

#define LN_WARPS 8 /* rows per block */

/* out(N,C) = (inp - mean) * rstd * w + b; mean, rstd (N).  One warp per row. */
template <int V, typename A>
__global__ __launch_bounds__(LN_WARPS * 32) void ln_fwd_k(A *out, float *mean, float *rstd,
							  const A *inp, const A *w, const A *b,
							  int N, int C, float eps)
{
	int lane = threadIdx.x & 31;
	int row = blockIdx.x * LN_WARPS + (threadIdx.x >> 5);
	if (row >= N)
		return; /* whole warp: the shuffles below stay within a warp */
	const A *x = inp + (size_t)row * C;
	A *y = out + (size_t)row * C;

	float sum = 0.0f;
	for (int c = lane * V; c < C; c += 32 * V) {
		float xv[V];
		ld_act<V>(xv, x + c);
#pragma unroll
		for (int k = 0; k < V; k++)
			sum += xv[k];
	}
	float mu = warp_sum(sum) / (float)C;

	float sq = 0.0f;
	for (int c = lane * V; c < C; c += 32 * V) {
		float xv[V];
		ld_act<V>(xv, x + c);
#pragma unroll
		for (int k = 0; k < V; k++) {
			float d = xv[k] - mu;
			sq += d * d;
		}
	}
	float rs = 1.0f / sqrtf(warp_sum(sq) / (float)C + eps);

	for (int c = lane * V; c < C; c += 32 * V) {
		float xv[V], wv[V], bv[V] = {}, yv[V];
		ld_act<V>(xv, x + c);
		ld_act<V>(wv, w + c);
		if (b)
			ld_act<V>(bv, b + c);
#pragma unroll
		for (int k = 0; k < V; k++)
			yv[k] = (xv[k] - mu) * rs * wv[k] + bv[k];
		st_act<V>(y + c, yv);
	}
	if (lane == 0) {
		mean[row] = mu;
		rstd[row] = rs;
	}
}

/* res_out = res + x * keep(seed, off + element, p); out = LN(res_out) as ln_fwd_k */
template <int V, typename A>
__global__ __launch_bounds__(LN_WARPS * 32) void ln_res_fwd_k(A *res_out, A *out, float *mean,
							      float *rstd, const A *res,
							      const A *xin, const A *w, const A *b,
							      int N, int C, float eps, float p,
							      uint64_t seed, uint64_t off)
{
	int lane = threadIdx.x & 31;
	int row = blockIdx.x * LN_WARPS + (threadIdx.x >> 5);
	if (row >= N)
		return;
	size_t r0 = (size_t)row * C;
	A *x = res_out + r0, *y = out + r0;

	float sum = 0.0f;
	for (int c = lane * V; c < C; c += 32 * V) {
		float rv[V], xv[V];
		ld_act<V>(rv, res + r0 + c);
		ld_act<V>(xv, xin + r0 + c);
#pragma unroll
		for (int k = 0; k < V; k++) {
			float keep = p > 0.0f ? philox_keep(seed, off + r0 + c + k, p) : 1.0f;
			rv[k] += xv[k] * keep;
		}
		st_act<V>(x + c, rv);
		ld_act<V>(rv, x + c);   /* the rounded values, as the layer norm reads them */
#pragma unroll
		for (int k = 0; k < V; k++)
			sum += rv[k];
	}
	float mu = warp_sum(sum) / (float)C;

	float sq = 0.0f;
	for (int c = lane * V; c < C; c += 32 * V) {
		float xv[V];
		ld_act<V>(xv, x + c);
#pragma unroll
		for (int k = 0; k < V; k++) {
			float d = xv[k] - mu;
			sq += d * d;
		}
	}
	float rs = 1.0f / sqrtf(warp_sum(sq) / (float)C + eps);

	for (int c = lane * V; c < C; c += 32 * V) {
		float xv[V], wv[V], bv[V] = {}, yv[V];
		ld_act<V>(xv, x + c);
		ld_act<V>(wv, w + c);
		if (b)
			ld_act<V>(bv, b + c);
#pragma unroll
		for (int k = 0; k < V; k++)
			yv[k] = (xv[k] - mu) * rs * wv[k] + bv[k];
		st_act<V>(y + c, yv);
	}
	if (lane == 0) {
		mean[row] = mu;
		rstd[row] = rs;
	}
}

/* One lane's V channels from c of a row's input gradient: dx += rs (dy w - s1 - xhat s2) (s1, s2
 * the row's means of dy w and dy w xhat); DROP: also dxo = dx (rounded) * keep(seed, e0 + c + k,
 * p), e0 the row's first element.  ln_bwd_dinp_k and ln_bwd_k share it, so both give the same
 * bits. */
template <int V, bool DROP, typename A>
__device__ __forceinline__ void ln_dx(A *dx, const A *x, const A *dy, const A *w, int c, float mu,
				      float rs, float s1, float s2, A *dxo, float p, uint64_t seed,
				      uint64_t e0)
{
	float xv[V], gv[V], wv[V], dv[V];
	ld_act<V>(xv, x + c);
	ld_act<V>(gv, dy + c);
	ld_act<V>(wv, w + c);
	ld_act<V>(dv, dx + c);
#pragma unroll
	for (int k = 0; k < V; k++) {
		float xhat = (xv[k] - mu) * rs;
		dv[k] += rs * (gv[k] * wv[k] - s1 - xhat * s2);
	}
	st_act<V>(dx + c, dv);
	if constexpr (DROP) {
		ld_act<V>(dv, dx + c);   /* rounded, as cu_dropout_bwd would read it */
#pragma unroll
		for (int k = 0; k < V; k++)
			dv[k] *= p > 0.0f ? philox_keep(seed, e0 + c + k, p) : 1.0f;
		st_act<V>(dxo + c, dv);
	}
}

/* dinp(N,C) += rstd * (dy*w - mean_c(dy*w) - xhat * mean_c(dy*w*xhat)).  One warp per row.
 * DROP: also dx = dinp (rounded) * keep(seed, off + element, p); dx may be dout (each element is
 * read before it is written, by the same lane). */
template <int V, bool DROP, typename A>
__global__ __launch_bounds__(LN_WARPS * 32) void ln_bwd_dinp_k(A *dinp, const A *dout,
							       const A *inp, const A *w,
							       const float *mean,
							       const float *rstd, int N, int C,
							       A *dxo, float p, uint64_t seed,
							       uint64_t off)
{
	int lane = threadIdx.x & 31;
	int row = blockIdx.x * LN_WARPS + (threadIdx.x >> 5);
	if (row >= N)
		return;
	const A *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
	A *dx = dinp + (size_t)row * C;
	float mu = mean[row], rs = rstd[row];

	float s1 = 0.0f, s2 = 0.0f;
	for (int c = lane * V; c < C; c += 32 * V) {
		float xv[V], gv[V], wv[V];
		ld_act<V>(xv, x + c);
		ld_act<V>(gv, dy + c);
		ld_act<V>(wv, w + c);
#pragma unroll
		for (int k = 0; k < V; k++) {
			float dn = gv[k] * wv[k];
			s1 += dn;
			s2 += dn * ((xv[k] - mu) * rs);
		}
	}
	s1 = warp_sum(s1) / (float)C;
	s2 = warp_sum(s2) / (float)C;

	for (int c = lane * V; c < C; c += 32 * V)
		ln_dx<V, DROP>(dx, x, dy, w, c, mu, rs, s1, s2, DROP ? dxo + (size_t)row * C : nullptr,
			       p, seed, off + (size_t)row * C);
}

#define LN_NCH 4   /* channel chunks of 32 V a lane holds column sums for in ln_bwd_k */

/* ln_bwd_dinp_k's dinp (and DROP's dx) for the rows of slice blockIdx.x (R rows, warp w takes
 * rows w, w + LN_WARPS, ...), and the slice's column sums: part(s, C) = sum of dy, part(S + s, C)
 * = sum of dy * xhat.  C <= 32 V LN_NCH. */
template <int V, bool DROP, typename A>
__global__ __launch_bounds__(LN_WARPS * 32) void ln_bwd_k(A *dinp, const A *dout, const A *inp,
							  const A *w, const float *mean,
							  const float *rstd, int N, int C, int R,
							  int S, float *part, A *dxo, float p,
							  uint64_t seed, uint64_t off)
{
	__shared__ float red[LN_WARPS][32 * V];
	int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
	int s = blockIdx.x;
	int r0 = s * R, r1 = min(N, r0 + R);
	float ag[LN_NCH][V], ax[LN_NCH][V];   /* this lane's sums of dy and dy * xhat */
#pragma unroll
	for (int j = 0; j < LN_NCH; j++)
#pragma unroll
		for (int k = 0; k < V; k++)
			ag[j][k] = ax[j][k] = 0.0f;

	for (int row = r0 + wp; row < r1; row += LN_WARPS) {
		const A *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
		A *dx = dinp + (size_t)row * C;
		float mu = mean[row], rs = rstd[row];
		float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
		for (int j = 0; j < LN_NCH; j++) {
			int c = (j * 32 + lane) * V;
			if (c < C) {
				float xv[V], gv[V], wv[V];
				ld_act<V>(xv, x + c);
				ld_act<V>(gv, dy + c);
				ld_act<V>(wv, w + c);
#pragma unroll
				for (int k = 0; k < V; k++) {
					float xhat = (xv[k] - mu) * rs;
					float dn = gv[k] * wv[k];
					s1 += dn;
					s2 += dn * xhat;
					ag[j][k] += gv[k];
					ax[j][k] += gv[k] * xhat;
				}
			}
		}
		s1 = warp_sum(s1) / (float)C;
		s2 = warp_sum(s2) / (float)C;
#pragma unroll
		for (int j = 0; j < LN_NCH; j++) {
			int c = (j * 32 + lane) * V;
			if (c < C)
				ln_dx<V, DROP>(dx, x, dy, w, c, mu, rs, s1, s2,
					       DROP ? dxo + (size_t)row * C : nullptr, p, seed,
					       off + (size_t)row * C);
		}
	}

	/* the warps' sums, chunk by chunk, added in warp order: one partial per channel */
#pragma unroll
	for (int j = 0; j < LN_NCH; j++) {
		if (j * 32 * V >= C)
			break;   /* the same for every thread */
#pragma unroll
		for (int q = 0; q < 2; q++) {
#pragma unroll
			for (int k = 0; k < V; k++)
				red[wp][lane * V + k] = q ? ax[j][k] : ag[j][k];
			__syncthreads();
			for (int t = threadIdx.x; t < 32 * V; t += LN_WARPS * 32) {
				int c = j * 32 * V + t;
				if (c < C) {
					float v = 0.0f;
					for (int y = 0; y < LN_WARPS; y++)
						v += red[y][t];
					part[(size_t)(q * S + s) * C + c] = v;
				}
			}
			__syncthreads();
		}
	}
}

/* the fused backward's slicing: R rows a block (32, or enough for at most 512 slices), S slices */
static void ln_slices(int N, int *R, int *S)
{
	int r = (N + 511) / 512;
	*R = r > 32 ? r : 32;
	*S = (N + *R - 1) / *R;
}

/* dinp (and dx, drop) and the column sums into dw, db in one pass plus cu_colsum_fin; returns 0
 * (nothing launched) when the layer is too wide for it or has no weight gradient */
static int ln_bwd_fused(void *dinp, void *dx, float *dw, float *db, const void *dout,
			const void *inp, const void *w, const float *mean, const float *rstd, int N,
			int C, int drop, float p, uint64_t seed, uint64_t off)
{
	int v8 = cu_vec8((size_t)C, dinp, dout, inp, w) && (!drop || cu_vec8((size_t)C, dx));
	if (!dinp || !dw || C > 32 * (v8 ? 8 : 1) * LN_NCH)
		return 0;
	int R, S;
	ln_slices(N, &R, &S);
	float *part = (float *)cu_scratch((size_t)2 * S * C * sizeof(float));
	CU_ACT(A, if (v8 && drop) cu_launch(ln_bwd_k<8, true, A>, S, LN_WARPS * 32, 0, cu.stream,
					    (A *)dinp, (const A *)dout, (const A *)inp,
					    (const A *)w, mean, rstd, N, C, R, S, part, (A *)dx,
					    p, seed, off);
		  else if (v8) cu_launch(ln_bwd_k<8, false, A>, S, LN_WARPS * 32, 0, cu.stream,
					 (A *)dinp, (const A *)dout, (const A *)inp, (const A *)w,
					 mean, rstd, N, C, R, S, part, (A *)nullptr, 0.0f,
					 (uint64_t)0, (uint64_t)0);
		  else if (drop) cu_launch(ln_bwd_k<1, true, A>, S, LN_WARPS * 32, 0, cu.stream,
					   (A *)dinp, (const A *)dout, (const A *)inp,
					   (const A *)w, mean, rstd, N, C, R, S, part, (A *)dx, p,
					   seed, off);
		  else cu_launch(ln_bwd_k<1, false, A>, S, LN_WARPS * 32, 0, cu.stream, (A *)dinp,
				 (const A *)dout, (const A *)inp, (const A *)w, mean, rstd, N, C, R,
				 S, part, (A *)nullptr, 0.0f, (uint64_t)0, (uint64_t)0));
	CU_LAUNCHED("layernorm_bwd");
	cu_colsum_fin(db, dw, part, C, S);
	return 1;
}

void cu_layernorm_fwd(void *out, float *mean, float *rstd, const void *inp, const void *w,
		      const void *b, int N, int C, float eps)
{
	CU_ENTER();
	if (N <= 0 || C <= 0)
		return;
	unsigned grid = (unsigned)((N + LN_WARPS - 1) / LN_WARPS);
	int v8 = cu_vec8((size_t)C, out, inp, w, b);
	CU_ACT(A, if (v8) cu_launch(ln_fwd_k<8, A>, grid, LN_WARPS * 32, 0, cu.stream, (A *)out,
				    mean, rstd, (const A *)inp, (const A *)w, (const A *)b, N, C,
				    eps);
		  else cu_launch(ln_fwd_k<1, A>, grid, LN_WARPS * 32, 0, cu.stream, (A *)out, mean,
				 rstd, (const A *)inp, (const A *)w, (const A *)b, N, C, eps));
	CU_LAUNCHED("layernorm_fwd");
}

void cu_layernorm_bwd(void *dinp, float *dw, float *db, const void *dout, const void *inp,
		      const void *w, const float *mean, const float *rstd, int N, int C)
{
	CU_ENTER();
	if (N <= 0 || C <= 0)
		return;
	if (ln_bwd_fused(dinp, nullptr, dw, db, dout, inp, w, mean, rstd, N, C, 0, 0.0f, 0, 0))
		return;
	if (dinp) {
		unsigned grid = (unsigned)((N + LN_WARPS - 1) / LN_WARPS);
		int v8 = cu_vec8((size_t)C, dinp, dout, inp, w);
		CU_ACT(A, if (v8) cu_launch(ln_bwd_dinp_k<8, false, A>, grid, LN_WARPS * 32, 0,
					    cu.stream, (A *)dinp, (const A *)dout, (const A *)inp,
					    (const A *)w, mean, rstd, N, C, (A *)nullptr, 0.0f,
					    (uint64_t)0, (uint64_t)0);
			  else cu_launch(ln_bwd_dinp_k<1, false, A>, grid, LN_WARPS * 32, 0,
					 cu.stream, (A *)dinp, (const A *)dout, (const A *)inp,
					 (const A *)w, mean, rstd, N, C, (A *)nullptr, 0.0f,
					 (uint64_t)0, (uint64_t)0));
		CU_LAUNCHED("layernorm_bwd_dinp");
	}
	cu_colsum(db, dw, dout, inp, mean, rstd, N, C);
}

void cu_residual_layernorm_fwd(void *res_out, void *ln_out, float *mean, float *rstd,
			       const void *res, const void *x, const void *w, const void *b, int N,
			       int C, float eps, float p, uint64_t seed, uint64_t off)
{
	CU_ENTER();
	if (N <= 0 || C <= 0)
		return;
	unsigned grid = (unsigned)((N + LN_WARPS - 1) / LN_WARPS);
	int v8 = cu_vec8((size_t)C, res_out, ln_out, res, x) && cu_vec8((size_t)C, w, b);
	CU_ACT(A, if (v8) cu_launch(ln_res_fwd_k<8, A>, grid, LN_WARPS * 32, 0, cu.stream,
				    (A *)res_out, (A *)ln_out, mean, rstd, (const A *)res,
				    (const A *)x, (const A *)w, (const A *)b, N, C, eps, p, seed,
				    off);
		  else cu_launch(ln_res_fwd_k<1, A>, grid, LN_WARPS * 32, 0, cu.stream,
				 (A *)res_out, (A *)ln_out, mean, rstd, (const A *)res,
				 (const A *)x, (const A *)w, (const A *)b, N, C, eps, p, seed,
				 off));
	CU_LAUNCHED("residual_layernorm_fwd");
}

void cu_layernorm_bwd_dropout(void *dinp, void *dx, float *dw, float *db, const void *dout,
			      const void *inp, const void *w, const float *mean, const float *rstd,
			      int N, int C, float p, uint64_t seed, uint64_t off)
{
	CU_ENTER();
	if (N <= 0 || C <= 0)
		return;
	if (ln_bwd_fused(dinp, dx, dw, db, dout, inp, w, mean, rstd, N, C, 1, p, seed, off))
		return;
	/* the column sums first: dx may be dout, which the fused kernel overwrites */
	cu_colsum(db, dw, dout, inp, mean, rstd, N, C);
	unsigned grid = (unsigned)((N + LN_WARPS - 1) / LN_WARPS);
	int v8 = cu_vec8((size_t)C, dinp, dout, inp, w) && cu_vec8((size_t)C, dx);
	CU_ACT(A, if (v8) cu_launch(ln_bwd_dinp_k<8, true, A>, grid, LN_WARPS * 32, 0, cu.stream,
				    (A *)dinp, (const A *)dout, (const A *)inp, (const A *)w, mean,
				    rstd, N, C, (A *)dx, p, seed, off);
		  else cu_launch(ln_bwd_dinp_k<1, true, A>, grid, LN_WARPS * 32, 0, cu.stream,
				 (A *)dinp, (const A *)dout, (const A *)inp, (const A *)w, mean,
				 rstd, N, C, (A *)dx, p, seed, off));
	CU_LAUNCHED("layernorm_bwd_dropout");
}
