/*
 * rng.c - xoshiro256** seeded by splitmix64; uniform, normal and permutation
 * draws built on it (see rng.h).
 *
 * Sections: seeding, draws, permutations.
 */
#include "base/rng.h"

#include <math.h>

/* --- seeding --- */

/* splitmix64 (Steele, Lea & Flood 2014; constants from Vigna's reference
 * splitmix64.c): advances *x and returns a well-mixed 64-bit value. */
static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void dt_rng_seed(struct dt_rng *r, uint64_t seed, uint64_t stream)
{
	uint64_t x = seed, y = stream ^ 0x6a09e667f3bcc909ULL, mix;
	int i;

	/* Hash the stream first, so that (seed, stream) and (seed + 1, stream - 1)
	 * or any other simple relation between pairs give unrelated states. */
	mix = splitmix64(&y);
	x ^= mix;
	for (i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
	if (!(r->s[0] | r->s[1] | r->s[2] | r->s[3]))
		r->s[0] = 0x9e3779b97f4a7c15ULL; /* the one forbidden state */
}

/* --- draws --- */

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* xoshiro256** 1.0 (Blackman & Vigna, https://prng.di.unimi.it/xoshiro256starstar.c) */
uint64_t dt_rng_u64(struct dt_rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

uint64_t dt_rng_below(struct dt_rng *r, uint64_t bound)
{
	/* Reject the lowest (2^64 mod bound) values so that the rest divide
	 * evenly into bound classes (as OpenBSD's arc4random_uniform). */
	uint64_t threshold, x;

	if (bound <= 1)
		return 0;
	threshold = (0 - bound) % bound;
	do
		x = dt_rng_u64(r);
	while (x < threshold);
	return x % bound;
}

float dt_rng_uniform(struct dt_rng *r)
{
	return (float)(dt_rng_u64(r) >> 40) * 0x1.0p-24f;
}

double dt_rng_uniform_double(struct dt_rng *r)
{
	return (double)(dt_rng_u64(r) >> 11) * 0x1.0p-53;
}

float dt_rng_normal(struct dt_rng *r)
{
	/* Box-Muller: u1 in (0, 1] keeps log() finite. */
	double u1 = 1.0 - dt_rng_uniform_double(r);
	double u2 = dt_rng_uniform_double(r);

	return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

/* --- permutations --- */

void dt_rng_permutation(uint64_t seed, uint64_t stream, int64_t *perm, int64_t n)
{
	struct dt_rng r;
	int64_t i;

	if (n <= 0)
		return;
	dt_rng_seed(&r, seed, stream);
	for (i = 0; i < n; i++)
		perm[i] = i;
	for (i = n - 1; i > 0; i--) {
		int64_t j = (int64_t)dt_rng_below(&r, (uint64_t)i + 1);
		int64_t t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}
}
