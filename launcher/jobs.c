/*
 * jobs.c - `dtrain-submit status` and `logs`: what happens to a job after
 * the submit (cancel.c stops one). A JOB argument is resolved by launch_resolve_job()
 * (registry.c); Slurm is asked through its client programs (slurm.c).
 *
 * status prints one row per job through a table of columns, so that
 * progress columns (step, loss from metrics.jsonl) are one entry each.
 * The progress is read and formatted by progress.c; status of one job
 * shows the same strings as labelled lines.
 *
 * Sections: progress, status table, status of one job, logs.
 */
#include "launcher/cli.h"

#include "base/heartbeat.h"
#include "launcher/internal.h"
#include "launcher/report.h"
#include "base/clock.h"
#include "base/io.h"
#include "base/str.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STATUS_ROWS 20        /* status without JOB: the most recent jobs */
#define LOGS_POLL_NS 500000000L
#define LOGS_STATE_EVERY_S 2.0 /* seconds between state queries while quiet */

/* --- progress --- */

/* The job's progress from <run_dir>/metrics.jsonl, formatted ("-" where
 * unknown: no run dir, no metrics yet). A file that cannot be read is a
 * line in warn, not an error of status; -ENOMEM is. */
static int job_progress(const struct launch_job *job, const char *state,
			struct launch_progress_text *out, struct dt_err *warn)
{
	struct launch_progress p;
	struct dt_buf path = {0};
	int rc = 0;

	launch_progress_format(&(struct launch_progress){0}, false, out);
	if (!job->run_dir)
		goto out;
	if (dt_buf_printf(&path, "%s/metrics.jsonl", job->run_dir)) {
		rc = -ENOMEM;
		goto out;
	}
	rc = launch_progress_read(path.p, &p, warn);
	if (!rc)
		launch_progress_format(&p, !strcmp(state, "RUNNING"), out);
	else if (rc != -ENOMEM)
		rc = 0;
out:
	dt_buf_free(&path);
	return rc;
}

/* The heartbeats of a running job at Unix time now; lv->known is false
 * when the job is not running or they say nothing. */
static void job_liveness(const struct launch_job *job, const char *state, double now,
			 struct launch_liveness *lv)
{
	memset(lv, 0, sizeof(*lv));
	/* UNKNOWN: Slurm did not answer, and the heartbeats are all we know */
	if (job->run_dir && (!strcmp(state, "RUNNING") || !strcmp(state, "UNKNOWN")))
		launch_liveness_read(job->run_dir, now, lv);
}

/* When the newest step began, for a running job: "3 s ago", or
 * "STALLED 40 s" when the heartbeats say it makes no progress; before the
 * first step of this start, "starting", or "restarting" when the job
 * trained before (a resume); "-" when not running or unknown. */
static void last_step_text(const struct launch_job *job, const char *state, bool trained,
			   char *buf, size_t size)
{
	struct launch_liveness lv;
	double now = dt_wall_s();

	job_liveness(job, state, now, &lv);
	if (!lv.known)
		snprintf(buf, size, "-");
	else if (lv.stalled)
		snprintf(buf, size, "STALLED %.0f s", now - lv.progress_at);
	else if (lv.step > 0)
		snprintf(buf, size, "%.0f s ago", now - lv.step_at);
	else
		snprintf(buf, size, trained ? "restarting" : "starting");
}

/* After a table or a job's lines: that Slurm did not answer, and what the
 * states then are. */
static void note_unreachable(const struct launch_slurm *sl)
{
	if (sl->unreachable)
		fprintf(stderr, "dtrain-submit: Slurm did not answer (%s): job states unknown; the progress shown is the run dirs' (metrics, heartbeats)\n",
			sl->why);
}

/* The nodes and layout of each start of the run (the batch script's
 * job_start events, of every job that ran in its run dir), the last four
 * at most, newest last. */
static void print_starts(const struct launch__report *r)
{
	struct dt_buf shown = {0};
	size_t i, n = 0, k = 0;

	for (i = 0; i < r->n_events; i++)
		n += r->events[i].kind == LAUNCH__EV_JOB_START;
	if (!n)
		return;
	printf("starts:        %zu (%s", n, n > 4 ? "the last 4: " : "");
	for (i = 0; i < r->n_events; i++) {
		if (r->events[i].kind != LAUNCH__EV_JOB_START || ++k + 4 <= n)
			continue;
		printf("%s#%zu %s", k == 1 || k + 3 == n ? "" : "; ", k,
		       dt_shown(r->events[i].detail, &shown));
	}
	printf(")\n");
	dt_buf_free(&shown);
}

