/*
 * test_model.c - the MLP of runtime/model/model.h: parameter counts, the stage
 * split (exact optimum against brute force, the documented examples, a
 * 100M-parameter model), initialisation independent of the split, forward
 * and backward of split models equal to the whole one, a finite-difference
 * gradient check of every activation, gradient accumulation over
 * micro-batches, the layer_done order, and the errors.
 *
 * Sections: helpers, counts and split, initialisation, forward and
 * backward, gradient check, errors, main.
 */
#include <errno.h>
#include <pthread.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/model/mlp.h"
#include "base/rng.h"

/* --- helpers --- */

/* |got - want| <= tol, with both values in the failure message */
#define assert_close(got, want, tol) do { \
	double g_ = (got), w_ = (want), t_ = (tol); \
	if (!(fabs(g_ - w_) <= t_)) \
		fail_msg("%s = %.9g, want %.9g (tolerance %.3g)", #got, g_, w_, t_); \
} while (0)

/* A spec holding only the model, built by hand (not spec_free'd). */
struct mlp {
	struct spec s;
	long hidden[64];
};

static void mlp_set(struct mlp *m, long inputs, const long *hidden, size_t n, long outputs,
		    const char *act, long seed)
{
	memset(m, 0, sizeof(*m));
	assert_true(n <= 64);
	if (n)
		memcpy(m->hidden, hidden, n * sizeof(*hidden));
	m->s.model.type = "mlp";
	m->s.model.inputs = inputs;
	m->s.model.hidden.v = m->hidden;
	m->s.model.hidden.n = n;
	m->s.model.outputs = outputs;
	m->s.model.activation = (char *)act;
	m->s.model.init_seed = seed;
}

static void split_ok(const struct spec *s, int stages, int *first)
{
	struct dt_err err = { 0 };

	assert_int_equal(rt_stage_split(s, stages, first, &err), 0);
	assert_int_equal(err.count, 0);
}

static void stage_ok(struct rt_stage *st, const struct spec *s, int stage, int n, const int *first)
{
	struct dt_err err = { 0 };

	assert_int_equal(rt_stage_init(st, s, stage, n, first, &err), 0);
	assert_int_equal(err.count, 0);
}

static void fill_normal(float *p, size_t n, uint64_t seed)
{
	struct dt_rng r;
	size_t i;

	dt_rng_seed(&r, seed, 99);
	for (i = 0; i < n; i++)
		p[i] = dt_rng_normal(&r);
}

/* A whole model as a chain of stages, for forward/backward through all of
 * them (the pipeline without MPI). */
struct chain {
	int n;
	int first[16];
	struct rt_stage st[16];
	struct rt_acts acts[16];
};

static void chain_init(struct chain *c, const struct spec *s, int stages, int max_rows)
{
	int k;

	memset(c, 0, sizeof(*c));
	c->n = stages;
	split_ok(s, stages, c->first);
	for (k = 0; k < stages; k++) {
		stage_ok(&c->st[k], s, k, stages, c->first);
		assert_int_equal(rt_acts_init(&c->acts[k], &c->st[k], max_rows), 0);
	}
}

static void chain_free(struct chain *c)
{
	int k;

	for (k = 0; k < c->n; k++) {
		rt_acts_free(&c->acts[k]);
		rt_stage_free(&c->st[k]);
	}
}

/* forward through every stage; returns the logits (in the last acts) */
static const float *chain_forward(struct chain *c, const float *x, int rows)
{
	const float *y = x;
	int k;

	for (k = 0; k < c->n; k++)
		assert_int_equal(rt_stage_forward(&c->st[k], &c->acts[k], y, rows, &y), 0);
	return y;
}

/* backward from dlogits (which the passes may overwrite) through every
 * stage; dx (or NULL) of the model input */
static void chain_backward(struct chain *c, float *dlogits, float *dx, int rows)
{
	float *buf[2] = { NULL, NULL };
	float *dy = dlogits;
	int k;

	for (k = c->n - 1; k >= 0; k--) {
		float *out = dx;

		if (k > 0) {
			buf[k & 1] = realloc(buf[k & 1], (size_t)rows * c->st[k].in * sizeof(float));
			assert_non_null(buf[k & 1]);
			out = buf[k & 1];
		}
		assert_int_equal(rt_stage_backward(&c->st[k], &c->acts[k], dy, out, NULL, NULL), 0);
		dy = out;
	}
	free(buf[0]);
	free(buf[1]);
}

/* the layer of global index l, wherever it lives in the chain */
static struct rt_layer chain_layer(const struct chain *c, int l)
{
	struct rt_layer none = { 0 };
	int k;

	for (k = 0; k < c->n; k++)
		if (l >= c->first[k] && l < c->first[k + 1])
			return rt_mlp_layer(&c->st[k], l - c->first[k]);
	fail_msg("layer %d not in the chain", l);
	return none;
}

/* --- counts and split --- */

static const long h512[] = { 512, 512 };
static const long h5[] = { 30, 25, 40, 15 }; /* 20 - h5 - 10: 5 layers */

