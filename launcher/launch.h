/*
 * launch.h - dtrain-submit's library, libdtrain's installed API: turn a job
 * spec into a Slurm batch job (plan, then submit), and find the jobs a user
 * submitted (the registry, Slurm's queries). The program's own part, its
 * command line and commands and what status shows, is cli.h (private).
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

/* --- what a plan is asked: dtrain-submit's command line, parsed (cli.h) --- */

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
 * owned (free with launch_args_free, cli.h, when launch_parse_args filled
 * it). */
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

#endif
