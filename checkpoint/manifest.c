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
 * Sections: emitting, value checks, parsing: the text, the meta's fields
 * (the table in common.c drives both ways), the model, tensors and files.
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

#define MAX_WIDTH 100000000         /* as ckpt_meta_finish */
#define NAME_MAX_LEN 160            /* a JSON path in a message */

/* --- emitting --- */

/* Collects the first failure while a tree is built (out of memory, or a
 * model config that is not a JSON object), so that the builder reads as
 * the schema. */
struct builder {
	int rc;
};

static void fail(struct builder *b, int rc)
{
	if (!b->rc)
		b->rc = rc;
}

static void put(struct builder *b, json_object *obj, const char *key, json_object *v)
{
	if (!v || !obj || json_object_object_add(obj, key, v)) {
		json_object_put(v);
		fail(b, -ENOMEM);
	}
}

static void push(struct builder *b, json_object *arr, json_object *v)
{
	if (!v || !arr || json_object_array_add(arr, v)) {
		json_object_put(v);
		fail(b, -ENOMEM);
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

/* "rng.seed": parent "rng", returns "seed"; "step": parent "", "step". */
static const char *split_path(const char *path, char parent[NAME_MAX_LEN])
{
	const char *dot = strchr(path, '.');

	parent[0] = '\0';
	if (!dot)
		return path;
	snprintf(parent, NAME_MAX_LEN, "%.*s", (int)(dot - path), path);
	return dot + 1;
}

/* One field of the meta's table as JSON (its kind says how: internal.h);
 * NULL when it cannot be made. */
static json_object *field_value(struct builder *b, const struct ckpt__field *f,
				const struct ckpt_meta *meta)
{
	const char *p = (const char *)meta + f->offset;
	json_object *v;
	int i;

	switch (f->kind) {
	case CKPT__VERSION:
	case CKPT__I64:
	case CKPT__INT:
		return new_int(ckpt__meta_int(f, meta));
	case CKPT__U64:
		return json_object_new_uint64(*(const uint64_t *)p);
	case CKPT__NUM:
		return new_double(*(const double *)p);
	case CKPT__BOOL:
		return json_object_new_boolean(*(const bool *)p);
	case CKPT__STATES:
		v = json_object_new_array();
		for (i = 0; i < meta->n_states; i++)
			push(b, v, json_object_new_string(meta->states[i]));
		return v;
	case CKPT__STAGES:
		v = json_object_new_array();
		for (i = 0; i <= meta->pipeline; i++)
			push(b, v, new_int(meta->stage_first[i]));
		return v;
	case CKPT__CONFIG:
		v = json_tokener_parse(p);
		if (!v || !json_object_is_type(v, json_type_object)) {
			json_object_put(v);
			fail(b, -EINVAL);
			return NULL;
		}
		return v;
	default:
		return json_object_new_string(ckpt__meta_str(f, meta));
	}
}

/* Every field of the meta's table into root, in the table's order; a
 * nested field's object comes where its first field does. */
static void emit_meta(struct builder *b, json_object *root, const struct ckpt_meta *meta)
{
	const struct ckpt__field *fields = NULL;
	char parent[NAME_MAX_LEN];
	const char *key;
	json_object *o;
	int i, n;

	fields = ckpt__meta_fields(&n);
	for (i = 0; i < n && !b->rc; i++) {
		key = split_path(fields[i].json, parent);
		o = root;
		if (parent[0] && !json_object_object_get_ex(root, parent, &o)) {
			o = json_object_new_object();
			put(b, root, parent, o);
			if (b->rc)
				return;
		}
		put(b, o, key, field_value(b, &fields[i], meta));
	}
}

static void emit_tensors(struct builder *b, json_object *root, const struct ckpt_tensor *tensors,
			 int n_tensors)
{
	json_object *a = json_object_new_array(), *f, *shape;
	int i, j;

	for (i = 0; i < n_tensors; i++) {
		shape = json_object_new_array();
		f = json_object_new_object();
		put(b, f, "name", json_object_new_string(tensors[i].name));
		for (j = 0; j < tensors[i].ndim; j++)
			push(b, shape, new_int(tensors[i].shape[j]));
		put(b, f, "shape", shape);
		put(b, f, "block", new_int(tensors[i].block));
		push(b, a, f);
	}
	put(b, root, "tensors", a);
}

static void emit_files(struct builder *b, json_object *root, const struct ckpt_file *files,
		       int n_files)
{
	json_object *a = json_object_new_array(), *f;
	char crc[16];
	int i;

	for (i = 0; i < n_files; i++) {
		f = json_object_new_object();
		snprintf(crc, sizeof(crc), "%08" PRIx32, files[i].crc);
		put(b, f, "name", json_object_new_string(files[i].name));
		put(b, f, "stage", new_int(files[i].stage));
		if (files[i].is_piece)
			put(b, f, "piece", new_int(files[i].piece));
		put(b, f, "size", new_int((int64_t)files[i].size));
		put(b, f, "crc32", json_object_new_string(crc));
		push(b, a, f);
	}
	put(b, root, "files", a);
}

int ckpt__manifest_emit(const struct ckpt_meta *meta, const struct ckpt_tensor *tensors,
			int n_tensors, const struct ckpt_file *files, int n_files,
			struct dt_buf *out)
{
	struct builder b = { 0 };
	json_object *root = NULL;
	const char *text;

	/* NaN or infinity would make invalid JSON; the caller checked the meta */
	if (!isfinite(meta->lr) || n_files < 0 || n_files > CKPT_MAX_FILES ||
	    meta->n_blocks < 1 || meta->n_blocks > CKPT_MAX_BLOCKS || meta->pipeline < 1 ||
	    meta->pipeline > CKPT_MAX_BLOCKS || meta->n_states < 0 ||
	    meta->n_states > CKPT_MAX_STATES || n_tensors < 1 || n_tensors > CKPT_MAX_TENSORS)
		return -EINVAL;
	root = json_object_new_object();
	if (!root)
		return -ENOMEM;
	emit_meta(&b, root, meta);
	if (!b.rc)
		emit_tensors(&b, root, tensors, n_tensors);
	if (!b.rc)
		emit_files(&b, root, files, n_files);
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

/* dt_err_add as an expression the compiler sees is -EINVAL: a check that
 * failed never returns 0, so its caller never reads an output left unset. */
#define BAD(err, ...) (dt_err_add((err), __VA_ARGS__), -EINVAL)

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
		return BAD(at->err, "%s: %s: missing (must be %s)", at->path, name, what);
	if (!json_object_is_type(*v, type))
		return BAD(at->err, "%s: %s: must be %s (got %s)", at->path, name, what,
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
		return BAD(at->err, "%s: %s: must be an integer (got %s)", at->path, name,
			   v ? dt_json_kind(v) : "null");
	x = json_object_get_int64(v);
	if (x < min || x > max || (x == INT64_MAX && json_object_get_uint64(v) != INT64_MAX))
		return BAD(at->err, "%s: %s: must be %" PRId64 "..%" PRId64 " (got %s)",
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
		return BAD(at->err, "%s: %s: must be 0..2^64-2 (got %s)", at->path, name,
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
		return BAD(at->err, "%s: %s: missing (must be a number)", at->path, name);
	if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
		return BAD(at->err, "%s: %s: must be a number (got %s)", at->path, name,
			   dt_json_kind(v));
	x = json_object_get_double(v);
	if (!isfinite(x) || x < 0)
		return BAD(at->err, "%s: %s: must be a finite number >= 0", at->path, name);
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
		return BAD(at->err, "%s: %s: must be a string (got %s)", at->path, name,
			   v ? dt_json_kind(v) : "null");
	s = json_object_get_string(v);
	n = (size_t)json_object_get_string_len(v);
	if (n >= cap)
		return BAD(at->err, "%s: %s: too long (%zu bytes, at most %zu)", at->path,
			   name, n, cap - 1);
	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return BAD(at->err, "%s: %s: must not contain control characters",
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
static int get_time(const struct at *at, json_object *obj, const char *parent, const char *key,
		    char *out, size_t cap)
{
	static const char shape[] = "dddd-dd-ddTdd:dd:ddZ";
	char name[NAME_MAX_LEN];
	struct tm tm, back;
	time_t t;
	size_t i;
	int rc = get_str(at, obj, parent, key, out, cap);

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
	join(name, parent, key);
	if (shape[i] || out[i] || !strptime(out, "%Y-%m-%dT%H:%M:%SZ", &tm) ||
	    back.tm_year != tm.tm_year || back.tm_mon != tm.tm_mon || back.tm_mday != tm.tm_mday ||
	    back.tm_hour != tm.tm_hour || back.tm_min != tm.tm_min || back.tm_sec != tm.tm_sec)
		return BAD(at->err, "%s: %s: expected a UTC time like \"2026-11-21T10:00:00Z\" or \"\" (got \"%s\")",
			   at->path, name, out);
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
		return BAD(at->err, "%s: %s: must have %zu..%zu elements (has %zu)", at->path,
			   name, min, max, *n);
	}
	return 0;
}

/* A 16-digit lower-case hex hash (ckpt_hash64). */
static int get_hash(const struct at *at, json_object *obj, const char *parent, const char *key,
		    char out[17])
{
	char name[NAME_MAX_LEN];
	size_t i;
	int rc = get_str(at, obj, parent, key, out, 17);

	if (rc)
		return rc;
	for (i = 0; i < 16; i++)
		if (!isdigit((unsigned char)out[i]) && !(out[i] >= 'a' && out[i] <= 'f'))
			break;
	join(name, parent, key);
	if (i != 16 || out[16] != '\0')
		return BAD(at->err, "%s: %s: must be 16 lower-case hex digits", at->path, name);
	return 0;
}

/* --- parsing: the text --- */

/* The text as one JSON object, nothing but white space after it. */
static int parse_text(const struct at *at, const char *text, json_object **out)
{
	struct dt_json_error e;
	int rc = dt_json_parse_object(text, strlen(text), 32, out, &e);

	switch (rc) {
	case 0:
	case -ENOMEM:
		return rc;
	case -EFBIG:
		return BAD(at->err, "%s: too large to be a manifest", at->path);
	case -EDOM:
		return BAD(at->err, "%s: not a dtrain checkpoint manifest (not a JSON object)",
			   at->path);
	default:
		return BAD(at->err, "%s: invalid JSON at byte %zu: %s", at->path, e.offset, e.what);
	}
}

/* --- parsing: the meta's fields --- */

/* "format", before anything else is believed. */
static int get_format(const struct at *at, json_object *obj)
{
	json_object *v;
	char shown[48];
	const char *s;
	size_t i;

	if (!json_object_object_get_ex(obj, "format", &v) ||
	    !json_object_is_type(v, json_type_string))
		return BAD(at->err, "%s: not a dtrain checkpoint (no \"format\" string)",
			   at->path);
	s = json_object_get_string(v);
	if (strcmp(s, CKPT_FORMAT) != 0 ||
	    (size_t)json_object_get_string_len(v) != strlen(CKPT_FORMAT)) {
		/* echo a printable prefix only: the text is not ours */
		snprintf(shown, sizeof(shown), "%.40s", s);
		for (i = 0; shown[i]; i++)
			if ((unsigned char)shown[i] < 0x20 || shown[i] == 0x7f || shown[i] == '"')
				shown[i] = '?';
		return BAD(at->err, "%s: not a dtrain checkpoint (format \"%s\")", at->path,
			   shown);
	}
	return 0;
}

/* "format_version": one this dtrain reads. */
static int get_version(const struct at *at, json_object *obj, const char *parent,
		       const char *key, const struct ckpt__field *f, int *format_version)
{
	int64_t version;

	if (get_int(at, obj, parent, key, f->min, f->max, &version))
		return -EINVAL;
	if (version > CKPT_VERSION)
		return BAD(at->err,
			   "%s: format_version %" PRId64
			   " is newer than this dtrain reads (%d): use a newer dtrain",
			   at->path, version, CKPT_VERSION);
	*format_version = (int)version;
	return 0;
}

/* The optimizer's state names: f->min..f->max of them. */
static int get_states(const struct at *at, json_object *obj, const char *parent,
		      const char *key, const struct ckpt__field *f, struct ckpt_meta *meta)
{
	char where[NAME_MAX_LEN], name[NAME_MAX_LEN + 24];
	json_object *arr;
	size_t n, i;

	if (get_array(at, obj, parent, key, (size_t)f->min, (size_t)f->max, &arr, &n))
		return -EINVAL;
	join(where, parent, key);
	meta->n_states = (int)n;
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%s[%zu]", where, i);
		if (str_value(at, json_object_array_get_idx(arr, i), name, meta->states[i],
			      sizeof(meta->states[i])))
			return -EINVAL;
	}
	return 0;
}

/* The layout's first block of each stage and the end: pipeline + 1
 * elements (read before it, the table's order), each f->min..f->max. */
static int get_stages(const struct at *at, json_object *obj, const char *parent,
		      const char *key, const struct ckpt__field *f, struct ckpt_meta *meta)
{
	char where[NAME_MAX_LEN], name[NAME_MAX_LEN + 24];
	json_object *arr;
	int64_t x;
	size_t n, i;

	if (get_array(at, obj, parent, key, 2, CKPT_MAX_BLOCKS + 1, &arr, &n))
		return -EINVAL;
	join(where, parent, key);
	if (n != (size_t)meta->pipeline + 1)
		return BAD(at->err, "%s: %s: must have pipeline+1 = %d elements (has %zu)", at->path,
			   where, meta->pipeline + 1, n);
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%s[%zu]", where, i);
		if (int_value(at, json_object_array_get_idx(arr, i), name, f->min, f->max, &x))
			return -EINVAL;
		meta->stage_first[i] = (int)x;
	}
	return 0;
}

/* The model's config, kept as compact JSON (the form the model hash is
 * taken of) in out [cap]. */
static int get_config(const struct at *at, json_object *obj, const char *parent,
		      const char *key, char *out, size_t cap)
{
	char name[NAME_MAX_LEN];
	json_object *config;
	const char *text;

	if (member(at, obj, parent, key, json_type_object, "an object", &config))
		return -EINVAL;
	text = json_object_to_json_string_ext(config, JSON_C_TO_STRING_PLAIN |
							      JSON_C_TO_STRING_NOSLASHESCAPE);
	if (!text)
		return dt_err_add(at->err, "%s: out of memory", at->path), -ENOMEM;
	join(name, parent, key);
	if (strlen(text) >= cap)
		return BAD(at->err, "%s: %s: longer than %zu bytes", at->path, name, cap - 1);
	snprintf(out, cap, "%s", text);
	return 0;
}

/* One field of the meta's table from the manifest into meta, checked as
 * its kind and range say (internal.h). */
static int get_field(const struct at *at, json_object *root, const struct ckpt__field *f,
		     struct ckpt_meta *meta)
{
	char parent[NAME_MAX_LEN];
	const char *key = split_path(f->json, parent);
	void *p = (char *)meta + f->offset;
	json_object *o = root;

	if (parent[0] && member(at, root, "", parent, json_type_object, "an object", &o))
		return -EINVAL;
	switch (f->kind) {
	case CKPT__FORMAT:
		return get_format(at, o);
	case CKPT__VERSION:
		return get_version(at, o, parent, key, f, p);
	case CKPT__I64:
		return get_int(at, o, parent, key, f->min, f->max, p);
	case CKPT__INT:
		if ((f->flags & CKPT__F_ONE) && !json_object_object_get_ex(o, key, NULL)) {
			*(int *)p = 1;
			return 0;
		}
		return get_small(at, o, parent, key, (int)f->min, (int)f->max, p);
	case CKPT__U64:
		return get_u64(at, o, parent, key, p);
	case CKPT__NUM:
		return get_double(at, o, parent, key, p);
	case CKPT__BOOL:
		return get_bool(at, o, parent, key, p);
	case CKPT__STR:
		return get_str(at, o, parent, key, p, f->size);
	case CKPT__HASH:
		return get_hash(at, o, parent, key, p);
	case CKPT__TIME:
		return get_time(at, o, parent, key, p, f->size);
	case CKPT__STATES:
		return get_states(at, o, parent, key, f, meta);
	case CKPT__STAGES:
		return get_stages(at, o, parent, key, f, meta);
	case CKPT__CONFIG:
		return get_config(at, o, parent, key, p, f->size);
	}
	return BAD(at->err, "%s: %s: unknown kind of field", at->path, f->json);
}

/* The fields of the meta's table whose CKPT__F_MODEL flag is model, in
 * the table's order; the first bad one names itself. */
static int get_fields(const struct at *at, json_object *root, unsigned model,
		      struct ckpt_meta *meta)
{
	const struct ckpt__field *fields;
	int i, n;

	fields = ckpt__meta_fields(&n);
	for (i = 0; i < n; i++)
		if ((fields[i].flags & CKPT__F_MODEL) == model && get_field(at, root, &fields[i], meta))
			return -EINVAL;
	return 0;
}

/* --- parsing: the model, tensors and files --- */

/* Format 1: an MLP of widths and an activation (ckpt.h says how it reads
 * as a model of blocks), its model_hash recomputed the way it was made. */
static int parse_model_v1(const struct at *at, json_object *root, const char *stored,
			  struct ckpt_manifest *m)
{
	struct ckpt_meta *meta = &m->meta;
	int64_t widths[CKPT_MAX_BLOCKS + 1] = { 0 }; /* n >= 2 of them read */
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
			return BAD(at->err, "%s: checkpoint meta: activation must be a plain name",
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
			return BAD(at->err, "%s: %s: must be an object (got %s)", at->path,
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

/* The name file cf must have, into want, and its slot (the root 0, the
 * shards, the pieces, then the tokenizer's tok_files at tok_slot: GPT-2's
 * two or tokenizer.json). */
static int file_slot(const struct ckpt_file *cf, int pipeline, int shards, int tok_slot,
		     int tok_files, char *want, size_t size)
{
	if (cf->stage < 0 && tok_files == 2 &&
	    (!strcmp(cf->name, CKPT_TOKENIZER_ENCODER) || !strcmp(cf->name, CKPT_TOKENIZER_MERGES))) {
		snprintf(want, size, "%s", cf->name);
		return tok_slot + !strcmp(cf->name, CKPT_TOKENIZER_MERGES);
	}
	if (cf->stage < 0 && tok_files == 1 && strcmp(cf->name, CKPT_ROOT)) {
		snprintf(want, size, "%s", CKPT_TOKENIZER_HF);
		return tok_slot;
	}
	if (cf->stage < 0) {
		snprintf(want, size, "%s", CKPT_ROOT);
		return 0;
	}
	if (!cf->is_piece) {
		ckpt_shard_name(cf->stage, want, size);
		return 1 + cf->stage;
	}
	ckpt_piece_name(cf->stage, cf->piece, want, size);
	return 1 + pipeline + cf->stage * shards + cf->piece;
}

/* The files: exactly the root, one shard per stage and, with a sharded
 * optimizer, its pieces of each stage, and the tokenizer's two files or
 * none, under the names this module writes. Called after the layout is
 * known. */
static int parse_files(const struct at *at, json_object *root, struct ckpt_manifest *m)
{
	bool seen[CKPT_MAX_FILES] = { false }; /* [slot]: root 0, shards, then pieces */
	char where[32], name[NAME_MAX_LEN], want[64], crc[16];
	int pipeline = m->meta.pipeline, shards = m->meta.optimizer_shards, slot;
	size_t count = (size_t)pipeline + 1 + (shards > 1 ? (size_t)pipeline * (size_t)shards : 0);
	json_object *arr, *f;
	size_t n, i, j;
	int64_t x;

	if (get_array(at, root, "", "files", 0, CKPT_MAX_FILES, &arr, &n))
		return -EINVAL;
	if (n < count || n > count + 2)
		return BAD(at->err, "%s: files: must have %zu elements (the root, the shards and optimizer pieces), or %zu or %zu with the tokenizer's (has %zu)",
			   at->path, count, count + 1, count + 2, n);
	for (i = 0; i < n; i++) {
		struct ckpt_file *cf = &m->files[i];

		snprintf(where, sizeof(where), "files[%zu]", i);
		f = json_object_array_get_idx(arr, i);
		if (!f || !json_object_is_type(f, json_type_object))
			return BAD(at->err, "%s: %s: must be an object (got %s)", at->path,
				   where, f ? dt_json_kind(f) : "null");
		if (get_str(at, f, where, "name", cf->name, sizeof(cf->name)) ||
		    get_int(at, f, where, "stage", -1, pipeline - 1, &x))
			return -EINVAL;
		cf->stage = (int)x;
		cf->is_piece = false;
		cf->piece = 0;
		if (json_object_object_get_ex(f, "piece", NULL)) {
			if (shards < 2 || cf->stage < 0)
				return BAD(at->err, "%s: %s.piece: only a stage's optimizer pieces have one (optimizer.shards is %d)",
					   at->path, where, shards);
			if (get_int(at, f, where, "piece", 0, shards - 1, &x))
				return -EINVAL;
			cf->piece = (int)x;
			cf->is_piece = true;
		}
		slot = file_slot(cf, pipeline, shards, (int)count, (int)(n - count), want, sizeof(want));
		if (strcmp(cf->name, want) != 0)
			return BAD(at->err,
				   "%s: %s.name: stage %d's file must be named \"%s\" (a plain name written by dtrain)",
				   at->path, where, cf->stage, want);
		if (seen[slot])
			return BAD(at->err, "%s: %s: \"%s\" is listed twice", at->path, where,
				   want);
		seen[slot] = true;
		if (get_int(at, f, where, "size", 0, CKPT__MAX_COUNT, &x))
			return -EINVAL;
		cf->size = (uint64_t)x;
		if (get_str(at, f, where, "crc32", crc, sizeof(crc)))
			return -EINVAL;
		for (j = 0; j < 8; j++)
			if (!isxdigit((unsigned char)crc[j]))
				break;
		if (j != 8 || crc[8] != '\0') {
			join(name, where, "crc32");
			return BAD(at->err, "%s: %s: must be 8 hex digits", at->path, name);
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
	json_object *root = NULL;
	char stored[17];
	int rc;

	memset(m, 0, sizeof(*m));
	rc = parse_text(&at, text, &root);
	if (rc)
		goto out;
	rc = -EINVAL;
	if (get_fields(&at, root, 0, meta))
		goto out;
	/* as stored: checked against the hash of the model read next */
	memcpy(stored, meta->model_hash, sizeof(stored));
	rc = meta->format_version == 1 ? parse_model_v1(&at, root, stored, m) :
		 get_fields(&at, root, CKPT__F_MODEL, meta) || parse_tensors(&at, root, m) ? -EINVAL : 0;
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
