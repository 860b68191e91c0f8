/*
 * device.c - the CPU device and the simulated device (device.h). Both
 * run the CPU's kernels; the simulated one on tagged memory that faults
 * when the host touches it, so every operation strips the tag first.
 *
 * Sections: the two kinds' memory, the kernels (shared: U() is identity on
 * the CPU), the tables.
 */
#include "runtime/model/device.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/kernels/bf16.h"
#include "runtime/kernels/transformer.h"
#include "runtime/model/model.h"
#include "runtime/model/optim.h"

/* Bit 62 makes an x86-64 or AArch64 user address non-canonical: a load or
 * store faults, while pointer arithmetic on it stays valid. */
#define SIM_TAG ((uintptr_t)1 << 62)

/* What both kinds keep: the loss accumulator and attention's workspace,
 * and a sticky error (a workspace that could not grow). */
struct cpu_ctx {
	double loss;
	int64_t correct;
	float *ws;      /* attention's scores, one head at a time: [2 T T] */
	size_t ws_floats;
	struct rt_bf16 *bf; /* train.precision "bf16": the products' state, or NULL */
	int failed;
	char why[160];
};

static struct cpu_ctx cpu_state;

/* untag a pointer of the simulated device (identity on the CPU's) */
#define U(p) ((__typeof__(p))((uintptr_t)(p) & ~SIM_TAG))

static struct cpu_ctx *ctx_of(struct rt_dev *d)
{
	return d->ctx;
}

/* --- memory --- */

static int cpu_alloc(struct rt_dev *d, size_t bytes, const char *what, void **p,
		     struct dt_err *err)
{
	void *m = calloc(1, bytes ? bytes : 1);

	*p = NULL;
	if (!m) {
		if (err)
			dt_err_add(err, "%s device: out of memory for %s (%zu bytes)", d->kind, what, bytes);
		return -ENOMEM;
	}
	*p = d->host ? m : (void *)((uintptr_t)m | SIM_TAG);
	return 0;
}

static void cpu_free(struct rt_dev *d, void *p)
{
	(void)d;
	free(U(p));
}

static void cpu_copy(struct rt_dev *d, void *dst, const void *src, size_t bytes)
{
	(void)d;
	memmove(U(dst), U(src), bytes);
}

static void cpu_zero(struct rt_dev *d, void *p, size_t bytes)
{
	(void)d;
	memset(U(p), 0, bytes);
}

static int cpu_sync(struct rt_dev *d, struct dt_err *err)
{
	struct cpu_ctx *c = ctx_of(d);

	if (c->bf && !c->failed && rt_bf16_status(c->bf, err))
		return -EIO;
	if (!c->failed)
		return 0;
	dt_err_add(err, "%s device: %s", d->kind, c->why);
	return -ENOMEM;
}

static void cpu_close(struct rt_dev *d)
{
	struct cpu_ctx *c = ctx_of(d);

	if (!c)
		return;
	free(c->ws);
	c->ws = NULL;
	c->ws_floats = 0;
	rt_bf16_free(c->bf);
	c->bf = NULL;
	if (c != &cpu_state)
		free(c);
	d->ctx = NULL;
}

/* --- kernels --- */

/* what is kept of a float32 input is the input (device.h) */
static void k_linear_forward(struct rt_dev *d, const float *x, const float *w, const float *b,
			     float *y, int rows, int in, int out, void *keep)
{
	(void)d;
	rt_linear_forward(U(x), U(w), U(b), U(y), rows, in, out);
	if (keep && keep != (void *)x && rows > 0)
		memmove(U(keep), U(x), (size_t)rows * (size_t)in * sizeof(*x));
}

static void k_linear_backward(struct rt_dev *d, const float *x, const void *kept, const float *w,
			      const float *dy, float *dx, float *dw, float *db, int rows, int in,
			      int out, bool add)
{
	(void)d;
	if (kept)
		x = kept;
	rt_linear_backward(U(x), U(w), U(dy), U(dx), U(dw), U(db), rows, in, out, add);
}

static void k_act_forward(struct rt_dev *d, enum rt_act act, const float *x, float *y, size_t n)
{
	(void)d;
	rt_act_forward(act, U(x), U(y), n);
}

