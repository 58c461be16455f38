/* dist_nccl - the NCCL transport of dist.h, for CUDA runs with several ranks.
 *
 * It lives in the CUDA plugin rather than in a plugin of its own so that it shares the backend's
 * device and its one stream: a collective over the model's tensors is queued on that stream like
 * a kernel, after the kernels that wrote its buffer and before those that read the result, and
 * the host never waits for it (the model passes its device pointers; dist.h's "backend memory").
 * The same source compiles against the CPU executor's NCCL (tests/cuda-exec/nccl.cpp, ranks as
 * processes), so every collective here runs in `make check` without a GPU.  train finds it
 * through the plugin's second exported symbol, lmtk_dist_nccl.
 *
 * Communicators.  One per group this rank belongs to (world, DP, TP, PP, and the embedding pair
 * of first and last stage when PP > 2; with PP = 2 that pair is the PP group), none for a group
 * of one, whose collectives are the identity.  The layout is dist.c's (dist_layout: the groups'
 * colours and ranks, the same table the MPI transport splits by).  Only the world is
 * bootstrapped: rank 0 makes one ncclUniqueId and sends it through struct dist_boot (MPI's
 * broadcast, or rendezvous.h's files), every rank joins the world, and each group is an
 * ncclCommSplit of the world, in the table's order on every rank - one bootstrap root in all,
 * and NCCL may share the world's resources with the groups, instead of one id and one
 * ncclCommInitRank per group (209 roots on rank 0 at TP4 x PP12 x DP8).
 *
 * Bit-identical replicas.  Megatron's 176B layer-norm desync came from replicas that stopped
 * agreeing in their last bits.  A sum here is a reduce-scatter followed by an all-gather (what a
 * ring all-reduce is inside, at the same bandwidth): each element is summed once, on the rank
 * that owns its shard, and that one result is copied to every rank, so the group holds the same
 * bits by construction whatever algorithm NCCL picks for the reduction; the few elements past the
 * last whole shard are reduced to rank 0 and broadcast.  With two ranks the sum is a + b, which
 * is why DP=2 equals one rank accumulating both micro-batches' gradients.  Maxima are exact and
 * go through ncclAllReduce.  What NCCL does not promise is the same summation order as another
 * group size or another machine's topology: bits agree across the ranks of a run, not across
 * layouts.
 *
 * Gradient buckets (dist.h bucket_*, run/buckets.h) are the one exception to the one stream: a
 * second stream, made on first use, takes each bucket's sum (or ZeRO-1's reduce-scatter of the
 * padded bucket) behind an event the compute stream records as the run hands it over, so the sum
 * runs under the rest of the backward; bucket_wait makes the compute stream wait for the last one
 * before the gradient norm.  Every host-memory collective below waits for the buckets first, so
 * that each rank reaches its host synchronisations with the same collectives queued before them.
 *
 * Two streams, several communicators: the order.  While a bucket's reduce runs on the comm stream
 * (DP), the backward goes on queueing TP's sums and PP's sends on the compute stream.  NCCL's
 * kernels block until their peers arrive, so two ranks that share two communicators and start
 * their collectives in different orders can wait for each other for ever; NCCL asks that every
 * rank submit them in the same order.  Here they are: each rank queues every call from one host
 * thread in program order, and that order is a function of the model, the flags and the
 * pipeline stage only - the backward's layer sequence, where TP sums; the buckets, whose cuts
 * and order depend on the model and the flags (ZeRO-1's are fixed at init, model.h zb) and go
 * when a layer's gradients are final, at the same point of every rank's backward; the 1F1B
 * schedule, fixed by the stage and the micro-batch count - never of data or timing (the data's
 * decisions - skip, stop, save - are world collectives that every rank takes at the same point).
 * So ranks of one stage (all of a DP and a TP group) queue the same sequence of calls, and ranks
 * of different stages share only the PP and embedding communicators (sends, receives and the
 * tied embedding's sum, all on the compute stream in the schedule's order) and the world
 * (host-memory collectives, queued only after the buckets are waited for).  tests/cli/
 * train-ddp.sh compares the calls each rank of a DP x TP and a DP x PP run queues, in order
 * (the executor's trace names each call, its count and its communicator).  And the device
 * starts them in that order: the CUDA plugin asks for one hardware queue for all streams
 * (CUDA_DEVICE_MAX_CONNECTIONS=1, as Megatron-LM does for the same reason; ops_cuda.cu), so a
 * later collective is never dispatched before an earlier one on another stream.
 *
 * Host memory (losses, norms, decisions, the vocabulary-parallel cross-entropy's statistics,
 * checkpoint bookkeeping) goes through a device staging buffer: copy in, collective, copy out,
 * synchronise - a few per iteration, each a few bytes to a few tens of kilobytes.  A deferred
 * step (run/iter.h) has none: its losses, norm and flags stay on the device and their sums
 * are queued like the gradients' (dev_reduce).
 *
 * Failures: a failing NCCL call ends the program as a failing CUDA call does ("train: cuda:
 * nccl: ...", exit 3), naming the collective and the group; an error inside a queued collective
 * (a rank that died) surfaces at the next synchronisation as the stream's error. */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "train/cuda/common.h"

