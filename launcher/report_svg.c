/*
 * report_svg.c - the report's pictures as inline SVG (report.h): line
 * charts with axes, ticks, a legend and a hover <title> per point; a
 * stacked bar; the run's timeline. Everything is drawn in a fixed view box
 * and scales with the page; nothing is fetched, no script is needed (the
 * page adds a crosshair where scripts run).
 *
 * Sections: text, scales, line charts, stacked bar, timeline.
 */
#include "launcher/report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define W 680.0        /* view box of a chart */
#define H 300.0
#define ML 72.0        /* margins: left (y ticks), right, top (title, legend), bottom */
#define MR 16.0
#define MT 48.0
#define MB 44.0
#define MAX_TICKS 12
#define WW 1100.0      /* view box width of the bars and the timeline: they
			* span the page, their text keeps the charts' size */

/* --- text --- */

int launch__html_text(struct dt_buf *out, const char *s)
{
	int rc = 0;

	for (; *s && !rc; s++) {
		switch (*s) {
		case '&': rc = dt_buf_puts(out, "&amp;"); break;
		case '<': rc = dt_buf_puts(out, "&lt;"); break;
		case '>': rc = dt_buf_puts(out, "&gt;"); break;
		case '"': rc = dt_buf_puts(out, "&quot;"); break;
		case '\'': rc = dt_buf_puts(out, "&#39;"); break;
		default: rc = dt_buf_add(out, s, 1); break;
		}
	}
	return rc;
}

/* A value as the page shows it: 4 significant digits. */
static const char *val(double v, char *buf, size_t size)
{
	snprintf(buf, size, "%.4g", v);
	return buf;
}

/* A tick's label: short, 150k rather than 1.5e+05. */
static const char *tick(double v, char *buf, size_t size)
{
	if (fabs(v) >= 1e6 && fabs(v) < 1e15)
		snprintf(buf, size, "%gM", v / 1e6);
	else if (fabs(v) >= 1e4 && fabs(v) < 1e6)
		snprintf(buf, size, "%gk", v / 1e3);
	else
		snprintf(buf, size, "%g", v);
	return buf;
}

/* --- scales --- */

struct scale {
	double lo, hi;   /* data range shown */
	double a, b;     /* pixel range */
	bool log;
};

static double px(const struct scale *s, double v)
{
	double f = s->log ? (log10(v) - log10(s->lo)) / (log10(s->hi) - log10(s->lo)) :
			    (v - s->lo) / (s->hi - s->lo);

	return s->a + f * (s->b - s->a);
}

/* Ticks at 1, 2 or 5 times a power of ten, about 5 of them, into t[];
 * the range widened to whole ticks. Returns how many. */
static int linear_ticks(struct scale *s, double *t)
{
	double span = s->hi - s->lo, step, mag;
	int n = 0;

	if (!(span > 0)) {
		double pad = s->lo ? fabs(s->lo) * 0.1 : 1;

		s->lo -= pad;
		s->hi += pad;
		span = s->hi - s->lo;
	}
	mag = pow(10, floor(log10(span / 5)));
	step = span / mag / 5 >= 5 ? 10 * mag : span / mag / 5 >= 2 ? 5 * mag :
	       span / mag / 5 >= 1 ? 2 * mag : mag;
	s->lo = floor(s->lo / step) * step;
	s->hi = ceil(s->hi / step) * step;
	for (double v = s->lo; v <= s->hi + step / 2 && n < MAX_TICKS; v += step)
		t[n++] = fabs(v) < step * 1e-9 ? 0 : v;
	return n;
}

/* Decades (and 2, 5 within them when few), the range widened to them. */
static int log_ticks(struct scale *s, double *t)
{
	double lo = floor(log10(s->lo)), hi = ceil(log10(s->hi));
	int n = 0, few = hi - lo <= 2;

	if (hi == lo)
		hi = lo + 1;
	s->lo = pow(10, lo);
	s->hi = pow(10, hi);
	for (double d = lo; d <= hi && n < MAX_TICKS; d++) {
		t[n++] = pow(10, d);
		if (few && d < hi && n + 2 <= MAX_TICKS) {
			t[n++] = 2 * pow(10, d);
			t[n++] = 5 * pow(10, d);
		}
	}
	return n;
}

