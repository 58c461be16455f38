/* exec - the CPU executor for the CUDA subset the backend uses: device memory, streams and
 * events, kernel launches, the threads of a block as fibers, and the checks on every memory
 * access a kernel makes.
 *
 * Execution model.  The runtime API queues work (kernels, copies, memsets, library calls) on
 * per-stream queues and runs it only when the host synchronises (cudaStreamSynchronize, a
 * blocking copy, cudaFree, ...), so a host that reads results before synchronising sees stale
 * memory, as on a GPU.  A kernel runs its blocks one after another on the calling host thread,
 * in an order chosen by LMTK_CUDA_EXEC_ORDER (forward, reverse or random[:seed]; blocks of a grid
 * may run in any order on a GPU).  Inside a block every CUDA thread is a fiber with its own
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
 * call __tsan_readN/__tsan_writeN before every memory access; this file implements those hooks
 * (no ThreadSanitizer runtime is linked).  Outside a kernel a hook returns at once; inside, the
 * address must be the thread's own stack, the block's shared memory (within the launch's dynamic
 * size), a live device allocation or pinned host memory, and an access the compiler knows to be
 * naturally aligned must be so on the device too.  Anything else stops the kernel with a message
 * naming the kernel, block, thread, address and the allocation it missed, and the launch fails
 * with a sticky error, as a faulting kernel does.  A shadow of shared memory records, per byte,
 * the last writer and readers in the current barrier interval: a byte written by one thread and
 * read or written by another with no barrier between (a __syncwarp() over both counts, for lanes
 * of one warp) is a race, and a byte read before any thread of the block wrote it is
 * uninitialised shared memory; both are reported with the kernel, the variable and the index.
 *
 * What this cannot see: timing and performance; the memory model across blocks and across
 * streams beyond what the order of execution exposes (blocks never run concurrently here);
 * register pressure and the launch bounds the compiler would enforce; local memory overflow
 * beyond the fiber stacks; the exact bits of the device's fast math (the host libm is used,
 * within the documented error). */
#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cx_host.h"
#include "cuda_runtime.h"
#include "cx_dynsmem.h"

/* ---------------------------------------------------------------------------------------------
 * configuration, diagnostics, errors */

static struct {
	int inited;
	int order;          /* 0 forward, 1 reverse, 2 random */
	uint64_t seed;
	int shadow;         /* race and uninitialised-read shadow of shared memory */
	int devices;        /* what cudaGetDeviceCount answers */
	size_t stack;       /* bytes per fiber stack */
	int trace;          /* print each launch */
} cfg;

static std::recursive_mutex g_mu;
static char g_diag[2048];
static cudaError_t g_last = cudaSuccess;   /* cudaGetLastError */
static cudaError_t g_sticky = cudaSuccess; /* an execution error: every later call returns it */
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
}

