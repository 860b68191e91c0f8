/*
 * test_cli.c - the command line of dtrain-submit: commands, the implicit
 * submit, options in both spellings, sbatch's options as shortcuts of spec
 * keys, --help everywhere, and usage errors that name the offending
 * argument, with "did you mean" for a mistyped command or option.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "launcher/cli.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int parse(int argc, char *const argv[], struct launch_args *a, struct dt_err *err)
{
	dt_err_clear(err);
	return launch_parse_args(argc, argv, a, err);
}

static void test_submit_forms(void **state)
{
	char *implicit[] = { "dtrain-submit", "job.json", "--site", "s.json", "--set", "a.b=1",
			     "--set=c=2", "--dry-run" };
	char *explicit[] = { "dtrain-submit", "submit", "--site=s.json", "job.json" };
	char *dash_first[] = { "dtrain-submit", "--dry-run", "job.json" };
	struct launch_args a;
	struct dt_err err = {0};

	(void)state;
	assert_int_equal(parse(ARGC(implicit), implicit, &a, &err), 0);
	assert_int_equal(a.cmd, LAUNCH_SUBMIT);
	assert_string_equal(a.spec_path, "job.json");
	assert_string_equal(a.site_path, "s.json");
	assert_int_equal(a.n_sets, 2);
	assert_string_equal(a.sets[0], "a.b=1");
	assert_string_equal(a.sets[1], "c=2");
	assert_true(a.dry_run);
	launch_args_free(&a);

	assert_int_equal(parse(ARGC(explicit), explicit, &a, &err), 0);
	assert_int_equal(a.cmd, LAUNCH_SUBMIT);
	assert_string_equal(a.spec_path, "job.json");
	assert_string_equal(a.site_path, "s.json");
	assert_false(a.dry_run);
	launch_args_free(&a);

	assert_int_equal(parse(ARGC(dash_first), dash_first, &a, &err), 0);
	assert_int_equal(a.cmd, LAUNCH_SUBMIT);
	assert_true(a.dry_run);
	launch_args_free(&a);
}

static void test_other_commands(void **state)
{
	char *validate[] = { "dtrain-submit", "validate", "j.json", "--set", "x=1" };
	char *status[] = { "dtrain-submit", "status" };
	char *status_job[] = { "dtrain-submit", "status", "123" };
	char *cancel[] = { "dtrain-submit", "cancel", "demo" };
	char *logs[] = { "dtrain-submit", "logs", "-f", "demo" };
	char *logs_long[] = { "dtrain-submit", "logs", "demo", "--follow" };
	char *version[] = { "dtrain-submit", "--version" };
	struct launch_args a;
	struct dt_err err = {0};

	(void)state;
	assert_int_equal(parse(ARGC(validate), validate, &a, &err), 0);
	assert_int_equal(a.cmd, LAUNCH_VALIDATE);
	assert_string_equal(a.spec_path, "j.json");
	assert_int_equal(a.n_sets, 1);
	launch_args_free(&a);
	assert_int_equal(parse(ARGC(status), status, &a, &err), 0);
	assert_int_equal(a.cmd, LAUNCH_STATUS);
	assert_null(a.job);
	assert_int_equal(parse(ARGC(status_job), status_job, &a, &err), 0);
	assert_string_equal(a.job, "123");
	assert_int_equal(parse(ARGC(cancel), cancel, &a, &err), 0);
	assert_int_equal(a.cmd, LAUNCH_CANCEL);
	assert_string_equal(a.job, "demo");
	assert_int_equal(parse(ARGC(logs), logs, &a, &err), 0);
	assert_int_equal(a.cmd, LAUNCH_LOGS);
	assert_true(a.follow);
	assert_string_equal(a.job, "demo");
	assert_int_equal(parse(ARGC(logs_long), logs_long, &a, &err), 0);
	assert_true(a.follow);
	assert_int_equal(parse(ARGC(version), version, &a, &err), 0);
	assert_int_equal(a.cmd, LAUNCH_VERSION);
}

static void test_help_everywhere(void **state)
{
	static const char *subs[] = { "submit", "validate", "status", "cancel", "logs" };
	static const enum launch_cmd cmds[] = { LAUNCH_SUBMIT, LAUNCH_VALIDATE, LAUNCH_STATUS,
						LAUNCH_CANCEL, LAUNCH_LOGS };
	char *top[] = { "dtrain-submit", "--help" };
	struct launch_args a;
	struct dt_err err = {0};
	size_t i;

	(void)state;
	assert_int_equal(parse(ARGC(top), top, &a, &err), 0);
	assert_int_equal(a.cmd, LAUNCH_HELP);
	assert_int_equal(a.help_for, LAUNCH_HELP);
	assert_non_null(strstr(launch_help(LAUNCH_HELP), "Usage: dtrain-submit"));
	for (i = 0; i < 5; i++) {
		/* --help wins even over an unknown option before it. */
		char *argv[] = { "dtrain-submit", (char *)subs[i], "--bogus", "-h" };

		assert_int_equal(parse(ARGC(argv), argv, &a, &err), 0);
		assert_int_equal(a.cmd, LAUNCH_HELP);
		assert_int_equal(a.help_for, cmds[i]);
		assert_non_null(strstr(launch_help(cmds[i]), "Usage: dtrain-submit"));
		assert_non_null(strstr(launch_help(cmds[i]), subs[i]));
	}
}

