/*
 * rules.c - the cross-field rules of a spec (jobs/README.md, "Cross-field
 * rules"), each message naming where the values it relates came from, and
 * the queries they rest on: a model's layers, a layout's replicas.
 *
 * Sections: cross-field rules, queries.
 */
#include "jobs/internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* --- cross-field rules --- */

/* what spec_layers counts, for messages */
static const char *spec_blocks_are(const struct spec *s)
{
	if (s->model.type && (!strcmp(s->model.type, "gpt") || !strcmp(s->model.type, "llama")))
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

/* model.type "llama": its heads, its RoPE, and what it does not run on yet */
static int check_llama(const struct spec *s, struct spec__layers *l, struct dt_err *err)
{
	char from[600];
	long kv = s->model.kv_heads ? s->model.kv_heads : s->model.heads;
	int rc = 0;

	if (s->model.embd % s->model.heads)
		return dt_err_add(err, "%s: model.heads: must divide model.embd (got %ld heads, embd %ld)",
				  FROM("model.heads", "model.embd"), s->model.heads, s->model.embd);
	if (s->model.heads % kv)
		rc = dt_err_add(err, "%s: model.kv_heads: must divide model.heads (got %ld kv heads, %ld heads)",
				FROM("model.kv_heads", "model.heads"), kv, s->model.heads);
	if ((s->model.embd / s->model.heads) % 2)
		rc = dt_err_add(err, "%s: model.heads: the head size model.embd / model.heads must be even for the rotary embeddings (got %ld / %ld = %ld)",
				FROM("model.heads", "model.embd"), s->model.embd, s->model.heads,
				s->model.embd / s->model.heads);
	if (!strcmp(s->model.rope_scaling.rope_type, "llama3") &&
	    s->model.rope_scaling.high_freq_factor <= s->model.rope_scaling.low_freq_factor)
		rc = dt_err_add(err, "%s: model.rope_scaling.high_freq_factor: must be above low_freq_factor (got %g and %g)",
				FROM("model.rope_scaling.high_freq_factor", "model.rope_scaling.low_freq_factor"),
				s->model.rope_scaling.high_freq_factor, s->model.rope_scaling.low_freq_factor);
	if (!strcmp(s->train.device, "cuda"))
		rc = dt_err_add(err, "%s: model.type llama: train.device cuda is not supported yet; hint: set train.device to \"cpu\"",
				FROM("model.type", "train.device"));
	if (!strcmp(s->train.precision, "bf16"))
		rc = dt_err_add(err, "%s: model.type llama: train.precision bf16 is not supported yet; hint: set train.precision to \"fp32\"",
				FROM("model.type", "train.precision"));
	return rc;
}

int spec__check_rules(const struct spec *s, struct spec__layers *l, struct dt_err *err)
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
	if (s->model.type && !strcmp(s->model.type, "llama") && check_llama(s, l, err))
		rc = -EINVAL;
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

/* --- queries --- */

long spec_layers(const struct spec *s)
{
	if (s->model.type && (!strcmp(s->model.type, "gpt") || !strcmp(s->model.type, "llama")))
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
