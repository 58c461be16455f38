/* plugin - finding and loading train's optional parts: the CUDA backend (train-cuda.so, with
 * the NCCL transport inside) and the MPI transport (train-mpi.so).
 *
 * They are shared objects rather than parts of bin/train so that a machine without CUDA or
 * Open MPI runs train all the same; they are not programs, so they live where libraries do:
 * $PREFIX/lib/lmtk/ once installed, build/lib/lmtk/ in the build tree (both relative to the
 * binary), or wherever an environment variable names. */
#ifndef TRAIN_PLUGIN_H
#define TRAIN_PLUGIN_H

#include <stddef.h>

/* dlopen()s `file` from $env if set, else <bin>/../lib/lmtk/ or <bin>/../build/lib/lmtk/.
 * global: RTLD_GLOBAL (Open MPI loads plugins of its own that need its symbols).  NULL + err:
 * "not found" (*missing = 1) or the loader's message naming the path (*missing = 0). */
void *plugin_open(const char *file, const char *env, int global, int *missing, char *err,
		  size_t errlen);

#endif