static void test_counts(void **state)
{
	struct mlp m;

	(void)state;
	mlp_set(&m, 784, h512, 2, 10, "relu", 1);
	assert_int_equal(rt_mlp_layers(&m.s), 3);
	assert_int_equal(rt_mlp_width(&m.s, 0), 784);
	assert_int_equal(rt_mlp_width(&m.s, 2), 512);
	assert_int_equal(rt_mlp_width(&m.s, 3), 10);
	assert_int_equal(rt_mlp_width(&m.s, 4), -1);
	assert_int_equal(rt_block_params(&m.s, 0), 784 * 512 + 512);
	assert_int_equal(rt_block_params(&m.s, 1), 512 * 512 + 512);
	assert_int_equal(rt_block_params(&m.s, 2), 512 * 10 + 10);
	assert_int_equal(rt_block_params(&m.s, 3), 0);
	assert_int_equal(rt_model_params(&m.s), 669706);
	/* a linear model: one layer */
	mlp_set(&m, 784, NULL, 0, 10, "relu", 1);
	assert_int_equal(rt_mlp_layers(&m.s), 1);
	assert_int_equal(rt_model_params(&m.s), 7850);
}

static void test_split_documented(void **state)
{
	int first[4], want2[] = { 0, 1, 3 }, want3[] = { 0, 1, 2, 3 };
	struct mlp m;

	(void)state;
	mlp_set(&m, 784, h512, 2, 10, "relu", 1);
	split_ok(&m.s, 1, first);
	assert_int_equal(first[0], 0);
	assert_int_equal(first[1], 3);
	/* 401920 | 262656 + 5130 = 267786 */
	split_ok(&m.s, 2, first);
	assert_memory_equal(first, want2, sizeof(want2));
	assert_int_equal(rt_split_params(&m.s, first, 0), 401920);
	assert_int_equal(rt_split_params(&m.s, first, 1), 267786);
	split_ok(&m.s, 3, first);
	assert_memory_equal(first, want3, sizeof(want3));
	/* the demo's 784-256-128-10 over 2 stages: 200960 | 32896 + 1290 */
	{
		const long h[] = { 256, 128 };

		mlp_set(&m, 784, h, 2, 10, "relu", 1);
		split_ok(&m.s, 2, first);
		assert_memory_equal(first, want2, sizeof(want2));
	}
}

/* parallel.stage_layers is the split when set */
static void test_split_explicit(void **state)
{
	long layers[3] = { 3, 1, 1 }, bad[3] = { 2, 0, 3 }, few[3] = { 1, 1, 1 };
	struct dt_err err = { 0 };
	int first[4], want[] = { 0, 3, 4, 5 };
	struct mlp m;

	(void)state;
	mlp_set(&m, 20, h5, 4, 10, "relu", 1);
	m.s.parallel.stage_layers.v = layers;
	m.s.parallel.stage_layers.n = 3;
	split_ok(&m.s, 3, first);
	assert_memory_equal(first, want, sizeof(want));
	assert_int_equal(rt_stage_split(&m.s, 2, first, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "parallel.stage_layers: lists 3 stages but the pipeline has 2"));
	dt_err_clear(&err);
	layers[2] = 2; /* 6 layers */
	assert_int_equal(rt_stage_split(&m.s, 3, first, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "the first 3 stages already have more than the model's 5 layers"));
	dt_err_clear(&err);
	layers[2] = 0;
	assert_int_equal(rt_stage_split(&m.s, 3, first, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "parallel.stage_layers[2]: every stage needs at least one layer (got 0)"));
	dt_err_clear(&err);
	m.s.parallel.stage_layers.v = bad;
	assert_int_equal(rt_stage_split(&m.s, 3, first, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "parallel.stage_layers[1]"));
	dt_err_clear(&err);
	m.s.parallel.stage_layers.v = few; /* 3 of 5 layers */
	assert_int_equal(rt_stage_split(&m.s, 3, first, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "the stages have 3 of the model's 5 layers"));
}

/* exact optimum: brute force over every split of small random models */
struct brute {
	const size_t *cost;
	int n, k;
	uint64_t best_max, best_sq;
};

static void brute_rec(struct brute *b, int stage, int start, uint64_t mx, uint64_t sq)
{
	uint64_t run = 0;
	int end;

	if (stage == b->k - 1) { /* the last stage takes the rest */
		for (end = start; end < b->n; end++)
			run += b->cost[end];
		mx = run > mx ? run : mx;
		sq += run * run;
		if (mx < b->best_max || (mx == b->best_max && sq < b->best_sq)) {
			b->best_max = mx;
			b->best_sq = sq;
		}
		return;
	}
	for (end = start; end < b->n - (b->k - stage - 1); end++) {
		run += b->cost[end];
		brute_rec(b, stage + 1, end + 1, run > mx ? run : mx, sq + run * run);
	}
}

static void test_split_optimal(void **state)
{
	size_t cost[10];
	struct dt_rng r;
	int trial;

	(void)state;
	dt_rng_seed(&r, 11, 0);
	for (trial = 0; trial < 300; trial++) {
		int n_hidden = (int)dt_rng_below(&r, 9), n = n_hidden + 1, k, i, again[11], first[11];
		long hidden[9];
		struct mlp m;

		for (i = 0; i < n_hidden; i++)
			hidden[i] = 1 + (long)dt_rng_below(&r, trial % 2 ? 300 : 30);
		mlp_set(&m, 1 + (long)dt_rng_below(&r, 300), hidden, (size_t)n_hidden,
			1 + (long)dt_rng_below(&r, 20), "relu", 1);
		for (i = 0; i < n; i++)
			cost[i] = rt_block_params(&m.s, i);
		for (k = 1; k <= n; k++) {
			struct brute b = { cost, n, k, UINT64_MAX, UINT64_MAX };
			uint64_t mx = 0, sq = 0;

			brute_rec(&b, 0, 0, 0, 0);
			split_ok(&m.s, k, first);
			assert_int_equal(first[0], 0);
			assert_int_equal(first[k], n);
			for (i = 0; i < k; i++) {
				uint64_t c = rt_split_params(&m.s, first, i);

				assert_true(first[i + 1] > first[i]); /* contiguous, >= 1 layer */
				mx = c > mx ? c : mx;
				sq += c * c;
			}
			assert_int_equal(mx, b.best_max);
			assert_int_equal(sq, b.best_sq);
			split_ok(&m.s, k, again); /* deterministic */
			assert_memory_equal(first, again, sizeof(int) * (size_t)(k + 1));
		}
	}
}

