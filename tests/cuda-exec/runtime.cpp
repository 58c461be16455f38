/* runtime - the CPU executor for the CUDA subset the backend uses (tests/cuda-exec): the runtime
 * API - device memory, streams and events, copies, the device's properties, launches.  The
 * threads of a block run in sched.cpp, the checks on every memory access are in check.cpp,
 * cuBLAS and cuBLASLt in blas.cpp, CUB in include/cub.  This comment describes the whole.
 *
 * Execution model.  The runtime API queues work (kernels, copies, memsets, library calls) on
 * per-stream queues and runs it only when the host synchronises (cudaStreamSynchronize, a
 * blocking copy, cudaFree, ...), so a host that reads results before synchronising sees stale
 * memory, as on a GPU.  A kernel runs its blocks one after another on the calling host thread,
 * in an order chosen by LMTK_CUDA_EXEC_ORDER (forward, reverse or random[:seed]; blocks of a grid
 * may run in any order on a GPU), each to its end before the next starts: CUDA promises neither
 * the order in which a grid's blocks start nor that more than one is resident, so a block may
 * wait only for blocks that started before it (LMTK_CUDA_EXEC_DISPATCH=index assumes, as the
 * hardware happens to do, that lower indices start first; see sched.cpp).
 * LMTK_CUDA_EXEC_ABANDON=KERNEL:N stops the first launch whose name contains KERNEL after N of
 * its blocks, as a kernel killed midway, and lets the stream go on: what it left behind (a
 * semaphore half counted) is then the next launch's to cope with.  LMTK_CUDA_EXEC_EAGER=1 runs each operation as soon as it is
 * queued instead - as legal a schedule (each stream in order, the host waiting), and the one
 * where work queued on a second stream runs before the first stream's later work, so a missing
 * event between them changes the results rather than hiding behind a late flush.  A block that
 * spin-waits (__nanosleep in the loop) for a write no block that started before it will make is
 * reported as a deadlock (sched.cpp).  Inside a block every CUDA thread is a fiber with its own
 * stack (a small context switch, below).  A fiber runs until it reaches __syncthreads(), a
 * warp-synchronous call (__shfl_*_sync, __ballot_sync, __syncwarp, ...) or its end, so the code
 * between two barriers runs one thread at a time, in the same chosen order: forward (thread 0
 * first), reverse, or a new random permutation per barrier interval.  Results that change with
 * the order come from a race.
 *
 * Barriers and warp calls follow the Programming Guide and the PTX ISA to the letter: a
 * __syncthreads() completes when every thread of the block has reached the same one; a thread
 * that has exited, or waits at a different __syncthreads(), is barrier divergence - undefined on
 * the device (a hang at best), an error here.  A warp call completes when every lane named in
 * its member mask has made the same call with the same mask; a lane that exits, or waits at a
 * barrier, while others wait for it, a mask that leaves out the caller, and a shuffle that reads
 * a lane outside the mask (an undefined value on the device) are errors.
 *
 * Memory.  Device memory is one large mapping reserved at start; cudaMalloc hands out 256-byte
 * aligned pieces of it with gaps between them, fills them with 0xff bytes (a NaN as float or
 * bf16, -1 as int: uninitialised memory shows), and never reuses an address, so a use after
 * cudaFree is recognised.  The mapping is PROT_NONE while the host runs: a host dereference of a
 * device pointer faults, and the SIGSEGV handler says which allocation it was.  Shared memory is
 * the module's thread-local storage (cuda_runtime.h maps __shared__ to thread_local; dynamic
 * shared memory is a generated thread-local array per `extern __shared__` name, sized per
 * launch).
 *
 * Checks.  The .cu files are compiled with GCC's -fsanitize=thread, which makes the compiler
 * call __tsan_readN/__tsan_writeN before every memory access; check.cpp implements those hooks
 * (no ThreadSanitizer runtime is linked), and with -fsanitize=alignment, which traps when a typed
 * access (an int4 through a cast pointer) lacks its type's alignment.  Outside a kernel a hook returns at once; inside, the
 * address must be the thread's own stack, the block's shared memory (within the launch's dynamic
 * size), a live device allocation or pinned host memory, and an access the compiler knows to be
 * naturally aligned must be so on the device too.  Anything else stops the kernel with a message
 * naming the kernel, block, thread, address and the allocation it missed, and the launch fails
 * with a sticky error, as a faulting kernel does.  A shadow of shared memory records, per byte,
 * the last writer and readers in the current barrier interval: a byte written by one thread and
 * read or written by another with no barrier between (a __syncwarp() over both counts, for lanes
 * of one warp) is a race, and a byte read before any thread of the block wrote it is
 * uninitialised shared memory; both are reported with the kernel, the variable and the index.
 * Global memory has such a shadow per allocation, within a launch, across blocks too.
 *
 * What this cannot see: timing and performance; the memory model across blocks and across
 * streams beyond what the order of execution exposes (blocks never run concurrently here);
 * register pressure and the launch bounds the compiler would enforce; local memory overflow
 * beyond the fiber stacks; the exact bits of the device's fast math (the host libm is used,
 * within the documented error) and of the tensor cores' fp32 sums (mma.sync adds in double here,
 * include/cx_ptx.h). */
#include <cxxabi.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "exec.h"

/* ---------------------------------------------------------------------------------------------
 * configuration, diagnostics, errors */

struct Cfg cfg;

static std::recursive_mutex g_mu;
static char g_diag[2048];
static cudaError_t g_last = cudaSuccess;   /* cudaGetLastError */
cudaError_t g_sticky = cudaSuccess; /* an execution error: every later call returns it */
static int g_device;

static void config_init(void)
{
	if (cfg.inited)
		return;
	cfg.inited = 1;
	const char *o = getenv("LMTK_CUDA_EXEC_ORDER");
	cfg.seed = 1;
	if (o && !strncmp(o, "rev", 3))
		cfg.order = 1;
	else if (o && !strncmp(o, "random", 6)) {
		cfg.order = 2;
		if (o[6] == ':')
			cfg.seed = strtoull(o + 7, NULL, 0);
	} else if (o && *o && strcmp(o, "forward")) {
		fprintf(stderr, "cuda-exec: LMTK_CUDA_EXEC_ORDER=%s: expected forward, reverse or "
			"random[:seed]; using forward\n", o);
	}
	const char *s = getenv("LMTK_CUDA_EXEC_SHADOW");
	cfg.shadow = !(s && !strcmp(s, "0"));
	const char *d = getenv("LMTK_CUDA_EXEC_DEVICES");
	cfg.devices = d && *d ? atoi(d) : 1;
	const char *k = getenv("LMTK_CUDA_EXEC_STACK_KB");
	cfg.stack = (size_t)(k && *k ? atoi(k) : 64) << 10;
	if (cfg.stack < (16 << 10))
		cfg.stack = 16 << 10;
	const char *t = getenv("LMTK_CUDA_EXEC_TRACE");
	cfg.trace = t && *t && strcmp(t, "0");
	const char *e = getenv("LMTK_CUDA_EXEC_EAGER");
	cfg.eager = e && *e && strcmp(e, "0");
	const char *dp = getenv("LMTK_CUDA_EXEC_DISPATCH");
	cfg.dispatch = dp && !strcmp(dp, "index");
	if (dp && *dp && strcmp(dp, "index") && strcmp(dp, "any"))
		fprintf(stderr, "cuda-exec: LMTK_CUDA_EXEC_DISPATCH=%s: expected any or index; "
			"using any\n", dp);
	const char *ab = getenv("LMTK_CUDA_EXEC_ABANDON"), *colon = ab ? strrchr(ab, ':') : NULL;
	if (ab && *ab) {
		char *end;
		long n = colon ? strtol(colon + 1, &end, 10) : -1;
		if (!colon || colon == ab || colon - ab >= (long)sizeof cfg.abandon || *end || n < 0)
			fprintf(stderr, "cuda-exec: LMTK_CUDA_EXEC_ABANDON=%s: expected KERNEL:BLOCKS; "
				"ignored\n", ab);
		else {
			memcpy(cfg.abandon, ab, (size_t)(colon - ab));
			cfg.abandon[colon - ab] = 0;
			cfg.abandon_after = n;
		}
	}
}

