/* ops_cpu - the CPU backend: every operation of ops.h in fp32 with OpenMP, the reference the
 * CUDA backend is held to. */
#ifndef TRAIN_CPU_OPS_CPU_H
#define TRAIN_CPU_OPS_CPU_H

#include "train/model/ops.h"

/* The CPU backend (cpu/ops_cpu.c).  threads <= 0: all online CPUs. */
const struct ops *ops_cpu(int threads);

#endif
