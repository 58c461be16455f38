/* ops - choosing a backend.  The CPU backend is linked in; the CUDA backend is a plugin
 * (train-cuda.so, beside the binary or in ../lib/lmtk/, or $LMTK_CUDA_PLUGIN) loaded with
 * dlopen only when a GPU is asked for or --device auto probes for one, so train runs on
 * machines without any CUDA library. */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train/ops.h"

static void *load_plugin(char *err, size_t errlen)
{
	char exe[PATH_MAX], tries[3][PATH_MAX + 64];
	int n = 0;
	const char *env = getenv("LMTK_CUDA_PLUGIN");
	ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (env && *env)
		snprintf(tries[n++], sizeof tries[0], "%s", env);
	if (len > 0) {
		exe[len] = 0;
		char *dir = dirname(exe);
		snprintf(tries[n++], sizeof tries[0], "%s/train-cuda.so", dir);
		snprintf(tries[n++], sizeof tries[0], "%s/../lib/lmtk/train-cuda.so", dir);
	}
	const char *why = "not found";
	for (int i = 0; i < n; i++) {
		if (access(tries[i], F_OK) != 0)
			continue;
		void *h = dlopen(tries[i], RTLD_NOW | RTLD_LOCAL);
		if (h)
			return h;
		snprintf(err, errlen, "cannot load the CUDA backend %.*s: %.300s", 150, tries[i],
			 dlerror());
		return NULL;
	}
	snprintf(err, errlen, "the CUDA backend (train-cuda.so) is %s: this build has no CUDA "
		 "support (build on a machine with nvcc, or use --device cpu)", why);
	return NULL;
}

const struct ops *ops_open(const char *device, int threads, char *err, size_t errlen)
{
	int want_cuda = strcmp(device, "cuda") == 0 || strncmp(device, "cuda:", 5) == 0;
	if (strcmp(device, "cpu") == 0)
		return ops_cpu(threads);
	if (!want_cuda && strcmp(device, "auto") != 0) {
		snprintf(err, errlen, "--device %s: expected cpu, cuda, cuda:N or auto", device);
		return NULL;
	}
	char why[512];
	void *h = load_plugin(why, sizeof why);
	if (h) {
		ops_cuda_fn fn = (ops_cuda_fn)dlsym(h, OPS_CUDA_SYMBOL);
		int idx = strncmp(device, "cuda:", 5) == 0 ? atoi(device + 5) : 0;
		const struct ops *o = fn ? fn(idx, why, sizeof why) : NULL;
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
