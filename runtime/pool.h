/*
 * pool.h - a few worker threads for the memory-bound loops of a step (the
 * optimizer update, the sum of the replicas' gradients), one per core of
 * resources.cpus_per_task beyond the caller's.
 *
 * Why not OpenMP: between two parallel loops, libgomp's idle threads spin
 * (OMP_WAIT_POLICY, read once when the library loads), and OpenBLAS's
 * threads want the same cores for the next matrix product right then. On 2
 * cores that halved the small MLP's rate with 2 threads (8.1k against 17.3k
 * samples/s with OMP_WAIT_POLICY=passive, bench/README.md). These workers
 * sleep on a condition variable as soon as a loop is done.
 *
 * rt_pool_for(p, n, fn, ctx) runs fn(ctx, i) for every i in [0, n), spread
 * over the workers and the caller, and returns when all are done. Which
 * thread runs which i is not fixed: fn must write only what belongs to i
 * (results that must not depend on the thread count are combined by the
 * caller in i order afterwards).
 *
 * Sections: life cycle, work.
 */
#ifndef DTRAIN_RUNTIME_POOL_H
#define DTRAIN_RUNTIME_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

struct rt_pool {
	int threads;          /* the caller and the workers, >= 1 */
	int started;          /* workers running */
	pthread_t *tid;       /* [threads - 1] */
	pthread_mutex_t mu;
	pthread_cond_t go;    /* a new loop, or stop */
	pthread_cond_t done;  /* the last worker finished the loop */
	unsigned long gen;    /* loops started so far */
	int busy;             /* workers still in the current loop */
	bool stop;
	void (*fn)(void *ctx, long i);
	void *ctx;
	long n;
	atomic_long next;     /* the next i to take */
};

/* --- life cycle --- */

/* A pool of `threads` threads in all (the caller counts as one, so
 * threads - 1 workers start; threads <= 1: none, loops run in the caller).
 * When a worker cannot start, the pool runs with the ones that did.
 * Free with rt_pool_free(). Returns 0 (never fails). */
int rt_pool_init(struct rt_pool *p, int threads);
/* Stops and joins the workers; safe on a zeroed struct. */
void rt_pool_free(struct rt_pool *p);

/* --- work --- */

/* fn(ctx, i) for i in [0, n) over the pool (NULL: in the caller), returning
 * when every call has returned. Not reentrant: one loop at a time. */
void rt_pool_for(struct rt_pool *p, long n, void (*fn)(void *ctx, long i), void *ctx);

#endif