static void expect_usage(int argc, char *const argv[], const char *needle)
{
	struct launch_args a;
	struct dt_err err = {0};

	assert_int_equal(parse(argc, argv, &a, &err), -EINVAL);
	if (!strstr(err.msg, needle))
		fprintf(stderr, "usage error lacks \"%s\"; it reads:\n%s\n", needle, err.msg);
	assert_non_null(strstr(err.msg, needle));
	assert_null(a.sets);
}

static void test_usage_errors(void **state)
{
	char *none[] = { "dtrain-submit" };
	char *unknown[] = { "dtrain-submit", "--frobnicate", "jobs.json" };
	char *typo[] = { "dtrain-submit", "submit", "j.json", "--sett", "a=1" };
	char *no_value[] = { "dtrain-submit", "j.json", "--site" };
	char *bad_set[] = { "dtrain-submit", "j.json", "--set", "a.b" };
	char *two_specs[] = { "dtrain-submit", "a.json", "b.json" };
	char *no_spec[] = { "dtrain-submit", "validate", "--set", "a=1" };
	char *no_job[] = { "dtrain-submit", "cancel" };
	char *flag_value[] = { "dtrain-submit", "j.json", "--dry-run=yes" };
	char *f_elsewhere[] = { "dtrain-submit", "status", "-f" };
	char *dry_validate[] = { "dtrain-submit", "validate", "j.json", "--dry-run" };

	(void)state;
	expect_usage(ARGC(none), none, "no command and no SPEC");
	expect_usage(ARGC(unknown), unknown, "unknown option '--frobnicate'");
	expect_usage(ARGC(typo), typo, "unknown option '--sett' (did you mean '--set'?)");
	expect_usage(ARGC(no_value), no_value, "--site needs a value");
	expect_usage(ARGC(bad_set), bad_set, "--set: expected KEY=VALUE (got 'a.b')");
	expect_usage(ARGC(two_specs), two_specs, "unexpected argument 'b.json'");
	expect_usage(ARGC(no_spec), no_spec, "validate: missing SPEC");
	expect_usage(ARGC(no_job), no_job, "cancel: missing JOB; try 'dtrain-submit cancel --help'");
	expect_usage(ARGC(flag_value), flag_value, "--dry-run takes no value");
	expect_usage(ARGC(f_elsewhere), f_elsewhere, "status: unknown option '-f'");
	expect_usage(ARGC(dry_validate), dry_validate, "validate: unknown option '--dry-run'");
}