extern "C" {
#include "train/parallel/dist.h"
}

struct nccl_state {
	ncclComm_t comm[DIST_GROUPS];   /* NULL: this rank's group has one member, or none */
	int size[DIST_GROUPS], rank[DIST_GROUPS];
	void *stage;                    /* device staging for the host-memory collectives */
	size_t stage_size;
	/* gradient buckets: their stream, one event per bucket of the step (the compute stream's
	 * point the bucket waits for), and the comm stream's last point the compute stream waits
	 * for; `used` events of this step, `inflight` buckets not yet waited for */
	cudaStream_t comm_stream;
	std::vector<cudaEvent_t> *ev;
	cudaEvent_t done;
	size_t used;
	int inflight;
	struct dist_boot *boot;
};
static struct nccl_state nc;

static const char *const group_name[DIST_GROUPS] = {"world", "DP", "TP", "PP", "embedding"};

#define NC_CHECK(call, what, g)                                                                    \
	do {                                                                                       \
		ncclResult_t r_ = (call);                                                          \
		if (r_ != ncclSuccess)                                                             \
			nc_die(r_, what, g);                                                       \
	} while (0)

static void nc_die(ncclResult_t r, const char *what, enum dist_group g) __attribute__((noreturn));
static void nc_die(ncclResult_t r, const char *what, enum dist_group g)
{
	const char *last = ncclGetLastError(nc.comm[g]);
	cu_die("nccl: %s over the %s group (rank %d of %d): %s%s%s", what, group_name[g], nc.rank[g],
	       nc.size[g], ncclGetErrorString(r), last && *last ? ": " : "", last ? last : "");
}

/* --- the backend's memory -------------------------------------------------------------------- */

/* x(n) summed over group g in place, the same bits on every member (see the top of the file) */
static void allsum_on(enum dist_group g, void *x, size_t n, ncclDataType_t t, size_t esz,
		      cudaStream_t st)
{
	CU_ENTER();
	size_t P = (size_t)nc.size[g];
	if (P <= 1 || n == 0)
		return;
	ncclComm_t c = nc.comm[g];
	size_t per = n / P, body = per * P;
	char *p = (char *)x, *mine = p + (size_t)nc.rank[g] * per * esz, *tail = p + body * esz;
	if (per) {
		NC_CHECK(ncclReduceScatter(p, mine, per, t, ncclSum, c, st), "ncclReduceScatter", g);
		NC_CHECK(ncclAllGather(mine, p, per, t, c, st), "ncclAllGather", g);
	}
	if (n > body) {
		NC_CHECK(ncclReduce(tail, tail, n - body, t, ncclSum, 0, c, st), "ncclReduce", g);
		NC_CHECK(ncclBroadcast(tail, tail, n - body, t, 0, c, st), "ncclBroadcast", g);
	}
}

static void allsum(enum dist_group g, void *x, size_t n, ncclDataType_t t, size_t esz)
{
	allsum_on(g, x, n, t, esz, cu.stream);
}

static void nc_sum_f32(struct dist *d, enum dist_group g, float *x, size_t n)
{
	(void)d;
	allsum(g, x, n, ncclFloat32, sizeof *x);
}

/* the backend's activations are bf16 or fp16 (cu.act); NCCL rounds each sum to that type */
static void nc_sum_act(struct dist *d, enum dist_group g, void *x, size_t n)
{
	(void)d;
	allsum(g, x, n, cu.act == CU_F16 ? ncclFloat16 : ncclBfloat16, sizeof(bf16));
}

/* ZeRO-1's parameter all-gather of one bucket: its chunks are equal (model.h zb), so one
 * ncclAllGather, in place */
static void nc_gather_f32(struct dist *d, enum dist_group g, float *x, size_t n)
{
	(void)d;
	CU_ENTER();
	size_t c = nc.size[g] > 1 ? n / (size_t)nc.size[g] : 0;
	if (!c)
		return;
	NC_CHECK(ncclAllGather(x + (size_t)nc.rank[g] * c, x, c, ncclFloat32, nc.comm[g], cu.stream),
		 "ncclAllGather", g);
}