/* The range of the series' finite values (y > 0 on a log axis). */
static bool range_of(const struct launch__svg_chart *c, bool y, bool pos, double *lo, double *hi)
{
	size_t i, k;

	*lo = INFINITY;
	*hi = -INFINITY;
	for (k = 0; k < c->n_series; k++)
		for (i = 0; i < c->series[k].n; i++) {
			double v = y ? c->series[k].y[i] : c->series[k].x[i];

			if (isfinite(v) && isfinite(c->series[k].x[i]) && isfinite(c->series[k].y[i]) &&
			    (!pos || v > 0)) {
				*lo = fmin(*lo, v);
				*hi = fmax(*hi, v);
			}
		}
	return *lo <= *hi;
}

/* --- line charts --- */

static int axes(struct dt_buf *out, const struct launch__svg_chart *c, struct scale *x,
		struct scale *y)
{
	double tx[MAX_TICKS], ty[MAX_TICKS];
	int nx = linear_ticks(x, tx), ny = y->log ? log_ticks(y, ty) : linear_ticks(y, ty), i, rc;
	char b[32];

	rc = dt_buf_printf(out, "<rect class=\"plot\" x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\"/>\n",
			   ML, MT, W - ML - MR, H - MT - MB);
	for (i = 0; !rc && i < ny; i++)
		rc = dt_buf_printf(out, "<line class=\"grid\" x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\"/>"
				   "<text class=\"tick\" x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
				   ML, W - MR, px(y, ty[i]), px(y, ty[i]), ML - 6, px(y, ty[i]) + 4,
				   tick(ty[i], b, sizeof(b)));
	for (i = 0; !rc && i < nx; i++)
		rc = dt_buf_printf(out, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.0f\" y2=\"%.0f\"/>"
				   "<text class=\"tick\" x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%s</text>\n",
				   px(x, tx[i]), px(x, tx[i]), MT, H - MB, px(x, tx[i]), H - MB + 16,
				   tick(tx[i], b, sizeof(b)));
	if (!rc)
		rc = dt_buf_printf(out, "<text class=\"title\" x=\"%.0f\" y=\"18\">", ML);
	if (!rc)
		rc = launch__html_text(out, c->title);
	if (!rc)
		rc = dt_buf_printf(out, "</text>\n<text class=\"axis\" x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">",
				   (ML + W - MR) / 2, H - 8);
	if (!rc)
		rc = launch__html_text(out, c->xlabel);
	if (!rc)
		rc = dt_buf_printf(out, "</text>\n<text class=\"axis\" transform=\"translate(16 %.0f) rotate(-90)\" text-anchor=\"middle\">",
				   (MT + H - MB) / 2);
	if (!rc)
		rc = launch__html_text(out, c->ylabel);
	if (!rc)
		rc = dt_buf_printf(out, "%s</text>\n", y->log ? " (log scale)" : "");
	return rc;
}

static int legend(struct dt_buf *out, const struct launch__svg_chart *c)
{
	double x = ML;
	size_t k;
	int rc = 0;

	for (k = 0; k < c->n_series && !rc; k++) {
		const struct launch__svg_series *s = &c->series[k];

		rc = dt_buf_printf(out, "<g class=\"legend\"><rect x=\"%.0f\" y=\"28\" width=\"14\" height=\"%d\" fill=\"%s\"/>"
				   "<text x=\"%.0f\" y=\"38\">", x, s->dots_only ? 8 : 3, s->color, x + 18);
		if (!rc)
			rc = launch__html_text(out, s->name);
		if (!rc)
			rc = dt_buf_puts(out, "</text></g>\n");
		x += 30 + 7.0 * (double)strlen(s->name);
	}
	return rc;
}

/* A point's hover text: "training loss at step 12: 3.412". */
static int point(struct dt_buf *out, const struct launch__svg_chart *c,
		 const struct launch__svg_series *s, double cx, double cy, double x, double y)
{
	char bx[32], by[32];
	int rc = dt_buf_printf(out, "<circle class=\"pt%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"%s\" fill=\"%s\"><title>",
			       s->dots_only ? " dot" : "", cx, cy, s->dots_only ? "3.5" : "2.5", s->color);

	if (!rc)
		rc = launch__html_text(out, s->name);
	if (!rc)
		rc = dt_buf_printf(out, " at %s %s: %s</title></circle>\n", c->xname,
				   val(x, bx, sizeof(bx)), val(y, by, sizeof(by)));
	return rc;
}

/* One series: a path through its points (thinned to at most
 * LAUNCH__SVG_MAX_POINTS) and a marker with a title per point drawn. */
