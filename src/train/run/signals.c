/* signals - see signals.h. */
#include "train/run/signals.h"

#include <signal.h>
#include <unistd.h>

#include "units.h"

static volatile sig_atomic_t got_signal;
static void on_signal(int sig) { got_signal = sig; }

void signals_install(void)
{
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
}

int signals_kill_switch(const struct run *r)
{
	return r->a->kill_switch_path && access(r->a->kill_switch_path, F_OK) == 0;
}

int signals_stop_code(const struct run *r, double t_start)
{
	const struct train_args *a = r->a;
	if (got_signal)
		return 3;
	if (signals_kill_switch(r))
		return 2;
	if (a->exit_duration_mins > 0 && units_now() - t_start > a->exit_duration_mins * 60)
		return 1;
	return 0;
}

const char *signals_stop_why(const struct run *r, int code, int64_t it)
{
	const struct train_args *a = r->a;
	if (code >= 3)
		return got_signal == SIGUSR1 ? "SIGUSR1" : got_signal == SIGTERM ? "SIGTERM" :
		       got_signal == SIGINT ? "SIGINT" : "a signal on another rank";
	if (code == 2)
		return "the kill switch";
	if (code == 1)
		return "--exit-duration-in-mins";
	if (a->exit_interval > 0 && it % a->exit_interval == 0)
		return "--exit-interval";
	return NULL;
}

const char *signals_stop_reason(struct run *r, double t_start, int64_t it)
{
	/* decisions every rank takes together: a signal or the kill switch seen by one, the
	 * longest elapsed time of all (Megatron's max over ranks): the codes' maximum */
	int code = (int)dist_max(&r->dist, DIST_WORLD, signals_stop_code(r, t_start));
	return signals_stop_why(r, code, it);
}
