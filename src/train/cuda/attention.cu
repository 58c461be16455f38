/* attention - causal self-attention with ALiBi and dropout, FlashAttention-2 style on tensor
 * cores: the (T,T) score matrix never exists in global memory, only 16 x 64 pieces of it in each
 * warp's registers.
 *
 * Layout (ops.h): qkv(B,T,NH,3,HD), q/k/v of a head adjacent (Megatron's per-rank order),
 * out(B,T,NH,HD), lse(B,NH,T) fp32.  s_ij = q_i.k_j / sqrt(HD) + slope_h * j for
 * kstart_i <= j <= i (kstart_i = 0 unless --reset-attention-mask starts the row at its
 * document); P = softmax_j(s) in fp32; O_i = sum_j P_ij M_ij v_j with the dropout mask
 * M_ij = philox_keep(seed, ((g*heads+H)*T+i)*T+j, p), g the sample's place in the global
 * batch and H the global head: the same draw as the CPU backend's, in any layout.
 * lse_i = log sum_j exp(s_ij) is saved (dropout does not enter it).  The bidirectional mode
 * (k.bidir, BERT's padding mask) lets every query of sample b - padded ones too - see keys
 * [0, klen[b]): the forward walks the key tiles up to klen instead of the diagonal, the
 * backward every query tile for keys below klen (the others' gradient is 0), and the masks of
 * both are one predicate, at_sees.
 *
 * Cross-attention (T5's inter_attention, ops.h xattn_*) is the same kernels over other
 * operands: queries from q(B,Tq,NH,HD), keys and values from kv(B,Tk,NH,2,HD), Tq != Tk, in the
 * bidirectional mode over the encoder's klen.  Where the rows of q, k, v, their gradients and
 * the output lie is one struct (at_io: base pointers, row and head strides, Tq, Tk), so the
 * self-attention's qkv columns and the cross-attention's two tensors go through one code path;
 * with Tq = Tk = T and qkv's strides the instructions are those of the self-attention before
 * at_io existed.  Dropout element (b, h, i, j) is ((g*heads+H)*Tq+i)*Tk+j.
 *
 * Tile products.  Every product of two tiles is mma.sync m16n8k16 (inputs in the activation type,
 * .bf16 or, under --fp16, .f16, with fp32 accumulate; ptx.h), its operands loaded from shared
 * memory with ldmatrix (.trans where the tile's rows are the product's k index).  A warp owns
 * 16-row groups of the block's tile - one in the backward, two in the forward at HDM <= 64, so
 * that each K and V fragment it reads from shared memory serves 32 rows (ldmatrix's bytes, not
 * the tensor pipe, bounded the one-group forward: 256 bytes per mma against 128 per clock) - and
 * never shares its accumulators, so no reduction crosses warps.  The accumulator fragment of a
 * product (rows g, g+8 of a row group, columns 2t, 2t+1 of each 8-column tile, lane = 4g + t)
 * is, two column tiles together, the A
 * fragment of the next product, so P and dS go from one mma to the next in registers, rounded to
 * the activation type: P (after dropout) before P V, P M before dV = (P M)^T dO, dS before dK and
 * dQ.  That rounding is the price of the tensor cores: each weight of P V carries a relative
 * error of at most 2^-9 in bf16 (2^-12 in fp16), so O_i is off by at most that times max_j |v_j|
 * (as far as the output's own rounding), and likewise the gradients; the sums of P (l, hence lse)
 * are taken in fp32 before rounding.  In fp16, P <= 1 (times 1/(1-p) with dropout) always fits;
 * dS carries the loss scale, and a scale too large for fp16 makes it inf, an overflow the scaler
 * sees.  Scores are kept in log2 units (scale and slope premultiplied by log2 e, exp2f), lse
 * converted back to natural units.  Q, K, V, dO tiles live in shared memory as 16-bit rows of
 * HDM+8 elements (144 bytes at HDM 64: the 8 rows an ldmatrix phase reads fall in distinct
 * banks); columns past HD and rows past T are zero.  The kernels are templates over the
 * activation type A; only the loads, the rounding and the mma's type suffix depend on it.
 *
 * Forward (FlashAttention-2's split): a block owns 128 query rows of one (b, h) - 4 warps of two
 * row groups at HDM <= 64, 8 of one at 128, where two would not fit in registers - and streams
 * the 64-key tiles 0..diagonal through shared memory, loading them with cp.async while it
 * computes (ptx.h): tile kt's V during its scores, tile kt+1's K, into the other of two K
 * buffers, during all of tile kt.  Per tile each warp computes S = Q K^T for its rows, masks,
 * updates the running max m (four lanes share a row: two xor shuffles) and the per-lane partial
 * sums l, rescales O by exp(m_old - m_new), and adds P V.  A row whose max is
 * still -inf uses 0 as reference so no inf - inf appears; one that sees no key at all (the
 * bidirectional mode with klen 0) ends with l = 0 and writes O = 0 and lse = +inf, as the CPU
 * backend does, so that exp(s - lse) = 0 and the backward's dQ = 0 agree with it.  Key chunks
 * (16 wide) past a row group's last row are skipped, so the diagonal tiles cost each group only
 * what its rows can see (a group that sees none of a tile - the first half of the block at its
 * second diagonal tile - skips it: its m, l and O would not change).
 *
 * Backward (FlashAttention-2's algebra): with P recomputed as exp(s - lse) and D_i = dO_i . O_i
 * (which equals sum_j P_ij M_ij dPd_ij, so dropout needs no extra term),
 *   dV_j = sum_i P_ij M_ij dO_i,  dS_ij = P_ij (M_ij dO_i.v_j - D_i),
 *   dK_j = scale sum_i dS_ij q_i,  dQ_i = scale sum_j dS_ij k_j.
 * The usual single kernel accumulates dQ with float atomics in whatever order the blocks get
 * there, which makes the gradient differ between runs.  Here one kernel does all of it with 5
 * tile products, and dQ is still bit-reproducible (FlashAttention-3's deterministic mode): a
 * block owns a key tile, walks the query tiles that see it from the last one down, and per query
 * tile computes S^T = K Q^T and dP^T = V dO^T (its warps own 16 keys each, so the accumulators
 * are directly the A operands of (P M)^T dO and dS^T Q for dV and dK), writes dS (rounded to
 * the activation type, as dK's operand is) into shared memory, and computes this key tile's part
 * of dQ, dS K, with each warp owning 16 queries.  The parts are added in a fixed order, key tile
 * 0, 1, ..., through an fp32 sum per (b, h, query tile) and a semaphore counting the parts in:
 * the block of key tile j waits until the count is j, adds its part (atomicAdd, so the adds need
 * no ordering from the memory model beyond the semaphore's; key tile 0 stores it with
 * atomicExch, so the sum needs no clearing), fences, and counts one more; the last part (the
 * diagonal tile; bidirectionally the last tile below klen) reads the sum instead and writes
 * dQ = scale (sum + part) in the activation type.  A block's key tile is not its blockIdx.x but
 * a ticket it takes from a counter per (b, h) when it starts (atomicAdd; CUB's decoupled
 * look-back takes its tile ids so): CUDA promises no order in which blocks start, but the blocks
 * holding key tiles 0..j-1 took their tickets before this one, so they are running or done and
 * the wait ends whatever the dispatch order (the CUDA executor checks it: tests/cuda-exec runs
 * each block to its end in forward, reverse or random order, and a block waiting for one that
 * has not started is a deadlock there).  The counters and semaphores are set to 0 by
 * attn_dsum_k, which runs just before on the same stream, so a backward abandoned midway leaves
 * nothing for the next one to wait on; the scratch (B x NH x Tq fp32 rows of HD, a semaphore per
 * 64 of them, a counter per head) is allocated once.  Key tile 0, the longest causal column,
 * goes to the first block that starts.  Walking the query tiles from the last, every key tile
 * reaches a given query tile at about the same step, so a block waits for the adds of the tiles
 * before it, not for their whole work.  S^T multiplies the same pairs as the
 * forward's S = Q K^T in the same k order (bit-identical in the executor, which adds them in k
 * order; the device's adder order within a k16 step is not documented).
 *
 * HD up to 128: kernels are instantiated for HDM = 32, 64, 128 and handle any HD <= HDM by
 * zero padding (k steps and output columns past HD rounded up to 16 are skipped).  Shared
 * memory at HDM 128: 85 KiB (forward: Q, V, two K tiles), 78 KiB (backward), within the opt-in
 * limit of sm_86/89 (99 KiB), A100 (163 KiB) and H100 (227 KiB).  Any T works (tiles are masked
 * at the end); heavy tiles (long causal rows) are launched first to shorten the tail.  Loads
 * from global memory are cp.async's 16 bytes when HD is a multiple of 8 (the next tiles load
 * while this one is computed on: the forward's next K and this V, the backward's next Q and dO
 * during this tile's dQ part), plain element loads otherwise.
 *
 * Speed, as the step model prices it (not yet measured on a GPU).  Since November 2026 it prices
 * these kernels by their structure (src/train/plan/gpumodel.c gpumodel_attn_seconds: ldmatrix
 * bytes against mma.sync's share of the peak, exp2 on the SFU, loads hidden under the SM's other
 * blocks; fit to FlashAttention-2's published H100 curve, doc/performance.md): the forward at
 * GPT-2's shapes (head dim 64, T 1024) from 18.7% of an H100's dense bf16 peak with one row group
 * per warp to 24.6% with two, the backward 20.8%; cp.async and the 128-row tiles change nothing
 * there (3-4 blocks of the old kernels per SM already hid their loads).  Before, at an assumed
 * 25% of the peak: for GPT-2 124M at B x T = 16 x 1024, attention goes from
 * 62.6% of the step with the fp32 SIMT kernels this file had before to 19.2% with the two-kernel
 * backward (dK/dV, then dQ: 7 tile products), and the predicted MFU from 21.3% to 45.9%
 * (45.6% later).  The one-kernel backward (5 products, the fp32 sums' bytes counted) takes the
 * 124M step from 31.0 to 29.7 ms (MFU 45.6% to 47.6%) and the 350M step (24 x 1024, 16 heads)
 * from 78.8 to 75.4 ms (50.9% to 53.2%).  ptxas (CUDA 13.0.88, sm_90, bf16), registers at HDM
 * 32 / 64 / 128: forward 212 / 252 / 199 (4 warps at 32 and 64, 8 at 128; 126 / 128 / 168 with
 * 4 warps of one group), backward 139 / 239 / 255 (228 / 254 before the tile tickets), no spill
 * on sm_80/86/89/90: 2 blocks per SM at HDM 64 in both. */
