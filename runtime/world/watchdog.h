/*
 * watchdog.h - ends a job step that has stopped making progress, so that
 * recovery can start it again: a rank hung, stopped (SIGSTOP) or cut off
 * with its node, while the others wait for it in a collective forever.
 *
 * Two threads per rank. The training loop says what the rank is doing
 * (rt_watchdog_beat: a step begins, its evaluation, the ranks' agreement
 * on a stop signal, a save); the writer rewrites the rank's heartbeat file
 * (base/heartbeat.h, <run_dir>/heartbeat/rank-<r>) every period; the judge
 * checks how long the current phase has lasted. Past the phase's bound it
 * reads the other ranks' heartbeats, prints on stderr which ranks this one
 * waits for:
 *
 *   dtrain-run: watchdog: rank 0 on node n1 waited 8.0 s in step 41 (step;
 *   bound 8 s); waiting for rank 3 on node n2: silent for 7.9 s, last in
 *   step 41 (step); ending the job step
 *
 * (one line; "silent": its heartbeat stopped, so the whole process stopped,
 * its file system hangs or its node is gone; "behind": it is in an earlier
 * step or phase), and ends the process with exit code DT_EXIT_HUNG (5).
 * srun --kill-on-bad-exit then ends the job step, and the batch script
 * starts it again from the newest checkpoint (recovery.max_crashes). The
 * judge does no file I/O but that report, which has RT_WATCHDOG_REPORT_S.
 *
 * Bounds (spec recovery.*, all in seconds, never under 2):
 *   a training step, and what follows it until the next: step_timeout_seconds,
 *     or when 0 ten times the slowest of this start's last 32 steps (not
 *     its first), and at least 60 s; an evaluation, per chunk of rows, and a
 *     checkpoint save: timeout_seconds;
 *   from the watchdog's start (after MPI_Init, the spec and the
 *     communicators) through the resume, and the first step of a start
 *     (one-time set-up): timeout_seconds (0: no bound);
 *   recovery.watchdog false: no bound at all (heartbeats are still written).
 * The heartbeats are written every tenth of the bound (0.2 to 5 s): a rank
 * is "silent" after three of its periods and a second without one
 * (dt_heartbeat_period, dt_heartbeat_silent).
 */
#ifndef DTRAIN_RUNTIME_WATCHDOG_H
#define DTRAIN_RUNTIME_WATCHDOG_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "jobs/spec.h"
#include "base/heartbeat.h"
#include "base/err.h"

#define RT_WATCHDOG_RECENT 32   /* steps the automatic bound looks back on */
#define RT_WATCHDOG_FACTOR 10.0 /* automatic bound: this times the slowest */
#define RT_WATCHDOG_MIN_S 60.0  /* and never below this */
#define RT_WATCHDOG_FLOOR_S 2.0 /* no bound is shorter (a stopped peer must
				 * look silent by then) */
#define RT_WATCHDOG_REPORT_S 10 /* s to read the peers' heartbeats when firing */

struct rt_watchdog {
	bool running;       /* the threads run; rt_watchdog_stop joins them */
	pthread_t judge;    /* checks the bound, fires */
	pthread_t writer;   /* rewrites the heartbeat file */
	pthread_mutex_t mu; /* guards hb, mono_since, stop, gen, period and
			     * the step times below */
	pthread_cond_t cv;  /* wakes the threads: to stop, or a shorter period */
	bool stop;
	unsigned gen;           /* bumped by a beat that shortens the period */
	double period;          /* s the threads sleep between rounds now */
	struct dt_heartbeat hb; /* what the file says; at is set when written */
	double mono_since;      /* CLOCK_MONOTONIC s: the phase began */
	/* the limits, from the spec */
	bool enabled;
	double step_fixed_s;    /* recovery.step_timeout_seconds; 0: automatic */
	double timeout_s;       /* recovery.timeout_seconds; 0: none */
	/* this start's steps */
	long long steps_begun;
	double recent[RT_WATCHDOG_RECENT]; /* s, a ring (not the first step) */
	int n_recent, next_recent;
	char *dir; /* <run_dir>/heartbeat, or NULL: no run_dir, no files */
	int fd;    /* this rank's heartbeat file, or -1 */
	struct dt_heartbeat *peers; /* [world], for the report (made at start) */
	int *peer_rc;               /* [world] */
};

/* --- life cycle --- */

/* Start the watchdog of rank `rank` of `world` on node `node` (copied), in
 * phase "start" with the spec's bounds. Creates <run_dir>/heartbeat when
 * s->run_dir is set. 0, or -errno with a line in err (the directory or
 * file cannot be made, no thread). */
int rt_watchdog_start(struct rt_watchdog *w, const struct spec *s, int rank, int world,
		      const char *node, struct dt_err *err);

/* Stop the threads (the file says phase "end") and free what start made.
 * A thread stuck in a write (a hung file system) is given
 * RT_WATCHDOG_REPORT_S, then left with what it uses, so that the caller
 * goes on. Safe on a zeroed or already stopped watchdog. */
void rt_watchdog_stop(struct rt_watchdog *w);

/* --- operations (main thread) --- */

/* The rank begins `phase` of step `step` (the step worked on for
 * DT_PHASE_STEP, 1-based; the last one done for the others). A step's
 * duration counts from its DT_PHASE_STEP beat to the next beat. No-op for
 * w NULL or not running. */
void rt_watchdog_beat(struct rt_watchdog *w, long long step, enum dt_phase phase);

/* The phase goes on and has made progress (an evaluation's chunk): its
 * clock starts over. No-op for w NULL or not running. */
void rt_watchdog_progress(struct rt_watchdog *w);

/* --- the rules, apart for tests --- */

/* The bound of a training step: fixed_s when > 0, else RT_WATCHDOG_FACTOR
 * times the slowest of recent[0..n), at least RT_WATCHDOG_MIN_S. */
double rt_watchdog_step_bound(double fixed_s, const double *recent, int n);

/* The report of `me`, which has waited past its bound at time now, from
 * the other ranks' heartbeats: peers[r] valid where rc[r] is 0 (else
 * -ENOENT or -EINVAL: none readable), world entries (me's own skipped);
 * peers NULL: not known (no run_dir). One line, no '\n', into buf. */
void rt_watchdog_verdict(const struct dt_heartbeat *me, const struct dt_heartbeat *peers,
			 const int *rc, double now, char *buf, size_t size);

#endif
