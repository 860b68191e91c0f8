/*
 * import_hf.c - a Hugging Face model (config.json and its weights) into a
 * dtrain model (import.h): GPT-2 here, the Llama family in
 * import_hf_llama.c, by config.json's model_type.
 *
 * config.json must say GPT-2 as dtrain builds it: model_type "gpt2",
 * activation_function "gelu_new" (the tanh form), layer_norm_epsilon 1e-5,
 * n_inner null or 4 n_embd, tied embeddings, no cross-attention, attention
 * scaled by 1/sqrt(d) and not by layer. Tensors
 * are found under GPT2LMHeadModel's names ("transformer.h.0.ln_1.weight")
 * or GPT2Model's ("h.0.ln_1.weight"); the causal-mask buffers some files
 * carry (attn.bias, attn.masked_bias) are skipped; any other tensor means
 * another architecture and is refused, as is a shape that differs.
 *
 * Sections: the config, the tensors.
 */
#include "runtime/cmd/import.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "checkpoint/safetensors.h"

/* --- the config --- */

static int want_long(struct json_object *c, const char *key, const char *alt, long *v,
		     const char *path, struct dt_err *err)
{
	struct json_object *o = NULL;

	if (!json_object_object_get_ex(c, key, &o) && alt)
		json_object_object_get_ex(c, alt, &o);
	if (!o || !json_object_is_type(o, json_type_int) || json_object_get_int64(o) < 1)
		return dt_err_add(err, "%s: %s: expected a positive integer", path, key), -EINVAL;
	*v = (long)json_object_get_int64(o);
	return 0;
}

/* key absent, or equal to the string / number / boolean dtrain's GPT has */
static int want_same(struct json_object *c, const char *key, const char *str, double num,
		     int boolean, const char *path, struct dt_err *err)
{
	struct json_object *o;

	if (!json_object_object_get_ex(c, key, &o) || json_object_is_type(o, json_type_null))
		return 0;
	if (str && json_object_is_type(o, json_type_string) && !strcmp(json_object_get_string(o), str))
		return 0;
	if (!str && boolean < 0 && (json_object_is_type(o, json_type_double) || json_object_is_type(o, json_type_int)) &&
	    fabs(json_object_get_double(o) - num) <= 1e-12)
		return 0;
	if (boolean >= 0 && json_object_is_type(o, json_type_boolean) &&
	    json_object_get_boolean(o) == boolean)
		return 0;
	return dt_err_add(err, "%s: %s is %s; dtrain's GPT-2 has %s", path, key,
			  json_object_to_json_string(o),
			  str ? str : boolean >= 0 ? (boolean ? "true" : "false") : "1e-05"), -EINVAL;
}

/* config.json as a JSON object into *c (caller puts it) */
static int load_config(const char *path, struct json_object **c, struct dt_err *err)
{
	if (access(path, R_OK))
		return dt_err_add(err, "%s: %s (hint: --config names the model's config.json)", path,
				  strerror(errno)), -errno;
	*c = json_object_from_file(path);
	if (!*c || !json_object_is_type(*c, json_type_object))
		return dt_err_add(err, "%s: not a JSON object (hint: --config names the model's config.json)",
				  path), -EINVAL;
	return 0;
}

