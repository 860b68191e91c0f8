/*
 * pretok.c - the pre-tokenizers of byte-level BPE (bpe.h): where a text is
 * cut into pre-tokens before any merge, as the regular expression of each
 * tokenizer family has it, matched by hand on UTF-8; and the check that a
 * text is in NFC, for a tokenizer that normalizes to it.
 *
 * Every pattern below matches at the first character of any text (its last
 * alternatives take a run of spaces, or one character of any class), so
 * the first pre-token of s is the first match at s itself, and a text is
 * cut by taking first pre-tokens one after the other.
 *
 * Sections: characters and their classes, GPT-2's pattern, Llama 3's and
 * Qwen2's pattern, digits alone, NFC, the dispatch.
 */
#include "runtime/data/bpe.h"

#include "runtime/data/internal.h"

/* --- characters and their classes --- */

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

size_t rt__bpe_utf8(const uint8_t *s, size_t n, uint32_t *cp)
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

/* The class of the character at s [n >= 1], its length into *len. A byte
 * that starts no valid UTF-8 sequence is a character of class C_OTHER. */
static enum cls cls_at(const uint8_t *s, size_t n, size_t *len)
{
	uint32_t cp;

	*len = rt__bpe_utf8(s, n, &cp);
	if (cp == UINT32_MAX)
		return C_OTHER;
	if (rt_bpe_is_letter(cp))
		return C_LETTER;
	if (rt_bpe_is_number(cp))
		return C_NUMBER;
	return rt_bpe_is_space(cp) ? C_SPACE : C_OTHER;
}

/* 's 't 're 've 'm 'll 'd at s [n] (s[0] is '\''), in either case when
 * fold (Unicode's case folding: U+017F, long s, is an s): its length, or
 * 0. */
static size_t contraction(const uint8_t *s, size_t n, bool fold)
{
	uint8_t a = n >= 2 ? s[1] : 0, b = n >= 3 ? s[2] : 0;

	if (fold && a == 0xc5 && b == 0xbf)
		return 3;
	if (fold) {
		a = (uint8_t)(a >= 'A' && a <= 'Z' ? a + 32 : a);
		b = (uint8_t)(b >= 'A' && b <= 'Z' ? b + 32 : b);
	}
	if (a == 's' || a == 't' || a == 'm' || a == 'd')
		return 2;
	if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
		return 3;
	return 0;
}

/* The end of the run of characters of class c that starts at s + at,
 * after at most max characters. */
static size_t run_max(const uint8_t *s, size_t n, size_t at, enum cls c, size_t max)
{
	size_t len;

	while (max-- && at < n && cls_at(s + at, n - at, &len) == c)
		at += len;
	return at;
}

static size_t run(const uint8_t *s, size_t n, size_t at, enum cls c)
{
	return run_max(s, n, at, c, SIZE_MAX);
}

/* '\s+(?!\S)|\s+' at s (a space): the run but its last character, when a
 * non-space follows and that leaves one; else the whole run. */
static size_t spaces(const uint8_t *s, size_t n)
{
	size_t len, last = 0, at = 0;

	while (at < n && cls_at(s + at, n - at, &len) == C_SPACE) {
		last = len;
		at += len;
	}
	return at < n && at > last ? at - last : at;
}

/* --- GPT-2's pattern --- */

size_t rt_bpe_split(const uint8_t *s, size_t n)
{
	size_t len, k;
	enum cls c = cls_at(s, n, &len);

	if (s[0] == '\'' && (k = contraction(s, n, false)))
		return k;
	if (s[0] == ' ' && n > 1) {
		enum cls next = cls_at(s + 1, n - 1, &k);

		if (next != C_SPACE) /* ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+' */
			return run(s, n, 1, next);
	}
	return c != C_SPACE ? run(s, n, 0, c) : spaces(s, n);
}

/* --- Llama 3's and Qwen2's pattern --- */

static bool newline(uint8_t c)
{
	return c == '\r' || c == '\n';
}

/* The end of a run of \r and \n from at. */
static size_t newlines(const uint8_t *s, size_t n, size_t at)
{
	while (at < n && newline(s[at]))
		at++;
	return at;
}

/* '\s*[\r\n]+' at s (a space): up to and with the last \r or \n of the
 * run of spaces (greedy \s* gives back until [\r\n]+ matches one), or 0
 * when the run has none. */
static size_t spaces_to_newline(const uint8_t *s, size_t n)
{
	size_t len, at = 0, end = 0;

	while (at < n && cls_at(s + at, n - at, &len) == C_SPACE) {
		if (newline(s[at]))
			end = at + 1;
		at += len;
	}
	return end;
}

/*   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}|
 *    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * with D digits at most: 3 (Llama 3), 1 (Qwen2). */
static size_t split_llama3(const uint8_t *s, size_t n, size_t digits)
{
	size_t len, k;
	enum cls c = cls_at(s, n, &len), next = C_SPACE;

	if (s[0] == '\'' && (k = contraction(s, n, true)))
		return k;
	if (len < n)
		next = cls_at(s + len, n - len, &k);
	if (c != C_LETTER && c != C_NUMBER && !newline(s[0]) && next == C_LETTER)
		return run(s, n, len, C_LETTER); /* the optional character, then letters */
	if (c == C_LETTER)
		return run(s, n, 0, C_LETTER);
	if (c == C_NUMBER)
		return run_max(s, n, 0, C_NUMBER, digits);
	if (s[0] == ' ' && next == C_OTHER) /* ' ?[^\s\p{L}\p{N}]+[\r\n]*' */
		return newlines(s, n, run(s, n, 1, C_OTHER));
	if (c == C_OTHER)
		return newlines(s, n, run(s, n, 0, C_OTHER));
	k = spaces_to_newline(s, n);
	return k ? k : spaces(s, n);
}

/* --- digits alone --- */

/* Hugging Face's Digits(individual_digits) before GPT-2's pattern
 * (SmolLM's, StarCoder's): every \p{N} a pre-token of its own, the text
 * between two cut by GPT-2's pattern. */
static size_t split_digits(const uint8_t *s, size_t n)
{
	size_t len, at = 0;

	if (cls_at(s, n, &len) == C_NUMBER)
		return len;
	while (at < n && cls_at(s + at, n - at, &len) != C_NUMBER)
		at += len;
	return rt_bpe_split(s, at);
}

/* --- NFC --- */

size_t rt_bpe_nfc_prefix(const uint8_t *s, size_t n)
{
	size_t at = 0, len;
	int last = 0, k;
	uint32_t cp;

	while (at < n) {
		if (s[at] < 0x80) { /* ASCII: class 0, always NFC */
			last = 0;
			at++;
			continue;
		}
		len = rt__bpe_utf8(s + at, n - at, &cp);
		k = cp == UINT32_MAX ? 0 : rt_bpe_combining_class(cp);
		if (cp != UINT32_MAX && (rt_bpe_nfc_unsure(cp) || (k && last > k)))
			return at;
		last = k;
		at += len;
	}
	return n;
}

/* --- the dispatch --- */

size_t rt_bpe_split_as(enum rt_bpe_pretok how, const uint8_t *s, size_t n)
{
	switch (how) {
	case RT_PRETOK_LLAMA3:
		return split_llama3(s, n, 3);
	case RT_PRETOK_QWEN2:
		return split_llama3(s, n, 1);
	case RT_PRETOK_DIGITS_GPT2:
		return split_digits(s, n);
	case RT_PRETOK_GPT2:
	default:
		return rt_bpe_split(s, n);
	}
}
