/* fuzz: the "name value" configuration files of fs-watchdog and slurm-pulse (src/lib/opt.c
 * opt_parse_file), with values read as those programs read them (src/lib/units.c). */
#include "fuzz.h"
#include "opt.h"
#include "units.h"

static int handle(void *ctx, int key, const char *arg, char *err, size_t errlen)
{
	unsigned long long b;
	long s;
	double p;
	(void)ctx;
	if ((key == 1 && units_size(arg, &b) < 0) || (key == 2 && units_duration(arg, &s) < 0) ||
	    (key == 3 && units_percent(arg, &p) < 0))
		return snprintf(err, errlen, "bad value '%s'", arg), -1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct opt opts[] = {
		{"min-free", 1, "SIZE", "size"}, {"interval", 2, "TIME", "duration"},
		{"max-used", 3, "PCT", "percent"}, {"path", 4, "DIR", "text"}, {"quiet", 5, NULL, "flag"},
		{0}};
	struct optgroup groups[] = {{opts, handle, NULL, NULL}, {0}};
	struct optspec spec = {"[options]", "fuzz", groups, NULL, 0};
	static const char *const deny[] = {"config", NULL};
	char err[2048];
	opt_parse_file(&spec, fuzz_file("watchdog.conf", data, size), deny, err, sizeof err);
	return 0;
}
