/*
 * report.c - a run read for its report (report.h): every line of
 * <run_dir>/metrics.jsonl in order, the batch script's <run_dir>/events.jsonl
 * when there is one, and the run's spec; then what follows from them: steps
 * redone after a restart, the times of events that carry none, goodput.
 * Also the small queries that status shares with the page (sparkline,
 * medians, the run's state).
 *
 * Sections: growing arrays, JSON values, the spec, metrics lines,
 * events.jsonl, after reading (times, redone work, goodput), reading,
 * queries.
 */
#include "launcher/report.h"
#include "launcher/internal.h"

#include "base/io.h"
#include "base/json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

/* --- growing arrays --- */

/* Room for one more element of size sz in *arr holding *n: 0 or -ENOMEM. */
static int grow(void **arr, size_t n, size_t sz)
{
	void *p;
	size_t cap;

	if (n == 0 || (n & (n - 1)) == 0) { /* capacities are powers of two */
		cap = n == 0 ? 64 : n * 2;
		p = realloc(*arr, cap * sz);
		if (!p)
			return -ENOMEM;
		*arr = p;
	}
	return 0;
}

static struct launch__report_event *new_event(struct launch__report *r,
					      enum launch__event_kind kind)
{
	struct launch__report_event *e;

	if (grow((void **)&r->events, r->n_events, sizeof(*e)))
		return NULL;
	e = &r->events[r->n_events++];
	*e = (struct launch__report_event){ .kind = kind, .time = NAN, .step = -1,
					    .start = r->starts - 1, .alloc = -1, .bytes = NAN,
					    .seconds = NAN };
	return e;
}

/* --- JSON values --- */

static double num(json_object *o, const char *key)
{
	json_object *x;

	if (!o || !json_object_object_get_ex(o, key, &x) ||
	    !(json_object_is_type(x, json_type_int) || json_object_is_type(x, json_type_double)))
		return NAN;
	return json_object_get_double(x);
}

static long long count(json_object *o, const char *key, long long dflt)
{
	double v = num(o, key);

	return isfinite(v) && v >= 0 && v < 9e18 ? (long long)v : dflt;
}

static const char *str(json_object *o, const char *key)
{
	json_object *x;

	if (!o || !json_object_object_get_ex(o, key, &x) || !json_object_is_type(x, json_type_string))
		return "";
	return json_object_get_string(x);
}

static json_object *member(json_object *o, const char *key)
{
	json_object *x;

	return o && json_object_object_get_ex(o, key, &x) ? x : NULL;
}

/* A line as one JSON object, or NULL (torn, not JSON). */
/* --- the spec --- */

static void spec_model(struct launch__report *r, json_object *m)
{
	json_object *hidden = member(m, "hidden");
	size_t len = 0, i;

	r->gpt = !strcmp(str(m, "type"), "gpt");
	if (r->gpt) {
		snprintf(r->model, sizeof(r->model), "gpt: %lld layers, %lld heads, embd %lld, context %lld, vocabulary %lld",
			 count(m, "layers", 0), count(m, "heads", 0), count(m, "embd", 0),
			 count(m, "context", 0), count(m, "vocab_size", 0));
		return;
	}
	len = (size_t)snprintf(r->model, sizeof(r->model), "mlp: %lld", count(m, "inputs", 0));
	for (i = 0; hidden && json_object_is_type(hidden, json_type_array) &&
		    i < json_object_array_length(hidden) && len < sizeof(r->model); i++)
		len += (size_t)snprintf(r->model + len, sizeof(r->model) - len, "-%d",
					json_object_get_int(json_object_array_get_idx(hidden, i)));
	if (len < sizeof(r->model))
		snprintf(r->model + len, sizeof(r->model) - len, "-%lld, %s", count(m, "outputs", 0),
			 str(m, "activation"));
}

/* The resolved spec (spec.json as dtrain-submit writes it): what the page
 * says of the model and the layout. A spec that cannot be read is a line
 * in err only when it was named (path_given). */
static int read_spec(struct launch__report *r, const char *path, bool path_given,
		     struct dt_err *err)
{
	struct dt_json_error je = {0};
	json_object *o = NULL, *par, *tr;
	char *text = NULL;
	size_t len = 0;
	int rc = dt_read_file(path, &text, &len);

