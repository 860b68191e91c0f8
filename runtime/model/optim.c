/*
 * optim.c - SGD with momentum and AdamW updates, the learning-rate schedule
 * and gradient-norm helpers (see optim.h for the formulas and choices).
 *
 * Sections: life cycle, update, schedule, clipping.
 */
#include "runtime/model/optim.h"
#include "runtime/model/model.h"
#include "runtime/world/pool.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/kernels/kernels.h"
#include "runtime/kernels/elem.h"

/* --- life cycle --- */

int rt_optim_init(struct rt_optim *o, const struct spec *s, size_t n_params, struct dt_err *err)
{
	const struct spec_optimizer *so = &s->train.optimizer;
	size_t n = n_params ? n_params : 1; /* calloc(0) may return NULL */

	memset(o, 0, sizeof(*o));
	if (!so->type || !strcmp(so->type, "sgd")) {
		o->type = RT_OPTIM_SGD;
	} else if (!strcmp(so->type, "adamw")) {
		o->type = RT_OPTIM_ADAMW;
		if (so->betas.n != 2)
			return dt_err_add(err, "train.optimizer.betas: must be 2 numbers (got %zu)", so->betas.n);
		o->beta1 = so->betas.v[0];
		o->beta2 = so->betas.v[1];
	} else {
		return dt_err_add(err, "train.optimizer.type: \"%s\" is not one of sgd, adamw", so->type);
	}
	o->momentum = so->momentum;
	o->weight_decay = so->weight_decay;
	o->eps = 1e-8;
	o->n = n_params;
	if (n <= SIZE_MAX / sizeof(float)) /* else calloc's size overflows: fail below */
		o->m = calloc(n, sizeof(*o->m));
	if (o->m && o->type == RT_OPTIM_ADAMW)
		o->v = calloc(n, sizeof(*o->v));
	if (o->m)
		o->part = calloc(n / RT_CHUNK + 1, sizeof(*o->part));
	o->pool = NULL;
	if (!o->m || (o->type == RT_OPTIM_ADAMW && !o->v) || !o->part) {
		dt_err_add(err, "train.optimizer: cannot allocate the %s state for %zu parameters",
			   o->type == RT_OPTIM_ADAMW ? "adamw" : "sgd", n_params);
		rt_optim_free(o);
		return -ENOMEM;
	}
	return 0;
}

int rt_optim_no_decay(struct rt_optim *o, const struct rt_span *spans, int n)
{
	free(o->no_decay);
	o->no_decay = NULL;
	o->n_no_decay = 0;
	if (n < 1)
		return 0;
	o->no_decay = malloc((size_t)n * sizeof(*spans));
	if (!o->no_decay)
		return -ENOMEM;
	memcpy(o->no_decay, spans, (size_t)n * sizeof(*spans));
	o->n_no_decay = n;
	return 0;
}

void rt_optim_free(struct rt_optim *o)
{
	free(o->no_decay);
	free(o->part);
	if (!o->adopted) {
		free(o->v);
		free(o->m);
	}
	memset(o, 0, sizeof(*o));
}

void rt_optim_adopt(struct rt_optim *o, float *m, float *v)
{
	if (!o->adopted) {
		free(o->v);
		free(o->m);
	}
	o->adopted = true;
	o->m = m;
	o->v = o->type == RT_OPTIM_ADAMW ? v : NULL;
}

/* --- update --- */

/*
 * The update is memory-bound: per parameter a handful of flops against 12 to
 * 20 bytes moved. So it is one pass over the arrays (restrict pointers, no
 * branch in the loop) that gcc vectorises, built for AVX2 and for the
 * baseline (RT_SIMD_CLONES picks at load time; no FMA, so both give the same
 * bits). The sum of squares of the gradient rides along in RT_LANES double
 * accumulators, each summing its own lane in order: the same bits in every
 * build, and the same as rt_sumsq().
 */

