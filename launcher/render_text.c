/*
 * render_text.c - writing the batch script's text, for render.c and
 * render_nodes.c: printf-style lines, and the site's srun options as
 * quoted words.
 */
#include "launcher/render.h"
#include "site/site.h"
#include "base/str.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void launch__render_put(struct render *r, const char *fmt, ...)
{
	char *line = NULL;
	va_list ap;
	int n;

	if (r->rc)
		return;
	va_start(ap, fmt);
	n = vasprintf(&line, fmt, ap);
	va_end(ap);
	if (n < 0) {
		r->rc = -ENOMEM;
		return;
	}
	r->rc = dt_buf_add(r->b, line, (size_t)n);
	free(line);
}

void launch__render_srun_extra(struct render *r)
{
	size_t i;

	for (i = 0; i < r->site->srun_extra.n; i++) {
		if (!r->rc)
			r->rc = dt_buf_puts(r->b, " ");
		if (!r->rc)
			r->rc = dt_shell_quote(r->b, r->site->srun_extra.v[i]);
	}
}
