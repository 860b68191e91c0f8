/*
 * finite.c - features that are not numbers: a NaN or an infinity in a data
 * set is named at its row and column before it reaches the model, where it
 * would surface steps later as a "diverged" loss blamed on the learning
 * rate (data.h, rt_data_check_finite).
 *
 * The scan is a subtraction and a compare per value, vectorised (an OR of
 * compares needs no reassociation): x - x is 0 for every finite x and NaN
 * for a NaN or an infinity, so a block's test says whether to look closer;
 * only then are its values walked one by one.
 */
#include "runtime/data/data.h"

#include <errno.h>
#include <math.h>

/* Values summed per probe: a block of a few rows' worth, in cache. */
#define PROBE 4096

/* Whether x[0..n) holds a value that is not finite. */
static bool any_not_finite(const float *x, size_t n)
{
	int bad = 0;
	size_t i;

	for (i = 0; i < n; i++)
		bad |= !(x[i] - x[i] == 0.0f);
	return bad != 0;
}

int rt_data_check_finite(const struct rt_data *d, const int64_t *idx, int64_t first,
			  int64_t rows, const float *x, bool hint, struct dt_err *err)
{
	size_t f = (size_t)d->features, total = (size_t)rows * f, at, i;

	for (at = 0; at < total; at += PROBE) {
		size_t n = total - at < PROBE ? total - at : PROBE;

		if (!any_not_finite(x + at, n))
			continue;
		for (i = at; i < at + n; i++) {
			size_t r = i / f;
			long long row;

			if (isfinite(x[i]))
				continue;
			row = idx ? (long long)idx[r] : (long long)(first + (int64_t)r);
			dt_err_add(err, "%s: /features: row %lld, column %zu is %s: a data set holds finite values only",
				   d->path, row, i % f, isnan(x[i]) ? "NaN" : "infinite");
			if (hint)
				dt_err_add(err, "hint: dtrain-data info %s checks every value of the file; fix or drop the row",
					   d->path);
			return -EINVAL;
		}
	}
	return 0;
}
