/* cuda_runtime.h - the CPU executor's stand-in for the CUDA runtime (tests/cuda-exec).
 *
 * The CUDA backend's .cu files compile twice: with nvcc against the real toolkit, and with the
 * host C++ compiler against this directory, which is first on the include path.  This header
 * gives the host compiler what nvcc's front end and the runtime would: the CUDA keywords
 * (__global__, __shared__, ...), the built-in variables (threadIdx, blockIdx, ...), the
 * warp-level and block-level primitives, atomics, the math the device has, and the runtime API
 * the backend calls.  The semantics follow NVIDIA's documentation (CUDA C++ Programming Guide,
 * PTX ISA, runtime API reference); exec.cpp implements them.
 *
 * How a kernel runs: a launch is queued on its stream and executed when the host synchronises
 * (the device is asynchronous, so a host that reads results before synchronising reads stale
 * memory here too).  Each block runs on the calling host thread with every CUDA thread a fiber;
 * a fiber runs until it reaches a barrier or a warp-synchronous call, so between two barriers
 * the threads of a block run one after another in a chosen order (LMTK_CUDA_EXEC_ORDER=forward,
 * reverse or random[:seed]), and code that depends on the order is code with a race.  A spin-wait
 * yields in __nanosleep(), so a block can wait for another block's atomics (sched.cpp).
 *
 * Device memory is a region of host address space that host code cannot touch (it is
 * PROT_NONE except while the device works): a host dereference of a device pointer faults as it
 * would on a GPU.  Every memory access of a kernel is checked (the .cu files are compiled with
 * GCC's -fsanitize=thread instrumentation, whose hooks exec.cpp implements instead of
 * ThreadSanitizer): global accesses against the live allocations, shared accesses against the
 * block's shared memory and a shadow that reports races between barriers and reads of shared
 * memory never written in the block. */
#ifndef CUDA_EXEC_RUNTIME_H
#define CUDA_EXEC_RUNTIME_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

#include "driver_types.h"
#include "vector_types.h"

/* --- keywords --- */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
/* Shared memory: one instance per block.  Blocks run one at a time on a host thread, so a
 * thread-local static is one block's memory; `extern __shared__` arrays (dynamic shared memory)
 * are defined by a generated file (tests/cuda-exec/dynsmem.sh) and sized per launch. */
#define __shared__ thread_local
#define __constant__
#define __managed__
#define __CUDA_ARCH_EXEC__ 900 /* what this executor answers as: sm_90 (H100) */

static constexpr int warpSize = 32;

/* --- built-in variables: constant for the life of a CUDA thread, so `const` lets the compiler
 * read each once per function --- */
extern "C" {
uint3 cx_thread_idx(void) __attribute__((const));
uint3 cx_block_idx(void) __attribute__((const));
dim3 cx_block_dim(void) __attribute__((const));
dim3 cx_grid_dim(void) __attribute__((const));
}
#define threadIdx (cx_thread_idx())
#define blockIdx (cx_block_idx())
#define blockDim (cx_block_dim())
#define gridDim (cx_grid_dim())

/* --- block and warp synchronisation (exec.cpp) --- */
extern "C" {
void cx_syncthreads(const char *file, int line);
int cx_syncthreads_op(int op, int pred, const char *file, int line); /* 0 count, 1 and, 2 or */
void cx_syncwarp(unsigned mask, const char *file, int line);
/* mode: 0 idx, 1 up, 2 down, 3 xor */
uint64_t cx_shfl(int mode, unsigned mask, uint64_t v, int size, int arg, int width,
		 const char *file, int line);
/* op: 0 ballot, 1 any, 2 all */
unsigned cx_vote(int op, unsigned mask, int pred, const char *file, int line);
unsigned cx_match(int all, unsigned mask, uint64_t v, int *pred, const char *file, int line);
/* op: 0 add, 1 min, 2 max, 3 and, 4 or, 5 xor; sgn: values are signed */
unsigned cx_reduce(int op, int sgn, unsigned mask, unsigned v, const char *file, int line);
unsigned cx_activemask(void);
unsigned cx_lanemask_lt(void);
void cx_atomic_begin(const void *p, int size, const char *file, int line);
void cx_atomic_end(void);
void cx_trap(const char *file, int line) __attribute__((noreturn));
void cx_fence(void);
void cx_nanosleep(unsigned ns, const char *file, int line);
long long cx_clock(void);
}