static void report_split(const char *name, const struct spec *s, int stages, int *first,
			 double *worst)
{
	double quarter = (double)rt_model_params(s) / stages;
	int k;

	split_ok(s, stages, first);
	*worst = 0;
	printf("# %s: %zu parameters, %d layers over %d stages:", name, rt_model_params(s),
	       rt_mlp_layers(s), stages);
	for (k = 0; k < stages; k++) {
		double dev = (double)rt_split_params(s, first, k) / quarter - 1.0;

		printf(" [%d..%d] %.2fM (%+.1f%%)", first[k], first[k + 1] - 1,
		       rt_split_params(s, first, k) / 1e6, 100 * dev);
		if (fabs(dev) > *worst)
			*worst = fabs(dev);
	}
	printf("\n");
}

/* 100M-parameter MLPs over 4 stages */
static void test_split_100m(void **state)
{
	long deep[24], wide[7];
	int first[5], i;
	double worst;
	struct mlp m;

	(void)state;
	/* 784 - 2048 x 24 - 10: 25 layers, 98.3M; the widths allow an even cut */
	for (i = 0; i < 24; i++)
		deep[i] = 2048;
	mlp_set(&m, 784, deep, 24, 10, "gelu", 1);
	assert_true(rt_model_params(&m.s) > 95000000);
	report_split("deep", &m.s, 4, first, &worst);
	assert_true(worst < 0.10);
	/* 784 - 4096 x 7 - 10: 8 layers, 104M, six of 16.8M each: the widths do
	 * not allow an even cut; the best bottleneck is two big layers */
	for (i = 0; i < 7; i++)
		wide[i] = 4096;
	mlp_set(&m, 784, wide, 7, 10, "gelu", 1);
	report_split("wide", &m.s, 4, first, &worst);
	{
		size_t mx = 0;

		for (i = 0; i < 4; i++)
			if (rt_split_params(&m.s, first, i) > mx)
				mx = rt_split_params(&m.s, first, i);
		assert_int_equal(mx, 2 * rt_block_params(&m.s, 1));
	}
	{
		/* every stage count is a valid split, quickly */
		for (i = 1; i <= 8; i++) {
			int f[9], k;

			split_ok(&m.s, i, f);
			for (k = 0; k < i; k++)
				assert_true(f[k + 1] > f[k]);
		}
	}
}

/* the spec's largest model, 1025 layers: valid splits at any stage count */
static void test_split_many_layers(void **state)
{
	static const int counts[] = { 1, 2, 7, 100, 512, 1024, 1025 };
	static long hidden[1024];
	static int first[1026];
	struct mlp m;
	size_t c;
	int i, k;

	(void)state;
	mlp_set(&m, 784, NULL, 0, 10, "relu", 1);
	for (i = 0; i < 1024; i++)
		hidden[i] = 1 + (i * 37) % 200;
	m.s.model.hidden.v = hidden; /* more than struct mlp holds */
	m.s.model.hidden.n = 1024;
	for (c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		size_t mx = 0, lower = (rt_model_params(&m.s) + counts[c] - 1) / counts[c];

		split_ok(&m.s, counts[c], first);
		assert_int_equal(first[0], 0);
		assert_int_equal(first[counts[c]], 1025);
		for (k = 0; k < counts[c]; k++) {
			assert_true(first[k + 1] > first[k]);
			if (rt_split_params(&m.s, first, k) > mx)
				mx = rt_split_params(&m.s, first, k);
		}
		assert_true(mx >= lower);
		if (counts[c] == 7) /* many small layers: within a layer of the mean */
			assert_true(mx <= lower + 200 * 201);
	}
}

/* --- initialisation --- */

/* layer l's parameters are bitwise the same in a 1-stage and a 3-stage split */
static void test_init_independent_of_split(void **state)
{
	struct chain one, three;
	struct mlp m;
	int l;

	(void)state;
	mlp_set(&m, 20, h5, 4, 10, "relu", 1234);
	chain_init(&one, &m.s, 1, 1);
	chain_init(&three, &m.s, 3, 1);
	assert_int_equal(one.st[0].n_params, rt_model_params(&m.s));
	for (l = 0; l < 5; l++) {
		const struct rt_layer a_v = chain_layer(&one, l), b_v = chain_layer(&three, l);
		const struct rt_layer *a = &a_v, *b = &b_v;

		assert_int_equal(a->index, l);
		assert_int_equal(b->index, l);
		assert_int_equal(a->n_params, b->n_params);
		assert_memory_equal(a->w, b->w, a->n_params * sizeof(float)); /* W and b */
	}
	/* the stage buffers: layers in order, W then b, contiguous */
	for (l = 0; l < three.n; l++) {
		const struct rt_stage *st = &three.st[l];
		size_t off = 0;
		int i;

		assert_int_equal(st->n_params, rt_split_params(&m.s, three.first, l));
		for (i = 0; i < st->n_blocks; i++) {
			const struct rt_layer ly_v = rt_mlp_layer(st, i), *ly = &ly_v;

			assert_int_equal(ly->offset, off);
			assert_ptr_equal(ly->w, st->params + off);
			assert_ptr_equal(ly->b, ly->w + (size_t)ly->out * ly->in);
			assert_ptr_equal(ly->dw, st->grads + off);
			assert_ptr_equal(ly->db, ly->dw + (size_t)ly->out * ly->in);
			assert_int_equal(ly->act, ly->index < 4);
			off += ly->n_params;
		}
		assert_int_equal(off, st->n_params);
	}
	chain_free(&three);
	chain_free(&one);
}

