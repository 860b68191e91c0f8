/*
 * kernels.cu - the CUDA kernels of the GPU path and their host wrappers:
 * activations, bias broadcast and gradient, fused softmax + cross-entropy,
 * SGD and AdamW, sum of squares and scaling (see kernels.h).
 *
 * Why the arithmetic is spelled with __fmul_rn / __fadd_rn: nvcc contracts
 * a * b + c into one fused multiply-add by default, which rounds once where
 * the CPU (x86-64 without -mfma) rounds twice. The _rn intrinsics are never
 * contracted, so each kernel performs the CPU's operations in the CPU's
 * order and, but for tanhf, gives its bits.
 *
 * Reductions (loss, sum of squares) run in two kernels: a grid of at most
 * RT_GPU_RED_BLOCKS blocks writes one double per block, then one thread adds
 * them in block order. The grid depends only on the size, so the result is
 * the same on every run (floating-point atomics would make it depend on the
 * blocks' timing).
 *
 * Sections: launch helpers, activations, linear-layer helpers, loss,
 * optimizers, gradient norm.
 */
#include "runtime/gpu/kernels.h"
#include "runtime/kernels/elem.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

/* --- launch helpers --- */

#define THREADS 256           /* threads per block of every kernel here */
#define WARPS (THREADS / 32)  /* warps per block (softmax: one row each) */
#define MAX_BLOCKS (1u << 20) /* element-wise kernels loop over the rest */


extern "C" int rt_gpu__failv(struct dt_err *err, int rc, const char *why, const char *fmt,
			     va_list ap)
{
	char what[160];

	vsnprintf(what, sizeof(what), fmt, ap);
	dt_err_add(err, "gpu: %s: %s", what, why);
	return rc;
}

