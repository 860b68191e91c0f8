/*
 * writer.c - writing dtrain data sets (data.h, "writing"): rows go to a
 * temporary file, which is checked by reading it back, fsynced and renamed
 * into place (the format: data.h; the guide: runtime/data/DATA.md).
 *
 * Like the reading side (data.c), every public function silences HDF5's
 * automatic error printing for its duration and quotes HDF5's innermost
 * message in ours.
 *
 * Sections: attributes, creating, rows, extra attributes, commit and abort.
 */
#include "runtime/data/data.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "base/h5.h"
#include "base/io.h"
#include "runtime/data/internal.h"

/* --- attributes (base/h5.h, in this file's words) --- */

/* One value of file type ftype from *v of memory type mtype. On failure,
 * why gets HDF5's reason. */
static int attr_put(hid_t obj, const char *name, hid_t ftype, hid_t mtype, const void *v,
		    char *why)
{
	return dt_h5_attr_put(obj, name, ftype, mtype, 0, 0, v, why);
}

/* Strings are written variable-length UTF-8 (h5py reads them as str). */
static int attr_put_str(hid_t obj, const char *name, const char *v, char *why)
{
	return dt_h5_attr_put_str(obj, name, v, DT_H5_STR_UTF8, why);
}

/* --- creating --- */

/* Closes the HDF5 handles only: commit closes the file itself, to see it fail. */
static void writer_close(struct rt_data_writer *w)
{
	dt_h5_close(&w->h_x, H5Dclose);
	dt_h5_close(&w->h_y, H5Dclose);
	dt_h5_close(&w->h_file, H5Fclose);
}

/* Leaves w zeroed, so that a second abort or commit finds nothing to free. */
static void writer_free(struct rt_data_writer *w)
{
	free(w->tmp);
	free(w->path);
	memset(w, 0, sizeof(*w));
}

/* Refuses, before any file exists, what rt_data_open() would refuse later. */
static int check_meta(const char *path, const struct rt_data_meta *m, struct dt_err *err)
{
	if (m->n < 1 || m->features < 1 || m->features > RT_DATA_MAX_FEATURES ||
	    m->n > RT_DATA_MAX_ELEMS / m->features)
		return dt_err_add(err, "%s: cannot hold %lld x %lld values (features <= %lld, "
				  "samples x features <= 2^46)", path, (long long)m->n,
				  (long long)m->features, RT_DATA_MAX_FEATURES);
	if (m->classes < 2 || m->classes > RT_DATA_MAX_CLASSES)
		return dt_err_add(err, "%s: classes must be in [2, %d] (got %d)", path,
				  RT_DATA_MAX_CLASSES, m->classes);
	if (!m->source || !m->normalisation)
		return dt_err_add(err, "%s: source and normalisation must be given", path);
	if (!isfinite(m->mean) || !isfinite(m->std) || !(m->std > 0))
		return dt_err_add(err, "%s: mean and std must be finite and std > 0 (got %g, %g)",
				  path, m->mean, m->std);
	return 0;
}

/* rt_data_create() with HDF5 quiet; on failure the caller aborts w. */
static int create(struct rt_data_writer *w, const char *path, const struct rt_data_meta *m,
		  struct dt_err *err)
{
	hid_t fapl = H5I_INVALID_HID, dcpl = H5I_INVALID_HID, space = H5I_INVALID_HID;
	hsize_t dims[2] = { (hsize_t)m->n, (hsize_t)m->features }, chunk[2];
	int64_t rows = (4 << 20) / (m->features * (int64_t)sizeof(float));
	int32_t i32;
	char why[DT_H5_WHY_MAX];
	int rc;

