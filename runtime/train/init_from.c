/*
 * init_from.c - checkpoint.init_from: a new run that starts from another
 * run's model (fine-tuning), or from weights `dtrain-ckpt import` made.
 *
 * Only when the run has no checkpoint of its own (a requeued fine-tune
 * continues itself from its own checkpoints: checkpointing.c). The
 * source's newest valid checkpoint is verified, then each stage's first
 * replica reads its tensors by name, whatever layout the source was
 * written on, and gives them to its replicas; the optimizer starts fresh,
 * at step 0, on the new run's data. A tensor the source lacks, or holds
 * with another shape, is refused by name unless checkpoint.init_fresh
 * lists it: it then keeps the model's own initialisation (a new head).
 *
 * Sections: the plan, the load.
 */
#include "runtime/train/ckpt_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/json.h"
#include "runtime/world/agree.h"

/* --- the plan --- */

static bool kept_fresh(const struct spec *s, const char *name)
{
	for (size_t i = 0; i < s->checkpoint.init_fresh.n; i++)
		if (!strcmp(s->checkpoint.init_fresh.v[i], name))
			return true;
	return false;
}

static const struct ckpt_tensor *listed(const struct ckpt_manifest *m, const char *name)
{
	for (int i = 0; i < m->n_tensors; i++)
		if (!strcmp(m->tensors[i].name, name))
			return &m->tensors[i];
	return NULL;
}

static void shape_str(const struct ckpt_tensor *t, char *out, size_t size)
{
	size_t at = 0;

	out[0] = 0;
	for (int d = 0; d < t->ndim && at < size; d++)
		at += (size_t)snprintf(out + at, size - at, "[%lld]", (long long)t->shape[d]);
}

/* Which of this stage's tensors come from the source (take[i]); the rest
 * are kept fresh, or refused. Every rank alone; the caller agrees. */
static int plan(const struct rt_ckpt *c, const struct ckpt_manifest *m, const char *path,
		bool *take, int *n_fresh, struct dt_err *e)
{
	const struct spec *s = c->s;
	int rc = 0;

	*n_fresh = 0;
	if (strcmp(m->meta.model_type, s->model.type))
		return dt_err_add(e, "checkpoint.init_from: %s holds a model of type \"%s\", this run's is \"%s\"",
				  path, m->meta.model_type, s->model.type), -EINVAL;
	for (int i = 0; i < c->n_stage_tensors; i++) {
		const struct ckpt_tensor *t = &c->stage_tensors[i], *src = listed(m, t->name);
		bool same = src && src->ndim == t->ndim;
		char a[96], b[96];

		for (int d = 0; same && d < t->ndim; d++)
			same = src->shape[d] == t->shape[d];
		take[i] = same;
		if (same)
			continue;
		if (kept_fresh(s, t->name)) {
			(*n_fresh)++;
			continue;
		}
		shape_str(t, a, sizeof(a));
		if (src)
			shape_str(src, b, sizeof(b));
		src ? dt_err_add(e, "checkpoint.init_from: %s: tensor %s is %s there, %s in this model (hint: list it in checkpoint.init_fresh to keep this model's own initialisation)",
				      path, t->name, b, a)
			 : dt_err_add(e, "checkpoint.init_from: %s has no tensor %s (hint: list it in checkpoint.init_fresh to keep this model's own initialisation)",
				      path, t->name);
		rc = -EINVAL;
	}
	return rc;
}

/* checkpoint.init_fresh's names must be this model's (rank 0 has the table) */
static int fresh_names(const struct rt_ckpt *c, struct dt_err *e)
{
	for (size_t i = 0; c->model_tensors && i < c->s->checkpoint.init_fresh.n; i++) {
		const char *name = c->s->checkpoint.init_fresh.v[i];
		int k = 0;

		while (k < c->n_model_tensors && strcmp(c->model_tensors[k].name, name))
			k++;
		if (k == c->n_model_tensors)
			return dt_err_add(e, "checkpoint.init_fresh: this model has no tensor \"%s\" (hint: dtrain-ckpt inspect lists a checkpoint's)",
					  name), -EINVAL;
	}
	return 0;
}

/* --- the load --- */

/* Replica 0 of each stage reads the tensors it takes; then broadcasts. */
static int load(struct rt_ckpt *c, const char *path, const bool *take, struct dt_err *err)
{
	struct ckpt_reader r = { .open_stage = -1, .file = -1 };
	struct dt_err e = { 0 };
	int rc = 0, mrc;

	if (c->g->coord[RT_DIM_DATA] == 0) {
		rc = ckpt_reader_open(&r, path, &e);
		for (int i = 0; !rc && i < c->n_stage_tensors; i++)
			if (take[i])
				rc = ckpt_read_tensor(&r, &c->stage_tensors[i],
						      c->st->params + c->stage_tensors[i].offset, NULL, &e);
		ckpt_reader_close(&r);
	}
	rc = rt__ckpt_agreed(rc, &e, err);
	if (rc)
		return rc;
	mrc = rt_dp_bcast(c->dp, c->st->params, c->st->n_params);
	return mrc == MPI_SUCCESS ? 0 : rt_mpi_error(err, "MPI_Bcast of the initial model", mrc);
}

int rt__ckpt_init_from(struct rt_ckpt *c, struct ckpt_manifest *m, struct dt_err *err)
{
	struct dt_err e = { 0 };
	char path[4200] = "";
	bool found = false, *take = calloc((size_t)(c->n_stage_tensors ? c->n_stage_tensors : 1), 1);
	double t0 = dt_mono_s();
	int n_fresh = 0, total = 0, rc;

	if (!take)
		return dt_err_add(err, "rank %d: out of memory", c->g->rank), -ENOMEM;
	rc = rt__ckpt_named_point(c, c->s->checkpoint.init_from, "checkpoint.init_from", m, path,
				  sizeof(path), &found, err);
	if (!rc) {
		rc = fresh_names(c, &e);
		if (!rc)
			rc = plan(c, m, path, take, &n_fresh, &e);
		rc = rt__ckpt_agreed(rc, &e, err);
	}
	if (!rc)
		rc = load(c, path, take, err);
	if (!rc && MPI_Allreduce(MPI_IN_PLACE, &n_fresh, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
		rc = (dt_err_add(err, "rank %d: MPI_Allreduce failed", c->g->rank), -EIO);
	free(take);
	if (rc)
		return rc;
	total = c->n_model_tensors;
	rt__ckpt_say(c, "starting from the model of %s (step %lld of its run, written on data %d x pipeline %d): %d tensors taken, %d kept fresh; optimizer fresh, step 0 (loaded in %.2f s)",
		     path, (long long)m->meta.step, m->meta.data, m->meta.pipeline,
		     total - n_fresh / (c->g->size[RT_DIM_DATA] ? c->g->size[RT_DIM_DATA] : 1),
		     n_fresh / (c->g->size[RT_DIM_DATA] ? c->g->size[RT_DIM_DATA] : 1), dt_mono_s() - t0);
	dt_json_line(c->metrics, "{\"event\":\"init_from\",\"path\":\"%s\",\"from_step\":%lld,\"load_s\":%.3f}",
		     path, (long long)m->meta.step, dt_mono_s() - t0);
	return 0;
}
