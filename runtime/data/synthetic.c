/*
 * synthetic.c - a learnable synthetic classification set (data.h,
 * rt_data_make_synthetic): Gaussian classes around random centroids,
 * deterministic in (seed, stream), written through writer.c with the
 * accuracy of the nearest-centroid rule, about the best any model can do.
 *
 * Sections: scoring, the set.
 */
#include "runtime/data/data.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/rng.h"
#include "runtime/data/internal.h"

/* --- scoring --- */

/* The nearest-centroid rule is the Bayes rule here (equal priors, equal
 * isotropic noise); we score it on up to this many samples, and at most
 * about 1e9 multiply-adds. */
#define SYN_SCORE_SAMPLES 10000
#define SYN_SCORE_WORK 1000000000LL

/* The class whose centroid is nearest x: the Bayes rule, to score the set by. */
static int nearest(const float *c, int classes, int64_t features, const float *x)
{
	double best = INFINITY;
	int k, arg = 0;
	int64_t j;

	for (k = 0; k < classes; k++) {
		double d2 = 0;

		for (j = 0; j < features; j++) {
			double dv = (double)x[j] - c[(size_t)k * (size_t)features + (size_t)j];

			d2 += dv * dv;
		}
		if (d2 < best) {
			best = d2;
			arg = k;
		}
	}
	return arg;
}

/* Samples to score the nearest-centroid rule on: SYN_SCORE_SAMPLES, fewer
 * where classes x features would make that more than SYN_SCORE_WORK. */
static int64_t score_max(const struct rt_data_synthetic *p)
{
	int64_t max = SYN_SCORE_WORK / ((int64_t)p->classes * p->features);

	if (max > SYN_SCORE_SAMPLES)
		max = SYN_SCORE_SAMPLES;
	if (max < 1)
		max = 1;
	return max;
}

/* --- the set --- */

/* Refuses what the centroids could not hold (classes x features <= 1e8), and
 * the one stream whose samples would come from the centroids' stream + 1. */
static int check_params(const char *path, const struct rt_data_synthetic *p, struct dt_err *err)
{
	if (p->features < 1 || p->features > RT_DATA_MAX_FEATURES || p->classes < 2 ||
	    p->classes > RT_DATA_MAX_CLASSES || (int64_t)p->classes * p->features > 100000000LL)
		return dt_err_add(err, "%s: classes x features must be at most 1e8, with classes in "
				  "[2, %d] (got %d x %lld)", path, RT_DATA_MAX_CLASSES, p->classes,
				  (long long)p->features);
	if (p->stream == UINT64_MAX)
		return dt_err_add(err, "%s: stream must be below 2^64 - 1", path);
	return 0;
}

/* Centroids c [classes][features] ~ N(0, 8/F) from stream (seed, 0), whatever
 * the stream: the squared distance between two is about 2 F * 8/F = 16,
 * i.e. 4 noise standard deviations apart. */
static void centroids(const struct rt_data_synthetic *p, float *c)
{
	size_t j, f = (size_t)p->features;
	float scale = (float)sqrt(8.0 / (double)p->features);
	struct dt_rng r;

	dt_rng_seed(&r, p->seed, 0);
	for (j = 0; j < (size_t)p->classes * f; j++)
		c[j] = scale * dt_rng_normal(&r);
}

/* Draws the samples from stream (seed, 1 + stream), one after another, and
 * appends them to w a block x ([RT_DATA_CHUNK_ROWS][features]) at a time;
 * the nearest-centroid rule is scored on the first *scored, *right right. */
static int append_samples(struct rt_data_writer *w, const char *path,
			  const struct rt_data_synthetic *p, const float *c, float *x,
			  rt_data_progress_fn *progress, void *arg, int64_t *scored,
			  int64_t *right, struct dt_err *err)
{
	size_t j, f = (size_t)p->features;
	int64_t first, k, i, max = score_max(p), n = p->samples;
	int32_t y[RT_DATA_CHUNK_ROWS];
	struct dt_rng r;
	int rc = 0;

	dt_rng_seed(&r, p->seed, p->stream + 1);
	for (first = 0; !rc && first < n; first += k) {
		k = n - first < RT_DATA_CHUNK_ROWS ? n - first : RT_DATA_CHUNK_ROWS;
		for (i = 0; i < k; i++) {
			float *xi = x + (size_t)i * f;

			y[i] = (int32_t)dt_rng_below(&r, (uint64_t)p->classes);
			for (j = 0; j < f; j++)
				xi[j] = c[(size_t)y[i] * f + j] + dt_rng_normal(&r);
			if (*scored < max) {
				*right += nearest(c, p->classes, p->features, xi) == y[i];
				(*scored)++;
			}
		}
		rc = rt_data_append(w, x, y, k, err);
		if (!rc && progress && first + k < n)
			progress(arg, path, first + k, n);
	}
	return rc;
}

/* What makes the set reproducible and how learnable it is, as attributes of /. */
static int put_attrs(struct rt_data_writer *w, const struct rt_data_synthetic *p, int64_t scored,
		     int64_t right, struct dt_err *err)
{
	int rc;

	rc = rt_data_attr_int(w, "seed", (int64_t)p->seed, err);
	if (!rc)
		rc = rt_data_attr_int(w, "stream", (int64_t)p->stream, err);
	if (!rc)
		rc = rt_data_attr_num(w, "nearest_centroid_accuracy", (double)right / (double)scored,
				      err);
	if (!rc)
		rc = rt_data_attr_int(w, "nearest_centroid_samples", scored, err);
	return rc;
}

int rt_data_make_synthetic(const char *path, const struct rt_data_synthetic *p,
			   rt_data_progress_fn *progress, void *arg, struct dt_err *err)
{
	struct rt_data_meta m = { 0 };
	struct rt_data_writer w;
	size_t f = (size_t)p->features;
	float *c = NULL, *x = NULL;
	int64_t scored = 0, right = 0;
	char *source = NULL;
	int rc;

	rc = check_params(path, p, err);
	if (rc)
		return rc;
	m.n = p->samples;
	m.features = p->features;
	m.classes = p->classes;
	m.mean = 0;
	m.std = 1;
	m.normalisation = "none: stored as generated (centroid coordinates ~ N(0, 8/features), "
			  "plus N(0, 1) noise)";
	if (asprintf(&source, "synthetic: %d Gaussian classes in %lld dimensions (dtrain-data "
		     "synthetic --seed %" PRIu64 " --stream %" PRIu64 ")", p->classes,
		     (long long)p->features, p->seed, p->stream) < 0)
		return rt__data_oom(err, path);
	m.source = source;
	c = malloc((size_t)p->classes * f * sizeof(float));
	x = malloc(RT_DATA_CHUNK_ROWS * f * sizeof(float));
	if (!c || !x) {
		rc = rt__data_oom(err, path);
		goto out;
	}
	rc = rt_data_create(&w, path, &m, err);
	if (rc)
		goto out;
	centroids(p, c);
	rc = append_samples(&w, path, p, c, x, progress, arg, &scored, &right, err);
	if (!rc)
		rc = put_attrs(&w, p, scored, right, err);
	rc = rt_data_finish(&w, rc, err);
	if (!rc && progress)
		progress(arg, path, m.n, m.n);
out:
	free(x);
	free(c);
	free(source);
	return rc;
}
