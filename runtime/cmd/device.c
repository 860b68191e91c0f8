/*
 * device.c - opens train.device for this rank (device.h): nothing to do for
 * the CPU; for "cuda", the GPU path of runtime/gpu/ when it was built.
 */
#include "runtime/cmd/device.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#ifdef DTRAIN_HAVE_CUDA
#include "runtime/gpu/gpu.h"
#endif

/* DTRAIN_SIM_DEVICE=1: the CPU's kernels behind the device seam on memory
 * the host may not touch (model/device.h), a test aid */
static struct rt_dev sim;

int rt_device_open(const struct spec *s, const struct rt_proc *p, struct rt_dev **dev,
		   struct dt_err *err)
{
	const char *want_sim = getenv("DTRAIN_SIM_DEVICE");

	*dev = rt_dev_cpu();
	if (strcmp(s->train.device, "cuda")) {
		if (want_sim && !strcmp(want_sim, "1")) {
			rt_dev_sim_init(&sim);
			*dev = &sim;
		}
		return 0;
	}
#ifdef DTRAIN_HAVE_CUDA
	struct rt_gpu_device gpu;
	int rc = rt_gpu_select(p, &gpu, err);

	if (rc)
		return rc;
	/* Until the GPU training loop (runtime/gpu/) is wired into rt_train,
	 * a rank with a GPU stops here: never train on the CPU instead. */
	dt_err_add(err, "rank %d on host %s: train.device is \"cuda\" (device %d of %d, %s) but the GPU training loop is not in this build yet; hint: set train.device to \"cpu\"",
		   p->rank, p->node, gpu.index, gpu.count, gpu.name);
	return -ENOSYS;
#else
	(void)p;
	dt_err_add(err, "train.device is \"cuda\" but this dtrain-run was built without the GPU path (DTRAIN_CUDA=OFF or no CUDA at build time); hint: set train.device to \"cpu\", or rebuild where CUDA and NCCL are installed");
	return -ENOTSUP;
#endif
}

void rt_device_close(struct rt_dev *dev)
{
	if (dev)
		rt_dev_close(dev);
}

const char *rt_device_gpu_build(void)
{
#ifdef DTRAIN_HAVE_CUDA
	return rt_gpu_build_info();
#else
	return NULL;
#endif
}
