/* attention - causal self-attention with ALiBi and dropout, flash style: the (T,T) score matrix
 * never exists in global memory, only 64 x 64 tiles of it in shared memory.
 *
 * Layout (ops.h): qkv(B,T,NH,3,HD), q/k/v of a head adjacent (Megatron's per-rank order),
 * out(B,T,NH,HD), lse(B,NH,T) fp32.  s_ij = q_i.k_j / sqrt(HD) + slope_h * j for
 * kstart_i <= j <= i (kstart_i = 0 unless --reset-attention-mask starts the row at its
 * document); P = softmax_j(s) in fp32; O_i = sum_j P_ij M_ij v_j with the dropout mask
 * M_ij = philox_keep(seed, ((g*heads+H)*T+i)*T+j, p), g the sample's place in the global
 * batch and H the global head: the same draw as the CPU backend's, in any layout.
 * lse_i = log sum_j exp(s_ij) is saved (dropout does not enter it).
 *
 * This first version is a plain tiled kernel on the fp32 SIMT pipes, not tensor cores: it was
 * written without a GPU to test on, and its correctness can be read line by line.  Expect it to
 * run at a few TFLOP/s, well below the GEMMs; an mma.sync (m16n8k16 bf16) version of the two
 * tile products is the next step, and the tiling here (64 x 64, 4 x 4 per thread) is chosen so
 * that it can replace at_dots and the P.V loops without changing the rest.
 *
 * Forward: a block of 256 threads owns 64 query rows of one (b, h) and walks the key tiles
 * 0..diagonal with the online softmax: per tile, S = Q K^T (each thread a 4 x 4 block, rows
 * ty+16a, cols tx+16b, so the 16 threads sharing a row reduce max and sum with four xor
 * shuffles), the running max m and sum l are updated, the accumulator rescaled by exp(m_old -
 * m_new), and O += P V with P (after dropout) staged in shared memory.  Q, K, V tiles are bf16 in
 * shared memory (row stride HDM+2 so that 16 rows read in one instruction fall in 16 banks) and
 * read as bf16 pairs; everything else is fp32.  Rows past T and keys past the diagonal are
 * masked with -inf; a row whose max is still -inf uses 0 as reference so no inf - inf appears.
 *
 * Backward (FlashAttention-2's algebra): with P recomputed as exp(s - lse) and D_i = dO_i . O_i
 * (which equals sum_j P_ij M_ij dPd_ij, so dropout needs no extra term),
 *   dV_j = sum_i P_ij M_ij dO_i,  dS_ij = P_ij (M_ij dO_i.v_j - D_i),
 *   dK_j = scale sum_i dS_ij q_i,  dQ_i = scale sum_j dS_ij k_j.
 * The usual single kernel accumulates dQ with float atomics, which would make the gradient
 * differ between runs.  Here dK/dV and dQ are two kernels - one owns a key tile and walks the
 * query tiles below it, the other owns a query tile and walks the key tiles - each writing its
 * outputs exactly once.  The price is recomputing S and dP in both (7 tile products instead of
 * 5), the gain is bit-reproducible gradients with no scratch beyond D (B,NH,T).  Dot products
 * are summed in the same order in all three kernels, so the backward recomputes exactly the
 * forward's scores, and both backward kernels see the same dS.
 *
 * HD up to 128: kernels are instantiated for HDM = 32, 64, 128 and handle any HD <= HDM by
 * zero padding.  Shared memory at HDM 128: 69 KiB (forward), 106 KiB (dK/dV), 85 KiB
 * (dQ), within the opt-in limit of A100 (163 KiB) and H100 (227 KiB).  Any T works (tiles
 * are masked at the end); heavy tiles (long causal rows) are launched first to shorten the
 * tail. */
#include <math.h>

#include "train/cuda/common.h"
#include "train/philox.h"

#define AT_B 64           /* query rows and key columns per tile */
#define AT_T 256          /* threads: 16 x 16, each a 4 x 4 block of the 64 x 64 tile */
#define AT_PS (AT_B + 16) /* fp32 row stride of the P / dS tiles: two rows 16 banks apart */

/* Rows [r0, r0+64) of one head's q, k, v or dout into sm[64][HDM+2]; src points at row 0 of that
 * head, rs is the distance between rows (elements).  Zero past T and past HD. */
