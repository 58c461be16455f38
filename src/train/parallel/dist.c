/* dist - see dist.h.  The size-1 grid, and loading the transport for several ranks: MPI's
 * plugin for the CPU backend, the CUDA plugin's NCCL for the CUDA backend, with the two ways its
 * ranks can meet (MPI, or rendezvous.h's files named from SLURM's variables). */
#include "train/parallel/dist.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "msg.h"
#include "num.h"
#include "train/parallel/plugin.h"
#include "train/parallel/rendezvous.h"

static void one_f32(struct dist *d, enum dist_group g, float *x, size_t n) { (void)d, (void)g, (void)x, (void)n; }
static void one_act(struct dist *d, enum dist_group g, void *x, size_t n) { (void)d, (void)g, (void)x, (void)n; }
static void one_f64(struct dist *d, enum dist_group g, double *x, size_t n) { (void)d, (void)g, (void)x, (void)n; }
static void one_allgather(struct dist *d, enum dist_group g, const void *in, size_t bytes, void *out)
{
	(void)d, (void)g;
	memmove(out, in, bytes);
}
static void one_bcast(struct dist *d, enum dist_group g, void *x, size_t bytes, int root)
{
	(void)d, (void)g, (void)x, (void)bytes, (void)root;
}
static void one_barrier(struct dist *d) { (void)d; }
static void one_dev_reduce(struct dist *d, enum dist_group g, void *x, size_t n, int type, int op)
{
	(void)d, (void)g, (void)x, (void)n, (void)type, (void)op;
}
static void one_gather(struct dist *d, enum dist_group g, float *x, size_t n)
{
	(void)d, (void)g, (void)x, (void)n;
}
static void one_p2p(struct dist *d, const void *sbuf, size_t sb, int to, void *rbuf, size_t rb,
		    int from)
{
	(void)d, (void)sbuf, (void)sb, (void)to, (void)rbuf, (void)rb, (void)from;
}

/* Gradient buckets for transports without a stream of their own (dist.h): summed at once, the
 * whole bucket on every rank (each rank's chunk is a part of it) */
static void plain_bucket_sum(struct dist *d, enum dist_group g, float *x, size_t n)
{
	d->sum_f32(d, g, x, n);
}
static void plain_bucket_reduce(struct dist *d, enum dist_group g, float *x, size_t n)
{
	d->sum_f32(d, g, x, n);
}

static void buckets_default(struct dist *d)
{
	if (!d->bucket_sum_f32)
		d->bucket_sum_f32 = plain_bucket_sum;
	if (!d->bucket_reduce_f32)
		d->bucket_reduce_f32 = plain_bucket_reduce;
	if (!d->bucket_wait)
		d->bucket_wait = one_barrier;
}

/* The world size a launcher announced: mpirun (Open MPI), PMIx/PMI, torchrun or the deepspeed
 * launcher (WORLD_SIZE: read before srun's, as one runs under srun, one per node, and its ranks
 * inherit the step's size), or an srun job step (not SLURM_NTASKS: a batch script of a
 * multi-task job may run train directly, as one process). */
int dist_launched_world(const char **from)
{
	static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE", "WORLD_SIZE",
				     "SLURM_STEP_NUM_TASKS"};
	for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
		int64_t n;
		if (num_int(getenv(vars[i]), 2, 1 << 24, &n) == NUM_OK) {
			*from = vars[i];
			return (int)n;
		}
	}
	return 1;
}

/* The MPI launchers' own variables (Open MPI's mpirun, MPICH's Hydra, MVAPICH2's, Cray PALS'),
 * then LOCAL_RANK (torchrun, the deepspeed launcher), then srun's: each launcher sets its own
 * for every rank, while a launcher started inside another's environment inherits the outer one's
 * single value - an mpirun in a batch script the batch step's SLURM_LOCALID (0 for every rank),
 * one under torchrun its LOCAL_RANK.  A variable that is set but not an index 0..2^20-1 is a
 * launcher's mistake, not a reason to fall back to the next (every rank would take GPU 0). */
int dist_local_rank(const char **from)
{
	static const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
				     "MV2_COMM_WORLD_LOCAL_RANK", "PALS_LOCAL_RANKID", "LOCAL_RANK",
				     "SLURM_LOCALID"};
	for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
		const char *v = getenv(vars[i]);
		int64_t l;
		if (!v || !*v)
			continue;
		*from = vars[i];
		return num_int(v, 0, (1 << 20) - 1, &l) == NUM_OK ? (int)l : -2;
	}
	*from = NULL;
	return -1;
}

static int mpi_open(struct dist *d, int tp, int pp, int world, const char *from, char *err,
		    size_t errlen)
{
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
	return fn(d, tp, pp, dist_layout, err, errlen);
}

