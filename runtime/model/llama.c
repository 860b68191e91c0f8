/*
 * llama.c - the Llama-family transformer behind the model interface (see
 * llama.h): its shape, tensors, cost and initialisation, its rotary
 * frequencies, and the forward and backward passes of its three kinds of
 * block (embedding, transformer block, head), built from the kernels of
 * kernels.h and transformer.h through the stage's device.
 *
 * Sections: the model, rotary frequencies, the stage's view, the
 * embedding, a transformer block, the head, dispatch, the model's table.
 */
#include "runtime/model/llama.h"

#include "runtime/model/device.h"
#include "runtime/model/internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/transformer.h"

/* --- the model --- */

struct llama_shape {
	long V, T, L, NH, NKV, C, hs, I;
	long QKV; /* a position's q, k and v: (NH + 2 NKV) hs */
	bool bias, tied;
};

static struct llama_shape shape_of(const struct spec *s)
{
	struct llama_shape g = { s->model.vocab_size, s->model.context, s->model.layers,
				 s->model.heads, s->model.kv_heads ? s->model.kv_heads : s->model.heads,
				 s->model.embd, 0, s->model.intermediate_size, 0,
				 s->model.qkv_bias, s->model.tie_word_embeddings };

	g.hs = g.NH > 0 ? g.C / g.NH : 0;
	g.QKV = (g.NH + 2 * g.NKV) * g.hs;
	return g;
}

static int llama_blocks(const struct spec *s)
{
	return (int)s->model.layers + 2;
}

static long llama_width(const struct spec *s, int b)
{
	struct llama_shape g = shape_of(s);

	if (b < 0 || b > llama_blocks(s))
		return -1;
	if (b == 0)
		return g.T;
	if (b == llama_blocks(s))
		return g.T * g.V;
	return g.T * g.C;
}

static int llama_check(const struct spec *s, struct dt_err *err)
{
	struct llama_shape g = shape_of(s);
	long widest;

	if (g.V < 2 || g.V > (1L << 24))
		return dt_err_add(err, "model.vocab_size: must be in [2, 16777216] (token ids travel as float32) (got %ld)",
				  g.V);
	if (g.T < 1 || g.C < 1 || g.NH < 1 || g.NKV < 1 || g.I < 1 || g.L < 1 ||
	    g.L > RT_MAX_BLOCKS - 2)
		return dt_err_add(err, "model: context, embd, heads, kv_heads, intermediate_size and layers must be >= 1, layers <= %d",
				  RT_MAX_BLOCKS - 2);
	if (g.C % g.NH)
		return dt_err_add(err, "model.heads: must divide model.embd (got %ld heads, embd %ld)",
				  g.NH, g.C);
	if (g.NH % g.NKV)
		return dt_err_add(err, "model.kv_heads: must divide model.heads (got %ld kv heads, %ld heads)",
				  g.NKV, g.NH);
	if (g.hs % 2)
		return dt_err_add(err, "model.heads: the head size model.embd / model.heads must be even for the rotary embeddings (got %ld)",
				  g.hs);
	/* a sample's widths are ints: the head's [T][V], the MLP's [T][2I], q k v's */
	widest = g.V > 2 * g.I ? g.V : 2 * g.I;
	widest = widest > g.QKV ? widest : g.QKV;
	if (g.T * widest > INT_MAX)
		return dt_err_add(err, "model: context x %ld (the widest of vocab_size, 2 intermediate_size and q, k, v) is more than %d floats a sample",
				  widest, INT_MAX);
	if (g.V * g.C > INT_MAX) /* the tied embedding travels in one message */
		return dt_err_add(err, "model: vocab_size x embd (%ld x %ld) is more than %d floats",
				  g.V, g.C, INT_MAX);
	return 0;
}

