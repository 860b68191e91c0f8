/*
 * train.c - the training loop (see train.h for the data flow of one step).
 *
 * Sections: set-up (model stage, optimizer, data, buffers), evaluation,
 * the loop (train_loop reads as the training story: next batch, forward
 * and backward, optimizer step, log, evaluate, checkpoint). A step's parts
 * are in pipeline.c, grad_sync.c and split_step.c, what the run tells in
 * metrics.c (trainer.h says which does what).
 */
#include "runtime/train/trainer.h"

#include "base/fault.h"
#include "base/json.h"

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

#include "runtime/world/bootstrap.h"
#include "runtime/train/checkpointing.h"
#include "runtime/data/data.h"
#include "runtime/parallel/dp.h"
#include "runtime/kernels/kernels.h"
#include "runtime/model/model.h"
#include "runtime/model/optim.h"
#include "runtime/world/pool.h"
#include "runtime/world/preempt.h"
#include "runtime/data/sampler.h"
#include "runtime/data/tokens.h"

/* Message tags: training micro-batches use their index, evaluation chunks
 * this offset plus theirs. */
#define TAG_EVAL 1000000

/* --- set-up --- */

/* Keep in memory what this stage reads (features on the first stage, labels
 * on the last) when it is small; otherwise rows are read at each step.
 * DTRAIN_DATA_LOAD_ALL_BYTES moves the line (0: always read per step). */
#define LOAD_ALL_BYTES (1ll << 30)

static int load_shares(struct trainer *t)
{
	int first = t->stage == 0, last = t->stage == t->stages - 1, rc = 0;
	const char *v = getenv("DTRAIN_DATA_LOAD_ALL_BYTES");
	long long most = LOAD_ALL_BYTES;
	char *end;

	if (v && *v) {
		most = strtoll(v, &end, 10);
		if (*end || most < 0)
			return dt_err_add(t->err, "DTRAIN_DATA_LOAD_ALL_BYTES: expected a byte count (got \"%s\")", v);
	}
	if (rt_data_bytes(&t->train) <= most)
		rc = rt_data_load_all(&t->train, first, last, t->err);
	if (!rc && t->has_test && rt_data_bytes(&t->test) <= most)
		rc = rt_data_load_all(&t->test, first, last, t->err);
	return rc;
}

static int open_data(struct trainer *t)
{
	const struct spec *s = t->s;
	const struct rt_model_ops *ops = rt_model_find(s, t->err);
	int rc;

	if (!ops)
		return -EINVAL;
	rc = rt__open_sets(s, ops, &t->train, &t->test, &t->has_test, t->err);
	if (rc)
		return rc;
	/* the loss reads the model's outputs as labels rows of classes each */
	t->labels = t->train.labels;
	t->classes = (int)(ops->width(s, ops->blocks(s)) / t->labels);
	rc = load_shares(t);
	if (rc)
		return rc;
	return rt_sampler_init(&t->sampler, t->train.n, s->train.global_batch,
			       (uint64_t)s->train.seed, s->data.shuffle, t->err);
}

/* The stage's tensors declared without weight decay, as ranges of its
 * parameters for the optimizer (adjacent ones merged). */
static int exempt_from_decay(struct trainer *t)
{
	struct rt_span *sp = calloc((size_t)t->st.n_tensors, sizeof(*sp));
	int i, n = 0, rc;

	if (!sp)
		return dt_err_add(t->err, "rank %d: out of memory for %d tensors' spans", t->g->rank,
				  t->st.n_tensors), -ENOMEM;
	for (i = 0; i < t->st.n_tensors; i++) {
		const struct rt_tensor *tt = &t->st.tensors[i];

		if (tt->decay)
			continue;
		if (n > 0 && sp[n - 1].first + sp[n - 1].count == tt->offset)
			sp[n - 1].count += tt->n;
		else
			sp[n++] = (struct rt_span){ tt->offset, tt->n };
	}
	rc = rt_optim_no_decay(&t->opt, sp, n);
	free(sp);
	if (rc)
		dt_err_add(t->err, "rank %d: out of memory for %d spans without weight decay",
			   t->g->rank, n);
	return rc;
}

