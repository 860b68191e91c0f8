/*
 * import_hf_llama.c - a Hugging Face model of the Llama family (Llama,
 * Mistral, Qwen2: config.json's model_type "llama", "mistral" or "qwen2")
 * into dtrain's Llama (runtime/model/llama.h; import.h).
 *
 * The config's keys become the model's (hidden_size -> embd,
 * num_key_value_heads -> kv_heads, rope_scaling of rope_type "llama3" ->
 * model.rope_scaling, Qwen2's q/k/v biases -> qkv_bias); what dtrain's Llama
 * does not compute is refused, naming the key: an activation other than
 * SiLU, biases on o_proj or the MLP (attention_bias, mlp_bias), another
 * head_dim, another rope_scaling, a sliding window shorter than the
 * context. The context is max_position_embeddings, at most 2048 unless
 * --context says otherwise: no tensor depends on it (the rotary embeddings
 * have none), a run's model.context sets its own.
 *
 * The weights: one model.safetensors or the shards that
 * model.safetensors.index.json lists, float32, float16 or bfloat16 (widened
 * exactly), read tensor by tensor into dtrain's table (the same names, the
 * same [out][in] layout): memory is the float32 model and one shard's
 * header. A missing or misshaped tensor, or one that is not the model's
 * (another architecture), is refused; the rotary buffers some files carry
 * (rotary_emb.inv_freq) are skipped. A tied head (tie_word_embeddings) is
 * the embedding: a file may leave lm_head.weight out, or hold the same.
 *
 * Sections: the config, the files, the tensors.
 */
#include "runtime/cmd/import.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "checkpoint/safetensors.h"

#define DEFAULT_CONTEXT 2048

/* --- the config --- */

/* config key as a positive integer into *v; absent: dflt (0: required) */
static int get_long(struct json_object *c, const char *key, long dflt, long *v, const char *path,
		    struct dt_err *err)
{
	struct json_object *o;

	if (!json_object_object_get_ex(c, key, &o) || json_object_is_type(o, json_type_null)) {
		if (!dflt)
			return dt_err_add(err, "%s: %s: missing (a positive integer)", path, key), -EINVAL;
		*v = dflt;
		return 0;
	}
	if (!json_object_is_type(o, json_type_int) || json_object_get_int64(o) < 1)
		return dt_err_add(err, "%s: %s: expected a positive integer (got %s)", path, key,
				  json_object_to_json_string(o)), -EINVAL;
	*v = (long)json_object_get_int64(o);
	return 0;
}

static int get_double(struct json_object *c, const char *key, double dflt, double *v, const char *path,
		      struct dt_err *err)
{
	struct json_object *o;

	if (!json_object_object_get_ex(c, key, &o) || json_object_is_type(o, json_type_null)) {
		*v = dflt;
		return 0;
	}
	if (!json_object_is_type(o, json_type_double) && !json_object_is_type(o, json_type_int))
		return dt_err_add(err, "%s: %s: expected a number (got %s)", path, key,
				  json_object_to_json_string(o)), -EINVAL;
	*v = json_object_get_double(o);
	return 0;
}

static bool get_bool(struct json_object *c, const char *key, bool dflt)
{
	struct json_object *o;

	if (!json_object_object_get_ex(c, key, &o) || !json_object_is_type(o, json_type_boolean))
		return dflt;
	return json_object_get_boolean(o);
}

/* rope_scaling: null, "default", or Llama 3.1's "llama3" with its fields */
static int read_rope_scaling(struct json_object *c, struct spec_model *m, const char *path,
			     struct dt_err *err)
{
	struct json_object *r, *t = NULL;
	const char *type;
	int rc = 0;

	m->rope_scaling.rope_type = (char *)"default";
	if (!json_object_object_get_ex(c, "rope_scaling", &r) || json_object_is_type(r, json_type_null))
		return 0;
	if (!json_object_object_get_ex(r, "rope_type", &t))
		json_object_object_get_ex(r, "type", &t);
	type = t && json_object_is_type(t, json_type_string) ? json_object_get_string(t) : "";
	if (!strcmp(type, "default"))
		return 0;
	if (strcmp(type, "llama3"))
		return dt_err_add(err, "%s: rope_scaling %s: dtrain's Llama computes rope_type \"llama3\" or none", path,
				  json_object_to_json_string(r)), -EINVAL;
	m->rope_scaling.rope_type = (char *)"llama3";
	rc = get_double(r, "factor", 8, &m->rope_scaling.factor, path, err) ||
	     get_double(r, "low_freq_factor", 1, &m->rope_scaling.low_freq_factor, path, err) ||
	     get_double(r, "high_freq_factor", 4, &m->rope_scaling.high_freq_factor, path, err) ||
	     get_long(r, "original_max_position_embeddings", 8192,
		      &m->rope_scaling.original_max_position_embeddings, path, err);
	return rc ? -EINVAL : 0;
}

