/*
 * test_gpu_kernels.c - the GPU path's kernels (runtime/gpu/kernels.h)
 * against the CPU implementation they mirror (runtime/kernels/kernels.h,
 * optim.h), on random data. Whole models on the GPU through the device
 * seam: test_cuda_device.c.
 *
 * Without a visible GPU the program says so and exits 77, which ctest counts
 * as skipped (SKIP_RETURN_CODE), never as passed.
 *
 * Tolerances, and why:
 *   - bitwise: ReLU, GELU forward and backward, bias broadcast, SGD,
 *     AdamW, scaling and clipping. The kernels perform the
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
 *   - the bias gradient (float sums in another fixed order): both sums'
 *     rounding bound, (rows + 32) x 6e-8 x the column's sum of magnitudes,
 *     and the same bits run to run;
 *   - loss sums and sums of squares (double, other order): 1e-12 relative;
 *     dlogits (double, then rounded to float): 1e-6 relative (1 ulp of a
 *     float where the two doubles straddle a rounding boundary) plus
 *     1e-14 grad_scale (p - 1 cancels for a probability close to 1, where
 *     a few double ulps of p are all that differ).
 *
 * Sections: helpers, activations, bias, softmax cross-entropy, optimizers,
 * gradient norm, main.
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
#include "runtime/kernels/kernels.h"
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

	/* in place (y == x, dx == dy), as the MLP uses them */
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
	float *db0 = randn((size_t)out, 1.0f, 23), bound[77];
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

	/* the CPU's bias gradient: rt_linear_backward with only db wanted;
	 * the GPU's sums in another fixed order, so within both sums' rounding
	 * bound: (rows + 32) ulp-halves of the column's sum of magnitudes */
	for (r = 0; r < out; r++) {
		double mag = fabs(db[r]);
		int k;

		for (k = 0; k < rows; k++)
			mag += fabs(dy[(size_t)k * out + r]);
		bound[r] = (rows + 32) * 6e-8 * mag;
	}
	rt_linear_backward(NULL, NULL, dy, NULL, NULL, db, rows, 1, out, true);
	rc_ok(rt_gpu_bias_grad(d_dy, d_db, rows, out, stream, &err));
	rc_ok(rt_gpu_bias_grad(d_dy, d_db, 0, out, stream, &err)); /* rows = 0: nothing */
	from_dev(got, d_db, out * sizeof(float));
	for (r = 0; r < out; r++)
		assert_close(got[r], db[r], bound[r]);
	/* and the same bits on a second run */
	cuda_ok(cudaMemcpy(d_db, db0, out * sizeof(float), cudaMemcpyHostToDevice));
	rc_ok(rt_gpu_bias_grad(d_dy, d_db, rows, out, stream, &err));
	from_dev(want, d_db, out * sizeof(float));
	cuda_ok(cudaMemcpy(d_db, db0, out * sizeof(float), cudaMemcpyHostToDevice));
	rc_ok(rt_gpu_bias_grad(d_dy, d_db, rows, out, stream, &err));
	from_dev(got, d_db, out * sizeof(float));
	check_bitwise("bias_grad run to run", got, want, (size_t)out);

	cudaFree(d_y);
	cudaFree(d_db);
	cudaFree(d_dy);
	cudaFree(d_b);
	free(got);
	free(want);
	free(db);
	free(db0);
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