/* for the executor's own tests: another thread order from now on */
extern "C" void cx_test_set_order(int order, unsigned long long seed)
{
	config_init();
	cfg.order = order;
	cfg.seed = seed;
}

/* for the executor's own tests: another dispatch of blocks from now on (0 any, 1 index) */
extern "C" void cx_test_set_dispatch(int dispatch)
{
	config_init();
	cfg.dispatch = dispatch;
}

extern "C" const char *cx_last_diagnostic(void)
{
	return g_diag;
}

static void vsay(const char *what, const char *fmt, va_list ap)
{
	char msg[1600];
	vsnprintf(msg, sizeof msg, fmt, ap);
	snprintf(g_diag, sizeof g_diag, "%s: %s", what, msg);
	fflush(stdout);
	fprintf(stderr, "cuda-exec: %s\n", g_diag);
}

void cx_say(const char *what, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay(what, fmt, ap);
	va_end(ap);
}

static cudaError_t ret(cudaError_t e)
{
	if (e != cudaSuccess)
		g_last = e;
	return e;
}

#define API_ENTER()                                                                                \
	std::lock_guard<std::recursive_mutex> api_lock_(g_mu);                                     \
	config_init();                                                                             \
	if (g_sticky != cudaSuccess)                                                               \
	return g_sticky

extern "C" const char *cudaGetErrorName(cudaError_t e)
{
	switch (e) {
#define N(x) case x: return #x;
	N(cudaSuccess) N(cudaErrorInvalidValue) N(cudaErrorMemoryAllocation)
	N(cudaErrorInitializationError) N(cudaErrorInvalidConfiguration)
	N(cudaErrorInvalidPitchValue) N(cudaErrorInvalidSymbol) N(cudaErrorInvalidDevicePointer)
	N(cudaErrorInvalidMemcpyDirection) N(cudaErrorInsufficientDriver)
	N(cudaErrorInvalidDeviceFunction) N(cudaErrorNoDevice) N(cudaErrorInvalidDevice)
	N(cudaErrorInvalidResourceHandle) N(cudaErrorNotReady) N(cudaErrorIllegalAddress)
	N(cudaErrorLaunchOutOfResources) N(cudaErrorAssert) N(cudaErrorIllegalInstruction)
	N(cudaErrorMisalignedAddress) N(cudaErrorLaunchFailure) N(cudaErrorUnknown)
	N(cudaErrorIllegalState) N(cudaErrorStreamCaptureUnsupported)
	N(cudaErrorStreamCaptureInvalidated) N(cudaErrorStreamCaptureIsolation)
	N(cudaErrorStreamCaptureImplicit) N(cudaErrorCapturedEvent)
#undef N
	}
	return "cudaErrorUnknown";
}

/* the runtime's own wording */
extern "C" const char *cudaGetErrorString(cudaError_t e)
{
	switch (e) {
	case cudaSuccess: return "no error";
	case cudaErrorInvalidValue: return "invalid argument";
	case cudaErrorMemoryAllocation: return "out of memory";
	case cudaErrorInitializationError: return "initialization error";
	case cudaErrorInvalidConfiguration: return "invalid configuration argument";
	case cudaErrorInvalidDevicePointer: return "invalid device pointer";
	case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
	case cudaErrorInsufficientDriver:
		return "CUDA driver version is insufficient for CUDA runtime version";
	case cudaErrorInvalidDeviceFunction: return "invalid device function";
	case cudaErrorNoDevice: return "no CUDA-capable device is detected";
	case cudaErrorInvalidDevice: return "invalid device ordinal";
	case cudaErrorInvalidResourceHandle: return "invalid resource handle";
	case cudaErrorNotReady: return "device not ready";
	case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
	case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
	case cudaErrorAssert: return "device-side assert triggered";
	case cudaErrorIllegalInstruction: return "an illegal instruction was encountered";
	case cudaErrorMisalignedAddress: return "misaligned address";
	case cudaErrorLaunchFailure: return "unspecified launch failure";
	case cudaErrorIllegalState: return "operation not permitted in the current state";
	case cudaErrorStreamCaptureUnsupported:
		return "operation not permitted when stream is capturing";
	case cudaErrorStreamCaptureInvalidated:
		return "operation failed due to a previous error during capture";
	case cudaErrorStreamCaptureIsolation:
		return "dependency created on uncaptured work in another stream";
	case cudaErrorStreamCaptureImplicit:
		return "operation would make the legacy stream depend on a capturing blocking stream";
	case cudaErrorCapturedEvent:
		return "operation not permitted on an event last recorded in a capturing stream";
	default: return "unknown error";
	}
}

extern "C" cudaError_t cudaGetLastError(void)
{
	std::lock_guard<std::recursive_mutex> l(g_mu);
	if (g_sticky != cudaSuccess)
		return g_sticky;
	cudaError_t e = g_last;
	g_last = cudaSuccess;
	return e;
}

extern "C" cudaError_t cudaPeekAtLastError(void)
{
	std::lock_guard<std::recursive_mutex> l(g_mu);
	return g_sticky != cudaSuccess ? g_sticky : g_last;
}

/* ---------------------------------------------------------------------------------------------
 * device memory */

#define ARENA_GAP 512                 /* unused bytes between two allocations */
char *g_arena;
size_t g_arena_used;           /* bytes handed out, gaps included */
static int g_open_depth;              /* > 0: the device works, its memory is accessible */
static std::vector<Alloc> g_dev;      /* increasing base: addresses are never reused */
static std::map<uintptr_t, Alloc> g_pinned;

std::vector<Alloc> &g_dev_list(void)
{
	return g_dev;
}
static size_t g_dev_live;
static uint64_t g_alloc_serial;
size_t g_page;

static size_t page_up(size_t x)
{
	return (x + g_page - 1) & ~(g_page - 1);
}

static void on_segv(int sig, siginfo_t *si, void *uc);
static void on_sigill(int sig, siginfo_t *si, void *uc);

int arena_init(void)
{
	if (g_arena)
		return 0;
	g_page = (size_t)sysconf(_SC_PAGESIZE);
	void *p = mmap(NULL, ARENA_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		       -1, 0);
	if (p == MAP_FAILED)
		return -1;
	g_arena = (char *)p;
	/* host code that touches device memory faults: say which allocation it was */
	static char altstack[1 << 16];
	stack_t ss = {};
	ss.ss_sp = altstack;
	ss.ss_size = sizeof altstack;
	sigaltstack(&ss, NULL);
	struct sigaction sa = {};
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
	sigaction(SIGSEGV, &sa, NULL);
	/* the .cu files' alignment checks (-fsanitize=alignment) trap with ud2 */
	struct sigaction si = {};
	si.sa_sigaction = on_sigill;
	si.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
	sigaction(SIGILL, &si, NULL);
	return 0;
}

/* Device memory becomes accessible while the device works (queued operations run) and
 * inaccessible again afterwards. */
void cx_dev_open(void)
{
	if (g_open_depth++ == 0 && g_arena_used)
		mprotect(g_arena, page_up(g_arena_used), PROT_READ | PROT_WRITE);
}

void cx_dev_close(void)
{
	if (--g_open_depth == 0 && g_arena_used)
		mprotect(g_arena, page_up(g_arena_used), PROT_NONE);
}