static void k_act_backward(struct rt_dev *d, enum rt_act act, const float *x, const float *dy,
			   float *dx, size_t n)
{
	(void)d;
	rt_act_backward(act, U(x), U(dy), U(dx), n);
}

static void k_add(struct rt_dev *d, float *y, const float *x, size_t n)
{
	float *yy = U(y);
	const float *xx = U(x);
	size_t i;

	(void)d;
	for (i = 0; i < n; i++)
		yy[i] += xx[i];
}

static void k_embed_forward(struct rt_dev *d, const float *ids, int32_t *tok, const float *wte,
			    const float *wpe, float *out, int B, int T, int C)
{
	const float *x = U(ids);
	int32_t *tk = U(tok);
	size_t i, n = (size_t)B * (size_t)T;

	(void)d;
	for (i = 0; i < n; i++)
		tk[i] = (int32_t)x[i]; /* in [0, V): the data's vocabulary is checked against it */
	rt_embed_forward(tk, U(wte), U(wpe), U(out), B, T, C);
}

static void k_embed_backward(struct rt_dev *d, const int32_t *tok, const float *dout, float *dwte,
			     float *dwpe, int B, int T, int C)
{
	(void)d;
	rt_embed_backward(U(tok), U(dout), U(dwte), U(dwpe), B, T, C);
}

static void k_layernorm_forward(struct rt_dev *d, const float *x, const float *w, const float *b,
				float *y, float *mean, float *rstd, int N, int C)
{
	(void)d;
	rt_layernorm_forward(U(x), U(w), U(b), U(y), U(mean), U(rstd), N, C);
}

static void k_layernorm_backward(struct rt_dev *d, const float *dy, const float *x,
				 const float *w, const float *mean, const float *rstd, float *dx,
				 float *dw, float *db, int N, int C)
{
	(void)d;
	rt_layernorm_backward(U(dy), U(x), U(w), U(mean), U(rstd), U(dx), U(dw), U(db), N, C);
}

/* attention's scores [2 T T], grown on first use (a failure is kept for
 * the next sync, and the pass is skipped) */
static float *workspace(struct rt_dev *d, int T)
{
	struct cpu_ctx *c = ctx_of(d);
	size_t need = 2 * (size_t)T * (size_t)T;
	float *p;

	if (c->ws_floats >= need)
		return c->ws;
	p = realloc(c->ws, need * sizeof(float));
	if (!p) {
		if (!c->failed)
			snprintf(c->why, sizeof(c->why), "out of memory for attention's scores (%zu floats)", need);
		c->failed = 1;
		return NULL;
	}
	c->ws = p;
	c->ws_floats = need;
	return p;
}

static int k_attention_reserve(struct rt_dev *d, int B, int T, int NH, struct dt_err *err)
{
	(void)B; /* one head of one sequence at a time */
	(void)NH;
	if (workspace(d, T))
		return 0;
	return cpu_sync(d, err);
}

static void k_attention_forward(struct rt_dev *d, const float *qkv, float *out, float *lse, int B,
				int T, int C, int NH)
{
	float *ws = workspace(d, T);

	if (ws)
		rt_attention_forward(U(qkv), U(out), U(lse), B, T, C, NH, ws);
}

static void k_attention_backward(struct rt_dev *d, const float *dout, const float *qkv,
				 const float *lse, float *dqkv, int B, int T, int C, int NH)
{
	float *ws = workspace(d, T);

	if (ws)
		rt_attention_backward(U(dout), U(qkv), U(lse), U(dqkv), B, T, C, NH, ws);
}

/* --- the Llama's kernels --- */

static void k_rmsnorm_forward(struct rt_dev *d, const float *x, const float *w, float *y,
			      float *rstd, int N, int C, float eps)
{
	(void)d;
	rt_rmsnorm_forward(U(x), U(w), U(y), U(rstd), N, C, eps);
}

static void k_rmsnorm_backward(struct rt_dev *d, const float *dy, const float *x, const float *w,
			       const float *rstd, float *dx, float *dw, int N, int C)
{
	(void)d;
	rt_rmsnorm_backward(U(dy), U(x), U(w), U(rstd), U(dx), U(dw), N, C);
}

