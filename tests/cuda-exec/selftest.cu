/* selftest.cu - the CPU executor checked against the CUDA semantics it claims (tests/cuda-exec).
 *
 * Compiled like the backend's .cu files (host compiler, the executor's headers, the access
 * instrumentation) into build/tests/cuda_exec_selftest, which `make check` runs.  Each case is a
 * small kernel whose result the CUDA Programming Guide or the PTX ISA fixes, or a deliberately
 * wrong kernel that the executor must stop with a message naming the kernel and what was wrong:
 * a race in shared memory, barrier divergence, a bad member mask, an out-of-bounds or misaligned
 * access, a use after free, a host pointer on the device, a launch beyond the device's limits.
 * The executor's messages for those go to stderr only with -v. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cublasLt.h>
#include <cub/device/device_radix_sort.cuh>
#include <cuda_runtime.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "../unit/t.h"
#include "cx_host.h"
#include "cx_ptx.h"

extern "C" void cx_test_set_order(int order, unsigned long long seed);
extern "C" void cx_test_set_dispatch(int dispatch);

template <typename K, typename... A>
static cudaError_t launch(K kernel, dim3 g, dim3 b, size_t smem, A... args)
{
	cx_launch_kernel(kernel, g, b, smem, (cudaStream_t)0, args...);
	cudaError_t e = cudaGetLastError();
	return e ? e : cudaDeviceSynchronize();
}

/* the launch fails with `want`, and the executor's message says all of `needles` */
static int fails_with(cudaError_t got, cudaError_t want, std::vector<const char *> needles)
{
	const char *d = cx_last_diagnostic();
	int ok = got == want;
	for (const char *n : needles)
		ok &= strstr(d, n) != NULL;
	if (!ok)
		printf("# got %s (%d), wanted %s; message: %s\n", cudaGetErrorName(got), (int)got,
		       cudaGetErrorName(want), d);
	cudaDeviceReset(); /* clears the sticky error (and every allocation) */
	return ok;
}

template <typename T> static T *dalloc(size_t n)
{
	T *p = NULL;
	cudaMalloc(&p, n * sizeof(T));
	cudaMemset(p, 0, n * sizeof(T));
	return p;
}

template <typename T> static std::vector<T> fetch(const T *d, size_t n)
{
	std::vector<T> h(n);
	cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost);
	return h;
}

/* ---- kernels with defined results ---- */

__global__ void shfl_k(int *out)
{
	int lane = threadIdx.x & 31;
	int v = lane + 100 * (threadIdx.x >> 5);
	int s = v;
	for (int o = 16; o > 0; o >>= 1)
		s += __shfl_xor_sync(0xffffffffu, s, o);
	out[threadIdx.x * 8 + 0] = s;                                /* warp sum */
	out[threadIdx.x * 8 + 1] = __shfl_up_sync(0xffffffffu, v, 3, 8);   /* width 8 */
	out[threadIdx.x * 8 + 2] = __shfl_down_sync(0xffffffffu, v, 5, 16);
	out[threadIdx.x * 8 + 3] = __shfl_sync(0xffffffffu, v, 37, 16);    /* 37 mod 16 = 5 */
	out[threadIdx.x * 8 + 4] = (int)__ballot_sync(0xffffffffu, lane % 3 == 0);
	out[threadIdx.x * 8 + 5] = __shfl_xor_sync(0xffffffffu, v, 8, 8);
	unsigned half = lane < 16 ? 0x0000ffffu : 0xffff0000u;              /* two independent halves */
	out[threadIdx.x * 8 + 6] = __reduce_add_sync(half, (unsigned)lane);
	out[threadIdx.x * 8 + 7] = (int)__match_any_sync(0xffffffffu, lane / 4);
}

__global__ void vote_k(int *out)
{
	int lane = threadIdx.x & 31;
	if (lane < 20) { /* divergent: lanes 0..19 take part, and their mask says so */
		out[lane * 2 + 0] = __any_sync(0x000fffffu, lane == 19);
		out[lane * 2 + 1] = __all_sync(0x000fffffu, lane < 19);
		__syncwarp(0x000fffffu);
	}
}

__global__ void count_k(int *out)
{
	int c = __syncthreads_count(threadIdx.x % 3 == 0);
	int a = __syncthreads_and(threadIdx.x < 1000);
	int o = __syncthreads_or(threadIdx.x == 77);
	if (threadIdx.x == 0) {
		out[0] = c;
		out[1] = a;
		out[2] = o;
	}
}

/* shared-memory reduction with barriers: the right way */
__global__ void reduce_ok_k(float *out, const float *in)
{
	__shared__ float s[128];
	s[threadIdx.x] = in[blockIdx.x * 128 + threadIdx.x];
	__syncthreads();
	for (unsigned w = 64; w > 0; w >>= 1) {
		if (threadIdx.x < w)
			s[threadIdx.x] += s[threadIdx.x + w];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		out[blockIdx.x] = s[0];
}

__global__ void atomic_k(int *g)
{
	__shared__ int s;
	if (threadIdx.x == 0)
		s = 0;
	__syncthreads();
	atomicAdd(&s, 1); /* atomics race with nothing */
	__syncthreads();
	if (threadIdx.x == 0)
		atomicAdd(g, s);
}

/* ---- kernels that are wrong ---- */

__global__ void race_k(float *out)
{
	__shared__ float buf[64];
	buf[threadIdx.x] = 0.0f;
	__syncthreads();
	buf[threadIdx.x] = (float)threadIdx.x;
	/* missing __syncthreads(): reads the neighbour's element, old or new */
	out[threadIdx.x] = buf[(threadIdx.x + 1) % 64];
}

__global__ void war_k(float *out)
{
	__shared__ float buf[64];
	buf[threadIdx.x] = 1.0f;
	__syncthreads();
	float v = buf[63 - threadIdx.x];
	buf[threadIdx.x] = v + 1.0f; /* overwrites what another thread still reads */
	out[threadIdx.x] = v;
}

__global__ void uninit_k(float *out)
{
	__shared__ float buf[64];
	if (threadIdx.x < 32)
		buf[threadIdx.x] = 1.0f;
	__syncthreads();
	out[threadIdx.x] = buf[threadIdx.x]; /* threads 32..63 read what nobody wrote */
}

/* every block stores into the same word */
__global__ void flag_k(int *flag)
{
	if (threadIdx.x == 0)
		*flag = 1;
}

__global__ void flag_atomic_k(int *flag)
{
	if (threadIdx.x == 0)
		atomicExch(flag, 1);
}

/* Block i adds vals[i] to *sum after blocks 0..i-1 (FlashAttention-3's deterministic dQ): thread
 * 0 spins on the counter, the block's shared memory must survive the wait, and seq[i] records
 * the place the block got. */
__global__ void ordered_add_k(float *sum, int *sem, int *seq, const float *vals)
{
	__shared__ float mine[32];
	int i = blockIdx.x;
	mine[threadIdx.x] = vals[i] + (float)threadIdx.x;
	if (threadIdx.x == 0) {
		while (*(volatile int *)sem != i)
			__nanosleep(20);
		__threadfence();
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		atomicAdd(sum, mine[0] + (mine[31] - 31.0f) * 0.0f);
		seq[i] = atomicAdd(sem + 1, 1);
		__threadfence();
		atomicAdd(sem, 1);
	}
}

/* Block 1 waits for block 0's flag, then reads what block 0 wrote with a plain store: a race to
 * the shadow, which knows no acquire or release (data between blocks goes through atomics) -
 * also when block 1 ran first and was parked while block 0 ran. */
__global__ void wait_then_read_k(int *flag, float *x, float *out)
{
	if (threadIdx.x != 0)
		return;
	if (blockIdx.x == 0) {
		x[0] = 1.0f;
		__threadfence();
		atomicExch(flag, 1);
	} else {
		while (*(volatile int *)flag == 0)
			__nanosleep(20);
		out[0] = x[0];
	}
}

/* ordered_add_k with dynamic tile ids, as CUB's decoupled look-back takes them: a block's place
 * is the ticket it draws from sem[2] when it starts, not blockIdx, so it waits only for blocks
 * that started before it - whatever order the device starts them in. */
__global__ void ticket_add_k(float *sum, int *sem, int *seq, const float *vals)
{
	__shared__ int tile;
	if (threadIdx.x == 0)
		tile = atomicAdd(sem + 2, 1);
	__syncthreads();
	int i = tile;
	if (threadIdx.x == 0) {
		while (*(volatile int *)sem != i)
			__nanosleep(20);
		__threadfence();
		atomicAdd(sum, vals[i]);
		seq[i] = atomicAdd(sem + 1, 1);
		__threadfence();
		atomicAdd(sem, 1);
	}
}

/* ordered_add_k's wait without __nanosleep(): the volatile load alone */
__global__ void ordered_poll_k(int *sem, int *seq)
{
	if (threadIdx.x != 0)
		return;
	while (*(volatile int *)sem != (int)blockIdx.x) {
	}
	seq[blockIdx.x] = atomicAdd(sem + 1, 1);
	__threadfence();
	atomicAdd(sem, 1);
}

/* Block 0 waits for block `from` to set the flag: from 0 waits for nothing, from 1 for a later
 * block - deadlocks on the device. */
__global__ void wait_flag_k(int *flag, int from, int nap)
{
	if (blockIdx.x == 1)
		atomicExch(flag, 1);
	if (blockIdx.x == 0 && threadIdx.x == 0 && from >= 0)
		while (*(volatile int *)flag == 0)
			if (nap)
				__nanosleep(20);
}

/* thread 0 reads what thread 1 writes to global memory: with and without a barrier */
__global__ void global_neighbour_k(float *buf, int sync)
{
	buf[threadIdx.x] = (float)threadIdx.x;
	if (sync)
		__syncthreads();
	buf[64 + threadIdx.x] = buf[(threadIdx.x + 1) % 64];
}

__global__ void early_exit_k(float *out)
{
	if (threadIdx.x == 5)
		return;
	__shared__ float s[64];
	s[threadIdx.x] = 1.0f;
	__syncthreads(); /* thread 5 never comes */
	out[threadIdx.x] = s[0];
}

__global__ void two_barriers_k(float *out)
{
	if (threadIdx.x < 32)
		__syncthreads();
	else
		__syncthreads(); /* a different barrier */
	out[threadIdx.x] = 1.0f;
}

__global__ void bad_mask_k(int *out)
{
	/* lane 3 leaves itself out of the mask */
	out[threadIdx.x] = __shfl_xor_sync(threadIdx.x == 3 ? 0xfffffff7u : 0xffffffffu,
					   (int)threadIdx.x, 1);
}

__global__ void outside_mask_k(int *out)
{
	if (threadIdx.x < 16) /* lane 0 reads lane 16, which is not taking part */
		out[threadIdx.x] = __shfl_sync(0x0000ffffu, (int)threadIdx.x, threadIdx.x + 16);
}

__global__ void exited_lane_k(int *out)
{
	if (threadIdx.x == 31)
		return;
	out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 1);
}