#include <math.h>

#include "train/cuda/common.h"
#include "train/cuda/ptx.h"
#include "train/model/philox.h"

#define AT_B 64           /* key rows per tile; the backward's query rows per tile */
#define AT_W 4            /* the backward's warps per block, each 16 rows of a tile */
#define AT_T (32 * AT_W)  /* the backward's threads per block */
#define AT_BQ 128         /* the forward's query rows per block (at_fwd_shape: its warps) */
#define AT_LOG2E 1.4426950408889634f
#define AT_LN2 0.69314718055994531f

/* Where an attention call's operands lie (elements): q's rows (and dq's; out's and dout's have
 * stride NH*HD) and k's (and dk's); head h of sample b starts at (b*T + row)*rs + h*hs of its
 * tensor, and v (dv) is always k (dk) + HD - qkv's [q, k, v] and kv's [k, v] of a head alike.
 * The self-attention's are qkv's columns, the cross-attention's q and kv (see the top).  Kept
 * small: every kernel holds it in registers. */
template <typename A> struct at_io {
	const A *q, *k;
	A *dq, *dk;
	int qrs, krs, qhs, khs;      /* row and head strides of q (dq) and of k, v (dk, dv) */
	int Tq, Tk;
};

/* head h of sample b's row 0 in a tensor of T rows */
__device__ __forceinline__ size_t at_row0(int b, int T, int rs, int h, int hs)
{
	return ((size_t)b * (size_t)T) * (size_t)rs + (size_t)h * (size_t)hs;
}

/* Rows [r0, r0+ROWS) of one head's q, k, v or dout into sm[ROWS][HDM+8] by a block of NT
 * threads; src points at row 0 of that head, rs is the distance between rows (elements).  Zero
 * past T and past HD.  vec: HD is a multiple of 8 and src 16-byte aligned, so rows go in 16-byte
 * pieces by cp.async (ptx.h), which the caller commits and waits for; else by plain loads and
 * stores, done when this returns (the caller's wait is then a no-op). */
template <int HDM, int ROWS, int NT, typename A>
__device__ __forceinline__ void at_load(A *sm, const A *src, size_t rs, int r0, int T, int HD,
					int vec)
{
	constexpr int LD = HDM + 8, CH = HDM / 8;
	if (vec) {
		for (int idx = threadIdx.x; idx < ROWS * CH; idx += NT) {
			int rr = idx / CH, d = idx % CH * 8, row = r0 + rr;
			bool in = row < T && d < HD;
			ptx_cp_async16(sm + rr * LD + d, in ? src + (size_t)row * rs + d : src,
				       in ? 16 : 0);
		}
		return;
	}
	for (int idx = threadIdx.x; idx < ROWS * HDM; idx += NT) {
		int rr = idx / HDM, d = idx % HDM, row = r0 + rr;
		A v = f_act<A>(0.0f);
		if (row < T && d < HD)
			v = src[(size_t)row * rs + d];
		sm[rr * LD + d] = v;
	}
}

