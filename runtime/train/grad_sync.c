/*
 * grad_sync.c - parallel.grad_sync: how the replicas of a stage come to the
 * same gradient and update, behind one interface for the loop (trainer.h):
 *   "allreduce"  the stage's gradients in buckets of whole blocks, each
 *                allreduced (MPI_Iallreduce) as soon as the step's last
 *                backward has finished its blocks, so that communication
 *                overlaps the rest of the backward pass (PyTorch DDP's way:
 *                Li et al., VLDB 2020); every replica updates everything;
 *   "shared"     the replicas of a node share the parameters in memory
 *                (runtime/parallel/dp.h): each sums and updates its part of the
 *                node's gradient slots, then publishes it;
 *   "split"      the replicas of a node compute a part of every block
 *                (split_step.c, runtime/parallel/dp.h): each updates its parts, and
 *                the step's sums travel in one collective;
 * and with parallel.optimizer "sharded" (shard.h), which takes the place
 * of "allreduce": each block's tensors reduce-scattered during backward,
 * this replica's rows updated, every replica's rows all-gathered.
 * Sections: set-up, during backward, after backward, the update.
 */
#include "runtime/train/trainer.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

/* PyTorch DDP's default bucket size (Li et al., VLDB 2020). */
#define BUCKET_BYTES (25u << 20)

/* Buckets of whole blocks, last block first, each about BUCKET_BYTES; built
 * the same way on every replica of a stage, so they are reduced in the same
 * order everywhere (a mismatch would hang the job). */
int rt__grad_sync_init(struct trainer *t)
{
	int n = t->st.n_blocks, l, b = -1;
	size_t bytes = 0;

	t->buckets = calloc((size_t)n, sizeof(*t->buckets));
	t->block_bucket = calloc((size_t)n, sizeof(int));
	if (!t->buckets || !t->block_bucket)
		return dt_err_add(t->err, "rank %d: out of memory for %d gradient buckets", t->g->rank, n),
		       -ENOMEM;
	for (l = n - 1; l >= 0; l--) {
		const struct rt_block *blk = &t->st.blocks[l];

		if (b < 0 || bytes >= BUCKET_BYTES) {
			b++;
			bytes = 0;
			t->buckets[b].req = MPI_REQUEST_NULL;
		}
		/* blocks are laid out in order, so going down extends the
		 * bucket's range at its start */
		t->buckets[b].off = blk->offset;
		t->buckets[b].len += blk->n_params;
		bytes += blk->n_params * sizeof(float);
		t->block_bucket[l] = b;
	}
	t->n_buckets = b + 1;
	return 0;
}

/* --- during backward --- */

/* The bucket's sum, in place: in the stage's gradients on a host device,
 * else in their host copy (the device's range copied there first, and
 * back once the sum is done: rt__grad_sync_finish). */
static int start_bucket(struct trainer *t, struct bucket *b)
{
	float *g;

	b->started = 1;
	if (t->dev->ops->allreduce) { /* the device's own (NCCL), on its stream */
		t->dev->ops->allreduce(t->dev, t->st.grads + b->off, b->len);
		return 0;
	}
	g = (float *)rt_dev_staging(t->dev, t->st.grads, t->hgrads) + b->off;
	rt_dev_get(t->dev, g, t->st.grads + b->off, b->len * sizeof(float));
	MPI_CHECK(t, MPI_Iallreduce(MPI_IN_PLACE, g, (int)b->len, MPI_FLOAT, MPI_SUM,
				    t->g->data_comm, &b->req));
	return 0;
}

/* The sharded optimizer's host memory for the gradients (shard.h): the
 * stage's own on a host device, else their host copy, where block l's
 * gradients are copied before its reduce-scatter. (The all-gather of the
 * parameters goes through the same copy: the gradients are summed and
 * read by then.) */
static float *shard_host(struct trainer *t)
{
	return rt_dev_staging(t->dev, t->st.grads, t->hgrads);
}

static void shard_copy_block(struct trainer *t, int l)
{
	const struct rt_block *blk = &t->st.blocks[l];

	rt_dev_get(t->dev, shard_host(t) + blk->offset, t->st.grads + blk->offset,
		   blk->n_params * sizeof(float));
}

/* Called by rt_stage_backward after each block's gradients are complete. */
void rt__block_done(void *ctx, int block)
{
	struct trainer *t = ctx;
	struct bucket *b;
	int i, flag;

	if (t->replicas == 1 || t->dp.shared || !t->final_backward || t->bucket_rc)
		return;
	if (t->sharded) {
		int rc;

		shard_copy_block(t, block);
		rc = rt_shard_reduce_block(&t->shard, &t->st, shard_host(t), block);

		if (rc != MPI_SUCCESS)
			t->bucket_rc = rt_mpi_error(t->err, "MPI_Ireduce_scatter of a block's gradients", rc);
		return;
	}
	b = &t->buckets[t->block_bucket[block]];
	if (--b->pending == 0 && (t->bucket_rc = start_bucket(t, b)))
		return;
	/* Open MPI progresses non-blocking collectives only inside MPI calls. */
	for (i = 0; i < t->n_buckets; i++)
		if (t->buckets[i].started && t->buckets[i].req != MPI_REQUEST_NULL)
			MPI_Test(&t->buckets[i].req, &flag, MPI_STATUS_IGNORE);
}

void rt__grad_sync_arm(struct trainer *t)
{
	int l, i;

	t->bucket_rc = 0;
	for (i = 0; i < t->n_buckets; i++) {
		t->buckets[i].pending = 0;
		t->buckets[i].started = 0;
		t->buckets[i].req = MPI_REQUEST_NULL;
	}
	for (l = 0; l < t->st.n_blocks; l++)
		t->buckets[t->block_bucket[l]].pending++;
}

