/*
 * cpus.h - the CPUs a process may use, as Linux lists them, and what the
 * machine's CPU is (its model, whether it multiplies bf16 natively).
 */
#ifndef DTRAIN_BASE_CPUS_H
#define DTRAIN_BASE_CPUS_H

#include <stdbool.h>
#include <stddef.h>

/* The number of CPUs in a Linux CPU list ("0-3,8,10-11\n": 7), as in
 * cpuset.cpus.effective; -EINVAL when malformed or empty. */
int dt_cpulist_count(const char *list);

/* Does a CPU of these flags (/proc/cpuinfo's "flags" or "Features" line,
 * words separated by blanks) have bf16 instructions: avx512_bf16 or
 * amx_bf16 (x86), bf16 (Arm)? Without them oneDNN emulates bf16 products
 * with float32 instructions, slower than fp32 itself (0.39x to 0.44x
 * measured on a Xeon with AVX-512 but no BF16, 2026-11-28). */
bool dt_cpu_flags_bf16(const char *flags);

/* The machine's CPU, from /proc/cpuinfo's first processor: model (its
 * "model name", "" when none is given) and whether it has bf16
 * instructions (dt_cpu_flags_bf16). The environment's DTRAIN_CPU_FLAGS
 * and DTRAIN_CPU_MODEL, when set, stand for the file's lines (for tests).
 * false when neither says (then *bf16 is true: nothing to warn about). */
bool dt_cpu_probe(char *model, size_t size, bool *bf16);

#endif
