/*
 * mfu.c - model FLOPs utilization (MFU) of a GPT: the FLOPs its training
 * needs per token, 6 N + 12 L C T (N parameters, the tied copies counted
 * once; L layers, C the width, T the context: forward and backward of the
 * products and of attention's scores, PaLM, Chowdhery et al. 2022,
 * appendix B), against the peak of the job's nodes. The peak is
 * resources.peak_tflops_per_node where the site (or spec) declares it,
 * else measured at the run's first start: every rank times its device's
 * matrix product in the run's precision at once, and a node's peak is the
 * sum over its ranks (they share its cores or GPUs as they do in training).
 * Later starts of the run (a requeue, a restart after a crash) take the
 * peak the run measured on such nodes (the same CPU model or GPU, device,
 * precision, ranks per node, threads) from its metrics.jsonl ("recorded"):
 * one run, one peak, so that the MFU of every start compares (a measurement
 * moves with whatever else the node runs at the time). metrics.c writes both
 * into the start event and the MFU of each log window into the step event.
 *
 * Sections: measuring, the run's own peak, set-up.
 */
#include "runtime/train/trainer.h"

#include "base/cpus.h"
#include "base/json.h"
#include "runtime/kernels/kernels.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

/* --- measuring --- */

/* The FLOP rate of this rank's device on an n x n x n product (n 1024 on
 * the host's CPUs, 4096 on a device of its own), the best of rounds of
 * doubling length until one lasts 50 ms; 0 when the device has no memory
 * for it (the report then has no MFU, training goes on). */
static double measure_rank(struct trainer *t)
{
	int n = t->dev->host ? 1024 : 4096, k, i;
	size_t bytes = (size_t)n * (size_t)n * sizeof(float);
	float *x = NULL, *w = NULL, *y = NULL;
	double best = 0.0, t0, dt;
	struct dt_err quiet = { 0 };

	if (rt_dev_alloc(t->dev, bytes, "peak x", &x, &quiet) ||
	    rt_dev_alloc(t->dev, bytes, "peak w", &w, &quiet) ||
	    rt_dev_alloc(t->dev, bytes, "peak y", &y, &quiet))
		goto out;
	/* the values do not matter, only that they are numbers */
	t->dev->ops->linear_forward(t->dev, x, w, NULL, y, n, n, n, NULL);
	if (rt_dev_sync(t->dev, &quiet))
		goto out;
	for (k = 1; k <= 64; k *= 2) {
		t0 = dt_mono_s();
		for (i = 0; i < k; i++)
			t->dev->ops->linear_forward(t->dev, x, w, NULL, y, n, n, n, NULL);
		if (rt_dev_sync(t->dev, &quiet))
			break;
		dt = dt_mono_s() - t0;
		if (dt > 0 && 2.0 * n * (double)n * n * k / dt > best)
			best = 2.0 * n * (double)n * n * k / dt;
		if (dt >= 0.05)
			break;
	}
out:
	rt_dev_free(t->dev, y);
	rt_dev_free(t->dev, w);
	rt_dev_free(t->dev, x);
	return best;
}

/* --- the run's own peak --- */

static bool str_is(struct json_object *o, const char *key, const char *want)
{
	struct json_object *v;

	return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string) &&
	       !strcmp(json_object_get_string(v), want);
}

static bool int_is(struct json_object *o, const char *key, long want)
{
	struct json_object *v;

	return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_int) &&
	       json_object_get_int64(v) == want;
}

/* The peak of line [len] when it is a start event that measured (or took)
 * one on nodes like this start's: the same hardware (a requeue may land on
 * another node type), device, precision, ranks per node and threads per
 * rank. Else 0. */
static double start_peak(const struct trainer *t, const char *line, size_t len)
{
	const char *precision = t->s->train.precision ? t->s->train.precision : "fp32";
	struct json_object *o = NULL, *v;
	struct dt_json_error e;
	double peak = 0.0;

	if (dt_json_parse_object(line, len, 4, &o, &e))
		return 0.0; /* a torn or foreign line */
	if (str_is(o, "event", "start") && (str_is(o, "peak", "measured") || str_is(o, "peak", "recorded")) &&
	    str_is(o, "hardware", t->hardware) && str_is(o, "device", t->dev->kind) &&
	    str_is(o, "precision", precision) &&
	    int_is(o, "ranks_per_node", t->g->world / t->nodes) &&
	    int_is(o, "cpus_per_task", t->s->resources.cpus_per_task) &&
	    json_object_object_get_ex(o, "peak_flops_per_node", &v))
		peak = json_object_get_double(v);
	json_object_put(o);
	return peak > 0.0 ? peak : 0.0;
}

