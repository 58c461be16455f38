/* stop - see stop.h. */
#include "ckpt/stop.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = sig;
}

void stop_catch(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

int stop_requested(void)
{
	return stop != 0;
}
