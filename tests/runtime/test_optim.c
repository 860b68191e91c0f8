/*
 * test_optim.c - the optimizers, learning-rate schedule and clipping
 * helpers of runtime/model/optim.h: SGD with momentum and AdamW against values
 * worked out by hand for three steps, the same rules on a long vector
 * against a double-precision reference, the fused training-loop update
 * against the separate steps, the sharded optimizer's packed pieces
 * against the same elements of a whole update, ranges exempt from weight
 * decay, the
 * schedule at its landmarks, and the errors
 * of a bad optimizer spec.
 *
 * Sections: helpers, sgd, adamw, schedule, clipping, errors, main.
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

#include <cmocka.h>

#include "runtime/model/model.h"
#include "runtime/model/optim.h"
#include "runtime/world/pool.h"
#include "base/rng.h"

/* --- helpers --- */

/* |got - want| <= tol, with both values in the failure message */
#define assert_close(got, want, tol) do { \
	double g_ = (got), w_ = (want), t_ = (tol); \
	if (!(fabs(g_ - w_) <= t_)) \
		fail_msg("%s = %.10g, want %.10g (tolerance %.3g)", #got, g_, w_, t_); \
} while (0)

/* A spec holding only train.optimizer and train.lr_schedule. */
struct opt_spec {
	struct spec s;
	double betas[2];
};

static void opt_set(struct opt_spec *o, const char *type, double lr, double momentum,
		    double wd)
{
	memset(o, 0, sizeof(*o));
	o->betas[0] = 0.9;
	o->betas[1] = 0.999;
	o->s.train.optimizer.type = (char *)type;
	o->s.train.optimizer.lr = lr;
	o->s.train.optimizer.momentum = momentum;
	o->s.train.optimizer.betas.v = o->betas;
	o->s.train.optimizer.betas.n = 2;
	o->s.train.optimizer.weight_decay = wd;
	o->s.train.lr_schedule.decay = "cosine";
}

static void optim_ok(struct rt_optim *opt, const struct spec *s, size_t n)
{
	struct dt_err err = { 0 };

	assert_int_equal(rt_optim_init(opt, s, n, &err), 0);
	assert_int_equal(err.count, 0);
}

/* the three gradients both hand-worked examples use, for w = {1, -2} */
static const float grads3[3][2] = { { 0.5f, -1.0f }, { 0.25f, 0.5f }, { -0.5f, 0.0f } };

/* --- sgd --- */

/* mu = 0.9, lr = 0.1, wd = 0.01 (L2: g' = g + wd w; v = mu v + g'; w -= lr v)
 *  step 1: g' = 0.5 + 0.01         = 0.51        v = 0.51       w = 1 - 0.051        = 0.949
 *          g' = -1 - 0.02          = -1.02       v = -1.02      w = -2 + 0.102       = -1.898
 *  step 2: g' = 0.25 + 0.00949     = 0.25949     v = 0.459 + 0.25949 = 0.71849
 *                                                               w = 0.949 - 0.071849 = 0.877151
 *          g' = 0.5 - 0.01898      = 0.48102     v = -0.918 + 0.48102 = -0.43698
 *                                                               w = -1.898 + 0.043698 = -1.854302
 *  step 3: g' = -0.5 + 0.00877151  = -0.49122849 v = 0.646641 - 0.49122849 = 0.15541251
 *                                                               w = 0.861609749
 *          g' = -0.01854302                      v = -0.393282 - 0.01854302 = -0.41182502
 *                                                               w = -1.813119498 */
static void test_sgd_momentum_by_hand(void **state)
{
	static const double want_w[3][2] = {
		{ 0.949, -1.898 }, { 0.877151, -1.854302 }, { 0.861609749, -1.813119498 } };
	static const double want_v[3][2] = {
		{ 0.51, -1.02 }, { 0.71849, -0.43698 }, { 0.15541251, -0.41182502 } };
	float w[2] = { 1.0f, -2.0f };
	struct opt_spec o;
	struct rt_optim opt;
	int t, i;

	(void)state;
	opt_set(&o, "sgd", 0.1, 0.9, 0.01);
	optim_ok(&opt, &o.s, 2);
	assert_int_equal(opt.type, RT_OPTIM_SGD);
	assert_null(opt.v);
	for (t = 0; t < 3; t++) {
		rt_optim_step(&opt, w, grads3[t], 2, 0.1);
		assert_int_equal(opt.step, t + 1);
		for (i = 0; i < 2; i++) {
			assert_close(w[i], want_w[t][i], 2e-7 * 2);
			assert_close(opt.m[i], want_v[t][i], 2e-7 * 2);
		}
	}
	rt_optim_free(&opt);
	rt_optim_free(&opt); /* twice is safe */
}

