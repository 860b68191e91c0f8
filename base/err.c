/*
 * err.c - error reports (err.h).
 */
#include "base/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int dt_err_addv(struct dt_err *e, const char *fmt, va_list ap)
{
	size_t room;
	int n;

	e->count++;
	if (e->len + 4 >= sizeof(e->msg))
		return -EINVAL;
	if (e->len > 0)
		e->msg[e->len++] = '\n';
	room = sizeof(e->msg) - e->len;
	n = vsnprintf(e->msg + e->len, room, fmt, ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= room) {
		/* Cut: end the report with "..." so nobody mistakes it for whole. */
		e->len = sizeof(e->msg) - 1;
		memcpy(e->msg + e->len - 3, "...", 3);
	} else {
		e->len += (size_t)n;
	}
	e->msg[e->len] = '\0';
	return -EINVAL;
}

int dt_err_add(struct dt_err *e, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = dt_err_addv(e, fmt, ap);
	va_end(ap);
	return rc;
}

void dt_err_clear(struct dt_err *e)
{
	e->msg[0] = '\0';
	e->len = 0;
	e->count = 0;
}
