/*
 * watchdog.c - the watchdog thread (watchdog.h): beats from the training
 * loop, the heartbeat file, the bounds, and the report of a rank that
 * waited too long.
 *
 * Sections: the rules, the report, the thread, life cycle, beats.
 */
#include "runtime/watchdog.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* --- the rules --- */

double rt_watchdog_step_bound(double fixed_s, const double *recent, int n)
{
	double slowest = 0;
	int i;

	if (fixed_s > 0)
		return fixed_s;
	for (i = 0; i < n; i++)
		if (recent[i] > slowest)
			slowest = recent[i];
	return RT_WATCHDOG_FACTOR * slowest > RT_WATCHDOG_MIN_S ? RT_WATCHDOG_FACTOR * slowest
								  : RT_WATCHDOG_MIN_S;
}

/* The bound of a phase, from the spec's limits and this start's steps. */
static double phase_bound(const struct rt_watchdog *w, enum dt_phase phase)
{
	if (!w->enabled)
		return 0;
	switch (phase) {
	case DT_PHASE_STEP:
	case DT_PHASE_SYNC:
		/* the first step of a start sets up what later steps reuse */
		if (w->n_recent == 0)
			return w->timeout_s;
		return rt_watchdog_step_bound(w->step_fixed_s, w->recent, w->n_recent);
	case DT_PHASE_END:
		return 0;
	default:
		return w->timeout_s;
	}
}

/* --- the report --- */

/* Where a rank is, as one number: later steps and phases are larger. */
static double position(const struct dt_heartbeat *h)
{
	/* a step's own phase comes before the sync, eval and save after it */
	return (double)h->step * DT_PHASE_COUNT + (double)h->phase;
}