/* Rank 0, t->nodes known: the peak of the newest such start of this run
 * (<run_dir>/metrics.jsonl, never through a link); 0 when none. */
static double recorded_peak(const struct trainer *t)
{
	char path[4200], *line = NULL;
	size_t cap = 0;
	ssize_t len;
	double found = 0.0, v;
	FILE *f = NULL;
	int fd;

	if (!t->s->run_dir || t->nodes <= 0)
		return 0.0;
	snprintf(path, sizeof(path), "%s/metrics.jsonl", t->s->run_dir);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && !(f = fdopen(fd, "r")))
		close(fd);
	/* a long run's file is mostly step lines: only start lines are parsed */
	while (f && (len = getline(&line, &cap, f)) > 0)
		if (strstr(line, "\"event\":\"start\"") && (v = start_peak(t, line, (size_t)len)) > 0.0)
			found = v;
	free(line);
	if (f)
		fclose(f);
	return found;
}

/* --- set-up --- */

/* Rank 0: what its node computes on, into t->hardware: the GPU's name, or
 * the CPU's model ("" when /proc/cpuinfo names none) */
static void hardware(struct trainer *t)
{
	bool bf16;

	if (!t->dev->host)
		snprintf(t->hardware, sizeof(t->hardware), "%s", t->dev->name);
	else if (!dt_cpu_probe(t->hardware, sizeof(t->hardware), &bf16))
		t->hardware[0] = '\0';
}

/* Rank 0: the job's nodes (distinct node names of the layout) and, with
 * flops [world] each rank's measured rate (or NULL), the mean over nodes
 * of a node's sum; 0 when a rank could not measure. */
static double per_node(const struct trainer *t, const double *flops, int *nodes)
{
	double sum = 0.0;
	bool all = true;
	int r, q;

	*nodes = 0;
	for (r = 0; r < t->g->world; r++) {
		const char *name = t->rank_names + (size_t)r * RT_NODE_NAME;

		for (q = 0; q < r; q++)
			if (!strcmp(name, t->rank_names + (size_t)q * RT_NODE_NAME))
				break;
		if (q == r)
			(*nodes)++;
		if (flops) {
			sum += flops[r];
			all = all && flops[r] > 0;
		}
	}
	return *nodes && all ? sum / *nodes : 0.0;
}

int rt__mfu_init(struct trainer *t)
{
	const struct spec *s = t->s;
	double mine, recorded = 0.0;

	t->flops_per_token = 0.0;
	t->peak_flops_node = 0.0;
	t->peak_source = "none";
	if (strcmp(s->model.type, "gpt"))
		return 0;
	t->flops_per_token = 6.0 * (double)(rt_model_params(s) - rt_model_tied_params(s)) +
			     12.0 * (double)s->model.layers * (double)s->model.embd *
			     (double)s->model.context;
	if (s->resources.peak_tflops_per_node > 0) {
		if (t->g->rank == 0)
			per_node(t, NULL, &t->nodes);
		t->peak_flops_node = s->resources.peak_tflops_per_node * 1e12;
		t->peak_source = "declared";
		return 0;
	}
	if (t->g->rank == 0) {
		per_node(t, NULL, &t->nodes);
		hardware(t);
		recorded = recorded_peak(t);
	}
	MPI_CHECK(t, MPI_Bcast(&recorded, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
	if (recorded > 0.0) {
		t->peak_flops_node = recorded;
		t->peak_source = "recorded";
		return 0;
	}
	/* OpenBLAS's threads for the product, whatever the step will use */
	if (t->dev->host)
		rt_blas_threads((int)s->resources.cpus_per_task);
	MPI_CHECK(t, MPI_Barrier(MPI_COMM_WORLD)); /* every rank at once */
	mine = measure_rank(t);
	MPI_CHECK(t, MPI_Gather(&mine, 1, MPI_DOUBLE, t->rank_vals, 1, MPI_DOUBLE, 0,
				MPI_COMM_WORLD));
	if (t->g->rank == 0)
		t->peak_flops_node = per_node(t, t->rank_vals, &t->nodes);
	t->peak_source = t->peak_flops_node > 0 ? "measured" : "none";
	return 0;
}
