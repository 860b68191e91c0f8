/*
 * transformer.c - embeddings, LayerNorm and causal self-attention, forward
 * and backward (transformer.h). Plain loops over rows: sums in float in
 * index order, so that a result depends on nothing but its inputs.
 *
 * Sections: embeddings, LayerNorm, attention.
 */
#include "runtime/transformer.h"

#include <math.h>
#include <string.h>

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

/* --- LayerNorm --- */

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
			yr[i] = (xr[i] - m) * s * w[i] + b[i];
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
			float norm = (xr[i] - m) * s, dn = dyr[i] * w[i];

			mean_d += dn;
			mean_dn += dn * norm;
		}
		mean_d /= (float)C;
		mean_dn /= (float)C;
		for (i = 0; i < C; i++) {
			float norm = (xr[i] - m) * s, dn = dyr[i] * w[i];

			db[i] += dyr[i];
			dw[i] += norm * dyr[i];
			dxr[i] += s * (dn - mean_d - norm * mean_dn);
		}
	}
}

/* --- attention --- */

/* The scores of row t of head h (query at position t) against keys 0..t,
 * scaled, into s [t + 1]; returns their maximum. */
static float scores(const float *qkv, int T, int C, int h, int hs, int t, float scale, float *s,
		    size_t seq)
{
	const float *q = qkv + (seq + (size_t)t) * 3 * (size_t)C + (size_t)h * (size_t)hs;
	float mx = -INFINITY;
	int t2, i;

	(void)T;
	for (t2 = 0; t2 <= t; t2++) {
		const float *k = qkv + (seq + (size_t)t2) * 3 * (size_t)C + (size_t)C +
				 (size_t)h * (size_t)hs;
		float d = 0.0f;

		for (i = 0; i < hs; i++)
			d += q[i] * k[i];
		s[t2] = d * scale;
		if (s[t2] > mx)
			mx = s[t2];
	}
	return mx;
}

void rt_attention_forward(const float *qkv, float *out, float *lse, int B, int T, int C, int NH)
{
	int hs = C / NH, b, h, t, t2, i;
	float scale = 1.0f / sqrtf((float)hs), s[T > 0 ? T : 1];

	for (b = 0; b < B; b++)
		for (h = 0; h < NH; h++)
			for (t = 0; t < T; t++) {
				size_t seq = (size_t)b * (size_t)T;
				float mx = scores(qkv, T, C, h, hs, t, scale, s, seq), sum = 0.0f;
				float *o = out + (seq + (size_t)t) * (size_t)C + (size_t)h * (size_t)hs;

				for (t2 = 0; t2 <= t; t2++) {
					s[t2] = expf(s[t2] - mx);
					sum += s[t2];
				}
				memset(o, 0, (size_t)hs * sizeof(*o));
				for (t2 = 0; t2 <= t; t2++) {
					const float *v = qkv + (seq + (size_t)t2) * 3 * (size_t)C +
							 2 * (size_t)C + (size_t)h * (size_t)hs;
					float p = s[t2] / sum;

					for (i = 0; i < hs; i++)
						o[i] += p * v[i];
				}
				lse[((size_t)b * (size_t)NH + (size_t)h) * (size_t)T + (size_t)t] =
					mx + logf(sum);
			}
}

void rt_attention_backward(const float *dout, const float *qkv, const float *lse, float *dqkv,
			   int B, int T, int C, int NH)
{
	int hs = C / NH, b, h, t, t2, i;
	float scale = 1.0f / sqrtf((float)hs), p[T > 0 ? T : 1], dp[T > 0 ? T : 1];

	memset(dqkv, 0, (size_t)B * (size_t)T * 3 * (size_t)C * sizeof(*dqkv));
	for (b = 0; b < B; b++)
		for (h = 0; h < NH; h++)
			for (t = 0; t < T; t++) {
				size_t seq = (size_t)b * (size_t)T, row = seq + (size_t)t;
				const float *d = dout + row * (size_t)C + (size_t)h * (size_t)hs;
				const float *q = qkv + row * 3 * (size_t)C + (size_t)h * (size_t)hs;
				float *dq = dqkv + row * 3 * (size_t)C + (size_t)h * (size_t)hs;
				float l = lse[((size_t)b * (size_t)NH + (size_t)h) * (size_t)T + (size_t)t];
				float dot = 0.0f;

				/* the probabilities again, from the kept normaliser */
				scores(qkv, T, C, h, hs, t, scale, p, seq);
				for (t2 = 0; t2 <= t; t2++) {
					const float *v = qkv + (seq + (size_t)t2) * 3 * (size_t)C +
							 2 * (size_t)C + (size_t)h * (size_t)hs;
					float *dv = dqkv + (seq + (size_t)t2) * 3 * (size_t)C + 2 * (size_t)C +
						    (size_t)h * (size_t)hs;

					p[t2] = expf(p[t2] - l);
					dp[t2] = 0.0f;
					for (i = 0; i < hs; i++) {
						dp[t2] += d[i] * v[i];
						dv[i] += p[t2] * d[i];
					}
					dot += p[t2] * dp[t2];
				}
				/* softmax backward, then the scaled dot products */
				for (t2 = 0; t2 <= t; t2++) {
					const float *k = qkv + (seq + (size_t)t2) * 3 * (size_t)C + (size_t)C +
							 (size_t)h * (size_t)hs;
					float *dk = dqkv + (seq + (size_t)t2) * 3 * (size_t)C + (size_t)C +
						    (size_t)h * (size_t)hs;
					float ds = p[t2] * (dp[t2] - dot) * scale;

					for (i = 0; i < hs; i++) {
						dq[i] += ds * k[i];
						dk[i] += ds * q[i];
					}
				}
			}
}
