/*
 * test_spec.c - the job spec: defaults, types, bounds, unknown keys,
 * cross-field rules, --set overrides, hostile strings, the dump round trip
 * and the reference in jobs/README.md.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jobs/spec.h"
#include "tests/testutil.h"

/* Resolve text as a spec file with optional --set values; no site. */
static int resolve(const char *text, const char *const *sets, size_t n_sets,
		   struct spec *s, struct dt_err *e)
{
	struct spec_input in = { tu_write("job.json", text), NULL, sets, n_sets, false, 0 };

	dt_err_clear(e);
	return spec_resolve(&in, s, e);
}

/* checkpoint.every_steps takes "auto" (SPEC_F_AUTO) in a file and with
 * --set, dumps it back as "auto", and names it in the error of another
 * string; other integers take no "auto". */
static void auto_integers(void **state)
{
	struct spec s;
	struct dt_err e = {0};
	struct dt_buf d = {0};
	const char *sets[] = { "checkpoint.every_steps=auto" }, *bad[] = { "train.epochs=auto" };

	(void)state;
	assert_int_equal(resolve("{\"checkpoint\": {\"every_steps\": \"auto\"}}", NULL, 0, &s, &e), 0);
	assert_int_equal(s.checkpoint.every_steps, SPEC_AUTO);
	assert_int_equal(spec_dump(&s, &d), 0);
	assert_non_null(strstr(d.p, "\"every_steps\": \"auto\""));
	dt_buf_free(&d);
	spec_free(&s);
	assert_int_equal(resolve("{}", sets, 1, &s, &e), 0);
	assert_int_equal(s.checkpoint.every_steps, SPEC_AUTO);
	assert_true(s.checkpoint.mtbi_seconds > 0);
	spec_free(&s);
	assert_int_equal(resolve("{\"checkpoint\": {\"every_steps\": \"often\"}}", NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "checkpoint.every_steps: expected an integer or \"auto\" (got a string \"often\")"));
	assert_int_equal(resolve("{}", bad, 1, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "train.epochs"));
}

/* resources.nodes as a range ("A-B", {"min", "max"}, --set) with
 * parallel.data "auto": every count of the range must give a layout; a
 * fixed parallel.data, -n and a reversed range are refused by name. */
