/*
 * on_device.c - the trainer's side of the device seam (model/device.h):
 * what a stage on a device that is not the host's needs around the one
 * training loop. The passes, the loss, the optimizer and the norms run on
 * the device through its table; MPI, the data reader and checkpoints work
 * on host memory, so each slot has host arrays that the loop copies
 * through (pipeline.c), the gradient buckets are summed in a host copy
 * (grad_sync.c), tied copies are summed on the host (tied.c), and
 * checkpoints read and write host twins of the stage and optimizer, copied
 * before each save and after a resume. On a host device (the CPU) every
 * staging array is the device array itself and nothing here copies.
 *
 * Sections: what the seam carries, set-up, checkpoints.
 */
#include "runtime/train/trainer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* --- what the seam carries --- */

int rt__dev_check(struct trainer *t)
{
	const struct spec *s = t->s;

	if (t->dev->host)
		return 0;
	if (s->parallel.threads && !strcmp(s->parallel.threads, "split"))
		return dt_err_add(t->err, "parallel.threads: \"split\" cuts the CPU's products between threads: not available on the %s device",
				  t->dev->kind), -EINVAL;
	return 0;
}

/* --- set-up --- */

static int dev_alloc(struct trainer *t, void *p, size_t bytes, const char *what)
{
	int rc = rt_dev_alloc(t->dev, bytes ? bytes : 1, what, p, t->err);

	if (rc)
		dt_err_add(t->err, "rank %d: out of device memory for %s", t->g->rank, what);
	return rc;
}

static int host_alloc(struct trainer *t, void *p, size_t bytes, const char *what)
{
	*(void **)p = malloc(bytes ? bytes : 1);
	if (*(void **)p)
		return 0;
	return dt_err_add(t->err, "rank %d: out of memory for %s (%zu bytes)", t->g->rank, what, bytes),
	       -ENOMEM;
}

int rt__dev_slot(struct trainer *t, struct slot *sl)
{
	size_t rows = (size_t)t->max_rows, in = rows * (size_t)t->in * sizeof(float);
	size_t out = rows * (size_t)t->out * sizeof(float);
	size_t labels = rows * (size_t)t->labels * sizeof(int32_t);
	int rc;

	if ((rc = dev_alloc(t, &sl->x, in, "a micro-batch's input")) ||
	    (rc = dev_alloc(t, &sl->dx, in, "a micro-batch's input gradient")) ||
	    (rc = dev_alloc(t, &sl->dy, out, "a micro-batch's output gradient")) ||
	    (rc = dev_alloc(t, &sl->y, labels, "a micro-batch's targets")))
		return rc;
	if (t->dev->host) {
		sl->hx = sl->x;
		sl->hdx = sl->dx;
		sl->hdy = sl->dy;
		sl->hy = sl->y;
		return 0;
	}
	/* what this stage's messages and reads go through: the last stage
	 * sends no output and receives no gradient, the first sends none back */
	if ((rc = host_alloc(t, &sl->hx, in, "a micro-batch's input")) ||
	    (t->stage > 0 && (rc = host_alloc(t, &sl->hdx, in, "a micro-batch's input gradient"))))
		return rc;
	if (t->stage == t->stages - 1)
		return host_alloc(t, &sl->hy, labels, "a micro-batch's targets");
	if ((rc = host_alloc(t, &sl->hdy, out, "a micro-batch's output gradient")))
		return rc;
	return host_alloc(t, &sl->hout, out, "a micro-batch's output");
}

void rt__dev_slot_free(struct trainer *t, struct slot *sl)
{
	if (!t->dev->host) {
		free(sl->hx);
		free(sl->hdx);
		free(sl->hdy);
		free(sl->hy);
		free(sl->hout);
	}
	if (t->dev) {
		rt_dev_free(t->dev, sl->x);
		rt_dev_free(t->dev, sl->dx);
		rt_dev_free(t->dev, sl->dy);
		rt_dev_free(t->dev, sl->y);
	}
}

/* The optimizer's state (made zero on the host by rt_optim_init) moves to
 * the device; the checkpoints' twins, and the gradients' host copy for the
 * replicas' sums. */