/* Kaiming uniform: zero biases, |w| <= bound, variance gain^2 / in; the seed matters */
static void test_init_distribution(void **state)
{
	const char *acts[] = { "relu", "gelu", "tanh" };
	const long h[] = { 400 };
	struct rt_stage st, other;
	int first[2] = { 0, 2 }, a;
	struct mlp m;

	(void)state;
	for (a = 0; a < 3; a++) {
		double gain = a == 2 ? 5.0 / 3.0 : sqrt(2.0), bound = gain * sqrt(3.0 / 300);
		double sum = 0, sum2 = 0;
		struct rt_layer ly_v;
		const struct rt_layer *ly = &ly_v;
		size_t i, nw;

		mlp_set(&m, 300, h, 1, 10, acts[a], 77);
		stage_ok(&st, &m.s, 0, 1, first);
		ly_v = rt_mlp_layer(&st, 0);
		nw = (size_t)ly->out * ly->in;
		for (i = 0; i < nw; i++) {
			assert_true(fabsf(ly->w[i]) <= bound);
			sum += ly->w[i];
			sum2 += (double)ly->w[i] * ly->w[i];
		}
		for (i = 0; i < (size_t)ly->out; i++)
			assert_true(ly->b[i] == 0.0f);
		assert_close(sum / nw, 0.0, 0.01 * bound);
		assert_close(sum2 / nw, gain * gain / 300, 0.02 * gain * gain / 300);
		/* layers differ from each other, and another init_seed changes them */
		assert_memory_not_equal(rt_mlp_layer(&st, 0).w, rt_mlp_layer(&st, 1).w, 10 * sizeof(float));
		mlp_set(&m, 300, h, 1, 10, acts[a], 78);
		stage_ok(&other, &m.s, 0, 1, first);
		assert_memory_not_equal(st.params, other.params, 64 * sizeof(float));
		rt_stage_free(&other);
		rt_stage_free(&st);
		rt_stage_free(&st); /* twice is safe */
	}
}

/* --- forward and backward --- */

/* split models compute bitwise what the whole model computes, both ways */
static void test_split_equals_whole(void **state)
{
	enum { ROWS = 16 };
	int32_t labels[ROWS];
	float x[ROWS * 20], dlogits[ROWS * 10], dx1[ROWS * 20], dxk[ROWS * 20];
	const float *y1, *yk;
	struct chain one, many;
	struct mlp m;
	int stages, l, i;

	(void)state;
	mlp_set(&m, 20, h5, 4, 10, "gelu", 5);
	fill_normal(x, ROWS * 20, 1);
	for (i = 0; i < ROWS; i++)
		labels[i] = i % 10;
	chain_init(&one, &m.s, 1, ROWS);
	y1 = chain_forward(&one, x, ROWS);
	rt_softmax_xent(y1, labels, ROWS, 10, 1.0f / ROWS, dlogits, NULL);
	chain_backward(&one, dlogits, dx1, ROWS);
	for (stages = 2; stages <= 5; stages++) {
		chain_init(&many, &m.s, stages, ROWS);
		yk = chain_forward(&many, x, ROWS);
		assert_memory_equal(y1, yk, sizeof(float) * ROWS * 10);
		chain_backward(&many, dlogits, dxk, ROWS);
		assert_memory_equal(dx1, dxk, sizeof(dx1));
		for (l = 0; l < 5; l++) {
			const struct rt_layer a_v = chain_layer(&one, l), b_v = chain_layer(&many, l);
			const struct rt_layer *a = &a_v, *b = &b_v;

			assert_memory_equal(a->dw, b->dw, a->n_params * sizeof(float));
		}
		chain_free(&many);
	}
	chain_free(&one);
}

/* --- a part of every layer (parallel.grad_sync "split") --- */

/* The blocks of rt_part_cols tile every width, in order, on cache lines;
 * the spans of rt_stage_part_spans cover every parameter exactly once. */
static void test_part_blocks(void **state)
{
	static const long hidden[] = { 70, 33, 48, 5 };
	struct rt_span spans[16];
	struct rt_stage st;
	struct mlp m;
	int width, L, k, c0, c1, end, first[2], n, i;
	unsigned char *seen;
	size_t j;

	(void)state;
	for (width = 1; width <= 200; width++)
		for (L = 1; L <= 5; L++)
			for (k = 0, end = 0; k < L; k++) {
				rt_part_cols(width, k, L, &c0, &c1);
				if (c0 != end || c1 < c0 || (c0 % 16 && c0 != width))
					fail_msg("width %d, block %d of %d: [%d, %d) after %d", width, k, L,
						 c0, c1, end);
				end = c1;
				if (k == L - 1 && end != width)
					fail_msg("width %d, %d blocks: end at %d", width, L, end);
			}
	mlp_set(&m, 20, hidden, 4, 10, "relu", 3);
	split_ok(&m.s, 1, first);
	stage_ok(&st, &m.s, 0, 1, first);
	seen = calloc(st.n_params, 1);
	assert_non_null(seen);
	for (L = 1; L <= 4; L++) {
		memset(seen, 0, st.n_params);
		for (k = 0; k < L; k++) {
			n = rt_stage_part_spans(&st, k, L, spans);
			assert_true(n <= 2 * st.n_blocks);
			for (i = 0; i < n; i++)
				for (j = spans[i].first; j < spans[i].first + spans[i].count; j++) {
					assert_true(j < st.n_params);
					seen[j]++;
				}
		}
		for (j = 0; j < st.n_params; j++)
			if (seen[j] != 1)
				fail_msg("%d blocks: parameter %zu owned %d times", L, j, seen[j]);
	}
	free(seen);
	rt_stage_free(&st);
}

