/*
 * main.c - dtrain-run: the program every rank of a dtrain job runs.
 *
 * Learns its rank from the launcher (bootstrap.h), starts MPI, reads the
 * resolved job spec (all ranks agree on the outcome), lays the ranks out as
 * data x pipeline (grid.h), builds the communicators, opens the device
 * (device.h: the CPU, or the GPU of train.device "cuda"), reports where each
 * rank landed, and trains (train.h).
 * This file only parses the command line, calls the runtime and maps errors
 * to exit codes (base/util.h).
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <mpi.h>

#include "jobs/spec.h"
#include "runtime/world/bootstrap.h"
#include "runtime/train/checkpointing.h"
#include "runtime/cmd/device.h"
#include "runtime/world/grid.h"
#include "runtime/world/preempt.h"
#include "runtime/train/train.h"
#include "runtime/world/watchdog.h"
#include "base/cli.h"
#include "base/util.h"

#ifndef DTRAIN_VERSION
#define DTRAIN_VERSION "unknown"
#endif

static const char usage_text[] =
	"usage: dtrain-run [--save-params DIR] [--quiet] SPEC.json\n"
	"\n"
	"Runs one rank of a dtrain job. SPEC.json is a resolved job spec, as\n"
	"dtrain-submit writes it into the run directory. Every rank reads the same\n"
	"file; parallel.data x parallel.pipeline must equal the number of ranks.\n"
	"\n"
	"Launch modes (the rank comes from the launcher; PMIx is used when present):\n"
	"  dtrain-run SPEC.json                      one process (data = pipeline = 1)\n"
	"  mpirun -np N dtrain-run SPEC.json         N ranks on this host (Open MPI)\n"
	"  srun --mpi=pmix -n N dtrain-run SPEC.json N ranks of a Slurm job step\n"
	"\n"
	"Ranks are ordered with the data-parallel index fastest:\n"
	"  rank = pipeline_stage * parallel.data + replica\n"
	"\n"
	"Rank 0 prints a progress line every train.log_every steps and the test\n"
	"accuracy at each epoch end; with run_dir set it appends metrics as JSON\n"
	"lines to <run_dir>/metrics.jsonl.\n"
	"\n"
	"Options:\n"
	"  --save-params DIR  write the final parameters, one raw float32 file per\n"
	"                     layer (DIR/layer-<L>.f32: weight [out][in], then bias)\n"
	"  -q, --quiet        no progress lines\n"
	"  -h, --help         this text\n"
	"  -V, --version      print the version, and whether the GPU path\n"
	"                     (train.device \"cuda\") is built\n"
	"\n"
	"Exit codes:\n"
	"  0   success\n"
	"  1   runtime failure (PMIx, MPI, I/O)\n"
	"  2   usage error\n"
	"  3   invalid job spec, or the spec does not match the number of ranks or\n"
	"      its data sets\n"
	"  4   training diverged: the loss or gradient norm became NaN or infinite\n"
	"  5   the watchdog ended this rank: it waited past recovery.*_seconds for\n"
	"      other ranks, and named them on stderr (runtime/world/watchdog.h)\n"
	"  75  a stop signal arrived (SIGTERM or preemption.signal): the state was\n"
	"      saved at the next step boundary; requeue me\n"
	"\n"
	"Checkpoints: saved every checkpoint.every_steps steps and at the end, into\n"
	"checkpoint.dir (default <run_dir>/checkpoints); a run resumes from its newest\n"
	"valid checkpoint (checkpoint.resume). See checkpoint/README.md.\n";

enum { OPT_SAVE_PARAMS = 256 };

/* --- main --- */

static void print_err(const struct dt_err *err, const char *prefix)
{
	dt_err_print("dtrain-run", prefix, err);
}

