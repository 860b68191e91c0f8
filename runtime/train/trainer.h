/*
 * trainer.h - the state of rt_train (train.h) shared by the files that
 * implement it, private to them (the rt__ prefix):
 *   train.c        set-up, evaluation, the loop, rt_train
 *   pipeline.c     one micro-batch's forward and backward on this stage, and
 *                  the schedules (gpipe, 1f1b) over a step's micro-batches
 *   grad_sync.c    parallel.grad_sync's three ways behind one interface:
 *                  buckets allreduced during the last backward, the node's
 *                  shared parameters, or every block split; or the sharded
 *                  optimizer's reduce-scatter and all-gather (shard.h);
 *                  the update of what this replica owns
 *   tied.c         tied tensors' copies given the same gradient
 *   split_step.c   a step with every block cut into parts between the
 *                  node's replicas and/or the rank's threads
 *   metrics.c      progress lines and metrics.jsonl events
 *   on_device.c    what a stage on a device other than the host needs
 *                  around the loop: host staging, checkpoints' twins
 *   data_sets.c    data.train and data.test opened and checked against the
 *                  model (and rt_check_data, train.h)
 * Every function here is collective over the communicators its work uses;
 * each returns 0 or a negative errno with the message in t->err, unless it
 * says otherwise.
 */
#ifndef DTRAIN_RUNTIME_TRAINER_H
#define DTRAIN_RUNTIME_TRAINER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <mpi.h>

#include "base/err.h"
#include "runtime/train/checkpointing.h"
#include "runtime/data/data.h"
#include "runtime/parallel/dp.h"
#include "runtime/kernels/kernels.h"
#include "runtime/model/device.h"
#include "runtime/model/model.h"
#include "runtime/model/optim.h"
#include "runtime/world/pool.h"
#include "runtime/data/sampler.h"
#include "runtime/parallel/shard.h"
#include "runtime/train/train.h"
#include "runtime/world/agree.h"
#include "runtime/world/watchdog.h"
#include "base/clock.h"

/* --- state --- */

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

/* checkpoint.every_steps "auto" (cadence.c): values every rank agrees on. */
struct rt_cadence {
	bool on;
	bool pending;      /* a save was taken: decide at the next step */
	bool warned;       /* rank 0 said a save outlasts the warning's lead */
	int interruptions; /* this run's preemptions, node failures and crashes so far */
	double m_s;        /* mean time between interruptions, refined */
	double c_s;        /* a save's cost to training: the saves' stall, the most
			    * of any rank, smoothed */
	double step_s;     /* seconds a step, the most of any rank, smoothed */
	int64_t every;     /* steps between saves; 0: not decided */
	int64_t next;      /* the step of the next save; -1: none decided */
	int64_t first;     /* the first save's step: the tenth of this start */
	int64_t saved_at;  /* the last save's step */
	int64_t step0;     /* the window of step_s: from step0 at t0 to the */
	double t0, t_save; /* last save (monotonic s) */
};

/* One micro-batch in flight on this stage: the passes' arrays in device
 * memory, and where the host reads, receives and sends them (on a host
 * device the same arrays, and hout stays NULL: the output is sent from
 * acts; on another, the staging arrays this stage uses, NULL the others:
 * hy on the last stage, hdy and hout on the others, hdx past the first). */
struct slot {
	struct rt_acts acts;
	float *x;        /* device [rows][in]: stage input, read or received */
	int32_t *y;      /* device [rows][labels]: targets (last stage) */
	float *dy;       /* device [rows][out]: gradient of the stage output */
	float *dx;       /* device [rows][in]: gradient of the stage input, sent back */
	float *hx;       /* host: x as read or received */
	int32_t *hy;     /* host: y as read */
	float *hdy;      /* host: dy as received */
	float *hdx;      /* host: dx as sent */
	float *hout;     /* host [rows][out]: the output as sent (not a host device) */
	MPI_Request send_fwd; /* output to the next stage (buffer: hout, or acts) */
	MPI_Request send_bwd; /* dx to the previous stage (buffer: hdx) */
};

/* Whole blocks whose gradients are allreduced together. */
struct bucket {
	size_t off, len;  /* range of stage->grads, in floats */
	int pending;      /* blocks not yet done in the final backward */
	MPI_Request req;
	int started;
};

