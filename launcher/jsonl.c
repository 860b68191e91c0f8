/*
 * jsonl.c - reading the JSON-lines files a run writes (metrics.jsonl,
 * events.jsonl) while it may still be writing them (internal.h): whole
 * lines only, each one JSON object or left out.
 */
#include "launcher/internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

json_object *launch__json_line(json_tokener *tok, const char *line, size_t len)
{
	json_object *o;
	size_t used;

	if (len == 0 || len > INT32_MAX)
		return NULL;
	json_tokener_reset(tok);
	o = json_tokener_parse_ex(tok, line, (int)len);
	if (!o)
		return NULL;
	used = json_tokener_get_parse_end(tok);
	while (used < len && (line[used] == ' ' || line[used] == '\t' || line[used] == '\r'))
		used++;
	if (used != len || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

int launch__jsonl_each(const char *path, const char *want, int (*fn)(void *ctx, json_object *o),
		       void *ctx, int *skipped, struct dt_err *err)
{
	FILE *f = fopen(path, "re");
	json_tokener *tok = json_tokener_new();
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0;

	if (!f)
		rc = -errno;
	else if (!tok)
		rc = -ENOMEM;
	while (!rc && (n = getline(&line, &cap, f)) > 0) {
		json_object *o;

		if (line[n - 1] != '\n')
			break; /* still being written */
		if (want && !memmem(line, (size_t)n, want, strlen(want)))
			continue;
		o = launch__json_line(tok, line, (size_t)n - 1);
		if (!o && skipped)
			(*skipped)++;
		else if (o)
			rc = fn(ctx, o);
		json_object_put(o);
	}
	if (!rc && ferror(f))
		rc = -EIO;
	if (rc == -ENOMEM)
		dt_err_add(err, "%s: out of memory", path);
	else if (rc && rc != -ENOENT)
		dt_err_add(err, "%s: cannot read: %s", path, strerror(-rc));
	free(line);
	if (f)
		fclose(f);
	if (tok)
		json_tokener_free(tok);
	return rc;
}
