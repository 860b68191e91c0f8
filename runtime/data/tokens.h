/*
 * tokens.h - token streams for language models: the HDF5 "dtrain-tokens"
 * format, its checked reader, its atomic writer, and the importers of
 * `dtrain-data text` (byte-level text, vocabulary 256; or GPT-2's BPE,
 * bpe.h, with --bpe) and `dtrain-data
 * tokens` (pre-tokenized shards: llm.c's and nanoGPT's). runtime/data/DATA.md
 * has the format for people.
 *
 * A stream is one sequence of token ids, documents concatenated as they
 * came; a model trains on windows of it. An importer writes two streams,
 * OUT/train.h5 and OUT/val.h5 (held out for validation loss).
 *
 * Trust: nothing read is used before it is checked (format, version,
 * vocabulary, the dataset's type and rank); a token is checked against the
 * vocabulary when it is read; an input shard is checked whole before
 * anything is written (magic, version, sizes, every token), and each error
 * names the file and the byte offset.
 *
 * Errors: 0 or a negative errno-style code, with a message in err.
 * Sections: the format, reading, writing, importing.
 */
#ifndef DTRAIN_RUNTIME_TOKENS_H
#define DTRAIN_RUNTIME_TOKENS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"

struct rt_bpe; /* bpe.h */

/* --- the format --- */

#define RT_TOKENS_FORMAT "dtrain-tokens"
#define RT_TOKENS_VERSION 1
#define RT_TOKENS_MAX_VOCAB 16777216 /* 2^24: every id exact in a float32 */
#define RT_LLMC_MAGIC 20240520       /* llm.c's token shard header */
#define RT_GPT2_VOCAB 50257          /* GPT-2's BPE vocabulary */

/* --- reading --- */

/* An open stream; zero-initialise, rt_tokens_close(). */
struct rt_tokens {
	char path[4096];
	int64_t n;          /* tokens */
	int32_t vocab;      /* ids are in [0, vocab) */
	bool byte_level;    /* the ids are the bytes of text */
	char source[256];   /* where it came from (one line) */
	char tokenizer[32]; /* "gpt2-bpe" when the stream records its BPE (bpe.h), else "" */
	int64_t file, set;  /* HDF5 ids (hid_t), or -1 */
};

/* Whether path is an HDF5 file that says it is a token stream (its format
 * attribute), to tell it from a data set before opening it. */
bool rt_tokens_is_stream(const char *path);
/* Opens and checks path: a missing or mistyped attribute, a version other
 * than 1, a vocabulary outside [2, RT_TOKENS_MAX_VOCAB], /tokens not a
 * one-dimensional integer dataset of at least 2 tokens. 0, -ENOENT or
 * -EINVAL naming the file and what is wrong. */
int rt_tokens_open(struct rt_tokens *t, const char *path, struct dt_err *err);
void rt_tokens_close(struct rt_tokens *t);
/* Tokens [first, first + count) into out [count], each checked against the
 * vocabulary (-EINVAL naming the file and the token's index). */
int rt_tokens_read(struct rt_tokens *t, int64_t first, int64_t count, int32_t *out,
		   struct dt_err *err);

/* --- windows: what a language model trains on --- */

/* A model with context T reads windows of T + 1 tokens (inputs, and the
 * same shifted by one as targets). Window k starts at token k * T, so the
 * windows tile the stream with one token of overlap and every token but
 * the last is a target once: floor((n - 1) / T) windows, the tail that
 * does not fill one left out. Windows are what the sampler (sampler.h)
 * permutes and slices, as rows of a data set: every window once an epoch,
 * the same global batch on any layout, an exact position to resume at. */
int64_t rt_tokens_windows(const struct rt_tokens *t, int context);
/* Windows idx [n] (each in [0, rt_tokens_windows)) into out [n][context + 1],
 * every token checked. */
int rt_tokens_read_windows(struct rt_tokens *t, int context, const int64_t *idx, int n,
			   int32_t *out, struct dt_err *err);

/* --- writing --- */

/* Writes the stream tok [n] (n >= 2, every id in [0, vocab)) to path,
 * atomically: <path>.tmp.<pid>, fsync, rename, fsync of the directory.
 * Stored as uint16 when vocab <= 65536, else int32. */
int rt_tokens_write(const char *path, const int32_t *tok, int64_t n, int32_t vocab,
		    bool byte_level, const char *source, struct dt_err *err);
/* The same with the vocabulary of bpe, recording that tokenizer: the root attribute tokenizer = "gpt2-bpe" and its two files'
 * bytes as uint8 datasets /tokenizer/encoder.json and /tokenizer/vocab.bpe,
 * which rt_bpe_load_tokens() reads back. */
int rt_tokens_write_bpe(const char *path, const int32_t *tok, int64_t n, const struct rt_bpe *bpe,
			const char *source, struct dt_err *err);

/* --- importing --- */

/* The split of an import: the last val_fraction of the concatenated
 * stream (0 < val_fraction < 1) is held out, unless val_files names files
 * of its own (then it is what they hold, and the inputs are all train). */
struct rt_tokens_split {
	double val_fraction;
	const char *const *val_files;
	int n_val_files;
};

/* `dtrain-data text`: the bytes of files [n] as tokens (vocabulary 256,
 * byte_level), into out_dir/train.h5 and out_dir/val.h5. */
int rt_tokens_from_text(const char *const *files, int n, const struct rt_tokens_split *split,
			const char *out_dir, struct dt_err *err);

/* `dtrain-data text --bpe`: files [n] each encoded with bpe (a document
 * a file: no pre-token spans two files, nothing is put between them), the
 * vocabulary bpe's, the tokenizer recorded (rt_tokens_write_bpe). */
int rt_tokens_from_text_bpe(const char *const *files, int n, struct rt_bpe *bpe,
			    const struct rt_tokens_split *split, const char *out_dir,
			    struct dt_err *err);

/* `dtrain-data tokens`: pre-tokenized shards [n], each either llm.c's
 * (a header of 256 int32: magic 20240520, version 1, token count; then
 * uint16 tokens) or nanoGPT's raw uint16 .bin, told apart by the magic;
 * every token must be below vocab. Into out_dir/train.h5 and val.h5. */
int rt_tokens_from_shards(const char *const *files, int n, int32_t vocab,
			  const struct rt_tokens_split *split, const char *out_dir,
			  struct dt_err *err);

#endif
