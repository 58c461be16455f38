/* dist - the process grid: data-, tensor- and pipeline-parallel groups, and their collectives.
 *
 * world = DP x TP x PP ranks, one per GPU (or CPU process), Megatron's order: TP varies fastest,
 * then DP, then PP (rank = pp * DP*TP + dp * TP + tp), so a TP group sits on one node's fast
 * links.  The model and the run call collectives by group (DIST_TP for the row-parallel
 * all-reduce and the replicated tensors' gradients, DIST_DP for the gradient all-reduce,
 * DIST_WORLD for decisions every rank must take together: stop, save, skip), never a transport.
 *
 * One process needs no MPI or NCCL at build or run time: the size-1 grid is built in and every
 * collective is the identity.  Launched as several ranks (mpirun, or srun with one task per
 * GPU), train loads a transport as a plugin (plugin.h), like the CUDA backend:
 *  - CPU runs: the MPI transport, train-mpi.so (mpi/dist_mpi.c, built by mpicc when Open MPI is
 *    installed);
 *  - CUDA runs: the NCCL transport inside the CUDA plugin (cuda/dist_nccl.cu, symbol
 *    lmtk_dist_nccl), on the backend's device and stream.  Its communicators meet through a
 *    ncclUniqueId that rank 0 makes and sends to the others: over MPI's broadcast when the
 *    launcher is MPI's (mpirun, srun --mpi=pmix with train-mpi.so there), else through files in a
 *    directory every rank sees (rendezvous.h), from SLURM's variables - the GPU machines
 *    without MPI, and srun without PMIx.
 *
 * Two kinds of buffers.  The model's tensors live in the backend's memory (device memory of the
 * CUDA backend, host memory of the CPU's): sum_f32, sum_act, gather_f32 and p2p take those,
 * and their results are ordered like the backend's own work - the MPI transport runs them at
 * once, NCCL queues them on the CUDA stream, so no host synchronisation is needed around them.
 * The rest - scalars and small host arrays: losses, norms, decisions, the vocabulary-parallel
 * cross-entropy's per-token statistics, checkpoint bookkeeping - are host memory and done when
 * the call returns (NCCL stages them through a small device buffer).
 *
 * Collectives must give bit-identical results on every rank of the group (replicated tensors
 * stay identical by construction): dist_mpi.c reduces in a fixed rank order and broadcasts;
 * dist_nccl.cu reduce-scatters and all-gathers, so each element is summed once, on one rank, and
 * copied to the others. */
#ifndef TRAIN_DIST_H
#define TRAIN_DIST_H

#include <stddef.h>

/* DIST_EMB: the first and last pipeline stages of one pipeline, which both hold the tied word
 * embeddings (input lookup and output layer) and sum their gradients. */
enum dist_group { DIST_WORLD, DIST_DP, DIST_TP, DIST_PP, DIST_EMB, DIST_GROUPS };

/* dev_reduce's element types and operations */
enum { DIST_F64, DIST_I32, DIST_F32 };
enum { DIST_SUM, DIST_MAX };

struct dist {
	int world, rank;
	int dp, tp, pp;                /* group sizes */
	int dp_rank, tp_rank, pp_rank;
	/* per group (dist_layout): which of the world's groups of that kind this rank belongs to
	 * (-1: none - a middle pipeline stage holds no embedding), its rank there and the group's
	 * size; color and rank are what MPI_Comm_split and ncclCommSplit take */
	int color[DIST_GROUPS], grank[DIST_GROUPS], gsize[DIST_GROUPS];
	const char *transport;         /* "one", "mpi", "nccl" */

	/* --- the backend's memory, ordered with the backend's work --- */
	/* in place over a group: fp32 (gradients), the backend's activation type (act_size bytes
	 * per element: the row-parallel layers' partial outputs and the column-parallel layers'
	 * input gradients) */
	void (*sum_f32)(struct dist *d, enum dist_group g, float *x, size_t n);
	void (*sum_act)(struct dist *d, enum dist_group g, void *x, size_t n);
	/* in place over x(n), n a multiple of the group's size P: group rank r contributes its
	 * chunk x[r n/P, (r + 1) n/P) and every rank ends with all of them (ZeRO-1's parameter
	 * all-gather, one per bucket) */
	void (*gather_f32)(struct dist *d, enum dist_group g, float *x, size_t n);
	/* A step's scalars where the backend keeps them (the deferred step's struct ops_step: its
	 * losses, the gradients' sum of squares, the bad-target and overflow counts; under TP the
	 * cross-entropy's row maxima): x(n) of type DIST_F64, DIST_I32 or DIST_F32, summed (DIST_SUM, bit-identical on every rank as sum_f32) or
	 * maximised (DIST_MAX) in place over the group, queued with the backend's work and never
	 * waited for by the host.  NULL in the MPI transport (the CPU backend reads every value
	 * back as it is computed). */
	void (*dev_reduce)(struct dist *d, enum dist_group g, void *x, size_t n, int type, int op);
	/* Gradient buckets (run.c: --overlap-grad-reduce, ZeRO-1): the backend's memory, queued
	 * behind all the backend's work so far, on a stream of their own where the transport has
	 * one (NCCL), so that the backward's later kernels run meanwhile; the buffer must not be
	 * written again until bucket_wait, after which the backend's work sees every result.
	 * bucket_sum_f32 is sum_f32 of x(n).  bucket_reduce_f32 is ZeRO-1's reduce-scatter of x(n),
	 * n a multiple of the group's size P: group rank r gets the sum of its chunk
	 * x[r n/P, (r + 1) n/P); the rest of x is left as some partial sum (a transport may sum it
	 * all).  dist_init gives transports without a stream of their own these over sum_f32, at
	 * once, and a bucket_wait that does nothing. */
	void (*bucket_sum_f32)(struct dist *d, enum dist_group g, float *x, size_t n);
	void (*bucket_reduce_f32)(struct dist *d, enum dist_group g, float *x, size_t n);
	void (*bucket_wait)(struct dist *d);
	/* Pipeline point-to-point: sends `sb` bytes to pipeline stage `to` and receives `rb` bytes
	 * from stage `from` (either side skipped when its buffer is NULL), both in flight at once
	 * so that neighbours exchanging in opposite directions never deadlock. */
	void (*p2p)(struct dist *d, const void *sbuf, size_t sb, int to, void *rbuf, size_t rb,
		    int from);

