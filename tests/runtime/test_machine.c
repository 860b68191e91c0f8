/*
 * test_machine.c - how a rank judges the machine it shares (runtime/
 * bootstrap.h): oversubscription from the machine's ranks, threads and CPUs,
 * Open MPI's boolean for yielding, and the singleton bootstrap's own count
 * (one rank, the machine's CPUs as online and cgroup limits say). The count
 * of ranks over PMIx runs in tests/integration/submit_2x2.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "runtime/world/bootstrap.h"

static void oversubscription(void **state)
{
	struct rt_proc p = { 0 };

	(void)state;
	p.machine_size = 4, p.machine_cpus = 2; /* the local cluster on 2 cores */
	assert_true(rt_machine_oversubscribed(&p, 1));
	p.machine_cpus = 4;
	assert_false(rt_machine_oversubscribed(&p, 1));
	assert_true(rt_machine_oversubscribed(&p, 2));
	assert_false(rt_machine_oversubscribed(&p, 0)); /* taken as 1 thread */
	p.machine_size = 2, p.machine_cpus = 64;
	assert_false(rt_machine_oversubscribed(&p, 32));
	assert_true(rt_machine_oversubscribed(&p, 33));
	p.machine_cpus = 0; /* unknown: never judged oversubscribed */
	assert_false(rt_machine_oversubscribed(&p, 1000));
}

static void yield_boolean(void **state)
{
	static const struct { const char *v; bool yields; } cases[] = {
		{ "1", true }, { "2", true }, { "0", false }, { "true", true }, { "TRUE", true },
		{ "yes", true }, { "enabled", true }, { "t", true }, { "y", true },
		{ "false", false }, { "no", false }, { "", false },
	};
	size_t i;

	(void)state;
	unsetenv("OMPI_MCA_mpi_yield_when_idle");
	assert_false(rt_mpi_yields());
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		setenv("OMPI_MCA_mpi_yield_when_idle", cases[i].v, 1);
		if (rt_mpi_yields() != cases[i].yields)
			fail_msg("OMPI_MCA_mpi_yield_when_idle=\"%s\": rt_mpi_yields() = %d, want %d",
				 cases[i].v, !cases[i].yields, cases[i].yields);
	}
	unsetenv("OMPI_MCA_mpi_yield_when_idle");
}

static void singleton_counts(void **state)
{
	struct rt_proc p;
	struct dt_err err = { 0 };
	long online = sysconf(_SC_NPROCESSORS_ONLN);

	(void)state;
	unsetenv("PMIX_NAMESPACE");
	unsetenv("SLURM_PROCID");
	unsetenv("OMPI_COMM_WORLD_RANK");
	assert_int_equal(rt_bootstrap(&p, &err), 0);
	assert_int_equal(p.machine_size, 1);
	assert_true(p.machine_cpus >= 1);
	assert_true(p.machine_cpus <= online);
	assert_false(rt_machine_oversubscribed(&p, 1));
	rt_bootstrap_fini(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(oversubscription),
		cmocka_unit_test(yield_boolean),
		cmocka_unit_test(singleton_counts),
	};

	return cmocka_run_group_tests_name("machine", tests, NULL, NULL);
}