static int series(struct dt_buf *out, const struct launch__svg_chart *c, size_t k,
		  const struct scale *x, const struct scale *y)
{
	const struct launch__svg_series *s = &c->series[k];
	size_t i, drawn = 0, stride = s->n / LAUNCH__SVG_MAX_POINTS + 1;
	struct dt_buf pts = {0};
	int rc = 0, part = 0;
	bool first = true;

	rc = dt_buf_printf(out, "<path class=\"line\" data-series=\"%zu\" stroke=\"%s\"%s d=\"", k, s->color,
			   s->dots_only ? " stroke-dasharray=\"2 3\"" : "");
	for (i = 0; !rc && i < s->n; i++) {
		double cx, cy;

		if (!isfinite(s->x[i]) || !isfinite(s->y[i]) || (y->log && s->y[i] <= 0) ||
		    (i % stride && i + 1 != s->n))
			continue;
		cx = px(x, s->x[i]);
		cy = px(y, s->y[i]);
		if (s->part && !first && s->part[i] != part)
			first = true;
		part = s->part ? s->part[i] : 0;
		rc = dt_buf_printf(out, "%s%.1f %.1f", first ? (drawn ? " M" : "M") : " L", cx, cy);
		if (!rc)
			rc = point(&pts, c, s, cx, cy, s->x[i], s->y[i]);
		first = false;
		drawn++;
	}
	if (!rc)
		rc = dt_buf_printf(out, "\" data-points=\"%zu\"/>\n<g class=\"points\" data-series=\"%zu\" data-points=\"%zu\">\n%s</g>\n",
				   drawn, k, drawn, dt_buf_str(&pts));
	dt_buf_free(&pts);
	return rc;
}

int launch__svg_chart(struct dt_buf *out, const struct launch__svg_chart *c)
{
	struct scale x = { .a = ML, .b = W - MR }, y = { .a = H - MB, .b = MT };
	size_t k;
	int rc;

	if (!range_of(c, false, false, &x.lo, &x.hi))
		return 0; /* nothing to draw */
	y.log = c->logy && range_of(c, true, true, &y.lo, &y.hi);
	if (!y.log)
		range_of(c, true, false, &y.lo, &y.hi);
	rc = dt_buf_printf(out, "<figure><svg class=\"chart\" id=\"%s\" viewBox=\"0 0 %.0f %.0f\" role=\"img\">\n",
			   c->id, W, H);
	if (!rc)
		rc = axes(out, c, &x, &y);
	if (!rc)
		rc = legend(out, c);
	for (k = 0; !rc && k < c->n_series; k++)
		rc = series(out, c, k, &x, &y);
	if (!rc)
		rc = dt_buf_printf(out, "<line class=\"xhair\" x1=\"0\" x2=\"0\" y1=\"%.0f\" y2=\"%.0f\" style=\"display:none\"/>\n"
				   "</svg></figure>\n", MT, H - MB);
	return rc;
}

/* --- stacked bar --- */

int launch__svg_stack(struct dt_buf *out, const char *id, const char *const *names,
		      const char *const *colors, const double *v, size_t n, const char *unit)
{
	double sum = 0, x = 10, lx = 10;
	size_t i;
	char b[32];
	int rc;

	for (i = 0; i < n; i++)
		sum += isfinite(v[i]) && v[i] > 0 ? v[i] : 0;
	if (!(sum > 0))
		return 0;
	rc = dt_buf_printf(out, "<figure><svg class=\"stack\" id=\"%s\" viewBox=\"0 0 %.0f 92\" role=\"img\">\n",
			   id, WW);
	for (i = 0; !rc && i < n; i++) {
		double w = isfinite(v[i]) && v[i] > 0 ? v[i] / sum * (WW - 20) : 0;

		rc = dt_buf_printf(out, "<rect class=\"part\" x=\"%.2f\" y=\"8\" width=\"%.2f\" height=\"34\" fill=\"%s\"><title>",
				   x, w, colors[i]);
		if (!rc)
			rc = dt_buf_printf(out, "%s: %s %s (%.1f%%)</title></rect>\n", names[i],
					   val(isfinite(v[i]) ? v[i] : 0, b, sizeof(b)), unit,
					   100 * (isfinite(v[i]) && v[i] > 0 ? v[i] : 0) / sum);
		if (!rc)
			rc = dt_buf_printf(out, "<g class=\"legend\"><rect x=\"%.0f\" y=\"56\" width=\"12\" height=\"12\" fill=\"%s\"/>"
					   "<text x=\"%.0f\" y=\"66\">%s %.0f%%</text></g>\n", lx, colors[i], lx + 16,
					   names[i], 100 * (isfinite(v[i]) && v[i] > 0 ? v[i] : 0) / sum);
		x += w;
		lx += 44 + 7.0 * (double)strlen(names[i]);
	}
	if (!rc)
		rc = dt_buf_printf(out, "<text class=\"tick\" x=\"10\" y=\"86\">the whole bar: %s %s</text>\n</svg></figure>\n",
				   val(sum, b, sizeof(b)), unit);
	return rc;
}

