/*
 * sampling.c - the next token from logits (sampling.h): the distribution
 * (temperature, then top-k, then top-p), then one draw from it.
 *
 * Sections: life cycle, the distribution, the draw.
 */
#include "runtime/model/sampling.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

/* --- life cycle --- */

int rt_token_sampler_init(struct rt_token_sampler *s, long V)
{
	*s = (struct rt_token_sampler){ .V = V };
	s->p = malloc((size_t)V * sizeof(*s->p));
	s->key = malloc((size_t)V * sizeof(*s->key));
	return s->p && s->key ? 0 : -ENOMEM;
}

void rt_token_sampler_free(struct rt_token_sampler *s)
{
	free(s->p);
	free(s->key);
	*s = (struct rt_token_sampler){ 0 };
}

/* --- the distribution --- */

/* largest logit first; equal logits by id, so the order is total */
static int by_logit(const void *a, const void *b)
{
	const struct rt_sample_key *x = a, *y = b;

	if (x->logit != y->logit)
		return x->logit > y->logit ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

/* How many of the sorted tokens top_k keeps: k, and every later token tied
 * with the k-th. */
static long keep_top_k(const struct rt_sample_key *key, long V, long k)
{
	while (k < V && key[k].logit == key[k - 1].logit)
		k++;
	return k;
}

/* How many of the first n sorted tokens (weights p, summing to sum) the
 * nucleus keeps: the fewest whose share reaches top_p. */
static long keep_top_p(const struct rt_sample_key *key, const double *p, long n, double sum, double top_p)
{
	double acc = 0.0;
	long j;

	for (j = 0; j < n; j++) {
		acc += p[key[j].id];
		if (acc >= top_p * sum)
			return j + 1;
	}
	return n;
}

/* The arg max, first of equals */
static long arg_max(const float *logits, long V)
{
	long i, best = 0;

	for (i = 1; i < V; i++)
		if (logits[i] > logits[best])
			best = i;
	return best;
}

/* p = exp((l - max) / T) for the n first sorted tokens, zero for the others;
 * their sum */
static double weigh_sorted(double *p, const struct rt_sample_key *key, long V, long n, double max, double T)
{
	double sum = 0.0;
	long j;

	for (j = 0; j < V; j++)
		p[key[j].id] = j < n ? exp(((double)key[j].logit - max) / T) : 0.0;
	for (j = 0; j < n; j++)
		sum += p[key[j].id];
	return sum;
}

long rt_sample_probs(struct rt_token_sampler *s, const float *logits, const struct rt_sampling *o)
{
	long i, n = s->V, V = s->V, best = arg_max(logits, V);
	double max = logits[best], sum = 0.0;

	if (o->temperature == 0.0) {
		for (i = 0; i < V; i++)
			s->p[i] = i == best;
		return 1;
	}
	if ((o->top_k > 0 && o->top_k < V) || o->top_p < 1.0) {
		for (i = 0; i < V; i++)
			s->key[i] = (struct rt_sample_key){ logits[i], (int32_t)i };
		qsort(s->key, (size_t)V, sizeof(*s->key), by_logit);
		if (o->top_k > 0 && o->top_k < V)
			n = keep_top_k(s->key, V, o->top_k);
		sum = weigh_sorted(s->p, s->key, V, n, max, o->temperature);
		if (o->top_p < 1.0) {
			n = keep_top_p(s->key, s->p, n, sum, o->top_p);
			sum = weigh_sorted(s->p, s->key, V, n, max, o->temperature);
		}
	} else {
		for (i = 0; i < V; i++)
			sum += s->p[i] = exp(((double)logits[i] - max) / o->temperature);
	}
	for (i = 0; i < V; i++)
		s->p[i] /= sum;
	return n;
}

/* --- the draw --- */

int32_t rt_sample(struct rt_token_sampler *s, const float *logits, const struct rt_sampling *o,
		  struct dt_rng *r)
{
	double u, acc = 0.0;
	long i, last = 0;

	rt_sample_probs(s, logits, o);
	if (o->temperature == 0.0)
		return (int32_t)arg_max(logits, s->V);
	u = dt_rng_uniform_double(r);
	for (i = 0; i < s->V; i++) {
		if (s->p[i] <= 0.0)
			continue;
		acc += s->p[i];
		last = i;
		if (u < acc)
			return (int32_t)i;
	}
	return (int32_t)last; /* u at or past the rounded sum */
}
