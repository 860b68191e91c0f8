/*
 * pool.c - worker threads that sleep between loops (runtime/pool.h).
 *
 * A loop is published under the mutex (fn, ctx, n, next = 0, busy = the
 * workers) with a new generation number; workers and the caller then take
 * indices from one atomic counter. The caller waits until every worker has
 * seen the loop end (busy == 0) before it returns, so that no late worker
 * can take an index of the next loop.
 */
#include "runtime/pool.h"

#include <stdlib.h>
#include <string.h>

/* --- work --- */

static void take_items(struct rt_pool *p)
{
	long i;

	while ((i = atomic_fetch_add(&p->next, 1)) < p->n)
		p->fn(p->ctx, i);
}

static void *worker(void *arg)
{
	struct rt_pool *p = arg;
	unsigned long seen = 0;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->stop && p->gen == seen)
			pthread_cond_wait(&p->go, &p->mu);
		if (p->stop)
			break;
		seen = p->gen;
		pthread_mutex_unlock(&p->mu);
		take_items(p);
		pthread_mutex_lock(&p->mu);
		if (--p->busy == 0)
			pthread_cond_signal(&p->done);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

void rt_pool_for(struct rt_pool *p, long n, void (*fn)(void *ctx, long i), void *ctx)
{
	long i;

	if (!p || p->started == 0 || n <= 1) {
		for (i = 0; i < n; i++)
			fn(ctx, i);
		return;
	}
	pthread_mutex_lock(&p->mu);
	p->fn = fn;
	p->ctx = ctx;
	p->n = n;
	atomic_store(&p->next, 0);
	p->busy = p->started;
	p->gen++;
	pthread_cond_broadcast(&p->go);
	pthread_mutex_unlock(&p->mu);
	take_items(p);
	pthread_mutex_lock(&p->mu);
	while (p->busy > 0)
		pthread_cond_wait(&p->done, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

/* --- life cycle --- */

int rt_pool_init(struct rt_pool *p, int threads)
{
	int i;

	memset(p, 0, sizeof(*p));
	p->threads = threads > 1 ? threads : 1;
	atomic_init(&p->next, 0);
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
