/*
 * test_liveness.c - `dtrain-submit status`'s view of a running job's
 * heartbeats (launch_liveness_read, launcher/liveness.c): the newest step
 * and when it began, and "stalled" when a rank is silent or overdue.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/heartbeat.h"
#include "launcher/cli.h"
#include "tests/testutil.h"

static char run_dir[512];
static const double now = 1.8e9;

/* rank's heartbeat: world 3, node n<1 + rank/2> */
static void put(int rank, long long step, enum dt_phase phase, double since, double at, double bound)
{
	struct dt_heartbeat h = { .rank = rank, .world = 3, .pid = 100 + rank, .start = now - 500,
				  .step = step, .stepped = since - 0.5, .phase = phase, .since = since,
				  .at = at, .bound = bound };
	char line[DT_HEARTBEAT_BYTES + 1], path[700];

	snprintf(h.node, sizeof(h.node), "n%d", 1 + rank / 2);
	assert_int_equal(dt_heartbeat_format(&h, line, sizeof(line)), 0);
	snprintf(path, sizeof(path), "%s/heartbeat/rank-%d", run_dir, rank);
	tu_write_path(path, line, 0644);
}

static void no_heartbeats_no_view(void **state)
{
	struct launch_liveness lv;

	(void)state;
	snprintf(run_dir, sizeof(run_dir), "%s/none", tu_scratch());
	launch_liveness_read(run_dir, now, &lv);
	assert_false(lv.known);
	assert_false(lv.stalled);
}

static void steady_run(void **state)
{
	struct launch_liveness lv;
	char dir[600];

	(void)state;
	snprintf(run_dir, sizeof(run_dir), "%s/run", tu_scratch());
	snprintf(dir, sizeof(dir), "%s/heartbeat", run_dir);
	assert_int_equal(dt_mkdirs(dir, 0755), 0);
	put(0, 41, DT_PHASE_SYNC, now - 0.2, now - 0.1, 5);
	put(1, 42, DT_PHASE_STEP, now - 0.1, now - 0.1, 5);
	put(2, 42, DT_PHASE_STEP, now - 0.05, now - 0.3, 5);
	launch_liveness_read(run_dir, now, &lv);
	assert_true(lv.known);
	assert_int_equal(lv.world, 3);
	assert_int_equal(lv.read, 3);
	assert_int_equal(lv.step, 42);
	assert_true(fabs(lv.step_at - (now - 0.55)) < 1e-3); /* when step 42 began */
	assert_true(fabs(lv.progress_at - (now - 0.05)) < 1e-3);
	assert_false(lv.stalled);
	/* a rank that has not written yet is no evidence either way */
	snprintf(dir, sizeof(dir), "%s/heartbeat/rank-2", run_dir);
	assert_int_equal(remove(dir), 0);
	launch_liveness_read(run_dir, now, &lv);
	assert_int_equal(lv.read, 2);
	assert_false(lv.stalled);
}

static void silent_rank_stalls(void **state)
{
	struct launch_liveness lv;

	(void)state;
	put(0, 42, DT_PHASE_STEP, now - 7, now - 0.1, 5);
	put(1, 42, DT_PHASE_STEP, now - 7, now - 0.1, 5);
	put(2, 42, DT_PHASE_STEP, now - 7, now - 6.6, 5); /* stopped */
	launch_liveness_read(run_dir, now, &lv);
	assert_true(lv.stalled);
	assert_string_equal(lv.why, "rank 2 on node n2 silent for 7 s (last in step 42, step)");
	/* a file of an earlier start (its rank not started again yet) is no
	 * evidence about this one */
	{
		struct dt_heartbeat h = { .rank = 2, .world = 3, .pid = 7, .start = now - 5000,
					  .step = 9, .phase = DT_PHASE_STEP, .since = now - 4000,
					  .at = now - 4000, .bound = 5 };
		char line[DT_HEARTBEAT_BYTES + 1], path[700];

		put(0, 42, DT_PHASE_STEP, now - 1, now - 0.1, 5);
		put(1, 42, DT_PHASE_STEP, now - 1, now - 0.1, 5);
		snprintf(h.node, sizeof(h.node), "n2");
		assert_int_equal(dt_heartbeat_format(&h, line, sizeof(line)), 0);
		snprintf(path, sizeof(path), "%s/heartbeat/rank-2", run_dir);
		tu_write_path(path, line, 0644);
		launch_liveness_read(run_dir, now, &lv);
		assert_false(lv.stalled);
		assert_int_equal(lv.read, 2);
		assert_int_equal(lv.step, 42);
	}
	/* done: not silent, whatever its age */
	put(2, 42, DT_PHASE_END, now - 700, now - 600, 0);
	put(0, 42, DT_PHASE_STEP, now - 1, now - 0.1, 5);
	put(1, 42, DT_PHASE_STEP, now - 1, now - 0.1, 5);
	launch_liveness_read(run_dir, now, &lv);
	assert_false(lv.stalled);
}

static void overdue_rank_stalls(void **state)
{
	struct launch_liveness lv;

	(void)state;
	put(0, 42, DT_PHASE_SAVE, now - 100, now - 0.1, 60); /* alive, but stuck */
	put(1, 42, DT_PHASE_SAVE, now - 30, now - 0.1, 60);
	put(2, 42, DT_PHASE_SAVE, now - 30, now - 0.1, 60);
	launch_liveness_read(run_dir, now, &lv);
	assert_true(lv.stalled);
	assert_string_equal(lv.why, "rank 0 on node n1 in step 42 (save) for 100 s, past the watchdog's 60 s");
	assert_true(fabs(lv.progress_at - (now - 30)) < 1e-3);
	/* a silent rank is named before an overdue one */
	put(2, 42, DT_PHASE_SAVE, now - 30, now - 20, 60);
	launch_liveness_read(run_dir, now, &lv);
	assert_string_equal(lv.why, "rank 2 on node n2 silent for 20 s (last in step 42, save)");
	/* no bound (recovery.watchdog false, or "end"): never overdue */
	put(0, 42, DT_PHASE_SAVE, now - 100, now - 0.1, 0);
	put(2, 42, DT_PHASE_SAVE, now - 30, now - 0.1, 0);
	launch_liveness_read(run_dir, now, &lv);
	assert_false(lv.stalled);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(no_heartbeats_no_view),
		cmocka_unit_test(steady_run),
		cmocka_unit_test(silent_rank_stalls),
		cmocka_unit_test(overdue_rank_stalls),
	};

	return cmocka_run_group_tests(tests, NULL, tu_teardown);
}
