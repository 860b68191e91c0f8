/*
 * transformer.h - the kernels of a GPT-2 style transformer that the dense
 * kernels (kernels.h) do not cover: token and position embeddings, LayerNorm,
 * and causal multi-head self-attention, each forward and backward, in float32
 * on the CPU. The GPT model (runtime/model/gpt.c) builds its blocks from these, the
 * linear layers (rt_linear_*), GELU (rt_act_*, tanh form) and the fused
 * softmax cross-entropy (rt_softmax_xent, one row per position).
 *
 * Layouts: activations are [N][C] row-major with N = B x T positions, the
 * T positions of a sequence consecutive. Backward passes ACCUMULATE into
 * parameter gradients (micro-batches add up) and into dx where a residual
 * path also writes it, as each function says.
 *
 * Sections: embeddings, LayerNorm, attention.
 */
#ifndef DTRAIN_RUNTIME_TRANSFORMER_H
#define DTRAIN_RUNTIME_TRANSFORMER_H

#include <stddef.h>
#include <stdint.h>

/* --- embeddings --- */

/* out [B*T][C] = wte [tok] + wpe [t] for tokens tok [B*T] (each in
 * [0, V), checked by the caller), position t of its sequence. */
void rt_embed_forward(const int32_t *tok, const float *wte, const float *wpe, float *out, int B,
		      int T, int C);
/* dwte [tok] += dout, dwpe [t] += dout. */
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

/* --- causal self-attention --- */

/* qkv [B*T][3C]: each position's query, key and value, each C wide, head h
 * of NH taking columns [h*hs, (h+1)*hs) of each (hs = C / NH). out [B*T][C]:
 * for position t of a sequence and head h, the softmax over t2 <= t of
 * q_t . k_t2 / sqrt(hs), applied to the v_t2. lse [B][NH][T] keeps each
 * softmax's log of its normaliser (max + log sum) so that backward can
 * recompute the probabilities. scratch [T*T] (the caller's) holds one
 * head's scores at a time: no other T x T array is made, forward or
 * backward. The products go through OpenBLAS's sgemm. */
void rt_attention_forward(const float *qkv, float *out, float *lse, int B, int T, int C, int NH,
			  float *scratch);
/* Given dout [B*T][C]: dqkv [B*T][3C] = dLoss/dqkv (written, not added);
 * scratch [2*T*T]. */
void rt_attention_backward(const float *dout, const float *qkv, const float *lse, float *dqkv,
			   int B, int T, int C, int NH, float *scratch);

#endif
