/*
 * test_watchdog.c - the watchdog (runtime/world/watchdog.h) and its heartbeat
 * files (base/heartbeat.h): the bounds, the line's format, the report of
 * whom a rank waits for, and the thread in a child process: it ends a rank
 * that waits past its bound (exit 5, naming the silent peer), leaves one
 * that beats alone, and does not blame its peers for its own stop.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/heartbeat.h"
#include "runtime/world/watchdog.h"
#include "tests/testutil.h"
#include "base/clock.h"

/* --- the rules --- */

static void step_bound_rules(void **state)
{
	double recent[3] = { 1.0, 9.0, 2.0 };

	(void)state;
	assert_true(rt_watchdog_step_bound(5, recent, 3) == 5);       /* fixed */
	assert_true(rt_watchdog_step_bound(0, recent, 3) == 90);      /* 10 x slowest */
	assert_true(rt_watchdog_step_bound(0, recent, 1) == 60);      /* at least 60 s */
	assert_true(rt_watchdog_step_bound(0, NULL, 0) == 60);
	assert_true(dt_heartbeat_period(0) == 5);                      /* no bound */
	assert_true(dt_heartbeat_period(1000) == 5);
	assert_true(fabs(dt_heartbeat_period(8) - 0.8) < 1e-12);
	assert_true(fabs(dt_heartbeat_period(1) - 0.2) < 1e-12);
}

/* --- the heartbeat line --- */

static struct dt_heartbeat beat_of(int rank, int world, long long step, enum dt_phase phase,
				   double since, double at, double bound)
{
	struct dt_heartbeat h = { .rank = rank, .world = world, .pid = 1000 + rank,
				  .start = 1.7e9, .step = step, .stepped = since - 1, .phase = phase,
				  .since = since, .at = at, .bound = bound };

	snprintf(h.node, sizeof(h.node), "n%d", 1 + rank / 2);
	return h;
}

static void heartbeat_round_trip(void **state)
{
	struct dt_heartbeat h = beat_of(3, 4, 41, DT_PHASE_SAVE, 1.7e9 + 5.25, 1.7e9 + 6.5, 900), back;
	char line[DT_HEARTBEAT_BYTES + 1], torn[DT_HEARTBEAT_BYTES + 1];

	(void)state;
	snprintf(h.node, sizeof(h.node), "node with space");
	h.waits_begun = 1234567;
	h.waits_ended = 1234566;
	assert_int_equal(dt_heartbeat_format(&h, line, sizeof(line)), 0);
	assert_int_equal(strlen(line), DT_HEARTBEAT_BYTES);
	assert_int_equal(line[DT_HEARTBEAT_BYTES - 1], '\n');
	assert_int_equal(dt_heartbeat_parse(line, &back), 0);
	assert_int_equal(back.rank, 3);
	assert_int_equal(back.world, 4);
	assert_int_equal(back.pid, 1003);
	assert_string_equal(back.node, "node?with?space");
	assert_int_equal(back.step, 41);
	assert_int_equal(back.phase, DT_PHASE_SAVE);
	assert_true(fabs(back.since - h.since) < 1e-3 && fabs(back.at - h.at) < 1e-3);
	assert_true(back.bound == 900);
	assert_true(back.waits_begun == 1234567 && back.waits_ended == 1234566);
	/* a line cut short (caught while rewritten), or of another version */
	memcpy(torn, line, 100);
	torn[100] = '\0';
	assert_int_equal(dt_heartbeat_parse(torn, &back), -EINVAL);
	memcpy(torn, line, sizeof(line));
	torn[DT_HEARTBEAT_BYTES - 1] = ' ';
	assert_int_equal(dt_heartbeat_parse(torn, &back), -EINVAL);
	memcpy(torn, line, sizeof(line));
	torn[17] = '3'; /* "dtrain-heartbeat 3" */
	assert_int_equal(dt_heartbeat_parse(torn, &back), -EINVAL);
	/* a version 1 line (an earlier dtrain's rank) is read, its waits unknown */
	{
		char v1[DT_HEARTBEAT_BYTES + 1], body[DT_HEARTBEAT_BYTES];
		char *w = strstr(line, " waits "), *sum = strstr(line, " sum ");
		unsigned x = 2166136261u;
		size_t i, n;
		int m;

		n = (size_t)(w - line);
		memcpy(body, line, n);
		body[n] = '\0';
		body[17] = '1';
		for (i = 0; i < n; i++)
			x = (x ^ (unsigned char)body[i]) * 16777619u;
		m = snprintf(v1, sizeof(v1), "%s sum %08x", body, x);
		memset(v1 + m, ' ', (size_t)(DT_HEARTBEAT_BYTES - 1 - m));
		v1[DT_HEARTBEAT_BYTES - 1] = '\n';
		v1[DT_HEARTBEAT_BYTES] = '\0';
		(void)sum;
		assert_int_equal(dt_heartbeat_parse(v1, &back), 0);
		assert_int_equal(back.step, 41);
		assert_true(back.waits_begun == -1 && back.waits_ended == -1);
	}
	/* two writes mixed (a read racing a rewrite): the sum tells */
	{
		struct dt_heartbeat later = h;
		char other[DT_HEARTBEAT_BYTES + 1];
		char *at = strstr(line, " at ");

		later.at += 1;
		assert_int_equal(dt_heartbeat_format(&later, other, sizeof(other)), 0);
		memcpy(torn, line, sizeof(line));
		memcpy(torn + (at - line), other + (at - line), 18); /* " at T" of the later write */
		assert_true(strcmp(torn, line) != 0);
		assert_int_equal(dt_heartbeat_parse(torn, &back), -EINVAL);
		assert_int_equal(dt_heartbeat_parse(other, &back), 0);
	}
	assert_true(fabs(back.stepped - h.stepped) < 1e-3);
	assert_string_equal(dt_phase_name(DT_PHASE_STEP), "step");
	assert_string_equal(dt_phase_name(DT_PHASE_COUNT), "?");
}

