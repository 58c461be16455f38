/* dist - the process grid: data-, tensor- and pipeline-parallel groups, and their collectives.
 *
 * world = DP x TP x PP ranks, one per GPU (or CPU process), Megatron's order: TP varies fastest,
 * then DP, then PP (rank = pp * DP*TP + dp * TP + tp), so a TP group sits on one node's fast
 * links.  The model and the run call collectives by group (DIST_TP for the row-parallel
 * all-reduce and the replicated tensors' gradients, DIST_DP for the gradient all-reduce,
 * DIST_WORLD for decisions every rank must take together: stop, save, skip), never a transport.
 *
 * One process needs no MPI at build or run time: the size-1 grid is built in and every
 * collective is the identity.  Launched as several ranks (mpirun, or srun with one task per
 * GPU), train loads the MPI transport, train-mpi.so (dist_mpi.c, built by mpicc when Open MPI
 * is installed; found by plugin.h) - the same plugin scheme as the CUDA backend.  Buffers are
 * host memory: the CPU backend's; GPU collectives (NCCL) are not in this build.
 *
 * Collectives must give bit-identical results on every rank of the group (replicated tensors
 * stay identical by construction): dist_mpi.c reduces in a fixed rank order and broadcasts. */
#ifndef TRAIN_DIST_H
#define TRAIN_DIST_H

#include <stddef.h>

/* DIST_EMB: the first and last pipeline stages of one pipeline, which both hold the tied word
 * embeddings (input lookup and output layer) and sum their gradients. */
enum dist_group { DIST_WORLD, DIST_DP, DIST_TP, DIST_PP, DIST_EMB, DIST_GROUPS };

struct dist {
	int world, rank;
	int dp, tp, pp;                /* group sizes */
	int dp_rank, tp_rank, pp_rank;
	/* in place over a group (host memory) */
	void (*sum_f32)(struct dist *d, enum dist_group g, float *x, size_t n);
	void (*max_f32)(struct dist *d, enum dist_group g, float *x, size_t n);
	void (*sum_f64)(struct dist *d, enum dist_group g, double *x, size_t n);
	/* every rank of the group gets every rank's `bytes` bytes, in group-rank order */
	void (*allgather)(struct dist *d, enum dist_group g, const void *in, size_t bytes, void *out);
	/* in place: group rank r contributes x[displs[r], displs[r] + counts[r]) and every rank ends
	 * with all of them (ZeRO-1's parameter all-gather) */
	void (*allgatherv_f32)(struct dist *d, enum dist_group g, float *x, const int *counts,
			       const int *displs);
	void (*barrier)(struct dist *d);
	/* Pipeline point-to-point: sends `sb` bytes to pipeline stage `to` and receives `rb` bytes
	 * from stage `from` (either side skipped when its buffer is NULL), both in flight at once
	 * so that neighbours exchanging in opposite directions never deadlock. */
	void (*p2p)(struct dist *d, const void *sbuf, size_t sb, int to, void *rbuf, size_t rb,
		    int from);
	void (*finish)(struct dist *d);
	void *impl;
};

/* The grid for TP x PP (DP is the rest of the world).  One process: the size-1 grid (tp and pp
 * must be 1).  Several ranks: the MPI transport, or -1 + err (plugin missing, world not
 * divisible by tp*pp). */
int dist_init(struct dist *d, int tp, int pp, char *err, size_t errlen);

/* The number of ranks a launcher started (mpirun, PMIx/PMI, an srun step), 1 for a plain
 * process; *from names the variable that said so. */
int dist_launched_world(const char **from);

/* This rank's place among the ranks on its node, as the launcher said it (mpirun's
 * OMPI_COMM_WORLD_LOCAL_RANK, MPICH's MPI_LOCALRANKID, srun's SLURM_LOCALID), or -1 when none
 * did; *from names the variable.  Each rank of a multi-GPU run binds GPU local % visible. */
int dist_local_rank(const char **from);

/* Conveniences over the table above. */
double dist_max(struct dist *d, enum dist_group g, double v);
int dist_any(struct dist *d, enum dist_group g, int flag);

/* What the MPI plugin exports. */
typedef int (*dist_mpi_fn)(struct dist *d, int tp, int pp, char *err, size_t errlen);
#define DIST_MPI_SYMBOL "lmtk_dist_mpi"

#endif