	rc = check_meta(path, m, err);
	if (rc)
		return rc;
	w->path = strdup(path);
	if (!w->path || asprintf(&w->tmp, "%s.tmp.%ld", path, (long)getpid()) < 0) {
		w->tmp = NULL;
		return rt__data_oom(err, path);
	}
	w->n = m->n;
	w->features = m->features;
	w->classes = m->classes;
	fapl = dt_h5_fapl(DT_H5_STRONG_CLOSE);
	w->h_file = fapl < 0 ? fapl : H5Fcreate(w->tmp, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
	if (w->h_file < 0) {
		rc = dt_err_add(err, "%s: cannot create %s: %s", path, w->tmp, dt_h5_why(why));
		rc = -EIO;
		goto out;
	}
	/* /features: chunks of whole rows, up to 1024 rows or about 4 MiB each,
	 * so that a row is one contiguous read and a chunk never outgrows HDF5's
	 * 4 GiB limit; no fill: every row is written before commit; no time
	 * stamps: the same rows give the same bytes (files can be checksummed). */
	chunk[0] = (hsize_t)(rows < 1 ? 1 : rows > RT_DATA_CHUNK_ROWS ? RT_DATA_CHUNK_ROWS : rows);
	if (chunk[0] > dims[0])
		chunk[0] = dims[0];
	chunk[1] = dims[1];
	space = H5Screate_simple(2, dims, NULL);
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	if (space < 0 || dcpl < 0 || H5Pset_chunk(dcpl, 2, chunk) < 0 ||
	    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) < 0 || H5Pset_obj_track_times(dcpl, 0) < 0)
		goto h5fail;
	w->h_x = H5Dcreate2(w->h_file, "/features", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl,
			    H5P_DEFAULT);
	if (w->h_x < 0)
		goto h5fail;
	dt_h5_close(&space, H5Sclose);
	dt_h5_close(&dcpl, H5Pclose);
	/* /labels: contiguous, so that a random label is one small read */
	space = H5Screate_simple(1, dims, NULL);
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	if (space < 0 || dcpl < 0 || H5Pset_obj_track_times(dcpl, 0) < 0)
		goto h5fail;
	w->h_y = H5Dcreate2(w->h_file, "/labels", H5T_STD_I32LE, space, H5P_DEFAULT, dcpl,
			    H5P_DEFAULT);
	if (w->h_y < 0)
		goto h5fail;
	i32 = RT_DATA_VERSION;
	if (attr_put_str(w->h_file, "format", RT_DATA_FORMAT, why) ||
	    attr_put(w->h_file, "version", H5T_STD_I32LE, H5T_NATIVE_INT32, &i32, why) ||
	    attr_put(w->h_file, "classes", H5T_STD_I32LE, H5T_NATIVE_INT32, &m->classes, why) ||
	    attr_put_str(w->h_file, "source", m->source, why) ||
	    attr_put(w->h_x, "mean", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &m->mean, why) ||
	    attr_put(w->h_x, "std", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &m->std, why) ||
	    attr_put_str(w->h_x, "normalisation", m->normalisation, why))
		goto fail;
	goto out;
h5fail:
	dt_h5_why(why);
fail:
	dt_err_add(err, "%s: cannot set up %s: %s", path, w->tmp, why);
	rc = -EIO;
out:
	dt_h5_close(&dcpl, H5Pclose);
	dt_h5_close(&space, H5Sclose);
	dt_h5_close(&fapl, H5Pclose);
	return rc;
}

int rt_data_create(struct rt_data_writer *w, const char *path, const struct rt_data_meta *meta,
		   struct dt_err *err)
{
	struct dt_h5_quiet q;
	int rc;

	memset(w, 0, sizeof(*w));
	dt_h5_quiet_on(&q);
	rc = create(w, path, meta, err);
	if (rc)
		rt_data_abort(w);
	dt_h5_quiet_off(&q);
	return rc;
}

/* --- rows --- */

/* rt_data_append() with HDF5 quiet: rows are checked before any is written. */
static int append(struct rt_data_writer *w, const float *x, const int32_t *y, int64_t rows,
		  struct dt_err *err)
{
	hsize_t start[2] = { (hsize_t)w->written, 0 }, count[2] = { (hsize_t)rows,
								    (hsize_t)w->features };
	hid_t fs = H5I_INVALID_HID, ms = H5I_INVALID_HID;
	char why[DT_H5_WHY_MAX];
	int64_t i;
	int rc = 0;

	if (w->h_file <= 0)
		return dt_err_add(err, "%s: append after the writer finished", w->path);
	if (rows < 0 || rows > w->n - w->written)
		return dt_err_add(err, "%s: %lld more rows would exceed the %lld announced", w->path,
				  (long long)rows, (long long)w->n);
	if (rows == 0)
		return 0;
	for (i = 0; i < rows; i++)
		if (y[i] < 0 || y[i] >= w->classes)
			return dt_err_add(err, "%s: row %lld: label %d is outside [0, %d)", w->path,
					  (long long)(w->written + i), y[i], w->classes);
	for (i = 0; i < rows * w->features; i++)
		if (!isfinite(x[i]))
			return dt_err_add(err, "%s: row %lld, column %lld: feature is not finite",
					  w->path, (long long)(w->written + i / w->features),
					  (long long)(i % w->features));
	fs = H5Dget_space(w->h_x);
	ms = H5Screate_simple(2, count, NULL);
	if (fs < 0 || ms < 0 ||
	    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
	    H5Dwrite(w->h_x, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, x) < 0)
		goto h5fail;
	dt_h5_close(&ms, H5Sclose);
	dt_h5_close(&fs, H5Sclose);
	fs = H5Dget_space(w->h_y);
	ms = H5Screate_simple(1, count, NULL);
	if (fs < 0 || ms < 0 ||
	    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
	    H5Dwrite(w->h_y, H5T_NATIVE_INT32, ms, fs, H5P_DEFAULT, y) < 0)
		goto h5fail;
	w->written += rows;
	goto out;
h5fail:
	rc = -EIO;
	dt_err_add(err, "%s: writing rows %lld..%lld to %s failed: %s", w->path,
		   (long long)w->written, (long long)(w->written + rows - 1), w->tmp, dt_h5_why(why));
out:
	dt_h5_close(&ms, H5Sclose);
	dt_h5_close(&fs, H5Sclose);
	return rc;
}

int rt_data_append(struct rt_data_writer *w, const float *x, const int32_t *y, int64_t rows,
		   struct dt_err *err)
{
	struct dt_h5_quiet q;
	int rc;

