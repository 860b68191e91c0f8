/*
 * spec.h - the dtrain job spec: one JSON document that says what to train,
 * where and how.
 *
 * Every key is declared once, in the table in spec_table.c (path, type,
 * default, bounds, one-line description). That table drives the parser, the
 * validation messages, `--set a.b=value` overrides, the dump of the resolved
 * spec and the reference in jobs/README.md. A key missing from the table is an
 * error ("did you mean ...").
 *
 * Resolution, in order: a policy's `defaults` (the site's: site/site.h
 * makes a struct spec_policy of a site file), under the user's spec file,
 * under the `--set` overrides; then the table defaults fill the rest; then
 * types, bounds and cross-field rules are checked; then the policy's limits.
 * A struct spec that spec_resolve() filled is always valid.
 *
 * Invariants of a resolved spec, at every node count n of resources.nodes
 * (one, or each of an elastic range min..max) with data = spec_data_for():
 *   n * resources.tasks_per_node == data * parallel.pipeline
 *   train.global_batch % (data * parallel.micro_batches) == 0
 * parallel.data is a number only when resources.nodes is one; "auto"
 * (SPEC_AUTO) takes the replicas from the ranks Slurm granted.
 *   parallel.pipeline <= number of model layers (hidden layers + 1)
 *   name, partition, account, qos, constraint, run_dir contain no character a
 *   shell or an #SBATCH line would treat specially (see spec_table.c).
 */
#ifndef DTRAIN_JOBS_SPEC_H
#define DTRAIN_JOBS_SPEC_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "base/buf.h"

/* --- value containers (owned by the struct spec they are in) --- */
struct spec_strs { char **v; size_t n; };
struct spec_ints { long *v; size_t n; };
struct spec_nums { double *v; size_t n; };
struct spec_map { char **key; char **val; size_t n; }; /* in file order */
struct spec_range { long min, max; }; /* min == max: one value */

