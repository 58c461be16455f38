/* matmul - the linear layers on cuBLASLt: y = x W^T + b and its two gradients.
 *
 * Row-major to column-major.  lmtk stores every matrix row-major, weights as [out, in]; cuBLAS
 * is column-major.  A row-major (R,C) buffer read column-major is its transpose, a (C x R)
 * matrix with leading dimension C, so each product is computed transposed:
 *
 *   forward  out(N,OC) = inp(N,IC) w(OC,IC)^T
 *            as out^T (OC x N) = op_T(w: IC x OC) inp^T (IC x N)
 *            m=OC n=N k=IC, A=w (T, lda IC), B=inp (N, ldb IC), D=out (ldd OC); bias epilogue
 *   dinp     dinp(N,IC) = dout(N,OC) w(OC,IC)
 *            as dinp^T (IC x N) = w^T (IC x OC) dout^T (OC x N)
 *            m=IC n=N k=OC, A=w (N, lda IC), B=dout (N, ldb OC), D=dinp (ldd IC)
 *   dw       dw(OC,IC) += dout^T(OC,N) inp(N,IC)
 *            as dw^T (IC x OC) += inp^T (IC x N) op_T(dout^T: OC x N)
 *            m=IC n=OC k=N, A=inp (N, lda IC), B=dout (T, ldb OC), D=C=dw fp32 (ldd IC), beta 1
 *
 * Precision: A and B are activations (bf16, or fp16 under --fp16: CUDA_R_16BF / CUDA_R_16F, the
 * same mapping either way), the accumulation fp32 (CUBLAS_COMPUTE_32F, as Megatron's fp16 GEMMs);
 * out and dinp are written in the activation type, dw is read and written fp32 in place (beta =
 * 1), so micro-batches accumulate in fp32 without a 16-bit round trip.  The bias is added in the
 * GEMM epilogue (CUBLASLT_EPILOGUE_BIAS, bias in the output's type) before the single rounding
 * to the output type; in fp16 a sum beyond 65504 becomes inf there, the overflow the loss
 * scaler is for.
 *
 * Bias gradients ride in the weight gradient's GEMM: dbias(OC) = sum over the N rows of dout is
 * what CUBLASLT_EPILOGUE_BGRADB computes - the sum of op(B) over the GEMM's k (= N), one value
 * per column of D (n = OC) - while the GEMM reads dout for dW anyway, so no separate pass reads
 * dout again.  The epilogue overwrites its vector (beta blends D only), and the gradient must
 * accumulate over micro-batches in fp32, so the vector is an fp32 scratch (BIAS_DATA_TYPE
 * CUDA_R_32F, D's type) that cu_vec_acc (reduce.cu, one small launch) then adds into dbias,
 * element by element - deterministic, as the GEMM's algorithm is fixed per shape.  The MLP's
 * first bias could equally come from CUBLASLT_EPILOGUE_DGELU_BGRAD on the dinp GEMM above it
 * (the sum of the DGELU output over D's columns), but that sums the fp32 values before their
 * rounding while dW uses the rounded ones, and it would move the gradient into another op's
 * call; BGRADB on FC1's own dW GEMM costs the same and keeps every bias in its own layer's call.
 * Where cuBLASLt offers no algorithm with the epilogue, the plain dW GEMM runs and cu_colsum
 * (reduce.cu) adds the column sums of dout in a fixed order, as it does on the cublasGemmEx path.
 * Not yet timed on a GPU: the step model prices the epilogue as free, and cuBLASLt users have
 * reported BGRAD GEMMs slower than the plain GEMM at some large shapes, so a lent GPU should time
 * the dW GEMM with and without it (LMTK_CUDA_EXEC_LT_NOALGO only exercises the fallback on the
 * executor).
 *
 * The MLP's GeLU rides in the epilogues, as llm.c does it: the first linear layer's forward is
 * one GEMM with CUBLASLT_EPILOGUE_GELU_AUX_BIAS (bias added, the sum stored as the auxiliary
 * output - the pre-activation the backward needs - and its GeLU as D), and the backward of the
 * second linear layer's input gradient is one GEMM with CUBLASLT_EPILOGUE_DGELU (the product
 * times gelu'(pre) read from the auxiliary input).  The GeLU is then applied to the fp32 sum
 * before the one rounding, where the separate kernels rounded twice.  The auxiliary
 * matrix shares D's layout; cuBLASLt wants its leading dimension a multiple of 8, so a layer of
 * another width (or a shape without an algorithm) takes the unfused kernels.
 *
 * Plans.  Creating descriptors and asking the heuristic costs tens of microseconds, so each
 * distinct (kind, shape, pointer alignment) gets a plan - descriptors plus the chosen algorithm -
 * cached in a small table; a model has a handful of shapes.  The alignment of every pointer
 * (up to 256 bytes) is part of the key and is given to the heuristic, which would otherwise assume
 * 256-byte alignment and could pick a kernel that faults on a pointer into the middle of a
 * parameter buffer.  When cuBLASLt has no algorithm for a shape (the heuristic finds none, or
 * cublasLtMatmul answers CUBLAS_STATUS_NOT_SUPPORTED), the plan falls back, and says so once per
 * shape on stderr: to cublasGemmEx with the same mapping plus a separate bias kernel (the output
 * is then rounded twice: once after the GEMM, once after the bias), or for the fused kinds to
 * the unfused kernels.  CUBLAS_STATUS_INVALID_VALUE is no such case: it means lmtk described the
 * problem wrongly (a leading dimension, an alignment, an epilogue's operand), so the run stops
 * with the whole description rather than run a slower path that hides the bug.
 *
 * Determinism: cuBLAS(Lt) gives the same bits for the same algorithm, shapes and GPU model; the
 * plan fixes the algorithm per shape and every call runs on the one stream with its own
 * workspace, so runs repeat bit for bit. */
