/*
 * tmodel.h - the model the checkpoint tests write: an MLP of widths w[0..L]
 * described as runtime/model/mlp.h describes it to checkpoints (type "mlp", its
 * compact config, layer l = block l with "<2l>.weight" [out][in] and
 * "<2l>.bias" [out]), so that a format-1 checkpoint of the same widths
 * reads as the same model.
 */
#ifndef DTRAIN_TESTS_CHECKPOINT_TMODEL_H
#define DTRAIN_TESTS_CHECKPOINT_TMODEL_H

#include <stdio.h>
#include <string.h>

#include "checkpoint/ckpt.h"

/* meta's model fields for widths [layers + 1] and an activation. */
static inline void tm_model(struct ckpt_meta *m, const int64_t *widths, int layers, const char *act)
{
	int l, at;

	snprintf(m->model_type, sizeof(m->model_type), "mlp");
	at = snprintf(m->model_config, sizeof(m->model_config), "{\"inputs\":%lld,\"hidden\":[",
		      (long long)widths[0]);
	for (l = 1; l < layers; l++)
		at += snprintf(m->model_config + at, sizeof(m->model_config) - (size_t)at, "%s%lld",
			       l > 1 ? "," : "", (long long)widths[l]);
	snprintf(m->model_config + at, sizeof(m->model_config) - (size_t)at,
		 "],\"outputs\":%lld,\"activation\":\"%s\"}", (long long)widths[layers], act);
	m->n_blocks = layers;
	m->format_version = CKPT_VERSION;
}

/* The tensors of layers [first, last) into t (2 per layer), offsets from
 * the first one's start; returns how many. */
static inline int tm_tensors(const int64_t *widths, int first, int last, struct ckpt_tensor *t)
{
	size_t off = 0;
	int l, n = 0;

	for (l = first; l < last; l++) {
		struct ckpt_tensor *w = &t[n++], *b = &t[n++];

		memset(w, 0, 2 * sizeof(*w));
		snprintf(w->name, sizeof(w->name), "%d.weight", 2 * l);
		w->ndim = 2;
		w->shape[0] = widths[l + 1];
		w->shape[1] = widths[l];
		w->block = l;
		w->offset = off;
		off += (size_t)(widths[l + 1] * widths[l]);
		snprintf(b->name, sizeof(b->name), "%d.bias", 2 * l);
		b->ndim = 1;
		b->shape[0] = widths[l + 1];
		b->block = l;
		b->offset = off;
		off += (size_t)widths[l + 1];
	}
	return n;
}

/* Floats of layers [first, last). */
static inline size_t tm_floats(const int64_t *widths, int first, int last)
{
	size_t n = 0;
	int l;

	for (l = first; l < last; l++)
		n += (size_t)(widths[l + 1] * widths[l] + widths[l + 1]);
	return n;
}

#endif