__global__ void oob_k(float *out, int n)
{
	out[threadIdx.x] = (float)n; /* 64 threads, n = 63 elements */
}

__global__ void read_k(float *out, const float *in)
{
	out[threadIdx.x] = in[threadIdx.x];
}

__global__ void dyn_k(float *out)
{
	extern __shared__ __align__(16) unsigned char selftest_smem[];
	float *f = (float *)selftest_smem;
	f[threadIdx.x] = 1.0f; /* 32 threads, 100 bytes: threads 25..31 are past the end */
	__syncthreads();
	out[threadIdx.x] = f[threadIdx.x];
}

__global__ void misaligned_k(double *out, const double *in)
{
	const double *p = (const double *)((const char *)in + 4);
	out[threadIdx.x] = *p;
}

__global__ void vec_misaligned_k(float *out, const float *in)
{
	/* a 16-byte vector load from an address that is only 8-byte aligned */
	float4 v = *reinterpret_cast<const float4 *>(in + 2);
	out[threadIdx.x] = v.x;
}

__global__ void noop_k(int *out)
{
	if (out && threadIdx.x == 1024u)
		out[0] = 1;
}

/* ---- the matrix instructions (cx_ptx.h) ---- */

/* D(16x8) = A(16x16) B(16x8) + C with A, B as bf16 bits (F16: fp16 bits, the .f16 variant),
 * all row major.  Each lane builds its
 * fragments element by element as the PTX ISA's table for mma.m16n8k16 (floating point types)
 * states them, with groupID = lane >> 2 and threadID_in_group = lane % 4:
 *   ai: row groupID for i < 2 or 4 <= i < 6, else groupID + 8;
 *       column threadID_in_group * 2 + (i & 1), + 8 for i >= 4
 *   bi: row threadID_in_group * 2 + (i & 1), + 8 for i >= 2; column groupID
 *   ci: row groupID for i < 2, else groupID + 8; column threadID_in_group * 2 + (i & 1)
 * and element 2r of a register in its lower half.  D is computed in place of C. */
template <bool F16>
__global__ void mma_table_k(float *D, const uint16_t *A, const uint16_t *B, const float *C)
{
	int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
	uint16_t ae[8], be[4];
	for (int i = 0; i < 8; i++) {
		int row = (i < 2 || (i >= 4 && i < 6)) ? gid : gid + 8;
		ae[i] = A[row * 16 + tig * 2 + (i & 1) + (i >= 4 ? 8 : 0)];
	}
	for (int i = 0; i < 4; i++)
		be[i] = B[(tig * 2 + (i & 1) + (i >= 2 ? 8 : 0)) * 8 + gid];
	uint32_t a[4], b[2];
	float c[4];
	for (int r = 0; r < 4; r++)
		a[r] = ae[2 * r] | (uint32_t)ae[2 * r + 1] << 16;
	for (int r = 0; r < 2; r++)
		b[r] = be[2 * r] | (uint32_t)be[2 * r + 1] << 16;
	for (int i = 0; i < 4; i++)
		c[i] = C[(i < 2 ? gid : gid + 8) * 8 + tig * 2 + (i & 1)];
	if constexpr (F16)
		ptx_mma_m16n8k16_f16(c, a, b, c);
	else
		ptx_mma_m16n8k16_bf16(c, a, b, c);
	for (int i = 0; i < 4; i++)
		D[(i < 2 ? gid : gid + 8) * 8 + tig * 2 + (i & 1)] = c[i];
}

/* Four 8 x 8 matrices of b16 in shared memory, a 32-byte row stride, rows in an order of
 * the lanes' choosing: lane 8m+i gives row (5i) % 8 of stored matrix m.  Out, per lane: x4, x4
 * .trans, x2 (lanes 16..31 give a null address: not used), x1 (lanes 8..31 likewise). */
__global__ void ldmatrix_k(uint32_t *out, const uint16_t *in)
{
	__shared__ __align__(16) uint16_t sm[32 * 16];
	int lane = threadIdx.x;
	for (int k = lane; k < 32 * 16; k += 32)
		sm[k] = in[k];
	__syncthreads();
	const uint16_t *row = sm + ((lane / 8) * 8 + (lane % 8) * 5 % 8) * 16;
	uint32_t r4[4], t4[4], r2[2], r1[1];
	ptx_ldmatrix(r4, row);
	ptx_ldmatrix_trans(t4, row);
	ptx_ldmatrix(r2, lane < 16 ? row : nullptr);
	ptx_ldmatrix(r1, lane < 8 ? row : nullptr);
	uint32_t *o = out + lane * 11;
	for (int m = 0; m < 4; m++)
		o[m] = r4[m], o[4 + m] = t4[m];
	o[8] = r2[0], o[9] = r2[1], o[10] = r1[0];
}

/* The loads the attention kernels make: A (16 x 16 row major) with ldmatrix.x4; B (16 x 8) from
 * its transpose Bn (8 x 16 row major, as K's rows are) with ldmatrix.x2, and from Bk (16 x 8 row
 * major, as V's rows are) with ldmatrix.x2.trans.  Row strides of 24 elements (48 bytes). */
__global__ void ldmatrix_mma_k(float *D, const uint16_t *A, const uint16_t *B)
{
	__shared__ __align__(16) uint16_t As[16 * 24], Bn[8 * 24], Bk[16 * 24];
	int lane = threadIdx.x;
	for (int k = lane; k < 16 * 16; k += 32)
		As[k / 16 * 24 + k % 16] = A[k];
	for (int k = lane; k < 16 * 8; k += 32) {
		Bk[k / 8 * 24 + k % 8] = B[k];
		Bn[k % 8 * 24 + k / 8] = B[k];
	}
	__syncthreads();
	uint32_t a[4], bn[2], bk[2];
	ptx_ldmatrix(a, As + (lane % 16) * 24 + (lane / 16) * 8);
	ptx_ldmatrix(bn, Bn + (lane % 8) * 24 + (lane / 8 % 2) * 8);
	ptx_ldmatrix_trans(bk, Bk + (lane % 16) * 24);
	float d1[4] = {0, 0, 0, 0}, d2[4] = {0, 0, 0, 0};
	ptx_mma_m16n8k16_bf16(d1, a, bn, d1);
	ptx_mma_m16n8k16_bf16(d2, a, bk, d2);
	int g = lane >> 2, t = lane & 3;
	for (int i = 0; i < 4; i++) {
		int at = (g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1);
		D[at] = d1[i];
		D[128 + at] = d2[i];
	}
}

__global__ void mma_partial_warp_k(float *out)
{
	uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
	float c[4] = {0, 0, 0, 0};
	ptx_mma_m16n8k16_bf16(c, a, b, c); /* launched with 16 threads */
	out[threadIdx.x] = c[0];
}

__global__ void mma_two_sites_k(float *out)
{
	uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
	float c[4] = {0, 0, 0, 0};
	if (threadIdx.x < 16)
		ptx_mma_m16n8k16_bf16(c, a, b, c);
	else
		ptx_mma_m16n8k16_bf16(c, a, b, c); /* another instruction */
	out[threadIdx.x] = c[0];
}

__global__ void mma_exited_lane_k(float *out)
{
	if (threadIdx.x == 7)
		return;
	uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
	float c[4] = {0, 0, 0, 0};
	ptx_mma_m16n8k16_bf16(c, a, b, c);
	out[threadIdx.x] = c[0];
}

/* what: 0 global memory, 1 a row 8 bytes off alignment, 2 shared memory nobody wrote */
__global__ void ldmatrix_bad_k(uint32_t *out, const uint16_t *g, int what)
{
	__shared__ __align__(16) uint16_t sm[8 * 16];
	if (what != 2)
		for (int k = threadIdx.x; k < 8 * 16; k += 32)
			sm[k] = 1;
	__syncthreads();
	const uint16_t *row = what == 0 ? g + threadIdx.x % 8 * 8
				      : sm + threadIdx.x % 8 * 16 + (what == 1 ? 4 : 0);
	uint32_t r[1];
	ptx_ldmatrix(r, row);
	out[threadIdx.x] = r[0];
}

