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
 * Communicators.  One per group this rank belongs to (world, TP, DP, PP, and the embedding pair
 * of first and last stage when PP > 2; with PP = 2 that pair is the PP group), none for a group
 * of one, whose collectives are the identity.  Rank 0 makes every group's ncclUniqueId and sends
 * them all in one message through struct dist_boot (MPI's broadcast, or rendezvous.h's files);
 * each rank then joins its groups in a fixed order - world, TP, DP, PP, embedding - so a rank
 * waiting in one group's ncclCommInitRank only ever waits for ranks that will get there.  One id
 * per group rather than ncclCommSplit keeps to the calls the executor models; rank 0 holds one
 * bootstrap listener per group while the groups form.
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
 * second stream, made on first use, takes each bucket's sum (or ZeRO-1's reduce onto each
 * shard's owner) behind an event the compute stream records as the run hands it over, so the sum
 * runs under the rest of the backward; bucket_wait makes the compute stream wait for the last one
 * before the gradient norm.  Every host-memory collective below waits for the buckets first, so
 * that each rank reaches its host synchronisations with the same collectives queued before them.
 *
 * Host memory (losses, norms, decisions, the vocabulary-parallel cross-entropy's statistics,
 * checkpoint bookkeeping) goes through a device staging buffer: copy in, collective, copy out,
 * synchronise - a few per iteration, each a few bytes to a few tens of kilobytes.
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
#include "train/dist/dist.h"
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

/* ZeRO-1's all-gather of unequal shards: NCCL has no all-gatherv, so each member broadcasts
 * its own piece, all in one group call */
