/*
 * device.h - where a stage computes: the device seam. A device is a table of
 * memory operations and of the kernels every model and the training loop
 * use; the models (model/) and the trainer (train/) call them through this
 * header only, so the same training loop runs on the CPU and on a GPU.
 *
 * Three devices implement it:
 *   - the CPU (rt_dev_cpu): memory is the host's, the kernels are
 *     kernels.h, transformer.h and optim.h themselves, so a run through the
 *     seam is bitwise what those functions give;
 *   - the simulated device (rt_dev_sim_init), a test aid: the CPU's kernels
 *     on memory the host cannot touch. Its pointers carry a tag bit that
 *     makes any host load or store through them fault (a non-canonical
 *     address on x86-64), and its operations strip the tag. A run on it
 *     takes every copy a GPU needs, so `make test` finds a missing copy or a
 *     host access to device memory without a GPU, and it must give the
 *     CPU's bits;
 *   - CUDA (runtime/gpu/cuda_device.h, when built).
 *
 * Memory: "device memory" is what alloc returns; it may only be passed to
 * this table's operations (pointer arithmetic on it is fine). host is true
 * when device memory IS host memory (the CPU): the caller may then read and
 * write it directly and skip the copies (put, get). Every operation is
 * queued in order on the device's one stream; only get, sync and the
 * functions that return a value wait for the device.
 *
 * Errors: the kernels return nothing; a failure (a launch error, a
 * workspace the device could not allocate) is kept by the device and
 * returned by the next sync, with its message. alloc reports at once.
 *
 * Sections: the device, memory, kernels (the models'), loss, optimizer.
 */
#ifndef DTRAIN_RUNTIME_MODEL_DEVICE_H
#define DTRAIN_RUNTIME_MODEL_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/transformer.h"

struct rt_optim;  /* runtime/model/optim.h */
struct rt_optim_piece;
struct rt_span;   /* runtime/model/model.h */
struct rt_dev_ops;

/* --- the device --- */

struct rt_dev {
	const struct rt_dev_ops *ops;
	const char *kind;  /* "cpu", "sim", "cuda" */
	char name[160];    /* for the rank's start line: "cpu", "cuda device 0 (NVIDIA H100 ...)" */
	bool host;         /* device memory is host memory: no copies needed */
	int kept_bytes;    /* an element of what linear_forward keeps: 4 (float32)
			    * or 2 (bf16, train.precision "bf16") */
	const char *collectives; /* how its ranks sum gradients: "mpi (through host
				  * memory)", or the device's own ("nccl") */
	void *ctx;         /* the implementation's state */
};

struct rt_dev_ops {
	/* memory: alloc gives zeroed device memory (0, or -ENOMEM with a
	 * message naming `what` when err is not NULL); free takes NULL */
	int (*alloc)(struct rt_dev *d, size_t bytes, const char *what, void **p, struct dt_err *err);
	void (*free)(struct rt_dev *d, void *p);
	void (*put)(struct rt_dev *d, void *dst, const void *host_src, size_t bytes);
	void (*get)(struct rt_dev *d, void *host_dst, const void *src, size_t bytes); /* waits */
	void (*copy)(struct rt_dev *d, void *dst, const void *src, size_t bytes);
	void (*zero)(struct rt_dev *d, void *p, size_t bytes);
	int (*sync)(struct rt_dev *d, struct dt_err *err);
	void (*close)(struct rt_dev *d);