const Alloc *find_dev(uintptr_t a)
{
	static size_t cache;
	if (cache < g_dev.size()) {
		const Alloc &c = g_dev[cache];
		if (a - c.base < c.size)
			return &c;
	}
	size_t lo = 0, hi = g_dev.size();
	while (lo < hi) { /* the last allocation with base <= a */
		size_t mid = (lo + hi) / 2;
		if (g_dev[mid].base <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	cache = lo - 1;
	return &g_dev[lo - 1];
}

const Alloc *find_pinned(uintptr_t a)
{
	auto it = g_pinned.upper_bound(a);
	if (it == g_pinned.begin())
		return NULL;
	--it;
	return a - it->second.base < it->second.size ? &it->second : NULL;
}

/* "12 bytes past the end of the 4096-byte allocation at 0x..", "inside the freed ..." */
void describe(char *buf, size_t len, uintptr_t a, size_t n)
{
	if (!g_arena || a - (uintptr_t)g_arena >= ARENA_BYTES) {
		const Alloc *p = find_pinned(a);
		if (p)
			snprintf(buf, len, "%zu bytes into pinned host allocation %p of %zu bytes",
				 (size_t)(a - p->base), (void *)p->base, p->size);
		else
			snprintf(buf, len, "host memory that is not device memory (a host pointer "
				 "passed to the device?)");
		return;
	}
	const Alloc *al = find_dev(a);
	const Alloc *next = NULL;
	size_t i = al ? (size_t)(al - g_dev.data()) + 1 : 0;
	if (i < g_dev.size())
		next = &g_dev[i];
	if (al && a - al->base < al->size && al->live && a - al->base + n <= al->size)
		snprintf(buf, len, "byte %zu of device allocation #%llu of %zu bytes at %p",
			 (size_t)(a - al->base), (unsigned long long)al->serial, al->size,
			 (void *)al->base);
	else if (al && a - al->base < al->size && !al->live)
		snprintf(buf, len, "%zu bytes into device allocation #%llu of %zu bytes at %p, which "
			 "was freed (use after cudaFree)", (size_t)(a - al->base),
			 (unsigned long long)al->serial, al->size, (void *)al->base);
	else if (al && a - al->base < al->size)
		snprintf(buf, len, "bytes %zu..%zu of device allocation #%llu of %zu bytes at %p: "
			 "past its end", (size_t)(a - al->base), (size_t)(a - al->base) + n - 1,
			 (unsigned long long)al->serial, al->size, (void *)al->base);
	else if (al && (!next || a - al->base - al->size <= next->base - a))
		snprintf(buf, len, "%zu bytes past the end of device allocation #%llu of %zu bytes "
			 "at %p%s", (size_t)(a - al->base - al->size), (unsigned long long)al->serial,
			 al->size, (void *)al->base, al->live ? "" : " (freed)");
	else if (next)
		snprintf(buf, len, "%zu bytes before the start of device allocation #%llu of %zu "
			 "bytes at %p%s", (size_t)(next->base - a), (unsigned long long)next->serial,
			 next->size, (void *)next->base, next->live ? "" : " (freed)");
	else
		snprintf(buf, len, "device memory outside every allocation");
}

/* the live allocation holding [a, a + n), or NULL */
const Alloc *dev_range(uintptr_t a, size_t n)
{
	const Alloc *al = find_dev(a);
	if (al && al->live && a - al->base <= al->size && n <= al->size - (a - al->base))
		return al;
	return NULL;
}

int cx_device_range(const void *p, size_t bytes, const char *what, const char *arg)
{
	uintptr_t a = (uintptr_t)p;
	if (!p && bytes) {
		cx_say(what, "%s is a null pointer", arg);
		return 0;
	}
	if (!bytes)
		return 1;
	if (a - (uintptr_t)g_arena < g_arena_used) {
		if (dev_range(a, bytes))
			return 1;
	} else {
		const Alloc *pin = find_pinned(a);
		if (pin && bytes <= pin->size - (a - pin->base))
			return 1;
	}
	char d[400];
	const Alloc *al = a - (uintptr_t)g_arena < g_arena_used ? find_dev(a) : NULL;
	if (al && al->live && a - al->base < al->size)
		snprintf(d, sizeof d, "they run %zu bytes past the end of device allocation #%llu of "
			 "%zu bytes at %p", (size_t)(a + bytes - al->base - al->size),
			 (unsigned long long)al->serial, al->size, (void *)al->base);
	else
		describe(d, sizeof d, a, 1);
	cx_say(what, "%s: %zu bytes at %p do not fit in one live allocation: %s", arg, bytes, p, d);
	return 0;
}

static int malloc_refused(void);   /* a capture in the global mode is active */

extern "C" cudaError_t cudaMalloc(void **p, size_t bytes)
{
	API_ENTER();
	if (!p)
		return ret(cudaErrorInvalidValue);
	*p = NULL;
	if (malloc_refused())
		return ret(cudaErrorStreamCaptureUnsupported);
	if (arena_init() < 0)
		return ret(cudaErrorMemoryAllocation);
	if (bytes == 0)
		return cudaSuccess; /* cudaMalloc(0) gives NULL and succeeds */
	size_t start = (g_arena_used + ARENA_GAP + 255) & ~(size_t)255;
	size_t end = start + bytes;
	if (end > ARENA_BYTES || g_dev_live + bytes > ((size_t)1 << 36))
		return ret(cudaErrorMemoryAllocation);
	char *base = g_arena + start;
	/* the pages the new allocation adds become readable for the fill, then follow the state */
	size_t lo = start & ~(g_page - 1);
	mprotect(g_arena + lo, page_up(end) - lo, PROT_READ | PROT_WRITE);
	memset(base, 0xff, bytes);
	g_arena_used = end;
	if (!g_open_depth)
		mprotect(g_arena, page_up(g_arena_used), PROT_NONE);
	g_dev.push_back(Alloc{(uintptr_t)base, bytes, 1, ++g_alloc_serial, NULL, NULL});
	g_dev_live += bytes;
	*p = base;
	return cudaSuccess;
}

extern "C" cudaError_t cudaMallocHost(void **p, size_t bytes)
{
	API_ENTER();
	if (!p)
		return ret(cudaErrorInvalidValue);
	void *m = NULL;
	if (posix_memalign(&m, 4096, bytes ? bytes : 1))
		return ret(cudaErrorMemoryAllocation);
	memset(m, 0xff, bytes);
	g_pinned[(uintptr_t)m] = Alloc{(uintptr_t)m, bytes, 1, ++g_alloc_serial, NULL, NULL};
	*p = m;
	return cudaSuccess;
}

extern "C" cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned flags)
{
	(void)flags;
	return cudaMallocHost(p, bytes);
}

extern "C" cudaError_t cudaMemGetInfo(size_t *fr, size_t *total)
{
	API_ENTER();
	cudaDeviceProp prop;
	cudaGetDeviceProperties(&prop, g_device);
	if (total)
		*total = prop.totalGlobalMem;
	if (fr)
		*fr = prop.totalGlobalMem > g_dev_live ? prop.totalGlobalMem - g_dev_live : 0;
	return cudaSuccess;
}

static void segv_say(const char *s)
{
	ssize_t r = write(2, s, strlen(s));
	(void)r;
}

/* ---------------------------------------------------------------------------------------------
 * streams and events */

struct Op {
	std::function<void()> fn;
	const char *what;
};

/* A captured graph, and its instantiation: the operations in the order they were queued.  A
 * kernel keeps the argument values of its launch (the heap copy cx_launch made), a copy its
 * pointers, a cuBLASLt call its descriptors: a launch of the graph queues them all again, in
 * order, on the launch's stream - what a captured single-stream graph's nodes do on a GPU. */
struct CUgraph_st {
	std::vector<Op> ops;
};
struct CUgraphExec_st {
	std::vector<Op> ops;
	int live;
};

struct CUstream_st {
	std::deque<Op> q;
	unsigned flags;
	int live;
	CUgraph_st *cap;                /* capturing into it (cudaStreamBeginCapture), or NULL */
	int cap_mode;                   /* cudaStreamCaptureMode */
	int cap_bad;                    /* invalidated: cudaStreamEndCapture fails */
};

struct CUevent_st {
	CUstream_st *s;
	int pending;     /* recorded, not yet reached */
	int done;        /* the latest record reached */
	double t;        /* seconds, when reached */
	int live;
	int captured;    /* last recorded into a capture: waits on it are errors outside it */
	/* records made (host order) and the latest one reached: a wait or a synchronisation is for
	 * the record made before it, as CUDA's are, not for whichever record runs next - an event
	 * recorded again before its earlier record ran (a stream's work runs only when the host
	 * synchronises here) must not let a wait on the later record pass at the earlier one */
	unsigned long recorded, reached;
};

static CUstream_st g_null_stream = {{}, 0, 1, NULL, 0, 0};
static std::vector<CUstream_st *> g_streams; /* created ones, live or not */

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static CUstream_st *stream_of(cudaStream_t s)
{
	if (!s || s == cudaStreamLegacy || s == cudaStreamPerThread)
		return &g_null_stream;
	for (CUstream_st *x : g_streams)
		if (x == s)
			return x->live ? x : NULL;
	return NULL;
}

/* ---- host synchronisation and stream capture ----
 *
 * A host synchronisation (cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize,
 * cudaStreamQuery / cudaEventQuery, a blocking cudaMemcpy, cudaMemcpyAsync to pageable memory,
 * cudaFree, cudaFreeHost) is what the CUDA runtime refuses while a stream captures: with a
 * capture in cudaStreamCaptureModeGlobal (or ThreadLocal: the executor has one host thread that
 * matters) every such call fails with cudaErrorStreamCaptureUnsupported and invalidates the
 * capture, so cudaStreamEndCapture then fails with cudaErrorStreamCaptureInvalidated - the
 * "potentially unsafe API calls" of the Programming Guide's stream-capture section.  In
 * cudaStreamCaptureModeRelaxed only a synchronisation that covers the capturing stream (that
 * stream's, the device's, the legacy stream's) is refused.  cudaMalloc is refused in the global
 * mode too, and a copy from or to pageable host memory is refused while capturing in any mode
 * (a graph cannot stage pageable memory at each launch).
 *
 * LMTK_CUDA_EXEC_SYNCS=FILE appends one line per host synchronisation made between
 * cudaProfilerStart() and cudaProfilerStop() (the training step range train --profile marks):
 * "CALL QUEUED", QUEUED the operations still queued on every stream when it returned - 0 means
 * the device ran dry while the host waited, which a synchronisation inside a step does. */
static int g_capturing;                 /* streams capturing now */
int g_sync_range;                       /* profile.cpp: inside cudaProfilerStart..Stop */
static FILE *g_sync_log;

static void capture_invalidate(CUstream_st *only)
{
	for (CUstream_st *x : g_streams)
		if (x->cap && (!only || x == only))
			x->cap_bad = 1;
}

/* 0 when the host may wait for `target` (NULL: the whole device) now; else the refusal */
static cudaError_t sync_allowed(const char *call, CUstream_st *target)
{
	if (!g_capturing)
		return cudaSuccess;
	for (CUstream_st *x : g_streams) {
		if (!x->cap || !x->live)
			continue;
		if (x->cap_mode != cudaStreamCaptureModeRelaxed || !target || target == x ||
		    target == &g_null_stream) {
			cx_say(call, "a host synchronisation while a stream is capturing: the capture "
			       "is invalidated (cudaStreamEndCapture will fail)");
			capture_invalidate(x->cap_mode == cudaStreamCaptureModeRelaxed ? x : NULL);
			return ret(cudaErrorStreamCaptureUnsupported);
		}
	}
	return cudaSuccess;
}

static int malloc_refused(void)
{
	for (CUstream_st *x : g_streams)
		if (x->cap && x->cap_mode != cudaStreamCaptureModeRelaxed) {
			cx_say("cudaMalloc", "cudaMalloc while a stream is capturing (global mode)");
			capture_invalidate(NULL);
			return 1;
		}
	return 0;
}

static size_t queued_ops(void)
{
	size_t n = g_null_stream.q.size();
	for (CUstream_st *x : g_streams)
		if (x->live)
			n += x->q.size();
	return n;
}

static void sync_note(const char *call)
{
	static int init;
	if (!init) {
		init = 1;
		const char *f = getenv("LMTK_CUDA_EXEC_SYNCS");
		if (f && *f && !(g_sync_log = fopen(f, "a")))
			fprintf(stderr, "cuda-exec: LMTK_CUDA_EXEC_SYNCS=%s: cannot open it\n", f);
		if (g_sync_log)
			setvbuf(g_sync_log, NULL, _IOLBF, 0);
	}
	if (g_sync_log && g_sync_range)
		fprintf(g_sync_log, "%s %zu\n", call, queued_ops());
	if (g_prof_on)
		prof_line("{\"op\":\"sync\",\"call\":\"%s\",\"queued\":%zu}", call, queued_ops());
}

/* Runs the queued work of s (all of it, or until *until is done). */
static void flush(CUstream_st *s, const int *until = NULL)
{
	if (s->q.empty() || (until && *until))
		return;
	cx_dev_open();
	while (!s->q.empty() && !(until && *until)) {
		Op op = std::move(s->q.front());
		s->q.pop_front();
		if (g_sticky == cudaSuccess) /* after a fault nothing else runs */
			op.fn();
	}
	cx_dev_close();
}

/* Runs the queued work of s until event e's record number v has been reached. */
static void flush_to(CUstream_st *s, const CUevent_st *e, unsigned long v)
{
	if (s->q.empty() || e->reached >= v)
		return;
	cx_dev_open();
	while (!s->q.empty() && e->reached < v) {
		Op op = std::move(s->q.front());
		s->q.pop_front();
		if (g_sticky == cudaSuccess) /* after a fault nothing else runs */
			op.fn();
	}
	cx_dev_close();
}

static void flush_all(void)
{
	flush(&g_null_stream);
	for (CUstream_st *x : g_streams)
		if (x->live)
			flush(x);
	flush(&g_null_stream);
}

/* The legacy default stream waits for the work of every blocking stream before its own, and
 * blocking streams wait for it: queue order within a stream is kept, and these flushes enforce
 * the order between them. */
static cudaError_t enqueue(CUstream_st *s, const char *what, std::function<void()> fn)
{
	if (s->cap) {   /* captured: recorded into the graph, not run */
		if (s->cap_bad)
			return ret(cudaErrorStreamCaptureInvalidated);
		s->cap->ops.push_back(Op{std::move(fn), what});
		return cudaSuccess;
	}
	if (s == &g_null_stream && g_capturing) {
		for (CUstream_st *x : g_streams)
			if (x->cap && !(x->flags & cudaStreamNonBlocking)) {
				cx_say(what, "the legacy stream would wait for a capturing blocking stream");
				capture_invalidate(x);
				return ret(cudaErrorStreamCaptureImplicit);
			}
	}
	if (s == &g_null_stream) {
		for (CUstream_st *x : g_streams)
			if (x->live && !(x->flags & cudaStreamNonBlocking))
				flush(x);
	} else if (!(s->flags & cudaStreamNonBlocking)) {
		flush(&g_null_stream);
	}
	if (cfg.trace) {   /* when the host queues it, and where: streams numbered from 1 as created */
		int id = 0;
		for (size_t i = 0; i < g_streams.size() && s != &g_null_stream; i++)
			if (g_streams[i] == s)
				id = (int)i + 1;
		fprintf(stderr, "cuda-exec: queued %s on stream %d\n", what, id);
	}
	s->q.push_back(Op{std::move(fn), what});
	if (cfg.eager)
		flush(s);
	return cudaSuccess;
}

cudaError_t cx_enqueue(cudaStream_t st, const char *what, std::function<void()> fn)
{
	API_ENTER();
	CUstream_st *s = stream_of(st);
	if (!s)
		return ret(cudaErrorInvalidResourceHandle);
	return enqueue(s, what, std::move(fn));
}

extern "C" cudaError_t cudaStreamCreateWithFlags(cudaStream_t *ps, unsigned flags)
{
	API_ENTER();
	if (!ps || (flags & ~1u))
		return ret(cudaErrorInvalidValue);
	CUstream_st *s = new CUstream_st{{}, flags, 1, NULL, 0, 0};
	g_streams.push_back(s);
	*ps = s;
	return cudaSuccess;
}

extern "C" cudaError_t cudaStreamCreate(cudaStream_t *ps)
{
	return cudaStreamCreateWithFlags(ps, cudaStreamDefault);
}

extern "C" cudaError_t cudaStreamDestroy(cudaStream_t st)
{
	API_ENTER();
	CUstream_st *s = stream_of(st);
	if (!s || s == &g_null_stream)
		return ret(cudaErrorInvalidResourceHandle);
	if (s->cap)
		return ret(cudaErrorStreamCaptureUnsupported);
	flush(s); /* queued work still completes */
	s->live = 0;
	return cudaSuccess;
}

extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t st)
{
	API_ENTER();
	CUstream_st *s = stream_of(st);
	if (!s)
		return ret(cudaErrorInvalidResourceHandle);
	cudaError_t e = sync_allowed("cudaStreamSynchronize", s);
	if (e)
		return e;
	if (s == &g_null_stream)
		flush_all();
	else
		flush(s);
	sync_note("cudaStreamSynchronize");
	return g_sticky != cudaSuccess ? g_sticky : cudaSuccess;
}