/* --- the report --- */

static void verdict_names_the_silent_rank(void **state)
{
	double now = 1.7e9 + 100;
	struct dt_heartbeat hb[4] = {
		beat_of(0, 4, 41, DT_PHASE_STEP, now - 8, now - 0.1, 8), /* me */
		beat_of(1, 4, 41, DT_PHASE_STEP, now - 8, now - 0.2, 8),
		beat_of(2, 4, 41, DT_PHASE_STEP, now - 8, now - 0.3, 8),
		beat_of(3, 4, 41, DT_PHASE_STEP, now - 8, now - 7.9, 8), /* stopped */
	};
	int rc[4] = { 0, 0, 0, 0 };
	char buf[1024];

	(void)state;
	rt_watchdog_verdict(&hb[0], hb, rc, now, buf, sizeof(buf));
	assert_string_equal(buf, "rank 0 on node n1 waited 8.0 s in step 41 (step; bound 8 s); "
				 "waiting for rank 3 on node n2: silent for 7.9 s, last in step 41 (step); "
				 "ending the job step");
	/* no file: it never got as far as its watchdog; or an earlier start's */
	rc[2] = -ENOENT;
	rt_watchdog_verdict(&hb[0], hb, rc, now, buf, sizeof(buf));
	assert_non_null(strstr(buf, "waiting for rank 2: no heartbeat (it never got this far); rank 3 on node n2: silent"));
	rc[2] = -ESTALE;
	rt_watchdog_verdict(&hb[0], hb, rc, now, buf, sizeof(buf));
	assert_non_null(strstr(buf, "waiting for rank 2: no heartbeat in this start (it never got this far); rank 3"));
}