/* cp.async, 32 threads, each 16 bytes (4 ints) of a 128-int buffer; g holds 256 ints.  what:
 * 0 two groups in flight, wait_group 1 then 0, and 8-of-16-byte zero fill (correct use: out is
 * g's elements of other threads); 1 reads its own copy before the wait (out: the poison, -1);
 * 2 after wait_group 1 reads the newer group's buffer (-1); 3 issues over bytes another thread
 * read since the barrier (a race); 4 a misaligned source; 5 a global destination */
__global__ void cpasync_k(int *out, const int *g, int what)
{
	__shared__ __align__(16) int sm[2][128];
	int t = threadIdx.x, o = (t + 1) % 32;
	for (int k = 0; k < 4; k++)
		sm[0][4 * t + k] = sm[1][4 * t + k] = 7;
	__syncthreads();
	if (what == 4 || what == 5) {
		ptx_cp_async16(what == 5 ? out + 4 * t : &sm[0][4 * t], what == 4 ? g + 2 : g + 4 * t,
			       16);
		ptx_cp_async_commit();
		ptx_cp_async_wait<0>();
		return;
	}
	if (what == 3)
		out[t] = sm[0][4 * o];
	ptx_cp_async16(&sm[0][4 * t], g + 4 * t, 16);
	ptx_cp_async_commit();
	if (what == 1) {
		out[t] = sm[0][4 * t];
		return;
	}
	ptx_cp_async16(&sm[1][4 * t], g + 128 + 4 * t, 16);
	ptx_cp_async_commit();
	ptx_cp_async_wait<1>();
	__syncthreads();
	if (what == 2) {
		out[t] = sm[1][4 * o + 1];
		return;
	}
	out[t] = sm[0][4 * o + 1];
	ptx_cp_async_wait<0>();
	__syncthreads();
	out[32 + t] = sm[1][4 * o + 2];
	ptx_cp_async16(&sm[0][4 * t], g + 4 * t, 8);
	ptx_cp_async_commit();
	ptx_cp_async_wait<0>();
	__syncthreads();
	out[64 + t] = sm[0][4 * o + 1];
	out[96 + t] = sm[0][4 * o + 2];
}

/* ---- the cases ---- */

static int shuffles(void)
{
	int *d = dalloc<int>(64 * 8);
	if (launch(shfl_k, 1, 64, 0, d))
		return 0;
	std::vector<int> h = fetch(d, 64 * 8);
	int ok = 1;
	for (int t = 0; t < 64; t++) {
		int lane = t & 31, w = t >> 5, v = lane + 100 * w;
		int sum = 496 + 3200 * w;
		int up = (lane % 8) >= 3 ? v - 3 : v;
		int down = (lane % 16) + 5 < 16 ? v + 5 : v;
		int idx = (lane & ~15) + 5 + 100 * w;
		int bal = 0;
		for (int l = 0; l < 32; l++)
			bal |= (l % 3 == 0) << l;
		int red = lane < 16 ? 120 : 376;
		int match = 0xf << (lane & ~3);
		int bfly = lane & 8 ? v - 8 : v; /* width 8: an earlier group is read, a later not */
		int want[8] = {sum, up, down, idx, bal, bfly, red, match};
		for (int k = 0; k < 8; k++)
			if (h[t * 8 + k] != want[k]) {
				printf("# thread %d result %d: %d, want %d\n", t, k, h[t * 8 + k], want[k]);
				ok = 0;
			}
	}
	int *v = dalloc<int>(64);
	ok &= launch(vote_k, 1, 32, 0, v) == cudaSuccess;
	std::vector<int> hv = fetch(v, 40);
	for (int l = 0; l < 20; l++)
		ok &= hv[l * 2] == 1 && hv[l * 2 + 1] == 0;
	return ok;
}

static int counts(void)
{
	int *d = dalloc<int>(3);
	if (launch(count_k, 1, 200, 0, d))
		return 0;
	std::vector<int> h = fetch(d, 3);
	return h[0] == 67 && h[1] == 1 && h[2] == 1;
}

static int reduction_same_under_every_order(void)
{
	std::vector<float> in(128 * 5);
	for (size_t i = 0; i < in.size(); i++)
		in[i] = (float)((i * 37) % 101) * 0.25f - 10.0f;
	float *din = dalloc<float>(in.size()), *dout = dalloc<float>(5);
	cudaMemcpy(din, in.data(), in.size() * 4, cudaMemcpyHostToDevice);
	int ok = 1;
	std::vector<float> first;
	for (int order = 0; order < 3; order++) {
		cx_test_set_order(order, 5);
		ok &= launch(reduce_ok_k, 5, 128, 0, dout, (const float *)din) == cudaSuccess;
		std::vector<float> h = fetch(dout, 5);
		if (order == 0)
			first = h;
		ok &= memcmp(h.data(), first.data(), 20) == 0;
	}
	cx_test_set_order(0, 1);
	int *g = dalloc<int>(1);
	ok &= launch(atomic_k, 7, 96, 0, g) == cudaSuccess;
	ok &= fetch(g, 1)[0] == 7 * 96;
	cudaDeviceReset();
	return ok;
}

static int races(void)
{
	int ok = 1;
	float *o = dalloc<float>(64);
	for (int order = 0; order < 3; order++) { /* each order sees it, from one side or the other */
		cx_test_set_order(order, 3);
		o = dalloc<float>(64);
		ok &= fails_with(launch(race_k, 1, 64, 0, o), cudaErrorLaunchFailure,
				 {"race_k", "race on shared memory", "buf in race_k", "element"});
	}
	cx_test_set_order(0, 1);
	o = dalloc<float>(64);
	ok &= fails_with(launch(war_k, 1, 64, 0, o), cudaErrorLaunchFailure,
			 {"war_k", "race on shared memory", "buf in war_k"});
	o = dalloc<float>(64);
	ok &= fails_with(launch(uninit_k, 1, 64, 0, o), cudaErrorLaunchFailure,
			 {"uninit_k", "no thread of this block has written", "element 32"});
	return ok;
}

static int global_races(void)
{
	int ok = 1;
	int *f = dalloc<int>(1);
	ok &= fails_with(launch(flag_k, 3, 32, 0, f), cudaErrorLaunchFailure,
			 {"flag_k", "race on global memory", "of block (0,0,0)", "not ordered"});
	f = dalloc<int>(1);
	ok &= launch(flag_atomic_k, 3, 32, 0, f) == cudaSuccess && fetch(f, 1)[0] == 1;
	float *b = dalloc<float>(128);
	ok &= launch(global_neighbour_k, 1, 64, 0, b, 1) == cudaSuccess;
	ok &= fails_with(launch(global_neighbour_k, 1, 64, 0, b, 0), cudaErrorLaunchFailure,
			 {"global_neighbour_k", "race on global memory", "no __syncthreads()"});
	return ok;
}

/* kernel k (ordered_add_k's signature) over n blocks in the forward, reverse and a random
 * dispatch order, semaphores (sembytes) cleared each time: 1 when every run sums to want's bits
 * and takes the tiles in index order */
static int sums_in_every_order(void (*k)(float *, int *, int *, const float *), size_t sembytes,
			       float *sum, int *sem, int *seq, const float *dv, int n, float want)
{
	int ok = 1;
	for (int order = 0; order < 3; order++) {
		cx_test_set_order(order, 7);
		cudaMemset(sum, 0, 4);
		cudaMemset(sem, 0, sembytes);
		ok &= launch(k, n, 32, 0, sum, sem, seq, dv) == cudaSuccess;
		float got = fetch(sum, 1)[0];
		ok &= memcmp(&got, &want, 4) == 0;
		std::vector<int> q = fetch(seq, n);
		for (int i = 0; i < n; i++)
			ok &= q[i] == i;
	}
	return ok;
}

