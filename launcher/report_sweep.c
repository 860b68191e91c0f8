/*
 * report_sweep.c - the report of a sweep (`dtrain-submit report SWEEP`):
 * one page with the table `status SWEEP` prints (sweep_status.c) and every
 * task's curves on shared axes: training loss and validation loss against
 * step, training loss against wall time since each task started. A task
 * has one colour in every chart and in the table; each task's run is read
 * as a run's report reads it (report.c).
 *
 * Sections: the tasks read, the table, the curves, the page.
 */
#include "launcher/launch.h"
#include "launcher/internal.h"
#include "launcher/report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const colors[] = { "#2d6cdf", "#e0752d", "#2f9e64", "#b03aa8", "#c9a227",
				      "#17a2b8", "#d2453b", "#6b7a90", "#8c564b", "#1d2430" };
#define N_COLORS (sizeof(colors) / sizeof(colors[0]))

/* --- the tasks read --- */

/* One task's run and its columns for the charts */
struct task_run {
	long k;
	bool read;          /* its run was read and has a step */
	struct launch__report r;
	double *step, *time, *loss; /* [r.n_steps]; time in seconds since it started */
	int *part;          /* [r.n_steps]: the start of each step */
	double *estep, *eloss; /* [r.n_evals] */
	char name[32];      /* "task 3" */
};

static const char *task_color(long k)
{
	return colors[(size_t)k % N_COLORS];
}

/* The columns of t's run; its time from its first start of the ranks (or
 * first step) */
static int columns(struct task_run *t)
{
	const struct launch__report *r = &t->r;
	size_t i, ns = r->n_steps + 1, ne = r->n_evals + 1;
	double t0 = INFINITY;

	t->step = malloc((3 * ns + 2 * ne) * sizeof(double));
	t->part = malloc(ns * sizeof(int));
	if (!t->step || !t->part)
		return -ENOMEM;
	t->time = t->step + ns, t->loss = t->step + 2 * ns;
	t->estep = t->step + 3 * ns, t->eloss = t->estep + ne;
	for (i = 0; i < r->n_steps; i++)
		if (isfinite(r->steps[i].unix_time))
			t0 = fmin(t0, r->steps[i].unix_time);
	for (i = 0; i < r->n_events; i++)
		if (r->events[i].kind == LAUNCH__EV_START && isfinite(r->events[i].time))
			t0 = fmin(t0, r->events[i].time);
	for (i = 0; i < r->n_steps; i++) {
		t->step[i] = (double)r->steps[i].step;
		t->time[i] = r->steps[i].unix_time - t0;
		t->loss[i] = r->steps[i].loss;
		t->part[i] = r->steps[i].start;
	}
	for (i = 0; i < r->n_evals; i++) {
		t->estep[i] = (double)r->evals[i].step;
		t->eloss[i] = r->evals[i].test_loss;
	}
	return 0;
}

/* Task k's run; a task with no metrics yet is not read, one that cannot
 * be read is a line in warn */
static int read_task(const struct launch_job *sweep, long k, struct task_run *t, struct dt_err *warn)
{
	struct launch_job job;
	struct dt_err e = {0};
	int rc;

	t->k = k;
	snprintf(t->name, sizeof(t->name), "task %ld", k);
	if (launch_sweep_task(sweep, k, &job) != 0)
		return 0;
	rc = launch__report_read(job.run_dir, NULL, &t->r, &e);
	if (rc && rc != -ENOENT && rc != -ENOMEM)
		dt_err_add(warn, "task %ld: %s", k, e.msg);
	launch_job_free(&job);
	if (rc)
		return rc == -ENOMEM ? rc : 0;
	t->read = t->r.n_steps > 0;
	return t->read ? columns(t) : 0;
}

static void tasks_free(struct task_run *t, size_t n)
{
	size_t i;

	for (i = 0; t && i < n; i++) {
		launch__report_free(&t[i].r);
		free(t[i].step);
		free(t[i].part);
	}
	free(t);
}

/* --- the table --- */

static int cell(struct dt_buf *out, const char *tag, const char *s)
{
	int rc = dt_buf_printf(out, "<%s>", tag);

	if (!rc)
		rc = launch__html_text(out, s ? s : "?");
	return rc ? rc : dt_buf_printf(out, "</%s>", tag);
}

/* The table of status SWEEP, each row with its task's colour */
static int table(struct dt_buf *out, const struct launch__sweep_table *tab)
{
	size_t i, c;
	int rc = dt_buf_puts(out, "<h2>Tasks</h2>\n<table class=\"events\" id=\"tasks\"><tr><th></th>");

	for (c = 0; !rc && c < tab->cols; c++)
		rc = cell(out, "th", tab->title[c]);
	if (!rc)
		rc = dt_buf_puts(out, "</tr>\n");
	for (i = 0; !rc && i < tab->n; i++) {
		rc = dt_buf_printf(out, "<tr class=\"task\"><td><span class=\"swatch\" style=\"background:%s\"></span></td>",
				   task_color(tab->rows[i].k));
		for (c = 0; !rc && c < tab->cols; c++)
			rc = cell(out, "td", tab->rows[i].col[c]);
		if (!rc)
			rc = dt_buf_puts(out, "</tr>\n");
	}
	if (!rc)
		rc = dt_buf_puts(out, "</table>\n<p class=\"note\">best validation loss first; a task resumed as another job says which</p>\n");
	if (!rc && tab->unreachable)
		rc = dt_buf_puts(out, "<p class=\"note\">Slurm did not answer: the states are unknown</p>\n");
	return rc;
}

/* --- the curves --- */