#define __syncthreads() cx_syncthreads(__FILE__, __LINE__)
static inline int __syncthreads_count(int p, const char *f = __builtin_FILE(), int l = __builtin_LINE())
{
	return cx_syncthreads_op(0, p, f, l);
}
static inline int __syncthreads_and(int p, const char *f = __builtin_FILE(), int l = __builtin_LINE())
{
	return cx_syncthreads_op(1, p, f, l);
}
static inline int __syncthreads_or(int p, const char *f = __builtin_FILE(), int l = __builtin_LINE())
{
	return cx_syncthreads_op(2, p, f, l);
}
static inline void __syncwarp(unsigned mask = 0xffffffffu, const char *f = __builtin_FILE(),
			      int l = __builtin_LINE())
{
	cx_syncwarp(mask, f, l);
}
static inline void __threadfence(void) { cx_fence(); }
static inline void __threadfence_block(void) { cx_fence(); }
static inline void __threadfence_system(void) { cx_fence(); }
static inline void __trap(void) { cx_trap(__FILE__, __LINE__); }
/* a spin-wait's pause: the thread yields, so that what it waits for can happen (sched.cpp) */
#define __nanosleep(ns) cx_nanosleep((ns), __FILE__, __LINE__)
static inline long long clock64(void) { return cx_clock(); }
static inline unsigned __activemask(void) { return cx_activemask(); }

template <typename T> static inline uint64_t cx_bits(T v)
{
	static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
		      "shuffles move at most 8 bytes of a trivially copyable type");
	uint64_t u = 0;
	memcpy(&u, &v, sizeof(T));
	return u;
}
template <typename T> static inline T cx_from_bits(uint64_t u)
{
	T v;
	memcpy(&v, &u, sizeof(T));
	return v;
}

template <typename T>
static inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize,
			    const char *f = __builtin_FILE(), int l = __builtin_LINE())
{
	return cx_from_bits<T>(cx_shfl(0, mask, cx_bits(var), sizeof(T), srcLane, width, f, l));
}
template <typename T>
static inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
			       const char *f = __builtin_FILE(), int l = __builtin_LINE())
{
	return cx_from_bits<T>(cx_shfl(1, mask, cx_bits(var), sizeof(T), (int)delta, width, f, l));
}
template <typename T>
static inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
				 const char *f = __builtin_FILE(), int l = __builtin_LINE())
{
	return cx_from_bits<T>(cx_shfl(2, mask, cx_bits(var), sizeof(T), (int)delta, width, f, l));
}
template <typename T>
static inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = warpSize,
				const char *f = __builtin_FILE(), int l = __builtin_LINE())
{
	return cx_from_bits<T>(cx_shfl(3, mask, cx_bits(var), sizeof(T), laneMask, width, f, l));
}
static inline unsigned __ballot_sync(unsigned mask, int pred, const char *f = __builtin_FILE(),
				     int l = __builtin_LINE())
{
	return cx_vote(0, mask, pred, f, l);
}
static inline int __any_sync(unsigned mask, int pred, const char *f = __builtin_FILE(),
			     int l = __builtin_LINE())
{
	return (int)cx_vote(1, mask, pred, f, l);
}
static inline int __all_sync(unsigned mask, int pred, const char *f = __builtin_FILE(),
			     int l = __builtin_LINE())
{
	return (int)cx_vote(2, mask, pred, f, l);
}
template <typename T>
static inline unsigned __match_any_sync(unsigned mask, T v, const char *f = __builtin_FILE(),
					int l = __builtin_LINE())
{
	return cx_match(0, mask, cx_bits(v), nullptr, f, l);
}
template <typename T>
static inline unsigned __match_all_sync(unsigned mask, T v, int *pred,
					const char *f = __builtin_FILE(), int l = __builtin_LINE())
{
	return cx_match(1, mask, cx_bits(v), pred, f, l);
}
#define CX_REDUCE(name, op)                                                                        \
	static inline unsigned name(unsigned mask, unsigned v, const char *f = __builtin_FILE(),    \
				    int l = __builtin_LINE())                                      \
	{                                                                                          \
		return cx_reduce(op, 0, mask, v, f, l);                                            \
	}                                                                                          \
	static inline int name(unsigned mask, int v, const char *f = __builtin_FILE(),              \
			       int l = __builtin_LINE())                                           \
	{                                                                                          \
		return (int)cx_reduce(op, 1, mask, (unsigned)v, f, l);                             \
	}
