/*
 * sweep.c - `dtrain-submit sweep`: one spec run for every combination of
 * some keys' values, as one Slurm job array.
 *
 * Every task is planned as a submit of its own would be (launch_plan: the
 * site's defaults, locks and limits, the spec, the --set values, then the
 * task's grid values and seed, its run dir <sweep dir>/task-<k>), so a
 * task's job.sh is the batch script a submit would have written: its
 * preemption, recovery and requeue are a lone job's. The array's own
 * script (<sweep dir>/job.sh) carries the tasks' shared #SBATCH lines and
 * --array, and starts task $SLURM_ARRAY_TASK_ID's job.sh; each task writes
 * its output into its run dir as slurm-<its own job id>.out. Every task is
 * planned before anything is created: one bad combination refuses the
 * sweep, naming it. The sweep dir appears whole (a sibling temp dir
 * renamed into place) or not at all, and is removed when sbatch refuses.
 *
 * Sections: grids, tasks, the array's script, the sweep dir, the command.
 */
#include "launcher/cli.h"
#include "launcher/internal.h"
#include "base/io.h"
#include "base/str.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_TASKS 1000 /* Slurm's default MaxArraySize is 1001: ids 0..1000 */
#define MAX_GRIDS 16   /* keys a sweep varies (status shows a column each) */

/* --- grids --- */

struct grid {
	char *key;
	char **v; /* its values, in order */
	size_t n;
};

struct sweep {
	struct grid *g;
	size_t n_grids;
	size_t n_tasks;
	long seeds;            /* 0: none */
	char *after;           /* --after's --set, or NULL */
	char *dir;             /* the sweep dir */
	struct launch_plan *t; /* [n_tasks] */
	struct dt_buf script;  /* the array's job.sh */
	struct dt_buf manifest;/* sweep.json */
};

static void sweep_free(struct sweep *s)
{
	size_t i, j;

	for (i = 0; i < s->n_grids; i++) {
		for (j = 0; j < s->g[i].n; j++)
			free(s->g[i].v[j]);
		free(s->g[i].v);
		free(s->g[i].key);
	}
	free(s->g);
	for (i = 0; s->t && i < s->n_tasks; i++)
		launch_plan_free(&s->t[i]);
	free(s->t);
	free(s->after);
	free(s->dir);
	dt_buf_free(&s->script);
	dt_buf_free(&s->manifest);
	*s = (struct sweep){0};
}

/* Why a grid may not vary key, or NULL: the tasks are one job array, with
 * one set of #SBATCH lines and one sweep dir */
static const char *grid_refusal(const char *key)
{
	if (!strncmp(key, "resources.", 10))
		return "the tasks of a sweep are one job array and share its resources; submit one spec per value instead";
	if (!strcmp(key, "name") || !strcmp(key, "run_dir"))
		return "a sweep has one name and one sweep dir (task-<k> in it)";
	return NULL;
}

/* "KEY=V1,V2,..." into g: values split at commas outside brackets */
static int split_grid(const char *kv, struct grid *g, struct dt_err *err)
{
	const char *eq = strchr(kv, '='), *p, *start;
	int depth = 0;
	char **v;

	g->key = strndup(kv, (size_t)(eq - kv));
	if (!g->key)
		return -ENOMEM;
	if (grid_refusal(g->key))
		return dt_err_add(err, "--grid %s: %s", g->key, grid_refusal(g->key)), -EINVAL;
	for (p = start = eq + 1;; p++) {
		if (*p == '[' || *p == '{')
			depth++;
		else if ((*p == ']' || *p == '}') && depth > 0)
			depth--;
		if (*p && (*p != ',' || depth > 0))
			continue;
		if (p == start)
			return dt_err_add(err, "--grid %s: an empty value (got '%s')", g->key, eq + 1), -EINVAL;
		v = realloc(g->v, (g->n + 1) * sizeof(*v));
		if (!v || !(v[g->n] = strndup(start, (size_t)(p - start)))) {
			if (v)
				g->v = v;
			return -ENOMEM;
		}
		g->v = v;
		g->n++;
		if (!*p)
			return 0;
		start = p + 1;
	}
}

