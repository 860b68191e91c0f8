/*
 * cpus.c - CPU lists, and the machine's CPU model and bf16 instructions
 * (cpus.h).
 */
#include "base/cpus.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dt_cpulist_count(const char *list)
{
	const char *p = list;
	long n = 0, a, b;
	char *end;

	while (*p && *p != '\n') {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		a = b = strtol(p, &end, 10);
		p = end;
		if (*p == '-') {
			if (p[1] < '0' || p[1] > '9')
				return -EINVAL;
			b = strtol(p + 1, &end, 10);
			p = end;
		}
		if (b < a || b - a >= 1L << 20)
			return -EINVAL;
		n += b - a + 1;
		if (*p == ',')
			p++;
		else if (*p && *p != '\n')
			return -EINVAL;
	}
	return n > 0 && n <= INT_MAX ? (int)n : -EINVAL;
}

/* --- the CPU --- */

bool dt_cpu_flags_bf16(const char *flags)
{
	static const char *const words[] = { "avx512_bf16", "amx_bf16", "bf16" };
	const char *p = flags;
	size_t n, i;

	while (p && *p) {
		p += strspn(p, " \t\n");
		n = strcspn(p, " \t\n");
		for (i = 0; i < sizeof(words) / sizeof(words[0]); i++)
			if (n && n == strlen(words[i]) && !strncmp(p, words[i], n))
				return true;
		p += n;
	}
	return false;
}

/* The value of a "key\t: value" line, without its newline */
static const char *value_of(char *line, const char *key)
{
	size_t n = strlen(key);
	char *v;

	if (strncmp(line, key, n) || (line[n] != ' ' && line[n] != '\t' && line[n] != ':'))
		return NULL;
	v = strchr(line + n, ':');
	if (!v)
		return NULL;
	v += 1 + strspn(v + 1, " \t");
	v[strcspn(v, "\n")] = '\0';
	return v;
}

bool dt_cpu_probe(char *model, size_t size, bool *bf16)
{
	const char *env_flags = getenv("DTRAIN_CPU_FLAGS"), *env_model = getenv("DTRAIN_CPU_MODEL");
	char line[8192];
	const char *v;
	bool known = false;
	FILE *f;

	snprintf(model, size, "%s", env_model ? env_model : "");
	*bf16 = true;
	if (env_flags)
		*bf16 = dt_cpu_flags_bf16(env_flags), known = true;
	f = fopen("/proc/cpuinfo", "r");
	while (f && fgets(line, sizeof(line), f) && line[0] != '\n') { /* the first processor */
		if (!env_model && (v = value_of(line, "model name")))
			snprintf(model, size, "%s", v);
		else if (!env_flags && ((v = value_of(line, "flags")) || (v = value_of(line, "Features"))))
			*bf16 = dt_cpu_flags_bf16(v), known = true;
	}
	if (f)
		fclose(f);
	return known;
}
