/*
 * data.c - dtrain data sets in HDF5: checked opening, gathering the rows of
 * a batch, atomic writing, and the two sources dtrain-data makes (see data.h
 * for the format and runtime/data/DATA.md for the guide).
 *
 * Every public function silences HDF5's automatic error printing for its
 * duration (restoring the caller's setting) and reports HDF5's innermost
 * message inside ours instead, so that a user sees one line naming the file.
 *
 * Sections: HDF5 helpers, attributes, opening, rows, checks and queries,
 * writing, IDX files, Fashion-MNIST, synthetic.
 */
#include "runtime/data/data.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>
#include <zlib.h>

#include "base/h5.h"
#include "base/rng.h"
#include "base/io.h"
#include "base/path.h"

_Static_assert(sizeof(hid_t) == sizeof(int64_t), "data.h keeps hid_t in int64_t fields");

#define MAX_STR_ATTR 65536          /* longest fixed-length string attribute we read */
#define BLOCK_BYTES (8u << 20)      /* features per block when scanning the whole set */

/* --- HDF5 helpers (the shared ones: base/h5.h) --- */

static int oom(struct dt_err *err, const char *path)
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
		return oom(err, path);
	if (rc == -EIO)
		dt_err_add(err, "%s: %s: cannot read attribute \"%s\": %s", path, oname, name, why);
	else
		dt_err_add(err, "%s: %s: attribute \"%s\" %s", path, oname, name, why);
	return -EINVAL;
}

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

