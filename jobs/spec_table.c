/*
 * spec_table.c - every key of the job spec, declared once.
 *
 * Each row: JSON path, type, field of struct spec, default (JSON text),
 * bounds, list lengths, choices, flags, one-line description. The parser,
 * the validator, --set, the resolved-spec dump and jobs/README.md all read
 * this table; adding a key means adding a row here and a field in spec.h.
 */
#include "jobs/spec.h"

#include <stddef.h>
#include <string.h>

#define F(field) offsetof(struct spec, field)
#define BIG 1e15 /* integers we store in a long and print exactly */

static const struct spec_field fields[] = {
	/* --- identity --- */
	{ "name", SPEC_STR, F(name), "\"dtrain\"", 1, 64, 0, 0, NULL, SPEC_F_NAME,
	  "job name in Slurm and in run directory names; letters, digits, '.', '_', '-'" },
	{ "run_dir", SPEC_STR, F(run_dir), "null", 1, 4000, 0, 0, NULL, SPEC_F_OPTIONAL | SPEC_F_PATH,
	  "run directory (must not exist); null: <site runs_root>/<name>-<date>-<time>" },

	/* --- resources: what sbatch asks for --- */
	{ "resources.nodes", SPEC_RANGE, F(resources.nodes), "1", 1, 100000, 0, 0, NULL, 0,
	  "nodes (sbatch --nodes): a count, or an elastic range \"MIN-MAX\" (or {\"min\": MIN, \"max\": MAX}) from which Slurm grants as many as it can without delaying the start, each start again; a range needs parallel.data \"auto\"" },
	{ "resources.tasks_per_node", SPEC_INT, F(resources.tasks_per_node), "1", 1, 4096, 0, 0, NULL, 0,
	  "ranks per node (sbatch --ntasks-per-node)" },
	{ "resources.cpus_per_task", SPEC_INT, F(resources.cpus_per_task), "1", 1, 4096, 0, 0, NULL, 0,
	  "CPUs per rank (sbatch --cpus-per-task); also the BLAS threads per rank" },
	{ "resources.gpus_per_node", SPEC_INT, F(resources.gpus_per_node), "0", 0, 64, 0, 0, NULL, 0,
	  "GPUs per node (sbatch --gpus-per-node); 0: none" },
	{ "resources.mem_per_node", SPEC_MEM, F(resources.mem_per_node_mb), "null", 1, 1e9, 0, 0, NULL, SPEC_F_OPTIONAL,
	  "memory per node, e.g. \"16G\", \"4000M\" or MiB as a number (sbatch --mem); null: Slurm's default" },
	{ "resources.time", SPEC_TIME, F(resources.time_s), "\"01:00:00\"", 60, 366.0 * 86400, 0, 0, NULL, SPEC_F_OPTIONAL,
	  "wall-clock limit: minutes, \"HH:MM:SS\" or \"D-HH:MM:SS\" (sbatch --time); null: the partition's" },
	{ "resources.time_min", SPEC_TIME, F(resources.time_min_s), "null", 60, 366.0 * 86400, 0, 0, NULL, SPEC_F_OPTIONAL,
	  "the least wall-clock time the job can use (sbatch --time-min): Slurm's backfill may start it sooner with a limit between this and resources.time; the time-limit warning and requeue work as with any limit; null: none" },
	{ "resources.partition", SPEC_STR, F(resources.partition), "null", 1, 128, 0, 0, NULL, SPEC_F_OPTIONAL | SPEC_F_SLURM,
	  "Slurm partition (sbatch --partition); null: the cluster's default" },
	{ "resources.account", SPEC_STR, F(resources.account), "null", 1, 128, 0, 0, NULL, SPEC_F_OPTIONAL | SPEC_F_SLURM,
	  "Slurm account to charge (sbatch --account)" },
	{ "resources.qos", SPEC_STR, F(resources.qos), "null", 1, 128, 0, 0, NULL, SPEC_F_OPTIONAL | SPEC_F_SLURM,
	  "Slurm quality of service (sbatch --qos)" },
	{ "resources.constraint", SPEC_STR, F(resources.constraint), "null", 1, 256, 0, 0, NULL, SPEC_F_OPTIONAL | SPEC_F_SLURM,
	  "node features, e.g. \"avx512&ib\" (sbatch --constraint)" },
	{ "resources.dependency", SPEC_STR, F(resources.dependency), "null", 1, 1024, 0, 0, NULL, SPEC_F_OPTIONAL | SPEC_F_SLURM,
	  "jobs to wait for, as sbatch --dependency, e.g. \"afterok:1234\" (dtrain-submit --after JOB sets it); the job is cancelled when that can no longer be met; null: none" },
	{ "resources.peak_tflops_per_node", SPEC_NUM, F(resources.peak_tflops_per_node), "0", 0, 1e6, 0, 0, NULL, 0,
	  "peak TFLOP/s of one node in the run's precision (its GPUs, or its CPUs), against which a GPT's model FLOPs utilization (MFU) is reported; a site declares it in its defaults (and may lock it); 0: measured at start from each rank's matrix product" },

	/* --- environment and set-up --- */
	{ "env", SPEC_STRMAP, F(env), "{}", 0, 4096, 0, 256, NULL, SPEC_F_TEXT,
	  "environment variables for every rank; values are exported verbatim, never run. LD_*, PATH, SLURM_*, SBATCH_*, BASH_ENV, ENV and DTRAIN_FAULT_* change how the job starts and are refused unless the site's env_allow names them (docs/site-admin.md)" },
	{ "setup", SPEC_STRLIST, F(setup), "[]", 0, 4096, 0, 256, NULL, SPEC_F_SHELL,
	  "shell lines run by the batch script before the ranks start (the only field that is shell code)" },

	/* --- model --- */
	{ "model.type", SPEC_ENUM, F(model.type), "\"mlp\"", 0, 0, 0, 0, "mlp|gpt|llama", 0,
	  "model family: \"mlp\" (model.inputs, hidden, outputs, activation), \"gpt\" (model.vocab_size, context, layers, heads, embd) or \"llama\" (those and model.kv_heads, intermediate_size, rope_theta, rope_scaling, rms_norm_eps, tie_word_embeddings, qkv_bias; docs/models.md)" },
	{ "model.inputs", SPEC_INT, F(model.inputs), "784", 1, 1e8, 0, 0, NULL, 0,
	  "input features per sample" },
	{ "model.hidden", SPEC_INTLIST, F(model.hidden), "[512, 512]", 1, 1e8, 0, 1024, NULL, 0,
	  "width of each hidden layer, input side first; [] for a linear model" },
	{ "model.outputs", SPEC_INT, F(model.outputs), "10", 1, 1e8, 0, 0, NULL, 0,
	  "output classes" },
	{ "model.activation", SPEC_ENUM, F(model.activation), "\"relu\"", 0, 0, 0, 0, "relu|gelu|tanh", 0,
	  "activation after each hidden layer" },
	{ "model.vocab_size", SPEC_INT, F(model.vocab_size), "50257", 2, 16777216, 0, 0, NULL, 0,
	  "gpt, llama: token ids are in [0, vocab_size); 256 for byte-level text, 50257 for GPT-2's BPE" },
	{ "model.context", SPEC_INT, F(model.context), "1024", 1, 1048576, 0, 0, NULL, 0,
	  "gpt, llama: positions a sample holds (tokens of context, T; the rotary tables are made for them)" },
	{ "model.layers", SPEC_INT, F(model.layers), "12", 1, 1023, 0, 0, NULL, 0,
	  "gpt, llama: transformer blocks (n_layer; llama: num_hidden_layers)" },
	{ "model.heads", SPEC_INT, F(model.heads), "12", 1, 65536, 0, 0, NULL, 0,
	  "gpt, llama: attention heads per block (n_head; llama: num_attention_heads); must divide model.embd" },
	{ "model.embd", SPEC_INT, F(model.embd), "768", 1, 1048576, 0, 0, NULL, 0,
	  "gpt, llama: width of the residual stream (n_embd; llama: hidden_size)" },
	{ "model.kv_heads", SPEC_INT, F(model.kv_heads), "0", 0, 65536, 0, 0, NULL, 0,
	  "llama: key and value heads, each shared by model.heads / kv_heads query heads (num_key_value_heads); must divide model.heads; 1: multi-query; 0: model.heads (multi-head)" },
	{ "model.intermediate_size", SPEC_INT, F(model.intermediate_size), "2048", 1, 1048576, 0, 0, NULL, 0,
	  "llama: width of the SwiGLU feed-forward (intermediate_size)" },
	{ "model.rope_theta", SPEC_NUM, F(model.rope_theta), "10000", 1, 1e12, 0, 0, NULL, 0,
	  "llama: base of the rotary embeddings' frequencies (rope_theta)" },
	{ "model.rope_scaling.rope_type", SPEC_ENUM, F(model.rope_scaling.rope_type), "\"default\"", 0, 0, 0, 0, "default|llama3", 0,
	  "llama: \"default\" (no rope_scaling) or \"llama3\", Llama 3.1's rescaled frequencies (rope_scaling.rope_type); the other model.rope_scaling keys are its fields" },
	{ "model.rope_scaling.factor", SPEC_NUM, F(model.rope_scaling.factor), "8", 1, 1e6, 0, 0, NULL, 0,
	  "llama3 scaling: the low frequencies are divided by it (rope_scaling.factor)" },
	{ "model.rope_scaling.low_freq_factor", SPEC_NUM, F(model.rope_scaling.low_freq_factor), "1", 1e-6, 1e6, 0, 0, NULL, 0,
	  "llama3 scaling: wavelengths above original_max_position_embeddings / low_freq_factor are scaled fully (rope_scaling.low_freq_factor)" },
	{ "model.rope_scaling.high_freq_factor", SPEC_NUM, F(model.rope_scaling.high_freq_factor), "4", 1e-6, 1e6, 0, 0, NULL, 0,
	  "llama3 scaling: wavelengths below original_max_position_embeddings / high_freq_factor are kept; between the two they are blended (rope_scaling.high_freq_factor); must be above low_freq_factor" },
	{ "model.rope_scaling.original_max_position_embeddings", SPEC_INT, F(model.rope_scaling.original_max_position_embeddings), "8192", 1, 1e9, 0, 0, NULL, 0,
	  "llama3 scaling: the context the model was first trained on (rope_scaling.original_max_position_embeddings)" },
	{ "model.rms_norm_eps", SPEC_NUM, F(model.rms_norm_eps), "1e-6", 1e-12, 1, 0, 0, NULL, 0,
	  "llama: epsilon of every RMSNorm (rms_norm_eps)" },
	{ "model.tie_word_embeddings", SPEC_BOOL, F(model.tie_word_embeddings), "false", 0, 0, 0, 0, NULL, 0,
	  "llama: the head's weight is the token embedding (tie_word_embeddings); false: lm_head.weight is its own" },
	{ "model.qkv_bias", SPEC_BOOL, F(model.qkv_bias), "false", 0, 0, 0, 0, NULL, 0,
	  "llama: biases on the q, k and v projections, as Qwen2 has (o_proj has none)" },
	{ "model.init_seed", SPEC_INT, F(model.init_seed), "1234", 0, BIG, 0, 0, NULL, 0,
	  "seed of the parameter initialisation" },

	/* --- data --- */
	{ "data.train", SPEC_STR, F(data.train), "null", 1, 4000, 0, 0, NULL, SPEC_F_OPTIONAL | SPEC_F_TEXT,
	  "training set: HDF5 file with /features and /labels (see dtrain-data)" },
	{ "data.test", SPEC_STR, F(data.test), "null", 1, 4000, 0, 0, NULL, SPEC_F_OPTIONAL | SPEC_F_TEXT,
	  "test set (gpt: validation token stream) evaluated at each epoch end or train.eval_every; null: none" },
	{ "data.shuffle", SPEC_BOOL, F(data.shuffle), "true", 0, 0, 0, 0, NULL, 0,
	  "reshuffle the training set each epoch (seeded by train.seed + epoch)" },

	/* --- parallel layout --- */
	{ "parallel.data", SPEC_INT, F(parallel.data), "1", 1, 65536, 0, 0, NULL, SPEC_F_AUTO,
	  "data-parallel replicas; \"auto\": the ranks of each start divided by parallel.pipeline (needed with a range of resources.nodes); the global batch and the data order stay the spec's whatever the count, so the loss curve does not depend on it" },
	{ "parallel.pipeline", SPEC_INT, F(parallel.pipeline), "1", 1, 1024, 0, 0, NULL, 0,
	  "pipeline stages the layers are split over" },
	{ "parallel.micro_batches", SPEC_INT, F(parallel.micro_batches), "1", 1, 65536, 0, 0, NULL, 0,
	  "micro-batches per replica per step" },
	{ "parallel.schedule", SPEC_ENUM, F(parallel.schedule), "\"1f1b\"", 0, 0, 0, 0, "1f1b|gpipe", 0,
	  "pipeline schedule" },
	{ "parallel.grad_sync", SPEC_ENUM, F(parallel.grad_sync), "\"auto\"", 0, 0, 0, 0, "auto|allreduce|shared|split", 0,
	  "how data-parallel replicas combine gradients; replicas of a stage on one node share parameters in memory: split (auto with pipeline 1) cuts every layer between them over the node's batch, shared sums one gradient per replica; allreduce: MPI between all replicas" },
	{ "parallel.optimizer", SPEC_ENUM, F(parallel.optimizer), "\"replicated\"", 0, 0, 0, 0, "replicated|sharded", 0,
	  "replicated: every data-parallel replica holds and updates all of its stage's optimizer state; sharded: gradients are reduce-scattered, each replica updates its 1/data of the stage with its 1/data of the state, and the parameters are all-gathered (ZeRO stage 1)" },
	{ "parallel.threads", SPEC_ENUM, F(parallel.threads), "\"auto\"", 0, 0, 0, 0, "auto|blas|split", 0,
	  "how a rank's resources.cpus_per_task threads share a step: split (auto with pipeline 1, one replica a node or grad_sync split, and a CPU for each thread) gives each thread a block of every layer, blas runs each matrix product on OpenBLAS's threads" },
	{ "parallel.stage_layers", SPEC_INTLIST, F(parallel.stage_layers), "[]", 1, 1e6, 0, 1024, NULL, 0,
	  "layers of each pipeline stage, first stage first; []: split to balance parameters" },

	/* --- training --- */
	{ "train.device", SPEC_ENUM, F(train.device), "\"cpu\"", 0, 0, 0, 0, "cpu|cuda", 0,
	  "where the model trains" },
	{ "train.precision", SPEC_ENUM, F(train.precision), "\"fp32\"", 0, 0, 0, 0, "fp32|bf16", 0,
	  "the matrix products' inputs: fp32, or bf16 (rounded to 8-bit mantissas, accumulated in float32; parameters, gradients and optimizer state stay float32)" },
	{ "train.tf32", SPEC_BOOL, F(train.tf32), "false", 0, 0, 0, 0, NULL, 0,
	  "cuda: matrix products on TF32 tensor cores (inputs rounded to 10-bit mantissas, about 1e-3 relative; Ampere and later); false: float32" },
	{ "train.epochs", SPEC_INT, F(train.epochs), "1", 0, 1e6, 0, 0, NULL, 0,
	  "passes over the training set; unset with train.max_steps set: as many as max_steps takes" },
	{ "train.max_steps", SPEC_INT, F(train.max_steps), "0", 0, BIG, 0, 0, NULL, 0,
	  "stop after this many optimizer steps; 0: no limit. Set without train.epochs, it alone bounds the run; with both set, the first reached stops it" },
	{ "train.global_batch", SPEC_INT, F(train.global_batch), "64", 1, 1e8, 0, 0, NULL, 0,
	  "samples per optimizer step, over all replicas" },
	{ "train.seed", SPEC_INT, F(train.seed), "0", 0, BIG, 0, 0, NULL, 0,
	  "seed of data shuffling" },
	{ "train.optimizer.type", SPEC_ENUM, F(train.optimizer.type), "\"sgd\"", 0, 0, 0, 0, "sgd|adamw", 0,
	  "optimizer" },
	{ "train.optimizer.lr", SPEC_NUM, F(train.optimizer.lr), "0.01", 1e-12, 100, 0, 0, NULL, 0,
	  "peak learning rate" },
	{ "train.optimizer.momentum", SPEC_NUM, F(train.optimizer.momentum), "0.9", 0, 0.999999, 0, 0, NULL, 0,
	  "SGD momentum; 0: plain SGD" },
	{ "train.optimizer.betas", SPEC_NUMLIST, F(train.optimizer.betas), "[0.9, 0.999]", 0, 0.999999, 2, 2, NULL, 0,
	  "AdamW beta1 and beta2" },
	{ "train.optimizer.weight_decay", SPEC_NUM, F(train.optimizer.weight_decay), "0", 0, 1, 0, 0, NULL, 0,
	  "decoupled weight decay (AdamW) or L2 (SGD)" },
	{ "train.lr_schedule.warmup_steps", SPEC_INT, F(train.lr_schedule.warmup_steps), "0", 0, BIG, 0, 0, NULL, 0,
	  "steps of linear warm-up from 0 to lr" },
	{ "train.lr_schedule.decay", SPEC_ENUM, F(train.lr_schedule.decay), "\"cosine\"", 0, 0, 0, 0, "cosine|constant", 0,
	  "decay after warm-up, down to min_lr at the last step" },
	{ "train.lr_schedule.min_lr", SPEC_NUM, F(train.lr_schedule.min_lr), "0", 0, 100, 0, 0, NULL, 0,
	  "learning rate at the end of the decay" },
	{ "train.grad_clip", SPEC_NUM, F(train.grad_clip), "0", 0, 1e12, 0, 0, NULL, 0,
	  "clip the global gradient norm to this; 0: off; the progress lines' and metrics' grad_norm is the norm before clipping" },
	{ "train.eval_every", SPEC_INT, F(train.eval_every), "0", 0, BIG, 0, 0, NULL, 0,
	  "evaluate data.test every this many steps (and at the end); 0: at each epoch end" },
	{ "train.eval_samples", SPEC_INT, F(train.eval_samples), "0", 0, BIG, 0, 0, NULL, 0,
	  "an evaluation reads the first this many samples of data.test (gpt: windows); 0: all of it" },
	{ "train.log_every", SPEC_INT, F(train.log_every), "10", 1, 1e9, 0, 0, NULL, 0,
	  "steps between progress lines" },

	/* --- checkpoints --- */
	{ "checkpoint.every_steps", SPEC_INT, F(checkpoint.every_steps), "0", 0, BIG, 0, 0, NULL, SPEC_F_AUTO,
	  "save every this many steps; 0: only at the end and on preemption; \"auto\": at Young/Daly's interval sqrt(2 C M), C a save's measured cost to training, M checkpoint.mtbi_seconds refined by this run's interruptions (docs/recovery.md)" },
	{ "checkpoint.mtbi_seconds", SPEC_NUM, F(checkpoint.mtbi_seconds), "86400", 60, 1e9, 0, 0, NULL, 0,
	  "mean time between interruptions (preemptions, failures) of the run's partition, in seconds, for every_steps \"auto\"; a site declares it in its defaults" },
	{ "checkpoint.keep", SPEC_INT, F(checkpoint.keep), "3", 1, 1000, 0, 0, NULL, 0,
	  "checkpoints kept; older ones are deleted" },
	{ "checkpoint.async", SPEC_BOOL, F(checkpoint.async), "true", 0, 0, 0, 0, NULL, 0,
	  "write checkpoints in the background while training goes on" },
	{ "checkpoint.resume", SPEC_STR, F(checkpoint.resume), "\"auto\"", 1, 4000, 0, 0, NULL, SPEC_F_TEXT,
	  "\"auto\": newest valid checkpoint of this run, if any; \"never\"; or the path of a "
	  "checkpoint, of a directory of checkpoints (its newest valid one), or of a run dir (its "
	  "checkpoints/), to start from" },
	{ "checkpoint.dir", SPEC_STR, F(checkpoint.dir), "null", 1, 4000, 0, 0, NULL, SPEC_F_OPTIONAL | SPEC_F_TEXT,
	  "where checkpoints go; null: <run_dir>/checkpoints (no checkpoints without either)" },
	{ "checkpoint.init_from", SPEC_STR, F(checkpoint.init_from), "null", 1, 4000, 0, 0, NULL, SPEC_F_OPTIONAL | SPEC_F_TEXT,
	  "fine-tuning: a checkpoint (or a run or checkpoint dir: its newest valid one, or an import "
	  "of dtrain-ckpt) whose model's tensors a new run starts from, by name, on any layout, with "
	  "a fresh optimizer at step 0; null: the model's own initialisation" },
	{ "checkpoint.init_fresh", SPEC_STRLIST, F(checkpoint.init_fresh), "[]", 1, 95, 0, 1024, NULL, SPEC_F_NAME,
	  "with init_from: tensors (the model's names) that keep the model's own initialisation "
	  "whatever the source holds (a new head; a tensor the source lacks or shapes otherwise)" },

	/* --- preemption --- */
	{ "preemption.signal", SPEC_ENUM, F(preemption.signal), "\"USR1\"", 0, 0, 0, 0, "USR1|USR2|TERM|INT|HUP|URG|XCPU", 0,
	  "signal Slurm sends lead_seconds before the time limit (sbatch --signal)" },
	{ "preemption.lead_seconds", SPEC_INT, F(preemption.lead_seconds), "120", 0, 65535, 0, 0, NULL, 0,
	  "seconds before the end that the signal arrives" },
	{ "preemption.max_requeues", SPEC_INT, F(preemption.max_requeues), "3", 0, 1000, 0, 0, NULL, 0,
	  "times the job requeues itself after saving; then it stops" },

	/* --- recovery from failures (a site may lock them: a cap) --- */
	{ "recovery.max_crashes", SPEC_INT, F(recovery.max_crashes), "3", 0, 1000, 0, 0, NULL, 0,
	  "times the batch script starts dtrain-run again, from the newest checkpoint, after a rank died or failed (an exit other than 0, 2, 3, 4 or 75; the watchdog's 5 too); then the job fails" },
	{ "recovery.max_node_failures", SPEC_INT, F(recovery.max_node_failures), "3", 0, 1000, 0, 0, NULL, 0,
	  "times a job requeued after losing a node (by Slurm, or by its batch script when a node stopped answering) starts again, counted apart from preemptions and its own requeues; then it fails at start" },
	{ "recovery.watchdog", SPEC_BOOL, F(recovery.watchdog), "true", 0, 0, 0, 0, NULL, 0,
	  "end a job step that stops making progress (a rank hung, stopped or cut off with its node): the ranks still alive name the ranks they wait for and exit 5, and the step starts again as after a crash" },
	{ "recovery.step_timeout_seconds", SPEC_INT, F(recovery.step_timeout_seconds), "0", 0, 1e7, 0, 0, NULL, 0,
	  "seconds a training step may take before the watchdog ends the job step (at least 2 are allowed); 0: automatic, 10 times the slowest of the last 32 steps and at least 60" },
	{ "recovery.timeout_seconds", SPEC_INT, F(recovery.timeout_seconds), "900", 0, 1e7, 0, 0, NULL, 0,
	  "seconds the watchdog allows start-up (once MPI is up) and resume, the first step of each start, a chunk of an evaluation, or a checkpoint save; 0: no bound" },
	{ "recovery.check_replicas_every", SPEC_INT, F(recovery.check_replicas_every), "1000", 0, BIG, 0, 0, NULL, 0,
	  "steps between checks that the data-parallel replicas of each stage hold the same parameters (and optimizer state unless sharded); they are also checked before every save, so that none is taken from replicas that disagree; one that differs is named with its node, and the job step exits 6 and starts again from the newest checkpoint; 0: before saves only" },
	{ "recovery.max_excluded_nodes", SPEC_INT, F(recovery.max_excluded_nodes), "2", 0, 1000, 0, 0, NULL, 0,
	  "bad nodes the job leaves out of its next starts (sbatch's excluded nodes): a node that did not answer the batch script's probe, one lost with a step, one whose replica disagreed, or one where two crashes began; never so many that the partition could no longer hold resources.nodes' minimum; 0: none left out" },
};

const struct spec_field *spec_fields(size_t *n)
{
	*n = sizeof(fields) / sizeof(fields[0]);
	return fields;
}

const struct spec_field *spec_field_find(const char *path)
{
	size_t i;

	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (!strcmp(fields[i].path, path))
			return &fields[i];
	return NULL;
}
