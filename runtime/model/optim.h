/*
 * optim.h - the optimizer of a job spec (train.optimizer.*), the learning
 * rate schedule (train.lr_schedule.*) and the pieces of gradient clipping by
 * global norm (train.grad_clip), for the parameters of one pipeline stage.
 *
 * The update rules are PyTorch's (torch.optim.SGD and torch.optim.AdamW,
 * 1.13, default flags), element by element in float32, so that a run can be
 * compared step by step with a PyTorch peer:
 *
 *   SGD, momentum mu, weight decay wd as L2 (dampening 0, no Nesterov):
 *	g' = g + wd w;   v = mu v + g';   w -= lr v
 *   AdamW (Loshchilov & Hutter 2019), t = steps taken including this one:
 *	w -= lr wd w                       (decoupled weight decay, first)
 *	m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2
 *	w -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps),  eps = 1e-8
 *
 * Weight decay applies to every parameter but the ranges a model exempts
 * (rt_optim_no_decay: its tensors declared without decay, runtime/model/model.h),
 * as PyTorch's parameter groups do. The MLP exempts none, as PyTorch does
 * with one group (model.parameters()): a like-for-like comparison, and
 * biases are a tiny share of an MLP's parameters (out of out*in + out); a
 * GPT exempts its biases and LayerNorm weights (nanoGPT's convention).
 *
 * State for checkpoints: step, m and v (plain counters and float arrays,
 * exposed below); restoring them and the parameters continues the exact run.
 *
 * Sections: life cycle, update, schedule, clipping.
 */
#ifndef DTRAIN_RUNTIME_OPTIM_H
#define DTRAIN_RUNTIME_OPTIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jobs/spec.h"
#include "base/err.h"

enum rt_optim_type {
	RT_OPTIM_SGD,   /* "sgd": SGD with momentum (0 = plain SGD) */
	RT_OPTIM_ADAMW, /* "adamw" */
};

struct rt_pool; /* runtime/world/pool.h */

struct rt_optim {
	enum rt_optim_type type;
	double momentum;     /* SGD mu, train.optimizer.momentum */
	double beta1, beta2; /* AdamW, train.optimizer.betas */
	double eps;          /* AdamW denominator term, 1e-8 (PyTorch's default) */
	double weight_decay; /* train.optimizer.weight_decay */
	int64_t step;        /* updates taken so far (0 before the first) */
	size_t n;            /* elements of m and v: the stage's n_params */
	float *m;            /* [n], owned unless adopted: SGD momentum buffer v; AdamW first moment */
	float *v;            /* [n], owned unless adopted: AdamW second moment; NULL for SGD */
	struct rt_pool *pool; /* borrowed: the threads of an update (NULL after init:
			       * the caller's only; the trainer sets its own); the
			       * results do not depend on it */
	double *part;        /* [n / RT_CHUNK + 1], owned: per-chunk sums of squares */
	struct rt_span *no_decay; /* [n_no_decay], owned: ranges without weight
				   * decay, sorted, disjoint */
	int n_no_decay;
	bool adopted;        /* m and v belong to someone else (rt_optim_adopt) */
};

/* Updates and sums of squares work in chunks of this many elements. */
#define RT_CHUNK 65536

/* --- life cycle --- */

/* An optimizer for n_params parameters (one stage's), from spec->train.optimizer;
 * state zeroed, step 0. The caller frees with rt_optim_free(), also after a
 * failure. 0, -EINVAL (unknown type, betas not 2 values) or -ENOMEM, with a
 * message in err. */
int rt_optim_init(struct rt_optim *o, const struct spec *s, size_t n_params, struct dt_err *err);
/* Frees the state and zeroes o; safe on a zeroed or freed struct. */
void rt_optim_free(struct rt_optim *o);
/* Points the state at m and v [n] (v only for AdamW) that the caller owns
 * and keeps until rt_optim_free() (runtime/parallel/dp.h: a shared-memory window),
 * after freeing o's own. The caller copies the values first. NULL, NULL
 * detaches them before the owner frees them. */
void rt_optim_adopt(struct rt_optim *o, float *m, float *v);

/* Exempts ranges of the parameters from weight decay: spans [n] (copied;
 * sorted by first, disjoint, within n_params), e.g. a model's tensors
 * declared without decay. An element in one is updated exactly as by an
 * optimizer with weight_decay 0; the others as before. 0 or -ENOMEM. */
struct rt_span; /* runtime/model/model.h */
int rt_optim_no_decay(struct rt_optim *o, const struct rt_span *spans, int n);

/* --- update --- */

/* One update of params [n] from grads [n] at learning rate lr (from
 * rt_lr_at), then step += 1. n must be o->n: element i of params, grads, m
 * and v belong together. grads is read only (clip it before). */
