/*
 * manifest.c - MANIFEST.json both ways: the text a commit writes, and the
 * strict parser every reader goes through.
 *
 * The manifest is the one file a reader trusts to tell it which other files
 * to open, so the parser treats it as hostile: every required key must be
 * present with the right JSON type and range, arrays are length-checked
 * before anything is copied, strings must fit their buffers, file names must
 * be exactly the names this module writes (never a path), and the model
 * hash is recomputed. Unknown keys are ignored (a later minor addition).
 * Messages name the file and the JSON path: "DIR/MANIFEST.json:
 * files[2].size: must be an integer (got a string)".
 *
 * Sections: emitting, value checks, parsing.
 */
#include "checkpoint/internal.h"

#include "base/json.h"
#include "base/buf.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#define MAX_COUNT ((int64_t)1 << 62) /* bound for steps, rows, sizes: no overflow downstream */
#define MAX_WIDTH 100000000         /* as ckpt_meta_finish */
#define MAX_DATA 65536              /* as ckpt_meta_finish */
#define NAME_MAX_LEN 160            /* a JSON path in a message */

/* --- emitting --- */

/* Collects the first allocation failure while a tree is built, so that the
 * builder reads as the schema. */
struct builder {
	int rc;
};

static void put(struct builder *b, json_object *obj, const char *key, json_object *v)
{
	if (!v || !obj || json_object_object_add(obj, key, v)) {
		json_object_put(v);
		b->rc = -ENOMEM;
	}
}

static void push(struct builder *b, json_object *arr, json_object *v)
{
	if (!v || !arr || json_object_array_add(arr, v)) {
		json_object_put(v);
		b->rc = -ENOMEM;
	}
}

static json_object *new_int(int64_t v)
{
	return json_object_new_int64(v);
}

/* A double that reads back bit for bit (%.17g), whatever json-c's default. */
static json_object *new_double(double v)
{
	char s[40];

	snprintf(s, sizeof(s), "%.17g", v);
	return json_object_new_double_s(v, s);
}

int ckpt__manifest_emit(const struct ckpt_meta *meta, const struct ckpt_tensor *tensors,
			int n_tensors, const struct ckpt_file *files, int n_files,
			struct dt_buf *out)
{
	struct builder b = { 0 };
	json_object *root = NULL, *o, *a, *f, *config;
	const char *text;
	char crc[16];
	int i, j;

	/* NaN or infinity would make invalid JSON; the caller checked the meta */
	if (!isfinite(meta->lr) || n_files < 0 || n_files > CKPT_MAX_FILES ||
	    meta->n_blocks < 1 || meta->n_blocks > CKPT_MAX_BLOCKS || meta->pipeline < 1 ||
	    meta->pipeline > CKPT_MAX_BLOCKS || meta->n_states < 0 ||
	    meta->n_states > CKPT_MAX_STATES || n_tensors < 1 || n_tensors > CKPT_MAX_TENSORS)
		return -EINVAL;
	config = json_tokener_parse(meta->model_config);
	if (!config || !json_object_is_type(config, json_type_object)) {
		json_object_put(config);
		return -EINVAL;
	}
	root = json_object_new_object();
	if (!root) {
		json_object_put(config);
		return -ENOMEM;
	}
	put(&b, root, "format", json_object_new_string(CKPT_FORMAT));
	put(&b, root, "format_version", new_int(CKPT_VERSION));
	put(&b, root, "step", new_int(meta->step));
	put(&b, root, "epoch", new_int(meta->epoch));
	put(&b, root, "epoch_step", new_int(meta->epoch_step));
	put(&b, root, "steps_per_epoch", new_int(meta->steps_per_epoch));
	put(&b, root, "total_steps", new_int(meta->total_steps));
	put(&b, root, "lr", new_double(meta->lr));

	o = json_object_new_object();
	put(&b, o, "seed", json_object_new_uint64(meta->rng_seed));
	put(&b, o, "stream", json_object_new_uint64(meta->rng_stream));
	put(&b, root, "rng", o);

	put(&b, root, "shuffle", json_object_new_boolean(meta->shuffle));
	put(&b, root, "global_batch", new_int(meta->global_batch));
	put(&b, root, "train_rows", new_int(meta->train_rows));

