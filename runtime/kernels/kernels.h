/*
 * kernels.h - the dense numerical kernels on the CPU that every model
 * uses: linear layers (OpenBLAS sgemm), element-wise activations and the
 * fused softmax + cross-entropy loss, forward and backward (a transformer's
 * own kernels are in transformer.h).
 *
 * Conventions for every kernel here:
 *   - float32, row-major, one sample per row: x is [rows][in], a weight
 *     matrix is [out][in] (PyTorch's nn.Linear layout, so y = x W^T + b).
 *   - pointers are borrowed for the call; nothing is allocated or kept.
 *   - gradients of parameters (dw, db) are ACCUMULATED (+=), so that
 *     micro-batches add up in one buffer; the caller zeroes them per step.
 *   - gradients of inputs (dx) are overwritten.
 *   - rows == 0 is allowed and does nothing (no write, no BLAS call).
 *   - results are deterministic for a given OpenBLAS thread count.
 *
 * Sections: activations, linear layers, loss, threads.
 */
#ifndef DTRAIN_RUNTIME_KERNELS_H
#define DTRAIN_RUNTIME_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* RT_SIMD_CLONES builds a loop twice, for AVX2 and for the x86-64 baseline,
 * and the loader picks one (gcc's target_clones); the optimizer's update and
 * sum of squares (optim.c) use it. Neither build uses FMA, so both give the
 * same bits. Sums over RT_LANES interleaved double accumulators vectorise
 * without reordering any single sum. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define RT_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define RT_SIMD_CLONES
#endif
#define RT_LANES 8

/* --- activations --- */

enum rt_act {
	RT_ACT_RELU, /* max(x, 0); derivative 0 at x = 0 */
	RT_ACT_GELU, /* the tanh approximation (below), not the erf form */
	RT_ACT_TANH,
};

/* "relu" | "gelu" | "tanh" (model.activation) -> *act; 0 or -EINVAL. */
int rt_act_parse(const char *name, enum rt_act *act);
/* The name of act ("relu", ...), or "?" for a value outside the enum. */
const char *rt_act_name(enum rt_act act);

/* y[i] = f(x[i]) for i < n. y may equal x (in place).
 * GELU is the tanh approximation of Hendrycks & Gimpel (2016), as in GPT-2
 * and PyTorch's gelu(approximate="tanh"):
 *	gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 * It differs from the exact x Phi(x) by less than 1e-3 (absolute). */
void rt_act_forward(enum rt_act act, const float *x, float *y, size_t n);

/* dx[i] = dy[i] * f'(x[i]) for i < n, where x is the PRE-activation input
 * that rt_act_forward was given. Element-wise: dx may equal dy or x (in
 * place), but must not partly overlap them. */
void rt_act_backward(enum rt_act act, const float *x, const float *dy, float *dx, size_t n);

/* --- linear layers --- */

/* y = x W^T + b:
 *	x [rows][in], w [out][in], b [out] or NULL (no bias), y [rows][out].
 * y must not alias x or w. */
void rt_linear_forward(const float *x, const float *w, const float *b, float *y,
		       int rows, int in, int out);

/* Backward of rt_linear_forward, given dy [rows][out] = dLoss/dy:
 *	dx [rows][in]  = dy W            (overwritten; NULL: not computed)
 *	dw [out][in]  += dy^T x          (accumulated; NULL: not computed)
 *	db [out]      += sum over rows of dy (accumulated; NULL: not computed)
 * With add false, dw and db are overwritten instead (=, the same bits as
 * zeroing them and adding: 0 + x is x), which saves a pass that zeroes them.
 * x and w are the forward's inputs. No output may alias an input. */
void rt_linear_backward(const float *x, const float *w, const float *dy,
			float *dx, float *dw, float *db, int rows, int in, int out, bool add);

/* The same over a block of a layer's outputs, for the replicas of a node
 * that split every layer between them (runtime/parallel/dp.h, "split"): output
 * columns [c0, c1) of y, i.e. rows [c0, c1) of w and b; the arrays keep
 * their whole-layer shapes and strides (y [rows][out], w [out][in]).
 * With [c0, c1) the whole width they make the same calls as
 * rt_linear_forward/_backward (the same bits); with a block, each output
 * element is the same sum, which OpenBLAS may round differently. */
void rt_linear_forward_cols(const float *x, const float *w, const float *b, float *y,
			    int rows, int in, int out, int c0, int c1);
/* dw[c0..c1)[in] += dy[:, c0..c1)^T x and db[c0..c1) += the column sums of
 * dy[:, c0..c1): the gradient of the block's weights over all rows. */
void rt_linear_backward_cols(const float *x, const float *dy, float *dw, float *db,
			     int rows, int in, int out, int c0, int c1);
/* dx[:, i0..i1) = dy W[:, i0..i1) (overwritten): a block of the input
 * gradient's columns, from all of dy [rows][out] and w [out][in]. */
void rt_linear_dx_cols(const float *w, const float *dy, float *dx, int rows, int in, int out,
		       int i0, int i1);
/* dw[:, i0..i1) += dy^T x[:, i0..i1): a block of the weight gradient's
 * columns (the layer's inputs) over all rows, for a layer whose input
 * gradient is cut by rows (runtime/model/model.h, rt_part_head_rows). */
void rt_linear_dw_in_cols(const float *x, const float *dy, float *dw, int rows, int in, int out,
			  int i0, int i1);

/* --- loss --- */

/* Fused, numerically stable softmax + cross-entropy over logits
 * [rows][classes] with integer labels [rows] in [0, classes).
 *
 * Returns the SUM over rows of -log softmax(logits)[label] (double; divide by
 * the batch size for the mean). The log-sum-exp subtracts each row's maximum
 * first, so large logits (1e4, 1e30) neither overflow nor lose the answer.
 *
 * dlogits [rows][classes] (NULL: not computed) gets (softmax - onehot) *
 * grad_scale, overwritten; pass grad_scale = 1 / global batch for the
 * gradient of the mean loss over the global batch.
 *
 * *correct (NULL: not counted) gets += the number of rows whose argmax
 * (the first maximum on ties) equals the label.
 *
 * A label outside [0, classes) makes the whole call return NAN and write
 * nothing (neither dlogits nor correct): a bad label is a data error, and a
 * NaN loss cannot be mistaken for a value. Find the row with
 * rt_labels_check(). rows == 0 returns 0. */
double rt_softmax_xent(const float *logits, const int32_t *labels, int rows, int classes,
		       float grad_scale, float *dlogits, int64_t *correct);

/* The first row whose label is outside [0, classes), or -1 when all are
 * valid (for the error message after rt_softmax_xent returned NAN). */
int rt_labels_check(const int32_t *labels, int rows, int classes);

/* --- threads --- */

/* OpenBLAS's thread count for the calls that follow (openblas_set_num_threads;
 * process-wide). n < 1 is taken as 1. One rank per core wants 1. */
void rt_blas_threads(int n);

#endif
