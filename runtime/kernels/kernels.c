/*
 * kernels.c - linear layers over OpenBLAS, activations, and the fused
 * softmax + cross-entropy (see kernels.h).
 *
 * The element-wise loops are plain indexed loops without early exits, so
 * that gcc vectorises the simple ones (ReLU, bias broadcast and sums, with a
 * run-time alias check); the tanh-based ones call tanhf per element. The
 * matrix products are all OpenBLAS: for widths of a few hundred they are
 * where the time goes.
 *
 * Sections: activations, linear layers, loss, threads.
 */
#include "runtime/kernels/kernels.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "runtime/kernels/elem.h"

/* --- activations (GELU's element math: elem.h, shared with the GPU) --- */

int rt_act_parse(const char *name, enum rt_act *act)
{
	if (!name)
		return -EINVAL;
	if (!strcmp(name, "relu"))
		*act = RT_ACT_RELU;
	else if (!strcmp(name, "gelu"))
		*act = RT_ACT_GELU;
	else if (!strcmp(name, "tanh"))
		*act = RT_ACT_TANH;
	else
		return -EINVAL;
	return 0;
}

const char *rt_act_name(enum rt_act act)
{
	switch (act) {
	case RT_ACT_RELU: return "relu";
	case RT_ACT_GELU: return "gelu";
	case RT_ACT_TANH: return "tanh";
	}
	return "?";
}

RT_SIMD_CLONES void rt_act_forward(enum rt_act act, const float *x, float *y, size_t n)
{
	size_t i;

	switch (act) {
	case RT_ACT_RELU:
		for (i = 0; i < n; i++)
			y[i] = x[i] > 0.0f ? x[i] : 0.0f;
		break;
	case RT_ACT_GELU:
		for (i = 0; i < n; i++) {
			y[i] = rt_gelu(x[i]);
		}
		break;
	case RT_ACT_TANH:
		for (i = 0; i < n; i++)
			y[i] = tanhf(x[i]);
		break;
	}
}

RT_SIMD_CLONES void rt_act_backward(enum rt_act act, const float *x, const float *dy, float *dx, size_t n)
{
	size_t i;

	switch (act) {
	case RT_ACT_RELU:
		/* dy[i] read whatever x[i] is: a load under the condition
		 * would keep gcc from vectorising (and leave a branch that
		 * mispredicts on half the elements) */
		for (i = 0; i < n; i++) {
			float g = dy[i];

			dx[i] = x[i] > 0.0f ? g : 0.0f;
		}
		break;
	case RT_ACT_GELU:
		for (i = 0; i < n; i++) {
			dx[i] = rt_gelu_back(x[i], dy[i]);
		}
		break;
	case RT_ACT_TANH:
		for (i = 0; i < n; i++) {
			float t = tanhf(x[i]);

			dx[i] = dy[i] * (1.0f - t * t);
		}
		break;
	}
}

/* --- linear layers --- */

void rt_linear_forward(const float *x, const float *w, const float *b, float *y,
		       int rows, int in, int out)
{
	float beta = 0.0f;
	size_t r;
	int o;

	if (rows <= 0 || out <= 0)
		return;
	if (b) {
		/* y = b broadcast, then sgemm adds x W^T onto it (beta = 1) */
		for (r = 0; r < (size_t)rows; r++) {
			float *yr = y + r * (size_t)out;

			for (o = 0; o < out; o++)
				yr[o] = b[o];
		}
		beta = 1.0f;
	}
	if (in <= 0) {
		if (!b)
			memset(y, 0, (size_t)rows * (size_t)out * sizeof(*y));
		return;
	}
	/* y[rows][out] = x[rows][in] * w[out][in]^T */
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, out, in,
		    1.0f, x, in, w, in, beta, y, out);
}