/* what the config asks for that dtrain's Llama does not compute */
static int refuse_unsupported(struct json_object *c, const char *type, long positions, long C,
			      long NH, const char *path, struct dt_err *err)
{
	struct json_object *o;
	long window = 0;

	if (json_object_object_get_ex(c, "hidden_act", &o) && json_object_is_type(o, json_type_string) &&
	    strcmp(json_object_get_string(o), "silu"))
		return dt_err_add(err, "%s: hidden_act is \"%s\"; dtrain's Llama has \"silu\" (SwiGLU)", path,
				  json_object_get_string(o)), -EINVAL;
	if (get_bool(c, "attention_bias", false) || get_bool(c, "mlp_bias", false))
		return dt_err_add(err, "%s: %s is true; dtrain's Llama has biases on q, k and v only (Qwen2's)", path,
				  get_bool(c, "attention_bias", false) ? "attention_bias" : "mlp_bias"), -EINVAL;
	if (json_object_object_get_ex(c, "head_dim", &o) && !json_object_is_type(o, json_type_null) &&
	    json_object_get_int64(o) != C / NH)
		return dt_err_add(err, "%s: head_dim is %s; dtrain's Llama has hidden_size / num_attention_heads (%ld)",
				  path, json_object_to_json_string(o), C / NH), -EINVAL;
	if (!strcmp(type, "qwen2") && !get_bool(c, "use_sliding_window", false))
		return 0; /* Qwen2's sliding_window is unused then */
	if (json_object_object_get_ex(c, "sliding_window", &o) && json_object_is_type(o, json_type_int))
		window = (long)json_object_get_int64(o);
	if (window > 0 && window < positions)
		return dt_err_add(err, "%s: sliding_window is %ld, shorter than max_position_embeddings (%ld); dtrain's Llama attends to the whole context",
				  path, window, positions), -EINVAL;
	return 0;
}

/* config.json (of model_type im->family) into im->s.model, its context
 * im->want_context's when not 0 */
static int read_config(struct json_object *c, struct rt_import *im, const char *path,
		       struct dt_err *err)
{
	struct spec_model *m = &im->s.model;
	const char *type = im->family;
	long context = im->want_context;
	long positions = 0;
	int rc;

	m->type = (char *)"llama";
	rc = get_long(c, "vocab_size", 0, &m->vocab_size, path, err) ||
	     get_long(c, "hidden_size", 0, &m->embd, path, err) ||
	     get_long(c, "num_hidden_layers", 0, &m->layers, path, err) ||
	     get_long(c, "num_attention_heads", 0, &m->heads, path, err) ||
	     get_long(c, "intermediate_size", 0, &m->intermediate_size, path, err) ||
	     get_long(c, "max_position_embeddings", 0, &positions, path, err) ? -EINVAL : 0;
	if (!rc)
		rc = get_long(c, "num_key_value_heads", m->heads, &m->kv_heads, path, err) ||
		     get_double(c, "rope_theta", 10000, &m->rope_theta, path, err) ||
		     get_double(c, "rms_norm_eps", 1e-6, &m->rms_norm_eps, path, err) ||
		     read_rope_scaling(c, m, path, err) ||
		     refuse_unsupported(c, type, positions, m->embd, m->heads, path, err) ? -EINVAL : 0;
	if (rc)
		return rc;
	m->tie_word_embeddings = get_bool(c, "tie_word_embeddings", false);
	m->qkv_bias = !strcmp(type, "qwen2");
	m->context = context ? context : positions < DEFAULT_CONTEXT ? positions : DEFAULT_CONTEXT;
	return 0;
}

/* --- the files --- */

/* The weights' files: one, or the shards of an index (each once). */
struct shards {
	struct st_file *f;
	int n;
};

static void shards_close(struct shards *sh)
{
	for (int i = 0; i < sh->n; i++)
		st_close(&sh->f[i]);
	free(sh->f);
	sh->f = NULL;
	sh->n = 0;
}

static int shard_add(struct shards *sh, const char *path, struct dt_err *err)
{
	struct st_file *grown = realloc(sh->f, (size_t)(sh->n + 1) * sizeof(*grown));

	if (!grown)
		return dt_err_add(err, "%s: out of memory", path), -ENOMEM;
	sh->f = grown;
	memset(&sh->f[sh->n], 0, sizeof(sh->f[sh->n]));
	sh->n++;
	return st_open(path, &sh->f[sh->n - 1], err);
}

