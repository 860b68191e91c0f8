/*
 * test_site.c - the site policy: finding the files, their own validation,
 * defaults under the user's spec, locked keys, limits, a user's file
 * layered under the system's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jobs/spec.h"
#include "site/site.h"
#include "tests/testutil.h"

static const char *site_text =
	"{\"runs_root\": \"/srv/runs\","
	" \"defaults\": {\"resources\": {\"partition\": \"low\", \"time\": \"00:30:00\","
	"                \"account\": \"physics\"}, \"env\": {\"SITE_DEF\": \"1\"},"
	"                \"train\": {\"log_every\": 50}},"
	" \"limits\": {\"max_nodes\": 2, \"max_tasks_per_node\": 4, \"max_cpus_per_task\": 2,"
	"            \"max_gpus_per_node\": 0, \"max_time\": \"1-00:00:00\","
	"            \"partitions\": [\"low\", \"high\"]},"
	" \"locked\": [\"resources.account\", \"env.SITE_LOCK\", \"checkpoint\"],"
	" \"env\": {\"SITE_ENV\": \"x\"}, \"sbatch_extra\": [\"--exclusive\"],"
	" \"srun_extra\": [\"--kill-on-bad-exit=1\"], \"setup\": [\"module load mpi\"]}";

struct fixture {
	struct site site;
	char site_path[512];
};

static int setup(void **state)
{
	static struct fixture fx;
	struct dt_err e = {0};

	snprintf(fx.site_path, sizeof(fx.site_path), "%s", tu_write("site.json", site_text));
	if (site_load(fx.site_path, &fx.site, &e)) {
		fprintf(stderr, "%s\n", e.msg);
		return -1;
	}
	*state = &fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	site_free(&fx->site);
	return 0;
}

static int resolve(struct fixture *fx, const char *text, const char *const *sets, size_t n,
		   struct spec *s, struct dt_err *e)
{
	struct spec_policy policy;
	struct spec_input in = { tu_write("job.json", text), &policy, sets, n, false, 0 };

	site_policy(&fx->site, &policy);
	dt_err_clear(e);
	return spec_resolve(&in, s, e);
}

static void site_file_is_loaded(void **state)
{
	struct fixture *fx = *state;

	assert_string_equal(fx->site.runs_root, "/srv/runs");
	assert_int_equal(fx->site.limits.max_nodes, 2);
	assert_int_equal(fx->site.limits.max_time_s, 86400);
	assert_int_equal(fx->site.limits.partitions.n, 2);
	assert_int_equal(fx->site.locked.n, 3);
	assert_string_equal(fx->site.env.key[0], "SITE_ENV");
	assert_string_equal(fx->site.sbatch_extra.v[0], "--exclusive");
	assert_string_equal(fx->site.setup.v[0], "module load mpi");
}

static void defaults_apply_under_the_spec(void **state)
{
	struct fixture *fx = *state;
	struct spec s;
	struct dt_err e = {0};

	assert_int_equal(resolve(fx, "{\"resources\": {\"time\": \"02:00:00\"}, \"env\": {\"MINE\": \"2\"}}",
				 NULL, 0, &s, &e), 0);
	assert_string_equal(s.resources.partition, "low");   /* site default */
	assert_string_equal(s.resources.account, "physics"); /* site default, locked */
	assert_int_equal(s.resources.time_s, 7200);          /* user wins */
	assert_int_equal(s.train.log_every, 50);
	assert_int_equal(s.env.n, 2); /* maps merge key by key */
	assert_string_equal(s.env.key[0], "SITE_DEF");
	assert_string_equal(s.env.key[1], "MINE");
	spec_free(&s);
}

