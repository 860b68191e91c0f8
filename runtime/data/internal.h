/*
 * internal.h - what the files of runtime/data/ share and no caller sees
 * (the public header is data.h): one error helper, the token windows'
 * side of the data set functions, and how a tokenizer's loaders build it
 * (bpe.h).
 *
 * Sections: errors, token windows, byte-level BPE.
 */
#ifndef DTRAIN_RUNTIME_DATA_INTERNAL_H
#define DTRAIN_RUNTIME_DATA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "runtime/data/bpe.h"
#include "runtime/data/data.h"

struct json_object;

/* --- errors --- */

/* "path: out of memory" in err; returns -ENOMEM (data.c). */
int rt__data_oom(struct dt_err *err, const char *path);

/* --- token windows (windows.c) --- */

/* rt_data_read, rt_data_load_all and rt_data_close of a data set opened by
 * rt_data_open_windows(). */
int rt__data_windows_read(struct rt_data *d, const int64_t *idx, int n_idx, float *x, int32_t *y,
			  struct dt_err *err);
int rt__data_windows_load(struct rt_data *d, struct dt_err *err);
void rt__data_windows_close(struct rt_data *d);

/* --- byte-level BPE: building a tokenizer (bpe.c; pretok.c, hf_tokenizer.c) --- */

/* The character at s [n >= 1]: its byte length, and its code point into
 * *cp, or UINT32_MAX for a byte that starts no valid UTF-8 sequence (RFC
 * 3629: no overlong forms, no surrogates, nothing past U+10FFFF). */
size_t rt__bpe_utf8(const uint8_t *s, size_t n, uint32_t *cp);

/* JSON text [len] (an object, nested at most depth deep) into *out (the
 * caller puts it); messages name the file name and the line and column of
 * a syntax error, or say it is not what (the object it should be). bpe.c. */
int rt__bpe_parse(const char *text, size_t len, int depth, const char *name, const char *what,
		  struct json_object **out, struct dt_err *err);

/* An empty tokenizer holding copies of the files f (rt_bpe_files gives
 * them back); the caller frees it with rt_bpe_free. */
int rt__bpe_new(struct rt_bpe **out, const struct rt_bpe_files *f, struct dt_err *err);

/* An added token (Hugging Face's "added_tokens"): its id, in the
 * vocabulary or one of the ids that follow it, and its text. */
struct rt__bpe_added {
	int32_t id;
	const char *content; /* UTF-8, NUL-terminated */
};
/* The vocabulary: vocab (token string -> id, ids exactly 0 .. n-1, each
 * string spelt in the byte alphabet), then added [n_added], whose ids
 * beyond the vocabulary must be n, n + 1, ... with no gap; every added
 * token is matched in a text before it is pre-tokenized (rt_bpe_encode).
 * Messages name the vocabulary name. */
int rt__bpe_vocab(struct rt_bpe *b, struct json_object *vocab, const struct rt__bpe_added *added,
		  int n_added, const char *name, struct dt_err *err);
/* Room for n merges; then each merge (left, right) of rank 0, 1, ...:
 * left, right and left + right must be tokens of vocab (-EINVAL, where
 * naming the merge in the message: "vocab.bpe: line 7"); a pair that
 * repeats one is -EEXIST, the rank of the first into *first, no message. */
int rt__bpe_merges(struct rt_bpe *b, size_t n, const char *name, struct dt_err *err);
int rt__bpe_merge(struct rt_bpe *b, struct json_object *vocab, const char *left, const char *right,
		  int32_t rank, int32_t *first, const char *where, struct dt_err *err);

/* How a text is encoded beyond the merges. */
struct rt__bpe_rules {
	enum rt_bpe_pretok pretok;
	bool ignore_merges; /* a pre-token that is a token is that token (Llama 3) */
	bool nfc;           /* the text must be in NFC (Qwen2's normalizer) */
	int32_t before[RT_BPE_MAX_TEMPLATE], after[RT_BPE_MAX_TEMPLATE]; /* the template's ids */
	int n_before, n_after;
};
/* Sets r (ids checked against the vocabulary). -EINVAL or -ENOMEM. */
int rt__bpe_rules(struct rt_bpe *b, const struct rt__bpe_rules *r, const char *name,
		  struct dt_err *err);

#endif
