/* common.h - what every file of the CUDA backend shares: the one backend state, error checks,
 * bf16 load/store helpers, warp reductions and the internal entry points of each file.
 *
 * The backend is a single process-wide object (struct cuda_state, defined in ops_cuda.cu): one
 * device, one non-blocking stream on which every kernel, copy and cuBLAS call is queued, one
 * cuBLAS and one cuBLASLt handle, a cuBLASLt workspace and a scratch buffer.  Because everything
 * is ordered on that one stream, ops can share the scratch buffer without locks: an op asks for
 * the bytes it needs (cu_scratch), carves them up, and the next op's kernels cannot start before
 * this op's have finished reading.  The scratch only ever grows, so after the first step nothing
 * is allocated inside a training step.
 *
 * The struct ops functions return void, so a failing CUDA call cannot be reported to the caller;
 * it ends the program with "train: cuda: <what>: <why>" and exit status 3, as die() does.  Kernel
 * launches are checked with cudaGetLastError (configuration errors); errors during execution
 * surface at the next synchronising call.  LMTK_CUDA_SYNC=1 synchronises after every launch so an
 * execution error names the kernel that caused it (slow; for debugging).
 *
 * Vector access: a kernel template parameter V is 8 (16-byte loads of 8 bf16) or 1 (scalar).
 * The host picks 8 only when the row length is a multiple of 8 and every pointer is 16-byte
 * aligned (cu_vec8), so odd test shapes still work and real shapes get full-width loads. */
#ifndef TRAIN_CUDA_COMMON_H
#define TRAIN_CUDA_COMMON_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "train/model/ops.h"
}

typedef __nv_bfloat16 bf16;

struct cuda_state {
	int dev;
	int nsm;                    /* SMs: caps the grids of grid-stride loops */
	int debug_sync;             /* LMTK_CUDA_SYNC=1 */
	cudaStream_t stream;
	cublasHandle_t blas;
	cublasLtHandle_t lt;
	void *lt_ws;                /* cuBLASLt workspace */
	size_t lt_ws_size;
	void *scratch;              /* see cu_scratch() */
	size_t scratch_size;
	void *dsmall;               /* 256 device bytes: sumsq's double, all_within's flag */
	void *hsmall;               /* 256 pinned host bytes: where those come back */
};
extern struct cuda_state cu;

/* --- errors (ops_cuda.cu) --- */
void cu_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void cu_check_(cudaError_t e, const char *what, const char *file, int line);
void cu_blas_check_(cublasStatus_t s, const char *what, const char *file, int line);
void cu_launched_(const char *kernel, const char *file, int line);
#define CU_CHECK(x) cu_check_((x), #x, __FILE__, __LINE__)
#define BLAS_CHECK(x) cu_blas_check_((x), #x, __FILE__, __LINE__)
#define CU_LAUNCHED(name) cu_launched_((name), __FILE__, __LINE__)

/* CUDA's current device is per host thread: a thread other than the one that opened the backend
 * would otherwise allocate and launch on GPU 0.  Every entry point starts with CU_ENTER(). */
extern thread_local int cu_thread_bound;
void cu_bind_thread(void);
#define CU_ENTER()                                                                                 \
	do {                                                                                       \
		if (!cu_thread_bound)                                                              \
			cu_bind_thread();                                                          \
	} while (0)

/* A device buffer of at least `bytes` for the calling op's temporaries; valid until the next call
 * (ops on the one stream never overlap). */
void *cu_scratch(size_t bytes);

static inline size_t cu_round256(size_t x)
{
	return (x + 255) & ~(size_t)255;
}

static inline int cu_aligned16(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

/* 8-wide access is allowed when n (elements, or a row length) is a multiple of 8 and all the
 * given pointers (NULL is ignored) are 16-byte aligned. */
static inline int cu_vec8(size_t n, const void *a, const void *b = nullptr, const void *c = nullptr,
			  const void *d = nullptr)
{
	return n % 8 == 0 && cu_aligned16(a) && cu_aligned16(b) && cu_aligned16(c) &&
	       cu_aligned16(d);
}

/* Blocks for a grid-stride loop over `units` work items with `threads` per block. */
static inline unsigned cu_grid(size_t units, int threads)
{
	size_t want = (units + (size_t)threads - 1) / (size_t)threads;
	size_t cap = (size_t)cu.nsm * 32;
	if (want > cap)
		want = cap;
	return want ? (unsigned)want : 1;
}

/* Kernel launches: cu_launch(kernel, grid, block, smem, stream, args...) is
 * kernel<<<grid, block, smem, stream>>>(args...).  The same sources also compile with the host
 * compiler for the CPU executor (tests/cuda-exec), which cannot parse <<<>>>; there the launch
 * goes to the executor, which converts and copies the arguments as the device does. */
template <typename... P, typename... A>
static inline void cu_launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
			     cudaStream_t stream, A... args)
{
#ifdef __CUDACC__
	kernel<<<grid, block, smem, stream>>>(args...);
#else
	cx_launch_kernel(kernel, grid, block, smem, stream, args...);
#endif
}

