/*
 * dp.c - the replicas of a stage on one node share parameters, optimizer
 * state and gradients in an MPI shared-memory window (runtime/parallel/dp.h).
 *
 * Memory model: the window is locked once (MPI_Win_lock_all, no check) and
 * every hand-over between replicas is MPI_Win_sync, MPI_Barrier,
 * MPI_Win_sync (the MPI-3 "separate processes, shared window" idiom), so
 * that what one replica wrote before the barrier is what the others read
 * after it.
 *
 * Sections: choosing the way, life cycle, the step, checkpoints.
 */
#include "runtime/parallel/dp.h"

#include "runtime/model/device.h"
#include "runtime/world/pool.h"
#include "runtime/world/agree.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Slots and parts start on 64-byte cache lines: two replicas never write
 * the same line. */
#define LINE_FLOATS 16
/* Elements summed per item of the pool (as the optimizer's RT_CHUNK). */
#define SUM_CHUNK 65536

#define CHECK(call)                                                 \
	do {                                                        \
		int mpi_rc_ = (call);                               \
		if (mpi_rc_ != MPI_SUCCESS) {                       \
			rc = rt_mpi_error(err, #call, mpi_rc_);          \
			goto out;                                   \
		}                                                   \
	} while (0)

/* --- choosing the way --- */

/* L, the replicas of the stage on this node, and whether every node of
 * the stage has the same L (min == max over data_comm). */
static int node_layout(struct rt_dp *dp, const struct rt_grid *g, int *uniform,
		       struct dt_err *err)
{
	int mine[2], all[2], rc = 0;

	CHECK(MPI_Comm_split_type(g->data_comm, MPI_COMM_TYPE_SHARED, g->coord[RT_DIM_DATA],
				  MPI_INFO_NULL, &dp->node));
	CHECK(MPI_Comm_rank(dp->node, &dp->local));
	CHECK(MPI_Comm_size(dp->node, &dp->locals));
	mine[0] = dp->locals;
	mine[1] = -dp->locals;
	CHECK(MPI_Allreduce(mine, all, 2, MPI_INT, MPI_MIN, g->data_comm));
	*uniform = all[0] == -all[1];
out:
	return rc;
}

/* --- life cycle --- */

static size_t round_up(size_t n)
{
	return (n + LINE_FLOATS - 1) / LINE_FLOATS * LINE_FLOATS;
}

/* Part k of L of n floats, on cache-line boundaries, as even as that
 * allows. */
static void part_of(size_t n, int k, int L, size_t *first, size_t *count)
{
	size_t lines = (n + LINE_FLOATS - 1) / LINE_FLOATS;
	size_t a = lines * (size_t)k / (size_t)L * LINE_FLOATS;
	size_t b = lines * (size_t)(k + 1) / (size_t)L * LINE_FLOATS;

	*first = a < n ? a : n;
	*count = (b < n ? b : n) - *first;
}

/* Hand-over point between the node's replicas (see the top). */
static int sync_node(struct rt_dp *dp, struct dt_err *err)
{
	int rc = 0;

	CHECK(MPI_Win_sync(dp->win));
	CHECK(MPI_Barrier(dp->node));
	CHECK(MPI_Win_sync(dp->win));
out:
	return rc;
}

/* The split way's own state: which rows each of the node's replicas
 * brings (their data coordinates), this replica's blocks, and where the
 * node's activations and dy lie (mem: acts_floats, then dy). */
static int split_init(struct rt_dp *dp, const struct rt_grid *g, const struct rt_stage *st,
		      float *mem, size_t acts_floats, struct dt_err *err)
{
	int coord = g->coord[RT_DIM_DATA], rc = 0;

	dp->coords = malloc((size_t)dp->locals * sizeof(*dp->coords));
	dp->spans = malloc((size_t)st->n_tensors * sizeof(*dp->spans));
	if (!dp->coords || !dp->spans) {
		dt_err_add(err, "stage %d: out of memory", st->stage);
		return -ENOMEM;
	}
	CHECK(MPI_Allgather(&coord, 1, MPI_INT, dp->coords, 1, MPI_INT, dp->node));
	dp->n_spans = rt_stage_part_spans(st, dp->local, dp->locals, dp->spans);
	dp->acts_mem = mem;
	dp->dy = mem + acts_floats;
out:
	return rc;
}

/* The split way's regions after the gradient: the activations of the
 * node's rows, then dy; in floats, each rounded up to cache lines. */
static size_t split_floats(const struct rt_stage *st, int node_rows, size_t *acts)
{
	*acts = round_up(rt_acts_floats(st, node_rows));
	return *acts + round_up((size_t)node_rows * (size_t)st->out);
}

/* Whether the stage's replicas may share a node's window: 1 (*split: the
 * split way), 0 when they allreduce, or -EINVAL for a way the model cannot
 * take. Every rank decides alike from the spec and the grid. */
static int choose_way(const struct spec *s, const struct rt_grid *g, const struct rt_stage *st,
		      bool *split, struct dt_err *err)
{
	const char *way = s->parallel.grad_sync ? s->parallel.grad_sync : "auto";
	struct rt_tie ties[RT_MAX_TIES];

	if (g->size[RT_DIM_DATA] == 1 || strcmp(way, "allreduce") == 0)
		return 0;
	/* the node's window is host memory: a device's stage sums its buckets */
	if (!st->dev->host) {
		if (!strcmp(way, "auto"))
			return 0;
		return dt_err_add(err, "parallel.grad_sync: \"%s\" shares the node's host memory: not available on the %s device; use \"allreduce\" or \"auto\"",
				  way, st->dev->kind);
	}
	/* a sharded optimizer reduce-scatters over data_comm (runtime/parallel/shard.h):
	 * "auto" is that (the spec refuses "shared" and "split" with it) */
	if (spec_optimizer_sharded(s))
		return 0;
	/* tied tensors (runtime/train/tied.c) take the replicas' whole sums */
	if (rt_model_ties(s, ties) > 0) {
		if (!strcmp(way, "auto"))
			return 0;
		return dt_err_add(err, "parallel.grad_sync: \"%s\" is not available for model.type \"%s\" (its tied tensors need every gradient summed); use \"allreduce\" or \"auto\"",
				  way, st->ops->type);
	}
	/* "auto": split the blocks where a stage is the whole model (the
	 * pipeline's messages carry each replica's own rows) and the model
	 * can, else slots */
	if (!strcmp(way, "split") && !rt_stage_can_part(st))
		return dt_err_add(err, "parallel.grad_sync: \"split\" is not available for model.type \"%s\"; use \"allreduce\" or \"shared\"",
				  st->ops->type);
	*split = !strcmp(way, "split") || (!strcmp(way, "auto") && st->n_stages == 1 &&
					    rt_stage_can_part(st));
	return 1;
}

/* Back to allreduce: no node window (the communicators made for one freed). */
static void no_window(struct rt_dp *dp)
{
	if (dp->win != MPI_WIN_NULL)
		MPI_Win_free(&dp->win);
	if (dp->cross != MPI_COMM_NULL)
		MPI_Comm_free(&dp->cross);
	if (dp->node != MPI_COMM_NULL)
		MPI_Comm_free(&dp->node);
	dp->win = MPI_WIN_NULL;
	dp->node = dp->cross = MPI_COMM_NULL;
}

/* The node's window of `floats` floats, allocated by the node's replica 0,
 * at *base on every replica. 1 when some replica of the stage could not
 * have it (e.g. a container's small /dev/shm: the node's first replica
 * that failed says why, and the stage trains all the same, by allreduce),
 * 0, or -EIO. */
static int alloc_window(struct rt_dp *dp, const struct rt_grid *g, int stage, size_t floats,
			float **base, struct dt_err *err)
{
	MPI_Aint bytes = dp->local == 0 ? (MPI_Aint)(floats * sizeof(float)) : 0, got = 0;
	int mrc, ok, rc = 0, disp = 0, first_failed;

	mrc = MPI_Win_allocate_shared(bytes, sizeof(float), MPI_INFO_NULL, dp->node, base, &dp->win);
	ok = mrc == MPI_SUCCESS;
	if (!ok)
		dp->win = MPI_WIN_NULL;
	CHECK(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, g->data_comm));
	if (ok) {
		CHECK(MPI_Win_shared_query(dp->win, 0, &got, &disp, base));
		CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, dp->win));
		return 0;
	}
	first_failed = mrc != MPI_SUCCESS ? dp->local : INT_MAX;
	CHECK(MPI_Allreduce(MPI_IN_PLACE, &first_failed, 1, MPI_INT, MPI_MIN, dp->node));
	if (first_failed == dp->local) {
		char msg[MPI_MAX_ERROR_STRING];
		int len = 0;

		MPI_Error_string(mrc, msg, &len);
		fprintf(stderr, "dtrain-run: warning: stage %d: no shared-memory window of %.0f MiB "
			"for the replicas on this node (%s); gradients go by allreduce "
			"(hint: more room in /dev/shm, or parallel.grad_sync=allreduce)\n",
			stage, (double)(floats * sizeof(float)) / 1048576.0, msg);
	}
	no_window(dp);
	return 1;