static int parse_grids(const struct launch_args *a, struct sweep *s, struct dt_err *err)
{
	size_t i, j;
	int rc;

	s->g = calloc(a->n_grids ? a->n_grids : 1, sizeof(*s->g));
	if (!s->g)
		return -ENOMEM;
	s->seeds = a->seeds;
	s->n_tasks = a->seeds ? (size_t)a->seeds : 1;
	if (a->n_grids > MAX_GRIDS)
		return dt_err_add(err, "sweep: %zu --grid keys; at most %d", a->n_grids, MAX_GRIDS), -EINVAL;
	for (i = 0; i < a->n_grids; i++) {
		rc = split_grid(a->grids[i], &s->g[i], err);
		s->n_grids++;
		if (rc)
			return rc;
		for (j = 0; j < i; j++)
			if (!strcmp(s->g[j].key, s->g[i].key))
				return dt_err_add(err, "--grid %s: given twice; list all its values in one --grid",
						  s->g[i].key), -EINVAL;
		s->n_tasks *= s->g[i].n;
		if (s->n_tasks > MAX_TASKS)
			break;
	}
	if (s->n_tasks > MAX_TASKS)
		return dt_err_add(err, "sweep: more than %d tasks (Slurm's MaxArraySize); fewer values or --seeds",
				  MAX_TASKS), -EINVAL;
	return 0;
}

/* Task k's value of grid i (the last grid varies fastest, seeds faster) */
static const char *task_value(const struct sweep *s, size_t k, size_t i)
{
	size_t j, stride = s->seeds ? (size_t)s->seeds : 1;

	for (j = s->n_grids; j-- > i + 1;)
		stride *= s->g[j].n;
	return s->g[i].v[(k / stride) % s->g[i].n];
}

static long task_seed(const struct sweep *s, size_t k)
{
	return s->seeds ? (long)(k % (size_t)s->seeds) : -1;
}

/* "lr=0.001 embd=64 seed=1": task k's values, for messages (the keys' last parts) */
static void task_label(const struct sweep *s, size_t k, struct dt_buf *b)
{
	size_t i;

	for (i = 0; i < s->n_grids; i++) {
		const char *dot = strrchr(s->g[i].key, '.');

		dt_buf_printf(b, "%s%s=%s", i ? " " : "", dot ? dot + 1 : s->g[i].key, task_value(s, k, i));
	}
	if (s->seeds)
		dt_buf_printf(b, "%sseed=%ld", s->n_grids ? " " : "", task_seed(s, k));
}

/* --- tasks --- */

/* A --set made here: at sets[*m], kept in own[*m] to be freed */
static int add_owned(const char **sets, char **own, size_t *m, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int add_owned(const char **sets, char **own, size_t *m, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&own[*m], fmt, ap);
	va_end(ap);
	if (n < 0) {
		own[*m] = NULL;
		return -ENOMEM;
	}
	sets[*m] = own[*m];
	(*m)++;
	return 0;
}

/* Task k's plan: the command line's --set values, --after's, the grid
 * values, the seeds and its run dir. */
static int plan_task(const struct launch_args *a, struct sweep *s, size_t k, bool check_data,
		     struct launch_plan *out, struct dt_err *err)
{
	size_t n = a->n_sets + s->n_grids + 4, m = 0, i;
	const char **sets = calloc(n, sizeof(*sets));
	char **own = calloc(n, sizeof(*own));
	struct launch_args ta = *a;
	int rc = -ENOMEM;

	if (!sets || !own)
		goto out;
	for (i = 0; i < a->n_sets; i++)
		sets[m++] = a->sets[i];
	if (s->after)
		sets[m++] = s->after;
	rc = 0;
	for (i = 0; !rc && i < s->n_grids; i++)
		rc = add_owned(sets, own, &m, "%s=%s", s->g[i].key, task_value(s, k, i));
	if (!rc && s->dir)
		rc = add_owned(sets, own, &m, "run_dir=%s/task-%zu", s->dir, k);
	if (!rc && s->seeds)
		rc = add_owned(sets, own, &m, "train.seed=%ld", task_seed(s, k));
	if (!rc && s->seeds)
		rc = add_owned(sets, own, &m, "model.init_seed=%ld", task_seed(s, k));
	if (rc)
		goto out;
	ta.cmd = LAUNCH_SUBMIT;
	ta.after = NULL;
	ta.sets = sets;
	ta.n_sets = m;
	ta.no_data_check = a->no_data_check || !check_data;
	rc = launch_plan(&ta, out, err);
out:
	for (i = 0; own && i < n; i++)
		free(own[i]);
	free(own);
	free(sets);
	return rc;
}