/* --- how the NCCL transport's ranks meet --- */

static int mpi_boot_bcast(struct dist_boot *b, void *buf, size_t bytes, char *err, size_t errlen)
{
	(void)err, (void)errlen;
	b->mpi->bcast(b->mpi, DIST_WORLD, buf, bytes, 0);
	return 0;
}

struct file_boot {
	char dir[4096], key[160], how[4200];
	double timeout;
};

static int file_boot_bcast(struct dist_boot *b, void *buf, size_t bytes, char *err, size_t errlen)
{
	struct file_boot *f = b->ctx;
	return rendezvous_bcast(f->dir, f->key, b->rank, b->world, f->timeout, buf, bytes, err,
				errlen);
}

static void file_boot_done(struct dist_boot *b)
{
	struct file_boot *f = b->ctx;
	if (b->rank == 0)
		rendezvous_clean(f->dir, f->key, b->world);
}

static int env_int(const char *name, int *v)
{
	const char *s = getenv(name);
	char *end;
	long l = s && *s ? strtol(s, &end, 10) : -1;
	if (!s || !*s || *end || l < 0 || l > 1 << 24)
		return -1;
	*v = (int)l;
	return 0;
}

/* A rendezvous name's restart part: ".rN" for a restart count N > 0, else nothing (a restarted
 * launch meets afresh, under a name the earlier one never used) */
static const char *restart_suffix(const char *restart)
{
	static char buf[32];
	if (!restart || !*restart || strcmp(restart, "0") == 0)
		return "";
	snprintf(buf, sizeof buf, ".r%.20s", restart);
	return buf;
}

/* torchrun's (and the deepspeed launcher's) view of the launch: RANK of WORLD_SIZE, and a name
 * no other launch has - its store's address and port (two launches on one node need two ports),
 * torchrun's run id and its restart count (an elastic restart meets afresh) */
static int torch_boot_key(struct dist_boot *b, struct file_boot *f, const char *dir, char *err,
			  size_t errlen)
{
	const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT"),
		   *id = getenv("TORCHELASTIC_RUN_ID"), *restart = getenv("TORCHELASTIC_RESTART_COUNT"),
		   *d = getenv("LMTK_RENDEZVOUS_DIR");
	int local = -1;
	if (env_int("RANK", &b->rank) < 0 || env_int("WORLD_SIZE", &b->world) < 0)
		return errf(err, errlen, "launched by torchrun or the deepspeed launcher (WORLD_SIZE), "
			    "but RANK=%s is not this process's rank", getenv("RANK") ? getenv("RANK")
			    : "(unset)");
	if (!addr || !*addr || !port || !*port || strpbrk(addr, "/ ") || strpbrk(port, "/ ") ||
	    (id && strpbrk(id, "/ ")) || (restart && strpbrk(restart, "/ ")))
		return errf(err, errlen, "launched by torchrun or the deepspeed launcher (WORLD_SIZE), "
			    "the ranks meet under the name of the launch: MASTER_ADDR and MASTER_PORT, "
			    "which both set, are %s", !addr || !*addr || !port || !*port ? "not set"
			    : "not a host name and a port");
	/* several nodes meet through a directory they all see: --save's, or the one named */
	if ((env_int("LOCAL_WORLD_SIZE", &local) == 0 || env_int("LOCAL_SIZE", &local) == 0) &&
	    local < b->world && !(d && *d) && !(dir && *dir))
		return errf(err, errlen, "launched by torchrun or the deepspeed launcher over several "
			    "nodes (%d ranks, %d on this node), whose ranks meet through files in a "
			    "directory every node sees: give --save on a shared filesystem or set "
			    "LMTK_RENDEZVOUS_DIR", b->world, local);
	snprintf(f->key, sizeof f->key, "torch.%.60s.%.10s.%.40s%s", addr, port,
		 id && *id ? id : "none", restart_suffix(restart));
	return 0;
}

/* SLURM's view of the step: this task's rank, the step's size and a name no other step of the
 * cluster has (the job, the step, and the requeue count: a requeued job keeps its id); or,
 * launched by torchrun (torch), torch_boot_key's */
