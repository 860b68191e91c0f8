/*
 * internal.h - helpers shared by the files of the launcher module (prefix
 * launch__): running programs without a shell, writing files, and showing
 * untrusted values in messages.
 */
#ifndef DTRAIN_LAUNCHER_INTERNAL_H
#define DTRAIN_LAUNCHER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "base/buf.h"

struct site;

/* --- running programs (proc.c) --- */

enum launch__stderr {
	LAUNCH__STDERR_PASS,    /* the child writes to our stderr */
	LAUNCH__STDERR_QUIET,   /* to /dev/null */
	LAUNCH__STDERR_CAPTURE, /* into proc.err */
};

/* One program to run. argv[0] is looked up on $PATH (unless it has a '/');
 * no shell is involved. Every pointer is borrowed for the call. */
struct launch__proc {
	const char *const *argv;    /* NULL-terminated */
	const char *in;             /* data for its stdin; NULL: /dev/null */
	size_t in_len;
	struct dt_buf *out;         /* its stdout is appended here; NULL: ours */
	enum launch__stderr err_mode;
	struct dt_buf *err;         /* LAUNCH__STDERR_CAPTURE: appended here */
	bool slurm_env_off;         /* the child's environment without any
				     * SBATCH_* or SLURM_* variable but
				     * SLURM_CONF (launch__slurm_input), and
				     * without what launch__env_dropped drops */
	const struct site *locks;   /* slurm_env_off: the site whose env locks
				     * are also dropped; NULL: none */
	double timeout_s;           /* > 0: the child is killed (SIGKILL) when
				     * it has not ended after this long */
};

/* An environment variable ("NAME=value") through which a submitting shell
 * could set sbatch's options or the job's Slurm settings behind the job
 * script's back (SBATCH_ACCOUNT, SLURM_PARTITION, ...): every SBATCH_* and
 * SLURM_* but SLURM_CONF, which says which cluster to talk to. */
bool launch__slurm_input(const char *entry);

/* The env part of a site's locked entry: "" for "env" and "env.*" (every
 * variable), NAME or PREFIX* for the others; NULL for a lock of no env key. */
const char *launch__env_lock(const char *lock);

/* An environment variable ("NAME=value") of the submitting shell that
 * sbatch must not copy into the job: BASH_ENV, ENV and BASH_FUNC_* always
 * (bash acts on them before the batch script's first line: a file sourced,
 * a function that shadows `unset`), and what `site` (NULL: none) locks as
 * the batch script's dtrain_locked matches it: env.NAME, env.PREFIX* less
 * env_allow, env.* but a login's own; never SLURM_* or SLURMD_*. */
bool launch__env_dropped(const struct site *site, const char *entry);

/* Run and wait. *status is the exit code, or 128+N when killed by signal N.
 * -ENOENT (line in err) when argv[0] is not on $PATH, -errno on a failed
 * pipe/fork, -ETIMEDOUT (line in err) when p->timeout_s passed and the child
 * was killed. A non-zero *status is not an error of this function. */
int launch__run(const struct launch__proc *p, int *status, struct dt_err *err);

/* Full path of an executable found on $PATH (or name itself if it holds a
 * '/' and is executable). Caller frees; NULL when none. */
char *launch__which(const char *name);

/* --- files and sbatch (submit.c) --- */

/* Create path (must not exist) with data, fsync it. 0 or -errno. */
int launch__write_new(const char *path, const void *data, size_t len, int mode);

struct launch_plan;
struct launch_job;
/* sbatch --parsable <p->spec.run_dir>/job.sh (sbatch found on PATH, under
 * p->site's locks) and, when accepted, the job written down: *job filled
 * (it owns the id), <run_dir>/job_id, the registry; problems in the
 * writing down are warnings. -ENOENT: no sbatch; -EIO: refused (its
 * message went to our stderr; a line in err); -EPROTO: output without a
 * job id (the job may be queued; nothing written down). */
