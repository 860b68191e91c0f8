/*
 * test_bpe.c - GPT-2's byte-level BPE (runtime/data/bpe.h) on a tiny
 * tokenizer written here: the byte alphabet, the pre-tokenizer on tricky
 * strings (contractions, spaces before words, runs of spaces and newlines,
 * digits, punctuation, non-ASCII letters and numbers, emoji, invalid
 * UTF-8), the merge loop (rank order, every occurrence of a pair before a
 * pair it makes), round trips, the tokenizer recorded in a token stream,
 * and files refused with a message naming them.
 *
 * Sections: a tokenizer, the alphabet, the pre-tokenizer, merges, round
 * trips, token streams, refusals, main.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/data/bpe.h"
#include "runtime/data/tokens.h"
#include "tests/testutil.h"

/* --- a tokenizer: the 256 bytes (id = byte), then one token per merge --- */

/* The merges of the tokenizer, raw bytes: rank = index. "pq p" comes
 * before "p q", as a hostile file may have it. */
static const char *const merges[][2] = {
	{ "h", "e" }, { "l", "l" }, { "he", "ll" }, { "hell", "o" }, { " ", "w" },
	{ "o", "r" }, { " w", "or" }, { "a", "a" }, { "y", "z" }, { "x", "y" },
	{ "pq", "p" }, { "p", "q" }, { "\n", "\n" }, { " ", " " }, { "1", "2" },
};
#define N_MERGES ((int)(sizeof(merges) / sizeof(merges[0])))

/* s [n] in GPT-2's byte characters, UTF-8, appended to out at *at. */
static void spell(const char *s, size_t n, char *out, size_t *at)
{
	size_t i;

	for (i = 0; i < n; i++) {
		uint32_t c = rt_bpe_byte_char((uint8_t)s[i]);

		if (c == '"' || c == '\\')
			out[(*at)++] = '\\';
		if (c < 0x80) {
			out[(*at)++] = (char)c;
		} else {
			out[(*at)++] = (char)(0xc0 | c >> 6);
			out[(*at)++] = (char)(0x80 | (c & 0x3f));
		}
	}
	out[*at] = '\0';
}

/* encoder.json and vocab.bpe for merges [n] (static buffers). */
static void make_files(const char *const (*m)[2], int n, const char **enc, const char **vocab)
{
	static char e[65536], v[16384];
	size_t at = 0, vt = 0;
	char word[64];
	int i, id = 256;

	at += (size_t)sprintf(e, "{");
	for (i = 0; i < 256; i++) {
		char b = (char)i;

		e[at++] = '"';
		spell(&b, 1, e, &at);
		at += (size_t)sprintf(e + at, "\": %d, ", i);
	}
	vt += (size_t)sprintf(v, "#version: 0.2\n");
	for (i = 0; i < n; i++) {
		snprintf(word, sizeof(word), "%s%s", m[i][0], m[i][1]);
		e[at++] = '"';
		spell(word, strlen(word), e, &at);
		at += (size_t)sprintf(e + at, "\": %d%s", id++, i + 1 < n ? ", " : "");
		spell(m[i][0], strlen(m[i][0]), v, &vt);
		v[vt++] = ' ';
		spell(m[i][1], strlen(m[i][1]), v, &vt);
		v[vt++] = '\n';
		v[vt] = '\0';
	}
	if (n == 0)
		at -= 2; /* the last ", " */
	sprintf(e + at, "}\n");
	*enc = e;
	*vocab = v;
}

static struct rt_bpe *tiny(void)
{
	const char *enc, *vocab;
	struct rt_bpe *b = NULL;
	struct dt_err err = { 0 };

	make_files(merges, N_MERGES, &enc, &vocab);
	if (rt_bpe_load_mem(&b, enc, strlen(enc), "encoder.json", vocab, strlen(vocab), "vocab.bpe", &err))
		fail_msg("%s", err.msg);
	assert_int_equal(rt_bpe_vocab(b), 256 + N_MERGES);
	return b;
}

/* The id of merge result s (raw bytes), by the construction above. */
static int32_t id_of(const char *s)
{
	char word[64];
	int i;

	if (strlen(s) == 1)
		return (uint8_t)s[0];
	for (i = 0; i < N_MERGES; i++) {
		snprintf(word, sizeof(word), "%s%s", merges[i][0], merges[i][1]);
		if (!strcmp(word, s))
			return 256 + i;
	}
	fail_msg("no token \"%s\"", s);
	return -1;
}

/* --- the alphabet --- */