static int open_checked(struct rt_data *d, const char *path, struct dt_err *err)
{
	hid_t fapl = H5I_INVALID_HID, file, x, y;
	hsize_t xd[2], yd[1];
	H5T_class_t xc, yc;
	char why[DT_H5_WHY_MAX], *s = NULL;
	bool at0 = false;
	int64_t v;
	int rc;

	rc = check_file(path, &d->fd, &at0, err);
	if (rc)
		return rc;
	d->fd_open = true;
	fapl = dt_h5_fapl(DT_H5_STRONG_CLOSE);
	if (fapl < 0)
		return dt_err_add(err, "%s: HDF5 cannot set up file access: %s", path, dt_h5_why(why)), -EIO;
	file = d->h_file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
	if (file < 0)
		dt_h5_why(why);
	H5Pclose(fapl);
	if (file < 0)
		return dt_err_add(err, "%s: HDF5 cannot open it: %s", path, why), -EIO;

	/* root attributes: what the file claims to be */
	if (H5Aexists(file, "format") <= 0)
		return dt_err_add(err, "%s: not a dtrain data set: no \"format\" attribute on / "
				  "(hint: make one with dtrain-data; runtime/data/DATA.md has the format)",
				  path);
	rc = attr_get_str(file, "/", "format", path, &s, err);
	if (rc)
		return rc;
	if (strcmp(s, RT_DATA_FORMAT)) {
		rc = dt_err_add(err, "%s: not a dtrain data set: format is \"%s\", expected \"%s\"",
				path, s, RT_DATA_FORMAT);
		free(s);
		return rc;
	}
	free(s);
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
	rc = attr_get_str(file, "/", "source", path, &d->source, err);
	if (rc)
		return rc;

	/* /features: numbers, [n][features], within bounds, all written */
	rc = open_set(file, "/features", 2, path, &x, xd, &xc, err);
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
	if (rc)
		return rc;
	free(s);

	/* /labels: integers, [n], all written */
	rc = open_set(file, "/labels", 1, path, &y, yd, &yc, err);
	if (rc)
		return rc;
	d->h_y = y;
	if (yc != H5T_INTEGER)
		return dt_err_add(err, "%s: /labels must hold integers, not %s", path, dt_h5_class_name(yc));
	if (yd[0] != xd[0])
		return dt_err_add(err, "%s: /labels has %llu rows but /features has %llu (one label "
				  "per sample)", path, (unsigned long long)yd[0],
				  (unsigned long long)xd[0]);
	rc = check_written(x, path, "/features", 2, xd, err);
	if (!rc)
		rc = check_written(y, path, "/labels", 1, yd, err);
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
	rc = d->path ? open_checked(d, path, err) : oom(err, path);
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

static int bad_label(const struct rt_data *d, int64_t row, int32_t label, struct dt_err *err)
{
	return dt_err_add(err, "%s: /labels: row %lld: label %d is outside [0, %d)", d->path,
			  (long long)row, label, d->classes);
}

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

static int direct_y(struct rt_data *d, int64_t row, int64_t k, int32_t *dst, struct dt_err *err)
{
	int rc = dt_pread_all(d->fd, dst, (size_t)k * sizeof(*dst),
			      (uint64_t)(d->y_addr + row * (int64_t)sizeof(*dst)));

	if (rc)
		dt_err_add(err, "%s: /labels: reading row %lld failed: %s", d->path, (long long)row,
			   rc == -EIO ? "the file ends early (truncated?)" : strerror(-rc));
	return rc;
}

static int read_picks(struct rt_data *d, const int64_t *idx, int n_idx, float *x, int32_t *y,
		      struct dt_err *err)
{
	size_t f = (size_t)d->features;
	bool hx = x && !d->x_all && !d->x_chunk_rows; /* through HDF5 */
	bool hy = y && !d->y_all && !d->y_direct;
	struct pick *picks = NULL;
	int64_t *rows = NULL;
	int *slot = NULL;
	float *xb = NULL;
	int32_t *yb = NULL;
	bool sorted = true;
	int64_t k = 0;
	int i, j, rc = 0;

	for (i = 0; i < n_idx; i++) {
		if (idx[i] < 0 || idx[i] >= d->n)
			return dt_err_add(err, "%s: row %lld is outside [0, %lld)", d->path,
					  (long long)idx[i], (long long)d->n);
		if (i && idx[i] <= idx[i - 1])
			sorted = false;
	}

	/* from memory or straight from the file, in the caller's order; one
	 * pread per run of consecutive rows (within a chunk) */
	for (i = 0; x && !hx && i < n_idx; i = j) {
		for (j = i + 1; j < n_idx && idx[j] == idx[j - 1] + 1 &&
		     (d->x_all || idx[j] % d->x_chunk_rows); j++)
			;
		if (d->x_all)
			memcpy(x + (size_t)i * f, d->x_all + (size_t)idx[i] * f,
			       (size_t)(j - i) * f * sizeof(float));
		else if ((rc = direct_x(d, idx[i], j - i, x + (size_t)i * f, err)))
			return rc;
	}
	for (i = 0; y && !hy && i < n_idx; i = j) {
		for (j = i + 1; j < n_idx && idx[j] == idx[j - 1] + 1; j++)
			;
		if (d->y_all)
			memcpy(y + i, d->y_all + idx[i], (size_t)(j - i) * sizeof(*y));
		else if ((rc = direct_y(d, idx[i], j - i, y + i, err)))
			return rc;
	}
	if (y && !hy && !d->y_all && (rc = check_labels(d, idx, 0, y, n_idx, err)))
		return rc;
	if (!hx && !hy)
		return 0;

	/* through HDF5: each distinct row once, one read per run of rows */
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
			rc = oom(err, d->path);
			goto out;
		}
		for (i = 0; i < n_idx; i++)
			picks[i] = (struct pick){ idx[i], i };
		qsort(picks, (size_t)n_idx, sizeof(*picks), pick_cmp);
		for (i = 0; i < n_idx; i++) {
			if (!k || picks[i].row != rows[k - 1])
				rows[k++] = picks[i].row;
			slot[picks[i].pos] = (int)(k - 1);
		}
		if ((hx && !(xb = malloc((size_t)k * f * sizeof(float)))) ||
		    (hy && !(yb = malloc((size_t)k * sizeof(int32_t))))) {
			rc = oom(err, d->path);
			goto out;
		}
	}
	if (hx)
		rc = read_rows(d, d->h_x, "/features", rows, 0, k, H5T_NATIVE_FLOAT, xb, err);
	if (!rc && hy) {
		rc = read_rows(d, d->h_y, "/labels", rows, 0, k, H5T_NATIVE_INT32, yb, err);
		if (!rc)
			rc = check_labels(d, rows, 0, yb, k, err);
	}
	if (rc || sorted)
		goto out;
	for (i = 0; i < n_idx; i++) {
		if (hx)
			memcpy(x + (size_t)i * f, xb + (size_t)slot[i] * f, f * sizeof(float));
		if (hy)
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
			return oom(err, d->path);
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
		rc = oom(err, d->path);
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

/* --- writing --- */

static void writer_close(struct rt_data_writer *w)
{
	dt_h5_close(&w->h_x, H5Dclose);
	dt_h5_close(&w->h_y, H5Dclose);
	dt_h5_close(&w->h_file, H5Fclose);
}

static void writer_free(struct rt_data_writer *w)
{
	free(w->tmp);
	free(w->path);
	memset(w, 0, sizeof(*w));
}

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
		return oom(err, path);
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

static bool reserved(const char *name)
{
	return !strcmp(name, "format") || !strcmp(name, "version") || !strcmp(name, "classes") ||
	       !strcmp(name, "source");
}

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
	rc = rt_data_append(&w, x, y, meta->n, err);
	if (rc) {
		rt_data_abort(&w);
		return rc;
	}
	return rt_data_commit(&w, err);
}