	if (rc == 0 && (rc = dt_json_parse_object(text, len, 32, &o, &je)) == -EINVAL)
		rc = -EPROTO;
	if (rc) {
		if (path_given || rc != -ENOENT)
			dt_err_add(err, "%s: cannot read the spec: %s", path,
				   rc == -EPROTO ? je.what : strerror(-rc));
		goto out;
	}
	r->has_spec = true;
	if (*str(o, "name"))
		snprintf(r->name, sizeof(r->name), "%s", str(o, "name"));
	spec_model(r, member(o, "model"));
	par = member(o, "parallel");
	r->data = (int)count(par, "data", 0);
	r->pipeline = (int)count(par, "pipeline", 0);
	r->micro_batches = (int)count(par, "micro_batches", 0);
	r->nodes = (int)count(member(o, "resources"), "nodes", 0);
	if (!strcmp(str(par, "data"), "auto")) { /* each start's: events.jsonl */
		char nodes[32];

		snprintf(nodes, sizeof(nodes), "%s", str(member(o, "resources"), "nodes"));
		if (!*nodes) /* one count, not a range */
			snprintf(nodes, sizeof(nodes), "%d", r->nodes);
		snprintf(r->layout, sizeof(r->layout),
			 "data \"auto\" (the ranks granted) x pipeline %d on %s nodes, %d micro-batches (%s)",
			 r->pipeline, nodes, r->micro_batches, str(par, "schedule"));
	} else
		snprintf(r->layout, sizeof(r->layout), "data %d x pipeline %d, %d micro-batches (%s)",
			 r->data, r->pipeline, r->micro_batches, str(par, "schedule"));
	tr = member(o, "train");
	snprintf(r->device, sizeof(r->device), "%s, %s", str(tr, "device"), str(tr, "precision"));
out:
	if (o)
		json_object_put(o);
	free(text);
	return rc;
}

/* --- metrics lines --- */

/* State while reading metrics.jsonl in order. */
struct rd {
	struct launch__report *r;
	long long high;        /* the highest step of the starts before this one */
	long long high_now;    /* ... and of this one so far */
	double last_t;         /* the newest time logged */
	size_t start_ev;       /* index of this start's event; SIZE_MAX: none */
	long long first_step;  /* this start's first step (its start-up) */
	size_t from_ev;        /* the first resume or init_from since the last
				* start; SIZE_MAX: none (they precede their start) */
};

static int on_step(struct rd *d, json_object *o)
{
	struct launch__report *r = d->r;
	struct launch__report_step *s;
	static const char *const keys[LAUNCH__T_N] = { "step_s", "compute_s", "pipe_wait_s",
						       "grad_wait_s", "data_s", "optim_s" };
	json_object *tm = member(o, "time");
	int k;

	if (grow((void **)&r->steps, r->n_steps, sizeof(*s)))
		return -ENOMEM;
	s = &r->steps[r->n_steps++];
	s->step = count(o, "step", 0);
	s->steps = count(o, "steps", 1) > 0 ? count(o, "steps", 1) : 1;
	s->start = r->starts - 1;
	s->redone = s->step <= d->high;
	s->loss = num(o, "loss");
	s->lr = num(o, "lr");
	s->grad_norm = num(o, "grad_norm");
	s->samples_per_s = num(o, "samples_per_s");
	s->tokens_per_s = num(o, "tokens_per_s");
	s->mfu = num(o, "mfu");
	for (k = 0; k < LAUNCH__T_N; k++)
		s->t[k] = num(tm, keys[k]);
	s->unix_time = num(o, "unix_time");
	if (isfinite(s->unix_time))
		d->last_t = s->unix_time;
	if (s->step > d->high_now)
		d->high_now = s->step;
	if (s->step > r->last_step)
		r->last_step = s->step;
	if (count(o, "total_steps", 0) > 0)
		r->total_steps = count(o, "total_steps", 0);
	if (isfinite(s->tokens_per_s))
		r->gpt = true;
	return 0;
}

static int on_eval(struct rd *d, json_object *o)
{
	struct launch__report *r = d->r;
	struct launch__report_eval *e;

	if (grow((void **)&r->evals, r->n_evals, sizeof(*e)))
		return -ENOMEM;
	e = &r->evals[r->n_evals++];
	e->step = count(o, "step", 0);
	e->test_loss = num(o, "test_loss");
	e->test_accuracy = num(o, "test_accuracy");
	e->bits_per_byte = num(o, "bits_per_byte");
	e->unix_time = num(o, "unix_time");
	if (isfinite(e->unix_time))
		d->last_t = e->unix_time;
	return 0;
}

