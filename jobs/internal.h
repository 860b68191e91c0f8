/*
 * internal.h - helpers shared by the files of the jobs module (prefix
 * spec__; not part of its interface, spec.h is).
 *
 * Files, in the order a spec is resolved: tree.c (the JSON tree: parse,
 * get, set, merge), values.c (typed values: each checked against its
 * table row and stored), layers.c (site defaults < file < --set: where
 * each value came from, the keys walked, --set, the site's locks),
 * rules.c (cross-field rules), spec.c (spec_resolve: the layers merged,
 * filled, checked), dump.c (the resolved spec as JSON, the keys'
 * Markdown table); spec_table.c holds the table.
 */
#ifndef DTRAIN_JOBS_INTERNAL_H
#define DTRAIN_JOBS_INTERNAL_H

#include <stdbool.h>

#include <json-c/json.h>

#include "base/err.h"
#include "jobs/spec.h"

/* The longest dotted path handled, with its NUL. */
#define SPEC__PATH_MAX 256

/* --- the JSON tree (tree.c) --- */

/* The node at a dotted path, or NULL. Borrowed from root. */
json_object *spec__tree_get(json_object *root, const char *path);
/* Set root[path] = val (taking val's reference), creating objects on the
 * way. 0, -ENAMETOOLONG or -ENOMEM. */
int spec__tree_set(json_object *root, const char *path, json_object *val);
/* Overlay src onto dst: objects merge key by key, anything else replaces.
 * 0 or -ENOMEM. */
int spec__tree_merge(json_object *dst, json_object *src);
/* A short rendering of a value for "(got ...)"; valid until the next call
 * on this thread. */
const char *spec__json_short(json_object *v);

/* --- typed values (values.c) --- */

/* Where a value came from, for messages: "file: path". */
struct spec__where {
	const char *label;  /* file name, "--set" or "site.json (defaults)" */
	const char *prefix; /* shown before the path: "" or "defaults." */
};

#define SPEC__WHERE_FMT "%s: %s%s"
#define SPEC__WHERE_ARGS(w, path) (w)->label, (w)->prefix, (path)

/* s holds only the characters flags (SPEC_F_NAME, _SLURM, _PATH; else
 * printable text) allow; else -EINVAL with a message naming w and path. */
int spec__check_chars(const struct spec__where *w, const char *path, unsigned flags,
		      const char *s, struct dt_err *err);
/* Check v against f; store it in the struct at base unless base is NULL
 * (check only). 0, -EINVAL with a message naming w, or -ENOMEM. */
int spec__set_value(const struct spec__where *w, const struct spec_field *f, json_object *v,
		    void *base, struct dt_err *err);
/* k is a name an environment variable may have. */
bool spec__env_name_ok(const char *k);

/* --- layers (layers.c) --- */

/* The layers of one spec_resolve: the user's file with the --set values
 * in it, over the site's defaults. */
struct spec__layers {
	const char *file;            /* the user's spec file */
	json_object *user;           /* its tree, with the --set values in it */
	const struct spec_policy *policy; /* NULL: none */
	char **set_keys;             /* paths given with --set */
	size_t n_sets;
	char site_label[4096 + 16];
};

/* Where the value at path (or above it) came from. */
struct spec__where spec__origin(struct spec__layers *l, const char *path);
/* spec__origin's label, as struct spec_policy's check takes it (ctx: l). */
const char *spec__origin_label(void *ctx, const char *path);
/* Walk obj (the node at `path`, "" for the root): check every key against
 * the table and fill s (NULL: check only). Messages name where each value
 * came from: spec__origin(l, path) when l is set, else *fixed. */
int spec__walk_tree(struct spec__layers *l, const struct spec__where *fixed, json_object *obj,
		    const char *path, struct spec *s, struct dt_err *err);
/* Put the --set values sets[n] into l->user, keeping their keys in
 * l->set_keys (which l's owner frees). 0, -EINVAL or -ENOMEM. */
int spec__apply_sets(struct spec__layers *l, const char *const *sets, size_t n,
		     struct dt_err *err);
/* Every node of the user's layer under obj that a site lock covers is an
 * error. 0 or -EINVAL. */
int spec__check_locks(struct spec__layers *l, json_object *obj, const char *path,
		      struct dt_err *err);
/* The values of the keys the site locks dropped from obj (a resolved
 * spec, resumed), so that the site's values fill them again. */
void spec__drop_locked(struct spec__layers *l, json_object *obj, const char *path);
/* The user's env keys that change how the job starts, unless the site
 * allows them. 0 or -EINVAL. */
int spec__check_env_keys(struct spec__layers *l, struct dt_err *err);

/* --- cross-field rules (rules.c) --- */

/* Every rule of jobs/README.md, "Cross-field rules", on a filled spec;
 * messages name where the values came from. 0 or -EINVAL. */
int spec__check_rules(const struct spec *s, struct spec__layers *l, struct dt_err *err);

#endif