static size_t add(char *buf, size_t size, size_t at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static size_t add(char *buf, size_t size, size_t at, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (at >= size)
		return at;
	va_start(ap, fmt);
	n = vsnprintf(buf + at, size - at, fmt, ap);
	va_end(ap);
	return n < 0 ? at : at + (size_t)n;
}

#define MAX_NAMED 8 /* ranks named in a report; the rest are counted */

void rt_watchdog_verdict(const struct dt_heartbeat *me, const struct dt_heartbeat *peers,
			 const int *rc, double now, char *buf, size_t size)
{
	int r, named = 0, more = 0, pass;
	size_t at = 0;

	at = add(buf, size, at, "rank %d on node %s waited %.1f s in step %lld (%s; bound %.0f s)",
		 me->rank, me->node, now - me->since, me->step, dt_phase_name(me->phase), me->bound);
	if (!peers) {
		add(buf, size, at, "; whom it waits for is not known (no run_dir, no heartbeats); ending the job step");
		return;
	}
	/* pass 0: ranks without a heartbeat or silent; pass 1: ranks behind */
	for (pass = 0; pass < 2 && named + more == 0; pass++) {
		for (r = 0; r < me->world; r++) {
			const struct dt_heartbeat *h = &peers[r];
			bool hit;

			if (r == me->rank)
				continue;
			hit = pass == 0 ? rc[r] != 0 || dt_heartbeat_silent(h, now)
					: rc[r] == 0 && position(h) < position(me);
			if (!hit)
				continue;
			if (named == MAX_NAMED) {
				more++;
				continue;
			}
			at = add(buf, size, at, "%s", named ? "; " : "; waiting for ");
			named++;
			if (rc[r] != 0)
				at = add(buf, size, at, "rank %d: no heartbeat %s", r,
					 rc[r] == -ENOENT ? "(it never got this far)" : "(unreadable)");
			else if (pass == 0)
				at = add(buf, size, at, "rank %d on node %s: silent for %.1f s, last in step %lld (%s)",
					 r, h->node, now - h->at, h->step, dt_phase_name(h->phase));
			else
				at = add(buf, size, at, "rank %d on node %s: behind, in step %lld (%s) for %.1f s",
					 r, h->node, h->step, dt_phase_name(h->phase), now - h->since);
		}
	}
	if (more)
		at = add(buf, size, at, "; and %d more", more);
	if (named == 0)
		at = add(buf, size, at, "; no rank is silent or behind: a collective or a message that never completed");
	add(buf, size, at, "; ending the job step");
}

/* --- the thread --- */

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Rewrite the heartbeat file; a failed write is tried again next period. */
static void write_heartbeat(struct rt_watchdog *w, const struct dt_heartbeat *h)
{
	char line[DT_HEARTBEAT_BYTES + 1];
	ssize_t n;

	if (w->fd < 0 || dt_heartbeat_format(h, line, sizeof(line)))
		return;
	do
		n = pwrite(w->fd, line, DT_HEARTBEAT_BYTES, 0);
	while (n < 0 && errno == EINTR);
}

/* Past the bound: say whom this rank waits for, and end the process. Only
 * write(2) and _exit: the main thread may hold stdio's locks. */
static void fire(struct rt_watchdog *w, const struct dt_heartbeat *me)
{
	struct dt_heartbeat *peers = NULL;
	int *rc = NULL, r;
	char line[4096];
	size_t len;
	double now;

	if (w->dir) {
		peers = calloc((size_t)me->world, sizeof(*peers));
		rc = calloc((size_t)me->world, sizeof(*rc));
	}
	for (r = 0; peers && rc && r < me->world; r++)
		rc[r] = r == me->rank ? 0 : dt_heartbeat_read(w->dir, r, &peers[r]);
	now = dt_wall_s();
	len = (size_t)snprintf(line, sizeof(line), "dtrain-run: watchdog: ");
	rt_watchdog_verdict(me, peers && rc ? peers : NULL, rc, now, line + len, sizeof(line) - len - 1);
	len = strlen(line);
	line[len++] = '\n';
	while (write(STDERR_FILENO, line, len) < 0 && errno == EINTR)
		;
	_exit(DT_EXIT_HUNG);
}

/* The process itself did not run for a while (SIGSTOP and SIGCONT, a
 * paused machine): what it waited is not the others' fault, and they have
 * judged it already. Say so and start the phase's clock over. */
static void note_stopped(struct rt_watchdog *w, double gap)
{
	char line[256];
	int n;

	n = snprintf(line, sizeof(line),
		     "dtrain-run: rank %d on node %s did not run for %.1f s (stopped, or its machine paused)\n",
		     w->hb.rank, w->hb.node, gap);
	if (n > 0)
		while (write(STDERR_FILENO, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1) < 0 &&
		       errno == EINTR)
			;
	w->mono_since = mono_s();
}

static void *watch(void *arg)
{
	struct rt_watchdog *w = arg;
	double last_wake = mono_s(), period;

	pthread_mutex_lock(&w->mu);
	period = w->period;
	while (!w->stop) {
		struct dt_heartbeat h;
		double waited, now = mono_s();
		struct timespec until;

		if (now - last_wake > 3 * period + 1.0)
			note_stopped(w, now - last_wake);
		last_wake = now;
		w->hb.at = dt_wall_s();
		h = w->hb;
		waited = now - w->mono_since;
		pthread_mutex_unlock(&w->mu);

		write_heartbeat(w, &h);
		if (h.bound > 0 && waited > h.bound)
			fire(w, &h);

		period = dt_heartbeat_period(h.bound);
		pthread_mutex_lock(&w->mu);
		w->period = period;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += (time_t)period;
		until.tv_nsec += (long)((period - (double)(time_t)period) * 1e9);
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		while (!w->stop && !w->wake && pthread_cond_timedwait(&w->cv, &w->mu, &until) == 0)
			;
		w->wake = false;
	}
	w->hb.at = dt_wall_s();
	w->hb.phase = DT_PHASE_END;
	w->hb.bound = 0;
	write_heartbeat(w, &w->hb);
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* --- life cycle --- */

int rt_watchdog_start(struct rt_watchdog *w, const struct spec *s, int rank, int world,
		      const char *node, struct dt_err *err)
{
	pthread_condattr_t ca;
	sigset_t all, old;
	char path[4200];
	int rc = 0;

	memset(w, 0, sizeof(*w));
	w->fd = -1;
	w->enabled = s->recovery.watchdog;
	w->step_fixed_s = (double)s->recovery.step_timeout_seconds;
	w->timeout_s = (double)s->recovery.timeout_seconds;
	w->hb = (struct dt_heartbeat){ .rank = rank, .world = world, .pid = (long)getpid(),
				       .phase = DT_PHASE_START };
	snprintf(w->hb.node, sizeof(w->hb.node), "%s", node && *node ? node : "?");
	w->hb.start = w->hb.since = dt_wall_s();
	w->mono_since = mono_s();
	w->hb.bound = phase_bound(w, DT_PHASE_START);
	w->period = dt_heartbeat_period(w->hb.bound);

	if (s->run_dir) {
		if (asprintf(&w->dir, "%s/heartbeat", s->run_dir) < 0) {
			w->dir = NULL;
			return dt_err_add(err, "rank %d: out of memory for the heartbeat's path", rank), -ENOMEM;
		}
		if (mkdir(w->dir, 0755) < 0 && errno != EEXIST) {
			rc = -errno;
			dt_err_add(err, "%s: cannot create: %s", w->dir, strerror(errno));
			goto fail;
		}
		rc = dt_heartbeat_path(w->dir, rank, path, sizeof(path));
		if (rc) {
			dt_err_add(err, "%s: path too long for rank %d's heartbeat", w->dir, rank);
			goto fail;
		}
		w->fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (w->fd < 0) {
			rc = -errno;
			dt_err_add(err, "%s: cannot open: %s", path, strerror(errno));
			goto fail;
		}
	}
	pthread_mutex_init(&w->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	/* signals stay with the main thread (preempt.h) */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&w->thread, NULL, watch, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		dt_err_add(err, "rank %d: cannot start the watchdog thread: %s", rank, strerror(-rc));
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		goto fail;
	}
	w->running = true;
	return 0;
fail:
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	free(w->dir);
	w->dir = NULL;
	return rc;
}

void rt_watchdog_stop(struct rt_watchdog *w)
{
	if (!w->running)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	w->running = false;
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	free(w->dir);
	w->dir = NULL;
}

/* --- beats --- */

void rt_watchdog_beat(struct rt_watchdog *w, long long step, enum dt_phase phase)
{
	double mono = mono_s();

	if (!w || !w->running)
		return;
	pthread_mutex_lock(&w->mu);
	if (w->hb.phase == DT_PHASE_STEP) {
		w->recent[w->next_recent] = mono - w->mono_since;
		w->next_recent = (w->next_recent + 1) % RT_WATCHDOG_RECENT;
		if (w->n_recent < RT_WATCHDOG_RECENT)
			w->n_recent++;
	}
	w->hb.step = step;
	w->hb.phase = phase;
	w->hb.since = dt_wall_s();
	w->mono_since = mono;
	w->hb.bound = phase_bound(w, phase);
	/* a shorter period than the thread sleeps now: from now on */
	if (dt_heartbeat_period(w->hb.bound) < w->period) {
		w->wake = true;
		pthread_cond_signal(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
}
