/* nccl - the CPU executor's NCCL (tests/cuda-exec): the subset lmtk's distributed code uses
 * (include/nccl.h), over ranks that are processes, as under mpirun or srun.
 *
 * Semantics are NCCL's documentation's (user guide: collective operations, in-place operations,
 * group calls, point-to-point communication, CUDA stream semantics, data types and reduction
 * operations):
 *  - ncclGetUniqueId names a POSIX shared-memory segment (shm_open); ncclCommInitRank joins it
 *    and returns once every rank has (it "implicitly synchronizes with other ranks"), or fails
 *    after a bounded wait naming the ranks that never came.  The segment is unlinked as soon as
 *    all have joined, so nothing stays behind in /dev/shm.
 *  - A collective or a send/receive is queued on its stream like a kernel and runs when the
 *    stream reaches it (when the host synchronises, in this executor): it reads its send buffer
 *    after the stream's earlier work and its results are there for the stream's later work, not
 *    before.  Inside ncclGroupStart/ncclGroupEnd nothing is queued until the outermost
 *    ncclGroupEnd, which queues the whole group as one operation (none of it if one of its
 *    calls failed: ncclGroupEnd returns that error); when the group's calls name
 *    several streams, the operation runs after the earlier work of all of them and their later
 *    work waits for it (events), as NCCL documents for mixed streams in a group.
 *  - Ranks exchange data through the segment: a staging slot per rank for the collectives, which
 *    move in rounds (each rank stages its next chunk, a barrier, each rank takes what it needs, a
 *    barrier), and a ring per ordered pair of ranks for ncclSend/ncclRecv.  The synchronisation is
 *    process-shared atomics in the segment.
 *  - Reductions run in rank order, element by element: ((x0 op x1) op x2) ..., each step in the
 *    datatype (bf16 and half: computed in fp32 and rounded to nearest even after every step, as
 *    NCCL's bf16/half adds round), so results are deterministic and bit-reproducible; every rank
 *    gets the same bits.  The real library's order depends on its algorithm (ring, tree) and the
 *    chunking, so its bits may differ from these within rounding.  ncclAvg is, as documented,
 *    the sum across ranks divided by the number of ranks: the rank-order sum, then one division
 *    (in fp32 for the 16-bit types, rounded once; truncating for integers); the real library may
 *    instead pre-multiply floating inputs by 1/nranks, which differs within rounding.  ncclMax/ncclMin on
 *    floating types are fmax/fmin (a NaN loses to a number).  Integer sums wrap.
 *  - In place: AllReduce, Broadcast and Reduce when sendbuff == recvbuff; AllGather when
 *    sendbuff == recvbuff + rank*sendcount; ReduceScatter when sendbuff + rank*recvcount ==
 *    recvbuff.  Any other overlap of the two buffers is refused (the result would depend on the
 *    algorithm).  Broadcast reads sendbuff on the root only, Reduce writes recvbuff on the root only.
 *  - Send/Recv: a send completes when the peer's matching receive has taken all of it (the
 *    documentation's "blocking for the GPU"), so two ranks that each send first outside a group
 *    wait for each other, as they can on the device; within a group every call progresses
 *    independently and never blocks another, and calls to the same peer keep their order.
 *
 * What NCCL leaves as a hang or undefined is an error here, never a hang:
 *  - ranks whose collectives differ (operation, count, datatype, reduction, root) fail with a
 *    message naming both calls and both ranks (ncclInvalidUsage, on every rank at once); a
 *    receive whose count or datatype differs from the matching send, likewise;
 *  - a rank that does not arrive (at ncclCommInitRank, a collective, or the other end of a
 *    send) stops the others after LMTK_CUDA_EXEC_NCCL_TIMEOUT seconds without progress (default
 *    30), with what that rank is doing instead; a rank that failed, aborted, destroyed its
 *    communicator or exited stops them at once (ncclRemoteError: "remote process exited");
 *  - invalid arguments (datatype, operation, root or peer out of range, a buffer that is not one
 *    live device or pinned allocation of the size the call needs, a bad id) return
 *    ncclInvalidArgument from the call, as the real library does, with the executor's message.
 * A failure inside a queued operation is the communicator's asynchronous error
 * (ncclCommGetAsyncError, ncclGetLastError), every later call on that communicator returns it,
 * and the CUDA context gets the sticky cudaErrorLaunchFailure, as a faulting kernel gives, so the
 * cudaStreamSynchronize that ran it reports it.
 *
 * ncclCommSplit is a collective of the parent: its (color, key) exchange is one more operation in
 * the parent's order (a rank that splits while another runs a collective fails both, naming the
 * two calls), and each color's ranks then form a communicator as ncclCommInitRank does.
 *
 * Not modelled: several GPUs per process (ncclCommInitAll takes one device: a process is a rank),
 * the split's config (shared resources, blocking), user-defined reduction operators, fp8, the real library's algorithms,
 * chunking and bits of its reduction order, performance, and interleavings of independent
 * communicators used concurrently from one process (each group's communicators progress one
 * after another). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "exec.h"
#include "nccl.h"

#define NC_MAXRANKS 64
#define NC_SLOT ((size_t)64 << 10)  /* a rank's staging bytes for the collectives */
#define NC_RING ((size_t)16 << 10)  /* bytes in flight from one rank to another (send/recv) */
#define NC_MAGIC 0x6c6d746bu        /* "lmtk" */
static const char id_prefix[] = "lmtk-cuda-exec-nccl:";

/* K_SPLIT: ncclCommSplit's exchange of every rank's (color, key), an all-gather on the host */
enum { K_ALLREDUCE, K_BROADCAST, K_REDUCE, K_ALLGATHER, K_REDUCESCATTER, K_SEND, K_RECV, K_SPLIT };
static const char *const kind_name[] = {"ncclAllReduce", "ncclBroadcast", "ncclReduce",
					"ncclAllGather", "ncclReduceScatter", "ncclSend", "ncclRecv",
					"ncclCommSplit"};
