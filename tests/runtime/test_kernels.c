/*
 * test_kernels.c - the numerical kernels (runtime/kernels/kernels.h) against naive
 * double-precision references, and the PRNG they and the model rely on
 * (base/rng.h): known answers, determinism, distributions, permutations.
 *
 * Sections: helpers, rng, linear layers, activations, softmax
 * cross-entropy, threads, main.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <cmocka.h>

#include "runtime/kernels/kernels.h"
#include "base/rng.h"

/* --- helpers --- */

static float *randn(struct dt_rng *r, size_t n, float scale)
{
	float *p = malloc(n * sizeof(*p));
	size_t i;

	assert_non_null(p);
	for (i = 0; i < n; i++)
		p[i] = scale * dt_rng_normal(r);
	return p;
}

/* |got - want| <= tol, with both values in the failure message */
#define assert_close(got, want, tol) do { \
	double g_ = (got), w_ = (want), t_ = (tol); \
	if (!(fabs(g_ - w_) <= t_)) \
		fail_msg("%s = %.9g, want %.9g (tolerance %.3g)", #got, g_, w_, t_); \
} while (0)

/* --- rng --- */

/* xoshiro256** from state {1, 2, 3, 4}: the reference implementation's output */
static void test_rng_known_answer(void **state)
{
	struct dt_rng r = { { 1, 2, 3, 4 } };

	(void)state;
	assert_int_equal(dt_rng_u64(&r), 11520ULL);
	assert_int_equal(dt_rng_u64(&r), 0ULL);
	assert_int_equal(dt_rng_u64(&r), 1509978240ULL);
	assert_int_equal(dt_rng_u64(&r), 1215971899390074240ULL);
	/* Seeding is frozen too: these values are part of every checkpoint's and
	 * every initialisation's meaning (computed by an independent Python
	 * implementation of rng.c's seeding). */
	dt_rng_seed(&r, 1234, 0);
	assert_int_equal(dt_rng_u64(&r), 0xd6281e39ae29bde8ULL);
	assert_int_equal(dt_rng_u64(&r), 0xefbd9dce59a797d3ULL);
	dt_rng_seed(&r, 1234, 7);
	assert_int_equal(dt_rng_u64(&r), 0x62227fcd069e0c81ULL);
	dt_rng_seed(&r, 0, 0);
	assert_int_equal(dt_rng_u64(&r), 0xff73d0ed7d9fce26ULL);
}

static void test_rng_determinism(void **state)
{
	struct dt_rng a, b, c, saved;
	int i, same_stream = 0, same_seed = 0;

	(void)state;
	dt_rng_seed(&a, 42, 3);
	dt_rng_seed(&b, 42, 3);
	for (i = 0; i < 1000; i++)
		assert_int_equal(dt_rng_u64(&a), dt_rng_u64(&b));
	/* neighbouring streams and seeds give unrelated sequences */
	dt_rng_seed(&a, 42, 3);
	dt_rng_seed(&b, 42, 4);
	dt_rng_seed(&c, 43, 3);
	for (i = 0; i < 1000; i++) {
		uint64_t x = dt_rng_u64(&a);

		same_stream += x == dt_rng_u64(&b);
		same_seed += x == dt_rng_u64(&c);
	}
	assert_int_equal(same_stream, 0);
	assert_int_equal(same_seed, 0);
	/* the state is plain data: a copy continues the same sequence */
	dt_rng_seed(&a, 7, 0);
	for (i = 0; i < 10; i++)
		dt_rng_u64(&a);
	memcpy(&saved, &a, sizeof(a));
	for (i = 0; i < 100; i++)
		assert_int_equal(dt_rng_u64(&a), dt_rng_u64(&saved));
}