static void verdict_names_ranks_behind(void **state)
{
	double now = 1.7e9 + 100;
	struct dt_heartbeat hb[3] = {
		beat_of(0, 3, 41, DT_PHASE_SYNC, now - 70, now - 0.1, 60),
		beat_of(1, 3, 41, DT_PHASE_STEP, now - 75, now - 0.2, 60), /* alive, in the step */
		beat_of(2, 3, 41, DT_PHASE_SYNC, now - 70, now - 0.3, 60),
	};
	int rc[3] = { 0, 0, 0 };
	char buf[1024];

	(void)state;
	rt_watchdog_verdict(&hb[0], hb, rc, now, buf, sizeof(buf));
	assert_string_equal(buf, "rank 0 on node n1 waited 70.0 s in step 41 (sync; bound 60 s); "
				 "waiting for rank 1 on node n1: behind, in step 41 (step) for 75.0 s; "
				 "ending the job step");
	/* a step's evaluation comes before the agreement after it */
	hb[1] = beat_of(1, 3, 41, DT_PHASE_EVAL, now - 75, now - 0.2, 900);
	rt_watchdog_verdict(&hb[0], hb, rc, now, buf, sizeof(buf));
	assert_non_null(strstr(buf, "waiting for rank 1 on node n1: behind, in step 41 (eval) for 75.0 s"));
	/* all alike: nobody to blame by heartbeats */
	hb[1] = beat_of(1, 3, 41, DT_PHASE_SYNC, now - 70, now - 0.2, 60);
	rt_watchdog_verdict(&hb[0], hb, rc, now, buf, sizeof(buf));
	assert_non_null(strstr(buf, "; no rank is silent or behind: a collective or a message that never completed; ending the job step"));
	/* no run_dir: no heartbeats to read */
	rt_watchdog_verdict(&hb[0], NULL, NULL, now, buf, sizeof(buf));
	assert_non_null(strstr(buf, "whom it waits for is not known (no run_dir, no heartbeats)"));
}

/* A rank alive, as far as the others, but in no wait while they wait in a
 * collective (DTRAIN_FAULT_SPLIT=slow on it): named by its wait counts. */
static void verdict_names_the_rank_outside_the_wait(void **state)
{
	double now = 1.7e9 + 100;
	struct dt_heartbeat hb[3] = {
		beat_of(0, 3, 41, DT_PHASE_STEP, now - 8, now - 0.1, 8),
		beat_of(1, 3, 41, DT_PHASE_STEP, now - 8, now - 0.2, 8),
		beat_of(2, 3, 41, DT_PHASE_STEP, now - 8, now - 0.3, 8),
	};
	int rc[3] = { 0, 0, 0 };
	char buf[1024];

	(void)state;
	hb[0].waits_begun = 212, hb[0].waits_ended = 211; /* me, in a barrier */
	hb[1].waits_begun = 211, hb[1].waits_ended = 211; /* computing, or stuck */
	hb[2].waits_begun = 212, hb[2].waits_ended = 211; /* waiting like me */
	rt_watchdog_verdict(&hb[0], hb, rc, now, buf, sizeof(buf));
	assert_string_equal(buf, "rank 0 on node n1 waited 8.0 s in step 41 (step; bound 8 s); "
				 "waiting for rank 1 on node n1: alive in step 41 (step) but in no wait on the others "
				 "(211 waits done; this rank is in its wait 212): it never reached the collective the "
				 "others wait in; ending the job step");
	/* the late rank's own watchdog says that it is the one */
	rt_watchdog_verdict(&hb[1], hb, rc, now, buf, sizeof(buf));
	assert_non_null(strstr(buf, "rank 1 on node n1 waited 8.0 s in step 41 (step; bound 8 s); this rank is in no wait while 2 ranks at its step wait in one: it is the one late (busy outside MPI); ending the job step"));
	/* a line of an earlier dtrain (no counts) is not blamed */
	hb[1].waits_begun = hb[1].waits_ended = -1;
	rt_watchdog_verdict(&hb[0], hb, rc, now, buf, sizeof(buf));
	assert_non_null(strstr(buf, "no rank is silent or behind"));
	/* a rank that is not in a wait itself blames nobody this way */
	hb[1].waits_begun = hb[1].waits_ended = 211;
	hb[0].waits_ended = 212;
	rt_watchdog_verdict(&hb[0], hb, rc, now, buf, sizeof(buf));
	assert_null(strstr(buf, "waiting for rank 1"));
	assert_non_null(strstr(buf, "this rank is in no wait while 1 rank at its step waits in one"));
	/* nobody in a wait: nothing to tell by the counts */
	hb[2].waits_ended = 212;
	rt_watchdog_verdict(&hb[0], hb, rc, now, buf, sizeof(buf));
	assert_non_null(strstr(buf, "no rank is silent or behind"));
}