static void on_start(struct rd *d, json_object *o, struct launch__report_event *e)
{
	struct launch__report *r = d->r;

	r->starts++;
	e->start = r->starts - 1;
	r->ended = false;
	d->high = d->high_now;
	d->start_ev = d->from_ev != SIZE_MAX ? d->from_ev : r->n_events - 1;
	d->from_ev = SIZE_MAX;
	d->first_step = -1;
	e->step = count(o, "step", 0);
	if (count(o, "total_steps", 0) > 0)
		r->total_steps = count(o, "total_steps", 0);
	snprintf(e->what, sizeof(e->what), "%s", str(o, "device"));
	snprintf(e->detail, sizeof(e->detail), "%s, %s, gradients %s", str(o, "device"),
		 str(o, "precision"), str(o, "grad_sync"));
	if (*str(o, "device"))
		snprintf(r->device, sizeof(r->device), "%s, %s, collectives %s", str(o, "device"),
			 str(o, "precision"), str(o, "collectives"));
	r->flops_per_token = num(o, "flops_per_token");
	r->peak_flops_node = num(o, "peak_flops_per_node");
	snprintf(r->peak_source, sizeof(r->peak_source), "%s", str(o, "peak"));
}

/* first_step: its time less the seconds since this start began (start and
 * resume carry no time). That start is the job step's (the batch script
 * sets DTRAIN_STEP_START: MPI's start-up included), else the process'. */
static void on_first_step(struct rd *d, json_object *o, struct launch__report_event *e)
{
	struct launch__report *r = d->r;
	double since = num(o, "since_step_start_s");

	if (!(since >= 0))
		since = num(o, "since_process_start_s");
	size_t i;

	e->time = num(o, "unix_time");
	e->time_exact = isfinite(e->time);
	e->step = count(o, "step", 0);
	e->seconds = isfinite(since) && since >= 0 ? since : NAN;
	d->first_step = e->step;
	if (e->time_exact)
		d->last_t = e->time;
	if (d->start_ev == SIZE_MAX || !isfinite(e->seconds) || !e->time_exact)
		return;
	for (i = d->start_ev; i + 1 < r->n_events; i++)
		if (isnan(r->events[i].time))
			r->events[i].time = e->time - e->seconds;
}

static void on_other(struct rd *d, json_object *o, struct launch__report_event *e)
{
	e->step = count(o, "step", -1);
	switch (e->kind) {
	case LAUNCH__EV_CHECKPOINT:
		e->bytes = num(o, "bytes");
		e->seconds = num(o, "stall_s");
		snprintf(e->what, sizeof(e->what), "%s", json_object_get_boolean(member(o, "async")) ?
			 "async" : "sync");
		snprintf(e->detail, sizeof(e->detail), "%s", str(o, "path"));
		break;
	case LAUNCH__EV_RESUME:
	case LAUNCH__EV_INIT_FROM:
		/* logged as the ranks load, before the start they belong to */
		e->start = d->r->starts;
		if (d->from_ev == SIZE_MAX)
			d->from_ev = d->r->n_events - 1;
		e->seconds = num(o, "load_s");
		if (e->kind == LAUNCH__EV_INIT_FROM)
			e->step = count(o, "from_step", -1);
		snprintf(e->detail, sizeof(e->detail), "%s", str(o, "path"));
		if (isfinite(num(o, "from_data")))
			snprintf(e->what, sizeof(e->what), "%lldx%lld", count(o, "from_data", 0),
				 count(o, "from_pipeline", 0));
		break;
	case LAUNCH__EV_STOP:
		snprintf(e->what, sizeof(e->what), "SIG%s", str(o, "signal"));
		break;
	case LAUNCH__EV_END:
		d->r->ended = true;
		e->seconds = num(o, "seconds");
		break;
	default:
		break;
	}
	if (e->kind == LAUNCH__EV_RESUME || e->kind == LAUNCH__EV_INIT_FROM)
		return;
	e->time = num(o, "unix_time"); /* logged since the per-rank metrics */
	e->time_exact = isfinite(e->time);
	if (e->time_exact)
		d->last_t = e->time;
	else
		e->time = d->last_t; /* just after the step logged before it */
}

