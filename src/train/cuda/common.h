/* common.h - what every file of the CUDA backend shares: the one backend state, error checks,
 * activation load/store helpers, warp reductions and the internal entry points of each file.
 *
 * The backend is a single process-wide object (struct cuda_state, defined in ops_cuda.cu): one
 * device, one non-blocking stream on which every kernel, copy and cuBLAS call is queued, one
 * cuBLAS and one cuBLASLt handle, a cuBLASLt workspace and a scratch buffer.  Because everything
 * is ordered on that one stream, ops can share the scratch buffer without locks: an op asks for
 * the bytes it needs (cu_scratch), carves them up, and the next op's kernels cannot start before
 * this op's have finished reading.  The scratch only ever grows, so after the first step nothing
 * is allocated inside a training step.
 *
 * The activation type.  Activations, activation gradients and working weights are bf16 (the
 * default, BLOOM-176B's recipe) or IEEE fp16 (train --fp16, Megatron's fp16 recipe), chosen once
 * when the backend opens (cu.act).  Every kernel that touches activations is a template over the
 * element type A (bf16 or f16); the host side of each op picks the instance with CU_ACT, so one
 * source serves both and only the loads, stores and tensor-core instruction differ.  Everything
 * else is the same in both: arithmetic in fp32 between a load and a store, statistics, master
 * weights, gradients and optimizer state fp32.  fp16 keeps 3 more mantissa bits than bf16 but
 * only 5 exponent bits: a value beyond 65504 rounds to infinity (and below 2^-24 to zero), which
 * is what makes the loss scaler's overflow check find real overflows on the fp16 path.
 *
 * The struct ops functions return void, so a failing CUDA call cannot be reported to the caller;
 * it ends the program with "train: cuda: <what>: <why>" and exit status 3, as die() does.  Kernel
 * launches are checked with cudaGetLastError (configuration errors); errors during execution
 * surface at the next synchronising call.  LMTK_CUDA_SYNC=1 synchronises after every launch so an
 * execution error names the kernel that caused it (slow; for debugging).
 *
 * Vector access: a kernel template parameter V is 8 (16-byte loads of 8 activations) or 1
 * (scalar).  The host picks 8 only when the row length is a multiple of 8 and every pointer is
 * 16-byte aligned (cu_vec8), so odd test shapes still work and real shapes get full-width loads. */
#ifndef TRAIN_CUDA_COMMON_H
#define TRAIN_CUDA_COMMON_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "train/model/ops.h"
}

typedef __nv_bfloat16 bf16;
typedef __half f16;

/* The activation type (see the top of the file) */
enum cu_act { CU_BF16, CU_F16 };

struct cuda_state {
	int dev;
	enum cu_act act;            /* the activation type, fixed when the backend opens */
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
	struct ops_step *hstep;     /* 2 pinned structs: step_fetch's slots */
	/* --cuda-graph (ops.h graph_mode): the mode, its slot, the two graphs; the step's host
	 * inputs as recorded (destination, size, offset in a slot's staging), each slot's pinned
	 * staging of stage_total bytes, and the next copy's index */
	int graph_mode, graph_slot;
	cudaGraphExec_t graph_exec[2];
	struct cu_stage { void *dst[2]; size_t bytes, off; } *stage;   /* dst: per slot */
	int nstage, stage_cap, stage_next;
	size_t stage_total;
	char *stage_buf[2];
	cudaEvent_t step_ev[2];     /* recorded after each slot's copy */
};
extern struct cuda_state cu;

/* --- errors (ops_cuda.cu) --- */
void cu_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void cu_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2))); /* and go on */
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
	if (cu.graph_mode == OPS_GRAPH_FILL)   /* the host only computes the step's inputs */
		return;
#ifdef __CUDACC__
	kernel<<<grid, block, smem, stream>>>(args...);
#else
	cx_launch_kernel(kernel, grid, block, smem, stream, args...);
#endif
}

/* CU_ACT(A, statements): the statements with A the backend's activation type (bf16 or f16) -
 * how the host side of an op launches the kernel instance for cu.act. */
#define CU_ACT(A, ...)                                                                             \
	do {                                                                                       \
		if (cu.act == CU_F16) {                                                            \
			typedef f16 A;                                                             \
			__VA_ARGS__;                                                               \
		} else {                                                                           \
			typedef bf16 A;                                                            \
			__VA_ARGS__;                                                               \
		}                                                                                  \
	} while (0)

/* The cudaDataType_t of the activation type (cuBLAS(Lt) matrices and bias) */
static inline cudaDataType_t cu_act_dtype(void)
{
	return cu.act == CU_F16 ? CUDA_R_16F : CUDA_R_16BF;
}

/* --- device helpers --- */