static bool gridded(const struct sweep *s, const char *key)
{
	size_t i;

	for (i = 0; i < s->n_grids; i++)
		if (!strcmp(s->g[i].key, key))
			return true;
	return false;
}

/* Does any grid vary what the data check reads (data.*, model.*)? */
static bool grids_touch_data(const struct sweep *s)
{
	size_t i;

	for (i = 0; i < s->n_grids; i++)
		if (!strncmp(s->g[i].key, "data.", 5) || !strncmp(s->g[i].key, "model.", 6))
			return true;
	return false;
}

/* The sweep dir: the run dir the first valid task would get without one
 * of its own (the spec's run_dir, else <runs_root>/<name>-<time>). 1: no
 * task is valid. */
static int pick_dir(const struct launch_args *a, struct sweep *s, struct dt_err *err)
{
	size_t k;

	for (k = 0; k < s->n_tasks; k++) {
		struct launch_plan p = {0};
		struct dt_err why = {0};
		int rc = plan_task(a, s, k, false, &p, &why);

		if (!rc && !(s->dir = strdup(p.spec.run_dir)))
			rc = -ENOMEM;
		launch_plan_free(&p);
		if (rc && rc != -EINVAL && why.count) /* the spec's run_dir exists, ... */
			dt_err_add(err, "%s", why.msg);
		if (rc != -EINVAL)
			return rc;
	}
	return 1;
}

/* Plan every task (in the sweep dir, or without one when none is valid:
 * only for their messages); each one's problems under its values. -EINVAL
 * when any task is invalid (at most 5 named). */
static int plan_tasks(const struct launch_args *a, struct sweep *s, struct dt_err *err)
{
	size_t k, bad = 0;
	bool every = grids_touch_data(s);
	int rc = 0, r;

	s->t = calloc(s->n_tasks, sizeof(*s->t));
	if (!s->t)
		return -ENOMEM;
	for (k = 0; k < s->n_tasks; k++) {
		struct dt_err terr = {0};
		struct dt_buf label = {0};
		char *line, *save = NULL;

		r = plan_task(a, s, k, every || k == 0, &s->t[k], &terr);
		if (r == -ENOMEM) {
			rc = r;
			break;
		}
		if (r && ++bad <= 5) {
			task_label(s, k, &label);
			for (line = strtok_r(terr.msg, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
				dt_err_add(err, "sweep: task %zu (%s): %s", k, dt_buf_str(&label), line);
		}
		if (r && !rc)
			rc = r;
		dt_buf_free(&label);
	}
	if (!rc && s->t[0].spec.checkpoint.dir && !gridded(s, "checkpoint.dir")) {
		dt_err_add(err, "sweep: checkpoint.dir: every task would save to and resume from %s; leave it unset (each task: checkpoints/ in its run dir) or --grid it",
			   s->t[0].spec.checkpoint.dir);
		return -EINVAL;
	}
	if (bad > 5)
		dt_err_add(err, "sweep: %zu more tasks are invalid", bad - 5);
	if (bad)
		dt_err_add(err, "sweep: %zu of %zu tasks invalid: nothing was created or submitted", bad,
			   s->n_tasks);
	return rc;
}

/* --- the array's script --- */

/* The #SBATCH lines of a task's script but those of its run dir (--chdir,
 * --output), which the array's script says for all */
static int shared_header(const char *script, struct dt_buf *out)
{
	const char *l;
	int rc = 0;

	for (l = script; *l && !rc; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] == '\n')) {
		int n = (int)strcspn(l, "\n");

		if (strncmp(l, "#SBATCH ", 8) || !strncmp(l, "#SBATCH --chdir=", 16) ||
		    !strncmp(l, "#SBATCH --output=", 17))
			continue;
		rc = dt_buf_printf(out, "%.*s\n", n, l);
	}
	return rc;
}

/* The first line where two headers differ, into buf */
static const char *first_difference(const char *a, const char *b, char *buf, size_t size)
{
	while (*a && !strncmp(a, b, strcspn(a, "\n") + 1)) {
		b += strcspn(a, "\n") + 1;
		a += strcspn(a, "\n") + 1;
	}
	snprintf(buf, size, "\"%.*s\" against \"%.*s\"", (int)strcspn(b, "\n"), b, (int)strcspn(a, "\n"), a);
	return buf;
}