template <int HDM>
__device__ __forceinline__ void at_load(bf16 *sm, const bf16 *src, size_t rs, int r0, int T,
					int HD)
{
	constexpr int LD = HDM + 2;
	for (int idx = threadIdx.x; idx < AT_B * HDM; idx += AT_T) {
		int rr = idx / HDM, d = idx % HDM;
		int row = r0 + rr;
		bf16 v = __float2bfloat16(0.0f);
		if (row < T && d < HD)
			v = src[(size_t)row * rs + d];
		sm[rr * LD + d] = v;
	}
}

/* Two adjacent bf16 (4-byte aligned: even index, even row stride) as floats */
__device__ __forceinline__ float2 at_pair(const bf16 *p)
{
	return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(p));
}

/* s[a][b] = X[ty+16a] . Y[tx+16b] over d < hde (HD rounded up to even; the pad is zero).
 * The same d order and fmaf sequence in every kernel, so recomputed scores are bit-identical. */
template <int HDM>
__device__ __forceinline__ void at_dots(float (&s)[4][4], const bf16 *X, const bf16 *Y, int ty,
					int tx, int hde)
{
	constexpr int LD = HDM + 2;
#pragma unroll
	for (int a = 0; a < 4; a++)
#pragma unroll
		for (int b = 0; b < 4; b++)
			s[a][b] = 0.0f;
	for (int d = 0; d < hde; d += 2) {
		float2 x[4], y[4];
#pragma unroll
		for (int a = 0; a < 4; a++)
			x[a] = at_pair(X + (ty + 16 * a) * LD + d);
#pragma unroll
		for (int b = 0; b < 4; b++)
			y[b] = at_pair(Y + (tx + 16 * b) * LD + d);
#pragma unroll
		for (int a = 0; a < 4; a++)
#pragma unroll
			for (int b = 0; b < 4; b++) {
				s[a][b] = fmaf(x[a].x, y[b].x, s[a][b]);
				s[a][b] = fmaf(x[a].y, y[b].y, s[a][b]);
			}
	}
}

/* The score of key j from a dot product: one expression shared by all kernels. */
__device__ __forceinline__ float at_score(float dot, float scale, float slope, int j)
{
	return fmaf(slope, (float)j, dot * scale);
}

__device__ __forceinline__ uint64_t at_elem(uint64_t bh, int T, int i, int j)
{
	return (bh * (uint64_t)T + (uint64_t)i) * (uint64_t)T + (uint64_t)j;
}

/* The dropout stream's (sample, head) of local (b, h): global coordinates (ops.h). */
__device__ __forceinline__ uint64_t at_bh(const struct ops_attn &k, int b, int h)
{
	return (k.sample0 + (uint64_t)b) * (uint64_t)k.heads + (uint64_t)(k.head0 + h);
}

/* The first key query i of sample b may see. */
__device__ __forceinline__ int at_kstart(const struct ops_attn &k, int b, int T, int i)
{
	return k.kstart && i < T ? k.kstart[(size_t)b * T + i] : 0;
}

/* out(B,T,NH,HD), lse(B,NH,T) from qkv(B,T,NH,3,HD).  grid (ceil(T/64), NH, B), block 256.
 * Block x handles query tile ceil(T/64)-1-x (longest rows first). */
template <int HDM>
__global__ __launch_bounds__(AT_T) void attn_fwd_k(bf16 *out, float *lse, const bf16 *qkv,
						   int T, int NH, int HD, float scale,
						   struct ops_attn k)
{
	constexpr int LD = HDM + 2, NC = HDM / 32;
	extern __shared__ __align__(16) unsigned char at_smem[];
	bf16 *Qs = (bf16 *)at_smem, *Ks = Qs + AT_B * LD, *Vs = Ks + AT_B * LD;
	float *Ps = (float *)(Vs + AT_B * LD); /* [64 queries][AT_PS] */

	int q0 = (gridDim.x - 1 - blockIdx.x) * AT_B, h = blockIdx.y, b = blockIdx.z;
	int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
	int hde = (HD + 1) & ~1;
	size_t rs = (size_t)NH * 3 * HD;
	const bf16 *base = qkv + (size_t)b * T * rs + (size_t)h * 3 * HD;
	uint64_t bh = (uint64_t)b * NH + h, dbh = at_bh(k, b, h);
	float slope = k.slopes ? k.slopes[h] : 0.0f, p = k.p;
	uint64_t seed = k.seed;

