/*
 * init_from.c - checkpoint.init_from: a new run that starts from another
 * run's model (fine-tuning), or from weights `dtrain-ckpt import` made.
 *
 * Only when the run has no checkpoint of its own (a requeued fine-tune
 * continues itself from its own checkpoints: checkpointing.c). The
 * source's newest valid checkpoint is verified, then each stage's first
 * replica reads its tensors by name, whatever layout the source was
 * written on, and gives them to its replicas; the optimizer starts fresh,
 * at step 0, on the new run's data. The model's config must be the
 * source's but for a GPT's context and vocabulary (its heads, say, do not
 * show in any shape). A tensor the source lacks, or holds with another
 * shape, is refused by name unless checkpoint.init_fresh lists it: a
 * tensor listed there keeps the model's own initialisation, whatever the
 * source holds (a new head). A width that differs (a GPT's embd, an
 * MLP's hidden) is said once, as the config key, not tensor by tensor;
 * another program's weights (a Hugging Face directory) are refused with
 * the hint to `dtrain-ckpt import` them.
 * One shape change is taken as nanoGPT's crop_block_size takes it: a GPT
 * with a shorter context than its source takes the first rows of the
 * source's position table (transformer.wpe.weight).
 *
 * The same plan runs in `dtrain-run --check-data` (rt_check_init_from),
 * so that dtrain-submit refuses a spec whose init_from does not fit before
 * the job is queued.
 *
 * Sections: the plan, the check, the load.
 */
#include "runtime/train/ckpt_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/json.h"
#include "runtime/train/train.h"
#include "runtime/world/agree.h"

/* --- the plan --- */

enum take { KEEP_FRESH, TAKE_WHOLE, TAKE_ROWS }; /* TAKE_ROWS: the first rows (a crop) */

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

/* a GPT's position table, longer in the source: its first rows */
static bool croppable(const struct ckpt_tensor *t, const struct ckpt_tensor *src)
{
	return !strcmp(t->name, "transformer.wpe.weight") && t->ndim == 2 && src->ndim == 2 &&
	       src->shape[1] == t->shape[1] && src->shape[0] > t->shape[0];
}

/* A key of the model's config that differs from the source's, said once.
 * A width (a GPT's embd, an MLP's hidden) reshapes every block's tensors,
 * which init_fresh cannot take (it would keep the whole model fresh). */
static void say_differs(const char *path, const char *key, struct json_object *theirs,
			struct json_object *mine, bool width, struct dt_err *e)
{
	const char *t = theirs ? json_object_to_json_string(theirs) : "(none)";

	if (width)
		dt_err_add(e, "checkpoint.init_from: %s: model.%s differs: checkpoint %s, spec %s (every block's tensors have another shape; hint: set model.%s to %s to start from it)",
			   path, key, t, json_object_to_json_string(mine), key, t);
	else
		dt_err_add(e, "checkpoint.init_from: %s: its model has model.%s %s, this one %s", path,
			   key, t, json_object_to_json_string(mine));
}

/* The model's config against the source's, key by key: a tensor's shape
 * does not tell everything (the heads of a GPT, the activation of an MLP,
 * the layers of a model cut short). The keys that only size some tensors
 * are left to the tensors, which init_fresh or the crop may take: a GPT's
 * context and vocab_size, an MLP's inputs and outputs. */
static int same_config(const struct spec *s, const struct ckpt_manifest *m, const char *path,
		       struct dt_err *e)
{
	const struct rt_model_ops *ops = rt_model_find(s, e);
	struct json_object *theirs = json_tokener_parse(m->meta.model_config), *ours = NULL, *v;
	struct dt_buf cfg = { 0 };
	int rc = !ops || ops->config(s, &cfg) ? -ENOMEM : 0;

	if (!rc)
		ours = json_tokener_parse(cfg.p);
	if (!rc && (!ours || !theirs))
		rc = (dt_err_add(e, "checkpoint.init_from: %s: its model config does not parse", path), -EINVAL);
	if (!rc) {
		json_object_object_foreach(ours, key, mine) {
			static const char *const sizes[] = { "context", "vocab_size", "inputs", "outputs" };
			size_t k = 0;

			while (k < sizeof(sizes) / sizeof(sizes[0]) && strcmp(key, sizes[k]))
				k++;
			if (k < sizeof(sizes) / sizeof(sizes[0]))
				continue;
			v = NULL;
			if (!json_object_object_get_ex(theirs, key, &v) || !json_object_equal(mine, v)) {
				say_differs(path, key, v, mine, !strcmp(key, "embd") || !strcmp(key, "hidden"), e);
				rc = -EINVAL;
			}
		}
	}
	json_object_put(theirs);
	json_object_put(ours);
	dt_buf_free(&cfg);
	return rc;
}

