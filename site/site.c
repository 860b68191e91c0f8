/*
 * site.c - load the site policy file and apply its locks and limits.
 *
 * The site file's own keys are declared in a table of the same kind as the
 * job spec's (jobs/spec_table.c) and checked by the same engine; `defaults`
 * is checked as a job-spec fragment and `locked` against the job-spec table.
 */
#include "site/site.h"
#include "base/path.h"
#include "base/str.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#define S(field) offsetof(struct site, field)

static const struct spec_field site_fields[] = {
	{ "runs_root", SPEC_STR, S(runs_root), "null", 1, 4000, 0, 0, NULL, SPEC_F_OPTIONAL | SPEC_F_PATH,
	  "where run directories go when a spec sets no run_dir; default ~/dtrain-runs" },
	{ "limits.max_nodes", SPEC_INT, S(limits.max_nodes), "0", 0, 1e9, 0, 0, NULL, 0,
	  "most nodes a job may ask for; 0: no limit" },
	{ "limits.max_tasks_per_node", SPEC_INT, S(limits.max_tasks_per_node), "0", 0, 1e9, 0, 0, NULL, 0,
	  "most ranks per node; 0: no limit" },
	{ "limits.max_cpus_per_task", SPEC_INT, S(limits.max_cpus_per_task), "0", 0, 1e9, 0, 0, NULL, 0,
	  "most CPUs per rank; 0: no limit" },
	{ "limits.max_gpus_per_node", SPEC_INT, S(limits.max_gpus_per_node), "-1", -1, 1e9, 0, 0, NULL, 0,
	  "most GPUs per node; -1: no limit, 0: no GPUs" },
	{ "limits.max_time", SPEC_TIME, S(limits.max_time_s), "null", 60, 1e12, 0, 0, NULL, SPEC_F_OPTIONAL,
	  "longest wall-clock limit, as in resources.time; null: no limit" },
	{ "limits.partitions", SPEC_STRLIST, S(limits.partitions), "[]", 1, 128, 0, 1024, NULL, SPEC_F_SLURM,
	  "partitions jobs may use; []: any" },
	{ "locked", SPEC_STRLIST, S(locked), "[]", 1, 256, 0, 1024, NULL, SPEC_F_TEXT,
	  "job-spec paths a user spec may not set (their value comes from defaults)" },
	{ "env_allow", SPEC_STRLIST, S(env_allow), "[]", 1, 128, 0, 256, NULL, SPEC_F_TEXT,
	  "environment variables (NAME, or PREFIX* for every name starting with PREFIX) a job spec may set although a lock pattern covers them or they change how the job starts (LD_*, PATH, SLURM_*, SBATCH_*, BASH_ENV, ENV, DTRAIN_FAULT_*)" },
	{ "env", SPEC_STRMAP, S(env), "{}", 0, 4096, 0, 256, NULL, SPEC_F_TEXT,
	  "environment exported in every batch script, after the user's (the site wins)" },
	{ "sbatch_extra", SPEC_STRLIST, S(sbatch_extra), "[]", 1, 256, 0, 64, NULL, SPEC_F_TEXT,
	  "extra sbatch options, one per item, e.g. \"--exclusive\"" },
	{ "srun_extra", SPEC_STRLIST, S(srun_extra), "[]", 1, 256, 0, 64, NULL, SPEC_F_TEXT,
	  "extra srun arguments, one per item; each is passed as one quoted word" },
	{ "setup", SPEC_STRLIST, S(setup), "[]", 0, 4096, 0, 256, NULL, SPEC_F_SHELL,
	  "shell lines run before the user's setup lines (e.g. module loads)" },
};

#define N_SITE_FIELDS (sizeof(site_fields) / sizeof(site_fields[0]))

void site_find(const char *explicit_path, const char **system, const char **user)
{
	const char *env = getenv("DTRAIN_SITE");

	/* absent only when it is not there: one that cannot be read is still
	 * the policy (and loading it says why it cannot be) */
	*system = access(SITE_DEFAULT_PATH, F_OK) == 0 || (errno != ENOENT && errno != ENOTDIR) ?
			  SITE_DEFAULT_PATH : NULL;
	*user = explicit_path ? explicit_path : env && *env ? env : NULL;
}

static const struct spec_field *site_field(const char *path)
{
	size_t i;

	for (i = 0; i < N_SITE_FIELDS; i++)
		if (!strcmp(site_fields[i].path, path))
			return &site_fields[i];
	return NULL;
}