static int build_stage(struct trainer *t)
{
	const struct spec *s = t->s;
	int rc;

	/* parallel.stage_layers when set (checked there), else balanced */
	rc = rt_stage_split(s, t->stages, t->first, t->err);
	if (rc)
		return rc;
	rc = rt_stage_init_on(&t->st, t->dev, s, t->stage, t->stages, t->first, t->err);
	if (rc)
		return rc;
	t->in = t->st.in;
	t->out = t->st.out;
	/* sharded: the state of this replica's rows only (runtime/parallel/shard.h) */
	t->sharded = spec_optimizer_sharded(s) && t->replicas > 1;
	if (t->sharded) {
		rc = rt_shard_init(&t->shard, &t->st, t->g->data_comm, t->replicas, t->replica, t->err);
		if (rc)
			return rc;
	}
	rc = rt_optim_init(&t->opt, s, t->sharded ? t->shard.floats : t->st.n_params, t->err);
	if (!rc)
		rc = exempt_from_decay(t);
	if (!rc)
		rc = rt__dev_state(t);
	rt_pool_init(&t->pool, (int)s->resources.cpus_per_task);
	t->opt.pool = &t->pool;
	t->part_loss = calloc((size_t)rt_pool_gang_size(&t->pool), sizeof(*t->part_loss));
	t->part_correct = calloc((size_t)rt_pool_gang_size(&t->pool), sizeof(*t->part_correct));
	if (!rc && (!t->part_loss || !t->part_correct)) {
		dt_err_add(t->err, "rank %d: out of memory for the threads' loss sums", t->g->rank);
		rc = -ENOMEM;
	}
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
		return dt_err_add(t->err, "rank %d: out of memory for %d micro-batch slots", t->g->rank,
				  t->n_slots), -ENOMEM;
	for (i = 0; i < t->n_slots; i++) {
		struct slot *sl = &t->slots[i];

		sl->send_fwd = sl->send_bwd = MPI_REQUEST_NULL;
		rc = rt_acts_init(&sl->acts, &t->st, (int)t->max_rows);
		if (rc)
			return dt_err_add(t->err, "rank %d: out of %s memory for activations", t->g->rank,
					  t->dev->host ? "host" : "device"), rc;
		rc = rt__dev_slot(t, sl);
		if (rc)
			return rc;
	}
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
		rt__dev_slot_free(t, &t->slots[i]);
	}
	free(t->slots);
	free(t->buckets);
	free(t->block_bucket);
	free(t->part_loss);
	free(t->part_correct);
	rt__ranks_free(t);
	rt__ties_free(t);
	rt_ckpt_free(&t->ck);
	if (together)
		rt_dp_free(&t->dp, &t->st, &t->opt);
	else
		rt_dp_abandon(&t->dp, &t->st, &t->opt);
	rt__dev_state_free(t);
	rt_optim_free(&t->opt);
	rt_shard_free(&t->shard);
	rt_pool_free(&t->pool);
	rt_stage_free(&t->st);
	rt_sampler_free(&t->sampler);
	rt_data_close(&t->train);
	if (t->has_test)
		rt_data_close(&t->test);
	if (t->metrics)
		fclose(t->metrics);
}

/* --- evaluation --- */

/* Loss and accuracy over a data set's first *n samples (train.eval_samples;
 * 0: all, the count used back in *n); every rank gets the totals. */
