/*
 * sampling.h - the next token from a language model's logits: the most
 * likely one (temperature 0), or a draw from softmax(logits / temperature)
 * restricted first to the top k tokens, then to the nucleus: the fewest most
 * likely tokens whose probability adds up to top_p (Holtzman et al. 2020,
 * "The Curious Case of Neural Text Degeneration"). Hugging Face's generate()
 * applies its temperature, top-k and top-p warpers in that order, so the
 * same settings name the same distribution there and here.
 *
 * The distribution is computed in double: p[i] = exp((l[i] - max) / T) over
 * the kept tokens, divided by their sum. Ties at the k-th largest logit are
 * all kept (as torch.topk's threshold in nanoGPT's and HF's samplers).
 *
 * Life cycle: rt_token_sampler_init() for a vocabulary of V tokens (scratch
 * buffers), rt_sample() per token, rt_token_sampler_free().
 */
#ifndef DTRAIN_RUNTIME_MODEL_SAMPLING_H
#define DTRAIN_RUNTIME_MODEL_SAMPLING_H

#include <stdint.h>

#include "base/rng.h"

struct rt_sampling {
	double temperature; /* >= 0; 0: the arg max, no draw */
	long top_k;         /* 0 or >= V: every token */
	double top_p;       /* in (0, 1]; 1: every token top_k kept */
};

struct rt_sample_key {
	float logit;
	int32_t id;
};

struct rt_token_sampler {
	long V;                    /* tokens in a logits row */
	double *p;                 /* [V] the last distribution (rt_sample_probs) */
	struct rt_sample_key *key; /* [V] tokens by logit, largest first (top-k, top-p) */
};

/* --- life cycle --- */

/* Scratch for rows of V logits: 0, or -ENOMEM. Free with rt_token_sampler_free()
 * (also after a failed init). */
int rt_token_sampler_init(struct rt_token_sampler *s, long V);
void rt_token_sampler_free(struct rt_token_sampler *s);

/* --- operations --- */

/* The distribution o gives over logits [V], into s->p (sums to 1; zero for
 * the tokens set aside); returns how many tokens have p > 0. Temperature 0
 * puts all of it on the first arg max. */
long rt_sample_probs(struct rt_token_sampler *s, const float *logits, const struct rt_sampling *o);

/* One token drawn from that distribution with r (one uniform draw; none at
 * temperature 0). s->p then holds the distribution. */
int32_t rt_sample(struct rt_token_sampler *s, const float *logits, const struct rt_sampling *o,
		  struct dt_rng *r);

#endif