#include <stdio.h>
#include <string.h>

#include "train/cuda/common.h"

enum { MM_FWD, MM_DINP, MM_DW, MM_FWD_GELU, MM_DINP_DGELU, MM_DW_BGRAD };

struct mm_plan {
	int used;
	int kind, m, n, k;
	unsigned align[5];           /* A, B, D, bias (0: no bias), aux (0: none) */
	int ok;                      /* cuBLASLt has an algorithm; else cublasGemmEx */
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t a, b, d;
	cublasLtMatmulAlgo_t algo;
};

#define MM_PLANS 64
static struct mm_plan plans[MM_PLANS];
static int plan_next;

static const char *const kind_name[] = {"linear forward", "linear input-gradient",
					"linear weight-gradient", "GeLU-fused forward",
					"GeLU-gradient-fused input-gradient",
					"bias-gradient-fused weight-gradient"};

/* what a kind falls back to where cuBLASLt has no algorithm */
static const char *fallback_of(int kind, int bias)
{
	switch (kind) {
	case MM_FWD_GELU:
		return "the unfused GEMM, bias and GeLU kernels (the pre-activation rounded before "
		       "the GeLU)";
	case MM_DINP_DGELU:
		return "the unfused GEMM and GeLU-gradient kernels (rounded between them)";
	case MM_DW_BGRAD:
		return "the plain weight-gradient GEMM and a separate column-sum kernel for the bias "
		       "gradient";
	default:
		return bias ? "cublasGemmEx and a separate bias add (the output rounded twice)"
			    : "cublasGemmEx";
	}
}

static const char *epilogue_of(int kind, int bias)
{
	switch (kind) {
	case MM_FWD_GELU: return "GELU_AUX_BIAS";
	case MM_DINP_DGELU: return "DGELU";
	case MM_DW_BGRAD: return "BGRADB";
	default: return bias ? "BIAS" : "DEFAULT";
	}
}

static const char *type_of(cudaDataType_t t)
{
	return t == CUDA_R_16BF ? "bf16" : t == CUDA_R_16F ? "fp16" : t == CUDA_R_32F ? "fp32"
										     : "?";
}

/* The whole problem, for a message: "linear forward GEMM m=.. n=.. k=.. (...)" */
static void mm_describe(char *buf, size_t len, int kind, cublasOperation_t ta,
			cublasOperation_t tb, int m, int n, int k, int lda, int ldb, int ldd,
			cudaDataType_t dtype, const unsigned al[5])
{
	snprintf(buf, len, "%s GEMM m=%d n=%d k=%d (op(A) %s, op(B) %s, lda %d, ldb %d, ldd %d; A, B "
		 "%s, D %s; epilogue %s; pointers aligned to A %u, B %u, D %u, bias %u, aux %u "
		 "bytes)", kind_name[kind], m, n, k, ta == CUBLAS_OP_N ? "N" : "T",
		 tb == CUBLAS_OP_N ? "N" : "T", lda, ldb, ldd, type_of(cu_act_dtype()),
		 type_of(dtype), epilogue_of(kind, al[3] != 0), al[0], al[1], al[2], al[3], al[4]);
}

