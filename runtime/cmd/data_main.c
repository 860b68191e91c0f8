/*
 * data_main.c - dtrain-data: makes and checks the HDF5 data sets that
 * dtrain-run trains on (format in runtime/data/data.h, guide in runtime/data/DATA.md).
 *
 * Commands: fashion-mnist, synthetic, text, tokens, info, count, decode, bench. Each parses its command
 * line, calls runtime/data/data.h and maps errors to exit codes (base/err.h):
 * 0 success, 1 failure (input missing, unreadable or invalid; I/O error),
 * 2 usage error.
 *
 * Sections: messages, option parsing, commands, main.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/data/data.h"
#include "base/rng.h"
#include "runtime/data/tokens.h"
#include "runtime/data/bpe.h"
#include "base/cli.h"
#include "base/err.h"
#include "base/clock.h"

#ifndef DTRAIN_VERSION
#define DTRAIN_VERSION "unknown"
#endif

#define FM_SRC "/usr/share/datasets/fashion-mnist"

static const char usage_main[] =
	"usage: dtrain-data [--help] [--version] COMMAND [ARGS]\n"
	"\n"
	"Makes and checks dtrain data sets: HDF5 files with /features (float32\n"
	"[n][features], already normalised) and /labels (int32 [n]), and token\n"
	"streams for language models (/tokens); see runtime/data/DATA.md for the formats.\n"
	"\n"
	"Commands:\n"
	"  fashion-mnist [--src DIR] OUT_DIR   Fashion-MNIST to OUT_DIR/train.h5, test.h5\n"
	"  synthetic OUT.h5 [OPTIONS]          a learnable synthetic classification set\n"
	"  text FILE... OUT_DIR [--bpe E V | --tokenizer J]\n"
	"                                      text as byte-level (or BPE) tokens: OUT_DIR/train.h5, val.h5\n"
	"  tokens FILE... OUT_DIR              pre-tokenized shards (llm.c, nanoGPT .bin)\n"
	"  info FILE.h5                        check a data set or token stream and describe it\n"
	"  count FILE.h5 [--context T]         the samples a job draws from it (quick)\n"
	"  decode FILE.h5 [--first N] [--count N] [--ids]  a token stream back to its text\n"
	"  bench FILE.h5 [--batch B]           time reading random batches and loading all\n"
	"\n"
	"\"dtrain-data COMMAND --help\" shows the options of a command.\n"
	"\n"
	"Exit codes:\n"
	"  0   success\n"
	"  1   failure: input missing, unreadable or not valid, I/O error\n"
	"  2   usage error\n";

static const char usage_fm[] =
	"usage: dtrain-data fashion-mnist [--src DIR] OUT_DIR\n"
	"\n"
	"Converts Fashion-MNIST (Xiao, Rasul & Vollgraf 2017) to OUT_DIR/train.h5\n"
	"(60000 samples) and OUT_DIR/test.h5 (10000), 784 features, 10 classes.\n"
	"Pixels become p / 255, then are standardised with one scalar mean and std\n"
	"over all pixels of the training set; the test set uses the same two\n"
	"numbers, stored as attributes of /features. Every input is checked (IDX\n"
	"magic numbers, 28 x 28 images, counts, sizes, labels 0..9) before\n"
	"anything is written; each output appears complete or not at all.\n"
	"\n"
	"Options:\n"
	"  --src DIR   the IDX files {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]\n"
	"              (default " FM_SRC ",\n"
	"              Debian package dataset-fashion-mnist)\n"
	"  -h, --help  this text\n";

static const char usage_syn[] =
	"usage: dtrain-data synthetic OUT.h5 [--samples N] [--features F] [--classes C]\n"
	"                             [--seed S] [--stream K]\n"
	"\n"
	"Writes a learnable classification set: C centroids with coordinates drawn\n"
	"from N(0, 8/F) (about 4 noise standard deviations apart), and N samples,\n"
	"each a uniformly drawn class's centroid plus N(0, 1) noise in every\n"
	"coordinate. Deterministic in (S, K): the centroids depend on S only, so\n"
	"another K gives a held-out set of the same problem (e.g. --stream 1 for a\n"
	"test set). The file records the accuracy of the nearest-centroid rule,\n"
	"about the best any model can reach.\n"
	"\n"
	"Options:\n"
	"  --samples N   rows (default 10000)\n"
	"  --features F  values per row (default 100)\n"
	"  --classes C   classes, 2.. (default 10; C x F <= 1e8)\n"
	"  --seed S      the problem (default 1)\n"
	"  --stream K    which draw of samples from it (default 0)\n"
	"  -h, --help    this text\n";

static const char usage_info[] =
	"usage: dtrain-data info FILE.h5\n"
	"\n"
	"Checks FILE.h5 completely (format, shapes, every label in [0, classes),\n"
	"every feature finite) and prints its size, source, normalisation, samples\n"
	"per class and attributes. Exits 1 naming the first problem when the file\n"
	"is not a valid dtrain data set.\n"
	"\n"
	"Options:\n"
	"  -h, --help  this text\n";

static const char usage_count[] =
	"usage: dtrain-data count FILE.h5 [--context T]\n"
	"\n"
	"Prints the number of samples a training job draws from FILE.h5: its rows,\n"
	"or for a token stream its windows of T + 1 tokens (--context T, the\n"
	"model's model.context). Reads the file's header only; dtrain-submit asks\n"
	"it to check train.global_batch before a job is submitted.\n"
	"\n"
	"Options:\n"
	"  --context T  the context of a language model (token streams only)\n"
	"  -h, --help   this text\n";

static const char usage_text[] =
	"usage: dtrain-data text FILE... OUT_DIR [--bpe ENCODER_JSON VOCAB_BPE |\n"
	"                        --tokenizer TOKENIZER_JSON] [--val-fraction F | --val FILE]...\n"
	"\n"
	"Tokenizes text byte-level (vocabulary 256: each byte is a token) into two\n"
	"token streams, OUT_DIR/train.h5 and OUT_DIR/val.h5. The files are read\n"
	"in order and concatenated as they are; the last F of the stream is held\n"
	"out for validation, or the --val files are. Each output appears complete\n"
	"or not at all.\n"
	"\n"
	"With --bpe, tokenizes with GPT-2's byte-level BPE instead: its encoder.json\n"
	"(token -> id) and vocab.bpe (merges in rank order), both checked first;\n"
	"Hugging Face names the same two files vocab.json and merges.txt (as in\n"
	"--bpe gpt2/vocab.json gpt2/merges.txt). The\n"
	"vocabulary is the encoder's (50257 for GPT-2's files); each file is\n"
	"encoded on its own, and the two files are recorded in the outputs so\n"
	"that \"dtrain-data decode\" and other tools decode with them.\n"
	"\n"
	"With --tokenizer, tokenizes with a Hugging Face tokenizer.json of a\n"
	"byte-level BPE (Llama 3, Qwen2: its text must be in NFC, SmolLM, GPT-2):\n"
	"each file as the tokenizer encodes one text (its added tokens matched in\n"
	"it, its template's ids around it: Llama 3's begin-of-text first), ids up\n"
	"to its vocabulary (128256 for Llama 3), the file recorded in the outputs.\n"
	"\n"
	"Options:\n"
	"  --bpe E V         GPT-2 BPE with encoder.json E and vocab.bpe V (Hugging\n"
	"                    Face's vocab.json and merges.txt)\n"
	"  --tokenizer J     Hugging Face's tokenizer.json J\n"
	"  --val-fraction F  the share held out (default 0.1), 0 < F < 1\n"
	"  --val FILE        a validation file instead (repeat for several)\n"
	"  -h, --help        this text\n";

static const char usage_decode[] =
	"usage: dtrain-data decode FILE.h5 [--first N] [--count N] [--ids]\n"
	"\n"
	"Writes tokens [N, N + count) of a token stream (default: all of them) to\n"
	"standard output as the bytes they stand for: a byte-level stream's ids\n"
	"are its bytes, a stream made with \"dtrain-data text --bpe\" or\n"
	"\"--tokenizer\" is decoded\n"
	"with the tokenizer it records. A stream of imported shards records\n"
	"none: --ids prints its ids.\n"
	"\n"
	"Options:\n"
	"  --first N   the first token (default 0)\n"
	"  --count N   how many (default: to the end)\n"
	"  --ids       the ids instead, one a line in decimal\n"
	"  -h, --help  this text\n";

static const char usage_tokens[] =
	"usage: dtrain-data tokens FILE... OUT_DIR [--vocab V] [--val-fraction F | --val FILE]...\n"
	"\n"
	"Imports pre-tokenized shards into two token streams, OUT_DIR/train.h5 and\n"
	"OUT_DIR/val.h5: llm.c's shards (a header of 256 int32, magic 20240520,\n"
	"version 1, the token count; then uint16 tokens) and nanoGPT's raw uint16\n"
	"train.bin / val.bin, told apart by the magic. Every shard is checked\n"
	"whole before anything is written: the header, the size, and every token\n"
	"below the vocabulary (an error names the file and the byte offset).\n"
	"\n"
	"Options:\n"
	"  --vocab V         the vocabulary size (default 50257, GPT-2's BPE)\n"
	"  --val-fraction F  the share held out (default 0.1), 0 < F < 1\n"
	"  --val FILE        a validation shard instead (repeat for several)\n"
	"  -h, --help        this text\n";

static const char usage_bench[] =
	"usage: dtrain-data bench FILE.h5 [--batch B] [--steps K]\n"
	"\n"
	"Times what training does with FILE.h5 on this file system: reading K\n"
	"random batches of B rows (features and labels) from the file, reading\n"
	"B consecutive rows, loading the whole set into memory, and gathering\n"
	"random batches from memory.\n"
	"\n"
	"Options:\n"
	"  --batch B   rows per batch (default 64)\n"
	"  --steps K   batches to time (default 200)\n"
	"  -h, --help  this text\n";

/* --- messages --- */