/* --- timeline --- */

/* The span of every time the run knows. */
static bool time_span(const struct launch__report *r, double *t0, double *t1)
{
	size_t i;

	*t0 = INFINITY;
	*t1 = -INFINITY;
	for (i = 0; i < r->n_events; i++)
		if (isfinite(r->events[i].time)) {
			*t0 = fmin(*t0, r->events[i].time);
			*t1 = fmax(*t1, r->events[i].time);
		}
	for (i = 0; i < r->n_steps; i++)
		if (isfinite(r->steps[i].unix_time)) {
			*t0 = fmin(*t0, r->steps[i].unix_time);
			*t1 = fmax(*t1, r->steps[i].unix_time);
		}
	if (*t1 <= *t0)
		*t1 = *t0 + 1;
	return isfinite(*t0);
}

/* The last time logged by start k. */
static double start_end(const struct launch__report *r, int k, double t)
{
	size_t i;

	for (i = 0; i < r->n_steps; i++)
		if (r->steps[i].start == k && isfinite(r->steps[i].unix_time))
			t = fmax(t, r->steps[i].unix_time);
	for (i = 0; i < r->n_events; i++)
		if (r->events[i].start == k && isfinite(r->events[i].time) &&
		    r->events[i].kind != LAUNCH__EV_JOB_START && r->events[i].kind != LAUNCH__EV_JOB_STOP)
			t = fmax(t, r->events[i].time);
	return t;
}

/* The bands: the job's allocations (events.jsonl), each start of the
 * ranks (start-up lighter, up to its first step). */
static int bands(struct dt_buf *out, const struct launch__report *r, const struct scale *x)
{
	size_t i, j;
	int rc = 0;
	char b[32];

	for (i = 0; !rc && i < r->n_events; i++) {
		const struct launch__report_event *e = &r->events[i];
		double end = e->time;

		if (e->kind == LAUNCH__EV_JOB_START) {
			for (j = i + 1; j < r->n_events && r->events[j].kind != LAUNCH__EV_JOB_STOP; j++)
				;
			end = j < r->n_events ? r->events[j].time : x->hi;
			rc = dt_buf_printf(out, "<rect class=\"alloc\" x=\"%.1f\" y=\"24\" width=\"%.1f\" height=\"18\"><title>job ",
					   px(x, e->time), fmax(1, px(x, end) - px(x, e->time)));
			if (!rc)
				rc = launch__html_text(out, e->what);
			if (!rc)
				rc = dt_buf_printf(out, " allocated (restart %lld): ", e->step);
			if (!rc)
				rc = launch__html_text(out, e->detail);
			if (!rc)
				rc = dt_buf_puts(out, "</title></rect>\n");
		} else if (e->kind == LAUNCH__EV_START) {
			double first = end;

			for (j = i + 1; j < r->n_events && r->events[j].kind != LAUNCH__EV_START; j++)
				if (r->events[j].kind == LAUNCH__EV_FIRST_STEP) {
					first = r->events[j].time;
					break;
				}
			end = start_end(r, e->start, first);
			rc = dt_buf_printf(out, "<rect class=\"startup\" x=\"%.1f\" y=\"50\" width=\"%.1f\" height=\"18\"><title>start %d: start-up %s</title></rect>\n"
					   "<rect class=\"train\" x=\"%.1f\" y=\"50\" width=\"%.1f\" height=\"18\"><title>start %d: training from step %lld</title></rect>\n",
					   px(x, e->time), fmax(1, px(x, first) - px(x, e->time)), e->start + 1,
					   launch__report_secs(first - e->time, b, sizeof(b)), px(x, first),
					   fmax(1, px(x, end) - px(x, first)), e->start + 1, e->step);
		}
	}
	return rc;
}

