/* blas - cuBLAS and cuBLASLt for the CPU executor: exactly what the CUDA backend calls, from
 * the cuBLAS reference (docs.nvidia.com/cuda/cublas).
 *
 * Both compute D = alpha op(A) op(B) + beta C on column-major matrices: element (i, j) of a
 * matrix with leading dimension ld is at i + j ld; op(X) is X or its transpose (CUBLAS_OP_T,
 * and CUBLAS_OP_C, which is the same for real types); op(A) is m x k, op(B) k x n, C and D
 * m x n.  Products are summed in fp32 in order of k (CUBLAS_COMPUTE_32F; the products of bf16
 * or fp16 inputs are exact in fp32, as in the tensor cores), then alpha and beta are applied in
 * fp32, C is not read when beta is 0 (it may hold garbage, as the BLAS convention allows), the
 * BIAS epilogue adds bias[i] to row i, and D is rounded once to its type (bf16, fp16: to nearest
 * even; fp16 beyond 65504 to +-inf, as the device's conversion does).
 * cuBLASLt also takes batches: a layout's BATCH_COUNT and STRIDED_BATCH_OFFSET (elements), the
 * bias's BIAS_BATCH_STRIDE.
 *
 * Implemented: A and B both CUDA_R_16BF or both CUDA_R_16F; C and D both of A's type or both
 * CUDA_R_32F; compute CUBLAS_COMPUTE_32F with scale type CUDA_R_32F and host alpha/beta;
 * epilogues DEFAULT, BIAS (bias of D's 16-bit type, or CUDA_R_32F), GELU, GELU_BIAS, GELU_AUX,
 * GELU_AUX_BIAS, DGELU and the bias-gradient ones BGRADA, BGRADB and DGELU_BGRAD; column order.
 * The GeLU epilogues follow the cuBLASLt reference:
 * "apply Bias and then GELU transform", the AUX variants storing the GELU input (the sum before
 * the transform, rounded to the aux type) in the auxiliary matrix, and DGELU multiplying the
 * product by the GELU gradient at the auxiliary input.  The aux matrix has D's shape, the leading
 * dimension and batch stride of EPILOGUE_AUX_LD and _BATCH_STRIDE (each a multiple of 8, the LD
 * at least D's rows, as the reference requires), its type D's (EPILOGUE_AUX_DATA_TYPE -1 or D's
 * own; others refused).
 * The GELU is the tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): the
 * reference names no formula; this is the one llm.c relies on cuBLASLt's epilogue to compute, and
 * a lent GPU is where it is confirmed (README, the executor's limits).
 * The bias-gradient epilogues write (overwrite: never accumulate) a vector at BIAS_POINTER, of
 * BIAS_DATA_TYPE (-1: D's type; D's 16-bit type or CUDA_R_32F), one per batch at
 * BIAS_BATCH_STRIDE, as the reference describes them: BGRADA sums op(A) over the GEMM's k - one
 * value per row of D (m); BGRADB sums op(B) over k - one per column of D (n); DGELU_BGRAD sums
 * the DGELU result over the columns of D - one per row (m), the gradient of the bias a forward
 * GELU_AUX_BIAS added.  The sums are of the inputs as read (BGRADA/B) or of D's fp32 value
 * before its rounding (DGELU_BGRAD), in fp32 in index order; beta blends D only, the bias
 * gradient never with what the vector held.  Whether alpha scales the gradient the reference does
 * not say, so alpha other than 1 is refused with these epilogues.
 * Anything else is refused with
 * CUBLAS_STATUS_NOT_SUPPORTED and a message, never computed some other way.  Shapes that
 * contradict each other, leading dimensions smaller than the rows, an in-place C == D with
 * different layouts, and buffers that do not fit in their device allocations are
 * CUBLAS_STATUS_INVALID_VALUE, checked when the call is made; the arithmetic runs on the stream
 * like a kernel.  The heuristic always offers one algorithm (this one) unless
 * LMTK_CUDA_EXEC_LT_NOALGO=1, which makes it offer none, to exercise a caller's fallback; and
 * LMTK_CUDA_EXEC_LT_FAIL=invalid:M,N,K (or unsupported:M,N,K) makes cublasLtMatmul answer
 * CUBLAS_STATUS_INVALID_VALUE (CUBLAS_STATUS_NOT_SUPPORTED) for every GEMM of that m, n, k, as
 * the library does for a leading dimension or alignment it rejects (a caller's bug) or an
 * epilogue it has no kernel for at that shape, so that what the caller does then is tested. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "cublasLt.h"
#include "cublas_v2.h"
#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "cx_host.h"
#include "exec.h"

struct cublasContext {
	cudaStream_t stream;
};
struct cublasLtContext {
	int magic;
};
struct cx_lt_desc {
	int32_t compute, scale, ta, tb, tc, epilogue, bias_type, pointer_mode;
	const void *bias;
	int64_t bias_stride;
	const void *aux;
	int64_t aux_ld, aux_stride;
	int32_t aux_type;
};
struct cx_lt_layout {
	int32_t type, order, batch;
	uint64_t rows, cols;
	int64_t ld, stride;
};
struct cx_lt_pref {
	uint64_t ws;
	uint32_t align[4];
};

#define ALGO_MAGIC 0x637865636c74ull /* "cxeclt": an algorithm this file handed out */

