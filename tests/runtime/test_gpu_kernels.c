/*
 * test_gpu_kernels.c - the GPU path's kernels (runtime/gpu/kernels.h) and
 * stage (runtime/gpu/stage.h) against the CPU implementation they mirror
 * (runtime/kernels/kernels.h, model.h, optim.h), on random data.
 *
 * Without a visible GPU the program says so and exits 77, which ctest counts
 * as skipped (SKIP_RETURN_CODE), never as passed.
 *
 * Tolerances, and why:
 *   - bitwise: ReLU, GELU forward and backward, bias broadcast and bias
 *     gradient, SGD, AdamW, scaling and clipping. The kernels perform the
 *     CPU's float operations in the CPU's order without fused multiply-adds
 *     (GELU and the updates call the very functions the CPU's loops call:
 *     runtime/kernels/elem.h; nvcc builds with -fmad=false), so anything
 *     else is a bug. (A CPU build with -mfma would break this; the project
 *     builds without.)
 *   - tanh, forward: |got - want| <= 1e-6 (|want| + |x|); backward:
 *     <= 1e-6 (|want| + |dy| (1 + |x| + |x|^3 / 5)). CUDA's tanhf is within
 *     2 ulp, glibc's within 1-2: the difference in t = tanh(.) is a few
 *     1e-7, multiplied by |df/dt| <= 0.5 |x| (forward), |x| k (1 + 3 c x^2)
 *     + 0.5 (GELU backward) or 2 (tanh backward).
 *   - loss sums and sums of squares (double, other order): 1e-12 relative;
 *     dlogits (double, then rounded to float): 1e-6 relative (1 ulp of a
 *     float where the two doubles straddle a rounding boundary) plus
 *     1e-14 grad_scale (p - 1 cancels for a probability close to 1, where
 *     a few double ulps of p are all that differ).
 *   - the stage in float32 (cuBLAS, other summation order than OpenBLAS):
 *     max |got - want| <= 1e-5 max |want| over each array (logits, dx,
 *     each layer's dW and db, parameters after an SGD step) and on the
 *     loss, with the same count of correct predictions; in TF32 mode
 *     (inputs of products rounded to 10 mantissa bits) 5e-3, and the
 *     count within 3 (a near tie of two logits may flip).
 *
 * Sections: helpers, activations, bias, softmax cross-entropy, optimizers,
 * gradient norm, stage, main.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "runtime/gpu/kernels.h"
#include "runtime/gpu/stage.h"
#include "runtime/kernels/kernels.h"
#include "runtime/model/mlp.h"
#include "runtime/model/optim.h"
#include "base/rng.h"

/* --- helpers --- */

/* the stream every test queues its work on (not the legacy default one) */
static cudaStream_t stream;

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

/* |got - want| <= tol, with both values in the failure message */
#define assert_close(got, want, tol) do { \
	double g_ = (got), w_ = (want), t_ = (tol); \
	if (!(fabs(g_ - w_) <= t_)) \
		fail_msg("%s = %.17g, want %.17g (tolerance %.3g)", #got, g_, w_, t_); \
} while (0)

static void *xmalloc(size_t bytes)
{
	void *p = malloc(bytes ? bytes : 1);

	assert_non_null(p);
	return p;
}

static void *dmalloc(size_t bytes)
{
	void *p = NULL;

	cuda_ok(cudaMalloc(&p, bytes ? bytes : 1));
	return p;
}