static void elastic_nodes(void **state)
{
	struct spec s;
	struct dt_err e = {0};
	struct dt_buf d = {0};
	struct spec_input in = {0};
	char why[256];
	const char *auto_data = "{\"resources\": {\"nodes\": \"1-2\", \"tasks_per_node\": 2},"
				" \"parallel\": {\"data\": \"auto\"}, \"train\": {\"global_batch\": 8}}";
	const char *wide[] = { "resources.nodes=1-3" }, *one[] = { "resources.nodes=2" };

	(void)state;
	assert_int_equal(resolve(auto_data, NULL, 0, &s, &e), 0);
	assert_int_equal(s.resources.nodes.min, 1);
	assert_int_equal(s.resources.nodes.max, 2);
	assert_int_equal(s.parallel.data, SPEC_AUTO);
	assert_int_equal(spec_data_for(&s, 2, why, sizeof(why)), 2);
	assert_int_equal(spec_data_for(&s, 4, why, sizeof(why)), 4);
	assert_int_equal(spec_data_for(&s, 16, why, sizeof(why)), 0);
	assert_string_equal(why, "train.global_batch 8 is not divisible by data x parallel.micro_batches = 16 x 1");
	assert_int_equal(spec_dump(&s, &d), 0);
	assert_non_null(strstr(d.p, "\"nodes\": \"1-2\""));
	assert_non_null(strstr(d.p, "\"data\": \"auto\""));
	dt_buf_free(&d);
	spec_free(&s);
	assert_int_equal(resolve("{\"resources\": {\"nodes\": {\"min\": 2, \"max\": 4}, \"tasks_per_node\": 2},"
				 " \"parallel\": {\"data\": \"auto\", \"pipeline\": 2}, \"train\": {\"global_batch\": 12}}",
				 NULL, 0, &s, &e), 0);
	assert_int_equal(s.resources.nodes.max, 4);
	assert_int_equal(spec_data_for(&s, 3, why, sizeof(why)), 0);
	assert_string_equal(why, "3 ranks cannot be split into parallel.pipeline = 2 stages");
	spec_free(&s);
	/* 3 nodes: 6 replicas of one micro-batch do not divide 8 */
	assert_int_equal(resolve(auto_data, wide, 1, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "resources.nodes: parallel.data is \"auto\" but 3 nodes (6 ranks) give no layout: train.global_batch 8 is not divisible by data x parallel.micro_batches = 6 x 1; hint: every node count of the range must work"));
	/* one count and "auto": the layout of that count */
	assert_int_equal(resolve(auto_data, one, 1, &s, &e), 0);
	assert_int_equal(spec_data_for(&s, 4, why, sizeof(why)), 4);
	spec_free(&s);
	assert_int_equal(resolve("{\"resources\": {\"nodes\": \"1-2\"}, \"parallel\": {\"data\": 1}}", NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "parallel.data: must be \"auto\" when resources.nodes is a range (1-2): the replicas follow the nodes Slurm grants (got 1)"));
	assert_int_equal(resolve("{\"resources\": {\"nodes\": \"3-2\"}}", NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "resources.nodes: the range's minimum 3 is above its maximum 2"));
	assert_int_equal(resolve("{\"resources\": {\"nodes\": \"1-\"}}", NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "resources.nodes: expected an integer, a range"));
	assert_int_equal(resolve("{\"resources\": {\"nodes\": {\"min\": 1}}}", NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "resources.nodes: expected an integer, a range"));
	assert_int_equal(resolve("{\"resources\": {\"time\": \"00:10:00\", \"time_min\": \"00:20:00\"}}", NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "resources.time_min: 1200 s is above resources.time (600 s)"));
	assert_int_equal(resolve("{\"resources\": {\"time\": \"01:00:00\", \"time_min\": 2}, \"preemption\": {\"lead_seconds\": 120}}", NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "preemption.lead_seconds: 120 s is not less than resources.time_min (120 s)"));
	in = (struct spec_input){ tu_write("job.json", auto_data), NULL, NULL, 0, false, 4 };
	dt_err_clear(&e);
	assert_int_equal(spec_resolve(&in, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "-n 4: resources.nodes is a range (1-2, from "));
	/* a locked range is one key, not its "min" and "max" */
	{
		char *lock_v[] = { "resources.nodes" };
		struct spec_strs locks = { lock_v, 1 };
		struct spec_policy pol = { "site.json", NULL, &locks, NULL, NULL, NULL };

		in = (struct spec_input){ tu_write("job.json", "{\"resources\": {\"nodes\": {\"min\": 1, \"max\": 2}},"
							     " \"parallel\": {\"data\": \"auto\"}}"),
					  &pol, NULL, 0, false, 0 };
		dt_err_clear(&e);
		assert_int_equal(spec_resolve(&in, &s, &e), -EINVAL);
		assert_true(tu_has(&e, "job.json: resources.nodes: locked by the site (site.json: locked: \"resources.nodes\")"));
		assert_int_equal(e.count, 1);
	}
}

static void defaults_fill_every_key(void **state)
{
	struct spec s;
	struct dt_err e = {0};

	(void)state;
	assert_int_equal(resolve("{}", NULL, 0, &s, &e), 0);
	assert_string_equal(s.name, "dtrain");
	assert_null(s.run_dir);
	assert_int_equal(s.resources.nodes.min, 1);
	assert_int_equal(s.resources.time_s, 3600);
	assert_int_equal(s.model.hidden.n, 2);
	assert_int_equal(s.model.hidden.v[0], 512);
	assert_string_equal(s.parallel.schedule, "1f1b");
	assert_true(s.data.shuffle);
	assert_int_equal(s.train.optimizer.betas.n, 2);
	assert_true(s.train.optimizer.betas.v[1] == 0.999);
	assert_string_equal(s.preemption.signal, "USR1");
	assert_string_equal(s.checkpoint.resume, "auto");
	spec_free(&s);
}