static void print_err(const struct dt_err *err)
{
	dt_err_print("dtrain-data", "", err);
}

static int usage_error(const char *usage, const char *fmt, const char *arg)
{
	return dt_usage_error("dtrain-data", usage, fmt, arg);
}

/* A percentage on a terminal; one line per finished file everywhere. */
static void progress(void *arg, const char *path, int64_t done, int64_t total)
{
	int *tty = arg;

	if (*tty && done < total)
		fprintf(stderr, "\rdtrain-data: writing %s: %3d%%", path, (int)(100 * done / total));
	else if (done == total)
		fprintf(stderr, "%sdtrain-data: wrote %s: %lld samples\n", *tty ? "\r\033[K" : "",
			path, (long long)total);
}

/* --- option parsing --- */

/* A decimal integer in [lo, hi], all of s. */
static int parse_int(const char *s, long long lo, long long hi, long long *out)
{
	char *end;

	errno = 0;
	*out = strtoll(s, &end, 10);
	return (errno || end == s || *end || *out < lo || *out > hi) ? -EINVAL : 0;
}

/* getopt_long over one command's arguments; 1 when --help was asked,
 * 0 on success, else the usage exit code (message printed). */
struct opt_int {
	const char *name;
	long long *v;
	long long lo, hi;
};

