/*
 * spec.c - spec_resolve: a job spec's layers (site defaults, the file,
 * --set) merged, filled into struct spec from the table's defaults up,
 * its paths made absolute, then checked (each value, the cross-field
 * rules, the site's limits). internal.h says which file does each part.
 */
#include "jobs/internal.h"

#include "base/buf.h"
#include "base/path.h"

#include <errno.h>
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