/* for the executor's own tests: another thread order from now on */
extern "C" void cx_test_set_order(int order, unsigned long long seed)
{
	config_init();
	cfg.order = order;
	cfg.seed = seed;
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

struct Alloc {
	uintptr_t base;
	size_t size;
	int live;
	uint64_t serial;
};

#define ARENA_BYTES ((size_t)1 << 38) /* address space only (PROT_NONE, MAP_NORESERVE) */
#define ARENA_GAP 512                 /* unused bytes between two allocations */
static char *g_arena;
static size_t g_arena_used;           /* bytes handed out, gaps included */
static int g_open_depth;              /* > 0: the device works, its memory is accessible */
static std::vector<Alloc> g_dev;      /* increasing base: addresses are never reused */
static std::map<uintptr_t, Alloc> g_pinned;
static size_t g_dev_live;
static uint64_t g_alloc_serial;
static size_t g_page;

static size_t page_up(size_t x)
{
	return (x + g_page - 1) & ~(g_page - 1);
}

static void on_segv(int sig, siginfo_t *si, void *uc);
static void on_sigill(int sig, siginfo_t *si, void *uc);

static int arena_init(void)
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

static const Alloc *find_dev(uintptr_t a)
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

static const Alloc *find_pinned(uintptr_t a)
{
	auto it = g_pinned.upper_bound(a);
	if (it == g_pinned.begin())
		return NULL;
	--it;
	return a - it->second.base < it->second.size ? &it->second : NULL;
}

/* "12 bytes past the end of the 4096-byte allocation at 0x..", "inside the freed ..." */
static void describe(char *buf, size_t len, uintptr_t a, size_t n)
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
static const Alloc *dev_range(uintptr_t a, size_t n)
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

extern "C" cudaError_t cudaMalloc(void **p, size_t bytes)
{
	API_ENTER();
	if (!p)
		return ret(cudaErrorInvalidValue);
	*p = NULL;
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
	g_dev.push_back(Alloc{(uintptr_t)base, bytes, 1, ++g_alloc_serial});
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
	g_pinned[(uintptr_t)m] = Alloc{(uintptr_t)m, bytes, 1, ++g_alloc_serial};
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

struct CUstream_st {
	std::deque<Op> q;
	unsigned flags;
	int live;
};

struct CUevent_st {
	CUstream_st *s;
	int pending;     /* recorded, not yet reached */
	int done;
	double t;        /* seconds, when reached */
	int live;
};

static CUstream_st g_null_stream = {{}, 0, 1};
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
	if (s == &g_null_stream) {
		for (CUstream_st *x : g_streams)
			if (x->live && !(x->flags & cudaStreamNonBlocking))
				flush(x);
	} else if (!(s->flags & cudaStreamNonBlocking)) {
		flush(&g_null_stream);
	}
	s->q.push_back(Op{std::move(fn), what});
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
	CUstream_st *s = new CUstream_st{{}, flags, 1};
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
	if (s == &g_null_stream)
		flush_all();
	else
		flush(s);
	return g_sticky != cudaSuccess ? g_sticky : cudaSuccess;
}

extern "C" cudaError_t cudaStreamQuery(cudaStream_t st)
{
	/* "complete" is always a possible answer once the work has run */
	return cudaStreamSynchronize(st);
}

extern "C" cudaError_t cudaDeviceSynchronize(void)
{
	API_ENTER();
	flush_all();
	return g_sticky;
}

extern "C" cudaError_t cudaEventCreateWithFlags(cudaEvent_t *pe, unsigned flags)
{
	API_ENTER();
	if (!pe || (flags & ~7u))
		return ret(cudaErrorInvalidValue);
	*pe = new CUevent_st{NULL, 0, 0, 0.0, 1};
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
	e->pending = 1;
	e->done = 0;
	return enqueue(s, "cudaEventRecord", [e]() {
		e->done = 1;
		e->pending = 0;
		e->t = now();
	});
}

extern "C" cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	API_ENTER();
	if (!e || !e->live)
		return ret(cudaErrorInvalidResourceHandle);
	if (e->pending)
		flush(e->s, &e->done);
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
	if (!e->pending)
		return cudaSuccess; /* never recorded, or already reached: nothing to wait for */
	CUstream_st *src = e->s;
	return enqueue(s, "cudaStreamWaitEvent", [e, src]() {
		if (!e->done)
			flush(src, &e->done);
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
	if (ks == MEM_HOST && kd == MEM_DEVICE) {
		/* From pageable memory the runtime stages the data before returning: the caller
		 * may reuse src at once. */
		std::shared_ptr<std::vector<char>> stage(new std::vector<char>((const char *)src,
									       (const char *)src + bytes));
		return enqueue(s, "cudaMemcpyAsync", [dst, stage]() {
			memcpy(dst, stage->data(), stage->size());
		});
	}
	if (kd == MEM_HOST && ks == MEM_DEVICE) {
		/* to pageable memory: returns once the copy is done */
		flush(s);
		if (g_sticky)
			return g_sticky;
		cx_dev_open();
		memcpy(dst, src, bytes);
		cx_dev_close();
		return cudaSuccess;
	}
	return enqueue(s, "cudaMemcpyAsync", [dst, src, bytes]() { memmove(dst, src, bytes); });
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
	flush_all(); /* synchronous with respect to the host and the legacy stream */
	if (g_sticky)
		return g_sticky;
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
	return enqueue(s, "cudaMemsetAsync", [p, v, bytes]() { memset(p, v, bytes); });
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
	flush_all(); /* cudaFree synchronises the device */
	if (g_sticky)
		return g_sticky;
	Alloc *w = &g_dev[al - g_dev.data()];
	w->live = 0;
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
	flush_all();
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
	for (CUstream_st *x : g_streams)
		x->q.clear();
	for (Alloc &a : g_dev)
		if (a.live) {
			a.live = 0;
			g_dev_live -= a.size;
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

static std::string demangle(const char *sym)
{
	int st = 0;
	char *d = abi::__cxa_demangle(sym, NULL, NULL, &st);
	std::string s = d && !st ? d : sym;
	free(d);
	return s;
}

/* "attn_fwd_k<64>": the demangled name without return type and parameters */
static std::string short_name(std::string s)
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

/* ---------------------------------------------------------------------------------------------
 * fibers: a context switch of callee-saved registers (x86-64 System V), ucontext elsewhere */

struct Thr;
extern "C" void cx_fiber_main(Thr *t);

#if defined(__x86_64__)
extern "C" void cx_switch(void **save_sp, void *to_sp);
extern "C" void cx_fiber_boot(void);
__asm__(".text\n"
	".globl cx_switch\n"
	".hidden cx_switch\n"
	".type cx_switch,@function\n"
	"cx_switch:\n"
	"\tpushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n"
	"\tsubq $8, %rsp\n\tstmxcsr (%rsp)\n\tfnstcw 4(%rsp)\n"
	"\tmovq %rsp, (%rdi)\n"
	"\tmovq %rsi, %rsp\n"
	"\tldmxcsr (%rsp)\n\tfldcw 4(%rsp)\n\taddq $8, %rsp\n"
	"\tpopq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n"
	"\tret\n"
	".size cx_switch,.-cx_switch\n"
	".globl cx_fiber_boot\n"
	".hidden cx_fiber_boot\n"
	".type cx_fiber_boot,@function\n"
	"cx_fiber_boot:\n"
	"\tmovq %r12, %rdi\n"
	"\tcall cx_fiber_main@PLT\n"
	"\tud2\n"
	".size cx_fiber_boot,.-cx_fiber_boot\n");
#endif

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
};
enum { T_RUN, T_BAR, T_WARP, T_DONE };
enum { C_SHFL, C_VOTE, C_MATCH, C_REDUCE, C_SYNCWARP };
static const char *const coll_name[] = {"__shfl_*_sync", "a vote (__ballot/__any/__all_sync)",
					"__match_*_sync", "__reduce_*_sync", "__syncwarp"};

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

static std::vector<Thr> g_thr;
static std::vector<char *> g_stacks;
static size_t g_stack_bytes;
static std::vector<Warp> g_warps;
static std::deque<int> g_runq;
static std::vector<int> g_perm;
static void *g_sched_sp;
#if !defined(__x86_64__)
static ucontext_t g_sched_uc;
#endif
static Thr *g_cur;                /* the running CUDA thread, NULL in host code */
static int g_running;             /* a kernel is running: the hooks check accesses */
static int g_abort;               /* the kernel failed: stop running it */
static int g_in_atomic;
static const Launch *g_launch;
static uint3 g_block;
static int g_nthr, g_ndone, g_bar_count;
static const char *g_bar_file;
static int g_bar_line, g_bar_first;
static uint32_t g_epoch, g_block_epoch; /* barrier intervals; the current block's first */
static uint64_t g_rng;

extern "C" uint3 cx_thread_idx(void) { return g_cur->tid; }
extern "C" uint3 cx_block_idx(void) { return g_block; }
extern "C" dim3 cx_block_dim(void) { return g_launch->block; }
extern "C" dim3 cx_grid_dim(void) { return g_launch->grid; }

static uint64_t rng_next(void)
{
	/* splitmix64 */
	uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* the order of this interval: forward, reverse or a fresh random permutation */
static void new_order(int n)
{
	g_perm.resize(n);
	for (int i = 0; i < n; i++)
		g_perm[i] = cfg.order == 1 ? n - 1 - i : i;
	if (cfg.order == 2)
		for (int i = n - 1; i > 0; i--)
			std::swap(g_perm[i], g_perm[rng_next() % (uint64_t)(i + 1)]);
	for (int i = 0; i < n; i++)
		g_thr[g_perm[i]].rank = (uint32_t)i;
}

static void stacks_reserve(int n)
{
	size_t want = cfg.stack + g_page; /* a guard page below each stack */
	if (g_stack_bytes != want) {
		for (char *s : g_stacks)
			munmap(s, g_stack_bytes);
		g_stacks.clear();
		g_stack_bytes = want;
	}
	while ((int)g_stacks.size() < n) {
		void *p = mmap(NULL, want, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED) {
			fprintf(stderr, "cuda-exec: cannot map fiber stacks\n");
			abort();
		}
		mprotect(p, g_page, PROT_NONE);
		g_stacks.push_back((char *)p);
	}
}

#if !defined(__x86_64__)
static void fiber_boot_uc(void)
{
	cx_fiber_main(g_cur);
}
#endif

static void fiber_init(Thr *t, char *mem)
{
	t->stk_lo = mem + g_page;
	t->stk_hi = mem + g_stack_bytes;
#if defined(__x86_64__)
	uintptr_t top = ((uintptr_t)t->stk_hi & ~(uintptr_t)15) - 16;
	uint64_t *sp = (uint64_t *)(top - 64); /* 16-aligned, so the boot stub calls aligned */
	uint32_t csr;
	uint16_t cw;
	__asm__ volatile("stmxcsr %0" : "=m"(csr));
	__asm__ volatile("fnstcw %0" : "=m"(cw));
	sp[0] = (uint64_t)csr | ((uint64_t)cw << 32);
	sp[1] = 0, sp[2] = 0, sp[3] = 0;      /* r15 r14 r13 */
	sp[4] = (uint64_t)(uintptr_t)t;       /* r12: the boot stub's argument */
	sp[5] = 0, sp[6] = 0;                 /* rbx rbp */
	sp[7] = (uint64_t)(uintptr_t)&cx_fiber_boot;
	t->sp = sp;
#else
	getcontext(&t->uc);
	t->uc.uc_stack.ss_sp = t->stk_lo;
	t->uc.uc_stack.ss_size = t->stk_hi - t->stk_lo;
	t->uc.uc_link = NULL;
	makecontext(&t->uc, (void (*)(void))fiber_boot_uc, 0);
#endif
}

static void to_sched(Thr *t)
{
#if defined(__x86_64__)
	cx_switch(&t->sp, g_sched_sp);
#else
	swapcontext(&t->uc, &g_sched_uc);
#endif
}

static void to_thread(Thr *t)
{
	g_cur = t;
#if defined(__x86_64__)
	cx_switch(&g_sched_sp, t->sp);
#else
	swapcontext(&g_sched_uc, &t->uc);
#endif
	g_cur = NULL;
}

/* ---------------------------------------------------------------------------------------------
 * failing a kernel */

static void thr_str(char *b, size_t n, const Thr *t)
{
	snprintf(b, n, "(%u,%u,%u)", t->tid.x, t->tid.y, t->tid.z);
}

/* Reports a failure of the running kernel, makes it the sticky error and, inside a CUDA thread,
 * abandons the block (the thread never resumes). */
static void kfail(cudaError_t code, const Thr *t, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void kfail(cudaError_t code, const Thr *t, const char *fmt, ...)
{
	char msg[1400], who[400], tb[40] = "";
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (t)
		thr_str(tb, sizeof tb, t);
	snprintf(who, sizeof who, "kernel %s<<<(%u,%u,%u), (%u,%u,%u), %zu>>>", g_launch->name,
		 g_launch->grid.x, g_launch->grid.y, g_launch->grid.z, g_launch->block.x,
		 g_launch->block.y, g_launch->block.z, g_launch->smem);
	if (!g_abort)
		cx_say(who, "block (%u,%u,%u)%s%s: %s", g_block.x, g_block.y, g_block.z,
		       t ? " thread " : "", tb, msg);
	if (g_sticky == cudaSuccess)
		g_sticky = code;
	g_abort = 1;
	if (g_cur) {
		Thr *c = g_cur;
		c->state = T_DONE;
		to_sched(c);
		__builtin_unreachable();
	}
}

/* ---------------------------------------------------------------------------------------------
 * barriers */

static void resume_all_in_order(void)
{
	for (int i : g_perm)
		if (g_thr[i].state != T_DONE) {
			g_thr[i].state = T_RUN;
			g_runq.push_back(i);
		}
}

static unsigned lane_bit(const Thr *t)
{
	return 1u << t->lane;
}

/* A thread reaching a barrier whose warp-mates wait for it in a warp call deadlocks. */
static void check_no_warp_waiter(Thr *t, const char *what, const char *file, int line)
{
	Warp &w = g_warps[t->warp];
	for (int i = 0; i < w.ngroups; i++) {
		Group &g = w.groups[i];
		if (!(g.mask & lane_bit(t)))
			continue;
		Thr &o = g_thr[t->warp * 32 + g.first];
		char b[40];
		thr_str(b, sizeof b, &o);
		kfail(cudaErrorLaunchFailure, t, "reaches %s (%s:%d) while thread %s waits for it in "
		      "%s (%s:%d, member mask 0x%08x): deadlock", what, file, line, b,
		      coll_name[o.ckind], o.cfile, o.cline, o.cmask);
	}
}

static int barrier(int op, int pred, const char *file, int line)
{
	Thr *t = g_cur;
	if (!t) {
		fprintf(stderr, "cuda-exec: __syncthreads() called outside a kernel (%s:%d)\n", file,
			line);
		abort();
	}
	if (g_ndone > 0) {
		for (Thr &o : g_thr)
			if (&o - g_thr.data() < g_nthr && o.state == T_DONE) {
				char b[40];
				thr_str(b, sizeof b, &o);
				kfail(cudaErrorLaunchFailure, t, "barrier divergence: reaches "
				      "__syncthreads() at %s:%d, but thread %s has already exited and "
				      "never will", file, line, b);
			}
	}
	if (g_bar_count > 0 && (g_bar_line != line || strcmp(g_bar_file, file))) {
		char b[40];
		thr_str(b, sizeof b, &g_thr[g_bar_first]);
		kfail(cudaErrorLaunchFailure, t, "barrier divergence: waits at __syncthreads() %s:%d "
		      "while thread %s waits at __syncthreads() %s:%d", file, line, b, g_bar_file,
		      g_bar_line);
	}
	check_no_warp_waiter(t, "__syncthreads()", file, line);
	if (g_bar_count == 0) {
		g_bar_file = file;
		g_bar_line = line;
		g_bar_first = t->lin;
	}
	g_bar_count++;
	t->bpred = pred;
	t->state = T_BAR;
	g_warps[t->warp].atbar |= lane_bit(t);
	if (g_bar_count == g_nthr) {
		int cnt = 0, all = 1, any = 0;
		for (int i = 0; i < g_nthr; i++) {
			cnt += g_thr[i].bpred != 0;
			all &= g_thr[i].bpred != 0;
			any |= g_thr[i].bpred != 0;
		}
		int res = op == 0 ? cnt : op == 1 ? all : any;
		for (int i = 0; i < g_nthr; i++)
			g_thr[i].bpred = res;
		g_bar_count = 0;
		g_epoch++;
		for (Warp &w : g_warps) {
			w.log.clear();
			w.atbar = 0;
		}
		new_order(g_nthr);
		resume_all_in_order();
		to_sched(t);
	} else {
		to_sched(t);
	}
	return t->bpred;
}

extern "C" void cx_syncthreads(const char *file, int line)
{
	barrier(0, 0, file, line);
}

extern "C" int cx_syncthreads_op(int op, int pred, const char *file, int line)
{
	return barrier(op, pred, file, line);
}

/* ---------------------------------------------------------------------------------------------
 * warp calls */

static int shfl_src(int mode, int lane, int arg, int width)
{
	int seg = lane & ~(width - 1);
	switch (mode) {
	case 0:
		return seg + (arg & (width - 1));
	case 1: { /* up: lanes below the segment's start keep their value */
		int s = lane - arg;
		return arg < 0 || s < seg ? lane : s;
	}
	case 2: {
		int s = lane + arg;
		return arg < 0 || s >= seg + width ? lane : s;
	}
	default: { /* xor: "later groups" give the caller's own value */
		int s = lane ^ arg;
		return s >= seg + width ? lane : s;
	}
	}
}

static const char *const shfl_name[] = {"__shfl_sync", "__shfl_up_sync", "__shfl_down_sync",
					"__shfl_xor_sync"};

static void coll_complete(Thr *t, unsigned mask)
{
	Warp &w = g_warps[t->warp];
	Thr *base = &g_thr[t->warp * 32];
	int kind = t->ckind;
	switch (kind) {
	case C_SHFL:
		for (unsigned m = mask; m; m &= m - 1) {
			Thr &a = base[__builtin_ctz(m)];
			if (a.csize != t->csize)
				kfail(cudaErrorLaunchFailure, &a, "%s (%s:%d) shuffles a %d-byte value "
				      "while lane %d shuffles %d bytes with the same mask",
				      shfl_name[a.cop], a.cfile, a.cline, a.csize, t->lane, t->csize);
			if (a.csrc != a.lane && !(mask & (1u << a.csrc)))
				kfail(cudaErrorLaunchFailure, &a, "%s (%s:%d) reads lane %d, which is "
				      "not in the member mask 0x%08x: its value is undefined",
				      shfl_name[a.cop], a.cfile, a.cline, a.csrc, mask);
			a.cres = base[a.csrc].cval;
		}
		break;
	case C_VOTE: {
		unsigned bal = 0;
		for (unsigned m = mask; m; m &= m - 1)
			if (base[__builtin_ctz(m)].cval)
				bal |= 1u << __builtin_ctz(m);
		for (unsigned m = mask; m; m &= m - 1) {
			Thr &a = base[__builtin_ctz(m)];
			a.cres = a.cop == 0 ? bal : a.cop == 1 ? bal != 0 : bal == mask;
		}
		break;
	}
	case C_MATCH:
		for (unsigned m = mask; m; m &= m - 1) {
			Thr &a = base[__builtin_ctz(m)];
			unsigned same = 0;
			for (unsigned k = mask; k; k &= k - 1)
				if (base[__builtin_ctz(k)].cval == a.cval)
					same |= 1u << __builtin_ctz(k);
			if (a.cop == 0)
				a.cres = same;
			else {
				a.cpred = same == mask;
				a.cres = same == mask ? mask : 0;
			}
		}
		break;
	case C_REDUCE: {
		int op = t->cop >> 1, sgn = t->cop & 1;
		uint64_t acc = 0;
		int first = 1;
		for (unsigned m = mask; m; m &= m - 1) {
			Thr &a = base[__builtin_ctz(m)];
			if (a.cop != t->cop)
				kfail(cudaErrorLaunchFailure, &a, "__reduce_*_sync (%s:%d) with another "
				      "operation than lane %d's (%s:%d)", a.cfile, a.cline, t->lane,
				      t->cfile, t->cline);
			uint32_t v = (uint32_t)a.cval;
			if (first) {
				acc = v;
				first = 0;
				continue;
			}
			uint32_t c = (uint32_t)acc;
			switch (op) {
			case 0: c += v; break;
			case 1: c = sgn ? ((int32_t)v < (int32_t)c ? v : c) : (v < c ? v : c); break;
			case 2: c = sgn ? ((int32_t)v > (int32_t)c ? v : c) : (v > c ? v : c); break;
			case 3: c &= v; break;
			case 4: c |= v; break;
			default: c ^= v; break;
			}
			acc = c;
		}
		for (unsigned m = mask; m; m &= m - 1)
			base[__builtin_ctz(m)].cres = acc;
		break;
	}
	case C_SYNCWARP:
		w.log.push_back(mask);
		break;
	}
	for (int i = 0; i < w.ngroups; i++)
		if (w.groups[i].mask == mask) {
			w.groups[i] = w.groups[--w.ngroups];
			break;
		}
	int who[32], nw = 0; /* resumed in this interval's order */
	for (unsigned m = mask; m; m &= m - 1) {
		int i = t->warp * 32 + __builtin_ctz(m), k = nw++;
		for (; k > 0 && g_thr[who[k - 1]].rank > g_thr[i].rank; k--)
			who[k] = who[k - 1];
		who[k] = i;
	}
	for (int k = 0; k < nw; k++) {
		g_thr[who[k]].state = T_RUN;
		g_runq.push_back(who[k]);
	}
	to_sched(t);
}

static uint64_t warp_call(int kind, int op, unsigned mask, uint64_t v, int size, int src,
			  const char *file, int line, int *pred_out)
{
	Thr *t = g_cur;
	if (!t) {
		fprintf(stderr, "cuda-exec: warp-synchronous call outside a kernel (%s:%d)\n", file,
			line);
		abort();
	}
	Warp &w = g_warps[t->warp];
	const char *name = kind == C_SHFL ? shfl_name[op] : coll_name[kind];
	if (!(mask & lane_bit(t)))
		kfail(cudaErrorLaunchFailure, t, "%s (%s:%d) with member mask 0x%08x, which does "
		      "not include the calling lane %d", name, file, line, mask, t->lane);
	if (mask & ~w.all)
		kfail(cudaErrorLaunchFailure, t, "%s (%s:%d): member mask 0x%08x names lanes that "
		      "do not exist in this block (warp %d has lanes 0x%08x)", name, file, line, mask,
		      t->warp, w.all);
	if (mask & w.exited)
		kfail(cudaErrorLaunchFailure, t, "%s (%s:%d): member mask 0x%08x names lane %d, "
		      "which has exited", name, file, line, mask, __builtin_ctz(mask & w.exited));
	Group *grp = NULL;
	for (int i = 0; i < w.ngroups; i++) {
		Group &g = w.groups[i];
		if (!(g.mask & mask))
			continue;
		Thr &o = g_thr[t->warp * 32 + g.first];
		if (g.mask != mask)
			kfail(cudaErrorLaunchFailure, t, "%s (%s:%d) with member mask 0x%08x, while "
			      "lane %d waits in %s (%s:%d) with mask 0x%08x: all lanes named in a "
			      "mask must make the same call with the same mask", name, file, line,
			      mask, o.lane, o.ckind == C_SHFL ? shfl_name[o.cop] : coll_name[o.ckind],
			      o.cfile, o.cline, o.cmask);
		if (o.ckind != kind)
			kfail(cudaErrorLaunchFailure, t, "%s (%s:%d) while lane %d waits in %s "
			      "(%s:%d) with the same mask 0x%08x", name, file, line, o.lane,
			      coll_name[o.ckind], o.cfile, o.cline, mask);
		grp = &g;
	}
	if (mask & w.atbar)
		kfail(cudaErrorLaunchFailure, t, "%s (%s:%d) with member mask 0x%08x names lane %d, "
		      "which waits at __syncthreads() (%s:%d): deadlock", name, file, line, mask,
		      __builtin_ctz(mask & w.atbar), g_bar_file, g_bar_line);
	if (!grp) {
		grp = &w.groups[w.ngroups++];
		*grp = Group{mask, 0, t->lane};
	}
	grp->arrived |= lane_bit(t);
	t->ckind = kind;
	t->cop = op;
	t->cmask = mask;
	t->cval = v;
	t->csize = size;
	t->csrc = src;
	t->cfile = file;
	t->cline = line;
	t->state = T_WARP;
	if (grp->arrived == mask)
		coll_complete(t, mask);
	else
		to_sched(t);
	if (pred_out)
		*pred_out = t->cpred;
	return t->cres;
}

extern "C" uint64_t cx_shfl(int mode, unsigned mask, uint64_t v, int size, int arg, int width,
			    const char *file, int line)
{
	Thr *t = g_cur;
	if (t && (width < 1 || width > 32 || (width & (width - 1))))
		kfail(cudaErrorLaunchFailure, t, "%s (%s:%d): width %d is not a power of 2 in "
		      "[1, 32]", shfl_name[mode & 3], file, line, width);
	int src = t ? shfl_src(mode, t->lane, arg, width) : 0;
	return warp_call(C_SHFL, mode, mask, v, size, src, file, line, NULL);
}

extern "C" unsigned cx_vote(int op, unsigned mask, int pred, const char *file, int line)
{
	return (unsigned)warp_call(C_VOTE, op, mask, pred != 0, 4, 0, file, line, NULL);
}

extern "C" unsigned cx_match(int all, unsigned mask, uint64_t v, int *pred, const char *file,
			     int line)
{
	int p = 0;
	unsigned r = (unsigned)warp_call(C_MATCH, all, mask, v, 8, 0, file, line, &p);
	if (pred)
		*pred = p;
	return r;
}

extern "C" unsigned cx_reduce(int op, int sgn, unsigned mask, unsigned v, const char *file,
			      int line)
{
	return (unsigned)warp_call(C_REDUCE, op * 2 + sgn, mask, v, 4, 0, file, line, NULL);
}

extern "C" void cx_syncwarp(unsigned mask, const char *file, int line)
{
	warp_call(C_SYNCWARP, 0, mask, 0, 0, 0, file, line, NULL);
}

extern "C" unsigned cx_activemask(void)
{
	Thr *t = g_cur;
	if (!t)
		return 0;
	Warp &w = g_warps[t->warp];
	return w.all & ~w.exited;
}

extern "C" unsigned cx_lanemask_lt(void)
{
	return g_cur ? lane_bit(g_cur) - 1 : 0;
}

extern "C" void cx_fence(void) {}

extern "C" long long cx_clock(void)
{
	static long long c;
	return c += 1000;
}

extern "C" void cx_trap(const char *file, int line)
{
	kfail(cudaErrorLaunchFailure, g_cur, "__trap() at %s:%d", file, line);
	abort();
}

/* ---------------------------------------------------------------------------------------------
 * shared memory: the module's thread-local storage, the dynamic arrays, the shadow */

struct DynSmem {
	const char *name;
	unsigned char *(*addr)(void);
	uintptr_t lo; /* in the current host thread */
};
/* filled by the generated registrations, possibly before this file's constructors run: a
 * plain array, which needs none */
#define DYN_NAMES 16
static struct {
	DynSmem v[DYN_NAMES];
	int n;
	DynSmem *begin() { return v; }
	DynSmem *end() { return v + n; }
} g_dyn;
static uintptr_t g_tls_lo;
static size_t g_tls_size;

extern "C" int cx_register_dynsmem(const char *name, unsigned char *(*addr)(void))
{
	if (g_dyn.n == DYN_NAMES) {
		fprintf(stderr, "cuda-exec: more than %d extern __shared__ names\n", DYN_NAMES);
		abort();
	}
	g_dyn.v[g_dyn.n++] = DynSmem{name, addr, 0};
	return 0;
}

struct TlsFind {
	uintptr_t fn;
	uintptr_t lo;
	size_t size;
};

static int tls_cb(struct dl_phdr_info *info, size_t, void *data)
{
	TlsFind *f = (TlsFind *)data;
	int mine = 0;
	size_t tls = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && f->fn - (info->dlpi_addr + ph->p_vaddr) < ph->p_memsz)
			mine = 1;
		if (ph->p_type == PT_TLS)
			tls = ph->p_memsz;
	}
	if (!mine)
		return 0;
	f->lo = (uintptr_t)info->dlpi_tls_data;
	f->size = tls;
	return 1;
}

/* Where this host thread's instance of the module's TLS (the shared memory) is. */
static void tls_locate(void)
{
	for (DynSmem &d : g_dyn)
		d.lo = (uintptr_t)d.addr(); /* also makes the block exist in this thread */
	TlsFind f = {(uintptr_t)&tls_locate, 0, 0};
	dl_iterate_phdr(tls_cb, &f);
	g_tls_lo = f.lo;
	g_tls_size = f.lo ? f.size : 0;
}

struct TlsSym {
	size_t off, size;
	std::string name;
};
static std::vector<TlsSym> g_tls_syms;
static int g_tls_syms_read;

/* The thread-local symbols of this module (from its .symtab), to name shared variables. */
static void tls_syms_read(void)
{
	g_tls_syms_read = 1;
	Dl_info di;
	if (!dladdr((void *)&tls_syms_read, &di))
		di.dli_fname = NULL;
	int fd = di.dli_fname && *di.dli_fname ? open(di.dli_fname, O_RDONLY) : -1;
	if (fd < 0) /* the main program */
		fd = open("/proc/self/exe", O_RDONLY);
	if (fd < 0)
		return;
	struct stat st;
	void *map = fstat(fd, &st) == 0 ? mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)
					: MAP_FAILED;
	close(fd);
	if (map == MAP_FAILED)
		return;
	const char *b = (const char *)map;
	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)b;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_shoff == 0)
		goto out;
	{
		const ElfW(Shdr) *sh = (const ElfW(Shdr) *)(b + eh->e_shoff);
		for (int i = 0; i < eh->e_shnum; i++) {
			if (sh[i].sh_type != SHT_SYMTAB)
				continue;
			const ElfW(Sym) *sym = (const ElfW(Sym) *)(b + sh[i].sh_offset);
			const char *str = b + sh[sh[i].sh_link].sh_offset;
			size_t n = sh[i].sh_size / sizeof(ElfW(Sym));
			for (size_t k = 0; k < n; k++)
				if (ELF64_ST_TYPE(sym[k].st_info) == STT_TLS && sym[k].st_size)
					g_tls_syms.push_back(TlsSym{sym[k].st_value, sym[k].st_size,
								    demangle(str + sym[k].st_name)});
		}
	}
out:
	munmap(map, st.st_size);
}