/* --- IDX files --- */

/* An IDX file (LeCun's MNIST format): 4 magic bytes (0, 0, element type,
 * number of dimensions), the dimensions as big-endian uint32, then the
 * elements row-major. We read unsigned-byte files (type 0x08) only. */
struct idx {
	char *path;
	uint32_t dims[3];
	uint8_t *data;  /* [dims[0]][dims[1]][dims[2]] */
	size_t bytes;
};

static void idx_free(struct idx *f)
{
	free(f->path);
	free(f->data);
	memset(f, 0, sizeof(*f));
}

/* dir/name.gz, else dir/name (zlib reads plain files as they are). */
static int idx_find(const char *dir, const char *name, char **out, struct dt_err *err)
{
	char *gz;

	*out = NULL;
	if (asprintf(&gz, "%s.gz", name) < 0)
		return oom(err, dir);
	*out = dt_path_join(dir, gz);
	free(gz);
	if (!*out)
		return oom(err, dir);
	if (access(*out, F_OK) == 0)
		return 0;
	free(*out);
	*out = dt_path_join(dir, name);
	if (!*out)
		return oom(err, dir);
	if (access(*out, F_OK) == 0)
		return 0;
	free(*out);
	*out = NULL;
	return dt_err_add(err, "%s: has neither %s.gz nor %s (is this the Fashion-MNIST "
			  "directory?)", dir, name, name), -ENOENT;
}

/* gzread of exactly len bytes; *got says how many came. 0, or -EIO when
 * zlib reports corrupt data. */
static int gz_read(gzFile gz, void *buf, size_t len, size_t *got, const char *path,
		   struct dt_err *err)
{
	int n, errnum;
	const char *msg;

	*got = 0;
	while (*got < len) {
		size_t want = len - *got > (1u << 30) ? (1u << 30) : len - *got;

		n = gzread(gz, (char *)buf + *got, (unsigned)want);
		if (n <= 0)
			break;
		*got += (size_t)n;
	}
	msg = gzerror(gz, &errnum);
	if (errnum != Z_OK && errnum != Z_STREAM_END) {
		if (errnum == Z_BUF_ERROR)
			return dt_err_add(err, "%s: truncated gzip data (%s)", path, msg), -EIO;
		return dt_err_add(err, "%s: corrupt gzip data: %s", path,
				  errnum == Z_ERRNO ? strerror(errno) : msg), -EIO;
	}
	return 0;
}

/* Reads the IDX file path: unsigned bytes with ndims dimensions, at most
 * max_items items of at most 4096 bytes each, no byte missing or extra. */
static int idx_load(struct idx *f, char *path, int ndims, uint32_t max_items,
		    struct dt_err *err)
{
	unsigned char head[16] = { 0 }, extra;
	uint32_t magic, want = 0x00000800u | (uint32_t)ndims;
	size_t got, item = 1, cap;
	gzFile gz = NULL;
	int rc = 0, i;