static void test_slurm_options(void **state)
{
	char *argv[] = { "dtrain-submit", "job.json", "--set", "a.b=1", "-N", "2", "-n8", "-p", "high",
			 "--time=10", "--account", "acct", "-A", "proj" };
	char *val[] = { "dtrain-submit", "validate", "job.json", "--nodes=3", "-t", "00:10:00" };
	struct launch_args a;
	struct dt_err err = {0};

	(void)state;
	assert_int_equal(parse(ARGC(argv), argv, &a, &err), 0);
	assert_int_equal(a.cmd, LAUNCH_SUBMIT);
	assert_string_equal(a.spec_path, "job.json");
	assert_int_equal(a.ntasks, 8);
	/* in command-line order with --set: the last one wins */
	assert_int_equal(a.n_sets, 6);
	assert_string_equal(a.sets[0], "a.b=1");
	assert_string_equal(a.sets[1], "resources.nodes=2");
	assert_string_equal(a.sets[2], "resources.partition=high");
	assert_string_equal(a.sets[3], "resources.time=10");
	assert_string_equal(a.sets[4], "resources.account=acct");
	assert_string_equal(a.sets[5], "resources.account=proj");
	launch_args_free(&a);
	assert_int_equal(parse(ARGC(val), val, &a, &err), 0);
	assert_int_equal(a.cmd, LAUNCH_VALIDATE);
	assert_int_equal(a.ntasks, 0);
	assert_int_equal(a.n_sets, 2);
	assert_string_equal(a.sets[0], "resources.nodes=3");
	assert_string_equal(a.sets[1], "resources.time=00:10:00");
	launch_args_free(&a);
}

/* sweep: grids in order, seeds, the parallel bound, --after; a sweep
 * without a grid or seeds, and bad counts, are usage errors */
static void test_sweep_and_after(void **state)
{
	char *sweep[] = { "dtrain-submit", "sweep", "g.json", "--grid", "train.optimizer.lr=0.1,0.01",
			  "--grid=model.hidden=[64,64],[128]", "--seeds", "3", "--max-parallel=2",
			  "--after", "prep", "--set", "a=1", "--dependency", "afterany:7" };
	char *after[] = { "dtrain-submit", "j.json", "--after=12" };
	char *no_grid[] = { "dtrain-submit", "sweep", "g.json" };
	char *bad_seeds[] = { "dtrain-submit", "sweep", "g.json", "--seeds", "0" };
	char *bad_par[] = { "dtrain-submit", "sweep", "g.json", "--seeds", "2", "--max-parallel", "x" };
	char *bad_grid[] = { "dtrain-submit", "sweep", "g.json", "--grid", "lr" };
	char *grid_submit[] = { "dtrain-submit", "j.json", "--grid", "a=1,2" };
	char *after_validate[] = { "dtrain-submit", "validate", "j.json", "--after", "3" };
	char *array[] = { "dtrain-submit", "j.json", "--array=0-4%2" };
	char *array_pct[] = { "dtrain-submit", "sweep", "j.json", "--seeds", "2", "--array", "%3" };
	char *array_bad[] = { "dtrain-submit", "j.json", "--array=1-4" };
	char *array_pct_submit[] = { "dtrain-submit", "j.json", "--array=%3" };
	struct launch_args a;
	struct dt_err err = {0};

	(void)state;
	assert_int_equal(parse(ARGC(sweep), sweep, &a, &err), 0);
	assert_int_equal(a.cmd, LAUNCH_SWEEP);
	assert_string_equal(a.spec_path, "g.json");
	assert_int_equal(a.n_grids, 2);
	assert_string_equal(a.grids[0], "train.optimizer.lr=0.1,0.01");
	assert_string_equal(a.grids[1], "model.hidden=[64,64],[128]");
	assert_int_equal(a.seeds, 3);
	assert_int_equal(a.max_parallel, 2);
	assert_string_equal(a.after, "prep");
	assert_int_equal(a.n_sets, 2);
	assert_string_equal(a.sets[1], "resources.dependency=afterany:7");
	launch_args_free(&a);
	assert_int_equal(parse(ARGC(after), after, &a, &err), 0);
	assert_int_equal(a.cmd, LAUNCH_SUBMIT);
	assert_string_equal(a.after, "12");
	launch_args_free(&a);
	assert_int_equal(parse(ARGC(array), array, &a, &err), 0);
	assert_int_equal(a.cmd, LAUNCH_SUBMIT);
	assert_int_equal(a.seeds, 5);
	assert_int_equal(a.max_parallel, 2);
	launch_args_free(&a);
	assert_int_equal(parse(ARGC(array_pct), array_pct, &a, &err), 0);
	assert_int_equal(a.seeds, 2);
	assert_int_equal(a.max_parallel, 3);
	launch_args_free(&a);
	expect_usage(ARGC(array_bad), array_bad, "--array: expected 0-M or 0-M%K");
	expect_usage(ARGC(array_pct_submit), array_pct_submit, "(got '%3')");
	expect_usage(ARGC(no_grid), no_grid, "a sweep needs at least one --grid KEY=V1,V2,... or --seeds N");
	expect_usage(ARGC(bad_seeds), bad_seeds, "--seeds: expected a number from 1 to 1000 (got '0')");
	expect_usage(ARGC(bad_par), bad_par, "--max-parallel: expected a number from 1 to 1000 (got 'x')");
	expect_usage(ARGC(bad_grid), bad_grid, "--grid: expected KEY=V1,V2,... (got 'lr')");
	expect_usage(ARGC(grid_submit), grid_submit, "submit: unknown option '--grid'");
	expect_usage(ARGC(after_validate), after_validate, "validate: unknown option '--after'");
}

