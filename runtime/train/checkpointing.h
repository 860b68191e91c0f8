/*
 * checkpointing.h - dtrain-run's side of checkpoints (checkpoint/ckpt.h has
 * the files): who writes what and when, the commit agreed over MPI, resume
 * on any layout, and preemption signals turned into a save.
 *
 * Who writes: replica (k mod data) of pipeline stage k writes shard k, so
 * the writes spread over the replicas; world rank 0 (replica 0 of stage 0)
 * also writes the root file model.h5 and commits. Every replica of a stage
 * holds bitwise the same parameters and optimizer state (they apply the
 * same update to the same allreduced gradients), so any of them can write.
 * With a sharded optimizer (runtime/parallel/shard.h) shard k holds the parameters,
 * and every replica r of stage k writes its own state, optim-<k>-<r>.h5,
 * all of them at once; a resume reads each replica's rows of the state
 * from whichever files hold them, so any checkpoint resumes sharded or
 * replicated on any number of replicas.
 *
 * A save (rt_ckpt_save), at a step boundary, on every rank:
 *   1. a save still in flight is finished first (at most one in flight);
 *   2. writers write the shard's HDF5 metadata (a few ms); sync: training
 *      stays stopped while the shard is written from the live tensors;
 *   3. async: a thread copies the stage's parameters and optimizer state
 *      into a host snapshot, then writes the snapshot's bytes, fsyncs and
 *      checksums while training goes on. The next step's forward and
 *      backward passes only read the parameters and state, so they run
 *      during the copy; rt_ckpt_wait_snapshot(), before anything writes
 *      them, waits for its end (the wait counts as the save's stall).
 *      rt_ckpt_poll() at each later step boundary
 *      notices (one allreduce) when every writer is done and gathers sizes
 *      and checksums on rank 0, whose thread then commits (manifest,
 *      rename, latest, deleting old checkpoints) while training goes on.
 *      sync: the same, at once, and every rank learns the outcome.
 * A failed periodic save is reported and training goes on (the previous
 * checkpoint stays); a failed final or preemption save is an error. A save
 * is reported saved only when its own commit renamed it into place: a
 * step-N directory already there (an older run's, a damaged one resumed
 * past) never counts as this save.
 *
 * Rank 0 makes each save's tmp directory afresh (ckpt_tmp_make) and says
 * so in one broadcast before any rank writes into it: nothing planted in
 * a shared checkpoint directory is written through (checkpoint/ckpt.h).
 *
 * Preemption: SIGTERM and spec preemption.signal only set a flag
 * (runtime/world/preempt.h). rt_ckpt_poll() reduces it over all ranks at every step
 * boundary; when set, the trainer saves synchronously and returns -EAGAIN
 * (dtrain-run exits 75: "requeue me"). Later signals change nothing: under
 * srun a task gets SIGTERM twice (from slurmstepd and through srun).
 *
 * Resume (rt_ckpt_resume): checkpoint.resume "auto" takes the newest
 * checkpoint of this run whose files all verify (the verification is spread
 * over the ranks), falling back to older ones with a warning naming the bad
 * file; a path (a checkpoint, or a directory of them) is where a run starts
 * when it has none of its own yet. The checkpoint's model must be this
 * model, with the same optimizer, global batch and training set size; data
 * and pipeline may differ: each stage's first replica reads its layers
 * from whichever shards hold them and broadcasts them to its replicas.
 *
 * Everything here is collective over MPI_COMM_WORLD unless said otherwise.
 * Sections: life cycle, resume, saving.
 */
#ifndef DTRAIN_RUNTIME_CHECKPOINTING_H
#define DTRAIN_RUNTIME_CHECKPOINTING_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "checkpoint/ckpt.h"
#include "jobs/spec.h"
#include "runtime/world/grid.h"
#include "runtime/model/model.h"
#include "runtime/parallel/dp.h"
#include "runtime/model/optim.h"
#include "runtime/parallel/shard.h"
#include "base/err.h"