static const char *const op_name[] = {"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"};
enum { ST_NONE, ST_LIVE, ST_DESTROYED, ST_FAILED, ST_ABORTED };

/* --- the shared segment ------------------------------------------------------------------- */

struct Desc { /* a collective as one rank called it */
	int32_t kind, dtype, op, root;
	uint64_t count, seq;
};

struct alignas(64) RankSh {
	int32_t pid;   /* 0 until the rank joins */
	int32_t state; /* ST_* */
	uint64_t step; /* barriers passed */
	Desc desc[2];  /* collective #seq in desc[seq & 1] */
	double since;  /* CLOCK_MONOTONIC (machine-wide) seconds: when `doing` was set */
	char doing[240];
	char failed[400];
};

struct alignas(64) Ring { /* sender -> receiver, one message at a time */
	uint64_t msg;     /* messages posted; the header below is message `msg`'s */
	uint64_t acked;   /* messages the receiver has taken entirely */
	uint64_t count;   /* the sender's count and datatype */
	int32_t dtype, err;
	uint64_t rcount;  /* err: the receiver's count and datatype */
	int32_t rdtype, pad;
	uint64_t filled, drained; /* bytes of this message written, read */
};

struct Hdr {
	uint32_t magic;
	int32_t nranks, joined, pad;
};

static size_t ring_bytes(void)
{
	return sizeof(Ring) + NC_RING;
}

static size_t off_slots(int n)
{
	return (64 + n * sizeof(RankSh) + 4095) & ~(size_t)4095;
}

static size_t seg_bytes(int n)
{
	return off_slots(n) + n * NC_SLOT + (size_t)n * n * ring_bytes();
}

/* --- the process's side -------------------------------------------------------------------- */

struct ncclComm {
	int rank, nranks, device;
	char name[NCCL_UNIQUE_ID_BYTES];
	char *base;
	size_t size;
	Hdr *h;
	RankSh *rk;
	uint64_t step, seq;
	uint64_t splits; /* ncclCommSplit calls so far: names each split's segments */
	std::vector<uint64_t> sent, recvd; /* messages to / from each peer */
	ncclResult_t async;
	std::string msg;
	int aborted;
};

static std::set<ncclComm *> g_comms;
static thread_local std::string g_lasterr;

static double nc_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double nc_timeout(void)
{
	const char *t = getenv("LMTK_CUDA_EXEC_NCCL_TIMEOUT");
	double v = t && *t ? atof(t) : 30.0;
	return v > 0 ? v : 30.0;
}

static const char *type_name(int t)
{
	static const char *const n[] = {"ncclInt8", "ncclUint8", "ncclInt32", "ncclUint32",
					"ncclInt64", "ncclUint64", "ncclFloat16", "ncclFloat32",
					"ncclFloat64", "ncclBfloat16"};
	return t >= 0 && t < ncclNumTypes ? n[t] : "?";
}

