/* profile - what a step of a program costs, launch by launch, for the step-time model
 * (tests/bench/train-gpu-model.sh).
 *
 * LMTK_CUDA_EXEC_PROFILE=FILE appends one JSON object per line to FILE for every operation the
 * executor runs, in the order the device would run them:
 *   {"op":"kernel","name":"ln_fwd_k<8>","grid":[x,y,z],"block":[x,y,z],"smem":B,"rd":R,"wr":W}
 *       rd / wr: the distinct bytes of device memory the launch read (before writing them) and
 *       wrote - its compulsory DRAM traffic, counted by the race shadow's per-byte epochs (so
 *       LMTK_CUDA_EXEC_SHADOW=0 counts nothing: rd and wr are then -1).  Atomics and pinned
 *       host memory are not counted.
 *   {"op":"gemm","m":M,"n":N,"k":K,"batch":B,"a":2,"b":2,"c":2,"d":2,"beta":0|1,
 *    "epilogue":"none"|"gelu"|"dgelu","bias":0|1,"aux":0|1}   a..d: element bytes (0: unused C)
 *   {"op":"nccl","call":"AllReduce","count":N,"bytes":B,"ranks":R}
 *   {"op":"copy","kind":"HtoD"|"DtoH"|"DtoD","bytes":B}     {"op":"memset","bytes":B}
 * Nothing is written between cudaProfilerStop() and the next cudaProfilerStart(), and nothing
 * before the first cudaProfilerStart() when LMTK_CUDA_EXEC_PROFILE_CAPTURE=api (nsys's
 * --capture-range=cudaProfilerApi); both synchronise the device first, so the range holds
 * exactly the work queued inside it. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"

uint64_t g_prof_rd, g_prof_wr;
int g_prof_on;
static FILE *g_prof;
static int g_prof_init;

static void prof_init(void)
{
	if (g_prof_init)
		return;
	g_prof_init = 1;
	const char *f = getenv("LMTK_CUDA_EXEC_PROFILE");
	if (!f || !*f)
		return;
	g_prof = fopen(f, "a");
	if (!g_prof) {
		fprintf(stderr, "cuda-exec: LMTK_CUDA_EXEC_PROFILE=%s: %s; not profiling\n", f,
			strerror(errno));
		return;
	}
	setvbuf(g_prof, NULL, _IOFBF, 1 << 16);
	const char *c = getenv("LMTK_CUDA_EXEC_PROFILE_CAPTURE");
	g_prof_on = !(c && !strcmp(c, "api"));
	atexit([]() {
		if (g_prof)
			fclose(g_prof);
		g_prof = NULL;
		g_prof_on = 0;
	});
}

int prof_active(void)
{
	prof_init();
	return g_prof && g_prof_on;
}

void prof_line(const char *fmt, ...)
{
	if (!prof_active())
		return;
	va_list ap;
	va_start(ap, fmt);
	vfprintf(g_prof, fmt, ap);
	va_end(ap);
	fputc('\n', g_prof);
}

extern "C" cudaError_t cudaProfilerStart(void)
{
	cudaError_t e = cudaDeviceSynchronize();
	prof_init();
	if (g_prof)
		g_prof_on = 1;
	return e;
}

extern "C" cudaError_t cudaProfilerStop(void)
{
	cudaError_t e = cudaDeviceSynchronize();
	prof_init();
	if (g_prof)
		fflush(g_prof);
	g_prof_on = 0;
	return e;
}
