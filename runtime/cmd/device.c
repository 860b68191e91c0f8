/*
 * device.c - opens train.device for this rank (device.h): nothing to do for
 * the CPU; for "cuda", the GPU path of runtime/gpu/ when it was built.
 */
#include "runtime/cmd/device.h"

#include <errno.h>
#include <string.h>

#ifdef DTRAIN_HAVE_CUDA
#include "runtime/gpu/gpu.h"
#endif

int rt_device_open(const struct spec *s, const struct rt_proc *p, struct dt_err *err)
{
	if (strcmp(s->train.device, "cuda"))
		return 0;
#ifdef DTRAIN_HAVE_CUDA
	struct rt_gpu_device dev;
	int rc = rt_gpu_select(p, &dev, err);

	if (rc)
		return rc;
	/* Until the GPU training loop (runtime/gpu/) is wired into rt_train,
	 * a rank with a GPU stops here: never train on the CPU instead. */
	dt_err_add(err, "rank %d on host %s: train.device is \"cuda\" (device %d of %d, %s) but the GPU training loop is not in this build yet; hint: set train.device to \"cpu\"",
		   p->rank, p->node, dev.index, dev.count, dev.name);
	return -ENOSYS;
#else
	(void)p;
	dt_err_add(err, "train.device is \"cuda\" but this dtrain-run was built without the GPU path (DTRAIN_CUDA=OFF or no CUDA at build time); hint: set train.device to \"cpu\", or rebuild where CUDA and NCCL are installed");
	return -ENOTSUP;
#endif
}

const char *rt_device_gpu_build(void)
{
#ifdef DTRAIN_HAVE_CUDA
	return rt_gpu_build_info();
#else
	return NULL;
#endif
}
