/*
 * test_report.c - the report of a run (launcher/report.h) from files
 * written into a scratch run dir: a run that crashed after a checkpoint and
 * resumed from it (steps redone), with an events.jsonl of two job starts;
 * goodput's parts; times of events that carry none; the sparkline; the
 * page's content and escaping; every rank's part of a step (the newest
 * start's, weighted by the windows' steps) and MFU; a user's cancel named
 * as one, a job that ended done drawn as no failure, wall time from the
 * run's start.
 *
 * Sections: fixtures, reading, goodput, queries, page, every rank's part.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "launcher/report.h"
#include "base/buf.h"
#include "base/err.h"
#include "tests/testutil.h"

/* --- fixtures --- */

/* A step event at Unix time 1000 + step / 10, 0.1 s per step, of which
 * compute 0.06 and pipeline wait 0.03. */
static void add_step(struct dt_buf *b, long long step, double loss)
{
	assert_int_equal(dt_buf_printf(b, "{\"event\":\"step\",\"step\":%lld,\"total_steps\":12,\"epoch\":1,"
				       "\"loss\":%.9g,\"lr\":0.01,\"grad_norm\":1.5,\"samples_per_s\":80,"
				       "\"eta_s\":1,\"steps\":1,\"time\":{\"step_s\":0.1,\"compute_s\":0.06,"
				       "\"pipe_wait_s\":0.03,\"grad_wait_s\":0,\"data_s\":0.001,\"optim_s\":0.005},"
				       "\"unix_time\":%.3f}\n", step, loss, 1000.0 + (double)step / 10), 0);
}

/* Two starts: steps 1-8 (checkpoint at 5, then a crash), a resume from 5,
 * steps 6-12 (6-8 redone), the end; a line still being written. */
static const char *write_run(void)
{
	static char dir[600];
	char path[700];
	struct dt_buf b = {0};
	long long s;

	snprintf(dir, sizeof(dir), "%s/run", tu_scratch());
	mkdir(dir, 0755);
	dt_buf_puts(&b, "{\"event\":\"start\",\"total_steps\":12,\"step\":0,\"device\":\"cpu\",\"precision\":\"fp32\"}\n"
		    "{\"event\":\"first_step\",\"step\":1,\"since_step_start_s\":-1,\"since_process_start_s\":1.6,\"unix_time\":1000.1}\n");
	for (s = 1; s <= 8; s++) {
		add_step(&b, s, 100.0 / (double)s);
		if (s == 5)
			dt_buf_puts(&b, "{\"event\":\"checkpoint\",\"step\":5,\"path\":\"ck/step-5\",\"bytes\":2097152,\"stall_s\":0.25,\"async\":true}\n");
	}
	dt_buf_puts(&b, "not json\n{\"event\":\"resume\",\"step\":5,\"path\":\"ck/step-5\",\"load_s\":0.5,\"from_data\":1,\"from_pipeline\":2}\n"
		    "{\"event\":\"start\",\"total_steps\":12,\"step\":5}\n"
		    "{\"event\":\"first_step\",\"step\":6,\"since_step_start_s\":2.1,\"since_process_start_s\":1,\"unix_time\":1010.6}\n");
	for (s = 6; s <= 12; s++)
		add_step(&b, s, 100.0 / (double)s);
	dt_buf_puts(&b, "{\"event\":\"eval\",\"step\":12,\"test_loss\":9,\"test_accuracy\":0.5,\"unix_time\":1011.3}\n"
		    "{\"event\":\"end\",\"step\":12,\"seconds\":3}\n{\"event\":\"step\",\"step\":13,\"lo");
	snprintf(path, sizeof(path), "%s/metrics.jsonl", dir);
	tu_write_path(path, b.p, 0644);
	snprintf(path, sizeof(path), "%s/events.jsonl", dir);
	tu_write_path(path, "{\"event\":\"job_start\",\"time\":998,\"job_id\":\"7\",\"restart\":0,\"nodes\":\"n[1-2]\",\"layout\":\"1x2\"}\n"
		      "{\"event\":\"term\",\"time\":1002.5,\"restart\":0,\"detail\":\"SIGTERM\"}\n"
		      "{\"event\":\"job_stop\",\"time\":1003,\"restart\":0,\"cause\":\"crash\",\"rank\":\"1\",\"node\":\"n2\",\"detail\":\"<exit 134>\"}\n"
		      "{\"event\":\"job_start\",\"time\":1008,\"job_id\":\"7\",\"restart\":1,\"nodes\":\"n1,n[3-4]\",\"layout\":\"1x2\"}\n"
		      "{\"event\":\"job_stop\",\"time\":1012,\"restart\":1,\"cause\":\"done\"}\n", 0644);
	dt_buf_free(&b);
	return dir;
}