	o = json_object_new_object();
	put(&b, o, "type", json_object_new_string(meta->optimizer));
	put(&b, o, "step", new_int(meta->optimizer_step));
	a = json_object_new_array();
	for (i = 0; i < meta->n_states; i++)
		push(&b, a, json_object_new_string(meta->states[i]));
	put(&b, o, "states", a);
	put(&b, o, "shards", new_int(meta->optimizer_shards > 1 ? meta->optimizer_shards : 1));
	put(&b, root, "optimizer", o);

	o = json_object_new_object();
	put(&b, o, "type", json_object_new_string(meta->model_type));
	put(&b, o, "config", config);
	put(&b, o, "blocks", new_int(meta->n_blocks));
	put(&b, root, "model", o);

	put(&b, root, "spec_hash", json_object_new_string(meta->spec_hash));
	put(&b, root, "model_hash", json_object_new_string(meta->model_hash));

	o = json_object_new_object();
	put(&b, o, "data", new_int(meta->data));
	put(&b, o, "pipeline", new_int(meta->pipeline));
	a = json_object_new_array();
	for (i = 0; i <= meta->pipeline; i++)
		push(&b, a, new_int(meta->stage_first[i]));
	put(&b, o, "stage_first", a);
	put(&b, root, "layout", o);

	put(&b, root, "created", json_object_new_string(meta->created));
	put(&b, root, "job_id", json_object_new_string(meta->job_id));

	a = json_object_new_array();
	for (i = 0; i < n_tensors; i++) {
		json_object *shape = json_object_new_array();

		f = json_object_new_object();
		put(&b, f, "name", json_object_new_string(tensors[i].name));
		for (j = 0; j < tensors[i].ndim; j++)
			push(&b, shape, new_int(tensors[i].shape[j]));
		put(&b, f, "shape", shape);
		put(&b, f, "block", new_int(tensors[i].block));
		push(&b, a, f);
	}
	put(&b, root, "tensors", a);

	a = json_object_new_array();
	for (i = 0; i < n_files; i++) {
		f = json_object_new_object();
		snprintf(crc, sizeof(crc), "%08" PRIx32, files[i].crc);
		put(&b, f, "name", json_object_new_string(files[i].name));
		put(&b, f, "stage", new_int(files[i].stage));
		if (files[i].is_piece)
			put(&b, f, "piece", new_int(files[i].piece));
		put(&b, f, "size", new_int((int64_t)files[i].size));
		put(&b, f, "crc32", json_object_new_string(crc));
		push(&b, a, f);
	}
	put(&b, root, "files", a);

	if (!b.rc) {
		text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
								  JSON_C_TO_STRING_SPACED |
								  JSON_C_TO_STRING_NOSLASHESCAPE);
		if (!text || dt_buf_puts(out, text) || dt_buf_puts(out, "\n"))
			b.rc = -ENOMEM;
	}
	json_object_put(root);
	return b.rc;
}

/* --- value checks --- */

/* Where the value being checked is: the manifest's path and a JSON path. */
struct at {
	const char *path;
	struct dt_err *err;
};

/* "rng" + "seed" -> "rng.seed"; "" + "step" -> "step". */
static void join(char *out, const char *parent, const char *key)
{
	snprintf(out, NAME_MAX_LEN, "%s%s%s", parent, parent[0] ? "." : "", key);
}

/* The member key of obj (named parent) with the given type. */
static int member(const struct at *at, json_object *obj, const char *parent, const char *key,
		  json_type type, const char *what, json_object **v)
{
	char name[NAME_MAX_LEN];

	join(name, parent, key);
	if (!json_object_object_get_ex(obj, key, v) || !*v)
		return dt_err_add(at->err, "%s: %s: missing (must be %s)", at->path, name, what);
	if (!json_object_is_type(*v, type))
		return dt_err_add(at->err, "%s: %s: must be %s (got %s)", at->path, name, what,
				  dt_json_kind(*v));
	return 0;
}

/* An integer value v named name in min..max. json-c keeps integers above
 * INT64_MAX as unsigned; those are out of every range we accept here. */
