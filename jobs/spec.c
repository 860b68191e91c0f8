/*
 * spec.c - parse, merge, validate and dump job specs, driven by the table in
 * spec_table.c.
 *
 * Sections: JSON helpers, value checks, filling a struct spec from a tree,
 * layers and origins (site defaults < file < --set), cross-field rules,
 * public entry points, dump and docs.
 */
#include "jobs/internal.h"

#include "base/json.h"
#include "base/io.h"
#include "base/path.h"
#include "base/str.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

/* --- value checks --- */

/* Where a value came from, for messages: "file: path". */
struct spec__where {
	const char *label;  /* file name, "--set" or "site.json (defaults)" */
	const char *prefix; /* shown before the path: "" or "defaults." */
};

#define SPEC__WHERE_FMT "%s: %s%s"
#define SPEC__WHERE_ARGS(w, path) (w)->label, (w)->prefix, (path)

static bool char_ok(unsigned flags, unsigned char c)
{
	if (flags & SPEC_F_NAME)
		return isalnum(c) || c == '.' || c == '_' || c == '-';
	if (flags & SPEC_F_SLURM)
		return isalnum(c) || strchr("._,:=+@-&|[]*!", c);
	if (flags & SPEC_F_PATH)
		return isalnum(c) || strchr("._/+,=@:~-", c);
	/* Text and shell lines: anything printable, tabs, UTF-8. */
	return c >= 0x20 ? c != 0x7f : c == '\t';
}

static const char *charset_doc(unsigned flags)
{
	if (flags & SPEC_F_NAME)
		return "only letters, digits, '.', '_' and '-' are allowed";
	if (flags & SPEC_F_SLURM)
		return "only letters, digits and ._,:=+@-&|[]*! are allowed";
	if (flags & SPEC_F_PATH)
		return "only letters, digits and ._/+,=@:~- are allowed in this path (it is used in #SBATCH lines)";
	return "control characters such as newlines are not allowed";
}

static int spec__check_chars(const struct spec__where *w, const char *path, unsigned flags,
		       const char *s, struct dt_err *err)
{
	const unsigned char *p;

	if ((flags & SPEC_F_NAME) && (s[0] == '-' || s[0] == '.'))
		return dt_err_add(err, SPEC__WHERE_FMT ": must not start with '%c' (got \"%s\")",
				  SPEC__WHERE_ARGS(w, path), s[0], s);
	for (p = (const unsigned char *)s; *p; p++) {
		if (char_ok(flags, *p))
			continue;
		if (isprint(*p))
			return dt_err_add(err, SPEC__WHERE_FMT ": character '%c' not allowed: %s",
					  SPEC__WHERE_ARGS(w, path), *p, charset_doc(flags));
		return dt_err_add(err, SPEC__WHERE_FMT ": character 0x%02x not allowed: %s",
				  SPEC__WHERE_ARGS(w, path), *p, charset_doc(flags));
	}
	return 0;
}

static bool choice_ok(const char *choices, const char *s)
{
	size_t n = strlen(s);
	const char *p = choices;

	if (n == 0)
		return false; /* strstr finds "" everywhere: the loop would not advance */
	while ((p = strstr(p, s)) != NULL) {
		if ((p == choices || p[-1] == '|') && (p[n] == '|' || p[n] == '\0'))
			return true;
		p += n;
	}
	return false;
}

static int get_integer(json_object *v, long *out)
{
	if (json_object_is_type(v, json_type_int)) {
		errno = 0;
		int64_t x = json_object_get_int64(v);

		if (errno == ERANGE || x == INT64_MAX || x == INT64_MIN)
			return -ERANGE;
		*out = (long)x;
		return 0;
	}
	if (json_object_is_type(v, json_type_double)) {
		double d = json_object_get_double(v);

		if (!isfinite(d) || d != floor(d) || fabs(d) > 9e15)
			return -EINVAL;
		*out = (long)d;
		return 0;
	}
	return -EINVAL;
}

static int check_number(const struct spec__where *w, const char *path,
			const struct spec_field *f, double x, bool integer,
			struct dt_err *err)
{
	if (x >= f->min && x <= f->max)
		return 0;
	if (integer)
		return dt_err_add(err, SPEC__WHERE_FMT ": must be between %.0f and %.0f (got %.0f)",
				  SPEC__WHERE_ARGS(w, path), f->min, f->max, x);
	return dt_err_add(err, SPEC__WHERE_FMT ": must be between %g and %g (got %g)",
			  SPEC__WHERE_ARGS(w, path), f->min, f->max, x);
}

/* --- filling a struct spec from a tree --- */

/* Free what the slot p of type t owns and zero it. */
static void free_slot(enum spec_type t, void *p)
{
	size_t i;

	switch (t) {
	case SPEC_STR:
	case SPEC_ENUM:
		free(*(char **)p);
		*(char **)p = NULL;
		break;
	case SPEC_INTLIST:
		free(((struct spec_ints *)p)->v);
		memset(p, 0, sizeof(struct spec_ints));
		break;
	case SPEC_NUMLIST:
		free(((struct spec_nums *)p)->v);
		memset(p, 0, sizeof(struct spec_nums));
		break;
	case SPEC_STRLIST: {
		struct spec_strs *l = p;

		for (i = 0; i < l->n; i++)
			free(l->v[i]);
		free(l->v);
		memset(l, 0, sizeof(*l));
		break;
	}
	case SPEC_STRMAP: {
		struct spec_map *m = p;

		for (i = 0; i < m->n; i++) {
			free(m->key[i]);
			free(m->val[i]);
		}
		free(m->key);
		free(m->val);
		memset(m, 0, sizeof(*m));
		break;
	}
	default:
		break;
	}
}

static int set_string(const struct spec__where *w, const struct spec_field *f, json_object *v,
		      char **dst, struct dt_err *err)
{
	const char *s;
	size_t n;
	char hint[64];

	if (!json_object_is_type(v, json_type_string))
		return dt_err_add(err, SPEC__WHERE_FMT ": expected a string (got %s %s)",
				  SPEC__WHERE_ARGS(w, f->path), dt_json_kind(v), spec__json_short(v));
	s = json_object_get_string(v);
	n = strlen(s);
	if (n != (size_t)json_object_get_string_len(v))
		return dt_err_add(err, SPEC__WHERE_FMT ": contains a NUL character", SPEC__WHERE_ARGS(w, f->path));
	if (f->type == SPEC_ENUM) {
		if (!choice_ok(f->choices, s)) {
			const char *c = dt_closest_word(f->choices, '|', s, 3, hint, sizeof(hint));

			if (c)
				return dt_err_add(err, SPEC__WHERE_FMT ": unknown value \"%s\"; did you mean \"%s\"? (one of %s)",
						  SPEC__WHERE_ARGS(w, f->path), s, c, f->choices);
			return dt_err_add(err, SPEC__WHERE_FMT ": unknown value \"%s\" (expected one of %s)",
					  SPEC__WHERE_ARGS(w, f->path), s, f->choices);
		}
	} else {
		if (n < (size_t)f->min || n > (size_t)f->max)
			return dt_err_add(err, SPEC__WHERE_FMT ": length must be between %.0f and %.0f characters (got %zu)",
					  SPEC__WHERE_ARGS(w, f->path), f->min, f->max, n);
		if (spec__check_chars(w, f->path, f->flags, s, err))
			return -EINVAL;
	}
	*dst = strdup(s);
	return *dst ? 0 : -ENOMEM;
}

/* The items of an integer list; every bad item is reported, not only the
 * first. */