/* "red (colsum_part_k<8, true>'s __shared__), element 37 of 4 bytes" */
static void smem_where(char *buf, size_t len, uintptr_t a, size_t n)
{
	for (DynSmem &d : g_dyn)
		if (a - d.lo < CX_DYN_MAX) {
			size_t off = a - d.lo;
			snprintf(buf, len, "byte %zu of the dynamic shared memory (extern __shared__ %s"
				 "[]; %zu bytes in this launch), element %zu counting %zu-byte elements",
				 off, d.name, g_launch->smem, off / n, n);
			return;
		}
	if (!g_tls_syms_read)
		tls_syms_read();
	size_t off = a - g_tls_lo;
	for (const TlsSym &s : g_tls_syms)
		if (off - s.off < s.size) {
			std::string nm = s.name;
			size_t c = nm.rfind("::");
			std::string var = c == std::string::npos ? nm : nm.substr(c + 2);
			std::string fn = c == std::string::npos ? "" : short_name(nm.substr(0, c));
			snprintf(buf, len, "__shared__ %s%s%s, byte %zu of %zu, element %zu counting "
				 "%zu-byte elements", var.c_str(), fn.empty() ? "" : " in ", fn.c_str(),
				 off - s.off, s.size, (off - s.off) / n, n);
			return;
		}
	snprintf(buf, len, "static shared memory, byte %zu", off);
}

