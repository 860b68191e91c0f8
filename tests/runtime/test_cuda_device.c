/*
 * test_cuda_device.c - the CUDA device of the seam (runtime/gpu/
 * cuda_device.h) against the CPU device (runtime/model/device.h), through
 * the model interface: a whole MLP (three activations, float32 and TF32)
 * and a tiny GPT, each built on both devices from the same spec; the
 * initial parameters, a forward, the loss, a backward, the gradient's sum
 * of squares and one clipped update (SGD with momentum and weight decay,
 * the model's no-decay tensors exempt) compared.
 *
 * Without a visible GPU the program says so and exits 77, which ctest
 * counts as skipped (SKIP_RETURN_CODE), never as passed.
 *
 * Tolerances, and why: the initial parameters are bitwise (made on the
 * host, copied); in float32 the products differ from OpenBLAS's only by
 * their summation order, LayerNorm's and the softmaxes' row sums by theirs:
 * max |got - want| <= 1e-5 max |want| over each array (logits, dlogits, the
 * input gradient, the gradients, the parameters after the update) and
 * 1e-5 relative on the loss and the sum of squares; with TF32 (inputs of
 * products rounded to 10 mantissa bits) 5e-3. The update is SGD's, linear
 * in the gradient, so that it keeps the gradients' tolerance: AdamW's
 * first step moves an element by about lr sign(g), which turns rounding
 * noise in a gradient that is zero in exact arithmetic (the attention's
 * key bias) or a sign flipped by TF32 into a difference of lr. AdamW's
 * element math on the GPU is test_gpu_kernels' (bitwise).
 *
 * Sections: helpers, the comparison, the models, main.
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

#include "runtime/gpu/cuda_device.h"
#include "runtime/gpu/gpu.h"
#include "runtime/kernels/kernels.h"
#include "runtime/model/device.h"
#include "runtime/model/model.h"
#include "runtime/model/optim.h"
#include "base/rng.h"

#define ROWS 6

/* --- helpers --- */

#define rc_ok(call) do { \
	int rc_ = (call); \
	if (rc_ != 0) \
		fail_msg("%s = %d: %s", #call, rc_, err.msg); \
} while (0)

