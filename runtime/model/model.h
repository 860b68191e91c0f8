/*
 * model.h - the model interface: a model is an ordered list of blocks, each
 * with named parameter tensors, a forward and a backward pass over a
 * micro-batch, and a cost; a pipeline stage owns a contiguous run of blocks.
 * The rest of the runtime (schedules, gradient sync, optimizer,
 * checkpoints) sees blocks and tensors through this header only; a model
 * type (runtime/model/mlp.c: "mlp") is a table of functions, struct rt_model_ops.
 *
 * Invariants every model keeps, which make runs on different layouts
 * comparable bit for bit:
 *   - the initial values of block b depend only on the spec and b, never
 *     on the stage split (ops->init);
 *   - the split is a pure function of the spec and the stage count, so every
 *     rank computes the same one without talking (rt_stage_split);
 *   - a stage's forward runs each block's kernels exactly as a 1-stage model
 *     runs them, so stages composed give bitwise the whole model's output
 *     (for a given OpenBLAS thread count).
 *
 * Between blocks flows one float matrix [rows][width]: width(b) floats per
 * sample into block b (width(0): the model's input, a row of the data set;
 * width(blocks): its output, the logits the loss reads).
 *
 * Memory of a stage: ONE buffer of parameters and one of gradients, same
 * size and layout: its blocks in order, each block's tensors in the order
 * the model declares them, each tensor row-major. A run of whole blocks
 * i..j is therefore one contiguous range [blocks[i].offset,
 * blocks[j].offset + blocks[j].n_params): allreduce buckets are such runs,
 * taken from the last block backwards.
 *
 * Life cycle: rt_model_find() (the spec's model.type), rt_stage_split()
 * (pure), rt_stage_init() / rt_stage_free(); per micro-batch in flight:
 * rt_acts_init() / rt_acts_free(); per step: rt_stage_zero_grads(), then
 * forward and backward of each micro-batch (gradients accumulate), then the
 * optimizer on params/grads.
 *
 * Sections: model types, model queries, stage split, stages, activations,
 * forward and backward, a part of every block (the split way).
 */
#ifndef DTRAIN_RUNTIME_MODEL_H
#define DTRAIN_RUNTIME_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/buf.h"
#include "jobs/spec.h"

#define RT_TENSOR_NAME 96 /* bytes of a tensor name, its NUL included */
#define RT_MAX_DIMS 4
#define RT_BLOCK_TENSORS 16 /* most tensors one block declares */
#define RT_MAX_BLOCKS 1025  /* most blocks of a model (checkpoint/ckpt.h's CKPT_MAX_BLOCKS) */

/* One parameter tensor, as its model declares it (name, ndim, shape, decay)
 * and as a stage lays it out (the rest). */
struct rt_tensor {
	char name[RT_TENSOR_NAME]; /* the model's name, the checkpoint's dataset name:
				    * "0.weight", "transformer.h.3.attn.c_attn.weight" */
	int ndim;                  /* 1..RT_MAX_DIMS */
	int64_t shape[RT_MAX_DIMS]; /* row-major */
	bool decay;                /* the optimizer's weight decay applies to it */
	int block;                 /* global index of the block that declares it */
	size_t offset;             /* first float in the stage's params and grads */
	size_t n;                  /* floats: the product of the shape */
};

struct rt_dev; /* device.h */
struct rt_stage;
struct rt_acts;
struct rt_part;
struct rt_span;

/* One block of a stage: views into the stage's buffers. */
struct rt_block {
	int index;          /* global block index, 0 <= index < blocks */
	int in, out;        /* floats per sample of its input and output */
	size_t offset;      /* its first float in params and grads */
	size_t n_params;    /* floats of its tensors */
	int first_tensor;   /* its tensors: st->tensors[first_tensor ..] */
	int n_tensors;
	float *params;      /* = stage params + offset */
	float *grads;       /* = stage grads + offset */
};

/* The split way (runtime/parallel/dp.h, parallel.grad_sync "split") for a model that
 * supports it: every block cut into L parts between replicas or threads. */
