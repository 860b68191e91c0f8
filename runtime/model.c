/*
 * model.c - the MLP of a job spec: widths and parameter counts, the stage
 * split, stage and activation storage, initialisation, forward and backward
 * of one stage (see model.h).
 *
 * Sections: model queries, stage split, stages, activations, forward and
 * backward.
 */
#include "runtime/model.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rng.h"

/* --- model queries --- */

int rt_model_layers(const struct spec *s)
{
	return (int)s->model.hidden.n + 1;
}

long rt_model_width(const struct spec *s, int i)
{
	int layers = rt_model_layers(s);

	if (i < 0 || i > layers)
		return -1;
	if (i == 0)
		return s->model.inputs;
	if (i == layers)
		return s->model.outputs;
	return s->model.hidden.v[i - 1];
}

size_t rt_layer_params(const struct spec *s, int l)
{
	long in, out;
	size_t n;

	if (l < 0 || l >= rt_model_layers(s))
		return 0;
	in = rt_model_width(s, l);
	out = rt_model_width(s, l + 1);
	if (in < 1 || out < 1)
		return 0;
	if (__builtin_mul_overflow((size_t)out, (size_t)in, &n) ||
	    __builtin_add_overflow(n, (size_t)out, &n))
		return SIZE_MAX;
	return n;
}

/* sum of rt_layer_params over [from, to), saturating at SIZE_MAX */
static size_t layers_params(const struct spec *s, int from, int to)
{
	size_t sum = 0;
	int l;

	for (l = from; l < to; l++)
		if (__builtin_add_overflow(sum, rt_layer_params(s, l), &sum))
			return SIZE_MAX;
	return sum;
}

size_t rt_model_params(const struct spec *s)
{
	return layers_params(s, 0, rt_model_layers(s));
}

size_t rt_split_params(const struct spec *s, const int *first, int k)
{
	return layers_params(s, first[k], first[k + 1]);
}

/* Checks what model.c relies on; the spec parser's bounds already ensure it
 * for a resolved spec, but a caller may build one by hand. */
static int check_model(const struct spec *s, struct dt_err *err)
{
	enum rt_act act;
	int l, layers = rt_model_layers(s);

	if (s->model.type && strcmp(s->model.type, "mlp"))
		return dt_err_add(err, "model.type: \"%s\" is not a model this runtime builds (expected \"mlp\")",
				  s->model.type);
	if (rt_act_parse(s->model.activation, &act))
		return dt_err_add(err, "model.activation: \"%s\" is not one of relu, gelu, tanh",
				  s->model.activation ? s->model.activation : "(null)");
	if (s->model.hidden.n > 1024) /* the spec table's bound; the split's table is layers^2 */
		return dt_err_add(err, "model.hidden: %zu layers is more than this runtime supports (1024)",
				  s->model.hidden.n);
	for (l = 0; l <= layers; l++) {
		long w = rt_model_width(s, l);

		if (w < 1 || w > INT_MAX)
			return dt_err_add(err, "model: width %d of the MLP (inputs, hidden..., outputs) must be in [1, %d] (got %ld)",
					  l, INT_MAX, w);
	}
	if (rt_model_params(s) == SIZE_MAX)
		return dt_err_add(err, "model: the parameter count does not fit in memory addresses; make model.hidden narrower");
	return 0;
}

/* --- stage split --- */

/* Can layers cost[0..n) be cut into at most k contiguous runs of cost <= cap? */
static bool split_fits(const size_t *cost, int n, int k, size_t cap)
{
	size_t run = 0;
	int used = 1, i;

	for (i = 0; i < n; i++) {
		if (cost[i] > cap)
			return false;
		if (run + cost[i] > cap) {
			if (++used > k)
				return false;
			run = 0;
		}
		run += cost[i];
	}
	return true;
}

/* parallel.stage_layers: the user's split, checked again (a spec built by
 * hand, or a stage count other than parallel.pipeline) */
