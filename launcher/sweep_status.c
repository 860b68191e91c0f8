/*
 * sweep_status.c - `dtrain-submit status SWEEP`: a row per task of a sweep
 * (sweep.c made it): its values, its state, its last step and loss, and
 * its best evaluation (the lowest test loss in its metrics.jsonl) and
 * when; rows sorted by that best, tasks without an evaluation last. A
 * task is labelled <sweep>_<k>, with the job it last ran as when a resume
 * gave it another id. The table is read into a struct, which the sweep's
 * report draws too; all jobs' status says a sweep's tasks' states.
 *
 * Sections: the table, status SWEEP, a sweep's row in all jobs' status.
 */
#include "launcher/cli.h"
#include "launcher/internal.h"
#include "base/io.h"
#include "base/str.h"
#include "base/json.h"

#include <ctype.h>
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_COLS LAUNCH__SWEEP_COLS /* task, state, up to 16 keys, seed, step, loss, best, when */

/* A row while the table is made: its best evaluation orders it */
struct task_row {
	struct launch_best best;
	struct launch__sweep_row row;
};

/* --- the table --- */

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

/* Task k's label: <sweep>_<k>, and the job it ran as last when that is
 * another (a resume's own id) */
static char *task_label(const struct launch_job *sweep, long k, const char *id)
{
	char label[64];

	snprintf(label, sizeof(label), "%s_%ld", sweep->id, k);
	return strcmp(label, id) ? fmt("%s (job %s)", label, id) : fmt("%s", label);
}

/* The columns of task k's values (and seed) from the manifest's task */
static size_t value_cols(json_object *task, size_t n_keys, bool seeds, char **col)
{
	json_object *vals = task ? member(task, "values") : NULL, *seed = task ? member(task, "seed") : NULL;
	struct dt_buf shown = {0};
	size_t i, c = 0;

	for (i = 0; i < n_keys; i++) {
		json_object *v = json_object_is_type(vals, json_type_array) ? json_object_array_get_idx(vals, i) : NULL;

		col[c++] = fmt("%s", v ? dt_shown(json_object_get_string(v), &shown) : "?");
	}
	if (seeds)
		col[c++] = fmt("%s", seed ? dt_shown(json_object_get_string(seed), &shown) : "?");
	dt_buf_free(&shown);
	return c;
}

/* Task k's row: its label, state, values, step, loss, best, when */
static int task_row(const struct launch_job *sweep, json_object *task, long k, size_t n_keys,
		    bool seeds, struct launch_slurm *sl, struct task_row *r, struct dt_err *warn)
{
	struct launch_job job;
	struct launch_state st;
	struct launch_progress p;
	struct launch_progress_text pt;
	char state[80], path[4200], **col = r->row.col;
	size_t c = 0;
	int rc;

	r->row.k = k;
	rc = launch_sweep_task(sweep, k, &job);
	if (rc == -ENOENT) { /* its run dir is gone */
		col[0] = fmt("%s_%ld", sweep->id, k);
		col[1] = fmt("no run dir task-%ld", k);
		return 0;
	}
	if (rc)
		return rc;
	launch_job_state(sl, job.id, &st);
	snprintf(path, sizeof(path), "%s/metrics.jsonl", job.run_dir);
	launch_progress_read(path, &p, warn);
	launch_progress_format(&p, !strcmp(st.name, "RUNNING"), &pt);
	launch_progress_best(path, &r->best, warn);
	col[c++] = task_label(sweep, k, job.id);
	col[c++] = fmt("%s", launch_state_text(&st, state, sizeof(state)));
	c += value_cols(task, n_keys, seeds, col + c);
	col[c++] = fmt("%s", pt.step);
	col[c++] = fmt("%s", pt.loss);
	best_cols(&r->best, &col[c], &col[c + 1]);
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
	return a->row.k < b->row.k ? -1 : a->row.k > b->row.k;
}

