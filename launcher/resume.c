/*
 * resume.c - `dtrain-submit resume RUN_DIR`: a stopped run (cancelled,
 * failed, out of requeues or of time) continued in its own run dir, so that
 * its checkpoints, metrics.jsonl and logs stay one history. The job is a
 * new Slurm job; dtrain-run resumes from the run's newest valid checkpoint
 * as a requeued job does (checkpoint.resume "auto" looks in the run's own
 * checkpoints first).
 *
 * What the previous job used is kept beside the new: spec.json and job.sh
 * as spec-<id>.json and job-<id>.sh, its recovery counters (restarts,
 * crashes, requeues: launcher/render.c) as recovery-<id>/, so the new job
 * counts from zero, and the marker of a cancel (cancel.c) as cancel-<id>,
 * so that the new job requeues itself again. A sbatch that refuses puts
 * them back.
 *
 * A run that completed, with nothing left to do under the new spec's
 * train.epochs and train.max_steps, is refused before sbatch.
 *
 * Sections: the previous job, the run dir's files, nothing left to do,
 * resume. (The command
 * is submit's: launch_cmd_submit.)
 */
#include "launcher/cli.h"
#include "launcher/internal.h"
#include "base/io.h"
#include "base/json.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* --- the previous job --- */

/* The id in <run_dir>/job_id into *id (NULL when there is none), refused
 * (-EBUSY) while Slurm says that job is still active. */
static int previous_job(const char *run_dir, char **id, struct dt_err *err)
{
	struct launch_slurm sl = {0};
	struct launch_state st;
	char *path = NULL, *text = NULL;
	size_t len = 0;
	int rc = 0;

	*id = NULL;
	if (!(path = malloc(strlen(run_dir) + sizeof("/job_id"))))
		return -ENOMEM;
	sprintf(path, "%s/job_id", run_dir);
	if (dt_read_file(path, &text, &len) != 0)
		goto out; /* never submitted from here: nothing to keep apart */
	/* a job's id, or a sweep task's: <array id>_<task> */
	len = strspn(text, "0123456789");
	if (len && text[len] == '_' && text[len + 1] >= '0' && text[len + 1] <= '9')
		len += 1 + strspn(text + len + 1, "0123456789");
	text[len] = '\0';
	if (!*text)
		goto out;
	*id = strdup(text);
	if (!*id) {
		rc = -ENOMEM;
		goto out;
	}
	launch_job_state(&sl, *id, &st);
	if (launch_state_active(st.name)) {
		rc = -EBUSY;
		dt_err_add(err, "%s: its job %s is %s: a run continues once its job has stopped; hint: dtrain-submit cancel %s (it saves first)",
			   run_dir, *id, st.name, *id);
	}
out:
	free(path);
	free(text);
	return rc;
}

/* --- the run dir's files --- */

static const char *const kept[] = { "spec.json", "job.sh", "recovery", "cancel" };
static const char *const kept_as[] = { "spec-%s.json", "job-%s.sh", "recovery-%s", "cancel-%s" };
#define N_KEPT (sizeof(kept) / sizeof(kept[0]))

/* <run_dir>/<name> into buf */
static void in_dir(char *buf, size_t size, const char *run_dir, const char *name)
{
	snprintf(buf, size, "%s/%s", run_dir, name);
}

/* The previous job's files renamed to their kept names (moved[i] says
 * which were there); the first failure undoes the others. */
static int keep_previous(const char *run_dir, const char *id, bool moved[N_KEPT],
			 struct dt_err *err)
{
	char from[4200], to[4200], name[64];
	bool taken;
	size_t i;

	for (i = 0; i < N_KEPT; i++) {
		moved[i] = false;
		in_dir(from, sizeof(from), run_dir, kept[i]);
		snprintf(name, sizeof(name), kept_as[i], id);
		in_dir(to, sizeof(to), run_dir, name);
		if (access(from, F_OK) != 0)
			continue;
		taken = access(to, F_OK) == 0;
		if (taken || rename(from, to) != 0) {
			int e = taken ? EEXIST : errno;

			dt_err_add(err, "%s: cannot keep it as %s: %s", from, name, strerror(e));
			while (i-- > 0)
				if (moved[i]) {
					in_dir(from, sizeof(from), run_dir, kept[i]);
					snprintf(name, sizeof(name), kept_as[i], id);
					in_dir(to, sizeof(to), run_dir, name);
					(void)rename(to, from);
				}
			return -e;
		}
		moved[i] = true;
	}
	return 0;
}

/* keep_previous undone: the new files removed (written: they were made
 * here), the kept ones back */
static void put_back(const char *run_dir, const char *id, const bool moved[N_KEPT], bool written)
{
	char from[4200], to[4200], name[64];
	size_t i;

	for (i = 0; i < N_KEPT; i++) {
		in_dir(from, sizeof(from), run_dir, kept[i]);
		if (written && i < 2)
			(void)unlink(from);
		if (!moved[i])
			continue;
		snprintf(name, sizeof(name), kept_as[i], id);
		in_dir(to, sizeof(to), run_dir, name);
		(void)rename(to, from);
	}
	(void)dt_fsync_path(run_dir, true);
}