extern "C" cudaError_t cudaStreamQuery(cudaStream_t st)
{
	/* "complete" is always a possible answer once the work has run */
	return cudaStreamSynchronize(st);
}

/* for the executor itself (cudaProfilerStart/Stop): the device's work, done, not counted */
void cx_flush_all(void)
{
	std::lock_guard<std::recursive_mutex> l(g_mu);
	flush_all();
}

extern "C" cudaError_t cudaDeviceSynchronize(void)
{
	API_ENTER();
	cudaError_t e = sync_allowed("cudaDeviceSynchronize", NULL);
	if (e)
		return e;
	flush_all();
	sync_note("cudaDeviceSynchronize");
	return g_sticky;
}

/* ---- graphs ---- */

extern "C" cudaError_t cudaStreamBeginCapture(cudaStream_t st, enum cudaStreamCaptureMode mode)
{
	API_ENTER();
	CUstream_st *s = stream_of(st);
	if (!s)
		return ret(cudaErrorInvalidResourceHandle);
	if (s == &g_null_stream) {
		cx_say("cudaStreamBeginCapture", "the legacy stream cannot be captured");
		return ret(cudaErrorStreamCaptureUnsupported);
	}
	if (s->cap)
		return ret(cudaErrorIllegalState);
	if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
	    mode != cudaStreamCaptureModeRelaxed)
		return ret(cudaErrorInvalidValue);
	s->cap = new CUgraph_st;
	s->cap_mode = mode;
	s->cap_bad = 0;
	g_capturing++;
	return cudaSuccess;
}

