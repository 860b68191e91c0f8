/*
 * tied.c - tensors that are one parameter (model.h, struct rt_tie; GPT's
 * token embedding and its head): every step, after the replicas' gradients
 * are summed, each copy gets copy 0's gradient + copy 1's, the same sum in
 * the same order wherever the copies live (one stage, or the first and the
 * last stage of a replica's pipeline, which swap theirs: Megatron's
 * embedding group). Equal at init and given equal gradients, the copies
 * stay bitwise equal through any elementwise optimizer. The gradient norm
 * counts the parameter once: rt__ties_dup_sumsq() is what to take off.
 */
#include "runtime/train/trainer.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define TAG_TIES 2000000

struct tie_here {
	int tensor[2]; /* the copies' indices in the stage's tensors, -1: not here */
	int peer;      /* pipe_comm rank of the stage with the other copy; -1: both here */
	float *buf;    /* [n]: the peer's gradient */
	float *mine;   /* host [n]: this stage's copy's gradient, on a device
			* that is not the host's (else NULL) */
	float *other;  /* host [n]: the same of copy 1 when both are here */
	size_t n;
	int index;     /* the model's index of the tie: its message tag, alike on both stages */
};

struct rt_ties {
	int n;
	struct tie_here c[RT_MAX_TIES];
};

/* the stage that owns global block b */
static int stage_of(const struct trainer *t, int b)
{
	int k;

	for (k = 0; k < t->stages - 1 && b >= t->first[k + 1]; k++)
		;
	return k;
}

static int tensor_here(const struct rt_stage *st, int block, const char *name)
{
	int i;

	for (i = 0; i < st->n_tensors; i++)
		if (st->tensors[i].block == block && !strcmp(st->tensors[i].name, name))
			return i;
	return -1;
}

void rt__ties_free(struct trainer *t)
{
	int i;

	if (!t->ties)
		return;
	for (i = 0; i < t->ties->n; i++) {
		free(t->ties->c[i].buf);
		free(t->ties->c[i].mine);
		free(t->ties->c[i].other);
	}
	free(t->ties);
	t->ties = NULL;
}

int rt__ties_init(struct trainer *t)
{
	struct rt_tie tie[RT_MAX_TIES];
	int n = rt_model_ties(t->s, tie), i, j;

	if (n == 0)
		return 0;
	t->ties = calloc(1, sizeof(*t->ties));
	if (!t->ties)
		return dt_err_add(t->err, "rank %d: out of memory for the tied tensors", t->g->rank), -ENOMEM;
	for (i = 0; i < n; i++) {
		struct tie_here *c = &t->ties->c[t->ties->n];
		size_t len[2] = { 0, 0 };

		for (j = 0; j < 2; j++) {
			c->tensor[j] = tensor_here(&t->st, tie[i].block[j], tie[i].name[j]);
			if (c->tensor[j] >= 0)
				len[j] = t->st.tensors[c->tensor[j]].n;
		}
		if (c->tensor[0] < 0 && c->tensor[1] < 0)
			continue; /* neither copy on this stage */
		c->peer = -1;
		c->index = i;
		c->n = len[0] ? len[0] : len[1];
		/* a sharded optimizer cuts both copies by rows alike */
		if (c->tensor[0] >= 0 && c->tensor[1] >= 0 &&
		    (len[0] != len[1] || t->st.tensors[c->tensor[0]].shape[0] !=
					     t->st.tensors[c->tensor[1]].shape[0]))
			return dt_err_add(t->err, "model: tied tensors \"%s\" and \"%s\" differ in shape",
					  tie[i].name[0], tie[i].name[1]), -EINVAL;
		if (c->tensor[0] < 0 || c->tensor[1] < 0) {
			c->peer = stage_of(t, tie[i].block[c->tensor[0] < 0 ? 0 : 1]);
			c->buf = malloc(c->n * sizeof(float));
		}
		/* host copies: the gradient a peer stage swaps, or a sharded
		 * optimizer's rows (else the sum is the device's own add) */
		if (!t->dev->host && (c->peer >= 0 || t->sharded)) {
			c->mine = malloc(c->n * sizeof(float));
			if (c->peer < 0)
				c->other = malloc(c->n * sizeof(float));
		}
		t->ties->n++;
		if ((c->peer >= 0 && !c->buf) ||
		    (!t->dev->host && (c->peer >= 0 || t->sharded) && (!c->mine || (c->peer < 0 && !c->other))))
			return dt_err_add(t->err, "rank %d: out of memory for the gradient of tied tensor \"%s\" (%zu floats)",
					  t->g->rank, tie[i].name[0], c->n), -ENOMEM;
	}
	return 0;
}