/* sbatch's -n (spec_input.ntasks): tasks in all, divided by the nodes */
static void ntasks_sets_tasks_per_node(void **state)
{
	const char *text = "{\"resources\": {\"nodes\": 2}, \"parallel\": {\"data\": 8}}";
	struct spec_input in = { tu_write("job.json", text), NULL, NULL, 0, false, 8 };
	struct spec s;
	struct dt_err e = {0};

	(void)state;
	if (spec_resolve(&in, &s, &e))
		fail_msg("%s", e.msg);
	assert_int_equal(s.resources.tasks_per_node, 4);
	spec_free(&s);
	in.ntasks = 5;
	dt_err_clear(&e);
	assert_int_equal(spec_resolve(&in, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "-n 5: not a multiple of resources.nodes (2, from "));
	in.ntasks = 10000; /* 5000 a node: over tasks_per_node's bound */
	dt_err_clear(&e);
	assert_int_equal(spec_resolve(&in, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "-n 10000: 5000 tasks on each of 2 nodes, more than resources.tasks_per_node's 4096"));
}

static void values_from_file(void **state)
{
	struct spec s;
	struct dt_err e = {0};

	(void)state;
	assert_int_equal(resolve("{\"name\": \"fm\", \"resources\": {\"nodes\": 2, \"tasks_per_node\": 2,"
				 " \"time\": \"1-02:03:04\", \"mem_per_node\": \"2G\", \"partition\": \"low\"},"
				 " \"parallel\": {\"data\": 2, \"pipeline\": 2, \"micro_batches\": 4},"
				 " \"model\": {\"hidden\": [8, 4, 2]}, \"train\": {\"global_batch\": 64},"
				 " \"env\": {\"A\": \"1\", \"B\": \"two\"}, \"setup\": [\"echo hi\"]}",
				 NULL, 0, &s, &e), 0);
	assert_string_equal(s.name, "fm");
	assert_int_equal(s.resources.time_s, 86400 + 2 * 3600 + 3 * 60 + 4);
	assert_int_equal(s.resources.mem_per_node_mb, 2048);
	assert_string_equal(s.resources.partition, "low");
	assert_int_equal(s.model.hidden.n, 3);
	assert_int_equal(spec_layers(&s), 4);
	assert_int_equal(s.env.n, 2);
	assert_string_equal(s.env.key[1], "B");
	assert_string_equal(s.env.val[1], "two");
	assert_int_equal(s.setup.n, 1);
	spec_free(&s);
}

static void unknown_keys_get_a_hint(void **state)
{
	struct spec s;
	struct dt_err e = {0};

	(void)state;
	assert_int_equal(resolve("{\"resources\": {\"node\": 2}, \"train\": {\"lr\": 0.1},"
				 " \"modle\": {}, \"zzzzzz\": 1}", NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "job.json: resources.node: unknown key; did you mean \"resources.nodes\"?"));
	assert_true(tu_has(&e, "train.lr: unknown key; did you mean \"train.optimizer.lr\"?"));
	assert_true(tu_has(&e, "modle: unknown key; did you mean \"model"));
	assert_true(tu_has(&e, "zzzzzz: unknown key (see jobs/README.md"));
	assert_int_equal(e.count, 4);
	/* A failed resolve leaves nothing behind to free. */
	assert_null(s.name);
}

/* A dotted key is refused where it stands, never applied as a path. */
static void dotted_keys_are_refused(void **state)
{
	struct spec s;
	struct dt_err e = {0};

	(void)state;
	assert_int_equal(resolve("{\"resources.qos\": \"high\", \"train\": {\"optimizer.lr\": 0.5}}",
				 NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "job.json: \"resources.qos\": keys are nested objects, not dotted paths (write \"resources\": {\"qos\": ...})"));
	assert_true(tu_has(&e, "job.json: \"train.optimizer.lr\": keys are nested objects, not dotted paths (write \"optimizer\": {\"lr\": ...})"));
	assert_int_equal(e.count, 2);
}

