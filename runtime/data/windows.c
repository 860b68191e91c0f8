/*
 * windows.c - a token stream as a data set (data.h, rt_data_open_windows):
 * sample k is window k of T + 1 tokens (tokens.h, rt_tokens_windows); its
 * features the first T ids as floats, its labels the T ids after them.
 */
#include "runtime/data/data.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/data/internal.h"
#include "runtime/data/tokens.h"

int rt_data_open_windows(struct rt_data *d, const char *path, int context, struct dt_err *err)
{
	int rc;

	memset(d, 0, sizeof(*d));
	d->tok = calloc(1, sizeof(*d->tok));
	d->path = strdup(path);
	if (!d->tok || !d->path) {
		rt__data_windows_close(d);
		return dt_err_add(err, "%s: out of memory opening a token stream", path), -ENOMEM;
	}
	rc = rt_tokens_open(d->tok, path, err);
	if (rc) {
		rt__data_windows_close(d);
		return rc;
	}
	d->n = rt_tokens_windows(d->tok, context);
	if (d->n < 1) {
		dt_err_add(err, "%s: %lld tokens make no window of model.context + 1 = %d tokens (hint: a longer text, or a smaller model.context)",
			   path, (long long)d->tok->n, context + 1);
		rt__data_windows_close(d);
		return -EINVAL;
	}
	d->features = context;
	d->labels = context;
	d->classes = d->tok->vocab;
	d->byte_level = d->tok->byte_level;
	d->tok_bytes = d->tok->n * (int64_t)sizeof(int32_t);
	d->source = strdup(d->tok->source);
	d->mean = 0, d->std = 1;
	return 0;
}

void rt__data_windows_close(struct rt_data *d)
{
	if (d->tok)
		rt_tokens_close(d->tok);
	free(d->tok);
	free(d->tok_all);
	free(d->source);
	free(d->path);
	memset(d, 0, sizeof(*d));
}

int rt__data_windows_load(struct rt_data *d, struct dt_err *err)
{
	int rc;

	if (d->tok_all)
		return 0;
	d->tok_all = malloc((size_t)d->tok_bytes);
	if (!d->tok_all)
		return dt_err_add(err, "%s: out of memory for its %lld tokens", d->path,
				  (long long)d->tok->n), -ENOMEM;
	rc = rt_tokens_read(d->tok, 0, d->tok->n, d->tok_all, err); /* every id checked */
	if (rc) {
		free(d->tok_all);
		d->tok_all = NULL;
	}
	return rc;
}

/* window w [T + 1] into x [T] (ids as floats) and y [T] (the next ids) */
static void split_window(const int32_t *w, int T, float *x, int32_t *y)
{
	int j;

	for (j = 0; x && j < T; j++)
		x[j] = (float)w[j];
	if (y)
		memcpy(y, w + 1, (size_t)T * sizeof(*y));
}

int rt__data_windows_read(struct rt_data *d, const int64_t *idx, int n_idx, float *x, int32_t *y,
			  struct dt_err *err)
{
	int T = (int)d->features, i, rc = 0;
	int32_t *w = NULL;

	for (i = 0; i < n_idx; i++)
		if (idx[i] < 0 || idx[i] >= d->n)
			return dt_err_add(err, "%s: window %lld does not exist (%lld windows of %d + 1 tokens)",
					  d->path, (long long)idx[i], (long long)d->n, T);
	if (!d->tok_all) {
		w = malloc((size_t)n_idx * ((size_t)T + 1) * sizeof(*w));
		if (!w)
			return dt_err_add(err, "%s: out of memory for %d windows", d->path, n_idx), -ENOMEM;
		rc = rt_tokens_read_windows(d->tok, T, idx, n_idx, w, err);
	}
	for (i = 0; !rc && i < n_idx; i++) {
		const int32_t *src = d->tok_all ? d->tok_all + idx[i] * T : w + (size_t)i * ((size_t)T + 1);

		split_window(src, T, x ? x + (size_t)i * (size_t)T : NULL,
			     y ? y + (size_t)i * (size_t)T : NULL);
	}
	free(w);
	return rc;
}
