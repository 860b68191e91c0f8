/*
 * pool.h - a few worker threads for the memory-bound loops of a step (the
 * optimizer update, the sum of the replicas' gradients), one per core of
 * resources.cpus_per_task beyond the caller's.
 *
 * Why not OpenMP: between two parallel loops, libgomp's idle threads spin
 * (OMP_WAIT_POLICY, read once when the library loads), and OpenBLAS's
 * threads want the same cores for the next matrix product right then: on 2
 * cores that halved the small MLP's rate with 2 threads. These workers
 * sleep on a condition variable as soon as a loop is done.
 *
 * rt_pool_for(p, n, fn, ctx) runs fn(ctx, i) for every i in [0, n), spread
 * over the workers and the caller, and returns when all are done. Which
 * thread runs which i is not fixed: fn must write only what belongs to i
 * (results that must not depend on the thread count are combined by the
 * caller in i order afterwards).
 *
 * rt_pool_gang(p, fn, ctx) runs fn(ctx, k) once on each thread of the pool
 * at the same time (k = 0 the caller), for work cut into one block per
 * thread that meets at barriers (rt_pool_sync): every layer of a step cut
 * between the threads (runtime/model/model.h, rt_part).
 *
 * Between loops the workers sleep, unless rt_pool_spin() is on: then they
 * first poll for the next loop for up to RT_POOL_SPIN_S, and the caller
 * polls for the end of a loop the same way. A step of a small model cut
 * between threads has 2 loops (the gang, the update), and polling raised
 * the gang's rate on the bench's small MLP by about a quarter: a worker
 * woken from its sleep starts late. Only for
 * threads that own their cores: with OpenBLAS's own threads running the
 * products (parallel.threads "blas"), a polling worker would take the core
 * one of them needs.
 *
 * Sections: life cycle, work, gangs.
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
	atomic_ulong gen;     /* loops started so far */
	atomic_int busy;      /* workers still in the current loop */
	bool spin;            /* poll before sleeping (rt_pool_spin) */
	bool stop;
	void (*fn)(void *ctx, long i);
	void *ctx;
	long n;
	atomic_long next;     /* the next i to take */
	bool gang;            /* the current loop is a gang: one i per thread */
	atomic_uint bar_count; /* threads arrived at the gang's barrier */
	atomic_uint bar_gen;  /* barriers passed */
};

/* --- life cycle --- */

/* A pool of `threads` threads in all (the caller counts as one, so
 * threads - 1 workers start; threads <= 1: none, loops run in the caller).
 * When a worker cannot start, the pool runs with the ones that did.
 * Free with rt_pool_free(). Returns 0 (never fails). */
int rt_pool_init(struct rt_pool *p, int threads);
/* Stops and joins the workers; safe on a zeroed struct. */
void rt_pool_free(struct rt_pool *p);
/* Whether the workers and the caller poll for up to RT_POOL_SPIN_S before
 * they sleep between loops (off after init). Not while a loop runs. */
void rt_pool_spin(struct rt_pool *p, bool on);

/* How long a polling thread waits before it sleeps, in seconds: longer
 * than the gaps between the loops of one training step. */
#define RT_POOL_SPIN_S 0.001

/* --- work --- */

/* fn(ctx, i) for i in [0, n) over the pool (NULL: in the caller), returning
 * when every call has returned. Not reentrant: one loop at a time. */
void rt_pool_for(struct rt_pool *p, long n, void (*fn)(void *ctx, long i), void *ctx);

/* --- gangs --- */

/* Threads a gang has: the caller and the workers that started (1 for a
 * NULL pool). */
int rt_pool_gang_size(const struct rt_pool *p);
/* fn(ctx, k) for k in [0, rt_pool_gang_size(p)), each k on its own thread,
 * all at once (k = 0 in the caller: the only one that may call MPI),
 * returning when every call has returned. Not reentrant. */
void rt_pool_gang(struct rt_pool *p, void (*fn)(void *ctx, long k), void *ctx);
/* Inside a gang, by every one of its threads: returns when all have
 * called it; what each wrote before is visible to all after (sequentially
 * consistent atomics). Spins (then yields): the gang's threads each have a
 * core. */
void rt_pool_sync(struct rt_pool *p);

#endif
