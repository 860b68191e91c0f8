/*
 * waits.c - the blocking MPI calls of this process, counted through MPI's
 * profiling interface (waits.h): each wrapper counts the call as begun,
 * calls its PMPI_ twin, and counts it as ended.
 */
#include "runtime/world/waits.h"

#include <mpi.h>
#include <stdatomic.h>

static atomic_llong begun, ended;

void rt_waits_counts(long long *b, long long *e)
{
	/* ended first: a wait that ends between the two reads is not seen
	 * as ended before begun */
	*e = atomic_load(&ended);
	*b = atomic_load(&begun);
}

#define COUNTED(call)                       \
	do {                                \
		int rc_;                    \
		atomic_fetch_add(&begun, 1); \
		rc_ = (call);               \
		atomic_fetch_add(&ended, 1); \
		return rc_;                 \
	} while (0)

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
		  MPI_Comm comm)
{
	COUNTED(PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm));
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
	COUNTED(PMPI_Bcast(buf, count, type, root, comm));
}

int MPI_Barrier(MPI_Comm comm)
{
	COUNTED(PMPI_Barrier(comm));
}

int MPI_Wait(MPI_Request *req, MPI_Status *status)
{
	COUNTED(PMPI_Wait(req, status));
}

int MPI_Waitall(int count, MPI_Request reqs[], MPI_Status statuses[])
{
	COUNTED(PMPI_Waitall(count, reqs, statuses));
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
	     MPI_Status *status)
{
	COUNTED(PMPI_Recv(buf, count, type, source, tag, comm, status));
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
		 int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype, int source,
		 int recvtag, MPI_Comm comm, MPI_Status *status)
{
	COUNTED(PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
			      recvtype, source, recvtag, comm, status));
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
	       int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
	COUNTED(PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm));
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
		  int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
	COUNTED(PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
}

/* the collectives that make and free communicators and windows: they too
 * wait for every member */
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
	COUNTED(PMPI_Comm_split(comm, color, key, newcomm));
}

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm)
{
	COUNTED(PMPI_Comm_split_type(comm, split_type, key, info, newcomm));
}

int MPI_Comm_free(MPI_Comm *comm)
{
	COUNTED(PMPI_Comm_free(comm));
}

int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
			    void *baseptr, MPI_Win *win)
{
	COUNTED(PMPI_Win_allocate_shared(size, disp_unit, info, comm, baseptr, win));
}

int MPI_Win_free(MPI_Win *win)
{
	COUNTED(PMPI_Win_free(win));
}

int MPI_Finalize(void)
{
	COUNTED(PMPI_Finalize());
}