/* --- the thread, in a child --- */

static struct spec spec_in(const char *run_dir, long step_s, long timeout_s)
{
	struct spec s = { 0 };

	s.run_dir = (char *)run_dir;
	s.recovery.watchdog = true;
	s.recovery.step_timeout_seconds = step_s;
	s.recovery.timeout_seconds = timeout_s;
	return s;
}

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Run body in a child (its stderr into <scratch>/NAME.err); its wait status
 * and the seconds it ran. */
static int in_child(const char *name, void (*body)(void), void (*meanwhile)(pid_t), double *ran)
{
	char path[600];
	double t0 = mono();
	pid_t pid;
	int st = 0;

	snprintf(path, sizeof(path), "%s/%s.err", tu_scratch(), name);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd >= 0)
			dup2(fd, STDERR_FILENO);
		body();
		_exit(0);
	}
	if (meanwhile)
		meanwhile(pid);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	*ran = mono() - t0;
	return st;
}

static char run_dir[512];

/* Rank 0 of 2, whose peer rank 1 wrote its last heartbeat long ago. */
static void hung_peer(void)
{
	struct spec s = spec_in(run_dir, 2, 2);
	struct rt_watchdog w;
	struct dt_err err = { 0 };
	struct dt_heartbeat peer = beat_of(1, 2, 3, DT_PHASE_STEP, dt_wall_s() - 30,
					   dt_wall_s() - 30, 1);
	char line[DT_HEARTBEAT_BYTES + 1], path[600];

	snprintf(path, sizeof(path), "%s/heartbeat/rank-1", run_dir);
	peer.start = dt_wall_s() - 1; /* this start's, as its ranks' */
	if (rt_watchdog_start(&w, &s, 0, 2, "n1", &err))
		_exit(100);
	if (dt_heartbeat_format(&peer, line, sizeof(line)) ||
	    dt_write_file_atomic(path, line, strlen(line), 0644))
		_exit(101);
	rt_watchdog_beat(&w, 3, DT_PHASE_STEP);
	sleep(20); /* waits for rank 1 "forever" */
	_exit(102);
}

static void ends_a_rank_that_waits_too_long(void **state)
{
	char path[600], *err;
	double ran;
	int st;

	(void)state;
	snprintf(run_dir, sizeof(run_dir), "%s/run-hung", tu_scratch());
	assert_int_equal(dt_mkdirs(run_dir, 0755), 0);
	st = in_child("hung", hung_peer, NULL, &ran);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), DT_EXIT_HUNG);
	assert_true(ran < 5); /* the bound is 2 s, the period 0.2 s */
	snprintf(path, sizeof(path), "%s/hung.err", tu_scratch());
	err = tu_read(path, NULL);
	assert_non_null(err);
	assert_non_null(strstr(err, "dtrain-run: watchdog: rank 0 on node n1 waited 2."));
	assert_non_null(strstr(err, "in step 3 (step; bound 2 s); waiting for rank 1 on node n1: silent for 3"));
	free(err);
	/* its own heartbeat file says where it was */
	{
		struct dt_heartbeat h;
		char dir[600];

		snprintf(dir, sizeof(dir), "%s/heartbeat", run_dir);
		assert_int_equal(dt_heartbeat_read(dir, 0, &h), 0);
		assert_int_equal(h.step, 3);
		assert_int_equal(h.phase, DT_PHASE_STEP);
		assert_int_equal(h.world, 2);
		assert_true(h.bound == 2);
	}
}

