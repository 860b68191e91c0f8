/*
 * test_data.c - data sets (runtime/data/data.h): rows written by the writer read
 * back exactly, in any order, on both read paths (direct and through HDF5)
 * and from memory; every kind of invalid file refused with an error naming
 * it; atomic writing; the synthetic set's determinism; Fashion-MNIST
 * conversion of small IDX fixtures made here, and their corruptions.
 *
 * Bad files are crafted with the HDF5 API (craft()), since the writer
 * refuses to make them.
 *
 * Sections: helpers, round trips, refusals, writing, synthetic,
 * Fashion-MNIST, main.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <hdf5.h>
#include <zlib.h>

#include "runtime/data/data.h"
#include "base/rng.h"
#include "tests/testutil.h"
#include "base/buf.h"

/* --- helpers --- */

static char *path_of(const char *name)
{
	char *p = NULL;

	assert_true(asprintf(&p, "%s/%s", tu_scratch(), name) > 0);
	return p;
}

/* Feature j of row i: distinct for every (i, j), exact in float32. */
static float value(int64_t i, int64_t j)
{
	return (float)i + (float)j / 1024.0f;
}

static int32_t label_of(int64_t i, int classes)
{
	return (int32_t)((i * 7 + 3) % classes);
}

/* A valid data set of n x f through the writer. */
static char *write_set(const char *name, int64_t n, int64_t f, int classes)
{
	struct rt_data_meta m = { n, f, classes, "test rows", 0.5, 2.0, "test: none" };
	struct dt_err err = { 0 };
	char *path = path_of(name);
	float *x = malloc((size_t)(n * f) * sizeof(float));
	int32_t *y = malloc((size_t)n * sizeof(int32_t));
	int64_t i, j;

	assert_non_null(x);
	assert_non_null(y);
	for (i = 0; i < n; i++) {
		for (j = 0; j < f; j++)
			x[i * f + j] = value(i, j);
		y[i] = label_of(i, classes);
	}
	if (rt_data_write(path, &m, x, y, &err))
		fail_msg("rt_data_write: %s", err.msg);
	free(y);
	free(x);
	return path;
}

static void open_ok(struct rt_data *d, const char *path)
{
	struct dt_err err = { 0 };

	if (rt_data_open(d, path, &err))
		fail_msg("rt_data_open: %s", err.msg);
}

/* Reads idx (x and y) and checks every value. */
static void check_rows(struct rt_data *d, const int64_t *idx, int k)
{
	struct dt_err err = { 0 };
	float *x = malloc((size_t)k * (size_t)d->features * sizeof(float) + 1);
	int32_t *y = malloc((size_t)k * sizeof(int32_t) + 1);
	int64_t j;
	int i;

	if (rt_data_read(d, idx, k, x, y, &err))
		fail_msg("rt_data_read: %s", err.msg);
	for (i = 0; i < k; i++) {
		for (j = 0; j < d->features; j++)
			if (x[(size_t)i * (size_t)d->features + (size_t)j] != value(idx[i], j))
				fail_msg("row %lld col %lld: got %g, want %g", (long long)idx[i],
					 (long long)j, (double)x[(size_t)i * (size_t)d->features + (size_t)j],
					 (double)value(idx[i], j));
		assert_int_equal(y[i], label_of(idx[i], d->classes));
	}
	/* x only, then y only */
	memset(y, 0x7f, (size_t)k * sizeof(int32_t));
	assert_int_equal(rt_data_read(d, idx, k, x, NULL, &err), 0);
	assert_int_equal(x[0], value(idx[0], 0));
	assert_int_equal(rt_data_read(d, idx, k, NULL, y, &err), 0);
	for (i = 0; i < k; i++)
		assert_int_equal(y[i], label_of(idx[i], d->classes));
	free(y);
	free(x);
}

/* The batches every round trip reads: random with repeats, sorted,
 * consecutive across chunk boundaries, the first and last rows. */
static void check_batches(struct rt_data *d)
{
	int64_t idx[300];
	struct dt_rng r;
	int i, k;

	dt_rng_seed(&r, 42, 0);
	for (k = 0; k < 20; k++) {
		int len = 1 + (int)dt_rng_below(&r, 300);

		for (i = 0; i < len; i++)
			idx[i] = (int64_t)dt_rng_below(&r, (uint64_t)d->n);
		check_rows(d, idx, len);
	}
	for (i = 0; i < 300 && i < d->n; i++)
		idx[i] = d->n > 1030 ? 900 + i : i; /* runs over the chunk at 1024 */
	check_rows(d, idx, i < 300 ? i : 300);
	idx[0] = d->n - 1;
	idx[1] = 0;
	idx[2] = d->n - 1;
	check_rows(d, idx, 3);
}