	memset(f, 0, sizeof(*f));
	f->path = path;
	errno = 0;
	gz = gzopen(path, "rb");
	if (!gz) {
		rc = errno ? -errno : -ENOMEM;
		return dt_err_add(err, "%s: cannot open: %s", path, strerror(-rc)), rc;
	}
	gzbuffer(gz, 1 << 17);
	rc = gz_read(gz, head, 4 + 4 * (size_t)ndims, &got, path, err);
	if (rc)
		goto out;
	magic = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 | (uint32_t)head[2] << 8 | head[3];
	if (got < 4 || magic != want) {
		rc = dt_err_add(err, "%s: not an IDX file of unsigned bytes with %d dimension%s "
				"(magic number 0x%08x, expected 0x%08x)", path, ndims,
				ndims > 1 ? "s" : "", got < 4 ? 0 : magic, want);
		goto out;
	}
	if (got < 4 + 4 * (size_t)ndims) {
		rc = dt_err_add(err, "%s: truncated IDX header", path);
		goto out;
	}
	for (i = 0; i < ndims; i++) {
		const unsigned char *p = head + 4 + 4 * i;

		f->dims[i] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
		if (f->dims[i] < 1 || f->dims[i] > (i ? 4096u : max_items)) {
			rc = dt_err_add(err, "%s: implausible IDX dimension %d: %u", path, i,
					f->dims[i]);
			goto out;
		}
		if (i)
			item *= f->dims[i];
	}
	/* grow the buffer as data arrives: a corrupt count costs no memory */
	f->bytes = (size_t)f->dims[0] * item;
	for (got = 0, cap = 0; got < f->bytes;) {
		size_t n;
		uint8_t *p;

		cap = cap ? cap * 2 : 1 << 20;
		if (cap > f->bytes)
			cap = f->bytes;
		p = realloc(f->data, cap);
		if (!p) {
			rc = oom(err, path);
			goto out;
		}
		f->data = p;
		rc = gz_read(gz, f->data + got, cap - got, &n, path, err);
		if (rc)
			goto out;
		got += n;
		if (got < cap)
			break;
	}
	if (got < f->bytes) {
		rc = dt_err_add(err, "%s: truncated: the header promises %u items (%zu bytes of data) "
				"but the file has %zu", path, f->dims[0], f->bytes, got);
		goto out;
	}
	rc = gz_read(gz, &extra, 1, &got, path, err);
	if (!rc && got)
		rc = dt_err_add(err, "%s: data continues after the %u items its header promises",
				path, f->dims[0]);
out:
	if (gz)
		gzclose(gz);
	if (rc) {
		f->path = NULL; /* the caller still owns path on failure */
		idx_free(f);
	}
	return rc;
}

/* --- Fashion-MNIST --- */

#define FM_SIDE 28
#define FM_CLASSES 10
#define FM_MAX 1000000 /* items per IDX file we accept (the real ones: 60000, 10000) */

static const char fm_classes[] =
	"T-shirt/top,Trouser,Pullover,Dress,Coat,Sandal,Shirt,Sneaker,Bag,Ankle boot";

struct fm_part {
	const char *tag;   /* "train", "t10k" */
	const char *out;   /* "train.h5", "test.h5" */
	struct idx images, labels;
};

static int fm_read(const char *dir, struct fm_part *p, struct dt_err *err)
{
	char name[64], *path = NULL;
	uint32_t i;
	int rc;

	snprintf(name, sizeof(name), "%s-images-idx3-ubyte", p->tag);
	rc = idx_find(dir, name, &path, err);
	if (!rc && (rc = idx_load(&p->images, path, 3, FM_MAX, err)))
		free(path);
	if (rc)
		return rc;
	if (p->images.dims[1] != FM_SIDE || p->images.dims[2] != FM_SIDE)
		return dt_err_add(err, "%s: images are %u x %u, expected %d x %d (is this "
				  "Fashion-MNIST?)", p->images.path, p->images.dims[1],
				  p->images.dims[2], FM_SIDE, FM_SIDE);
	snprintf(name, sizeof(name), "%s-labels-idx1-ubyte", p->tag);
	rc = idx_find(dir, name, &path, err);
	if (!rc && (rc = idx_load(&p->labels, path, 1, FM_MAX, err)))
		free(path);
	if (rc)
		return rc;
	if (p->labels.dims[0] != p->images.dims[0])
		return dt_err_add(err, "%s: %u labels, but %s has %u images", p->labels.path,
				  p->labels.dims[0], p->images.path, p->images.dims[0]);
	for (i = 0; i < p->labels.dims[0]; i++)
		if (p->labels.data[i] >= FM_CLASSES)
			return dt_err_add(err, "%s: item %u: label %u is outside 0..%d", p->labels.path,
					  i, p->labels.data[i], FM_CLASSES - 1);
	return 0;
}