static void types_and_bounds(void **state)
{
	struct spec s;
	struct dt_err e = {0};

	(void)state;
	assert_int_equal(resolve("{\"resources\": {\"nodes\": \"two\", \"tasks_per_node\": 0,"
				 " \"time\": \"soon\", \"mem_per_node\": \"lots\"},"
				 " \"parallel\": {\"micro_batches\": 2.5}, \"data\": {\"shuffle\": 1},"
				 " \"train\": {\"optimizer\": {\"lr\": -1, \"betas\": [0.9]}},"
				 " \"model\": {\"activation\": \"Relu\", \"hidden\": [4, 0]}, \"name\": null}",
				 NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "resources.nodes: expected an integer, a range \"MIN-MAX\" or {\"min\": MIN, \"max\": MAX} (got a string \"two\")"));
	assert_true(tu_has(&e, "resources.tasks_per_node: must be between 1 and 4096 (got 0)"));
	assert_true(tu_has(&e, "resources.time: not a Slurm time"));
	assert_true(tu_has(&e, "resources.mem_per_node: not a memory size"));
	assert_true(tu_has(&e, "parallel.micro_batches: expected an integer (got a number 2.5)"));
	assert_true(tu_has(&e, "data.shuffle: expected true or false"));
	assert_true(tu_has(&e, "train.optimizer.lr: must be between"));
	assert_true(tu_has(&e, "train.optimizer.betas: expected exactly 2 items (got 1)"));
	assert_true(tu_has(&e, "model.activation: unknown value \"Relu\"; did you mean \"relu\"?"));
	assert_true(tu_has(&e, "model.hidden[1]: must be between 1 and"));
	assert_true(tu_has(&e, "name: must not be null"));

	/* an empty choice is refused, not searched for forever */
	assert_int_equal(resolve("{\"model\": {\"type\": \"\"}}", NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "model.type: unknown value \"\""));
}

static void sections_must_be_objects(void **state)
{
	struct spec s;
	struct dt_err e = {0};

	(void)state;
	assert_int_equal(resolve("{\"resources\": 4}", NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "job.json: resources: expected an object (got an integer 4)"));
	assert_int_equal(resolve("[1, 2]", NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "expected a JSON object at the top level"));
}

static void invalid_json_names_line_and_column(void **state)
{
	struct spec s;
	struct dt_err e = {0};

	(void)state;
	assert_int_equal(resolve("{\n  \"name\": \"x\",\n  \"model\": {,}\n}", NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "job.json:3:"));
	assert_true(tu_has(&e, "invalid JSON"));
	assert_int_equal(resolve("{\"name\": \"x\"} trailing", NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "invalid JSON"));
}

static void missing_file_is_named(void **state)
{
	struct spec s;
	struct dt_err e = {0};
	struct spec_input in = { "/nonexistent/dir/job.json", NULL, NULL, 0, false, 0 };

	(void)state;
	assert_int_equal(spec_resolve(&in, &s, &e), -ENOENT);
	assert_true(tu_has(&e, "/nonexistent/dir/job.json: cannot read: No such file or directory"));
}

/* model.type "llama": its keys resolve, and its rules name the key */
static void llama_rules(void **state)
{
	struct spec s;
	struct dt_err e = {0};
	const char *gpu[] = { "train.device=cuda", "resources.gpus_per_node=1" };
	const char *bf[] = { "train.precision=bf16" };
	const char *odd[] = { "model.embd=36" }; /* 12 heads of 3 */

	(void)state;
	assert_int_equal(resolve("{\"model\": {\"type\": \"llama\", \"kv_heads\": 4, \"tie_word_embeddings\": true,"
				 " \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 32}}}", NULL, 0, &s, &e), 0);
	assert_int_equal(s.model.kv_heads, 4);
	assert_true(s.model.tie_word_embeddings);
	assert_string_equal(s.model.rope_scaling.rope_type, "llama3");
	assert_true(s.model.rope_scaling.factor == 32.0);
	assert_int_equal(spec_layers(&s), 14);
	spec_free(&s);
	assert_int_equal(resolve("{\"model\": {\"type\": \"llama\", \"kv_heads\": 5}}", NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "job.json: model.kv_heads: must divide model.heads (got 5 kv heads, 12 heads)"));
	assert_int_equal(resolve("{\"model\": {\"type\": \"llama\"}}", odd, 1, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "model.heads: the head size model.embd / model.heads must be even for the rotary embeddings (got 36 / 12 = 3)"));
	assert_int_equal(resolve("{\"model\": {\"type\": \"llama\", \"rope_scaling\": {\"rope_type\": \"llama3\","
				 " \"low_freq_factor\": 4, \"high_freq_factor\": 2}}}", NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "model.rope_scaling.high_freq_factor: must be above low_freq_factor (got 2 and 4)"));
	assert_int_equal(resolve("{\"model\": {\"type\": \"llama\"}}", gpu, 2, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "model.type llama: train.device cuda is not supported yet"));
	assert_int_equal(resolve("{\"model\": {\"type\": \"llama\"}}", bf, 1, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "model.type llama: train.precision bf16 is not supported yet"));
}

