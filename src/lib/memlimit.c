/* memlimit - see memlimit.h. */
#include "memlimit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_LIMIT ((uint64_t)1 << 62)   /* v1 says "no limit" as about 2^63 (page-rounded) */

/* A file holding one unsigned number (or "max"): 0 and *v, or -1 (absent, not a number) */
static int read_u64(const char *path, uint64_t *v)
{
	char buf[64], *end;
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (strcmp(buf, "max") == 0) {
		*v = UINT64_MAX;
		return 0;
	}
	if (buf[0] < '0' || buf[0] > '9')
		return -1;
	errno = 0;
	unsigned long long x = strtoull(buf, &end, 10);
	if (*end || errno)
		return -1;
	*v = x;
	return 0;
}

/* The mount point and mount root of the cgroup hierarchy: v2 (controller NULL) or the v1 one
 * with `controller` among its super options.  0, or -1. */
static int find_mount(const char *controller, char *point, size_t plen, char *root, size_t rlen)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096];
	int found = -1;
	if (!f)
		return -1;
	while (found < 0 && fgets(line, sizeof line, f)) {
		char mroot[1024], mpoint[1024], fstype[64], opts[1024];
		const char *dash = strstr(line, " - ");
		if (!dash || sscanf(line, "%*s %*s %*s %1023s %1023s", mroot, mpoint) != 2 ||
		    sscanf(dash + 3, "%63s %*s %1023s", fstype, opts) != 2)
			continue;
		if (controller ? strcmp(fstype, "cgroup") != 0 : strcmp(fstype, "cgroup2") != 0)
			continue;
		if (controller) {
			int has = 0;
			for (char *t = strtok(opts, ","); t && !has; t = strtok(NULL, ","))
				has = strcmp(t, controller) == 0;
			if (!has)
				continue;
		}
		snprintf(point, plen, "%s", mpoint);
		snprintf(root, rlen, "%s", mroot);
		found = 0;
	}
	fclose(f);
	return found;
}

/* This process's cgroup path in the v1 hierarchy of `controller`, or v2's (controller NULL) */
static int own_cgroup(const char *controller, char *path, size_t len)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[4096];
	int found = -1;
	if (!f)
		return -1;
	while (found < 0 && fgets(line, sizeof line, f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		line[strcspn(line, "\n")] = '\0';
		*c2 = '\0';
		const char *ctrls = c1 + 1, *p = c2 + 1;
		int match = 0;
		if (!controller)
			match = strncmp(line, "0:", 2) == 0 && !*ctrls;
		else {
			char buf[256];
			snprintf(buf, sizeof buf, "%s", ctrls);
			for (char *t = strtok(buf, ","); t && !match; t = strtok(NULL, ","))
				match = strcmp(t, controller) == 0;
		}
		if (match && *p == '/') {
			snprintf(path, len, "%s", p);
			found = 0;
		}
	}
	fclose(f);
	return found;
}

/* The least (limit - usage) over the cgroup and its ancestors up to the mount's root. */
static int cgroup_room(int v2, uint64_t *room, char *what, size_t whatlen)
{
	const char *limit_file = v2 ? "memory.max" : "memory.limit_in_bytes",
		   *usage_file = v2 ? "memory.current" : "memory.usage_in_bytes";
	char point[1024], root[1024], cg[2048], dir[4096], f[4200];
	if (find_mount(v2 ? NULL : "memory", point, sizeof point, root, sizeof root) < 0 ||
	    own_cgroup(v2 ? NULL : "memory", cg, sizeof cg) < 0)
		return -1;
	/* the path below the mount: the cgroup's path less the mount's root */
	const char *rel = cg;
	size_t rl = strlen(root);
	if (strcmp(root, "/") != 0) {
		if (strncmp(cg, root, rl) != 0 || (cg[rl] && cg[rl] != '/'))
			return -1;   /* our cgroup is not under this mount (another namespace's) */
		rel = cg + rl;
	}
	int any = 0;
	char rel_buf[2048];
	snprintf(rel_buf, sizeof rel_buf, "%s", rel);
	for (;;) {
		uint64_t lim, use;
		snprintf(dir, sizeof dir, "%s%s", point, rel_buf);
		snprintf(f, sizeof f, "%s/%s", dir, limit_file);
		if (read_u64(f, &lim) == 0 && lim < NO_LIMIT) {
			snprintf(f, sizeof f, "%s/%s", dir, usage_file);
			if (read_u64(f, &use) < 0)
				use = 0;
			uint64_t r = use < lim ? lim - use : 0;
			if (!any || r < *room) {
				*room = r;
				if (what)
					snprintf(what, whatlen, "cgroup %s %s of %.400s (%.2f GiB, %.2f GiB in use)",
						 v2 ? "v2" : "v1", limit_file, *rel_buf ? rel_buf : "/",
						 lim / 1073741824.0, use / 1073741824.0);
			}
			any = 1;
		}
		char *slash = strrchr(rel_buf, '/');
		if (!slash)
			break;   /* the mount's root was the last read */
		*slash = '\0';   /* the parent; "" is the mount's root */
	}
	return any ? 0 : -1;
}

static int meminfo_available(uint64_t *avail)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[256];
	int found = -1;
	if (!f)
		return -1;
	while (found < 0 && fgets(line, sizeof line, f)) {
		unsigned long long kb;
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1 && kb < (1ULL << 52)) {
			*avail = (uint64_t)kb * 1024;
			found = 0;
		}
	}
	fclose(f);
	return found;
}

int memlimit_available(uint64_t *avail, char *what, size_t whatlen)
{
	uint64_t best = 0, r;
	char w[512];
	int any = 0;
	if (meminfo_available(&r) == 0) {
		best = r;
		any = 1;
		if (what)
			snprintf(what, whatlen, "MemAvailable in /proc/meminfo (%.2f GiB)",
				 r / 1073741824.0);
	}
	for (int v2 = 0; v2 <= 1; v2++)
		if (cgroup_room(v2, &r, w, sizeof w) == 0 && (!any || r < best)) {
			best = r;
			any = 1;
			if (what)
				snprintf(what, whatlen, "%s", w);
		}
	if (!any)
		return -1;
	*avail = best;
	return 0;
}