/* Two floats as a pair of A (round to nearest even), lo in the lower half */
template <typename A> __device__ __forceinline__ uint32_t at_pack(float lo, float hi)
{
	typename act2<A>::T v = act2<A>::from_f2(lo, hi);
	return *reinterpret_cast<const uint32_t *>(&v);
}

/* d += a b on the tensor cores, the instruction of the activation type A (a macro, so that the
 * executor sees the instruction at the caller's line, where all lanes of the warp must meet) */
#define AT_MMA(A, d, a, b)                                                                         \
	do {                                                                                       \
		if constexpr (act_is_f16<A>::value)                                                \
			ptx_mma_m16n8k16_f16(d, a, b, d);                                          \
		else                                                                               \
			ptx_mma_m16n8k16_bf16(d, a, b, d);                                         \
	} while (0)

/* The mma A fragment of rows r0..r0+15, columns c0..c0+15 of a row-major tile (stride LD) */
template <int LD, typename A>
__device__ __forceinline__ void at_frag_a(uint32_t (&a)[4], const A *sm, int r0, int c0, int lane)
{
	ptx_ldmatrix(a, sm + (r0 + (lane & 15)) * LD + c0 + (lane >> 4) * 8);
}

/* B fragments of two 8-column tiles (b0: n0..n0+7, b1: n0+8..n0+15) where B's column n is row
 * n of the tile and k runs along the row from c0 (B = X^T: K in Q K^T, Q in K Q^T) */
template <int LD, typename A>
__device__ __forceinline__ void at_frag_bt(uint32_t (&b0)[2], uint32_t (&b1)[2], const A *sm,
					   int n0, int c0, int lane)
{
	uint32_t r[4];
	ptx_ldmatrix(r, sm + (n0 + (lane & 7) + (lane >> 4) * 8) * LD + c0 + ((lane >> 3) & 1) * 8);
	b0[0] = r[0], b0[1] = r[1], b1[0] = r[2], b1[1] = r[3];
}

/* B fragments of two 8-column tiles (columns c0..c0+15 of the tile) where B's row k is row
 * k0 + k of the tile (B = X: V in P V, dO and Q in dV and dK, K in dQ) */
template <int LD, typename A>
__device__ __forceinline__ void at_frag_b(uint32_t (&b0)[2], uint32_t (&b1)[2], const A *sm,
					  int k0, int c0, int lane)
{
	uint32_t r[4];
	ptx_ldmatrix_trans(r, sm + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + c0 +
				      (lane >> 4) * 8);
	b0[0] = r[0], b0[1] = r[1], b1[0] = r[2], b1[1] = r[3];
}

/* The A fragment of a 16 x 16 chunk from two accumulator tiles (its columns 0..7 and 8..15):
 * the accumulator layout is the A layout's two halves; rounds to the activation type A. */
template <typename A>
__device__ __forceinline__ void at_acc_a(uint32_t (&a)[4], const float (&c0)[4],
					 const float (&c1)[4])
{
	a[0] = at_pack<A>(c0[0], c0[1]);
	a[1] = at_pack<A>(c0[2], c0[3]);
	a[2] = at_pack<A>(c1[0], c1[1]);
	a[3] = at_pack<A>(c1[2], c1[3]);
}

/* For each of RG row groups r: s[r](16 x 64) = X[x0+16r..x0+16r+15] Y[0..63]^T over the first nk
 * 16-wide steps of the head dim, for the 16-column chunks lo..hi[r]-1 of s[r] only (the others
 * are left 0: masked by the caller).  A B fragment of Y is loaded once for all the row groups
 * (what RG > 1 saves: shared-memory bytes per mma).  The same instructions in the same order for
 * each element in every kernel. */
template <int HDM, int RG, typename A>
__device__ __forceinline__ void at_scores(float (&s)[RG][8][4], const A *X, int x0, const A *Y,
					  int nk, int lo, const int (&hi)[RG], int lane)
{
	constexpr int LD = HDM + 8;
	int hmax = 0;
#pragma unroll
	for (int r = 0; r < RG; r++) {
		hmax = max(hmax, hi[r]);
#pragma unroll
		for (int n = 0; n < 8; n++)
			s[r][n][0] = s[r][n][1] = s[r][n][2] = s[r][n][3] = 0.0f;
	}
#pragma unroll
	for (int kc = 0; kc < HDM / 16; kc++) {
		if (kc >= nk)
			break;
		uint32_t a[RG][4];
#pragma unroll
		for (int r = 0; r < RG; r++)
			if (RG == 1 || hi[r] > lo) /* (one group: as before row groups, unconditional) */
				at_frag_a<LD>(a[r], X, x0 + 16 * r, kc * 16, lane);
#pragma unroll
		for (int c = 0; c < 4; c++) {
			if (c < lo || c >= hmax)
				continue;
			uint32_t b0[2], b1[2];
			at_frag_bt<LD>(b0, b1, Y, c * 16, kc * 16, lane);
#pragma unroll
			for (int r = 0; r < RG; r++)
				if (RG == 1 || c < hi[r]) {
					AT_MMA(A, s[r][2 * c], a[r], b0);
					AT_MMA(A, s[r][2 * c + 1], a[r], b1);
				}
		}
	}
}

/* For each row group r: o[r](16 x HDM) += p[r](16 x 64) Z[0..63] over the 16-row chunks
 * lo..hi[r]-1 of Z (p[r] is 0 elsewhere), for the first nd 16-wide column chunks of o (the rest
 * are past HD); Z's fragments loaded once for all the row groups */
template <int HDM, int RG, typename A>
__device__ __forceinline__ void at_accum(float (&o)[RG][HDM / 8][4], const float (&p)[RG][8][4],
					 const A *Z, int nd, int lo, const int (&hi)[RG], int lane)
{
	constexpr int LD = HDM + 8;
	int hmax = 0;
#pragma unroll
	for (int r = 0; r < RG; r++)
		hmax = max(hmax, hi[r]);
#pragma unroll
	for (int c = 0; c < 4; c++) {
		if (c < lo || c >= hmax)
			continue;
		uint32_t a[RG][4];
#pragma unroll
		for (int r = 0; r < RG; r++)
			if (RG == 1 || c < hi[r])
				at_acc_a<A>(a[r], p[r][2 * c], p[r][2 * c + 1]);
#pragma unroll
		for (int dc = 0; dc < HDM / 16; dc++) {
			if (dc >= nd)
				break;
			uint32_t b0[2], b1[2];
			at_frag_b<LD>(b0, b1, Z, c * 16, dc * 16, lane);
#pragma unroll
			for (int r = 0; r < RG; r++)
				if (RG == 1 || c < hi[r]) {
					AT_MMA(A, o[r][2 * dc], a[r], b0);
					AT_MMA(A, o[r][2 * dc + 1], a[r], b1);
				}
		}
	}
}

/* The score of key j from a dot product, in log2 units (sc2 = scale log2 e, sl2 = slope
 * log2 e): one expression shared by all kernels. */