/* per byte of shared memory: the last write and the reads of the current interval */
struct Shadow {
	uint32_t we, re; /* epochs of the last write and of the last reads */
	uint16_t wt, rt; /* writer, reader (RT_MANY: several) */
	uint16_t wg, rg; /* the warp's __syncwarp count then */
};
#define RT_MANY 0xffff
static std::vector<Shadow> g_shadow;

/* whether a __syncwarp() over both lanes completed after position gen of the warp's log */
static int warp_synced(int a, int b, unsigned gen)
{
	const Thr &x = g_thr[a], &y = g_thr[b];
	if (x.warp != y.warp)
		return 0;
	const Warp &w = g_warps[x.warp];
	unsigned both = lane_bit(&x) | lane_bit(&y);
	for (size_t i = gen; i < w.log.size(); i++)
		if ((w.log[i] & both) == both)
			return 1;
	return 0;
}

static void race(Thr *t, uintptr_t a, size_t n, int write, const char *kind, int other,
		 int other_wrote)
{
	char where[400], o[60] = "several other threads";
	smem_where(where, sizeof where, a, n);
	if (other != RT_MANY) {
		strcpy(o, "thread ");
		thr_str(o + 7, sizeof o - 7, &g_thr[other]);
	}
	kfail(cudaErrorLaunchFailure, t, "%s race on shared memory: %s %zu bytes at %s, which %s "
	      "%s since the last __syncthreads() (no barrier orders the two)", kind,
	      write ? "writes" : "reads", n, where, o, other_wrote ? "wrote" : "read");
}