int rt__dev_state(struct trainer *t)
{
	size_t n = t->opt.n * sizeof(float), np = t->st.n_params * sizeof(float);
	float *m = NULL, *v = NULL;
	int rc;

	if (t->dev->host)
		return 0;
	if ((rc = dev_alloc(t, &m, n, "the optimizer's state")) ||
	    (t->opt.v && (rc = dev_alloc(t, &v, n, "the optimizer's state")))) {
		rt_dev_free(t->dev, m);
		return rc;
	}
	rt_optim_adopt(&t->opt, m, v);
	t->host_st = t->st;
	t->host_st.params = NULL;
	t->host_st.grads = NULL;
	t->host_st.adopted = true; /* never freed through the twin */
	t->host_opt = t->opt;
	t->host_opt.m = t->host_opt.v = NULL;
	if ((rc = host_alloc(t, &t->host_st.params, np, "the checkpoints' copy of the parameters")) ||
	    (rc = host_alloc(t, &t->host_opt.m, n, "the checkpoints' copy of the optimizer state")) ||
	    (t->opt.v && (rc = host_alloc(t, &t->host_opt.v, n, "the checkpoints' copy of the optimizer state"))))
		return rc;
	/* the twins start as the state does: a resume that loads nothing
	 * puts back what is there */
	memset(t->host_opt.m, 0, n);
	if (t->host_opt.v)
		memset(t->host_opt.v, 0, n);
	rt_dev_get(t->dev, t->host_st.params, t->st.params, np);
	/* the replicas' sums through the host (not the device's own, NCCL;
	 * the sharded optimizer's collectives always) */
	if (t->replicas > 1 && (!t->dev->ops->allreduce || t->sharded))
		rc = host_alloc(t, &t->hgrads, np, "the gradients' host copy");
	return rc;
}

void rt__dev_state_free(struct trainer *t)
{
	float *m = t->opt.m, *v = t->opt.v;

	if (!t->dev || t->dev->host)
		return;
	if (t->opt.adopted) {
		rt_optim_adopt(&t->opt, NULL, NULL);
		rt_dev_free(t->dev, m);
		rt_dev_free(t->dev, v);
	}
	free(t->host_st.params);
	free(t->host_opt.m);
	free(t->host_opt.v);
	free(t->hgrads);
	t->host_st.params = NULL;
	t->host_opt.m = t->host_opt.v = NULL;
	t->hgrads = NULL;
}

/* --- checkpoints --- */

struct rt_stage *rt__ckpt_stage(struct trainer *t)
{
	return t->dev->host ? &t->st : &t->host_st;
}

struct rt_optim *rt__ckpt_optim(struct trainer *t)
{
	return t->dev->host ? &t->opt : &t->host_opt;
}

int rt__dev_to_host(struct trainer *t)
{
	size_t n = t->opt.n * sizeof(float);

	if (t->dev->host)
		return 0;
	/* the twins are also the source of an async save's snapshot: the
	 * last one's copy is over before they change */
	rt_ckpt_wait_snapshot(&t->ck);
	rt_dev_get(t->dev, t->host_st.params, t->st.params, t->st.n_params * sizeof(float));
	rt_dev_get(t->dev, t->host_opt.m, t->opt.m, n);
	if (t->opt.v)
		rt_dev_get(t->dev, t->host_opt.v, t->opt.v, n);
	t->host_opt.step = t->opt.step;
	return rt_dev_sync(t->dev, t->err);
}

int rt__dev_from_host(struct trainer *t)
{
	size_t n = t->opt.n * sizeof(float);

	if (t->dev->host)
		return 0;
	rt_dev_put(t->dev, t->st.params, t->host_st.params, t->st.n_params * sizeof(float));
	rt_dev_put(t->dev, t->opt.m, t->host_opt.m, n);
	if (t->opt.v)
		rt_dev_put(t->dev, t->opt.v, t->host_opt.v, n);
	t->opt.step = t->host_opt.step;
	return rt_dev_sync(t->dev, t->err);
}