static int set_ints(const struct spec__where *w, const struct spec_field *f, json_object *v,
		    size_t n, struct spec_ints *l, struct dt_err *err)
{
	char ipath[SPEC__PATH_MAX + 16];
	size_t i;
	int rc = 0;

	l->v = calloc(n ? n : 1, sizeof(long));
	if (!l->v)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		json_object *e = json_object_array_get_idx(v, i);

		snprintf(ipath, sizeof(ipath), "%s[%zu]", f->path, i);
		if (get_integer(e, &l->v[i])) {
			rc = dt_err_add(err, SPEC__WHERE_FMT ": expected an integer (got %s)",
					SPEC__WHERE_ARGS(w, ipath), spec__json_short(e));
			continue;
		}
		if (check_number(w, ipath, f, (double)l->v[i], true, err))
			rc = -EINVAL;
	}
	l->n = n;
	return rc;
}

/* The items of a number list; every bad item is reported, not only the
 * first. */
static int set_nums(const struct spec__where *w, const struct spec_field *f, json_object *v,
		    size_t n, struct spec_nums *l, struct dt_err *err)
{
	char ipath[SPEC__PATH_MAX + 16];
	size_t i;
	int rc = 0;

	l->v = calloc(n ? n : 1, sizeof(double));
	if (!l->v)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		json_object *e = json_object_array_get_idx(v, i);

		snprintf(ipath, sizeof(ipath), "%s[%zu]", f->path, i);
		if (!json_object_is_type(e, json_type_double) && !json_object_is_type(e, json_type_int)) {
			rc = dt_err_add(err, SPEC__WHERE_FMT ": expected a number (got %s)",
					SPEC__WHERE_ARGS(w, ipath), spec__json_short(e));
			continue;
		}
		l->v[i] = json_object_get_double(e);
		if (check_number(w, ipath, f, l->v[i], false, err))
			rc = -EINVAL;
	}
	l->n = n;
	return rc;
}

/* The items of a string list; every bad item is reported, and only good
 * ones are kept (l->n counts those). */
static int set_strs(const struct spec__where *w, const struct spec_field *f, json_object *v,
		    size_t n, struct spec_strs *l, struct dt_err *err)
{
	char ipath[SPEC__PATH_MAX + 16];
	size_t i;
	int rc = 0;

	l->v = calloc(n ? n : 1, sizeof(char *));
	if (!l->v)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		json_object *e = json_object_array_get_idx(v, i);
		const char *s = json_object_get_string(e);

		snprintf(ipath, sizeof(ipath), "%s[%zu]", f->path, i);
		if (!json_object_is_type(e, json_type_string)) {
			rc = dt_err_add(err, SPEC__WHERE_FMT ": expected a string (got %s)",
					SPEC__WHERE_ARGS(w, ipath), spec__json_short(e));
			continue;
		}
		if (strlen(s) > (size_t)f->max) {
			rc = dt_err_add(err, SPEC__WHERE_FMT ": longer than %.0f characters",
					SPEC__WHERE_ARGS(w, ipath), f->max);
			continue;
		}
		if (spec__check_chars(w, ipath, f->flags, s, err)) {
			rc = -EINVAL;
			continue;
		}
		l->v[l->n] = strdup(s);
		if (!l->v[l->n])
			return -ENOMEM;
		l->n++;
	}
	return rc;
}

static int set_list(const struct spec__where *w, const struct spec_field *f, json_object *v,
		    void *dst, struct dt_err *err)
{
	size_t n;

	if (!json_object_is_type(v, json_type_array))
		return dt_err_add(err, SPEC__WHERE_FMT ": expected an array (got %s %s)",
				  SPEC__WHERE_ARGS(w, f->path), dt_json_kind(v), spec__json_short(v));
	n = json_object_array_length(v);
	if ((f->min_items && n < (size_t)f->min_items) || (f->max_items && n > (size_t)f->max_items)) {
		if (f->min_items == f->max_items)
			return dt_err_add(err, SPEC__WHERE_FMT ": expected exactly %d items (got %zu)",
					  SPEC__WHERE_ARGS(w, f->path), f->min_items, n);
		return dt_err_add(err, SPEC__WHERE_FMT ": expected %d to %d items (got %zu)",
				  SPEC__WHERE_ARGS(w, f->path), f->min_items, f->max_items, n);
	}
	if (f->type == SPEC_INTLIST)
		return set_ints(w, f, v, n, dst, err);
	if (f->type == SPEC_NUMLIST)
		return set_nums(w, f, v, n, dst, err);
	return set_strs(w, f, v, n, dst, err);
}

static bool spec__env_name_ok(const char *k)
{
	if (!(isalpha((unsigned char)k[0]) || k[0] == '_'))
		return false;
	for (k++; *k; k++)
		if (!(isalnum((unsigned char)*k) || *k == '_'))
			return false;
	return true;
}

static int set_map(const struct spec__where *w, const struct spec_field *f, json_object *v,
		   struct spec_map *m, struct dt_err *err)
{
	char kpath[SPEC__PATH_MAX + 64];
	size_t n;
	int rc = 0;

	if (!json_object_is_type(v, json_type_object))
		return dt_err_add(err, SPEC__WHERE_FMT ": expected an object of strings (got %s %s)",
				  SPEC__WHERE_ARGS(w, f->path), dt_json_kind(v), spec__json_short(v));
	n = (size_t)json_object_object_length(v);
	if (f->max_items && n > (size_t)f->max_items)
		return dt_err_add(err, SPEC__WHERE_FMT ": at most %d entries (got %zu)",
				  SPEC__WHERE_ARGS(w, f->path), f->max_items, n);
	m->key = calloc(n ? n : 1, sizeof(char *));
	m->val = calloc(n ? n : 1, sizeof(char *));
	if (!m->key || !m->val)
		return -ENOMEM;
	json_object_object_foreach(v, key, val) {
		snprintf(kpath, sizeof(kpath), "%s.%.64s", f->path, key);
		if (!spec__env_name_ok(key) || strlen(key) > 64) {
			rc = dt_err_add(err, SPEC__WHERE_FMT ": not a valid environment variable name (letters, digits, '_'; not starting with a digit)",
					SPEC__WHERE_ARGS(w, kpath));
			continue;
		}
		if (!json_object_is_type(val, json_type_string)) {
			rc = dt_err_add(err, SPEC__WHERE_FMT ": expected a string (got %s %s)",
					SPEC__WHERE_ARGS(w, kpath), dt_json_kind(val), spec__json_short(val));
			continue;
		}
		if ((size_t)json_object_get_string_len(val) > (size_t)f->max) {
			rc = dt_err_add(err, SPEC__WHERE_FMT ": longer than %.0f characters", SPEC__WHERE_ARGS(w, kpath), f->max);
			continue;
		}
		if (spec__check_chars(w, kpath, f->flags, json_object_get_string(val), err)) {
			rc = -EINVAL;
			continue;
		}
		m->key[m->n] = strdup(key);
		m->val[m->n] = strdup(json_object_get_string(val));
		if (!m->key[m->n] || !m->val[m->n]) {
			free(m->key[m->n]);
			free(m->val[m->n]);
			return -ENOMEM;
		}
		m->n++;
	}
	return rc;
}

/* An integer; one out of bounds is reported and stored all the same. */
static int set_int(const struct spec__where *w, const struct spec_field *f, json_object *v,
		   long *dst, struct dt_err *err)
{
	long x;

	if ((f->flags & SPEC_F_AUTO) && json_object_is_type(v, json_type_string) &&
	    !strcmp(json_object_get_string(v), "auto")) {
		*dst = SPEC_AUTO;
		return 0;
	}
	if (get_integer(v, &x))
		return dt_err_add(err, SPEC__WHERE_FMT ": expected an integer%s (got %s %s)",
				  SPEC__WHERE_ARGS(w, f->path), f->flags & SPEC_F_AUTO ? " or \"auto\"" : "",
				  dt_json_kind(v), spec__json_short(v));
	*dst = x;
	return check_number(w, f->path, f, (double)x, true, err);
}

