/*
 * import.c - `dtrain-ckpt import`: another program's GPT-2 weights as a
 * dtrain checkpoint (import.h), which `eval` and `sample` read and a run
 * starts from with checkpoint.init_from.
 *
 * The checkpoint is step 0 of a one-stage run with no optimizer state
 * (optimizer "none"), written and committed as a run's save is
 * (ckpt_write_whole): OUT_DIR/step-00000000.
 *
 * Sections: the command.
 */
#include "runtime/cmd/import.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/cli.h"
#include "base/io.h"
#include "jobs/spec.h"
#include "runtime/model/model.h"
#include "runtime/data/bpe.h"

/* --- the command --- */

static const char usage_import[] =
	"usage: dtrain-ckpt import SRC OUT_DIR [--config CONFIG.json] [--tokenizer DIR]\n"
	"                          [--context N] [--allow-nonfinite]\n"
	"\n"
	"Makes a dtrain checkpoint of another program's GPT-2 or Llama weights, for\n"
	"`eval`, `sample` and a run's checkpoint.init_from (fine-tuning). SRC is\n"
	"  - a Hugging Face model: a directory holding config.json and\n"
	"    model.safetensors (or the shards model.safetensors.index.json lists),\n"
	"    or the .safetensors or index file (its config.json beside it, or\n"
	"    --config); GPT-2 (model_type \"gpt2\") or the Llama family (\"llama\",\n"
	"    \"mistral\", \"qwen2\"); float32, float16 and bfloat16 weights;\n"
	"  - an llm.c checkpoint (gpt2_124M.bin: float32, or bfloat16 as llm.c's\n"
	"    version 5), known by its header or a name ending in .bin.\n"
	"The checkpoint is OUT_DIR/step-00000000: the whole model as one stage, no\n"
	"optimizer state. OUT_DIR must be new or empty. A GPT-2's BPE tokenizer found\n"
	"beside SRC (encoder.json and vocab.bpe, or Hugging Face's vocab.json and\n"
	"merges.txt) goes into the checkpoint, for `sample` to read and write text\n"
	"(a Llama's tokenizer is not read yet: its checkpoint samples token ids).\n"
	"Weights that hold a NaN or an infinity are refused, naming each such\n"
	"tensor and its first such element (as the file indexes it).\n"
	"\n"
	"Options:\n"
	"  --config FILE     the Hugging Face config.json (default: beside SRC)\n"
	"  --tokenizer DIR   where the tokenizer's files are (default: beside SRC)\n"
	"  --context N       a Llama's model.context (default: max_position_embeddings,\n"
	"                    at most 2048; no weight depends on it)\n"
	"  --allow-nonfinite import NaN and infinite weights all the same (to inspect\n"
	"                    or export them: verify, eval, sample and init_from\n"
	"                    refuse such a checkpoint)\n"
	"  -h, --help        this text\n"
	"\n"
	"Exit codes: 0 imported, 1 failure (another architecture, a damaged or truncated file,\n"
	"non-finite weights, OUT_DIR not empty, I/O error), 2 usage error.\n";

#define LLMC_MAGIC 20240326

/* llm.c's by its magic, or by its name (then a wrong magic is named) */
static bool is_llmc(const char *path)
{
	int32_t head[1] = { 0 };
	size_t n = strlen(path);
	FILE *f = fopen(path, "rb");
	bool yes = (f && fread(head, sizeof(head), 1, f) == 1 && head[0] == LLMC_MAGIC) ||
		   (n > 4 && !strcmp(path + n - 4, ".bin"));

	if (f)
		fclose(f);
	return yes;
}

/* The tokenizer beside the model in dir (bpe.h, rt_bpe_load_dir: a GPT-2
 * looks for its own files first, a Llama for tokenizer.json alone), loaded
 * to check it and its vocabulary
 * against the model's. *bpe NULL: none. One that dtrain does not read
 * (-ENOTSUP), found without --tokenizer, is left out with a warning. */
static int find_tokenizer(const char *dir, const struct rt_import *im, bool asked,
			  struct rt_bpe **bpe, struct dt_err *err)
{
	int rc = rt_bpe_load_dir(bpe, dir, !strcmp(im->s.model.type, "gpt"), err);

	if (rc == -ENOENT && !err->count)
		return 0;
	if (rc == -ENOTSUP && !asked) {
		dt_err_print("dtrain-ckpt", "warning: ", err);
		dt_err_clear(err);
		fprintf(stderr, "dtrain-ckpt: warning: the tokenizer is left out (the checkpoint samples token ids)\n");
		return 0;
	}
	if (rc)
		return rc;
	if (rt_bpe_vocab(*bpe) > im->s.model.vocab_size) /* a model's may be padded (50304) */
		return dt_err_add(err, "%s: %d tokens, more than the model's vocabulary of %ld: not its tokenizer",
				  dir, (int)rt_bpe_vocab(*bpe), im->s.model.vocab_size), -EINVAL;
	return 0;
}

