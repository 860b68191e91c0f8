/*
 * values.c - typed values: each value of a spec checked against its row
 * of the table (type, bounds, characters, choices, list lengths) and
 * stored in struct spec, and the time and memory values parsed and
 * written.
 *
 * Sections: value checks, filling a struct spec from a tree, time and
 * memory.
 */
#include "jobs/internal.h"

#include "base/json.h"
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

int spec__check_chars(const struct spec__where *w, const char *path, unsigned flags,
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

bool spec__env_name_ok(const char *k)
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
int spec__set_value(const struct spec__where *w, const struct spec_field *f, json_object *v,
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

/* --- time and memory --- */

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
