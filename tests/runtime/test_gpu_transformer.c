/*
 * test_gpu_transformer.c - the GPT's kernels on the GPU (runtime/gpu/
 * transformer.h) against the CPU's they mirror (runtime/kernels/
 * transformer.h), on random data at three shapes: a tiny one (B 2, T 5,
 * C 8, NH 2), an odd one (B 3, T 37, C 40, NH 5: neither T nor C a multiple
 * of 32, heads of 8) and a GPT-2-ish one (B 2, T 64, C 96, NH 4).
 *
 * Without a visible GPU the program says so and exits 77, which ctest counts
 * as skipped (SKIP_RETURN_CODE), never as passed.
 *
 * Tolerances, and why:
 *   - bitwise: the embedding, forward (tok and out) and backward (dwte,
 *     dwpe, added onto random gradients). The GPU adds each element's terms
 *     in the CPU's order; the vocabulary is small (7 to 50 tokens), so
 *     tokens repeat and the order matters.
 *   - LayerNorm (y, mean, rstd, dx, dw, db) and attention (out, lse,
 *     dqkv): |got - want| <= 1e-5 (|want| + 0.1 max |want|) for every
 *     element, max over the array. The sums run in another order (a warp's
 *     lanes, slices of rows, cuBLAS's products); relative to the exact
 *     result (in double) the CPU's floats at these shapes, and at T 256,
 *     stay within 2.1e-6 of it by that measure (a relative floor is needed:
 *     an element near 0 that is a sum of terms of order 1 has an ulp of
 *     error of order 1e-7, and LayerNorm's dw and db are sums over all the
 *     rows, tens in size, which the absolute floor would not scale to).
 *   - cuBLAS: the handle is put in CUBLAS_PEDANTIC_MATH, float32 products
 *     with no TF32 whatever NVIDIA_TF32_OVERRIDE says (CUBLAS_DEFAULT_MATH
 *     gives float32 too, but the environment can turn TF32 on for it).
 *
 * Also checked: each GPU call made twice on the same inputs gives the same
 * bits (no atomics, fixed orders); no kernel writes past the end of an
 * output or of the scratch the query asks for (GUARD floats after each
 * device buffer keep their bits); attention's dqkv and out are written,
 * not added (they start as NaN); bad shapes and a cuBLAS handle on another
 * stream are -EINVAL; empty shapes launch nothing.
 *
 * Sections: helpers, embeddings, LayerNorm, attention, arguments, main.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "base/err.h"
#include "base/rng.h"
#include "runtime/gpu/transformer.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/transformer.h"

/* --- helpers --- */

/* the stream every test queues its work on (not the legacy default one),
 * and a cuBLAS handle bound to it */
static cudaStream_t stream;
static cublasHandle_t blas;

struct shape {
	int B, T, C, NH, V;
};

static const struct shape shapes[] = {
	{ 2, 5, 8, 2, 7 },
	{ 3, 37, 40, 5, 11 },
	{ 2, 64, 96, 4, 50 },
};
#define N_SHAPES (sizeof(shapes) / sizeof(shapes[0]))

#define TOL 1e-5
#define FLOOR 0.1   /* of the array's max |want| */
#define GUARD 64    /* floats after each device buffer that no kernel may touch */
#define GUARD_BITS 0x7fc0deadu /* a NaN */

#define cuda_ok(call) do { \
	cudaError_t e_ = (call); \
	if (e_ != cudaSuccess) \
		fail_msg("%s: %s", #call, cudaGetErrorString(e_)); \
} while (0)

/* a dtrain call returning 0 or -errno with a message in `err` (in scope) */
#define rc_ok(call) do { \
	int rc_ = (call); \
	if (rc_ != 0) \
		fail_msg("%s = %d: %s", #call, rc_, err.msg); \
} while (0)

static void *xmalloc(size_t bytes)
{
	void *p = malloc(bytes ? bytes : 1);

	assert_non_null(p);
	return p;
}

/* n floats (or int32s) on the device, all of them and GUARD more set to
 * GUARD_BITS */