static const struct launch__report_event *find(const struct launch__report *r,
					       enum launch__event_kind kind, int nth)
{
	size_t i;

	for (i = 0; i < r->n_events; i++)
		if (r->events[i].kind == kind && nth-- == 0)
			return &r->events[i];
	return NULL;
}

/* --- reading --- */

static void test_read(void **state)
{
	struct launch__report r;
	struct dt_err err = {0};
	const struct launch__report_event *e;

	(void)state;
	assert_int_equal(launch__report_read(write_run(), NULL, &r, &err), 0);
	assert_int_equal(r.n_steps, 15); /* the torn step 13 left out */
	assert_int_equal(r.skipped, 1);
	assert_int_equal(r.starts, 2);
	assert_true(r.ended);
	assert_int_equal(r.last_step, 12);
	assert_int_equal(r.n_evals, 1);
	assert_false(r.steps[7].redone);  /* step 8 of the first start */
	assert_true(r.steps[8].redone);   /* step 6 again */
	assert_false(r.steps[11].redone); /* step 9: new */
	e = find(&r, LAUNCH__EV_RESUME, 0);
	assert_non_null(e);
	assert_int_equal(e->start, 1); /* logged before the start it belongs to */
	assert_int_equal(e->redone, 3);
	/* the second start began 2.1 s (since its job step) before its first step */
	assert_true(fabs(e->time - 1008.5) < 1e-6);
	e = find(&r, LAUNCH__EV_CHECKPOINT, 0);
	assert_true(fabs(e->time - 1000.5) < 1e-6); /* the step logged before it */
	/* events.jsonl merged by time: the crash between the two starts */
	e = find(&r, LAUNCH__EV_JOB_STOP, 0);
	assert_string_equal(e->what, "crash");
	assert_string_equal(e->detail, "<exit 134>; rank 1 on node n2");
	assert_true(e > find(&r, LAUNCH__EV_START, 0) && e < find(&r, LAUNCH__EV_START, 1));
	assert_int_equal(find(&r, LAUNCH__EV_JOB_START, 1)->nodes, 3);
	assert_string_equal(find(&r, LAUNCH__EV_JOB_NOTE, 0)->what, "term");
	launch__report_free(&r);
}

static void test_missing(void **state)
{
	struct launch__report r;
	struct dt_err err = {0};
	char dir[600];

	(void)state;
	snprintf(dir, sizeof(dir), "%s/empty", tu_scratch());
	mkdir(dir, 0755);
	assert_int_equal(launch__report_read(dir, NULL, &r, &err), -ENOENT);
	assert_true(tu_has(&err, "empty/metrics.jsonl: no such file"));
	launch__report_free(&r);
	dt_err_clear(&err);
	assert_int_equal(launch__report_read(dir, "/nonexistent/spec.json", &r, &err), -ENOENT);
	assert_true(tu_has(&err, "/nonexistent/spec.json: cannot read the spec"));
	launch__report_free(&r);
}

/* --- goodput --- */

