/*
 * transformer.cu - the GPT's kernels on the GPU (transformer.h): embeddings,
 * LayerNorm and causal self-attention, forward and backward, the device
 * twins of runtime/kernels/transformer.c.
 *
 * Parallel layouts, and why each sum is deterministic:
 *   - embedding forward: one thread per output element;
 *   - embedding backward: dwpe [t][i] by one thread walking b; dwte by
 *     warps that each own 32 channels and the tokens of one residue class
 *     (tok % BUCKETS): a warp reads 32 positions at a time, and its lanes
 *     add the matching positions' rows in position order (ballot, then the
 *     set bits lowest first). Each element of dwte has one thread adding
 *     its terms in the CPU's order: the CPU's bits, without atomics;
 *   - LayerNorm forward and dx: one warp per row, each lane summing its
 *     columns (lane, lane + 32, ...) in order, then a butterfly of
 *     shuffles of fixed shape (every lane ends with the same bits: a + b
 *     is b + a in floating point);
 *   - LayerNorm dw, db: a block per 32 columns, its 32 x SLICES threads
 *     each summing rows slice, slice + SLICES, ... of one column in order,
 *     then one thread per column adding the SLICES partial sums in slice
 *     order and the total onto dw, db;
 *   - attention: per sequence, the NH heads' products as one strided-batched
 *     sgemm each (the heads of a sequence are hs apart in qkv; the
 *     sequences T 3C apart, which one stride cannot also express), the
 *     scores of all heads in scratch [NH][T][T], and the row-wise softmax
 *     steps one warp per row as LayerNorm.
 *
 * Arithmetic is -fmad=false (cmake/dtrain_cuda.cmake): nothing is fused
 * into a multiply-add, as on the CPU, and the element math is elem.h's.
 *
 * cuBLAS is column-major, our matrices row-major: a row-major [r][c]
 * matrix with row stride ld is the column-major c x r matrix of its
 * transpose, so each product is written for the transposes (transformer.c
 * gives the row-major ones; brackets: the column-major shapes cuBLAS sees):
 *	S = Q K^T     ->  S^T [T x T]   = op_T(K [hs x T]) Q [hs x T]
 *	O = P V       ->  O^T [hs x T]  = V [hs x T] P^T [T x T]
 *	dV = P^T dO   ->  dV^T [hs x T] = dO [hs x T] op_T(P^T [T x T])
 *	dP = dO V^T   ->  as S, with V for K and dO for Q
 *	dQ = dS K     ->  as O;   dK = dS^T Q  ->  as dV
 *
 * Sections: launch helpers, embeddings, LayerNorm, attention.
 */
#include "runtime/gpu/transformer.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "runtime/gpu/kernels.h" /* rt_gpu__failv; base/err.h with C linkage */
#include "runtime/kernels/elem.h"
extern "C" {
#include "runtime/kernels/transformer.h" /* RT_LN_EPS */
}

/* --- launch helpers --- */

#define THREADS 256           /* threads per block of the 1-D kernels */
#define WARPS (THREADS / 32)  /* warps per block: rows per block of the warp-per-row kernels */
#define MAX_BLOCKS (1u << 20) /* grids loop over the rest (CUDA allows 2^31 - 1) */
#define FULL 0xffffffffu      /* every lane of a warp */
#define BUCKETS 64            /* embedding backward: residue classes of tokens, a warp each */
#define SLICES 32             /* LayerNorm dw, db: row slices of a block (32 x 32 threads) */

/* After a launch: the launch's own error (bad configuration, no device, an
 * earlier sticky error), with the kernel named by fmt. */