/* "A-B" or "N": both whole numbers, no sign, no space. */
static int parse_range_text(const char *t, struct spec_range *r)
{
	char *end;

	if (*t < '0' || *t > '9')
		return -EINVAL;
	errno = 0;
	r->min = strtol(t, &end, 10);
	if (errno || (*end && *end != '-'))
		return -EINVAL;
	r->max = r->min;
	if (*end == '-') {
		t = end + 1;
		if (*t < '0' || *t > '9')
			return -EINVAL;
		r->max = strtol(t, &end, 10);
		if (errno || *end)
			return -EINVAL;
	}
	return 0;
}

/* {"min": A, "max": B}, both required, nothing else. */
static int parse_range_object(json_object *v, struct spec_range *r)
{
	json_object *lo, *hi;

	if (json_object_object_length(v) != 2 || !json_object_object_get_ex(v, "min", &lo) ||
	    !json_object_object_get_ex(v, "max", &hi) || get_integer(lo, &r->min) ||
	    get_integer(hi, &r->max))
		return -EINVAL;
	return 0;
}

/* An integer or a range of integers (N, "A-B", {"min": A, "max": B}); one
 * out of bounds is reported and stored all the same. */
static int set_range(const struct spec__where *w, const struct spec_field *f, json_object *v,
		     struct spec_range *dst, struct dt_err *err)
{
	struct spec_range r = {0};
	int bad;

	if (json_object_is_type(v, json_type_string))
		bad = parse_range_text(json_object_get_string(v), &r);
	else if (json_object_is_type(v, json_type_object))
		bad = parse_range_object(v, &r);
	else if (!(bad = get_integer(v, &r.min)))
		r.max = r.min;
	if (bad)
		return dt_err_add(err, SPEC__WHERE_FMT ": expected an integer, a range \"MIN-MAX\" or {\"min\": MIN, \"max\": MAX} (got %s %s)",
				  SPEC__WHERE_ARGS(w, f->path), dt_json_kind(v), spec__json_short(v));
	*dst = r;
	if (r.min > r.max)
		return dt_err_add(err, SPEC__WHERE_FMT ": the range's minimum %ld is above its maximum %ld",
				  SPEC__WHERE_ARGS(w, f->path), r.min, r.max);
	if (check_number(w, f->path, f, (double)r.min, true, err))
		return -EINVAL;
	return check_number(w, f->path, f, (double)r.max, true, err);
}

/* A number; one out of bounds is reported and stored all the same. */
static int set_num(const struct spec__where *w, const struct spec_field *f, json_object *v,
		   double *dst, struct dt_err *err)
{
	if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
		return dt_err_add(err, SPEC__WHERE_FMT ": expected a number (got %s %s)",
				  SPEC__WHERE_ARGS(w, f->path), dt_json_kind(v), spec__json_short(v));
	*dst = json_object_get_double(v);
	return check_number(w, f->path, f, *dst, false, err);
}

/* true or false only: JSON has no truthiness here. */
static int set_bool(const struct spec__where *w, const struct spec_field *f, json_object *v,
		    bool *dst, struct dt_err *err)
{
	if (!json_object_is_type(v, json_type_boolean))
		return dt_err_add(err, SPEC__WHERE_FMT ": expected true or false (got %s %s)",
				  SPEC__WHERE_ARGS(w, f->path), dt_json_kind(v), spec__json_short(v));
	*dst = json_object_get_boolean(v);
	return 0;
}

/* A time limit as sbatch takes it: a Slurm time string or minutes, kept
 * in seconds; bounds are shown as times. */
static int set_time(const struct spec__where *w, const struct spec_field *f, json_object *v,
		    long *dst, struct dt_err *err)
{
	long x;

	if (json_object_is_type(v, json_type_string)) {
		if (spec_parse_time(json_object_get_string(v), &x))
			return dt_err_add(err, SPEC__WHERE_FMT ": not a Slurm time: expected minutes, \"HH:MM:SS\" or \"D-HH:MM:SS\" (got \"%s\")",
					  SPEC__WHERE_ARGS(w, f->path), json_object_get_string(v));
	} else if (!get_integer(v, &x) && x >= 0 && x < 1000000000) {
		x *= 60; /* a bare number is minutes, as in sbatch */
	} else {
		return dt_err_add(err, SPEC__WHERE_FMT ": expected a time string or minutes (got %s)",
				  SPEC__WHERE_ARGS(w, f->path), spec__json_short(v));
	}
	if (x < f->min || x > f->max) {
		char lo[32], hi[32], got[32];

		spec_format_time((long)f->min, lo, sizeof(lo));
		spec_format_time((long)f->max, hi, sizeof(hi));
		spec_format_time(x, got, sizeof(got));
		return dt_err_add(err, SPEC__WHERE_FMT ": must be between %s and %s (got %s)",
				  SPEC__WHERE_ARGS(w, f->path), lo, hi, got);
	}
	*dst = x;
	return 0;
}

/* A memory size: "16G", "512M" or MiB as a number, kept in MiB; one out
 * of bounds is reported and stored all the same. */
static int set_mem(const struct spec__where *w, const struct spec_field *f, json_object *v,
		   long *dst, struct dt_err *err)
{
	long x;

	if (json_object_is_type(v, json_type_string)) {
		if (spec_parse_mem(json_object_get_string(v), &x))
			return dt_err_add(err, SPEC__WHERE_FMT ": not a memory size: expected e.g. \"16G\", \"512M\" or MiB as a number (got \"%s\")",
					  SPEC__WHERE_ARGS(w, f->path), json_object_get_string(v));
	} else if (get_integer(v, &x)) {
		return dt_err_add(err, SPEC__WHERE_FMT ": expected a memory size (got %s)",
				  SPEC__WHERE_ARGS(w, f->path), spec__json_short(v));
	}
	*dst = x;
	return check_number(w, f->path, f, (double)x, true, err);
}

/* null: allowed only for optional fields. A time or memory size becomes 0
 * (unset); strings and lists were emptied by free_slot(); other numbers
 * keep what they held. */
static int set_null(const struct spec__where *w, const struct spec_field *f, void *dst,
		    struct dt_err *err)
{
	if (!(f->flags & SPEC_F_OPTIONAL))
		return dt_err_add(err, SPEC__WHERE_FMT ": must not be null", SPEC__WHERE_ARGS(w, f->path));
	if (f->type == SPEC_TIME || f->type == SPEC_MEM)
		*(long *)dst = 0;
	return 0;
}

/* Check v against f; store it in the struct at base unless base is NULL
 * (check only). */
