/*
 * elem.h - the per-element math of the kernels, written once for the CPU and
 * the GPU: the CPU's loops (kernels.c, transformer.c, model/optim.c) and the
 * CUDA kernels (gpu/kernels.cu, gpu/transformer.cu) call these same
 * functions, so that every element gets the same operations in the same
 * order on both.
 *
 * Same operations give the same bits when neither side fuses a * b + c into
 * one rounding: the CPU code is built for the x86-64 baseline and for AVX2,
 * neither of which has FMA, and nvcc builds the GPU path with -fmad=false
 * (cmake/dtrain_cuda.cmake). Division and sqrtf are correctly rounded on
 * both (nvcc's defaults, -prec-div and -prec-sqrt). What libm computes its
 * own way (tanhf) stays out of this file: a kernel that needs it is compared
 * with a tolerance, not bit for bit.
 *
 * tests/runtime/test_elem.c checks the activations and the updates against
 * their definitions in double precision, test_transformer the LayerNorm
 * ones through finite differences; test_gpu_kernels checks the GPU's
 * kernels against the CPU's, bit for bit for what is here. (LayerNorm's
 * elements are the CPU's formula on the GPU too, but its row sums run in
 * another order there: test_gpu_transformer compares within a tolerance.)
 *
 * Sections: activations, LayerNorm, optimizer updates.
 */
#ifndef DTRAIN_RUNTIME_ELEM_H
#define DTRAIN_RUNTIME_ELEM_H

#include <math.h>

#include "runtime/kernels/fastexp.h"

/* --- activations --- */

/* GELU, tanh form: 0.5 x (1 + tanh(k (x + c x^3))), Hendrycks & Gimpel 2016 */
#define RT_GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define RT_GELU_C 0.044715f

/* 0.5 (1 + tanh(u)) = 1 / (1 + e^(-2u)): one exponential, and no
 * cancellation where tanh nears -1. */
RT_ELEM float rt_gelu(float v)
{
	return v / (1.0f + rt__expf(-2.0f * RT_GELU_K * (v + RT_GELU_C * v * v * v)));
}

/* dy * GELU'(v), with s = 0.5 (1 + tanh(u)) and 0.5 (1 - tanh(u)^2) = 2 s (1 - s). */
RT_ELEM float rt_gelu_back(float v, float dy)
{
	float s = 1.0f / (1.0f + rt__expf(-2.0f * RT_GELU_K * (v + RT_GELU_C * v * v * v)));
	float d = s + 2.0f * v * s * (1.0f - s) * RT_GELU_K * (1.0f + 3.0f * RT_GELU_C * v * v);

	return dy * d;
}

/* SwiGLU: silu(g) u, silu(g) = g sigmoid(g) (Shazeer 2020; Llama's MLP) */
RT_ELEM float rt_swiglu(float g, float u)
{
	return g / (1.0f + rt__expf(-g)) * u;
}

/* its gradients, given dh: dg = dh u s (1 + g (1 - s)), du = dh g s, with
 * s = sigmoid(g) */
RT_ELEM void rt_swiglu_back(float g, float u, float dh, float *dg, float *du)
{
	float s = 1.0f / (1.0f + rt__expf(-g));

	*dg = dh * u * s * (1.0f + g * (1.0f - s));
	*du = dh * g * s;
}

/* --- LayerNorm (transformer.h; the row's mean m and rstd s = 1 / sqrt(var + eps) given) --- */

/* the normalised element: (x - m) s */
RT_ELEM float rt_ln_norm(float x, float m, float s)
{
	return (x - m) * s;
}

/* the output of an element normalised to norm: norm w + b */
RT_ELEM float rt_ln_out(float norm, float w, float b)
{
	return norm * w + b;
}

/* dLoss/dx of an element normalised to norm, with dn = dy w and the row's
 * means mean_d of dn and mean_dn of dn norm:
 *	s (dn - mean_d - norm mean_dn) */
RT_ELEM float rt_ln_dx(float dn, float norm, float s, float mean_d, float mean_dn)
{
	return s * (dn - mean_d - norm * mean_dn);
}

/* --- optimizer updates (model/optim.h's rules, PyTorch's) --- */

/* SGD with momentum mu and L2 weight decay wd, learning rate lr, of one
 * element from its gradient g (scaled already: a clipping factor):
 *	g' = g + wd w;   v = mu v + g';   w -= lr v */
RT_ELEM void rt_sgd_elem(float *w, float *v, float g, float mu, float wd, float lr)
{
	float gi = g + wd * *w;
	float vi = mu * *v + gi;

	*v = vi;
	*w -= lr * vi;
}

/* AdamW's constants of one update (model/optim.c computes them once, in
 * double, from the step t and the learning rate). */
struct rt_adamw_k {
	float decay;     /* 1 - lr wd: decoupled weight decay, applied first */
	float b1, b2;    /* the betas */
	float c1, c2;    /* 1 - b1, 1 - b2 */
	float step_size; /* lr / (1 - b1^t) */
	float bc2_sqrt;  /* sqrt(1 - b2^t) */
	float eps;
};

/* AdamW of one element from its gradient g (scaled already):
 *	m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2
 *	w = w (1 - lr wd) - step_size m / (sqrt(v) / bc2_sqrt + eps) */
RT_ELEM void rt_adamw_elem(float *w, float *m, float *v, float g, struct rt_adamw_k k)
{
	float mi = k.b1 * *m + k.c1 * g;
	float vi = k.b2 * *v + k.c2 * g * g;
	float denom = sqrtf(vi) / k.bc2_sqrt + k.eps;

	*m = mi;
	*v = vi;
	*w = *w * k.decay - k.step_size * mi / denom;
}

#endif