/* --- the spec; strings are NULL when unset and optional --- */
struct spec {
	char *name;    /* job name, [A-Za-z0-9._-] */
	char *run_dir; /* absolute after resolution; NULL: chosen at submit */
	struct spec_resources {
		struct spec_range nodes; /* min < max: elastic, Slurm grants a count
					  * in between at each start */
		long tasks_per_node;
		long cpus_per_task;
		long gpus_per_node;
		long mem_per_node_mb; /* MiB; 0: Slurm's default */
		long time_s;          /* wall-clock limit in seconds; 0: partition's */
		long time_min_s;      /* sbatch --time-min in seconds; 0: none */
		char *partition;
		char *account;
		char *qos;
		char *constraint;
		char *dependency; /* sbatch --dependency; NULL: none */
		double peak_tflops_per_node; /* for MFU; 0: measured at start */
	} resources;
	struct spec_map env;    /* exported before the job runs */
	struct spec_strs setup; /* shell lines, run by the batch script */
	struct spec_model {
		char *type;           /* "mlp" */
		long inputs;
		struct spec_ints hidden; /* width of each hidden layer */
		long outputs;
		char *activation;     /* "relu" | "gelu" | "tanh" */
		long vocab_size;      /* gpt: ids in [0, vocab_size) */
		long context;         /* gpt: positions of a sample, T */
		long layers;          /* gpt: transformer blocks */
		long heads;           /* gpt: attention heads; divides embd */
		long embd;            /* gpt: residual width, C */
		long kv_heads;        /* llama: key and value heads; 0: model.heads */
		long intermediate_size; /* llama: the SwiGLU's width */
		double rope_theta;    /* llama: RoPE's base */
		struct spec_rope_scaling {
			char *rope_type; /* "default" | "llama3" */
			double factor, low_freq_factor, high_freq_factor;
			long original_max_position_embeddings;
		} rope_scaling;       /* llama: Llama 3.1's rescaled RoPE frequencies */
		double rms_norm_eps;  /* llama: RMSNorm's epsilon */
		bool tie_word_embeddings; /* llama: the head is the embedding */
		bool qkv_bias;        /* llama: biases on q, k and v (Qwen2) */
		long init_seed;
	} model;
	struct spec_data {
		char *train; /* HDF5 file; NULL: none yet */
		char *test;
		bool shuffle;
	} data;
	struct spec_parallel {
		long data;          /* data-parallel replicas; SPEC_AUTO: from the
				     * ranks granted (spec_data_for) */
		long pipeline;      /* pipeline stages */
		long micro_batches; /* per replica per step */
		char *schedule;     /* "1f1b" | "gpipe" */
		char *grad_sync;    /* "auto" | "allreduce" | "shared" | "split" (runtime/parallel/dp.h) */
		char *threads;      /* "auto" | "blas" | "split": a rank's threads (runtime/train/train.c) */
		char *optimizer;    /* "replicated" | "sharded": optimizer state per replica (runtime/parallel/shard.h) */
		struct spec_ints stage_layers; /* layers per stage; empty: balanced */
	} parallel;
	struct spec_train {
		char *device; /* "cpu" | "cuda" */
		bool tf32;    /* cuda: TF32 products (runtime/gpu/cuda_device.h) */
		char *precision; /* "fp32" | "bf16": the products' inputs (runtime/model/device.h) */
		long epochs;
		long max_steps; /* 0: no limit */
		long global_batch;
		long seed;
		struct spec_optimizer {
			char *type; /* "sgd" | "adamw" */
			double lr;
			double momentum;
			struct spec_nums betas; /* exactly 2 */
			double weight_decay;
		} optimizer;
		struct spec_lr_schedule {
			long warmup_steps;
			char *decay; /* "cosine" | "constant" */
			double min_lr;
		} lr_schedule;
		double grad_clip; /* max global gradient norm; 0: off */
		long eval_every;  /* steps between evaluations; 0: at epoch ends */
		long eval_samples; /* the first this many of data.test; 0: all */
		long log_every;   /* steps between progress lines */
	} train;
	struct spec_checkpoint {
		long every_steps; /* 0: only at the end and on preemption;
				   * SPEC_AUTO: by Young/Daly's formula */
		double mtbi_seconds; /* mean time between interruptions, for "auto" */
		long keep;
		bool async;
		char *resume; /* "auto" | "never" | a checkpoint or checkpoint dir path (absolute) */
		char *dir;    /* NULL: <run_dir>/checkpoints; absolute */
		char *init_from; /* NULL, or the checkpoint (or run or checkpoint dir)
				  * whose model a new run starts from; absolute */
		struct spec_strs init_fresh; /* tensors that keep the model's own init */
	} checkpoint;
	struct spec_preemption {
		char *signal; /* "USR1", ...: sent lead_seconds before the end */
		long lead_seconds;
		long max_requeues;
	} preemption;
	struct spec_recovery {
		long max_crashes;       /* job steps started again after a rank died */
		long max_node_failures; /* Slurm's requeues after a node failed */
		bool watchdog;             /* end a job step that stops making progress */
		long step_timeout_seconds; /* a step's bound; 0: automatic */
		long timeout_seconds;      /* start-up, first step, eval, save; 0: none */
		long check_replicas_every; /* steps between the replicas' checks; 0: saves only */
		long max_excluded_nodes;   /* bad nodes left out of the job's next starts */
	} recovery;
};

/* --- the declarative table --- */
enum spec_type {
	SPEC_STR,     /* char * */
	SPEC_ENUM,    /* char *, one of .choices */
	SPEC_INT,     /* long */
	SPEC_NUM,     /* double */
	SPEC_BOOL,    /* bool */
	SPEC_TIME,    /* long seconds; Slurm time string or minutes */
	SPEC_MEM,     /* long MiB; "4G", "512M" or MiB */
	SPEC_INTLIST, /* struct spec_ints */
	SPEC_NUMLIST, /* struct spec_nums */
	SPEC_STRLIST, /* struct spec_strs */
	SPEC_STRMAP,  /* struct spec_map */
	SPEC_RANGE,   /* struct spec_range; N, "A-B" or {"min": A, "max": B} */
};

