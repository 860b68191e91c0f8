/*
 * json.h - small helpers over json-c for the modules that read JSON files
 * (job specs, site files, checkpoint manifests).
 */
#ifndef DTRAIN_BASE_JSON_H
#define DTRAIN_BASE_JSON_H

struct json_object;

/* What a value is, for messages: "an integer", "a string", "null", ... */
const char *dt_json_kind(struct json_object *v);

#endif
