/*
 * mlp.c - the multi-layer perceptron behind the model interface (see
 * mlp.h): its widths, tensors, cost and initialisation, a layer's forward
 * and backward, and the split way's parts of every layer.
 *
 * Sections: the model, layers of a stage, forward and backward, a part of
 * every layer, the model's table.
 */
#include "runtime/model/mlp.h"

#include "runtime/model/device.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"

/* --- the model --- */

int rt_mlp_layers(const struct spec *s)
{
	return (int)s->model.hidden.n + 1;
}

long rt_mlp_width(const struct spec *s, int i)
{
	int layers = rt_mlp_layers(s);

	if (i < 0 || i > layers)
		return -1;
	if (i == 0)
		return s->model.inputs;
	if (i == layers)
		return s->model.outputs;
	return s->model.hidden.v[i - 1];
}

static int mlp_check(const struct spec *s, struct dt_err *err)
{
	enum rt_act act;
	int l, layers = rt_mlp_layers(s);

	if (rt_act_parse(s->model.activation, &act))
		return dt_err_add(err, "model.activation: \"%s\" is not one of relu, gelu, tanh",
				  s->model.activation ? s->model.activation : "(null)");
	if (s->model.hidden.n > 1024) /* the spec table's bound; the split's table is layers^2 */
		return dt_err_add(err, "model.hidden: %zu layers is more than this runtime supports (1024)",
				  s->model.hidden.n);
	for (l = 0; l <= layers; l++) {
		long w = rt_mlp_width(s, l);

		if (w < 1 || w > INT_MAX)
			return dt_err_add(err, "model: width %d of the MLP (inputs, hidden..., outputs) must be in [1, %d] (got %ld)",
					  l, INT_MAX, w);
	}
	return 0;
}

/* {"inputs":I,"hidden":[...],"outputs":O,"activation":"A"}: what format-1
 * checkpoints (checkpoint/ckpt.h) read as, byte for byte */
static int mlp_config(const struct spec *s, struct dt_buf *out)
{
	size_t i;
	int rc;

	rc = dt_buf_printf(out, "{\"inputs\":%ld,\"hidden\":[", s->model.inputs);
	for (i = 0; i < s->model.hidden.n && !rc; i++)
		rc = dt_buf_printf(out, "%s%ld", i ? "," : "", s->model.hidden.v[i]);
	if (!rc)
		rc = dt_buf_printf(out, "],\"outputs\":%ld,\"activation\":\"%s\"}", s->model.outputs,
				   s->model.activation);
	return rc ? -ENOMEM : 0;
}

static int mlp_tensors(const struct spec *s, int l, struct rt_tensor *t)
{
	long in = rt_mlp_width(s, l), out = rt_mlp_width(s, l + 1);

	memset(t, 0, 2 * sizeof(*t));
	/* nn.Sequential(Linear, act, ..., Linear): Linear l is module 2l */
	snprintf(t[0].name, sizeof(t[0].name), "%d.weight", 2 * l);
	t[0].ndim = 2;
	t[0].shape[0] = out;
	t[0].shape[1] = in;
	t[0].decay = true;
	snprintf(t[1].name, sizeof(t[1].name), "%d.bias", 2 * l);
	t[1].ndim = 1;
	t[1].shape[0] = out;
	t[1].decay = true;
	return 2;
}

/* the layer's parameter count, out * in + out (fits: mlp_check bounds the
 * widths and model.c the sum) */
static size_t mlp_cost(const struct spec *s, int l)
{
	size_t in = (size_t)rt_mlp_width(s, l), out = (size_t)rt_mlp_width(s, l + 1);

	return out * in + out;
}

/* Kaiming/He uniform (see mlp.h): depends on (init_seed, l, widths, act) only */
static void mlp_init(const struct spec *s, int l, float *params)
{
	enum rt_act act = RT_ACT_RELU;
	long in = rt_mlp_width(s, l), out = rt_mlp_width(s, l + 1);
	double gain, bound;
	size_t i, nw = (size_t)out * (size_t)in;
	struct dt_rng r;

	rt_act_parse(s->model.activation, &act); /* checked */
	gain = act == RT_ACT_TANH ? 5.0 / 3.0 : sqrt(2.0);
	bound = gain * sqrt(3.0 / (double)in);
	dt_rng_seed(&r, (uint64_t)s->model.init_seed, (uint64_t)l);
	for (i = 0; i < nw; i++)
		params[i] = (float)(bound * (2.0 * dt_rng_uniform_double(&r) - 1.0));
	memset(params + nw, 0, sizeof(*params) * (size_t)out);
}

