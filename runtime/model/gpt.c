/*
 * gpt.c - the GPT-2 style transformer behind the model interface (see
 * gpt.h): its shape, tensors, cost and initialisation, and the forward and
 * backward passes of its three kinds of block (embedding, transformer block,
 * head), built from the kernels of kernels.h and transformer.h.
 *
 * Sections: the model, the stage's view, the embedding, a transformer
 * block, the head, dispatch, the model's table.
 */
#include "runtime/model/gpt.h"

#include "runtime/model/device.h"
#include "runtime/model/internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/kernels/kernels.h"
#include "base/rng.h"
#include "runtime/kernels/transformer.h"

/* --- the model --- */

struct gpt_shape {
	long V, T, L, NH, C;
};

static struct gpt_shape shape_of(const struct spec *s)
{
	struct gpt_shape g = { s->model.vocab_size, s->model.context, s->model.layers,
			       s->model.heads, s->model.embd };

	return g;
}

static int gpt_blocks(const struct spec *s)
{
	return (int)s->model.layers + 2;
}

static long gpt_width(const struct spec *s, int b)
{
	struct gpt_shape g = shape_of(s);

	if (b < 0 || b > gpt_blocks(s))
		return -1;
	if (b == 0)
		return g.T;
	if (b == gpt_blocks(s))
		return g.T * g.V;
	return g.T * g.C;
}

static int gpt_check(const struct spec *s, struct dt_err *err)
{
	struct gpt_shape g = shape_of(s);

	if (g.V < 2 || g.V > (1L << 24))
		return dt_err_add(err, "model.vocab_size: must be in [2, 16777216] (token ids travel as float32) (got %ld)",
				  g.V);
	if (g.T < 1 || g.C < 1 || g.NH < 1 || g.L < 1 || g.L > RT_MAX_BLOCKS - 2)
		return dt_err_add(err, "model: context, embd, heads and layers must be >= 1, layers <= %d",
				  RT_MAX_BLOCKS - 2);
	if (g.C % g.NH)
		return dt_err_add(err, "model.heads: must divide model.embd (got %ld heads, embd %ld)",
				  g.NH, g.C);
	/* a sample's widths are ints; the head's [T][V] and the MLP's [T][4C] the largest */
	if (g.T * g.V > INT_MAX || g.T * 4 * g.C > INT_MAX)
		return dt_err_add(err, "model: context x vocab_size (%ld x %ld) or context x 4 embd (%ld x %ld) is more than %d floats a sample",
				  g.T, g.V, g.T, 4 * g.C, INT_MAX);
	if (g.V * g.C > INT_MAX) /* the tied embedding travels in one message */
		return dt_err_add(err, "model: vocab_size x embd (%ld x %ld) is more than %d floats",
				  g.V, g.C, INT_MAX);
	return 0;
}

static int gpt_config(const struct spec *s, struct dt_buf *out)
{
	struct gpt_shape g = shape_of(s);

	return dt_buf_printf(out, "{\"vocab_size\":%ld,\"context\":%ld,\"layers\":%ld,\"heads\":%ld,\"embd\":%ld}",
			     g.V, g.T, g.L, g.NH, g.C) ? -ENOMEM : 0;
}

/* A transformer block's tensors, in this order (enum layer_tensor). */
enum layer_tensor {
	LN1_W, LN1_B, QKV_W, QKV_B, PROJ_W, PROJ_B, LN2_W, LN2_B, FC_W, FC_B, FCP_W, FCP_B,
	LAYER_TENSORS
};

