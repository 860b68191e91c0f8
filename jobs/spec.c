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