static void locked_keys_are_refused(void **state)
{
	struct fixture *fx = *state;
	struct spec s;
	struct dt_err e = {0};
	const char *sets[] = { "env.SITE_LOCK=1", "checkpoint.every_steps=1" };
	char want[700];

	assert_int_equal(resolve(fx, "{\"resources\": {\"account\": \"mine\"}, \"checkpoint\": {\"keep\": 9}}",
				 sets, 2, &s, &e), -EINVAL);
	snprintf(want, sizeof(want), "job.json: resources.account: locked by the site (%s: locked: \"resources.account\")",
		 fx->site_path);
	assert_true(tu_has(&e, want));
	/* under a locked section, each key is blamed where it came from */
	assert_true(tu_has(&e, "job.json: checkpoint.keep: locked by the site"));
	assert_true(tu_has(&e, "--set: checkpoint.every_steps: locked by the site"));
	assert_true(tu_has(&e, "--set: env.SITE_LOCK: locked by the site"));
	assert_int_equal(e.count, 4);
}

static void limits_are_enforced(void **state)
{
	struct fixture *fx = *state;
	struct spec s;
	struct dt_err e = {0};
	const char *sets[] = { "resources.cpus_per_task=3" };

	assert_int_equal(resolve(fx, "{\"resources\": {\"nodes\": 4, \"tasks_per_node\": 8,"
				 " \"gpus_per_node\": 1, \"time\": \"2-00:00:00\", \"partition\": \"gpu\"},"
				 " \"parallel\": {\"data\": 32}}", sets, 1, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "job.json: resources.nodes: 4 exceeds the site limit 2 ("));
	assert_true(tu_has(&e, ": limits.max_nodes)"));
	assert_true(tu_has(&e, "resources.tasks_per_node: 8 exceeds the site limit 4"));
	assert_true(tu_has(&e, "--set: resources.cpus_per_task: 3 exceeds the site limit 2"));
	assert_true(tu_has(&e, "resources.gpus_per_node: 1 exceeds the site limit 0"));
	assert_true(tu_has(&e, "resources.time: 2-00:00:00 exceeds the site limit 1-00:00:00"));
	assert_true(tu_has(&e, "resources.partition: \"gpu\" is not allowed by the site"));
	assert_true(tu_has(&e, "limits.partitions: \"low\", \"high\")"));
	/* Within the limits it resolves. */
	assert_int_equal(resolve(fx, "{\"resources\": {\"nodes\": 2, \"tasks_per_node\": 2,"
				 " \"partition\": \"high\"}, \"parallel\": {\"data\": 4}}", NULL, 0, &s, &e), 0);
	spec_free(&s);
}

static void bad_site_files(void **state)
{
	struct site s;
	struct dt_err e = {0};

	(void)state;
	assert_int_equal(site_load(tu_write("bad.json",
		"{\"limit\": {}, \"limits\": {\"max_node\": 1, \"max_time\": \"x\"},"
		" \"defaults\": {\"resources\": {\"nodez\": 1}, \"train\": {\"epochs\": -1}},"
		" \"locked\": [\"resources.nodes\", \"no.such\"], \"sbatch_extra\": [\"exclusive\", \"--x=$(id)\"],"
		" \"env\": {\"A B\": \"x\"}, \"runs_root\": \"/a b\"}"), &s, &e), -EINVAL);
	assert_true(tu_has(&e, "bad.json: limit: unknown key; did you mean \"limits"));
	assert_true(tu_has(&e, "limits.max_node: unknown key; did you mean \"limits.max_nodes\"?"));
	assert_true(tu_has(&e, "limits.max_time: not a Slurm time"));
	assert_true(tu_has(&e, "defaults.resources.nodez: unknown key; did you mean \"resources.nodes\"?"));
	assert_true(tu_has(&e, "defaults.train.epochs: must be between 0 and"));
	assert_true(tu_has(&e, "locked[1]: \"no.such\" is not a job-spec key"));
	assert_true(tu_has(&e, "sbatch_extra[0]: expected an option like \"--exclusive\""));
	assert_true(tu_has(&e, "sbatch_extra[1]: character '$' not allowed"));
	assert_true(tu_has(&e, "env.A B: not a valid environment variable name"));
	assert_true(tu_has(&e, "runs_root: character ' ' not allowed"));
	assert_null(s.path);
	assert_int_equal(site_load("/nonexistent/site.json", &s, &e), -ENOENT);
}