static int parse_opts(int argc, char **argv, const char *usage, const struct opt_int *ints,
		      int n_ints, const char **src, int want_args)
{
	struct option opts[8];
	long long v;
	int c, i, n = 0;

	for (i = 0; i < n_ints; i++)
		opts[n++] = (struct option){ ints[i].name, required_argument, NULL, 1000 + i };
	if (src)
		opts[n++] = (struct option){ "src", required_argument, NULL, 's' };
	opts[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	opts[n] = (struct option){ NULL, 0, NULL, 0 };
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (c == 'h') {
			fputs(usage, stdout);
			return 1;
		}
		if (c == 's') {
			*src = optarg;
		} else if (c >= 1000 && c < 1000 + n_ints) {
			const struct opt_int *o = &ints[c - 1000];

			if (parse_int(optarg, o->lo, o->hi, &v)) {
				fprintf(stderr, "dtrain-data: --%s: expected an integer in [%lld, %lld] "
					"(got \"%s\")\n", o->name, o->lo, o->hi, optarg);
				return DT_EXIT_USAGE;
			}
			*o->v = v;
		} else if (c == ':') {
			return usage_error(usage, "%s: missing its value", argv[optind - 1]);
		} else {
			return dt_unknown_option("dtrain-data", usage, argv[optind - 1], opts);
		}
	}
	if (argc - optind != want_args)
		return usage_error(usage, "%s", argc - optind < want_args ? "missing argument" :
			      "too many arguments");
	return 0;
}