/* momentum 0, no decay: plain w -= lr g */
static void test_sgd_plain(void **state)
{
	float w[3] = { 1.0f, 2.0f, 3.0f }, g[3] = { 1.0f, -1.0f, 0.5f };
	struct opt_spec o;
	struct rt_optim opt;

	(void)state;
	opt_set(&o, "sgd", 0.5, 0.0, 0.0);
	optim_ok(&opt, &o.s, 3);
	rt_optim_step(&opt, w, g, 3, 0.5);
	rt_optim_step(&opt, w, g, 3, 0.25); /* the lr argument, not the spec's, counts */
	assert_true(w[0] == 0.25f && w[1] == 2.75f && w[2] == 2.625f);
	rt_optim_free(&opt);
}

/* --- adamw --- */

/* lr = 0.01, betas (0.9, 0.999), wd = 0.1, eps = 1e-8 (PyTorch's AdamW)
 *  step 1 (t = 1, 1-b1 = 0.1, 1-b2 = 0.001):
 *    w = 1 (1 - 0.001) = 0.999; m = 0.05; v = 0.00025
 *    m^ = 0.05 / 0.1 = 0.5, v^ = 0.00025 / 0.001 = 0.25, sqrt = 0.5
 *    w = 0.999 - 0.01 * 0.5 / (0.5 + 1e-8) = 0.989 (+ 2e-10)
 *    second element: w = -1.998 + 0.01 = -1.988; m = -0.1; v = 0.001
 *  step 2: m = 0.045 + 0.025 = 0.07; v = 0.00024975 + 0.0000625 = 0.00031225
 *    w = 0.989 * 0.999 - 0.01 (0.07 / 0.19) / (sqrt(0.00031225 / 0.001999) + 1e-8)
 *      = 0.988011 - 0.01 * 0.368421 / 0.395226 = 0.978689204
 *  step 3: computed the same way in double: 0.9766026842, -1.9793064881 */
static void test_adamw_by_hand(void **state)
{
	static const double want_w[3][2] = {
		{ 0.9890000002, -1.9880000001 },
		{ 0.9786892040, -1.9833486297 },
		{ 0.9766026842, -1.9793064881 } };
	static const double want_m[3][2] = { { 0.05, -0.1 }, { 0.07, -0.04 }, { 0.013, -0.036 } };
	static const double want_v[3][2] = {
		{ 0.00025, 0.001 }, { 0.00031225, 0.001249 }, { 0.00056193775, 0.001247751 } };
	float w[2] = { 1.0f, -2.0f };
	struct opt_spec o;
	struct rt_optim opt;
	int t, i;

	(void)state;
	opt_set(&o, "adamw", 0.01, 0.0, 0.1);
	optim_ok(&opt, &o.s, 2);
	assert_int_equal(opt.type, RT_OPTIM_ADAMW);
	assert_close(opt.beta1, 0.9, 0);
	assert_close(opt.beta2, 0.999, 0);
	assert_close(opt.eps, 1e-8, 0);
	for (t = 0; t < 3; t++) {
		rt_optim_step(&opt, w, grads3[t], 2, 0.01);
		assert_int_equal(opt.step, t + 1);
		for (i = 0; i < 2; i++) {
			/* float32 state: a few ulps of the double values */
			assert_close(w[i], want_w[t][i], 1e-6);
			assert_close(opt.m[i], want_m[t][i], 5e-7 * fabs(want_m[t][i]));
			assert_close(opt.v[i], want_v[t][i], 5e-7 * fabs(want_v[t][i]));
		}
	}
	rt_optim_free(&opt);
}

/* both rules over a long vector against a double reference of the same
 * formulas (catches indexing and the per-element state) */
