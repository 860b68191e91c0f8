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
