/*
 * sampler.h - which rows of the data set each step trains on, and which
 * part of them each data-parallel replica and micro-batch takes.
 *
 * The contract: the GLOBAL batch of a step depends only on (n, global_batch,
 * seed, shuffle, epoch, step), never on the layout. Changing parallel.data or
 * parallel.micro_batches changes who computes which rows, not which rows a
 * step sees, so the loss curve stays the same (up to the order of floating
 * point sums) as long as the loss is the mean over the step's rows:
 * sum per-row losses and gradients over replicas, divide by
 * rt_sampler_rows(step), not by a per-replica count.
 *
 * Epoch e visits the rows in the order perm_e: a uniformly random
 * permutation of [0, n) from dt_rng_permutation(seed, e) when shuffle is on
 * (base/rng.h; the same on every machine), else the identity.
 * Steps per epoch = ceil(n / global_batch); step k takes
 *
 *	perm_e[k * B .. min((k + 1) * B, n))          B = global_batch
 *
 * so every row is seen exactly once per epoch: no padding, no dropping; only
 * the last step of an epoch may be smaller (n % B rows). Unlike PyTorch's
 * DistributedSampler (pad to a multiple of the world, take every R-th), the
 * split below is contiguous and exact, which is what keeps the global batch
 * independent of the layout.
 *
 * Within a step, rt_sampler_slice() splits rows into contiguous, as-even-as-
 * possible parts (the first rows % parts parts get one row more): replica r
 * of R takes slice r of the step's rows, and micro-batch m of M takes slice
 * m of its replica's rows. With a valid spec (global_batch divisible by
 * data x micro_batches) every full step splits evenly; the last, smaller
 * step of an epoch may not, and when it has fewer rows than replicas or
 * micro-batches some parts are EMPTY (count 0): their owner must still take
 * part in every collective and pipeline message of the step, contributing
 * nothing.
 *
 * Memory: the permutation, 8 bytes per row (480 KB for Fashion-MNIST).
 * Sections: life cycle, epochs and steps, slicing.
 */
#ifndef DTRAIN_RUNTIME_SAMPLER_H
#define DTRAIN_RUNTIME_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"

struct rt_sampler {
	int64_t n;            /* rows of the data set, >= 1 */
	int64_t global_batch; /* rows per step, >= 1; the last step of an epoch may have fewer */
	uint64_t seed;        /* train.seed */
	bool shuffle;         /* data.shuffle */
	int64_t epoch;        /* the epoch perm belongs to */
	int64_t *perm;        /* [n]: rows in this epoch's order; owned */
};

/* --- life cycle --- */

/* Allocates the permutation and computes epoch 0's. 0, -EINVAL (n < 1,
 * global_batch < 1; err says which) or -ENOMEM. Free with rt_sampler_free(). */
int rt_sampler_init(struct rt_sampler *s, int64_t n, int64_t global_batch, uint64_t seed,
		    bool shuffle, struct dt_err *err);

/* Frees the permutation and zeroes s; safe on a zeroed s. */
void rt_sampler_free(struct rt_sampler *s);

/* --- epochs and steps --- */

/* Makes perm epoch's order (epoch >= 0, else -EINVAL). Does nothing when it
 * already is, so a loop may call it at every step, which is also how a run
 * resumed in the middle of an epoch gets the right order. */
int rt_sampler_epoch(struct rt_sampler *s, int64_t epoch);

/* Steps per epoch: ceil(n / global_batch). */
int64_t rt_sampler_steps(const struct rt_sampler *s);

/* Rows of step's global batch: global_batch, or n % global_batch for the
 * last step when that is not 0. 0 for a step outside [0, steps). */
int64_t rt_sampler_rows(const struct rt_sampler *s, int64_t step);


/* The rows of micro-batch `micro` (of micro_batches) of replica `replica`
 * (of replicas) in step (in [0, steps) of the current epoch; *idx points
 * into perm, valid until the next rt_sampler_epoch() or rt_sampler_free()):
 * the step's global batch of rt_sampler_rows(step) rows, then slice `replica` of
 * `replicas`, then slice `micro` of `micro_batches`. *count may be 0 (then
 * *idx still points into perm, and must not be read). Arguments out of
 * range are a caller bug: *idx = NULL, *count = 0. */
void rt_sampler_micro(const struct rt_sampler *s, int64_t step, int replica, int replicas,
		      int micro, int micro_batches, const int64_t **idx, int64_t *count);

/* --- slicing --- */

/* Part `part` of `parts` of rows, contiguous and as even as possible:
 * the first rows % parts parts get one row more.
 *   *offset = part * (rows / parts) + min(part, rows % parts)
 *   *count  = rows / parts + (part < rows % parts)
 * e.g. 10 rows in 4 parts: [0,3) [3,6) [6,8) [8,10); 2 rows in 4: 1 1 0 0.
 * parts >= 1, 0 <= part < parts, rows >= 0; otherwise *offset = *count = 0. */
void rt_sampler_slice(int64_t rows, int parts, int part, int64_t *offset, int64_t *count);

#endif
