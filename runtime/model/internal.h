/*
 * internal.h - what the model types' files (gpt.c, llama.c) share,
 * defined in tensors.c; not part of the model interface (model.h).
 */
#ifndef DTRAIN_RUNTIME_MODEL_INTERNAL_H
#define DTRAIN_RUNTIME_MODEL_INTERNAL_H

#include <stddef.h>

#include "base/rng.h"
#include "runtime/model/model.h"

/* One entry of a block's tensor table (the tensors hook): t zeroed, named
 * prefix + name, shape [d0] (d1 0) or [d0][d1]; weight decay on the 2-D
 * tensors only (nanoGPT's and Hugging Face's rule: matrices and
 * embeddings, not biases and norms). */
void rt__model_tensor(struct rt_tensor *t, const char *prefix, const char *name, long d0, long d1);

/* p[0..n) from normal(0, std) of r, in order (the init hooks: the same
 * seed gives the same parameters on every layout). */
void rt__fill_normal(struct dt_rng *r, float *p, size_t n, double std);

/* p[0..n) = v. */
void rt__fill(float *p, size_t n, float v);

#endif
