/*
 * grid.c - the process grid: rank <-> (tensor, replica, stage) arithmetic
 * and the MPI communicators of each group. The rank order is documented in
 * grid.h; everything here follows from "enum rt_dim lists the dimensions
 * fastest-varying first".
 *
 * Sections: pure layout (init and queries), then communicators.
 */
#include "runtime/world/grid.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* --- layout --- */

int rt_grid_init(struct rt_grid *g, int world, int data, int pipeline, int rank,
		 struct dt_err *err)
{
	long want;

	memset(g, 0, sizeof(*g));
	g->data_comm = MPI_COMM_NULL;
	g->pipe_comm = MPI_COMM_NULL;

	if (data < 1 || pipeline < 1)
		return dt_err_add(err, "parallel.data and parallel.pipeline must be >= 1 (got %d x %d)",
				  data, pipeline);
	if (world < 1)
		return dt_err_add(err, "world size must be >= 1 (got %d)", world);
	want = (long)data * pipeline;
	if (want != world)
		return dt_err_add(err, "world size %d does not match parallel.data x parallel.pipeline = %d x %d = %ld (hint: start %ld tasks, or change parallel.data or parallel.pipeline)",
				  world, data, pipeline, want, want);
	if (rank < 0 || rank >= world)
		return dt_err_add(err, "rank %d is outside the world of %d ranks", rank, world);

	g->world = world;
	g->rank = rank;
	g->size[RT_DIM_TENSOR] = 1;
	g->size[RT_DIM_DATA] = data;
	g->size[RT_DIM_PIPE] = pipeline;
	rt_grid_coords(g, rank, g->coord);
	return 0;
}

int rt_grid_coords(const struct rt_grid *g, int rank, int coord[RT_NDIMS])
{
	int d;

	if (rank < 0 || rank >= g->world) {
		for (d = 0; d < RT_NDIMS; d++)
			coord[d] = -1;
		return -1;
	}
	/* mixed radix, least significant (fastest) digit first */
	for (d = 0; d < RT_NDIMS; d++) {
		coord[d] = rank % g->size[d];
		rank /= g->size[d];
	}
	return 0;
}

int rt_grid_rank_at(const struct rt_grid *g, const int coord[RT_NDIMS])
{
	int d, rank = 0;

	for (d = RT_NDIMS - 1; d >= 0; d--) {
		if (coord[d] < 0 || coord[d] >= g->size[d])
			return -1;
		rank = rank * g->size[d] + coord[d];
	}
	return rank;
}

int rt_grid_replica(const struct rt_grid *g, int rank)
{
	int c[RT_NDIMS];

	rt_grid_coords(g, rank, c);
	return c[RT_DIM_DATA];
}

int rt_grid_stage(const struct rt_grid *g, int rank)
{
	int c[RT_NDIMS];

	rt_grid_coords(g, rank, c);
	return c[RT_DIM_PIPE];
}

int rt_grid_rank_of(const struct rt_grid *g, int replica, int stage)
{
	int c[RT_NDIMS] = { 0 };

	c[RT_DIM_DATA] = replica;
	c[RT_DIM_PIPE] = stage;
	return rt_grid_rank_at(g, c);
}

int rt_grid_stage_writer(const struct rt_grid *g, int stage)
{
	return rt_grid_rank_of(g, stage % g->size[RT_DIM_DATA], stage);
}

/* --- communicators --- */

static int mpi_fail(struct dt_err *err, const char *call, int rc)
{
	char s[MPI_MAX_ERROR_STRING];
	int n = 0;

	if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS)
		snprintf(s, sizeof(s), "MPI error %d", rc);
	dt_err_add(err, "%s: %s", call, s);
	return -EIO;
}

/*
 * Every rank of a group must get the same color, and the key orders the
 * group, so that a rank's rank in the group is its coordinate along the
 * group's dimension. The color is the rank of the group's first member, which
 * is the same on all members and differs between groups.
 */
static int split_along(struct rt_grid *g, MPI_Comm world, enum rt_dim dim,
		       MPI_Comm *out, const char *what, struct dt_err *err)
{
	int c[RT_NDIMS], color, rc, n = 0, r = -1;

	memcpy(c, g->coord, sizeof(c));
	c[dim] = 0;
	color = rt_grid_rank_at(g, c);
	rc = MPI_Comm_split(world, color, g->coord[dim], out);
	if (rc != MPI_SUCCESS)
		return mpi_fail(err, "MPI_Comm_split", rc);
	rc = MPI_Comm_size(*out, &n);
	if (rc == MPI_SUCCESS)
		rc = MPI_Comm_rank(*out, &r);
	if (rc != MPI_SUCCESS)
		return mpi_fail(err, "MPI_Comm_size", rc);
	if (n != g->size[dim] || r != g->coord[dim]) {
		dt_err_add(err, "%s communicator: got rank %d of %d, want %d of %d (hint: MPI_COMM_WORLD and the grid disagree)",
			   what, r, n, g->coord[dim], g->size[dim]);
		return -EIO;
	}
	return 0;
}

int rt_grid_comms(struct rt_grid *g, MPI_Comm world, struct dt_err *err)
{
	int rc, n = 0, r = -1;

	rc = MPI_Comm_size(world, &n);
	if (rc == MPI_SUCCESS)
		rc = MPI_Comm_rank(world, &r);
	if (rc != MPI_SUCCESS)
		return mpi_fail(err, "MPI_Comm_size", rc);
	if (n != g->world || r != g->rank) {
		dt_err_add(err, "grid is for rank %d of %d but the MPI communicator has rank %d of %d",
			   g->rank, g->world, r, n);
		return -EIO;
	}

	rc = split_along(g, world, RT_DIM_DATA, &g->data_comm, "data-parallel", err);
	if (rc == 0)
		rc = split_along(g, world, RT_DIM_PIPE, &g->pipe_comm, "pipeline", err);
	if (rc)
		rt_grid_free(g);
	return rc;
}

void rt_grid_free(struct rt_grid *g)
{
	if (g->data_comm != MPI_COMM_NULL)
		MPI_Comm_free(&g->data_comm);
	if (g->pipe_comm != MPI_COMM_NULL)
		MPI_Comm_free(&g->pipe_comm);
	g->data_comm = MPI_COMM_NULL;
	g->pipe_comm = MPI_COMM_NULL;
}