static int spec__set_value(const struct spec__where *w, const struct spec_field *f, json_object *v,
		     void *base, struct dt_err *err)
{
	union { char *s; long l; double d; bool b; struct spec_ints li;
		struct spec_nums ln; struct spec_strs ls; struct spec_map m;
		struct spec_range r; } scratch;
	void *dst;
	int rc;

	memset(&scratch, 0, sizeof(scratch));
	dst = base ? (char *)base + f->off : (void *)&scratch;
	free_slot(f->type, dst);
	if (json_object_is_type(v, json_type_null))
		return set_null(w, f, dst, err);
	switch (f->type) {
	case SPEC_STR:
	case SPEC_ENUM:
		rc = set_string(w, f, v, dst, err);
		break;
	case SPEC_INT:
		rc = set_int(w, f, v, dst, err);
		break;
	case SPEC_NUM:
		rc = set_num(w, f, v, dst, err);
		break;
	case SPEC_BOOL:
		rc = set_bool(w, f, v, dst, err);
		break;
	case SPEC_TIME:
		rc = set_time(w, f, v, dst, err);
		break;
	case SPEC_MEM:
		rc = set_mem(w, f, v, dst, err);
		break;
	case SPEC_INTLIST:
	case SPEC_NUMLIST:
	case SPEC_STRLIST:
		rc = set_list(w, f, v, dst, err);
		break;
	case SPEC_STRMAP:
		rc = set_map(w, f, v, dst, err);
		break;
	case SPEC_RANGE:
		rc = set_range(w, f, v, dst, err);
		break;
	default:
		rc = -EINVAL;
	}
	if (!base)
		free_slot(f->type, dst);
	return rc;
}

int spec_field_set(const struct spec_field *f, json_object *v, void *base,
		   const char *label, const char *prefix, struct dt_err *err)
{
	struct spec__where w = { label, prefix };

	return spec__set_value(&w, f, v, base, err);
}

void spec_field_free(const struct spec_field *f, void *base)
{
	free_slot(f->type, (char *)base + f->off);
}

/* Is there any field under "prefix."? */
static bool is_section(const char *prefix)
{
	size_t n, i, len = strlen(prefix);
	const struct spec_field *f = spec_fields(&n);

	for (i = 0; i < n; i++)
		if (!strncmp(f[i].path, prefix, len) && f[i].path[len] == '.')
			return true;
	return false;
}

/* The known path closest to an unknown one: same parent and a small edit
 * distance, or any path whose last part is the unknown key. */
static const char *suggest_path(const char *path)
{
	const char *dot = strrchr(path, '.');
	const char *leaf = dot ? dot + 1 : path;
	size_t parent_len = dot ? (size_t)(dot - path) : 0;
	size_t n, i;
	const struct spec_field *f = spec_fields(&n);
	const char *best = NULL;
	int best_d = 3;

	for (i = 0; i < n; i++) {
		const char *fp = f[i].path;
		const char *fdot = strrchr(fp, '.');
		const char *fleaf = fdot ? fdot + 1 : fp;
		char sect[SPEC__PATH_MAX];
		int d;

		/* Same parent: compare the leaf, or the section name at this level. */
		if (strlen(fp) > parent_len && !strncmp(fp, path, parent_len) &&
		    (parent_len == 0 || fp[parent_len] == '.')) {
			const char *rest = fp + parent_len + (parent_len ? 1 : 0);
			const char *rdot = strchr(rest, '.');
			size_t rn = rdot ? (size_t)(rdot - rest) : strlen(rest);

			if (rn < sizeof(sect)) {
				memcpy(sect, rest, rn);
				sect[rn] = '\0';
				d = dt_edit_distance(leaf, sect);
				if (d < best_d) {
					best_d = d;
					best = fp;
				}
			}
		}
		if (!strcmp(fleaf, leaf) && best_d > 0 && !best) {
			best = fp;
			best_d = 2;
		}
	}
	return best;
}

struct spec__layers;
static struct spec__where spec__origin(struct spec__layers *l, const char *path);

/* Walk obj (the node at `path`, "" for the root): check every key against the
 * table and fill s (NULL: check only). Messages name where each value came
 * from: spec__origin(l, path) when l is set, else *fixed. */
static int spec__walk_tree(struct spec__layers *l, const struct spec__where *fixed, json_object *obj,
		     const char *path, struct spec *s, struct dt_err *err)
{
	char full[SPEC__PATH_MAX];
	int rc = 0;

	json_object_object_foreach(obj, key, val) {
		const struct spec_field *f;
		struct spec__where w;
		int n = snprintf(full, sizeof(full), "%s%s%s", path, *path ? "." : "", key);
		const char *dot = strchr(key, '.');

		if (dot) {
			/* a dotted key is no path: the user's file wrote it (--set
			 * splits its paths, the site's defaults were checked alone) */
			w = l ? spec__origin(l, "") : *fixed; /* the file */
			rc = dt_err_add(err, "%s: \"%s%s%s%s\": keys are nested objects, not dotted paths (write \"%.*s\": {\"%s\": ...})",
					w.label, w.prefix, path, *path ? "." : "", key, (int)(dot - key), key, dot + 1);
			continue;
		}

		w = l ? spec__origin(l, path) : *fixed;
		if (n < 0 || (size_t)n >= sizeof(full)) {
			rc = dt_err_add(err, SPEC__WHERE_FMT ": key too long", SPEC__WHERE_ARGS(&w, path));
			continue;
		}
		w = l ? spec__origin(l, full) : *fixed;
		f = spec_field_find(full);
		if (f) {
			if (spec__set_value(&w, f, val, s, err))
				rc = -EINVAL;
		} else if (is_section(full)) {
			if (!json_object_is_type(val, json_type_object))
				rc = dt_err_add(err, SPEC__WHERE_FMT ": expected an object (got %s %s)",
						SPEC__WHERE_ARGS(&w, full), dt_json_kind(val), spec__json_short(val));
			else if (spec__walk_tree(l, fixed, val, full, s, err))
				rc = -EINVAL;
		} else {
			const char *hint = suggest_path(full);

			if (hint)
				rc = dt_err_add(err, SPEC__WHERE_FMT ": unknown key; did you mean \"%s\"?",
						SPEC__WHERE_ARGS(&w, full), hint);
			else
				rc = dt_err_add(err, SPEC__WHERE_FMT ": unknown key (see jobs/README.md for every key)",
						SPEC__WHERE_ARGS(&w, full));
		}
	}
	return rc;
}

int spec_check_fragment(json_object *obj, const char *label, const char *prefix,
			struct dt_err *err)
{
	struct spec__where w = { label, prefix };

	if (!json_object_is_type(obj, json_type_object))
		return dt_err_add(err, "%s: %s: expected an object (got %s)", label, prefix,
				  dt_json_kind(obj));
	return spec__walk_tree(NULL, &w, obj, "", NULL, err);
}

/* --- layers and origins --- */

struct spec__layers {
	const char *file;            /* the user's spec file */
	json_object *user;           /* its tree, with the --set values in it */
	const struct spec_policy *policy; /* NULL: none */
	char **set_keys;             /* paths given with --set */
	size_t n_sets;
	char site_label[4096 + 16];
};

/* Where the value at path (or above it) came from. */
static struct spec__where spec__origin(struct spec__layers *l, const char *path)
{
	struct spec__where w = { l->file, "" };
	size_t i;

	for (i = 0; i < l->n_sets; i++) {
		size_t n = strlen(l->set_keys[i]);

		if (!strncmp(path, l->set_keys[i], n) && (path[n] == '\0' || path[n] == '.'))
			return (struct spec__where){ "--set", "" };
	}
	if (spec__tree_get(l->user, path))
		return w;
	if (l->policy && l->policy->defaults && spec__tree_get(l->policy->defaults, path))
		return (struct spec__where){ l->site_label, "defaults." };
	return w;
}

static const char *spec__origin_label(void *ctx, const char *path)
{
	struct spec__layers *l = ctx;

	return spec__origin(l, path).label;
}

/* Parse the value of --set for field f: strings stay text unless quoted. */
static json_object *set_value_json(const struct spec_field *f, const char *text)
{
	bool stringy = !f || f->type == SPEC_STR || f->type == SPEC_ENUM ||
		       f->type == SPEC_TIME || f->type == SPEC_MEM ||
		       ((f->flags & SPEC_F_AUTO) && !strcmp(text, "auto")) ||
		       (f->type == SPEC_RANGE && text[0] >= '0' && text[0] <= '9' && strchr(text, '-'));

	if (stringy && strcmp(text, "null") && text[0] != '"')
		return json_object_new_string(text);
	return json_tokener_parse(text);
}