__device__ __forceinline__ float at_score(float dot, float sc2, float sl2, int j)
{
	return fmaf(sl2, (float)j, dot * sc2);
}

__device__ __forceinline__ uint64_t at_elem(uint64_t bh, int Tq, int Tk, int i, int j)
{
	return (bh * (uint64_t)Tq + (uint64_t)i) * (uint64_t)Tk + (uint64_t)j;
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

/* Keys sample b's queries see in the bidirectional mode: [0, kl); -1 in the causal one. */
__device__ __forceinline__ int at_klen(const struct ops_attn &k, int b, int T)
{
	return k.bidir ? (k.klen ? k.klen[b] : T) : -1;
}

/* Whether query i sees key j: causal from its first key ks to itself, or bidirectional below
 * kl; never a query past T (Tq). */
__device__ __forceinline__ bool at_sees(int i, int j, int T, int kl, int ks)
{
	return i < T && (kl >= 0 ? j < kl : j <= i && j >= ks);
}

/* Dropout's keep flags of the 32 scores a lane holds, bit 4n + e for element e of column tile n
 * (row r0 for e < 2, else r1; column c0 + 8n + (e & 1)); keys_rows: the rows are keys (S^T).
 * One philox draw per score (as philox_keep), in a loop kept rolled so that the generator's
 * registers are needed once rather than 32 times; scores above the diagonal or past T (masked in
 * every kernel) are not drawn. */
__device__ __forceinline__ uint32_t at_keepbits(uint64_t seed, uint64_t dbh, int Tq, int Tk, int r0,
						int r1,
						int c0, int keys_rows, float p, int kl)
{
	uint32_t bits = 0;
#pragma unroll 1
	for (int x = 0; x < 32; x++) {
		int r = (x & 2) ? r1 : r0, c = c0 + (x >> 2) * 8 + (x & 1);
		int i = keys_rows ? c : r, j = keys_rows ? r : c;
		if (at_sees(i, j, Tq, kl, 0) &&
		    philox_keep(seed, at_elem(dbh, Tq, Tk, i, j), p) != 0.0f)
			bits |= 1u << x;
	}
	return bits;
}

/* Of a 64-column key tile at k0, the 16-wide chunks a warp whose rows end at `last` (the last
 * query it owns that exists) can see: 0 when its rows are past T or before k0. */
__device__ __forceinline__ int at_chunks_upto(int last, int k0)
{
	return last < k0 ? 0 : min(4, (last - k0) / 16 + 1);
}

/* Row groups (16 rows each) per warp in the forward: two at HDM <= 64 (each K and V fragment
 * read from shared memory serves both), one at 128, where two would not fit in registers. */
template <int HDM> struct at_fwd_shape {
	static constexpr int RG = HDM <= 64 ? 2 : 1;
	static constexpr int WARPS = AT_BQ / (16 * RG);
	static constexpr int THREADS = 32 * WARPS;
};

/* out(B,Tq,NH,HD), lse(B,NH,Tq) from the operands of io.  grid (ceil(Tq/128), NH, B), block
 * at_fwd_shape's threads.  Block x handles query tile ceil(Tq/128)-1-x (longest rows first);
 * warp w its rows 16 RG w .. 16 RG w + 16 RG - 1, row group r the 16 from 16 RG w + 16 r.  Key
 * tile kt's V is loaded while the warps compute its scores, key tile kt+1's K (into the other of
 * two K buffers) during the whole of tile kt (see the top). */
template <int HDM, typename A>
__global__ __launch_bounds__(at_fwd_shape<HDM>::THREADS) void attn_fwd_mma_k(
	A *out, float *lse, struct at_io<A> io, int NH, int HD, float scale, int vec,
	struct ops_attn k)
{
	constexpr int LD = HDM + 8, ND = HDM / 8, RG = at_fwd_shape<HDM>::RG;
	constexpr int NT = at_fwd_shape<HDM>::THREADS;
	extern __shared__ __align__(16) unsigned char at_smem[];
	A *Qs = (A *)at_smem, *Vs = Qs + AT_BQ * LD, *Kb = Vs + AT_B * LD; /* Kb: two K tiles */

	int q0 = (gridDim.x - 1 - blockIdx.x) * AT_BQ, h = blockIdx.y, b = blockIdx.z;
	int lane = threadIdx.x & 31, w0 = (threadIdx.x >> 5) * 16 * RG, g = lane >> 2, t = lane & 3;
	int nk = (HD + 15) / 16, T = io.Tq, Tk = io.Tk;
	const A *qb = io.q + at_row0(b, T, io.qrs, h, io.qhs);
	const A *kb = io.k + at_row0(b, Tk, io.krs, h, io.khs);
	uint64_t bh = (uint64_t)b * NH + h, dbh = at_bh(k, b, h);
	float sc2 = scale * AT_LOG2E, sl2 = (k.slopes ? k.slopes[h] : 0.0f) * AT_LOG2E, p = k.p;
	float keep1 = 1.0f / (1.0f - p); /* a kept score's factor, as philox_keep's */
	uint64_t seed = k.seed;
	int kl = at_klen(k, b, Tk);

	int ir[RG][2], ks[RG][2], last[RG]; /* this lane's rows, their first keys; a group's last key */
	float m[RG][2], l[RG][2], o[RG][ND][4]; /* l: this lane's part */
#pragma unroll
	for (int r = 0; r < RG; r++) {
		int r0 = q0 + w0 + 16 * r;
		ir[r][0] = r0 + g, ir[r][1] = r0 + g + 8;
		ks[r][0] = at_kstart(k, b, T, ir[r][0]), ks[r][1] = at_kstart(k, b, T, ir[r][1]);
		m[r][0] = m[r][1] = -INFINITY, l[r][0] = l[r][1] = 0.0f;
#pragma unroll
		for (int c = 0; c < ND; c++)
			o[r][c][0] = o[r][c][1] = o[r][c][2] = o[r][c][3] = 0.0f;
		/* the last key the group's rows see: its last row (causal) or kl - 1; none past T */
		last[r] = r0 >= T ? -1 : kl >= 0 ? kl - 1 : min(r0 + 15, T - 1);
	}

	/* key tiles up to the diagonal (causal, where Tk = T), or up to kl */
	int nkt = kl >= 0 ? (kl + AT_B - 1) / AT_B : min(q0 + AT_BQ - 1, T - 1) / AT_B + 1;
	at_load<HDM, AT_BQ, NT>(Qs, qb, io.qrs, q0, T, HD, vec);
	if (nkt > 0)
		at_load<HDM, AT_B, NT>(Kb, kb, io.krs, 0, Tk, HD, vec);
	ptx_cp_async_commit();
	for (int kt = 0; kt < nkt; kt++) {
		int k0 = kt * AT_B;
		const A *Ks = Kb + (kt & 1) * AT_B * LD;
		ptx_cp_async_wait<0>();
		/* this tile's K (and Q) are in; every warp is done with the last V and the K before */
		__syncthreads();
		at_load<HDM, AT_B, NT>(Vs, kb + HD, io.krs, k0, Tk, HD, vec);
		ptx_cp_async_commit();
		if (kt + 1 < nkt)
			at_load<HDM, AT_B, NT>(Kb + ((kt + 1) & 1) * AT_B * LD, kb, io.krs, k0 + AT_B, Tk,
					       HD, vec);
		ptx_cp_async_commit();

		/* the 16-key chunks each row group sees; none (the first half's groups at the
		 * diagonal's second tile): the tile changes nothing of theirs, m, l, o as they were */
		int hi[RG], any = 0;
#pragma unroll
		for (int r = 0; r < RG; r++)
			any |= hi[r] = at_chunks_upto(last[r], k0);
		float s[RG][8][4];
		if (any) {
			at_scores<HDM, RG>(s, Qs, w0, Ks, nk, 0, hi, lane);
#pragma unroll
			for (int r = 0; r < RG; r++) {
				if (!hi[r])
					continue;
				float mt[2] = {-INFINITY, -INFINITY};
#pragma unroll
				for (int n = 0; n < 8; n++)
#pragma unroll
					for (int e = 0; e < 4; e++) {
						int x = e >> 1, i = ir[r][x], j = k0 + n * 8 + 2 * t + (e & 1);
						s[r][n][e] = at_sees(i, j, T, kl, ks[r][x])
								     ? at_score(s[r][n][e], sc2, sl2, j)
								     : -INFINITY;
						mt[x] = fmaxf(mt[x], s[r][n][e]);
					}
				float ref[2];
#pragma unroll
				for (int x = 0; x < 2; x++) {
					mt[x] = fmaxf(mt[x], __shfl_xor_sync(0xffffffffu, mt[x], 1));
					mt[x] = fmaxf(mt[x], __shfl_xor_sync(0xffffffffu, mt[x], 2));
					float mn = fmaxf(m[r][x], mt[x]);
					ref[x] = mn == -INFINITY ? 0.0f : mn;
					float alpha = exp2f(m[r][x] - ref[x]);
					m[r][x] = mn;
					l[r][x] *= alpha;
#pragma unroll
					for (int c = 0; c < ND; c++) {
						o[r][c][2 * x] *= alpha;
						o[r][c][2 * x + 1] *= alpha;
					}
				}
				uint32_t kbits = p > 0.0f ? at_keepbits(seed, dbh, T, Tk, ir[r][0],
									  ir[r][1], k0 + 2 * t, 0, p, kl)
							  : 0;
#pragma unroll
				for (int n = 0; n < 8; n++)
#pragma unroll
					for (int e = 0; e < 4; e++) {
						int x = e >> 1;
						/* masked: exp2(-inf) = 0 */
						float pr = exp2f(s[r][n][e] - ref[x]);
						l[r][x] += pr;
						if (p > 0.0f)
							pr *= (kbits >> (4 * n + e) & 1) ? keep1 : 0.0f;
						s[r][n][e] = pr;
					}
			}
		}
		ptx_cp_async_wait<1>(); /* V's group; the next K's may still be in flight */
		__syncthreads(); /* this tile's V is in */
		if (any)
			at_accum<HDM, RG>(o, s, Vs, nk, 0, hi, lane);
	}

#pragma unroll
	for (int r = 0; r < RG; r++)
#pragma unroll
		for (int x = 0; x < 2; x++) {
			l[r][x] += __shfl_xor_sync(0xffffffffu, l[r][x], 1);
			l[r][x] += __shfl_xor_sync(0xffffffffu, l[r][x], 2);
			int i = ir[r][x];
			if (i >= T)
				continue;
			/* a row that saw no key (bidirectional, klen 0): output 0, lse +inf, so that
			 * the backward's exp(s - lse) is 0 too (FlashAttention-2's convention) - not
			 * 0 x 1/0 */
			float inv = l[r][x] == 0.0f ? 0.0f : 1.0f / l[r][x];
			A *dst = out + (((size_t)b * T + i) * NH + h) * HD;
#pragma unroll
			for (int c = 0; c < ND; c++) {
				int d = c * 8 + 2 * t;
				if (d < HD)
					dst[d] = f_act<A>(o[r][c][2 * x] * inv);
				if (d + 1 < HD)
					dst[d + 1] = f_act<A>(o[r][c][2 * x + 1] * inv);
			}
			if (t == 0)
				lse[bh * T + i] = l[r][x] == 0.0f ? INFINITY
								 : (m[r][x] + log2f(l[r][x])) * AT_LN2;
		}
}

/* Dsum(B,NH,T) = sum over HD of dout * out, rows of dout/out(B,T,NH,HD) in memory order.
 * One warp per row.  Also zeroes zero[0..nzero) (the dQ protocol's semaphores and tile
 * counters, for the backward that follows: the grid has a thread for each). */
template <typename A>
__global__ void attn_dsum_k(float *Dsum, const A *dout, const A *out, int T, int NH, int HD,
			    size_t rows, int *zero, size_t nzero)
{
	size_t gid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (gid < nzero)
		zero[gid] = 0;
	size_t r = gid >> 5; /* (b*T + t)*NH + h */
	int lane = threadIdx.x & 31;
	if (r >= rows)
		return; /* whole warp */
	const A *g = dout + r * HD, *o = out + r * HD;
	float s = 0.0f;
	for (int d = lane; d < HD; d += 32)
		s += act_f(g[d]) * act_f(o[d]);
	s = warp_sum(s);
	if (lane == 0) {
		size_t h = r % (size_t)NH, bt = r / (size_t)NH;
		size_t t = bt % (size_t)T, b = bt / (size_t)T;
		Dsum[(b * NH + h) * T + t] = s;
	}
}

/* The deterministic dQ protocol's scratch (see the top): per (b, h, query tile) a semaphore (the
 * number of key tiles whose contributions are in) and 64 x HD fp32 partial sums, and per (b, h)
 * the counter its blocks take their key tiles from.  sem and tick are zeroed before each
 * backward (attn_dsum_k); acc is written by key tile 0 before it is read. */
struct at_dq {
	int *sem;    /* (B, NH, nqt), then tick (B, NH): one range for attn_dsum_k to zero */
	int *tick;
	float *acc;  /* (B, NH, nqt, 64, HD) */
};

/* Thread 0 waits until `want` key tiles have added into a query tile's sum, then the block goes
 * on: only key tiles below this block's are waited for, and the blocks holding them took their
 * tickets first, so they are running or done and the wait ends.  The volatile load sees other
 * SMs' atomics; the fence orders it before the block's own reads of the sum. */
__device__ __forceinline__ void at_dq_wait(const int *sem, int want)
{
	if (threadIdx.x == 0) {
		while (*(const volatile int *)sem != want)
			__nanosleep(32);
		__threadfence();
	}
	__syncthreads();
}

/* dK, dV (io.dk, io.dk + HD) for one key tile and its part of dQ (io.dq).  grid (ceil(Tk/64),
 * NH, B), block 128; a block owns keys [64x, 64x+64) for the ticket x it takes from its head's
 * counter (not blockIdx.x: see the top) and walks the query tiles that see them
 * from the last down to x (causal; all of them bidirectionally, none for a tile at or past klen);
 * warp w owns keys 16w..16w+15 of the tile for dK, dV and queries 16w..16w+15 of the query tile
 * for dQ.  Query tile qt's contributions are added in the order of the key tiles (0, 1, ...); the
 * last one (the diagonal tile, or the last below klen) writes dQ itself. */
template <int HDM, typename A>
__global__ __launch_bounds__(AT_T) void attn_bwd_mma_k(struct at_io<A> io, const A *dout,
						       const float *lse, const float *Dsum,
						       struct at_dq dqs, int NH, int HD,
						       float scale, int vec, struct ops_attn k)
{
	constexpr int LD = HDM + 8, ND = HDM / 8, LS = AT_B + 8;
	extern __shared__ __align__(16) unsigned char at_smem[];
	A *Ks = (A *)at_smem, *Vs = Ks + AT_B * LD, *Qs = Vs + AT_B * LD;
	A *dOs = Qs + AT_B * LD, *dSs = dOs + AT_B * LD; /* dSs: dS[query][key], stride LS */
	float *lse_s = (float *)(dSs + AT_B * LS), *D_s = lse_s + AT_B; /* lse in log2 units */
	int *ks_s = (int *)(D_s + AT_B), *kt_s = ks_s + AT_B;

	int h = blockIdx.y, b = blockIdx.z;
	if (threadIdx.x == 0)   /* this block's key tile: the head's next ticket */
		*kt_s = atomicAdd(dqs.tick + (size_t)b * NH + h, 1);
	__syncthreads();
	int kt = *kt_s;
	int k0 = kt * AT_B;
	int lane = threadIdx.x & 31, w0 = (threadIdx.x >> 5) * 16, g = lane >> 2, t = lane & 3;
	int nk = (HD + 15) / 16, T = io.Tq, Tk = io.Tk;
	size_t ors = (size_t)NH * HD;
	const A *qb = io.q + at_row0(b, T, io.qrs, h, io.qhs);
	const A *kb = io.k + at_row0(b, Tk, io.krs, h, io.khs);
	A *dqb = io.dq + at_row0(b, T, io.qrs, h, io.qhs);
	const A *obase = dout + (size_t)b * T * ors + (size_t)h * HD;
	uint64_t bh = (uint64_t)b * NH + h, dbh = at_bh(k, b, h);
	float sc2 = scale * AT_LOG2E, sl2 = (k.slopes ? k.slopes[h] : 0.0f) * AT_LOG2E, p = k.p;
	float keep1 = 1.0f / (1.0f - p); /* a kept score's factor, as philox_keep's */
	uint64_t seed = k.seed;

	at_load<HDM, AT_B, AT_T>(Ks, kb, io.krs, k0, Tk, HD, vec);
	at_load<HDM, AT_B, AT_T>(Vs, kb + HD, io.krs, k0, Tk, HD, vec);
	int jr[2] = {k0 + w0 + g, k0 + w0 + g + 8}; /* this lane's keys */
	float dk1[1][ND][4], dv1[1][ND][4]; /* one row group per warp (at_accum's RG) */
	float(&dk)[ND][4] = dk1[0], (&dv)[ND][4] = dv1[0];
#pragma unroll
	for (int c = 0; c < ND; c++)
#pragma unroll
		for (int e = 0; e < 4; e++)
			dk[c][e] = dv[c][e] = 0.0f;

	int nqt = (T + AT_B - 1) / AT_B, kl = at_klen(k, b, Tk);
	/* key tiles that add to every query tile they see: 0..qt (causal), those below kl */
	int nkt = (Tk + AT_B - 1) / AT_B;
	int ncon = kl >= 0 ? min(nkt, (kl + AT_B - 1) / AT_B) : nkt;
	if (ncon == 0 && kt == 0) {
		/* bidirectional with klen 0: no key adds to dQ, which is 0 */
		for (int idx = threadIdx.x; idx < T * HD; idx += AT_T)
			dqb[(size_t)(idx / HD) * io.qrs + idx % HD] = f_act<A>(0.0f);
	}
	int qfirst = kl >= 0 ? (kt < ncon ? 0 : nqt) : kt;
	if (nqt - 1 >= qfirst) {
		at_load<HDM, AT_B, AT_T>(Qs, qb, io.qrs, (nqt - 1) * AT_B, T, HD, vec);
		at_load<HDM, AT_B, AT_T>(dOs, obase, ors, (nqt - 1) * AT_B, T, HD, vec);
	}
	ptx_cp_async_commit();
	for (int qt = nqt - 1; qt >= qfirst; qt--) {
		int q0 = qt * AT_B;
		/* (the last tile's lse_s, D_s, ks_s were read before its middle barrier, its dSs
		 * before its last one) */
		if (threadIdx.x < AT_B) {
			int i = q0 + threadIdx.x;
			lse_s[threadIdx.x] = i < T ? lse[bh * T + i] * AT_LOG2E : 0.0f;
			D_s[threadIdx.x] = i < T ? Dsum[bh * T + i] : 0.0f;
			ks_s[threadIdx.x] = at_kstart(k, b, T, i);
		}
		ptx_cp_async_wait<0>();
		__syncthreads(); /* this tile's Q and dO (and at the first, K and V) are in */

		/* 16-query chunks that can see one of the warp's keys: queries >= its first key (causal),
		 * < T; none when the warp's keys are all past T (or kl) */
		int lo = kl >= 0 ? 0 : max(0, (k0 + w0 - q0) / 16);
		int hi = k0 + w0 >= (kl >= 0 ? kl : Tk) ? 0 : at_chunks_upto(T - 1, q0);
		float st1[1][8][4], dp1[1][8][4]; /* [key g, g+8][query 8n + 2t, +1] */
		float(&st)[8][4] = st1[0], (&dp)[8][4] = dp1[0];
		int hi1[1] = {hi};
		at_scores<HDM, 1>(st1, Ks, w0, Qs, nk, lo, hi1, lane);
		at_scores<HDM, 1>(dp1, Vs, w0, dOs, nk, lo, hi1, lane);
		uint32_t kbits = p > 0.0f ? at_keepbits(seed, dbh, T, Tk, jr[0], jr[1], q0 + 2 * t, 1,
							  p, kl) : 0;
#pragma unroll
		for (int n = 0; n < 8; n++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				int j = jr[e >> 1], ii = n * 8 + 2 * t + (e & 1), i = q0 + ii;
				bool ok = at_sees(i, j, T, kl, ks_s[ii]);
				float P = ok ? exp2f(at_score(st[n][e], sc2, sl2, j) - lse_s[ii]) : 0.0f;
				float keep = 1.0f;
				if (p > 0.0f)
					keep = (kbits >> (4 * n + e) & 1) ? keep1 : 0.0f;
				st[n][e] = P * keep;                     /* (P M)^T */
				dp[n][e] = P * (dp[n][e] * keep - D_s[ii]); /* dS^T */
				/* dS, rounded as the A operand of dK's product is */
				dSs[ii * LS + w0 + g + (e >> 1) * 8] = f_act<A>(dp[n][e]);
			}
		at_accum<HDM, 1>(dv1, st1, dOs, nk, lo, hi1, lane);
		at_accum<HDM, 1>(dk1, dp1, Qs, nk, lo, hi1, lane);
		__syncthreads(); /* dSs is whole; Qs and dOs are consumed */
		if (qt - 1 >= qfirst) { /* the next tile's, while this one's dQ part is made */
			at_load<HDM, AT_B, AT_T>(Qs, qb, io.qrs, q0 - AT_B, T, HD, vec);
			at_load<HDM, AT_B, AT_T>(dOs, obase, ors, q0 - AT_B, T, HD, vec);
		}
		ptx_cp_async_commit();

		/* this key tile's part of dQ for queries q0+w0..+15: dS(16 x 64) K(64 x HD), over the
		 * 16-key chunks that hold a key the warp's queries can see */
		int kend = kl >= 0 ? min(kl, Tk) : min(q0 + w0 + 16, T);
		int qhi = q0 + w0 >= T || kend <= k0 ? 0 : min(4, (kend - k0 + 15) / 16);
		float dq[ND][4];
#pragma unroll
		for (int c = 0; c < ND; c++)
			dq[c][0] = dq[c][1] = dq[c][2] = dq[c][3] = 0.0f;
#pragma unroll
		for (int c = 0; c < 4; c++) {
			if (c >= qhi)
				break;
			uint32_t a[4];
			at_frag_a<LS>(a, dSs, w0, c * 16, lane);
#pragma unroll
			for (int dc = 0; dc < HDM / 16; dc++) {
				if (dc >= nk)
					break;
				uint32_t b0[2], b1[2];
				at_frag_b<LD>(b0, b1, Ks, c * 16, dc * 16, lane);
				AT_MMA(A, dq[2 * dc], a, b0);
				AT_MMA(A, dq[2 * dc + 1], a, b1);
			}
		}

		/* add it to the query tile's sum in key-tile order */
		size_t tq = bh * (size_t)nqt + (size_t)qt;
		int *sem = dqs.sem + tq;
		float *acc = dqs.acc + tq * AT_B * (size_t)HD;
		int last = kl >= 0 ? ncon - 1 : qt;
		at_dq_wait(sem, kt);
#pragma unroll
		for (int r = 0; r < 2; r++) {
			int ii = w0 + g + 8 * r, i = q0 + ii;
#pragma unroll
			for (int c = 0; c < ND; c++)
#pragma unroll
				for (int x = 0; x < 2; x++) {
					int d = c * 8 + 2 * t + x;
					if (d >= HD || i >= T)
						continue;
					float *ap = acc + (size_t)ii * HD + d, v = dq[c][2 * r + x];
					if (kt == last) /* the whole sum: write dQ */
						dqb[(size_t)i * io.qrs + d] =
							f_act<A>((kt == 0 ? v : __ldcg(ap) + v) * scale);
					else if (kt == 0) /* the first part: whatever the sum held before */
						atomicExch(ap, v);
					else
						atomicAdd(ap, v);
				}
		}
		if (kt != last)
			__threadfence(); /* the adds are in before the next tile may start */
		__syncthreads();
		if (threadIdx.x == 0 && kt != last)
			atomicAdd(sem, 1);
	}

#pragma unroll
	for (int r = 0; r < 2; r++) {
		int j = jr[r];
		if (j >= Tk)
			continue;
		A *dkd = io.dk + at_row0(b, Tk, io.krs, h, io.khs) + (size_t)j * io.krs, *dvd = dkd + HD;
#pragma unroll
		for (int c = 0; c < ND; c++)
#pragma unroll
			for (int x = 0; x < 2; x++) {
				int d = c * 8 + 2 * t + x;
				if (d < HD) {
					dkd[d] = f_act<A>(dk[c][2 * r + x] * scale);
					dvd[d] = f_act<A>(dv[c][2 * r + x]);
				}
			}
	}
}

/* --- host side --- */

/* shared memory bytes; activations are 2 bytes in both types */
template <int HDM> static size_t smem_fwd()
{
	return (AT_BQ + 3 * AT_B) * (HDM + 8) * 2;
}
template <int HDM> static size_t smem_bwd()
{
	return 4 * AT_B * (HDM + 8) * 2 + AT_B * (AT_B + 8) * 2 + 2 * AT_B * sizeof(float) +
	       (AT_B + 1) * sizeof(int);
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

template <int HDM, typename A>
static void fwd_launch(void *out, float *lse, const struct at_io<A> &io, int B, int NH, int HD,
		       float scale, struct ops_attn k)
{
	static int ready;
	size_t sm = smem_fwd<HDM>();
	allow_smem(attn_fwd_mma_k<HDM, A>, sm, &ready);
	dim3 grid((unsigned)((io.Tq + AT_BQ - 1) / AT_BQ), (unsigned)NH, (unsigned)B);
	int vec = HD % 8 == 0 && cu_aligned16(io.q) && cu_aligned16(io.k);
	cu_launch(attn_fwd_mma_k<HDM, A>, grid, at_fwd_shape<HDM>::THREADS, sm, cu.stream, (A *)out,
		  lse, io, NH, HD, scale, vec, k);
	CU_LAUNCHED("attention_fwd");
}

template <int HDM, typename A>
static void bwd_launch(const struct at_io<A> &io, const void *dout, const float *lse,
		       const float *Dsum, struct at_dq dqs, int B, int NH, int HD, float scale,
		       struct ops_attn k)
{
	static int ready;
	size_t sm = smem_bwd<HDM>();
	allow_smem(attn_bwd_mma_k<HDM, A>, sm, &ready);
	dim3 grid((unsigned)((io.Tk + AT_B - 1) / AT_B), (unsigned)NH, (unsigned)B);
	int vec = HD % 8 == 0 && cu_aligned16(io.q) && cu_aligned16(io.k) && cu_aligned16(dout);
	cu_launch(attn_bwd_mma_k<HDM, A>, grid, AT_T, sm, cu.stream, io, (const A *)dout, lse,
		  Dsum, dqs, NH, HD, scale, vec, k);
	CU_LAUNCHED("attention_bwd");
}

/* The dQ protocol's scratch for B x NH x Tq at head dim HD: one buffer for every shape, grown
 * when a larger one comes, so nothing is allocated inside a step after the first; its
 * semaphores and counters (*nzero ints from .sem) are zeroed by the attn_dsum_k before each
 * backward. */
static struct at_dq dq_scratch(int B, int NH, int Tq, int HD, size_t *nzero)
{
	static void *buf;
	static size_t have;
	size_t heads = (size_t)B * NH, tiles = heads * ((Tq + AT_B - 1) / AT_B);
	size_t semb = cu_round256((tiles + heads) * sizeof(int));
	*nzero = tiles + heads;
	size_t need = semb + tiles * AT_B * (size_t)HD * sizeof(float);
	if (need > have) {
		CU_CHECK(cudaStreamSynchronize(cu.stream)); /* the old buffer may still be in use */
		if (buf)
			CU_CHECK(cudaFree(buf));
		buf = NULL;
		have = 0;
		if (cudaMalloc(&buf, need) != cudaSuccess) {
			(void)cudaGetLastError();
			cu_die("attention_bwd: out of GPU memory for %zu bytes of dQ accumulator; "
			       "try a smaller --micro-batch-size", need);
		}
		have = need;
	}
	return {(int *)buf, (int *)buf + tiles, (float *)((char *)buf + semb)};
}

static void check_shape(const char *op, int B, int T, int NH, int HD)
{
	if (HD < 1 || HD > 128)
		cu_die("%s: head dim %d is not supported (1..128)", op, HD);
	if (B > 65535 || NH > 65535)
		cu_die("%s: B=%d NH=%d exceed the grid limit 65535", op, B, NH);
	(void)T;
}

/* The self-attention's operands: columns of qkv(B,T,NH,3,HD) (and of dqkv) */
template <typename A>
static struct at_io<A> io_self(const void *qkv, void *dqkv, int T, int NH, int HD)
{
	const A *x = (const A *)qkv;
	A *d = (A *)dqkv;
	int rs = NH * 3 * HD;
	return {x, x + HD, d, d ? d + HD : NULL, rs, rs, 3 * HD, 3 * HD, T, T};
}

/* The cross-attention's: q(B,Tq,NH,HD) and kv(B,Tk,NH,2,HD) (and their gradients) */
template <typename A>
static struct at_io<A> io_cross(const void *q, const void *kv, void *dq, void *dkv, int Tq,
				int Tk, int NH, int HD)
{
	return {(const A *)q, (const A *)kv, (A *)dq, (A *)dkv, NH * HD, NH * 2 * HD, HD, 2 * HD, Tq,
		Tk};
}

template <typename A>
static void attn_fwd(void *out, float *lse, const struct at_io<A> &io, int B, int NH, int HD,
		     struct ops_attn k)
{
	float scale = 1.0f / sqrtf((float)HD);
	if (HD <= 32)
		fwd_launch<32, A>(out, lse, io, B, NH, HD, scale, k);
	else if (HD <= 64)
		fwd_launch<64, A>(out, lse, io, B, NH, HD, scale, k);
	else
		fwd_launch<128, A>(out, lse, io, B, NH, HD, scale, k);
}

template <typename A>
static void attn_bwd(const struct at_io<A> &io, const void *dout, const void *out,
		     const float *lse, int B, int NH, int HD, struct ops_attn k)
{
	float scale = 1.0f / sqrtf((float)HD);
	size_t rows = (size_t)B * io.Tq * NH, nzero;
	float *Dsum = (float *)cu_scratch(rows * sizeof(float));
	struct at_dq dqs = dq_scratch(B, NH, io.Tq, HD, &nzero);
	size_t blocks = (rows + 7) / 8 > (nzero + 255) / 256 ? (rows + 7) / 8 : (nzero + 255) / 256;
	cu_launch(attn_dsum_k<A>, (unsigned)blocks, 256, 0, cu.stream, Dsum, (const A *)dout,
		  (const A *)out, io.Tq, NH, HD, rows, dqs.sem, nzero);
	CU_LAUNCHED("attention_dsum");
	if (HD <= 32)
		bwd_launch<32, A>(io, dout, lse, Dsum, dqs, B, NH, HD, scale, k);
	else if (HD <= 64)
		bwd_launch<64, A>(io, dout, lse, Dsum, dqs, B, NH, HD, scale, k);
	else
		bwd_launch<128, A>(io, dout, lse, Dsum, dqs, B, NH, HD, scale, k);
}

void cu_attention_fwd(void *out, float *lse, const void *qkv, int B, int T, int NH, int HD,
		      struct ops_attn k)
{
	CU_ENTER();
	if (B <= 0 || T <= 0 || NH <= 0)
		return;
	check_shape("attention_fwd", B, T, NH, HD);
	CU_ACT(A, attn_fwd<A>(out, lse, io_self<A>(qkv, NULL, T, NH, HD), B, NH, HD, k));
}

void cu_attention_bwd(void *dqkv, const void *dout, const void *qkv, const void *out,
		      const float *lse, int B, int T, int NH, int HD, struct ops_attn k)
{
	CU_ENTER();
	if (B <= 0 || T <= 0 || NH <= 0)
		return;
	check_shape("attention_bwd", B, T, NH, HD);
	CU_ACT(A, attn_bwd<A>(io_self<A>(qkv, dqkv, T, NH, HD), dout, out, lse, B, NH, HD, k));
}

void cu_xattn_fwd(void *out, float *lse, const void *q, const void *kv, int B, int Tq, int Tk,
		  int NH, int HD, struct ops_attn k)
{
	CU_ENTER();
	if (B <= 0 || Tq <= 0 || Tk <= 0 || NH <= 0)
		return;
	check_shape("xattn_fwd", B, Tq, NH, HD);
	if (!k.bidir || k.slopes || k.kstart)
		cu_die("xattn_fwd: the cross-attention is bidirectional, without ALiBi or kstart");
	CU_ACT(A, attn_fwd<A>(out, lse, io_cross<A>(q, kv, NULL, NULL, Tq, Tk, NH, HD), B, NH, HD,
			      k));
}

void cu_xattn_bwd(void *dq, void *dkv, const void *dout, const void *q, const void *kv,
		  const void *out, const float *lse, int B, int Tq, int Tk, int NH, int HD,
		  struct ops_attn k)
{
	CU_ENTER();
	if (B <= 0 || Tq <= 0 || Tk <= 0 || NH <= 0)
		return;
	check_shape("xattn_bwd", B, Tq, NH, HD);
	if (!k.bidir || k.slopes || k.kstart)
		cu_die("xattn_bwd: the cross-attention is bidirectional, without ALiBi or kstart");
	/* keys no query sees (at or past klen) get a zero gradient from the dK/dV kernel */
	CU_ACT(A, attn_bwd<A>(io_cross<A>(q, kv, dq, dkv, Tq, Tk, NH, HD), dout, out, lse, B, NH,
			      HD, k));
}