/* The loss curve as a sparkline, and goodput so far, from the whole
 * metrics file (report.c); nothing before the first step. */
static void print_curve(const struct launch_job *job)
{
	struct launch__report r;
	struct dt_err ignored = {0}; /* job_progress() warned of an unreadable file */
	const struct launch__goodput *g = &r.good;
	char line[3 * 40 + 1], a[32], b[32], c[32], d[32];

	if (!job->run_dir || launch__report_read(job->run_dir, NULL, &r, &ignored) != 0 ||
	    r.n_steps == 0) {
		if (job->run_dir)
			launch__report_free(&r);
		return;
	}
	printf("loss curve:    %s (%.4g at step %lld, %.4g at step %lld)\n",
	       launch__report_sparkline(&r, 40, line, sizeof(line)), r.steps[0].loss, r.steps[0].step,
	       r.steps[r.n_steps - 1].loss, r.steps[r.n_steps - 1].step);
	printf("goodput:       %s in productive steps; start-up %s, saves %s, redone %s\n",
	       launch__report_secs(g->s[LAUNCH__G_PRODUCTIVE], a, sizeof(a)),
	       launch__report_secs(g->s[LAUNCH__G_STARTUP], b, sizeof(b)),
	       launch__report_secs(g->s[LAUNCH__G_SAVE], c, sizeof(c)),
	       launch__report_secs(g->s[LAUNCH__G_REDONE], d, sizeof(d)));
	print_starts(&r);
	launch__report_free(&r);
}

/* --- status table --- */

/* What one row shows; add fields here for new columns. */
struct status_row {
	const struct launch_job *job;
	struct launch_state st;
	char state[80]; /* launch_state_text */
	struct launch_progress_text prog;
	char last[48]; /* last_step_text */
	struct dt_buf name, run_dir; /* the registry's, as dt_shown() shows them */
};

struct status_col {
	const char *title;
	const char *(*get)(const struct status_row *r);
};

static const char *or_dash(const char *s)
{
	return s && *s ? s : "-";
}

static const char *col_id(const struct status_row *r) { return r->job->id; }
static const char *col_name(const struct status_row *r) { return or_dash(dt_buf_str(&r->name)); }
static const char *col_state(const struct status_row *r) { return r->state; }
static const char *col_step(const struct status_row *r) { return r->prog.step; }
static const char *col_epoch(const struct status_row *r) { return r->prog.epoch; }
static const char *col_loss(const struct status_row *r) { return r->prog.loss; }
static const char *col_acc(const struct status_row *r) { return r->prog.acc; }
static const char *col_rate(const struct status_row *r) { return r->prog.rate; }
static const char *col_eta(const struct status_row *r) { return r->prog.eta; }
static const char *col_last(const struct status_row *r) { return r->last; }
static const char *col_run_dir(const struct status_row *r) { return or_dash(dt_buf_str(&r->run_dir)); }

/* In display order; the last column is not padded. */
static const struct status_col status_cols[] = {
	{ "JOBID", col_id },
	{ "NAME", col_name },
	{ "STATE", col_state },
	{ "STEP", col_step },
	{ "EPOCH", col_epoch },
	{ "LOSS", col_loss },
	{ "ACC", col_acc },
	{ "SAMPLES/S", col_rate },
	{ "ETA", col_eta },
	{ "LAST STEP", col_last },
	{ "RUN_DIR", col_run_dir },
};
#define N_COLS (sizeof(status_cols) / sizeof(status_cols[0]))

static void print_row(const int width[N_COLS], const struct status_row *r)
{
	size_t c;

	for (c = 0; c < N_COLS; c++) {
		const char *v = r ? status_cols[c].get(r) : status_cols[c].title;

		if (c + 1 < N_COLS)
			printf("%-*s  ", width[c], v);
		else
			printf("%s\n", v);
	}
}