static void test_alphabet(void **state)
{
	uint32_t seen[512] = { 0 };
	int b;

	(void)state;
	assert_int_equal(rt_bpe_byte_char('!'), '!');
	assert_int_equal(rt_bpe_byte_char('~'), '~');
	assert_int_equal(rt_bpe_byte_char(0), 0x100);
	assert_int_equal(rt_bpe_byte_char('\n'), 0x10a); /* GPT-2's "Ċ" */
	assert_int_equal(rt_bpe_byte_char(' '), 0x120);  /* "Ġ" */
	assert_int_equal(rt_bpe_byte_char(127), 0x121);
	assert_int_equal(rt_bpe_byte_char(160), 0x142);
	assert_int_equal(rt_bpe_byte_char(173), 0x143);  /* soft hyphen: "Ń" */
	assert_int_equal(rt_bpe_byte_char(174), 174);
	for (b = 0; b < 256; b++) {
		uint32_t c = rt_bpe_byte_char((uint8_t)b);

		assert_true(c < 256 + 68);
		assert_int_equal(seen[c]++, 0);
	}
}

/* --- the pre-tokenizer --- */

/* s cut into pre-tokens by how, joined by '|', equals want. */
static void split_as_is(enum rt_bpe_pretok how, const char *s, const char *want)
{
	char got[512];
	size_t n = strlen(s), at = 0, k, g = 0;

	while (at < n) {
		k = rt_bpe_split_as(how, (const uint8_t *)s + at, n - at);
		assert_true(k >= 1 && k <= n - at);
		if (at)
			got[g++] = '|';
		memcpy(got + g, s + at, k);
		g += k;
		at += k;
	}
	got[g] = '\0';
	if (strcmp(got, want))
		fail_msg("split of \"%s\": got \"%s\", want \"%s\"", s, got, want);
}

static void split_is(const char *s, const char *want)
{
	split_as_is(RT_PRETOK_GPT2, s, want);
}

static void test_split(void **state)
{
	(void)state;
	split_is("Hello world", "Hello| world");
	split_is("I'm don't we'll they've you're he'd it's", "I|'m| don|'t| we|'ll| they|'ve| you|'re| he|'d| it|'s");
	split_is("'S 'x ''s", "'|S| '|x| ''|s");
	split_is("a  b", "a| | b");
	split_is("a   \n\n b", "a|   \n\n| b");
	split_is("x \n", "x| \n");
	split_is("a  ", "a|  ");
	split_is(" ", " ");
	split_is("x\t y", "x|\t| y");
	split_is("x\ty", "x|\t|y");
	split_is("a\r\nb\r\n", "a|\r|\n|b|\r\n"); /* "\r" then "\n": \s+(?!\S) leaves one */
	split_is("\n\nHi", "\n|\n|Hi");
	split_is("abc123 456 7x", "abc|123| 456| 7|x");
	split_is("hi!!! ?? x.", "hi|!!!| ??| x|.");
	split_is("caf\xc3\xa9 na\xc3\xafve", "caf\xc3\xa9| na\xc3\xafve");
	/* 日本語 テキスト: Lo and Lm letters */
	split_is("\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88",
		 "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e| \xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88");
	/* Arabic-Indic digits (Nd), Roman numeral twelve (Nl), one half (No) */
	split_is("\xd9\xa1\xd9\xa2x \xe2\x85\xab\xc2\xbd", "\xd9\xa1\xd9\xa2|x| \xe2\x85\xab\xc2\xbd");
	/* an emoji with a skin tone (So, Sk) and '!' are one run of "other" */
	split_is("hi \xf0\x9f\x91\x8b\xf0\x9f\x8f\xbd!", "hi| \xf0\x9f\x91\x8b\xf0\x9f\x8f\xbd!");
	/* no-break space is \s; U+001C is not (Python's regex, unlike str.isspace) */
	split_is("a\xc2\xa0" "b", "a|\xc2\xa0|b");
	split_is("a\x1c" "b", "a|\x1c|b");
	split_is("a \x1c", "a| \x1c");
	/* invalid UTF-8: each bad byte is a character of the "other" class */
	split_is("a\xff\xfe" "b", "a|\xff\xfe|b");
	split_is(" \xff" "z", " \xff|z");
	split_is("\xe2\x82z", "\xe2\x82|z");
	split_is("\xc0\xaf\xed\xa0\x80", "\xc0\xaf\xed\xa0\x80"); /* overlong, surrogate */
	split_is("x\xc3", "x|\xc3");
	assert_true(rt_bpe_is_letter(0x4e00) && rt_bpe_is_letter('Z') && !rt_bpe_is_letter('1'));
	assert_true(rt_bpe_is_number(0x661) && rt_bpe_is_number(0x216b) && !rt_bpe_is_number('a'));
	assert_true(rt_bpe_is_space(0x3000) && rt_bpe_is_space(0x85) && !rt_bpe_is_space(0x1c));
}

