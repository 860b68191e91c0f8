/*
 * model.h - the MLP of a job spec (model.*), cut into pipeline stages: the
 * parameters a rank owns, their initialisation, and forward and backward of
 * one stage over one micro-batch.
 *
 * The model: widths w[0] = model.inputs, w[1..H] = model.hidden, w[H+1] =
 * model.outputs; layer l (0 <= l <= H, global index) maps w[l] -> w[l+1],
 * y = x W^T + b, and is followed by model.activation, except the last layer
 * (whose outputs are the logits). A stage owns a contiguous run of layers.
 *
 * Invariants that make runs on different layouts comparable:
 *   - the initial parameters of layer l depend only on (model.init_seed, l,
 *     the widths, model.activation), never on the stage split (rt_stage_init);
 *   - the split is a pure function of the spec and the stage count, so every
 *     rank computes the same one without talking (rt_stage_split);
 *   - the forward of a stage runs exactly the kernels a 1-stage model runs on
 *     the same layers, so the output of stages composed is bitwise the output
 *     of the whole model (for a given OpenBLAS thread count).
 *
 * Memory layout of a stage: ONE buffer of parameters and one of gradients,
 * same size and layout: its layers in order, each as W [out][in] then b [out].
 * A run of whole layers i..j of the stage is therefore one contiguous range
 * [layers[i].offset, layers[j].offset + layers[j].n_params): allreduce
 * buckets are such runs, taken from the last layer backwards.
 *
 * Life cycle: rt_stage_split() (pure), rt_stage_init() / rt_stage_free();
 * per micro-batch in flight: rt_acts_init() / rt_acts_free(); per step:
 * rt_stage_zero_grads(), then forward and backward of each micro-batch
 * (gradients accumulate), then the optimizer on params/grads.
 *
 * Sections: model queries, stage split, stages, activations, forward and
 * backward.
 */
#ifndef DTRAIN_RUNTIME_MODEL_H
#define DTRAIN_RUNTIME_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "jobs/spec.h"
#include "runtime/kernels.h"
#include "base/util.h"

/* --- model queries (pure; the spec is borrowed for the call) --- */

/* Number of layers (model.hidden + 1), as spec_layers(). */
int rt_model_layers(const struct spec *s);
/* Width w[i], 0 <= i <= layers: inputs, hidden..., outputs; -1 out of range. */
long rt_model_width(const struct spec *s, int i);
/* Parameters of layer l: w[l+1] * w[l] + w[l+1] (weights and biases);
 * 0 for l out of range. */
size_t rt_layer_params(const struct spec *s, int l);
/* Parameters of the whole model; SIZE_MAX if the sum does not fit. */
size_t rt_model_params(const struct spec *s);
/* Parameters of stage k of a split (layers first[k]..first[k+1]-1). */
size_t rt_split_params(const struct spec *s, const int *first, int k);

/* --- stage split --- */

/* Cuts the model's layers into `stages` contiguous runs, each >= 1 layer:
 * stage k owns layers first[k] .. first[k+1]-1, first[0] = 0 and
 * first[stages] = layers. first has stages + 1 elements (caller's).
 *
 * When parallel.stage_layers is set, it is the split (the user's choice,
 * checked: one count >= 1 per stage, adding up to the layers). Otherwise
 * the split balances parameters. Cost of a stage = its parameter count (for an MLP that is also its share of
 * the multiply-adds, forward and backward, and of the allreduce volume).
 * The split minimises the largest stage cost (the pipeline's bottleneck:
 * every stage waits for the slowest one); among the splits that reach that
 * minimum it takes the one with the least sum of squared stage costs (the
 * most even one), ties going to the earliest boundaries. Found exactly:
 * binary search on the bottleneck with a greedy feasibility test, then a
 * dynamic program over (stage, boundary) that only tries runs within the
 * bottleneck: a few ms for 1025 layers of similar widths, 0.2 s at worst
 * (1025 layers, one of them huge, over 512 stages).
 * Deterministic: the same spec and stage count give the same split.
 *
 * 0, or -EINVAL with a message in err: stages < 1 or more than the layers,
 * a parallel.stage_layers that does not fit, or a model that is not a valid
 * MLP (a width < 1). */
int rt_stage_split(const struct spec *s, int stages, int *first, struct dt_err *err);

/* --- stages --- */

/* One layer of a stage: views into the stage's buffers. */
struct rt_layer {
	int index;       /* global layer index l, 0 <= l < rt_model_layers() */
	int in, out;     /* widths w[l] -> w[l+1] */
	bool act;        /* followed by the activation (all but the model's last layer) */
	size_t offset;   /* index of this layer's first float in params and grads */
	size_t n_params; /* out * in + out: W then b */
	float *w;        /* [out][in] row-major, = params + offset */
	float *b;        /* [out], = w + out * in */
	float *dw;       /* [out][in], = grads + offset */
	float *db;       /* [out], = dw + out * in */
};

/* The layers one pipeline stage owns. Everything here is owned by the stage
 * and freed by rt_stage_free(), but params and grads once adopted. */