static void test_long_vector(void **state)
{
	const size_t n = 1001;
	float *w = malloc(n * sizeof(*w)), *g = malloc(n * sizeof(*g));
	double *rw = malloc(n * sizeof(*rw)), *rm = calloc(n, sizeof(*rm)), *rv = calloc(n, sizeof(*rv));
	struct opt_spec o;
	struct rt_optim opt;
	struct dt_rng r;
	int type, t;
	size_t i;

	(void)state;
	assert_true(w && g && rw && rm && rv);
	for (type = 0; type < 2; type++) {
		dt_rng_seed(&r, 8, (uint64_t)type);
		opt_set(&o, type ? "adamw" : "sgd", 0.05, 0.8, 0.02);
		optim_ok(&opt, &o.s, n);
		for (i = 0; i < n; i++) {
			w[i] = dt_rng_normal(&r);
			rw[i] = w[i];
			rm[i] = rv[i] = 0;
		}
		for (t = 1; t <= 5; t++) {
			double lr = 0.05 / t;

			for (i = 0; i < n; i++)
				g[i] = dt_rng_normal(&r);
			rt_optim_step(&opt, w, g, n, lr);
			for (i = 0; i < n; i++) {
				if (type == 0) {
					rm[i] = 0.8 * rm[i] + g[i] + 0.02 * rw[i];
					rw[i] -= lr * rm[i];
				} else {
					rw[i] *= 1 - lr * 0.02;
					rm[i] = 0.9 * rm[i] + 0.1 * g[i];
					rv[i] = 0.999 * rv[i] + 0.001 * (double)g[i] * g[i];
					rw[i] -= lr * (rm[i] / (1 - pow(0.9, t))) /
						 (sqrt(rv[i] / (1 - pow(0.999, t))) + 1e-8);
				}
				assert_close(w[i], rw[i], 1e-5 * (1 + fabs(rw[i])));
			}
		}
		rt_optim_free(&opt);
	}
	free(rv);
	free(rm);
	free(rw);
	free(g);
	free(w);
}

/* --- schedule --- */

static void test_lr_schedule(void **state)
{
	struct opt_spec o;
	struct spec *s = &o.s;

	(void)state;
	opt_set(&o, "sgd", 0.1, 0.9, 0);
	s->train.lr_schedule.warmup_steps = 10;
	s->train.lr_schedule.min_lr = 0.001;
	/* 111 steps: warm-up 0..9, cosine over 10..110 (span 100) */
	assert_close(rt_lr_at(s, 0, 111), 0.01, 1e-15);    /* warm-up start: lr / W */
	assert_close(rt_lr_at(s, 4, 111), 0.05, 1e-15);
	assert_close(rt_lr_at(s, 9, 111), 0.1, 1e-15);     /* warm-up end: lr */
	assert_close(rt_lr_at(s, 10, 111), 0.1, 1e-15);    /* cosine start: lr */
	assert_close(rt_lr_at(s, 35, 111), 0.001 + 0.5 * 0.099 * (1 + cos(M_PI / 4)), 1e-15);
	assert_close(rt_lr_at(s, 60, 111), 0.0505, 1e-15); /* middle: (lr + min) / 2 */
	assert_close(rt_lr_at(s, 110, 111), 0.001, 1e-15); /* last step: min_lr */
	assert_close(rt_lr_at(s, 500, 111), 0.001, 1e-15); /* beyond: stays */
	assert_close(rt_lr_at(s, -3, 111), 0.01, 1e-15);
	assert_true(rt_lr_at(s, 109, 111) > 0.001 && rt_lr_at(s, 109, 111) < rt_lr_at(s, 108, 111));
	/* no step left to decay over: the peak */
	assert_close(rt_lr_at(s, 10, 11), 0.1, 1e-15);
	assert_close(rt_lr_at(s, 3, 5), 0.04, 1e-15);
	/* no warm-up: step 0 already at lr */
	s->train.lr_schedule.warmup_steps = 0;
	assert_close(rt_lr_at(s, 0, 101), 0.1, 1e-15);
	assert_close(rt_lr_at(s, 50, 101), 0.0505, 1e-15);
	assert_close(rt_lr_at(s, 100, 101), 0.001, 1e-15);
	assert_close(rt_lr_at(s, 0, 1), 0.1, 1e-15); /* a single step */
	/* constant: warm-up, then lr for ever */
	s->train.lr_schedule.warmup_steps = 4;
	s->train.lr_schedule.decay = "constant";
	assert_close(rt_lr_at(s, 0, 100), 0.025, 1e-15);
	assert_close(rt_lr_at(s, 3, 100), 0.1, 1e-15);
	assert_close(rt_lr_at(s, 50, 100), 0.1, 1e-15);
	assert_close(rt_lr_at(s, 99, 100), 0.1, 1e-15);
}

/* --- clipping --- */