static int gpt_tensors(const struct spec *s, int b, struct rt_tensor *t)
{
	struct gpt_shape g = shape_of(s);
	char p[64];

	if (b == 0) {
		rt__model_tensor(&t[0], "transformer.", "wte.weight", g.V, g.C);
		rt__model_tensor(&t[1], "transformer.", "wpe.weight", g.T, g.C);
		return 2;
	}
	if (b == gpt_blocks(s) - 1) {
		rt__model_tensor(&t[0], "transformer.", "ln_f.weight", g.C, 0);
		rt__model_tensor(&t[1], "transformer.", "ln_f.bias", g.C, 0);
		rt__model_tensor(&t[2], "", "lm_head.weight", g.V, g.C);
		return 3;
	}
	snprintf(p, sizeof(p), "transformer.h.%d.", b - 1);
	rt__model_tensor(&t[LN1_W], p, "ln_1.weight", g.C, 0);
	rt__model_tensor(&t[LN1_B], p, "ln_1.bias", g.C, 0);
	rt__model_tensor(&t[QKV_W], p, "attn.c_attn.weight", 3 * g.C, g.C);
	rt__model_tensor(&t[QKV_B], p, "attn.c_attn.bias", 3 * g.C, 0);
	rt__model_tensor(&t[PROJ_W], p, "attn.c_proj.weight", g.C, g.C);
	rt__model_tensor(&t[PROJ_B], p, "attn.c_proj.bias", g.C, 0);
	rt__model_tensor(&t[LN2_W], p, "ln_2.weight", g.C, 0);
	rt__model_tensor(&t[LN2_B], p, "ln_2.bias", g.C, 0);
	rt__model_tensor(&t[FC_W], p, "mlp.c_fc.weight", 4 * g.C, g.C);
	rt__model_tensor(&t[FC_B], p, "mlp.c_fc.bias", 4 * g.C, 0);
	rt__model_tensor(&t[FCP_W], p, "mlp.c_proj.weight", g.C, 4 * g.C);
	rt__model_tensor(&t[FCP_B], p, "mlp.c_proj.bias", g.C, 0);
	return LAYER_TENSORS;
}

static int gpt_ties(const struct spec *s, struct rt_tie *t)
{
	memset(t, 0, sizeof(*t));
	t->block[0] = 0;
	t->block[1] = gpt_blocks(s) - 1;
	snprintf(t->name[0], sizeof(t->name[0]), "transformer.wte.weight");
	snprintf(t->name[1], sizeof(t->name[1]), "lm_head.weight");
	return 1;
}

static size_t gpt_cost(const struct spec *s, int b)
{
	struct gpt_shape g = shape_of(s);
	size_t T = (size_t)g.T, C = (size_t)g.C;

	if (b == 0)
		return T * C;
	if (b == gpt_blocks(s) - 1)
		return T * (size_t)g.V * C;
	return T * (12 * C * C + T * C);
}

/* n values ~ normal(0, std) from r */
static void gpt_init(const struct spec *s, int b, float *params)
{
	struct gpt_shape g = shape_of(s);
	size_t V = (size_t)g.V, T = (size_t)g.T, C = (size_t)g.C;
	double resid = 0.02 / sqrt(2.0 * (double)g.L);
	struct dt_rng r;
	float *p = params;

	if (b == gpt_blocks(s) - 1) {
		rt__fill(p, C, 1.0f);
		rt__fill(p + C, C, 0.0f);
		/* the tied copy of wte: block 0's stream, drawn the same way */
		dt_rng_seed(&r, (uint64_t)s->model.init_seed, 0);
		rt__fill_normal(&r, p + 2 * C, V * C, 0.02);
		return;
	}
	dt_rng_seed(&r, (uint64_t)s->model.init_seed, (uint64_t)b);
	if (b == 0) {
		rt__fill_normal(&r, p, V * C, 0.02);
		rt__fill_normal(&r, p + V * C, T * C, 0.02);
		return;
	}
	rt__fill(p, C, 1.0f), p += C;                      /* ln_1 */
	rt__fill(p, C, 0.0f), p += C;
	rt__fill_normal(&r, p, 3 * C * C, 0.02), p += 3 * C * C; /* c_attn */
	rt__fill(p, 3 * C, 0.0f), p += 3 * C;
	rt__fill_normal(&r, p, C * C, resid), p += C * C;  /* attn.c_proj */
	rt__fill(p, C, 0.0f), p += C;
	rt__fill(p, C, 1.0f), p += C;                      /* ln_2 */
	rt__fill(p, C, 0.0f), p += C;
	rt__fill_normal(&r, p, 4 * C * C, 0.02), p += 4 * C * C; /* mlp.c_fc */
	rt__fill(p, 4 * C, 0.0f), p += 4 * C;
	rt__fill_normal(&r, p, 4 * C * C, resid), p += 4 * C * C; /* mlp.c_proj */
	rt__fill(p, C, 0.0f);
}