static const char *status_text(cublasStatus_t s)
{
	switch (s) {
	case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
	case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
	case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
	case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
	case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
	case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
	case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
	case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
	case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
	default: return "unknown error";
	}
}

static const char *status_name(cublasStatus_t s)
{
	switch (s) {
	case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
	case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
	case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
	case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
	case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
	case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
	case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
	case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
	case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
	default: return "CUBLAS_STATUS_UNKNOWN";
	}
}

extern "C" const char *cublasGetStatusString(cublasStatus_t s) { return status_text(s); }
extern "C" const char *cublasGetStatusName(cublasStatus_t s) { return status_name(s); }
extern "C" const char *cublasLtGetStatusString(cublasStatus_t s) { return status_text(s); }
extern "C" const char *cublasLtGetStatusName(cublasStatus_t s) { return status_name(s); }

/* says why, returns s */
static cublasStatus_t refuse(cublasStatus_t s, const char *what, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static cublasStatus_t refuse(cublasStatus_t s, const char *what, const char *fmt, ...)
{
	char msg[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	cx_say(what, "%s (%s)", msg, status_name(s));
	return s;
}

/* --- the product --- */

struct Mat {
	const void *p;
	int type;        /* CUDA_R_16BF, CUDA_R_16F or CUDA_R_32F */
	int64_t ld, stride;
};

static float load(const Mat &m, int64_t off)
{
	if (m.type == CUDA_R_16BF)
		return cx_bf2f(((const __nv_bfloat16 *)m.p)[off].__x);
	if (m.type == CUDA_R_16F)
		return cx_h2f(((const __half *)m.p)[off].__x);
	return ((const float *)m.p)[off];
}

struct Gemm {
	int ta, tb;
	int64_t m, n, k;
	int batch;
	float alpha, beta;
	Mat A, B, C, D;
	const void *bias;
	int bias_type;
	int64_t bias_stride;
	int gelu;        /* 0; 1 GELU (aux: store the input when aux.p); 2 DGELU (aux: read) */
	int bgrad;       /* 0; BG_A, BG_B: bias <- sums of op(A)/op(B) over k; BG_D: of D's rows */
	Mat aux;
};
enum { BG_A = 1, BG_B, BG_D };

/* GELU, tanh approximation, and its derivative, in fp32 */
static float gelu_f(float x)
{
	const float s = 0.7978845608028654f;   /* sqrt(2/pi) */
	return 0.5f * x * (1.0f + tanhf(s * (x + 0.044715f * x * x * x)));
}

static float dgelu_f(float x)
{
	const float s = 0.7978845608028654f;
	float t = tanhf(s * (x + 0.044715f * x * x * x));
	return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * s * (1.0f + 3.0f * 0.044715f * x * x);
}

static void store(const Mat &m, int64_t off, float v)
{
	if (m.type == CUDA_R_16BF)
		((__nv_bfloat16 *)m.p)[off].__x = cx_f2bf(v, 0);
	else if (m.type == CUDA_R_16F)
		((__half *)m.p)[off].__x = cx_f2h(v, 0);
	else
		((float *)m.p)[off] = v;
}

static size_t type_size(int t);

/* the bias-gradient vector's element o */
static void bias_store(const Gemm &g, int64_t o, float v)
{
	store(Mat{g.bias, g.bias_type, 0, 0}, o, v);
}

static void gemm_run(const Gemm &g)
{
	if (g_prof_on)
		prof_line("{\"op\":\"gemm\",\"m\":%lld,\"n\":%lld,\"k\":%lld,\"batch\":%d,"
			  "\"a\":%zu,\"b\":%zu,\"c\":%zu,\"d\":%zu,\"epilogue\":\"%s\","
			  "\"bias\":%d,\"aux\":%d}", (long long)g.m, (long long)g.n,
			  (long long)g.k, g.batch, type_size(g.A.type), type_size(g.B.type),
			  g.beta != 0.0f ? type_size(g.C.type) : (size_t)0, type_size(g.D.type),
			  g.bgrad == BG_A ? "bgrada" : g.bgrad == BG_B ? "bgradb"
			  : g.bgrad == BG_D ? "dgelu_bgrad" : g.gelu == 1 ? "gelu"
			  : g.gelu == 2 ? "dgelu" : "none", g.bias != NULL,
			  g.aux.p != NULL);
	std::vector<float> a((size_t)(g.m * g.k)), b((size_t)(g.k * g.n)), rowsum;
	for (int bt = 0; bt < g.batch; bt++) {
		/* a: op(A) row-major m x k, b: op(B) column-major (column j contiguous) */
		for (int64_t i = 0; i < g.m; i++)
			for (int64_t p = 0; p < g.k; p++)
				a[i * g.k + p] = load(g.A, bt * g.A.stride +
							       (g.ta ? p + i * g.A.ld : i + p * g.A.ld));
		for (int64_t j = 0; j < g.n; j++)
			for (int64_t p = 0; p < g.k; p++)
				b[j * g.k + p] = load(g.B, bt * g.B.stride +
							       (g.tb ? j + p * g.B.ld : p + j * g.B.ld));
		if (g.bgrad == BG_A || g.bgrad == BG_B) {   /* sums over k, in order of k */
			int64_t len = g.bgrad == BG_A ? g.m : g.n;
			const std::vector<float> &x = g.bgrad == BG_A ? a : b;
			for (int64_t i = 0; i < len; i++) {
				float t = 0.0f;
				for (int64_t p = 0; p < g.k; p++)
					t += x[i * g.k + p];
				bias_store(g, bt * g.bias_stride + i, t);
			}
		}
		rowsum.assign((size_t)g.m, 0.0f);
		for (int64_t j = 0; j < g.n; j++)
			for (int64_t i = 0; i < g.m; i++) {
				const float *ar = &a[i * g.k], *bc = &b[j * g.k];
				/* eight partial sums (vectorisable), added in a fixed order: an order
				 * of summation, as the device's is one of its own */
				float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
				int64_t p = 0;
				for (; p + 8 <= g.k; p += 8)
					for (int q = 0; q < 8; q++)
						part[q] += ar[p + q] * bc[p + q];
				for (; p < g.k; p++)
					part[p & 7] += ar[p] * bc[p];
				float acc = ((part[0] + part[1]) + (part[2] + part[3])) +
					    ((part[4] + part[5]) + (part[6] + part[7]));
				float v = g.alpha * acc;
				if (g.beta != 0.0f)
					v += g.beta * load(g.C, bt * g.C.stride + i + j * g.C.ld);
				if (g.bias && !g.bgrad) {
					int64_t bo = bt * g.bias_stride + i;
					v += g.bias_type == CUDA_R_16BF
						     ? cx_bf2f(((const __nv_bfloat16 *)g.bias)[bo].__x)
						     : g.bias_type == CUDA_R_16F
						     ? cx_h2f(((const __half *)g.bias)[bo].__x)
						     : ((const float *)g.bias)[bo];
				}
				if (g.gelu) {
					int64_t ao = bt * g.aux.stride + i + j * g.aux.ld;
					if (g.gelu == 2) {
						v *= dgelu_f(load(g.aux, ao));
					} else {
						if (g.aux.p)
							store(g.aux, ao, v);
						v = gelu_f(v);
					}
				}
				if (g.bgrad == BG_D)
					rowsum[i] += v;   /* j increasing: in order of the columns */
				store(g.D, bt * g.D.stride + i + j * g.D.ld, v);
			}
		if (g.bgrad == BG_D)
			for (int64_t i = 0; i < g.m; i++)
				bias_store(g, bt * g.bias_stride + i, rowsum[i]);
	}
}

static size_t type_size(int t)
{
	return t == CUDA_R_16BF || t == CUDA_R_16F ? 2 : t == CUDA_R_32F ? 4 : t == CUDA_R_64F ? 8 : 0;
}

/* [p, p + extent of an rows x cols matrix with ld, batches) inside device memory */
static int mat_fits(const char *what, const char *arg, const void *p, int type, int64_t rows,
		    int64_t cols, int64_t ld, int batch, int64_t stride)
{
	if (!rows || !cols)
		return 1;
	int64_t last = (rows - 1) + (cols - 1) * ld + (int64_t)(batch - 1) * stride;
	if (stride < 0 || last < 0)
		return 0;
	return cx_device_range(p, (size_t)(last + 1) * type_size(type), what, arg);
}

static const char *type_name(int t)
{
	switch (t) {
	case CUDA_R_16BF: return "CUDA_R_16BF";
	case CUDA_R_32F: return "CUDA_R_32F";
	case CUDA_R_16F: return "CUDA_R_16F";
	case CUDA_R_64F: return "CUDA_R_64F";
	default: return "another type";
	}
}

/* the type combinations this file implements (a subset of the reference's table) */
static cublasStatus_t types_ok(const char *what, int at, int bt, int ct, int dt)
{
	if ((at != CUDA_R_16BF && at != CUDA_R_16F) || bt != at)
		return refuse(CUBLAS_STATUS_NOT_SUPPORTED, what, "A is %s and B %s; implemented: "
			      "both CUDA_R_16BF or both CUDA_R_16F", type_name(at), type_name(bt));
	if (ct != dt || (dt != at && dt != CUDA_R_32F))
		return refuse(CUBLAS_STATUS_NOT_SUPPORTED, what, "C is %s and D %s with A of %s; "
			      "implemented: both %s or both CUDA_R_32F", type_name(ct),
			      type_name(dt), type_name(at), type_name(at));
	return CUBLAS_STATUS_SUCCESS;
}

/* --- cuBLAS --- */

extern "C" cublasStatus_t cublasCreate(cublasHandle_t *h)
{
	int n = 0;
	if (!h)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	*h = new cublasContext{0};
	return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasDestroy(cublasHandle_t h)
{
	if (!h)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	delete h;
	return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
	if (!h)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	h->stream = s;
	return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t submit(cudaStream_t s, const char *what, const Gemm &g)
{
	cudaError_t e = cx_enqueue(s, what, [g]() { gemm_run(g); });
	if (e != cudaSuccess)
		return refuse(CUBLAS_STATUS_EXECUTION_FAILED, what, "%s", cudaGetErrorString(e));
	return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta,
				       cublasOperation_t tb, int m, int n, int k, const void *alpha,
				       const void *A, cudaDataType_t atype, int lda, const void *B,
				       cudaDataType_t btype, int ldb, const void *beta, void *C,
				       cudaDataType_t ctype, int ldc, cublasComputeType_t compute,
				       cublasGemmAlgo_t algo)
{
	const char *what = "cublasGemmEx";
	if (!h)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (compute != CUBLAS_COMPUTE_32F)
		return refuse(CUBLAS_STATUS_NOT_SUPPORTED, what, "compute type %d; implemented: "
			      "CUBLAS_COMPUTE_32F", (int)compute);
	if (algo != CUBLAS_GEMM_DEFAULT && algo != CUBLAS_GEMM_DEFAULT_TENSOR_OP)
		return refuse(CUBLAS_STATUS_NOT_SUPPORTED, what, "algorithm %d", (int)algo);
	cublasStatus_t st = types_ok(what, atype, btype, ctype, ctype);
	if (st)
		return st;
	if (ta > CUBLAS_OP_C || tb > CUBLAS_OP_C || m < 0 || n < 0 || k < 0 || !alpha || !beta)
		return refuse(CUBLAS_STATUS_INVALID_VALUE, what, "bad arguments");
	int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
	int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
	if (lda < (ar > 1 ? ar : 1) || ldb < (br > 1 ? br : 1) || ldc < (m > 1 ? m : 1))
		return refuse(CUBLAS_STATUS_INVALID_VALUE, what, "m=%d n=%d k=%d: lda %d, ldb %d or "
			      "ldc %d is below its matrix's rows (%d, %d, %d)", m, n, k, lda, ldb, ldc,
			      ar, br, m);
	if (!m || !n)
		return CUBLAS_STATUS_SUCCESS;
	Gemm g = {};
	g.ta = ta != CUBLAS_OP_N, g.tb = tb != CUBLAS_OP_N;
	g.m = m, g.n = n, g.k = k, g.batch = 1;
	g.alpha = *(const float *)alpha; /* host pointer mode: read now */
	g.beta = *(const float *)beta;
	g.A = Mat{A, atype, lda, 0};
	g.B = Mat{B, btype, ldb, 0};
	g.C = g.D = Mat{C, ctype, ldc, 0};
	if ((k && !mat_fits(what, "A", A, atype, ar, ac, lda, 1, 0)) ||
	    (k && !mat_fits(what, "B", B, btype, br, bc, ldb, 1, 0)) ||
	    !mat_fits(what, "C", C, ctype, m, n, ldc, 1, 0))
		return CUBLAS_STATUS_INVALID_VALUE;
	return submit(h->stream, what, g);
}

/* --- cuBLASLt --- */

extern "C" cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
	int n = 0;
	if (!h)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	*h = new cublasLtContext{1};
	return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
	if (!h)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	delete h;
	return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d,
						   cublasComputeType_t compute, cudaDataType_t scale)
{
	const char *what = "cublasLtMatmulDescCreate";
	if (!d)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F)
		return refuse(CUBLAS_STATUS_NOT_SUPPORTED, what, "compute type %d, scale type %s; "
			      "implemented: CUBLAS_COMPUTE_32F with CUDA_R_32F", (int)compute,
			      type_name(scale));
	*d = new cx_lt_desc{compute, scale, CUBLAS_OP_N, CUBLAS_OP_N, CUBLAS_OP_N,
			    CUBLASLT_EPILOGUE_DEFAULT, -1, 0, NULL, 0, NULL, 0, 0, -1};
	return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d)
{
	delete d;
	return CUBLAS_STATUS_SUCCESS;
}

template <typename T>
static cublasStatus_t get(const char *what, const char *attr, T *dst, const void *buf, size_t size)
{
	if (!buf || size != sizeof(T))
		return refuse(CUBLAS_STATUS_INVALID_VALUE, what, "%s: %zu bytes given, the attribute "
			      "is %zu", attr, size, sizeof(T));
	memcpy(dst, buf, sizeof(T));
	return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
							 cublasLtMatmulDescAttributes_t attr,
							 const void *buf, size_t size)
{
	const char *what = "cublasLtMatmulDescSetAttribute";
	if (!d)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	cublasStatus_t s;
	int32_t v = 0;
	switch (attr) {
	case CUBLASLT_MATMUL_DESC_TRANSA:
	case CUBLASLT_MATMUL_DESC_TRANSB:
	case CUBLASLT_MATMUL_DESC_TRANSC:
		if ((s = get(what, "TRANS", &v, buf, size)))
			return s;
		if (v < CUBLAS_OP_N || v > CUBLAS_OP_C || (attr == CUBLASLT_MATMUL_DESC_TRANSC && v))
			return refuse(CUBLAS_STATUS_NOT_SUPPORTED, what, "transpose %d of %s", v,
				      attr == CUBLASLT_MATMUL_DESC_TRANSC ? "C" : "A or B");
		(attr == CUBLASLT_MATMUL_DESC_TRANSA ? d->ta
						      : attr == CUBLASLT_MATMUL_DESC_TRANSB ? d->tb : d->tc) = v;
		return CUBLAS_STATUS_SUCCESS;
	case CUBLASLT_MATMUL_DESC_EPILOGUE:
		if ((s = get(what, "EPILOGUE", &v, buf, size)))
			return s;
		if (v != CUBLASLT_EPILOGUE_DEFAULT && v != CUBLASLT_EPILOGUE_BIAS &&
		    v != CUBLASLT_EPILOGUE_GELU && v != CUBLASLT_EPILOGUE_GELU_BIAS &&
		    v != CUBLASLT_EPILOGUE_GELU_AUX && v != CUBLASLT_EPILOGUE_GELU_AUX_BIAS &&
		    v != CUBLASLT_EPILOGUE_DGELU && v != CUBLASLT_EPILOGUE_DGELU_BGRAD &&
		    v != CUBLASLT_EPILOGUE_BGRADA && v != CUBLASLT_EPILOGUE_BGRADB)
			return refuse(CUBLAS_STATUS_NOT_SUPPORTED, what, "epilogue %d; implemented: "
				      "DEFAULT, BIAS, GELU, GELU_BIAS, GELU_AUX, GELU_AUX_BIAS, DGELU, "
				      "DGELU_BGRAD, BGRADA, BGRADB", v);
		d->epilogue = v;
		return CUBLAS_STATUS_SUCCESS;
	case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
		return get(what, "BIAS_POINTER", &d->bias, buf, size);
	case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
		return get(what, "EPILOGUE_AUX_POINTER", &d->aux, buf, size);
	case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
		return get(what, "EPILOGUE_AUX_LD", &d->aux_ld, buf, size);
	case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE:
		return get(what, "EPILOGUE_AUX_BATCH_STRIDE", &d->aux_stride, buf, size);
	case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
		return get(what, "EPILOGUE_AUX_DATA_TYPE", &d->aux_type, buf, size);
	case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE:
		return get(what, "BIAS_BATCH_STRIDE", &d->bias_stride, buf, size);
	case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
		if ((s = get(what, "BIAS_DATA_TYPE", &v, buf, size)))
			return s;
		if (v != -1 && v != CUDA_R_16BF && v != CUDA_R_16F && v != CUDA_R_32F)
			return refuse(CUBLAS_STATUS_NOT_SUPPORTED, what, "bias type %s", type_name(v));
		d->bias_type = v;
		return CUBLAS_STATUS_SUCCESS;
	case CUBLASLT_MATMUL_DESC_POINTER_MODE:
		if ((s = get(what, "POINTER_MODE", &v, buf, size)))
			return s;
		if (v != 0)
			return refuse(CUBLAS_STATUS_NOT_SUPPORTED, what, "pointer mode %d; "
				      "implemented: host alpha and beta (0)", v);
		return CUBLAS_STATUS_SUCCESS;
	case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
	case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
		if ((s = get(what, "COMPUTE/SCALE_TYPE", &v, buf, size)))
			return s;
		if (v != (attr == CUBLASLT_MATMUL_DESC_COMPUTE_TYPE ? (int)CUBLAS_COMPUTE_32F : (int)CUDA_R_32F))
			return refuse(CUBLAS_STATUS_NOT_SUPPORTED, what, "compute/scale type %d", v);
		return CUBLAS_STATUS_SUCCESS;
	}
	return refuse(CUBLAS_STATUS_NOT_SUPPORTED, what, "attribute %d is not implemented", (int)attr);
}

extern "C" cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l,
						     cudaDataType_t type, uint64_t rows,
						     uint64_t cols, int64_t ld)
{
	if (!l)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (!type_size(type))
		return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatrixLayoutCreate", "type %d",
			      (int)type);
	*l = new cx_lt_layout{type, CUBLASLT_ORDER_COL, 1, rows, cols, ld, 0};
	return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l)
{
	delete l;
	return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l,
							   cublasLtMatrixLayoutAttribute_t attr,
							   const void *buf, size_t size)
{
	const char *what = "cublasLtMatrixLayoutSetAttribute";
	if (!l)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	cublasStatus_t s;
	switch (attr) {
	case CUBLASLT_MATRIX_LAYOUT_TYPE: {
		uint32_t v = 0;
		if ((s = get(what, "TYPE", &v, buf, size)))
			return s;
		l->type = (int32_t)v;
		return CUBLAS_STATUS_SUCCESS;
	}
	case CUBLASLT_MATRIX_LAYOUT_ORDER: {
		int32_t v = 0;
		if ((s = get(what, "ORDER", &v, buf, size)))
			return s;
		if (v != CUBLASLT_ORDER_COL)
			return refuse(CUBLAS_STATUS_NOT_SUPPORTED, what, "order %d; implemented: "
				      "CUBLASLT_ORDER_COL", v);
		return CUBLAS_STATUS_SUCCESS;
	}
	case CUBLASLT_MATRIX_LAYOUT_ROWS:
		return get(what, "ROWS", &l->rows, buf, size);
	case CUBLASLT_MATRIX_LAYOUT_COLS:
		return get(what, "COLS", &l->cols, buf, size);
	case CUBLASLT_MATRIX_LAYOUT_LD:
		return get(what, "LD", &l->ld, buf, size);
	case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
		return get(what, "BATCH_COUNT", &l->batch, buf, size);
	case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
		return get(what, "STRIDED_BATCH_OFFSET", &l->stride, buf, size);
	}
	return refuse(CUBLAS_STATUS_NOT_SUPPORTED, what, "attribute %d is not implemented", (int)attr);
}