static int spin_waits(void)
{
	int ok = 1, n = 9;
	std::vector<float> v(n);
	for (int i = 0; i < n; i++)
		v[i] = i % 3 == 0 ? 1e8f : i % 3 == 1 ? 3.0f : -1e8f; /* order-sensitive in fp32 */
	float want = 0.0f;
	for (int i = 0; i < n; i++)
		want += v[i];
	float *dv = dalloc<float>(n), *sum = dalloc<float>(1);
	int *sem = dalloc<int>(3), *seq = dalloc<int>(n);
	cudaMemcpy(dv, v.data(), n * 4, cudaMemcpyHostToDevice);
	/* dynamic tile ids: the same bits in every dispatch order, each block run to its end */
	ok &= sums_in_every_order(ticket_add_k, 12, sum, sem, seq, dv, n, want);
	/* tile ids from blockIdx: CUDA does not promise that block 0 starts first, so block 8
	 * waiting for it, started first (reverse) or somewhere (random), is a deadlock... */
	for (int order = 1; order < 3; order++) {
		cx_test_set_order(order, 7);
		cudaMemset(sem, 0, 12);
		ok &= fails_with(launch(ordered_add_k, n, 32, 0, sum, sem, seq, (const float *)dv),
				 cudaErrorLaunchFailure, {"ordered_add_k", "deadlock: spins at",
				 "no block started before it", "LMTK_CUDA_EXEC_DISPATCH=index"});
		cudaDeviceReset();
		dv = dalloc<float>(n), sum = dalloc<float>(1), sem = dalloc<int>(3), seq = dalloc<int>(n);
		cudaMemcpy(dv, v.data(), n * 4, cudaMemcpyHostToDevice);
	}
	/* ...unless the executor assumes the hardware's habit of index order */
	cx_test_set_dispatch(1);
	ok &= sums_in_every_order(ordered_add_k, 8, sum, sem, seq, dv, n, want);
	for (int order = 1; order < 3; order++) {
		cx_test_set_order(order, 3);
		cudaMemset(sem, 0, 8);
		ok &= launch(ordered_poll_k, n, 32, 0, sem, seq) == cudaSuccess;
		std::vector<int> q = fetch(seq, n);
		for (int i = 0; i < n; i++)
			ok &= q[i] == i;
	}
	cx_test_set_order(1, 1); /* block 1 first: it parks, block 0 runs, block 1 reads */
	int *fl = dalloc<int>(1);
	float *x = dalloc<float>(2);
	cudaMemset(fl, 0, 4);
	ok &= fails_with(launch(wait_then_read_k, 2, 32, 0, fl, x, x + 1), cudaErrorLaunchFailure,
			 {"wait_then_read_k", "block (1,0,0)", "read-after-write race on global memory",
			  "block (0,0,0)", "blocks of a grid are not ordered"});
	cudaDeviceReset();
	cx_test_set_order(0, 1);
	int *flag = dalloc<int>(1);
	cudaMemset(flag, 0, 4);
	ok &= fails_with(launch(wait_flag_k, 2, 32, 0, flag, 1, 1), cudaErrorLaunchFailure,
			 {"wait_flag_k", "block (0,0,0)", "deadlock: spins at", "selftest.cu"});
	cudaDeviceReset();
	flag = dalloc<int>(1);
	cudaMemset(flag, 0, 4);
	ok &= fails_with(launch(wait_flag_k, 2, 32, 0, flag, 1, 0), cudaErrorLaunchFailure,
			 {"wait_flag_k", "block (0,0,0)", "deadlock: spins at a volatile load polled"});
	cudaDeviceReset();
	flag = dalloc<int>(1);
	cudaMemset(flag, 0, 4);
	ok &= fails_with(launch(wait_flag_k, 1, 32, 0, flag, 0, 1), cudaErrorLaunchFailure,
			 {"wait_flag_k", "deadlock: spins at"});
	cudaDeviceReset();
	cx_test_set_dispatch(0);
	return ok;
}

static int divergence(void)
{
	int ok = 1;
	float *o = dalloc<float>(64);
	ok &= fails_with(launch(early_exit_k, 1, 64, 0, o), cudaErrorLaunchFailure,
			 {"early_exit_k", "barrier divergence", "(5,0,0)"});
	o = dalloc<float>(64);
	ok &= fails_with(launch(two_barriers_k, 1, 64, 0, o), cudaErrorLaunchFailure,
			 {"two_barriers_k", "barrier divergence", "selftest.cu"});
	int *i = dalloc<int>(64);
	ok &= fails_with(launch(bad_mask_k, 1, 32, 0, i), cudaErrorLaunchFailure,
			 {"bad_mask_k", "does not include the calling lane 3"});
	i = dalloc<int>(64);
	ok &= fails_with(launch(outside_mask_k, 1, 32, 0, i), cudaErrorLaunchFailure,
			 {"outside_mask_k", "not in the member mask"});
	i = dalloc<int>(64);
	ok &= fails_with(launch(exited_lane_k, 1, 32, 0, i), cudaErrorLaunchFailure,
			 {"exited_lane_k", "31"});
	return ok;
}

static int memory_checks(void)
{
	int ok = 1;
	float *o = dalloc<float>(63);
	ok &= fails_with(launch(oob_k, 1, 64, 0, o, 63), cudaErrorIllegalAddress,
			 {"oob_k", "thread (63,0,0)", "past the end of device allocation"});
	float host[64] = {0};
	o = dalloc<float>(64);
	ok &= fails_with(launch(read_k, 1, 32, 0, o, (const float *)host), cudaErrorIllegalAddress,
			 {"read_k", "not device memory"});
	o = dalloc<float>(64);
	float *freed = dalloc<float>(64);
	cudaFree(freed);
	ok &= fails_with(launch(read_k, 1, 32, 0, o, (const float *)freed), cudaErrorIllegalAddress,
			 {"read_k", "use after cudaFree"});
	o = dalloc<float>(64);
	ok &= fails_with(launch(dyn_k, 1, 32, 100, o), cudaErrorIllegalAddress,
			 {"dyn_k", "selftest_smem", "gave it 100 bytes"});
	double *dd = dalloc<double>(64);
	ok &= fails_with(launch(misaligned_k, 1, 4, 0, dd, (const double *)dd),
			 cudaErrorMisalignedAddress, {"misaligned_k", "misaligned"});
	float *f = dalloc<float>(64);
	ok &= fails_with(launch(vec_misaligned_k, 1, 4, 0, f, (const float *)f),
			 cudaErrorMisalignedAddress, {"vec_misaligned_k", "misaligned"});
	return ok;
}

static int launch_limits(void)
{
	int ok = 1;
	ok &= fails_with(launch(noop_k, 1, 1025, 0, (int *)NULL), cudaErrorInvalidConfiguration,
			 {"noop_k"});
	ok &= fails_with(launch(noop_k, dim3(1, 65536), 32, 0, (int *)NULL),
			 cudaErrorInvalidConfiguration, {"noop_k"});
	ok &= fails_with(launch(noop_k, 1, dim3(1, 1, 65), 0, (int *)NULL),
			 cudaErrorInvalidConfiguration, {"noop_k"});
	ok &= fails_with(launch(noop_k, 1, 32, 49153, (int *)NULL), cudaErrorInvalidValue,
			 {"noop_k", "49153 bytes of dynamic shared memory"});
	ok &= cudaFuncSetAttribute(noop_k, cudaFuncAttributeMaxDynamicSharedMemorySize, 100000) == 0;
	ok &= launch(noop_k, 1, 32, 100000, (int *)NULL) == cudaSuccess;
	ok &= cudaFuncSetAttribute(noop_k, cudaFuncAttributeMaxDynamicSharedMemorySize, 232449) ==
	      cudaErrorInvalidValue;
	cudaGetLastError();
	cudaDeviceProp p;
	ok &= cudaGetDeviceProperties(&p, 0) == 0 && p.major == 9 && p.multiProcessorCount == 132 &&
	      p.sharedMemPerBlockOptin == 232448 && p.warpSize == 32 && strstr(p.name, "H100");
	return ok;
}

static int host_cannot_touch_device_memory(void)
{
	fflush(stdout);
	int fds[2];
	if (pipe(fds))
		return 0;
	pid_t pid = fork();
	if (pid == 0) {
		struct rlimit none = {0, 0}; /* the fault is the point: no core file */
		setrlimit(RLIMIT_CORE, &none);
		dup2(fds[1], 2);
		float *d = dalloc<float>(16);
		volatile float x = d[3]; /* a GPU faults here too */
		(void)x;
		_exit(0);
	}
	close(fds[1]);
	char buf[1000] = "";
	ssize_t n = read(fds[0], buf, sizeof buf - 1);
	(void)n;
	close(fds[0]);
	int st = 0;
	waitpid(pid, &st, 0);
	int ok = WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV &&
		 strstr(buf, "host code touched device memory") && strstr(buf, "byte 12 of device allocation");
	if (!ok)
		printf("# child status %d: %s\n", st, buf);
	return ok;
}

__global__ void add_k(int *p, int v)
{
	p[threadIdx.x] += v;
}

__global__ void fill_k(int *p, int v)
{
	p[threadIdx.x] = v;
}

static int streams_are_asynchronous(void)
{
	int *d = dalloc<int>(32), *pinned = NULL;
	cudaMallocHost((void **)&pinned, 32 * sizeof(int));
	memset(pinned, 0, 32 * sizeof(int));
	cudaStream_t a, b;
	cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
	cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
	cx_launch_kernel(fill_k, 1, 32, 0, a, d, 42);
	cudaMemcpyAsync(pinned, d, 32 * sizeof(int), cudaMemcpyDeviceToHost, a);
	int before = pinned[7]; /* not synchronised yet: the copy has not happened */
	cudaStreamSynchronize(a);
	int after = pinned[7];
	/* b waits for an event of a */
	cudaEvent_t e;
	cudaEventCreate(&e);
	cx_launch_kernel(fill_k, 1, 32, 0, a, d, 7);
	cudaEventRecord(e, a);
	cudaStreamWaitEvent(b, e, 0);
	cudaMemcpyAsync(pinned, d, 32 * sizeof(int), cudaMemcpyDeviceToHost, b);
	cudaStreamSynchronize(b);
	int ok = before == 0 && after == 42 && pinned[31] == 7;
	if (!ok)
		printf("# before %d after %d then %d\n", before, after, pinned[31]);
	/* one event recorded again before its first record ran (dist_nccl.cu's bucket event, once
	 * a step): b's second wait is for the second record, as CUDA's is, not for the first one
	 * having run - b must see the 5 added after the first record */
	int *d2 = dalloc<int>(32);
	cx_launch_kernel(fill_k, 1, 32, 0, a, d2, 1);
	cudaEventRecord(e, a);
	cudaStreamWaitEvent(b, e, 0);
	cx_launch_kernel(add_k, 1, 32, 0, a, d2, 5);
	cudaEventRecord(e, a);
	cudaStreamWaitEvent(b, e, 0);
	cudaMemcpyAsync(pinned, d2, 32 * sizeof(int), cudaMemcpyDeviceToHost, b);
	cudaStreamSynchronize(b);
	if (pinned[3] != 6) {
		printf("# a wait on a re-recorded event let b read %d before the second record\n", pinned[3]);
		ok = 0;
	}
	cudaFreeHost(pinned);
	cudaStreamDestroy(a);
	cudaStreamDestroy(b);
	cudaEventDestroy(e);
	cudaDeviceReset();
	return ok;
}


