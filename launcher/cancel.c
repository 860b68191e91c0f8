/*
 * cancel.c - `dtrain-submit cancel`: stop a job without losing its work.
 *
 * A running dtrain job is asked first, as a preemption asks it: cancel
 * leaves <run dir>/cancel and sends the ranks their stop signal
 * (preemption.signal, scancel --signal). They save at the next step
 * boundary (after an evaluation in progress) and exit; the batch script,
 * seeing the marker, does not requeue but cancels the job itself, so that
 * Slurm records it CANCELLED. cancel waits for the job's end and reports
 * the save from metrics.jsonl (a "stop" event, then its "checkpoint");
 * past preemption.lead_seconds (+ CANCEL_GRACE_S) it cancels the job
 * anyway. A pending job, or with --now, is cancelled at once.
 * `dtrain-submit resume` moves the marker aside.
 *
 * Sections: the save, cancel.
 */
#include "launcher/cli.h"
#include "launcher/internal.h"
#include "base/clock.h"
#include "base/buf.h"
#include "base/io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CANCEL_GRACE_S 30    /* beyond the lead time: the step boundary's wait */
#define CANCEL_POLL_MS 250

/* --- the save --- */

static const char *or_dash(const char *s)
{
	return s && *s ? s : "-";
}

/* Bytes of <run_dir>/metrics.jsonl now (0 when there is none). */
static long long metrics_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (long long)st.st_size : 0;
}

/* Text of path from byte `from` on, into text (empty when unreadable) */
static void read_from(const char *path, long long from, struct dt_buf *text)
{
	FILE *f = fopen(path, "r");
	char chunk[4096];
	size_t n;

	if (!f)
		return;
	if (fseeko(f, (off_t)from, SEEK_SET) == 0)
		while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
			if (dt_buf_printf(text, "%.*s", (int)n, chunk))
				break;
	fclose(f);
}

/* Does `event` occur in path after byte `from`? */
static bool event_after(const char *path, long long from, const char *event)
{
	struct dt_buf text = {0};
	bool found;

	read_from(path, from, &text);
	found = text.p && strstr(text.p, event);
	dt_buf_free(&text);
	return found;
}

/* The step of the save that a stop event after byte `from` announced, once
 * its checkpoint event is there; -1 before. */
static long long saved_step(const char *path, long long from)
{
	struct dt_buf text = {0};
	char *stop;
	long long step = -1;

	read_from(path, from, &text);
	if (text.p && (stop = strstr(text.p, "\"event\":\"stop\"")) != NULL &&
	    strstr(stop, "\"event\":\"checkpoint\"")) {
		const char *at = strstr(stop, "\"step\":");

		step = at ? strtoll(at + 7, NULL, 10) : 0;
	}
	dt_buf_free(&text);
	return step;
}

/* The run's stop signal and its lead time (its spec.json's preemption.*),
 * else USR1 and 60 s. */
static void stop_signal(const char *run_dir, char *sig, size_t size, long *lead)
{
	char path[4200];
	struct spec s;
	struct dt_err ignored = {0};

	snprintf(sig, size, "USR1");
	*lead = 60;
	snprintf(path, sizeof(path), "%s/spec.json", run_dir);
	if (spec_load(path, &s, &ignored) == 0) {
		snprintf(sig, size, "%s", s.preemption.signal);
		*lead = s.preemption.lead_seconds;
		spec_free(&s);
	}
}

static int run_scancel(const char *const *argv, const char *id, struct dt_err *err)
{
	int rc, status;

	rc = launch__run(&(struct launch__proc){ .argv = argv, .err_mode = LAUNCH__STDERR_PASS },
			 &status, err);
	if (!rc && status != 0) {
		rc = -EIO;
		dt_err_add(err, "scancel refused job %s (exit %d, its message is above)", id, status);
	}
	return rc;
}

/* One job asked to save: what to watch for its save. */
struct saving {
	const struct launch_job *job;
	char metrics[4200];
	long long from;  /* metrics.jsonl's size when asked: its stop event is after */
	long long step;  /* the save's step; -1: none seen yet */
	bool done;       /* saved, or ended */
	double wait_s;
};