float *rt__grad_of(const struct trainer *t, int i, size_t *n)
{
	if (t->sharded)
		return rt_shard_grad(&t->shard, &t->st, i, n);
	*n = t->st.tensors[i].n;
	return t->st.grads + t->st.tensors[i].offset;
}

/* With a sharded optimizer each replica holds the sum of its rows of each
 * copy (rt__grad_of): the same rows of both (same shape, cut alike), which
 * it swaps with the same replica of the other stage. */
int rt__ties_sum(struct trainer *t)
{
	int i;
	size_t k, n, n1;

	for (i = 0; t->ties && i < t->ties->n; i++) {
		struct tie_here *c = &t->ties->c[i];
		int mine = c->tensor[0] >= 0 ? 0 : 1;
		float *dg = rt__grad_of(t, c->tensor[mine], &n), *g;

		if (c->peer < 0 && !t->sharded) { /* both in the stage's gradients: on its device */
			float *dg1 = rt__grad_of(t, c->tensor[1], &n1);

			t->dev->ops->add(t->dev, dg, dg1, n); /* dg + dg1, as dg1 + dg: one rounding */
			t->dev->ops->copy(t->dev, dg1, dg, n * sizeof(float));
			continue;
		}
		g = rt_dev_staging(t->dev, dg, c->mine); /* on the host */
		rt_dev_get(t->dev, g, dg, n * sizeof(float));
		if (c->peer < 0) { /* a sharded optimizer's rows: host memory */
			float *dg1 = rt__grad_of(t, c->tensor[1], &n1);
			float *g1 = rt_dev_staging(t->dev, dg1, c->other);

			rt_dev_get(t->dev, g1, dg1, n * sizeof(float));
			for (k = 0; k < n; k++)
				g1[k] = g[k] = g[k] + g1[k];
			rt_dev_put(t->dev, dg, g, n * sizeof(float));
			rt_dev_put(t->dev, dg1, g1, n * sizeof(float));
			continue;
		}
		if (n > (size_t)INT_MAX)
			return dt_err_add(t->err, "rank %d: a tied tensor of %zu floats is more than one message carries",
					  t->g->rank, n), -EINVAL;
		MPI_CHECK(t, MPI_Sendrecv(g, (int)n, MPI_FLOAT, c->peer, TAG_TIES + c->index, c->buf,
					  (int)n, MPI_FLOAT, c->peer, TAG_TIES + c->index, t->g->pipe_comm,
					  MPI_STATUS_IGNORE));
		if (mine == 0)
			for (k = 0; k < n; k++)
				g[k] = g[k] + c->buf[k];
		else
			for (k = 0; k < n; k++)
				g[k] = c->buf[k] + g[k];
		rt_dev_put(t->dev, dg, g, n * sizeof(float));
	}
	return 0;
}

double rt__ties_dup_sumsq(const struct trainer *t)
{
	double s = 0.0;
	int i;

	for (i = 0; t->ties && i < t->ties->n; i++) {
		const struct tie_here *c = &t->ties->c[i];
		const float *g;
		size_t n;

		if (c->tensor[1] < 0)
			continue;
		g = rt__grad_of(t, c->tensor[1], &n); /* sets n: not in the call's arguments */
		s += t->dev->ops->sumsq(t->dev, g, n);
	}
	return s;
}