static size_t type_size(int t)
{
	static const size_t s[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
	return t >= 0 && t < ncclNumTypes ? s[t] : 0;
}

static char *sh_ring(ncclComm *c, int from, int to)
{
	return c->base + off_slots(c->nranks) + c->nranks * NC_SLOT +
	       ((size_t)from * c->nranks + to) * ring_bytes();
}

static char *sh_slot(ncclComm *c, int r)
{
	return c->base + off_slots(c->nranks) + r * NC_SLOT;
}

template <typename T> static T ld(const T *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
template <typename T> static void st(T *p, T v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char b[1500];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b, sizeof b, fmt, ap);
	va_end(ap);
	g_lasterr = b;
	cx_say("nccl", "%s", b);
}

/* What this rank is doing, for the messages of the others. */
static void set_doing(ncclComm *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_doing(ncclComm *c, const char *fmt, ...)
{
	RankSh *me = &c->rk[c->rank];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(me->doing, sizeof me->doing, fmt, ap);
	va_end(ap);
	me->since = nc_now();
}

/* An operation of c failed: its asynchronous error from now on, said, and seen by the other ranks. */
static ncclResult_t comm_fail(ncclComm *c, ncclResult_t code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static ncclResult_t comm_fail(ncclComm *c, ncclResult_t code, const char *fmt, ...)
{
	char b[1200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b, sizeof b, fmt, ap);
	va_end(ap);
	c->async = code;
	c->msg = std::string("rank ") + std::to_string(c->rank) + ": " + b;
	RankSh *me = &c->rk[c->rank];
	snprintf(me->failed, sizeof me->failed, "%s", b);
	st(&me->state, (int32_t)ST_FAILED);
	say("%s", c->msg.c_str());
	if (g_sticky == cudaSuccess)
		g_sticky = cudaErrorLaunchFailure; /* as a faulting kernel: the stream's work stops */
	return code;
}

/* What rank j is up to, for a message: "" when it is alive and in no NCCL call. */
static std::string peer_state(ncclComm *c, int j)
{
	RankSh *r = &c->rk[j];
	char b[700];
	int pid = ld(&r->pid), s = ld(&r->state);
	if (!pid)
		return "it has not called ncclCommInitRank";
	if (s == ST_FAILED)
		snprintf(b, sizeof b, "it failed: %s", r->failed);
	else if (s == ST_ABORTED)
		snprintf(b, sizeof b, "it called ncclCommAbort");
	else if (s == ST_DESTROYED)
		snprintf(b, sizeof b, "it destroyed its communicator");
	else if (kill(pid, 0) < 0 && errno == ESRCH)
		snprintf(b, sizeof b, "its process (pid %d) has exited", pid);
	else if (r->doing[0])
		snprintf(b, sizeof b, "it is in %s, for %.1f s", r->doing, nc_now() - r->since);
	else
		snprintf(b, sizeof b, "it is running other work (pid %d)", pid);
	return b;
}

/* 1 when rank j can no longer take part (failed, aborted, destroyed, exited). */
static int peer_gone(ncclComm *c, int j)
{
	RankSh *r = &c->rk[j];
	int pid = ld(&r->pid), s = ld(&r->state);
	if (s == ST_FAILED || s == ST_ABORTED || s == ST_DESTROYED)
		return 1;
	return pid && kill(pid, 0) < 0 && errno == ESRCH;
}

struct Backoff {
	int n = 0;
	void pause(void)
	{
		if (n++ < 50) {
			sched_yield();
			return;
		}
		long ns = 20000L << (n - 50 < 6 ? n - 50 : 6); /* 20 us .. 1.3 ms */
		struct timespec ts = {0, ns};
		nanosleep(&ts, NULL);
	}
	void reset(void)
	{
		n = 0;
	}
};

/* --- reductions ------------------------------------------------------------------------------ */

static float h2f(uint16_t h)
{
	return __half2float(*(const __half *)&h);
}
static uint16_t f2h(float f)
{
	__half h = __float2half_rn(f);
	return *(uint16_t *)&h;
}
static float bf2f(uint16_t b)
{
	return cx_bf2f(b);
}
static uint16_t f2bf(float f)
{
	return cx_f2bf(f, 0);
}

template <typename T> static T red_num(T a, T b, int op)
{
	switch (op) {
	case ncclProd: return (T)(a * b);
	case ncclMax: return a > b ? a : b;
	case ncclMin: return a < b ? a : b;
	default: return (T)(a + b);
	}
}
template <> float red_num<float>(float a, float b, int op)
{
	return op == ncclProd ? a * b : op == ncclMax ? fmaxf(a, b) : op == ncclMin ? fminf(a, b) : a + b;
}
template <> double red_num<double>(double a, double b, int op)
{
	return op == ncclProd ? a * b : op == ncclMax ? fmax(a, b) : op == ncclMin ? fmin(a, b) : a + b;
}

/* dst[i] = src[0][i] op src[1][i] op ... (rank order), ncclAvg divided by n at the end */
template <typename T>
static void reduce_int(T *dst, char *const *src, int n, size_t m, int op)
{
	typedef typename std::make_unsigned<T>::type U; /* sums and products wrap */
	for (size_t i = 0; i < m; i++) {
		T acc = ((const T *)src[0])[i];
		for (int j = 1; j < n; j++) {
			T x = ((const T *)src[j])[i];
			if (op == ncclSum || op == ncclAvg)
				acc = (T)((U)acc + (U)x);
			else if (op == ncclProd)
				acc = (T)((U)acc * (U)x);
			else
				acc = red_num<T>(acc, x, op);
		}
		dst[i] = op == ncclAvg ? (T)(acc / (T)n) : acc;
	}
}

template <typename T> static void reduce_fp(T *dst, char *const *src, int n, size_t m, int op)
{
	for (size_t i = 0; i < m; i++) {
		T acc = ((const T *)src[0])[i];
		for (int j = 1; j < n; j++)
			acc = red_num<T>(acc, ((const T *)src[j])[i], op == ncclAvg ? ncclSum : op);
		dst[i] = op == ncclAvg ? acc / (T)n : acc;
	}
}

static void reduce_16(uint16_t *dst, char *const *src, int n, size_t m, int op, int bf)
{
	for (size_t i = 0; i < m; i++) {
		uint16_t acc = ((const uint16_t *)src[0])[i];
		for (int j = 1; j < n; j++) {
			uint16_t x = ((const uint16_t *)src[j])[i];
			float r = red_num<float>(bf ? bf2f(acc) : h2f(acc), bf ? bf2f(x) : h2f(x),
						 op == ncclAvg ? ncclSum : op);
			acc = bf ? f2bf(r) : f2h(r); /* rounded after every step */
		}
		if (op == ncclAvg)
			acc = bf ? f2bf(bf2f(acc) / n) : f2h(h2f(acc) / n);
		dst[i] = acc;
	}
}

static void reduce(void *dst, char *const *src, int n, size_t m, int dtype, int op)
{
	switch (dtype) {
	case ncclInt8: reduce_int((int8_t *)dst, src, n, m, op); break;
	case ncclUint8: reduce_int((uint8_t *)dst, src, n, m, op); break;
	case ncclInt32: reduce_int((int32_t *)dst, src, n, m, op); break;
	case ncclUint32: reduce_int((uint32_t *)dst, src, n, m, op); break;
	case ncclInt64: reduce_int((int64_t *)dst, src, n, m, op); break;
	case ncclUint64: reduce_int((uint64_t *)dst, src, n, m, op); break;
	case ncclFloat16: reduce_16((uint16_t *)dst, src, n, m, op, 0); break;
	case ncclBfloat16: reduce_16((uint16_t *)dst, src, n, m, op, 1); break;
	case ncclFloat32: reduce_fp((float *)dst, src, n, m, op); break;
	case ncclFloat64: reduce_fp((double *)dst, src, n, m, op); break;
	}
}

/* --- the calls ------------------------------------------------------------------------------- */

struct Call {
	int kind;
	const char *send;
	char *recv;
	size_t count;
	int dtype, op, root, peer;
	ncclComm *c;
	cudaStream_t stream;
};

static std::string call_str(int kind, size_t count, int dtype, int op, int root, int peer)
{
	char b[200];
	int n = snprintf(b, sizeof b, "%s(count %zu, %s", kind_name[kind], count, type_name(dtype));
	if (kind == K_ALLREDUCE || kind == K_REDUCE || kind == K_REDUCESCATTER)
		n += snprintf(b + n, sizeof b - n, ", %s", op >= 0 && op < ncclNumOps ? op_name[op] : "?");
	if (kind == K_BROADCAST || kind == K_REDUCE)
		n += snprintf(b + n, sizeof b - n, ", root %d", root);
	if (kind == K_SEND || kind == K_RECV)
		n += snprintf(b + n, sizeof b - n, ", %s rank %d", kind == K_SEND ? "to" : "from", peer);
	snprintf(b + n, sizeof b - n, ")");
	return b;
}

static std::string desc_str(const Desc &d)
{
	return call_str(d.kind, d.count, d.dtype, d.op, d.root, -1);
}

/* Waits until every rank has passed barrier c->step + 1. */
static ncclResult_t barrier(ncclComm *c, const char *what)
{
	uint64_t target = ++c->step;
	st(&c->rk[c->rank].step, target);
	double t0 = nc_now(), limit = nc_timeout();
	Backoff b;
	for (int j = 0; j < c->nranks; j++) {
		while (ld(&c->rk[j].step) < target) {
			if (peer_gone(c, j))
				return comm_fail(c, ncclRemoteError, "%s: rank %d cannot take part: %s", what, j,
						 peer_state(c, j).c_str());
			if (nc_now() - t0 > limit) {
				std::string late;
				for (int k = 0; k < c->nranks; k++)
					if (ld(&c->rk[k].step) < target)
						late += "; rank " + std::to_string(k) + ": " + peer_state(c, k);
				return comm_fail(c, ncclRemoteError, "%s: not every rank arrived within %g s "
						 "(LMTK_CUDA_EXEC_NCCL_TIMEOUT)%s", what, limit, late.c_str());
			}
			b.pause();
		}
	}
	return ncclSuccess;
}

static ncclResult_t run_coll(ncclComm *c, const Call &o)
{
	int n = c->nranks, me = c->rank;
	uint64_t seq = ++c->seq;
	Desc d = {o.kind, o.dtype, o.kind == K_ALLREDUCE || o.kind == K_REDUCE || o.kind == K_REDUCESCATTER ? o.op : -1,
		  o.kind == K_BROADCAST || o.kind == K_REDUCE ? o.root : -1, o.count, seq};
	std::string mine = desc_str(d);
	char what[300];
	snprintf(what, sizeof what, "%s #%llu", mine.c_str(), (unsigned long long)seq);
	set_doing(c, "%s", what);
	c->rk[me].desc[seq & 1] = d;
	ncclResult_t r = barrier(c, what);
	if (r)
		return r;
	for (int j = 0; j < n; j++) {
		const Desc &e = c->rk[j].desc[seq & 1];
		const Desc &z = c->rk[0].desc[seq & 1];
		if (e.kind != z.kind || e.dtype != z.dtype || e.op != z.op || e.root != z.root ||
		    e.count != z.count || e.seq != z.seq)
			return comm_fail(c, ncclInvalidUsage, "collective #%llu differs between ranks: rank 0 "
					 "called %s, rank %d called %s", (unsigned long long)seq,
					 desc_str(z).c_str(), j, desc_str(e).c_str());
	}
	size_t es = type_size(o.dtype);
	size_t E = NC_SLOT / es; /* elements per round */
	if (o.kind == K_REDUCESCATTER)
		E = NC_SLOT / ((size_t)n * es);
	std::vector<char *> src(n);
	for (size_t lo = 0; lo < o.count; lo += E) {
		size_t m = o.count - lo < E ? o.count - lo : E, b = m * es;
		char *mine_slot = sh_slot(c, me);
		switch (o.kind) { /* stage this round's chunk */
		case K_ALLREDUCE:
		case K_REDUCE:
		case K_ALLGATHER:
		case K_SPLIT:
			memcpy(mine_slot, o.send + lo * es, b);
			break;
		case K_BROADCAST:
			if (me == o.root)
				memcpy(mine_slot, o.send + lo * es, b);
			break;
		case K_REDUCESCATTER:
			for (int j = 0; j < n; j++)
				memcpy(mine_slot + j * E * es, o.send + (j * o.count + lo) * es, b);
			break;
		}
		if ((r = barrier(c, what)))
			return r;
		switch (o.kind) { /* take what this rank needs */
		case K_ALLREDUCE:
		case K_REDUCE:
			if (o.kind == K_ALLREDUCE || me == o.root) {
				for (int j = 0; j < n; j++)
					src[j] = sh_slot(c, j);
				reduce(o.recv + lo * es, src.data(), n, m, o.dtype, o.op);
			}
			break;
		case K_BROADCAST:
			memcpy(o.recv + lo * es, sh_slot(c, o.root), b);
			break;
		case K_ALLGATHER:
		case K_SPLIT:
			for (int j = 0; j < n; j++)
				memcpy(o.recv + (j * o.count + lo) * es, sh_slot(c, j), b);
			break;
		case K_REDUCESCATTER:
			for (int j = 0; j < n; j++)
				src[j] = sh_slot(c, j) + me * E * es;
			reduce(o.recv + lo * es, src.data(), n, m, o.dtype, o.op);
			break;
		}
		if ((r = barrier(c, what)))
			return r;
	}
	set_doing(c, "%s", "");
	return ncclSuccess;
}

/* One send or receive of a group in progress. */
struct P2p {
	const Call *o;
	uint64_t k; /* its message number on the ring */
	size_t bytes, done;
	int stage; /* 0 header, 1 data, 2 (send) waiting for the receiver, 3 complete */
	std::string what;
};

/* Moves p as far as it can go now; 1 if it moved, -1 on failure (said). */
static int p2p_step(ncclComm *c, P2p &p)
{
	const Call &o = *p.o;
	int me = c->rank;
	if (o.kind == K_SEND) {
		Ring *g = (Ring *)sh_ring(c, me, o.peer);
		char *data = (char *)(g + 1);
		if (p.stage == 0) {
			if (ld(&g->acked) != p.k - 1)
				return 0;
			g->count = o.count;
			g->dtype = o.dtype;
			g->err = 0;
			g->filled = g->drained = 0;
			st(&g->msg, p.k);
			p.stage = 1;
			return 1;
		}
		if (p.stage == 1) {
			size_t room = NC_RING - (p.done - ld(&g->drained)), moved = 0;
			while (room && p.done < p.bytes) {
				size_t at = p.done % NC_RING, m = NC_RING - at;
				m = m < room ? m : room;
				m = m < p.bytes - p.done ? m : p.bytes - p.done;
				memcpy(data + at, o.send + p.done, m);
				p.done += m, room -= m, moved += m;
			}
			if (moved)
				st(&g->filled, (uint64_t)p.done);
			if (p.done == p.bytes)
				p.stage = 2;
			if (!moved && ld(&g->err))
				p.stage = 2;
			if (moved || p.stage == 2)
				return 1;
		}
		if (ld(&g->err))
			return comm_fail(c, ncclInvalidUsage, "%s: rank %d received it as %s", p.what.c_str(),
					 o.peer, call_str(K_RECV, g->rcount, g->rdtype, -1, -1, me).c_str()), -1;
		if (p.stage == 2 && ld(&g->acked) == p.k) {
			p.stage = 3;
			return 1;
		}
		return 0;
	}
	Ring *g = (Ring *)sh_ring(c, o.peer, me);
	char *data = (char *)(g + 1);
	if (p.stage == 0) {
		if (ld(&g->msg) != p.k)
			return 0;
		if (g->count != o.count || g->dtype != o.dtype) {
			g->rcount = o.count;
			g->rdtype = o.dtype;
			st(&g->err, 1);
			return comm_fail(c, ncclInvalidUsage, "%s: rank %d sent %s", p.what.c_str(), o.peer,
					 call_str(K_SEND, g->count, g->dtype, -1, -1, me).c_str()), -1;
		}
		p.stage = 1;
	}
	size_t avail = ld(&g->filled) - p.done, moved = 0;
	while (avail) {
		size_t at = p.done % NC_RING, m = NC_RING - at;
		m = m < avail ? m : avail;
		memcpy(o.recv + p.done, data + at, m);
		p.done += m, avail -= m, moved += m;
	}
	if (moved)
		st(&g->drained, (uint64_t)p.done);
	if (p.done == p.bytes) {
		st(&g->acked, p.k);
		p.stage = 3;
		return 1;
	}
	return moved ? 1 : 0;
}

static ncclResult_t run_p2p(ncclComm *c, const std::vector<const Call *> &calls)
{
	std::vector<P2p> ps;
	std::string all;
	for (const Call *o : calls) {
		P2p p;
		p.o = o;
		p.k = o->kind == K_SEND ? ++c->sent[o->peer] : ++c->recvd[o->peer];
		p.bytes = o->count * type_size(o->dtype);
		p.done = 0;
		p.stage = 0;
		p.what = call_str(o->kind, o->count, o->dtype, -1, -1, o->peer);
		all += (all.empty() ? "" : ", ") + p.what;
		ps.push_back(p);
	}
	for (P2p &p : ps)
		p.what = (ps.size() > 1 ? "group {" + all + "}: " : std::string()) + p.what;
	set_doing(c, "%s", (ps.size() > 1 ? "group {" + all + "}" : all).c_str());
	double t0 = nc_now(), limit = nc_timeout();
	Backoff b;
	for (;;) {
		int left = 0, moved = 0;
		for (P2p &p : ps) {
			if (p.stage == 3)
				continue;
			int s = p2p_step(c, p);
			if (s < 0)
				return c->async;
			moved |= s;
			left += p.stage != 3;
		}
		if (!left)
			break;
		if (moved) {
			t0 = nc_now();
			b.reset();
			continue;
		}
		for (P2p &p : ps)
			if (p.stage != 3 && peer_gone(c, p.o->peer))
				return comm_fail(c, ncclRemoteError, "%s: rank %d cannot take part: %s",
						 p.what.c_str(), p.o->peer, peer_state(c, p.o->peer).c_str());
		if (nc_now() - t0 > limit) {
			for (P2p &p : ps)
				if (p.stage != 3)
					return comm_fail(c, ncclRemoteError, "%s: no progress within %g s "
							 "(LMTK_CUDA_EXEC_NCCL_TIMEOUT); rank %d: %s (a send completes "
							 "when the peer receives it: sends and receives that must "
							 "progress together belong in one ncclGroupStart/ncclGroupEnd)",
							 p.what.c_str(), limit, p.o->peer,
							 peer_state(c, p.o->peer).c_str());
		}
		b.pause();
	}
	set_doing(c, "%s", "");
	return ncclSuccess;
}

/* The queued operation: a group's calls (or one call), communicator by communicator. */
static void run_calls(const std::vector<Call> &calls)
{
	std::vector<ncclComm *> comms;
	for (const Call &o : calls)
		if (std::find(comms.begin(), comms.end(), o.c) == comms.end())
			comms.push_back(o.c);
	for (ncclComm *c : comms) {
		if (c->aborted || c->async != ncclSuccess)
			continue;
		std::vector<const Call *> p2p;
		ncclResult_t r = ncclSuccess;
		for (const Call &o : calls) {
			if (o.c != c)
				continue;
			if (g_prof_on)
				prof_line("{\"op\":\"nccl\",\"call\":\"%s\",\"count\":%zu,"
					  "\"bytes\":%zu,\"ranks\":%d}", kind_name[o.kind], o.count,
					  o.count * type_size(o.dtype), c->nranks);
			if (o.kind == K_SEND || o.kind == K_RECV)
				p2p.push_back(&o);
			else if ((r = run_coll(c, o)))
				break;
		}
		if (!r && !p2p.empty())
			run_p2p(c, p2p);
	}
}

static thread_local int g_depth;
static thread_local std::vector<Call> g_group;
static thread_local ncclResult_t g_group_err; /* the first call of the open group that failed */

static ncclResult_t launch(std::vector<Call> calls)
{
	if (calls.empty())
		return ncclSuccess;
	std::vector<cudaStream_t> ss;
	for (const Call &o : calls)
		if (std::find(ss.begin(), ss.end(), o.stream) == ss.end())
			ss.push_back(o.stream);
	/* several streams: the group runs after the earlier work of all and before their later work */
	for (size_t i = 1; i < ss.size(); i++) {
		cudaEvent_t e;
		if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) || cudaEventRecord(e, ss[i]) ||
		    cudaStreamWaitEvent(ss[0], e, 0))
			return ncclUnhandledCudaError;
		cudaEventDestroy(e);
	}
	if (cfg.trace) /* each call as the host queued it, and over which communicator: its name less
			* a split's colour (".cN"), so the groups of one kind read alike on every rank */
		for (const Call &o : calls) {
			std::string nm = o.c->name;
			size_t dot = nm.rfind(".c");
			if (dot != std::string::npos && nm.find_first_not_of("0123456789", dot + 2) == std::string::npos)
				nm.resize(dot);
			fprintf(stderr, "cuda-exec: nccl: queued %s\n",
				(call_str(o.kind, o.count, o.dtype, o.op, o.root, o.peer) + " over " + nm +
				 " (" + std::to_string(o.c->nranks) + " ranks)").c_str());
		}
	std::shared_ptr<std::vector<Call>> sp = std::make_shared<std::vector<Call>>(std::move(calls));
	const char *what = sp->size() == 1 ? kind_name[(*sp)[0].kind] : "an NCCL group";
	if (cx_enqueue(ss[0], what, [sp]() { run_calls(*sp); }))
		return ncclUnhandledCudaError;
	for (size_t i = 1; i < ss.size(); i++) {
		cudaEvent_t e;
		if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) || cudaEventRecord(e, ss[0]) ||
		    cudaStreamWaitEvent(ss[i], e, 0))
			return ncclUnhandledCudaError;
		cudaEventDestroy(e);
	}
	return ncclSuccess;
}