static void cross_field_rules(void **state)
{
	struct spec s;
	struct dt_err e = {0};

	(void)state;
	assert_int_equal(resolve("{\"resources\": {\"nodes\": 2, \"tasks_per_node\": 2},"
				 " \"parallel\": {\"data\": 3, \"pipeline\": 1, \"micro_batches\": 5},"
				 " \"train\": {\"global_batch\": 100}}", NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "parallel: data x pipeline (3 x 1 = 3) must equal resources.nodes x resources.tasks_per_node (2 x 2 = 4)"));
	assert_true(tu_has(&e, "train.global_batch: must be divisible by parallel.data*parallel.micro_batches = 15 (got 100)"));
	assert_true(tu_has(&e, "job.json: parallel: data x pipeline"));

	/* a rule is blamed on where its values came from: --set, the file, or both */
	{
		const char *sets[] = { "model.heads=5", "model.embd=32" }, *one[] = { "model.heads=5" };

		assert_int_equal(resolve("{\"model\": {\"type\": \"gpt\"}}", sets, 2, &s, &e), -EINVAL);
		assert_true(tu_has(&e, "--set: model.heads: must divide model.embd (got 5 heads, embd 32)"));
		assert_int_equal(resolve("{\"model\": {\"type\": \"gpt\", \"embd\": 32}}", one, 1, &s, &e),
				 -EINVAL);
		assert_true(tu_has(&e, "--set and "));
		assert_true(tu_has(&e, "job.json: model.heads: must divide model.embd"));
	}

	assert_int_equal(resolve("{\"resources\": {\"tasks_per_node\": 4}, \"parallel\": {\"pipeline\": 4},"
				 " \"model\": {\"hidden\": [10, 10]}}", NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "parallel.pipeline: 4 stages but the model has only 3 layers"));

	assert_int_equal(resolve("{\"resources\": {\"tasks_per_node\": 2}, \"parallel\": {\"pipeline\": 2,"
				 " \"stage_layers\": [1, 1]}, \"model\": {\"hidden\": [10, 10]}}", NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "parallel.stage_layers: must list parallel.pipeline = 2 stages whose layers (model.hidden + output) add up to 3 (got 2 stages, 2)"));
	assert_int_equal(resolve("{\"resources\": {\"tasks_per_node\": 2}, \"parallel\": {\"pipeline\": 2,"
				 " \"stage_layers\": [1, 2]}, \"model\": {\"hidden\": [10, 10]}}", NULL, 0, &s, &e), 0);
	assert_int_equal(s.parallel.stage_layers.n, 2);
	spec_free(&s);

	/* "split" cuts layers between a node's replicas: one stage only */
	assert_int_equal(resolve("{\"resources\": {\"tasks_per_node\": 4}, \"parallel\": {\"pipeline\": 2,"
				 " \"data\": 2, \"grad_sync\": \"split\"}}", NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "parallel.grad_sync: \"split\" cuts every layer between the replicas of a node and needs parallel.pipeline = 1 (got 2); use \"shared\" or \"auto\" with a pipeline"));
	assert_int_equal(resolve("{\"resources\": {\"tasks_per_node\": 4}, \"parallel\": {\"pipeline\": 2,"
				 " \"data\": 2, \"grad_sync\": \"shared\"}}", NULL, 0, &s, &e), 0);
	spec_free(&s);
	assert_int_equal(resolve("{\"resources\": {\"tasks_per_node\": 2}, \"parallel\": {\"data\": 2,"
				 " \"grad_sync\": \"split\"}}", NULL, 0, &s, &e), 0);
	assert_string_equal(s.parallel.grad_sync, "split");
	spec_free(&s);
	/* so do a rank's threads */
	assert_int_equal(resolve("{\"resources\": {\"tasks_per_node\": 2}, \"parallel\": {\"pipeline\": 2,"
				 " \"threads\": \"split\"}}", NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "parallel.threads: \"split\" cuts every layer between a rank's threads and needs parallel.pipeline = 1 (got 2); use \"blas\" or \"auto\" with a pipeline"));
	assert_int_equal(resolve("{\"resources\": {\"tasks_per_node\": 2}, \"parallel\": {\"pipeline\": 2,"
				 " \"threads\": \"auto\"}}", NULL, 0, &s, &e), 0);
	assert_string_equal(s.parallel.threads, "auto");
	spec_free(&s);

	assert_int_equal(resolve("{\"train\": {\"device\": \"cuda\", \"epochs\": 0,"
				 " \"lr_schedule\": {\"min_lr\": 1}}, \"resources\": {\"time\": 1},"
				 " \"preemption\": {\"lead_seconds\": 60}}", NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "train.device is \"cuda\" but no GPUs are requested"));
	assert_true(tu_has(&e, "nothing to train"));
	assert_true(tu_has(&e, "train.lr_schedule.min_lr: 1 is above train.optimizer.lr 0.01"));
	assert_true(tu_has(&e, "preemption.lead_seconds: 60 s is not less than resources.time (60 s)"));
}

