/*
 * gpt.h - a GPT-2 style decoder-only transformer, model.type "gpt": the
 * second model behind runtime/model/model.h.
 *
 * The model (Radford et al. 2019; nanoGPT's model.py and llm.c's
 * train_gpt2.c build the same): V = model.vocab_size, T = model.context,
 * L = model.layers, NH = model.heads, C = model.embd.
 *   x = wte[token] + wpe[position]                      (block 0, "embedding")
 *   for each of the L blocks (blocks 1..L):
 *	x = x + c_proj(attention(c_attn(ln_1(x))))    causal, NH heads
 *	x = x + mlp.c_proj(gelu(mlp.c_fc(ln_2(x))))    4C wide, GELU tanh form
 *   logits = ln_f(x) lm_head^T                           (block L+1, "head")
 * Pre-LayerNorm (eps 1e-5), no dropout, biases on every linear layer but
 * the head, whose weight is tied to wte.
 *
 * Between blocks: a sample is a sequence of T positions. Block 0 reads T
 * floats, the token ids (exact as floats below 2^24, model.vocab_size's
 * bound); blocks pass [T][C]; the head gives [T][V] logits, which the
 * loss reads as T rows of V classes, one target token per position.
 *
 * Tensors, under the names of nanoGPT's state_dict and in nn.Linear's
 * [out][in] layout, so that a PyTorch GPT loads an export as it is:
 *   block 0:   transformer.wte.weight [V][C], transformer.wpe.weight [T][C]
 *   block l+1: transformer.h.<l>.ln_1.weight, .ln_1.bias [C],
 *              .attn.c_attn.weight [3C][C], .attn.c_attn.bias [3C] (q, k, v),
 *              .attn.c_proj.weight [C][C], .attn.c_proj.bias [C],
 *              .ln_2.weight, .ln_2.bias [C],
 *              .mlp.c_fc.weight [4C][C], .mlp.c_fc.bias [4C],
 *              .mlp.c_proj.weight [C][4C], .mlp.c_proj.bias [C]
 *   block L+1: transformer.ln_f.weight, .ln_f.bias [C], lm_head.weight [V][C]
 * Weight decay on the 2-D tensors only (GPT-2 and nanoGPT's convention).
 *
 * The tied head: lm_head.weight is a copy of transformer.wte.weight, kept
 * on the stage of the head (the last) as Megatron keeps its embedding group:
 * both start equal (the head's copy is drawn from block 0's stream), and the
 * trainer sums their gradients every step and gives both copies the sum
 * (ops->ties), so they stay bitwise equal.
 *
 * Initialisation (GPT-2, nanoGPT): weights ~ normal(0, 0.02), the residual
 * projections (attn.c_proj, mlp.c_proj) ~ normal(0, 0.02 / sqrt(2 L)),
 * biases 0, LayerNorm weights 1. Block b draws from dt_rng stream
 * (model.init_seed, b), its weights in tensor order, row-major.
 *
 * Cost (what the stage split balances): the multiply-adds of a sample's
 * forward: T C for the embedding, T (12 C^2 + T C) for a block, T V C for the
 * head (GPT-2 small: the head is five blocks' worth).
 */
#ifndef DTRAIN_RUNTIME_GPT_H
#define DTRAIN_RUNTIME_GPT_H

#include "jobs/spec.h"
#include "runtime/model/model.h"

extern const struct rt_model_ops rt_gpt_model;

#endif