	at_load<HDM>(Qs, base, rs, q0, T, HD);
	float m[4], l[4], o[4][NC][2];
	int ks[4];
#pragma unroll
	for (int a = 0; a < 4; a++) {
		ks[a] = at_kstart(k, b, T, q0 + ty + 16 * a);
		m[a] = -INFINITY;
		l[a] = 0.0f;
#pragma unroll
		for (int c = 0; c < NC; c++)
			o[a][c][0] = o[a][c][1] = 0.0f;
	}

	int nkt = min(q0 + AT_B - 1, T - 1) / AT_B + 1; /* key tiles up to the diagonal */
	for (int kt = 0; kt < nkt; kt++) {
		int k0 = kt * AT_B;
		__syncthreads(); /* the previous tile's Ks, Vs, Ps are consumed */
		at_load<HDM>(Ks, base + HD, rs, k0, T, HD);
		at_load<HDM>(Vs, base + 2 * HD, rs, k0, T, HD);
		__syncthreads();

		float s[4][4];
		at_dots<HDM>(s, Qs, Ks, ty, tx, hde);
#pragma unroll
		for (int a = 0; a < 4; a++) {
			int i = q0 + ty + 16 * a;
			float mt = -INFINITY;
#pragma unroll
			for (int bb = 0; bb < 4; bb++) {
				int j = k0 + tx + 16 * bb;
				s[a][bb] = (i < T && j <= i && j >= ks[a])
						   ? at_score(s[a][bb], scale, slope, j) : -INFINITY;
				mt = fmaxf(mt, s[a][bb]);
			}
#pragma unroll
			for (int off = 8; off > 0; off >>= 1)
				mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, off));
			float mn = fmaxf(m[a], mt);
			float ref = mn == -INFINITY ? 0.0f : mn;
			float alpha = expf(m[a] - ref);
			float sum = 0.0f;
#pragma unroll
			for (int bb = 0; bb < 4; bb++) {
				int j = k0 + tx + 16 * bb;
				float pr = expf(s[a][bb] - ref); /* masked: exp(-inf) = 0 */
				sum += pr;
				if (p > 0.0f && pr > 0.0f)
					pr *= philox_keep(seed, at_elem(dbh, T, i, j), p);
				Ps[(ty + 16 * a) * AT_PS + tx + 16 * bb] = pr;
			}
#pragma unroll
			for (int off = 8; off > 0; off >>= 1)
				sum += __shfl_xor_sync(0xffffffffu, sum, off);
			l[a] = l[a] * alpha + sum;
			m[a] = mn;
#pragma unroll
			for (int c = 0; c < NC; c++) {
				o[a][c][0] *= alpha;
				o[a][c][1] *= alpha;
			}
		}
		__syncthreads();

		int jn = min(AT_B, T - k0);
		for (int jj = 0; jj < jn; jj++) {
			float pa[4];
#pragma unroll
			for (int a = 0; a < 4; a++)
				pa[a] = Ps[(ty + 16 * a) * AT_PS + jj];
#pragma unroll
			for (int c = 0; c < NC; c++) {
				float2 v = at_pair(Vs + jj * LD + 2 * tx + 32 * c);
#pragma unroll
				for (int a = 0; a < 4; a++) {
					o[a][c][0] = fmaf(pa[a], v.x, o[a][c][0]);
					o[a][c][1] = fmaf(pa[a], v.y, o[a][c][1]);
				}
			}
		}
	}

#pragma unroll
	for (int a = 0; a < 4; a++) {
		int i = q0 + ty + 16 * a;
		if (i >= T)
			continue;
		float inv = 1.0f / l[a];
		bf16 *dst = out + (((size_t)b * T + i) * NH + h) * HD;
#pragma unroll
		for (int c = 0; c < NC; c++) {
			int d = 2 * tx + 32 * c;
			if (d < HD)
				dst[d] = __float2bfloat16(o[a][c][0] * inv);
			if (d + 1 < HD)
				dst[d + 1] = __float2bfloat16(o[a][c][1] * inv);
		}
		if (tx == 0)
			lse[bh * T + i] = m[a] + logf(l[a]);
	}
}

/* Dsum(B,NH,T) = sum over HD of dout * out, rows of dout/out(B,T,NH,HD) in memory order.
 * One warp per row. */
