/*
 * test_llama.c - the Llama model (runtime/model/llama.h) through the model
 * interface: SmolLM2-135M's tensor table and parameter count, the checks
 * that name their key, every parameter's gradient of a small model with
 * grouped-query heads, q/k/v biases, an untied head and Llama 3.1's
 * rope_scaling against finite differences, the tied head's initial copy,
 * and a multi-query model cut into stages giving the whole model's logits
 * and gradients bit for bit, on the CPU and on the simulated device; a
 * device without the Llama's kernels refused by name.
 *
 * Sections: helpers, the tensor table, gradients, stages, main.
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

#include "base/rng.h"
#include "runtime/kernels/kernels.h"
#include "runtime/model/device.h"
#include "runtime/model/llama.h"

/* --- helpers --- */

static void llama_spec(struct spec *s, long V, long T, long L, long NH, long NKV, long C, long I)
{
	memset(s, 0, sizeof(*s));
	s->model.type = "llama";
	s->model.vocab_size = V;
	s->model.context = T;
	s->model.layers = L;
	s->model.heads = NH;
	s->model.kv_heads = NKV;
	s->model.embd = C;
	s->model.intermediate_size = I;
	s->model.rope_theta = 10000.0;
	s->model.rope_scaling.rope_type = "default";
	s->model.rms_norm_eps = 1e-6;
	s->model.init_seed = 7;
}

static void stage_ok(struct rt_stage *st, struct rt_dev *dev, const struct spec *s, int stage,
		     int n, const int *first)
{
	struct dt_err err = { 0 };

	if (rt_stage_init_on(st, dev, s, stage, n, first, &err))
		fail_msg("rt_stage_init: %s", err.msg);
}

/* the tensor called name in st, or NULL */
static const struct rt_tensor *find(const struct rt_stage *st, const char *name)
{
	int i;

	for (i = 0; i < st->n_tensors; i++)
		if (!strcmp(st->tensors[i].name, name))
			return &st->tensors[i];
	return NULL;
}

/* --- the tensor table --- */

static void test_smollm2(void **state)
{
	struct spec s;
	struct rt_tensor t[RT_BLOCK_TENSORS];
	struct rt_tie tie[RT_MAX_TIES];
	struct dt_err err = { 0 };
	const struct rt_model_ops *ops;
	size_t emb = 49152 * 576;

	(void)state;
	llama_spec(&s, 49152, 2048, 30, 9, 3, 576, 1536);
	s.model.tie_word_embeddings = true;
	ops = rt_model_find(&s, &err);
	assert_non_null(ops);
	assert_int_equal(ops->check(&s, &err), 0);
	assert_int_equal(rt_model_blocks(&s), 32);
	/* SmolLM2-135M: 134,515,008 parameters; the head keeps a copy of the embedding */
	assert_int_equal(rt_model_params(&s) - emb, 134515008);
	assert_int_equal(rt_model_tied_params(&s), emb);
	assert_int_equal(ops->tensors(&s, 0, t), 1);
	assert_string_equal(t[0].name, "model.embed_tokens.weight");
	assert_int_equal(ops->tensors(&s, 3, t), 9);
	assert_string_equal(t[0].name, "model.layers.2.input_layernorm.weight");
	assert_false(t[0].decay);
	assert_string_equal(t[2].name, "model.layers.2.self_attn.k_proj.weight");
	assert_int_equal(t[2].shape[0], 3 * 64);
	assert_int_equal(t[2].shape[1], 576);
	assert_true(t[2].decay);
	assert_string_equal(t[8].name, "model.layers.2.mlp.down_proj.weight");
	assert_int_equal(t[8].shape[1], 1536);
	assert_int_equal(ops->tensors(&s, 31, t), 2);
	assert_string_equal(t[0].name, "model.norm.weight");
	assert_string_equal(t[1].name, "lm_head.weight");
	assert_int_equal(rt_model_ties(&s, tie), 1);
	assert_int_equal(tie[0].block[1], 31);
	/* Qwen2's biases; an untied head */
	s.model.qkv_bias = true;
	s.model.tie_word_embeddings = false;
	assert_int_equal(ops->tensors(&s, 1, t), 12);
	assert_string_equal(t[10].name, "model.layers.0.self_attn.k_proj.bias");
	assert_int_equal(t[10].shape[0], 192);
	assert_false(t[10].decay);
	assert_int_equal(rt_model_ties(&s, tie), 0);
	/* bad shapes are refused, naming the key */
	s.model.kv_heads = 2;
	assert_int_equal(ops->check(&s, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "model.kv_heads: must divide model.heads"));
	llama_spec(&s, 100, 16, 2, 4, 0, 12, 8); /* head size 3 */
	memset(&err, 0, sizeof(err));
	assert_int_equal(ops->check(&s, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "model.heads: the head size model.embd / model.heads must be even"));
}

