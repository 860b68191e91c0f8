/*
 * shard.c - the sharded optimizer's layout and collectives (see shard.h).
 *
 * Sections: life cycle, the step, queries.
 */
#include "runtime/parallel/shard.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/ckpt.h"

/* --- life cycle --- */

int rt_shard_init(struct rt_shard *sh, const struct rt_stage *st, MPI_Comm data, int replicas,
		  int replica, struct dt_err *err)
{
	size_t n = (size_t)st->n_tensors, nd = n * (size_t)replicas, at = 0;
	int i, r, l;

	memset(sh, 0, sizeof(*sh));
	sh->replicas = replicas;
	sh->replica = replica;
	sh->data = data;
	sh->n_tensors = st->n_tensors;
	sh->rows = calloc(n, sizeof(*sh->rows));
	sh->pieces = calloc(n, sizeof(*sh->pieces));
	sh->counts = calloc(nd, sizeof(int));
	sh->displs = calloc(nd, sizeof(int));
	sh->tensor_first = calloc((size_t)st->n_blocks + 1, sizeof(int));
	sh->req = calloc(n, sizeof(*sh->req));
	sh->started = calloc(n, sizeof(bool));
	if (!sh->rows || !sh->pieces || !sh->counts || !sh->displs || !sh->tensor_first ||
	    !sh->req || !sh->started)
		return dt_err_add(err, "rank of replica %d: out of memory for the optimizer shard's table",
				  replica), -ENOMEM;
	for (i = 0; i < st->n_tensors; i++) {
		const struct rt_tensor *t = &st->tensors[i];
		size_t row = t->n / (size_t)t->shape[0];
		int64_t first, rows;

		if (t->n > (size_t)INT_MAX)
			return dt_err_add(err, "tensor \"%s\": %zu floats, more than one MPI message carries",
					  t->name, t->n), -EINVAL;
		for (r = 0; r < replicas; r++) {
			ckpt_piece_rows(t->shape[0], r, replicas, &first, &rows);
			sh->counts[(size_t)i * (size_t)replicas + (size_t)r] = (int)((size_t)rows * row);
			sh->displs[(size_t)i * (size_t)replicas + (size_t)r] = (int)((size_t)first * row);
			if (r == replica) {
				sh->rows[i] = (struct rt_shard_rows){ first, rows };
				/* the in-place reduce-scatter leaves the sum of
				 * its rows at the tensor's start */
				sh->pieces[i] = (struct rt_optim_piece){ t->offset + (size_t)first * row,
									 (size_t)rows * row, t->offset, at };
				at += (size_t)rows * row;
			}
		}
		sh->req[i] = MPI_REQUEST_NULL;
	}
	sh->floats = at;
	/* tensors come in block order (runtime/model/model.h) */
	for (l = 0, i = 0; l <= st->n_blocks; l++) {
		while (i < st->n_tensors && st->tensors[i].block < st->first_block + l)
			i++;
		sh->tensor_first[l] = i;
	}
	return 0;
}

void rt_shard_free(struct rt_shard *sh)
{
	free(sh->rows);
	free(sh->pieces);
	free(sh->counts);
	free(sh->displs);
	free(sh->tensor_first);
	free(sh->req);
	free(sh->started);
	memset(sh, 0, sizeof(*sh));
}

/* --- the step --- */

static int start_tensor(struct rt_shard *sh, const struct rt_stage *st, float *grads, int i)
{
	const int *counts = sh->counts + (size_t)i * (size_t)sh->replicas;

	sh->started[i] = true;
	return MPI_Ireduce_scatter(MPI_IN_PLACE, grads + st->tensors[i].offset, counts, MPI_FLOAT,
				   MPI_SUM, sh->data, &sh->req[i]);
}

int rt_shard_reduce_block(struct rt_shard *sh, const struct rt_stage *st, float *grads, int l)
{
	int i, flag, rc;

	for (i = sh->tensor_first[l]; i < sh->tensor_first[l + 1]; i++)
		if (!sh->started[i] && (rc = start_tensor(sh, st, grads, i)) != MPI_SUCCESS)
			return rc;
	/* Open MPI progresses non-blocking collectives only inside MPI calls */
	for (i = 0; i < sh->n_tensors; i++)
		if (sh->started[i] && sh->req[i] != MPI_REQUEST_NULL)
			MPI_Test(&sh->req[i], &flag, MPI_STATUS_IGNORE);
	return MPI_SUCCESS;
}

bool rt_shard_block_started(const struct rt_shard *sh, int l)
{
	int i;

	for (i = sh->tensor_first[l]; i < sh->tensor_first[l + 1]; i++)
		if (!sh->started[i])
			return false;
	return true;
}

int rt_shard_reduce_finish(struct rt_shard *sh, const struct rt_stage *st, float *grads)
{
	int i, l, rc;

	/* the order of rt_shard_reduce_block in the backward pass (later
	 * blocks first, a block's tensors in order), which the other replicas
	 * may have followed: collectives start in the same order everywhere
	 * (a replica whose last micro-batch was empty starts them all here) */
	for (l = st->n_blocks - 1; l >= 0; l--)
		for (i = sh->tensor_first[l]; i < sh->tensor_first[l + 1]; i++)
			if (!sh->started[i] && (rc = start_tensor(sh, st, grads, i)) != MPI_SUCCESS)
				return rc;
	rc = MPI_Waitall(sh->n_tensors, sh->req, MPI_STATUSES_IGNORE);
	if (rc != MPI_SUCCESS)
		return rc;
	/* past each tensor's sum, what the collective left: zero for the next
	 * backward (the update zeroes the sum as it reads it) */
	for (i = 0; i < sh->n_tensors; i++) {
		const struct rt_tensor *t = &st->tensors[i];

		sh->started[i] = false;
		memset(grads + t->offset + sh->pieces[i].count, 0,
		       (t->n - sh->pieces[i].count) * sizeof(float));
	}
	return MPI_SUCCESS;
}

int rt_shard_gather(struct rt_shard *sh, const struct rt_stage *st, float *params)
{
	int i, rc;

	for (i = 0; i < sh->n_tensors; i++) {
		size_t at = (size_t)i * (size_t)sh->replicas;

		rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, params + st->tensors[i].offset,
				     sh->counts + at, sh->displs + at, MPI_FLOAT, sh->data, &sh->req[i]);
		if (rc != MPI_SUCCESS)
			return rc;
	}
	return MPI_Waitall(sh->n_tensors, sh->req, MPI_STATUSES_IGNORE);
}

/* --- queries --- */

float *rt_shard_grad(const struct rt_shard *sh, const struct rt_stage *st, int i, size_t *n)
{
	*n = sh->pieces[i].count;
	return st->grads + sh->pieces[i].grad;
}