/* The new spec.json and job.sh */
static int write_new(const struct launch_plan *p, struct dt_err *err)
{
	char path[4200];
	int rc;

	in_dir(path, sizeof(path), p->spec.run_dir, "spec.json");
	rc = launch__write_new(path, p->spec_json.p, p->spec_json.len, 0644);
	if (!rc) {
		in_dir(path, sizeof(path), p->spec.run_dir, "job.sh");
		rc = launch__write_new(path, p->script.p, p->script.len, 0755);
	}
	if (!rc)
		rc = dt_fsync_path(p->spec.run_dir, true);
	if (rc)
		dt_err_add(err, "%s: cannot write: %s", path, strerror(-rc));
	return rc;
}

/* --- nothing left to do --- */

/* Whether the data file is no newer than the run's metrics (the end of
 * its last start): a file made again since may hold more samples */
static bool data_unchanged(const char *data, const char *metrics)
{
	struct stat d, m;

	return !data || (stat(data, &d) == 0 && stat(metrics, &m) == 0 && d.st_mtime <= m.st_mtime);
}

/* Whether an epoch of the new spec has as many steps as the previous job's
 * (its spec.json): the same train.global_batch, model.context (a token
 * stream's windows) and data.train, not made again since the run ended */
static bool same_epochs(const char *run_dir, const struct spec *s, const char *metrics)
{
	char path[4200], *text = NULL;
	json_object *o = NULL, *train, *data, *model, *gb, *ctx = NULL, *file = NULL;
	struct dt_json_error je;
	size_t len = 0;
	bool same = false;

	in_dir(path, sizeof(path), run_dir, "spec.json");
	if (dt_read_file(path, &text, &len) == 0 && dt_json_parse_object(text, len, 32, &o, &je) == 0 &&
	    json_object_object_get_ex(o, "train", &train) &&
	    json_object_object_get_ex(train, "global_batch", &gb) &&
	    json_object_object_get_ex(o, "model", &model) &&
	    json_object_object_get_ex(o, "data", &data)) {
		json_object_object_get_ex(data, "train", &file); /* NULL: none, as JSON null */
		json_object_object_get_ex(model, "context", &ctx);
		same = json_object_get_int64(gb) == s->train.global_batch &&
		       (ctx ? json_object_get_int64(ctx) : 0) == s->model.context &&
		       (file ? json_object_is_type(file, json_type_string) && s->data.train &&
				       !strcmp(json_object_get_string(file), s->data.train) :
			       !s->data.train) &&
		       data_unchanged(s->data.train, metrics);
	}
	json_object_put(o);
	free(text);
	return same;
}

/* Refused (-EINVAL) before anything is submitted: a run that ended (an end
 * event after its newest start in metrics.jsonl) at a step the new spec's
 * train.epochs and train.max_steps do not pass, which dtrain-run would
 * resume from only to say that nothing is left to do */
static int left_to_do(const struct launch_plan *p, struct dt_err *err)
{
	const struct spec *s = &p->spec;
	struct launch_progress pr;
	struct dt_err ignored = {0}; /* an unreadable file: dtrain-run decides */
	char path[4200];
	long long total;

	in_dir(path, sizeof(path), s->run_dir, "metrics.jsonl");
	if ((s->checkpoint.resume && strcmp(s->checkpoint.resume, "auto")) ||
	    launch_progress_read(path, &pr, &ignored) != 0 || !pr.ended || !pr.has_step || pr.step_stale)
		return 0;
	/* train.max_steps bounds the run whatever the data */
	if (s->train.max_steps > 0 && pr.step >= s->train.max_steps)
		return dt_err_add(err, "%s: the run completed at step %lld and train.max_steps is %ld: nothing left to do; hint: raise it, e.g. --set train.max_steps=%lld",
				  s->run_dir, pr.step, s->train.max_steps, 2 * pr.step), -EINVAL;
	if (pr.steps_per_epoch <= 0 || !same_epochs(s->run_dir, s, path))
		return 0;
	total = s->train.epochs * pr.steps_per_epoch; /* 0: no bound by epochs (train.max_steps alone) */
	if (total == 0 || pr.step < total)
		return 0;
	return dt_err_add(err, "%s: the run completed at step %lld, the end of its train.epochs %ld (%lld steps each): nothing left to do; hint: raise train.epochs, e.g. --set train.epochs=%ld, or set train.max_steps",
			  s->run_dir, pr.step, s->train.epochs, pr.steps_per_epoch, 2 * s->train.epochs), -EINVAL;
}

/* --- resume --- */

int launch_resume(struct launch_plan *p, struct launch_job *job, struct dt_err *warn,
		  struct dt_err *err)
{
	const char *run_dir = p->spec.run_dir, *as;
	bool moved[N_KEPT] = { false }, written = false;
	char *old = NULL;
	int rc;

	*job = (struct launch_job){0};
	rc = previous_job(run_dir, &old, err);
	as = old ? old : "previous"; /* a run dir whose job id was never written */
	if (!rc)
		rc = left_to_do(p, err);
	if (!rc)
		rc = keep_previous(run_dir, as, moved, err);
	if (rc)
		goto out;
	rc = write_new(p, err);
	written = rc == 0;
	if (!rc)
		rc = launch__sbatch_record(p, job, warn, err);
	if (rc && rc != -EPROTO) /* refused: the run dir as it was */
		put_back(run_dir, as, moved, written);
out:
	if (rc == -ENOMEM)
		dt_err_add(err, "resume: out of memory");
	if (rc)
		launch_job_free(job);
	free(old);
	return rc;
}
