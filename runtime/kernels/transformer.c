/*
 * transformer.c - embeddings, LayerNorm and causal self-attention, forward
 * and backward (transformer.h). Plain loops over rows: sums in float in
 * index order, so that a result depends on nothing but its inputs.
 *
 * Sections: embeddings, LayerNorm, attention.
 */
#include "runtime/kernels/transformer.h"

#include <math.h>
#include <string.h>

#include <cblas.h>

#include "runtime/kernels/elem.h"
#include "runtime/kernels/fastexp.h"
#include "runtime/kernels/kernels.h"

/* --- embeddings --- */

void rt_embed_forward(const int32_t *tok, const float *wte, const float *wpe, float *out, int B,
		      int T, int C)
{
	int b, t, i;

	for (b = 0; b < B; b++)
		for (t = 0; t < T; t++) {
			size_t n = (size_t)b * (size_t)T + (size_t)t;
			const float *e = wte + (size_t)tok[n] * (size_t)C, *p = wpe + (size_t)t * (size_t)C;
			float *o = out + n * (size_t)C;

			for (i = 0; i < C; i++)
				o[i] = e[i] + p[i];
		}
}

void rt_embed_backward(const int32_t *tok, const float *dout, float *dwte, float *dwpe, int B,
		       int T, int C)
{
	int b, t, i;

	for (b = 0; b < B; b++)
		for (t = 0; t < T; t++) {
			size_t n = (size_t)b * (size_t)T + (size_t)t;
			const float *d = dout + n * (size_t)C;
			float *de = dwte + (size_t)tok[n] * (size_t)C, *dp = dwpe + (size_t)t * (size_t)C;

			for (i = 0; i < C; i++) {
				de[i] += d[i];
				dp[i] += d[i];
			}
		}
}

/* --- LayerNorm (the element math: elem.h, shared with the GPU) --- */

void rt_layernorm_forward(const float *x, const float *w, const float *b, float *y, float *mean,
			  float *rstd, int N, int C)
{
	int n, i;

	for (n = 0; n < N; n++) {
		const float *xr = x + (size_t)n * (size_t)C;
		float *yr = y + (size_t)n * (size_t)C, m = 0.0f, v = 0.0f, s;

		for (i = 0; i < C; i++)
			m += xr[i];
		m /= (float)C;
		for (i = 0; i < C; i++)
			v += (xr[i] - m) * (xr[i] - m);
		v /= (float)C;
		s = 1.0f / sqrtf(v + RT_LN_EPS);
		for (i = 0; i < C; i++)
			yr[i] = rt_ln_out(rt_ln_norm(xr[i], m, s), w[i], b[i]);
		mean[n] = m;
		rstd[n] = s;
	}
}

void rt_layernorm_backward(const float *dy, const float *x, const float *w, const float *mean,
			   const float *rstd, float *dx, float *dw, float *db, int N, int C)
{
	int n, i;

	for (n = 0; n < N; n++) {
		const float *dyr = dy + (size_t)n * (size_t)C, *xr = x + (size_t)n * (size_t)C;
		float *dxr = dx + (size_t)n * (size_t)C, m = mean[n], s = rstd[n];
		float mean_d = 0.0f, mean_dn = 0.0f;

		/* dnorm = dy w; dx = s (dnorm - mean(dnorm) - norm mean(dnorm norm)) */
		for (i = 0; i < C; i++) {
			float norm = rt_ln_norm(xr[i], m, s), dn = dyr[i] * w[i];

			mean_d += dn;
			mean_dn += dn * norm;
		}
		mean_d /= (float)C;
		mean_dn /= (float)C;
		for (i = 0; i < C; i++) {
			float norm = rt_ln_norm(xr[i], m, s), dn = dyr[i] * w[i];

			db[i] += dyr[i];
			dw[i] += norm * dyr[i];
			dxr[i] += rt_ln_dx(dn, norm, s, mean_d, mean_dn);
		}
	}
}

/* --- attention --- */

/* One head of one sequence at a time, through sgemm: its scores S = Q K^T
 * scale [T][T] in the caller's scratch (the only T x T array), masked
 * causally, a softmax per row, then P V. Q, K and V are strided views of
 * qkv (row stride 3C), the head's output a strided view of out (stride C).
 * The products run over the whole square; the masked half is thrown away
 * (half of them wasted, against a triangle cut into blocks). */

/* A causal row of scores s [T], its first n live: the softmax in place (the
 * rest zero); returns the log of its normaliser. Loops without a call or a
 * carried sum vectorise (fastexp.h). */
