/* exec.h - the pieces of the CPU executor share (tests/cuda-exec): runtime.cpp (memory, streams,
 * the device, launches), sched.cpp (fibers, barriers, warp calls, running a kernel) and
 * check.cpp (shared memory, the access hooks, the race shadow).  See runtime.cpp for the whole
 * design. */
#ifndef CUDA_EXEC_EXEC_H
#define CUDA_EXEC_EXEC_H

#include <stdint.h>
#include <string.h>

#include <string>
#include <vector>

#include "cuda_runtime.h"
#include "cx_dynsmem.h"
#include "cx_host.h"

/* --- runtime.cpp --- */

struct Cfg {
	int inited;
	int order;          /* 0 forward, 1 reverse, 2 random */
	uint64_t seed;
	int shadow;         /* race and uninitialised-read shadow of shared memory */
	int devices;        /* what cudaGetDeviceCount answers */
	size_t stack;       /* bytes per fiber stack */
	int trace;          /* print each launch, and where each operation is queued */
	int eager;          /* run each operation as soon as it is queued */
	int dispatch;       /* 0 any (a block runs to its end), 1 index (it may wait for lower ones) */
	char abandon[120];  /* LMTK_CUDA_EXEC_ABANDON: the first launch of a kernel whose name */
	long abandon_after; /* holds this stops after that many blocks (runtime.cpp) */
};
extern Cfg cfg;
extern cudaError_t g_sticky; /* an execution error: every later call returns it */

struct GShadow;
struct Alloc {
	uintptr_t base;
	size_t size;
	int live;
	uint64_t serial;
	GShadow *sh; /* the race shadow of its bytes (check.cpp), made on first use */
	uint32_t *ptag; /* profile.cpp: per 32-byte sector, the launches that last read, wrote it */
};
#define ARENA_BYTES ((size_t)1 << 38) /* device memory: address space only, reserved at start */
extern char *g_arena;
extern size_t g_arena_used, g_page;
int arena_init(void);
const Alloc *find_dev(uintptr_t a);
std::vector<Alloc> &g_dev_list(void); /* every device allocation, freed ones too */
const Alloc *find_pinned(uintptr_t a);
const Alloc *dev_range(uintptr_t a, size_t n); /* the live allocation holding [a, a+n) */
void describe(char *buf, size_t len, uintptr_t a, size_t n);
std::string demangle(const char *sym);
std::string short_name(std::string s); /* "attn_fwd_k<64>" */

/* --- sched.cpp --- */

/* a cp.async not yet landed: 16 bytes at dst, n of them from src, in commit group `group` */
struct CpAsync {
	void *dst;
	const void *src;
	int n;
	unsigned group;
};

struct Thr {
	/* fiber */
	void *sp;
	char *stk_lo, *stk_hi;
#if !defined(__x86_64__)
	ucontext_t uc;
#endif
	/* identity */
	int lin, lane, warp;
	uint3 tid;
	/* scheduling */
	int state; /* T_RUN, T_BAR, T_WARP, T_DONE */
	uint32_t rank;
	/* the barrier it waits at */
	const char *bfile;
	int bline, bpred;
	/* the warp call it waits in */
	int ckind, cop, csize, csrc;
	unsigned cmask;
	uint64_t cval, cres;
	int cpred;
	const char *cfile;
	int cline;
	void *cbuf; /* a matrix instruction's operands, in the lane's locals (sched.cpp) */
	/* the volatile location it last read, with g_progress then, and how often in a row */
	const void *vaddr;
	uint64_t vprog;
	int vcount;
	/* its cp.async copies in flight, and how many groups it has committed (check.cpp) */
	std::vector<CpAsync> cpa;
	unsigned cpa_groups;
};
enum { T_RUN, T_BAR, T_WARP, T_DONE };
enum { C_SHFL, C_VOTE, C_MATCH, C_REDUCE, C_SYNCWARP, C_MMA, C_LDSM };
extern const char *const coll_name[];

/* A warp call in progress: the lanes of `mask` that have made it so far. */
struct Group {
	unsigned mask, arrived;
	int first; /* the lane that made it first */
};

struct Warp {
	unsigned exited, all, atbar; /* atbar: lanes waiting at __syncthreads() */
	int ngroups;
	Group groups[32];
	std::vector<unsigned> log; /* masks of the __syncwarp()s completed in this interval */
};

struct Launch {
	const void *kernel;
	const char *name;
	cx_invoke_fn invoke;
	void *args;
	dim3 grid, block;
	size_t smem;
	uint64_t serial;
};

extern std::vector<Thr> g_thr;
extern std::vector<Warp> g_warps;
extern size_t g_stack_bytes;
extern Thr *g_cur;            /* the running CUDA thread, NULL in host code */
extern int g_running;         /* a kernel is running: the hooks check accesses */
extern int g_abort;           /* the kernel failed: stop running it */
extern int g_in_atomic;       /* inside an atomic: exempt from the race shadow */
extern const Launch *g_launch;
extern uint3 g_block;
extern int g_nthr;
/* Barrier intervals are numbered across blocks and launches: g_epoch is the current one,
 * g_block_epoch the current block's first, g_launch_epoch the launch's first; g_epoch_block maps
 * an interval of this launch (g_epoch - g_launch_epoch) to its block's linear index. */
extern uint32_t g_epoch, g_block_epoch, g_launch_epoch;
extern std::vector<uint32_t> g_epoch_block;
/* Counts the writes of CUDA threads to shared and global memory, atomics included: a thread
 * spinning in __nanosleep() while it stays put waits for nothing that can happen (sched.cpp). */
extern uint64_t g_progress;
/* A volatile load of p by the running CUDA thread: the same location read again and again with
 * no write in between is a spin-wait without __nanosleep(), which yields as that does. */
void volatile_poll(const void *p);

static inline unsigned lane_bit(const Thr *t)
{
	return 1u << t->lane;
}
void thr_str(char *b, size_t n, const Thr *t);
/* Reports a failure of the running kernel, makes it the sticky error and, inside a CUDA thread,
 * abandons the block (the thread never resumes). */
void kfail(cudaError_t code, const Thr *t, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void run_kernel(const Launch *L);

/* --- check.cpp --- */

void smem_kernel_start(void);          /* where shared memory is, in this host thread */
void gshadow_free(Alloc *a);
void shadows_reset(void);              /* forget every access (epochs start again) */
void smem_block_start(size_t dyn_bytes);
int smem_contains(const void *p, size_t n);
/* A parked block's shared memory and its shadow, out of the way of the next block and back */
void smem_save(std::vector<char> &bytes, std::vector<char> &shadow);
void smem_restore(const std::vector<char> &bytes, const std::vector<char> &shadow);  /* [p, p+n) is the block's shared memory */
/* An access the executor makes for the running thread (ldmatrix's rows): checked as if the
 * thread's own code had made it. */
void thread_access(const void *p, size_t n, int write);

/* --- profile.cpp (LMTK_CUDA_EXEC_PROFILE) --- */

extern uint64_t g_prof_rd, g_prof_wr;  /* distinct device bytes the running launch read, wrote */
extern uint32_t g_prof_tag;            /* the running launch's tag (serial + 1) */
extern int g_prof_on;                  /* recording (and the counters above counting) */
void prof_touch(Alloc *al, uintptr_t a, size_t n, int write);   /* a kernel's access */
void prof_free(Alloc *al);
int prof_active(void);
void prof_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