static void test_goodput(void **state)
{
	struct launch__report r;
	struct dt_err err = {0};
	const struct launch__goodput *g = &r.good;
	double used = 0;
	int k;

	(void)state;
	assert_int_equal(launch__report_read(write_run(), NULL, &r, &err), 0);
	assert_true(fabs(g->s[LAUNCH__G_PRODUCTIVE] - 1.2) < 1e-9); /* steps 1-8, 9-12 */
	assert_true(fabs(g->s[LAUNCH__G_REDONE] - 0.3) < 1e-9);     /* 6-8 again */
	assert_true(fabs(g->s[LAUNCH__G_SAVE] - 0.25) < 1e-9);
	/* start-up less the first step's own 0.1 s: 1.5 + 2.0 */
	assert_true(fabs(g->s[LAUNCH__G_STARTUP] - 3.5) < 1e-9);
	assert_true(g->has_alloc);
	assert_true(fabs(g->alloc_node_s - (5 * 2 + 4 * 3)) < 1e-9);
	/* the first start on 2 nodes, the second on 3 */
	assert_true(fabs(g->node_s[LAUNCH__G_REDONE] - 0.9) < 1e-9);
	for (k = 0; k < LAUNCH__G_N; k++)
		used += g->node_s[k];
	assert_true(fabs(g->idle_node_s - (22 - used)) < 1e-9);
	/* start by start: steps 1-8, a save, 1.5 s up; steps 6-12 (6-8
	 * redone), 2.0 s up; they add up to the sums */
	assert_non_null(g->per_start);
	assert_int_equal(r.starts, 2);
	assert_true(fabs(g->per_start[LAUNCH__G_PRODUCTIVE] - 0.8) < 1e-9);
	assert_true(fabs(g->per_start[LAUNCH__G_SAVE] - 0.25) < 1e-9);
	assert_true(fabs(g->per_start[LAUNCH__G_STARTUP] - 1.5) < 1e-9);
	assert_true(fabs(g->per_start[LAUNCH__G_N + LAUNCH__G_PRODUCTIVE] - 0.4) < 1e-9);
	assert_true(fabs(g->per_start[LAUNCH__G_N + LAUNCH__G_REDONE] - 0.3) < 1e-9);
	assert_true(fabs(g->per_start[LAUNCH__G_N + LAUNCH__G_STARTUP] - 2.0) < 1e-9);
	for (k = 0; k < LAUNCH__G_N; k++)
		assert_true(fabs(g->per_start[k] + g->per_start[LAUNCH__G_N + k] - g->s[k]) < 1e-9);
	launch__report_free(&r);
}

/* A start whose shell was killed before it wrote its job_stop (a
 * preemption): its allocation ends at its last event (the SIGTERM), not at
 * the newest time of the run. */
static void test_goodput_unstopped(void **state)
{
	struct launch__report r;
	struct dt_err err = {0};
	const char *dir = write_run();
	char path[700];

	(void)state;
	snprintf(path, sizeof(path), "%s/events.jsonl", dir);
	tu_write_path(path, "{\"event\":\"job_start\",\"time\":998,\"job_id\":\"7\",\"restart\":0,\"nodes\":\"n[1-2]\",\"layout\":\"1x2\"}\n"
		      "{\"event\":\"term\",\"time\":1002.5,\"restart\":0,\"detail\":\"SIGTERM\"}\n"
		      "{\"event\":\"job_start\",\"time\":1008,\"job_id\":\"7\",\"restart\":1,\"nodes\":\"n1,n[3-4]\",\"layout\":\"1x2\"}\n"
		      "{\"event\":\"job_stop\",\"time\":1012,\"restart\":1,\"cause\":\"done\"}\n", 0644);
	assert_int_equal(launch__report_read(dir, NULL, &r, &err), 0);
	assert_true(r.good.has_alloc);
	assert_true(fabs(r.good.alloc_node_s - (4.5 * 2 + 4 * 3)) < 1e-9);
	launch__report_free(&r);
}

/* Starts of the ranks after crashes in one allocation: the allocation
 * spans them and the batch script's pauses between them; a preempted one
 * (no job_stop) ends at the ranks' last exact time, its saved stop, not at
 * the next start's estimated time. */
