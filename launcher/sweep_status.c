/*
 * sweep_status.c - `dtrain-submit status SWEEP`: a row per task of a sweep
 * (sweep.c made it): its values, its state, its last step and loss, and
 * its best evaluation (the lowest test loss in its metrics.jsonl) and
 * when; rows sorted by that best, tasks without an evaluation last.
 */
#include "launcher/launch.h"
#include "launcher/internal.h"
#include "base/io.h"
#include "base/json.h"

#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_COLS 24 /* task, state, up to 16 keys, seed, step, loss, best, when */

struct task_row {
	long k;
	struct launch_best best;
	char *col[MAX_COLS];
};

/* sweep.json of a sweep dir; NULL when it cannot be read (a line in err) */
static json_object *load_manifest(const char *dir, struct dt_err *err)
{
	char path[4200], *text = NULL;
	json_object *o = NULL;
	struct dt_json_error je;
	size_t len = 0;

	snprintf(path, sizeof(path), "%s/sweep.json", dir);
	if (dt_read_file(path, &text, &len) != 0 || dt_json_parse_object(text, len, 16, &o, &je) != 0)
		dt_err_add(err, "%s: cannot read the sweep's manifest", path);
	free(text);
	return o;
}

static json_object *member(json_object *o, const char *key)
{
	json_object *v = NULL;

	return json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));

