/*
 * kernels.h - the numerical kernels of the GPU path (train.device "cuda"):
 * the device twins of runtime/kernels/kernels.h and runtime/model/optim.h, each a CUDA
 * kernel behind a host wrapper that launches it on a caller's stream.
 *
 * Every kernel here mirrors one CPU function and its formula exactly, so that
 * a GPU run can be compared with a CPU run step by step:
 *   - float32 data, same formulas in the same order, with the products and
 *     sums rounded separately (no fused multiply-add where the CPU has none),
 *     so that SGD, AdamW, ReLU, GELU and scaling give the CPU's bits for
 *     the same inputs; tanhf (tanh) may differ from glibc's by an ulp or two;
 *   - reductions are done in a fixed order (no atomics on floating point),
 *     so a run is deterministic; the order is not the CPU's: those the CPU
 *     does in double (loss, sum of squares) agree to about 1e-15 relative,
 *     the bias gradient's float sums to float rounding.
 *
 * Conventions for every wrapper:
 *   - all pointers are DEVICE pointers (cudaMalloc) unless said otherwise,
 *     borrowed for the call; nothing is allocated or kept;
 *   - the work is queued on `stream` and the wrapper returns at once: no
 *     wrapper synchronises with the host, so results are there once the
 *     stream reaches them (cudaStreamSynchronize, or an event);
 *   - row-major layouts as on the CPU: activations [rows][features], a
 *     weight matrix [out][in];
 *   - parameter gradients (db) are ACCUMULATED (+=), input gradients (dx)
 *     overwritten, as runtime/kernels/kernels.h;
 *   - n == 0 or rows == 0 is allowed and launches nothing;
 *   - return 0, or a negative errno-style code (-EINVAL for a bad argument,
 *     -ENOMEM, -EIO for any other CUDA error) with one line in err naming
 *     the kernel and carrying cudaGetErrorString's text. A launch error is
 *     reported by the wrapper that launched; an error raised while the
 *     kernel ran surfaces at the next synchronisation (CUDA's rule).
 *
 * Sections: errors, activations, linear-layer helpers, loss, optimizers,
 * gradient norm.
 */
#ifndef DTRAIN_RUNTIME_GPU_KERNELS_H
#define DTRAIN_RUNTIME_GPU_KERNELS_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "runtime/kernels/kernels.h"
#include "runtime/model/optim.h"
#include "base/err.h"

/* --- errors --- */

/* Private to runtime/gpu/ (double underscore): maps a CUDA error to 0,
 * -ENOMEM (allocation) or -EIO (anything else) and, when it is an error,
 * adds "gpu: WHAT: CUDA's message (cudaErrorName)" to err. */
int rt_gpu__check(cudaError_t e, const char *what, struct dt_err *err);
/* The GPU path's one error line, "gpu: WHAT: WHY", WHAT from fmt and ap
 * (at most 159 bytes kept); returns rc. */
int rt_gpu__failv(struct dt_err *err, int rc, const char *why, const char *fmt, va_list ap);

/* --- activations (runtime/kernels/kernels.h rt_act_forward / rt_act_backward) --- */

/* y[i] = f(x[i]) for i < n; y may equal x. Same GELU (tanh form) as the CPU. */
int rt_gpu_act_forward(enum rt_act act, const float *x, float *y, size_t n,
		       cudaStream_t stream, struct dt_err *err);
/* dx[i] = dy[i] * f'(x[i]), x the pre-activation; dx may equal dy or x. */
int rt_gpu_act_backward(enum rt_act act, const float *x, const float *dy, float *dx, size_t n,
			cudaStream_t stream, struct dt_err *err);

/* --- linear-layer helpers (the products themselves are cuBLAS, stage.cu) --- */

/* y[r][o] = b[o] for r < rows, o < out: the bias broadcast that the forward's
 * sgemm then adds x W^T onto (beta = 1), as rt_linear_forward does. */
int rt_gpu_bias_fill(const float *b, float *y, int rows, int out, cudaStream_t stream,
		     struct dt_err *err);
/* db[o] += sum over r < rows of dy[r][o] (column sums of dy [rows][out]),
 * in float, in a fixed order (32 interleaved row sums per column, then
 * those in order, then onto db[o]): deterministic, within float rounding
 * of the CPU's row-by-row sum, not its bits (a GPT-2 column of 8192 rows in
 * one thread's order would be the step's slowest kernel). */
int rt_gpu_bias_grad(const float *dy, float *db, int rows, int out, cudaStream_t stream,
		     struct dt_err *err);

/* --- loss (runtime/kernels/kernels.h rt_softmax_xent) --- */

/* Blocks of a device reduction: partial sums per block, summed in block
 * order by a second one-block kernel (deterministic, no atomics). */
#define RT_GPU_RED_BLOCKS 1024 /* enough warps to fill an H100 (132 SMs x 64) */

/* Device-side accumulators of the loss over the micro-batches of a step.
 * Lives in DEVICE memory: the caller cudaMallocs sizeof(struct
 * rt_gpu_xent_acc), zeroes it with rt_gpu_xent_zero() at the start of each
 * step, and copies the leading fields to the host once per step with
 * rt_gpu_xent_fetch(). One acc must not be used by two streams at once
 * (partial[] is scratch shared by every call). */