/* Llama 3's and Qwen2's patterns, SmolLM's digits (pretok.c); the ids of
 * whole tokenizers against the `tokenizers` library's are
 * tests/integration/hf_tokenizer.sh's */
static void test_split_families(void **state)
{
	(void)state;
	/* contractions in either case; a long s is an s */
	split_as_is(RT_PRETOK_LLAMA3, "IT'S we'Ll it'\xc5\xbfx", "IT|'S| we|'Ll| it|'\xc5\xbf|x");
	/* digits in threes (Qwen2: one by one); a letter run takes one character before it */
	split_as_is(RT_PRETOK_LLAMA3, "1234567 (ab", "123|456|7| (|ab");
	split_as_is(RT_PRETOK_QWEN2, "2024x", "2|0|2|4|x");
	split_as_is(RT_PRETOK_LLAMA3, "\tword 'x", "\tword| '|x");
	/* spaces up to the last newline; a newline never starts a letter run */
	split_as_is(RT_PRETOK_LLAMA3, "a  \n \n\n  b", "a|  \n \n\n| | b");
	split_as_is(RT_PRETOK_LLAMA3, "x\r\n\r\ny", "x|\r\n\r\n|y");
	split_as_is(RT_PRETOK_LLAMA3, "ok!!\n\nz", "ok|!!\n\n|z");
	/* SmolLM: every digit alone, GPT-2's pattern between */
	split_as_is(RT_PRETOK_DIGITS_GPT2, "ab 12 x3", "ab| |1|2| x|3");
}

/* NFC's quick check (rt_bpe_nfc_prefix): where a text stops being surely
 * in NFC */
static void test_nfc(void **state)
{
	const char *ok[] = { "plain ascii", "caf\xc3\xa9", "\xd7\xa9\xd6\xb8\xd7\x9c", "\xff\xfe bytes" };
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		assert_int_equal(rt_bpe_nfc_prefix((const uint8_t *)ok[i], strlen(ok[i])), strlen(ok[i]));
	/* e + combining acute: NFC composes it */
	assert_int_equal(rt_bpe_nfc_prefix((const uint8_t *)"cafe\xcc\x81", 6), 4);
	/* Hebrew points out of canonical order: sheva (class 10) after hataf segol (11) */
	assert_int_equal(rt_bpe_nfc_prefix((const uint8_t *)"\xd7\x90\xd6\xb1\xd6\xb0", 6), 4);
	/* the Angstrom sign: NFC maps it to another character */
	assert_int_equal(rt_bpe_nfc_prefix((const uint8_t *)"x\xe2\x84\xab", 4), 1);
	assert_int_equal(rt_bpe_combining_class(0x301), 230);
	assert_int_equal(rt_bpe_combining_class('a'), 0);
}

/* --- merges --- */

/* s encodes to the tokens want [n] (raw bytes each). */
static void encodes_to(struct rt_bpe *b, const char *s, const char *const *want, size_t n)
{
	int32_t ids[256];
	size_t got = 0, i;
	struct dt_err err = { 0 };

	assert_int_equal(rt_bpe_encode(b, s, strlen(s), ids, &got, &err), 0);
	if (got != n)
		fail_msg("\"%s\": %zu tokens, want %zu", s, got, n);
	for (i = 0; i < n; i++)
		if (ids[i] != id_of(want[i]))
			fail_msg("\"%s\": token %zu is %d, want %d (\"%s\")", s, i, (int)ids[i],
				 (int)id_of(want[i]), want[i]);
}

#define ENCODES(b, s, ...)                                                                \
	do {                                                                              \
		const char *const w_[] = { __VA_ARGS__ };                                 \
		encodes_to(b, s, w_, sizeof(w_) / sizeof(w_[0]));                         \
	} while (0)

