/*
 * test_sampling.c - the next token from logits (runtime/model/sampling.h)
 * against a softmax this test computes on its own: the distribution
 * rt_sample_probs gives, and rt_sample's draws, at temperatures 0.5, 1 and 2,
 * with top-k, top-p and both, on logits spread like a trained model's
 * (normal, sd 3) and on a GPT stage's own logits.
 *
 * The draws are judged by Pearson's chi-square over the tokens (those of
 * expected count below 5 pooled into one bin): the statistic must stay under
 * df + 6 sqrt(2 df), six standard deviations of its normal approximation
 * above its mean. The draws are seeded, so the test is deterministic; a
 * sampler that draws from another distribution (e.g. exp((l - 1) / T) for
 * the tokens after the arg max) exceeds the bound many times over.
 *
 * Sections: the reference, checks, cases, main.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/rng.h"
#include "runtime/kernels/kernels.h"
#include "runtime/model/model.h"
#include "runtime/model/sampling.h"

enum { V = 256, DRAWS = 40000 };

/* --- the reference --- */

/* ids sorted by logit, largest first, ties by id (insertion sort: V is small) */
static void sort_ids(const float *l, int *id, int n)
{
	int i, j, t;

	for (i = 0; i < n; i++)
		id[i] = i;
	for (i = 1; i < n; i++)
		for (j = i; j > 0 && (l[id[j]] > l[id[j - 1]] || (l[id[j]] == l[id[j - 1]] && id[j] < id[j - 1])); j--)
			t = id[j], id[j] = id[j - 1], id[j - 1] = t;
}

/* softmax(l / T) over the top k (ties at the k-th kept), then the fewest
 * most likely whose probability reaches top_p, renormalised, into want [V] */
static void reference(const float *l, double T, long k, double top_p, double *want)
{
	int id[V], n = V, i;
	double sum = 0.0, acc = 0.0, max;

	sort_ids(l, id, V);
	max = l[id[0]];
	if (k > 0 && k < V)
		for (n = (int)k; n < V && l[id[n]] == l[id[k - 1]]; n++)
			;
	memset(want, 0, V * sizeof(*want));
	for (i = 0; i < n; i++)
		sum += want[id[i]] = exp((l[id[i]] - max) / T);
	for (i = 0; i < n && top_p < 1.0; i++) {
		acc += want[id[i]] / sum;
		if (acc >= top_p)
			break;
	}
	for (i = i + 1; i < n && top_p < 1.0; i++)
		want[id[i]] = 0.0;
	for (i = 0, sum = 0.0; i < V; i++)
		sum += want[i];
	for (i = 0; i < V; i++)
		want[i] /= sum;
}

/* --- checks --- */

/* Pearson's chi-square of counts [V] against want [V] over DRAWS, tokens of
 * expected count < 5 pooled; its degrees of freedom into *df */
static double chi_square(const long *count, const double *want, int *df)
{
	double x2 = 0.0, pool_e = 0.0, pool_o = 0.0, e;
	int i, bins = 0;

	for (i = 0; i < V; i++) {
		e = want[i] * DRAWS;
		if (e == 0.0) {
			assert_int_equal(count[i], 0); /* a token set aside is never drawn */
			continue;
		}
		if (e < 5.0) {
			pool_e += e, pool_o += (double)count[i];
			continue;
		}
		x2 += (count[i] - e) * (count[i] - e) / e;
		bins++;
	}
	if (pool_e > 0.0) {
		x2 += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
		bins++;
	}
	*df = bins - 1;
	return x2;
}

/* rt_sample_probs matches the reference, and DRAWS draws pass the bound */
static void check(const float *logits, double T, long k, double top_p, uint64_t seed)
{
	const struct rt_sampling o = { T, k, top_p };
	struct rt_token_sampler s;
	struct dt_rng r;
	double want[V], tv = 0.0, x2, bound;
	long count[V] = { 0 }, n, kept = 0, i;
	int df;

	assert_int_equal(rt_token_sampler_init(&s, V), 0);
	reference(logits, T, k, top_p, want);
	n = rt_sample_probs(&s, logits, &o);
	for (i = 0; i < V; i++) {
		kept += want[i] > 0;
		assert_true(fabs(s.p[i] - want[i]) <= 1e-12 + 1e-9 * want[i]);
	}
	assert_int_equal(n, kept);
	dt_rng_seed(&r, seed, 3);
	for (i = 0; i < DRAWS; i++)
		count[rt_sample(&s, logits, &o, &r)]++;
	for (i = 0; i < V; i++)
		tv += fabs((double)count[i] / DRAWS - want[i]) / 2;
	x2 = chi_square(count, want, &df);
	bound = df + 6.0 * sqrt(2.0 * df);
	print_message("T %.1f top-k %ld top-p %.2f: %ld tokens kept, chi-square %.1f (df %d, bound %.1f), total variation %.4f\n",
		      T, k, top_p, kept, x2, df, bound, tv);
	if (df > 0)
		assert_true(x2 <= bound);
	rt_token_sampler_free(&s);
}