static void set_overrides(void **state)
{
	struct spec s;
	struct dt_err e = {0};
	const char *sets[] = {
		"train.epochs=5", "name=from-set", "model.hidden=[3, 2]", "env.EXTRA=a b $(c)",
		"resources.time=90", "train.optimizer.lr=0.5", "data.train=/data/x.h5",
		"run_dir=null",
	};

	(void)state;
	assert_int_equal(resolve("{\"name\": \"file\", \"train\": {\"epochs\": 2},"
				 " \"env\": {\"KEEP\": \"1\"}, \"run_dir\": \"/x\"}",
				 sets, sizeof(sets) / sizeof(sets[0]), &s, &e), 0);
	assert_int_equal(s.train.epochs, 5);
	assert_string_equal(s.name, "from-set");
	assert_int_equal(s.model.hidden.n, 2);
	assert_int_equal(s.model.hidden.v[0], 3);
	assert_int_equal(s.env.n, 2);
	assert_string_equal(s.env.key[0], "KEEP");
	assert_string_equal(s.env.val[1], "a b $(c)");
	assert_int_equal(s.resources.time_s, 90 * 60);
	assert_true(s.train.optimizer.lr == 0.5);
	assert_string_equal(s.data.train, "/data/x.h5");
	assert_null(s.run_dir);
	spec_free(&s);
}

static void set_errors(void **state)
{
	struct spec s;
	struct dt_err e = {0};
	const char *sets[] = { "train.lr=1", "noequals", "train.epochs=many", "env.1X=y",
			       "parallel.data=0", "train.max_steps=ten", "train.optimizer.lr=fast",
			       "data.shuffle=yes", "train.max_steps=[1", "model.hidden=[3," };

	(void)state;
	assert_int_equal(resolve("{}", sets, sizeof(sets) / sizeof(sets[0]), &s, &e), -EINVAL);
	assert_true(tu_has(&e, "--set: train.lr: unknown key; did you mean \"train.optimizer.lr\"?"));
	assert_true(tu_has(&e, "--set: noequals: expected KEY=VALUE"));
	assert_true(tu_has(&e, "--set: train.epochs: expected an integer (got \"many\")"));
	assert_true(tu_has(&e, "--set: train.max_steps: expected an integer (got \"ten\")"));
	assert_true(tu_has(&e, "--set: train.optimizer.lr: expected a number (got \"fast\")"));
	assert_true(tu_has(&e, "--set: data.shuffle: expected true or false (got \"yes\")"));
	assert_true(tu_has(&e, "--set: train.max_steps: expected an integer (got \"[1\")"));
	assert_true(tu_has(&e, "--set: model.hidden: expected a list of integers, like [1,2] (got \"[3,\")"));
	assert_true(tu_has(&e, "--set: env.1X: not a valid environment variable name"));
	assert_true(tu_has(&e, "--set: parallel.data: must be between 1 and 65536 (got 0)"));
}

/* train.max_steps set without train.epochs bounds the run alone (epochs
 * 0: as many as it takes), not the default 1 epoch; both set: both kept */
static void max_steps_alone(void **state)
{
	const char *sets[] = { "train.max_steps=3" };
	struct spec s;
	struct dt_err e = {0};

	(void)state;
	assert_int_equal(resolve("{\"train\": {\"max_steps\": 3}}", NULL, 0, &s, &e), 0);
	assert_int_equal(s.train.epochs, 0);
	assert_int_equal(s.train.max_steps, 3);
	spec_free(&s);
	assert_int_equal(resolve("{}", sets, 1, &s, &e), 0);
	assert_int_equal(s.train.epochs, 0);
	spec_free(&s);
	assert_int_equal(resolve("{\"train\": {\"epochs\": 1, \"max_steps\": 3}}", NULL, 0, &s, &e), 0);
	assert_int_equal(s.train.epochs, 1);
	spec_free(&s);
	assert_int_equal(resolve("{}", NULL, 0, &s, &e), 0);
	assert_int_equal(s.train.epochs, 1);
	assert_int_equal(s.train.max_steps, 0);
	spec_free(&s);
}