static void print_table(const struct launch__sweep_table *t)
{
	int width[MAX_COLS] = {0};
	size_t i, c;

	for (c = 0; c < t->cols; c++) {
		width[c] = (int)strlen(t->title[c]);
		for (i = 0; i < t->n; i++)
			if (t->rows[i].col[c] && (int)strlen(t->rows[i].col[c]) > width[c])
				width[c] = (int)strlen(t->rows[i].col[c]);
	}
	for (i = 0; i <= t->n; i++)
		for (c = 0; c < t->cols; c++) {
			const char *v = i == 0 ? t->title[c] : t->rows[i - 1].col[c];

			if (c + 1 < t->cols)
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

		title[c++] = fmt("%s", dt_shown(dot ? dot + 1 : key, &shown));
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

/* The manifest's keys and tasks, refused when they are not a sweep's */
static int manifest_parts(const struct launch_job *sweep, json_object *m, json_object **keys,
			  json_object **tasks, struct dt_err *err)
{
	*keys = member(m, "keys");
	*tasks = member(m, "tasks");
	if (!json_object_is_type(*keys, json_type_array) || !json_object_is_type(*tasks, json_type_array) ||
	    json_object_array_length(*keys) > MAX_COLS - 8)
		return dt_err_add(err, "%s/sweep.json: not a sweep's manifest (keys, tasks)", sweep->run_dir), -EIO;
	return 0;
}

/* The rows of every task, best first, into t */
static int table_rows(const struct launch_job *sweep, json_object *keys, json_object *tasks,
		      bool seeds, struct launch__sweep_table *t, struct dt_err *warn)
{
	struct launch_slurm sl = {0};
	struct task_row *rows;
	size_t n = json_object_array_length(tasks), i;
	int rc = 0;

	rows = calloc(n ? n : 1, sizeof(*rows));
	t->rows = calloc(n ? n : 1, sizeof(*t->rows));
	if (!rows || !t->rows) {
		free(rows);
		return -ENOMEM;
	}
	for (i = 0; i < n && !rc; i++)
		rc = task_row(sweep, json_object_array_get_idx(tasks, i), (long)i,
			      (size_t)json_object_array_length(keys), seeds, &sl, &rows[i], warn);
	qsort(rows, n, sizeof(*rows), by_best);
	for (i = 0; i < n; i++)
		t->rows[i] = rows[i].row;
	t->n = n;
	t->unreachable = sl.unreachable;
	snprintf(t->why, sizeof(t->why), "%s", sl.why);
	free(rows);
	return rc;
}

int launch__sweep_table(const struct launch_job *sweep, struct launch__sweep_table *t,
			struct dt_err *warn, struct dt_err *err)
{
	json_object *m = load_manifest(sweep->run_dir, err), *keys, *tasks;
	bool seeds;
	int rc;

	*t = (struct launch__sweep_table){0};
	if (!m)
		return -EIO;
	rc = manifest_parts(sweep, m, &keys, &tasks, err);
	if (!rc) {
		seeds = json_object_get_int64(member(m, "seeds")) > 0;
		t->max_parallel = (long)json_object_get_int64(member(m, "max_parallel"));
		t->cols = titles(keys, seeds, t->title);
		rc = table_rows(sweep, keys, tasks, seeds, t, warn);
	}
	if (rc == -ENOMEM)
		dt_err_add(err, "%s: out of memory", sweep->run_dir);
	json_object_put(m);
	return rc;
}

void launch__sweep_table_free(struct launch__sweep_table *t)
{
	size_t i, c;

	for (i = 0; t->rows && i < t->n; i++)
		for (c = 0; c < MAX_COLS; c++)
			free(t->rows[i].col[c]);
	for (c = 0; c < MAX_COLS; c++)
		free(t->title[c]);
	free(t->rows);
	*t = (struct launch__sweep_table){0};
}

/* --- status SWEEP --- */

int launch__sweep_status(const struct launch_job *sweep, struct dt_err *err)
{
	struct launch__sweep_table t;
	struct dt_err warn = {0};
	struct dt_buf shown = {0};
	int rc = launch__sweep_table(sweep, &t, &warn, err);

	if (rc)
		goto out;
	printf("sweep %s (%s): %zu tasks", sweep->id, sweep->name ? dt_shown(sweep->name, &shown) : "-", t.n);
	if (t.max_parallel > 0)
		printf(", at most %ld at once", t.max_parallel);
	printf("; sweep dir %s\n", dt_shown(sweep->run_dir, &shown));
	print_table(&t);
	if (t.unreachable)
		fprintf(stderr, "dtrain-submit: warning: Slurm did not answer (%s); states are unknown\n", t.why);
	launch__print_warnings(&warn);
out:
	launch__sweep_table_free(&t);
	dt_buf_free(&shown);
	return rc;
}

/* --- a sweep's row in all jobs' status --- */

/* A state as the row says it: lower case, "done" for COMPLETED */
static void state_word(const char *state, char *buf, size_t size)
{
	size_t i;

	if (!strcmp(state, "COMPLETED"))
		state = "done";
	for (i = 0; state[i] && i + 1 < size; i++)
		buf[i] = (char)tolower((unsigned char)state[i]);
	buf[i] = '\0';
}

const char *launch__sweep_states(const struct launch_job *sweep, struct launch_slurm *sl, char *buf,
				 size_t size)
{
	enum { MAX_STATES = 8 };
	char word[MAX_STATES][32];
	long count[MAX_STATES] = {0}, k;
	struct launch_job task;
	size_t n = 0, i, at = 0;

	buf[0] = '\0';
	for (k = 0; launch_sweep_task(sweep, k, &task) == 0; k++) {
		struct launch_state st;
		char w[32];

		launch_job_state(sl, task.id, &st);
		state_word(st.name, w, sizeof(w));
		for (i = 0; i < n && strcmp(word[i], w); i++)
			;
		if (i == n && n < MAX_STATES)
			snprintf(word[n++], sizeof(word[0]), "%s", w);
		if (i < n)
			count[i]++;
		launch_job_free(&task);
	}
	for (i = 0; i < n && at < size; i++)
		at += (size_t)snprintf(buf + at, size - at, "%s%ld %s", i ? ", " : "", count[i], word[i]);
	if (!n)
		snprintf(buf, size, "no tasks");
	return buf;
}