struct trainer {
	const struct spec *s;
	struct rt_dev *dev; /* borrowed (rt_train_opts): where the stage computes */
	struct rt_grid *g;
	int stage, stages, replica, replicas, micro;
	int prev, next;    /* pipe_comm ranks of the neighbours, or -1 */
	int in, out;       /* floats per sample of the stage input and output */
	int classes;       /* the loss's classes: logits per target */
	int labels;        /* targets per sample: 1, or T for token windows */
	int64_t max_rows;  /* most rows of one micro-batch */
	struct rt_stage st;
	struct rt_optim opt;
	struct rt_dp dp;   /* how replicas sum gradients; shared parameters on a node */
	bool sharded;      /* parallel.optimizer "sharded" over replicas > 1 */
	struct rt_shard shard; /* sharded: this replica's rows, its gradient shard */
	struct rt_acts split_acts; /* dp.split: the node's micro-batch, in dp's window */
	unsigned long long split_slow_ms; /* DTRAIN_FAULT_SPLIT on this rank, or 0 */
	unsigned long long step_slow_ms;  /* DTRAIN_FAULT_STEP on this rank, or 0 */
	bool tsplit;       /* the rank's threads each compute a part of every block */
	struct rt_pool pool; /* threads of the optimizer and of dp's sums */
	struct rt_data train, test;
	int has_test;
	struct rt_sampler sampler;
	struct rt_watchdog *wd; /* told each phase of the loop; NULL: none */
	struct slot *slots;
	int n_slots;
	struct bucket *buckets;
	int n_buckets;
	int *block_bucket; /* bucket of each block of the stage */
	int final_backward; /* the running backward is the step's last one */
	int bucket_rc;      /* a bucket's allreduce failed to start during
			     * backward (message in err); the backward's caller
			     * returns it */
	/* the step in progress */
	double loss_sum;   /* last stage: summed loss of this replica's rows */
	int64_t correct;
	double *part_loss; /* [pool's gang]: each thread's rows' loss and */
	int64_t *part_correct; /* correct count, the head cut by rows (split_schedule) */
	float grad_scale;  /* 1 / targets of the global batch (rows x labels) */
	struct rt_ties *ties; /* tied tensors' copies on this stage (tied.c), or NULL */
	FILE *metrics;     /* rank 0 only */
	int first[CKPT_MAX_BLOCKS + 1]; /* the stage split: stage k owns blocks first[k].. */
	struct rt_ckpt ck; /* saves and resume */
	/* a device that is not the host's: what checkpoints read and write,
	 * host twins of st and opt whose arrays (params; m, v) are host
	 * copies made before each save and put back after a resume
	 * (on_device.c); on a host device ck borrows st and opt themselves */
	struct rt_stage host_st;
	struct rt_optim host_opt;
	float *hgrads;     /* host [n_params]: the gradients as MPI sums them (a
			    * device not the host's, without its own allreduce
			    * or with the sharded optimizer) */
	int64_t start_step; /* where this process started (> 0 after a resume) */
	double t_proc;     /* when rt_train started (monotonic seconds) */
	struct times tm;   /* this rank, the current log window */
	struct rt_cadence cad; /* checkpoint.every_steps "auto" */
	int64_t checked_step; /* the replicas' last check (replicas.c) */
	int64_t host_step;  /* the step whose state the host copies hold (a device
			     * other than the host's: rt__dev_to_host); -1: none */
	/* every rank's part of the metrics (ranks.c) */
	const char *node;  /* this rank's node (bootstrap.h's rt_proc), "" unknown */
	double *rank_vals; /* rank 0: [world][7] every rank's values of a log window */
	char *rank_names;  /* rank 0: [world][RT_NODE_NAME] every rank's node */
	int *rank_place;   /* rank 0: [world][2] every rank's stage and replica */
	/* model FLOPs utilization (mfu.c) */
	double flops_per_token; /* a GPT's training FLOPs per token; 0: no MFU */
	double peak_flops_node; /* FLOP/s of one node at its peak; 0: unknown */
	const char *peak_source; /* "declared", "measured", "recorded" or "none" */
	char hardware[160];      /* rank 0's: the CPU's model, or the GPU's name */
	int nodes;         /* rank 0: the job's nodes (distinct node names) */
	struct dt_err *err;
};

/* Bytes of a node's name in the metrics (bootstrap.h's rt_proc.node). */
#define RT_NODE_NAME 64


