/*
 * llama.h - a Llama-family decoder-only transformer, model.type "llama":
 * Llama 2 and 3 (3.1's rope_scaling included), SmolLM, Mistral without its
 * sliding window, and Qwen2 (model.qkv_bias), behind runtime/model/model.h.
 *
 * The model (Touvron et al. 2023; Hugging Face's modeling_llama.py builds
 * the same): V = model.vocab_size, T = model.context, L = model.layers,
 * NH = model.heads, NKV = model.kv_heads (0: NH), C = model.embd,
 * hs = C / NH, I = model.intermediate_size.
 *   x = embed_tokens[token]                                 (block 0)
 *   for each of the L blocks (blocks 1..L):
 *	h = input_layernorm(x)                               RMSNorm
 *	q, k, v = q_proj h, k_proj h, v_proj h              NH, NKV, NKV heads
 *	q, k = rope(q), rope(k)                              rotate_half, rope_theta
 *	x = x + o_proj attention(q, k, v)                    causal, grouped-query
 *	h = post_attention_layernorm(x)
 *	x = x + down_proj(silu(gate_proj h) * up_proj h)     SwiGLU, I wide
 *   logits = norm(x) lm_head^T                              (block L+1, "head")
 * RMSNorm: x / sqrt(mean(x^2) + model.rms_norm_eps) * w, in float32. No
 * biases but q, k and v's with model.qkv_bias (Qwen2). No dropout.
 *
 * Rotary embeddings, Hugging Face's convention: in each head, element i <
 * hs/2 turns with element i + hs/2 by the angle t f_i, where t is the
 * position and f_i = rope_theta^(-2i / hs). With model.rope_scaling.rope_type
 * "llama3" (Llama 3.1) the frequencies are rescaled first: with
 * wavelength w = 2 pi / f_i, old context O =
 * rope_scaling.original_max_position_embeddings, low and high its
 * low_freq_factor and high_freq_factor, f_i is kept where w < O / high,
 * divided by rope_scaling.factor where w > O / low, and between the two
 * blended: (1 - s) f_i / factor + s f_i, s = (O / w - low) / (high - low).
 * The angles' cosines and sines are computed once per stage, in double.
 *
 * Between blocks, as the GPT: block 0 reads T floats (token ids), blocks
 * pass [T][C], the head gives [T][V] logits, one target token a position.
 *
 * Tensors, under Hugging Face's names and in nn.Linear's [out][in] layout:
 *   block 0:   model.embed_tokens.weight [V][C]
 *   block l+1: model.layers.<l>.input_layernorm.weight [C],
 *              .self_attn.q_proj.weight [NH hs][C], .k_proj.weight [NKV hs][C],
 *              .v_proj.weight [NKV hs][C], .o_proj.weight [C][NH hs],
 *              .post_attention_layernorm.weight [C],
 *              .mlp.gate_proj.weight [I][C], .mlp.up_proj.weight [I][C],
 *              .mlp.down_proj.weight [C][I],
 *              and with model.qkv_bias .self_attn.q_proj.bias [NH hs],
 *              .k_proj.bias [NKV hs], .v_proj.bias [NKV hs]
 *   block L+1: model.norm.weight [C], lm_head.weight [V][C]
 * in that order, so that q, k and v's weights (and biases), and gate and
 * up's, lie one after the other: one product each. Weight decay on the 2-D
 * tensors only.
 *
 * With model.tie_word_embeddings the head's lm_head.weight is a copy of
 * model.embed_tokens.weight, tied as the GPT ties its head (gpt.h): drawn
 * from block 0's stream, given the sum of both gradients every step.
 *
 * Initialisation (Hugging Face's LlamaPreTrainedModel, initializer_range
 * 0.02): every linear and embedding weight ~ normal(0, 0.02), biases 0,
 * RMSNorm weights 1. Block b draws from dt_rng stream (model.init_seed, b),
 * its weights in tensor order, row-major.
 *
 * Cost: a sample's forward multiply-adds: T C for the embedding,
 * T (C (NH + 2 NKV) hs + C NH hs + 3 C I + T C) for a block, T V C for the
 * head.
 *
 * On the CPU, in float32 (train.precision "bf16" and train.device "cuda"
 * are refused by jobs/spec.c for now).
 */
#ifndef DTRAIN_RUNTIME_LLAMA_H
#define DTRAIN_RUNTIME_LLAMA_H

#include "jobs/spec.h"
#include "runtime/model/model.h"

extern const struct rt_model_ops rt_llama_model;

#endif
