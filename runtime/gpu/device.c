/*
 * device.c - which GPU this rank drives (gpu.h): device local_rank % visible,
 * and what the GPU path was built with.
 */
#include "runtime/gpu/gpu.h"

#include <errno.h>
#include <stdio.h>

#include <cuda_runtime_api.h>


int rt_gpu_select(const struct rt_proc *p, struct rt_gpu_device *dev, struct dt_err *err)
{
	struct cudaDeviceProp prop;
	cudaError_t ce;
	int n = 0, drv = 0;

	*dev = (struct rt_gpu_device){ .index = -1 };
	ce = cudaGetDeviceCount(&n);
	/* "insufficient driver" also means no driver at all (version 0): a
	 * machine without GPUs; a driver too old for us is another story */
	if (ce == cudaErrorInsufficientDriver && cudaDriverGetVersion(&drv) == cudaSuccess &&
	    drv > 0) {
		dt_err_add(err, "rank %d on host %s: train.device is \"cuda\" but the CUDA driver (%d.%d) is older than this build's CUDA runtime (%d.%d) (cudaGetDeviceCount: %s); hint: update the driver, or run a dtrain-run built with an older CUDA",
			   p->rank, p->node, drv / 1000, drv % 1000 / 10, CUDART_VERSION / 1000,
			   CUDART_VERSION % 1000 / 10, cudaGetErrorString(ce));
		return -ENODEV;
	}
	if (ce != cudaSuccess || n < 1) {
		dt_err_add(err, "rank %d on host %s: train.device is \"cuda\" but no GPU is visible (cudaGetDeviceCount: %s); hint: request GPUs with resources.gpus_per_node, or set train.device to \"cpu\"",
			   p->rank, p->node, ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices");
		return -ENODEV;
	}
	dev->count = n;
	/* local ranks fill a node's GPUs in order; more ranks than GPUs share */
	dev->index = p->local_rank % n;
	ce = cudaSetDevice(dev->index);
	if (ce == cudaSuccess)
		ce = cudaGetDeviceProperties(&prop, dev->index);
	if (ce != cudaSuccess) {
		dt_err_add(err, "rank %d on host %s: cudaSetDevice(%d) of %d visible: %s",
			   p->rank, p->node, dev->index, n, cudaGetErrorString(ce));
		return -EIO;
	}
	snprintf(dev->name, sizeof(dev->name), "%s", prop.name);
	dev->cc_major = prop.major;
	dev->cc_minor = prop.minor;
	dev->mem_bytes = prop.totalGlobalMem;
	return 0;
}

const char *rt_gpu_build_info(void)
{
	/* the versions CMake found (cmake/dtrain_cuda.cmake), which the
	 * headers included here come from */
	return "CUDA " DTRAIN_CUDA_VERSION ", NCCL " DTRAIN_NCCL_VERSION;
}