/* A cuBLASLt answer that is not an algorithm: NOT_SUPPORTED (or no algorithm at all) is said
 * once per (kind, shape) and the caller falls back; INVALID_VALUE, or anything else, stops. */
static void mm_refused(const char *call, cublasStatus_t s, int kind, cublasOperation_t ta,
		       cublasOperation_t tb, int m, int n, int k, int lda, int ldb, int ldd,
		       cudaDataType_t dtype, const unsigned al[5])
{
	static int warned[MM_PLANS][4];
	static int nwarned;
	char what[400];
	mm_describe(what, sizeof what, kind, ta, tb, m, n, k, lda, ldb, ldd, dtype, al);
	if (s == CUBLAS_STATUS_INVALID_VALUE)
		cu_die("%s refused the %s: CUBLAS_STATUS_INVALID_VALUE, a bug in how lmtk described "
		       "it (a leading dimension, an alignment or an epilogue's operand), not a shape "
		       "to send elsewhere; please report it", call, what);
	if (s != CUBLAS_STATUS_NOT_SUPPORTED && s != CUBLAS_STATUS_SUCCESS)
		cu_die("%s, %s: %s", call, what, cublasLtGetStatusString(s));
	for (int i = 0; i < nwarned; i++)
		if (warned[i][0] == kind && warned[i][1] == m && warned[i][2] == n && warned[i][3] == k)
			return;
	if (nwarned < MM_PLANS) {
		int *w = warned[nwarned++];
		w[0] = kind, w[1] = m, w[2] = n, w[3] = k;
	}
	cu_warn("cuBLASLt has no algorithm for the %s (%s: %s); this shape runs %s from now on",
		what, call, s == CUBLAS_STATUS_SUCCESS ? "no heuristic result" : "CUBLAS_STATUS_NOT_SUPPORTED",
		fallback_of(kind, al[3] != 0));
}

static unsigned align_of(const void *p)
{
	uintptr_t x = (uintptr_t)p;
	if (!p)
		return 0;
	unsigned a = 1;
	while (a < 256 && !(x & a))
		a <<= 1;
	return a;
}

static void plan_release(struct mm_plan *p)
{
	if (!p->used)
		return;
	if (p->desc)
		cublasLtMatmulDescDestroy(p->desc);
	if (p->a)
		cublasLtMatrixLayoutDestroy(p->a);
	if (p->b)
		cublasLtMatrixLayoutDestroy(p->b);
	if (p->d)
		cublasLtMatrixLayoutDestroy(p->d);
	memset(p, 0, sizeof *p);
}

