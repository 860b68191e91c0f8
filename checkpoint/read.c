/*
 * read.c - the read side of checkpoints: reading a manifest, listing the
 * committed checkpoints, verifying files against their manifest, finding
 * the newest usable checkpoint, and reading tensors back.
 *
 * Nothing a checkpoint says is used before it is checked: the manifest goes
 * through ckpt__manifest_parse (manifest.c), each file's size and CRC-32 are
 * compared with it, and each dataset's type class, rank and dimensions are
 * compared with what the caller expects before HDF5 copies a byte into the
 * caller's buffer. The element count read is therefore always the caller's.
 * A dataset must also be reached through hard links only and keep its bytes
 * contiguous in the shard itself, as the writer makes it: HDF5 would
 * otherwise follow a hostile file to other files (links, external storage,
 * virtual datasets) or into filter plugins.
 *
 * Sections: HDF5 helpers, manifests and listing, verifying, finding the
 * latest, the reader.
 */
#include "checkpoint/internal.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_MANIFEST_BYTES (16u << 20) /* far above any real one (~1 KiB a stage) */
#define CRC_CHUNK (8u << 20)           /* bytes read at a time when checksumming */

/* --- HDF5 helpers --- */

/* "[4, 5]" for a dataset's dimensions, into out[size]. */
static void shape_str(const hsize_t *dims, int rank, char *out, size_t size)
{
	size_t len = 0;
	int i;

	len += (size_t)snprintf(out, size, "[");
	for (i = 0; i < rank && len < size; i++)
		len += (size_t)snprintf(out + len, size - len, "%s%llu", i ? ", " : "",
					(unsigned long long)dims[i]);
	if (len < size)
		snprintf(out + len, size - len, "]");
}

/* --- manifests and listing --- */

int ckpt_manifest_read(const char *ckpt, struct ckpt_manifest *m, struct dt_err *err)
{
	char path[4200];
	char *text = NULL;
	struct stat st;
	size_t len = 0;
	int rc;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", ckpt, CKPT_MANIFEST) >= sizeof(path))
		return dt_err_add(err, "%s: path too long", ckpt);
	if (stat(path, &st) != 0) {
		rc = -errno;
		if (rc == -ENOENT || rc == -ENOTDIR)
			dt_err_add(err, "%s: not a dtrain checkpoint (no %s)", ckpt, CKPT_MANIFEST);
		else
			dt_err_add(err, "%s: cannot read: %s", path, strerror(-rc));
		return rc == -ENOTDIR ? -ENOENT : rc;
	}
	if (!S_ISREG(st.st_mode))
		return dt_err_add(err, "%s: not a regular file", path);
	if (st.st_size > MAX_MANIFEST_BYTES)
		return dt_err_add(err, "%s: %lld bytes, too large for a manifest (at most %u)", path,
				  (long long)st.st_size, MAX_MANIFEST_BYTES);
	rc = dt_read_file(path, &text, &len);
	if (rc) {
		dt_err_add(err, "%s: cannot read: %s", path, strerror(-rc));
		goto out;
	}
	/* it may have grown since the stat; a NUL would hide the rest from the parser */
	if (len > MAX_MANIFEST_BYTES)
		rc = dt_err_add(err, "%s: too large for a manifest", path);
	else if (memchr(text, '\0', len))
		rc = dt_err_add(err, "%s: contains a NUL byte: not a manifest", path);
	else
		rc = ckpt__manifest_parse(text, path, m, err);
out:
	free(text);
	return rc;
}

