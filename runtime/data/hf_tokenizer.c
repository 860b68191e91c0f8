/*
 * hf_tokenizer.c - Hugging Face's tokenizer.json for the byte-level BPE
 * models (bpe.h): GPT-2's, Llama 3's, Qwen2's, SmolLM's. What is read, and
 * what refused by its JSON path:
 *
 *   model          type "BPE": vocab (token -> id), merges ("a b" strings,
 *                  or ["a", "b"] pairs as tokenizers 0.20 writes them),
 *                  ignore_merges. Refused: byte_fallback (a SentencePiece
 *                  model: Llama 2, TinyLlama), dropout, a subword prefix or
 *                  an end-of-word suffix; any other type.
 *   normalizer     none (null), or NFC (Qwen2's), as a check: a text
 *                  that NFC would change is refused at its byte offset
 *                  (rt_bpe_nfc_prefix); any other is refused.
 *   pre_tokenizer  GPT-2's ByteLevel with its own regex; a Split on Llama
 *                  3's or Qwen2's regex, then ByteLevel without one; Digits
 *                  one by one, then ByteLevel with GPT-2's (SmolLM); never
 *                  with add_prefix_space.
 *   added_tokens   each id and content, matched in a text before anything
 *                  else; lstrip, rstrip or single_word refused.
 *   post_processor none, ByteLevel (offsets only), TemplateProcessing
 *                  (its "single": special tokens around the text), or a
 *                  Sequence of those.
 *   decoder        none or ByteLevel.
 *
 * Sections: JSON helpers, the model, the pre-tokenizer, the added tokens,
 * the template, loading.
 */
#include "runtime/data/bpe.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "base/io.h"
#include "runtime/data/internal.h"

/* Hugging Face's regular expressions, as tokenizer.json spells them. */
static const char LLAMA3_REGEX[] =
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char QWEN2_REGEX[] =
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* A message in err for what dtrain does not read: -ENOTSUP. */
#define NOT_SUPPORTED(...) (dt_err_add(err, __VA_ARGS__), -ENOTSUP)

/* --- JSON helpers --- */

static struct json_object *get(struct json_object *o, const char *key)
{
	struct json_object *v = NULL;

	return o && json_object_is_type(o, json_type_object) && json_object_object_get_ex(o, key, &v) ?
		       v :
		       NULL;
}