/* A (stored rows x cols, column-major) is op(A) m x k; B is op(B) k x n; D is m x n. */
static struct mm_plan *plan_get(int kind, cublasOperation_t ta, cublasOperation_t tb, int m,
				int n, int k, int lda, int ldb, int ldd, cudaDataType_t dtype,
				const void *A, const void *B, const void *D, const void *bias,
				const void *aux)
{
	unsigned al[5] = {align_of(A), align_of(B), align_of(D), align_of(bias), align_of(aux)};
	for (int i = 0; i < MM_PLANS; i++) {
		struct mm_plan *p = &plans[i];
		if (p->used && p->kind == kind && p->m == m && p->n == n && p->k == k &&
		    !memcmp(p->align, al, sizeof al))
			return p;
	}
	struct mm_plan *p = &plans[plan_next];
	plan_next = (plan_next + 1) % MM_PLANS;
	plan_release(p);
	p->used = 1;
	p->kind = kind, p->m = m, p->n = n, p->k = k;
	memcpy(p->align, al, sizeof al);

	BLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
	int32_t opa = ta, opb = tb;
	BLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa,
						  sizeof opa));
	BLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb,
						  sizeof opb));
	if (aux) {   /* the GeLU epilogues: the auxiliary matrix has D's shape and layout */
		cublasLtEpilogue_t epi = kind == MM_FWD_GELU ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
							     : CUBLASLT_EPILOGUE_DGELU;
		int64_t ld = ldd;
		BLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
							  &epi, sizeof epi));
		BLAS_CHECK(cublasLtMatmulDescSetAttribute(
			p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
		BLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
							  &ld, sizeof ld));
	}
	if (bias) {   /* MM_DW_BGRAD: the bias gradient (fp32, D's type) is written, not read */
		cublasLtEpilogue_t epi = kind == MM_DW_BGRAD ? CUBLASLT_EPILOGUE_BGRADB
					 : aux		     ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
							     : CUBLASLT_EPILOGUE_BIAS;
		int32_t btype = kind == MM_DW_BGRAD ? (int32_t)CUDA_R_32F : (int32_t)cu_act_dtype();
		BLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
							  &epi, sizeof epi));
		BLAS_CHECK(cublasLtMatmulDescSetAttribute(
			p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &btype, sizeof btype));
		/* the heuristic reads the pointer's alignment */
		BLAS_CHECK(cublasLtMatmulDescSetAttribute(
			p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
	}
	int arows = ta == CUBLAS_OP_N ? m : k, acols = ta == CUBLAS_OP_N ? k : m;
	int brows = tb == CUBLAS_OP_N ? k : n, bcols = tb == CUBLAS_OP_N ? n : k;
	BLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, cu_act_dtype(), arows, acols, lda));
	BLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, cu_act_dtype(), brows, bcols, ldb));
	BLAS_CHECK(cublasLtMatrixLayoutCreate(&p->d, dtype, m, n, ldd));

	cublasLtMatmulPreference_t pref;
	BLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
	uint64_t ws = cu.lt_ws_size;
	BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
		pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
	uint32_t aa = al[0], ab = al[1], ad = al[2];
	BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
		pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aa, sizeof aa));
	BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
		pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ab, sizeof ab));
	BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
		pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ad, sizeof ad));
	BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
		pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ad, sizeof ad));
	cublasLtMatmulHeuristicResult_t res;
	int nres = 0;
	cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(cu.lt, p->desc, p->a, p->b, p->d, p->d,
							  pref, 1, &res, &nres);
	cublasLtMatmulPreferenceDestroy(pref);
	if (s == CUBLAS_STATUS_SUCCESS && nres > 0 && res.state == CUBLAS_STATUS_SUCCESS) {
		p->algo = res.algo;
		p->ok = 1;
	} else {
		mm_refused("cublasLtMatmulAlgoGetHeuristic",
			   s == CUBLAS_STATUS_SUCCESS && nres > 0 ? res.state : s, kind, ta, tb, m, n,
			   k, lda, ldb, ldd, dtype, al);
	}
	return p;
}

/* D (m x n, type dtype) = alpha op(A) op(B) + beta D (+ bias per row of D).  With aux (the
 * GeLU kinds) or MM_DW_BGRAD (bias: the column sums of op(B) written there), cuBLASLt only:
 * returns 0 when cuBLASLt could not, leaving the caller to run the unfused kernels; else 1. */
