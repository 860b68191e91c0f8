/*
 * ranks.c - every rank's part of the metrics, gathered to rank 0: where
 * each rank runs (a "layout" event after the start: its stage, replica and
 * node) and, at each logged step, what its log window cost it per step
 * (compute, pipeline wait, gradient wait, data, optimizer) and its peak
 * memory (a "ranks" event beside the step event, which carries the means).
 * A slow rank, a stage that waits on the others, a rank near its memory
 * limit are seen here, not in the means.
 *
 * Sections: set-up, the layout, a log window.
 */
#include "runtime/train/trainer.h"

#include "base/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <json-c/json.h>

/* The values of one rank in one log window, in the order of the "ranks"
 * event's arrays; the times in seconds per step. */
enum { V_STEP, V_COMPUTE, V_PIPE, V_GRAD, V_DATA, V_OPTIM, V_RSS, V_N };

static const char *const v_names[V_N] = {
	"step_s", "compute_s", "pipe_wait_s", "grad_wait_s", "data_s", "optim_s", "max_rss_mib",
};

/* --- set-up --- */

int rt__ranks_init(struct trainer *t)
{
	if (t->g->rank != 0)
		return 0;
	t->rank_vals = calloc((size_t)t->g->world * V_N, sizeof(*t->rank_vals));
	t->rank_names = calloc((size_t)t->g->world, RT_NODE_NAME);
	t->rank_place = calloc((size_t)t->g->world * 2, sizeof(*t->rank_place));
	if (!t->rank_vals || !t->rank_names || !t->rank_place) {
		dt_err_add(t->err, "rank 0: out of memory for the metrics of %d ranks", t->g->world);
		return -ENOMEM;
	}
	return 0;
}

void rt__ranks_free(struct trainer *t)
{
	free(t->rank_vals);
	free(t->rank_names);
	free(t->rank_place);
	t->rank_vals = NULL;
	t->rank_names = NULL;
	t->rank_place = NULL;
}

/* --- the layout --- */

int rt__ranks_layout(struct trainer *t)
{
	char node[RT_NODE_NAME] = "";
	int place[2] = { t->stage, t->replica };

	snprintf(node, sizeof(node), "%s", t->node);
	MPI_CHECK(t, MPI_Gather(node, RT_NODE_NAME, MPI_CHAR, t->rank_names, RT_NODE_NAME, MPI_CHAR,
				0, MPI_COMM_WORLD));
	MPI_CHECK(t, MPI_Gather(place, 2, MPI_INT, t->rank_place, 2, MPI_INT, 0, MPI_COMM_WORLD));
	if (t->g->rank == 0)
		for (int r = 0; r < t->g->world; r++)
			t->rank_names[(size_t)r * RT_NODE_NAME + RT_NODE_NAME - 1] = '\0';
	return 0;
}

void rt__ranks_log_layout(struct trainer *t)
{
	struct json_object *ev, *stage, *replica, *nodes;
	int r, w = t->g->world;

	if (t->g->rank != 0 || !t->metrics)
		return;
	ev = json_object_new_object();
	stage = json_object_new_array_ext(w);
	replica = json_object_new_array_ext(w);
	nodes = json_object_new_array_ext(w);
	if (!ev || !stage || !replica || !nodes) {
		json_object_put(stage);
		json_object_put(replica);
		json_object_put(nodes);
		json_object_put(ev);
		return;
	}
	for (r = 0; r < w; r++) {
		json_object_array_add(stage, json_object_new_int(t->rank_place[2 * r]));
		json_object_array_add(replica, json_object_new_int(t->rank_place[2 * r + 1]));
		json_object_array_add(nodes, json_object_new_string(t->rank_names + (size_t)r * RT_NODE_NAME));
	}
	json_object_object_add(ev, "event", json_object_new_string("layout"));
	json_object_object_add(ev, "stage", stage);
	json_object_object_add(ev, "replica", replica);
	json_object_object_add(ev, "node", nodes);
	dt_json_line(t->metrics, "%s", json_object_to_json_string_ext(ev, JSON_C_TO_STRING_PLAIN));
	json_object_put(ev);
}

/* --- a log window --- */

/* The process's peak resident memory in MiB (Linux reports KiB). */
static double max_rss_mib(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_SELF, &ru) ? 0.0 : (double)ru.ru_maxrss / 1024.0;
}

static void write_ranks(struct trainer *t, int64_t step, int64_t steps)
{
	struct json_object *ev = json_object_new_object();
	int k, r;

	if (!ev)
		return;
	json_object_object_add(ev, "event", json_object_new_string("ranks"));
	json_object_object_add(ev, "step", json_object_new_int64(step));
	json_object_object_add(ev, "steps", json_object_new_int64(steps));
	for (k = 0; k < V_N; k++) {
		struct json_object *a = json_object_new_array_ext(t->g->world);

		for (r = 0; a && r < t->g->world; r++) {
			double v = t->rank_vals[(size_t)r * V_N + (size_t)k];
			char text[32];

			/* six digits: what the step event's means carry */
			snprintf(text, sizeof(text), "%.6g", v);
			json_object_array_add(a, json_object_new_double_s(v, text));
		}
		json_object_object_add(ev, v_names[k], a);
	}
	dt_json_line(t->metrics, "%s", json_object_to_json_string_ext(ev, JSON_C_TO_STRING_PLAIN));
	json_object_put(ev);
}

int rt__ranks_window(struct trainer *t, int64_t step, double window_s, int64_t steps,
		     double tm[6])
{
	double per = steps > 0 ? 1.0 / (double)steps : 0.0, mine[V_N];
	int k, r;

	mine[V_STEP] = window_s * per;
	mine[V_COMPUTE] = t->tm.compute * per;
	mine[V_PIPE] = t->tm.pipe * per;
	mine[V_GRAD] = t->tm.grad * per;
	mine[V_DATA] = t->tm.data * per;
	mine[V_OPTIM] = t->tm.optim * per;
	mine[V_RSS] = max_rss_mib();
	MPI_CHECK(t, MPI_Gather(mine, V_N, MPI_DOUBLE, t->rank_vals, V_N, MPI_DOUBLE, 0,
				MPI_COMM_WORLD));
	memset(tm, 0, 6 * sizeof(*tm));
	if (t->g->rank != 0)
		return 0;
	for (r = 0; r < t->g->world; r++)
		for (k = 0; k < 6; k++)
			tm[k] += t->rank_vals[(size_t)r * V_N + (size_t)k] / (double)t->g->world;
	if (t->metrics)
		write_ranks(t, step, steps);
	return 0;
}
