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

/* Each tensor cut in chunks of RT_SHARD_CHUNK_FLOATS, each replica's part
 * of a chunk the overlap of its rows with it (in replica order, as the
 * reduce-scatter splits its buffer). 0 or -ENOMEM. */
static int make_chunks(struct rt_shard *sh, const struct rt_stage *st)
{
	size_t d = (size_t)sh->replicas, total = 0;
	int i, k = 0, r;

	for (i = 0; i < sh->n_tensors; i++)
		total += (st->tensors[i].n + RT_SHARD_CHUNK_FLOATS - 1) / RT_SHARD_CHUNK_FLOATS;
	sh->chunks = calloc(total ? total : 1, sizeof(*sh->chunks));
	sh->chunk_counts = calloc(total ? total * d : 1, sizeof(int));
	if (!sh->chunks || !sh->chunk_counts)
		return -ENOMEM;
	for (i = 0; i < sh->n_tensors; i++) {
		size_t n = st->tensors[i].n, a, to = 0;

		sh->tensor_chunk[i] = k;
		for (a = 0; a < n; a += RT_SHARD_CHUNK_FLOATS, k++) {
			struct rt_shard_chunk *c = &sh->chunks[k];
			size_t b = a + RT_SHARD_CHUNK_FLOATS < n ? a + RT_SHARD_CHUNK_FLOATS : n;

			*c = (struct rt_shard_chunk){ i, a, b - a, 0, to };
			for (r = 0; r < sh->replicas; r++) {
				size_t lo = (size_t)sh->displs[(size_t)i * d + (size_t)r];
				size_t hi = lo + (size_t)sh->counts[(size_t)i * d + (size_t)r];
				size_t x = lo > a ? lo : a, y = hi < b ? hi : b;
				int cnt = y > x ? (int)(y - x) : 0;

				sh->chunk_counts[(size_t)k * d + (size_t)r] = cnt;
				if (r == sh->replica)
					c->mine = (size_t)cnt;
			}
			to += c->mine;
		}
	}
	sh->tensor_chunk[sh->n_tensors] = k;
	sh->n_chunks = k;
	return 0;
}

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
	sh->queue = calloc(n, sizeof(int));
	sh->queued = calloc(n, sizeof(bool));
	sh->tensor_chunk = calloc(n + 1, sizeof(int));
	for (i = 0; i < RT_SHARD_IN_FLIGHT; i++)
		sh->flight[i] = MPI_REQUEST_NULL;
	if (!sh->rows || !sh->pieces || !sh->counts || !sh->displs || !sh->tensor_first ||
	    !sh->req || !sh->queue || !sh->queued || !sh->tensor_chunk)
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
	if (make_chunks(sh, st))
		return dt_err_add(err, "rank of replica %d: out of memory for the reduce-scatter's chunks",
				  replica), -ENOMEM;
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
	free(sh->queue);
	free(sh->queued);
	free(sh->tensor_chunk);
	free(sh->chunks);
	free(sh->chunk_counts);
	memset(sh, 0, sizeof(*sh));
}

/* --- the step --- */

/* Starts queued chunks while a place in flight is free. */
static int start_chunks(struct rt_shard *sh, const struct rt_stage *st, float *grads)
{
	int f, rc;

	for (f = 0; f < RT_SHARD_IN_FLIGHT; f++) {
		const struct rt_shard_chunk *c;
		int i, k;

		while (sh->next_tensor < sh->n_queued && /* a tensor of no floats: nothing to sum */
		       sh->tensor_chunk[sh->queue[sh->next_tensor] + 1] == sh->tensor_chunk[sh->queue[sh->next_tensor]])
			sh->next_tensor++;
		if (sh->next_tensor == sh->n_queued)
			break;
		if (sh->flight[f] != MPI_REQUEST_NULL)
			continue;
		i = sh->queue[sh->next_tensor];
		k = sh->tensor_chunk[i] + sh->next_chunk;
		c = &sh->chunks[k];
		rc = MPI_Ireduce_scatter(MPI_IN_PLACE, grads + st->tensors[i].offset + c->at,
					 sh->chunk_counts + (size_t)k * (size_t)sh->replicas, MPI_FLOAT,
					 MPI_SUM, sh->data, &sh->flight[f]);
		if (rc != MPI_SUCCESS)
			return rc;
		if (++sh->next_chunk == sh->tensor_chunk[i + 1] - sh->tensor_chunk[i]) {
			sh->next_tensor++;
			sh->next_chunk = 0;
		}
	}
	return MPI_SUCCESS;
}

static void queue_block(struct rt_shard *sh, int l)
{
	int i;

	for (i = sh->tensor_first[l]; i < sh->tensor_first[l + 1]; i++)
		if (!sh->queued[i]) {
			sh->queued[i] = true;
			sh->queue[sh->n_queued++] = i;
		}
}

int rt_shard_reduce_block(struct rt_shard *sh, const struct rt_stage *st, float *grads, int l)
{
	int f, flag, rc;

	queue_block(sh, l);
	/* Open MPI progresses non-blocking collectives only inside MPI calls */
	for (f = 0; f < RT_SHARD_IN_FLIGHT; f++)
		if (sh->flight[f] != MPI_REQUEST_NULL &&
		    (rc = MPI_Test(&sh->flight[f], &flag, MPI_STATUS_IGNORE)) != MPI_SUCCESS)
			return rc;
	return start_chunks(sh, st, grads);
}

bool rt_shard_block_queued(const struct rt_shard *sh, int l)
{
	int i;

	for (i = sh->tensor_first[l]; i < sh->tensor_first[l + 1]; i++)
		if (!sh->queued[i])
			return false;
	return true;
}

int rt_shard_reduce_finish(struct rt_shard *sh, const struct rt_stage *st, float *grads)
{
	int i, k, l, f, rc;

	/* the order of rt_shard_reduce_block in the backward pass (later
	 * blocks first, a block's tensors in order), which the other replicas
	 * may have followed: collectives start in the same order everywhere
	 * (a replica whose last micro-batch was empty queues them all here) */
	for (l = st->n_blocks - 1; l >= 0; l--)
		queue_block(sh, l);
	while ((rc = start_chunks(sh, st, grads)) == MPI_SUCCESS) {
		rc = MPI_Waitany(RT_SHARD_IN_FLIGHT, sh->flight, &f, MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS || f == MPI_UNDEFINED) /* none in flight: all done */
			break;
	}
	if (rc != MPI_SUCCESS)
		return rc;
	/* each chunk's part of this replica's rows down to the tensor's start
	 * (in chunk order: a part never lands on a later chunk's), then zero
	 * past the sum for the next backward (the update zeroes the sum as it
	 * reads it) */
	for (i = 0; i < sh->n_tensors; i++) {
		const struct rt_tensor *t = &st->tensors[i];
		float *g = grads + t->offset;

		for (k = sh->tensor_chunk[i]; k < sh->tensor_chunk[i + 1]; k++)
			if (sh->chunks[k].mine && sh->chunks[k].to != sh->chunks[k].at)
				memmove(g + sh->chunks[k].to, g + sh->chunks[k].at,
					sh->chunks[k].mine * sizeof(float));
		memset(g + sh->pieces[i].count, 0, (t->n - sh->pieces[i].count) * sizeof(float));
		sh->queued[i] = false;
	}
	sh->n_queued = sh->next_tensor = sh->next_chunk = 0;
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
