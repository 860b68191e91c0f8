/*
 * comms.c - the NCCL communicators of the grid (gpu.h): each group's root
 * makes an ncclUniqueId, rt_pmix_share hands them all out in one PMIx fence
 * (MPI_Bcast without PMIx), every rank joins its groups with
 * ncclCommInitRank.
 *
 * Sections: the groups, creation, teardown.
 */
#include "runtime/gpu/gpu.h"
#include "runtime/world/agree.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <nccl.h>

_Static_assert(sizeof(ncclUniqueId) == NCCL_UNIQUE_ID_BYTES, "an ncclUniqueId is its bytes");

enum { G_WORLD, G_DATA, G_PIPE, NGROUPS };

static const char *const group_name[NGROUPS] = { "world", "data", "pipe" };

/* --- the groups --- */

struct group {
	int id;           /* which group of its kind: the stage of a data group,
			   * the replica of a pipeline group, 0 for the world */
	int root;         /* world rank of the root, who makes the id */
	int size, rank;   /* the group's size and our rank in it */
	MPI_Comm comm;    /* the same group in MPI (for the MPI fallback) */
	char key[64];     /* PMIx key, unique in the job */
	ncclUniqueId uid;
};

static void groups_of(const struct rt_grid *g, struct group gr[NGROUPS])
{
	int stage = g->coord[RT_DIM_PIPE], replica = g->coord[RT_DIM_DATA];

	gr[G_WORLD] = (struct group){ .id = 0, .root = 0, .size = g->world, .rank = g->rank,
				      .comm = MPI_COMM_WORLD };
	gr[G_DATA] = (struct group){ .id = stage, .root = rt_grid_rank_of(g, 0, stage),
				     .size = g->size[RT_DIM_DATA], .rank = replica,
				     .comm = g->data_comm };
	gr[G_PIPE] = (struct group){ .id = replica, .root = rt_grid_rank_of(g, replica, 0),
				     .size = g->size[RT_DIM_PIPE], .rank = stage,
				     .comm = g->pipe_comm };
	for (int i = 0; i < NGROUPS; i++)
		snprintf(gr[i].key, sizeof(gr[i].key), "dtrain.nccl.%s.%d", group_name[i], gr[i].id);
}

/* --- creation --- */

/* The ids: made on each root, shared, and agreed by every rank. */
static int share_ids(const struct rt_proc *p, struct group gr[NGROUPS], struct dt_err *err)
{
	struct rt_share sh[NGROUPS];
	struct dt_err mine = { 0 }; /* this rank's failure, until agreed on */
	ncclResult_t nr;
	int i, rc = 0;

	for (i = 0; i < NGROUPS; i++) {
		memset(&gr[i].uid, 0, sizeof(gr[i].uid));
		if (gr[i].root == p->rank && !rc) {
			nr = ncclGetUniqueId(&gr[i].uid);
			if (nr != ncclSuccess)
				rc = dt_err_add(&mine, "rank %d: ncclGetUniqueId (root of the %s group %d): %s",
						p->rank, group_name[i], gr[i].id, ncclGetErrorString(nr));
		}
		sh[i] = (struct rt_share){ .key = gr[i].key, .comm = gr[i].comm, .root = gr[i].root,
					   .buf = &gr[i].uid, .len = sizeof(gr[i].uid) };
	}
	/* shared even after a failed id: the peers wait in the fence */
	if (rt_pmix_share(p, sh, NGROUPS, &mine))
		rc = -EIO;
	rc = rt_agree(rc, &mine, NULL);
	if (mine.count) /* the first failing rank's report, or MPI's */
		dt_err_add(err, "%s", mine.msg);
	if (rc == RT_AGREE_BROKEN)
		return -ECOMM; /* MPI itself failed: the caller aborts */
	return rc ? -EIO : 0;
}

static int init_rank(const struct rt_proc *p, const struct group *gr, const char *name,
		     struct ncclComm **out, struct dt_err *err)
{
	ncclComm_t comm = NULL;
	ncclResult_t nr;

	nr = ncclCommInitRank(&comm, gr->size, gr->uid, gr->rank);
	if (nr != ncclSuccess) {
		dt_err_add(err, "rank %d: ncclCommInitRank (%s group %d, rank %d of %d): %s",
			   p->rank, name, gr->id, gr->rank, gr->size, ncclGetErrorString(nr));
		return -ECOMM;
	}
	*out = comm;
	return 0;
}

int rt_gpu_comms(const struct rt_proc *p, const struct rt_grid *g, struct rt_gpu_comms *c,
		 struct dt_err *err)
{
	struct group gr[NGROUPS];
	int rc;

	*c = (struct rt_gpu_comms){ 0 };
	groups_of(g, gr);
	rc = share_ids(p, gr, err);
	/* Blocking inits, in the same order on every rank: the world's first
	 * (all ranks), then the data groups (disjoint), then the pipelines. */
	if (!rc)
		rc = init_rank(p, &gr[G_WORLD], group_name[G_WORLD], &c->world, err);
	if (!rc)
		rc = init_rank(p, &gr[G_DATA], group_name[G_DATA], &c->data, err);
	if (!rc)
		rc = init_rank(p, &gr[G_PIPE], group_name[G_PIPE], &c->pipe, err);
	if (rc)
		rt_gpu_comms_free(c);
	return rc;
}

/* --- teardown --- */

void rt_gpu_comms_free(struct rt_gpu_comms *c)
{
	struct ncclComm **all[] = { &c->pipe, &c->data, &c->world };

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		if (*all[i])
			ncclCommDestroy(*all[i]);
		*all[i] = NULL;
	}
}