static void test_mistyped(void **state)
{
	char *stauts[] = { "dtrain-submit", "stauts" };
	char *valdate[] = { "dtrain-submit", "valdate", "spec.json" };
	char *dry[] = { "dtrain-submit", "job.json", "--dry" };
	char *ntasks[] = { "dtrain-submit", "job.json", "-n", "four" };
	char *no_nodes[] = { "dtrain-submit", "job.json", "-N" };
	char *status_n[] = { "dtrain-submit", "status", "-N", "2" };
	char *unknown_short[] = { "dtrain-submit", "job.json", "-x" };
	char *spec_named[] = { "dtrain-submit", "logz" };
	char *help_value[] = { "dtrain-submit", "job.json", "--help=x" };
	char *help_short[] = { "dtrain-submit", "status", "-hx" };
	struct launch_args a;
	struct dt_err err = {0};
	FILE *f;

	(void)state;
	expect_usage(ARGC(stauts), stauts, "unknown command 'stauts' (did you mean 'status'?)");
	expect_usage(ARGC(valdate), valdate, "unknown command 'valdate' (did you mean 'validate'?)");
	expect_usage(ARGC(dry), dry, "unknown option '--dry' (did you mean '--dry-run'?)");
	expect_usage(ARGC(ntasks), ntasks, "--ntasks: expected the number of tasks in all (got 'four')");
	expect_usage(ARGC(no_nodes), no_nodes, "--nodes needs a value");
	expect_usage(ARGC(status_n), status_n, "status: unknown option '-N'");
	expect_usage(ARGC(unknown_short), unknown_short, "unknown option '-x'");
	expect_usage(ARGC(help_value), help_value, "--help takes no value");
	expect_usage(ARGC(help_short), help_short, "--help takes no value");
	/* a file of a command-like name is a spec, as before */
	f = fopen("logz", "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(parse(ARGC(spec_named), spec_named, &a, &err), 0);
	assert_int_equal(a.cmd, LAUNCH_SUBMIT);
	assert_string_equal(a.spec_path, "logz");
	launch_args_free(&a);
	remove("logz");
	expect_usage(ARGC(spec_named), spec_named, "unknown command 'logz' (did you mean 'logs'?)");
}

static void test_double_dash(void **state)
{
	char *argv[] = { "dtrain-submit", "submit", "--", "--weird-name.json" };
	struct launch_args a;
	struct dt_err err = {0};

	(void)state;
	assert_int_equal(parse(ARGC(argv), argv, &a, &err), 0);
	assert_string_equal(a.spec_path, "--weird-name.json");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_submit_forms),
		cmocka_unit_test(test_other_commands),
		cmocka_unit_test(test_help_everywhere),
		cmocka_unit_test(test_usage_errors),
		cmocka_unit_test(test_double_dash),
		cmocka_unit_test(test_slurm_options),
		cmocka_unit_test(test_sweep_and_after),
		cmocka_unit_test(test_mistyped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