/* One activation to fp32 (exact) and back (round to nearest even; fp16 overflows to +-inf). */
__device__ __forceinline__ float act_f(bf16 x)
{
	return __bfloat162float(x);
}
__device__ __forceinline__ float act_f(f16 x)
{
	return __half2float(x);
}
template <typename A> __device__ __forceinline__ A f_act(float x);
template <> __device__ __forceinline__ bf16 f_act<bf16>(float x)
{
	return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ f16 f_act<f16>(float x)
{
	return __float2half_rn(x);
}

/* Two adjacent activations as one 32-bit word (lo in the lower half, as mma fragments hold
 * them) and back. */
template <typename A> struct act2;
template <> struct act2<bf16> {
	typedef __nv_bfloat162 T;
	static __device__ __forceinline__ float2 to_f2(T v) { return __bfloat1622float2(v); }
	static __device__ __forceinline__ T from_f2(float lo, float hi)
	{
		return __floats2bfloat162_rn(lo, hi);
	}
};
template <> struct act2<f16> {
	typedef __half2 T;
	static __device__ __forceinline__ float2 to_f2(T v) { return __half22float2(v); }
	static __device__ __forceinline__ T from_f2(float lo, float hi)
	{
		return __floats2half2_rn(lo, hi);
	}
};

/* True for fp16: where a kernel must name a different instruction (the attention's mma) */
template <typename A> struct act_is_f16 {
	static constexpr bool value = false;
};
template <> struct act_is_f16<f16> {
	static constexpr bool value = true;
};

template <int V, typename A> __device__ __forceinline__ void ld_act(float (&f)[V], const A *p)
{
	if constexpr (V == 8) {
		typedef typename act2<A>::T P;
		int4 raw = *reinterpret_cast<const int4 *>(p);
		const P *h = reinterpret_cast<const P *>(&raw);
#pragma unroll
		for (int k = 0; k < 4; k++) {
			float2 t = act2<A>::to_f2(h[k]);
			f[2 * k] = t.x;
			f[2 * k + 1] = t.y;
		}
	} else {
#pragma unroll
		for (int k = 0; k < V; k++)
			f[k] = act_f(p[k]);
	}
}

template <int V, typename A> __device__ __forceinline__ void st_act(A *p, const float (&f)[V])
{
	if constexpr (V == 8) {
		typedef typename act2<A>::T P;
		alignas(16) P h[4];
#pragma unroll
		for (int k = 0; k < 4; k++)
			h[k] = act2<A>::from_f2(f[2 * k], f[2 * k + 1]);
		*reinterpret_cast<int4 *>(p) = *reinterpret_cast<const int4 *>(h);
	} else {
#pragma unroll
		for (int k = 0; k < V; k++)
			p[k] = f_act<A>(f[k]);
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
 * xhat = (x - mean[n]) * rstd[n]; dy, x activations.  d0 or d1 may be NULL (skipped).
 * Deterministic. */
void cu_colsum(float *d0, float *d1, const void *dy, const void *x, const float *mean,
	       const float *rstd, int N, int C);
/* reduce.cu: d0(C) += sum over s < S of part(s, C); d1(C) += sum of part(S + s, C) - the second
 * pass of cu_colsum, for kernels that write such per-slice partials themselves (norm.cu). */
void cu_colsum_fin(float *d0, float *d1, const float *part, int C, int S);
/* reduce.cu: d(n) += s(n), fp32 */
void cu_vec_acc(float *d, const float *s, int n);
double cu_sumsq(const float *g, size_t n);
int cu_all_within(const float *g, size_t n, float limit);
void cu_sumsq_acc(double *acc, const float *g, size_t n);
void cu_within_acc(int32_t *flag, const float *g, size_t n, float limit);
void cu_loss_acc(double *acc, const float *losses, int N, int kept);

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
void cu_xent_rescale(float *se, const float *mx, const float *gmx, int N);
void cu_xent_finish(float *losses, float *lse, const float *gmx, const float *se, const float *zt,
		    const int32_t *targets, int N, int V, int *bad);

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
void cu_adamw_multi_step(float *master, void *param, const float *g, float *m, float *v,
			 const struct adam_seg *seg, int nseg, size_t total, float lr_mult,
			 float b1, float b2, float eps, float wd, const struct ops_step *s);
void cu_step_decide(struct ops_step *s, const struct ops_step *prev, const int *bad);

/* bnb.cu: --use-bnb-optimizer's 8-bit and 32-bit Adam (ops.h adam8bit, adam32) */
void cu_adam8bit(float *master, void *param, const float *g, uint8_t *c1, uint8_t *c2,
		 float *absmax1, float *absmax2, size_t n, const float *qmap, float lr, float b1,
		 float b2, float eps, float wd, float gscale, int step);
void cu_adam32(float *master, void *param, const float *g, float *m, float *v, size_t n, float lr,
	       float b1, float b2, float eps, float wd, float gscale, int step);

#endif
