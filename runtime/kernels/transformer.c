/*
 * transformer.c - embeddings, LayerNorm, RMSNorm, causal self-attention
 * with grouped-query heads, rotary embeddings and SwiGLU, forward and
 * backward (transformer.h). Plain loops over rows: sums in float in index
 * order, so that a result depends on nothing but its inputs.
 *
 * Sections: embeddings, LayerNorm, RMSNorm, attention, rotary embeddings,
 * SwiGLU.
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
			const float *e = wte + (size_t)tok[n] * (size_t)C;
			float *o = out + n * (size_t)C;

			if (!wpe) {
				memcpy(o, e, (size_t)C * sizeof(*o));
				continue;
			}
			for (i = 0; i < C; i++)
				o[i] = e[i] + wpe[(size_t)t * (size_t)C + (size_t)i];
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
			float *de = dwte + (size_t)tok[n] * (size_t)C;

			for (i = 0; i < C; i++)
				de[i] += d[i];
			if (dwpe)
				for (i = 0; i < C; i++)
					dwpe[(size_t)t * (size_t)C + (size_t)i] += d[i];
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

/* --- RMSNorm --- */

void rt_rmsnorm_forward(const float *x, const float *w, float *y, float *rstd, int N, int C,
			float eps)
{
	int n, i;

	for (n = 0; n < N; n++) {
		const float *xr = x + (size_t)n * (size_t)C;
		float *yr = y + (size_t)n * (size_t)C, ms = 0.0f, r;

		for (i = 0; i < C; i++)
			ms += xr[i] * xr[i];
		r = 1.0f / sqrtf(ms / (float)C + eps);
		for (i = 0; i < C; i++)
			yr[i] = xr[i] * r * w[i];
		rstd[n] = r;
	}
}

/* y = w x r, r = (mean(x^2) + eps)^-1/2: dx = r (dy w) - x r^3 mean(dy w x),
 * dw = dy x r */
void rt_rmsnorm_backward(const float *dy, const float *x, const float *w, const float *rstd,
			 float *dx, float *dw, int N, int C)
{
	int n, i;

	for (n = 0; n < N; n++) {
		const float *dyr = dy + (size_t)n * (size_t)C, *xr = x + (size_t)n * (size_t)C;
		float *dxr = dx + (size_t)n * (size_t)C, r = rstd[n], dot = 0.0f, k;

		for (i = 0; i < C; i++)
			dot += dyr[i] * w[i] * xr[i];
		k = dot / (float)C * r * r * r;
		for (i = 0; i < C; i++) {
			dw[i] += dyr[i] * xr[i] * r;
			dxr[i] += dyr[i] * w[i] * r - xr[i] * k;
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

/* query head q of sequence b (part 0), or its key (1) or value (2) head */
static const float *head_of(const float *qkv, int b, int q, int T, struct rt_heads h, int part)
{
	size_t ld = (size_t)(h.NH + 2 * h.NKV) * (size_t)h.hs, kv = (size_t)(q / (h.NH / h.NKV));
	size_t col = part == 0 ? (size_t)q * (size_t)h.hs :
				 ((size_t)h.NH + (size_t)(part - 1) * (size_t)h.NKV + kv) * (size_t)h.hs;

	return qkv + (size_t)b * (size_t)T * ld + col;
}

void rt_attention_heads_forward(const float *qkv, float *out, float *lse, int B, int T,
				struct rt_heads h, float *scratch)
{
	int hs = h.hs, ld = (h.NH + 2 * h.NKV) * hs, ldo = h.NH * hs, b, q, t;
	float scale = 1.0f / sqrtf((float)hs), *S = scratch;

	for (b = 0; b < B; b++)
		for (q = 0; q < h.NH; q++) {
			const float *Q = head_of(qkv, b, q, T, h, 0), *K = head_of(qkv, b, q, T, h, 1);
			const float *V = head_of(qkv, b, q, T, h, 2);
			float *O = out + (size_t)b * (size_t)T * (size_t)ldo + (size_t)q * (size_t)hs;
			float *L = lse + ((size_t)b * (size_t)h.NH + (size_t)q) * (size_t)T;

			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, Q, ld, K, ld,
				    0.0f, S, T);
			for (t = 0; t < T; t++)
				L[t] = softmax_row(S + (size_t)t * (size_t)T, t + 1, T);
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, S, T, V, ld,
				    0.0f, O, ldo);
		}
}

/* Backward per query head: P again from S and the kept log-normaliser,
 * then dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(P dP)) scale,
 * dQ = dS K, dK = dS^T Q; scratch holds P and dP. dK and dV of a shared
 * head are written by its first query head and added to by the others. */
void rt_attention_heads_backward(const float *dout, const float *qkv, const float *lse,
				 float *dqkv, int B, int T, struct rt_heads h, float *scratch)
{
	int hs = h.hs, ld = (h.NH + 2 * h.NKV) * hs, ldo = h.NH * hs, b, q, t;
	float scale = 1.0f / sqrtf((float)hs), *P = scratch, *dP = scratch + (size_t)T * (size_t)T;

	for (b = 0; b < B; b++)
		for (q = 0; q < h.NH; q++) {
			const float *Q = head_of(qkv, b, q, T, h, 0), *K = head_of(qkv, b, q, T, h, 1);
			const float *V = head_of(qkv, b, q, T, h, 2);
			const float *dO = dout + (size_t)b * (size_t)T * (size_t)ldo + (size_t)q * (size_t)hs;
			const float *L = lse + ((size_t)b * (size_t)h.NH + (size_t)q) * (size_t)T;
			float *dQ = (float *)head_of(dqkv, b, q, T, h, 0);
			float *dK = (float *)head_of(dqkv, b, q, T, h, 1);
			float *dV = (float *)head_of(dqkv, b, q, T, h, 2);
			float beta = q % (h.NH / h.NKV) ? 1.0f : 0.0f;

			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, Q, ld, K, ld,
				    0.0f, P, T);
			for (t = 0; t < T; t++)
				probs_row(P + (size_t)t * (size_t)T, t + 1, T, L[t]);
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, P, T, dO, ldo,
				    beta, dV, ld);
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dO, ldo, V, ld,
				    0.0f, dP, T);
			for (t = 0; t < T; t++) /* P becomes dS */
				dscores_row(P + (size_t)t * (size_t)T, dP + (size_t)t * (size_t)T, t + 1, scale);
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, P, T, K, ld,
				    0.0f, dQ, ld);
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, P, T, Q, ld, beta,
				    dK, ld);
		}
}