static void test_goodput_allocations(void **state)
{
	struct launch__report r;
	struct dt_err err = {0};
	const char *dir = write_run();
	char path[700];
	struct dt_buf b = {0};
	long long s;

	(void)state;
	snprintf(path, sizeof(path), "%s/events.jsonl", dir);
	tu_write_path(path, "{\"event\":\"job_start\",\"time\":998,\"restart\":0,\"num_nodes\":2}\n"
		      "{\"event\":\"job_stop\",\"time\":1003,\"restart\":0,\"cause\":\"crash\",\"rank\":\"1\"}\n"
		      "{\"event\":\"job_start\",\"time\":1005,\"restart\":0,\"num_nodes\":2}\n"
		      "{\"event\":\"term\",\"time\":1006,\"restart\":0}\n"
		      "{\"event\":\"job_start\",\"time\":1008,\"restart\":1,\"num_nodes\":2}\n"
		      "{\"event\":\"job_stop\",\"time\":1012,\"restart\":1,\"cause\":\"done\"}\n"
		      /* resumed by hand days later: another job, whose restart count
		       * happens to equal the last one's */
		      "{\"event\":\"job_start\",\"time\":90000,\"job_id\":\"8\",\"restart\":1,\"num_nodes\":1}\n"
		      "{\"event\":\"job_stop\",\"time\":90003,\"job_id\":\"8\",\"restart\":1,\"cause\":\"done\"}\n", 0644);
	/* the first allocation's ranks saved at 1006.75 after the SIGTERM */
	dt_buf_puts(&b, "{\"event\":\"start\",\"total_steps\":12,\"step\":0}\n");
	for (s = 1; s <= 6; s++)
		add_step(&b, s, 1);
	dt_buf_puts(&b, "{\"event\":\"checkpoint\",\"step\":6,\"path\":\"c\",\"bytes\":1,\"stall_s\":0.1,\"unix_time\":1006.75}\n");
	/* the second allocation's start, estimated from its first step at
	 * 1007.9: before its job_start (1008), yet not the first's end */
	dt_buf_puts(&b, "{\"event\":\"resume\",\"step\":6,\"path\":\"c\",\"load_s\":0.1}\n"
		    "{\"event\":\"start\",\"total_steps\":12,\"step\":6}\n"
		    "{\"event\":\"first_step\",\"step\":7,\"since_step_start_s\":0.6,\"unix_time\":1008.5}\n");
	snprintf(path, sizeof(path), "%s/metrics.jsonl", dir);
	tu_write_path(path, b.p, 0644);
	dt_buf_free(&b);
	assert_int_equal(launch__report_read(dir, NULL, &r, &err), 0);
	assert_int_equal(r.good.allocations, 3);
	assert_true(fabs(r.good.alloc_node_s - (8.75 * 2 + 4 * 2 + 3 * 1)) < 1e-9);
	launch__report_free(&r);
}

/* --- queries --- */

static void test_queries(void **state)
{
	struct launch__report r;
	struct dt_err err = {0};
	char buf[3 * 40 + 1], small[8];

	(void)state;
	assert_int_equal(launch__report_read(write_run(), NULL, &r, &err), 0);
	assert_string_equal(launch__report_state(&r, buf, sizeof(buf)), "ended at step 12 of 12");
	/* 15 losses in 5 blocks, their means from 61 down to 9.1 */
	launch__report_sparkline(&r, 5, buf, sizeof(buf));
	assert_int_equal(strlen(buf), 15);
	assert_int_equal(strncmp(buf, "\u2588", 3), 0);
	assert_int_equal(strncmp(buf + 12, "\u2581", 3), 0);
	launch__report_sparkline(&r, 40, buf, sizeof(buf));
	assert_int_equal(strlen(buf), 3 * 15); /* no wider than the steps */
	launch__report_sparkline(&r, 40, small, sizeof(small));
	assert_int_equal(strlen(small), 6); /* what fits */
	assert_true(fabs(launch__report_median(&r, LAUNCH__T_COMPUTE) - 0.06) < 1e-12);
	assert_string_equal(launch__report_secs(0.0042, buf, sizeof(buf)), "4.2 ms");
	assert_string_equal(launch__report_secs(125, buf, sizeof(buf)), "2 min 05 s");
	launch__report_free(&r);
}

