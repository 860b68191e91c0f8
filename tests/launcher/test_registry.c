/*
 * test_registry.c - the per-user job registry, JOB argument resolution,
 * Slurm state queries and run dir naming of dtrain-submit.
 *
 * XDG_STATE_HOME and HOME point into a scratch dir; PATH starts with a dir
 * of fake squeue/scontrol scripts whose answers each test writes.
 *
 * Sections: fixtures, registry, JOB resolution, job state, run dir names.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher/cli.h"
#include "tests/testutil.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/heartbeat.h"
#include "base/io.h"

/* --- fixtures --- */

static char tmp[256];
static char state_dir[512];
static char fake_bin[512];

/* Install a fake Slurm client program: a bash script body. */
static void fake(const char *name, const char *body)
{
	char path[600], text[2048];

	snprintf(path, sizeof(path), "%s/%s", fake_bin, name);
	snprintf(text, sizeof(text), "#!/bin/bash\n%s\n", body);
	tu_write_path(path, text, 0755);
}

static void no_fake(const char *name)
{
	char path[600];

	snprintf(path, sizeof(path), "%s/%s", fake_bin, name);
	unlink(path);
}

static int group_setup(void **state)
{
	char path[700];

	(void)state;
	snprintf(tmp, sizeof(tmp), "%s", tu_scratch());
	snprintf(state_dir, sizeof(state_dir), "%s/state", tmp);
	snprintf(fake_bin, sizeof(fake_bin), "%s/bin", tmp);
	if (mkdir(fake_bin, 0755))
		return -1;
	/* Only the fakes: a real squeue must never answer these tests. */
	snprintf(path, sizeof(path), "%s", fake_bin);
	setenv("PATH", path, 1);
	setenv("XDG_STATE_HOME", state_dir, 1);
	setenv("HOME", tmp, 1);
	return 0;
}

/* Each test starts with an empty registry and no fakes. */
static int reset(void **state)
{
	(void)state;
	dt_remove_tree(state_dir);
	no_fake("squeue");
	no_fake("scontrol");
	setenv("XDG_STATE_HOME", state_dir, 1);
	setenv("SLURM_CONF", "/clusters/a/slurm.conf", 1);
	return 0;
}

static void append(const char *id, const char *name, const char *run_dir)
{
	struct launch_job j = { .id = (char *)id, .name = (char *)name,
				.run_dir = (char *)run_dir, .submitted = "2024-05-01T12:00:00Z" };
	struct dt_err err = {0};

	assert_int_equal(launch_registry_append(&j, &err), 0);
}

static char *registry_text(void)
{
	char path[700], *text = NULL;

	snprintf(path, sizeof(path), "%s/dtrain/jobs.tsv", state_dir);
	if (dt_read_file(path, &text, NULL))
		return NULL;
	return text;
}

/* --- registry --- */

static void test_registry_path(void **state)
{
	struct dt_err err = {0};
	char want[700], *path;

	(void)state;
	assert_int_equal(launch_registry_path(&path, &err), 0);
	snprintf(want, sizeof(want), "%s/dtrain/jobs.tsv", state_dir);
	assert_string_equal(path, want);
	free(path);
	/* Unset or relative XDG_STATE_HOME: $HOME/.local/state (XDG spec). */
	setenv("XDG_STATE_HOME", "relative/dir", 1);
	assert_int_equal(launch_registry_path(&path, &err), 0);
	snprintf(want, sizeof(want), "%s/.local/state/dtrain/jobs.tsv", tmp);
	assert_string_equal(path, want);
	free(path);
	unsetenv("XDG_STATE_HOME");
	assert_int_equal(launch_registry_path(&path, &err), 0);
	assert_string_equal(path, want);
	free(path);
}

