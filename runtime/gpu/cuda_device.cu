/*
 * cuda_device.cu - the CUDA device of the seam (cuda_device.h): the table
 * of runtime/model/device.h over cudaMalloc'd memory, one stream, cuBLAS
 * products and the kernels of kernels.h and transformer.h.
 *
 * Sections: state and errors, memory, linear layers and the element-wise
 * kernels, the transformer's, loss, optimizer, opening.
 */
#include "runtime/gpu/cuda_device.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <mpi.h> /* before gpu.h's extern "C": C++ declarations of its own */

#include "runtime/gpu/kernels.h"
#include "runtime/gpu/transformer.h"
extern "C" {
#include "runtime/gpu/gpu.h"
#include "runtime/model/model.h"
#include "runtime/model/optim.h"
}

/* --- state and errors --- */

struct cuda_ctx {
	cudaStream_t stream;
	cublasHandle_t blas;
	struct rt_gpu_xent_acc *xent; /* device: the loss accumulator */
	struct rt_gpu_sum *sum;       /* device: sums of squares */
	struct rt_gpu_xent_sums *hx;  /* pinned host: the loss fetched */
	double *hsum;                 /* pinned host: a sum fetched */
	float *ws;                    /* device: attention's workspace */
	size_t ws_floats;
	struct rt_gpu_comms comms;    /* NCCL's, when the ranks use them */
	bool bf16;                    /* train.precision "bf16": products of bf16 inputs */
	__nv_bfloat16 *half;          /* device: the two operands of a product, in bf16 */
	size_t half_n;
	int rc;                       /* the first failure since the last sync */
	struct dt_err err;            /* its message */
};

static struct cuda_ctx *C(struct rt_dev *d)
{
	return (struct cuda_ctx *)d->ctx;
}

/* keeps the first failure for sync; true when the device may go on */
static bool keep(struct cuda_ctx *c, int rc)
{
	if (rc && !c->rc)
		c->rc = rc;
	return c->rc == 0;
}

static bool ok(struct cuda_ctx *c, cudaError_t e, const char *what)
{
	return keep(c, rt_gpu__check(e, what, &c->err));
}

static bool blas_ok(struct cuda_ctx *c, cublasStatus_t s, const char *what)
{
	if (s == CUBLAS_STATUS_SUCCESS)
		return true;
	if (!c->rc)
		dt_err_add(&c->err, "gpu: %s: cuBLAS status %d", what, (int)s);
	return keep(c, -EIO);
}

static int cuda_sync(struct rt_dev *d, struct dt_err *err)
{
	struct cuda_ctx *c = C(d);

	ok(c, cudaStreamSynchronize(c->stream), "cudaStreamSynchronize");
	if (!c->rc)
		return 0;
	dt_err_add(err, "%s", c->err.msg);
	return c->rc;
}

/* --- memory --- */

static int cuda_alloc(struct rt_dev *d, size_t bytes, const char *what, void **p,
		      struct dt_err *err)
{
	struct cuda_ctx *c = C(d);
	cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);

	if (e != cudaSuccess) {
		*p = NULL;
		(void)cudaGetLastError();
		if (err)
			dt_err_add(err, "gpu: cannot allocate %.1f MiB of GPU memory for %s (%s)",
				   (double)bytes / 1048576.0, what, cudaGetErrorString(e));
		return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
	}
	if (!ok(c, cudaMemsetAsync(*p, 0, bytes, c->stream), "zeroing new GPU memory")) {
		cudaFree(*p);
		*p = NULL;
		if (err && err != &c->err)
			dt_err_add(err, "%s", c->err.msg);
		return c->rc;
	}
	return 0;
}

/* after the stream's work: nothing queued may outlive its buffer (the
 * runtime does not promise that cudaFree waits for a non-blocking stream) */
static void cuda_free(struct rt_dev *d, void *p)
{
	(void)cudaStreamSynchronize(C(d)->stream);
	cudaFree(p);
}

static void cuda_put(struct rt_dev *d, void *dst, const void *src, size_t bytes)
{
	ok(C(d), cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, C(d)->stream),
	   "copy to the GPU");
}

static void cuda_get(struct rt_dev *d, void *dst, const void *src, size_t bytes)
{
	struct cuda_ctx *c = C(d);

	if (ok(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream),
	       "copy from the GPU"))
		ok(c, cudaStreamSynchronize(c->stream), "copy from the GPU (waiting)");
}