/* L threads stand for the replicas of a node: each runs its block of
 * forward and backward over the same placed activations, with a pthread
 * barrier as the sync; block k's rows (its input, and the head's when cut
 * by rows) are rows * k / L .. rows * (k + 1) / L. */
struct part_run {
	pthread_barrier_t *bar;
	struct rt_stage *st;   /* shared: the blocks write their own rows of grads */
	struct rt_acts acts;   /* this "replica's" view of the shared memory */
	float *mem, *x, *dy, *dx, *logits;
	int rows, k, L, rc;
};

static int part_sync(void *ctx)
{
	int rc = pthread_barrier_wait(ctx);

	return rc == 0 || rc == PTHREAD_BARRIER_SERIAL_THREAD ? 0 : -1;
}

static void *part_thread(void *arg)
{
	struct part_run *r = arg;
	int lo = r->rows * r->k / r->L, hi = r->rows * (r->k + 1) / r->L;
	struct rt_part p = { r->k, r->L, lo, hi, part_sync, r->bar };
	size_t out = (size_t)r->st->out;
	const float *y;
	int rc;

	rc = rt_acts_place(&r->acts, r->st, r->rows, r->mem);
	if (!rc) {
		/* this block's rows of the input, as a replica reads its own */
		memcpy(r->acts.x + (size_t)lo * r->st->in, r->x + (size_t)lo * r->st->in,
		       (size_t)(hi - lo) * r->st->in * sizeof(float));
		rc = part_sync(r->bar);
		if (!rc)
			rc = rt_stage_forward_part(r->st, &r->acts, r->rows, &p, &y);
		/* the head cut by rows: only this block's rows are there yet,
		 * as the caller's loss reads them; else all */
		if (!rc && rt_part_head_rows(r->st, r->L))
			memcpy(r->logits + lo * out, y + lo * out, (size_t)(hi - lo) * out * sizeof(float));
		else if (!rc && r->k == 0)
			memcpy(r->logits, y, (size_t)r->rows * out * sizeof(float));
		if (!rc)
			rc = rt_stage_backward_part(r->st, &r->acts, r->dy, r->dx, &p);
	}
	r->rc = rc;
	return NULL;
}

/* Blocks of every layer, with the head cut by columns or by rows
 * (rt_part_head_rows): the same logits, input gradient and weight
 * gradients as the whole stage, for 1 to 4 blocks. */