static void k_attention_heads_forward(struct rt_dev *d, const float *qkv, float *out, float *lse,
				      int B, int T, struct rt_heads h)
{
	float *ws = workspace(d, T);

	if (ws)
		rt_attention_heads_forward(U(qkv), U(out), U(lse), B, T, h, ws);
}

static void k_attention_heads_backward(struct rt_dev *d, const float *dout, const float *qkv,
				       const float *lse, float *dqkv, int B, int T,
				       struct rt_heads h)
{
	float *ws = workspace(d, T);

	if (ws)
		rt_attention_heads_backward(U(dout), U(qkv), U(lse), U(dqkv), B, T, h, ws);
}

static void k_rope(struct rt_dev *d, float *qkv, int B, int T, struct rt_heads h, const float *cs,
		   const float *sn, bool inverse)
{
	(void)d;
	rt_rope(U(qkv), B, T, h, U(cs), U(sn), inverse);
}

static void k_swiglu_forward(struct rt_dev *d, const float *gu, float *h, int N, int F)
{
	(void)d;
	rt_swiglu_forward(U(gu), U(h), N, F);
}

static void k_swiglu_backward(struct rt_dev *d, const float *dh, const float *gu, float *dgu,
			      int N, int F)
{
	(void)d;
	rt_swiglu_backward(U(dh), U(gu), U(dgu), N, F);
}

/* --- loss --- */

static void k_loss_zero(struct rt_dev *d)
{
	ctx_of(d)->loss = 0;
	ctx_of(d)->correct = 0;
}

static void k_loss_add(struct rt_dev *d, const float *logits, const int32_t *labels, int rows,
		       int classes, float grad_scale, float *dlogits)
{
	struct cpu_ctx *c = ctx_of(d);

	c->loss += rt_softmax_xent(U(logits), U(labels), rows, classes, grad_scale, U(dlogits),
				   &c->correct);
}

static int k_loss_fetch(struct rt_dev *d, double *loss, int64_t *correct, struct dt_err *err)
{
	*loss = ctx_of(d)->loss;
	*correct = ctx_of(d)->correct;
	return cpu_sync(d, err);
}

/* --- optimizer --- */

/* The optimizer's state as the CPU's functions take it: its arrays' tags
 * stripped for the call (put back by retag_state). */
struct state_tags {
	float *m, *v;
};

static struct state_tags untag_state(struct rt_optim *o)
{
	struct state_tags t = { o->m, o->v };

	o->m = U(o->m);
	o->v = U(o->v);
	return t;
}

static void retag_state(struct rt_optim *o, struct state_tags t)
{
	o->m = t.m;
	o->v = t.v;
}

static double k_optim_spans(struct rt_dev *d, struct rt_optim *o, float *params, float *grads,
			    const struct rt_span *spans, int n_spans, double lr, float scale)
{
	struct state_tags t = untag_state(o);
	double s = rt_optim_step_spans(o, U(params), U(grads), spans, n_spans, lr, scale);

	(void)d;
	retag_state(o, t);
	return s;
}

static double k_optim_pieces(struct rt_dev *d, struct rt_optim *o, float *params, float *grads,
			     const struct rt_optim_piece *pieces, int n_pieces, double lr,
			     float scale)
{
	struct state_tags t = untag_state(o);
	double s = rt_optim_step_pieces(o, U(params), U(grads), pieces, n_pieces, lr, scale);

	(void)d;
	retag_state(o, t);
	return s;
}

static double k_sumsq(struct rt_dev *d, const float *g, size_t n)
{
	(void)d;
	return rt_sumsq(U(g), n);
}

/* --- the tables --- */

