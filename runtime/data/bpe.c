/*
 * bpe.c - GPT-2's byte-level BPE (bpe.h): loading and checking the two
 * files, the pre-tokenizer, the merge loop, encoding and decoding.
 *
 * Sections: the byte alphabet, the pre-tokenizer, loading encoder.json,
 * loading vocab.bpe, life cycle, merging, encoding and decoding.
 */
#include "runtime/data/bpe.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "base/io.h"
#include "base/json.h"

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

struct rt_bpe {
	int32_t vocab;
	char *encoder, *merges;        /* the files' bytes, as loaded */
	size_t encoder_len, merges_len;
	uint8_t *tok;                  /* every token's bytes, concatenated */
	size_t *tok_at;                /* [vocab + 1]: token i is tok[tok_at[i] .. tok_at[i + 1]) */
	int32_t byte_id[256];          /* the token of each single byte */
	struct merge *map;             /* open addressing, [map_size], a power of two */
	size_t map_size;
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

/* --- the pre-tokenizer --- */

enum cls { C_LETTER, C_NUMBER, C_SPACE, C_OTHER };

bool rt_bpe_is_space(uint32_t cp)
{
	return (cp >= 0x9 && cp <= 0xd) || cp == 0x20 || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
	       (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
	       cp == 0x205f || cp == 0x3000;
}

static bool cont(uint8_t c)
{
	return (c & 0xc0) == 0x80;
}

/* The character at s [n >= 1]: its byte length, and its code point into
 * *cp, or UINT32_MAX for a byte that starts no valid UTF-8 sequence (RFC
 * 3629: no overlong forms, no surrogates, nothing past U+10FFFF). */
static size_t utf8(const uint8_t *s, size_t n, uint32_t *cp)
{
	uint8_t c = s[0];

	*cp = UINT32_MAX;
	if (c < 0x80)
		return *cp = c, 1;
	if (c >= 0xc2 && c <= 0xdf && n >= 2 && cont(s[1]))
		return *cp = (uint32_t)(c & 0x1f) << 6 | (s[1] & 0x3f), 2;
	if (c >= 0xe0 && c <= 0xef && n >= 3 && cont(s[1]) && cont(s[2]) &&
	    !(c == 0xe0 && s[1] < 0xa0) && !(c == 0xed && s[1] > 0x9f))
		return *cp = (uint32_t)(c & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f), 3;
	if (c >= 0xf0 && c <= 0xf4 && n >= 4 && cont(s[1]) && cont(s[2]) && cont(s[3]) &&
	    !(c == 0xf0 && s[1] < 0x90) && !(c == 0xf4 && s[1] > 0x8f))
		return *cp = (uint32_t)(c & 0x07) << 18 | (uint32_t)(s[1] & 0x3f) << 12 |
			     (uint32_t)(s[2] & 0x3f) << 6 | (s[3] & 0x3f), 4;
	return 1;
}

/* The class of the character at s [n >= 1], its length into *len. */
static enum cls cls_at(const uint8_t *s, size_t n, size_t *len)
{
	uint32_t cp;

	*len = utf8(s, n, &cp);
	if (cp == UINT32_MAX)
		return C_OTHER;
	if (rt_bpe_is_letter(cp))
		return C_LETTER;
	if (rt_bpe_is_number(cp))
		return C_NUMBER;
	return rt_bpe_is_space(cp) ? C_SPACE : C_OTHER;
}

/* 's 't 're 've 'm 'll 'd at s [n] (s[0] is '\''): its length, or 0. */
static size_t contraction(const uint8_t *s, size_t n)
{
	if (n >= 2 && (s[1] == 's' || s[1] == 't' || s[1] == 'm' || s[1] == 'd'))
		return 2;
	if (n >= 3 && ((s[1] == 'r' && s[2] == 'e') || (s[1] == 'v' && s[2] == 'e') ||
		       (s[1] == 'l' && s[2] == 'l')))
		return 3;
	return 0;
}

/* The end of the run of characters of class c that starts at s + at. */
static size_t run(const uint8_t *s, size_t n, size_t at, enum cls c)
{
	size_t len;

	while (at < n && cls_at(s + at, n - at, &len) == c)
		at += len;
	return at;
}

size_t rt_bpe_split(const uint8_t *s, size_t n)
{
	size_t len, k, last = 0, at = 0;
	enum cls c = cls_at(s, n, &len);

	if (s[0] == '\'' && (k = contraction(s, n)))
		return k;
	if (s[0] == ' ' && n > 1) {
		enum cls next = cls_at(s + 1, n - 1, &k);

		if (next != C_SPACE) /* ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+' */
			return run(s, n, 1, next);
	}
	if (c != C_SPACE)
		return run(s, n, 0, c);
	/* '\s+(?!\S)': the run but its last character, when a non-space
	 * follows and that leaves one; else '\s+', the whole run */
	while (at < n && cls_at(s + at, n - at, &len) == C_SPACE) {
		last = len;
		at += len;
	}
	return at < n && at > last ? at - last : at;
}

/* --- loading encoder.json --- */

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
		len = utf8(s + at, n - at, &cp);
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

/* Every token's bytes into b->tok / b->tok_at, and the single bytes'. */
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
		k = spell(keys[i], b->tok + b->tok_at[i], &bad);
		if (k < 0 && bad == UINT32_MAX)
			return dt_err_add(err, "%s: token \"%.80s\" (id %d) is empty or not UTF-8",
					  name, keys[i], (int)i);
		if (k < 0)
			return dt_err_add(err, "%s: token \"%.80s\" (id %d): U+%04X is not a character of GPT-2's byte alphabet",
					  name, keys[i], (int)i, (unsigned)bad);
		b->tok_at[i + 1] = b->tok_at[i] + (size_t)k;
		if (k == 1)
			b->byte_id[b->tok[b->tok_at[i]]] = i;
	}
	for (i = 0; i < 256; i++)
		if (b->byte_id[i] < 0)
			return dt_err_add(err, "%s: no token for byte 0x%02x (\"\\u%04x\"): every byte needs one",
					  name, (unsigned)i, (unsigned)rt_bpe_byte_char((uint8_t)i));
	return 0;
}

