/*
 * agree.c - agreement of all ranks on local outcomes, and MPI's errors as
 * messages (agree.h).
 */
#include "runtime/world/agree.h"

#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>

int rt_mpi_error(struct dt_err *err, const char *call, int mpi_rc)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0, rank = -1;

	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (MPI_Error_string(mpi_rc, msg, &len) != MPI_SUCCESS)
		snprintf(msg, sizeof(msg), "MPI error %d", mpi_rc);
	return dt_err_add(err, "rank %d: %s failed: %s", rank, call, msg), -EIO;
}

int rt_agree(int rc, struct dt_err *why, int *first)
{
	struct dt_err scratch = { 0 };
	int rank = -1, size = 0, mine, low = 0, code = rc, mrc;

	if (first)
		*first = -1;
	if (!why)
		why = &scratch;
	mrc = MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (mrc == MPI_SUCCESS)
		mrc = MPI_Comm_size(MPI_COMM_WORLD, &size);
	mine = rc ? rank : size;
	if (mrc == MPI_SUCCESS)
		mrc = MPI_Allreduce(&mine, &low, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	if (mrc != MPI_SUCCESS)
		return rt_mpi_error(why, "MPI_Allreduce of the ranks' outcomes", mrc),
		       RT_AGREE_BROKEN;
	if (low >= size)
		return 0;
	/* the first failing rank's code, so that every rank maps it alike
	 * (out of memory is not a spec that does not fit) */
	mrc = MPI_Bcast(&code, 1, MPI_INT, low, MPI_COMM_WORLD);
	if (mrc != MPI_SUCCESS)
		return rt_mpi_error(why, "MPI_Bcast of a rank's outcome", mrc), RT_AGREE_BROKEN;
	if (rank != low)
		dt_err_clear(why); /* one report: the first failing rank's */
	if (first)
		*first = low;
	return code;
}