static void test_sumsq_scale_clip(void **state)
{
	const size_t big = (1u << 24) + 1000; /* past float's exact integers */
	float g[2] = { 3.0f, -4.0f }, *ones = malloc(big * sizeof(*ones));
	size_t i;

	(void)state;
	assert_close(rt_sumsq(g, 2), 25.0, 0);
	assert_close(rt_clip_factor(5.0, 1.0), 1.0 / (5.0 + 1e-6), 1e-15);
	assert_close(rt_clip_factor(5.0, 10.0), 1.0, 0);
	assert_close(rt_clip_factor(5.0, 0.0), 1.0, 0); /* clipping off */
	/* PyTorch scales at norm == max_norm already: max_norm / (norm + 1e-6) < 1 */
	assert_close(rt_clip_factor(2.0, 2.0), 2.0 / (2.0 + 1e-6), 1e-15);
	assert_true(rt_clip_factor(2.0, 2.0) < 1.0);
	rt_scale(g, 2, 0.5f);
	assert_true(g[0] == 1.5f && g[1] == -2.0f);
	/* accumulated in double: a float sum would stop at 2^24 */
	assert_non_null(ones);
	for (i = 0; i < big; i++)
		ones[i] = 1.0f;
	assert_close(rt_sumsq(ones, big), (double)big, 0);
	free(ones);
}

/* rt_optim_step_take over the whole array, on a pool of 2 threads,
 * against rt_sumsq + rt_scale + rt_optim_step on 1: the same bits for both
 * optimizers, clipped or not, on lengths around the vector width and over
 * several chunks, with the gradient left zero; rt_optim_step leaves its
 * gradient as it was. */
static void test_fused_update(void **state)
{
	static const size_t lens[] = { 1, 7, 8, 9, 1000, 4099, 3 * RT_CHUNK + 5 };
	static const char *types[] = { "sgd", "adamw" };
	struct opt_spec os;
	struct rt_pool pool;
	size_t k, t, i, n;

	(void)state;
	rt_pool_init(&pool, 2);
	assert_int_equal(pool.started, 1);
	for (t = 0; t < 2; t++) {
		for (k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
			struct rt_optim a, b, c;
			struct dt_rng r;
			float *w1, *w2, *w3, *g0, *g1, *g2, *g3;
			int step;

			n = lens[k];
			opt_set(&os, types[t], 0.05, 0.9, 0.01);
			optim_ok(&a, &os.s, n);
			optim_ok(&b, &os.s, n);
			optim_ok(&c, &os.s, n);
			b.pool = &pool; /* chunks over threads: the same bits */
			c.pool = &pool;
			w1 = malloc(n * sizeof(float));
			w2 = malloc(n * sizeof(float));
			w3 = malloc(n * sizeof(float));
			g1 = malloc(n * sizeof(float));
			g2 = malloc(n * sizeof(float));
			g3 = malloc(n * sizeof(float));
			g0 = malloc(n * sizeof(float));
			assert_true(w1 && w2 && w3 && g0 && g1 && g2 && g3);
			dt_rng_seed(&r, 3, n);
			for (i = 0; i < n; i++)
				w1[i] = w2[i] = w3[i] = dt_rng_normal(&r);
			for (step = 0; step < 3; step++) {
				float scale = step == 1 ? 0.37f : 1.0f; /* step 1 clipped */
				double want, got;

				for (i = 0; i < n; i++)
					g1[i] = g2[i] = g3[i] = dt_rng_normal(&r);
				want = rt_sumsq(g1, n);
				if (scale != 1.0f)
					rt_scale(g1, n, scale);
				memcpy(g0, g1, n * sizeof(float));
				memcpy(g2, g1, n * sizeof(float));
				rt_optim_step(&a, w1, g1, n, 0.05);
				rt_optim_step(&b, w2, g0, n, 0.05); /* the same on the pool's 2 threads */
				got = rt_optim_step_take(&c, w3, g3, 0, n, 0.05, scale);
				if (memcmp(&got, &want, sizeof(got)))
					fail_msg("%s n=%zu step %d: take: sum of squares %.17g, want %.17g",
						 types[t], n, step, got, want);
				for (i = 0; i < n; i++)
					if (memcmp(&w3[i], &w2[i], sizeof(float)) ||
					    memcmp(&c.m[i], &b.m[i], sizeof(float)) ||
					    (c.v && memcmp(&c.v[i], &b.v[i], sizeof(float))) || g3[i] != 0.0f)
						fail_msg("%s n=%zu step %d: take: element %zu: w %.9g vs %.9g, gradient %g left",
							 types[t], n, step, i, w3[i], w2[i], g3[i]);
				for (i = 0; i < n; i++) {
					if (memcmp(&w1[i], &w2[i], sizeof(float)) ||
					    memcmp(&a.m[i], &b.m[i], sizeof(float)))
						fail_msg("%s n=%zu step %d: element %zu: w %.9g vs %.9g, m %.9g vs %.9g",
							 types[t], n, step, i, w1[i], w2[i], a.m[i], b.m[i]);
					if (memcmp(&g1[i], &g2[i], sizeof(float)))
						fail_msg("%s n=%zu: rt_optim_step changed gradient %zu (%g to %g)",
							 types[t], n, i, g2[i], g1[i]);
				}
			}
			assert_int_equal(a.step, b.step);
			assert_int_equal(c.step, b.step);
			free(w1);
			free(w2);
			free(w3);
			free(g1);
			free(g2);
			free(g3);
			free(g0);
			rt_optim_free(&a);
			rt_optim_free(&b);
			rt_optim_free(&c);
		}
	}
	rt_pool_free(&pool);
}