/* A file made with the HDF5 API, possibly invalid in one chosen way. */
struct craft {
	int64_t n, f, labels_n;
	int rank_x;             /* dimensions of /features (2) */
	hid_t xtype, ytype;     /* file types */
	int64_t chunk;          /* rows per chunk of /features; 0: contiguous */
	bool deflate;
	bool write;             /* write the data (else only declare it) */
	bool no_labels, no_features, no_mean;
	const char *format;     /* NULL: no format attribute */
	int version, classes;
	int64_t bad_row;        /* this row gets label `classes`; -1: none */
	double std;
};

static struct craft good(int64_t n, int64_t f)
{
	return (struct craft){ n, f, n, 2, H5T_IEEE_F32LE, H5T_STD_I32LE, 0, false, true, false,
			       false, false, RT_DATA_FORMAT, 1, 10, -1, 1.0 };
}

static void put_attr(hid_t obj, const char *name, hid_t type, const void *v)
{
	hid_t s = H5Screate(H5S_SCALAR), a = H5Acreate2(obj, name, type, s, H5P_DEFAULT, H5P_DEFAULT);

	assert_true(a >= 0);
	assert_true(H5Awrite(a, type == H5T_STD_I32LE ? H5T_NATIVE_INT32 :
				type == H5T_IEEE_F64LE ? H5T_NATIVE_DOUBLE : type, v) >= 0);
	H5Aclose(a);
	H5Sclose(s);
}

static void put_str(hid_t obj, const char *name, const char *v)
{
	hid_t t = H5Tcopy(H5T_C_S1);

	/* fixed length, as some writers make them (ours are variable) */
	H5Tset_size(t, strlen(v) + 1);
	put_attr(obj, name, t, v);
	H5Tclose(t);
}