CX_REDUCE(__reduce_add_sync, 0)
CX_REDUCE(__reduce_min_sync, 1)
CX_REDUCE(__reduce_max_sync, 2)
#undef CX_REDUCE
static inline unsigned __reduce_and_sync(unsigned mask, unsigned v, const char *f = __builtin_FILE(),
					 int l = __builtin_LINE())
{
	return cx_reduce(3, 0, mask, v, f, l);
}
static inline unsigned __reduce_or_sync(unsigned mask, unsigned v, const char *f = __builtin_FILE(),
					int l = __builtin_LINE())
{
	return cx_reduce(4, 0, mask, v, f, l);
}
static inline unsigned __reduce_xor_sync(unsigned mask, unsigned v, const char *f = __builtin_FILE(),
					 int l = __builtin_LINE())
{
	return cx_reduce(5, 0, mask, v, f, l);
}

/* --- atomics: the read-modify-write runs between cx_atomic_begin/end, which check the address
 * and exempt it from the race shadow; fibers are never preempted, so it is atomic. --- */
#define CX_ATOMIC(T, name, expr)                                                                   \
	static inline T name(T *p, T v, const char *f = __builtin_FILE(), int l = __builtin_LINE()) \
	{                                                                                          \
		cx_atomic_begin(p, sizeof(T), f, l);                                               \
		T old = *p;                                                                        \
		*p = (expr);                                                                       \
		cx_atomic_end();                                                                   \
		return old;                                                                        \
	}
#define CX_ATOMIC_ALL_INT(name, expr)                                                              \
	CX_ATOMIC(int, name, expr)                                                                 \
	CX_ATOMIC(unsigned, name, expr)                                                            \
	CX_ATOMIC(unsigned long long, name, expr)
CX_ATOMIC_ALL_INT(atomicAdd, old + v)
CX_ATOMIC(float, atomicAdd, old + v)
CX_ATOMIC(double, atomicAdd, old + v)
CX_ATOMIC(int, atomicSub, old - v)
CX_ATOMIC(unsigned, atomicSub, old - v)
CX_ATOMIC_ALL_INT(atomicExch, v)
CX_ATOMIC(float, atomicExch, v)
CX_ATOMIC_ALL_INT(atomicMin, old < v ? old : v)
CX_ATOMIC_ALL_INT(atomicMax, old > v ? old : v)
CX_ATOMIC(long long, atomicMin, old < v ? old : v)
CX_ATOMIC(long long, atomicMax, old > v ? old : v)
CX_ATOMIC_ALL_INT(atomicAnd, old & v)
CX_ATOMIC_ALL_INT(atomicOr, old | v)
CX_ATOMIC_ALL_INT(atomicXor, old ^ v)
CX_ATOMIC(unsigned, atomicInc, old >= v ? 0u : old + 1u)
CX_ATOMIC(unsigned, atomicDec, (old == 0u || old > v) ? v : old - 1u)
#undef CX_ATOMIC_ALL_INT
#undef CX_ATOMIC
template <typename T>
static inline T atomicCAS(T *p, T cmp, T v, const char *f = __builtin_FILE(), int l = __builtin_LINE())
{
	cx_atomic_begin(p, sizeof(T), f, l);
	T old = *p;
	if (old == cmp)
		*p = v;
	cx_atomic_end();
	return old;
}