/* GPT-2's config (model_type "gpt2") */
static int read_config(struct json_object *c, const char *path, struct rt_import *im, struct dt_err *err)
{
	struct json_object *o;
	int rc;

	rc = want_long(c, "vocab_size", NULL, &im->s.model.vocab_size, path, err) ||
		     want_long(c, "n_positions", "n_ctx", &im->s.model.context, path, err) ||
		     want_long(c, "n_layer", NULL, &im->s.model.layers, path, err) ||
		     want_long(c, "n_head", NULL, &im->s.model.heads, path, err) ||
		     want_long(c, "n_embd", NULL, &im->s.model.embd, path, err) ? -EINVAL : 0;
	if (!rc)
		rc = want_same(c, "activation_function", "gelu_new", 0, -1, path, err) ||
		     want_same(c, "layer_norm_epsilon", NULL, 1e-5, -1, path, err) ||
		     want_same(c, "tie_word_embeddings", NULL, 0, 1, path, err) ||
		     want_same(c, "add_cross_attention", NULL, 0, 0, path, err) ||
		     want_same(c, "scale_attn_weights", NULL, 0, 1, path, err) ||
		     want_same(c, "scale_attn_by_inverse_layer_idx", NULL, 0, 0, path, err) ||
		     want_same(c, "reorder_and_upcast_attn", NULL, 0, 0, path, err) ? -EINVAL : 0;
	if (!rc && json_object_object_get_ex(c, "n_inner", &o) && !json_object_is_type(o, json_type_null) &&
	    json_object_get_int64(o) != 4 * im->s.model.embd)
		rc = (dt_err_add(err, "%s: n_inner is %s; dtrain's GPT-2 has 4 n_embd (%ld)", path,
				json_object_to_json_string(o), 4 * im->s.model.embd), -EINVAL);
	return rc;
}

/* --- the tensors --- */

/* the file's tensor for dtrain's name, under either model's name */
static const struct st_tensor *find(const struct st_file *f, const char *name)
{
	const struct st_tensor *t = st_find(f, name);

	if (!t && !strncmp(name, "transformer.", 12))
		t = st_find(f, name + 12);
	return t;
}

static bool skipped(const char *name)
{
	size_t n = strlen(name);

	return (n > 10 && !strcmp(name + n - 10, ".attn.bias")) ||
	       (n > 17 && !strcmp(name + n - 17, ".attn.masked_bias"));
}

/* dtrain's tensor c from the file's t: shape checked, Conv1D transposed */
static int take(const struct st_file *f, const struct st_tensor *t, const struct ckpt_tensor *c,
		float *dst, float *tmp, struct dt_err *err)
{
	bool conv = rt_hf_conv1d(c->name);
	int ok = t->ndim == c->ndim;

	for (int d = 0; ok && d < c->ndim; d++)
		ok = (int64_t)t->shape[d] == c->shape[conv ? c->ndim - 1 - d : d];
	if (!ok) {
		char want[64], got[64];
		int w = 0, g = 0;

		for (int d = 0; d < c->ndim; d++)
			w += snprintf(want + w, sizeof(want) - (size_t)w, "[%lld]",
				      (long long)c->shape[conv ? c->ndim - 1 - d : d]);
		for (int d = 0; d < t->ndim && g < 40; d++)
			g += snprintf(got + g, sizeof(got) - (size_t)g, "[%llu]",
				      (unsigned long long)t->shape[d]);
		return dt_err_add(err, "%s: %s: shape %s, where GPT-2 of this config.json has %s",
				  f->path, t->name, t->ndim ? got : "[]", want), -EINVAL;
	}
	if (!conv)
		return st_read_f32(f, t, dst, err);
	if (st_read_f32(f, t, tmp, err))
		return -EIO;
	rt_transpose(tmp, dst, (size_t)c->shape[1], (size_t)c->shape[0]);
	return 0;
}

static int check_unknown(const struct st_file *f, const struct rt_import *im, struct dt_err *err)
{
	char name[512];

	for (size_t i = 0; i < f->n; i++) {
		const char *n = f->t[i].name;

		snprintf(name, sizeof(name), "transformer.%s", n);
		if (!skipped(n) && !rt_import_find(im, n) && !rt_import_find(im, name))
			return dt_err_add(err, "%s: tensor \"%s\" is not GPT-2's (another architecture?)",
					  f->path, n), -EINVAL;
	}
	return 0;
}