static void no_site_file_means_no_policy(void **state)
{
	struct site s;
	struct dt_err e = {0};

	(void)state;
	setenv("HOME", "/home/bob", 1);
	assert_int_equal(site_load(NULL, &s, &e), 0);
	assert_null(s.path);
	assert_string_equal(s.runs_root, "/home/bob/dtrain-runs");
	assert_int_equal(s.limits.max_nodes, 0);
	assert_int_equal(s.limits.max_gpus_per_node, -1);
	assert_null(site_locked(&s, "resources.nodes"));
	site_free(&s);
}

static void site_file_search_order(void **state)
{
	const char *sys, *user;

	(void)state;
	setenv("DTRAIN_SITE", "/from/env.json", 1);
	site_find("/explicit.json", &sys, &user);
	assert_string_equal(user, "/explicit.json");
	site_find(NULL, &sys, &user);
	assert_string_equal(user, "/from/env.json");
	unsetenv("DTRAIN_SITE");
	site_find(NULL, &sys, &user);
	assert_null(user);
	/* the system's: /etc/dtrain/site.json if it exists, whatever the user's */
	if (access(SITE_DEFAULT_PATH, F_OK) == 0)
		assert_string_equal(sys, SITE_DEFAULT_PATH);
	else
		assert_null(sys);
}

/* A user's file under the system's (--site or $DTRAIN_SITE with
 * /etc/dtrain/site.json there): it adds defaults under the system's, locks
 * and stricter limits; it removes nothing, and what it cannot set
 * (env, sbatch_extra, srun_extra, setup) is refused naming both files. */