static int int_value(const struct at *at, json_object *v, const char *name, int64_t min,
		     int64_t max, int64_t *out)
{
	int64_t x;

	if (!v || !json_object_is_type(v, json_type_int))
		return dt_err_add(at->err, "%s: %s: must be an integer (got %s)", at->path, name,
				  v ? dt_json_kind(v) : "null");
	x = json_object_get_int64(v);
	if (x < min || x > max || (x == INT64_MAX && json_object_get_uint64(v) != INT64_MAX))
		return dt_err_add(at->err, "%s: %s: must be %" PRId64 "..%" PRId64 " (got %s)",
				  at->path, name, min, max,
				  json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
	*out = x;
	return 0;
}

static int get_int(const struct at *at, json_object *obj, const char *parent, const char *key,
		   int64_t min, int64_t max, int64_t *out)
{
	char name[NAME_MAX_LEN];
	json_object *v;
	int rc = member(at, obj, parent, key, json_type_int, "an integer", &v);

	if (rc)
		return rc;
	join(name, parent, key);
	return int_value(at, v, name, min, max, out);
}

/* get_int into an int (min and max must fit one). */
static int get_small(const struct at *at, json_object *obj, const char *parent, const char *key,
		     int min, int max, int *out)
{
	int64_t x;
	int rc = get_int(at, obj, parent, key, min, max, &x);

	if (!rc)
		*out = (int)x;
	return rc;
}

/* A full-range unsigned 64-bit integer (the RNG's seed and stream). */
static int get_u64(const struct at *at, json_object *obj, const char *parent, const char *key,
		   uint64_t *out)
{
	char name[NAME_MAX_LEN];
	json_object *v;
	int rc = member(at, obj, parent, key, json_type_int, "an integer", &v);

	if (rc)
		return rc;
	/* json-c clamps integers beyond 64 bits to UINT64_MAX: refuse that too */
	if (json_object_get_int64(v) < 0 || json_object_get_uint64(v) == UINT64_MAX) {
		join(name, parent, key);
		return dt_err_add(at->err, "%s: %s: must be 0..2^64-2 (got %s)", at->path, name,
				  json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
	}
	*out = json_object_get_uint64(v);
	return 0;
}

static int get_double(const struct at *at, json_object *obj, const char *parent,
		      const char *key, double *out)
{
	char name[NAME_MAX_LEN];
	json_object *v;
	double x;

	join(name, parent, key);
	if (!json_object_object_get_ex(obj, key, &v) || !v)
		return dt_err_add(at->err, "%s: %s: missing (must be a number)", at->path, name);
	if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
		return dt_err_add(at->err, "%s: %s: must be a number (got %s)", at->path, name,
				  dt_json_kind(v));
	x = json_object_get_double(v);
	if (!isfinite(x) || x < 0)
		return dt_err_add(at->err, "%s: %s: must be a finite number >= 0", at->path, name);
	*out = x;
	return 0;
}

static int get_bool(const struct at *at, json_object *obj, const char *parent, const char *key,
		    bool *out)
{
	json_object *v;
	int rc = member(at, obj, parent, key, json_type_boolean, "true or false", &v);

	if (!rc)
		*out = json_object_get_boolean(v);
	return rc;
}

/* A string value v named name, copied into out[cap]: shorter than cap, no
 * NUL or control characters (it may be printed). */
static int str_value(const struct at *at, json_object *v, const char *name, char *out,
		     size_t cap)
{
	const char *s;
	size_t n, i;

	if (!v || !json_object_is_type(v, json_type_string))
		return dt_err_add(at->err, "%s: %s: must be a string (got %s)", at->path, name,
				  v ? dt_json_kind(v) : "null");
	s = json_object_get_string(v);
	n = (size_t)json_object_get_string_len(v);
	if (n >= cap)
		return dt_err_add(at->err, "%s: %s: too long (%zu bytes, at most %zu)", at->path,
				  name, n, cap - 1);
	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return dt_err_add(at->err, "%s: %s: must not contain control characters",
					  at->path, name);
	memcpy(out, s, n);
	out[n] = '\0';
	return 0;
}

static int get_str(const struct at *at, json_object *obj, const char *parent, const char *key,
		   char *out, size_t cap)
{
	char name[NAME_MAX_LEN];
	json_object *v;
	int rc = member(at, obj, parent, key, json_type_string, "a string", &v);

	if (rc)
		return rc;
	join(name, parent, key);
	return str_value(at, v, name, out, cap);
}

/* A time stamp as dtrain writes one, "2026-11-21T10:00:00Z" (UTC), or ""
 * (none known): informational, but shown to people and compared by them,
 * so nothing else is taken. */
static int get_created(const struct at *at, json_object *obj, char *out, size_t cap)
{
	static const char shape[] = "dddd-dd-ddTdd:dd:ddZ";
	struct tm tm, back;
	time_t t;
	size_t i;
	int rc = get_str(at, obj, "", "created", out, cap);

	if (rc || !out[0])
		return rc;
	for (i = 0; shape[i] && out[i]; i++)
		if (shape[i] == 'd' ? !isdigit((unsigned char)out[i]) : out[i] != shape[i])
			break;
	memset(&tm, 0, sizeof(tm));
	if (!shape[i] && !out[i] && strptime(out, "%Y-%m-%dT%H:%M:%SZ", &tm)) {
		back = tm;
		t = timegm(&back); /* normalises: 31 February comes back as March */
		gmtime_r(&t, &back);
	}
	if (shape[i] || out[i] || !strptime(out, "%Y-%m-%dT%H:%M:%SZ", &tm) ||
	    back.tm_year != tm.tm_year || back.tm_mon != tm.tm_mon || back.tm_mday != tm.tm_mday ||
	    back.tm_hour != tm.tm_hour || back.tm_min != tm.tm_min || back.tm_sec != tm.tm_sec)
		return dt_err_add(at->err, "%s: created: expected a UTC time like \"2026-11-21T10:00:00Z\" or \"\" (got \"%s\")",
				  at->path, out);
	return 0;
}

/* An array member with min..max elements. */
static int get_array(const struct at *at, json_object *obj, const char *parent, const char *key,
		     size_t min, size_t max, json_object **arr, size_t *n)
{
	char name[NAME_MAX_LEN];
	int rc = member(at, obj, parent, key, json_type_array, "an array", arr);

	if (rc)
		return rc;
	*n = json_object_array_length(*arr);
	if (*n < min || *n > max) {
		join(name, parent, key);
		return dt_err_add(at->err, "%s: %s: must have %zu..%zu elements (has %zu)", at->path,
				  name, min, max, *n);
	}
	return 0;
}

/* A 16-digit lower-case hex hash (ckpt_hash64). */
static int get_hash(const struct at *at, json_object *obj, const char *key, char out[17])
{
	size_t i;
	int rc = get_str(at, obj, "", key, out, 17);

	if (rc)
		return rc;
	for (i = 0; i < 16; i++)
		if (!isdigit((unsigned char)out[i]) && !(out[i] >= 'a' && out[i] <= 'f'))
			break;
	if (i != 16 || out[16] != '\0')
		return dt_err_add(at->err, "%s: %s: must be 16 lower-case hex digits", at->path, key);
	return 0;
}

/* --- parsing --- */

/* The text as one JSON object, nothing but white space after it. */
static int parse_text(const struct at *at, const char *text, json_object **out)
{
	json_tokener *tok;
	enum json_tokener_error jerr;
	json_object *obj;
	size_t len = strlen(text), off;

	*out = NULL;
	if (len > INT32_MAX)
		return dt_err_add(at->err, "%s: too large to be a manifest", at->path);
	tok = json_tokener_new_ex(32);
	if (!tok)
		return -ENOMEM;
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	obj = json_tokener_parse_ex(tok, text, (int)len);
	jerr = json_tokener_get_error(tok);
	off = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (jerr == json_tokener_success) {
		while (off < len && isspace((unsigned char)text[off]))
			off++;
		if (off < len)
			jerr = json_tokener_error_parse_unexpected;
	} else if (jerr == json_tokener_continue) {
		jerr = json_tokener_error_parse_eof;
	}
	if (jerr != json_tokener_success) {
		json_object_put(obj);
		return dt_err_add(at->err, "%s: invalid JSON at byte %zu: %s", at->path, off,
				  json_tokener_error_desc(jerr));
	}
	if (!json_object_is_type(obj, json_type_object)) {
		json_object_put(obj);
		return dt_err_add(at->err, "%s: not a dtrain checkpoint manifest (not a JSON object)",
				  at->path);
	}
	*out = obj;
	return 0;
}

/* "format" and "format_version", before anything else is believed. */
static int parse_format(const struct at *at, json_object *root, int *format_version)
{
	json_object *v;
	char shown[48];
	const char *s;
	int64_t version;
	size_t i;

	if (!json_object_object_get_ex(root, "format", &v) ||
	    !json_object_is_type(v, json_type_string))
		return dt_err_add(at->err, "%s: not a dtrain checkpoint (no \"format\" string)",
				  at->path);
	s = json_object_get_string(v);
	if (strcmp(s, CKPT_FORMAT) != 0 ||
	    (size_t)json_object_get_string_len(v) != strlen(CKPT_FORMAT)) {
		/* echo a printable prefix only: the text is not ours */
		snprintf(shown, sizeof(shown), "%.40s", s);
		for (i = 0; shown[i]; i++)
			if ((unsigned char)shown[i] < 0x20 || shown[i] == 0x7f || shown[i] == '"')
				shown[i] = '?';
		return dt_err_add(at->err, "%s: not a dtrain checkpoint (format \"%s\")", at->path,
				  shown);
	}
	if (get_int(at, root, "", "format_version", 1, INT64_MAX, &version))
		return -EINVAL;
	if (version > CKPT_VERSION)
		return dt_err_add(at->err,
				  "%s: format_version %" PRId64
				  " is newer than this dtrain reads (%d): use a newer dtrain",
				  at->path, version, CKPT_VERSION);
	*format_version = (int)version;
	return 0;
}

static int parse_optimizer(const struct at *at, json_object *root, struct ckpt_meta *meta)
{
	json_object *o, *arr;
	char name[NAME_MAX_LEN];
	size_t n, i;

	if (member(at, root, "", "optimizer", json_type_object, "an object", &o) ||
	    get_str(at, o, "optimizer", "type", meta->optimizer, sizeof(meta->optimizer)) ||
	    get_int(at, o, "optimizer", "step", 0, MAX_COUNT, &meta->optimizer_step) ||
	    get_array(at, o, "optimizer", "states", 0, CKPT_MAX_STATES, &arr, &n))
		return -EINVAL;
	meta->n_states = (int)n;
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "optimizer.states[%zu]", i);
		if (str_value(at, json_object_array_get_idx(arr, i), name, meta->states[i],
			      sizeof(meta->states[i])))
			return -EINVAL;
	}
	/* a sharded optimizer's pieces per stage; absent before there were */
	meta->optimizer_shards = 1;
	if (json_object_object_get_ex(o, "shards", NULL) &&
	    get_small(at, o, "optimizer", "shards", 1, MAX_DATA, &meta->optimizer_shards))
		return -EINVAL;
	return 0;
}