/* What --set's value of field f must look like, by the field's type. */
static const char *set_expected(const struct spec_field *f)
{
	if (!f)
		return NULL; /* a section: any JSON */
	switch (f->type) {
	case SPEC_INT:
		return f->flags & SPEC_F_AUTO ? "an integer or \"auto\"" : "an integer";
	case SPEC_NUM:
		return "a number";
	case SPEC_BOOL:
		return "true or false";
	case SPEC_INTLIST:
		return "a list of integers, like [1,2]";
	case SPEC_NUMLIST:
		return "a list of numbers, like [0.5,1]";
	case SPEC_STRLIST:
		return "a list of strings, like [\"a\",\"b\"]";
	case SPEC_STRMAP:
		return "an object, like {\"KEY\": \"VALUE\"}";
	case SPEC_RANGE:
		return "an integer or a range \"MIN-MAX\"";
	default:
		return NULL;
	}
}

static int spec__apply_sets(struct spec__layers *l, const char *const *sets, size_t n, struct dt_err *err)
{
	size_t i;
	int rc = 0;

	l->set_keys = calloc(n ? n : 1, sizeof(char *));
	if (!l->set_keys)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		const char *eq = strchr(sets[i], '=');
		const struct spec_field *f;
		json_object *v;
		char *key;

		if (!eq || eq == sets[i]) {
			rc = dt_err_add(err, "--set: %s: expected KEY=VALUE, e.g. --set train.epochs=5", sets[i]);
			continue;
		}
		key = strndup(sets[i], (size_t)(eq - sets[i]));
		if (!key)
			return -ENOMEM;
		l->set_keys[l->n_sets++] = key;
		f = spec_field_find(key);
		if (!f && !strncmp(key, "env.", 4) && key[4]) {
			if (!spec__env_name_ok(key + 4)) {
				rc = dt_err_add(err, "--set: %s: not a valid environment variable name", key);
				continue;
			}
		} else if (!f && !is_section(key)) {
			const char *hint = suggest_path(key);

			if (hint)
				rc = dt_err_add(err, "--set: %s: unknown key; did you mean \"%s\"?", key, hint);
			else
				rc = dt_err_add(err, "--set: %s: unknown key (see jobs/README.md for every key)", key);
			continue;
		}
		v = set_value_json(f, eq + 1);
		if (!v && strcmp(eq + 1, "null") && set_expected(f)) {
			rc = dt_err_add(err, "--set: %s: expected %s (got \"%s\")", key, set_expected(f), eq + 1);
			continue;
		}
		if (!v && strcmp(eq + 1, "null")) {
			rc = dt_err_add(err, "--set: %s: cannot parse \"%s\" as JSON (strings need no quotes; lists look like [1,2])",
					key, eq + 1);
			continue;
		}
		if (spec__tree_set(l->user, key, v))
			return -ENOMEM;
	}
	return rc;
}

/* path matches the pattern "env.PREFIX*" (env keys only). */
static bool env_pattern_covers(const char *pattern, const char *path)
{
	size_t n = strlen(pattern);

	return n >= 5 && pattern[n - 1] == '*' && !strncmp(pattern, "env.", 4) &&
	       !strncmp(path, "env.", 4) && path[4] && !strchr(path + 4, '.') &&
	       !strncmp(path, pattern, n - 1);
}

const char *spec_path_covered(const struct spec_strs *paths, const char *path)
{
	size_t i, n;

	for (i = 0; paths && i < paths->n; i++) {
		n = strlen(paths->v[i]);
		if (env_pattern_covers(paths->v[i], path))
			return paths->v[i];
		if (!strncmp(path, paths->v[i], n) && (path[n] == '\0' || path[n] == '.'))
			return paths->v[i];
	}
	return NULL;
}

bool spec_env_listed(const struct spec_strs *names, const char *name)
{
	size_t i, n;

	for (i = 0; names && i < names->n; i++) {
		n = strlen(names->v[i]);
		if (n && names->v[i][n - 1] == '*' ? !strncmp(name, names->v[i], n - 1) :
						      !strcmp(name, names->v[i]))
			return true;
	}
	return false;
}

const char *spec_env_starts_job(const char *name)
{
	if (!strncmp(name, "LD_", 3))
		return "the dynamic loader";
	if (!strcmp(name, "PATH"))
		return "which programs run, srun among them";
	if (!strncmp(name, "SLURM_", 6) || !strncmp(name, "SBATCH_", 7))
		return "Slurm's settings of the job";
	if (!strncmp(name, "DTRAIN_FAULT_", 13))
		return "dtrain's fault injection";
	if (!strcmp(name, "BASH_ENV") || !strcmp(name, "ENV"))
		return "a file every shell of the job runs first";
	return NULL;
}

/* A value under a lock: each of its leaves is reported where it came from
 * (the spec file, or --set, which makes the sections above its key: a
 * section holding only --set keys is not the file's). */
static int report_locked(struct spec__layers *l, json_object *val, const char *full, const char *lock,
			 struct dt_err *err)
{
	char sub[SPEC__PATH_MAX];
	struct spec__where w;

	/* an object that is one key's value (a range's {"min", "max"}) is a leaf */
	if (json_object_is_type(val, json_type_object) && json_object_object_length(val) > 0 &&
	    !spec_field_find(full)) {
		json_object_object_foreach(val, key, child) {
			snprintf(sub, sizeof(sub), "%s.%s", full, key);
			report_locked(l, child, sub, lock, err);
		}
		return -EINVAL;
	}
	w = spec__origin(l, full);
	return dt_err_add(err, SPEC__WHERE_FMT ": locked by the site (%s: locked: \"%s\"); remove it from the spec",
			  SPEC__WHERE_ARGS(&w, full), l->policy->label ? l->policy->label : "site", lock);
}

/* The entry of paths that covers path by name, not as a pattern; NULL
 * when none does. */
static const char *exact_cover(const struct spec_strs *paths, const char *path)
{
	size_t i, n;

	for (i = 0; paths && i < paths->n; i++) {
		n = strlen(paths->v[i]);
		if (paths->v[i][n - 1] != '*' && !strncmp(path, paths->v[i], n) &&
		    (path[n] == '\0' || path[n] == '.'))
			return paths->v[i];
	}
	return NULL;
}

/* Every node of the user's layer that a site lock covers is an error. */
static int spec__check_locks(struct spec__layers *l, json_object *obj, const char *path, struct dt_err *err)
{
	char full[SPEC__PATH_MAX];
	int rc = 0;

	json_object_object_foreach(obj, key, val) {
		const char *lock;

		snprintf(full, sizeof(full), "%s%s%s", path, *path ? "." : "", key);
		if (strchr(key, '.'))
			continue; /* refused as a dotted key (spec__walk_tree), not taken for a path */
		lock = spec_path_covered(l->policy->locked, full);
		/* a pattern's lock ("env.*") spares the variables the site allows,
		 * an exact one ("env.NAME", or "env") does not */
		if (lock && lock[strlen(lock) - 1] == '*' &&
		    spec_env_listed(l->policy->env_allowed, full + 4))
			lock = exact_cover(l->policy->locked, full);
		if (lock) {
			rc = report_locked(l, val, full, lock, err);
			continue;
		}
		if (json_object_is_type(val, json_type_object) && spec__check_locks(l, val, full, err))
			rc = -EINVAL;
	}
	return rc;
}

/* A resolved spec's (a run dir's spec.json, resumed) values of the keys the
 * site locks: dropped, so that the site's values now fill them again, as
 * for a new submit. */