static void test_rng_distributions(void **state)
{
	const int n = 200000;
	double sum = 0, sum2 = 0, nsum = 0, nsum2 = 0;
	float lo = 1, hi = 0;
	int counts[7] = { 0 }, i, k;
	struct dt_rng r;

	(void)state;
	dt_rng_seed(&r, 99, 0);
	for (i = 0; i < n; i++) {
		float u = dt_rng_uniform(&r), z = dt_rng_normal(&r);

		assert_true(u >= 0.0f && u < 1.0f);
		assert_true(isfinite(z));
		lo = u < lo ? u : lo;
		hi = u > hi ? u : hi;
		sum += u;
		sum2 += (double)u * u;
		nsum += z;
		nsum2 += (double)z * z;
	}
	assert_close(sum / n, 0.5, 0.005);
	assert_close(sum2 / n - (sum / n) * (sum / n), 1.0 / 12, 0.002);
	assert_true(lo < 0.001f && hi > 0.999f);
	assert_close(nsum / n, 0.0, 0.01);
	assert_close(nsum2 / n, 1.0, 0.02);
	/* dt_rng_below: in range, every value about equally often */
	for (i = 0; i < 70000; i++) {
		uint64_t v = dt_rng_below(&r, 7);

		assert_true(v < 7);
		counts[v]++;
	}
	for (k = 0; k < 7; k++)
		assert_in_range(counts[k], 9500, 10500);
	assert_int_equal(dt_rng_below(&r, 1), 0);
	assert_true(dt_rng_uniform_double(&r) < 1.0);
}

static void test_rng_permutation(void **state)
{
	int64_t *p = malloc(1000 * sizeof(*p)), *q = malloc(1000 * sizeof(*q));
	char *seen = calloc(1000, 1);
	int orders[6] = { 0 }, differ, i, k;

	(void)state;
	assert_non_null(p);
	assert_non_null(q);
	assert_non_null(seen);
	dt_rng_permutation(5, 1, p, 1000);
	for (i = 0; i < 1000; i++) { /* a real permutation of 0..999 */
		assert_in_range(p[i], 0, 999);
		assert_int_equal(seen[p[i]], 0);
		seen[p[i]] = 1;
	}
	dt_rng_permutation(5, 1, q, 1000);
	assert_memory_equal(p, q, 1000 * sizeof(*p)); /* deterministic */
	for (k = 0; k < 2; k++) { /* another seed, another stream: another order */
		dt_rng_permutation(k ? 5 : 6, k ? 2 : 1, q, 1000);
		for (differ = 0, i = 0; i < 1000; i++)
			differ += p[i] != q[i];
		assert_true(differ > 900);
	}
	for (differ = 0, i = 0; i < 1000; i++)
		differ += p[i] != i;
	assert_true(differ > 900); /* it shuffles */
	/* uniform: the 6 orders of 3 elements about equally often */
	for (k = 0; k < 6000; k++) {
		dt_rng_permutation(1000 + (uint64_t)k, 0, q, 3);
		orders[q[0] * 2 + (q[1] > q[2])]++;
	}
	for (k = 0; k < 6; k++)
		assert_in_range(orders[k], 850, 1150);
	/* edge sizes */
	q[0] = 77;
	dt_rng_permutation(1, 1, q, 0);
	assert_int_equal(q[0], 77);
	dt_rng_permutation(1, 1, q, 1);
	assert_int_equal(q[0], 0);
	free(seen);
	free(q);
	free(p);
}

/* --- linear layers --- */

static const int shapes[][3] = { /* rows, in, out */
	{ 1, 1, 1 }, { 3, 5, 7 }, { 8, 33, 17 }, { 64, 128, 10 }, { 5, 257, 129 }, { 17, 1, 40 },
};
#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))

static void test_linear_forward_naive(void **state)
{
	struct dt_rng r;
	size_t s;

	(void)state;
	dt_rng_seed(&r, 1, 0);
	for (s = 0; s < NSHAPES; s++) {
		int rows = shapes[s][0], in = shapes[s][1], out = shapes[s][2], i, o, k, bias;
		float *x = randn(&r, (size_t)rows * in, 1.0f);
		float *w = randn(&r, (size_t)out * in, 0.5f);
		float *b = randn(&r, (size_t)out, 1.0f);
		float *y = malloc((size_t)rows * out * sizeof(*y));

		assert_non_null(y);
		for (bias = 0; bias < 2; bias++) {
			rt_linear_forward(x, w, bias ? b : NULL, y, rows, in, out);
			for (i = 0; i < rows; i++) {
				for (o = 0; o < out; o++) {
					double ref = bias ? b[o] : 0.0, mag = fabs(ref);

					for (k = 0; k < in; k++) {
						ref += (double)x[i * in + k] * w[o * in + k];
						mag += fabs((double)x[i * in + k] * w[o * in + k]);
					}
					/* float32 sum of `in` products: error <= ~in * eps * sum|terms| */
					assert_close(y[i * out + o], ref, 1e-6 * (in + 1) * mag + 1e-7);
				}
			}
		}
		free(y);
		free(b);
		free(w);
		free(x);
	}
}

