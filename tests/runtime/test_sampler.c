/*
 * test_sampler.c - the distributed sampler (runtime/data/sampler.h): slices,
 * steps per epoch with the smaller last step, every sample exactly once per
 * epoch over all replicas and micro-batches for many layouts, the global
 * batch independent of the layout, epoch orders (shuffled, reproducible,
 * identity without shuffle), empty parts of a tiny last batch, and errors.
 *
 * Sections: slicing, steps, coverage, epochs, errors, main.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/rng.h"
#include "runtime/data/sampler.h"

static void init_ok(struct rt_sampler *s, int64_t n, int64_t b, uint64_t seed, bool shuffle)
{
	struct dt_err err = { 0 };

	assert_int_equal(rt_sampler_init(s, n, b, seed, shuffle, &err), 0);
	assert_int_equal(err.count, 0);
}

/* --- slicing --- */

static void test_slice_documented(void **state)
{
	static const int64_t off10[4] = { 0, 3, 6, 8 }, cnt10[4] = { 3, 3, 2, 2 };
	static const int64_t cnt2[4] = { 1, 1, 0, 0 };
	int64_t o, c;
	int p;

	(void)state;
	for (p = 0; p < 4; p++) {
		rt_sampler_slice(10, 4, p, &o, &c);
		assert_int_equal(o, off10[p]);
		assert_int_equal(c, cnt10[p]);
		rt_sampler_slice(2, 4, p, &o, &c);
		assert_int_equal(c, cnt2[p]);
	}
}

/* contiguous, covering, as even as possible, the larger parts first */
static void test_slice_every_case(void **state)
{
	int64_t rows, o, c, next;
	int parts, p;

	(void)state;
	for (rows = 0; rows <= 60; rows++) {
		for (parts = 1; parts <= 9; parts++) {
			for (p = 0, next = 0; p < parts; p++) {
				rt_sampler_slice(rows, parts, p, &o, &c);
				assert_int_equal(o, next);
				assert_int_equal(c, rows / parts + (p < rows % parts));
				next = o + c;
			}
			assert_int_equal(next, rows);
		}
	}
}

static void test_slice_bad_arguments(void **state)
{
	int64_t o = 5, c = 5;

	(void)state;
	rt_sampler_slice(10, 0, 0, &o, &c);
	assert_true(o == 0 && c == 0);
	o = c = 5;
	rt_sampler_slice(10, 4, 4, &o, &c);
	assert_true(o == 0 && c == 0);
	o = c = 5;
	rt_sampler_slice(10, 4, -1, &o, &c);
	assert_true(o == 0 && c == 0);
	o = c = 5;
	rt_sampler_slice(-1, 4, 0, &o, &c);
	assert_true(o == 0 && c == 0);
}

/* --- steps --- */

static void test_steps_and_rows(void **state)
{
	static const struct { int64_t n, b, steps, last; } cases[] = {
		{ 10, 3, 4, 1 }, { 9, 3, 3, 3 }, { 1, 1, 1, 1 }, { 1, 64, 1, 1 },
		{ 60000, 64, 938, 32 }, { 60000, 100, 600, 100 }, { 5, 10, 1, 5 },
	};
	struct rt_sampler s;
	const int64_t *idx;
	int64_t c, k;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		init_ok(&s, cases[i].n, cases[i].b, 1, true);
		assert_int_equal(rt_sampler_steps(&s), cases[i].steps);
		for (k = 0; k < cases[i].steps - 1; k++)
			assert_int_equal(rt_sampler_rows(&s, k), cases[i].b);
		assert_int_equal(rt_sampler_rows(&s, cases[i].steps - 1), cases[i].last);
		assert_int_equal(rt_sampler_rows(&s, cases[i].steps), 0);
		assert_int_equal(rt_sampler_rows(&s, -1), 0);
		rt_sampler_micro(&s, cases[i].steps - 1, 0, 1, 0, 1, &idx, &c);
		assert_int_equal(c, cases[i].last);
		assert_ptr_equal(idx, s.perm + (cases[i].steps - 1) * cases[i].b);
		rt_sampler_micro(&s, cases[i].steps, 0, 1, 0, 1, &idx, &c);
		assert_null(idx);
		assert_int_equal(c, 0);
		rt_sampler_free(&s);
	}
}

/* --- coverage --- */

/* Over one epoch: every (step, replica, micro) part, in that order,
 * concatenates to the global batch of each step, and so to perm; every
 * sample appears exactly once. */
