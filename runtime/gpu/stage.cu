/*
 * stage.cu - a pipeline stage on the GPU: device buffers in the CPU's
 * layout, activations, forward and backward with cuBLAS and the kernels of
 * kernels.cu, and the optimizer state on the device (see stage.h).
 *
 * cuBLAS is column-major; our matrices are row-major. A row-major [r][c]
 * matrix is the column-major [c x r] matrix of its transpose (leading
 * dimension c), so each product is written for the transposes:
 *	y = x W^T     ->  y^T [out x rows]  = W^T^T x^T  = op_T(w [in x out]) x [in x rows]
 *	dW += dy^T x  ->  dW^T [in x out]   = x^T dy     = x [in x rows] op_T(dy [out x rows])
 *	dx = dy W     ->  dx^T [in x rows]  = W^T dy^T   = w [in x out] dy [out x rows]
 * (brackets: the column-major shapes cuBLAS sees).
 *
 * Sections: errors, stages, activations, forward and backward, optimizer
 * state.
 */
#include "runtime/gpu/stage.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/gpu/kernels.h"

#define STAGE_HINT "use more pipeline stages (parallel.pipeline) or a smaller model"

/* --- errors --- */

/* A cuBLAS status to 0, -ENOMEM or -EIO, with "gpu: WHAT: cuBLAS's message". */
static int blas_check(cublasStatus_t s, struct dt_err *err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int blas_check(cublasStatus_t s, struct dt_err *err, const char *fmt, ...)
{
	va_list ap;
	int rc;

	if (s == CUBLAS_STATUS_SUCCESS)
		return 0;
	va_start(ap, fmt);
	rc = rt_gpu__failv(err, s == CUBLAS_STATUS_ALLOC_FAILED ? -ENOMEM : -EIO,
			   cublasGetStatusString(s), fmt, ap);
	va_end(ap);
	return rc;
}

/* cudaMalloc of bytes (> 0) into *p: out of device memory is -ENOMEM with a
 * line naming what and the hint; another error (no usable device) is
 * CUDA's own message. */
static int dev_alloc(void **p, size_t bytes, const char *what, const char *hint,
		     struct dt_err *err)
{
	cudaError_t e = cudaMalloc(p, bytes);

	if (e == cudaSuccess)
		return 0;
	*p = NULL;
	if (e != cudaErrorMemoryAllocation)
		return rt_gpu__check(e, what, err);
	(void)cudaGetLastError();
	dt_err_add(err, "gpu: %s: cannot allocate %.1f MiB of GPU memory; %s", what,
		   (double)bytes / 1048576.0, hint);
	return -ENOMEM;
}

/* --- stages --- */

extern "C" int rt_gpu_stage_init(struct rt_gpu_stage *g, const struct rt_stage *cpu, bool tf32,
				 cudaStream_t stream, struct dt_err *err)
{
	char what[128];
	size_t bytes;
	int rc, i;

	memset(g, 0, sizeof(*g));
	if (!cpu->params || cpu->n_blocks < 1 || !cpu->blocks || cpu->ops != &rt_mlp_model)
		return dt_err_add(err, "gpu: stage init: the CPU stage is empty or not an MLP (rt_stage_init first)");
	if (cpu->n_params > SIZE_MAX / sizeof(float))
		return dt_err_add(err, "gpu: stage %d: %zu parameters do not fit in memory addresses",
				  cpu->stage, cpu->n_params);
	bytes = cpu->n_params * sizeof(float);
	g->stage = cpu->stage;
	g->n_stages = cpu->n_stages;
	g->first_layer = cpu->first_block;
	g->n_layers = cpu->n_blocks;
	g->n_model_layers = cpu->n_model_blocks;
	g->act = rt_mlp_act(cpu);
	g->in = cpu->in;
	g->out = cpu->out;
	g->max_width = cpu->max_width;
	g->n_params = cpu->n_params;
	g->tf32 = tf32;
	g->stream = stream;

	g->layers = (struct rt_gpu_layer *)calloc((size_t)g->n_layers, sizeof(*g->layers));
	if (!g->layers) {
		rc = -ENOMEM;
		dt_err_add(err, "gpu: stage %d: out of host memory for %d layers", g->stage, g->n_layers);
		goto out;
	}
	snprintf(what, sizeof(what), "stage %d: %zu parameters and as many gradients", g->stage,
		 g->n_params);
	if ((rc = dev_alloc((void **)&g->params, bytes, what, STAGE_HINT, err)) ||
	    (rc = dev_alloc((void **)&g->grads, bytes, what, STAGE_HINT, err)))
		goto out;
	if ((rc = rt_gpu__check(cudaMemcpyAsync(g->params, cpu->params, bytes, cudaMemcpyHostToDevice,
					       stream), "copy of the initial parameters", err)) ||
	    (rc = rt_gpu__check(cudaMemsetAsync(g->grads, 0, bytes, stream),
			       "zeroing the gradients", err)))
		goto out;
	for (i = 0; i < g->n_layers; i++) {
		const struct rt_layer cl = rt_mlp_layer(cpu, i), *c = &cl;
		struct rt_gpu_layer *ly = &g->layers[i];
		size_t nw = (size_t)c->out * (size_t)c->in;

		ly->index = c->index;
		ly->in = c->in;
		ly->out = c->out;
		ly->act = c->act;
		ly->offset = c->offset;
		ly->n_params = c->n_params;
		ly->w = g->params + c->offset;
		ly->b = ly->w + nw;
		ly->dw = g->grads + c->offset;
		ly->db = ly->dw + nw;
		if ((rc = rt_gpu__check(cudaEventCreateWithFlags(&ly->grads_ready, cudaEventDisableTiming),
				       "cudaEventCreate for a layer's gradients", err)))
			goto out;
	}
	if (cublasCreate(&g->blas) != CUBLAS_STATUS_SUCCESS) {
		g->blas = NULL;
		rc = -EIO;
		dt_err_add(err, "gpu: stage %d: cannot create a cuBLAS handle (is the GPU usable? see nvidia-smi)",
			   g->stage);
		goto out;
	}
	if ((rc = blas_check(cublasSetStream(g->blas, stream), err, "cublasSetStream")) ||
	    (rc = blas_check(cublasSetMathMode(g->blas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
							     : CUBLAS_DEFAULT_MATH),
			     err, "cublasSetMathMode (%s)", tf32 ? "tf32" : "float32")))
		goto out;
	rc = rt_gpu__check(cudaStreamSynchronize(stream), "initial copy to the GPU", err);
out:
	return rc;
}

extern "C" void rt_gpu_stage_free(struct rt_gpu_stage *g)
{
	int i;

	if (g->params || g->blas)
		(void)cudaStreamSynchronize(g->stream); /* nothing queued may outlive its buffers */
	if (g->blas)
		cublasDestroy(g->blas);
	for (i = 0; g->layers && i < g->n_layers; i++)
		if (g->layers[i].grads_ready)
			cudaEventDestroy(g->layers[i].grads_ready);
	free(g->layers);
	cudaFree(g->grads);
	cudaFree(g->params);
	memset(g, 0, sizeof(*g));
}

extern "C" int rt_gpu_stage_zero_grads(struct rt_gpu_stage *g, struct dt_err *err)
{
	return rt_gpu__check(cudaMemsetAsync(g->grads, 0, g->n_params * sizeof(float), g->stream),
			    "zeroing the gradients", err);
}

extern "C" int rt_gpu_stage_params_to_host(const struct rt_gpu_stage *g, float *host,
					   struct dt_err *err)
{
	return rt_gpu__check(cudaMemcpyAsync(host, g->params, g->n_params * sizeof(float),
					    cudaMemcpyDeviceToHost, g->stream),
			    "copy of the parameters to the host", err);
}

extern "C" int rt_gpu_stage_params_from_host(struct rt_gpu_stage *g, const float *host,
					     struct dt_err *err)
{
	return rt_gpu__check(cudaMemcpyAsync(g->params, host, g->n_params * sizeof(float),
					    cudaMemcpyHostToDevice, g->stream),
			    "copy of the parameters to the GPU", err);
}

/* --- activations --- */

extern "C" int rt_gpu_acts_init(struct rt_gpu_acts *acts, const struct rt_gpu_stage *g,
				int max_rows, struct dt_err *err)
{
	size_t rows = (size_t)max_rows, total, at;
	float *mem = NULL;
	char what[128];
	int i, rc = 0;

	memset(acts, 0, sizeof(*acts));
	acts->rows = -1;
	if (max_rows < 1 || g->n_layers < 1 || !g->layers)
		return dt_err_add(err, "gpu: activations: need a stage and max_rows >= 1 (got %d)", max_rows);
	acts->first_layer = g->first_layer;
	acts->n_layers = g->n_layers;
	acts->in = g->in;
	acts->max_rows = max_rows;

	/* floats: x, z and (where an activation follows) a per layer, 2 scratch,
	 * as rt_acts_init */
	total = (size_t)g->in + 2 * (size_t)g->max_width;
	for (i = 0; i < g->n_layers; i++)
		total += (size_t)g->layers[i].out * (g->layers[i].act ? 2 : 1);
	if (total > SIZE_MAX / sizeof(float) / rows) {
		rc = -ENOMEM;
		dt_err_add(err, "gpu: activations of %d rows do not fit in memory addresses", max_rows);
		goto out;
	}
	acts->z = (float **)calloc((size_t)g->n_layers, sizeof(*acts->z));
	acts->a = (float **)calloc((size_t)g->n_layers, sizeof(*acts->a));
	if (!acts->z || !acts->a) {
		rc = -ENOMEM;
		dt_err_add(err, "gpu: out of host memory for the activations' tables");
		goto out;
	}
	snprintf(what, sizeof(what), "stage %d: activations of %d rows", g->stage, max_rows);
	if ((rc = dev_alloc((void **)&mem, total * rows * sizeof(float), what,
			    "use more micro-batches (parallel.micro_batches) or a smaller train.global_batch",
			    err)))
		goto out;
	acts->mem = mem;
	acts->x = mem;
	at = (size_t)g->in * rows;
	for (i = 0; i < g->n_layers; i++) {
		const struct rt_gpu_layer *ly = &g->layers[i];

		acts->z[i] = mem + at;
		at += (size_t)ly->out * rows;
		if (ly->act) {
			acts->a[i] = mem + at;
			at += (size_t)ly->out * rows;
		} else {
			acts->a[i] = acts->z[i];
		}
	}
	acts->dbuf[0] = mem + at;
	at += (size_t)g->max_width * rows;
	acts->dbuf[1] = mem + at;
out:
	if (rc)
		rt_gpu_acts_free(acts);
	return rc;
}

extern "C" void rt_gpu_acts_free(struct rt_gpu_acts *acts)
{
	if (acts->mem) {
		(void)cudaDeviceSynchronize(); /* acts do not know the stream that uses them */
		cudaFree(acts->mem);
	}
	free(acts->a);
	free(acts->z);
	memset(acts, 0, sizeof(*acts));
	acts->rows = -1;
}

/* --- forward and backward --- */

static bool acts_match(const struct rt_gpu_stage *g, const struct rt_gpu_acts *acts)
{
	return acts->mem && acts->first_layer == g->first_layer &&
	       acts->n_layers == g->n_layers && acts->in == g->in;
}

/* y [rows][out] = x [rows][in] W^T + b, as rt_linear_forward: b broadcast
 * into y, then the product added onto it (beta = 1). */
static int linear_forward(struct rt_gpu_stage *g, const struct rt_gpu_layer *ly, const float *x,
			  float *y, int rows, struct dt_err *err)
{
	const float one = 1.0f;
	int rc;

	if (rows == 0)
		return 0;
	if ((rc = rt_gpu_bias_fill(ly->b, y, rows, ly->out, g->stream, err)))
		return rc;
	return blas_check(cublasSgemm(g->blas, CUBLAS_OP_T, CUBLAS_OP_N, ly->out, rows, ly->in,
				      &one, ly->w, ly->in, x, ly->in, &one, y, ly->out),
			  err, "cublasSgemm of layer %d's forward y = x W^T + b", ly->index);
}

extern "C" int rt_gpu_stage_forward(struct rt_gpu_stage *g, struct rt_gpu_acts *acts,
				    const float *x, int rows, const float **y, struct dt_err *err)
{
	const float *in;
	int i, rc;

	if (!acts_match(g, acts) || rows < 0 || rows > acts->max_rows)
		return dt_err_add(err, "gpu: stage %d: forward of %d rows with activations for %d rows of stage at layer %d",
				  g->stage, rows, acts->max_rows, acts->first_layer);
	if (rows > 0 &&
	    (rc = rt_gpu__check(cudaMemcpyAsync(acts->x, x, (size_t)rows * (size_t)g->in * sizeof(float),
					       cudaMemcpyDefault, g->stream),
			       "copy of the stage input", err)))
		return rc;
	in = acts->x;
	for (i = 0; i < g->n_layers; i++) {
		const struct rt_gpu_layer *ly = &g->layers[i];

		if ((rc = linear_forward(g, ly, in, acts->z[i], rows, err)))
			return rc;
		if (ly->act &&
		    (rc = rt_gpu_act_forward(g->act, acts->z[i], acts->a[i],
					     (size_t)rows * (size_t)ly->out, g->stream, err)))
			return rc;
		in = acts->a[i];
	}
	acts->rows = rows;
	*y = in;
	return 0;
}

extern "C" int rt_gpu_stage_backward(struct rt_gpu_stage *g, struct rt_gpu_acts *acts,
				     const float *dy, float *dx,
				     void (*layer_done)(void *ctx, int layer_index_in_stage,
							cudaEvent_t ready),
				     void *ctx, struct dt_err *err)
{
	float *cur = acts->dbuf[0], *next = acts->dbuf[1], *t;
	const struct rt_gpu_layer *last;
	const float one = 1.0f, zero = 0.0f;
	const float *dz;
	int rows = acts->rows, i, rc;

	if (!acts_match(g, acts) || rows < 0)
		return dt_err_add(err, "gpu: stage %d: backward without a forward on these activations",
				  g->stage);
	last = &g->layers[g->n_layers - 1];
	if (last->act) {
		if ((rc = rt_gpu_act_backward(g->act, acts->z[g->n_layers - 1], dy, cur,
					      (size_t)rows * (size_t)last->out, g->stream, err)))
			return rc;
		dz = cur;
	} else {
		dz = dy; /* logits: no activation */
	}
	/* dz holds dLoss/d(pre-activation of layer i); the product dz W goes
	 * into the other scratch buffer and becomes layer i-1's dz in place. */
	for (i = g->n_layers - 1; i >= 0; i--) {
		struct rt_gpu_layer *ly = &g->layers[i];
		const float *in = i > 0 ? acts->a[i - 1] : acts->x;
		float *din = i > 0 ? next : dx;

		if (rows > 0) {
			/* dW [out][in] += dy^T x */
			if ((rc = blas_check(cublasSgemm(g->blas, CUBLAS_OP_N, CUBLAS_OP_T, ly->in,
							 ly->out, rows, &one, in, ly->in, dz, ly->out,
							 &one, ly->dw, ly->in),
					     err, "cublasSgemm of layer %d's dW += dy^T x", ly->index)) ||
			    (rc = rt_gpu_bias_grad(dz, ly->db, rows, ly->out, g->stream, err)))
				return rc;
		}
		if ((rc = rt_gpu__check(cudaEventRecord(ly->grads_ready, g->stream),
				       "cudaEventRecord after a layer's gradients", err)))
			return rc;
		if (layer_done)
			layer_done(ctx, i, ly->grads_ready);
		/* dx [rows][in] = dy W */
		if (rows > 0 && din &&
		    (rc = blas_check(cublasSgemm(g->blas, CUBLAS_OP_N, CUBLAS_OP_N, ly->in, rows,
						 ly->out, &one, ly->w, ly->in, dz, ly->out, &zero,
						 din, ly->in),
				     err, "cublasSgemm of layer %d's dx = dy W", ly->index)))
			return rc;
		if (i > 0) {
			/* layer i-1 is not the model's last: an activation follows it */
			if ((rc = rt_gpu_act_backward(g->act, acts->z[i - 1], next, next,
						      (size_t)rows * (size_t)ly->in, g->stream, err)))
				return rc;
			dz = next;
			t = cur;
			cur = next;
			next = t;
		}
	}
	return 0;
}

/* --- optimizer state --- */

extern "C" int rt_gpu_optim_init(struct rt_gpu_optim *o, const struct spec *s, size_t n,
				 struct dt_err *err)
{
	size_t bytes = (n ? n : 1) * sizeof(float);
	char what[128];
	int rc;

	memset(o, 0, sizeof(*o));
	if ((rc = rt_optim_init(&o->host, s, n, err)))
		return rc;
	snprintf(what, sizeof(what), "train.optimizer: the %s state of %zu parameters",
		 o->host.type == RT_OPTIM_ADAMW ? "adamw" : "sgd", n);
	if ((rc = dev_alloc((void **)&o->m, bytes, what, STAGE_HINT, err)) ||
	    (o->host.type == RT_OPTIM_ADAMW &&
	     (rc = dev_alloc((void **)&o->v, bytes, what, STAGE_HINT, err))))
		return rc;
	if ((rc = rt_gpu__check(cudaMemset(o->m, 0, bytes), "zeroing the optimizer state", err)))
		return rc;
	if (o->v)
		rc = rt_gpu__check(cudaMemset(o->v, 0, bytes), "zeroing the optimizer state", err);
	return rc;
}

extern "C" void rt_gpu_optim_free(struct rt_gpu_optim *o)
{
	if (o->m || o->v) {
		(void)cudaDeviceSynchronize();
		cudaFree(o->v);
		cudaFree(o->m);
	}
	rt_optim_free(&o->host);
	memset(o, 0, sizeof(*o));
}

extern "C" int rt_gpu_optim_step(struct rt_gpu_optim *o, float *params, const float *grads,
				 double lr, cudaStream_t stream, struct dt_err *err)
{
	o->host.step++;
	return rt_gpu_optim_update(&o->host, o->host.step, params, grads, o->m, o->v, o->host.n,
				   lr, stream, err);
}

/* dir: cudaMemcpyDeviceToHost (to_host) or HostToDevice (from_host) */
static int optim_copy(struct rt_gpu_optim *o, cudaStream_t stream, cudaMemcpyKind dir,
		      struct dt_err *err)
{
	size_t bytes = o->host.n * sizeof(float);
	bool down = dir == cudaMemcpyDeviceToHost;
	int rc;

	if (!bytes)
		return 0;
	if ((rc = rt_gpu__check(cudaMemcpyAsync(down ? (void *)o->host.m : (void *)o->m,
					       down ? (const void *)o->m : (const void *)o->host.m,
					       bytes, dir, stream),
			       "copy of the optimizer state", err)))
		return rc;
	if (o->v &&
	    (rc = rt_gpu__check(cudaMemcpyAsync(down ? (void *)o->host.v : (void *)o->v,
					       down ? (const void *)o->v : (const void *)o->host.v,
					       bytes, dir, stream),
			       "copy of the optimizer state", err)))
		return rc;
	return rt_gpu__check(cudaStreamSynchronize(stream), "copy of the optimizer state", err);
}

extern "C" int rt_gpu_optim_to_host(struct rt_gpu_optim *o, cudaStream_t stream, struct dt_err *err)
{
	return optim_copy(o, stream, cudaMemcpyDeviceToHost, err);
}

extern "C" int rt_gpu_optim_from_host(struct rt_gpu_optim *o, cudaStream_t stream,
				      struct dt_err *err)
{
	return optim_copy(o, stream, cudaMemcpyHostToDevice, err);
}