static void cuda_copy(struct rt_dev *d, void *dst, const void *src, size_t bytes)
{
	ok(C(d), cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, C(d)->stream),
	   "copy within the GPU");
}

static void cuda_zero(struct rt_dev *d, void *p, size_t bytes)
{
	ok(C(d), cudaMemsetAsync(p, 0, bytes, C(d)->stream), "cudaMemsetAsync");
}

static void cuda_close(struct rt_dev *d)
{
	struct cuda_ctx *c = C(d);

	if (!c)
		return;
	if (c->stream)
		(void)cudaStreamSynchronize(c->stream);
	if (c->blas)
		cublasDestroy(c->blas);
	rt_gpu_comms_free(&c->comms);
	cudaFree(c->xent);
	cudaFree(c->sum);
	cudaFree(c->ws);
	cudaFree(c->half);
	cudaFreeHost(c->hx);
	cudaFreeHost(c->hsum);
	if (c->stream)
		cudaStreamDestroy(c->stream);
	free(c);
	d->ctx = NULL;
}

/* --- linear layers and the element-wise kernels --- */

__global__ void k_to_bf16(const float *x, __nv_bfloat16 *y, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (; i < n; i += stride)
		y[i] = __float2bfloat16_rn(x[i]); /* nearest, ties to even: kernels/bf16.h's */
}

/* n floats of x into bf16 at y */
static bool to_bf16(struct cuda_ctx *c, const float *x, __nv_bfloat16 *y, size_t n)
{
	size_t blocks = (n + 255) / 256;

	k_to_bf16<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, c->stream>>>(x, y, n);
	return ok(c, cudaGetLastError(), "kernel to_bf16");
}

/* An operand of a product: n float32 at f, or, for bf16 products, its
 * bf16 copy already made at h (then f is not read). */
struct operand {
	const float *f;
	const __nv_bfloat16 *h;
	size_t n;
};

/* Cm = op(A) op(B) + beta Cm, column-major, as cublasSgemm with alpha 1.
 * bf16: A and B rounded to bf16 first (unless given so), the products
 * accumulated in float32 (cublasGemmEx, CUBLAS_COMPUTE_32F). */
static bool gemm(struct cuda_ctx *c, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
		 int k, struct operand A, int lda, struct operand B, int ldb, float beta, float *Cm,
		 int ldc, const char *what)
{
	const float one = 1.0f;
	const __nv_bfloat16 *ha = A.h, *hb = B.h;
	size_t need = (A.h ? 0 : A.n) + (B.h ? 0 : B.n);
	void *p = NULL;

	if (!c->bf16)
		return blas_ok(c, cublasSgemm(c->blas, ta, tb, m, n, k, &one, A.f, lda, B.f, ldb, &beta, Cm,
					      ldc),
			       what);
	if (c->half_n < need) {
		(void)cudaStreamSynchronize(c->stream); /* the old scratch's last use is over */
		cudaFree(c->half);
		c->half = NULL;
		c->half_n = 0;
		if (!ok(c, cudaMalloc(&p, need * sizeof(__nv_bfloat16)), "cudaMalloc of bf16 operands"))
			return false;
		c->half = (__nv_bfloat16 *)p;
		c->half_n = need;
	}
	if (!ha) {
		if (!to_bf16(c, A.f, c->half, A.n))
			return false;
		ha = c->half;
	}
	if (!hb) {
		if (!to_bf16(c, B.f, c->half + (A.h ? 0 : A.n), B.n))
			return false;
		hb = c->half + (A.h ? 0 : A.n);
	}
	return blas_ok(c, cublasGemmEx(c->blas, ta, tb, m, n, k, &one, ha, CUDA_R_16BF, lda, hb,
				       CUDA_R_16BF, ldb, &beta, Cm, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
				       CUBLAS_GEMM_DEFAULT),
		       what);
}

/* y [rows][out] = x [rows][in] W^T + b: b broadcast into y, then the
 * product added onto it (beta 1), as rt_linear_forward. kx, the input kept
 * (device.h's keep): x's bf16 copy for bf16 products, else x itself */
