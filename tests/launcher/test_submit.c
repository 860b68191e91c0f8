/*
 * test_submit.c - the two phases of a submit (launch_plan, launch_submit)
 * with the real spec resolver and a fake sbatch first on PATH: what is
 * created, what is left after a refusal, and that an invalid spec creates
 * nothing and never reaches sbatch.
 *
 * sbatch's environment lacks Slurm's inputs, what bash acts on before a
 * script's first line and what the site locks.
 *
 * A resume with nothing left to do is refused before sbatch.
 *
 * Sections: fixtures, plan, submit, failures, resume.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher/internal.h"
#include "launcher/launch.h"
#include "tests/testutil.h"
#include "base/err.h"
#include "base/io.h"

/* --- fixtures --- */

static char tmp[256];
static char fake_bin[512];
static char runs[512];
static char site_path[512];
static char spec_path[512];
static char bad_spec_path[512];
static char sbatch_log[512];

static void fake_sbatch(const char *body)
{
	char path[600], text[2048];

	snprintf(path, sizeof(path), "%s/sbatch", fake_bin);
	snprintf(text, sizeof(text),
		 "#!/bin/bash\nprintf '%%s\\n' \"$@\" >> '%s'\n%s\n", sbatch_log, body);
	tu_write_path(path, text, 0755);
}

static int group_setup(void **state)
{
	char text[1024], path[700];

	(void)state;
	snprintf(tmp, sizeof(tmp), "%s", tu_scratch());
	snprintf(fake_bin, sizeof(fake_bin), "%s/bin", tmp);
	snprintf(runs, sizeof(runs), "%s/runs", tmp);
	snprintf(sbatch_log, sizeof(sbatch_log), "%s/sbatch.log", tmp);
	if (mkdir(fake_bin, 0755))
		return -1;
	snprintf(path, sizeof(path), "%s/home", tmp);
	mkdir(path, 0755);
	setenv("HOME", path, 1);
	snprintf(path, sizeof(path), "%s/state", tmp);
	setenv("XDG_STATE_HOME", path, 1);
	snprintf(path, sizeof(path), "%s:/usr/bin:/bin", fake_bin);
	setenv("PATH", path, 1);
	unsetenv("DTRAIN_SITE");

	snprintf(site_path, sizeof(site_path), "%s/site.json", tmp);
	snprintf(text, sizeof(text),
		 "{ \"runs_root\": \"%s\", \"env\": { \"SITE_MARK\": \"yes\" },\n"
		 "  \"srun_extra\": [\"--kill-on-bad-exit=1\"], \"setup\": [\"echo site\"] }\n", runs);
	tu_write_path(site_path, text, 0644);
	snprintf(spec_path, sizeof(spec_path), "%s/job.json", tmp);
	tu_write_path(spec_path,
		   "{ \"name\": \"unit\", \"resources\": { \"nodes\": 1, \"tasks_per_node\": 1 },\n"
		   "  \"model\": { \"inputs\": 4, \"hidden\": [8], \"outputs\": 2 },\n"
		   "  \"train\": { \"epochs\": 1, \"global_batch\": 4 } }\n", 0644);
	snprintf(bad_spec_path, sizeof(bad_spec_path), "%s/bad.json", tmp);
	tu_write_path(bad_spec_path, "{ \"name\": \"unit\", \"resources\": { \"nodez\": 1 } }\n", 0644);
	return 0;
}

static int reset(void **state)
{
	char path[600];

	(void)state;
	dt_remove_tree(runs);
	unlink(sbatch_log);
	snprintf(path, sizeof(path), "%s/state", tmp);
	dt_remove_tree(path);
	fake_sbatch("echo '4242;dtrain-local'");
	return 0;
}

static struct launch_args args_for(const char *spec, const char **sets, size_t n_sets)
{
	return (struct launch_args){ .cmd = LAUNCH_SUBMIT, .spec_path = spec,
				     .site_path = site_path, .sets = sets, .n_sets = n_sets };
}