	/* kernels: kernels.h and transformer.h, on device memory.
	 * A linear layer's forward may keep its input for backward's dw in
	 * the device's own format (kept_bytes an element: float32, or the
	 * bf16 its products read): keep, [rows][in] of those, or NULL for
	 * nothing kept; where kept_bytes is 4, keep may be x itself (nothing
	 * copied). Backward's dw reads kept when it is not NULL (what a
	 * forward kept), else x (float32). dx must not overlap kept or dy. */
	void (*linear_forward)(struct rt_dev *d, const float *x, const float *w, const float *b,
			       float *y, int rows, int in, int out, void *keep);
	void (*linear_backward)(struct rt_dev *d, const float *x, const void *kept, const float *w,
				const float *dy, float *dx, float *dw, float *db, int rows, int in,
				int out, bool add);
	void (*act_forward)(struct rt_dev *d, enum rt_act act, const float *x, float *y, size_t n);
	void (*act_backward)(struct rt_dev *d, enum rt_act act, const float *x, const float *dy,
			     float *dx, size_t n);
	void (*add)(struct rt_dev *d, float *y, const float *x, size_t n);
	void (*embed_forward)(struct rt_dev *d, const float *ids, int32_t *tok, const float *wte,
			      const float *wpe, float *out, int B, int T, int C);
	void (*embed_backward)(struct rt_dev *d, const int32_t *tok, const float *dout, float *dwte,
			       float *dwpe, int B, int T, int C);
	void (*layernorm_forward)(struct rt_dev *d, const float *x, const float *w, const float *b,
				  float *y, float *mean, float *rstd, int N, int C);
	void (*layernorm_backward)(struct rt_dev *d, const float *dy, const float *x, const float *w,
				   const float *mean, const float *rstd, float *dx, float *dw,
				   float *db, int N, int C);
	/* attention's workspace for B sequences of T positions and NH heads,
	 * made now (0, or -ENOMEM with a message); the passes grow it when
	 * they need more (a failure then is kept for sync) */
	int (*attention_reserve)(struct rt_dev *d, int B, int T, int NH, struct dt_err *err);
	void (*attention_forward)(struct rt_dev *d, const float *qkv, float *out, float *lse, int B,
				  int T, int C, int NH);
	void (*attention_backward)(struct rt_dev *d, const float *dout, const float *qkv,
				   const float *lse, float *dqkv, int B, int T, int C, int NH);
	/* the Llama's (runtime/model/llama.c): RMSNorm, attention over
	 * grouped-query heads (its workspace: attention_reserve), rotary
	 * embeddings, SwiGLU. NULL on a device that lacks them (CUDA, for
	 * now: jobs/spec.c refuses model.type "llama" there) */
	void (*rmsnorm_forward)(struct rt_dev *d, const float *x, const float *w, float *y,
				float *rstd, int N, int C, float eps);
	void (*rmsnorm_backward)(struct rt_dev *d, const float *dy, const float *x, const float *w,
				 const float *rstd, float *dx, float *dw, int N, int C);
	void (*attention_heads_forward)(struct rt_dev *d, const float *qkv, float *out, float *lse,
					int B, int T, struct rt_heads h);
	void (*attention_heads_backward)(struct rt_dev *d, const float *dout, const float *qkv,
					 const float *lse, float *dqkv, int B, int T,
					 struct rt_heads h);
	void (*rope)(struct rt_dev *d, float *qkv, int B, int T, struct rt_heads h, const float *cs,
		     const float *sn, bool inverse);
	void (*swiglu_forward)(struct rt_dev *d, const float *gu, float *h, int N, int F);
	void (*swiglu_backward)(struct rt_dev *d, const float *dh, const float *gu, float *dgu,
				int N, int F);

	/* loss: one accumulator per device */
	void (*loss_zero)(struct rt_dev *d);
	void (*loss_add)(struct rt_dev *d, const float *logits, const int32_t *labels, int rows,
			 int classes, float grad_scale, float *dlogits);
	int (*loss_fetch)(struct rt_dev *d, double *loss, int64_t *correct, struct dt_err *err);

	/* optimizer and norms (optim.h); these wait and return the sum */
	double (*optim_spans)(struct rt_dev *d, struct rt_optim *o, float *params, float *grads,
			      const struct rt_span *spans, int n_spans, double lr, float scale);
	/* rt_optim_step_pieces: the sharded optimizer's update of its pieces
	 * (state holding the pieces only) */
	double (*optim_pieces)(struct rt_dev *d, struct rt_optim *o, float *params, float *grads,
			       const struct rt_optim_piece *pieces, int n_pieces, double lr,
			       float scale);
	double (*sumsq)(struct rt_dev *d, const float *g, size_t n);

	/* the device's own collective (NULL: none; the trainer then sums a
	 * host copy with MPI): buf [n] summed in place over the replicas of
	 * the stage (the data-parallel group), queued on the stream in the
	 * order of the calls, which every replica makes alike */
	void (*allreduce)(struct rt_dev *d, float *buf, size_t n);
};

/* The CPU: static, never closed. */
struct rt_dev *rt_dev_cpu(void);
/* The CPU with the products of linear layers in bf16 (train.precision
 * "bf16": runtime/kernels/bf16.h), `threads` threads each, in *d; close
 * with rt_dev_close, also after a failure. 0, or oneDNN's failure. */
int rt_dev_cpu_bf16_init(struct rt_dev *d, int threads, struct dt_err *err);
/* The simulated device (a test aid, above), in *d; close with rt_dev_close. */
void rt_dev_sim_init(struct rt_dev *d);
/* Ends the device (the CPU: nothing); safe on a zeroed struct. */
void rt_dev_close(struct rt_dev *d);

/* --- memory (wrappers of the table, for readable callers) --- */

static inline int rt_dev_alloc(struct rt_dev *d, size_t bytes, const char *what, void *p,
			       struct dt_err *err)
{
	return d->ops->alloc(d, bytes, what, (void **)p, err);
}

static inline void rt_dev_free(struct rt_dev *d, void *p)
{
	if (p)
		d->ops->free(d, p);
}

/* host -> device; nothing when they are the same memory */
static inline void rt_dev_put(struct rt_dev *d, void *dst, const void *src, size_t bytes)
{
	if (dst != src && bytes)
		d->ops->put(d, dst, src, bytes);
}

/* device -> host, waiting; nothing when they are the same memory */
static inline void rt_dev_get(struct rt_dev *d, void *dst, const void *src, size_t bytes)
{
	if (dst != src && bytes)
		d->ops->get(d, dst, src, bytes);
}

static inline int rt_dev_sync(struct rt_dev *d, struct dt_err *err)
{
	return d->ops->sync(d, err);
}

/* Where host code reads or writes what goes to or comes from device
 * memory dev: dev itself on a host device, else the staging buffer host. */
static inline void *rt_dev_staging(const struct rt_dev *d, void *dev, void *host)
{
	return d->host ? dev : host;
}

#endif
