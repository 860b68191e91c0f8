/*
 * replicas.c - the data-parallel replicas of each stage checked, not
 * assumed, to hold the same state (recovery.check_replicas_every, and
 * before every save): each rank hashes its stage's parameters (and the
 * optimizer state, where the replicas keep whole copies of it), the
 * replicas of a stage compare their hashes, and one that differs from the
 * others (a flipped bit in a node's memory, a faulty GPU) stops every rank
 * at the same step, named with its node, before anything is saved: the
 * newest checkpoint is then one the replicas agreed on. Megatron's re-run
 * state machine checks a step's results again; this checks the state the
 * replicas carry, which any silent fault ends up in.
 *
 * Sections: the hash, the check.
 */
#include "runtime/train/trainer.h"

#include "base/fault.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --- the hash --- */

/* A 64-bit hash of n floats' bits: four lanes of multiply-xorshift over
 * 64-bit words (as fast as memory reads them), then mixed. Equal arrays
 * hash equal on every rank; one flipped bit changes the hash. */
static uint64_t hash_floats(const float *a, size_t n, uint64_t h)
{
	const uint64_t k = 0x9e3779b97f4a7c15ULL;
	uint64_t lane[4] = { h, h ^ 1, h ^ 2, h ^ 3 }, w;
	size_t words = n / 2, i;

	for (i = 0; i + 4 <= words; i += 4)
		for (int j = 0; j < 4; j++) {
			memcpy(&w, a + 2 * (i + (size_t)j), sizeof(w));
			lane[j] = (lane[j] ^ w) * k;
			lane[j] ^= lane[j] >> 29;
		}
	for (; i < words; i++) {
		memcpy(&w, a + 2 * i, sizeof(w));
		lane[0] = ((lane[0] ^ w) * k) ^ (lane[0] >> 31);
	}
	if (n % 2) {
		uint32_t last;

		memcpy(&last, a + n - 1, sizeof(last));
		lane[1] = (lane[1] ^ last) * k;
	}
	h = lane[0] ^ (lane[1] * 3) ^ (lane[2] * 5) ^ (lane[3] * 7) ^ (uint64_t)n;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	return h ^ (h >> 33);
}

/* This rank's state as its replicas must hold it alike: the parameters,
 * and the optimizer state unless sharded (each replica then holds its own
 * piece). On a device other than the host's, from the host twins. */
static int hash_state(struct trainer *t, int64_t step, uint64_t *h)
{
	const struct rt_stage *st;
	const struct rt_optim *o;
	int rc = t->host_step == step ? 0 : rt__dev_to_host(t);

	if (rc)
		return rc;
	t->host_step = step; /* a save at this step need not copy them again */
	st = rt__ckpt_stage(t);
	o = rt__ckpt_optim(t);
	*h = hash_floats(st->params, st->n_params, 0x6474726169ULL);
	if (!t->sharded && o->m)
		*h = hash_floats(o->m, o->n, *h);
	if (!t->sharded && o->v)
		*h = hash_floats(o->v, o->n, *h);
	return 0;
}

/* --- the check --- */

