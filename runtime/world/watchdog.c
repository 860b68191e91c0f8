/*
 * watchdog.c - the watchdog thread (watchdog.h): beats from the training
 * loop, the heartbeat file, the bounds, and the report of a rank that
 * waited too long.
 *
 * Sections: the rules, the report, the thread, life cycle, beats.
 */
#include "runtime/world/watchdog.h"
#include "runtime/world/waits.h"
#include "base/clock.h"
#include "base/io.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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

/* The bound of a phase, from the spec's limits and this start's steps;
 * never under RT_WATCHDOG_FLOOR_S, so that a peer stopped when the phase
 * began is silent (dt_heartbeat_silent) by the time the bound passes. */
static double phase_bound(const struct rt_watchdog *w, enum dt_phase phase)
{
	double b;

	if (!w->enabled)
		return 0;
	switch (phase) {
	case DT_PHASE_STEP:
	case DT_PHASE_SYNC:
		/* the first step of a start sets up what later steps reuse; the
		 * automatic bound needs a step measured */
		if (w->steps_begun <= 1 || (w->step_fixed_s <= 0 && w->n_recent == 0))
			b = w->timeout_s;
		else
			b = rt_watchdog_step_bound(w->step_fixed_s, w->recent, w->n_recent);
		break;
	case DT_PHASE_END:
		return 0;
	default:
		b = w->timeout_s;
	}
	return b > 0 && b < RT_WATCHDOG_FLOOR_S ? RT_WATCHDOG_FLOOR_S : b;
}

/* --- the report --- */

/* Where a rank is, as one number: later steps and phases are larger. A
 * step's phases come in the loop's order: the step, its evaluation, the
 * agreement on a stop signal, its save (train.c). */
static double position(const struct dt_heartbeat *h)
{
	static const int order[DT_PHASE_COUNT] = {
		[DT_PHASE_START] = 0, [DT_PHASE_STEP] = 1, [DT_PHASE_EVAL] = 2,
		[DT_PHASE_SYNC] = 3,  [DT_PHASE_SAVE] = 4, [DT_PHASE_END] = 5,
	};

	return (double)h->step * DT_PHASE_COUNT + order[h->phase];
}

/* Inside a blocking MPI call (waits.h), as the heartbeat says. */
static bool in_wait(const struct dt_heartbeat *h)
{
	return h->waits_begun >= 0 && h->waits_begun > h->waits_ended;
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
	/* pass 0: ranks without a heartbeat or silent; pass 1: ranks behind;
	 * pass 2, while this rank is inside a wait on others: ranks as far as
	 * it but in no wait, which never reached the one it is in (waits.h) */
	for (pass = 0; pass < 3 && named + more == 0; pass++) {
		for (r = 0; r < me->world; r++) {
			const struct dt_heartbeat *h = &peers[r];
			bool hit;

			if (r == me->rank)
				continue;
			hit = pass == 0 ? rc[r] != 0 || dt_heartbeat_silent(h, now)
			      : pass == 1 ? rc[r] == 0 && position(h) < position(me)
					  : rc[r] == 0 && in_wait(me) && !in_wait(h) &&
						    h->waits_begun >= 0 && position(h) == position(me);
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
					 rc[r] == -ENOENT ? "(it never got this far)"
					 : rc[r] == -ESTALE ? "in this start (it never got this far)"
							    : "(unreadable)");
			else if (pass == 0)
				at = add(buf, size, at, "rank %d on node %s: silent for %.1f s, last in step %lld (%s)",
					 r, h->node, now - h->at, h->step, dt_phase_name(h->phase));
			else if (pass == 1)
				at = add(buf, size, at, "rank %d on node %s: behind, in step %lld (%s) for %.1f s",
					 r, h->node, h->step, dt_phase_name(h->phase), now - h->since);
			else
				at = add(buf, size, at, "rank %d on node %s: alive in step %lld (%s) but in no wait on the others (%lld waits done; this rank is in its wait %lld): it never reached the collective the others wait in",
					 r, h->node, h->step, dt_phase_name(h->phase), h->waits_ended,
					 me->waits_begun);
		}
	}
	if (more)
		at = add(buf, size, at, "; and %d more", more);
	if (named == 0 && !in_wait(me) && me->waits_begun >= 0) {
		int waiting = 0;

		for (r = 0; r < me->world; r++)
			waiting += r != me->rank && rc[r] == 0 && in_wait(&peers[r]) &&
				   position(&peers[r]) == position(me);
		if (waiting) {
			at = add(buf, size, at, "; this rank is in no wait while %d rank%s at its step wait%s in one: it is the one late (busy outside MPI)",
				 waiting, waiting > 1 ? "s" : "", waiting > 1 ? "" : "s");
			named = 1;
		}
	}
	if (named == 0)
		at = add(buf, size, at, "; no rank is silent or behind: a collective or a message that never completed");
	add(buf, size, at, "; ending the job step");
}