struct rt_part_ops {
	bool (*head_rows)(const struct rt_stage *st, int L);
	int (*spans)(const struct rt_stage *st, int k, int L, struct rt_span *spans);
	int (*forward)(const struct rt_stage *st, struct rt_acts *acts, int rows,
		       const struct rt_part *p, const float **y);
	int (*backward)(struct rt_stage *st, struct rt_acts *acts, const float *dy, float *dx,
			const struct rt_part *p);
};

/* Two tensors of a model that are one parameter (GPT's token embedding and
 * its tied head): each stage that holds either keeps a copy; the trainer
 * gives both the sum of their gradients every step, so that the copies,
 * equal at init, stay bitwise equal. */
#define RT_MAX_TIES 4
struct rt_tie {
	int block[2];                  /* global blocks that declare them */
	char name[2][RT_TENSOR_NAME];  /* their names; same shape */
};

/* A model type. Every function is pure in the spec unless it says
 * otherwise; b is a global block index. */
struct rt_model_ops {
	const char *type;       /* model.type: "mlp" */
	const char *block_noun; /* what users call a block in messages: "layer" */
	const char *blocks_are; /* which spec keys make the blocks: "model.hidden + output" */
	/* what a sample is: false, a row of a data set (width(0) features, one
	 * label); true, a window of a token stream (data.h, rt_data_open_windows:
	 * width(0) token ids, one target per position) */
	bool reads_tokens;
	/* 0, or -EINVAL naming the spec key that this model cannot build */
	int (*check)(const struct spec *s, struct dt_err *err);
	/* the model's config as one compact JSON object (no spaces, keys in a
	 * fixed order): what its tensors' shapes and meaning depend on, and
	 * nothing else (not the init seed), so that checkpoints of the same
	 * model match by it (checkpoint/ckpt.h, model_hash). 0 or -ENOMEM */
	int (*config)(const struct spec *s, struct dt_buf *out);
	int (*blocks)(const struct spec *s);
	/* floats per sample into block b; b = blocks: out of the last one */
	long (*width)(const struct spec *s, int b);
	/* block b's tensors into t[RT_BLOCK_TENSORS]: name, ndim, shape, decay
	 * (the rest is the stage's to fill); returns how many, 1 at least */
	int (*tensors)(const struct spec *s, int b, struct rt_tensor *t);
	/* what the stage split balances: block b's share of a step's work */
	size_t (*cost)(const struct spec *s, int b);
	/* floats per sample that block b of stage st keeps from forward for
	 * backward */
	size_t (*act_floats)(const struct rt_stage *st, const struct rt_block *b);
	/* floats per sample of the scratch that block b uses during one
	 * forward or backward and not after (NULL: none) */
	size_t (*work_floats)(const struct rt_stage *st, const struct rt_block *b);
	/* block b's initial values, its tensors in order, into params */
	void (*init)(const struct spec *s, int b, float *params);
	/* the stage's own state of the model (st->model; may stay NULL):
	 * made by stage_init, freed by stage_free */
	int (*stage_init)(struct rt_stage *st, const struct spec *s, struct dt_err *err);
	void (*stage_free)(struct rt_stage *st);
	/* forward of rows samples x [rows][b->in] through block b; keeps what
	 * backward needs in acts [max_rows * act_floats], and points *y at the
	 * output [rows][b->out], which lives in acts or is x. work: [max_rows
	 * * work_floats], the block's scratch (shared by every block) */
	void (*forward)(const struct rt_stage *st, const struct rt_block *b, const float *x,
			float *acts, float *work, int max_rows, int rows, const float **y);
	/* backward of the last forward on acts: given dy [rows][b->out], which
	 * it may overwrite, ACCUMULATES the block's gradients into b->grads and
	 * writes dx [rows][b->in] (NULL: not wanted) */
	void (*backward)(const struct rt_stage *st, const struct rt_block *b, const float *x,
			 float *acts, float *work, int max_rows, int rows, float *dy, float *dx);
	const struct rt_part_ops *part; /* NULL: no split way for this model */
	/* the model's tied tensors into t[RT_MAX_TIES]; returns how many
	 * (NULL: none) */
	int (*ties)(const struct spec *s, struct rt_tie *t);
};