/* --- commands --- */

static int cmd_fashion(int argc, char **argv)
{
	const char *src = FM_SRC;
	struct dt_err err = { 0 };
	double t0;
	int rc, tty = isatty(2);

	rc = parse_opts(argc, argv, usage_fm, NULL, 0, &src, 1);
	if (rc)
		return rc == 1 ? DT_EXIT_OK : rc;
	t0 = dt_mono_s();
	fprintf(stderr, "dtrain-data: reading Fashion-MNIST from %s\n", src);
	if (rt_data_make_fashion_mnist(src, argv[optind], progress, &tty, &err)) {
		print_err(&err);
		return DT_EXIT_FAIL;
	}
	fprintf(stderr, "dtrain-data: done in %.1f s\n", dt_mono_s() - t0);
	return DT_EXIT_OK;
}

static int cmd_synthetic(int argc, char **argv)
{
	long long n = 10000, f = 100, c = 10, seed = 1, stream = 0;
	const struct opt_int ints[] = {
		{ "samples", &n, 1, RT_DATA_MAX_ELEMS },
		{ "features", &f, 1, RT_DATA_MAX_FEATURES },
		{ "classes", &c, 2, RT_DATA_MAX_CLASSES },
		{ "seed", &seed, 0, INT64_MAX },
		{ "stream", &stream, 0, INT64_MAX },
	};
	struct rt_data_synthetic p;
	struct dt_err err = { 0 };
	double t0;
	int rc, tty = isatty(2);

	rc = parse_opts(argc, argv, usage_syn, ints, 5, NULL, 1);
	if (rc)
		return rc == 1 ? DT_EXIT_OK : rc;
	if (n > RT_DATA_MAX_ELEMS / f || c * f > 100000000LL) {
		fprintf(stderr, "dtrain-data: --samples x --features must be at most 2^46 and "
			"--classes x --features at most 1e8\n");
		return DT_EXIT_USAGE;
	}
	p = (struct rt_data_synthetic){ n, f, (int)c, (uint64_t)seed, (uint64_t)stream };
	t0 = dt_mono_s();
	if (rt_data_make_synthetic(argv[optind], &p, progress, &tty, &err)) {
		print_err(&err);
		return DT_EXIT_FAIL;
	}
	fprintf(stderr, "dtrain-data: done in %.1f s\n", dt_mono_s() - t0);
	return DT_EXIT_OK;
}

/* text and tokens: FILE... OUT_DIR and their options; 1 for --help, 0, or
 * the usage exit code. */
static int parse_import(int argc, char **argv, const char *usage, bool want_vocab,
			struct rt_tokens_split *split, const char ***val, long long *vocab,
			const char **tokenizer)
{
	static const struct option opts[] = {
		{ "val-fraction", required_argument, NULL, 'f' },
		{ "val", required_argument, NULL, 'v' },
		{ "vocab", required_argument, NULL, 'V' },
		{ "tokenizer", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	int c;

	*val = calloc((size_t)argc, sizeof(**val));
	if (!*val)
		return fprintf(stderr, "dtrain-data: out of memory\n"), DT_EXIT_FAIL;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (c == 'h') {
			fputs(usage, stdout);
			return 1;
		} else if (c == 'f') {
			errno = 0;
			split->val_fraction = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(split->val_fraction > 0) ||
			    !(split->val_fraction < 1))
				return usage_error(usage, "--val-fraction: expected a number in (0, 1) (got \"%s\")",
						   optarg);
		} else if (c == 'v') {
			(*val)[split->n_val_files++] = optarg;
		} else if (c == 'V' && want_vocab) {
			if (parse_int(optarg, 2, 65536, vocab))
				return usage_error(usage, "--vocab: expected an integer in [2, 65536] (got \"%s\")",
						   optarg);
		} else if (c == 't' && !want_vocab) {
			*tokenizer = optarg;
		} else if (c == ':') {
			return usage_error(usage, "%s: missing its value", argv[optind - 1]);
		} else {
			return dt_unknown_option("dtrain-data", usage, argv[optind - 1], opts);
		}
	}
	split->val_files = *val;
	if (argc - optind < 2)
		return usage_error(usage, "%s", "expected one input file or more, then OUT_DIR");
	return 0;
}

