/*
 * shard.h - the sharded optimizer (parallel.optimizer "sharded"): every
 * data-parallel replica of a stage is the parameter server of its 1/D of
 * the stage, with no servers apart from the workers (ZeRO stage 1,
 * Rajbhandari et al. 2020; Megatron's distributed optimizer; llm.c's -z 1).
 *
 * Replica r of D owns rows ckpt_piece_rows(r, D) of every tensor of its
 * stage (the first dimension; row-major, one contiguous range of the
 * tensor's floats): the checkpoint's optimizer pieces are the same rows
 * (checkpoint/ckpt.h), so each replica writes its own piece, and a tied
 * tensor's two copies (same shape) are cut alike wherever they live. A
 * step, on every replica (runtime/README.md has the figure):
 *	backward: as each block's gradients are complete, its tensors'
 *		gradients are reduce-scattered (in block order, last block
 *		first): replica r gets the sum over replicas of its rows at the
 *		start of the tensor's gradient; the rest of it is then zeroed
 *		for the next step's backward to add to;
 *	update: replica r updates its rows of the parameters with that sum
 *		and its shard of the optimizer state (rt_optim_step_pieces,
 *		which zeroes the sum as it reads it); the gradient norm is the
 *		sum of every replica's part (one allreduce);
 *	all-gather: every tensor's rows go to every replica
 *		(MPI_Iallgatherv in place), so that all hold the whole
 *		updated parameters for the next forward pass.
 * On a device whose memory is not the host's, MPI works on host copies:
 * each block's gradients are copied out before its reduce-scatter, the
 * sums back before the update (which runs on the device), and the updated
 * rows out and the gathered tensors back around the all-gather.
 * Memory per replica: the parameters and the gradient whole, the optimizer
 * state 1/D (AdamW: 2n/D floats for 2n replicated; no gradient shard of
 * its own), and the collectives' scratch, which is bounded: a tensor is
 * reduce-scattered in chunks of RT_SHARD_CHUNK_FLOATS (MPI_Ireduce_scatter
 * in place on each chunk, whose part of this replica's rows lands at the
 * chunk's start and is moved down to the tensor's start once the tensor
 * is done), at most RT_SHARD_IN_FLIGHT chunks at a time, the next ones
 * started as those end, in one order on every replica. (Whole tensors at
 * once let Open MPI's reduce-scatter, which sums a whole tensor onto one
 * rank, give replica 0 a peak 76 MiB above the others on an MLP of 10M
 * parameters with AdamW on 4 replicas.)
 *
 * Results: the update is elementwise, so a replica's rows are updated
 * exactly as a replicated optimizer would update them from the same
 * gradient; the sums run in the reduce-scatter's order rather than the
 * allreduce's (with D = 2, one addition: the same bits), and the norm adds
 * per-replica parts (its last bits). Bitwise reproducible run to run.
 *
 * Sections: life cycle, the step, queries.
 */
#ifndef DTRAIN_RUNTIME_SHARD_H
#define DTRAIN_RUNTIME_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "base/err.h"
#include "runtime/model/model.h"
#include "runtime/model/optim.h"

/* Floats of one chunk of a tensor's reduce-scatter (1 MiB), and the
 * chunks in flight at once. */
#define RT_SHARD_CHUNK_FLOATS (1u << 18)
#define RT_SHARD_IN_FLIGHT 4

/* One chunk of a tensor's reduce-scatter: floats [at, at + n) of tensor
 * `tensor`, of which this replica sums `mine` (at the chunk's start),
 * moved to `to` in the tensor once the tensor is done. */
struct rt_shard_chunk {
	int tensor;
	size_t at, n, mine, to;
};

/* This replica's rows of one tensor of the stage. */
struct rt_shard_rows {
	int64_t row0, rows;   /* rows [row0, row0 + rows) of its first dimension */
};