static int evaluate(struct trainer *t, struct rt_data *d, int64_t *n, double *loss, double *acc)
{
	int64_t off, count, done, n_chunks, c;
	int64_t *idx = NULL;
	double tot[2] = { 0, 0 };
	int64_t correct = 0;
	struct times keep = t->tm; /* evaluation is not part of the steps' times */
	int rc = 0, i;

	*n = t->s->train.eval_samples > 0 && t->s->train.eval_samples < d->n ? t->s->train.eval_samples :
									      d->n;
	rt_sampler_slice(*n, t->replicas, t->replica, &off, &count);
	idx = malloc((size_t)(count ? count : 1) * sizeof(int64_t));
	if (!idx)
		return dt_err_add(t->err, "rank %d: out of memory for the evaluation's %lld row indices",
				  t->g->rank, (long long)count), -ENOMEM;
	for (i = 0; i < count; i++)
		idx[i] = off + i;
	n_chunks = (count + t->max_rows - 1) / t->max_rows;
	if (t->tsplit) /* whole products here: OpenBLAS's threads, for a while */
		rt_blas_threads(t->pool.threads);
	t->dev->ops->loss_zero(t->dev);
	for (c = 0, done = 0; c < n_chunks; c++) {
		struct mb m = { .idx = idx + done,
				.rows = count - done < t->max_rows ? count - done : t->max_rows,
				.tag = TAG_EVAL + (int)(c % 1000000), .data = d };

		rt_watchdog_progress(t->wd); /* a large test set is many chunks */
		rc = rt__forward_mb(t, &t->slots[c % t->n_slots], &m, 0);
		if (rc)
			goto out;
		done += m.rows;
	}
	rc = rt__wait_sends(t);
	if (!rc && t->stage == t->stages - 1)
		rc = t->dev->ops->loss_fetch(t->dev, &tot[0], &correct, t->err);
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
	*loss = tot[0] / ((double)*n * (double)t->labels);
	*acc = tot[1] / ((double)*n * (double)t->labels);
out:
	if (t->tsplit)
		rt_blas_threads(1);
	t->tm = keep;
	free(idx);
	return rc;
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
	rc = rt__dev_to_host(t); /* the host's copy of a device's parameters */
	for (l = 0; l < t->st.n_blocks && !rc; l++) {
		const struct rt_block *b = &t->st.blocks[l];
		char path[4200];

		snprintf(path, sizeof(path), "%s/%s-%d.f32", dir, t->st.ops->block_noun, b->index);
		rc = dt_write_file_atomic(path, rt__ckpt_stage(t)->params + b->offset,
					  b->n_params * sizeof(float), 0644);
		if (rc)
			dt_err_add(t->err, "%s: cannot write: %s", path, strerror(-rc));
	}
	return rc;
}

/* --- the loop --- */

static int check_finite(struct trainer *t, int64_t step, double loss, double norm)
{
	int rc;

	if (isfinite(loss) && isfinite(norm))
		return 0;
	/* a device's failure (its sums then NaN) is this rank's, with its
	 * own message, not a divergence */
	if ((rc = rt_dev_sync(t->dev, t->err)))
		return rc;
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
	*norm = NAN; /* set on every path: gcc -O3 cannot see that MPI_CHECK's return is not 0 */
	if (t->stages > 1)
		MPI_CHECK(t, MPI_Allreduce(MPI_IN_PLACE, &sumsq, 1, MPI_DOUBLE, MPI_SUM,
					   t->g->pipe_comm));
	*norm = sqrt(sumsq);
	return 0;
}

/* Clip (train.grad_clip) and update what this replica owns (grad_sync.c:
 * all the parameters, its part of them, or its parts of every block), in
 * one pass that leaves the gradient it read zero for the next step's
 * backward passes to add to; with clipping the norm must be known first,
 * which costs a second pass (rt_sumsq). stats: the step's loss sum and
 * correct count, this replica's on entry, all replicas' on return. */
static int update(struct trainer *t, int64_t step, double stats[2], int64_t batch_rows, double lr,
		  double *norm)
{
	struct rt_span whole;
	const struct rt_span *sp;
	double clip = t->s->train.grad_clip, sumsq = 0.0;
	double dup = rt__ties_dup_sumsq(t); /* a tied parameter counts once */
	int n, rc = 0;

	rt__grad_sync_owned(t, &whole, &sp, &n);
	if (!rt__grad_sync_sums_stats(t) && (rc = reduce_stats(t, stats)))
		return rc;
	if (clip > 0) {
		sumsq = rt__grad_sync_sumsq(t, sp, n) - dup;
		rc = rt__grad_sync_sums(t, stats, &sumsq);
		if (!rc)
			rc = reduce_norm(t, sumsq, norm);
		if (!rc)
			rc = check_finite(t, step, stats[0] / ((double)batch_rows * t->labels), *norm);
		if (rc)
			return rc;
		rt__grad_sync_update(t, sp, n, lr, (float)rt_clip_factor(*norm, clip));
		return rt__grad_sync_publish(t, true);
	}
	/* a NaN gradient is only seen after the update here; the run stops
	 * then, and nothing saves these parameters */
	sumsq = rt__grad_sync_update(t, sp, n, lr, 1.0f) - dup;
	rc = rt__grad_sync_sums(t, stats, &sumsq);
	if (!rc)
		rc = rt__grad_sync_publish(t, false);
	if (!rc)
		rc = reduce_norm(t, sumsq, norm);
	return rc ? rc : check_finite(t, step, stats[0] / ((double)batch_rows * t->labels), *norm);
}