static int cuda_fail(cudaError_t e, struct dt_err *err, const char *fmt, va_list ap)
{
	char why[256];

	(void)cudaGetLastError(); /* a non-sticky error is reported here, not by the next launch */
	snprintf(why, sizeof(why), "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
	return rt_gpu__failv(err, e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO, why, fmt, ap);
}

static int cuda_failf(cudaError_t e, struct dt_err *err, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = cuda_fail(e, err, fmt, ap);
	va_end(ap);
	return rc;
}

extern "C" int rt_gpu__check(cudaError_t e, const char *what, struct dt_err *err)
{
	return e == cudaSuccess ? 0 : cuda_failf(e, err, "%s", what);
}

/* After a launch: the launch's own error (bad configuration, no device,
 * an earlier sticky error), with the kernel named by fmt. */
static int launched(struct dt_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int launched(struct dt_err *err, const char *fmt, ...)
{
	cudaError_t e = cudaGetLastError();
	va_list ap;
	int rc;

	if (e == cudaSuccess)
		return 0;
	va_start(ap, fmt);
	rc = cuda_fail(e, err, fmt, ap);
	va_end(ap);
	return rc;
}

/* Blocks for n elements, one per thread, at most MAX_BLOCKS (grid-stride
 * loops do the rest). n > 0. */
static unsigned int blocks_for(size_t n, size_t cap)
{
	size_t b = (n + THREADS - 1) / THREADS;

	return (unsigned int)(b < cap ? b : cap);
}

/* One thread adds partial[0..n) in order onto *value: the second half of
 * every reduction (deterministic). */
__global__ void k_finish_sum(double *value, const double *partial, unsigned int n)
{
	double s = 0.0;
	unsigned int i;

	if (blockIdx.x != 0 || threadIdx.x != 0)
		return;
#pragma unroll 8 /* loads ahead; the adds stay in order */
	for (i = 0; i < n; i++)
		s += partial[i];
	*value += s;
}

/* Sum of v over the block, by a tree of fixed shape; the result is valid in
 * thread 0. Every thread of the block must call it. */
__device__ double block_sum(double v)
{
	__shared__ double buf[THREADS];
	unsigned int t = threadIdx.x, half;

	buf[t] = v;
	__syncthreads();
	for (half = THREADS / 2; half > 0; half /= 2) {
		if (t < half)
			buf[t] += buf[t + half];
		__syncthreads();
	}
	return buf[0];
}

/* --- activations --- */

/* GELU's element math is the CPU's (runtime/kernels/elem.h): the same
 * operations in the same order, no fused multiply-add (-fmad=false), the
 * same bits */
__device__ float gelu_fwd(float v)
{
	return rt_gelu(v);
}

__device__ float gelu_bwd(float v, float g)
{
	return rt_gelu_back(v, g);
}

__global__ void k_act_forward(int act, const float *x, float *y, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (; i < n; i += stride) {
		float v = x[i];

		if (act == RT_ACT_RELU)
			y[i] = v > 0.0f ? v : 0.0f;
		else if (act == RT_ACT_GELU)
			y[i] = gelu_fwd(v);
		else
			y[i] = tanhf(v);
	}
}

__global__ void k_act_backward(int act, const float *x, const float *dy, float *dx, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (; i < n; i += stride) {
		float v = x[i], g = dy[i];

		if (act == RT_ACT_RELU) {
			dx[i] = v > 0.0f ? g : 0.0f;
		} else if (act == RT_ACT_GELU) {
			dx[i] = gelu_bwd(v, g);
		} else {
			float t = tanhf(v);

			dx[i] = __fmul_rn(g, __fsub_rn(1.0f, __fmul_rn(t, t)));
		}
	}
}

static int check_act(enum rt_act act, const char *fn, struct dt_err *err)
{
	if (act == RT_ACT_RELU || act == RT_ACT_GELU || act == RT_ACT_TANH)
		return 0;
	return dt_err_add(err, "gpu: %s: activation %d is not one of relu, gelu, tanh", fn, (int)act);
}

extern "C" int rt_gpu_act_forward(enum rt_act act, const float *x, float *y, size_t n,
				  cudaStream_t stream, struct dt_err *err)
{
	int rc;

	if ((rc = check_act(act, "act_forward", err)))
		return rc;
	if (n == 0)
		return 0;
	k_act_forward<<<blocks_for(n, MAX_BLOCKS), THREADS, 0, stream>>>((int)act, x, y, n);
	return launched(err, "kernel act_forward (%s, %zu elements)", rt_act_name(act), n);
}

extern "C" int rt_gpu_act_backward(enum rt_act act, const float *x, const float *dy, float *dx,
				   size_t n, cudaStream_t stream, struct dt_err *err)
{
	int rc;

	if ((rc = check_act(act, "act_backward", err)))
		return rc;
	if (n == 0)
		return 0;
	k_act_backward<<<blocks_for(n, MAX_BLOCKS), THREADS, 0, stream>>>((int)act, x, dy, dx, n);
	return launched(err, "kernel act_backward (%s, %zu elements)", rt_act_name(act), n);
}

/* --- linear-layer helpers --- */

__global__ void k_bias_fill(const float *b, float *y, size_t rows, size_t out)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	size_t stride = (size_t)gridDim.x * blockDim.x, n = rows * out;

	for (; i < n; i += stride)
		y[i] = b[i % out];
}

/* A block per 32 columns: thread (x, y) sums column x of rows y, y + 32,
 * y + 64, ... in order (each row one coalesced read of 32 floats), then
 * thread (x, 0) adds the 32 partial sums in y order onto db[x]. A fixed
 * order, no atomics: the same bits every run, not the CPU's (which adds the
 * rows one by one onto db): a column of 8192 rows is 256 additions per
 * thread instead of 8192 in one. */
#define BIAS_LANES 32
__global__ void __launch_bounds__(BIAS_LANES * BIAS_LANES)
k_bias_grad(const float *dy, float *db, int rows, int out)
{
	__shared__ float part[BIAS_LANES][BIAS_LANES + 1];
	int x = threadIdx.x, y = threadIdx.y, o = blockIdx.x * BIAS_LANES + x, r, k;
	float s = 0.0f;

	if (o < out)
		for (r = y; r < rows; r += BIAS_LANES)
			s = __fadd_rn(s, dy[(size_t)r * (size_t)out + (size_t)o]);
	part[y][x] = s;
	__syncthreads();
	if (y != 0 || o >= out)
		return;
	s = part[0][x];
	for (k = 1; k < BIAS_LANES; k++)
		s = __fadd_rn(s, part[k][x]);
	db[o] = __fadd_rn(db[o], s);
}

extern "C" int rt_gpu_bias_fill(const float *b, float *y, int rows, int out, cudaStream_t stream,
				struct dt_err *err)
{
	size_t n;

	if (rows < 0 || out < 0)
		return dt_err_add(err, "gpu: bias_fill: negative shape [%d][%d]", rows, out);
	n = (size_t)rows * (size_t)out;
	if (n == 0)
		return 0;
	k_bias_fill<<<blocks_for(n, MAX_BLOCKS), THREADS, 0, stream>>>(b, y, (size_t)rows, (size_t)out);
	return launched(err, "kernel bias_fill ([%d][%d])", rows, out);
}

extern "C" int rt_gpu_bias_grad(const float *dy, float *db, int rows, int out, cudaStream_t stream,
				struct dt_err *err)
{
	if (rows < 0 || out < 0)
		return dt_err_add(err, "gpu: bias_grad: negative shape [%d][%d]", rows, out);
	if (rows == 0 || out == 0)
		return 0;
	k_bias_grad<<<(unsigned)((out + BIAS_LANES - 1) / BIAS_LANES), dim3(BIAS_LANES, BIAS_LANES), 0,
		      stream>>>(dy, db, rows, out);
	return launched(err, "kernel bias_grad ([%d][%d])", rows, out);
}

/* --- loss --- */

/* The first maximum of (v, i) and (ov, oi), i < 0 meaning none: the larger
 * value, ties to the smaller index, as the CPU's scan with '>' keeps the
 * first maximum. (With NaN logits the pick may differ from the CPU's; the
 * loss is NaN either way.) */
__device__ void argmax_merge(float *v, int *i, float ov, int oi)
{
	if (oi < 0)
		return;
	if (*i < 0 || ov > *v || (ov == *v && oi < *i)) {
		*v = ov;
		*i = oi;
	}
}

/* One warp per row, rows strided over the grid. Each warp adds its rows'
 * losses in row order; thread 0 adds the warps' sums in warp order into
 * partial[blockIdx.x]. Every block first checks all labels (rows is a
 * micro-batch, a few thousand at most), so that a bad label anywhere stops
 * every block before it writes: the CPU's all-or-nothing. */
__global__ void k_softmax_xent(const float *logits, const int32_t *labels, int rows, int classes,
			       float grad_scale, float *dlogits, struct rt_gpu_xent_acc *acc)
{
	__shared__ double warp_loss[WARPS];
	__shared__ unsigned int warp_hits[WARPS];
	unsigned int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
	int r, c, bad = 0;
	double my_loss = 0.0;
	unsigned int my_hits = 0;

	for (r = (int)threadIdx.x; r < rows; r += (int)blockDim.x)
		bad |= labels[r] < 0 || labels[r] >= classes;
	if (__syncthreads_or(bad)) {
		if (threadIdx.x == 0) {
			acc->partial[blockIdx.x] = 0.0;
			if (blockIdx.x == 0) {
				acc->loss += __longlong_as_double(0x7ff8000000000000ll); /* NaN */
				acc->bad_calls += 1;
			}
		}
		return;
	}

	for (r = (int)(blockIdx.x * WARPS + warp); r < rows; r += (int)(gridDim.x * WARPS)) {
		const float *z = logits + (size_t)r * (size_t)classes;
		int label = labels[r], arg = -1, k;
		float best = 0.0f;
		double m, sum = 0.0, lse;

		for (c = (int)lane; c < classes; c += 32)
			argmax_merge(&best, &arg, z[c], c);
		for (k = 16; k > 0; k /= 2) {
			float ov = __shfl_xor_sync(0xffffffffu, best, k);
			int oi = __shfl_xor_sync(0xffffffffu, arg, k);

			argmax_merge(&best, &arg, ov, oi);
		}
		/* log sum_j exp(z_j) = m + log sum_j exp(z_j - m), in double as the CPU */
		m = (double)best;
		for (c = (int)lane; c < classes; c += 32)
			sum += exp((double)z[c] - m);
		for (k = 16; k > 0; k /= 2)
			sum += __shfl_xor_sync(0xffffffffu, sum, k);
		lse = log(sum);
		if (lane == 0) {
			my_loss += lse - ((double)z[label] - m);
			my_hits += arg == label;
		}
		if (dlogits) {
			float *d = dlogits + (size_t)r * (size_t)classes;

			for (c = (int)lane; c < classes; c += 32) {
				double p = exp((double)z[c] - m - lse);

				d[c] = (float)((p - (double)(c == label)) * (double)grad_scale);
			}
		}
	}
	if (lane == 0) {
		warp_loss[warp] = my_loss;
		warp_hits[warp] = my_hits;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		double s = 0.0;
		unsigned long long h = 0;
		unsigned int w;

		for (w = 0; w < WARPS; w++) {
			s += warp_loss[w];
			h += warp_hits[w];
		}
		acc->partial[blockIdx.x] = s;
		if (h)
			atomicAdd(&acc->correct, h); /* integers: any order gives the same */
	}
}

extern "C" int rt_gpu_xent_zero(struct rt_gpu_xent_acc *acc, cudaStream_t stream, struct dt_err *err)
{
	return rt_gpu__check(cudaMemsetAsync(acc, 0, sizeof(*acc), stream),
			    "cudaMemsetAsync of the loss accumulator", err);
}

extern "C" int rt_gpu_xent_fetch(const struct rt_gpu_xent_acc *acc, struct rt_gpu_xent_sums *out,
				 cudaStream_t stream, struct dt_err *err)
{
	/* the sums are the acc's leading fields, in the same order and types */
	static_assert(offsetof(struct rt_gpu_xent_acc, bad_calls) ==
		      offsetof(struct rt_gpu_xent_sums, bad_calls), "acc and sums differ");
	return rt_gpu__check(cudaMemcpyAsync(out, acc, sizeof(*out), cudaMemcpyDeviceToHost, stream),
			    "cudaMemcpyAsync of the loss accumulator", err);
}

extern "C" int rt_gpu_softmax_xent(const float *logits, const int32_t *labels, int rows,
				   int classes, float grad_scale, float *dlogits,
				   struct rt_gpu_xent_acc *acc, cudaStream_t stream,
				   struct dt_err *err)
{
	unsigned int blocks;
	int rc;

	if (rows < 0 || classes < 1)
		return dt_err_add(err, "gpu: softmax_xent: bad shape [%d][%d] (classes must be >= 1)",
				  rows, classes);
	if (rows == 0)
		return 0;
	blocks = (unsigned int)((rows + WARPS - 1) / WARPS);
	if (blocks > RT_GPU_RED_BLOCKS)
		blocks = RT_GPU_RED_BLOCKS;
	k_softmax_xent<<<blocks, THREADS, 0, stream>>>(logits, labels, rows, classes, grad_scale,
						       dlogits, acc);
	if ((rc = launched(err, "kernel softmax_xent ([%d][%d])", rows, classes)))
		return rc;
	k_finish_sum<<<1, 1, 0, stream>>>(&acc->loss, acc->partial, blocks);
	return launched(err, "kernel finish_sum (loss of [%d][%d])", rows, classes);
}

/* --- optimizers --- */

/* The optimizers' element math is the CPU's (runtime/kernels/elem.h). */
__global__ void k_sgd(float *w, const float *g, float *v, size_t n, float mu, float wd, float a)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (; i < n; i += stride)
		rt_sgd_elem(&w[i], &v[i], g[i], mu, wd, a);
}