/* --- the stage's view --- */

struct gpt_stage {
	struct gpt_shape g;
};

static int gpt_stage_init(struct rt_stage *st, const struct spec *s, struct dt_err *err)
{
	struct gpt_stage *m = calloc(1, sizeof(*m));

	if (!m)
		return dt_err_add(err, "stage %d: out of memory for the GPT's state", st->stage), -ENOMEM;
	m->g = shape_of(s);
	st->model = m;
	if (st->first_block + st->n_blocks == 1 ||
	    (st->first_block == st->n_model_blocks - 1 && st->n_blocks == 1))
		return 0; /* the embedding or the head alone: no attention */
	/* attention's scores for one sequence, at the start (more sequences,
	 * where a device keeps their scores at once, grow it in the passes) */
	return st->dev->ops->attention_reserve(st->dev, 1, (int)m->g.T, (int)m->g.NH, err);
}

static void gpt_stage_free(struct rt_stage *st)
{
	free(st->model);
	st->model = NULL;
}

static struct gpt_shape stage_shape(const struct rt_stage *st)
{
	return ((const struct gpt_stage *)st->model)->g;
}

/* the stage's device's kernels (device.h) */
#define D (st->dev->ops)

enum kind { EMBED, LAYER, HEAD };

static enum kind kind_of(const struct rt_stage *st, const struct rt_block *b)
{
	if (b->index == 0)
		return EMBED;
	return b->index == st->n_model_blocks - 1 ? HEAD : LAYER;
}

/* tensor i of block b: its parameters (grad false) or gradients */
static float *tp(const struct rt_stage *st, const struct rt_block *b, int i, bool grad)
{
	const struct rt_tensor *t = &st->tensors[b->first_tensor + i];

	return (grad ? st->grads : st->params) + t->offset;
}

/* What a block keeps per position (T per sample) for backward, float32:
 *   embedding: the token ids (int32 in float slots) [1], the output [C]
 *   block: mean1, rstd1 [1 each], qkv [3C], lse [NH], x2 = x + attention
 *          [C], mean2, rstd2, fc [4C], the output [C]: 9 C + NH + 4
 *   head: mean, rstd, logits [V]
 * and the inputs of its linear layers as the device keeps them
 * (kept_bytes an element: float32, or bf16 with train.precision "bf16"):
 *   block: ln1 [C], att [C], ln2 [C], gelu(fc) [4C]; head: lnf [C]
 * each array [max_rows * T][width], one after the other, the kept ones
 * after the float32 ones, each at 64 bytes. */
#define ALIGN 64

/* floats per sample of n kept elements a position in `arrays` arrays,
 * with room to align each (and their start) */
static size_t kept_floats(const struct rt_stage *st, size_t T, size_t n, int arrays)
{
	return (T * n * (size_t)st->dev->kept_bytes + (size_t)(arrays + 1) * ALIGN) / sizeof(float);
}

static size_t gpt_act_floats(const struct rt_stage *st, const struct rt_block *b)
{
	struct gpt_shape g = stage_shape(st);
	size_t T = (size_t)g.T, C = (size_t)g.C;

	switch (kind_of(st, b)) {
	case EMBED:
		return T * (C + 1);
	case HEAD:
		return T * (2 + (size_t)g.V) + kept_floats(st, T, C, 1);
	default:
		return T * (9 * C + (size_t)g.NH + 4) + kept_floats(st, T, 7 * C, 4);
	}
}

/* A block's scratch during one pass (acts->work): the float32 input of a
 * linear layer before the device keeps its copy, and backward's gradients
 * of the kept inputs: 4C a position in a block (its feed-forward), C in the
 * head. */