struct rt_stage {
	int stage;          /* 0 <= stage < n_stages */
	int n_stages;
	int first_layer;    /* global index of layers[0] */
	int n_layers;       /* >= 1 */
	int n_model_layers; /* layers of the whole model */
	enum rt_act act;    /* model.activation */
	int in;             /* width of the stage input: w[first_layer] */
	int out;            /* width of the stage output: w[first_layer + n_layers] */
	int max_width;      /* widest layer output of the stage */
	float *params;      /* [n_params]: every layer's W then b, in layer order */
	float *grads;       /* [n_params]: same layout; zero after init */
	size_t n_params;
	struct rt_layer *layers; /* [n_layers], in order */
	bool adopted;       /* params and grads belong to someone else (rt_stage_adopt) */
};

/* Builds stage `stage` of n_stages, split as `first` (from rt_stage_split;
 * borrowed), allocating ONLY this stage's layers. Initialisation, per layer l
 * from rt_rng stream (model.init_seed, l), in row-major order of W:
 *	W ~ U(-bound, bound), bound = gain * sqrt(3 / in)   (variance gain^2 / in)
 *	b = 0
 * with gain = sqrt(2) for relu and gelu (He et al. 2015, "Kaiming uniform")
 * and 5/3 for tanh (PyTorch's calculate_gain), on every layer.
 * The caller frees with rt_stage_free(), also after a failure (st is then
 * empty). 0, -EINVAL (bad spec, stage or split; message in err) or -ENOMEM. */
int rt_stage_init(struct rt_stage *st, const struct spec *s, int stage, int n_stages,
		  const int *first, struct dt_err *err);
/* Frees what the stage owns and zeroes it; safe on a zeroed or freed stage. */
void rt_stage_free(struct rt_stage *st);
/* Points the stage, and its layers' views, at params and grads [n_params]
 * that the caller owns and keeps until rt_stage_free() (runtime/dp.h: a
 * shared-memory window), after freeing the stage's own. The caller copies
 * the values first. NULL, NULL detaches them before the owner frees them. */
void rt_stage_adopt(struct rt_stage *st, float *params, float *grads);
/* grads = 0 (at the start of each step). */
void rt_stage_zero_grads(struct rt_stage *st);

/* --- activations of one micro-batch --- */

/* What backward needs from forward, for up to max_rows samples: a copy of
 * the stage input and each layer's pre-activation and output, plus two
 * scratch buffers for the gradients flowing back. One per micro-batch in
 * flight (GPipe: all m of a step; 1F1B: at most n_stages). Owned by the
 * caller's struct, allocated by rt_acts_init(), freed by rt_acts_free(). */
struct rt_acts {
	/* the stage these were sized for (checked by forward and backward) */
	int first_layer, n_layers, in;
	int max_rows;
	int rows;        /* rows of the last forward; -1 before the first */
	float *x;        /* [max_rows][in]: copy of the stage input */
	float **z;       /* [n_layers] -> [max_rows][layer out]: pre-activations */
	float **a;       /* [n_layers] -> [max_rows][layer out]: outputs; == z[i]
			    for a layer without activation */
	float *dbuf[2];  /* [max_rows][max_width] each: backward scratch */
	float *mem;      /* the one allocation behind x, z[], a[], dbuf[] */
	bool own_mem;    /* mem is ours to free (not rt_acts_place's) */
};

/* Sizes acts for micro-batches of up to max_rows (>= 1) through st.
 * 0, -EINVAL or -ENOMEM; rt_acts_free() also after a failure. */
int rt_acts_init(struct rt_acts *acts, const struct rt_stage *st, int max_rows);
/* Floats that acts for max_rows rows through st take (0 when max_rows < 1
 * or too many to count in a size_t). */
size_t rt_acts_floats(const struct rt_stage *st, int max_rows);
/* rt_acts_init in mem [rt_acts_floats(st, max_rows)], which the caller owns
 * and keeps until rt_acts_free() (runtime/dp.h: a shared-memory window).
 * 0, -EINVAL or -ENOMEM. */
int rt_acts_place(struct rt_acts *acts, const struct rt_stage *st, int max_rows, float *mem);
/* Frees and zeroes; safe on a zeroed or freed struct. */
void rt_acts_free(struct rt_acts *acts);

/* --- forward and backward --- */

/* Forward of rows (0 <= rows <= acts->max_rows) samples x [rows][st->in]
 * through the stage. x is copied into acts, so the caller may reuse its
 * buffer at once. *y gets the stage output [rows][st->out] (activations of
 * the last layer, or the logits on the last stage), which lives in acts:
 * valid until the next forward on the same acts. 0, or -EINVAL when rows is
 * out of range or acts were sized for another stage. */
int rt_stage_forward(const struct rt_stage *st, struct rt_acts *acts, const float *x,
		     int rows, const float **y);