/* --bpe E V taken out of argv [*argc] (getopt gives an option one value):
 * the two files into *enc and *merges, left NULL without --bpe. 0, or the
 * usage exit code. */
static int take_bpe(int *argc, char **argv, const char **enc, const char **merges)
{
	int i, k = 1;

	*enc = *merges = NULL;
	for (i = 1; i < *argc; i++) {
		if (!strcmp(argv[i], "--")) {
			while (i < *argc)
				argv[k++] = argv[i++];
			break;
		}
		if (strcmp(argv[i], "--bpe")) {
			argv[k++] = argv[i];
			continue;
		}
		if (i + 2 >= *argc)
			return usage_error(usage_text, "%s", "--bpe: expected two files, ENCODER_JSON VOCAB_BPE");
		*enc = argv[i + 1];
		*merges = argv[i + 2];
		i += 2;
	}
	*argc = k;
	return 0;
}

/* What an import reads: the tokenizer's files, if any. */
struct import_tok {
	const char *enc, *merges; /* --bpe */
	const char *json;         /* --tokenizer */
};

/* text (with or without a tokenizer) or tokens: the import into OUT_DIR. */
static int run_import(int argc, char **argv, bool text, const struct import_tok *tk,
		      const struct rt_tokens_split *split, long long vocab, struct dt_err *err)
{
	const char *const *files = (const char *const *)argv + optind;
	struct rt_bpe *bpe = NULL;
	int n = argc - optind - 1, rc;

	if (!text)
		return rt_tokens_from_shards(files, n, (int32_t)vocab, split, argv[argc - 1], err);
	if (!tk->enc && !tk->json)
		return rt_tokens_from_text(files, n, split, argv[argc - 1], err);
	rc = tk->json ? rt_bpe_load_hf(&bpe, tk->json, err) : rt_bpe_load(&bpe, tk->enc, tk->merges, err);
	if (!rc)
		rc = rt_tokens_from_text_bpe(files, n, bpe, split, argv[argc - 1], err);
	rt_bpe_free(bpe);
	return rc;
}

static int cmd_import(int argc, char **argv, bool text)
{
	struct rt_tokens_split split = { 0.1, NULL, 0 };
	struct import_tok tk = { 0 };
	const char **val = NULL;
	long long vocab = RT_GPT2_VOCAB;
	struct dt_err err = { 0 };
	int rc;
	double t0 = dt_mono_s();

	if (text && (rc = take_bpe(&argc, argv, &tk.enc, &tk.merges)))
		return rc;
	rc = parse_import(argc, argv, text ? usage_text : usage_tokens, !text, &split, &val, &vocab,
			  &tk.json);
	if (!rc && tk.enc && tk.json)
		rc = usage_error(usage_text, "%s", "--bpe and --tokenizer: one tokenizer, not both");
	if (rc) {
		free(val);
		return rc == 1 ? DT_EXIT_OK : rc;
	}
	rc = run_import(argc, argv, text, &tk, &split, vocab, &err);
	free(val);
	if (rc) {
		print_err(&err);
		return DT_EXIT_FAIL;
	}
	fprintf(stderr, "dtrain-data: wrote %s/train.h5 and %s/val.h5 in %.1f s\n", argv[argc - 1],
		argv[argc - 1], dt_mono_s() - t0);
	return DT_EXIT_OK;
}

static int cmd_text(int argc, char **argv)
{
	return cmd_import(argc, argv, true);
}

static int cmd_tokens(int argc, char **argv)
{
	return cmd_import(argc, argv, false);
}

/* info of a token stream: every token checked, its count and the most
 * frequent ids. */
