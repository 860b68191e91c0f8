/*
 * report_html.c - the report of a run as one HTML page (report.h): the
 * run's name, model, layout, device and state; goodput; the curves against
 * step and against wall time; where a step's time goes; the run's life.
 * One file with its CSS and SVG inline and a few lines of script (a
 * crosshair on the charts) that the page does not need: it opens from a
 * file:// path with no network, and reads the same without scripts (every
 * point's value is in its SVG <title>).
 *
 * Sections: style, head, goodput, curves, step time, timeline, page.
 */
#include "launcher/report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --- style --- */

static const char css[] =
	"body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0 auto;"
	"max-width:1400px;padding:12px 24px;color:#1d2430;background:#fff}\n"
	"h1{font-size:22px;margin:8px 0 4px}h2{font-size:17px;margin:22px 0 6px;border-bottom:1px solid #d8dde6}\n"
	"table.info td{padding:1px 14px 1px 0;vertical-align:top}table.info td:first-child{color:#5a6475}\n"
	"table.events{border-collapse:collapse}table.events td,table.events th{padding:2px 10px;"
	"border-bottom:1px solid #eceff4;text-align:left}\n"
	".grid2{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:6px 18px}\n"
	"figure{margin:0}svg{width:100%;height:auto;font-size:12px}svg.stack,svg.timeline{max-width:1100px}\n"
	".plot{fill:#fbfcfe;stroke:#c9d0db}.grid{stroke:#e6e9ef}.tick{fill:#5a6475}"
	".axis{fill:#1d2430}.title{font-weight:600;font-size:14px}\n"
	".line{fill:none;stroke-width:1.6}.pt{fill-opacity:0;stroke:none}.pt.dot{fill-opacity:1}"
	".pt:hover{fill-opacity:1}\n"
	".xhair{stroke:#8a93a3;stroke-dasharray:3 3;pointer-events:none}\n"
	".alloc{fill:#cfd8e6}.startup{fill:#f2c37b}.train{fill:#5b8bd6}.mark{stroke:#fff;stroke-width:.5}"
	".ckpt{fill:#6b7a90}.stop{fill:#d2453b}.resume{fill:#2f9e64}.end{fill:#1d2430}.jobstop{fill:#a33}\n"
	".jobstop.done{fill:#2f9e64}.stop.cancel,.jobstop.cancelled{fill:#6b7a90}"
	".swatch{display:inline-block;width:14px;height:10px}\n"
	".ev-stop td,.ev-job_stop td{color:#b3261e}.ev-resume td,.ev-job_done td{color:#1b7a4a}"
	".ev-cancel td,.ev-job_cancelled td{color:#5a6475}.note{color:#5a6475}\n";

/* Hover: a crosshair where the pointer is. The page marks that it ran. */
static const char script[] =
	"(function(){document.documentElement.setAttribute('data-script','ran');\n"
	"document.querySelectorAll('svg.chart').forEach(function(s){\n"
	"var l=s.querySelector('.xhair');if(!l)return;\n"
	"s.addEventListener('mousemove',function(e){var p=s.createSVGPoint();p.x=e.clientX;p.y=e.clientY;\n"
	"var m=s.getScreenCTM();if(!m)return;var q=p.matrixTransform(m.inverse());\n"
	"l.setAttribute('x1',q.x);l.setAttribute('x2',q.x);l.style.display='';});\n"
	"s.addEventListener('mouseleave',function(){l.style.display='none';});});})();\n";

static const char *const palette[] = { "#2d6cdf", "#e0752d", "#2f9e64", "#b03aa8", "#c9a227",
				       "#6b7a90" };

/* --- head --- */

static int row(struct dt_buf *out, const char *key, const char *value)
{
	int rc = dt_buf_printf(out, "<tr><td>%s</td><td>", key);

	if (!rc)
		rc = launch__html_text(out, value);
	return rc ? rc : dt_buf_puts(out, "</td></tr>\n");
}

