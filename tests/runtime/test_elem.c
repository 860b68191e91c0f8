/*
 * test_elem.c - the element math the CPU and the GPU share
 * (runtime/kernels/elem.h): each function against its definition in double
 * precision, and the CPU's kernels (activations, the optimizers' updates)
 * against the functions element by element, bit for bit, in their
 * vectorised builds. test_gpu_kernels checks the GPU's against the CPU's.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/kernels/elem.h"
#include "runtime/kernels/kernels.h"
#include "runtime/model/optim.h"
#include "base/rng.h"

#define N 100003 /* odd: the vector loops' tails run too */

static float *values(uint64_t seed, float scale)
{
	float *x = malloc(N * sizeof(float));
	struct dt_rng r;
	size_t i;

	assert_non_null(x);
	dt_rng_seed(&r, seed, 0);
	for (i = 0; i < N; i++)
		x[i] = (float)dt_rng_normal(&r) * scale;
	return x;
}

/* GELU's definition, tanh form, and its derivative, in double */
static double gelu_ref(double v)
{
	return 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
}

static double gelu_grad_ref(double v)
{
	double u = 0.7978845608028654 * (v + 0.044715 * v * v * v), t = tanh(u);

	return 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * v * v);
}

static void gelu_against_its_definition(void **state)
{
	float *x = values(1, 4.0f);
	double worst = 0, worst_grad = 0;
	size_t i;

	(void)state;
	for (i = 0; i < N; i++) {
		double v = x[i], want = gelu_ref(v), got = rt_gelu(x[i]);
		double want_g = gelu_grad_ref(v), got_g = rt_gelu_back(x[i], 1.0f);
		double e = fabs(got - want) / (fabs(want) > 1 ? fabs(want) : 1);
		double eg = fabs(got_g - want_g) / (fabs(want_g) > 1 ? fabs(want_g) : 1);

		worst = e > worst ? e : worst;
		worst_grad = eg > worst_grad ? eg : worst_grad;
	}
	/* float32 with a 2-ulp exponential: measured 1.3e-7 and, for the
	 * gradient's longer sum, 2.0e-6 (of the value, or absolute below 1) */
	print_message("gelu: worst error %.3g, its gradient %.3g\n", worst, worst_grad);
	assert_true(worst < 5e-7);
	assert_true(worst_grad < 5e-6);
	assert_true(rt_gelu(0.0f) == 0.0f);
	assert_true(rt_gelu(-40.0f) == 0.0f || fabs(rt_gelu(-40.0f)) < 1e-30);
	assert_true(rt_gelu(40.0f) == 40.0f);
	assert_true(isnan(rt_gelu(NAN)));
	assert_true(rt_gelu_back(3.0f, 0.0f) == 0.0f);
	free(x);
}

/* the CPU's activation kernels are the shared functions, bit for bit */
static void activations_are_the_shared_functions(void **state)
{
	float *x = values(2, 3.0f), *dy = values(3, 1.0f);
	float *y = malloc(N * sizeof(float)), *dx = malloc(N * sizeof(float));
	size_t i;

	(void)state;
	assert_non_null(y);
	assert_non_null(dx);
	rt_act_forward(RT_ACT_GELU, x, y, N);
	rt_act_backward(RT_ACT_GELU, x, dy, dx, N);
	for (i = 0; i < N; i++) {
		float want = rt_gelu(x[i]), want_dx = rt_gelu_back(x[i], dy[i]);

		assert_memory_equal(&y[i], &want, sizeof(float));
		assert_memory_equal(&dx[i], &want_dx, sizeof(float));
	}
	free(dx);
	free(y);
	free(dy);
	free(x);
}

/* an optimizer of the spec's kind, as the trainer makes it */
static void optim_of(struct rt_optim *o, const char *type, double wd)
{
	static double betas[2] = { 0.9, 0.95 };
	struct spec s = { 0 };
	struct dt_err err = { 0 };

	s.train.optimizer.type = (char *)type;
	s.train.optimizer.momentum = 0.9;
	s.train.optimizer.betas = (struct spec_nums){ .v = betas, .n = 2 };
	s.train.optimizer.weight_decay = wd;
	assert_int_equal(rt_optim_init(o, &s, N, &err), 0);
}

/* the CPU's updates (vectorised, in lanes) are the shared functions, bit
 * for bit, and the functions the rules of model/optim.h in double */
static void updates_are_the_shared_functions(void **state)
{
	float *w = values(4, 1.0f), *g = values(5, 0.1f), *w2 = malloc(N * sizeof(float));
	float *m2 = calloc(N, sizeof(float)), *v2 = calloc(N, sizeof(float));
	struct rt_optim o;
	const double lr = 0.01;
	int step;
	size_t i;

	(void)state;
	assert_non_null(w2);
	/* AdamW, three steps */
	optim_of(&o, "adamw", 0.1);
	memcpy(w2, w, N * sizeof(float));
	for (step = 1; step <= 3; step++) {
		struct rt_adamw_k k = {
			(float)(1.0 - lr * 0.1), 0.9f, 0.95f, (float)(1.0 - 0.9), (float)(1.0 - 0.95),
			(float)(lr / (1.0 - pow(0.9, step))), (float)sqrt(1.0 - pow(0.95, step)), 1e-8f,
		};

		rt_optim_step(&o, w, g, N, lr);
		for (i = 0; i < N; i++) {
			double mi = 0.9 * m2[i] + 0.1 * g[i], vi = 0.95 * v2[i] + 0.05 * (double)g[i] * g[i];
			double want = w2[i] * (1.0 - lr * 0.1) -
				      lr / (1.0 - pow(0.9, step)) * mi / (sqrt(vi) / sqrt(1.0 - pow(0.95, step)) + 1e-8);

			float before = w2[i];

			rt_adamw_elem(&w2[i], &m2[i], &v2[i], g[i], k);
			/* float32 steps: within a few ulp of w, plus 1e-5 of the step */
			assert_true(fabs(w2[i] - want) <= 4e-7 * fabs(want) + 1e-5 * fabs(want - before) + 1e-9);
		}
		assert_memory_equal(w, w2, N * sizeof(float));
		assert_memory_equal(o.m, m2, N * sizeof(float));
		assert_memory_equal(o.v, v2, N * sizeof(float));
	}
	rt_optim_free(&o);

	/* SGD with momentum and weight decay, three steps */
	optim_of(&o, "sgd", 1e-4);
	memcpy(w2, w, N * sizeof(float));
	memset(v2, 0, N * sizeof(float));
	for (step = 1; step <= 3; step++) {
		rt_optim_step(&o, w, g, N, lr);
		for (i = 0; i < N; i++) {
			double want_v = 0.9 * v2[i] + (g[i] + 1e-4 * w2[i]);
			double want = w2[i] - lr * want_v;

			float before = w2[i];

			rt_sgd_elem(&w2[i], &v2[i], g[i], 0.9f, 1e-4f, (float)lr);
			assert_true(fabs(w2[i] - want) <= 4e-7 * fabs(want) + 1e-5 * fabs(want - before) + 1e-9);
		}
		assert_memory_equal(w, w2, N * sizeof(float));
		assert_memory_equal(o.m, v2, N * sizeof(float));
	}
	rt_optim_free(&o);
	free(v2);
	free(m2);
	free(w2);
	free(g);
	free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(gelu_against_its_definition),
		cmocka_unit_test(activations_are_the_shared_functions),
		cmocka_unit_test(updates_are_the_shared_functions),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
