/*
 * model.c - the model interface's side that is the same for every model
 * type (see model.h): finding the type, counting blocks and parameters,
 * the stage split, a stage's buffers and tensor table, activation storage,
 * and forward and backward of a stage as its blocks in turn.
 *
 * Sections: model types, model queries, stage split, stages, activations,
 * forward and backward, a part of every block.
 */
#include "runtime/model/model.h"

#include "runtime/model/device.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/model/gpt.h"
#include "runtime/model/llama.h"
#include "runtime/model/mlp.h"

/* --- model types --- */

static const struct rt_model_ops *const model_types[] = { &rt_mlp_model, &rt_gpt_model, &rt_llama_model };
#define N_TYPES (sizeof(model_types) / sizeof(model_types[0]))

const struct rt_model_ops *rt_model_find(const struct spec *s, struct dt_err *err)
{
	const char *type = s->model.type ? s->model.type : "mlp";
	size_t i;

	for (i = 0; i < N_TYPES; i++)
		if (!strcmp(model_types[i]->type, type))
			return model_types[i];
	dt_err_add(err, "model.type: \"%s\" is not a model this runtime builds (expected \"mlp\" or \"gpt\")", type);
	return NULL;
}

/* --- model queries --- */

int rt_model_blocks(const struct spec *s)
{
	const struct rt_model_ops *ops = rt_model_find(s, NULL);

	return ops ? ops->blocks(s) : 0;
}

int rt_model_ties(const struct spec *s, struct rt_tie *t)
{
	const struct rt_model_ops *ops = rt_model_find(s, NULL);

	return ops && ops->ties ? ops->ties(s, t) : 0;
}

/* the product of a tensor's shape; SIZE_MAX when it does not fit */
static size_t floats_of(const struct rt_tensor *t)
{
	size_t n = 1;
	int j;

	for (j = 0; j < t->ndim; j++)
		if (t->shape[j] < 0 || __builtin_mul_overflow(n, (size_t)t->shape[j], &n))
			return SIZE_MAX;
	return n;
}

size_t rt_model_tied_params(const struct spec *s)
{
	struct rt_tie tie[RT_MAX_TIES];
	struct rt_tensor t[RT_BLOCK_TENSORS];
	const struct rt_model_ops *ops = rt_model_find(s, NULL);
	int n = rt_model_ties(s, tie), i, j, nt;
	size_t sum = 0;

	for (i = 0; ops && i < n; i++) {
		nt = ops->tensors(s, tie[i].block[1], t);
		for (j = 0; j < nt; j++)
			if (!strcmp(t[j].name, tie[i].name[1]))
				sum += floats_of(&t[j]);
	}
	return sum;
}

size_t rt_block_params(const struct spec *s, int b)
{
	const struct rt_model_ops *ops = rt_model_find(s, NULL);
	struct rt_tensor t[RT_BLOCK_TENSORS];
	size_t sum = 0, n;
	int i, nt;

	if (!ops || b < 0 || b >= ops->blocks(s))
		return 0;
	nt = ops->tensors(s, b, t);
	for (i = 0; i < nt; i++)
		if ((n = floats_of(&t[i])) == SIZE_MAX || __builtin_add_overflow(sum, n, &sum))
			return SIZE_MAX;
	return sum;
}

/* sum of rt_block_params over [from, to), saturating at SIZE_MAX */
static size_t blocks_params(const struct spec *s, int from, int to)
{
	size_t sum = 0;
	int b;

	for (b = from; b < to; b++)
		if (__builtin_add_overflow(sum, rt_block_params(s, b), &sum))
			return SIZE_MAX;
	return sum;
}

size_t rt_model_params(const struct spec *s)
{
	return blocks_params(s, 0, rt_model_blocks(s));
}

size_t rt_split_params(const struct spec *s, const int *first, int k)
{
	return blocks_params(s, first[k], first[k + 1]);
}

