/* dist - see dist.h.  The size-1 grid, and loading the MPI transport for several ranks. */
#include "train/dist.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "train/plugin.h"

static void one_f32(struct dist *d, enum dist_group g, float *x, size_t n) { (void)d, (void)g, (void)x, (void)n; }
static void one_f64(struct dist *d, enum dist_group g, double *x, size_t n) { (void)d, (void)g, (void)x, (void)n; }
static void one_gather(struct dist *d, enum dist_group g, const void *in, size_t bytes, void *out)
{
	(void)d, (void)g;
	memmove(out, in, bytes);
}
static void one_barrier(struct dist *d) { (void)d; }
static void one_gatherv(struct dist *d, enum dist_group g, float *x, const int *c, const int *o)
{
	(void)d, (void)g, (void)x, (void)c, (void)o;
}
static void one_p2p(struct dist *d, const void *sbuf, size_t sb, int to, void *rbuf, size_t rb,
		    int from)
{
	(void)d, (void)sbuf, (void)sb, (void)to, (void)rbuf, (void)rb, (void)from;
}

/* The world size a launcher announced: mpirun (Open MPI), PMIx/PMI, or an srun job step (not
 * SLURM_NTASKS: a batch script of a multi-task job may run train directly, as one process). */
int dist_launched_world(const char **from)
{
	static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE",
				     "SLURM_STEP_NUM_TASKS"};
	for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
		const char *v = getenv(vars[i]);
		if (v && atoi(v) > 1) {
			*from = vars[i];
			return atoi(v);
		}
	}
	return 1;
}

/* mpirun's and MPICH's before srun's: an mpirun inside a batch script inherits the batch step's
 * SLURM_LOCALID (0 for every rank), while srun sets its own for every task. */
int dist_local_rank(const char **from)
{
	static const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};
	for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
		const char *v = getenv(vars[i]);
		char *end;
		long l = v && *v ? strtol(v, &end, 10) : -1;
		if (v && *v && !*end && l >= 0 && l < 1 << 20) {
			*from = vars[i];
			return (int)l;
		}
	}
	*from = NULL;
	return -1;
}

int dist_init(struct dist *d, int tp, int pp, char *err, size_t errlen)
{
	const char *from = NULL;
	int world = dist_launched_world(&from);
	*d = (struct dist){.world = 1, .dp = 1, .tp = 1, .pp = 1, .sum_f32 = one_f32,
			   .max_f32 = one_f32, .sum_f64 = one_f64, .allgather = one_gather,
			   .barrier = one_barrier, .finish = one_barrier, .p2p = one_p2p,
			   .allgatherv_f32 = one_gatherv};
	if (world == 1) {
		if (tp != 1 || pp != 1)
			return errf(err, errlen, "TP=%d x PP=%d needs that many ranks: launch with mpirun "
				    "-np N or srun --ntasks N (one rank per GPU)", tp, pp);
		return 0;
	}
	char why[600];
	int missing;
	void *h = plugin_open("train-mpi.so", "LMTK_MPI_PLUGIN", 1, &missing, why, sizeof why);
	if (!h)
		return errf(err, errlen, "launched as %d ranks (%s) but the MPI transport cannot be "
			    "loaded: %s (build on a machine with Open MPI: libopenmpi-dev)", world, from,
			    why);
	dist_mpi_fn fn = (dist_mpi_fn)dlsym(h, DIST_MPI_SYMBOL);
	if (!fn)
		return errf(err, errlen, "train-mpi.so lacks %s", DIST_MPI_SYMBOL);
	return fn(d, tp, pp, err, errlen);
}

double dist_max(struct dist *d, enum dist_group g, double v)
{
	float f = (float)v;
	if (d->world == 1)
		return v;
	d->max_f32(d, g, &f, 1);
	return f;
}

int dist_any(struct dist *d, enum dist_group g, int flag)
{
	float f = flag ? 1.0f : 0.0f;
	if (d->world == 1)
		return flag;
	d->max_f32(d, g, &f, 1);
	return f > 0;
}