static int split_explicit(const struct spec *s, int stages, int *first, struct dt_err *err)
{
	const struct spec_ints *sl = &s->parallel.stage_layers;
	long at = 0, n = rt_model_layers(s);
	int k;

	if (sl->n != (size_t)stages)
		return dt_err_add(err, "parallel.stage_layers: lists %zu stages but the pipeline has %d; list one layer count per stage or [] to balance",
				  sl->n, stages);
	for (k = 0; k < stages; k++) {
		if (sl->v[k] < 1)
			return dt_err_add(err, "parallel.stage_layers[%d]: every stage needs at least one layer (got %ld)",
					  k, sl->v[k]);
		if (sl->v[k] > n - at)
			return dt_err_add(err, "parallel.stage_layers: the first %d stages already have more than the model's %ld layers (model.hidden + output)",
					  k + 1, n);
		first[k] = (int)at;
		at += sl->v[k];
	}
	if (at != n)
		return dt_err_add(err, "parallel.stage_layers: the stages have %ld of the model's %ld layers (model.hidden + output); they must add up to all of them",
				  at, n);
	first[stages] = (int)n;
	return 0;
}

int rt_stage_split(const struct spec *s, int stages, int *first, struct dt_err *err)
{
	int n = rt_model_layers(s), k, j, i;
	size_t *cost = NULL, *pre = NULL, lo = 0, hi = 0, cap;
	double *f = NULL; /* f[k * (n+1) + j]: least sum of squares, layers [0, j) in k stages */
	int *arg = NULL;  /* the i (start of the k-th stage) that reached it */
	int rc;

	if ((rc = check_model(s, err)))
		return rc;
	if (stages < 1 || stages > n)
		return dt_err_add(err, "parallel.pipeline: %d stages for a model of %d layers; each stage needs at least one layer (model.hidden + output)",
				  stages, n);
	if (s->parallel.stage_layers.n)
		return split_explicit(s, stages, first, err);
	cost = malloc(sizeof(*cost) * (size_t)n);
	pre = malloc(sizeof(*pre) * ((size_t)n + 1));
	f = malloc(sizeof(*f) * ((size_t)stages + 1) * ((size_t)n + 1));
	arg = malloc(sizeof(*arg) * ((size_t)stages + 1) * ((size_t)n + 1));
	if (!cost || !pre || !f || !arg) {
		rc = -ENOMEM;
		dt_err_add(err, "stage split: out of memory for %d layers", n);
		goto out;
	}
	pre[0] = 0;
	for (i = 0; i < n; i++) {
		cost[i] = rt_layer_params(s, i);
		pre[i + 1] = pre[i] + cost[i]; /* no overflow: check_model summed them */
		if (cost[i] > lo)
			lo = cost[i];
	}
	hi = pre[n];

	/* 1. The least bottleneck: split_fits is monotone in cap. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (split_fits(cost, n, stages, mid))
			hi = mid;
		else
			lo = mid + 1;
	}
	cap = lo;

	/* 2. Among splits with every stage <= cap, the least sum of squared
	 * stage costs (relative to cap, to stay well inside double's range).
	 * Stage k (1-based) ends at layer j: it starts at some i with
	 * k-1 <= i < j, and leaves at least one layer per later stage. */
#define F(k, j) f[(size_t)(k) * ((size_t)n + 1) + (size_t)(j)]
#define ARG(k, j) arg[(size_t)(k) * ((size_t)n + 1) + (size_t)(j)]
	for (k = 0; k <= stages; k++)
		for (j = 0; j <= n; j++) {
			F(k, j) = INFINITY;
			ARG(k, j) = -1;
		}
	F(0, 0) = 0.0;
	for (k = 1; k <= stages; k++) {
		for (j = k; j <= n - (stages - k); j++) {
			/* only the runs ending at j that fit in cap: i from j-1 down
			 * until the run is too big (few i when the widths are even) */
			for (i = j - 1; i >= k - 1 && pre[j] - pre[i] <= cap; i--) {
				double c, v;

				if (F(k - 1, i) == INFINITY)
					continue;
				c = (double)(pre[j] - pre[i]) / (double)cap;
				v = F(k - 1, i) + c * c;
				if (v <= F(k, j)) { /* <=: ties go to the earliest boundary */
					F(k, j) = v;
					ARG(k, j) = i;
				}
			}
		}
	}
	/* cap is feasible with exactly `stages` non-empty runs (a run of a
	 * feasible split can always be cut further), so F(stages, n) is finite */
	first[stages] = n;
	for (k = stages, j = n; k >= 1; k--) {
		j = ARG(k, j);
		first[k - 1] = j;
	}
#undef F
#undef ARG
	rc = 0;
out:
	free(arg);
	free(f);
	free(pre);
	free(cost);
	return rc;
}