int rt_model_tensors(const struct spec *s, int from, int to, struct rt_tensor **out, int *n,
		     struct dt_err *err)
{
	const struct rt_model_ops *ops = rt_model_find(s, err);
	struct rt_tensor *t = NULL;
	size_t off = 0;
	int b, i, j, count = 0, cap;

	*out = NULL;
	*n = 0;
	if (!ops)
		return -EINVAL;
	if (from < 0 || to > ops->blocks(s) || from > to)
		return dt_err_add(err, "model: blocks [%d, %d) are outside the model's %d",
				  from, to, ops->blocks(s));
	cap = (to - from) * RT_BLOCK_TENSORS;
	t = calloc((size_t)(cap ? cap : 1), sizeof(*t));
	if (!t)
		return dt_err_add(err, "model: out of memory for the table of %d blocks' tensors",
				  to - from), -ENOMEM;
	for (b = from; b < to; b++) {
		int nt = ops->tensors(s, b, t + count);

		if (nt < 1 || nt > RT_BLOCK_TENSORS) { /* a model's bug: its contract says 1..16 */
			free(t);
			return dt_err_add(err, "model \"%s\": block %d declares %d tensors (1..%d)",
					  ops->type, b, nt, RT_BLOCK_TENSORS);
		}
		for (i = count; i < count + nt; i++) {
			t[i].block = b;
			t[i].offset = off;
			t[i].n = 1;
			for (j = 0; j < t[i].ndim; j++)
				t[i].n *= (size_t)t[i].shape[j]; /* fits: ops->check counted them */
			off += t[i].n;
		}
		count += nt;
	}
	*out = t;
	*n = count;
	return 0;
}

/* What model.c relies on beyond the model's own checks. */
static int check_model(const struct spec *s, const struct rt_model_ops **ops, struct dt_err *err)
{
	int rc;

	*ops = rt_model_find(s, err);
	if (!*ops)
		return -EINVAL;
	if ((rc = (*ops)->check(s, err)))
		return rc;
	if ((*ops)->blocks(s) < 1 || (*ops)->blocks(s) > RT_MAX_BLOCKS)
		return dt_err_add(err, "model: %d %ss; this runtime builds 1..%d", (*ops)->blocks(s),
				  (*ops)->block_noun, RT_MAX_BLOCKS);
	if (rt_model_params(s) == SIZE_MAX)
		return dt_err_add(err, "model: the parameter count does not fit in memory addresses; make the model smaller");
	return 0;
}

/* --- stage split --- */

/* Can blocks cost[0..n) be cut into at most k contiguous runs of cost <= cap? */
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
static int split_explicit(const struct spec *s, const struct rt_model_ops *ops, int stages,
			  int *first, struct dt_err *err)
{
	const struct spec_ints *sl = &s->parallel.stage_layers;
	const char *noun = ops->block_noun, *are = ops->blocks_are;
	long at = 0, n = ops->blocks(s);
	int k;

	if (sl->n != (size_t)stages)
		return dt_err_add(err, "parallel.stage_layers: lists %zu stages but the pipeline has %d; list one %s count per stage or [] to balance",
				  sl->n, stages, noun);
	for (k = 0; k < stages; k++) {
		if (sl->v[k] < 1)
			return dt_err_add(err, "parallel.stage_layers[%d]: every stage needs at least one %s (got %ld)",
					  k, noun, sl->v[k]);
		if (sl->v[k] > n - at)
			return dt_err_add(err, "parallel.stage_layers: the first %d stages already have more than the model's %ld %ss (%s)",
					  k + 1, n, noun, are);
		first[k] = (int)at;
		at += sl->v[k];
	}
	if (at != n)
		return dt_err_add(err, "parallel.stage_layers: the stages have %ld of the model's %ld %ss (%s); they must add up to all of them",
				  at, n, noun, are);
	first[stages] = (int)n;
	return 0;
}

/* 1. The least bottleneck: the smallest cap in [lo, hi] such that the
 * blocks fit in `stages` runs of cost <= cap (split_fits is monotone in
 * cap). */