/* --- gradients --- */

enum { V = 7, T = 5, L = 2, NH = 4, NKV = 2, C = 32, I = 24, ROWS = 2 };

struct fd {
	struct rt_stage st;
	struct rt_acts acts;
	float x[ROWS * T];
	int32_t target[ROWS * T];
};

/* mean cross-entropy over the ROWS x T positions */
static double fd_loss(struct fd *f, float *dlogits)
{
	const float *y = NULL;

	assert_int_equal(rt_stage_forward(&f->st, &f->acts, f->x, ROWS, &y), 0);
	return rt_softmax_xent(y, f->target, ROWS * T, V, 1.0f / (ROWS * T), dlogits, NULL) /
	       (ROWS * T);
}

/* every parameter's gradient against central differences */
static void check_tensors(struct fd *f)
{
	size_t k;
	int i;

	for (i = 0; i < f->st.n_tensors; i++) {
		const struct rt_tensor *t = &f->st.tensors[i];

		for (k = 0; k < t->n; k++) {
			float *p = f->st.params + t->offset + k, keep = *p;
			double h = 1e-2, up, down, fd, g = f->st.grads[t->offset + k];

			*p = keep + (float)h;
			up = fd_loss(f, NULL);
			*p = keep - (float)h;
			down = fd_loss(f, NULL);
			*p = keep;
			fd = (up - down) / (2 * h);
			if (!(fabs(g - fd) <= 2e-2 * (0.05 + fabs(fd))))
				fail_msg("%s[%zu]: analytic %.6g, finite differences %.6g", t->name, k,
					 g, fd);
		}
	}
}

/* hs = 8: with original_max_position_embeddings 64 and factors 1 and 4,
 * frequency 0 is kept (wavelength 6.3 < 16), 1 blended (63), 2 and 3
 * divided (628, 6283 > 64) */
static void test_gradients(void **state)
{
	struct spec s;
	struct fd f;
	struct dt_rng r;
	int first[2] = { 0, L + 2 }, i;
	float dlogits[ROWS * T * V];
	size_t k;

	(void)state;
	llama_spec(&s, V, T, L, NH, NKV, C, I);
	s.model.qkv_bias = true;
	s.model.rope_scaling.rope_type = "llama3";
	s.model.rope_scaling.factor = 8;
	s.model.rope_scaling.low_freq_factor = 1;
	s.model.rope_scaling.high_freq_factor = 4;
	s.model.rope_scaling.original_max_position_embeddings = 64;
	memset(&f, 0, sizeof(f));
	stage_ok(&f.st, rt_dev_cpu(), &s, 0, 1, first);
	assert_int_equal(rt_acts_init(&f.acts, &f.st, ROWS), 0);
	dt_rng_seed(&r, 3, 0);
	for (i = 0; i < ROWS * T; i++) {
		f.x[i] = (float)dt_rng_below(&r, V);
		f.target[i] = (int32_t)dt_rng_below(&r, V);
	}
	/* bigger than init's weights, so that every path carries gradient */
	for (k = 0; k < f.st.n_params; k++)
		f.st.params[k] += 0.3f * dt_rng_normal(&r);
	fd_loss(&f, dlogits);
	rt_stage_zero_grads(&f.st);
	assert_int_equal(rt_stage_backward(&f.st, &f.acts, dlogits, NULL, NULL, NULL), 0);
	check_tensors(&f);
	rt_acts_free(&f.acts);
	rt_stage_free(&f.st);
}

/* --- stages --- */

