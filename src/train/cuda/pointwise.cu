/* pointwise - element-wise kernels: GeLU (tanh and erf), tanh, residual add with dropout,
 * dropout, add, bias add, strided rows (BERT's pooler) and the fp32 <-> activation (bf16 or fp16)
 * conversions.
 *
 * All are memory-bound, so the only design question is access width: a thread handles "units" of
 * V elements, V = 8 (one 16-byte load per activation operand) when n is a multiple of 8 and every
 * pointer is 16-byte aligned, else V = 1; grid-stride loops with the grid capped at 32 blocks per
 * SM.  Arithmetic is fp32 with one rounding to the activation type at the store.
 *
 * Dropout draws element i's mask with philox_keep(seed, i, p) from philox.h, the same function
 * the CPU backend calls, so both backends drop the same elements, and the backward regenerates
 * the forward's mask from (seed, i) instead of storing it.  Element i is the flat index into the
 * buffer handed to the op (the model chooses seed and buffer per dropout site).  p = 0 skips the
 * generator: philox_keep would return exactly 1.0 for every element.  Each element calls
 * philox_keep on its own (four elements share one Philox block, so this does 4x the integer work
 * it could); it is cheap next to the memory traffic and keeps the mask definition in one place.
 *
 * GeLU is the tanh approximation (Megatron's fused bias-gelu, HF BLOOM):
 *   y = x/2 (1 + tanh(k (x + 0.044715 x^3))), k = sqrt(2/pi),
 *   dy/dx = (1 + t)/2 + x/2 (1 - t^2) k (1 + 3 * 0.044715 x^2), t = tanh(...). */
#include "train/cuda/common.h"
#include "train/model/philox.h"

#define PW_T 256
#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_C 0.044715f

#define FOR_UNITS(u, units)                                                                        \
	for (size_t u = blockIdx.x * (size_t)blockDim.x + threadIdx.x; u < (units);                \
	     u += (size_t)gridDim.x * blockDim.x)

/* out(n) = gelu(inp(n)) */
template <int V, typename A> __global__ void gelu_fwd_k(A *out, const A *inp, size_t units)
{
	FOR_UNITS(u, units)
	{
		float x[V], y[V];
		ld_act<V>(x, inp + u * V);
#pragma unroll
		for (int k = 0; k < V; k++) {
			float v = x[k];
			float t = tanhf(GELU_K * (v + GELU_C * v * v * v));
			y[k] = 0.5f * v * (1.0f + t);
		}
		st_act<V>(out + u * V, y);
	}
}

/* dinp(n) = dout(n) * gelu'(inp(n)) */
template <int V, typename A>
__global__ void gelu_bwd_k(A *dinp, const A *inp, const A *dout, size_t units)
{
	FOR_UNITS(u, units)
	{
		float x[V], g[V], d[V];
		ld_act<V>(x, inp + u * V);
		ld_act<V>(g, dout + u * V);
#pragma unroll
		for (int k = 0; k < V; k++) {
			float v = x[k];
			float t = tanhf(GELU_K * (v + GELU_C * v * v * v));
			float dt = GELU_K * (1.0f + 3.0f * GELU_C * v * v); /* d(tanh arg)/dx */
			float dy = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dt;
			d[k] = g[k] * dy;
		}
		st_act<V>(dinp + u * V, d);
	}
}

/* BERT's heads: the exact GeLU x Phi(x) (torch.nn.functional.gelu, erf) and tanh, forward and
 * backward; the backward of tanh from its output */
template <int V, typename A> __global__ void gelu_erf_fwd_k(A *out, const A *inp, size_t units)
{
	FOR_UNITS(u, units)
	{
		float x[V];
		ld_act<V>(x, inp + u * V);
#pragma unroll
		for (int k = 0; k < V; k++)
			x[k] = 0.5f * x[k] * (1.0f + erff(x[k] * 0.70710678118654752f));
		st_act<V>(out + u * V, x);
	}
}