static int file_boot_open(struct dist_boot *b, struct file_boot *f, const char *dir, int torch,
			  char *err, size_t errlen)
{
	const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID"),
		   *restart = getenv("SLURM_RESTART_COUNT"), *d = getenv("LMTK_RENDEZVOUS_DIR"),
		   *t = getenv("LMTK_RENDEZVOUS_TIMEOUT");
	if (torch) {
		if (torch_boot_key(b, f, dir, err, errlen) < 0)
			return -1;
		if (b->world < 2 || b->rank >= b->world)
			return errf(err, errlen, "RANK=%d of WORLD_SIZE=%d: not a rank of a multi-rank "
				    "launch", b->rank, b->world);
	} else if (env_int("SLURM_PROCID", &b->rank) < 0 ||
	    (env_int("SLURM_STEP_NUM_TASKS", &b->world) < 0 && env_int("SLURM_NTASKS", &b->world) < 0))
		return errf(err, errlen, "without MPI, the ranks of a CUDA run meet through SLURM's "
			    "SLURM_PROCID and SLURM_NTASKS, which are not set: launch with srun (one "
			    "task per GPU) or mpirun");
	if (!torch && (!job || !*job || strpbrk(job, "/ ") || (step && strpbrk(step, "/ "))))
		return errf(err, errlen, "without MPI, the ranks of a CUDA run meet under the name of "
			    "their job step: SLURM_JOB_ID%s is not set", step ? "" : " (and SLURM_STEP_ID)");
	if (!torch && (b->world < 2 || b->rank >= b->world))
		return errf(err, errlen, "SLURM_PROCID=%d of %d tasks: not a rank of a multi-rank "
			    "step", b->rank, b->world);
	snprintf(f->dir, sizeof f->dir, "%s", d && *d ? d : dir && *dir ? dir : "/tmp");
	if (!torch)
		snprintf(f->key, sizeof f->key, "%.60s.%.40s%s", job, step && *step ? step : "batch",
			 restart_suffix(restart));
	f->timeout = t && *t && atof(t) > 0 ? atof(t) : 300;
	snprintf(f->how, sizeof f->how, "files in %s/" RENDEZVOUS_SUBDIR "%u", f->dir,
		 (unsigned)geteuid());
	b->how = f->how;
	b->bcast = file_boot_bcast;
	b->done = file_boot_done;
	b->ctx = f;
	return 0;
}

/* The NCCL transport's entry point in the CUDA plugin (train-cuda.so, which the CUDA backend has
 * loaded already: the same handle), or NULL + err. */
static dist_nccl_fn nccl_symbol(char *err, size_t errlen)
{
	int missing;
	void *h = plugin_open("train-cuda.so", "LMTK_CUDA_PLUGIN", 0, &missing, err, errlen), *sym;
	if (!h && missing)
		snprintf(err, errlen, "the CUDA backend (train-cuda.so) is not found: this build has no "
			 "CUDA support (build on a machine with nvcc, or use --device cpu)");
	if (!h)
		return NULL;
	if (!(sym = dlsym(h, DIST_NCCL_SYMBOL)))
		snprintf(err, errlen, "train-cuda.so lacks %s (built from older sources?)",
			 DIST_NCCL_SYMBOL);
	return (dist_nccl_fn)sym;
}

/* The NCCL transport: rank 0's ncclUniqueIds over MPI when an MPI launcher started the ranks
 * and train-mpi.so loads, else through files from SLURM's variables. */
static int nccl_open(struct dist *d, int tp, int pp, int world, const char *from, const char *dir,
		     char *err, size_t errlen)
{
	static struct dist mpi;
	static struct dist_boot boot;
	static struct file_boot fb;
	char why[600];
	dist_nccl_fn fn = nccl_symbol(why, sizeof why);
	if (!fn)
		return errf(err, errlen, "launched as %d ranks (%s) on the CUDA backend, but its NCCL "
			    "transport cannot be loaded: %s (build where the CUDA toolkit has NCCL)",
			    world, from, why);
	memset(&boot, 0, sizeof boot);
	/* torchrun's ranks inherit the PMI variables of the srun task that started torchrun */
	int torch = strcmp(from, "WORLD_SIZE") == 0;
	int by_mpi = !torch && (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") ||
				getenv("PMI_RANK"));
	if (by_mpi && mpi_open(&mpi, 1, 1, world, from, why, sizeof why) == 0) {
		boot = (struct dist_boot){.rank = mpi.rank, .world = mpi.world, .how = "MPI",
					  .bcast = mpi_boot_bcast, .mpi = &mpi};
	} else if (!torch && getenv("OMPI_COMM_WORLD_SIZE")) {
		/* mpirun's ranks may carry the batch step's SLURM_PROCID (0 for all): no fallback */
		return errf(err, errlen, "launched by mpirun (%s), but the MPI transport that carries "
			    "NCCL's unique id failed: %s", from, why);
	} else {
		char fwhy[600];
		if (file_boot_open(&boot, &fb, dir, torch, fwhy, sizeof fwhy) < 0) {
			if (by_mpi)
				return errf(err, errlen, "launched by MPI (%s), whose transport failed: %s; "
					    "and no file rendezvous either: %s", from, why, fwhy);
			return errf(err, errlen, "%s", fwhy);
		}
	}
	if (boot.world != world)
		return errf(err, errlen, "%s says %d ranks, but %s says %d", boot.how, boot.world, from,
			    world);
	if (dist_layout(d, boot.world, boot.rank, tp, pp, err, errlen) < 0)
		return -1;
	int rc = fn(d, &boot, err, errlen);
	if (rc < 0)
		return rc;
	static char transport[4300];
	snprintf(transport, sizeof transport, "NCCL (unique ids via %s)", boot.how);
	d->transport = transport;
	return 0;
}

