/*
 * sample.c - `dtrain-ckpt sample`: text from a language model's checkpoint.
 * Each new token: a forward pass over the last model.context tokens (the
 * positions after them padded; causal attention keeps them from mattering),
 * the logits at the newest position, a draw from their softmax at the
 * temperature among the top k tokens and the top-p nucleus
 * (runtime/model/sampling.h) with dt_rng (seeded: the same seed gives the
 * same text). A checkpoint that carries a tokenizer (GPT-2
 * BPE, checkpoint/ckpt.h) and a byte-level model (vocab_size 256) read the
 * prompt as text and write text; any other reads and writes token ids.
 *
 * Sections: options, sampling, the command.
 */
#include "runtime/cmd/ckpt_model.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cli.h"
#include "runtime/train/device.h"
#include "runtime/kernels/kernels.h"
#include "runtime/model/device.h"
#include "runtime/model/sampling.h"
#include "base/rng.h"
#include "checkpoint/ckpt.h"
#include "runtime/data/bpe.h"

/* --- options --- */

static const char usage_sample[] =
	"usage: dtrain-ckpt sample CKPT [--prompt TEXT] [--tokens N] [--temperature T]\n"
	"                          [--top-k K] [--top-p P] [--seed S] [--num-samples M]\n"
	"                          [--device D]\n"
	"\n"
	"Generates N tokens after the prompt with the language model (model.type\n"
	"\"gpt\" or \"llama\") of checkpoint CKPT, saved on any layout (a run\n"
	"directory stands for its newest checkpoint), and writes the prompt and\n"
	"them to stdout.\n"
	"A model whose checkpoint carries GPT-2's BPE tokenizer (trained on\n"
	"dtrain-data text --bpe, or imported with one) and a byte-level model\n"
	"(vocab_size 256) take the prompt as text and write text; any other takes\n"
	"and writes token ids separated by spaces (\"464 3290 318\").\n"
	"\n"
	"Options:\n"
	"  --prompt TEXT       what to continue (default: a newline; required for\n"
	"                      models that are not byte-level)\n"
	"  --tokens N          tokens to generate (default 200)\n"
	"  --temperature T     logits divided by T before the softmax (default 1);\n"
	"                      0 takes the most likely token every time\n"
	"  --top-k K           draw among the K most likely tokens only (default: all)\n"
	"  --top-p P           then among the fewest most likely tokens whose\n"
	"                      probability adds up to P, in (0, 1] (default 1: all)\n"
	"  --seed S            the draws' seed (default 1): the same seed, the same text\n"
	"  --num-samples M     M texts (default 1), each the prompt and N tokens, the\n"
	"                      i-th (from 0) drawn with seed S + i, as --seed S + i\n"
	"                      alone would; a line \"---------------\" between two\n"
	"  --device D          cpu (default) or cuda (the first visible GPU)\n"
	"\n"
	"Exit codes: 0 generated, 1 failure (checkpoint unusable, not a language\n"
	"model, a prompt token outside the vocabulary), 2 usage error.\n";

struct sample_opts {
	const char *ckpt, *prompt, *device;
	long tokens, top_k, seed, samples;
	double temperature, top_p;
};

static int bad_number(const char *opt, const char *arg)
{
	return dt_usage_error("dtrain-ckpt", usage_sample, "--%s: expected a number >= 0 (got \"%s\")", opt,
			      arg);
}