static ncclResult_t check_comm(ncclComm *c, const char *fn)
{
	if (!c || !g_comms.count(c)) {
		say("%s: comm %p is not a live communicator", fn, (void *)c);
		return ncclInvalidArgument;
	}
	if (c->aborted) {
		say("%s: rank %d: the communicator was aborted", fn, c->rank);
		return ncclInvalidUsage;
	}
	if (c->async != ncclSuccess) {
		g_lasterr = c->msg;
		return c->async;
	}
	return ncclSuccess;
}

static int overlap(const char *a, size_t an, const char *b, size_t bn)
{
	return a < b + bn && b < a + an;
}

static ncclResult_t submit_checked(Call o);

/* A call that fails inside a group fails the group: ncclGroupEnd returns its error and launches
 * nothing, as NCCL's group error does. */
static ncclResult_t submit(Call o)
{
	ncclResult_t r = submit_checked(o);
	if (r && g_depth > 0 && !g_group_err)
		g_group_err = r;
	return r;
}

static ncclResult_t submit_checked(Call o)
{
	const char *fn = kind_name[o.kind];
	ncclResult_t r = check_comm(o.c, fn);
	if (r)
		return r;
	ncclComm *c = o.c;
	int n = c->nranks;
	if (o.dtype < 0 || o.dtype >= ncclNumTypes) {
		say("%s: rank %d: datatype %d is not an ncclDataType_t this NCCL has", fn, c->rank, o.dtype);
		return ncclInvalidArgument;
	}
	if ((o.kind == K_ALLREDUCE || o.kind == K_REDUCE || o.kind == K_REDUCESCATTER) &&
	    (o.op < 0 || o.op >= ncclNumOps)) {
		say("%s: rank %d: reduction operation %d is not one of ncclSum, ncclProd, ncclMax, "
		    "ncclMin, ncclAvg", fn, c->rank, o.op);
		return ncclInvalidArgument;
	}
	if ((o.kind == K_BROADCAST || o.kind == K_REDUCE) && (o.root < 0 || o.root >= n)) {
		say("%s: rank %d: root %d is not a rank of this %d-rank communicator", fn, c->rank, o.root, n);
		return ncclInvalidArgument;
	}
	if ((o.kind == K_SEND || o.kind == K_RECV) && (o.peer < 0 || o.peer >= n)) {
		say("%s: rank %d: peer %d is not a rank of this %d-rank communicator", fn, c->rank, o.peer, n);
		return ncclInvalidArgument;
	}
	size_t es = type_size(o.dtype), in = o.count * es, out = o.count * es;
	int use_send = 1, use_recv = 1;
	switch (o.kind) {
	case K_ALLGATHER: out = in * n; break;
	case K_REDUCESCATTER: in = out * n; break;
	case K_BROADCAST: use_send = c->rank == o.root; break;
	case K_REDUCE: use_recv = c->rank == o.root; break;
	case K_SEND: use_recv = 0; break;
	case K_RECV: use_send = 0; break;
	}
	if (o.count == 0 && o.kind != K_SEND && o.kind != K_RECV)
		return ncclSuccess; /* as NCCL: an empty collective is no operation */
	if ((use_send && !cx_device_range(o.send, in, fn, "sendbuff")) ||
	    (use_recv && !cx_device_range(o.recv, out, fn, "recvbuff"))) {
		g_lasterr = cx_last_diagnostic();
		return ncclInvalidArgument;
	}
	if (use_send && use_recv && overlap(o.send, in, o.recv, out)) {
		int inplace = o.kind == K_ALLGATHER ? o.send == o.recv + c->rank * in :
			      o.kind == K_REDUCESCATTER ? o.send + c->rank * out == o.recv :
			      o.send == o.recv;
		if (!inplace) {
			say("%s: rank %d: sendbuff %p (%zu bytes) and recvbuff %p (%zu bytes) overlap but "
			    "are not NCCL's in-place form (%s)", fn, c->rank, (const void *)o.send, in,
			    (void *)o.recv, out,
			    o.kind == K_ALLGATHER ? "sendbuff == recvbuff + rank*sendcount" :
			    o.kind == K_REDUCESCATTER ? "sendbuff + rank*recvcount == recvbuff" :
			    "sendbuff == recvbuff");
			return ncclInvalidUsage;
		}
	}
	if (g_depth > 0) {
		g_group.push_back(o);
		return ncclSuccess;
	}
	return launch(std::vector<Call>{o});
}