/* Backward of the micro-batch of the last rt_stage_forward() on acts, given
 * dy [rows][st->out] = dLoss/d(stage output) (on the last stage: the
 * dlogits of rt_softmax_xent()). ACCUMULATES every layer's dW and db into
 * st->grads (micro-batches add up; zero them per step), and writes dx
 * [rows][st->in] = dLoss/d(stage input), to send to the previous stage; dx
 * NULL skips that product (stage 0). dy and dx are the caller's and must not
 * overlap acts.
 *
 * layer_done (may be NULL) is called as layer_done(ctx, i) as soon as layer i
 * of the stage (0 <= i < n_layers, global index first_layer + i) has its
 * gradients complete for this micro-batch, for i = n_layers-1 down to 0, so
 * that on the last micro-batch of a step the caller can start that layer's
 * allreduce while the earlier layers are still being computed.
 * acts stay valid (a second backward would add the same gradients again).
 * 0, or -EINVAL when acts hold no forward or were sized for another stage. */
int rt_stage_backward(struct rt_stage *st, struct rt_acts *acts, const float *dy, float *dx,
		      void (*layer_done)(void *ctx, int layer_index_in_stage), void *ctx);

/* --- a part of every layer (the replicas of a node split the stage) --- */

/* With parallel.grad_sync "split" (runtime/dp.h) the L replicas of a node
 * run each micro-batch of the whole node together: replica k computes
 * block k of L of every layer's outputs over all of the node's rows (a
 * block of the weights' rows: that part of the gradient, whole), and the
 * activations and their gradients lie in memory all of them read. Each
 * product keeps its 64-row batch where plain data parallelism would run
 * half-batches that stream the whole weights for half the work. */
struct rt_part {
	int k, L;           /* this replica's block, of L */
	int r0, r1;         /* this block's rows [r0, r1) of the node's: the
			     * head's, when rt_part_head_rows (the rows whose
			     * loss the caller computes) */
	/* returns when all L replicas have called it, with what each wrote
	 * before it visible to all; nonzero: failed (the pass returns it) */
	int (*sync)(void *ctx);
	void *ctx;
};

/* Whether st's last layer is cut by rows rather than by columns among L
 * blocks: when it is the model's head (no activation: the caller's loss
 * follows) and has fewer than 2 cache lines (32 floats) of outputs per
 * block. Cut by columns, such a head falls (nearly) whole to one block
 * (10 classes: 1 line, all of it to the last block), which the others wait
 * for twice a step; cut by rows, every block computes its own rows' logits,
 * the caller their loss, and the block its rows' input gradient with no
 * sync in between, and every block reads all of the head's weights, which
 * are then fewer than 2 L lines by the layer's inputs. */
bool rt_part_head_rows(const struct rt_stage *st, int L);

/* Block k of L of width columns: [*c0, *c1), cut on 16-float (cache line)
 * boundaries, as even as that allows; every width is cut the same way,
 * so a layer's input block is the previous layer's output block. */
void rt_part_cols(int width, int k, int L, int *c0, int *c1);

/* The ranges of st's parameters (and gradients) that block k of L owns:
 * per layer the rows [c0, c1) of W, then b[c0, c1); empty ranges left
 * out. spans [2 * st->n_layers] (caller's) of { first, count }; returns
 * how many were filled. */
struct rt_span {
	size_t first, count;
};
int rt_stage_part_spans(const struct rt_stage *st, int k, int L, struct rt_span *spans);

/* Forward of rows node rows acts->x [rows][st->in], which the replicas
 * filled before their last sync: this replica computes its block of every
 * layer, with a sync after each, so that on return *y (the stage output,
 * [rows][st->out], in acts) is whole. With rt_part_head_rows, the head
 * has no sync after it: on return *y holds this block's rows [p->r0,
 * p->r1), the others' only after the next sync (rt_stage_backward_part's
 * first). 0, -EINVAL, or the sync's error. */
int rt_stage_forward_part(const struct rt_stage *st, struct rt_acts *acts, int rows,
			  const struct rt_part *p, const float **y);
/* Backward of the last rt_stage_forward_part on acts, given dy [rows]
 * [st->out] (whole since the caller's last sync; it must not overlap
 * acts): ACCUMULATES this block's rows of every layer's dW and db into
 * st->grads, with a sync before each layer's product for the layer below
 * (which reads every block of the layer's output gradient). When dx is
 * not NULL it gets this replica's block of the input gradient's columns
 * [rows][st->in] (whole after the caller's next sync). With
 * rt_part_head_rows, dy needs only this block's rows [p->r0, p->r1) at the
 * call (the other blocks write theirs before the pass's first sync); the
 * head's input gradient is cut by those rows and its weight gradient by
 * blocks of its input columns, and a sync follows every block's part
 * before the pass returns (one more at the end when no layer below has
 * one: at most 2 layers), so that the head's rows of dW and db are whole
 * for their owner (rt_stage_part_spans) at return. 0, -EINVAL, or the
 * sync's error. */
int rt_stage_backward_part(struct rt_stage *st, struct rt_acts *acts, const float *dy, float *dx,
			   const struct rt_part *p);

#endif
