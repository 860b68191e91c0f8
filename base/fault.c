/*
 * fault.c - the fault injection table (fault.h).
 */
#include "base/fault.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

static const char *const var[] = {
	[DT_FAULT_WRITE] = "DTRAIN_FAULT_WRITE",
	[DT_FAULT_SNAPSHOT] = "DTRAIN_FAULT_SNAPSHOT",
	[DT_FAULT_SPLIT] = "DTRAIN_FAULT_SPLIT",
	[DT_FAULT_MPI_INIT] = "DTRAIN_FAULT_MPI_INIT",
	[DT_FAULT_FLIP] = "DTRAIN_FAULT_FLIP",
	[DT_FAULT_STEP] = "DTRAIN_FAULT_STEP",
};

/* A decimal number at s, all digits up to *end; false when there is none. */
static bool number(const char *s, char **end, unsigned long long *v)
{
	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	*v = strtoull(s, end, 10);
	return errno == 0;
}

bool dt_fault(enum dt_fault_point p, const char *kind, int rank, unsigned long long *n)
{
	const char *f = getenv(var[p]);
	size_t len = strlen(kind);
	unsigned long long v, r;
	char *end;

	if (!f || strncmp(f, kind, len) || f[len] != '@' || !number(f + len + 1, &end, &v))
		return false;
	if (*end == ':' && (!number(end + 1, &end, &r) || *end || rank < 0 || r != (unsigned long long)rank))
		return false;
	if (*end && *end != ':')
		return false;
	*n = v;
	return true;
}

void dt_fault_sleep(enum dt_fault_point p, int rank, unsigned long long ms)
{
	static atomic_bool noted[sizeof(var) / sizeof(var[0])];

	if (!atomic_exchange(&noted[p], true))
		fprintf(stderr, "dtrain: test fault %s: rank %d slow by %llu ms (noted once)\n", var[p],
			rank, ms);
	dt_sleep_ms(ms);
}

void dt_fault_slow(enum dt_fault_point p, int rank)
{
	unsigned long long ms;

	if (dt_fault(p, "slow", rank, &ms))
		dt_fault_sleep(p, rank, ms);
}