/* Ask the running job to save and stop: <run dir>/cancel, which tells its
 * batch script not to requeue but to cancel the job once the ranks saved,
 * then the ranks' stop signal. False: not asked (a warning said why). */
static bool start_save(const struct launch_job *job, struct saving *sv)
{
	struct dt_err ignored = {0};
	const char *argv[] = { "scancel", NULL, job->id, NULL };
	char marker[4200], sig[32], opt[48], note[64];
	long lead;
	int rc;

	*sv = (struct saving){ .job = job, .step = -1 };
	stop_signal(job->run_dir, sig, sizeof(sig), &lead);
	sv->wait_s = (double)(lead + CANCEL_GRACE_S);
	snprintf(sv->metrics, sizeof(sv->metrics), "%s/metrics.jsonl", job->run_dir);
	snprintf(marker, sizeof(marker), "%s/cancel", job->run_dir);
	snprintf(opt, sizeof(opt), "--signal=%s", sig);
	argv[1] = opt;
	snprintf(note, sizeof(note), "job %s\n", job->id);
	sv->from = metrics_size(sv->metrics);
	rc = dt_write_file_atomic(marker, note, strlen(note), 0644);
	if (rc) {
		fprintf(stderr, "dtrain-submit: warning: %s: cannot write: %s; cancelling job %s without a save\n",
			marker, strerror(-rc), job->id);
		return false;
	}
	if (run_scancel(argv, job->id, &ignored)) {
		unlink(marker); /* no save asked: a later stop must requeue as before */
		fprintf(stderr, "dtrain-submit: warning: %s; cancelling job %s without a save\n",
			ignored.msg, job->id);
		return false;
	}
	fprintf(stderr, "dtrain-submit: job %s: asked to save and stop (SIG%s); waiting up to %.0f s for its save\n",
		job->id, sig, sv->wait_s);
	return true;
}

/* Wait for the n jobs' saves (or their ends, or their time out), together. */
static void wait_saves(struct saving *sv, size_t n)
{
	struct launch_slurm sl = {0};
	struct launch_state st;
	double t0 = dt_mono_s();
	size_t i, left = n;

	while (left > 0) {
		for (i = 0; i < n; i++) {
			if (sv[i].done)
				continue;
			if ((sv[i].step = saved_step(sv[i].metrics, sv[i].from)) < 0 &&
			    dt_mono_s() - t0 < sv[i].wait_s) {
				launch_job_state(&sl, sv[i].job->id, &st);
				if (launch_state_active(st.name))
					continue;
				/* the save and the job's end may both fall after the read */
				sv[i].step = saved_step(sv[i].metrics, sv[i].from);
			}
			sv[i].done = true;
			left--;
			if (sv[i].step >= 0)
				fprintf(stderr, "dtrain-submit: job %s: saved at step %lld (%.0f s)\n", sv[i].job->id,
					sv[i].step, dt_mono_s() - t0);
			else
				fprintf(stderr, "dtrain-submit: job %s: no save seen within %.0f s; cancelling it; a resume starts from its newest checkpoint\n",
					sv[i].job->id, dt_mono_s() - t0);
		}
		if (left > 0)
			dt_sleep_ms(CANCEL_POLL_MS);
	}
}

/* Ask one job to save and stop, and wait for that. */
static void ask_to_save(const struct launch_job *job)
{
	struct saving sv;

	if (start_save(job, &sv))
		wait_saves(&sv, 1);
}

/* Has this job's dtrain-run started training (its output, the job's own
 * slurm-<id>.out, has rank 0's "training" line, printed once the ranks
 * catch the stop signal)? Before that there is nothing to save: a job still
 * in its setup lines, or not a training job, is cancelled at once. */
static bool trains(const struct launch_job *job)
{
	return job->log_path && event_after(job->log_path, 0, "dtrain-run: training ");
}

/* --- cancel --- */

/* cancel SWEEP: its pending tasks at once (they have nothing to save), then
 * each running task as a job of its own (asked to save first, unless
 * --now), then whatever is left of the array */
