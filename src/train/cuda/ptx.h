/* ptx.h - the tensor-core instructions of the attention kernels, which CUDA C++ reaches only
 * through inline assembly: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 and its fp16
 * twin ...f32.f16.f16.f32 (a 16 x 16 tile times a 16 x 8 one, fp32 accumulate; the fragments
 * have the same layout, only the 16-bit format differs) and ldmatrix.sync.aligned.m8n8.x{1,2,4}
 * {.trans}.shared.b16 (8 x 8 tiles of 16-bit elements from shared memory into the fragments mma
 * takes, whatever their format), and the asynchronous copy cp.async.cg.shared.global (16 bytes
 * from global to shared memory, zero-filled past the source size, without the thread waiting;
 * commit_group closes a group of them, wait_group N waits until at most the N most recent
 * groups are in flight: the kernels load the next tile while computing on this one).
 *
 * For nvcc they are the assembly itself (sm_80 and later); for the host compiler, which builds
 * the same sources into the CPU executor (tests/cuda-exec), they are the executor's functions of
 * the same names (tests/cuda-exec/include/cx_ptx.h), which implement the instructions' documented
 * semantics as warp collectives and whose header has the per-lane fragment layouts of the PTX
 * ISA.  Why mma.sync and not WMMA: the attention kernels mask, bias and exponentiate each score
 * where it lies in the accumulator fragment, so they must know which lane holds which (row,
 * column); WMMA leaves that mapping unspecified, mma.sync documents it. */
#ifndef TRAIN_CUDA_PTX_H
#define TRAIN_CUDA_PTX_H

#include <stdint.h>

#ifdef __CUDACC__

/* D = A B + C; d may be c */
__device__ __forceinline__ void ptx_mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4],
						      const uint32_t (&b)[2], const float (&c)[4])
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
		     "{%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
		     : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
		       "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

/* The same with fp16 A and B (--fp16) */
__device__ __forceinline__ void ptx_mma_m16n8k16_f16(float (&d)[4], const uint32_t (&a)[4],
						     const uint32_t (&b)[2], const float (&c)[4])
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
		     "{%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
		     : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
		       "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

/* Lane 8m+i gives p, the 16-byte aligned shared-memory address of row i of matrix m. */
template <int N> __device__ __forceinline__ void ptx_ldmatrix(uint32_t (&r)[N], const void *p)
{
	unsigned a = (unsigned)__cvta_generic_to_shared(p);
	if constexpr (N == 1)
		asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
			     : "=r"(r[0]) : "r"(a));
	else if constexpr (N == 2)
		asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
			     : "=r"(r[0]), "=r"(r[1]) : "r"(a));
	else
		asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
			     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

template <int N>
__device__ __forceinline__ void ptx_ldmatrix_trans(uint32_t (&r)[N], const void *p)
{
	unsigned a = (unsigned)__cvta_generic_to_shared(p);
	if constexpr (N == 1)
		asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
			     : "=r"(r[0]) : "r"(a));
	else if constexpr (N == 2)
		asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
			     : "=r"(r[0]), "=r"(r[1]) : "r"(a));
	else
		asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
			     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

/* 16 bytes to shared dst from global src, of which n (0..16) are read and the rest zero */
__device__ __forceinline__ void ptx_cp_async16(void *dst, const void *src, int n)
{
	unsigned a = (unsigned)__cvta_generic_to_shared(dst);
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(a), "l"(src), "r"(n)
		     : "memory");
}

__device__ __forceinline__ void ptx_cp_async_commit(void)
{
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N> __device__ __forceinline__ void ptx_cp_async_wait(void)
{
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

#else
#include "cx_ptx.h"
#endif

#endif
