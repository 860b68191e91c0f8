/*
 * dp.h - gradient averaging between the data-parallel replicas of a stage,
 * and one copy of the stage's parameters per node.
 *
 * Three ways, chosen by parallel.grad_sync:
 *
 * "allreduce": every replica keeps its own parameters, gradients and
 * optimizer state; gradients are summed by MPI_Iallreduce over data_comm, in
 * buckets started during the backward pass (runtime/train/train.c). Every replica
 * then updates all of its parameters.
 *
 * "auto", "shared" and "split" do that only where each replica of a stage is alone
 * on its node. Where L > 1 replicas of a stage share a node (the same node
 * by MPI_COMM_TYPE_SHARED), they share, in one shared-memory window per
 * node, ONE copy of the parameters and of the optimizer state. "auto" (the
 * default) is "split" where the stage is the whole model (parallel.pipeline
 * 1), else "shared".
 *
 * "shared": one gradient buffer per replica (its "slot"). A step goes:
 *	forward and backward: every replica reads the shared parameters and
 *		adds its gradient into its own slot (zero since
 *		the last update);
 *	rt_dp_reduce: a barrier; replica k sums part k of all L slots, in slot
 *		order (slot 0 + slot 1 + ...), into its own slot; when the
 *		stage's replicas span several nodes,
 *		part k is then allreduced with the replicas that hold part k on
 *		the other nodes (one MPI_Allreduce of n / L floats);
 *	update: replica k updates part k of the parameters and of the optimizer
 *		state (rt_optim_step_take, which zeroes the part of the slot it
 *		read), like ZeRO stage 1 (Rajbhandari et al.
 *		2020) within a node; on one node without clipping the sum is
 *		not even written: the update adds the slots as it reads them
 *		(rt_optim_step_sum, dp->fuse), and rt_dp_reduce only waits;
 *	rt_dp_publish: a barrier, so that no replica starts the next forward
 *		pass before every part is updated.
 * Against an allreduce between the processes of one node this moves no
 * message (each gradient is read once, where it lies), runs 1/L of the
 * optimizer on each replica, and keeps L - 1 fewer copies of the
 * parameters and the state. It needs the same L on every node of the
 * stage's replicas (else "auto" falls back to "allreduce").
 *
 * "split": the node's replicas run each micro-batch of the whole node
 * together, every layer cut between them (runtime/model/model.h, rt_part): the
 * node's rows and each layer's activations and their gradients lie in the
 * window, and replica k computes block k of every layer's outputs (rows of
 * W) over all the node's rows, so its gradient of those rows is already
 * the node's sum. A step goes:
 *	each micro-batch: every replica reads its own rows into the node's
 *		input (the sampler's cut says where: train/trainer.h struct mb), rt_dp_sync, forward and
 *		backward with a sync after each layer (rt_dp_sync as the
 *		part's sync), the loss over its own rows in between;
 *	rt_dp_reduce: no barrier (no replica reads another's weights after
 *		the backward pass's last sync, and its own blocks' gradient is
 *		whole; but while an async save is in flight the trainer syncs
 *		first, as its writer's snapshot copy reads every block); with
 *		several nodes, each block allreduced with the same block on the
 *		other nodes;
 *	update: replica k updates its blocks (dp->spans, rt_optim_step_spans);
 *	rt_dp_step_sums: the step's one collective, the replicas' loss and the
 *		parts of the gradient norm in one allreduce, and the hand-over
 *		after the update (with clipping, the norm comes first: the sums
 *		before the update, rt_dp_publish after it).
 * The barriers are where the data flow needs them: 2 (layers + 1) a step
 * of one micro-batch (the input, each layer's forward, the loss, each
 * layer's backward but the first's, the sums), 3 fewer than with barriers
 * before and after the update and the norm summed apart; 2 fewer
 * when the head is narrow and cut by rows (rt_part_head_rows: each replica
 * computes its own rows' logits, loss and head input gradient with no
 * barrier in between). On a machine whose cores stall now and then, every
 * barrier makes both replicas wait for the stalled one (docs/performance.md).
 * Against "shared": no gradient slots and no sum (each weight's gradient
 * is made whole, once), and every product keeps the node's batch: with
 * half the rows each, data parallelism streams all the weights for half
 * the work (docs/performance.md). It needs the stage to be the whole model,
 * and every rank of a node to run in step (a barrier per layer).
 *
 * Results "shared": with L = 2 the sum of two slots is bitwise MPI's sum (one
 * addition), so a run equals its "allreduce" run bit for bit; with L > 2
 * the sum runs in another order than MPI's (float32 rounding apart). Only
 * the reported gradient norm is summed in parts (last bits). Every node
 * computes the same parts from the same sums, so the nodes' copies agree.
 * "split": the gradient of each weight is one product over the node's
 * rows, where the other ways add per-replica products: equal to float32
 * rounding, not bitwise.
 *
 * Sections: life cycle, the step, checkpoints.
 */
#ifndef DTRAIN_RUNTIME_DP_H
#define DTRAIN_RUNTIME_DP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "jobs/spec.h"
#include "runtime/world/grid.h"
#include "runtime/model/model.h"
#include "runtime/model/optim.h"
#include "base/err.h"

struct rt_pool; /* runtime/world/pool.h */

