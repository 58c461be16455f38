/* slurm-pulse_logscan.c - the last iteration of a training log: Megatron's " iteration N/ M"
 * lines, a number too big for a count read as no iteration (not a wrapped, or undefined, value). */
#include "t.h"
#include "slurm-pulse/logscan.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char dir[] = "/tmp/lmtk-logscan.XXXXXX";

static int last_of(const char *text, long long *it)
{
	char path[128], err[256];
	time_t mt;
	snprintf(path, sizeof path, "%s/log", dir);
	FILE *f = fopen(path, "w");
	if (!f)
		return -9;
	fputs(text, f);
	fclose(f);
	int rc = logscan_last_iteration(path, it, &mt, err, sizeof err);
	unlink(path);
	return rc;
}

int main(void)
{
	long long it = -7;
	if (!mkdtemp(dir))
		return 3;
	T_CASE("last_iteration_line_wins") {
		T_ASSERT(last_of(" iteration       10/     100 | x\n iteration       20/     100 | y\n", &it) == 1);
		T_ASSERT(it == 20);
	}
	T_CASE("train_line_with_time_remaining_is_read") {
		/* train's whole line: Megatron's fields, then lmtk's MFU and time remaining */
		T_ASSERT(last_of(" iteration      299/  300000 | consumed samples:       612352 | consumed tokens:"
				 "   1254096896 | elapsed time per iteration (s): 104.87 | learning rate: 1.176E-05 |"
				 " global batch size:  2048 | lm loss: 2.722675E+00 | grad norm: 0.312 | num zeros: 0.0"
				 " | number of skipped iterations:   0 | number of nan iterations:   0 | samples per"
				 " second: 19.529 | TFLOPs: 149.21 | MFU: 47.82% | time remaining: 363 days, 22:50:48 |\n",
				 &it) == 1);
		T_ASSERT(it == 299);
	}
	T_CASE("overflowing_iteration_is_no_iteration") {
		it = -7;
		T_ASSERT(last_of(" iteration 99999999999999999999999 / 100 | x\n", &it) == 0);
		T_ASSERT(it == -7);
		T_ASSERT(last_of(" iteration 5/ 100\n iteration 99999999999999999999999 / 100\n", &it) == 1);
		T_ASSERT(it == 5);
	}
	T_CASE("largest_count_is_read") {
		T_ASSERT(last_of(" iteration 9223372036854775807/ 9223372036854775807\n", &it) == 1);
		T_ASSERT(it == 9223372036854775807LL);
		T_ASSERT(last_of(" iteration 9223372036854775808/ 1\n", &it) == 0);
	}
	rmdir(dir);
	T_DONE();
}
