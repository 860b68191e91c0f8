/*
 * agree.h - the ranks agree on what each did alone, and MPI's failures are
 * reported alike everywhere.
 *
 * A step one rank takes by itself (reading the spec, opening its device,
 * verifying its share of a checkpoint) can fail on some ranks only. If those
 * ranks simply returned, the others would wait for them in their next
 * collective until the watchdog or Slurm ends the job. rt_agree() makes the
 * outcome common: every rank learns whether any failed, which failed first
 * and with what code, and only that rank keeps its message, so the job
 * prints one report.
 *
 * Needs MPI initialised; both functions act on MPI_COMM_WORLD.
 */
#ifndef DTRAIN_RUNTIME_WORLD_AGREE_H
#define DTRAIN_RUNTIME_WORLD_AGREE_H

#include <errno.h>

#include "base/err.h"

/* Returned by rt_agree when MPI itself failed: nothing is agreed and the
 * caller aborts (MPI_Abort), since its peers may be left waiting. Positive,
 * so that no step's own negative errno is taken for it. */
#define RT_AGREE_BROKEN 1

/*
 * Collective: every rank passes the outcome of its own step (rc 0 or a
 * negative errno) and that step's message (why; may be NULL). Returns 0 when
 * every rank's rc was 0. Otherwise returns, on every rank, the rc of the
 * lowest failing rank, whose why is kept while every other rank's is
 * emptied; *first (may be NULL) names that rank (-1 when none failed).
 * RT_AGREE_BROKEN when an MPI call failed: MPI's error is added to why.
 */
int rt_agree(int rc, struct dt_err *why, int *first);

/* Adds "rank <r>: <call> failed: <MPI's text for mpi_rc>" to err (r: the
 * rank in MPI_COMM_WORLD) and returns -EIO. */
int rt_mpi_error(struct dt_err *err, const char *call, int mpi_rc);

#endif