static const char *site_suggest(const char *path)
{
	const char *best = NULL;
	int best_d = 4;
	size_t i;

	for (i = 0; i < N_SITE_FIELDS; i++) {
		int d = dt_edit_distance(path, site_fields[i].path);

		if (d < best_d) {
			best_d = d;
			best = site_fields[i].path;
		}
	}
	if (!best && dt_edit_distance(path, "defaults") < 4)
		best = "defaults";
	if (!best && dt_edit_distance(path, "limits") < 3)
		best = "limits";
	return best;
}

/* NAME, or PREFIX* with PREFIX a name's start ("" in "*": every name). */
static bool env_name_or_prefix(const char *p, bool pattern_ok)
{
	size_t n = strlen(p), i;

	if (pattern_ok && n && p[n - 1] == '*')
		n--;
	for (i = 0; i < n; i++)
		if (!(p[i] == '_' || (p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= 'a' && p[i] <= 'z') ||
		      (i > 0 && p[i] >= '0' && p[i] <= '9')))
			return false;
	return n > 0 || (pattern_ok && p[0] == '*');
}

/* A locked entry must name a job-spec key, a section of them, env.NAME, or
 * be one of the patterns docs/site-admin.md defines: env.* and env.PREFIX*. */
static int check_lock_path(const char *file, size_t idx, const char *p, struct dt_err *err)
{
	size_t n, i, len = strlen(p);
	const struct spec_field *f = spec_fields(&n);

	if (!strncmp(p, "env.", 4) && env_name_or_prefix(p + 4, true))
		return 0;
	if (strchr(p, '*'))
		return dt_err_add(err, "%s: locked[%zu]: \"%s\": the only patterns are env.* and env.PREFIX* (a section is locked by its name: \"checkpoint\" locks every checkpoint key)",
				  file, idx, p);
	for (i = 0; i < n; i++)
		if (!strncmp(f[i].path, p, len) && (f[i].path[len] == '\0' || f[i].path[len] == '.'))
			return 0;
	return dt_err_add(err, "%s: locked[%zu]: \"%s\" is not a job-spec key (see jobs/README.md)",
			  file, idx, p);
}

/* An sbatch option must look like --name or --name=value with nothing a
 * batch script line could misread. */
static int check_sbatch_opt(const char *file, size_t idx, const char *o, struct dt_err *err)
{
	const char *p;

	if (strncmp(o, "--", 2) || !o[2])
		return dt_err_add(err, "%s: sbatch_extra[%zu]: expected an option like \"--exclusive\" (got \"%s\")",
				  file, idx, o);
	for (p = o; *p; p++)
		if (strchr(" \t'\"`$;\\|&<>(){}", *p))
			return dt_err_add(err, "%s: sbatch_extra[%zu]: character '%c' not allowed in an #SBATCH option (got \"%s\")",
					  file, idx, *p, o);
	return 0;
}

static int walk_site(const char *file, json_object *obj, const char *prefix,
		     struct site *out, struct dt_err *err)
{
	char full[256];
	int rc = 0;

	json_object_object_foreach(obj, key, val) {
		const struct spec_field *f;

		snprintf(full, sizeof(full), "%s%s", prefix, key);
		if (!*prefix && !strcmp(key, "defaults")) {
			if (spec_check_fragment(val, file, "defaults.", err))
				rc = -EINVAL;
			else if (val && json_object_deep_copy(val, &out->defaults, NULL))
				return -ENOMEM;
			continue;
		}
		if (!*prefix && !strcmp(key, "limits")) {
			if (!json_object_is_type(val, json_type_object))
				rc = dt_err_add(err, "%s: limits: expected an object", file);
			else if (walk_site(file, val, "limits.", out, err))
				rc = -EINVAL;
			continue;
		}
		f = site_field(full);
		if (!f) {
			const char *hint = site_suggest(full);

			if (hint)
				rc = dt_err_add(err, "%s: %s: unknown key; did you mean \"%s\"?", file, full, hint);
			else
				rc = dt_err_add(err, "%s: %s: unknown key (see docs/site-admin.md)", file, full);
			continue;
		}
		if (spec_field_set(f, val, out, file, "", err))
			rc = -EINVAL;
	}
	return rc;
}