/* --- the API --------------------------------------------------------------------------------- */

extern "C" {

ncclResult_t ncclGetVersion(int *version)
{
	if (!version)
		return ncclInvalidArgument;
	*version = NCCL_VERSION_CODE;
	return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r)
{
	switch (r) {
	case ncclSuccess: return "no error";
	case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
	case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
	case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
	case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
	case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
	case ncclRemoteError: return "remote process exited or there was a network error";
	case ncclInProgress: return "NCCL operation in progress";
	default: return "unknown result code";
	}
}

const char *ncclGetLastError(ncclComm_t comm)
{
	(void)comm;
	return g_lasterr.c_str();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
	static unsigned counter;
	if (!id)
		return ncclInvalidArgument;
	memset(id, 0, sizeof *id);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(id->internal, sizeof id->internal, "%s/lmtk-nccl-%d-%u-%lx", id_prefix, (int)getpid(),
		 ++counter, (unsigned long)(ts.tv_nsec ^ (ts.tv_sec << 20)));
	return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank)
{
	if (!out) {
		say("ncclCommInitRank: comm is a null pointer");
		return ncclInvalidArgument;
	}
	*out = NULL;
	if (g_depth > 0) {
		say("ncclCommInitRank: inside ncclGroupStart/ncclGroupEnd (NCCL cannot merge it with "
		    "other calls either)");
		return ncclInvalidUsage;
	}
	id.internal[NCCL_UNIQUE_ID_BYTES - 1] = 0;
	const char *name = id.internal + strlen(id_prefix);
	if (strncmp(id.internal, id_prefix, strlen(id_prefix)) || name[0] != '/') {
		say("ncclCommInitRank: the id is not one ncclGetUniqueId made");
		return ncclInvalidArgument;
	}
	if (nranks < 1 || nranks > NC_MAXRANKS || rank < 0 || rank >= nranks) {
		say("ncclCommInitRank: rank %d of %d ranks: needs 0 <= rank < nranks <= %d", rank, nranks,
		    NC_MAXRANKS);
		return ncclInvalidArgument;
	}
	int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
	if (fd < 0) {
		say("ncclCommInitRank: shm_open %s: %s", name, strerror(errno));
		return ncclSystemError;
	}
	size_t size = seg_bytes(nranks);
	struct stat sb;
	if (fstat(fd, &sb) < 0 || ((size_t)sb.st_size < size && ftruncate(fd, size) < 0)) {
		say("ncclCommInitRank: sizing %s to %zu bytes: %s", name, size, strerror(errno));
		close(fd);
		return ncclSystemError;
	}
	char *base = (char *)mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (base == MAP_FAILED) {
		say("ncclCommInitRank: mmap %s: %s", name, strerror(errno));
		return ncclSystemError;
	}
	ncclComm *c = new ncclComm();
	c->rank = rank;
	c->nranks = nranks;
	cudaGetDevice(&c->device);
	snprintf(c->name, sizeof c->name, "%s", name);
	c->base = base;
	c->size = size;
	c->h = (Hdr *)base;
	c->rk = (RankSh *)(base + 64);
	c->sent.assign(nranks, 0);
	c->recvd.assign(nranks, 0);
	int32_t expect = 0;
	if (!__atomic_compare_exchange_n(&c->h->nranks, &expect, (int32_t)nranks, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) && expect != nranks) {
		say("ncclCommInitRank: rank %d says nranks %d, but the ranks that joined before it say %d",
		    rank, nranks, expect);
		munmap(base, size);
		delete c;
		return ncclInvalidUsage;
	}
	int32_t none = 0, pid = (int32_t)getpid();
	if (!__atomic_compare_exchange_n(&c->rk[rank].pid, &none, pid, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		say("ncclCommInitRank: rank %d has already joined this id (pid %d)", rank, none);
		munmap(base, size);
		delete c;
		return ncclInvalidUsage;
	}
	st(&c->rk[rank].state, (int32_t)ST_LIVE);
	__atomic_add_fetch(&c->h->joined, 1, __ATOMIC_ACQ_REL);
	set_doing(c, "ncclCommInitRank");
	double t0 = nc_now(), limit = nc_timeout();
	Backoff b;
	while (ld(&c->h->joined) < nranks) {
		if (nc_now() - t0 > limit) {
			std::string missing;
			for (int j = 0; j < nranks; j++)
				if (!ld(&c->rk[j].pid))
					missing += (missing.empty() ? "" : ", ") + std::to_string(j);
			say("ncclCommInitRank: rank %d: only %d of %d ranks joined within %g s "
			    "(LMTK_CUDA_EXEC_NCCL_TIMEOUT); missing: rank %s", rank, ld(&c->h->joined),
			    nranks, limit, missing.c_str());
			st(&c->rk[rank].state, (int32_t)ST_FAILED);
			shm_unlink(name);
			munmap(base, size);
			delete c;
			return ncclRemoteError;
		}
		b.pause();
	}
	shm_unlink(name); /* everyone has it open: nothing stays in /dev/shm */
	set_doing(c, "%s", "");
	c->h->magic = NC_MAGIC;
	g_comms.insert(c);
	*out = c;
	return ncclSuccess;
}

/* NCCL's ncclCommSplit: collective over the parent, blocking.  The parent's queued operations run
 * first (the exchange goes through the parent's segment, after them on every rank); then every
 * rank's (color, key) is exchanged, and the ranks of one color join a new segment named after the
 * parent's, the split's number and the color, ordered by key, ties by their parent rank, as NCCL
 * documents. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
	if (!newcomm) {
		say("ncclCommSplit: newcomm is a null pointer");
		return ncclInvalidArgument;
	}
	*newcomm = NULL;
	ncclResult_t r = check_comm(comm, "ncclCommSplit");
	if (r)
		return r;
	if (g_depth > 0) {
		say("ncclCommSplit: inside ncclGroupStart/ncclGroupEnd (the executor does not group it)");
		return ncclInvalidUsage;
	}
	if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
		say("ncclCommSplit: rank %d: color %d is neither >= 0 nor NCCL_SPLIT_NOCOLOR", comm->rank,
		    color);
		return ncclInvalidArgument;
	}
	if (config && config->magic != 0xcafebeef) {
		say("ncclCommSplit: the config was not set from NCCL_CONFIG_INITIALIZER");
		return ncclInvalidArgument;
	}
	cudaDeviceSynchronize();
	if (comm->async != ncclSuccess)
		return comm->async;
	int n = comm->nranks;
	int32_t mine[2] = {color, key};
	std::vector<int32_t> all((size_t)n * 2);
	r = run_coll(comm, Call{K_SPLIT, (const char *)mine, (char *)all.data(), 2, ncclInt32, -1, -1,
				-1, comm, 0});
	if (r)
		return r;
	uint64_t split = ++comm->splits;
	if (color == NCCL_SPLIT_NOCOLOR)
		return ncclSuccess;
	std::vector<std::pair<int32_t, int>> members; /* (key, parent rank) of this color */
	for (int j = 0; j < n; j++)
		if (all[(size_t)j * 2] == color)
			members.push_back({all[(size_t)j * 2 + 1], j});
	std::sort(members.begin(), members.end());
	int newrank = 0;
	while (members[(size_t)newrank].second != comm->rank)
		newrank++;
	ncclUniqueId id;
	memset(&id, 0, sizeof id);
	int len = snprintf(id.internal, sizeof id.internal, "%s%s.s%llu.c%d", id_prefix, comm->name,
			   (unsigned long long)split, color);
	if (len < 0 || (size_t)len >= sizeof id.internal) {
		say("ncclCommSplit: split %llu of %s: the new communicator's name is too long",
		    (unsigned long long)split, comm->name);
		return ncclInternalError;
	}
	return ncclCommInitRank(newcomm, (int)members.size(), id, newrank);
}

ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
	if (!comms || ndev < 1) {
		say("ncclCommInitAll: needs comms and ndev >= 1");
		return ncclInvalidArgument;
	}
	if (ndev != 1 || (devlist && devlist[0] != 0)) {
		say("ncclCommInitAll: %d devices: the executor has one device per process (ranks are "
		    "processes: use ncclCommInitRank)", ndev);
		return ncclInvalidUsage;
	}
	ncclUniqueId id;
	ncclGetUniqueId(&id);
	return ncclCommInitRank(comms, 1, id, 0);
}