/* One line of metrics.jsonl. */
static int metrics_line(struct rd *d, json_object *o)
{
	static const struct {
		const char *name;
		enum launch__event_kind kind;
	} kinds[] = {
		{ "start", LAUNCH__EV_START }, { "resume", LAUNCH__EV_RESUME },
		{ "init_from", LAUNCH__EV_INIT_FROM }, { "first_step", LAUNCH__EV_FIRST_STEP },
		{ "checkpoint", LAUNCH__EV_CHECKPOINT }, { "stop", LAUNCH__EV_STOP },
		{ "end", LAUNCH__EV_END },
	};
	const char *ev = str(o, "event");
	struct launch__report_event *e;
	size_t k;

	if (!strcmp(ev, "step"))
		return on_step(d, o);
	if (!strcmp(ev, "eval"))
		return on_eval(d, o);
	if (!strcmp(ev, "layout"))
		return launch__report_ranks_layout(&d->r->ranks, d->r->starts - 1, o);
	if (!strcmp(ev, "ranks")) {
		launch__report_ranks_window(&d->r->ranks, o);
		return 0;
	}
	for (k = 0; k < sizeof(kinds) / sizeof(kinds[0]) && strcmp(ev, kinds[k].name); k++)
		;
	if (k == sizeof(kinds) / sizeof(kinds[0]))
		return 0; /* an event of a newer dtrain */
	if (!(e = new_event(d->r, kinds[k].kind)))
		return -ENOMEM;
	if (kinds[k].kind == LAUNCH__EV_START)
		on_start(d, o, e);
	else if (kinds[k].kind == LAUNCH__EV_FIRST_STEP)
		on_first_step(d, o, e);
	else
		on_other(d, o, e);
	return 0;
}

static int metrics_fn(void *ctx, json_object *o)
{
	return metrics_line(ctx, o);
}

/* --- events.jsonl --- */

/* Hosts in the ranges of one bracket group "3-5,7]" (4), *end past the ']'. */
static int range_hosts(const char *p, const char **end)
{
	int n = 0;
	char *e;

	while (*p && *p != ']') {
		long a = strtol(p, &e, 10), b = a;

		if (e == p)
			break;
		if (*e == '-')
			b = strtol(e + 1, &e, 10);
		n += b >= a ? (int)(b - a + 1) : 1;
		p = *e == ',' ? e + 1 : e;
	}
	*end = *p == ']' ? p + 1 : p;
	return n > 0 ? n : 1;
}

/* Nodes in a Slurm node list: "n1,n[3-5,7]" is 5. */
static int count_nodes(const char *p)
{
	int n = 0, item = 0;

	while (*p) {
		if (*p == ',') {
			n += item;
			item = 0;
			p++;
		} else if (*p == '[') {
			item = (item ? item : 1) * range_hosts(p + 1, &p);
		} else {
			item = item ? item : 1;
			p++;
		}
	}
	return n + item;
}

/* A rank as events.jsonl gives it: a number or a string ("" when none). */
static void rank_text(json_object *o, char *buf, size_t size)
{
	if (isfinite(num(o, "rank")))
		snprintf(buf, size, "%lld", count(o, "rank", 0));
	else
		snprintf(buf, size, "%s", str(o, "rank"));
}

static void job_stop(json_object *o, struct launch__report_event *e)
{
	char rank[32];
	size_t len;

	rank_text(o, rank, sizeof(rank));
	snprintf(e->what, sizeof(e->what), "%s", str(o, "cause"));
	snprintf(e->detail, sizeof(e->detail), "%s", str(o, "detail"));
	len = strlen(e->detail);
	if (*rank && len < sizeof(e->detail))
		len += (size_t)snprintf(e->detail + len, sizeof(e->detail) - len, "%srank %s",
					len ? "; " : "", rank);
	if (*str(o, "node") && len < sizeof(e->detail))
		snprintf(e->detail + len, sizeof(e->detail) - len, "%snode %s",
			 *rank ? " on " : len ? "; " : "", str(o, "node"));
}