/* Format 1: an MLP of widths and an activation (ckpt.h says how it reads
 * as a model of blocks), its model_hash recomputed the way it was made. */
static int parse_model_v1(const struct at *at, json_object *root, const char *stored,
			  struct ckpt_manifest *m)
{
	struct ckpt_meta *meta = &m->meta;
	int64_t widths[CKPT_MAX_BLOCKS + 1];
	char name[NAME_MAX_LEN], act[16], hash[17];
	struct dt_buf h = { 0 }, c = { 0 };
	json_object *o, *arr;
	size_t n, i;
	int rc = 0;

	if (member(at, root, "", "model", json_type_object, "an object", &o) ||
	    get_array(at, o, "model", "widths", 2, CKPT_MAX_BLOCKS + 1, &arr, &n) ||
	    get_str(at, o, "model", "activation", act, sizeof(act)))
		return -EINVAL;
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "model.widths[%zu]", i);
		if (int_value(at, json_object_array_get_idx(arr, i), name, 1, MAX_WIDTH, &widths[i]))
			return -EINVAL;
	}
	for (i = 0; act[i]; i++)
		if (!((act[i] >= 'a' && act[i] <= 'z') || act[i] == '_'))
			return dt_err_add(at->err, "%s: checkpoint meta: activation must be a plain name",
					  at->path);
	for (i = 0; i < n && !rc; i++)
		rc = dt_buf_printf(&h, "%lld,", (long long)widths[i]);
	rc = rc || dt_buf_printf(&h, "%s", act);
	rc = rc || dt_buf_printf(&c, "{\"inputs\":%lld,\"hidden\":[", (long long)widths[0]);
	for (i = 1; i + 1 < n && !rc; i++)
		rc = dt_buf_printf(&c, "%s%lld", i > 1 ? "," : "", (long long)widths[i]);
	rc = rc || dt_buf_printf(&c, "],\"outputs\":%lld,\"activation\":\"%s\"}",
				 (long long)widths[n - 1], act);
	if (rc) {
		dt_err_add(at->err, "%s: out of memory", at->path);
		rc = -ENOMEM;
		goto out;
	}
	ckpt_hash64(h.p, h.len, hash);
	if (strcmp(stored, hash) != 0) {
		rc = dt_err_add(at->err,
				"%s: model_hash: %s does not match the model's widths and activation (%s): the manifest was edited or damaged",
				at->path, stored, hash);
		goto out;
	}
	if (c.len >= sizeof(meta->model_config)) {
		rc = dt_err_add(at->err, "%s: model: too many widths", at->path);
		goto out;
	}
	snprintf(meta->model_type, sizeof(meta->model_type), "mlp");
	memcpy(meta->model_config, c.p, c.len + 1);
	meta->n_blocks = (int)n - 1;
	/* layer l: "<2l>.weight" [out][in], "<2l>.bias" [out] (runtime/model/mlp.h) */
	m->n_tensors = 2 * meta->n_blocks;
	for (i = 0; i + 1 < n; i++) {
		struct ckpt_tensor *w = &m->tensors[2 * i], *b = w + 1;

		snprintf(w->name, sizeof(w->name), "%zu.weight", 2 * i);
		w->ndim = 2;
		w->shape[0] = widths[i + 1];
		w->shape[1] = widths[i];
		w->block = (int)i;
		snprintf(b->name, sizeof(b->name), "%zu.bias", 2 * i);
		b->ndim = 1;
		b->shape[0] = widths[i + 1];
		b->block = (int)i;
	}
