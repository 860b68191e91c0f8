/*
 * ckpt_tables.c - a model's tensors as checkpoints list them
 * (checkpoint/ckpt.h; checkpointing.h): a stage's, at their offsets in its
 * buffers, and the whole model's, for the root file and the manifest, the
 * start from another run's weights (init_from.c) and imports (cmd/).
 */
#include "runtime/train/checkpointing.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/model/model.h"

/* The model's tensors as checkpoints list them (checkpoint/ckpt.h):
 * this stage's, at their offsets in its buffers, and the whole model's,
 * which rank 0 writes into the root file and the manifest. */
int rt_ckpt_tensors(const struct rt_tensor *t, int n, struct ckpt_tensor **out)
{
	int i, j;

	_Static_assert(RT_MAX_DIMS <= CKPT_MAX_DIMS, "a model's tensor fits a checkpoint's");
	_Static_assert(RT_MAX_BLOCKS == CKPT_MAX_BLOCKS, "a model's blocks fit a checkpoint's");
	_Static_assert(RT_TENSOR_NAME <= CKPT_NAME_MAX, "a model's name fits a checkpoint's");

	*out = calloc((size_t)(n ? n : 1), sizeof(**out));
	if (!*out)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		struct ckpt_tensor *c = &(*out)[i];

		snprintf(c->name, sizeof(c->name), "%s", t[i].name);
		c->ndim = t[i].ndim;
		for (j = 0; j < t[i].ndim; j++)
			c->shape[j] = t[i].shape[j];
		c->block = t[i].block;
		c->offset = t[i].offset;
	}
	return 0;
}

int rt_ckpt_model_table(const struct spec *s, struct ckpt_tensor **out, int *n, struct dt_err *err)
{
	const struct rt_model_ops *ops = rt_model_find(s, err);
	struct rt_tensor *all = NULL;
	int rc;

	*out = NULL;
	*n = 0;
	if (!ops)
		return -EINVAL;
	rc = rt_model_tensors(s, 0, ops->blocks(s), &all, n, err);
	if (!rc && rt_ckpt_tensors(all, *n, out))
		rc = (dt_err_add(err, "out of memory for the model's table"), -ENOMEM);
	free(all);
	return rc;
}