static char *craft(const char *name, const struct craft *c)
{
	char *path = path_of(name);
	hsize_t xd[2] = { (hsize_t)c->n, (hsize_t)c->f }, yd[1] = { (hsize_t)c->labels_n };
	hsize_t cd[2] = { (hsize_t)c->chunk, (hsize_t)c->f };
	hid_t file, sp, dcpl, x, y;
	double mean = 0;
	int64_t i, j;

	unlink(path);
	file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
	assert_true(file >= 0);
	if (c->format)
		put_str(file, "format", c->format);
	put_attr(file, "version", H5T_STD_I32LE, &c->version);
	put_attr(file, "classes", H5T_STD_I32LE, &c->classes);
	put_str(file, "source", "crafted by test_data.c");
	if (!c->no_features) {
		sp = H5Screate_simple(c->rank_x, xd, NULL);
		dcpl = H5Pcreate(H5P_DATASET_CREATE);
		if (c->chunk)
			assert_true(H5Pset_chunk(dcpl, c->rank_x, cd) >= 0);
		if (c->deflate)
			assert_true(H5Pset_deflate(dcpl, 1) >= 0);
		x = H5Dcreate2(file, "/features", c->xtype, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
		assert_true(x >= 0);
		if (c->write) {
			double *v = malloc((size_t)(c->n * c->f) * sizeof(double));

			assert_non_null(v);
			for (i = 0; i < c->n; i++)
				for (j = 0; j < c->f; j++)
					v[i * c->f + j] = value(i, j);
			assert_true(H5Dwrite(x, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
			free(v);
		}
		if (!c->no_mean)
			put_attr(x, "mean", H5T_IEEE_F64LE, &mean);
		put_attr(x, "std", H5T_IEEE_F64LE, &c->std);
		put_str(x, "normalisation", "crafted");
		H5Dclose(x);
		H5Pclose(dcpl);
		H5Sclose(sp);
	}
	if (!c->no_labels) {
		int64_t *v = malloc((size_t)c->labels_n * sizeof(int64_t) + 1);

		assert_non_null(v);
		sp = H5Screate_simple(1, yd, NULL);
		y = H5Dcreate2(file, "/labels", c->ytype, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
		assert_true(y >= 0);
		for (i = 0; i < c->labels_n; i++)
			v[i] = i == c->bad_row ? c->classes : label_of(i, c->classes);
		if (c->write)
			assert_true(H5Dwrite(y, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
		free(v);
		H5Dclose(y);
		H5Sclose(sp);
	}
	assert_true(H5Fclose(file) >= 0);
	return path;
}

/* rt_data_open refuses path with rc, and a message naming the file and
 * containing want. */
static void refused(const char *path, int rc, const char *want)
{
	struct dt_err err = { 0 };
	struct rt_data d;

	assert_int_equal(rt_data_open(&d, path, &err), rc);
	assert_true(tu_has(&err, path));
	assert_true(tu_has(&err, want));
	assert_null(d.path); /* left closed */
	rt_data_close(&d);
}

/* --- round trips --- */

static void test_round_trip(void **state)
{
	char *path = write_set("rt.h5", 3000, 37, 10);
	struct dt_err err = { 0 };
	struct rt_data d;
	int64_t counts[10] = { 0 }, idx[1] = { 5 };
	int k;

	(void)state;
	open_ok(&d, path);
	assert_int_equal(d.n, 3000);
	assert_int_equal(d.features, 37);
	assert_int_equal(d.classes, 10);
	assert_true(d.mean == 0.5 && d.std == 2.0);
	assert_string_equal(d.source, "test rows");
	assert_int_equal(rt_data_bytes(&d), 3000 * 37 * 4);
	assert_true(d.x_chunk_rows == 1024 && d.y_direct); /* the direct path */
	check_batches(&d);
	assert_int_equal(rt_data_read(&d, idx, 0, NULL, NULL, &err), 0);
	assert_int_equal(rt_data_verify(&d, counts, &err), 0);
	for (k = 0; k < 10; k++)
		assert_int_equal(counts[k], 300);

	/* from memory: x only, then y too */
	assert_int_equal(rt_data_load_all(&d, true, false, &err), 0);
	assert_non_null(d.x_all);
	assert_null(d.y_all);
	check_batches(&d);
	assert_int_equal(rt_data_load_all(&d, true, true, &err), 0);
	assert_non_null(d.y_all);
	check_batches(&d);
	assert_int_equal(rt_data_verify(&d, counts, &err), 0);
	assert_int_equal(counts[3], 300);
	rt_data_close(&d);
	rt_data_close(&d); /* twice is fine */
	free(path);
}

/* Files another tool may write: other types, compression, odd chunks, a
 * contiguous layout: all read through HDF5 or directly, with the same rows. */
static void test_other_layouts(void **state)
{
	struct craft c = good(2500, 13);
	struct rt_data d;
	char *path;

	(void)state;
	c.xtype = H5T_IEEE_F64BE; /* converted on read */
	c.ytype = H5T_STD_I64LE;
	c.chunk = 7;
	path = craft("f64.h5", &c);
	open_ok(&d, path);
	assert_true(d.x_chunk_rows == 0 && !d.y_direct); /* the HDF5 path */
	check_batches(&d);
	rt_data_close(&d);
	free(path);

	c = good(2500, 13);
	c.chunk = 100;
	c.deflate = true;
	path = craft("deflate.h5", &c);
	open_ok(&d, path);
	assert_int_equal(d.x_chunk_rows, 0);
	check_batches(&d);
	rt_data_close(&d);
	free(path);

	c = good(2500, 13);
	path = craft("contiguous.h5", &c); /* contiguous float32, int32: direct */
	open_ok(&d, path);
	assert_true(d.x_chunk_rows == 2500 && d.y_direct);
	check_batches(&d);
	rt_data_close(&d);
	free(path);

	c = good(1, 1); /* the smallest set */
	path = craft("one.h5", &c);
	open_ok(&d, path);
	check_rows(&d, (int64_t[]){ 0, 0 }, 2);
	rt_data_close(&d);
	free(path);
}

static void collect(void *arg, const char *obj, const char *name, const char *value)
{
	dt_buf_printf(arg, "%s|%s=%s\n", obj, name, value);
}

static void test_attrs_listed(void **state)
{
	char *path = write_set("attrs.h5", 10, 2, 3);
	struct dt_err err = { 0 };
	struct dt_buf seen = { 0 };
	struct rt_data d;

	(void)state;
	open_ok(&d, path);
	assert_int_equal(rt_data_attrs(&d, collect, &seen, &err), 0);
	assert_non_null(strstr(dt_buf_str(&seen), "/|format=\"dtrain-dataset\"\n"));
	assert_non_null(strstr(dt_buf_str(&seen), "/|version=1\n"));
	assert_non_null(strstr(dt_buf_str(&seen), "/|classes=3\n"));
	assert_non_null(strstr(dt_buf_str(&seen), "/|source=\"test rows\"\n"));
	assert_non_null(strstr(dt_buf_str(&seen), "/features|mean=0.5\n"));
	assert_non_null(strstr(dt_buf_str(&seen), "/features|std=2\n"));
	assert_non_null(strstr(dt_buf_str(&seen), "/features|normalisation=\"test: none\"\n"));
	rt_data_close(&d);
	dt_buf_free(&seen);
	free(path);
}

/* --- refusals --- */

static void test_refuse_not_hdf5(void **state)
{
	char *missing = path_of("missing.h5");

	(void)state;
	refused(tu_write("junk.h5", "this is not HDF5 at all\n"), -EINVAL, "not an HDF5 file");
	refused(tu_write("empty.h5", ""), -EINVAL, "not an HDF5 file");
	refused(missing, -ENOENT, "cannot open: No such file or directory");
	refused(tu_scratch(), -EINVAL, "not a regular file");
	free(missing);
}

static void test_refuse_not_ours(void **state)
{
	struct craft c = good(20, 3);
	char *p;

	(void)state;
	c.format = "something-else";
	p = craft("fmt.h5", &c);
	refused(p, -EINVAL, "not a dtrain data set: format is \"something-else\", expected "
		"\"dtrain-dataset\"");
	free(p);
	c.format = NULL;
	p = craft("nofmt.h5", &c);
	refused(p, -EINVAL, "not a dtrain data set: no \"format\" attribute on /");
	free(p);
	c = good(20, 3);
	c.version = 2;
	p = craft("v2.h5", &c);
	refused(p, -EINVAL, "format version 2 is not one this dtrain reads (1); hint: a newer");
	free(p);
	c = good(20, 3);
	c.classes = 1;
	p = craft("classes.h5", &c);
	refused(p, -EINVAL, "attribute \"classes\" must be in [2, 1000000] (got 1)");
	free(p);
	c = good(20, 3);
	c.no_mean = true;
	p = craft("nomean.h5", &c);
	refused(p, -EINVAL, "/features: attribute \"mean\" is missing");
	free(p);
	c = good(20, 3);
	c.std = 0;
	p = craft("std0.h5", &c);
	refused(p, -EINVAL, "/features: attribute \"std\" must be > 0 (got 0)");
	free(p);
}

static void test_refuse_shapes(void **state)
{
	struct craft c = good(20, 3);
	char *p;

	(void)state;
	c.no_labels = true;
	p = craft("nolabels.h5", &c);
	refused(p, -EINVAL, "/labels is missing");
	free(p);
	c = good(20, 3);
	c.no_features = true;
	p = craft("nofeatures.h5", &c);
	refused(p, -EINVAL, "/features is missing");
	free(p);
	c = good(20, 3);
	c.labels_n = 19;
	p = craft("mismatch.h5", &c);
	refused(p, -EINVAL, "/labels has 19 rows but /features has 20");
	free(p);
	c = good(20, 3);
	c.rank_x = 1;
	p = craft("rank.h5", &c);
	refused(p, -EINVAL, "/features must have 2 dimensions (has 1)");
	free(p);
	c = good(20, 3);
	c.ytype = H5T_IEEE_F32LE;
	p = craft("flabels.h5", &c);
	refused(p, -EINVAL, "/labels must hold integers, not float");
	free(p);
	c = good(20, 3);
	c.write = false;
	c.chunk = 8;
	p = craft("unwritten.h5", &c);
	refused(p, -EINVAL, "/features: only 0 of its 3 chunks were written");
	free(p);
	c = good(20, 3);
	c.write = false;
	c.xtype = H5T_IEEE_F32LE;
	p = craft("unwritten2.h5", &c);
	refused(p, -EINVAL, "/features: its data was never written");
	free(p);
}

static void test_refuse_huge(void **state)
{
	struct craft c = good(1000000000000LL, 784); /* 7.8e14 values, declared only */
	char *p;

	(void)state;
	c.write = false;
	c.chunk = 1024;
	c.no_labels = true;
	p = craft("huge.h5", &c);
	refused(p, -EINVAL, "/features declares 1000000000000 x 784 values, more than this dtrain "
		"accepts");
	free(p);
	c = good(2, 200000000); /* 2e8 features */
	c.write = false;
	c.chunk = 1;
	c.no_labels = true;
	p = craft("wide.h5", &c);
	refused(p, -EINVAL, "/features declares 2 x 200000000 values");
	free(p);
}

static void test_refuse_bad_label_on_read(void **state)
{
	struct craft c = good(50, 4);
	struct dt_err err = { 0 };
	struct rt_data d;
	int64_t idx[3] = { 1, 17, 2 }, sorted[2] = { 16, 17 };
	float x[12];
	int32_t y[3];
	char *p;

	(void)state;
	c.bad_row = 17;
	p = craft("badlabel.h5", &c);
	open_ok(&d, p); /* labels are checked when read */
	assert_int_equal(rt_data_read(&d, idx, 3, x, NULL, &err), 0); /* x only: not read */
	assert_int_equal(rt_data_read(&d, idx, 3, NULL, y, &err), -EINVAL);
	assert_true(tu_has(&err, p));
	assert_true(tu_has(&err, "/labels: row 17: label 10 is outside [0, 10)"));
	dt_err_clear(&err);
	assert_int_equal(rt_data_read(&d, sorted, 2, NULL, y, &err), -EINVAL);
	assert_true(tu_has(&err, "row 17: label 10"));
	dt_err_clear(&err);
	assert_int_equal(rt_data_verify(&d, NULL, &err), -EINVAL);
	assert_true(tu_has(&err, "row 17: label 10"));
	dt_err_clear(&err);
	assert_int_equal(rt_data_load_all(&d, false, true, &err), -EINVAL);
	assert_null(d.y_all);
	idx[1] = 50;
	dt_err_clear(&err);
	assert_int_equal(rt_data_read(&d, idx, 3, x, y, &err), -EINVAL);
	assert_true(tu_has(&err, "row 50 is outside [0, 50)"));
	idx[1] = -1;
	assert_int_equal(rt_data_read(&d, idx, 3, x, NULL, &err), -EINVAL);
	rt_data_close(&d);

	free(p);

	/* the same file through the HDF5 path */
	c.ytype = H5T_STD_I16BE;
	p = craft("badlabel16.h5", &c);
	open_ok(&d, p);
	assert_false(d.y_direct);
	idx[1] = 17;
	dt_err_clear(&err);
	assert_int_equal(rt_data_read(&d, idx, 3, NULL, y, &err), -EINVAL);
	assert_true(tu_has(&err, "row 17: label 10"));
	rt_data_close(&d);
	free(p);
}

/* A file cut short: HDF5 refuses to open it, or the rows are not there. */
static void test_refuse_truncated(void **state)
{
	char *path = write_set("cut.h5", 3000, 37, 10);
	struct dt_err err = { 0 };
	struct rt_data d;
	struct stat st;

	(void)state;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(truncate(path, st.st_size / 2), 0);
	assert_true(rt_data_open(&d, path, &err) < 0);
	assert_true(tu_has(&err, path));
	free(path);
}

/* --- writing --- */

static void test_writer(void **state)
{
	struct rt_data_meta m = { 4, 2, 3, "w", 0, 1, "none" };
	char *path = path_of("w.h5"), *tmp;
	float x[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, nan_x[2] = { 0, NAN };
	int32_t y[4] = { 0, 1, 2, 0 }, bad_y[1] = { 3 };
	struct dt_err err = { 0 };
	struct rt_data_writer w;
	struct rt_data d;

	(void)state;
	/* abort: nothing left behind */
	assert_int_equal(rt_data_create(&w, path, &m, &err), 0);
	tmp = strdup(w.tmp);
	assert_int_equal(access(tmp, F_OK), 0);
	assert_int_equal(rt_data_append(&w, x, y, 2, &err), 0);
	rt_data_abort(&w);
	assert_true(access(tmp, F_OK) < 0 && access(path, F_OK) < 0);
	rt_data_abort(&w); /* safe twice */

	/* bad rows are refused, too many rows too; a short file never commits */
	assert_int_equal(rt_data_create(&w, path, &m, &err), 0);
	assert_int_equal(rt_data_append(&w, x, bad_y, 1, &err), -EINVAL);
	assert_true(tu_has(&err, "row 0: label 3 is outside [0, 3)"));
	assert_int_equal(rt_data_append(&w, nan_x, y, 1, &err), -EINVAL);
	assert_true(tu_has(&err, "row 0, column 1: feature is not finite"));
	assert_int_equal(rt_data_append(&w, x, y, 3, &err), 0);
	assert_int_equal(rt_data_append(&w, x, y, 2, &err), -EINVAL);
	assert_true(tu_has(&err, "2 more rows would exceed the 4 announced"));
	assert_int_equal(rt_data_attr_str(&w, "format", "x", &err), -EINVAL);
	assert_int_equal(rt_data_attr_int(&w, "extra", 7, &err), 0);
	dt_err_clear(&err);
	assert_int_equal(rt_data_commit(&w, &err), -EINVAL);
	assert_true(tu_has(&err, "only 3 of the 4 announced rows were written"));
	assert_true(access(tmp, F_OK) < 0 && access(path, F_OK) < 0);

	/* a full file commits, and a second one replaces it whole */
	assert_int_equal(rt_data_write(path, &m, x, y, &err), 0);
	m.n = 2;
	x[0] = 42;
	assert_int_equal(rt_data_write(path, &m, x, y, &err), 0);
	assert_true(access(tmp, F_OK) < 0);
	open_ok(&d, path);
	assert_int_equal(d.n, 2);
	assert_int_equal(rt_data_read(&d, (int64_t[]){ 0 }, 1, nan_x, NULL, &err), 0);
	assert_true(nan_x[0] == 42);
	rt_data_close(&d);

	/* bad metadata and a directory that does not exist */
	dt_err_clear(&err);
	m.classes = 1;
	assert_int_equal(rt_data_create(&w, path, &m, &err), -EINVAL);
	assert_true(tu_has(&err, "classes must be in [2, 1000000] (got 1)"));
	m.classes = 3;
	m.std = 0;
	assert_int_equal(rt_data_create(&w, path, &m, &err), -EINVAL);
	m.std = 1;
	free(path);
	path = path_of("no/such/dir/w.h5");
	dt_err_clear(&err);
	assert_true(rt_data_create(&w, path, &m, &err) < 0);
	assert_true(tu_has(&err, path));
	free(path);
	free(tmp);
}

/* --- synthetic --- */

static void read_all(const char *path, float **x, int32_t **y, struct rt_data *d)
{
	struct dt_err err = { 0 };

	open_ok(d, path);
	assert_int_equal(rt_data_load_all(d, true, true, &err), 0);
	*x = d->x_all;
	*y = d->y_all;
}

static void test_synthetic(void **state)
{
	struct rt_data_synthetic p = { 3000, 8, 4, 7, 0 };
	struct dt_err err = { 0 };
	struct rt_data a, b, c;
	float *xa, *xb, *xc;
	int32_t *ya, *yb, *yc;
	char *pa = path_of("syn-a.h5"), *pb = path_of("syn-b.h5"), *pc = path_of("syn-c.h5");
	int64_t counts[4];
	int k;

	(void)state;
	assert_int_equal(rt_data_make_synthetic(pa, &p, NULL, NULL, &err), 0);
	assert_int_equal(rt_data_make_synthetic(pb, &p, NULL, NULL, &err), 0);
	p.stream = 1;
	assert_int_equal(rt_data_make_synthetic(pc, &p, NULL, NULL, &err), 0);
	read_all(pa, &xa, &ya, &a);
	read_all(pb, &xb, &yb, &b);
	read_all(pc, &xc, &yc, &c);
	assert_int_equal(a.n, 3000);
	assert_int_equal(a.features, 8);
	assert_int_equal(a.classes, 4);
	/* deterministic in (seed, stream); another stream differs */
	assert_memory_equal(xa, xb, 3000 * 8 * sizeof(float));
	assert_memory_equal(ya, yb, 3000 * sizeof(int32_t));
	assert_memory_not_equal(xa, xc, 3000 * 8 * sizeof(float));
	/* every class present, roughly balanced */
	assert_int_equal(rt_data_verify(&a, counts, &err), 0);
	for (k = 0; k < 4; k++)
		assert_true(counts[k] > 600 && counts[k] < 900);
	rt_data_close(&a);
	rt_data_close(&b);
	rt_data_close(&c);

	p.classes = 1;
	assert_int_equal(rt_data_make_synthetic(pa, &p, NULL, NULL, &err), -EINVAL);
	assert_true(tu_has(&err, pa));
	free(pa);
	free(pb);
	free(pc);
}

/* Same seed, another stream: the same problem, so the nearest-centroid
 * accuracy recorded in both files is about the same, and well above chance. */
static void test_synthetic_learnable(void **state)
{
	struct rt_data_synthetic p = { 5000, 100, 10, 1, 0 };
	struct dt_err err = { 0 };
	double acc[2];
	char *path = path_of("syn-l.h5");
	hid_t f, a;
	int s;

	(void)state;
	for (s = 0; s < 2; s++) {
		p.stream = (uint64_t)s;
		assert_int_equal(rt_data_make_synthetic(path, &p, NULL, NULL, &err), 0);
		f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
		a = H5Aopen(f, "nearest_centroid_accuracy", H5P_DEFAULT);
		assert_true(H5Aread(a, H5T_NATIVE_DOUBLE, &acc[s]) >= 0);
		H5Aclose(a);
		H5Fclose(f);
	}
	assert_true(acc[0] > 0.7 && acc[0] < 0.98);
	assert_true(fabs(acc[0] - acc[1]) < 0.05);
	free(path);
}

/* --- Fashion-MNIST --- */

/* An IDX file: magic, big-endian dims, data; gzip-compressed or plain. */
static void write_idx(const char *dir, const char *name, uint32_t magic, const uint32_t *dims,
		      int ndims, const uint8_t *data, size_t len, bool gz)
{
	char path[512];
	uint8_t head[16];
	int i;

	for (i = 0; i < 4; i++)
		head[i] = (uint8_t)(magic >> (24 - 8 * i));
	for (i = 0; i < ndims; i++) {
		head[4 + 4 * i] = (uint8_t)(dims[i] >> 24);
		head[5 + 4 * i] = (uint8_t)(dims[i] >> 16);
		head[6 + 4 * i] = (uint8_t)(dims[i] >> 8);
		head[7 + 4 * i] = (uint8_t)dims[i];
	}
	snprintf(path, sizeof(path), "%s/%s%s", dir, name, gz ? ".gz" : "");
	if (gz) {
		gzFile g = gzopen(path, "wb");

		assert_non_null(g);
		assert_int_equal(gzwrite(g, head, 4 + 4 * (unsigned)ndims), 4 + 4 * ndims);
		if (len)
			assert_int_equal(gzwrite(g, data, (unsigned)len), (int)len);
		assert_int_equal(gzclose(g), Z_OK);
	} else {
		FILE *fp = fopen(path, "wb");

		assert_non_null(fp);
		assert_int_equal(fwrite(head, 1, 4 + 4 * (size_t)ndims, fp), 4 + 4 * (size_t)ndims);
		assert_int_equal(fwrite(data, 1, len, fp), len);
		assert_int_equal(fclose(fp), 0);
	}
}

#define FM_TRAIN 50
#define FM_TEST 20

static uint8_t fm_px[FM_TRAIN * 784], fm_lb[FM_TRAIN];

/* A small Fashion-MNIST directory: train gzip-compressed, test plain. */
static char *fm_fixture(const char *name)
{
	char *dir = path_of(name);
	uint32_t di[3] = { FM_TRAIN, 28, 28 }, dl[1] = { FM_TRAIN };
	size_t i;

	assert_int_equal(dt_mkdirs(dir, 0755), 0);
	for (i = 0; i < sizeof(fm_px); i++)
		fm_px[i] = (uint8_t)((i * 37 + i / 784) % 256);
	for (i = 0; i < FM_TRAIN; i++)
		fm_lb[i] = (uint8_t)(i % 10);
	write_idx(dir, "train-images-idx3-ubyte", 0x803, di, 3, fm_px, sizeof(fm_px), true);
	write_idx(dir, "train-labels-idx1-ubyte", 0x801, dl, 1, fm_lb, FM_TRAIN, true);
	di[0] = dl[0] = FM_TEST;
	write_idx(dir, "t10k-images-idx3-ubyte", 0x803, di, 3, fm_px, FM_TEST * 784, false);
	write_idx(dir, "t10k-labels-idx1-ubyte", 0x801, dl, 1, fm_lb, FM_TEST, false);
	return dir;
}

static void test_fashion_convert(void **state)
{
	char *src = fm_fixture("fm"), *out = path_of("fm-out"), *train, *test;
	struct dt_err err = { 0 };
	struct rt_data d;
	double mean = 0, var = 0;
	int64_t idx[3] = { 0, 17, FM_TEST - 1 };
	float x[3 * 784];
	int32_t y[3];
	size_t i, j;

	(void)state;
	for (i = 0; i < sizeof(fm_px); i++)
		mean += fm_px[i] / 255.0;
	mean /= (double)sizeof(fm_px);
	for (i = 0; i < sizeof(fm_px); i++)
		var += (fm_px[i] / 255.0 - mean) * (fm_px[i] / 255.0 - mean);
	var /= (double)sizeof(fm_px);

	if (rt_data_make_fashion_mnist(src, out, NULL, NULL, &err))
		fail_msg("%s", err.msg);
	assert_true(asprintf(&train, "%s/train.h5", out) > 0);
	assert_true(asprintf(&test, "%s/test.h5", out) > 0);
	open_ok(&d, train);
	assert_int_equal(d.n, FM_TRAIN);
	assert_int_equal(d.features, 784);
	assert_int_equal(d.classes, 10);
	assert_true(fabs(d.mean - mean) < 1e-12 && fabs(d.std - sqrt(var)) < 1e-12);
	rt_data_close(&d);
	open_ok(&d, test); /* the test set: the training statistics */
	assert_int_equal(d.n, FM_TEST);
	assert_true(fabs(d.mean - mean) < 1e-12 && fabs(d.std - sqrt(var)) < 1e-12);
	assert_int_equal(rt_data_read(&d, idx, 3, x, y, &err), 0);
	for (i = 0; i < 3; i++) {
		assert_int_equal(y[i], fm_lb[idx[i]]);
		for (j = 0; j < 784; j++)
			assert_true(x[i * 784 + j] ==
				    (float)((fm_px[(size_t)idx[i] * 784 + j] / 255.0 - mean) / sqrt(var)));
	}
	rt_data_close(&d);
	free(test);
	free(train);
	free(out);
	free(src);
}

/* Converting dir must fail with a message containing want, writing nothing. */
static void fm_refused(const char *dir, const char *want)
{
	char *out = path_of("fm-refused");
	struct dt_err err = { 0 };
	char train[600];

	assert_true(rt_data_make_fashion_mnist(dir, out, NULL, NULL, &err) < 0);
	assert_true(tu_has(&err, want));
	snprintf(train, sizeof(train), "%s/train.h5", out);
	assert_true(access(train, F_OK) < 0);
	free(out);
}

static void test_fashion_refusals(void **state)
{
	uint32_t di[3] = { FM_TRAIN, 28, 28 }, dl[1] = { FM_TRAIN };
	char *dir, *missing = path_of("no-such-dir"), want[700], path[600];
	uint8_t lb[FM_TRAIN];

	(void)state;
	snprintf(want, sizeof(want), "%s: cannot use as the source directory: No such file",
		 missing);
	fm_refused(missing, want);
	fm_refused(tu_write("plain-file", "x"), "not a directory");

	dir = fm_fixture("fm-magic"); /* labels where the images belong */
	write_idx(dir, "train-images-idx3-ubyte", 0x801, dl, 1, fm_lb, FM_TRAIN, true);
	fm_refused(dir, "train-images-idx3-ubyte.gz: not an IDX file of unsigned bytes with 3 "
		   "dimensions (magic number 0x00000801, expected 0x00000803)");
	free(dir);

	dir = fm_fixture("fm-trunc"); /* the header promises more than there is */
	write_idx(dir, "train-images-idx3-ubyte", 0x803, di, 3, fm_px, sizeof(fm_px) - 5, true);
	fm_refused(dir, "truncated: the header promises 50 items (39200 bytes of data) but the "
		   "file has 39195");
	free(dir);

	dir = fm_fixture("fm-extra"); /* and less than there is */
	dl[0] = FM_TRAIN - 1;
	write_idx(dir, "train-labels-idx1-ubyte", 0x801, dl, 1, fm_lb, FM_TRAIN, true);
	fm_refused(dir, "data continues after the 49 items its header promises");
	dl[0] = FM_TRAIN;
	free(dir);

	dir = fm_fixture("fm-count"); /* fewer labels than images */
	dl[0] = FM_TEST - 1;
	write_idx(dir, "t10k-labels-idx1-ubyte", 0x801, dl, 1, fm_lb, FM_TEST - 1, false);
	fm_refused(dir, "t10k-labels-idx1-ubyte: 19 labels, but");
	dl[0] = FM_TRAIN;
	free(dir);

	dir = fm_fixture("fm-label"); /* a label out of 0..9 */
	memcpy(lb, fm_lb, sizeof(lb));
	lb[33] = 10;
	write_idx(dir, "train-labels-idx1-ubyte", 0x801, dl, 1, lb, FM_TRAIN, true);
	fm_refused(dir, "train-labels-idx1-ubyte.gz: item 33: label 10 is outside 0..9");
	free(dir);

	dir = fm_fixture("fm-size"); /* 14 x 14 images */
	di[1] = di[2] = 14;
	write_idx(dir, "t10k-images-idx3-ubyte", 0x803, di, 3, fm_px, FM_TRAIN * 14 * 14, false);
	fm_refused(dir, "images are 14 x 14, expected 28 x 28");
	di[1] = di[2] = 28;
	free(dir);

	dir = fm_fixture("fm-gz"); /* gzip data damaged in the middle */
	snprintf(path, sizeof(path), "%s/train-images-idx3-ubyte.gz", dir);
	{
		char *buf;
		size_t len;
		FILE *fp;

		assert_int_equal(dt_read_file(path, &buf, &len), 0);
		memset(buf + len / 2, 0xff, 64);
		fp = fopen(path, "wb");
		assert_non_null(fp);
		assert_int_equal(fwrite(buf, 1, len, fp), len);
		fclose(fp);
		free(buf);
	}
	fm_refused(dir, "train-images-idx3-ubyte.gz: corrupt gzip data");
	free(dir);

	dir = fm_fixture("fm-missing");
	snprintf(path, sizeof(path), "%s/t10k-labels-idx1-ubyte", dir);
	unlink(path);
	fm_refused(dir, "has neither t10k-labels-idx1-ubyte.gz nor t10k-labels-idx1-ubyte");
	free(dir);
	free(missing);
}

/* --- main --- */

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_other_layouts),
		cmocka_unit_test(test_attrs_listed),
		cmocka_unit_test(test_refuse_not_hdf5),
		cmocka_unit_test(test_refuse_not_ours),
		cmocka_unit_test(test_refuse_shapes),
		cmocka_unit_test(test_refuse_huge),
		cmocka_unit_test(test_refuse_bad_label_on_read),
		cmocka_unit_test(test_refuse_truncated),
		cmocka_unit_test(test_writer),
		cmocka_unit_test(test_synthetic),
		cmocka_unit_test(test_synthetic_learnable),
		cmocka_unit_test(test_fashion_convert),
		cmocka_unit_test(test_fashion_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, tu_teardown);
}