int dist_layout(struct dist *d, int world, int rank, int tp, int pp, char *err, size_t errlen)
{
	if (tp < 1 || pp < 1 || world % (tp * pp))
		return errf(err, errlen, "%d ranks are not divisible by TP=%d x PP=%d", world, tp, pp);
	int dp = world / (tp * pp);
	d->world = world;
	d->rank = rank;
	d->tp = tp;
	d->pp = pp;
	d->dp = dp;
	d->tp_rank = rank % tp;
	d->dp_rank = rank / tp % dp;
	d->pp_rank = rank / (tp * dp);
	/* color: what the group's members share; rank: their order within it */
	int edge = d->pp_rank == 0 || d->pp_rank == pp - 1, cell = d->dp_rank * tp + d->tp_rank;
	static const int none = -1;
	const int color[DIST_GROUPS] = {
		[DIST_WORLD] = 0,
		[DIST_DP] = d->pp_rank * tp + d->tp_rank,
		[DIST_TP] = d->pp_rank * dp + d->dp_rank,
		[DIST_PP] = cell,
		[DIST_EMB] = edge ? cell : none,   /* the first and last stage of each pipeline */
	};
	const int grank[DIST_GROUPS] = {
		[DIST_WORLD] = rank, [DIST_DP] = d->dp_rank, [DIST_TP] = d->tp_rank,
		[DIST_PP] = d->pp_rank, [DIST_EMB] = edge && d->pp_rank ? 1 : 0,
	};
	const int gsize[DIST_GROUPS] = {
		[DIST_WORLD] = world, [DIST_DP] = dp, [DIST_TP] = tp, [DIST_PP] = pp,
		[DIST_EMB] = edge && pp > 1 ? 2 : 1,
	};
	memcpy(d->color, color, sizeof color);
	memcpy(d->grank, grank, sizeof grank);
	memcpy(d->gsize, gsize, sizeof gsize);
	return 0;
}

int dist_init(struct dist *d, int tp, int pp, const char *backend, const char *dir, char *err,
	      size_t errlen)
{
	const char *from = NULL;
	int world = dist_launched_world(&from);
	*d = (struct dist){.world = 1, .dp = 1, .tp = 1, .pp = 1, .transport = "one",
			   .sum_f32 = one_f32, .sum_act = one_act, .gather_f32 = one_gather,
			   .p2p = one_p2p, .host_sum_f32 = one_f32, .host_max_f32 = one_f32,
			   .sum_f64 = one_f64, .dev_reduce = one_dev_reduce,
			   .allgather = one_allgather, .bcast = one_bcast,
			   .barrier = one_barrier, .finish = one_barrier};
	if (world == 1) {
		if (tp != 1 || pp != 1)
			return errf(err, errlen, "TP=%d x PP=%d needs that many ranks: launch with mpirun "
				    "-np N or srun --ntasks N (one rank per GPU)", tp, pp);
		dist_layout(d, 1, 0, 1, 1, err, errlen);
		buckets_default(d);
		return 0;
	}
	if (strcmp(backend, "cpu") == 0 && strcmp(from, "WORLD_SIZE") == 0)
		return errf(err, errlen, "launched as %d ranks by torchrun or the deepspeed launcher "
			    "(WORLD_SIZE), but the CPU backend's ranks meet through MPI: launch them "
			    "with mpirun or srun (or train on GPUs)", world);
	int rc = strcmp(backend, "cpu") == 0 ? mpi_open(d, tp, pp, world, from, err, errlen)
					      : nccl_open(d, tp, pp, world, from, dir, err, errlen);
	buckets_default(d);
	return rc;
}

double dist_max(struct dist *d, enum dist_group g, double v)
{
	float f = (float)v;
	if (d->world == 1)
		return v;
	d->host_max_f32(d, g, &f, 1);
	return f;
}

int dist_any(struct dist *d, enum dist_group g, int flag)
{
	float f = flag ? 1.0f : 0.0f;
	if (d->world == 1)
		return flag;
	d->host_max_f32(d, g, &f, 1);
	return f > 0;
}