void rt_attention_forward(const float *qkv, float *out, float *lse, int B, int T, int C, int NH,
			  float *scratch)
{
	struct rt_heads h = { NH, NH, C / NH };

	rt_attention_heads_forward(qkv, out, lse, B, T, h, scratch);
}

void rt_attention_backward(const float *dout, const float *qkv, const float *lse, float *dqkv,
			   int B, int T, int C, int NH, float *scratch)
{
	struct rt_heads h = { NH, NH, C / NH };

	rt_attention_heads_backward(dout, qkv, lse, dqkv, B, T, h, scratch);
}

/* --- rotary position embeddings --- */

/* one head's hs values x at an angle's cos c [hs/2] and sin s [hs/2] */
static void rotate(float *x, int half, const float *c, const float *s, float sign)
{
	int i;

	for (i = 0; i < half; i++) {
		float a = x[i], b = x[i + half], sn = sign * s[i];

		x[i] = a * c[i] - b * sn;
		x[i + half] = b * c[i] + a * sn;
	}
}

void rt_rope(float *qkv, int B, int T, struct rt_heads h, const float *cs, const float *sn,
	     bool inverse)
{
	int half = h.hs / 2, heads = h.NH + h.NKV, b, t, k;
	size_t ld = (size_t)(h.NH + 2 * h.NKV) * (size_t)h.hs;
	float sign = inverse ? -1.0f : 1.0f;

	for (b = 0; b < B; b++)
		for (t = 0; t < T; t++) {
			float *row = qkv + ((size_t)b * (size_t)T + (size_t)t) * ld;
			const float *c = cs + (size_t)t * (size_t)half, *s = sn + (size_t)t * (size_t)half;

			for (k = 0; k < heads; k++) /* the queries' heads, then the keys' */
				rotate(row + (size_t)k * (size_t)h.hs, half, c, s, sign);
		}
}

/* --- SwiGLU (the element math: elem.h) --- */

void rt_swiglu_forward(const float *gu, float *h, int N, int F)
{
	int n, i;

	for (n = 0; n < N; n++) {
		const float *g = gu + (size_t)n * 2 * (size_t)F, *u = g + F;
		float *hr = h + (size_t)n * (size_t)F;

		for (i = 0; i < F; i++)
			hr[i] = rt_swiglu(g[i], u[i]);
	}
}

void rt_swiglu_backward(const float *dh, const float *gu, float *dgu, int N, int F)
{
	int n, i;

	for (n = 0; n < N; n++) {
		const float *g = gu + (size_t)n * 2 * (size_t)F, *u = g + F;
		const float *d = dh + (size_t)n * (size_t)F;
		float *dg = dgu + (size_t)n * 2 * (size_t)F, *du = dg + F;

		for (i = 0; i < F; i++)
			rt_swiglu_back(g[i], u[i], d[i], &dg[i], &du[i]);
	}
}
