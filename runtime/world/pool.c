/*
 * pool.c - worker threads that sleep between loops, or first poll for the
 * next one (rt_pool_spin), and gangs of them (runtime/world/pool.h).
 *
 * A loop is published under the mutex (fn, ctx, n, next = 0, busy = the
 * workers) with a new generation number; workers and the caller then take
 * indices from one atomic counter. The caller waits until every worker has
 * seen the loop end (busy == 0) before it returns, so that no late worker
 * can take an index of the next loop. A gang's barrier is a count and a
 * generation: the last thread to arrive resets the count, then moves the
 * generation on, which releases the others.
 *
 * Sections: polling, work, gangs, life cycle.
 */
#include "runtime/world/pool.h"
#include "base/clock.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --- polling --- */

/* One round of a poll: a pause, and every 256 rounds a look at the clock.
 * True once the poll has run RT_POOL_SPIN_S (*end starts at 0). */
static bool poll_over(unsigned *round, double *end)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause(); /* lets the other hyper-thread run, saves power */
#endif
	if (++*round % 256)
		return false;
	if (*end == 0.0) {
		*end = dt_mono_s() + RT_POOL_SPIN_S;
		return false;
	}
	return dt_mono_s() > *end;
}

/* A worker, after a loop: the next one may come within microseconds. */
static void poll_next(struct rt_pool *p, unsigned long seen)
{
	unsigned round = 0;
	double end = 0.0;

	while (atomic_load(&p->gen) == seen && !poll_over(&round, &end))
		;
}

/* The caller, after its share of a loop: the workers' ends. */
static void poll_done(struct rt_pool *p)
{
	unsigned round = 0;
	double end = 0.0;

	while (atomic_load(&p->busy) > 0 && !poll_over(&round, &end))
		;
}

/* --- work --- */

static void take_items(struct rt_pool *p)
{
	long i;

	if (p->gang) {
		/* exactly one index per worker: 1..started (the caller has 0) */
		i = atomic_fetch_add(&p->next, 1);
		if (i < p->n)
			p->fn(p->ctx, i);
		return;
	}
	while ((i = atomic_fetch_add(&p->next, 1)) < p->n)
		p->fn(p->ctx, i);
}

static void *worker(void *arg)
{
	struct rt_pool *p = arg;
	unsigned long seen = 0;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		if (p->spin && !p->stop && atomic_load(&p->gen) == seen) {
			pthread_mutex_unlock(&p->mu);
			poll_next(p, seen);
			pthread_mutex_lock(&p->mu);
		}
		while (!p->stop && atomic_load(&p->gen) == seen)
			pthread_cond_wait(&p->go, &p->mu);
		if (p->stop)
			break;
		seen = atomic_load(&p->gen);
		pthread_mutex_unlock(&p->mu);
		take_items(p);
		pthread_mutex_lock(&p->mu);
		if (atomic_fetch_sub(&p->busy, 1) == 1)
			pthread_cond_signal(&p->done);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* Publishes a loop to the workers, runs the caller's share, and waits
 * until every worker has seen its end. A polling worker sees the new gen
 * before it takes the mutex: fn, ctx, n and gang are written before it. */
static void run_loop(struct rt_pool *p, long n, void (*fn)(void *ctx, long i), void *ctx,
		     bool gang)
{
	pthread_mutex_lock(&p->mu);
	p->fn = fn;
	p->ctx = ctx;
	p->n = n;
	p->gang = gang;
	atomic_store(&p->next, gang ? 1 : 0);
	atomic_store(&p->busy, p->started);
	atomic_fetch_add(&p->gen, 1);
	pthread_cond_broadcast(&p->go);
	pthread_mutex_unlock(&p->mu);
	if (gang)
		fn(ctx, 0);
	else
		take_items(p);
	if (p->spin)
		poll_done(p);
	pthread_mutex_lock(&p->mu);
	while (atomic_load(&p->busy) > 0)
		pthread_cond_wait(&p->done, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

void rt_pool_for(struct rt_pool *p, long n, void (*fn)(void *ctx, long i), void *ctx)
{
	long i;

	if (!p || p->started == 0 || n <= 1) {
		for (i = 0; i < n; i++)
			fn(ctx, i);
		return;
	}
	run_loop(p, n, fn, ctx, false);
}

/* --- gangs --- */

int rt_pool_gang_size(const struct rt_pool *p)
{
	return p ? p->started + 1 : 1;
}

void rt_pool_gang(struct rt_pool *p, void (*fn)(void *ctx, long k), void *ctx)
{
	if (!p || p->started == 0) {
		fn(ctx, 0);
		return;
	}
	atomic_store(&p->bar_count, 0);
	run_loop(p, p->started + 1, fn, ctx, true);
}

void rt_pool_sync(struct rt_pool *p)
{
	unsigned n = (unsigned)rt_pool_gang_size(p), gen, spins = 0;

	if (n <= 1)
		return;
	gen = atomic_load(&p->bar_gen);
	if (atomic_fetch_add(&p->bar_count, 1) == n - 1) {
		/* the last to arrive: reset for the next barrier, then release */
		atomic_store(&p->bar_count, 0);
		atomic_fetch_add(&p->bar_gen, 1);
		return;
	}
	while (atomic_load(&p->bar_gen) == gen)
		if (++spins > 4096)
			sched_yield(); /* a gang thread lost its core: let it run */
}

/* --- life cycle --- */

int rt_pool_init(struct rt_pool *p, int threads)
{
	int i;

	memset(p, 0, sizeof(*p));
	p->threads = threads > 1 ? threads : 1;
	atomic_init(&p->next, 0);
	atomic_init(&p->bar_count, 0);
	atomic_init(&p->bar_gen, 0);
	atomic_init(&p->gen, 0);
	atomic_init(&p->busy, 0);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->go, NULL);
	pthread_cond_init(&p->done, NULL);
	if (p->threads == 1)
		return 0;
	p->tid = calloc((size_t)p->threads - 1, sizeof(*p->tid));
	for (i = 0; p->tid && i < p->threads - 1; i++) {
		if (pthread_create(&p->tid[i], NULL, worker, p) != 0)
			break; /* run with the workers that started */
		p->started++;
	}
	return 0;
}

void rt_pool_spin(struct rt_pool *p, bool on)
{
	if (p->threads == 0)
		return; /* zeroed: never initialised */
	pthread_mutex_lock(&p->mu);
	p->spin = on;
	pthread_mutex_unlock(&p->mu);
}

void rt_pool_free(struct rt_pool *p)
{
	int i;

	if (p->threads == 0)
		return; /* zeroed: never initialised */
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->go);
	pthread_mutex_unlock(&p->mu);
	for (i = 0; i < p->started; i++)
		pthread_join(p->tid[i], NULL);
	free(p->tid);
	pthread_cond_destroy(&p->done);
	pthread_cond_destroy(&p->go);
	pthread_mutex_destroy(&p->mu);
	memset(p, 0, sizeof(*p));
}
