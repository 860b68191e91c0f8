/*
 * data.c - reading dtrain data sets in HDF5: checked opening, gathering the
 * rows of a batch, loading and verifying a whole set, listing its
 * attributes (see data.h for the format and runtime/data/DATA.md for the
 * guide). Writing is writer.c's; the sources dtrain-data imports are
 * fashion_mnist.c's and synthetic.c's.
 *
 * Every public function silences HDF5's automatic error printing for its
 * duration (restoring the caller's setting) and reports HDF5's innermost
 * message inside ours instead, so that a user sees one line naming the file.
 *
 * Sections: HDF5 helpers, attributes, opening, rows, checks and queries.
 */
#include "runtime/data/data.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "base/h5.h"
#include "base/io.h"
#include "runtime/data/internal.h"

_Static_assert(sizeof(hid_t) == sizeof(int64_t), "data.h keeps hid_t in int64_t fields");

#define MAX_STR_ATTR 65536          /* longest fixed-length string attribute we read */
#define BLOCK_BYTES (8u << 20)      /* features per block when scanning the whole set */

/* --- HDF5 helpers (the shared ones: base/h5.h) --- */

/* Declared in internal.h: writer.c and the sources report with it too. */
int rt__data_oom(struct dt_err *err, const char *path)
{
	dt_err_add(err, "%s: out of memory", path);
	return -ENOMEM;
}

