/*
 * fault.c - the fault injection table (fault.h).
 */
#include "base/fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

static const char *const var[] = {
	[DT_FAULT_WRITE] = "DTRAIN_FAULT_WRITE",
	[DT_FAULT_SNAPSHOT] = "DTRAIN_FAULT_SNAPSHOT",
	[DT_FAULT_SPLIT] = "DTRAIN_FAULT_SPLIT",
	[DT_FAULT_MPI_INIT] = "DTRAIN_FAULT_MPI_INIT",
};

bool dt_fault(enum dt_fault_point p, const char *kind, int rank, unsigned long long *n)
{
	const char *f = getenv(var[p]);
	size_t len = strlen(kind);
	int r, got;

	if (!f || strncmp(f, kind, len) || f[len] != '@')
		return false;
	got = sscanf(f + len + 1, "%llu:%d", n, &r);
	return got == 1 || (got == 2 && r == rank);
}

void dt_fault_slow(enum dt_fault_point p, int rank)
{
	unsigned long long ms;

	if (dt_fault(p, "slow", rank, &ms))
		dt_sleep_ms(ms);
}
