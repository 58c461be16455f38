/* train_localrank.c - which of its node's ranks a process is, from the variables each launcher
 * sets: mpirun (Open MPI), MPICH's Hydra, MVAPICH2, Cray PALS, torchrun and the deepspeed
 * launcher (LOCAL_RANK), srun.  A launcher's own variable wins over one inherited from an outer
 * launcher (SLURM_LOCALID of the batch step, LOCAL_RANK of a torchrun), and a set variable that
 * is not an index is an error, not a reason to try the next. */
#include "t.h"

#include <stdlib.h>

#include "train/parallel/dist.h"

static const char *all[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
			    "MV2_COMM_WORLD_LOCAL_RANK", "PALS_LOCAL_RANKID", "LOCAL_RANK",
			    "SLURM_LOCALID"};

static void clear(void)
{
	for (size_t i = 0; i < sizeof all / sizeof *all; i++)
		unsetenv(all[i]);
}

/* the local rank with only `var` set to `val` (and, when outer, SLURM_LOCALID=0 beside it) */
static int alone(const char *var, const char *val, int outer, const char **from)
{
	clear();
	if (outer)
		setenv("SLURM_LOCALID", "0", 1);
	setenv(var, val, 1);
	return dist_local_rank(from);
}

int main(void)
{
	const char *from;
	T_CASE("each_launchers_local_rank_is_read_before_sruns_inherited_one") {
		const char *launchers[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
					   "MV2_COMM_WORLD_LOCAL_RANK", "PALS_LOCAL_RANKID",
					   "LOCAL_RANK"};
		for (int i = 0; i < 5; i++) {
			T_ASSERT(alone(launchers[i], "3", 1, &from) == 3);
			T_ASSERT(from && strcmp(from, launchers[i]) == 0);
			T_ASSERT(alone(launchers[i], "7", 0, &from) == 7);
		}
		T_ASSERT(alone("SLURM_LOCALID", "5", 0, &from) == 5);
		T_ASSERT(from && strcmp(from, "SLURM_LOCALID") == 0);
	}
	T_CASE("mpi_launchers_own_variables_win_over_an_inherited_local_rank") {
		/* mpirun inside a torchrun-started shell: LOCAL_RANK is the shell's, one for all */
		clear();
		setenv("LOCAL_RANK", "0", 1);
		setenv("MV2_COMM_WORLD_LOCAL_RANK", "2", 1);
		T_ASSERT(dist_local_rank(&from) == 2);
		T_ASSERT(from && strcmp(from, "MV2_COMM_WORLD_LOCAL_RANK") == 0);
		clear();
		setenv("LOCAL_RANK", "0", 1);
		setenv("PALS_LOCAL_RANKID", "1", 1);
		T_ASSERT(dist_local_rank(&from) == 1);
		T_ASSERT(from && strcmp(from, "PALS_LOCAL_RANKID") == 0);
	}
	T_CASE("a_local_rank_that_is_not_an_index_is_an_error_naming_it") {
		const char *bad[] = {"-1", "x", "1x", "1048576", "99999999999999999999"};
		for (int i = 0; i < 5; i++) {
			T_ASSERT(alone("LOCAL_RANK", bad[i], 1, &from) == -2);
			T_ASSERT(from && strcmp(from, "LOCAL_RANK") == 0);
		}
		T_ASSERT(alone("LOCAL_RANK", "1048575", 1, &from) == 1048575);
		T_ASSERT(alone("LOCAL_RANK", "", 1, &from) == 0); /* empty: unset */
		T_ASSERT(from && strcmp(from, "SLURM_LOCALID") == 0);
	}
	T_CASE("no_local_rank_says_so") {
		clear();
		T_ASSERT(dist_local_rank(&from) == -1 && from == NULL);
	}
	T_DONE();
}