/* A mark's second class: a cancel's stop, a job stop that is no failure */
static const char *mark_class(const struct launch__report_event *e)
{
	if (e->kind == LAUNCH__EV_STOP && e->cancelled)
		return " cancel";
	if (e->kind == LAUNCH__EV_JOB_STOP && !strcmp(e->what, "done"))
		return " done";
	if (e->kind == LAUNCH__EV_JOB_STOP && !strcmp(e->what, "cancelled"))
		return " cancelled";
	return "";
}

/* A mark per checkpoint, stop, resume, job stop and end: the checkpoints
 * (pass 0), or the others (pass 1), drawn on top of them. */
static int marks(struct dt_buf *out, const struct launch__report *r, const struct scale *x,
		 int pass)
{
	static const struct {
		enum launch__event_kind kind;
		const char *cls, *what;
		double y;
	} kinds[] = {
		{ LAUNCH__EV_CHECKPOINT, "ckpt", "checkpoint", 76 },
		{ LAUNCH__EV_RESUME, "resume", "resume from step", 76 },
		{ LAUNCH__EV_STOP, "stop", "stop at step", 76 },
		{ LAUNCH__EV_END, "end", "end at step", 76 },
		{ LAUNCH__EV_JOB_STOP, "jobstop", "job stop:", 20 },
	};
	size_t i, k;
	int rc = 0;

	for (i = 0; !rc && i < r->n_events; i++) {
		const struct launch__report_event *e = &r->events[i];

		for (k = 0; k < sizeof(kinds) / sizeof(kinds[0]) && kinds[k].kind != e->kind; k++)
			;
		if (k == sizeof(kinds) / sizeof(kinds[0]) || !isfinite(e->time) ||
		    (e->kind == LAUNCH__EV_CHECKPOINT) != (pass == 0))
			continue;
		rc = dt_buf_printf(out, "<path class=\"mark %s%s\" d=\"M%.1f %.0f l-5 -9 h10 z\"><title>%s ",
				   kinds[k].cls, mark_class(e), px(x, e->time), kinds[k].y + 9,
				   e->cancelled ? "cancelled by the user at step" : kinds[k].what);
		if (!rc && e->kind == LAUNCH__EV_JOB_STOP)
			rc = launch__html_text(out, e->what);
		else if (!rc)
			rc = dt_buf_printf(out, "%lld", e->step);
		if (!rc)
			rc = dt_buf_puts(out, "</title></path>\n");
	}
	return rc;
}

int launch__svg_timeline(struct dt_buf *out, const struct launch__report *r)
{
	struct scale x = { .a = 80, .b = WW - 30 };
	double t0, t1, tx[MAX_TICKS], unit;
	const char *uname;
	int n, i, rc;
	char b[32];

	if (!time_span(r, &t0, &t1))
		return 0;
	unit = t1 - t0 > 7200 ? 3600 : t1 - t0 > 120 ? 60 : 1;
	uname = unit == 3600 ? "h" : unit == 60 ? "min" : "s";
	x.lo = 0;
	x.hi = (t1 - t0) / unit;
	n = linear_ticks(&x, tx);
	x.lo *= unit, x.hi *= unit, x.lo += t0, x.hi += t0;
	rc = dt_buf_printf(out, "<figure><svg class=\"timeline\" id=\"timeline\" viewBox=\"0 0 %.0f 130\" role=\"img\">\n"
			   "<text class=\"tick\" x=\"4\" y=\"37\">job</text><text class=\"tick\" x=\"4\" y=\"63\">ranks</text>"
			   "<text class=\"tick\" x=\"4\" y=\"84\">events</text>\n", WW);
	for (i = 0; !rc && i < n; i++)
		rc = dt_buf_printf(out, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"16\" y2=\"92\"/>"
				   "<text class=\"tick\" x=\"%.1f\" y=\"106\" text-anchor=\"middle\">%s</text>\n",
				   px(&x, t0 + tx[i] * unit), px(&x, t0 + tx[i] * unit), px(&x, t0 + tx[i] * unit),
				   tick(tx[i], b, sizeof(b)));
	if (!rc)
		rc = dt_buf_printf(out, "<text class=\"axis\" x=\"%.0f\" y=\"124\" text-anchor=\"middle\">wall time since the first event (%s)</text>\n",
				   (x.a + x.b) / 2, uname);
	if (!rc)
		rc = bands(out, r, &x);
	if (!rc)
		rc = marks(out, r, &x, 0);
	if (!rc)
		rc = marks(out, r, &x, 1);
	if (!rc)
		rc = dt_buf_puts(out, "</svg></figure>\n");
	return rc;
}