static size_t gpt_work_floats(const struct rt_stage *st, const struct rt_block *b)
{
	struct gpt_shape g = stage_shape(st);

	switch (kind_of(st, b)) {
	case EMBED:
		return 0;
	case HEAD:
		return (size_t)(g.T * g.C);
	default:
		return (size_t)(g.T * 4 * g.C);
	}
}

/* p rounded up to ALIGN */
static void *align_up(void *p)
{
	return (void *)(((uintptr_t)p + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1));
}

/* the kept array of n elements at *at, which moves past it */
static void *kept_array(const struct rt_stage *st, char **at, size_t n)
{
	void *p = align_up(*at);

	*at = (char *)p + n * (size_t)st->dev->kept_bytes;
	return p;
}

/* Where a linear layer's float32 input is written: into its kept array
 * when the device keeps float32 (the input is then kept as it is made),
 * else into the block's work, from which the forward keeps its copy. */
static float *input_at(const struct rt_stage *st, void *kept, float *work)
{
	return st->dev->kept_bytes == (int)sizeof(float) ? kept : work;
}

/* --- the embedding --- */

static void embed_forward(const struct rt_stage *st, const struct rt_block *b, const float *x,
			  float *acts, int max_rows, int rows, const float **y)
{
	struct gpt_shape g = stage_shape(st);
	size_t P = (size_t)max_rows * (size_t)g.T;
	float *out = acts + P;

	/* the ids are in [0, V): the data's vocabulary is checked against it */
	D->embed_forward(st->dev, x, (int32_t *)acts, tp(st, b, 0, false), tp(st, b, 1, false), out,
			 rows, (int)g.T, (int)g.C);
	*y = out;
}

static void embed_backward(const struct rt_stage *st, const struct rt_block *b, float *acts,
			   int rows, const float *dy, float *dx)
{
	struct gpt_shape g = stage_shape(st);

	D->embed_backward(st->dev, (const int32_t *)acts, dy, tp(st, b, 0, true), tp(st, b, 1, true),
			  rows, (int)g.T, (int)g.C);
	if (dx) /* token ids have no gradient */
		D->zero(st->dev, dx, (size_t)rows * (size_t)g.T * sizeof(*dx));
}

/* --- a transformer block --- */

struct layer_acts {
	float *mean1, *rstd1, *qkv, *lse, *x2, *mean2, *rstd2, *fc, *out;
	void *ln1, *att, *ln2, *fcg; /* kept inputs of qkv, proj, fc, fcp */
};

static struct layer_acts layer_acts(const struct rt_stage *st, float *a, int max_rows)
{
	struct gpt_shape g = stage_shape(st);
	size_t P = (size_t)max_rows * (size_t)g.T, C = (size_t)g.C;
	struct layer_acts la;
	char *k;

	la.mean1 = a, a += P;
	la.rstd1 = a, a += P;
	la.qkv = a, a += P * 3 * C;
	la.lse = a, a += P * (size_t)g.NH;
	la.x2 = a, a += P * C;
	la.mean2 = a, a += P;
	la.rstd2 = a, a += P;
	la.fc = a, a += P * 4 * C;
	la.out = a, a += P * C;
	k = (char *)a;
	la.ln1 = kept_array(st, &k, P * C);
	la.att = kept_array(st, &k, P * C);
	la.ln2 = kept_array(st, &k, P * C);
	la.fcg = kept_array(st, &k, P * 4 * C);
	return la;
}