__global__ void k_adamw(float *w, const float *g, float *m, float *v, size_t n,
			struct rt_adamw_k k)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (; i < n; i += stride)
		rt_adamw_elem(&w[i], &m[i], &v[i], g[i], k);
}

extern "C" int rt_gpu_optim_update(const struct rt_optim *o, int64_t t, float *params,
				   const float *grads, float *m, float *v, size_t n, double lr,
				   cudaStream_t stream, struct dt_err *err)
{
	if (t < 1)
		return dt_err_add(err, "gpu: optim_update: step count %lld must be >= 1 (it includes this update)",
				  (long long)t);
	if (n > o->n)
		n = o->n; /* as rt_optim_step: never past the state buffers */
	if (n == 0)
		return 0;
	if (o->type == RT_OPTIM_ADAMW) {
		/* the constants exactly as optim.c adamw_step computes them */
		double tt = (double)t;
		struct rt_adamw_k k;

		k.decay = (float)(1.0 - lr * o->weight_decay);
		k.b1 = (float)o->beta1;
		k.b2 = (float)o->beta2;
		k.c1 = (float)(1.0 - o->beta1);
		k.c2 = (float)(1.0 - o->beta2);
		k.step_size = (float)(lr / (1.0 - pow(o->beta1, tt)));
		k.bc2_sqrt = (float)sqrt(1.0 - pow(o->beta2, tt));
		k.eps = (float)o->eps;
		if (!v)
			return dt_err_add(err, "gpu: optim_update: adamw needs its second-moment buffer (v is NULL)");
		k_adamw<<<blocks_for(n, MAX_BLOCKS), THREADS, 0, stream>>>(params, grads, m, v, n, k);
		return launched(err, "kernel adamw (%zu parameters)", n);
	}
	k_sgd<<<blocks_for(n, MAX_BLOCKS), THREADS, 0, stream>>>(
		params, grads, m, n, (float)o->momentum, (float)o->weight_decay, (float)lr);
	return launched(err, "kernel sgd (%zu parameters)", n);
}