template <int V, typename A>
__global__ void gelu_erf_bwd_k(A *dinp, const A *inp, const A *dout, size_t units)
{
	FOR_UNITS(u, units)
	{
		float x[V], g[V];
		ld_act<V>(x, inp + u * V);
		ld_act<V>(g, dout + u * V);
#pragma unroll
		for (int k = 0; k < V; k++) {
			float v = x[k];
			float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752f));
			float pdf = 0.39894228040143268f * expf(-0.5f * v * v);
			g[k] *= cdf + v * pdf;
		}
		st_act<V>(dinp + u * V, g);
	}
}

template <int V, typename A> __global__ void tanh_fwd_k(A *out, const A *inp, size_t units)
{
	FOR_UNITS(u, units)
	{
		float x[V];
		ld_act<V>(x, inp + u * V);
#pragma unroll
		for (int k = 0; k < V; k++)
			x[k] = tanhf(x[k]);
		st_act<V>(out + u * V, x);
	}
}

template <int V, typename A>
__global__ void tanh_bwd_k(A *dinp, const A *out, const A *dout, size_t units)
{
	FOR_UNITS(u, units)
	{
		float y[V], g[V];
		ld_act<V>(y, out + u * V);
		ld_act<V>(g, dout + u * V);
#pragma unroll
		for (int k = 0; k < V; k++)
			g[k] *= 1.0f - y[k] * y[k];
		st_act<V>(dinp + u * V, g);
	}
}

/* out(rows,C) = inp[r*stride + c]; and dinp[r*stride + c] += dout(r,c): each element once */
template <typename A>
__global__ void gather_rows_k(A *out, const A *inp, int C, size_t stride, size_t n)
{
	FOR_UNITS(i, n)
	out[i] = inp[i / (size_t)C * stride + i % (size_t)C];
}

template <typename A>
__global__ void scatter_add_rows_k(A *dinp, const A *dout, int C, size_t stride, size_t n)
{
	FOR_UNITS(i, n)
	{
		A *d = dinp + i / (size_t)C * stride + i % (size_t)C;
		*d = f_act<A>(act_f(*d) + act_f(dout[i]));
	}
}

/* out(n) = res(n) + x(n) * keep(seed, off + i, p) */
template <int V, typename A>
__global__ void residual_fwd_k(A *out, const A *res, const A *x, size_t units, float p,
			       uint64_t seed, uint64_t off)
{
	FOR_UNITS(u, units)
	{
		float r[V], xv[V];
		ld_act<V>(r, res + u * V);
		ld_act<V>(xv, x + u * V);
#pragma unroll
		for (int k = 0; k < V; k++) {
			float keep = p > 0.0f ? philox_keep(seed, off + (uint64_t)u * V + k, p) : 1.0f;
			r[k] += xv[k] * keep;
		}
		st_act<V>(out + u * V, r);
	}
}

/* dst(n) = src(n) * keep(seed, off + i, p); dst may be src */
template <int V, typename A>
__global__ void dropout_k(A *dst, const A *src, size_t units, float p, uint64_t seed,
			  uint64_t off)
{
	FOR_UNITS(u, units)
	{
		float xv[V];
		ld_act<V>(xv, src + u * V);
#pragma unroll
		for (int k = 0; k < V; k++)
			xv[k] *= philox_keep(seed, off + (uint64_t)u * V + k, p);
		st_act<V>(dst + u * V, xv);
	}
}

/* acc(n) += x(n) */
template <int V, typename A> __global__ void add_k(A *acc, const A *x, size_t units)
{
	FOR_UNITS(u, units)
	{
		float a[V], b[V];
		ld_act<V>(a, acc + u * V);
		ld_act<V>(b, x + u * V);
#pragma unroll
		for (int k = 0; k < V; k++)
			a[k] += b[k];
		st_act<V>(acc + u * V, a);
	}
}