void rt__replicas_fault(struct trainer *t, int64_t step)
{
	unsigned long long at;
	char done[4200];
	uint32_t w;
	float *p;
	int fd;

	if (!dt_fault(DT_FAULT_FLIP, "bit", t->g->rank, &at) || (int64_t)at != step ||
	    !t->dev->host || !t->st.n_params)
		return;
	/* once in a run: the restart from a checkpoint passes the step again */
	snprintf(done, sizeof(done), "%s/fault-flip-done", t->s->run_dir ? t->s->run_dir : ".");
	fd = open(done, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	close(fd);
	p = t->st.params + t->st.n_params / 2;
	memcpy(&w, p, sizeof(w));
	w ^= 1u << 20;
	memcpy(p, &w, sizeof(w));
	fprintf(stderr, "dtrain: test fault DTRAIN_FAULT_FLIP: rank %d flipped a bit of parameter %zu after step %lld\n",
		t->g->rank, t->st.n_params / 2, (long long)step);
}

/* The replica of the stage whose hash differs from all the others, which
 * agree among themselves; -1 when all agree; -2 when they disagree with no
 * one replica to blame (two replicas, or no majority of all but one). */
static int odd_one(const uint64_t *h, int n)
{
	int odd = -1, alone = 0, rest = 0;

	for (int i = 0; i < n; i++) {
		int same = 0;

		for (int j = 0; j < n; j++)
			same += h[j] == h[i];
		if (same == n)
			return -1;
		if (same == 1) {
			alone++;
			odd = i;
		} else if (same == n - 1) {
			rest++;
		}
	}
	return alone == 1 && rest == n - 1 ? odd : -2;
}

/* Rank 0: "rank 1 on node n1, rank 3 on node n2", the ranks of stage k. */
static const char *stage_ranks(const struct trainer *t, int k, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (int r = 0; r < t->g->world && len < size; r++)
		if (t->rank_place[2 * r] == k)
			len += (size_t)snprintf(buf + len, size - len, "%srank %d on node %s",
						len ? ", " : "", r,
						t->rank_names + (size_t)r * RT_NODE_NAME);
	return buf;
}

/* This replica's copy of the state stands for its node's: the replicas
 * that share one copy in a node's memory (dp shared or split) count once,
 * by their first. */
static bool own_copy(const struct trainer *t)
{
	return !(t->dp.shared || t->dp.split) || t->dp.local == 0;
}

/* The odd copy among the replicas of the stage: every replica's hash with
 * whether it is a copy of its own (a node's first); the odd one's replica
 * index, -1 (all agree) or -2 (no one to blame). Allocates; -ENOMEM. */
static int find_odd(struct trainer *t, uint64_t mine, int *odd)
{
	uint64_t pair[2] = { mine, own_copy(t) }, *all, *copies;
	int n = 0, rc, i, *who;

	all = calloc((size_t)t->replicas * 2, sizeof(*all));
	copies = calloc((size_t)t->replicas, sizeof(*copies));
	who = calloc((size_t)t->replicas, sizeof(*who));
	if (!all || !copies || !who) {
		rc = dt_err_add(t->err, "rank %d: out of memory for the replicas' check", t->g->rank);
		rc = -ENOMEM;
		goto out;
	}
	rc = MPI_Allgather(pair, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, t->g->data_comm);
	if (rc != MPI_SUCCESS) {
		rc = rt_mpi_error(t->err, "MPI_Allgather", rc);
		goto out;
	}
	for (i = 0; i < t->replicas; i++)
		if (all[2 * i + 1]) {
			copies[n] = all[2 * i];
			who[n++] = i;
		}
	*odd = odd_one(copies, n);
	if (*odd >= 0)
		*odd = who[*odd];
out:
	free(all);
	free(copies);
	free(who);
	return rc;
}

int rt__replicas_check(struct trainer *t, int64_t step)
{
	char who[512];
	uint64_t mine;
	/* one value says it all, so that the rank named and its stage come
	 * from the same stage whatever the others report: (stage + 1) * (world
	 * + 2) + (1 + the rank named + 1, or 1: none named); 0: all agree */
	int64_t bad = 0, span = (int64_t)t->g->world + 2, stage, named;
	int odd = -1, rc;

	if (t->checked_step == step || t->replicas < 2)
		return 0;
	t->checked_step = step;
	rc = hash_state(t, step, &mine);
	if (!rc)
		rc = find_odd(t, mine, &odd);
	if (rc)
		return rc;
	if (odd == t->replica || (odd == -2 && t->replica == 0))
		bad = (t->stage + 1) * span + (odd == -2 ? 1 : t->g->rank + 2);
	MPI_CHECK(t, MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD));
	if (!bad)
		return 0;
	stage = bad / span - 1;
	named = bad % span - 2;
	if (t->g->rank == 0) {
		if (named >= 0)
			dt_err_add(t->err, "replicas disagree after step %lld: rank %d on node %s holds "
				   "other parameters than the other replicas of stage %d (a silent "
				   "corruption: a flipped bit in its memory, a faulty GPU); nothing "
				   "saved: start again from the newest checkpoint",
				   (long long)step, (int)named,
				   t->rank_names + (size_t)named * RT_NODE_NAME, (int)stage);
		else
			dt_err_add(t->err, "replicas disagree after step %lld: the replicas of stage "
				   "%d (%s) hold different parameters, none with another on its side (a "
				   "silent corruption on one of them); nothing saved: start again from "
				   "the newest checkpoint", (long long)step, (int)stage,
				   stage_ranks(t, (int)stage, who, sizeof(who)));
	}
	return -ENOTRECOVERABLE;
}