void rt_optim_step(struct rt_optim *o, float *params, const float *grads, size_t n, double lr);
/* The training loop's update, in one pass over the arrays, on elements
 * [first, first + n) of the whole stage's arrays (o->n elements): the
 * update rt_optim_step makes from the gradient grads[i] * scale (scale 1:
 * bitwise what rt_optim_step gives; a clipping factor otherwise, as
 * rt_scale then rt_optim_step), and each element of grads left zero in the
 * same pass, right after it is read, so that the next step's backward can
 * add to the gradient (sgemm beta 1) with no pass of its own to zero it
 * (OpenBLAS's beta 0 is such a pass over the output). For
 * gradients this replica owns (not the shared slots of runtime/parallel/dp.h); a
 * range is what each replica updates when the replicas of a stage share
 * the arrays; first = 0, n = o->n is the whole stage. step += 1 all the
 * same. Returns the range's sum of squares of grads (before scale), in
 * chunks of RT_CHUNK from first: bitwise rt_sumsq() of them when first = 0. */
double rt_optim_step_take(struct rt_optim *o, float *params, float *grads, size_t first, size_t n,
			  double lr, float scale);
/* rt_optim_step_take over several ranges of the arrays, as one update
 * (step += 1 once): spans [n_spans] of { first, count } (runtime/model/model.h:
 * the blocks of the layers a replica owns with parallel.grad_sync
 * "split"). Returns the sum of squares of grads (before scale) over them,
 * span by span. */
double rt_optim_step_spans(struct rt_optim *o, float *params, float *grads,
			   const struct rt_span *spans, int n_spans, double lr, float scale);
/* A range of a stage's parameters whose gradient and optimizer state lie
 * elsewhere (runtime/parallel/shard.h: a replica's rows of each tensor, their
 * summed gradient where the reduce-scatter left it, their state packed). */
struct rt_optim_piece {
	size_t first;  /* its first parameter, in the stage's params */
	size_t count;  /* floats */
	size_t grad;   /* its first float in grads (<= first) */
	size_t at;     /* its first float in m and v (o->n of them; <= first) */
};
/* One update (step += 1 once) of the parameters of pieces [n_pieces] from
 * grads times scale, with the optimizer state of o->n floats holding only
 * the pieces (the sharded optimizer's): element first + i of params goes
 * with element grad + i of grads and at + i of m and v; each gradient is
 * left zero once read (as rt_optim_step_take). Weight decay follows the
 * parameters' index (rt_optim_no_decay). Each element is updated exactly
 * as rt_optim_step_take would update it. Returns the sum of squares of
 * the pieces' gradients (before scale). */
double rt_optim_step_pieces(struct rt_optim *o, float *params, float *grads,
			    const struct rt_optim_piece *pieces, int n_pieces, double lr,
			    float scale);
/* rt_optim_step_take (no clipping) from the sum of n_slots gradient
 * arrays, added in slot order (slots[0] + slots[1] + ...) as the update
 * reads them: the replicas' gradients of one node (runtime/parallel/dp.h) summed
 * and applied in one pass, with no summed copy written; it leaves the
 * range of every slot zero. Returns the
 * sum of squares of the summed gradient over the range. */
double rt_optim_step_sum(struct rt_optim *o, float *params, float *const *slots, int n_slots,
			 size_t first, size_t n, double lr);

/* --- schedule --- */

/* Learning rate of step `step` (0-based) of a run of total_steps updates:
 *   warm-up, step < W = warmup_steps:  lr * (step + 1) / W
 *	(linear; the first step already moves, as in llm.c, and step W-1
 *	reaches lr, so no update is spent at 0)
 *   then "constant":  lr
 *   then "cosine" (SGDR, Loshchilov & Hutter 2017, one cycle, no restart):
 *	min_lr + (lr - min_lr) (1 + cos(pi p)) / 2,  p = (step - W) / (total_steps - 1 - W)
 *	so lr at step W and exactly min_lr at the last step, total_steps - 1;
 *	steps beyond the last stay at min_lr; with no step left after the
 *	warm-up to decay over (total_steps - 1 <= W) the rate stays lr.
 * A negative step is taken as 0. */
double rt_lr_at(const struct spec *s, int64_t step, int64_t total_steps);

/* --- clipping by global norm --- */

/* Sum of g[i]^2, accumulated in double: per chunk of RT_CHUNK elements in
 * RT_LANES interleaved partial sums, then the chunks in order (the same bits
 * on every machine and for any thread count). The global norm of a replica's
 * gradient is sqrt of the sum over stages of each stage's rt_sumsq. */
double rt_sumsq(const float *g, size_t n);
/* g[i] *= factor. */
void rt_scale(float *g, size_t n, float factor);
/* The factor to scale gradients by for their global norm and
 * train.grad_clip max_norm: min(1, max_norm / (norm + 1e-6)) as
 * torch.nn.utils.clip_grad_norm_ (which scales already at norm ==
 * max_norm); exactly 1 when max_norm <= 0 (clipping off). */
double rt_clip_factor(double norm, double max_norm);

#endif
