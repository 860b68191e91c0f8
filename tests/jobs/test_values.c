/*
 * test_values.c - Slurm time and memory strings, and the string helpers the
 * spec checks rely on (edit distance for hints, shell quoting, path joins, CPU lists, the fault table).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/fault.h"
#include "jobs/spec.h"
#include "base/cpus.h"
#include "base/path.h"
#include "base/str.h"

static void slurm_times(void **state)
{
	static const struct { const char *in; long want; } ok[] = {
		{ "0", 0 }, { "90", 5400 }, { "10:30", 630 }, { "01:00:00", 3600 },
		{ "2-0", 172800 }, { "1-02", 93600 }, { "1-02:03", 93780 },
		{ "1-02:03:04", 93784 }, { "100:00:00", 360000 },
	};
	static const char *bad[] = { "", "x", "1:", ":5", "1-", "-1", "1-2-3", "1:2:3:4",
				     "1h", "12 ", "99999999999" };
	size_t i;
	long t;
	char buf[32];

	(void)state;
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(spec_parse_time(ok[i].in, &t), 0);
		assert_int_equal(t, ok[i].want);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(spec_parse_time(bad[i], &t), -EINVAL);
	spec_format_time(93784, buf, sizeof(buf));
	assert_string_equal(buf, "1-02:03:04");
	spec_format_time(3599, buf, sizeof(buf));
	assert_string_equal(buf, "00:59:59");
	assert_int_equal(spec_parse_time(buf, &t), 0);
	assert_int_equal(t, 3599);
}

static void memory_sizes(void **state)
{
	static const struct { const char *in; long want; } ok[] = {
		{ "512", 512 }, { "512M", 512 }, { "512MB", 512 }, { "4G", 4096 }, { "4g", 4096 },
		{ "1T", 1048576 }, { "2048K", 2 },
	};
	static const char *bad[] = { "", "G", "4X", "4GiB", "-4G", "4 G", "4GBB" };
	size_t i;
	long m;

	(void)state;
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(spec_parse_mem(ok[i].in, &m), 0);
		assert_int_equal(m, ok[i].want);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(spec_parse_mem(bad[i], &m), -EINVAL);
}

static void edit_distance(void **state)
{
	(void)state;
	assert_int_equal(dt_edit_distance("nodes", "nodes"), 0);
	assert_int_equal(dt_edit_distance("node", "nodes"), 1);
	assert_int_equal(dt_edit_distance("partiton", "partition"), 1);
	assert_int_equal(dt_edit_distance("", "abc"), 3);
	assert_int_equal(dt_edit_distance("kitten", "sitting"), 3);
}

static void closest_word(void **state)
{
	char buf[16];

	(void)state;
	assert_string_equal(dt_closest_word("relu|gelu|tanh", '|', "rleu", 3, buf, sizeof(buf)), "relu");
	assert_string_equal(dt_closest_word("relu|gelu|tanh", '|', "GELU", 3, buf, sizeof(buf)), "gelu");
	assert_null(dt_closest_word("relu|gelu|tanh", '|', "sigmoid", 3, buf, sizeof(buf)));
	assert_string_equal(dt_closest_word("--site --set", ' ', "--sit", 4, buf, sizeof(buf)), "--site");
	assert_null(dt_closest_word("", ' ', "x", 4, buf, sizeof(buf)));
	/* a word longer than buf is skipped, not cut */
	assert_null(dt_closest_word("averyveryverylongword", ' ', "averyveryverylongwort", 4, buf, sizeof(buf)));
}

static void shell_quote(void **state)
{
	struct dt_buf b = {0};

	(void)state;
	assert_int_equal(dt_shell_quote(&b, "plain"), 0);
	assert_int_equal(dt_shell_quote(&b, " it's $(x) `y`\n"), 0);
	assert_int_equal(dt_shell_quote(&b, ""), 0);
	assert_string_equal(b.p, "'plain'' it'\\''s $(x) `y`\n'''");
	dt_buf_free(&b);
}

