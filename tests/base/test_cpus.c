/*
 * test_cpus.c - base/cpus.h: whether a CPU multiplies bf16 natively, from
 * its /proc/cpuinfo flags (an AVX-512 Xeon without BF16 is emulated by
 * oneDNN, slower than fp32: #45), and the probe's DTRAIN_CPU_FLAGS and
 * DTRAIN_CPU_MODEL, which stand for the machine's in tests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "base/cpus.h"

static void flags_say_bf16(void **state)
{
	(void)state;
	/* Sapphire Rapids (AMX), Cooper Lake / Zen 4 (AVX512_BF16), Arm (bf16) */
	assert_true(dt_cpu_flags_bf16("fpu vme avx512f avx512_bf16 amx_tile"));
	assert_true(dt_cpu_flags_bf16("fpu amx_bf16 amx_tile"));
	assert_true(dt_cpu_flags_bf16("fp asimd sve bf16 i8mm"));
	assert_true(dt_cpu_flags_bf16("avx512_bf16\n"));
	/* Skylake / Cascade Lake: AVX-512 without BF16 */
	assert_false(dt_cpu_flags_bf16("fpu vme avx512f avx512bw avx512_vnni"));
	/* a word that only contains one of the names */
	assert_false(dt_cpu_flags_bf16("avx512_bf16x xbf16 amx_bf16_old"));
	assert_false(dt_cpu_flags_bf16(""));
}

static void probe_takes_the_environment(void **state)
{
	char model[64];
	bool bf16 = false;

	(void)state;
	setenv("DTRAIN_CPU_FLAGS", "fpu avx512f avx512_vnni", 1);
	setenv("DTRAIN_CPU_MODEL", "Intel(R) Xeon(R) Gold 6230", 1);
	assert_true(dt_cpu_probe(model, sizeof(model), &bf16));
	assert_false(bf16);
	assert_string_equal(model, "Intel(R) Xeon(R) Gold 6230");
	setenv("DTRAIN_CPU_FLAGS", "fpu avx512f avx512_bf16", 1);
	assert_true(dt_cpu_probe(model, sizeof(model), &bf16));
	assert_true(bf16);
	unsetenv("DTRAIN_CPU_FLAGS");
	unsetenv("DTRAIN_CPU_MODEL");
	/* this machine's own /proc/cpuinfo: a model name and an answer */
	assert_true(dt_cpu_probe(model, sizeof(model), &bf16));
	assert_true(model[0] != '\0');
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(flags_say_bf16),
		cmocka_unit_test(probe_takes_the_environment),
	};

	return cmocka_run_group_tests_name("cpus", tests, NULL, NULL);
}
