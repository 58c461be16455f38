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

const char *signals_stop_reason(struct run *r, double t_start, int64_t it)
{
	const struct train_args *a = r->a;
	const char *why_stop = NULL;
	/* decisions every rank takes together: a signal or the kill switch seen by one, the
	 * longest elapsed time of all (Megatron's max over ranks) */
	if (dist_any(&r->dist, DIST_WORLD, got_signal != 0))
		why_stop = got_signal == SIGUSR1 ? "SIGUSR1" : got_signal == SIGTERM ? "SIGTERM" :
			   got_signal == SIGINT ? "SIGINT" : "a signal on another rank";
	else if (dist_any(&r->dist, DIST_WORLD, signals_kill_switch(r)))
		why_stop = "the kill switch";
	else if (a->exit_duration_mins > 0 &&
		 dist_max(&r->dist, DIST_WORLD, units_now() - t_start) > a->exit_duration_mins * 60)
		why_stop = "--exit-duration-in-mins";
	else if (a->exit_interval > 0 && it % a->exit_interval == 0)
		why_stop = "--exit-interval";
	return why_stop;
}
