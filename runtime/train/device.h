/*
 * device.h - where a rank computes: on the CPU, or on the GPU that
 * train.device "cuda" asks for (runtime/gpu/gpu.h, when built).
 *
 * dtrain-run opens the device after the grid is built and before training,
 * and every rank agrees on the outcome (rt_agree, world/agree.h), so that a
 * rank without a GPU ends the job cleanly instead of training on the CPU or
 * leaving its peers waiting.
 */
#ifndef DTRAIN_RUNTIME_TRAIN_DEVICE_H
#define DTRAIN_RUNTIME_TRAIN_DEVICE_H

#include "jobs/spec.h"
#include "runtime/world/bootstrap.h"
#include "base/err.h"
#include "runtime/model/device.h"
#include "runtime/world/grid.h"

/* --- life cycle --- */

/* Opens the spec's train.device for this rank into *dev (borrowed until
 * rt_device_close): "cpu" is always there (DTRAIN_SIM_DEVICE=1 puts the
 * simulated device of model/device.h in its place, a test aid); "cuda"
 * picks and selects this rank's GPU (rt_gpu_select). Returns 0, or on this
 * rank only, with a message that names what is missing (messages from
 * rt_gpu_select name the rank and its host):
 *   -ENOTSUP  this dtrain-run was built without the GPU path
 *   -ENODEV   no GPU is visible to this rank (or CUDA failed: -EIO)
 *   -ENOMEM   the GPU could not hold the device's own state
 * (dtrain-run never trains on the CPU instead)
 * Local: calls no collective; the caller agrees with rt_agree (world/agree.h). */
int rt_device_open(const struct spec *s, const struct rt_proc *p, struct rt_dev **dev,
		   struct dt_err *err);
/* How the replicas of a stage on GPUs sum their gradients: NCCL when every
 * rank has a GPU of its own (the device's allreduce, rt_gpu_dev_use_nccl),
 * else MPI through host copies (ranks sharing a GPU; DTRAIN_NCCL=0 asks
 * for it); nothing to do on the CPU or with one replica. Collective over
 * the world, after rt_device_open everywhere. 0; -EIO on every rank alike
 * (the NCCL ids could not be made or shared: every rank has it, one has
 * the message); -ECOMM on this rank only (ncclCommInitRank failed): the
 * caller aborts the job. */
int rt_device_collectives(struct rt_dev *dev, const struct rt_proc *p, const struct rt_grid *g,
			  struct dt_err *err);
/* For one process (dtrain-ckpt's --device): "cpu", "sim" (the simulated
 * device) or "cuda" (the first visible GPU, float32 products) into *dev,
 * borrowed until rt_device_close. 0, -EINVAL naming --device for another
 * name, or rt_device_open's errors. */
int rt_device_open_named(const char *name, struct rt_dev **dev, struct dt_err *err);
/* Ends what rt_device_open opened; NULL is fine. */
void rt_device_close(struct rt_dev *dev);

/* --- queries --- */

/* What the GPU path was built with ("CUDA 13.0, NCCL 2.28.9"), or NULL:
 * this build has none (err untouched), or its module cannot be loaded (the
 * message in err). Loads the module; static. */
const char *rt_device_gpu_build(struct dt_err *err);

#endif
