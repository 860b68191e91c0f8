/*
 * test_gpt.c - the GPT model (runtime/model/gpt.h) through the model interface:
 * GPT-2 small's tensor table and parameter count, the stage split it gets,
 * the tied head's initial copy, every parameter's gradient of the whole
 * model (embedding, blocks, head, through the loss) against finite
 * differences, and a model cut into stages giving the whole model's logits
 * and gradients bit for bit.
 *
 * Sections: helpers, the tensor table, the split, gradients, stages, main.
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

#include "runtime/model/gpt.h"
#include "runtime/kernels/kernels.h"
#include "base/rng.h"

/* --- helpers --- */

static void gpt_spec(struct spec *s, long V, long T, long L, long NH, long C, long seed)
{
	memset(s, 0, sizeof(*s));
	s->model.type = "gpt";
	s->model.vocab_size = V;
	s->model.context = T;
	s->model.layers = L;
	s->model.heads = NH;
	s->model.embd = C;
	s->model.init_seed = seed;
}

static void stage_ok(struct rt_stage *st, const struct spec *s, int stage, int n, const int *first)
{
	struct dt_err err = { 0 };

	if (rt_stage_init(st, s, stage, n, first, &err))
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

static void test_gpt2_small(void **state)
{
	struct spec s;
	struct rt_tensor t[RT_BLOCK_TENSORS];
	struct rt_tie tie[RT_MAX_TIES];
	struct dt_err err = { 0 };
	const struct rt_model_ops *ops;
	size_t wte = 50257 * 768;

	(void)state;
	gpt_spec(&s, 50257, 1024, 12, 12, 768, 1);
	ops = rt_model_find(&s, &err);
	assert_non_null(ops);
	assert_int_equal(ops->check(&s, &err), 0);
	assert_int_equal(rt_model_blocks(&s), 14);
	/* GPT-2 small has 124,439,808 parameters; the head keeps a copy of wte */
	assert_int_equal(rt_model_params(&s) - wte, 124439808);
	assert_int_equal(rt_model_tied_params(&s), wte);
	assert_int_equal(ops->tensors(&s, 0, t), 2);
	assert_string_equal(t[0].name, "transformer.wte.weight");
	assert_int_equal(t[1].shape[0], 1024);
	assert_int_equal(ops->tensors(&s, 3, t), 12);
	assert_string_equal(t[2].name, "transformer.h.2.attn.c_attn.weight");
	assert_int_equal(t[2].shape[0], 3 * 768);
	assert_true(t[2].decay);
	assert_string_equal(t[11].name, "transformer.h.2.mlp.c_proj.bias");
	assert_false(t[11].decay);
	assert_false(t[0].decay); /* ln_1.weight: 1-D */
	assert_int_equal(ops->tensors(&s, 13, t), 3);
	assert_string_equal(t[2].name, "lm_head.weight");
	assert_true(t[2].decay);
	assert_int_equal(rt_model_ties(&s, tie), 1);
	assert_int_equal(tie[0].block[0], 0);
	assert_int_equal(tie[0].block[1], 13);
	assert_string_equal(tie[0].name[1], "lm_head.weight");
	/* bad shapes are refused, naming the key */
	s.model.heads = 7;
	assert_int_equal(ops->check(&s, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "model.heads: must divide model.embd"));
}

/* --- the split --- */

/* GPT-2 small at T = 64 over 4 stages: the head (64 x 50257 x 768
 * multiply-adds a sample) outweighs five blocks, so it gets a stage of its
 * own and the embedding and 12 blocks share the other three evenly. */
static void test_split(void **state)
{
	struct spec s;
	struct dt_err err = { 0 };
	int first[5];
	const int want[5] = { 0, 5, 9, 13, 14 };

	(void)state;
	gpt_spec(&s, 50257, 64, 12, 12, 768, 1);
	assert_int_equal(rt_stage_split(&s, 4, first, &err), 0);
	assert_memory_equal(first, want, sizeof(want));
}

/* --- gradients --- */

enum { V = 7, T = 4, L = 2, NH = 2, C = 8, ROWS = 2 };

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

static void test_gradients(void **state)
{
	struct spec s;
	struct fd f;
	struct dt_rng r;
	int first[2] = { 0, L + 2 }, i;
	float dlogits[ROWS * T * V];
	size_t k, checked = 0;

	(void)state;
	gpt_spec(&s, V, T, L, NH, C, 5);
	memset(&f, 0, sizeof(f));
	stage_ok(&f.st, &s, 0, 1, first);
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
	for (i = 0; i < f.st.n_tensors; i++) {
		const struct rt_tensor *t = &f.st.tensors[i];

		for (k = 0; k < t->n; k++) {
			float *p = f.st.params + t->offset + k, keep = *p;
			double h = 1e-2, up, down, fd, g = f.st.grads[t->offset + k];

			*p = keep + (float)h;
			up = fd_loss(&f, NULL);
			*p = keep - (float)h;
			down = fd_loss(&f, NULL);
			*p = keep;
			fd = (up - down) / (2 * h);
			if (!(fabs(g - fd) <= 2e-2 * (0.05 + fabs(fd))))
				fail_msg("%s[%zu]: analytic %.6g, finite differences %.6g", t->name, k,
					 g, fd);
			checked++;
		}
	}
	assert_int_equal(checked, f.st.n_params);
	rt_acts_free(&f.acts);
	rt_stage_free(&f.st);
}

/* --- stages --- */

/* The tied head starts as a copy of wte, on one stage or two. */
static void test_tied_init(void **state)
{
	struct spec s;
	struct rt_stage one, a, b;
	int whole[2] = { 0, 6 }, two[3] = { 0, 3, 6 };
	const struct rt_tensor *w1, *h1, *w2, *h2;

	(void)state;
	gpt_spec(&s, 11, 6, 4, 2, 8, 9);
	stage_ok(&one, &s, 0, 1, whole);
	stage_ok(&a, &s, 0, 2, two);
	stage_ok(&b, &s, 1, 2, two);
	w1 = find(&one, "transformer.wte.weight");
	h1 = find(&one, "lm_head.weight");
	w2 = find(&a, "transformer.wte.weight");
	h2 = find(&b, "lm_head.weight");
	assert_non_null(w1), assert_non_null(h1), assert_non_null(w2), assert_non_null(h2);
	assert_null(find(&a, "lm_head.weight"));
	assert_memory_equal(one.params + w1->offset, one.params + h1->offset, w1->n * sizeof(float));
	assert_memory_equal(a.params + w2->offset, b.params + h2->offset, w2->n * sizeof(float));
	rt_stage_free(&one);
	rt_stage_free(&a);
	rt_stage_free(&b);
}

/* Cut into 3 stages, the model gives the whole model's logits and every
 * tensor's gradient bit for bit. */
static void test_stages_equal_whole(void **state)
{
	enum { SV = 13, ST = 6, SL = 3, SR = 3 };
	struct spec s;
	struct rt_stage whole, part[3];
	struct rt_acts wa, pa[3];
	int w1[2] = { 0, SL + 2 }, f3[4] = { 0, 2, 4, SL + 2 }, i, k;
	float x[SR * ST], dl[SR * ST * SV], dl2[SR * ST * SV], *dbuf[2];
	int32_t target[SR * ST];
	const float *yw = NULL, *y = NULL;
	struct dt_rng r;

	(void)state;
	gpt_spec(&s, SV, ST, SL, 2, 8, 4);
	stage_ok(&whole, &s, 0, 1, w1);
	assert_int_equal(rt_acts_init(&wa, &whole, SR), 0);
	for (k = 0; k < 3; k++) {
		stage_ok(&part[k], &s, k, 3, f3);
		assert_int_equal(rt_acts_init(&pa[k], &part[k], SR), 0);
	}
	dt_rng_seed(&r, 8, 0);
	for (i = 0; i < SR * ST; i++) {
		x[i] = (float)dt_rng_below(&r, SV);
		target[i] = (int32_t)dt_rng_below(&r, SV);
	}
	assert_int_equal(rt_stage_forward(&whole, &wa, x, SR, &yw), 0);
	y = x;
	for (k = 0; k < 3; k++)
		assert_int_equal(rt_stage_forward(&part[k], &pa[k], y, SR, &y), 0);
	assert_memory_equal(y, yw, sizeof(float) * SR * ST * SV);
	rt_softmax_xent(yw, target, SR * ST, SV, 0.1f, dl, NULL);
	memcpy(dl2, dl, sizeof(dl));
	assert_int_equal(rt_stage_backward(&whole, &wa, dl, NULL, NULL, NULL), 0);
	dbuf[0] = malloc(sizeof(float) * SR * ST * 8);
	dbuf[1] = malloc(sizeof(float) * SR * ST * 8);
	assert_int_equal(rt_stage_backward(&part[2], &pa[2], dl2, dbuf[0], NULL, NULL), 0);
	assert_int_equal(rt_stage_backward(&part[1], &pa[1], dbuf[0], dbuf[1], NULL, NULL), 0);
	assert_int_equal(rt_stage_backward(&part[0], &pa[0], dbuf[1], NULL, NULL, NULL), 0);
	for (k = 0; k < 3; k++)
		for (i = 0; i < part[k].n_tensors; i++) {
			const struct rt_tensor *t = &part[k].tensors[i], *tw = find(&whole, t->name);

			assert_non_null(tw);
			if (memcmp(part[k].grads + t->offset, whole.grads + tw->offset, t->n * sizeof(float)))
				fail_msg("%s: the gradient on stage %d differs from the whole model's", t->name, k);
		}
	free(dbuf[0]);
	free(dbuf[1]);
	for (k = 0; k < 3; k++) {
		rt_acts_free(&pa[k]);
		rt_stage_free(&part[k]);
	}
	rt_acts_free(&wa);
	rt_stage_free(&whole);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gpt2_small),
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_gradients),
		cmocka_unit_test(test_tied_init),
		cmocka_unit_test(test_stages_equal_whole),
	};

	rt_blas_threads(1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