/* The array's job.sh: the tasks' shared #SBATCH lines (each task's must
 * be task 0's), the array, then task $SLURM_ARRAY_TASK_ID's own job.sh */
static int render_array(struct sweep *s, long max_parallel, struct dt_err *err)
{
	struct dt_buf first = {0}, other = {0}, label = {0};
	char name[96], diff[400];
	size_t k;
	int rc = shared_header(dt_buf_str(&s->t[0].script), &first);

	for (k = 1; !rc && k < s->n_tasks; k++) {
		dt_buf_free(&other);
		rc = shared_header(dt_buf_str(&s->t[k].script), &other);
		if (!rc && strcmp(dt_buf_str(&first), dt_buf_str(&other))) {
			task_label(s, k, &label);
			dt_err_add(err, "sweep: task %zu (%s): its #SBATCH lines differ from task 0's (%s); the tasks of a sweep are one job array",
				   k, dt_buf_str(&label),
				   first_difference(dt_buf_str(&first), dt_buf_str(&other), diff, sizeof(diff)));
			rc = -EINVAL;
		}
	}
	launch__printable(s->t[0].spec.name, name, sizeof(name));
	if (!rc)
		rc = dt_buf_printf(&s->script,
				   "#!/bin/bash\n%s#SBATCH --chdir=%s\n#SBATCH --output=%s/task-%%a/slurm-%%j.out\n#SBATCH --array=0-%zu",
				   dt_buf_str(&first), s->dir, s->dir, s->n_tasks - 1);
	if (!rc && max_parallel > 0)
		rc = dt_buf_printf(&s->script, "%%%ld", max_parallel);
	if (!rc)
		rc = dt_buf_printf(&s->script,
				   "\n#\n# Generated by dtrain-submit for sweep \"%s\" (%zu tasks): task k runs\n"
				   "# task-k/job.sh, the batch script a submit of its spec would have, in\n"
				   "# its run dir task-k. Do not edit: change the spec and sweep again.\n"
				   "set -u\n"
				   "case \"${SLURM_ARRAY_TASK_ID:-}\" in\n"
				   "'' | *[!0-9]*)\n"
				   "\techo \"dtrain: this script runs as a task of its job array (SLURM_ARRAY_TASK_ID is '${SLURM_ARRAY_TASK_ID:-}')\" >&2\n"
				   "\texit 1 ;;\n"
				   "esac\n"
				   "cd ",
				   name, s->n_tasks);
	if (!rc)
		rc = dt_shell_quote(&s->script, s->dir);
	if (!rc)
		rc = dt_buf_puts(&s->script,
				 "/task-\"$SLURM_ARRAY_TASK_ID\" || exit 1\nexec /bin/bash ./job.sh\n");
	if (!rc)
		rc = launch_check_syntax(dt_buf_str(&s->script), err);
	dt_buf_free(&first);
	dt_buf_free(&other);
	dt_buf_free(&label);
	return rc;
}

