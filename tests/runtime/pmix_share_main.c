/*
 * pmix_share_main.c - drives rt_pmix_share() (runtime/world/bootstrap.h) on real
 * ranks; run by tests/integration/pmix_share.sh under `mpirun -np 4` (PMIx)
 * and as a singleton (the MPI fallback).
 *
 * usage: pmix_share_main DATA PIPELINE [--mpi]
 *
 * Lays the world out as DATA x PIPELINE (runtime/world/grid.h), then shares one
 * 128-byte blob (the size of an ncclUniqueId) per group, as rt_gpu_comms()
 * does for NCCL: the world's from rank 0, each data-parallel group's from its
 * replica 0, each pipeline group's from its stage 0. Every blob's bytes
 * depend on the group and its root, and every member checks that it got
 * exactly its own root's. --mpi forces the MPI_Bcast fallback under PMIx.
 *
 * Prints one line per rank ("rank R via pmix: world root 0, data group S root
 * X, pipe group P root Y: ok"), and exits 0 when every rank got its blobs, 1
 * otherwise (every rank agrees; the first failing rank reports). Each rank
 * also prints on stderr when rt_mpi_init returned ("rank R: rt_mpi_init
 * returned at SECONDS", the wall clock), for the test that no rank leaves it
 * before the others are out of MPI_Init.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#include "runtime/world/agree.h"
#include "runtime/world/bootstrap.h"
#include "runtime/world/grid.h"
#include "base/err.h"

#define BLOB 128

/* One stderr line: when rt_mpi_init returned on this rank. Returns 0. */
static int report_init(const struct rt_proc *p)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	fprintf(stderr, "rank %d: rt_mpi_init returned at %.6f\n", p->rank,
		(double)ts.tv_sec + (double)ts.tv_nsec * 1e-9);
	return 0;
}

/* --- the test --- */

enum { G_WORLD, G_DATA, G_PIPE, NGROUPS };

static const char *const group_name[NGROUPS] = { "world", "data", "pipe" };

/* The blob of group `id` of kind g, rooted at `root`: no two groups alike. */
static void fill(unsigned char *b, int g, int id, int root)
{
	for (int i = 0; i < BLOB; i++)
		b[i] = (unsigned char)(i * 7 + g * 61 + id * 13 + root * 29 + (i >> 3) * g);
}

int main(int argc, char **argv)
{
	struct dt_err err = { 0 };
	struct rt_proc proc = { 0 }, use;
	struct rt_grid grid = { 0 };
	struct rt_share sh[NGROUPS];
	unsigned char got[NGROUPS][BLOB], want[NGROUPS][BLOB];
	char key[NGROUPS][64];
	int id[NGROUPS], g, rc, bad = -1, status = 1;
	bool mpi_up = false;

	grid.data_comm = grid.pipe_comm = MPI_COMM_NULL;
	if (argc < 3 || argc > 4 || (argc == 4 && strcmp(argv[3], "--mpi"))) {
		fputs("usage: pmix_share_main DATA PIPELINE [--mpi]\n", stderr);
		return 2;
	}
	if (rt_bootstrap(&proc, &err) || rt_mpi_init(&proc, &mpi_up, &err) ||
	    report_init(&proc) ||
	    rt_grid_init(&grid, proc.size, atoi(argv[1]), atoi(argv[2]), proc.rank, &err) ||
	    rt_grid_comms(&grid, MPI_COMM_WORLD, &err)) {
		fprintf(stderr, "pmix_share_main: %s\n", err.msg);
		goto out;
	}
	use = proc;
	if (argc == 4)
		use.pmix_up = false;

	id[G_WORLD] = 0;
	id[G_DATA] = grid.coord[RT_DIM_PIPE];  /* a data group is one stage's replicas */
	id[G_PIPE] = grid.coord[RT_DIM_DATA];  /* a pipeline group is one replica's stages */
	sh[G_WORLD] = (struct rt_share){ .comm = MPI_COMM_WORLD, .root = 0 };
	sh[G_DATA] = (struct rt_share){ .comm = grid.data_comm,
					.root = rt_grid_rank_of(&grid, 0, id[G_DATA]) };
	sh[G_PIPE] = (struct rt_share){ .comm = grid.pipe_comm,
					.root = rt_grid_rank_of(&grid, id[G_PIPE], 0) };
	for (g = 0; g < NGROUPS; g++) {
		snprintf(key[g], sizeof(key[g]), "dtrain.test.%s.%d", group_name[g], id[g]);
		fill(want[g], g, id[g], sh[g].root);
		if (sh[g].root == proc.rank)
			memcpy(got[g], want[g], BLOB);
		else
			memset(got[g], 0xee, BLOB);
		sh[g].key = key[g];
		sh[g].buf = got[g];
		sh[g].len = BLOB;
	}

	rc = rt_pmix_share(&use, sh, NGROUPS, &err);
	for (g = 0; g < NGROUPS && !rc; g++)
		if (memcmp(got[g], want[g], BLOB)) {
			dt_err_add(&err, "rank %d: %s group %d: the blob differs from root %d's",
				   proc.rank, group_name[g], id[g], sh[g].root);
			rc = -1;
		}
	rc = rt_agree(rc, &err, &bad); /* bad: -1 when MPI failed (abort) */
	if (rc) {
		if (err.count) /* the first failing rank's, or MPI's */
			fprintf(stderr, "pmix_share_main: %s\n", err.msg);
		goto out; /* status 1 */
	}
	printf("rank %d via %s: world root %d, data group %d root %d, pipe group %d root %d: ok\n",
	       proc.rank, use.pmix_up ? "pmix" : "mpi", sh[G_WORLD].root, id[G_DATA],
	       sh[G_DATA].root, id[G_PIPE], sh[G_PIPE].root);
	status = 0;
out:
	rt_grid_free(&grid);
	if (mpi_up) {
		if (status && bad < 0)
			MPI_Abort(MPI_COMM_WORLD, 1);
		MPI_Finalize();
	}
	rt_bootstrap_fini(&proc);
	return status;
}