static int gemm_lt(int kind, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
		   const void *A, int lda, const void *B, int ldb, void *D, cudaDataType_t dtype,
		   int ldd, float beta, const void *bias, const void *aux)
{
	const float alpha = 1.0f;
	if (cu.graph_mode == OPS_GRAPH_FILL)   /* nothing is queued (ops.h graph_mode) */
		return 1;
	struct mm_plan *p = plan_get(kind, ta, tb, m, n, k, lda, ldb, ldd, dtype, A, B, D, bias,
				     aux);
	if (p->ok) {
		if (bias)
			BLAS_CHECK(cublasLtMatmulDescSetAttribute(
				p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
		if (aux)
			BLAS_CHECK(cublasLtMatmulDescSetAttribute(
				p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
		cublasStatus_t s = cublasLtMatmul(cu.lt, p->desc, &alpha, A, p->a, B, p->b, &beta,
						  D, p->d, D, p->d, &p->algo, cu.lt_ws,
						  cu.lt_ws_size, cu.stream);
		if (s == CUBLAS_STATUS_SUCCESS)
			return 1;
		mm_refused("cublasLtMatmul", s, kind, ta, tb, m, n, k, lda, ldb, ldd, dtype,
			   p->align);   /* stops unless NOT_SUPPORTED */
		p->ok = 0; /* this shape falls back from now on */
	}
	if (aux || kind == MM_DW_BGRAD)
		return 0;
	BLAS_CHECK(cublasGemmEx(cu.blas, ta, tb, m, n, k, &alpha, A, cu_act_dtype(), lda, B,
				cu_act_dtype(), ldb, &beta, D, dtype, ldd, CUBLAS_COMPUTE_32F,
				CUBLAS_GEMM_DEFAULT));
	if (bias)
		cu_bias_add(D, bias, n, m); /* D is out(N=n, OC=m) row-major */
	return 1;
}

static void gemm(int kind, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
		 const void *A, int lda, const void *B, int ldb, void *D, cudaDataType_t dtype,
		 int ldd, float beta, const void *bias)
{
	gemm_lt(kind, ta, tb, m, n, k, A, lda, B, ldb, D, dtype, ldd, beta, bias, NULL);
}

/* out(N,OC) = inp(N,IC) w(OC,IC)^T + bias(OC) */
void cu_matmul_fwd(void *out, const void *inp, const void *w, const void *bias, int N, int IC,
		   int OC)
{
	CU_ENTER();
	if (N <= 0 || OC <= 0 || IC <= 0)
		return;
	gemm(MM_FWD, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, IC, w, IC, inp, IC, out, cu_act_dtype(), OC,
	     0.0f, bias);
}

/* dinp(N,IC) = dout(N,OC) w(OC,IC); dw(OC,IC) += dout^T inp(N,IC); dbias(OC) += colsum(dout) */
void cu_matmul_bwd(void *dinp, float *dw, float *dbias, const void *dout, const void *inp,
		   const void *w, int N, int IC, int OC)
{
	CU_ENTER();
	if (N <= 0 || OC <= 0 || IC <= 0)
		return;
	if (dinp)
		gemm(MM_DINP, CUBLAS_OP_N, CUBLAS_OP_N, IC, N, OC, w, IC, dout, OC, dinp,
		     cu_act_dtype(), IC, 0.0f, NULL);
	if (dw && dbias) {   /* dbias from the dW GEMM's BGRADB epilogue, then added */
		float *tmp = (float *)cu_scratch((size_t)OC * sizeof(float));
		if (gemm_lt(MM_DW_BGRAD, CUBLAS_OP_N, CUBLAS_OP_T, IC, OC, N, inp, IC, dout, OC, dw,
			    CUDA_R_32F, IC, 1.0f, tmp, NULL)) {
			cu_vec_acc(dbias, tmp, OC);
			return;
		}
	}
	if (dw)
		gemm(MM_DW, CUBLAS_OP_N, CUBLAS_OP_T, IC, OC, N, inp, IC, dout, OC, dw, CUDA_R_32F,
		     IC, 1.0f, NULL);
	if (dbias)
		cu_colsum(dbias, NULL, dout, NULL, NULL, NULL, N, OC);
}

/* pre(N,OC) = inp w^T + bias, out = gelu(pre): one GEMM with the GELU_AUX_BIAS epilogue */
void cu_matmul_gelu_fwd(void *out, void *pre, const void *inp, const void *w, const void *bias,
			int N, int IC, int OC)
{
	CU_ENTER();
	if (N <= 0 || OC <= 0 || IC <= 0)
		return;
	if (OC % 8 == 0 && bias &&
	    gemm_lt(MM_FWD_GELU, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, IC, w, IC, inp, IC, out,
		    cu_act_dtype(), OC, 0.0f, bias, pre))
		return;
	cu_matmul_fwd(pre, inp, w, bias, N, IC, OC);
	cu_gelu_fwd(out, pre, (size_t)N * OC);
}

/* dinp(N,IC) = (dout w) * gelu'(pre(N,IC)) with the DGELU epilogue; dw, dbias as cu_matmul_bwd */
void cu_matmul_dgelu_bwd(void *dinp, float *dw, float *dbias, const void *dout, const void *inp,
			 const void *w, const void *pre, int N, int IC, int OC)
{
	CU_ENTER();
	if (N <= 0 || OC <= 0 || IC <= 0)
		return;
	if (!(IC % 8 == 0 &&
	      gemm_lt(MM_DINP_DGELU, CUBLAS_OP_N, CUBLAS_OP_N, IC, N, OC, w, IC, dout, OC, dinp,
		      cu_act_dtype(), IC, 0.0f, NULL, pre))) {
		cu_matmul_bwd(dinp, NULL, NULL, dout, inp, w, N, IC, OC);
		cu_gelu_bwd(dinp, pre, dinp, (size_t)N * IC);
	}
	cu_matmul_bwd(NULL, dw, dbias, dout, inp, w, N, IC, OC);
}
