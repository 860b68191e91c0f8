/*
 * test_bf16.c - linear layers with bf16 products (runtime/kernels/bf16.h):
 * the rounding to bf16, and each product of the forward and backward pass
 * against two references on random data of several shapes (a remainder
 * of rows and columns, the bias and no bias, accumulating and not):
 *   - the same product in double from the bf16-rounded inputs: what oneDNN
 *     computes, up to float32 accumulation, so within 2^-20 of the sum of
 *     the terms' magnitudes (K terms in float32 summed in blocks: far
 *     inside this);
 *   - the float32 layer (rt_linear_*): within the bf16 bound, 2^-7 of the
 *     sum of the terms' magnitudes (each input rounded to 8 significant
 *     bits, a relative error of at most u = 2^-8: a term's below 2u);
 * and the bias gradient, which stays float32, bitwise the float32 layer's;
 * with the input kept by the forward (keep), the kept copy is x rounded to
 * bf16 and the backward reads it instead of x (given NULL).
 *
 * Sections: helpers, rounding, layers, main.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/rng.h"
#include "runtime/kernels/bf16.h"
#include "runtime/kernels/kernels.h"

/* --- helpers --- */

static float *randn(size_t n, uint64_t seed)
{
	float *p = malloc((n ? n : 1) * sizeof(*p));
	struct dt_rng r;
	size_t i;

	assert_non_null(p);
	dt_rng_seed(&r, seed, 1);
	for (i = 0; i < n; i++)
		p[i] = dt_rng_normal(&r);
	return p;
}

static double rb(float f)
{
	return (double)rt_bf16_float(rt_bf16_round(f));
}

/* got[i][j] against sum over k of a(i, k) b(k, j), both ways (above);
 * a(i, k) = A[i * as + k * ak], b(k, j) = B[k * bs + j * bk], plus base */
struct mm {
	const float *A, *B;
	size_t as, ak, bs, bk;
	int m, n, k;
	const float *base; /* what the product was added to ([m][n]), or NULL */
	const float *fp32; /* the float32 layer's result [m][n] */
};

static void check_mm(const char *what, const float *got, const struct mm *p)
{
	int i, j, k;

	for (i = 0; i < p->m; i++)
		for (j = 0; j < p->n; j++) {
			double exact = p->base ? p->base[(size_t)i * p->n + j] : 0.0, mag = fabs(exact);
			double g = got[(size_t)i * p->n + j];

			for (k = 0; k < p->k; k++) {
				float a = p->A[i * p->as + k * p->ak], b = p->B[k * p->bs + j * p->bk];

				exact += rb(a) * rb(b);
				mag += fabs((double)a * b) * 1.01; /* rounding may grow a term by 2^-7 */
			}
			if (!(fabs(g - exact) <= ldexp(mag, -20) + 1e-30))
				fail_msg("%s[%d][%d] = %.9g, the bf16 product is %.9g (bound %.3g)", what, i, j,
					 g, exact, ldexp(mag, -20));
			if (!(fabs(g - p->fp32[(size_t)i * p->n + j]) <= ldexp(mag, -7)))
				fail_msg("%s[%d][%d] = %.9g, float32 gives %.9g: beyond the bf16 bound %.3g", what,
					 i, j, g, p->fp32[(size_t)i * p->n + j], ldexp(mag, -7));
		}
}

/* --- rounding --- */

static void test_round(void **state)
{
	(void)state;
	assert_true(rt_bf16_float(rt_bf16_round(1.0f)) == 1.0f);
	/* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to the even one, 1 */
	assert_true(rt_bf16_float(rt_bf16_round(1.0f + 0x1p-8f)) == 1.0f);
	/* 1 + 3 x 2^-8: halfway, to the even 1 + 2^-6 */
	assert_true(rt_bf16_float(rt_bf16_round(1.0f + 3 * 0x1p-8f)) == 1.0f + 0x1p-6f);
	assert_true(rt_bf16_float(rt_bf16_round(1.0f + 0x1p-8f + 0x1p-12f)) == 1.0f + 0x1p-7f);
	assert_true(rt_bf16_float(rt_bf16_round(-2.5f)) == -2.5f);
	assert_true(isinf(rt_bf16_float(rt_bf16_round(INFINITY))));
	assert_true(isnan(rt_bf16_float(rt_bf16_round(NAN))));
	/* the largest float rounds up to infinity, as in IEEE */
	assert_true(isinf(rt_bf16_float(rt_bf16_round(3.4028235e38f))));
}