static void check_epoch(struct rt_sampler *s, int data, int micro, int *seen)
{
	int64_t steps = rt_sampler_steps(s), k, c, j, at;
	const int64_t *batch, *idx;
	int r, m;

	memset(seen, 0, (size_t)s->n * sizeof(*seen));
	for (k = 0; k < steps; k++) {
		batch = s->perm + k * s->global_batch; /* the step's global batch */
		at = 0;
		for (r = 0; r < data; r++) {
			for (m = 0; m < micro; m++) {
				rt_sampler_micro(s, k, r, data, m, micro, &idx, &c);
				assert_non_null(idx);
				assert_true(c >= 0);
				if (c)
					assert_ptr_equal(idx, batch + at); /* contiguous, in order */
				for (j = 0; j < c; j++) {
					assert_true(idx[j] >= 0 && idx[j] < s->n);
					seen[idx[j]]++;
				}
				at += c;
			}
		}
		assert_int_equal(at, rt_sampler_rows(s, k)); /* nothing dropped */
	}
	for (j = 0; j < s->n; j++)
		if (seen[j] != 1)
			fail_msg("n %lld B %lld data %d micro %d: sample %lld seen %d times",
				 (long long)s->n, (long long)s->global_batch, data, micro,
				 (long long)j, seen[j]);
}