static void user_site_adds_under_the_system(void **state)
{
	struct fixture *fx = *state;
	struct site lay = {0};
	struct spec_policy policy;
	struct spec s;
	struct dt_err e = {0};
	char user[512], bad[512], want[1400];
	const char *sets[] = { "resources.account=evil" };
	struct spec_input in = { NULL, &policy, sets, 1, false, 0 };

	snprintf(user, sizeof(user), "%s",
		 tu_write("user-site.json",
			  "{\"runs_root\": \"/scratch/me/runs\","
			  " \"defaults\": {\"resources\": {\"partition\": \"high\", \"qos\": \"mine\"},"
			  "              \"train\": {\"log_every\": 7, \"epochs\": 3}},"
			  " \"limits\": {\"max_nodes\": 9, \"max_tasks_per_node\": 2,"
			  "            \"partitions\": [\"low\", \"gpu\"]},"
			  " \"locked\": [\"train.epochs\"]}"));
	assert_int_equal(site_load_policy(fx->site_path, user, &lay, &e), 0);
	assert_string_equal(lay.path, fx->site_path);
	assert_string_equal(lay.user_path, user);
	/* the system's locks, limits and policy stay; the user's add */
	assert_int_equal(lay.locked.n, 4);
	assert_non_null(site_locked(&lay, "resources.account"));
	assert_non_null(site_locked(&lay, "train.epochs"));
	assert_int_equal(lay.limits.max_nodes, 2);          /* the system's is stricter */
	assert_int_equal(lay.limits.max_tasks_per_node, 2); /* the user's is */
	assert_int_equal(lay.limits.max_time_s, 86400);
	assert_int_equal(lay.limits.partitions.n, 1);       /* both allow */
	assert_string_equal(lay.limits.partitions.v[0], "low");
	assert_string_equal(lay.env.key[0], "SITE_ENV");
	assert_string_equal(lay.setup.v[0], "module load mpi");
	/* defaults: the system's win, the user's fill in */
	site_policy(&lay, &policy);
	in.path = tu_write("job.json", "{}");
	assert_int_equal(spec_resolve(&in, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "--set: resources.account: locked by the site"));
	/* lock messages name both files: the lock may be either's */
	snprintf(want, sizeof(want), "(%s with %s: locked: \"resources.account\")", fx->site_path, user);
	assert_true(tu_has(&e, want));
	/* the user's runs_root: where the user's runs go */
	assert_string_equal(lay.runs_root, "/scratch/me/runs");
	dt_err_clear(&e);
	in.n_sets = 0;
	if (spec_resolve(&in, &s, &e))
		fail_msg("%s", e.msg);
	assert_int_equal(e.count, 0);
	assert_string_equal(s.resources.partition, "low");
	assert_string_equal(s.resources.account, "physics");
	assert_string_equal(s.resources.qos, "mine");
	assert_int_equal(s.train.log_every, 50);
	assert_int_equal(s.train.epochs, 3);
	spec_free(&s);
	site_free(&lay);

	/* what only the system may set */
	snprintf(bad, sizeof(bad), "%s",
		 tu_write("user-bad.json", "{\"env\": {\"NCCL_IB_HCA\": \"evil\"}, \"setup\": [\"true\"],"
					   " \"sbatch_extra\": [\"--account=evil\"], \"env_allow\": [\"LD_*\"]}"));
	dt_err_clear(&e);
	assert_int_equal(site_load_policy(fx->site_path, bad, &lay, &e), -EINVAL);
	snprintf(want, sizeof(want), "%s: env: a user's site file cannot set it under the system policy %s",
		 bad, fx->site_path);
	assert_true(tu_has(&e, want));
	assert_true(tu_has(&e, "sbatch_extra: a user's site file cannot set it"));
	assert_true(tu_has(&e, "setup: a user's site file cannot set it"));
	assert_true(tu_has(&e, "env_allow: a user's site file cannot set it"));
	assert_null(lay.path);
	/* alone (no system file), a user's file is the policy, env and all */
	dt_err_clear(&e);
	assert_int_equal(site_load_policy(NULL, bad, &lay, &e), 0);
	assert_string_equal(lay.env.key[0], "NCCL_IB_HCA");
	assert_null(lay.user_path);
	site_free(&lay);
	/* no partition in common: none allowed, not any */
	snprintf(bad, sizeof(bad), "%s", tu_write("user-parts.json", "{\"limits\": {\"partitions\": [\"gpu\"]}}"));
	dt_err_clear(&e);
	assert_int_equal(site_load_policy(fx->site_path, bad, &lay, &e), -EINVAL);
	assert_true(tu_has(&e, "limits.partitions: none of them is one the system policy"));
	/* a default under a system lock (the system's or the built-in value
	 * holds there), also inside a locked section */
	snprintf(bad, sizeof(bad), "%s",
		 tu_write("user-locked.json", "{\"defaults\": {\"checkpoint\": {\"keep\": 99},"
					      " \"env\": {\"SITE_LOCK\": \"x\", \"FREE\": \"y\"}}}"));
	dt_err_clear(&e);
	assert_int_equal(site_load_policy(fx->site_path, bad, &lay, &e), -EINVAL);
	assert_true(tu_has(&e, "defaults.checkpoint: locked by the system policy"));
	assert_true(tu_has(&e, "defaults.env.SITE_LOCK: locked by the system policy"));
	assert_false(tu_has(&e, "FREE"));
	/* a limit's message names both files too */
	site_free(&lay);
	assert_int_equal(site_load_policy(fx->site_path, user, &lay, &e), 0);
	site_policy(&lay, &policy);
	{
		const char *big[] = { "resources.tasks_per_node=3", "resources.nodes=1",
				      "parallel.data=3" };
		struct spec_input in2 = { tu_write("job.json", "{}"), &policy, big, 3, false, 0 };

		dt_err_clear(&e);
		assert_int_equal(spec_resolve(&in2, &s, &e), -EINVAL);
		snprintf(want, sizeof(want), "resources.tasks_per_node: 3 exceeds the site limit 2 (%s with %s: limits.max_tasks_per_node)",
			 fx->site_path, user);
		if (!tu_has(&e, want))
			fail_msg("%s", e.msg);
	}
	site_free(&lay);
	/* under a system lock of run_dir, a user's runs_root is refused */
	{
		char sys2[512];

		snprintf(sys2, sizeof(sys2), "%s", tu_write("sys-rundir.json", "{\"locked\": [\"run_dir\"]}"));
		dt_err_clear(&e);
		assert_int_equal(site_load_policy(sys2, user, &lay, &e), -EINVAL);
		snprintf(want, sizeof(want), "%s: runs_root: the system policy %s locks run_dir (locked: \"run_dir\")",
			 user, sys2);
		assert_true(tu_has(&e, want));
	}
	/* the system's file named again by the user: loaded once */
	assert_int_equal(site_load_policy(fx->site_path, fx->site_path, &lay, &e), 0);
	assert_null(lay.user_path);
	assert_int_equal(lay.locked.n, 3);
	site_free(&lay);
}

