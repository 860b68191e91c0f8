/*
 * bpe.h - GPT-2's byte-level BPE tokenizer (Radford et al. 2019), written
 * from its published algorithm: text (any bytes) to token ids and back.
 *
 * A tokenizer is two files. encoder.json: one JSON object, token string ->
 * id, ids exactly 0 .. n-1 (the vocabulary, 50257 for GPT-2). Token strings
 * spell bytes with GPT-2's byte-to-character map (rt_bpe_byte_char): every
 * byte is one printable character, so that each of the 256 bytes is a token
 * of its own and every text can be encoded. vocab.bpe: a first line
 * "#version: ...", then one merge "a b" a line; its rank is its order (the
 * first line after the version is rank 0), and a, b and ab must be tokens.
 *
 * Encoding: the text is cut into pre-tokens (rt_bpe_split), each pre-token's
 * bytes become single-byte tokens, and the adjacent pair of lowest rank is
 * merged, every occurrence left to right, until no adjacent pair has a
 * merge. Decoding concatenates the tokens' bytes, so decode(encode(x)) == x
 * for every x, invalid UTF-8 included.
 *
 * Errors: 0 or a negative errno-style code, with a message in err naming
 * the file and what is wrong. Sections: life cycle, operations, queries,
 * the pre-tokenizer and its character classes.
 */
#ifndef DTRAIN_RUNTIME_BPE_H
#define DTRAIN_RUNTIME_BPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define RT_BPE_NAME "gpt2-bpe"                    /* the token file's tokenizer attribute */
#define RT_BPE_H5_GROUP "tokenizer"                /* in a token file: the group ... */
#define RT_BPE_H5_ENCODER "tokenizer/encoder.json" /* ... the two files' bytes, uint8 */
#define RT_BPE_H5_MERGES "tokenizer/vocab.bpe"
#define RT_BPE_MAX_VOCAB 16777216 /* 2^24, as token streams (tokens.h) */

/* A loaded tokenizer: opaque. Encoding uses a cache and work space inside
 * it, so one tokenizer serves one thread at a time. */
struct rt_bpe;

/* --- life cycle: the caller frees *out with rt_bpe_free() --- */

/* Loads the two files (checked as the file-top comment says: a malformed
 * encoder.json, ids that are not 0 .. n-1, a token that is not spelt in the
 * byte alphabet, a byte without its token, a merge line without exactly two
 * symbols, a merge whose parts or result is not a token, a repeated merge).
 * 0, -ENOENT, -ENOMEM or -EINVAL. */
int rt_bpe_load(struct rt_bpe **out, const char *encoder_json, const char *vocab_bpe,
		struct dt_err *err);
/* The same from the files' bytes (copied: the caller keeps its buffers);
 * the names are what messages call them. */
int rt_bpe_load_mem(struct rt_bpe **out, const char *encoder, size_t encoder_len,
		    const char *encoder_name, const char *merges, size_t merges_len,
		    const char *merges_name, struct dt_err *err);
/* The tokenizer recorded in a token stream by `dtrain-data text --bpe`
 * (root attribute tokenizer = "gpt2-bpe", datasets /tokenizer/encoder.json
 * and /tokenizer/vocab.bpe), checked against its vocab_size. -ENOENT when
 * the file records none (a byte-level or imported stream). bpe_h5.c. */
int rt_bpe_load_tokens(struct rt_bpe **out, const char *tokens_h5, struct dt_err *err);
void rt_bpe_free(struct rt_bpe *b);

/* --- operations --- */

/* Encodes text [len] into ids, which has room for len ids (a token is one
 * byte or more); *n gets the count. 0, or -ENOMEM (the work space of a
 * pre-token grows with its length). */
int rt_bpe_encode(struct rt_bpe *b, const void *text, size_t len, int32_t *ids, size_t *n,
		  struct dt_err *err);
/* Decodes ids [n] into *out [*len] (malloc'd, the caller frees; not NUL
 * terminated). -EINVAL naming the index of an id outside [0, vocab). */
int rt_bpe_decode(const struct rt_bpe *b, const int32_t *ids, size_t n, char **out, size_t *len,
		  struct dt_err *err);

/* --- queries --- */

int32_t rt_bpe_vocab(const struct rt_bpe *b);
/* The bytes of token id (in [0, vocab)) into *len; valid until rt_bpe_free. */
const uint8_t *rt_bpe_token(const struct rt_bpe *b, int32_t id, size_t *len);
/* The two files' bytes as loaded, to record them (tokens.c); valid until
 * rt_bpe_free. */
void rt_bpe_files(const struct rt_bpe *b, const char **encoder, size_t *encoder_len,
		  const char **merges, size_t *merges_len);
/* GPT-2's bytes_to_unicode: bytes 33..126, 161..172 and 174..255 are
 * themselves, the 68 others 256, 257, ... in byte order. */
uint32_t rt_bpe_byte_char(uint8_t byte);

/* --- the pre-tokenizer and its character classes --- */

/* The length in bytes (>= 1) of the first pre-token of s [n], n >= 1: the
 * first match of GPT-2's pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * on the UTF-8 of s. A byte that does not start a valid UTF-8 sequence
 * (an overlong form, a surrogate, past U+10FFFF, cut short) is one
 * character of its own, neither letter, number nor space. */
size_t rt_bpe_split(const uint8_t *s, size_t n);
/* \p{L}: general category L* (Lu Ll Lt Lm Lo); \p{N}: N* (Nd Nl No); from
 * the Unicode tables of unicode_classes.c (generated, its top says which). */
bool rt_bpe_is_letter(uint32_t cp);
bool rt_bpe_is_number(uint32_t cp);
/* \s as Python's `regex` module has it, Unicode's White_Space property:
 * U+0009..000D, 0020, 0085, 00A0, 1680, 2000..200A, 2028, 2029, 202F, 205F,
 * 3000. (str.isspace() also has U+001C..001F; `regex` and we do not.) */
bool rt_bpe_is_space(uint32_t cp);

#endif