static void test_linear_backward_naive(void **state)
{
	struct dt_rng r;
	size_t s;

	(void)state;
	dt_rng_seed(&r, 2, 0);
	for (s = 0; s < NSHAPES; s++) {
		int rows = shapes[s][0], in = shapes[s][1], out = shapes[s][2], i, o, k;
		float *x = randn(&r, (size_t)rows * in, 1.0f);
		float *w = randn(&r, (size_t)out * in, 0.5f);
		float *dy = randn(&r, (size_t)rows * out, 1.0f);
		float *dw0 = randn(&r, (size_t)out * in, 1.0f); /* earlier micro-batches */
		float *db0 = randn(&r, (size_t)out, 1.0f);
		float *dx = malloc((size_t)rows * in * sizeof(*dx));
		float *dw = malloc((size_t)out * in * sizeof(*dw));
		float *db = malloc((size_t)out * sizeof(*db));

		assert_non_null(dx);
		assert_non_null(dw);
		assert_non_null(db);
		memcpy(dw, dw0, (size_t)out * in * sizeof(*dw));
		memcpy(db, db0, (size_t)out * sizeof(*db));
		memset(dx, 0xff, (size_t)rows * in * sizeof(*dx)); /* NaNs: must be overwritten */
		rt_linear_backward(x, w, dy, dx, dw, db, rows, in, out, true);
		for (i = 0; i < rows; i++) { /* dx = dy W */
			for (k = 0; k < in; k++) {
				double ref = 0, mag = 0;

				for (o = 0; o < out; o++) {
					ref += (double)dy[i * out + o] * w[o * in + k];
					mag += fabs((double)dy[i * out + o] * w[o * in + k]);
				}
				assert_close(dx[i * in + k], ref, 1e-6 * (out + 1) * mag + 1e-7);
			}
		}
		for (o = 0; o < out; o++) { /* dw += dy^T x, db += sum dy */
			double bref = db0[o], bmag = fabs(db0[o]);

			for (k = 0; k < in; k++) {
				double ref = dw0[o * in + k], mag = fabs(ref);

				for (i = 0; i < rows; i++) {
					ref += (double)dy[i * out + o] * x[i * in + k];
					mag += fabs((double)dy[i * out + o] * x[i * in + k]);
				}
				assert_close(dw[o * in + k], ref, 1e-6 * (rows + 1) * mag + 1e-7);
			}
			for (i = 0; i < rows; i++) {
				bref += dy[i * out + o];
				bmag += fabs(dy[i * out + o]);
			}
			assert_close(db[o], bref, 1e-6 * (rows + 1) * bmag + 1e-7);
		}
		/* NULL outputs are skipped; dx alone still matches */
		memcpy(dw, dw0, (size_t)out * in * sizeof(*dw));
		rt_linear_backward(x, w, dy, NULL, dw, NULL, rows, in, out, true);
		rt_linear_backward(x, w, dy, dx, NULL, NULL, rows, in, out, true);
		assert_true(isfinite(dx[0]));
		free(db);
		free(dw);
		free(dx);
		free(db0);
		free(dw0);
		free(dy);
		free(w);
		free(x);
	}
}

/* rows == 0 touches nothing */
static void test_linear_empty(void **state)
{
	float x[4] = { 1, 2, 3, 4 }, w[4] = { 1, 1, 1, 1 }, y[4] = { 9, 9, 9, 9 };
	float dw[4] = { 5, 5, 5, 5 }, db[2] = { 6, 6 };

	(void)state;
	rt_linear_forward(x, w, NULL, y, 0, 2, 2);
	rt_linear_backward(x, w, y, NULL, dw, db, 0, 2, 2, true);
	assert_true(y[0] == 9 && dw[3] == 5 && db[1] == 6);
	/* overwriting with nothing to add gives zeros */
	rt_linear_backward(x, w, y, NULL, dw, db, 0, 2, 2, false);
	assert_true(dw[0] == 0 && dw[3] == 0 && db[0] == 0 && db[1] == 0);
}