enum spec_flags {
	SPEC_F_OPTIONAL = 1 << 0, /* may be null / unset */
	SPEC_F_NAME = 1 << 1,     /* [A-Za-z0-9._-]+ */
	SPEC_F_SLURM = 1 << 2,    /* [A-Za-z0-9._,:=+-]+ and for constraint &|[]*! */
	SPEC_F_PATH = 1 << 3,     /* path safe in a batch script: no quote, $, `, space... */
	SPEC_F_TEXT = 1 << 4,     /* any printable text (no control characters) */
	SPEC_F_SHELL = 1 << 5,    /* shell lines: run as written, one line each */
	SPEC_F_AUTO = 1 << 6,     /* an integer that may be "auto": stored as SPEC_AUTO */
};

/* The value of an integer key set to "auto" (SPEC_F_AUTO). */
#define SPEC_AUTO (-1L)

struct spec_field {
	const char *path;    /* "resources.nodes" */
	enum spec_type type;
	size_t off;          /* offsetof(struct spec, ...) */
	const char *def;     /* default as JSON text ("null" for unset) */
	double min, max;     /* bounds of numbers and of list elements */
	int min_items, max_items; /* list lengths (0, 0: any) */
	const char *choices; /* SPEC_ENUM: "a|b|c" */
	unsigned flags;
	const char *doc;     /* one line for the reference */
};

/* The table, in document order; *n gets its length. */
const struct spec_field *spec_fields(size_t *n);
/* The field with exactly this path, or NULL. */
const struct spec_field *spec_field_find(const char *path);

/* --- life cycle --- */

struct json_object;

/* A policy over users' specs, as the cluster's admins set it (site/site.h:
 * site_policy()). Every pointer is borrowed for the call that takes it. */
struct spec_policy {
	const char *label;                /* its file, named in messages; NULL: none */
	struct json_object *defaults;     /* a job-spec fragment under the user's
					   * spec, or NULL */
	const struct spec_strs *locked;   /* paths users may not set (a path covers
					   * those below it; "env.PREFIX*" the env
					   * keys starting with PREFIX), or NULL */
	const struct spec_strs *env_allowed; /* env keys (NAME, or PREFIX*) a user's
					   * spec may set though a lock pattern covers
					   * them or they change how the job starts
					   * (spec_env_starts_job); NULL: none */
	/* The resolved spec against the policy's limits, or NULL for none;
	 * origin(octx, path) names where a value came from (the user's file,
	 * "--set", the policy's file). 0, or -EINVAL with every problem in err. */
	int (*check)(const void *ctx, const struct spec *spec,
		     const char *(*origin)(void *octx, const char *path), void *octx,
		     struct dt_err *err);
	const void *ctx;                  /* check's first argument */
};

/* Where a spec comes from. Every pointer is borrowed for the call. */
struct spec_input {
	const char *path;         /* the user's job spec file; required */
	const struct spec_policy *policy; /* the site's policy, or NULL for none */
	const char *const *sets;  /* "a.b=value" overrides, applied last */
	size_t n_sets;
	bool resolved;            /* path is a spec resolved before (a run dir's
				   * spec.json): its env passed the site's checks
				   * then and holds the site's defaults */
	long ntasks;              /* sbatch's -n: tasks in all, which sets
				   * resources.tasks_per_node to ntasks /
				   * resources.nodes; 0: not given */
};

/* The entry of `paths` equal to `path` or above it ("resources" covers
 * "resources.partition", not "resourcesX"), or matching it as a pattern
 * ("env.*" covers every env key, "env.LD_*" those starting with LD_), or
 * NULL; paths may be NULL. */
