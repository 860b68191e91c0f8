/*
 * stage.h - one pipeline stage of the MLP on the GPU (train.device "cuda"):
 * the device twin of struct rt_stage (runtime/model/model.h), its activations per
 * micro-batch, forward and backward with cuBLAS, and the optimizer state on
 * the device.
 *
 * Invariants:
 *   - same parameter layout as the CPU: ONE device buffer of parameters and
 *     one of gradients, each layer's W [out][in] row-major then b [out], in
 *     layer order, at the CPU stage's offsets. So a checkpoint is one copy
 *     of the whole buffer to a host snapshot (rt_gpu_stage_params_to_host),
 *     and an allreduce bucket of whole layers is one contiguous range.
 *   - initialisation is a copy of a CPU rt_stage's parameters
 *     (rt_stage_init), so the initial model is bitwise the CPU's.
 *   - the stage computes exactly what rt_stage_forward / rt_stage_backward
 *     compute, with the same kernels in the same order (runtime/gpu/
 *     kernels.h) and cuBLAS for the products: y = x W^T + b, dW += dy^T x,
 *     dx = dy W. In float32 mode (the default, CUBLAS_DEFAULT_MATH) results
 *     differ from the CPU's only by the summation order inside the
 *     products; with tf32 (CUBLAS_TF32_TENSOR_OP_MATH: inputs of products
 *     rounded to 10-bit mantissas, Ampere and later) by about 1e-3 relative.
 *   - everything runs in order on ONE stream, the caller's (given at init):
 *     no function here waits for the GPU unless it says so.
 *
 * Overlap of gradient allreduce with backward: rt_gpu_stage_backward()
 * records a cudaEvent right after layer i's dW and db are queued, then calls
 * layer_done(ctx, i, event). The caller, on the step's last backward, makes
 * its communication stream wait for that event (cudaStreamWaitEvent) and
 * queues that bucket's ncclAllReduce on the communication stream; compute
 * goes on with the earlier layers meanwhile. The event is re-recorded by
 * the next backward, so wait on it inside the callback. Before the optimizer
 * (or rt_gpu_stage_zero_grads) touches the gradients, the compute stream
 * must wait for the communication stream (an event recorded there after the
 * last allreduce).
 *
 * All functions use the CUDA device that is current when they are called
 * (the device selection, runtime/gpu/gpu.h, sets it once per process); call
 * them all with the same one. Errors: 0 or a negative errno-style code
 * (-EINVAL bad argument, -ENOMEM out of device memory, -EIO any other CUDA
 * or cuBLAS error) with a line in err.
 *
 * Life cycle: rt_gpu_stage_init() (from a CPU stage) / rt_gpu_stage_free();
 * per micro-batch in flight rt_gpu_acts_init() / rt_gpu_acts_free(); per
 * step: rt_gpu_stage_zero_grads(), forward and backward of each micro-batch,
 * the gradient allreduce, rt_gpu_optim_step().
 *
 * Sections: stages, activations, forward and backward, optimizer state.
 */
#ifndef DTRAIN_RUNTIME_GPU_STAGE_H
#define DTRAIN_RUNTIME_GPU_STAGE_H

#include <stdbool.h>
#include <stddef.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "jobs/spec.h"
#include "runtime/model/mlp.h"
#include "runtime/model/optim.h"
#include "base/err.h"

/* --- stages --- */

/* One layer of a GPU stage: views into the stage's device buffers. */
struct rt_gpu_layer {
	int index;       /* global layer index l */
	int in, out;     /* widths w[l] -> w[l+1] */
	bool act;        /* followed by the activation (all but the model's last layer) */
	size_t offset;   /* index of this layer's first float in params and grads */
	size_t n_params; /* out * in + out: W then b */
	float *w;        /* device [out][in] row-major, = params + offset */
	float *b;        /* device [out], = w + out * in */
	float *dw;       /* device [out][in], = grads + offset */
	float *db;       /* device [out], = dw + out * in */
	cudaEvent_t grads_ready; /* owned; recorded by each backward once dw, db are queued */
};

