/*
 * split_step.c - a step with every block cut into parts (runtime/model/model.h,
 * rt_part): between the node's replicas (parallel.grad_sync "split",
 * runtime/parallel/dp.h) and/or between the threads of this rank
 * (parallel.threads "split").
 */
#include "runtime/train/trainer.h"

#include "base/fault.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- a step with every block cut into parts (runtime/model/model.h, rt_part) ---
 *
 * Between the node's replicas (dp.split, runtime/parallel/dp.h) and/or between the
 * threads of this rank (t->tsplit): block k of L, k = replica on the node
 * x threads + thread. The rank's threads run as a gang of the pool and
 * meet at its spinning barrier; thread 0 alone calls MPI (the node's
 * barrier, between two of the gang's). */

struct gang {
	struct trainer *t;
	struct rt_acts *acts; /* the micro-batch's activations, the node's rows */
	float *dy;            /* [rows][classes]: the loss's gradient */
	int32_t *labels;      /* this replica's rows' labels */
	int64_t off, rows, own; /* this replica's rows: [off, off + own) of rows */
	int threads;          /* T: the gang's threads (1: no gang) */
	int mpi_rc;           /* thread 0's node barrier, read by all after the gang's */
	atomic_int rc;        /* the first failure of any thread */
};

struct gang_thread {
	struct gang *g;
	int k;                /* thread index in the gang */
};

/* rt_part's sync: every block of the node done. Thread 0's wait counts as
 * gradient sync: with the blocks cut, these waits are the exchange. */
static int gang_sync(void *ctx)
{
	struct gang_thread *me = ctx;
	struct gang *g = me->g;
	struct trainer *t = g->t;
	double t0 = me->k == 0 ? dt_mono_s() : 0.0;

	if (g->threads > 1)
		rt_pool_sync(&t->pool);
	if (t->dp.split) {
		if (me->k == 0)
			g->mpi_rc = rt_dp_sync(&t->dp);
		if (g->threads > 1)
			rt_pool_sync(&t->pool);
	}
	if (me->k == 0) {
		t->tm.grad += dt_mono_s() - t0;
		if (t->split_slow_ms) /* late past the barrier: the others run ahead */
			dt_fault_sleep(DT_FAULT_SPLIT, t->g->rank, t->split_slow_ms);
	}
	return g->mpi_rc;
}

/* The node's barrier alone, outside a gang (thread 0). */
static int node_sync(struct trainer *t)
{
	double t0 = dt_mono_s();
	int rc = rt_dp_sync(&t->dp);

	t->tm.grad += dt_mono_s() - t0;
	if (t->split_slow_ms)
		dt_fault_sleep(DT_FAULT_SPLIT, t->g->rank, t->split_slow_ms);
	return rc;
}

/* Thread k's part of one micro-batch: forward, the loss of this replica's
 * rows, backward. The loss: with the head cut by rows (rt_part_head_rows),
 * each thread's of its share of the rows, right after its rows' logits;
 * else thread 0's of them all, after a sync. A failure reaches every
 * thread alike (a shape that does not fit, or the node barrier's result
 * that gang_sync hands to all), so none is left waiting at a barrier the
 * others skip. */
static void gang_item(void *ctx, long k)
{
	struct gang *g = ctx;
	struct trainer *t = g->t;
	struct gang_thread me = { g, (int)k };
	int procs = t->dp.split ? t->dp.locals : 1, proc = t->dp.split ? t->dp.local : 0;
	/* this thread's share of its replica's rows [off, off + own) */
	int r0 = (int)(g->off + g->own * k / g->threads);
	int r1 = (int)(g->off + g->own * (k + 1) / g->threads);
	struct rt_part p = { proc * g->threads + (int)k, procs * g->threads, r0, r1, gang_sync, &me };
	bool by_rows = rt_part_head_rows(&t->st, p.L);
	struct rt_acts a = *g->acts; /* this thread's view (forward sets its rows) */
	const float *logits;
	int rc;

	if (!by_rows) {
		r0 = (int)g->off;
		r1 = (int)(g->off + g->own);
	}
	rc = rt_stage_forward_part(&t->st, &a, (int)g->rows, &p, &logits);
	if (!rc && (by_rows || k == 0))
		t->part_loss[k] += rt_softmax_xent(logits + (size_t)r0 * (size_t)t->classes,
						   g->labels + (r0 - g->off), r1 - r0, t->classes,
						   t->grad_scale, g->dy + (size_t)r0 * (size_t)t->classes,
						   &t->part_correct[k]);
	if (!rc && !by_rows)
		rc = gang_sync(&me);
	if (!rc)
		rc = rt_stage_backward_part(&t->st, &a, g->dy, NULL, &p);
	if (rc)
		atomic_store(&g->rc, rc);
}

/* The step's micro-batches, each over the whole node's rows (one replica
 * a node: its own): this replica reads its own rows into the input and
 * computes their loss; every block runs in the same order everywhere. */
int rt__split_schedule(struct trainer *t, const struct mb *mbs)
{
	struct gang g = { .t = t, .threads = t->tsplit ? rt_pool_gang_size(&t->pool) : 1 };
	double t0;
	int i, rc;

	g.acts = t->dp.split ? &t->split_acts : &t->slots[0].acts;
	g.dy = t->dp.split ? t->dp.dy : t->slots[0].dy;
	g.labels = t->slots[0].y;
	t->loss_sum = 0;
	t->correct = 0;
	for (i = 0; i < g.threads; i++) {
		t->part_loss[i] = 0;
		t->part_correct[i] = 0;
	}
	for (i = 0; i < t->micro; i++) {
		const struct mb *m = &mbs[i];

		g.off = t->dp.split ? m->node_off : 0;
		g.rows = t->dp.split ? m->node_rows : m->rows;
		g.own = m->rows;
		if (g.rows == 0)
			continue; /* on every replica of the node alike */
		/* the previous micro-batch's backward may still read the input
		 * on another replica (this rank's threads are done) */
		if (i > 0 && t->dp.split && (rc = node_sync(t)))
			return rc;
		t0 = dt_mono_s();
		if (m->rows > 0) {
			rc = rt_data_read(m->data, m->idx, (int)m->rows, g.acts->x + g.off * t->in,
					  g.labels, t->err);
			if (rc)
				return rc;
		}
		t->tm.data += dt_mono_s() - t0;
		if (t->dp.split && (rc = node_sync(t)))
			return rc;
		atomic_store(&g.rc, 0);
		g.mpi_rc = 0;
		t0 = dt_mono_s() - t->tm.grad; /* the syncs' waits are not compute */
		if (g.threads > 1)
			rt_pool_gang(&t->pool, gang_item, &g);
		else
			gang_item(&g, 0);
		t->tm.compute += dt_mono_s() - t->tm.grad - t0;
		rc = atomic_load(&g.rc);
		if (rc == -EINVAL)
			return dt_err_add(t->err, "rank %d: forward or backward pass failed", t->g->rank), rc;
		if (rc)
			return rc;
	}
	/* in thread order: the same sum on every run */
	for (i = 0; i < g.threads; i++) {
		t->loss_sum += t->part_loss[i];
		t->correct += t->part_correct[i];
	}
	return 0;
}
