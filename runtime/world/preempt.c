/*
 * preempt.c - the stop signals (preempt.h): a handler that only records the
 * first signal; the training loop acts on it at a step boundary. The
 * deadline of DTRAIN_STOP_AT counts as the spec's signal once it passes.
 */
#include "runtime/world/preempt.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t stop_signal;
/* DTRAIN_STOP_AT: the batch script's Unix time to stop by, lead_seconds
 * before the job's end (0: none), and the signal that stop stands for */
static double stop_at;
static int deadline_sig;
static bool by_deadline;

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
	const char *at = getenv("DTRAIN_STOP_AT");
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
	deadline_sig = sig;
	stop_at = 0;
	if (at && *at) {
		char *end;
		double t = strtod(at, &end);

		if (*end == '\0' && t > 0)
			stop_at = t;
	}
	return 0;
}

int rt_preempt_pending(void)
{
	struct timespec ts;

	if (!stop_signal && stop_at > 0 && clock_gettime(CLOCK_REALTIME, &ts) == 0 &&
	    (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 >= stop_at) {
		by_deadline = true;
		stop_signal = deadline_sig;
	}
	return stop_signal;
}

bool rt_preempt_by_deadline(void)
{
	return by_deadline;
}