static int info_tokens(const char *path)
{
	struct rt_tokens t = { 0 };
	struct dt_err err = { 0 };
	int64_t *count = NULL, at, chunk = 1 << 20, distinct = 0, i;
	int32_t *buf = NULL;
	int status = DT_EXIT_FAIL;

	if (rt_tokens_open(&t, path, &err))
		goto out;
	count = calloc((size_t)t.vocab, sizeof(*count));
	buf = malloc((size_t)chunk * sizeof(*buf));
	if (!count || !buf) {
		dt_err_add(&err, "%s: out of memory", path);
		goto out;
	}
	for (at = 0; at < t.n; at += chunk) {
		int64_t m = t.n - at < chunk ? t.n - at : chunk;

		if (rt_tokens_read(&t, at, m, buf, &err))
			goto out;
		for (i = 0; i < m; i++)
			count[buf[i]]++;
	}
	for (i = 0; i < t.vocab; i++)
		distinct += count[i] > 0;
	printf("file: %s\n", path);
	printf("format: %s version %d\n", RT_TOKENS_FORMAT, RT_TOKENS_VERSION);
	printf("tokens: %lld\n", (long long)t.n);
	printf("vocabulary: %d%s\n", (int)t.vocab, t.byte_level ? " (byte-level)" : "");
	printf("distinct ids: %lld\n", (long long)distinct);
	printf("source: %s\n", t.source);
	if (t.tokenizer[0])
		printf("tokenizer: %s (recorded: dtrain-data decode reads it)\n", t.tokenizer);
	status = DT_EXIT_OK;
out:
	if (status)
		print_err(&err);
	free(buf);
	free(count);
	rt_tokens_close(&t);
	return status;
}

static void print_attr(void *arg, const char *obj, const char *name, const char *value)
{
	(void)arg;
	printf("  %s%s%s = %s\n", obj, strcmp(obj, "/") ? "/" : "", name, value);
}

static int cmd_count(int argc, char **argv)
{
	struct rt_data d = { 0 };
	struct dt_err err = { 0 };
	long long context = 0;
	const struct opt_int ints[] = { { "context", &context, 1, 1 << 24 } };
	int rc;

	rc = parse_opts(argc, argv, usage_count, ints, 1, NULL, 1);
	if (rc)
		return rc == 1 ? DT_EXIT_OK : rc;
	if (rt_tokens_is_stream(argv[optind])) {
		if (!context)
			return usage_error(usage_count, "%s is a token stream: --context T says how long its windows are",
					   argv[optind]);
		rc = rt_data_open_windows(&d, argv[optind], (int)context, &err);
	} else {
		rc = rt_data_open(&d, argv[optind], &err);
	}
	if (!rc)
		printf("%lld\n", (long long)d.n);
	else
		print_err(&err);
	rt_data_close(&d);
	return rc ? DT_EXIT_FAIL : DT_EXIT_OK;
}

static int cmd_info(int argc, char **argv)
{
	struct rt_data d = { 0 };
	struct dt_err err = { 0 };
	int64_t *counts = NULL;
	int rc, k, status = DT_EXIT_FAIL;

	rc = parse_opts(argc, argv, usage_info, NULL, 0, NULL, 1);
	if (rc)
		return rc == 1 ? DT_EXIT_OK : rc;
	if (rt_tokens_is_stream(argv[optind]))
		return info_tokens(argv[optind]);
	if (rt_data_open(&d, argv[optind], &err))
		goto out;
	counts = calloc((size_t)d.classes, sizeof(*counts));
	if (!counts) {
		dt_err_add(&err, "%s: out of memory", d.path);
		goto out;
	}
	if (rt_data_verify(&d, counts, &err))
		goto out;
	printf("file: %s\n", d.path);
	printf("format: %s version %d\n", RT_DATA_FORMAT, RT_DATA_VERSION);
	printf("samples: %lld\n", (long long)d.n);
	printf("features: %lld\n", (long long)d.features);
	printf("classes: %d\n", d.classes);
	printf("source: %s\n", d.source);
	printf("normalisation: stored = (raw - %.9g) / %.9g\n", d.mean, d.std);
	printf("size: %.1f MB of features as float32\n", (double)rt_data_bytes(&d) / 1e6);
	printf("samples per class:");
	for (k = 0; k < d.classes && k < 32; k++)
		printf(" %lld", (long long)counts[k]);
	printf("%s\n", d.classes > 32 ? " ..." : "");
	printf("attributes:\n");
	if (rt_data_attrs(&d, print_attr, NULL, &err))
		goto out;
	status = DT_EXIT_OK;
out:
	if (status)
		print_err(&err);
	free(counts);
	rt_data_close(&d);
	return status;
}