/* --- page --- */

static void test_page(void **state)
{
	struct launch__report r;
	struct dt_err err = {0};
	struct dt_buf page = {0};

	(void)state;
	assert_int_equal(launch__report_read(write_run(), NULL, &r, &err), 0);
	assert_int_equal(launch__report_html(&r, "RUNNING", &page), 0);
	assert_non_null(strstr(page.p, "<svg class=\"chart\" id=\"chart-loss-step\""));
	assert_non_null(strstr(page.p, "(log scale)")); /* the loss spans a decade */
	assert_non_null(strstr(page.p, "data-points=\"15\""));
	assert_non_null(strstr(page.p, "resumed from step 5, loaded in 500 ms; 3 steps redone"));
	assert_non_null(strstr(page.p, "job stopped: crash: &lt;exit 134&gt;; rank 1 on node n2"));
	assert_non_null(strstr(page.p, "<td>Slurm</td><td>RUNNING</td>"));
	/* the job's stop "done" drawn as a success, the crash as a failure */
	assert_non_null(strstr(page.p, "<tr class=\"ev ev-job_done\"><td>+14.0 s</td><td>job stopped: done</td>"));
	assert_non_null(strstr(page.p, "<path class=\"mark jobstop done\""));
	assert_non_null(strstr(page.p, "<tr class=\"ev ev-job_stop\"><td>+5.0 s</td><td>job stopped: crash"));
	/* wall time from the run's start (1.6 s before its first step), not from step 1 */
	assert_non_null(strstr(page.p, "wall time since the run started (s)"));
	assert_non_null(strstr(page.p, "<title>training loss at s 1.6: 100</title>"));
	assert_null(strstr(page.p, "<title>training loss at s 0: 100</title>"));
	assert_null(strstr(page.p, "<exit"));
	assert_null(strstr(page.p, "http:"));
	assert_null(strstr(page.p, "https:"));
	assert_null(strstr(page.p, "src="));
	assert_null(strstr(page.p, "href="));
	dt_buf_free(&page);
	launch__report_free(&r);
}

/* A run cancelled by the user at step 30 (its ranks stopped by SIGUSR1,
 * saved): named a cancel, from its job's job_stop "cancelled" or, without
 * an events.jsonl, from its cancel marker; a signal without either stays
 * a stop for a requeue. */
static const char *write_cancelled(const char *name, bool events, bool marker)
{
	static char dir[600];
	char path[700];
	struct dt_buf b = {0};

	snprintf(dir, sizeof(dir), "%s/%s", tu_scratch(), name);
	mkdir(dir, 0755);
	dt_buf_puts(&b, "{\"event\":\"start\",\"total_steps\":12,\"step\":0}\n");
	add_step(&b, 10, 3);
	add_step(&b, 30, 2);
	dt_buf_puts(&b, "{\"event\":\"stop\",\"step\":30,\"signal\":\"USR1\",\"unix_time\":1003.1}\n"
		    "{\"event\":\"checkpoint\",\"step\":30,\"bytes\":1024,\"stall_s\":0.1,\"async\":false}\n");
	snprintf(path, sizeof(path), "%s/metrics.jsonl", dir);
	tu_write_path(path, b.p, 0644);
	snprintf(path, sizeof(path), "%s/events.jsonl", dir);
	if (events)
		tu_write_path(path, "{\"event\":\"job_start\",\"time\":999,\"job_id\":\"9\",\"restart\":0,\"nodes\":\"n1\",\"layout\":\"1x1\"}\n"
			      "{\"event\":\"job_stop\",\"time\":1004,\"job_id\":\"9\",\"restart\":0,\"cause\":\"cancelled\",\"exit\":75}\n", 0644);
	snprintf(path, sizeof(path), "%s/cancel", dir);
	if (marker)
		tu_write_path(path, "", 0644);
	dt_buf_free(&b);
	return dir;
}

