/* nccltest.cu - the CPU executor's NCCL (tests/cuda-exec/nccl.cpp) checked against NCCL's
 * documented semantics, over ranks that are processes.
 *
 * Built into build/tests/cuda_exec_nccl, which `make check` runs like a unit test.  For 2, 3 and
 * 4 ranks (forked processes sharing a ncclUniqueId) every collective - AllReduce (sum, avg,
 * prod, max, min), Broadcast, Reduce, AllGather, ReduceScatter - in place and out of place, in
 * fp32, bf16 and int32, and Send/Recv in groups (a ring over two streams, an all-to-all with a
 * different size per pair, self-sends included) against a host computation: the reduction in rank
 * order, each step rounded in the datatype, bit for bit.  Then the errors, which must come within
 * bounded time: collectives that differ between ranks (operation, count, datatype, root), a
 * receive that does not match its send, a rank that never joins, one that never arrives, one that
 * exited, two ranks that send first outside a group, and invalid arguments.  ncclCommSplit: by
 * colour, ordered by key, NCCL_SPLIT_NOCOLOR giving NULL, and collectives over the new members.
 *
 * Only NCCL's and the CUDA runtime's API is used (no executor internals): the same source
 * compiles against the real nccl.h (tests/cli/train-cuda.sh checks that where CUDA is installed)
 * and would run on GPUs, one per rank, except for the error cases the real library would hang in.
 * Each rank writes its verdicts into a table shared with the parent (mmap before fork), which
 * prints one line per case; -v keeps the ranks' stderr (the executor's messages). */
#include <cuda_runtime.h>
#include <nccl.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#define MAXCASES 128
#define MAXRANKS 4
static int *g_res;      /* [case][rank]: 0 not run, 1 passed, else the failing line */
static char (*g_names)[100];
static int g_ncases, g_rank;
static int g_verbose;

static int case_id(const char *name)
{
	for (int i = 0; i < g_ncases; i++)
		if (!strcmp(g_names[i], name))
			return i;
	if (g_ncases == MAXCASES) {
		printf("FAIL nccltest_case_table: more than %d cases\n", MAXCASES);
		exit(1);
	}
	snprintf(g_names[g_ncases], sizeof g_names[0], "%s", name);
	return g_ncases++;
}