static void test_merges(void **state)
{
	struct rt_bpe *b = tiny();
	int pass;

	(void)state;
	for (pass = 0; pass < 2; pass++) { /* the second from the cache */
		ENCODES(b, "hello", "hello");
		ENCODES(b, " hello world", " ", "hello", " wor", "l", "d");
		ENCODES(b, "aaaaa", "aa", "aa", "a");
		ENCODES(b, "xyz", "x", "yz"); /* "y z" ranks before "x y" */
		ENCODES(b, "xy", "xy");
		/* every "p q" is merged before "pq p" that the first makes */
		ENCODES(b, "pqpq", "pq", "pq");
		ENCODES(b, "pqp", "pqp");
		ENCODES(b, "\n\n\n x", "\n\n", "\n", " ", "x");
		ENCODES(b, "a    b", "a", "  ", " ", " ", "b");
		ENCODES(b, "1212", "12", "12");
	}
	rt_bpe_free(b);
}

/* --- round trips --- */

static void round_trip(struct rt_bpe *b, const char *s, size_t n)
{
	int32_t *ids = malloc((n ? n : 1) * sizeof(*ids));
	size_t k = 0, len = 0;
	char *back = NULL;
	struct dt_err err = { 0 };

	assert_non_null(ids);
	assert_int_equal(rt_bpe_encode(b, s, n, ids, &k, &err), 0);
	assert_true(k <= n);
	assert_int_equal(rt_bpe_decode(b, ids, k, &back, &len, &err), 0);
	assert_int_equal(len, n);
	assert_memory_equal(back, s, n);
	free(back);
	free(ids);
}

static void test_round_trip(void **state)
{
	static const char *const texts[] = {
		"", "hello world", " \n\n\t  \r\n", "don't 'S x''s", "\xff\xfe\xc3",
		"caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x91\x8b\xf0\x9f\x8f\xbd 12 \xd9\xa1\xd9\xa2",
	};
	struct rt_bpe *b = tiny();
	char buf[4096];
	unsigned seed = 1;
	size_t i, j;

	(void)state;
	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
		round_trip(b, texts[i], strlen(texts[i]));
	for (i = 0; i < 200; i++) { /* random bytes, leaning to the tricky ones */
		size_t n = (size_t)(rand_r(&seed) % (int)sizeof(buf));

		for (j = 0; j < n; j++) {
			static const char pick[] = "aahelloxyzpq12 \n\t'\xc3\xa9\xff";

			buf[j] = rand_r(&seed) % 3 ? pick[rand_r(&seed) % (int)(sizeof(pick) - 1)]
						   : (char)rand_r(&seed);
		}
		round_trip(b, buf, n);
	}
	memset(buf, 'a', sizeof(buf)); /* one long pre-token: the heap, not the cache */
	round_trip(b, buf, sizeof(buf));
	rt_bpe_free(b);
}

/* --- token streams --- */

