/*
 * test_render.c - the batch script of dtrain-submit (launch_render_script).
 *
 * Specs and sites are built by hand, so these tests do not depend on the
 * resolver. Beyond looking at the text, the script is checked with bash -n
 * and then run: with a fake srun and scontrol first on PATH and a fake
 * dtrain-run, in a scratch directory, to prove that hostile values come out
 * as literal data and that the requeue branch does what it says.
 *
 * Sections: fixtures, #SBATCH lines, refusals, running the script, requeue.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launcher/launch.h"
#include "tests/testutil.h"
#include "base/err.h"
#include "base/buf.h"
#include "base/io.h"

/* --- fixtures --- */

static char tmp[256];       /* scratch dir of the test program */
static char fake_bin[512];  /* fake srun, scontrol */
static char run_dir_ok[512];
static char fake_run[768];  /* fake dtrain-run, in a dir with a hostile name */

/* A hand-built spec: every pointer is static or a literal (never freed). */
static char *setup_none[1];
static struct spec base_spec(void)
{
	struct spec s = {0};

	s.name = "demo";
	s.resources.nodes = (struct spec_range){ 2, 2 };
	s.resources.tasks_per_node = 4;
	s.resources.cpus_per_task = 1;
	s.resources.gpus_per_node = 0;
	s.resources.time_s = 0;
	s.preemption.signal = "USR1";
	s.preemption.lead_seconds = 120;
	s.preemption.max_requeues = 3;
	s.setup.v = setup_none;
	return s;
}

static int group_setup(void **state)
{
	char path[600], dir[600];

	(void)state;
	snprintf(tmp, sizeof(tmp), "%s", tu_scratch());
	snprintf(fake_bin, sizeof(fake_bin), "%s/bin", tmp);
	snprintf(run_dir_ok, sizeof(run_dir_ok), "%s/run", tmp);
	if (mkdir(fake_bin, 0755))
		return -1;
	/* The dir of dtrain-run has a name no unquoted shell word survives. */
	snprintf(dir, sizeof(dir), "%s/fake run 'dir' $x `y`", tmp);
	if (mkdir(dir, 0755))
		return -1;
	snprintf(fake_run, sizeof(fake_run), "%s/dtrain-run", dir);

	/* srun: record the argv (NUL-separated), skip its options, run the rest. */
	snprintf(path, sizeof(path), "%s/srun", fake_bin);
	{
		char text[4096];

		snprintf(text, sizeof(text),
			 "#!/bin/bash\n"
			 "for a in \"$@\"; do printf '%%s\\0' \"$a\" >> '%s/srun.args'; done\n"
			 "if [ \"${FAKE_LOST:-0}\" = 1 ] && [[ \" $* \" == *' --mpi=none '* ]]; then\n"
			 "  echo 'srun: error: Task launch for StepId=42.1 failed on node n2: Communication connection failure' >&2; exit 1\n"
			 "fi\n"
			 "if [ -n \"${FAKE_LOST_NODE:-}\" ] && [[ \" $* \" == *\" --nodelist=$FAKE_LOST_NODE \"* ]]; then\n"
			 "  echo \"srun: error: Task launch for StepId=42.1 failed on node $FAKE_LOST_NODE: Communication connection failure\" >&2; exit 1\n"
			 "fi\n"
			 "while [ $# -gt 0 ]; do case $1 in -*) shift;; *) break;; esac; done\n"
			 "if [ \"${FAKE_HANG:-0}\" = 1 ]; then\n"
			 "  \"$@\"; echo \"srun: error: n1: tasks 0-1: Exited with exit code $?\" >&2\n"
			 "  echo $$ > '%s/srun.pid'; exec sleep 300\n"
			 "fi\n"
			 "exec \"$@\"\n", tmp, tmp);
		tu_write_path(path, text, 0755);
		/* squeue: the job's end time, in the format asked for */
		snprintf(path, sizeof(path), "%s/squeue", fake_bin);
		tu_write_path(path,
			      "#!/bin/bash\n"
			      "if [ \"${SLURM_TIME_FORMAT:-}\" = %s ]; then echo 2000000000; else echo 2033-05-18T03:33:20; fi\n",
			      0755);
		snprintf(path, sizeof(path), "%s/scontrol", fake_bin);
		/* scontrol: logs what it is asked to do, not its queries: the
		 * node lists it expands (FAKE_NODES: the allocation's), the job
		 * (its excluded nodes: FAKE_EXC) */
		snprintf(text, sizeof(text),
			 "#!/bin/bash\n"
			 "if [ \"$1 $2\" = 'show hostnames' ]; then\n"
			 "  case ${3:-} in '' | *'['*) printf '%%s\\n' ${FAKE_NODES:-} ;; *) tr , '\\n' <<<\"$3\" ;; esac; exit 0\n"
			 "fi\n"
			 "if [ \"$1 $2\" = 'show job' ]; then echo \"JobId=42 ExcNodeList=${FAKE_EXC:-(null)} Features=(null)\"; exit 0; fi\n"
			 "if [ \"$1\" = requeue ] && [ \"${FAKE_REQUEUE_FAIL:-0}\" = 1 ]; then echo 'scontrol: error: refused' >&2; exit 1; fi\n"
			 "printf '%%s\\n' \"$*\" >> '%s/scontrol.log'\n"
			 "if [ \"$1\" = requeue ]; then : > '%s/requeue.done'; fi\n"
			 "if [ \"$*\" = 'show config' ]; then echo 'KillWait                = 0 sec'; fi\nexit 0\n", tmp, tmp);
		tu_write_path(path, text, 0755);
		/* mv: once the job is requeued, Slurm's SIGTERM reaches every
		 * process of the job: a program started after it is killed */
		snprintf(path, sizeof(path), "%s/mv", fake_bin);
		snprintf(text, sizeof(text),
			 "#!/bin/bash\n"
			 "if [ -e '%s/requeue.done' ]; then kill -TERM $$; fi\n"
			 "exec /bin/mv \"$@\"\n", tmp);
		tu_write_path(path, text, 0755);
		/* date: once a step has run with FAKE_PLANT_LOGS, a rank's link
		 * planted at events.jsonl and srun.err at the worst moment: a
		 * date the script runs right after checking them (an event's
		 * time, the start's) */
		snprintf(path, sizeof(path), "%s/date", fake_bin);
		tu_write_path(path, "#!/bin/bash\n"
			      "if [ -n \"${FAKE_PLANT_LOGS:-}\" ] && [ -e \"$FAKE_PLANT_LOGS/.armed\" ]; then\n"
			      "  for f in events.jsonl srun.err; do ln -sfn \"$FAKE_PLANT_LOGS/$f\" \"$DTRAIN_RUN_DIR/$f\"; done\n"
			      "fi\n"
			      "exec /bin/date \"$@\"\n", 0755);
		/* sinfo: the nodes of the partition (FAKE_PARTITION_NODES) */
		snprintf(path, sizeof(path), "%s/sinfo", fake_bin);
		tu_write_path(path, "#!/bin/bash\n"
			      "if [ \"$2\" = -n ]; then if [ \"$3\" = \"${FAKE_DOWN:-}\" ]; then echo 'down*'; else echo idle; fi; exit 0; fi\n"
			      "printf '%s\\n' ${FAKE_PARTITION_NODES:-}\n", 0755);
		/* dtrain-run: record argv and environment, maybe SIGTERM the
		 * batch shell (as a preemption would), exit $FAKE_RC. */
		snprintf(text, sizeof(text),
			 "#!/bin/bash\n"
			 "for a in \"$@\"; do printf '%%s\\0' \"$a\" >> '%s/run.args'; done\n"
			 "env -0 > '%s/run.env'\n"
			 "n=$(cat '%s/runs' 2>/dev/null || echo 0); echo $((n + 1)) > '%s/runs'\n"
			 "[ \"$n\" -lt 8 ] || exit 0 # a restart loop that does not stop ends here\n"
			 "if [ -n \"${FAKE_PLANT:-}\" ]; then mkdir -p \"$DTRAIN_RUN_DIR/recovery\"; ln -sfn \"$FAKE_PLANT\" \"$DTRAIN_RUN_DIR/recovery/crashes\"; fi\n"
			 "if [ -n \"${FAKE_PLANT_LOGS:-}\" ]; then : > \"$FAKE_PLANT_LOGS/.armed\"; fi\n"
			 "if [ -n \"${FAKE_FAIL:-}\" ]; then echo \"exit 1 at $(($(date +%%s) - ${FAKE_FAIL_AGO:-0})): rank 0: $FAKE_FAIL\" > \"$DTRAIN_RUN_DIR/failure\"; fi\n"
			 /* the shell's trap counts the stop and writes its term
			  * event: wait for that event (at most 30 s), not a time */
			 "terms() { local n; n=$(grep -c '\"event\":\"term\"' \"$DTRAIN_RUN_DIR/events.jsonl\" 2>/dev/null); echo \"${n:-0}\"; }\n"
			 "if [ \"${FAKE_TERM:-0}\" != 0 ]; then\n"
			 "  t0=$(terms); kill -TERM \"$FAKE_SHELL\"\n"
			 "  for i in $(seq 600); do [ \"$(terms)\" -gt \"$t0\" ] && break; sleep 0.05; done\n"
			 "fi\n"
			 "if [ \"${FAKE_TERM:-0}\" = 2 ]; then kill -KILL \"$FAKE_SHELL\"; fi\n"
			 "if [ -n \"${FAKE_SAY:-}\" ]; then echo \"$FAKE_SAY\" >&2; fi\n"
			 "exit \"${FAKE_RC:-0}\"\n", tmp, tmp, tmp, tmp);
		tu_write_path(fake_run, text, 0755);
	}
	return 0;
}

