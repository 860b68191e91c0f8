/*
 * train.h - the training loop of dtrain-run: one optimizer step after
 * another over the data x pipeline grid, with evaluation at each epoch end
 * or every train.eval_every steps.
 *
 * Data flow through one step (runtime/README.md has the picture):
 *   1. the sampler gives the step's global batch (the same rows whatever the
 *      layout); each replica takes its contiguous share, split again into
 *      parallel.micro_batches micro-batches;
 *   2. the pipeline schedule (gpipe or 1f1b) runs forward and backward passes
 *      of the micro-batches; activations go to the next stage and gradients
 *      back to the previous one with MPI point-to-point messages;
 *   3. during the backward pass of the last micro-batch, each gradient bucket
 *      (whole layers, about 25 MiB, last layer first) starts its allreduce
 *      over the replicas of the stage as soon as its layers are done;
 *   4. the global gradient norm (over all stages) is clipped, the optimizer
 *      steps with the scheduled learning rate, and the loss, summed over the
 *      replicas, reaches every rank.
 *
 * The loss of a step is the mean over the global batch, so gradients are
 * summed (not averaged) over replicas: each replica scales by 1/global rows.
 */
#ifndef DTRAIN_RUNTIME_TRAIN_H
#define DTRAIN_RUNTIME_TRAIN_H

#include <stdbool.h>

#include "jobs/spec.h"
#include "runtime/world/grid.h"
#include "base/err.h"

struct rt_proc;
struct rt_watchdog;
struct rt_dev;

struct rt_train_opts {
	const char *save_params; /* directory for the final parameters, or NULL */
	bool quiet;              /* no progress lines (metrics are still written) */
	const struct rt_proc *proc; /* this process (bootstrap.h): how many ranks share
				     * its machine's CPUs */
	struct rt_watchdog *watchdog; /* told each phase of the loop (watchdog.h), or NULL */
	struct rt_dev *dev;      /* where the stage computes (model/device.h; borrowed),
				  * or NULL: the CPU */
};

/* Train as the spec says, on this rank's place in the grid (communicators
 * built), resuming from a checkpoint when checkpoint.resume finds one, and
 * saving as checkpoint.* says (runtime/train/checkpointing.h).
 * Collective over the world: every rank must call it.
 * Returns 0; on every rank alike: -ERANGE when the loss or gradient became
 * NaN/Inf (the message names the step); -EINVAL for data or a checkpoint
 * that does not fit the spec; -ENOMEM when a rank ran out of memory in
 * set-up (that rank's message names what it was allocating; the caller
 * ends the job with exit code 1, not as a spec error); -EAGAIN when a stop
 * signal arrived and the state was saved ("requeue me"); -ECANCELED when
 * the final or stop save failed (reported already). Other negative codes
 * for I/O or MPI failures, or memory, on this rank only.
 * *together: every rank returns this same code (the caller ends them all
 * normally), or false: this rank failed alone and the caller must abort
 * the job, or its peers wait for it forever. */
int rt_train(const struct spec *s, struct rt_grid *g, const struct rt_train_opts *opts,
	     bool *together, struct dt_err *err);

/* The spec's data sets as a run would open them, checked against its model
 * (the kind of data, features, classes or vocabulary, the global batch
 * against the training set's samples): what `dtrain-run --check-data`
 * does, on one process, without MPI. 0, or a negative errno with every
 * problem in err (-EINVAL: the data does not fit the spec). */
int rt_check_data(const struct spec *s, struct dt_err *err);
/* checkpoint.init_from against the spec's model, on one process (the same
 * plan as the run's: every tensor by name and shape, init_fresh, the
 * position table's crop), for `dtrain-run --check-data`: 0 (also when
 * unset), -EINVAL with every problem in err when it does not fit, -ENOENT
 * when it names no readable checkpoint (init_from.c). */
int rt_check_init_from(const struct spec *s, struct dt_err *err);

#endif
