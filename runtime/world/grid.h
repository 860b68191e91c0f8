/*
 * grid.h - the process grid of dtrain-run: how the ranks of the job are laid
 * out over data-parallel replicas and pipeline stages, and the MPI
 * communicators of each group.
 *
 * world = data x tensor x pipeline. Tensor parallelism is fixed at 1 for now,
 * but every size and coordinate is kept in arrays indexed by enum rt_dim so
 * that adding it later changes no caller.
 *
 * Rank order (the same on every rank, and part of the contract with the batch
 * script and the checkpoint layout): dimensions are listed fastest-varying
 * first in enum rt_dim, so with tensor = 1
 *
 *	rank = stage * data + replica
 *
 *	e.g. data 2 x pipeline 2:  rank 0 = (replica 0, stage 0)
 *	                           rank 1 = (replica 1, stage 0)
 *	                           rank 2 = (replica 0, stage 1)
 *	                           rank 3 = (replica 1, stage 1)
 *
 * Why the data-parallel index varies fastest: Slurm (and mpirun) pack tasks by
 * node, so consecutive ranks share a node. A data-parallel group allreduces
 * every gradient of its stage at every step, the heaviest traffic we have;
 * the pipeline only sends one micro-batch of activations between neighbours.
 * Keeping the fastest-varying group inside a node (as Megatron-LM's
 * parallel_state.py does) puts the allreduce on shared memory whenever
 * data <= tasks per node, and lets only the light point-to-point pipeline
 * traffic cross nodes. When tensor parallelism arrives it goes innermost, as
 * in Megatron, because it communicates more still; with tensor = 1 its place
 * changes no rank.
 *
 * Life cycle: rt_grid_init() is pure (no MPI call, unit tested), then
 * rt_grid_comms() splits the communicators (collective over the world), and
 * rt_grid_free() frees them. Queries take any rank of the world, not just
 * our own, so that a rank can find its peers.
 */
#ifndef DTRAIN_RUNTIME_GRID_H
#define DTRAIN_RUNTIME_GRID_H

#include <mpi.h>

#include "base/err.h"

/* Dimensions of the grid, fastest-varying first (this order IS the rank order). */
enum rt_dim {
	RT_DIM_TENSOR, /* tensor-parallel shard; always 1 for now */
	RT_DIM_DATA,   /* data-parallel replica */
	RT_DIM_PIPE,   /* pipeline stage */
	RT_NDIMS,
};

struct rt_grid {
	int world;             /* number of ranks = product of size[] */
	int rank;              /* our rank in the world, 0 <= rank < world */
	int size[RT_NDIMS];    /* extent of each dimension, >= 1 */
	int coord[RT_NDIMS];   /* our coordinates, 0 <= coord[d] < size[d] */
	/* Communicators, MPI_COMM_NULL until rt_grid_comms(); owned by the grid. */
	MPI_Comm data_comm;    /* the replicas of our stage; rank in it = our replica */
	MPI_Comm pipe_comm;    /* the stages of our replica; rank in it = our stage */
};

/* --- life cycle --- */

/* Lays out world ranks as data x pipeline (tensor 1) and fills g for `rank`.
 * Pure: calls no MPI function. Returns 0, or -EINVAL with a message in err
 * when a size is < 1, rank is out of range, or world != data * pipeline. */
int rt_grid_init(struct rt_grid *g, int world, int data, int pipeline, int rank,
		 struct dt_err *err);

/* Splits `world` (MPI_COMM_WORLD, whose size and our rank in it must be those
 * given to rt_grid_init) into g->data_comm and g->pipe_comm. Collective: every
 * rank of the world must call it. 0, or -EIO with the MPI error in err (the
 * caller should then MPI_Abort: the other ranks may be waiting in the split). */
int rt_grid_comms(struct rt_grid *g, MPI_Comm world, struct dt_err *err);

/* Frees the communicators (no-op for MPI_COMM_NULL; needs MPI still
 * initialised when they exist). Safe to call twice. */
void rt_grid_free(struct rt_grid *g);

/* --- queries (pure; a rank or coordinate out of range gives -1) --- */

/* Coordinates of any rank into coord[RT_NDIMS]; 0, or -1 when out of range. */
int rt_grid_coords(const struct rt_grid *g, int rank, int coord[RT_NDIMS]);
/* The rank at coord[RT_NDIMS], or -1 when a coordinate is out of range. */
int rt_grid_rank_at(const struct rt_grid *g, const int coord[RT_NDIMS]);

int rt_grid_replica(const struct rt_grid *g, int rank); /* data-parallel index */
int rt_grid_stage(const struct rt_grid *g, int rank);   /* pipeline stage */
/* Rank of (replica, stage) with tensor shard 0. */
int rt_grid_rank_of(const struct rt_grid *g, int replica, int stage);

/* The rank that writes stage's checkpoint shard: replica stage % data of
 * that stage, so that the shards' writes spread over the replicas (and so
 * over nodes); -1 when stage is out of range. */
int rt_grid_stage_writer(const struct rt_grid *g, int stage);

#endif
