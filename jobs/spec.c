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
