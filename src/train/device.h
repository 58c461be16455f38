/* device - the backend a run computes on: the CPU's (cpu/ops_cpu.c), or the CUDA plugin
 * (train-cuda.so, cuda/) loaded with dlopen only when a GPU is asked for or --device auto
 * probes for one.  Above both backends: nothing below it picks one. */
#ifndef TRAIN_DEVICE_H
#define TRAIN_DEVICE_H

#include <stddef.h>

#include "train/model/ops.h"

/* The backend for --device cpu|cuda|auto.  "auto" is cuda when the CUDA backend loads and sees
 * a GPU, else cpu.  NULL + err when the named backend cannot be used (no GPU, plugin missing),
 * naming what is missing.  The CUDA backend is process-wide: one device and one activation
 * type per process. */
const struct ops *ops_open(const char *device, int threads, enum ops_prec prec, char *err,
			   size_t errlen);

/* The GPUs this process sees (CUDA_VISIBLE_DEVICES applied, as the runtime counts them), for
 * binding a rank to one: 0 when there are none or no CUDA backend loads (err says why). */
int ops_cuda_devices(char *err, size_t errlen);

#endif