out:
	dt_buf_free(&h);
	dt_buf_free(&c);
	return rc;
}

/* The model: its type, its config (kept as compact JSON, the form the
 * model hash is taken of), its blocks. */
static int parse_model(const struct at *at, json_object *root, struct ckpt_meta *meta)
{
	json_object *o, *config;
	const char *text;
	int64_t blocks;

	if (member(at, root, "", "model", json_type_object, "an object", &o) ||
	    get_str(at, o, "model", "type", meta->model_type, sizeof(meta->model_type)) ||
	    member(at, o, "model", "config", json_type_object, "an object", &config) ||
	    get_int(at, o, "model", "blocks", 1, CKPT_MAX_BLOCKS, &blocks))
		return -EINVAL;
	text = json_object_to_json_string_ext(config, JSON_C_TO_STRING_PLAIN |
							      JSON_C_TO_STRING_NOSLASHESCAPE);
	if (!text)
		return dt_err_add(at->err, "%s: out of memory", at->path), -ENOMEM;
	if (strlen(text) >= sizeof(meta->model_config))
		return dt_err_add(at->err, "%s: model.config: longer than %d bytes", at->path,
				  CKPT_CONFIG_MAX - 1);
	snprintf(meta->model_config, sizeof(meta->model_config), "%s", text);
	meta->n_blocks = (int)blocks;
	return 0;
}