extern "C" cudaError_t cudaStreamEndCapture(cudaStream_t st, cudaGraph_t *g)
{
	API_ENTER();
	CUstream_st *s = stream_of(st);
	if (!s || !g)
		return ret(!s ? cudaErrorInvalidResourceHandle : cudaErrorInvalidValue);
	if (!s->cap)
		return ret(cudaErrorIllegalState);
	CUgraph_st *graph = s->cap;
	int bad = s->cap_bad;
	s->cap = NULL;
	s->cap_bad = 0;
	g_capturing--;
	if (bad) {
		delete graph;
		*g = NULL;
		return ret(cudaErrorStreamCaptureInvalidated);
	}
	*g = graph;
	return cudaSuccess;
}

extern "C" cudaError_t cudaStreamIsCapturing(cudaStream_t st, enum cudaStreamCaptureStatus *status)
{
	API_ENTER();
	CUstream_st *s = stream_of(st);
	if (!s || !status)
		return ret(!s ? cudaErrorInvalidResourceHandle : cudaErrorInvalidValue);
	*status = !s->cap ? cudaStreamCaptureStatusNone
	        : s->cap_bad ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
	return cudaSuccess;
}

extern "C" cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *x, cudaGraph_t g,
						     unsigned long long flags)
{
	API_ENTER();
	if (!x || !g || flags)   /* no flag (auto-free, upload, device launch) is implemented */
		return ret(cudaErrorInvalidValue);
	*x = new CUgraphExec_st{g->ops, 1};
	return cudaSuccess;
}

extern "C" cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g,
					    unsigned long long flags)
{
	return cudaGraphInstantiateWithFlags(x, g, flags);
}

extern "C" cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t st)
{
	API_ENTER();
	CUstream_st *s = stream_of(st);
	if (!x || !x->live || !s)
		return ret(cudaErrorInvalidResourceHandle);
	for (const Op &op : x->ops) {
		cudaError_t e = enqueue(s, op.what, op.fn);
		if (e)
			return e;
	}
	return cudaSuccess;
}

extern "C" cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x)
{
	API_ENTER();
	if (!x || !x->live)
		return ret(cudaErrorInvalidResourceHandle);
	x->live = 0;   /* kept: a launch already queued holds copies of its operations */
	x->ops.clear();
	return cudaSuccess;
}

extern "C" cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
	API_ENTER();
	if (!g)
		return ret(cudaErrorInvalidResourceHandle);
	delete g;
	return cudaSuccess;
}

extern "C" cudaError_t cudaEventCreateWithFlags(cudaEvent_t *pe, unsigned flags)
{
	API_ENTER();
	if (!pe || (flags & ~7u))
		return ret(cudaErrorInvalidValue);
	*pe = new CUevent_st{NULL, 0, 0, 0.0, 1, 0, 0, 0};
	return cudaSuccess;
}

extern "C" cudaError_t cudaEventCreate(cudaEvent_t *pe)
{
	return cudaEventCreateWithFlags(pe, 0);
}

extern "C" cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	API_ENTER();
	if (!e || !e->live)
		return ret(cudaErrorInvalidResourceHandle);
	e->live = 0; /* kept: queued records may still refer to it */
	return cudaSuccess;
}

extern "C" cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t st)
{
	API_ENTER();
	CUstream_st *s = stream_of(st);
	if (!e || !e->live || !s)
		return ret(cudaErrorInvalidResourceHandle);
	e->s = s;
	e->pending = !s->cap;
	e->done = 0;
	e->captured = s->cap != NULL;
	unsigned long v = ++e->recorded;
	return enqueue(s, "cudaEventRecord", [e, v]() {
		if (v > e->reached)
			e->reached = v;
		if (e->reached >= e->recorded) {
			e->done = 1;
			e->pending = 0;
		}
		e->t = now();
	});
}

extern "C" cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	API_ENTER();
	if (!e || !e->live)
		return ret(cudaErrorInvalidResourceHandle);
	if (e->captured)
		return ret(cudaErrorCapturedEvent);
	cudaError_t r = sync_allowed("cudaEventSynchronize", e->pending ? e->s : NULL);
	if (r)
		return r;
	if (e->pending)
		flush(e->s, &e->done);
	sync_note("cudaEventSynchronize");
	return g_sticky;
}

