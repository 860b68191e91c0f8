/*
 * export_st.c - `dtrain-ckpt export`: the checkpoint library's export to
 * one HDF5 file (ckpt_cmds.c), or with --format safetensors the
 * model's parameters as a safetensors file (import.h): a GPT under
 * Hugging Face GPT2LMHeadModel's names with its Conv1D layout, the tied
 * head left out, and its config.json beside the file, so that
 * transformers' from_pretrained on that directory loads it; a Llama under
 * the same names it has (LlamaForCausalLM's, or Qwen2ForCausalLM's with
 * q/k/v biases), a tied head left out, and its config.json; an MLP under
 * its own names (nn.Sequential's), as it is.
 *
 * Sections: the file, the command.
 */
#include "runtime/cmd/import.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cli.h"
#include "base/io.h"
#include "checkpoint/ckpt.h"
#include "runtime/cmd/ckpt_cmds.h"
#include "checkpoint/safetensors.h"
#include "runtime/cmd/ckpt_model.h"
#include "runtime/model/device.h"

static const char usage_export[] =
	"usage: dtrain-ckpt export CKPT OUT [--format h5|safetensors] [--force]\n"
	"\n"
	"Verifies CKPT, then writes its whole model into one file OUT, which\n"
	"appears complete or not at all. CKPT may be a run directory or checkpoint\n"
	"dir (its newest checkpoint).\n"
	"  h5           (default) parameters and optimizer state, the same paths and\n"
	"               attributes as CKPT/model.h5, as ordinary datasets: one file\n"
	"               for h5py or h5dump, without the shards\n"
	"  safetensors  (the default when OUT ends in .safetensors) the parameters,\n"
	"               float32: a GPT under Hugging Face GPT-2's names and layout\n"
	"               (Conv1D [in][out], lm_head tied to wte and left out) with\n"
	"               config.json written beside OUT, for transformers'\n"
	"               GPT2LMHeadModel.from_pretrained(DIR); a Llama under Hugging\n"
	"               Face's names (a tied lm_head left out) with its config.json\n"
	"               (model_type \"llama\", or \"qwen2\" with q/k/v biases); an MLP\n"
	"               under its own names (nn.Sequential's)\n"
	"\n"
	"Options:\n"
	"  --format F   h5 or safetensors\n"
	"  -f, --force  overwrite OUT (and config.json) if they exist\n"
	"  -h, --help   this text\n"
	"\n"
	"Exit codes: 0 exported, 1 failure (damaged checkpoint, OUT exists, I/O\n"
	"error), 2 usage error.\n";

/* --- the file --- */

/* GPT-2's config.json for the model of s, into *text (malloc'd) */
static int gpt_config_text(const struct spec *s, char **text, size_t *len)
{
	int n = asprintf(text,
		     "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n"
		     "  \"vocab_size\": %ld,\n  \"n_positions\": %ld,\n  \"n_ctx\": %ld,\n"
		     "  \"n_embd\": %ld,\n  \"n_layer\": %ld,\n  \"n_head\": %ld,\n  \"n_inner\": null,\n"
		     "  \"activation_function\": \"gelu_new\",\n  \"layer_norm_epsilon\": 1e-05,\n"
		     "  \"resid_pdrop\": 0.0,\n  \"embd_pdrop\": 0.0,\n  \"attn_pdrop\": 0.0,\n"
		     "  \"tie_word_embeddings\": true,\n  \"torch_dtype\": \"float32\"\n}\n",
		     s->model.vocab_size, s->model.context, s->model.context, s->model.embd,
		     s->model.layers, s->model.heads);

	*len = n < 0 ? 0 : (size_t)n;
	return n < 0 ? -ENOMEM : 0;
}

/* A Llama's config.json (LlamaConfig's keys; Qwen2Config's with its q/k/v
 * biases) for the model of s, into *text (malloc'd) */