int launch__html_open(struct dt_buf *out, const char *title)
{
	int rc = dt_buf_puts(out, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
			     "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>");

	if (!rc)
		rc = launch__html_text(out, title);
	if (!rc)
		rc = dt_buf_printf(out, ": dtrain report</title>\n<style>\n%s</style></head>\n<body>\n<h1>", css);
	if (!rc)
		rc = launch__html_text(out, title);
	return rc ? rc : dt_buf_puts(out, "</h1>\n");
}

int launch__html_close(struct dt_buf *out, const char *note)
{
	return dt_buf_printf(out, "<p class=\"note\">%s</p>\n<script>\n%s</script>\n</body></html>\n", note,
			     script);
}

const char *launch__report_now(char *buf, size_t size)
{
	time_t t = time(NULL);
	struct tm tm;

	strftime(buf, size, "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&t, &tm));
	return buf;
}

static int head(struct dt_buf *out, const struct launch__report *r, const char *state)
{
	char b[512], now[64];
	int rc;

	launch__report_now(now, sizeof(now));
	rc = launch__html_open(out, r->name);
	if (!rc)
		rc = dt_buf_puts(out, "<table class=\"info\" id=\"info\">\n");
	if (!rc)
		rc = row(out, "status", launch__report_state(r, b, sizeof(b)));
	if (!rc && state)
		rc = row(out, "Slurm", state);
	if (!rc)
		rc = row(out, "model", r->model);
	if (!rc)
		rc = row(out, "layout", r->layout);
	if (!rc)
		rc = row(out, "device", r->device);
	snprintf(b, sizeof(b), "%d start%s, %zu step events, %zu evaluations%s", r->starts,
		 r->starts == 1 ? "" : "s", r->n_steps, r->n_evals,
		 r->skipped ? " (some lines not read: torn or not JSON)" : "");
	if (!rc)
		rc = row(out, "logged", b);
	if (!rc)
		rc = row(out, "run dir", r->run_dir);
	if (!rc)
		rc = row(out, "report written", now);
	return rc ? rc : dt_buf_puts(out, "</table>\n");
}

/* --- goodput --- */

static const char *const good_names[] = { "productive steps", "start-up", "saves", "work redone",
					 "idle" };
static const char *const good_notes[] = { "", " (each start of the ranks to its first step)",
					 " (training stalled for checkpoints)",
					 " (steps done again after a restart)" };
static const char *const good_ids[] = { "productive", "startup", "saves", "redone" };

/* The same, start by start, when the run started more than once */
static int per_start(struct dt_buf *out, const struct launch__report *r)
{
	const double *u = r->good.per_start;
	char a[LAUNCH__G_N][32];
	int k, rc;

	if (r->starts < 2 || !u)
		return 0;
	rc = dt_buf_puts(out, "<table class=\"info\" id=\"per-start\">\n<tr><th>start</th><th>from step</th>"
			      "<th>productive steps</th><th>start-up</th><th>saves</th><th>work redone</th></tr>\n");
	for (int i = 0; !rc && i < r->starts; i++) {
		long long from = -1;

		for (size_t e = 0; e < r->n_events; e++)
			if (r->events[e].kind == LAUNCH__EV_START && r->events[e].start == i) {
				from = r->events[e].step;
				break;
			}
		for (k = 0; k < LAUNCH__G_N; k++)
			launch__report_secs(u[(size_t)i * LAUNCH__G_N + (size_t)k], a[k], sizeof(a[k]));
		rc = dt_buf_printf(out, "<tr><td>%d</td><td>%lld</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
				   i + 1, from, a[LAUNCH__G_PRODUCTIVE], a[LAUNCH__G_STARTUP],
				   a[LAUNCH__G_SAVE], a[LAUNCH__G_REDONE]);
	}
	return rc ? rc : dt_buf_puts(out, "</table>\n");
}

static int goodput(struct dt_buf *out, const struct launch__report *r)
{
	static const char *const colors[] = { "#5b8bd6", "#f2c37b", "#6b7a90", "#d2453b", "#cfd8e6" };
	const struct launch__goodput *g = &r->good;
	double v[LAUNCH__G_N + 1], busy = 0;
	char a[32], b[32];
	int k, rc = dt_buf_puts(out, "<h2>Goodput</h2>\n<table class=\"info\" id=\"goodput\">\n");

	for (k = 0; !rc && k < LAUNCH__G_N; k++) {
		v[k] = g->has_alloc ? g->node_s[k] : g->s[k];
		busy += g->s[k];
		rc = dt_buf_printf(out, "<tr><td>%s</td><td id=\"%s\" data-s=\"%.3f\" data-node-s=\"%.3f\">%s<span class=\"note\">%s</span></td></tr>\n",
				   good_names[k], good_ids[k], g->s[k], g->node_s[k],
				   launch__report_secs(g->s[k], a, sizeof(a)), good_notes[k]);
	}
	v[LAUNCH__G_N] = g->idle_node_s;
	if (!rc && g->has_alloc)
		rc = dt_buf_printf(out, "<tr><td>allocated</td><td id=\"allocated\" data-node-s=\"%.3f\" data-idle-node-s=\"%.3f\">%s node-time, idle %s: "
				   "%.1f%% of it in productive steps</td></tr>\n",
				   g->alloc_node_s, g->idle_node_s,
				   launch__report_secs(g->alloc_node_s, a, sizeof(a)),
				   launch__report_secs(g->idle_node_s, b, sizeof(b)),
				   g->alloc_node_s > 0 ? 100 * g->node_s[LAUNCH__G_PRODUCTIVE] / g->alloc_node_s : 0);
	else if (!rc)
		rc = dt_buf_printf(out, "<tr><td>allocated</td><td class=\"note\">not known (no job_start/job_stop in events.jsonl): "
				   "%.1f%% of the %s the ranks were up was in productive steps</td></tr>\n",
				   busy > 0 ? 100 * g->s[LAUNCH__G_PRODUCTIVE] / busy : 0,
				   launch__report_secs(busy, a, sizeof(a)));
	if (!rc)
		rc = dt_buf_puts(out, "</table>\n");
	if (!rc)
		rc = launch__svg_stack(out, "stack-goodput", good_names, colors, v,
				       g->has_alloc ? LAUNCH__G_N + 1 : LAUNCH__G_N,
				       g->has_alloc ? "node-s" : "s");
	return rc ? rc : per_start(out, r);
}

/* --- curves --- */

/* The columns the charts draw, one entry per step (or eval) event. */
struct cols {
	double *step, *time, *loss, *lr, *gnorm, *thr, *mfu; /* [n_steps] */
	double *estep, *etime, *eloss, *ebpb, *eacc;     /* [n_evals] */
	int *part;         /* [n_steps]: the start of each step */
	double unit;       /* seconds per unit of the time axis */
	const char *uname; /* "s", "min", "h" */
};

static int cols_make(const struct launch__report *r, struct cols *c)
{
	double t0 = INFINITY, t1 = -INFINITY;
	size_t i, ns = r->n_steps + 1, ne = r->n_evals + 1;
	double *all = malloc((7 * ns + 5 * ne) * sizeof(double));

	c->part = malloc(ns * sizeof(int));
	if (!all || !c->part) {
		free(all);
		free(c->part);
		return -ENOMEM;
	}
	c->step = all, c->time = all + ns, c->loss = all + 2 * ns, c->lr = all + 3 * ns;
	c->gnorm = all + 4 * ns, c->thr = all + 5 * ns, c->mfu = all + 6 * ns;
	c->estep = all + 7 * ns, c->etime = c->estep + ne, c->eloss = c->estep + 2 * ne;
	c->ebpb = c->estep + 3 * ne, c->eacc = c->estep + 4 * ne;
	for (i = 0; i < r->n_steps; i++)
		if (isfinite(r->steps[i].unix_time))
			t0 = fmin(t0, r->steps[i].unix_time), t1 = fmax(t1, r->steps[i].unix_time);
	for (i = 0; i < r->n_events; i++) /* from the run's start, not its first logged step */
		if (r->events[i].kind == LAUNCH__EV_START && isfinite(r->events[i].time))
			t0 = fmin(t0, r->events[i].time);
	c->unit = t1 - t0 > 7200 ? 3600 : t1 - t0 > 120 ? 60 : 1;
	c->uname = c->unit == 3600 ? "h" : c->unit == 60 ? "min" : "s";
	for (i = 0; i < r->n_steps; i++) {
		const struct launch__report_step *s = &r->steps[i];

		c->step[i] = (double)s->step;
		c->part[i] = s->start;
		c->time[i] = (s->unix_time - t0) / c->unit;
		c->loss[i] = s->loss;
		c->lr[i] = s->lr;
		c->gnorm[i] = s->grad_norm;
		c->thr[i] = r->gpt ? s->tokens_per_s : s->samples_per_s;
		c->mfu[i] = isfinite(s->mfu) ? 100 * s->mfu : NAN;
	}
	for (i = 0; i < r->n_evals; i++) {
		const struct launch__report_eval *e = &r->evals[i];

		c->estep[i] = (double)e->step;
		c->etime[i] = (e->unix_time - t0) / c->unit;
		c->eloss[i] = e->test_loss;
		c->ebpb[i] = e->bits_per_byte;
		c->eacc[i] = isfinite(e->test_accuracy) ? 100 * e->test_accuracy : NAN;
	}
	return 0;
}

/* More than a decade between the lowest and highest positive value. */
static bool spans_decade(const double *v, size_t n)
{
	double lo = INFINITY, hi = -INFINITY;
	size_t i;

	for (i = 0; i < n; i++)
		if (isfinite(v[i]) && v[i] > 0)
			lo = fmin(lo, v[i]), hi = fmax(hi, v[i]);
	return lo < hi && hi / lo > 10;
}

static bool any(const double *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (isfinite(v[i]))
			return true;
	return false;
}

/* A chart of one or two series (the second: evaluations, as dots). */
static int chart(struct dt_buf *out, const char *id, const char *title, const char *xlabel,
		 const char *xname, const char *ylabel, bool logy, const struct launch__svg_series *s,
		 size_t n)
{
	struct launch__svg_chart c = { .id = id, .title = title, .xlabel = xlabel, .xname = xname,
				       .ylabel = ylabel, .logy = logy, .series = s, .n_series = n };

	return launch__svg_chart(out, &c);
}

static int loss_charts(struct dt_buf *out, const struct launch__report *r, const struct cols *c)
{
	const char *vname = r->gpt ? "validation loss" : "test loss";
	bool logy = spans_decade(c->loss, r->n_steps) || spans_decade(c->eloss, r->n_evals);
	struct launch__svg_series s[2] = {
		{ "training loss", c->step, c->loss, r->n_steps, palette[0], false, c->part },
		{ vname, c->estep, c->eloss, r->n_evals, palette[1], true, NULL },
	};
	char xl[64];
	size_t n = any(c->eloss, r->n_evals) ? 2 : 1;
	int rc;

	rc = chart(out, "chart-loss-step", "Loss against step", "step (optimizer steps)", "step",
		   "loss (nats)", logy, s, n);
	s[0].x = c->time;
	s[1].x = c->etime;
	snprintf(xl, sizeof(xl), "wall time since the run started (%s)", c->uname);
	if (!rc)
		rc = chart(out, "chart-loss-time", "Loss against wall time", xl, c->uname, "loss (nats)",
			   logy, s, n);
	if (!rc && any(c->ebpb, r->n_evals)) {
		struct launch__svg_series b = { "validation bits per byte", c->estep, c->ebpb, r->n_evals,
						palette[2], true, NULL };

		rc = chart(out, "chart-bpb", "Validation bits per byte", "step (optimizer steps)", "step",
			   "bits per byte", false, &b, 1);
	}
	if (!rc && any(c->eacc, r->n_evals)) {
		struct launch__svg_series a = { r->gpt ? "next-token accuracy" : "test accuracy", c->estep,
						c->eacc, r->n_evals, palette[3], true, NULL };

		rc = chart(out, "chart-acc", r->gpt ? "Validation next-token accuracy" : "Test accuracy",
			   "step (optimizer steps)", "step", "accuracy (%)", false, &a, 1);
	}
	return rc;
}

/* Model FLOPs utilization (a GPT's), and the peak it is measured against. */
static int mfu_chart(struct dt_buf *out, const struct launch__report *r, const struct cols *c)
{
	struct launch__svg_series m = { "MFU", c->step, c->mfu, r->n_steps, palette[5], false,
					c->part };
	char title[160];

	snprintf(title, sizeof(title), "Model FLOPs utilization (against %.4g TFLOP/s a node, %s)",
		 r->peak_flops_node / 1e12, !strcmp(r->peak_source, "declared") ?
		 "declared: resources.peak_tflops_per_node" : "measured at start");
	return chart(out, "chart-mfu", title, "step (optimizer steps)", "step",
		     "MFU (% of the peak)", false, &m, 1);
}

static int curves(struct dt_buf *out, const struct launch__report *r)
{
	struct cols c = {0};
	struct launch__svg_series lr = { "learning rate", NULL, NULL, r->n_steps, palette[4], false, NULL };
	struct launch__svg_series gn = { "gradient norm", NULL, NULL, r->n_steps, palette[3], false, NULL };
	struct launch__svg_series th = { r->gpt ? "tokens/s" : "samples/s", NULL, NULL, r->n_steps,
					 palette[2], false, NULL };
	int rc = cols_make(r, &c);

	if (rc)
		return rc;
	lr.x = gn.x = th.x = c.step;
	lr.y = c.lr, gn.y = c.gnorm, th.y = c.thr;
	lr.part = gn.part = th.part = c.part;
	rc = dt_buf_puts(out, "<h2>Curves</h2>\n<div class=\"grid2\">\n");
	if (!rc)
		rc = loss_charts(out, r, &c);
	if (!rc && any(c.lr, r->n_steps))
		rc = chart(out, "chart-lr", "Learning rate", "step (optimizer steps)", "step",
			   "learning rate", false, &lr, 1);
	if (!rc && any(c.gnorm, r->n_steps))
		rc = chart(out, "chart-gnorm", "Gradient norm (before clipping)", "step (optimizer steps)",
			   "step", "global L2 norm", spans_decade(c.gnorm, r->n_steps), &gn, 1);
	if (!rc && any(c.thr, r->n_steps))
		rc = chart(out, "chart-throughput", "Throughput", "step (optimizer steps)", "step",
			   r->gpt ? "tokens per second" : "samples per second", false, &th, 1);
	if (!rc && any(c.mfu, r->n_steps))
		rc = mfu_chart(out, r, &c);
	if (!rc)
		rc = dt_buf_puts(out, "</div>\n");
	free(c.step);
	free(c.part);
	return rc;
}

/* --- step time --- */

/* The pipeline bubble: measured pipeline wait per unit of compute against
 * the schedule's ideal (p-1)/m (Narayanan et al. 2021, "Efficient
 * large-scale language model training on GPU clusters", section 2.2). */
static int bubble(struct dt_buf *out, const struct launch__report *r, const double *med)
{
	double ideal = r->micro_batches > 0 ? (double)(r->pipeline - 1) / r->micro_batches : NAN;
	double got = med[LAUNCH__T_COMPUTE] > 0 ? med[LAUNCH__T_PIPE] / med[LAUNCH__T_COMPUTE] : NAN;
	static const char *const names[] = { "measured: pipeline wait / compute", "ideal: (p-1)/m" };
	static const char *const colors[] = { "#e0752d", "#2f9e64" };
	int rc;

	if (r->pipeline <= 1)
		return dt_buf_printf(out, "<p class=\"note\" id=\"bubble\">one pipeline stage%s: no pipeline bubble</p>\n",
				     r->pipeline ? "" : " (or the spec is unknown)");
	rc = dt_buf_printf(out, "<p id=\"bubble\">pipeline bubble: waits %.3g of the compute time (medians), "
			   "against (p-1)/m = (%d-1)/%d = %.3g for the schedule's ideal "
			   "<span class=\"note\">(Narayanan et al. 2021; waits include load imbalance between stages)</span></p>\n",
			   got, r->pipeline, r->micro_batches, ideal);
	if (!rc && isfinite(got)) {
		double v[2] = { got, ideal };
		size_t k;

		for (k = 0; !rc && k < 2; k++) /* one bar each, on the same scale */
			rc = dt_buf_printf(out, "<svg class=\"stack\" viewBox=\"0 0 1100 26\" role=\"img\"><rect x=\"10\" y=\"4\" width=\"%.1f\" height=\"16\" fill=\"%s\"><title>%s: %.3g</title></rect>"
					   "<text x=\"%.1f\" y=\"17\" class=\"tick\">%s %.3g</text></svg>\n",
					   fmax(1, 300 * v[k] / fmax(v[0], v[1])), colors[k], names[k], v[k],
					   16 + 300 * v[k] / fmax(v[0], v[1]), names[k], v[k]);
	}
	return rc;
}

static int step_time(struct dt_buf *out, const struct launch__report *r)
{
	static const char *const names[] = { "compute", "pipeline wait", "gradient wait", "data",
					     "optimizer", "other" };
	static const char *const colors[] = { "#5b8bd6", "#e0752d", "#b03aa8", "#c9a227", "#2f9e64",
					      "#c9d0db" };
	double med[LAUNCH__T_N], v[6], parts = 0;
	char b[32];
	int k, rc;

	if (r->n_steps == 0)
		return 0;
	for (k = 0; k < LAUNCH__T_N; k++)
		med[k] = launch__report_median(r, k);
	for (k = 1; k < LAUNCH__T_N; k++) {
		v[k - 1] = med[k];
		parts += isfinite(med[k]) ? med[k] : 0;
	}
	v[5] = isfinite(med[0]) && med[0] > parts ? med[0] - parts : 0;
	rc = dt_buf_printf(out, "<h2>Where a step's time goes</h2>\n<p>median step %s; each part the median over the step events of the mean over all ranks "
			   "<span class=\"note\">(\"other\": the step's time not in the parts)</span></p>\n",
			   launch__report_secs(med[0], b, sizeof(b)));
	if (!rc)
		rc = launch__svg_stack(out, "stack-step", names, colors, v, 6, "s per step");
	if (!rc)
		rc = bubble(out, r, med);
	return rc ? rc : launch__svg_ranks(out, &r->ranks);
}

/* --- timeline --- */

/* One event as a line of the table. */
static int event_text(struct dt_buf *t, const struct launch__report_event *e)
{
	char a[32];

	switch (e->kind) {
	case LAUNCH__EV_START:
		return dt_buf_printf(t, "start %d at step %lld (%s)", e->start + 1, e->step, e->detail);
	case LAUNCH__EV_RESUME:
		return dt_buf_printf(t, "resumed from step %lld, loaded in %s; %lld steps redone (%s)",
				     e->step, launch__report_secs(e->seconds, a, sizeof(a)), e->redone, e->detail);
	case LAUNCH__EV_INIT_FROM:
		return dt_buf_printf(t, "initialised from step %lld of %s", e->step, e->detail);
	case LAUNCH__EV_FIRST_STEP:
		return dt_buf_printf(t, "first step (%lld), %s after the process started", e->step,
				     launch__report_secs(e->seconds, a, sizeof(a)));
	case LAUNCH__EV_CHECKPOINT:
		return dt_buf_printf(t, "checkpoint at step %lld: %.2f MiB, training stalled %s (%s)", e->step,
				     e->bytes / 1048576.0, launch__report_secs(e->seconds, a, sizeof(a)), e->what);
	case LAUNCH__EV_STOP:
		if (e->cancelled)
			return dt_buf_printf(t, "cancelled by the user (dtrain-submit cancel) at step %lld: saved, then stopped (%s)",
					     e->step, e->what);
		return dt_buf_printf(t, "stopped by %s at step %lld: saved, exited for a requeue", e->what, e->step);
	case LAUNCH__EV_END:
		return dt_buf_printf(t, "end at step %lld", e->step);
	case LAUNCH__EV_JOB_START:
		return dt_buf_printf(t, "job %s started (restart %lld): %s", e->what, e->step, e->detail);
	case LAUNCH__EV_JOB_STOP:
		return dt_buf_printf(t, "job stopped: %s%s%s", e->what, *e->detail ? ": " : "", e->detail);
	case LAUNCH__EV_JOB_NOTE:
		return dt_buf_printf(t, "job: %s%s%s", e->what, *e->detail ? ": " : "", e->detail);
	}
	return 0;
}

static const char *const kind_names[] = { "start", "resume", "init_from", "first_step",
					  "checkpoint", "stop", "end", "job_start", "job_stop", "job_note" };

/* A row's class: its kind's, but a cancel's stop and a job's stop whose
 * cause is done or cancelled (drawn as no failure) have their own */
static const char *row_class(const struct launch__report_event *e)
{
	if (e->kind == LAUNCH__EV_STOP && e->cancelled)
		return "cancel";
	if (e->kind == LAUNCH__EV_JOB_STOP && !strcmp(e->what, "done"))
		return "job_done";
	if (e->kind == LAUNCH__EV_JOB_STOP && !strcmp(e->what, "cancelled"))
		return "job_cancelled";
	return kind_names[e->kind];
}

static int timeline(struct dt_buf *out, const struct launch__report *r)
{
	struct dt_buf t = {0};
	double t0 = NAN;
	size_t i;
	int rc;

	rc = dt_buf_puts(out, "<h2>Timeline</h2>\n");
	if (!rc)
		rc = launch__svg_timeline(out, r);
	if (!rc)
		rc = dt_buf_puts(out, "<table class=\"events\" id=\"events\"><tr><th>time</th><th>event</th></tr>\n");
	for (i = 0; i < r->n_events && isnan(t0); i++)
		t0 = r->events[i].time;
	for (i = 0; !rc && i < r->n_events; i++) {
		const struct launch__report_event *e = &r->events[i];
		char when[32];

		t.len = 0;
		rc = event_text(&t, e);
		if (isfinite(e->time) && isfinite(t0))
			snprintf(when, sizeof(when), "%s+%.1f s", e->time_exact ? "" : "~", e->time - t0);
		else
			snprintf(when, sizeof(when), "-");
		if (!rc)
			rc = dt_buf_printf(out, "<tr class=\"ev ev-%s\"><td>%s</td><td>", row_class(e), when);
		if (!rc)
			rc = launch__html_text(out, dt_buf_str(&t));
		if (!rc)
			rc = dt_buf_puts(out, "</td></tr>\n");
	}
	dt_buf_free(&t);
	if (!rc)
		rc = dt_buf_puts(out, "</table>\n<p class=\"note\">~: estimated from the step logged before (the event carries no time)</p>\n");
	return rc;
}

/* --- page --- */

int launch__report_html(const struct launch__report *r, const char *state, struct dt_buf *out)
{
	char note[160];
	int rc = head(out, r, state);

	if (!rc)
		rc = goodput(out, r);
	if (!rc)
		rc = curves(out, r);
	if (!rc)
		rc = step_time(out, r);
	if (!rc)
		rc = timeline(out, r);
	snprintf(note, sizeof(note), "written by dtrain-submit report from the run dir's metrics.jsonl%s%s",
		 r->has_spec ? ", its spec" : "", r->good.has_alloc ? " and events.jsonl" : "");
	if (!rc)
		rc = launch__html_close(out, note);
	return rc ? -ENOMEM : 0;
}