/* The tensors: name, shape and block of each (checked as a whole by
 * ckpt_tensors_check once the meta is). */
static int parse_tensors(const struct at *at, json_object *root, struct ckpt_manifest *m)
{
	char where[48];
	json_object *arr, *t, *shape;
	size_t n, i, nd, j;
	int64_t x;

	if (get_array(at, root, "", "tensors", 1, CKPT_MAX_TENSORS, &arr, &n))
		return -EINVAL;
	for (i = 0; i < n; i++) {
		struct ckpt_tensor *ct = &m->tensors[i];

		snprintf(where, sizeof(where), "tensors[%zu]", i);
		t = json_object_array_get_idx(arr, i);
		if (!t || !json_object_is_type(t, json_type_object))
			return dt_err_add(at->err, "%s: %s: must be an object (got %s)", at->path,
					  where, t ? dt_json_kind(t) : "null");
		if (get_str(at, t, where, "name", ct->name, sizeof(ct->name)) ||
		    get_array(at, t, where, "shape", 1, CKPT_MAX_DIMS, &shape, &nd) ||
		    get_int(at, t, where, "block", 0, CKPT_MAX_BLOCKS - 1, &x))
			return -EINVAL;
		ct->block = (int)x;
		ct->ndim = (int)nd;
		for (j = 0; j < nd; j++) {
			char name[NAME_MAX_LEN];

			snprintf(name, sizeof(name), "%s.shape[%zu]", where, j);
			if (int_value(at, json_object_array_get_idx(shape, j), name, 1, 1000000000,
				      &ct->shape[j]))
				return -EINVAL;
		}
	}
	m->n_tensors = (int)n;
	return 0;
}

