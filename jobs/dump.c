/*
 * dump.c - a resolved spec as JSON, every key (what dtrain-submit writes
 * to <run_dir>/spec.json and dtrain-run reads), and the table of every key
 * as Markdown (jobs/README.md).
 */
#include "jobs/internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

/* --- dump and docs --- */

static json_object *value_json(const struct spec *s, const struct spec_field *f)
{
	const void *p = (const char *)s + f->off;
	json_object *v = NULL;
	size_t i;
	char buf[32];

	switch (f->type) {
	case SPEC_STR:
	case SPEC_ENUM:
		return *(char *const *)p ? json_object_new_string(*(char *const *)p) : NULL;
	case SPEC_INT:
		if ((f->flags & SPEC_F_AUTO) && *(const long *)p == SPEC_AUTO)
			return json_object_new_string("auto");
		return json_object_new_int64(*(const long *)p);
	case SPEC_NUM:
		return json_object_new_double(*(const double *)p);
	case SPEC_BOOL:
		return json_object_new_boolean(*(const bool *)p);
	case SPEC_TIME:
		if (!*(const long *)p)
			return NULL;
		spec_format_time(*(const long *)p, buf, sizeof(buf));
		return json_object_new_string(buf);
	case SPEC_MEM: {
		long m = *(const long *)p;

		if (!m)
			return NULL;
		snprintf(buf, sizeof(buf), m % 1024 ? "%ldM" : "%ldG", m % 1024 ? m : m / 1024);
		return json_object_new_string(buf);
	}
	case SPEC_INTLIST: {
		const struct spec_ints *l = p;

		v = json_object_new_array();
		for (i = 0; v && i < l->n; i++)
			json_object_array_add(v, json_object_new_int64(l->v[i]));
		return v;
	}
	case SPEC_NUMLIST: {
		const struct spec_nums *l = p;

		v = json_object_new_array();
		for (i = 0; v && i < l->n; i++)
			json_object_array_add(v, json_object_new_double(l->v[i]));
		return v;
	}
	case SPEC_STRLIST: {
		const struct spec_strs *l = p;

		v = json_object_new_array();
		for (i = 0; v && i < l->n; i++)
			json_object_array_add(v, json_object_new_string(l->v[i]));
		return v;
	}
	case SPEC_RANGE: {
		const struct spec_range *r = p;

		if (r->min == r->max)
			return json_object_new_int64(r->min);
		snprintf(buf, sizeof(buf), "%ld-%ld", r->min, r->max);
		return json_object_new_string(buf);
	}
	case SPEC_STRMAP: {
		const struct spec_map *m = p;

		v = json_object_new_object();
		for (i = 0; v && i < m->n; i++)
			json_object_object_add(v, m->key[i], json_object_new_string(m->val[i]));
		return v;
	}
	}
	return NULL;
}

int spec_dump(const struct spec *s, struct dt_buf *out)
{
	size_t n, i;
	const struct spec_field *f = spec_fields(&n);
	json_object *root = json_object_new_object();
	int rc = 0;

	if (!root)
		return -ENOMEM;
	for (i = 0; i < n && !rc; i++)
		rc = spec__tree_set(root, f[i].path, value_json(s, &f[i]));
	if (!rc)
		rc = dt_buf_puts(out, json_object_to_json_string_ext(root,
				 JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
				 JSON_C_TO_STRING_NOSLASHESCAPE));
	if (!rc)
		rc = dt_buf_puts(out, "\n");
	json_object_put(root);
	return rc;
}

static const char *type_doc(const struct spec_field *f)
{
	switch (f->type) {
	case SPEC_STR: return "string";
	case SPEC_ENUM: return "enum";
	case SPEC_INT: return "integer";
	case SPEC_NUM: return "number";
	case SPEC_BOOL: return "boolean";
	case SPEC_TIME: return "time";
	case SPEC_MEM: return "memory";
	case SPEC_INTLIST: return "integer list";
	case SPEC_NUMLIST: return "number list";
	case SPEC_STRLIST: return f->flags & SPEC_F_SHELL ? "shell lines" : "string list";
	case SPEC_STRMAP: return "string map";
	case SPEC_RANGE: return "integer or range";
	}
	return "?";
}

int spec_doc_markdown(struct dt_buf *out)
{
	size_t n, i;
	const struct spec_field *f = spec_fields(&n);
	int rc;

	rc = dt_buf_puts(out, "| key | type | default | allowed | description |\n"
			      "|---|---|---|---|---|\n");
	for (i = 0; i < n && !rc; i++) {
		char allowed[128] = "";

		if (f[i].type == SPEC_ENUM)
			snprintf(allowed, sizeof(allowed), "`%s`", f[i].choices);
		else if (f[i].type == SPEC_INT || f[i].type == SPEC_INTLIST || f[i].type == SPEC_MEM ||
			 f[i].type == SPEC_RANGE)
			snprintf(allowed, sizeof(allowed), "%.0f .. %.0f%s", f[i].min, f[i].max,
				 f[i].flags & SPEC_F_AUTO ? " or `\"auto\"`" :
				 f[i].type == SPEC_RANGE ? ", or a range `\"MIN-MAX\"`" : "");
		else if (f[i].type == SPEC_NUM || f[i].type == SPEC_NUMLIST)
			snprintf(allowed, sizeof(allowed), "%g .. %g", f[i].min, f[i].max);
		else if (f[i].type == SPEC_TIME)
			snprintf(allowed, sizeof(allowed), "1 minute .. 366 days");
		else if (f[i].type == SPEC_STR)
			snprintf(allowed, sizeof(allowed), "%.0f .. %.0f chars%s", f[i].min, f[i].max,
				 f[i].flags & SPEC_F_NAME ? ", `[A-Za-z0-9._-]`" :
				 f[i].flags & SPEC_F_SLURM ? ", `[A-Za-z0-9._,:=+@-&|[]*!]`" :
				 f[i].flags & SPEC_F_PATH ? ", `[A-Za-z0-9._/+,=@:~-]`" : "");
		if (f[i].min_items || f[i].max_items) {
			size_t len = strlen(allowed);

			snprintf(allowed + len, sizeof(allowed) - len, "%s%d .. %d items",
				 len ? "; " : "", f[i].min_items, f[i].max_items);
		}
		rc = dt_buf_printf(out, "| `%s` | %s | `%s` | %s | %s |\n", f[i].path,
				   type_doc(&f[i]), f[i].def, allowed, f[i].doc);
	}
	return rc;
}