static int set_defaults(struct site *out, struct dt_err *err)
{
	size_t i;
	int rc = 0;

	for (i = 0; i < N_SITE_FIELDS; i++) {
		json_object *v = json_tokener_parse(site_fields[i].def);

		if (spec_field_set(&site_fields[i], v, out, "site table default", "", err))
			rc = -EINVAL;
		json_object_put(v);
	}
	return rc;
}

static int resolve_runs_root(struct site *s, struct dt_err *err)
{
	const char *home = getenv("HOME");
	struct dt_buf b = {0};
	const char *label = s->path ? s->path : "site";

	if (!s->runs_root || !strncmp(s->runs_root, "~/", 2)) {
		if (!home || !*home)
			return dt_err_add(err, "%s: runs_root: not set and HOME is not set; set runs_root", label);
		if (dt_buf_printf(&b, "%s/%s", home, s->runs_root ? s->runs_root + 2 : "dtrain-runs"))
			return -ENOMEM;
	} else if (dt_buf_puts(&b, s->runs_root)) {
		return -ENOMEM;
	}
	free(s->runs_root);
	s->runs_root = dt_abspath(b.p);
	dt_buf_free(&b);
	return s->runs_root ? 0 : -ENOMEM;
}

int site_load(const char *path, struct site *out, struct dt_err *err)
{
	json_object *root = NULL;
	size_t i;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = set_defaults(out, err);
	if (rc)
		goto out;
	if (path) {
		out->path = strdup(path);
		if (!out->path) {
			rc = -ENOMEM;
			goto out;
		}
		rc = spec_json_load(path, &root, err);
		if (rc)
			goto out;
		rc = walk_site(path, root, "", out, err);
		for (i = 0; i < out->locked.n; i++)
			if (check_lock_path(path, i, out->locked.v[i], err))
				rc = -EINVAL;
		for (i = 0; i < out->sbatch_extra.n; i++)
			if (check_sbatch_opt(path, i, out->sbatch_extra.v[i], err))
				rc = -EINVAL;
		for (i = 0; i < out->env_allow.n; i++)
			if (!env_name_or_prefix(out->env_allow.v[i], true))
				rc = dt_err_add(err, "%s: env_allow[%zu]: \"%s\" is not an environment variable name or NAME_PREFIX*",
						path, i, out->env_allow.v[i]);
		if (rc)
			goto out;
	}
	out->runs_root_set = out->runs_root != NULL;
	rc = resolve_runs_root(out, err);
out:
	if (rc == -ENOMEM)
		dt_err_add(err, "%s: out of memory while reading the site policy", path ? path : "site");
	json_object_put(root);
	if (rc)
		site_free(out);
	return rc;
}

void site_free(struct site *s)
{
	size_t i;

	for (i = 0; i < N_SITE_FIELDS; i++)
		spec_field_free(&site_fields[i], s);
	json_object_put(s->defaults);
	free(s->path);
	free(s->user_path);
	free(s->label);
	memset(s, 0, sizeof(*s));
}

/* --- a user's file under the system's --- */

/* under's keys that top lacks, added to top (deep copies), objects merged
 * key by key: top's values win. *top may be NULL (it becomes a copy). */
static int merge_under(json_object **top, json_object *under)
{
	if (!under)
		return 0;
	if (!*top)
		return json_object_deep_copy(under, top, NULL) ? -ENOMEM : 0;
	if (!json_object_is_type(*top, json_type_object) || !json_object_is_type(under, json_type_object))
		return 0;
	json_object_object_foreach(under, key, val) {
		json_object *mine = NULL, *copy = NULL;

		if (!json_object_object_get_ex(*top, key, &mine)) {
			if (json_object_deep_copy(val, &copy, NULL) ||
			    json_object_object_add(*top, key, copy)) {
				json_object_put(copy);
				return -ENOMEM;
			}
		} else if (mine && merge_under(&mine, val)) { /* top's null stays */
			return -ENOMEM;
		}
	}
	return 0;
}

/* The stricter of two limits where 0 (or, lowest = -1, -1) means none. */
static long stricter(long a, long b, long none)
{
	if (a == none)
		return b;
	if (b == none)
		return a;
	return a < b ? a : b;
}

static int add_str(struct spec_strs *l, const char *v)
{
	char **grown, *copy;
	size_t i;

	for (i = 0; i < l->n; i++)
		if (!strcmp(l->v[i], v))
			return 0;
	copy = strdup(v);
	grown = copy ? realloc(l->v, (l->n + 1) * sizeof(*grown)) : NULL;
	if (!grown) {
		free(copy);
		return -ENOMEM;
	}
	l->v = grown;
	l->v[l->n++] = copy;
	return 0;
}