/* The test binary has no dtrain-run beside it: use an executable that is. */
static void use_fake_dtrain_run(struct launch_plan *p)
{
	free(p->dtrain_run);
	p->dtrain_run = strdup("/bin/true");
	assert_non_null(p->dtrain_run);
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* Entries of runs/, dot-dirs included. */
static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static char *slurp(const char *dir, const char *name)
{
	char path[1024], *text = NULL;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (dt_read_file(path, &text, NULL))
		return NULL;
	return text;
}

/* --- plan --- */

static void test_plan_creates_nothing(void **state)
{
	struct launch_args a = args_for(spec_path, NULL, 0);
	struct launch_plan p;
	struct dt_err err = {0};
	char want[700];

	(void)state;
	assert_int_equal(launch_plan(&a, &p, &err), 0);
	assert_non_null(p.spec.run_dir);
	assert_true(p.run_dir_auto);
	snprintf(want, sizeof(want), "%s/unit-", runs);
	assert_true(!strncmp(p.spec.run_dir, want, strlen(want)));
	snprintf(want, sizeof(want), "\"run_dir\": \"%s\"", p.spec.run_dir);
	assert_non_null(strstr(p.spec_json.p, want));
	snprintf(want, sizeof(want), "#SBATCH --chdir=%s\n", p.spec.run_dir);
	assert_non_null(strstr(p.script.p, want));
	assert_non_null(strstr(p.script.p, "export SITE_MARK='yes'\n"));
	assert_false(exists(runs));
	assert_false(exists(sbatch_log));
	launch_plan_free(&p);
}

static void test_plan_invalid_spec(void **state)
{
	struct launch_args a = args_for(bad_spec_path, NULL, 0);
	struct launch_plan p;
	struct dt_err err = {0};

	(void)state;
	assert_int_equal(launch_plan(&a, &p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "resources.nodez"));
	launch_plan_free(&p);
	/* An unreadable spec or site file is an invalid input too (exit 3). */
	a = args_for("/nonexistent/job.json", NULL, 0);
	dt_err_clear(&err);
	assert_int_equal(launch_plan(&a, &p, &err), -EINVAL);
	launch_plan_free(&p);
	a = args_for(spec_path, NULL, 0);
	a.site_path = "/nonexistent/site.json";
	dt_err_clear(&err);
	assert_int_equal(launch_plan(&a, &p, &err), -EINVAL);
	launch_plan_free(&p);
	assert_false(exists(runs));
	assert_false(exists(sbatch_log));
}

static void test_plan_run_dir_taken(void **state)
{
	char dir[700], set[800];
	const char *sets[1] = { set };
	struct launch_args a = args_for(spec_path, sets, 1);
	struct launch_plan p;
	struct dt_err err = {0};

	(void)state;
	snprintf(dir, sizeof(dir), "%s/mine", runs);
	snprintf(set, sizeof(set), "run_dir=%s", dir);
	assert_int_equal(dt_mkdirs(dir, 0755), 0);
	assert_int_equal(launch_plan(&a, &p, &err), -EEXIST);
	assert_non_null(strstr(err.msg, "already exists; hint:"));
	launch_plan_free(&p);
}

/* --- submit --- */

static void test_submit_creates_run_dir(void **state)
{
	struct launch_args a = args_for(spec_path, NULL, 0);
	struct launch_plan p;
	struct launch_job job;
	struct dt_err err = {0}, warn = {0};
	struct launch_job *jobs;
	char want[800], *text;
	struct stat st;
	size_t n;

	(void)state;
	assert_int_equal(launch_plan(&a, &p, &err), 0);
	use_fake_dtrain_run(&p);
	assert_int_equal(launch_submit(&p, &job, &warn, &err), 0);
	assert_int_equal(warn.count, 0);
	assert_string_equal(job.id, "4242");
	assert_string_equal(job.name, "unit");
	assert_string_equal(job.run_dir, p.spec.run_dir);

	/* The run dir: spec.json, job.sh (executable), job_id; no temp dirs. */
	text = slurp(job.run_dir, "job_id");
	assert_non_null(text);
	assert_string_equal(text, "4242\n");
	free(text);
	text = slurp(job.run_dir, "spec.json");
	assert_non_null(text);
	assert_string_equal(text, p.spec_json.p);
	free(text);
	text = slurp(job.run_dir, "job.sh");
	assert_non_null(text);
	assert_string_equal(text, p.script.p);
	free(text);
	snprintf(want, sizeof(want), "%s/job.sh", job.run_dir);
	assert_int_equal(stat(want, &st), 0);
	assert_true(st.st_mode & S_IXUSR);
	assert_int_equal(count_entries(runs), 1);

	/* sbatch got --parsable and the script, nothing else. */
	text = slurp(tmp, "sbatch.log");
	assert_non_null(text);
	snprintf(want, sizeof(want), "--parsable\n%s/job.sh\n", job.run_dir);
	assert_string_equal(text, want);
	free(text);

	/* Registered. */
	assert_int_equal(launch_registry_load(&jobs, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(jobs[0].id, "4242");
	assert_string_equal(jobs[0].run_dir, job.run_dir);
	launch_jobs_free(jobs, n);
	launch_job_free(&job);
	launch_plan_free(&p);
}

static void test_submit_takes_next_name_on_race(void **state)
{
	struct launch_args a = args_for(spec_path, NULL, 0);
	struct launch_plan p;
	struct launch_job job;
	struct dt_err err = {0}, warn = {0};
	char planned[700], want[800], *text;

	(void)state;
	assert_int_equal(launch_plan(&a, &p, &err), 0);
	use_fake_dtrain_run(&p);
	/* Another submit takes the planned name between plan and submit. */
	snprintf(planned, sizeof(planned), "%s", p.spec.run_dir);
	assert_int_equal(dt_mkdirs(planned, 0755), 0);
	assert_int_equal(launch_submit(&p, &job, &warn, &err), 0);
	snprintf(want, sizeof(want), "%s-2", planned);
	assert_string_equal(job.run_dir, want);
	/* Rendered again for the new name. */
	text = slurp(job.run_dir, "job.sh");
	assert_non_null(text);
	snprintf(want, sizeof(want), "#SBATCH --chdir=%s-2\n", planned);
	assert_non_null(strstr(text, want));
	free(text);
	assert_int_equal(count_entries(planned), 0); /* the other one untouched */
	launch_job_free(&job);
	launch_plan_free(&p);
}

/* sbatch runs without the submitting shell's SBATCH_* and SLURM_*
 * variables (they would override the job script's #SBATCH lines: the
 * site's locks, the resolved spec), but with SLURM_CONF and the rest. */
static void test_sbatch_env_has_no_slurm_inputs(void **state)
{
	struct launch_args a = args_for(spec_path, NULL, 0);
	struct launch_plan p;
	struct launch_job job;
	struct dt_err err = {0}, warn = {0};
	char *text;

	(void)state;
	fake_sbatch("env | grep -E '^(SBATCH_|SLURM_|DTRAIN_UNIT_)' | sort >> \"$(dirname \"$0\")/../sbatch.env\"; echo '4243'");
	setenv("SBATCH_ACCOUNT", "evil", 1);
	setenv("SBATCH_PARTITION", "evil", 1);
	setenv("SLURM_ACCOUNT", "evil", 1);
	setenv("SLURM_CONF", "/nonexistent/slurm.conf", 1);
	setenv("DTRAIN_UNIT_KEPT", "yes", 1);
	assert_int_equal(launch_plan(&a, &p, &err), 0);
	use_fake_dtrain_run(&p);
	assert_int_equal(launch_submit(&p, &job, &warn, &err), 0);
	text = slurp(tmp, "sbatch.env");
	assert_non_null(text);
	assert_string_equal(text, "DTRAIN_UNIT_KEPT=yes\nSLURM_CONF=/nonexistent/slurm.conf\n");
	free(text);
	/* the rule itself */
	assert_true(launch__slurm_input("SBATCH_QOS=x"));
	assert_true(launch__slurm_input("SLURM_JOB_ID=1"));
	assert_false(launch__slurm_input("SLURM_CONF=/etc/slurm/slurm.conf"));
	assert_false(launch__slurm_input("SLURMX=1"));
	assert_false(launch__slurm_input("MY_SBATCH_X=1"));
	unsetenv("SBATCH_ACCOUNT");
	unsetenv("SBATCH_PARTITION");
	unsetenv("SLURM_ACCOUNT");
	unsetenv("SLURM_CONF");
	unsetenv("DTRAIN_UNIT_KEPT");
	launch_job_free(&job);
	launch_plan_free(&p);
}

/* sbatch copies its environment into the job, where bash sources
 * BASH_ENV, imports exported functions (one named `unset` would undo the
 * batch script's unsets) and the loader reads LD_* before the script's
 * first line: sbatch itself runs without BASH_ENV, ENV, BASH_FUNC_* and
 * what the site locks (env_allow letting a name through). */
static void test_sbatch_env_has_no_locked(void **state)
{
	struct launch_args a = args_for(spec_path, NULL, 0);
	struct launch_plan p;
	struct launch_job job;
	struct dt_err err = {0}, warn = {0};
	char locks[600], text[1024], *got;

	(void)state;
	snprintf(locks, sizeof(locks), "%s/site-locks.json", tmp);
	snprintf(text, sizeof(text),
		 "{ \"runs_root\": \"%s\", \"locked\": [\"env.LD_*\", \"env.FOO\"],\n"
		 "  \"env_allow\": [\"LD_OK\"] }\n", runs);
	tu_write_path(locks, text, 0644);
	a.site_path = locks;
	/* its environment as exec gave it, one variable a line */
	fake_sbatch("tr '\\0' '\\n' </proc/$$/environ | grep -E '^(LD_|FOO|BASH_ENV|ENV=|BASH_FUNC_|DTRAIN_UNIT_)' | sort > \"$(dirname \"$0\")/../sbatch-locks.env\"; echo '4244'");
	setenv("LD_X", "shell", 1);
	setenv("LD_OK", "shell", 1);
	setenv("FOO", "shell", 1);
	setenv("BASH_ENV", "/nonexistent/x.sh", 1);
	setenv("ENV", "/nonexistent/x.sh", 1);
	setenv("BASH_FUNC_unset%%", "() { :; }", 1);
	setenv("DTRAIN_UNIT_KEPT", "yes", 1);
	assert_int_equal(launch_plan(&a, &p, &err), 0);
	use_fake_dtrain_run(&p);
	assert_int_equal(launch_submit(&p, &job, &warn, &err), 0);
	got = slurp(tmp, "sbatch-locks.env");
	assert_non_null(got);
	assert_string_equal(got, "DTRAIN_UNIT_KEPT=yes\nLD_OK=shell\n");
	free(got);
	/* the rule itself; Slurm's own are launch__slurm_input's to judge */
	assert_true(launch__env_dropped(NULL, "BASH_FUNC_compgen%%=() { :; }"));
	assert_true(launch__env_dropped(NULL, "ENV=x"));
	assert_false(launch__env_dropped(NULL, "ENVY=x"));
	assert_false(launch__env_dropped(&p.site, "SLURM_CONF=x"));
	assert_false(launch__env_dropped(&p.site, "FOOD=x"));
	assert_true(launch__env_dropped(&p.site, "LD_=x"));
	unsetenv("LD_X");
	unsetenv("LD_OK");
	unsetenv("FOO");
	unsetenv("BASH_ENV");
	unsetenv("ENV");
	unsetenv("BASH_FUNC_unset%%");
	unsetenv("DTRAIN_UNIT_KEPT");
	launch_job_free(&job);
	launch_plan_free(&p);
}

/* --- failures --- */

static void test_sbatch_refusal_leaves_nothing(void **state)
{
	struct launch_args a = args_for(spec_path, NULL, 0);
	struct launch_plan p;
	struct launch_job job;
	struct dt_err err = {0}, warn = {0};
	struct launch_job *jobs;
	size_t n;

	(void)state;
	fake_sbatch("echo 'sbatch: error: invalid partition specified: nosuch' >&2; exit 1");
	assert_int_equal(launch_plan(&a, &p, &err), 0);
	use_fake_dtrain_run(&p);
	assert_int_equal(launch_submit(&p, &job, &warn, &err), -EIO);
	assert_non_null(strstr(err.msg, "sbatch refused the job (exit 1"));
	assert_null(strstr(err.msg, "no Slurm controller")); /* it was reached */
	assert_null(job.id);
	assert_int_equal(count_entries(runs), 0);
	assert_int_equal(launch_registry_load(&jobs, &n, &err), 0);
	assert_int_equal(n, 0);
	launch_plan_free(&p);
}

/* No controller at all (no slurm.conf here): the hint says how to start
 * and reach the local cluster. */
static void test_sbatch_no_controller(void **state)
{
	struct launch_args a = args_for(spec_path, NULL, 0);
	struct launch_plan p;
	struct launch_job job;
	struct dt_err err = {0}, warn = {0};

	(void)state;
	fake_sbatch("echo 'sbatch: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host' >&2; "
		    "echo 'sbatch: error: fetch_config: DNS SRV lookup failed' >&2; "
		    "echo 'sbatch: error: _establish_config_source: failed to fetch config' >&2; "
		    "echo 'sbatch: fatal: Could not establish a configuration source' >&2; exit 1");
	assert_int_equal(launch_plan(&a, &p, &err), 0);
	use_fake_dtrain_run(&p);
	assert_int_equal(launch_submit(&p, &job, &warn, &err), -EIO);
	assert_non_null(strstr(err.msg, "hint: sbatch reached no Slurm controller"));
	assert_non_null(strstr(err.msg, "site/cluster.sh up"));
	assert_int_equal(count_entries(runs), 0);
	launch_plan_free(&p);
}

static void test_sbatch_garbage_output(void **state)
{
	struct launch_args a = args_for(spec_path, NULL, 0);
	struct launch_plan p;
	struct launch_job job;
	struct dt_err err = {0}, warn = {0};

	(void)state;
	fake_sbatch("echo 'Submitted batch job soon'");
	assert_int_equal(launch_plan(&a, &p, &err), 0);
	use_fake_dtrain_run(&p);
	assert_int_equal(launch_submit(&p, &job, &warn, &err), -EPROTO);
	assert_non_null(strstr(err.msg, "unexpected output"));
	/* The job may be queued: its run dir must stay. */
	assert_int_equal(count_entries(runs), 1);
	launch_plan_free(&p);
}

static void test_no_sbatch_on_path(void **state)
{
	struct launch_args a = args_for(spec_path, NULL, 0);
	struct launch_plan p;
	struct launch_job job;
	struct dt_err err = {0}, warn = {0};
	char path[600];
	const char *old = getenv("PATH");
	char *saved = strdup(old);

	(void)state;
	assert_int_equal(launch_plan(&a, &p, &err), 0);
	use_fake_dtrain_run(&p);
	snprintf(path, sizeof(path), "%s/sbatch", fake_bin);
	unlink(path);
	setenv("PATH", fake_bin, 1); /* no real sbatch either */
	assert_int_equal(launch_submit(&p, &job, &warn, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "sbatch: not found on PATH"));
	assert_false(exists(runs));
	launch_plan_free(&p);
	setenv("PATH", saved, 1);
	free(saved);
}

/* --- resume --- */

/* A run of spec a submitted, then completed: Slurm says COMPLETED (a fake
 * squeue, squeue [700] its path) and its metrics.jsonl holds metrics; its
 * run dir into dir [600]. No sbatch logged yet. */
static void completed_run(const struct launch_args *a, const char *metrics, char *dir, char *squeue)
{
	struct launch_plan p;
	struct launch_job job;
	struct dt_err err = {0}, warn = {0};
	char path[700];

	assert_int_equal(launch_plan(a, &p, &err), 0);
	use_fake_dtrain_run(&p);
	assert_int_equal(launch_submit(&p, &job, &warn, &err), 0);
	snprintf(dir, 600, "%s", job.run_dir);
	launch_job_free(&job);
	launch_plan_free(&p);
	snprintf(squeue, 700, "%s/squeue", fake_bin);
	tu_write_path(squeue, "#!/bin/bash\necho 'COMPLETED None'\n", 0755);
	snprintf(path, sizeof(path), "%s/metrics.jsonl", dir);
	tu_write_path(path, metrics, 0644);
	unlink(sbatch_log);
}

/* A resume of a run that completed, with nothing left under the new
 * train.epochs and train.max_steps, is refused before sbatch, saying which
 * key to raise and leaving the run dir as it was; one that raises
 * train.max_steps is submitted. */
static void test_resume_nothing_left(void **state)
{
	struct launch_args a = args_for(spec_path, NULL, 0);
	const char *at_end[] = { "train.max_steps=10" }, *more[] = { "train.epochs=5", "train.max_steps=25" };
	struct launch_plan p;
	struct launch_job job;
	struct dt_err err = {0}, warn = {0};
	char dir[600], path[700], squeue[700];

	(void)state;
	completed_run(&a,
		      "{\"event\":\"start\",\"total_steps\":10,\"steps_per_epoch\":10,\"epochs\":1,\"step\":0}\n"
		      "{\"event\":\"step\",\"step\":10,\"total_steps\":10,\"epoch\":1,\"loss\":0.5}\n"
		      "{\"event\":\"eval\",\"step\":10,\"test_loss\":0.6}\n"
		      "{\"event\":\"end\",\"step\":10,\"seconds\":1.5}\n",
		      dir, squeue);

	a = (struct launch_args){ .cmd = LAUNCH_RESUME, .run_dir = dir, .site_path = site_path };
	assert_int_equal(launch_plan(&a, &p, &err), 0);
	use_fake_dtrain_run(&p);
	assert_int_equal(launch_resume(&p, &job, &warn, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "the run completed at step 10"));
	assert_non_null(strstr(err.msg, "nothing left to do; hint: raise train.epochs, e.g. --set train.epochs=2"));
	launch_plan_free(&p);

	err = (struct dt_err){0};
	a.sets = at_end;
	a.n_sets = 1;
	assert_int_equal(launch_plan(&a, &p, &err), 0);
	use_fake_dtrain_run(&p);
	assert_int_equal(launch_resume(&p, &job, &warn, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "train.max_steps is 10: nothing left to do; hint: raise it, e.g. --set train.max_steps=20"));
	launch_plan_free(&p);
	assert_false(exists(sbatch_log));
	snprintf(path, sizeof(path), "%s/spec-4242.json", dir);
	assert_false(exists(path));

	a.sets = more;
	a.n_sets = 2;
	err = (struct dt_err){0};
	assert_int_equal(launch_plan(&a, &p, &err), 0);
	use_fake_dtrain_run(&p);
	assert_int_equal(launch_resume(&p, &job, &warn, &err), 0);
	assert_true(exists(sbatch_log));
	assert_true(exists(path));
	launch_job_free(&job);
	launch_plan_free(&p);
	unlink(squeue);
}

/* train.epochs 0 (train.max_steps alone bounds the run, as a spec that
 * sets max_steps without epochs resolves): a completed run of 10 steps
 * resumed with max_steps 25 has 15 steps left, and is submitted */
static void test_resume_max_steps_alone(void **state)
{
	const char *sets[] = { "train.epochs=0", "train.max_steps=10" };
	const char *more[] = { "train.max_steps=25" };
	struct launch_args a = args_for(spec_path, sets, 2);
	struct launch_plan p;
	struct launch_job job;
	struct dt_err err = {0}, warn = {0};
	char dir[600], squeue[700];

	(void)state;
	completed_run(&a,
		      "{\"event\":\"start\",\"total_steps\":10,\"steps_per_epoch\":4,\"epochs\":0,\"step\":0}\n"
		      "{\"event\":\"step\",\"step\":10,\"total_steps\":10,\"epoch\":3,\"loss\":0.5}\n"
		      "{\"event\":\"end\",\"step\":10,\"seconds\":1.5}\n",
		      dir, squeue);

	a = (struct launch_args){ .cmd = LAUNCH_RESUME, .run_dir = dir, .site_path = site_path,
				  .sets = more, .n_sets = 1 };
	err = (struct dt_err){0};
	assert_int_equal(launch_plan(&a, &p, &err), 0);
	assert_int_equal(p.spec.train.epochs, 0);
	use_fake_dtrain_run(&p);
	assert_int_equal(launch_resume(&p, &job, &warn, &err), 0);
	assert_true(exists(sbatch_log));
	launch_job_free(&job);
	launch_plan_free(&p);
	unlink(squeue);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_plan_creates_nothing, reset),
		cmocka_unit_test_setup(test_plan_invalid_spec, reset),
		cmocka_unit_test_setup(test_plan_run_dir_taken, reset),
		cmocka_unit_test_setup(test_submit_creates_run_dir, reset),
		cmocka_unit_test_setup(test_submit_takes_next_name_on_race, reset),
		cmocka_unit_test_setup(test_sbatch_env_has_no_slurm_inputs, reset),
		cmocka_unit_test_setup(test_sbatch_env_has_no_locked, reset),
		cmocka_unit_test_setup(test_sbatch_refusal_leaves_nothing, reset),
		cmocka_unit_test_setup(test_sbatch_no_controller, reset),
		cmocka_unit_test_setup(test_sbatch_garbage_output, reset),
		cmocka_unit_test_setup(test_no_sbatch_on_path, reset),
		cmocka_unit_test_setup(test_resume_nothing_left, reset),
		cmocka_unit_test_setup(test_resume_max_steps_alone, reset),
	};

	return cmocka_run_group_tests(tests, group_setup, tu_teardown);
}