/* rt_optim_step_sum on 2 slots (SGD's one-pass sum) and on 3, over a part
 * that starts inside a chunk:
 * the parameters and state bitwise those of rt_optim_step_take on the
 * slots' sum (slot order), outside the part untouched, the slots zero in
 * the part and unchanged outside it. */
static void test_step_sum(void **state)
{
	static const char *types[] = { "sgd", "adamw" };
	const size_t n = 2 * RT_CHUNK + 777, first = 1000, count = RT_CHUNK + 5000;
	struct opt_spec os;
	size_t t, i;

	(void)state;
	for (t = 0; t < 4; t++) {
		struct rt_optim a, b;
		struct dt_rng r;
		float *w1 = malloc(n * sizeof(float)), *w2 = malloc(n * sizeof(float));
		float *sum = malloc(n * sizeof(float)), *s[3];
		int k, step, L = t < 2 ? 2 : 3;

		assert_true(w1 && w2 && sum);
		opt_set(&os, types[t % 2], 0.05, 0.9, 0.01);
		optim_ok(&a, &os.s, n);
		optim_ok(&b, &os.s, n);
		dt_rng_seed(&r, 5, t);
		for (i = 0; i < n; i++)
			w1[i] = w2[i] = dt_rng_normal(&r);
		for (k = 0; k < 3; k++) {
			s[k] = malloc(n * sizeof(float));
			assert_non_null(s[k]);
		}
		for (step = 0; step < 3; step++) {
			for (k = 0; k < 3; k++)
				for (i = 0; i < n; i++)
					s[k][i] = dt_rng_normal(&r);
			if (L == 2)
				memset(s[2], 0, n * sizeof(float)); /* so that the sum below holds */
			for (i = 0; i < n; i++)
				sum[i] = (s[0][i] + s[1][i]) + s[2][i];
			rt_optim_step_take(&a, w1, sum, first, count, 0.05, 1.0f);
			rt_optim_step_sum(&b, w2, s, L, first, count, 0.05);
			for (i = 0; i < n; i++) {
				bool in = i >= first && i < first + count;

				/* the part read is left zero, the rest as it was */
				for (k = 0; k < L; k++)
					if (in && s[k][i] != 0.0f)
						fail_msg("%d slots, step %d: slot %d element %zu left %g", L, step,
							 k, i, s[k][i]);
				if (!in)
					assert_true(sum[i] == (s[0][i] + s[1][i]) + s[2][i]);
			}
		}
		assert_memory_equal(w1, w2, n * sizeof(float));
		assert_memory_equal(a.m, b.m, n * sizeof(float));
		if (b.v)
			assert_memory_equal(a.v, b.v, n * sizeof(float));
		for (i = 0; i < first; i++)
			assert_true(b.m[i] == 0.0f);
		for (i = first + count; i < n; i++)
			assert_true(b.m[i] == 0.0f);
		for (k = 0; k < 3; k++)
			free(s[k]);
		free(sum);
		free(w2);
		free(w1);
		rt_optim_free(&a);
		rt_optim_free(&b);
	}
}

/* --- errors --- */

/* Spans that cover the arrays: one update (the step counted once, so
 * AdamW's bias correction is the whole-array update's), the same bits as
 * rt_optim_step_take over everything, the spans' gradients left zero and
 * what lies outside them untouched. */
