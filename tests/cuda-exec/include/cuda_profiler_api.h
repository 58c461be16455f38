/* cuda_profiler_api.h - the CPU executor's (tests/cuda-exec): the profiler range, which
 * LMTK_CUDA_EXEC_PROFILE records (profile.cpp) */
#ifndef CX_CUDA_PROFILER_API_H
#define CX_CUDA_PROFILER_API_H

#include "cuda_runtime.h"

extern "C" cudaError_t cudaProfilerStart(void);
extern "C" cudaError_t cudaProfilerStop(void);

#endif
