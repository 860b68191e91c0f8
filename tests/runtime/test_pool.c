/*
 * test_pool.c - the worker pool (runtime/world/pool.h): loops run every index
 * once whatever the thread count; a gang runs one index per thread, all at
 * once, and its barrier orders what the threads write; the same with the
 * threads polling between loops (rt_pool_spin) as sleeping.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/world/pool.h"

/* --- loops --- */

struct counts {
	atomic_int hits[1000];
};

static void count_item(void *ctx, long i)
{
	struct counts *c = ctx;

	atomic_fetch_add(&c->hits[i], 1);
}

static void test_for_each_once(void **state)
{
	static struct counts c;
	struct rt_pool pool;
	int threads, i, loop, spin;

	(void)state;
	for (spin = 0; spin <= 1; spin++)
	for (threads = 1; threads <= 4; threads++) {
		rt_pool_init(&pool, threads);
		rt_pool_spin(&pool, spin);
		assert_int_equal(pool.started, threads - 1);
		for (loop = 0; loop < 50; loop++) {
			long n = (loop * 37) % 1000;

			memset(&c, 0, sizeof(c));
			rt_pool_for(&pool, n, count_item, &c);
			for (i = 0; i < 1000; i++)
				if (atomic_load(&c.hits[i]) != (i < n))
					fail_msg("%d threads, loop %d of %ld items: item %d ran %d times", threads,
						 loop, n, i, atomic_load(&c.hits[i]));
		}
		rt_pool_free(&pool);
	}
}

/* --- gangs --- */

#define ROUNDS 300 /* each a barrier of 4 threads on 2 cores, spinning: slow where they take turns */

struct gang_log {
	struct rt_pool *pool;
	int size;
	pthread_t who[8];
	atomic_int ran[8];
	int value[8];          /* written by thread k in each round, read by all after the barrier */
	atomic_int wrong;      /* reads that saw another round's value */
};

static void gang_item(void *ctx, long k)
{
	struct gang_log *g = ctx;
	int r, j;

	atomic_fetch_add(&g->ran[k], 1);
	g->who[k] = pthread_self();
	for (r = 0; r < ROUNDS; r++) {
		g->value[k] = r;
		rt_pool_sync(g->pool);
		for (j = 0; j < g->size; j++)
			if (g->value[j] != r)
				atomic_fetch_add(&g->wrong, 1);
		rt_pool_sync(g->pool); /* nobody writes round r + 1 before all read r */
	}
}

static void test_gang(void **state)
{
	struct rt_pool pool;
	int threads, k, j, rep, spin;

	(void)state;
	for (spin = 0; spin <= 1; spin++)
	for (threads = 1; threads <= 4; threads++) {
		rt_pool_init(&pool, threads);
		rt_pool_spin(&pool, spin);
		assert_int_equal(rt_pool_gang_size(&pool), threads);
		for (rep = 0; rep < 3; rep++) {
			static struct gang_log g;

			memset(&g, 0, sizeof(g));
			g.pool = &pool;
			g.size = rt_pool_gang_size(&pool);
			static struct counts c;

			/* a plain loop before must not disturb the gang's barrier */
			memset(&c, 0, sizeof(c));
			rt_pool_for(&pool, 100, count_item, &c);
			assert_int_equal(atomic_load(&c.hits[99]), 1);
			rt_pool_gang(&pool, gang_item, &g);
			for (k = 0; k < g.size; k++) {
				assert_int_equal(atomic_load(&g.ran[k]), 1);
				for (j = 0; j < k; j++)
					assert_false(pthread_equal(g.who[j], g.who[k]));
			}
			assert_true(pthread_equal(g.who[0], pthread_self()));
			assert_int_equal(atomic_load(&g.wrong), 0);
		}
		rt_pool_free(&pool);
	}
	assert_int_equal(rt_pool_gang_size(NULL), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_for_each_once),
		cmocka_unit_test(test_gang),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