extern "C" cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p)
{
	if (!p)
		return CUBLAS_STATUS_INVALID_VALUE;
	*p = new cx_lt_pref{0, {256, 256, 256, 256}};
	return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p)
{
	delete p;
	return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
							       cublasLtMatmulPreferenceAttributes_t attr,
							       const void *buf, size_t size)
{
	const char *what = "cublasLtMatmulPreferenceSetAttribute";
	if (!p)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	switch (attr) {
	case CUBLASLT_MATMUL_PREF_SEARCH_MODE: {
		uint32_t v = 0;
		cublasStatus_t s = get(what, "SEARCH_MODE", &v, buf, size);
		return s ? s : v ? refuse(CUBLAS_STATUS_NOT_SUPPORTED, what, "search mode %u", v) : s;
	}
	case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
		return get(what, "MAX_WORKSPACE_BYTES", &p->ws, buf, size);
	case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
	case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
	case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
	case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
		return get(what, "MIN_ALIGNMENT", &p->align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES],
			   buf, size);
	}
	return refuse(CUBLAS_STATUS_NOT_SUPPORTED, what, "attribute %d is not implemented", (int)attr);
}

/* The problem described by the descriptors, checked; pointers are checked by the caller. */
static cublasStatus_t lt_problem(const char *what, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
				 cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
				 cublasLtMatrixLayout_t dl, Gemm *g)
{
	if (!d || !a || !b || !c || !dl)
		return refuse(CUBLAS_STATUS_INVALID_VALUE, what, "a descriptor is NULL");
	cublasStatus_t s = types_ok(what, a->type, b->type, c->type, dl->type);
	if (s)
		return s;
	int ta = d->ta != CUBLAS_OP_N, tb = d->tb != CUBLAS_OP_N;
	int64_t m = (int64_t)dl->rows, n = (int64_t)dl->cols;
	int64_t k = ta ? (int64_t)a->rows : (int64_t)a->cols;
	int64_t am = ta ? (int64_t)a->cols : (int64_t)a->rows;
	int64_t bk = tb ? (int64_t)b->cols : (int64_t)b->rows;
	int64_t bn = tb ? (int64_t)b->rows : (int64_t)b->cols;
	if (am != m || bn != n || bk != k || c->rows != dl->rows || c->cols != dl->cols)
		return refuse(CUBLAS_STATUS_INVALID_VALUE, what, "shapes do not agree: op(A) %lldx%lld, "
			      "op(B) %lldx%lld, C %llux%llu, D %llux%llu", (long long)am,
			      (long long)k, (long long)bk, (long long)bn,
			      (unsigned long long)c->rows, (unsigned long long)c->cols,
			      (unsigned long long)dl->rows, (unsigned long long)dl->cols);
	const cx_lt_layout *ls[4] = {a, b, c, dl};
	for (int i = 0; i < 4; i++) {
		if (ls[i]->ld < (int64_t)(ls[i]->rows ? ls[i]->rows : 1))
			return refuse(CUBLAS_STATUS_INVALID_VALUE, what, "matrix %c: leading dimension "
				      "%lld is below its %llu rows", "ABCD"[i], (long long)ls[i]->ld,
				      (unsigned long long)ls[i]->rows);
		if (ls[i]->batch != dl->batch)
			return refuse(CUBLAS_STATUS_INVALID_VALUE, what, "matrix %c has %d batches, D "
				      "%d", "ABCD"[i], ls[i]->batch, dl->batch);
		if (ls[i]->batch < 1 || (ls[i]->batch > 1 && ls[i]->stride < 0))
			return refuse(CUBLAS_STATUS_INVALID_VALUE, what, "matrix %c: batch count %d, "
				      "stride %lld", "ABCD"[i], ls[i]->batch, (long long)ls[i]->stride);
	}
	int epi = d->epilogue;
	int bgrad = epi == CUBLASLT_EPILOGUE_BGRADA ? BG_A : epi == CUBLASLT_EPILOGUE_BGRADB ? BG_B
		    : epi == CUBLASLT_EPILOGUE_DGELU_BGRAD ? BG_D : 0;
	int bias = epi == CUBLASLT_EPILOGUE_BIAS || epi == CUBLASLT_EPILOGUE_GELU_BIAS ||
		   epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || bgrad;
	int gelu = epi == CUBLASLT_EPILOGUE_DGELU || epi == CUBLASLT_EPILOGUE_DGELU_BGRAD ? 2
		   : (epi & CUBLASLT_EPILOGUE_GELU) ? 1 : 0;
	int aux = epi == CUBLASLT_EPILOGUE_GELU_AUX || epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
		  epi == CUBLASLT_EPILOGUE_DGELU || epi == CUBLASLT_EPILOGUE_DGELU_BGRAD;
	if (aux) {
		if (d->aux_type != -1 && d->aux_type != dl->type)
			return refuse(CUBLAS_STATUS_NOT_SUPPORTED, what, "aux type %s with D of %s",
				      type_name(d->aux_type), type_name(dl->type));
		if (d->aux_ld % 8 || d->aux_ld < m)
			return refuse(CUBLAS_STATUS_INVALID_VALUE, what, "EPILOGUE_AUX_LD %lld: must be a "
				      "multiple of 8 and at least D's %lld rows", (long long)d->aux_ld,
				      (long long)m);
		if (dl->batch > 1 && d->aux_stride % 8)
			return refuse(CUBLAS_STATUS_INVALID_VALUE, what, "EPILOGUE_AUX_BATCH_STRIDE %lld: "
				      "must be a multiple of 8", (long long)d->aux_stride);
	}
	int bt = d->bias_type == -1 ? dl->type : d->bias_type;
	int b16 = (bt == CUDA_R_16BF || bt == CUDA_R_16F) && dl->type == bt;
	if (bias && !(bt == CUDA_R_32F || b16))
		return refuse(CUBLAS_STATUS_NOT_SUPPORTED, what, "bias of %s with D of %s",
			      type_name(bt), type_name(dl->type));
	memset(g, 0, sizeof *g);
	g->ta = ta, g->tb = tb;
	g->m = m, g->n = n, g->k = k;
	g->batch = dl->batch;
	g->bias_type = bt;
	g->bias_stride = d->bias_stride;
	g->A = Mat{NULL, a->type, a->ld, a->stride};
	g->B = Mat{NULL, b->type, b->ld, b->stride};
	g->C = Mat{NULL, c->type, c->ld, c->stride};
	g->D = Mat{NULL, dl->type, dl->ld, dl->stride};
	g->bias = bias ? (const void *)1 : NULL; /* set by the caller */
	g->gelu = gelu;
	g->bgrad = bgrad;
	g->aux = Mat{aux ? (const void *)1 : NULL, dl->type, d->aux_ld, d->aux_stride}; /* ditto */
	return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
	cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
	cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dl,
	cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t *results,
	int *returned)
{
	const char *what = "cublasLtMatmulAlgoGetHeuristic";
	if (!h)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!pref || requested < 1 || !results || !returned)
		return refuse(CUBLAS_STATUS_INVALID_VALUE, what, "bad arguments");
	*returned = 0;
	Gemm g;
	cublasStatus_t s = lt_problem(what, d, a, b, c, dl, &g);
	if (s)
		return s;
	const char *no = getenv("LMTK_CUDA_EXEC_LT_NOALGO");
	if (no && *no && strcmp(no, "0"))
		return CUBLAS_STATUS_NOT_SUPPORTED; /* "no algorithm", as for an awkward shape */
	memset(&results[0], 0, sizeof results[0]);
	results[0].algo.data[0] = ALGO_MAGIC;
	results[0].workspaceSize = 0;
	results[0].state = CUBLAS_STATUS_SUCCESS;
	results[0].wavesCount = 1.0f;
	*returned = 1;
	return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
					 const void *alpha, const void *A,
					 cublasLtMatrixLayout_t adesc, const void *B,
					 cublasLtMatrixLayout_t bdesc, const void *beta,
					 const void *C, cublasLtMatrixLayout_t cdesc, void *D,
					 cublasLtMatrixLayout_t ddesc,
					 const cublasLtMatmulAlgo_t *algo, void *ws, size_t wsbytes,
					 cudaStream_t stream)
{
	const char *what = "cublasLtMatmul";
	if (!h)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!alpha || !beta)
		return refuse(CUBLAS_STATUS_INVALID_VALUE, what, "alpha or beta is NULL");
	if (algo && algo->data[0] != ALGO_MAGIC)
		return refuse(CUBLAS_STATUS_INVALID_VALUE, what, "the algorithm did not come from "
			      "cublasLtMatmulAlgoGetHeuristic");
	Gemm g;
	cublasStatus_t s = lt_problem(what, d, adesc, bdesc, cdesc, ddesc, &g);
	if (s)
		return s;
	const char *inj = getenv("LMTK_CUDA_EXEC_LT_FAIL");
	long long fm, fn, fk;
	char fs[16];
	if (inj && sscanf(inj, "%15[a-z]:%lld,%lld,%lld", fs, &fm, &fn, &fk) == 4 &&
	    fm == g.m && fn == g.n && fk == g.k &&
	    (!strcmp(fs, "invalid") || !strcmp(fs, "unsupported")))
		return refuse(!strcmp(fs, "invalid") ? CUBLAS_STATUS_INVALID_VALUE
						     : CUBLAS_STATUS_NOT_SUPPORTED,
			      what, "m=%lld n=%lld k=%lld, as LMTK_CUDA_EXEC_LT_FAIL says", fm, fn, fk);
	if (C == D && (cdesc->ld != ddesc->ld || cdesc->stride != ddesc->stride))
		return refuse(CUBLAS_STATUS_INVALID_VALUE, what, "in place (C == D) with different "
			      "layouts: ldc %lld, ldd %lld", (long long)cdesc->ld,
			      (long long)ddesc->ld);
	if (g.bias && !d->bias)
		return refuse(CUBLAS_STATUS_INVALID_VALUE, what, "epilogue %d without "
			      "CUBLASLT_MATMUL_DESC_BIAS_POINTER", d->epilogue);
	if (g.aux.p && !d->aux)
		return refuse(CUBLAS_STATUS_INVALID_VALUE, what, "epilogue %d without "
			      "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER", d->epilogue);
	g.aux.p = g.aux.p ? d->aux : NULL;
	g.alpha = *(const float *)alpha;
	g.beta = *(const float *)beta;
	if (g.bgrad && g.alpha != 1.0f)   /* whether alpha scales the gradient: not documented */
		return refuse(CUBLAS_STATUS_NOT_SUPPORTED, what, "epilogue %d with alpha %g; "
			      "implemented: alpha 1", d->epilogue, (double)g.alpha);
	g.A.p = A, g.B.p = B, g.C.p = C, g.D.p = D;
	g.bias = g.bias ? d->bias : NULL;
	int64_t ar = (int64_t)adesc->rows, ac = (int64_t)adesc->cols;
	int64_t br = (int64_t)bdesc->rows, bc = (int64_t)bdesc->cols;
	if (!g.m || !g.n)
		return CUBLAS_STATUS_SUCCESS;
	if ((g.k && !mat_fits(what, "A", A, adesc->type, ar, ac, adesc->ld, g.batch, adesc->stride)) ||
	    (g.k && !mat_fits(what, "B", B, bdesc->type, br, bc, bdesc->ld, g.batch, bdesc->stride)) ||
	    (g.beta != 0.0f &&
	     !mat_fits(what, "C", C, cdesc->type, g.m, g.n, cdesc->ld, g.batch, cdesc->stride)) ||
	    !mat_fits(what, "D", D, ddesc->type, g.m, g.n, ddesc->ld, g.batch, ddesc->stride) ||
	    (g.bias && !cx_device_range(g.bias, (size_t)((g.batch - 1) * g.bias_stride +
							 (g.bgrad == BG_B ? g.n : g.m)) *
							 type_size(g.bias_type), what, "bias")) ||
	    (g.aux.p && !mat_fits(what, "aux", g.aux.p, g.aux.type, g.m, g.n, g.aux.ld, g.batch,
				  g.aux.stride)) ||
	    (wsbytes && !cx_device_range(ws, wsbytes, what, "workspace")))
		return CUBLAS_STATUS_INVALID_VALUE;
	return submit(stream, what, g);
}
