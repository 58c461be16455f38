/* cublasLt.h - the CPU executor's cuBLASLt (tests/cuda-exec): exactly the descriptors,
 * attributes and epilogues the CUDA backend uses (src/train/cuda/matmul.cu), implemented in
 * blas.cpp as the cuBLASLt reference defines them: column-major matrices with leading
 * dimensions, op(A) and op(B) transposes, strided batches, fp32 accumulation
 * (CUBLAS_COMPUTE_32F), the output rounded once to D's type, and the BIAS epilogue (a vector of
 * D's rows count added to every column before that rounding).  Setting an attribute this file
 * does not declare, a value blas.cpp does not implement (another epilogue, order or type), or
 * calling cublasLtMatmul with a combination it does not implement returns
 * CUBLAS_STATUS_NOT_SUPPORTED (or INVALID_VALUE where the real library says so) and says why on
 * stderr. */
#ifndef CUDA_EXEC_CUBLASLT_H
#define CUDA_EXEC_CUBLASLT_H

#include <stdint.h>

#include "cublas_v2.h"

typedef struct cublasLtContext *cublasLtHandle_t;
typedef struct cx_lt_desc *cublasLtMatmulDesc_t;
typedef struct cx_lt_layout *cublasLtMatrixLayout_t;
typedef struct cx_lt_pref *cublasLtMatmulPreference_t;

typedef struct {
	uint64_t data[8];
} cublasLtMatmulAlgo_t;

typedef struct {
	cublasLtMatmulAlgo_t algo;
	size_t workspaceSize;
	cublasStatus_t state;
	float wavesCount;
	int reserved[4];
} cublasLtMatmulHeuristicResult_t;

typedef enum {
	CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0,
	CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,
	CUBLASLT_MATMUL_DESC_POINTER_MODE = 2,
	CUBLASLT_MATMUL_DESC_TRANSA = 3,
	CUBLASLT_MATMUL_DESC_TRANSB = 4,
	CUBLASLT_MATMUL_DESC_TRANSC = 5,
	CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
	CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
	CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE = 10,
	CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,
	CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,
	CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE = 13,
	CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE = 22,
	CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26,
} cublasLtMatmulDescAttributes_t;

typedef enum {
	CUBLASLT_EPILOGUE_DEFAULT = 1,
	CUBLASLT_EPILOGUE_RELU = 2,
	CUBLASLT_EPILOGUE_BIAS = 4,
	CUBLASLT_EPILOGUE_GELU = 32,
	CUBLASLT_EPILOGUE_GELU_AUX = 32 | 128,
	CUBLASLT_EPILOGUE_GELU_BIAS = 32 | 4,
	CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 32 | 128 | 4,
	CUBLASLT_EPILOGUE_DGELU = 64 | 128,
	CUBLASLT_EPILOGUE_DGELU_BGRAD = 64 | 128 | 16,
	CUBLASLT_EPILOGUE_BGRADA = 256,
	CUBLASLT_EPILOGUE_BGRADB = 512,
} cublasLtEpilogue_t;

typedef enum {
	CUBLASLT_MATRIX_LAYOUT_TYPE = 0,
	CUBLASLT_MATRIX_LAYOUT_ORDER = 1,
	CUBLASLT_MATRIX_LAYOUT_ROWS = 2,
	CUBLASLT_MATRIX_LAYOUT_COLS = 3,
	CUBLASLT_MATRIX_LAYOUT_LD = 4,
	CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
	CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6,
} cublasLtMatrixLayoutAttribute_t;

typedef enum { CUBLASLT_ORDER_COL = 0, CUBLASLT_ORDER_ROW = 1 } cublasLtOrder_t;

typedef enum {
	CUBLASLT_MATMUL_PREF_SEARCH_MODE = 0,
	CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
	CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
	CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
	CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
	CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
} cublasLtMatmulPreferenceAttributes_t;

extern "C" {
cublasStatus_t cublasLtCreate(cublasLtHandle_t *h);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h);
const char *cublasLtGetStatusString(cublasStatus_t s);
const char *cublasLtGetStatusName(cublasStatus_t s);
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute,
					cudaDataType_t scale);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
					      cublasLtMatmulDescAttributes_t attr,
					      const void *buf, size_t size);
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType_t type,
					  uint64_t rows, uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l);
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l,
						cublasLtMatrixLayoutAttribute_t attr,
						const void *buf, size_t size);
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
						    cublasLtMatmulPreferenceAttributes_t attr,
						    const void *buf, size_t size);
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
					      cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
					      cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dl,
					      cublasLtMatmulPreference_t pref, int requested,
					      cublasLtMatmulHeuristicResult_t *results,
					      int *returned);
cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha,
			      const void *A, cublasLtMatrixLayout_t adesc, const void *B,
			      cublasLtMatrixLayout_t bdesc, const void *beta, const void *C,
			      cublasLtMatrixLayout_t cdesc, void *D, cublasLtMatrixLayout_t ddesc,
			      const cublasLtMatmulAlgo_t *algo, void *workspace, size_t wsbytes,
			      cudaStream_t stream);
}

#endif