/* o.key as a string, or NULL (absent, null, or not a string). */
static const char *str(struct json_object *o, const char *key)
{
	struct json_object *v = get(o, key);

	return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

/* o.key is true (a JSON true). */
static bool yes(struct json_object *o, const char *key)
{
	struct json_object *v = get(o, key);

	return v && json_object_is_type(v, json_type_boolean) && json_object_get_boolean(v);
}

/* o.key is absent or null. */
static bool none(struct json_object *o, const char *key)
{
	struct json_object *v = get(o, key);

	return !v || json_object_is_type(v, json_type_null);
}

/* --- the model --- */

/* One of model.merges: "a b", or ["a", "b"]; into *left and *right (owned
 * by m or by buf [size]). */
static int merge_pair(struct json_object *m, char *buf, size_t size, const char **left,
		      const char **right)
{
	const char *s;
	char *sp;

	if (json_object_is_type(m, json_type_array) && json_object_array_length(m) == 2 &&
	    json_object_is_type(json_object_array_get_idx(m, 0), json_type_string) &&
	    json_object_is_type(json_object_array_get_idx(m, 1), json_type_string)) {
		*left = json_object_get_string(json_object_array_get_idx(m, 0));
		*right = json_object_get_string(json_object_array_get_idx(m, 1));
		return 0;
	}
	if (!json_object_is_type(m, json_type_string) || strlen(s = json_object_get_string(m)) >= size)
		return -EINVAL;
	snprintf(buf, size, "%s", s);
	sp = strchr(buf, ' ');
	if (!sp || sp == buf || !sp[1] || strchr(sp + 1, ' '))
		return -EINVAL;
	*sp = '\0';
	*left = buf;
	*right = sp + 1;
	return 0;
}

static int load_merges(struct rt_bpe *b, struct json_object *model, const char *name,
		       struct dt_err *err)
{
	struct json_object *merges = get(model, "merges"), *vocab = get(model, "vocab");
	char buf[1024], where[4300];
	const char *l, *r;
	int32_t first;
	size_t n, i;
	int rc;

	if (!merges || !json_object_is_type(merges, json_type_array))
		return dt_err_add(err, "%s: model.merges: must be an array of merges", name);
	n = json_object_array_length(merges);
	if ((rc = rt__bpe_merges(b, n, name, err)))
		return rc;
	for (i = 0; i < n; i++) {
		snprintf(where, sizeof(where), "%s: model.merges[%zu]", name, i);
		if (merge_pair(json_object_array_get_idx(merges, i), buf, sizeof(buf), &l, &r))
			return dt_err_add(err, "%s: a merge is \"a b\" (two tokens, one space) or [\"a\", \"b\"]",
					  where);
		rc = rt__bpe_merge(b, vocab, l, r, (int32_t)i, &first, where, err);
		if (rc == -EEXIST)
			return dt_err_add(err, "%s: merge \"%.80s %.80s\" repeats model.merges[%d]", where,
					  l, r, (int)first);
		if (rc)
			return rc;
	}
	return 0;
}

/* model: a byte-level BPE's, checked; *vocab its vocabulary. */
static int check_model(struct json_object *model, struct json_object **vocab, const char *name,
		       struct dt_err *err)
{
	const char *type = str(model, "type");

	if (!type || strcmp(type, "BPE"))
		return NOT_SUPPORTED("%s: model.type: \"%s\": dtrain reads BPE tokenizers only",
				  name, type ? type : "(none)");
	if (yes(model, "byte_fallback"))
		return NOT_SUPPORTED("%s: model.byte_fallback: a SentencePiece-style tokenizer (Llama 2, TinyLlama, Mistral 7B v0.1): not supported, dtrain reads byte-level BPE (Llama 3, Qwen2, SmolLM, GPT-2)",
				  name);
	if (!none(model, "dropout") || !none(model, "continuing_subword_prefix") ||
	    !none(model, "end_of_word_suffix"))
		return NOT_SUPPORTED("%s: model: dropout, continuing_subword_prefix and end_of_word_suffix must be null",
				  name);
	*vocab = get(model, "vocab");
	if (!*vocab || !json_object_is_type(*vocab, json_type_object))
		return dt_err_add(err, "%s: model.vocab: must be an object of token -> id", name);
	return 0;
}

/* --- the pre-tokenizer --- */

/* A ByteLevel pre-tokenizer p, with or without its own regex. */
static bool byte_level(struct json_object *p, bool regex)
{
	const char *type = str(p, "type");

	return type && !strcmp(type, "ByteLevel") && !yes(p, "add_prefix_space") &&
	       yes(p, "use_regex") == regex;
}

/* A Split on a regex of its own (Isolated, not inverted): which one. */
static int split_regex(struct json_object *p, enum rt_bpe_pretok *how)
{
	const char *type = str(p, "type"), *re = str(get(p, "pattern"), "Regex"),
		   *behavior = str(p, "behavior");

	if (!type || strcmp(type, "Split") || !re || !behavior || strcmp(behavior, "Isolated") ||
	    yes(p, "invert"))
		return -EINVAL;
	if (!strcmp(re, LLAMA3_REGEX))
		*how = RT_PRETOK_LLAMA3;
	else if (!strcmp(re, QWEN2_REGEX))
		*how = RT_PRETOK_QWEN2;
	else
		return -ENOENT;
	return 0;
}

static int pre_tokenizer(struct json_object *root, enum rt_bpe_pretok *how, const char *name,
			 struct dt_err *err)
{
	struct json_object *p = get(root, "pre_tokenizer"), *list = get(p, "pretokenizers"), *a, *b;
	const char *type = str(p, "type");
	int rc;

	if (byte_level(p, true)) {
		*how = RT_PRETOK_GPT2;
		return 0;
	}
	if (type && !strcmp(type, "Sequence") && list && json_object_is_type(list, json_type_array) &&
	    json_object_array_length(list) == 2) {
		a = json_object_array_get_idx(list, 0);
		b = json_object_array_get_idx(list, 1);
		if (str(a, "type") && !strcmp(str(a, "type"), "Digits") && yes(a, "individual_digits") &&
		    byte_level(b, true)) {
			*how = RT_PRETOK_DIGITS_GPT2;
			return 0;
		}
		rc = split_regex(a, how);
		if (rc == -ENOENT)
			return NOT_SUPPORTED("%s: pre_tokenizer.pretokenizers[0].pattern.Regex: \"%.200s\" is not Llama 3's or Qwen2's: not supported",
					  name, str(get(a, "pattern"), "Regex"));
		if (!rc && byte_level(b, false))
			return 0;
	}
	return NOT_SUPPORTED("%s: pre_tokenizer: not one dtrain reads (GPT-2's ByteLevel; a Split on Llama 3's or Qwen2's regex then ByteLevel; Digits then ByteLevel, as SmolLM's; none with add_prefix_space)",
			  name);
}

/* --- the added tokens --- */

/* added_tokens into *out [*n] (malloc'd; contents owned by root). */
static int added_tokens(struct json_object *root, struct rt__bpe_added **out, int *n,
			const char *name, struct dt_err *err)
{
	struct json_object *list = get(root, "added_tokens"), *t, *id;
	size_t k, i;

	*out = NULL;
	*n = 0;
	if (none(root, "added_tokens"))
		return 0;
	if (!json_object_is_type(list, json_type_array))
		return dt_err_add(err, "%s: added_tokens: must be an array", name);
	k = json_object_array_length(list);
	if (!(*out = calloc(k + 1, sizeof(**out))))
		return dt_err_add(err, "%s: out of memory", name), -ENOMEM;
	for (i = 0; i < k; i++) {
		t = json_object_array_get_idx(list, i);
		id = get(t, "id");
		if (!id || !json_object_is_type(id, json_type_int) || !str(t, "content") ||
		    json_object_get_int64(id) > INT32_MAX)
			return dt_err_add(err, "%s: added_tokens[%zu]: needs an integer id and a string content",
					  name, i);
		if (yes(t, "lstrip") || yes(t, "rstrip") || yes(t, "single_word"))
			return NOT_SUPPORTED("%s: added_tokens[%zu] (\"%.80s\"): lstrip, rstrip and single_word are not supported",
					  name, i, str(t, "content"));
		(*out)[i] = (struct rt__bpe_added){ (int32_t)json_object_get_int64(id), str(t, "content") };
	}
	*n = (int)k;
	return 0;
}

/* --- the template --- */

/* The ids of special token key of a TemplateProcessing p, after r's. */
static int special_ids(struct json_object *p, const char *key, int32_t *ids, int *n,
		       const char *name, struct dt_err *err)
{
	struct json_object *list = get(get(get(p, "special_tokens"), key), "ids");
	size_t i, k = list && json_object_is_type(list, json_type_array) ?
			      json_object_array_length(list) :
			      0;

	if (!k)
		return dt_err_add(err, "%s: post_processor: special token \"%.80s\" has no ids in special_tokens",
				  name, key);
	for (i = 0; i < k; i++) {
		struct json_object *id = json_object_array_get_idx(list, i);

		if (*n >= RT_BPE_MAX_TEMPLATE || !json_object_is_type(id, json_type_int))
			return dt_err_add(err, "%s: post_processor: special token \"%.80s\": its ids must be at most %d integers",
					  name, key, RT_BPE_MAX_TEMPLATE);
		ids[(*n)++] = (int32_t)json_object_get_int64(id);
	}
	return 0;
}

/* A TemplateProcessing's "single": special tokens, the text ("Sequence"
 * A), special tokens. */
static int template_single(struct json_object *p, struct rt__bpe_rules *r, const char *name,
			   struct dt_err *err)
{
	struct json_object *single = get(p, "single"), *e, *sp;
	bool seen_text = false;
	size_t i, k;
	int rc;

	if (!single || !json_object_is_type(single, json_type_array))
		return dt_err_add(err, "%s: post_processor.single: must be an array", name);
	k = json_object_array_length(single);
	for (i = 0; i < k; i++) {
		e = json_object_array_get_idx(single, i);
		if (get(e, "Sequence")) {
			seen_text = true;
			continue;
		}
		if (!(sp = get(e, "SpecialToken")) || !str(sp, "id"))
			return dt_err_add(err, "%s: post_processor.single[%zu]: a SpecialToken or the Sequence",
					  name, i);
		rc = seen_text ? special_ids(p, str(sp, "id"), r->after, &r->n_after, name, err) :
				 special_ids(p, str(sp, "id"), r->before, &r->n_before, name, err);
		if (rc)
			return rc;
	}
	return 0;
}

/* One post-processor p (a Sequence's part, or the whole). */
static int post_one(struct json_object *p, struct rt__bpe_rules *r, const char *name,
		    struct dt_err *err)
{
	const char *type = str(p, "type");

	if (!p || json_object_is_type(p, json_type_null) || (type && !strcmp(type, "ByteLevel")))
		return 0;
	if (type && !strcmp(type, "TemplateProcessing"))
		return template_single(p, r, name, err);
	return NOT_SUPPORTED("%s: post_processor: type \"%s\" is not supported (ByteLevel, TemplateProcessing or a Sequence of them)",
			  name, type ? type : "(none)");
}

static int post_processor(struct json_object *root, struct rt__bpe_rules *r, const char *name,
			  struct dt_err *err)
{
	struct json_object *p = get(root, "post_processor"), *list = get(p, "processors");
	const char *type = str(p, "type");
	size_t i;
	int rc = 0;

	if (!type || strcmp(type, "Sequence"))
		return post_one(p, r, name, err);
	if (!list || !json_object_is_type(list, json_type_array))
		return dt_err_add(err, "%s: post_processor.processors: must be an array", name);
	for (i = 0; i < json_object_array_length(list) && !rc; i++)
		rc = post_one(json_object_array_get_idx(list, i), r, name, err);
	return rc;
}

/* --- loading --- */

/* The normalizer and the decoder. */
static int check_rest(struct json_object *root, struct rt__bpe_rules *r, const char *name,
		      struct dt_err *err)
{
	const char *dec = str(get(root, "decoder"), "type"), *norm = str(get(root, "normalizer"), "type");

	r->nfc = norm && !strcmp(norm, "NFC");
	if (!none(root, "normalizer") && !r->nfc)
		return NOT_SUPPORTED("%s: normalizer: \"%s\" is not supported (none is, as Llama 3's, SmolLM's and GPT-2's; and NFC, Qwen2's)",
				  name, norm ? norm : "?");
	if (!none(root, "decoder") && (!dec || strcmp(dec, "ByteLevel")))
		return NOT_SUPPORTED("%s: decoder: \"%s\" is not supported (ByteLevel is)", name,
				  dec ? dec : "?");
	return 0;
}

int rt_bpe_load_hf_mem(struct rt_bpe **out, const char *json, size_t len, const char *name,
		       struct dt_err *err)
{
	const struct rt_bpe_files f = { RT_BPE_HF_NAME, 1, { "tokenizer.json", NULL }, { json, NULL },
					{ len, 0 } };
	struct rt__bpe_rules rules = { 0 };
	struct json_object *root = NULL, *model, *vocab = NULL;
	struct rt__bpe_added *added = NULL;
	struct rt_bpe *b = NULL;
	int n_added = 0, rc;

	*out = NULL;
	if ((rc = rt__bpe_parse(json, len, 16, name, "a JSON object (a tokenizer.json)", &root, err)))
		return rc;
	model = get(root, "model");
	if ((rc = check_model(model, &vocab, name, err)) || (rc = check_rest(root, &rules, name, err)) ||
	    (rc = pre_tokenizer(root, &rules.pretok, name, err)) ||
	    (rc = post_processor(root, &rules, name, err)) ||
	    (rc = added_tokens(root, &added, &n_added, name, err)) || (rc = rt__bpe_new(&b, &f, err)) ||
	    (rc = rt__bpe_vocab(b, vocab, added, n_added, name, err)) ||
	    (rc = load_merges(b, model, name, err)))
		goto out;
	rules.ignore_merges = yes(model, "ignore_merges");
	rc = rt__bpe_rules(b, &rules, name, err);
out:
	free(added);
	json_object_put(root);
	if (rc)
		rt_bpe_free(b);
	else
		*out = b;
	return rc;
}

int rt_bpe_load_hf(struct rt_bpe **out, const char *tokenizer_json, struct dt_err *err)
{
	char *json = NULL;
	size_t len = 0;
	int rc;

	*out = NULL;
	if ((rc = dt_read_file(tokenizer_json, &json, &len)))
		return dt_err_add(err, "%s: cannot read: %s", tokenizer_json, strerror(-rc)), rc;
	rc = rt_bpe_load_hf_mem(out, json, len, tokenizer_json, err);
	free(json);
	return rc;
}