/* --- model types --- */

/* The model type the spec names (model.type; NULL or absent: "mlp").
 * NULL with a message naming model.type and the types there are. */
const struct rt_model_ops *rt_model_find(const struct spec *s, struct dt_err *err);

/* --- model queries (pure; the spec is borrowed for the call) --- */

/* Blocks of the spec's model; 0 when its type is unknown. */
int rt_model_blocks(const struct spec *s);
/* Floats of block b's tensors; 0 for b out of range, SIZE_MAX when the sum
 * does not fit. */
size_t rt_block_params(const struct spec *s, int b);
/* The model's tied tensors into t[RT_MAX_TIES]; how many (0: none, or an
 * unknown model type). */
int rt_model_ties(const struct spec *s, struct rt_tie *t);
/* Floats of the tied tensors' second copies (0 without ties): the whole
 * model's count less this is its count of distinct parameters. */
size_t rt_model_tied_params(const struct spec *s);
/* Parameters of the whole model; SIZE_MAX if the sum does not fit. */
size_t rt_model_params(const struct spec *s);
/* Parameters of stage k of a split (blocks first[k]..first[k+1]-1). */
size_t rt_split_params(const struct spec *s, const int *first, int k);
/* The tensors of blocks [from, to) into *t (caller frees), laid out as a
 * stage of exactly those blocks would lay them out; *n their count.
 * 0, -EINVAL (unknown model) or -ENOMEM, with a message. */
int rt_model_tensors(const struct spec *s, int from, int to, struct rt_tensor **t, int *n,
		     struct dt_err *err);

/* --- stage split --- */

/* Cuts the model's blocks into `stages` contiguous runs, each >= 1 block:
 * stage k owns blocks first[k] .. first[k+1]-1, first[0] = 0 and
 * first[stages] = blocks. first has stages + 1 elements (caller's).
 *
 * When parallel.stage_layers is set, it is the split (the user's choice,
 * checked: one count >= 1 per stage, adding up to the blocks). Otherwise
 * the split balances the blocks' costs (ops->cost; for the MLP a layer's
 * parameter count, also its share of the multiply-adds and of the
 * allreduce volume). It minimises the largest stage cost (the pipeline's
 * bottleneck: every stage waits for the slowest one); among the splits
 * that reach that minimum it takes the one with the least sum of squared
 * stage costs (the most even one), ties going to the earliest boundaries.
 * Found exactly: binary search on the bottleneck with a greedy feasibility
 * test, then a dynamic program over (stage, boundary) that only tries runs
 * within the bottleneck (few per boundary when the blocks' costs are even;
 * stages x blocks^2 / 2 steps at worst).
 *
 * 0, or -EINVAL with a message in err: stages < 1 or more than the blocks,
 * a parallel.stage_layers that does not fit, or a model the spec cannot
 * build (ops->check). */
int rt_stage_split(const struct spec *s, int stages, int *first, struct dt_err *err);

/* --- stages --- */

/* The blocks one pipeline stage owns. Everything here is owned by the stage
 * and freed by rt_stage_free(), but params and grads once adopted. */
struct rt_stage {
	const struct rt_model_ops *ops;
	struct rt_dev *dev; /* borrowed: where params, grads, activations and
			     * the model's state live and compute (device.h) */
	void *model;        /* ops->stage_init's state, or NULL */
	int stage;          /* 0 <= stage < n_stages */
	int n_stages;
	int first_block;    /* global index of blocks[0] */
	int n_blocks;       /* >= 1 */
	int n_model_blocks; /* blocks of the whole model */
	int in;             /* floats per sample into the stage: width(first_block) */
	int out;            /* floats per sample out of it */
	int max_width;      /* widest block output of the stage */
	float *params;      /* device [n_params]: every block's tensors, in order */
	float *grads;       /* device [n_params]: same layout; zero after init */
	size_t n_params;
	struct rt_block *blocks;   /* [n_blocks], in order */
	struct rt_tensor *tensors; /* [n_tensors], in order */
	int n_tensors;
	bool adopted;       /* params and grads belong to someone else (rt_stage_adopt) */
};