/* add = false (the first backward of a step) gives bitwise what zeroing
 * dw and db and then adding gives, over shapes around OpenBLAS's blocks,
 * one row included; dx is the same either way. */
static void test_linear_overwrite(void **state)
{
	static const int shapes[][3] = { { 1, 5, 3 }, { 7, 33, 17 }, { 64, 784, 40 }, { 300, 130, 9 } };
	struct dt_rng r;
	size_t k, i;

	(void)state;
	dt_rng_seed(&r, 11, 0);
	for (k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
		int rows = shapes[k][0], in = shapes[k][1], out = shapes[k][2];
		size_t nw = (size_t)out * in;
		float *x = randn(&r, (size_t)rows * in, 1.0f), *w = randn(&r, nw, 0.1f);
		float *dy = randn(&r, (size_t)rows * out, 1.0f);
		float *dw1 = calloc(nw, sizeof(float)), *db1 = calloc((size_t)out, sizeof(float));
		float *dw2 = randn(&r, nw, 1.0f), *db2 = randn(&r, (size_t)out, 1.0f); /* stale */
		float *dx1 = malloc((size_t)rows * in * sizeof(float));
		float *dx2 = malloc((size_t)rows * in * sizeof(float));

		assert_true(dw1 && db1 && dx1 && dx2);
		rt_linear_backward(x, w, dy, dx1, dw1, db1, rows, in, out, true);
		rt_linear_backward(x, w, dy, dx2, dw2, db2, rows, in, out, false);
		for (i = 0; i < nw; i++)
			if (memcmp(&dw1[i], &dw2[i], sizeof(float)))
				fail_msg("%dx%dx%d: dw[%zu] %.9g, want %.9g", rows, in, out, i, dw2[i], dw1[i]);
		for (i = 0; i < (size_t)out; i++)
			if (memcmp(&db1[i], &db2[i], sizeof(float)))
				fail_msg("%dx%dx%d: db[%zu] %.9g, want %.9g", rows, in, out, i, db2[i], db1[i]);
		assert_memory_equal(dx1, dx2, (size_t)rows * in * sizeof(float));
		free(dx2);
		free(dx1);
		free(db2);
		free(dw2);
		free(db1);
		free(dw1);
		free(dy);
		free(w);
		free(x);
	}
}

/* --- activations --- */

