/*
 * json.c - helpers over json-c (json.h).
 *
 * Sections: strict parsing, messages and output.
 */
#include "base/json.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

/* --- strict parsing --- */

int dt_json_parse_object(const char *text, size_t len, int depth, struct json_object **out,
			 struct dt_json_error *e)
{
	enum json_tokener_error jerr;
	json_tokener *tok;
	json_object *obj;
	size_t off;

	*out = NULL;
	e->offset = 0;
	e->what = "";
	if (len > INT32_MAX)
		return -EFBIG;
	tok = json_tokener_new_ex(depth);
	if (!tok)
		return -ENOMEM;
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	obj = json_tokener_parse_ex(tok, text, (int)len);
	jerr = json_tokener_get_error(tok);
	off = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (jerr == json_tokener_success) {
		/* only white space may follow the document */
		while (off < len && isspace((unsigned char)text[off]))
			off++;
		if (off < len)
			jerr = json_tokener_error_parse_unexpected;
	} else if (jerr == json_tokener_continue) {
		jerr = json_tokener_error_parse_eof; /* the text ended inside it */
	}
	if (jerr != json_tokener_success) {
		json_object_put(obj);
		e->offset = off;
		e->what = json_tokener_error_desc(jerr);
		return -EINVAL;
	}
	if (!json_object_is_type(obj, json_type_object)) {
		json_object_put(obj);
		return -EDOM;
	}
	*out = obj;
	return 0;
}

void dt_json_line_col(const char *text, size_t len, size_t offset, int *line, int *col)
{
	size_t i;

	*line = 1;
	*col = 1;
	for (i = 0; i < offset && i < len; i++) {
		if (text[i] == '\n') {
			(*line)++;
			*col = 1;
		} else {
			(*col)++;
		}
	}
}

/* --- messages and output --- */

const char *dt_json_kind(struct json_object *v)
{
	switch (json_object_get_type(v)) {
	case json_type_null: return "null";
	case json_type_boolean: return "a boolean";
	case json_type_double: return "a number";
	case json_type_int: return "an integer";
	case json_type_object: return "an object";
	case json_type_array: return "an array";
	case json_type_string: return "a string";
	}
	return "a value";
}

void dt_json_line(FILE *f, const char *fmt, ...)
{
	va_list ap;

	if (!f)
		return;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fflush(f);
}

char *dt_json_quote(const char *s)
{
	struct json_object *o = s ? json_object_new_string(s) : NULL;
	char *q = NULL;

	if (o)
		q = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	return q;
}
