/*
 * tree.c - the JSON tree of a job spec: a file read as one strict JSON
 * object, and the nodes of a tree got, set and merged by dotted path
 * (internal.h).
 */
#include "jobs/internal.h"

#include "base/json.h"
#include "base/io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

/* --- JSON helpers --- */

/* Parse text as one strict JSON object; errors name label:line:column. */
static int parse_json(const char *label, const char *text, size_t len,
		      json_object **out, struct dt_err *err)
{
	struct dt_json_error e;
	int line, col, rc;

	rc = dt_json_parse_object(text, len, 64, out, &e);
	switch (rc) {
	case 0:
	case -ENOMEM:
		return rc;
	case -EFBIG:
		return dt_err_add(err, "%s: too large to be a job spec (%zu bytes)", label, len);
	case -EDOM:
		return dt_err_add(err, "%s: expected a JSON object at the top level", label);
	default:
		dt_json_line_col(text, len, e.offset, &line, &col);
		return dt_err_add(err, "%s:%d:%d: invalid JSON: %s", label, line, col, e.what);
	}
}

int spec_json_load(const char *path, json_object **out, struct dt_err *err)
{
	char *text = NULL;
	size_t len = 0;
	int rc;

	rc = dt_read_file(path, &text, &len);
	if (rc)
		return dt_err_add(err, "%s: cannot read: %s", path, strerror(-rc)), rc;
	rc = parse_json(path, text, len, out, err);
	free(text);
	return rc;
}

/* The node at a dotted path, or NULL. */
json_object *spec__tree_get(json_object *root, const char *path)
{
	char part[SPEC__PATH_MAX];
	const char *p = path;

	while (root && *p) {
		const char *dot = strchr(p, '.');
		size_t n = dot ? (size_t)(dot - p) : strlen(p);
		json_object *child = NULL;

		if (n >= sizeof(part) || !json_object_is_type(root, json_type_object))
			return NULL;
		memcpy(part, p, n);
		part[n] = '\0';
		if (!json_object_object_get_ex(root, part, &child))
			return NULL;
		root = child;
		p = dot ? dot + 1 : p + n;
	}
	return root;
}

/* Set root[path] = val (taking val's reference), creating objects on the way. */
int spec__tree_set(json_object *root, const char *path, json_object *val)
{
	char part[SPEC__PATH_MAX];
	const char *p = path;

	for (;;) {
		const char *dot = strchr(p, '.');
		size_t n = dot ? (size_t)(dot - p) : strlen(p);
		json_object *child = NULL;

		if (n >= sizeof(part)) {
			json_object_put(val);
			return -ENAMETOOLONG;
		}
		memcpy(part, p, n);
		part[n] = '\0';
		if (!dot)
			return json_object_object_add(root, part, val) ? -ENOMEM : 0;
		if (!json_object_object_get_ex(root, part, &child) ||
		    !json_object_is_type(child, json_type_object)) {
			child = json_object_new_object();
			if (!child || json_object_object_add(root, part, child)) {
				json_object_put(child);
				json_object_put(val);
				return -ENOMEM;
			}
		}
		root = child;
		p = dot + 1;
	}
}

/* Overlay src onto dst: objects merge key by key, anything else replaces. */
int spec__tree_merge(json_object *dst, json_object *src)
{
	json_object_object_foreach(src, key, val) {
		json_object *old = NULL, *copy = NULL;

		if (json_object_object_get_ex(dst, key, &old) &&
		    json_object_is_type(old, json_type_object) &&
		    json_object_is_type(val, json_type_object)) {
			int rc = spec__tree_merge(old, val);

			if (rc)
				return rc;
			continue;
		}
		/* JSON null is a NULL json_object, which deep_copy refuses. */
		if (val && json_object_deep_copy(val, &copy, NULL))
			return -ENOMEM;
		if (json_object_object_add(dst, key, copy)) {
			json_object_put(copy);
			return -ENOMEM;
		}
	}
	return 0;
}

/* A short rendering of a value for "(got ...)"; valid until the next call. */
const char *spec__json_short(json_object *v)
{
	static __thread char buf[80];
	const char *s = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);

	if (strlen(s) < sizeof(buf))
		return s;
	snprintf(buf, sizeof(buf), "%.70s...", s);
	return buf;
}
