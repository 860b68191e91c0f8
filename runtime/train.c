/*
 * train.c - the training loop (see train.h for the data flow of one step).
 *
 * Sections: set-up (model stage, optimizer, data, buffers, gradient
 * buckets), the pipeline operations (forward and backward of one
 * micro-batch), the schedules, gradient synchronisation, evaluation,
 * progress and metrics, the loop.
 */
#include "runtime/train.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include <mpi.h>

#include "runtime/bootstrap.h"
#include "runtime/checkpointing.h"
#include "runtime/data.h"
#include "runtime/dp.h"
#include "runtime/kernels.h"
#include "runtime/model.h"
#include "runtime/optim.h"
#include "runtime/pool.h"
#include "runtime/sampler.h"

/* PyTorch DDP's default bucket size (Li et al., VLDB 2020). */
#define BUCKET_BYTES (25u << 20)
/* Message tags: training micro-batches use their index, evaluation chunks
 * this offset plus theirs. */
#define TAG_EVAL 1000000

/* --- state --- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Where a rank's time goes, summed over the steps of one log window: the
 * `time` object of the metrics' step events (mean over ranks, per step).
 * bench/README.md derives the exposed communication and the pipeline's idle
 * fraction from them. */
struct times {
	double compute; /* forward, loss and backward passes */
	double pipe;    /* waiting for pipeline messages: receives, sends' completion */
	double grad;    /* gradient sync not hidden behind the backward pass */
	double data;    /* reading the rows of micro-batches */
	double optim;   /* gradient norm, clipping and the optimizer update */
};

/* One micro-batch in flight on this stage. */
struct slot {
	struct rt_acts acts;
	float *x;        /* [rows][in]: stage input, read or received */
	int32_t *y;      /* [rows]: labels (last stage) */
	float *dy;       /* [rows][out]: gradient of the stage output */
	float *dx;       /* [rows][in]: gradient of the stage input, sent back */
	MPI_Request send_fwd; /* output to the next stage (buffer: acts) */
	MPI_Request send_bwd; /* dx to the previous stage */
};

/* Whole layers whose gradients are allreduced together. */
struct bucket {
	size_t off, len;  /* range of stage->grads, in floats */
	int pending;      /* layers not yet done in the final backward */
	MPI_Request req;
	int started;
};

struct trainer {
	const struct spec *s;
	struct rt_grid *g;
	int stage, stages, replica, replicas, micro;
	int prev, next;    /* pipe_comm ranks of the neighbours, or -1 */
	int in, out;       /* widths of the stage input and output */
	int classes;
	int64_t max_rows;  /* most rows of one micro-batch */
	struct rt_stage st;
	struct rt_optim opt;
	struct rt_dp dp;   /* how replicas sum gradients; shared parameters on a node */
	struct rt_acts split_acts; /* dp.split: the node's micro-batch, in dp's window */
	unsigned long long split_slow_ms; /* DTRAIN_FAULT_SPLIT on this rank, or 0 */
	bool tsplit;       /* the rank's threads each compute a block of every layer */
	struct rt_pool pool; /* threads of the optimizer and of dp's sums */
	struct rt_data train, test;
	int has_test;
	struct rt_sampler sampler;
	struct slot *slots;
	int n_slots;
	struct bucket *buckets;
	int n_buckets;
	int *layer_bucket; /* bucket of each layer of the stage */
	int final_backward; /* the running backward is the step's last one */
	int bucket_rc;      /* a bucket's allreduce failed to start during
			     * backward (message in err); the backward's caller
			     * returns it */
	/* the step in progress */
	double loss_sum;   /* last stage: summed loss of this replica's rows */
	int64_t correct;
	double *part_loss; /* [pool's gang]: each thread's rows' loss and */
	int64_t *part_correct; /* correct count, the head cut by rows (split_schedule) */
	float grad_scale;  /* 1 / rows of the global batch */
	FILE *metrics;     /* rank 0 only */
	int first[CKPT_MAX_LAYERS + 1]; /* the stage split: stage k owns layers first[k].. */
	struct rt_ckpt ck; /* saves and resume */
	int64_t start_step; /* where this process started (> 0 after a resume) */
	double t_proc;     /* when rt_train started (monotonic seconds) */
	struct times tm;   /* this rank, the current log window */
	struct dt_err *err;
};

static int mpi_fail(struct trainer *t, const char *call, int rc)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	MPI_Error_string(rc, msg, &len);
	return dt_err_add(t->err, "rank %d: %s failed: %s", t->g->rank, call, msg), -EIO;
}