static void k_linear_forward(struct rt_dev *d, const float *x, const float *w, const float *b,
			     float *y, int rows, int in, int out, void *kx)
{
	struct cuda_ctx *c = C(d);
	const float one = 1.0f, zero = 0.0f;
	size_t nx = (size_t)rows * (size_t)in;
	struct operand W = { w, NULL, (size_t)out * (size_t)in }, X = { x, NULL, nx };

	if (rows == 0 || c->rc)
		return;
	if (kx && c->bf16) {
		if (!to_bf16(c, x, (__nv_bfloat16 *)kx, nx))
			return;
		X.h = (const __nv_bfloat16 *)kx;
	} else if (kx && kx != (void *)x &&
		   !ok(c, cudaMemcpyAsync(kx, x, nx * sizeof(float), cudaMemcpyDeviceToDevice, c->stream),
		       "keeping a linear layer's input")) {
		return;
	}
	if (b && !keep(c, rt_gpu_bias_fill(b, y, rows, out, c->stream, &c->err)))
		return;
	gemm(c, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, W, in, X, in, b ? one : zero, y, out,
	     "cublas y = x W^T + b");
}

/* dw [out][in] (+)= dy^T x, db [out] (+)= column sums of dy, dx = dy W;
 * x from kept when a forward kept it (device.h) */
static void k_linear_backward(struct rt_dev *d, const float *x, const void *kept, const float *w,
			      const float *dy, float *dx, float *dw, float *db, int rows, int in,
			      int out, bool add)
{
	struct cuda_ctx *c = C(d);
	const float one = 1.0f, zero = 0.0f;
	size_t nx = (size_t)rows * (size_t)in;
	struct operand X = { x, NULL, nx }, DY = { dy, NULL, (size_t)rows * (size_t)out },
		       W = { w, NULL, (size_t)out * (size_t)in };

	if (rows == 0 || c->rc)
		return;
	if (kept && c->bf16)
		X.h = (const __nv_bfloat16 *)kept;
	else if (kept)
		X.f = (const float *)kept;
	if (dw && !gemm(c, CUBLAS_OP_N, CUBLAS_OP_T, in, out, rows, X, in, DY, out, add ? one : zero, dw, in,
			"cublas dW += dy^T x"))
		return;
	if (db && !add && !ok(c, cudaMemsetAsync(db, 0, (size_t)out * sizeof(float), c->stream),
			      "zeroing a bias gradient"))
		return;
	if (db && !keep(c, rt_gpu_bias_grad(dy, db, rows, out, c->stream, &c->err)))
		return;
	if (dx)
		gemm(c, CUBLAS_OP_N, CUBLAS_OP_N, in, rows, out, W, in, DY, out, zero, dx, in, "cublas dx = dy W");
}

static void k_act_forward(struct rt_dev *d, enum rt_act act, const float *x, float *y, size_t n)
{
	if (!C(d)->rc)
		keep(C(d), rt_gpu_act_forward(act, x, y, n, C(d)->stream, &C(d)->err));
}

static void k_act_backward(struct rt_dev *d, enum rt_act act, const float *x, const float *dy,
			   float *dx, size_t n)
{
	if (!C(d)->rc)
		keep(C(d), rt_gpu_act_backward(act, x, dy, dx, n, C(d)->stream, &C(d)->err));
}

__global__ void k_add_kernel(float *y, const float *x, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (; i < n; i += stride)
		y[i] = __fadd_rn(y[i], x[i]);
}

static void k_add(struct rt_dev *d, float *y, const float *x, size_t n)
{
	size_t blocks = (n + 255) / 256;

	if (n == 0 || C(d)->rc)
		return;
	k_add_kernel<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, C(d)->stream>>>(y, x, n);
	ok(C(d), cudaGetLastError(), "kernel add");
}

/* --- the transformer's --- */

static void k_embed_forward(struct rt_dev *d, const float *ids, int32_t *tok, const float *wte,
			    const float *wpe, float *out, int B, int T, int C_)
{
	if (B > 0 && !C(d)->rc)
		keep(C(d), rt_gpu_embed_forward(ids, tok, wte, wpe, out, B, T, C_, C(d)->stream,
						&C(d)->err));
}

static void k_embed_backward(struct rt_dev *d, const int32_t *tok, const float *dout, float *dwte,
			     float *dwpe, int B, int T, int C_)
{
	if (B > 0 && !C(d)->rc)
		keep(C(d), rt_gpu_embed_backward(tok, dout, dwte, dwpe, B, T, C_, C(d)->stream,
						 &C(d)->err));
}

static void k_layernorm_forward(struct rt_dev *d, const float *x, const float *w, const float *b,
				float *y, float *mean, float *rstd, int N, int C_)
{
	if (N > 0 && !C(d)->rc)
		keep(C(d), rt_gpu_layernorm_forward(x, w, b, y, mean, rstd, N, C_, C(d)->stream,
						    &C(d)->err));
}

