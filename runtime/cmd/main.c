/*
 * main.c - dtrain-run: the program every rank of a dtrain job runs.
 *
 * main() is the program's story: parse the command line, set up the process
 * (learn the rank from the launcher, start MPI, read the resolved job spec,
 * lay the ranks out as data x pipeline and build their communicators, start
 * the watchdog, open the device), say where each rank landed, train
 * (train/train.h), and map the outcome to an exit code (base/err.h).
 *
 * A set-up step that one rank takes alone (reading the spec, opening its
 * device) is agreed on by all ranks (world/agree.h), so that a failure on one
 * node ends every rank with one report instead of leaving the others waiting.
 *
 * Sections: usage, the command line, set-up, placement, main.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "jobs/spec.h"
#include "runtime/world/agree.h"
#include "runtime/world/bootstrap.h"
#include "runtime/train/checkpointing.h"
#include "runtime/train/device.h"
#include "runtime/world/grid.h"
#include "runtime/world/preempt.h"
#include "runtime/train/train.h"
#include "runtime/world/watchdog.h"
#include "base/buf.h"
#include "base/cli.h"
#include "base/clock.h"
#include "base/cpus.h"
#include "base/err.h"
#include "base/io.h"

#ifndef DTRAIN_VERSION
#define DTRAIN_VERSION "unknown"
#endif

static const char usage_text[] =
	"usage: dtrain-run [--save-params DIR] [--quiet] SPEC.json\n"
	"       dtrain-run --check-data SPEC.json\n"
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
	"Rank 0 prints a progress line every train.log_every steps and the\n"
	"evaluation on data.test at each epoch end (or every train.eval_every\n"
	"steps); with run_dir set it appends metrics as JSON lines to\n"
	"<run_dir>/metrics.jsonl.\n"
	"\n"
	"Options:\n"
	"  --save-params DIR  write the final parameters, one raw float32 file per\n"
	"                     block: DIR/layer-<L>.f32 for the MLP (weight [out][in],\n"
	"                     then bias), DIR/block-<B>.f32 for the GPT (its tensors\n"
	"                     in the model's order)\n"
	"  -q, --quiet        no progress lines\n"
	"  --check-data       only open the spec's data sets as a run would and check\n"
	"                     them against its model (kind, features, classes or\n"
	"                     vocabulary, samples for a global batch), and the\n"
	"                     tensors of checkpoint.init_from; one process, no MPI:\n"
	"                     what dtrain-submit validate runs\n"
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
	"  6   the replicas of a stage disagree (recovery.check_replicas_every): one\n"
	"      holds other parameters than the others, named on stderr; not saved\n"
	"  75  a stop signal arrived (SIGTERM or preemption.signal): the state was\n"
	"      saved at the next step boundary; requeue me\n"
	"\n"
	"Checkpoints: saved every checkpoint.every_steps steps and at the end, into\n"
	"checkpoint.dir (default <run_dir>/checkpoints); a run resumes from its newest\n"
	"valid checkpoint (checkpoint.resume). See docs/checkpoints.md.\n";

enum { OPT_SAVE_PARAMS = 256, OPT_CHECK_DATA, CONTINUE = -1 };

/* What main sets up, torn down in reverse by tear_down(). */
struct run {
	struct spec spec;
	struct rt_proc proc;
	struct rt_grid grid;
	struct rt_watchdog wd;
	struct rt_dev *dev; /* train.device, opened (train/device.h) */
	bool mpi_up;   /* MPI_Init succeeded: MPI_Finalize (or MPI_Abort) at the end */
	bool together; /* every rank fails alike: no MPI_Abort needed */
	bool data_auto; /* parallel.data was "auto": resolved from the world size */
	char prefix[32]; /* "rank R: " once the rank is known */
};

static void print_err(const struct dt_err *err, const char *prefix)
{
	dt_err_print("dtrain-run", prefix, err);
}

/* --- the command line --- */

static void print_version(void)
{
	struct dt_err err = { 0 };
	const char *gpu = rt_device_gpu_build(&err);

	printf("dtrain-run %s\n", DTRAIN_VERSION);
	if (gpu)
		printf("GPU path: built (%s)\n", gpu);
	else if (err.count)
		printf("GPU path: built, but %s\n", err.msg);
	else
		printf("GPU path: not built\n");
}

/* Fills topts, *spec_path and *check_data; CONTINUE, or the exit code for
 * main. */