/* Parses b->encoder into *enc (the caller puts it) and the tokens' bytes. */
static int load_encoder(struct rt_bpe *b, const char *name, struct json_object **enc,
			struct dt_err *err)
{
	struct dt_json_error je;
	const char **keys = NULL;
	size_t total = 0;
	int line, col, rc, n;

	rc = dt_json_parse_object(b->encoder, b->encoder_len, 4, enc, &je);
	if (rc == -EINVAL) {
		dt_json_line_col(b->encoder, b->encoder_len, je.offset, &line, &col);
		return dt_err_add(err, "%s: line %d, column %d: not JSON: %s", name, line, col, je.what);
	}
	if (rc == -EDOM)
		return dt_err_add(err, "%s: not a JSON object of token -> id", name);
	if (rc)
		return dt_err_add(err, "%s: cannot parse: %s", name, strerror(-rc)), rc;
	n = json_object_object_length(*enc);
	if (n < 256 || n > RT_BPE_MAX_VOCAB)
		return dt_err_add(err, "%s: %d tokens; a byte-level BPE has 256 .. %d", name, n,
				  RT_BPE_MAX_VOCAB);
	b->vocab = n;
	keys = calloc((size_t)n, sizeof(*keys));
	b->tok_at = malloc(((size_t)n + 1) * sizeof(*b->tok_at));
	if (!keys || !b->tok_at) {
		dt_err_add(err, "%s: out of memory for %d tokens", name, n);
		rc = -ENOMEM;
		goto out;
	}
	if ((rc = check_ids(*enc, n, keys, name, err)))
		goto out;
	json_object_object_foreach(*enc, key, val) {
		(void)val;
		total += strlen(key);
	}
	rc = spell_all(b, keys, total, name, err);
out:
	free(keys);
	return rc;
}

/* --- loading vocab.bpe --- */

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

/* One merge line (NUL-terminated, in place): its pair into the map. */
static int add_merge(struct rt_bpe *b, struct json_object *enc, char *line, int lineno,
		     int32_t rank, const char *name, struct dt_err *err)
{
	char *sp = strchr(line, ' '), *joined = NULL;
	int32_t l, r, res;
	size_t i;

	if (!sp || sp == line || !sp[1] || strchr(sp + 1, ' '))
		return dt_err_add(err, "%s: line %d: a merge is two symbols separated by one space (got \"%.80s\")",
				  name, lineno, line);
	*sp = '\0';
	l = id_of(enc, line);
	r = id_of(enc, sp + 1);
	if (l < 0 || r < 0)
		return dt_err_add(err, "%s: line %d: merge \"%.80s %.80s\": \"%.80s\" is not a token of the encoder",
				  name, lineno, line, sp + 1, l < 0 ? line : sp + 1);
	if (asprintf(&joined, "%s%s", line, sp + 1) < 0)
		return dt_err_add(err, "%s: out of memory", name), -ENOMEM;
	res = id_of(enc, joined);
	if (res < 0) {
		dt_err_add(err, "%s: line %d: merge \"%.80s %.80s\": its result \"%.80s\" is not a token of the encoder",
			   name, lineno, line, sp + 1, joined);
		free(joined);
		return -EINVAL;
	}
	free(joined);
	i = slot_of(b, key_of(l, r));
	if (b->map[i].key)
		return dt_err_add(err, "%s: line %d: merge \"%.80s %.80s\" repeats line %d", name,
				  lineno, line, sp + 1, (int)b->map[i].rank + 2);
	b->map[i] = (struct merge){ key_of(l, r), rank, res };
	return 0;
}