/* Tokens [first, first + count) of path to stdout: their bytes (the
 * stream's own ids, or its BPE's tokens), or with ids their ids. */
static int decode_tokens(const char *path, long long first, long long count, bool ids,
			 struct dt_err *err)
{
	struct rt_tokens t = { 0 };
	struct rt_bpe *bpe = NULL;
	int32_t *buf = NULL;
	int64_t at, m, i, chunk = 1 << 16;
	const uint8_t *tok;
	size_t len;
	int rc;

	if ((rc = rt_tokens_open(&t, path, err)))
		goto out;
	if (first > t.n || count > t.n - first) {
		rc = dt_err_add(err, "%s: tokens [%lld, %lld) are outside the stream's %lld", path,
				first, first + count, (long long)t.n);
		goto out;
	}
	count = count < 0 ? t.n - first : count;
	if (!ids && !t.byte_level && (rc = rt_bpe_load_tokens(&bpe, path, err))) {
		if (rc == -ENOENT)
			dt_err_add(err, "hint: --ids prints the ids");
		goto out;
	}
	buf = malloc((size_t)chunk * sizeof(*buf));
	if (!buf) {
		dt_err_add(err, "%s: out of memory", path);
		rc = -ENOMEM;
		goto out;
	}
	for (at = first; !rc && at < first + count; at += m) {
		m = first + count - at < chunk ? first + count - at : chunk;
		if ((rc = rt_tokens_read(&t, at, m, buf, err)))
			break;
		for (i = 0; i < m; i++) {
			unsigned char byte = (unsigned char)buf[i];

			if (ids)
				printf("%d\n", (int)buf[i]);
			else if (!bpe)
				fwrite(&byte, 1, 1, stdout);
			else if ((tok = rt_bpe_token(bpe, buf[i], &len)) && len)
				fwrite(tok, 1, len, stdout);
		}
	}
	if (!rc && fflush(stdout)) {
		dt_err_add(err, "standard output: %s", strerror(errno));
		rc = -EIO;
	}
out:
	free(buf);
	rt_bpe_free(bpe);
	rt_tokens_close(&t);
	return rc;
}

static int cmd_decode(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "first", required_argument, NULL, 'f' },
		{ "count", required_argument, NULL, 'c' },
		{ "ids", no_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	long long first = 0, count = -1;
	struct dt_err err = { 0 };
	bool ids = false;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (c == 'h')
			return fputs(usage_decode, stdout), DT_EXIT_OK;
		if (c == 'i')
			ids = true;
		else if ((c == 'f' || c == 'c') && parse_int(optarg, 0, INT64_MAX, c == 'f' ? &first : &count))
			return usage_error(usage_decode, "%s: expected an integer of 0 or more", argv[optind - 1]);
		else if (c == ':')
			return usage_error(usage_decode, "%s: missing its value", argv[optind - 1]);
		else if (c == '?')
			return dt_unknown_option("dtrain-data", usage_decode, argv[optind - 1], opts);
	}
	if (argc - optind != 1)
		return usage_error(usage_decode, "%s", argc - optind < 1 ? "missing argument" :
				   "too many arguments");
	if (decode_tokens(argv[optind], first, count, ids, &err)) {
		print_err(&err);
		return DT_EXIT_FAIL;
	}
	return DT_EXIT_OK;
}