static void shadow_access(Thr *t, uintptr_t a, size_t n, int write)
{
	size_t off = a - g_tls_lo;
	uint16_t me = (uint16_t)t->lin;
	uint16_t gen = (uint16_t)g_warps[t->warp].log.size();
	for (size_t i = 0; i < n; i++) {
		Shadow &s = g_shadow[off + i];
		if (!write && s.we < g_block_epoch) {
			char where[400];
			smem_where(where, sizeof where, a, n);
			kfail(cudaErrorLaunchFailure, t, "reads %zu bytes of shared memory that no "
			      "thread of this block has written: %s", n, where);
		}
		if (s.we == g_epoch && s.wt != me && !warp_synced(s.wt, me, s.wg))
			race(t, a, n, write, write ? "write-after-write" : "read-after-write", s.wt, 1);
		if (write && s.re == g_epoch && s.rt != me &&
		    (s.rt == RT_MANY || !warp_synced(s.rt, me, s.rg)))
			race(t, a, n, write, "write-after-read", s.rt, 0);
		if (write) {
			s.we = g_epoch;
			s.wt = me;
			s.wg = gen;
		} else if (s.re == g_epoch) {
			if (s.rt != me)
				s.rt = RT_MANY;
		} else {
			s.re = g_epoch;
			s.rt = me;
			s.rg = gen;
		}
	}
}