static int llama_config_text(const struct spec *s, char **text, size_t *len)
{
	const struct spec_model *m = &s->model;
	const struct spec_rope_scaling *r = &m->rope_scaling;
	bool qwen = m->qkv_bias;
	char scaling[400] = "null";
	int n;

	if (!strcmp(r->rope_type, "llama3"))
		snprintf(scaling, sizeof(scaling),
			 "{\"rope_type\": \"llama3\", \"factor\": %.17g, \"low_freq_factor\": %.17g, \"high_freq_factor\": %.17g, \"original_max_position_embeddings\": %ld}",
			 r->factor, r->low_freq_factor, r->high_freq_factor, r->original_max_position_embeddings);
	n = asprintf(text,
		     "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n"
		     "  \"vocab_size\": %ld,\n  \"hidden_size\": %ld,\n  \"intermediate_size\": %ld,\n"
		     "  \"num_hidden_layers\": %ld,\n  \"num_attention_heads\": %ld,\n"
		     "  \"num_key_value_heads\": %ld,\n  \"max_position_embeddings\": %ld,\n"
		     "  \"hidden_act\": \"silu\",\n  \"rms_norm_eps\": %.17g,\n  \"rope_theta\": %.17g,\n"
		     "  \"rope_scaling\": %s,\n  \"tie_word_embeddings\": %s,\n%s"
		     "  \"torch_dtype\": \"float32\"\n}\n",
		     qwen ? "Qwen2ForCausalLM" : "LlamaForCausalLM", qwen ? "qwen2" : "llama", m->vocab_size,
		     m->embd, m->intermediate_size, m->layers, m->heads, m->kv_heads ? m->kv_heads : m->heads,
		     m->context, m->rms_norm_eps, m->rope_theta, scaling,
		     m->tie_word_embeddings ? "true" : "false",
		     qwen ? "  \"use_sliding_window\": false,\n" : "  \"attention_bias\": false,\n  \"mlp_bias\": false,\n");
	*len = n < 0 ? 0 : (size_t)n;
	return n < 0 ? -ENOMEM : 0;
}

/* config.json beside the export: new, the same text, or --force */
static int config_free(const char *path, const char *text, size_t len, bool force,
		       struct dt_err *err)
{
	char *old = NULL;
	size_t old_len = 0;
	int rc = 0;

	if (!force && dt_read_file(path, &old, &old_len) == 0 &&
	    (old_len != len || memcmp(old, text, len)))
		rc = (dt_err_add(err, "%s: exists and says another model (hint: --force replaces it, or export into another directory)",
				 path), -EEXIST);
	free(old);
	return rc;
}

static int write_st(const struct rt_ckpt_model *m, const char *out, bool force, struct dt_err *err)
{
	bool gpt = !strcmp(m->s.model.type, "gpt"), llama = !strcmp(m->s.model.type, "llama");
	bool drop_head = rt_import_head_tied(&m->s.model); /* Hugging Face leaves it out */
	const struct rt_stage *st = &m->st;
	struct st_out *t = calloc((size_t)st->n_tensors, sizeof(*t));
	float *conv = NULL;
	size_t n = 0, conv_floats = 0, at = 0, text_len = 0;
	static const char *const meta[] = { "format", "pt" };
	char cfg[4200], *slash, *text = NULL;
	int i, rc = 0;

	for (i = 0; i < st->n_tensors; i++)
		if (gpt && rt_hf_conv1d(st->tensors[i].name))
			conv_floats += st->tensors[i].n;
	conv = malloc((conv_floats ? conv_floats : 1) * sizeof(float));
	if (!t || !conv) {
		free(t);
		free(conv);
		return dt_err_add(err, "%s: out of memory", out), -ENOMEM;
	}
	for (i = 0; i < st->n_tensors; i++) {
		const struct rt_tensor *r = &st->tensors[i];
		struct st_out *o = &t[n];

		if (drop_head && !strcmp(r->name, "lm_head.weight"))
			continue; /* tied to the embedding */
		n++;
		o->name = r->name;
		o->ndim = r->ndim;
		o->data = st->params + r->offset;
		for (int d = 0; d < r->ndim; d++)
			o->shape[d] = (uint64_t)r->shape[d];
		if (gpt && rt_hf_conv1d(r->name)) { /* [out][in] -> Conv1D's [in][out] */
			rt_transpose(st->params + r->offset, conv + at, (size_t)r->shape[0], (size_t)r->shape[1]);
			o->data = conv + at;
			o->shape[0] = (uint64_t)r->shape[1];
			o->shape[1] = (uint64_t)r->shape[0];
			at += r->n;
		}
	}
	/* config.json is checked before the weights are written, and written
	 * after them: a refusal leaves nothing behind */
	if (gpt || llama) {
		snprintf(cfg, sizeof(cfg), "%s", out);
		slash = strrchr(cfg, '/');
		snprintf(slash ? slash + 1 : cfg, sizeof(cfg) - (size_t)(slash ? slash + 1 - cfg : 0),
			 "config.json");
		rc = gpt ? gpt_config_text(&m->s, &text, &text_len) : llama_config_text(&m->s, &text, &text_len);
		if (rc)
			dt_err_add(err, "%s: out of memory", cfg);
		else
			rc = config_free(cfg, text, text_len, force, err);
	}
	if (!rc)
		rc = st_write(out, t, n, meta, 1, err);
	if (!rc && (gpt || llama)) {
		rc = dt_write_file_atomic(cfg, text, text_len, 0644);
		if (rc)
			dt_err_add(err, "%s: cannot write: %s", cfg, strerror(-rc));
	}
	free(text);
	free(t);
	free(conv);
	return rc;
}

