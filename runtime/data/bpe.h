/*
 * bpe.h - byte-level BPE tokenizers (GPT-2's, Radford et al. 2019, and the
 * Llama 3, Qwen2 and SmolLM families' of Hugging Face's tokenizer.json),
 * written from their published algorithms: text (any bytes) to token ids
 * and back.
 *
 * GPT-2's tokenizer is two files. encoder.json: one JSON object, token
 * string -> id, ids exactly 0 .. n-1 (the vocabulary, 50257 for GPT-2).
 * Token strings spell bytes with GPT-2's byte-to-character map
 * (rt_bpe_byte_char): every byte is one printable character, so that each
 * of the 256 bytes is a token of its own and every text can be encoded.
 * vocab.bpe: a first line "#version: ...", then one merge "a b" a line;
 * its rank is its order (the first line after the version is rank 0), and
 * a, b and ab must be tokens.
 *
 * Hugging Face's is one file, tokenizer.json (hf_tokenizer.c says which of
 * its settings are read and which refused): the same vocabulary and merges
 * as its "model" (type "BPE"), a pre-tokenizer among those of
 * enum rt_bpe_pretok, added tokens (ids of their own, or of the
 * vocabulary: "<|begin_of_text|>", "<|endoftext|>"), matched in the text
 * before anything else, as their bytes, and the post-processor's template
 * (Llama 3 puts its begin-of-text id before every text).
 *
 * Encoding: the text is cut at the added tokens it holds, each other span
 * into pre-tokens (rt_bpe_split_as), each pre-token's bytes become
 * single-byte tokens, and the adjacent pair of lowest rank is merged, every
 * occurrence left to right, until no adjacent pair has a merge (with
 * ignore_merges, as Llama 3's, a pre-token that is a token of the
 * vocabulary is that token). Decoding concatenates the tokens' bytes, so
 * decode(encode(x)) == x for every x, invalid UTF-8 included, but for the
 * template's ids.
 *
 * Errors: 0 or a negative errno-style code, with a message in err naming
 * the file and what is wrong. Sections: life cycle, operations, queries,
 * the pre-tokenizers and their character classes.
 */
#ifndef DTRAIN_RUNTIME_BPE_H
#define DTRAIN_RUNTIME_BPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define RT_BPE_NAME "gpt2-bpe"                    /* the token file's tokenizer attribute ... */
#define RT_BPE_HF_NAME "hf-tokenizer"              /* ... GPT-2's files, or tokenizer.json */
#define RT_BPE_H5_GROUP "tokenizer"                /* in a token file: the group of the files'
						    * bytes, uint8, under their names */
#define RT_BPE_MAX_VOCAB 16777216 /* 2^24, as token streams (tokens.h) */
#define RT_BPE_MAX_TEMPLATE 4     /* ids a template puts before or after a text */

/* The files a tokenizer is made of, as loaded: GPT-2's two (encoder.json,
 * vocab.bpe) or Hugging Face's one (tokenizer.json). */
struct rt_bpe_files {
	const char *kind;    /* RT_BPE_NAME or RT_BPE_HF_NAME */
	int n;               /* 2 or 1 */
	const char *name[2]; /* "encoder.json", "vocab.bpe"; or "tokenizer.json" */
	const char *data[2]; /* their bytes [len] */
	size_t len[2];
};

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
/* Hugging Face's tokenizer.json (hf_tokenizer.c): -ENOENT, -ENOMEM,
 * -EINVAL naming the JSON path of what is malformed, or -ENOTSUP naming
 * what dtrain does not read (a SentencePiece-style model, as Llama 2's; a
 * pre-tokenizer or normalizer of another family). */
int rt_bpe_load_hf(struct rt_bpe **out, const char *tokenizer_json, struct dt_err *err);
int rt_bpe_load_hf_mem(struct rt_bpe **out, const char *json, size_t len, const char *name,
		       struct dt_err *err);
/* The tokenizer of files f (its kind picks the loader); messages call
 * each file "where/name". */
int rt_bpe_load_files(struct rt_bpe **out, const struct rt_bpe_files *f, const char *where,
		      struct dt_err *err);
