/*
 * site.h - the cluster admins' policy for dtrain jobs: defaults under every
 * user spec, hard limits, keys users may not set, and what every batch script
 * gets (environment, extra #SBATCH options, extra srun options, setup lines).
 *
 * The system's site file, /etc/dtrain/site.json, when it exists, is the
 * policy. A user's file (--site, else $DTRAIN_SITE) can only add to it:
 * defaults under the system's (the system's win where both set a key),
 * more locks, stricter limits, and its own runs_root (refused when the
 * system locks run_dir); its env, sbatch_extra, srun_extra and setup
 * are refused (a job spec has env and setup of its own). Messages about
 * locks and limits then name both files ("<system> with <user>"). Without a system
 * file, the user's file is the policy; with neither, there is none. Every
 * file is validated as strictly as a job spec: unknown keys are errors
 * with a hint, `defaults` may hold only job-spec keys, `locked` only
 * job-spec paths.
 *
 * These locks are guard rails for dtrain's own jobs: a user can still run
 * sbatch by hand. What must hold against anyone is Slurm's: accounts,
 * QOS, partition limits (docs/site-admin.md).
 */
#ifndef DTRAIN_SITE_SITE_H
#define DTRAIN_SITE_SITE_H

#include <stdbool.h>
#include <stddef.h>

#include "jobs/spec.h"
#include "base/err.h"

#define SITE_DEFAULT_PATH "/etc/dtrain/site.json"

struct json_object;

struct site_limits {
	long max_nodes;          /* 0: no limit */
	long max_tasks_per_node; /* 0: no limit */
	long max_cpus_per_task;  /* 0: no limit */
	long max_gpus_per_node;  /* -1: no limit (0 is a real limit: no GPUs) */
	long max_time_s;         /* 0: no limit */
	struct spec_strs partitions; /* allowed; empty: any */
};

struct site {
	char *path;                  /* the file it came from (the system's when
				      * layered); NULL: no site file */
	char *user_path;             /* the user's file layered under it, or NULL */
	char *label;                 /* layered: "<path> with <user_path>", what
				      * lock and limit messages name; else NULL */
	struct json_object *defaults; /* job-spec fragment; NULL: none */
	struct site_limits limits;
	struct spec_strs locked;     /* job-spec paths users may not set; "env.*"
				      * and "env.PREFIX*" are patterns */
	struct spec_strs env_allow;  /* env keys (NAME or PREFIX*) a job spec may
				      * set though a lock pattern covers them or
				      * they change how the job starts */
	char *runs_root;             /* absolute; default $HOME/dtrain-runs */
	bool runs_root_set;          /* the file set runs_root (a user's file's
				      * replaces the system's unless run_dir is
				      * locked) */
	struct spec_map env;         /* exported after the user's env: site wins */
	struct spec_strs sbatch_extra; /* each becomes one "#SBATCH <opt>" line */
	struct spec_strs srun_extra;   /* each is one srun argument (quoted) */
	struct spec_strs setup;      /* shell lines, run before the user's setup */
};

/* --- life cycle --- */

/* The site files: *system = SITE_DEFAULT_PATH if it exists, else NULL;
 * *user = explicit (from --site) if not NULL, else $DTRAIN_SITE if set and
 * not empty, else NULL. Static or borrowed strings. */
void site_find(const char *explicit_path, const char **system, const char **user);

/* Load and validate a site file; path NULL gives the empty policy.
 * Caller frees with site_free(). 0, -EINVAL (every problem in err), -errno. */
int site_load(const char *path, struct site *out, struct dt_err *err);
/* The policy of a system file and a user's file (either may be NULL; the
 * same file twice is loaded once): see the top. Caller frees with
 * site_free(). 0, -EINVAL (every problem in err, a refused section of the
 * user's file naming both files), -errno. */
int site_load_policy(const char *system_path, const char *user_path, struct site *out,
		     struct dt_err *err);
void site_free(struct site *s);

/* --- the policy, for spec_resolve() --- */

/* The site as the policy spec_resolve() applies (jobs/spec.h): its file as
 * the label, its defaults, its locked paths and its limits. *out borrows
 * from s, which must outlive it. */
void site_policy(const struct site *s, struct spec_policy *out);

/* The locked path equal to `path` or above it ("resources" covers
 * "resources.partition"), or NULL. s may be NULL (no policy). */
const char *site_locked(const struct site *s, const char *path);

/* Check a resolved spec against the limits; `origin` names where each
 * value came from, for the message. 0 or -EINVAL with lines in err. */
int site_check_limits(const struct site *s, const struct spec *spec,
		      const char *(*origin)(void *ctx, const char *path), void *ctx,
		      struct dt_err *err);

#endif