static void test_step_spans(void **state)
{
	static const char *types[] = { "sgd", "adamw" };
	/* [0, 5) [5, 40) [40, 41) [41, n): uneven, unaligned; then a gap */
	struct rt_span cover[4] = { { 0, 5 }, { 5, 35 }, { 40, 1 }, { 41, 0 } };
	struct rt_span gap[2] = { { 3, 10 }, { 20, 7 } };
	const size_t n = RT_CHUNK + 77;
	struct opt_spec os;
	struct rt_pool pool;
	size_t t, i;

	(void)state;
	rt_pool_init(&pool, 2);
	cover[3].count = n - 41;
	for (t = 0; t < 2; t++) {
		struct rt_optim a, b, c;
		float *w1 = malloc(n * sizeof(float)), *w2 = malloc(n * sizeof(float));
		float *w3 = malloc(n * sizeof(float)), *g1 = malloc(n * sizeof(float));
		float *g2 = malloc(n * sizeof(float)), *g3 = malloc(n * sizeof(float));
		struct dt_rng r;
		int step;

		assert_true(w1 && w2 && w3 && g1 && g2 && g3);
		opt_set(&os, types[t], 0.05, 0.9, 0.01);
		optim_ok(&a, &os.s, n);
		optim_ok(&b, &os.s, n);
		optim_ok(&c, &os.s, n);
		b.pool = &pool;
		dt_rng_seed(&r, 5, t);
		for (i = 0; i < n; i++)
			w1[i] = w2[i] = w3[i] = dt_rng_normal(&r);
		for (step = 0; step < 3; step++) {
			float scale = step == 2 ? 0.5f : 1.0f;
			double want, got, part = 0.0;

			for (i = 0; i < n; i++)
				g1[i] = g2[i] = g3[i] = dt_rng_normal(&r);
			want = rt_optim_step_take(&a, w1, g1, 0, n, 0.05, scale);
			got = rt_optim_step_spans(&b, w2, g2, cover, 4, 0.05, scale);
			assert_int_equal(b.step, a.step);
			if (!(fabs(got - want) <= 1e-12 * want))
				fail_msg("%s step %d: sum of squares %.17g, want %.17g", types[t], step, got, want);
			for (i = 0; i < n; i++)
				if (memcmp(&w2[i], &w1[i], sizeof(float)) || memcmp(&b.m[i], &a.m[i], sizeof(float)) ||
				    (b.v && memcmp(&b.v[i], &a.v[i], sizeof(float))) || g2[i] != 0.0f)
					fail_msg("%s step %d: element %zu: w %.9g vs %.9g, gradient %g left",
						 types[t], step, i, w2[i], w1[i], g2[i]);
			/* two spans with gaps: only they change */
			for (i = 0; i < 2; i++)
				part += rt_sumsq(g3 + gap[i].first, gap[i].count);
			memcpy(g1, g3, n * sizeof(float));
			memcpy(g2, w3, n * sizeof(float)); /* g2 is free again: w3 before */
			got = rt_optim_step_spans(&c, w3, g3, gap, 2, 0.05, scale);
			assert_true(fabs(got - part) <= 1e-12 * part);
			for (i = 0; i < n; i++) {
				int inside = (i >= 3 && i < 13) || (i >= 20 && i < 27);

				if (inside != (g3[i] == 0.0f && g1[i] != 0.0f) ||
				    inside == !memcmp(&w3[i], &g2[i], sizeof(float)))
					fail_msg("%s step %d: element %zu %s a span, gradient %g (was %g), w %.9g (was %.9g)",
						 types[t], step, i, inside ? "inside" : "outside", g3[i], g1[i],
						 w3[i], g2[i]);
			}
		}
		assert_int_equal(c.step, 3);
		rt_optim_free(&a);
		rt_optim_free(&b);
		rt_optim_free(&c);
		free(w1); free(w2); free(w3); free(g1); free(g2); free(g3);
	}
	rt_pool_free(&pool);
}

/* The sharded optimizer's update (rt_optim_step_pieces): pieces of the
 * parameters whose gradient and state lie packed elsewhere end bitwise
 * as a whole-array update of the same elements (with weight decay exempt
 * by the parameters' index, a piece across a chunk boundary, a scale),
 * the elements outside every piece unchanged, the packed gradient left
 * zero; the sum of squares is the pieces' gradient's. */