/* --- stages --- */

static int check_split(const struct spec *s, int stage, int n_stages, const int *first,
		       struct dt_err *err)
{
	int n = rt_model_layers(s), k;

	if (n_stages < 1 || n_stages > n)
		return dt_err_add(err, "parallel.pipeline: %d stages for a model of %d layers; each stage needs at least one layer (model.hidden + output)",
				  n_stages, n);
	if (stage < 0 || stage >= n_stages)
		return dt_err_add(err, "stage %d is outside the pipeline of %d stages", stage, n_stages);
	if (first[0] != 0 || first[n_stages] != n)
		return dt_err_add(err, "stage split: must start at layer 0 and end at layer %d (got %d .. %d)",
				  n, first[0], first[n_stages]);
	for (k = 0; k < n_stages; k++)
		if (first[k + 1] <= first[k])
			return dt_err_add(err, "stage split: stage %d owns no layer (first layers %d, %d)",
					  k, first[k], first[k + 1]);
	return 0;
}

/* Kaiming/He uniform (see model.h): depends on (init_seed, l, widths, act) only */
static void init_layer(struct rt_layer *ly, uint64_t seed, enum rt_act act)
{
	double gain = act == RT_ACT_TANH ? 5.0 / 3.0 : sqrt(2.0);
	double bound = gain * sqrt(3.0 / (double)ly->in);
	size_t i, nw = (size_t)ly->out * (size_t)ly->in;
	struct rt_rng r;

	rt_rng_seed(&r, seed, (uint64_t)ly->index);
	for (i = 0; i < nw; i++)
		ly->w[i] = (float)(bound * (2.0 * rt_rng_uniform_double(&r) - 1.0));
	memset(ly->b, 0, sizeof(*ly->b) * (size_t)ly->out);
}

int rt_stage_init(struct rt_stage *st, const struct spec *s, int stage, int n_stages,
		  const int *first, struct dt_err *err)
{
	size_t off = 0, bytes;
	int rc, i;

	memset(st, 0, sizeof(*st));
	if ((rc = check_model(s, err)) || (rc = check_split(s, stage, n_stages, first, err)))
		return rc;
	rt_act_parse(s->model.activation, &st->act); /* checked above */
	st->stage = stage;
	st->n_stages = n_stages;
	st->first_layer = first[stage];
	st->n_layers = first[stage + 1] - first[stage];
	st->n_model_layers = rt_model_layers(s);
	st->in = (int)rt_model_width(s, st->first_layer);
	st->out = (int)rt_model_width(s, st->first_layer + st->n_layers);
	st->n_params = rt_split_params(s, first, stage);
	if (__builtin_mul_overflow(st->n_params, sizeof(float), &bytes))
		bytes = SIZE_MAX;

	st->layers = calloc((size_t)st->n_layers, sizeof(*st->layers));
	st->params = bytes == SIZE_MAX ? NULL : malloc(bytes);
	st->grads = bytes == SIZE_MAX ? NULL : calloc(st->n_params, sizeof(float));
	if (!st->layers || !st->params || !st->grads) {
		dt_err_add(err, "stage %d: cannot allocate %.1f MiB for %zu parameters and their gradients; use more pipeline stages (parallel.pipeline) or a smaller model",
			   stage, 2.0 * (double)st->n_params * sizeof(float) / 1048576.0, st->n_params);
		rt_stage_free(st);
		return -ENOMEM;
	}
	for (i = 0; i < st->n_layers; i++) {
		struct rt_layer *ly = &st->layers[i];
		size_t nw;

		ly->index = st->first_layer + i;
		ly->in = (int)rt_model_width(s, ly->index);
		ly->out = (int)rt_model_width(s, ly->index + 1);
		ly->act = ly->index < st->n_model_layers - 1;
		nw = (size_t)ly->out * (size_t)ly->in;
		ly->offset = off;
		ly->n_params = nw + (size_t)ly->out;
		ly->w = st->params + off;
		ly->b = ly->w + nw;
		ly->dw = st->grads + off;
		ly->db = ly->dw + nw;
		off += ly->n_params;
		if (ly->out > st->max_width)
			st->max_width = ly->out;
		init_layer(ly, (uint64_t)s->model.init_seed, st->act);
	}
	return 0;
}