__global__ void attn_dsum_k(float *Dsum, const bf16 *dout, const bf16 *out, int T, int NH, int HD,
			    size_t rows)
{
	size_t r = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5; /* (b*T + t)*NH + h */
	int lane = threadIdx.x & 31;
	if (r >= rows)
		return; /* whole warp */
	const bf16 *g = dout + r * HD, *o = out + r * HD;
	float s = 0.0f;
	for (int d = lane; d < HD; d += 32)
		s += __bfloat162float(g[d]) * __bfloat162float(o[d]);
	s = warp_sum(s);
	if (lane == 0) {
		size_t h = r % (size_t)NH, bt = r / (size_t)NH;
		size_t t = bt % (size_t)T, b = bt / (size_t)T;
		Dsum[(b * NH + h) * T + t] = s;
	}
}

/* dK, dV parts of dqkv(B,T,NH,3,HD) for one key tile.  grid (ceil(T/64), NH, B), block 256;
 * block x owns keys [64x, 64x+64) and walks query tiles x..end (tile 0, the longest, first). */
template <int HDM>
__global__ __launch_bounds__(AT_T) void attn_bwd_dkv_k(bf16 *dqkv, const bf16 *dout,
						       const bf16 *qkv, const float *lse,
						       const float *Dsum, int T, int NH, int HD,
						       float scale, struct ops_attn k)
{
	constexpr int LD = HDM + 2, NC = HDM / 32;
	extern __shared__ __align__(16) unsigned char at_smem[];
	bf16 *Ks = (bf16 *)at_smem, *Vs = Ks + AT_B * LD, *Qs = Vs + AT_B * LD;
	bf16 *dOs = Qs + AT_B * LD;
	float *Pds = (float *)(dOs + AT_B * LD); /* [64 keys][AT_PS]: P * M */
	float *dSs = Pds + AT_B * AT_PS;         /* [64 keys][AT_PS]: dS */
	float *lse_s = dSs + AT_B * AT_PS, *D_s = lse_s + AT_B;
	int *ks_s = (int *)(D_s + AT_B);

	int kt = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
	int k0 = kt * AT_B;
	int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
	int hde = (HD + 1) & ~1;
	size_t rs = (size_t)NH * 3 * HD, ors = (size_t)NH * HD;
	const bf16 *base = qkv + (size_t)b * T * rs + (size_t)h * 3 * HD;
	const bf16 *obase = dout + (size_t)b * T * ors + (size_t)h * HD;
	uint64_t bh = (uint64_t)b * NH + h, dbh = at_bh(k, b, h);
	float slope = k.slopes ? k.slopes[h] : 0.0f, p = k.p;
	uint64_t seed = k.seed;

	at_load<HDM>(Ks, base + HD, rs, k0, T, HD);
	at_load<HDM>(Vs, base + 2 * HD, rs, k0, T, HD);
	float dk[4][NC][2], dv[4][NC][2];
#pragma unroll
	for (int a = 0; a < 4; a++)
#pragma unroll
		for (int c = 0; c < NC; c++)
			dk[a][c][0] = dk[a][c][1] = dv[a][c][0] = dv[a][c][1] = 0.0f;

	int nqt = (T + AT_B - 1) / AT_B;
	for (int qt = kt; qt < nqt; qt++) {
		int q0 = qt * AT_B;
		__syncthreads(); /* the previous tile's Qs, dOs, Pds, dSs are consumed */
		at_load<HDM>(Qs, base, rs, q0, T, HD);
		at_load<HDM>(dOs, obase, ors, q0, T, HD);
		if (threadIdx.x < AT_B) {
			int i = q0 + threadIdx.x;
			lse_s[threadIdx.x] = i < T ? lse[bh * T + i] : 0.0f;
			D_s[threadIdx.x] = i < T ? Dsum[bh * T + i] : 0.0f;
			ks_s[threadIdx.x] = at_kstart(k, b, T, i);
		}
		__syncthreads();

		float st[4][4], dp[4][4]; /* [key ty+16a][query tx+16b] */
		at_dots<HDM>(st, Ks, Qs, ty, tx, hde);
		at_dots<HDM>(dp, Vs, dOs, ty, tx, hde);
#pragma unroll
		for (int a = 0; a < 4; a++) {
			int j = k0 + ty + 16 * a;
#pragma unroll
			for (int bb = 0; bb < 4; bb++) {
				int ii = tx + 16 * bb, i = q0 + ii;
				bool ok = i < T && j <= i && j >= ks_s[ii];
				float s = at_score(st[a][bb], scale, slope, j);
				float P = ok ? expf(s - lse_s[ii]) : 0.0f;
				float keep = 1.0f;
				if (p > 0.0f && ok)
					keep = philox_keep(seed, at_elem(dbh, T, i, j), p);
				Pds[(ty + 16 * a) * AT_PS + ii] = P * keep;
				dSs[(ty + 16 * a) * AT_PS + ii] = P * (dp[a][bb] * keep - D_s[ii]);
			}
		}
		__syncthreads();

		int in = min(AT_B, T - q0);
		for (int ii = 0; ii < in; ii++) {
			float pa[4], sa[4];
#pragma unroll
			for (int a = 0; a < 4; a++) {
				pa[a] = Pds[(ty + 16 * a) * AT_PS + ii];
				sa[a] = dSs[(ty + 16 * a) * AT_PS + ii];
			}
#pragma unroll
			for (int c = 0; c < NC; c++) {
				float2 g = at_pair(dOs + ii * LD + 2 * tx + 32 * c);
				float2 q = at_pair(Qs + ii * LD + 2 * tx + 32 * c);
#pragma unroll
				for (int a = 0; a < 4; a++) {
					dv[a][c][0] = fmaf(pa[a], g.x, dv[a][c][0]);
					dv[a][c][1] = fmaf(pa[a], g.y, dv[a][c][1]);
					dk[a][c][0] = fmaf(sa[a], q.x, dk[a][c][0]);
					dk[a][c][1] = fmaf(sa[a], q.y, dk[a][c][1]);
				}
			}
		}
	}

#pragma unroll
	for (int a = 0; a < 4; a++) {
		int j = k0 + ty + 16 * a;
		if (j >= T)
			continue;
		bf16 *dst = dqkv + (((size_t)b * T + j) * NH + h) * 3 * HD;
#pragma unroll
		for (int c = 0; c < NC; c++) {
			int d = 2 * tx + 32 * c;
			if (d < HD) {
				dst[HD + d] = __float2bfloat16(dk[a][c][0] * scale);
				dst[2 * HD + d] = __float2bfloat16(dv[a][c][0]);
			}
			if (d + 1 < HD) {
				dst[HD + d + 1] = __float2bfloat16(dk[a][c][1] * scale);
				dst[2 * HD + d + 1] = __float2bfloat16(dv[a][c][1]);
			}
		}
	}
}