static void test_step_pieces(void **state)
{
	static const char *types[] = { "sgd", "adamw" };
	const size_t n = 2 * RT_CHUNK + 50;
	/* first, count, at: packed in order, a gap between, one across a chunk */
	const struct rt_optim_piece pieces[3] = {
		{ 10, 90, 0, 0 }, { RT_CHUNK - 20, 100, 90, 90 }, { 2 * RT_CHUNK + 5, 45, 190, 190 } };
	const size_t packed = 235;
	struct rt_span exempt[1] = { { RT_CHUNK - 5, 10 } };
	struct opt_spec os;
	struct rt_pool pool;
	size_t t, i;

	(void)state;
	rt_pool_init(&pool, 2);
	for (t = 0; t < 2; t++) {
		struct rt_optim whole, shard;
		float *w1 = malloc(n * sizeof(float)), *w2 = malloc(n * sizeof(float));
		float *g1 = malloc(n * sizeof(float)), *gs = malloc(packed * sizeof(float));
		struct dt_rng r;
		int step, p;

		assert_true(w1 && w2 && g1 && gs);
		opt_set(&os, types[t], 0.05, 0.9, 0.1);
		optim_ok(&whole, &os.s, n);
		optim_ok(&shard, &os.s, packed);
		shard.pool = &pool;
		assert_int_equal(rt_optim_no_decay(&whole, exempt, 1), 0);
		assert_int_equal(rt_optim_no_decay(&shard, exempt, 1), 0);
		dt_rng_seed(&r, 13, t);
		for (i = 0; i < n; i++)
			w1[i] = w2[i] = dt_rng_normal(&r);
		for (step = 0; step < 3; step++) {
			float scale = step == 1 ? 0.25f : 1.0f;
			double want = 0.0, got;

			for (i = 0; i < n; i++)
				g1[i] = 0.0f;
			for (p = 0; p < 3; p++)
				for (i = 0; i < pieces[p].count; i++)
					g1[pieces[p].first + i] = gs[pieces[p].at + i] = dt_rng_normal(&r);
			for (p = 0; p < 3; p++)
				want += rt_sumsq(gs + pieces[p].at, pieces[p].count);
			/* the reference: only the pieces' elements move (their
			 * gradient; the others' gradient is zero, but AdamW and
			 * decay would still move them: skip them by spans) */
			{
				struct rt_span sp[3];

				for (p = 0; p < 3; p++)
					sp[p] = (struct rt_span){ pieces[p].first, pieces[p].count };
				rt_optim_step_spans(&whole, w1, g1, sp, 3, 0.05, scale);
			}
			got = rt_optim_step_pieces(&shard, w2, gs, pieces, 3, 0.05, scale);
			assert_int_equal(shard.step, whole.step);
			if (!(fabs(got - want) <= 1e-12 * want))
				fail_msg("%s step %d: sum of squares %.17g, want %.17g", types[t], step, got, want);
			for (i = 0; i < packed; i++)
				if (gs[i] != 0.0f)
					fail_msg("%s step %d: gradient %zu left %g", types[t], step, i, gs[i]);
			for (i = 0; i < n; i++)
				if (memcmp(&w2[i], &w1[i], sizeof(float)))
					fail_msg("%s step %d: parameter %zu: %.9g, want %.9g", types[t], step, i,
						 w2[i], w1[i]);
			for (p = 0; p < 3; p++)
				for (i = 0; i < pieces[p].count; i++) {
					size_t a = pieces[p].first + i, b = pieces[p].at + i;

					if (memcmp(&shard.m[b], &whole.m[a], sizeof(float)) ||
					    (shard.v && memcmp(&shard.v[b], &whole.v[a], sizeof(float))))
						fail_msg("%s step %d: state of parameter %zu differs", types[t],
							 step, a);
				}
		}
		rt_optim_free(&whole);
		rt_optim_free(&shard);
		free(w1); free(w2); free(g1); free(gs);
	}
	rt_pool_free(&pool);
}

/* Ranges exempt from weight decay (rt_optim_no_decay): their elements end
 * bitwise as with weight_decay 0, the others as with it, with a span that
 * crosses a chunk boundary, through the fused, the summing and the spans
 * updates alike; the sum of squares is still the gradient's. */
