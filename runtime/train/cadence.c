/*
 * cadence.c - checkpoint.every_steps "auto" (cadence.h): the interval by
 * Young/Daly's formula, and the trainer's side: a first save at the tenth
 * step of each start measures what a save costs; at the step after each
 * save (its stall whole by then) the steps to the next, decided alike on
 * every rank from values they agree on (one allreduce), printed when they
 * change by more than a tenth.
 *
 * Sections: the formula, the trainer's side.
 */
#include "runtime/train/cadence.h"
#include "runtime/train/trainer.h"

#include "base/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* --- the formula --- */

double rt_cadence_interval(double c_s, double m_s, double step_s, const char **why)
{
	double t = sqrt(2.0 * c_s * m_s);

	*why = "formula";
	if (t > m_s) {
		t = m_s;
		*why = "at most M";
	}
	if (t < c_s) {
		t = c_s;
		*why = "at least a save's cost";
	}
	if (t < step_s) {
		t = step_s;
		*why = "at least a step";
	}
	return t;
}

double rt_cadence_mtbi(double m_site, int k, double run_s)
{
	return (m_site + (run_s > 0 ? run_s : 0)) / (1.0 + (k > 0 ? k : 0));
}

/* --- the trainer's side --- */

/* A number from the environment (the batch script's), or dflt. */
static double env_num(const char *name, double dflt)
{
	const char *v = getenv(name);
	char *end;
	double x;

	if (!v || !*v)
		return dflt;
	x = strtod(v, &end);
	return *end || !isfinite(x) ? dflt : x;
}

void rt__cadence_init(struct trainer *t, int64_t start_step)
{
	struct rt_cadence *k = &t->cad;

	k->on = t->s->checkpoint.every_steps == SPEC_AUTO;
	k->interruptions = (int)env_num("DTRAIN_INTERRUPTIONS", 0);
	k->m_s = rt_cadence_mtbi(t->s->checkpoint.mtbi_seconds, k->interruptions,
				 env_num("DTRAIN_RUN_SECONDS", 0));
	k->every = 0;
	k->next = -1;
	k->pending = false;
	k->first = start_step + 10;
	k->t0 = -1; /* the first window starts after the first step */
}

/* The steps between saves from k's values (the same on every rank), the
 * next save counted from the one at step `saved`. */
static void choose(struct trainer *t, int64_t saved)
{
	struct rt_cadence *k = &t->cad;
	const char *why;
	double sec = rt_cadence_interval(k->c_s, k->m_s, k->step_s, &why);
	int64_t every = (int64_t)fmax(1.0, floor(sec / fmax(k->step_s, 1e-9) + 0.5));

	if (t->g->rank == 0 && (!k->every || fabs((double)(every - k->every)) > 0.1 * (double)k->every)) {
		printf("dtrain-run: checkpoint cadence: every %lld steps (%.3g s, %s): sqrt(2 C M) with "
		       "C %.3g s (the saves' stall, the most of any rank), M %.4g s "
		       "(checkpoint.mtbi_seconds %.4g; this run interrupted %d times so far); %.3g s "
		       "a step\n", (long long)every, sec, why, k->c_s, k->m_s,
		       t->s->checkpoint.mtbi_seconds, k->interruptions, k->step_s);
		fflush(stdout);
		dt_json_line(t->metrics, "{\"event\":\"cadence\",\"step\":%lld,\"every_steps\":%lld,"
			     "\"interval_s\":%.6g,\"bound\":\"%s\",\"cost_s\":%.6g,"
			     "\"mtbi_s\":%.6g,\"step_s\":%.6g,\"unix_time\":%.3f}", (long long)saved,
			     (long long)every, sec, why, k->c_s, k->m_s, k->step_s, dt_wall_s());
	}
	/* a stop at the time-limit or preemption warning saves at once, whole:
	 * its lead must cover the last save's whole time */
	if (t->g->rank == 0 && t->ck.t_done > t->ck.t_start &&
	    t->ck.t_done - t->ck.t_start > (double)t->s->preemption.lead_seconds && !k->warned) {
		fprintf(stderr, "dtrain-run: warning: a save took %.3g s, more than "
			"preemption.lead_seconds (%ld s): a stop at the time-limit warning may not end "
			"its save in time (hint: raise preemption.lead_seconds)\n",
			t->ck.t_done - t->ck.t_start, t->s->preemption.lead_seconds);
		k->warned = true;
	}
	k->every = every;
	k->next = saved + every;
}

/* Every rank's seconds a step (its window: the decision before to the last
 * save), cost (this rank's last save's whole stall) and M, the most of any
 * rank, into k: the same on every rank. */
static int agree(struct trainer *t, double cost)
{
	struct rt_cadence *k = &t->cad;
	double v[3] = { (k->t_save - k->t0) / (double)(k->saved_at > k->step0 ? k->saved_at - k->step0 : 1),
			cost, k->m_s };

	if (t->g->world > 1)
		MPI_CHECK(t, MPI_Allreduce(MPI_IN_PLACE, v, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
	/* smoothed (a weight of 0.3 for the newest), so that one noisy
	 * window does not move the interval */
	k->step_s = k->step_s > 0 ? 0.7 * k->step_s + 0.3 * v[0] : v[0];
	k->c_s = k->every ? 0.7 * k->c_s + 0.3 * v[1] : v[1];
	k->m_s = v[2];
	return 0;
}

int rt__cadence_due(struct trainer *t, int64_t step)
{
	struct rt_cadence *k = &t->cad;
	double now = dt_mono_s();
	int rc;

	if (!k->on)
		return 0;
	if (k->t0 < 0) {
		k->t0 = now;
		k->step0 = step;
	}
	/* the step after a save: an async save's snapshot was waited for
	 * during it, so that save's stall is whole now */
	if (k->pending) {
		k->pending = false;
		rc = agree(t, t->ck.stall_s);
		if (rc)
			return rc;
		choose(t, k->saved_at);
		k->t0 = now;
		k->step0 = step;
	}
	/* the first save at the tenth step of a start: it measures C */
	if (!k->every && k->next < 0 && step >= k->first) {
		k->next = step;
		if (t->g->rank == 0) {
			printf("dtrain-run: checkpoint cadence: every_steps \"auto\": a save now, at "
			       "step %lld, measures what one costs\n", (long long)step);
			fflush(stdout);
		}
	}
	if (k->next < 0 || step < k->next)
		return 0;
	k->t_save = now;
	return 1;
}

void rt__cadence_saved(struct trainer *t, int64_t step)
{
	struct rt_cadence *k = &t->cad;

	if (!k->on)
		return;
	k->saved_at = step;
	k->next = -1;
	k->pending = true;
}