void rt_linear_backward(const float *x, const float *w, const float *dy,
			float *dx, float *dw, float *db, int rows, int in, int out, bool add)
{
	size_t r = 0;
	int o;

	if (out <= 0 || in <= 0)
		return;
	if (rows <= 0) {
		/* nothing to add; overwriting means zeros */
		if (!add && dw)
			memset(dw, 0, (size_t)out * (size_t)in * sizeof(*dw));
		if (!add && db)
			memset(db, 0, (size_t)out * sizeof(*db));
		return;
	}
	/* dw[out][in] (+)= dy[rows][out]^T * x[rows][in] */
	if (dw)
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, rows,
			    1.0f, dy, out, x, in, add ? 1.0f : 0.0f, dw, in);
	if (db) {
		if (!add) {
			memcpy(db, dy, (size_t)out * sizeof(*db));
			r = 1;
		}
		for (; r < (size_t)rows; r++) {
			const float *dyr = dy + r * (size_t)out;

			for (o = 0; o < out; o++)
				db[o] += dyr[o];
		}
	}
	/* dx[rows][in] = dy[rows][out] * w[out][in] */
	if (dx)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, in, out,
			    1.0f, dy, out, w, in, 0.0f, dx, in);
}

void rt_linear_forward_cols(const float *x, const float *w, const float *b, float *y,
			    int rows, int in, int out, int c0, int c1)
{
	int n = c1 - c0, o;
	size_t r;

	if (rows <= 0 || n <= 0)
		return;
	for (r = 0; r < (size_t)rows; r++) {
		float *yr = y + r * (size_t)out;

		for (o = c0; o < c1; o++)
			yr[o] = b ? b[o] : 0.0f;
	}
	if (in > 0)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, in, 1.0f, x, in,
			    w + (size_t)c0 * (size_t)in, in, 1.0f, y + c0, out);
}

void rt_linear_backward_cols(const float *x, const float *dy, float *dw, float *db,
			     int rows, int in, int out, int c0, int c1)
{
	int n = c1 - c0, o;
	size_t r;

	if (rows <= 0 || n <= 0 || in <= 0)
		return;
	if (dw)
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, in, rows, 1.0f, dy + c0, out,
			    x, in, 1.0f, dw + (size_t)c0 * (size_t)in, in);
	if (db)
		for (r = 0; r < (size_t)rows; r++) {
			const float *dyr = dy + r * (size_t)out;

			for (o = c0; o < c1; o++)
				db[o] += dyr[o];
		}
}

void rt_linear_dx_cols(const float *w, const float *dy, float *dx, int rows, int in, int out,
		       int i0, int i1)
{
	int n = i1 - i0;

	if (rows <= 0 || n <= 0 || out <= 0)
		return;
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, n, out, 1.0f, dy, out, w + i0, in,
		    0.0f, dx + i0, in);
}

void rt_linear_dw_in_cols(const float *x, const float *dy, float *dw, int rows, int in, int out,
			  int i0, int i1)
{
	int n = i1 - i0;

	if (rows <= 0 || n <= 0 || out <= 0)
		return;
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, n, rows, 1.0f, dy, out, x + i0, in,
		    1.0f, dw + i0, in);
}

/* --- loss --- */

int rt_labels_check(const int32_t *labels, int rows, int classes)
{
	int r;

	for (r = 0; r < rows; r++)
		if (labels[r] < 0 || labels[r] >= classes)
			return r;
	return -1;
}

double rt_softmax_xent(const float *logits, const int32_t *labels, int rows, int classes,
		       float grad_scale, float *dlogits, int64_t *correct)
{
	int64_t hits = 0;
	double total = 0.0;
	int r, c;

	if (rows <= 0)
		return 0.0;
	if (classes <= 0 || rt_labels_check(labels, rows, classes) >= 0)
		return NAN;
	for (r = 0; r < rows; r++) {
		const float *z = logits + (size_t)r * (size_t)classes;
		int label = labels[r], arg = 0;
		double m = z[0], sum = 0.0, lse;

		/* log sum_j exp(z_j) = m + log sum_j exp(z_j - m), every term <= 1 */
		for (c = 1; c < classes; c++) {
			if (z[c] > z[arg])
				arg = c;
		}
		m = z[arg];
		for (c = 0; c < classes; c++)
			sum += exp((double)z[c] - m);
		lse = log(sum);
		total += lse - ((double)z[label] - m);
		hits += arg == label;
		if (dlogits) {
			float *d = dlogits + (size_t)r * (size_t)classes;

			for (c = 0; c < classes; c++) {
				double p = exp((double)z[c] - m - lse);

				d[c] = (float)((p - (c == label)) * grad_scale);
			}
		}
	}
	if (correct)
		*correct += hits;
	return total;
}

/* --- threads --- */

void rt_blas_threads(int n)
{
	openblas_set_num_threads(n < 1 ? 1 : n);
}