/* The tied head starts as a copy of the embedding, on one stage or two. */
static void test_tied_init(void **state)
{
	struct spec s;
	struct rt_stage one, a, b;
	int whole[2] = { 0, 6 }, two[3] = { 0, 3, 6 };
	const struct rt_tensor *w1, *h1, *w2, *h2;

	(void)state;
	llama_spec(&s, 11, 6, 4, 2, 1, 8, 12);
	s.model.tie_word_embeddings = true;
	stage_ok(&one, rt_dev_cpu(), &s, 0, 1, whole);
	stage_ok(&a, rt_dev_cpu(), &s, 0, 2, two);
	stage_ok(&b, rt_dev_cpu(), &s, 1, 2, two);
	w1 = find(&one, "model.embed_tokens.weight");
	h1 = find(&one, "lm_head.weight");
	w2 = find(&a, "model.embed_tokens.weight");
	h2 = find(&b, "lm_head.weight");
	assert_non_null(w1), assert_non_null(h1), assert_non_null(w2), assert_non_null(h2);
	assert_null(find(&a, "lm_head.weight"));
	assert_memory_equal(one.params + w1->offset, one.params + h1->offset, w1->n * sizeof(float));
	assert_memory_equal(a.params + w2->offset, b.params + h2->offset, w2->n * sizeof(float));
	rt_stage_free(&one);
	rt_stage_free(&a);
	rt_stage_free(&b);
}

enum { SV = 13, ST = 6, SL = 3, SR = 3, SC = 16 };

struct split {
	struct rt_dev *dev;
	struct rt_stage whole, part[3];
	struct rt_acts wa, pa[3];
	float *in, *dl, *dl2, *db[2]; /* device memory */
};

/* the whole model's and the three stages' forward and backward on x */
static void run_split(struct split *p, const float *x, const int32_t *target)
{
	const float *yw = NULL, *y = NULL;
	float *dl = malloc(sizeof(float) * SR * ST * SV), *yh = malloc(sizeof(float) * SR * ST * SV);
	int k;

	rt_dev_put(p->dev, p->in, x, sizeof(float) * SR * ST);
	assert_int_equal(rt_stage_forward(&p->whole, &p->wa, p->in, SR, &yw), 0);
	y = p->in;
	for (k = 0; k < 3; k++)
		assert_int_equal(rt_stage_forward(&p->part[k], &p->pa[k], y, SR, &y), 0);
	rt_dev_get(p->dev, dl, yw, sizeof(float) * SR * ST * SV);
	rt_dev_get(p->dev, yh, y, sizeof(float) * SR * ST * SV);
	assert_memory_equal(yh, dl, sizeof(float) * SR * ST * SV);
	memcpy(yh, dl, sizeof(float) * SR * ST * SV);
	rt_softmax_xent(yh, target, SR * ST, SV, 0.1f, dl, NULL);
	rt_dev_put(p->dev, p->dl, dl, sizeof(float) * SR * ST * SV);
	rt_dev_put(p->dev, p->dl2, dl, sizeof(float) * SR * ST * SV);
	assert_int_equal(rt_stage_backward(&p->whole, &p->wa, p->dl, NULL, NULL, NULL), 0);
	assert_int_equal(rt_stage_backward(&p->part[2], &p->pa[2], p->dl2, p->db[0], NULL, NULL), 0);
	assert_int_equal(rt_stage_backward(&p->part[1], &p->pa[1], p->db[0], p->db[1], NULL, NULL), 0);
	assert_int_equal(rt_stage_backward(&p->part[0], &p->pa[0], p->db[1], NULL, NULL, NULL), 0);
	free(dl);
	free(yh);
}

/* every stage's gradients equal the whole model's, bit for bit */
static void same_grads(struct split *p)
{
	size_t n = p->whole.n_params;
	float *w = malloc(n * sizeof(float)), *g;
	int k, i;

	rt_dev_get(p->dev, w, p->whole.grads, n * sizeof(float));
	for (k = 0; k < 3; k++) {
		g = malloc(p->part[k].n_params * sizeof(float));
		rt_dev_get(p->dev, g, p->part[k].grads, p->part[k].n_params * sizeof(float));
		for (i = 0; i < p->part[k].n_tensors; i++) {
			const struct rt_tensor *t = &p->part[k].tensors[i], *tw = find(&p->whole, t->name);

			assert_non_null(tw);
			if (memcmp(g + t->offset, w + tw->offset, t->n * sizeof(float)))
				fail_msg("%s: the gradient on stage %d differs from the whole model's", t->name, k);
		}
		free(g);
	}
	free(w);
}