static int fm_write(const char *out_dir, struct fm_part *p, const struct rt_data_meta *base,
		    rt_data_progress_fn *progress, void *arg, struct dt_err *err)
{
	const size_t f = FM_SIDE * FM_SIDE;
	struct rt_data_meta m = *base;
	struct rt_data_writer w;
	char *path = NULL, *source = NULL;
	float lut[256], *x = NULL;
	int32_t y[RT_DATA_CHUNK_ROWS];
	int64_t first, k, i;
	size_t j;
	int rc;

	path = dt_path_join(out_dir, p->out);
	if (!path)
		return oom(err, out_dir);
	if (asprintf(&source, "Fashion-MNIST (Xiao, Rasul & Vollgraf 2017), %s set: %s, %s",
		     strcmp(p->tag, "train") ? "test" : "training", p->images.path,
		     p->labels.path) < 0) {
		source = NULL;
		rc = oom(err, out_dir);
		goto out;
	}
	/* every pixel value maps to one float, computed once in double */
	for (j = 0; j < 256; j++)
		lut[j] = (float)(((double)j / 255.0 - m.mean) / m.std);
	m.n = p->images.dims[0];
	m.source = source;
	x = malloc(RT_DATA_CHUNK_ROWS * f * sizeof(float));
	if (!x) {
		rc = oom(err, path);
		goto out;
	}
	rc = rt_data_create(&w, path, &m, err);
	if (rc)
		goto out;
	rc = rt_data_attr_int(&w, "image_rows", FM_SIDE, err);
	if (!rc)
		rc = rt_data_attr_int(&w, "image_cols", FM_SIDE, err);
	if (!rc)
		rc = rt_data_attr_str(&w, "class_names", fm_classes, err);
	for (first = 0; !rc && first < m.n; first += k) {
		k = m.n - first < RT_DATA_CHUNK_ROWS ? m.n - first : RT_DATA_CHUNK_ROWS;
		for (i = 0; i < k; i++) {
			const uint8_t *px = p->images.data + (size_t)(first + i) * f;

			for (j = 0; j < f; j++)
				x[(size_t)i * f + j] = lut[px[j]];
			y[i] = p->labels.data[first + i];
		}
		rc = rt_data_append(&w, x, y, k, err);
		if (!rc && progress && first + k < m.n)
			progress(arg, path, first + k, m.n);
	}
	if (rc)
		rt_data_abort(&w);
	else
		rc = rt_data_commit(&w, err);
	if (!rc && progress)
		progress(arg, path, m.n, m.n);
out:
	free(x);
	free(source);
	free(path);
	return rc;
}

int rt_data_make_fashion_mnist(const char *src_dir, const char *out_dir,
			       rt_data_progress_fn *progress, void *arg, struct dt_err *err)
{
	struct fm_part parts[2] = { { "train", "train.h5", { 0 }, { 0 } },
				    { "t10k", "test.h5", { 0 }, { 0 } } };
	struct rt_data_meta m = { 0 };
	struct stat st;
	uint64_t hist[256] = { 0 };
	double sum = 0, var = 0, total;
	size_t i;
	int rc;

	if (stat(src_dir, &st) < 0) {
		rc = -errno;
		return dt_err_add(err, "%s: cannot use as the source directory: %s (hint: --src DIR, "
				  "where the *-ubyte.gz files are)", src_dir, strerror(-rc)), rc;
	}
	if (!S_ISDIR(st.st_mode))
		return dt_err_add(err, "%s: not a directory (hint: --src DIR, where the *-ubyte.gz "
				  "files are)", src_dir), -ENOTDIR;
	/* read and check every input before writing anything */
	rc = fm_read(src_dir, &parts[0], err);
	if (!rc)
		rc = fm_read(src_dir, &parts[1], err);
	if (rc)
		goto out;

	/* one scalar mean and std over all training pixels, from a histogram
	 * (exact, and the same on every machine) */
	for (i = 0; i < parts[0].images.bytes; i++)
		hist[parts[0].images.data[i]]++;
	total = (double)parts[0].images.bytes;
	for (i = 0; i < 256; i++)
		sum += (double)hist[i] * ((double)i / 255.0);
	m.mean = sum / total;
	for (i = 0; i < 256; i++) {
		double dv = (double)i / 255.0 - m.mean;

		var += (double)hist[i] * dv * dv;
	}
	m.std = sqrt(var / total);
	if (!(m.std > 0)) {
		rc = dt_err_add(err, "%s: every training pixel has the same value", parts[0].images.path);
		goto out;
	}
	m.features = FM_SIDE * FM_SIDE;
	m.classes = FM_CLASSES;
	m.normalisation = "raw = pixel / 255 (0..1); mean and std: one scalar over all pixels of "
			  "the training set (population std); the test set uses the training set's";

	rc = dt_mkdirs(out_dir, 0755);
	if (rc) {
		dt_err_add(err, "%s: cannot create the directory: %s", out_dir, strerror(-rc));
		goto out;
	}
	rc = fm_write(out_dir, &parts[0], &m, progress, arg, err);
	if (!rc)
		rc = fm_write(out_dir, &parts[1], &m, progress, arg, err);
out:
	for (i = 0; i < 2; i++) {
		idx_free(&parts[i].images);
		idx_free(&parts[i].labels);
	}
	return rc;
}