/* the directory of a path: itself when it is one */
static void dir_of(const char *path, char *out, size_t size)
{
	struct stat sb;
	const char *slash = strrchr(path, '/');

	if (!stat(path, &sb) && S_ISDIR(sb.st_mode))
		snprintf(out, size, "%s", path);
	else if (slash)
		snprintf(out, size, "%.*s", (int)(slash - path), path);
	else
		snprintf(out, size, ".");
}

/* OUT_DIR new or empty: an import never mixes with other checkpoints */
static int out_dir_free(const char *dir, struct dt_err *err)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int used = 0;

	if (!d)
		return errno == ENOENT ? 0 : (dt_err_add(err, "%s: %s", dir, strerror(errno)), -errno);
	while ((e = readdir(d)))
		used += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return used ? (dt_err_add(err, "%s: not empty (hint: import into a new directory)", dir), -EEXIST)
		    : 0;
}

static void fill_meta(struct ckpt_meta *m, const struct rt_import *im, const char *src)
{
	time_t now = time(NULL);
	struct tm tm;

	memset(m, 0, sizeof(*m));
	m->steps_per_epoch = m->global_batch = m->train_rows = 1;
	snprintf(m->optimizer, sizeof(m->optimizer), "none");
	m->optimizer_shards = 1;
	snprintf(m->model_type, sizeof(m->model_type), "%s", im->s.model.type);
	snprintf(m->model_config, sizeof(m->model_config), "%s", im->config);
	m->n_blocks = im->n_blocks;
	m->data = m->pipeline = 1;
	m->stage_first[1] = im->n_blocks;
	gmtime_r(&now, &tm);
	strftime(m->created, sizeof(m->created), "%Y-%m-%dT%H:%M:%SZ", &tm);
	ckpt_hash64(src, strlen(src), m->spec_hash); /* where it came from */
}

/* Every weight finite: else a line per tensor that is not, under dtrain's
 * name (GPT2LMHeadModel's), with its first bad element as the source
 * indexes it (Hugging Face stores the Conv1D weights [in][out]: rt_hf_conv1d). With
 * allow, the same lines are warnings on stderr and the import goes on. */
static int check_finite(const struct rt_import *im, const char *src, bool hf, bool allow,
			struct dt_err *err)
{
	struct dt_err warn = { 0 };
	struct dt_err *to = allow ? &warn : err;
	int bad = 0;

	for (int i = 0; i < im->n; i++) {
		const struct ckpt_tensor *t = &im->t[i];
		const float *v = im->params + t->offset;
		size_t n = ckpt_tensor_floats(t), k, first = n, count = 0, r, c;
		char at[64];

		for (k = 0; k < n; k++)
			if (!isfinite(v[k]))
				first = count++ ? first : k;
		if (!count || (!strcmp(t->name, "lm_head.weight") && rt_import_head_tied(&im->s.model)))
			continue; /* the embedding's copy (tied), named as the embedding */
		r = t->ndim == 2 ? first / (size_t)t->shape[1] : first;
		c = t->ndim == 2 ? first % (size_t)t->shape[1] : 0;
		if (t->ndim == 2 && hf && rt_hf_conv1d(t->name))
			snprintf(at, sizeof(at), "[%zu][%zu]", c, r);
		else if (t->ndim == 2)
			snprintf(at, sizeof(at), "[%zu][%zu]", r, c);
		else
			snprintf(at, sizeof(at), "[%zu]", r);
		bad++;
		dt_err_add(to, "%s: tensor \"%s\": %zu non-finite value%s, the first %s is %s%s", src,
			   t->name, count,
			   count == 1 ? "" : "s", at, isnan(v[first]) ? "NaN" : "infinite",
			   allow ? " (imported: --allow-nonfinite)" : "");
	}
	if (bad && !allow)
		dt_err_add(err, "%s: %d tensor%s hold%s NaN or infinite weights: a diverged or damaged model (hint: --allow-nonfinite imports them all the same, for inspect and export)",
			   src, bad, bad == 1 ? "" : "s", bad == 1 ? "s" : "");
	dt_err_print("dtrain-ckpt", "warning: ", &warn);
	return bad && !allow ? -EINVAL : 0;
}

/* The source's paths: an llm.c file, or a safetensors file and its config */
static int locate(const char *src, const char *config, char *st, char *cfg, size_t size,
		  bool *llmc, struct dt_err *err)
{
	struct stat sb;
	char *slash;

	*llmc = false;
	if (stat(src, &sb))
		return dt_err_add(err, "%s: %s", src, strerror(errno)), -errno;
	if (S_ISDIR(sb.st_mode)) {
		snprintf(st, size, "%s/model.safetensors", src);
		if (access(st, F_OK)) /* sharded */
			snprintf(st, size, "%s/model.safetensors.index.json", src);
		snprintf(cfg, size, "%s/config.json", config ? "" : src);
		if (config)
			snprintf(cfg, size, "%s", config);
		return 0;
	}
	if (is_llmc(src)) {
		*llmc = true;
		snprintf(st, size, "%s", src);
		return 0;
	}
	snprintf(st, size, "%s", src);
	if (config) {
		snprintf(cfg, size, "%s", config);
		return 0;
	}
	snprintf(cfg, size, "%s", src);
	slash = strrchr(cfg, '/');
	snprintf(slash ? slash + 1 : cfg, size - (size_t)(slash ? slash + 1 - cfg : 0), "config.json");
	return 0;
}

