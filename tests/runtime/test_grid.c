/*
 * test_grid.c - the process grid's pure arithmetic (runtime/world/grid.h): every
 * rank of several shapes, rank <-> coordinates round trips, the stages'
 * checkpoint shard writers, the documented rank order and its node
 * locality, and the errors of a world that does not match the spec. No MPI_Init: the
 * communicators are exercised by dtrain-run under mpirun and srun.
 *
 * Sections: helpers, layout, queries, errors, main.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/world/grid.h"

/* --- helpers --- */

struct shape {
	int data, pipeline;
};

static const struct shape shapes[] = {
	{ 1, 1 }, { 2, 1 }, { 1, 2 }, { 2, 2 }, { 4, 2 },
	{ 2, 4 }, { 3, 5 }, { 8, 1 }, { 1, 8 }, { 7, 3 },
};
#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))

static void init_ok(struct rt_grid *g, int data, int pipeline, int rank)
{
	struct dt_err err = { 0 };

	assert_int_equal(rt_grid_init(g, data * pipeline, data, pipeline, rank, &err), 0);
	assert_int_equal(err.count, 0);
}

/* --- layout --- */

/* rank = stage * data + replica, for every rank of every shape */
static void test_every_rank_every_shape(void **state)
{
	struct rt_grid g;
	size_t i;
	int r;

	(void)state;
	for (i = 0; i < NSHAPES; i++) {
		int data = shapes[i].data, pipe = shapes[i].pipeline;

		for (r = 0; r < data * pipe; r++) {
			init_ok(&g, data, pipe, r);
			assert_int_equal(g.world, data * pipe);
			assert_int_equal(g.rank, r);
			assert_int_equal(g.size[RT_DIM_TENSOR], 1);
			assert_int_equal(g.size[RT_DIM_DATA], data);
			assert_int_equal(g.size[RT_DIM_PIPE], pipe);
			assert_int_equal(g.coord[RT_DIM_TENSOR], 0);
			assert_int_equal(g.coord[RT_DIM_DATA], r % data);
			assert_int_equal(g.coord[RT_DIM_PIPE], r / data);
			assert_int_equal(g.coord[RT_DIM_PIPE] * data + g.coord[RT_DIM_DATA], r);
			assert_true(g.data_comm == MPI_COMM_NULL);
			assert_true(g.pipe_comm == MPI_COMM_NULL);
			rt_grid_free(&g); /* no communicators: must not call MPI */
		}
	}
}

/* the table in grid.h's top comment */
static void test_documented_2x2(void **state)
{
	static const int want[4][2] = { { 0, 0 }, { 1, 0 }, { 0, 1 }, { 1, 1 } };
	struct rt_grid g;
	int r;

	(void)state;
	for (r = 0; r < 4; r++) {
		init_ok(&g, 2, 2, r);
		assert_int_equal(g.coord[RT_DIM_DATA], want[r][0]);
		assert_int_equal(g.coord[RT_DIM_PIPE], want[r][1]);
	}
}

/* any rank's coordinates from any rank's grid, both ways */
static void test_round_trip(void **state)
{
	int c[RT_NDIMS], seen[64];
	struct rt_grid g;
	size_t i;
	int r, rep, st;

	(void)state;
	for (i = 0; i < NSHAPES; i++) {
		int data = shapes[i].data, pipe = shapes[i].pipeline;

		assert_true(data * pipe <= 64);
		init_ok(&g, data, pipe, data * pipe - 1); /* seen from the last rank */
		for (r = 0; r < data * pipe; r++) {
			assert_int_equal(rt_grid_coords(&g, r, c), 0);
			assert_int_equal(rt_grid_rank_at(&g, c), r);
			assert_int_equal(rt_grid_replica(&g, r), c[RT_DIM_DATA]);
			assert_int_equal(rt_grid_stage(&g, r), c[RT_DIM_PIPE]);
			assert_int_equal(rt_grid_rank_of(&g, rt_grid_replica(&g, r),
							 rt_grid_stage(&g, r)), r);
		}
		/* (replica, stage) -> rank is a bijection onto [0, world) */
		memset(seen, 0, sizeof(seen));
		for (st = 0; st < pipe; st++) {
			for (rep = 0; rep < data; rep++) {
				r = rt_grid_rank_of(&g, rep, st);
				assert_in_range(r, 0, data * pipe - 1);
				assert_int_equal(seen[r], 0);
				seen[r] = 1;
				assert_int_equal(rt_grid_replica(&g, r), rep);
				assert_int_equal(rt_grid_stage(&g, r), st);
			}
		}
	}
}

/* each stage's shard writer is a rank of that stage, replica stage % data */
static void test_stage_writers(void **state)
{
	struct rt_grid g;
	size_t i;
	int st, w;

	(void)state;
	for (i = 0; i < NSHAPES; i++) {
		int data = shapes[i].data, pipe = shapes[i].pipeline;

		init_ok(&g, data, pipe, 0);
		for (st = 0; st < pipe; st++) {
			w = rt_grid_stage_writer(&g, st);
			assert_int_equal(rt_grid_stage(&g, w), st);
			assert_int_equal(rt_grid_replica(&g, w), st % data);
		}
		assert_int_equal(rt_grid_stage_writer(&g, pipe), -1);
	}
}