static double gelu_tanh(double x)
{
	return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static double act_ref(enum rt_act a, double x)
{
	switch (a) {
	case RT_ACT_RELU: return x > 0 ? x : 0;
	case RT_ACT_GELU: return gelu_tanh(x);
	case RT_ACT_TANH: return tanh(x);
	}
	return NAN;
}

static void test_act_parse(void **state)
{
	enum rt_act a = RT_ACT_TANH;

	(void)state;
	assert_int_equal(rt_act_parse("relu", &a), 0);
	assert_int_equal(a, RT_ACT_RELU);
	assert_int_equal(rt_act_parse("gelu", &a), 0);
	assert_int_equal(a, RT_ACT_GELU);
	assert_int_equal(rt_act_parse("tanh", &a), 0);
	assert_int_equal(a, RT_ACT_TANH);
	assert_int_equal(rt_act_parse("sigmoid", &a), -EINVAL);
	assert_int_equal(rt_act_parse("RELU", &a), -EINVAL);
	assert_int_equal(rt_act_parse(NULL, &a), -EINVAL);
	assert_int_equal(a, RT_ACT_TANH); /* untouched on failure */
	assert_string_equal(rt_act_name(RT_ACT_GELU), "gelu");
}

/* forward against double references; backward against central differences
 * of the double reference (h = 1e-4: truncation ~1e-8, rounding ~1e-12) */
static void test_act_forward_backward(void **state)
{
	enum rt_act acts[] = { RT_ACT_RELU, RT_ACT_GELU, RT_ACT_TANH };
	float x[401], y[401], dy[401], dx[401], inplace[401];
	size_t a, i, n = 401;

	(void)state;
	for (i = 0; i < n; i++) {
		x[i] = -8.0f + 0.04f * (float)i + 0.013f; /* never exactly 0 */
		dy[i] = 0.5f + 0.01f * (float)(i % 7);
	}
	for (a = 0; a < 3; a++) {
		rt_act_forward(acts[a], x, y, n);
		rt_act_backward(acts[a], x, dy, dx, n);
		for (i = 0; i < n; i++) {
			double h = 1e-4, d = (act_ref(acts[a], (double)x[i] + h) -
					      act_ref(acts[a], (double)x[i] - h)) / (2 * h);

			assert_close(y[i], act_ref(acts[a], x[i]), 2e-6 * (1 + fabs(x[i])));
			assert_close(dx[i], dy[i] * d, 1e-5);
		}
		/* in place: y = f(y); dx = dy */
		memcpy(inplace, x, sizeof(x));
		rt_act_forward(acts[a], inplace, inplace, n);
		assert_memory_equal(inplace, y, sizeof(y));
		memcpy(inplace, dy, sizeof(dy));
		rt_act_backward(acts[a], x, inplace, inplace, n);
		assert_memory_equal(inplace, dx, sizeof(dx));
	}
	/* ReLU: derivative 0 at 0, as documented */
	x[0] = 0.0f;
	dy[0] = 1.0f;
	rt_act_backward(RT_ACT_RELU, x, dy, dx, 1);
	assert_true(dx[0] == 0.0f);
}

/* the documented claim: the tanh GELU is within 1e-3 of x Phi(x) */
static void test_gelu_is_tanh_approximation(void **state)
{
	double worst = 0;
	float x, y;

	(void)state;
	for (x = -10.0f; x <= 10.0f; x += 0.01f) {
		double exact = 0.5 * x * (1.0 + erf(x / sqrt(2.0)));

		rt_act_forward(RT_ACT_GELU, &x, &y, 1);
		if (fabs(y - exact) > worst)
			worst = fabs(y - exact);
	}
	printf("# gelu: max |tanh form - x Phi(x)| on [-10, 10] = %.3g\n", worst);
	assert_true(worst < 1e-3);
	assert_true(worst > 1e-5); /* and it is the tanh form, not erf */
}

/* --- softmax cross-entropy --- */

/* naive double reference, no max subtraction (fine for small logits) */
static double xent_naive(const float *z, int label, int classes, double *p)
{
	double sum = 0;
	int c;

	for (c = 0; c < classes; c++)
		sum += exp(z[c]);
	for (c = 0; c < classes; c++)
		p[c] = exp(z[c]) / sum;
	return -log(p[label]);
}

static void test_xent_naive(void **state)
{
	enum { ROWS = 13, CLASSES = 10 };
	float z[ROWS * CLASSES], d[ROWS * CLASSES];
	int32_t labels[ROWS];
	double p[CLASSES], ref = 0;
	int64_t correct = 5, hits = 0;
	struct dt_rng r;
	double loss;
	int i, c;

	(void)state;
	dt_rng_seed(&r, 3, 0);
	for (i = 0; i < ROWS * CLASSES; i++)
		z[i] = 3.0f * dt_rng_normal(&r);
	for (i = 0; i < ROWS; i++)
		labels[i] = (int32_t)dt_rng_below(&r, CLASSES);
	labels[0] = 0; /* row 0's argmax made the label: a hit for sure */
	z[0] = 50.0f;
	loss = rt_softmax_xent(z, labels, ROWS, CLASSES, 0.25f, d, &correct);
	for (i = 0; i < ROWS; i++) {
		int arg = 0;

		ref += xent_naive(z + i * CLASSES, labels[i], CLASSES, p);
		for (c = 0; c < CLASSES; c++) {
			assert_close(d[i * CLASSES + c], (p[c] - (c == labels[i])) * 0.25, 1e-7);
			if (z[i * CLASSES + c] > z[i * CLASSES + arg])
				arg = c;
		}
		hits += arg == labels[i];
	}
	assert_close(loss, ref, 1e-9 * ref + 1e-12);
	assert_int_equal(correct, 5 + hits);
	assert_true(hits >= 1);
	/* optional outputs */
	assert_close(rt_softmax_xent(z, labels, ROWS, CLASSES, 1.0f, NULL, NULL), ref, 1e-9 * ref);
	assert_true(rt_softmax_xent(z, labels, 0, CLASSES, 1.0f, NULL, NULL) == 0.0);
}

/* large logits: the same answer as shifted-down ones, finite, exact limits */
static void test_xent_stable(void **state)
{
	float big[3] = { 1000.0f, 1001.0f, 999.0f }, small[3] = { 0.0f, 1.0f, -1.0f };
	float huge[3] = { 1e30f, -1e30f, 0.0f }, d1[3], d2[3];
	int32_t l1 = 0, l2 = 1;
	int64_t correct = 0;
	double a, b;
	int c;

	(void)state;
	a = rt_softmax_xent(big, &l1, 1, 3, 1.0f, d1, &correct);
	b = rt_softmax_xent(small, &l1, 1, 3, 1.0f, d2, NULL);
	assert_true(isfinite(a));
	assert_close(a, b, 1e-12);
	/* -log(e^0 / (e^0 + e^1 + e^-1)) */
	assert_close(a, log(1.0 + exp(1.0) + exp(-1.0)), 1e-12);
	for (c = 0; c < 3; c++)
		assert_close(d1[c], d2[c], 1e-7);
	assert_int_equal(correct, 0); /* argmax is 1 */
	/* 1e30 against -1e30: the right class costs 0, the wrong one 2e30 */
	a = rt_softmax_xent(huge, &l1, 1, 3, 1.0f, d1, &correct);
	assert_true(a == 0.0);
	assert_true(d1[0] == 0.0f && d1[1] == 0.0f && d1[2] == 0.0f);
	a = rt_softmax_xent(huge, &l2, 1, 3, 1.0f, d1, &correct);
	assert_close(a, 2e30, 1e24);
	assert_true(d1[0] == 1.0f && d1[1] == -1.0f && d1[2] == 0.0f);
	assert_int_equal(correct, 1);
}

/* ties go to the first maximum */
static void test_xent_ties(void **state)
{
	float z[4] = { 2.0f, 2.0f, 2.0f, 2.0f };
	int32_t first = 0, other = 2;
	int64_t correct = 0;

	(void)state;
	assert_close(rt_softmax_xent(z, &first, 1, 4, 1.0f, NULL, &correct), log(4.0), 1e-12);
	assert_int_equal(correct, 1);
	rt_softmax_xent(z, &other, 1, 4, 1.0f, NULL, &correct);
	assert_int_equal(correct, 1);
}

/* an out-of-range label: NAN, nothing written, the row found */
static void test_xent_bad_label(void **state)
{
	float z[6] = { 1, 2, 3, 4, 5, 6 }, d[6];
	int32_t labels[2] = { 1, 3 }, neg[2] = { -1, 0 };
	int64_t correct = 7;
	int i;

	(void)state;
	for (i = 0; i < 6; i++)
		d[i] = 42.0f;
	assert_true(isnan(rt_softmax_xent(z, labels, 2, 3, 1.0f, d, &correct)));
	for (i = 0; i < 6; i++)
		assert_true(d[i] == 42.0f);
	assert_int_equal(correct, 7);
	assert_int_equal(rt_labels_check(labels, 2, 3), 1);
	assert_true(isnan(rt_softmax_xent(z, neg, 2, 3, 1.0f, d, &correct)));
	assert_int_equal(rt_labels_check(neg, 2, 3), 0);
	assert_int_equal(rt_labels_check(labels, 2, 4), -1);
}

/* --- threads --- */

static void test_blas_threads(void **state)
{
	(void)state;
	rt_blas_threads(1);
	assert_int_equal(openblas_get_num_threads(), 1);
	rt_blas_threads(0);
	assert_int_equal(openblas_get_num_threads(), 1);
}

/* --- main --- */

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rng_known_answer),
		cmocka_unit_test(test_rng_determinism),
		cmocka_unit_test(test_rng_distributions),
		cmocka_unit_test(test_rng_permutation),
		cmocka_unit_test(test_linear_forward_naive),
		cmocka_unit_test(test_linear_backward_naive),
		cmocka_unit_test(test_linear_empty),
		cmocka_unit_test(test_linear_overwrite),
		cmocka_unit_test(test_act_parse),
		cmocka_unit_test(test_act_forward_backward),
		cmocka_unit_test(test_gelu_is_tanh_approximation),
		cmocka_unit_test(test_xent_naive),
		cmocka_unit_test(test_xent_stable),
		cmocka_unit_test(test_xent_ties),
		cmocka_unit_test(test_xent_bad_label),
		cmocka_unit_test(test_blas_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