static int events_fn(void *ctx, json_object *o)
{
	struct launch__report *r = ctx;
	const char *ev = str(o, "event");
	struct launch__report_event *e;
	bool start = !strcmp(ev, "job_start"), stop = !strcmp(ev, "job_stop");

	if (!*ev || !isfinite(num(o, "time")))
		return 0;
	if (!(e = new_event(r, start ? LAUNCH__EV_JOB_START : stop ? LAUNCH__EV_JOB_STOP :
				LAUNCH__EV_JOB_NOTE)))
		return -ENOMEM;
	e->start = -1;
	e->alloc = isfinite(num(o, "restart")) ? (int)count(o, "restart", 0) : -1;
	snprintf(e->job_id, sizeof(e->job_id), "%s", str(o, "job_id"));
	e->time = num(o, "time");
	e->time_exact = true;
	if (start) {
		e->nodes = count(o, "num_nodes", 0) > 0 ? (int)count(o, "num_nodes", 0) :
							   count_nodes(str(o, "nodes"));
		e->step = count(o, "restart", 0);
		snprintf(e->what, sizeof(e->what), "%s", str(o, "job_id"));
		snprintf(e->detail, sizeof(e->detail), "nodes %s, layout %s", str(o, "nodes"),
			 str(o, "layout"));
	} else if (stop) {
		job_stop(o, e);
	} else {
		snprintf(e->what, sizeof(e->what), "%s", ev);
		snprintf(e->detail, sizeof(e->detail), "%s", str(o, "detail"));
	}
	return 0;
}

/* --- after reading --- */

/* Whether the cancel marker of job id (cancel.c) is in the run dir: as
 * cancel-<id> (a resume kept it), or as cancel for the newest job */
static bool cancel_marker(const char *run_dir, const char *id, bool newest)
{
	char path[4200];

	snprintf(path, sizeof(path), "%s/cancel-%s", run_dir, id);
	if (*id && access(path, F_OK) == 0)
		return true;
	snprintf(path, sizeof(path), "%s/cancel", run_dir);
	return newest && access(path, F_OK) == 0;
}

/* Each stop a user's cancel asked for: the job_stop of its allocation
 * (before the next start of the ranks) says "cancelled"; without one (its
 * shell killed first), its job's cancel marker */
static void mark_cancels(struct launch__report *r)
{
	const char *job = "";
	size_t i, j;

	for (i = 0; i < r->n_events; i++) {
		struct launch__report_event *e = &r->events[i];
		bool said = false, newest = true;

		if (e->kind == LAUNCH__EV_JOB_START)
			job = e->job_id;
		if (e->kind != LAUNCH__EV_STOP)
			continue;
		for (j = i + 1; j < r->n_events && !said; j++) {
			if (r->events[j].kind == LAUNCH__EV_START || r->events[j].kind == LAUNCH__EV_JOB_START)
				newest = false;
			if (r->events[j].kind == LAUNCH__EV_START)
				break;
			if (r->events[j].kind == LAUNCH__EV_JOB_STOP) {
				said = true;
				e->cancelled = !strcmp(r->events[j].what, "cancelled");
			}
		}
		if (!said)
			e->cancelled = cancel_marker(r->run_dir, job, newest);
	}
}

/* Metrics events without a time of their own take the one before them
 * (or, before any, the one after). */
static void fill_times(struct launch__report *r)
{
	double t = NAN;
	size_t i;

	for (i = 0; i < r->n_events; i++) {
		if (isnan(r->events[i].time))
			r->events[i].time = t;
		t = r->events[i].time;
	}
	for (i = r->n_events; i-- > 0;) {
		if (isnan(r->events[i].time))
			r->events[i].time = t;
		t = r->events[i].time;
	}
}

/* The events of metrics.jsonl (first n_metrics, in order) and of
 * events.jsonl (after them, in order) merged by time. */
static int merge_events(struct launch__report *r, size_t n_metrics)
{
	struct launch__report_event *m = r->events, *out;
	size_t i = 0, j = n_metrics, k = 0;

	if (n_metrics == r->n_events || n_metrics == 0)
		return 0;
	out = malloc(r->n_events * sizeof(*out));
	if (!out)
		return -ENOMEM;
	while (i < n_metrics || j < r->n_events) {
		bool take_job = j < r->n_events && (i == n_metrics || m[j].time < m[i].time);

		out[k++] = take_job ? m[j++] : m[i++];
	}
	free(r->events);
	r->events = out;
	return 0;
}