static void hostile_strings(void **state)
{
	struct spec s;
	struct dt_err e = {0};

	(void)state;
	assert_int_equal(resolve("{\"name\": \"x$(touch /tmp/pwned)\","
				 " \"resources\": {\"partition\": \"low;rm -rf /\", \"account\": \"a`id`\","
				 " \"qos\": \"q\\nq\", \"constraint\": \"a b\"},"
				 " \"run_dir\": \"/tmp/a'b\", \"data\": {\"train\": \"x\\ny\"}}",
				 NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "name: character '$' not allowed"));
	assert_true(tu_has(&e, "resources.partition: character ';' not allowed"));
	assert_true(tu_has(&e, "resources.account: character '`' not allowed"));
	assert_true(tu_has(&e, "resources.qos: character 0x0a not allowed"));
	assert_true(tu_has(&e, "resources.constraint: character ' ' not allowed"));
	assert_true(tu_has(&e, "run_dir: character ''' not allowed"));
	assert_true(tu_has(&e, "data.train: character 0x0a not allowed"));
	assert_int_equal(resolve("{\"name\": \"-rf\"}", NULL, 0, &s, &e), -EINVAL);
	assert_true(tu_has(&e, "name: must not start with '-'"));
	/* Env values are data: anything printable is kept verbatim. */
	assert_int_equal(resolve("{\"env\": {\"X\": \"'; rm -rf ~ # $(id) `id` \\\"q\\\"\"}}",
				 NULL, 0, &s, &e), 0);
	assert_string_equal(s.env.val[0], "'; rm -rf ~ # $(id) `id` \"q\"");
	spec_free(&s);
}

static void run_dir_is_made_absolute(void **state)
{
	struct spec s;
	struct dt_err e = {0};
	const char *home = getenv("HOME");
	char want[512];

	(void)state;
	setenv("HOME", "/home/alice", 1);
	assert_int_equal(resolve("{\"run_dir\": \"~/runs/a/../b\"}", NULL, 0, &s, &e), 0);
	assert_string_equal(s.run_dir, "/home/alice/runs/b");
	spec_free(&s);
	assert_int_equal(resolve("{\"run_dir\": \"rel/dir\", \"data\": {\"train\": \"~/d/train.h5\","
				 " \"test\": \"d/test.h5\"}}", NULL, 0, &s, &e), 0);
	assert_string_equal(s.data.train, "/home/alice/d/train.h5");
	assert_non_null(strstr(s.data.test, "/d/test.h5"));
	assert_true(s.data.test[0] == '/');
	assert_non_null(getcwd(want, sizeof(want) - 16));
	strcat(want, "/rel/dir");
	assert_string_equal(s.run_dir, want);
	spec_free(&s);
	if (home)
		setenv("HOME", home, 1);
}

static void dump_round_trips(void **state)
{
	struct spec a, b;
	struct dt_err e = {0};
	struct dt_buf d1 = {0}, d2 = {0};

	(void)state;
	assert_int_equal(resolve("{\"name\": \"rt\", \"resources\": {\"nodes\": 2, \"tasks_per_node\": 2,"
				 " \"mem_per_node\": 1536, \"time\": \"2-00:00:01\", \"constraint\": \"a&b\"},"
				 " \"parallel\": {\"data\": 4}, \"train\": {\"optimizer\": {\"lr\": 0.1,"
				 " \"betas\": [0.8, 0.95]}}, \"env\": {\"Z\": \"it's\"}, \"setup\": [\"a\", \"b\"],"
				 " \"data\": {\"train\": \"/d/train.h5\"}}", NULL, 0, &a, &e), 0);
	assert_int_equal(spec_dump(&a, &d1), 0);
	assert_int_equal(spec_load(tu_write("resolved.json", d1.p), &b, &e), 0);
	assert_int_equal(spec_dump(&b, &d2), 0);
	assert_string_equal(d1.p, d2.p);
	assert_true(b.train.optimizer.lr == 0.1);
	assert_int_equal(b.resources.mem_per_node_mb, 1536);
	assert_int_equal(b.resources.time_s, 2 * 86400 + 1);
	assert_non_null(strstr(d1.p, "\"time\": \"2-00:00:01\""));
	/* Every key of the table is in the dump. */
	{
		size_t n, i;
		const struct spec_field *f = spec_fields(&n);

		for (i = 0; i < n; i++) {
			const char *leaf = strrchr(f[i].path, '.');
			char key[80];

			snprintf(key, sizeof(key), "\"%s\":", leaf ? leaf + 1 : f[i].path);
			assert_non_null(strstr(d1.p, key));
		}
	}
	dt_buf_free(&d1);
	dt_buf_free(&d2);
	spec_free(&a);
	spec_free(&b);
}