static void test_every_sample_once(void **state)
{
	static const int64_t ns[] = { 1, 2, 5, 7, 64, 100, 1000, 1001, 4099 };
	static const int64_t bs[] = { 1, 2, 3, 7, 8, 12, 64, 128, 1000, 5000 };
	static const int layouts[][2] = { { 1, 1 }, { 2, 1 }, { 3, 1 }, { 4, 1 }, { 1, 2 },
					  { 2, 2 }, { 3, 4 }, { 4, 4 }, { 2, 7 }, { 5, 3 } };
	int *seen = malloc(4099 * sizeof(int));
	struct rt_sampler s;
	size_t i, j, l;
	int shuffle, e;

	(void)state;
	assert_non_null(seen);
	for (i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
		for (j = 0; j < sizeof(bs) / sizeof(bs[0]); j++)
			for (shuffle = 0; shuffle < 2; shuffle++) {
				init_ok(&s, ns[i], bs[j], 11, shuffle);
				for (e = 0; e < 2; e++) {
					assert_int_equal(rt_sampler_epoch(&s, e), 0);
					for (l = 0; l < sizeof(layouts) / sizeof(layouts[0]); l++)
						check_epoch(&s, layouts[l][0], layouts[l][1], seen);
				}
				rt_sampler_free(&s);
			}
	free(seen);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* The union of the replicas' rows of a step is the same for data = 1..4
 * (with 1 and 3 micro-batches each): the layout never changes a step. */
static void test_layout_independent(void **state)
{
	int64_t want[100], got[100], k, c, n;
	const int64_t *idx;
	struct rt_sampler s;
	int data, micro, r, m;

	(void)state;
	init_ok(&s, 1003, 96, 5, true);
	assert_int_equal(rt_sampler_epoch(&s, 3), 0);
	for (k = 0; k < rt_sampler_steps(&s); k++) {
		rt_sampler_micro(&s, k, 0, 1, 0, 1, &idx, &c); /* the whole global batch */
		memcpy(want, idx, (size_t)c * sizeof(int64_t));
		qsort(want, (size_t)c, sizeof(int64_t), cmp_i64);
		for (data = 1; data <= 4; data++) {
			for (micro = 1; micro <= 3; micro += 2) {
				n = 0;
				for (r = 0; r < data; r++)
					for (m = 0; m < micro; m++) {
						int64_t cm;
						const int64_t *im;

						rt_sampler_micro(&s, k, r, data, m, micro, &im, &cm);
						memcpy(got + n, im, (size_t)cm * sizeof(int64_t));
						n += cm;
					}
				assert_int_equal(n, c);
				qsort(got, (size_t)n, sizeof(int64_t), cmp_i64);
				assert_memory_equal(got, want, (size_t)n * sizeof(int64_t));
			}
		}
	}
	rt_sampler_free(&s);
}

/* A last batch smaller than the layout: some parts are empty. */
static void test_tiny_last_batch(void **state)
{
	static const int64_t want[4][2] = { { 1, 0 }, { 1, 0 }, { 0, 0 }, { 0, 0 } };
	struct rt_sampler s;
	const int64_t *idx;
	int64_t c;
	int r, m;

	(void)state;
	init_ok(&s, 10, 8, 1, false);
	assert_int_equal(rt_sampler_rows(&s, 1), 2);
	for (r = 0; r < 4; r++)
		for (m = 0; m < 2; m++) {
			rt_sampler_micro(&s, 1, r, 4, m, 2, &idx, &c);
			assert_int_equal(c, want[r][m]);
			assert_non_null(idx); /* points into perm even when empty */
		}
	rt_sampler_micro(&s, 1, 1, 4, 0, 2, &idx, &c);
	assert_int_equal(idx[0], 9);
	rt_sampler_free(&s);
}

/* --- epochs --- */

static void test_epoch_orders(void **state)
{
	int64_t n = 500, *p0 = malloc(500 * sizeof(int64_t)), *ref = malloc(500 * sizeof(int64_t));
	struct rt_sampler a, b, c;
	int64_t i;

	(void)state;
	assert_non_null(p0);
	assert_non_null(ref);
	init_ok(&a, n, 32, 123, true);
	init_ok(&b, n, 64, 123, true); /* the batch size does not change the order */
	init_ok(&c, n, 32, 124, true);
	assert_int_equal(a.epoch, 0); /* epoch 0 is ready after init */
	memcpy(p0, a.perm, (size_t)n * sizeof(int64_t));
	assert_memory_equal(a.perm, b.perm, (size_t)n * sizeof(int64_t));
	assert_memory_not_equal(a.perm, c.perm, (size_t)n * sizeof(int64_t)); /* other seed */
	dt_rng_permutation(123, 0, ref, n);
	assert_memory_equal(a.perm, ref, (size_t)n * sizeof(int64_t)); /* (seed, epoch) */

	assert_int_equal(rt_sampler_epoch(&a, 1), 0);
	assert_memory_not_equal(a.perm, p0, (size_t)n * sizeof(int64_t)); /* a new order */
	dt_rng_permutation(123, 1, ref, n);
	assert_memory_equal(a.perm, ref, (size_t)n * sizeof(int64_t));
	assert_int_equal(rt_sampler_epoch(&a, 1), 0); /* idempotent */
	assert_memory_equal(a.perm, ref, (size_t)n * sizeof(int64_t));
	assert_int_equal(rt_sampler_epoch(&a, 7), 0);
	assert_int_equal(rt_sampler_epoch(&b, 7), 0); /* a resumed run jumps straight there */
	assert_memory_equal(a.perm, b.perm, (size_t)n * sizeof(int64_t));
	assert_int_equal(rt_sampler_epoch(&a, 0), 0); /* and back */
	assert_memory_equal(a.perm, p0, (size_t)n * sizeof(int64_t));

	/* a permutation, not the identity */
	qsort(ref, (size_t)n, sizeof(int64_t), cmp_i64);
	for (i = 0; i < n; i++)
		assert_int_equal(ref[i], i);
	for (i = 0; i < n && p0[i] == i; i++)
		;
	assert_true(i < n);
	rt_sampler_free(&a);
	rt_sampler_free(&b);
	rt_sampler_free(&c);
	free(ref);
	free(p0);
}

static void test_no_shuffle_is_identity(void **state)
{
	struct rt_sampler s;
	int64_t i, e;

	(void)state;
	init_ok(&s, 77, 10, 99, false);
	for (e = 0; e < 3; e++) {
		assert_int_equal(rt_sampler_epoch(&s, e), 0);
		for (i = 0; i < 77; i++)
			assert_int_equal(s.perm[i], i);
	}
	rt_sampler_free(&s);
}

/* --- errors --- */

static void test_errors(void **state)
{
	struct dt_err err = { 0 };
	struct rt_sampler s, z = { 0 };
	const int64_t *idx = (const int64_t *)&err;
	int64_t c = 9;

	(void)state;
	assert_int_equal(rt_sampler_init(&s, 0, 10, 1, true, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "sampler: the data set has no rows (n = 0)"));
	assert_null(s.perm);
	assert_int_equal(rt_sampler_init(&s, 10, 0, 1, true, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "train.global_batch must be >= 1 (got 0)"));
	rt_sampler_free(&s);
	rt_sampler_free(&z);
	assert_int_equal(rt_sampler_epoch(&z, 0), -EINVAL); /* never initialised */

	init_ok(&s, 10, 4, 1, true);
	assert_int_equal(rt_sampler_epoch(&s, -1), -EINVAL);
	rt_sampler_micro(&s, 0, 2, 2, 0, 1, &idx, &c); /* replica out of range */
	assert_null(idx);
	assert_int_equal(c, 0);
	rt_sampler_micro(&s, 0, 0, 2, 0, 0, &idx, &c);
	assert_null(idx);
	rt_sampler_micro(&s, 3, 0, 1, 0, 1, &idx, &c); /* step out of range */
	assert_null(idx);
	rt_sampler_free(&s);
}

/* --- main --- */

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slice_documented),
		cmocka_unit_test(test_slice_every_case),
		cmocka_unit_test(test_slice_bad_arguments),
		cmocka_unit_test(test_steps_and_rows),
		cmocka_unit_test(test_every_sample_once),
		cmocka_unit_test(test_layout_independent),
		cmocka_unit_test(test_tiny_last_batch),
		cmocka_unit_test(test_epoch_orders),
		cmocka_unit_test(test_no_shuffle_is_identity),
		cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