static int parse_layout(const struct at *at, json_object *root, struct ckpt_meta *meta)
{
	json_object *o, *arr;
	char name[NAME_MAX_LEN];
	int64_t x;
	size_t n, i;

	if (member(at, root, "", "layout", json_type_object, "an object", &o) ||
	    get_small(at, o, "layout", "data", 1, MAX_DATA, &meta->data) ||
	    get_small(at, o, "layout", "pipeline", 1, CKPT_MAX_BLOCKS, &meta->pipeline) ||
	    get_array(at, o, "layout", "stage_first", 2, CKPT_MAX_BLOCKS + 1, &arr, &n))
		return -EINVAL;
	if (n != (size_t)meta->pipeline + 1)
		return dt_err_add(at->err,
				  "%s: layout.stage_first: must have pipeline+1 = %d elements (has %zu)",
				  at->path, meta->pipeline + 1, n);
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "layout.stage_first[%zu]", i);
		if (int_value(at, json_object_array_get_idx(arr, i), name, 0, CKPT_MAX_BLOCKS, &x))
			return -EINVAL;
		meta->stage_first[i] = (int)x;
	}
	return 0;
}

/* The files: exactly the root, one shard per stage and, with a sharded
 * optimizer, its pieces of each stage, under the names this module
 * writes. Called after the layout is known. */
static int parse_files(const struct at *at, json_object *root, struct ckpt_manifest *m)
{
	bool seen[CKPT_MAX_FILES] = { false }; /* [slot]: root 0, shards, then pieces */
	char where[32], name[NAME_MAX_LEN], want[64], crc[16];
	int pipeline = m->meta.pipeline, shards = m->meta.optimizer_shards, slot;
	size_t count = (size_t)pipeline + 1 + (shards > 1 ? (size_t)pipeline * (size_t)shards : 0);
	json_object *arr, *f;
	size_t n, i, j;
	int64_t x;

	if (get_array(at, root, "", "files", count, count, &arr, &n))
		return -EINVAL;
	for (i = 0; i < n; i++) {
		struct ckpt_file *cf = &m->files[i];

		snprintf(where, sizeof(where), "files[%zu]", i);
		f = json_object_array_get_idx(arr, i);
		if (!f || !json_object_is_type(f, json_type_object))
			return dt_err_add(at->err, "%s: %s: must be an object (got %s)", at->path,
					  where, f ? dt_json_kind(f) : "null");
		if (get_str(at, f, where, "name", cf->name, sizeof(cf->name)) ||
		    get_int(at, f, where, "stage", -1, pipeline - 1, &x))
			return -EINVAL;
		cf->stage = (int)x;
		cf->is_piece = false;
		cf->piece = 0;
		if (json_object_object_get_ex(f, "piece", NULL)) {
			if (shards < 2 || cf->stage < 0)
				return dt_err_add(at->err, "%s: %s.piece: only a stage's optimizer pieces have one (optimizer.shards is %d)",
						  at->path, where, shards);
			if (get_int(at, f, where, "piece", 0, shards - 1, &x))
				return -EINVAL;
			cf->piece = (int)x;
			cf->is_piece = true;
		}
		if (cf->stage < 0) {
			snprintf(want, sizeof(want), "%s", CKPT_ROOT);
			slot = 0;
		} else if (!cf->is_piece) {
			ckpt_shard_name(cf->stage, want, sizeof(want));
			slot = 1 + cf->stage;
		} else {
			ckpt_piece_name(cf->stage, cf->piece, want, sizeof(want));
			slot = 1 + pipeline + cf->stage * shards + cf->piece;
		}
		if (strcmp(cf->name, want) != 0)
			return dt_err_add(at->err,
					  "%s: %s.name: stage %d's file must be named \"%s\" (a plain name written by dtrain)",
					  at->path, where, cf->stage, want);
		if (seen[slot])
			return dt_err_add(at->err, "%s: %s: \"%s\" is listed twice", at->path, where,
					  want);
		seen[slot] = true;
		if (get_int(at, f, where, "size", 0, MAX_COUNT, &x))
			return -EINVAL;
		cf->size = (uint64_t)x;
		if (get_str(at, f, where, "crc32", crc, sizeof(crc)))
			return -EINVAL;
		for (j = 0; j < 8; j++)
			if (!isxdigit((unsigned char)crc[j]))
				break;
		if (j != 8 || crc[8] != '\0') {
			join(name, where, "crc32");
			return dt_err_add(at->err, "%s: %s: must be 8 hex digits", at->path, name);
		}
		cf->crc = (uint32_t)strtoul(crc, NULL, 16);
	}
	/* n == count distinct slots: every file is there */
	m->n_files = (int)n;
	return 0;
}