static int cancel_sweep(const struct launch_job *sweep, bool now, struct dt_err *err)
{
	const char *pending[] = { "scancel", "--state=PENDING", sweep->id, NULL };
	const char *all[] = { "scancel", sweep->id, NULL };
	struct launch_slurm sl = {0};
	struct launch_state st;
	struct launch_job *task = NULL, *more;
	struct saving *sv = NULL;
	size_t k, n = 0, saved = 0;
	int rc = 0;

	launch_job_state(&sl, sweep->id, &st);
	if (!launch_state_active(st.name)) {
		dt_err_add(err, "sweep %s (%s) had already ended (%s): nothing to cancel; hint: `dtrain-submit status %s` shows its tasks",
			   sweep->id, or_dash(sweep->name), st.name, sweep->id);
		return -ESRCH;
	}
	if (!now && (rc = run_scancel(pending, sweep->id, err)))
		return rc;
	/* every running task asked at once, then their saves waited for together */
	for (k = 0; !now; k++) {
		if (!(more = realloc(task, (n + 1) * sizeof(*task)))) {
			rc = -ENOMEM;
			goto out;
		}
		task = more;
		if (launch_sweep_task(sweep, (long)k, &task[n]) != 0)
			break;
		n++;
	}
	if (n && !(sv = calloc(n, sizeof(*sv)))) {
		rc = -ENOMEM;
		goto out;
	}
	for (k = 0; k < n; k++) {
		launch_job_state(&sl, task[k].id, &st);
		if (!strcmp(st.name, "RUNNING") && trains(&task[k]) && start_save(&task[k], &sv[saved]))
			saved++;
	}
	wait_saves(sv, saved);
	launch_job_state(&sl, sweep->id, &st);
	if (launch_state_active(st.name) && (rc = run_scancel(all, sweep->id, err)))
		goto out;
	printf("cancelled sweep %s (%s)%s, sweep dir %s\n", sweep->id, or_dash(sweep->name),
	       now ? "" : saved ? ", its running tasks saved first" : ", no task was training",
	       sweep->run_dir);
	fprintf(stderr, "dtrain-submit: to continue a task: dtrain-submit resume %s/task-<k>\n", sweep->run_dir);
out:
	if (rc == -ENOMEM)
		dt_err_add(err, "cancel: out of memory");
	while (n > 0)
		launch_job_free(&task[--n]);
	free(task);
	free(sv);
	return rc;
}

int launch_cmd_cancel(const struct launch_args *a, struct dt_err *err)
{
	const char *argv[] = { "scancel", NULL, NULL };
	struct launch_job job = {0};
	struct launch_slurm sl = {0};
	struct launch_state state;
	int rc;

	rc = launch_resolve_job(a->job, &job, err);
	if (rc)
		goto out;
	if (launch_is_sweep(job.run_dir)) {
		rc = cancel_sweep(&job, a->now, err);
		goto out;
	}
	launch_job_state(&sl, job.id, &state);
	if (!launch_state_active(state.name)) {
		rc = -ESRCH;
		dt_err_add(err, "job %s (%s) had already ended (%s): nothing to cancel; hint: `dtrain-submit status %s` shows how it ended",
			   job.id, or_dash(job.name), state.name, job.id);
		goto out;
	}
	if (!a->now && !strcmp(state.name, "RUNNING") && job.run_dir && trains(&job)) {
		ask_to_save(&job);
		launch_job_state(&sl, job.id, &state);
	}
	argv[1] = job.id;
	if (launch_state_active(state.name)) /* else it cancelled itself, saved */
		rc = run_scancel(argv, job.id, err);
	if (rc)
		goto out;
	printf("cancelled job %s (%s), run dir %s\n", job.id, or_dash(job.name), or_dash(job.run_dir));
	if (job.run_dir)
		fprintf(stderr, "dtrain-submit: to continue it: dtrain-submit resume %s\n", job.run_dir);
out:
	launch_job_free(&job);
	return rc;
}