static size_t least_bottleneck(const size_t *cost, int n, int stages, size_t lo, size_t hi)
{
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (split_fits(cost, n, stages, mid))
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* 2. Among splits with every stage <= cap, the least sum of squared stage
 * costs (relative to cap, to stay well inside double's range), into
 * first[0..stages]. Stage k (1-based) ends at block j: it starts at some i
 * with k-1 <= i < j, and leaves at least one block per later stage.
 * pre[n+1]: the costs' prefix sums; f and arg: [(stages+1) * (n+1)], the
 * least sum of squares for blocks [0, j) in k stages and the i (start of
 * the k-th stage) that reached it. */
static void least_squares(const size_t *pre, int n, int stages, size_t cap, double *f, int *arg,
			  int *first)
{
	int k, j, i;

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
}

int rt_stage_split(const struct spec *s, int stages, int *first, struct dt_err *err)
{
	const struct rt_model_ops *ops;
	int n, i;
	size_t *cost = NULL, *pre = NULL, lo = 0, hi = 0, cap;
	double *f = NULL; /* f[k * (n+1) + j]: least sum of squares, blocks [0, j) in k stages */
	int *arg = NULL;  /* the i (start of the k-th stage) that reached it */
	int rc;

	if ((rc = check_model(s, &ops, err)))
		return rc;
	n = ops->blocks(s);
	if (stages < 1 || stages > n)
		return dt_err_add(err, "parallel.pipeline: %d stages for a model of %d %ss; each stage needs at least one %s (%s)",
				  stages, n, ops->block_noun, ops->block_noun, ops->blocks_are);
	if (s->parallel.stage_layers.n)
		return split_explicit(s, ops, stages, first, err);
	cost = malloc(sizeof(*cost) * (size_t)n);
	pre = malloc(sizeof(*pre) * ((size_t)n + 1));
	f = malloc(sizeof(*f) * ((size_t)stages + 1) * ((size_t)n + 1));
	arg = malloc(sizeof(*arg) * ((size_t)stages + 1) * ((size_t)n + 1));
	if (!cost || !pre || !f || !arg) {
		rc = -ENOMEM;
		dt_err_add(err, "stage split: out of memory for %d %ss", n, ops->block_noun);
		goto out;
	}
	pre[0] = 0;
	for (i = 0; i < n; i++) {
		cost[i] = ops->cost(s, i);
		if (__builtin_add_overflow(pre[i], cost[i], &pre[i + 1])) {
			rc = dt_err_add(err, "stage split: the model's cost does not fit in a size_t");
			goto out;
		}
		if (cost[i] > lo)
			lo = cost[i];
	}
	hi = pre[n];

	cap = least_bottleneck(cost, n, stages, lo, hi);
	least_squares(pre, n, stages, cap, f, arg, first);
	rc = 0;
out:
	free(arg);
	free(f);
	free(pre);
	free(cost);
	return rc;
}

/* --- stages --- */

static int check_split(const struct spec *s, const struct rt_model_ops *ops, int stage,
		       int n_stages, const int *first, struct dt_err *err)
{
	int n = ops->blocks(s), k;

	if (n_stages < 1 || n_stages > n)
		return dt_err_add(err, "parallel.pipeline: %d stages for a model of %d %ss; each stage needs at least one %s (%s)",
				  n_stages, n, ops->block_noun, ops->block_noun, ops->blocks_are);
	if (stage < 0 || stage >= n_stages)
		return dt_err_add(err, "stage %d is outside the pipeline of %d stages", stage, n_stages);
	if (first[0] != 0 || first[n_stages] != n)
		return dt_err_add(err, "stage split: must start at %s 0 and end at %s %d (got %d .. %d)",
				  ops->block_noun, ops->block_noun, n, first[0], first[n_stages]);
	for (k = 0; k < n_stages; k++)
		if (first[k + 1] <= first[k])
			return dt_err_add(err, "stage split: stage %d owns no %s (first %ss %d, %d)",
					  k, ops->block_noun, ops->block_noun, first[k], first[k + 1]);
	return 0;
}

/* The blocks' views into params and grads (either may be NULL). */
static void point_blocks(struct rt_stage *st)
{
	int i;

	for (i = 0; i < st->n_blocks; i++) {
		struct rt_block *b = &st->blocks[i];

		b->params = st->params ? st->params + b->offset : NULL;
		b->grads = st->grads ? st->grads + b->offset : NULL;
	}
}

/* The stage's initial parameters (ops->init), on its device: written in
 * place on a host device, else in host memory and put there. */
static int init_params(struct rt_stage *st, const struct spec *s, struct dt_err *err)
{
	float *host = st->params;
	int i;

	if (!st->dev->host) {
		host = malloc(st->n_params * sizeof(float));
		if (!host)
			return dt_err_add(err, "stage %d: out of host memory for the initial parameters (%zu floats)",
					  st->stage, st->n_params), -ENOMEM;
	}
	for (i = 0; i < st->n_blocks; i++)
		st->ops->init(s, st->blocks[i].index, host + st->blocks[i].offset);
	rt_dev_put(st->dev, st->params, host, st->n_params * sizeof(float));
	if (host != st->params)
		free(host);
	return 0;
}

int rt_stage_init(struct rt_stage *st, const struct spec *s, int stage, int n_stages,
		  const int *first, struct dt_err *err)
{
	return rt_stage_init_on(st, rt_dev_cpu(), s, stage, n_stages, first, err);
}

int rt_stage_init_on(struct rt_stage *st, struct rt_dev *dev, const struct spec *s, int stage,
		     int n_stages, const int *first, struct dt_err *err)
{
	const struct rt_model_ops *ops;
	size_t bytes;
	int rc, i, t = 0;

	memset(st, 0, sizeof(*st));
	st->dev = dev;
	if ((rc = check_model(s, &ops, err)) || (rc = check_split(s, ops, stage, n_stages, first, err)))
		return rc;
	st->ops = ops;
	st->stage = stage;
	st->n_stages = n_stages;
	st->first_block = first[stage];
	st->n_blocks = first[stage + 1] - first[stage];
	st->n_model_blocks = ops->blocks(s);
	st->in = (int)ops->width(s, st->first_block);
	st->out = (int)ops->width(s, st->first_block + st->n_blocks);
	if ((rc = rt_model_tensors(s, st->first_block, st->first_block + st->n_blocks, &st->tensors,
				   &st->n_tensors, err)))
		goto fail;
	/* the table lays the tensors out back to back */
	st->n_params = st->tensors[st->n_tensors - 1].offset + st->tensors[st->n_tensors - 1].n;
	if (__builtin_mul_overflow(st->n_params, sizeof(float), &bytes))
		bytes = SIZE_MAX;
	st->blocks = calloc((size_t)st->n_blocks, sizeof(*st->blocks));
	if (bytes != SIZE_MAX && !rt_dev_alloc(dev, bytes, "the parameters", &st->params, NULL))
		rt_dev_alloc(dev, bytes, "the gradients", &st->grads, NULL);
	if (!st->blocks || !st->params || !st->grads) {
		dt_err_add(err, "stage %d: cannot allocate %.1f MiB for %zu parameters and their gradients; use more pipeline stages (parallel.pipeline) or a smaller model",
			   stage, 2.0 * (double)st->n_params * sizeof(float) / 1048576.0, st->n_params);
		rc = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < st->n_blocks; i++) {
		struct rt_block *b = &st->blocks[i];

		b->index = st->first_block + i;
		b->in = (int)ops->width(s, b->index);
		b->out = (int)ops->width(s, b->index + 1);
		b->first_tensor = t;
		b->offset = t < st->n_tensors ? st->tensors[t].offset : st->n_params;
		while (t < st->n_tensors && st->tensors[t].block == b->index)
			b->n_params += st->tensors[t++].n;
		b->n_tensors = t - b->first_tensor;
		if (b->out > st->max_width)
			st->max_width = b->out;
	}
	point_blocks(st);
	if ((rc = init_params(st, s, err)))
		goto fail;
	if (ops->stage_init && (rc = ops->stage_init(st, s, err)))
		goto fail;
	return 0;
fail:
	rt_stage_free(st);
	return rc;
}

void rt_stage_free(struct rt_stage *st)
{
	if (st->ops && st->ops->stage_free)
		st->ops->stage_free(st);
	free(st->blocks);
	free(st->tensors);
	if (!st->adopted && st->dev) {
		rt_dev_free(st->dev, st->grads);
		rt_dev_free(st->dev, st->params);
	}
	memset(st, 0, sizeof(*st));
}

void rt_stage_adopt(struct rt_stage *st, float *params, float *grads)
{
	if (!st->adopted) {
		rt_dev_free(st->dev, st->grads);
		rt_dev_free(st->dev, st->params);
	}
	st->adopted = true;
	st->params = params;
	st->grads = grads;
	point_blocks(st);
}

void rt_stage_zero_grads(struct rt_stage *st)
{
	if (st->grads)
		st->dev->ops->zero(st->dev, st->grads, st->n_params * sizeof(*st->grads));
}

/* --- activations --- */

/* Floats per sample of each backward scratch buffer: the gradients that
 * flow between the stage's blocks (the inputs of blocks 1..n-1; dy of the
 * last block and dx of the first are the caller's). A model with parts
 * also runs the last block's output gradient through them (mlp.c), so it
 * gets the widest output. A GPT's head stage thus keeps no [T][V] scratch. */
static size_t scratch_width(const struct rt_stage *st)
{
	size_t w = 0;
	int i;

	if (st->ops->part)
		return (size_t)st->max_width;
	for (i = 1; i < st->n_blocks; i++)
		if ((size_t)st->blocks[i].in > w)
			w = (size_t)st->blocks[i].in;
	return w;
}

/* the blocks' scratch (their work_floats) per sample: the most of one */
static size_t work_width(const struct rt_stage *st)
{
	size_t w = 0, b;
	int i;

	for (i = 0; st->ops->work_floats && i < st->n_blocks; i++)
		if ((b = st->ops->work_floats(st, &st->blocks[i])) > w)
			w = b;
	return w;
}

size_t rt_acts_floats(const struct rt_stage *st, int max_rows)
{
	size_t total;
	int i;

	if (max_rows < 1 || st->n_blocks < 1)
		return 0;
	/* floats per sample: x, what each block keeps, 2 scratch, the blocks' work */
	total = (size_t)st->in + 2 * scratch_width(st) + work_width(st);
	for (i = 0; i < st->n_blocks; i++)
		total += st->ops->act_floats(st, &st->blocks[i]);
	if (total > SIZE_MAX / sizeof(float) / (size_t)max_rows)
		return 0;
	return total * (size_t)max_rows;
}

/* Lays acts out in mem (x, then each block's, then the scratch). */
static int acts_lay_out(struct rt_acts *acts, const struct rt_stage *st, int max_rows, float *mem)
{
	size_t rows = (size_t)max_rows, at;
	int i;

	acts->dev = st->dev;
	acts->first_block = st->first_block;
	acts->n_blocks = st->n_blocks;
	acts->in = st->in;
	acts->max_rows = max_rows;
	acts->blk = calloc((size_t)st->n_blocks, sizeof(*acts->blk));
	acts->y = calloc((size_t)st->n_blocks, sizeof(*acts->y));
	if (!acts->blk || !acts->y)
		return -ENOMEM;
	acts->mem = mem;
	acts->x = acts->mem;
	at = (size_t)st->in * rows;
	for (i = 0; i < st->n_blocks; i++) {
		acts->blk[i] = acts->mem + at;
		at += st->ops->act_floats(st, &st->blocks[i]) * rows;
	}
	acts->dbuf[0] = acts->mem + at;
	at += scratch_width(st) * rows;
	acts->dbuf[1] = acts->mem + at;
	at += scratch_width(st) * rows;
	acts->work = work_width(st) ? acts->mem + at : NULL;
	return 0;
}

int rt_acts_init(struct rt_acts *acts, const struct rt_stage *st, int max_rows)
{
	size_t total;
	float *mem;
	int rc;

	memset(acts, 0, sizeof(*acts));
	acts->rows = -1;
	if (max_rows < 1 || st->n_blocks < 1)
		return -EINVAL;
	total = rt_acts_floats(st, max_rows);
	if (total == 0 || rt_dev_alloc(st->dev, total * sizeof(float), "activations", &mem, NULL))
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
	if (max_rows < 1 || st->n_blocks < 1 || !mem || !st->dev->host)
		return -EINVAL;
	rc = acts_lay_out(acts, st, max_rows, mem);
	if (rc)
		rt_acts_free(acts);
	return rc;
}

void rt_acts_free(struct rt_acts *acts)
{
	if (acts->own_mem && acts->dev)
		rt_dev_free(acts->dev, acts->mem);
	free(acts->blk);
	free(acts->y);
	memset(acts, 0, sizeof(*acts));
	acts->rows = -1;
}

/* --- forward and backward --- */

static bool acts_match(const struct rt_stage *st, const struct rt_acts *acts)
{
	return acts->mem && acts->first_block == st->first_block &&
	       acts->n_blocks == st->n_blocks && acts->in == st->in;
}

int rt_stage_forward(const struct rt_stage *st, struct rt_acts *acts, const float *x,
		     int rows, const float **y)
{
	const float *in;
	int i;

	if (!acts_match(st, acts) || rows < 0 || rows > acts->max_rows)
		return -EINVAL;
	if (rows > 0)
		st->dev->ops->copy(st->dev, acts->x, x, (size_t)rows * (size_t)st->in * sizeof(*x));
	in = acts->x;
	for (i = 0; i < st->n_blocks; i++) {
		st->ops->forward(st, &st->blocks[i], in, acts->blk[i], acts->work, acts->max_rows,
				 rows, &acts->y[i]);
		in = acts->y[i];
	}
	acts->rows = rows;
	*y = in;
	return 0;
}

int rt_stage_backward(struct rt_stage *st, struct rt_acts *acts, float *dy, float *dx,
		      void (*block_done)(void *ctx, int block_in_stage), void *ctx)
{
	int rows = acts->rows, i, spare = 0;

	if (!acts_match(st, acts) || rows < 0)
		return -EINVAL;
	/* block i's input gradient goes into a scratch buffer other than
	 * the one holding its output gradient, and is block i-1's dy */
	for (i = st->n_blocks - 1; i >= 0; i--) {
		float *din = i > 0 ? acts->dbuf[spare] : dx;

		st->ops->backward(st, &st->blocks[i], i > 0 ? acts->y[i - 1] : acts->x, acts->blk[i],
				  acts->work, acts->max_rows, rows, dy, din);
		if (block_done)
			block_done(ctx, i);
		dy = din;
		spare ^= 1;
	}
	return 0;
}

/* --- a part of every block --- */

bool rt_stage_can_part(const struct rt_stage *st)
{
	return st->ops && st->ops->part;
}

bool rt_part_head_rows(const struct rt_stage *st, int L)
{
	return st->ops->part->head_rows(st, L);
}

int rt_stage_part_spans(const struct rt_stage *st, int k, int L, struct rt_span *spans)
{
	return st->ops->part->spans(st, k, L, spans);
}

int rt_stage_forward_part(const struct rt_stage *st, struct rt_acts *acts, int rows,
			  const struct rt_part *p, const float **y)
{
	if (!acts_match(st, acts) || rows < 0 || rows > acts->max_rows)
		return -EINVAL;
	return st->ops->part->forward(st, acts, rows, p, y);
}

int rt_stage_backward_part(struct rt_stage *st, struct rt_acts *acts, const float *dy, float *dx,
			   const struct rt_part *p)
{
	if (!acts_match(st, acts) || acts->rows < 0)
		return -EINVAL;
	return st->ops->part->backward(st, acts, dy, dx, p);
}