static void path_join(void **state)
{
	static const struct { const char *dir, *name, *want; } cases[] = {
		{ "data", "train.h5", "data/train.h5" },
		{ "data/", "train.h5", "data/train.h5" },
		{ "data//", "train.h5", "data/train.h5" },
		{ "/", "train.h5", "/train.h5" },
		{ "//", "train.h5", "/train.h5" },
		{ "", "train.h5", "train.h5" },
		{ "/a/b/", "c", "/a/b/c" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = dt_path_join(cases[i].dir, cases[i].name);

		assert_non_null(got);
		assert_string_equal(got, cases[i].want);
		free(got);
	}
}

static void cpu_lists(void **state)
{
	static const struct { const char *in; int want; } cases[] = {
		{ "0", 1 }, { "0-1\n", 2 }, { "0-3,8,10-11", 7 }, { "5-5", 1 },
		{ "", -EINVAL }, { "\n", -EINVAL }, { "a", -EINVAL }, { "3-1", -EINVAL },
		{ "0-", -EINVAL }, { "0,,1", -EINVAL }, { "1 2", -EINVAL },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (dt_cpulist_count(cases[i].in) != cases[i].want)
			fail_msg("dt_cpulist_count(\"%s\") = %d, want %d", cases[i].in,
				 dt_cpulist_count(cases[i].in), cases[i].want);
}

static void faults(void **state)
{
	unsigned long long n = 99;

	(void)state;
	unsetenv("DTRAIN_FAULT_SPLIT");
	assert_false(dt_fault(DT_FAULT_SPLIT, "slow", 0, &n));
	setenv("DTRAIN_FAULT_SPLIT", "slow@5", 1);
	assert_true(dt_fault(DT_FAULT_SPLIT, "slow", 3, &n));
	assert_int_equal(n, 5);
	assert_false(dt_fault(DT_FAULT_SPLIT, "enospc", 3, &n));
	setenv("DTRAIN_FAULT_SPLIT", "slow@7:2", 1);
	assert_true(dt_fault(DT_FAULT_SPLIT, "slow", 2, &n));
	assert_int_equal(n, 7);
	assert_false(dt_fault(DT_FAULT_SPLIT, "slow", 1, &n));
	assert_false(dt_fault(DT_FAULT_SPLIT, "slow", -1, &n));
	assert_false(dt_fault(DT_FAULT_MPI_INIT, "slow", 2, &n)); /* another point */
	setenv("DTRAIN_FAULT_SPLIT", "enospc@0", 1);
	assert_true(dt_fault(DT_FAULT_SPLIT, "enospc", -1, &n));
	assert_int_equal(n, 0);
	setenv("DTRAIN_FAULT_SPLIT", "slowly@5", 1);
	assert_false(dt_fault(DT_FAULT_SPLIT, "slow", 0, &n));
	setenv("DTRAIN_FAULT_SPLIT", "slow@", 1);
	assert_false(dt_fault(DT_FAULT_SPLIT, "slow", 0, &n));
	n = 99;
	setenv("DTRAIN_FAULT_SPLIT", "slow@-1", 1);
	assert_false(dt_fault(DT_FAULT_SPLIT, "slow", 0, &n));
	setenv("DTRAIN_FAULT_SPLIT", "slow@5:x", 1);
	assert_false(dt_fault(DT_FAULT_SPLIT, "slow", 0, &n));
	setenv("DTRAIN_FAULT_SPLIT", "slow@5:", 1);
	assert_false(dt_fault(DT_FAULT_SPLIT, "slow", 0, &n));
	setenv("DTRAIN_FAULT_SPLIT", "slow@5ms", 1);
	assert_false(dt_fault(DT_FAULT_SPLIT, "slow", 0, &n));
	assert_int_equal(n, 99); /* untouched when no fault applies */
	unsetenv("DTRAIN_FAULT_SPLIT");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(slurm_times),
		cmocka_unit_test(memory_sizes),
		cmocka_unit_test(edit_distance),
		cmocka_unit_test(closest_word),
		cmocka_unit_test(shell_quote),
		cmocka_unit_test(path_join),
		cmocka_unit_test(cpu_lists),
		cmocka_unit_test(faults),
	};

	return cmocka_run_group_tests_name("values", tests, NULL, NULL);
}