static int cmp_desc(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* The step of a name ckpt_step_name() makes, or -1 ("step-12", "step-x",
 * ".step-00000012.tmp" and names with a sign or too many digits are not). */
static int64_t step_of(const char *name)
{
	char canon[32];
	int64_t step = 0;
	const char *p;

	if (strncmp(name, "step-", 5) != 0 || !name[5] || strlen(name + 5) > 18)
		return -1;
	for (p = name + 5; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		step = step * 10 + (*p - '0');
	}
	ckpt_step_name(step, canon, sizeof(canon));
	return strcmp(canon, name) == 0 ? step : -1;
}

/* What stands at name, a checkpoint's name (step-<8 digits>) in dir (open
 * at dfd): 1 a checkpoint to list, a directory or a symbolic link to one
 * (readers follow links: a tree of links, e.g. a data-versioning tool's);
 * 0 nothing any more (removed meanwhile); else -ENOTDIR with a line naming
 * it: a regular file, a dangling link, a link to a file, ... is no
 * checkpoint, and is not skipped either, so that a run never starts afresh
 * and saves over it. */
static int step_entry(int dfd, const char *dir, const char *name, struct dt_err *err)
{
	struct stat lst, st;
	const char *what;

	if (fstatat(dfd, name, &lst, AT_SYMLINK_NOFOLLOW) != 0)
		return 0;
	if (S_ISDIR(lst.st_mode))
		return 1;
	if (!S_ISLNK(lst.st_mode))
		what = S_ISREG(lst.st_mode) ? "a regular file" : "not a directory";
	else if (fstatat(dfd, name, &st, 0) != 0)
		what = "a symbolic link to nothing";
	else if (!S_ISDIR(st.st_mode))
		what = "a symbolic link to something not a directory";
	else
		return 1;
	dt_err_add(err, "%s/%s: %s, under a checkpoint's name: not a checkpoint (a checkpoint is a directory step-<8 digits>, or a symbolic link to one; hint: move it out of %s)",
		   dir, name, what, dir);
	return -ENOTDIR;
}

int ckpt_list(const char *dir, int64_t **steps, int *n, struct dt_err *err)
{
	DIR *d = NULL;
	struct dirent *e;
	int64_t *v = NULL, *grown, step;
	int count = 0, cap = 0, rc = 0, kind;

	*steps = NULL;
	*n = 0;
	d = opendir(dir);
	if (!d) {
		if (errno == ENOENT)
			return 0;
		rc = -errno;
		dt_err_add(err, "%s: cannot list: %s", dir, strerror(errno));
		return rc;
	}
	for (;;) {
		errno = 0;
		e = readdir(d);
		if (!e) {
			if (errno) {
				rc = -errno;
				dt_err_add(err, "%s: cannot list: %s", dir, strerror(errno));
			}
			break;
		}
		step = step_of(e->d_name);
		kind = step < 0 ? 0 : step_entry(dirfd(d), dir, e->d_name, err);
		if (kind < 0 && !rc)
			rc = kind; /* every such entry named, then the error */
		if (kind <= 0)
			continue;
		if (count == cap) {
			cap = cap ? 2 * cap : 16;
			grown = realloc(v, (size_t)cap * sizeof(*v));
			if (!grown) {
				rc = -ENOMEM;
				dt_err_add(err, "%s: out of memory listing checkpoints", dir);
				break;
			}
			v = grown;
		}
		v[count++] = step;
	}
	closedir(d);
	if (rc) {
		free(v);
		return rc;
	}
	if (count > 1)
		qsort(v, (size_t)count, sizeof(*v), cmp_desc);
	*steps = v;
	*n = count;
	return 0;
}

/* step-<digits> that is not step_of()'s: a name a user may take for a
 * checkpoint dtrain wrote (step-12, step-000000012). */
static bool stray_name(const char *name)
{
	const char *p = name + 5;

	if (strncmp(name, "step-", 5) != 0 || !*p || step_of(name) >= 0)
		return false;
	for (; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

int ckpt_list_strays(const char *dir, struct dt_err *notes)
{
	struct dirent *e;
	DIR *d = opendir(dir);
	int count = 0;

	if (!d)
		return 0; /* ckpt_list says why */
	while ((e = readdir(d)) != NULL) {
		if (!stray_name(e->d_name))
			continue;
		dt_err_add(notes, "%s/%s is not a checkpoint name dtrain writes (step-<8 digits>): left alone",
			   dir, e->d_name);
		count++;
	}
	closedir(d);
	return count;
}

/* --- verifying --- */

/* A name the manifest parser would accept: plain, no directory part. */
static bool plain_name(const char *name)
{
	return name[0] && strcmp(name, ".") != 0 && strcmp(name, "..") != 0 &&
	       !strchr(name, '/') && strnlen(name, 64) < 64;
}

int ckpt_verify_file(const char *ckpt, const struct ckpt_file *f, struct dt_err *err)
{
	char path[4200];
	unsigned char *buf = NULL;
	struct stat st;
	uint64_t total = 0;
	uint32_t crc = 0;
	int fd = -1, rc = 0;

	if (!plain_name(f->name))
		return dt_err_add(err, "%s: manifest lists \"%.64s\", not a plain file name", ckpt,
				  f->name);
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", ckpt, f->name) >= sizeof(path))
		return dt_err_add(err, "%s: path too long", ckpt);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		if (rc == -ENOENT)
			dt_err_add(err, "%s: missing", path);
		else
			dt_err_add(err, "%s: cannot open: %s", path, strerror(-rc));
		goto out;
	}
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		dt_err_add(err, "%s: cannot stat: %s", path, strerror(-rc));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = dt_err_add(err, "%s: not a regular file", path);
		goto out;
	}
	if ((uint64_t)st.st_size != f->size) {
		rc = -EIO;
		dt_err_add(err, "%s: size %lld bytes, manifest says %" PRIu64 " (truncated or replaced)",
			   path, (long long)st.st_size, f->size);
		goto out;
	}
	buf = malloc(CRC_CHUNK);
	if (!buf) {
		rc = -ENOMEM;
		dt_err_add(err, "%s: out of memory for checksumming", path);
		goto out;
	}
	rc = ckpt__crc_fd(fd, buf, CRC_CHUNK, &total, &crc);
	if (rc) {
		dt_err_add(err, "%s: read failed: %s", path, strerror(-rc));
		goto out;
	}
	if (total != f->size) {
		rc = -EIO;
		dt_err_add(err, "%s: changed while being read (%" PRIu64 " bytes, manifest says %" PRIu64 ")",
			   path, total, f->size);
	} else if (crc != f->crc) {
		rc = -EIO;
		dt_err_add(err, "%s: checksum mismatch (crc32 %08" PRIx32 ", manifest says %08" PRIx32 "): the file is damaged",
			   path, crc, f->crc);
	}
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Every file of m; the first error code. */
static int verify_files(const char *ckpt, const struct ckpt_manifest *m, bool stop_at_first,
			struct dt_err *err)
{
	int i, one, rc = 0;

	for (i = 0; i < m->n_files; i++) {
		one = ckpt_verify_file(ckpt, &m->files[i], err);
		if (one && !rc)
			rc = one;
		if (rc && (stop_at_first || rc == -ENOMEM))
			break;
	}
	return rc;
}

int ckpt_verify(const char *ckpt, bool stop_at_first, struct dt_err *err)
{
	struct ckpt_manifest *m = malloc(sizeof(*m));
	int rc;

	if (!m)
		return dt_err_add(err, "%s: out of memory", ckpt), -ENOMEM;
	rc = ckpt_manifest_read(ckpt, m, err);
	if (!rc)
		rc = verify_files(ckpt, m, stop_at_first, err);
	free(m);
	return rc;
}

/* --- finding the latest --- */

/* Is the checkpoint at path, of step `step`, usable? Reasons go to why. */
static int usable(const char *path, int64_t step, struct ckpt_manifest *m, struct dt_err *why)
{
	int rc = ckpt_manifest_read(path, m, why);

	if (rc)
		return rc;
	/* a directory renamed or copied by hand would resume at the wrong step */
	if (m->meta.step != step)
		return dt_err_add(why, "%s/%s: step is %" PRId64 ", the directory's name says %" PRId64,
				  path, CKPT_MANIFEST, m->meta.step, step);
	return verify_files(path, m, true, why);
}

int ckpt_find_latest(const char *dir, char *out, size_t size, int64_t *step,
		     struct dt_err *warn, struct dt_err *err)
{
	struct ckpt_manifest *m = NULL;
	int64_t *steps = NULL;
	char path[4200];
	int n = 0, i, rc;

	*step = -1;
	if (size)
		out[0] = '\0';
	rc = ckpt_list(dir, &steps, &n, err);
	if (rc || n == 0)
		goto out;
	m = malloc(sizeof(*m));
	if (!m) {
		rc = -ENOMEM;
		dt_err_add(err, "%s: out of memory", dir);
		goto out;
	}
	for (i = 0; i < n; i++) {
		struct dt_err why = { 0 };

		ckpt_final_path(dir, steps[i], path, sizeof(path));
		rc = usable(path, steps[i], m, &why);
		if (rc == -ENOMEM) {
			dt_err_add(err, "%s", why.msg);
			goto out;
		}
		if (rc) {
			dt_err_add(warn, "%s: skipped: %s", path, why.msg);
			rc = 0;
			continue;
		}
		if ((size_t)snprintf(out, size, "%s", path) >= size) {
			rc = dt_err_add(err, "%s: path too long", path);
			goto out;
		}
		*step = steps[i];
		goto out;
	}
out:
	free(m);
	free(steps);
	return rc;
}

/* --- the reader --- */

int ckpt_reader_open(struct ckpt_reader *r, const char *ckpt, struct dt_err *err)
{
	int rc;

	memset(r, 0, sizeof(*r));
	r->open_stage = -1;
	r->open_piece = -1;
	r->file = H5I_INVALID_HID;
	if ((size_t)snprintf(r->path, sizeof(r->path), "%s", ckpt) >= sizeof(r->path))
		return dt_err_add(err, "%s: path too long", ckpt);
	r->m = malloc(sizeof(*r->m));
	if (!r->m)
		return dt_err_add(err, "%s: out of memory", ckpt), -ENOMEM;
	rc = ckpt_manifest_read(ckpt, r->m, err);
	if (rc) {
		free(r->m);
		r->m = NULL;
	}
	return rc;
}

void ckpt_reader_close(struct ckpt_reader *r)
{
	hid_t file = (hid_t)r->file;

	dt_h5_close(&file, H5Fclose);
	free(r->m);
	r->m = NULL;
	r->file = H5I_INVALID_HID;
	r->open_stage = -1;
}

/* Makes stage's shard (piece -1) or its optimizer piece the open file.
 * path gets its name for messages. */
static int open_file(struct ckpt_reader *r, int stage, int piece, char *path, size_t size,
		     struct dt_err *err)
{
	char name[64], why[DT_H5_WHY_MAX];
	hid_t fapl = H5I_INVALID_HID, file = (hid_t)r->file;
	int rc = 0;

	if (piece < 0)
		ckpt_shard_name(stage, name, sizeof(name));
	else
		ckpt_piece_name(stage, piece, name, sizeof(name));
	snprintf(path, size, "%s/%s", r->path, name);
	if (r->open_stage == stage && r->open_piece == piece && file > 0)
		return 0;
	dt_h5_close(&file, H5Fclose);
	r->file = H5I_INVALID_HID;
	r->open_stage = -1;
	r->open_piece = -1;
	ckpt__h5_quiet();
	fapl = dt_h5_fapl(DT_H5_V110);
	if (fapl < 0) {
		rc = dt_err_add(err, "%s: HDF5 cannot set up file access: %s", path, dt_h5_why(why));
		goto out;
	}
	file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
	if (file < 0) {
		rc = -EIO;
		dt_err_add(err, "%s: cannot open as HDF5: %s", path, dt_h5_why(why));
		goto out;
	}
	r->file = file;
	r->open_stage = stage;
	r->open_piece = piece;
out:
	dt_h5_close(&fapl, H5Pclose);
	return rc;
}

/* Is type one of the IEEE formats HDF5 converts to float exactly or by
 * rounding (a shard holds float32; float64 is what other tools write)? */
static bool ieee_float(hid_t type)
{
	return H5Tequal(type, H5T_IEEE_F32LE) > 0 || H5Tequal(type, H5T_IEEE_F32BE) > 0 ||
	       H5Tequal(type, H5T_IEEE_F64LE) > 0 || H5Tequal(type, H5T_IEEE_F64BE) > 0;
}

static const char *layout_name(H5D_layout_t layout)
{
	switch (layout) {
	case H5D_COMPACT: return "compact";
	case H5D_CONTIGUOUS: return "contiguous";
	case H5D_CHUNKED: return "chunked";
	case H5D_VIRTUAL: return "virtual";
	default: return "unknown";
	}
}

/* Is every link on the way to dname a hard link? A soft or external link
 * would take HDF5 elsewhere (another file, anywhere) before we could look.
 * Each prefix is checked in order, so H5Lget_info only crosses hard links. */
static int hard_links_only(hid_t file, const char *path, const char *dname, struct dt_err *err)
{
	char prefix[128], why[DT_H5_WHY_MAX];
	H5L_info_t info;
	size_t i, n = strlen(dname);

	if (n >= sizeof(prefix))
		return dt_err_add(err, "%s: %s: name too long", path, dname);
	for (i = 1; i <= n; i++) {
		if (i < n && dname[i] != '/')
			continue;
		memcpy(prefix, dname, i);
		prefix[i] = '\0';
		if (H5Lget_info(file, prefix, &info, H5P_DEFAULT) < 0)
			return dt_err_add(err, "%s: %s: missing (%s): %s", path, dname, prefix,
					  dt_h5_why(why));
		if (info.type != H5L_TYPE_HARD)
			return dt_err_add(err, "%s: %s: \"%s\" is %s link: dtrain's shards have none",
					  path, dname, prefix,
					  info.type == H5L_TYPE_SOFT ? "a soft" :
					  info.type == H5L_TYPE_EXTERNAL ? "an external" : "a user-defined");
	}
	return 0;
}

/* Reads rows [row0, row0 + rows) (the first dimension) of the dataset
 * dname of file (named path) into dst; the dataset must have exactly the
 * expected shape (rank, dims), anything else is refused before a byte is
 * read. Also refused: any storage but contiguous bytes in the file
 * itself, which is all a shard ever has: no virtual datasets or external raw
 * files (data from elsewhere), no chunks (filters, plugins). */
static int read_tensor(hid_t file, const char *path, const char *dname, int rank,
		       const hsize_t *dims, hsize_t row0, hsize_t rows, float *dst,
		       struct dt_err *err)
{
	hid_t set = H5I_INVALID_HID, type = H5I_INVALID_HID, space = H5I_INVALID_HID;
	hid_t dcpl = H5I_INVALID_HID, mem = H5I_INVALID_HID;
	hsize_t got[H5S_MAX_RANK], start[H5S_MAX_RANK] = { 0 }, count[H5S_MAX_RANK];
	char why[DT_H5_WHY_MAX], have[400], want[80];
	H5D_layout_t layout;
	int ndims, i, rc = 0;

	rc = hard_links_only(file, path, dname, err);
	if (rc)
		goto out;
	set = H5Dopen2(file, dname, H5P_DEFAULT);
	if (set < 0) {
		rc = dt_err_add(err, "%s: %s: cannot open as a dataset: %s", path, dname,
				dt_h5_why(why));
		goto out;
	}
	type = H5Dget_type(set);
	if (type < 0 || H5Tget_class(type) != H5T_FLOAT || !ieee_float(type)) {
		rc = dt_err_add(err, "%s: %s: not a float32 or float64 dataset", path, dname);
		goto out;
	}
	space = H5Dget_space(set);
	if (space < 0 || H5Sget_simple_extent_type(space) != H5S_SIMPLE) {
		rc = dt_err_add(err, "%s: %s: not an array (scalar or empty dataspace)", path, dname);
		goto out;
	}
	ndims = H5Sget_simple_extent_ndims(space);
	if (ndims < 1 || ndims > H5S_MAX_RANK ||
	    H5Sget_simple_extent_dims(space, got, NULL) != ndims) {
		rc = dt_err_add(err, "%s: %s: unreadable dataspace (rank %d)", path, dname, ndims);
		goto out;
	}
	for (i = 0; ndims == rank && i < rank; i++)
		if (got[i] != dims[i])
			break;
	if (ndims != rank || i != rank) {
		shape_str(got, ndims, have, sizeof(have));
		shape_str(dims, rank, want, sizeof(want));
		rc = dt_err_add(err, "%s: %s: shape %s, expected %s", path, dname, have, want);
		goto out;
	}
	dcpl = H5Dget_create_plist(set);
	layout = dcpl < 0 ? H5D_LAYOUT_ERROR : H5Pget_layout(dcpl);
	if (layout != H5D_CONTIGUOUS) {
		rc = dt_err_add(err, "%s: %s: %s storage, not contiguous: dtrain's shards hold plain contiguous data",
				path, dname, layout_name(layout));
		goto out;
	}
	if (H5Pget_external_count(dcpl) != 0) {
		rc = dt_err_add(err, "%s: %s: data stored in external files: dtrain's shards hold their own data",
				path, dname);
		goto out;
	}
	/* the file's extent equals dims: the rows are within it (the caller's
	 * row0 + rows <= dims[0]), and dst holds them */
	for (i = 0; i < rank; i++)
		count[i] = dims[i];
	start[0] = row0;
	count[0] = rows;
	if ((mem = H5Screate_simple(rank, count, NULL)) < 0 ||
	    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
	    H5Dread(set, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, dst) < 0) {
		rc = -EIO;
		dt_err_add(err, "%s: %s: cannot read: %s", path, dname, dt_h5_why(why));
	}
out:
	dt_h5_close(&mem, H5Sclose);
	dt_h5_close(&dcpl, H5Pclose);
	dt_h5_close(&space, H5Sclose);
	dt_h5_close(&type, H5Tclose);
	dt_h5_close(&set, H5Dclose);
	return rc;
}

/* Training never saves a NaN or an infinity (it stops first, naming the
 * step): one in a checkpoint is damage that the checksums did not catch (a
 * file rewritten with its checksum), refused before it trains. */
static int check_finite(const char *path, const char *dname, const float *v, size_t n,
			struct dt_err *err)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!isfinite(v[i]))
			return dt_err_add(err, "%s: %s: element %zu is %s; a checkpoint holds finite values only (a damaged or edited file)",
					  path, dname, i, isnan(v[i]) ? "NaN" : "infinite"), -EINVAL;
	return 0;
}

