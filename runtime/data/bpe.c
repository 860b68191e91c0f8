/*
 * bpe.c - byte-level BPE (bpe.h): a tokenizer built and checked (its
 * vocabulary, added tokens, merges and rules: the loaders' side of
 * internal.h), GPT-2's two files loaded into it, the merge loop, encoding
 * and decoding. Hugging Face's tokenizer.json is read by hf_tokenizer.c,
 * the pre-tokenizers are pretok.c's.
 *
 * Sections: the byte alphabet, the vocabulary, the merges, the rules,
 * GPT-2's files, life cycle, queries, merging, encoding and decoding.
 */
#include "runtime/data/bpe.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "base/io.h"
#include "base/json.h"
#include "runtime/data/internal.h"

#define CACHE_SLOTS 4096 /* pre-tokens remembered, direct-mapped by hash */
#define CACHE_BYTES 24   /* the longest pre-token cached */
#define NONE SIZE_MAX

/* A merge: the pair (left, right) of token ids becomes token result. */
struct merge {
	uint64_t key; /* left << 32 | right; 0 marks an empty slot (never a pair: see key_of) */
	int32_t rank, result;
};

/* One cached pre-token and its ids. */
struct cache_slot {
	uint8_t len, n; /* bytes of the pre-token (0: empty slot), ids */
	uint8_t bytes[CACHE_BYTES];
	int32_t ids[CACHE_BYTES];
};

/* A candidate merge in the heap: the pair at symbol pos, of rank rank. */
struct cand {
	int32_t rank;
	size_t pos;
};

/* A token in the index of whole pre-tokens (ignore_merges). */
struct word {
	uint64_t hash; /* of its bytes; 0: an empty slot */
	int32_t id;
};

struct rt_bpe {
	int32_t vocab;                 /* every id: the vocabulary's, then the added tokens' */
	int32_t n_model;               /* the vocabulary's: [0, n_model) */
	char *file[2];                 /* owned: the files' bytes, as loaded ... */
	struct rt_bpe_files files;     /* ... and them named, with their lengths */
	uint8_t *tok;                  /* every token's bytes, concatenated */
	size_t *tok_at;                /* [vocab + 1]: token i is tok[tok_at[i] .. tok_at[i + 1]) */
	int32_t byte_id[256];          /* the token of each single byte */
	struct merge *map;             /* open addressing, [map_size], a power of two */
	size_t map_size;
	/* added tokens: matched in a text first, the longest at the first place */
	int32_t *added;                /* [n_added] their ids */
	uint8_t **added_bytes;         /* [n_added] their text (NUL-terminated) */
	size_t *added_len;             /* [n_added] */
	int n_added;
	bool starts_added[256];        /* a byte that begins an added token */
	struct rt__bpe_rules rules;
	struct word *words;            /* [words_size], a power of two; ignore_merges only */
	size_t words_size;
	/* the merge loop's work space, for a pre-token of up to cap bytes */
	int32_t *sym;                  /* [cap] each symbol's token */
	size_t *next, *prev, cap;      /* [cap] the list of live symbols (NONE ends it) */
	struct cand *heap, *gen;       /* [3 cap] candidates; [3 cap] one rank's */
	struct cache_slot *cache;      /* [CACHE_SLOTS] */
};

/* --- the byte alphabet --- */