static void test_page_cancelled(void **state)
{
	static const struct { const char *name; bool events, marker, cancel; } runs[] = {
		{ "cancel-events", true, false, true },
		{ "cancel-marker", false, true, true },
		{ "stop-signal", false, false, false },
	};
	struct launch__report r;
	struct dt_err err = {0};
	struct dt_buf page = {0};
	char buf[160];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		assert_int_equal(launch__report_read(write_cancelled(runs[i].name, runs[i].events, runs[i].marker),
						     NULL, &r, &err), 0);
		assert_int_equal(launch__report_html(&r, "CANCELLED", &page), 0);
		launch__report_state(&r, buf, sizeof(buf));
		if (runs[i].cancel) {
			assert_string_equal(buf, "cancelled by the user at step 30 of 12 (saved; dtrain-submit resume continues it)");
			assert_non_null(strstr(page.p, "<tr class=\"ev ev-cancel\">"));
			assert_non_null(strstr(page.p, "cancelled by the user (dtrain-submit cancel) at step 30: saved, then stopped (SIGUSR1)"));
			assert_non_null(strstr(page.p, "<path class=\"mark stop cancel\""));
			assert_null(strstr(page.p, "exited for a requeue"));
		} else {
			assert_string_equal(buf, "stopped by SIGUSR1 at step 30 of 12 (saved; not restarted since)");
			assert_non_null(strstr(page.p, "stopped by SIGUSR1 at step 30: saved, exited for a requeue"));
			assert_null(strstr(page.p, "cancelled by the user"));
		}
		if (runs[i].events)
			assert_non_null(strstr(page.p, "<tr class=\"ev ev-job_cancelled\">"));
		page.len = 0;
		launch__report_free(&r);
	}
	dt_buf_free(&page);
}

/* --- every rank's part, MFU --- */

/* A "ranks" event of n ranks: rank i computes c + i ms of a 10 ms step,
 * its peak memory 100 + i MiB. */
static void add_ranks(struct dt_buf *b, long long step, long long steps, int n, double c)
{
	static const char *const keys[] = { "step_s", "compute_s", "pipe_wait_s", "grad_wait_s",
					    "data_s", "optim_s", "max_rss_mib" };
	size_t k;
	int i;

	dt_buf_printf(b, "{\"event\":\"ranks\",\"step\":%lld,\"steps\":%lld", step, steps);
	for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		dt_buf_printf(b, ",\"%s\":[", keys[k]);
		for (i = 0; i < n; i++)
			dt_buf_printf(b, "%s%g", i ? "," : "", k == 0 ? 0.01 : k == 1 ? (c + i) / 1e3 :
				      k == 6 ? 100.0 + i + c : 0.001);
		dt_buf_puts(b, "]");
	}
	dt_buf_puts(b, "}\n");
}