out:
	return rc;
}

/* The window's regions (params, the states, then the split way's one
 * gradient or a slot per replica) of stride floats each, plus extra
 * floats for the split way's activations and dy: *regions, *extra and
 * *acts_floats, or -ENOMEM when they do not fit one window. */
static int window_size(struct rt_dp *dp, const struct rt_stage *st, int n_states, bool split,
		       int max_rows, size_t *regions, size_t *extra, size_t *acts_floats,
		       struct dt_err *err)
{
	dp->stride = round_up(dp->n);
	*regions = (size_t)(1 + n_states + (split ? 1 : dp->locals));
	*extra = *acts_floats = 0;
	if (split) {
		long rows = (long)max_rows * dp->locals;

		dp->node_rows = rows > INT_MAX ? 0 : (int)rows;
		*extra = split_floats(st, dp->node_rows, acts_floats);
	}
	if (dp->stride > (size_t)(PTRDIFF_MAX / (ptrdiff_t)sizeof(float)) / (*regions + 1) ||
	    *extra > (size_t)(PTRDIFF_MAX / (ptrdiff_t)sizeof(float)) / 2 ||
	    (split && *acts_floats == 0)) {
		dt_err_add(err, "stage %d: %zu parameters and %d rows a micro-batch on the node are too "
			   "many for one shared window", st->stage, dp->n, dp->node_rows);
		return -ENOMEM;
	}
	return 0;
}