/* The step event that logged step s of start k alone (its time is the
 * first step's: part of start-up too), or NULL. */
static const struct launch__report_step *lone_step(const struct launch__report *r, int k,
						   long long s)
{
	size_t i;

	for (i = 0; i < r->n_steps; i++)
		if (r->steps[i].start == k && r->steps[i].step == s && r->steps[i].steps == 1)
			return &r->steps[i];
	return NULL;
}

/* used[k * LAUNCH__G_N + g]: the seconds of kind g that start k used. */
static void add_used(double *used, int k, int g, double secs)
{
	used[(size_t)k * LAUNCH__G_N + (size_t)g] += secs;
}

/* The seconds each start used (steps, start-up, saves) into used; each
 * resume's steps redone. */
static void time_used(struct launch__report *r, double *used)
{
	size_t i, k;

	for (i = 0; i < r->n_steps; i++) {
		const struct launch__report_step *s = &r->steps[i];
		double secs = s->t[LAUNCH__T_STEP] * (double)s->steps;

		if (isfinite(secs) && secs >= 0 && s->start >= 0)
			add_used(used, s->start, s->redone ? LAUNCH__G_REDONE : LAUNCH__G_PRODUCTIVE, secs);
	}
	for (i = 0; i < r->n_events; i++) {
		struct launch__report_event *e = &r->events[i];
		const struct launch__report_step *first;
		double secs = e->seconds;

		if (e->start < 0 || e->start >= r->starts || !isfinite(secs) ||
		    (e->kind != LAUNCH__EV_FIRST_STEP && e->kind != LAUNCH__EV_CHECKPOINT))
			continue;
		if (e->kind == LAUNCH__EV_FIRST_STEP &&
		    (first = lone_step(r, e->start, e->step)) && isfinite(first->t[LAUNCH__T_STEP]))
			secs = fmax(0, secs - first->t[LAUNCH__T_STEP]);
		add_used(used, e->start, e->kind == LAUNCH__EV_CHECKPOINT ? LAUNCH__G_SAVE : LAUNCH__G_STARTUP,
			 secs);
	}
	for (i = 0; i < r->n_events; i++) {
		struct launch__report_event *e = &r->events[i];

		if (e->kind != LAUNCH__EV_RESUME)
			continue;
		for (k = 0; k < r->n_steps; k++)
			if (r->steps[k].start == e->start && r->steps[k].redone)
				e->redone += r->steps[k].steps;
	}
}

/* The nodes a start of the ranks at time t ran on: the job start of
 * events.jsonl before it, else the spec's, else 1. */
static int nodes_at(const struct launch__report *r, double t)
{
	int nodes = r->nodes > 0 ? r->nodes : 1;
	size_t i;

	for (i = 0; i < r->n_events; i++)
		if (r->events[i].kind == LAUNCH__EV_JOB_START && r->events[i].time <= t &&
		    r->events[i].nodes > 0)
			nodes = r->events[i].nodes;
	return nodes;
}

/* Node-seconds of each allocation of the job (the batch job's start: the
 * events.jsonl events of one job id and restart count, several starts of
 * the ranks after crashes among them), from its first event to its last, a
 * job_stop.
 * An allocation whose shell was killed before it wrote its stop (a
 * preemption) ends at the last time known before the next allocation (the
 * SIGTERM's, the ranks' saved stop); the newest one, still going or ended
 * unseen, at the newest time known. Its nodes: its first start's. */
static void allocated(struct launch__report *r, double newest)
{
	struct launch__goodput *g = &r->good;
	size_t i, j, next;

	for (i = 0; i < r->n_events; i = next) {
		const struct launch__report_event *s = &r->events[i], *tail = s;
		double end, last = s->time;

		next = i + 1;
		if (s->kind != LAUNCH__EV_JOB_START || !s->time_exact)
			continue;
		for (j = i + 1; j < r->n_events; j++) {
			const struct launch__report_event *e = &r->events[j];

			if (e->kind == LAUNCH__EV_JOB_START &&
			    (e->alloc < 0 || e->alloc != s->alloc || strcmp(e->job_id, s->job_id)))
				break;
			/* exact times only: a start's estimate (its first step's
			 * time less its start-up) may fall before its job_start */
			if (e->time_exact && e->time > last)
				last = e->time;
			if (e->kind >= LAUNCH__EV_JOB_START)
				tail = e;
		}
		next = j;
		end = tail->kind == LAUNCH__EV_JOB_STOP ? tail->time : j < r->n_events ? last : newest;
		if (isfinite(end) && end > s->time) {
			g->has_alloc = true;
			g->alloc_node_s += (end - s->time) * (s->nodes > 0 ? s->nodes : 1);
			g->allocations++;
		}
	}
}

