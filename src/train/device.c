/* device - see device.h.  The CPU backend is linked in; the CUDA backend is a plugin
 * (train-cuda.so, found by plugin.h) loaded with dlopen only when a GPU is asked for or
 * --device auto probes for one, so train runs on machines without any CUDA library. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "num.h"
#include "train/device.h"
#include "train/cpu/ops_cpu.h"
#include "train/parallel/plugin.h"

static void *load_plugin(char *err, size_t errlen)
{
	int missing;
	void *h = plugin_open("train-cuda.so", "LMTK_CUDA_PLUGIN", 0, &missing, err, errlen);
	if (!h && missing)
		snprintf(err, errlen, "the CUDA backend (train-cuda.so) is not found: this build has no "
			 "CUDA support (build on a machine with nvcc, or use --device cpu)");
	return h;
}

static void *cuda_symbol(const char *name, char *err, size_t errlen)
{
	void *h = load_plugin(err, errlen), *sym;
	if (!h)
		return NULL;
	if (!(sym = dlsym(h, name)))
		snprintf(err, errlen, "train-cuda.so lacks %s (built from older sources?)", name);
	return sym;
}

int ops_cuda_devices(char *err, size_t errlen)
{
	ops_cuda_count_fn fn = (ops_cuda_count_fn)cuda_symbol(OPS_CUDA_COUNT_SYMBOL, err, errlen);
	int n = fn ? fn() : 0;
	if (fn && n <= 0)
		snprintf(err, errlen, "no CUDA GPU is visible to this process");
	return n > 0 ? n : 0;
}

const struct ops *ops_open(const char *device, int threads, enum ops_prec prec, char *err,
			   size_t errlen)
{
	int64_t idx = 0;
	int want_cuda = strcmp(device, "cuda") == 0 ||
			(strncmp(device, "cuda:", 5) == 0 && num_int(device + 5, 0, 1023, &idx) == NUM_OK);
	if (strcmp(device, "cpu") == 0)
		return ops_cpu(threads);
	if (!want_cuda && strcmp(device, "auto") != 0) {
		snprintf(err, errlen, "--device %s: expected cpu, cuda, cuda:N (N from 0 to 1023) or auto", device);
		return NULL;
	}
	char why[512];
	void *h = load_plugin(why, sizeof why);
	if (h) {
		ops_cuda_fn fn = (ops_cuda_fn)dlsym(h, OPS_CUDA_SYMBOL);
		const struct ops *o = fn ? fn((int)idx, (int)prec, why, sizeof why) : NULL;
		if (!fn)
			snprintf(why, sizeof why, "train-cuda.so lacks %s", OPS_CUDA_SYMBOL);
		if (o)
			return o;
	}
	if (want_cuda) {
		snprintf(err, errlen, "--device %s: %s", device, why);
		return NULL;
	}
	return ops_cpu(threads);
}