extern "C" cudaError_t cudaEventQuery(cudaEvent_t e)
{
	return cudaEventSynchronize(e);
}

extern "C" cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t e, unsigned flags)
{
	API_ENTER();
	CUstream_st *s = stream_of(st);
	if (!e || !e->live || !s || flags)
		return ret(cudaErrorInvalidResourceHandle);
	if (e->captured && e->s == s && s->cap)
		return cudaSuccess;   /* recorded earlier in this capture: the order holds it */
	if (e->captured || (s->cap && e->pending)) {
		/* joining streams into a capture (fork and join) is not implemented here; work
		 * outside a capture cannot be waited for inside it */
		cx_say("cudaStreamWaitEvent", "%s", e->captured ? "an event of another capture or "
		       "stream: capture across streams is not implemented by the executor"
		       : "a capturing stream cannot wait for uncaptured work");
		capture_invalidate(NULL);
		return ret(e->captured ? cudaErrorStreamCaptureUnsupported
				       : cudaErrorStreamCaptureIsolation);
	}
	if (!e->pending)
		return cudaSuccess; /* never recorded, or already reached: nothing to wait for */
	CUstream_st *src = e->s;
	unsigned long v = e->recorded;   /* the record this wait is for */
	return enqueue(s, "cudaStreamWaitEvent", [e, src, v]() {
		if (e->reached < v)
			flush_to(src, e, v);
	});
}

extern "C" cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	API_ENTER();
	if (!ms || !a || !b)
		return ret(cudaErrorInvalidValue);
	if (!a->done || !b->done)
		return ret(cudaErrorNotReady);
	*ms = (float)((b->t - a->t) * 1e3); /* host time of the emulation: not the GPU's */
	return cudaSuccess;
}

/* ---------------------------------------------------------------------------------------------
 * copies */

enum { MEM_HOST, MEM_PINNED, MEM_DEVICE };

static int mem_kind(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	if (g_arena && a - (uintptr_t)g_arena < ARENA_BYTES)
		return MEM_DEVICE;
	return find_pinned(a) ? MEM_PINNED : MEM_HOST;
}

static cudaError_t copy_check(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
			      int *kd, int *ks, const char *what)
{
	*kd = mem_kind(dst);
	*ks = mem_kind(src);
	int dd = *kd == MEM_DEVICE, sd = *ks == MEM_DEVICE;
	int want_dd = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
	int want_sd = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
	if (kind > cudaMemcpyDefault)
		return ret(cudaErrorInvalidMemcpyDirection);
	if (kind != cudaMemcpyDefault && (dd != want_dd || sd != want_sd)) {
		cx_say(what, "copy kind %d, but the destination %p is %s memory and the source %p "
		       "is %s memory", (int)kind, dst, dd ? "device" : "host", src,
		       sd ? "device" : "host");
		return ret(cudaErrorInvalidValue);
	}
	if (dd && !cx_device_range(dst, bytes, what, "destination"))
		return ret(cudaErrorInvalidValue);
	if (sd && !cx_device_range(src, bytes, what, "source"))
		return ret(cudaErrorInvalidValue);
	return cudaSuccess;
}

static void prof_copy(int kd, int ks, size_t bytes)
{
	if (g_prof_on)
		prof_line("{\"op\":\"copy\",\"kind\":\"%s\",\"bytes\":%zu}",
			  kd == MEM_DEVICE && ks == MEM_DEVICE ? "DtoD"
			  : kd == MEM_DEVICE		       ? "HtoD"
			  : ks == MEM_DEVICE		       ? "DtoH"
							       : "HtoH",
			  bytes);
}

extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
				       cudaMemcpyKind kind, cudaStream_t st)
{
	API_ENTER();
	CUstream_st *s = stream_of(st);
	if (!s)
		return ret(cudaErrorInvalidResourceHandle);
	if (!bytes)
		return cudaSuccess;
	int kd, ks;
	cudaError_t e = copy_check(dst, src, bytes, kind, &kd, &ks, "cudaMemcpyAsync");
	if (e)
		return e;
	if (s->cap && (ks == MEM_HOST || kd == MEM_HOST)) {
		cx_say("cudaMemcpyAsync", "a copy %s pageable host memory %p while the stream is "
		       "capturing (use pinned memory)", ks == MEM_HOST ? "from" : "to",
		       ks == MEM_HOST ? src : dst);
		capture_invalidate(s);
		return ret(cudaErrorStreamCaptureUnsupported);
	}
	if (ks == MEM_HOST && kd == MEM_DEVICE) {
		/* From pageable memory the runtime stages the data before returning: the caller
		 * may reuse src at once. */
		std::shared_ptr<std::vector<char>> stage(new std::vector<char>((const char *)src,
									       (const char *)src + bytes));
		return enqueue(s, "cudaMemcpyAsync", [dst, stage, kd, ks]() {
			prof_copy(kd, ks, stage->size());
			memcpy(dst, stage->data(), stage->size());
		});
	}
	if (kd == MEM_HOST && ks == MEM_DEVICE) {
		/* to pageable memory: returns once the copy is done */
		if ((e = sync_allowed("cudaMemcpyAsync to pageable memory", s)))
			return e;
		flush(s);
		sync_note("cudaMemcpyAsync(DtoH pageable)");
		if (g_sticky)
			return g_sticky;
		prof_copy(kd, ks, bytes);
		cx_dev_open();
		memcpy(dst, src, bytes);
		cx_dev_close();
		return cudaSuccess;
	}
	return enqueue(s, "cudaMemcpyAsync", [dst, src, bytes, kd, ks]() {
		prof_copy(kd, ks, bytes);
		memmove(dst, src, bytes);
	});
}

extern "C" cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
	API_ENTER();
	if (!bytes)
		return cudaSuccess;
	int kd, ks;
	cudaError_t e = copy_check(dst, src, bytes, kind, &kd, &ks, "cudaMemcpy");
	if (e)
		return e;
	if ((e = sync_allowed("cudaMemcpy", &g_null_stream)))
		return e;
	flush_all(); /* synchronous with respect to the host and the legacy stream */
	sync_note("cudaMemcpy");
	if (g_sticky)
		return g_sticky;
	prof_copy(kd, ks, bytes);
	cx_dev_open();
	memmove(dst, src, bytes);
	cx_dev_close();
	return cudaSuccess;
}

extern "C" cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t st)
{
	API_ENTER();
	CUstream_st *s = stream_of(st);
	if (!s)
		return ret(cudaErrorInvalidResourceHandle);
	if (!bytes)
		return cudaSuccess;
	if (mem_kind(p) != MEM_DEVICE) {
		cx_say("cudaMemsetAsync", "%p is not device memory", p);
		return ret(cudaErrorInvalidValue);
	}
	if (!cx_device_range(p, bytes, "cudaMemsetAsync", "destination"))
		return ret(cudaErrorInvalidValue);
	return enqueue(s, "cudaMemsetAsync", [p, v, bytes]() {
		if (g_prof_on)
			prof_line("{\"op\":\"memset\",\"bytes\":%zu}", bytes);
		memset(p, v, bytes);
	});
}

extern "C" cudaError_t cudaMemset(void *p, int v, size_t bytes)
{
	cudaError_t e = cudaMemsetAsync(p, v, bytes, 0);
	return e ? e : cudaDeviceSynchronize();
}