struct rt_shard {
	int replicas, replica; /* D, and this replica's index (its data_comm rank) */
	MPI_Comm data;         /* the grid's data_comm (borrowed) */
	int n_tensors;         /* the stage's */
	struct rt_shard_rows *rows;    /* [n_tensors], owned */
	struct rt_optim_piece *pieces; /* [n_tensors], owned: the same rows as
					* floats: first in the stage's params,
					* grad (the tensor's start) in its
					* grads, at in the state, count */
	int *counts, *displs;  /* [n_tensors][replicas], owned: floats of tensor
				* i each replica holds, and where they start in
				* the tensor */
	int *tensor_first;     /* [stage blocks + 1], owned: block l's tensors
				* are [tensor_first[l], tensor_first[l + 1]) */
	size_t floats;         /* floats of this replica's shard */
	MPI_Request *req;      /* [n_tensors], owned: each tensor's all-gather */
	/* the reduce-scatter's chunks, tensor i's being
	 * [tensor_chunk[i], tensor_chunk[i + 1]), with their counts
	 * [n_chunks][replicas]; the step's queue of tensors, in the order
	 * queued, and the next chunk to start (its position in the queue's
	 * chunks); the chunks in flight */
	struct rt_shard_chunk *chunks; /* owned */
	int n_chunks;
	int *tensor_chunk;     /* [n_tensors + 1], owned */
	int *chunk_counts;     /* owned */
	int *queue;            /* [n_tensors], owned */
	bool *queued;          /* [n_tensors], owned */
	int n_queued, next_tensor, next_chunk;
	MPI_Request flight[RT_SHARD_IN_FLIGHT];
};

/* --- life cycle --- */

/* The shard of replica `replica` of `replicas` (data_comm's rank and size)
 * of stage st. The optimizer's state is the caller's (rt_optim_init for
 * sh->floats). Free with rt_shard_free(), also
 * after a failure. 0, -EINVAL (a tensor larger than one MPI count) or
 * -ENOMEM, with a message naming the rank. */
int rt_shard_init(struct rt_shard *sh, const struct rt_stage *st, MPI_Comm data, int replicas,
		  int replica, struct dt_err *err);
/* Frees what sh owns; safe on a zeroed struct. Not collective. After a
 * step function failed, requests may be left in flight: the job is then
 * aborted, never continued. */
void rt_shard_free(struct rt_shard *sh);

/* --- the step (collective over data_comm, in the same order on every
 * replica; each returns 0 or an MPI error code) --- */

/* The arrays these take are host memory laid out as the stage's (tensor i
 * at st->tensors[i].offset): the stage's own gradients and parameters on a
 * host device, else the trainer's host copies (runtime/train/grad_sync.c
 * copies to and from the device around them). */

/* Queues the reduce-scatter of the tensors of the stage's block l (local
 * index), whose gradients in grads are complete; then lets MPI progress
 * the chunks in flight and starts the next ones where a place is free.
 * grads is the same array for every call of a step. */
int rt_shard_reduce_block(struct rt_shard *sh, const struct rt_stage *st, float *grads, int l);
/* Whether block l's reduce-scatter is queued in this step. */
bool rt_shard_block_queued(const struct rt_shard *sh, int l);
/* After the step's backward: queues the blocks not queued yet, last
 * first, and waits for all. Each tensor's gradient in grads then starts
 * with this replica's rows of the replicas' sum (sh->pieces[i].grad, .count
 * floats), and is zero past them (the update zeroes the sum it reads: the
 * next backward adds to a zero gradient). */
int rt_shard_reduce_finish(struct rt_shard *sh, const struct rt_stage *st, float *grads);
/* After the update of this replica's rows of params: every replica's rows
 * to all (in place), waited for. */
int rt_shard_gather(struct rt_shard *sh, const struct rt_stage *st, float *params);

/* --- queries --- */

/* Where this replica's summed gradient of tensor i lies in st->grads (or
 * in a copy laid out alike), after rt_shard_reduce_finish: *n floats. */
float *rt_shard_grad(const struct rt_shard *sh, const struct rt_stage *st, int i, size_t *n);

#endif
