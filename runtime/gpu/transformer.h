/*
 * transformer.h - the GPT's kernels on the GPU: the device twins of
 * runtime/kernels/transformer.h (token and position embeddings, LayerNorm,
 * causal multi-head self-attention, forward and backward), each a CUDA
 * kernel, or cuBLAS products and kernels, behind a host wrapper.
 *
 * Same semantics, shapes and layouts as the CPU functions of the same name
 * (rt_embed_*, rt_layernorm_*, rt_attention_*): activations [N][C]
 * row-major with N = B x T positions, a sequence's T positions
 * consecutive; backward passes ADD into parameter gradients and where the
 * CPU's dx adds, as each function says. How close to the CPU:
 *   - embeddings, forward and backward: the CPU's bits. The backward adds
 *     each gradient element's terms in the CPU's order (positions
 *     n = 0..B*T-1), without atomics;
 *   - LayerNorm and attention: the same formulas, element math shared with
 *     the CPU (runtime/kernels/elem.h, rt__expf), but sums inside a row
 *     (mean, variance, softmax normalisers, dot products), over rows (dw,
 *     db) and inside the products (cuBLAS) in another order, so results
 *     agree to about 1e-6 relative, not bitwise. Every sum is in a fixed
 *     order (no floating-point atomics): a result depends on nothing but
 *     the inputs and the shape.
 *
 * Conventions, as runtime/gpu/kernels.h: every pointer is a DEVICE pointer,
 * borrowed for the call (nothing allocated or kept); the work is queued on
 * `stream` and the wrapper returns at once, without waiting for the GPU;
 * an empty shape (B, T or N zero) launches nothing; return 0 or a negative
 * errno-style code (-EINVAL for a bad shape, -ENOMEM, -EIO for another CUDA
 * or cuBLAS error) with one line in err naming the kernel.
 *
 * Sections: embeddings, LayerNorm, attention.
 */
#ifndef DTRAIN_RUNTIME_GPU_TRANSFORMER_H
#define DTRAIN_RUNTIME_GPU_TRANSFORMER_H

#include <stddef.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

struct dt_err; /* base/err.h */

/* --- embeddings --- */

/* out [B*T][C] = wte [tok] + wpe [t]. ids [B*T] are the token ids as the
 * stage's input holds them, in floats; each is converted to int32
 * (truncated, as the CPU model does) into tok [B*T], which backward reads.
 * Ids must be in [0, V) of wte [V][C] (the caller checks: the kernel
 * cannot). */
int rt_gpu_embed_forward(const float *ids, int32_t *tok, const float *wte, const float *wpe,
			 float *out, int B, int T, int C, cudaStream_t stream, struct dt_err *err);
/* dwte [tok] += dout, dwpe [t] += dout, each element's terms added in
 * position order as rt_embed_backward does: the CPU's bits. */
int rt_gpu_embed_backward(const int32_t *tok, const float *dout, float *dwte, float *dwpe,
			  int B, int T, int C, cudaStream_t stream, struct dt_err *err);

/* --- LayerNorm (eps RT_LN_EPS, biased variance, as the CPU) --- */

/* y [N][C] = (x - mean) rstd w + b over each row; mean [N] and rstd [N]
 * (1 / sqrt(var + eps)) kept for backward. y may equal x. C >= 1. */
int rt_gpu_layernorm_forward(const float *x, const float *w, const float *b, float *y,
			     float *mean, float *rstd, int N, int C, cudaStream_t stream,
			     struct dt_err *err);
/* Given dy [N][C] and forward's x, mean and rstd: dx [N][C] += dLoss/dx
 * (ADDED, as the CPU: the residual path wrote it first), dw [C] += and
 * db [C] +=. */
int rt_gpu_layernorm_backward(const float *dy, const float *x, const float *w, const float *mean,
			      const float *rstd, float *dx, float *dw, float *db, int N, int C,
			      cudaStream_t stream, struct dt_err *err);

/* --- causal self-attention --- */

/* Floats of device scratch that rt_gpu_attention_forward and _backward need
 * for B sequences of T positions and NH heads: 2 NH T^2 (one sequence's
 * scores and their gradient, all heads; the sequences take turns, so it
 * does not grow with B). 0 for an empty shape. */
size_t rt_gpu_attention_scratch_floats(int B, int T, int NH);

/* As rt_attention_forward: qkv [B*T][3C] (each position's q, k, v; head h
 * of NH the columns [h hs, (h+1) hs) of each, hs = C / NH), out [B*T][C]
 * the softmax over t2 <= t of q_t . k_t2 / sqrt(hs) applied to the v_t2,
 * lse [B][NH][T] each softmax's max + log(sum). The products are cuBLAS
 * sgemms (strided-batched over the NH heads of a sequence) on `blas`,
 * which the caller has bound to `stream` (cublasSetStream; another stream
 * is refused, -EINVAL) in host pointer mode (cuBLAS's default); its math
 * mode (float32, or TF32 if the caller chose it) is left as it is.
 * scratch: rt_gpu_attention_scratch_floats(B, T, NH) floats. C % NH == 0. */
int rt_gpu_attention_forward(cublasHandle_t blas, const float *qkv, float *out, float *lse, int B,
			     int T, int C, int NH, float *scratch, cudaStream_t stream,
			     struct dt_err *err);
/* As rt_attention_backward: given dout [B*T][C], forward's qkv and lse,
 * dqkv [B*T][3C] = dLoss/dqkv (WRITTEN, not added). Same handle, stream
 * and scratch rules as forward. */
int rt_gpu_attention_backward(cublasHandle_t blas, const float *dout, const float *qkv,
			      const float *lse, float *dqkv, int B, int T, int C, int NH,
			      float *scratch, cudaStream_t stream, struct dt_err *err);

#ifdef __cplusplus
}
#endif

#endif