/* --- the command --- */

static bool ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), m = strlen(tail);

	return n >= m && !strcmp(s + n - m, tail);
}

/* OUT: a file to make in a directory that exists and is not a checkpoint
 * (never written into), new unless --force */
static int out_ok(const char *out, bool force, struct dt_err *err)
{
	const char *slash = strrchr(out, '/');
	char dir[4200], manifest[4300];
	struct stat sb;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == out)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - out), out);
	snprintf(manifest, sizeof(manifest), "%s/%s", dir, CKPT_MANIFEST);
	if (stat(dir, &sb) || !S_ISDIR(sb.st_mode))
		return dt_err_add(err, "%s: the directory %s does not exist", out, dir), -ENOENT;
	if (!stat(manifest, &sb))
		return dt_err_add(err, "%s: %s is a checkpoint, which is never written into (hint: export elsewhere)",
				  out, dir), -EINVAL;
	if (!stat(out, &sb) && S_ISDIR(sb.st_mode))
		return dt_err_add(err, "%s: is a directory; give the name of the file to write", out), -EISDIR;
	if (!force && !lstat(out, &sb))
		return dt_err_add(err, "%s: exists (hint: --force overwrites it)", out), -EEXIST;
	return 0;
}

static int export_st(const char *ckpt, const char *out, bool force)
{
	struct rt_ckpt_model m = { 0 };
	struct dt_err err = { 0 };
	int rc;

	rc = out_ok(out, force, &err);
	if (!rc)
		rc = rt_ckpt_model_load(&m, ckpt, rt_dev_cpu(), &err);
	if (!rc)
		rc = write_st(&m, out, force, &err);
	if (!rc)
		printf("dtrain-ckpt: exported %s (step %lld, %zu parameters) to %s\n", m.path,
		       (long long)m.step, m.st.n_params, out);
	rt_ckpt_model_free(&m);
	dt_err_print("dtrain-ckpt", "", &err);
	return rc ? 1 : 0;
}

int rt_cmd_export(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "format", required_argument, NULL, 'F' }, { "force", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	const char *format = NULL;
	char *h5_argv[5];
	bool force = false;
	int c, h5_argc = 0;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":hf", opts, NULL)) != -1) {
		if (c == 'h')
			return fputs(usage_export, stdout), 0;
		if (c == 'F')
			format = optarg;
		else if (c == 'f')
			force = true;
		else if (c == ':')
			return dt_usage_error("dtrain-ckpt", usage_export, "%s: needs a value", argv[optind - 1]);
		else
			return dt_unknown_option("dtrain-ckpt", usage_export, argv[optind - 1], opts);
	}
	if (argc - optind != 2)
		return dt_usage_error("dtrain-ckpt", usage_export, "expected CKPT and OUT (got %d arguments)",
				      argc - optind);
	if (format && strcmp(format, "h5") && strcmp(format, "safetensors"))
		return dt_usage_error("dtrain-ckpt", usage_export, "--format: expected h5 or safetensors (got \"%s\")",
				      format);
	if (format ? !strcmp(format, "safetensors") : ends_with(argv[optind + 1], ".safetensors"))
		return export_st(argv[optind], argv[optind + 1], force);
	h5_argv[h5_argc++] = argv[0];
	h5_argv[h5_argc++] = argv[optind];
	h5_argv[h5_argc++] = argv[optind + 1];
	if (force)
		h5_argv[h5_argc++] = (char *)"--force";
	h5_argv[h5_argc] = NULL;
	optind = 0; /* glibc: the next getopt starts afresh on another argv */
	for (size_t i = 0; i < rt_ckpt_n_cmds; i++)
		if (!strcmp(rt_ckpt_cmds[i].name, "export"))
			return rt_ckpt_cmds[i].run(h5_argc, h5_argv);
	return 1;
}
