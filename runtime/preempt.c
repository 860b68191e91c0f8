/*
 * preempt.c - the stop signals (preempt.h): a handler that only records the
 * first signal; the training loop acts on it at a step boundary.
 */
#include "runtime/preempt.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

static volatile sig_atomic_t stop_signal;

/* Only the first signal counts. Repeats are normal, not impatience: under
 * srun a task gets SIGTERM from slurmstepd and again through srun. */
static void on_signal(int sig)
{
	if (!stop_signal)
		stop_signal = sig;
}

static int signal_number(const char *name)
{
	static const struct { const char *name; int sig; } sigs[] = {
		{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "TERM", SIGTERM }, { "INT", SIGINT },
		{ "HUP", SIGHUP },   { "URG", SIGURG },   { "XCPU", SIGXCPU },
	};
	size_t i;

	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (!strcmp(name, sigs[i].name))
			return sigs[i].sig;
	return -1;
}

int rt_preempt_signals(const char *name)
{
	struct sigaction sa;
	int sig = name ? signal_number(name) : SIGTERM;

	if (sig < 0)
		return -EINVAL;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	if (sigaction(SIGTERM, &sa, NULL) < 0 || sigaction(sig, &sa, NULL) < 0)
		return -errno;
	return 0;
}

int rt_preempt_pending(void)
{
	return stop_signal;
}