static void k_layernorm_backward(struct rt_dev *d, const float *dy, const float *x,
				 const float *w, const float *mean, const float *rstd, float *dx,
				 float *dw, float *db, int N, int C_)
{
	if (N > 0 && !C(d)->rc)
		keep(C(d), rt_gpu_layernorm_backward(dy, x, w, mean, rstd, dx, dw, db, N, C_,
						     C(d)->stream, &C(d)->err));
}

/* attention's workspace of at least B sequences; grown (after the stream
 * has passed every use of the old one: cudaFree waits) */
static float *workspace(struct rt_dev *d, int B, int T, int NH, struct dt_err *err)
{
	struct cuda_ctx *c = C(d);
	size_t need = rt_gpu_attention_scratch_floats(B, T, NH);
	void *p = NULL;

	if (c->ws_floats >= need)
		return c->ws;
	(void)cudaStreamSynchronize(c->stream); /* the old one's last use is over */
	cudaFree(c->ws);
	c->ws = NULL;
	c->ws_floats = 0;
	if (cuda_alloc(d, need * sizeof(float), "attention's scores", &p, err))
		return NULL;
	c->ws = (float *)p;
	c->ws_floats = need;
	return c->ws;
}

static int k_attention_reserve(struct rt_dev *d, int B, int T, int NH, struct dt_err *err)
{
	return workspace(d, B, T, NH, err) ? 0 : -ENOMEM;
}

static void k_attention_forward(struct rt_dev *d, const float *qkv, float *out, float *lse, int B,
				int T, int C_, int NH)
{
	struct cuda_ctx *c = C(d);
	float *ws;

	if (B == 0 || c->rc)
		return;
	ws = workspace(d, B, T, NH, &c->err);
	if (keep(c, ws ? 0 : -ENOMEM))
		keep(c, rt_gpu_attention_forward(c->blas, qkv, out, lse, B, T, C_, NH, ws, c->stream,
						 &c->err));
}

static void k_attention_backward(struct rt_dev *d, const float *dout, const float *qkv,
				 const float *lse, float *dqkv, int B, int T, int C_, int NH)
{
	struct cuda_ctx *c = C(d);
	float *ws;

	if (B == 0 || c->rc)
		return;
	ws = workspace(d, B, T, NH, &c->err);
	if (keep(c, ws ? 0 : -ENOMEM))
		keep(c, rt_gpu_attention_backward(c->blas, dout, qkv, lse, dqkv, B, T, C_, NH, ws,
						  c->stream, &c->err));
}

/* --- loss --- */

static void k_loss_zero(struct rt_dev *d)
{
	if (!C(d)->rc)
		keep(C(d), rt_gpu_xent_zero(C(d)->xent, C(d)->stream, &C(d)->err));
}

static void k_loss_add(struct rt_dev *d, const float *logits, const int32_t *labels, int rows,
		       int classes, float grad_scale, float *dlogits)
{
	if (rows > 0 && !C(d)->rc)
		keep(C(d), rt_gpu_softmax_xent(logits, labels, rows, classes, grad_scale, dlogits,
					       C(d)->xent, C(d)->stream, &C(d)->err));
}

static int k_loss_fetch(struct rt_dev *d, double *loss, int64_t *correct, struct dt_err *err)
{
	struct cuda_ctx *c = C(d);
	int rc;

	if (!c->rc)
		keep(c, rt_gpu_xent_fetch(c->xent, c->hx, c->stream, &c->err));
	rc = cuda_sync(d, err);
	*loss = rc ? NAN : c->hx->loss;
	*correct = rc ? 0 : (int64_t)c->hx->correct;
	return rc;
}

/* --- optimizer --- */

/* the sum accumulated since the last zero, fetched (waits) */
static double fetch_sum(struct cuda_ctx *c)
{
	if (!ok(c, cudaMemcpyAsync(c->hsum, &c->sum->value, sizeof(double), cudaMemcpyDeviceToHost,
				   c->stream), "copy of a sum of squares") ||
	    !ok(c, cudaStreamSynchronize(c->stream), "waiting for a sum of squares"))
		return NAN;
	return *c->hsum;
}

static double k_sumsq(struct rt_dev *d, const float *g, size_t n)
{
	struct cuda_ctx *c = C(d);

	if (c->rc || !keep(c, rt_gpu_sum_zero(c->sum, c->stream, &c->err)) ||
	    !keep(c, rt_gpu_sumsq(g, n, c->sum, c->stream, &c->err)))
		return NAN;
	return fetch_sum(c);
}

