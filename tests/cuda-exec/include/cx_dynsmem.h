/* cx_dynsmem.h - dynamic shared memory for the CPU executor (tests/cuda-exec).
 *
 * On the device every `extern __shared__ T name[];` of a kernel names the same per-block
 * buffer, sized by the launch.  Here each name is a thread-local array of the device's largest
 * size (227 KiB), defined once by a file that tests/cuda-exec/dynsmem.sh generates from the
 * sources, and registered so that the executor can check accesses against the launch's size. */
#ifndef CUDA_EXEC_DYNSMEM_H
#define CUDA_EXEC_DYNSMEM_H

#define CX_DYN_MAX 232448u

extern "C" int cx_register_dynsmem(const char *name, unsigned char *(*addr)(void));

#define CX_DYNAMIC_SMEM(type, name)                                                                \
	thread_local __attribute__((aligned(256))) type name[CX_DYN_MAX / sizeof(type)];           \
	static unsigned char *cx_dynaddr_##name(void) { return (unsigned char *)name; }            \
	static int cx_dynreg_##name = cx_register_dynsmem(#name, cx_dynaddr_##name);

#endif