int ckpt__manifest_parse(const char *text, const char *path, struct ckpt_manifest *m,
			 struct dt_err *err)
{
	struct at at = { path, err };
	struct ckpt_meta *meta = &m->meta;
	struct dt_err why = { 0 };
	json_object *root = NULL, *o;
	char stored[17];
	int rc;

	memset(m, 0, sizeof(*m));
	rc = parse_text(&at, text, &root);
	if (rc)
		goto out;
	rc = -EINVAL;
	if (parse_format(&at, root, &meta->format_version) ||
	    get_int(&at, root, "", "step", 0, MAX_COUNT, &meta->step) ||
	    get_int(&at, root, "", "epoch", 0, MAX_COUNT, &meta->epoch) ||
	    get_int(&at, root, "", "epoch_step", 0, MAX_COUNT, &meta->epoch_step) ||
	    get_int(&at, root, "", "steps_per_epoch", 1, MAX_COUNT, &meta->steps_per_epoch) ||
	    get_int(&at, root, "", "total_steps", 0, MAX_COUNT, &meta->total_steps) ||
	    get_double(&at, root, "", "lr", &meta->lr))
		goto out;
	if (member(&at, root, "", "rng", json_type_object, "an object", &o) ||
	    get_u64(&at, o, "rng", "seed", &meta->rng_seed) ||
	    get_u64(&at, o, "rng", "stream", &meta->rng_stream))
		goto out;
	if (get_bool(&at, root, "", "shuffle", &meta->shuffle) ||
	    get_int(&at, root, "", "global_batch", 1, MAX_COUNT, &meta->global_batch) ||
	    get_int(&at, root, "", "train_rows", 1, MAX_COUNT, &meta->train_rows) ||
	    parse_optimizer(&at, root, meta) ||
	    get_hash(&at, root, "spec_hash", meta->spec_hash) ||
	    get_hash(&at, root, "model_hash", stored) || parse_layout(&at, root, meta) ||
	    get_created(&at, root, meta->created, sizeof(meta->created)) ||
	    get_str(&at, root, "", "job_id", meta->job_id, sizeof(meta->job_id)))
		goto out;
	rc = meta->format_version == 1 ? parse_model_v1(&at, root, stored, m) :
		 parse_model(&at, root, meta) || parse_tensors(&at, root, m) ? -EINVAL : 0;
	if (rc)
		goto out;
	rc = -EINVAL;
	if (meta->pipeline > meta->n_blocks) {
		dt_err_add(err, "%s: layout.pipeline: must be 1..%d, the number of blocks (got %d)",
			   path, meta->n_blocks, meta->pipeline);
		goto out;
	}
	rc = ckpt_meta_finish(meta, &why);
	if (!rc)
		rc = ckpt_tensors_check(meta, m->tensors, m->n_tensors, &why);
	if (rc) {
		if (rc == -EINVAL)
			dt_err_add(err, "%s: %s", path, why.msg);
		goto out;
	}
	if (meta->format_version > 1 && strcmp(stored, meta->model_hash) != 0) {
		rc = dt_err_add(err,
				"%s: model_hash: %s does not match the model's type and config (%s): the manifest was edited or damaged",
				path, stored, meta->model_hash);
		goto out;
	}
	rc = parse_files(&at, root, m) ? -EINVAL : 0;
out:
	json_object_put(root);
	return rc;
}
