/* energy - see energy.h.  CodeCarbon's rules (codecarbon/external/hardware.py, output.py) are
 * followed for what is measured and how rows are written; its code is not used. */
#include "train/run/energy.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "file.h"
#include "msg.h"
#include "units.h"

#define RAM_W_PER_GB (3.0 / 8.0)      /* CodeCarbon: 3 W per 8 GB */
#define TDP_SHARE 0.5                 /* CodeCarbon's constant mode: half the TDP */
#define J_PER_KWH 3.6e6

static const char header[] =
	"timestamp,project_name,run_id,duration,emissions,emissions_rate,cpu_power,gpu_power,"
	"ram_power,cpu_energy,gpu_energy,ram_energy,energy_consumed,country_name,country_iso_code,"
	"region,cloud_provider,cloud_region,os,python_version,cpu_count,cpu_model,gpu_count,gpu_model,"
	"longitude,latitude,ram_total_size,tracking_mode,on_cloud,cpu_energy_source\n";

static int read_u64(const char *path, uint64_t *v)
{
	FILE *f = fopen(path, "r");
	unsigned long long x;
	int ok = f && fscanf(f, "%llu", &x) == 1;
	if (f)
		fclose(f);
	if (ok)
		*v = x;
	return ok ? 0 : -1;
}

/* The package domains: intel-rapl:N (top level, name "package-N"), each readable. */
static void find_rapl(struct energy *e)
{
	const char *root = getenv("LMTK_POWERCAP_DIR");
	if (!root || !*root)
		root = "/sys/class/powercap";
	DIR *d = opendir(root);
	struct dirent *de;
	char names[ENERGY_MAX_RAPL][64];
	int n = 0;
	if (!d)
		return;
	while ((de = readdir(d)) && n < ENERGY_MAX_RAPL) {
		int a, len = 0;
		/* "intel-rapl:0" is a package; "intel-rapl:0:1" is a domain inside it */
		if (sscanf(de->d_name, "intel-rapl:%d%n", &a, &len) == 1 && de->d_name[len] == '\0')
			snprintf(names[n++], sizeof names[0], "%.60s", de->d_name);
	}
	closedir(d);
	for (int i = 0; i < n; i++) {
		char p[512];
		uint64_t v, max;
		snprintf(p, sizeof p, "%.400s/%.60s/max_energy_range_uj", root, names[i]);
		if (read_u64(p, &max) < 0 || max == 0)
			continue;
		snprintf(p, sizeof p, "%.400s/%.60s/energy_uj", root, names[i]);
		if (read_u64(p, &v) < 0)   /* root-only on recent kernels: then the TDP */
			continue;
		memcpy(e->rapl[e->nrapl], p, sizeof e->rapl[0]);   /* p is at most 480 bytes */
		e->rapl_last[e->nrapl] = v;
		e->rapl_max[e->nrapl] = max;
		e->nrapl++;
	}
}

/* NVML, only what is needed, looked up at run time */
typedef int (*nvml_init_f)(void);
typedef int (*nvml_handle_f)(unsigned, void **);
typedef int (*nvml_energy_f)(void *, unsigned long long *);
typedef int (*nvml_name_f)(void *, char *, unsigned);

static void open_nvml(struct energy *e, int index)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return;
	nvml_init_f init = (nvml_init_f)dlsym(h, "nvmlInit_v2");
	nvml_handle_f handle = (nvml_handle_f)dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
	nvml_energy_f energy = (nvml_energy_f)dlsym(h, "nvmlDeviceGetTotalEnergyConsumption");
	nvml_name_f name = (nvml_name_f)dlsym(h, "nvmlDeviceGetName");
	unsigned long long mj;
	void *dev;
	if (!init || !handle || !energy || init() != 0 || handle((unsigned)index, &dev) != 0 ||
	    energy(dev, &mj) != 0) {
		dlclose(h);
		return;
	}
	if (name)
		name(dev, e->gpu_model, sizeof e->gpu_model);
	e->nvml = h;
	e->gpu = dev;
	e->gpu_mj_last = mj;
}

static void cpu_model(struct energy *e)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];
	e->cpu_count = (int)sysconf(_SC_NPROCESSORS_ONLN);
	snprintf(e->cpu_model, sizeof e->cpu_model, "unknown");
	while (f && fgets(line, sizeof line, f))
		if (strncmp(line, "model name", 10) == 0) {
			char *c = strchr(line, ':');
			if (c) {
				c += 1 + (c[1] == ' ');
				c[strcspn(c, "\n")] = '\0';
				snprintf(e->cpu_model, sizeof e->cpu_model, "%s", c);
			}
			break;
		}
	if (f)
		fclose(f);
	for (char *p = e->cpu_model; *p; p++)   /* a CSV field */
		if (*p == ',' || *p == '"')
			*p = ' ';
}