/* A captured stream records instead of running; a graph launch replays the operations with the
 * argument values of their capture; a host synchronisation while capturing is refused
 * (cudaErrorStreamCaptureUnsupported) and invalidates the capture, as the runtime documents. */
static int graphs_replay_captures_and_refuse_host_syncs(void)
{
	int *d = dalloc<int>(32), *pinned = NULL, host[32] = {0};
	cudaMallocHost((void **)&pinned, 32 * sizeof(int));
	memset(pinned, 0, 32 * sizeof(int));
	cudaStream_t s, other;
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking);
	int ok = 1;
	cudaStreamCaptureStatus st;
	ok &= cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess;
	ok &= cudaStreamIsCapturing(s, &st) == cudaSuccess && st == cudaStreamCaptureStatusActive;
	cx_launch_kernel(add_k, 1, 32, 0, s, d, 5);
	cx_launch_kernel(add_k, 1, 32, 0, s, d, 2);
	cudaMemcpyAsync(pinned, d, 32 * sizeof(int), cudaMemcpyDeviceToHost, s);
	cudaGraph_t g = NULL, g2 = NULL;
	ok &= cudaStreamEndCapture(s, &g) == cudaSuccess && g;
	ok &= cudaStreamSynchronize(s) == cudaSuccess && pinned[3] == 0;   /* nothing ran */
	cudaGraphExec_t x = NULL;
	ok &= cudaGraphInstantiate(&x, g, 0) == cudaSuccess;
	ok &= cudaGraphLaunch(x, s) == cudaSuccess && cudaGraphLaunch(x, s) == cudaSuccess;
	int before = pinned[3];   /* queued, not run */
	ok &= cudaStreamSynchronize(s) == cudaSuccess && before == 0 && pinned[3] == 14 &&
	      pinned[31] == 14;
	/* a synchronisation inside a capture */
	ok &= cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess;
	cx_launch_kernel(add_k, 1, 32, 0, s, d, 100);
	ok &= cudaStreamSynchronize(s) == cudaErrorStreamCaptureUnsupported;
	ok &= cudaDeviceSynchronize() == cudaErrorStreamCaptureUnsupported;
	ok &= cudaMemcpy(host, d, sizeof(int), cudaMemcpyDeviceToHost) ==
	      cudaErrorStreamCaptureUnsupported;
	ok &= cudaStreamIsCapturing(s, &st) == cudaSuccess && st == cudaStreamCaptureStatusInvalidated;
	ok &= cudaStreamEndCapture(s, &g2) == cudaErrorStreamCaptureInvalidated && !g2;
	/* a copy from pageable memory cannot be captured; a captured event cannot be waited for */
	ok &= cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess;
	ok &= cudaMemcpyAsync(d, host, sizeof host, cudaMemcpyHostToDevice, s) ==
	      cudaErrorStreamCaptureUnsupported;
	ok &= cudaStreamEndCapture(s, &g2) == cudaErrorStreamCaptureInvalidated;
	cudaEvent_t e;
	cudaEventCreate(&e);
	ok &= cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess;
	ok &= cudaEventRecord(e, s) == cudaSuccess;
	ok &= cudaEventSynchronize(e) == cudaErrorCapturedEvent;
	ok &= cudaStreamEndCapture(s, &g2) == cudaSuccess;
	cudaGraphDestroy(g2);
	/* relaxed mode: another stream may be waited for */
	ok &= cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed) == cudaSuccess;
	ok &= cudaStreamSynchronize(other) == cudaSuccess;
	ok &= cudaStreamSynchronize(s) == cudaErrorStreamCaptureUnsupported;
	ok &= cudaStreamEndCapture(s, &g2) == cudaErrorStreamCaptureInvalidated;
	/* the refused captures ran nothing: one more replay gives 21 */
	ok &= cudaGraphLaunch(x, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess &&
	      pinned[0] == 21;
	if (!ok)
		printf("# pinned[3] %d pinned[0] %d; last: %s\n", pinned[3], pinned[0],
		       cx_last_diagnostic());
	cudaGetLastError();
	cudaGraphExecDestroy(x);
	cudaGraphDestroy(g);
	cudaEventDestroy(e);
	cudaFreeHost(pinned);
	cudaStreamDestroy(s);
	cudaStreamDestroy(other);
	cudaDeviceReset();
	return ok;
}

static unsigned short bits(__nv_bfloat16 h) { return h.__x; }
static unsigned short hbits(__half h) { return h.__x; }

static int conversions(void)
{
	int ok = 1;
	/* 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even is 1 */
	ok &= bits(__float2bfloat16_rn(1.00390625f)) == 0x3f80;
	ok &= bits(__float2bfloat16_rn(1.01171875f)) == 0x3f82; /* tie, rounds up to even */
	ok &= bits(__float2bfloat16_rz(1.0078125f - 1e-7f)) == 0x3f80;
	ok &= bits(__float2bfloat16_ru(1.0000001f)) == 0x3f81;
	ok &= bits(__float2bfloat16_rd(-1.0000001f)) == 0xbf81;
	ok &= bits(__float2bfloat16_rd(1.0000001f)) == 0x3f80;
	ok &= bits(__float2bfloat16(NAN)) == 0x7fff;
	ok &= bits(__float2bfloat16(3.4e38f)) == 0x7f80;      /* rounds past the largest: inf */
	ok &= bits(__float2bfloat16_rz(3.4e38f)) == 0x7f7f;   /* toward zero: the largest */
	ok &= __bfloat162float(__nv_bfloat16(__nv_bfloat16_raw{0x0001})) == 9.18354962e-41f;
	ok &= bits(__double2bfloat16(1.0 + 1.0 / 256 + 1e-12)) == 0x3f81; /* no double rounding */
	ok &= hbits(__float2half_rn(65520.0f)) == 0x7c00;     /* halfway past 65504: inf */
	ok &= hbits(__float2half_rz(65520.0f)) == 0x7bff;
	ok &= hbits(__float2half_rn(5.96046448e-08f)) == 0x0001; /* the smallest subnormal */
	ok &= hbits(__float2half_rn(2.98023224e-08f)) == 0x0000; /* half of it: tie to even 0 */
	ok &= hbits(__float2half_ru(1e-10f)) == 0x0001;
	ok &= hbits(__float2half_rn(-1.00048828125f)) == 0xbc00; /* tie: even */
	ok &= hbits(__float2half(NAN)) == 0x7fff;
	ok &= __half2float(__half(__half_raw{0x3555})) == 0.333251953125f;
	for (int i = 0; i < 0x10000; i++) /* every half converts to float and back exactly */
		if ((i & 0x7c00) != 0x7c00 || !(i & 0x3ff))
			ok &= hbits(__float2half_rn(__half2float(__half(__half_raw{(unsigned short)i})))) == i;
	return ok;
}

