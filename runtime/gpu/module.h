/*
 * module.h - the GPU path as the programs reach it: a shared module,
 * libdtrain-cuda.so, that dtrain-run and dtrain-ckpt load on first use
 * (runtime/train/device.c), so that a program built with CUDA starts as fast
 * as one without it until a run asks for train.device "cuda" (the CUDA
 * libraries' constructors take about half a second of CPU per process:
 * cuBLASLt registers its kernels as it loads).
 *
 * The module holds runtime/gpu/ alone; what it calls of the rest of dtrain
 * (base/, world/, model/, kernels/) it finds in the program that loads it,
 * which exports its symbols (CMake ENABLE_EXPORTS) and links all of
 * dtrain_rt and dtrain (runtime/CMakeLists.txt), so both share one copy of
 * that code and its state. The module and the programs come from one build:
 * the table below has no version of its own.
 */
#ifndef DTRAIN_RUNTIME_GPU_MODULE_H
#define DTRAIN_RUNTIME_GPU_MODULE_H

#include <stdbool.h>

#include "runtime/gpu/cuda_device.h"
#include "runtime/gpu/gpu.h"

/* The file name, and the symbol of the table in it. */
#define RT_GPU_MODULE_FILE "libdtrain-cuda.so"
#define RT_GPU_MODULE_SYMBOL "rt_gpu_module"

/* What the programs call, each as gpu.h and cuda_device.h describe it. */
struct rt_gpu_module {
	int (*select)(const struct rt_proc *p, struct rt_gpu_device *dev, struct dt_err *err);
	int (*dev_open)(struct rt_dev *d, const struct rt_gpu_device *gpu, bool tf32, bool bf16,
			struct dt_err *err);
	int (*comms)(const struct rt_proc *p, const struct rt_grid *g, struct rt_gpu_comms *c,
		     struct dt_err *err);
	void (*dev_use_nccl)(struct rt_dev *d, struct rt_gpu_comms *comms);
	const char *(*build_info)(void);
};

extern const struct rt_gpu_module rt_gpu_module;

#endif