static void test_part_equals_whole(void **state)
{
	enum { ROWS = 12, IN = 20, MAX_OUT = 70 };
	static const long h5[] = { 70, 33, 48, 5 }, h1[] = { 40 }, h2[] = { 70, 33 };
	static const struct {
		const long *hidden;
		size_t n;
		int out;
	} models[] = {
		{ h5, 4, 10 },  /* 5 layers, head by rows (1 line of outputs) */
		{ h1, 1, 10 },  /* 2 layers: no sync below the head */
		{ NULL, 0, 10 }, /* the head alone */
		{ h2, 2, 70 },  /* 5 lines: by columns for 2 blocks, by rows for 3, 4 */
	};
	float x[ROWS * IN], dl[ROWS * MAX_OUT], dx1[ROWS * IN], dxp[ROWS * IN];
	float logits[ROWS * MAX_OUT];
	struct part_run runs[4];
	pthread_t th[4];
	pthread_barrier_t bar;
	struct rt_stage whole, part;
	struct rt_acts acts;
	const char *act[] = { "relu", "gelu", "tanh" };
	int32_t labels[ROWS];
	const float *y1;
	struct mlp m;
	int first[2], L, a, k, i, md, out, by_rows = 0, by_cols = 0;
	float *mem;

	(void)state;
	rt_blas_threads(1);
	fill_normal(x, ROWS * IN, 4);
	for (md = 0; md < (int)(sizeof(models) / sizeof(models[0])); md++)
		for (a = 0; a < 3; a++) {
			out = models[md].out;
			for (i = 0; i < ROWS; i++)
				labels[i] = (i * 7) % out;
			mlp_set(&m, IN, models[md].hidden, models[md].n, out, act[a], 11);
			split_ok(&m.s, 1, first);
			stage_ok(&whole, &m.s, 0, 1, first);
			assert_int_equal(rt_acts_init(&acts, &whole, ROWS), 0);
			assert_int_equal(rt_stage_forward(&whole, &acts, x, ROWS, &y1), 0);
			rt_softmax_xent(y1, labels, ROWS, out, 1.0f / ROWS, dl, NULL);
			assert_int_equal(rt_stage_backward(&whole, &acts, dl, dx1, NULL, NULL), 0);
			mem = malloc(rt_acts_floats(&whole, ROWS) * sizeof(float));
			assert_non_null(mem);
			for (L = 1; L <= 4; L++) {
				if (rt_part_head_rows(&whole, L))
					by_rows++;
				else if (L > 1)
					by_cols++;
				stage_ok(&part, &m.s, 0, 1, first);
				memset(dxp, 0, sizeof(dxp));
				memset(logits, 0, sizeof(logits));
				assert_int_equal(pthread_barrier_init(&bar, NULL, (unsigned)L), 0);
				for (k = 0; k < L; k++) {
					runs[k] = (struct part_run){ &bar, &part, { 0 }, mem, x, dl, dxp,
								     logits, ROWS, k, L, -1 };
					assert_int_equal(pthread_create(&th[k], NULL, part_thread, &runs[k]), 0);
				}
				for (k = 0; k < L; k++) {
					pthread_join(th[k], NULL);
					assert_int_equal(runs[k].rc, 0);
					rt_acts_free(&runs[k].acts);
				}
				pthread_barrier_destroy(&bar);
				if (L == 1) {
					/* one block is the whole layer: the same calls, the same bits */
					assert_memory_equal(logits, y1, (size_t)ROWS * out * sizeof(float));
					assert_memory_equal(part.grads, whole.grads,
							    whole.n_params * sizeof(float));
					assert_memory_equal(dxp, dx1, sizeof(dxp));
				}
				for (i = 0; i < ROWS * out; i++)
					assert_close(logits[i], y1[i], 1e-5 * (1 + fabs(y1[i])));
				for (i = 0; i < ROWS * IN; i++)
					assert_close(dxp[i], dx1[i], 1e-6 + 1e-5 * fabs(dx1[i]));
				for (i = 0; i < (int)whole.n_params; i++)
					if (!(fabs(part.grads[i] - whole.grads[i]) <=
					      1e-7 + 1e-5 * fabs(whole.grads[i])))
						fail_msg("model %d %s, %d blocks: grad %d is %.9g, want %.9g",
							 md, act[a], L, i, part.grads[i], whole.grads[i]);
				rt_stage_free(&part);
			}
			free(mem);
			rt_acts_free(&acts);
			rt_stage_free(&whole);
		}
	/* both ways ran */
	assert_int_equal(by_rows, 3 * (3 * 3 + 2));
	assert_int_equal(by_cols, 3 * 1);
}