/* ---------------------------------------------------------------------------------------------
 * the access hooks (GCC -fsanitize=thread calls them before every load and store) */

static void access_slow(uintptr_t a, size_t n, int write, int aligned)
{
	Thr *t = g_cur;
	const char *rw = write ? "writes" : "reads";
	if (aligned && n > 1 && (a & (n - 1)))
		kfail(cudaErrorMisalignedAddress, t, "%s %zu bytes at %p: misaligned (a %zu-byte "
		      "access must be %zu-byte aligned)", rw, n, (void *)a, n, n);
	if (a - g_tls_lo < g_tls_size) {
		if (n > g_tls_lo + g_tls_size - a)
			kfail(cudaErrorIllegalAddress, t, "%s %zu bytes at %p: past the end of shared "
			      "memory", rw, n, (void *)a);
		for (DynSmem &d : g_dyn)
			if (a - d.lo < CX_DYN_MAX && a - d.lo + n > g_launch->smem)
				kfail(cudaErrorIllegalAddress, t, "%s %zu bytes at byte %zu of the "
				      "dynamic shared memory (extern __shared__ %s[]), but the launch "
				      "gave it %zu bytes", rw, n, (size_t)(a - d.lo), d.name,
				      g_launch->smem);
		if (cfg.shadow && !g_in_atomic)
			shadow_access(t, a, n, write);
		return;
	}
	if (a - (uintptr_t)g_arena < ARENA_BYTES) {
		if (dev_range(a, n))
			return;
	} else {
		const Alloc *p = find_pinned(a);
		if (p && n <= p->size - (a - p->base))
			return;
	}
	for (int i = 0; i < g_nthr; i++) {
		Thr &o = g_thr[i];
		if (a - (uintptr_t)(o.stk_lo - g_page) < g_stack_bytes && &o != t)
			kfail(cudaErrorIllegalAddress, t, "%s %zu bytes at %p: the local memory of "
			      "thread (%u,%u,%u)", rw, n, (void *)a, o.tid.x, o.tid.y, o.tid.z);
		if (a - (uintptr_t)(o.stk_lo - g_page) < g_page)
			kfail(cudaErrorIllegalAddress, t, "%s %zu bytes at %p: stack overflow (set "
			      "LMTK_CUDA_EXEC_STACK_KB above %zu)", rw, n, (void *)a, cfg.stack >> 10);
	}
	char d[400];
	describe(d, sizeof d, a, n);
	kfail(cudaErrorIllegalAddress, t, "%s %zu bytes at %p: %s", rw, n, (void *)a, d);
}