/* --- gradient norm --- */

__global__ void k_sumsq(const float *g, size_t n, double *partial)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	size_t stride = (size_t)gridDim.x * blockDim.x;
	double s = 0.0, total;

	for (; i < n; i += stride)
		s += (double)g[i] * (double)g[i];
	total = block_sum(s);
	if (threadIdx.x == 0)
		partial[blockIdx.x] = total;
}

__global__ void k_scale(float *g, size_t n, float factor)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (; i < n; i += stride)
		g[i] = __fmul_rn(g[i], factor);
}

/* rt_clip_factor (runtime/model/optim.h), as torch.nn.utils.clip_grad_norm_:
 * scale by max_norm / (norm + 1e-6) when that is below 1 */
__global__ void k_clip(float *g, size_t n, const double *sumsq, double max_norm)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	size_t stride = (size_t)gridDim.x * blockDim.x;
	double coef = max_norm / (sqrt(*sumsq) + 1e-6);
	float factor;

	if (!(max_norm > 0.0 && coef < 1.0))
		return;
	factor = (float)coef;
	for (; i < n; i += stride)
		g[i] = __fmul_rn(g[i], factor);
}

extern "C" int rt_gpu_sum_zero(struct rt_gpu_sum *sum, cudaStream_t stream, struct dt_err *err)
{
	return rt_gpu__check(cudaMemsetAsync(sum, 0, sizeof(*sum), stream),
			    "cudaMemsetAsync of a sum of squares", err);
}