static void layer_forward(const struct rt_stage *st, const struct rt_block *b, const float *x,
			  float *acts, float *work, int max_rows, int rows, const float **y)
{
	struct gpt_shape g = stage_shape(st);
	struct layer_acts a = layer_acts(st, acts, max_rows);
	int N = rows * (int)g.T, C = (int)g.C;
	size_t NC = (size_t)N * (size_t)C;
	float *in;

	in = input_at(st, a.ln1, work);
	D->layernorm_forward(st->dev, x, tp(st, b, LN1_W, false), tp(st, b, LN1_B, false), in, a.mean1,
			     a.rstd1, N, C);
	D->linear_forward(st->dev, in, tp(st, b, QKV_W, false), tp(st, b, QKV_B, false), a.qkv, N, C, 3 * C,
			  a.ln1);
	in = input_at(st, a.att, work);
	D->attention_forward(st->dev, a.qkv, in, a.lse, rows, (int)g.T, C, (int)g.NH);
	D->linear_forward(st->dev, in, tp(st, b, PROJ_W, false), tp(st, b, PROJ_B, false), a.x2, N, C, C,
			  a.att);
	D->add(st->dev, a.x2, x, NC); /* x2 = x + attention */
	in = input_at(st, a.ln2, work);
	D->layernorm_forward(st->dev, a.x2, tp(st, b, LN2_W, false), tp(st, b, LN2_B, false), in, a.mean2,
			     a.rstd2, N, C);
	D->linear_forward(st->dev, in, tp(st, b, FC_W, false), tp(st, b, FC_B, false), a.fc, N, C, 4 * C,
			  a.ln2);
	in = input_at(st, a.fcg, work);
	D->act_forward(st->dev, RT_ACT_GELU, a.fc, in, (size_t)N * 4 * (size_t)C);
	D->linear_forward(st->dev, in, tp(st, b, FCP_W, false), tp(st, b, FCP_B, false), a.out, N, 4 * C, C,
			  a.fcg);
	D->add(st->dev, a.out, a.x2, NC); /* out = x2 + mlp */
	*y = a.out;
}

/* Backward through the block, given dy (the residual stream's gradient,
 * overwritten). The gradients of the kept inputs go through work; fc's
 * gradient overwrites fc, and qkv's gradient the same array after it is
 * read: a block's acts hold one backward only (ops->backward runs once
 * per forward). */
static void layer_backward(const struct rt_stage *st, const struct rt_block *b, const float *x,
			   float *acts, float *work, int max_rows, int rows, float *dy, float *dx)
{
	struct gpt_shape g = stage_shape(st);
	struct layer_acts a = layer_acts(st, acts, max_rows);
	int N = rows * (int)g.T, C = (int)g.C;
	size_t NC = (size_t)N * (size_t)C;

	/* out = x2 + fcp(gelu(fc(ln2(x2)))): dy reaches x2 directly and through the MLP */
	D->linear_backward(st->dev, NULL, a.fcg, tp(st, b, FCP_W, false), dy, work, tp(st, b, FCP_W, true),
			   tp(st, b, FCP_B, true), N, 4 * C, C, true);
	D->act_backward(st->dev, RT_ACT_GELU, a.fc, work, a.fc, (size_t)N * 4 * (size_t)C);
	D->linear_backward(st->dev, NULL, a.ln2, tp(st, b, FC_W, false), a.fc, work, tp(st, b, FC_W, true),
			   tp(st, b, FC_B, true), N, C, 4 * C, true);
	D->layernorm_backward(st->dev, work, a.x2, tp(st, b, LN2_W, false), a.mean2, a.rstd2, dy,
			      tp(st, b, LN2_W, true), tp(st, b, LN2_B, true), N, C);
	/* dy is now d x2; x2 = x + proj(attention(qkv(ln1(x)))) */
	D->linear_backward(st->dev, NULL, a.att, tp(st, b, PROJ_W, false), dy, work, tp(st, b, PROJ_W, true),
			   tp(st, b, PROJ_B, true), N, C, C, true);
	D->attention_backward(st->dev, work, a.qkv, a.lse, a.fc, rows, (int)g.T, C, (int)g.NH);
	D->linear_backward(st->dev, NULL, a.ln1, tp(st, b, QKV_W, false), a.fc, work, tp(st, b, QKV_W, true),
			   tp(st, b, QKV_B, true), N, C, 3 * C, true);
	D->layernorm_backward(st->dev, work, x, tp(st, b, LN1_W, false), a.mean1, a.rstd1, dy,
			      tp(st, b, LN1_W, true), tp(st, b, LN1_B, true), N, C);
	if (dx)
		D->copy(st->dev, dx, dy, NC * sizeof(*dx));
}

/* --- the head --- */

struct head_acts {
	float *mean, *rstd, *logits;
	void *ln; /* the kept input of the logits' product */
};

