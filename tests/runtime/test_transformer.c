/*
 * test_transformer.c - the transformer kernels (runtime/kernels/transformer.h)
 * against finite differences: for a loss L = sum(out * r) with fixed random
 * r, the gradient each backward gives equals (L(x + h) - L(x - h)) / 2h for
 * every input and parameter element; plus the properties that pin the
 * forward passes down: LayerNorm rows of mean 0 and variance 1, attention
 * causal (a later position changes no earlier output) and, for a first
 * position, its own value; RMSNorm rows of mean square 1; grouped-query
 * attention equal to multi-head attention with its key and value heads
 * repeated; rotary embeddings that leave position 0 and the values alone
 * and that their inverse undoes; SwiGLU as its formula, in place too.
 *
 * Sections: helpers, embeddings, LayerNorm, attention, RMSNorm,
 * grouped-query attention and rotary embeddings, SwiGLU, main.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/rng.h"
#include "runtime/kernels/transformer.h"

/* --- helpers --- */

static void fill(float *x, size_t n, uint64_t seed, float scale)
{
	struct dt_rng r;
	size_t i;

	dt_rng_seed(&r, seed, 7);
	for (i = 0; i < n; i++)
		x[i] = scale * (float)dt_rng_normal(&r);
}

static double dot(const float *a, const float *b, size_t n)
{
	double s = 0.0;
	size_t i;

	for (i = 0; i < n; i++)
		s += (double)a[i] * (double)b[i];
	return s;
}

/* The analytic gradient g [n] of x against central differences of loss(),
 * which reads x: |g - fd| <= tol * (1 + |fd|) for every element. */
static void check_grad(const char *what, float *x, const float *g, size_t n,
		       double (*loss)(void *ctx), void *ctx, double h, double tol)
{
	size_t i;

	for (i = 0; i < n; i++) {
		float keep = x[i];
		double up, down, fd;

		x[i] = keep + (float)h;
		up = loss(ctx);
		x[i] = keep - (float)h;
		down = loss(ctx);
		x[i] = keep;
		fd = (up - down) / (2.0 * h);
		if (!(fabs(g[i] - fd) <= tol * (1.0 + fabs(fd))))
			fail_msg("%s[%zu]: analytic %.6g, finite differences %.6g", what, i, g[i], fd);
	}
}

/* --- LayerNorm --- */

enum { N = 6, C = 8, B = 2, T = 5, NH = 2 };

struct ln {
	float x[N * C], w[C], b[C], y[N * C], r[N * C], mean[N], rstd[N];
};

static double ln_loss(void *ctx)
{
	struct ln *l = ctx;

	rt_layernorm_forward(l->x, l->w, l->b, l->y, l->mean, l->rstd, N, C);
	return dot(l->y, l->r, N * C);
}

static void test_layernorm(void **state)
{
	struct ln l;
	float dx[N * C], dw[C], db[C];
	int n, i;

	(void)state;
	fill(l.x, N * C, 1, 2.0f);
	fill(l.w, C, 2, 1.0f);
	fill(l.b, C, 3, 1.0f);
	fill(l.r, N * C, 4, 1.0f);
	/* with w = 1, b = 0: rows of mean 0, variance 1 (up to eps) */
	{
		float one[C], zero[C] = { 0 };

		for (i = 0; i < C; i++)
			one[i] = 1.0f;
		rt_layernorm_forward(l.x, one, zero, l.y, l.mean, l.rstd, N, C);
		for (n = 0; n < N; n++) {
			double m = 0, v = 0;

			for (i = 0; i < C; i++)
				m += l.y[n * C + i];
			for (i = 0; i < C; i++)
				v += (l.y[n * C + i] - m / C) * (l.y[n * C + i] - m / C);
			assert_true(fabs(m / C) < 1e-6);
			assert_true(fabs(v / C - 1.0) < 1e-3);
		}
	}
	ln_loss(&l);
	memset(dx, 0, sizeof(dx));
	memset(dw, 0, sizeof(dw));
	memset(db, 0, sizeof(db));
	rt_layernorm_backward(l.r, l.x, l.w, l.mean, l.rstd, dx, dw, db, N, C);
	check_grad("layernorm dx", l.x, dx, N * C, ln_loss, &l, 1e-2, 2e-2);
	check_grad("layernorm dw", l.w, dw, C, ln_loss, &l, 1e-2, 2e-2);
	check_grad("layernorm db", l.b, db, C, ln_loss, &l, 1e-2, 2e-2);
}

/* --- attention --- */

struct att {
	float qkv[B * T * 3 * C], out[B * T * C], r[B * T * C], lse[B * NH * T], scratch[2 * T * T];
};

static double att_loss(void *ctx)
{
	struct att *a = ctx;

	rt_attention_forward(a->qkv, a->out, a->lse, B, T, C, NH, a->scratch);
	return dot(a->out, a->r, B * T * C);
}