/* Where one update's arrays are: element j (a parameter's index in the
 * stage) is params[j], grads[j - dg] and state m, v [j - ds]; dg, ds are 0
 * but for the sharded optimizer's pieces (rt_optim_piece). */
struct upd_at {
	float *params, *grads, *m, *v;
	size_t dg, ds;
};

/* Elements [first, first + n) with weight decay (the optimizer's) or none
 * (where a model exempts them: rt_optim_no_decay's spans), at update t. */
static void update_range(struct cuda_ctx *c, const struct rt_optim *o, int64_t t,
			 const struct upd_at *u, size_t first, size_t n, double lr, bool decay)
{
	struct rt_optim k = *o;

	if (!decay)
		k.weight_decay = 0.0;
	keep(c, rt_gpu_optim_update(&k, t, u->params + first, u->grads + (first - u->dg),
				    u->m + (first - u->ds), u->v ? u->v + (first - u->ds) : NULL, n, lr,
				    c->stream, &c->err));
}

/* [first, first + n) cut where the no-decay spans begin and end */
static void update_span(struct cuda_ctx *c, const struct rt_optim *o, int64_t t,
			const struct upd_at *u, size_t first, size_t n, double lr)
{
	size_t at = first, end = first + n;
	int i;

	for (i = 0; i < o->n_no_decay && at < end; i++) {
		size_t a = o->no_decay[i].first, b = a + o->no_decay[i].count;

		if (b <= at || a >= end)
			continue;
		if (a > at)
			update_range(c, o, t, u, at, a - at, lr, true);
		a = a > at ? a : at;
		b = b < end ? b : end;
		update_range(c, o, t, u, a, b - a, lr, false);
		at = b;
	}
	if (at < end)
		update_range(c, o, t, u, at, end - at, lr, true);
}

/* One range's part of an update: the sum of squares of its gradients g [n]
 * (before scale) added, g scaled, the update, g left zero. */
static void update_part(struct cuda_ctx *c, const struct rt_optim *o, int64_t t,
			const struct upd_at *u, size_t first, size_t n, double lr, float scale)
{
	float *g = u->grads + (first - u->dg);

	if (!keep(c, rt_gpu_sumsq(g, n, c->sum, c->stream, &c->err)) ||
	    (scale != 1.0f && !keep(c, rt_gpu_scale(g, n, scale, c->stream, &c->err))))
		return;
	update_span(c, o, t, u, first, n, lr);
	ok(c, cudaMemsetAsync(g, 0, n * sizeof(float), c->stream), "zeroing the gradients");
}

/* rt_optim_step_spans on the GPU: the sum of squares of the gradients
 * read (before scale), the update from grads * scale, the gradients left
 * zero; step += 1 once */
static double k_optim_spans(struct rt_dev *d, struct rt_optim *o, float *params, float *grads,
			    const struct rt_span *spans, int n_spans, double lr, float scale)
{
	struct cuda_ctx *c = C(d);
	struct upd_at u = { params, grads, o->m, o->v, 0, 0 };
	int64_t t = o->step + 1;
	int i;

	o->step = t;
	if (c->rc || !keep(c, rt_gpu_sum_zero(c->sum, c->stream, &c->err)))
		return NAN;
	for (i = 0; i < n_spans && !c->rc; i++)
		update_part(c, o, t, &u, spans[i].first, spans[i].count, lr, scale);
	return c->rc ? NAN : fetch_sum(c);
}

/* rt_optim_step_pieces on the GPU: the same for the sharded optimizer's
 * pieces, whose gradients and state lie apart from their parameters */
static double k_optim_pieces(struct rt_dev *d, struct rt_optim *o, float *params, float *grads,
			     const struct rt_optim_piece *pieces, int n_pieces, double lr,
			     float scale)
{
	struct cuda_ctx *c = C(d);
	int64_t t = o->step + 1;
	int i;

	o->step = t;
	if (c->rc || !keep(c, rt_gpu_sum_zero(c->sum, c->stream, &c->err)))
		return NAN;
	for (i = 0; i < n_pieces && !c->rc; i++) {
		const struct rt_optim_piece *p = &pieces[i];
		struct upd_at u = { params, grads, o->m, o->v, p->first - p->grad, p->first - p->at };

		if (p->count == 0 || p->at > p->first || p->grad > p->first || p->at + p->count > o->n)
			continue; /* never: runtime/parallel/shard.c's pieces lie within */
		update_part(c, o, t, &u, p->first, p->count, lr, scale);
	}
	return c->rc ? NAN : fetch_sum(c);
}