static void spec__drop_locked(struct spec__layers *l, json_object *obj, const char *path)
{
	char full[SPEC__PATH_MAX], *gone[64];
	int n = 0, i;

	json_object_object_foreach(obj, key, val) {
		snprintf(full, sizeof(full), "%s%s%s", path, *path ? "." : "", key);
		if (spec_path_covered(l->policy->locked, full)) {
			if (n < 64 && (gone[n] = strdup(key)) != NULL)
				n++;
		} else if (json_object_is_type(val, json_type_object)) {
			spec__drop_locked(l, val, full);
		}
	}
	for (i = 0; i < n; i++) {
		json_object_object_del(obj, gone[i]);
		free(gone[i]);
	}
}

/* The user's env keys that change how the job starts, unless the site
 * allows them (spec_env_starts_job). */
static int spec__check_env_keys(struct spec__layers *l, struct dt_err *err)
{
	json_object *env = NULL;
	char full[SPEC__PATH_MAX];
	const char *what;
	struct spec__where w;
	int rc = 0;

	if (!json_object_object_get_ex(l->user, "env", &env) ||
	    !json_object_is_type(env, json_type_object))
		return 0;
	json_object_object_foreach(env, key, val) {
		(void)val;
		what = spec_env_starts_job(key);
		if (!what || (l->policy && spec_env_listed(l->policy->env_allowed, key)))
			continue;
		snprintf(full, sizeof(full), "env.%s", key);
		w = spec__origin(l, full);
		rc = dt_err_add(err, SPEC__WHERE_FMT ": changes how the job starts (%s); a job spec may set it only where the site allows it (env_allow in the site file, site/README.md)",
				SPEC__WHERE_ARGS(&w, full), what);
	}
	return rc;
}

/* --- cross-field rules --- */

/* what spec_layers counts, for messages */
static const char *spec_blocks_are(const struct spec *s)
{
	if (s->model.type && !strcmp(s->model.type, "gpt"))
		return "blocks (embedding + model.layers + head)";
	return "layers (model.hidden + output)";
}

/* Where the values a rule relates came from, for its message: "--set"
 * when every one of keys (NULL-terminated) came from --set, the file when
 * every one came from it, else the places joined ("--set and job.json"). */
static const char *rule_from(struct spec__layers *l, const char *const *keys, char *buf, size_t size)
{
	const char *first = spec__origin(l, keys[0]).label, *other = NULL;
	size_t i;

	for (i = 1; keys[i]; i++) {
		const char *o = spec__origin(l, keys[i]).label;

		if (strcmp(o, first))
			other = o;
	}
	if (!other)
		return first;
	snprintf(buf, size, "%s and %s", first, other);
	return buf;
}

#define FROM(...) rule_from(l, (const char *const[]){ __VA_ARGS__, NULL }, from, sizeof(from))

/* A fixed parallel.data: one layout, data x pipeline on the nodes asked. */
static int check_fixed_layout(const struct spec *s, struct spec__layers *l, struct dt_err *err)
{
	char from[600];
	long nodes = s->resources.nodes.min;
	long tasks = nodes * s->resources.tasks_per_node;
	long grid = s->parallel.data * s->parallel.pipeline;
	long per_step = s->parallel.data * s->parallel.micro_batches;
	int rc = 0;

	if (nodes != s->resources.nodes.max)
		return dt_err_add(err, "%s: parallel.data: must be \"auto\" when resources.nodes is a range (%ld-%ld): the replicas follow the nodes Slurm grants (got %ld)",
				  FROM("parallel.data", "resources.nodes"), nodes,
				  s->resources.nodes.max, s->parallel.data);
	if (tasks != grid)
		rc = dt_err_add(err, "%s: parallel: data x pipeline (%ld x %ld = %ld) must equal resources.nodes x resources.tasks_per_node (%ld x %ld = %ld)",
				FROM("parallel.data", "parallel.pipeline", "resources.nodes",
				     "resources.tasks_per_node"),
				s->parallel.data, s->parallel.pipeline, grid,
				nodes, s->resources.tasks_per_node, tasks);
	if (s->train.global_batch % per_step)
		rc = dt_err_add(err, "%s: train.global_batch: must be divisible by parallel.data*parallel.micro_batches = %ld (got %ld)",
				FROM("train.global_batch", "parallel.data", "parallel.micro_batches"),
				per_step, s->train.global_batch);
	return rc;
}

/* parallel.data "auto": a layout at every node count Slurm may grant. */
static int check_auto_layouts(const struct spec *s, struct spec__layers *l, struct dt_err *err)
{
	char from[600], why[256];
	long n;

	for (n = s->resources.nodes.min; n <= s->resources.nodes.max; n++) {
		long ranks = n * s->resources.tasks_per_node;

		if (spec_data_for(s, ranks, why, sizeof(why)))
			continue;
		return dt_err_add(err, "%s: resources.nodes: parallel.data is \"auto\" but %ld node%s (%ld ranks) give no layout: %s%s",
				  FROM("resources.nodes", "resources.tasks_per_node", "parallel.pipeline",
				       "train.global_batch", "parallel.micro_batches"),
				  n, n == 1 ? "" : "s", ranks, why,
				  s->resources.nodes.min < s->resources.nodes.max ?
					  "; hint: every node count of the range must work" : "");
	}
	return 0;
}