RT_SIMD_CLONES static float softmax_row(float *s, int n, int T)
{
	float mx = -INFINITY, sum = 0.0f, inv;
	int j;

	for (j = 0; j < n; j++)
		mx = s[j] > mx ? s[j] : mx;
	for (j = 0; j < n; j++)
		s[j] = rt__expf(s[j] - mx);
	for (j = 0; j < n; j++)
		sum += s[j];
	inv = 1.0f / sum;
	for (j = 0; j < n; j++)
		s[j] *= inv;
	for (j = n; j < T; j++)
		s[j] = 0.0f;
	return mx + logf(sum);
}

/* the probabilities of a row again, from its scores and log-normaliser */
RT_SIMD_CLONES static void probs_row(float *p, int n, int T, float lse)
{
	int j;

	for (j = 0; j < n; j++)
		p[j] = rt__expf(p[j] - lse);
	for (j = n; j < T; j++)
		p[j] = 0.0f;
}

/* softmax backward of a row: p becomes p (dp - p . dp) scale */
RT_SIMD_CLONES static void dscores_row(float *p, const float *dp, int n, float scale)
{
	float dot = 0.0f;
	int j;

	for (j = 0; j < n; j++)
		dot += p[j] * dp[j];
	for (j = 0; j < n; j++)
		p[j] = p[j] * (dp[j] - dot) * scale;
}

/* Q, K, V of head h of sequence b */
static const float *head_of(const float *qkv, int b, int h, int T, int C, int hs, int part)
{
	return qkv + (size_t)b * (size_t)T * 3 * (size_t)C + (size_t)part * (size_t)C +
	       (size_t)h * (size_t)hs;
}

void rt_attention_forward(const float *qkv, float *out, float *lse, int B, int T, int C, int NH,
			  float *scratch)
{
	int hs = C / NH, b, h, t;
	float scale = 1.0f / sqrtf((float)hs), *S = scratch;

	for (b = 0; b < B; b++)
		for (h = 0; h < NH; h++) {
			const float *Q = head_of(qkv, b, h, T, C, hs, 0), *K = Q + C, *V = Q + 2 * C;
			float *O = out + (size_t)b * (size_t)T * (size_t)C + (size_t)h * (size_t)hs;
			float *L = lse + ((size_t)b * (size_t)NH + (size_t)h) * (size_t)T;

			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, Q, 3 * C, K,
				    3 * C, 0.0f, S, T);
			for (t = 0; t < T; t++)
				L[t] = softmax_row(S + (size_t)t * (size_t)T, t + 1, T);
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, S, T, V, 3 * C,
				    0.0f, O, C);
		}
}

/* Backward per head: P again from S and the kept log-normaliser, then
 * dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(P dP)) scale,
 * dQ = dS K, dK = dS^T Q; scratch holds P and dP. */
void rt_attention_backward(const float *dout, const float *qkv, const float *lse, float *dqkv,
			   int B, int T, int C, int NH, float *scratch)
{
	int hs = C / NH, b, h, t;
	float scale = 1.0f / sqrtf((float)hs), *P = scratch, *dP = scratch + (size_t)T * (size_t)T;

	for (b = 0; b < B; b++)
		for (h = 0; h < NH; h++) {
			const float *Q = head_of(qkv, b, h, T, C, hs, 0), *K = Q + C, *V = Q + 2 * C;
			const float *dO = dout + (size_t)b * (size_t)T * (size_t)C + (size_t)h * (size_t)hs;
			const float *L = lse + ((size_t)b * (size_t)NH + (size_t)h) * (size_t)T;
			float *dQ = (float *)head_of(dqkv, b, h, T, C, hs, 0), *dK = dQ + C, *dV = dQ + 2 * C;

			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, Q, 3 * C, K,
				    3 * C, 0.0f, P, T);
			for (t = 0; t < T; t++)
				probs_row(P + (size_t)t * (size_t)T, t + 1, T, L[t]);
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, P, T, dO, C, 0.0f,
				    dV, 3 * C);
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dO, C, V, 3 * C,
				    0.0f, dP, T);
			for (t = 0; t < T; t++) /* P becomes dS */
				dscores_row(P + (size_t)t * (size_t)T, dP + (size_t)t * (size_t)T, t + 1, scale);
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, P, T, K, 3 * C,
				    0.0f, dQ, 3 * C);
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, P, T, Q, 3 * C, 0.0f,
				    dK, 3 * C);
		}
}