/* --- after backward --- */

/* Start what the backward pass did not (a replica whose last micro-batches
 * were empty), in bucket order, then wait for all. */
int rt__grad_sync_finish(struct trainer *t, bool save_reading)
{
	double t0;
	int i;

	if (t->replicas == 1)
		return 0;
	if (t->dp.shared) {
		/* the barrier's wait, and unless the update sums the slots
		 * itself (dp.fuse), the sum of this replica's part and the
		 * allreduce between nodes: all of it follows the backward pass.
		 * Split: no barrier there (runtime/parallel/dp.h) but while a save is in
		 * flight: its writer's copy reads every replica's blocks */
		t0 = dt_mono_s();
		if (t->dp.split && save_reading && rt_dp_sync(&t->dp))
			return -EIO;
		if (rt_dp_reduce(&t->dp, t->err))
			return -EIO;
		t->tm.grad += dt_mono_s() - t0;
		return 0;
	}
	t0 = dt_mono_s();
	if (t->sharded) {
		int l;

		for (l = t->st.n_blocks - 1; l >= 0; l--)
			if (!rt_shard_block_queued(&t->shard, l))
				shard_copy_block(t, l);
		MPI_CHECK(t, rt_shard_reduce_finish(&t->shard, &t->st, shard_host(t)));
		/* each tensor: this replica's sum, then zeros */
		rt_dev_put(t->dev, t->st.grads, shard_host(t), t->st.n_params * sizeof(float));
		t->tm.grad += dt_mono_s() - t0;
		return 0;
	}
	for (i = 0; i < t->n_buckets; i++)
		if (!t->buckets[i].started && start_bucket(t, &t->buckets[i]))
			return -EIO;
	for (i = 0; i < t->n_buckets; i++) {
		struct bucket *b = &t->buckets[i];

		MPI_CHECK(t, MPI_Wait(&b->req, MPI_STATUS_IGNORE));
		if (!t->dev->host && !t->dev->ops->allreduce)
			rt_dev_put(t->dev, t->st.grads + b->off, t->hgrads + b->off, b->len * sizeof(float));
	}
	t->tm.grad += dt_mono_s() - t0;
	return 0;
}

/* --- the update --- */

void rt__grad_sync_owned(const struct trainer *t, struct rt_span *whole,
			 const struct rt_span **sp, int *n)
{
	*whole = (struct rt_span){ 0, t->st.n_params };
	*sp = whole;
	*n = 1;
	if (t->dp.split) {
		*sp = t->dp.spans;
		*n = t->dp.n_spans;
	} else if (t->dp.shared) {
		*whole = (struct rt_span){ t->dp.first, t->dp.count };
	}
}

double rt__grad_sync_sumsq(const struct trainer *t, const struct rt_span *sp, int n)
{
	double sumsq = 0.0;
	int i;

	if (t->sharded) {
		for (i = 0; i < t->shard.n_tensors; i++)
			sumsq += t->dev->ops->sumsq(t->dev, t->st.grads + t->shard.pieces[i].grad,
						    t->shard.pieces[i].count);
		return sumsq;
	}
	for (i = 0; i < n; i++)
		sumsq += t->dev->ops->sumsq(t->dev, t->st.grads + sp[i].first, sp[i].count);
	return sumsq;
}

bool rt__grad_sync_sums_stats(const struct trainer *t)
{
	return t->dp.split;
}

int rt__grad_sync_sums(struct trainer *t, double stats[2], double *sumsq)
{
	double t0 = dt_mono_s();
	int rc;

	if (t->sharded) {
		MPI_CHECK(t, MPI_Allreduce(MPI_IN_PLACE, sumsq, 1, MPI_DOUBLE, MPI_SUM, t->g->data_comm));
		t->tm.grad += dt_mono_s() - t0;
		return 0;
	}
	if (!t->dp.split)
		return t->dp.shared ? rt_dp_sum_parts(&t->dp, sumsq, t->err) : 0;
	rc = rt_dp_step_sums(&t->dp, stats, 2, sumsq, t->err);
	t->tm.grad += dt_mono_s() - t0;
	return rc;
}

double rt__grad_sync_update(struct trainer *t, const struct rt_span *sp, int n, double lr,
			    float scale)
{
	if (t->sharded)
		return t->dev->ops->optim_pieces(t->dev, &t->opt, t->st.params, t->st.grads,
						 t->shard.pieces, t->shard.n_tensors, lr, scale);
	if (t->dp.fuse) /* shared, one node, no clipping (runtime/parallel/dp.h) */
		return rt_optim_step_sum(&t->opt, t->st.params, t->dp.slot, t->dp.locals, sp[0].first,
					 sp[0].count, lr);
	return t->dev->ops->optim_spans(t->dev, &t->opt, t->st.params, t->st.grads, sp, n, lr, scale);
}

int rt__grad_sync_publish(struct trainer *t, bool clipped)
{
	if (t->sharded) {
		double t0 = dt_mono_s();
		float *host = rt_dev_staging(t->dev, t->st.params, t->hgrads);
		int i;

		for (i = 0; i < t->shard.n_tensors; i++) /* this replica's rows, updated */
			rt_dev_get(t->dev, host + t->shard.pieces[i].first, t->st.params + t->shard.pieces[i].first,
				   t->shard.pieces[i].count * sizeof(float));
		MPI_CHECK(t, rt_shard_gather(&t->shard, &t->st, host));
		rt_dev_put(t->dev, t->st.params, host, t->st.n_params * sizeof(float));
		t->tm.grad += dt_mono_s() - t0;
		return 0;
	}
	/* split without clipping: the sums after the update are the hand-over */
	return t->dp.shared && (clipped || !t->dp.split) ? rt_dp_publish(&t->dp, t->err) : 0;
}
