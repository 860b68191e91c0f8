/*
 * cuda_device.h - the CUDA device of the seam (runtime/model/device.h): a
 * rank's GPU as the table the models and the training loop compute
 * through. Memory is cudaMalloc's; every operation is queued on the
 * device's one stream (a cuBLAS handle bound to it does the products);
 * get, sync and the operations that return a sum wait for it. The
 * kernels are runtime/gpu/kernels.h's and transformer.h's; a kernel's
 * failure is kept and returned by the next sync, with its message.
 *
 * Products run in float32 (CUBLAS_DEFAULT_MATH: no TF32) unless the spec's
 * train.tf32 asks for TF32 tensor cores (CUBLAS_TF32_TENSOR_OP_MATH), or
 * train.precision "bf16" for the linear layers' products of bf16 inputs
 * (rounded to nearest even on the device, as kernels/bf16.h on the CPU)
 * accumulated in float32 (cublasGemmEx, CUBLAS_COMPUTE_32F).
 *
 * Needs no CUDA header: the caller (runtime/train/device.c) includes it
 * under DTRAIN_HAVE_CUDA.
 */
#ifndef DTRAIN_RUNTIME_GPU_CUDA_DEVICE_H
#define DTRAIN_RUNTIME_GPU_CUDA_DEVICE_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "base/err.h"
#include "runtime/model/device.h"

struct rt_gpu_device; /* gpu.h */
struct rt_gpu_comms;  /* gpu.h */

/* Opens the GPU that rt_gpu_select made current (gpu: its description)
 * as device d: a stream, a cuBLAS handle, the loss and sum accumulators.
 * 0, or -ENOMEM / -EIO with a message naming the CUDA call; close with
 * rt_dev_close(d), also after a failure. */
int rt_gpu_dev_open(struct rt_dev *d, const struct rt_gpu_device *gpu, bool tf32, bool bf16,
		    struct dt_err *err);
/* The replicas sum their gradients with NCCL from now on (the device's
 * allreduce: ncclAllReduce over comms->data on the device's stream);
 * takes the communicators over (*comms zeroed), freed by rt_dev_close. */
void rt_gpu_dev_use_nccl(struct rt_dev *d, struct rt_gpu_comms *comms);

#ifdef __cplusplus
}
#endif

#endif