struct upd {
	float mu, wd, lr;                         /* SGD */
	float decay, b1, b2, c1, c2, step_size, bc2_sqrt, eps; /* AdamW */
	float scale;                              /* applied to the gradient first */
};

static inline __attribute__((always_inline)) double
lanes_sum(const double *acc)
{
	double s = 0.0;
	int j;

	for (j = 0; j < RT_LANES; j++)
		s += acc[j];
	return s;
}

/* The loops below take every constant as a local (a store through w could
 * otherwise change *u, as far as the compiler knows, and nothing would
 * vectorise). The _keep builds only read g; the _take builds zero each
 * element of g right after reading it (take is a constant in each); with
 * g2 (sgd_take2) the gradient is g + g2, and both are zeroed. */
static inline __attribute__((always_inline)) double
sgd_body(struct upd u, float *restrict w, float *restrict g, float *restrict g2,
	 float *restrict v, size_t n, const bool take)
{
	const float mu = u.mu, wd = u.wd, lr = u.lr, scale = u.scale;
	double acc[RT_LANES] = { 0 };
	size_t i = 0, j;

	for (; i + RT_LANES <= n; i += RT_LANES)
		for (j = 0; j < RT_LANES; j++) {
			float raw = g2 ? g[i + j] + g2[i + j] : g[i + j];

			acc[j] += (double)raw * (double)raw;
			rt_sgd_elem(&w[i + j], &v[i + j], raw * scale, mu, wd, lr);
			if (take)
				g[i + j] = 0.0f;
			if (g2)
				g2[i + j] = 0.0f;
		}
	for (j = 0; i < n; i++, j++) {
		float raw = g2 ? g[i] + g2[i] : g[i];

		acc[j] += (double)raw * (double)raw;
		rt_sgd_elem(&w[i], &v[i], raw * scale, mu, wd, lr);
		if (take)
			g[i] = 0.0f;
		if (g2)
			g2[i] = 0.0f;
	}
	return lanes_sum(acc);
}

RT_SIMD_CLONES static double sgd_keep(struct upd u, float *restrict w, const float *restrict g,
				      float *restrict v, size_t n)
{
	return sgd_body(u, w, (float *)g, NULL, v, n, false); /* g is not written */
}

RT_SIMD_CLONES static double sgd_take(struct upd u, float *restrict w, float *restrict g,
				      float *restrict v, size_t n)
{
	return sgd_body(u, w, g, NULL, v, n, true);
}

/* The two replicas' gradients of a node (runtime/parallel/dp.h) summed as they are
 * read: one pass, no block to sum them in first. */
RT_SIMD_CLONES static double sgd_take2(struct upd u, float *restrict w, float *restrict g,
				       float *restrict g2, float *restrict v, size_t n)
{
	return sgd_body(u, w, g, g2, v, n, true);
}

static inline __attribute__((always_inline)) double
adamw_body(struct upd u, float *restrict w, float *restrict g, float *restrict m,
	   float *restrict v, size_t n, const bool take)
{
	const struct rt_adamw_k c = { u.decay, u.b1, u.b2, u.c1, u.c2, u.step_size, u.bc2_sqrt, u.eps };
	const float scale = u.scale;
	double acc[RT_LANES] = { 0 };
	size_t i = 0, j, k;

	for (; i < n; i += RT_LANES) {
		size_t len = n - i < RT_LANES ? n - i : RT_LANES;

		for (j = 0; j < len; j++) {
			float raw = g[i + j];

			k = i + j;
			acc[j] += (double)raw * (double)raw;
			rt_adamw_elem(&w[k], &m[k], &v[k], raw * scale, c);
			if (take)
				g[k] = 0.0f;
		}
	}
	return lanes_sum(acc);
}

RT_SIMD_CLONES static double adamw_keep(struct upd u, float *restrict w,
					const float *restrict g, float *restrict m,
					float *restrict v, size_t n)
{
	return adamw_body(u, w, (float *)g, m, v, n, false); /* g is not written */
}