/* Steps of the whole run: train.epochs epochs, cut by train.max_steps. */
static int64_t total_steps(const struct trainer *t)
{
	int64_t per_epoch = rt_sampler_steps(&t->sampler), total = t->s->train.epochs * per_epoch;

	if (t->s->train.max_steps > 0 && (total == 0 || t->s->train.max_steps < total))
		total = t->s->train.max_steps;
	return total;
}

/* The host copies a save writes made equal to the device's state at step
 * `step`, unless the replicas' check made them already. */
static int host_copies(struct trainer *t, int64_t step)
{
	int rc;

	if (t->host_step == step)
		return 0;
	rc = rt__dev_to_host(t);
	if (!rc)
		t->host_step = step;
	return rc;
}

/* One save at step pos->step: the watchdog told, the replicas checked, the
 * host copies made, then the checkpoint written (and waited for when sync). */
static int save_at(struct trainer *t, const struct rt_ckpt_pos *pos, bool sync)
{
	int rc;

	rt_watchdog_beat(t->wd, pos->step, DT_PHASE_SAVE);
	rc = rt__replicas_check(t, pos->step);
	if (!rc)
		rc = host_copies(t, pos->step);
	if (!rc)
		rc = rt_ckpt_save(&t->ck, pos, sync, t->err);
	return rc;
}

/* At a step boundary: a stop signal means save now and leave (-EAGAIN);
 * otherwise a periodic save when one is due. */
static int checkpoint_point(struct trainer *t, int64_t step, int64_t total, int64_t per_epoch,
			    const struct rt_train_opts *opts)
{
	const struct spec *s = t->s;
	struct rt_ckpt_pos pos = { step, per_epoch, total };
	int sig = 0, due, rc;

	/* sig: the signal the ranks agreed on, whichever rank got it first */
	rc = rt_ckpt_poll(&t->ck, &sig, t->err);
	if (rc)
		return rc;
	if (sig) {
		if (t->g->rank == 0 && !opts->quiet) {
			if (rt_preempt_by_deadline())
				printf("dtrain-run: the job's time limit is near (DTRAIN_STOP_AT): saving at step %lld, then exiting for a requeue\n",
				       (long long)step);
			else
				printf("dtrain-run: %s received: saving at step %lld, then exiting for a requeue\n",
				       strsignal(sig), (long long)step);
			fflush(stdout);
		}
		dt_json_line(t->metrics, "{\"event\":\"stop\",\"step\":%lld,\"signal\":\"%s\","
			     "\"unix_time\":%.3f}", (long long)step, sigabbrev_np(sig), dt_wall_s());
		rc = save_at(t, &pos, true);
		if (rc == -ECANCELED && t->g->rank == 0)
			dt_err_add(t->err, "stopped at step %lld without saving it (see above); a resume "
				   "starts from the newest saved checkpoint", (long long)step);
		return rc ? rc : -EAGAIN;
	}
	due = rt__cadence_due(t, step);
	if (due < 0)
		return due;
	if ((due || (s->checkpoint.every_steps > 0 && step % s->checkpoint.every_steps == 0)) &&
	    step < total) {
		rc = save_at(t, &pos, !s->checkpoint.async);
		if (!rc)
			rt__cadence_saved(t, step);
		return rc;
	}
	return 0;
}

/* The rows of step `step`: this replica's share of the global batch, cut
 * into micro-batches; *batch_rows is the global batch's. */
/* The split way: the node's replicas' rows of micro-batch m, as the
 * sampler cut them, and where this replica's start among them. */
static void node_share(const struct trainer *t, int64_t at, struct mb *m)
{
	const int64_t *idx;
	int64_t rows;
	int j;

	for (j = 0; j < t->dp.locals; j++) {
		rt_sampler_micro(&t->sampler, at, t->dp.coords[j], t->replicas, m->tag, t->micro,
				 &idx, &rows);
		if (j == t->dp.local)
			m->node_off = m->node_rows;
		m->node_rows += rows;
	}
}

static int next_batch(struct trainer *t, int64_t step, int64_t per_epoch, struct mb *mbs,
		      int64_t *batch_rows)
{
	int64_t at = step % per_epoch;
	int rc, i;

	rc = rt_sampler_epoch(&t->sampler, step / per_epoch); /* no-op within an epoch */
	if (rc)
		return rc;
	*batch_rows = rt_sampler_rows(&t->sampler, at);
	for (i = 0; i < t->micro; i++) {
		mbs[i] = (struct mb){ .tag = i, .data = &t->train };
		rt_sampler_micro(&t->sampler, at, t->replica, t->replicas, i, t->micro, &mbs[i].idx,
				 &mbs[i].rows);
		if (t->dp.split)
			node_share(t, at, &mbs[i]);
	}
	return 0;
}