int launch__sbatch_record(const struct launch_plan *p, struct launch_job *job,
			  struct dt_err *warn, struct dt_err *err);

/* --after JOB as the --set it stands for, into *kv (caller frees):
 * "resources.dependency=afterok:<JOB's id>" (JOB: an id, a name, a sweep
 * or one of its tasks). -EINVAL with a line when there is no such job. */
int launch__after_set(const char *after, char **kv, struct dt_err *err);

/* A sweep task's output: the newest slurm-*.out in its run dir dir (Slurm
 * names it after the task's own job id), else dir/slurm-<id>.out, which
 * is not there yet. Caller frees; NULL: out of memory. (registry.c) */
char *launch__task_output(const char *dir, const char *id);

/* status of a sweep (sweep_status.c): a row per task, best first */
int launch__sweep_status(const struct launch_job *sweep, struct dt_err *err);

/* That table read (sweep_status.c; the sweep's report draws it too): the
 * columns TASK, STATE, each key's last part, SEED, STEP, LOSS, BEST VAL
 * LOSS, AT; a row per task, best first. Owned; launch__sweep_table_free(). */
#define LAUNCH__SWEEP_COLS 24
struct launch__sweep_row {
	long k;                         /* the task */
	char *col[LAUNCH__SWEEP_COLS];  /* NULL past cols */
};
struct launch__sweep_table {
	char *title[LAUNCH__SWEEP_COLS];
	size_t cols;
	struct launch__sweep_row *rows; /* [n] */
	size_t n;
	long max_parallel;              /* 0: no limit */
	bool unreachable;               /* Slurm did not answer: states unknown */
	char why[200];                  /* ... in Slurm's client's words */
};
/* 0, or -errno with a line in err (the manifest unreadable, -ENOMEM);
 * files of the tasks that cannot be read are lines in warn */
int launch__sweep_table(const struct launch_job *sweep, struct launch__sweep_table *t,
			struct dt_err *warn, struct dt_err *err);
void launch__sweep_table_free(struct launch__sweep_table *t);
/* The states of a sweep's tasks in a few words ("2 running, 1 done") into
 * buf (all jobs' status shows a sweep's row so); sl: the command's Slurm */
struct launch_slurm;
const char *launch__sweep_states(const struct launch_job *sweep, struct launch_slurm *sl, char *buf,
				 size_t size);


/* --- text (render.c) --- */

/* Problems that do not fail the command, one "dtrain-submit: warning:"
 * line each on stderr. */
void launch__print_warnings(const struct dt_err *warn);

/* A copy of s fit for one line of a message or a script comment: control
 * characters become '?', and at most size-1 bytes ("..." when cut). */
const char *launch__printable(const char *s, char *buf, size_t size);

/* The value of `key=` in `scontrol show job` output (up to the next
 * whitespace), or NULL when absent or out of memory. Caller frees. (slurm.c) */
char *launch__scontrol_field(const char *text, const char *key);

/* --- JSON-lines files (jsonl.c) --- */

struct json_object;
struct json_tokener;

/* The line [len] (without its '\n') as one JSON object, or NULL (torn, not
 * JSON, not an object, trailing bytes). The caller puts it. */
struct json_object *launch__json_line(struct json_tokener *tok, const char *line, size_t len);
/* fn for each complete line of path that is one JSON object, in order
 * (when want is not NULL, only lines holding those bytes: a filter before
 * parsing); *skipped (when not NULL) counts the complete lines that are not.
 * A last line without its '\n' is still being written: left out. Stops at
 * fn's first nonzero return and returns it; a missing file is -ENOENT with
 * no line in err; else 0 or -errno with a line in err naming path. */
int launch__jsonl_each(const char *path, const char *want,
		       int (*fn)(void *ctx, struct json_object *o), void *ctx, int *skipped,
		       struct dt_err *err);

#endif