/* sweep.json: the keys, and each task's values and seed */
static int render_manifest(struct sweep *s, long max_parallel)
{
	json_object *o = json_object_new_object(), *keys = json_object_new_array(),
		    *tasks = json_object_new_array();
	size_t i, k;
	int rc = -ENOMEM;

	if (!o || !keys || !tasks)
		goto out;
	for (i = 0; i < s->n_grids; i++)
		json_object_array_add(keys, json_object_new_string(s->g[i].key));
	for (k = 0; k < s->n_tasks; k++) {
		json_object *t = json_object_new_object(), *v = json_object_new_array();

		for (i = 0; t && v && i < s->n_grids; i++)
			json_object_array_add(v, json_object_new_string(task_value(s, k, i)));
		json_object_object_add(t, "task", json_object_new_int64((int64_t)k));
		json_object_object_add(t, "values", v);
		json_object_object_add(t, "seed", s->seeds ? json_object_new_int64(task_seed(s, k)) : NULL);
		json_object_array_add(tasks, t);
	}
	json_object_object_add(o, "name", json_object_new_string(s->t[0].spec.name));
	json_object_object_add(o, "keys", keys);
	json_object_object_add(o, "seeds", json_object_new_int64(s->seeds));
	json_object_object_add(o, "max_parallel", json_object_new_int64(max_parallel));
	json_object_object_add(o, "tasks", tasks);
	keys = tasks = NULL;
	rc = dt_buf_printf(&s->manifest, "%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
out:
	json_object_put(keys);
	json_object_put(tasks);
	json_object_put(o);
	return rc;
}

/* --- the sweep dir --- */

static int write_in(const char *dir, const char *name, const struct dt_buf *b, int mode)
{
	struct dt_buf path = {0};
	int rc = dt_buf_printf(&path, "%s/%s", dir, name);

	if (!rc)
		rc = launch__write_new(path.p, dt_buf_str(b), b->len, mode);
	dt_buf_free(&path);
	return rc;
}

/* Every file of the sweep in dir (a new, empty directory) */
static int fill_dir(const struct sweep *s, const char *dir, struct dt_err *err)
{
	struct dt_buf task = {0};
	size_t k;
	int rc = write_in(dir, "job.sh", &s->script, 0755);

	if (!rc)
		rc = write_in(dir, "sweep.json", &s->manifest, 0644);
	for (k = 0; !rc && k < s->n_tasks; k++) {
		dt_buf_free(&task);
		rc = dt_buf_printf(&task, "%s/task-%zu", dir, k);
		if (!rc)
			rc = mkdir(task.p, 0755) < 0 ? -errno : 0;
		if (!rc)
			rc = write_in(task.p, "spec.json", &s->t[k].spec_json, 0644);
		if (!rc)
			rc = write_in(task.p, "job.sh", &s->t[k].script, 0755);
		if (!rc)
			rc = dt_fsync_path(task.p, true);
	}
	dt_buf_free(&task);
	if (!rc)
		rc = dt_fsync_path(dir, true);
	if (rc)
		dt_err_add(err, "%s: cannot write the sweep's files: %s", dir, strerror(-rc));
	return rc;
}

/* from renamed to to, which must not exist (file systems without
 * RENAME_NOREPLACE: checked, then renamed; a rename replaces only an empty
 * directory) */
static int rename_new(const char *from, const char *to)
{
	struct stat st;

	if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	if (lstat(to, &st) == 0)
		return -EEXIST;
	return rename(from, to) < 0 ? -errno : 0;
}

/* The sweep dir, whole: built as a sibling temp dir, renamed into place
 * (*created: it is ours, from then on) */
static int create_dir(const struct sweep *s, bool *created, struct dt_err *err)
{
	const char *slash = strrchr(s->dir, '/');
	char *parent = strndup(s->dir, slash > s->dir ? (size_t)(slash - s->dir) : 1);
	struct dt_buf tmp = {0};
	int rc = parent ? dt_mkdirs(parent, 0755) : -ENOMEM;

	if (rc) {
		dt_err_add(err, "%s: cannot create the directory: %s", parent ? parent : s->dir, strerror(-rc));
		goto out;
	}
	rc = dt_buf_printf(&tmp, "%s/.%s.tmp-%ld", parent, slash + 1, (long)getpid());
	if (!rc && (dt_remove_tree(tmp.p), mkdir(tmp.p, 0755) < 0)) {
		rc = -errno;
		dt_err_add(err, "%s: cannot create: %s", tmp.p, strerror(-rc));
	}
	if (rc)
		goto out;
	rc = fill_dir(s, tmp.p, err);
	if (!rc)
		rc = rename_new(tmp.p, s->dir);
	if (rc == -EEXIST || rc == -ENOTEMPTY)
		dt_err_add(err, "%s: another submit took it just now; sweep again", s->dir);
	else if (rc && !err->count)
		dt_err_add(err, "%s: cannot rename into place: %s", s->dir, strerror(-rc));
	if (rc)
		dt_remove_tree(tmp.p);
	else
		*created = true;
	if (!rc)
		rc = dt_fsync_path(parent, true);
out:
	dt_buf_free(&tmp);
	free(parent);
	/* an I/O failure is no invalid spec (exit 3) */
	return rc == -EINVAL ? -EIO : rc;
}

/* --- the command --- */

/* Every task planned, the array's script and sweep.json rendered; nothing
 * created. */
static int sweep_plan(const struct launch_args *a, struct sweep *s, struct dt_err *err)
{
	int rc = parse_grids(a, s, err);

	if (!rc && a->after)
		rc = launch__after_set(a->after, &s->after, err);
	if (!rc)
		rc = pick_dir(a, s, err);
	if (rc == 1) /* no task is valid: name them all the same */
		rc = 0;
	if (!rc)
		rc = plan_tasks(a, s, err);
	if (!rc)
		rc = render_array(s, a->max_parallel, err);
	if (!rc)
		rc = render_manifest(s, a->max_parallel);
	if (rc == -ENOMEM)
		dt_err_add(err, "sweep: out of memory");
	return rc;
}

static void print_tasks(const struct sweep *s)
{
	size_t k;

	for (k = 0; k < s->n_tasks; k++) {
		struct dt_buf label = {0};

		task_label(s, k, &label);
		fprintf(stderr, "  task %zu: %s\n", k, dt_buf_str(&label));
		dt_buf_free(&label);
	}
}

/* Each task's job_id, "<array id>_<k>" (resume RUN_DIR reads it) */
static void record_tasks(const struct sweep *s, const char *id, struct dt_err *warn)
{
	struct dt_buf path = {0}, line = {0};
	size_t k;
	int rc = 0;

	for (k = 0; !rc && k < s->n_tasks; k++) {
		dt_buf_free(&path);
		dt_buf_free(&line);
		rc = dt_buf_printf(&path, "%s/task-%zu/job_id", s->dir, k);
		if (!rc)
			rc = dt_buf_printf(&line, "%s_%zu\n", id, k);
		if (!rc)
			rc = dt_write_file_atomic(path.p, line.p, line.len, 0644);
		if (rc)
			dt_err_add(warn, "%s: cannot write: %s", path.p ? path.p : s->dir, strerror(-rc));
	}
	dt_buf_free(&path);
	dt_buf_free(&line);
}

/* Create the sweep dir, sbatch the array (a refused one leaves nothing),
 * record it. */
static int sweep_submit(struct sweep *s, struct launch_job *job, struct dt_err *warn,
			struct dt_err *err)
{
	struct launch_plan rec = {0};
	char *sbatch = launch__which("sbatch");
	bool created = false;
	int rc = 0;

	if (!sbatch) {
		dt_err_add(err, "sbatch: not found on PATH; hint: install the Slurm client tools or fix PATH");
		return -ENOENT;
	}
	free(sbatch);
	/* the sweep's job as one plan: task 0's site and name, the sweep dir
	 * (borrowed, not freed) */
	rec.site = s->t[0].site;
	rec.now = s->t[0].now;
	rec.spec.name = s->t[0].spec.name;
	rec.spec.run_dir = s->dir;
	rc = create_dir(s, &created, err);
	if (!rc)
		rc = launch__sbatch_record(&rec, job, warn, err);
	if (rc && rc != -EPROTO && created) /* refused: leave nothing behind */
		dt_remove_tree(s->dir);
	if (rc)
		return rc;
	record_tasks(s, job->id, warn);
	return 0;
}

int launch_cmd_sweep(const struct launch_args *a, struct dt_err *err)
{
	struct sweep s = {0};
	struct dt_err warn = {0};
	struct launch_job job = {0};
	int rc = sweep_plan(a, &s, err);

	if (rc)
		goto out;
	if (a->dry_run) {
		fputs(dt_buf_str(&s.script), stdout);
		fprintf(stderr, "dtrain-submit: dry run: nothing written, nothing submitted; %zu tasks, the sweep dir would be %s\n",
			s.n_tasks, s.dir);
		print_tasks(&s);
		goto out;
	}
	rc = sweep_submit(&s, &job, &warn, err);
	if (rc)
		goto out;
	launch__print_warnings(&warn);
	printf("%s\n", job.id);
	fflush(stdout);
	fprintf(stderr, "dtrain-submit: submitted sweep %s (%s): %zu tasks", job.id, job.name, s.n_tasks);
	if (a->max_parallel > 0)
		fprintf(stderr, ", at most %ld at once", a->max_parallel);
	fprintf(stderr, "\n  sweep dir: %s (task-<k>: each task's run dir)\n", s.dir);
	print_tasks(&s);
	fprintf(stderr, "  status:    dtrain-submit status %s\n"
			"  logs:      dtrain-submit logs -f %s_<k>\n"
			"  cancel:    dtrain-submit cancel %s\n",
		job.id, job.id, job.id);
out:
	launch_job_free(&job);
	sweep_free(&s);
	return rc;
}