static int read_tensors(const struct st_file *f, struct rt_import *im, struct dt_err *err)
{
	const struct ckpt_tensor *wte = rt_import_find(im, "transformer.wte.weight");
	size_t biggest = 0;
	float *tmp;
	int rc = check_unknown(f, im, err);

	for (int i = 0; i < im->n; i++)
		if (rt_hf_conv1d(im->t[i].name))
			biggest = (size_t)(im->t[i].shape[0] * im->t[i].shape[1]) > biggest
					  ? (size_t)(im->t[i].shape[0] * im->t[i].shape[1]) : biggest;
	tmp = malloc((biggest ? biggest : 1) * sizeof(float));
	if (!tmp)
		return dt_err_add(err, "%s: out of memory", f->path), -ENOMEM;
	for (int i = 0; !rc && i < im->n; i++) {
		const struct ckpt_tensor *c = &im->t[i];
		const struct st_tensor *t = find(f, c->name);
		bool head = !strcmp(c->name, "lm_head.weight");

		if (!t && head) /* tied: Hugging Face leaves it out */
			continue;
		if (!t)
			rc = (dt_err_add(err, "%s: no tensor \"%s\" (nor \"%s\"): not a whole GPT-2", f->path,
					c->name, c->name + (strncmp(c->name, "transformer.", 12) ? 0 : 12)), -EINVAL);
		else
			rc = take(f, t, c, im->params + c->offset, tmp, err);
		if (!rc && head && memcmp(im->params + c->offset, im->params + wte->offset,
					  (size_t)(c->shape[0] * c->shape[1]) * sizeof(float)))
			rc = (dt_err_add(err, "%s: lm_head.weight differs from transformer.wte.weight: dtrain's GPT-2 ties them",
					f->path), -EINVAL);
	}
	free(tmp);
	return rc;
}

/* GPT-2 from one safetensors file */
static int import_gpt2(const char *safetensors, struct json_object *c, const char *config_json,
		       struct rt_import *im, struct dt_err *err)
{
	struct st_file f = { 0 };
	const struct ckpt_tensor *wte, *head;
	size_t n = strlen(safetensors);
	int rc = read_config(c, config_json, im, err);

	if (!rc && n > 11 && !strcmp(safetensors + n - 11, ".index.json"))
		rc = (dt_err_add(err, "%s: a sharded GPT-2: dtrain imports GPT-2 from one model.safetensors", safetensors),
		      -EINVAL);
	if (!rc)
		rc = rt_import_table(im, config_json, err);
	if (!rc)
		rc = st_open(safetensors, &f, err);
	if (!rc)
		rc = read_tensors(&f, im, err);
	st_close(&f);
	if (rc)
		return rc;
	wte = rt_import_find(im, "transformer.wte.weight");
	head = rt_import_find(im, "lm_head.weight");
	memcpy(im->params + head->offset, im->params + wte->offset,
	       (size_t)(wte->shape[0] * wte->shape[1]) * sizeof(float));
	return 0;
}

int rt_import_hf(const char *weights, const char *config_json, struct rt_import *im,
		 struct dt_err *err)
{
	static const char *const llamas[] = { "llama", "mistral", "qwen2" };
	struct json_object *c = NULL, *o = NULL;
	const char *type;
	int rc = load_config(config_json, &c, err);

	if (!rc) {
		json_object_object_get_ex(c, "model_type", &o);
		type = o && json_object_is_type(o, json_type_string) ? json_object_get_string(o) : "";
		snprintf(im->family, sizeof(im->family), "%s", type);
		if (!strcmp(type, "gpt2")) {
			rc = import_gpt2(weights, c, config_json, im, err);
		} else {
			size_t k = 0;

			while (k < sizeof(llamas) / sizeof(llamas[0]) && strcmp(type, llamas[k]))
				k++;
			rc = k < sizeof(llamas) / sizeof(llamas[0])
				     ? rt_import_hf_llama(weights, c, config_json, im, err)
				     : (dt_err_add(err, "%s: model_type is %s: dtrain imports GPT-2 (\"gpt2\") and the Llama family (\"llama\", \"mistral\", \"qwen2\")",
						   config_json, o ? json_object_to_json_string(o) : "missing"), -EINVAL);
		}
	}
	json_object_put(c);
	return rc;
}
