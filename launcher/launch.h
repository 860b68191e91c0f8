/*
 * launch.h - dtrain-submit: turn a job spec into a Slurm batch job, and find,
 * watch and cancel the jobs a user submitted.
 *
 * A submit has two phases. launch_plan() does, in memory, everything that can
 * fail because of the input: site file, job spec, run dir name, batch script
 * and its syntax. It creates nothing and runs no Slurm command. Then
 * launch_submit() creates the run dir atomically, runs sbatch and records the
 * job in the per-user registry; a refused sbatch leaves nothing behind.
 *
 * The batch script (launch_render_script) is the trust boundary: a value from
 * a spec or site file that lands in it is refused (#SBATCH lines, comments)
 * or a single-quoted shell word (the body), except `setup` lines, the only
 * fields documented as shell.
 *
 * Errors: functions return 0 or a negative errno and add one line per problem
 * to a struct dt_err. In the submit path -EINVAL means exactly "the job spec
 * or the site file (or a value in them) is invalid" (exit code 3); a job that
 * cannot be found is -ENOENT; Slurm refusing is -EIO.
 */
#ifndef DTRAIN_LAUNCHER_LAUNCH_H
#define DTRAIN_LAUNCHER_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>

#include "jobs/spec.h"
#include "base/err.h"
#include "base/buf.h"
#include "site/site.h"

/* --- command line --- */

enum launch_cmd {
	LAUNCH_SUBMIT,
	LAUNCH_VALIDATE,
	LAUNCH_STATUS,
	LAUNCH_CANCEL,
	LAUNCH_LOGS,
	LAUNCH_RESUME,
	LAUNCH_SWEEP,
	LAUNCH_REPORT,
	LAUNCH_HELP,    /* print launch_help(help_for) */
	LAUNCH_VERSION,
};

/* A parsed command line. Strings are borrowed from argv; the sets array is
 * owned (free with launch_args_free). */
struct launch_args {
	enum launch_cmd cmd;
	enum launch_cmd help_for; /* LAUNCH_HELP: the command; LAUNCH_HELP: the program */
	const char *spec_path;    /* submit, validate, sweep; report --spec */
	const char *run_dir;      /* resume: the run dir to continue */
	const char *site_path;    /* --site; NULL: $DTRAIN_SITE or the default */
	const char **sets;        /* --set "a.b=value", in command-line order, and
				   * the Slurm options as the --set of their keys */
	size_t n_sets;
	char **owned;             /* the sets made here (the Slurm options') */
	size_t n_owned;
	long ntasks;              /* -n/--ntasks: tasks in all; 0: not given */
	bool dry_run;             /* submit --dry-run */
	bool no_data_check;       /* submit, validate --no-data-check */
	const char *job;          /* status (NULL: all), cancel, logs: id or name;
				   * report: that or a run dir */
	bool follow;              /* logs -f */
	bool now;                 /* cancel --now: no save first */
	const char *after;        /* --after JOB: start once JOB completed */
	const char **grids;       /* sweep --grid KEY=V1,V2,... in order (strings
				   * borrowed, the array owned) */
	size_t n_grids;
	long seeds;               /* sweep --seeds N; 0: not given */
	long max_parallel;        /* sweep --max-parallel K; 0: no limit */
	const char *output;       /* report -o FILE; NULL: <run_dir>/report.html */
};

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

/* --- batch script --- */

/* Render the batch script of a resolved spec under a site policy into out
 * (appended only on success). Pure: no I/O. run_dir is absolute; the job runs
 * `srun --mpi=pmix --cpus-per-task=<resources.cpus_per_task> <site srun_extra>
 * <dtrain_run_path> <run_dir>/spec.json`.
 * -EINVAL with one line per refused value (a character sbatch or a reader
 * could misread in an #SBATCH line or a comment, a bad env name), -ENOMEM. */
int launch_render_script(const struct spec *spec, const struct site *site,
			 const char *run_dir, const char *dtrain_run_path,
			 struct dt_buf *out, struct dt_err *err);

/* Check a script's syntax with `bash -n` (no command runs). -EINVAL with
 * bash's message in err, or -errno when bash cannot be run. */
int launch_check_syntax(const char *script, struct dt_err *err);

/* --- submit, in two phases --- */

/* Everything a submit will write, rendered in memory. */
struct launch_plan {
	struct site site;        /* the policy used */
	struct spec spec;        /* resolved; spec.run_dir is the run dir */
	bool run_dir_auto;       /* named by us: may move on to the next suffix */
	time_t now;              /* the time the run dir name was taken from */
	char *dtrain_run;        /* the program the job runs (next to ours) */
	struct dt_buf script;    /* job.sh */
	struct dt_buf spec_json; /* spec.json (spec_dump) */
};

/* Load the site, resolve the spec, pick the run dir, render job.sh and
 * spec.json, check the script's syntax. Creates nothing. The caller frees
 * with launch_plan_free() (also after a failure). For LAUNCH_RESUME the
 * spec is a->run_dir's spec.json (resolved before) under the --set
 * values, and the run dir is that one. */
int launch_plan(const struct launch_args *a, struct launch_plan *out,
		struct dt_err *err);
void launch_plan_free(struct launch_plan *p);

/* The run dir for a job named `name` submitted at `now`:
 * <runs_root>/<name>-<YYYYmmdd-HHMMSS> (local time), or with -2, -3...
 * appended, the first that does not exist. Caller frees *out. */
int launch_pick_run_dir(const char *runs_root, const char *name, time_t now,
			char **out, struct dt_err *err);