static int parse_sample(int argc, char **argv, struct sample_opts *o)
{
	static const struct option opts[] = {
		{ "prompt", required_argument, NULL, 'p' },  { "tokens", required_argument, NULL, 'n' },
		{ "temperature", required_argument, NULL, 't' }, { "top-k", required_argument, NULL, 'k' },
		{ "seed", required_argument, NULL, 's' },    { "help", no_argument, NULL, 'h' },
		{ "device", required_argument, NULL, 'd' },  { "top-p", required_argument, NULL, 'P' },
		{ "num-samples", required_argument, NULL, 'm' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	long v;
	int c;

	*o = (struct sample_opts){ .tokens = 200, .seed = 1, .samples = 1, .temperature = 1.0, .top_p = 1.0, .device = "cpu" };
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		errno = 0;
		switch (c) {
		case 'h':
			fputs(usage_sample, stdout);
			return 1;
		case 'p':
			o->prompt = optarg;
			break;
		case 'd':
			o->device = optarg;
			if (strcmp(optarg, "cpu") && strcmp(optarg, "cuda") && strcmp(optarg, "sim"))
				return dt_usage_error("dtrain-ckpt", usage_sample, "--device: expected cpu or cuda (got \"%s\")", optarg);
			break;
		case 't':
			o->temperature = strtod(optarg, &end);
			if (errno || *end || end == optarg || !(o->temperature >= 0) || o->temperature > 1e6)
				return bad_number("temperature", optarg);
			break;
		case 'P':
			o->top_p = strtod(optarg, &end);
			if (errno || *end || end == optarg || !(o->top_p > 0 && o->top_p <= 1))
				return dt_usage_error("dtrain-ckpt", usage_sample, "--top-p: expected a number in (0, 1] (got \"%s\")", optarg);
			break;
		case 'm':
			v = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || v < 1 || v > 1000000)
				return dt_usage_error("dtrain-ckpt", usage_sample, "--num-samples: expected a number in [1, 1000000] (got \"%s\")", optarg);
			o->samples = v;
			break;
		case 'n':
		case 'k':
		case 's':
			v = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || v < 0)
				return bad_number(c == 'n' ? "tokens" : c == 'k' ? "top-k" : "seed", optarg);
			if (c == 'n' && v > 100000000)
				return dt_usage_error("dtrain-ckpt", usage_sample, "--tokens: at most 100000000 (got %ld)", v);
			*(c == 'n' ? &o->tokens : c == 'k' ? &o->top_k : &o->seed) = v;
			break;
		case ':':
			return dt_usage_error("dtrain-ckpt", usage_sample, "%s: needs a value", argv[optind - 1]);
		default:
			return dt_unknown_option("dtrain-ckpt", usage_sample, argv[optind - 1], opts);
		}
	}
	if (argc - optind != 1)
		return dt_usage_error("dtrain-ckpt", usage_sample, "expected one CKPT (got %d arguments)",
				      argc - optind);
	o->ckpt = argv[optind];
	return 0;
}

/* --- sampling --- */

/* The prompt's token ids into *ids [*n] (caller frees): its bytes, or ids
 * separated by spaces or commas, each checked against the vocabulary. */
static int prompt_ids(const char *prompt, bool bytes, long vocab, int32_t **ids, long *n,
		      struct dt_err *err)
{
	size_t len = strlen(prompt);
	const char *p = prompt;
	char *end;

	*n = 0;
	*ids = malloc((len + 1) * sizeof(**ids));
	if (!*ids)
		return dt_err_add(err, "out of memory for the prompt"), -ENOMEM;
	if (bytes) {
		for (; *p; p++)
			(*ids)[(*n)++] = (unsigned char)*p;
		return 0;
	}
	while (*p) {
		long v;

		if (*p == ' ' || *p == ',' || *p == '\n' || *p == '\t') {
			p++;
			continue;
		}
		errno = 0;
		v = strtol(p, &end, 10);
		if (errno || end == p || v < 0 || v >= vocab)
			return dt_err_add(err, "--prompt: \"%.20s\" is not a token id in [0, %ld) (a model that is not byte-level reads ids separated by spaces)",
					  p, vocab), -EINVAL;
		(*ids)[(*n)++] = (int32_t)v;
		p = end;
	}
	if (*n == 0)
		return dt_err_add(err, "--prompt: no token ids in \"%s\"", prompt), -EINVAL;
	return 0;
}

/* How text and tokens meet: bytes (a byte-level model), the checkpoint's
 * BPE tokenizer, or token ids as numbers. */
struct text {
	bool bytes;
	struct rt_bpe *bpe; /* owned, or NULL */
};