/* two micro-batches of 4 accumulate to one batch of 8 */
static void test_grad_accumulation(void **state)
{
	int32_t labels[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
	float x[8 * 20], dl[8 * 10];
	struct chain a, b;
	const float *y;
	struct mlp m;
	size_t i;
	int k;

	(void)state;
	mlp_set(&m, 20, h5, 4, 10, "tanh", 9);
	fill_normal(x, 8 * 20, 2);
	chain_init(&a, &m.s, 2, 8);
	chain_init(&b, &m.s, 2, 4);
	y = chain_forward(&a, x, 8);
	rt_softmax_xent(y, labels, 8, 10, 1.0f / 8, dl, NULL);
	chain_backward(&a, dl, NULL, 8);
	for (k = 0; k < 2; k++) {
		y = chain_forward(&b, x + k * 4 * 20, 4);
		rt_softmax_xent(y, labels + k * 4, 4, 10, 1.0f / 8, dl, NULL);
		chain_backward(&b, dl, NULL, 4);
	}
	for (k = 0; k < 2; k++) {
		for (i = 0; i < a.st[k].n_params; i++) {
			double ga = a.st[k].grads[i], gb = b.st[k].grads[i];

			if (!(fabs(ga - gb) <= 1e-6 * fabs(ga) + 1e-7))
				fail_msg("stage %d grad %zu: batch of 8 %.9g, 2 x 4 %.9g", k, i, ga, gb);
		}
	}
	/* zeroing starts a new step */
	rt_stage_zero_grads(&b.st[1]);
	for (i = 0; i < b.st[1].n_params; i++)
		assert_true(b.st[1].grads[i] == 0.0f);
	chain_free(&b);
	chain_free(&a);
}

struct done_log {
	const struct rt_stage *st;
	int calls[8];
	int n;
};

/* at layer i's call, its gradient is there and no earlier layer's is yet */
static void on_layer_done(void *ctx, int i)
{
	struct done_log *log = ctx;
	const struct rt_layer ly_v = rt_mlp_layer(log->st, i), *ly = &ly_v;
	size_t k;
	int j, nonzero = 0;

	log->calls[log->n++] = i;
	for (k = 0; k < ly->n_params; k++)
		nonzero += ly->dw[k] != 0.0f;
	assert_true(nonzero > 0);
	for (j = 0; j < i; j++)
		for (k = 0; k < rt_mlp_layer(log->st, j).n_params; k++)
			assert_true(rt_mlp_layer(log->st, j).dw[k] == 0.0f);
}

static void test_layer_done_order(void **state)
{
	float x[3 * 20], dy[3 * 10];
	struct done_log log = { 0 };
	struct rt_stage st;
	struct rt_acts acts;
	const float *y;
	int first[2] = { 0, 5 };
	struct mlp m;

	(void)state;
	mlp_set(&m, 20, h5, 4, 10, "relu", 3);
	stage_ok(&st, &m.s, 0, 1, first);
	assert_int_equal(rt_acts_init(&acts, &st, 3), 0);
	fill_normal(x, sizeof(x) / sizeof(x[0]), 4);
	fill_normal(dy, sizeof(dy) / sizeof(dy[0]), 5);
	assert_int_equal(rt_stage_forward(&st, &acts, x, 3, &y), 0);
	log.st = &st;
	assert_int_equal(rt_stage_backward(&st, &acts, dy, NULL, on_layer_done, &log), 0);
	assert_int_equal(log.n, 5);
	assert_int_equal(log.calls[0], 4);
	assert_int_equal(log.calls[4], 0);
	assert_int_equal(log.calls[2], 2);
	rt_acts_free(&acts);
	rt_stage_free(&st);
}

/* --- gradient check --- */

/* loss = sum over rows of softmax cross-entropy, the model as one stage */
static double loss_of(struct rt_stage *st, struct rt_acts *acts, const float *x,
		      const int32_t *labels, int rows)
{
	const float *y;

	assert_int_equal(rt_stage_forward(st, acts, x, rows, &y), 0);
	return rt_softmax_xent(y, labels, rows, st->out, 1.0f, NULL, NULL);
}

/* Central differences of the loss in each of p[0..n), against ana[0..n).
 * The step is the float difference actually taken. Returns the relative
 * error ||num - ana|| / max(||num||, ||ana||). */
static double fd_check(struct rt_stage *st, struct rt_acts *acts, float *x,
		       const int32_t *labels, int rows, float *p, const float *ana, size_t n,
		       double *max_abs)
{
	double diff2 = 0, num2 = 0, ana2 = 0;
	const float h = 1e-2f;
	size_t i;

	for (i = 0; i < n; i++) {
		float keep = p[i], up = keep + h, down = keep - h;
		double lu, ld, num, d;

		p[i] = up;
		lu = loss_of(st, acts, x, labels, rows);
		p[i] = down;
		ld = loss_of(st, acts, x, labels, rows);
		p[i] = keep;
		num = (lu - ld) / ((double)up - (double)down);
		d = fabs(num - ana[i]);
		diff2 += d * d;
		num2 += num * num;
		ana2 += (double)ana[i] * ana[i];
		if (d > *max_abs)
			*max_abs = d;
	}
	return sqrt(diff2) / fmax(sqrt(fmax(num2, ana2)), 1e-30);
}

static void grad_check(const char *act)
{
	enum { ROWS = 3, IN = 6, OUT = 4 };
	const long hidden[] = { 7, 5 };
	float x[ROWS * IN], dx[ROWS * IN], *grads = NULL;
	int32_t labels[ROWS] = { 0, 3, 1 };
	int first[2] = { 0, 3 }, i, tries;
	double worst = 0, rel, max_abs = 0;
	struct rt_stage st;
	struct rt_acts acts;
	const float *y;
	struct mlp m;
	uint64_t seed;

	mlp_set(&m, IN, hidden, 2, OUT, act, 21);
	stage_ok(&st, &m.s, 0, 1, first);
	assert_int_equal(rt_acts_init(&acts, &st, ROWS), 0);
	/* Inputs whose pre-activations are all >= 0.1 away from 0, so that no
	 * +-h step crosses ReLU's kink (the one place FD is not a derivative). */
	for (seed = 1, tries = 0; tries < 1000; seed++, tries++) {
		float near = INFINITY;
		int l;
		size_t k;

		fill_normal(x, ROWS * IN, seed);
		assert_int_equal(rt_stage_forward(&st, &acts, x, ROWS, &y), 0);
		for (l = 0; l < st.n_blocks - 1; l++)
			for (k = 0; k < (size_t)ROWS * rt_mlp_layer(&st, l).out; k++)
				near = fminf(near, fabsf(rt_mlp_z(&st, &acts, l)[k]));
		if (near > 0.1f)
			break;
	}
	assert_true(tries < 1000);
	/* analytic gradients of the summed loss */
	{
		float dl[ROWS * OUT];

		assert_int_equal(rt_stage_forward(&st, &acts, x, ROWS, &y), 0);
		rt_softmax_xent(y, labels, ROWS, OUT, 1.0f, dl, NULL);
		rt_stage_zero_grads(&st);
		assert_int_equal(rt_stage_backward(&st, &acts, dl, dx, NULL, NULL), 0);
	}
	grads = malloc(st.n_params * sizeof(*grads));
	assert_non_null(grads);
	memcpy(grads, st.grads, st.n_params * sizeof(*grads));
	for (i = 0; i < st.n_blocks; i++) {
		const struct rt_layer ly_v = rt_mlp_layer(&st, i), *ly = &ly_v;
		size_t nw = (size_t)ly->out * ly->in;

		rel = fd_check(&st, &acts, x, labels, ROWS, ly->w, grads + ly->offset, nw, &max_abs);
		printf("# grad check %s: layer %d W: relative error %.2e\n", act, i, rel);
		worst = fmax(worst, rel);
		rel = fd_check(&st, &acts, x, labels, ROWS, ly->b, grads + ly->offset + nw,
			       (size_t)ly->out, &max_abs);
		printf("# grad check %s: layer %d b: relative error %.2e\n", act, i, rel);
		worst = fmax(worst, rel);
	}
	rel = fd_check(&st, &acts, x, labels, ROWS, x, dx, ROWS * IN, &max_abs);
	printf("# grad check %s: stage input dx: relative error %.2e (worst %.2e, max abs %.2e)\n",
	       act, rel, fmax(worst, rel), max_abs);
	worst = fmax(worst, rel);
	assert_true(worst < 1e-3);
	assert_true(max_abs < 1e-3);
	free(grads);
	rt_acts_free(&acts);
	rt_stage_free(&st);
}

static void test_grad_check_relu(void **state) { (void)state; grad_check("relu"); }
static void test_grad_check_gelu(void **state) { (void)state; grad_check("gelu"); }
static void test_grad_check_tanh(void **state) { (void)state; grad_check("tanh"); }

/* --- errors --- */

static void test_split_errors(void **state)
{
	struct dt_err err = { 0 };
	int first[8];
	struct mlp m;
	long zero[] = { 16, 0 };

	(void)state;
	mlp_set(&m, 784, h512, 2, 10, "relu", 1);
	assert_int_equal(rt_stage_split(&m.s, 4, first, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "parallel.pipeline: 4 stages for a model of 3 layers"));
	assert_int_equal(rt_stage_split(&m.s, 0, first, &err), -EINVAL);
	mlp_set(&m, 784, zero, 2, 10, "relu", 1);
	dt_err_clear(&err);
	assert_int_equal(rt_stage_split(&m.s, 1, first, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "width 2 of the MLP"));
	assert_non_null(strstr(err.msg, "(got 0)"));
	mlp_set(&m, 784, h512, 2, 10, "swish", 1);
	dt_err_clear(&err);
	assert_int_equal(rt_stage_split(&m.s, 1, first, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "model.activation: \"swish\""));
	mlp_set(&m, 784, h512, 2, 10, "relu", 1);
	m.s.model.type = "cnn";
	dt_err_clear(&err);
	assert_int_equal(rt_stage_split(&m.s, 1, first, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "model.type: \"cnn\""));
}

static void test_stage_errors(void **state)
{
	struct dt_err err = { 0 };
	int bad_start[3] = { 1, 2, 3 }, empty[3] = { 0, 0, 3 }, ok[3] = { 0, 1, 3 };
	struct rt_stage st, other;
	struct rt_acts acts, wrong;
	float x[784 * 2] = { 0 }, dy[512 * 2] = { 0 };
	const float *y;
	struct mlp m;

	(void)state;
	mlp_set(&m, 784, h512, 2, 10, "relu", 1);
	assert_int_equal(rt_stage_init(&st, &m.s, 0, 2, bad_start, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "must start at layer 0 and end at layer 3 (got 1 .. 3)"));
	assert_null(st.params);
	rt_stage_free(&st);
	assert_int_equal(rt_stage_init(&st, &m.s, 0, 2, empty, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "stage 0 owns no layer"));
	assert_int_equal(rt_stage_init(&st, &m.s, 2, 2, ok, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "stage 2 is outside the pipeline of 2 stages"));
	assert_int_equal(rt_stage_init(&st, &m.s, 0, 4, ok, &err), -EINVAL);

	stage_ok(&st, &m.s, 0, 2, ok);
	stage_ok(&other, &m.s, 1, 2, ok);
	assert_int_equal(rt_acts_init(&acts, &st, 0), -EINVAL);
	rt_acts_free(&acts);
	assert_int_equal(rt_acts_init(&acts, &st, 2), 0);
	assert_int_equal(rt_acts_init(&wrong, &other, 2), 0);
	/* backward before any forward */
	assert_int_equal(rt_stage_backward(&st, &acts, dy, NULL, NULL, NULL), -EINVAL);
	/* too many rows, negative rows */
	assert_int_equal(rt_stage_forward(&st, &acts, x, 3, &y), -EINVAL);
	assert_int_equal(rt_stage_forward(&st, &acts, x, -1, &y), -EINVAL);
	/* acts of another stage */
	assert_int_equal(rt_stage_forward(&st, &wrong, x, 2, &y), -EINVAL);
	assert_int_equal(rt_stage_forward(&st, &acts, x, 2, &y), 0);
	assert_int_equal(rt_stage_backward(&other, &acts, dy, NULL, NULL, NULL), -EINVAL);
	assert_int_equal(rt_stage_backward(&st, &acts, dy, NULL, NULL, NULL), 0);
	/* an empty micro-batch is allowed and adds nothing */
	rt_stage_zero_grads(&st);
	assert_int_equal(rt_stage_forward(&st, &acts, x, 0, &y), 0);
	assert_int_equal(rt_stage_backward(&st, &acts, dy, NULL, NULL, NULL), 0);
	assert_true(st.grads[0] == 0.0f && st.grads[st.n_params - 1] == 0.0f);
	rt_acts_free(&wrong);
	rt_acts_free(&acts);
	rt_acts_free(&acts);
	rt_stage_free(&other);
	rt_stage_free(&st);
}

/* --- main --- */

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counts),
		cmocka_unit_test(test_split_documented),
		cmocka_unit_test(test_split_explicit),
		cmocka_unit_test(test_split_optimal),
		cmocka_unit_test(test_split_100m),
		cmocka_unit_test(test_split_many_layers),
		cmocka_unit_test(test_init_independent_of_split),
		cmocka_unit_test(test_init_distribution),
		cmocka_unit_test(test_split_equals_whole),
		cmocka_unit_test(test_grad_accumulation),
		cmocka_unit_test(test_part_blocks),
		cmocka_unit_test(test_part_equals_whole),
		cmocka_unit_test(test_layer_done_order),
		cmocka_unit_test(test_grad_check_relu),
		cmocka_unit_test(test_grad_check_gelu),
		cmocka_unit_test(test_grad_check_tanh),
		cmocka_unit_test(test_split_errors),
		cmocka_unit_test(test_stage_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
