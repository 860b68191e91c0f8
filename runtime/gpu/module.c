/*
 * module.c - the table libdtrain-cuda.so hands the programs (module.h).
 */
#include "runtime/gpu/module.h"

const struct rt_gpu_module rt_gpu_module = {
	.select = rt_gpu_select,
	.dev_open = rt_gpu_dev_open,
	.comms = rt_gpu_comms,
	.dev_use_nccl = rt_gpu_dev_use_nccl,
	.build_info = rt_gpu_build_info,
};
