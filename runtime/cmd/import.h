/*
 * import.h - GPT-2 weights from and to other programs' files, for
 * dtrain-ckpt (ckpt_main.c): `import` of a Hugging Face GPT-2
 * (model.safetensors + config.json, import_hf.c) or an llm.c checkpoint
 * (gpt2_124M.bin, import_llmc.c) into a dtrain checkpoint (import.c), and
 * `export --format safetensors` back (export_st.c).
 *
 * The names: dtrain's GPT (runtime/model/gpt.h) already uses nanoGPT's
 * names, which are Hugging Face's GPT2LMHeadModel's; what differs is the
 * layout of the four projections, which Hugging Face's Conv1D stores
 * [in][out] where dtrain (nn.Linear) stores [out][in] (rt_hf_conv1d), and
 * the head: Hugging Face ties lm_head.weight to transformer.wte.weight and
 * leaves it out of the file, dtrain keeps a copy (equal bits).
 */
#ifndef DTRAIN_RUNTIME_CMD_IMPORT_H
#define DTRAIN_RUNTIME_CMD_IMPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "checkpoint/ckpt.h"
#include "jobs/spec.h"

struct json_object;

/* A GPT being imported: its shape, dtrain's table of its tensors (offsets
 * into params) and the parameters. Zero-initialise; rt_import_free(). */
struct rt_import {
	long want_context;         /* in: --context, or 0 (import_hf_llama.c) */
	char family[32];           /* out: config.json's model_type ("gpt2", "llama") */
	struct spec s;             /* model.*: the model imported (a GPT's reader
				    * sets vocab_size, context, layers, heads, embd) */
	char config[CKPT_CONFIG_MAX]; /* the model's config, as dtrain-run writes it */
	int n_blocks;
	struct ckpt_tensor *t;     /* [n], owned */
	int n;
	float *params;             /* [n_params], owned */
	size_t n_params;
};

/* Builds the table of the model im->s.model describes (a GPT's reader
 * leaves its type NULL: "gpt") and allocates params (zeroed). 0, or
 * -EINVAL naming what dtrain's model refuses of that shape (src in the
 * message), -ENOMEM. */
int rt_import_table(struct rt_import *im, const char *src, struct dt_err *err);
/* The tensor of dtrain's name, or NULL. */
const struct ckpt_tensor *rt_import_find(const struct rt_import *im, const char *name);
void rt_import_free(struct rt_import *im);

/* The model's lm_head.weight is a copy of its embedding (a GPT's always,
 * a Llama's with tie_word_embeddings): Hugging Face's files leave it out. */
bool rt_import_head_tied(const struct spec_model *m);
/* Hugging Face stores this weight [in][out] (its Conv1D). */
bool rt_hf_conv1d(const char *name);
/* in [rows][cols] -> out [cols][rows] */
void rt_transpose(const float *in, float *out, size_t rows, size_t cols);

/* The readers: fill im (shape, table, parameters) from the file. 0, or
 * -EINVAL with a line naming the file and what is wrong (another
 * architecture, a missing or misshaped tensor, a truncated file, a header
 * that lies), -errno. */
int rt_import_hf(const char *safetensors, const char *config_json, struct rt_import *im,
		 struct dt_err *err);
int rt_import_llmc(const char *bin, struct rt_import *im, struct dt_err *err);
/* import_hf_llama.c: config (parsed, of model_type im->family) and the
 * weights, a .safetensors file or a model.safetensors.index.json; the
 * context im->want_context, or when 0 the default
 * (max_position_embeddings, at most 2048) */
int rt_import_hf_llama(const char *weights, struct json_object *config, const char *config_path,
		       struct rt_import *im, struct dt_err *err);

/* dtrain-ckpt import and export (export_st.c; --format h5 goes to the
 * checkpoint library's own export): argv from the command's name on;
 * each returns the program's exit code */
int rt_cmd_import(int argc, char **argv);
int rt_cmd_export(int argc, char **argv);

#endif