static void put_token(int32_t id, const struct text *tx, bool first)
{
	size_t len;
	const uint8_t *b;

	if (tx->bytes) {
		putchar((unsigned char)id);
	} else if (tx->bpe) {
		b = rt_bpe_token(tx->bpe, id, &len);
		fwrite(b, 1, len, stdout);
	} else {
		printf(first ? "%d" : " %d", id);
	}
	fflush(stdout);
}

/* The tokenizer the checkpoint carries (checkpoint/ckpt.h), into tx->bpe;
 * none: NULL. Its vocabulary must be the model's. */
static int load_tokenizer(const struct rt_ckpt_model *m, long V, struct text *tx,
			  struct dt_err *err)
{
	struct ckpt_manifest *man = malloc(sizeof(*man));
	char a[4200], b[4200];
	const char *names[2];
	int rc = man ? ckpt_manifest_read(m->path, man, err) : -ENOMEM, n = 0;

	if (!rc)
		n = ckpt_tokenizer_of(man, names);
	if (n) {
		snprintf(a, sizeof(a), "%s/%s", m->path, names[0]);
		snprintf(b, sizeof(b), "%s/%s", m->path, n == 2 ? names[1] : "");
		rc = n == 2 ? rt_bpe_load(&tx->bpe, a, b, err) : rt_bpe_load_hf(&tx->bpe, a, err);
		if (!rc && rt_bpe_vocab(tx->bpe) > V) /* a model's may be padded (50304) */
			rc = (dt_err_add(err, "%s: its tokenizer has %ld tokens, more than its model's %ld", m->path,
					 (long)rt_bpe_vocab(tx->bpe), V), -EINVAL);
	}
	free(man);
	return rc;
}

/* The prompt as tokens: the tokenizer's encoding, else prompt_ids */
static int prompt_tokens(const char *prompt, const struct text *tx, long V, int32_t **ids, long *n,
			 struct dt_err *err)
{
	size_t len = strlen(prompt), got = 0;
	int rc;

	if (!tx->bpe)
		return prompt_ids(prompt, tx->bytes, V, ids, n, err);
	*ids = malloc((rt_bpe_max_ids(tx->bpe, len) + 1) * sizeof(**ids));
	if (!*ids)
		return dt_err_add(err, "out of memory for the prompt"), -ENOMEM;
	rc = rt_bpe_encode(tx->bpe, prompt, len, *ids, &got, err);
	*n = (long)got;
	return rc ? rc : got ? 0 : (dt_err_add(err, "--prompt: empty"), -EINVAL);
}

/* How the model's tokens meet text (tx), and the prompt's tokens */
static int open_text(const struct rt_ckpt_model *m, const struct sample_opts *o, long V,
		     struct text *tx, int32_t **ids, long *n, struct dt_err *err)
{
	int rc = load_tokenizer(m, V, tx, err);

	if (rc)
		return rc;
	tx->bytes = V == 256 && !tx->bpe;
	if (!o->prompt && !tx->bytes && !tx->bpe)
		return dt_err_add(err, "--prompt: needed: the model's vocabulary (%ld) is not byte-level and its checkpoint carries no tokenizer, give token ids", V),
		       -EINVAL;
	/* an empty prompt: a newline, the start of a line */
	return prompt_tokens(o->prompt && *o->prompt ? o->prompt : "\n", tx, V, ids, n, err);
}

/* The logits at the newest of len positions of a forward pass: on the host
 * where they are, else copied into lg [V] */
static const float *newest_logits(struct rt_dev *dev, const float *logits, long len, long V, float *lg)
{
	const float *row = logits + (size_t)(len - 1) * (size_t)V;

	if (dev->host)
		return row;
	rt_dev_get(dev, lg, row, (size_t)V * sizeof(*lg));
	return lg;
}

/* Tokens after the prompt's n in ids [cap], drawn with seed, each written
 * as it comes */