/* The stage's parameters and optimizer state move into the window (copied
 * by the node's replica 0, the gradient regions zeroed), and this
 * replica's gradient is its slot, or the split way's one gradient. */
static int adopt_window(struct rt_dp *dp, const struct rt_grid *g, struct rt_stage *st,
			struct rt_optim *o, int n_states, bool split, float *base, size_t regions,
			size_t acts_floats, struct dt_err *err)
{
	size_t stride = dp->stride;
	int k, rc;

	if (dp->local == 0) {
		memcpy(base, st->params, dp->n * sizeof(float));
		for (k = 0; k < n_states; k++)
			memcpy(base + (size_t)(1 + k) * stride, k ? o->v : o->m, dp->n * sizeof(float));
		memset(base + (size_t)(1 + n_states) * stride, 0,
		       (regions - 1 - (size_t)n_states) * stride * sizeof(float));
	}
	rc = sync_node(dp, err);
	if (rc)
		return rc;
	if (split) {
		dp->split = true;
		rc = split_init(dp, g, st, base + regions * stride, acts_floats, err);
		if (rc)
			return rc;
		dp->grads = base + (size_t)(1 + n_states) * stride;
		rt_stage_adopt(st, base, dp->grads);
	} else {
		dp->slots = base + (size_t)(1 + n_states) * stride;
		dp->slot = malloc((size_t)dp->locals * sizeof(*dp->slot));
		if (!dp->slot)
			return dt_err_add(err, "stage %d: out of memory", st->stage), -ENOMEM;
		for (k = 0; k < dp->locals; k++)
			dp->slot[k] = dp->slots + (size_t)k * stride;
		rt_stage_adopt(st, base, dp->slots + (size_t)dp->local * stride);
		part_of(dp->n, dp->local, dp->locals, &dp->first, &dp->count);
	}
	rt_optim_adopt(o, base + stride, n_states > 1 ? base + 2 * stride : NULL);
	dp->shared = true;
	return 0;
}

int rt_dp_init(struct rt_dp *dp, const struct spec *s, const struct rt_grid *g,
	       struct rt_stage *st, struct rt_optim *o, int max_rows, struct dt_err *err)
{
	int n_states = o->type == RT_OPTIM_ADAMW ? 2 : 1, uniform = 0, rc;
	size_t regions, extra, acts_floats;
	bool split = false;
	float *base = NULL;