static int spec__check_rules(const struct spec *s, struct spec__layers *l, struct dt_err *err)
{
	char from[600];
	int rc;

	if (s->parallel.data == SPEC_AUTO)
		rc = check_auto_layouts(s, l, err);
	else
		rc = check_fixed_layout(s, l, err);
	if (s->resources.time_min_s > 0 && s->resources.time_s > 0 &&
	    s->resources.time_min_s > s->resources.time_s)
		rc = dt_err_add(err, "%s: resources.time_min: %ld s is above resources.time (%ld s)",
				FROM("resources.time_min", "resources.time"), s->resources.time_min_s,
				s->resources.time_s);
	/* backfill may start the job with time_min: its warning must come after the start */
	if (s->resources.time_min_s > 0 && s->preemption.signal &&
	    s->preemption.lead_seconds >= s->resources.time_min_s)
		rc = dt_err_add(err, "%s: preemption.lead_seconds: %ld s is not less than resources.time_min (%ld s)",
				FROM("preemption.lead_seconds", "resources.time_min"),
				s->preemption.lead_seconds, s->resources.time_min_s);
	if (s->model.type && !strcmp(s->model.type, "gpt") && s->model.embd % s->model.heads)
		rc = dt_err_add(err, "%s: model.heads: must divide model.embd (got %ld heads, embd %ld)",
				FROM("model.heads", "model.embd"), s->model.heads, s->model.embd);
	if (s->parallel.pipeline > spec_layers(s))
		rc = dt_err_add(err, "%s: parallel.pipeline: %ld stages but the model has only %ld %s",
				FROM("parallel.pipeline", "model"), s->parallel.pipeline, spec_layers(s),
				spec_blocks_are(s));
	if (s->parallel.stage_layers.n) {
		long sum = 0;
		size_t i;

		for (i = 0; i < s->parallel.stage_layers.n; i++)
			sum += s->parallel.stage_layers.v[i];
		if ((long)s->parallel.stage_layers.n != s->parallel.pipeline || sum != spec_layers(s))
			rc = dt_err_add(err, "%s: parallel.stage_layers: must list parallel.pipeline = %ld stages whose %s add up to %ld (got %zu stages, %ld)",
					FROM("parallel.stage_layers", "parallel.pipeline", "model"),
					s->parallel.pipeline, spec_blocks_are(s), spec_layers(s),
					s->parallel.stage_layers.n, sum);
	}
	if (s->parallel.grad_sync && !strcmp(s->parallel.grad_sync, "split") && s->parallel.pipeline > 1)
		rc = dt_err_add(err, "%s: parallel.grad_sync: \"split\" cuts every layer between the replicas of a node and needs parallel.pipeline = 1 (got %ld); use \"shared\" or \"auto\" with a pipeline",
				FROM("parallel.grad_sync", "parallel.pipeline"), s->parallel.pipeline);
	if (spec_optimizer_sharded(s) && s->parallel.grad_sync &&
	    (!strcmp(s->parallel.grad_sync, "shared") || !strcmp(s->parallel.grad_sync, "split")))
		rc = dt_err_add(err, "%s: parallel.optimizer: \"sharded\" reduce-scatters gradients between the replicas and cannot be combined with parallel.grad_sync \"%s\", which shares one copy per node; use \"allreduce\" or \"auto\"",
				FROM("parallel.optimizer", "parallel.grad_sync"), s->parallel.grad_sync);
	if (s->parallel.threads && !strcmp(s->parallel.threads, "split") && s->parallel.pipeline > 1)
		rc = dt_err_add(err, "%s: parallel.threads: \"split\" cuts every layer between a rank's threads and needs parallel.pipeline = 1 (got %ld); use \"blas\" or \"auto\" with a pipeline",
				FROM("parallel.threads", "parallel.pipeline"), s->parallel.pipeline);
	if (!strcmp(s->train.device, "cuda") && s->resources.gpus_per_node < 1)
		rc = dt_err_add(err, "%s: resources.gpus_per_node: train.device is \"cuda\" but no GPUs are requested; set resources.gpus_per_node",
				FROM("train.device", "resources.gpus_per_node"));
	if (s->train.epochs == 0 && s->train.max_steps == 0)
		rc = dt_err_add(err, "%s: train.epochs: 0 epochs and no train.max_steps: nothing to train",
				FROM("train.epochs", "train.max_steps"));
	if (s->train.lr_schedule.min_lr > s->train.optimizer.lr)
		rc = dt_err_add(err, "%s: train.lr_schedule.min_lr: %g is above train.optimizer.lr %g",
				FROM("train.lr_schedule.min_lr", "train.optimizer.lr"),
				s->train.lr_schedule.min_lr, s->train.optimizer.lr);
	if (s->checkpoint.init_from && strcmp(s->checkpoint.resume, "auto") &&
	    strcmp(s->checkpoint.resume, "never"))
		rc = dt_err_add(err, "%s: checkpoint.init_from: a run starts either from checkpoint.resume's checkpoint (its whole state) or from init_from's model (fresh optimizer, step 0), not both",
				FROM("checkpoint.init_from", "checkpoint.resume"));
	if (s->checkpoint.init_fresh.n && !s->checkpoint.init_from)
		rc = dt_err_add(err, "%s: checkpoint.init_fresh: names tensors kept fresh in a model taken from checkpoint.init_from, which is not set",
				FROM("checkpoint.init_fresh"));
	if (s->resources.time_s > 0 && s->preemption.lead_seconds >= s->resources.time_s)
		rc = dt_err_add(err, "%s: preemption.lead_seconds: %ld s is not less than resources.time (%ld s)",
				FROM("preemption.lead_seconds", "resources.time"), s->preemption.lead_seconds,
				s->resources.time_s);
	return rc;
}

#undef FROM

/* --- public entry points --- */

/* Fill *out from the table defaults, then from the merged tree. */
static int fill(struct spec__layers *l, json_object *tree, struct spec *out, struct dt_err *err)
{
	size_t n, i;
	const struct spec_field *f = spec_fields(&n);
	struct spec__where def = { "spec table default", "" };
	int rc = 0;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < n; i++) {
		json_object *v = json_tokener_parse(f[i].def);

		/* A table default that does not parse or check is a bug here. */
		if ((!v && strcmp(f[i].def, "null")) || spec__set_value(&def, &f[i], v, out, err))
			rc = -EINVAL;
		json_object_put(v);
	}
	if (rc)
		return rc;
	return spec__walk_tree(l, NULL, tree, "", out, err);
}

/* Make a path value absolute: "~/" is $HOME, relative paths are taken from
 * the current directory (where dtrain-submit runs). */
static int absolutize(char **val, const char *file, const char *key, struct dt_err *err)
{
	struct dt_buf b = {0};
	char *abs;

	if (!*val)
		return 0;
	if (!strncmp(*val, "~/", 2)) {
		const char *home = getenv("HOME");

		if (!home || !*home)
			return dt_err_add(err, "%s: %s: starts with ~/ but HOME is not set", file, key);
		if (dt_buf_printf(&b, "%s/%s", home, *val + 2))
			return -ENOMEM;
	} else if (dt_buf_puts(&b, *val)) {
		return -ENOMEM;
	}
	abs = dt_abspath(b.p);
	dt_buf_free(&b);
	if (!abs)
		return -ENOMEM;
	free(*val);
	*val = abs;
	return 0;
}

static int resolve_paths(struct spec *s, const char *file, struct dt_err *err)
{
	struct spec__where w = { file, "" };
	int rc = 0;

	if (absolutize(&s->data.train, file, "data.train", err) ||
	    absolutize(&s->data.test, file, "data.test", err) ||
	    absolutize(&s->checkpoint.dir, file, "checkpoint.dir", err) ||
	    absolutize(&s->checkpoint.init_from, file, "checkpoint.init_from", err))
		rc = -EINVAL;
	if (s->checkpoint.resume && strcmp(s->checkpoint.resume, "auto") &&
	    strcmp(s->checkpoint.resume, "never") &&
	    absolutize(&s->checkpoint.resume, file, "checkpoint.resume", err))
		rc = -EINVAL;
	if (absolutize(&s->run_dir, file, "run_dir", err))
		return -EINVAL;
	if (!s->run_dir)
		return rc;
	if (strchr(s->run_dir, '~'))
		return dt_err_add(err, "%s: run_dir: '~' is only expanded at the start (got \"%s\")",
				  file, s->run_dir);
	if (spec__check_chars(&w, "run_dir", spec_field_find("run_dir")->flags, s->run_dir, err))
		return -EINVAL;
	return rc;
}

/* sbatch's -n on the resolved nodes: tasks_per_node = ntasks / nodes, unless
 * it does not divide or the site locked tasks_per_node at another value */
static int apply_ntasks(struct spec__layers *l, long ntasks, struct spec *out, struct dt_err *err)
{
	long nodes = out->resources.nodes.min;
	const char *lock = l->policy ? spec_path_covered(l->policy->locked, "resources.tasks_per_node") : NULL;

	const struct spec_field *f = spec_field_find("resources.tasks_per_node");

	if (nodes != out->resources.nodes.max)
		return dt_err_add(err, "-n %ld: resources.nodes is a range (%ld-%ld, from %s): the tasks follow the nodes granted; set resources.tasks_per_node instead",
				  ntasks, nodes, out->resources.nodes.max, spec__origin(l, "resources.nodes").label);
	if (ntasks % nodes)
		return dt_err_add(err, "-n %ld: not a multiple of resources.nodes (%ld, from %s); hint: -N sets the nodes",
				  ntasks, nodes, spec__origin(l, "resources.nodes").label);
	if (f && (double)(ntasks / nodes) > f->max)
		return dt_err_add(err, "-n %ld: %ld tasks on each of %ld nodes, more than resources.tasks_per_node's %.0f",
				  ntasks, ntasks / nodes, nodes, f->max);
	if (lock && ntasks / nodes != out->resources.tasks_per_node)
		return dt_err_add(err, "-n %ld: resources.tasks_per_node is locked by %s at %ld (%ld tasks on %ld nodes)",
				  ntasks, l->site_label, out->resources.tasks_per_node,
				  out->resources.tasks_per_node * nodes, nodes);
	out->resources.tasks_per_node = ntasks / nodes;
	return 0;
}