/* --- the threads ---
 * The judge checks the bound and fires; the writer rewrites the heartbeat
 * file. Apart, so that a write stuck on a hung file system (the likeliest
 * cause of hung ranks) stops only the heartbeats, which makes this rank
 * silent to the others, and not the judge. Both sleep a period on w->cv;
 * a beat that shortens the period bumps w->gen to wake them. */

/* Sleep the period of the current phase, or until stopped or woken by a
 * beat (w->gen moved past *seen). Called and returns with w->mu held. */
static void nap(struct rt_watchdog *w, unsigned *seen)
{
	struct timespec until;
	double period = dt_heartbeat_period(w->hb.bound);

	if (period < w->period)
		w->period = period; /* the shortest either thread sleeps */
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += (time_t)period;
	until.tv_nsec += (long)((period - (double)(time_t)period) * 1e9);
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	while (!w->stop && w->gen == *seen && pthread_cond_timedwait(&w->cv, &w->mu, &until) == 0)
		;
	*seen = w->gen;
	w->period = dt_heartbeat_period(w->hb.bound);
}

/* A line to stderr, unless stderr has not taken anything for a second (a
 * pipe nobody reads: srun stuck on a hung file system). A write to a file
 * that blocks all the same is what the report's timer is for. */
static void say(const char *line, size_t len)
{
	struct pollfd p = { .fd = STDERR_FILENO, .events = POLLOUT };

	if (poll(&p, 1, 1000) != 1 || !(p.revents & POLLOUT))
		return;
	while (write(STDERR_FILENO, line, len) < 0 && errno == EINTR)
		;
}

/* The report could not be made in time (a peer's file, or stderr, blocks
 * on a hung file system): end the rank anyway, and write nothing more. */
static void give_up(union sigval v)
{
	(void)v;
	_exit(DT_EXIT_HUNG);
}

/* Past the bound: say whom this rank waits for, and end the process.
 * write(2) and _exit, no stdio (the main thread may hold its locks); the
 * peers' array was allocated at start. Reading the peers' files gets
 * RT_WATCHDOG_REPORT_S; a timer ends the rank if it takes longer. */
static void fire(struct rt_watchdog *w, const struct dt_heartbeat *me)
{
	struct sigevent ev = { .sigev_notify = SIGEV_THREAD, .sigev_notify_function = give_up };
	struct itimerspec deadline = { .it_value = { .tv_sec = RT_WATCHDOG_REPORT_S } };
	timer_t timer;
	char line[4096];
	size_t len;
	int r;

	if (timer_create(CLOCK_MONOTONIC, &ev, &timer) == 0)
		timer_settime(timer, 0, &deadline, NULL);
	for (r = 0; w->peers && r < me->world; r++) {
		w->peer_rc[r] = r == me->rank ? 0 : dt_heartbeat_read(w->dir, r, &w->peers[r]);
		if (!w->peer_rc[r] && r != me->rank && !dt_heartbeat_same_start(&w->peers[r], me))
			w->peer_rc[r] = -ESTALE; /* an earlier start's */
	}
	len = (size_t)snprintf(line, sizeof(line), "dtrain-run: watchdog: ");
	rt_watchdog_verdict(me, w->peers, w->peer_rc, dt_wall_s(), line + len, sizeof(line) - len - 1);
	len = strlen(line);
	line[len++] = '\n';
	say(line, len);
	_exit(DT_EXIT_HUNG);
}

/* The process itself did not run for a while (SIGSTOP and SIGCONT, a
 * paused machine): what it waited is not the others' fault, and they have
 * judged it already. Start the phase's clock over (w->mu held), and say so
 * (after unlocking: stderr may block). */
