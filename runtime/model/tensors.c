/*
 * tensors.c - what the model types' hooks share (internal.h): an entry of a
 * block's tensor table, and the fills of initial values.
 */
#include "runtime/model/internal.h"

#include <stdio.h>
#include <string.h>

void rt__model_tensor(struct rt_tensor *t, const char *prefix, const char *name, long d0, long d1)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s%s", prefix, name);
	t->ndim = d1 ? 2 : 1;
	t->shape[0] = d0;
	t->shape[1] = d1;
	t->decay = d1 != 0; /* 2-D tensors only */
}

void rt__fill_normal(struct dt_rng *r, float *p, size_t n, double std)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (float)(std * (double)dt_rng_normal(r));
}

void rt__fill(float *p, size_t n, float v)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = v;
}
