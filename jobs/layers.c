/*
 * layers.c - the layers of a spec (site defaults < file < --set): where
 * each value came from, for messages; the keys of a tree walked against
 * the table, an unknown one named with the closest known; --set; the
 * site's locks and the env keys that change how a job starts.
 *
 * Sections: walking a tree, layers and origins.
 */
#include "jobs/internal.h"

#include "base/json.h"
#include "base/str.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

/* --- walking a tree --- */

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

/* Walk obj (the node at `path`, "" for the root): check every key against the
 * table and fill s (NULL: check only). Messages name where each value came
 * from: spec__origin(l, path) when l is set, else *fixed. */
int spec__walk_tree(struct spec__layers *l, const struct spec__where *fixed, json_object *obj,
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

/* Where the value at path (or above it) came from. */
struct spec__where spec__origin(struct spec__layers *l, const char *path)
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

const char *spec__origin_label(void *ctx, const char *path)
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

int spec__apply_sets(struct spec__layers *l, const char *const *sets, size_t n, struct dt_err *err)
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
int spec__check_locks(struct spec__layers *l, json_object *obj, const char *path, struct dt_err *err)
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
void spec__drop_locked(struct spec__layers *l, json_object *obj, const char *path)
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
int spec__check_env_keys(struct spec__layers *l, struct dt_err *err)
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
		rc = dt_err_add(err, SPEC__WHERE_FMT ": changes how the job starts (%s); a job spec may set it only where the site allows it (env_allow in the site file, docs/site-admin.md)",
				SPEC__WHERE_ARGS(&w, full), what);
	}
	return rc;
}