/* Forward and backward of every micro-batch in the schedule, and the
 * gradients summed over the replicas as the way of parallel.grad_sync
 * does it (buckets during backward, or the split step's own sums). The
 * backward passes add to the gradient, which the last update left zero
 * (rt_optim_step_spans, rt_optim_step_sum and rt_dp_reduce zero what they
 * read): no pass zeroes it. */
static int forward_backward(struct trainer *t, const struct mb *mbs, int64_t batch_rows)
{
	int rc;

	t->grad_scale = 1.0f / (float)(batch_rows * t->labels);
	rt__grad_sync_arm(t);
	rc = t->dp.split || t->tsplit ? rt__split_schedule(t, mbs) : rt__run_schedule(t, mbs);
	/* an async save's copy of the state is taken before the state may
	 * change; while its writer still runs it reads every replica's blocks */
	rt_ckpt_wait_snapshot(&t->ck);
	if (!rc)
		rc = rt__grad_sync_finish(t, rt_ckpt_async_inflight(&t->ck));
	if (!rc)
		rc = rt__ties_sum(t);
	if (!rc)
		rc = rt__wait_sends(t);
	return rc;
}

/* The step's loss and accuracy reduced, the gradient's norm, clipping and
 * the update at the step's learning rate. */
static int optimizer_step(struct trainer *t, int64_t step, int64_t total, int64_t batch_rows,
			  double *loss, double *lr, double *norm)
{
	double stats[2] = { t->loss_sum, (double)t->correct };
	double t_opt = dt_mono_s(), grad_before = t->tm.grad;
	int rc;

	*lr = rt_lr_at(t->s, step, total);
	rc = update(t, step, stats, batch_rows, *lr, norm);
	if (rc)
		return rc;
	*loss = stats[0] / ((double)batch_rows * t->labels);
	/* the split way's sums wait for the other replicas: gradient sync */
	t->tm.optim += dt_mono_s() - t_opt - (t->tm.grad - grad_before);
	return 0;
}

/* train.eval_every, or each epoch's end; and the last step */
static bool eval_due(const struct trainer *t, int64_t step, int64_t per_epoch, int64_t total)
{
	int64_t every = t->s->train.eval_every > 0 ? t->s->train.eval_every : per_epoch;

	return step % every == 0 || step == total;
}

/* The test set's loss and accuracy. */
static int evaluate_at(struct trainer *t, int64_t step, int64_t epoch, bool quiet)
{
	double loss = 0, acc = 0;
	int64_t n = 0;
	int rc = evaluate(t, &t->test, &n, &loss, &acc);

	if (!rc)
		rt__log_eval(t, step, epoch, n, loss, acc, quiet);
	return rc;
}

/* The end of training is a checkpoint too. */
static int final_save(struct trainer *t, int64_t step, int64_t per_epoch, int64_t total)
{
	struct rt_ckpt_pos pos = { step, per_epoch, total };
	int rc = save_at(t, &pos, true);

	if (rc == -ECANCELED && t->g->rank == 0)
		dt_err_add(t->err, "training finished, but its final checkpoint (step %lld) could "
			   "not be saved (see above)", (long long)step);
	return rc;
}