	dt_h5_quiet_on(&q);
	rc = append(w, x, y, rows, err);
	dt_h5_quiet_off(&q);
	return rc;
}

/* --- extra attributes --- */

/* The root attributes the format sets: an extra one must not replace them. */
static bool reserved(const char *name)
{
	return !strcmp(name, "format") || !strcmp(name, "version") || !strcmp(name, "classes") ||
	       !strcmp(name, "source");
}

/* One scalar attribute of /: a number (ftype, mtype, *v) or the string s. */
static int add_attr(struct rt_data_writer *w, const char *name, hid_t ftype, hid_t mtype,
		    const void *v, const char *s, struct dt_err *err)
{
	struct dt_h5_quiet q;
	char why[DT_H5_WHY_MAX];
	int rc;

	if (w->h_file <= 0 || reserved(name))
		return dt_err_add(err, "%s: cannot add attribute \"%s\"%s", w->path, name,
				  w->h_file > 0 ? ": the format sets it" : " after the writer finished");
	dt_h5_quiet_on(&q);
	if (H5Aexists(w->h_file, name) > 0) { /* added twice: refused, never written over */
		snprintf(why, sizeof(why), "attribute already exists");
		rc = -EIO;
	} else {
		rc = s ? attr_put_str(w->h_file, name, s, why) :
			 attr_put(w->h_file, name, ftype, mtype, v, why);
	}
	if (rc)
		dt_err_add(err, "%s: cannot add attribute \"%s\": %s", w->path, name, why);
	dt_h5_quiet_off(&q);
	return rc;
}

int rt_data_attr_int(struct rt_data_writer *w, const char *name, int64_t v, struct dt_err *err)
{
	return add_attr(w, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v, NULL, err);
}

int rt_data_attr_num(struct rt_data_writer *w, const char *name, double v, struct dt_err *err)
{
	return add_attr(w, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v, NULL, err);
}

int rt_data_attr_str(struct rt_data_writer *w, const char *name, const char *v,
		     struct dt_err *err)
{
	return add_attr(w, name, H5I_INVALID_HID, H5I_INVALID_HID, NULL, v, err);
}

/* --- commit and abort --- */

/* rt_data_commit() with HDF5 quiet, before w is freed. */
static int commit(struct rt_data_writer *w, struct dt_err *err)
{
	struct rt_data check;
	char why[DT_H5_WHY_MAX];
	herr_t closed;
	int rc;

	if (w->h_file <= 0)
		return dt_err_add(err, "%s: commit of a finished writer", w->path ? w->path : "?");
	if (w->written != w->n)
		return dt_err_add(err, "%s: only %lld of the %lld announced rows were written",
				  w->path, (long long)w->written, (long long)w->n);
	dt_h5_close(&w->h_x, H5Dclose);
	dt_h5_close(&w->h_y, H5Dclose);
	closed = H5Fclose(w->h_file);
	w->h_file = H5I_INVALID_HID;
	if (closed < 0)
		return dt_err_add(err, "%s: closing %s failed: %s", w->path, w->tmp, dt_h5_why(why)), -EIO;
	/* read back what we wrote, as any reader will, before it gets the name */
	rc = rt_data_open(&check, w->tmp, err);
	rt_data_close(&check);
	if (rc)
		return dt_err_add(err, "%s: the new file does not read back (a bug in dtrain)",
				  w->path), -EIO;
	rc = dt_fsync_path(w->tmp, false);
	if (rc)
		return dt_err_add(err, "%s: fsync of %s failed: %s", w->path, w->tmp, strerror(-rc)), rc;
	if (rename(w->tmp, w->path) < 0) {
		rc = -errno;
		return dt_err_add(err, "%s: cannot rename %s into place: %s", w->path, w->tmp,
				  strerror(errno)), rc;
	}
	rc = dt_fsync_parent(w->path);
	if (rc)
		return dt_err_add(err, "%s: fsync of its directory failed: %s", w->path,
				  strerror(-rc)), rc;
	return 0;
}

int rt_data_commit(struct rt_data_writer *w, struct dt_err *err)
{
	struct dt_h5_quiet q;
	int rc;

	dt_h5_quiet_on(&q);
	rc = commit(w, err);
	dt_h5_quiet_off(&q);
	if (rc)
		rt_data_abort(w);
	else
		writer_free(w);
	return rc;
}

void rt_data_abort(struct rt_data_writer *w)
{
	struct dt_h5_quiet q;

	dt_h5_quiet_on(&q);
	writer_close(w);
	dt_h5_quiet_off(&q);
	if (w->tmp)
		unlink(w->tmp);
	writer_free(w);
}

int rt_data_write(const char *path, const struct rt_data_meta *meta, const float *x,
		  const int32_t *y, struct dt_err *err)
{
	struct rt_data_writer w;
	int rc;

	rc = rt_data_create(&w, path, meta, err);
	if (rc)
		return rc;
	return rt_data_finish(&w, rt_data_append(&w, x, y, meta->n, err), err);
}

int rt_data_finish(struct rt_data_writer *w, int rc, struct dt_err *err)
{
	if (!rc)
		return rt_data_commit(w, err);
	rt_data_abort(w);
	return rc;
}