/* --- device helpers --- */

template <int V> __device__ __forceinline__ void ld_act(float (&f)[V], const bf16 *p)
{
	if constexpr (V == 8) {
		int4 raw = *reinterpret_cast<const int4 *>(p);
		const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&raw);
#pragma unroll
		for (int k = 0; k < 4; k++) {
			float2 t = __bfloat1622float2(h[k]);
			f[2 * k] = t.x;
			f[2 * k + 1] = t.y;
		}
	} else {
#pragma unroll
		for (int k = 0; k < V; k++)
			f[k] = __bfloat162float(p[k]);
	}
}

template <int V> __device__ __forceinline__ void st_act(bf16 *p, const float (&f)[V])
{
	if constexpr (V == 8) {
		alignas(16) __nv_bfloat162 h[4];
#pragma unroll
		for (int k = 0; k < 4; k++)
			h[k] = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);
		*reinterpret_cast<int4 *>(p) = *reinterpret_cast<const int4 *>(h);
	} else {
#pragma unroll
		for (int k = 0; k < V; k++)
			p[k] = __float2bfloat16(f[k]);
	}
}

template <int V> __device__ __forceinline__ void ld_f32(float (&f)[V], const float *p)
{
	if constexpr (V == 8) {
		float4 a = reinterpret_cast<const float4 *>(p)[0];
		float4 b = reinterpret_cast<const float4 *>(p)[1];
		f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w;
		f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
	} else {
#pragma unroll
		for (int k = 0; k < V; k++)
			f[k] = p[k];
	}
}

template <int V> __device__ __forceinline__ void st_f32(float *p, const float (&f)[V])
{
	if constexpr (V == 8) {
		reinterpret_cast<float4 *>(p)[0] = make_float4(f[0], f[1], f[2], f[3]);
		reinterpret_cast<float4 *>(p)[1] = make_float4(f[4], f[5], f[6], f[7]);
	} else {
#pragma unroll
		for (int k = 0; k < V; k++)
			p[k] = f[k];
	}
}

/* Butterfly sum over the warp: every lane ends with the same bits (a+b == b+a in IEEE). */
__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

/* --- internal entry points, one group per file --- */

/* reduce.cu: d0(C) += colsum(dy) ; with x != NULL (layer norm): d1(C) += colsum(dy * xhat),
 * xhat = (x - mean[n]) * rstd[n].  d0 or d1 may be NULL (skipped).  Deterministic. */
void cu_colsum(float *d0, float *d1, const bf16 *dy, const bf16 *x, const float *mean,
	       const float *rstd, int N, int C);
double cu_sumsq(const float *g, size_t n);
int cu_all_within(const float *g, size_t n, float limit);

/* matmul.cu */
void cu_matmul_fwd(void *out, const void *inp, const void *w, const void *bias, int N, int IC,
		   int OC);
void cu_matmul_bwd(void *dinp, float *dw, float *dbias, const void *dout, const void *inp,
		   const void *w, int N, int IC, int OC);
void cu_matmul_gelu_fwd(void *out, void *pre, const void *inp, const void *w, const void *bias,
			int N, int IC, int OC);
void cu_matmul_dgelu_bwd(void *dinp, float *dw, float *dbias, const void *dout, const void *inp,
			 const void *w, const void *pre, int N, int IC, int OC);

/* norm.cu */
void cu_layernorm_fwd(void *out, float *mean, float *rstd, const void *inp, const void *w,
		      const void *b, int N, int C, float eps);
void cu_layernorm_bwd(void *dinp, float *dw, float *db, const void *dout, const void *inp,
		      const void *w, const float *mean, const float *rstd, int N, int C);
void cu_residual_layernorm_fwd(void *res_out, void *ln_out, float *mean, float *rstd,
			       const void *res, const void *x, const void *w, const void *b, int N,
			       int C, float eps, float p, uint64_t seed, uint64_t off);
