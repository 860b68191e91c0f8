/*
 * allreduce.c - dtrain-bench-allreduce: the communication peer of `make bench`.
 *
 * Times one blocking MPI_Allreduce (in place, float sum, MPI_COMM_WORLD) of
 * N floats, the way a trainer without overlap would synchronise a whole
 * gradient after the backward pass. Started by mpirun on as many ranks as the
 * training run it is compared with; bench/run.py sets N to the model's
 * parameter count. After two warm-up calls it times --iters calls, each
 * between barriers, and rank 0 prints one JSON object with the median and
 * the minimum in seconds.
 */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: mpirun -np R dtrain-bench-allreduce [--iters K] N\n"
	"\n"
	"Times a blocking in-place MPI_Allreduce of N floats (sum) over all ranks\n"
	"and prints one JSON object: the median and minimum seconds of K calls.\n"
	"\n"
	"  --iters K   calls to time (default 10)\n"
	"  -h, --help  this text\n";

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static long parse_long(const char *s, const char *what, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 1 || v > max) {
		fprintf(stderr, "dtrain-bench-allreduce: %s: want an integer in [1, %ld] (got \"%s\")\n",
			what, max, s);
		return -1;
	}
	return v;
}

int main(int argc, char **argv)
{
	long n = 0, iters = 10, i;
	double *times = NULL;
	float *buf = NULL;
	int rank = 0, size = 1, a, rc = 1;

	for (a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "-h") || !strcmp(argv[a], "--help")) {
			fputs(usage, stdout);
			return 0;
		}
		if (!strcmp(argv[a], "--iters") && a + 1 < argc) {
			if ((iters = parse_long(argv[++a], "--iters", 100000)) < 0)
				return 2;
		} else if (argv[a][0] != '-' && !n) {
			if ((n = parse_long(argv[a], "N", 1l << 30)) < 0)
				return 2;
		} else {
			fprintf(stderr, "dtrain-bench-allreduce: unexpected argument: %s\n%s", argv[a], usage);
			return 2;
		}
	}
	if (!n) {
		fprintf(stderr, "dtrain-bench-allreduce: N (floats) missing\n%s", usage);
		return 2;
	}
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	buf = malloc((size_t)n * sizeof(float));
	times = malloc((size_t)iters * sizeof(double));
	if (!buf || !times) {
		fprintf(stderr, "dtrain-bench-allreduce: rank %d: out of memory for %ld floats\n", rank, n);
		goto out;
	}
	for (i = 0; i < n; i++)
		buf[i] = (float)(i % 97) * 1e-3f;
	for (i = -2; i < iters; i++) {
		double t0;

		MPI_Barrier(MPI_COMM_WORLD);
		t0 = MPI_Wtime();
		MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		if (i >= 0)
			times[i] = MPI_Wtime() - t0;
	}
	/* the slowest rank's time of each call */
	MPI_Allreduce(MPI_IN_PLACE, times, (int)iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	qsort(times, (size_t)iters, sizeof(double), cmp_double);
	if (rank == 0)
		printf("{\"ranks\":%d,\"floats\":%ld,\"bytes\":%ld,\"iters\":%ld,\"median_s\":%.6f,\"min_s\":%.6f}\n",
		       size, n, n * 4, iters, times[iters / 2], times[0]);
	rc = 0;
out:
	free(buf);
	free(times);
	MPI_Finalize();
	return rc;
}
