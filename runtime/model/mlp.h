/*
 * mlp.h - the multi-layer perceptron, model.type "mlp": the first model
 * behind runtime/model/model.h. What a caller beyond the model interface may need
 * of it: the widths, and a dense layer's view of a stage's block (the GPU
 * stage and the tests build on them).
 *
 * The model: widths w[0] = model.inputs, w[1..H] = model.hidden, w[H+1] =
 * model.outputs; block l (0 <= l <= H) is layer l, which maps w[l] ->
 * w[l+1], y = x W^T + b, followed by model.activation, except the last layer
 * (whose outputs are the logits).
 *
 * Tensors: layer l declares "<2l>.weight" [out][in] and "<2l>.bias" [out],
 * both with weight decay: the names of PyTorch's nn.Sequential(Linear,
 * act, Linear, act, ..., Linear), whose Linear modules sit at even indices,
 * so that model.load_state_dict() takes a checkpoint's tensors as they are.
 * Initialisation, per layer l from dt_rng stream (model.init_seed, l), in
 * row-major order of W:
 *	W ~ U(-bound, bound), bound = gain * sqrt(3 / in)   (variance gain^2 / in)
 *	b = 0
 * with gain = sqrt(2) for relu and gelu (He et al. 2015, "Kaiming uniform")
 * and 5/3 for tanh (PyTorch's calculate_gain), on every layer.
 * Cost (what the stage split balances): a layer's parameter count, which is
 * also its share of the multiply-adds, forward and backward, and of the
 * allreduce volume.
 *
 * The split way (model.h, rt_part): part k of L of a layer is a block of
 * its outputs' columns, cut on 16-float (cache line) boundaries
 * (rt_part_cols): that block of the weights' rows, and of the gradient,
 * whole. Each product keeps its 64-row batch where plain data parallelism
 * would run half-batches that stream the whole weights for half the work.
 * The head (the last layer, no activation) is cut by rows instead when it
 * has fewer than 2 cache lines of outputs per part: cut by columns, such a
 * head falls (nearly) whole to one part (10 classes: 1 line, all of it to
 * the last part), which the others wait for twice a step; cut by rows,
 * every part computes its own rows' logits, the caller their loss, and the
 * part its rows' input gradient with no sync in between.
 */
#ifndef DTRAIN_RUNTIME_MLP_H
#define DTRAIN_RUNTIME_MLP_H

#include <stdbool.h>
#include <stddef.h>

#include "jobs/spec.h"
#include "runtime/kernels/kernels.h"
#include "runtime/model/model.h"

extern const struct rt_model_ops rt_mlp_model;

/* Layers of the spec's MLP (model.hidden + 1). */
int rt_mlp_layers(const struct spec *s);
/* Width w[i], 0 <= i <= layers: inputs, hidden..., outputs; -1 out of range. */
long rt_mlp_width(const struct spec *s, int i);

/* Layer i of an MLP stage (0 <= i < st->n_blocks), as views into the
 * stage's buffers (valid while they are). */
struct rt_layer {
	int index;       /* global layer index l */
	int in, out;     /* widths w[l] -> w[l+1] */
	bool act;        /* followed by the activation (all but the model's last layer) */
	size_t offset;   /* index of this layer's first float in params and grads */
	size_t n_params; /* out * in + out: W then b */
	float *w;        /* [out][in] row-major, = params + offset */
	float *b;        /* [out], = w + out * in */
	float *dw;       /* [out][in], = grads + offset */
	float *db;       /* [out], = dw + out * in */
};
struct rt_layer rt_mlp_layer(const struct rt_stage *st, int i);
/* The stage's activation function (model.activation). */
enum rt_act rt_mlp_act(const struct rt_stage *st);
/* Layer i's pre-activations [acts->max_rows][out] in acts (the layer's
 * output, too, when no activation follows it). */
float *rt_mlp_z(const struct rt_stage *st, const struct rt_acts *acts, int i);

/* Part k of L of width columns: [*c0, *c1), cut on 16-float (cache line)
 * boundaries, as even as that allows; every width is cut the same way,
 * so a layer's input part is the previous layer's output part. */
void rt_part_cols(int width, int k, int L, int *c0, int *c1);

#endif