static inline void access(const void *p, size_t n, int write, int aligned)
{
	if (__builtin_expect(!g_running, 1))
		return;
	uintptr_t a = (uintptr_t)p;
	if (a - (uintptr_t)g_cur->stk_lo < (uintptr_t)(g_cur->stk_hi - g_cur->stk_lo))
		return; /* its own locals */
	access_slow(a, n, write, aligned);
}

extern "C" void cx_atomic_begin(const void *p, int size, const char *file, int line)
{
	if (!g_running)
		return;
	uintptr_t a = (uintptr_t)p;
	if (a & (uintptr_t)(size - 1))
		kfail(cudaErrorMisalignedAddress, g_cur, "atomic on %d bytes at %p (%s:%d): "
		      "misaligned", size, p, file, line);
	g_in_atomic = 1; /* atomics race with nothing: the shadow ignores them */
	access(p, (size_t)size, 1, 1);
}

extern "C" void cx_atomic_end(void)
{
	g_in_atomic = 0;
}

#define HOOKS(n)                                                                                   \
	extern "C" void __tsan_read##n(void *p) { access(p, n, 0, 1); }                            \
	extern "C" void __tsan_write##n(void *p) { access(p, n, 1, 1); }                           \
	extern "C" void __tsan_unaligned_read##n(void *p) { access(p, n, 0, 0); }                  \
	extern "C" void __tsan_unaligned_write##n(void *p) { access(p, n, 1, 0); }                 \
	extern "C" void __tsan_volatile_read##n(void *p) { access(p, n, 0, 1); }                   \
	extern "C" void __tsan_volatile_write##n(void *p) { access(p, n, 1, 1); }
