/*
 * report.h - the report of a run (private to launcher/, prefix
 * launch__report / launch__svg): what <run_dir>/metrics.jsonl,
 * <run_dir>/events.jsonl and <run_dir>/spec.json say about a run, read into
 * one struct (report.c), and that struct drawn as one self-contained HTML
 * page (report_html.c) with inline SVG charts (report_svg.c).
 *
 * The run may still be going: a last line without its '\n' is being
 * written and is left out, as is any line that is not one JSON object.
 * metrics.jsonl grows across restarts of the run: every start appends a
 * "start" event and its steps; steps of a start that repeat numbers an
 * earlier start logged are work redone (a resume from an older checkpoint).
 *
 * Times are Unix seconds; NAN where the files do not say. Events that carry
 * no time of their own (start, checkpoint, stop, end) are placed at the
 * time of the step logged just before them (a start: its first step's time
 * less the seconds the process took to reach it).
 *
 * Sections: the run read, reading, queries, rendering.
 */
#ifndef DTRAIN_LAUNCHER_REPORT_H
#define DTRAIN_LAUNCHER_REPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"
#include "base/err.h"

struct json_object;

/* --- the run read --- */

/* One "step" event: the step and the means over its logging window. */
struct launch__report_step {
	long long step;      /* optimizer steps done */
	long long steps;     /* steps in the window this event sums up (>= 1) */
	int start;           /* index of the start it belongs to */
	bool redone;         /* an earlier start logged this step number already */
	double loss, lr, grad_norm;
	double samples_per_s, tokens_per_s; /* tokens: NAN but for language models */
	double t[6];         /* seconds per step: step, compute, pipe wait, grad
			      * wait, data, optim (LAUNCH__T_*) */
	double mfu;          /* model FLOPs utilization, 0..1; NAN: not logged */
	double unix_time;
};

enum { LAUNCH__T_STEP, LAUNCH__T_COMPUTE, LAUNCH__T_PIPE, LAUNCH__T_GRAD, LAUNCH__T_DATA,
       LAUNCH__T_OPTIM, LAUNCH__T_N };

/* One "eval" event. */
struct launch__report_eval {
	long long step;
	double test_loss, test_accuracy, bits_per_byte; /* NAN when not logged */
	double unix_time;
};

/* What the timeline shows, in file order (metrics, then events.jsonl merged
 * by time). */
enum launch__event_kind {
	LAUNCH__EV_START,      /* a start of the ranks (metrics "start") */
	LAUNCH__EV_RESUME,     /* loaded a checkpoint */
	LAUNCH__EV_INIT_FROM,  /* started from another run's weights */
	LAUNCH__EV_FIRST_STEP,
	LAUNCH__EV_CHECKPOINT,
	LAUNCH__EV_STOP,       /* a signal: saved, then exited for a requeue */
	LAUNCH__EV_END,
	LAUNCH__EV_JOB_START,  /* events.jsonl: the batch job (re)started */
	LAUNCH__EV_JOB_STOP,   /* events.jsonl: ... and stopped, with a cause */
	LAUNCH__EV_JOB_NOTE,   /* events.jsonl: another event (term, node_failure) */
};

struct launch__report_event {
	enum launch__event_kind kind;
	double time;         /* Unix s; NAN when unknown */
	bool time_exact;     /* from the event itself, not estimated */
	long long step;      /* -1 when none */
	int start;           /* the metrics start it belongs to; -1 for events.jsonl */
	int alloc;           /* events.jsonl: the job's allocation (Slurm's restart
			      * count; starts after crashes share one); -1 else */
	char job_id[32];     /* events.jsonl: the job's id (a resumed run's
			      * next job starts its restart count again) */
	double bytes;        /* checkpoint: size; NAN else */
	double seconds;      /* checkpoint: stall; resume: load; first_step: start-up */
	int nodes;           /* job_start: nodes in its list; 0 else */
	long long redone;    /* resume: steps its start did again (logged ones) */
	bool cancelled;      /* stop: asked by `dtrain-submit cancel` (its job's
			      * job_stop says "cancelled", or the cancel marker
			      * of its job is in the run dir) */
	char what[48];       /* signal, cause, device */
	char detail[256];    /* path, node list, layout, the job_stop's detail */
};