void cu_layernorm_bwd_dropout(void *dinp, void *dx, float *dw, float *db, const void *dout,
			      const void *inp, const void *w, const float *mean, const float *rstd,
			      int N, int C, float p, uint64_t seed, uint64_t off);

/* attention.cu */
void cu_attention_fwd(void *out, float *lse, const void *qkv, int B, int T, int NH, int HD,
		      struct ops_attn k);
void cu_attention_bwd(void *dqkv, const void *dout, const void *qkv, const void *out,
		      const float *lse, int B, int T, int NH, int HD, struct ops_attn k);
void cu_xattn_fwd(void *out, float *lse, const void *q, const void *kv, int B, int Tq, int Tk,
		  int NH, int HD, struct ops_attn k);
void cu_xattn_bwd(void *dq, void *dkv, const void *dout, const void *q, const void *kv,
		  const void *out, const float *lse, int B, int Tq, int Tk, int NH, int HD,
		  struct ops_attn k);

/* embed.cu */
void cu_embed_fwd(void *out, const int32_t *tok, const void *wte, const void *wpe, int B, int T,
		  int C);
void cu_embed_bwd(float *dwte, float *dwpe, const void *dout, const int32_t *tok, int B, int T,
		  int C);

/* pointwise.cu */
void cu_gelu_fwd(void *out, const void *inp, size_t n);
void cu_gelu_bwd(void *dinp, const void *inp, const void *dout, size_t n);
void cu_residual_fwd(void *out, const void *res, const void *x, size_t n, float p, uint64_t seed,
		     uint64_t off);
void cu_dropout_bwd(void *dx, const void *dout, size_t n, float p, uint64_t seed, uint64_t off);
void cu_dropout_fwd(void *x, size_t n, float p, uint64_t seed, uint64_t off);
void cu_add(void *acc, const void *x, size_t n);
void cu_gelu_erf_fwd(void *out, const void *inp, size_t n);
void cu_gelu_erf_bwd(void *dinp, const void *inp, const void *dout, size_t n);
void cu_tanh_fwd(void *out, const void *inp, size_t n);
void cu_tanh_bwd(void *dinp, const void *out, const void *dout, size_t n);
void cu_gather_rows(void *out, const void *inp, int rows, int C, size_t stride);
void cu_scatter_add_rows(void *dinp, const void *dout, int rows, int C, size_t stride);
void cu_f32_to_act(void *dst, const float *src, size_t n);
void cu_act_to_f32(float *dst, const void *src, size_t n);
void cu_bias_add(void *out, const void *bias, int N, int OC);

/* xent.cu */
void cu_xent_fwd_bwd(float *losses, void *logits, const int32_t *targets, int N, int V, int Vp,
		     float dscale, int *bad);
void cu_xent_stats(float *mx, float *se, float *zt, const void *logits,
		   const int32_t *targets_local, int N, int Vvalid, int Vp);
void cu_xent_grad(void *logits, const float *lse, const int32_t *targets_local, int N, int Vvalid,
		  int Vp, float dscale);

/* optim.cu */
void cu_scale(float *x, float s, size_t n);
void cu_adamw(float *master, void *param, const float *g, float *m, float *v, size_t n, float lr,
	      float b1, float b2, float eps, float wd, float gscale, int step);
double cu_lamb_update(const float *master, const float *g, float *m, float *v, size_t n, float b1,
		      float b2, float eps, float wd, float gscale, float clipdiv, int step);
void cu_lamb_apply(float *master, void *param, const float *m, const float *v, size_t n, float b1,
		   float b2, float eps, float wd, float ratio, int step, const struct lamb_noise *nz);
void cu_sgd(float *master, void *param, const float *g, float *buf, size_t n, float lr,
	    float momentum, float wd, float gscale, int first);
void cu_adamw_multi(float *master, void *param, const float *g, float *m, float *v,
		    const struct adam_seg *seg, int nseg, size_t total, float lr, float lr_mult,
		    float b1, float b2, float eps, float wd, float gscale, int step);

/* bnb.cu: --use-bnb-optimizer's 8-bit and 32-bit Adam (ops.h adam8bit, adam32) */
void cu_adam8bit(float *master, void *param, const float *g, uint8_t *c1, uint8_t *c2,
		 float *absmax1, float *absmax2, size_t n, const float *qmap, float lr, float b1,
		 float b2, float eps, float wd, float gscale, int step);
void cu_adam32(float *master, void *param, const float *g, float *m, float *v, size_t n, float lr,
	       float b1, float b2, float eps, float wd, float gscale, int step);

#endif
