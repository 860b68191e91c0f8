/*
 * report_cmd.c - `dtrain-submit report JOB|RUN_DIR [-o FILE] [--spec FILE]`:
 * find the run, read it (report.c), render its page (report_html.c) and
 * write it atomically: a new file renamed over the old one, so that a
 * browser or a second report never sees half a page and a link planted at
 * the name is replaced, never written through (dt_write_file_atomic).
 *
 * A sweep's page (report_sweep.c) has its table and every task's curves.
 *
 * Sections: the run dir, the command.
 */
#include "launcher/cli.h"

#include "base/io.h"
#include "base/path.h"
#include "launcher/internal.h"
#include "launcher/report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* --- the run dir --- */

/* A directory named by the argument (a path with a '/', or one that exists
 * here) is a run dir; anything else is a JOB as status takes it. */
static bool names_dir(const char *arg)
{
	struct stat st;

	return strchr(arg, '/') || (stat(arg, &st) == 0 && S_ISDIR(st.st_mode));
}

/* The run dir of arg into *dir (caller frees) and, for a job, Slurm's
 * state of it into state ("" for a run dir); a sweep into *sweep (dir and
 * state left as they are). */
static int find_run(const char *arg, char **dir, char *state, size_t size, struct launch_job *sweep,
		    struct dt_err *err)
{
	struct launch_job job = {0};
	struct launch_slurm sl = {0};
	struct launch_state st;
	int rc = 0;

	state[0] = '\0';
	if (names_dir(arg)) {
		*dir = dt_abspath(arg);
		return *dir ? 0 : (dt_err_add(err, "%s: out of memory", arg), -ENOMEM);
	}
	rc = launch_resolve_job(arg, &job, err);
	if (rc)
		goto out;
	if (!job.run_dir) {
		rc = -ENOENT;
		dt_err_add(err, "job %s: its run dir is unknown (not in the registry, not in Slurm); hint: give the run dir",
			   job.id);
	} else if (launch_is_sweep(job.run_dir)) {
		*sweep = job;
		return 0;
	} else if (!(*dir = strdup(job.run_dir))) {
		rc = -ENOMEM;
		dt_err_add(err, "job %s: out of memory", job.id);
	} else {
		launch_job_state(&sl, job.id, &st);
		launch_state_text(&st, state, size);
	}
out:
	launch_job_free(&job);
	return rc;
}

/* --- the command --- */

/* The page of the run in dir, or of the sweep, into page */
static int render(const char *dir, const struct launch_job *sweep, const struct launch_args *a,
		  const char *state, struct dt_buf *page, struct dt_err *err)
{
	struct launch__report r = {0};
	struct dt_err warn = {0};
	int rc;

	if (sweep->id) {
		rc = launch__report_sweep(sweep, page, &warn, err);
		launch__print_warnings(&warn);
		return rc;
	}
	rc = launch__report_read(dir, a->spec_path, &r, err);
	if (!rc && launch__report_html(&r, *state ? state : NULL, page))
		rc = -ENOMEM, dt_err_add(err, "%s: out of memory for the report", dir);
	if (!rc)
		fprintf(stderr, "dtrain-submit: report of %s: %zu step events, %d start%s\n", r.name, r.n_steps,
			r.starts, r.starts == 1 ? "" : "s");
	launch__report_free(&r);
	return rc;
}

int launch_cmd_report(const struct launch_args *a, struct dt_err *err)
{
	struct launch_job sweep = {0};
	struct dt_buf page = {0}, path = {0};
	char *dir = NULL, state[80];
	int rc;

	rc = find_run(a->job, &dir, state, sizeof(state), &sweep, err);
	if (!rc)
		rc = render(dir, &sweep, a, state, &page, err);
	if (rc)
		goto out;
	if (sweep.id && !(dir = strdup(sweep.run_dir)))
		rc = -ENOMEM;
	else
		rc = a->output ? dt_buf_puts(&path, a->output) : dt_buf_printf(&path, "%s/report.html", dir);
	if (rc) {
		rc = -ENOMEM;
		dt_err_add(err, "%s: out of memory for the report", a->job);
		goto out;
	}
	rc = dt_write_file_atomic(path.p, page.p, page.len, 0644);
	if (rc) {
		dt_err_add(err, "%s: cannot write: %s", path.p, strerror(-rc));
		goto out;
	}
	printf("%s\n", path.p);
out:
	launch_job_free(&sweep);
	dt_buf_free(&page);
	dt_buf_free(&path);
	free(dir);
	return rc;
}