static int parse_args(int argc, char **argv, struct rt_train_opts *topts, const char **spec_path,
		      bool *check_data)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "save-params", required_argument, NULL, OPT_SAVE_PARAMS },
		{ "check-data", no_argument, NULL, OPT_CHECK_DATA },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":hVq", opts, NULL)) != -1) {
		switch (c) {
		case 'q':
			topts->quiet = true;
			break;
		case OPT_CHECK_DATA:
			*check_data = true;
			break;
		case OPT_SAVE_PARAMS:
			topts->save_params = optarg;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return DT_EXIT_OK;
		case 'V':
			print_version();
			return DT_EXIT_OK;
		case ':':
			return dt_usage_error("dtrain-run", usage_text, "%s: needs a value", argv[optind - 1]);
		default:
			return dt_unknown_option("dtrain-run", usage_text, argv[optind - 1], opts);
		}
	}
	if (argc - optind != 1) {
		fprintf(stderr, "dtrain-run: %s\nusage: dtrain-run [--help] [--version] SPEC.json\n",
			argc - optind ? "too many arguments" : "missing SPEC.json");
		return DT_EXIT_USAGE;
	}
	*spec_path = argv[optind];
	return CONTINUE;
}

/* --- set-up --- */

/*
 * The outcome rc of a set-up step every rank took alone, agreed on by all.
 * CONTINUE when every rank succeeded. Otherwise the first failing rank
 * prints its message err (after first_prefix) and every rank returns
 * status, exiting alike. When MPI itself failed this rank prints and
 * returns DT_EXIT_FAIL, and the job aborts.
 */
static int agree_setup(struct run *r, int rc, struct dt_err *err, int status,
		       const char *first_prefix)
{
	int first;

	rc = rt_agree(rc, err, &first);
	if (rc == RT_AGREE_BROKEN) {
		print_err(err, r->prefix);
		return DT_EXIT_FAIL;
	}
	if (!rc)
		return CONTINUE;
	if (r->proc.rank == first)
		print_err(err, first_prefix);
	r->together = true;
	return status;
}

/* The spec, read after MPI_Init so that all ranks agree on the outcome: a
 * file missing on one node ends the job instead of hanging the rest. */
static int load_spec(struct run *r, const char *path)
{
	struct dt_err err = { 0 };
	int rc = spec_load(path, &r->spec, &err);

	if (!rc && rt_preempt_signals(r->spec.preemption.signal)) {
		dt_err_add(&err, "%s: preemption.signal: unknown signal \"%s\"", path,
			   r->spec.preemption.signal);
		rc = -EINVAL;
	}
	return agree_setup(r, rc, &err, DT_EXIT_SPEC, r->proc.rank ? r->prefix : "");
}

/* Every rank sees the same spec and world size, so every rank fails the
 * layout alike: one report (rank 0's). The spec table bounds parallel.data
 * and parallel.pipeline well inside int. */
static int lay_out(struct run *r)
{
	struct dt_err err = { 0 };

	if (r->spec.parallel.data == SPEC_AUTO) { /* the replicas the ranks make */
		char why[256];
		long data = spec_data_for(&r->spec, r->proc.size, why, sizeof(why));

		if (!data) {
			if (r->proc.rank == 0)
				fprintf(stderr, "dtrain-run: parallel.data \"auto\" on %d ranks: %s\n",
					r->proc.size, why);
			r->together = true;
			return DT_EXIT_SPEC;
		}
		r->spec.parallel.data = data;
		r->data_auto = true;
	}
	if (rt_grid_init(&r->grid, r->proc.size, (int)r->spec.parallel.data,
			 (int)r->spec.parallel.pipeline, r->proc.rank, &err)) {
		if (r->proc.rank == 0)
			print_err(&err, "");
		r->together = true;
		return DT_EXIT_SPEC;
	}
	if (rt_grid_comms(&r->grid, MPI_COMM_WORLD, &err)) {
		print_err(&err, r->prefix);
		return DT_EXIT_FAIL;
	}
	return CONTINUE;
}

/* NCCL for GPUs of their own (train/device.h): a failure every rank has is
 * agreed; one on this rank alone aborts the job (together stays false). */
static int collectives(struct run *r, struct dt_err *err)
{
	int rc = rt_device_collectives(r->dev, &r->proc, &r->grid, err);

	if (rc == -ECOMM) {
		print_err(err, r->prefix);
		return DT_EXIT_FAIL;
	}
	return agree_setup(r, rc, err, DT_EXIT_FAIL, "");
}

/* Bootstrap, MPI, the spec, the layout, the watchdog and the device, in
 * that order; CONTINUE, or the exit status. */