static int goodput(struct launch__report *r)
{
	struct launch__goodput *g = &r->good;
	double *used = calloc(((size_t)r->starts + 1) * LAUNCH__G_N, sizeof(*used)), newest = NAN;
	size_t i;
	int k;

	if (!used)
		return -ENOMEM;
	time_used(r, used);
	for (i = 0; i < r->n_events; i++) {
		const struct launch__report_event *e = &r->events[i];
		int nodes = nodes_at(r, e->time);

		if (isfinite(e->time) && !(e->time <= newest))
			newest = e->time;
		for (k = 0; e->kind == LAUNCH__EV_START && e->start >= 0 && k < LAUNCH__G_N; k++) {
			g->s[k] += used[(size_t)e->start * LAUNCH__G_N + (size_t)k];
			g->node_s[k] += used[(size_t)e->start * LAUNCH__G_N + (size_t)k] * nodes;
		}
	}
	if (r->n_steps && isfinite(r->steps[r->n_steps - 1].unix_time) &&
	    !(r->steps[r->n_steps - 1].unix_time <= newest))
		newest = r->steps[r->n_steps - 1].unix_time;
	allocated(r, newest);
	g->idle_node_s = g->alloc_node_s;
	for (k = 0; k < LAUNCH__G_N; k++)
		g->idle_node_s -= g->node_s[k];
	g->idle_node_s = fmax(0, g->idle_node_s);
	g->per_start = used;
	return 0;
}

/* --- reading --- */

static void name_defaults(struct launch__report *r)
{
	const char *base = strrchr(r->run_dir, '/');

	snprintf(r->name, sizeof(r->name), "%s", base && base[1] ? base + 1 : r->run_dir);
	snprintf(r->model, sizeof(r->model), "unknown (no spec.json)");
	snprintf(r->layout, sizeof(r->layout), "unknown (no spec.json)");
	snprintf(r->device, sizeof(r->device), "unknown");
}

static int read_files(struct launch__report *r, const char *spec_path, struct dt_err *err)
{
	struct rd d = { .r = r, .high = 0, .last_t = NAN, .start_ev = SIZE_MAX, .from_ev = SIZE_MAX };
	char path[4200];
	size_t n_metrics;
	int rc;

	snprintf(path, sizeof(path), "%s/spec.json", r->run_dir);
	rc = read_spec(r, path, false, err);
	if (rc == -ENOENT && spec_path)
		rc = read_spec(r, spec_path, true, err);
	if (rc && rc != -ENOENT)
		return rc;
	snprintf(path, sizeof(path), "%s/metrics.jsonl", r->run_dir);
	rc = launch__jsonl_each(path, NULL, metrics_fn, &d, &r->skipped, err);
	if (rc == -ENOENT)
		dt_err_add(err, "%s: no such file: no run has started in %s yet", path, r->run_dir);
	if (rc)
		return rc;
	n_metrics = r->n_events;
	fill_times(r);
	snprintf(path, sizeof(path), "%s/events.jsonl", r->run_dir);
	rc = launch__jsonl_each(path, NULL, events_fn, r, &r->skipped, err);
	if (rc && rc != -ENOENT)
		return rc;
	rc = merge_events(r, n_metrics);
	if (!rc)
		mark_cancels(r);
	return rc ? rc : goodput(r);
}

int launch__report_read(const char *run_dir, const char *spec_path, struct launch__report *out,
			struct dt_err *err)
{
	int rc;

	*out = (struct launch__report){0};
	out->run_dir = strdup(run_dir);
	if (!out->run_dir) {
		dt_err_add(err, "%s: out of memory", run_dir);
		return -ENOMEM;
	}
	name_defaults(out);
	rc = read_files(out, spec_path, err);
	if (rc == -ENOMEM)
		dt_err_add(err, "%s: out of memory", run_dir);
	return rc;
}