static int generate(struct rt_ckpt_model *m, struct rt_acts *acts, const struct sample_opts *o,
		    long seed, const struct text *tx, int32_t *ids, long n, long cap, struct dt_err *err)
{
	struct rt_dev *dev = m->st.dev;
	const struct rt_sampling how = { o->temperature, o->top_k, o->top_p };
	struct rt_token_sampler sm;
	struct dt_rng r;
	long T = m->st.in, V = m->st.out / T;
	float *x = calloc((size_t)T, sizeof(*x)), *lg = malloc((size_t)V * sizeof(*lg)), *dx = NULL;
	/* with a tokenizer, among its tokens only (a padded vocabulary's last
	 * rows are no text) */
	int rc = rt_token_sampler_init(&sm, tx->bpe ? (long)rt_bpe_vocab(tx->bpe) : V);

	if (rc || !x || !lg || rt_dev_alloc(dev, (size_t)T * sizeof(*x), "a window", &dx, NULL)) {
		rc = (dt_err_add(err, "out of memory for %ld tokens", cap), -ENOMEM);
		goto out;
	}
	dt_rng_seed(&r, (uint64_t)seed, 0x5a4d);
	for (; n < cap; n++) {
		long from = n > T ? n - T : 0, len = n - from, j;
		const float *logits;

		memset(x, 0, (size_t)T * sizeof(*x));
		for (j = 0; j < len; j++)
			x[j] = (float)ids[from + j];
		rt_dev_put(dev, dx, x, (size_t)T * sizeof(*x));
		rc = rt_stage_forward(&m->st, acts, dx, 1, &logits);
		if (!rc)
			rc = rt_dev_sync(dev, err);
		if (rc)
			break;
		ids[n] = rt_sample(&sm, newest_logits(dev, logits, len, V, lg), &how, &r);
		put_token(ids[n], tx, false);
	}
out:
	rt_token_sampler_free(&sm);
	rt_dev_free(dev, dx);
	free(x);
	free(lg);
	return rc;
}

static int sample_run(const struct sample_opts *o, struct rt_dev *dev, struct dt_err *err)
{
	struct rt_ckpt_model m;
	struct rt_acts acts = { 0 };
	int32_t *ids = NULL, *grown;
	long n = 0, V, i, k, cap;
	struct text tx = { 0 };
	int rc;

	rc = rt_ckpt_model_load(&m, o->ckpt, dev, err);
	if (rc)
		goto out;
	if (!m.st.ops->reads_tokens) {
		rc = (dt_err_add(err, "%s: holds model.type \"%s\", which is not a language model; sample needs one (model.type \"gpt\" or \"llama\")",
				 m.path, m.st.ops->type), -EINVAL);
		goto out;
	}
	V = m.st.out / m.st.in;
	rc = open_text(&m, o, V, &tx, &ids, &n, err);
	if (rc)
		goto out;
	cap = n + o->tokens;
	grown = realloc(ids, (size_t)cap * sizeof(*ids)); /* cap >= n >= 1 */
	if (grown)
		ids = grown;
	if (!grown || rt_acts_init(&acts, &m.st, 1)) {
		rc = (dt_err_add(err, "out of memory for %ld tokens", cap), -ENOMEM);
		goto out;
	}
	for (k = 0; !rc && k < o->samples; k++) {
		if (k) /* ids end their line already */
			fputs(tx.bytes || tx.bpe ? "\n---------------\n" : "---------------\n", stdout);
		for (i = 0; i < n; i++)
			put_token(ids[i], &tx, i == 0);
		rc = generate(&m, &acts, o, o->seed + k, &tx, ids, n, cap, err);
		if (!tx.bytes && !tx.bpe)
			putchar('\n');
	}
out:
	rt_acts_free(&acts);
	free(ids);
	rt_bpe_free(tx.bpe);
	rt_ckpt_model_free(&m);
	return rc;
}

/* --- the command --- */

int rt_cmd_sample(int argc, char **argv)
{
	struct rt_dev *dev = NULL;
	struct sample_opts o;
	struct dt_err err = { 0 };
	int rc = parse_sample(argc, argv, &o);

	if (rc)
		return rc == 1 ? DT_EXIT_OK : rc;
	rt_blas_threads(1);
	rc = rt_device_open_named(o.device, &dev, &err);
	if (!rc)
		rc = sample_run(&o, dev, &err);
	dt_err_print("dtrain-ckpt", "", &err);
	rt_device_close(dev);
	return rc ? DT_EXIT_FAIL : DT_EXIT_OK;
}