static void nc_allgatherv_f32(struct dist *d, enum dist_group g, float *x, const int *counts,
			      const int *displs)
{
	(void)d;
	CU_ENTER();
	if (nc.size[g] <= 1)
		return;
	NC_CHECK(ncclGroupStart(), "ncclGroupStart", g);
	for (int r = 0; r < nc.size[g]; r++)
		if (counts[r] > 0)
			NC_CHECK(ncclBroadcast(x + displs[r], x + displs[r], (size_t)counts[r],
					       ncclFloat32, r, nc.comm[g], cu.stream), "ncclBroadcast", g);
	NC_CHECK(ncclGroupEnd(), "ncclGroupEnd (ZeRO-1's all-gather)", g);
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

/* ZeRO-1: each shard's part of the bucket summed onto its owner only - ncclReduce per (bucket x
 * shard) in one group call.  Not ncclReduceScatter: its equal chunks would be of the bucket, not
 * the run's shards (model_zero_range's cuts, which under bnb move to block boundaries), and
 * padding every bucket to P equal parts would move the shard boundaries bucket by bucket. */
static void nc_bucket_reduce_f32(struct dist *d, enum dist_group g, float *x, size_t lo, size_t hi,
				 const size_t *cut)
{
	(void)d;
	CU_ENTER();
	int P = nc.size[g];
	if (P <= 1 || hi <= lo)
		return;
	cudaStream_t st = bucket_begin();
	NC_CHECK(ncclGroupStart(), "ncclGroupStart", g);
	for (int r = 0; r < P; r++) {
		size_t a = cut[r] > lo ? cut[r] : lo, b = cut[r + 1] < hi ? cut[r + 1] : hi;
		if (a < b)
			NC_CHECK(ncclReduce(x + a, x + a, b - a, ncclFloat32, ncclSum, r, nc.comm[g], st),
				 "ncclReduce", g);
	}
	NC_CHECK(ncclGroupEnd(), "ncclGroupEnd (ZeRO-1's gradient reduce)", g);
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

static int join(enum dist_group g, int size, int rank, const ncclUniqueId *id, char *err,
		size_t errlen)
{
	nc.size[g] = size;
	nc.rank[g] = rank;
	if (size <= 1)
		return 0;
	ncclResult_t r = ncclCommInitRank(&nc.comm[g], size, *id, rank);
	if (r != ncclSuccess) {
		const char *last = ncclGetLastError(NULL);
		snprintf(err, errlen, "nccl: forming the %s group (rank %d of %d): %s%s%.400s",
			 group_name[g], rank, size, ncclGetErrorString(r), last && *last ? ": " : "",
			 last ? last : "");
		nc.comm[g] = NULL;
		return -1;
	}
	return 0;
}

extern "C" __attribute__((visibility("default"))) int
lmtk_dist_nccl(struct dist *d, int tp, int pp, struct dist_boot *boot, char *err, size_t errlen)
{
	int world = boot->world, rank = boot->rank;
	if (!cu.stream) {
		snprintf(err, errlen, "nccl: the CUDA backend is not open");
		return -1;
	}
	CU_ENTER();
	if (tp < 1 || pp < 1 || world % (tp * pp)) {
		snprintf(err, errlen, "%d ranks are not divisible by TP=%d x PP=%d", world, tp, pp);
		return -1;
	}
	int dp = world / (tp * pp);
	memset(&nc, 0, sizeof nc);
	d->world = world;
	d->rank = rank;
	d->tp = tp;
	d->pp = pp;
	d->dp = dp;
	d->tp_rank = rank % tp;
	d->dp_rank = rank / tp % dp;
	d->pp_rank = rank / (tp * dp);

	/* every group's id, in one table: [world | TP groups | DP groups | PP groups | pairs] */
	int n_tp = tp > 1 ? dp * pp : 0, n_dp = dp > 1 ? tp * pp : 0, n_pp = pp > 1 ? dp * tp : 0;
	int n_emb = pp > 2 ? dp * tp : 0;
	int b_tp = 1, b_dp = b_tp + n_tp, b_pp = b_dp + n_dp, b_emb = b_pp + n_pp, n = b_emb + n_emb;
	std::vector<ncclUniqueId> ids((size_t)n);
	memset(ids.data(), 0, ids.size() * sizeof ids[0]);
	if (rank == 0)
		for (int i = 0; i < n; i++) {
			ncclResult_t r = ncclGetUniqueId(&ids[(size_t)i]);
			if (r != ncclSuccess) {
				snprintf(err, errlen, "nccl: ncclGetUniqueId: %s", ncclGetErrorString(r));
				return DIST_NOT_MET;
			}
		}
	if (boot->bcast(boot, ids.data(), ids.size() * sizeof ids[0], err, errlen) < 0)
		return DIST_NOT_MET;
	nc.boot = boot;
	if (join(DIST_WORLD, world, rank, &ids[0], err, errlen) < 0)
		return DIST_NOT_MET;
	if (boot->done)
		boot->done(boot);   /* every rank has read the ids */
	int edge = d->pp_rank == 0 || d->pp_rank == pp - 1, cell = d->dp_rank * tp + d->tp_rank;
	if (join(DIST_TP, tp, d->tp_rank, &ids[(size_t)(b_tp + d->pp_rank * dp + d->dp_rank)], err, errlen) < 0 ||
	    join(DIST_DP, dp, d->dp_rank, &ids[(size_t)(b_dp + d->pp_rank * tp + d->tp_rank)], err, errlen) < 0 ||
	    join(DIST_PP, pp, d->pp_rank, &ids[(size_t)(b_pp + cell)], err, errlen) < 0)
		return DIST_NOT_MET;
	if (pp == 2) {   /* the first and last stage are the whole pipeline */
		nc.comm[DIST_EMB] = nc.comm[DIST_PP];
		nc.size[DIST_EMB] = 2;
		nc.rank[DIST_EMB] = d->pp_rank;
	} else if (pp > 2 && edge) {
		if (join(DIST_EMB, 2, d->pp_rank ? 1 : 0, &ids[(size_t)(b_emb + cell)], err, errlen) < 0)
			return DIST_NOT_MET;
	} else {
		nc.size[DIST_EMB] = 1;   /* one stage; or a middle stage, which holds no embedding */
	}

	d->transport = "nccl";
	d->sum_f32 = nc_sum_f32;
	d->sum_act = nc_sum_act;
	d->allgatherv_f32 = nc_allgatherv_f32;
	d->p2p = nc_p2p;
	d->bucket_sum_f32 = nc_bucket_sum_f32;
	d->bucket_reduce_f32 = nc_bucket_reduce_f32;
	d->bucket_wait = nc_bucket_wait;
	d->host_sum_f32 = nc_host_sum_f32;
	d->host_max_f32 = nc_host_max_f32;
	d->sum_f64 = nc_sum_f64;
	d->allgather = nc_allgather;
	d->bcast = nc_bcast;
	d->barrier = nc_barrier;
	d->finish = nc_finish;
	d->impl = &nc;
	return 0;
}