/* The manifest's tensor the caller calls want->name, checked against
 * want's shape, and the stage that holds it. */
static int find_tensor(struct ckpt_reader *r, const struct ckpt_tensor *want,
		       const struct ckpt_tensor **out, int *stage, struct dt_err *err)
{
	const struct ckpt_meta *meta;
	const struct ckpt_tensor *t = NULL;
	int i;

	if (!r->m)
		return dt_err_add(err, "%s: checkpoint reader is not open", r->path);
	meta = &r->m->meta;
	for (i = 0; i < r->m->n_tensors && !t; i++)
		if (!strcmp(r->m->tensors[i].name, want->name))
			t = &r->m->tensors[i];
	if (!t)
		return dt_err_add(err, "%s: has no tensor \"%.*s\": a checkpoint of another model",
				  r->path, CKPT_NAME_MAX, want->name);
	for (i = 0; i < t->ndim && t->ndim == want->ndim; i++)
		if (t->shape[i] != want->shape[i])
			break;
	if (t->ndim != want->ndim || i < t->ndim)
		return dt_err_add(err, "%s: tensor \"%s\" has another shape in the checkpoint than in the model: a checkpoint of another model",
				  r->path, t->name);
	for (*stage = 0; *stage < meta->pipeline; (*stage)++)
		if (t->block < meta->stage_first[*stage + 1])
			break;
	*out = t;
	return 0;
}