static void test_token_file(void **state)
{
	struct rt_bpe *b = tiny(), *back = NULL;
	struct rt_tokens t;
	struct dt_err err = { 0 };
	const char *text = " hello world, hello pq", *path;
	int32_t ids[64], read_ids[64];
	size_t n = 0;
	char *p = NULL;

	(void)state;
	assert_true(asprintf(&p, "%s/bpe.h5", tu_scratch()) > 0);
	assert_int_equal(rt_bpe_encode(b, text, strlen(text), ids, &n, &err), 0);
	if (rt_tokens_write_bpe(p, ids, (int64_t)n, b, "test", &err))
		fail_msg("%s", err.msg);
	assert_int_equal(rt_tokens_open(&t, p, &err), 0);
	assert_string_equal(t.tokenizer, RT_BPE_NAME);
	assert_int_equal(t.vocab, rt_bpe_vocab(b));
	assert_false(t.byte_level);
	assert_int_equal(rt_tokens_read(&t, 0, (int64_t)n, read_ids, &err), 0);
	assert_memory_equal(read_ids, ids, n * sizeof(*ids));
	rt_tokens_close(&t);
	if (rt_bpe_load_tokens(&back, p, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(rt_bpe_vocab(back), rt_bpe_vocab(b));
	round_trip(back, text, strlen(text));
	rt_bpe_free(back);
	/* a byte-level stream records no tokenizer */
	path = tu_write("not.h5", "x");
	assert_int_equal(rt_tokens_write(p, ids, (int64_t)n, 400, false, "plain", &err), 0);
	assert_int_equal(rt_bpe_load_tokens(&back, p, &err), -ENOENT);
	assert_true(tu_has(&err, "records no tokenizer"));
	assert_null(back);
	assert_int_equal(rt_bpe_load_tokens(&back, path, &err), -EINVAL);
	free(p);
	rt_bpe_free(b);
}

/* --- refusals --- */

/* Loading enc and vocab fails with rc and a message holding want. */
static void refused(const char *enc, const char *vocab, int rc, const char *want)
{
	struct rt_bpe *b = (struct rt_bpe *)&b;
	struct dt_err err = { 0 };

	assert_int_equal(rt_bpe_load_mem(&b, enc, strlen(enc), "enc.json", vocab, strlen(vocab),
					 "merges.bpe", &err), rc);
	assert_null(b);
	assert_true(tu_has(&err, want));
}

/* The tiny encoder with from replaced by to (once). */
static const char *edited(const char *enc, const char *from, const char *to)
{
	static char out[65536];
	const char *at = strstr(enc, from);

	assert_non_null(at);
	snprintf(out, sizeof(out), "%.*s%s%s", (int)(at - enc), enc, to, at + strlen(from));
	return out;
}

static void test_refusals(void **state)
{
	static const char *const bad_line[][2] = { { "h", "e" } };
	const char *enc, *vocab, *enc1, *vocab1;
	struct rt_bpe *b = tiny(), *none = NULL;
	struct dt_err err = { 0 };
	int32_t ids[2] = { 0, 0 };
	char *out = NULL;
	size_t len = 0;

	(void)state;
	make_files(merges, N_MERGES, &enc, &vocab);
	refused("{\"a\": 1,}", vocab, -EINVAL, "enc.json: line 1, column");
	refused("[1, 2]", vocab, -EINVAL, "enc.json: not a JSON object of token -> id");
	refused("{\"a\": 0}", vocab, -EINVAL, "enc.json: 1 tokens; a byte-level BPE has 256");
	refused(edited(enc, "\"!\": 33", "\"!\": \"33\""), vocab, -EINVAL,
		"token \"!\": the id must be an integer (got a string)");
	refused(edited(enc, "\"!\": 33", "\"!\": 99999"), vocab, -EINVAL,
		"enc.json: token \"!\": id 99999 is outside [0, 271)");
	refused(edited(enc, "\"!\": 33", "\"!\": 34"), vocab, -EINVAL, "have the same id 34");
	refused(edited(enc, "\"!\": 33", "\"\xe4\xb8\x80\": 33"), vocab, -EINVAL,
		"U+4E00 is not a character of GPT-2's byte alphabet");
	refused(edited(enc, "\"!\": 33", "\"!!\": 33"), vocab, -EINVAL,
		"enc.json: no token for byte 0x21");
	make_files(bad_line, 1, &enc1, &vocab1);
	refused(enc1, "#version: 0.2\nh e x\n", -EINVAL,
		"merges.bpe: line 2: a merge is two symbols separated by one space (got \"h e x\")");
	refused(enc1, "#version: 0.2\nhe\n", -EINVAL, "merges.bpe: line 2: a merge is two symbols");
	refused(enc1, "#version: 0.2\n\nh e\n", -EINVAL, "line 2: a merge is two symbols separated by one space (got \"\")");
	refused(enc1, "#version: 0.2\nh e\nh e\n", -EINVAL, "merges.bpe: line 3: merge \"h e\" repeats line 2");
	refused(enc1, "#version: 0.2\nh e\nhe q\n", -EINVAL, "merges.bpe: line 3: merge \"he q\": its result \"heq\" is not a token of the encoder");
	refused(enc1, "#version: 0.2\nh zz\n", -EINVAL, "merges.bpe: line 2: merge \"h zz\": \"zz\" is not a token of the encoder");
	refused(enc1, "h e\n", -EINVAL, "merges.bpe: line 1: must be \"#version: 0.2\"");
	assert_int_equal(rt_bpe_load_mem(&none, enc1, strlen(enc1), "e", vocab1, strlen(vocab1), "v",
					 &err), 0);
	rt_bpe_free(none);
	none = NULL;
	ids[1] = -1;
	assert_int_equal(rt_bpe_decode(b, ids, 2, &out, &len, &err), -EINVAL);
	assert_true(tu_has(&err, "token 1 is -1, outside the vocabulary [0, 271)"));
	ids[1] = 271;
	assert_int_equal(rt_bpe_decode(b, ids, 2, &out, &len, &err), -EINVAL);
	assert_null(out);
	assert_int_equal(rt_bpe_load(&none, "/nonexistent/encoder.json", "x", &err), -ENOENT);
	assert_true(tu_has(&err, "/nonexistent/encoder.json: cannot read"));
	rt_bpe_free(b);
}

/* --- main --- */

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_alphabet),
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_split_families),
		cmocka_unit_test(test_nfc),
		cmocka_unit_test(test_merges),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_token_file),
		cmocka_unit_test(test_refusals),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	tu_cleanup();
	return rc;
}