/* Multi-query (kv_heads 1), tied, cut into 3 stages: the whole model's
 * logits and every tensor's gradient bit for bit; on dev. */
static void stages_equal_whole(struct rt_dev *dev)
{
	struct spec s;
	struct split p = { .dev = dev };
	int w1[2] = { 0, SL + 2 }, f3[4] = { 0, 2, 4, SL + 2 }, i, k;
	float x[SR * ST];
	int32_t target[SR * ST];
	struct dt_rng r;
	struct dt_err err = { 0 };

	llama_spec(&s, SV, ST, SL, 4, 1, SC, 20);
	s.model.tie_word_embeddings = true;
	stage_ok(&p.whole, dev, &s, 0, 1, w1);
	assert_int_equal(rt_acts_init(&p.wa, &p.whole, SR), 0);
	for (k = 0; k < 3; k++) {
		stage_ok(&p.part[k], dev, &s, k, 3, f3);
		assert_int_equal(rt_acts_init(&p.pa[k], &p.part[k], SR), 0);
	}
	assert_int_equal(rt_dev_alloc(dev, sizeof(float) * SR * ST, "x", &p.in, &err), 0);
	assert_int_equal(rt_dev_alloc(dev, sizeof(float) * SR * ST * SV, "dl", &p.dl, &err), 0);
	assert_int_equal(rt_dev_alloc(dev, sizeof(float) * SR * ST * SV, "dl2", &p.dl2, &err), 0);
	for (k = 0; k < 2; k++)
		assert_int_equal(rt_dev_alloc(dev, sizeof(float) * SR * ST * SC, "db", &p.db[k], &err), 0);
	dt_rng_seed(&r, 8, 0);
	for (i = 0; i < SR * ST; i++) {
		x[i] = (float)dt_rng_below(&r, SV);
		target[i] = (int32_t)dt_rng_below(&r, SV);
	}
	run_split(&p, x, target);
	assert_int_equal(rt_dev_sync(dev, &err), 0);
	same_grads(&p);
	rt_dev_free(dev, p.in), rt_dev_free(dev, p.dl), rt_dev_free(dev, p.dl2);
	rt_dev_free(dev, p.db[0]), rt_dev_free(dev, p.db[1]);
	for (k = 0; k < 3; k++) {
		rt_acts_free(&p.pa[k]);
		rt_stage_free(&p.part[k]);
	}
	rt_acts_free(&p.wa);
	rt_stage_free(&p.whole);
}

static void test_stages_equal_whole(void **state)
{
	struct rt_dev sim;

	(void)state;
	stages_equal_whole(rt_dev_cpu());
	rt_dev_sim_init(&sim);
	stages_equal_whole(&sim);
	rt_dev_close(&sim);
}

/* A device without the Llama's kernels (CUDA's, for now) is refused by
 * name at the stage's start. */
static void test_device_without_kernels(void **state)
{
	struct spec s;
	struct rt_dev dev = *rt_dev_cpu();
	struct rt_dev_ops ops = *dev.ops;
	struct rt_stage st;
	struct dt_err err = { 0 };
	int first[2] = { 0, 4 };

	(void)state;
	ops.rope = NULL;
	dev.ops = &ops;
	dev.kind = "cuda";
	llama_spec(&s, 11, 6, 2, 2, 1, 8, 12);
	assert_int_equal(rt_stage_init_on(&st, &dev, &s, 0, 1, first, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "model.type llama: train.device cuda is not supported yet"));
	rt_stage_free(&st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_smollm2),
		cmocka_unit_test(test_gradients),
		cmocka_unit_test(test_tied_init),
		cmocka_unit_test(test_stages_equal_whole),
		cmocka_unit_test(test_device_without_kernels),
	};

	rt_blas_threads(1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