static bool printable(unsigned b)
{
	return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

uint32_t rt_bpe_byte_char(uint8_t byte)
{
	unsigned b, n = 0;

	if (printable(byte))
		return byte;
	for (b = 0; b < byte; b++)
		n += !printable(b);
	return 256 + n;
}

/* The byte that character cp stands for, or -1 when it stands for none. */
static int char_byte(uint32_t cp)
{
	unsigned b, n = 0;

	if (cp < 256)
		return printable(cp) ? (int)cp : -1;
	for (b = 0; b < 256; b++)
		if (!printable(b) && 256 + n++ == cp)
			return (int)b;
	return -1;
}

/* --- the vocabulary --- */

/* The bytes that token string key spells into out (room for strlen(key));
 * their count, or -1 when a character is not in the byte alphabet (its
 * code point into *bad) or the string is empty. */
static long spell(const char *key, uint8_t *out, uint32_t *bad)
{
	const uint8_t *s = (const uint8_t *)key;
	size_t n = strlen(key), at = 0, len;
	long k = 0;
	uint32_t cp;
	int b;

	*bad = UINT32_MAX;
	while (at < n) {
		len = rt__bpe_utf8(s + at, n - at, &cp);
		if (cp == UINT32_MAX || (b = char_byte(cp)) < 0) {
			*bad = cp;
			return -1;
		}
		out[k++] = (uint8_t)b;
		at += len;
	}
	return k ? k : -1;
}

/* Checks every entry of enc (ids 0 .. vocab-1, each once, an integer) and
 * fills keys [vocab] with each id's token string (owned by enc). */
static int check_ids(struct json_object *enc, int32_t vocab, const char **keys, const char *name,
		     struct dt_err *err)
{
	int64_t id;

	json_object_object_foreach(enc, key, val) {
		if (!json_object_is_type(val, json_type_int))
			return dt_err_add(err, "%s: token \"%.80s\": the id must be an integer (got %s)",
					  name, key, dt_json_kind(val));
		id = json_object_get_int64(val);
		if (id < 0 || id >= vocab)
			return dt_err_add(err, "%s: token \"%.80s\": id %lld is outside [0, %d), the ids must be 0 .. n-1 for n tokens",
					  name, key, (long long)id, (int)vocab);
		if (keys[id])
			return dt_err_add(err, "%s: tokens \"%.80s\" and \"%.80s\" have the same id %lld",
					  name, keys[id], key, (long long)id);
		keys[id] = key;
	}
	return 0;
}

/* Every token's bytes into b->tok / b->tok_at, and the single bytes':
 * keys [vocab], those of the vocabulary spelt in the byte alphabet, the
 * added tokens' after it as they are. */
static int spell_all(struct rt_bpe *b, const char **keys, size_t total, const char *name,
		     struct dt_err *err)
{
	int32_t i;
	long k;
	uint32_t bad;

	b->tok = malloc(total ? total : 1);
	if (!b->tok)
		return dt_err_add(err, "%s: out of memory", name), -ENOMEM;
	for (i = 0; i < 256; i++)
		b->byte_id[i] = -1;
	b->tok_at[0] = 0;
	for (i = 0; i < b->vocab; i++) {
		if (i >= b->n_model) {
			k = (long)strlen(keys[i]);
			memcpy(b->tok + b->tok_at[i], keys[i], (size_t)k);
		} else if ((k = spell(keys[i], b->tok + b->tok_at[i], &bad)) < 0) {
			if (bad == UINT32_MAX)
				return dt_err_add(err, "%s: token \"%.80s\" (id %d) is empty or not UTF-8",
						  name, keys[i], (int)i);
			return dt_err_add(err, "%s: token \"%.80s\" (id %d): U+%04X is not a character of GPT-2's byte alphabet",
					  name, keys[i], (int)i, (unsigned)bad);
		}
		b->tok_at[i + 1] = b->tok_at[i] + (size_t)k;
		if (k == 1 && i < b->n_model)
			b->byte_id[b->tok[b->tok_at[i]]] = i;
	}
	for (i = 0; i < 256; i++)
		if (b->byte_id[i] < 0)
			return dt_err_add(err, "%s: no token for byte 0x%02x (\"\\u%04x\"): every byte needs one",
					  name, (unsigned)i, (unsigned)rt_bpe_byte_char((uint8_t)i));
	return 0;
}

/* The ids the added tokens [n] put after a vocabulary of vocab: into
 * *extra; they must be vocab, vocab + 1, ... with no gap, each once. */
static int added_ids(const struct rt__bpe_added *added, int n, int32_t vocab, int32_t *extra,
		     const char *name, struct dt_err *err)
{
	int64_t top = vocab;
	unsigned char *seen = NULL;
	int i, rc = 0;

	for (i = 0; i < n; i++) {
		if (added[i].id < 0 || !added[i].content[0])
			return dt_err_add(err, "%s: added token %d (\"%.80s\"): its id is negative or its text empty",
					  name, i, added[i].content);
		top = added[i].id >= top ? (int64_t)added[i].id + 1 : top;
	}
	if (top > RT_BPE_MAX_VOCAB)
		return dt_err_add(err, "%s: added token ids reach %lld, past %d", name, (long long)top,
				  RT_BPE_MAX_VOCAB);
	*extra = (int32_t)(top - vocab);
	if (!(seen = calloc((size_t)*extra + 1, 1)))
		return dt_err_add(err, "%s: out of memory", name), -ENOMEM;
	for (i = 0; i < n && !rc; i++)
		if (added[i].id >= vocab && seen[added[i].id - vocab]++)
			rc = dt_err_add(err, "%s: added tokens: id %d twice", name, (int)added[i].id);
	for (i = 0; i < *extra && !rc; i++)
		if (!seen[i])
			rc = dt_err_add(err, "%s: added tokens: no token has id %d, between the vocabulary's %d and the last added %lld",
					name, (int)(vocab + i), (int)vocab, (long long)top - 1);
	free(seen);
	return rc;
}

/* The added tokens' ids and text, for rt_bpe_encode to find them. */
static int keep_added(struct rt_bpe *b, const struct rt__bpe_added *added, int n, const char *name,
		      struct dt_err *err)
{
	b->added = calloc((size_t)n + 1, sizeof(*b->added));
	b->added_bytes = calloc((size_t)n + 1, sizeof(*b->added_bytes));
	b->added_len = calloc((size_t)n + 1, sizeof(*b->added_len));
	if (!b->added || !b->added_bytes || !b->added_len)
		return dt_err_add(err, "%s: out of memory", name), -ENOMEM;
	for (b->n_added = 0; b->n_added < n; b->n_added++) {
		const struct rt__bpe_added *a = &added[b->n_added];

		if (!(b->added_bytes[b->n_added] = (uint8_t *)strdup(a->content)))
			return dt_err_add(err, "%s: out of memory", name), -ENOMEM;
		b->added[b->n_added] = a->id;
		b->added_len[b->n_added] = strlen(a->content);
		b->starts_added[(uint8_t)a->content[0]] = true;
	}
	return 0;
}

int rt__bpe_vocab(struct rt_bpe *b, struct json_object *vocab, const struct rt__bpe_added *added,
		  int n_added, const char *name, struct dt_err *err)
{
	const char **keys = NULL;
	size_t total = 0;
	int32_t extra = 0, i;
	int rc, n = json_object_object_length(vocab);

	if (n < 256 || n > RT_BPE_MAX_VOCAB)
		return dt_err_add(err, "%s: %d tokens; a byte-level BPE has 256 .. %d", name, n,
				  RT_BPE_MAX_VOCAB);
	if ((rc = added_ids(added, n_added, n, &extra, name, err)))
		return rc;
	b->n_model = n;
	b->vocab = n + extra;
	keys = calloc((size_t)b->vocab, sizeof(*keys));
	b->tok_at = malloc(((size_t)b->vocab + 1) * sizeof(*b->tok_at));
	if (!keys || !b->tok_at) {
		dt_err_add(err, "%s: out of memory for %d tokens", name, (int)b->vocab);
		rc = -ENOMEM;
		goto out;
	}
	if ((rc = check_ids(vocab, n, keys, name, err)))
		goto out;
	for (i = 0; i < n_added; i++)
		if (added[i].id >= n)
			keys[added[i].id] = added[i].content;
	for (i = 0; i < b->vocab; i++)
		total += strlen(keys[i]);
	if (!(rc = spell_all(b, keys, total, name, err)))
		rc = keep_added(b, added, n_added, name, err);
out:
	free(keys);
	return rc;
}

/* --- the merges --- */

static uint64_t key_of(int32_t left, int32_t right)
{
	/* + 1: the pair (0, 0) must not read as an empty slot */
	return ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
}

static size_t slot_of(const struct rt_bpe *b, uint64_t key)
{
	size_t i = (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & (b->map_size - 1);

	while (b->map[i].key && b->map[i].key != key)
		i = (i + 1) & (b->map_size - 1);
	return i;
}

static const struct merge *find_merge(const struct rt_bpe *b, int32_t left, int32_t right)
{
	const struct merge *m = &b->map[slot_of(b, key_of(left, right))];

	return m->key ? m : NULL;
}

/* The id of token string s, or -1. */
static int32_t id_of(struct json_object *enc, const char *s)
{
	struct json_object *v;

	return json_object_object_get_ex(enc, s, &v) ? (int32_t)json_object_get_int64(v) : -1;
}

int rt__bpe_merges(struct rt_bpe *b, size_t n, const char *name, struct dt_err *err)
{
	for (b->map_size = 16; b->map_size < 2 * n; b->map_size *= 2)
		;
	b->map = calloc(b->map_size, sizeof(*b->map));
	return b->map ? 0 : (dt_err_add(err, "%s: out of memory for %zu merges", name, n), -ENOMEM);
}

int rt__bpe_merge(struct rt_bpe *b, struct json_object *vocab, const char *left, const char *right,
		  int32_t rank, int32_t *first, const char *where, struct dt_err *err)
{
	int32_t l = id_of(vocab, left), r = id_of(vocab, right), res;
	char *joined = NULL;
	size_t i;

	if (l < 0 || r < 0)
		return dt_err_add(err, "%s: merge \"%.80s %.80s\": \"%.80s\" is not a token of the encoder",
				  where, left, right, l < 0 ? left : right);
	if (asprintf(&joined, "%s%s", left, right) < 0)
		return dt_err_add(err, "%s: out of memory", where), -ENOMEM;
	res = id_of(vocab, joined);
	if (res < 0) {
		dt_err_add(err, "%s: merge \"%.80s %.80s\": its result \"%.80s\" is not a token of the encoder",
			   where, left, right, joined);
		free(joined);
		return -EINVAL;
	}
	free(joined);
	i = slot_of(b, key_of(l, r));
	if (b->map[i].key) {
		*first = b->map[i].rank;
		return -EEXIST;
	}
	b->map[i] = (struct merge){ key_of(l, r), rank, res };
	return 0;
}

/* --- the rules --- */

static uint64_t hash_bytes(const uint8_t *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ s[i]) * 0x100000001b3ull;
	return h ? h : 1; /* 0 marks an empty slot */
}

/* The slot of the token of bytes s [n] in b->words, or of an empty one. */
static size_t word_slot(const struct rt_bpe *b, const uint8_t *s, size_t n)
{
	uint64_t h = hash_bytes(s, n);
	size_t i = (size_t)h & (b->words_size - 1), len;
	const uint8_t *t;

	for (; b->words[i].hash; i = (i + 1) & (b->words_size - 1)) {
		if (b->words[i].hash != h)
			continue;
		t = rt_bpe_token(b, b->words[i].id, &len);
		if (len == n && !memcmp(t, s, n))
			break;
	}
	return i;
}

/* The index of the vocabulary's tokens by their bytes (ignore_merges). */
static int index_words(struct rt_bpe *b)
{
	const uint8_t *t;
	size_t len, i;
	int32_t id;

	for (b->words_size = 16; b->words_size < 2 * (size_t)b->n_model; b->words_size *= 2)
		;
	if (!(b->words = calloc(b->words_size, sizeof(*b->words))))
		return -ENOMEM;
	for (id = 0; id < b->n_model; id++) {
		t = rt_bpe_token(b, id, &len);
		i = word_slot(b, t, len);
		if (!b->words[i].hash)
			b->words[i] = (struct word){ hash_bytes(t, len), id };
	}
	return 0;
}

int rt__bpe_rules(struct rt_bpe *b, const struct rt__bpe_rules *r, const char *name,
		  struct dt_err *err)
{
	int i;

	for (i = 0; i < r->n_before + r->n_after; i++) {
		int32_t id = i < r->n_before ? r->before[i] : r->after[i - r->n_before];

		if (id < 0 || id >= b->vocab)
			return dt_err_add(err, "%s: the template's id %d is not a token (the vocabulary has %d)",
					  name, (int)id, (int)b->vocab);
	}
	b->rules = *r;
	if (r->ignore_merges && index_words(b))
		return dt_err_add(err, "%s: out of memory", name), -ENOMEM;
	return 0;
}

/* --- GPT-2's files --- */

/* One merge line of vocab.bpe (NUL-terminated, in place) into the map. */
static int add_merge(struct rt_bpe *b, struct json_object *enc, char *line, int lineno,
		     int32_t rank, const char *name, struct dt_err *err)
{
	char *sp = strchr(line, ' '), where[4200];
	int32_t first;
	int rc;

	if (!sp || sp == line || !sp[1] || strchr(sp + 1, ' '))
		return dt_err_add(err, "%s: line %d: a merge is two symbols separated by one space (got \"%.80s\")",
				  name, lineno, line);
	*sp = '\0';
	snprintf(where, sizeof(where), "%s: line %d", name, lineno);
	rc = rt__bpe_merge(b, enc, line, sp + 1, rank, &first, where, err);
	if (rc == -EEXIST)
		return dt_err_add(err, "%s: merge \"%.80s %.80s\" repeats line %d", where, line, sp + 1,
				  (int)first + 2);
	return rc;
}

/* Every merge of vocab.bpe text [len] into the map, checked against enc. */
static int load_merges(struct rt_bpe *b, struct json_object *enc, const char *merges, size_t len,
		       const char *name, struct dt_err *err)
{
	char *text = NULL, *line, *end;
	size_t lines = 1, i;
	int32_t rank = 0;
	int lineno = 1, rc = 0;

	for (i = 0; i < len; i++)
		lines += merges[i] == '\n';
	if (memchr(merges, '\0', len))
		return dt_err_add(err, "%s: holds a NUL byte: not a vocab.bpe text file", name);
	if (len < 8 || memcmp(merges, "#version", 8))
		return dt_err_add(err, "%s: line 1: must be \"#version: 0.2\" (GPT-2's vocab.bpe)", name);
	if ((rc = rt__bpe_merges(b, lines, name, err)))
		return rc;
	if (!(text = malloc(len + 1)))
		return dt_err_add(err, "%s: out of memory", name), -ENOMEM;
	memcpy(text, merges, len);
	text[len] = '\0';
	line = strchr(text, '\n');
	for (line = line ? line + 1 : text + len; !rc && line < text + len; line = end) {
		end = strchr(line, '\n');
		end = end ? (*end = '\0', end + 1) : line + strlen(line);
		rc = add_merge(b, enc, line, ++lineno, rank++, name, err);
	}
	free(text);
	return rc;
}

int rt__bpe_parse(const char *text, size_t len, int depth, const char *name, const char *what,
		  struct json_object **out, struct dt_err *err)
{
	struct dt_json_error je;
	int line, col, rc = dt_json_parse_object(text, len, depth, out, &je);

	if (rc == -EINVAL) {
		dt_json_line_col(text, len, je.offset, &line, &col);
		return dt_err_add(err, "%s: line %d, column %d: not JSON: %s", name, line, col, je.what);
	}
	if (rc == -EDOM)
		return dt_err_add(err, "%s: not %s", name, what);
	if (rc)
		return dt_err_add(err, "%s: cannot parse: %s", name, strerror(-rc)), rc;
	return 0;
}

/* --- life cycle --- */

int rt__bpe_new(struct rt_bpe **out, const struct rt_bpe_files *f, struct dt_err *err)
{
	struct rt_bpe *b = calloc(1, sizeof(*b));
	int i;

	*out = NULL;
	if (!b || !(b->cache = calloc(CACHE_SLOTS, sizeof(*b->cache))))
		goto oom;
	b->files = *f;
	for (i = 0; i < f->n; i++) {
		if (!(b->file[i] = malloc(f->len[i] + 1)))
			goto oom;
		memcpy(b->file[i], f->data[i], f->len[i]);
		b->file[i][f->len[i]] = '\0';
		b->files.data[i] = b->file[i];
	}
	*out = b;
	return 0;
oom:
	rt_bpe_free(b);
	return dt_err_add(err, "%s: out of memory", f->name[0]), -ENOMEM;
}

int rt_bpe_load_mem(struct rt_bpe **out, const char *encoder, size_t encoder_len,
		    const char *encoder_name, const char *merges, size_t merges_len,
		    const char *merges_name, struct dt_err *err)
{
	const struct rt_bpe_files f = { RT_BPE_NAME, 2, { "encoder.json", "vocab.bpe" },
					{ encoder, merges }, { encoder_len, merges_len } };
	const struct rt__bpe_rules gpt2 = { .pretok = RT_PRETOK_GPT2 };
	struct json_object *enc = NULL;
	struct rt_bpe *b = NULL;
	int rc;

	*out = NULL;
	if ((rc = rt__bpe_new(&b, &f, err)) ||
	    (rc = rt__bpe_parse(encoder, encoder_len, 4, encoder_name, "a JSON object of token -> id", &enc, err)) ||
	    (rc = rt__bpe_vocab(b, enc, NULL, 0, encoder_name, err)) ||
	    (rc = load_merges(b, enc, merges, merges_len, merges_name, err)))
		goto out;
	rc = rt__bpe_rules(b, &gpt2, encoder_name, err);
out:
	json_object_put(enc);
	if (rc)
		rt_bpe_free(b);
	else
		*out = b;
	return rc;
}

int rt_bpe_load(struct rt_bpe **out, const char *encoder_json, const char *vocab_bpe,
		struct dt_err *err)
{
	char *enc = NULL, *merges = NULL;
	size_t enc_len = 0, merges_len = 0;
	int rc;

	*out = NULL;
	if ((rc = dt_read_file(encoder_json, &enc, &enc_len)))
		return dt_err_add(err, "%s: cannot read: %s", encoder_json, strerror(-rc)), rc;
	if ((rc = dt_read_file(vocab_bpe, &merges, &merges_len))) {
		free(enc);
		return dt_err_add(err, "%s: cannot read: %s", vocab_bpe, strerror(-rc)), rc;
	}
	rc = rt_bpe_load_mem(out, enc, enc_len, encoder_json, merges, merges_len, vocab_bpe, err);
	free(merges);
	free(enc);
	return rc;
}

void rt_bpe_free(struct rt_bpe *b)
{
	if (!b)
		return;
	for (int i = 0; i < b->n_added; i++)
		free(b->added_bytes[i]);
	free(b->added_bytes);
	free(b->added_len);
	free(b->added);
	free(b->words);
	free(b->cache);
	free(b->gen);
	free(b->heap);
	free(b->prev);
	free(b->next);
	free(b->sym);
	free(b->map);
	free(b->tok_at);
	free(b->tok);
	free(b->file[1]);
	free(b->file[0]);
	free(b);
}

/* --- queries --- */

int32_t rt_bpe_vocab(const struct rt_bpe *b)
{
	return b->vocab;
}

const uint8_t *rt_bpe_token(const struct rt_bpe *b, int32_t id, size_t *len)
{
	*len = b->tok_at[id + 1] - b->tok_at[id];
	return b->tok + b->tok_at[id];
}

void rt_bpe_files(const struct rt_bpe *b, struct rt_bpe_files *f)
{
	*f = b->files;
}

size_t rt_bpe_max_ids(const struct rt_bpe *b, size_t len)
{
	return len + (size_t)b->rules.n_before + (size_t)b->rules.n_after;
}

/* --- merging --- */

/* The work space for a pre-token of n bytes. */
static int reserve(struct rt_bpe *b, size_t n)
{
	size_t cap = b->cap ? b->cap : 64;
	void *p[5];

	if (n <= b->cap)
		return 0;
	while (cap < n)
		cap *= 2;
	p[0] = realloc(b->sym, cap * sizeof(*b->sym));
	b->sym = p[0] ? p[0] : b->sym;
	p[1] = realloc(b->next, cap * sizeof(*b->next));
	b->next = p[1] ? p[1] : b->next;
	p[2] = realloc(b->prev, cap * sizeof(*b->prev));
	b->prev = p[2] ? p[2] : b->prev;
	p[3] = realloc(b->heap, 3 * cap * sizeof(*b->heap));
	b->heap = p[3] ? p[3] : b->heap;
	p[4] = realloc(b->gen, 3 * cap * sizeof(*b->gen));
	b->gen = p[4] ? p[4] : b->gen;
	if (!p[0] || !p[1] || !p[2] || !p[3] || !p[4])
		return -ENOMEM;
	b->cap = cap;
	return 0;
}

static bool before(struct cand a, struct cand c)
{
	return a.rank < c.rank || (a.rank == c.rank && a.pos < c.pos);
}

static void heap_push(struct cand *h, size_t *n, struct cand c)
{
	size_t i = (*n)++;

	while (i && before(c, h[(i - 1) / 2])) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = c;
}

static struct cand heap_pop(struct cand *h, size_t *n)
{
	struct cand top = h[0], last = h[--*n];
	size_t i = 0, k;

	while ((k = 2 * i + 1) < *n) {
		if (k + 1 < *n && before(h[k + 1], h[k]))
			k++;
		if (!before(h[k], last))
			break;
		h[i] = h[k];
		i = k;
	}
	h[i] = last;
	return top;
}

/* The pair that starts at symbol i into the heap, if it has a merge. */
static void push_pair(struct rt_bpe *b, size_t *n, size_t i)
{
	const struct merge *m;

	if (i != NONE && b->next[i] != NONE && (m = find_merge(b, b->sym[i], b->sym[b->next[i]])))
		heap_push(b->heap, n, (struct cand){ m->rank, i });
}

/* GPT-2's loop over the symbols sym [n]: the pair of lowest rank is merged,
 * all its occurrences left to right, until no pair has a merge. The heap
 * orders candidates by (rank, position); all of one rank are taken out
 * before any is merged, so that a pair a merge makes waits for the next
 * round as in GPT-2, and one made stale by a merge is skipped. */
static void merge_all(struct rt_bpe *b, size_t n)
{
	size_t i, h = 0, g, k, q;
	const struct merge *m;

	for (i = 0; i < n; i++) {
		b->next[i] = i + 1 < n ? i + 1 : NONE;
		b->prev[i] = i ? i - 1 : NONE;
	}
	for (i = 0; i + 1 < n; i++)
		push_pair(b, &h, i);
	while (h) {
		int32_t rank = b->heap[0].rank;

		for (g = 0; h && b->heap[0].rank == rank;)
			b->gen[g++] = heap_pop(b->heap, &h);
		for (k = 0; k < g; k++) {
			i = b->gen[k].pos;
			q = b->next[i];
			if (b->sym[i] < 0 || q == NONE || !(m = find_merge(b, b->sym[i], b->sym[q])) ||
			    m->rank != rank)
				continue;
			b->sym[i] = m->result;
			b->sym[q] = -1; /* gone */
			b->next[i] = b->next[q];
			if (b->next[q] != NONE)
				b->prev[b->next[q]] = i;
			push_pair(b, &h, b->prev[i]);
			push_pair(b, &h, i);
		}
	}
}

/* --- encoding and decoding --- */

/* The ids of pre-token s [n] into ids; their count into *k. */
static int encode_word(struct rt_bpe *b, const uint8_t *s, size_t n, int32_t *ids, size_t *k)
{
	struct cache_slot *c = n <= CACHE_BYTES ? &b->cache[hash_bytes(s, n) % CACHE_SLOTS] : NULL;
	size_t i;

	if (c && c->len == n && !memcmp(c->bytes, s, n)) {
		memcpy(ids, c->ids, c->n * sizeof(*ids));
		*k = c->n;
		return 0;
	}
	if (b->words && b->words[i = word_slot(b, s, n)].hash) { /* ignore_merges */
		ids[0] = b->words[i].id;
		*k = 1;
		return 0;
	}
	if (reserve(b, n))
		return -ENOMEM;
	for (i = 0; i < n; i++)
		b->sym[i] = b->byte_id[s[i]];
	merge_all(b, n);
	for (*k = 0, i = 0; i != NONE; i = b->next[i])
		ids[(*k)++] = b->sym[i];
	if (c) {
		c->len = (uint8_t)n;
		c->n = (uint8_t)*k;
		memcpy(c->bytes, s, n);
		memcpy(c->ids, ids, *k * sizeof(*ids));
	}
	return 0;
}

/* The first added token in s [n]: its place (n when none) and, into *which,
 * its index; the longest of those that begin at the first place. */
static size_t find_added(const struct rt_bpe *b, const uint8_t *s, size_t n, int *which)
{
	size_t at, best;
	int i;

	for (at = 0; at < n; at++) {
		if (!b->starts_added[s[at]])
			continue;
		for (best = 0, i = 0; i < b->n_added; i++)
			if (b->added_len[i] > best && b->added_len[i] <= n - at &&
			    !memcmp(s + at, b->added_bytes[i], b->added_len[i])) {
				best = b->added_len[i];
				*which = i;
			}
		if (best)
			return at;
	}
	return n;
}

/* The pre-tokens of s [len] (no added token in it), encoded after ids [*n]. */
static int encode_span(struct rt_bpe *b, const uint8_t *s, size_t len, int32_t *ids, size_t *n,
		       struct dt_err *err)
{
	size_t at = 0, w, k;

	while (at < len) {
		w = rt_bpe_split_as(b->rules.pretok, s + at, len - at);
		if (encode_word(b, s + at, w, ids + *n, &k))
			return dt_err_add(err, "out of memory to encode a pre-token of %zu bytes", w), -ENOMEM;
		*n += k;
		at += w;
	}
	return 0;
}

int rt_bpe_encode(struct rt_bpe *b, const void *text, size_t len, int32_t *ids, size_t *n,
		  struct dt_err *err)
{
	const uint8_t *s = text;
	size_t at = 0, next;
	int i, which = 0, rc = 0;

	*n = 0;
	if (b->rules.nfc && (next = rt_bpe_nfc_prefix(s, len)) < len) {
		uint32_t cp;

		rt__bpe_utf8(s + next, len - next, &cp);
		return dt_err_add(err, "byte %zu: U+%04X: the text is not in Unicode's NFC there (or may not be), which this tokenizer's normalizer asks for (hint: normalize it first: uconv -x NFC, or Python's unicodedata.normalize)",
				  next, (unsigned)cp);
	}
	for (i = 0; i < b->rules.n_before; i++)
		ids[(*n)++] = b->rules.before[i];
	while (!rc && at < len) {
		next = b->n_added ? at + find_added(b, s + at, len - at, &which) : len;
		rc = encode_span(b, s + at, next - at, ids, n, err);
		at = next;
		if (at < len) {
			ids[(*n)++] = b->added[which];
			at += b->added_len[which];
		}
	}
	for (i = 0; i < b->rules.n_after; i++)
		ids[(*n)++] = b->rules.after[i];
	return rc;
}

int rt_bpe_decode(const struct rt_bpe *b, const int32_t *ids, size_t n, char **out, size_t *len,
		  struct dt_err *err)
{
	size_t i, total = 0, k;
	const uint8_t *t;

	*out = NULL;
	*len = 0;
	for (i = 0; i < n; i++) {
		if (ids[i] < 0 || ids[i] >= b->vocab)
			return dt_err_add(err, "token %zu is %d, outside the vocabulary [0, %d)", i,
					  (int)ids[i], (int)b->vocab);
		total += b->tok_at[ids[i] + 1] - b->tok_at[ids[i]];
	}
	*out = malloc(total ? total : 1);
	if (!*out)
		return dt_err_add(err, "out of memory to decode %zu tokens", n), -ENOMEM;
	for (i = 0; i < n; i++) {
		t = rt_bpe_token(b, ids[i], &k);
		memcpy(*out + *len, t, k);
		*len += k;
	}
	return 0;
}
