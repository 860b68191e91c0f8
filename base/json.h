/*
 * json.h - small helpers over json-c for the modules that read JSON files
 * (job specs, site files, checkpoint manifests), and the writer of JSON
 * lines (metrics.jsonl).
 */
#ifndef DTRAIN_BASE_JSON_H
#define DTRAIN_BASE_JSON_H

#include <stdio.h>

struct json_object;

/* What a value is, for messages: "an integer", "a string", "null", ... */
const char *dt_json_kind(struct json_object *v);

/* One JSON line: the caller's format (an object, no newline) to f, then a
 * newline, flushed so that a reader tailing the file sees whole lines;
 * nothing when f is NULL. */
void dt_json_line(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