/* A rank that beats every 50 ms for 3 s, steps of bound 2 s: never ended. */
static void steady(void)
{
	struct spec s = spec_in(run_dir, 1, 1);
	struct rt_watchdog w;
	struct dt_err err = { 0 };
	int i;

	if (rt_watchdog_start(&w, &s, 0, 1, "n1", &err))
		_exit(100);
	for (i = 0; i < 60; i++) {
		rt_watchdog_beat(&w, i + 1, DT_PHASE_STEP);
		usleep(50000);
	}
	rt_watchdog_beat(&w, 60, DT_PHASE_END);
	sleep(2); /* no bound at the end */
	rt_watchdog_stop(&w);
	_exit(0);
}

static void leaves_a_steady_rank(void **state)
{
	struct dt_heartbeat h;
	char dir[600];
	double ran;
	int st;

	(void)state;
	snprintf(run_dir, sizeof(run_dir), "%s/run-steady", tu_scratch());
	assert_int_equal(dt_mkdirs(run_dir, 0755), 0);
	st = in_child("steady", steady, NULL, &ran);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	snprintf(dir, sizeof(dir), "%s/heartbeat", run_dir);
	assert_int_equal(dt_heartbeat_read(dir, 0, &h), 0);
	assert_int_equal(h.phase, DT_PHASE_END);
	assert_int_equal(h.step, 60);
	assert_int_equal(dt_heartbeat_read(dir, 1, &h), -ENOENT);
}

/* Stopped for 3 s in the middle of a step of bound 2 s: its own stop is
 * not its peers' fault; it says so and goes on. */
static void stop_it(pid_t pid)
{
	usleep(500000);
	kill(pid, SIGSTOP);
	sleep(3);
	kill(pid, SIGCONT);
}

static void stopped_itself(void)
{
	struct spec s = spec_in(run_dir, 2, 2);
	struct rt_watchdog w;
	struct dt_err err = { 0 };
	int i;

	if (rt_watchdog_start(&w, &s, 0, 1, "n1", &err))
		_exit(100);
	rt_watchdog_beat(&w, 1, DT_PHASE_STEP);
	for (i = 0; i < 50; i++) { /* 5 s of steps of 100 ms */
		usleep(100000);
		rt_watchdog_beat(&w, i + 2, DT_PHASE_STEP);
	}
	rt_watchdog_stop(&w);
	_exit(0);
}

static void own_stop_is_not_a_hang(void **state)
{
	char path[600], *err;
	double ran;
	int st;

	(void)state;
	snprintf(run_dir, sizeof(run_dir), "%s/run-stopped", tu_scratch());
	assert_int_equal(dt_mkdirs(run_dir, 0755), 0);
	st = in_child("stopped", stopped_itself, stop_it, &ran);
	snprintf(path, sizeof(path), "%s/stopped.err", tu_scratch());
	err = tu_read(path, NULL);
	assert_non_null(err);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fprintf(stderr, "child's stderr: %s\n", err);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_non_null(strstr(err, "dtrain-run: rank 0 on node n1 did not run for 3."));
	assert_null(strstr(err, "watchdog:"));
	free(err);
}

/* Step 2 of a start is bounded by step_timeout_seconds already (only the
 * first gets timeout_seconds, here none). */
static void second_step_bounded(void)
{
	struct spec s = spec_in(NULL, 2, 0);
	struct rt_watchdog w;
	struct dt_err err = { 0 };

	if (rt_watchdog_start(&w, &s, 0, 1, "n1", &err))
		_exit(100);
	rt_watchdog_beat(&w, 1, DT_PHASE_STEP);
	usleep(100000);
	rt_watchdog_beat(&w, 1, DT_PHASE_SYNC);
	rt_watchdog_beat(&w, 2, DT_PHASE_STEP);
	sleep(10);
	_exit(102);
}

/* stderr a full pipe nobody reads (srun stuck on a hung file system): the
 * report is dropped, the rank still ends. */