static int llama_config(const struct spec *s, struct dt_buf *out)
{
	struct llama_shape g = shape_of(s);
	const struct spec_rope_scaling *r = &s->model.rope_scaling;
	bool l3 = !strcmp(r->rope_type, "llama3");
	int rc;

	rc = dt_buf_printf(out, "{\"vocab_size\":%ld,\"context\":%ld,\"layers\":%ld,\"heads\":%ld,\"embd\":%ld,\"kv_heads\":%ld,\"intermediate_size\":%ld,\"rope_theta\":%.17g,\"rope_scaling.rope_type\":\"%s\"",
			   g.V, g.T, g.L, g.NH, g.C, g.NKV, g.I, s->model.rope_theta, r->rope_type);
	if (!rc && l3)
		rc = dt_buf_printf(out, ",\"rope_scaling.factor\":%.17g,\"rope_scaling.low_freq_factor\":%.17g,\"rope_scaling.high_freq_factor\":%.17g,\"rope_scaling.original_max_position_embeddings\":%ld",
				   r->factor, r->low_freq_factor, r->high_freq_factor,
				   r->original_max_position_embeddings);
	if (!rc)
		rc = dt_buf_printf(out, ",\"rms_norm_eps\":%.17g,\"tie_word_embeddings\":%s,\"qkv_bias\":%s}",
				   s->model.rms_norm_eps, g.tied ? "true" : "false",
				   g.bias ? "true" : "false");
	return rc ? -ENOMEM : 0;
}

/* A transformer block's tensors, in this order (enum layer_tensor); the
 * biases last, when the model has them. */
enum layer_tensor {
	IN_NORM, Q_W, K_W, V_W, O_W, POST_NORM, GATE_W, UP_W, DOWN_W, Q_B, K_B, V_B,
	LAYER_TENSORS
};

static int llama_tensors(const struct spec *s, int b, struct rt_tensor *t)
{
	struct llama_shape g = shape_of(s);
	char p[64];

	if (b == 0) {
		rt__model_tensor(&t[0], "model.", "embed_tokens.weight", g.V, g.C);
		return 1;
	}
	if (b == llama_blocks(s) - 1) {
		rt__model_tensor(&t[0], "model.", "norm.weight", g.C, 0);
		rt__model_tensor(&t[1], "", "lm_head.weight", g.V, g.C);
		return 2;
	}
	snprintf(p, sizeof(p), "model.layers.%d.", b - 1);
	rt__model_tensor(&t[IN_NORM], p, "input_layernorm.weight", g.C, 0);
	rt__model_tensor(&t[Q_W], p, "self_attn.q_proj.weight", g.NH * g.hs, g.C);
	rt__model_tensor(&t[K_W], p, "self_attn.k_proj.weight", g.NKV * g.hs, g.C);
	rt__model_tensor(&t[V_W], p, "self_attn.v_proj.weight", g.NKV * g.hs, g.C);
	rt__model_tensor(&t[O_W], p, "self_attn.o_proj.weight", g.C, g.NH * g.hs);
	rt__model_tensor(&t[POST_NORM], p, "post_attention_layernorm.weight", g.C, 0);
	rt__model_tensor(&t[GATE_W], p, "mlp.gate_proj.weight", g.I, g.C);
	rt__model_tensor(&t[UP_W], p, "mlp.up_proj.weight", g.I, g.C);
	rt__model_tensor(&t[DOWN_W], p, "mlp.down_proj.weight", g.C, g.I);
	if (!g.bias)
		return Q_B;
	rt__model_tensor(&t[Q_B], p, "self_attn.q_proj.bias", g.NH * g.hs, 0);
	rt__model_tensor(&t[K_B], p, "self_attn.k_proj.bias", g.NKV * g.hs, 0);
	rt__model_tensor(&t[V_B], p, "self_attn.v_proj.bias", g.NKV * g.hs, 0);
	return LAYER_TENSORS;
}

static int llama_ties(const struct spec *s, struct rt_tie *t)
{
	if (!s->model.tie_word_embeddings)
		return 0;
	memset(t, 0, sizeof(*t));
	t->block[0] = 0;
	t->block[1] = llama_blocks(s) - 1;
	snprintf(t->name[0], sizeof(t->name[0]), "model.embed_tokens.weight");
	snprintf(t->name[1], sizeof(t->name[1]), "lm_head.weight");
	return 1;
}

static size_t llama_cost(const struct spec *s, int b)
{
	struct llama_shape g = shape_of(s);
	size_t T = (size_t)g.T, C = (size_t)g.C, A = (size_t)(g.NH * g.hs);

	if (b == 0)
		return T * C;
	if (b == llama_blocks(s) - 1)
		return T * (size_t)g.V * C;
	return T * (C * (size_t)g.QKV + C * A + 3 * C * (size_t)g.I + T * C);
}