/* Gradient buckets (dist.h).  The comm stream waits for the compute stream's work so far (an
 * event per bucket, so a later bucket's record never moves an earlier bucket's wait), then sums;
 * bucket_wait makes the compute stream wait for the comm stream's last sum.  The buckets go out
 * in the order the run calls them, the same on every rank, so the bits are the same every run. */
static cudaStream_t bucket_begin(void)
{
	if (!nc.comm_stream) {
		CU_CHECK(cudaStreamCreateWithFlags(&nc.comm_stream, cudaStreamNonBlocking));
		CU_CHECK(cudaEventCreateWithFlags(&nc.done, cudaEventDisableTiming));
		nc.ev = new std::vector<cudaEvent_t>;
	}
	if (nc.used == nc.ev->size()) {
		cudaEvent_t e;
		CU_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
		nc.ev->push_back(e);
	}
	cudaEvent_t e = (*nc.ev)[nc.used++];
	CU_CHECK(cudaEventRecord(e, cu.stream));
	CU_CHECK(cudaStreamWaitEvent(nc.comm_stream, e, 0));
	nc.inflight++;
	return nc.comm_stream;
}

static void nc_bucket_sum_f32(struct dist *d, enum dist_group g, float *x, size_t n)
{
	(void)d;
	CU_ENTER();
	if (nc.size[g] <= 1 || n == 0)
		return;
	allsum_on(g, x, n, ncclFloat32, sizeof *x, bucket_begin());
}

/* ZeRO-1: one ncclReduceScatter of the bucket, in place: the bucket is padded to P equal chunks
 * (model.h zb, Megatron's distributed optimizer), rank r's chunk being its shard of the bucket */
static void nc_bucket_reduce_f32(struct dist *d, enum dist_group g, float *x, size_t n)
{
	(void)d;
	CU_ENTER();
	size_t c = nc.size[g] > 1 ? n / (size_t)nc.size[g] : 0;
	if (!c)
		return;
	NC_CHECK(ncclReduceScatter(x, x + (size_t)nc.rank[g] * c, c, ncclFloat32, ncclSum, nc.comm[g],
				   bucket_begin()), "ncclReduceScatter", g);
}

static void nc_bucket_wait(struct dist *d)
{
	(void)d;
	CU_ENTER();
	if (!nc.inflight)
		return;
	CU_CHECK(cudaEventRecord(nc.done, nc.comm_stream));
	CU_CHECK(cudaStreamWaitEvent(cu.stream, nc.done, 0));
	nc.inflight = 0;
	nc.used = 0;
}

static void nc_p2p(struct dist *d, const void *sbuf, size_t sb, int to, void *rbuf, size_t rb,
		   int from)
{
	(void)d;
	CU_ENTER();
	ncclComm_t c = nc.comm[DIST_PP];
	NC_CHECK(ncclGroupStart(), "ncclGroupStart", DIST_PP);
	if (sbuf)
		NC_CHECK(ncclSend(sbuf, sb, ncclUint8, to, c, cu.stream), "ncclSend", DIST_PP);
	if (rbuf)
		NC_CHECK(ncclRecv(rbuf, rb, ncclUint8, from, c, cu.stream), "ncclRecv", DIST_PP);
	NC_CHECK(ncclGroupEnd(), "ncclGroupEnd (pipeline send/receive)", DIST_PP);
}

/* --- host memory ----------------------------------------------------------------------------- */

static char *staging(size_t bytes)
{
	if (bytes > nc.stage_size) {
		size_t size = cu_round256(bytes > 2 * nc.stage_size ? bytes : 2 * nc.stage_size);
		CU_CHECK(cudaStreamSynchronize(cu.stream));
		if (nc.stage)
			CU_CHECK(cudaFree(nc.stage));
		nc.stage = NULL;
		nc.stage_size = 0;
		if (cudaMalloc(&nc.stage, size) != cudaSuccess)
			cu_die("nccl: out of GPU memory for %zu bytes of staging", size);
		nc.stage_size = size;
	}
	return (char *)nc.stage;
}