void rt_stage_free(struct rt_stage *st)
{
	free(st->layers);
	if (!st->adopted) {
		free(st->grads);
		free(st->params);
	}
	memset(st, 0, sizeof(*st));
}

void rt_stage_adopt(struct rt_stage *st, float *params, float *grads)
{
	int i;

	if (!st->adopted) {
		free(st->grads);
		free(st->params);
	}
	st->adopted = true;
	st->params = params;
	st->grads = grads;
	for (i = 0; i < st->n_layers; i++) {
		struct rt_layer *ly = &st->layers[i];
		size_t nw = (size_t)ly->out * (size_t)ly->in;

		ly->w = params ? params + ly->offset : NULL;
		ly->b = params ? ly->w + nw : NULL;
		ly->dw = grads ? grads + ly->offset : NULL;
		ly->db = grads ? ly->dw + nw : NULL;
	}
}

void rt_stage_zero_grads(struct rt_stage *st)
{
	if (st->grads)
		memset(st->grads, 0, st->n_params * sizeof(*st->grads));
}

/* --- activations --- */

size_t rt_acts_floats(const struct rt_stage *st, int max_rows)
{
	size_t total;
	int i;

	if (max_rows < 1 || st->n_layers < 1)
		return 0;
	/* floats: x, z and (where an activation follows) a per layer, 2 scratch */
	total = (size_t)st->in + 2 * (size_t)st->max_width;
	for (i = 0; i < st->n_layers; i++)
		total += (size_t)st->layers[i].out * (st->layers[i].act ? 2 : 1);
	if (total > SIZE_MAX / sizeof(float) / (size_t)max_rows)
		return 0;
	return total * (size_t)max_rows;
}

/* Lays acts out in mem (x, then z and a of each layer, then the scratch). */
static int acts_lay_out(struct rt_acts *acts, const struct rt_stage *st, int max_rows, float *mem)
{
	size_t rows = (size_t)max_rows, at;
	int i;

	acts->first_layer = st->first_layer;
	acts->n_layers = st->n_layers;
	acts->in = st->in;
	acts->max_rows = max_rows;
	acts->z = calloc((size_t)st->n_layers, sizeof(*acts->z));
	acts->a = calloc((size_t)st->n_layers, sizeof(*acts->a));
	if (!acts->z || !acts->a)
		return -ENOMEM;
	acts->mem = mem;
	acts->x = acts->mem;
	at = (size_t)st->in * rows;
	for (i = 0; i < st->n_layers; i++) {
		const struct rt_layer *ly = &st->layers[i];

		acts->z[i] = acts->mem + at;
		at += (size_t)ly->out * rows;
		if (ly->act) {
			acts->a[i] = acts->mem + at;
			at += (size_t)ly->out * rows;
		} else {
			acts->a[i] = acts->z[i];
		}
	}
	acts->dbuf[0] = acts->mem + at;
	at += (size_t)st->max_width * rows;
	acts->dbuf[1] = acts->mem + at;
	return 0;
}

int rt_acts_init(struct rt_acts *acts, const struct rt_stage *st, int max_rows)
{
	size_t total;
	float *mem;
	int rc;

	memset(acts, 0, sizeof(*acts));
	acts->rows = -1;
	if (max_rows < 1 || st->n_layers < 1)
		return -EINVAL;
	total = rt_acts_floats(st, max_rows);
	if (total == 0)
		return -ENOMEM;
	mem = malloc(total * sizeof(float));
	if (!mem)
		return -ENOMEM;
	acts->own_mem = true;
	rc = acts_lay_out(acts, st, max_rows, mem);
	if (rc)
		rt_acts_free(acts);
	return rc;
}