/* One job dtrain-submit knows about. Owned strings; launch_job_free(). */
struct launch_job {
	char *id;        /* Slurm job id (digits) */
	char *name;      /* job name; NULL when unknown */
	char *run_dir;   /* NULL when unknown */
	char *submitted; /* "2024-05-01T12:00:00Z" (UTC); NULL: not from the registry */
	char *log_path;  /* the job's output file; NULL when unknown */
	char *cluster;   /* where it went (launch_cluster); NULL: not recorded */
};
void launch_job_free(struct launch_job *j);

/* Create the run dir (atomically: a sibling temp dir, fsync, rename), run
 * sbatch, then write <run_dir>/job_id and add the job to the registry.
 * Fails (nothing left behind) when the run dir cannot be made or sbatch
 * refuses the job (-EIO; sbatch's stderr went to ours); -EPROTO when sbatch
 * printed no job id (the job may be queued: the run dir stays). Once sbatch accepted
 * the job it returns 0 and *job is filled; problems after that (job_id file,
 * registry) go to warn. */
int launch_submit(struct launch_plan *p, struct launch_job *job,
		  struct dt_err *warn, struct dt_err *err);

/* A stopped run continued in its own run dir (resume.c): refused (-EBUSY)
 * while its last job is still active; the previous spec.json, job.sh and
 * recovery counters kept as spec-<id>.json, job-<id>.sh, recovery-<id>/,
 * the new ones written, sbatch run (-EIO when it refuses: the previous
 * files are put back), the job recorded as launch_submit does. */
int launch_resume(struct launch_plan *p, struct launch_job *job, struct dt_err *warn,
		  struct dt_err *err);

/* --- the registry: ${XDG_STATE_HOME:-$HOME/.local/state}/dtrain/jobs.tsv ---
 * A first line "# dtrain-jobs v1", then one line per submitted job:
 * job id, name, run dir, submit time and cluster, separated by tabs (lines
 * of older versions have no cluster). Append-only. One registry serves
 * every cluster a user submits to; a job id means something on its own
 * cluster only. */

/* The cluster that Slurm's clients talk to here: $SLURM_CONF (the config
 * file they read), else "default" (the system's). Valid until SLURM_CONF
 * changes. */
const char *launch_cluster(void);
/* Keep of jobs[*n] those of this cluster (or of none recorded), in order;
 * *elsewhere (may be NULL) counts the others, which are freed. */
void launch_jobs_here(struct launch_job *jobs, size_t *n, size_t *elsewhere);

/* The registry's path. Caller frees. */
int launch_registry_path(char **out, struct dt_err *err);
/* Append one job (id, name, run_dir, submitted). Creates the file. */
int launch_registry_append(const struct launch_job *j, struct dt_err *err);
/* Every job in the registry, oldest first; *jobs NULL and *n 0 when none.
 * Caller frees with launch_jobs_free(). */
int launch_registry_load(struct launch_job **jobs, size_t *n, struct dt_err *err);
void launch_jobs_free(struct launch_job *jobs, size_t n);

/* Find the job a user means on this cluster: digits are a job id (from the
 * registry, else from `scontrol show job`), anything else the most recent
 * registry entry of that name. -ENOENT with a line naming arg when there
 * is none. */
int launch_resolve_job(const char *arg, struct launch_job *out, struct dt_err *err);

/* A sweep (launcher/sweep.c) is one registry entry: the job array's id,
 * the sweep's name and its sweep dir, which holds sweep.json and a run dir
 * task-<k> per task. launch_resolve_job also takes "<sweep>_<k>" (the
 * array's id or the sweep's name, then the task): that task as a job of
 * its own, id "<array id>_<k>". */

/* Is run_dir a sweep's (it holds sweep.json)? */
bool launch_is_sweep(const char *run_dir);
/* Task k of the sweep as a job: id "<id>_<k>" (or the job a resume of its
 * run dir started, from its job_id), name "<name>_<k>", its run dir, its
 * output (the newest slurm-*.out there). -ENOENT: no such task; -ENOMEM. */
int launch_sweep_task(const struct launch_job *sweep, long k, struct launch_job *out);

/* --- Slurm queries --- */

/* How long one Slurm query may take. squeue and scontrol wait
 * MessageTimeout (10 s by default) per try, and try again, when slurmctld
 * does not answer: status would wait half a minute per job. */
#define LAUNCH_SLURM_WAIT_S 4.0

/* Slurm's answers during one command: once a query went unanswered, the
 * next ones do not wait again. Zero-initialise. */
struct launch_slurm {
	bool unreachable; /* a query got no answer: Slurm is down or unreachable */
	char why[200];    /* the client's words, or that it did not answer in time */
};

/* What Slurm says of a job. */
struct launch_state {
	char name[32];   /* squeue's %T, else scontrol's JobState; "ENDED" when
			  * Slurm no longer knows the job; "UNKNOWN" when Slurm
			  * did not answer (sl->unreachable) */
	char reason[48]; /* why a pending job waits, when a user should know:
			  * squeue's %r (JobHeldUser, Dependency, BeginTime, ...);
			  * "" for none and for the usual Priority, Resources */
};

/* The job's state. Never fails: see st->name. */
void launch_job_state(struct launch_slurm *sl, const char *id, struct launch_state *st);
/* The state as status shows it: "RUNNING", "PENDING (JobHeldUser)",
 * "unknown (Slurm unreachable)"; into buf, also returned. */
const char *launch_state_text(const struct launch_state *st, char *buf, size_t size);
/* True for states from which more output may come (PENDING, RUNNING...,
 * and UNKNOWN: Slurm did not say it ended). */
bool launch_state_active(const char *state);

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