static void host_reduce(enum dist_group g, void *x, size_t n, ncclDataType_t t, size_t esz,
			ncclRedOp_t op)
{
	CU_ENTER();
	if (nc.size[g] <= 1 || n == 0)
		return;
	nc_bucket_wait(NULL);   /* every rank syncs after the same buckets (the top of the file) */
	char *s = staging(n * esz);
	CU_CHECK(cudaMemcpyAsync(s, x, n * esz, cudaMemcpyHostToDevice, cu.stream));
	if (op == ncclSum)
		allsum(g, s, n, t, esz);
	else
		NC_CHECK(ncclAllReduce(s, s, n, t, op, nc.comm[g], cu.stream), "ncclAllReduce", g);
	CU_CHECK(cudaMemcpyAsync(x, s, n * esz, cudaMemcpyDeviceToHost, cu.stream));
	CU_CHECK(cudaStreamSynchronize(cu.stream));
}

static void nc_host_sum_f32(struct dist *d, enum dist_group g, float *x, size_t n)
{
	(void)d;
	host_reduce(g, x, n, ncclFloat32, sizeof *x, ncclSum);
}

static void nc_host_max_f32(struct dist *d, enum dist_group g, float *x, size_t n)
{
	(void)d;
	host_reduce(g, x, n, ncclFloat32, sizeof *x, ncclMax);
}

static void nc_sum_f64(struct dist *d, enum dist_group g, double *x, size_t n)
{
	(void)d;
	host_reduce(g, x, n, ncclFloat64, sizeof *x, ncclSum);
}

/* A deferred step's scalars, in device memory: queued on the compute stream like sum_f32 */
static void nc_dev_reduce(struct dist *d, enum dist_group g, void *x, size_t n, int type, int op)
{
	(void)d;
	CU_ENTER();
	if (nc.size[g] <= 1 || n == 0)
		return;
	ncclDataType_t t = type == DIST_F64 ? ncclFloat64 : type == DIST_F32 ? ncclFloat32 : ncclInt32;
	size_t esz = type == DIST_F64 ? sizeof(double) : sizeof(int32_t);   /* = sizeof(float) */
	if (op == DIST_SUM)
		allsum(g, x, n, t, esz);
	else
		NC_CHECK(ncclAllReduce(x, x, n, t, ncclMax, nc.comm[g], cu.stream), "ncclAllReduce", g);
}

static void nc_allgather(struct dist *d, enum dist_group g, const void *in, size_t bytes, void *out)
{
	(void)d;
	CU_ENTER();
	size_t P = nc.size[g] > 1 ? (size_t)nc.size[g] : 1;
	if (P == 1) {
		memmove(out, in, bytes);
		return;
	}
	if (!bytes)
		return;
	nc_bucket_wait(NULL);
	char *s = staging(P * bytes), *mine = s + (size_t)nc.rank[g] * bytes;
	CU_CHECK(cudaMemcpyAsync(mine, in, bytes, cudaMemcpyHostToDevice, cu.stream));
	NC_CHECK(ncclAllGather(mine, s, bytes, ncclUint8, nc.comm[g], cu.stream), "ncclAllGather", g);
	CU_CHECK(cudaMemcpyAsync(out, s, P * bytes, cudaMemcpyDeviceToHost, cu.stream));
	CU_CHECK(cudaStreamSynchronize(cu.stream));
}

static void nc_bcast(struct dist *d, enum dist_group g, void *x, size_t bytes, int root)
{
	(void)d;
	CU_ENTER();
	if (nc.size[g] <= 1 || !bytes)
		return;
	nc_bucket_wait(NULL);
	char *s = staging(bytes);
	if (nc.rank[g] == root)
		CU_CHECK(cudaMemcpyAsync(s, x, bytes, cudaMemcpyHostToDevice, cu.stream));
	NC_CHECK(ncclBroadcast(s, s, bytes, ncclUint8, root, nc.comm[g], cu.stream), "ncclBroadcast", g);
	CU_CHECK(cudaMemcpyAsync(x, s, bytes, cudaMemcpyDeviceToHost, cu.stream));
	CU_CHECK(cudaStreamSynchronize(cu.stream));
}

static void nc_barrier(struct dist *d)
{
	int one = 1;
	(void)d;
	host_reduce(DIST_WORLD, &one, 1, ncclInt32, sizeof one, ncclSum);
}

