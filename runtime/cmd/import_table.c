/*
 * import_table.c - dtrain's GPT as import and export see it (import.h):
 * the table of its tensors for a GPT-2 shape, with the parameters' buffer,
 * and the Conv1D layout of Hugging Face's files.
 */
#include "runtime/cmd/import.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "jobs/spec.h"
#include "runtime/model/model.h"
#include "runtime/train/checkpointing.h"

int rt_import_table(struct rt_import *im, const char *src, struct dt_err *err)
{
	struct spec *s = &im->s;
	const struct rt_model_ops *ops;
	struct dt_buf cfg = { 0 };
	size_t off = 0;
	int rc;

	if (!s->model.type) /* a GPT, of the shape the reader set */
		s->model.type = (char *)"gpt";
	ops = rt_model_find(s, err);
	if (!ops || ops->check(s, err))
		return dt_err_add(err, "%s: dtrain's %s cannot take this shape (V %ld, T %ld, L %ld, NH %ld, C %ld)%s",
				  src, strcmp(s->model.type, "gpt") ? "Llama" : "GPT", im->s.model.vocab_size, im->s.model.context, im->s.model.layers, im->s.model.heads,
				  im->s.model.embd, strcmp(s->model.type, "gpt") ? " (hint: --context sets a shorter context)" : ""),
		       -EINVAL;
	if (ops->config(s, &cfg) || cfg.len >= sizeof(im->config)) {
		dt_buf_free(&cfg);
		return dt_err_add(err, "%s: out of memory for the model's config", src), -ENOMEM;
	}
	memcpy(im->config, cfg.p, cfg.len + 1);
	dt_buf_free(&cfg);
	im->n_blocks = ops->blocks(s);
	rc = rt_ckpt_model_table(s, &im->t, &im->n, err);
	if (rc)
		return rc;
	for (int i = 0; i < im->n; i++) {
		size_t numel = 1;

		for (int d = 0; d < im->t[i].ndim; d++)
			numel *= (size_t)im->t[i].shape[d];
		if (im->t[i].offset + numel > off)
			off = im->t[i].offset + numel;
	}
	im->n_params = off;
	im->params = calloc(off ? off : 1, sizeof(float));
	if (!im->params) {
		dt_err_add(err, "%s: out of memory for %zu parameters", src, off);
		rc = -ENOMEM;
	}
	return rc;
}

const struct ckpt_tensor *rt_import_find(const struct rt_import *im, const char *name)
{
	for (int i = 0; i < im->n; i++)
		if (!strcmp(im->t[i].name, name))
			return &im->t[i];
	return NULL;
}

void rt_import_free(struct rt_import *im)
{
	free(im->t);
	free(im->params);
	memset(im, 0, sizeof(*im));
}

bool rt_import_head_tied(const struct spec_model *m)
{
	return !strcmp(m->type, "gpt") || (!strcmp(m->type, "llama") && m->tie_word_embeddings);
}

bool rt_hf_conv1d(const char *name)
{
	static const char *const conv1d[] = { ".attn.c_attn.weight", ".attn.c_proj.weight",
					      ".mlp.c_fc.weight", ".mlp.c_proj.weight" };
	size_t n = strlen(name);

	for (size_t i = 0; i < sizeof(conv1d) / sizeof(conv1d[0]); i++) {
		size_t m = strlen(conv1d[i]);

		if (n > m && !strcmp(name + n - m, conv1d[i]))
			return true;
	}
	return false;
}

void rt_transpose(const float *in, float *out, size_t rows, size_t cols)
{
	for (size_t r = 0; r < rows; r++)
		for (size_t c = 0; c < cols; c++)
			out[c * rows + r] = in[r * cols + c];
}