extern "C" cudaError_t cudaFree(void *p)
{
	API_ENTER();
	if (!p)
		return cudaSuccess;
	uintptr_t a = (uintptr_t)p;
	const Alloc *al = find_dev(a);
	if (!g_arena || a - (uintptr_t)g_arena >= g_arena_used || !al || al->base != a) {
		cx_say("cudaFree", "%p is not the start of a device allocation", p);
		return ret(cudaErrorInvalidValue);
	}
	if (!al->live) {
		cx_say("cudaFree", "%p (allocation #%llu) was already freed", p,
		       (unsigned long long)al->serial);
		return ret(cudaErrorInvalidValue);
	}
	cudaError_t e = sync_allowed("cudaFree", NULL);
	if (e)
		return e;
	flush_all(); /* cudaFree synchronises the device */
	sync_note("cudaFree");
	if (g_sticky)
		return g_sticky;
	Alloc *w = &g_dev[al - g_dev.data()];
	w->live = 0;
	gshadow_free(w);
	g_dev_live -= w->size;
	/* give the whole pages inside it back; the addresses stay reserved */
	uintptr_t lo = (w->base + g_page - 1) & ~(uintptr_t)(g_page - 1);
	uintptr_t hi = (w->base + w->size) & ~(uintptr_t)(g_page - 1);
	if (hi > lo)
		madvise((void *)lo, hi - lo, MADV_DONTNEED);
	return cudaSuccess;
}

extern "C" cudaError_t cudaFreeHost(void *p)
{
	API_ENTER();
	auto it = g_pinned.find((uintptr_t)p);
	if (it == g_pinned.end())
		return ret(cudaErrorInvalidValue);
	cudaError_t e = sync_allowed("cudaFreeHost", NULL);
	if (e)
		return e;
	flush_all();
	sync_note("cudaFreeHost");
	free(p);
	g_pinned.erase(it);
	return cudaSuccess;
}

/* ---------------------------------------------------------------------------------------------
 * the device: an H100 SXM5 80GB as cudaGetDeviceProperties reports it */

#define H100_SMEM_OPTIN 232448 /* 227 KiB per block with the opt-in */
#define H100_SMEM_BLOCK 49152  /* 48 KiB without it */

extern "C" cudaError_t cudaGetDeviceCount(int *count)
{
	std::lock_guard<std::recursive_mutex> l(g_mu);
	config_init();
	if (!count)
		return ret(cudaErrorInvalidValue);
	*count = cfg.devices > 0 ? cfg.devices : 0;
	return cfg.devices > 0 ? cudaSuccess : ret(cudaErrorNoDevice);
}

extern "C" cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int dev)
{
	std::lock_guard<std::recursive_mutex> l(g_mu);
	config_init();
	if (!p)
		return ret(cudaErrorInvalidValue);
	if (dev < 0 || dev >= cfg.devices)
		return ret(cudaErrorInvalidDevice);
	memset(p, 0, sizeof *p);
	snprintf(p->name, sizeof p->name, "NVIDIA H100 80GB HBM3 (cuda-exec: emulated on the CPU)");
	p->totalGlobalMem = (size_t)81559 << 20;
	p->sharedMemPerBlock = H100_SMEM_BLOCK;
	p->regsPerBlock = 65536;
	p->warpSize = 32;
	p->memPitch = 2147483647;
	p->maxThreadsPerBlock = 1024;
	p->maxThreadsDim[0] = 1024, p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
	p->maxGridSize[0] = 2147483647, p->maxGridSize[1] = 65535, p->maxGridSize[2] = 65535;
	p->clockRate = 1980000;
	p->totalConstMem = 65536;
	p->major = 9, p->minor = 0;
	p->multiProcessorCount = 132;
	p->canMapHostMemory = 1, p->concurrentKernels = 1, p->ECCEnabled = 1;
	p->pciBusID = 0x18 + dev;
	p->asyncEngineCount = 3, p->unifiedAddressing = 1;
	p->memoryClockRate = 2619000, p->memoryBusWidth = 5120, p->l2CacheSize = 52428800;
	p->persistingL2CacheMaxSize = 82837504;
	p->maxThreadsPerMultiProcessor = 2048;
	p->sharedMemPerMultiprocessor = 233472;
	p->regsPerMultiprocessor = 65536;
	p->managedMemory = 1;
	p->sharedMemPerBlockOptin = H100_SMEM_OPTIN;
	p->reservedSharedMemPerBlock = 1024;
	p->maxBlocksPerMultiProcessor = 32;
	return cudaSuccess;
}

extern "C" cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr attr, int dev)
{
	cudaDeviceProp p;
	cudaError_t e = cudaGetDeviceProperties(&p, dev);
	if (e)
		return e;
	switch (attr) {
	case cudaDevAttrMaxThreadsPerBlock: *v = p.maxThreadsPerBlock; break;
	case cudaDevAttrMaxBlockDimX: *v = p.maxThreadsDim[0]; break;
	case cudaDevAttrMaxBlockDimY: *v = p.maxThreadsDim[1]; break;
	case cudaDevAttrMaxBlockDimZ: *v = p.maxThreadsDim[2]; break;
	case cudaDevAttrMaxGridDimX: *v = p.maxGridSize[0]; break;
	case cudaDevAttrMaxGridDimY: *v = p.maxGridSize[1]; break;
	case cudaDevAttrMaxGridDimZ: *v = p.maxGridSize[2]; break;
	case cudaDevAttrMaxSharedMemoryPerBlock: *v = (int)p.sharedMemPerBlock; break;
	case cudaDevAttrWarpSize: *v = 32; break;
	case cudaDevAttrMultiProcessorCount: *v = p.multiProcessorCount; break;
	case cudaDevAttrComputeCapabilityMajor: *v = p.major; break;
	case cudaDevAttrComputeCapabilityMinor: *v = p.minor; break;
	case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *v = (int)p.sharedMemPerMultiprocessor; break;
	case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = (int)p.sharedMemPerBlockOptin; break;
	default: return ret(cudaErrorInvalidValue);
	}
	return cudaSuccess;
}

extern "C" cudaError_t cudaGetDevice(int *dev)
{
	if (!dev)
		return ret(cudaErrorInvalidValue);
	*dev = g_device;
	return cudaSuccess;
}

extern "C" cudaError_t cudaSetDevice(int dev)
{
	std::lock_guard<std::recursive_mutex> l(g_mu);
	config_init();
	if (dev < 0 || dev >= cfg.devices)
		return ret(cudaErrorInvalidDevice);
	g_device = dev;
	return cudaSuccess;
}

extern "C" cudaError_t cudaRuntimeGetVersion(int *v)
{
	*v = 13000;
	return cudaSuccess;
}

extern "C" cudaError_t cudaDriverGetVersion(int *v)
{
	*v = 13000;
	return cudaSuccess;
}

/* Ends the context: queued work is dropped, allocations are released, a sticky error is
 * cleared (the executor's tests recover from provoked faults with it). */
extern "C" cudaError_t cudaDeviceReset(void)
{
	std::lock_guard<std::recursive_mutex> l(g_mu);
	g_null_stream.q.clear();
	for (CUstream_st *x : g_streams) {
		x->q.clear();
		if (x->cap)
			delete x->cap;
		x->cap = NULL;
		x->cap_bad = 0;
	}
	g_capturing = 0;
	for (Alloc &a : g_dev)
		if (a.live) {
			a.live = 0;
			g_dev_live -= a.size;
			gshadow_free(&a);
		}
	g_sticky = g_last = cudaSuccess;
	return cudaSuccess;
}

/* ---------------------------------------------------------------------------------------------
 * kernels: names, attributes, launch checks */

struct FuncAttr {
	int max_dyn = H100_SMEM_BLOCK;
};
static std::unordered_map<const void *, FuncAttr> g_attr;
static std::unordered_map<const void *, std::string> g_names;

std::string demangle(const char *sym)
{
	int st = 0;
	char *d = abi::__cxa_demangle(sym, NULL, NULL, &st);
	std::string s = d && !st ? d : sym;
	free(d);
	return s;
}

