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
 * The machine: several Slurm nodes on one machine share its CPUs, whatever
 * each node's CPU count says, so "are there more ranks here than CPUs?" is
 * asked of the machine (one running kernel: its boot id), not the node.
 * rt_mpi_init counts the job's ranks on it under PMIx; elsewhere the count is
 * the node's (local_size).
 *
 * This is half of the process descriptor that STYLE.md allows as a global;
 * the caller owns it (main keeps it) and passes it on.
 *
 * Life cycle: rt_bootstrap(), then rt_mpi_init() (MPI_Init and the check that
 * MPI agrees), ..., MPI_Finalize(), then rt_bootstrap_fini(). rt_bootstrap
 * never waits on another rank; rt_mpi_init meets every rank in a PMIx fence
 * before MPI_Init (joined even by a rank whose PMIx_Put failed), in MPI_Init
 * and in a PMIx fence after it. From there on a rank that fails alone must
 * tell the others (rt_agree, agree.h) or MPI_Abort.
 *
 * Sharing: rt_pmix_share() hands small opaque blobs (NCCL's unique ids, 128
 * bytes) from the root of each group of ranks to the group's members, over
 * PMIx's key-value store when PMIx is up, else over MPI.
 */
#ifndef DTRAIN_RUNTIME_BOOTSTRAP_H
#define DTRAIN_RUNTIME_BOOTSTRAP_H

#include <stdbool.h>
#include <stddef.h>

#include <mpi.h>

#include "base/err.h"

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
	int machine_size;           /* the job's processes on this machine (the ranks
				     * of every Slurm node it runs): counted by
				     * rt_mpi_init under PMIx, else local_size */
	int machine_cpus;           /* CPUs of this machine: online, fewer where a
				     * container's cgroup limits them; 0: unknown */
	enum rt_boot_via via;
	bool pmix_up;               /* PMIx_Init done: rt_bootstrap_fini finalizes */
	char pmix_nspace[256];      /* our PMIx namespace when pmix_up, else "" */
};

/* One group's blob for rt_pmix_share(): the root's bytes in, every member's
 * copy out. The caller owns buf. */
struct rt_share {
	const char *key; /* unique per group in the job, e.g. "dtrain.nccl.data.1";
			  * fewer than 512 bytes */
	MPI_Comm comm;   /* the group, which holds root and us (the MPI fallback
			  * broadcasts over it; PMIx ignores it) */
	int root;        /* the root's rank in MPI_COMM_WORLD (= in the PMIx job) */
	void *buf;       /* [len] bytes: the root's blob on the root, filled on the
			  * other members; the same len on every member */
	size_t len;      /* 1 <= len <= INT_MAX */
};

/* --- life cycle --- */

/* Fills p from the first source above that applies. 0, or a negative errno
 * with a message in err (a PMIx failure names the call and PMIx's status
 * string; a malformed variable names the variable). Never waits on a peer. */
int rt_bootstrap(struct rt_proc *p, struct dt_err *err);

/* Bootstrapped by PMIx with more than one rank: first counts the job's ranks
 * on this machine (p->machine_size; each rank PMIx_Put's its machine's boot
 * id, one PMIx fence over the job, then a PMIx_Get per rank; on a PMIx
 * failure the count stays local_size). Then MPI_Init, asking Open MPI to
 * yield while it waits when this machine's ranks, SLURM_CPUS_PER_TASK
 * threads each, outnumber its CPUs (rt_machine_oversubscribed), unless
 * OMPI_MCA_mpi_yield_when_idle is set already: ranks that spin on a shared
 * core starve the ones that work. Then (PMIx) a PMIx fence so that no rank
 * sends an MPI message to one still inside MPI_Init, MPI_ERRORS_RETURN on
 * MPI_COMM_WORLD, then checks that MPI's world size and rank are those of
 * p. On a mismatch MPI is left initialised (the caller aborts); returns
 * -EPROTO with both views and a launch hint in err. On MPI_Init or fence
 * failure returns -EIO. *mpi_up says whether MPI_Init succeeded. */
int rt_mpi_init(struct rt_proc *p, bool *mpi_up, struct dt_err *err);

/* --- operations --- */

/*
 * Each root's blob to the members of its group, for n groups at once: the
 * groups this rank belongs to (e.g. its data-parallel and its pipeline group),
 * listed in the same order on every rank.
 *
 * Under PMIx (p->pmix_up): every root PMIx_Put's its blob (PMIX_GLOBAL, as a
 * PMIX_BYTE_OBJECT) under the share's key and commits; then ONE PMIx_Fence
 * over the whole job with PMIX_COLLECT_DATA; then every other member
 * PMIx_Get's the key from (our namespace, root). Without PMIx (a singleton, a
 * launcher without PMIx): one MPI_Bcast per share over its comm, in order.
 *
 * Collective over MPI_COMM_WORLD: every rank calls it once per round, even a
 * rank whose n is 0; a key is used in one round only. A rank whose PMIx or
 * MPI call fails still joins the fence (or every broadcast), so no peer
 * waits for it. Returns 0, or on this rank only: -EINVAL for a bad share (a
 * caller's bug, which skips the broadcasts; the message names the key), -EIO
 * or -EPROTO when a PMIx or MPI call failed (the message names the rank, the
 * call, the key and PMIx's or MPI's status string). Agree with
 * rt_agree() (agree.h) before using the blobs; if that fails too, abort.
 */
int rt_pmix_share(const struct rt_proc *p, struct rt_share *shares, int n, struct dt_err *err);

/* PMIx_Finalize when rt_bootstrap initialised PMIx; safe on a zeroed or
 * failed p. Call after MPI_Finalize. */
void rt_bootstrap_fini(struct rt_proc *p);

/* --- queries --- */

/* Whether this machine's ranks of the job, `threads` threads each, want more
 * CPUs than the machine has (false when its CPU count is unknown). */
bool rt_machine_oversubscribed(const struct rt_proc *p, int threads);

/* Whether Open MPI waits for messages yielding its core rather than
 * spinning: OMPI_MCA_mpi_yield_when_idle is true as Open MPI reads a boolean
 * (a number other than 0, "true", "yes", "enabled", "t", "y"), set by the
 * user, the site or rt_mpi_init. */
bool rt_mpi_yields(void);

/* "pmix", "slurm", "mpi" or "singleton". */
const char *rt_boot_via_name(enum rt_boot_via via);

#endif
