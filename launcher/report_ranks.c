/*
 * report_ranks.c - every rank's part in the report (report.h): what the
 * runtime's "layout" event (each rank's stage, replica and node) and its
 * "ranks" events (each rank's seconds per step of a log window, its peak
 * memory) say about the newest start of the ranks; report_ranks_svg.c
 * draws it.
 */
#include "launcher/report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

void launch__report_ranks_free(struct launch__report_ranks *k)
{
	free(k->stage);
	free(k->node);
	free(k->t);
	free(k->rss_mib);
	memset(k, 0, sizeof(*k));
}

static json_object *array_of(json_object *o, const char *key, int n)
{
	json_object *a = NULL;

	if (!json_object_object_get_ex(o, key, &a) || !json_object_is_type(a, json_type_array) ||
	    (int)json_object_array_length(a) != n)
		return NULL;
	return a;
}

int launch__report_ranks_layout(struct launch__report_ranks *k, int start, json_object *o)
{
	json_object *stage = NULL, *replica, *node;
	int n, i;

	if (json_object_object_get_ex(o, "stage", &stage) && json_object_is_type(stage, json_type_array))
		n = (int)json_object_array_length(stage);
	else
		return 0;
	replica = array_of(o, "replica", n);
	node = array_of(o, "node", n);
	launch__report_ranks_free(k);
	if (n <= 0 || !replica || !node)
		return 0;
	k->stage = calloc((size_t)n * 2, sizeof(*k->stage));
	k->node = calloc((size_t)n, sizeof(*k->node));
	k->t = calloc((size_t)n * LAUNCH__T_N, sizeof(*k->t));
	k->rss_mib = calloc((size_t)n, sizeof(*k->rss_mib));
	if (!k->stage || !k->node || !k->t || !k->rss_mib) {
		launch__report_ranks_free(k);
		return -ENOMEM;
	}
	k->replica = k->stage + n;
	k->n = n;
	k->start = start;
	for (i = 0; i < n; i++) {
		const char *name = json_object_get_string(json_object_array_get_idx(node, (size_t)i));

		k->stage[i] = json_object_get_int(json_object_array_get_idx(stage, (size_t)i));
		k->replica[i] = json_object_get_int(json_object_array_get_idx(replica, (size_t)i));
		snprintf(k->node[i], sizeof(k->node[i]), "%s", name ? name : "");
		if (k->stage[i] + 1 > k->stages)
			k->stages = k->stage[i] + 1;
	}
	return 0;
}

void launch__report_ranks_window(struct launch__report_ranks *k, json_object *o)
{
	static const char *const keys[LAUNCH__T_N] = { "step_s", "compute_s", "pipe_wait_s",
						       "grad_wait_s", "data_s", "optim_s" };
	json_object *a[LAUNCH__T_N], *rss, *v;
	long long steps = 1;
	int i, j;

	if (k->n <= 0)
		return;
	for (j = 0; j < LAUNCH__T_N; j++)
		if (!(a[j] = array_of(o, keys[j], k->n)))
			return; /* not this layout's ranks: left out */
	rss = array_of(o, "max_rss_mib", k->n);
	if (json_object_object_get_ex(o, "steps", &v) && json_object_get_int64(v) > 0)
		steps = json_object_get_int64(v);
	/* each rank's mean over the windows, weighted by their steps */
	for (i = 0; i < k->n; i++) {
		for (j = 0; j < LAUNCH__T_N; j++) {
			double x = json_object_get_double(json_object_array_get_idx(a[j], (size_t)i));
			double *m = &k->t[(size_t)i * LAUNCH__T_N + (size_t)j];

			*m = (*m * (double)k->steps + x * (double)steps) / (double)(k->steps + steps);
		}
		if (rss)
			k->rss_mib[i] = fmax(k->rss_mib[i],
					     json_object_get_double(json_object_array_get_idx(rss, (size_t)i)));
	}
	k->steps += steps;
	k->windows++;
}