/* How each of the tensors t [n] comes from the source (take[i]), or is
 * refused; *n_fresh, *n_rows count the kept and cropped ones. */
static int plan(const struct spec *s, const struct ckpt_tensor *t, int n,
		const struct ckpt_manifest *m, const char *path, unsigned char *take, int *n_fresh,
		int *n_rows, struct dt_err *e)
{
	int rc = 0;

	*n_fresh = *n_rows = 0;
	if (strcmp(m->meta.model_type, s->model.type))
		return dt_err_add(e, "checkpoint.init_from: %s holds a model of type \"%s\", this run's is \"%s\"",
				  path, m->meta.model_type, s->model.type), -EINVAL;
	if ((rc = same_config(s, m, path, e)))
		return rc;
	for (int i = 0; i < n; i++) {
		const struct ckpt_tensor *src = listed(m, t[i].name);
		bool same = src && src->ndim == t[i].ndim;
		char a[96], b[96];

		for (int d = 0; same && d < t[i].ndim; d++)
			same = src->shape[d] == t[i].shape[d];
		take[i] = kept_fresh(s, t[i].name) ? KEEP_FRESH : same ? TAKE_WHOLE
			  : src && croppable(&t[i], src) ? TAKE_ROWS : 255;
		*n_fresh += take[i] == KEEP_FRESH;
		*n_rows += take[i] == TAKE_ROWS;
		if (take[i] != 255)
			continue;
		shape_str(&t[i], a, sizeof(a));
		if (src)
			shape_str(src, b, sizeof(b));
		src ? dt_err_add(e, "checkpoint.init_from: %s: tensor %s is %s there, %s in this model (hint: list it in checkpoint.init_fresh to keep this model's own initialisation)",
				 path, t[i].name, b, a)
		    : dt_err_add(e, "checkpoint.init_from: %s has no tensor %s (hint: list it in checkpoint.init_fresh to keep this model's own initialisation)",
				 path, t[i].name);
		rc = -EINVAL;
	}
	return rc;
}

/* checkpoint.init_fresh's names must be the model's (t [n], the whole model's) */
static int fresh_names(const struct spec *s, const struct ckpt_tensor *t, int n, struct dt_err *e)
{
	for (size_t i = 0; i < s->checkpoint.init_fresh.n; i++) {
		const char *name = s->checkpoint.init_fresh.v[i];
		int k = 0;

		while (k < n && strcmp(t[k].name, name))
			k++;
		if (k == n)
			return dt_err_add(e, "checkpoint.init_fresh: this model has no tensor \"%s\" (hint: dtrain-ckpt inspect lists a checkpoint's)",
					  name), -EINVAL;
	}
	return 0;
}

/* Another program's weights where a checkpoint should be: a Hugging Face
 * directory (config.json, model.safetensors; no MANIFEST.json), a
 * .safetensors or an llm.c .bin file. `dtrain-ckpt import` makes a
 * checkpoint of them. */
static bool foreign_weights(const char *path)
{
	static const char *const names[] = { "model.safetensors", "config.json", "pytorch_model.bin" };
	char p[4200];
	size_t n = strlen(path);
	struct stat st;

	if (stat(path, &st))
		return false;
	if (!S_ISDIR(st.st_mode))
		return (n > 12 && !strcmp(path + n - 12, ".safetensors")) ||
		       (n > 4 && !strcmp(path + n - 4, ".bin"));
	if (snprintf(p, sizeof(p), "%s/%s", path, CKPT_MANIFEST) >= (int)sizeof(p) || !access(p, F_OK))
		return false;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (snprintf(p, sizeof(p), "%s/%s", path, names[i]) < (int)sizeof(p) && !access(p, F_OK))
			return true;
	return false;
}

static int say_import(const char *path, struct dt_err *e)
{
	return dt_err_add(e, "checkpoint.init_from: %s: another program's weights (Hugging Face or llm.c), not a dtrain checkpoint (hint: make one with `dtrain-ckpt import %s DIR`, then set checkpoint.init_from to DIR)",
			  path, path), -EINVAL;
}

/* --- the check --- */