/* The stage's own state: the activation, parsed once. */
struct mlp_stage {
	enum rt_act act;
};

static int mlp_stage_init(struct rt_stage *st, const struct spec *s, struct dt_err *err)
{
	struct mlp_stage *m = calloc(1, sizeof(*m));

	if (!m)
		return dt_err_add(err, "stage %d: out of memory for the MLP's state", st->stage), -ENOMEM;
	rt_act_parse(s->model.activation, &m->act); /* checked */
	st->model = m;
	return 0;
}

static void mlp_stage_free(struct rt_stage *st)
{
	free(st->model);
	st->model = NULL;
}

/* --- layers of a stage --- */

enum rt_act rt_mlp_act(const struct rt_stage *st)
{
	return ((const struct mlp_stage *)st->model)->act;
}

/* an activation follows block b: it is not the model's last */
static bool has_act(const struct rt_stage *st, const struct rt_block *b)
{
	return b->index < st->n_model_blocks - 1;
}

struct rt_layer rt_mlp_layer(const struct rt_stage *st, int i)
{
	const struct rt_block *b = &st->blocks[i];
	size_t nw = (size_t)b->out * (size_t)b->in;
	struct rt_layer ly = {
		.index = b->index, .in = b->in, .out = b->out, .act = has_act(st, b),
		.offset = b->offset, .n_params = b->n_params,
		.w = b->params, .b = b->params ? b->params + nw : NULL,
		.dw = b->grads, .db = b->grads ? b->grads + nw : NULL,
	};

	return ly;
}

/* a layer keeps its pre-activations z [max_rows][out] and, when an
 * activation follows, its outputs a [max_rows][out] after them */
static size_t mlp_act_floats(const struct rt_stage *st, const struct rt_block *b)
{
	return (size_t)b->out * (has_act(st, b) ? 2 : 1);
}

float *rt_mlp_z(const struct rt_stage *st, const struct rt_acts *acts, int i)
{
	(void)st;
	return acts->blk[i];
}

/* layer i's outputs in acts */
static float *layer_a(const struct rt_stage *st, const struct rt_acts *acts, int i)
{
	const struct rt_block *b = &st->blocks[i];

	return has_act(st, b) ? acts->blk[i] + (size_t)acts->max_rows * (size_t)b->out : acts->blk[i];
}

/* --- forward and backward --- */

/* The MLP's layers keep their float32 inputs (the previous layer's
 * outputs, which the activation's backward reads too): nothing is kept in
 * the device's format. */
static void mlp_forward(const struct rt_stage *st, const struct rt_block *b, const float *x,
			float *acts, float *work, int max_rows, int rows, const float **y)
{
	struct rt_layer ly = rt_mlp_layer(st, b->index - st->first_block);
	struct rt_dev *d = st->dev;
	float *z = acts;

	(void)work;
	d->ops->linear_forward(d, x, ly.w, ly.b, z, rows, ly.in, ly.out, NULL);
	if (!ly.act) {
		*y = z;
		return;
	}
	d->ops->act_forward(d, rt_mlp_act(st), z, z + (size_t)max_rows * (size_t)ly.out,
			    (size_t)rows * (size_t)ly.out);
	*y = z + (size_t)max_rows * (size_t)ly.out;
}

static void mlp_backward(const struct rt_stage *st, const struct rt_block *b, const float *x,
			 float *acts, float *work, int max_rows, int rows, float *dy, float *dx)
{
	struct rt_layer ly = rt_mlp_layer(st, b->index - st->first_block);
	struct rt_dev *d = st->dev;

	(void)max_rows, (void)work;
	/* dy becomes dLoss/d(pre-activation), in place */
	if (ly.act)
		d->ops->act_backward(d, rt_mlp_act(st), acts, dy, dy, (size_t)rows * (size_t)ly.out);
	d->ops->linear_backward(d, x, NULL, ly.w, dy, dx, ly.dw, ly.db, rows, ly.in, ly.out, true);
}

/* --- a part of every layer --- */


void rt_part_cols(int width, int k, int L, int *c0, int *c1)
{
	long lines = (width + 15) / 16;
	long a = lines * k / L * 16, b = lines * (k + 1) / L * 16;

	*c0 = (int)(a < width ? a : width);
	*c1 = (int)(b < width ? b : width);
}