static void lock_coverage(void **state)
{
	struct fixture *fx = *state;

	assert_string_equal(site_locked(&fx->site, "resources.account"), "resources.account");
	assert_string_equal(site_locked(&fx->site, "checkpoint.keep"), "checkpoint");
	assert_null(site_locked(&fx->site, "resources"));
	assert_null(site_locked(&fx->site, "resources.accounts"));
	assert_null(site_locked(NULL, "resources.account"));
}

/* env lock patterns, env_allow, and the variables that change how a job
 * starts: refused from a job spec unless the site allows them. */
static void env_patterns_and_allowed(void **state)
{
	struct fixture *fx = *state, pat = { 0 };
	struct spec s;
	struct dt_err e = {0};
	const char *sets[] = { "env.DTRAIN_FAULT_WRITE=enospc@1" };

	/* no site file at all: LD_*, PATH, SLURM_* and DTRAIN_FAULT_* refused */
	{
		struct spec_input in = { tu_write("job.json",
			"{\"env\": {\"LD_PRELOAD\": \"/tmp/x.so\", \"PATH\": \"/tmp\","
			" \"SLURM_CONF\": \"/tmp/s.conf\", \"OMP_NUM_THREADS\": \"1\"}}"), NULL, sets, 1, false, 0 };

		assert_int_equal(spec_resolve(&in, &s, &e), -EINVAL);
		assert_true(tu_has(&e, "job.json: env.LD_PRELOAD: changes how the job starts (the dynamic loader); a job spec may set it only where the site allows it (env_allow in the site file"));
		assert_true(tu_has(&e, "env.PATH: changes how the job starts (which programs run, srun among them)"));
		assert_true(tu_has(&e, "env.SLURM_CONF: changes how the job starts (Slurm's settings of the job)"));
		assert_true(tu_has(&e, "--set: env.DTRAIN_FAULT_WRITE: changes how the job starts (dtrain's fault injection)"));
		assert_int_equal(e.count, 4);
	}

	/* a site that locks patterns and allows some names */
	assert_int_equal(site_load(tu_write("pat.json",
		"{\"locked\": [\"env.*\"], \"env_allow\": [\"OMP_NUM_THREADS\", \"NCCL_*\", \"DTRAIN_FAULT_*\"]}"),
		&pat.site, &e), 0);
	snprintf(pat.site_path, sizeof(pat.site_path), "%s", pat.site.path);
	assert_int_equal(resolve(&pat, "{\"env\": {\"OMP_NUM_THREADS\": \"2\", \"NCCL_DEBUG\": \"INFO\"}}",
				 sets, 1, &s, &e), 0);
	spec_free(&s);
	assert_int_equal(resolve(&pat, "{\"env\": {\"FOO\": \"1\", \"LD_PRELOAD\": \"x\"}}", NULL, 0, &s, &e),
			 -EINVAL);
	assert_true(tu_has(&e, "job.json: env.FOO: locked by the site"));
	assert_true(tu_has(&e, "locked: \"env.*\""));
	assert_true(tu_has(&e, "job.json: env.LD_PRELOAD: locked by the site"));
	site_free(&pat.site);

	/* an exact lock stands, whatever env_allow says */
	assert_int_equal(site_load(tu_write("exact.json",
		"{\"locked\": [\"env.*\", \"env.NCCL_IB_HCA\"], \"env_allow\": [\"NCCL_*\"]}"), &pat.site, &e), 0);
	snprintf(pat.site_path, sizeof(pat.site_path), "%s", pat.site.path);
	assert_int_equal(resolve(&pat, "{\"env\": {\"NCCL_IB_HCA\": \"mlx5\", \"NCCL_DEBUG\": \"INFO\"}}",
				 NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "job.json: env.NCCL_IB_HCA: locked by the site"));
	assert_true(tu_has(&e, "locked: \"env.NCCL_IB_HCA\""));
	assert_int_equal(e.count, 1);
	site_free(&pat.site);

	/* env.LD_* is a prefix pattern, as an admin reads it */
	assert_int_equal(site_load(tu_write("ld.json", "{\"locked\": [\"env.LD_*\"], \"env_allow\": [\"LD_LIBRARY_PATH\"]}"),
				   &pat.site, &e), 0);
	assert_non_null(site_locked(&pat.site, "env.LD_PRELOAD"));
	assert_null(site_locked(&pat.site, "env.OMP_NUM_THREADS"));
	assert_null(site_locked(&pat.site, "envX"));
	assert_int_equal(resolve(&pat, "{\"env\": {\"LD_LIBRARY_PATH\": \"/opt/lib\"}}", NULL, 0, &s, &e), 0);
	spec_free(&s);
	assert_int_equal(resolve(&pat, "{\"env\": {\"LD_AUDIT\": \"x\"}}", NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "job.json: env.LD_AUDIT: locked by the site"));
	site_free(&pat.site);

	/* patterns the README does not define, and bad allow entries */
	assert_int_equal(site_load(tu_write("badpat.json",
		"{\"locked\": [\"resources.*\", \"env.A*B\", \"env.\"], \"env_allow\": [\"A-B\", \"*X\"]}"),
		&pat.site, &e), -EINVAL);
	assert_true(tu_has(&e, "locked[0]: \"resources.*\": the only patterns are env.* and env.PREFIX*"));
	assert_true(tu_has(&e, "locked[1]: \"env.A*B\": the only patterns are"));
	assert_true(tu_has(&e, "locked[2]: \"env.\" is not a job-spec key"));
	assert_true(tu_has(&e, "env_allow[0]: \"A-B\" is not an environment variable name"));
	assert_true(tu_has(&e, "env_allow[1]: \"*X\" is not an environment variable name"));
	(void)fx;
}

static void example_site_file_is_valid(void **state)
{
	const char *src = getenv("DTRAIN_SOURCE_DIR");
	char path[1024];
	struct site s;
	struct dt_err e = {0};

	(void)state;
	assert_non_null(src);
	snprintf(path, sizeof(path), "%s/site/site.json", src);
	if (site_load(path, &s, &e))
		fail_msg("%s", e.msg);
	site_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(site_file_is_loaded),
		cmocka_unit_test(defaults_apply_under_the_spec),
		cmocka_unit_test(locked_keys_are_refused),
		cmocka_unit_test(limits_are_enforced),
		cmocka_unit_test(lock_coverage),
		cmocka_unit_test(bad_site_files),
		cmocka_unit_test(no_site_file_means_no_policy),
		cmocka_unit_test(site_file_search_order),
		cmocka_unit_test(user_site_adds_under_the_system),
		cmocka_unit_test(env_patterns_and_allowed),
		cmocka_unit_test(example_site_file_is_valid),
	};
	int rc = cmocka_run_group_tests_name("site", tests, setup, teardown);

	tu_cleanup();
	return rc;
}