struct rt_bpe; /* runtime/data/bpe.h */

/* Where the trainer stands at a step boundary. */
struct rt_ckpt_pos {
	int64_t step;            /* steps taken */
	int64_t steps_per_epoch;
	int64_t total_steps;
};

struct rt_ckpt {
	/* borrowed from the trainer, valid for the life of this struct */
	const struct spec *s;
	const struct rt_grid *g;
	struct rt_stage *st;
	struct rt_optim *opt;
	const struct rt_dp *dp;  /* makes the replicas' copies equal after a load */
	const struct rt_shard *shard; /* sharded optimizer: this replica's rows, or NULL */
	const int *first;        /* [pipeline + 1]: the stage split */
	FILE *metrics;           /* rank 0's metrics.jsonl, or NULL */
	int64_t train_rows;
	bool quiet;              /* no progress lines */

	/* the model's tensors as checkpoints list them: this stage's (offsets
	 * into its buffers) and, on rank 0, the whole model's (owned) */
	struct ckpt_tensor *stage_tensors;
	int n_stage_tensors;
	struct ckpt_tensor *model_tensors;
	int n_model_tensors;

	char dir[4096];          /* the checkpoint directory; "" when off */
	/* dir held open by every rank that saves, from rt_ckpt_init on: every
	 * save and retention works relative to it (checkpoint/ckpt.h, struct
	 * ckpt_dir), never through dir's path again; .path NULL: not open */
	struct ckpt_dir held;
	char spec_hash[17];
	bool writer;             /* this rank writes its stage's shard */
	int64_t last_step;       /* newest step committed or resumed from; -1 */

	/* the save in flight: phase 1, writing (every writer, on its thread) */
	bool inflight;
	bool async;              /* this save does not block training */
	bool thread_running;     /* thread (writer, then rank 0's commit) to join */
	pthread_t thread;
	atomic_int thread_done;
	/* the async snapshot copy on the writer thread: copy_pending is 1
	 * from rt_ckpt_save until the copy is made (set by the main thread,
	 * cleared under copy_lock by the writer, which then signals copy_cond) */
	atomic_int copy_pending;
	bool copy_sync_ready;    /* copy_lock and copy_cond initialised */
	pthread_mutex_t copy_lock;
	pthread_cond_t copy_cond;
	struct ckpt_meta *meta;  /* owned; the save's */
	struct ckpt_shard_writer w;  /* the stage's shard (writer) */
	struct ckpt_shard_writer wp; /* sharded: this replica's optimizer piece */
	struct ckpt_root_cache root_cache; /* rank 0: model.h5 of the last save */
	int local_rc;            /* this rank's outcome: begin, then write */
	struct dt_err local_err;
	uint64_t root_size;
	uint32_t root_crc;
	char tmp[4200];          /* the save's .tmp directory */
	struct ckpt_dir tmp_held; /* it, held open by this rank; .path NULL: not open */
	double stall_s;          /* main-thread time of this save, this rank,
				  * rt_ckpt_wait_snapshot's wait included */
	double t_start;          /* when the save began (monotonic s) */
	/* phase 2, rank 0 only: the gathered results and the commit, which
	 * runs on rank 0's thread for an async save */
	bool committing;
	atomic_int commit_done;
	int failed;              /* first rank that could not write its part, or -1 */
	struct ckpt_file *files; /* [n_files], owned: root, shards, pieces, and
				  * on rank 0 the tokenizer's files */
	int n_files;
	struct rt_bpe *bpe;      /* rank 0: data.train's tokenizer, recorded in
				  * every save (checkpoint/ckpt.h), or NULL */
	struct ckpt_file tok_files[2]; /* its files in the save in flight */
	int n_tok_files;         /* rank 0: their count, 0, 1 or 2 */
	uint64_t bytes;
	double max_stall_s, max_write_s;
	int commit_rc;
	bool committed;          /* this save's rename happened (ckpt_commit
				  * says; whatever stands at step-N otherwise
				  * is not this save) */
	struct dt_err commit_err;
	double commit_s, t_done;
};