static int cublaslt_gemm(void)
{
	/* D(m x n) = A^T(m x k) B(k x n) + bias, A stored k x m with lda > k, two batches */
	const int m = 5, n = 3, k = 7, lda = 9, ldb = 8, ldd = 6, batch = 2;
	std::vector<__nv_bfloat16> A(lda * m * batch + 10), B(ldb * n * batch + 10);
	std::vector<float> bias(m);
	for (size_t i = 0; i < A.size(); i++)
		A[i] = __float2bfloat16((float)((i * 7) % 13) - 6.0f);
	for (size_t i = 0; i < B.size(); i++)
		B[i] = __float2bfloat16((float)((i * 5) % 11) * 0.5f - 2.0f);
	for (int i = 0; i < m; i++)
		bias[i] = 0.25f * i;
	const int64_t sa = lda * m + 3, sb = ldb * n + 2, sd = ldd * n;
	__nv_bfloat16 *dA = dalloc<__nv_bfloat16>(A.size()), *dB = dalloc<__nv_bfloat16>(B.size());
	float *dbias = dalloc<float>(m);
	float *dD = dalloc<float>(sd * batch);
	cudaMemcpy(dA, A.data(), A.size() * 2, cudaMemcpyHostToDevice);
	cudaMemcpy(dB, B.data(), B.size() * 2, cudaMemcpyHostToDevice);
	cudaMemcpy(dbias, bias.data(), m * 4, cudaMemcpyHostToDevice);
	std::vector<float> nanfill(sd * batch, NAN); /* beta 0: C is never read */
	cudaMemcpy(dD, nanfill.data(), sd * batch * 4, cudaMemcpyHostToDevice);
	cublasLtHandle_t lt;
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t la, lb, ld;
	int ok = cublasLtCreate(&lt) == 0;
	ok &= cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == 0;
	int32_t t = CUBLAS_OP_T, epi = CUBLASLT_EPILOGUE_BIAS, bt = CUDA_R_32F;
	ok &= cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, 4) == 0;
	ok &= cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, 4) == 0;
	ok &= cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, 4) == 0;
	ok &= cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbias,
					     sizeof dbias) == 0;
	ok &= cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, k, m, lda) == 0;
	ok &= cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, n, ldb) == 0;
	ok &= cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, ldd) == 0;
	int32_t nb = batch;
	ok &= cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &nb, 4) == 0;
	ok &= cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &nb, 4) == 0;
	ok &= cublasLtMatrixLayoutSetAttribute(ld, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &nb, 4) == 0;
	ok &= cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sa, 8) == 0;
	ok &= cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sb, 8) == 0;
	ok &= cublasLtMatrixLayoutSetAttribute(ld, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sd, 8) == 0;
	float alpha = 2.0f, beta = 0.0f;
	ok &= cublasLtMatmul(lt, desc, &alpha, dA, la, dB, lb, &beta, dD, ld, dD, ld, NULL, NULL, 0,
			     0) == 0;
	std::vector<float> D = fetch(dD, sd * batch);
	for (int b = 0; b < batch; b++)
		for (int j = 0; j < n; j++)
			for (int i = 0; i < m; i++) {
				float acc = 0;
				for (int p = 0; p < k; p++)
					acc += __bfloat162float(A[b * sa + p + i * lda]) *
					       __bfloat162float(B[b * sb + p + j * ldb]);
				float want = alpha * acc + bias[i];
				if (fabsf(D[b * sd + i + j * ldd] - want) > 1e-4f) {
					printf("# D[%d](%d,%d) = %g, want %g\n", b, i, j,
					       D[b * sd + i + j * ldd], want);
					ok = 0;
				}
			}
	/* refused: an epilogue it does not implement, row order, contradicting shapes */
	int32_t relu = CUBLASLT_EPILOGUE_RELU, row = CUBLASLT_ORDER_ROW;
	ok &= cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &relu, 4) ==
	      CUBLAS_STATUS_NOT_SUPPORTED;
	ok &= cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_ORDER, &row, 4) ==
	      CUBLAS_STATUS_NOT_SUPPORTED;
	/* the GELU aux matrix: a leading dimension that is no multiple of 8, or no aux pointer */
	{
		cublasLtMatmulDesc_t dg;
		int32_t ga = CUBLASLT_EPILOGUE_GELU_AUX;
		int64_t ald = 7, ald8 = 8;
		ok &= cublasLtMatmulDescCreate(&dg, CUBLAS_COMPUTE_32F, CUDA_R_32F) == 0;
		ok &= cublasLtMatmulDescSetAttribute(dg, CUBLASLT_MATMUL_DESC_TRANSA, &t, 4) == 0;
		ok &= cublasLtMatmulDescSetAttribute(dg, CUBLASLT_MATMUL_DESC_EPILOGUE, &ga, 4) == 0;
		ok &= cublasLtMatmulDescSetAttribute(dg, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ald8, 8) == 0;
		ok &= cublasLtMatmul(lt, dg, &alpha, dA, la, dB, lb, &beta, dD, ld, dD, ld, NULL, NULL,
				     0, 0) == CUBLAS_STATUS_INVALID_VALUE;   /* no aux pointer */
		ok &= cublasLtMatmulDescSetAttribute(dg, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &dD,
						     sizeof dD) == 0;
		ok &= cublasLtMatmulDescSetAttribute(dg, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ald, 8) == 0;
		ok &= cublasLtMatmul(lt, dg, &alpha, dA, la, dB, lb, &beta, dD, ld, dD, ld, NULL, NULL,
				     0, 0) == CUBLAS_STATUS_INVALID_VALUE;   /* LD 7 */
		cublasLtMatmulDescDestroy(dg);
	}
	cublasLtMatrixLayout_t bad;
	cublasLtMatrixLayoutCreate(&bad, CUDA_R_32F, m + 1, n, ldd);
	ok &= cublasLtMatmul(lt, desc, &alpha, dA, la, dB, lb, &beta, dD, bad, dD, bad, NULL, NULL, 0,
			     0) == CUBLAS_STATUS_INVALID_VALUE;
	/* a matrix that does not fit its allocation */
	cublasLtMatrixLayout_t big;
	cublasLtMatrixLayoutCreate(&big, CUDA_R_16BF, k, m, 1000);
	cublasLtMatrixLayoutSetAttribute(big, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &nb, 4);
	ok &= cublasLtMatmul(lt, desc, &alpha, dA, big, dB, lb, &beta, dD, ld, dD, ld, NULL, NULL, 0,
			     0) == CUBLAS_STATUS_INVALID_VALUE;
	ok &= strstr(cx_last_diagnostic(), "past the end") != NULL;
	cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb);
	cublasLtMatrixLayoutDestroy(ld), cublasLtMatrixLayoutDestroy(bad);
	cublasLtMatrixLayoutDestroy(big);
	cublasLtMatmulDescDestroy(desc);
	cublasLtDestroy(lt);
	cudaDeviceReset();
	return ok;
}

/* One bias-gradient GEMM on the executor: D(m x n) = op(A) op(B) + beta D, A stored m x k (N),
 * B stored n x k (T), the epilogue writing bias; aux (DGELU_BGRAD) m x n, ld m. */
static int lt_bgrad(cublasLtHandle_t lt, int32_t epi, int m, int n, int k, const void *dA,
		    const void *dB, void *dD, cudaDataType_t dtype, float beta, void *dbias,
		    int32_t btype, const void *daux, float alpha)
{
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t la, lb, ld;
	int32_t t = CUBLAS_OP_T;
	int64_t ald = m;
	int ok = cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == 0;
	ok &= cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &t, 4) == 0;
	ok &= cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, 4) == 0;
	ok &= cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &btype, 4) == 0;
	ok &= cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbias,
					     sizeof dbias) == 0;
	if (daux) {
		ok &= cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
						     &daux, sizeof daux) == 0;
		ok &= cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ald,
						     8) == 0;
	}
	ok &= cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, m, k, m) == 0;
	ok &= cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, n, k, n) == 0;
	ok &= cublasLtMatrixLayoutCreate(&ld, dtype, m, n, m) == 0;
	cublasStatus_t s = cublasLtMatmul(lt, desc, &alpha, dA, la, dB, lb, &beta, dD, ld, dD, ld,
					  NULL, NULL, 0, 0);
	cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb);
	cublasLtMatrixLayoutDestroy(ld);
	cublasLtMatmulDescDestroy(desc);
	return ok ? (int)s : -1;
}

static float dgelu_ref(float x)
{
	const float s = 0.7978845608028654f;
	float t = tanhf(s * (x + 0.044715f * x * x * x));
	return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * s * (1.0f + 3.0f * 0.044715f * x * x);
}

/* BGRADA, BGRADB and DGELU_BGRAD against plain loops: which dimension each reduces, that the
 * vector is overwritten (not blended by beta, which still blends D), the bias type */
