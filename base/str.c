/*
 * str.c - strings: copies, edit distance, "did you mean", shell quoting (str.h).
 */
#include "base/str.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

char *dt_strdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

int dt_edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char row[65];
	size_t i, j;

	/* Hints only compare short keys; anything longer is "far". */
	if (la > 64 || lb > 64)
		return 255;
	for (j = 0; j <= lb; j++)
		row[j] = (unsigned char)j;
	for (i = 1; i <= la; i++) {
		unsigned char diag = row[0];

		row[0] = (unsigned char)i;
		for (j = 1; j <= lb; j++) {
			unsigned char up = row[j];
			unsigned best = diag + (a[i - 1] != b[j - 1]);

			if (up + 1u < best)
				best = up + 1u;
			if (row[j - 1] + 1u < best)
				best = row[j - 1] + 1u;
			row[j] = (unsigned char)(best > 255 ? 255 : best);
			diag = up;
		}
	}
	return row[lb];
}

const char *dt_closest_word(const char *list, char sep, const char *s, int max_d, char *buf,
			    size_t size)
{
	const char *p = list, *best = NULL;
	size_t n;
	int d;

	if (!sep)
		return NULL;
	while (*p) {
		n = strcspn(p, (char[]){ sep, '\0' });
		if (n < size) {
			memcpy(buf, p, n);
			buf[n] = '\0';
			d = strcasecmp(buf, s) ? dt_edit_distance(buf, s) : -1;
			if (d < max_d) {
				max_d = d;
				best = p;
			}
		}
		p += n + (p[n] == sep);
	}
	if (!best)
		return NULL;
	n = strcspn(best, (char[]){ sep, '\0' });
	memcpy(buf, best, n);
	buf[n] = '\0';
	return buf;
}

int dt_shell_quote(struct dt_buf *b, const char *s)
{
	int rc = dt_buf_puts(b, "'");

	for (; !rc && *s; s++) {
		if (*s == '\'')
			rc = dt_buf_puts(b, "'\\''");
		else
			rc = dt_buf_add(b, s, 1);
	}
	return rc ? rc : dt_buf_puts(b, "'");
}

/* Bytes of the printable UTF-8 character at p, or 0: a control character
 * (C0, DEL, the C1 range U+0080..U+009F), or no character (a stray or
 * overlong byte, a surrogate, past U+10FFFF) */
static size_t printable_len(const unsigned char *p)
{
	size_t n, i;

	if (p[0] >= 0x20 && p[0] < 0x7f)
		return 1;
	n = p[0] >= 0xc2 && p[0] <= 0xdf ? 2 : p[0] >= 0xe0 && p[0] <= 0xef ? 3 :
	    p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : 0;
	for (i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if ((p[0] == 0xc2 && p[1] < 0xa0) || (p[0] == 0xe0 && p[1] < 0xa0) ||
	    (p[0] == 0xed && p[1] > 0x9f) || (p[0] == 0xf0 && p[1] < 0x90) ||
	    (p[0] == 0xf4 && p[1] > 0x8f))
		return 0;
	return n;
}

const char *dt_shown(const char *s, struct dt_buf *b)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	int rc = 0;

	dt_buf_free(b);
	rc = dt_buf_puts(b, "");
	while (*p && !rc) {
		size_t n = printable_len(p);

		rc = n ? dt_buf_add(b, (const char *)p, n) : dt_buf_printf(b, "\\x%02x", *p);
		p += n ? n : 1;
	}
	return rc ? "" : dt_buf_str(b);
}