const char *spec_path_covered(const struct spec_strs *paths, const char *path);
/* Whether an environment variable name matches one of `names` (each a NAME,
 * or PREFIX* for the names starting with PREFIX); names may be NULL. */
bool spec_env_listed(const struct spec_strs *names, const char *name);
/* What an environment variable changes about how the job starts, when it is
 * one a job spec may not set without the site's leave (LD_*: the dynamic
 * loader; PATH: which programs run, srun among them; SLURM_*: Slurm's
 * settings of the job; DTRAIN_FAULT_*: dtrain's fault injection; BASH_ENV,
 * ENV: a file every shell runs first); NULL for any other. */
const char *spec_env_starts_job(const char *name);

/* Resolve a job spec (see the top of this file). On success *out is a valid
 * spec that the caller frees with spec_free(). On failure returns -EINVAL
 * (invalid input), -ENOENT/-EACCES... (file not readable) or -ENOMEM, every
 * problem is in err, and *out is left empty. */
int spec_resolve(const struct spec_input *in, struct spec *out, struct dt_err *err);

/* Check a partial spec (a site's `defaults`) against the table: known keys,
 * types, bounds; cross-field rules are not checked. Messages read
 * "<label>: <prefix><path>: ...". 0 or -EINVAL. */
int spec_check_fragment(struct json_object *obj, const char *label,
			const char *prefix, struct dt_err *err);

/* Read a file holding one strict JSON object; errors name path:line:column.
 * Caller drops *out with json_object_put(). 0, -EINVAL or -errno. */
int spec_json_load(const char *path, struct json_object **out, struct dt_err *err);

/* The table engine, for other modules' own tables (site.c): check v against
 * row f (f->off is relative to base) and store it at base, or only check
 * when base is NULL. Messages read "<label>: <prefix><f->path>: ...". */
int spec_field_set(const struct spec_field *f, struct json_object *v, void *base,
		   const char *label, const char *prefix, struct dt_err *err);
/* Free what spec_field_set() stored at base for row f. */
void spec_field_free(const struct spec_field *f, void *base);

/* Load a resolved spec written by spec_dump() (no site, no overrides). */
int spec_load(const char *path, struct spec *out, struct dt_err *err);

/* Frees everything a spec owns and zeroes it; safe on a zeroed spec. */
void spec_free(struct spec *s);

/* --- output --- */

/* The resolved spec as pretty JSON with every key of the table. 0 or -ENOMEM. */
int spec_dump(const struct spec *s, struct dt_buf *out);
/* The reference table of every key as Markdown (for jobs/README.md). */
int spec_doc_markdown(struct dt_buf *out);

/* --- queries --- */

/* Number of the model's blocks, the units of parallel.stage_layers:
 * mlp: its layers (hidden + output); gpt: the embedding, model.layers
 * transformer blocks and the head. */
long spec_layers(const struct spec *s);
/* The data-parallel replicas on `ranks` ranks: parallel.data, or with
 * "auto" ranks / parallel.pipeline. 0, with the reason in why (a phrase
 * naming the keys), when the spec cannot run on that many ranks: not data x
 * pipeline, or a global batch the replicas' micro-batches do not divide. */
long spec_data_for(const struct spec *s, long ranks, char *why, size_t why_size);
/* parallel.optimizer is "sharded" (runtime/parallel/shard.h). */
bool spec_optimizer_sharded(const struct spec *s);
/* Slurm time string ("D-HH:MM:SS" or "HH:MM:SS") of seconds into buf. */
void spec_format_time(long seconds, char *buf, size_t size);
/* Parse a Slurm time string; 0 or -EINVAL. */
int spec_parse_time(const char *s, long *seconds);
/* Parse a memory size ("4G", "4096M", "4096"); MiB; 0 or -EINVAL. */
int spec_parse_mem(const char *s, long *mib);

#endif
