/*
 * buf.h - a growable, NUL-terminated string buffer.
 */
#ifndef DTRAIN_BASE_BUF_H
#define DTRAIN_BASE_BUF_H

#include <stddef.h>

/* --- growable string buffer (caller frees with dt_buf_free) --- */
struct dt_buf {
	char *p;    /* NUL-terminated, NULL until the first append */
	size_t len;
	size_t cap;
};

void dt_buf_free(struct dt_buf *b);
/* Appends; returns 0 or -ENOMEM. */
int dt_buf_add(struct dt_buf *b, const char *s, size_t n);
int dt_buf_puts(struct dt_buf *b, const char *s);
int dt_buf_printf(struct dt_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The text ("" when empty); valid until the next append. */
const char *dt_buf_str(const struct dt_buf *b);

#endif
