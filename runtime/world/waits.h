/*
 * waits.h - how many times this process waited on other ranks, so that a
 * watchdog can name the rank that never reached the collective its peers
 * wait in.
 *
 * A rank alive but stuck outside MPI (in a kernel, in a sleep, in a loop)
 * keeps its heartbeat fresh and its step and phase equal to its peers', who
 * wait for it inside a collective: by step and phase alone nobody is behind.
 * What tells them apart is that the peers are inside a blocking MPI call
 * and it is not. waits.c counts the blocking MPI calls dtrain makes
 * (MPI_Allreduce, MPI_Bcast, MPI_Barrier, MPI_Wait, MPI_Waitall, MPI_Recv,
 * MPI_Sendrecv, MPI_Gather, MPI_Allgather, and the collectives that make
 * and free communicators and windows: MPI_Comm_split(_type), MPI_Comm_free,
 * MPI_Win_allocate_shared, MPI_Win_free, MPI_Finalize) as begun and ended,
 * through MPI's profiling interface: it defines those functions and calls
 * their PMPI_ twins, so no call site changes. A blocking call added to the
 * runtime needs its wrapper here, or a rank stuck in it looks idle. The
 * heartbeat carries the two counts (base/heartbeat.h).
 *
 * The counts are the process's: one MPI world per process, like the rank
 * itself (STYLE.md's process descriptor). Safe from any thread (atomics).
 */
#ifndef DTRAIN_RUNTIME_WORLD_WAITS_H
#define DTRAIN_RUNTIME_WORLD_WAITS_H

/* The blocking MPI calls begun and ended so far by this process; begun >
 * ended while one is in progress. */
void rt_waits_counts(long long *begun, long long *ended);

#endif