/* --- life cycle --- */

/* Sets c up for a trainer: the checkpoint directory is checkpoint.dir, else
 * <run_dir>/checkpoints, else none (saving off; an error when
 * checkpoint.every_steps asks for saves). Rank 0 creates it and removes
 * leftovers of crashed saves. st, opt, dp, shard (NULL: replicated), first
 * and metrics are borrowed.
 * 0, -EINVAL (every rank; rank 0 has the message), or -EIO. */
int rt_ckpt_init(struct rt_ckpt *c, const struct spec *s, const struct rt_grid *g,
		 struct rt_stage *st, struct rt_optim *opt, const struct rt_dp *dp,
		 const struct rt_shard *shard, const int *first, int64_t train_rows, FILE *metrics,
		 bool quiet, struct dt_err *err);
/* Joins a thread still running (error paths) and frees; not collective. */
void rt_ckpt_free(struct rt_ckpt *c);

/* A model's tensors t [n] as checkpoints list them (checkpoint/ckpt.h), at
 * their offsets in the stage's buffers: *out [n] (caller frees). 0 or
 * -ENOMEM. */
int rt_ckpt_tensors(const struct rt_tensor *t, int n, struct ckpt_tensor **out);
/* The whole model of s as a checkpoint lists it: every block's tensors at
 * their offsets in one buffer of the whole model, into *out [*n] (caller
 * frees, also after a failure). 0, -EINVAL (unknown model) or -ENOMEM,
 * with a message. */
int rt_ckpt_model_table(const struct spec *s, struct ckpt_tensor **out, int *n, struct dt_err *err);

/* --- resume --- */

/* Restores parameters, optimizer state and position from the checkpoint
 * checkpoint.resume selects; *step = the step to continue from (0 when
 * there is none). 0; -EINVAL on every rank for a checkpoint that cannot
 * be used (another model, a damaged explicit path...; the reporting rank
 * has the message); -EIO for MPI failures. */
int rt_ckpt_resume(struct rt_ckpt *c, const struct rt_ckpt_pos *pos, int64_t *step,
		   struct dt_err *err);

/* --- saving --- */

/* At every step boundary: agrees on a stop signal and commits an async
 * save whose writes are all done. *stop_sig = 0 (go on), or the stop
 * signal some rank got (the highest number when ranks got different ones),
 * the same on every rank: rank 0 can name it even when its own copy of the
 * signal has not arrived yet. 0 or -EIO. */
int rt_ckpt_poll(struct rt_ckpt *c, int *stop_sig, struct dt_err *err);

/* Saves the state at pos->step (see above). A step already saved is not
 * saved again. sync: returns after the commit; a save that failed (and was
 * reported) gives -ECANCELED on every rank. async: returns after the HDF5
 * metadata, the snapshot copy still running: the caller may read the
 * parameters and optimizer state, and must call rt_ckpt_wait_snapshot()
 * before it changes them. -EIO: an MPI failure. */
int rt_ckpt_save(struct rt_ckpt *c, const struct rt_ckpt_pos *pos, bool sync, struct dt_err *err);

/* Returns when the snapshot copy of an async save in flight is made, so
 * that the parameters and optimizer state may change; the time it waited
 * is added to the save's stall. A cheap no-op when no copy is running.
 * Not collective. The trainer calls it after the next step's backward
 * pass, before the gradients are reduced: with parameters shared between
 * the replicas of a node (runtime/parallel/dp.h), the others update their parts
 * once every replica has passed that barrier (the split way has one only
 * while rt_ckpt_async_inflight). Every other writer of the state (resume,
 * the next save, rt_ckpt_free) waits on its own. */
void rt_ckpt_wait_snapshot(struct rt_ckpt *c);
/* An async save is in flight: some writer's snapshot copy may not be made
 * yet. The same on every rank between two step boundaries (saves and
 * rt_ckpt_poll's end of them are collective). */
bool rt_ckpt_async_inflight(const struct rt_ckpt *c);


#endif