#define MPI_CHECK(t, call)                                  \
	do {                                                \
		int mpi_rc_ = (call);                       \
		if (mpi_rc_ != MPI_SUCCESS)                 \
			return mpi_fail((t), #call, mpi_rc_); \
	} while (0)

/* --- set-up --- */

/* Keep in memory what this stage reads (features on the first stage, labels
 * on the last) when it is small; otherwise rows are read at each step. */
#define LOAD_ALL_BYTES (1ll << 30)

static int load_shares(struct trainer *t)
{
	int first = t->stage == 0, last = t->stage == t->stages - 1, rc = 0;

	if (rt_data_bytes(&t->train) <= LOAD_ALL_BYTES)
		rc = rt_data_load_all(&t->train, first, last, t->err);
	if (!rc && t->has_test && rt_data_bytes(&t->test) <= LOAD_ALL_BYTES)
		rc = rt_data_load_all(&t->test, first, last, t->err);
	return rc;
}

static int open_data(struct trainer *t)
{
	const struct spec *s = t->s;
	int rc;

	if (!s->data.train)
		return dt_err_add(t->err, "data.train: not set; dtrain-run needs a training set "
				  "(make one with: dtrain-data fashion-mnist DIR, or dtrain-data synthetic FILE)");
	rc = rt_data_open(&t->train, s->data.train, t->err);
	if (rc)
		return rc;
	if (t->train.features != s->model.inputs)
		return dt_err_add(t->err, "%s: %lld features per sample but model.inputs is %ld",
				  s->data.train, (long long)t->train.features, s->model.inputs);
	if (t->train.classes > s->model.outputs)
		return dt_err_add(t->err, "%s: %d classes but model.outputs is only %ld",
				  s->data.train, t->train.classes, s->model.outputs);
	if (s->data.test) {
		rc = rt_data_open(&t->test, s->data.test, t->err);
		if (rc)
			return rc;
		t->has_test = 1;
		if (t->test.features != t->train.features)
			return dt_err_add(t->err, "%s: %lld features per sample but the training set has %lld",
					  s->data.test, (long long)t->test.features,
					  (long long)t->train.features);
	}
	t->classes = (int)s->model.outputs;
	rc = load_shares(t);
	if (rc)
		return rc;
	return rt_sampler_init(&t->sampler, t->train.n, s->train.global_batch,
			       (uint64_t)s->train.seed, s->data.shuffle, t->err);
}

static int build_stage(struct trainer *t)
{
	const struct spec *s = t->s;
	int *first = t->first;
	int rc, k;

	if (s->parallel.stage_layers.n) {
		first[0] = 0;
		for (k = 0; k < t->stages; k++)
			first[k + 1] = first[k] + (int)s->parallel.stage_layers.v[k];
	} else {
		rc = rt_stage_split(s, t->stages, first, t->err);
		if (rc)
			return rc;
	}
	rc = rt_stage_init(&t->st, s, t->stage, t->stages, first, t->err);
	if (rc)
		return rc;
	t->in = t->st.in;
	t->out = t->st.out;
	rc = rt_optim_init(&t->opt, s, t->st.n_params, t->err);
	rt_pool_init(&t->pool, (int)s->resources.cpus_per_task);
	t->opt.pool = &t->pool;
	t->part_loss = calloc((size_t)rt_pool_gang_size(&t->pool), sizeof(*t->part_loss));
	t->part_correct = calloc((size_t)rt_pool_gang_size(&t->pool), sizeof(*t->part_correct));
	if (!rc && (!t->part_loss || !t->part_correct))
		rc = -ENOMEM;
	return rc;
}

static int alloc_slots(struct trainer *t)
{
	const struct spec *s = t->s;
	int64_t per_replica = (s->train.global_batch + t->replicas - 1) / t->replicas;
	int i, rc;

	t->max_rows = (per_replica + t->micro - 1) / t->micro;
	if (t->max_rows < 1)
		t->max_rows = 1;
	/* 1F1B keeps at most (stages - stage) micro-batches alive on a stage
	 * (Narayanan et al. 2021); GPipe keeps all of them. */
	if (!strcmp(s->parallel.schedule, "1f1b"))
		t->n_slots = t->stages - t->stage < t->micro ? t->stages - t->stage : t->micro;
	else
		t->n_slots = t->micro;
	t->slots = calloc((size_t)t->n_slots, sizeof(*t->slots));
	if (!t->slots)
		return -ENOMEM;
	for (i = 0; i < t->n_slots; i++) {
		struct slot *sl = &t->slots[i];
		size_t rows = (size_t)t->max_rows;

		sl->send_fwd = sl->send_bwd = MPI_REQUEST_NULL;
		rc = rt_acts_init(&sl->acts, &t->st, (int)t->max_rows);
		if (rc)
			return dt_err_add(t->err, "rank %d: out of memory for activations", t->g->rank), rc;
		sl->x = malloc(rows * (size_t)t->in * sizeof(float));
		sl->dx = malloc(rows * (size_t)t->in * sizeof(float));
		sl->dy = malloc(rows * (size_t)t->out * sizeof(float));
		sl->y = malloc(rows * sizeof(int32_t));
		if (!sl->x || !sl->dx || !sl->dy || !sl->y)
			return dt_err_add(t->err, "rank %d: out of memory for micro-batch buffers", t->g->rank), -ENOMEM;
	}
	return 0;
}

/* Buckets of whole layers, last layer first, each about BUCKET_BYTES; built
 * the same way on every replica of a stage, so they are reduced in the same
 * order everywhere (a mismatch would hang the job). */
static int build_buckets(struct trainer *t)
{
	int n = t->st.n_layers, l, b = -1;
	size_t bytes = 0;

	t->buckets = calloc((size_t)n, sizeof(*t->buckets));
	t->layer_bucket = calloc((size_t)n, sizeof(int));
	if (!t->buckets || !t->layer_bucket)
		return -ENOMEM;
	for (l = n - 1; l >= 0; l--) {
		const struct rt_layer *ly = &t->st.layers[l];

		if (b < 0 || bytes >= BUCKET_BYTES) {
			b++;
			bytes = 0;
			t->buckets[b].off = ly->offset + ly->n_params;
			t->buckets[b].req = MPI_REQUEST_NULL;
		}
		/* layers are laid out in order, so going down extends the
		 * bucket's range at its start */
		t->buckets[b].off = ly->offset;
		t->buckets[b].len += ly->n_params;
		bytes += ly->n_params * sizeof(float);
		t->layer_bucket[l] = b;
	}
	t->n_buckets = b + 1;
	return 0;
}

/* together: every rank reached the end alike (rt_dp_free is collective;
 * a rank failing alone must not wait there for the others). */
static void free_trainer(struct trainer *t, bool together)
{
	int i;

	rt_acts_free(&t->split_acts);
	for (i = 0; t->slots && i < t->n_slots; i++) {
		rt_acts_free(&t->slots[i].acts);
		free(t->slots[i].x);
		free(t->slots[i].dx);
		free(t->slots[i].dy);
		free(t->slots[i].y);
	}
	free(t->slots);
	free(t->buckets);
	free(t->layer_bucket);
	free(t->part_loss);
	free(t->part_correct);
	rt_ckpt_free(&t->ck);
	if (together)
		rt_dp_free(&t->dp, &t->st, &t->opt);
	else
		rt_dp_abandon(&t->dp, &t->st, &t->opt);
	rt_optim_free(&t->opt);
	rt_pool_free(&t->pool);
	rt_stage_free(&t->st);
	rt_sampler_free(&t->sampler);
	rt_data_close(&t->train);
	if (t->has_test)
		rt_data_close(&t->test);
	if (t->metrics)
		fclose(t->metrics);
}

/* --- gradient synchronisation --- */

static int start_bucket(struct trainer *t, struct bucket *b)
{
	b->started = 1;
	MPI_CHECK(t, MPI_Iallreduce(MPI_IN_PLACE, t->st.grads + b->off, (int)b->len, MPI_FLOAT,
				    MPI_SUM, t->g->data_comm, &b->req));
	return 0;
}

/* Called by rt_stage_backward after each layer's gradients are complete. */
static void layer_done(void *ctx, int layer)
{
	struct trainer *t = ctx;
	struct bucket *b;
	int i, flag;

	if (t->replicas == 1 || t->dp.shared || !t->final_backward || t->bucket_rc)
		return;
	b = &t->buckets[t->layer_bucket[layer]];
	if (--b->pending == 0 && (t->bucket_rc = start_bucket(t, b)))
		return;
	/* Open MPI progresses non-blocking collectives only inside MPI calls. */
	for (i = 0; i < t->n_buckets; i++)
		if (t->buckets[i].started && t->buckets[i].req != MPI_REQUEST_NULL)
			MPI_Test(&t->buckets[i].req, &flag, MPI_STATUS_IGNORE);
}

static void arm_buckets(struct trainer *t)
{
	int l, i;

	for (i = 0; i < t->n_buckets; i++) {
		t->buckets[i].pending = 0;
		t->buckets[i].started = 0;
		t->buckets[i].req = MPI_REQUEST_NULL;
	}
	for (l = 0; l < t->st.n_layers; l++)
		t->buckets[t->layer_bucket[l]].pending++;
}

/* Start what the backward pass did not (a replica whose last micro-batches
 * were empty), in bucket order, then wait for all. */
static int finish_buckets(struct trainer *t)
{
	double t0;
	int i;

	rt_ckpt_wait_snapshot(&t->ck); /* an async save's copy, before the state may change */
	if (t->replicas == 1)
		return 0;
	if (t->dp.shared) {
		/* the barrier's wait, and unless the update sums the slots
		 * itself (dp.fuse), the sum of this replica's part and the
		 * allreduce between nodes: all of it follows the backward pass.
		 * Split: no barrier there (runtime/dp.h) but while a save is in
		 * flight: its writer's copy reads every replica's blocks */
		t0 = now_s();
		if (t->dp.split && rt_ckpt_async_inflight(&t->ck) && rt_dp_sync(&t->dp))
			return -EIO;
		if (rt_dp_reduce(&t->dp, t->err))
			return -EIO;
		t->tm.grad += now_s() - t0;
		return 0;
	}
	t0 = now_s();
	for (i = 0; i < t->n_buckets; i++)
		if (!t->buckets[i].started && start_bucket(t, &t->buckets[i]))
			return -EIO;
	for (i = 0; i < t->n_buckets; i++)
		MPI_CHECK(t, MPI_Wait(&t->buckets[i].req, MPI_STATUS_IGNORE));
	t->tm.grad += now_s() - t0;
	return 0;
}

/* --- pipeline operations --- */

struct mb {
	const int64_t *idx; /* rows of the data set */
	int64_t rows;
	int tag;
	struct rt_data *data;
};

static int forward_mb(struct trainer *t, struct slot *sl, const struct mb *m, double *loss,
		      int64_t *correct, int want_grad)
{
	MPI_Comm pc = t->g->pipe_comm;
	int last = t->stage == t->stages - 1;
	const float *y = NULL;
	int rc;

	double t0, t1;

	if (m->rows == 0)
		return 0;
	t0 = now_s();
	MPI_CHECK(t, MPI_Wait(&sl->send_fwd, MPI_STATUS_IGNORE));
	t1 = now_s();
	t->tm.pipe += t1 - t0;
	if (t->stage == 0 || last) {
		rc = rt_data_read(m->data, m->idx, (int)m->rows, t->stage == 0 ? sl->x : NULL,
				  last ? sl->y : NULL, t->err);
		if (rc)
			return rc;
		t0 = now_s();
		t->tm.data += t0 - t1;
		t1 = t0;
	}
	if (t->stage > 0) {
		MPI_CHECK(t, MPI_Recv(sl->x, (int)(m->rows * t->in), MPI_FLOAT, t->prev, m->tag, pc,
				      MPI_STATUS_IGNORE));
		t0 = now_s();
		t->tm.pipe += t0 - t1;
		t1 = t0;
	}
	rc = rt_stage_forward(&t->st, &sl->acts, sl->x, (int)m->rows, &y);
	if (rc)
		return dt_err_add(t->err, "rank %d: forward pass failed", t->g->rank), rc;
	if (!last) {
		t->tm.compute += now_s() - t1;
		MPI_CHECK(t, MPI_Isend(y, (int)(m->rows * t->out), MPI_FLOAT, t->next, m->tag, pc,
				       &sl->send_fwd));
		return 0;
	}
	*loss += rt_softmax_xent(y, sl->y, (int)m->rows, t->classes, t->grad_scale,
				 want_grad ? sl->dy : NULL, correct);
	t->tm.compute += now_s() - t1;
	return 0;
}

static int backward_mb(struct trainer *t, struct slot *sl, const struct mb *m)
{
	MPI_Comm pc = t->g->pipe_comm;
	int rc;

	double t0, t1;

	if (m->rows == 0)
		return 0;
	t0 = now_s();
	MPI_CHECK(t, MPI_Wait(&sl->send_bwd, MPI_STATUS_IGNORE));
	if (t->stage < t->stages - 1)
		MPI_CHECK(t, MPI_Recv(sl->dy, (int)(m->rows * t->out), MPI_FLOAT, t->next, m->tag, pc,
				      MPI_STATUS_IGNORE));
	t1 = now_s();
	t->tm.pipe += t1 - t0;
	rc = rt_stage_backward(&t->st, &sl->acts, sl->dy, t->stage > 0 ? sl->dx : NULL,
			       layer_done, t);
	if (rc)
		return dt_err_add(t->err, "rank %d: backward pass failed", t->g->rank), rc;
	if (t->bucket_rc)
		return t->bucket_rc;
	t->tm.compute += now_s() - t1;
	if (t->stage > 0)
		MPI_CHECK(t, MPI_Isend(sl->dx, (int)(m->rows * t->in), MPI_FLOAT, t->prev, m->tag, pc,
				       &sl->send_bwd));
	return 0;
}

static int wait_sends(struct trainer *t)
{
	double t0 = now_s();
	int i;

	for (i = 0; i < t->n_slots; i++) {
		MPI_CHECK(t, MPI_Wait(&t->slots[i].send_fwd, MPI_STATUS_IGNORE));
		MPI_CHECK(t, MPI_Wait(&t->slots[i].send_bwd, MPI_STATUS_IGNORE));
	}
	t->tm.pipe += now_s() - t0;
	return 0;
}

/* --- the schedules --- */

/* Run this stage's part of one step over micro-batches mbs[0..micro-1].
 * Backward passes go in forward order in both schedules, so gradients
 * accumulate in the same order and gpipe and 1f1b give identical bits.
 *   gpipe: F0 F1 ... F(m-1), then B0 ... B(m-1)
 *   1f1b:  w = min(stages - stage - 1, m) warm-up forwards, then one forward
 *          and one backward alternately, then the remaining backwards. */
static int run_schedule(struct trainer *t, const struct mb *mbs)
{
	int m = t->micro, last_nonempty = -1, f = 0, b = 0, i, rc;
	int warm = !strcmp(t->s->parallel.schedule, "1f1b") ? t->stages - t->stage - 1 : m;

	if (warm > m)
		warm = m;
	for (i = 0; i < m; i++)
		if (mbs[i].rows > 0)
			last_nonempty = i;
	t->loss_sum = 0;
	t->correct = 0;

#define FWD()                                                                            \
	do {                                                                             \
		rc = forward_mb(t, &t->slots[f % t->n_slots], &mbs[f], &t->loss_sum,     \
				&t->correct, 1);                                         \
		if (rc)                                                                  \
			return rc;                                                       \
		f++;                                                                     \
	} while (0)
#define BWD()                                                                            \
	do {                                                                             \
		t->final_backward = b == last_nonempty;                                  \
		rc = backward_mb(t, &t->slots[b % t->n_slots], &mbs[b]);                 \
		if (rc)                                                                  \
			return rc;                                                       \
		b++;                                                                     \
	} while (0)

	for (i = 0; i < warm; i++)
		FWD();
	while (f < m) {
		FWD();
		BWD();
	}
	while (b < m)
		BWD();
#undef FWD
#undef BWD
	t->final_backward = 0;
	return 0;
}

/* --- a step with every layer cut into blocks (runtime/model.h, rt_part) ---
 *
 * Between the node's replicas (dp.split, runtime/dp.h) and/or between the
 * threads of this rank (t->tsplit): block k of L, k = replica on the node
 * x threads + thread. The rank's threads run as a gang of the pool and
 * meet at its spinning barrier; thread 0 alone calls MPI (the node's
 * barrier, between two of the gang's). */

/* Tests make one replica late after every hand-over of the split way,
 * DTRAIN_FAULT_SPLIT="slow@MS:RANK" (rank RANK's first thread sleeps MS
 * after each, while the rank's other threads and the other ranks go on), so
 * that a barrier missing where the data flow needs one changes the bits
 * (tests/integration/equivalence.sh). Unset, one getenv per process. */
static unsigned long long fault_split_slow(int rank)
{
	const char *f = getenv("DTRAIN_FAULT_SPLIT");
	unsigned long long ms;
	int r;

	return f && sscanf(f, "slow@%llu:%d", &ms, &r) == 2 && r == rank ? ms : 0;
}

struct gang {
	struct trainer *t;
	struct rt_acts *acts; /* the micro-batch's activations, the node's rows */
	float *dy;            /* [rows][classes]: the loss's gradient */
	int32_t *labels;      /* this replica's rows' labels */
	int64_t off, rows, own; /* this replica's rows: [off, off + own) of rows */
	int threads;          /* T: the gang's threads (1: no gang) */
	int mpi_rc;           /* thread 0's node barrier, read by all after the gang's */
	atomic_int rc;        /* the first failure of any thread */
};

struct gang_thread {
	struct gang *g;
	int k;                /* thread index in the gang */
};

/* rt_part's sync: every block of the node done. Thread 0's wait counts as
 * gradient sync: with the layers cut, these waits are the exchange. */
static int gang_sync(void *ctx)
{
	struct gang_thread *me = ctx;
	struct gang *g = me->g;
	struct trainer *t = g->t;
	double t0 = me->k == 0 ? now_s() : 0.0;

	if (g->threads > 1)
		rt_pool_sync(&t->pool);
	if (t->dp.split) {
		if (me->k == 0)
			g->mpi_rc = rt_dp_sync(&t->dp);
		if (g->threads > 1)
			rt_pool_sync(&t->pool);
	}
	if (me->k == 0) {
		t->tm.grad += now_s() - t0;
		if (t->split_slow_ms) /* late past the barrier: the others run ahead */
			dt_sleep_ms(t->split_slow_ms);
	}
	return g->mpi_rc;
}

/* The node's barrier alone, outside a gang (thread 0). */
static int node_sync(struct trainer *t)
{
	double t0 = now_s();
	int rc = rt_dp_sync(&t->dp);

	t->tm.grad += now_s() - t0;
	if (t->split_slow_ms)
		dt_sleep_ms(t->split_slow_ms);
	return rc;
}

/* Thread k's part of one micro-batch: forward, the loss of this replica's
 * rows, backward. The loss: with the head cut by rows (rt_part_head_rows),
 * each thread's of its share of the rows, right after its rows' logits;
 * else thread 0's of them all, after a sync. A failure reaches every
 * thread alike (a shape that does not fit, or the node barrier's result
 * that gang_sync hands to all), so none is left waiting at a barrier the
 * others skip. */
static void gang_item(void *ctx, long k)
{
	struct gang *g = ctx;
	struct trainer *t = g->t;
	struct gang_thread me = { g, (int)k };
	int procs = t->dp.split ? t->dp.locals : 1, proc = t->dp.split ? t->dp.local : 0;
	/* this thread's share of its replica's rows [off, off + own) */
	int r0 = (int)(g->off + g->own * k / g->threads);
	int r1 = (int)(g->off + g->own * (k + 1) / g->threads);
	struct rt_part p = { proc * g->threads + (int)k, procs * g->threads, r0, r1, gang_sync, &me };
	bool by_rows = rt_part_head_rows(&t->st, p.L);
	struct rt_acts a = *g->acts; /* this thread's view (forward sets its rows) */
	const float *logits;
	int rc;

	if (!by_rows) {
		r0 = (int)g->off;
		r1 = (int)(g->off + g->own);
	}
	rc = rt_stage_forward_part(&t->st, &a, (int)g->rows, &p, &logits);
	if (!rc && (by_rows || k == 0))
		t->part_loss[k] += rt_softmax_xent(logits + (size_t)r0 * (size_t)t->classes,
						   g->labels + (r0 - g->off), r1 - r0, t->classes,
						   t->grad_scale, g->dy + (size_t)r0 * (size_t)t->classes,
						   &t->part_correct[k]);
	if (!rc && !by_rows)
		rc = gang_sync(&me);
	if (!rc)
		rc = rt_stage_backward_part(&t->st, &a, g->dy, NULL, &p);
	if (rc)
		atomic_store(&g->rc, rc);
}

/* The step's micro-batches, each over the whole node's rows (one replica
 * a node: its own): this replica reads its own rows into the input and
 * computes their loss; every block runs in the same order everywhere. */
static int split_schedule(struct trainer *t, const struct mb *mbs, int64_t batch_rows)
{
	struct gang g = { .t = t, .threads = t->tsplit ? rt_pool_gang_size(&t->pool) : 1 };
	double t0;
	int i, rc;

	g.acts = t->dp.split ? &t->split_acts : &t->slots[0].acts;
	g.dy = t->dp.split ? t->dp.dy : t->slots[0].dy;
	g.labels = t->slots[0].y;
	t->loss_sum = 0;
	t->correct = 0;
	for (i = 0; i < g.threads; i++) {
		t->part_loss[i] = 0;
		t->part_correct[i] = 0;
	}
	for (i = 0; i < t->micro; i++) {
		const struct mb *m = &mbs[i];

		g.off = 0;
		g.rows = g.own = m->rows;
		if (t->dp.split)
			rt_dp_rows(&t->dp, batch_rows, t->replicas, t->micro, i, &g.off, &g.rows);
		if (g.rows == 0)
			continue; /* on every replica of the node alike */
		/* the previous micro-batch's backward may still read the input
		 * on another replica (this rank's threads are done) */
		if (i > 0 && t->dp.split && (rc = node_sync(t)))
			return rc;
		t0 = now_s();
		if (m->rows > 0) {
			rc = rt_data_read(m->data, m->idx, (int)m->rows, g.acts->x + g.off * t->in,
					  g.labels, t->err);
			if (rc)
				return rc;
		}
		t->tm.data += now_s() - t0;
		if (t->dp.split && (rc = node_sync(t)))
			return rc;
		atomic_store(&g.rc, 0);
		g.mpi_rc = 0;
		t0 = now_s() - t->tm.grad; /* the syncs' waits are not compute */
		if (g.threads > 1)
			rt_pool_gang(&t->pool, gang_item, &g);
		else
			gang_item(&g, 0);
		t->tm.compute += now_s() - t->tm.grad - t0;
		rc = atomic_load(&g.rc);
		if (rc == -EINVAL)
			return dt_err_add(t->err, "rank %d: forward or backward pass failed", t->g->rank), rc;
		if (rc)
			return rc;
	}
	/* in thread order: the same sum on every run */
	for (i = 0; i < g.threads; i++) {
		t->loss_sum += t->part_loss[i];
		t->correct += t->part_correct[i];
	}
	return 0;
}

/* --- evaluation --- */

/* Loss and accuracy over a data set; every rank gets the totals. */
static int evaluate(struct trainer *t, struct rt_data *d, double *loss, double *acc)
{
	int64_t off, count, done, n_chunks, c;
	int64_t *idx = NULL;
	double tot[2] = { 0, 0 };
	int64_t correct = 0;
	struct times keep = t->tm; /* evaluation is not part of the steps' times */
	int rc = 0, i;

	rt_sampler_slice(d->n, t->replicas, t->replica, &off, &count);
	idx = malloc((size_t)(count ? count : 1) * sizeof(int64_t));
	if (!idx)
		return -ENOMEM;
	for (i = 0; i < count; i++)
		idx[i] = off + i;
	n_chunks = (count + t->max_rows - 1) / t->max_rows;
	if (t->tsplit) /* whole products here: OpenBLAS's threads, for a while */
		rt_blas_threads(t->pool.threads);
	for (c = 0, done = 0; c < n_chunks; c++) {
		struct mb m = { idx + done, count - done < t->max_rows ? count - done : t->max_rows,
				TAG_EVAL + (int)(c % 1000000), d };

		rc = forward_mb(t, &t->slots[c % t->n_slots], &m, &tot[0], &correct, 0);
		if (rc)
			goto out;
		done += m.rows;
	}
	rc = wait_sends(t);
	if (rc)
		goto out;
	tot[1] = (double)correct;
	if (t->stage == t->stages - 1 && t->replicas > 1 &&
	    MPI_Allreduce(MPI_IN_PLACE, tot, 2, MPI_DOUBLE, MPI_SUM, t->g->data_comm) != MPI_SUCCESS) {
		rc = dt_err_add(t->err, "rank %d: MPI_Allreduce of the evaluation failed", t->g->rank);
		goto out;
	}
	if (MPI_Bcast(tot, 2, MPI_DOUBLE, t->stages - 1, t->g->pipe_comm) != MPI_SUCCESS) {
		rc = dt_err_add(t->err, "rank %d: MPI_Bcast of the evaluation failed", t->g->rank);
		goto out;
	}
	*loss = tot[0] / (double)d->n;
	*acc = tot[1] / (double)d->n;
out:
	if (t->tsplit)
		rt_blas_threads(1);
	t->tm = keep;
	free(idx);
	return rc;
}

/* --- progress and metrics --- */

static void fmt_duration(double s, char *buf, size_t size)
{
	long t = s < 0 ? 0 : (long)(s + 0.5);

	snprintf(buf, size, "%02ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

static void open_metrics(struct trainer *t)
{
	char path[4200];

	if (t->g->rank != 0 || !t->s->run_dir)
		return;
	/* dtrain-submit made it; a spec run by hand may name a new one */
	dt_mkdirs(t->s->run_dir, 0755);
	snprintf(path, sizeof(path), "%s/metrics.jsonl", t->s->run_dir);
	t->metrics = fopen(path, "a"); /* a requeued job appends */
	if (!t->metrics)
		fprintf(stderr, "dtrain-run: warning: cannot write %s: %s\n", path, strerror(errno));
}

static void metric(struct trainer *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void metric(struct trainer *t, const char *fmt, ...)
{
	va_list ap;

	if (!t->metrics)
		return;
	va_start(ap, fmt);
	vfprintf(t->metrics, fmt, ap);
	va_end(ap);
	fputc('\n', t->metrics);
	fflush(t->metrics);
}

/* --- saving the final parameters (a test and debugging aid) --- */

static int save_params(struct trainer *t, const char *dir)
{
	int l, rc = 0;

	if (t->replica != 0)
		return 0;
	rc = dt_mkdirs(dir, 0755);
	if (rc)
		return dt_err_add(t->err, "%s: cannot create: %s", dir, strerror(-rc)), rc;
	for (l = 0; l < t->st.n_layers && !rc; l++) {
		const struct rt_layer *ly = &t->st.layers[l];
		char path[4200];

		snprintf(path, sizeof(path), "%s/layer-%d.f32", dir, ly->index);
		rc = dt_write_file_atomic(path, t->st.params + ly->offset, ly->n_params * sizeof(float), 0644);
		if (rc)
			dt_err_add(t->err, "%s: cannot write: %s", path, strerror(-rc));
	}
	return rc;
}

/* --- the loop --- */

static int check_finite(struct trainer *t, int64_t step, double loss, double norm)
{
	if (isfinite(loss) && isfinite(norm))
		return 0;
	if (t->g->rank == 0)
		dt_err_add(t->err, "step %lld: %s is %s; training diverged (hint: lower train.optimizer.lr, "
			   "add train.lr_schedule.warmup_steps or set train.grad_clip)",
			   (long long)step + 1, isfinite(loss) ? "the gradient norm" : "the loss",
			   isfinite(loss) ? (isnan(norm) ? "NaN" : "infinite") : (isnan(loss) ? "NaN" : "infinite"));
	return -ERANGE;
}

/* The step's loss and correct count, summed over replicas, to every stage. */
static int reduce_stats(struct trainer *t, double stats[2])
{
	if (t->stage == t->stages - 1 && t->replicas > 1)
		MPI_CHECK(t, MPI_Allreduce(MPI_IN_PLACE, stats, 2, MPI_DOUBLE, MPI_SUM,
					   t->g->data_comm));
	if (t->stages > 1)
		MPI_CHECK(t, MPI_Bcast(stats, 2, MPI_DOUBLE, t->stages - 1, t->g->pipe_comm));
	return 0;
}

/* The global gradient norm from this stage's sum of squares (over all
 * stages; the replicas of a stage agree already). */
static int reduce_norm(struct trainer *t, double sumsq, double *norm)
{
	if (t->stages > 1)
		MPI_CHECK(t, MPI_Allreduce(MPI_IN_PLACE, &sumsq, 1, MPI_DOUBLE, MPI_SUM,
					   t->g->pipe_comm));
	*norm = sqrt(sumsq);
	return 0;
}

/* The sums of the step's stats and of this replica's share of the sum of
 * squares: split, in the step's one collective (rt_dp_step_sums, its wait
 * counted as gradient sync); shared, the stats were summed before and the
 * node's parts are summed here. */
static int sum_step(struct trainer *t, double stats[2], double *sumsq)
{
	double t0 = now_s();
	int rc;

	if (!t->dp.split)
		return t->dp.shared ? rt_dp_sum_parts(&t->dp, sumsq, t->err) : 0;
	rc = rt_dp_step_sums(&t->dp, stats, 2, sumsq, t->err);
	t->tm.grad += now_s() - t0;
	return rc;
}

/* Clip (train.grad_clip) and update what this replica owns: all the
 * parameters, its part when the node's replicas share them, or its blocks
 * of every layer when they split the layers (runtime/dp.h), in one pass
 * (rt_optim_step_spans, or rt_optim_step_sum reading the replicas'
 * gradients), which leaves the gradient it read zero for the next step's
 * backward passes to add to; with clipping the norm must be known first,
 * which costs a second pass (rt_sumsq). stats: the step's loss sum and
 * correct count, this replica's on entry, all replicas' on return (the
 * split way sums them with the norm's parts). */
static int update(struct trainer *t, int64_t step, double stats[2], int64_t batch_rows, double lr,
		  double *norm)
{
	struct rt_span whole = { 0, t->st.n_params };
	const struct rt_span *sp = &whole;
	double clip = t->s->train.grad_clip, sumsq = 0.0;
	float scale = 1.0f;
	int n = 1, rc = 0, i;

	if (t->dp.split) {
		sp = t->dp.spans;
		n = t->dp.n_spans;
	} else if (t->dp.shared) {
		whole = (struct rt_span){ t->dp.first, t->dp.count };
	}
	if (!t->dp.split && (rc = reduce_stats(t, stats)))
		return rc;
	if (clip > 0) {
		for (i = 0; i < n; i++)
			sumsq += rt_sumsq(t->st.grads + sp[i].first, sp[i].count);
		rc = sum_step(t, stats, &sumsq);
		if (!rc)
			rc = reduce_norm(t, sumsq, norm);
		if (!rc)
			rc = check_finite(t, step, stats[0] / (double)batch_rows, *norm);
		if (rc)
			return rc;
		scale = (float)rt_clip_factor(*norm, clip);
		rt_optim_step_spans(&t->opt, t->st.params, t->st.grads, sp, n, lr, scale);
		return t->dp.shared ? rt_dp_publish(&t->dp, t->err) : 0;
	}
	/* a NaN gradient is only seen after the update here; the run stops
	 * then, and nothing saves these parameters */
	if (t->dp.shared && t->dp.fuse)
		sumsq = rt_optim_step_sum(&t->opt, t->st.params, t->dp.slot, t->dp.locals, whole.first,
					  whole.count, lr);
	else
		sumsq = rt_optim_step_spans(&t->opt, t->st.params, t->st.grads, sp, n, lr, 1.0f);
	/* split: the sums are the hand-over after the update as well */
	rc = sum_step(t, stats, &sumsq);
	if (!rc && t->dp.shared && !t->dp.split)
		rc = rt_dp_publish(&t->dp, t->err);
	if (!rc)
		rc = reduce_norm(t, sumsq, norm);
	return rc ? rc : check_finite(t, step, stats[0] / (double)batch_rows, *norm);
}

/* Steps of the whole run: train.epochs epochs, cut by train.max_steps. */
static int64_t total_steps(const struct trainer *t)
{
	int64_t per_epoch = rt_sampler_steps(&t->sampler), total = t->s->train.epochs * per_epoch;

	if (t->s->train.max_steps > 0 && (total == 0 || t->s->train.max_steps < total))
		total = t->s->train.max_steps;
	return total;
}

/* Seconds since the batch job started (DTRAIN_JOB_START, set by the batch
 * script), or -1 when unknown. */
static double since_job_start(void)
{
	const char *v = getenv("DTRAIN_JOB_START");
	struct timespec ts;
	char *end;
	double start;

	if (!v || !*v)
		return -1;
	start = strtod(v, &end);
	if (*end || start <= 0)
		return -1;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec - start;
}

/* At a step boundary: a stop signal means save now and leave (-EAGAIN);
 * otherwise a periodic save when one is due. */
static int checkpoint_point(struct trainer *t, int64_t step, int64_t total, int64_t per_epoch,
			    const struct rt_train_opts *opts)
{
	const struct spec *s = t->s;
	struct rt_ckpt_pos pos = { step, per_epoch, total };
	int sig = 0, rc;

	/* sig: the signal the ranks agreed on, whichever rank got it first */
	rc = rt_ckpt_poll(&t->ck, &sig, t->err);
	if (rc)
		return rc;
	if (sig) {
		if (t->g->rank == 0 && !opts->quiet) {
			printf("dtrain-run: %s received: saving at step %lld, then exiting for a requeue\n",
			       strsignal(sig), (long long)step);
			fflush(stdout);
		}
		metric(t, "{\"event\":\"stop\",\"step\":%lld,\"signal\":\"%s\"}", (long long)step,
		       sigabbrev_np(sig));
		rc = rt_ckpt_save(&t->ck, &pos, true, t->err);
		if (rc == -ECANCELED && t->g->rank == 0)
			dt_err_add(t->err, "stopped at step %lld without saving it (see above); a resume "
				   "starts from the newest saved checkpoint", (long long)step);
		return rc ? rc : -EAGAIN;
	}
	if (s->checkpoint.every_steps > 0 && step % s->checkpoint.every_steps == 0 && step < total)
		return rt_ckpt_save(&t->ck, &pos, !s->checkpoint.async, t->err);
	return 0;
}

/* The log window's times per step, the mean over all ranks:
 * tm = { step, compute, pipe wait, grad wait, data, optim } in seconds.
 * Collective over the world (every rank logs at the same steps). */
static int window_times(struct trainer *t, double window_s, int64_t steps, double tm[6])
{
	double per = steps > 0 ? 1.0 / (double)steps : 0.0;
	int i;

	tm[0] = window_s;
	tm[1] = t->tm.compute;
	tm[2] = t->tm.pipe;
	tm[3] = t->tm.grad;
	tm[4] = t->tm.data;
	tm[5] = t->tm.optim;
	if (t->g->world > 1)
		MPI_CHECK(t, MPI_Allreduce(MPI_IN_PLACE, tm, 6, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
	for (i = 0; i < 6; i++)
		tm[i] *= per / (double)t->g->world;
	return 0;
}

static int train_loop(struct trainer *t, const struct rt_train_opts *opts)
{
	const struct spec *s = t->s;
	int64_t per_epoch = rt_sampler_steps(&t->sampler);
	int64_t total = total_steps(t), step = t->start_step, epoch = 0;
	int64_t window_rows = 0, window_steps = 0;
	double t0 = now_s(), tw = t0, t_opt;
	struct mb *mbs;
	int rc = 0, i;

	mbs = calloc((size_t)t->micro, sizeof(*mbs));
	if (!mbs)
		return -ENOMEM;
	if (t->g->rank == 0 && !opts->quiet) {
		printf("dtrain-run: training %s: %zu parameters, %lld steps (%lld per epoch), "
		       "schedule %s, %d micro-batches%s\n", s->name, (size_t)rt_model_params(s),
		       (long long)total, (long long)per_epoch, s->parallel.schedule, t->micro,
		       step ? ", resumed" : "");
		if (t->tsplit)
			printf("dtrain-run: threads: each of the %d threads of a rank computes a block of "
			       "every layer\n", rt_pool_gang_size(&t->pool));
		if (t->dp.split)
			printf("dtrain-run: gradients: the %d replicas on each node share parameters in "
			       "memory and split every layer over the node's batch, each its 1/%d%s\n",
			       t->dp.locals, t->dp.locals,
			       t->dp.cross != MPI_COMM_NULL ? ", blocks allreduced between nodes" : "");
		else if (t->dp.shared)
			printf("dtrain-run: gradients: the %d replicas of a stage on each node share "
			       "parameters in memory, each updates 1/%d%s\n", t->dp.locals, t->dp.locals,
			       t->dp.cross != MPI_COMM_NULL ? ", parts allreduced between nodes" : "");
		else if (t->replicas > 1)
			printf("dtrain-run: gradients: allreduce between the %d replicas\n", t->replicas);
		if (step >= total)
			printf("dtrain-run: the checkpoint is at the end of training: nothing left to do\n");
		fflush(stdout);
	}
	metric(t, "{\"event\":\"start\",\"total_steps\":%lld,\"steps_per_epoch\":%lld,\"epochs\":%ld,"
		  "\"step\":%lld,\"grad_sync\":\"%s\",\"replicas_per_node\":%d,\"threads\":\"%s\"}",
	       (long long)total,
	       (long long)per_epoch, s->train.epochs, (long long)step,
	       t->dp.split ? "split" : t->dp.shared ? "shared" : t->replicas > 1 ? "allreduce" : "none",
	       t->dp.shared ? t->dp.locals : 1, t->tsplit ? "split" : "blas");

	while (step < total) {
		int64_t k = step % per_epoch, batch_rows, rep_off, rep_rows;
		const int64_t *idx;
		double lr, loss, norm, stats[2], grad_before;

		epoch = step / per_epoch;
		rc = rt_sampler_epoch(&t->sampler, epoch); /* no-op within an epoch */
		if (rc)
			break;
		/* the global batch of this step, then this replica's share */
		rt_sampler_batch(&t->sampler, k, &idx, &batch_rows);
		rt_sampler_slice(batch_rows, t->replicas, t->replica, &rep_off, &rep_rows);
		for (i = 0; i < t->micro; i++) {
			int64_t o, c;

			rt_sampler_slice(rep_rows, t->micro, i, &o, &c);
			mbs[i] = (struct mb){ idx + rep_off + o, c, i, &t->train };
		}
		t->grad_scale = 1.0f / (float)batch_rows;
		arm_buckets(t);
		/* the backward passes add to the gradient, which the last
		 * update left zero (rt_optim_step_spans, rt_optim_step_sum and
		 * rt_dp_reduce zero what they read): no pass zeroes it */
		rc = t->dp.split || t->tsplit ? split_schedule(t, mbs, batch_rows) : run_schedule(t, mbs);
		if (!rc)
			rc = finish_buckets(t);
		if (!rc)
			rc = wait_sends(t);
		if (rc)
			break;

		stats[0] = t->loss_sum;
		stats[1] = (double)t->correct;
		t_opt = now_s();
		grad_before = t->tm.grad;
		lr = rt_lr_at(s, step, total);
		rc = update(t, step, stats, batch_rows, lr, &norm);
		if (rc)
			break;
		loss = stats[0] / (double)batch_rows;
		/* the split way's sums wait for the other replicas: gradient sync */
		t->tm.optim += now_s() - t_opt - (t->tm.grad - grad_before);
		step++;
		window_rows += batch_rows;
		window_steps++;
		if (step == t->start_step + 1) {
			double since = since_job_start();
			struct timespec wall;

			if (t->start_step > 0 && since >= 0 && t->g->rank == 0 && !opts->quiet) {
				printf("dtrain-run: first step after the resume done %.2f s after the job "
				       "started\n", since);
				fflush(stdout);
			}
			clock_gettime(CLOCK_REALTIME, &wall);
			metric(t, "{\"event\":\"first_step\",\"step\":%lld,\"resumed\":%s,"
				  "\"since_job_start_s\":%.3f,\"since_process_start_s\":%.3f,"
				  "\"unix_time\":%.6f}", (long long)step, t->start_step > 0 ? "true" : "false",
			       since, now_s() - t->t_proc, (double)wall.tv_sec + 1e-9 * (double)wall.tv_nsec);
		}

		if (step % s->train.log_every == 0 || step == total) {
			double now = now_s(), rate = (double)window_rows / (now - tw);
			double eta = (now - t0) / (double)step * (double)(total - step);
			double tm[6];
			char eta_s[32];

			rc = window_times(t, now - tw, window_steps, tm);
			if (rc)
				break;

			fmt_duration(eta, eta_s, sizeof(eta_s));
			if (t->g->rank == 0 && !opts->quiet) {
				printf("dtrain-run: step %lld/%lld epoch %lld/%ld loss %.4f lr %.3g "
				       "grad_norm %.3g samples/s %.0f eta %s\n",
				       (long long)step, (long long)total, (long long)epoch + 1,
				       s->train.epochs, loss, lr, norm, rate, eta_s);
				fflush(stdout);
			}
			metric(t, "{\"event\":\"step\",\"step\":%lld,\"total_steps\":%lld,\"epoch\":%lld,"
				  "\"loss\":%.9g,\"lr\":%.9g,\"grad_norm\":%.9g,\"samples_per_s\":%.1f,"
				  "\"eta_s\":%.0f,\"steps\":%lld,\"time\":{\"step_s\":%.6g,\"compute_s\":%.6g,"
				  "\"pipe_wait_s\":%.6g,\"grad_wait_s\":%.6g,\"data_s\":%.6g,\"optim_s\":%.6g}}",
			       (long long)step, (long long)total, (long long)epoch + 1, loss, lr, norm,
			       rate, eta, (long long)window_steps, tm[0], tm[1], tm[2], tm[3], tm[4], tm[5]);
			tw = now_s(); /* the window's reduction is not part of the next */
			window_rows = 0;
			window_steps = 0;
			memset(&t->tm, 0, sizeof(t->tm));
		}
		if (t->has_test && (step % per_epoch == 0 || step == total)) {
			double tl = 0, ta = 0;

			rc = evaluate(t, &t->test, &tl, &ta);
			if (rc)
				break;
			if (t->g->rank == 0 && !opts->quiet) {
				printf("dtrain-run: epoch %lld/%ld test loss %.4f accuracy %.4f\n",
				       (long long)epoch + 1, s->train.epochs, tl, ta);
				fflush(stdout);
			}
			metric(t, "{\"event\":\"eval\",\"step\":%lld,\"epoch\":%lld,\"test_loss\":%.9g,"
				  "\"test_accuracy\":%.6f}", (long long)step, (long long)epoch + 1, tl, ta);
		}
		rc = checkpoint_point(t, step, total, per_epoch, opts);
		if (rc)
			break;
	}
	if (!rc) {
		/* the final save: the end of training is a checkpoint too */
		struct rt_ckpt_pos pos = { step, per_epoch, total };

		rc = rt_ckpt_save(&t->ck, &pos, true, t->err);
		if (rc == -ECANCELED && t->g->rank == 0)
			dt_err_add(t->err, "training finished, but its final checkpoint (step %lld) could "
				   "not be saved (see above)", (long long)step);
	}
	if (!rc) {
		double secs = now_s() - t0;

		metric(t, "{\"event\":\"end\",\"step\":%lld,\"seconds\":%.3f}", (long long)step, secs);
		if (t->g->rank == 0 && !opts->quiet) {
			printf("dtrain-run: done: %lld steps in %.1f s\n", (long long)step, secs);
			fflush(stdout);
		}
	}
	free(mbs);
	return rc;
}

/* CPUs this process may run on (its affinity mask), or 0 when unknown. */
static int cpus_allowed(void)
{
	cpu_set_t set;

	return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
}

/* parallel.threads: whether this rank's threads each compute a block of
 * every layer (OpenBLAS then runs on 1 thread, the pool's threads poll
 * between loops) or run OpenBLAS's products. Blocks need the whole model
 * on the rank and no gradient buckets to start during backward (one
 * replica, or dp.split), and the same number of threads on every rank (a
 * worker that failed to start turns it off everywhere). "auto" also wants
 * a CPU for each thread (mpirun binds 1 or 2 ranks to a core each unless
 * told --bind-to none; Slurm gives cpus_per_task), and as many CPUs on the
 * machine as its ranks' threads: threads that wait for
 * each other at every layer lose badly when they take turns on one core.
 * Collective. */
static int choose_threads(struct trainer *t, const struct rt_train_opts *opts)
{
	const char *want = t->s->parallel.threads ? t->s->parallel.threads : "auto";
	int cpus = cpus_allowed(), ok;
	/* ranks whose masks allow every CPU may still share them with the
	 * machine's other ranks (several Slurm nodes on one machine) */
	bool shared = opts->machine_cpus > 0 &&
		      (long)opts->machine_ranks * t->pool.threads > opts->machine_cpus;

	ok = strcmp(want, "blas") != 0 && t->stages == 1 && (t->replicas == 1 || t->dp.split) &&
	     t->pool.threads > 1 && t->pool.started == t->pool.threads - 1 &&
	     (strcmp(want, "auto") != 0 || ((cpus == 0 || cpus >= t->pool.threads) && !shared));
	if (t->g->world > 1)
		MPI_CHECK(t, MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
	t->tsplit = ok;
	if (ok) {
		rt_blas_threads(1);
		rt_pool_spin(&t->pool, true); /* the gang's threads own their cores */
	} else if (!strcmp(want, "split") && t->g->rank == 0 && t->pool.threads > 1) {
		fprintf(stderr, "dtrain-run: warning: parallel.threads: \"split\" needs one replica a "
			"node or parallel.grad_sync \"split\", and every worker thread started; "
			"running the products on OpenBLAS's threads instead\n");
	}
	return 0;
}

/* One line per rank: what it held and its peak memory. */
static void report_rank(struct trainer *t)
{
	struct rusage ru;
	size_t total = rt_model_params(t->s);

	getrusage(RUSAGE_SELF, &ru);
	printf("dtrain-run: rank %d stage %d/%d layers %d-%d params %zu (%.1f%% of %zu) peak_rss_mib %.1f\n",
	       t->g->rank, t->stage, t->stages, t->st.first_layer,
	       t->st.first_layer + t->st.n_layers - 1, t->st.n_params,
	       100.0 * (double)t->st.n_params / (double)total, total, (double)ru.ru_maxrss / 1024.0);
	fflush(stdout);
}

/* Set-up can fail on one rank only (a file missing on one node): all ranks
 * agree before the loop, so that none waits for a peer that gave up. */
static int agree(struct trainer *t, int rc)
{
	struct dt_err e2 = { 0 };
	int bad = -1, code = rc, mrc;

	if (rt_mpi_first_failure(rc != 0, &bad, &e2))
		return dt_err_add(t->err, "%s", e2.msg), -EIO;
	if (bad < 0)
		return 0;
	/* the failing rank's code, so that running out of memory is not
	 * reported as a spec that does not fit (exit 3) */
	mrc = MPI_Bcast(&code, 1, MPI_INT, bad, MPI_COMM_WORLD);
	if (mrc != MPI_SUCCESS)
		return mpi_fail(t, "MPI_Bcast of a set-up failure", mrc);
	if (t->g->rank != bad)
		dt_err_clear(t->err); /* the failing rank reports */
	else if (code == -ENOMEM && !t->err->count)
		dt_err_add(t->err, "rank %d: out of memory while setting up training", t->g->rank);
	return code == -ENOMEM ? -ENOMEM : -EINVAL;
}

int rt_train(const struct spec *s, struct rt_grid *g, const struct rt_train_opts *opts,
	     struct dt_err *err)
{
	struct trainer t;
	int rc;

	memset(&t, 0, sizeof(t));
	t.t_proc = now_s();
	t.s = s;
	t.g = g;
	t.err = err;
	t.stage = g->coord[RT_DIM_PIPE];
	t.stages = g->size[RT_DIM_PIPE];
	t.replica = g->coord[RT_DIM_DATA];
	t.replicas = g->size[RT_DIM_DATA];
	t.micro = (int)s->parallel.micro_batches;
	t.prev = t.stage > 0 ? t.stage - 1 : -1;
	t.next = t.stage < t.stages - 1 ? t.stage + 1 : -1;
	t.split_slow_ms = fault_split_slow(g->rank);
	rt_blas_threads((int)s->resources.cpus_per_task);

	rc = open_data(&t);
	if (!rc)
		rc = build_stage(&t);
	if (!rc)
		rc = alloc_slots(&t);
	if (!rc)
		rc = build_buckets(&t);
	rc = agree(&t, rc);
	if (!rc)
		rc = agree(&t, rt_dp_init(&t.dp, s, g, &t.st, &t.opt, (int)t.max_rows, err));
	if (!rc && t.dp.split)
		rc = agree(&t, rt_acts_place(&t.split_acts, &t.st, t.dp.node_rows, t.dp.acts_mem));
	if (!rc)
		rc = choose_threads(&t, opts);
	if (rc)
		goto out;
	open_metrics(&t);
	rc = rt_ckpt_init(&t.ck, s, g, &t.st, &t.opt, &t.dp, t.first, t.train.n, t.metrics, opts->quiet,
			  err);
	if (!rc) {
		struct rt_ckpt_pos pos = { 0, rt_sampler_steps(&t.sampler), total_steps(&t) };

		rc = rt_ckpt_resume(&t.ck, &pos, &t.start_step, err);
	}
	if (!rc)
		rc = train_loop(&t, opts);
	if (!rc)
		report_rank(&t);
	if (!rc && opts->save_params)
		rc = save_params(&t, opts->save_params);
out:
	free_trainer(&t, rc == 0 || rc == -ERANGE || rc == -EINVAL || rc == -EAGAIN || rc == -ECANCELED);
	return rc;
}