static int mlp_part_spans(const struct rt_stage *st, int k, int L, struct rt_span *spans)
{
	int i, n = 0, c0, c1;

	for (i = 0; i < st->n_blocks; i++) {
		struct rt_layer lyv = rt_mlp_layer(st, i), *ly = &lyv;

		rt_part_cols(ly->out, k, L, &c0, &c1);
		if (c1 <= c0)
			continue;
		spans[n++] = (struct rt_span){ ly->offset + (size_t)c0 * (size_t)ly->in,
					       (size_t)(c1 - c0) * (size_t)ly->in };
		spans[n++] = (struct rt_span){ ly->offset + (size_t)ly->out * (size_t)ly->in + (size_t)c0,
					       (size_t)(c1 - c0) };
	}
	return n;
}

/* The activation (or its backward, with dy) over columns [c0, c1) of
 * [rows][width] arrays. */
static void act_cols(enum rt_act act, const float *x, const float *dy, float *y, int rows,
		     int width, int c0, int c1)
{
	size_t r, at;

	if (c1 <= c0)
		return;
	for (r = 0; r < (size_t)rows; r++) {
		at = r * (size_t)width + (size_t)c0;
		if (dy)
			rt_act_backward(act, x + at, dy + at, y + at, (size_t)(c1 - c0));
		else
			rt_act_forward(act, x + at, y + at, (size_t)(c1 - c0));
	}
}

static bool mlp_head_rows(const struct rt_stage *st, int L)
{
	struct rt_layer last = rt_mlp_layer(st, st->n_blocks - 1);

	return L > 1 && !last.act && (last.out + 15) / 16 < 2 * L;
}

/* The head's rows [r0, r1) of the node's rows, checked against them. */
static bool head_rows_ok(const struct rt_part *p, int rows)
{
	return p->r0 >= 0 && p->r0 <= p->r1 && p->r1 <= rows;
}

static int mlp_forward_part(const struct rt_stage *st, struct rt_acts *acts, int rows,
			  const struct rt_part *p, const float **y)
{
	bool by_rows = mlp_head_rows(st, p->L);
	const float *in;
	int i, c0, c1, rc;

	if (by_rows && !head_rows_ok(p, rows))
		return -EINVAL;
	in = acts->x;
	for (i = 0; i < st->n_blocks; i++) {
		struct rt_layer lyv = rt_mlp_layer(st, i), *ly = &lyv;

		if (by_rows && i == st->n_blocks - 1) {
			/* no activation, and no sync: the caller's loss reads
			 * these rows only (rt_part_head_rows) */
			rt_linear_forward_cols(in + (size_t)p->r0 * (size_t)ly->in, ly->w, ly->b,
					       rt_mlp_z(st, acts, i) + (size_t)p->r0 * (size_t)ly->out,
					       p->r1 - p->r0, ly->in, ly->out, 0, ly->out);
			in = layer_a(st, acts, i);
			break;
		}
		rt_part_cols(ly->out, p->k, p->L, &c0, &c1);
		rt_linear_forward_cols(in, ly->w, ly->b, rt_mlp_z(st, acts, i), rows, ly->in, ly->out, c0, c1);
		if (ly->act)
			act_cols(rt_mlp_act(st), rt_mlp_z(st, acts, i), NULL, layer_a(st, acts, i), rows, ly->out, c0, c1);
		rc = p->sync(p->ctx);
		if (rc)
			return rc;
		in = layer_a(st, acts, i);
	}
	acts->rows = rows;
	*y = in;
	return 0;
}

/* Layers top .. 0, each cut by columns: dz (whole since the last sync) is
 * layer top's output gradient; next is free for the layer below's, cur
 * holds dz or is free too. */
static int backward_cols(struct rt_stage *st, struct rt_acts *acts, const float *dz, float *dx,
			 const struct rt_part *p, int top, float *cur, float *next)
{
	int rows = acts->rows, i, c0, c1, i0, i1, rc;
	float *t;

	/* this block of the weights' gradient, then this block of the
	 * columns of the layer below's; once every replica has made its
	 * block, that is the next dz */
	for (i = top; i >= 0; i--) {
		struct rt_layer lyv = rt_mlp_layer(st, i), *ly = &lyv;
		const float *in = i > 0 ? layer_a(st, acts, i - 1) : acts->x;

		rt_part_cols(ly->out, p->k, p->L, &c0, &c1);
		rt_part_cols(ly->in, p->k, p->L, &i0, &i1);
		rt_linear_backward_cols(in, dz, ly->dw, ly->db, rows, ly->in, ly->out, c0, c1);
		if (i == 0) {
			if (dx)
				rt_linear_dx_cols(ly->w, dz, dx, rows, ly->in, ly->out, i0, i1);
			break;
		}
		rt_linear_dx_cols(ly->w, dz, next, rows, ly->in, ly->out, i0, i1);
		/* layer i-1 is not the model's last: an activation follows it */
		act_cols(rt_mlp_act(st), rt_mlp_z(st, acts, i - 1), next, next, rows, ly->in, i0, i1);
		rc = p->sync(p->ctx);
		if (rc)
			return rc;
		dz = next;
		t = cur;
		cur = next;
		next = t;
	}
	return 0;
}