static void note_stopped(struct rt_watchdog *w, double gap)
{
	char line[256];
	int n;

	n = snprintf(line, sizeof(line),
		     "dtrain-run: rank %d on node %s did not run for %.1f s (stopped, or its machine paused)\n",
		     w->hb.rank, w->hb.node, gap);
	w->mono_since = dt_mono_s();
	w->hb.since = dt_wall_s();
	pthread_mutex_unlock(&w->mu);
	if (n > 0)
		say(line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
	pthread_mutex_lock(&w->mu);
}

static void *judge(void *arg)
{
	struct rt_watchdog *w = arg;
	double last_wake = dt_mono_s(), slept;
	unsigned seen;

	pthread_mutex_lock(&w->mu);
	seen = w->gen;
	while (!w->stop) {
		struct dt_heartbeat h;
		double now = dt_mono_s();

		slept = dt_heartbeat_period(w->hb.bound); /* at most what it slept */
		if (now - last_wake > 3 * (slept > w->period ? slept : w->period) + 1.0)
			note_stopped(w, now - last_wake);
		last_wake = now;
		if (w->hb.bound > 0 && now - w->mono_since > w->hb.bound) {
			h = w->hb;
			h.at = dt_wall_s();
			rt_waits_counts(&h.waits_begun, &h.waits_ended);
			pthread_mutex_unlock(&w->mu);
			fire(w, &h);
		}
		nap(w, &seen);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* Rewrite the heartbeat file, and push it to the file server (on NFS the
 * other nodes see a write only once it left this node's page cache). A
 * failed write is tried again next period. */
static void write_heartbeat(struct rt_watchdog *w, const struct dt_heartbeat *h)
{
	char line[DT_HEARTBEAT_BYTES + 1];
	ssize_t n;

	if (w->fd < 0 || dt_heartbeat_format(h, line, sizeof(line)))
		return;
	do
		n = pwrite(w->fd, line, DT_HEARTBEAT_BYTES, 0);
	while (n < 0 && errno == EINTR);
	if (n == DT_HEARTBEAT_BYTES)
		fdatasync(w->fd);
}

static void *writer(void *arg)
{
	struct rt_watchdog *w = arg;
	struct dt_heartbeat h;
	unsigned seen;

	pthread_mutex_lock(&w->mu);
	seen = w->gen;
	while (!w->stop) {
		w->hb.at = dt_wall_s();
		h = w->hb;
		pthread_mutex_unlock(&w->mu);
		rt_waits_counts(&h.waits_begun, &h.waits_ended);
		write_heartbeat(w, &h);
		pthread_mutex_lock(&w->mu);
		nap(w, &seen);
	}
	w->hb.at = dt_wall_s();
	w->hb.phase = DT_PHASE_END;
	w->hb.bound = 0;
	h = w->hb;
	pthread_mutex_unlock(&w->mu);
	rt_waits_counts(&h.waits_begun, &h.waits_ended);
	write_heartbeat(w, &h);
	return NULL;
}

/* --- life cycle --- */

/* Unix time this start of the job step began: the batch script's
 * DTRAIN_STEP_START (every rank alike), else now. */
static double step_start(void)
{
	const char *v = getenv("DTRAIN_STEP_START");
	char *end;
	double t;

	if (v && *v) {
		t = strtod(v, &end);
		if (*end == '\0' && t > 0)
			return t;
	}
	return dt_wall_s();
}

static int open_heartbeat(struct rt_watchdog *w, const struct spec *s, int rank, struct dt_err *err)
{
	char path[4200];
	int rc, dfd;

	if (asprintf(&w->dir, "%s/heartbeat", s->run_dir) < 0) {
		w->dir = NULL;
		return dt_err_add(err, "rank %d: out of memory for the heartbeat's path", rank), -ENOMEM;
	}
	/* dtrain-submit made the run dir; a spec run by hand may name a new one */
	rc = dt_mkdirs(s->run_dir, 0755);
	if (rc)
		return dt_err_add(err, "%s: cannot create: %s", s->run_dir, strerror(-rc)), rc;
	rc = dt_heartbeat_path(w->dir, rank, path, sizeof(path));
	if (rc)
		return dt_err_add(err, "%s: path too long for rank %d's heartbeat", w->dir, rank), rc;
	/* never through a symbolic link planted in the run dir (a shared file
	 * system): heartbeat/ and the file are opened without following one */
	dfd = dt_dir_open_in(s->run_dir, "heartbeat", 0755);
	if (dfd < 0)
		return dt_err_add(err, "%s: cannot create: %s%s", w->dir, strerror(-dfd),
				  dfd == -ELOOP ? " (a symbolic link that dtrain did not make: remove it)" : ""),
		       dfd;
	w->fd = openat(dfd, strrchr(path, '/') + 1, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	rc = w->fd < 0 ? -errno : 0;
	close(dfd);
	if (rc)
		return dt_err_add(err, "%s: cannot open: %s%s", path, strerror(-rc),
				  rc == -ELOOP ? " (a symbolic link that dtrain did not make: remove it)" : ""),
		       rc;
	w->peers = calloc((size_t)w->hb.world, sizeof(*w->peers));
	w->peer_rc = calloc((size_t)w->hb.world, sizeof(*w->peer_rc));
	if (!w->peers || !w->peer_rc)
		return dt_err_add(err, "rank %d: out of memory for %d heartbeats", rank, w->hb.world), -ENOMEM;
	return 0;
}

static void free_files(struct rt_watchdog *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	free(w->dir);
	free(w->peers);
	free(w->peer_rc);
	w->dir = NULL;
	w->peers = NULL;
	w->peer_rc = NULL;
}

int rt_watchdog_start(struct rt_watchdog *w, const struct spec *s, int rank, int world,
		      const char *node, struct dt_err *err)
{
	pthread_condattr_t ca;
	sigset_t all, old;
	int rc = 0;

	memset(w, 0, sizeof(*w));
	w->fd = -1;
	w->enabled = s->recovery.watchdog;
	w->step_fixed_s = (double)s->recovery.step_timeout_seconds;
	w->timeout_s = (double)s->recovery.timeout_seconds;
	w->hb = (struct dt_heartbeat){ .rank = rank, .world = world, .pid = (long)getpid(),
				       .phase = DT_PHASE_START };
	snprintf(w->hb.node, sizeof(w->hb.node), "%s", node && *node ? node : "?");
	w->hb.start = step_start();
	w->hb.since = dt_wall_s();
	w->mono_since = dt_mono_s();
	w->hb.bound = phase_bound(w, DT_PHASE_START);
	w->period = dt_heartbeat_period(w->hb.bound);
	if (s->run_dir && (rc = open_heartbeat(w, s, rank, err)) != 0)
		goto fail;
	pthread_mutex_init(&w->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	/* signals stay with the main thread (preempt.h) */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&w->judge, NULL, judge, w);
	if (!rc) {
		rc = -pthread_create(&w->writer, NULL, writer, w);
		if (rc) {
			pthread_mutex_lock(&w->mu);
			w->stop = true;
			pthread_cond_broadcast(&w->cv);
			pthread_mutex_unlock(&w->mu);
			pthread_join(w->judge, NULL);
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		dt_err_add(err, "rank %d: cannot start the watchdog's threads: %s", rank, strerror(-rc));
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		goto fail;
	}
	w->running = true;
	return 0;
fail:
	free_files(w);
	return rc;
}

/* Join a thread within RT_WATCHDOG_REPORT_S; false when it is stuck (a
 * write on a hung file system). */
static bool join_soon(pthread_t t)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += RT_WATCHDOG_REPORT_S;
	return pthread_timedjoin_np(t, NULL, &until) == 0;
}

void rt_watchdog_stop(struct rt_watchdog *w)
{
	bool joined;

	if (!w->running)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	joined = join_soon(w->writer);
	joined = join_soon(w->judge) && joined;
	w->running = false;
	/* a thread stuck in a write still uses them: left as they are, so that
	 * the caller goes on (to MPI_Abort, say) */
	if (!joined)
		return;
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free_files(w);
}

/* --- beats --- */

void rt_watchdog_beat(struct rt_watchdog *w, long long step, enum dt_phase phase)
{
	double mono = dt_mono_s(), wall = dt_wall_s();

	if (!w || !w->running)
		return;
	pthread_mutex_lock(&w->mu);
	/* a step's time counts towards the automatic bound, but for the first
	 * of a start (one-time set-up; bounded by timeout_seconds) */
	if (w->hb.phase == DT_PHASE_STEP && w->steps_begun > 1) {
		w->recent[w->next_recent] = mono - w->mono_since;
		w->next_recent = (w->next_recent + 1) % RT_WATCHDOG_RECENT;
		if (w->n_recent < RT_WATCHDOG_RECENT)
			w->n_recent++;
	}
	if (phase == DT_PHASE_STEP) {
		w->steps_begun++;
		w->hb.stepped = wall;
	}
	w->hb.step = step;
	w->hb.phase = phase;
	w->hb.since = wall;
	w->mono_since = mono;
	w->hb.bound = phase_bound(w, phase);
	/* a shorter period than the threads sleep now: from now on */
	if (dt_heartbeat_period(w->hb.bound) < w->period) {
		w->gen++;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
}

void rt_watchdog_progress(struct rt_watchdog *w)
{
	if (!w || !w->running)
		return;
	pthread_mutex_lock(&w->mu);
	w->mono_since = dt_mono_s();
	w->hb.since = dt_wall_s();
	pthread_mutex_unlock(&w->mu);
}