/* dQ part of dqkv(B,T,NH,3,HD) for one query tile.  grid (ceil(T/64), NH, B), block 256;
 * block x owns query tile ceil(T/64)-1-x and walks key tiles 0..diagonal. */
template <int HDM>
__global__ __launch_bounds__(AT_T) void attn_bwd_dq_k(bf16 *dqkv, const bf16 *dout,
						      const bf16 *qkv, const float *lse,
						      const float *Dsum, int T, int NH, int HD,
						      float scale, struct ops_attn k)
{
	constexpr int LD = HDM + 2, NC = HDM / 32;
	extern __shared__ __align__(16) unsigned char at_smem[];
	bf16 *Qs = (bf16 *)at_smem, *dOs = Qs + AT_B * LD, *Ks = dOs + AT_B * LD;
	bf16 *Vs = Ks + AT_B * LD;
	float *dSs = (float *)(Vs + AT_B * LD); /* [64 queries][AT_PS] */

	int q0 = (gridDim.x - 1 - blockIdx.x) * AT_B, h = blockIdx.y, b = blockIdx.z;
	int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
	int hde = (HD + 1) & ~1;
	size_t rs = (size_t)NH * 3 * HD, ors = (size_t)NH * HD;
	const bf16 *base = qkv + (size_t)b * T * rs + (size_t)h * 3 * HD;
	const bf16 *obase = dout + (size_t)b * T * ors + (size_t)h * HD;
	uint64_t bh = (uint64_t)b * NH + h, dbh = at_bh(k, b, h);
	float slope = k.slopes ? k.slopes[h] : 0.0f, p = k.p;
	uint64_t seed = k.seed;

	at_load<HDM>(Qs, base, rs, q0, T, HD);
	at_load<HDM>(dOs, obase, ors, q0, T, HD);
	float lse_r[4], D_r[4], dq[4][NC][2];
	int ks_r[4];
#pragma unroll
	for (int a = 0; a < 4; a++) {
		int i = q0 + ty + 16 * a;
		ks_r[a] = at_kstart(k, b, T, i);
		lse_r[a] = i < T ? lse[bh * T + i] : 0.0f;
		D_r[a] = i < T ? Dsum[bh * T + i] : 0.0f;
#pragma unroll
		for (int c = 0; c < NC; c++)
			dq[a][c][0] = dq[a][c][1] = 0.0f;
	}

	int nkt = min(q0 + AT_B - 1, T - 1) / AT_B + 1;
	for (int kt = 0; kt < nkt; kt++) {
		int k0 = kt * AT_B;
		__syncthreads(); /* the previous tile's Ks, dSs are consumed */
		at_load<HDM>(Ks, base + HD, rs, k0, T, HD);
		at_load<HDM>(Vs, base + 2 * HD, rs, k0, T, HD);
		__syncthreads();

		float s[4][4], dp[4][4]; /* [query ty+16a][key tx+16b] */
		at_dots<HDM>(s, Qs, Ks, ty, tx, hde);
		at_dots<HDM>(dp, dOs, Vs, ty, tx, hde);
#pragma unroll
		for (int a = 0; a < 4; a++) {
			int i = q0 + ty + 16 * a;
#pragma unroll
			for (int bb = 0; bb < 4; bb++) {
				int j = k0 + tx + 16 * bb;
				bool ok = i < T && j <= i && j >= ks_r[a];
				float sc = at_score(s[a][bb], scale, slope, j);
				float P = ok ? expf(sc - lse_r[a]) : 0.0f;
				float keep = 1.0f;
				if (p > 0.0f && ok)
					keep = philox_keep(seed, at_elem(dbh, T, i, j), p);
				dSs[(ty + 16 * a) * AT_PS + tx + 16 * bb] =
					P * (dp[a][bb] * keep - D_r[a]);
			}
		}
		__syncthreads();

		int jn = min(AT_B, T - k0);
		for (int jj = 0; jj < jn; jj++) {
			float sa[4];
#pragma unroll
			for (int a = 0; a < 4; a++)
				sa[a] = dSs[(ty + 16 * a) * AT_PS + jj];
#pragma unroll
			for (int c = 0; c < NC; c++) {
				float2 k = at_pair(Ks + jj * LD + 2 * tx + 32 * c);
#pragma unroll
				for (int a = 0; a < 4; a++) {
					dq[a][c][0] = fmaf(sa[a], k.x, dq[a][c][0]);
					dq[a][c][1] = fmaf(sa[a], k.y, dq[a][c][1]);
				}
			}
		}
	}

#pragma unroll
	for (int a = 0; a < 4; a++) {
		int i = q0 + ty + 16 * a;
		if (i >= T)
			continue;
		bf16 *dst = dqkv + (((size_t)b * T + i) * NH + h) * 3 * HD;
#pragma unroll
		for (int c = 0; c < NC; c++) {
			int d = 2 * tx + 32 * c;
			if (d < HD)
				dst[d] = __float2bfloat16(dq[a][c][0] * scale);
			if (d + 1 < HD)
				dst[d + 1] = __float2bfloat16(dq[a][c][1] * scale);
		}
	}
}