/* A stage on the GPU. Everything here is owned by the stage and freed by
 * rt_gpu_stage_free(), except the stream (borrowed: the caller keeps it
 * alive until then). */
struct rt_gpu_stage {
	int stage;          /* 0 <= stage < n_stages */
	int n_stages;
	int first_layer;    /* global index of layers[0] */
	int n_layers;       /* >= 1 */
	int n_model_layers; /* layers of the whole model */
	enum rt_act act;    /* model.activation */
	int in;             /* width of the stage input */
	int out;            /* width of the stage output */
	int max_width;      /* widest layer output of the stage */
	float *params;      /* device [n_params]: every layer's W then b, in layer order */
	float *grads;       /* device [n_params]: same layout; zero after init */
	size_t n_params;
	struct rt_gpu_layer *layers; /* host array [n_layers], in order */
	bool tf32;          /* products in TF32 (CUBLAS_TF32_TENSOR_OP_MATH) */
	cudaStream_t stream;  /* borrowed: every operation of the stage runs on it */
	cublasHandle_t blas;  /* owned, bound to stream */
};

/* Builds the GPU twin of the CPU stage cpu (borrowed for the call; the
 * caller may free it afterwards): same layers and layout, device params a
 * copy of cpu->params, device grads zero. tf32 picks the products' math
 * mode (train spec switch; false = float32). Waits for the copies, so the
 * stage is ready when it returns. The caller frees with
 * rt_gpu_stage_free(), also after a failure. */
int rt_gpu_stage_init(struct rt_gpu_stage *g, const struct rt_stage *cpu, bool tf32,
		      cudaStream_t stream, struct dt_err *err);
/* Waits for the stage's stream, frees what the stage owns and zeroes it;
 * safe on a zeroed or freed stage. */
void rt_gpu_stage_free(struct rt_gpu_stage *g);
/* grads = 0, queued on the stream (at the start of each step). */
int rt_gpu_stage_zero_grads(struct rt_gpu_stage *g, struct dt_err *err);

/* Queues a copy of all params into host [n_params] (pinned memory from
 * cudaMallocHost for the copy to be asynchronous; pageable memory makes the
 * call wait for it): the checkpoint snapshot, valid once the stream has
 * reached it (cudaStreamSynchronize(g->stream)). */
int rt_gpu_stage_params_to_host(const struct rt_gpu_stage *g, float *host, struct dt_err *err);
/* Queues params = host [n_params] (a resume); host must stay unchanged until
 * the stream has reached the copy. */
int rt_gpu_stage_params_from_host(struct rt_gpu_stage *g, const float *host, struct dt_err *err);

/* --- activations of one micro-batch --- */

/* The device twin of struct rt_acts: a copy of the stage input, each
 * layer's pre-activation and output, two scratch buffers for backward, for
 * up to max_rows samples. Owned by the caller's struct, allocated by
 * rt_gpu_acts_init(), freed by rt_gpu_acts_free(). */
struct rt_gpu_acts {
	/* the stage these were sized for (checked by forward and backward) */
	int first_layer, n_layers, in;
	int max_rows;
	int rows;        /* rows of the last forward; -1 before the first */
	float *x;        /* device [max_rows][in]: copy of the stage input */
	float **z;       /* host [n_layers] -> device [max_rows][layer out]: pre-activations */
	float **a;       /* host [n_layers] -> device [max_rows][layer out]: outputs;
			    == z[i] for a layer without activation */
	float *dbuf[2];  /* device [max_rows][max_width] each: backward scratch */
	float *mem;      /* the one device allocation behind x, z[], a[], dbuf[] */
};

/* Sizes acts for micro-batches of up to max_rows (>= 1) through g.
 * 0, -EINVAL or -ENOMEM; rt_gpu_acts_free() also after a failure. */
int rt_gpu_acts_init(struct rt_gpu_acts *acts, const struct rt_gpu_stage *g, int max_rows,
		     struct dt_err *err);