/* the parent names the cases before forking, so every rank finds them by name */
static void verdict(const char *name, int line)
{
	int *r = &g_res[case_id(name) * MAXRANKS + g_rank];
	if (*r == 0 || *r == 1)
		*r = line;
}
#define CHECK(name, cond)                                                                          \
	do {                                                                                       \
		int ok_ = !!(cond);                                                                \
		if (!ok_)                                                                          \
			fprintf(stdout, "# rank %d: %s: %s:%d: %s\n", g_rank, name, __FILE__,      \
				__LINE__, #cond);                                                  \
		verdict(name, ok_ ? 1 : __LINE__);                                                 \
	} while (0)

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* --- host reference: values and the documented reductions ------------------------------------ */

static uint32_t mix(uint32_t x)
{
	x ^= x >> 16, x *= 0x7feb352du, x ^= x >> 15, x *= 0x846ca68bu, x ^= x >> 16;
	return x;
}
/* rank r's element i: values with full mantissas, so the order of a sum shows in its bits */
static float fval(int r, size_t i, int salt)
{
	uint32_t h = mix((uint32_t)(r * 7919 + salt * 104729) ^ mix((uint32_t)i));
	return ((int)(h % 2000001u) - 1000000) * 3.0517578125e-6f * (1.0f + (h >> 28) / 7.0f);
}
static int32_t ival(int r, size_t i, int salt)
{
	return (int32_t)(mix((uint32_t)(r * 31 + salt * 1009) ^ mix((uint32_t)i + 7)) % 200001u) - 100000;
}
/* bf16, round to nearest even (the CUDA Math API's __float2bfloat16_rn), NaN kept NaN */
static uint16_t to_bf(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}
static float from_bf(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

enum { F32, BF16, I32 };
static const char *tname[] = {"fp32", "bf16", "int32"};
static ncclDataType_t ntype[] = {ncclFloat32, ncclBfloat16, ncclInt32};
static size_t tsize[] = {4, 2, 4};

/* element i of rank r's input, as the bytes of type t */
static void put(void *buf, size_t i, int t, int r, size_t k, int salt)
{
	if (t == F32)
		((float *)buf)[i] = fval(r, k, salt);
	else if (t == BF16)
		((uint16_t *)buf)[i] = to_bf(fval(r, k, salt));
	else
		((int32_t *)buf)[i] = ival(r, k, salt);
}

/* the reduction over ranks 0..n-1 of element k (each rank's input at index k), in rank order */
static void expect(void *out, size_t i, int t, int n, size_t k, int salt, ncclRedOp_t op)
{
	if (t == I32) {
		int64_t acc = ival(0, k, salt);
		for (int r = 1; r < n; r++) {
			int64_t x = ival(r, k, salt);
			acc = op == ncclMax ? (acc > x ? acc : x) : op == ncclMin ? (acc < x ? acc : x) :
			      op == ncclProd ? (int32_t)((uint32_t)acc * (uint32_t)x) :
			      (int32_t)((uint32_t)acc + (uint32_t)x);
		}
		((int32_t *)out)[i] = (int32_t)(op == ncclAvg ? (int32_t)acc / n : acc);
		return;
	}
	float acc = t == F32 ? fval(0, k, salt) : from_bf(to_bf(fval(0, k, salt)));
	for (int r = 1; r < n; r++) {
		float x = t == F32 ? fval(r, k, salt) : from_bf(to_bf(fval(r, k, salt)));
		acc = op == ncclMax ? fmaxf(acc, x) : op == ncclMin ? fminf(acc, x) :
		      op == ncclProd ? acc * x : acc + x;
		if (t == BF16)
			acc = from_bf(to_bf(acc)); /* rounded after every step */
	}
	if (op == ncclAvg)
		acc /= n;
	if (t == F32)
		((float *)out)[i] = acc;
	else
		((uint16_t *)out)[i] = to_bf(acc);
}

/* --- helpers ------------------------------------------------------------------------------- */

static void *dev(size_t bytes)
{
	void *p = NULL;
	if (cudaMalloc(&p, bytes) != cudaSuccess)
		return NULL;
	cudaMemset(p, 0x5a, bytes);
	return p;
}

/* the device buffer `d` holds, after the stream's work, the bytes of `want` */
static int same(const void *d, const std::vector<char> &want, cudaStream_t s)
{
	std::vector<char> got(want.size());
	if (cudaMemcpyAsync(got.data(), d, want.size(), cudaMemcpyDeviceToHost, s) != cudaSuccess ||
	    cudaStreamSynchronize(s) != cudaSuccess)
		return 0;
	if (memcmp(got.data(), want.data(), want.size())) {
		size_t k = 0;
		while (got[k] == want[k])
			k++;
		printf("# rank %d: first difference at byte %zu of %zu\n", g_rank, k, want.size());
		return 0;
	}
	return 1;
}

static std::string last(ncclComm_t c)
{
	const char *m = ncclGetLastError(c);
	return m ? m : "";
}
static int says(ncclComm_t c, const char *needle)
{
	std::string m = last(c);
	if (m.find(needle) != std::string::npos)
		return 1;
	printf("# rank %d: the message does not say \"%s\": %s\n", g_rank, needle, m.c_str());
	return 0;
}

/* --- the collectives and send/recv, every rank --------------------------------------------- */

static void collectives(ncclComm_t comm, int n, int me)
{
	char nm[100];
	cudaStream_t s;
	cudaStreamCreate(&s);
	const ncclRedOp_t ops[] = {ncclSum, ncclAvg, ncclProd, ncclMax, ncclMin};
	const char *opn[] = {"sum", "avg", "prod", "max", "min"};
	for (int t = F32; t <= I32; t++) {
		size_t es = tsize[t];
		for (int inplace = 0; inplace < 2; inplace++) {
			const char *ip = inplace ? "in_place" : "out_of_place";
			/* AllReduce: 40000 elements, several rounds through the staging */
			for (int o = 0; o < 5; o++) {
				size_t cnt = o < 2 ? 40000 : 3001;
				int salt = 10 * t + o + 100 * inplace;
				std::vector<char> in(cnt * es), want(cnt * es);
				for (size_t i = 0; i < cnt; i++) {
					put(in.data(), i, t, me, i, salt);
					expect(want.data(), i, t, n, i, salt, ops[o]);
				}
				char *a = (char *)dev(cnt * es), *b = inplace ? a : (char *)dev(cnt * es);
				cudaMemcpyAsync(a, in.data(), cnt * es, cudaMemcpyHostToDevice, s);
				ncclResult_t r = ncclAllReduce(a, b, cnt, ntype[t], ops[o], comm, s);
				snprintf(nm, sizeof nm, "allreduce_%s_%s_%s", opn[o], tname[t], ip);
				CHECK(nm, r == ncclSuccess && same(b, want, s));
				if (!inplace) /* out of place leaves sendbuff as it was */
					CHECK(nm, same(a, in, s));
			}
			/* Broadcast from the last rank; non-roots' sendbuff is not read */
			{
				size_t cnt = 20001;
				int root = n - 1, salt = 200 + t;
				std::vector<char> in(cnt * es), want(cnt * es);
				for (size_t i = 0; i < cnt; i++) {
					put(in.data(), i, t, me, i, salt);
					put(want.data(), i, t, root, i, salt);
				}
				char *a = (char *)dev(cnt * es), *b = inplace ? a : (char *)dev(cnt * es);
				cudaMemcpyAsync(a, in.data(), cnt * es, cudaMemcpyHostToDevice, s);
				ncclResult_t r = ncclBroadcast(me == root || inplace ? a : NULL, b, cnt, ntype[t],
							       root, comm, s);
				snprintf(nm, sizeof nm, "broadcast_%s_%s", tname[t], ip);
				CHECK(nm, r == ncclSuccess && same(b, want, s));
			}
			/* Reduce (sum) to rank 1 % n: only the root's recvbuff is written */
			{
				size_t cnt = 17000;
				int root = 1 % n, salt = 300 + t;
				std::vector<char> in(cnt * es), want(cnt * es), untouched(cnt * es, 0x5a);
				for (size_t i = 0; i < cnt; i++) {
					put(in.data(), i, t, me, i, salt);
					expect(want.data(), i, t, n, i, salt, ncclSum);
				}
				char *a = (char *)dev(cnt * es), *b = inplace ? a : (char *)dev(cnt * es);
				cudaMemcpyAsync(a, in.data(), cnt * es, cudaMemcpyHostToDevice, s);
				ncclResult_t r = ncclReduce(a, b, cnt, ntype[t], ncclSum, root, comm, s);
				snprintf(nm, sizeof nm, "reduce_%s_%s", tname[t], ip);
				CHECK(nm, r == ncclSuccess && same(b, me == root ? want : inplace ? in : untouched, s));
			}
			/* AllGather: in place when sendbuff == recvbuff + rank*sendcount */
			{
				size_t cnt = 9000;
				int salt = 400 + t;
				std::vector<char> in(cnt * es), want(n * cnt * es);
				for (size_t i = 0; i < cnt; i++)
					put(in.data(), i, t, me, i, salt);
				for (int r = 0; r < n; r++)
					for (size_t i = 0; i < cnt; i++)
						put(want.data(), r * cnt + i, t, r, i, salt);
				char *b = (char *)dev(n * cnt * es);
				char *a = inplace ? b + me * cnt * es : (char *)dev(cnt * es);
				cudaMemcpyAsync(a, in.data(), cnt * es, cudaMemcpyHostToDevice, s);
				ncclResult_t r = ncclAllGather(a, b, cnt, ntype[t], comm, s);
				snprintf(nm, sizeof nm, "allgather_%s_%s", tname[t], ip);
				CHECK(nm, r == ncclSuccess && same(b, want, s));
			}
			/* ReduceScatter (sum, and avg): in place when sendbuff + rank*recvcount == recvbuff */
			for (int o = 0; o < 2; o++) {
				size_t cnt = 7001;
				int salt = 500 + t + 10 * o;
				std::vector<char> in(n * cnt * es), want(cnt * es);
				for (size_t i = 0; i < n * cnt; i++)
					put(in.data(), i, t, me, i, salt);
				for (size_t i = 0; i < cnt; i++)
					expect(want.data(), i, t, n, me * cnt + i, salt, ops[o]);
				char *a = (char *)dev(n * cnt * es);
				char *b = inplace ? a + me * cnt * es : (char *)dev(cnt * es);
				cudaMemcpyAsync(a, in.data(), n * cnt * es, cudaMemcpyHostToDevice, s);
				ncclResult_t r = ncclReduceScatter(a, b, cnt, ntype[t], ops[o], comm, s);
				snprintf(nm, sizeof nm, "reducescatter_%s_%s_%s", opn[o], tname[t], ip);
				CHECK(nm, r == ncclSuccess && same(b, want, s));
			}
		}
	}
	/* the same call twice gives the same bits */
	{
		size_t cnt = 30000;
		std::vector<char> in(cnt * 4), one(cnt * 4), two(cnt * 4);
		for (size_t i = 0; i < cnt; i++)
			put(in.data(), i, F32, me, i, 999);
		float *a = (float *)dev(cnt * 4), *b = (float *)dev(cnt * 4);
		cudaMemcpyAsync(a, in.data(), cnt * 4, cudaMemcpyHostToDevice, s);
		ncclAllReduce(a, b, cnt, ncclFloat32, ncclSum, comm, s);
		cudaMemcpyAsync(one.data(), b, cnt * 4, cudaMemcpyDeviceToHost, s);
		ncclAllReduce(a, b, cnt, ncclFloat32, ncclSum, comm, s);
		cudaMemcpyAsync(two.data(), b, cnt * 4, cudaMemcpyDeviceToHost, s);
		CHECK("allreduce_is_bit_reproducible", cudaStreamSynchronize(s) == cudaSuccess &&
		      !memcmp(one.data(), two.data(), cnt * 4));
	}
	/* Send/Recv in a group: a ring, the send on one stream and the receive on another */
	{
		size_t cnt = 50000; /* 200 kB: many times the bytes in flight between two ranks */
		int to = (me + 1) % n, from = (me + n - 1) % n;
		cudaStream_t s2;
		cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
		std::vector<char> in(cnt * 4), want(cnt * 4);
		for (size_t i = 0; i < cnt; i++) {
			put(in.data(), i, F32, me, i, 600);
			put(want.data(), i, F32, from, i, 600);
		}
		char *a = (char *)dev(cnt * 4), *b = (char *)dev(cnt * 4);
		cudaMemcpyAsync(a, in.data(), cnt * 4, cudaMemcpyHostToDevice, s);
		ncclResult_t r1 = ncclGroupStart();
		ncclResult_t r2 = ncclSend(a, cnt, ncclFloat32, to, comm, s);
		ncclResult_t r3 = ncclRecv(b, cnt, ncclFloat32, from, comm, s2);
		ncclResult_t r4 = ncclGroupEnd();
		/* s2's later work waits for the group, which waited for s's copy */
		CHECK("sendrecv_ring_in_a_group_over_two_streams",
		      !r1 && !r2 && !r3 && !r4 && same(b, want, s2));
	}
	/* all-to-all: a different count per pair, a rank's send to itself included */
	{
		std::vector<std::vector<char>> in(n), want(n);
		std::vector<char *> a(n), b(n);
		auto count = [](int src, int dst) { return (size_t)(700 * (src + 1) + 1301 * dst); };
		ncclGroupStart();
		for (int p = 0; p < n; p++) {
			size_t cs = count(me, p), cr = count(p, me);
			in[p].resize(cs * 4);
			want[p].resize(cr * 4);
			for (size_t i = 0; i < cs; i++)
				put(in[p].data(), i, I32, me, i, 700 + p);
			for (size_t i = 0; i < cr; i++)
				put(want[p].data(), i, I32, p, i, 700 + me);
			a[p] = (char *)dev(cs * 4);
			b[p] = (char *)dev(cr * 4);
			cudaMemcpyAsync(a[p], in[p].data(), cs * 4, cudaMemcpyHostToDevice, s);
			ncclSend(a[p], cs, ncclInt32, p, comm, s);
			ncclRecv(b[p], cr, ncclInt32, p, comm, s);
		}
		ncclResult_t r = ncclGroupEnd();
		int ok = r == ncclSuccess;
		for (int p = 0; p < n; p++)
			ok &= same(b[p], want[p], s);
		CHECK("alltoall_sendrecv_in_a_group_with_self_sends", ok);
	}
}

/* ncclCommSplit: colour me % 2 (with 4 ranks, rank 3 joins none), keys that reverse the order;
 * each new communicator's size and ranks, and an all-gather of the world ranks and an all-reduce
 * over it against the members in key order */
static void split(ncclComm_t comm, int n, int me)
{
	cudaStream_t s;
	cudaStreamCreate(&s);
	int color = n == 4 && me == 3 ? NCCL_SPLIT_NOCOLOR : me % 2;
	ncclComm_t sub = (ncclComm_t)&color; /* must become NULL for NCCL_SPLIT_NOCOLOR */
	ncclResult_t r = ncclCommSplit(comm, color, n - me, &sub, NULL);
	std::vector<int> members; /* world ranks of my colour, by key (n - rank): descending */
	for (int j = n - 1; j >= 0; j--)
		if (color != NCCL_SPLIT_NOCOLOR && j % 2 == color && !(n == 4 && j == 3))
			members.push_back(j);
	if (color == NCCL_SPLIT_NOCOLOR) {
		CHECK("comm_split_groups_by_color_ordered_by_key", r == ncclSuccess && sub == NULL);
		CHECK("comm_split_collectives_run_over_the_new_members", 1);
	} else {
		int cnt = -1, rk = -1, want = 0;
		while (members[(size_t)want] != me)
			want++;
		CHECK("comm_split_groups_by_color_ordered_by_key",
		      r == ncclSuccess && sub && !ncclCommCount(sub, &cnt) && !ncclCommUserRank(sub, &rk) &&
		      cnt == (int)members.size() && rk == want);
		size_t m = members.size(), k = 1000;
		std::vector<char> gwant(m * 4), in(k * 4), swant(k * 4);
		for (size_t i = 0; i < m; i++)
			memcpy(&gwant[i * 4], &members[i], 4);
		for (size_t i = 0; i < k; i++) {
			put(in.data(), i, F32, me, i, 4242);
			float acc = fval(members[0], i, 4242);
			for (size_t q = 1; q < m; q++)
				acc += fval(members[q], i, 4242);
			memcpy(&swant[i * 4], &acc, 4);
		}
		int *g = (int *)dev(m * 4), *mine = (int *)dev(4);
		float *a = (float *)dev(k * 4);
		cudaMemcpyAsync(mine, &me, 4, cudaMemcpyHostToDevice, s);
		cudaMemcpyAsync(a, in.data(), k * 4, cudaMemcpyHostToDevice, s);
		ncclResult_t r1 = ncclAllGather(mine, g, 1, ncclInt32, sub, s);
		ncclResult_t r2 = ncclAllReduce(a, a, k, ncclFloat32, ncclSum, sub, s);
		CHECK("comm_split_collectives_run_over_the_new_members",
		      !r1 && !r2 && same(g, gwant, s) && same(a, swant, s));
		ncclCommDestroy(sub);
	}
	/* the parent still works after the split */
	int one = 1, *d1 = (int *)dev(4);
	cudaMemcpyAsync(d1, &one, 4, cudaMemcpyHostToDevice, s);
	ncclAllReduce(d1, d1, 1, ncclInt32, ncclSum, comm, s);
	std::vector<char> nw(4);
	memcpy(nw.data(), &n, 4);
	CHECK("comm_split_leaves_the_parent_usable", same(d1, nw, s));
}

static int rank_main(int n, int me, ncclUniqueId id)
{
	ncclComm_t comm;
	ncclResult_t r = ncclCommInitRank(&comm, n, id, me);
	int cnt = -1, rk = -1, devno = -1;
	CHECK("comm_init_rank_count_and_user_rank", r == ncclSuccess && !ncclCommCount(comm, &cnt) &&
	      !ncclCommUserRank(comm, &rk) && !ncclCommCuDevice(comm, &devno) && cnt == n && rk == me &&
	      devno == 0);
	if (r)
		return 1;
	collectives(comm, n, me);
	split(comm, n, me);
	ncclResult_t ae = ncclSuccess;
	CHECK("no_asynchronous_error_after_the_collectives",
	      !ncclCommGetAsyncError(comm, &ae) && ae == ncclSuccess);
	CHECK("comm_destroy", ncclCommDestroy(comm) == ncclSuccess);
	return 0;
}

/* --- errors -------------------------------------------------------------------------------- */

/* rank `me` of 2 calls one collective that the other rank calls differently: both fail at once,
 * naming both calls */
static void mismatch(const char *name, ncclUniqueId id, int me, int variant)
{
	ncclComm_t c;
	if (ncclCommInitRank(&c, 2, id, me)) {
		CHECK(name, 0);
		return;
	}
	float *a = (float *)dev(64 * 4);
	double t0 = now();
	switch (variant) {
	case 0: /* operation */
		if (me == 0)
			ncclAllReduce(a, a, 8, ncclFloat32, ncclSum, c, 0);
		else
			ncclBroadcast(a, a, 8, ncclFloat32, 0, c, 0);
		break;
	case 1: /* count */
		ncclAllReduce(a, a, me ? 9 : 8, ncclFloat32, ncclSum, c, 0);
		break;
	case 2: /* datatype */
		ncclAllReduce(a, a, 8, me ? ncclBfloat16 : ncclFloat32, ncclSum, c, 0);
		break;
	case 3: /* root */
		ncclBroadcast(a, a, 8, ncclFloat32, me, c, 0);
		break;
	case 4: /* reduction */
		ncclReduceScatter(a, a + me * 8, 8, ncclFloat32, me ? ncclMax : ncclSum, c, 0);
		break;
	}
	cudaError_t ce = cudaStreamSynchronize(0);
	double dt = now() - t0;
	ncclResult_t ae = ncclSuccess;
	ncclCommGetAsyncError(c, &ae);
	static const char *want0[] = {"rank 0 called ncclAllReduce(count 8, ncclFloat32, ncclSum)",
				      "rank 0 called ncclAllReduce(count 8, ncclFloat32, ncclSum)",
				      "rank 0 called ncclAllReduce(count 8, ncclFloat32, ncclSum)",
				      "rank 0 called ncclBroadcast(count 8, ncclFloat32, root 0)",
				      "rank 0 called ncclReduceScatter(count 8, ncclFloat32, ncclSum)"};
	static const char *want1[] = {"rank 1 called ncclBroadcast(count 8, ncclFloat32, root 0)",
				      "rank 1 called ncclAllReduce(count 9, ncclFloat32, ncclSum)",
				      "rank 1 called ncclAllReduce(count 8, ncclBfloat16, ncclSum)",
				      "rank 1 called ncclBroadcast(count 8, ncclFloat32, root 1)",
				      "rank 1 called ncclReduceScatter(count 8, ncclFloat32, ncclMax)"};
	CHECK(name, ce != cudaSuccess && ae == ncclInvalidUsage && says(c, want0[variant]) &&
	      says(c, want1[variant]) && dt < 10.0); /* the timeout is 20 s */
	/* the communicator keeps its error */
	CHECK(name, ncclAllReduce(a, a, 8, ncclFloat32, ncclSum, c, 0) == ncclInvalidUsage);
	ncclCommAbort(c);
	cudaDeviceReset(); /* the executor's cudaDeviceReset clears the sticky error */
}

/* ranks 0 and 1 of 3 join; the third never does */
static void never_joins(ncclUniqueId id, int me)
{
	ncclComm_t c;
	double t0 = now();
	ncclResult_t r = ncclCommInitRank(&c, 3, id, me);
	double dt = now() - t0;
	CHECK("init_rank_times_out_naming_the_rank_that_never_joined",
	      r != ncclSuccess && dt > 0.9 && dt < 10 && says(NULL, "missing: rank 2"));
}

/* rank 1 says the communicator has 3 ranks where rank 0 said 2: refused, naming both counts */
static void other_nranks(ncclUniqueId id, int me)
{
	const char *name = "init_rank_with_another_nranks_is_refused";
	ncclComm_t c;
	if (me == 1)
		usleep(200000); /* rank 0 has joined */
	ncclResult_t r = ncclCommInitRank(&c, me ? 3 : 2, id, me);
	if (me == 1)
		CHECK(name, r == ncclInvalidUsage && says(NULL, "rank 1 says nranks 3, but the ranks that "
							  "joined before it say 2"));
	else
		CHECK(name, r == ncclRemoteError && says(NULL, "missing: rank 1"));
}

/* 3 ranks; rank 2 never calls the collective (it sleeps), or has exited */
static void never_arrives(ncclUniqueId id, int me, int exits)
{
	const char *name = exits ? "a_rank_that_exited_stops_the_others_at_once"
				 : "a_collective_times_out_naming_the_rank_that_never_arrived";
	ncclComm_t c;
	if (ncclCommInitRank(&c, 3, id, me)) {
		CHECK(name, 0);
		return;
	}
	if (me == 2) {
		if (exits)
			_exit(0);
		sleep(4);
		ncclCommAbort(c);
		return;
	}
	if (exits)
		usleep(300000); /* rank 2 is gone (and reaped) by now */
	float *a = (float *)dev(64 * 4);
	double t0 = now();
	ncclAllReduce(a, a, 64, ncclFloat32, ncclSum, c, 0);
	cudaError_t ce = cudaStreamSynchronize(0);
	double dt = now() - t0;
	ncclResult_t ae = ncclSuccess;
	ncclCommGetAsyncError(c, &ae);
	if (exits)
		CHECK(name, ce != cudaSuccess && ae == ncclRemoteError && says(c, "rank 2") &&
		      says(c, "has exited") && dt < 10.0); /* the timeout is 20 s */
	else
		CHECK(name, ce != cudaSuccess && ae == ncclRemoteError && dt > 0.9 && dt < 10.0 &&
		      says(c, "rank 2: it is running other work"));
	ncclCommAbort(c);
	cudaDeviceReset();
}

/* two ranks each send first and receive second, outside a group: the sends wait for receives
 * that come after them, as they can on GPUs; here that is an error after the timeout */
static void send_send(ncclUniqueId id, int me)
{
	const char *name = "ungrouped_send_send_times_out_and_says_to_group_them";
	ncclComm_t c;
	if (ncclCommInitRank(&c, 2, id, me)) {
		CHECK(name, 0);
		return;
	}
	float *a = (float *)dev(100000 * 4), *b = (float *)dev(100000 * 4);
	double t0 = now();
	ncclSend(a, 100000, ncclFloat32, 1 - me, c, 0);
	ncclRecv(b, 100000, ncclFloat32, 1 - me, c, 0);
	cudaError_t ce = cudaStreamSynchronize(0);
	double dt = now() - t0;
	CHECK(name, ce != cudaSuccess && dt < 10.0 && says(c, "ncclGroupStart"));
	ncclCommAbort(c);
	cudaDeviceReset();
}

static void recv_mismatch(ncclUniqueId id, int me)
{
	const char *name = "a_receive_that_does_not_match_its_send_names_both";
	ncclComm_t c;
	if (ncclCommInitRank(&c, 2, id, me)) {
		CHECK(name, 0);
		return;
	}
	float *a = (float *)dev(64 * 4);
	if (me == 0)
		ncclSend(a, 10, ncclFloat32, 1, c, 0);
	else
		ncclRecv(a, 12, ncclFloat32, 0, c, 0);
	double t0 = now();
	cudaError_t ce = cudaStreamSynchronize(0);
	double dt = now() - t0;
	CHECK(name, ce != cudaSuccess && dt < 10.0 &&
	      says(c, me ? "ncclRecv(count 12, ncclFloat32, from rank 0): rank 0 sent ncclSend(count 10, ncclFloat32, to rank 1)"
			 : "ncclSend(count 10, ncclFloat32, to rank 1): rank 1 received it as ncclRecv(count 12, ncclFloat32, from rank 0)"));
	ncclCommAbort(c);
	cudaDeviceReset();
}

/* one process, one rank */
static void arguments(void)
{
	const char *name = "invalid_arguments_return_ncclInvalidArgument";
	int v = 0;
	CHECK("version_and_error_strings", !ncclGetVersion(&v) && v >= 21800 &&
	      strlen(ncclGetErrorString(ncclInvalidArgument)) > 0 &&
	      strlen(ncclGetErrorString(ncclRemoteError)) > 0);
	ncclComm_t c;
	if (ncclCommInitAll(&c, 1, NULL)) {
		CHECK(name, 0);
		return;
	}
	float *a = (float *)dev(64 * 4), *b = (float *)dev(64 * 4);
	std::vector<float> host(64);
	CHECK(name, ncclAllReduce(a, b, 64, (ncclDataType_t)42, ncclSum, c, 0) == ncclInvalidArgument);
	CHECK(name, ncclAllReduce(a, b, 64, ncclFloat32, (ncclRedOp_t)17, c, 0) == ncclInvalidArgument);
	CHECK(name, ncclBroadcast(a, b, 64, ncclFloat32, 1, c, 0) == ncclInvalidArgument);
	CHECK(name, ncclReduce(a, b, 64, ncclFloat32, ncclSum, -1, c, 0) == ncclInvalidArgument);
	CHECK(name, ncclSend(a, 64, ncclFloat32, 1, c, 0) == ncclInvalidArgument);
	CHECK(name, ncclRecv(b, 64, ncclFloat32, -1, c, 0) == ncclInvalidArgument);
	CHECK(name, ncclAllReduce(a, NULL, 64, ncclFloat32, ncclSum, c, 0) == ncclInvalidArgument);
	CHECK(name, ncclAllReduce(host.data(), b, 64, ncclFloat32, ncclSum, c, 0) == ncclInvalidArgument);
	CHECK(name, ncclAllReduce(a, b, 65, ncclFloat32, ncclSum, c, 0) == ncclInvalidArgument);
	CHECK(name, ncclAllReduce(a, b, 8, ncclFloat32, ncclSum, NULL, 0) == ncclInvalidArgument);
	ncclUniqueId bad;
	memset(&bad, 0, sizeof bad);
	ncclComm_t c2;
	CHECK(name, ncclCommInitRank(&c2, 1, bad, 0) == ncclInvalidArgument);
	ncclUniqueId id;
	ncclGetUniqueId(&id);
	CHECK(name, ncclCommInitRank(&c2, 2, id, 2) == ncclInvalidArgument);
	CHECK("overlapping_buffers_not_in_place_are_refused",
	      ncclAllReduce(a, a + 1, 8, ncclFloat32, ncclSum, c, 0) == ncclInvalidUsage &&
	      ncclAllGather(a + 1, a, 8, ncclFloat32, c, 0) == ncclInvalidUsage);
	CHECK("group_end_without_start_is_invalid_usage", ncclGroupEnd() == ncclInvalidUsage);
	{ /* a call that fails in a group fails the group */
		ncclResult_t r1 = ncclGroupStart();
		ncclResult_t r2 = ncclAllReduce(a, b, 64, ncclFloat32, ncclSum, c, 0);
		ncclResult_t r3 = ncclAllReduce(a, b, 64, (ncclDataType_t)42, ncclSum, c, 0);
		ncclResult_t r4 = ncclGroupEnd();
		CHECK("a_failed_call_fails_its_group", !r1 && !r2 && r3 == ncclInvalidArgument &&
		      r4 == ncclInvalidArgument && cudaDeviceSynchronize() == cudaSuccess);
	}
	/* one rank: AllReduce is a copy, and nothing failed above */
	std::vector<char> in(64 * 4);
	for (size_t i = 0; i < 64; i++)
		put(in.data(), i, F32, 0, i, 1);
	cudaMemcpy(a, in.data(), 64 * 4, cudaMemcpyHostToDevice);
	CHECK("one_rank_allreduce_copies", ncclAllReduce(a, b, 64, ncclFloat32, ncclSum, c, 0) == 0 &&
	      same(b, in, 0));
	ncclCommDestroy(c);
}

/* --- the parent ---------------------------------------------------------------------------- */

/* forks n ranks running body(rank); waits at most `limit` seconds, then kills them */
template <typename F> static int ranks(int n, double limit, F body)
{
	std::vector<pid_t> pids;
	fflush(stdout);
	for (int r = 0; r < n; r++) {
		pid_t p = fork();
		if (p == 0) {
			g_rank = r;
			if (!g_verbose && !freopen("/dev/null", "w", stderr))
				_exit(3);
			body(r);
			fflush(stdout);
			_exit(0);
		}
		pids.push_back(p);
	}
	double t0 = now();
	int left = n, bad = 0;
	while (left) {
		for (pid_t &p : pids) {
			int st;
			if (p > 0 && waitpid(p, &st, WNOHANG) == p) {
				bad |= !WIFEXITED(st) || WEXITSTATUS(st);
				p = 0;
				left--;
			}
		}
		if (left && now() - t0 > limit) {
			for (pid_t p : pids)
				if (p > 0)
					kill(p, SIGKILL);
			printf("# ranks still running after %g s: killed\n", limit);
			for (pid_t &p : pids)
				if (p > 0)
					waitpid(p, NULL, 0), p = 0;
			return 1;
		}
		usleep(2000);
	}
	return bad;
}

int main(int argc, char **argv)
{
	g_verbose = argc > 1 && !strcmp(argv[1], "-v");
	void *m = mmap(NULL, MAXCASES * (MAXRANKS * sizeof(int) + 100), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 3;
	g_res = (int *)m;
	g_names = (char(*)[100])((char *)m + MAXCASES * MAXRANKS * sizeof(int));
	setenv("LMTK_CUDA_EXEC_NCCL_TIMEOUT", "20", 1);
	std::vector<int> who(MAXCASES, 0); /* the ranks that report a case */
	auto cases = [&](std::vector<const char *> names, int nranks) {
		for (const char *c : names)
			who[case_id(c)] = nranks;
	};
	int failed = 0;
	auto report = [&](const char *suffix) {
		for (int i = 0; i < g_ncases; i++) {
			if (!who[i])
				continue;
			int bad = 0;
			for (int r = 0; r < who[i]; r++)
				if (g_res[i * MAXRANKS + r] != 1) {
					printf("# %s: rank %d (%d): %s\n", g_names[i], r, g_res[i * MAXRANKS + r],
					       g_res[i * MAXRANKS + r] ? "failed (line above)" : "never reported");
					bad = 1;
				}
			printf("%s %s%s\n", bad ? "FAIL" : "ok", g_names[i], suffix);
			failed |= bad;
			who[i] = 0;
			for (int r = 0; r < MAXRANKS; r++)
				g_res[i * MAXRANKS + r] = 0;
		}
		g_ncases = 0; /* the next phase names its own */
	};

	for (int n = 2; n <= 4; n++) {
		ncclUniqueId id;
		ncclGetUniqueId(&id);
		/* every case the suite reports, named before the fork */
		std::vector<std::string> keep;
		const char *opn[] = {"sum", "avg", "prod", "max", "min"};
		for (const char *t : tname)
			for (const char *ip : {"out_of_place", "in_place"}) {
				for (const char *o : opn)
					keep.push_back(std::string("allreduce_") + o + "_" + t + "_" + ip);
				keep.push_back(std::string("broadcast_") + t + "_" + ip);
				keep.push_back(std::string("reduce_") + t + "_" + ip);
				keep.push_back(std::string("allgather_") + t + "_" + ip);
				keep.push_back(std::string("reducescatter_sum_") + t + "_" + ip);
				keep.push_back(std::string("reducescatter_avg_") + t + "_" + ip);
			}
		for (const char *c : {"comm_init_rank_count_and_user_rank", "allreduce_is_bit_reproducible",
				      "sendrecv_ring_in_a_group_over_two_streams",
				      "alltoall_sendrecv_in_a_group_with_self_sends",
				      "comm_split_groups_by_color_ordered_by_key",
				      "comm_split_collectives_run_over_the_new_members",
				      "comm_split_leaves_the_parent_usable",
				      "no_asynchronous_error_after_the_collectives", "comm_destroy"})
			keep.push_back(c);
		std::vector<const char *> names;
		for (std::string &k : keep)
			names.push_back(k.c_str());
		cases(names, n);
		if (ranks(n, 120, [&](int r) { rank_main(n, r, id); }))
			printf("# %d ranks: a rank exited abnormally\n", n);
		char suffix[32];
		snprintf(suffix, sizeof suffix, "_%d_ranks", n);
		report(suffix);
	}

	const char *mm[] = {"mismatched_operation_fails_on_both_ranks_naming_both_calls",
			    "mismatched_count_fails_on_both_ranks_naming_both_calls",
			    "mismatched_datatype_fails_on_both_ranks_naming_both_calls",
			    "mismatched_root_fails_on_both_ranks_naming_both_calls",
			    "mismatched_reduction_fails_on_both_ranks_naming_both_calls"};
	ncclUniqueId ids[5];
	for (auto &i : ids)
		ncclGetUniqueId(&i);
	cases(std::vector<const char *>(mm, mm + 5), 2);
	ranks(2, 60, [&](int r) {
		for (int v = 0; v < 5; v++)
			mismatch(mm[v], ids[v], r, v);
	});
	report("");

	setenv("LMTK_CUDA_EXEC_NCCL_TIMEOUT", "1", 1);
	ncclUniqueId j1, j2, j3, j4, j5;
	ncclGetUniqueId(&j1), ncclGetUniqueId(&j2), ncclGetUniqueId(&j3), ncclGetUniqueId(&j4);
	ncclGetUniqueId(&j5);
	ncclUniqueId j6;
	ncclGetUniqueId(&j6);
	cases({"init_rank_times_out_naming_the_rank_that_never_joined"}, 2);
	ranks(2, 30, [&](int r) { never_joins(j1, r); });
	report("");
	cases({"init_rank_with_another_nranks_is_refused"}, 2);
	ranks(2, 30, [&](int r) { other_nranks(j6, r); });
	report("");
	cases({"a_collective_times_out_naming_the_rank_that_never_arrived"}, 2);
	ranks(3, 30, [&](int r) { never_arrives(j2, r, 0); });
	report("");
	setenv("LMTK_CUDA_EXEC_NCCL_TIMEOUT", "20", 1);
	cases({"a_rank_that_exited_stops_the_others_at_once"}, 2);
	ranks(3, 30, [&](int r) { never_arrives(j3, r, 1); });
	report("");
	setenv("LMTK_CUDA_EXEC_NCCL_TIMEOUT", "1", 1);
	cases({"ungrouped_send_send_times_out_and_says_to_group_them"}, 2);
	ranks(2, 30, [&](int r) { send_send(j4, r); });
	report("");
	cases({"a_receive_that_does_not_match_its_send_names_both"}, 2);
	ranks(2, 30, [&](int r) { recv_mismatch(j5, r); });
	report("");
	cases({"version_and_error_strings", "invalid_arguments_return_ncclInvalidArgument",
	       "overlapping_buffers_not_in_place_are_refused", "group_end_without_start_is_invalid_usage",
	       "a_failed_call_fails_its_group",
	       "one_rank_allreduce_copies"}, 1);
	ranks(1, 30, [&](int) { arguments(); });
	report("");
	return failed;
}