/* --- cases --- */

/* logits spread like a trained model's: normal with sd 3 */
static void spread_logits(float *l)
{
	struct dt_rng r;
	int i;

	dt_rng_seed(&r, 11, 0);
	for (i = 0; i < V; i++)
		l[i] = 3.0f * dt_rng_normal(&r);
}

static void test_temperatures(void **state)
{
	float l[V];

	(void)state;
	spread_logits(l);
	check(l, 0.5, 0, 1.0, 1);
	check(l, 1.0, 0, 1.0, 2);
	check(l, 2.0, 0, 1.0, 3);
}

static void test_top_k_top_p(void **state)
{
	float l[V];

	(void)state;
	spread_logits(l);
	check(l, 1.0, 20, 1.0, 4);
	check(l, 1.0, 0, 0.9, 5);
	check(l, 2.0, 0, 0.5, 6);
	check(l, 2.0, 40, 0.95, 7);
	check(l, 1.0, 1, 1.0, 8); /* top-k 1 is greedy */
}

/* ties at the k-th logit are all kept; top-p 1 and k >= V keep everything */
static void test_ties_and_bounds(void **state)
{
	float l[V];
	int i;

	(void)state;
	for (i = 0; i < V; i++)
		l[i] = (float)(i % 8);
	check(l, 1.0, 40, 1.0, 9); /* the 32 sevens and the 32 sixes: 64 kept */
	check(l, 1.0, V + 5, 1.0, 10);
}

static void test_greedy(void **state)
{
	const struct rt_sampling o = { 0.0, 0, 1.0 };
	struct rt_token_sampler s;
	struct dt_rng r;
	float l[V];
	int i, best = 0;

	(void)state;
	spread_logits(l);
	for (i = 1; i < V; i++)
		if (l[i] > l[best])
			best = i;
	assert_int_equal(rt_token_sampler_init(&s, V), 0);
	dt_rng_seed(&r, 1, 0);
	for (i = 0; i < 100; i++)
		assert_int_equal(rt_sample(&s, l, &o, &r), best);
	assert_int_equal(rt_sample_probs(&s, l, &o), 1);
	assert_true(s.p[best] == 1.0);
	rt_token_sampler_free(&s);
}

/* a GPT stage's own logits for a prompt: the distribution at its newest
 * position, as dtrain-ckpt sample draws from it */
static void test_gpt_logits(void **state)
{
	enum { T = 8 };
	struct spec sp;
	struct rt_stage st;
	struct rt_acts acts = { 0 };
	struct dt_err err = { 0 };
	int first[2];
	const float x[T] = { 81, 58, 32, 84, 104, 101, 32, 0 };
	const float *y;
	float l[V];
	int i;

	(void)state;
	memset(&sp, 0, sizeof(sp));
	sp.model.type = "gpt";
	sp.model.vocab_size = V;
	sp.model.context = T;
	sp.model.layers = 2;
	sp.model.heads = 2;
	sp.model.embd = 16;
	sp.model.init_seed = 5;
	if (rt_stage_split(&sp, 1, first, &err) || rt_stage_init(&st, &sp, 0, 1, first, &err))
		fail_msg("rt_stage_init: %s", err.msg);
	assert_int_equal(rt_acts_init(&acts, &st, 1), 0);
	assert_int_equal(rt_stage_forward(&st, &acts, x, 1, &y), 0);
	/* position 6 saw the 7 prompt tokens; sharpened x20 so that the
	 * fresh model's near-uniform logits spread as a trained one's */
	for (i = 0; i < V; i++)
		l[i] = 20.0f * y[6 * V + i];
	check(l, 1.0, 0, 1.0, 12);
	check(l, 1.0, 30, 0.9, 13);
	rt_acts_free(&acts);
	rt_stage_free(&st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_temperatures),
		cmocka_unit_test(test_top_k_top_p),
		cmocka_unit_test(test_ties_and_bounds),
		cmocka_unit_test(test_greedy),
		cmocka_unit_test(test_gpt_logits),
	};

	rt_blas_threads(1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