/* More than a decade between the tasks' lowest and highest loss */
static bool losses_span_decade(const struct task_run *t, size_t n)
{
	double lo = INFINITY, hi = -INFINITY;
	size_t i, j;

	for (i = 0; i < n; i++)
		for (j = 0; t[i].read && j < t[i].r.n_steps; j++)
			if (isfinite(t[i].loss[j]) && t[i].loss[j] > 0)
				lo = fmin(lo, t[i].loss[j]), hi = fmax(hi, t[i].loss[j]);
	return lo < hi && hi / lo > 10;
}

/* The longest task in seconds, for the unit of the time axis */
static double longest(const struct task_run *t, size_t n)
{
	double m = 0;
	size_t i, j;

	for (i = 0; i < n; i++)
		for (j = 0; t[i].read && j < t[i].r.n_steps; j++)
			if (isfinite(t[i].time[j]))
				m = fmax(m, t[i].time[j]);
	return m;
}

/* One chart with a series per task read: what picks x, y and the
 * points' count from a task; evals are drawn as dots */
static int task_chart(struct dt_buf *out, struct launch__svg_chart *c, struct task_run *t, size_t n,
		      bool evals, bool by_time)
{
	struct launch__svg_series *s = calloc(n ? n : 1, sizeof(*s));
	size_t i, m = 0;
	int rc;

	if (!s)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		if (!t[i].read || (evals && !t[i].r.n_evals))
			continue;
		s[m] = (struct launch__svg_series){ t[i].name, evals ? t[i].estep : by_time ? t[i].time : t[i].step,
						    evals ? t[i].eloss : t[i].loss,
						    evals ? t[i].r.n_evals : t[i].r.n_steps, task_color(t[i].k),
						    evals, evals ? NULL : t[i].part };
		m++;
	}
	c->series = s;
	c->n_series = m;
	rc = m ? launch__svg_chart(out, c) : 0;
	free(s);
	return rc;
}

static int curves(struct dt_buf *out, struct task_run *t, size_t n)
{
	double span = longest(t, n), unit = span > 7200 ? 3600 : span > 120 ? 60 : 1;
	const char *uname = unit == 3600 ? "h" : unit == 60 ? "min" : "s";
	bool logy = losses_span_decade(t, n);
	char xl[64];
	size_t i, j;
	int rc;

	for (i = 0; i < n; i++)
		for (j = 0; t[i].read && j < t[i].r.n_steps; j++)
			t[i].time[j] /= unit;
	snprintf(xl, sizeof(xl), "wall time since the task started (%s)", uname);
	rc = dt_buf_puts(out, "<h2>Curves</h2>\n<div class=\"grid2\">\n");
	if (!rc)
		rc = task_chart(out, &(struct launch__svg_chart){ "chart-loss-step", "Training loss against step",
				"step (optimizer steps)", "loss (nats)", "step", logy, NULL, 0 }, t, n, false, false);
	if (!rc)
		rc = task_chart(out, &(struct launch__svg_chart){ "chart-val-step", "Validation loss against step",
				"step (optimizer steps)", "loss (nats)", "step", false, NULL, 0 }, t, n, true, false);
	if (!rc)
		rc = task_chart(out, &(struct launch__svg_chart){ "chart-loss-time", "Training loss against wall time",
				xl, "loss (nats)", uname, logy, NULL, 0 }, t, n, false, true);
	return rc ? rc : dt_buf_puts(out, "</div>\n");
}

/* --- the page --- */

static int info_row(struct dt_buf *out, const char *key, const char *value)
{
	int rc = dt_buf_printf(out, "<tr><td>%s</td><td>", key);

	if (!rc)
		rc = launch__html_text(out, value);
	return rc ? rc : dt_buf_puts(out, "</td></tr>\n");
}

static int head(struct dt_buf *out, const struct launch_job *sweep, const struct task_run *t, size_t n)
{
	char title[200], b[96];
	size_t i, read = 0;
	int rc;

	for (i = 0; i < n; i++)
		read += t[i].read;
	snprintf(title, sizeof(title), "sweep %s", sweep->name ? sweep->name : sweep->id);
	rc = launch__html_open(out, title);
	if (!rc)
		rc = dt_buf_puts(out, "<table class=\"info\" id=\"info\">\n");
	if (!rc)
		rc = info_row(out, "sweep", sweep->id);
	snprintf(b, sizeof(b), "%zu, %zu with steps logged", n, read);
	if (!rc)
		rc = info_row(out, "tasks", b);
	if (!rc)
		rc = info_row(out, "sweep dir", sweep->run_dir);
	if (!rc)
		rc = info_row(out, "report written", launch__report_now(b, sizeof(b)));
	return rc ? rc : dt_buf_puts(out, "</table>\n");
}

int launch__report_sweep(const struct launch_job *sweep, struct dt_buf *out, struct dt_err *warn,
			 struct dt_err *err)
{
	struct launch__sweep_table tab;
	struct task_run *t = NULL;
	size_t i;
	int rc = launch__sweep_table(sweep, &tab, warn, err);

	if (rc)
		goto out;
	t = calloc(tab.n ? tab.n : 1, sizeof(*t));
	rc = t ? 0 : -ENOMEM;
	for (i = 0; !rc && i < tab.n; i++)
		rc = read_task(sweep, (long)i, &t[i], warn);
	if (!rc)
		rc = head(out, sweep, t, tab.n);
	if (!rc)
		rc = table(out, &tab);
	if (!rc)
		rc = curves(out, t, tab.n);
	if (!rc)
		rc = launch__html_close(out, "written by dtrain-submit report from the sweep&#39;s sweep.json and each task&#39;s metrics.jsonl");
	if (rc)
		dt_err_add(err, "%s: out of memory for the report", sweep->run_dir);
out:
	tasks_free(t, tab.n);
	launch__sweep_table_free(&tab);
	return rc;
}
