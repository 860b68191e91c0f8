/*
 * sampler.c - per-epoch orders of the data set and the split of each step's
 * global batch over replicas and micro-batches (see sampler.h).
 *
 * Sections: life cycle, epochs and steps, slicing.
 */
#include "runtime/data/sampler.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"

/* --- life cycle --- */

static void order(struct rt_sampler *s, int64_t epoch)
{
	int64_t i;

	if (s->shuffle) {
		dt_rng_permutation(s->seed, (uint64_t)epoch, s->perm, s->n);
	} else {
		for (i = 0; i < s->n; i++)
			s->perm[i] = i;
	}
	s->epoch = epoch;
}

int rt_sampler_init(struct rt_sampler *s, int64_t n, int64_t global_batch, uint64_t seed,
		    bool shuffle, struct dt_err *err)
{
	memset(s, 0, sizeof(*s));
	if (n < 1)
		return dt_err_add(err, "sampler: the data set has no rows (n = %lld)", (long long)n);
	if (global_batch < 1)
		return dt_err_add(err, "sampler: train.global_batch must be >= 1 (got %lld)",
				  (long long)global_batch);
	if ((uint64_t)n > SIZE_MAX / sizeof(int64_t))
		return dt_err_add(err, "sampler: %lld rows do not fit in memory", (long long)n),
		       -ENOMEM;
	s->perm = malloc((size_t)n * sizeof(int64_t));
	if (!s->perm)
		return dt_err_add(err, "sampler: no memory for the order of %lld rows",
				  (long long)n), -ENOMEM;
	s->n = n;
	s->global_batch = global_batch;
	s->seed = seed;
	s->shuffle = shuffle;
	order(s, 0);
	return 0;
}

void rt_sampler_free(struct rt_sampler *s)
{
	free(s->perm);
	memset(s, 0, sizeof(*s));
}

/* --- epochs and steps --- */

int rt_sampler_epoch(struct rt_sampler *s, int64_t epoch)
{
	if (epoch < 0 || !s->perm)
		return -EINVAL;
	if (epoch != s->epoch)
		order(s, epoch);
	return 0;
}

int64_t rt_sampler_steps(const struct rt_sampler *s)
{
	return s->global_batch ? (s->n + s->global_batch - 1) / s->global_batch : 0;
}

int64_t rt_sampler_rows(const struct rt_sampler *s, int64_t step)
{
	int64_t first;

	if (step < 0 || step >= rt_sampler_steps(s))
		return 0;
	first = step * s->global_batch;
	return s->n - first < s->global_batch ? s->n - first : s->global_batch;
}

void rt_sampler_micro(const struct rt_sampler *s, int64_t step, int replica, int replicas,
		      int micro, int micro_batches, const int64_t **idx, int64_t *count)
{
	int64_t rows = rt_sampler_rows(s, step), o1, c1, o2;

	*idx = NULL;
	*count = 0;
	if (!rows || replicas < 1 || replica < 0 || replica >= replicas || micro_batches < 1 ||
	    micro < 0 || micro >= micro_batches)
		return;
	rt_sampler_slice(rows, replicas, replica, &o1, &c1);
	rt_sampler_slice(c1, micro_batches, micro, &o2, count);
	*idx = s->perm + step * s->global_batch + o1 + o2;
}

/* --- slicing --- */

void rt_sampler_slice(int64_t rows, int parts, int part, int64_t *offset, int64_t *count)
{
	int64_t base, rem;

	if (rows < 0 || parts < 1 || part < 0 || part >= parts) {
		*offset = *count = 0;
		return;
	}
	base = rows / parts;
	rem = rows % parts;
	*offset = part * base + (part < rem ? part : rem);
	*count = base + (part < rem);
}
