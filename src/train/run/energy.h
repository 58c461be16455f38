/* energy - --codecarbon-dir: the energy a run used and its emissions, in CodeCarbon's CSV.
 *
 * BigScience's Megatron-DeepSpeed gives each rank a CodeCarbon OfflineEmissionsTracker writing
 * DIR/emissions-RRR.csv (RRR: the rank).  lmtk writes the same file, with CodeCarbon's columns
 * (its EmissionsData: timestamp, project_name, run_id, duration, emissions, emissions_rate,
 * cpu_power, gpu_power, ram_power, cpu_energy, gpu_energy, ram_energy, energy_consumed, ...,
 * tracking_mode, on_cloud) and CodeCarbon's units (seconds, kg CO2eq, W, kWh), plus one column
 * of its own at the end, cpu_energy_source, saying how the CPU was measured.  A row is appended
 * at each log interval and at exit; every row is cumulative since the start, as CodeCarbon's.
 *
 *   CPU  RAPL: the package domains under /sys/class/powercap (intel-rapl:N/energy_uj, counter
 *        wrap-around handled with max_energy_range_uj), when readable; else CodeCarbon's
 *        constant mode: half the TDP (--cpu-tdp, default 85 W, CodeCarbon's default).
 *   GPU  NVML's total energy counter of this rank's GPU, libnvidia-ml loaded at run time (never a
 *        build dependency); 0 on the CPU backend or without NVML.
 *   RAM  CodeCarbon's rule: 3 W per 8 GB of the machine's memory.
 *   emissions = energy (kWh) x --carbon-intensity (g/kWh, default 475: CodeCarbon's world
 *        average when the grid is unknown) / 1000.
 *
 * LMTK_POWERCAP_DIR replaces /sys/class/powercap (tests). */
#ifndef TRAIN_ENERGY_H
#define TRAIN_ENERGY_H

#include <stddef.h>
#include <stdint.h>

#define ENERGY_MAX_RAPL 16

struct energy {
	char path[4200];
	const char *project, *run_id;
	double t0, t_last, intensity;       /* g CO2eq per kWh */
	double cpu_kwh, gpu_kwh, ram_kwh;
	double cpu_w, gpu_w, ram_w, ram_gb, tdp;
	int nrapl;                          /* 0: the TDP fallback */
	char rapl[ENERGY_MAX_RAPL][512];
	uint64_t rapl_last[ENERGY_MAX_RAPL], rapl_max[ENERGY_MAX_RAPL];
	double rapl_j;                      /* read by energy_poll since the last row */
	void *nvml, *gpu;                   /* dlopen handle, nvmlDevice_t */
	int gpu_index;
	uint64_t gpu_mj_last;
	char cpu_model[256], gpu_model[96];
	int cpu_count;
	double last_emissions, last_duration;
};

/* Opens DIR/emissions-RRR.csv (creating DIR; a header when the file is new) for this rank;
 * gpu_index < 0: no GPU.  0, or -1 + err. */
int energy_open(struct energy *e, const char *dir, int rank, const char *run_id, double intensity,
		double tdp, int gpu_index, char *err, size_t errlen);

/* How the CPU is measured, for the start-up line: "RAPL (2 packages)" or "TDP 85 W x 0.5". */
const char *energy_cpu_source(const struct energy *e);

/* Reads the RAPL counters and keeps their increase for the next row.  A package counter wraps
 * (at max_energy_range_uj: minutes at full power on real hardware, seconds in the tests), and
 * one that wrapped twice between two reads loses a whole range, so train polls every iteration,
 * not only at the log interval's rows. */
void energy_poll(struct energy *e);

/* Measures since the last call and appends one row.  0, or -1 + err (the file could not be
 * written: the caller warns and stops logging energy). */
int energy_log(struct energy *e, char *err, size_t errlen);

void energy_close(struct energy *e);

#endif
