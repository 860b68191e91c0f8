/*
 * device.c - opens train.device for this rank (device.h): nothing to do for
 * the CPU; for "cuda", the GPU path of runtime/gpu/ when it was built, a
 * module loaded on first use (runtime/gpu/module.h).
 */
#include "runtime/train/device.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef DTRAIN_HAVE_CUDA
#include <dlfcn.h>
#include <limits.h>
#include <mpi.h>

#include "base/path.h"
#include "runtime/gpu/module.h"
#endif

/* DTRAIN_SIM_DEVICE=1: the CPU's kernels behind the device seam on memory
 * the host may not touch (model/device.h), a test aid */
static struct rt_dev sim;
static struct rt_dev bf16; /* train.precision "bf16" on the CPU */
#ifdef DTRAIN_HAVE_CUDA
static struct rt_dev cuda; /* train.device "cuda" */
static struct rt_gpu_device gpu; /* the one this rank drives */
static const struct rt_gpu_module *gpu_module; /* loaded, or NULL */

/* The GPU path, loaded on first use and kept: RT_GPU_MODULE_FILE in
 * DTRAIN_GPU_MODULE_DIR, a folder named relative to the program's own
 * (the build tree and an install lay them out alike). NULL with a message
 * when it cannot be loaded. */
static const struct rt_gpu_module *load_gpu_module(struct dt_err *err)
{
	char path[PATH_MAX], *dir;
	void *h;

	if (gpu_module)
		return gpu_module;
	dir = dt_exe_dir();
	snprintf(path, sizeof(path), "%s/%s/%s", dir ? dir : ".", DTRAIN_GPU_MODULE_DIR, RT_GPU_MODULE_FILE);
	free(dir);
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		dt_err_add(err, "the GPU path (train.device \"cuda\") cannot be loaded: %s; hint: it is installed with the programs (cmake --install), beside them as %s/%s",
			   dlerror(), DTRAIN_GPU_MODULE_DIR, RT_GPU_MODULE_FILE);
		return NULL;
	}
	gpu_module = dlsym(h, RT_GPU_MODULE_SYMBOL);
	if (!gpu_module)
		dt_err_add(err, "%s: no %s in it: %s", path, RT_GPU_MODULE_SYMBOL, dlerror());
	return gpu_module;
}
#endif

int rt_device_open(const struct spec *s, const struct rt_proc *p, struct rt_dev **dev,
		   struct dt_err *err)
{
	const char *want_sim = getenv("DTRAIN_SIM_DEVICE");

	bool bf = s->train.precision && !strcmp(s->train.precision, "bf16");
	int rc;

	*dev = rt_dev_cpu();
	if (strcmp(s->train.device, "cuda") && bf) {
		rc = rt_dev_cpu_bf16_init(&bf16, (int)s->resources.cpus_per_task, err);
		if (rc) {
			rt_dev_close(&bf16);
			return rc;
		}
		*dev = &bf16;
		return 0;
	}
	if (strcmp(s->train.device, "cuda")) {
		if (want_sim && !strcmp(want_sim, "1")) {
			rt_dev_sim_init(&sim);
			*dev = &sim;
		}
		return 0;
	}
#ifdef DTRAIN_HAVE_CUDA
	if (!load_gpu_module(err))
		return -ENOTSUP;
	rc = gpu_module->select(p, &gpu, err);
	if (!rc)
		rc = gpu_module->dev_open(&cuda, &gpu, s->train.tf32, bf, err);
	if (rc) {
		rt_dev_close(&cuda);
		return rc;
	}
	*dev = &cuda;
	return 0;
#else
	(void)p;
	dt_err_add(err, "train.device is \"cuda\" but this dtrain-run was built without the GPU path (DTRAIN_CUDA=OFF or no CUDA at build time); hint: set train.device to \"cpu\", or rebuild where CUDA and NCCL are installed");
	return -ENOTSUP;
#endif
}

int rt_device_collectives(struct rt_dev *dev, const struct rt_proc *p, const struct rt_grid *g,
			  struct dt_err *err)
{
#ifdef DTRAIN_HAVE_CUDA
	const char *want = getenv("DTRAIN_NCCL");
	struct rt_gpu_comms comms;
	int shared, rc;

	if (dev != &cuda || g->size[RT_DIM_DATA] == 1)
		return 0;
	/* NCCL refuses two ranks of a communicator on one GPU ("Duplicate GPU
	 * detected"): ranks that share one sum through the host */
	shared = p->local_size > gpu.count || (want && !strcmp(want, "0"));
	if (MPI_Allreduce(MPI_IN_PLACE, &shared, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS)
		return dt_err_add(err, "rank %d: MPI_Allreduce of whether ranks share a GPU failed", p->rank),
		       -ECOMM;
	if (shared)
		return 0;
	rc = gpu_module->comms(p, g, &comms, err); /* loaded: dev is the cuda one */
	if (!rc)
		gpu_module->dev_use_nccl(dev, &comms);
	return rc;
#else
	(void)dev;
	(void)p;
	(void)g;
	(void)err;
	return 0;
#endif
}

int rt_device_open_named(const char *name, struct rt_dev **dev, struct dt_err *err)
{
	struct rt_proc p;
	struct spec s;

	*dev = rt_dev_cpu();
	if (!strcmp(name, "cpu"))
		return 0;
	if (!strcmp(name, "sim")) {
		rt_dev_sim_init(&sim);
		*dev = &sim;
		return 0;
	}
	if (strcmp(name, "cuda"))
		return dt_err_add(err, "--device: \"%s\" is not a device: cpu, cuda or sim", name), -EINVAL;
	memset(&p, 0, sizeof(p));
	memset(&s, 0, sizeof(s));
	if (gethostname(p.node, sizeof(p.node) - 1))
		snprintf(p.node, sizeof(p.node), "?");
	s.train.device = (char *)"cuda";
	return rt_device_open(&s, &p, dev, err);
}

void rt_device_close(struct rt_dev *dev)
{
	if (dev)
		rt_dev_close(dev);
}

const char *rt_device_gpu_build(struct dt_err *err)
{
#ifdef DTRAIN_HAVE_CUDA
	return load_gpu_module(err) ? gpu_module->build_info() : NULL;
#else
	(void)err;
	return NULL;
#endif
}