static void test_no_decay(void **state)
{
	static const char *types[] = { "sgd", "adamw" };
	const size_t n = 2 * RT_CHUNK + 33;
	struct rt_span exempt[3] = { { 0, 7 }, { 100, 50 }, { RT_CHUNK - 10, 30 } };
	struct opt_spec os, os0;
	struct rt_pool pool;
	size_t t, i;

	(void)state;
	rt_pool_init(&pool, 2);
	for (t = 0; t < 2; t++) {
		struct rt_optim dec, nodec, mixed, mixed_sum;
		float *w[4], *g[4], *slot[1];
		struct dt_rng r;
		int step, k;

		for (k = 0; k < 4; k++) {
			assert_non_null(w[k] = malloc(n * sizeof(float)));
			assert_non_null(g[k] = malloc(n * sizeof(float)));
		}
		opt_set(&os, types[t], 0.05, 0.9, 0.1);
		opt_set(&os0, types[t], 0.05, 0.9, 0.0);
		optim_ok(&dec, &os.s, n);
		optim_ok(&nodec, &os0.s, n);
		optim_ok(&mixed, &os.s, n);
		optim_ok(&mixed_sum, &os.s, n);
		mixed.pool = &pool;
		assert_int_equal(rt_optim_no_decay(&mixed, exempt, 3), 0);
		assert_int_equal(rt_optim_no_decay(&mixed_sum, exempt, 3), 0);
		dt_rng_seed(&r, 9, t);
		for (i = 0; i < n; i++)
			w[0][i] = w[1][i] = w[2][i] = w[3][i] = dt_rng_normal(&r);
		for (step = 0; step < 3; step++) {
			double want, got;

			for (i = 0; i < n; i++)
				g[0][i] = g[1][i] = g[2][i] = g[3][i] = dt_rng_normal(&r);
			want = rt_sumsq(g[0], n);
			rt_optim_step_take(&dec, w[0], g[0], 0, n, 0.05, 1.0f);
			rt_optim_step_take(&nodec, w[1], g[1], 0, n, 0.05, 1.0f);
			got = rt_optim_step_take(&mixed, w[2], g[2], 0, n, 0.05, 1.0f);
			assert_true(fabs(got - want) <= 1e-12 * want);
			slot[0] = g[3];
			rt_optim_step_sum(&mixed_sum, w[3], slot, 1, 0, n, 0.05);
			for (i = 0; i < n; i++) {
				bool ex = i < 7 || (i >= 100 && i < 150) ||
					  (i >= RT_CHUNK - 10 && i < RT_CHUNK + 20);
				const float *want_w = ex ? &w[1][i] : &w[0][i];

				if (memcmp(&w[2][i], want_w, sizeof(float)) ||
				    memcmp(&w[3][i], want_w, sizeof(float)))
					fail_msg("%s step %d: element %zu (%s): %.9g and %.9g, want %.9g",
						 types[t], step, i, ex ? "exempt" : "decayed", w[2][i],
						 w[3][i], *want_w);
			}
		}
		/* the decay matters here: the two references differ */
		assert_memory_not_equal(w[0] + 200, w[1] + 200, 64 * sizeof(float));
		rt_optim_free(&dec);
		rt_optim_free(&nodec);
		rt_optim_free(&mixed);
		rt_optim_free(&mixed_sum);
		for (k = 0; k < 4; k++) {
			free(w[k]);
			free(g[k]);
		}
	}
	rt_pool_free(&pool);
}

static void test_errors(void **state)
{
	struct dt_err err = { 0 };
	struct opt_spec o;
	struct rt_optim opt;

	(void)state;
	opt_set(&o, "lion", 0.1, 0.9, 0);
	assert_int_equal(rt_optim_init(&opt, &o.s, 10, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "train.optimizer.type: \"lion\" is not one of sgd, adamw"));
	assert_null(opt.m);
	rt_optim_free(&opt);
	opt_set(&o, "adamw", 0.1, 0.9, 0);
	o.s.train.optimizer.betas.n = 1;
	assert_int_equal(rt_optim_init(&opt, &o.s, 10, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "train.optimizer.betas: must be 2 numbers (got 1)"));
	assert_int_equal(err.count, 2);
	/* a huge state is refused with a message, not a crash */
	opt_set(&o, "adamw", 0.1, 0.9, 0);
	dt_err_clear(&err);
	assert_int_equal(rt_optim_init(&opt, &o.s, SIZE_MAX / 2, &err), -ENOMEM);
	assert_non_null(strstr(err.msg, "cannot allocate the adamw state"));
	assert_null(opt.m);
}

/* --- main --- */

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sgd_momentum_by_hand),
		cmocka_unit_test(test_sgd_plain),
		cmocka_unit_test(test_adamw_by_hand),
		cmocka_unit_test(test_long_vector),
		cmocka_unit_test(test_lr_schedule),
		cmocka_unit_test(test_sumsq_scale_clip),
		cmocka_unit_test(test_fused_update),
		cmocka_unit_test(test_step_sum),
		cmocka_unit_test(test_step_spans),
		cmocka_unit_test(test_step_pieces),
		cmocka_unit_test(test_no_decay),
		cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