/* Read-only and cache-hinted loads are plain loads. */
template <typename T> static inline T __ldg(const T *p) { return *p; }
template <typename T> static inline T __ldcg(const T *p) { return *p; }
template <typename T> static inline T __ldca(const T *p) { return *p; }
template <typename T> static inline T __ldcs(const T *p) { return *p; }
template <typename T> static inline T __ldlu(const T *p) { return *p; }
template <typename T> static inline T __ldcv(const T *p) { return *p; }
template <typename T> static inline void __stcs(T *p, T v) { *p = v; }
template <typename T> static inline void __stwb(T *p, T v) { *p = v; }
template <typename T> static inline void __stcg(T *p, T v) { *p = v; }

/* --- integer and float intrinsics --- */
#define CX_MINMAX(T)                                                                               \
	static inline T min(T a, T b) { return a < b ? a : b; }                                    \
	static inline T max(T a, T b) { return a > b ? a : b; }
CX_MINMAX(int)
CX_MINMAX(unsigned)
CX_MINMAX(long)
CX_MINMAX(unsigned long)
CX_MINMAX(long long)
CX_MINMAX(unsigned long long)
#undef CX_MINMAX
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
/* mixed signedness as CUDA's math_functions.hpp: unsigned wins */
static inline unsigned min(int a, unsigned b) { return min((unsigned)a, b); }
static inline unsigned min(unsigned a, int b) { return min(a, (unsigned)b); }
static inline unsigned max(int a, unsigned b) { return max((unsigned)a, b); }
static inline unsigned max(unsigned a, int b) { return max(a, (unsigned)b); }

static inline unsigned __float_as_uint(float x) { unsigned u; memcpy(&u, &x, 4); return u; }
static inline int __float_as_int(float x) { int u; memcpy(&u, &x, 4); return u; }
static inline float __uint_as_float(unsigned u) { float x; memcpy(&x, &u, 4); return x; }
static inline float __int_as_float(int u) { float x; memcpy(&x, &u, 4); return x; }
static inline long long __double_as_longlong(double x) { long long u; memcpy(&u, &x, 8); return u; }
static inline double __longlong_as_double(long long u) { double x; memcpy(&x, &u, 8); return x; }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned __brev(unsigned x)
{
	x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
	x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
	x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
	return __builtin_bswap32(x);
}
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((uint64_t)a * b) >> 32); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b)
{
	return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline int __mul24(int a, int b) { return (a << 8 >> 8) * (b << 8 >> 8); }
static inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned s)
{
	s &= 31;
	return s ? (hi << s) | (lo >> (32 - s)) : hi;
}
static inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned s)
{
	s &= 31;
	return s ? (lo >> s) | (hi << (32 - s)) : lo;
}
static inline unsigned __lanemask_lt(void) { return cx_lanemask_lt(); }

/* Single-precision intrinsics.  The host libm is at least as accurate as the device functions
 * (whose maximum errors the Programming Guide lists: expf 2 ulp, logf 1 ulp, __expf
 * 2 + floor(|1.16 x|) ulp, rsqrtf 2 ulp, __fdividef 2 ulp for |y| in [2^-126, 2^126]), so results
 * stay within the documented error; the exact bits of the device are not reproduced. */
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
/* __expf, __logf, __sinf, __cosf, __powf, __exp10f, __log2f, __log10f, __tanf and
 * __sincosf: glibc's math.h already declares them, as its own names for expf, logf, ... */