	memset(dp, 0, sizeof(*dp));
	dp->data = g->data_comm;
	dp->node = dp->cross = MPI_COMM_NULL;
	dp->win = MPI_WIN_NULL;
	dp->n = st->n_params;
	dp->pool = o->pool;
	dp->err = err;
	rc = choose_way(s, g, st, &split, err);
	if (rc <= 0)
		return rc;
	rc = node_layout(dp, g, &uniform, err);
	if (rc)
		goto out;
	if (dp->locals == 1 || !uniform) {
		/* each replica alone on its node, or nodes with different
		 * counts: the parts would not line up between nodes */
		no_window(dp);
		return 0;
	}
	if (g->size[RT_DIM_DATA] > dp->locals)
		CHECK(MPI_Comm_split(g->data_comm, dp->local, g->coord[RT_DIM_DATA], &dp->cross));
	rc = window_size(dp, st, n_states, split, max_rows, &regions, &extra, &acts_floats, err);
	if (!rc)
		rc = alloc_window(dp, g, st->stage, dp->stride * regions + extra, &base, err);
	if (rc)
		return rc == 1 ? 0 : rc;
	/* clipping needs the norm of the sum before the update, and other
	 * nodes need the summed part: then the sum is written first */
	dp->fuse = !split && dp->cross == MPI_COMM_NULL && !(s->train.grad_clip > 0);
	rc = adopt_window(dp, g, st, o, n_states, split, base, regions, acts_floats, err);
out:
	return rc;
}

void rt_dp_free(struct rt_dp *dp, struct rt_stage *st, struct rt_optim *o)
{
	if (dp->shared) {
		rt_stage_adopt(st, NULL, NULL);
		rt_optim_adopt(o, NULL, NULL);
	}
	if (dp->win != MPI_WIN_NULL) {
		MPI_Win_unlock_all(dp->win);
		MPI_Win_free(&dp->win);
	}
	if (dp->cross != MPI_COMM_NULL)
		MPI_Comm_free(&dp->cross);
	if (dp->node != MPI_COMM_NULL)
		MPI_Comm_free(&dp->node);
	free(dp->slot);
	free(dp->coords);
	free(dp->spans);
	memset(dp, 0, sizeof(*dp));
	dp->node = dp->cross = MPI_COMM_NULL;
	dp->win = MPI_WIN_NULL;
}

void rt_dp_abandon(struct rt_dp *dp, struct rt_stage *st, struct rt_optim *o)
{
	if (dp->shared) {
		rt_stage_adopt(st, NULL, NULL);
		rt_optim_adopt(o, NULL, NULL);
	}
	free(dp->slot);
	free(dp->coords);
	free(dp->spans);
	dp->slot = NULL;
	dp->coords = NULL;
	dp->spans = NULL;
	dp->shared = dp->split = false;
}

/* --- the step --- */

/* mine[i] = ((slot 0 + slot 1) + slot 2) + ... (slot order, whoever
 * "mine" is), over one chunk; through a block in L1 so that each addition
 * runs over a whole row of floats. The others' blocks are zeroed once read
 * (mine is zeroed by the update, rt_optim_step_take): each replica's next
 * backward adds to its slot. */
static void sum_chunk(float *slots, size_t stride, int L, int me, size_t at, size_t len)
{
	float acc[1024];
	size_t done, i, m;
	int k;

	for (done = 0; done < len; done += m) {
		m = len - done < 1024 ? len - done : 1024;
		memcpy(acc, slots + at + done, m * sizeof(float));
		if (me != 0)
			memset(slots + at + done, 0, m * sizeof(float));
		for (k = 1; k < L; k++) {
			float *other = slots + (size_t)k * stride + at + done;

			for (i = 0; i < m; i++)
				acc[i] += other[i];
			if (k != me)
				memset(other, 0, m * sizeof(float));
		}
		memcpy(slots + (size_t)me * stride + at + done, acc, m * sizeof(float));
	}
}

/* Item c of the sum of this replica's part (rt_pool_for). */
static void sum_item(void *ctx, long c)
{
	const struct rt_dp *dp = ctx;
	size_t at = dp->first + (size_t)c * SUM_CHUNK, end = dp->first + dp->count;

	sum_chunk(dp->slots, dp->stride, dp->locals, dp->local, at,
		  end - at < SUM_CHUNK ? end - at : SUM_CHUNK);
}

/* p [n] summed in place with the same range on the other nodes (cross),
 * in pieces: MPI counts are int. */
static int allreduce_cross(struct rt_dp *dp, float *p, size_t n, struct dt_err *err)
{
	size_t off;
	int rc = 0;

	for (off = 0; off < n;) {
		size_t left = n - off;
		int chunk = left > (size_t)INT_MAX / 2 ? INT_MAX / 2 : (int)left;

		CHECK(MPI_Allreduce(MPI_IN_PLACE, p + off, chunk, MPI_FLOAT, MPI_SUM, dp->cross));
		off += (size_t)chunk;
	}
out:
	return rc;
}

