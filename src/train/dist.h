/* dist - the process grid: data-, tensor- and pipeline-parallel groups, and their collectives.
 *
 * world = DP x TP x PP ranks, one per GPU, Megatron's order: TP varies fastest, then DP, then PP
 * (rank = pp * DP*TP + dp * TP + tp), so a TP group sits on one node's fast links.  The model
 * and the run call collectives by group (DIST_TP for the row-parallel all-reduce and the
 * replicated tensors' gradients, DIST_DP for the gradient all-reduce, DIST_WORLD for decisions
 * every rank must take together: stop, save, skip), never a transport.
 *
 * This build has the size-1 grid only: every collective is the identity, and a single-process
 * run needs no MPI at build or run time.  The multi-rank transports (MPI for set-up and CPU
 * collectives, NCCL for device buffers, its id exchanged over MPI) plug in behind this same
 * interface, as the CUDA backend does behind ops.h. */
#ifndef TRAIN_DIST_H
#define TRAIN_DIST_H

#include <stddef.h>

enum dist_group { DIST_WORLD, DIST_DP, DIST_TP, DIST_PP };

struct dist {
	int world, rank;
	int dp, tp, pp;                /* group sizes */
	int dp_rank, tp_rank, pp_rank;
};

/* The grid of this process: the size-1 grid unless launched as several ranks (then -1 + err:
 * not in this build). */
int dist_init(struct dist *d, int tp, int pp, char *err, size_t errlen);

/* In place over a group: sum of float (device or host memory per the backend), max of a double,
 * logical or of a flag. */
void dist_sum_f32(const struct dist *d, enum dist_group g, float *x, size_t n);
double dist_max(const struct dist *d, enum dist_group g, double v);
int dist_any(const struct dist *d, enum dist_group g, int flag);

#endif