static void nc_finish(struct dist *d)
{
	CU_ENTER();
	(void)d;
	nc_bucket_wait(d);
	cudaStreamSynchronize(cu.stream);
	if (nc.comm_stream) {
		for (cudaEvent_t e : *nc.ev)
			cudaEventDestroy(e);
		delete nc.ev;
		nc.ev = NULL;
		cudaEventDestroy(nc.done);
		cudaStreamDestroy(nc.comm_stream);
		nc.comm_stream = NULL;
	}
	for (int g = 0; g < DIST_GROUPS; g++) {
		if (!nc.comm[g])
			continue;
		for (int h = g + 1; h < DIST_GROUPS; h++)   /* the embedding pair may be the PP group */
			if (nc.comm[h] == nc.comm[g])
				nc.comm[h] = NULL;
		ncclCommDestroy(nc.comm[g]);
		nc.comm[g] = NULL;
	}
	if (nc.stage)
		cudaFree(nc.stage);
	nc.stage = NULL;
	nc.stage_size = 0;
	if (nc.boot && nc.boot->mpi && nc.boot->mpi->finish)
		nc.boot->mpi->finish(nc.boot->mpi);
	nc.boot = NULL;
}

/* --- forming the groups ---------------------------------------------------------------------- */

static int nccl_fail(char *err, size_t errlen, const char *what, enum dist_group g, int rank,
		     int size, ncclResult_t r)
{
	const char *last = ncclGetLastError(NULL);
	snprintf(err, errlen, "nccl: %s the %s group (rank %d of %d): %s%s%.400s", what,
		 group_name[g], rank, size, ncclGetErrorString(r), last && *last ? ": " : "",
		 last ? last : "");
	return DIST_NOT_MET;
}

extern "C" __attribute__((visibility("default"))) int
lmtk_dist_nccl(struct dist *d, struct dist_boot *boot, char *err, size_t errlen)
{
	if (!cu.stream) {
		snprintf(err, errlen, "nccl: the CUDA backend is not open");
		return -1;
	}
	CU_ENTER();
	memset(&nc, 0, sizeof nc);
	for (int g = 0; g < DIST_GROUPS; g++) {
		nc.size[g] = d->gsize[g];
		nc.rank[g] = d->grank[g];
	}
	/* the world: one unique id, made by rank 0 and carried by boot */
	ncclUniqueId id;
	memset(&id, 0, sizeof id);
	if (d->rank == 0) {
		ncclResult_t r = ncclGetUniqueId(&id);
		if (r != ncclSuccess) {
			snprintf(err, errlen, "nccl: ncclGetUniqueId: %s", ncclGetErrorString(r));
			return DIST_NOT_MET;
		}
	}
	if (boot->bcast(boot, &id, sizeof id, err, errlen) < 0)
		return DIST_NOT_MET;
	nc.boot = boot;
	ncclResult_t r = ncclCommInitRank(&nc.comm[DIST_WORLD], d->world, id, d->rank);
	if (r != ncclSuccess) {
		nc.comm[DIST_WORLD] = NULL;
		return nccl_fail(err, errlen, "forming", DIST_WORLD, d->rank, d->world, r);
	}
	if (boot->done)
		boot->done(boot);   /* every rank has read the id */
	/* the groups, split from the world in the table's order on every rank (a collective of the
	 * world); a kind whose groups are all of one rank is skipped by every rank alike, and with
	 * PP = 2 the embedding pair is the PP group itself */
	for (int g = DIST_WORLD + 1; g < DIST_GROUPS; g++) {
		if (g == DIST_EMB && d->pp == 2) {
			nc.comm[DIST_EMB] = nc.comm[DIST_PP];
			continue;
		}
		int kind_size = g == DIST_DP ? d->dp : g == DIST_TP ? d->tp : d->pp;
		if (kind_size <= 1 || (g == DIST_EMB && d->pp < 2))
			continue;
		int color = d->color[g] >= 0 ? d->color[g] : NCCL_SPLIT_NOCOLOR;
		r = ncclCommSplit(nc.comm[DIST_WORLD], color, d->grank[g], &nc.comm[g], NULL);
		if (r != ncclSuccess) {
			nc.comm[g] = NULL;
			return nccl_fail(err, errlen, "splitting off", (enum dist_group)g, d->grank[g],
					 d->gsize[g], r);
		}
	}

	d->transport = "nccl";
	d->sum_f32 = nc_sum_f32;
	d->sum_act = nc_sum_act;
	d->gather_f32 = nc_gather_f32;
	d->p2p = nc_p2p;
	d->bucket_sum_f32 = nc_bucket_sum_f32;
	d->bucket_reduce_f32 = nc_bucket_reduce_f32;
	d->bucket_wait = nc_bucket_wait;
	d->host_sum_f32 = nc_host_sum_f32;
	d->host_max_f32 = nc_host_max_f32;
	d->sum_f64 = nc_sum_f64;
	d->dev_reduce = nc_dev_reduce;
	d->allgather = nc_allgather;
	d->bcast = nc_bcast;
	d->barrier = nc_barrier;
	d->finish = nc_finish;
	d->impl = &nc;
	return 0;
}
