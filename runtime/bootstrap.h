/*
 * bootstrap.h - who am I: this process's rank, the job's size and where the
 * process runs, learned from the launcher before MPI starts, then checked
 * against MPI.
 *
 * Sources, first that applies wins:
 *   1. PMIx (PMIX_NAMESPACE set: `srun --mpi=pmix`, and Open MPI's mpirun,
 *      which also runs a PMIx server): PMIx_Init, then PMIx_Get of the job
 *      size, our local rank, local size, node id and host name.
 *   2. Slurm's environment (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
 *      SLURM_NODEID, SLURM_STEP_TASKS_PER_NODE): `srun --mpi=none`.
 *   3. Open MPI's environment (OMPI_COMM_WORLD_RANK, ...): `mpirun -np N`
 *      when PMIx is not visible.
 *   4. Singleton: rank 0 of 1 (`dtrain-run spec.json`).
 *
 * `node` names the node for the user and the logs: SLURMD_NODENAME when set,
 * else the host name. Several Slurm nodes can run on one host (our local test
 * cluster does), so the host name alone cannot tell them apart.
 *
 * This is half of the process descriptor that STYLE.md allows as a global;
 * the caller owns it (main keeps it) and passes it on.
 *
 * Life cycle: rt_bootstrap(), then rt_mpi_init() (MPI_Init and the check that
 * MPI agrees), ..., MPI_Finalize(), then rt_bootstrap_fini(). Nothing here
 * waits on another rank before MPI_Init; from there on a rank that fails
 * alone must tell the others (rt_mpi_first_failure) or MPI_Abort.
 */
#ifndef DTRAIN_RUNTIME_BOOTSTRAP_H
#define DTRAIN_RUNTIME_BOOTSTRAP_H

#include <stdbool.h>

#include "runtime/util.h"

enum rt_boot_via {
	RT_BOOT_PMIX,
	RT_BOOT_SLURM,
	RT_BOOT_MPI,
	RT_BOOT_SINGLETON,
};

struct rt_proc {
	int rank, size;             /* in the job; 0 <= rank < size */
	int local_rank, local_size; /* among the job's processes on this node */
	int node_id;                /* 0-based index of this node in the job; -1: unknown */
	char node[64];              /* SLURMD_NODENAME, else hostname */
	char hostname[64];          /* PMIX_HOSTNAME under PMIx, else gethostname() */
	enum rt_boot_via via;
	bool pmix_up;               /* PMIx_Init done: rt_bootstrap_fini finalizes */
};

/* --- life cycle --- */

/* Fills p from the first source above that applies. 0, or a negative errno
 * with a message in err (a PMIx failure names the call and PMIx's status
 * string; a malformed variable names the variable). Never waits on a peer. */
int rt_bootstrap(struct rt_proc *p, struct dt_err *err);

/* MPI_Init, MPI_ERRORS_RETURN on MPI_COMM_WORLD, then checks that MPI's world
 * size and rank are those of p. On a mismatch MPI is left initialised (the
 * caller aborts); returns -EPROTO with both views and a launch hint in err.
 * On MPI_Init failure returns -EIO. *mpi_up says whether MPI_Init succeeded. */
int rt_mpi_init(const struct rt_proc *p, bool *mpi_up, struct dt_err *err);

/* Agreement on a local outcome, so that a failure on some ranks (a spec
 * file one node cannot read) ends every rank instead of leaving the others
 * waiting in their next collective. Collective over MPI_COMM_WORLD. Sets
 * *first_failed to the lowest rank that passed failed = true, or -1 when none
 * did. 0, or -EIO with the MPI error in err (the caller aborts). */
int rt_mpi_first_failure(bool failed, int *first_failed, struct dt_err *err);

/* PMIx_Finalize when rt_bootstrap initialised PMIx; safe on a zeroed or
 * failed p. Call after MPI_Finalize. */
void rt_bootstrap_fini(struct rt_proc *p);

/* --- queries --- */

/* "pmix", "slurm", "mpi" or "singleton". */
const char *rt_boot_via_name(enum rt_boot_via via);

#endif