/* --- host side --- */

template <int HDM> static size_t smem_fwd()
{
	return 3 * AT_B * (HDM + 2) * sizeof(bf16) + AT_B * AT_PS * sizeof(float);
}
template <int HDM> static size_t smem_dkv()
{
	return 4 * AT_B * (HDM + 2) * sizeof(bf16) + 2 * AT_B * AT_PS * sizeof(float) +
	       2 * AT_B * sizeof(float) + AT_B * sizeof(int);
}
template <int HDM> static size_t smem_dq()
{
	return 4 * AT_B * (HDM + 2) * sizeof(bf16) + AT_B * AT_PS * sizeof(float);
}

/* Kernels using more than 48 KB of dynamic shared memory must say so once. */
template <typename K> static void allow_smem(K kernel, size_t bytes, int *done)
{
	if (*done)
		return;
	CU_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
				      (int)bytes));
	*done = 1;
}

template <int HDM>
static void fwd_launch(bf16 *out, float *lse, const bf16 *qkv, int B, int T, int NH, int HD,
		       float scale, struct ops_attn k)
{
	static int ready;
	size_t sm = smem_fwd<HDM>();
	allow_smem(attn_fwd_k<HDM>, sm, &ready);
	dim3 grid((unsigned)((T + AT_B - 1) / AT_B), (unsigned)NH, (unsigned)B);
	cu_launch(attn_fwd_k<HDM>, grid, AT_T, sm, cu.stream, out, lse, qkv, T, NH, HD, scale, k);
	CU_LAUNCHED("attention_fwd");
}