struct rt_dp {
	bool shared;     /* a shared-memory way; false: "allreduce" (or one replica) */
	bool split;      /* shared, the "split" way; false: slots ("shared") */
	MPI_Comm data;   /* the grid's data_comm (borrowed) */
	MPI_Comm node;   /* shared: the stage's replicas on this node; rank = local */
	MPI_Comm cross;  /* shared, several nodes: the holders of part `local` on
			  * every node, rank = node order; else MPI_COMM_NULL */
	int local;       /* index among the node's replicas of the stage */
	int locals;      /* L: replicas of the stage on each node */
	struct rt_pool *pool; /* borrowed: the threads of the sums (the optimizer's) */
	MPI_Win win;     /* the shared window, or MPI_WIN_NULL */
	size_t n;        /* floats of the stage's parameters */
	size_t stride;   /* floats between two slots (n rounded up to a cache line) */
	float *slots;    /* [locals][stride]: each replica's gradient; in win */
	float **slot;    /* [locals], owned: slot k = slots + k * stride */
	bool fuse;       /* one node and no clipping: rt_dp_reduce only waits, and
			  * the update sums the slots as it reads them
			  * (rt_optim_step_sum), with no summed copy written */
	size_t first;    /* this replica's part: [first, first + count) */
	size_t count;
	/* the split way */
	float *grads;    /* [n]: the stage's one gradient; in win */
	struct rt_span *spans; /* [n_spans], owned: the blocks this replica updates */
	int n_spans;
	int *coords;     /* [locals], owned: data coordinate of each of the node's replicas */
	int node_rows;   /* most rows of one micro-batch of the whole node */
	float *acts_mem; /* rt_acts_floats(st, node_rows) floats for rt_acts_place; in win */
	float *dy;       /* [node_rows][stage out]: the loss's gradient; in win */
	struct dt_err *err; /* borrowed: where rt_dp_sync reports */
};

/* --- life cycle --- */

/* Collective over the grid's data_comm. Picks the way (see the top), and
 * for the shared ways allocates the window (split: with room for the
 * activations of max_rows rows, a replica's most in a micro-batch, times
 * the node's replicas), copies the stage's initial
 * parameters and optimizer state into it (from the node's replica 0; all
 * replicas computed the same) and points st and o at it (rt_stage_adopt,
 * rt_optim_adopt), freeing their own copies. Free with rt_dp_free() before
 * st and o. 0, or -ENOMEM / -EIO with a message naming the rank. */
int rt_dp_init(struct rt_dp *dp, const struct spec *s, const struct rt_grid *g,
	       struct rt_stage *st, struct rt_optim *o, int max_rows, struct dt_err *err);
/* Collective when shared (it frees the window): detaches st and o from it
 * first (their buffers become NULL). Safe on a zeroed struct. */
void rt_dp_free(struct rt_dp *dp, struct rt_stage *st, struct rt_optim *o);
/* For a rank that fails alone (the job is then aborted): detaches st and o
 * like rt_dp_free, but calls nothing collective (the window is left to the
 * end of the process). */
void rt_dp_abandon(struct rt_dp *dp, struct rt_stage *st, struct rt_optim *o);

/* --- the step (shared way only; all replicas of the stage call them) --- */

/* After the step's last backward. Split: allreduces this replica's blocks
 * with the same blocks on the other nodes (no barrier). Shared: waits for
 * every replica of the node, then (unless fuse) leaves in
 * st->grads[first, first + count) the sum of the step's gradients over all
 * replicas of the stage, and that range of the other slots zero (the
 * update zeroes this one's: each replica's next backward adds to its
 * slot); with fuse, only the wait: the update reads and zeroes the slots
 * (dp->slot, rt_optim_step_sum). 0 or -EIO. */
int rt_dp_reduce(struct rt_dp *dp, struct dt_err *err);
/* After this replica's update of its part: returns when every replica of
 * the node has updated its part. 0 or -EIO. */
int rt_dp_publish(struct rt_dp *dp, struct dt_err *err);
/* Split: the hand-over of rt_part (model.h; ctx is the rt_dp): a barrier
 * of the node's replicas, what each wrote before visible to all after.
 * 0 or -EIO (message in the err given to rt_dp_init). */
int rt_dp_sync(void *ctx);
/* The sum over the node's replicas of each one's `part` (a sum of squares
 * of its part of the gradient): the whole stage's. 0 or -EIO. */
int rt_dp_sum_parts(struct rt_dp *dp, double *part, struct dt_err *err);
/* Split: the step's one collective over all the stage's replicas
 * (data_comm). stats [n_stats] (at most RT_DP_MAX_STATS): summed over the
 * replicas; *part (this replica's blocks' share of a sum over the stage's
 * parameters, e.g. its sum of squares): summed over the node's replicas,
 * once however many nodes hold the same blocks. Also the node's hand-over
 * (as rt_dp_sync): what each replica wrote to the window before, e.g. its
 * update, every replica reads after. 0, -EINVAL or -EIO. */
#define RT_DP_MAX_STATS 7
int rt_dp_step_sums(struct rt_dp *dp, double *stats, int n_stats, double *part,
		    struct dt_err *err);

/* --- checkpoints --- */

/* After data replica 0 of the stage has filled p [n] (parameters or a
 * state read from a checkpoint): makes every replica's copy equal to it.
 * Shared: one broadcast between the nodes' replica 0, then a node barrier;
 * else a broadcast over data_comm. Collective over data_comm. 0 or an MPI
 * error code. */
int rt_dp_bcast(const struct rt_dp *dp, float *p, size_t n);

#endif