static void table_is_consistent(void **state)
{
	size_t n, i;
	const struct spec_field *f = spec_fields(&n);

	(void)state;
	assert_true(n >= 45);
	for (i = 0; i < n; i++) {
		assert_non_null(f[i].doc);
		assert_true(strlen(f[i].doc) > 5);
		assert_ptr_equal(spec_field_find(f[i].path), &f[i]);
		if (f[i].type == SPEC_ENUM)
			assert_non_null(f[i].choices);
	}
	assert_null(spec_field_find("resources"));
	assert_null(spec_field_find("nope"));
}

/* jobs/README.md carries the generated reference between two markers; it
 * must match the table. DTRAIN_UPDATE_DOCS=1 rewrites it. */
static void readme_matches_table(void **state)
{
	const char *src = getenv("DTRAIN_SOURCE_DIR");
	const char *begin_mark = "<!-- BEGIN KEYS (generated from jobs/spec_table.c) -->\n";
	const char *end_mark = "<!-- END KEYS -->";
	char path[1024];
	char *text = NULL, *begin, *end;
	struct dt_buf table = {0}, fixed = {0};

	(void)state;
	assert_non_null(src);
	snprintf(path, sizeof(path), "%s/jobs/README.md", src);
	assert_int_equal(dt_read_file(path, &text, NULL), 0);
	begin = strstr(text, begin_mark);
	assert_non_null(begin);
	begin += strlen(begin_mark);
	end = strstr(begin, end_mark);
	assert_non_null(end);
	assert_int_equal(spec_doc_markdown(&table), 0);
	if ((size_t)(end - begin) != table.len || memcmp(begin, table.p, table.len)) {
		if (getenv("DTRAIN_UPDATE_DOCS")) {
			dt_buf_add(&fixed, text, (size_t)(begin - text));
			dt_buf_puts(&fixed, table.p);
			dt_buf_puts(&fixed, end);
			assert_int_equal(dt_write_file_atomic(path, fixed.p, fixed.len, 0644), 0);
		} else {
			fail_msg("jobs/README.md is out of date with jobs/spec_table.c; "
				 "run: DTRAIN_UPDATE_DOCS=1 build/tests/test_spec");
		}
	}
	dt_buf_free(&fixed);
	dt_buf_free(&table);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(defaults_fill_every_key),
		cmocka_unit_test(values_from_file),
		cmocka_unit_test(unknown_keys_get_a_hint),
		cmocka_unit_test(dotted_keys_are_refused),
		cmocka_unit_test(types_and_bounds),
		cmocka_unit_test(sections_must_be_objects),
		cmocka_unit_test(invalid_json_names_line_and_column),
		cmocka_unit_test(missing_file_is_named),
		cmocka_unit_test(cross_field_rules),
		cmocka_unit_test(llama_rules),
		cmocka_unit_test(set_overrides),
		cmocka_unit_test(set_errors),
		cmocka_unit_test(max_steps_alone),
		cmocka_unit_test(hostile_strings),
		cmocka_unit_test(run_dir_is_made_absolute),
		cmocka_unit_test(dump_round_trips),
		cmocka_unit_test(table_is_consistent),
		cmocka_unit_test(ntasks_sets_tasks_per_node),
		cmocka_unit_test(readme_matches_table),
		cmocka_unit_test(auto_integers),
		cmocka_unit_test(elastic_nodes),
	};
	int rc = cmocka_run_group_tests_name("spec", tests, NULL, NULL);

	tu_cleanup();
	return rc;
}