#define KERNELS                                                                                  \
	.copy = cpu_copy, .zero = cpu_zero, .sync = cpu_sync, .close = cpu_close,                \
	.linear_forward = k_linear_forward, .linear_backward = k_linear_backward,                \
	.act_forward = k_act_forward, .act_backward = k_act_backward, .add = k_add,              \
	.embed_forward = k_embed_forward, .embed_backward = k_embed_backward,                    \
	.layernorm_forward = k_layernorm_forward, .layernorm_backward = k_layernorm_backward,    \
	.attention_reserve = k_attention_reserve, .attention_forward = k_attention_forward,      \
	.attention_backward = k_attention_backward,                                              \
	.rmsnorm_forward = k_rmsnorm_forward, .rmsnorm_backward = k_rmsnorm_backward,            \
	.attention_heads_forward = k_attention_heads_forward,                                    \
	.attention_heads_backward = k_attention_heads_backward, .rope = k_rope,                  \
	.swiglu_forward = k_swiglu_forward, .swiglu_backward = k_swiglu_backward,                \
	.loss_zero = k_loss_zero, .loss_add = k_loss_add, .loss_fetch = k_loss_fetch,            \
	.optim_spans = k_optim_spans, .optim_pieces = k_optim_pieces, .sumsq = k_sumsq

static void host_put(struct rt_dev *d, void *dst, const void *src, size_t bytes)
{
	(void)d;
	memmove(U(dst), src, bytes);
}

static void host_get(struct rt_dev *d, void *dst, const void *src, size_t bytes)
{
	(void)d;
	memmove(dst, U(src), bytes);
}

static const struct rt_dev_ops cpu_ops = {
	.alloc = cpu_alloc, .free = cpu_free, .put = host_put, .get = host_get, KERNELS,
};

static struct rt_dev cpu_dev = {
	.ops = &cpu_ops, .kind = "cpu", .name = "cpu", .host = true, .kept_bytes = 4,
	.collectives = "mpi", .ctx = &cpu_state,
};

struct rt_dev *rt_dev_cpu(void)
{
	return &cpu_dev;
}

/* --- bf16 products (train.precision "bf16") --- */

/* what is kept of an input is its bf16 copy, the one the product read */
static void k_bf16_linear_forward(struct rt_dev *d, const float *x, const float *w, const float *b,
				  float *y, int rows, int in, int out, void *keep)
{
	rt_bf16_linear_forward(ctx_of(d)->bf, U(x), U(w), U(b), U(y), rows, in, out, U(keep));
}

static void k_bf16_linear_backward(struct rt_dev *d, const float *x, const void *kept,
				   const float *w, const float *dy, float *dx, float *dw, float *db,
				   int rows, int in, int out, bool add)
{
	rt_bf16_linear_backward(ctx_of(d)->bf, U(x), U(kept), U(w), U(dy), U(dx), U(dw), U(db), rows,
				in, out, add);
}

static struct rt_dev_ops bf16_ops;

int rt_dev_cpu_bf16_init(struct rt_dev *d, int threads, struct dt_err *err)
{
	struct cpu_ctx *c = calloc(1, sizeof(*c));

	memset(d, 0, sizeof(*d));
	if (!c)
		return dt_err_add(err, "out of memory for the bf16 device"), -ENOMEM;
	bf16_ops = cpu_ops;
	bf16_ops.linear_forward = k_bf16_linear_forward;
	bf16_ops.linear_backward = k_bf16_linear_backward;
	d->ops = &bf16_ops;
	d->kind = "cpu";
	snprintf(d->name, sizeof(d->name), "cpu (bf16 products, oneDNN; its OpenMP threads wait %s)",
		 getenv("OMP_WAIT_POLICY") ? getenv("OMP_WAIT_POLICY") : "active");
	d->host = true;
	d->kept_bytes = 2;
	d->collectives = "mpi";
	d->ctx = c;
	return rt_bf16_init(&c->bf, threads, err);
}

void rt_dev_sim_init(struct rt_dev *d)
{
	memset(d, 0, sizeof(*d));
	d->ops = &cpu_ops;
	d->kind = "sim";
	snprintf(d->name, sizeof(d->name), "sim (the CPU's kernels on memory the host may not touch)");
	d->host = false;
	d->kept_bytes = 4;
	d->collectives = "mpi (through host memory)";
	d->ctx = calloc(1, sizeof(struct cpu_ctx));
	if (!d->ctx) /* nothing kept: the accumulator falls back to the CPU's */
		d->ctx = &cpu_state;
}

void rt_dev_close(struct rt_dev *d)
{
	if (d && d->ops && d != &cpu_dev)
		d->ops->close(d);
}