/* "attn_fwd_k<64>": the demangled name without return type and parameters */
std::string short_name(std::string s)
{
	int depth = 0;
	for (size_t i = 0; i < s.size(); i++) {
		char c = s[i];
		if (c == '<')
			depth++;
		else if (c == '>')
			depth--;
		else if (c == '(' && depth == 0) {
			s.resize(i);
			break;
		}
	}
	if (s.compare(0, 5, "void ") == 0)
		s = s.substr(5);
	return s;
}

static const char *kernel_name(const void *k)
{
	auto it = g_names.find(k);
	if (it != g_names.end())
		return it->second.c_str();
	Dl_info di;
	std::string n;
	if (dladdr(k, &di) && di.dli_sname && di.dli_saddr == k)
		n = short_name(demangle(di.dli_sname));
	else {
		char b[64];
		snprintf(b, sizeof b, "kernel@%p", k);
		n = b;
	}
	return g_names.emplace(k, n).first->second.c_str();
}

extern "C" cudaError_t cx_func_set_attribute(const void *f, cudaFuncAttribute attr, int value)
{
	API_ENTER();
	if (!f)
		return ret(cudaErrorInvalidDeviceFunction);
	switch (attr) {
	case cudaFuncAttributeMaxDynamicSharedMemorySize:
		/* at most the opt-in limit less the kernel's static shared memory (not known here:
		 * counted as 0) */
		if (value < 0 || value > H100_SMEM_OPTIN) {
			cx_say("cudaFuncSetAttribute", "%s: MaxDynamicSharedMemorySize %d exceeds the "
			       "device's %d bytes per block", kernel_name(f), value, H100_SMEM_OPTIN);
			return ret(cudaErrorInvalidValue);
		}
		g_attr[f].max_dyn = value;
		return cudaSuccess;
	case cudaFuncAttributePreferredSharedMemoryCarveout:
		return value >= -1 && value <= 100 ? cudaSuccess : ret(cudaErrorInvalidValue);
	}
	return ret(cudaErrorInvalidValue);
}

extern "C" cudaError_t cx_func_get_attributes(cudaFuncAttributes *a, const void *f)
{
	API_ENTER();
	if (!a || !f)
		return ret(cudaErrorInvalidValue);
	memset(a, 0, sizeof *a);
	a->maxThreadsPerBlock = 1024;
	a->numRegs = 32;
	a->ptxVersion = a->binaryVersion = 90;
	a->maxDynamicSharedSizeBytes = g_attr.count(f) ? g_attr[f].max_dyn : H100_SMEM_BLOCK;
	a->preferredShmemCarveout = -1;
	return cudaSuccess;
}

extern "C" cudaError_t cx_launch(const void *kernel, cx_invoke_fn invoke, void *args,
				 cx_destroy_fn destroy, dim3 grid, dim3 block, size_t smem,
				 cudaStream_t st)
{
	std::unique_lock<std::recursive_mutex> lock(g_mu);
	config_init();
	if (g_sticky != cudaSuccess) {
		destroy(args);
		return g_sticky;
	}
	CUstream_st *s = stream_of(st);
	cudaError_t e = cudaSuccess;
	const char *name = kernel ? kernel_name(kernel) : "(null)";
	unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
	int max_dyn = g_attr.count(kernel) ? g_attr[kernel].max_dyn : H100_SMEM_BLOCK;
	if (!kernel)
		e = cudaErrorInvalidDeviceFunction;
	else if (!s)
		e = cudaErrorInvalidResourceHandle;
	else if (!block.x || !block.y || !block.z || block.x > 1024 || block.y > 1024 ||
		 block.z > 64 || threads > 1024)
		e = cudaErrorInvalidConfiguration;
	else if (!grid.x || !grid.y || !grid.z || grid.x > 2147483647u || grid.y > 65535 ||
		 grid.z > 65535)
		e = cudaErrorInvalidConfiguration;
	else if (smem > (size_t)max_dyn)
		e = cudaErrorInvalidValue;
	if (e) {
		char why[200] = "";
		if (e == cudaErrorInvalidValue)
			snprintf(why, sizeof why, ": %zu bytes of dynamic shared memory, the kernel "
				 "allows %d (cudaFuncSetAttribute MaxDynamicSharedMemorySize raises it "
				 "up to %d)", smem, max_dyn, H100_SMEM_OPTIN);
		cx_say("launch", "%s<<<(%u,%u,%u), (%u,%u,%u), %zu>>>: %s%s", name, grid.x, grid.y,
		       grid.z, block.x, block.y, block.z, smem, cudaGetErrorString(e), why);
		destroy(args);
		return ret(e);
	}
	if (arena_init() < 0) {
		destroy(args);
		return ret(cudaErrorMemoryAllocation);
	}
	static uint64_t serial;
	Launch *L = new Launch{kernel, name, invoke, args, grid, block, smem, 0};
	std::shared_ptr<Launch> sp(L, [destroy](Launch *x) {
		destroy(x->args);
		delete x;
	});
	/* numbered when it runs: a captured launch runs once per graph launch, each a launch of
	 * its own to the profile and the thread-order seed */
	return enqueue(s, name, [sp]() {
		sp->serial = ++serial;
		run_kernel(sp.get());
	});
}

/* Where a CUDA thread that trapped continues: the kernel fails like any other. */
extern "C" __attribute__((used)) void cx_trapped(uintptr_t pc)
{
	Dl_info di;
	std::string fn = "?";
	if (dladdr((void *)pc, &di) && di.dli_sname)
		fn = short_name(demangle(di.dli_sname));
	kfail(cudaErrorMisalignedAddress, g_cur, "misaligned access in %s (pc %p): a pointer does "
	      "not have its type's alignment (the device faults; found by the alignment check)",
	      fn.c_str(), (void *)pc);
	abort();
}

/* A trap inside a kernel (the alignment check's ud2) resumes the thread in cx_trapped, which
 * reports it; anywhere else the default action ends the process. */
static void on_sigill(int sig, siginfo_t *si, void *ucv)
{
	(void)si;
#if defined(__x86_64__) && defined(REG_RIP)
	if (g_running && g_cur) {
		ucontext_t *uc = (ucontext_t *)ucv;
		greg_t pc = uc->uc_mcontext.gregs[REG_RIP];
		greg_t sp = uc->uc_mcontext.gregs[REG_RSP];
		sp = (sp - 256) & ~(greg_t)15; /* below the red zone, aligned as at a call */
		sp -= 8;
		*(greg_t *)sp = pc; /* a return address for debuggers */
		uc->uc_mcontext.gregs[REG_RSP] = sp;
		uc->uc_mcontext.gregs[REG_RDI] = pc;
		uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)&cx_trapped;
		return;
	}
#else
	(void)ucv;
#endif
	signal(sig, SIG_DFL);
}

/* The fault handler: host code touching device memory, or a fiber's stack overflowing. */
static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	uintptr_t a = (uintptr_t)si->si_addr;
	char buf[700];
	if (g_arena && a - (uintptr_t)g_arena < ARENA_BYTES && !g_open_depth) {
		char d[400];
		describe(d, sizeof d, a, 1);
		snprintf(buf, sizeof buf, "cuda-exec: host code touched device memory at %p (%s); "
			 "device memory is not host-accessible: copy it with cudaMemcpy\n",
			 (void *)a, d);
		segv_say(buf);
	} else if (g_running && g_cur) {
		snprintf(buf, sizeof buf, "cuda-exec: kernel %s block (%u,%u,%u) thread (%u,%u,%u): "
			 "fault at %p (stack overflow? set LMTK_CUDA_EXEC_STACK_KB above %zu)\n",
			 g_launch->name, g_block.x, g_block.y, g_block.z, g_cur->tid.x, g_cur->tid.y,
			 g_cur->tid.z, (void *)a, cfg.stack >> 10);
		segv_say(buf);
	}
	signal(sig, SIG_DFL); /* SA_RESETHAND did it already; the fault repeats and kills */
}