static void print_version(void)
{
	const char *gpu = rt_device_gpu_build();

	printf("dtrain-run %s\n", DTRAIN_VERSION);
	if (gpu)
		printf("GPU path: built (%s)\n", gpu);
	else
		printf("GPU path: not built\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "save-params", required_argument, NULL, OPT_SAVE_PARAMS },
		{ NULL, 0, NULL, 0 },
	};
	struct spec spec = { 0 };
	struct dt_err err = { 0 }, err2 = { 0 };
	struct rt_proc proc = { 0 };
	struct rt_grid grid = { 0 };
	struct rt_train_opts topts = { 0 };
	struct rt_watchdog wd = { 0 };
	bool mpi_up = false, together = false;
	char prefix[32];
	int c, rc, bad, status = DT_EXIT_FAIL;

	grid.data_comm = grid.pipe_comm = MPI_COMM_NULL;
	while ((c = getopt_long(argc, argv, "hVq", opts, NULL)) != -1) {
		switch (c) {
		case 'q':
			topts.quiet = true;
			break;
		case OPT_SAVE_PARAMS:
			topts.save_params = optarg;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return DT_EXIT_OK;
		case 'V':
			print_version();
			return DT_EXIT_OK;
		default:
			fputs("usage: dtrain-run [--help] [--version] SPEC.json\n", stderr);
			return DT_EXIT_USAGE;
		}
	}
	if (argc - optind != 1) {
		fprintf(stderr, "dtrain-run: %s\nusage: dtrain-run [--help] [--version] SPEC.json\n",
			argc - optind ? "too many arguments" : "missing SPEC.json");
		return DT_EXIT_USAGE;
	}

	/* SIGTERM only sets the stop flag from here on (preempt.h) */
	rt_preempt_signals(NULL);
	if (rt_bootstrap(&proc, &err)) {
		print_err(&err, "bootstrap: ");
		goto out;
	}
	snprintf(prefix, sizeof(prefix), "rank %d: ", proc.rank);
	if (rt_mpi_init(&proc, &mpi_up, &err)) {
		print_err(&err, prefix);
		goto out; /* abort: the ranks disagree on the world */
	}

	/* Loaded after MPI_Init so that all ranks agree on the outcome: a
	 * file missing on one node ends the job instead of hanging the rest.
	 * The first failing rank reports (rank 0 when all fail alike). */
	rc = spec_load(argv[optind], &spec, &err);
	if (!rc && rt_preempt_signals(spec.preemption.signal)) {
		dt_err_add(&err, "%s: preemption.signal: unknown signal \"%s\"", argv[optind],
			   spec.preemption.signal);
		rc = -EINVAL;
	}
	if (rt_mpi_first_failure(rc != 0, &bad, &err2)) {
		print_err(&err2, prefix);
		goto out;
	}
	if (bad >= 0) {
		if (proc.rank == bad)
			print_err(&err, bad ? prefix : "");
		status = DT_EXIT_SPEC;
		goto out;
	}

	/* Every rank sees the same spec and world size, so every rank fails
	 * here alike: one report, and a clean MPI_Finalize on all. The spec
	 * table bounds parallel.data and parallel.pipeline well inside int. */
	if (rt_grid_init(&grid, proc.size, (int)spec.parallel.data, (int)spec.parallel.pipeline,
			 proc.rank, &err)) {
		if (proc.rank == 0)
			print_err(&err, "");
		status = DT_EXIT_SPEC;
		goto out;
	}
	if (rt_grid_comms(&grid, MPI_COMM_WORLD, &err)) {
		print_err(&err, prefix);
		goto out;
	}
	/* From here on a rank that waits too long for the others ends the
	 * job step, naming whom it waited for (watchdog.h). */
	rc = rt_watchdog_start(&wd, &spec, proc.rank, proc.size, proc.node, &err);
	if (rt_mpi_first_failure(rc != 0, &bad, &err2)) {
		print_err(&err2, prefix);
		goto out;
	}
	if (bad >= 0) {
		if (proc.rank == bad)
			print_err(&err, "");
		together = true;
		goto out;
	}
	/* A rank without its device (no GPU visible) ends every rank: the
	 * first failing rank reports (its message names it), all exit 1. */
	rc = rt_device_open(&spec, &proc, &err);
	if (rt_mpi_first_failure(rc != 0, &bad, &err2)) {
		print_err(&err2, prefix);
		goto out;
	}
	if (bad >= 0) {
		if (proc.rank == bad)
			print_err(&err, "");
		together = true;
		goto out;
	}

	if (proc.rank == 0) {
		printf("dtrain-run: job %s world %d = data %d x pipeline %d\n", spec.name,
		       grid.world, grid.size[RT_DIM_DATA], grid.size[RT_DIM_PIPE]);
		fflush(stdout);
	}
	/* best effort to show the job line first: launchers merge the streams */
	MPI_Barrier(MPI_COMM_WORLD);
	printf("dtrain-run: rank %d/%d local %d/%d node %s host %s nodeid %d data %d/%d pipe %d/%d via %s machine %d ranks %d cpus mpi_wait %s\n",
	       proc.rank, proc.size, proc.local_rank, proc.local_size, proc.node, proc.hostname,
	       proc.node_id, grid.coord[RT_DIM_DATA], grid.size[RT_DIM_DATA],
	       grid.coord[RT_DIM_PIPE], grid.size[RT_DIM_PIPE], rt_boot_via_name(proc.via),
	       proc.machine_size, proc.machine_cpus, rt_mpi_yields() ? "yield" : "spin");
	fflush(stdout);
	rc = MPI_Barrier(MPI_COMM_WORLD);
	if (rc != MPI_SUCCESS) {
		fprintf(stderr, "dtrain-run: %sMPI_Barrier failed (MPI error %d)\n", prefix, rc);
		goto out;
	}

	topts.proc = &proc;
	topts.watchdog = &wd;
	rc = rt_train(&spec, &grid, &topts, &together, &err);
	if (err.count)
		print_err(&err, rc == -ERANGE ? "" : prefix);
	/* a failure on this rank alone aborts the job (together false) */
	status = rc == 0 ? DT_EXIT_OK : rc == -ERANGE ? DT_EXIT_DIVERGED :
		 rc == -EINVAL ? DT_EXIT_SPEC : rc == -EAGAIN ? DT_EXIT_REQUEUE : DT_EXIT_FAIL;
out:
	rt_watchdog_stop(&wd);
	rt_grid_free(&grid);
	if (mpi_up) {
		if (status == DT_EXIT_FAIL && !together)
			MPI_Abort(MPI_COMM_WORLD, DT_EXIT_FAIL); /* peers may wait on us */
		MPI_Finalize();
	}
	rt_bootstrap_fini(&proc);
	spec_free(&spec);
	return status;
}
