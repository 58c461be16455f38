/* profile - what a step of a program costs, launch by launch, for the step-time model
 * (tests/bench/train-gpu-model.sh).
 *
 * LMTK_CUDA_EXEC_PROFILE=FILE appends one JSON object per line to FILE for every operation the
 * executor runs, in the order the device would run them:
 *   {"op":"kernel","name":"ln_fwd_k<8>","grid":[x,y,z],"block":[x,y,z],"smem":B,"rd":R,"wr":W}
 *       rd / wr: the device memory the launch read (before writing it) and wrote, in distinct
 *       32-byte sectors (a DRAM transaction) times 32 - its compulsory traffic.  A tag per
 *       sector of each allocation (the launch that last read it, and wrote it) counts each
 *       sector once per launch.  Atomics and pinned host memory are not counted.
 *   {"op":"gemm","m":M,"n":N,"k":K,"batch":B,"a":2,"b":2,"c":2,"d":2,"beta":0|1,
 *    "epilogue":"none"|"gelu"|"dgelu","bias":0|1,"aux":0|1}   a..d: element bytes (0: unused C)
 *   {"op":"nccl","call":"AllReduce","count":N,"bytes":B,"ranks":R}
 *   {"op":"copy","kind":"HtoD"|"DtoH"|"DtoD","bytes":B}     {"op":"memset","bytes":B}
 *   {"op":"sync","call":"cudaStreamSynchronize","queued":Q}   a host synchronisation (runtime.cpp),
 *       Q the operations still queued when it returned: 0, the device ran dry
 * Nothing is written between cudaProfilerStop() and the next cudaProfilerStart(), and nothing
 * before the first cudaProfilerStart() when LMTK_CUDA_EXEC_PROFILE_CAPTURE=api (nsys's
 * --capture-range=cudaProfilerApi); both synchronise the device first, so the range holds
 * exactly the work queued inside it. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "exec.h"

uint64_t g_prof_rd, g_prof_wr;
uint32_t g_prof_tag;
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

extern int g_sync_range;       /* runtime.cpp: LMTK_CUDA_EXEC_SYNCS records in the range */
void cx_flush_all(void);

extern "C" cudaError_t cudaProfilerStart(void)
{
	cx_flush_all();   /* the profiler's own synchronisation, not the program's */
	cudaError_t e = g_sticky;
	prof_init();
	if (g_prof)
		g_prof_on = 1;
	g_sync_range = 1;
	return e;
}

extern "C" cudaError_t cudaProfilerStop(void)
{
	g_sync_range = 0;
	cx_flush_all();
	cudaError_t e = g_sticky;
	prof_init();
	if (g_prof)
		fflush(g_prof);
	g_prof_on = 0;
	return e;
}

void prof_touch(Alloc *al, uintptr_t a, size_t n, int write)
{
	if (!al->ptag) {
		size_t sectors = (al->size + 31) / 32;
		void *p = mmap(NULL, sectors * 2 * sizeof(uint32_t), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED)
			return;
		al->ptag = (uint32_t *)p;
	}
	uint32_t t = g_prof_tag;
	for (size_t s = (a - al->base) / 32, e = (a - al->base + n - 1) / 32; s <= e; s++) {
		uint32_t *rt = &al->ptag[2 * s], *wt = rt + 1;
		if (write) {
			if (*wt != t)
				g_prof_wr += 32, *wt = t;
		} else if (*rt != t && *wt != t) {
			g_prof_rd += 32;
			*rt = t;
		}
	}
}

void prof_free(Alloc *al)
{
	if (al->ptag)
		munmap(al->ptag, (al->size + 31) / 32 * 2 * sizeof(uint32_t));
	al->ptag = NULL;
}
