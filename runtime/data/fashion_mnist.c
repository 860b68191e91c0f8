/*
 * fashion_mnist.c - Fashion-MNIST (Xiao et al. 2017) as dtrain data sets
 * (data.h, rt_data_make_fashion_mnist): its IDX files, gzip-compressed or
 * not, read and checked whole, then written through writer.c.
 *
 * Sections: IDX files, Fashion-MNIST.
 */
#include "runtime/data/data.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "base/io.h"
#include "base/path.h"
#include "runtime/data/internal.h"

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

/* Frees path too: a loaded file owns its name, for the messages that follow. */
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
		return rt__data_oom(err, dir);
	*out = dt_path_join(dir, gz);
	free(gz);
	if (!*out)
		return rt__data_oom(err, dir);
	if (access(*out, F_OK) == 0)
		return 0;
	free(*out);
	*out = dt_path_join(dir, name);
	if (!*out)
		return rt__data_oom(err, dir);
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

/* The header of an IDX file: its magic number must say what we expect,
 * and every dimension is bounded before it sizes a buffer. *item gets the
 * bytes of one item (the product of the dimensions after the first). */
static int idx_header(gzFile gz, struct idx *f, int ndims, uint32_t max_items, size_t *item,
		      struct dt_err *err)
{
	const char *path = f->path;
	unsigned char head[16] = { 0 };
	uint32_t magic, want = 0x00000800u | (uint32_t)ndims;
	size_t got;
	int rc, i;

	rc = gz_read(gz, head, 4 + 4 * (size_t)ndims, &got, path, err);
	if (rc)
		return rc;
	magic = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 | (uint32_t)head[2] << 8 | head[3];
	if (got < 4 || magic != want)
		return dt_err_add(err, "%s: not an IDX file of unsigned bytes with %d dimension%s "
				  "(magic number 0x%08x, expected 0x%08x)", path, ndims,
				  ndims > 1 ? "s" : "", got < 4 ? 0 : magic, want);
	if (got < 4 + 4 * (size_t)ndims)
		return dt_err_add(err, "%s: truncated IDX header", path);
	*item = 1;
	for (i = 0; i < ndims; i++) {
		const unsigned char *p = head + 4 + 4 * i;

		f->dims[i] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
		if (f->dims[i] < 1 || f->dims[i] > (i ? 4096u : max_items))
			return dt_err_add(err, "%s: implausible IDX dimension %d: %u", path, i,
					  f->dims[i]);
		if (i)
			*item *= f->dims[i];
	}
	return 0;
}

/* The items after the header, into f->data: exactly the bytes the header
 * promises. The buffer grows as data arrives: a corrupt count costs no memory. */
static int idx_items(gzFile gz, struct idx *f, size_t item, struct dt_err *err)
{
	const char *path = f->path;
	unsigned char extra;
	size_t got, cap;
	int rc;

	f->bytes = (size_t)f->dims[0] * item;
	for (got = 0, cap = 0; got < f->bytes;) {
		size_t n;
		uint8_t *p;

		cap = cap ? cap * 2 : 1 << 20;
		if (cap > f->bytes)
			cap = f->bytes;
		p = realloc(f->data, cap);
		if (!p)
			return rt__data_oom(err, path);
		f->data = p;
		rc = gz_read(gz, f->data + got, cap - got, &n, path, err);
		if (rc)
			return rc;
		got += n;
		if (got < cap)
			break;
	}
	if (got < f->bytes)
		return dt_err_add(err, "%s: truncated: the header promises %u items (%zu bytes of data) "
				  "but the file has %zu", path, f->dims[0], f->bytes, got);
	rc = gz_read(gz, &extra, 1, &got, path, err);
	if (!rc && got)
		rc = dt_err_add(err, "%s: data continues after the %u items its header promises",
				path, f->dims[0]);
	return rc;
}

/* Reads the IDX file path: unsigned bytes with ndims dimensions, at most
 * max_items items of at most 4096 bytes each, no byte missing or extra. */
static int idx_load(struct idx *f, char *path, int ndims, uint32_t max_items,
		    struct dt_err *err)
{
	size_t item = 1;
	gzFile gz = NULL;
	int rc = 0;

	memset(f, 0, sizeof(*f));
	f->path = path;
	errno = 0;
	gz = gzopen(path, "rb");
	if (!gz) {
		rc = errno ? -errno : -ENOMEM;
		f->path = NULL; /* the caller still owns path on failure (it frees it) */
		return dt_err_add(err, "%s: cannot open: %s", path, strerror(-rc)), rc;
	}
	gzbuffer(gz, 1 << 17);
	rc = idx_header(gz, f, ndims, max_items, &item, err);
	if (!rc)
		rc = idx_items(gz, f, item, err);
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

/* One part's images and labels, checked against each other before anything is written. */
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

/* One part to its file, in blocks of RT_DATA_CHUNK_ROWS: a few MiB of floats at a time. */
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
		return rt__data_oom(err, out_dir);
	if (asprintf(&source, "Fashion-MNIST (Xiao, Rasul & Vollgraf 2017), %s set: %s, %s",
		     strcmp(p->tag, "train") ? "test" : "training", p->images.path,
		     p->labels.path) < 0) {
		source = NULL;
		rc = rt__data_oom(err, out_dir);
		goto out;
	}
	/* every pixel value maps to one float, computed once in double */
	for (j = 0; j < 256; j++)
		lut[j] = (float)(((double)j / 255.0 - m.mean) / m.std);
	m.n = p->images.dims[0];
	m.source = source;
	x = malloc(RT_DATA_CHUNK_ROWS * f * sizeof(float));
	if (!x) {
		rc = rt__data_oom(err, path);
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
	rc = rt_data_finish(&w, rc, err);
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

