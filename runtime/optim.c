/*
 * optim.c - SGD with momentum and AdamW updates, the learning-rate schedule
 * and gradient-norm helpers (see optim.h for the formulas and choices).
 *
 * Sections: life cycle, update, schedule, clipping.
 */
#include "runtime/optim.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
	if (!o->m || (o->type == RT_OPTIM_ADAMW && !o->v)) {
		dt_err_add(err, "train.optimizer: cannot allocate the %s state for %zu parameters",
			   o->type == RT_OPTIM_ADAMW ? "adamw" : "sgd", n_params);
		rt_optim_free(o);
		return -ENOMEM;
	}
	return 0;
}

void rt_optim_free(struct rt_optim *o)
{
	free(o->v);
	free(o->m);
	memset(o, 0, sizeof(*o));
}

/* --- update --- */

static void sgd_step(struct rt_optim *o, float *w, const float *g, size_t n, double lr)
{
	const float mu = (float)o->momentum, wd = (float)o->weight_decay, a = (float)lr;
	float *v = o->m;
	size_t i;

	for (i = 0; i < n; i++) {
		float gi = g[i] + wd * w[i];

		v[i] = mu * v[i] + gi;
		w[i] -= a * v[i];
	}
}

static void adamw_step(struct rt_optim *o, float *w, const float *g, size_t n, double lr)
{
	double t = (double)o->step; /* already counts this step */
	const float decay = (float)(1.0 - lr * o->weight_decay);
	const float b1 = (float)o->beta1, b2 = (float)o->beta2;
	/* 1 - beta in double, as PyTorch: 1.0f - 0.999f would be off by 1.3e-5 */
	const float c1 = (float)(1.0 - o->beta1), c2 = (float)(1.0 - o->beta2);
	const float step_size = (float)(lr / (1.0 - pow(o->beta1, t)));
	const float bc2_sqrt = (float)sqrt(1.0 - pow(o->beta2, t));
	const float eps = (float)o->eps;
	float *m = o->m, *v = o->v;
	size_t i;

	for (i = 0; i < n; i++) {
		float gi = g[i], denom;

		w[i] *= decay;
		m[i] = b1 * m[i] + c1 * gi;
		v[i] = b2 * v[i] + c2 * gi * gi;
		denom = sqrtf(v[i]) / bc2_sqrt + eps;
		w[i] -= step_size * m[i] / denom;
	}
}

void rt_optim_step(struct rt_optim *o, float *params, const float *grads, size_t n, double lr)
{
	if (n > o->n)
		n = o->n; /* never past the state buffers */
	o->step++;
	if (o->type == RT_OPTIM_ADAMW)
		adamw_step(o, params, grads, n, lr);
	else
		sgd_step(o, params, grads, n, lr);
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

double rt_sumsq(const float *g, size_t n)
{
	double sum = 0.0;
	size_t i;

	for (i = 0; i < n; i++)
		sum += (double)g[i] * (double)g[i];
	return sum;
}

void rt_scale(float *g, size_t n, float factor)
{
	size_t i;

	for (i = 0; i < n; i++)
		g[i] *= factor;
}

double rt_clip_factor(double sumsq, double max_norm)
{
	double coef;

	if (max_norm <= 0.0)
		return 1.0;
	coef = max_norm / (sqrt(sumsq) + 1e-6);
	return coef < 1.0 ? coef : 1.0;
}