static float *to_dev(const void *h, size_t bytes)
{
	float *d = dmalloc(bytes);

	cuda_ok(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
	return d;
}

/* waits for the test stream, then copies device -> host */
static void from_dev(void *h, const void *d, size_t bytes)
{
	cuda_ok(cudaStreamSynchronize(stream));
	cuda_ok(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}

static float *randn(size_t n, float scale, uint64_t seed)
{
	float *p = xmalloc(n * sizeof(*p));
	struct dt_rng r;
	size_t i;

	dt_rng_seed(&r, seed, 5);
	for (i = 0; i < n; i++)
		p[i] = scale * dt_rng_normal(&r);
	return p;
}

/* got == want bit for bit, naming the first difference */
static void check_bitwise(const char *what, const float *got, const float *want, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (memcmp(&got[i], &want[i], sizeof(float)))
			fail_msg("%s[%zu] = %.9g, want %.9g bit for bit", what, i, got[i], want[i]);
}

/* max |got - want| <= tol * max |want| over the array */
static void check_array(const char *what, const float *got, const float *want, size_t n,
			double tol)
{
	double scale = 0.0, worst = 0.0;
	size_t i, at = 0;

	for (i = 0; i < n; i++)
		if (fabs(want[i]) > scale)
			scale = fabs(want[i]);
	for (i = 0; i < n; i++) {
		double d = fabs((double)got[i] - (double)want[i]);

		if (!(d <= worst)) { /* NaN counts as worst */
			worst = d;
			at = i;
		}
	}
	if (!(worst <= tol * scale))
		fail_msg("%s[%zu] = %.9g, want %.9g: error %.3g > %.3g x max |want| %.3g",
			 what, at, got[at], want[at], worst, tol, scale);
}

/* --- activations --- */

static void check_act(enum rt_act act)
{
	const size_t n = 100003;
	float *x = randn(n, 3.0f, 1 + act), *dy = randn(n, 1.0f, 11 + act);
	float *want = xmalloc(n * sizeof(float)), *got = xmalloc(n * sizeof(float));
	float *dx = to_dev(x, n * sizeof(float)), *ddy = to_dev(dy, n * sizeof(float));
	float *dout = dmalloc(n * sizeof(float));
	struct dt_err err = { 0 };
	size_t i;

	/* edges: zero, large, tiny */
	x[0] = 0.0f; x[1] = -0.0f; x[2] = 30.0f; x[3] = -30.0f; x[4] = 1e-30f; x[5] = -1e-30f;
	cuda_ok(cudaMemcpy(dx, x, 6 * sizeof(float), cudaMemcpyHostToDevice));

	rt_act_forward(act, x, want, n);
	rc_ok(rt_gpu_act_forward(act, dx, dout, n, stream, &err));
	from_dev(got, dout, n * sizeof(float));
	if (act != RT_ACT_TANH)
		check_bitwise(act == RT_ACT_RELU ? "relu forward" : "gelu forward", got, want, n);
	else
		for (i = 0; i < n; i++)
			assert_close(got[i], want[i], 1e-6 * (fabs(want[i]) + fabs(x[i])));

	rt_act_backward(act, x, dy, want, n);
	rc_ok(rt_gpu_act_backward(act, dx, ddy, dout, n, stream, &err));
	from_dev(got, dout, n * sizeof(float));
	if (act != RT_ACT_TANH) {
		check_bitwise(act == RT_ACT_RELU ? "relu backward" : "gelu backward", got, want, n);
	} else {
		for (i = 0; i < n; i++) {
			double v = fabs(x[i]);

			assert_close(got[i], want[i],
				     1e-6 * (fabs(want[i]) + fabs(dy[i]) * (1.0 + v + v * v * v / 5.0)));
		}
	}

	/* in place (y == x, dx == dy), as the stage uses them */
	rc_ok(rt_gpu_act_backward(act, dx, ddy, ddy, n, stream, &err));
	from_dev(want, ddy, n * sizeof(float));
	check_bitwise("backward in place", want, got, n);
	rc_ok(rt_gpu_act_forward(act, dx, dx, n, stream, &err));
	rc_ok(rt_gpu_act_forward(act, dx, dx, 0, stream, &err)); /* n = 0: nothing */
	from_dev(want, dx, n * sizeof(float));
	rt_act_forward(act, x, got, n);
	if (act != RT_ACT_TANH)
		check_bitwise("forward in place", want, got, n);

	cudaFree(dout);
	cudaFree(ddy);
	cudaFree(dx);
	free(got);
	free(want);
	free(dy);
	free(x);
}

static void test_act_relu(void **state) { (void)state; check_act(RT_ACT_RELU); }
static void test_act_gelu(void **state) { (void)state; check_act(RT_ACT_GELU); }
static void test_act_tanh(void **state) { (void)state; check_act(RT_ACT_TANH); }

static void test_act_bad(void **state)
{
	struct dt_err err = { 0 };

	(void)state;
	assert_int_equal(rt_gpu_act_forward((enum rt_act)7, NULL, NULL, 10, stream, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "activation 7"));
}

/* --- bias --- */

static void test_bias(void **state)
{
	const int rows = 300, out = 77;
	float *b = randn((size_t)out, 1.0f, 21), *dy = randn((size_t)rows * out, 1.0f, 22);
	float *db = randn((size_t)out, 1.0f, 23); /* accumulated onto, not overwritten */
	float *want = xmalloc((size_t)rows * out * sizeof(float));
	float *got = xmalloc((size_t)rows * out * sizeof(float));
	float *d_b = to_dev(b, out * sizeof(float)), *d_dy = to_dev(dy, (size_t)rows * out * sizeof(float));
	float *d_db = to_dev(db, out * sizeof(float)), *d_y = dmalloc((size_t)rows * out * sizeof(float));
	struct dt_err err = { 0 };
	int r;

	(void)state;
	for (r = 0; r < rows; r++)
		memcpy(want + (size_t)r * out, b, out * sizeof(float));
	rc_ok(rt_gpu_bias_fill(d_b, d_y, rows, out, stream, &err));
	from_dev(got, d_y, (size_t)rows * out * sizeof(float));
	check_bitwise("bias_fill", got, want, (size_t)rows * out);

	/* the CPU's bias gradient: rt_linear_backward with only db wanted */
	rt_linear_backward(NULL, NULL, dy, NULL, NULL, db, rows, 1, out, true);
	rc_ok(rt_gpu_bias_grad(d_dy, d_db, rows, out, stream, &err));
	rc_ok(rt_gpu_bias_grad(d_dy, d_db, 0, out, stream, &err)); /* rows = 0: nothing */
	from_dev(got, d_db, out * sizeof(float));
	check_bitwise("bias_grad", got, db, (size_t)out);

	cudaFree(d_y);
	cudaFree(d_db);
	cudaFree(d_dy);
	cudaFree(d_b);
	free(got);
	free(want);
	free(db);
	free(dy);
	free(b);
}

/* --- softmax cross-entropy --- */

static void test_softmax_xent(void **state)
{
	/* rows > 8 warps x 256 blocks: every warp takes more than one row */
	const int rows = 2500, classes = 37;
	const size_t n = (size_t)rows * classes;
	const float scale = 1.0f / 3000.0f;
	float *z = randn(n, 3.0f, 31), *want = xmalloc(n * sizeof(float));
	float *got = xmalloc(n * sizeof(float));
	int32_t *y = xmalloc((size_t)rows * sizeof(int32_t));
	struct rt_gpu_xent_acc *acc = dmalloc(sizeof(*acc));
	struct rt_gpu_xent_sums sums;
	struct dt_err err = { 0 };
	struct dt_rng r;
	int64_t correct = 0;
	double loss;
	float *d_z, *d_dz;
	int32_t *d_y;
	int i;

	(void)state;
	dt_rng_seed(&r, 32, 0);
	for (i = 0; i < rows; i++)
		y[i] = (int32_t)dt_rng_below(&r, classes);
	/* rows of huge logits (the log-sum-exp must subtract the max) */
	for (i = 0; i < classes; i++) {
		z[i] += 1e4f;
		z[classes + i] = z[classes + i] * 1e3f - 5e4f;
	}
	d_z = to_dev(z, n * sizeof(float));
	d_y = (int32_t *)to_dev(y, (size_t)rows * sizeof(int32_t));
	d_dz = dmalloc(n * sizeof(float));

	loss = rt_softmax_xent(z, y, rows, classes, scale, want, &correct);
	rc_ok(rt_gpu_xent_zero(acc, stream, &err));
	rc_ok(rt_gpu_softmax_xent(d_z, d_y, rows, classes, scale, d_dz, acc, stream, &err));
	rc_ok(rt_gpu_xent_fetch(acc, &sums, stream, &err));
	from_dev(got, d_dz, n * sizeof(float));
	assert_close(sums.loss, loss, 1e-12 * fabs(loss));
	assert_int_equal(sums.correct, correct);
	assert_int_equal(sums.bad_calls, 0);
	for (i = 0; i < (int)n; i++)
		assert_close(got[i], want[i], 1e-6 * fabs(want[i]) + 1e-14 * scale);

	/* accumulates: a second call (no dlogits, fewer rows) adds on */
	loss += rt_softmax_xent(z, y, 100, classes, scale, NULL, &correct);
	rc_ok(rt_gpu_softmax_xent(d_z, d_y, 100, classes, scale, NULL, acc, stream, &err));
	rc_ok(rt_gpu_softmax_xent(d_z, d_y, 0, classes, scale, NULL, acc, stream, &err));
	rc_ok(rt_gpu_xent_fetch(acc, &sums, stream, &err));
	cuda_ok(cudaStreamSynchronize(stream));
	assert_close(sums.loss, loss, 1e-12 * fabs(loss));
	assert_int_equal(sums.correct, correct);

	/* a bad label anywhere: loss NaN, nothing else written */
	y[rows - 1] = classes;
	cuda_ok(cudaMemcpy(d_y, y, (size_t)rows * sizeof(int32_t), cudaMemcpyHostToDevice));
	cuda_ok(cudaMemset(d_dz, 0xff, n * sizeof(float)));
	rc_ok(rt_gpu_softmax_xent(d_z, d_y, rows, classes, scale, d_dz, acc, stream, &err));
	rc_ok(rt_gpu_xent_fetch(acc, &sums, stream, &err));
	from_dev(got, d_dz, n * sizeof(float));
	assert_true(isnan(sums.loss));
	assert_int_equal(sums.correct, correct);
	assert_int_equal(sums.bad_calls, 1);
	for (i = 0; i < (int)n; i++) {
		uint32_t bits;

		memcpy(&bits, &got[i], sizeof(bits));
		assert_int_equal(bits, 0xffffffffu);
	}
	assert_int_equal(rt_labels_check(y, rows, classes), rows - 1);

	/* zeroing starts over */
	rc_ok(rt_gpu_xent_zero(acc, stream, &err));
	rc_ok(rt_gpu_xent_fetch(acc, &sums, stream, &err));
	cuda_ok(cudaStreamSynchronize(stream));
	assert_true(sums.loss == 0.0 && sums.correct == 0 && sums.bad_calls == 0);
	assert_int_equal(rt_gpu_softmax_xent(d_z, d_y, rows, 0, scale, NULL, acc, stream, &err),
			 -EINVAL);

	cudaFree(d_dz);
	cudaFree(d_y);
	cudaFree(d_z);
	cudaFree(acc);
	free(y);
	free(got);
	free(want);
	free(z);
}

/* --- optimizers --- */

/* three updates on the CPU and on the GPU from the same start, bit for bit */
static void check_optim(enum rt_optim_type type, double wd)
{
	const size_t n = 50021;
	float *w = randn(n, 1.0f, 41), *g0 = randn(n, 0.1f, 42);
	float *got = xmalloc(n * sizeof(float));
	float *d_w = to_dev(w, n * sizeof(float)), *d_g = to_dev(g0, n * sizeof(float));
	float *d_m = dmalloc(n * sizeof(float)), *d_v = dmalloc(n * sizeof(float));
	double betas[2] = { 0.9, 0.999 };
	struct spec s = { 0 };
	struct rt_optim o;
	struct dt_err err = { 0 };
	int k;

	/* the optimizer as the trainer makes it (its state and its scratch:
	 * a hand-zeroed struct lacks o.part, which the CPU update uses) */
	s.train.optimizer.type = type == RT_OPTIM_ADAMW ? "adamw" : "sgd";
	s.train.optimizer.momentum = 0.9;
	s.train.optimizer.betas = (struct spec_nums){ .v = betas, .n = 2 };
	s.train.optimizer.weight_decay = wd;
	rc_ok(rt_optim_init(&o, &s, n, &err));
	cuda_ok(cudaMemset(d_m, 0, n * sizeof(float)));
	cuda_ok(cudaMemset(d_v, 0, n * sizeof(float)));
	for (k = 0; k < 3; k++) {
		double lr = 0.01 * (k + 1);
		size_t i;

		/* a different gradient each step */
		for (i = 0; i < n; i++)
			g0[i] = g0[i] * -0.7f + 0.01f;
		cuda_ok(cudaMemcpy(d_g, g0, n * sizeof(float), cudaMemcpyHostToDevice));
		rt_optim_step(&o, w, g0, n, lr);
		rc_ok(rt_gpu_optim_update(&o, o.step, d_w, d_g, d_m, d_v, n, lr, stream, &err));
	}
	from_dev(got, d_w, n * sizeof(float));
	check_bitwise(type == RT_OPTIM_ADAMW ? "adamw params" : "sgd params", got, w, n);
	from_dev(got, d_m, n * sizeof(float));
	check_bitwise("first moment", got, o.m, n);
	if (type == RT_OPTIM_ADAMW) {
		from_dev(got, d_v, n * sizeof(float));
		check_bitwise("second moment", got, o.v, n);
	}
	assert_int_equal(rt_gpu_optim_update(&o, 0, d_w, d_g, d_m, d_v, n, 0.1, stream, &err),
			 -EINVAL);

	rt_optim_free(&o);
	cudaFree(d_v);
	cudaFree(d_m);
	cudaFree(d_g);
	cudaFree(d_w);
	free(got);
	free(g0);
	free(w);
}

static void test_sgd(void **state) { (void)state; check_optim(RT_OPTIM_SGD, 1e-4); }
static void test_adamw(void **state) { (void)state; check_optim(RT_OPTIM_ADAMW, 0.01); }

/* --- gradient norm --- */

static void test_norm(void **state)
{
	const size_t n = 1000003;
	float *g = randn(n, 0.5f, 51), *got = xmalloc(n * sizeof(float));
	float *d_g = to_dev(g, n * sizeof(float));
	struct rt_gpu_sum *sum = dmalloc(sizeof(*sum));
	struct dt_err err = { 0 };
	double want = rt_sumsq(g, n), value;
	float factor;

	(void)state;
	rc_ok(rt_gpu_sum_zero(sum, stream, &err));
	rc_ok(rt_gpu_sumsq(d_g, n, sum, stream, &err));
	from_dev(&value, &sum->value, sizeof(value));
	assert_close(value, want, 1e-12 * want);
	/* accumulates over calls (a stage's buffers, one after another) */
	rc_ok(rt_gpu_sumsq(d_g, 1000, sum, stream, &err));
	rc_ok(rt_gpu_sumsq(d_g, 0, sum, stream, &err));
	from_dev(&value, &sum->value, sizeof(value));
	assert_close(value, want + rt_sumsq(g, 1000), 1e-12 * want);

	rt_scale(g, n, 0.37f);
	rc_ok(rt_gpu_scale(d_g, n, 0.37f, stream, &err));
	from_dev(got, d_g, n * sizeof(float));
	check_bitwise("scale", got, g, n);

	/* clipping on the device: the factor train.c takes, from the device's sum */
	rc_ok(rt_gpu_sum_zero(sum, stream, &err));
	rc_ok(rt_gpu_sumsq(d_g, n, sum, stream, &err));
	from_dev(&value, &sum->value, sizeof(value));
	rc_ok(rt_gpu_clip(d_g, n, &sum->value, 2.0 * sqrt(value), stream, &err)); /* below the max: no-op */
	from_dev(got, d_g, n * sizeof(float));
	check_bitwise("clip (not needed)", got, g, n);
	factor = (float)(1.5 / (sqrt(value) + 1e-6));
	rt_scale(g, n, factor);
	rc_ok(rt_gpu_clip(d_g, n, &sum->value, 1.5, stream, &err));
	from_dev(got, d_g, n * sizeof(float));
	check_bitwise("clip", got, g, n);

	cudaFree(sum);
	cudaFree(d_g);
	free(got);
	free(g);
}

/* --- stage --- */

/* A spec holding the model and optimizer, built by hand (not spec_free'd). */
struct mlp {
	struct spec s;
	long hidden[2];
};

static void mlp_set(struct mlp *m, const char *act)
{
	memset(m, 0, sizeof(*m));
	m->hidden[0] = 48;
	m->hidden[1] = 40;
	m->s.model.type = "mlp";
	m->s.model.inputs = 33;
	m->s.model.hidden.v = m->hidden;
	m->s.model.hidden.n = 2;
	m->s.model.outputs = 10;
	m->s.model.activation = (char *)act;
	m->s.model.init_seed = 7;
	m->s.train.optimizer.type = "sgd";
	m->s.train.optimizer.lr = 0.1;
	m->s.train.optimizer.momentum = 0.9;
	m->s.train.optimizer.weight_decay = 1e-4;
}

#define STAGES 2
#define MAX_ROWS 64

/* what the layer_done callback saw */
struct done_log {
	int calls[STAGES][8];
	int n[STAGES];
	int k;                  /* the stage whose backward is running */
	bool snapshot;          /* copy the layer's grads on the comm stream */
	cudaStream_t comm;
	struct rt_gpu_stage *g;
	float *snap[STAGES];    /* device, [n_params] per stage */
};

/* The allreduce contract of stage.h: wait for the event on another stream,
 * then read that layer's gradients there. */
static void on_layer_done(void *ctx, int layer, cudaEvent_t ready)
{
	struct done_log *d = ctx;
	const struct rt_gpu_layer *ly = &d->g[d->k].layers[layer];

	assert_non_null(ready);
	d->calls[d->k][d->n[d->k]++] = layer;
	if (!d->snapshot)
		return;
	cuda_ok(cudaStreamWaitEvent(d->comm, ready, 0));
	cuda_ok(cudaMemcpyAsync(d->snap[d->k] + ly->offset, ly->dw, ly->n_params * sizeof(float),
				cudaMemcpyDeviceToDevice, d->comm));
}

/* Two micro-batches (64 and 37 rows) through a 3-layer model cut in two
 * stages, forward and backward on both CPU and GPU, gradients compared,
 * then one SGD step and the next forward compared. */
static void check_stage(const char *act, bool tf32, double tol)
{
	static const int rows_of[2] = { MAX_ROWS, 37 };
	const int total = rows_of[0] + rows_of[1];
	struct mlp m;
	int first[STAGES + 1], k, mb, i, l;
	struct rt_stage c[STAGES];
	struct rt_acts ca[STAGES];
	struct rt_optim co[STAGES];
	struct rt_gpu_stage g[STAGES];
	struct rt_gpu_acts ga[STAGES];
	struct rt_gpu_optim go[STAGES];
	struct rt_gpu_xent_acc *acc = dmalloc(sizeof(*acc));
	struct rt_gpu_xent_sums sums;
	struct done_log log;
	struct dt_err err = { 0 };
	float *x = randn((size_t)total * 33, 1.0f, 61), *buf, *dl, *cdx;
	float *d_dl = dmalloc((size_t)MAX_ROWS * 10 * sizeof(float));
	float *d_dx = dmalloc((size_t)MAX_ROWS * 48 * sizeof(float));
	int32_t *y = xmalloc((size_t)total * sizeof(int32_t)), *d_y;
	const float scale = 1.0f / (float)total;
	int64_t correct = 0;
	double loss = 0.0;
	struct dt_rng r;

	mlp_set(&m, act);
	dt_rng_seed(&r, 62, 0);
	for (i = 0; i < total; i++)
		y[i] = (int32_t)dt_rng_below(&r, 10);
	d_y = (int32_t *)to_dev(y, (size_t)total * sizeof(int32_t));
	buf = xmalloc((size_t)MAX_ROWS * 48 * sizeof(float));
	dl = xmalloc((size_t)MAX_ROWS * 10 * sizeof(float));
	cdx = xmalloc((size_t)MAX_ROWS * 48 * sizeof(float));
	memset(&log, 0, sizeof(log));
	cuda_ok(cudaStreamCreate(&log.comm));
	log.g = g;

	rc_ok(rt_stage_split(&m.s, STAGES, first, &err));
	for (k = 0; k < STAGES; k++) {
		rc_ok(rt_stage_init(&c[k], &m.s, k, STAGES, first, &err));
		assert_int_equal(rt_acts_init(&ca[k], &c[k], MAX_ROWS), 0);
		rc_ok(rt_optim_init(&co[k], &m.s, c[k].n_params, &err));
		rc_ok(rt_gpu_stage_init(&g[k], &c[k], tf32, stream, &err));
		rc_ok(rt_gpu_acts_init(&ga[k], &g[k], MAX_ROWS, &err));
		rc_ok(rt_gpu_optim_init(&go[k], &m.s, g[k].n_params, &err));
		log.snap[k] = dmalloc(g[k].n_params * sizeof(float));
		/* the copy is the CPU's initialisation, bit for bit */
		assert_int_equal(g[k].n_params, c[k].n_params);
		{
			float *p = xmalloc(c[k].n_params * sizeof(float));

			rc_ok(rt_gpu_stage_params_to_host(&g[k], p, &err));
			cuda_ok(cudaStreamSynchronize(stream));
			check_bitwise("initial params", p, c[k].params, c[k].n_params);
			free(p);
		}
	}
	rc_ok(rt_gpu_xent_zero(acc, stream, &err));

	for (mb = 0; mb < 2; mb++) {
		const int rows = rows_of[mb], off = mb ? rows_of[0] : 0;
		const float *cy = x + (size_t)off * 33, *gy = cy;
		float *got;

		/* forward: the CPU chain and the GPU chain (host input on stage 0) */
		for (k = 0; k < STAGES; k++) {
			assert_int_equal(rt_stage_forward(&c[k], &ca[k], cy, rows, &cy), 0);
			rc_ok(rt_gpu_stage_forward(&g[k], &ga[k], gy, rows, &gy, &err));
		}
		got = xmalloc((size_t)rows * 10 * sizeof(float));
		from_dev(got, gy, (size_t)rows * 10 * sizeof(float));
		check_array("logits", got, cy, (size_t)rows * 10, tol);
		free(got);

		loss += rt_softmax_xent(cy, y + off, rows, 10, scale, dl, &correct);
		rc_ok(rt_gpu_softmax_xent(gy, d_y + off, rows, 10, scale, d_dl, acc, stream, &err));

		/* backward, last stage first; the second (last) micro-batch
		 * snapshots each layer's gradients on the comm stream */
		log.snapshot = mb == 1;
		for (k = STAGES - 1; k >= 0; k--) {
			float *gdx = k > 0 ? d_dx : NULL;

			assert_int_equal(rt_stage_backward(&c[k], &ca[k], k == STAGES - 1 ? dl : buf,
							   k > 0 ? cdx : NULL, NULL, NULL), 0);
			log.k = k;
			rc_ok(rt_gpu_stage_backward(&g[k], &ga[k], k == STAGES - 1 ? d_dl : d_dx,
						    gdx, on_layer_done, &log, &err));
			if (k > 0) {
				/* dx of this stage is dy of the previous one */
				got = xmalloc((size_t)rows * c[k].in * sizeof(float));
				from_dev(got, d_dx, (size_t)rows * c[k].in * sizeof(float));
				check_array("dx", got, cdx, (size_t)rows * c[k].in, tol);
				free(got);
				memcpy(buf, cdx, (size_t)rows * c[k].in * sizeof(float));
				/* the GPU's dx must not be overwritten by the next backward
				 * before use: it is its dy, consumed in order on the stream */
			}
		}
	}
	rc_ok(rt_gpu_xent_fetch(acc, &sums, stream, &err));
	cuda_ok(cudaStreamSynchronize(stream));
	assert_close(sums.loss, loss, tol * fabs(loss));
	if (!tf32)
		assert_int_equal(sums.correct, correct);
	else /* TF32's 1e-3 may flip the argmax of a row with two near-equal logits */
		assert_true(llabs((long long)sums.correct - (long long)correct) <= 3);

	/* layer_done: every layer of each stage, last first, once per backward */
	for (k = 0; k < STAGES; k++) {
		assert_int_equal(log.n[k], 2 * c[k].n_blocks);
		for (i = 0; i < log.n[k]; i++)
			assert_int_equal(log.calls[k][i], c[k].n_blocks - 1 - i % c[k].n_blocks);
	}

	/* gradients, layer by layer, and the comm stream's snapshot of them */
	cuda_ok(cudaStreamSynchronize(log.comm));
	for (k = 0; k < STAGES; k++) {
		float *got = xmalloc(c[k].n_params * sizeof(float));
		float *snap = xmalloc(c[k].n_params * sizeof(float));

		from_dev(got, g[k].grads, c[k].n_params * sizeof(float));
		from_dev(snap, log.snap[k], c[k].n_params * sizeof(float));
		check_bitwise("grads seen after the layer's event", snap, got, c[k].n_params);
		for (l = 0; l < c[k].n_blocks; l++) {
			const struct rt_layer ly_v = rt_mlp_layer(&c[k], l), *ly = &ly_v;
			size_t nw = (size_t)ly->out * ly->in;

			check_array("dW", got + ly->offset, ly->dw, nw, tol);
			check_array("db", got + ly->offset + nw, ly->db, (size_t)ly->out, tol);
		}
		free(snap);
		free(got);
	}

	/* one SGD step on both, zero the gradients, and the next forward */
	for (k = 0; k < STAGES; k++) {
		float *got = xmalloc(c[k].n_params * sizeof(float));

		rt_optim_step(&co[k], c[k].params, c[k].grads, c[k].n_params, 0.1);
		rt_stage_zero_grads(&c[k]);
		rc_ok(rt_gpu_optim_step(&go[k], g[k].params, g[k].grads, 0.1, stream, &err));
		rc_ok(rt_gpu_stage_zero_grads(&g[k], &err));
		assert_int_equal(go[k].host.step, co[k].step);
		from_dev(got, g[k].params, c[k].n_params * sizeof(float));
		check_array("params after a step", got, c[k].params, c[k].n_params, tol);
		from_dev(got, g[k].grads, c[k].n_params * sizeof(float));
		for (i = 0; i < (int)c[k].n_params; i++)
			assert_true(got[i] == 0.0f);
		rc_ok(rt_gpu_optim_to_host(&go[k], stream, &err));
		check_array("momentum", go[k].host.m, co[k].m, c[k].n_params, tol);
		free(got);
	}
	{
		const float *cy = x, *gy = x;
		float *got = xmalloc((size_t)MAX_ROWS * 10 * sizeof(float));

		for (k = 0; k < STAGES; k++) {
			assert_int_equal(rt_stage_forward(&c[k], &ca[k], cy, MAX_ROWS, &cy), 0);
			rc_ok(rt_gpu_stage_forward(&g[k], &ga[k], gy, MAX_ROWS, &gy, &err));
		}
		from_dev(got, gy, (size_t)MAX_ROWS * 10 * sizeof(float));
		check_array("logits after a step", got, cy, (size_t)MAX_ROWS * 10, tol);
		free(got);
	}

	/* rows = 0: no work, but layer_done still reports every layer */
	memset(&log.n, 0, sizeof(log.n));
	log.snapshot = false;
	for (k = STAGES - 1; k >= 0; k--) {
		const float *gy;

		log.k = k;
		rc_ok(rt_gpu_stage_forward(&g[k], &ga[k], d_dx, 0, &gy, &err));
		rc_ok(rt_gpu_stage_backward(&g[k], &ga[k], d_dl, k ? d_dx : NULL, on_layer_done,
					    &log, &err));
		assert_int_equal(log.n[k], g[k].n_layers);
	}
	/* activations of another stage are refused */
	assert_int_equal(rt_gpu_stage_forward(&g[0], &ga[1], x, 1, NULL, &err), -EINVAL);

	for (k = 0; k < STAGES; k++) {
		cudaFree(log.snap[k]);
		rt_gpu_optim_free(&go[k]);
		rt_gpu_acts_free(&ga[k]);
		rt_gpu_stage_free(&g[k]);
		rt_optim_free(&co[k]);
		rt_acts_free(&ca[k]);
		rt_stage_free(&c[k]);
	}
	cuda_ok(cudaStreamDestroy(log.comm));
	cudaFree(d_y);
	cudaFree(d_dx);
	cudaFree(d_dl);
	cudaFree(acc);
	free(cdx);
	free(dl);
	free(buf);
	free(y);
	free(x);
}

static void test_stage_relu(void **state) { (void)state; check_stage("relu", false, 1e-5); }
static void test_stage_gelu(void **state) { (void)state; check_stage("gelu", false, 1e-5); }
static void test_stage_tanh(void **state) { (void)state; check_stage("tanh", false, 1e-5); }
static void test_stage_tf32(void **state) { (void)state; check_stage("gelu", true, 5e-3); }

/* --- main --- */

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_act_relu),
		cmocka_unit_test(test_act_gelu),
		cmocka_unit_test(test_act_tanh),
		cmocka_unit_test(test_act_bad),
		cmocka_unit_test(test_bias),
		cmocka_unit_test(test_softmax_xent),
		cmocka_unit_test(test_sgd),
		cmocka_unit_test(test_adamw),
		cmocka_unit_test(test_norm),
		cmocka_unit_test(test_stage_relu),
		cmocka_unit_test(test_stage_gelu),
		cmocka_unit_test(test_stage_tanh),
		cmocka_unit_test(test_stage_tf32),
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
	if (cudaStreamCreate(&stream) != cudaSuccess) {
		printf("cannot create a CUDA stream: skipped\n");
		return 77;
	}
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	cudaStreamDestroy(stream);
	return rc;
}
