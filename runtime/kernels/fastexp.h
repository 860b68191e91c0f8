/*
 * fastexp.h - e^x in float32 as straight-line arithmetic, so that gcc
 * vectorises the loops that call it (glibc's expf is a call per element).
 * Range reduction x = n ln2 + r, |r| <= ln2 / 2 (ln2 in two parts, Cody &
 * Waite), then Cephes' degree-6 polynomial for e^r, then 2^n put into the
 * exponent bits. Within 2 ulp of expf over [-87, 88]; x is clamped to that
 * range first (e^-87 ~ 1.6e-38, e^88 ~ 1.7e38). gcc vectorises a loop of
 * it only without -ftrapping-math (the clamps' compares "could trap"):
 * runtime/CMakeLists.txt builds its callers with -fno-trapping-math, which
 * changes no result (dtrain never unmasks floating-point exceptions).
 * Private to the runtime's kernels (kernels.c, transformer.c, elem.h and
 * through it the GPU's kernels).
 */
#ifndef DTRAIN_RUNTIME_FASTEXP_H
#define DTRAIN_RUNTIME_FASTEXP_H

#include <stdint.h>

/* An element function of the kernels, compiled for the CPU and, by nvcc,
 * for the GPU as well (elem.h). */
#ifndef RT_ELEM
#ifdef __CUDACC__
#define RT_ELEM static inline __host__ __device__
#else
#define RT_ELEM static inline __attribute__((always_inline))
#endif
#endif

RT_ELEM float rt__expf(float x)
{
	const float log2e = 1.44269504088896341f, ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
	union { int32_t i; float f; } u; /* the bits of 2^n */
	float n, r, p;
	int32_t e;

	float in = x;

	x = x < -87.0f ? -87.0f : x;
	x = x > 88.0f ? 88.0f : x;
	x = x == x ? x : 0.0f; /* NaN: no conversion of it to an integer; NaN out below */
	/* round to nearest by adding and taking away 1.5 * 2^23 (|x log2e| < 2^22):
	 * no call to floorf, which the baseline x86-64 lacks an instruction for */
	n = (x * log2e + 12582912.0f) - 12582912.0f;
	r = x - n * ln2_hi;
	r = r - n * ln2_lo;
	p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + r + 1.0f;
	e = ((int32_t)n + 127) << 23;
	u.i = e;
	return in == in ? p * u.f : in;
}

#endif