RT_SIMD_CLONES static double adamw_take(struct upd u, float *restrict w, float *restrict g,
					float *restrict m, float *restrict v, size_t n)
{
	return adamw_body(u, w, g, m, v, n, true);
}

/* One update over elements [first, first + n) of the arrays; the gradient
 * is grads, or with n_slots > 0 the sum of slots[0..n_slots) in that order. */
struct pass {
	struct rt_optim *o;
	const struct upd *u;
	const struct upd *u_nd;  /* the same without weight decay */
	float *params;
	const float *grads;
	size_t first, n;
	float *const *slots;
	int n_slots;
	bool take;          /* zero grads as they are read */
	size_t shift;       /* element off of params goes with off - shift of
			     * m and v (a piece: first - at) */
	size_t gshift;      /* and with off - gshift of grads (first - grad) */
};

/* Elements of the slots' sum made at a time, in L1, before their update. */
#define SUM_BLOCK 1024

/* The update of one chunk from the sum of the slots, SUM_BLOCK at a time,
 * each slot's block zeroed once read; returns the chunk's sum of squares of the summed gradient (blocks added
 * in order: the same for any thread count). */
static double chunk_of_sum(const struct pass *ps, const struct upd *u, size_t off, size_t len)
{
	struct rt_optim *o = ps->o;
	float g[SUM_BLOCK];
	double total = 0.0;
	size_t done, m, i;
	int k;

	for (done = 0; done < len; done += m) {
		size_t at = off + done;

		m = len - done < SUM_BLOCK ? len - done : SUM_BLOCK;
		memcpy(g, ps->slots[0] + at, m * sizeof(float));
		memset(ps->slots[0] + at, 0, m * sizeof(float));
		for (k = 1; k < ps->n_slots; k++) {
			float *s = ps->slots[k] + at;

			for (i = 0; i < m; i++)
				g[i] += s[i];
			memset(s, 0, m * sizeof(float)); /* in L1 still */
		}
		if (o->type == RT_OPTIM_ADAMW)
			total += adamw_keep(*u, ps->params + at, g, o->m + at, o->v + at, m);
		else
			total += sgd_keep(*u, ps->params + at, g, o->m + at, m);
	}
	return total;
}

/* The update of [off, off + len) with the constants u; its sum of squares. */
static double range(const struct pass *ps, const struct upd *u, size_t off, size_t len)
{
	struct rt_optim *o = ps->o;
	size_t so = off - ps->shift, go = off - ps->gshift; /* in the state, in grads */
	float *w = ps->params + off, *m = o->m + so;
	const float *g;

	if (ps->n_slots == 2 && o->type == RT_OPTIM_SGD)
		return sgd_take2(*u, w, ps->slots[0] + off, ps->slots[1] + off, m, len);
	if (ps->n_slots > 0)
		return chunk_of_sum(ps, u, off, len);
	g = ps->grads + go;
	if (ps->take && o->type == RT_OPTIM_ADAMW)
		return adamw_take(*u, w, (float *)g, m, o->v + so, len);
	if (ps->take)
		return sgd_take(*u, w, (float *)g, m, len);
	if (o->type == RT_OPTIM_ADAMW)
		return adamw_keep(*u, w, g, m, o->v + so, len);
	return sgd_keep(*u, w, g, m, len);
}

/* From off, how many of len elements share one weight decay setting, and
 * whether it is none (*exempt). */
static size_t decay_run(const struct rt_optim *o, size_t off, size_t len, bool *exempt)
{
	int i;

	for (i = 0; i < o->n_no_decay; i++) {
		const struct rt_span *sp = &o->no_decay[i];

		if (off < sp->first) { /* decayed up to this span */
			*exempt = false;
			return sp->first - off < len ? sp->first - off : len;
		}
		if (off < sp->first + sp->count) {
			*exempt = true;
			return sp->first + sp->count - off < len ? sp->first + sp->count - off : len;
		}
	}
	*exempt = false;
	return len;
}

