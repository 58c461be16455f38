/* dist_mpi - the MPI transport of dist.h, built by mpicc into train-mpi.so: every collective of
 * a CPU run with several ranks, and the broadcast of NCCL's unique ids when a CUDA run is launched
 * by mpirun (dist.c).  The CPU backend's memory is host memory and its ops are synchronous, so
 * "the backend's memory" and "host memory" (dist.h) are the same here.
 *
 * Groups are MPI_Comm_split()s of the world by dist_layout's table (Megatron's rank order: TP
 * fastest, then DP, then PP; computed in dist.c and passed in, as for the NCCL transport).  Sums must be bit-identical on every rank (replicated tensors must never drift, the
 * 176B lesson), and MPI_Allreduce does not promise that for floats in general: here a sum is an
 * MPI_Reduce to the group's rank 0 with MPI's deterministic tree for a fixed size, then an
 * MPI_Bcast of that one result - every rank holds the same bits by construction.  Large
 * buffers go in chunks so memory stays bounded. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/parallel/dist.h"

struct impl {
	MPI_Comm comm[DIST_GROUPS];
	void *tmp;
	size_t tmpsz;
};

#define CHUNK (1u << 22)   /* elements per reduction: 16 MiB of floats */

static void *scratch(struct impl *m, size_t bytes)
{
	if (bytes > m->tmpsz) {
		free(m->tmp);
		m->tmp = malloc(bytes);
		m->tmpsz = m->tmp ? bytes : 0;
		if (!m->tmp) {
			fprintf(stderr, "train: out of memory for a collective's staging buffer: "
				"%zu bytes\n", bytes);
			MPI_Abort(MPI_COMM_WORLD, 3);
		}
	}
	return m->tmp;
}

static void reduce_bcast(struct dist *d, enum dist_group g, void *x, size_t n, MPI_Datatype t,
			 size_t esz, MPI_Op op)
{
	struct impl *m = d->impl;
	int size, rank;
	MPI_Comm_size(m->comm[g], &size);
	if (size == 1)
		return;
	MPI_Comm_rank(m->comm[g], &rank);
	for (size_t off = 0; off < n; off += CHUNK) {
		int k = (int)(n - off < CHUNK ? n - off : CHUNK);
		char *p = (char *)x + off * esz;
		void *out = scratch(m, (size_t)k * esz);
		MPI_Reduce(p, out, k, t, op, 0, m->comm[g]);
		if (rank == 0)
			memcpy(p, out, (size_t)k * esz);
		MPI_Bcast(p, k, t, 0, m->comm[g]);
	}
}

static void sum_f32(struct dist *d, enum dist_group g, float *x, size_t n)
{
	reduce_bcast(d, g, x, n, MPI_FLOAT, sizeof *x, MPI_SUM);
}

static void max_f32(struct dist *d, enum dist_group g, float *x, size_t n)
{
	reduce_bcast(d, g, x, n, MPI_FLOAT, sizeof *x, MPI_MAX);
}

/* the CPU backend's activations are fp32 */
static void sum_act(struct dist *d, enum dist_group g, void *x, size_t n)
{
	reduce_bcast(d, g, x, n, MPI_FLOAT, sizeof(float), MPI_SUM);
}

static void sum_f64(struct dist *d, enum dist_group g, double *x, size_t n)
{
	reduce_bcast(d, g, x, n, MPI_DOUBLE, sizeof *x, MPI_SUM);
}

static void allgather(struct dist *d, enum dist_group g, const void *in, size_t bytes, void *out)
{
	struct impl *m = d->impl;
	MPI_Allgather(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, m->comm[g]);
}

static void p2p(struct dist *d, const void *sbuf, size_t sb, int to, void *rbuf, size_t rb,
		int from)
{
	struct impl *m = d->impl;
	MPI_Request req[2];
	int n = 0;
	if (rbuf)
		MPI_Irecv(rbuf, (int)rb, MPI_BYTE, from, 7, m->comm[DIST_PP], &req[n++]);
	if (sbuf)
		MPI_Isend(sbuf, (int)sb, MPI_BYTE, to, 7, m->comm[DIST_PP], &req[n++]);
	MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
}

static void gather_f32(struct dist *d, enum dist_group g, float *x, size_t n)
{
	struct impl *m = d->impl;
	int size;
	MPI_Comm_size(m->comm[g], &size);
	if (size > 1 && n)
		MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, (int)(n / (size_t)size), MPI_FLOAT,
			      m->comm[g]);
}

static void bcast(struct dist *d, enum dist_group g, void *x, size_t bytes, int root)
{
	struct impl *m = d->impl;
	for (size_t off = 0; off < bytes; off += CHUNK)
		MPI_Bcast((char *)x + off, (int)(bytes - off < CHUNK ? bytes - off : CHUNK), MPI_BYTE,
			  root, m->comm[g]);
}

static void barrier(struct dist *d)
{
	struct impl *m = d->impl;
	MPI_Barrier(m->comm[DIST_WORLD]);
}

static void finish(struct dist *d)
{
	int fin = 0;
	MPI_Finalized(&fin);
	if (!fin)
		MPI_Finalize();
	(void)d;
}

int lmtk_dist_mpi(struct dist *d, int tp, int pp, dist_layout_fn layout, char *err, size_t errlen)
{
	int init = 0, world, rank;
	MPI_Initialized(&init);
	if (!init && MPI_Init(NULL, NULL) != MPI_SUCCESS) {
		snprintf(err, errlen, "MPI_Init failed");
		return -1;
	}
	MPI_Comm_size(MPI_COMM_WORLD, &world);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (layout(d, world, rank, tp, pp, err, errlen) < 0)
		return -1;
	struct impl *m = calloc(1, sizeof *m);
	if (!m) {
		snprintf(err, errlen, "out of memory for the MPI transport's state");
		return -1;
	}
	/* the groups of dist_layout's table, split in the same order on every rank (MPI_Comm_split
	 * is collective over the world) */
	m->comm[DIST_WORLD] = MPI_COMM_WORLD;
	for (int g = DIST_WORLD + 1; g < DIST_GROUPS; g++) {
		MPI_Comm_split(MPI_COMM_WORLD, d->color[g] >= 0 ? d->color[g] : MPI_UNDEFINED,
			       d->grank[g], &m->comm[g]);
		if (d->color[g] < 0)   /* a middle stage: in no embedding group */
			m->comm[g] = MPI_COMM_SELF;
	}
	d->impl = m;
	d->transport = "MPI";
	d->dev_reduce = NULL;   /* its backend (the CPU) reads every value back: dist.h */
	d->sum_f32 = sum_f32;
	d->sum_act = sum_act;
	d->host_sum_f32 = sum_f32;
	d->host_max_f32 = max_f32;
	d->sum_f64 = sum_f64;
	d->allgather = allgather;
	d->bcast = bcast;
	d->barrier = barrier;
	d->p2p = p2p;
	d->gather_f32 = gather_f32;
	d->finish = finish;
	return 0;
}