/* Frees and zeroes (waits for the device first); safe on a zeroed or freed
 * struct. */
void rt_gpu_acts_free(struct rt_gpu_acts *acts);

/* --- forward and backward --- */

/* Forward of rows (0 <= rows <= acts->max_rows) samples x [rows][g->in]
 * through the stage, queued on g->stream. x may be device memory or host
 * memory (cudaMemcpyDefault; pinned host memory keeps the copy
 * asynchronous); it is copied into acts, so the caller may reuse x once the
 * stream has passed the copy. *y gets the stage output [rows][g->out]
 * (device memory in acts: the last layer's activations, or the logits on the
 * last stage), valid until the next forward on the same acts. 0, -EINVAL
 * (rows out of range, acts sized for another stage) or a CUDA/cuBLAS error. */
int rt_gpu_stage_forward(struct rt_gpu_stage *g, struct rt_gpu_acts *acts, const float *x,
			 int rows, const float **y, struct dt_err *err);

/* Backward of the micro-batch of the last rt_gpu_stage_forward() on acts,
 * given dy [rows][g->out] (device) = dLoss/d(stage output) (on the last
 * stage: the dlogits of rt_gpu_softmax_xent()). ACCUMULATES every layer's
 * dW and db into g->grads, and writes dx [rows][g->in] (device) =
 * dLoss/d(stage input); dx NULL skips that product (stage 0). dy and dx
 * must not overlap acts.
 *
 * layer_done (may be NULL) is called as layer_done(ctx, i, ready) for i =
 * n_layers-1 down to 0, as soon as layer i's gradient kernels are queued;
 * ready is an event that completes when they have run (see the top of this
 * file for its use with the allreduce). It is called also when rows is 0.
 * 0, -EINVAL (no forward on acts, acts sized for another stage) or a
 * CUDA/cuBLAS error. */
int rt_gpu_stage_backward(struct rt_gpu_stage *g, struct rt_gpu_acts *acts, const float *dy,
			  float *dx,
			  void (*layer_done)(void *ctx, int layer_index_in_stage, cudaEvent_t ready),
			  void *ctx, struct dt_err *err);

/* --- optimizer state on the device --- */

/* The optimizer of spec->train.optimizer for n parameters, its state on the
 * device. host holds the settings and the step count (rt_optim_init); its
 * m and v are the HOST mirrors of the state for checkpoints (filled by
 * rt_gpu_optim_to_host, read by rt_gpu_optim_from_host), not used by the
 * updates. */
struct rt_gpu_optim {
	struct rt_optim host; /* settings, step, host mirror of m and v */
	float *m;             /* device [n]: SGD momentum buffer; AdamW first moment */
	float *v;             /* device [n]: AdamW second moment; NULL for SGD */
};

/* State zeroed, step 0. The caller frees with rt_gpu_optim_free(), also
 * after a failure. 0, -EINVAL (spec) or -ENOMEM (host or device). */
int rt_gpu_optim_init(struct rt_gpu_optim *o, const struct spec *s, size_t n,
		      struct dt_err *err);
/* Waits for the device, frees, zeroes; safe on a zeroed or freed struct. */
void rt_gpu_optim_free(struct rt_gpu_optim *o);
/* One update of params [n] from grads [n] (device) at learning rate lr,
 * queued on stream, as rt_optim_step: host.step += 1 first. */
int rt_gpu_optim_step(struct rt_gpu_optim *o, float *params, const float *grads, double lr,
		      cudaStream_t stream, struct dt_err *err);
/* Copies the device state into host.m / host.v and waits for the copy. */
int rt_gpu_optim_to_host(struct rt_gpu_optim *o, cudaStream_t stream, struct dt_err *err);
/* Copies host.m / host.v (restored by a resume) to the device and waits. */
int rt_gpu_optim_from_host(struct rt_gpu_optim *o, cudaStream_t stream, struct dt_err *err);

#ifdef __cplusplus
}
#endif

#endif