HOOKS(1)
HOOKS(2)
HOOKS(4)
HOOKS(8)
HOOKS(16)
#undef HOOKS
extern "C" void __tsan_read_range(void *p, unsigned long n) { access(p, n, 0, 0); }
extern "C" void __tsan_write_range(void *p, unsigned long n) { access(p, n, 1, 0); }
extern "C" void __tsan_init(void) {}
extern "C" void __tsan_func_entry(void *) {}
extern "C" void __tsan_func_exit(void) {}
extern "C" void *__tsan_memcpy(void *d, const void *s, size_t n)
{
	access(s, n, 0, 0);
	access(d, n, 1, 0);
	return memcpy(d, s, n);
}
extern "C" void *__tsan_memmove(void *d, const void *s, size_t n)
{
	access(s, n, 0, 0);
	access(d, n, 1, 0);
	return memmove(d, s, n);
}
extern "C" void *__tsan_memset(void *d, int c, size_t n)
{
	access(d, n, 1, 0);
	return memset(d, c, n);
}

/* ---------------------------------------------------------------------------------------------
 * running a kernel */

extern "C" void cx_fiber_main(Thr *t)
{
	g_launch->invoke(g_launch->kernel, g_launch->args);
	/* the thread exits */
	Warp &w = g_warps[t->warp];
	if (g_bar_count > 0) {
		char b[40];
		thr_str(b, sizeof b, &g_thr[g_bar_first]);
		kfail(cudaErrorLaunchFailure, t, "barrier divergence: exits while thread %s and %d "
		      "others wait at __syncthreads() %s:%d", b, g_bar_count - 1, g_bar_file,
		      g_bar_line);
	}
	check_no_warp_waiter(t, "its end", "exit", 0);
	t->state = T_DONE;
	w.exited |= lane_bit(t);
	g_ndone++;
	to_sched(t);
	__builtin_unreachable();
}

static void run_block(const Launch *L, uint3 b)
{
	int n = (int)(L->block.x * L->block.y * L->block.z);
	g_block = b;
	g_nthr = n;
	g_ndone = 0;
	g_bar_count = 0;
	g_epoch++;
	g_block_epoch = g_epoch;
	int nw = (n + 31) / 32;
	g_warps.resize(nw);
	for (Warp &w : g_warps) {
		w.exited = w.atbar = 0;
		w.ngroups = 0;
		w.log.clear();
	}
	for (int i = 0; i < nw; i++)
		g_warps[i].all = i == nw - 1 && n % 32 ? (1u << (n % 32)) - 1 : 0xffffffffu;
	if (g_thr.size() < (size_t)n)
		g_thr.resize(n);
	for (int i = 0; i < n; i++) {
		Thr &t = g_thr[i];
		t.lin = i;
		t.lane = i & 31;
		t.warp = i >> 5;
		t.tid = uint3{(unsigned)i % L->block.x, (unsigned)i / L->block.x % L->block.y,
			      (unsigned)i / (L->block.x * L->block.y)};
		t.state = T_RUN;
		t.cres = 0;
		t.cpred = 0;
		fiber_init(&t, g_stacks[i]);
	}
	for (DynSmem &d : g_dyn) /* shared memory starts out as garbage */
		memset((void *)d.lo, 0xff, L->smem);
	g_runq.clear();
	new_order(n);
	resume_all_in_order();
	while (!g_runq.empty() && !g_abort) {
		int i = g_runq.front();
		g_runq.pop_front();
		if (g_thr[i].state != T_RUN)
			continue;
		to_thread(&g_thr[i]);
	}
	if (!g_abort && g_ndone < n) {
		int shown = 0;
		char list[600] = "";
		for (int i = 0; i < n && shown < 4; i++)
			if (g_thr[i].state != T_DONE) {
				size_t l = strlen(list);
				snprintf(list + l, sizeof list - l, "%s(%u,%u,%u) %s", shown ? ", " : "",
					 g_thr[i].tid.x, g_thr[i].tid.y, g_thr[i].tid.z,
					 g_thr[i].state == T_BAR ? "at __syncthreads()" : "in a warp call");
				shown++;
			}
		kfail(cudaErrorLaunchFailure, NULL, "deadlock: %d of %d threads never finish: %s",
		      n - g_ndone, n, list);
	}
}

static void run_kernel(const Launch *L)
{
	g_launch = L;
	g_abort = 0;
	g_rng = cfg.seed * 0x2545F4914F6CDD1Dull + L->serial;
	stacks_reserve((int)(L->block.x * L->block.y * L->block.z));
	tls_locate();
	if (cfg.shadow && g_shadow.size() < g_tls_size)
		g_shadow.resize(g_tls_size);
	if (cfg.trace)
		fprintf(stderr, "cuda-exec: launch #%llu %s<<<(%u,%u,%u), (%u,%u,%u), %zu>>>\n",
			(unsigned long long)L->serial, L->name, L->grid.x, L->grid.y, L->grid.z,
			L->block.x, L->block.y, L->block.z, L->smem);
	size_t nb = (size_t)L->grid.x * L->grid.y * L->grid.z;
	std::vector<size_t> order;
	if (cfg.order == 2) {
		order.resize(nb);
		for (size_t i = 0; i < nb; i++)
			order[i] = i;
		for (size_t i = nb - 1; i > 0 && nb > 1; i--)
			std::swap(order[i], order[rng_next() % (i + 1)]);
	}
	g_running = 1;
	for (size_t k = 0; k < nb && !g_abort; k++) {
		size_t i = cfg.order == 0 ? k : cfg.order == 1 ? nb - 1 - k : order[k];
		uint3 b = {(unsigned)(i % L->grid.x), (unsigned)(i / L->grid.x % L->grid.y),
			   (unsigned)(i / ((size_t)L->grid.x * L->grid.y))};
		run_block(L, b);
	}
	g_running = 0;
	g_cur = NULL;
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
	Launch *L = new Launch{kernel, name, invoke, args, grid, block, smem, ++serial};
	std::shared_ptr<Launch> sp(L, [destroy](Launch *x) {
		destroy(x->args);
		delete x;
	});
	return enqueue(s, name, [sp]() { run_kernel(sp.get()); });
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