static void *xmalloc(size_t bytes)
{
	void *p = calloc(1, bytes ? bytes : 1);

	assert_non_null(p);
	return p;
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

static void check_rel(const char *what, double got, double want, double tol)
{
	if (!(fabs(got - want) <= tol * fabs(want)))
		fail_msg("%s = %.17g, want %.17g (relative tolerance %.3g)", what, got, want, tol);
}

/* a device array's contents, on the host (caller frees) */
static float *fetch(struct rt_dev *d, const float *p, size_t n)
{
	float *h = xmalloc(n * sizeof(float));

	rt_dev_get(d, h, p, n * sizeof(float));
	return h;
}

/* a host array on device d (or itself on a host device) */
static void *place(struct rt_dev *d, const void *h, size_t bytes)
{
	struct dt_err err = { 0 };
	void *p = NULL;

	rc_ok(rt_dev_alloc(d, bytes, "a test array", &p, &err));
	rt_dev_put(d, p, h, bytes);
	return p;
}

static struct rt_dev gpu;

static void open_gpu(bool tf32, bool bf16)
{
	struct rt_gpu_device g = { 0 };
	struct dt_err err = { 0 };

	if (cudaSetDevice(0) != cudaSuccess)
		fail_msg("cudaSetDevice(0) failed");
	snprintf(g.name, sizeof(g.name), "test");
	g.count = 1;
	rc_ok(rt_gpu_dev_open(&gpu, &g, tf32, bf16, &err));
}

/* --- the comparison --- */

/* One device's run: stage, acts, inputs; the results fetched to the host. */
struct side {
	struct rt_dev *d;
	struct rt_stage st;
	struct rt_acts acts;
	struct rt_optim opt;
	float *x, *dy, *dx;  /* device */
	int32_t *labels;     /* device */
	struct rt_optim opt2;  /* the sharded update's: its pieces' state only */
	float *params0, *logits, *dlogits, *dxh, *grads, *params1, *params2; /* host */
	double loss, sumsq, sumsq2;
	int64_t correct;
};

static void exempt_in(const struct rt_stage *st, struct rt_optim *o)
{
	struct rt_span sp[64];
	int i, k = 0;

	for (i = 0; i < st->n_tensors && k < 64; i++)
		if (!st->tensors[i].decay)
			sp[k++] = (struct rt_span){ st->tensors[i].offset, st->tensors[i].n };
	assert_int_equal(rt_optim_no_decay(o, sp, k), 0);
}

static void exempt(struct side *sd)
{
	exempt_in(&sd->st, &sd->opt);
}

/* The sharded optimizer's update (optim_pieces) of the later half of each
 * tensor's rows, from a gradient at the tensor's start (the backward's
 * gradient of those rows, put there), with a state of the pieces only. */
static void pieces_update(struct side *sd, const struct spec *s)
{
	struct rt_optim_piece pieces[64];
	struct dt_err err = { 0 };
	struct rt_dev *d = sd->d;
	size_t at = 0;
	int i, k = 0;
	float *m, *v = NULL;

	for (i = 0; i < sd->st.n_tensors && k < 64; i++) {
		const struct rt_tensor *t = &sd->st.tensors[i];
		size_t row = t->n / (size_t)t->shape[0], r0 = (size_t)t->shape[0] / 2;
		struct rt_optim_piece p = { t->offset + r0 * row, t->n - r0 * row, t->offset, at };

		rt_dev_put(d, sd->st.grads + p.grad, sd->grads + p.first, p.count * sizeof(float));
		pieces[k++] = p;
		at += p.count;
	}
	rc_ok(rt_optim_init(&sd->opt2, s, at, &err));
	exempt_in(&sd->st, &sd->opt2);
	if (!d->host) {
		rc_ok(rt_dev_alloc(d, at * sizeof(float), "m", &m, &err));
		if (sd->opt2.v)
			rc_ok(rt_dev_alloc(d, at * sizeof(float), "v", &v, &err));
		rt_optim_adopt(&sd->opt2, m, v);
	}
	sd->sumsq2 = d->ops->optim_pieces(d, &sd->opt2, sd->st.params, sd->st.grads, pieces, k, 0.02, 0.25f);
	sd->params2 = fetch(d, sd->st.params, sd->st.n_params);
	rc_ok(rt_dev_sync(d, &err));
	if (!d->host) {
		m = sd->opt2.m;
		v = sd->opt2.v;
		rt_optim_adopt(&sd->opt2, NULL, NULL);
		rt_dev_free(d, m);
		rt_dev_free(d, v);
	}
	rt_optim_free(&sd->opt2);
}

static void run_side(struct side *sd, struct rt_dev *d, const struct spec *s, const float *x,
		     const int32_t *labels, int labels_per_row)
{
	const int first[2] = { 0, rt_model_blocks(s) };
	struct dt_err err = { 0 };
	struct rt_span all;
	const float *y = NULL;
	size_t nin, nout, n;
	int classes;
	float *m, *v;

	memset(sd, 0, sizeof(*sd));
	sd->d = d;
	rc_ok(rt_stage_init_on(&sd->st, d, s, 0, 1, first, &err));
	assert_int_equal(rt_acts_init(&sd->acts, &sd->st, ROWS), 0);
	n = sd->st.n_params;
	nin = (size_t)ROWS * (size_t)sd->st.in;
	nout = (size_t)ROWS * (size_t)sd->st.out;
	classes = sd->st.out / labels_per_row;
	sd->params0 = fetch(d, sd->st.params, n);
	sd->x = place(d, x, nin * sizeof(float));
	sd->labels = place(d, labels, (size_t)ROWS * (size_t)labels_per_row * sizeof(int32_t));
	rc_ok(rt_dev_alloc(d, nout * sizeof(float), "dy", &sd->dy, &err));
	rc_ok(rt_dev_alloc(d, nin * sizeof(float), "dx", &sd->dx, &err));

	assert_int_equal(rt_stage_forward(&sd->st, &sd->acts, sd->x, ROWS, &y), 0);
	sd->logits = fetch(d, y, nout);
	d->ops->loss_zero(d);
	d->ops->loss_add(d, y, sd->labels, ROWS * labels_per_row, classes, 1.0f / (float)ROWS, sd->dy);
	rc_ok(d->ops->loss_fetch(d, &sd->loss, &sd->correct, &err));
	sd->dlogits = fetch(d, sd->dy, nout);
	assert_int_equal(rt_stage_backward(&sd->st, &sd->acts, sd->dy, sd->dx, NULL, NULL), 0);
	rc_ok(rt_dev_sync(d, &err));
	sd->dxh = fetch(d, sd->dx, nin);
	sd->grads = fetch(d, sd->st.grads, n);
	sd->sumsq = d->ops->sumsq(d, sd->st.grads, n);

	/* one update, clipped by half (its state on the device), with the
	 * model's tensors without weight decay exempt as the trainer exempts
	 * them */
	rc_ok(rt_optim_init(&sd->opt, s, n, &err));
	exempt(sd);
	if (!d->host) {
		rc_ok(rt_dev_alloc(d, n * sizeof(float), "m", &m, &err));
		v = NULL;
		if (sd->opt.v)
			rc_ok(rt_dev_alloc(d, n * sizeof(float), "v", &v, &err));
		rt_optim_adopt(&sd->opt, m, v);
	}
	all = (struct rt_span){ 0, n };
	check_rel("the update's sum of squares",
		  d->ops->optim_spans(d, &sd->opt, sd->st.params, sd->st.grads, &all, 1, 0.01, 0.5f),
		  sd->sumsq, 1e-12);
	sd->params1 = fetch(d, sd->st.params, n);
	rc_ok(rt_dev_sync(d, &err));
	pieces_update(sd, s);
}

static void free_side(struct side *sd)
{
	float *m = sd->opt.m, *v = sd->opt.v;

	if (!sd->d->host) {
		rt_optim_adopt(&sd->opt, NULL, NULL);
		rt_dev_free(sd->d, m);
		rt_dev_free(sd->d, v);
	}
	rt_optim_free(&sd->opt);
	rt_dev_free(sd->d, sd->x);
	rt_dev_free(sd->d, sd->labels);
	rt_dev_free(sd->d, sd->dy);
	rt_dev_free(sd->d, sd->dx);
	rt_acts_free(&sd->acts);
	rt_stage_free(&sd->st);
	free(sd->params0);
	free(sd->logits);
	free(sd->dlogits);
	free(sd->dxh);
	free(sd->grads);
	free(sd->params1);
	free(sd->params2);
}

/* The spec's model on the CPU and on the GPU, compared. x [ROWS][in],
 * labels [ROWS][labels_per_row]. */
static void compare(const struct spec *s, const float *x, const int32_t *labels,
		    int labels_per_row, bool tf32, bool bf16, double tol)
{
	struct rt_dev cpu_bf16;
	struct dt_err err = { 0 };
	struct side c, g;
	size_t n;

	open_gpu(tf32, bf16);
	if (bf16)
		rc_ok(rt_dev_cpu_bf16_init(&cpu_bf16, 1, &err));
	run_side(&c, bf16 ? &cpu_bf16 : rt_dev_cpu(), s, x, labels, labels_per_row);
	run_side(&g, &gpu, s, x, labels, labels_per_row);
	n = c.st.n_params;
	assert_memory_equal(g.params0, c.params0, n * sizeof(float));
	check_array("logits", g.logits, c.logits, (size_t)ROWS * (size_t)c.st.out, tol);
	check_rel("loss", g.loss, c.loss, tol);
	check_array("dlogits", g.dlogits, c.dlogits, (size_t)ROWS * (size_t)c.st.out, tol);
	check_array("dx", g.dxh, c.dxh, (size_t)ROWS * (size_t)c.st.in, tol);
	check_array("gradients", g.grads, c.grads, n, tol);
	check_rel("sum of squares", g.sumsq, c.sumsq, tol);
	check_array("parameters after the update", g.params1, c.params1, n, tol);
	check_rel("the sharded update's sum of squares", g.sumsq2, c.sumsq2, tol);
	check_array("parameters after the sharded update", g.params2, c.params2, n, tol);
	free_side(&c);
	free_side(&g);
	rt_dev_close(&gpu);
	if (bf16)
		rt_dev_close(&cpu_bf16);
}

/* --- the models --- */

static float *randn(size_t n, uint64_t seed)
{
	float *p = xmalloc(n * sizeof(*p));
	struct dt_rng r;
	size_t i;

	dt_rng_seed(&r, seed, 3);
	for (i = 0; i < n; i++)
		p[i] = dt_rng_normal(&r);
	return p;
}

/* SGD, momentum 0.9 and weight decay 0.01 (train.optimizer) */
static void sgd(struct spec *s)
{
	s->train.optimizer.type = "sgd";
	s->train.optimizer.lr = 0.1;
	s->train.optimizer.momentum = 0.9;
	s->train.optimizer.weight_decay = 0.01;
}

static void mlp(const char *act, bool tf32, bool bf16, double tol)
{
	long hidden[2] = { 48, 40 };
	int32_t labels[ROWS] = { 0, 3, 9, 4, 4, 7 };
	struct spec s;
	float *x = randn((size_t)ROWS * 33, 11);

	memset(&s, 0, sizeof(s));
	s.model.type = "mlp";
	s.model.inputs = 33;
	s.model.hidden.v = hidden;
	s.model.hidden.n = 2;
	s.model.outputs = 10;
	s.model.activation = (char *)act;
	s.model.init_seed = 7;
	sgd(&s);
	compare(&s, x, labels, 1, tf32, bf16, tol);
	free(x);
}

static void test_mlp_relu(void **state) { (void)state; mlp("relu", false, false, 1e-5); }
static void test_mlp_gelu(void **state) { (void)state; mlp("gelu", false, false, 1e-5); }
static void test_mlp_tanh(void **state) { (void)state; mlp("tanh", false, false, 1e-5); }
static void test_mlp_tf32(void **state) { (void)state; mlp("gelu", true, false, 5e-3); }
/* bf16 products on both (oneDNN, cuBLAS): the same bf16 inputs, float32
 * sums in other orders, and the roundings to bf16 that flips (kernels/
 * bf16.h: a flipped input moves a term by 2^-8), as TF32's tolerance */
static void test_mlp_bf16(void **state) { (void)state; mlp("gelu", false, true, 5e-3); }

/* a GPT of 2 blocks, 2 heads, width 16, context 8, vocabulary 40: the
 * embedding, the blocks and the tied head in one stage; token ids in
 * float slots as the data reader gives them */
static void test_gpt(void **state)
{
	enum { T = 8, V = 40 };
	float x[ROWS * T];
	int32_t labels[ROWS * T];
	struct spec s;
	struct dt_rng r;
	int i;

	(void)state;
	memset(&s, 0, sizeof(s));
	s.model.type = "gpt";
	s.model.vocab_size = V;
	s.model.context = T;
	s.model.layers = 2;
	s.model.heads = 2;
	s.model.embd = 16;
	s.model.init_seed = 5;
	sgd(&s);
	dt_rng_seed(&r, 9, 1);
	for (i = 0; i < ROWS * T; i++) {
		x[i] = (float)dt_rng_below(&r, V);
		labels[i] = (int32_t)dt_rng_below(&r, V);
	}
	compare(&s, x, labels, T, false, false, 1e-5);
}

/* --- main --- */

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mlp_relu),
		cmocka_unit_test(test_mlp_gelu),
		cmocka_unit_test(test_mlp_tanh),
		cmocka_unit_test(test_mlp_tf32),
		cmocka_unit_test(test_mlp_bf16),
		cmocka_unit_test(test_gpt),
	};
	cudaError_t e;
	int n = 0;

	e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n < 1) {
		printf("no GPU visible (%s): skipped\n",
		       e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found 0 devices");
		return 77;
	}
	rt_blas_threads(1); /* the CPU reference is then deterministic */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