static int parse_import(int argc, char **argv, const char **config, const char **tokenizer,
			long *context, bool *allow_nonfinite)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' }, { "tokenizer", required_argument, NULL, 't' },
		{ "allow-nonfinite", no_argument, NULL, 'a' }, { "help", no_argument, NULL, 'h' },
		{ "context", required_argument, NULL, 'T' }, { NULL, 0, NULL, 0 },
	};
	char *end;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (c == 'h')
			return fputs(usage_import, stdout), 1;
		if (c == 'c' || c == 't')
			*(c == 'c' ? config : tokenizer) = optarg;
		else if (c == 'a')
			*allow_nonfinite = true;
		else if (c == 'T') {
			*context = strtol(optarg, &end, 10);
			if (*context < 1 || *end || *context > 1L << 24)
				return dt_usage_error("dtrain-ckpt", usage_import, "--context: expected a number in [1, 16777216] (got \"%s\")", optarg);
		}
		else if (c == ':')
			return dt_usage_error("dtrain-ckpt", usage_import, "%s: needs a value", argv[optind - 1]);
		else
			return dt_unknown_option("dtrain-ckpt", usage_import, argv[optind - 1], opts);
	}
	if (argc - optind != 2)
		return dt_usage_error("dtrain-ckpt", usage_import, "expected SRC and OUT_DIR (got %d arguments)",
				      argc - optind);
	return 0;
}

int rt_cmd_import(int argc, char **argv)
{
	struct rt_import im = { 0 };
	struct dt_err err = { 0 };
	struct ckpt_meta *meta = NULL;
	struct rt_bpe *bpe = NULL;
	struct ckpt_tokenizer tok = { 0 };
	struct stat sb;
	const char *config = NULL, *tokenizer = NULL, *src, *out;
	char st[4200], cfg[4200] = "", name[32], tdir[4200];
	bool llmc, allow_nonfinite = false;
	int rc = parse_import(argc, argv, &config, &tokenizer, &im.want_context, &allow_nonfinite);

	if (rc)
		return rc == 1 ? 0 : rc;
	src = argv[optind];
	out = argv[optind + 1];
	rc = locate(src, config, st, cfg, sizeof(st), &llmc, &err);
	if (!rc)
		rc = out_dir_free(out, &err);
	if (!rc)
		rc = llmc ? rt_import_llmc(st, &im, &err) : rt_import_hf(st, cfg, &im, &err);
	if (!rc)
		rc = check_finite(&im, st, !llmc, allow_nonfinite, &err);
	if (!rc && tokenizer && (stat(tokenizer, &sb) || !S_ISDIR(sb.st_mode)))
		rc = (dt_err_add(&err, "--tokenizer: %s: not a directory", tokenizer), -ENOENT);
	if (!rc) {
		dir_of(tokenizer ? tokenizer : src, tdir, sizeof(tdir));
		rc = find_tokenizer(tdir, &im, tokenizer != NULL, &bpe, &err);
		if (!rc && tokenizer && !bpe)
			rc = (dt_err_add(&err, "--tokenizer: %s holds no tokenizer (tokenizer.json, encoder.json and vocab.bpe, or vocab.json and merges.txt)",
					 tokenizer), -ENOENT);
	}
	if (bpe) {
		struct rt_bpe_files f;

		rt_bpe_files(bpe, &f);
		tok = (struct ckpt_tokenizer){ f.n, { f.name[0], f.name[1] }, { f.data[0], f.data[1] },
					       { f.len[0], f.len[1] } };
	}
	if (!rc && !(meta = malloc(sizeof(*meta))))
		rc = -ENOMEM;
	if (!rc) {
		fill_meta(meta, &im, st);
		rc = ckpt_meta_finish(meta, &err);
	}
	if (!rc)
		rc = ckpt_write_whole(out, meta, im.t, im.n, im.params, im.n_params, bpe ? &tok : NULL,
				      &err);
	if (!rc) {
		ckpt_step_name(0, name, sizeof(name));
		bool tied = rt_import_head_tied(&im.s.model);

		printf("dtrain-ckpt: imported %s (%s %s: V %ld, T %ld, L %ld, NH %ld, C %ld; %.1f M parameters%s) into %s/%s\n",
		       st, llmc ? "llm.c" : "Hugging Face", llmc || !strcmp(im.family, "gpt2") ? "GPT-2" : im.family, im.s.model.vocab_size, im.s.model.context, im.s.model.layers, im.s.model.heads, im.s.model.embd,
		       (double)(im.n_params - (tied ? (size_t)(im.s.model.vocab_size * im.s.model.embd) : 0)) / 1e6,
		       !bpe ? "" : tok.n == 2 ? "; its BPE tokenizer" : "; its tokenizer.json", out, name);
	}
	dt_err_print("dtrain-ckpt", "", &err);
	free(meta);
	rt_bpe_free(bpe);
	rt_import_free(&im);
	return rc ? 1 : 0;
}
