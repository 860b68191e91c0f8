/*
 * cli.h - dtrain-submit's command line (cli.c), the commands its main()
 * calls, and what status reads and shows of a running job: progress from
 * metrics.jsonl (progress.c) and liveness from the heartbeats
 * (liveness.c). Private to the launcher and its tests: the installed API
 * is launch.h (plan, submit, registry, Slurm queries).
 */
#ifndef DTRAIN_LAUNCHER_CLI_H
#define DTRAIN_LAUNCHER_CLI_H

#include <stdbool.h>

#include "base/err.h"
#include "launcher/launch.h"

/* --- command line --- */

/* Parse argv (argv[0] is the program). 0, -EINVAL (usage error, a line in
 * err naming the offending argument) or -ENOMEM. */
int launch_parse_args(int argc, char *const argv[], struct launch_args *out,
		      struct dt_err *err);
void launch_args_free(struct launch_args *a);
/* The --help text of a command (LAUNCH_HELP: the program's). Static. */
const char *launch_help(enum launch_cmd cmd);
/* Command name for messages ("submit"). Static. */
const char *launch_cmd_name(enum launch_cmd cmd);

/* --- commands: what main() calls; each prints its own results --- */

int launch_cmd_submit(const struct launch_args *a, struct dt_err *err); /* and resume */
int launch_cmd_validate(const struct launch_args *a, struct dt_err *err);
int launch_cmd_status(const struct launch_args *a, struct dt_err *err);
int launch_cmd_cancel(const struct launch_args *a, struct dt_err *err);
int launch_cmd_logs(const struct launch_args *a, struct dt_err *err);
int launch_cmd_sweep(const struct launch_args *a, struct dt_err *err);
/* report JOB|RUN_DIR: the run's page, one self-contained HTML file
 * (launcher/report*.c) */
int launch_cmd_report(const struct launch_args *a, struct dt_err *err);

/* --- progress: <run_dir>/metrics.jsonl, written by dtrain-run ---
 * One JSON object per line, appended by rank 0; a requeued job appends a new
 * "start" and more lines. Used events: start (epochs), step, eval, end. Other
 * events, unknown keys, lines that are not one JSON object, and a last line
 * without its '\n' (still being written) are ignored.
 *
 * The file can be large, so only its end is read: 64 KiB chunks backwards
 * until the last step and the last eval are found, at most
 * LAUNCH_PROGRESS_SCAN_MAX bytes in all. An eval further back counts as none
 * (ACC "-"). When no "start" lies in the part read, the number of epochs is
 * taken from the file's first lines (every run of a job has the same spec). */

#define LAUNCH_PROGRESS_CHUNK (64 * 1024)
#define LAUNCH_PROGRESS_SCAN_MAX (1024 * 1024)

/* What a job's metrics say. Counts are 0 and doubles NAN when not reported. */
struct launch_progress {
	bool has_step;         /* a step event was found; the step fields are valid */
	long long step;        /* optimizer steps done (the last step event) */
	long long total_steps;
	long long epoch;       /* 1-based epoch of that step */
	long long epochs;      /* from a start event */
	long long steps_per_epoch; /* from the newest start event; 0: unknown */
	double loss;           /* training loss of that step */
	double samples_per_s;  /* throughput over the last logging interval */
	double eta_s;          /* seconds left, dtrain-run's estimate at that step */
	bool step_stale;       /* that step precedes the last start: requeued, no step since */
	bool has_eval;         /* an eval event was found; the eval fields are valid */
	long long eval_step;
	double test_loss;
	double test_accuracy;  /* fraction, 0..1 */
	double bits_per_byte;  /* byte-level language models: test_loss / ln 2; NAN else */
	double tokens_per_s;   /* language models: throughput in tokens; NAN else */
	bool ended;            /* an end event follows the last start */
};

/* Read the progress in the metrics file at path. A missing file is no
 * progress (0, has_step false). -errno with a line in err when it cannot be
 * read, -ENOMEM. Touches nothing but that file. */
int launch_progress_read(const char *path, struct launch_progress *out, struct dt_err *err);

/* The best evaluation of a run: the eval event with the lowest test loss
 * in the whole file (a sweep's status compares its tasks by it). */
struct launch_best {
	bool has;              /* an eval with a test loss was found */
	long long step;
	double test_loss;
	double bits_per_byte;  /* NAN but for byte-level text */
	double test_accuracy;
	double unix_time;      /* when it was logged; NAN when not recorded */
};

/* Read every eval event of the metrics file at path (a missing file: none).
 * -errno with a line in err when it cannot be read, -ENOMEM. */
int launch_progress_best(const char *path, struct launch_best *out, struct dt_err *err);

/* The progress as status shows it: short strings, "-" for each unknown. */
struct launch_progress_text {
	char step[48];  /* "120/9380" */
	char epoch[48]; /* "1/10" ("1" when the number of epochs is unknown) */
	char loss[32];  /* "0.5123": 4 significant digits */
	char acc[32];   /* "85.12%" */
	char rate[32];  /* samples/s, "12346" */
	char eta[32];   /* "00:07:00"; "-" unless running, not ended, step not stale */
	char test_loss[64]; /* "2.286 (step 600)", with ", 3.298 bits/byte" for byte-level text */
	char tokens[32];    /* tokens/s, "23402" (language models) */
};

/* Format p (no step: "-" everywhere). running: the job is RUNNING now. */
void launch_progress_format(const struct launch_progress *p, bool running,
			    struct launch_progress_text *out);

/* --- liveness: <run_dir>/heartbeat/rank-<r>, rewritten by each rank's
 * watchdog (base/heartbeat.h, runtime/world/watchdog.h) ---
 * When the newest step began, and whether the job still makes progress:
 * "stalled" when a rank's heartbeat has stopped (dt_heartbeat_silent) or a
 * rank has been in one phase longer than the watchdog's bound for it (the
 * watchdog should have ended the step: a stopped process cannot). Only the
 * files of the newest start of the job step count (a rank not started
 * again yet has its earlier file), of the first 4096 ranks. Only
 * meaningful while the job runs. */
struct launch_liveness {
	bool known;            /* rank 0's heartbeat was read; the rest is valid */
	int world;             /* ranks of the run, from rank 0's heartbeat */
	int read;              /* heartbeats of this start read, of world */
	double start;          /* Unix s: this start of the job step began */
	long long step;        /* the newest step any rank is in; 0: none yet */
	double step_at;        /* Unix s: that step began (the latest rank's) */
	double progress_at;    /* Unix s: the latest phase change of any rank */
	bool stalled;
	char why[256];         /* stalled: "rank 3 on node n2 silent for 8 s (last in step 41, step)" */
};

/* The liveness of the run in run_dir at Unix time now. Never fails: no
 * heartbeats (none yet, or written by an older dtrain) leave known false. */
void launch_liveness_read(const char *run_dir, double now, struct launch_liveness *out);

#endif
