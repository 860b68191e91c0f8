/*
 * json.c - helpers over json-c (json.h).
 *
 * Sections: strict parsing, messages and output.
 */
#include "base/json.h"
#include "base/buf.h"

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

/* Bytes of the UTF-8 character at p (ASCII and control characters
 * included), or 0: a stray or overlong byte, a surrogate, past U+10FFFF */
static size_t utf8_len(const unsigned char *p)
{
	size_t n = p[0] < 0x80 ? 1 : p[0] >= 0xc2 && p[0] <= 0xdf ? 2 : p[0] >= 0xe0 && p[0] <= 0xef ? 3 :
		   p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : 0, i;

	for (i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if (n > 1 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] > 0x9f) ||
		      (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] > 0x8f)))
		return 0;
	return n;
}

/* json-c passes bytes through as they are: a byte of no UTF-8 character
 * becomes U+FFFD, so that every reader takes the line (RFC 8259 wants
 * UTF-8) */
char *dt_json_quote(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	struct json_object *o = NULL;
	struct dt_buf b = { 0 };
	char *q = NULL;
	int rc = s ? dt_buf_puts(&b, "") : -EINVAL;

	while (!rc && *p) {
		size_t n = utf8_len(p);

		rc = n ? dt_buf_add(&b, (const char *)p, n) : dt_buf_puts(&b, "\xef\xbf\xbd");
		p += n ? n : 1;
	}
	if (!rc)
		o = json_object_new_string(dt_buf_str(&b));
	if (o)
		q = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	dt_buf_free(&b);
	return q;
}