static int cublaslt_bias_gradients(void)
{
	const int m = 8, n = 5, k = 9;   /* m: the aux LD, a multiple of 8 */
	std::vector<__nv_bfloat16> A(m * k), B(n * k), aux(m * n);
	std::vector<float> D0(m * n);
	for (int i = 0; i < m * k; i++)
		A[i] = __float2bfloat16((float)((i * 7) % 13) * 0.25f - 1.5f);
	for (int i = 0; i < n * k; i++)
		B[i] = __float2bfloat16((float)((i * 5) % 11) * 0.5f - 2.0f);
	for (int i = 0; i < m * n; i++) {
		aux[i] = __float2bfloat16((float)((i * 3) % 7) * 0.4f - 1.2f);
		D0[i] = (float)(i % 4) - 1.5f;
	}
	auto a = [&](int i, int p) { return __bfloat162float(A[i + p * m]); };
	auto b = [&](int p, int j) { return __bfloat162float(B[j + p * n]); };   /* op(B) = B^T */
	auto prod = [&](int i, int j) {
		float t = 0;
		for (int p = 0; p < k; p++)
			t += a(i, p) * b(p, j);
		return t;
	};
	__nv_bfloat16 *dA = dalloc<__nv_bfloat16>(A.size()), *dB = dalloc<__nv_bfloat16>(B.size());
	__nv_bfloat16 *daux = dalloc<__nv_bfloat16>(aux.size()), *dD16 = dalloc<__nv_bfloat16>(m * n);
	float *dD = dalloc<float>(m * n), *dbias = dalloc<float>(m > n ? m : n);
	__nv_bfloat16 *dbias16 = dalloc<__nv_bfloat16>(m > n ? m : n);
	cudaMemcpy(dA, A.data(), A.size() * 2, cudaMemcpyHostToDevice);
	cudaMemcpy(dB, B.data(), B.size() * 2, cudaMemcpyHostToDevice);
	cudaMemcpy(daux, aux.data(), aux.size() * 2, cudaMemcpyHostToDevice);
	std::vector<float> junk(m > n ? m : n, 1000.0f);
	cublasLtHandle_t lt;
	int ok = cublasLtCreate(&lt) == 0;
	auto near = [&](const char *what, int i, float got, float want, float tol) {
		if (fabsf(got - want) > tol) {
			printf("# %s[%d] = %g, want %g\n", what, i, got, want);
			ok = 0;
		}
	};
	/* BGRADB, D fp32 += (beta 1), as a weight gradient: the bias is the columns' sums of op(B) */
	cudaMemcpy(dD, D0.data(), m * n * 4, cudaMemcpyHostToDevice);
	cudaMemcpy(dbias, junk.data(), junk.size() * 4, cudaMemcpyHostToDevice);
	ok &= lt_bgrad(lt, CUBLASLT_EPILOGUE_BGRADB, m, n, k, dA, dB, dD, CUDA_R_32F, 1.0f, dbias,
		       CUDA_R_32F, NULL, 1.0f) == 0;
	std::vector<float> D = fetch(dD, m * n), bias = fetch(dbias, m > n ? m : n);
	for (int j = 0; j < n; j++) {
		float t = 0;
		for (int p = 0; p < k; p++)
			t += b(p, j);
		near("BGRADB bias", j, bias[j], t, 1e-5f);
		for (int i = 0; i < m; i++)
			near("BGRADB D", i + j * m, D[i + j * m], prod(i, j) + D0[i + j * m], 1e-4f);
	}
	near("BGRADB past n", n, bias[n], 1000.0f, 0.0f);
	/* BGRADA: the rows' sums of op(A), one per row of D */
	cudaMemcpy(dbias, junk.data(), junk.size() * 4, cudaMemcpyHostToDevice);
	ok &= lt_bgrad(lt, CUBLASLT_EPILOGUE_BGRADA, m, n, k, dA, dB, dD, CUDA_R_32F, 0.0f, dbias,
		       CUDA_R_32F, NULL, 1.0f) == 0;
	bias = fetch(dbias, m > n ? m : n);
	for (int i = 0; i < m; i++) {
		float t = 0;
		for (int p = 0; p < k; p++)
			t += a(i, p);
		near("BGRADA bias", i, bias[i], t, 1e-5f);
	}
	/* DGELU_BGRAD, D bf16: D = prod * gelu'(aux); the bias, fp32 or bf16, the rows' sums of D */
	for (int bf = 0; bf < 2; bf++) {
		void *vb = bf ? (void *)dbias16 : (void *)dbias;
		ok &= lt_bgrad(lt, CUBLASLT_EPILOGUE_DGELU_BGRAD, m, n, k, dA, dB, dD16, CUDA_R_16BF,
			       0.0f, vb, bf ? CUDA_R_16BF : CUDA_R_32F, daux, 1.0f) == 0;
		std::vector<__nv_bfloat16> D16(m * n), b16(m);
		cudaMemcpy(D16.data(), dD16, m * n * 2, cudaMemcpyDeviceToHost);
		if (bf)
			cudaMemcpy(b16.data(), dbias16, m * 2, cudaMemcpyDeviceToHost);
		else
			bias = fetch(dbias, m > n ? m : n);
		for (int i = 0; i < m; i++) {
			float t = 0;
			for (int j = 0; j < n; j++) {
				float v = prod(i, j) * dgelu_ref(__bfloat162float(aux[i + j * m]));
				t += v;
				near("DGELU_BGRAD D", i + j * m, __bfloat162float(D16[i + j * m]), v,
				     fabsf(v) / 128 + 1e-6f);
			}
			near(bf ? "DGELU_BGRAD bf16 bias" : "DGELU_BGRAD bias", i,
			     bf ? __bfloat162float(b16[i]) : bias[i], t,
			     bf ? fabsf(t) / 128 + 1e-6f : 1e-4f);
		}
	}
	/* refused: alpha other than 1 (undocumented for the gradient), a bias type of neither D's
	 * 16-bit type nor fp32, no bias pointer */
	ok &= lt_bgrad(lt, CUBLASLT_EPILOGUE_BGRADB, m, n, k, dA, dB, dD, CUDA_R_32F, 1.0f, dbias,
		       CUDA_R_32F, NULL, 2.0f) == CUBLAS_STATUS_NOT_SUPPORTED;
	ok &= lt_bgrad(lt, CUBLASLT_EPILOGUE_BGRADB, m, n, k, dA, dB, dD, CUDA_R_32F, 1.0f, dbias,
		       CUDA_R_16BF, NULL, 1.0f) == CUBLAS_STATUS_NOT_SUPPORTED;
	ok &= lt_bgrad(lt, CUBLASLT_EPILOGUE_BGRADB, m, n, k, dA, dB, dD, CUDA_R_32F, 1.0f, NULL,
		       CUDA_R_32F, NULL, 1.0f) == CUBLAS_STATUS_INVALID_VALUE;
	cublasLtDestroy(lt);
	cudaDeviceReset();
	return ok;
}

static int radix_sort(void)
{
	const int n = 9;
	int keys[n] = {5, -1, 3, 5, -7, 3, 0, -1, 5}, vals[n] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
	int *dk = dalloc<int>(n), *dv = dalloc<int>(n), *ko = dalloc<int>(n), *vo = dalloc<int>(n);
	cudaMemcpy(dk, keys, sizeof keys, cudaMemcpyHostToDevice);
	cudaMemcpy(dv, vals, sizeof vals, cudaMemcpyHostToDevice);
	size_t temp = 0;
	cub::DeviceRadixSort::SortPairs(nullptr, temp, (const int *)dk, ko, (const int *)dv, vo, n);
	void *t = dalloc<char>(temp);
	int ok = cub::DeviceRadixSort::SortPairs(t, temp, (const int *)dk, ko, (const int *)dv, vo,
						 n) == cudaSuccess;
	std::vector<int> k = fetch(ko, n), v = fetch(vo, n);
	int wk[n] = {-7, -1, -1, 0, 3, 3, 5, 5, 5}, wv[n] = {4, 1, 7, 6, 2, 5, 0, 3, 8};
	ok &= memcmp(k.data(), wk, sizeof wk) == 0 && memcmp(v.data(), wv, sizeof wv) == 0;
	cudaDeviceReset();
	return ok;
}

/* bf16 bits of x, which must be exact in bf16 */
static uint16_t bf16_bits(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	return (uint16_t)(u >> 16);
}

static float bf16_val(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float x;
	memcpy(&x, &u, 4);
	return x;
}

static float f16_val(uint16_t h)
{
	return __half2float(__ushort_as_half(h));
}

/* D = A B + C on the host with a plain fp32 loop (A, B bf16 bits, or fp16 with f16; the
 * products are exact in fp32 either way); err: its bound for an fp32 sum of 17 terms */
static void mma_ref(float *D, float *err, const uint16_t *A, const uint16_t *B, const float *C,
		    int f16 = 0)
{
	float (*val)(uint16_t) = f16 ? f16_val : bf16_val;
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < 8; j++) {
			float s = C[i * 8 + j];
			double mag = fabs(s);
			for (int k = 0; k < 16; k++) {
				float p = val(A[i * 16 + k]) * val(B[k * 8 + j]);
				s += p;
				mag += fabs(p);
			}
			D[i * 8 + j] = s;
			err[i * 8 + j] = (float)(mag * 17 * 0x1p-24);
		}
}

/* small integers: every sum is exact in any order, so D must equal A B + C bit for bit, and a
 * single misplaced element changes it; then N(0,1)-like bf16 values against the fp32 loop.
 * Passes 2 and 3 the same with fp16 inputs and the .f16 variant, the last with a fifth of A's
 * elements fp16 subnormals (below 2^-14), which the tensor cores take as they are. */
static int mma_matches_fp32_loop(void)
{
	int ok = 1;
	for (int pass = 0; pass < 4; pass++) {
		int f16 = pass >= 2, ints = pass % 2 == 0;
		uint16_t A[256], B[128];
		float C[128], ref[128], err[128];
		uint64_t x = 12345 + pass;
		for (int i = 0; i < 256 + 128 + 128; i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			int v = (int)(x >> 59) - 16; /* -16 .. 15 */
			float f = ints ? (float)v
				       : (float)v / 8.0f + (float)(x >> 40 & 255) / 2048.0f;
			if (f16 && !ints && i < 256 && i % 5 == 0)
				f *= 0x1p-16f; /* |f| < 2^-14: subnormal */
			uint16_t h = f16 ? __half_as_ushort(__float2half_rn(f)) : bf16_bits(f);
			if (i < 256)
				A[i] = h;
			else if (i < 384)
				B[i - 256] = h;
			else
				C[i - 384] = ints ? (float)v * 3.0f : f * 1.7f;
		}
		mma_ref(ref, err, A, B, C, f16);
		uint16_t *dA = dalloc<uint16_t>(256), *dB = dalloc<uint16_t>(128);
		float *dC = dalloc<float>(128), *dD = dalloc<float>(128);
		cudaMemcpy(dA, A, sizeof A, cudaMemcpyHostToDevice);
		cudaMemcpy(dB, B, sizeof B, cudaMemcpyHostToDevice);
		cudaMemcpy(dC, C, sizeof C, cudaMemcpyHostToDevice);
		if (launch(f16 ? mma_table_k<true> : mma_table_k<false>, 1, 32, 0, dD,
			   (const uint16_t *)dA, (const uint16_t *)dB, (const float *)dC))
			return 0;
		std::vector<float> D = fetch(dD, 128);
		for (int i = 0; i < 128; i++) {
			float tol = ints ? 0.0f : err[i];
			if (!(fabsf(D[i] - ref[i]) <= tol)) {
				printf("# pass %d D[%d][%d] = %.9g, the fp32 loop gives %.9g\n", pass,
				       i / 8, i % 8, D[i], ref[i]);
				ok = 0;
			}
		}
		cudaDeviceReset();
	}
	return ok;
}