/* The reason for the order: with tasks packed by node and tasks per node a
 * multiple of data, every data-parallel group lies inside one node. */
static void test_data_groups_stay_in_node(void **state)
{
	struct rt_grid g;
	size_t i;
	int st, rep, k;

	(void)state;
	for (i = 0; i < NSHAPES; i++) {
		int data = shapes[i].data, pipe = shapes[i].pipeline;

		init_ok(&g, data, pipe, 0);
		for (k = 1; k <= pipe; k++) {
			int per_node = k * data;

			if (pipe % k)
				continue;
			for (st = 0; st < pipe; st++) {
				int node = rt_grid_rank_of(&g, 0, st) / per_node;

				for (rep = 1; rep < data; rep++)
					assert_int_equal(rt_grid_rank_of(&g, rep, st) / per_node, node);
			}
		}
	}
}

/* --- queries out of range --- */

static void test_out_of_range(void **state)
{
	int c[RT_NDIMS] = { 0 };
	struct rt_grid g;

	(void)state;
	init_ok(&g, 3, 2, 4);
	assert_int_equal(rt_grid_rank_of(&g, -1, 0), -1);
	assert_int_equal(rt_grid_rank_of(&g, 3, 0), -1);
	assert_int_equal(rt_grid_rank_of(&g, 0, -1), -1);
	assert_int_equal(rt_grid_rank_of(&g, 0, 2), -1);
	assert_int_equal(rt_grid_rank_of(&g, 2, 1), 5);
	assert_int_equal(rt_grid_coords(&g, 6, c), -1);
	assert_int_equal(c[RT_DIM_DATA], -1);
	assert_int_equal(c[RT_DIM_PIPE], -1);
	assert_int_equal(rt_grid_coords(&g, -1, c), -1);
	assert_int_equal(rt_grid_replica(&g, 6), -1);
	assert_int_equal(rt_grid_stage(&g, -1), -1);
	c[RT_DIM_TENSOR] = 1; /* tensor is 1 wide: shard 1 does not exist */
	c[RT_DIM_DATA] = 0;
	c[RT_DIM_PIPE] = 0;
	assert_int_equal(rt_grid_rank_at(&g, c), -1);
}

/* --- errors --- */

static void test_world_mismatch(void **state)
{
	struct dt_err err = { 0 };
	struct rt_grid g;

	(void)state;
	assert_int_equal(rt_grid_init(&g, 3, 2, 2, 0, &err), -EINVAL);
	assert_int_equal(err.count, 1);
	assert_non_null(strstr(err.msg,
		"world size 3 does not match parallel.data x parallel.pipeline = 2 x 2 = 4"));
	assert_non_null(strstr(err.msg, "start 4 tasks"));
	assert_true(g.data_comm == MPI_COMM_NULL);
	rt_grid_free(&g);

	dt_err_clear(&err);
	assert_int_equal(rt_grid_init(&g, 8, 2, 2, 0, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "world size 8 does not match"));

	/* a single process with a spec for many */
	dt_err_clear(&err);
	assert_int_equal(rt_grid_init(&g, 1, 4, 2, 0, &err), -EINVAL);
	assert_non_null(strstr(err.msg,
		"world size 1 does not match parallel.data x parallel.pipeline = 4 x 2 = 8"));

	/* no int overflow in the product */
	dt_err_clear(&err);
	assert_int_equal(rt_grid_init(&g, 4, 65536, 65536, 0, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "= 65536 x 65536 = 4294967296"));
}

static void test_bad_arguments(void **state)
{
	struct dt_err err = { 0 };
	struct rt_grid g;

	(void)state;
	assert_int_equal(rt_grid_init(&g, 4, 0, 4, 0, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "must be >= 1 (got 0 x 4)"));
	assert_int_equal(rt_grid_init(&g, 4, 4, -1, 0, &err), -EINVAL);
	assert_int_equal(rt_grid_init(&g, 0, 1, 1, 0, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "world size must be >= 1 (got 0)"));
	assert_int_equal(rt_grid_init(&g, 4, 2, 2, 4, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "rank 4 is outside the world of 4 ranks"));
	assert_int_equal(rt_grid_init(&g, 4, 2, 2, -1, &err), -EINVAL);
	assert_int_equal(err.count, 5); /* each failure added one line */
}

/* --- main --- */

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_rank_every_shape),
		cmocka_unit_test(test_documented_2x2),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_stage_writers),
		cmocka_unit_test(test_data_groups_stay_in_node),
		cmocka_unit_test(test_out_of_range),
		cmocka_unit_test(test_world_mismatch),
		cmocka_unit_test(test_bad_arguments),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