int rt_acts_place(struct rt_acts *acts, const struct rt_stage *st, int max_rows, float *mem)
{
	int rc;

	memset(acts, 0, sizeof(*acts));
	acts->rows = -1;
	if (max_rows < 1 || st->n_layers < 1 || !mem)
		return -EINVAL;
	rc = acts_lay_out(acts, st, max_rows, mem);
	if (rc)
		rt_acts_free(acts);
	return rc;
}

void rt_acts_free(struct rt_acts *acts)
{
	if (acts->own_mem)
		free(acts->mem);
	free(acts->a);
	free(acts->z);
	memset(acts, 0, sizeof(*acts));
	acts->rows = -1;
}

/* --- forward and backward --- */

static bool acts_match(const struct rt_stage *st, const struct rt_acts *acts)
{
	return acts->mem && acts->first_layer == st->first_layer &&
	       acts->n_layers == st->n_layers && acts->in == st->in;
}

int rt_stage_forward(const struct rt_stage *st, struct rt_acts *acts, const float *x,
		     int rows, const float **y)
{
	const float *in;
	int i;

	if (!acts_match(st, acts) || rows < 0 || rows > acts->max_rows)
		return -EINVAL;
	if (rows > 0)
		memcpy(acts->x, x, (size_t)rows * (size_t)st->in * sizeof(*x));
	in = acts->x;
	for (i = 0; i < st->n_layers; i++) {
		const struct rt_layer *ly = &st->layers[i];

		rt_linear_forward(in, ly->w, ly->b, acts->z[i], rows, ly->in, ly->out);
		if (ly->act)
			rt_act_forward(st->act, acts->z[i], acts->a[i],
				       (size_t)rows * (size_t)ly->out);
		in = acts->a[i];
	}
	acts->rows = rows;
	*y = in;
	return 0;
}

int rt_stage_backward(struct rt_stage *st, struct rt_acts *acts, const float *dy, float *dx,
		      void (*layer_done)(void *ctx, int layer_index_in_stage), void *ctx)
{
	float *cur = acts->dbuf[0], *next = acts->dbuf[1], *t;
	const struct rt_layer *last;
	const float *dz;
	int rows = acts->rows, i;

	if (!acts_match(st, acts) || rows < 0)
		return -EINVAL;
	last = &st->layers[st->n_layers - 1];
	if (last->act) {
		rt_act_backward(st->act, acts->z[st->n_layers - 1], dy, cur,
				(size_t)rows * (size_t)last->out);
		dz = cur;
	} else {
		dz = dy; /* logits: no activation */
	}
	/* dz holds dLoss/d(pre-activation of layer i); the product dz W goes
	 * into the other scratch buffer and becomes layer i-1's dz in place. */
	for (i = st->n_layers - 1; i >= 0; i--) {
		struct rt_layer *ly = &st->layers[i];
		const float *in = i > 0 ? acts->a[i - 1] : acts->x;
		float *din = i > 0 ? next : dx;

		rt_linear_backward(in, ly->w, dz, din, ly->dw, ly->db, rows, ly->in, ly->out,
				   true);
		if (layer_done)
			layer_done(ctx, i);
		if (i > 0) {
			/* layer i-1 is not the model's last: an activation follows it */
			rt_act_backward(st->act, acts->z[i - 1], next, next,
					(size_t)rows * (size_t)ly->in);
			dz = next;
			t = cur;
			cur = next;
			next = t;
		}
	}
	return 0;
}

/* --- a part of every layer --- */

void rt_part_cols(int width, int k, int L, int *c0, int *c1)
{
	long lines = (width + 15) / 16;
	long a = lines * k / L * 16, b = lines * (k + 1) / L * 16;

	*c0 = (int)(a < width ? a : width);
	*c1 = (int)(b < width ? b : width);
}