/* Builds stage `stage` of n_stages, split as `first` (from rt_stage_split;
 * borrowed), allocating ONLY this stage's blocks, initialised by ops->init.
 * The caller frees with rt_stage_free(), also after a failure (st is then
 * empty). 0, -EINVAL (bad spec, stage or split) or -ENOMEM, with a message. */
int rt_stage_init(struct rt_stage *st, const struct spec *s, int stage, int n_stages,
		  const int *first, struct dt_err *err);
/* The same on device dev (borrowed until rt_stage_free; rt_stage_init:
 * the CPU). The initial values are the CPU's bits on every device. */
int rt_stage_init_on(struct rt_stage *st, struct rt_dev *dev, const struct spec *s, int stage,
		     int n_stages, const int *first, struct dt_err *err);
/* Frees what the stage owns and zeroes it; safe on a zeroed or freed stage. */
void rt_stage_free(struct rt_stage *st);
/* Points the stage, and its blocks' views, at params and grads [n_params]
 * that the caller owns and keeps until rt_stage_free() (runtime/parallel/dp.h: a
 * shared-memory window), after freeing the stage's own. The caller copies
 * the values first. NULL, NULL detaches them before the owner frees them. */
void rt_stage_adopt(struct rt_stage *st, float *params, float *grads);
/* grads = 0 (at the start of each step). */
void rt_stage_zero_grads(struct rt_stage *st);

/* --- activations of one micro-batch --- */

/* What backward needs from forward, for up to max_rows samples: a copy of
 * the stage input, what each block keeps, and two scratch buffers for the
 * gradients flowing back. One per micro-batch in flight (GPipe: all m of a
 * step; 1F1B: at most n_stages). Owned by the caller's struct, allocated
 * by rt_acts_init(), freed by rt_acts_free(). */
struct rt_acts {
	struct rt_dev *dev; /* the stage's: where mem lives */
	/* the stage these were sized for (checked by forward and backward) */
	int first_block, n_blocks, in;
	int max_rows;
	int rows;         /* rows of the last forward; -1 before the first */
	float *x;         /* [max_rows][in]: copy of the stage input */
	float **blk;      /* [n_blocks] -> [max_rows * act_floats]: what each block keeps */
	const float **y;  /* [n_blocks]: each block's output of the last forward */
	float *dbuf[2];   /* [max_rows][widest input of blocks 1..n-1] each (a model
			   * with parts: [max_width]): backward scratch */
	float *work;      /* [max_rows][the most work_floats of a block]: the
			   * blocks' own scratch (NULL: none) */
	float *mem;       /* the one allocation behind x, blk[], dbuf[], work */
	bool own_mem;     /* mem is ours to free (not rt_acts_place's) */
};

/* Sizes acts for micro-batches of up to max_rows (>= 1) through st.
 * 0, -EINVAL or -ENOMEM; rt_acts_free() also after a failure. */
int rt_acts_init(struct rt_acts *acts, const struct rt_stage *st, int max_rows);
/* Floats that acts for max_rows rows through st take (0 when max_rows < 1
 * or too many to count in a size_t). */
size_t rt_acts_floats(const struct rt_stage *st, int max_rows);
/* rt_acts_init in mem [rt_acts_floats(st, max_rows)], which the caller owns
 * and keeps until rt_acts_free() (runtime/parallel/dp.h: a shared-memory window).
 * 0, -EINVAL or -ENOMEM. */
int rt_acts_place(struct rt_acts *acts, const struct rt_stage *st, int max_rows, float *mem);
/* (rt_acts_place: a stage on a host device only, -EINVAL otherwise) */
/* Frees and zeroes; safe on a zeroed or freed struct. */
void rt_acts_free(struct rt_acts *acts);

/* --- forward and backward --- */