struct rt_gpu_xent_acc {
	double loss;             /* sum over rows of -log softmax[label] since the zero */
	unsigned long long correct;   /* rows whose argmax (first max) was the label */
	unsigned long long bad_calls; /* calls that met a label outside [0, classes) */
	double partial[RT_GPU_RED_BLOCKS]; /* scratch of each call */
};

/* The leading fields of an acc, on the host. */
struct rt_gpu_xent_sums {
	double loss;
	unsigned long long correct;
	unsigned long long bad_calls;
};

/* acc = 0 (cudaMemsetAsync). */
int rt_gpu_xent_zero(struct rt_gpu_xent_acc *acc, cudaStream_t stream, struct dt_err *err);
/* Queues a copy of acc's sums into *out (host memory, pinned for the copy to
 * be asynchronous; pageable memory makes it synchronous); *out is valid
 * once the stream has reached it. */
int rt_gpu_xent_fetch(const struct rt_gpu_xent_acc *acc, struct rt_gpu_xent_sums *out,
		      cudaStream_t stream, struct dt_err *err);

/* Fused softmax + cross-entropy of logits [rows][classes] against labels
 * [rows] (device int32), as rt_softmax_xent, in double like it:
 *	acc->loss    += sum over rows of log sum_j exp(z_j - m) - (z_label - m)
 *	acc->correct += rows whose first argmax equals the label
 *	dlogits [rows][classes] (NULL: not computed) = (softmax - onehot) *
 *	grad_scale, overwritten.
 * A label outside [0, classes) anywhere in the call makes it add NAN to
 * acc->loss and 1 to acc->bad_calls and write nothing else (neither
 * dlogits nor correct), as the CPU returns NAN: the step's loss is then NaN
 * and the trainer stops; find the row on the host with rt_labels_check().
 * classes must be >= 1 (-EINVAL otherwise). */
int rt_gpu_softmax_xent(const float *logits, const int32_t *labels, int rows, int classes,
			float grad_scale, float *dlogits, struct rt_gpu_xent_acc *acc,
			cudaStream_t stream, struct dt_err *err);

/* --- optimizers (runtime/model/optim.h rt_optim_step) --- */

/* One update of params [n] from grads [n] with the state m [n] (SGD momentum
 * buffer; AdamW first moment) and v [n] (AdamW second moment; unused, may be
 * NULL, for SGD), by o's type and hyper-parameters (o's own m, v and step
 * are not touched: o is a host struct from rt_optim_init, used here only
 * for its settings). t is the number of updates INCLUDING this one (1 for
 * the first), as o->step after rt_optim_step's increment: AdamW's bias
 * correction uses it. lr is the host scalar of rt_lr_at. The constants
 * (float casts, 1 - beta in double, bias corrections in double) are
 * computed on the host exactly as optim.c computes them, and the per-element
 * update is optim.c's, operation by operation. */
int rt_gpu_optim_update(const struct rt_optim *o, int64_t t, float *params, const float *grads,
			float *m, float *v, size_t n, double lr, cudaStream_t stream,
			struct dt_err *err);

/* --- gradient norm (runtime/model/optim.h rt_sumsq, rt_scale) --- */

/* Device scratch and result of a sum of squares: the caller cudaMallocs
 * sizeof(struct rt_gpu_sum) and zeroes it (rt_gpu_sum_zero) when it wants
 * to start a new sum. Same one-stream rule as rt_gpu_xent_acc. */
struct rt_gpu_sum {
	double value;                      /* the sum so far */
	double partial[RT_GPU_RED_BLOCKS]; /* scratch of each call */
};

/* sum->value = 0 (cudaMemsetAsync). */
int rt_gpu_sum_zero(struct rt_gpu_sum *sum, cudaStream_t stream, struct dt_err *err);
/* sum->value += sum over i < n of (double)g[i]^2. Call once per buffer
 * (a stage's whole grads) and copy value back (or reduce it over the
 * pipeline with NCCL, still on the device) for the global norm. */
int rt_gpu_sumsq(const float *g, size_t n, struct rt_gpu_sum *sum, cudaStream_t stream,
		 struct dt_err *err);
/* g[i] *= factor (host scalar), as rt_scale. */
int rt_gpu_scale(float *g, size_t n, float factor, cudaStream_t stream, struct dt_err *err);
/* Clipping without a trip to the host: with norm = sqrt(*sumsq) (device
 * double, e.g. rt_gpu_sum.value after a sum over all stages), scales g by
 * (float)(max_norm / (norm + 1e-6)) when max_norm > 0 and that is below 1,
 * and leaves it alone otherwise: rt_clip_factor's rule (runtime/model/optim.h),
 * which train.c applies to train.grad_clip. */
int rt_gpu_clip(float *g, size_t n, const double *sumsq, double max_norm, cudaStream_t stream,
		struct dt_err *err);

#ifdef __cplusplus
}
#endif

#endif
