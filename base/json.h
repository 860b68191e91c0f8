/*
 * json.h - small helpers over json-c for the modules that read JSON files
 * (job specs, site files, checkpoint manifests): strict parsing and names of
 * value kinds for messages; and the writer of JSON lines (metrics.jsonl).
 */
#ifndef DTRAIN_BASE_JSON_H
#define DTRAIN_BASE_JSON_H

#include <stddef.h>
#include <stdio.h>

struct json_object;

/* --- strict parsing --- */

/* Where and why a text is not JSON (dt_json_parse_object). */
struct dt_json_error {
	size_t offset;    /* the byte of the text where it went wrong */
	const char *what; /* json-c's description: static, "unexpected end of data" */
};

/* Parses text [len bytes] as one JSON document in json-c's strict mode (no
 * comments, no trailing commas, no single quotes; RFC 8259), nested at
 * most depth deep, with nothing but white space after it. Returns 0 and
 * *out, an object (the caller releases it with json_object_put); or, *out
 * NULL: -EINVAL, not JSON: *e says where and why; -EDOM, JSON but not an
 * object; -EFBIG, longer than json-c takes (INT32_MAX bytes); -ENOMEM.
 * The caller words the message (a job spec names line and column:
 * dt_json_line_col; a manifest the byte). */
int dt_json_parse_object(const char *text, size_t len, int depth, struct json_object **out,
			 struct dt_json_error *e);

/* Line and column, both from 1, of byte offset of text [len]. */
void dt_json_line_col(const char *text, size_t len, size_t offset, int *line, int *col);

/* --- messages and output --- */

/* What a value is, for messages: "an integer", "a string", "null", ... */
const char *dt_json_kind(struct json_object *v);

/* One JSON line: the caller's format (an object, no newline) to f, then a
 * newline, flushed so that a reader tailing the file sees whole lines;
 * nothing when f is NULL. A string that did not come from the code itself
 * (a path, a name from a spec) goes through dt_json_quote, never "\"%s\"". */
void dt_json_line(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* s as a JSON string, its quotes included and every quote, backslash and
 * control character escaped, for a "%s" of dt_json_line; the caller frees
 * it. NULL (s NULL, or out of memory) stands for "null": pass it through
 * dt_json_or_null. */
char *dt_json_quote(const char *s);
static inline const char *dt_json_or_null(const char *quoted) { return quoted ? quoted : "null"; }

#endif