/* dst(n) = src(n) in the activation type, rounded to nearest even (fp16: beyond 65504 to inf) */
template <int V, typename A> __global__ void f32_to_act_k(A *dst, const float *src, size_t units)
{
	FOR_UNITS(u, units)
	{
		float f[V];
		ld_f32<V>(f, src + u * V);
		st_act<V>(dst + u * V, f);
	}
}

/* dst(n) = float(src(n)), exact */
template <int V, typename A> __global__ void act_to_f32_k(float *dst, const A *src, size_t units)
{
	FOR_UNITS(u, units)
	{
		float f[V];
		ld_act<V>(f, src + u * V);
		st_f32<V>(dst + u * V, f);
	}
}

/* out(N,OC) += bias(OC) broadcast over rows (the cublasGemmEx fallback of matmul_fwd) */
template <typename A> __global__ void bias_add_k(A *out, const A *bias, size_t n, int OC)
{
	FOR_UNITS(i, n)
	{
		float v = act_f(out[i]) + act_f(bias[i % (size_t)OC]);
		out[i] = f_act<A>(v);
	}
}

/* Launches kern<8, A> when vec, else kern<1, A>, over `units` work items (n/8 or n), for the
 * backend's activation type A; the arguments name A for their casts. */
#define PW_LAUNCH(kern, vec, units, ...)                                                           \
	CU_ACT(A, if (vec) cu_launch(kern<8, A>, cu_grid(units, PW_T), PW_T, 0, cu.stream,         \
				     __VA_ARGS__);                                               \
		  else cu_launch(kern<1, A>, cu_grid(units, PW_T), PW_T, 0, cu.stream,           \
				 __VA_ARGS__);                                                   \
		  CU_LAUNCHED(#kern))

void cu_gelu_fwd(void *out, const void *inp, size_t n)
{
	CU_ENTER();
	if (!n)
		return;
	int v = cu_vec8(n, out, inp);
	size_t units = v ? n / 8 : n;
	PW_LAUNCH(gelu_fwd_k, v, units, (A *)out, (const A *)inp, units);
}

void cu_gelu_bwd(void *dinp, const void *inp, const void *dout, size_t n)
{
	CU_ENTER();
	if (!n)
		return;
	int v = cu_vec8(n, dinp, inp, dout);
	size_t units = v ? n / 8 : n;
	PW_LAUNCH(gelu_bwd_k, v, units, (A *)dinp, (const A *)inp, (const A *)dout, units);
}

void cu_gelu_erf_fwd(void *out, const void *inp, size_t n)
{
	CU_ENTER();
	if (!n)
		return;
	int v = cu_vec8(n, out, inp);
	size_t units = v ? n / 8 : n;
	PW_LAUNCH(gelu_erf_fwd_k, v, units, (A *)out, (const A *)inp, units);
}

void cu_gelu_erf_bwd(void *dinp, const void *inp, const void *dout, size_t n)
{
	CU_ENTER();
	if (!n)
		return;
	int v = cu_vec8(n, dinp, inp, dout);
	size_t units = v ? n / 8 : n;
	PW_LAUNCH(gelu_erf_bwd_k, v, units, (A *)dinp, (const A *)inp, (const A *)dout, units);
}

void cu_tanh_fwd(void *out, const void *inp, size_t n)
{
	CU_ENTER();
	if (!n)
		return;
	int v = cu_vec8(n, out, inp);
	size_t units = v ? n / 8 : n;
	PW_LAUNCH(tanh_fwd_k, v, units, (A *)out, (const A *)inp, units);
}

void cu_tanh_bwd(void *dinp, const void *out, const void *dout, size_t n)
{
	CU_ENTER();
	if (!n)
		return;
	int v = cu_vec8(n, dinp, out, dout);
	size_t units = v ? n / 8 : n;
	PW_LAUNCH(tanh_bwd_k, v, units, (A *)dinp, (const A *)out, (const A *)dout, units);
}

void cu_gather_rows(void *out, const void *inp, int rows, int C, size_t stride)
{
	CU_ENTER();
	size_t n = (size_t)rows * C;
	if (!n)
		return;
	CU_ACT(A, cu_launch(gather_rows_k<A>, cu_grid(n, PW_T), PW_T, 0, cu.stream, (A *)out,
			    (const A *)inp, C, stride, n));
	CU_LAUNCHED("gather_rows");
}

void cu_scatter_add_rows(void *dinp, const void *dout, int rows, int C, size_t stride)
{
	CU_ENTER();
	size_t n = (size_t)rows * C;
	if (!n)
		return;
	CU_ACT(A, cu_launch(scatter_add_rows_k<A>, cu_grid(n, PW_T), PW_T, 0, cu.stream, (A *)dinp,
			    (const A *)dout, C, stride, n));
	CU_LAUNCHED("scatter_add_rows");
}

void cu_residual_fwd(void *out, const void *res, const void *x, size_t n, float p, uint64_t seed,
		     uint64_t off)
{
	CU_ENTER();
	if (!n)
		return;
	int v = cu_vec8(n, out, res, x);
	size_t units = v ? n / 8 : n;
	PW_LAUNCH(residual_fwd_k, v, units, (A *)out, (const A *)res, (const A *)x, units,
		  p, seed, off);
}

void cu_dropout_bwd(void *dx, const void *dout, size_t n, float p, uint64_t seed, uint64_t off)
{
	CU_ENTER();
	if (!n)
		return;
	if (p <= 0.0f) { /* mask of all ones: a copy */
		if (dx != dout && cu.graph_mode != OPS_GRAPH_FILL)
			CU_CHECK(cudaMemcpyAsync(dx, dout, n * 2 /* bf16, f16 */,
						 cudaMemcpyDeviceToDevice, cu.stream));
		return;
	}
	int v = cu_vec8(n, dx, dout);
	size_t units = v ? n / 8 : n;
	PW_LAUNCH(dropout_k, v, units, (A *)dx, (const A *)dout, units, p, seed, off);
}

void cu_dropout_fwd(void *x, size_t n, float p, uint64_t seed, uint64_t off)
{
	CU_ENTER();
	if (!n || p <= 0.0f)
		return;
	int v = cu_vec8(n, x);
	size_t units = v ? n / 8 : n;
	PW_LAUNCH(dropout_k, v, units, (A *)x, (const A *)x, units, p, seed, off);
}

void cu_add(void *acc, const void *x, size_t n)
{
	CU_ENTER();
	if (!n)
		return;
	int v = cu_vec8(n, acc, x);
	size_t units = v ? n / 8 : n;
	PW_LAUNCH(add_k, v, units, (A *)acc, (const A *)x, units);
}

void cu_f32_to_act(void *dst, const float *src, size_t n)
{
	CU_ENTER();
	if (!n)
		return;
	int v = cu_vec8(n, dst, src);
	size_t units = v ? n / 8 : n;
	PW_LAUNCH(f32_to_act_k, v, units, (A *)dst, src, units);
}

void cu_act_to_f32(float *dst, const void *src, size_t n)
{
	CU_ENTER();
	if (!n)
		return;
	int v = cu_vec8(n, dst, src);
	size_t units = v ? n / 8 : n;
	PW_LAUNCH(act_to_f32_k, v, units, dst, (const A *)src, units);
}

void cu_bias_add(void *out, const void *bias, int N, int OC)
{
	size_t n = (size_t)N * OC;
	if (!n)
		return;
	CU_ACT(A, cu_launch(bias_add_k<A>, cu_grid(n, PW_T), PW_T, 0, cu.stream, (A *)out,
			    (const A *)bias, n, OC));
	CU_LAUNCHED("bias_add");
}