static void test_attention(void **state)
{
	struct att a;
	float dqkv[B * T * 3 * C], before[B * T * C];
	int b, h, i;

	(void)state;
	fill(a.qkv, B * T * 3 * C, 5, 1.0f);
	fill(a.r, B * T * C, 6, 1.0f);
	att_loss(&a);
	/* position 0 attends to itself only: its output is its value */
	for (b = 0; b < B; b++)
		for (h = 0; h < NH; h++)
			for (i = 0; i < C / NH; i++)
				assert_float_equal(a.out[(b * T) * C + h * (C / NH) + i],
						   a.qkv[(b * T) * 3 * C + 2 * C + h * (C / NH) + i], 1e-6);
	/* causal: changing the last position's key and value changes no
	 * earlier output */
	memcpy(before, a.out, sizeof(before));
	for (i = C; i < 3 * C; i++)
		a.qkv[(T - 1) * 3 * C + i] += 1.0f;
	att_loss(&a);
	assert_memory_equal(a.out, before, (size_t)(T - 1) * C * sizeof(float));
	assert_memory_not_equal(a.out + (T - 1) * C, before + (T - 1) * C, C * sizeof(float));
	fill(a.qkv, B * T * 3 * C, 5, 1.0f);
	att_loss(&a);
	rt_attention_backward(a.r, a.qkv, a.lse, dqkv, B, T, C, NH, a.scratch);
	check_grad("attention dqkv", a.qkv, dqkv, B * T * 3 * C, att_loss, &a, 1e-2, 2e-2);
}

/* --- RMSNorm --- */

struct rms {
	float x[N * C], w[C], y[N * C], r[N * C], rstd[N];
};

static double rms_loss(void *ctx)
{
	struct rms *l = ctx;

	rt_rmsnorm_forward(l->x, l->w, l->y, l->rstd, N, C, 1e-5f);
	return dot(l->y, l->r, N * C);
}

static void test_rmsnorm(void **state)
{
	struct rms l;
	float dx[N * C] = { 0 }, dw[C] = { 0 };
	double ms = 0;
	int i;

	(void)state;
	fill(l.x, N * C, 11, 2.0f);
	fill(l.w, C, 12, 1.0f);
	fill(l.r, N * C, 13, 1.0f);
	rms_loss(&l);
	for (i = 0; i < C; i++) /* row 0 over w: mean square 1 (up to eps) */
		ms += (double)(l.y[i] / l.w[i]) * (double)(l.y[i] / l.w[i]);
	assert_true(fabs(ms / C - 1.0) < 1e-4);
	rt_rmsnorm_backward(l.r, l.x, l.w, l.rstd, dx, dw, N, C);
	check_grad("rmsnorm dx", l.x, dx, N * C, rms_loss, &l, 1e-2, 2e-2);
	check_grad("rmsnorm dw", l.w, dw, C, rms_loss, &l, 1e-2, 2e-2);
}

/* --- grouped-query attention, rotary embeddings --- */

enum { GH = 4, GKV = 2, HS = 4, GW = (GH + 2 * GKV) * HS };

struct gqa {
	float qkv[B * T * GW], out[B * T * GH * HS], r[B * T * GH * HS], lse[B * GH * T];
	float scratch[2 * T * T], cs[T * HS / 2], sn[T * HS / 2];
	bool rope;
};

static double gqa_loss(void *ctx)
{
	struct gqa *a = ctx;
	struct rt_heads h = { GH, GKV, HS };
	float rot[B * T * GW];

	memcpy(rot, a->qkv, sizeof(rot));
	if (a->rope)
		rt_rope(rot, B, T, h, a->cs, a->sn, false);
	rt_attention_heads_forward(rot, a->out, a->lse, B, T, h, a->scratch);
	return dot(a->out, a->r, B * T * GH * HS);
}

/* 4 query heads on 2 key and value heads equal multi-head attention with
 * each key and value head repeated (Hugging Face's repeat_kv) */
static void gqa_is_repeated_mha(struct gqa *a)
{
	float full[B * T * 3 * GH * HS], out[B * T * GH * HS], lse[B * GH * T];
	int n, q;

	for (n = 0; n < B * T; n++)
		for (q = 0; q < GH; q++) {
			const float *row = a->qkv + n * GW;
			float *f = full + n * 3 * GH * HS;
			int kv = q / (GH / GKV);

			memcpy(f + q * HS, row + q * HS, HS * sizeof(float));
			memcpy(f + (GH + q) * HS, row + (GH + kv) * HS, HS * sizeof(float));
			memcpy(f + (2 * GH + q) * HS, row + (GH + GKV + kv) * HS, HS * sizeof(float));
		}
	rt_attention_forward(full, out, lse, B, T, GH * HS, GH, a->scratch);
	a->rope = false;
	gqa_loss(a);
	for (n = 0; n < B * T * GH * HS; n++)
		assert_float_equal(a->out[n], out[n], 1e-6);
}