template <int HDM>
static void bwd_launch(bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const float *lse,
		       const float *Dsum, int B, int T, int NH, int HD, float scale,
		       struct ops_attn k)
{
	static int ready_dkv, ready_dq;
	size_t sm1 = smem_dkv<HDM>(), sm2 = smem_dq<HDM>();
	allow_smem(attn_bwd_dkv_k<HDM>, sm1, &ready_dkv);
	allow_smem(attn_bwd_dq_k<HDM>, sm2, &ready_dq);
	dim3 grid((unsigned)((T + AT_B - 1) / AT_B), (unsigned)NH, (unsigned)B);
	cu_launch(attn_bwd_dkv_k<HDM>, grid, AT_T, sm1, cu.stream, dqkv, dout, qkv, lse, Dsum, T,
		NH, HD, scale, k);
	CU_LAUNCHED("attention_bwd_dkv");
	cu_launch(attn_bwd_dq_k<HDM>, grid, AT_T, sm2, cu.stream, dqkv, dout, qkv, lse, Dsum, T, NH,
		HD, scale, k);
	CU_LAUNCHED("attention_bwd_dq");
}

static void check_shape(const char *op, int B, int T, int NH, int HD)
{
	if (HD < 1 || HD > 128)
		cu_die("%s: head dim %d is not supported (1..128)", op, HD);
	if (B > 65535 || NH > 65535)
		cu_die("%s: B=%d NH=%d exceed the grid limit 65535", op, B, NH);
	(void)T;
}

void cu_attention_fwd(void *out, float *lse, const void *qkv, int B, int T, int NH, int HD,
		      struct ops_attn k)
{
	CU_ENTER();
	if (B <= 0 || T <= 0 || NH <= 0)
		return;
	check_shape("attention_fwd", B, T, NH, HD);
	float scale = 1.0f / sqrtf((float)HD);
	bf16 *o = (bf16 *)out;
	const bf16 *x = (const bf16 *)qkv;
	if (HD <= 32)
		fwd_launch<32>(o, lse, x, B, T, NH, HD, scale, k);
	else if (HD <= 64)
		fwd_launch<64>(o, lse, x, B, T, NH, HD, scale, k);
	else
		fwd_launch<128>(o, lse, x, B, T, NH, HD, scale, k);
}

void cu_attention_bwd(void *dqkv, const void *dout, const void *qkv, const void *out,
		      const float *lse, int B, int T, int NH, int HD, struct ops_attn k)
{
	CU_ENTER();
	if (B <= 0 || T <= 0 || NH <= 0)
		return;
	check_shape("attention_bwd", B, T, NH, HD);
	float scale = 1.0f / sqrtf((float)HD);
	size_t rows = (size_t)B * T * NH;
	float *Dsum = (float *)cu_scratch(rows * sizeof(float));
	cu_launch(attn_dsum_k, (unsigned)((rows + 7) / 8), 256, 0, cu.stream, Dsum,
		(const bf16 *)dout, (const bf16 *)out, T, NH, HD, rows);
	CU_LAUNCHED("attention_dsum");
	bf16 *dx = (bf16 *)dqkv;
	const bf16 *g = (const bf16 *)dout, *x = (const bf16 *)qkv;
	if (HD <= 32)
		bwd_launch<32>(dx, g, x, lse, Dsum, B, T, NH, HD, scale, k);
	else if (HD <= 64)
		bwd_launch<64>(dx, g, x, lse, Dsum, B, T, NH, HD, scale, k);
	else
		bwd_launch<128>(dx, g, x, lse, Dsum, B, T, NH, HD, scale, k);
}