int spec_resolve(const struct spec_input *in, struct spec *out, struct dt_err *err)
{
	struct spec__layers l;
	json_object *merged = NULL;
	size_t i;
	int rc, bad;

	memset(&l, 0, sizeof(l));
	memset(out, 0, sizeof(*out));
	l.file = in->path;
	l.policy = in->policy;
	if (in->policy && in->policy->label)
		snprintf(l.site_label, sizeof(l.site_label), "%s", in->policy->label);
	rc = spec_json_load(in->path, &l.user, err);
	if (rc)
		goto out;
	if (in->resolved && in->policy && in->policy->locked)
		spec__drop_locked(&l, l.user, "");
	/* Report every problem at once: bad --set values and locked keys do
	 * not stop the checks of the rest. */
	bad = spec__apply_sets(&l, in->sets, in->n_sets, err);
	if (bad == -ENOMEM || (in->policy && spec__check_locks(&l, l.user, "", err)))
		bad = bad ? bad : -EINVAL;
	/* a resolved spec read by dtrain-run was checked when it was made; one
	 * resumed under a policy (dtrain-submit resume) is checked again */
	if (bad != -ENOMEM && (!in->resolved || in->policy) && spec__check_env_keys(&l, err))
		bad = bad ? bad : -EINVAL;
	if (bad == -ENOMEM) {
		rc = bad;
		goto out;
	}
	merged = json_object_new_object();
	if (!merged) {
		rc = -ENOMEM;
		goto out;
	}
	if (in->policy && in->policy->defaults && (rc = spec__tree_merge(merged, in->policy->defaults)))
		goto out;
	if ((rc = spec__tree_merge(merged, l.user)))
		goto out;
	rc = fill(&l, merged, out, err);
	/* train.max_steps alone bounds the run: epochs left at the default do
	 * not cut it short (as Lightning's max_steps without max_epochs) */
	if (!rc && out->train.max_steps > 0 && !spec__tree_get(merged, "train.epochs"))
		out->train.epochs = 0;
	if (!rc && in->ntasks > 0)
		rc = apply_ntasks(&l, in->ntasks, out, err);
	if (rc)
		goto out;
	/* Cross-field rules and limits only make sense on well-typed values. */
	rc = resolve_paths(out, in->path, err);
	if (spec__check_rules(out, &l, err))
		rc = -EINVAL;
	if (in->policy && in->policy->check &&
	    in->policy->check(in->policy->ctx, out, spec__origin_label, &l, err))
		rc = -EINVAL;
	if (bad)
		rc = -EINVAL;
out:
	if (rc == -ENOMEM)
		dt_err_add(err, "%s: out of memory while resolving the spec", in->path);
	if (rc)
		spec_free(out);
	for (i = 0; i < l.n_sets; i++)
		free(l.set_keys[i]);
	free(l.set_keys);
	json_object_put(merged);
	json_object_put(l.user);
	return rc;
}

int spec_load(const char *path, struct spec *out, struct dt_err *err)
{
	struct spec_input in = { .path = path, .resolved = true };

	return spec_resolve(&in, out, err);
}

void spec_free(struct spec *s)
{
	size_t n, i;
	const struct spec_field *f = spec_fields(&n);

	for (i = 0; i < n; i++)
		spec_field_free(&f[i], s);
	memset(s, 0, sizeof(*s));
}

/* --- queries --- */

long spec_layers(const struct spec *s)
{
	if (s->model.type && !strcmp(s->model.type, "gpt"))
		return s->model.layers + 2;
	return (long)s->model.hidden.n + 1;
}

long spec_data_for(const struct spec *s, long ranks, char *why, size_t why_size)
{
	long data = s->parallel.data, stages = s->parallel.pipeline, per_step;

	if (data == SPEC_AUTO) {
		if (ranks % stages) {
			snprintf(why, why_size, "%ld rank%s cannot be split into parallel.pipeline = %ld stages",
				 ranks, ranks == 1 ? "" : "s", stages);
			return 0;
		}
		data = ranks / stages;
	} else if (data * stages != ranks) {
		snprintf(why, why_size, "parallel: data x pipeline (%ld x %ld = %ld) must equal the %ld ranks",
			 data, stages, data * stages, ranks);
		return 0;
	}
	per_step = data * s->parallel.micro_batches;
	if (s->train.global_batch % per_step) {
		snprintf(why, why_size, "train.global_batch %ld is not divisible by data x parallel.micro_batches = %ld x %ld",
			 s->train.global_batch, data, s->parallel.micro_batches);
		return 0;
	}
	return data;
}

bool spec_optimizer_sharded(const struct spec *s)
{
	return s->parallel.optimizer && !strcmp(s->parallel.optimizer, "sharded");
}

void spec_format_time(long t, char *buf, size_t size)
{
	long d = t / 86400, h = t / 3600 % 24, m = t / 60 % 60, sec = t % 60;

	if (d)
		snprintf(buf, size, "%ld-%02ld:%02ld:%02ld", d, h, m, sec);
	else
		snprintf(buf, size, "%02ld:%02ld:%02ld", h, m, sec);
}

/* Reads up to `max` colon-separated unsigned numbers; returns how many. */
static int read_fields(const char *s, long *v, int max, const char **end)
{
	int n = 0;

	while (n < max) {
		char *e;
		long x;

		if (!isdigit((unsigned char)*s))
			return -1;
		errno = 0;
		x = strtol(s, &e, 10);
		if (errno || x > 100000000)
			return -1;
		v[n++] = x;
		s = e;
		if (*s != ':')
			break;
		s++;
	}
	*end = s;
	return n;
}

int spec_parse_time(const char *s, long *seconds)
{
	long v[3] = {0}, days = 0, t;
	const char *dash = strchr(s, '-'), *end;
	int n;

	if (dash) {
		char *e;

		if (!isdigit((unsigned char)*s))
			return -EINVAL;
		days = strtol(s, &e, 10);
		if (e != dash || days > 10000)
			return -EINVAL;
		n = read_fields(dash + 1, v, 3, &end);
		if (n < 1 || *end)
			return -EINVAL;
		/* days-hours[:minutes[:seconds]] */
		t = v[0] * 3600 + (n > 1 ? v[1] * 60 : 0) + (n > 2 ? v[2] : 0);
	} else {
		n = read_fields(s, v, 3, &end);
		if (n < 1 || *end)
			return -EINVAL;
		/* minutes, minutes:seconds, hours:minutes:seconds */
		t = n == 1 ? v[0] * 60 : n == 2 ? v[0] * 60 + v[1] : v[0] * 3600 + v[1] * 60 + v[2];
	}
	*seconds = days * 86400 + t;
	return 0;
}

int spec_parse_mem(const char *s, long *mib)
{
	char *e;
	long x;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	x = strtol(s, &e, 10);
	if (errno || x > 1000000000)
		return -EINVAL;
	switch (toupper((unsigned char)*e)) {
	case '\0': case 'M': break;
	case 'K': x = (x + 1023) / 1024; break;
	case 'G': x *= 1024; break;
	case 'T': x *= 1024 * 1024; break;
	default: return -EINVAL;
	}
	if (*e && e[1] && !(toupper((unsigned char)e[1]) == 'B' && !e[2]))
		return -EINVAL;
	*mib = x;
	return 0;
}

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
