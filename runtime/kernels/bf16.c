/*
 * bf16.c - linear layers with bf16 products through oneDNN's matmul
 * (bf16.h). Sections: bf16 numbers, the context and its primitives, the
 * layers.
 */
#include "runtime/kernels/bf16.h"

#include <errno.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>

#include "runtime/kernels/kernels.h"

/* --- bf16 numbers --- */

unsigned short rt_bf16_round(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it one, quiet */
		return (unsigned short)((u >> 16) | 0x40u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (unsigned short)(u >> 16);
}

float rt_bf16_float(unsigned short h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* n floats rounded into dst, by oneDNN's threads (which would otherwise
 * wait for the product) where there are enough of them to share */
static void to_bf16(unsigned short *dst, const float *src, size_t n)
{
	long i, len = (long)n;

#pragma omp parallel for schedule(static) if (n >= (1u << 15))
	for (i = 0; i < len; i++)
		dst[i] = rt_bf16_round(src[i]);
}

/* --- the context and its primitives --- */

enum kind { FWD, FWD_BIAS, BWD_DATA, BWD_W, BWD_W_ADD };

#define MAX_PRIMS 64

/* One matmul of one shape, with its memory objects (their data handles
 * are set at each call). */
struct prim {
	enum kind kind;
	int m, n, k;
	dnnl_primitive_t p;
	dnnl_memory_t src, wei, bias, dst;
};

/* a growing bf16 buffer */
struct scratch {
	unsigned short *p;
	size_t n;
};

struct rt_bf16 {
	dnnl_engine_t eng;
	dnnl_stream_t stream;
	struct prim prims[MAX_PRIMS];
	int n_prims;
	struct scratch a, b; /* the two inputs of a product, in bf16 */
	int failed;          /* 0, or the first failure's errno */
	char why[200];
};

static void fail(struct rt_bf16 *b, int rc, const char *what, dnnl_status_t s)
{
	if (b->failed)
		return;
	b->failed = rc;
	snprintf(b->why, sizeof(b->why), "oneDNN: %s failed (status %d)", what, (int)s);
}

static unsigned short *grow(struct rt_bf16 *b, struct scratch *s, size_t n)
{
	unsigned short *p;

	if (s->n >= n)
		return s->p;
	p = realloc(s->p, n * sizeof(*p));
	if (!p) {
		fail(b, -ENOMEM, "memory for the bf16 copies of a product's inputs", dnnl_out_of_memory);
		return NULL;
	}
	s->p = p;
	s->n = n;
	return p;
}

int rt_bf16_init(struct rt_bf16 **out, int threads, struct dt_err *err)
{
	struct rt_bf16 *b = calloc(1, sizeof(*b));
	dnnl_status_t s;

	*out = NULL;
	if (!b)
		return dt_err_add(err, "out of memory for the bf16 products' state"), -ENOMEM;
	omp_set_num_threads(threads > 0 ? threads : 1);
	s = dnnl_engine_create(&b->eng, dnnl_cpu, 0);
	if (s == dnnl_success)
		s = dnnl_stream_create(&b->stream, b->eng, dnnl_stream_default_flags);
	if (s != dnnl_success) {
		rt_bf16_free(b);
		return dt_err_add(err, "oneDNN: cannot create its CPU engine and stream (status %d)", (int)s),
		       -EIO;
	}
	*out = b;
	return 0;
}

void rt_bf16_free(struct rt_bf16 *b)
{
	int i;

	if (!b)
		return;
	for (i = 0; i < b->n_prims; i++) {
		struct prim *p = &b->prims[i];

		dnnl_primitive_destroy(p->p);
		dnnl_memory_destroy(p->src);
		dnnl_memory_destroy(p->wei);
		dnnl_memory_destroy(p->bias);
		dnnl_memory_destroy(p->dst);
	}
	if (b->stream)
		dnnl_stream_destroy(b->stream);
	if (b->eng)
		dnnl_engine_destroy(b->eng);
	free(b->a.p);
	free(b->b.p);
	free(b);
}

int rt_bf16_status(const struct rt_bf16 *b, struct dt_err *err)
{
	if (!b->failed)
		return 0;
	dt_err_add(err, "%s", b->why);
	return b->failed;
}

/* The descriptors of a kind's matmul, dst [m][n] = src [m][k] x wei [k][n]:
 *   FWD(_BIAS): src x [rows][in], wei W as [in][out] (W [out][in], "ba"),
 *               bias [1][out]
 *   BWD_DATA:   src dy [rows][out], wei W [out][in]
 *   BWD_W(_ADD): src dy^T as [out][rows] (dy [rows][out], "ba"), wei x
 *               [rows][in]; _ADD sums onto dst */
static dnnl_status_t make(struct rt_bf16 *b, struct prim *p)
{
	dnnl_memory_desc_t src, wei, bias, dst;
	dnnl_dims_t ds = { p->m, p->k }, dw = { p->k, p->n }, dd = { p->m, p->n }, db = { 1, p->n };
	bool with_bias = p->kind == FWD_BIAS, add = p->kind == BWD_W_ADD;
	dnnl_primitive_attr_t attr = NULL;
	dnnl_post_ops_t ops = NULL;
	dnnl_primitive_desc_t pd = NULL;
	dnnl_matmul_desc_t op;
	dnnl_status_t s;

	s = dnnl_memory_desc_init_by_tag(&src, 2, ds, dnnl_bf16, p->kind >= BWD_W ? dnnl_ba : dnnl_ab);
	if (s == dnnl_success)
		s = dnnl_memory_desc_init_by_tag(&wei, 2, dw, dnnl_bf16, p->kind <= FWD_BIAS ? dnnl_ba : dnnl_ab);
	if (s == dnnl_success)
		s = dnnl_memory_desc_init_by_tag(&dst, 2, dd, dnnl_f32, dnnl_ab);
	if (s == dnnl_success && with_bias)
		s = dnnl_memory_desc_init_by_tag(&bias, 2, db, dnnl_f32, dnnl_ab);
	if (s == dnnl_success)
		s = dnnl_matmul_desc_init(&op, &src, &wei, with_bias ? &bias : NULL, &dst);
	if (s == dnnl_success && add && (s = dnnl_primitive_attr_create(&attr)) == dnnl_success &&
	    (s = dnnl_post_ops_create(&ops)) == dnnl_success &&
	    (s = dnnl_post_ops_append_sum(ops, 1.0f)) == dnnl_success)
		s = dnnl_primitive_attr_set_post_ops(attr, ops);
	if (s == dnnl_success)
		s = dnnl_primitive_desc_create(&pd, &op, attr, b->eng, NULL);
	if (s == dnnl_success)
		s = dnnl_primitive_create(&p->p, pd);
	if (s == dnnl_success)
		s = dnnl_memory_create(&p->src, &src, b->eng, DNNL_MEMORY_NONE);
	if (s == dnnl_success)
		s = dnnl_memory_create(&p->wei, &wei, b->eng, DNNL_MEMORY_NONE);
	if (s == dnnl_success)
		s = dnnl_memory_create(&p->dst, &dst, b->eng, DNNL_MEMORY_NONE);
	if (s == dnnl_success && with_bias)
		s = dnnl_memory_create(&p->bias, &bias, b->eng, DNNL_MEMORY_NONE);
	if (pd)
		dnnl_primitive_desc_destroy(pd);
	if (ops)
		dnnl_post_ops_destroy(ops);
	if (attr)
		dnnl_primitive_attr_destroy(attr);
	return s;
}

/* the kind's primitive for the shape, made on first use; NULL on failure */
static struct prim *prim_of(struct rt_bf16 *b, enum kind kind, int m, int n, int k)
{
	struct prim *p;
	dnnl_status_t s;
	int i;

	for (i = 0; i < b->n_prims; i++) {
		p = &b->prims[i];
		if (p->kind == kind && p->m == m && p->n == n && p->k == k)
			return p;
	}
	if (b->n_prims == MAX_PRIMS) { /* a model of many shapes: start over */
		for (i = 0; i < b->n_prims; i++) {
			dnnl_primitive_destroy(b->prims[i].p);
			dnnl_memory_destroy(b->prims[i].src);
			dnnl_memory_destroy(b->prims[i].wei);
			dnnl_memory_destroy(b->prims[i].bias);
			dnnl_memory_destroy(b->prims[i].dst);
		}
		b->n_prims = 0;
	}
	p = &b->prims[b->n_prims];
	memset(p, 0, sizeof(*p));
	*p = (struct prim){ .kind = kind, .m = m, .n = n, .k = k };
	s = make(b, p);
	if (s != dnnl_success) {
		fail(b, s == dnnl_out_of_memory ? -ENOMEM : -EIO, "making a bf16 matmul primitive", s);
		return NULL;
	}
	b->n_prims++;
	return p;
}

/* dst = src x wei (+ bias, or + dst for BWD_W_ADD), waiting for it */
static void run(struct rt_bf16 *b, struct prim *p, const void *src, const void *wei,
		const float *bias, float *dst)
{
	dnnl_exec_arg_t args[4] = { { DNNL_ARG_SRC, p->src }, { DNNL_ARG_WEIGHTS, p->wei },
				    { DNNL_ARG_DST, p->dst }, { DNNL_ARG_BIAS, p->bias } };
	dnnl_status_t s;

	s = dnnl_memory_set_data_handle(p->src, (void *)src);
	if (s == dnnl_success)
		s = dnnl_memory_set_data_handle(p->wei, (void *)wei);
	if (s == dnnl_success)
		s = dnnl_memory_set_data_handle(p->dst, dst);
	if (s == dnnl_success && p->bias)
		s = dnnl_memory_set_data_handle(p->bias, (void *)bias);
	if (s == dnnl_success)
		s = dnnl_primitive_execute(p->p, b->stream, p->bias ? 4 : 3, args);
	if (s == dnnl_success)
		s = dnnl_stream_wait(b->stream);
	if (s != dnnl_success)
		fail(b, -EIO, "a bf16 matmul", s);
}

/* --- the layers --- */

void rt_bf16_linear_forward(struct rt_bf16 *b, const float *x, const float *w, const float *bias,
			    float *y, int rows, int in, int out, unsigned short *keep)
{
	size_t nx = (size_t)rows * (size_t)in, nw = (size_t)out * (size_t)in;
	unsigned short *xb, *wb;
	struct prim *p;

	if (rows == 0 || b->failed)
		return;
	xb = keep ? keep : grow(b, &b->a, nx);
	wb = grow(b, &b->b, nw);
	p = xb && wb ? prim_of(b, bias ? FWD_BIAS : FWD, rows, out, in) : NULL;
	if (!p)
		return;
	to_bf16(xb, x, nx);
	to_bf16(wb, w, nw);
	run(b, p, xb, wb, bias, y);
}

void rt_bf16_linear_backward(struct rt_bf16 *b, const float *x, const unsigned short *kept,
			     const float *w, const float *dy, float *dx, float *dw, float *db,
			     int rows, int in, int out, bool add)
{
	size_t ny = (size_t)rows * (size_t)out;
	unsigned short *dyb, *other;
	struct prim *p;

	if (rows == 0 || b->failed)
		return;
	if (db) /* float32, as the CPU's */
		rt_linear_backward(NULL, NULL, dy, NULL, NULL, db, rows, in, out, add);
	if (!dx && !dw)
		return;
	dyb = grow(b, &b->a, ny);
	if (!dyb)
		return;
	to_bf16(dyb, dy, ny);
	if (dw) { /* dw [out][in] (+)= dy^T x */
		p = prim_of(b, add ? BWD_W_ADD : BWD_W, out, in, rows);
		other = kept ? NULL : grow(b, &b->b, (size_t)rows * (size_t)in);
		if (!p || (!kept && !other))
			return;
		if (!kept)
			to_bf16(other, x, (size_t)rows * (size_t)in);
		run(b, p, dyb, kept ? kept : other, NULL, dw);
	}
	if (dx) { /* dx [rows][in] = dy W */
		p = prim_of(b, BWD_DATA, rows, in, out);
		other = grow(b, &b->b, (size_t)out * (size_t)in);
		if (!p || !other)
			return;
		to_bf16(other, w, (size_t)out * (size_t)in);
		run(b, p, dyb, other, NULL, dx);
	}
}