/* Remove what a previous run of the script left in tmp. */
static void reset_outputs(void)
{
	const char *names[] = { "srun.args", "scontrol.log", "run.args", "run.env", "job.sh",
				"order", "script.err", "srun.pid", "runs", "requeue.done" };
	char path[600];
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", tmp, names[i]);
		unlink(path);
	}
	dt_remove_tree(run_dir_ok); /* the recovery counters */
	assert_int_equal(dt_mkdirs(run_dir_ok, 0755), 0);
}

/* Sets the batch script's recovery counter `name` in run_dir_ok. */
static void set_counter(const char *name, int n)
{
	char path[700], text[32];

	snprintf(path, sizeof(path), "%s/recovery", run_dir_ok);
	assert_int_equal(dt_mkdirs(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/recovery/%s", run_dir_ok, name);
	snprintf(text, sizeof(text), "%d\n", n);
	tu_write_path(path, text, 0644);
}

/* The counter `name` the script left, or -1 when absent. */
static int counter(const char *name)
{
	char path[700], *text;
	int n;

	snprintf(path, sizeof(path), "%s/recovery/%s", run_dir_ok, name);
	text = tu_read(path, NULL);
	if (!text)
		return -1;
	n = atoi(text);
	free(text);
	return n;
}

/* How many times the script ran srun. */
static int srun_runs(void)
{
	char path[600], *text, *p;
	size_t len;
	int n = 0;

	snprintf(path, sizeof(path), "%s/srun.args", tmp);
	text = tu_read(path, &len);
	if (!text)
		return 0;
	for (p = text; p < text + len; p += strlen(p) + 1)
		n += !strcmp(p, "--mpi=pmix");
	free(text);
	return n;
}

static int render(const struct spec *s, const struct site *site, const char *run_dir,
		  struct dt_buf *out, struct dt_err *err)
{
	dt_err_clear(err);
	return launch_render_script(s, site, run_dir, fake_run, out, err);
}

/* Write the script to tmp/job.sh, run it with bash in tmp with a clean
 * environment; returns its exit status. */
/* What the fake dtrain-run prints on stderr (NULL: nothing); the script's
 * stderr is in tmp/script.err. fake_lost: the fake srun fails the batch
 * script's probe of the nodes (--mpi=none), as with a node gone. */
static const char *fake_say;
static const char *fake_nodes = "";      /* the allocation's nodes (scontrol show hostnames) */
static const char *fake_lost_node = "";  /* the node whose probe fails */
static const char *fake_partition = "";  /* the partition's nodes (sinfo) */
static const char *fake_down = "";       /* the node sinfo says is down */
static const char *fake_exc = "";        /* the job's excluded nodes before the script's */
static bool fake_requeue_fail;           /* scontrol requeue fails */
static bool fake_lost;
static bool fake_hang; /* srun reports a rank ended, then waits on (a lost node's) */
static const char *fake_plant = ""; /* dtrain-run links recovery/crashes to it */
static const char *fake_fail = "";  /* dtrain-run writes it to <run dir>/failure */
static const char *fake_fail_ago = "0"; /* ... dated this many seconds ago (another node's clock) */
static const char *fake_ckpt_dir;   /* requeue_case's spec's checkpoint.dir */
static const char *fake_plant_logs = ""; /* after a step, date links events.jsonl, srun.err into it */
static const char *shell_env[4];    /* the submitting shell's, NAME=value */

static int run_script(const char *script, const char *restarts, const char *fake_rc,
		      const char *fake_term)
{
	char path[600], env_path[700], env_rc[64], env_restart[64], env_term[64], env_home[300];
	char env_say[512], err_path[600], env_nodes[128], env_lost_node[128], env_partition[128];
	char env_down[128], env_exc[128], env_plant[600], env_fail[800], env_fail_ago[64];
	char env_plant_logs[700];
	pid_t pid;
	int st;

	snprintf(path, sizeof(path), "%s/job.sh", tmp);
	tu_write_path(path, script, 0755);
	snprintf(env_path, sizeof(env_path), "PATH=%s:/usr/bin:/bin", fake_bin);
	snprintf(env_rc, sizeof(env_rc), "FAKE_RC=%s", fake_rc);
	snprintf(env_restart, sizeof(env_restart), "SLURM_RESTART_COUNT=%s", restarts);
	snprintf(env_term, sizeof(env_term), "FAKE_TERM=%s", fake_term);
	snprintf(env_home, sizeof(env_home), "HOME=%s", tmp);
	snprintf(env_say, sizeof(env_say), "FAKE_SAY=%s", fake_say ? fake_say : "");
	snprintf(err_path, sizeof(err_path), "%s/script.err", tmp);
	snprintf(env_nodes, sizeof(env_nodes), "FAKE_NODES=%s", fake_nodes);
	snprintf(env_lost_node, sizeof(env_lost_node), "FAKE_LOST_NODE=%s", fake_lost_node);
	snprintf(env_partition, sizeof(env_partition), "FAKE_PARTITION_NODES=%s", fake_partition);
	snprintf(env_down, sizeof(env_down), "FAKE_DOWN=%s", fake_down);
	snprintf(env_exc, sizeof(env_exc), "FAKE_EXC=%s", fake_exc);
	snprintf(env_plant, sizeof(env_plant), "FAKE_PLANT=%s", fake_plant);
	snprintf(env_fail, sizeof(env_fail), "FAKE_FAIL=%s", fake_fail);
	snprintf(env_fail_ago, sizeof(env_fail_ago), "FAKE_FAIL_AGO=%s", fake_fail_ago);
	snprintf(env_plant_logs, sizeof(env_plant_logs), "FAKE_PLANT_LOGS=%s", fake_plant_logs);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *argv[] = { "bash", path, NULL };
		char *envp[] = { env_path, env_rc, env_restart, env_term, env_home,
				 "SLURM_JOB_ID=42", "DTRAIN_STOP_AT=1", env_say,
				 fake_lost ? "FAKE_LOST=1" : "FAKE_LOST=0",
				 fake_hang ? "FAKE_HANG=1" : "FAKE_HANG=0", env_nodes, env_lost_node,
				 env_partition, env_down, env_exc,
				 fake_requeue_fail ? "FAKE_REQUEUE_FAIL=1" : "FAKE_REQUEUE_FAIL=0",
				 env_plant, env_fail, env_fail_ago, env_plant_logs, "X_=0", "X_=0", "X_=0", "X_=0", NULL, NULL };
		int fd = open(err_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
		char env_shell[64];
		size_t i;

		for (i = 0; i < 4; i++) /* the slots after env_fail */
			if (shell_env[i])
				envp[sizeof(envp) / sizeof(envp[0]) - 6 + i] = (char *)shell_env[i];

		/* the batch shell, which a preemption's SIGTERM reaches */
		snprintf(env_shell, sizeof(env_shell), "FAKE_SHELL=%d", (int)getpid());
		envp[sizeof(envp) / sizeof(envp[0]) - 2] = env_shell;

		if (fd >= 0)
			dup2(fd, STDERR_FILENO);
		if (chdir(tmp) == 0)
			execve("/bin/bash", argv, envp);
		_exit(126);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* The i-th NUL-separated string of a file written by the fakes. */
static char *nth_word(const char *file, int i)
{
	char path[600], *text, *p, *end, *word = NULL;
	size_t len;

	snprintf(path, sizeof(path), "%s/%s", tmp, file);
	text = tu_read(path, &len);
	if (!text)
		return NULL;
	for (p = text, end = text + len; p < end; p += strlen(p) + 1, i--) {
		if (i == 0) {
			word = strdup(p);
			break;
		}
	}
	free(text);
	return word;
}

/* The value of NAME in the environment dtrain-run saw. */
static char *env_of(const char *name)
{
	char path[600], *text, *p, *end, *val = NULL;
	size_t len, n = strlen(name);

	snprintf(path, sizeof(path), "%s/run.env", tmp);
	text = tu_read(path, &len);
	if (!text)
		return NULL;
	for (p = text, end = text + len; p < end; p += strlen(p) + 1) {
		if (!strncmp(p, name, n) && p[n] == '=') {
			val = strdup(p + n + 1);
			break;
		}
	}
	free(text);
	return val;
}

static void assert_env(const char *name, const char *want)
{
	char *got = env_of(name);

	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

static void assert_word(const char *file, int i, const char *want)
{
	char *got = nth_word(file, i);

	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

/* Nothing but the files the fakes write may appear in tmp. */
static void assert_no_stray_files(void)
{
	static const char *allowed[] = { "bin", "run.args", "run.env", "srun.args",
					 "scontrol.log", "job.sh", "order", "run", "script.err", "runs" };
	struct dirent *de;
	DIR *d = opendir(tmp);

	assert_non_null(d);
	while ((de = readdir(d)) != NULL) {
		size_t i;
		bool ok = de->d_name[0] == '.' || !strncmp(de->d_name, "fake run", 8);

		for (i = 0; !ok && i < sizeof(allowed) / sizeof(allowed[0]); i++)
			ok = !strcmp(de->d_name, allowed[i]);
		if (!ok)
			fprintf(stderr, "stray file in %s: \"%s\"\n", tmp, de->d_name);
		assert_true(ok);
	}
	closedir(d);
}

static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	const char *p = text;

	while ((p = strstr(p, line)) != NULL) {
		if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
			return true;
		p += n;
	}
	return false;
}

/* --- #SBATCH lines --- */

static void test_sbatch_all(void **state)
{
	static char *extra[] = { "--exclusive", "--mail-type=END" };
	struct spec s = base_spec();
	struct site site = {0};
	struct dt_buf out = {0};
	struct dt_err err = {0};

	(void)state;
	s.resources.gpus_per_node = 2;
	s.resources.mem_per_node_mb = 4096;
	s.resources.time_s = 90 * 60;
	s.resources.partition = "low";
	s.resources.account = "proj-1";
	s.resources.qos = "normal";
	s.resources.constraint = "a100&ib";
	s.resources.dependency = "afterok:12_3,afterany:14";
	site.sbatch_extra = (struct spec_strs){ extra, 2 };
	assert_int_equal(render(&s, &site, "/runs/demo-1", &out, &err), 0);
	assert_true(!strncmp(out.p, "#!/bin/bash\n", 12));
	assert_true(has_line(out.p, "#SBATCH --job-name=demo"));
	assert_true(has_line(out.p, "#SBATCH --nodes=2"));
	assert_true(has_line(out.p, "#SBATCH --ntasks-per-node=4"));
	assert_true(has_line(out.p, "#SBATCH --cpus-per-task=1"));
	assert_true(has_line(out.p, "#SBATCH --gpus-per-node=2"));
	assert_true(has_line(out.p, "#SBATCH --mem=4096M"));
	assert_true(has_line(out.p, "#SBATCH --time=01:30:00"));
	assert_true(has_line(out.p, "#SBATCH --partition=low"));
	assert_true(has_line(out.p, "#SBATCH --account=proj-1"));
	assert_true(has_line(out.p, "#SBATCH --qos=normal"));
	assert_true(has_line(out.p, "#SBATCH --constraint=a100&ib"));
	assert_true(has_line(out.p, "#SBATCH --dependency=afterok:12_3,afterany:14"));
	assert_true(has_line(out.p, "#SBATCH --kill-on-invalid-dep=yes"));
	assert_true(has_line(out.p, "#SBATCH --chdir=/runs/demo-1"));
	assert_true(has_line(out.p, "#SBATCH --output=/runs/demo-1/slurm-%j.out"));
	assert_true(has_line(out.p, "#SBATCH --open-mode=append"));
	assert_true(has_line(out.p, "#SBATCH --requeue"));
	assert_true(has_line(out.p, "#SBATCH --signal=USR1@120"));
	assert_true(has_line(out.p, "#SBATCH --exclusive"));
	assert_true(has_line(out.p, "#SBATCH --mail-type=END"));
	/* sbatch stops reading options at the first command: all come first. */
	assert_true(strstr(out.p, "#SBATCH --mail-type=END") < strstr(out.p, "set -u"));
	/* srun no longer inherits it from sbatch (Slurm 22.05) */
	assert_non_null(strstr(out.p, "srun --mpi=pmix --kill-on-bad-exit=1 --cpus-per-task=1 "));
	assert_int_equal(launch_check_syntax(out.p, &err), 0);
	dt_buf_free(&out);
}

static void test_sbatch_optional_absent(void **state)
{
	struct spec s = base_spec();
	struct dt_buf out = {0};
	struct dt_err err = {0};

	(void)state;
	s.preemption.signal = NULL;
	assert_int_equal(render(&s, NULL, "/runs/demo-1", &out, &err), 0);
	assert_null(strstr(out.p, "#SBATCH --gpus-per-node"));
	assert_null(strstr(out.p, "#SBATCH --mem="));
	assert_null(strstr(out.p, "#SBATCH --time="));
	assert_null(strstr(out.p, "#SBATCH --partition"));
	assert_null(strstr(out.p, "#SBATCH --account"));
	assert_null(strstr(out.p, "#SBATCH --qos"));
	assert_null(strstr(out.p, "#SBATCH --constraint"));
	assert_null(strstr(out.p, "#SBATCH --dependency"));
	assert_null(strstr(out.p, "#SBATCH --kill-on-invalid-dep"));
	assert_null(strstr(out.p, "#SBATCH --signal"));
	assert_true(has_line(out.p, "#SBATCH --requeue"));
	assert_int_equal(launch_check_syntax(out.p, &err), 0);
	dt_buf_free(&out);
}

/* An elastic range: sbatch gets the range and the CPUs per node (a task
 * count would hold the next starts to the last one's nodes), srun the
 * tasks of the nodes granted; --time-min; the start's layout follows the
 * nodes. */
static void test_sbatch_elastic(void **state)
{
	struct spec s = base_spec();
	struct dt_buf out = {0};
	struct dt_err err = {0};

	(void)state;
	s.resources.nodes = (struct spec_range){ 1, 4 };
	s.resources.cpus_per_task = 2;
	s.resources.time_min_s = 600;
	s.parallel.data = SPEC_AUTO;
	s.parallel.pipeline = 2;
	assert_int_equal(render(&s, NULL, "/runs/demo-1", &out, &err), 0);
	assert_true(has_line(out.p, "#SBATCH --nodes=1-4"));
	assert_true(has_line(out.p, "#SBATCH --mincpus=8"));
	assert_true(has_line(out.p, "#SBATCH --time-min=00:10:00"));
	assert_null(strstr(out.p, "#SBATCH --ntasks-per-node"));
	assert_null(strstr(out.p, "#SBATCH --cpus-per-task"));
	assert_non_null(strstr(out.p, "srun --mpi=pmix --kill-on-bad-exit=1 --cpus-per-task=2 --nodes=\"${SLURM_JOB_NUM_NODES:-1}\" --ntasks-per-node=4 --ntasks=$((10#${SLURM_JOB_NUM_NODES:-1} * 4))"));
	assert_true(has_line(out.p, "dtrain_layout() { echo \"$((10#${SLURM_JOB_NUM_NODES:-1} * 4 / 2))x2\"; }"));
	assert_int_equal(launch_check_syntax(out.p, &err), 0);
	dt_buf_free(&out);
}

/* --- refusals --- */

static void expect_refused(const struct spec *s, const struct site *site, const char *run_dir,
			   const char *needle)
{
	struct dt_buf out = {0};
	struct dt_err err = {0};

	assert_int_equal(render(s, site, run_dir, &out, &err), -EINVAL);
	if (!strstr(err.msg, needle))
		fprintf(stderr, "error report lacks \"%s\"; it reads:\n%s\n", needle, err.msg);
	assert_non_null(strstr(err.msg, needle));
	assert_null(out.p); /* nothing rendered on failure */
}

static void test_sbatch_refusals(void **state)
{
	static const char *hostile[] = {
		"low\n#SBATCH --uid=0", "a b", "a'b", "a\"b", "a$b", "a`b`", "a;b", "a\\b", "",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
		struct spec s = base_spec();

		s.resources.partition = (char *)hostile[i];
		expect_refused(&s, NULL, "/runs/x", "resources.partition: cannot go into an #SBATCH line");
		s = base_spec();
		s.resources.account = (char *)hostile[i];
		expect_refused(&s, NULL, "/runs/x", "resources.account: cannot go into an #SBATCH line");
		s = base_spec();
		s.resources.qos = (char *)hostile[i];
		expect_refused(&s, NULL, "/runs/x", "resources.qos: cannot go into an #SBATCH line");
		s = base_spec();
		s.resources.constraint = (char *)hostile[i];
		expect_refused(&s, NULL, "/runs/x", "resources.constraint: cannot go into an #SBATCH line");
		s = base_spec();
		s.name = (char *)hostile[i];
		expect_refused(&s, NULL, "/runs/x", "name: cannot go into an #SBATCH line");
		s = base_spec();
		s.preemption.signal = (char *)hostile[i];
		expect_refused(&s, NULL, "/runs/x", "preemption.signal: cannot go into an #SBATCH line");
	}
	{
		struct spec s = base_spec();

		expect_refused(&s, NULL, "/runs/$(touch x)", "run_dir: cannot go into an #SBATCH line: contains '$'");
		expect_refused(&s, NULL, "/runs/a\nb", "run_dir: cannot go into an #SBATCH line: contains a line break");
		expect_refused(&s, NULL, "/runs/a b", "run_dir: cannot go into an #SBATCH line: contains a space");
		expect_refused(&s, NULL, "/runs/x;y", "run_dir: cannot go into an #SBATCH line: contains ';'");
		expect_refused(&s, NULL, "runs/x", "run_dir: must be an absolute path");
		expect_refused(&s, NULL, "/runs/x%j", "run_dir: contains '%'");
	}
}

static void test_site_sbatch_extra_refused(void **state)
{
	static char *bad_space[] = { "--mail-user me@x" };
	static char *bad_dash[] = { "exclusive" };
	static char *bad_nl[] = { "--exclusive\nrm -rf /" };
	struct spec s = base_spec();
	struct site site = { .path = "/etc/dtrain/site.json" };

	(void)state;
	site.sbatch_extra = (struct spec_strs){ bad_space, 1 };
	expect_refused(&s, &site, "/runs/x", "/etc/dtrain/site.json: sbatch_extra[0]: cannot go into an #SBATCH line: contains a space");
	site.sbatch_extra = (struct spec_strs){ bad_dash, 1 };
	expect_refused(&s, &site, "/runs/x", "sbatch_extra[0]: an #SBATCH option starts with '-'");
	site.sbatch_extra = (struct spec_strs){ bad_nl, 1 };
	expect_refused(&s, &site, "/runs/x", "sbatch_extra[0]: cannot go into an #SBATCH line: contains a line break");
}

static void test_every_problem_reported(void **state)
{
	static char *keys[] = { "A-B", "1X", "dtrain_rc", "DTRAIN_RUN_DIR", "UID", "OK_1" };
	static char *vals[] = { "v", "v", "v", "v", "v", "v" };
	struct spec s = base_spec();
	struct dt_buf out = {0};
	struct dt_err err = {0};

	(void)state;
	s.env = (struct spec_map){ keys, vals, 6 };
	s.resources.partition = "a b";
	assert_int_equal(render(&s, NULL, "/runs/x y", &out, &err), -EINVAL);
	assert_int_equal(err.count, 7);
	assert_non_null(strstr(err.msg, "env: \"A-B\": a variable name must match [A-Za-z_][A-Za-z0-9_]*"));
	assert_non_null(strstr(err.msg, "env: \"1X\""));
	assert_non_null(strstr(err.msg, "env: \"dtrain_rc\": names starting with dtrain_ belong to the batch script"));
	assert_non_null(strstr(err.msg, "env: \"DTRAIN_RUN_DIR\""));
	assert_non_null(strstr(err.msg, "env: \"UID\""));
	assert_null(strstr(err.msg, "OK_1"));
	assert_non_null(strstr(err.msg, "resources.partition:"));
	assert_non_null(strstr(err.msg, "run_dir:"));
	assert_null(out.p);
}

/* --- running the script --- */

static void test_hostile_values_stay_data(void **state)
{
	static char *keys[] = { "SUBST", "BACKTICK", "QUOTE", "NEWLINE", "DQUOTE", "MIXED",
				"EMPTY", "SHARED" };
	static char *vals[] = {
		"$(touch pwned1)",
		"`touch pwned2`",
		"'; touch pwned3 #",
		"line1\nline2; touch pwned4\n",
		"\"; touch pwned5; \"",
		"back\\slash \\' $HOME ${PATH} %s %n * ? [a] ~ & | > < ( ) { } !x #",
		"",
		"from-the-spec",
	};
	static char *site_keys[] = { "SITE_SUBST", "SHARED" };
	static char *site_vals[] = { "$(touch pwned6)'\"", "from-the-site" };
	static char *srun_extra[] = { "--comment=$(touch pwned7)", "--x='; touch pwned8 #" };
	char run_dir[700], spec_json[800], *script;
	struct spec s = base_spec();
	struct site site = {0};
	struct dt_buf out = {0};
	struct dt_err err = {0};
	size_t i;

	(void)state;
	reset_outputs();
	/* Shell syntax that #SBATCH lines do not care about, but an unquoted
	 * shell word would act on: a pipe, redirections, globs, a subshell. */
	snprintf(run_dir, sizeof(run_dir), "%s/run|tee>pwned9&(x)!#~{a,b}*?[z]<y", tmp);
	snprintf(spec_json, sizeof(spec_json), "%s/spec.json", run_dir);
	s.env = (struct spec_map){ keys, vals, sizeof(keys) / sizeof(keys[0]) };
	site.env = (struct spec_map){ site_keys, site_vals, 2 };
	site.srun_extra = (struct spec_strs){ srun_extra, 2 };
	assert_int_equal(render(&s, &site, run_dir, &out, &err), 0);
	script = out.p;
	assert_int_equal(launch_check_syntax(script, &err), 0);
	assert_int_equal(run_script(script, "0", "0", "0"), 0);

	/* bash -n on the written file too, as the brief of the script says. */
	{
		char cmd[700];

		snprintf(cmd, sizeof(cmd), "bash -n '%s/job.sh'", tmp);
		assert_int_equal(system(cmd), 0);
	}
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (strcmp(keys[i], "SHARED"))
			assert_env(keys[i], vals[i]);
	assert_env("SITE_SUBST", site_vals[0]);
	assert_env("SHARED", "from-the-site"); /* the site wins */
	assert_env("DTRAIN_RUN_DIR", run_dir);
	/* the first start relies on Slurm's warning; the submitting shell's
	 * DTRAIN_STOP_AT does not get through */
	assert_null(env_of("DTRAIN_STOP_AT"));
	/* srun got exactly: --mpi=pmix, --kill-on-bad-exit, --cpus-per-task, the site's extras,
	 * dtrain-run, spec.json. */
	assert_word("srun.args", 0, "--mpi=pmix");
	assert_word("srun.args", 1, "--kill-on-bad-exit=1");
	assert_word("srun.args", 2, "--cpus-per-task=1");
	assert_word("srun.args", 3, srun_extra[0]);
	assert_word("srun.args", 4, srun_extra[1]);
	assert_word("srun.args", 5, fake_run);
	assert_word("srun.args", 6, spec_json);
	assert_null(nth_word("srun.args", 7));
	assert_word("run.args", 0, spec_json);
	assert_null(nth_word("run.args", 1));
	assert_no_stray_files();
	dt_buf_free(&out);
}

static void test_setup_lines_run_in_order(void **state)
{
	static char *site_setup[] = { "echo site >> order", "X_FROM_SETUP=$(echo yes)" };
	static char *job_setup[] = { "echo job >> order",
				     "if [ \"$X_FROM_SETUP\" = yes ]; then echo seen >> order; fi",
				     "echo \"$UNSET_VARIABLE_IS_FINE\" >> order" };
	struct spec s = base_spec();
	struct site site = {0};
	struct dt_buf out = {0};
	struct dt_err err = {0};
	char path[600], *text;

	(void)state;
	reset_outputs();
	s.setup = (struct spec_strs){ job_setup, 3 };
	site.setup = (struct spec_strs){ site_setup, 2 };
	assert_int_equal(render(&s, &site, run_dir_ok, &out, &err), 0);
	assert_int_equal(run_script(out.p, "0", "0", "0"), 0);
	snprintf(path, sizeof(path), "%s/order", tmp);
	text = tu_read(path, NULL);
	assert_non_null(text);
	assert_string_equal(text, "site\njob\nseen\n\n");
	free(text);
	dt_buf_free(&out);
}

/* The environment dtrain-run saw lacks NAME. */
static void assert_no_env(const char *name)
{
	char *got = env_of(name);

	if (got)
		fail_msg("%s reached the job step (\"%s\")", name, got);
}

/* sbatch copies the submitting shell's environment into the job: a
 * variable the site locks (a name, a pattern; env_allow undoing a pattern
 * for a name) comes only from the site, never from that shell. */
static void test_locked_env_not_from_the_shell(void **state)
{
	static char *locked[] = { "env.LD_*", "env.NCCL_*", "env.FOO", "resources.account" };
	static char *locked_all[] = { "env.*" };
	static char *allow[] = { "NCCL_DEBUG" };
	static char *site_keys[] = { "NCCL_IB_HCA" }, *site_vals[] = { "mlx5_0" };
	struct spec s = base_spec();
	struct site site = {0};
	struct dt_buf out = {0};
	struct dt_err err = {0};

	(void)state;
	reset_outputs();
	site.locked = (struct spec_strs){ locked, 4 };
	site.env_allow = (struct spec_strs){ allow, 1 };
	site.env = (struct spec_map){ site_keys, site_vals, 1 };
	shell_env[0] = "LD_DTRAIN_TEST=shell";
	shell_env[1] = "NCCL_IB_HCA=shell";
	shell_env[2] = "NCCL_DEBUG=shell";
	shell_env[3] = "FOO=shell";
	assert_int_equal(render(&s, &site, run_dir_ok, &out, &err), 0);
	assert_int_equal(run_script(out.p, "0", "0", "0"), 0);
	assert_no_env("LD_DTRAIN_TEST");
	assert_no_env("FOO");
	assert_env("NCCL_IB_HCA", "mlx5_0"); /* the site's */
	assert_env("NCCL_DEBUG", "shell");   /* env_allow */
	assert_env("HOME", tmp);
	dt_buf_free(&out);
	/* env.*: every variable but a login's own and Slurm's */
	reset_outputs();
	site.locked = (struct spec_strs){ locked_all, 1 };
	shell_env[0] = "BAR=shell";
	assert_int_equal(render(&s, &site, run_dir_ok, &out, &err), 0);
	assert_int_equal(run_script(out.p, "0", "0", "0"), 0);
	assert_no_env("BAR");
	assert_no_env("FOO");
	assert_env("NCCL_IB_HCA", "mlx5_0");
	assert_env("NCCL_DEBUG", "shell");
	assert_env("HOME", tmp);
	assert_env("SLURM_JOB_ID", "42");
	assert_env("DTRAIN_RUN_DIR", run_dir_ok);
	memset(shell_env, 0, sizeof(shell_env));
	dt_buf_free(&out);
}

/* A setup line cannot undo the site's environment: the site's exports
 * come again after the setup lines (and before them, so that the lines
 * see them); what a setup line exports that the site does not set stays. */
static void test_setup_cannot_override_site_env(void **state)
{
	static char *site_keys[] = { "NCCL_IB_HCA" }, *site_vals[] = { "mlx5_0" };
	static char *job_setup[] = { "echo \"$NCCL_IB_HCA\" >> order", "export NCCL_IB_HCA=evil",
				     "export OWN_SETTING=kept" };
	struct spec s = base_spec();
	struct site site = {0};
	struct dt_buf out = {0};
	struct dt_err err = {0};
	char path[600], *text;

	(void)state;
	reset_outputs();
	s.setup = (struct spec_strs){ job_setup, 3 };
	site.env = (struct spec_map){ site_keys, site_vals, 1 };
	assert_int_equal(render(&s, &site, run_dir_ok, &out, &err), 0);
	assert_int_equal(run_script(out.p, "0", "0", "0"), 0);
	assert_env("NCCL_IB_HCA", "mlx5_0");
	assert_env("OWN_SETTING", "kept");
	snprintf(path, sizeof(path), "%s/order", tmp);
	text = tu_read(path, NULL);
	assert_non_null(text);
	assert_string_equal(text, "mlx5_0\n");
	free(text);
	dt_buf_free(&out);
}

static void test_setup_syntax_error(void **state)
{
	static char *job_setup[] = { "echo fine", "echo )" };
	struct spec s = base_spec();
	struct dt_buf out = {0};
	struct dt_err err = {0};

	(void)state;
	s.setup = (struct spec_strs){ job_setup, 2 };
	assert_int_equal(render(&s, NULL, run_dir_ok, &out, &err), 0);
	assert_int_equal(launch_check_syntax(out.p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "batch script: the line is: echo )"));
	assert_non_null(strstr(err.msg, "hint: only `setup` lines"));
	dt_buf_free(&out);
}

/* --- requeue --- */

static char *scontrol_log(void)
{
	char path[600];

	snprintf(path, sizeof(path), "%s/scontrol.log", tmp);
	return tu_read(path, NULL);
}

/* The script of base_spec() with recovery's defaults, run on what the run
 * dir holds now (after reset_outputs() and the caller's files), with
 * Slurm's restart count and dtrain-run's exit code; checks its exit and
 * what it asked scontrol. */
static void requeue_case_keep(const char *restarts, const char *rc, int want_exit,
			      const char *want_scontrol)
{
	struct spec s = base_spec();
	struct dt_buf out = {0};
	struct dt_err err = {0};
	char *log;

	s.preemption.max_requeues = 3;
	s.recovery.max_crashes = 3;
	s.recovery.max_node_failures = 3;
	s.recovery.max_excluded_nodes = 2;
	assert_int_equal(render(&s, NULL, run_dir_ok, &out, &err), 0);
	assert_int_equal(run_script(out.p, restarts, rc, "0"), want_exit);
	log = scontrol_log();
	assert_non_null(log);
	assert_string_equal(log, want_scontrol);
	free(log);
	dt_buf_free(&out);
}

/* The script of a spec with preemption.max_requeues 3 and recovery's
 * defaults (3 crashes, 3 node failures), run with Slurm's restart count,
 * dtrain-run's exit code and maybe a SIGTERM; requeued and stopped: the
 * script's own requeues and the stops it saw so far. */
static void requeue_case(const char *restarts, int requeued, int stopped, const char *rc,
			 const char *term, int want_exit, const char *want_scontrol)
{
	struct spec s = base_spec();
	struct dt_buf out = {0};
	struct dt_err err = {0};
	char *log;

	reset_outputs();
	s.preemption.max_requeues = 3;
	s.recovery.max_crashes = 3;
	s.recovery.max_node_failures = 3;
	s.recovery.max_excluded_nodes = 2;
	s.checkpoint.dir = (char *)fake_ckpt_dir;
	if (requeued)
		set_counter("requeued", requeued);
	if (stopped)
		set_counter("stopped", stopped);
	assert_int_equal(render(&s, NULL, run_dir_ok, &out, &err), 0);
	assert_int_equal(run_script(out.p, restarts, rc, term), want_exit);
	log = scontrol_log();
	if (want_scontrol) {
		assert_non_null(log);
		assert_string_equal(log, want_scontrol);
	} else {
		assert_null(log);
	}
	free(log);
	dt_buf_free(&out);
}

static void test_requeue_below_limit(void **state)
{
	(void)state;
	requeue_case("0", 0, 0, "75", "0", 0, "requeue 42\n");
	assert_int_equal(counter("requeued"), 1);
	requeue_case("2", 2, 0, "75", "0", 0, "requeue 42\n");
	assert_int_equal(counter("requeued"), 3);
	/* preemptions do not count against the script's own requeues */
	requeue_case("5", 0, 5, "75", "0", 0, "requeue 42\n");
}

static void test_requeue_at_limit(void **state)
{
	(void)state;
	requeue_case("3", 3, 0, "75", "0", 75, NULL);
	requeue_case("7", 7, 0, "75", "0", 75, NULL);
}

static void test_no_requeue_on_other_exits(void **state)
{
	(void)state;
	requeue_case("0", 0, 0, "0", "0", 0, NULL);
	assert_int_equal(srun_runs(), 1);
	/* usage, spec and divergence errors are not crashes: no second start */
	requeue_case("0", 0, 0, "3", "0", 3, NULL);
	assert_int_equal(srun_runs(), 1);
	requeue_case("0", 0, 0, "4", "0", 4, NULL);
	assert_int_equal(srun_runs(), 1);
	assert_int_equal(counter("crashes"), -1);
}

/* A crash (a rank killed: srun exits 137, or MPI_Abort's 1) starts the step
 * again in the allocation, recovery.max_crashes times in all, counted in
 * the run dir across requeues; then the job fails with the step's code. */
static void test_crash_restarts_the_step(void **state)
{
	(void)state;
	requeue_case("0", 0, 0, "137", "0", 137, NULL);
	assert_int_equal(srun_runs(), 4);
	assert_int_equal(counter("crashes"), 3);
	/* a step started again missed Slurm's time-limit warning: it stops by
	 * itself at the job's end (squeue's) less preemption.lead_seconds */
	assert_env("DTRAIN_STOP_AT", "1999999880");
	reset_outputs();
	requeue_case("1", 0, 0, "1", "0", 1, NULL); /* after a node failure, the same */
	assert_int_equal(srun_runs(), 4);
	/* two crashes in an earlier start of the job: one more restart left */
	reset_outputs();
	set_counter("crashes", 2);
	{
		struct spec s = base_spec();
		struct dt_buf out = {0};
		struct dt_err err = {0};

		s.recovery.max_crashes = 3;
		assert_int_equal(render(&s, NULL, run_dir_ok, &out, &err), 0);
		assert_int_equal(run_script(out.p, "0", "137", "0"), 137);
		assert_int_equal(srun_runs(), 2);
		assert_int_equal(counter("crashes"), 3);
		dt_buf_free(&out);
	}
}

/* A step the watchdog ended (exit 5) is restarted as a crash; the log
 * names the ranks waited for, from the watchdog's line, not the rank that
 * exited first (the watchdog's own). */
static void test_watchdog_exit_restarts_and_names(void **state)
{
	char path[600], *text;
	size_t len;

	(void)state;
	fake_say = "dtrain-run: watchdog: rank 1 on node n1 waited 8.0 s in step 41 (step; bound 8 s); "
		   "waiting for rank 3 on node n2: silent for 7.9 s, last in step 41 (step); ending the job step";
	requeue_case("0", 0, 0, "5", "0", 5, NULL);
	fake_say = NULL;
	assert_int_equal(srun_runs(), 4);
	assert_int_equal(counter("crashes"), 3);
	snprintf(path, sizeof(path), "%s/script.err", tmp);
	text = tu_read(path, &len);
	assert_non_null(text);
	assert_non_null(strstr(text, "dtrain: the job step stopped making progress (exit 5); the watchdog: "
				     "rank 1 on node n1 waited 8.0 s in step 41 (step; bound 8 s); waiting for rank 3 on node n2: silent"));
	assert_null(strstr(text, "first to die"));
	assert_non_null(strstr(text, "restarting from the newest checkpoint (crash 3 of at most 3)"));
	free(text);
}

/* A crash after which no step can start on every node: a node is lost;
 * the job is requeued (Slurm's restart count, not this script's counters,
 * makes it a node failure at the next start), not restarted here. */
static void test_lost_node_requeues(void **state)
{
	char path[600], *text;
	size_t len;

	(void)state;
	fake_lost = true;
	requeue_case("0", 0, 0, "5", "0", 0, "requeue 42\n");
	fake_lost = false;
	assert_int_equal(srun_runs(), 1);
	assert_true(counter("crashes") <= 0); /* -1: no file yet, as good as 0 */
	assert_true(counter("requeued") <= 0);
	snprintf(path, sizeof(path), "%s/script.err", tmp);
	text = tu_read(path, &len);
	assert_non_null(text);
	assert_non_null(strstr(text, "dtrain: a node of the allocation does not answer: no job step could start on all 1 nodes within 20 s "
				     "(srun: error: Task launch for StepId=42.1 failed on node n2: Communication connection failure); "
				     "requeueing job 42 to start again where every node answers (node failure 1 of at most 3, recovery.max_node_failures)"));
	free(text);
	/* the next start is counted a node failure, and not beyond the limit */
	requeue_case("1", 0, 0, "0", "0", 0, NULL);
	assert_int_equal(counter("node_failures"), 1);
	/* a healthy allocation: the probe passes, the step starts again */
	requeue_case("0", 0, 0, "137", "0", 137, NULL);
	assert_int_equal(srun_runs(), 4);
}

/* The script's stderr contains text. */
static void assert_said(const char *text)
{
	char path[600], *err;

	snprintf(path, sizeof(path), "%s/script.err", tmp);
	err = tu_read(path, NULL);
	assert_non_null(err);
	if (!strstr(err, text))
		fail_msg("the batch script did not say \"%s\"; it said:\n%s", text, err);
	free(err);
}

/* recovery/excluded as the script left it ("" when absent). */
static char *excluded(void)
{
	char path[700], *text;

	snprintf(path, sizeof(path), "%s/recovery/excluded", run_dir_ok);
	text = tu_read(path, NULL);
	return text ? text : strdup("");
}

static void fakes_healthy(void)
{
	fake_nodes = fake_lost_node = fake_partition = fake_down = fake_exc = "";
	fake_requeue_fail = false;
	fake_say = NULL;
}

/* The lines of the run dir's events.jsonl that hold text. */
static int events_with(const char *text)
{
	char path[700], *all, *p;
	int n = 0;

	snprintf(path, sizeof(path), "%s/events.jsonl", run_dir_ok);
	all = tu_read(path, NULL);
	for (p = all; p && (p = strstr(p, text)) != NULL; p += strlen(text))
		n++;
	free(all);
	return n;
}

/* How many entries a directory holds (-1: cannot be read). */
static int entries(const char *dir)
{
	struct dirent *de;
	DIR *d = opendir(dir);
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)) != NULL)
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return n;
}

/* A link or a directory planted in the run dir under a name the script
 * writes is refused, never written through or into: before the first start
 * the job stops at once; planted meanwhile, the crash it would count is not
 * restarted. The link's target stays as it was. */
static void test_planted_links_refused(void **state)
{
	struct spec s = base_spec();
	struct dt_buf out = {0};
	struct dt_err err = {0};
	char target[600], path[700];

	(void)state;
	snprintf(target, sizeof(target), "%s/run-elsewhere", tmp);
	assert_int_equal(dt_mkdirs(target, 0755), 0);
	s.recovery.max_crashes = 3;
	assert_int_equal(render(&s, NULL, run_dir_ok, &out, &err), 0);
	reset_outputs();
	snprintf(path, sizeof(path), "%s/recovery", run_dir_ok);
	assert_int_equal(dt_mkdirs(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/recovery/crashes", run_dir_ok);
	assert_int_equal(symlink(target, path), 0);
	assert_int_equal(run_script(out.p, "0", "137", "0"), 1);
	assert_int_equal(srun_runs(), 0);
	assert_said("recovery/crashes is a symbolic link, which dtrain did not make: not written; remove it");
	assert_said("dtrain: job 42 not started: the batch script writes ");
	assert_int_equal(entries(target), 0);
	/* a directory in a file's place */
	reset_outputs();
	snprintf(path, sizeof(path), "%s/recovery/crash_nodes", run_dir_ok);
	assert_int_equal(dt_mkdirs(path, 0755), 0);
	assert_int_equal(run_script(out.p, "0", "137", "0"), 1);
	assert_int_equal(srun_runs(), 0);
	assert_said("recovery/crash_nodes is a directory, which dtrain did not make: not written; remove it");
	/* planted while the step runs: the crash is not restarted */
	reset_outputs();
	fake_plant = target;
	assert_int_equal(run_script(out.p, "0", "137", "0"), 137);
	fake_plant = "";
	assert_int_equal(srun_runs(), 1);
	assert_said("dtrain: not restarted: cannot count crashes in ");
	assert_int_equal(entries(target), 0);
	dt_remove_tree(target);
	dt_buf_free(&out);
}

/* The batch script's own files, events.jsonl and srun.err, replaced by
 * links once the step has run (by a rank), at the worst moment: between
 * the script's check of a file and its write (the fake date plants them).
 * Each start opened them once after its check and writes through those
 * fds, so the links' targets stay empty; the next start finds the links
 * and writes nothing through them. */
static void test_links_planted_mid_run_not_followed(void **state)
{
	struct spec s = base_spec();
	struct dt_buf out = {0};
	struct dt_err err = {0};
	char target[600], path[700];
	struct stat st;

	(void)state;
	snprintf(target, sizeof(target), "%s/logs-elsewhere", tmp);
	assert_int_equal(dt_mkdirs(target, 0755), 0);
	snprintf(path, sizeof(path), "%s/events.jsonl", target);
	tu_write_path(path, "", 0644);
	snprintf(path, sizeof(path), "%s/srun.err", target);
	tu_write_path(path, "", 0644);
	s.recovery.max_crashes = 1;
	assert_int_equal(render(&s, NULL, run_dir_ok, &out, &err), 0);
	reset_outputs();
	fake_plant_logs = target;
	fake_say = "srun: error: n1: task 0: Exited with exit code 1";
	(void)run_script(out.p, "0", "1", "0"); /* crashes: its exit is not the point */
	fake_plant_logs = "";
	fakes_healthy();
	assert_said("dtrain: the job step failed (exit 1)");
	snprintf(path, sizeof(path), "%s/events.jsonl", target);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 0);
	snprintf(path, sizeof(path), "%s/srun.err", target);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 0);
	dt_remove_tree(target);
	dt_buf_free(&out);
}

/* A crash on an error of the run's (dtrain-run's <run dir>/failure, written
 * in this start, says the disk under the run dir or the checkpoint dir is
 * full) is no node's fault: each is counted a crash, once, and the node
 * where it began is never left out. The rank that wrote it may be on a
 * node whose clock is 3 s behind. A failure written before this start
 * blames nothing, as before. */
static void test_run_error_blames_no_node(void **state)
{
	char path[700], fail[800], ckpt[700], *ex;
	int round;

	(void)state;
	snprintf(ckpt, sizeof(ckpt), "%s/ckpt", tmp);
	fake_nodes = "n1 n2";
	fake_partition = "n1 n2 n3";
	fake_say = "srun: error: n1: task 0: Exited with exit code 1";
	fake_fail_ago = "3";
	for (round = 0; round < 2; round++) {
		if (round == 0)
			snprintf(fail, sizeof(fail), "%s/checkpoints/step-00000010: cannot write: No space left on device", run_dir_ok);
		else
			snprintf(fail, sizeof(fail), "%s/step-00000010: cannot write: Disk quota exceeded", ckpt);
		fake_fail = fail;
		fake_ckpt_dir = round ? ckpt : NULL;
		requeue_case("0", 0, 0, "1", "0", 1, NULL);
		assert_int_equal(srun_runs(), 4);
		assert_int_equal(counter("crashes"), 3);
		ex = excluded();
		assert_string_equal(ex, "");
		free(ex);
		assert_int_equal(events_with("\"cause\":\"error\""), 4);
		assert_int_equal(events_with("\"event\":\"node_excluded\""), 0);
	}
	fake_fail = "";
	fake_fail_ago = "0";
	fake_ckpt_dir = NULL;
	assert_said("dtrain: the job step failed (exit 1) on an error of the run's, which no node caused: rank 0: ");
	assert_said("/step-00000010: cannot write: Disk quota exceeded");
	/* an old failure: the crashes are the node's */
	reset_outputs();
	snprintf(path, sizeof(path), "%s/failure", run_dir_ok);
	snprintf(fail, sizeof(fail), "exit 1 at 1000: rank 0: %s/x: No space left on device\n", run_dir_ok);
	tu_write_path(path, fail, 0644);
	requeue_case_keep("0", "1", 0, "requeue 42\nupdate JobId=42 ExcNodeList=n1\n");
	assert_int_equal(events_with("\"cause\":\"crash\""), 2);
	fakes_healthy();
}

/* The same words about a node's own /dev/shm (full) or a device (no
 * permission) are that node's fault: crashes that may blame it, and two
 * that began on n1 leave n1 out (test_two_crashes_leave_a_node_out). */
static void test_node_local_error_is_a_crash(void **state)
{
	static const char *fails[] = { "/dev/shm/dtrain-42/nccl-0: cannot create: No space left on device",
				       "/dev/nvidia0: cannot open: Permission denied" };
	char *ex;
	size_t i;

	(void)state;
	fake_fail_ago = "0"; /* written in this start, on this node's clock */
	fake_ckpt_dir = NULL;
	for (i = 0; i < 2; i++) {
		fake_nodes = "n1 n2";
		fake_partition = "n1 n2 n3";
		fake_say = "srun: error: n1: task 0: Exited with exit code 1";
		fake_fail = fails[i];
		requeue_case("0", 0, 0, "1", "0", 0, "requeue 42\nupdate JobId=42 ExcNodeList=n1\n");
		fake_fail = "";
		assert_int_equal(srun_runs(), 2);
		assert_int_equal(events_with("\"cause\":\"crash\""), 2);
		assert_int_equal(events_with("\"cause\":\"error\""), 0);
		assert_said("dtrain: node n1 is left out of the job's next starts: two crashes began there (node 1 of at most 2)");
		ex = excluded();
		assert_string_equal(ex, "n1 two crashes began there\n");
		free(ex);
		fakes_healthy();
	}
}

/* The next start of the job after the script requeued it: Slurm's restart
 * count 1, on these nodes, exit 0. */
static void next_start(const char *nodes)
{
	char path[600];

	snprintf(path, sizeof(path), "%s/requeue.done", tmp);
	unlink(path); /* a new allocation */
	fake_nodes = nodes;
	fake_lost_node = "";
	fake_say = NULL;
	{
		struct spec s = base_spec();
		struct dt_buf out = {0};
		struct dt_err err = {0};

		s.recovery.max_node_failures = 3;
		s.recovery.max_excluded_nodes = 2;
		assert_int_equal(render(&s, NULL, run_dir_ok, &out, &err), 0);
		assert_int_equal(run_script(out.p, "1", "0", "0"), 0);
		dt_buf_free(&out);
	}
}

/* A probe after a crash that one node (n2) does not answer, on a partition
 * of three: n2 is left out (recovery/excluded), the job requeued and then
 * its excluded nodes set. On a partition of two n2 stays (the job could
 * not start without it) and the job is requeued all the same. */
static void test_lost_node_left_out(void **state)
{
	char *ex;

	(void)state;
	fake_nodes = "n1 n2";
	fake_lost_node = "n2";
	fake_partition = "n1 n2 n3";
	requeue_case("0", 0, 0, "137", "0", 0, "requeue 42\nupdate JobId=42 ExcNodeList=n2\n");
	assert_said("dtrain: a node of the allocation does not answer: no job step could start on n2 within 20 s");
	assert_said("dtrain: node n2 is left out of the job's next starts: it did not answer after a crash: no job step could start there within 20 s (node 1 of at most 2)");
	assert_said("dtrain: job 42 leaves out n2 from its next starts");
	ex = excluded();
	assert_string_equal(ex, "n2 it did not answer after a crash: no job step could start there within 20 s\n");
	free(ex);
	/* a node failure, counted once: before the requeue, not again by the
	 * next start (Slurm's restart count) */
	assert_int_equal(counter("node_failures"), 1);
	assert_int_equal(events_with("\"event\":\"node_failure\""), 1);
	next_start("n1 n3");
	assert_int_equal(counter("node_failures"), 1);
	assert_int_equal(events_with("\"event\":\"node_failure\""), 1);
	fake_nodes = "n1 n2";
	fake_lost_node = "n2";
	fake_partition = "n1 n2";
	requeue_case("0", 0, 0, "137", "0", 0, "requeue 42\n");
	assert_said("dtrain: node n2 is bad (it did not answer after a crash: no job step could start there within 20 s), but stays: partition default has 2 nodes the job can use, and without it and the 0 left out before fewer than the 2 it needs would remain");
	ex = excluded();
	assert_string_equal(ex, "");
	free(ex);
	fakes_healthy();
}

/* Two crashes that began on n1 (srun names the first task to end): the
 * first restarts the step here, the second leaves n1 out and requeues. */
static void test_two_crashes_leave_a_node_out(void **state)
{
	char *ex;

	(void)state;
	fake_nodes = "n1 n2";
	fake_partition = "n1 n2 n3";
	fake_say = "srun: error: n1: task 0: Killed";
	requeue_case("0", 0, 0, "137", "0", 0, "requeue 42\nupdate JobId=42 ExcNodeList=n1\n");
	assert_int_equal(srun_runs(), 2);
	assert_said("dtrain: node n1 is left out of the job's next starts: two crashes began there (node 1 of at most 2)");
	assert_said("dtrain: requeueing job 42 to start again without node n1");
	ex = excluded();
	assert_string_equal(ex, "n1 two crashes began there\n");
	free(ex);
	/* the script's own requeue, counted before it (its SIGTERM ends every
	 * program of the job): the next start is no node failure */
	assert_int_equal(counter("left_out"), 1);
	next_start("n2 n3");
	assert_true(counter("node_failures") <= 0);
	assert_int_equal(events_with("\"event\":\"node_failure\""), 0);
	fakes_healthy();
}

/* Slurm requeued the job after a node failure (the restart count says
 * so) and holds n2, a node of the last start, for down: n2 is left out;
 * this start's nodes holding it, the job is requeued at once. */
static void test_node_down_after_slurms_requeue(void **state)
{
	char path[700], *ex;

	(void)state;
	reset_outputs();
	snprintf(path, sizeof(path), "%s/events.jsonl", run_dir_ok);
	tu_write_path(path, "{\"event\":\"job_start\",\"time\":1,\"job_id\":\"42\",\"restart\":0,\"crashes\":0,\"nodes\":\"n[1-2]\",\"num_nodes\":2,\"layout\":\"8x1\"}\n", 0644);
	fake_nodes = "n1 n2";
	fake_partition = "n1 n2 n3";
	fake_down = "n2";
	requeue_case_keep("1", "0", 0, "requeue 42\nupdate JobId=42 ExcNodeList=n2\n");
	assert_said("dtrain: started again after losing a node (node failure 1 of at most 3)");
	assert_said("dtrain: node n2 is left out of the job's next starts: Slurm requeued the job after a node failure and holds the node for down* (node 1 of at most 2)");
	ex = excluded();
	assert_string_equal(ex, "n2 Slurm requeued the job after a node failure and holds the node for down*\n");
	free(ex);
	fakes_healthy();
}

/* The replicas' check names the replica that differs and its node (exit
 * 6): that node is left out at once, and the job requeued. */
static void test_replica_that_differs_leaves_its_node_out(void **state)
{
	char *ex;

	(void)state;
	fake_nodes = "n1 n2";
	fake_partition = "n1 n2 n3";
	fake_say = "dtrain-run: rank 0: replicas disagree after step 12: rank 3 on node n2 holds "
		   "other parameters than the other replicas of stage 0 (a silent corruption: a "
		   "flipped bit in its memory, a faulty GPU); nothing saved: start again from the "
		   "newest checkpoint";
	requeue_case("0", 0, 0, "6", "0", 0, "requeue 42\nupdate JobId=42 ExcNodeList=n2\n");
	assert_int_equal(srun_runs(), 1);
	assert_said("dtrain: node n2 is left out of the job's next starts: its replica disagreed with the others (node 1 of at most 2)");
	ex = excluded();
	assert_string_equal(ex, "n2 its replica disagreed with the others\n");
	free(ex);
	fakes_healthy();
}

/* The nodes the job excluded already (the site's --exclude) stay
 * excluded; past recovery.max_excluded_nodes a bad node stays in. */
static void test_left_out_with_the_sites_and_up_to_the_cap(void **state)
{
	char path[700];

	(void)state;
	fake_nodes = "n1 n2";
	fake_lost_node = "n2";
	fake_partition = "n1 n2 n3 n4 n5 n6";
	fake_exc = "n9";
	requeue_case("0", 0, 0, "137", "0", 0, "requeue 42\nupdate JobId=42 ExcNodeList=n2,n9\n");
	fake_exc = "";
	reset_outputs();
	snprintf(path, sizeof(path), "%s/recovery", run_dir_ok);
	assert_int_equal(dt_mkdirs(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/recovery/excluded", run_dir_ok);
	tu_write_path(path, "n5 one reason\nn6 another\n", 0644);
	requeue_case_keep("0", "137", 0, "requeue 42\nupdate JobId=42 ExcNodeList=n5,n6\n");
	assert_said("dtrain: node n2 is bad (it did not answer after a crash: no job step could start there within 20 s), but stays: 2 nodes are left out already (recovery.max_excluded_nodes = 2)");
	fakes_healthy();
}

/* A requeue that fails leaves the batch shell as it was: a start on a
 * node left out goes on there, and a SIGTERM after it (a preemption) is
 * still counted a stop, not taken for the script's own requeue. */
static void test_failed_requeue_keeps_the_stop_trap(void **state)
{
	struct spec s = base_spec();
	struct dt_buf out = {0};
	struct dt_err err = {0};
	char path[700];

	(void)state;
	reset_outputs();
	s.recovery.max_excluded_nodes = 2;
	snprintf(path, sizeof(path), "%s/recovery", run_dir_ok);
	assert_int_equal(dt_mkdirs(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/recovery/excluded", run_dir_ok);
	tu_write_path(path, "n2 it did not answer\n", 0644);
	fake_nodes = "n1 n2";
	fake_requeue_fail = true;
	assert_int_equal(render(&s, NULL, run_dir_ok, &out, &err), 0);
	assert_int_equal(run_script(out.p, "0", "75", "1"), 75);
	assert_int_equal(srun_runs(), 1);
	assert_said("dtrain: scontrol requeue failed; starting on these nodes all the same");
	assert_int_equal(counter("stopped"), 1);
	assert_true(counter("left_out") <= 0);
	dt_buf_free(&out);
	fakes_healthy();
}

/* A start on a node left out before (the update after the requeue did not
 * reach Slurm) is requeued at once, without starting the step. */
static void test_start_on_a_left_out_node_requeues(void **state)
{
	struct spec s = base_spec();
	struct dt_buf out = {0};
	struct dt_err err = {0};
	char path[700], *log;

	(void)state;
	reset_outputs();
	s.recovery.max_excluded_nodes = 2;
	snprintf(path, sizeof(path), "%s/recovery", run_dir_ok);
	assert_int_equal(dt_mkdirs(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/recovery/excluded", run_dir_ok);
	tu_write_path(path, "n2 it did not answer\n", 0644);
	fake_nodes = "n1 n2";
	assert_int_equal(render(&s, NULL, run_dir_ok, &out, &err), 0);
	assert_int_equal(run_script(out.p, "0", "0", "0"), 0);
	assert_int_equal(srun_runs(), 0);
	log = scontrol_log();
	assert_non_null(log);
	assert_string_equal(log, "requeue 42\nupdate JobId=42 ExcNodeList=n2\n");
	free(log);
	assert_said("dtrain: this start's nodes include n2, left out before; requeueing job 42 without them");
	dt_buf_free(&out);
	fakes_healthy();
}

/* A rank ended, but srun waits on for the ranks of a node that does not
 * answer (Slurm would wait until it took the node for down): past Slurm's
 * KillWait (0 s here) + 5 s the batch script ends srun and goes on to the
 * probe, which finds the node lost. */
static void test_srun_waiting_on_a_lost_node_is_ended(void **state)
{
	char path[600], *text;
	pid_t srun;

	(void)state;
	fake_lost = fake_hang = true;
	requeue_case("0", 0, 0, "5", "0", 0, "show config\nrequeue 42\n");
	fake_lost = fake_hang = false;
	assert_int_equal(srun_runs(), 1);
	snprintf(path, sizeof(path), "%s/srun.pid", tmp);
	text = tu_read(path, NULL);
	assert_non_null(text);
	srun = (pid_t)atoi(text);
	free(text);
	assert_true(srun > 1);
	assert_int_equal(kill(srun, 0), -1); /* ended, and reaped by the script */
	snprintf(path, sizeof(path), "%s/script.err", tmp);
	text = tu_read(path, NULL);
	assert_non_null(text);
	assert_non_null(strstr(text, "srun: error: n1: tasks 0-1: Exited with exit code 5\n"
				     "dtrain: srun still waits for the step's ranks 5 s after one ended (Slurm's KillWait is 0 s): "
				     "a node does not answer; srun ended\n"));
	assert_non_null(strstr(text, "dtrain: a node of the allocation does not answer"));
	free(text);
	/* the run dir's copy of srun's messages has the line too */
	snprintf(path, sizeof(path), "%s/srun.err", run_dir_ok);
	text = tu_read(path, NULL);
	assert_non_null(text);
	assert_non_null(strstr(text, "a node does not answer; srun ended"));
	free(text);
}

static void test_no_requeue_after_sigterm(void **state)
{
	(void)state;
	/* The batch shell got SIGTERM (scancel or preemption) while srun ran:
	 * it survives to see 75, and leaves requeueing to Slurm; it writes
	 * the stop down, so that Slurm's requeue is not taken for a node
	 * failure. A crash under SIGTERM is not restarted either. */
	requeue_case("0", 0, 0, "75", "1", 75, NULL);
	assert_int_equal(counter("stopped"), 1);
	requeue_case("0", 0, 0, "137", "1", 137, NULL);
	assert_int_equal(srun_runs(), 1);
}

/* The stop is written down as the SIGTERM arrives: a save that outlasts
 * KillWait ends the batch shell with SIGKILL, and Slurm's requeue must
 * not then count as a node failure. */
static void test_stop_counted_before_kill(void **state)
{
	struct spec s = base_spec();
	struct dt_buf out = {0};
	struct dt_err err = {0};

	(void)state;
	reset_outputs();
	set_counter("stopped", 0);
	set_counter("requeued", 0);
	set_counter("node_failures", 0);
	assert_int_equal(render(&s, NULL, run_dir_ok, &out, &err), 0);
	assert_int_equal(run_script(out.p, "0", "75", "2"), 128 + SIGKILL);
	assert_int_equal(counter("stopped"), 1);
	/* and the next start, requeued by Slurm, is no node failure */
	assert_int_equal(run_script(out.p, "1", "0", "0"), 0);
	assert_true(counter("node_failures") <= 0);
	dt_buf_free(&out);
}

static void test_requeue_limit_zero(void **state)
{
	struct spec s = base_spec();
	struct dt_buf out = {0};
	struct dt_err err = {0};
	char *log;

	(void)state;
	reset_outputs();
	s.preemption.max_requeues = 0;
	assert_int_equal(render(&s, NULL, run_dir_ok, &out, &err), 0);
	assert_int_equal(run_script(out.p, "0", "75", "0"), 75);
	log = scontrol_log();
	assert_null(log);
	dt_buf_free(&out);
}

/* Slurm's requeues that neither the script's own requeues nor the stops
 * it saw explain were after a lost node: at most max_node_failures of
 * them; a job env cannot fake Slurm's count (the script reads it before
 * exporting the job's env). */
static void test_node_failures_are_counted(void **state)
{
	static char *keys[] = { "SLURM_RESTART_COUNT", "SLURM_JOB_ID" };
	static char *vals[] = { "0", "1" };
	struct spec s = base_spec();
	struct dt_buf out = {0};
	struct dt_err err = {0};

	(void)state;
	reset_outputs();
	s.recovery.max_node_failures = 2;
	s.env = (struct spec_map){ keys, vals, 2 };
	assert_int_equal(render(&s, NULL, run_dir_ok, &out, &err), 0);
	assert_int_equal(run_script(out.p, "2", "0", "0"), 0); /* 2 of 2 */
	assert_int_equal(counter("node_failures"), 2);
	assert_int_equal(srun_runs(), 1);
	assert_int_equal(run_script(out.p, "3", "0", "0"), 1); /* a third: no start */
	assert_int_equal(srun_runs(), 1);
	/* a requeue of its own and a preemption explain two of three */
	reset_outputs();
	set_counter("requeued", 1);
	set_counter("stopped", 1);
	assert_int_equal(run_script(out.p, "3", "0", "0"), 0);
	assert_int_equal(counter("node_failures"), 1);
	dt_buf_free(&out);
}

/* Damaged counters (a shell killed while writing one leaves it empty)
 * read as 0: the script goes on, and writes them whole again. */
static void test_damaged_counters_read_as_zero(void **state)
{
	static const char *damage[][2] = { { "requeued", "abc\n" }, { "stopped", "" },
					   { "crashes", "08x" }, { "node_failures", "99999999999999" } };
	struct spec s = base_spec();
	struct dt_buf out = {0};
	struct dt_err err = {0};
	char path[800], *log;
	size_t i;

	(void)state;
	reset_outputs();
	set_counter("requeued", 0); /* makes the directory */
	for (i = 0; i < sizeof(damage) / sizeof(damage[0]); i++) {
		snprintf(path, sizeof(path), "%s/recovery/%s", run_dir_ok, damage[i][0]);
		tu_write_path(path, damage[i][1], 0644);
	}
	s.preemption.max_requeues = 3;
	assert_int_equal(render(&s, NULL, run_dir_ok, &out, &err), 0);
	assert_int_equal(run_script(out.p, "0", "75", "0"), 0);
	log = scontrol_log();
	assert_non_null(log);
	assert_string_equal(log, "requeue 42\n");
	free(log);
	assert_int_equal(counter("requeued"), 1);
	dt_buf_free(&out);
}

/* A setup line that leaves a program running in the background: the
 * script does not wait for it after the job step (only for its own tee). */
static void test_background_setup_job_not_waited_for(void **state)
{
	static char *job_setup[] = { "sleep 15 >/dev/null 2>&1 &" };
	struct spec s = base_spec();
	struct dt_buf out = {0};
	struct dt_err err = {0};
	time_t t0;

	(void)state;
	reset_outputs();
	s.setup = (struct spec_strs){ job_setup, 1 };
	assert_int_equal(render(&s, NULL, run_dir_ok, &out, &err), 0);
	t0 = time(NULL);
	assert_int_equal(run_script(out.p, "0", "0", "0"), 0);
	assert_true(time(NULL) - t0 < 10);
	dt_buf_free(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sbatch_all),
		cmocka_unit_test(test_sbatch_optional_absent),
		cmocka_unit_test(test_sbatch_elastic),
		cmocka_unit_test(test_sbatch_refusals),
		cmocka_unit_test(test_site_sbatch_extra_refused),
		cmocka_unit_test(test_every_problem_reported),
		cmocka_unit_test(test_hostile_values_stay_data),
		cmocka_unit_test(test_setup_lines_run_in_order),
		cmocka_unit_test(test_setup_cannot_override_site_env),
		cmocka_unit_test(test_setup_syntax_error),
		cmocka_unit_test(test_locked_env_not_from_the_shell),
		cmocka_unit_test(test_planted_links_refused),
		cmocka_unit_test(test_links_planted_mid_run_not_followed),
		cmocka_unit_test(test_run_error_blames_no_node),
		cmocka_unit_test(test_node_local_error_is_a_crash),
		cmocka_unit_test(test_lost_node_left_out),
		cmocka_unit_test(test_two_crashes_leave_a_node_out),
		cmocka_unit_test(test_replica_that_differs_leaves_its_node_out),
		cmocka_unit_test(test_start_on_a_left_out_node_requeues),
		cmocka_unit_test(test_node_down_after_slurms_requeue),
		cmocka_unit_test(test_left_out_with_the_sites_and_up_to_the_cap),
		cmocka_unit_test(test_failed_requeue_keeps_the_stop_trap),
		cmocka_unit_test(test_requeue_below_limit),
		cmocka_unit_test(test_requeue_at_limit),
		cmocka_unit_test(test_no_requeue_on_other_exits),
		cmocka_unit_test(test_no_requeue_after_sigterm),
		cmocka_unit_test(test_requeue_limit_zero),
		cmocka_unit_test(test_crash_restarts_the_step),
		cmocka_unit_test(test_watchdog_exit_restarts_and_names),
		cmocka_unit_test(test_lost_node_requeues),
		cmocka_unit_test(test_srun_waiting_on_a_lost_node_is_ended),
		cmocka_unit_test(test_stop_counted_before_kill),
		cmocka_unit_test(test_node_failures_are_counted),
		cmocka_unit_test(test_damaged_counters_read_as_zero),
		cmocka_unit_test(test_background_setup_job_not_waited_for),
	};

	return cmocka_run_group_tests(tests, group_setup, tu_teardown);
}