static int launched(struct dt_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int launched(struct dt_err *err, const char *fmt, ...)
{
	cudaError_t e = cudaGetLastError(); /* also clears a non-sticky error */
	char why[256];
	va_list ap;
	int rc;

	if (e == cudaSuccess)
		return 0;
	snprintf(why, sizeof(why), "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
	va_start(ap, fmt);
	rc = rt_gpu__failv(err, e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO, why, fmt, ap);
	va_end(ap);
	return rc;
}

/* A cuBLAS status to 0, -ENOMEM or -EIO, with "gpu: WHAT: cuBLAS's message". */
static int blas_check(cublasStatus_t s, struct dt_err *err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int blas_check(cublasStatus_t s, struct dt_err *err, const char *fmt, ...)
{
	va_list ap;
	int rc;

	if (s == CUBLAS_STATUS_SUCCESS)
		return 0;
	va_start(ap, fmt);
	rc = rt_gpu__failv(err, s == CUBLAS_STATUS_ALLOC_FAILED ? -ENOMEM : -EIO,
			   cublasGetStatusString(s), fmt, ap);
	va_end(ap);
	return rc;
}

/* Blocks of `per` items each for n items (n > 0), at most MAX_BLOCKS. */
static unsigned int blocks_for(size_t n, size_t per)
{
	size_t b = (n + per - 1) / per;

	return (unsigned int)(b < MAX_BLOCKS ? b : MAX_BLOCKS);
}

/* The sum of v over the warp, in every lane, by a butterfly of fixed
 * shape; every lane of the warp must call it. */
__device__ float warp_sum(float v)
{
	int k;

	for (k = 16; k > 0; k /= 2)
		v = __fadd_rn(v, __shfl_xor_sync(FULL, v, k));
	return v;
}

/* This warp's index in the grid (the warp-per-row kernels' first row), and
 * the grid's count of warps (their step to the next row). */
__device__ long long warp_index(void)
{
	return (long long)blockIdx.x * WARPS + threadIdx.x / 32;
}

__device__ long long warp_count(void)
{
	return (long long)gridDim.x * WARPS;
}

/* --- embeddings --- */

__global__ void __launch_bounds__(THREADS)
k_embed_forward(const float *ids, int32_t *tok, const float *wte, const float *wpe, float *out,
		size_t N, size_t T, size_t C)
{
	size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (; e < N * C; e += stride) {
		size_t n = e / C, i = e % C, t = n % T;
		int32_t v = (int32_t)ids[n]; /* truncated, as the CPU model converts */

		if (i == 0)
			tok[n] = v;
		out[e] = __fadd_rn(wte[(size_t)v * C + i], wpe[t * C + i]);
	}
}

/* dwpe [t][i]: one thread per element, b in order (n = b T + t ascending). */
__global__ void __launch_bounds__(THREADS)
k_embed_backward_wpe(const float *dout, float *dwpe, int B, size_t T, size_t C)
{
	size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	size_t stride = (size_t)gridDim.x * blockDim.x;
	int b;

	for (; e < T * C; e += stride) {
		size_t t = e / C, i = e % C;
		float s = dwpe[e];

		for (b = 0; b < B; b++)
			s = __fadd_rn(s, dout[((size_t)b * T + t) * C + i]);
		dwpe[e] = s;
	}
}

/* dwte: warp w owns the 32 channels of group w % groups and the tokens v
 * with v % BUCKETS == w / groups. It reads the tokens 32 at a time; the
 * positions that are its own are added in order, every lane its channel.
 * Each element of dwte is thus one lane's, and gets its terms in position
 * order, as the CPU's loop adds them. Warp-uniform control flow: ballot
 * and shuffle see the full warp. */
__global__ void __launch_bounds__(THREADS)
k_embed_backward_wte(const int32_t *tok, const float *dout, float *dwte, int N, int C,
		long long groups)
{
	long long w = warp_index(), n0;
	int lane = (int)(threadIdx.x % 32);
	long long bucket = w / groups;
	long long i = (w % groups) * 32 + lane;

	if (bucket >= BUCKETS)
		return; /* the whole warp */
	for (n0 = 0; n0 < N; n0 += 32) {
		int v = n0 + lane < N ? tok[n0 + lane] : -1; /* each lane one position */
		unsigned int mine = __ballot_sync(FULL, v >= 0 && v % BUCKETS == bucket);

		while (mine) {
			int l = __ffs((int)mine) - 1;
			int vl = __shfl_sync(FULL, v, l);

			mine &= mine - 1;
			if (i < C) {
				float *d = dwte + (size_t)vl * (size_t)C + (size_t)i;

				*d = __fadd_rn(*d, dout[(size_t)(n0 + l) * (size_t)C + (size_t)i]);
			}
		}
	}
}

/* Shapes of the embedding: -EINVAL, 0, or 1 when empty (nothing to do). */
static int embed_shape(int B, int T, int C, const char *fn, struct dt_err *err)
{
	if (B < 0 || T < 0 || C < 0)
		return dt_err_add(err, "gpu: %s: negative shape B %d, T %d, C %d", fn, B, T, C);
	return (long long)B * T * C == 0;
}

extern "C" int rt_gpu_embed_forward(const float *ids, int32_t *tok, const float *wte,
				    const float *wpe, float *out, int B, int T, int C,
				    cudaStream_t stream, struct dt_err *err)
{
	size_t N = (size_t)B * (size_t)T;
	int rc;

	if ((rc = embed_shape(B, T, C, "embed_forward", err)))
		return rc < 0 ? rc : 0;
	k_embed_forward<<<blocks_for(N * (size_t)C, THREADS), THREADS, 0, stream>>>(
		ids, tok, wte, wpe, out, N, (size_t)T, (size_t)C);
	return launched(err, "kernel embed_forward (B %d, T %d, C %d)", B, T, C);
}

extern "C" int rt_gpu_embed_backward(const int32_t *tok, const float *dout, float *dwte,
				     float *dwpe, int B, int T, int C, cudaStream_t stream,
				     struct dt_err *err)
{
	long long groups = ((long long)C + 31) / 32;
	int rc;

	if ((rc = embed_shape(B, T, C, "embed_backward", err)))
		return rc < 0 ? rc : 0;
	if ((long long)B * T > 0x7fffffff)
		return dt_err_add(err, "gpu: embed_backward: B %d x T %d positions are over 2^31 - 1",
				  B, T);
	k_embed_backward_wpe<<<blocks_for((size_t)T * (size_t)C, THREADS), THREADS, 0, stream>>>(
		dout, dwpe, B, (size_t)T, (size_t)C);
	if ((rc = launched(err, "kernel embed_backward_wpe (B %d, T %d, C %d)", B, T, C)))
		return rc;
	/* every warp is needed (one per group and bucket): no cap on the grid */
	k_embed_backward_wte<<<(unsigned int)((groups * BUCKETS + WARPS - 1) / WARPS), THREADS, 0,
			       stream>>>(tok, dout, dwte, B * T, C, groups);
	return launched(err, "kernel embed_backward_wte (B %d, T %d, C %d)", B, T, C);
}

/* --- LayerNorm --- */

/* One warp per row: mean, biased variance, rstd = 1 / sqrt(var + eps), then
 * each element by elem.h's formula. y may be x: a lane writes only the
 * elements it has read, after the sums. */
__global__ void __launch_bounds__(THREADS)
k_ln_forward(const float *x, const float *w, const float *b, float *y, float *mean, float *rstd,
		long long N, int C)
{
	int lane = (int)(threadIdx.x % 32), i;
	long long r;

	for (r = warp_index(); r < N; r += warp_count()) {
		const float *xr = x + (size_t)r * (size_t)C;
		float *yr = y + (size_t)r * (size_t)C, m = 0.0f, v = 0.0f, s;

		for (i = lane; i < C; i += 32)
			m = __fadd_rn(m, xr[i]);
		m = __fdiv_rn(warp_sum(m), (float)C);
		for (i = lane; i < C; i += 32) {
			float d = __fsub_rn(xr[i], m);

			v = __fadd_rn(v, __fmul_rn(d, d));
		}
		v = __fdiv_rn(warp_sum(v), (float)C);
		s = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(v, RT_LN_EPS)));
		for (i = lane; i < C; i += 32)
			yr[i] = rt_ln_out(rt_ln_norm(xr[i], m, s), w[i], b[i]);
		if (lane == 0) {
			mean[r] = m;
			rstd[r] = s;
		}
	}
}

/* dx += over each row, one warp per row (the row's means of dn = dy w and
 * of dn norm first). */
__global__ void __launch_bounds__(THREADS)
k_ln_backward_dx(const float *dy, const float *x, const float *w, const float *mean,
		const float *rstd, float *dx, long long N, int C)
{
	int lane = (int)(threadIdx.x % 32), i;
	long long r;

	for (r = warp_index(); r < N; r += warp_count()) {
		size_t at = (size_t)r * (size_t)C;
		float m = mean[r], s = rstd[r], md = 0.0f, mdn = 0.0f;

		for (i = lane; i < C; i += 32) {
			float norm = rt_ln_norm(x[at + i], m, s), dn = __fmul_rn(dy[at + i], w[i]);

			md = __fadd_rn(md, dn);
			mdn = __fadd_rn(mdn, __fmul_rn(dn, norm));
		}
		md = __fdiv_rn(warp_sum(md), (float)C);
		mdn = __fdiv_rn(warp_sum(mdn), (float)C);
		for (i = lane; i < C; i += 32) {
			float norm = rt_ln_norm(x[at + i], m, s), dn = __fmul_rn(dy[at + i], w[i]);

			dx[at + i] = __fadd_rn(dx[at + i], rt_ln_dx(dn, norm, s, md, mdn));
		}
	}
}

/* dw, db += column sums over the rows: block (32, SLICES) per 32 columns;
 * thread (c, k) sums rows k, k + SLICES, ... of its column in order, then
 * thread (c, 0) adds the SLICES partial sums in slice order. */
__global__ void __launch_bounds__(32 * SLICES)
k_ln_backward_dwdb(const float *dy, const float *x, const float *mean, const float *rstd,
		float *dw, float *db, long long N, int C)
{
	__shared__ float part_w[SLICES][32], part_b[SLICES][32];
	int c = (int)threadIdx.x, k = (int)threadIdx.y;
	long long i = (long long)blockIdx.x * 32 + c, r;
	float sw = 0.0f, sb = 0.0f;

	if (i < C)
		for (r = k; r < N; r += SLICES) {
			size_t at = (size_t)r * (size_t)C + (size_t)i;
			float g = dy[at];

			sb = __fadd_rn(sb, g);
			sw = __fadd_rn(sw, __fmul_rn(rt_ln_norm(x[at], mean[r], rstd[r]), g));
		}
	part_w[k][c] = sw;
	part_b[k][c] = sb;
	__syncthreads();
	if (k == 0 && i < C) {
		float tw = 0.0f, tb = 0.0f;
		int sl;

		for (sl = 0; sl < SLICES; sl++) {
			tw = __fadd_rn(tw, part_w[sl][c]);
			tb = __fadd_rn(tb, part_b[sl][c]);
		}
		dw[i] = __fadd_rn(dw[i], tw);
		db[i] = __fadd_rn(db[i], tb);
	}
}

/* Shapes of a LayerNorm: -EINVAL, 0, or 1 when there are no rows. */
static int ln_shape(int N, int C, const char *fn, struct dt_err *err)
{
	if (N < 0 || C < 1)
		return dt_err_add(err, "gpu: %s: bad shape [%d][%d] (rows >= 0, columns >= 1)", fn, N,
				  C);
	return N == 0;
}

extern "C" int rt_gpu_layernorm_forward(const float *x, const float *w, const float *b, float *y,
					float *mean, float *rstd, int N, int C,
					cudaStream_t stream, struct dt_err *err)
{
	int rc;

	if ((rc = ln_shape(N, C, "layernorm_forward", err)))
		return rc < 0 ? rc : 0;
	k_ln_forward<<<blocks_for((size_t)N, WARPS), THREADS, 0, stream>>>(x, w, b, y, mean, rstd,
									  N, C);
	return launched(err, "kernel layernorm_forward ([%d][%d])", N, C);
}

extern "C" int rt_gpu_layernorm_backward(const float *dy, const float *x, const float *w,
					 const float *mean, const float *rstd, float *dx,
					 float *dw, float *db, int N, int C, cudaStream_t stream,
					 struct dt_err *err)
{
	int rc;

	if ((rc = ln_shape(N, C, "layernorm_backward", err)))
		return rc < 0 ? rc : 0;
	k_ln_backward_dx<<<blocks_for((size_t)N, WARPS), THREADS, 0, stream>>>(dy, x, w, mean, rstd,
									      dx, N, C);
	if ((rc = launched(err, "kernel layernorm_backward_dx ([%d][%d])", N, C)))
		return rc;
	/* one block per 32 columns, all needed: (2^31 - 1 + 31) / 32 blocks at most */
	k_ln_backward_dwdb<<<(unsigned int)(((long long)C + 31) / 32), dim3(32, SLICES), 0,
			     stream>>>(dy, x, mean, rstd, dw, db, N, C);
	return launched(err, "kernel layernorm_backward_dwdb ([%d][%d])", N, C);
}

/* --- attention --- */

/* The warp-per-row kernels below hold a row in registers when T <= 32
 * ROW_MAX (each lane its columns lane, lane + 32, ...): one read and one
 * write of a row instead of a pass per step, in the same order as the
 * row's loop (the same bits). Longer rows take the loop over memory. */
#define ROW_MAX 32 /* a power of 2 */

/* Softmax of causal rows in place, one warp per row r = h T + t of
 * S [NH][T][T] (rows = NH T): its first t + 1 scores become
 * probabilities, the rest 0; lse [r] = max + log(sum), as softmax_row in
 * transformer.c. K columns a lane in registers (K = 0: from memory). */
template <int K>
__global__ void __launch_bounds__(THREADS)
k_softmax(float *S, float *lse, long long rows, int T)
{
	int lane = (int)(threadIdx.x % 32), j, k;
	long long r;

	for (r = warp_index(); r < rows; r += warp_count()) {
		float *s = S + (size_t)r * (size_t)T, mx = -INFINITY, sum = 0.0f, inv;
		float v[K > 0 ? K : 1];
		int n = (int)(r % T) + 1;

		if (K > 0) {
#pragma unroll
			for (k = 0; k < K; k++) {
				j = lane + 32 * k;
				v[k] = j < n ? s[j] : -INFINITY;
				mx = v[k] > mx ? v[k] : mx;
			}
		} else {
			for (j = lane; j < n; j += 32)
				mx = s[j] > mx ? s[j] : mx;
		}
		for (k = 16; k > 0; k /= 2) {
			float o = __shfl_xor_sync(FULL, mx, k);

			mx = o > mx ? o : mx;
		}
		if (K > 0) {
#pragma unroll
			for (k = 0; k < K; k++)
				if (lane + 32 * k < n) {
					v[k] = rt__expf(__fsub_rn(v[k], mx));
					sum = __fadd_rn(sum, v[k]);
				}
		} else {
			for (j = lane; j < n; j += 32) {
				s[j] = rt__expf(__fsub_rn(s[j], mx));
				sum = __fadd_rn(sum, s[j]);
			}
		}
		sum = warp_sum(sum);
		inv = __fdiv_rn(1.0f, sum);
		if (K > 0) {
#pragma unroll
			for (k = 0; k < K; k++) {
				j = lane + 32 * k;
				if (j < T)
					s[j] = j < n ? __fmul_rn(v[k], inv) : 0.0f;
			}
		} else {
			for (j = lane; j < T; j += 32)
				s[j] = j < n ? __fmul_rn(s[j], inv) : 0.0f;
		}
		if (lane == 0)
			lse[r] = __fadd_rn(mx, logf(sum));
	}
}

/* The probabilities again from the scores S [NH][T][T] and lse [NH][T], as
 * probs_row in transformer.c: one warp per row (no division per element). */
__global__ void __launch_bounds__(THREADS)
k_probs(float *S, const float *lse, long long rows, int T)
{
	int lane = (int)(threadIdx.x % 32), j;
	long long r;

	for (r = warp_index(); r < rows; r += warp_count()) {
		float *s = S + (size_t)r * (size_t)T, l = lse[r];
		int t = (int)(r % T);

		for (j = lane; j < T; j += 32)
			s[j] = j <= t ? rt__expf(__fsub_rn(s[j], l)) : 0.0f;
	}
}

/* Softmax backward of causal rows, one warp per row, as dscores_row in
 * transformer.c: p = p (dp - p . dp) scale over the row's first t + 1
 * (the rest of P is 0 and stays so). K as k_softmax. */
template <int K>
__global__ void __launch_bounds__(THREADS)
k_dscores(float *P, const float *dP, long long rows, int T, float scale)
{
	int lane = (int)(threadIdx.x % 32), j, k;
	long long r;

	for (r = warp_index(); r < rows; r += warp_count()) {
		float *p = P + (size_t)r * (size_t)T, dot = 0.0f;
		const float *dp = dP + (size_t)r * (size_t)T;
		float pv[K > 0 ? K : 1], dv[K > 0 ? K : 1];
		int n = (int)(r % T) + 1;

		if (K > 0) {
#pragma unroll
			for (k = 0; k < K; k++) {
				j = lane + 32 * k;
				pv[k] = j < n ? p[j] : 0.0f;
				dv[k] = j < n ? dp[j] : 0.0f;
			}
#pragma unroll
			for (k = 0; k < K; k++)
				if (lane + 32 * k < n)
					dot = __fadd_rn(dot, __fmul_rn(pv[k], dv[k]));
		} else {
			for (j = lane; j < n; j += 32)
				dot = __fadd_rn(dot, __fmul_rn(p[j], dp[j]));
		}
		dot = warp_sum(dot);
		if (K > 0) {
#pragma unroll
			for (k = 0; k < K; k++) {
				j = lane + 32 * k;
				if (j < n)
					p[j] = __fmul_rn(__fmul_rn(pv[k], __fsub_rn(dv[k], dot)), scale);
			}
		} else {
			for (j = lane; j < n; j += 32)
				p[j] = __fmul_rn(__fmul_rn(p[j], __fsub_rn(dp[j], dot)), scale);
		}
	}
}

/* The lanes' registers for a row of T: 4, 8, 16 or ROW_MAX columns each,
 * else 0 (the loop over memory). */
static int row_regs(int T)
{
	int k;

	for (k = 4; k <= ROW_MAX; k *= 2)
		if (T <= 32 * k)
			return k;
	return 0;
}

/* k_softmax over rows of T, with the registers row_regs gives */
static void softmax_rows(float *S, float *lse, long long rows, int T, cudaStream_t stream)
{
	unsigned int g = blocks_for((size_t)rows, WARPS);

	switch (row_regs(T)) {
	case 4: k_softmax<4><<<g, THREADS, 0, stream>>>(S, lse, rows, T); break;
	case 8: k_softmax<8><<<g, THREADS, 0, stream>>>(S, lse, rows, T); break;
	case 16: k_softmax<16><<<g, THREADS, 0, stream>>>(S, lse, rows, T); break;
	case 32: k_softmax<32><<<g, THREADS, 0, stream>>>(S, lse, rows, T); break;
	default: k_softmax<0><<<g, THREADS, 0, stream>>>(S, lse, rows, T); break;
	}
}

/* k_dscores over rows of T, as softmax_rows */
static void dscores_rows(float *P, const float *dP, long long rows, int T, float scale,
			 cudaStream_t stream)
{
	unsigned int g = blocks_for((size_t)rows, WARPS);

	switch (row_regs(T)) {
	case 4: k_dscores<4><<<g, THREADS, 0, stream>>>(P, dP, rows, T, scale); break;
	case 8: k_dscores<8><<<g, THREADS, 0, stream>>>(P, dP, rows, T, scale); break;
	case 16: k_dscores<16><<<g, THREADS, 0, stream>>>(P, dP, rows, T, scale); break;
	case 32: k_dscores<32><<<g, THREADS, 0, stream>>>(P, dP, rows, T, scale); break;
	default: k_dscores<0><<<g, THREADS, 0, stream>>>(P, dP, rows, T, scale); break;
	}
}

/* One sequence's heads for cuBLAS: NH products hs apart in the [T][.]
 * matrices, T x T apart in the scratch. */
struct heads {
	cublasHandle_t blas;
	int T, hs, NH;
};

/* The three shapes of product (the file's top comment): SCORES C^T [T x T]
 * = op_T(A) B; APPLY C^T [hs x T] = A P^T; APPLY_T C^T [hs x T] = A op_T(P^T),
 * P (B) a [T][T] of the scratch. */
enum form { SCORES, APPLY, APPLY_T };

static int gemm_heads(const struct heads *h, enum form f, float alpha, const float *A, int lda,
		      const float *Bm, int ldb, float *Cm, int ldc, const char *what,
		      struct dt_err *err)
{
	const float zero = 0.0f;
	long long TT = (long long)h->T * h->T;
	cublasStatus_t s;

	if (f == SCORES)
		s = cublasSgemmStridedBatched(h->blas, CUBLAS_OP_T, CUBLAS_OP_N, h->T, h->T, h->hs,
					      &alpha, A, lda, h->hs, Bm, ldb, h->hs, &zero, Cm,
					      h->T, TT, h->NH);
	else
		s = cublasSgemmStridedBatched(h->blas, CUBLAS_OP_N,
					      f == APPLY ? CUBLAS_OP_N : CUBLAS_OP_T, h->hs, h->T,
					      h->T, &alpha, A, lda, h->hs, Bm, ldb, TT, &zero, Cm,
					      ldc, h->hs, h->NH);
	return blas_check(s, err, "cublasSgemmStridedBatched of attention's %s (T %d, %d heads of %d)",
			  what, h->T, h->NH, h->hs);
}

extern "C" size_t rt_gpu_attention_scratch_floats(int B, int T, int NH)
{
	if (B <= 0 || T <= 0 || NH <= 0)
		return 0;
	return 2 * (size_t)NH * (size_t)T * (size_t)T;
}

/* The arguments of an attention call: -EINVAL, 0, or 1 when empty. The
 * handle must queue on our stream (or its products would race our
 * kernels) and read alpha from the host. */
static int attention_args(cublasHandle_t blas, int B, int T, int C, int NH, const float *scratch,
			  cudaStream_t stream, const char *fn, struct dt_err *err)
{
	cublasPointerMode_t mode;
	cudaStream_t bound;
	int rc;

	if (B < 0 || T < 0 || C < 1 || NH < 1 || C % NH)
		return dt_err_add(err, "gpu: %s: bad shape B %d, T %d, C %d, NH %d (C must be a multiple of NH >= 1)",
				  fn, B, T, C, NH);
	if (B == 0 || T == 0)
		return 1;
	if (!blas || !scratch)
		return dt_err_add(err, "gpu: %s: %s is NULL", fn, blas ? "scratch" : "the cuBLAS handle");
	if ((rc = blas_check(cublasGetStream(blas, &bound), err, "%s: cublasGetStream", fn)) ||
	    (rc = blas_check(cublasGetPointerMode(blas, &mode), err, "%s: cublasGetPointerMode",
			     fn)))
		return rc;
	if (bound != stream)
		return dt_err_add(err, "gpu: %s: the cuBLAS handle is bound to another stream (hint: cublasSetStream to the kernels' stream)",
				  fn);
	if (mode != CUBLAS_POINTER_MODE_HOST)
		return dt_err_add(err, "gpu: %s: the cuBLAS handle is in device pointer mode (want host, cuBLAS's default)",
				  fn);
	return 0;
}

extern "C" int rt_gpu_attention_forward(cublasHandle_t blas, const float *qkv, float *out,
					float *lse, int B, int T, int C, int NH, float *scratch,
					cudaStream_t stream, struct dt_err *err)
{
	struct heads h = { blas, T, C / (NH > 0 ? NH : 1), NH };
	float scale = 1.0f / sqrtf((float)h.hs), *S = scratch;
	size_t seq = (size_t)T * 3 * (size_t)C, rows = (size_t)NH * (size_t)T;
	int b, rc;

	if ((rc = attention_args(blas, B, T, C, NH, scratch, stream, "attention_forward", err)))
		return rc < 0 ? rc : 0;
	for (b = 0; b < B; b++) {
		const float *Q = qkv + (size_t)b * seq, *K = Q + C, *V = Q + 2 * C;
		float *O = out + (size_t)b * (size_t)T * (size_t)C;

		if ((rc = gemm_heads(&h, SCORES, scale, K, 3 * C, Q, 3 * C, S, T, "S = Q K^T", err)))
			return rc;
		softmax_rows(S, lse + (size_t)b * rows, (long long)rows, T, stream);
		if ((rc = launched(err, "kernel attention softmax (T %d, %d heads)", T, NH)))
			return rc;
		if ((rc = gemm_heads(&h, APPLY, 1.0f, V, 3 * C, S, T, O, C, "O = P V", err)))
			return rc;
	}
	return 0;
}

/* Backward per sequence: P again from the scores and lse, dV = P^T dO,
 * dP = dO V^T, dS = P (dP - rowsum(P dP)) scale in P's place, dQ = dS K,
 * dK = dS^T Q; scratch holds P and dP. */
extern "C" int rt_gpu_attention_backward(cublasHandle_t blas, const float *dout,
					 const float *qkv, const float *lse, float *dqkv, int B,
					 int T, int C, int NH, float *scratch, cudaStream_t stream,
					 struct dt_err *err)
{
	struct heads h = { blas, T, C / (NH > 0 ? NH : 1), NH };
	float scale = 1.0f / sqrtf((float)h.hs), *P = scratch;
	size_t seq = (size_t)T * 3 * (size_t)C, rows = (size_t)NH * (size_t)T;
	float *dP = scratch + rows * (size_t)T;
	int b, rc;

	if ((rc = attention_args(blas, B, T, C, NH, scratch, stream, "attention_backward", err)))
		return rc < 0 ? rc : 0;
	for (b = 0; b < B; b++) {
		const float *Q = qkv + (size_t)b * seq, *K = Q + C, *V = Q + 2 * C;
		const float *dO = dout + (size_t)b * (size_t)T * (size_t)C;
		float *dQ = dqkv + (size_t)b * seq, *dK = dQ + C, *dV = dQ + 2 * C;

		if ((rc = gemm_heads(&h, SCORES, scale, K, 3 * C, Q, 3 * C, P, T, "S = Q K^T", err)))
			return rc;
		k_probs<<<blocks_for(rows, WARPS), THREADS, 0, stream>>>(P, lse + (size_t)b * rows,
									(long long)rows, T);
		if ((rc = launched(err, "kernel attention probs (T %d, %d heads)", T, NH)) ||
		    (rc = gemm_heads(&h, APPLY_T, 1.0f, dO, C, P, T, dV, 3 * C, "dV = P^T dO", err)) ||
		    (rc = gemm_heads(&h, SCORES, 1.0f, V, 3 * C, dO, C, dP, T, "dP = dO V^T", err)))
			return rc;
		dscores_rows(P, dP, (long long)rows, T, scale, stream);
		if ((rc = launched(err, "kernel attention dscores (T %d, %d heads)", T, NH)) ||
		    (rc = gemm_heads(&h, APPLY, 1.0f, K, 3 * C, P, T, dQ, 3 * C, "dQ = dS K", err)) ||
		    (rc = gemm_heads(&h, APPLY_T, 1.0f, Q, 3 * C, P, T, dK, 3 * C, "dK = dS^T Q", err)))
			return rc;
	}
	return 0;
}
