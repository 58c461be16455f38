/* cx_host.h - the CPU executor's interface for library calls that run on the "device" as host
 * code (tests/cuda-exec): cuBLAS, cuBLASLt (blas.cpp) and CUB (cub/).  Such a call checks its
 * arguments when it is made, then queues its work on the stream like a kernel. */
#ifndef CUDA_EXEC_CX_HOST_H
#define CUDA_EXEC_CX_HOST_H

#include <functional>

#include "cuda_runtime.h"

/* Queues fn on stream s (run when the host synchronises, with device memory accessible);
 * what names it in messages. */
cudaError_t cx_enqueue(cudaStream_t s, const char *what, std::function<void()> fn);
/* 1 when [p, p + bytes) lies inside one live device allocation (cudaMalloc) or pinned host
 * allocation; else 0, after printing why, naming `what` and `arg`. */
int cx_device_range(const void *p, size_t bytes, const char *what, const char *arg);
/* Prints "cuda-exec: <what>: <message>" on stderr and keeps it as the last diagnostic. */
void cx_say(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The last diagnostic the executor printed ("" if none): for the executor's own tests. */
extern "C" const char *cx_last_diagnostic(void);

#endif