static int set_up(struct run *r, const char *spec_path)
{
	struct dt_err err = { 0 };
	int status;

	/* SIGTERM only sets the stop flag from here on (preempt.h) */
	rt_preempt_signals(NULL);
	if (rt_bootstrap(&r->proc, &err)) {
		print_err(&err, "bootstrap: ");
		return DT_EXIT_FAIL;
	}
	snprintf(r->prefix, sizeof(r->prefix), "rank %d: ", r->proc.rank);
	if (rt_mpi_init(&r->proc, &r->mpi_up, &err)) {
		print_err(&err, r->prefix);
		return DT_EXIT_FAIL; /* abort: the ranks disagree on the world */
	}
	status = load_spec(r, spec_path);
	if (status == CONTINUE)
		status = lay_out(r);
	/* from here on a rank that waits too long for the others ends the
	 * job step, naming whom it waited for (watchdog.h) */
	if (status == CONTINUE)
		status = agree_setup(r, rt_watchdog_start(&r->wd, &r->spec, r->proc.rank,
							  r->proc.size, r->proc.node, &err),
				     &err, DT_EXIT_FAIL, "");
	/* a rank without its device (no GPU visible) ends every rank */
	if (status == CONTINUE)
		status = agree_setup(r, rt_device_open(&r->spec, &r->proc, &r->dev, &err), &err,
				     DT_EXIT_FAIL, "");
	if (status == CONTINUE)
		status = collectives(r, &err);
	return status;
}

/* --- placement --- */

/* train.precision "bf16" on the CPU, where the CPU has no bf16
 * instructions: said once a node, after the device lines, since oneDNN
 * then emulates them, slower than fp32 itself (base/cpus.h) */
static void say_bf16_emulated(const struct run *r)
{
	const struct spec *s = &r->spec;
	char model[160];
	bool native;

	if (r->proc.local_rank != 0 || !s->train.precision || strcmp(s->train.precision, "bf16") ||
	    !strcmp(s->train.device, "cuda") || !dt_cpu_probe(model, sizeof(model), &native) || native)
		return;
	printf("dtrain-run: node %s warning: train.precision \"bf16\" on a CPU without bf16 instructions (%s: no avx512_bf16 or amx_bf16): oneDNN emulates them, slower than fp32 (about 0.4x); hint: train.precision \"fp32\"\n",
	       r->proc.node, model[0] ? model : "model unknown");
}

/* The job's line (rank 0) and one line per rank saying where it landed;
 * CONTINUE, or DT_EXIT_FAIL when the barrier after them fails. */
static int report_placement(const struct run *r)
{
	const struct rt_proc *p = &r->proc;
	const struct rt_grid *g = &r->grid;
	int rc;

	if (p->rank == 0) {
		printf("dtrain-run: job %s world %d = data %d x pipeline %d%s\n", r->spec.name,
		       g->world, g->size[RT_DIM_DATA], g->size[RT_DIM_PIPE],
		       r->data_auto ? " (parallel.data \"auto\": the replicas of the ranks started)" : "");
		fflush(stdout);
	}
	/* best effort to show the job line first: launchers merge the streams */
	MPI_Barrier(MPI_COMM_WORLD);
	printf("dtrain-run: rank %d/%d local %d/%d node %s host %s nodeid %d data %d/%d pipe %d/%d via %s machine %d ranks %d cpus mpi_wait %s\n",
	       p->rank, p->size, p->local_rank, p->local_size, p->node, p->hostname, p->node_id,
	       g->coord[RT_DIM_DATA], g->size[RT_DIM_DATA], g->coord[RT_DIM_PIPE],
	       g->size[RT_DIM_PIPE], rt_boot_via_name(p->via), p->machine_size, p->machine_cpus,
	       rt_mpi_yields() ? "yield" : "spin");
	/* a device other than the CPU: which, and how its ranks talk (the
	 * host's MPI, through host copies of the device's arrays) */
	if (r->dev != rt_dev_cpu())
		printf("dtrain-run: rank %d device %s collectives %s\n", p->rank, r->dev->name,
		       r->dev->collectives);
	say_bf16_emulated(r);
	fflush(stdout);
	rc = MPI_Barrier(MPI_COMM_WORLD);
	if (rc != MPI_SUCCESS) {
		fprintf(stderr, "dtrain-run: %sMPI_Barrier failed (MPI error %d)\n", r->prefix, rc);
		return DT_EXIT_FAIL;
	}
	return CONTINUE;
}

/* --- main --- */

/* Why the run failed, as this rank printed it, kept in <run_dir>/failure
 * (written new and renamed: the last rank to fail wins) for `dtrain-submit
 * status` to show. */
static void keep_failure(const struct run *r, const struct dt_err *err, int status,
			 const char *prefix)
{
	struct dt_buf text = { 0 };
	char path[4200];

	if (!r->spec.run_dir ||
	    snprintf(path, sizeof(path), "%s/failure", r->spec.run_dir) >= (int)sizeof(path))
		return;
	if (!dt_buf_printf(&text, "exit %d at %.0f: %s%s\n", status, dt_wall_s(), prefix, err->msg))
		(void)dt_write_file_atomic(path, text.p, text.len, 0644);
	dt_buf_free(&text);
}