static void test_registry_append_and_load(void **state)
{
	struct launch_job *jobs;
	struct dt_err err = {0};
	struct stat st;
	char path[700], *text;
	size_t n;

	(void)state;
	/* No file yet: no jobs, no error. */
	assert_int_equal(launch_registry_load(&jobs, &n, &err), 0);
	assert_int_equal(n, 0);
	assert_null(jobs);

	append("100", "alpha", "/runs/alpha-1");
	append("101", "beta", "/runs/beta-1");
	append("102", "alpha", "/runs/alpha-2");
	text = registry_text();
	assert_non_null(text);
	assert_string_equal(text,
		"# dtrain-jobs v1\tjob_id\tname\trun_dir\tsubmitted\tcluster\n"
		"100\talpha\t/runs/alpha-1\t2024-05-01T12:00:00Z\t/clusters/a/slurm.conf\n"
		"101\tbeta\t/runs/beta-1\t2024-05-01T12:00:00Z\t/clusters/a/slurm.conf\n"
		"102\talpha\t/runs/alpha-2\t2024-05-01T12:00:00Z\t/clusters/a/slurm.conf\n");
	free(text);
	snprintf(path, sizeof(path), "%s/dtrain/jobs.tsv", state_dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);

	assert_int_equal(launch_registry_load(&jobs, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_string_equal(jobs[0].id, "100");
	assert_string_equal(jobs[1].name, "beta");
	assert_string_equal(jobs[2].run_dir, "/runs/alpha-2");
	assert_string_equal(jobs[2].submitted, "2024-05-01T12:00:00Z");
	assert_string_equal(jobs[2].log_path, "/runs/alpha-2/slurm-102.out");
	launch_jobs_free(jobs, n);
}

static void test_registry_refuses_bad_fields(void **state)
{
	struct launch_job j = { .id = "12", .name = "a\tb", .run_dir = "/r" };
	struct launch_job k = { .id = "12x", .name = "a", .run_dir = "/r" };
	struct launch_job l = { .id = "12", .name = "a", .run_dir = "/r\n13\tevil\t/x\t-" };
	struct dt_err err = {0};

	(void)state;
	assert_int_equal(launch_registry_append(&j, &err), -EINVAL);
	assert_int_equal(launch_registry_append(&k, &err), -EINVAL);
	assert_int_equal(launch_registry_append(&l, &err), -EINVAL);
	assert_null(registry_text());
}

static void test_registry_skips_torn_lines(void **state)
{
	struct launch_job *jobs;
	struct dt_err err = {0};
	char path[700];
	size_t n;
	FILE *f;

	(void)state;
	append("100", "alpha", "/runs/alpha-1");
	snprintf(path, sizeof(path), "%s/dtrain/jobs.tsv", state_dir);
	f = fopen(path, "a");
	assert_non_null(f);
	fputs("garbage\n101\tcut-short\n# a comment\n", f);
	fclose(f);
	append("102", "gamma", "/runs/gamma-1");
	assert_int_equal(launch_registry_load(&jobs, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(jobs[0].id, "100");
	assert_string_equal(jobs[1].id, "102");
	launch_jobs_free(jobs, n);
}

static void test_registry_other_version(void **state)
{
	struct launch_job *jobs;
	struct dt_err err = {0};
	char dir[700], path[800];
	size_t n;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/dtrain", state_dir);
	assert_int_equal(dt_mkdirs(dir, 0700), 0);
	snprintf(path, sizeof(path), "%s/jobs.tsv", dir);
	tu_write_path(path, "# dtrain-jobs v9\n1\ta\t/r\t-\n", 0600);
	assert_int_equal(launch_registry_load(&jobs, &n, &err), -EPROTO);
	assert_non_null(strstr(err.msg, "not a dtrain job registry of version 1"));
}

/* Two clusters' job 1 are two jobs: each cluster sees its own (and the
 * lines written before the cluster was recorded). */
static void test_clusters_kept_apart(void **state)
{
	struct launch_job *jobs, j;
	struct dt_err err = {0};
	char path[700];
	size_t n, elsewhere;
	FILE *f;

	(void)state;
	append("1", "alpha", "/runs/alpha-1");
	setenv("SLURM_CONF", "/clusters/b/slurm.conf", 1);
	append("1", "beta", "/runs/beta-1");
	snprintf(path, sizeof(path), "%s/dtrain/jobs.tsv", state_dir);
	f = fopen(path, "a");
	assert_non_null(f);
	fputs("7\told\t/runs/old-1\t2024-01-01T00:00:00Z\n", f); /* an older version's line */
	fclose(f);

	assert_int_equal(launch_resolve_job("1", &j, &err), 0);
	assert_string_equal(j.name, "beta");
	launch_job_free(&j);
	assert_int_equal(launch_resolve_job("alpha", &j, &err), -ENOENT);
	assert_int_equal(launch_resolve_job("old", &j, &err), 0);
	launch_job_free(&j);
	assert_int_equal(launch_registry_load(&jobs, &n, &err), 0);
	assert_int_equal(n, 3);
	launch_jobs_here(jobs, &n, &elsewhere);
	assert_int_equal(n, 2);
	assert_int_equal(elsewhere, 1);
	assert_string_equal(jobs[0].name, "beta");
	assert_string_equal(jobs[0].cluster, "/clusters/b/slurm.conf");
	assert_null(jobs[1].cluster);
	launch_jobs_free(jobs, n);

	setenv("SLURM_CONF", "/clusters/a/slurm.conf", 1);
	dt_err_clear(&err);
	assert_int_equal(launch_resolve_job("1", &j, &err), 0);
	assert_string_equal(j.name, "alpha");
	launch_job_free(&j);
	unsetenv("SLURM_CONF");
	assert_string_equal(launch_cluster(), "default");
}

/* --- JOB resolution --- */

static void test_resolve_by_id_and_name(void **state)
{
	struct launch_job j;
	struct dt_err err = {0};

	(void)state;
	append("100", "alpha", "/runs/alpha-1");
	append("101", "beta", "/runs/beta-1");
	append("102", "alpha", "/runs/alpha-2");

	assert_int_equal(launch_resolve_job("101", &j, &err), 0);
	assert_string_equal(j.id, "101");
	assert_string_equal(j.name, "beta");
	assert_string_equal(j.run_dir, "/runs/beta-1");
	assert_string_equal(j.log_path, "/runs/beta-1/slurm-101.out");
	launch_job_free(&j);

	/* A name means its most recent job. */
	assert_int_equal(launch_resolve_job("alpha", &j, &err), 0);
	assert_string_equal(j.id, "102");
	assert_string_equal(j.run_dir, "/runs/alpha-2");
	launch_job_free(&j);

	assert_int_equal(launch_resolve_job("100", &j, &err), 0);
	assert_string_equal(j.run_dir, "/runs/alpha-1");
	launch_job_free(&j);
}

static void test_resolve_errors(void **state)
{
	struct launch_job j;
	struct dt_err err = {0};

	(void)state;
	append("100", "alpha", "/runs/alpha-1");

	assert_int_equal(launch_resolve_job("nope", &j, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "\"nope\": no job of that name in "));
	assert_non_null(strstr(err.msg, "/dtrain/jobs.tsv"));
	assert_null(j.id);

	/* Digits that are neither in the registry nor known to Slurm. */
	dt_err_clear(&err);
	fake("scontrol", "echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1");
	assert_int_equal(launch_resolve_job("999", &j, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "job 999: not in "));
	assert_non_null(strstr(err.msg, "unknown to Slurm"));

	/* No scontrol at all: still a clean error naming the job. */
	dt_err_clear(&err);
	no_fake("scontrol");
	assert_int_equal(launch_resolve_job("999", &j, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "job 999"));
	assert_non_null(strstr(err.msg, "scontrol not found"));

	dt_err_clear(&err);
	assert_int_equal(launch_resolve_job("", &j, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "JOB: empty"));

	/* "12abc" is a name, not an id. */
	dt_err_clear(&err);
	assert_int_equal(launch_resolve_job("12abc", &j, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "\"12abc\": no job of that name"));
}

static void test_resolve_from_slurm(void **state)
{
	struct launch_job j;
	struct dt_err err = {0};

	(void)state;
	fake("scontrol",
	     "[ \"$1 $2 $3\" = 'show job 777' ] || exit 1\n"
	     "echo 'JobId=777 JobName=handmade'\n"
	     "echo '   JobState=RUNNING Reason=None Dependency=(null)'\n"
	     "echo '   WorkDir=/home/u/runs/handmade-1'\n"
	     "echo '   StdErr=/home/u/runs/handmade-1/out-777.txt'\n"
	     "echo '   StdOut=/home/u/runs/handmade-1/out-777.txt'");
	assert_int_equal(launch_resolve_job("777", &j, &err), 0);
	assert_string_equal(j.id, "777");
	assert_string_equal(j.name, "handmade");
	assert_string_equal(j.run_dir, "/home/u/runs/handmade-1");
	assert_string_equal(j.log_path, "/home/u/runs/handmade-1/out-777.txt");
	assert_null(j.submitted);
	launch_job_free(&j);
}

/* --- job state --- */

static void test_job_state(void **state)
{
	struct launch_slurm sl = {0};
	struct launch_state st;
	char text[80];
	double t0;

	(void)state;
	fake("squeue", "[ \"$*\" = '-h -j 5 -o %T %r' ] || exit 1; echo 'RUNNING None'");
	launch_job_state(&sl, "5", &st);
	assert_string_equal(st.name, "RUNNING");
	assert_string_equal(st.reason, "");

	/* a held job says so; the usual wait (Priority) is not worth a word */
	fake("squeue", "echo 'PENDING JobHeldUser'");
	launch_job_state(&sl, "5", &st);
	assert_string_equal(launch_state_text(&st, text, sizeof(text)), "PENDING (JobHeldUser)");
	fake("squeue", "echo 'PENDING Priority'");
	launch_job_state(&sl, "5", &st);
	assert_string_equal(launch_state_text(&st, text, sizeof(text)), "PENDING");

	/* squeue forgot the job: scontrol still knows it. */
	fake("squeue", "echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1");
	fake("scontrol", "echo 'JobId=5 JobName=x'; echo '   JobState=COMPLETED Reason=None'");
	launch_job_state(&sl, "5", &st);
	assert_string_equal(st.name, "COMPLETED");

	/* Neither knows it, or neither exists: ENDED. */
	fake("scontrol", "exit 1");
	launch_job_state(&sl, "5", &st);
	assert_string_equal(st.name, "ENDED");
	no_fake("squeue");
	no_fake("scontrol");
	launch_job_state(&sl, "5", &st);
	assert_string_equal(st.name, "ENDED");
	assert_false(sl.unreachable);

	/* slurmctld down: UNKNOWN, not ENDED, and scontrol is not asked */
	fake("squeue", "echo 'slurm_load_jobs error: Unable to contact slurm controller (connect failure)' >&2; exit 1");
	fake("scontrol", "echo 'JobId=5'; echo '   JobState=COMPLETED'");
	launch_job_state(&sl, "5", &st);
	assert_string_equal(st.name, "UNKNOWN");
	assert_true(sl.unreachable);
	assert_non_null(strstr(sl.why, "Unable to contact slurm controller"));
	assert_string_equal(launch_state_text(&st, text, sizeof(text)), "unknown (Slurm unreachable)");

	/* a client that hangs is cut off after LAUNCH_SLURM_WAIT_S; the next
	 * query of the same command does not wait again */
	memset(&sl, 0, sizeof(sl));
	fake("squeue", "exec /bin/sleep 60");
	t0 = dt_mono_s();
	launch_job_state(&sl, "5", &st);
	assert_string_equal(st.name, "UNKNOWN");
	assert_true(sl.unreachable);
	assert_true(dt_mono_s() - t0 < LAUNCH_SLURM_WAIT_S + 2);
	t0 = dt_mono_s();
	launch_job_state(&sl, "6", &st);
	assert_string_equal(st.name, "UNKNOWN");
	assert_true(dt_mono_s() - t0 < 0.5);
	/* one that closes its output first and then hangs is cut off too */
	memset(&sl, 0, sizeof(sl));
	fake("squeue", "exec >&- 2>&-; exec /bin/sleep 60");
	t0 = dt_mono_s();
	launch_job_state(&sl, "5", &st);
	assert_string_equal(st.name, "UNKNOWN");
	assert_true(dt_mono_s() - t0 < LAUNCH_SLURM_WAIT_S + 2);
	no_fake("squeue");
	no_fake("scontrol");

	assert_true(launch_state_active("PENDING"));
	assert_true(launch_state_active("RUNNING"));
	assert_true(launch_state_active("COMPLETING"));
	assert_true(launch_state_active("UNKNOWN"));
	assert_false(launch_state_active("COMPLETED"));
	assert_false(launch_state_active("CANCELLED"));
	assert_false(launch_state_active("ENDED"));
}

/* --- run dir names --- */

/* stdout of fn(arg) into a string (the caller frees) */
static char *captured(int (*fn)(const struct launch_args *, struct dt_err *), const char *job,
		      const char *name)
{
	struct launch_args a = { .cmd = LAUNCH_STATUS, .job = job };
	struct dt_err err = {0};
	char path[700], *out;
	int saved, fd;

	snprintf(path, sizeof(path), "%s/%s.out", tmp, name);
	fflush(stdout);
	saved = dup(STDOUT_FILENO);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(saved >= 0 && fd >= 0);
	dup2(fd, STDOUT_FILENO);
	close(fd);
	assert_int_equal(fn(&a, &err), 0);
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	out = tu_read(path, NULL);
	assert_non_null(out);
	return out;
}

/* What `status JOB` prints for a running job whose ranks started and
 * have not reached their first step: run_dir with rank 0's heartbeat of
 * this start (step 0) and, when trained, a metrics.jsonl with a step of an
 * earlier start. */
static char *status_before_first_step(const char *id, bool trained)
{
	char run_dir[700], path[800], line[DT_HEARTBEAT_BYTES + 1];
	double now = dt_wall_s();
	struct dt_heartbeat h = { .rank = 0, .world = 1, .pid = 4242, .start = now - 3, .step = 0,
				  .stepped = now - 3, .phase = DT_PHASE_STEP, .since = now - 3, .at = now,
				  .bound = 900 };

	snprintf(run_dir, sizeof(run_dir), "%s/run-%s", tmp, id);
	snprintf(h.node, sizeof(h.node), "n1");
	assert_int_equal(dt_heartbeat_format(&h, line, sizeof(line)), 0);
	snprintf(path, sizeof(path), "%s/heartbeat", run_dir);
	assert_int_equal(dt_mkdirs(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/heartbeat/rank-0", run_dir);
	tu_write_path(path, line, 0644);
	if (trained) {
		snprintf(path, sizeof(path), "%s/metrics.jsonl", run_dir);
		tu_write_path(path,
			      "{\"event\":\"start\",\"total_steps\":900,\"steps_per_epoch\":90,\"epochs\":10}\n"
			      "{\"event\":\"step\",\"step\":300,\"total_steps\":900,\"epoch\":4,\"loss\":0.6,"
			      "\"lr\":0.05,\"grad_norm\":1.3,\"samples_per_s\":11000,\"eta_s\":500}\n",
			      0644);
	}
	append(id, "resumed", run_dir);
	fake("squeue", "echo 'RUNNING None'");
	snprintf(path, sizeof(path), "status-%s", id);
	return captured(launch_cmd_status, id, path);
}

/* Before the first step of a start, LAST STEP says "starting", or
 * "restarting" for a job that trained before (a resume after a crash or a
 * requeue), not "starting" again. */
static void test_status_restarting(void **state)
{
	char *out;

	(void)state;
	out = status_before_first_step("61", true);
	assert_non_null(strstr(out, "state:         RUNNING\n"));
	assert_non_null(strstr(out, "progress:      step 300/900, epoch 4/10"));
	assert_non_null(strstr(out, "last step:     none yet in this start: restarting (for "));
	free(out);
	out = status_before_first_step("62", false);
	assert_non_null(strstr(out, "last step:     none yet in this start: starting (for "));
	free(out);
}

/* status JOB of a failed job prints <run dir>/failure with what a
 * terminal would act on shown as \xNN: the escape sequences, a C1 CSI and
 * a stray byte; printable UTF-8 as it is. */
static void test_status_escapes(void **state)
{
	char run_dir[700], path[800], *out;

	(void)state;
	snprintf(run_dir, sizeof(run_dir), "%s/run-71", tmp);
	assert_int_equal(dt_mkdirs(run_dir, 0755), 0);
	snprintf(path, sizeof(path), "%s/failure", run_dir);
	tu_write_path(path, "exit 1 at 1714564800: data.train: \x1b]0;owned\x07" "caf\xc3\xa9 \x1b[2J"
			    "\xc2\x9b" "31m \xff\tend\nsecond \x1b[31mline\n", 0644);
	append("71", "esc\x1b[1mname", run_dir);
	fake("squeue", "echo 'FAILED None'");
	out = captured(launch_cmd_status, "71", "status-71");
	assert_null(strchr(out, '\x1b'));
	assert_null(strstr(out, "\xc2\x9b"));
	assert_null(strchr(out, '\xff'));
	assert_non_null(strstr(out, "failure:       data.train: \\x1b]0;owned\\x07caf\xc3\xa9 \\x1b[2J"
				    "\\xc2\\x9b31m \\xff\\x09end\n"));
	assert_non_null(strstr(out, "               second \\x1b[31mline\n"));
	assert_non_null(strstr(out, "name:          esc\\x1b[1mname\n"));
	free(out);
}

/* --- sweeps --- */


/* Sweep 4 of three tasks (lr 0.1, 0.01, 0.001): task 0 running, task 1
 * resumed as job 9 and running, task 2 done; tasks 0 and 1 logged steps
 * (10 and 20, an evaluation each), task 2 none. Its dir. */
static const char *write_sweep(void)
{
	static char dir[600];
	char path[700];
	long k;

	snprintf(dir, sizeof(dir), "%s/sweep-4", tmp);
	dt_remove_tree(dir);
	for (k = 0; k < 3; k++) {
		snprintf(path, sizeof(path), "%s/task-%ld", dir, k);
		assert_int_equal(dt_mkdirs(path, 0755), 0);
		snprintf(path, sizeof(path), "%s/task-%ld/job_id", dir, k);
		tu_write_path(path, k == 1 ? "9\n" : k == 0 ? "4_0\n" : "4_2\n", 0644);
	}
	snprintf(path, sizeof(path), "%s/sweep.json", dir);
	tu_write_path(path, "{ \"name\": \"lrs\", \"keys\": [\"train.optimizer.lr\"], \"seeds\": 0, \"max_parallel\": 0,\n"
			    "  \"tasks\": [ { \"task\": 0, \"values\": [\"0.1\"] }, { \"task\": 1, \"values\": [\"0.01\"] },\n"
			    "             { \"task\": 2, \"values\": [\"0.001\"] } ] }\n", 0644);
	for (k = 0; k < 2; k++) {
		snprintf(path, sizeof(path), "%s/task-%ld/metrics.jsonl", dir, k);
		tu_write_path(path, k == 0 ?
			      "{\"event\":\"start\",\"total_steps\":20,\"step\":0}\n"
			      "{\"event\":\"step\",\"step\":10,\"total_steps\":20,\"loss\":3.5,\"unix_time\":1000}\n"
			      "{\"event\":\"eval\",\"step\":10,\"test_loss\":3.6,\"unix_time\":1000.5}\n" :
			      "{\"event\":\"start\",\"total_steps\":20,\"step\":0}\n"
			      "{\"event\":\"step\",\"step\":10,\"total_steps\":20,\"loss\":3,\"unix_time\":2000}\n"
			      "{\"event\":\"step\",\"step\":20,\"total_steps\":20,\"loss\":2,\"unix_time\":2001}\n"
			      "{\"event\":\"eval\",\"step\":20,\"test_loss\":2.5,\"unix_time\":2001.5}\n", 0644);
	}
	append("4", "lrs", dir);
	fake("squeue", "case \"$3\" in 4_0|9) echo 'RUNNING None' ;; 4_2) echo 'COMPLETED None' ;; *) echo 'PENDING None' ;; esac");
	return dir;
}

/* status SWEEP labels a resumed task by its array label (and its new
 * job); all jobs' status says the tasks' states in the sweep's row. */
static void test_sweep_status(void **state)
{
	char *out;

	(void)state;
	write_sweep();
	out = captured(launch_cmd_status, "4", "sweep-one");
	assert_non_null(strstr(out, "\nTASK         STATE      lr "));
	assert_non_null(strstr(out, "\n4_1 (job 9)  RUNNING    0.01   20/20 "));
	assert_non_null(strstr(out, "\n4_0          RUNNING    0.1    10/20 "));
	assert_non_null(strstr(out, "\n4_2          COMPLETED  0.001  - "));
	assert_null(strstr(out, "\n9  "));
	free(out);
	out = captured(launch_cmd_status, NULL, "sweep-all");
	assert_non_null(strstr(out, "4      lrs   2 running, 1 done  -"));
	free(out);
}

/* report SWEEP: one page with the table and every task's curves on shared
 * axes, a series per task that logged steps */
static void test_sweep_report(void **state)
{
	char path[700], *page, *out;

	(void)state;
	snprintf(path, sizeof(path), "%s/report.html", write_sweep());
	out = captured(launch_cmd_report, "4", "sweep-report");
	assert_non_null(strstr(out, path));
	free(out);
	page = tu_read(path, NULL);
	assert_non_null(page);
	assert_non_null(strstr(page, "<h1>sweep lrs</h1>"));
	assert_non_null(strstr(page, "<th>TASK</th><th>STATE</th><th>lr</th>"));
	assert_non_null(strstr(page, "<td>4_1 (job 9)</td><td>RUNNING</td><td>0.01</td>"));
	assert_non_null(strstr(page, "<svg class=\"chart\" id=\"chart-loss-step\""));
	assert_non_null(strstr(page, "data-series=\"0\" data-points=\"1\""));
	assert_non_null(strstr(page, "data-series=\"1\" data-points=\"2\""));
	assert_null(strstr(page, "data-series=\"2\""));
	assert_non_null(strstr(page, "<title>task 1 at step 20: 2</title>"));
	assert_non_null(strstr(page, "<title>task 0 at step 10: 3.6</title>"));
	assert_non_null(strstr(page, "<title>task 1 at s 1: 2</title>"));
	free(page);
}

static void test_pick_run_dir(void **state)
{
	struct dt_err err = {0};
	char root[600], want[800], *dir;
	time_t now = 1714564800; /* a fixed instant; the name uses local time */
	struct tm tm;
	char stamp[32];

	(void)state;
	localtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	snprintf(root, sizeof(root), "%s/runs", tmp);
	/* The root need not exist yet (submit creates it). */
	assert_int_equal(launch_pick_run_dir(root, "demo", now, &dir, &err), 0);
	snprintf(want, sizeof(want), "%s/demo-%s", root, stamp);
	assert_string_equal(dir, want);
	assert_int_equal(dt_mkdirs(dir, 0755), 0);
	free(dir);

	assert_int_equal(launch_pick_run_dir(root, "demo", now, &dir, &err), 0);
	snprintf(want, sizeof(want), "%s/demo-%s-2", root, stamp);
	assert_string_equal(dir, want);
	assert_int_equal(dt_mkdirs(dir, 0755), 0);
	free(dir);

	assert_int_equal(launch_pick_run_dir(root, "demo", now, &dir, &err), 0);
	snprintf(want, sizeof(want), "%s/demo-%s-3", root, stamp);
	assert_string_equal(dir, want);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_registry_path, reset),
		cmocka_unit_test_setup(test_registry_append_and_load, reset),
		cmocka_unit_test_setup(test_registry_refuses_bad_fields, reset),
		cmocka_unit_test_setup(test_registry_skips_torn_lines, reset),
		cmocka_unit_test_setup(test_registry_other_version, reset),
		cmocka_unit_test_setup(test_clusters_kept_apart, reset),
		cmocka_unit_test_setup(test_resolve_by_id_and_name, reset),
		cmocka_unit_test_setup(test_resolve_errors, reset),
		cmocka_unit_test_setup(test_resolve_from_slurm, reset),
		cmocka_unit_test_setup(test_job_state, reset),
		cmocka_unit_test_setup(test_pick_run_dir, reset),
		cmocka_unit_test_setup(test_status_restarting, reset),
		cmocka_unit_test_setup(test_status_escapes, reset),
		cmocka_unit_test_setup(test_sweep_status, reset),
		cmocka_unit_test_setup(test_sweep_report, reset),
	};

	return cmocka_run_group_tests(tests, group_setup, tu_teardown);
}