/* Rows [row0, row0 + rows) of one dataset of t (state -1: the parameters)
 * in file (stage, piece), whose dataset holds rows [first, first + of) of
 * the tensor, into out; checked finite. */
static int read_rows_from(struct ckpt_reader *r, const struct ckpt_tensor *t, int state,
			  int stage, int piece, int64_t first, int64_t of, int64_t row0,
			  int64_t rows, float *out, struct dt_err *err)
{
	const struct ckpt_meta *meta = &r->m->meta;
	char path[4200], dname[CKPT_NAME_MAX + 64];
	hsize_t dims[CKPT_MAX_DIMS];
	int rc;

	rc = open_file(r, stage, piece, path, sizeof(path), err);
	if (rc)
		return rc;
	ckpt__tensor_dims(t, dims);
	dims[0] = (hsize_t)of;
	ckpt__tensor_path(meta, t, state < 0 ? NULL : meta->states[state], dname, sizeof(dname));
	rc = read_tensor((hid_t)r->file, path, dname, t->ndim, dims, (hsize_t)(row0 - first),
			 (hsize_t)rows, out, err);
	if (!rc)
		rc = check_finite(path, dname, out,
				  (size_t)rows * (ckpt_tensor_floats(t) / (size_t)t->shape[0]), err);
	return rc;
}

