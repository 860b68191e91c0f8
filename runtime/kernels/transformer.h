/*
 * transformer.h - the kernels of a decoder-only transformer that the dense
 * kernels (kernels.h) do not cover: token (and position) embeddings,
 * LayerNorm and RMSNorm, causal self-attention with grouped-query heads and
 * rotary position embeddings, and the SwiGLU gate, each forward and
 * backward, in float32 on the CPU. The GPT (runtime/model/gpt.c) and the
 * Llama (runtime/model/llama.c) build their blocks from these, the linear
 * layers (rt_linear_*), GELU (rt_act_*, tanh form) and the fused softmax
 * cross-entropy (rt_softmax_xent, one row per position).
 *
 * Layouts: activations are [N][C] row-major with N = B x T positions, the
 * T positions of a sequence consecutive. Backward passes ACCUMULATE into
 * parameter gradients (micro-batches add up) and into dx where a residual
 * path also writes it, as each function says.
 *
 * Sections: embeddings, LayerNorm, RMSNorm, attention, rotary embeddings,
 * SwiGLU.
 */
#ifndef DTRAIN_RUNTIME_TRANSFORMER_H
#define DTRAIN_RUNTIME_TRANSFORMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* --- embeddings --- */

/* out [B*T][C] = wte [tok] + wpe [t] for tokens tok [B*T] (each in
 * [0, V), checked by the caller), position t of its sequence; wpe NULL:
 * out = wte [tok] (a model with rotary positions). */
void rt_embed_forward(const int32_t *tok, const float *wte, const float *wpe, float *out, int B,
		      int T, int C);
/* dwte [tok] += dout, dwpe [t] += dout (wpe NULL: dwpe NULL, skipped). */
void rt_embed_backward(const int32_t *tok, const float *dout, float *dwte, float *dwpe, int B,
		       int T, int C);

/* --- LayerNorm (Ba et al. 2016; eps 1e-5 as GPT-2) --- */

#define RT_LN_EPS 1e-5f

/* y [N][C] = (x - mean) / sqrt(var + eps) * w + b over each row; keeps
 * mean [N] and rstd [N] (1 / sqrt(var + eps)) for backward. */
void rt_layernorm_forward(const float *x, const float *w, const float *b, float *y, float *mean,
			  float *rstd, int N, int C);
/* Given dy [N][C]: dx [N][C] += dLoss/dx, dw [C] += and db [C] +=. */
void rt_layernorm_backward(const float *dy, const float *x, const float *w, const float *mean,
			   const float *rstd, float *dx, float *dw, float *db, int N, int C);

/* --- RMSNorm (Zhang & Sennrich 2019; Llama's, in float32) --- */

/* y [N][C] = x / sqrt(mean(x^2) + eps) * w over each row; keeps rstd [N]
 * (1 / sqrt(mean(x^2) + eps)) for backward. */
void rt_rmsnorm_forward(const float *x, const float *w, float *y, float *rstd, int N, int C,
			float eps);
/* Given dy [N][C]: dx [N][C] += dLoss/dx, dw [C] +=. */
void rt_rmsnorm_backward(const float *dy, const float *x, const float *w, const float *rstd,
			 float *dx, float *dw, int N, int C);

/* --- causal self-attention --- */

/* The heads of an attention: NH query heads of hs columns each, sharing
 * NKV key and value heads (NKV divides NH; query head h reads key and value
 * head h / (NH / NKV), as Hugging Face's repeat_kv; NKV = NH is multi-head
 * attention, NKV = 1 multi-query). A position's row of qkv holds its
 * queries, then its keys, then its values: [NH*hs | NKV*hs | NKV*hs]. */
struct rt_heads {
	int NH, NKV, hs;
};

/* qkv [B*T][(NH + 2 NKV) hs] as above; out [B*T][NH*hs]: for position t
 * of a sequence and query head h, the softmax over t2 <= t of
 * q_t . k_t2 / sqrt(hs), applied to the v_t2. lse [B][NH][T] keeps each
 * softmax's log of its normaliser (max + log sum) so that backward can
 * recompute the probabilities. scratch [T*T] (the caller's) holds one
 * head's scores at a time: no other T x T array is made, forward or
 * backward. The products go through OpenBLAS's sgemm. */
void rt_attention_heads_forward(const float *qkv, float *out, float *lse, int B, int T,
				struct rt_heads h, float *scratch);
/* Given dout [B*T][NH*hs]: dqkv [B*T][(NH + 2 NKV) hs] = dLoss/dqkv
 * (written, not added; a shared key or value head gets the sum over its
 * query heads, in head order); scratch [2*T*T]. */
void rt_attention_heads_backward(const float *dout, const float *qkv, const float *lse,
				 float *dqkv, int B, int T, struct rt_heads h, float *scratch);
/* The GPT's: NH heads of C / NH columns, qkv [B*T][3C], out [B*T][C]
 * (rt_attention_heads_* with NKV = NH). */
void rt_attention_forward(const float *qkv, float *out, float *lse, int B, int T, int C, int NH,
			  float *scratch);
void rt_attention_backward(const float *dout, const float *qkv, const float *lse, float *dqkv,
			   int B, int T, int C, int NH, float *scratch);

/* --- rotary position embeddings (Su et al. 2021, Hugging Face's halves) --- */

/* Rotates, in place, the queries and keys of qkv [B*T][(NH + 2 NKV) hs]
 * (the layout of rt_heads; hs even): in each head, element i < hs/2 pairs
 * with i + hs/2 (rotate_half), turned by the angle of position t and
 * frequency i, whose cosine and sine are cs [T][hs/2] and sn [T][hs/2]:
 *	x'_i        = x_i cos - x_{i+hs/2} sin
 *	x'_{i+hs/2} = x_{i+hs/2} cos + x_i sin
 * inverse turns by minus the angle: a rotation's backward (the gradient of
 * the rotated queries and keys becomes that of the unrotated ones). The
 * values are left as they are. */
void rt_rope(float *qkv, int B, int T, struct rt_heads h, const float *cs, const float *sn,
	     bool inverse);

/* --- SwiGLU (Shazeer 2020): the gate of Llama's feed-forward --- */

/* gu [N][2F]: each row's gate projection g [F], then its up projection u
 * [F] (F: the feed-forward's width); h [N][F] = silu(g) u,
 * silu(g) = g / (1 + exp(-g)). */
void rt_swiglu_forward(const float *gu, float *h, int N, int F);
/* Given dh [N][F]: dgu [N][2F] = dLoss/dgu (written; dgu may be gu, in
 * place, but may not overlap it otherwise). */
void rt_swiglu_backward(const float *dh, const float *gu, float *dgu, int N, int F);

#endif