static int train(struct run *r, struct rt_train_opts *topts)
{
	struct dt_err err = { 0 };
	int rc, status;

	topts->proc = &r->proc;
	topts->watchdog = &r->wd;
	topts->dev = r->dev;
	rc = rt_train(&r->spec, &r->grid, topts, &r->together, &err);
	status = rc == 0 ? DT_EXIT_OK : rc == -ERANGE ? DT_EXIT_DIVERGED :
		 rc == -ENOTRECOVERABLE ? DT_EXIT_REPLICAS : rc == -EINVAL ? DT_EXIT_SPEC :
		 rc == -EAGAIN ? DT_EXIT_REQUEUE : DT_EXIT_FAIL;
	if (err.count)
		print_err(&err, rc == -ERANGE ? "" : r->prefix);
	if (err.count && rc && rc != -EAGAIN)
		keep_failure(r, &err, status, rc == -ERANGE ? "" : r->prefix);
	/* a failure on this rank alone aborts the job, with its exit code
	 * (together false: tear_down) */
	return status;
}

static void tear_down(struct run *r, int status)
{
	rt_watchdog_stop(&r->wd);
	rt_device_close(r->dev);
	rt_grid_free(&r->grid);
	if (r->mpi_up) {
		if (status != DT_EXIT_OK && !r->together)
			MPI_Abort(MPI_COMM_WORLD, status); /* peers may wait on us */
		MPI_Finalize();
	}
	rt_bootstrap_fini(&r->proc);
	spec_free(&r->spec);
}

/* oneDNN's OpenMP threads (train.precision "bf16" on the CPU,
 * kernels/bf16.h) spin between products by default, taking the rank's
 * cores from its own threads (attention, LayerNorm, the optimizer): the
 * tiny GPT in bf16 on 2 threads ran 20 % slower than with them waiting
 * passive. libgomp reads OMP_WAIT_POLICY once, as the program loads, so a
 * bf16 run on the CPU starts itself again with it set to passive, unless
 * the user set it (before MPI or anything else starts; when the exec fails
 * it runs on as it is). Other runs do not: a start costs the loading of
 * every library again. The spec is read here for its precision alone; its
 * errors are reported after MPI_Init (load_spec). */
static void omp_wait_passive(const char *spec_path, char **argv)
{
	struct spec s = { 0 };
	struct dt_err err = { 0 };
	bool bf16;

	if (getenv("OMP_WAIT_POLICY"))
		return;
	bf16 = !spec_load(spec_path, &s, &err) && s.train.precision && !strcmp(s.train.precision, "bf16") &&
	       strcmp(s.train.device, "cuda");
	spec_free(&s);
	if (bf16 && setenv("OMP_WAIT_POLICY", "passive", 1) == 0)
		execv("/proc/self/exe", argv);
}

/* --check-data: the spec's data sets and checkpoint.init_from against its
 * model, on this process alone (rt_check_data, rt_check_init_from); exit 0,
 * 3 when they do not fit, 1 when unreadable */
static int check_data(const char *spec_path)
{
	struct spec s = { 0 };
	struct dt_err err = { 0 };
	int rc = spec_load(spec_path, &s, &err);

	if (!rc)
		rc = rt_check_data(&s, &err);
	if (!rc)
		rc = rt_check_init_from(&s, &err);
	if (rc)
		print_err(&err, "");
	else
		printf("dtrain-run: %s: its data%s fits its model\n", spec_path,
		       s.checkpoint.init_from ? " and checkpoint.init_from" : "");
	spec_free(&s);
	return !rc ? DT_EXIT_OK : rc == -EINVAL ? DT_EXIT_SPEC : DT_EXIT_FAIL;
}

int main(int argc, char **argv)
{
	struct rt_train_opts topts = { 0 };
	struct run r = { 0 };
	const char *spec_path = NULL;
	bool only_data = false;
	int status;

	status = parse_args(argc, argv, &topts, &spec_path, &only_data);
	if (status != CONTINUE)
		return status;
	if (only_data)
		return check_data(spec_path);
	omp_wait_passive(spec_path, argv);
	r.grid.data_comm = r.grid.pipe_comm = MPI_COMM_NULL;
	status = set_up(&r, spec_path);
	if (status == CONTINUE)
		status = report_placement(&r);
	if (status == CONTINUE)
		status = train(&r, &topts);
	tear_down(&r, status);
	return status;
}