/* Mean seconds per batch of rt_data_read() over steps random batches. */
static int time_batches(struct rt_data *d, int64_t batch, long long steps, bool random,
			float *x, int32_t *y, int64_t *idx, double *per, struct dt_err *err)
{
	struct dt_rng r;
	double t0;
	long long s;
	int64_t i;

	dt_rng_seed(&r, 12345, 0);
	t0 = dt_mono_s();
	for (s = 0; s < steps; s++) {
		int64_t first = (int64_t)dt_rng_below(&r, (uint64_t)(d->n - batch + 1));

		for (i = 0; i < batch; i++)
			idx[i] = random ? (int64_t)dt_rng_below(&r, (uint64_t)d->n) : first + i;
		if (rt_data_read(d, idx, (int)batch, x, y, err))
			return -EIO;
	}
	*per = (dt_mono_s() - t0) / (double)steps;
	return 0;
}

static int cmd_bench(int argc, char **argv)
{
	long long batch = 64, steps = 200;
	const struct opt_int ints[] = {
		{ "batch", &batch, 1, 1 << 20 },
		{ "steps", &steps, 1, 1000000 },
	};
	struct rt_data d = { 0 };
	struct dt_err err = { 0 };
	float *x = NULL;
	int32_t *y = NULL;
	int64_t *idx = NULL;
	double t_rand, t_seq, t_load, t_mem, t_fin, t0, mb;
	long long i;
	int rc, status = DT_EXIT_FAIL;

	rc = parse_opts(argc, argv, usage_bench, ints, 2, NULL, 1);
	if (rc)
		return rc == 1 ? DT_EXIT_OK : rc;
	if (rt_data_open(&d, argv[optind], &err))
		goto out;
	if (batch > d.n)
		batch = d.n;
	x = malloc((size_t)batch * (size_t)d.features * sizeof(float));
	y = malloc((size_t)batch * sizeof(int32_t));
	idx = malloc((size_t)batch * sizeof(int64_t));
	if (!x || !y || !idx) {
		dt_err_add(&err, "%s: out of memory for a batch of %lld", d.path, batch);
		goto out;
	}
	mb = (double)batch * (double)d.features * 4 / 1e6;
	printf("%s: %lld samples x %lld features, batch %lld (%.2f MB), %lld batches\n", d.path,
	       (long long)d.n, (long long)d.features, batch, mb, steps);
	if (time_batches(&d, batch, steps, true, x, y, idx, &t_rand, &err) ||
	    time_batches(&d, batch, steps, false, x, y, idx, &t_seq, &err))
		goto out;
	printf("file, random rows:      %8.3f ms per batch (%.0f MB/s)\n", 1e3 * t_rand,
	       mb / t_rand);
	printf("file, consecutive rows: %8.3f ms per batch (%.0f MB/s)\n", 1e3 * t_seq,
	       mb / t_seq);
	t0 = dt_mono_s();
	for (i = 0; i < steps; i++)
		if (rt_data_check_finite(&d, idx, 0, batch, x, false, &err))
			goto out;
	t_fin = (dt_mono_s() - t0) / (double)steps;
	printf("finite check:           %8.4f ms per batch (%.1f%% of a random-row read)\n",
	       1e3 * t_fin, 100 * t_fin / t_rand);
	t0 = dt_mono_s();
	if (rt_data_load_all(&d, true, true, &err))
		goto out;
	t_load = dt_mono_s() - t0;
	printf("load all:               %8.3f s (%.0f MB/s)\n", t_load,
	       (double)rt_data_bytes(&d) / 1e6 / t_load);
	if (time_batches(&d, batch, steps, true, x, y, idx, &t_mem, &err))
		goto out;
	printf("memory, random rows:    %8.3f ms per batch\n", 1e3 * t_mem);
	status = DT_EXIT_OK;
out:
	if (status)
		print_err(&err);
	free(idx);
	free(y);
	free(x);
	rt_data_close(&d);
	return status;
}

/* --- main --- */

int main(int argc, char **argv)
{
	static const struct dt_cmd cmds[] = {
		{ "fashion-mnist", cmd_fashion },
		{ "synthetic", cmd_synthetic },
		{ "text", cmd_text },
		{ "tokens", cmd_tokens },
		{ "info", cmd_info },
		{ "count", cmd_count },
		{ "decode", cmd_decode },
		{ "bench", cmd_bench },
	};

	return dt_cli_run("dtrain-data", DTRAIN_VERSION, usage_main, cmds,
			  sizeof(cmds) / sizeof(cmds[0]), argc, argv);
}