/* --- layers --- */

static void check_layer(struct rt_bf16 *b, int rows, int in, int out, bool bias, bool add,
			bool kept)
{
	unsigned short *keep = kept ? malloc(sizeof(*keep) * rows * in) : NULL;
	float *x = randn((size_t)rows * in, 1), *w = randn((size_t)out * in, 2);
	float *bb = randn((size_t)out, 3), *dy = randn((size_t)rows * out, 4);
	float *y = malloc(sizeof(float) * rows * out), *y32 = malloc(sizeof(float) * rows * out);
	float *dx = malloc(sizeof(float) * rows * in), *dx32 = malloc(sizeof(float) * rows * in);
	float *dw = randn((size_t)out * in, 5), *dw32 = malloc(sizeof(float) * out * in);
	float *dw0 = malloc(sizeof(float) * out * in), *base = malloc(sizeof(float) * rows * out);
	float *db = randn((size_t)out, 6), *db32 = malloc(sizeof(float) * out);
	struct dt_err err = { 0 };
	struct mm p;
	int i;

	memcpy(dw0, dw, sizeof(float) * out * in);
	memcpy(dw32, dw, sizeof(float) * out * in);
	memcpy(db32, db, sizeof(float) * out);
	rt_bf16_linear_forward(b, x, w, bias ? bb : NULL, y, rows, in, out, keep);
	rt_linear_forward(x, w, bias ? bb : NULL, y32, rows, in, out);
	for (i = 0; keep && i < rows * in; i++)
		if (keep[i] != rt_bf16_round(x[i]))
			fail_msg("kept x[%d] = 0x%04x, x rounds to 0x%04x", i, keep[i], rt_bf16_round(x[i]));
	rt_bf16_linear_backward(b, keep ? NULL : x, keep, w, dy, dx, dw, db, rows, in, out, add);
	rt_linear_backward(x, w, dy, dx32, dw32, db32, rows, in, out, add);
	assert_int_equal(rt_bf16_status(b, &err), 0);
	/* y[r][o] = sum_i x[r][i] w[o][i] (+ b[o]: the base the product adds to) */
	if (bias)
		for (i = 0; i < rows; i++)
			memcpy(base + (size_t)i * out, bb, sizeof(float) * out);
	p = (struct mm){ x, w, (size_t)in, 1, 1, (size_t)in, rows, out, in, bias ? base : NULL, y32 };
	check_mm("y", y, &p);
	/* dx[r][i] = sum_o dy[r][o] w[o][i] */
	p = (struct mm){ dy, w, (size_t)out, 1, (size_t)in, 1, rows, in, out, NULL, dx32 };
	check_mm("dx", dx, &p);
	/* dw[o][i] (+)= sum_r dy[r][o] x[r][i] */
	p = (struct mm){ dy, x, 1, (size_t)out, (size_t)in, 1, out, in, rows, add ? dw0 : NULL, dw32 };
	check_mm("dw", dw, &p);
	assert_memory_equal(db, db32, sizeof(float) * out);
	free(x), free(w), free(bb), free(dy), free(y), free(y32), free(dx), free(dx32);
	free(dw), free(dw32), free(dw0), free(db), free(db32), free(base), free(keep);
}

static void test_layers(void **state)
{
	struct rt_bf16 *b = NULL;
	struct dt_err err = { 0 };

	(void)state;
	assert_int_equal(rt_bf16_init(&b, 1, &err), 0);
	check_layer(b, 7, 33, 10, true, true, false);
	check_layer(b, 64, 48, 40, false, true, false);
	/* the same shapes again: the cached primitives */
	check_layer(b, 64, 48, 40, true, false, false);
	check_layer(b, 1, 5, 3, true, true, false);
	check_layer(b, 130, 96, 288, true, true, false);
	check_layer(b, 7, 33, 10, true, true, true);
	check_layer(b, 130, 96, 288, false, false, true);
	/* rows == 0 writes nothing and fails nothing */
	rt_bf16_linear_forward(b, NULL, NULL, NULL, NULL, 0, 4, 4, NULL);
	rt_bf16_linear_backward(b, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 4, 4, true);
	assert_int_equal(rt_bf16_status(b, &err), 0);
	rt_bf16_free(b);
}

/* --- main --- */

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round),
		cmocka_unit_test(test_layers),
	};

	rt_blas_threads(1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