/* The tokenizer in directory dir: with gpt2, GPT-2's files (encoder.json
 * and vocab.bpe, or Hugging Face's names for them, vocab.json and
 * merges.txt) if there, else tokenizer.json; without, tokenizer.json only
 * (a Qwen2's vocab.json and merges.txt are cut by another pattern than
 * GPT-2's). -ENOENT, with no message, when dir holds none of them. */
int rt_bpe_load_dir(struct rt_bpe **out, const char *dir, bool gpt2, struct dt_err *err);
/* The tokenizer recorded in a token stream by `dtrain-data text --bpe` or
 * `--tokenizer` (root attribute tokenizer = RT_BPE_NAME or RT_BPE_HF_NAME,
 * the files' bytes as datasets /tokenizer/<name>), checked against its
 * vocab_size. -ENOENT when the file records none (a byte-level or imported
 * stream). bpe_h5.c. */
int rt_bpe_load_tokens(struct rt_bpe **out, const char *tokens_h5, struct dt_err *err);
void rt_bpe_free(struct rt_bpe *b);

/* --- operations --- */

/* The room rt_bpe_encode needs for a text of len bytes: len ids (a token
 * is one byte or more) and the template's. */
size_t rt_bpe_max_ids(const struct rt_bpe *b, size_t len);
/* Encodes text [len] into ids [rt_bpe_max_ids(b, len)]; *n gets the count.
 * 0, or -ENOMEM (the work space of a pre-token grows with its length). */
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
/* The files as loaded, to record them (tokens.c, checkpoints); valid until
 * rt_bpe_free. */
void rt_bpe_files(const struct rt_bpe *b, struct rt_bpe_files *f);
/* GPT-2's bytes_to_unicode: bytes 33..126, 161..172 and 174..255 are
 * themselves, the 68 others 256, 257, ... in byte order. */
uint32_t rt_bpe_byte_char(uint8_t byte);

/* --- the pre-tokenizers and their character classes (pretok.c) --- */

/* Where a text is cut before any merge: each a regular expression whose
 * first match at the text is its first pre-token, on the UTF-8 of the text.
 * A byte that does not start a valid UTF-8 sequence (an overlong form, a
 * surrogate, past U+10FFFF, cut short) is one character of its own,
 * neither letter, number nor space. */
enum rt_bpe_pretok {
	/* GPT-2's:
	 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
	RT_PRETOK_GPT2,
	/* Llama 3's:
	 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
	 *    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
	RT_PRETOK_LLAMA3,
	/* Qwen2's: Llama 3's with \p{N} for \p{N}{1,3} */
	RT_PRETOK_QWEN2,
	/* SmolLM's (StarCoder's): every \p{N} alone, GPT-2's between */
	RT_PRETOK_DIGITS_GPT2,
};

/* The length in bytes (>= 1) of the first pre-token of s [n], n >= 1. */
size_t rt_bpe_split_as(enum rt_bpe_pretok how, const uint8_t *s, size_t n);
/* rt_bpe_split_as(RT_PRETOK_GPT2, s, n) */
size_t rt_bpe_split(const uint8_t *s, size_t n);
/* \p{L}: general category L* (Lu Ll Lt Lm Lo); \p{N}: N* (Nd Nl No); from
 * the Unicode tables of unicode_classes.c (generated, its top says which). */
bool rt_bpe_is_letter(uint32_t cp);
bool rt_bpe_is_number(uint32_t cp);
/* NFC's quick check (UAX #15): the character may change under NFC or
 * compose with the one before (NFC_Quick_Check No or Maybe); and its
 * canonical combining class (0 for most). unicode_classes.c. */
bool rt_bpe_nfc_unsure(uint32_t cp);
int rt_bpe_combining_class(uint32_t cp);
/* The offset in s [n] of the first character at which NFC's quick check
 * cannot say s is in NFC (rt_bpe_nfc_unsure, or combining classes out of
 * canonical order), or n: s [n] is in NFC, and Hugging Face's NFC
 * normalizer leaves it as it is. Bytes that are not UTF-8 pass. */
size_t rt_bpe_nfc_prefix(const uint8_t *s, size_t n);
/* \s as Python's `regex` module has it, Unicode's White_Space property:
 * U+0009..000D, 0020, 0085, 00A0, 1680, 2000..200A, 2028, 2029, 202F, 205F,
 * 3000. (str.isspace() also has U+001C..001F; `regex` and we do not.) */
bool rt_bpe_is_space(uint32_t cp);

#endif
