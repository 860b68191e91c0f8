/*
 * rng.h - dtrain's own pseudo-random numbers: the same sequence on every
 * machine, compiler and libc, so that parameter initialisation and data
 * shuffling are part of the job's reproducible state.
 *
 * Generator: xoshiro256** (Blackman & Vigna, 2018; 256 bits of state, period
 * 2^256 - 1), seeded through splitmix64 (Steele et al., 2014) from a pair
 * (seed, stream). Different streams of one seed are independent sequences in
 * practice (splitmix64 decorrelates nearby inputs), which is how one seed
 * gives every layer, epoch or rank its own sequence without coordination:
 * e.g. the weights of layer l come from stream l of model.init_seed.
 *
 * Invariants: struct dt_rng is plain integers (no pointers, no floats, no
 * cached values), so it can be copied, compared, and written to a checkpoint
 * and read back to continue the exact sequence. Its state is never all zero.
 *
 * Sections: life cycle, draws, permutations.
 */
#ifndef DTRAIN_BASE_RNG_H
#define DTRAIN_BASE_RNG_H

#include <stdint.h>

struct dt_rng {
	uint64_t s[4]; /* xoshiro256** state; never all zero */
};

/* --- life cycle --- */

/* Seeds r from (seed, stream). The same pair gives the same sequence;
 * different pairs give unrelated sequences. */
void dt_rng_seed(struct dt_rng *r, uint64_t seed, uint64_t stream);

/* --- draws (each advances r) --- */

/* 64 uniformly distributed bits. */
uint64_t dt_rng_u64(struct dt_rng *r);
/* Uniform in [0, bound), without modulo bias (rejection); bound >= 1. */
uint64_t dt_rng_below(struct dt_rng *r, uint64_t bound);
/* Uniform float in [0, 1): the top 24 bits, so every value is k * 2^-24. */
float dt_rng_uniform(struct dt_rng *r);
/* Uniform double in [0, 1): the top 53 bits. */
double dt_rng_uniform_double(struct dt_rng *r);
/* Standard normal (mean 0, variance 1), Box-Muller in double precision.
 * Uses exactly two u64 draws per call and keeps no spare value, so the state
 * stays plain integers. */
float dt_rng_normal(struct dt_rng *r);

/* --- permutations --- */

/* perm[0..n-1] = a uniformly random permutation of 0..n-1 (Fisher-Yates,
 * Durstenfeld's in-place form, driven by dt_rng_seed(seed, stream)). The same
 * (seed, stream, n) gives the same permutation on every machine; e.g. the data
 * sampler uses (train.seed, epoch). n <= 0 writes nothing. */
void dt_rng_permutation(uint64_t seed, uint64_t stream, int64_t *perm, int64_t n);

#endif