static int ldmatrix_follows_the_ptx_table(void)
{
	uint16_t in[32 * 16];
	for (int k = 0; k < 32 * 16; k++)
		in[k] = (uint16_t)(k % 16 < 8 ? 1 + (k / 16) * 8 + k % 16 : 0xdead);
	uint16_t *din = dalloc<uint16_t>(32 * 16);
	uint32_t *dout = dalloc<uint32_t>(32 * 11);
	cudaMemcpy(din, in, sizeof in, cudaMemcpyHostToDevice);
	if (launch(ldmatrix_k, 1, 32, 0, dout, (const uint16_t *)din))
		return 0;
	std::vector<uint32_t> o = fetch(dout, 32 * 11);
	/* element (r, c) of matrix m: row r is the stored row lane 8m+r pointed at */
	auto el = [&](int m, int r, int c) -> uint32_t {
		return in[(m * 8 + r * 5 % 8) * 16 + c];
	};
	int ok = 1;
	for (int l = 0; l < 32; l++) {
		int g = l / 4, t = l % 4;
		uint32_t want[11];
		for (int m = 0; m < 4; m++) {
			want[m] = el(m, g, 2 * t) | el(m, g, 2 * t + 1) << 16;
			want[4 + m] = el(m, 2 * t, g) | el(m, 2 * t + 1, g) << 16;
		}
		want[8] = want[0], want[9] = want[1], want[10] = want[0];
		for (int k = 0; k < 11; k++)
			if (o[l * 11 + k] != want[k]) {
				printf("# lane %d register %d: 0x%08x, want 0x%08x\n", l, k, o[l * 11 + k],
				       want[k]);
				ok = 0;
			}
	}
	cudaDeviceReset();
	uint16_t A[256], B[128];
	float Z[128] = {0}, ref[128], err[128];
	for (int i = 0; i < 256; i++)
		A[i] = bf16_bits((float)((i * 7) % 13 - 6));
	for (int i = 0; i < 128; i++)
		B[i] = bf16_bits((float)((i * 5) % 11 - 5));
	mma_ref(ref, err, A, B, Z);
	uint16_t *dA = dalloc<uint16_t>(256), *dB = dalloc<uint16_t>(128);
	float *dD = dalloc<float>(256);
	cudaMemcpy(dA, A, sizeof A, cudaMemcpyHostToDevice);
	cudaMemcpy(dB, B, sizeof B, cudaMemcpyHostToDevice);
	if (launch(ldmatrix_mma_k, 1, 32, 0, dD, (const uint16_t *)dA, (const uint16_t *)dB))
		return 0;
	std::vector<float> D = fetch(dD, 256);
	for (int i = 0; i < 256; i++)
		if (D[i] != ref[i % 128]) {
			printf("# %s: D[%d][%d] = %g, want %g\n", i < 128 ? "B from Bn" : "B from Bk .trans",
			       i % 128 / 8, i % 8, D[i], ref[i % 128]);
			ok = 0;
		}
	cudaDeviceReset();
	return ok;
}

static int cp_async_lands_at_the_wait(void)
{
	int ok = 1;
	std::vector<int> hg(256);
	for (int i = 0; i < 256; i++)
		hg[i] = 1000 + i;
	int *g = dalloc<int>(256), *o = dalloc<int>(128);
	cudaMemcpy(g, hg.data(), 256 * 4, cudaMemcpyHostToDevice);
	for (int order = 0; order < 3; order++) {
		cx_test_set_order(order, 4);
		ok &= launch(cpasync_k, 1, 32, 0, o, (const int *)g, 0) == cudaSuccess;
		std::vector<int> h = fetch(o, 128);
		for (int t = 0; t < 32; t++) {
			int n = (t + 1) % 32;
			ok &= h[t] == hg[4 * n + 1] && h[32 + t] == hg[128 + 4 * n + 2] &&
			      h[64 + t] == hg[4 * n + 1] && h[96 + t] == 0;
		}
	}
	cx_test_set_order(0, 1);
	for (int what = 1; what <= 2; what++) { /* read too early: the poison, not g nor the 7 */
		ok &= launch(cpasync_k, 1, 32, 0, o, (const int *)g, what) == cudaSuccess;
		std::vector<int> h = fetch(o, 32);
		for (int t = 0; t < 32; t++)
			ok &= h[t] == -1;
	}
	for (int order = 0; order < 2; order++) {
		cx_test_set_order(order, 1);
		g = dalloc<int>(256), o = dalloc<int>(128);
		ok &= fails_with(launch(cpasync_k, 1, 32, 0, o, (const int *)g, 3),
				 cudaErrorLaunchFailure, {"cpasync_k", "race on shared memory", "sm in"});
	}
	cx_test_set_order(0, 1);
	g = dalloc<int>(256), o = dalloc<int>(128);
	ok &= fails_with(launch(cpasync_k, 1, 32, 0, o, (const int *)g, 4),
			 cudaErrorMisalignedAddress, {"cpasync_k", "cp.async", "not 16-byte aligned"});
	g = dalloc<int>(256), o = dalloc<int>(128);
	ok &= fails_with(launch(cpasync_k, 1, 32, 0, o, (const int *)g, 5), cudaErrorIllegalAddress,
			 {"cpasync_k", "cp.async", "not 16 bytes of shared memory"});
	return ok;
}

static int matrix_instruction_misuse(void)
{
	int ok = 1;
	float *o = dalloc<float>(32);
	ok &= fails_with(launch(mma_partial_warp_k, 1, 16, 0, o), cudaErrorLaunchFailure,
			 {"mma_partial_warp_k", "mma.sync", "needs all 32 lanes"});
	o = dalloc<float>(32);
	ok &= fails_with(launch(mma_two_sites_k, 1, 32, 0, o), cudaErrorLaunchFailure,
			 {"mma_two_sites_k", "same instruction", "selftest.cu"});
	o = dalloc<float>(32);
	ok &= fails_with(launch(mma_exited_lane_k, 1, 32, 0, o), cudaErrorLaunchFailure,
			 {"mma_exited_lane_k", "mma.sync"});
	uint16_t *g = dalloc<uint16_t>(64);
	uint32_t *u = dalloc<uint32_t>(32);
	ok &= fails_with(launch(ldmatrix_bad_k, 1, 32, 0, u, (const uint16_t *)g, 0),
			 cudaErrorIllegalAddress, {"ldmatrix_bad_k", "not in shared memory"});
	g = dalloc<uint16_t>(64), u = dalloc<uint32_t>(32);
	ok &= fails_with(launch(ldmatrix_bad_k, 1, 32, 0, u, (const uint16_t *)g, 1),
			 cudaErrorMisalignedAddress, {"ldmatrix_bad_k", "not 16-byte aligned"});
	g = dalloc<uint16_t>(64), u = dalloc<uint32_t>(32);
	ok &= fails_with(launch(ldmatrix_bad_k, 1, 32, 0, u, (const uint16_t *)g, 2),
			 cudaErrorLaunchFailure, {"ldmatrix_bad_k", "no thread of this block has written"});
	return ok;
}

int main(int argc, char **argv)
{
	/* the provoked failures' messages are checked through cx_last_diagnostic(); -v shows them */
	if (!(argc > 1 && strcmp(argv[1], "-v") == 0) && !freopen("/dev/null", "w", stderr))
		return 3;
	T_CASE("warp_shuffles_votes_and_reductions_follow_the_ptx_rules") T_ASSERT(shuffles());
	T_CASE("syncthreads_count_and_or") T_ASSERT(counts());
	T_CASE("a_correct_reduction_gives_the_same_bits_in_every_thread_order")
		T_ASSERT(reduction_same_under_every_order());
	T_CASE("shared_memory_races_and_uninitialised_reads_are_reported") T_ASSERT(races());
	T_CASE("global_memory_races_between_blocks_and_threads_are_reported") T_ASSERT(global_races());
	T_CASE("barrier_divergence_and_bad_member_masks_are_reported") T_ASSERT(divergence());
	T_CASE("blocks_waiting_for_earlier_tickets_run_in_every_order_and_waits_on_unstarted_blocks_are_deadlocks")
		T_ASSERT(spin_waits());
	T_CASE("out_of_bounds_host_pointers_use_after_free_and_misalignment_are_reported")
		T_ASSERT(memory_checks());
	T_CASE("launches_beyond_the_h100s_limits_fail_as_on_the_device") T_ASSERT(launch_limits());
	T_CASE("host_code_cannot_touch_device_memory") T_ASSERT(host_cannot_touch_device_memory());
	T_CASE("streams_and_events_are_asynchronous") T_ASSERT(streams_are_asynchronous());
	T_CASE("graphs_replay_captures_and_host_syncs_inside_a_capture_are_refused")
		T_ASSERT(graphs_replay_captures_and_refuse_host_syncs());
	T_CASE("bf16_and_half_conversions_round_as_documented") T_ASSERT(conversions());
	T_CASE("cublaslt_batched_transposed_gemm_with_bias_and_refusals") T_ASSERT(cublaslt_gemm());
	T_CASE("cublaslt_bgrada_bgradb_dgelu_bgrad_match_plain_loops")
		T_ASSERT(cublaslt_bias_gradients());
	T_CASE("cub_radix_sort_is_stable_with_signed_keys") T_ASSERT(radix_sort());
	T_CASE("mma_m16n8k16_bf16_and_f16_fragments_per_the_ptx_table_match_an_fp32_loop")
		T_ASSERT(mma_matches_fp32_loop());
	T_CASE("ldmatrix_x1_x2_x4_and_trans_per_the_ptx_table_feed_mma")
		T_ASSERT(ldmatrix_follows_the_ptx_table());
	T_CASE("mma_and_ldmatrix_misuse_is_reported") T_ASSERT(matrix_instruction_misuse());
	T_CASE("cp_async_lands_at_its_wait_group_and_misuse_is_reported")
		T_ASSERT(cp_async_lands_at_the_wait());
	T_DONE();
}