int rt_stage_part_spans(const struct rt_stage *st, int k, int L, struct rt_span *spans)
{
	int i, n = 0, c0, c1;

	for (i = 0; i < st->n_layers; i++) {
		const struct rt_layer *ly = &st->layers[i];

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

bool rt_part_head_rows(const struct rt_stage *st, int L)
{
	const struct rt_layer *last = &st->layers[st->n_layers - 1];

	return L > 1 && !last->act && (last->out + 15) / 16 < 2 * L;
}

/* The head's rows [r0, r1) of the node's rows, checked against them. */
static bool head_rows_ok(const struct rt_part *p, int rows)
{
	return p->r0 >= 0 && p->r0 <= p->r1 && p->r1 <= rows;
}

int rt_stage_forward_part(const struct rt_stage *st, struct rt_acts *acts, int rows,
			  const struct rt_part *p, const float **y)
{
	bool by_rows = rt_part_head_rows(st, p->L);
	const float *in;
	int i, c0, c1, rc;

	if (!acts_match(st, acts) || rows < 0 || rows > acts->max_rows ||
	    (by_rows && !head_rows_ok(p, rows)))
		return -EINVAL;
	in = acts->x;
	for (i = 0; i < st->n_layers; i++) {
		const struct rt_layer *ly = &st->layers[i];

		if (by_rows && i == st->n_layers - 1) {
			/* no activation, and no sync: the caller's loss reads
			 * these rows only (rt_part_head_rows) */
			rt_linear_forward_cols(in + (size_t)p->r0 * (size_t)ly->in, ly->w, ly->b,
					       acts->z[i] + (size_t)p->r0 * (size_t)ly->out,
					       p->r1 - p->r0, ly->in, ly->out, 0, ly->out);
			in = acts->a[i];
			break;
		}
		rt_part_cols(ly->out, p->k, p->L, &c0, &c1);
		rt_linear_forward_cols(in, ly->w, ly->b, acts->z[i], rows, ly->in, ly->out, c0, c1);
		if (ly->act)
			act_cols(st->act, acts->z[i], NULL, acts->a[i], rows, ly->out, c0, c1);
		rc = p->sync(p->ctx);
		if (rc)
			return rc;
		in = acts->a[i];
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
		struct rt_layer *ly = &st->layers[i];
		const float *in = i > 0 ? acts->a[i - 1] : acts->x;

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
		act_cols(st->act, acts->z[i - 1], next, next, rows, ly->in, i0, i1);
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
	int n = st->n_layers, rows = acts->rows, nr = p->r1 - p->r0, i0, i1, c0, c1, rc;
	struct rt_layer *ly = &st->layers[n - 1];
	float *dz = n > 1 ? acts->dbuf[1] : dx;
	size_t at = (size_t)p->r0 * (size_t)ly->in;

	if (dz)
		rt_linear_dx_cols(ly->w, dy + (size_t)p->r0 * (size_t)ly->out, dz + at, nr, ly->in,
				  ly->out, 0, ly->in);
	if (n > 1) /* layer n - 2 is not the model's last: an activation follows it */
		rt_act_backward(st->act, acts->z[n - 2] + at, dz + at, dz + at,
				(size_t)nr * (size_t)ly->in);
	rc = p->sync(p->ctx);
	if (rc)
		return rc;
	rt_part_cols(ly->in, p->k, p->L, &i0, &i1);
	rt_linear_dw_in_cols(n > 1 ? acts->a[n - 2] : acts->x, dy, ly->dw, rows, ly->in, ly->out,
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

int rt_stage_backward_part(struct rt_stage *st, struct rt_acts *acts, const float *dy, float *dx,
			   const struct rt_part *p)
{
	const struct rt_layer *last;
	int rows = acts->rows, c0, c1, rc;
	bool by_rows = rt_part_head_rows(st, p->L);

	if (!acts_match(st, acts) || rows < 0 || (by_rows && !head_rows_ok(p, rows)))
		return -EINVAL;
	if (by_rows)
		return backward_head_rows(st, acts, dy, dx, p);
	last = &st->layers[st->n_layers - 1];
	if (!last->act) /* logits: dy is the last layer's output gradient */
		return backward_cols(st, acts, dy, dx, p, st->n_layers - 1, acts->dbuf[0],
				     acts->dbuf[1]);
	rt_part_cols(last->out, p->k, p->L, &c0, &c1);
	act_cols(st->act, acts->z[st->n_layers - 1], dy, acts->dbuf[0], rows, last->out, c0, c1);
	rc = p->sync(p->ctx);
	if (rc)
		return rc;
	return backward_cols(st, acts, acts->dbuf[0], dx, p, st->n_layers - 1, acts->dbuf[0],
			     acts->dbuf[1]);
}
