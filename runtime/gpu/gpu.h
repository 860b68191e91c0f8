/*
 * gpu.h - the GPU path of dtrain-run (train.device "cuda"): which GPU each
 * rank drives, and the NCCL communicators of the grid.
 *
 * Only built when DTRAIN_CUDA found CUDA, cuBLAS and NCCL (cmake/
 * dtrain_cuda.cmake); code outside runtime/gpu/ includes this header only
 * under `#ifdef DTRAIN_HAVE_CUDA`. The header itself needs no CUDA header.
 *
 * Device: rank r takes device local_rank % (devices visible). The visible
 * devices are those CUDA_VISIBLE_DEVICES names, which Slurm sets to the GPUs
 * it bound to the task (--gpus-per-node, --gpu-bind), so the local ranks of
 * a node spread over its GPUs, and ranks share a GPU only when there are
 * more ranks than GPUs on the node.
 *
 * Communicators: one NCCL communicator per group of the grid (runtime/
 * grid.h): the world, our data-parallel group (rank = replica) and our
 * pipeline group (rank = stage). Each group's root (rank 0 of the world,
 * replica 0 of each stage, stage 0 of each replica) makes the group's
 * ncclUniqueId; rt_pmix_share (runtime/world/bootstrap.h) hands all of them out in
 * one PMIx fence; then every rank joins its three communicators.
 *
 * Life cycle: rt_gpu_select() (after the grid is built), rt_gpu_comms() (once
 * per process: its PMIx keys are fixed), ..., rt_gpu_comms_free(). Errors name the rank and the CUDA or NCCL call with
 * its error string.
 */
#ifndef DTRAIN_RUNTIME_GPU_GPU_H
#define DTRAIN_RUNTIME_GPU_GPU_H

#include <stddef.h>

#include "runtime/world/bootstrap.h"
#include "runtime/world/grid.h"
#include "base/err.h"

struct ncclComm; /* nccl.h's ncclComm_t is a struct ncclComm * */

struct rt_gpu_device {
	int index;             /* the CUDA device this rank uses, among the visible */
	int count;             /* devices visible to this process */
	char name[256];        /* e.g. "NVIDIA H100 80GB HBM3" */
	int cc_major, cc_minor; /* compute capability */
	size_t mem_bytes;      /* total device memory */
};

/* NCCL communicators, NULL until rt_gpu_comms(); owned here, freed by
 * rt_gpu_comms_free(). */
struct rt_gpu_comms {
	struct ncclComm *world; /* every rank; rank in it = world rank */
	struct ncclComm *data;  /* our stage's replicas; rank = replica */
	struct ncclComm *pipe;  /* our replica's stages; rank = stage */
};

/* --- life cycle --- */

/* Picks device p->local_rank % (visible devices) and makes it current
 * (cudaSetDevice) for this thread. 0, or on this rank only: -ENODEV when no
 * device is visible (the message names the rank, its node and CUDA's error
 * string, with a hint), -EIO for another CUDA failure. The caller agrees
 * with rt_agree() (world/agree.h). */
int rt_gpu_select(const struct rt_proc *p, struct rt_gpu_device *dev, struct dt_err *err);

/* Creates c->world, c->data and c->pipe (ncclGetUniqueId on each group's
 * root, rt_pmix_share, ncclCommInitRank on every member). Collective over
 * the world, after rt_gpu_select() on every rank; g has its communicators
 * (rt_grid_comms). Returns 0; -EIO on every rank alike when a root could
 * not make its id or the ids could not be shared (agreed here; only the
 * first failing rank has the message in err: print err when it has lines;
 * nothing to abort); or -ECOMM on this rank only when ncclCommInitRank or
 * the agreement itself failed: peers may be waiting, so the caller
 * MPI_Abort's. On failure c holds nothing. */
int rt_gpu_comms(const struct rt_proc *p, const struct rt_grid *g, struct rt_gpu_comms *c,
		 struct dt_err *err);

/* Destroys the communicators (ncclCommDestroy: collective over each group,
 * so every rank calls it); safe on a zeroed c and twice. */
void rt_gpu_comms_free(struct rt_gpu_comms *c);

/* --- queries --- */

/* What the GPU path was built with, e.g. "CUDA 13.0, NCCL 2.28.9"; static. */
const char *rt_gpu_build_info(void);

#endif