	/* --- host memory, done on return --- */
	void (*host_sum_f32)(struct dist *d, enum dist_group g, float *x, size_t n);
	void (*host_max_f32)(struct dist *d, enum dist_group g, float *x, size_t n);
	void (*sum_f64)(struct dist *d, enum dist_group g, double *x, size_t n);
	/* every rank of the group gets every rank's `bytes` bytes, in group-rank order */
	void (*allgather)(struct dist *d, enum dist_group g, const void *in, size_t bytes, void *out);
	/* group rank `root`'s bytes to every rank of the group */
	void (*bcast)(struct dist *d, enum dist_group g, void *x, size_t bytes, int root);
	void (*barrier)(struct dist *d);
	void (*finish)(struct dist *d);
	void *impl;
};

/* The grid for TP x PP (DP is the rest of the world).  One process: the size-1 grid (tp and pp
 * must be 1).  Several ranks: the transport for the backend `ops` names (MPI for "cpu", NCCL
 * for "cuda"); `dir` is where ranks without MPI meet (--save, or NULL: /tmp; the environment's
 * LMTK_RENDEZVOUS_DIR first).  -1 + err: a plugin missing, the world not divisible by tp*pp;
 * DIST_NOT_MET + err: the ranks did not form their groups (one never came, NCCL failed). */
#define DIST_NOT_MET (-3)
int dist_init(struct dist *d, int tp, int pp, const char *backend, const char *dir, char *err,
	      size_t errlen);

/* The number of ranks a launcher started (mpirun, PMIx/PMI, torchrun, an srun step), 1 for a plain
 * process; *from names the variable that said so. */
int dist_launched_world(const char **from);

/* This rank's place among the ranks on its node, as the launcher said it (mpirun's
 * OMPI_COMM_WORLD_LOCAL_RANK, MPICH's MPI_LOCALRANKID, MVAPICH2's MV2_COMM_WORLD_LOCAL_RANK,
 * PALS_LOCAL_RANKID, torchrun's and deepspeed's LOCAL_RANK, srun's SLURM_LOCALID: the first set),
 * -1 when none did, -2 when the first set one is not an index; *from names the variable.  Each
 * rank of a multi-GPU run binds GPU local % visible. */
int dist_local_rank(const char **from);

/* Conveniences over the table above. */
double dist_max(struct dist *d, enum dist_group g, double v);
int dist_any(struct dist *d, enum dist_group g, int flag);

/* The layout of `world` ranks as TP x PP x DP (Megatron's order, the top of this file) seen from
 * world rank `rank`: d's sizes, ranks and group table.  The one place the order is written;
 * both transports form their groups from the table.  -1 + err when world is not a multiple of
 * tp x pp. */
int dist_layout(struct dist *d, int world, int rank, int tp, int pp, char *err, size_t errlen);
typedef int (*dist_layout_fn)(struct dist *d, int world, int rank, int tp, int pp, char *err,
			      size_t errlen);

/* What the MPI plugin exports: MPI's world, laid out by `layout` (dist_layout: a plugin cannot
 * call into train, so dist.c passes it). */
typedef int (*dist_mpi_fn)(struct dist *d, int tp, int pp, dist_layout_fn layout, char *err,
			   size_t errlen);
#define DIST_MPI_SYMBOL "lmtk_dist_mpi"

/* How the NCCL transport's ranks find each other: rank 0's `bytes` bytes (the ncclUniqueIds it
 * made) to every rank, blocking, -1 + err when some rank never came; then done(), once every
 * rank holds them (after the first communicator formed), to clean up. */
struct dist_boot {
	int rank, world;
	const char *how;               /* for messages: "MPI", "a file rendezvous in DIR" */
	int (*bcast)(struct dist_boot *b, void *buf, size_t bytes, char *err, size_t errlen);
	void (*done)(struct dist_boot *b);
	struct dist *mpi;              /* the MPI grid bcast goes over, or NULL */
	void *ctx;
};

/* What the CUDA plugin exports for several ranks: the groups of d's layout (dist_layout, done by
 * the caller for boot's world and rank); boot is kept for finish().  0, -1 + err, or
 * DIST_NOT_MET + err. */
typedef int (*dist_nccl_fn)(struct dist *d, struct dist_boot *boot, char *err, size_t errlen);
#define DIST_NCCL_SYMBOL "lmtk_dist_nccl"

#endif