/* Every merge of b->merges into the map, checked against enc. */
static int load_merges(struct rt_bpe *b, struct json_object *enc, const char *name,
		       struct dt_err *err)
{
	char *text = NULL, *line, *end;
	size_t lines = 1, i;
	int32_t rank = 0;
	int lineno = 1, rc = 0;

	for (i = 0; i < b->merges_len; i++)
		lines += b->merges[i] == '\n';
	if (memchr(b->merges, '\0', b->merges_len))
		return dt_err_add(err, "%s: holds a NUL byte: not a vocab.bpe text file", name);
	if (b->merges_len < 8 || memcmp(b->merges, "#version", 8))
		return dt_err_add(err, "%s: line 1: must be \"#version: 0.2\" (GPT-2's vocab.bpe)", name);
	for (b->map_size = 16; b->map_size < 2 * lines; b->map_size *= 2)
		;
	b->map = calloc(b->map_size, sizeof(*b->map));
	text = malloc(b->merges_len + 1);
	if (!b->map || !text) {
		free(text);
		return dt_err_add(err, "%s: out of memory", name), -ENOMEM;
	}
	memcpy(text, b->merges, b->merges_len);
	text[b->merges_len] = '\0';
	line = strchr(text, '\n');
	for (line = line ? line + 1 : text + b->merges_len; !rc && line < text + b->merges_len;
	     line = end) {
		end = strchr(line, '\n');
		end = end ? (*end = '\0', end + 1) : line + strlen(line);
		rc = add_merge(b, enc, line, ++lineno, rank++, name, err);
	}
	free(text);
	return rc;
}

/* --- life cycle --- */

int rt_bpe_load_mem(struct rt_bpe **out, const char *encoder, size_t encoder_len,
		    const char *encoder_name, const char *merges, size_t merges_len,
		    const char *merges_name, struct dt_err *err)
{
	struct json_object *enc = NULL;
	struct rt_bpe *b = calloc(1, sizeof(*b));
	int rc = -ENOMEM;

	*out = NULL;
	if (!b || !(b->encoder = malloc(encoder_len + 1)) || !(b->merges = malloc(merges_len + 1)) ||
	    !(b->cache = calloc(CACHE_SLOTS, sizeof(*b->cache)))) {
		dt_err_add(err, "%s: out of memory", encoder_name);
		goto out;
	}
	memcpy(b->encoder, encoder, encoder_len);
	memcpy(b->merges, merges, merges_len);
	b->encoder_len = encoder_len;
	b->merges_len = merges_len;
	rc = load_encoder(b, encoder_name, &enc, err);
	if (!rc)
		rc = load_merges(b, enc, merges_name, err);
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
	free(b->cache);
	free(b->gen);
	free(b->heap);
	free(b->prev);
	free(b->next);
	free(b->sym);
	free(b->map);
	free(b->tok_at);
	free(b->tok);
	free(b->merges);
	free(b->encoder);
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

void rt_bpe_files(const struct rt_bpe *b, const char **encoder, size_t *encoder_len,
		  const char **merges, size_t *merges_len)
{
	*encoder = b->encoder;
	*encoder_len = b->encoder_len;
	*merges = b->merges;
	*merges_len = b->merges_len;
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

static size_t hash_of(const uint8_t *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ s[i]) * 0x100000001b3ull;
	return (size_t)(h % CACHE_SLOTS);
}

/* The ids of pre-token s [n] into ids; their count into *k. */
static int encode_word(struct rt_bpe *b, const uint8_t *s, size_t n, int32_t *ids, size_t *k)
{
	struct cache_slot *c = n <= CACHE_BYTES ? &b->cache[hash_of(s, n)] : NULL;
	size_t i;

	if (c && c->len == n && !memcmp(c->bytes, s, n)) {
		memcpy(ids, c->ids, c->n * sizeof(*ids));
		*k = c->n;
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

int rt_bpe_encode(struct rt_bpe *b, const void *text, size_t len, int32_t *ids, size_t *n,
		  struct dt_err *err)
{
	const uint8_t *s = text;
	size_t at = 0, w, k;

	*n = 0;
	while (at < len) {
		w = rt_bpe_split(s + at, len - at);
		if (encode_word(b, s + at, w, ids + *n, &k))
			return dt_err_add(err, "out of memory to encode a pre-token of %zu bytes", w), -ENOMEM;
		*n += k;
		at += w;
	}
	return 0;
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
