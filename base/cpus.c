/*
 * cpus.c - CPU lists (cpus.h).
 */
#include "base/cpus.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>

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