static void stderr_blocked(void)
{
	struct spec s = spec_in(NULL, 2, 2);
	struct rt_watchdog w;
	struct dt_err err = { 0 };
	char junk[4096] = { 0 };
	int fds[2];

	if (pipe(fds) || fcntl(fds[1], F_SETFL, O_NONBLOCK))
		_exit(101);
	while (write(fds[1], junk, sizeof(junk)) > 0)
		;
	if (fcntl(fds[1], F_SETFL, 0) || dup2(fds[1], STDERR_FILENO) < 0)
		_exit(101);
	if (rt_watchdog_start(&w, &s, 0, 1, "n1", &err))
		_exit(100);
	rt_watchdog_beat(&w, 1, DT_PHASE_STEP);
	sleep(20);
	_exit(102);
}

static void bounds_that_must_hold(void **state)
{
	double ran;
	int st;

	(void)state;
	st = in_child("second", second_step_bounded, NULL, &ran);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), DT_EXIT_HUNG);
	assert_true(ran < 6);
	st = in_child("blocked", stderr_blocked, NULL, &ran);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), DT_EXIT_HUNG);
	assert_true(ran < 8);
}

/* --- planted links --- */

/* A heartbeat file, or the heartbeat dir, planted in the run dir as a
 * symbolic link by someone else: the watchdog refuses to start, naming it,
 * and the link's target is not touched. */
static void refuses_planted_links(void **state)
{
	char dir[600], victim[600], link[700], *text;
	struct rt_watchdog w = { 0 };
	struct dt_err err = { 0 };
	struct spec s;
	size_t len;

	(void)state;
	snprintf(victim, sizeof(victim), "%s/victim-file", tu_scratch());
	tu_write_path(victim, "precious\n", 0644);
	snprintf(dir, sizeof(dir), "%s/run-linked-file", tu_scratch());
	snprintf(link, sizeof(link), "%s/heartbeat", dir);
	assert_int_equal(dt_mkdirs(link, 0755), 0);
	snprintf(link, sizeof(link), "%s/heartbeat/rank-0", dir);
	assert_int_equal(symlink(victim, link), 0);
	s = spec_in(dir, 2, 2);
	assert_int_not_equal(rt_watchdog_start(&w, &s, 0, 1, "n1", &err), 0);
	rt_watchdog_stop(&w);
	assert_non_null(strstr(err.msg, "heartbeat/rank-0"));
	assert_non_null(strstr(err.msg, "symbolic link"));
	text = tu_read(victim, &len);
	assert_non_null(text);
	assert_string_equal(text, "precious\n");
	free(text);

	/* the directory itself a link to another: nothing is created there */
	snprintf(victim, sizeof(victim), "%s/victim-dir", tu_scratch());
	assert_int_equal(dt_mkdirs(victim, 0755), 0);
	snprintf(dir, sizeof(dir), "%s/run-linked-dir", tu_scratch());
	assert_int_equal(dt_mkdirs(dir, 0755), 0);
	snprintf(link, sizeof(link), "%s/heartbeat", dir);
	assert_int_equal(symlink(victim, link), 0);
	memset(&w, 0, sizeof(w));
	dt_err_clear(&err);
	s = spec_in(dir, 2, 2);
	assert_int_not_equal(rt_watchdog_start(&w, &s, 0, 1, "n1", &err), 0);
	rt_watchdog_stop(&w);
	assert_non_null(strstr(err.msg, "symbolic link"));
	snprintf(link, sizeof(link), "%s/rank-0", victim);
	assert_int_equal(access(link, F_OK), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(step_bound_rules),
		cmocka_unit_test(heartbeat_round_trip),
		cmocka_unit_test(verdict_names_the_silent_rank),
		cmocka_unit_test(verdict_names_ranks_behind),
		cmocka_unit_test(ends_a_rank_that_waits_too_long),
		cmocka_unit_test(leaves_a_steady_rank),
		cmocka_unit_test(own_stop_is_not_a_hang),
		cmocka_unit_test(bounds_that_must_hold),
		cmocka_unit_test(refuses_planted_links),
		cmocka_unit_test(verdict_names_the_rank_outside_the_wait),
	};

	return cmocka_run_group_tests(tests, NULL, tu_teardown);
}