int rt_check_init_from(const struct spec *s, struct dt_err *err)
{
	struct ckpt_manifest *m = NULL;
	struct ckpt_tensor *t = NULL;
	struct dt_err warn = { 0 };
	unsigned char *take = NULL;
	char path[4200];
	bool newest;
	int n = 0, n_fresh, n_rows, rc;

	if (!s->checkpoint.init_from)
		return 0;
	if (foreign_weights(s->checkpoint.init_from))
		return say_import(s->checkpoint.init_from, err);
	rc = ckpt_resolve(s->checkpoint.init_from, path, sizeof(path), &newest, &warn, err);
	if (!rc && !(m = malloc(sizeof(*m))))
		rc = -ENOMEM;
	if (!rc)
		rc = ckpt_manifest_read(path, m, err);
	if (rc && rc != -ENOMEM)
		dt_err_add(err, "checkpoint.init_from: %s: not a checkpoint dtrain can start from",
			   s->checkpoint.init_from);
	if (!rc)
		rc = rt_ckpt_model_table(s, &t, &n, err);
	if (!rc && !(take = calloc((size_t)(n ? n : 1), 1)))
		rc = -ENOMEM;
	if (!rc)
		rc = fresh_names(s, t, n, err);
	if (!rc)
		rc = plan(s, t, n, m, path, take, &n_fresh, &n_rows, err);
	free(take);
	free(t);
	free(m);
	return rc == -EINVAL || rc == -ENOMEM ? rc : rc ? -ENOENT : 0;
}

/* --- the load --- */

/* Replica 0 of each stage reads the tensors it takes; then broadcasts. */
static int load(struct rt_ckpt *c, const char *path, const struct ckpt_manifest *m,
		const unsigned char *take, struct dt_err *err)
{
	struct ckpt_reader r = { .open_stage = -1, .file = -1 };
	struct dt_err e = { 0 };
	int rc = 0, mrc;

	if (c->g->coord[RT_DIM_DATA] == 0) {
		rc = ckpt_reader_open(&r, path, &e);
		for (int i = 0; !rc && i < c->n_stage_tensors; i++) {
			const struct ckpt_tensor *t = &c->stage_tensors[i];

			if (take[i] == TAKE_WHOLE)
				rc = ckpt_read_tensor(&r, t, c->st->params + t->offset, NULL, &e);
			else if (take[i] == TAKE_ROWS)
				rc = ckpt_read_rows(&r, listed(m, t->name), -1, 0, t->shape[0],
						    c->st->params + t->offset, &e);
		}
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
	char path[4200] = "", *quoted;
	unsigned char *take = calloc((size_t)(c->n_stage_tensors ? c->n_stage_tensors : 1), 1);
	bool found = false;
	double t0 = dt_mono_s();
	int counts[2] = { 0, 0 }, replicas = c->g->size[RT_DIM_DATA], rc;

	if (!take)
		return dt_err_add(err, "rank %d: out of memory", c->g->rank), -ENOMEM;
	/* another program's weights first, as rt_check_init_from does: the
	 * search for a checkpoint there would only say that there is none;
	 * rank 0 looks, every rank agrees */
	rc = c->g->rank == 0 && foreign_weights(c->s->checkpoint.init_from) ?
		     say_import(c->s->checkpoint.init_from, &e) : 0;
	rc = rt__ckpt_agreed(rc, &e, err);
	if (!rc)
		rc = rt__ckpt_named_point(c, c->s->checkpoint.init_from, "checkpoint.init_from", m,
					  path, sizeof(path), &found, err);
	if (!rc) {
		rc = c->model_tensors ? fresh_names(c->s, c->model_tensors, c->n_model_tensors, &e) : 0;
		if (!rc)
			rc = plan(c->s, c->stage_tensors, c->n_stage_tensors, m, path, take, &counts[0],
				  &counts[1], &e);
		rc = rt__ckpt_agreed(rc, &e, err);
	}
	if (!rc)
		rc = load(c, path, m, take, err);
	if (!rc && MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
		rc = (dt_err_add(err, "rank %d: MPI_Allreduce failed", c->g->rank), -EIO);
	free(take);
	if (rc)
		return rc;
	rt__ckpt_say(c, "starting from the model of %s (step %lld of its run, written on data %d x pipeline %d): %d tensors taken%s, %d kept fresh; optimizer fresh, step 0 (loaded in %.2f s)",
		     path, (long long)m->meta.step, m->meta.data, m->meta.pipeline,
		     c->n_model_tensors - counts[0] / replicas,
		     counts[1] ? " (the position table cropped to model.context)" : "",
		     counts[0] / replicas, dt_mono_s() - t0);
	quoted = dt_json_quote(path);
	dt_json_line(c->metrics, "{\"event\":\"init_from\",\"path\":%s,\"from_step\":%lld,\"load_s\":%.3f}",
		     dt_json_or_null(quoted), (long long)m->meta.step, dt_mono_s() - t0);
	free(quoted);
	return 0;
}