static int status_all(struct dt_err *err)
{
	struct launch_job *jobs = NULL;
	struct status_row *rows = NULL;
	struct launch_slurm sl = {0};
	struct dt_err warn = {0};
	int width[N_COLS];
	size_t n = 0, elsewhere = 0, first, i, c;
	char *registry = NULL;
	int rc;

	rc = launch_registry_path(&registry, err);
	if (!rc)
		rc = launch_registry_load(&jobs, &n, err);
	if (rc)
		goto out;
	launch_jobs_here(jobs, &n, &elsewhere);
	if (n == 0) {
		fprintf(stderr, "dtrain-submit: no jobs submitted yet to this cluster (%s; registry: %s)\n",
			launch_cluster(), registry);
		goto elsewhere;
	}
	first = n > STATUS_ROWS ? n - STATUS_ROWS : 0;
	rows = calloc(n - first, sizeof(*rows));
	if (!rows) {
		rc = -ENOMEM;
		dt_err_add(err, "status: out of memory");
		goto out;
	}
	for (c = 0; c < N_COLS; c++)
		width[c] = (int)strlen(status_cols[c].title);
	for (i = first; i < n; i++) {
		struct status_row *r = &rows[i - first];

		r->job = &jobs[i];
		dt_shown(jobs[i].name, &r->name);
		dt_shown(jobs[i].run_dir, &r->run_dir);
		launch_job_state(&sl, jobs[i].id, &r->st);
		launch_state_text(&r->st, r->state, sizeof(r->state));
		if (launch_is_sweep(jobs[i].run_dir)) /* its tasks' states, not the array's */
			launch__sweep_states(&jobs[i], &sl, r->state, sizeof(r->state));
		/* An unreadable metrics file is a "-" and a warning. */
		rc = job_progress(r->job, r->st.name, &r->prog, &warn);
		if (rc) {
			dt_err_add(err, "status: out of memory");
			goto out;
		}
		last_step_text(r->job, r->st.name, strcmp(r->prog.step, "-") != 0, r->last,
			       sizeof(r->last));
		for (c = 0; c < N_COLS; c++) {
			int w = (int)strlen(status_cols[c].get(r));

			if (w > width[c])
				width[c] = w;
		}
	}
	print_row(width, NULL);
	for (i = first; i < n; i++)
		print_row(width, &rows[i - first]);
	note_unreachable(&sl);
	launch__print_warnings(&warn);
elsewhere:
	if (elsewhere)
		fprintf(stderr, "dtrain-submit: %zu job%s of other clusters not shown (this one: SLURM_CONF=%s)\n",
			elsewhere, elsewhere == 1 ? "" : "s", launch_cluster());
out:
	for (i = 0; rows && i + first < n; i++) {
		dt_buf_free(&rows[i].name);
		dt_buf_free(&rows[i].run_dir);
	}
	free(rows);
	launch_jobs_free(jobs, n);
	free(registry);
	return rc;
}

/* --- status of one job --- */

/* Why an ended job failed: <run_dir>/failure, which the failing rank of
 * dtrain-run writes ("exit N at T: message"), when the job ended other
 * than COMPLETED and the file is not older than the job's submit. */
static void print_failure(const struct launch_job *job, const char *state)
{
	char path[4200], *text = NULL, *line, *save = NULL;
	struct dt_buf shown = {0};
	struct stat st;
	struct tm tm = {0};
	time_t submitted = 0;
	bool first = true;

	if (!job->run_dir || launch_state_active(state) || !strcmp(state, "COMPLETED"))
		return;
	snprintf(path, sizeof(path), "%s/failure", job->run_dir);
	if (job->submitted && strptime(job->submitted, "%Y-%m-%dT%H:%M:%SZ", &tm))
		submitted = timegm(&tm);
	if (stat(path, &st) != 0 || st.st_mtime < submitted || dt_read_file(path, &text, NULL) != 0)
		return;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		const char *msg = line;

		if (first && !strncmp(line, "exit ", 5) && strstr(line, ": "))
			msg = strstr(line, ": ") + 2; /* "exit N at T: " is for machines */
		printf("%s%s\n", first ? "failure:       " : "               ", dt_shown(msg, &shown));
		first = false;
	}
	dt_buf_free(&shown);
	free(text);
}