/* n values ~ normal(0, std) from r */
static void llama_init(const struct spec *s, int b, float *params)
{
	struct llama_shape g = shape_of(s);
	size_t V = (size_t)g.V, C = (size_t)g.C, I = (size_t)g.I, A = (size_t)(g.NH * g.hs);
	size_t qkv = (size_t)g.QKV;
	struct dt_rng r;
	float *p = params;

	if (b == llama_blocks(s) - 1) {
		rt__fill(p, C, 1.0f);
		/* tied: the copy of block 0's embedding, drawn the same way */
		dt_rng_seed(&r, (uint64_t)s->model.init_seed, g.tied ? 0 : (uint64_t)b);
		rt__fill_normal(&r, p + C, V * C, 0.02);
		return;
	}
	dt_rng_seed(&r, (uint64_t)s->model.init_seed, (uint64_t)b);
	if (b == 0) {
		rt__fill_normal(&r, p, V * C, 0.02);
		return;
	}
	rt__fill(p, C, 1.0f), p += C;                          /* input_layernorm */
	rt__fill_normal(&r, p, qkv * C, 0.02), p += qkv * C;   /* q, k, v */
	rt__fill_normal(&r, p, C * A, 0.02), p += C * A;       /* o_proj */
	rt__fill(p, C, 1.0f), p += C;                          /* post_attention_layernorm */
	rt__fill_normal(&r, p, 3 * I * C, 0.02), p += 3 * I * C; /* gate, up, down */
	if (g.bias)
		rt__fill(p, qkv, 0.0f);
}

/* --- rotary frequencies --- */