/* Every rank's part, from the runtime's "layout" and "ranks" events of the
 * newest start that logged them (report_ranks.c); n 0: none logged. */
struct launch__report_ranks {
	int n;               /* ranks */
	int start;           /* the start of the ranks they are of */
	int stages;          /* 1 + the highest stage */
	int *stage, *replica; /* [n] each rank's place (one allocation) */
	char (*node)[64];    /* [n] each rank's node */
	double *t;           /* [n][LAUNCH__T_N] seconds per step: the mean over
			      * the windows, weighted by their steps */
	double *rss_mib;     /* [n] peak resident memory (MiB) */
	long long steps;     /* steps the windows cover */
	int windows;         /* "ranks" events read */
};

/* Goodput: where the run's time went, as far as the files tell. */
enum {
	LAUNCH__G_PRODUCTIVE, /* in steps that were not redone */
	LAUNCH__G_STARTUP,    /* from each start of the ranks to its first step */
	LAUNCH__G_SAVE,       /* training stalled for checkpoints */
	LAUNCH__G_REDONE,     /* in steps an earlier start had done already */
	LAUNCH__G_N
};

struct launch__goodput {
	double s[LAUNCH__G_N];      /* seconds */
	double node_s[LAUNCH__G_N]; /* node-seconds: each start's times its nodes
				     * (events.jsonl's job_start, else the spec's) */
	bool has_alloc;      /* events.jsonl gave job_start/job_stop pairs */
	double alloc_node_s; /* node-seconds allocated to the job */
	int allocations;     /* the batch job's starts (Slurm's restarts + 1) */
	double idle_node_s;  /* alloc_node_s less node_s[] (>= 0) */
	double *per_start;   /* [starts][LAUNCH__G_N] seconds, start by start (the
			      * sums above); owned, launch__report_free() */
};

/* The run: owned arrays, launch__report_free(). */
struct launch__report {
	char *run_dir;
	char name[128];
	char model[200];      /* "gpt: 2 layers, 2 heads, embd 32, ..." */
	char layout[128];     /* "data 1 x pipeline 2, 2 micro-batches (1f1b)" */
	char device[96];      /* "cpu, fp32" */
	bool gpt;             /* a language model: throughput in tokens */
	int data, pipeline, micro_batches, nodes; /* from the spec; 0: unknown */
	bool has_spec;
	long long total_steps;
	struct launch__report_step *steps;
	size_t n_steps;
	struct launch__report_eval *evals;
	size_t n_evals;
	struct launch__report_event *events;
	size_t n_events;
	int starts;           /* "start" events */
	bool ended;           /* an end event follows the last start */
	long long last_step;  /* the highest step logged; 0: none */
	int skipped;          /* lines left out (torn, not JSON) */
	struct launch__goodput good;
	struct launch__report_ranks ranks;
	/* MFU (the newest start's): a GPT's model FLOPs per token, the peak
	 * FLOP/s of a node it is measured against, and where that came from */
	double flops_per_token, peak_flops_node;
	char peak_source[16]; /* "declared", "measured", "none" or "" */
};

/* --- reading --- */

/* Read the run in run_dir: metrics.jsonl (must exist: -ENOENT with a line
 * naming it), events.jsonl when present, spec.json when present, else
 * spec_path when not NULL (the resolved spec of a run started by hand).
 * 0, -errno with a line in err; the caller frees *out (also after a
 * failure). */
int launch__report_read(const char *run_dir, const char *spec_path, struct launch__report *out,
			struct dt_err *err);
void launch__report_free(struct launch__report *r);

/* report_ranks.c, for report.c: a "layout" event (every rank's place;
 * the ranks read so far are dropped) of start `start`, a "ranks" event
 * (added to the means; left out unless it has the layout's ranks).
 * 0 or -ENOMEM. */
int launch__report_ranks_layout(struct launch__report_ranks *k, int start, struct json_object *o);
void launch__report_ranks_window(struct launch__report_ranks *k, struct json_object *o);
void launch__report_ranks_free(struct launch__report_ranks *k);

/* --- queries --- */

/* The median of the time LAUNCH__T_<k> over the steps (their windows
 * weighted alike), NAN when none. */
