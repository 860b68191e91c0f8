/*
 * fault.h - the faults that tests inject through the environment, in one
 * table: every hook of the code base is a point here, its variable named
 * DTRAIN_FAULT_<POINT>, its value "KIND@N" (every rank) or "KIND@N:RANK"
 * (only rank RANK of the job, as the caller names it), N and RANK decimal;
 * any other value asks for nothing.
 *
 *   point     kinds              where (what a test checks with it)
 *   WRITE     enospc@BYTES,      base/io.c: every write and fsync of our
 *             slow@MS            files (a full disk; a save slow enough to
 *                                kill in the middle)
 *   SNAPSHOT  slow@MS            runtime/train/checkpointing.c: the checkpoint's
 *                                snapshot copy (the trainer waits for it)
 *   SPLIT     slow@MS:RANK       runtime/train/split_step.c (read by rt_train):
 *                                after every hand-over of the split step (a
 *                                missing barrier changes the bits)
 *   MPI_INIT  slow@MS:RANK       runtime/world/bootstrap.c: after MPI_Init (no rank
 *                                leaves rt_mpi_init before the late one)
 *   FLIP      bit@STEP:RANK      runtime/train/replicas.c: one bit of one
 *                                parameter of that rank flipped after step
 *                                STEP, once in a run dir (the replicas'
 *                                check names the rank; the restart passes)
 *   STEP      slow@MS            runtime/train/train.c: after every training
 *                                step (a job that outlasts its signals in few
 *                                steps, sleeping instead of computing)
 *
 * The variable is read at each call (a test sets it per process; unset, a
 * call costs one getenv). Nothing here is for production use.
 */
#ifndef DTRAIN_BASE_FAULT_H
#define DTRAIN_BASE_FAULT_H

#include <stdbool.h>

enum dt_fault_point { DT_FAULT_WRITE, DT_FAULT_SNAPSHOT, DT_FAULT_SPLIT, DT_FAULT_MPI_INIT,
		      DT_FAULT_FLIP, DT_FAULT_STEP };

/* Whether the point's variable asks for a fault of this kind ("slow",
 * "enospc") on this rank (rank -1: the caller has none, and a fault naming
 * a rank does not apply); then its N is in *n. */
bool dt_fault(enum dt_fault_point p, const char *kind, int rank, unsigned long long *n);

/* Sleeps ms for point p's "slow" fault, and the first time in the process
 * says so on stderr ("dtrain: test fault DTRAIN_FAULT_SPLIT: rank 1 slow
 * by 4 ms"), so that a test can check its fault did happen. */
void dt_fault_sleep(enum dt_fault_point p, int rank, unsigned long long ms);
/* dt_fault_sleep for the point's "slow" milliseconds when they apply to
 * rank (as dt_fault). */
void dt_fault_slow(enum dt_fault_point p, int rank);

#endif