/* Two starts: 2 ranks, then 3 (a node named to need escaping), with MFU. */
static const char *write_ranks_run(void)
{
	static char dir[600];
	char path[700];
	struct dt_buf b = {0};

	snprintf(dir, sizeof(dir), "%s/ranks", tu_scratch());
	mkdir(dir, 0755);
	dt_buf_puts(&b, "{\"event\":\"start\",\"step\":0,\"device\":\"cpu\",\"flops_per_token\":1000,"
		    "\"nodes\":1,\"peak_flops_per_node\":2e12,\"peak\":\"measured\"}\n"
		    "{\"event\":\"layout\",\"stage\":[0,1],\"replica\":[0,0],\"node\":[\"n1\",\"n1\"]}\n");
	add_ranks(&b, 10, 10, 2, 1);
	add_step(&b, 10, 2);
	add_ranks(&b, 20, 10, 2, 3);
	add_step(&b, 20, 1.5);
	dt_buf_puts(&b, "{\"event\":\"start\",\"step\":20,\"device\":\"cpu\",\"flops_per_token\":1000,"
		    "\"nodes\":2,\"peak_flops_per_node\":3e12,\"peak\":\"declared\"}\n"
		    "{\"event\":\"layout\",\"stage\":[0,0,1],\"replica\":[0,1,0],\"node\":[\"n1\",\"<n2>\",\"<n2>\"]}\n");
	add_ranks(&b, 30, 10, 3, 2);
	add_ranks(&b, 35, 5, 2, 50); /* not this layout's ranks: left out */
	dt_buf_puts(&b, "{\"event\":\"step\",\"step\":60,\"steps\":30,\"loss\":1,\"tokens_per_s\":4e9,"
		    "\"mfu\":0.6667,\"time\":{\"step_s\":0.01},\"unix_time\":1010}\n");
	add_ranks(&b, 60, 30, 3, 6);
	snprintf(path, sizeof(path), "%s/metrics.jsonl", dir);
	tu_write_path(path, b.p, 0644);
	dt_buf_free(&b);
	return dir;
}

static void test_ranks(void **state)
{
	struct launch__report r;
	struct dt_err err = {0};
	struct dt_buf page = {0};
	const char *p;
	int rows = 0;

	(void)state;
	assert_int_equal(launch__report_read(write_ranks_run(), NULL, &r, &err), 0);
	/* the newest start's 3 ranks, over its two windows of 10 and 30 steps */
	assert_int_equal(r.ranks.n, 3);
	assert_int_equal(r.ranks.start, 1);
	assert_int_equal(r.ranks.stages, 2);
	assert_int_equal(r.ranks.windows, 2);
	assert_int_equal(r.ranks.steps, 40);
	assert_int_equal(r.ranks.stage[2], 1);
	assert_int_equal(r.ranks.replica[1], 1);
	assert_string_equal(r.ranks.node[1], "<n2>");
	/* rank 1: (3 ms x 10 + 7 ms x 30) / 40 */
	assert_true(fabs(r.ranks.t[1 * LAUNCH__T_N + LAUNCH__T_COMPUTE] - 0.006) < 1e-12);
	assert_true(fabs(r.ranks.t[2 * LAUNCH__T_N + LAUNCH__T_STEP] - 0.01) < 1e-12);
	assert_true(fabs(r.ranks.rss_mib[2] - 108) < 1e-12); /* the peak of its windows */
	/* MFU: the newest start's peak, the step's value */
	assert_true(fabs(r.peak_flops_node - 3e12) < 1);
	assert_string_equal(r.peak_source, "declared");
	assert_true(fabs(r.steps[r.n_steps - 1].mfu - 0.6667) < 1e-12);
	assert_true(isnan(r.steps[0].mfu));
	assert_int_equal(launch__report_html(&r, NULL, &page), 0);
	assert_non_null(strstr(page.p, "id=\"ranks\""));
	for (p = page.p; (p = strstr(p, "<g class=\"rank\" data-rank=")); p++)
		rows++;
	assert_int_equal(rows, 3);
	assert_non_null(strstr(page.p, "rank 1 · stage 0 · replica 1 · &lt;n2&gt;"));
	assert_non_null(strstr(page.p, "108 MiB"));
	assert_non_null(strstr(page.p, "id=\"chart-mfu\""));
	assert_non_null(strstr(page.p, "against 3 TFLOP/s a node, declared: resources.peak_tflops_per_node"));
	assert_null(strstr(page.p, "<n2>"));
	dt_buf_free(&page);
	launch__report_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read),
		cmocka_unit_test(test_missing),
		cmocka_unit_test(test_goodput),
		cmocka_unit_test(test_goodput_unstopped),
		cmocka_unit_test(test_goodput_allocations),
		cmocka_unit_test(test_queries),
		cmocka_unit_test(test_page),
		cmocka_unit_test(test_page_cancelled),
		cmocka_unit_test(test_ranks),
	};

	return cmocka_run_group_tests(tests, NULL, tu_teardown);
}