/* f_i = theta^(-2i / hs), rescaled as Llama 3.1's rope_scaling (llama.h) */
static double rope_freq(const struct spec *s, int i, long hs)
{
	const struct spec_rope_scaling *r = &s->model.rope_scaling;
	double f = 1.0 / pow(s->model.rope_theta, (double)(2 * i) / (double)hs), w, O, sm;

	if (strcmp(r->rope_type, "llama3"))
		return f;
	w = 2.0 * M_PI / f;
	O = (double)r->original_max_position_embeddings;
	if (w < O / r->high_freq_factor)
		return f;
	if (w > O / r->low_freq_factor)
		return f / r->factor;
	sm = (O / w - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
	return (1.0 - sm) * f / r->factor + sm * f;
}

/* cos and sin of every position's angles: cs and sn [T][hs/2], host */
static void rope_tables(const struct spec *s, long T, long hs, float *cs, float *sn)
{
	long t, half = hs / 2;
	int i;

	for (i = 0; i < half; i++) {
		double f = rope_freq(s, i, hs);

		for (t = 0; t < T; t++) {
			cs[t * half + i] = (float)cos((double)t * f);
			sn[t * half + i] = (float)sin((double)t * f);
		}
	}
}

/* --- the stage's view --- */

struct llama_stage {
	struct llama_shape g;
	float eps;      /* model.rms_norm_eps */
	float *cs, *sn; /* device [T][hs/2]: the rotary angles' cos and sin */
};

/* the rotary tables on the stage's device */
static int put_tables(struct rt_stage *st, struct llama_stage *m, const struct spec *s,
		      struct dt_err *err)
{
	size_t n = (size_t)m->g.T * (size_t)(m->g.hs / 2), bytes = n * sizeof(float);
	float *host = malloc(2 * bytes);
	int rc;

	if (!host)
		return dt_err_add(err, "stage %d: out of memory for the rotary tables", st->stage), -ENOMEM;
	rope_tables(s, m->g.T, m->g.hs, host, host + n);
	rc = rt_dev_alloc(st->dev, bytes, "the rotary cosines", &m->cs, err);
	if (!rc)
		rc = rt_dev_alloc(st->dev, bytes, "the rotary sines", &m->sn, err);
	if (!rc) {
		rt_dev_put(st->dev, m->cs, host, bytes);
		rt_dev_put(st->dev, m->sn, host + n, bytes);
	}
	free(host);
	return rc;
}

static int llama_stage_init(struct rt_stage *st, const struct spec *s, struct dt_err *err)
{
	struct llama_stage *m = calloc(1, sizeof(*m));
	int rc;

	if (!m)
		return dt_err_add(err, "stage %d: out of memory for the Llama's state", st->stage), -ENOMEM;
	m->g = shape_of(s);
	m->eps = (float)s->model.rms_norm_eps;
	st->model = m;
	if (!st->dev->ops->rope)
		return dt_err_add(err, "model.type llama: train.device %s is not supported yet", st->dev->kind),
		       -EINVAL;
	if (st->first_block + st->n_blocks == 1 ||
	    (st->first_block == st->n_model_blocks - 1 && st->n_blocks == 1))
		return 0; /* the embedding or the head alone: no attention */
	rc = put_tables(st, m, s, err);
	if (rc)
		return rc;
	return st->dev->ops->attention_reserve(st->dev, 1, (int)m->g.T, (int)m->g.NH, err);
}

static void llama_stage_free(struct rt_stage *st)
{
	struct llama_stage *m = st->model;

	if (m) {
		rt_dev_free(st->dev, m->cs);
		rt_dev_free(st->dev, m->sn);
	}
	free(m);
	st->model = NULL;
}

static const struct llama_stage *stage_of(const struct rt_stage *st)
{
	return st->model;
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

static struct rt_heads heads_of(struct llama_shape g)
{
	struct rt_heads h = { (int)g.NH, (int)g.NKV, (int)g.hs };

	return h;
}

/* What a block keeps per position (T per sample) for backward, float32:
 *   embedding: the token ids (int32 in float slots) [1]
 *   block: rstd1 [1], h1 = input_layernorm(x) [C], qkv (rotated) [QKV],
 *          att [NH hs], lse [NH], x2 [C], rstd2 [1], h2 [C], gu [2I],
 *          hh = swiglu(gu) [I], out [C]
 *   head: rstd [1], hf = norm(x) [C], logits [V]
 * each array [max_rows * T][width], one after the other. */
static size_t llama_act_floats(const struct rt_stage *st, const struct rt_block *b)
{
	struct llama_shape g = stage_of(st)->g;
	size_t T = (size_t)g.T, C = (size_t)g.C, A = (size_t)(g.NH * g.hs);

	switch (kind_of(st, b)) {
	case EMBED:
		return T * (C + 1);
	case HEAD:
		return T * (1 + C + (size_t)g.V);
	default:
		return T * (2 + 4 * C + (size_t)g.QKV + A + (size_t)g.NH + 3 * (size_t)g.I);
	}
}

/* A block's scratch during backward: the gradient of a product's input
 * [max(C, I)] and of q, k, v [QKV] a position; the head's [C]. */
static size_t llama_work_floats(const struct rt_stage *st, const struct rt_block *b)
{
	struct llama_shape g = stage_of(st)->g;
	size_t wide = (size_t)(g.C > g.I ? g.C : g.I);

	switch (kind_of(st, b)) {
	case EMBED:
		return 0;
	case HEAD:
		return (size_t)(g.T * g.C);
	default:
		return (size_t)g.T * (wide + (size_t)g.QKV);
	}
}

/* --- the embedding --- */

static void embed_forward(const struct rt_stage *st, const struct rt_block *b, const float *x,
			  float *acts, int max_rows, int rows, const float **y)
{
	struct llama_shape g = stage_of(st)->g;
	float *out = acts + (size_t)max_rows * (size_t)g.T;

	/* the ids are in [0, V): the data's vocabulary is checked against it */
	D->embed_forward(st->dev, x, (int32_t *)acts, tp(st, b, 0, false), NULL, out, rows, (int)g.T,
			 (int)g.C);
	*y = out;
}

static void embed_backward(const struct rt_stage *st, const struct rt_block *b, float *acts,
			   int rows, const float *dy, float *dx)
{
	struct llama_shape g = stage_of(st)->g;

	D->embed_backward(st->dev, (const int32_t *)acts, dy, tp(st, b, 0, true), NULL, rows,
			  (int)g.T, (int)g.C);
	if (dx) /* token ids have no gradient */
		D->zero(st->dev, dx, (size_t)rows * (size_t)g.T * sizeof(*dx));
}

/* --- a transformer block --- */

struct layer_acts {
	float *rstd1, *h1, *qkv, *att, *lse, *x2, *rstd2, *h2, *gu, *hh, *out;
};

static struct layer_acts layer_acts(const struct rt_stage *st, float *a, int max_rows)
{
	struct llama_shape g = stage_of(st)->g;
	size_t P = (size_t)max_rows * (size_t)g.T, C = (size_t)g.C, I = (size_t)g.I;
	struct layer_acts la;

	la.rstd1 = a, a += P;
	la.h1 = a, a += P * C;
	la.qkv = a, a += P * (size_t)g.QKV;
	la.att = a, a += P * (size_t)(g.NH * g.hs);
	la.lse = a, a += P * (size_t)g.NH;
	la.x2 = a, a += P * C;
	la.rstd2 = a, a += P;
	la.h2 = a, a += P * C;
	la.gu = a, a += P * 2 * I;
	la.hh = a, a += P * I;
	la.out = a;
	return la;
}

/* the q, k, v biases (one array), or NULL */
static float *qkv_bias(const struct rt_stage *st, const struct rt_block *b, bool grad)
{
	return stage_of(st)->g.bias ? tp(st, b, Q_B, grad) : NULL;
}

static void layer_forward(const struct rt_stage *st, const struct rt_block *b, const float *x,
			  float *acts, int max_rows, int rows, const float **y)
{
	const struct llama_stage *m = stage_of(st);
	struct llama_shape g = m->g;
	struct layer_acts a = layer_acts(st, acts, max_rows);
	int N = rows * (int)g.T, C = (int)g.C, A = (int)(g.NH * g.hs), I = (int)g.I;
	size_t NC = (size_t)N * (size_t)C;

	D->rmsnorm_forward(st->dev, x, tp(st, b, IN_NORM, false), a.h1, a.rstd1, N, C, m->eps);
	D->linear_forward(st->dev, a.h1, tp(st, b, Q_W, false), qkv_bias(st, b, false), a.qkv, N, C,
			  (int)g.QKV, a.h1);
	D->rope(st->dev, a.qkv, rows, (int)g.T, heads_of(g), m->cs, m->sn, false);
	D->attention_heads_forward(st->dev, a.qkv, a.att, a.lse, rows, (int)g.T, heads_of(g));
	D->linear_forward(st->dev, a.att, tp(st, b, O_W, false), NULL, a.x2, N, A, C, a.att);
	D->add(st->dev, a.x2, x, NC); /* x2 = x + attention */
	D->rmsnorm_forward(st->dev, a.x2, tp(st, b, POST_NORM, false), a.h2, a.rstd2, N, C, m->eps);
	D->linear_forward(st->dev, a.h2, tp(st, b, GATE_W, false), NULL, a.gu, N, C, 2 * I, a.h2);
	D->swiglu_forward(st->dev, a.gu, a.hh, N, I);
	D->linear_forward(st->dev, a.hh, tp(st, b, DOWN_W, false), NULL, a.out, N, I, C, a.hh);
	D->add(st->dev, a.out, a.x2, NC); /* out = x2 + mlp */
	*y = a.out;
}

/* Backward through the block, given dy (the residual stream's gradient,
 * overwritten). work: din [rows T][max(C, I)], then dqkv [rows T][QKV];
 * gu's gradient overwrites gu: a block's acts hold one backward only. */
static void layer_backward(const struct rt_stage *st, const struct rt_block *b, const float *x,
			   float *acts, float *work, int max_rows, int rows, float *dy, float *dx)
{
	const struct llama_stage *m = stage_of(st);
	struct llama_shape g = m->g;
	struct layer_acts a = layer_acts(st, acts, max_rows);
	int N = rows * (int)g.T, C = (int)g.C, A = (int)(g.NH * g.hs), I = (int)g.I;
	size_t NC = (size_t)N * (size_t)C;
	float *din = work, *dqkv = work + (size_t)max_rows * (size_t)g.T * (size_t)(C > I ? C : I);

	/* out = x2 + down(swiglu(gate|up(h2))): dy reaches x2 directly and through the MLP */
	D->linear_backward(st->dev, a.hh, NULL, tp(st, b, DOWN_W, false), dy, din,
			   tp(st, b, DOWN_W, true), NULL, N, I, C, true);
	D->swiglu_backward(st->dev, din, a.gu, a.gu, N, I);
	D->linear_backward(st->dev, a.h2, NULL, tp(st, b, GATE_W, false), a.gu, din,
			   tp(st, b, GATE_W, true), NULL, N, C, 2 * I, true);
	D->rmsnorm_backward(st->dev, din, a.x2, tp(st, b, POST_NORM, false), a.rstd2, dy,
			    tp(st, b, POST_NORM, true), N, C);
	/* dy is now d x2; x2 = x + o(attention(rope(qkv(h1)))) */
	D->linear_backward(st->dev, a.att, NULL, tp(st, b, O_W, false), dy, din, tp(st, b, O_W, true),
			   NULL, N, A, C, true);
	D->attention_heads_backward(st->dev, din, a.qkv, a.lse, dqkv, rows, (int)g.T, heads_of(g));
	D->rope(st->dev, dqkv, rows, (int)g.T, heads_of(g), m->cs, m->sn, true);
	D->linear_backward(st->dev, a.h1, NULL, tp(st, b, Q_W, false), dqkv, din, tp(st, b, Q_W, true),
			   qkv_bias(st, b, true), N, C, (int)g.QKV, true);
	D->rmsnorm_backward(st->dev, din, x, tp(st, b, IN_NORM, false), a.rstd1, dy,
			    tp(st, b, IN_NORM, true), N, C);
	if (dx)
		D->copy(st->dev, dx, dy, NC * sizeof(*dx));
}

/* --- the head --- */

struct head_acts {
	float *rstd, *hf, *logits;
};

static struct head_acts head_acts(const struct rt_stage *st, float *a, int max_rows)
{
	struct llama_shape g = stage_of(st)->g;
	size_t P = (size_t)max_rows * (size_t)g.T;
	struct head_acts h;

	h.rstd = a, a += P;
	h.hf = a, a += P * (size_t)g.C;
	h.logits = a;
	return h;
}

static void head_forward(const struct rt_stage *st, const struct rt_block *b, const float *x,
			 float *acts, int max_rows, int rows, const float **y)
{
	const struct llama_stage *m = stage_of(st);
	struct head_acts h = head_acts(st, acts, max_rows);
	int N = rows * (int)m->g.T;

	D->rmsnorm_forward(st->dev, x, tp(st, b, 0, false), h.hf, h.rstd, N, (int)m->g.C, m->eps);
	D->linear_forward(st->dev, h.hf, tp(st, b, 1, false), NULL, h.logits, N, (int)m->g.C,
			  (int)m->g.V, h.hf);
	*y = h.logits;
}

/* dy: the logits' gradient; dhf goes through work. dx is never NULL
 * here: only stage 0's first block gets none, and that is the embedding. */
static void head_backward(const struct rt_stage *st, const struct rt_block *b, const float *x,
			  float *acts, float *work, int max_rows, int rows, const float *dy, float *dx)
{
	struct llama_shape g = stage_of(st)->g;
	struct head_acts h = head_acts(st, acts, max_rows);
	size_t C = (size_t)g.C;
	int N = rows * (int)g.T;

	D->linear_backward(st->dev, h.hf, NULL, tp(st, b, 1, false), dy, dx ? work : NULL,
			   tp(st, b, 1, true), NULL, N, (int)C, (int)g.V, true);
	if (!dx)
		return;
	D->zero(st->dev, dx, (size_t)N * C * sizeof(*dx));
	D->rmsnorm_backward(st->dev, work, x, tp(st, b, 0, false), h.rstd, dx, tp(st, b, 0, true), N,
			    (int)C);
}

/* --- dispatch --- */

static void llama_forward(const struct rt_stage *st, const struct rt_block *b, const float *x,
			  float *acts, float *work, int max_rows, int rows, const float **y)
{
	(void)work;
	switch (kind_of(st, b)) {
	case EMBED:
		embed_forward(st, b, x, acts, max_rows, rows, y);
		break;
	case HEAD:
		head_forward(st, b, x, acts, max_rows, rows, y);
		break;
	default:
		layer_forward(st, b, x, acts, max_rows, rows, y);
	}
}

static void llama_backward(const struct rt_stage *st, const struct rt_block *b, const float *x,
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

const struct rt_model_ops rt_llama_model = {
	.type = "llama",
	.block_noun = "block",
	.blocks_are = "embedding + model.layers + head",
	.reads_tokens = true,
	.check = llama_check,
	.config = llama_config,
	.blocks = llama_blocks,
	.width = llama_width,
	.tensors = llama_tensors,
	.cost = llama_cost,
	.act_floats = llama_act_floats,
	.work_floats = llama_work_floats,
	.init = llama_init,
	.stage_init = llama_stage_init,
	.stage_free = llama_stage_free,
	.forward = llama_forward,
	.backward = llama_backward,
	.part = NULL,
	.ties = llama_ties,
};