void launch__report_free(struct launch__report *r)
{
	free(r->run_dir);
	free(r->steps);
	free(r->evals);
	free(r->events);
	free(r->good.per_start);
	launch__report_ranks_free(&r->ranks);
	*r = (struct launch__report){0};
}

/* --- queries --- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double launch__report_median(const struct launch__report *r, int k)
{
	double *v = malloc((r->n_steps + 1) * sizeof(*v)), m = NAN;
	size_t i, n = 0;

	if (!v)
		return NAN;
	for (i = 0; i < r->n_steps; i++)
		if (isfinite(r->steps[i].t[k]))
			v[n++] = r->steps[i].t[k];
	if (n) {
		qsort(v, n, sizeof(*v), cmp_double);
		m = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	}
	free(v);
	return m;
}

const char *launch__report_state(const struct launch__report *r, char *buf, size_t size)
{
	const struct launch__report_event *last = NULL;
	size_t i;

	for (i = 0; i < r->n_events; i++)
		if (r->events[i].kind == LAUNCH__EV_STOP || r->events[i].kind == LAUNCH__EV_START)
			last = &r->events[i];
	if (r->n_steps == 0)
		snprintf(buf, size, "no step logged yet (%d start%s)", r->starts, r->starts == 1 ? "" : "s");
	else if (r->ended)
		snprintf(buf, size, "ended at step %lld of %lld", r->last_step, r->total_steps);
	else if (last && last->kind == LAUNCH__EV_STOP && last->cancelled)
		snprintf(buf, size, "cancelled by the user at step %lld of %lld (saved; dtrain-submit resume continues it)",
			 last->step, r->total_steps);
	else if (last && last->kind == LAUNCH__EV_STOP)
		snprintf(buf, size, "stopped by %s at step %lld of %lld (saved; not restarted since)",
			 last->what, last->step, r->total_steps);
	else
		snprintf(buf, size, "step %lld of %lld, no end logged (running, or ended without a word)",
			 r->steps[r->n_steps - 1].step, r->total_steps);
	return buf;
}

const char *launch__report_sparkline(const struct launch__report *r, int width, char *buf,
				     size_t size)
{
	double lo = INFINITY, hi = -INFINITY, v[256], *loss;
	size_t i, n = 0, len = 0, w = width < 1 ? 1 : width > 256 ? 256 : (size_t)width, b;
	bool logy;

	buf[0] = '\0';
	loss = malloc((r->n_steps + 1) * sizeof(*loss));
	if (!loss)
		return buf;
	for (i = 0; i < r->n_steps; i++)
		if (isfinite(r->steps[i].loss))
			loss[n++] = r->steps[i].loss;
	if (w > n)
		w = n;
	/* each block the mean of its share of the steps */
	for (b = 0; b < w; b++) {
		size_t from = n * b / w, to = n * (b + 1) / w;
		double sum = 0;

		for (i = from; i < to; i++)
			sum += loss[i];
		v[b] = sum / (double)(to - from);
		lo = fmin(lo, v[b]);
		hi = fmax(hi, v[b]);
	}
	free(loss);
	logy = lo > 0 && hi / lo > 10;
	for (b = 0; b < w && len + 4 <= size; b++) {
		double x = logy ? log(v[b] / lo) / log(hi / lo) : hi > lo ? (v[b] - lo) / (hi - lo) : 0.5;
		int level = (int)lround(x * 7);

		/* U+2581 + level in UTF-8: E2 96 81..88 */
		buf[len++] = (char)0xE2;
		buf[len++] = (char)0x96;
		buf[len++] = (char)(0x81 + level);
	}
	buf[len] = '\0';
	return buf;
}

const char *launch__report_secs(double s, char *buf, size_t size)
{
	long long t = (long long)(s + 0.5);

	if (!isfinite(s))
		snprintf(buf, size, "-");
	else if (s == 0)
		snprintf(buf, size, "0 s");
	else if (s < 1 && s != 0)
		snprintf(buf, size, "%.3g ms", s * 1e3);
	else if (s < 10)
		snprintf(buf, size, "%.2f s", s);
	else if (s < 60)
		snprintf(buf, size, "%.1f s", s);
	else if (s < 3600)
		snprintf(buf, size, "%lld min %02lld s", t / 60, t % 60);
	else
		snprintf(buf, size, "%lld h %02lld min", t / 3600, t / 60 % 60);
	return buf;
}