/* The training story, one step after another. */
static int train_loop(struct trainer *t, const struct rt_train_opts *opts)
{
	int64_t per_epoch = rt_sampler_steps(&t->sampler), total = total_steps(t);
	int64_t step = t->start_step, epoch, batch_rows;
	struct rt_progress pg = { .quiet = opts->quiet };
	double loss, lr, norm;
	struct mb *mbs;
	int rc = 0;

	mbs = calloc((size_t)t->micro, sizeof(*mbs));
	if (!mbs)
		return dt_err_add(t->err, "rank %d: out of memory for %d micro-batches", t->g->rank,
				  t->micro), -ENOMEM;
	rt__log_start(t, &pg, step, total, per_epoch);
	while (step < total) {
		epoch = step / per_epoch;
		rt_watchdog_beat(t->wd, step + 1, DT_PHASE_STEP);
		rc = next_batch(t, step, per_epoch, mbs, &batch_rows);
		if (!rc)
			rc = forward_backward(t, mbs, batch_rows);
		if (!rc)
			rc = optimizer_step(t, step, total, batch_rows, &loss, &lr, &norm);
		if (rc)
			break;
		step++;
		rt__replicas_fault(t, step);
		if (t->step_slow_ms)
			dt_fault_sleep(DT_FAULT_STEP, t->g->rank, t->step_slow_ms);
		rc = rt__log_step(t, &pg, step, total, epoch, batch_rows, loss, lr, norm);
		if (!rc && t->has_test && eval_due(t, step, per_epoch, total)) {
			double t_eval = dt_mono_s();

			rt_watchdog_beat(t->wd, step, DT_PHASE_EVAL);
			rc = evaluate_at(t, step, epoch, opts->quiet);
			pg.tw += dt_mono_s() - t_eval; /* not in the training rate */
		}
		rt_watchdog_beat(t->wd, step, DT_PHASE_SYNC);
		if (!rc && t->s->recovery.check_replicas_every > 0 &&
		    step % t->s->recovery.check_replicas_every == 0)
			rc = rt__replicas_check(t, step);
		if (!rc)
			rc = checkpoint_point(t, step, total, per_epoch, opts);
		if (rc)
			break;
	}
	if (!rc)
		rc = final_save(t, step, per_epoch, total);
	rt_watchdog_beat(t->wd, step, DT_PHASE_END);
	if (!rc)
		rt__log_end(t, &pg, step);
	free(mbs);
	return rc;
}

/* CPUs this process may run on (its affinity mask), or 0 when unknown. */
static int cpus_allowed(void)
{
	cpu_set_t set;

	return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
}

/* parallel.threads: whether this rank's threads each compute a part of
 * every block (OpenBLAS then runs on 1 thread, the pool's threads poll
 * between loops) or run OpenBLAS's products. Parts need a model that
 * offers them (rt_stage_can_part), the whole model on the rank and no gradient buckets to start during backward (one
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
	bool shared = rt_machine_oversubscribed(opts->proc, t->pool.threads);

	ok = strcmp(want, "blas") != 0 && t->dev->host && rt_stage_can_part(&t->st) && t->stages == 1 &&
	     (t->replicas == 1 || t->dp.split) &&
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

/* One line per rank: what it held and its peak memory. activations_mib:
 * its micro-batch slots' activations (what forward keeps for backward,
 * and the scratch of backward), in the stage's precision. */
static void report_rank(struct trainer *t)
{
	struct rusage ru;
	size_t total = rt_model_params(t->s);

	double state = (double)t->opt.n * (t->opt.v ? 2.0 : 1.0) * sizeof(float);
	double acts = (double)t->n_slots * (double)rt_acts_floats(&t->st, (int)t->max_rows) * sizeof(float);

	getrusage(RUSAGE_SELF, &ru);
	printf("dtrain-run: rank %d stage %d/%d %ss %d-%d params %zu (%.1f%% of %zu) optimizer_mib %.3f%s activations_mib %.3f peak_rss_mib %.1f\n",
	       t->g->rank, t->stage, t->stages, t->st.ops->block_noun, t->st.first_block,
	       t->st.first_block + t->st.n_blocks - 1, t->st.n_params,
	       100.0 * (double)t->st.n_params / (double)total, total, state / 1048576.0,
	       t->sharded ? " (sharded)" : "", acts / 1048576.0, (double)ru.ru_maxrss / 1024.0);
	fflush(stdout);
}

/* The split way's activations of the node's rows, in dp's window. */
static int acts_place(struct trainer *t)
{
	int rc = rt_acts_place(&t->split_acts, &t->st, t->dp.node_rows, t->dp.acts_mem);

	if (rc == -ENOMEM)
		dt_err_add(t->err, "rank %d: out of memory for the activations of the node's %d rows",
			   t->g->rank, t->dp.node_rows);
	return rc;
}

/* Set-up can fail on one rank only (a file missing on one node): all ranks
 * agree before the loop, so that none waits for a peer that gave up. */
static int agree(struct trainer *t, int rc)
{
	int first;

	rc = rt_agree(rc, t->err, &first);
	if (rc == RT_AGREE_BROKEN)
		return -EIO;
	if (rc == -ENOMEM && first == t->g->rank && !t->err->count)
		dt_err_add(t->err, "rank %d: out of memory while setting up training", t->g->rank);
	return rc == 0 ? 0 : rc == -ENOMEM ? -ENOMEM : -EINVAL;
}