int rt_dp_reduce(struct rt_dp *dp, struct dt_err *err)
{
	int rc = 0, i;

	/* split: each replica's blocks are its own, and the others read them
	 * again only after the step's next syncs (runtime/parallel/dp.h) */
	if (!dp->split)
		rc = sync_node(dp, err);
	if (rc || dp->fuse)
		return rc;
	if (!dp->split)
		rt_pool_for(dp->pool, (long)((dp->count + SUM_CHUNK - 1) / SUM_CHUNK), sum_item, dp);
	if (dp->cross == MPI_COMM_NULL)
		return 0;
	/* the same part (split: the same blocks) on the other nodes */
	if (!dp->split)
		return allreduce_cross(dp, dp->slots + (size_t)dp->local * dp->stride + dp->first,
				       dp->count, err);
	for (i = 0; i < dp->n_spans && !rc; i++)
		rc = allreduce_cross(dp, dp->grads + dp->spans[i].first, dp->spans[i].count, err);
	return rc;
}

int rt_dp_publish(struct rt_dp *dp, struct dt_err *err)
{
	return sync_node(dp, err);
}

int rt_dp_sync(void *ctx)
{
	struct rt_dp *dp = ctx;

	return sync_node(dp, dp->err);
}

int rt_dp_sum_parts(struct rt_dp *dp, double *part, struct dt_err *err)
{
	int rc = 0;

	CHECK(MPI_Allreduce(MPI_IN_PLACE, part, 1, MPI_DOUBLE, MPI_SUM, dp->node));
out:
	return rc;
}

int rt_dp_step_sums(struct rt_dp *dp, double *stats, int n_stats, double *part,
		    struct dt_err *err)
{
	double v[RT_DP_MAX_STATS + 1];
	int rc = 0, cross_rank = 0, i;

	if (n_stats < 0 || n_stats > RT_DP_MAX_STATS)
		return dt_err_add(err, "rt_dp_step_sums: %d sums, at most %d", n_stats,
				  RT_DP_MAX_STATS), -EINVAL;
	if (dp->cross != MPI_COMM_NULL)
		CHECK(MPI_Comm_rank(dp->cross, &cross_rank));
	for (i = 0; i < n_stats; i++)
		v[i] = stats[i];
	/* every node holds the same blocks: one node's parts make the sum */
	v[n_stats] = cross_rank == 0 ? *part : 0.0;
	/* the hand-over of sync_node, with the allreduce as its barrier */
	CHECK(MPI_Win_sync(dp->win));
	CHECK(MPI_Allreduce(MPI_IN_PLACE, v, n_stats + 1, MPI_DOUBLE, MPI_SUM, dp->data));
	CHECK(MPI_Win_sync(dp->win));
	for (i = 0; i < n_stats; i++)
		stats[i] = v[i];
	*part = v[n_stats];
out:
	return rc;
}

/* --- checkpoints --- */

static int bcast_floats(float *p, size_t n, int root, MPI_Comm comm)
{
	while (n > 0) {
		int chunk = n > (1u << 30) ? (1 << 30) : (int)n;
		int rc = MPI_Bcast(p, chunk, MPI_FLOAT, root, comm);

		if (rc != MPI_SUCCESS)
			return rc;
		p += chunk;
		n -= (size_t)chunk;
	}
	return MPI_SUCCESS;
}

int rt_dp_bcast(const struct rt_dp *dp, float *p, size_t n)
{
	int rc = MPI_SUCCESS;

	if (!dp->shared) {
		int size = 1;

		MPI_Comm_size(dp->data, &size);
		return size > 1 ? bcast_floats(p, n, 0, dp->data) : MPI_SUCCESS;
	}
	/* replica 0 is the node replica 0 of the first node, rank 0 of cross */
	if (dp->local == 0 && dp->cross != MPI_COMM_NULL)
		rc = bcast_floats(p, n, 0, dp->cross);
	if (rc == MPI_SUCCESS)
		rc = MPI_Win_sync(dp->win);
	if (rc == MPI_SUCCESS)
		rc = MPI_Barrier(dp->node);
	if (rc == MPI_SUCCESS)
		rc = MPI_Win_sync(dp->win);
	return rc;
}