static char *fmt(const char *f, ...)
{
	char *s = NULL;
	va_list ap;

	va_start(ap, f);
	if (vasprintf(&s, f, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

/* The best evaluation as shown: "4.0790 (5.8848 bits/byte)" and "step 60, 14:02:11" */
static void best_cols(const struct launch_best *b, char **best, char **when)
{
	char hm[16] = "";
	time_t t = (time_t)b->unix_time;
	struct tm tm;

	if (!b->has) {
		*best = fmt("-");
		*when = fmt("-");
		return;
	}
	*best = isnan(b->bits_per_byte) ? fmt("%.4f", b->test_loss) :
					  fmt("%.4f (%.4f bits/byte)", b->test_loss, b->bits_per_byte);
	if (!isnan(b->unix_time) && localtime_r(&t, &tm))
		strftime(hm, sizeof(hm), ", %H:%M:%S", &tm);
	*when = fmt("step %lld%s", b->step, hm);
}

/* Task k's row: the columns after its values (state, step, loss, best, when) */
static int task_row(const struct launch_job *sweep, json_object *task, long k, size_t n_keys,
		    bool seeds, struct launch_slurm *sl, struct task_row *r, struct dt_err *warn)
{
	struct launch_job job;
	struct launch_state st;
	struct launch_progress p;
	struct launch_progress_text pt;
	json_object *vals = task ? member(task, "values") : NULL, *seed = task ? member(task, "seed") : NULL;
	char state[80], path[4200];
	struct dt_buf shown = {0};
	size_t i, c = 0;
	int rc;

	r->k = k;
	rc = launch_sweep_task(sweep, k, &job);
	if (rc == -ENOENT) { /* its run dir is gone */
		r->col[0] = fmt("%s_%ld", sweep->id, k);
		r->col[1] = fmt("no run dir task-%ld", k);
		return 0;
	}
	if (rc)
		return rc;
	launch_job_state(sl, job.id, &st);
	snprintf(path, sizeof(path), "%s/metrics.jsonl", job.run_dir);
	launch_progress_read(path, &p, warn);
	launch_progress_format(&p, !strcmp(st.name, "RUNNING"), &pt);
	launch_progress_best(path, &r->best, warn);
	r->col[c++] = fmt("%s", job.id);
	r->col[c++] = fmt("%s", launch_state_text(&st, state, sizeof(state)));
	for (i = 0; i < n_keys; i++) {
		json_object *v = json_object_is_type(vals, json_type_array) ? json_object_array_get_idx(vals, i) : NULL;

		r->col[c++] = fmt("%s", v ? launch__shown(json_object_get_string(v), &shown) : "?");
	}
	if (seeds)
		r->col[c++] = fmt("%s", seed ? launch__shown(json_object_get_string(seed), &shown) : "?");
	dt_buf_free(&shown);
	r->col[c++] = fmt("%s", pt.step);
	r->col[c++] = fmt("%s", pt.loss);
	best_cols(&r->best, &r->col[c], &r->col[c + 1]);
	launch_job_free(&job);
	return 0;
}

/* best first; no evaluation last; then task order */
static int by_best(const void *pa, const void *pb)
{
	const struct task_row *a = pa, *b = pb;

	if (a->best.has != b->best.has)
		return a->best.has ? -1 : 1;
	if (a->best.has && a->best.test_loss != b->best.test_loss)
		return a->best.test_loss < b->best.test_loss ? -1 : 1;
	return a->k < b->k ? -1 : a->k > b->k;
}

static void print_table(char *const *title, const struct task_row *rows, size_t n, size_t cols)
{
	int width[MAX_COLS] = {0};
	size_t i, c;

	for (c = 0; c < cols; c++) {
		width[c] = (int)strlen(title[c]);
		for (i = 0; i < n; i++)
			if (rows[i].col[c] && (int)strlen(rows[i].col[c]) > width[c])
				width[c] = (int)strlen(rows[i].col[c]);
	}
	for (i = 0; i <= n; i++)
		for (c = 0; c < cols; c++) {
			const char *v = i == 0 ? title[c] : rows[i - 1].col[c];

			if (c + 1 < cols)
				printf("%-*s  ", width[c], v ? v : "?");
			else
				printf("%s\n", v ? v : "?");
		}
}

/* The titles: TASK, STATE, each key's last part, SEED, STEP, LOSS, BEST VAL LOSS, AT */
static size_t titles(json_object *keys, bool seeds, char **title)
{
	size_t c = 0, i, n = (size_t)json_object_array_length(keys);
	struct dt_buf shown = {0};

	title[c++] = fmt("TASK");
	title[c++] = fmt("STATE");
	for (i = 0; i < n; i++) {
		json_object *k = json_object_array_get_idx(keys, i);
		const char *key = k && json_object_is_type(k, json_type_string) ? json_object_get_string(k) : "?";
		const char *dot = strrchr(key, '.');

		title[c++] = fmt("%s", launch__shown(dot ? dot + 1 : key, &shown));
	}
	if (seeds)
		title[c++] = fmt("SEED");
	title[c++] = fmt("STEP");
	title[c++] = fmt("LOSS");
	title[c++] = fmt("BEST VAL LOSS");
	title[c++] = fmt("AT");
	dt_buf_free(&shown);
	return c;
}

int launch__sweep_status(const struct launch_job *sweep, struct dt_err *err)
{
	json_object *m = load_manifest(sweep->run_dir, err), *keys, *tasks;
	struct launch_slurm sl = {0};
	struct dt_err warn = {0};
	struct task_row *rows = NULL;
	char *title[MAX_COLS] = {0};
	struct dt_buf shown = {0};
	size_t n = 0, cols = 0, i, c;
	bool seeds;
	int rc = 0;

	if (!m)
		return -EIO;
	keys = member(m, "keys");
	tasks = member(m, "tasks");
	if (!json_object_is_type(keys, json_type_array) || !json_object_is_type(tasks, json_type_array) ||
	    json_object_array_length(keys) > MAX_COLS - 8) {
		rc = dt_err_add(err, "%s/sweep.json: not a sweep's manifest (keys, tasks)", sweep->run_dir);
		rc = -EIO;
		goto out;
	}
	n = json_object_array_length(tasks);
	rows = calloc(n ? n : 1, sizeof(*rows));
	if (!rows) {
		rc = -ENOMEM;
		goto out;
	}
	seeds = json_object_get_int64(member(m, "seeds")) > 0;
	cols = titles(keys, seeds, title);
	for (i = 0; i < n && !rc; i++)
		rc = task_row(sweep, json_object_array_get_idx(tasks, i), (long)i,
			      (size_t)json_object_array_length(keys), seeds, &sl, &rows[i], &warn);
	if (rc)
		goto out;
	qsort(rows, n, sizeof(*rows), by_best);
	printf("sweep %s (%s): %zu tasks", sweep->id, sweep->name ? launch__shown(sweep->name, &shown) : "-", n);
	if (json_object_get_int64(member(m, "max_parallel")) > 0)
		printf(", at most %lld at once", (long long)json_object_get_int64(member(m, "max_parallel")));
	printf("; sweep dir %s\n", launch__shown(sweep->run_dir, &shown));
	print_table(title, rows, n, cols);
	if (sl.unreachable)
		fprintf(stderr, "dtrain-submit: warning: Slurm did not answer (%s); states are unknown\n", sl.why);
	launch__print_warnings(&warn);
out:
	if (rc == -ENOMEM)
		dt_err_add(err, "status: out of memory");
	for (i = 0; rows && i < n; i++)
		for (c = 0; c < MAX_COLS; c++)
			free(rows[i].col[c]);
	for (c = 0; c < MAX_COLS; c++)
		free(title[c]);
	free(rows);
	dt_buf_free(&shown);
	json_object_put(m);
	return rc;
}