static int status_one(const char *arg, struct dt_err *err)
{
	struct launch_job job = {0};
	struct launch_progress_text prog;
	struct launch_liveness lv;
	struct launch_slurm sl = {0};
	struct launch_state st;
	struct dt_err warn = {0};
	struct dt_buf shown = {0};
	char state[80];
	int rc;

	rc = launch_resolve_job(arg, &job, err);
	if (rc)
		goto out;
	if (launch_is_sweep(job.run_dir)) {
		rc = launch__sweep_status(&job, err);
		goto out;
	}
	launch_job_state(&sl, job.id, &st);
	rc = job_progress(&job, st.name, &prog, &warn);
	if (rc) {
		dt_err_add(err, "status: out of memory");
		goto out;
	}
	printf("job:           %s\n", dt_shown(job.id, &shown));
	printf("name:          %s\n", or_dash(dt_shown(job.name, &shown)));
	printf("state:         %s\n", launch_state_text(&st, state, sizeof(state)));
	printf("run dir:       %s\n", or_dash(dt_shown(job.run_dir, &shown)));
	printf("submitted:     %s\n", or_dash(dt_shown(job.submitted, &shown)));
	printf("output:        %s\n", or_dash(dt_shown(job.log_path, &shown)));
	if (!strcmp(prog.step, "-"))
		printf("progress:      -\n");
	else
		printf("progress:      step %s, epoch %s\n", prog.step, prog.epoch);
	printf("loss:          %s\n", prog.loss);
	printf("test loss:     %s\n", prog.test_loss);
	printf("test accuracy: %s\n", prog.acc);
	printf("samples/s:     %s\n", prog.rate);
	if (strcmp(prog.tokens, "-"))
		printf("tokens/s:      %s\n", prog.tokens);
	printf("eta:           %s\n", prog.eta);
	print_curve(&job);
	print_failure(&job, st.name);
	job_liveness(&job, st.name, dt_wall_s(), &lv);
	if (lv.known) { /* running, or Slurm unreachable */
		char when[32];
		time_t t = (time_t)lv.step_at;
		struct tm tm;

		if (lv.step > 0) {
			strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
			printf("last step:     %lld, began %s (%.0f s ago)\n", lv.step, when,
			       dt_wall_s() - lv.step_at);
		} else {
			printf("last step:     none yet in this start: %s (for %.0f s)\n",
			       strcmp(prog.step, "-") ? "restarting" : "starting", dt_wall_s() - lv.start);
		}
		if (lv.stalled)
			printf("NO PROGRESS:   for %.0f s: %s; the watchdog ends such a step (recovery.*_seconds)\n",
			       dt_wall_s() - lv.progress_at, dt_shown(lv.why, &shown));
	}
	note_unreachable(&sl);
	launch__print_warnings(&warn);
out:
	dt_buf_free(&shown);
	launch_job_free(&job);
	return rc;
}

int launch_cmd_status(const struct launch_args *a, struct dt_err *err)
{
	return a->job ? status_one(a->job, err) : status_all(err);
}

/* --- logs --- */

/* Ctrl-C during `logs -f` ends the command normally; the handler only sets
 * this flag, the loop looks at it. */
static volatile sig_atomic_t logs_interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	logs_interrupted = 1;
}

/* Copy what the file holds past *off to stdout. Returns bytes copied or -errno. */
static ssize_t copy_new(int fd, off_t *off)
{
	char buf[65536];
	struct stat st;
	ssize_t total = 0, n;

	if (fstat(fd, &st) == 0 && st.st_size < *off)
		*off = 0; /* truncated (a new run with --open-mode=truncate) */
	for (;;) {
		n = pread(fd, buf, sizeof(buf), *off);
		if (n < 0 && errno == EINTR) {
			if (logs_interrupted)
				break;
			continue;
		}
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n)
			return -EIO;
		*off += n;
		total += n;
	}
	fflush(stdout);
	return total;
}

/* A sweep task that had not started: Slurm names its output after its own
 * job id, known once it runs */
static void task_output_again(struct launch_job *job)
{
	char *path;

	if (!strchr(job->id, '_') || !job->run_dir || !(path = launch__task_output(job->run_dir, job->id)))
		return;
	free(job->log_path);
	job->log_path = path;
}