int ckpt_read_rows(struct ckpt_reader *r, const struct ckpt_tensor *want, int state,
		   int64_t row0, int64_t rows, float *out, struct dt_err *err)
{
	const struct ckpt_meta *meta;
	const struct ckpt_tensor *t;
	int64_t first, n, a, b;
	size_t row_floats;
	int stage, p, pieces, rc;

	rc = find_tensor(r, want, &t, &stage, err);
	if (rc)
		return rc;
	meta = &r->m->meta;
	if (state < -1 || state >= meta->n_states || row0 < 0 || rows < 0 ||
	    rows > t->shape[0] - row0)
		return dt_err_add(err, "%s: tensor \"%s\": no state %d or rows %lld..%lld of %lld",
				  r->path, t->name, state, (long long)row0,
				  (long long)(row0 + rows - 1), (long long)t->shape[0]);
	pieces = meta->optimizer_shards > 1 ? meta->optimizer_shards : 1;
	if (state < 0 || pieces == 1)
		return rows == 0 ? 0 : read_rows_from(r, t, state, stage, -1, 0, t->shape[0], row0,
						      rows, out, err);
	/* the pieces that overlap the rows, each read where it lands */
	row_floats = ckpt_tensor_floats(t) / (size_t)t->shape[0];
	for (p = 0; p < pieces && !rc; p++) {
		ckpt_piece_rows(t->shape[0], p, pieces, &first, &n);
		a = row0 > first ? row0 : first;
		b = row0 + rows < first + n ? row0 + rows : first + n;
		if (a < b)
			rc = read_rows_from(r, t, state, stage, p, first, n, a, b - a,
					    out + (size_t)(a - row0) * row_floats, err);
	}
	return rc;
}

int ckpt_read_tensor(struct ckpt_reader *r, const struct ckpt_tensor *want, float *params,
		     float *const *states, struct dt_err *err)
{
	const struct ckpt_tensor *t;
	int stage, s, rc;

	rc = find_tensor(r, want, &t, &stage, err);
	for (s = -1; !rc && s < (states ? r->m->meta.n_states : 0); s++)
		rc = ckpt_read_rows(r, want, s, 0, t->shape[0], s < 0 ? params : states[s], err);
	return rc;
}