static struct head_acts head_acts(const struct rt_stage *st, float *a, int max_rows)
{
	struct gpt_shape g = stage_shape(st);
	size_t P = (size_t)max_rows * (size_t)g.T;
	struct head_acts h;
	char *k;

	h.mean = a, a += P;
	h.rstd = a, a += P;
	h.logits = a, a += P * (size_t)g.V;
	k = (char *)a;
	h.ln = kept_array(st, &k, P * (size_t)g.C);
	return h;
}

static void head_forward(const struct rt_stage *st, const struct rt_block *b, const float *x,
			 float *acts, float *work, int max_rows, int rows, const float **y)
{
	struct gpt_shape g = stage_shape(st);
	struct head_acts h = head_acts(st, acts, max_rows);
	float *in = input_at(st, h.ln, work);
	int N = rows * (int)g.T;

	D->layernorm_forward(st->dev, x, tp(st, b, 0, false), tp(st, b, 1, false), in, h.mean, h.rstd, N,
			     (int)g.C);
	D->linear_forward(st->dev, in, tp(st, b, 2, false), NULL, h.logits, N, (int)g.C, (int)g.V, h.ln);
	*y = h.logits;
}

/* dy: the logits' gradient; dln goes through work. dx is never NULL
 * here: only stage 0's first block gets none, and that is the embedding. */
static void head_backward(const struct rt_stage *st, const struct rt_block *b, const float *x,
			  float *acts, float *work, int max_rows, int rows, const float *dy, float *dx)
{
	struct gpt_shape g = stage_shape(st);
	struct head_acts h = head_acts(st, acts, max_rows);
	size_t C = (size_t)g.C;
	int N = rows * (int)g.T;

	D->linear_backward(st->dev, NULL, h.ln, tp(st, b, 2, false), dy, dx ? work : NULL,
			   tp(st, b, 2, true), NULL, N, (int)C, (int)g.V, true);
	if (!dx)
		return;
	D->zero(st->dev, dx, (size_t)N * C * sizeof(*dx));
	D->layernorm_backward(st->dev, work, x, tp(st, b, 0, false), h.mean, h.rstd, dx, tp(st, b, 0, true),
			      tp(st, b, 1, true), N, (int)C);
}

/* --- dispatch --- */

static void gpt_forward(const struct rt_stage *st, const struct rt_block *b, const float *x,
			float *acts, float *work, int max_rows, int rows, const float **y)
{
	switch (kind_of(st, b)) {
	case EMBED:
		embed_forward(st, b, x, acts, max_rows, rows, y);
		break;
	case HEAD:
		head_forward(st, b, x, acts, work, max_rows, rows, y);
		break;
	default:
		layer_forward(st, b, x, acts, work, max_rows, rows, y);
	}
}

static void gpt_backward(const struct rt_stage *st, const struct rt_block *b, const float *x,
			 float *acts, float *work, int max_rows, int rows, float *dy, float *dx)
{
	switch (kind_of(st, b)) {
	case EMBED:
		embed_backward(st, b, acts, rows, dy, dx);
		break;
	case HEAD:
		head_backward(st, b, x, acts, work, max_rows, rows, dy, dx);
		break;
	default:
		layer_backward(st, b, x, acts, work, max_rows, rows, dy, dx);
	}
}

/* --- the model's table --- */

const struct rt_model_ops rt_gpt_model = {
	.type = "gpt",
	.block_noun = "block",
	.blocks_are = "embedding + model.layers + head",
	.reads_tokens = true,
	.check = gpt_check,
	.config = gpt_config,
	.blocks = gpt_blocks,
	.width = gpt_width,
	.tensors = gpt_tensors,
	.cost = gpt_cost,
	.act_floats = gpt_act_floats,
	.work_floats = gpt_work_floats,
	.init = gpt_init,
	.stage_init = gpt_stage_init,
	.stage_free = gpt_stage_free,
	.forward = gpt_forward,
	.backward = gpt_backward,
	.part = NULL,
	.ties = gpt_ties,
};