#define MPI_CHECK(t, call)                                  \
	do {                                                \
		int mpi_rc_ = (call);                       \
		if (mpi_rc_ != MPI_SUCCESS)                 \
			return rt_mpi_error((t)->err, #call, mpi_rc_); \
	} while (0)

/* One micro-batch of a step: which rows, from which data set. */
struct mb {
	const int64_t *idx; /* rows of the data set */
	int64_t rows;
	int tag;
	struct rt_data *data;
	/* the split way (parallel/dp.h): the node's replicas run their
	 * micro-batches as one, node_rows rows in the replicas' order, this
	 * replica's from node_off; 0 otherwise */
	int64_t node_off, node_rows;
};

/* The timing of a run's progress lines and step events (metrics.c). */
struct rt_progress {
	double t0, tw;          /* the loop's start, the log window's (monotonic s) */
	int64_t window_rows;    /* samples of the log window so far */
	int64_t window_steps;
	bool quiet;             /* no progress lines (--quiet) */
};

/* --- gradient sync (grad_sync.c) --- */

/* Set-up: the stage's blocks in buckets of about 25 MiB, last block first,
 * alike on every replica of the stage (-ENOMEM). */
int rt__grad_sync_init(struct trainer *t);
/* Before a step's passes: arms the buckets for its last backward
 * (t->final_backward). */
void rt__grad_sync_arm(struct trainer *t);
/* rt_stage_backward's callback: starts a bucket's allreduce once its last
 * block is done (a failure is left in t->bucket_rc). */
void rt__block_done(void *ctx, int block);
/* After the passes: the replicas' gradients summed where this replica
 * reads them (the buckets not started yet started, all waited for; or
 * the node's barrier and sums). save_reading: an async save's writer still
 * reads the replicas' blocks (the split way then waits at the barrier). */
int rt__grad_sync_finish(struct trainer *t, bool save_reading);
/* What this replica updates: *sp [*n] ranges of the stage's parameters
 * (whole, owned by the caller, may be the one); sharded: unused (the
 * shard's pieces). */
void rt__grad_sync_owned(const struct trainer *t, struct rt_span *whole,
			 const struct rt_span **sp, int *n);
/* The sum of squares of the summed gradient this replica updates (sp [n]
 * from rt__grad_sync_owned; sharded: its shard). */
double rt__grad_sync_sumsq(const struct trainer *t, const struct rt_span *sp, int n);
/* The step's stats travel with the norm's sums (split) rather than in a
 * reduction of their own. */
bool rt__grad_sync_sums_stats(const struct trainer *t);
/* This replica's share of the sum of squares (and, split, the stats)
 * summed over the node's replicas (shared, split) or all replicas
 * (sharded); nothing to do for allreduce, whose replicas hold the whole
 * sum. */
int rt__grad_sync_sums(struct trainer *t, double stats[2], double *sumsq);
/* The update of sp [n] at lr, gradients times scale; the sum of squares
 * of the gradients it read (before scale). */
double rt__grad_sync_update(struct trainer *t, const struct rt_span *sp, int n, double lr,
			    float scale);
/* After the update: this replica's part handed to the node's others
 * (shared; split when clipped, since then no sums follow the update), or
 * (sharded) every replica's rows all-gathered. */
int rt__grad_sync_publish(struct trainer *t, bool clipped);

/* --- the device seam (on_device.c) --- */

/* What the stage's device cannot do (yet), named with the spec key. */
/* data_sets.c: data.train into train and data.test (when set: *has_test)
 * into test, checked against the model ops of s and the global batch; not
 * collective (err, not t->err). The caller closes both, also after a
 * failure. */
int rt__open_sets(const struct spec *s, const struct rt_model_ops *ops, struct rt_data *train,
		  struct rt_data *test, int *has_test, struct dt_err *err);

int rt__dev_check(struct trainer *t);
/* A slot's arrays on the device and their host staging (the same arrays
 * on a host device); freed by rt__dev_slot_free, also after a failure. */
int rt__dev_slot(struct trainer *t, struct slot *sl);
void rt__dev_slot_free(struct trainer *t, struct slot *sl);
/* After the stage and optimizer: the optimizer's state on the device, the
 * checkpoints' host twins, the gradients' host copy; freed by
 * rt__dev_state_free (nothing on a host device). */
int rt__dev_state(struct trainer *t);
void rt__dev_state_free(struct trainer *t);
/* What checkpoints read and write: st and opt, or their host twins. */
struct rt_stage *rt__ckpt_stage(struct trainer *t);
struct rt_optim *rt__ckpt_optim(struct trainer *t);
/* The twins made equal to the device's state (before a save), and the
 * device's made equal to the twins (after a resume); nothing on a host
 * device. */
int rt__dev_to_host(struct trainer *t);
int rt__dev_from_host(struct trainer *t);

/* --- tied tensors (tied.c) --- */

/* Set-up (after the stage): which tied copies this stage holds, and the
 * peer stage of each one whose other copy is elsewhere. */
int rt__ties_init(struct trainer *t);
void rt__ties_free(struct trainer *t);
/* After the replicas' sums: both copies of each tie get copy 0 + copy 1
 * (collective between the two stages that hold them). */
int rt__ties_sum(struct trainer *t);
/* Where the summed gradient of the stage's tensor i lies, that this
 * replica updates: *n floats (sharded: its rows, in the shard). */
float *rt__grad_of(const struct trainer *t, int i, size_t *n);
/* The sum of squares of the copies 1 on this stage: what the gradient
 * norm must not count twice (sharded: of this replica's rows). */
double rt__ties_dup_sumsq(const struct trainer *t);

/* --- a step (pipeline.c, split_step.c) --- */

/* Forward of micro-batch m in slot sl: receive or read the input, run the
 * stage, send the output on, or (last stage) add the loss and correct
 * count to the device's loss accumulator (model/device.h: the caller zeroes and
 * fetches it); keeps the activations for backward when want_grad. */
int rt__forward_mb(struct trainer *t, struct slot *sl, const struct mb *m, int want_grad);
/* Backward of micro-batch m in slot sl: receive the output's gradient,
 * accumulate the stage's gradients, send the input's gradient back. */
int rt__backward_mb(struct trainer *t, struct slot *sl, const struct mb *m);
/* Waits for this stage's sends still in flight. */
int rt__wait_sends(struct trainer *t);
/* This stage's part of one step over mbs[0..micro-1], in the schedule of
 * parallel.schedule. */
int rt__run_schedule(struct trainer *t, const struct mb *mbs);
/* One step of batch_rows rows with every block cut into parts (dp.split,
 * t->tsplit). */
int rt__split_schedule(struct trainer *t, const struct mb *mbs);


/* --- every rank's part (ranks.c) and MFU (mfu.c) --- */

/* Set-up: rank 0's room for every rank's values (-ENOMEM); freed by
 * rt__ranks_free, also after a failure. */
int rt__ranks_init(struct trainer *t);
void rt__ranks_free(struct trainer *t);
/* Every rank's node, stage and replica to rank 0 (collective). */
int rt__ranks_layout(struct trainer *t);
/* Rank 0: the "layout" event (after rt__ranks_layout). */
void rt__ranks_log_layout(struct trainer *t);
/* At a logged step: every rank's seconds per step of the log window
 * (window_s, steps) and its peak memory to rank 0, which writes the
 * "ranks" event and gets in tm the means over the ranks (step, compute,
 * pipe wait, grad wait, data, optim; zeros on the other ranks).
 * Collective. */
int rt__ranks_window(struct trainer *t, int64_t step, double window_s, int64_t steps,
		     double tm[6]);
/* After rt__ranks_layout, before the loop: a GPT's FLOPs per token and
 * the peak of a node, declared or measured now (collective). */
int rt__mfu_init(struct trainer *t);

/* --- the replicas checked (replicas.c) --- */

/* Whether the replicas of every stage hold the same state after step
 * `step` (parameters; the optimizer's too unless sharded): 0, or
 * -ENOTRECOVERABLE on every rank when some differ (rank 0's message names
 * the odd one and its node), other codes for MPI or memory. Collective;
 * once per step (a second call at the same step does nothing). */
int rt__replicas_check(struct trainer *t, int64_t step);
/* Tests only (base/fault.h, DTRAIN_FAULT_FLIP=bit@STEP:RANK): flips bit 20
 * of this rank's middle parameter after step STEP. */
void rt__replicas_fault(struct trainer *t, int64_t step);

/* --- checkpoint cadence (cadence.c) --- */

/* After the resume (start_step): "auto" on or off, M from the spec and
 * the batch script's DTRAIN_INTERRUPTIONS and DTRAIN_RUN_SECONDS. */
void rt__cadence_init(struct trainer *t, int64_t start_step);
/* Whether step `step` (done) saves (1, else 0): the tenth step of a start
 * does (it measures a save's cost), then each at the interval decided at
 * the step after the save before it; a negative errno when that decision's
 * allreduce failed. Collective: every rank calls it at every step. */
int rt__cadence_due(struct trainer *t, int64_t step);
/* After the save of step `step`. */
void rt__cadence_saved(struct trainer *t, int64_t step);

/* --- what the run tells (metrics.c) --- */

/* Opens <run_dir>/metrics.jsonl on rank 0 for appending (a warning when it
 * cannot: training goes on without it). */
void rt__open_metrics(struct trainer *t);
/* The run's first lines and the start event; starts pg's clocks. */
void rt__log_start(struct trainer *t, struct rt_progress *pg, int64_t step, int64_t total,
		   int64_t per_epoch);
/* After step `step` (1-based) of epoch `epoch` (0-based): the first step's
 * event, and every train.log_every steps and at the last one a progress
 * line and a step event with the log window's times (collective: every
 * rank calls it after every step). */
int rt__log_step(struct trainer *t, struct rt_progress *pg, int64_t step, int64_t total,
		 int64_t epoch, int64_t batch_rows, double loss, double lr, double norm);
/* The test set's loss and accuracy over its first `samples` samples
 * after epoch `epoch` (0-based). */
void rt__log_eval(struct trainer *t, int64_t step, int64_t epoch, int64_t samples, double loss,
		  double acc, bool quiet);
/* The end event and the "done" line. */
void rt__log_end(struct trainer *t, const struct rt_progress *pg, int64_t step);

#endif