double launch__report_median(const struct launch__report *r, int k);
/* The run's state in a few words: "ended at step 72 of 72", "stopped by
 * SIGTERM at step 35", "cancelled by the user at step 35", "step 40 of 80
 * (no end logged)". Into buf. */
const char *launch__report_state(const struct launch__report *r, char *buf, size_t size);
/* The step losses as a line of width Unicode blocks (U+2581..U+2588),
 * each the mean of its share of the steps, scaled from the lowest to the
 * highest (log scale when they span more than a decade); "" without steps.
 * size must hold 3 * width + 1 bytes. Into buf. */
const char *launch__report_sparkline(const struct launch__report *r, int width, char *buf,
				     size_t size);
/* A duration: "0.42 s", "12.3 s", "4 min 05 s", "2 h 03 min". Into buf. */
const char *launch__report_secs(double s, char *buf, size_t size);

/* --- rendering --- */

/* The page, appended to out. state: Slurm's word on the job ("RUNNING"),
 * or NULL when the run was named by its dir. 0 or -ENOMEM. */
int launch__report_html(const struct launch__report *r, const char *state, struct dt_buf *out);

/* One series of a line chart; arrays borrowed for the call. */
struct launch__svg_series {
	const char *name;     /* for the legend and the hover titles */
	const double *x, *y;  /* n points; a NAN y is left out */
	size_t n;
	const char *color;
	bool dots_only;       /* evals: markers without a line */
	const int *part;      /* NULL, or [n]: points of another part (a start
			       * of the ranks) are not joined */
};

/* A line chart: axes with ticks, units in the axis titles, a legend, one
 * <path> per series (data-points="N": its points drawn) and per point a
 * marker whose <title> gives its values. logy: a log-scale y axis (taken
 * only when every y is > 0). id names the chart in the DOM. */
struct launch__svg_chart {
	const char *id, *title, *xlabel, *ylabel;
	const char *xname;    /* the x value in a hover title: "step", "min" */
	bool logy;
	const struct launch__svg_series *series;
	size_t n_series;
};

/* Most markers a series draws: a longer series is thinned to every k-th
 * point (and its last), the line still through them. */
#define LAUNCH__SVG_MAX_POINTS 1500

int launch__svg_chart(struct dt_buf *out, const struct launch__svg_chart *c);
/* One horizontal bar of parts (seconds per step), stacked, with a legend
 * and a title per part. */
int launch__svg_stack(struct dt_buf *out, const char *id, const char *const *names,
		      const char *const *colors, const double *v, size_t n, const char *unit);
/* The run's life along wall time: one band per start (start-up, then
 * training), a mark per checkpoint, stop, resume and end, and the job's
 * allocations from events.jsonl. */
int launch__svg_timeline(struct dt_buf *out, const struct launch__report *r);
/* Every rank's (or, for many ranks, every stage's) parts of a step as one
 * stacked bar a row, its memory beside it (report_ranks_svg.c); nothing
 * when k holds no ranks. */
int launch__svg_ranks(struct dt_buf *out, const struct launch__report_ranks *k);
/* The start of a page (report_html.c): its head with the report's style,
 * and title as its <h1>; and its end: note (HTML, our own words), the
 * crosshair script. A run's page and a sweep's (report_sweep.c) share
 * them. 0 or -ENOMEM. */
int launch__html_open(struct dt_buf *out, const char *title);
int launch__html_close(struct dt_buf *out, const char *note);
/* Now, "2026-01-01 12:00:00 UTC", into buf. */
const char *launch__report_now(char *buf, size_t size);
/* A sweep's page (report_sweep.c), appended to out: its table as status
 * SWEEP prints it, and every task's curves on shared axes (a task with no
 * step logged is left out of them). A task's run that cannot be read is a
 * line in warn; 0, or -errno with a line in err (the sweep's manifest,
 * -ENOMEM). */
struct launch_job;
int launch__report_sweep(const struct launch_job *sweep, struct dt_buf *out, struct dt_err *warn,
			 struct dt_err *err);
/* s with & < > " ' written as entities, appended to out. */
int launch__html_text(struct dt_buf *out, const char *s);

#endif