/* This rank's part of the set-up, before the ranks agree on it: the
 * device, the data, the stage, its slots, ties, gradient sync, metrics. */
static int set_up(struct trainer *t)
{
	int rc = rt__dev_check(t);

	if (!rc)
		rc = open_data(t);
	if (!rc)
		rc = build_stage(t);
	if (!rc)
		rc = alloc_slots(t);
	if (!rc)
		rc = rt__ties_init(t);
	if (!rc)
		rc = rt__grad_sync_init(t);
	if (!rc)
		rc = rt__ranks_init(t);
	return rc;
}

int rt_train(const struct spec *s, struct rt_grid *g, const struct rt_train_opts *opts,
	     bool *together, struct dt_err *err)
{
	struct trainer t;
	bool agreed = false; /* rc came out of agree(): every rank has it */
	bool in_loop = false; /* rc came out of the training loop */
	int rc;

	memset(&t, 0, sizeof(t));
	/* freed on every way out, also before rt_dp_init has run */
	t.dp.win = MPI_WIN_NULL;
	t.dp.node = t.dp.cross = MPI_COMM_NULL;
	t.t_proc = dt_mono_s();
	t.s = s;
	t.g = g;
	t.dev = opts->dev ? opts->dev : rt_dev_cpu();
	t.wd = opts->watchdog;
	t.node = opts->proc ? opts->proc->node : "";
	t.host_step = -1;
	t.err = err;
	t.stage = g->coord[RT_DIM_PIPE];
	t.stages = g->size[RT_DIM_PIPE];
	t.replica = g->coord[RT_DIM_DATA];
	t.replicas = g->size[RT_DIM_DATA];
	t.micro = (int)s->parallel.micro_batches;
	t.prev = t.stage > 0 ? t.stage - 1 : -1;
	t.next = t.stage < t.stages - 1 ? t.stage + 1 : -1;
	/* tests make one replica late after every hand-over of the split step:
	 * its first thread sleeps, its other threads and the other ranks go on
	 * (base/fault.h; tests/integration/equivalence.sh) */
	if (!dt_fault(DT_FAULT_SPLIT, "slow", g->rank, &t.split_slow_ms))
		t.split_slow_ms = 0;
	/* tests whose jobs must outlast their signals sleep after each step
	 * rather than train thousands (tests/integration/preempt.sh) */
	if (!dt_fault(DT_FAULT_STEP, "slow", g->rank, &t.step_slow_ms))
		t.step_slow_ms = 0;
	rt_blas_threads((int)s->resources.cpus_per_task);

	rc = agree(&t, set_up(&t));
	if (!rc)
		rc = agree(&t, rt_dp_init(&t.dp, s, g, &t.st, &t.opt, (int)t.max_rows, err));
	if (!rc && t.dp.split)
		rc = agree(&t, acts_place(&t));
	agreed = rc != 0 && rc != -EIO; /* -EIO: agree()'s own MPI failed */
	if (!rc)
		rc = rt__ranks_layout(&t);
	if (!rc)
		rc = rt__mfu_init(&t);
	if (!rc)
		rc = choose_threads(&t, opts);
	if (rc)
		goto out;
	rt__open_metrics(&t);
	rc = rt_ckpt_init(&t.ck, s, g, rt__ckpt_stage(&t), rt__ckpt_optim(&t), &t.dp,
			  t.sharded ? &t.shard : NULL, t.first, t.train.n, t.metrics, opts->quiet, err);
	if (!rc) {
		struct rt_ckpt_pos pos = { 0, rt_sampler_steps(&t.sampler), total_steps(&t) };

		rc = rt_ckpt_resume(&t.ck, &pos, &t.start_step, err);
	}
	if (!rc)
		rc = rt__dev_from_host(&t);
	if (!rc)
		rt__cadence_init(&t, t.start_step);
	if (!rc) {
		rc = train_loop(&t, opts);
		/* in the loop only a divergence, a stop and a failed save are
		 * agreed; anything else (bad data in a batch) is this rank's */
		in_loop = rc != 0;
	}
	if (!rc)
		report_rank(&t);
	if (!rc && opts->save_params)
		rc = save_params(&t, opts->save_params);
out:
	*together = rc == 0 || agreed || rc == -ERANGE || rc == -EAGAIN || rc == -ECANCELED ||
		    rc == -ENOTRECOVERABLE || (rc == -EINVAL && !in_loop);
	free_trainer(&t, *together);
	return rc;
}