static float *dalloc(size_t n)
{
	uint32_t *h = xmalloc((n + GUARD) * sizeof(*h));
	void *d = NULL;
	size_t i;

	for (i = 0; i < n + GUARD; i++)
		h[i] = GUARD_BITS;
	cuda_ok(cudaMalloc(&d, (n + GUARD) * sizeof(float)));
	cuda_ok(cudaMemcpy(d, h, (n + GUARD) * sizeof(float), cudaMemcpyHostToDevice));
	free(h);
	return d;
}

/* a device copy of h [n] (4-byte elements), guarded */
static float *dput(const void *h, size_t n)
{
	float *d = dalloc(n);

	cuda_ok(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
	return d;
}

/* h [n] = d [n] again (a reset of an accumulating output) */
static void reput(float *d, const void *h, size_t n)
{
	cuda_ok(cudaStreamSynchronize(stream));
	cuda_ok(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
}

/* waits for the test stream, then copies device -> host */
static void from_dev(void *h, const void *d, size_t n)
{
	cuda_ok(cudaStreamSynchronize(stream));
	cuda_ok(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
}

/* the GUARD floats after d [n] still hold GUARD_BITS; frees d */
static void dfree(const char *what, float *d, size_t n)
{
	uint32_t g[GUARD];
	int i;

	from_dev(g, d + n, GUARD);
	for (i = 0; i < GUARD; i++)
		if (g[i] != GUARD_BITS)
			fail_msg("%s: written past its end, at [%zu + %d]", what, n, i);
	cuda_ok(cudaFree(d));
}

static float *randn(size_t n, float scale, float offset, uint64_t seed)
{
	float *p = xmalloc(n * sizeof(*p));
	struct dt_rng r;
	size_t i;

	dt_rng_seed(&r, seed, 5);
	for (i = 0; i < n; i++)
		p[i] = offset + scale * dt_rng_normal(&r);
	return p;
}

static float *dup(const float *p, size_t n)
{
	float *q = xmalloc(n * sizeof(*q));

	memcpy(q, p, n * sizeof(*q));
	return q;
}

/* got == want bit for bit (4-byte elements), naming the first difference */
static void check_bitwise(const char *what, const struct shape *s, const void *got,
			  const void *want, size_t n)
{
	const uint32_t *g = got, *w = want;
	size_t i;

	for (i = 0; i < n; i++)
		if (g[i] != w[i])
			fail_msg("%s (B %d, T %d, C %d)[%zu] = 0x%08x, want 0x%08x bit for bit", what, s->B,
				 s->T, s->C, i, (unsigned)g[i], (unsigned)w[i]);
}

/* |got - want| <= TOL (|want| + FLOOR max |want|) for every element */
static void check_close(const char *what, const struct shape *s, const float *got,
			const float *want, size_t n)
{
	double scale = 0.0, worst = 0.0;
	size_t i, at = 0;

	for (i = 0; i < n; i++)
		if (fabs(want[i]) > scale)
			scale = fabs(want[i]);
	for (i = 0; i < n; i++) {
		double e = fabs((double)got[i] - want[i]) / (fabs(want[i]) + FLOOR * scale);

		if (!(e <= worst)) { /* NaN counts as worst */
			worst = e;
			at = i;
		}
	}
	if (!(worst <= TOL))
		fail_msg("%s (B %d, T %d, C %d, NH %d)[%zu] = %.9g, want %.9g: relative error %.3g > %g (floor %g x max |want| %.3g)",
			 what, s->B, s->T, s->C, s->NH, at, got[at], want[at], worst, TOL, FLOOR, scale);
}

/* --- embeddings --- */

static void check_embed(const struct shape *s)
{
	const size_t N = (size_t)s->B * s->T, C = (size_t)s->C, V = (size_t)s->V, T = (size_t)s->T;
	float *ids = xmalloc(N * sizeof(float)), *out = xmalloc(N * C * sizeof(float));
	float *wte = randn(V * C, 1.0f, 0.0f, 1), *wpe = randn(T * C, 1.0f, 0.0f, 2);
	float *dout = randn(N * C, 1.0f, 0.0f, 3), *dwte = randn(V * C, 1.0f, 0.0f, 4);
	float *dwpe = randn(T * C, 1.0f, 0.0f, 5), *got = xmalloc((N + V + T) * C * sizeof(float));
	int32_t *tok = xmalloc(N * sizeof(int32_t));
	float *d_ids, *d_tok = dalloc(N), *d_out = dalloc(N * C), *d_wte, *d_wpe, *d_dout;
	float *d_dwte = dput(dwte, V * C), *d_dwpe = dput(dwpe, T * C);
	struct dt_err err = { 0 };
	struct dt_rng r;
	size_t i;

	dt_rng_seed(&r, 6, 0);
	for (i = 0; i < N; i++) {
		ids[i] = (float)dt_rng_below(&r, s->V);
		tok[i] = (int32_t)ids[i]; /* as the CPU model converts (model/gpt.c) */
	}
	d_ids = dput(ids, N);
	d_wte = dput(wte, V * C);
	d_wpe = dput(wpe, T * C);
	d_dout = dput(dout, N * C);

	rt_embed_forward(tok, wte, wpe, out, s->B, s->T, s->C);
	rc_ok(rt_gpu_embed_forward(d_ids, (int32_t *)d_tok, d_wte, d_wpe, d_out, s->B, s->T, s->C,
				   stream, &err));
	from_dev(got, d_tok, N);
	check_bitwise("embed tok", s, got, tok, N);
	from_dev(got, d_out, N * C);
	check_bitwise("embed out", s, got, out, N * C);

	rt_embed_backward(tok, dout, dwte, dwpe, s->B, s->T, s->C);
	rc_ok(rt_gpu_embed_backward((const int32_t *)d_tok, d_dout, d_dwte, d_dwpe, s->B, s->T, s->C,
				    stream, &err));
	from_dev(got, d_dwte, V * C);
	check_bitwise("embed dwte", s, got, dwte, V * C);
	from_dev(got, d_dwpe, T * C);
	check_bitwise("embed dwpe", s, got, dwpe, T * C);

	dfree("embed dwpe", d_dwpe, T * C);
	dfree("embed dwte", d_dwte, V * C);
	dfree("embed out", d_out, N * C);
	dfree("embed tok", d_tok, N);
	dfree("ids", d_ids, N);
	dfree("wte", d_wte, V * C);
	dfree("wpe", d_wpe, T * C);
	dfree("dout", d_dout, N * C);
	free(tok);
	free(got);
	free(dwpe);
	free(dwte);
	free(dout);
	free(wpe);
	free(wte);
	free(out);
	free(ids);
}

static void test_embed(void **state)
{
	size_t k;

	(void)state;
	for (k = 0; k < N_SHAPES; k++)
		check_embed(&shapes[k]);
}

/* --- LayerNorm --- */

/* the GPU's forward, y, mean and rstd into got [N C + 2 N] */
static void ln_forward(const float *d_x, const float *d_w, const float *d_b, float *d_y,
		       float *d_mean, float *d_rstd, int N, int C, float *got)
{
	struct dt_err err = { 0 };
	size_t NC = (size_t)N * (size_t)C;

	rc_ok(rt_gpu_layernorm_forward(d_x, d_w, d_b, d_y, d_mean, d_rstd, N, C, stream, &err));
	from_dev(got, d_y, NC);
	from_dev(got + NC, d_mean, (size_t)N);
	from_dev(got + NC + N, d_rstd, (size_t)N);
}

/* the GPU's backward from dx0, dw0, db0: dx, dw, db into got [N C + 2 C] */
static void ln_backward(const float *d_dy, const float *d_x, const float *d_w, const float *d_mean,
			const float *d_rstd, float *d_dx, float *d_dw, float *d_db, const float *dx0,
			const float *dw0, const float *db0, int N, int C, float *got)
{
	struct dt_err err = { 0 };
	size_t NC = (size_t)N * (size_t)C;

	reput(d_dx, dx0, NC);
	reput(d_dw, dw0, (size_t)C);
	reput(d_db, db0, (size_t)C);
	rc_ok(rt_gpu_layernorm_backward(d_dy, d_x, d_w, d_mean, d_rstd, d_dx, d_dw, d_db, N, C,
					stream, &err));
	from_dev(got, d_dx, NC);
	from_dev(got + NC, d_dw, (size_t)C);
	from_dev(got + NC + C, d_db, (size_t)C);
}

static void check_layernorm(const struct shape *s)
{
	const int N = s->B * s->T, C = s->C;
	const size_t NC = (size_t)N * C, M = NC + 2 * (size_t)(N > C ? N : C);
	float *x = randn(NC, 2.0f, 0.5f, 11), *w = randn(C, 1.0f, 1.0f, 12), *b = randn(C, 1.0f, 0.0f, 13);
	float *dy = randn(NC, 1.0f, 0.0f, 14), *dx0 = randn(NC, 1.0f, 0.0f, 15);
	float *dw0 = randn(C, 1.0f, 0.0f, 16), *db0 = randn(C, 1.0f, 0.0f, 17);
	float *want = xmalloc(M * sizeof(float)), *got = xmalloc(M * sizeof(float));
	float *again = xmalloc(M * sizeof(float));
	float *d_x = dput(x, NC), *d_w = dput(w, C), *d_b = dput(b, C), *d_dy = dput(dy, NC);
	float *d_y = dalloc(NC), *d_mean = dalloc(N), *d_rstd = dalloc(N), *d_dx = dalloc(NC);
	float *d_dw = dalloc(C), *d_db = dalloc(C);

	rt_layernorm_forward(x, w, b, want, want + NC, want + NC + N, N, C);
	ln_forward(d_x, d_w, d_b, d_y, d_mean, d_rstd, N, C, got);
	check_close("layernorm y", s, got, want, NC);
	check_close("layernorm mean", s, got + NC, want + NC, N);
	check_close("layernorm rstd", s, got + NC + N, want + NC + N, N);
	ln_forward(d_x, d_w, d_b, d_y, d_mean, d_rstd, N, C, again);
	check_bitwise("layernorm forward, run twice", s, again, got, NC + 2 * (size_t)N);

	/* backward from the CPU's mean and rstd, on both */
	reput(d_mean, want + NC, N);
	reput(d_rstd, want + NC + N, N);
	{
		float *mean = dup(want + NC, N), *rstd = dup(want + NC + N, N);

		memcpy(want, dx0, NC * sizeof(float));
		memcpy(want + NC, dw0, C * sizeof(float));
		memcpy(want + NC + C, db0, C * sizeof(float));
		rt_layernorm_backward(dy, x, w, mean, rstd, want, want + NC, want + NC + C, N, C);
		free(rstd);
		free(mean);
	}
	ln_backward(d_dy, d_x, d_w, d_mean, d_rstd, d_dx, d_dw, d_db, dx0, dw0, db0, N, C, got);
	check_close("layernorm dx", s, got, want, NC);
	check_close("layernorm dw", s, got + NC, want + NC, C);
	check_close("layernorm db", s, got + NC + C, want + NC + C, C);
	ln_backward(d_dy, d_x, d_w, d_mean, d_rstd, d_dx, d_dw, d_db, dx0, dw0, db0, N, C, again);
	check_bitwise("layernorm backward, run twice", s, again, got, NC + 2 * (size_t)C);

	dfree("layernorm db", d_db, C);
	dfree("layernorm dw", d_dw, C);
	dfree("layernorm dx", d_dx, NC);
	dfree("layernorm rstd", d_rstd, N);
	dfree("layernorm mean", d_mean, N);
	dfree("layernorm y", d_y, NC);
	dfree("dy", d_dy, NC);
	dfree("b", d_b, C);
	dfree("w", d_w, C);
	dfree("x", d_x, NC);
	free(again);
	free(got);
	free(want);
	free(db0);
	free(dw0);
	free(dx0);
	free(dy);
	free(b);
	free(w);
	free(x);
}

static void test_layernorm(void **state)
{
	size_t k;

	(void)state;
	for (k = 0; k < N_SHAPES; k++)
		check_layernorm(&shapes[k]);
}

/* --- attention --- */

/* Fills d [n] with NaN (GUARD_BITS): an output that is added to instead of
 * written stays NaN. */
static void poison(float *d, size_t n)
{
	uint32_t *h = xmalloc(n * sizeof(*h));
	size_t i;

	for (i = 0; i < n; i++)
		h[i] = GUARD_BITS;
	reput(d, h, n);
	free(h);
}

/* The GPU's forward (out, lse into got [N C + B NH T]) and backward from
 * lse_in (dqkv into got2 [3 N C]), each from poisoned outputs. */
static void att_run(const struct shape *s, const float *d_qkv, const float *d_dout,
		    float *d_out, float *d_lse, float *d_dqkv, float *d_scratch,
		    const float *lse_in, float *got, float *got2)
{
	const size_t N = (size_t)s->B * s->T, NC = N * s->C, L = N * s->NH;
	struct dt_err err = { 0 };

	poison(d_out, NC);
	poison(d_lse, L);
	poison(d_dqkv, 3 * NC);
	rc_ok(rt_gpu_attention_forward(blas, d_qkv, d_out, d_lse, s->B, s->T, s->C, s->NH, d_scratch,
				       stream, &err));
	from_dev(got, d_out, NC);
	from_dev(got + NC, d_lse, L);
	reput(d_lse, lse_in, L);
	rc_ok(rt_gpu_attention_backward(blas, d_dout, d_qkv, d_lse, d_dqkv, s->B, s->T, s->C, s->NH,
					d_scratch, stream, &err));
	from_dev(got2, d_dqkv, 3 * NC);
}

static void check_attention(const struct shape *s)
{
	const size_t N = (size_t)s->B * s->T, NC = N * s->C, L = N * s->NH, T = (size_t)s->T;
	const size_t sf = rt_gpu_attention_scratch_floats(s->B, s->T, s->NH);
	float *qkv = randn(3 * NC, 1.0f, 0.0f, 21), *dout = randn(NC, 1.0f, 0.0f, 22);
	float *want = xmalloc((NC + L) * sizeof(float)), *want2 = xmalloc(3 * NC * sizeof(float));
	float *got = xmalloc((NC + L) * sizeof(float)), *got2 = xmalloc(3 * NC * sizeof(float));
	float *again = xmalloc((NC + L) * sizeof(float)), *again2 = xmalloc(3 * NC * sizeof(float));
	float *scratch = xmalloc(2 * T * T * sizeof(float));
	float *d_qkv = dput(qkv, 3 * NC), *d_dout = dput(dout, NC), *d_out = dalloc(NC);
	float *d_lse = dalloc(L), *d_dqkv = dalloc(3 * NC), *d_scratch = dalloc(sf);

	assert_true(sf > 0);
	rt_attention_forward(qkv, want, want + NC, s->B, s->T, s->C, s->NH, scratch);
	rt_attention_backward(dout, qkv, want + NC, want2, s->B, s->T, s->C, s->NH, scratch);
	att_run(s, d_qkv, d_dout, d_out, d_lse, d_dqkv, d_scratch, want + NC, got, got2);
	check_close("attention out", s, got, want, NC);
	check_close("attention lse", s, got + NC, want + NC, L);
	check_close("attention dqkv", s, got2, want2, 3 * NC);
	att_run(s, d_qkv, d_dout, d_out, d_lse, d_dqkv, d_scratch, want + NC, again, again2);
	check_bitwise("attention forward, run twice", s, again, got, NC + L);
	check_bitwise("attention backward, run twice", s, again2, got2, 3 * NC);

	dfree("attention scratch", d_scratch, sf);
	dfree("attention dqkv", d_dqkv, 3 * NC);
	dfree("attention lse", d_lse, L);
	dfree("attention out", d_out, NC);
	dfree("dout", d_dout, NC);
	dfree("qkv", d_qkv, 3 * NC);
	free(scratch);
	free(again2);
	free(again);
	free(got2);
	free(got);
	free(want2);
	free(want);
	free(dout);
	free(qkv);
}

static void test_attention(void **state)
{
	size_t k;

	(void)state;
	for (k = 0; k < N_SHAPES; k++)
		check_attention(&shapes[k]);
}

/* --- arguments --- */

/* Bad shapes are -EINVAL with a line; empty ones are 0 and touch nothing
 * (NULL pointers); a handle bound to another stream is refused. */
static void test_arguments(void **state)
{
	struct dt_err err = { 0 };
	float *d = dalloc(64);
	cublasHandle_t other_blas;
	cudaStream_t other;

	(void)state;
	assert_int_equal(rt_gpu_embed_forward(d, (int32_t *)d, d, d, d, -1, 2, 2, stream, &err),
			 -EINVAL);
	assert_int_equal(rt_gpu_layernorm_forward(d, d, d, d, d, d, 2, 0, stream, &err), -EINVAL);
	assert_int_equal(rt_gpu_layernorm_backward(d, d, d, d, d, d, d, d, -1, 2, stream, &err),
			 -EINVAL);
	assert_int_equal(rt_gpu_attention_forward(blas, d, d, d, 1, 2, 6, 4, d, stream, &err),
			 -EINVAL); /* C % NH */
	assert_int_equal(rt_gpu_attention_backward(blas, d, d, d, d, 1, 2, 8, 0, d, stream, &err),
			 -EINVAL);
	assert_int_equal(rt_gpu_attention_forward(blas, d, d, d, 1, 2, 8, 2, NULL, stream, &err),
			 -EINVAL); /* no scratch */
	assert_true(err.count == 6);

	dt_err_clear(&err);
	rc_ok(rt_gpu_embed_forward(NULL, NULL, NULL, NULL, NULL, 0, 5, 8, stream, &err));
	rc_ok(rt_gpu_embed_backward(NULL, NULL, NULL, NULL, 2, 0, 8, stream, &err));
	rc_ok(rt_gpu_layernorm_forward(NULL, NULL, NULL, NULL, NULL, NULL, 0, 8, stream, &err));
	rc_ok(rt_gpu_layernorm_backward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 8, stream,
					&err));
	rc_ok(rt_gpu_attention_forward(NULL, NULL, NULL, NULL, 0, 5, 8, 2, NULL, stream, &err));
	rc_ok(rt_gpu_attention_backward(NULL, NULL, NULL, NULL, NULL, 2, 0, 8, 2, NULL, stream, &err));
	assert_int_equal(rt_gpu_attention_scratch_floats(0, 5, 2), 0);
	assert_int_equal(rt_gpu_attention_scratch_floats(3, 5, 2), 2 * 2 * 5 * 5);

	cuda_ok(cudaStreamCreate(&other));
	assert_int_equal(cublasCreate(&other_blas), CUBLAS_STATUS_SUCCESS);
	assert_int_equal(cublasSetStream(other_blas, other), CUBLAS_STATUS_SUCCESS);
	assert_int_equal(rt_gpu_attention_forward(other_blas, d, d, d, 1, 2, 8, 2, d, stream, &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "another stream"));
	cublasDestroy(other_blas);
	cuda_ok(cudaStreamDestroy(other));
	dfree("argument buffer", d, 64);
}

/* --- main --- */

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_embed),
		cmocka_unit_test(test_layernorm),
		cmocka_unit_test(test_attention),
		cmocka_unit_test(test_arguments),
	};
	cudaError_t e;
	int n = 0, rc;

	e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n < 1) {
		printf("no GPU visible (%s): skipped\n",
		       e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found 0 devices");
		return 77;
	}
	rt_blas_threads(1); /* the CPU reference is then deterministic */
	if (cudaStreamCreate(&stream) != cudaSuccess || cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) {
		printf("cannot create a CUDA stream or a cuBLAS handle: skipped\n");
		return 77;
	}
	if (cublasSetStream(blas, stream) != CUBLAS_STATUS_SUCCESS ||
	    cublasSetMathMode(blas, CUBLAS_PEDANTIC_MATH) != CUBLAS_STATUS_SUCCESS) {
		printf("cannot set the cuBLAS handle's stream and math mode\n");
		return 1;
	}
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	cublasDestroy(blas);
	cudaStreamDestroy(stream);
	return rc;
}