static ncclResult_t comm_end(ncclComm *c, const char *fn, int abort)
{
	if (!c)
		return ncclSuccess; /* as NCCL: destroying NULL is no operation */
	if (!g_comms.count(c)) {
		say("%s: comm %p is not a live communicator", fn, (void *)c);
		return ncclInvalidArgument;
	}
	if (!abort)
		cudaDeviceSynchronize(); /* as ncclCommDestroy: the issued operations complete first */
	RankSh *me = &c->rk[c->rank];
	if (ld(&me->state) == ST_LIVE)
		st(&me->state, (int32_t)(abort ? ST_ABORTED : ST_DESTROYED));
	g_comms.erase(c);
	c->aborted = 1; /* queued operations that are left find it so and do nothing */
	munmap(c->base, c->size);
	c->base = NULL;
	/* the struct is kept: operations still queued refer to it */
	return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
	ncclResult_t r = check_comm(comm, "ncclCommFinalize");
	if (r)
		return r;
	cudaDeviceSynchronize();
	return comm->async;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	return comm_end(comm, "ncclCommDestroy", 0);
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
	return comm_end(comm, "ncclCommAbort", 1);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err)
{
	if (!comm || !err || !g_comms.count(comm))
		return ncclInvalidArgument;
	*err = comm->async;
	return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
	if (!comm || !count || !g_comms.count(comm))
		return ncclInvalidArgument;
	*count = comm->nranks;
	return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
	if (!comm || !device || !g_comms.count(comm))
		return ncclInvalidArgument;
	*device = comm->device;
	return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
	if (!comm || !rank || !g_comms.count(comm))
		return ncclInvalidArgument;
	*rank = comm->rank;
	return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
			   ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
	return submit(Call{K_ALLREDUCE, (const char *)sendbuff, (char *)recvbuff, count, datatype, op,
			   -1, -1, comm, stream});
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
			   int root, ncclComm_t comm, cudaStream_t stream)
{
	return submit(Call{K_BROADCAST, (const char *)sendbuff, (char *)recvbuff, count, datatype, -1,
			   root, -1, comm, stream});
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
		       cudaStream_t stream)
{
	return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
			ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
	return submit(Call{K_REDUCE, (const char *)sendbuff, (char *)recvbuff, count, datatype, op, root,
			   -1, comm, stream});
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
			   ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
	return submit(Call{K_ALLGATHER, (const char *)sendbuff, (char *)recvbuff, sendcount, datatype,
			   -1, -1, -1, comm, stream});
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
			       ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
			       cudaStream_t stream)
{
	return submit(Call{K_REDUCESCATTER, (const char *)sendbuff, (char *)recvbuff, recvcount,
			   datatype, op, -1, -1, comm, stream});
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
		      ncclComm_t comm, cudaStream_t stream)
{
	return submit(Call{K_SEND, (const char *)sendbuff, NULL, count, datatype, -1, -1, peer, comm,
			   stream});
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
		      ncclComm_t comm, cudaStream_t stream)
{
	return submit(Call{K_RECV, NULL, (char *)recvbuff, count, datatype, -1, -1, peer, comm, stream});
}

ncclResult_t ncclGroupStart(void)
{
	g_depth++;
	return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
	if (g_depth <= 0) {
		say("ncclGroupEnd without ncclGroupStart");
		return ncclInvalidUsage;
	}
	if (--g_depth > 0)
		return ncclSuccess;
	std::vector<Call> calls;
	calls.swap(g_group);
	if (g_group_err) {
		ncclResult_t r = g_group_err;
		g_group_err = ncclSuccess;
		say("ncclGroupEnd: a call in the group failed (%s): none of its %zu other calls was launched",
		    ncclGetErrorString(r), calls.size());
		return r;
	}
	return launch(std::move(calls));
}

} /* extern "C" */