/* "for 2^126 < |y| < 2^128, __fdividef(x,y) delivers a result of zero" */
static inline float __fdividef(float x, float y)
{
	float ay = fabsf(y);
	if (ay > 0x1p126f && ay < INFINITY)
		return isinf(x) ? NAN : 0.0f * x;
	return x / y;
}
static inline float fdividef(float x, float y) { return x / y; }
static inline float __saturatef(float x) { return x != x ? 0.0f : x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __frcp_rn(float a) { return 1.0f / a; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
static inline float __int2float_rn(int x) { return (float)x; }
static inline int __float2int_rz(float x) { return (int)x; }
static inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
static inline unsigned __float2uint_rz(float x) { return (unsigned)x; }

/* --- the runtime API (exec.cpp) --- */
extern "C" {
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaGetDevice(int *dev);
cudaError_t cudaSetDevice(int dev);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int dev);
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int dev);
cudaError_t cudaRuntimeGetVersion(int *v);
cudaError_t cudaDriverGetVersion(int *v);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDeviceReset(void);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned flags);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemGetInfo(size_t *free, size_t *total);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
			    cudaStream_t s);
cudaError_t cudaMemset(void *p, int v, size_t bytes);
cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t s);
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
/* stream capture and graphs (runtime.cpp: a graph is the captured operations, replayed in
 * order on the launch's stream) */
cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g);
cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags);
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *x, cudaGraph_t g,
					  unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
cudaError_t cx_func_set_attribute(const void *func, cudaFuncAttribute attr, int value);
cudaError_t cx_func_get_attributes(cudaFuncAttributes *attr, const void *func);

/* The launcher behind cu_launch (common.h): args is a heap copy of the converted arguments that
 * invoke(kernel, args) passes to the kernel and destroy(args) frees. */
typedef void (*cx_invoke_fn)(const void *kernel, void *args);
typedef void (*cx_destroy_fn)(void *args);
cudaError_t cx_launch(const void *kernel, cx_invoke_fn invoke, void *args, cx_destroy_fn destroy,
		      dim3 grid, dim3 block, size_t smem, cudaStream_t stream);
}

/* the runtime's C++ conveniences */
template <typename T> static inline cudaError_t cudaMalloc(T **p, size_t bytes)
{
	return cudaMalloc((void **)p, bytes);
}
template <typename T> static inline cudaError_t cudaMallocHost(T **p, size_t bytes)
{
	return cudaMallocHost((void **)p, bytes);
}
template <typename T>
static inline cudaError_t cudaFuncSetAttribute(T *func, cudaFuncAttribute attr, int value)
{
	return cx_func_set_attribute((const void *)func, attr, value);
}
template <typename T>
static inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *attr, T *func)
{
	return cx_func_get_attributes(attr, (const void *)func);
}

/* Copies the arguments out of the heap tuple without instrumentation (the tuple is host
 * memory); the kernel itself, called through a pointer, is never inlined here. */
template <typename... P, size_t... I>
__attribute__((no_sanitize_thread, noinline)) void
cx_invoke_seq(void (*k)(P...), std::tuple<std::remove_cv_t<P>...> *t, std::index_sequence<I...>)
{
	k(std::get<I>(*t)...);
}
template <typename... P>
__attribute__((no_sanitize_thread, noinline)) void cx_invoke(const void *k, void *t)
{
	cx_invoke_seq<P...>((void (*)(P...))k, (std::tuple<std::remove_cv_t<P>...> *)t,
			    std::index_sequence_for<P...>{});
}
template <typename... P> void cx_destroy(void *t)
{
	delete (std::tuple<std::remove_cv_t<P>...> *)t;
}

/* kernel<<<grid, block, smem, stream>>>(args...): the arguments are converted to the kernel's
 * parameter types and copied at launch, as the device does. */
template <typename... P, typename... A>
static inline void cx_launch_kernel(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
				    cudaStream_t stream, A &&...args)
{
	static_assert(sizeof...(P) == sizeof...(A), "wrong number of kernel arguments");
	auto *t = new std::tuple<std::remove_cv_t<P>...>(std::forward<A>(args)...);
	cx_launch((const void *)kernel, &cx_invoke<P...>, t, &cx_destroy<P...>, grid, block, smem,
		  stream);
}

#endif
