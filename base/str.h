/*
 * str.h - strings: copies, "did you mean" hints, shell quoting, text made safe
 * for a terminal.
 */
#ifndef DTRAIN_BASE_STR_H
#define DTRAIN_BASE_STR_H

#include <stddef.h>

#include "base/buf.h"

/* --- strings --- */

/* strdup that treats NULL as NULL; returns NULL only when s is NULL or on ENOMEM. */
char *dt_strdup(const char *s);
/* Levenshtein distance, capped at 255 (for "did you mean" hints). */
int dt_edit_distance(const char *a, const char *b);
/* "Did you mean": the word of `list` (words separated by sep, as in
 * "relu|gelu" or "--site --set") closest to s, copied into buf; a word
 * equal to s but for case wins, else one fewer than max_d edits away.
 * Returns buf, or NULL when no word is close enough (or fits buf), or sep
 * is '\0'. */
const char *dt_closest_word(const char *list, char sep, const char *s, int max_d, char *buf,
			    size_t size);
/* Appends s to b as one POSIX shell word in single quotes ('it'\''s'). */
int dt_shell_quote(struct dt_buf *b, const char *s);
/* s as a terminal may show it (what a program read from a file): printable
 * UTF-8 kept, control characters (C0, DEL, C1) and bytes of no UTF-8
 * character shown as \xNN, so that no escape sequence reaches the
 * terminal. Returns the text in b (which it resets), valid until b
 * changes; "" when out of memory. NULL reads as "". */
const char *dt_shown(const char *s, struct dt_buf *b);

#endif
