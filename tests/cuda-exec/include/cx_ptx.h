/* cx_ptx.h - the warp-level matrix instructions of PTX that CUDA C++ has no name for, as
 * functions, for the CPU executor (tests/cuda-exec).
 *
 * CUDA code reaches mma.sync and ldmatrix through inline assembly, which the host compiler cannot
 * run.  The backend's src/train/cuda/ptx.h defines these functions with that assembly for nvcc and
 * includes this header otherwise; the names spell the PTX instruction, so the two definitions are
 * one contract:
 *
 *   ptx_mma_m16n8k16_bf16(d, a, b, c)  mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
 *   ptx_mma_m16n8k16_f16(d, a, b, c)   mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
 *   ptx_ldmatrix(r, p)                 ldmatrix.sync.aligned.m8n8.x{1,2,4}.shared.b16
 *   ptx_ldmatrix_trans(r, p)           the same with .trans
 *   ptx_cp_async16(dst, src, n)        cp.async.cg.shared.global [dst], [src], 16, n
 *   ptx_cp_async_commit()              cp.async.commit_group
 *   ptx_cp_async_wait<N>()             cp.async.wait_group N
 *
 * (the matrix count is the length of r).  The matrix instructions are warp collectives (sched.cpp): every lane of the
 * warp must execute the same one, as .sync.aligned requires; a lane that exited, waits
 * elsewhere, or a warp with fewer than 32 threads stops the kernel with a message.
 *
 * Fragments follow the PTX ISA's tables ("Matrix Fragments for mma.m16n8k16 with floating point
 * type", "Warp-level matrix load instruction: ldmatrix"), with g = lane / 4 and t = lane % 4 and
 * the lower 16 bits of a register holding the element of lower column (or row) index:
 *   A (16 x 16, row major):  a[0] = A[g][2t..2t+1]   a[1] = A[g+8][2t..2t+1]
 *                            a[2] = A[g][2t+8..2t+9] a[3] = A[g+8][2t+8..2t+9]
 *   B (16 x 8, column major): b[0] = B[2t..2t+1][g]  b[1] = B[2t+8..2t+9][g]
 *   C, D (16 x 8, fp32):     c[0..1] = C[g][2t..2t+1]  c[2..3] = C[g+8][2t..2t+1]
 *   ldmatrix: lane 8m+i gives the 16-byte aligned shared-memory address of row i of matrix m
 *   (lanes past the last matrix give none); r[m] = row g of matrix m, elements 2t and 2t+1, or
 *   with .trans elements (2t, g) and (2t+1, g).
 * The two mma variants share the fragment layout; A and B hold bf16 or IEEE fp16 (subnormals
 * included: the tensor cores do not flush fp16 inputs).  D = A B + C: the products of two bf16
 * or two fp16 values are exact in double; the executor adds the 16 of an element and C in
 * double and rounds once to fp32.  The device's order and intermediate precision inside a k16
 * step are not documented, so its low bits may differ (as the host libm's do from the device's
 * fast math); D may be the same array as C.
 *
 * cp.async is a thread's own (not a collective): it copies 16 bytes from global memory (n of
 * them, 0..16, the rest zero-filled; n = 0 reads nothing) to shared memory without the thread
 * waiting, and the copy lands at some time before the thread's cp.async.wait_group says its group
 * is complete - the groups are the copies between two commits, wait_group N waits until at most
 * the N most recent committed groups are pending (copies not yet committed are not waited for),
 * and other threads see the bytes only after a barrier that follows the wait.  The executor makes
 * every wrong use visible (check.cpp): at issue the destination counts as written by the thread
 * (a race with another thread's access since the last barrier is reported) and is filled with
 * 0xff bytes (NaN in bf16 and fp16), which it keeps until the wait, so a read before the wait, or
 * by another thread before a barrier after it, sees NaN; at the wait the bytes are copied and
 * written again in the thread's name.  Alignment (16 bytes, both addresses) and bounds are
 * checked at issue. */
#ifndef CUDA_EXEC_PTX_H
#define CUDA_EXEC_PTX_H

#include <stdint.h>

extern "C" {
void cx_mma_bf16(float *d, const uint32_t *a, const uint32_t *b, const float *c, const char *file,
		 int line);
void cx_mma_f16(float *d, const uint32_t *a, const uint32_t *b, const float *c, const char *file,
		int line);
void cx_ldmatrix(uint32_t *r, int num, int trans, const void *p, const char *file, int line);
void cx_cp_async(void *dst, const void *src, int n, const char *file, int line);
void cx_cp_async_commit(void);
void cx_cp_async_wait(int n);
}

static inline void ptx_mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4],
					 const uint32_t (&b)[2], const float (&c)[4],
					 const char *f = __builtin_FILE(), int l = __builtin_LINE())
{
	cx_mma_bf16(d, a, b, c, f, l);
}

static inline void ptx_mma_m16n8k16_f16(float (&d)[4], const uint32_t (&a)[4],
					const uint32_t (&b)[2], const float (&c)[4],
					const char *f = __builtin_FILE(), int l = __builtin_LINE())
{
	cx_mma_f16(d, a, b, c, f, l);
}

template <int N>
static inline void ptx_ldmatrix(uint32_t (&r)[N], const void *p, const char *f = __builtin_FILE(),
				int l = __builtin_LINE())
{
	static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4 matrices");
	cx_ldmatrix(r, N, 0, p, f, l);
}

template <int N>
static inline void ptx_ldmatrix_trans(uint32_t (&r)[N], const void *p,
				      const char *f = __builtin_FILE(), int l = __builtin_LINE())
{
	static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4 matrices");
	cx_ldmatrix(r, N, 1, p, f, l);
}

static inline void ptx_cp_async16(void *dst, const void *src, int n,
				  const char *f = __builtin_FILE(), int l = __builtin_LINE())
{
	cx_cp_async(dst, src, n, f, l);
}

static inline void ptx_cp_async_commit(void)
{
	cx_cp_async_commit();
}

template <int N> static inline void ptx_cp_async_wait(void)
{
	static_assert(N >= 0 && N <= 7, "cp.async.wait_group takes 0..7 here");
	cx_cp_async_wait(N);
}

#endif
