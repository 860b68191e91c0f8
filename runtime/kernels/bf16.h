/*
 * bf16.h - linear layers with bf16 products on the CPU (train.precision
 * "bf16"): the inputs of each product rounded to bfloat16 (8 bits of
 * mantissa, round to nearest even), the products accumulated in float32 by
 * oneDNN's matmul (Debian's libdnnl, brgemm kernels with AVX512_BF16 where
 * the CPU has them), the results float32. Everything else of a layer (the
 * bias, its gradient, the activations kept) stays float32, as PyTorch's
 * autocast keeps it.
 *
 * Same contracts as rt_linear_forward / rt_linear_backward (kernels.h):
 * row-major, x [rows][in], w [out][in], gradients of parameters
 * accumulated (or overwritten with add false), dx overwritten, rows == 0
 * does nothing. A product's error against float32 is that of rounding both
 * inputs to 8 significant bits (unit roundoff u = 2^-8): each term within
 * 2u = 2^-7 relative, so a sum of K terms within 2^-7 x sum |x_k w_k| at
 * worst, and about sqrt(K) x 2^-8 x that typically.
 *
 * A context keeps oneDNN's engine and stream, its matmul primitives (made
 * once per shape and reused) and the bf16 copies of the inputs; it is
 * used by one thread at a time. Its threads: oneDNN's OpenMP threads,
 * set by rt_bf16_init.
 *
 * Sections: life cycle, layers.
 */
#ifndef DTRAIN_RUNTIME_KERNELS_BF16_H
#define DTRAIN_RUNTIME_KERNELS_BF16_H

#include <stdbool.h>

#include "base/err.h"

struct rt_bf16;

/* --- life cycle --- */

/* A context whose products use `threads` threads (>= 1). 0, or -EIO /
 * -ENOMEM with a message naming oneDNN's call. Caller frees with
 * rt_bf16_free. */
int rt_bf16_init(struct rt_bf16 **b, int threads, struct dt_err *err);
void rt_bf16_free(struct rt_bf16 *b);
/* 0, or the first failure of a product since init (a primitive oneDNN
 * could not make, memory), with its message: a failed product leaves its
 * output unwritten. */
int rt_bf16_status(const struct rt_bf16 *b, struct dt_err *err);

/* --- layers --- */

/* y = x W^T + b (b NULL: none), products in bf16. keep: NULL, or
 * [rows][in] where x's bf16 copy (the one the product reads) stays for
 * the backward's dw, so that backward neither rounds x again nor needs
 * x itself kept */
void rt_bf16_linear_forward(struct rt_bf16 *b, const float *x, const float *w, const float *bias,
			    float *y, int rows, int in, int out, unsigned short *keep);
/* dx = dy W, dw (+)= dy^T x (products in bf16), db (+)= the column sums of
 * dy (float32, as rt_linear_backward); a NULL output is not computed. dw's
 * x: kept (a forward's keep) when not NULL, else x rounded now */
void rt_bf16_linear_backward(struct rt_bf16 *b, const float *x, const unsigned short *kept,
			     const float *w, const float *dy, float *dx, float *dw, float *db,
			     int rows, int in, int out, bool add);

/* A float's nearest bf16 (round to nearest even; NaN stays NaN), and back. */
unsigned short rt_bf16_round(float f);
float rt_bf16_float(unsigned short h);

#endif
