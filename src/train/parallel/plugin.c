/* plugin - see plugin.h. */
#include "train/parallel/plugin.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void *plugin_open(const char *file, const char *env, int global, int *missing, char *err,
		  size_t errlen)
{
	char exe[PATH_MAX], tries[3][PATH_MAX + 64];
	int n = 0;
	const char *var = getenv(env);
	ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (var && *var)
		snprintf(tries[n++], sizeof tries[0], "%s", var);
	if (len > 0) {
		exe[len] = 0;
		char *dir = dirname(exe);
		snprintf(tries[n++], sizeof tries[0], "%s/../lib/lmtk/%s", dir, file);
		snprintf(tries[n++], sizeof tries[0], "%s/../build/lib/lmtk/%s", dir, file);
	}
	*missing = 0;
	for (int i = 0; i < n; i++) {
		if (access(tries[i], F_OK) != 0)
			continue;
		void *h = dlopen(tries[i], RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
		if (!h)
			snprintf(err, errlen, "cannot load %.*s: %.300s", 200, tries[i], dlerror());
		return h;
	}
	*missing = 1;
	snprintf(err, errlen, "%s is not found (set %s to its path)", file, env);
	return NULL;
}