extern "C" int rt_gpu_sumsq(const float *g, size_t n, struct rt_gpu_sum *sum, cudaStream_t stream,
			    struct dt_err *err)
{
	unsigned int blocks;
	int rc;

	if (n == 0)
		return 0;
	blocks = blocks_for(n, RT_GPU_RED_BLOCKS);
	k_sumsq<<<blocks, THREADS, 0, stream>>>(g, n, sum->partial);
	if ((rc = launched(err, "kernel sumsq (%zu elements)", n)))
		return rc;
	k_finish_sum<<<1, 1, 0, stream>>>(&sum->value, sum->partial, blocks);
	return launched(err, "kernel finish_sum (sumsq of %zu elements)", n);
}

extern "C" int rt_gpu_scale(float *g, size_t n, float factor, cudaStream_t stream,
			    struct dt_err *err)
{
	if (n == 0)
		return 0;
	k_scale<<<blocks_for(n, MAX_BLOCKS), THREADS, 0, stream>>>(g, n, factor);
	return launched(err, "kernel scale (%zu elements)", n);
}

extern "C" int rt_gpu_clip(float *g, size_t n, const double *sumsq, double max_norm,
			   cudaStream_t stream, struct dt_err *err)
{
	if (n == 0 || !(max_norm > 0.0))
		return 0;
	k_clip<<<blocks_for(n, MAX_BLOCKS), THREADS, 0, stream>>>(g, n, sumsq, max_norm);
	return launched(err, "kernel clip (%zu elements)", n);
}