/* Chunk c of a pass; its sum of squares goes to o->part[c]. Ranges without
 * weight decay are updated by themselves (no branch in the loops). */
static void chunk(void *ctx, long c)
{
	const struct pass *ps = ctx;
	struct rt_optim *o = ps->o;
	size_t off = ps->first + (size_t)c * RT_CHUNK, end = ps->first + ps->n;
	size_t len = end - off < RT_CHUNK ? end - off : RT_CHUNK, run, at;
	double total = 0.0;
	bool exempt;

	if (!o->n_no_decay) {
		o->part[c] = range(ps, ps->u, off, len);
		return;
	}
	for (at = off; at < off + len; at += run) {
		run = decay_run(o, at, off + len - at, &exempt);
		total += range(ps, exempt ? ps->u_nd : ps->u, at, run);
	}
	o->part[c] = total;
}

/* The update in chunks of RT_CHUNK elements, spread over o->pool; each
 * chunk's sum of squares is kept and they are added in chunk order, so the
 * result does not depend on the thread count. */
static double chunks(struct rt_optim *o, const struct upd *u, float *params, const float *grads,
		     float *const *slots, int n_slots, size_t first, size_t n, bool take,
		     size_t shift, size_t gshift)
{
	struct upd u_nd = *u;
	struct pass ps = { o, u, &u_nd, params, grads, first, n, slots, n_slots, take, shift, gshift };
	long nc = (long)((n + RT_CHUNK - 1) / RT_CHUNK), c;
	double total = 0.0;

	u_nd.wd = 0.0f;      /* SGD: no L2 term */
	u_nd.decay = 1.0f;   /* AdamW: w * 1 */
	rt_pool_for(o->pool, nc, chunk, &ps);
	for (c = 0; c < nc; c++)
		total += o->part[c];
	return total;
}

/* The constants of this step's update (o->step already counts it). */
static struct upd upd_of(const struct rt_optim *o, double lr, float scale)
{
	struct upd u = { 0 };

	u.scale = scale;
	if (o->type == RT_OPTIM_ADAMW) {
		double t = (double)o->step; /* already counts this step */

		u.decay = (float)(1.0 - lr * o->weight_decay);
		u.b1 = (float)o->beta1;
		u.b2 = (float)o->beta2;
		/* 1 - beta in double, as PyTorch: 1.0f - 0.999f would be off by 1.3e-5 */
		u.c1 = (float)(1.0 - o->beta1);
		u.c2 = (float)(1.0 - o->beta2);
		u.step_size = (float)(lr / (1.0 - pow(o->beta1, t)));
		u.bc2_sqrt = (float)sqrt(1.0 - pow(o->beta2, t));
		u.eps = (float)o->eps;
	} else {
		u.mu = (float)o->momentum;
		u.wd = (float)o->weight_decay;
		u.lr = (float)lr;
	}
	return u;
}

/* [first, first + n) clamped to the state buffers */
static void clamp(const struct rt_optim *o, size_t *first, size_t *n)
{
	if (*first > o->n)
		*first = o->n;
	if (*n > o->n - *first)
		*n = o->n - *first;
}

static double step(struct rt_optim *o, float *params, const float *grads, float *const *slots,
		   int n_slots, size_t first, size_t n, double lr, float scale, bool take)
{
	struct upd u;

	clamp(o, &first, &n);
	o->step++;
	u = upd_of(o, lr, scale);
	return chunks(o, &u, params, grads, slots, n_slots, first, n, take, 0, 0);
}