/* model.safetensors.index.json's weight_map: its files, beside it */
static int open_index(const char *index, struct shards *sh, struct dt_err *err)
{
	struct json_object *j = json_object_from_file(index), *map;
	const char *slash = strrchr(index, '/');
	int rc = 0;

	if (!j || !json_object_object_get_ex(j, "weight_map", &map) ||
	    !json_object_is_type(map, json_type_object)) {
		json_object_put(j);
		return dt_err_add(err, "%s: not a safetensors index (no \"weight_map\" object)", index), -EINVAL;
	}
	json_object_object_foreach(map, name, file) {
		char path[4300];
		bool seen = false;

		if (!json_object_is_type(file, json_type_string) || strchr(json_object_get_string(file), '/')) {
			rc = (dt_err_add(err, "%s: weight_map.%s: expected a file name beside the index", index, name),
			      -EINVAL);
			break;
		}
		snprintf(path, sizeof(path), "%.*s%s", slash ? (int)(slash - index + 1) : 0, index,
			 json_object_get_string(file));
		for (int i = 0; i < sh->n && !seen; i++)
			seen = !strcmp(sh->f[i].path, path);
		if (!seen && (rc = shard_add(sh, path, err)))
			break;
	}
	json_object_put(j);
	return rc;
}

static const struct st_tensor *shard_find(const struct shards *sh, const char *name,
					  const struct st_file **in)
{
	for (int i = 0; i < sh->n; i++) {
		const struct st_tensor *t = st_find(&sh->f[i], name);

		if (t) {
			*in = &sh->f[i];
			return t;
		}
	}
	return NULL;
}

/* --- the tensors --- */

static bool skipped(const char *name)
{
	size_t n = strlen(name);

	return n > 21 && !strcmp(name + n - 21, ".rotary_emb.inv_freq");
}

static int check_unknown(const struct shards *sh, const struct rt_import *im, struct dt_err *err)
{
	for (int i = 0; i < sh->n; i++)
		for (size_t k = 0; k < sh->f[i].n; k++) {
			const char *n = sh->f[i].t[k].name;

			if (!skipped(n) && !rt_import_find(im, n))
				return dt_err_add(err, "%s: tensor \"%s\" is not this Llama's (another architecture, or a config.json that does not match?)",
						  sh->f[i].path, n), -EINVAL;
		}
	return 0;
}

/* dtrain's tensor c from the file's t, its shape checked */
static int take(const struct st_file *f, const struct st_tensor *t, const struct ckpt_tensor *c,
		float *dst, struct dt_err *err)
{
	int ok = t->ndim == c->ndim;

	for (int d = 0; ok && d < c->ndim; d++)
		ok = (int64_t)t->shape[d] == c->shape[d];
	if (!ok) {
		char want[64] = "", got[64] = "";
		int w = 0, g = 0;

		for (int d = 0; d < c->ndim && w < 40; d++)
			w += snprintf(want + w, sizeof(want) - (size_t)w, "[%lld]", (long long)c->shape[d]);
		for (int d = 0; d < t->ndim && g < 40; d++)
			g += snprintf(got + g, sizeof(got) - (size_t)g, "[%llu]", (unsigned long long)t->shape[d]);
		return dt_err_add(err, "%s: %s: shape %s, where the model of its config.json has %s", f->path,
				  t->name, t->ndim ? got : "[]", want), -EINVAL;
	}
	return st_read_f32(f, t, dst, err);
}

static int read_tensors(const struct shards *sh, struct rt_import *im, const char *src, struct dt_err *err)
{
	const struct ckpt_tensor *emb = rt_import_find(im, "model.embed_tokens.weight");
	bool tied = im->s.model.tie_word_embeddings;
	int rc = check_unknown(sh, im, err);

	for (int i = 0; !rc && i < im->n; i++) {
		const struct ckpt_tensor *c = &im->t[i];
		const struct st_file *f = NULL;
		const struct st_tensor *t = shard_find(sh, c->name, &f);
		bool head = !strcmp(c->name, "lm_head.weight");

		if (!t && head && tied) { /* the embedding, copied below */
			memcpy(im->params + c->offset, im->params + emb->offset,
			       ckpt_tensor_floats(c) * sizeof(float));
			continue;
		}
		if (!t)
			rc = (dt_err_add(err, "%s: no tensor \"%s\"%s", src, c->name,
					 head ? " (tie_word_embeddings is false: the head is a tensor of its own)"
					      : ": not a whole model of its config.json"), -EINVAL);
		else
			rc = take(f, t, c, im->params + c->offset, err);
		if (!rc && head && tied &&
		    memcmp(im->params + c->offset, im->params + emb->offset, ckpt_tensor_floats(c) * sizeof(float)))
			rc = (dt_err_add(err, "%s: lm_head.weight differs from model.embed_tokens.weight, but tie_word_embeddings is true",
					 f->path), -EINVAL);
	}
	return rc;
}

int rt_import_hf_llama(const char *weights, struct json_object *config, const char *config_path,
		       struct rt_import *im, struct dt_err *err)
{
	struct shards sh = { 0 };
	size_t n = strlen(weights);
	int rc = read_config(config, im, config_path, err);

	if (!rc)
		rc = rt_import_table(im, config_path, err);
	if (!rc)
		rc = n > 11 && !strcmp(weights + n - 11, ".index.json") ? open_index(weights, &sh, err)
									: shard_add(&sh, weights, err);
	if (!rc)
		rc = read_tensors(&sh, im, weights, err);
	shards_close(&sh);
	return rc;
}