/* --- synthetic --- */

/* The nearest-centroid rule is the Bayes rule here (equal priors, equal
 * isotropic noise); we score it on up to this many samples, and at most
 * about 1e9 multiply-adds. */
#define SYN_SCORE_SAMPLES 10000
#define SYN_SCORE_WORK 1000000000LL

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

int rt_data_make_synthetic(const char *path, const struct rt_data_synthetic *p,
			   rt_data_progress_fn *progress, void *arg, struct dt_err *err)
{
	struct rt_data_meta m = { 0 };
	struct rt_data_writer w;
	struct dt_rng r;
	size_t f = (size_t)p->features;
	float *c = NULL, *x = NULL, scale;
	int32_t y[RT_DATA_CHUNK_ROWS];
	int64_t first, k, i, scored = 0, right = 0, score_max;
	char *source = NULL;
	size_t j;
	int rc;

	if (p->features < 1 || p->features > RT_DATA_MAX_FEATURES || p->classes < 2 ||
	    p->classes > RT_DATA_MAX_CLASSES || (int64_t)p->classes * p->features > 100000000LL)
		return dt_err_add(err, "%s: classes x features must be at most 1e8, with classes in "
				  "[2, %d] (got %d x %lld)", path, RT_DATA_MAX_CLASSES, p->classes,
				  (long long)p->features);
	if (p->stream == UINT64_MAX)
		return dt_err_add(err, "%s: stream must be below 2^64 - 1", path);
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
		return oom(err, path);
	m.source = source;
	c = malloc((size_t)p->classes * f * sizeof(float));
	x = malloc(RT_DATA_CHUNK_ROWS * f * sizeof(float));
	if (!c || !x) {
		rc = oom(err, path);
		goto out;
	}
	rc = rt_data_create(&w, path, &m, err);
	if (rc)
		goto out;

	/* centroids ~ N(0, 8/F): squared distance between two is about
	 * 2 F * 8/F = 16, i.e. 4 noise standard deviations apart */
	scale = (float)sqrt(8.0 / (double)p->features);
	dt_rng_seed(&r, p->seed, 0);
	for (j = 0; j < (size_t)p->classes * f; j++)
		c[j] = scale * dt_rng_normal(&r);
	score_max = SYN_SCORE_WORK / ((int64_t)p->classes * p->features);
	if (score_max > SYN_SCORE_SAMPLES)
		score_max = SYN_SCORE_SAMPLES;
	if (score_max < 1)
		score_max = 1;

	dt_rng_seed(&r, p->seed, p->stream + 1);
	for (first = 0; !rc && first < m.n; first += k) {
		k = m.n - first < RT_DATA_CHUNK_ROWS ? m.n - first : RT_DATA_CHUNK_ROWS;
		for (i = 0; i < k; i++) {
			float *xi = x + (size_t)i * f;

			y[i] = (int32_t)dt_rng_below(&r, (uint64_t)p->classes);
			for (j = 0; j < f; j++)
				xi[j] = c[(size_t)y[i] * f + j] + dt_rng_normal(&r);
			if (scored < score_max) {
				right += nearest(c, p->classes, p->features, xi) == y[i];
				scored++;
			}
		}
		rc = rt_data_append(&w, x, y, k, err);
		if (!rc && progress && first + k < m.n)
			progress(arg, path, first + k, m.n);
	}
	if (!rc)
		rc = rt_data_attr_int(&w, "seed", (int64_t)p->seed, err);
	if (!rc)
		rc = rt_data_attr_int(&w, "stream", (int64_t)p->stream, err);
	if (!rc)
		rc = rt_data_attr_num(&w, "nearest_centroid_accuracy", (double)right / (double)scored,
				      err);
	if (!rc)
		rc = rt_data_attr_int(&w, "nearest_centroid_samples", scored, err);
	if (rc)
		rt_data_abort(&w);
	else
		rc = rt_data_commit(&w, err);
	if (!rc && progress)
		progress(arg, path, m.n, m.n);
out:
	free(x);
	free(c);
	free(source);
	return rc;
}
