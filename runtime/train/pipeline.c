/*
 * pipeline.c - a stage's work on micro-batches: forward and backward of one
 * micro-batch (with the sends and receives between neighbouring stages),
 * and the schedules that order them over a step (gpipe, 1f1b; Narayanan et
 * al., SC'21).
 */
#include "runtime/train/trainer.h"

#include <errno.h>
#include <string.h>

/* --- pipeline operations --- */

int rt__forward_mb(struct trainer *t, struct slot *sl, const struct mb *m, int want_grad)
{
	MPI_Comm pc = t->g->pipe_comm;
	int last = t->stage == t->stages - 1;
	size_t rows = (size_t)m->rows;
	const float *y = NULL;
	int rc;

	double t0, t1;

	if (m->rows == 0)
		return 0;
	t0 = dt_mono_s();
	MPI_CHECK(t, MPI_Wait(&sl->send_fwd, MPI_STATUS_IGNORE));
	t1 = dt_mono_s();
	t->tm.pipe += t1 - t0;
	if (t->stage == 0 || last) {
		rc = rt_data_read(m->data, m->idx, (int)m->rows, t->stage == 0 ? sl->hx : NULL,
				  last ? sl->hy : NULL, t->err);
		if (rc)
			return rc;
		t0 = dt_mono_s();
		t->tm.data += t0 - t1;
		t1 = t0;
	}
	if (t->stage > 0) {
		MPI_CHECK(t, MPI_Recv(sl->hx, (int)(m->rows * t->in), MPI_FLOAT, t->prev, m->tag, pc,
				      MPI_STATUS_IGNORE));
		t0 = dt_mono_s();
		t->tm.pipe += t0 - t1;
		t1 = t0;
	}
	rt_dev_put(t->dev, sl->x, sl->hx, rows * (size_t)t->in * sizeof(float));
	if (last)
		rt_dev_put(t->dev, sl->y, sl->hy, rows * (size_t)t->labels * sizeof(int32_t));
	rc = rt_stage_forward(&t->st, &sl->acts, sl->x, (int)m->rows, &y);
	if (rc)
		return dt_err_add(t->err, "rank %d: forward pass failed", t->g->rank), rc;
	if (!last) {
		float *out = rt_dev_staging(t->dev, (float *)y, sl->hout);

		rt_dev_get(t->dev, out, y, rows * (size_t)t->out * sizeof(float));
		t->tm.compute += dt_mono_s() - t1;
		MPI_CHECK(t, MPI_Isend(out, (int)(m->rows * t->out), MPI_FLOAT, t->next, m->tag, pc,
				       &sl->send_fwd));
		return 0;
	}
	t->dev->ops->loss_add(t->dev, y, sl->y, (int)m->rows * t->labels, t->classes, t->grad_scale,
			      want_grad ? sl->dy : NULL);
	t->tm.compute += dt_mono_s() - t1;
	return 0;
}

int rt__backward_mb(struct trainer *t, struct slot *sl, const struct mb *m)
{
	MPI_Comm pc = t->g->pipe_comm;
	int rc;

	double t0, t1;

	if (m->rows == 0)
		return 0;
	t0 = dt_mono_s();
	MPI_CHECK(t, MPI_Wait(&sl->send_bwd, MPI_STATUS_IGNORE));
	if (t->stage < t->stages - 1) {
		MPI_CHECK(t, MPI_Recv(sl->hdy, (int)(m->rows * t->out), MPI_FLOAT, t->next, m->tag, pc,
				      MPI_STATUS_IGNORE));
		rt_dev_put(t->dev, sl->dy, sl->hdy, (size_t)m->rows * (size_t)t->out * sizeof(float));
	}
	t1 = dt_mono_s();
	t->tm.pipe += t1 - t0;
	rc = rt_stage_backward(&t->st, &sl->acts, sl->dy, t->stage > 0 ? sl->dx : NULL,
			       rt__block_done, t);
	if (rc)
		return dt_err_add(t->err, "rank %d: backward pass failed", t->g->rank), rc;
	if (t->bucket_rc)
		return t->bucket_rc;
	if (t->stage > 0)
		rt_dev_get(t->dev, sl->hdx, sl->dx, (size_t)m->rows * (size_t)t->in * sizeof(float));
	t->tm.compute += dt_mono_s() - t1;
	if (t->stage > 0)
		MPI_CHECK(t, MPI_Isend(sl->hdx, (int)(m->rows * t->in), MPI_FLOAT, t->prev, m->tag, pc,
				       &sl->send_bwd));
	return 0;
}

int rt__wait_sends(struct trainer *t)
{
	double t0 = dt_mono_s();
	int i;

	for (i = 0; i < t->n_slots; i++) {
		MPI_CHECK(t, MPI_Wait(&t->slots[i].send_fwd, MPI_STATUS_IGNORE));
		MPI_CHECK(t, MPI_Wait(&t->slots[i].send_bwd, MPI_STATUS_IGNORE));
	}
	t->tm.pipe += dt_mono_s() - t0;
	return 0;
}

/* --- the schedules --- */

/* Run this stage's part of one step over micro-batches mbs[0..micro-1].
 * Backward passes go in forward order in both schedules, so gradients
 * accumulate in the same order and gpipe and 1f1b give identical bits.
 *   gpipe: F0 F1 ... F(m-1), then B0 ... B(m-1)
 *   1f1b:  w = min(stages - stage - 1, m) warm-up forwards, then one forward
 *          and one backward alternately, then the remaining backwards. */
int rt__run_schedule(struct trainer *t, const struct mb *mbs)
{
	int m = t->micro, last_nonempty = -1, f = 0, b = 0, i, rc;
	int warm = !strcmp(t->s->parallel.schedule, "1f1b") ? t->stages - t->stage - 1 : m;

	if (warm > m)
		warm = m;
	for (i = 0; i < m; i++)
		if (mbs[i].rows > 0)
			last_nonempty = i;
	t->loss_sum = 0;
	t->correct = 0;
	t->dev->ops->loss_zero(t->dev);

#define FWD()                                                                            \
	do {                                                                             \
		rc = rt__forward_mb(t, &t->slots[f % t->n_slots], &mbs[f], 1);               \
		if (rc)                                                                  \
			return rc;                                                       \
		f++;                                                                     \
	} while (0)
#define BWD()                                                                            \
	do {                                                                             \
		t->final_backward = b == last_nonempty;                                  \
		rc = rt__backward_mb(t, &t->slots[b % t->n_slots], &mbs[b]);                 \
		if (rc)                                                                  \
			return rc;                                                       \
		b++;                                                                     \
	} while (0)

	for (i = 0; i < warm; i++)
		FWD();
	while (f < m) {
		FWD();
		BWD();
	}
	while (b < m)
		BWD();
#undef FWD
#undef BWD
	t->final_backward = 0;
	/* the loss sums wait for the device; so does a stage without a loss,
	 * which learns of a kernel's failure here */
	if (t->stage == t->stages - 1)
		return t->dev->ops->loss_fetch(t->dev, &t->loss_sum, &t->correct, t->err);
	return rt_dev_sync(t->dev, t->err);
}
