/*
 * liveness.c - whether a running job still makes progress, for
 * `dtrain-submit status` (cli.h): read from the heartbeat file of each
 * rank (base/heartbeat.h), which every rank's watchdog rewrites every
 * second or so.
 */
#include "launcher/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/heartbeat.h"

/* Bound on the ranks read: a status line must not take long. */
#define MAX_RANKS 4096

void launch_liveness_read(const char *run_dir, double now, struct launch_liveness *out)
{
	struct dt_heartbeat *hb = NULL, h0;
	char dir[4200], overdue[sizeof(out->why)] = "";
	double silent_for = 0, overdue_for = 0, newest = 0;
	int r, n, world;

	memset(out, 0, sizeof(*out));
	n = snprintf(dir, sizeof(dir), "%s/heartbeat", run_dir);
	if (n < 0 || (size_t)n >= sizeof(dir) || dt_heartbeat_read(dir, 0, &h0))
		return;
	world = h0.world < MAX_RANKS ? h0.world : MAX_RANKS;
	hb = calloc((size_t)world, sizeof(*hb));
	if (!hb)
		return;
	/* the files of this start of the job step: a rank not started again
	 * yet still has its file of an earlier one */
	for (r = 0; r < world; r++) {
		if (dt_heartbeat_read(dir, r, &hb[r]) || hb[r].world != h0.world)
			hb[r].world = 0; /* none, or of another layout */
		else if (hb[r].start > newest)
			newest = hb[r].start;
	}
	out->known = true;
	out->world = h0.world;
	for (r = 0; r < world; r++) {
		const struct dt_heartbeat *h = &hb[r];
		struct dt_heartbeat ref = { .start = newest };

		if (!h->world || !dt_heartbeat_same_start(h, &ref))
			continue;
		out->read++;
		if (h->step > out->step) {
			out->step = h->step;
			out->step_at = 0;
		}
		if (h->step == out->step && h->stepped > out->step_at)
			out->step_at = h->stepped;
		if (h->since > out->progress_at)
			out->progress_at = h->since;
		/* the rank silent longest is named; else the one most overdue */
		if (dt_heartbeat_silent(h, now)) {
			if (now - h->at > silent_for) {
				silent_for = now - h->at;
				snprintf(out->why, sizeof(out->why), "rank %d on node %s silent for %.0f s (last in step %lld, %s)",
					 r, h->node, silent_for, h->step, dt_phase_name(h->phase));
			}
		} else if (h->bound > 0 && now - h->since - h->bound > overdue_for) {
			overdue_for = now - h->since - h->bound;
			snprintf(overdue, sizeof(overdue), "rank %d on node %s in step %lld (%s) for %.0f s, past the watchdog's %.0f s",
				 r, h->node, h->step, dt_phase_name(h->phase), now - h->since, h->bound);
		}
	}
	out->start = newest;
	out->stalled = silent_for > 0 || overdue_for > 0;
	if (silent_for == 0 && overdue_for > 0)
		snprintf(out->why, sizeof(out->why), "%s", overdue);
	free(hb);
}