static void test_gqa_rope(void **state)
{
	struct gqa a;
	struct rt_heads h = { GH, GKV, HS };
	float dqkv[B * T * GW], rot[B * T * GW];
	int t, i;

	(void)state;
	fill(a.qkv, B * T * GW, 14, 1.0f);
	fill(a.r, B * T * GH * HS, 15, 1.0f);
	for (t = 0; t < T; t++)
		for (i = 0; i < HS / 2; i++) {
			a.cs[t * HS / 2 + i] = cosf((float)t * powf(10.0f, -(float)i));
			a.sn[t * HS / 2 + i] = sinf((float)t * powf(10.0f, -(float)i));
		}
	gqa_is_repeated_mha(&a);
	/* position 0 is not turned; the inverse turns back; values untouched */
	memcpy(rot, a.qkv, sizeof(rot));
	rt_rope(rot, B, T, h, a.cs, a.sn, false);
	assert_memory_equal(rot, a.qkv, (GH + GKV) * HS * sizeof(float));
	assert_memory_equal(rot + (T - 1) * GW + (GH + GKV) * HS, a.qkv + (T - 1) * GW + (GH + GKV) * HS,
			    GKV * HS * sizeof(float));
	rt_rope(rot, B, T, h, a.cs, a.sn, true);
	for (i = 0; i < B * T * GW; i++)
		assert_float_equal(rot[i], a.qkv[i], 1e-5);
	/* the gradient through rope and attention: attention's, turned back */
	a.rope = true;
	gqa_loss(&a);
	memcpy(rot, a.qkv, sizeof(rot));
	rt_rope(rot, B, T, h, a.cs, a.sn, false);
	rt_attention_heads_backward(a.r, rot, a.lse, dqkv, B, T, h, a.scratch);
	rt_rope(dqkv, B, T, h, a.cs, a.sn, true);
	check_grad("gqa + rope dqkv", a.qkv, dqkv, B * T * GW, gqa_loss, &a, 1e-2, 2e-2);
}

/* --- SwiGLU --- */

struct glu {
	float gu[N * 2 * C], h[N * C], r[N * C];
};

static double glu_loss(void *ctx)
{
	struct glu *g = ctx;

	rt_swiglu_forward(g->gu, g->h, N, C);
	return dot(g->h, g->r, N * C);
}

static void test_swiglu(void **state)
{
	struct glu g;
	float dgu[N * 2 * C];

	(void)state;
	fill(g.gu, N * 2 * C, 16, 2.0f);
	fill(g.r, N * C, 17, 1.0f);
	glu_loss(&g);
	/* h = g / (1 + e^-g) u */
	assert_float_equal(g.h[3], g.gu[3] / (1.0 + exp(-(double)g.gu[3])) * g.gu[C + 3], 1e-5);
	rt_swiglu_backward(g.r, g.gu, dgu, N, C);
	check_grad("swiglu dgu", g.gu, dgu, N * 2 * C, glu_loss, &g, 1e-2, 2e-2);
	/* in place: the same bits */
	rt_swiglu_backward(g.r, g.gu, g.gu, N, C);
	assert_memory_equal(g.gu, dgu, sizeof(dgu));
}

/* --- embeddings --- */

struct emb {
	int32_t tok[B * T];
	float wte[11 * C], wpe[T * C], out[B * T * C], r[B * T * C];
};

static double emb_loss(void *ctx)
{
	struct emb *e = ctx;

	rt_embed_forward(e->tok, e->wte, e->wpe, e->out, B, T, C);
	return dot(e->out, e->r, B * T * C);
}

static void test_embed(void **state)
{
	struct emb e;
	float dwte[11 * C] = { 0 }, dwpe[T * C] = { 0 };
	int i;

	(void)state;
	for (i = 0; i < B * T; i++)
		e.tok[i] = (i * 7) % 11; /* some ids twice, some never */
	e.tok[3] = e.tok[8];
	fill(e.wte, 11 * C, 7, 1.0f);
	fill(e.wpe, T * C, 8, 1.0f);
	fill(e.r, B * T * C, 9, 1.0f);
	emb_loss(&e);
	rt_embed_backward(e.tok, e.r, dwte, dwpe, B, T, C);
	check_grad("embedding dwte", e.wte, dwte, 11 * C, emb_loss, &e, 1e-2, 1e-3);
	check_grad("embedding dwpe", e.wpe, dwpe, T * C, emb_loss, &e, 1e-2, 1e-3);
}

/* --- main --- */

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_embed),
		cmocka_unit_test(test_layernorm),
		cmocka_unit_test(test_attention),
		cmocka_unit_test(test_rmsnorm),
		cmocka_unit_test(test_gqa_rope),
		cmocka_unit_test(test_swiglu),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