static int follow(struct launch_job *job, int fd, struct dt_err *err)
{
	struct sigaction sa = {0}, old;
	struct timespec poll = { 0, LOGS_POLL_NS };
	struct launch_state st = { .name = "" };
	char state[80] = "";
	bool ending = false, said_waiting = false, opened;
	double asked = -1e9;
	int rc = 0;
	off_t off = 0;

	logs_interrupted = 0;
	sa.sa_handler = on_sigint;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old); /* no SA_RESTART: Ctrl-C cuts the sleep */
	while (!logs_interrupted) {
		ssize_t got = 0;

		if (fd < 0)
			task_output_again(job);
		if (fd < 0 && (fd = open(job->log_path, O_RDONLY | O_CLOEXEC)) < 0 &&
		    errno != ENOENT) {
			rc = -errno;
			dt_err_add(err, "%s: cannot open: %s", job->log_path, strerror(-rc));
			break;
		}
		if (fd >= 0 && (got = copy_new(fd, &off)) < 0) {
			rc = (int)got;
			dt_err_add(err, "%s: cannot read: %s", job->log_path, strerror(-rc));
			break;
		}
		/* Quiet: is more to come? After the job ended, one more read. */
		if (got == 0 && ending)
			break;
		if (got == 0 && dt_mono_s() - asked >= LOGS_STATE_EVERY_S) {
			struct launch_slurm sl = {0}; /* asked anew: Slurm may be back */

			asked = dt_mono_s();
			launch_job_state(&sl, job->id, &st);
			launch_state_text(&st, state, sizeof(state));
			if (!launch_state_active(st.name)) {
				ending = true;
				continue;
			}
			if (fd < 0 && !said_waiting) {
				fprintf(stderr, "dtrain-submit: job %s is %s; waiting for %s\n",
					job->id, state, job->log_path);
				said_waiting = true;
			}
		}
		nanosleep(&poll, NULL);
	}
	sigaction(SIGINT, &old, NULL);
	opened = fd >= 0;
	if (fd >= 0)
		close(fd);
	if (!rc && ending && !opened)
		fprintf(stderr, "dtrain-submit: job %s is %s and wrote no output to %s\n",
			job->id, state, job->log_path);
	return rc;
}

/* logs SWEEP: each task's output after a line naming it */
static int sweep_logs(const struct launch_job *sweep, const struct launch_args *a, struct dt_err *err)
{
	struct launch_job task;
	long k;
	int rc = 0;

	if (a->follow)
		return dt_err_add(err, "logs -f follows one task of sweep %s: give %s_<k> (`dtrain-submit status %s` lists them)",
				  sweep->id, a->job, sweep->id), -EINVAL;
	for (k = 0; !rc && launch_sweep_task(sweep, k, &task) == 0; k++) {
		int fd = open(task.log_path, O_RDONLY | O_CLOEXEC);
		off_t off = 0;

		printf("==> task %s: %s <==\n", task.id, fd >= 0 ? task.log_path : "no output yet");
		fflush(stdout);
		if (fd >= 0 && copy_new(fd, &off) < 0) {
			rc = -EIO;
			dt_err_add(err, "%s: cannot read or write the output", task.log_path);
		}
		if (fd >= 0)
			close(fd);
		launch_job_free(&task);
	}
	return rc;
}

int launch_cmd_logs(const struct launch_args *a, struct dt_err *err)
{
	struct launch_job job = {0};
	struct launch_slurm sl = {0};
	struct launch_state st;
	char state[80];
	off_t off = 0;
	int fd = -1, rc;

	rc = launch_resolve_job(a->job, &job, err);
	if (rc)
		goto out;
	if (launch_is_sweep(job.run_dir)) {
		rc = sweep_logs(&job, a, err);
		goto out;
	}
	if (!job.log_path) {
		rc = -ENOENT;
		dt_err_add(err, "job %s: its output file is unknown (no run dir in the registry or in Slurm)",
			   job.id);
		goto out;
	}
	fd = open(job.log_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT) {
		rc = -errno;
		dt_err_add(err, "%s: cannot open: %s", job.log_path, strerror(-rc));
		goto out;
	}
	if (a->follow) {
		rc = follow(&job, fd, err);
		fd = -1; /* follow() closed it */
		goto out;
	}
	if (fd < 0) {
		launch_job_state(&sl, job.id, &st);
		launch_state_text(&st, state, sizeof(state));
		if (launch_state_active(st.name)) {
			fprintf(stderr, "dtrain-submit: job %s is %s: no output yet (%s); hint: dtrain-submit logs -f %s\n",
				job.id, state, job.log_path, a->job);
		} else {
			rc = -ENOENT;
			dt_err_add(err, "%s: no such file (job %s is %s)", job.log_path, job.id, state);
		}
		goto out;
	}
	if (copy_new(fd, &off) < 0) {
		rc = -EIO;
		dt_err_add(err, "%s: cannot read or write the output", job.log_path);
	}
out:
	if (fd >= 0)
		close(fd);
	launch_job_free(&job);
	return rc;
}