/* Replaces control characters, so that text from a file prints on one line. */
static void sanitize(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

/* --- attributes (base/h5.h, in this file's words) --- */

/* A reader's failure (base/h5.h) as a message naming the object (oname)
 * and attribute: -ENOMEM, or -EINVAL for the rest. */
static int attr_failed(int rc, const char *oname, const char *name, const char *path,
		       const char *why, struct dt_err *err)
{
	if (rc == -ENOMEM)
		return rt__data_oom(err, path);
	if (rc == -EIO)
		dt_err_add(err, "%s: %s: cannot read attribute \"%s\": %s", path, oname, name, why);
	else
		dt_err_add(err, "%s: %s: attribute \"%s\" %s", path, oname, name, why);
	return -EINVAL;
}

/* An integer of any integer type: files that other tools wrote read too. */
static int attr_get_int(hid_t obj, const char *oname, const char *name, const char *path,
			int64_t *v, struct dt_err *err)
{
	char why[DT_H5_WHY_MAX];
	int rc = dt_h5_attr_get_i64(obj, name, v, why);

	return rc ? attr_failed(rc, oname, name, path, why, err) : 0;
}

/* A finite number. */
static int attr_get_num(hid_t obj, const char *oname, const char *name, const char *path,
			double *v, struct dt_err *err)
{
	char why[DT_H5_WHY_MAX];
	int rc = dt_h5_attr_get_f64(obj, name, v, why);

	if (rc)
		return attr_failed(rc, oname, name, path, why, err);
	if (!isfinite(*v))
		return dt_err_add(err, "%s: %s: attribute \"%s\" must be finite (got %g)", path, oname,
				  name, *v);
	return 0;
}

/* A string attribute, fixed or variable length, in any character set.
 * *out is malloc'ed, control characters replaced. */
static int attr_get_str(hid_t obj, const char *oname, const char *name, const char *path,
			char **out, struct dt_err *err)
{
	char why[DT_H5_WHY_MAX];
	int rc = dt_h5_attr_get_str(obj, name, MAX_STR_ATTR, out, why);

	if (rc)
		return attr_failed(rc, oname, name, path, why, err);
	sanitize(*out);
	return 0;
}

/* --- opening --- */

/* Before HDF5 sees the file: it exists, is a regular file we can read, and
 * carries the HDF5 signature (at 0, or 512, 1024, ... after a user block).
 * On success *fd_out is the file, open, and *at0 says the signature is at 0
 * (no user block: HDF5 addresses are file offsets). */
static int check_file(const char *path, int *fd_out, bool *at0, struct dt_err *err)
{
	static const unsigned char sig[8] = { 0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n' };
	unsigned char buf[8];
	struct stat st;
	off_t off;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		dt_err_add(err, "%s: cannot open: %s", path, strerror(errno));
		return rc;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		dt_err_add(err, "%s: cannot stat: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = dt_err_add(err, "%s: not a regular file", path);
		goto out;
	}
	for (off = 0; off + 8 <= st.st_size; off = off ? off * 2 : 512) {
		if (pread(fd, buf, 8, off) == 8 && !memcmp(buf, sig, 8)) {
			*at0 = off == 0;
			*fd_out = fd;
			return 0;
		}
	}
	rc = dt_err_add(err, "%s: not an HDF5 file (no HDF5 signature); hint: make a data set "
			"with dtrain-data", path);
out:
	close(fd);
	return rc;
}

/* All rows of a data set were written: every chunk exists, or the
 * contiguous storage has its full size. */
static int check_written(hid_t set, const char *path, const char *name, int rank,
			 const hsize_t *dims, struct dt_err *err)
{
	hid_t dcpl = H5Dget_create_plist(set), type = H5I_INVALID_HID, space = H5I_INVALID_HID;
	hsize_t cdims[2], want = 1, have = 0;
	char why[DT_H5_WHY_MAX];
	H5D_layout_t layout;
	int rc = 0, i;

	if (dcpl < 0)
		return dt_err_add(err, "%s: %s: cannot read its properties: %s", path, name,
				  dt_h5_why(why));
	layout = H5Pget_layout(dcpl);
	if (layout == H5D_VIRTUAL) {
		rc = dt_err_add(err, "%s: %s: virtual data sets are not supported (copy the data in)",
				path, name);
	} else if (layout == H5D_CHUNKED) {
		if (H5Pget_chunk(dcpl, rank, cdims) != rank) {
			rc = dt_err_add(err, "%s: %s: cannot read its chunk shape: %s", path, name,
					dt_h5_why(why));
			goto out;
		}
		for (i = 0; i < rank; i++)
			want *= (dims[i] + cdims[i] - 1) / cdims[i];
#if H5_VERSION_GE(1, 10, 5)
		space = H5Dget_space(set);
		if (space < 0 || H5Dget_num_chunks(set, space, &have) < 0) {
			rc = dt_err_add(err, "%s: %s: cannot count its chunks: %s", path, name,
					dt_h5_why(why));
			goto out;
		}
		if (have < want)
			rc = dt_err_add(err, "%s: %s: only %llu of its %llu chunks were written "
					"(an unfinished file?)", path, name, (unsigned long long)have,
					(unsigned long long)want);
#endif
	} else if (layout == H5D_CONTIGUOUS) {
		type = H5Dget_type(set);
		for (i = 0; i < rank; i++)
			want *= dims[i];
		want *= type < 0 ? 1 : H5Tget_size(type);
		have = H5Dget_storage_size(set);
		if (have < want)
			rc = dt_err_add(err, "%s: %s: its data was never written (%llu of %llu bytes "
					"stored)", path, name, (unsigned long long)have,
					(unsigned long long)want);
	}
out:
	dt_h5_close(&space, H5Sclose);
	dt_h5_close(&type, H5Tclose);
	H5Pclose(dcpl);
	return rc;
}

/* Opens /name: a simple data space of this rank and a number type. */
static int open_set(hid_t file, const char *name, int rank, const char *path, hid_t *set,
		    hsize_t *dims, H5T_class_t *cls, struct dt_err *err)
{
	hid_t space = H5I_INVALID_HID, type = H5I_INVALID_HID;
	char why[DT_H5_WHY_MAX];
	int rc = 0, got;

	*set = H5I_INVALID_HID;
	if (H5Lexists(file, name + 1, H5P_DEFAULT) <= 0)
		return dt_err_add(err, "%s: %s is missing", path, name);
	*set = H5Dopen2(file, name, H5P_DEFAULT);
	if (*set < 0) {
		rc = dt_err_add(err, "%s: %s is not a readable data set: %s", path, name, dt_h5_why(why));
		goto out;
	}
	if ((type = H5Dget_type(*set)) < 0 || (space = H5Dget_space(*set)) < 0) {
		rc = dt_err_add(err, "%s: %s: cannot read its type and shape: %s", path, name,
				dt_h5_why(why));
		goto out;
	}
	*cls = H5Tget_class(type);
	got = H5Sget_simple_extent_type(space) == H5S_SIMPLE ? H5Sget_simple_extent_ndims(space) : 0;
	if (got != rank) {
		rc = dt_err_add(err, "%s: %s must have %d dimension%s (has %d)", path, name, rank,
				rank > 1 ? "s" : "", got);
		goto out;
	}
	H5Sget_simple_extent_dims(space, dims, NULL);
out:
	dt_h5_close(&space, H5Sclose);
	dt_h5_close(&type, H5Tclose);
	if (rc)
		dt_h5_close(set, H5Dclose);
	return rc;
}

/* Is set stored as plain bytes of the native type: no filters, this exact
 * element type? Then *layout says how. */
static bool plain(hid_t set, hid_t native, H5D_layout_t *layout, hsize_t *chunk, int rank)
{
	hid_t type = H5Dget_type(set), dcpl = H5Dget_create_plist(set);
	bool ok = type >= 0 && dcpl >= 0 && H5Tequal(type, native) > 0 &&
		  H5Pget_nfilters(dcpl) == 0;

	*layout = ok ? H5Pget_layout(dcpl) : H5D_LAYOUT_ERROR;
	if (ok && *layout == H5D_CHUNKED && H5Pget_chunk(dcpl, rank, chunk) != rank)
		ok = false;
	dt_h5_close(&dcpl, H5Pclose);
	dt_h5_close(&type, H5Tclose);
	return ok;
}

/* Enables direct row reads where the bytes in the file are exactly what
 * HDF5 would return: native float32/int32, no filters, whole-row chunks
 * (their offsets looked up on first use, by H5Dget_chunk_info_by_coord)
 * or contiguous storage. Anything else stays on the HDF5 path. */
static void direct_setup(struct rt_data *d)
{
	H5D_layout_t layout;
	hsize_t chunk[2];
	int64_t chunks, i;
	haddr_t addr;

	if (plain(d->h_x, H5T_NATIVE_FLOAT, &layout, chunk, 2)) {
		if (layout == H5D_CONTIGUOUS && (addr = H5Dget_offset(d->h_x)) != HADDR_UNDEF &&
		    (d->x_addr = malloc(sizeof(int64_t)))) {
			d->x_addr[0] = (int64_t)addr;
			d->x_chunk_rows = d->n;
		}
#if H5_VERSION_GE(1, 10, 5)
		chunks = layout == H5D_CHUNKED ? (d->n + (int64_t)chunk[0] - 1) / (int64_t)chunk[0] : 0;
		/* a table of at most 32 MiB */
		if (chunks && chunks <= (1 << 22) && chunk[1] == (hsize_t)d->features &&
		    (d->x_addr = malloc((size_t)chunks * sizeof(int64_t)))) {
			for (i = 0; i < chunks; i++)
				d->x_addr[i] = -1;
			d->x_chunk_rows = (int64_t)chunk[0];
		}
#else
		(void)chunks;
		(void)i;
#endif
	}
	if (plain(d->h_y, H5T_NATIVE_INT32, &layout, chunk, 1) && layout == H5D_CONTIGUOUS &&
	    (addr = H5Dget_offset(d->h_y)) != HADDR_UNDEF) {
		d->y_addr = (int64_t)addr;
		d->y_direct = true;
	}
}

/* Opens path with HDF5 once check_file() has vouched for it; d->fd and
 * d->h_file are then d's, closed by rt_data_close() whatever follows. */
static int open_file(struct rt_data *d, const char *path, bool *at0, struct dt_err *err)
{
	hid_t fapl;
	char why[DT_H5_WHY_MAX];
	int rc;

	rc = check_file(path, &d->fd, at0, err);
	if (rc)
		return rc;
	d->fd_open = true;
	fapl = dt_h5_fapl(DT_H5_STRONG_CLOSE);
	if (fapl < 0)
		return dt_err_add(err, "%s: HDF5 cannot set up file access: %s", path, dt_h5_why(why)), -EIO;
	d->h_file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
	if (d->h_file < 0)
		dt_h5_why(why);
	H5Pclose(fapl);
	if (d->h_file < 0)
		return dt_err_add(err, "%s: HDF5 cannot open it: %s", path, why), -EIO;
	return 0;
}

/* The root attributes, what the file claims to be, come before its data:
 * a file of another kind is named as such, not as a broken data set. */
static int check_root(struct rt_data *d, const char *path, struct dt_err *err)
{
	hid_t file = d->h_file;
	char *s = NULL;
	int64_t v;
	int rc;

	if (H5Aexists(file, "format") <= 0)
		return dt_err_add(err, "%s: not a dtrain data set: no \"format\" attribute on / "
				  "(hint: make one with dtrain-data; runtime/data/DATA.md has the format)",
				  path);
	rc = attr_get_str(file, "/", "format", path, &s, err);
	if (rc)
		return rc;
	if (strcmp(s, RT_DATA_FORMAT))
		rc = dt_err_add(err, "%s: not a dtrain data set: format is \"%s\", expected \"%s\"",
				path, s, RT_DATA_FORMAT);
	free(s);
	if (rc)
		return rc;
	rc = attr_get_int(file, "/", "version", path, &v, err);
	if (rc)
		return rc;
	if (v != RT_DATA_VERSION)
		return dt_err_add(err, "%s: format version %lld is not one this dtrain reads (%d)%s",
				  path, (long long)v, RT_DATA_VERSION,
				  v > RT_DATA_VERSION ? "; hint: a newer dtrain wrote it" : "");
	rc = attr_get_int(file, "/", "classes", path, &v, err);
	if (rc)
		return rc;
	if (v < 2 || v > RT_DATA_MAX_CLASSES)
		return dt_err_add(err, "%s: attribute \"classes\" must be in [2, %d] (got %lld)",
				  path, RT_DATA_MAX_CLASSES, (long long)v);
	d->classes = (int)v;
	return attr_get_str(file, "/", "source", path, &d->source, err);
}

/* /features: numbers, [n][features], within the bounds that keep every
 * size computed from it in range, and how it was normalised. xd gets its
 * dimensions. */
static int open_features(struct rt_data *d, const char *path, hsize_t *xd, struct dt_err *err)
{
	H5T_class_t xc;
	hid_t x;
	char *s = NULL;
	int rc;

	rc = open_set(d->h_file, "/features", 2, path, &x, xd, &xc, err);
	if (rc)
		return rc;
	d->h_x = x;
	if (xc != H5T_FLOAT && xc != H5T_INTEGER)
		return dt_err_add(err, "%s: /features must hold numbers (float or integer), not %s",
				  path, dt_h5_class_name(xc));
	if (xd[0] < 1 || xd[1] < 1)
		return dt_err_add(err, "%s: /features is empty (%llu x %llu)", path,
				  (unsigned long long)xd[0], (unsigned long long)xd[1]);
	if (xd[1] > RT_DATA_MAX_FEATURES || xd[0] > (hsize_t)RT_DATA_MAX_ELEMS / xd[1])
		return dt_err_add(err, "%s: /features declares %llu x %llu values, more than this "
				  "dtrain accepts (features <= %lld, samples x features <= 2^46)",
				  path, (unsigned long long)xd[0], (unsigned long long)xd[1],
				  RT_DATA_MAX_FEATURES);
	d->n = (int64_t)xd[0];
	d->features = (int64_t)xd[1];
	rc = attr_get_num(x, "/features", "mean", path, &d->mean, err);
	if (!rc)
		rc = attr_get_num(x, "/features", "std", path, &d->std, err);
	if (rc)
		return rc;
	if (!(d->std > 0))
		return dt_err_add(err, "%s: /features: attribute \"std\" must be > 0 (got %g)", path,
				  d->std);
	rc = attr_get_str(x, "/features", "normalisation", path, &s, err);
	free(s);
	return rc;
}

/* /labels: integers, one per row of /features (xd); yd gets its dimension. */
static int open_labels(struct rt_data *d, const char *path, const hsize_t *xd, hsize_t *yd,
		       struct dt_err *err)
{
	H5T_class_t yc;
	hid_t y;
	int rc;

	rc = open_set(d->h_file, "/labels", 1, path, &y, yd, &yc, err);
	if (rc)
		return rc;
	d->h_y = y;
	if (yc != H5T_INTEGER)
		return dt_err_add(err, "%s: /labels must hold integers, not %s", path, dt_h5_class_name(yc));
	if (yd[0] != xd[0])
		return dt_err_add(err, "%s: /labels has %llu rows but /features has %llu (one label "
				  "per sample)", path, (unsigned long long)yd[0],
				  (unsigned long long)xd[0]);
	return 0;
}

/* rt_data_open() with HDF5 quiet: d holds what was opened, for the caller
 * to close on failure. Checks in the order a user fixes them: the file,
 * what it claims to be, each data set, then whether all of it was written. */
static int open_checked(struct rt_data *d, const char *path, struct dt_err *err)
{
	hsize_t xd[2], yd[1];
	bool at0 = false;
	int rc;

	rc = open_file(d, path, &at0, err);
	if (!rc)
		rc = check_root(d, path, err);
	if (!rc)
		rc = open_features(d, path, xd, err);
	if (!rc)
		rc = open_labels(d, path, xd, yd, err);
	if (!rc)
		rc = check_written(d->h_x, path, "/features", 2, xd, err);
	if (!rc)
		rc = check_written(d->h_y, path, "/labels", 1, yd, err);
	if (!rc && at0)
		direct_setup(d);
	return rc;
}

int rt_data_open(struct rt_data *d, const char *path, struct dt_err *err)
{
	struct dt_h5_quiet q;
	int rc;

	memset(d, 0, sizeof(*d));
	d->labels = 1;
	dt_h5_quiet_on(&q);
	d->path = strdup(path);
	rc = d->path ? open_checked(d, path, err) : rt__data_oom(err, path);
	if (rc)
		rt_data_close(d);
	dt_h5_quiet_off(&q);
	return rc;
}

void rt_data_close(struct rt_data *d)
{
	struct dt_h5_quiet q;

	if (d->tok) {
		rt__data_windows_close(d);
		return;
	}
	dt_h5_quiet_on(&q);
	dt_h5_close(&d->h_x, H5Dclose);
	dt_h5_close(&d->h_y, H5Dclose);
	dt_h5_close(&d->h_file, H5Fclose);
	dt_h5_quiet_off(&q);
	if (d->fd_open)
		close(d->fd);
	free(d->x_addr);
	free(d->x_all);
	free(d->y_all);
	free(d->source);
	free(d->path);
	memset(d, 0, sizeof(*d));
}

/* --- rows --- */

/* One row of a batch: which sample, and where it goes in the caller's arrays. */
struct pick {
	int64_t row;
	int pos;
};

/* By row, then position: qsort is not stable, and slots must not depend on it. */
static int pick_cmp(const void *a, const void *b)
{
	const struct pick *p = a, *q = b;

	if (p->row != q->row)
		return p->row < q->row ? -1 : 1;
	return (p->pos > q->pos) - (p->pos < q->pos);
}

/* Reads rows of set into buf ([k][cols]) with one H5Dread: the sorted,
 * distinct rows[0..k) (the union of their runs), or when rows is NULL the
 * block [first, first + k). */
static int read_rows(struct rt_data *d, hid_t set, const char *name, const int64_t *rows,
		     int64_t first, int64_t k, hid_t mtype, void *buf, struct dt_err *err)
{
	int rank = set == d->h_x ? 2 : 1;
	size_t row_bytes = (size_t)(rank == 2 ? d->features : 1) * H5Tget_size(mtype);
	hsize_t start[2] = { 0, 0 }, count[2] = { 1, 1 }, block[2];
	hid_t fs = H5I_INVALID_HID, ms = H5I_INVALID_HID;
	char why[DT_H5_WHY_MAX];
	int64_t i, j;
	int rc = 0;

	fs = H5Dget_space(set);
	if (fs < 0)
		goto fail;
	block[1] = (hsize_t)d->features;
	for (i = 0; i < k; i = j) {
		if (rows) {
			for (j = i + 1; j < k && rows[j] == rows[j - 1] + 1; j++)
				;
			start[0] = (hsize_t)rows[i];
		} else {
			j = k;
			start[0] = (hsize_t)first;
		}
		block[0] = (hsize_t)(j - i);
		ms = H5Screate_simple(rank, block, NULL);
		if (ms < 0 || H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, block) < 0 ||
		    H5Dread(set, mtype, ms, fs, H5P_DEFAULT, (char *)buf + (size_t)i * row_bytes) < 0)
			goto fail;
		dt_h5_close(&ms, H5Sclose);
	}
	goto out;
fail:
	rc = -EIO;
	dt_err_add(err, "%s: %s: reading %lld rows from row %lld failed: %s", d->path, name,
		   (long long)k, (long long)(rows ? rows[0] : first), dt_h5_why(why));
out:
	dt_h5_close(&ms, H5Sclose);
	dt_h5_close(&fs, H5Sclose);
	return rc;
}

/* One message for a bad label, wherever it was read from. */
static int bad_label(const struct rt_data *d, int64_t row, int32_t label, struct dt_err *err)
{
	return dt_err_add(err, "%s: /labels: row %lld: label %d is outside [0, %d)", d->path,
			  (long long)row, label, d->classes);
}

/* Labels y[0..k) of rows[] (or first..): a label out of range would index past the
 * model's outputs. */
static int check_labels(const struct rt_data *d, const int64_t *rows, int64_t first,
			const int32_t *y, int64_t k, struct dt_err *err)
{
	int64_t i;

	for (i = 0; i < k; i++)
		if (y[i] < 0 || y[i] >= d->classes)
			return bad_label(d, rows ? rows[i] : first + i, y[i], err);
	return 0;
}

/* Rows [row, row + k) of /features straight from the file, all in one
 * chunk (see direct_setup()). */
static int direct_x(struct rt_data *d, int64_t row, int64_t k, float *dst, struct dt_err *err)
{
	int64_t c = row / d->x_chunk_rows, bytes = d->features * (int64_t)sizeof(float);
	char why[DT_H5_WHY_MAX];
	int rc;

	if (d->x_addr[c] < 0) {
#if H5_VERSION_GE(1, 10, 5)
		hsize_t off[2] = { (hsize_t)(c * d->x_chunk_rows), 0 }, size = 0;
		unsigned mask = 0;
		haddr_t addr = HADDR_UNDEF;

		if (H5Dget_chunk_info_by_coord(d->h_x, off, &mask, &addr, &size) < 0)
			return dt_err_add(err, "%s: /features: cannot locate the chunk of row %lld: %s",
					  d->path, (long long)row, dt_h5_why(why)), -EIO;
		if (addr == HADDR_UNDEF || mask != 0 || size != (hsize_t)(d->x_chunk_rows * bytes))
			return dt_err_add(err, "%s: /features: the chunk of row %lld is missing or "
					  "not plain data", d->path, (long long)row), -EIO;
		d->x_addr[c] = (int64_t)addr;
#else
		return -EIO; /* direct_setup() enables chunks only when this exists */
#endif
	}
	rc = dt_pread_all(d->fd, dst, (size_t)(k * bytes),
			  (uint64_t)(d->x_addr[c] + (row % d->x_chunk_rows) * bytes));
	if (rc)
		dt_err_add(err, "%s: /features: reading row %lld failed: %s", d->path, (long long)row,
			   rc == -EIO ? "the file ends early (truncated?)" : strerror(-rc));
	return rc;
}

/* Labels [row, row + k) straight from the file: /labels is contiguous when direct. */
static int direct_y(struct rt_data *d, int64_t row, int64_t k, int32_t *dst, struct dt_err *err)
{
	int rc = dt_pread_all(d->fd, dst, (size_t)k * sizeof(*dst),
			      (uint64_t)(d->y_addr + row * (int64_t)sizeof(*dst)));

	if (rc)
		dt_err_add(err, "%s: /labels: reading row %lld failed: %s", d->path, (long long)row,
			   rc == -EIO ? "the file ends early (truncated?)" : strerror(-rc));
	return rc;
}

/* Rows from memory or straight from the file, in the caller's order; one
 * pread per run of consecutive rows (within a chunk). x or y NULL: not read. */
static int read_in_order(struct rt_data *d, const int64_t *idx, int n_idx, float *x, int32_t *y,
			 struct dt_err *err)
{
	size_t f = (size_t)d->features;
	int i, j, rc = 0;

	for (i = 0; x && i < n_idx; i = j) {
		for (j = i + 1; j < n_idx && idx[j] == idx[j - 1] + 1 &&
		     (d->x_all || idx[j] % d->x_chunk_rows); j++)
			;
		if (d->x_all)
			memcpy(x + (size_t)i * f, d->x_all + (size_t)idx[i] * f,
			       (size_t)(j - i) * f * sizeof(float));
		else if ((rc = direct_x(d, idx[i], j - i, x + (size_t)i * f, err)))
			return rc;
	}
	for (i = 0; y && i < n_idx; i = j) {
		for (j = i + 1; j < n_idx && idx[j] == idx[j - 1] + 1; j++)
			;
		if (d->y_all)
			memcpy(y + i, d->y_all + idx[i], (size_t)(j - i) * sizeof(*y));
		else if ((rc = direct_y(d, idx[i], j - i, y + i, err)))
			return rc;
	}
	if (y && !d->y_all)
		rc = check_labels(d, idx, 0, y, n_idx, err);
	return rc;
}

/* The distinct rows[0..k) of idx[0..n_idx) in order (k returned), and for
 * each position i of idx, slot[i]: where its row is in rows. Fills picks
 * (scratch, [n_idx]) on the way. */
static int64_t distinct_rows(const int64_t *idx, int n_idx, struct pick *picks, int64_t *rows,
			     int *slot)
{
	int64_t k = 0;
	int i;

	for (i = 0; i < n_idx; i++)
		picks[i] = (struct pick){ idx[i], i };
	qsort(picks, (size_t)n_idx, sizeof(*picks), pick_cmp);
	for (i = 0; i < n_idx; i++) {
		if (!k || picks[i].row != rows[k - 1])
			rows[k++] = picks[i].row;
		slot[picks[i].pos] = (int)(k - 1);
	}
	return k;
}

/* Through HDF5, whose cost is per call more than per row: each distinct row
 * once, one read per run of rows; unless idx is sorted (and so distinct),
 * into a buffer and from there to the caller's order. x or y NULL: not read. */
static int read_via_hdf5(struct rt_data *d, const int64_t *idx, int n_idx, bool sorted,
			 float *x, int32_t *y, struct dt_err *err)
{
	size_t f = (size_t)d->features;
	struct pick *picks = NULL;
	int64_t *rows = NULL;
	int *slot = NULL;
	float *xb = NULL;
	int32_t *yb = NULL;
	int64_t k = 0;
	int i, rc = 0;

	if (sorted) {
		rows = (int64_t *)idx;
		k = n_idx;
		xb = x;
		yb = y;
	} else {
		picks = malloc((size_t)n_idx * sizeof(*picks));
		rows = malloc((size_t)n_idx * sizeof(*rows));
		slot = malloc((size_t)n_idx * sizeof(*slot));
		if (!picks || !rows || !slot) {
			rc = rt__data_oom(err, d->path);
			goto out;
		}
		k = distinct_rows(idx, n_idx, picks, rows, slot);
		if ((x && !(xb = malloc((size_t)k * f * sizeof(float)))) ||
		    (y && !(yb = malloc((size_t)k * sizeof(int32_t))))) {
			rc = rt__data_oom(err, d->path);
			goto out;
		}
	}
	if (x)
		rc = read_rows(d, d->h_x, "/features", rows, 0, k, H5T_NATIVE_FLOAT, xb, err);
	if (!rc && y) {
		rc = read_rows(d, d->h_y, "/labels", rows, 0, k, H5T_NATIVE_INT32, yb, err);
		if (!rc)
			rc = check_labels(d, rows, 0, yb, k, err);
	}
	if (rc || sorted)
		goto out;
	for (i = 0; i < n_idx; i++) {
		if (x)
			memcpy(x + (size_t)i * f, xb + (size_t)slot[i] * f, f * sizeof(float));
		if (y)
			y[i] = yb[slot[i]];
	}
out:
	if (!sorted) {
		free(yb);
		free(xb);
		free(rows);
	}
	free(slot);
	free(picks);
	return rc;
}

/* rt_data_read() of a table with HDF5 quiet: x and y each from memory, the
 * file, or HDF5, whichever is the fastest open to them (data.h). */
static int read_picks(struct rt_data *d, const int64_t *idx, int n_idx, float *x, int32_t *y,
		      struct dt_err *err)
{
	bool hx = x && !d->x_all && !d->x_chunk_rows; /* through HDF5 */
	bool hy = y && !d->y_all && !d->y_direct;
	bool sorted = true;
	int i, rc;

	for (i = 0; i < n_idx; i++) {
		if (idx[i] < 0 || idx[i] >= d->n)
			return dt_err_add(err, "%s: row %lld is outside [0, %lld)", d->path,
					  (long long)idx[i], (long long)d->n);
		if (i && idx[i] <= idx[i - 1])
			sorted = false;
	}
	rc = read_in_order(d, idx, n_idx, hx ? NULL : x, hy ? NULL : y, err);
	if (rc || (!hx && !hy))
		return rc;
	return read_via_hdf5(d, idx, n_idx, sorted, hx ? x : NULL, hy ? y : NULL, err);
}

int rt_data_read(struct rt_data *d, const int64_t *idx, int n_idx, float *x, int32_t *y,
		 struct dt_err *err)
{
	struct dt_h5_quiet q;
	int rc;

	if (n_idx < 0)
		return dt_err_add(err, "%s: negative row count %d", d->path, n_idx);
	if (n_idx == 0 || (!x && !y))
		return 0;
	if (d->tok)
		return rt__data_windows_read(d, idx, n_idx, x, y, err);
	dt_h5_quiet_on(&q);
	rc = read_picks(d, idx, n_idx, x, y, err);
	dt_h5_quiet_off(&q);
	/* rows in memory were checked as they were loaded */
	if (!rc && x && !d->x_all)
		rc = rt_data_check_finite(d, idx, 0, n_idx, x, true, err);
	return rc;
}

/* Rows per block when scanning the whole data set: a few MiB of features. */
static int64_t block_rows(const struct rt_data *d)
{
	int64_t r = (int64_t)BLOCK_BYTES / (d->features * (int64_t)sizeof(float));

	return r < 1 ? 1 : r;
}

/* rt_data_load_all() of a table with HDF5 quiet; a part that fails is not kept. */
static int load_all(struct rt_data *d, bool x, bool y, struct dt_err *err)
{
	size_t n = (size_t)d->n, f = (size_t)d->features;
	int64_t first, k, step = block_rows(d);
	int rc;

	if (x && !d->x_all) {
		if (n > SIZE_MAX / sizeof(float) / f)
			return dt_err_add(err, "%s: /features does not fit in memory", d->path), -ENOMEM;
		d->x_all = malloc(n * f * sizeof(float));
		if (!d->x_all)
			return dt_err_add(err, "%s: no memory to load /features (%lld bytes)", d->path,
					  (long long)rt_data_bytes(d)), -ENOMEM;
		/* in blocks, so that a type conversion never needs a second copy */
		for (first = 0; first < d->n; first += k) {
			k = d->n - first < step ? d->n - first : step;
			rc = read_rows(d, d->h_x, "/features", NULL, first, k, H5T_NATIVE_FLOAT,
				       d->x_all + (size_t)first * f, err);
			if (!rc)
				rc = rt_data_check_finite(d, NULL, first, k, d->x_all + (size_t)first * f,
							   true, err);
			if (rc) {
				free(d->x_all);
				d->x_all = NULL;
				return rc;
			}
		}
	}
	if (y && !d->y_all) {
		d->y_all = malloc(n * sizeof(int32_t));
		if (!d->y_all)
			return rt__data_oom(err, d->path);
		rc = read_rows(d, d->h_y, "/labels", NULL, 0, d->n, H5T_NATIVE_INT32, d->y_all, err);
		if (!rc)
			rc = check_labels(d, NULL, 0, d->y_all, d->n, err);
		if (rc) {
			free(d->y_all);
			d->y_all = NULL;
			return rc;
		}
	}
	return 0;
}

int rt_data_load_all(struct rt_data *d, bool x, bool y, struct dt_err *err)
{
	struct dt_h5_quiet q;
	int rc;

	if (d->tok)
		return x || y ? rt__data_windows_load(d, err) : 0;
	dt_h5_quiet_on(&q);
	rc = load_all(d, x, y, err);
	dt_h5_quiet_off(&q);
	return rc;
}

/* --- checks and queries --- */

/* rt_data_verify() with HDF5 quiet, in blocks: a set larger than memory verifies too. */
static int verify(struct rt_data *d, int64_t *counts, struct dt_err *err)
{
	size_t f = (size_t)d->features;
	int64_t step = block_rows(d), first, k, i;
	float *xb = NULL;
	int32_t *yb = NULL;
	int rc = 0;

	if (counts)
		memset(counts, 0, (size_t)d->classes * sizeof(*counts));
	if (step < 1 << 20)
		step = 1 << 20 < d->n ? 1 << 20 : d->n; /* labels alone come in bigger blocks */
	xb = d->x_all ? NULL : malloc((size_t)block_rows(d) * f * sizeof(float));
	yb = d->y_all ? NULL : malloc((size_t)step * sizeof(int32_t));
	if ((!d->x_all && !xb) || (!d->y_all && !yb)) {
		rc = rt__data_oom(err, d->path);
		goto out;
	}
	for (first = 0; first < d->n; first += k) {
		const int32_t *y = d->y_all ? d->y_all + first : yb;

		k = d->n - first < step ? d->n - first : step;
		if (!d->y_all && (rc = read_rows(d, d->h_y, "/labels", NULL, first, k,
						 H5T_NATIVE_INT32, yb, err)))
			goto out;
		if ((rc = check_labels(d, NULL, first, y, k, err)))
			goto out;
		for (i = 0; counts && i < k; i++)
			counts[y[i]]++;
	}
	step = block_rows(d);
	for (first = 0; first < d->n; first += k) {
		const float *x = d->x_all ? d->x_all + (size_t)first * f : xb;

		k = d->n - first < step ? d->n - first : step;
		if (!d->x_all && (rc = read_rows(d, d->h_x, "/features", NULL, first, k,
						 H5T_NATIVE_FLOAT, xb, err)))
			goto out;
		if ((rc = rt_data_check_finite(d, NULL, first, k, x, false, err)))
			goto out;
	}
out:
	free(yb);
	free(xb);
	return rc;
}

int rt_data_verify(struct rt_data *d, int64_t *counts, struct dt_err *err)
{
	struct dt_h5_quiet q;
	int rc;

	dt_h5_quiet_on(&q);
	rc = verify(d, counts, err);
	dt_h5_quiet_off(&q);
	return rc;
}

int64_t rt_data_bytes(const struct rt_data *d)
{
	if (d->tok)
		return d->tok_bytes;
	return d->n * d->features * (int64_t)sizeof(float);
}

struct attr_walk {
	rt_data_attr_fn *fn;
	void *arg;
	const char *obj;
	const char *path;
};

/* One attribute as text: a number, a quoted string, or its shape and type. */
static void attr_text(hid_t obj, const struct attr_walk *w, const char *name, char *buf,
		      size_t size)
{
	struct dt_err err = { 0 };
	hid_t attr = H5Aopen(obj, name, H5P_DEFAULT), type = H5I_INVALID_HID;
	hid_t space = H5I_INVALID_HID;
	hssize_t points = -1;
	H5T_class_t c = H5T_NO_CLASS;
	char *s = NULL;
	int64_t v;
	double g;

	if (attr >= 0) {
		type = H5Aget_type(attr);
		space = H5Aget_space(attr);
		c = type < 0 ? H5T_NO_CLASS : H5Tget_class(type);
		points = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
	}
	if (points != 1)
		snprintf(buf, size, "(%s, %lld values)", dt_h5_class_name(c), (long long)points);
	else if (c == H5T_INTEGER && !attr_get_int(obj, w->obj, name, w->path, &v, &err))
		snprintf(buf, size, "%lld", (long long)v);
	else if (c == H5T_FLOAT && !attr_get_num(obj, w->obj, name, w->path, &g, &err))
		snprintf(buf, size, "%.9g", g);
	else if (c == H5T_STRING && !attr_get_str(obj, w->obj, name, w->path, &s, &err))
		snprintf(buf, size, "\"%.*s%s\"", (int)(size - 8), s, strlen(s) > size - 8 ? "..." : "");
	else
		snprintf(buf, size, "(%s, unreadable)", dt_h5_class_name(c));
	free(s);
	dt_h5_close(&space, H5Sclose);
	dt_h5_close(&type, H5Tclose);
	dt_h5_close(&attr, H5Aclose);
}

/* H5Aiterate2's callback: attr_text() for the caller's fn. */
static herr_t attr_cb(hid_t obj, const char *name, const H5A_info_t *info, void *arg)
{
	struct attr_walk *w = arg;
	char buf[400];

	(void)info;
	attr_text(obj, w, name, buf, sizeof(buf));
	w->fn(w->arg, w->obj, name, buf);
	return 0;
}

int rt_data_attrs(struct rt_data *d, rt_data_attr_fn *fn, void *arg, struct dt_err *err)
{
	struct attr_walk w = { fn, arg, "/", d->path };
	struct dt_h5_quiet q;
	char why[DT_H5_WHY_MAX];
	hsize_t at = 0;
	int rc = 0;

	dt_h5_quiet_on(&q);
	if (H5Aiterate2(d->h_file, H5_INDEX_NAME, H5_ITER_INC, &at, attr_cb, &w) < 0) {
		rc = dt_err_add(err, "%s: cannot list the attributes of /: %s", d->path, dt_h5_why(why));
		goto out;
	}
	w.obj = "/features";
	at = 0;
	if (H5Aiterate2(d->h_x, H5_INDEX_NAME, H5_ITER_INC, &at, attr_cb, &w) < 0)
		rc = dt_err_add(err, "%s: cannot list the attributes of /features: %s", d->path,
				dt_h5_why(why));
out:
	dt_h5_quiet_off(&q);
	return rc ? -EIO : 0;
}