/* The head cut by rows (rt_part_head_rows): this block's rows of its
 * input gradient and of the activation's below it, a sync (every block's
 * rows of dy and of that gradient are in), a block of the head's dW
 * columns over all rows and the owner's db, then the layers below. */
static int backward_head_rows(struct rt_stage *st, struct rt_acts *acts, const float *dy,
			      float *dx, const struct rt_part *p)
{
	int n = st->n_blocks, rows = acts->rows, nr = p->r1 - p->r0, i0, i1, c0, c1, rc;
	struct rt_layer lyv = rt_mlp_layer(st, n - 1), *ly = &lyv;
	float *dz = n > 1 ? acts->dbuf[1] : dx;
	size_t at = (size_t)p->r0 * (size_t)ly->in;

	if (dz)
		rt_linear_dx_cols(ly->w, dy + (size_t)p->r0 * (size_t)ly->out, dz + at, nr, ly->in,
				  ly->out, 0, ly->in);
	if (n > 1) /* layer n - 2 is not the model's last: an activation follows it */
		rt_act_backward(rt_mlp_act(st), rt_mlp_z(st, acts, n - 2) + at, dz + at, dz + at,
				(size_t)nr * (size_t)ly->in);
	rc = p->sync(p->ctx);
	if (rc)
		return rc;
	rt_part_cols(ly->in, p->k, p->L, &i0, &i1);
	rt_linear_dw_in_cols(n > 1 ? layer_a(st, acts, n - 2) : acts->x, dy, ly->dw, rows, ly->in, ly->out,
			     i0, i1);
	rt_part_cols(ly->out, p->k, p->L, &c0, &c1); /* the rows this block owns */
	rt_linear_backward_cols(NULL, dy, NULL, ly->db, rows, ly->in, ly->out, c0, c1);
	if (n > 2) /* layer n - 2's sync comes after every block's dW columns */
		return backward_cols(st, acts, dz, dx, p, n - 2, dz, acts->dbuf[0]);
	if (n == 2)
		rc = backward_cols(st, acts, dz, dx, p, 0, dz, acts->dbuf[0]);
	/* no sync below: one, so that the owner finds the head's rows whole */
	return rc ? rc : p->sync(p->ctx);
}

static int mlp_backward_part(struct rt_stage *st, struct rt_acts *acts, const float *dy, float *dx,
			   const struct rt_part *p)
{
	struct rt_layer lastv;
	const struct rt_layer *last;
	int rows = acts->rows, c0, c1, rc;
	bool by_rows = mlp_head_rows(st, p->L);

	if (by_rows && !head_rows_ok(p, rows))
		return -EINVAL;
	if (by_rows)
		return backward_head_rows(st, acts, dy, dx, p);
	lastv = rt_mlp_layer(st, st->n_blocks - 1);
	last = &lastv;
	if (!last->act) /* logits: dy is the last layer's output gradient */
		return backward_cols(st, acts, dy, dx, p, st->n_blocks - 1, acts->dbuf[0],
				     acts->dbuf[1]);
	rt_part_cols(last->out, p->k, p->L, &c0, &c1);
	act_cols(rt_mlp_act(st), rt_mlp_z(st, acts, st->n_blocks - 1), dy, acts->dbuf[0], rows, last->out, c0, c1);
	rc = p->sync(p->ctx);
	if (rc)
		return rc;
	return backward_cols(st, acts, acts->dbuf[0], dx, p, st->n_blocks - 1, acts->dbuf[0],
			     acts->dbuf[1]);
}

/* --- the model's table --- */

static const struct rt_part_ops mlp_part = {
	.head_rows = mlp_head_rows,
	.spans = mlp_part_spans,
	.forward = mlp_forward_part,
	.backward = mlp_backward_part,
};

const struct rt_model_ops rt_mlp_model = {
	.type = "mlp",
	.block_noun = "layer",
	.blocks_are = "model.hidden + output",
	.check = mlp_check,
	.config = mlp_config,
	.blocks = rt_mlp_layers,
	.width = rt_mlp_width,
	.tensors = mlp_tensors,
	.cost = mlp_cost,
	.act_floats = mlp_act_floats,
	.init = mlp_init,
	.stage_init = mlp_stage_init,
	.stage_free = mlp_stage_free,
	.forward = mlp_forward,
	.backward = mlp_backward,
	.part = &mlp_part,
};