int energy_open(struct energy *e, const char *dir, int rank, const char *run_id, double intensity,
		double tdp, int gpu_index, char *err, size_t errlen)
{
	struct stat sb;
	memset(e, 0, sizeof *e);
	char why[400];
	if (file_mkdirs(dir, why, sizeof why) < 0)
		return errf(err, errlen, "--codecarbon-dir %s: %s", dir, why);
	snprintf(e->path, sizeof e->path, "%s/emissions-%03d.csv", dir, rank);
	int fresh = stat(e->path, &sb) < 0 || sb.st_size == 0;
	int fd = open(e->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return errf(err, errlen, "--codecarbon-dir: %s: %s", e->path, strerror(errno));
	if (fresh && write(fd, header, sizeof header - 1) != (ssize_t)(sizeof header - 1)) {
		close(fd);
		return errf(err, errlen, "--codecarbon-dir: %s: %s", e->path, strerror(errno));
	}
	close(fd);
	e->project = "codecarbon";   /* CodeCarbon's default project name */
	e->run_id = run_id;
	e->intensity = intensity;
	e->tdp = tdp;
	e->ram_gb = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE) / 1e9;
	e->ram_w = e->ram_gb * RAM_W_PER_GB;
	e->gpu_index = gpu_index;
	find_rapl(e);
	if (gpu_index >= 0)
		open_nvml(e, gpu_index);
	cpu_model(e);
	e->t0 = e->t_last = units_now();
	return 0;
}

const char *energy_cpu_source(const struct energy *e)
{
	static char s[96];
	if (e->nrapl)
		snprintf(s, sizeof s, "RAPL (%d package%s)", e->nrapl, e->nrapl > 1 ? "s" : "");
	else
		snprintf(s, sizeof s, "TDP %g W x %g (RAPL not readable)", e->tdp, TDP_SHARE);
	return s;
}

void energy_poll(struct energy *e)
{
	for (int i = 0; i < e->nrapl; i++) {
		uint64_t v;
		if (read_u64(e->rapl[i], &v) < 0)
			continue;
		/* the counter wraps at max_energy_range_uj */
		uint64_t d = v >= e->rapl_last[i] ? v - e->rapl_last[i] : e->rapl_max[i] - e->rapl_last[i] + v;
		e->rapl_j += (double)d / 1e6;
		e->rapl_last[i] = v;
	}
}

int energy_log(struct energy *e, char *err, size_t errlen)
{
	double now = units_now(), dt = now - e->t_last;
	double cpu_j = 0, gpu_j = 0;
	if (e->nrapl) {
		energy_poll(e);
		cpu_j = e->rapl_j;
		e->rapl_j = 0;
	} else {
		cpu_j = e->tdp * TDP_SHARE * dt;
	}
	if (e->gpu) {
		unsigned long long mj;
		nvml_energy_f energy = (nvml_energy_f)dlsym(e->nvml, "nvmlDeviceGetTotalEnergyConsumption");
		if (energy && energy(e->gpu, &mj) == 0) {
			gpu_j = (double)(mj - e->gpu_mj_last) / 1e3;
			e->gpu_mj_last = mj;
		}
	}
	double ram_j = e->ram_w * dt;
	e->cpu_w = dt > 0 ? cpu_j / dt : 0;
	e->gpu_w = dt > 0 ? gpu_j / dt : 0;
	e->cpu_kwh += cpu_j / J_PER_KWH;
	e->gpu_kwh += gpu_j / J_PER_KWH;
	e->ram_kwh += ram_j / J_PER_KWH;
	e->t_last = now;

	double duration = now - e->t0, kwh = e->cpu_kwh + e->gpu_kwh + e->ram_kwh;
	double emissions = kwh * e->intensity / 1000.0;   /* kg */
	double dd = duration - e->last_duration;
	double rate = dd > 0 ? (emissions - e->last_emissions) / dd : 0;
	e->last_duration = duration;
	e->last_emissions = emissions;

	char ts[40], row[2048];
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
	int n = snprintf(row, sizeof row,
			 "%s,%s,%s,%.6f,%.9g,%.9g,%.6g,%.6g,%.6g,%.9g,%.9g,%.9g,%.9g,,,,,,Linux,,%d,%s,%d,%s,"
			 ",,%.3f,machine,N,%s\n", ts, e->project, e->run_id, duration, emissions, rate,
			 e->cpu_w, e->gpu_w, e->ram_w, e->cpu_kwh, e->gpu_kwh, e->ram_kwh, kwh,
			 e->cpu_count, e->cpu_model, e->gpu ? 1 : 0, e->gpu ? e->gpu_model : "",
			 e->ram_gb, e->nrapl ? "rapl" : "tdp");
	int fd = open(e->path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0)
		return errf(err, errlen, "--codecarbon-dir: %s: %s", e->path, strerror(errno));
	ssize_t w = write(fd, row, (size_t)n);   /* one write: a row is whole or absent */
	int saved = errno;
	close(fd);
	if (w != n)
		return errf(err, errlen, "--codecarbon-dir: %s: %s", e->path,
			    w < 0 ? strerror(saved) : "short write");
	return 0;
}

void energy_close(struct energy *e)
{
	if (e->nvml)
		dlclose(e->nvml);
	e->nvml = e->gpu = NULL;
}