double rt_optim_step_spans(struct rt_optim *o, float *params, float *grads,
			   const struct rt_span *spans, int n_spans, double lr, float scale)
{
	double total = 0.0;
	struct upd u;
	int i;

	o->step++;
	u = upd_of(o, lr, scale);
	for (i = 0; i < n_spans; i++) {
		size_t first = spans[i].first, n = spans[i].count;

		clamp(o, &first, &n);
		total += chunks(o, &u, params, grads, NULL, 0, first, n, true, 0, 0);
	}
	return total;
}

double rt_optim_step_pieces(struct rt_optim *o, float *params, float *grads,
			    const struct rt_optim_piece *pieces, int n_pieces, double lr,
			    float scale)
{
	double total = 0.0;
	struct upd u;
	int i;

	o->step++;
	u = upd_of(o, lr, scale);
	for (i = 0; i < n_pieces; i++) {
		size_t at = pieces[i].at, n = pieces[i].count;

		clamp(o, &at, &n); /* within the state; runtime/parallel/shard.c's pieces always are */
		if (n > 0 && at <= pieces[i].first && pieces[i].grad <= pieces[i].first)
			total += chunks(o, &u, params, grads, NULL, 0, pieces[i].first, n, true,
					pieces[i].first - at, pieces[i].first - pieces[i].grad);
	}
	return total;
}

void rt_optim_step(struct rt_optim *o, float *params, const float *grads, size_t n, double lr)
{
	step(o, params, grads, NULL, 0, 0, n, lr, 1.0f, false);
}

double rt_optim_step_take(struct rt_optim *o, float *params, float *grads, size_t first, size_t n,
			  double lr, float scale)
{
	return step(o, params, grads, NULL, 0, first, n, lr, scale, true);
}

double rt_optim_step_sum(struct rt_optim *o, float *params, float *const *slots, int n_slots,
			 size_t first, size_t n, double lr)
{
	return step(o, params, NULL, slots, n_slots > 0 ? n_slots : 1, first, n, lr, 1.0f, false);
}

/* --- schedule --- */

double rt_lr_at(const struct spec *s, int64_t step, int64_t total_steps)
{
	const struct spec_lr_schedule *ls = &s->train.lr_schedule;
	double lr = s->train.optimizer.lr, min_lr = ls->min_lr, p;
	int64_t warm = ls->warmup_steps, span;

	if (step < 0)
		step = 0;
	if (step < warm)
		return lr * (double)(step + 1) / (double)warm;
	if (ls->decay && !strcmp(ls->decay, "constant"))
		return lr;
	span = total_steps - 1 - warm;
	if (span <= 0)
		return lr;
	if (step >= total_steps - 1)
		return min_lr;
	p = (double)(step - warm) / (double)span;
	return min_lr + 0.5 * (lr - min_lr) * (1.0 + cos(M_PI * p));
}

/* --- clipping --- */

RT_SIMD_CLONES static double sumsq_chunk(const float *restrict g, size_t n)
{
	double acc[RT_LANES] = { 0 };
	size_t i = 0, j;

	for (; i + RT_LANES <= n; i += RT_LANES)
		for (j = 0; j < RT_LANES; j++)
			acc[j] += (double)g[i + j] * (double)g[i + j];
	for (j = 0; i < n; i++, j++)
		acc[j] += (double)g[i] * (double)g[i];
	return lanes_sum(acc);
}

double rt_sumsq(const float *g, size_t n)
{
	double total = 0.0;
	size_t off;

	for (off = 0; off < n; off += RT_CHUNK)
		total += sumsq_chunk(g + off, n - off < RT_CHUNK ? n - off : RT_CHUNK);
	return total;
}

RT_SIMD_CLONES void rt_scale(float *g, size_t n, float factor)
{
	size_t i;

	for (i = 0; i < n; i++)
		g[i] *= factor;
}

double rt_clip_factor(double norm, double max_norm)
{
	double coef;

	if (max_norm <= 0.0)
		return 1.0;
	coef = max_norm / (norm + 1e-6);
	return coef < 1.0 ? coef : 1.0;
}