/* The partitions both allow (either list empty: the other's). None in
 * common is -EINVAL (an empty list would mean "any"). */
static int both_allow(struct spec_strs *sys, const struct spec_strs *user)
{
	size_t i, j, k = 0;

	if (!user->n)
		return 0;
	if (!sys->n) {
		for (i = 0; i < user->n; i++)
			if (add_str(sys, user->v[i]))
				return -ENOMEM;
		return 0;
	}
	for (i = 0; i < sys->n; i++) {
		for (j = 0; j < user->n && strcmp(sys->v[i], user->v[j]); j++)
			;
		if (j < user->n)
			sys->v[k++] = sys->v[i];
		else
			free(sys->v[i]);
	}
	sys->n = k;
	return k ? 0 : -EINVAL;
}

/* Every leaf path of a defaults fragment that a lock covers is refused:
 * a locked key's value is the system's default (or the built-in one),
 * never a user's file's. */
static int defaults_unlocked(const struct site *s, const struct site *u, json_object *obj,
			     const char *prefix, struct dt_err *err)
{
	char path[512];
	const char *lock;
	int rc = 0;

	if (!obj || !json_object_is_type(obj, json_type_object))
		return 0;
	json_object_object_foreach(obj, key, val) {
		snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", key);
		lock = site_locked(s, path);
		if (lock)
			rc = dt_err_add(err, "%s: defaults.%s: locked by the system policy %s (locked: \"%s\"); a user's site file cannot set a default there",
					u->path, path, s->path, lock);
		else if (defaults_unlocked(s, u, val, path, err))
			rc = -EINVAL;
	}
	return rc;
}

/* What the user's file u may add to the system's s (see site.h). */
static int layer_user(struct site *s, const struct site *u, struct dt_err *err)
{
	const char *refused[5] = { NULL };
	int n = 0, i, rc = 0;
	size_t k;

	if (u->env.n)
		refused[n++] = "env";
	if (u->sbatch_extra.n)
		refused[n++] = "sbatch_extra";
	if (u->srun_extra.n)
		refused[n++] = "srun_extra";
	if (u->setup.n)
		refused[n++] = "setup";
	if (u->env_allow.n)
		refused[n++] = "env_allow";
	for (i = 0; i < n; i++)
		rc = dt_err_add(err, "%s: %s: a user's site file cannot set it under the system policy %s, only add defaults, locks and limits (hint: env and setup go in the job spec)",
				u->path, refused[i], s->path);
	if (u->runs_root_set && site_locked(s, "run_dir"))
		rc = dt_err_add(err, "%s: runs_root: the system policy %s locks run_dir (locked: \"%s\"); a user's site file cannot move the runs",
				u->path, s->path, site_locked(s, "run_dir"));
	if (rc || defaults_unlocked(s, u, u->defaults, "", err))
		return -EINVAL;
	if (u->runs_root_set) {
		char *root = strdup(u->runs_root);

		if (!root)
			return -ENOMEM;
		free(s->runs_root);
		s->runs_root = root;
	}
	if (merge_under(&s->defaults, u->defaults))
		return -ENOMEM;
	for (k = 0; k < u->locked.n; k++)
		if (add_str(&s->locked, u->locked.v[k]))
			return -ENOMEM;
	s->limits.max_nodes = stricter(s->limits.max_nodes, u->limits.max_nodes, 0);
	s->limits.max_tasks_per_node = stricter(s->limits.max_tasks_per_node,
						u->limits.max_tasks_per_node, 0);
	s->limits.max_cpus_per_task = stricter(s->limits.max_cpus_per_task,
					       u->limits.max_cpus_per_task, 0);
	s->limits.max_gpus_per_node = stricter(s->limits.max_gpus_per_node,
					       u->limits.max_gpus_per_node, -1);
	s->limits.max_time_s = stricter(s->limits.max_time_s, u->limits.max_time_s, 0);
	rc = both_allow(&s->limits.partitions, &u->limits.partitions);
	if (rc == -EINVAL)
		return dt_err_add(err, "%s: limits.partitions: none of them is one the system policy %s allows",
				  u->path, s->path), -EINVAL;
	if (rc)
		return -ENOMEM;
	s->user_path = strdup(u->path);
	if (!s->user_path || asprintf(&s->label, "%s with %s", s->path, u->path) < 0) {
		s->label = NULL;
		return -ENOMEM;
	}
	return 0;
}