/* Forward of rows (0 <= rows <= acts->max_rows) samples x [rows][st->in]
 * (device memory, like every array of the passes) through the stage. x is
 * copied into acts, so the caller may reuse its buffer at once. *y gets the stage output [rows][st->out] (on the last
 * stage the logits), which lives in acts: valid until the next forward on
 * the same acts. 0, or -EINVAL when rows is out of range or acts were
 * sized for another stage. */
int rt_stage_forward(const struct rt_stage *st, struct rt_acts *acts, const float *x,
		     int rows, const float **y);

/* Backward of the micro-batch of the last rt_stage_forward() on acts, given
 * dy [rows][st->out] = dLoss/d(stage output) (on the last stage: the
 * dlogits of rt_softmax_xent()), which the pass may overwrite. ACCUMULATES
 * every block's gradients into st->grads (micro-batches add up; zero them
 * per step), and writes dx [rows][st->in] = dLoss/d(stage input), to send
 * to the previous stage; dx NULL skips that product (stage 0). dy and dx
 * are the caller's and must not overlap acts.
 *
 * block_done (may be NULL) is called as block_done(ctx, i) as soon as block
 * i of the stage (0 <= i < n_blocks) has its gradients complete for this
 * micro-batch, for i = n_blocks-1 down to 0, so that on the last
 * micro-batch of a step the caller can start their allreduce while the
 * earlier blocks are still being computed. 0, or -EINVAL when acts hold no
 * forward or were sized for another stage. */
int rt_stage_backward(struct rt_stage *st, struct rt_acts *acts, float *dy, float *dx,
		      void (*block_done)(void *ctx, int block_in_stage), void *ctx);

/* --- a part of every block (the replicas of a node split the stage) --- */

/* With parallel.grad_sync "split" (runtime/parallel/dp.h) the L replicas of a node
 * run each micro-batch of the whole node together: replica k computes
 * part k of L of every block over all of the node's rows, and the
 * activations and their gradients lie in memory all of them read. A model
 * offers this through ops->part (the MLP: runtime/model/mlp.h says how it cuts a
 * layer); rt_stage_can_part() says whether it does. */
struct rt_part {
	int k, L;           /* this replica's part, of L */
	int r0, r1;         /* this part's rows [r0, r1) of the node's: the
			     * head's, when rt_part_head_rows (the rows whose
			     * loss the caller computes) */
	/* returns when all L replicas have called it, with what each wrote
	 * before it visible to all; nonzero: failed (the pass returns it) */
	int (*sync)(void *ctx);
	void *ctx;
};

/* A range of a stage's parameters (and gradients), in floats. */
struct rt_span {
	size_t first, count;
};

bool rt_stage_can_part(const struct rt_stage *st);
/* Whether the loss rows are cut between the parts (each part gets the
 * logits of its rows [p->r0, p->r1) only) rather than every part seeing
 * them all after a sync. */
bool rt_part_head_rows(const struct rt_stage *st, int L);
/* The ranges of st's parameters (and gradients) that part k of L owns and
 * updates: spans [st->n_tensors] (caller's) of { first, count }, empty
 * ones left out; returns how many were filled. */
int rt_stage_part_spans(const struct rt_stage *st, int k, int L, struct rt_span *spans);
/* Forward of rows node rows acts->x [rows][st->in], which the replicas
 * filled before their last sync; on return *y (the stage output, in acts)
 * is whole, or with rt_part_head_rows holds this part's rows [p->r0, p->r1)
 * (the others' only after the next sync). 0, -EINVAL, or the sync's error. */
int rt_stage_forward_part(const struct rt_stage *st, struct rt_acts *acts, int rows,
			  const struct rt_part *p, const float **y);
/* Backward of the last rt_stage_forward_part on acts, given dy [rows]
 * [st->out] (whole since the caller's last sync, or with rt_part_head_rows
 * this part's rows; it must not overlap acts): ACCUMULATES this part's
 * gradients, so that at return every part's spans are whole for their
 * owner. When dx is not NULL it gets this part of the input gradient
 * (whole after the caller's next sync). 0, -EINVAL, or the sync's error. */
int rt_stage_backward_part(struct rt_stage *st, struct rt_acts *acts, const float *dy, float *dx,
			   const struct rt_part *p);

#endif