/* --- collectives --- */

static void k_allreduce(struct rt_dev *d, float *buf, size_t n)
{
	struct cuda_ctx *c = C(d);
	ncclResult_t r;

	if (n == 0 || c->rc)
		return;
	r = ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, c->comms.data, c->stream);
	if (r != ncclSuccess && !c->rc) {
		dt_err_add(&c->err, "gpu: ncclAllReduce of %zu gradients: %s", n, ncclGetErrorString(r));
		c->rc = -EIO;
	}
}

/* --- opening --- */

static void fill_ops(struct rt_dev_ops *o)
{
	o->alloc = cuda_alloc;
	o->free = cuda_free;
	o->put = cuda_put;
	o->get = cuda_get;
	o->copy = cuda_copy;
	o->zero = cuda_zero;
	o->sync = cuda_sync;
	o->close = cuda_close;
	o->linear_forward = k_linear_forward;
	o->linear_backward = k_linear_backward;
	o->act_forward = k_act_forward;
	o->act_backward = k_act_backward;
	o->add = k_add;
	o->embed_forward = k_embed_forward;
	o->embed_backward = k_embed_backward;
	o->layernorm_forward = k_layernorm_forward;
	o->layernorm_backward = k_layernorm_backward;
	o->attention_reserve = k_attention_reserve;
	o->attention_forward = k_attention_forward;
	o->attention_backward = k_attention_backward;
	o->loss_zero = k_loss_zero;
	o->loss_add = k_loss_add;
	o->loss_fetch = k_loss_fetch;
	o->optim_spans = k_optim_spans;
	o->optim_pieces = k_optim_pieces;
	o->sumsq = k_sumsq;
}

static struct rt_dev_ops cuda_ops;

extern "C" int rt_gpu_dev_open(struct rt_dev *d, const struct rt_gpu_device *gpu, bool tf32,
			       bool bf16, struct dt_err *err)
{
	struct cuda_ctx *c = (struct cuda_ctx *)calloc(1, sizeof(*c));

	memset(d, 0, sizeof(*d));
	if (!c)
		return dt_err_add(err, "gpu: out of host memory for the device's state"), -ENOMEM;
	fill_ops(&cuda_ops);
	d->ops = &cuda_ops;
	d->kind = "cuda";
	d->host = false;
	d->kept_bytes = bf16 ? 2 : 4;
	d->collectives = "mpi (through host memory)";
	d->ctx = c;
	c->bf16 = bf16;
	snprintf(d->name, sizeof(d->name), "cuda %d of %d (%.100s, sm_%d%d, %.0f GiB%s)", gpu->index,
		 gpu->count, gpu->name, gpu->cc_major, gpu->cc_minor,
		 (double)gpu->mem_bytes / 1073741824.0,
		 bf16 ? ", bf16 products" : tf32 ? ", tf32 products" : "");
	if (!ok(c, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "cudaStreamCreate") ||
	    !ok(c, cudaMalloc((void **)&c->xent, sizeof(*c->xent)), "cudaMalloc of the loss sums") ||
	    !ok(c, cudaMalloc((void **)&c->sum, sizeof(*c->sum)), "cudaMalloc of a sum of squares") ||
	    !ok(c, cudaMallocHost((void **)&c->hx, sizeof(*c->hx)), "cudaMallocHost of the loss sums") ||
	    !ok(c, cudaMallocHost((void **)&c->hsum, sizeof(double)), "cudaMallocHost of a sum"))
		return dt_err_add(err, "%s", c->err.msg), c->rc;
	if (cublasCreate(&c->blas) != CUBLAS_STATUS_SUCCESS) {
		c->blas = NULL;
		return dt_err_add(err, "gpu: cannot create a cuBLAS handle (is the GPU usable? see nvidia-smi)"),
		       -EIO;
	}
	if (!blas_ok(c, cublasSetStream(c->blas, c->stream), "cublasSetStream") ||
	    !blas_ok(c, cublasSetMathMode(c->blas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
		     "cublasSetMathMode"))
		return dt_err_add(err, "%s", c->err.msg), c->rc;
	return 0;
}

extern "C" void rt_gpu_dev_use_nccl(struct rt_dev *d, struct rt_gpu_comms *comms)
{
	C(d)->comms = *comms;
	memset(comms, 0, sizeof(*comms)); /* the device's now */
	cuda_ops.allreduce = k_allreduce;
	d->collectives = "nccl";
}