static bool same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	return !strcmp(a, b) || (stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
				 sa.st_ino == sb.st_ino);
}

int site_load_policy(const char *system_path, const char *user_path, struct site *out,
		     struct dt_err *err)
{
	struct site user;
	int rc;

	if (!system_path || !user_path || same_file(system_path, user_path))
		return site_load(system_path ? system_path : user_path, out, err);
	rc = site_load(system_path, out, err);
	if (rc)
		return rc;
	rc = site_load(user_path, &user, err);
	if (rc) {
		site_free(out);
		return rc;
	}
	rc = layer_user(out, &user, err);
	if (rc == -ENOMEM)
		dt_err_add(err, "%s: out of memory while reading the site policy", user_path);
	site_free(&user);
	if (rc)
		site_free(out);
	return rc;
}

const char *site_locked(const struct site *s, const char *path)
{
	return s ? spec_path_covered(&s->locked, path) : NULL;
}

static int check_limits(const void *ctx, const struct spec *spec,
			const char *(*origin)(void *octx, const char *path), void *octx,
			struct dt_err *err)
{
	return site_check_limits(ctx, spec, origin, octx, err);
}

void site_policy(const struct site *s, struct spec_policy *out)
{
	*out = (struct spec_policy){ .label = s->label ? s->label : s->path, .defaults = s->defaults,
				     .locked = &s->locked, .env_allowed = &s->env_allow,
				     .check = check_limits, .ctx = s };
}

int site_check_limits(const struct site *s, const struct spec *spec,
		      const char *(*origin)(void *ctx, const char *path), void *ctx,
		      struct dt_err *err)
{
	const struct site_limits *lim = &s->limits;
	const char *site = s->label ? s->label : s->path ? s->path : "site";
	int rc = 0;
	size_t i;

#define OVER(val, max, key, limit)                                                     \
	if ((max) >= 0 && (val) > (max))                                               \
		rc = dt_err_add(err, "%s: %s: %ld exceeds the site limit %ld (%s: limits.%s)", \
				origin(ctx, key), key, (long)(val), (long)(max), site, limit)

	if (lim->max_nodes > 0)
		OVER(spec->resources.nodes.max, lim->max_nodes, "resources.nodes", "max_nodes");
	if (lim->max_tasks_per_node > 0)
		OVER(spec->resources.tasks_per_node, lim->max_tasks_per_node,
		     "resources.tasks_per_node", "max_tasks_per_node");
	if (lim->max_cpus_per_task > 0)
		OVER(spec->resources.cpus_per_task, lim->max_cpus_per_task,
		     "resources.cpus_per_task", "max_cpus_per_task");
	OVER(spec->resources.gpus_per_node, lim->max_gpus_per_node,
	     "resources.gpus_per_node", "max_gpus_per_node");
#undef OVER
	if (lim->max_time_s > 0 && (spec->resources.time_s == 0 || spec->resources.time_s > lim->max_time_s)) {
		char got[32], max[32];

		spec_format_time(lim->max_time_s, max, sizeof(max));
		if (spec->resources.time_s == 0)
			rc = dt_err_add(err, "%s: resources.time: must be set, at most %s (%s: limits.max_time)",
					origin(ctx, "resources.time"), max, site);
		else {
			spec_format_time(spec->resources.time_s, got, sizeof(got));
			rc = dt_err_add(err, "%s: resources.time: %s exceeds the site limit %s (%s: limits.max_time)",
					origin(ctx, "resources.time"), got, max, site);
		}
	}
	if (lim->partitions.n && spec->resources.partition) {
		for (i = 0; i < lim->partitions.n; i++)
			if (!strcmp(lim->partitions.v[i], spec->resources.partition))
				break;
		if (i == lim->partitions.n) {
			struct dt_buf allowed = {0};

			for (i = 0; i < lim->partitions.n; i++)
				dt_buf_printf(&allowed, "%s\"%s\"", i ? ", " : "", lim->partitions.v[i]);
			rc = dt_err_add(err, "%s: resources.partition: \"%s\" is not allowed by the site (%s: limits.partitions: %s)",
					origin(ctx, "resources.partition"), spec->resources.partition, site,
					dt_buf_str(&allowed));
			dt_buf_free(&allowed);
		}
	}
	return rc;
}
