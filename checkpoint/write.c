/*
 * write.c - writing a checkpoint's HDF5 files: the meta as attributes, a
 * shard in two parts, the root file of virtual datasets, and sealing a file
 * (fsync, size, CRC).
 *
 * A shard is written in two parts because the HDF5 library is not
 * thread-safe and a save should cost the training loop as little as
 * possible: ckpt_shard_begin (main thread) lets HDF5 write the whole file
 * except the tensors' bytes: every dataset is contiguous, its storage
 * allocated at creation (alloc time EARLY) and never filled, so
 * H5Dget_offset tells where its bytes go. ckpt_shard_write (any thread)
 * then puts the snapshot there with plain pwrite and checksums the file.
 * The snapshot is copied by ckpt_shard_begin, or for an async save
 * (view->defer_copy) by ckpt_shard_copy on the writer's thread, while the
 * caller only reads its tensors; a synchronous save lends its live tensors
 * instead (view->borrow): the training is stopped until the write returns,
 * so no copy is needed.
 * HDF5 stores float32 little-endian ("IEEE_F32LE"), which is the snapshot's
 * own byte order on the machines we build for (checked below).
 *
 * The root file's virtual datasets take HDF5 tens of milliseconds to create;
 * a trainer's later saves write it from the bytes of its first one
 * (ckpt_root_write_cached), with only the attributes written over.
 *
 * Every file is made new in the save's tmp directory, never through a
 * symbolic link (ckpt__tmp_file, commit.c), and HDF5, which opens files by
 * name, is given a name of that very file (/proc/self/fd/N, dt_fd_name):
 * a link planted at the file's name meanwhile is not followed by anyone.
 *
 * Sections: HDF5 helpers, meta attributes, a shard's fast part, a shard's
 * slow part, the root file, sealing a file.
 */
#include "checkpoint/internal.h"
#include "base/buf.h"
#include "base/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint/write.c writes float32 bytes as they are in memory: little-endian only"
#endif

#define READ_CHUNK (64u << 10) /* bytes read at a time when checksumming a file */
/* Tensor bytes written, then checksummed, at a time: small enough to be
 * still in the core's cache (1.25 MiB of L2 here) when the CRC reads them
 * after pwrite has, so that they come from memory once. */
#define WRITE_CHUNK (1u << 20)
/* Written bytes handed to the disk at a time (dt_writeback_start), so that
 * the disk works while the rest is copied and the fsync waits for less. */
#define WRITEBACK_CHUNK (16u << 20)
#define FILE_PAGE 4096u

/* --- HDF5 helpers --- */

/* No time stamps in any object header, so that the same state gives the
 * same bytes (and CRC) whenever it is saved: the root group's come from the
 * file creation list, every other group is made by make_parents(). */
static hid_t create_file(const char *h5name)
{
	hid_t fcpl = H5Pcreate(H5P_FILE_CREATE), fapl = dt_h5_fapl(DT_H5_V110), file = H5I_INVALID_HID;

	if (fcpl >= 0 && fapl >= 0 && H5Pset_obj_track_times(fcpl, 0) >= 0)
		file = H5Fcreate(h5name, H5F_ACC_TRUNC, fcpl, fapl);
	dt_h5_close(&fapl, H5Pclose);
	dt_h5_close(&fcpl, H5Pclose);
	return file;
}

/* The groups above a dataset's path ("optimizer", "optimizer/exp_avg", ...),
 * those not made yet. HDF5's own intermediate groups would carry times. */
static int make_parents(hid_t file, const char *name, hid_t gcpl)
{
	char prefix[128];
	const char *slash;
	hid_t g;

	for (slash = strchr(name, '/'); slash; slash = strchr(slash + 1, '/')) {
		snprintf(prefix, sizeof(prefix), "%.*s", (int)(slash - name), name);
		if (H5Lexists(file, prefix, H5P_DEFAULT) > 0)
			continue;
		g = H5Gcreate2(file, prefix, H5P_DEFAULT, gcpl, H5P_DEFAULT);
		if (g < 0)
			return -EIO;
		H5Gclose(g);
	}
	return 0;
}

/* Property lists of every tensor: groups and datasets without time stamps. */
static int make_plists(hid_t *gcpl, hid_t *dcpl)
{
	*gcpl = H5Pcreate(H5P_GROUP_CREATE);
	*dcpl = H5Pcreate(H5P_DATASET_CREATE);
	if (*gcpl < 0 || *dcpl < 0 || H5Pset_obj_track_times(*gcpl, 0) < 0 ||
	    H5Pset_obj_track_times(*dcpl, 0) < 0)
		return -EIO;
	return 0;
}

/* --- meta attributes --- */

/* The optimizer's state names joined by commas, into out [size]. */
static void join_states(const struct ckpt_meta *meta, char *out, size_t size)
{
	size_t len = 0;
	int k;

	out[0] = '\0';
	for (k = 0; k < meta->n_states && k < CKPT_MAX_STATES && len < size; k++)
		len += (size_t)snprintf(out + len, size - len, "%s%.*s", k ? "," : "",
					(int)sizeof(meta->states[k]) - 1, meta->states[k]);
}

/* One field of the meta's table as an attribute of loc, of the HDF5 type
 * its kind gives (internal.h); strings fixed-length, NUL-terminated: no
 * heap in the file, so the same meta gives the same bytes. One already
 * there (a root file rewritten from a copy, ckpt_root_write_cached) is
 * written over in place. */
static int put_field(hid_t loc, const struct ckpt__field *f, const struct ckpt_meta *meta,
		     char *why)
{
	const char *p = (const char *)meta + f->offset;
	char states[sizeof(meta->states)];

	switch (f->kind) {
	case CKPT__I64:
		return dt_h5_attr_put_i64(loc, f->attr, ckpt__meta_int(f, meta), why);
	case CKPT__VERSION:
	case CKPT__INT:
	case CKPT__BOOL:
		return dt_h5_attr_put_i32(loc, f->attr, (int32_t)ckpt__meta_int(f, meta), why);
	case CKPT__U64:
		return dt_h5_attr_put_u64(loc, f->attr, *(const uint64_t *)p, why);
	case CKPT__NUM:
		return dt_h5_attr_put_f64(loc, f->attr, *(const double *)p, why);
	case CKPT__STATES:
		join_states(meta, states, sizeof(states));
		return dt_h5_attr_put_str(loc, f->attr, states, DT_H5_STR_ASCIIZ, why);
	case CKPT__STAGES:
		return dt_h5_attr_put(loc, f->attr, H5T_STD_I32LE, H5T_NATIVE_INT, 1,
				      (hsize_t)meta->pipeline + 1, meta->stage_first, why);
	default:
		return dt_h5_attr_put_str(loc, f->attr, ckpt__meta_str(f, meta), DT_H5_STR_ASCIIZ,
					  why);
	}
}

int ckpt__write_meta_attrs(hid_t loc, const struct ckpt_meta *meta, const char *path,
			   struct dt_err *err)
{
	const struct ckpt__field *f;
	char why[DT_H5_WHY_MAX] = "";
	int at, n;

	/* in the attributes' own order; the first that fails names itself */
	ckpt__meta_fields(&n);
	for (at = 0; at < n; at++) {
		f = ckpt__meta_field_at(at);
		if (!f)
			return dt_err_add(err, "%s: the meta table has no attribute %d", path, at);
		if (put_field(loc, f, meta, why)) {
			dt_err_add(err, "%s: cannot write attribute \"%s\": %s", path, f->attr, why);
			return -EIO;
		}
	}
	return 0;
}

/* --- a shard's fast part --- */

/* Which of a file's datasets the view's file holds: the parameters (-1)
 * and states [*from, *to) of meta's: a stage's shard all of them, or the
 * parameters alone when the states are in pieces; a piece its states. */
static void file_parts(const struct ckpt_meta *meta, const struct ckpt_stage_view *view,
		       int *from, int *to)
{
	*from = view->is_piece ? 0 : -1;
	*to = !view->is_piece && meta->optimizer_shards > 1 ? 0 : meta->n_states;
}

/* The view's piece, or -1 for a stage's shard. */
static int piece_of(const struct ckpt_stage_view *view)
{
	return view->is_piece ? view->piece : -1;
}

/* Floats of tensor t in piece `piece` of meta's (piece < 0: all of it);
 * *rows its rows there (piece rows, or the whole first dimension). */
static size_t piece_floats(const struct ckpt_meta *meta, const struct ckpt_tensor *t, int piece,
			   int64_t *rows)
{
	int64_t first;

	*rows = t->shape[0];
	if (piece >= 0)
		ckpt_piece_rows(t->shape[0], piece, meta->optimizer_shards, &first, rows);
	return ckpt_tensor_floats(t) / (size_t)t->shape[0] * (size_t)*rows;
}

/* The view must be exactly the stage's part of the model the meta describes:
 * the root file maps each block onto the shard of the stage owning it. */
static int check_view(const struct ckpt_meta *meta, const struct ckpt_stage_view *view,
		      const char *path, struct dt_err *err)
{
	size_t n = 0, packed = 0;
	int64_t rows;
	int i, s, from, to;

	if (view->stage < 0 || view->stage >= meta->pipeline)
		return dt_err_add(err, "%s: stage %d is not one of the meta's %d stages", path,
				  view->stage, meta->pipeline);
	if (view->first_block != meta->stage_first[view->stage] ||
	    view->n_blocks != meta->stage_first[view->stage + 1] - meta->stage_first[view->stage])
		return dt_err_add(err,
				  "%s: stage %d holds blocks %d..%d but the meta gives it %d..%d",
				  path, view->stage, view->first_block,
				  view->first_block + view->n_blocks - 1,
				  meta->stage_first[view->stage],
				  meta->stage_first[view->stage + 1] - 1);
	if (!view->tensors || view->n_tensors < 1)
		return dt_err_add(err, "%s: stage %d has no tensors", path, view->stage);
	for (i = 0; i < view->n_tensors; i++) {
		const struct ckpt_tensor *t = &view->tensors[i];

		if (t->ndim < 1 || t->ndim > CKPT_MAX_DIMS || !memchr(t->name, 0, sizeof(t->name)) ||
		    t->shape[0] < 1)
			return dt_err_add(err, "%s: stage %d: tensor %d has no name or %d dimensions",
					  path, view->stage, i, t->ndim);
		if (t->block < view->first_block || t->block >= view->first_block + view->n_blocks ||
		    t->offset != n)
			return dt_err_add(err, "%s: stage %d: tensor \"%.*s\" is not laid out in its blocks' order",
					  path, view->stage, CKPT_NAME_MAX, t->name);
		n += ckpt_tensor_floats(t);
		packed += piece_floats(meta, t, piece_of(view), &rows);
	}
	if (view->is_piece && (view->piece < 0 || view->piece >= meta->optimizer_shards ||
			       meta->optimizer_shards < 2))
		return dt_err_add(err, "%s: stage %d: no optimizer piece %d of %d", path, view->stage,
				  view->piece, meta->optimizer_shards);
	if (view->n != packed)
		return dt_err_add(err, "%s: stage %d has %zu %s but its tensors need %zu", path,
				  view->stage, view->n, view->is_piece ? "floats of state" : "parameters",
				  packed);
	file_parts(meta, view, &from, &to);
	if (from < 0 && !view->params)
		return dt_err_add(err, "%s: stage %d has no parameters", path, view->stage);
	for (s = 0; s < to; s++)
		if (!view->states[s])
			return dt_err_add(err, "%s: stage %d lacks optimizer state \"%s\"", path,
					  view->stage, meta->states[s]);
	return 0;
}

/* Sizes w->snap for params then each state, growing it only when too
 * small, and records the view's tensors as the copy to make into it. */
static int snapshot_reserve(struct ckpt_shard_writer *w, const struct ckpt_meta *meta,
			    const struct ckpt_stage_view *view)
{
	size_t parts, need;
	int s, from, to;

	file_parts(meta, view, &from, &to);
	parts = (size_t)(to - from);
	if (view->n > SIZE_MAX / sizeof(float) / parts)
		return -ENOMEM;
	need = parts * view->n;
	if (need > w->snap_cap) {
		float *p = malloc(need * sizeof(float));

		if (!p)
			return -ENOMEM;
		free(w->snap);
		w->snap = p;
		w->snap_cap = need;
	}
	for (s = from; s < to; s++)
		w->copy_src[s - from] = s < 0 ? view->params : view->states[s];
	w->copy_n = view->n;
	w->copy_parts = (int)parts;
	return 0;
}

void ckpt_shard_copy(struct ckpt_shard_writer *w)
{
	int p;

	for (p = 0; p < w->copy_parts; p++)
		memcpy(w->snap + (size_t)p * w->copy_n, w->copy_src[p], w->copy_n * sizeof(float));
	w->copy_parts = 0;
}

/* Creates one tensor's dataset and records where its bytes go. */
static int add_tensor(struct ckpt_shard_writer *w, hid_t file, hid_t gcpl, hid_t dcpl,
		      const struct ckpt_meta *meta, const struct ckpt_tensor *t, const char *state,
		      const float *src, char *why)
{
	char name[CKPT_NAME_MAX + 64];
	hsize_t dims[CKPT_MAX_DIMS];
	hid_t space = H5I_INVALID_HID, dset = H5I_INVALID_HID;
	haddr_t addr;
	int rc = 0;

	ckpt__tensor_path(meta, t, state, name, sizeof(name));
	ckpt__tensor_dims(t, dims);
	space = H5Screate_simple(t->ndim, dims, NULL);
	if (space < 0 || make_parents(file, name, gcpl) ||
	    (dset = H5Dcreate2(file, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl,
			       H5P_DEFAULT)) < 0) {
		snprintf(why, DT_H5_WHY_MAX, "cannot create dataset \"%s\": ", name);
		dt_h5_why(why + strlen(why));
		rc = -EIO;
		goto out;
	}
	addr = H5Dget_offset(dset);
	if (addr == HADDR_UNDEF) {
		snprintf(why, DT_H5_WHY_MAX, "dataset \"%s\" has no storage", name);
		rc = -EIO;
		goto out;
	}
	w->regions[w->n_regions].offset = (uint64_t)addr;
	w->regions[w->n_regions].bytes = (uint64_t)ckpt_tensor_floats(t) * 4;
	w->regions[w->n_regions].src = src;
	w->n_regions++;
out:
	dt_h5_close(&dset, H5Dclose);
	dt_h5_close(&space, H5Sclose);
	return rc;
}

/* Resets w for a new file, names it and checks the view against the meta;
 * then the snapshot: sized, and copied unless the copy is deferred or the
 * tensors borrowed. */
static int shard_prepare(struct ckpt_shard_writer *w, const struct ckpt_dir *tmpdir,
			 const struct ckpt_meta *meta, const struct ckpt_stage_view *view,
			 struct dt_err *err)
{
	struct ckpt_region *regions;
	int n_regions, from, to, rc;
	char name[32];

	if (w->begun) /* begun and never written: its file is left as it is */
		close(w->fd);
	w->begun = false;
	w->n_regions = 0;
	w->copy_parts = 0;
	w->size = 0;
	w->crc = 0;
	w->write_s = 0;
	if (view->is_piece)
		ckpt_piece_name(view->stage, view->piece, name, sizeof(name));
	else
		ckpt_shard_name(view->stage, name, sizeof(name));
	if ((size_t)snprintf(w->path, sizeof(w->path), "%s/%s", tmpdir->path, name) >=
	    sizeof(w->path))
		return dt_err_add(err, "%s: checkpoint directory path too long", tmpdir->path);
	rc = ckpt__check_meta(meta, NULL, 0, w->path, "write", err);
	if (!rc)
		rc = check_view(meta, view, w->path, err);
	if (rc)
		return rc;
	file_parts(meta, view, &from, &to);
	n_regions = view->n_tensors * (to - from);
	regions = realloc(w->regions, (size_t)(n_regions > 0 ? n_regions : 1) * sizeof(*regions));
	if (regions)
		w->regions = regions;
	if (!regions || (!view->borrow && snapshot_reserve(w, meta, view))) {
		dt_err_add(err, "%s: cannot snapshot checkpoint shard: out of memory", w->path);
		return -ENOMEM;
	}
	if (!view->borrow && !view->defer_copy)
		ckpt_shard_copy(w);
	return 0;
}

/* Makes the file at path, tmpdir/<name>, new in the directory tmpdir
 * holds (never through a link, ckpt__tmp_file: *fd, which the caller
 * closes), then lets HDF5 create it through a name of that file
 * (dt_fd_name: /proc/self/fd/N), its root group open in *root. HDF5 opens
 * files by name only; a name of the fd made relative to the held
 * directory is the simplest way for it to reach exactly that file, with
 * HDF5's own driver, whatever is planted at the path meanwhile. We make
 * the file first also because HDF5 would report a missing or read-only
 * directory as "unable to open file": we report the errno. */
static int new_h5_file(const struct ckpt_dir *tmpdir, const char *path, const char *doing,
		       int *fd, hid_t *file, hid_t *root, struct dt_err *err)
{
	char why[DT_H5_WHY_MAX] = "", h5name[4200];
	int rc;

	*fd = ckpt__tmp_file(tmpdir, strrchr(path, '/') + 1, O_RDWR | O_CREAT, doing, err);
	if (*fd < 0)
		return *fd;
	rc = dt_fd_name(*fd, path, h5name, sizeof(h5name));
	if (rc) {
		dt_err_add(err, "%s: %s: %s", path, doing,
			   rc == -ESTALE ? "replaced as it was made" : strerror(-rc));
		return rc;
	}
	if ((*file = create_file(h5name)) < 0 || (*root = H5Gopen2(*file, "/", H5P_DEFAULT)) < 0) {
		dt_err_add(err, "%s: %s: %s", path, doing, dt_h5_why(why));
		return -EIO;
	}
	return 0;
}

/* The meta attributes, then which stage, blocks and piece the file holds. */
static int shard_attrs(hid_t root, const struct ckpt_meta *meta,
		       const struct ckpt_stage_view *view, const char *path, struct dt_err *err)
{
	char why[DT_H5_WHY_MAX] = "";
	int32_t blocks[2];
	int rc;

	rc = ckpt__write_meta_attrs(root, meta, path, err);
	if (rc)
		return rc;
	blocks[0] = view->first_block;
	blocks[1] = view->first_block + view->n_blocks - 1;
	if (dt_h5_attr_put_i32(root, "stage", view->stage, why) ||
	    dt_h5_attr_put(root, "stage_blocks", H5T_STD_I32LE, H5T_NATIVE_INT32, 1, 2, blocks,
			   why) ||
	    (view->is_piece && dt_h5_attr_put_i32(root, "optimizer_piece", view->piece, why))) {
		dt_err_add(err, "%s: cannot write shard attributes: %s", path, why);
		return -EIO;
	}
	return 0;
}

/* A dataset per tensor and part of the file: the parameters of every
 * tensor, then each state's (the snapshot's order; a piece's tensors are
 * their rows of it, packed), each contiguous, its storage allocated and
 * never filled, and where its bytes go recorded in w. */
static int shard_datasets(struct ckpt_shard_writer *w, hid_t file, const struct ckpt_meta *meta,
			  const struct ckpt_stage_view *view, struct dt_err *err)
{
	hid_t gcpl = H5I_INVALID_HID, dcpl = H5I_INVALID_HID;
	char why[DT_H5_WHY_MAX] = "";
	int s, t, from, to, rc = 0;
	const float *src;
	size_t at;

	if (make_plists(&gcpl, &dcpl) || H5Pset_layout(dcpl, H5D_CONTIGUOUS) < 0 ||
	    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) < 0 ||
	    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) < 0) {
		dt_err_add(err, "%s: cannot set up datasets: %s", w->path, dt_h5_why(why));
		rc = -EIO;
		goto out;
	}
	file_parts(meta, view, &from, &to);
	for (s = from; s < to; s++) {
		if (view->borrow)
			src = s < 0 ? view->params : view->states[s];
		else
			src = w->snap + (size_t)(s - from) * view->n;
		for (t = 0, at = 0; t < view->n_tensors; t++) {
			struct ckpt_tensor part = view->tensors[t];
			int64_t rows;
			size_t len = piece_floats(meta, &part, piece_of(view), &rows);

			if (len == 0)
				continue; /* no rows in this piece */
			part.shape[0] = rows;
			rc = add_tensor(w, file, gcpl, dcpl, meta, &part, s < 0 ? NULL : meta->states[s],
					src + (view->is_piece ? at : part.offset), why);
			if (rc) {
				dt_err_add(err, "%s: %s", w->path, why);
				goto out;
			}
			at += len;
		}
	}
out:
	dt_h5_close(&dcpl, H5Pclose);
	dt_h5_close(&gcpl, H5Pclose);
	return rc;
}

int ckpt_shard_begin(struct ckpt_shard_writer *w, const struct ckpt_dir *tmpdir,
		     const struct ckpt_meta *meta, const struct ckpt_stage_view *view,
		     struct dt_err *err)
{
	hid_t file = H5I_INVALID_HID, root = H5I_INVALID_HID;
	char why[DT_H5_WHY_MAX] = "";
	int rc, fd = -1;

	ckpt__h5_quiet();
	rc = shard_prepare(w, tmpdir, meta, view, err);
	if (!rc)
		rc = new_h5_file(tmpdir, w->path, "cannot create checkpoint shard", &fd, &file, &root,
				 err);
	if (!rc)
		rc = shard_attrs(root, meta, view, w->path, err);
	if (!rc)
		rc = shard_datasets(w, file, meta, view, err);
	dt_h5_close(&root, H5Gclose);
	/* closing writes the metadata: its failure (a full disk) is the shard's */
	if (file >= 0 && H5Fclose(file) < 0 && !rc) {
		dt_err_add(err, "%s: cannot write checkpoint shard: %s", w->path, dt_h5_why(why));
		rc = -EIO;
	}
	if (rc) {
		w->n_regions = 0;
		w->copy_parts = 0;
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	w->fd = fd;
	w->begun = rc == 0;
	return rc;
}

/* --- a shard's slow part: no HDF5 from here on --- */

static int region_cmp(const void *a, const void *b)
{
	const struct ckpt_region *x = a, *y = b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* CRC of len bytes of the file at offset, continued from *crc. */
static int crc_file_range(int fd, uint64_t offset, uint64_t len, uint32_t *crc)
{
	unsigned char buf[READ_CHUNK];

	int rc;

	while (len > 0) {
		size_t want = len > sizeof(buf) ? sizeof(buf) : (size_t)len;

		/* -EIO: shorter than fstat said, changed under us */
		rc = dt_pread_all(fd, buf, want, offset);
		if (rc)
			return rc;
		*crc = ckpt_crc32(*crc, buf, want);
		offset += want;
		len -= want;
	}
	return 0;
}

/* Writes one tensor's bytes at their offset, WRITE_CHUNK at a time, each
 * chunk checksummed into *crc right after its pwrite, while it is in cache.
 * Chunks end on the file's page boundaries, so that no page is copied into
 * in two pieces. Every WRITEBACK_CHUNK bytes past *wb_from, the disk is told
 * to start on them. 0 or -errno. */
static int write_region(int fd, const struct ckpt_region *r, uint32_t *crc, uint64_t *wb_from)
{
	const unsigned char *p = (const unsigned char *)r->src;
	uint64_t at = r->offset, end = r->offset + r->bytes;
	int rc;

	while (at < end) {
		uint64_t next = (at + WRITE_CHUNK) / FILE_PAGE * FILE_PAGE;

		if (next <= at || next > end)
			next = end;
		rc = dt_pwrite_all(fd, p, (size_t)(next - at), at);
		if (rc)
			return rc;
		*crc = ckpt_crc32(*crc, p, (size_t)(next - at));
		p += next - at;
		at = next;
		if (at - *wb_from >= WRITEBACK_CHUNK) {
			rc = dt_writeback_start(fd, *wb_from, at - *wb_from);
			if (rc)
				return rc;
			*wb_from = at;
		}
	}
	return 0;
}

int ckpt_shard_write(struct ckpt_shard_writer *w, struct dt_err *err)
{
	double t0 = dt_mono_s();
	uint64_t at = 0, wb_from = 0;
	uint32_t crc = 0;
	struct stat st;
	int fd = -1, i, rc = 0;

	if (!w->begun)
		return dt_err_add(err, "%s: checkpoint shard was not begun", w->path);
	ckpt_shard_copy(w);
	/* the file ckpt_shard_begin made, not whatever has its name now */
	fd = w->fd;
	w->begun = false;

	/* One pass in file order computes the checksum of the file as it will
	 * be on disk: the metadata HDF5 wrote between and after the tensors
	 * read back from the file, each tensor's bytes as they are written.
	 * HDF5 sized the file for the tensors' storage when it closed it. */
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		dt_err_add(err, "%s: cannot stat checkpoint shard: %s", w->path, strerror(-rc));
		goto out;
	}
	qsort(w->regions, (size_t)w->n_regions, sizeof(*w->regions), region_cmp);
	for (i = 0; i < w->n_regions; i++) {
		const struct ckpt_region *r = &w->regions[i];

		if (r->offset < at || r->offset > (uint64_t)st.st_size ||
		    r->bytes > (uint64_t)st.st_size - r->offset) {
			dt_err_add(err, "%s: tensor bytes at %llu overlap or lie past the end (%lld bytes)",
				   w->path, (unsigned long long)r->offset, (long long)st.st_size);
			rc = -EIO;
			goto out;
		}
		at = r->offset + r->bytes;
	}
	at = 0;
	for (i = 0; i < w->n_regions; i++) {
		const struct ckpt_region *r = &w->regions[i];

		rc = crc_file_range(fd, at, r->offset - at, &crc);
		if (rc) {
			dt_err_add(err, "%s: cannot read checkpoint shard: %s", w->path, strerror(-rc));
			goto out;
		}
		rc = write_region(fd, r, &crc, &wb_from);
		if (rc) {
			dt_err_add(err, "%s: cannot write checkpoint shard: %s", w->path, strerror(-rc));
			goto out;
		}
		at = r->offset + r->bytes;
	}
	rc = crc_file_range(fd, at, (uint64_t)st.st_size - at, &crc);
	if (rc) {
		dt_err_add(err, "%s: cannot read checkpoint shard: %s", w->path, strerror(-rc));
		goto out;
	}
	rc = dt_fsync_fd(fd);
	if (rc) {
		dt_err_add(err, "%s: cannot write checkpoint shard: %s", w->path, strerror(-rc));
		goto out;
	}
	w->size = (uint64_t)st.st_size;
	w->crc = crc;
out:
	if (fd >= 0 && close(fd) < 0 && !rc) {
		rc = -errno;
		dt_err_add(err, "%s: cannot write checkpoint shard: %s", w->path, strerror(-rc));
	}
	w->write_s = dt_mono_s() - t0;
	return rc;
}

void ckpt_shard_free(struct ckpt_shard_writer *w)
{
	if (w->begun)
		close(w->fd);
	free(w->snap);
	free(w->regions);
	w->snap = NULL;
	w->snap_cap = 0;
	w->regions = NULL;
	w->n_regions = 0;
	w->copy_parts = 0;
	w->begun = false;
}

/* --- the root file --- */

/* One virtual dataset: the whole of the same path in the shard holding t,
 * or for a state in pieces, each piece's rows of it from that piece. */
static int add_virtual(hid_t file, hid_t gcpl, const struct ckpt_meta *meta,
		       const struct ckpt_tensor *t, const char *state, char *why)
{
	char name[CKPT_NAME_MAX + 64], src_name[CKPT_NAME_MAX + 66], src[32];
	hsize_t dims[CKPT_MAX_DIMS], start[CKPT_MAX_DIMS] = { 0 }, count[CKPT_MAX_DIMS];
	hid_t space = H5I_INVALID_HID, dcpl = H5I_INVALID_HID, dset = H5I_INVALID_HID;
	hid_t piece = H5I_INVALID_HID;
	int64_t first, rows;
	int k, p, pieces = state && meta->optimizer_shards > 1 ? meta->optimizer_shards : 0, rc = 0;

	for (k = 0; k + 1 < meta->pipeline && meta->stage_first[k + 1] <= t->block; k++)
		;
	ckpt_shard_name(k, src, sizeof(src));
	ckpt__tensor_path(meta, t, state, name, sizeof(name));
	snprintf(src_name, sizeof(src_name), "/%s", name);
	ckpt__tensor_dims(t, dims);
	/* one space for both sides of a whole mapping: its default selection
	 * is all of it */
	space = H5Screate_simple(t->ndim, dims, NULL);
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	if (space < 0 || dcpl < 0 || H5Pset_obj_track_times(dcpl, 0) < 0)
		goto fail;
	if (!pieces && H5Pset_virtual(dcpl, space, src, src_name, space) < 0)
		goto fail;
	for (p = 0; p < pieces; p++) {
		ckpt_piece_rows(t->shape[0], p, pieces, &first, &rows);
		if (rows == 0)
			continue;
		ckpt_piece_name(k, p, src, sizeof(src));
		memcpy(count, dims, sizeof(count));
		start[0] = (hsize_t)first;
		count[0] = (hsize_t)rows;
		if (H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
		    (piece = H5Screate_simple(t->ndim, count, NULL)) < 0 ||
		    H5Pset_virtual(dcpl, space, src, src_name, piece) < 0)
			goto fail;
		dt_h5_close(&piece, H5Sclose);
	}
	if (pieces)
		H5Sselect_all(space);
	if (make_parents(file, name, gcpl) ||
	    (dset = H5Dcreate2(file, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl,
			       H5P_DEFAULT)) < 0)
		goto fail;
	goto out;
fail:
	snprintf(why, DT_H5_WHY_MAX, "cannot create virtual dataset \"%s\": ", name);
	dt_h5_why(why + strlen(why));
	rc = -EIO;
out:
	dt_h5_close(&piece, H5Sclose);
	dt_h5_close(&dset, H5Dclose);
	dt_h5_close(&dcpl, H5Pclose);
	dt_h5_close(&space, H5Sclose);
	return rc;
}

/* ckpt_root_write; with image, the file's bytes as written, read back
 * through the descriptor that made it (*image NULL when they cannot be). */
static int root_write(const struct ckpt_dir *tmpdir, const struct ckpt_meta *meta,
		      const struct ckpt_tensor *tensors, int n, char **image, size_t *len,
		      struct dt_err *err)
{
	hid_t file = H5I_INVALID_HID, root = H5I_INVALID_HID;
	hid_t gcpl = H5I_INVALID_HID, dcpl = H5I_INVALID_HID;
	char path[4096], why[DT_H5_WHY_MAX] = "";
	int fd = -1, s, t, rc = 0;

	ckpt__h5_quiet();
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", tmpdir->path, CKPT_ROOT) >= sizeof(path))
		return dt_err_add(err, "%s: checkpoint directory path too long", tmpdir->path);
	rc = ckpt__check_meta(meta, tensors, n, path, "write", err);
	if (rc)
		return rc;
	rc = new_h5_file(tmpdir, path, "cannot create checkpoint root file", &fd, &file, &root, err);
	if (rc)
		goto out;
	rc = ckpt__write_meta_attrs(root, meta, path, err);
	if (rc)
		goto out;
	if (make_plists(&gcpl, &dcpl)) {
		dt_err_add(err, "%s: cannot set up datasets: %s", path, dt_h5_why(why));
		rc = -EIO;
		goto out;
	}
	for (s = -1; s < meta->n_states; s++) {
		for (t = 0; t < n; t++) {
			rc = add_virtual(file, gcpl, meta, &tensors[t], s < 0 ? NULL : meta->states[s],
					 why);
			if (rc) {
				dt_err_add(err, "%s: %s", path, why);
				goto out;
			}
		}
	}
out:
	dt_h5_close(&dcpl, H5Pclose);
	dt_h5_close(&gcpl, H5Pclose);
	dt_h5_close(&root, H5Gclose);
	if (file >= 0 && H5Fclose(file) < 0 && !rc) {
		dt_err_add(err, "%s: cannot write checkpoint root file: %s", path, dt_h5_why(why));
		rc = -EIO;
	}
	if (!rc && image && dt_read_fd(fd, image, len))
		*image = NULL; /* only not kept: the save does not depend on it */
	if (fd >= 0)
		close(fd);
	return rc;
}

int ckpt_root_write(const struct ckpt_dir *tmpdir, const struct ckpt_meta *meta,
		    const struct ckpt_tensor *tensors, int n, struct dt_err *err)
{
	return root_write(tmpdir, meta, tensors, n, NULL, NULL, err);
}

/* A hash of the tensor table: names, shapes and blocks. */
static void tensors_hash(const struct ckpt_tensor *t, int n, char out[17])
{
	struct dt_buf b = { 0 };
	int i, j, rc = 0;

	for (i = 0; i < n && !rc; i++) {
		rc = dt_buf_printf(&b, "%s:%d:", t[i].name, t[i].block);
		for (j = 0; j < t[i].ndim && !rc; j++)
			rc = dt_buf_printf(&b, "%lld,", (long long)t[i].shape[j]);
	}
	if (rc) /* no hash: never matches a cache */
		snprintf(out, 17, "-");
	else
		ckpt_hash64(b.p, b.len, out);
	dt_buf_free(&b);
}

/* Does the cached root file have the datasets meta needs: the same tensors,
 * stages and states? (Its attributes are checked as they are written over:
 * the same types and shapes.) */
static bool same_datasets(const struct ckpt_meta *a, const struct ckpt_meta *b)
{
	int k;

	if (a->n_blocks != b->n_blocks || a->pipeline != b->pipeline || a->n_states != b->n_states ||
	    a->optimizer_shards != b->optimizer_shards || strcmp(a->model_hash, b->model_hash))
		return false;
	for (k = 0; k <= a->pipeline; k++)
		if (a->stage_first[k] != b->stage_first[k])
			return false;
	for (k = 0; k < a->n_states; k++)
		if (strcmp(a->states[k], b->states[k]))
			return false;
	return true;
}

/* tmpdir/model.h5 from the cached bytes, then meta's attributes written
 * over the old ones. Any failure: the caller writes the file afresh. */
static int root_from_cache(const struct ckpt_root_cache *cache, const struct ckpt_dir *tmpdir,
			   const char *path, const struct ckpt_meta *meta, struct dt_err *err)
{
	hid_t file = H5I_INVALID_HID, root = H5I_INVALID_HID, fapl = H5I_INVALID_HID;
	char why[DT_H5_WHY_MAX] = "", h5name[4200];
	int fd, rc;

	fd = ckpt__tmp_file(tmpdir, CKPT_ROOT, O_RDWR | O_CREAT, "cannot create", err);
	if (fd < 0)
		return fd;
	rc = dt_write_all(fd, cache->image, cache->len);
	if (rc) {
		close(fd);
		return dt_err_add(err, "%s: cannot write: %s", path, strerror(-rc)), rc;
	}
	rc = dt_fd_name(fd, path, h5name, sizeof(h5name));
	if (rc)
		dt_err_add(err, "%s: cannot open: %s", path, strerror(-rc));
	else if ((fapl = dt_h5_fapl(DT_H5_V110)) < 0 ||
		 (file = H5Fopen(h5name, H5F_ACC_RDWR, fapl)) < 0 ||
		 (root = H5Gopen2(file, "/", H5P_DEFAULT)) < 0) {
		dt_err_add(err, "%s: cannot open: %s", path, dt_h5_why(why));
		rc = -EIO;
	}
	if (!rc)
		rc = ckpt__write_meta_attrs(root, meta, path, err);
	dt_h5_close(&root, H5Gclose);
	if (file >= 0 && H5Fclose(file) < 0 && !rc) {
		dt_err_add(err, "%s: cannot write: %s", path, dt_h5_why(why));
		rc = -EIO;
	}
	dt_h5_close(&fapl, H5Pclose);
	if (close(fd) < 0 && !rc) {
		rc = -errno;
		dt_err_add(err, "%s: cannot write: %s", path, strerror(-rc));
	}
	return rc;
}

int ckpt_root_write_cached(struct ckpt_root_cache *cache, const struct ckpt_dir *tmpdir,
			   const struct ckpt_meta *meta, const struct ckpt_tensor *tensors,
			   int n, struct dt_err *err)
{
	struct dt_err e = { 0 };
	char path[4096], *image = NULL, th[17];
	size_t len = 0;
	int rc;

	ckpt__h5_quiet();
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", tmpdir->path, CKPT_ROOT) >= sizeof(path))
		return dt_err_add(err, "%s: checkpoint directory path too long", tmpdir->path);
	tensors_hash(tensors, n, th);
	if (cache->image && same_datasets(&cache->meta, meta) && !strcmp(cache->tensors_hash, th)) {
		/* the table is the one checked when the cached file was written */
		rc = ckpt__check_meta(meta, NULL, 0, path, "write", err);
		if (rc)
			return rc;
		if (root_from_cache(cache, tmpdir, path, meta, &e) == 0)
			return 0;
		/* written afresh below, which reports a failure that is real */
	}
	ckpt_root_cache_free(cache);
	/* kept for the next save; a file that cannot be read back is only
	 * not kept (the save does not depend on it) */
	rc = root_write(tmpdir, meta, tensors, n, &image, &len, err);
	if (!rc && image) {
		cache->image = (unsigned char *)image;
		cache->len = len;
		cache->meta = *meta;
		memcpy(cache->tensors_hash, th, sizeof(th));
	}
	return rc;
}

void ckpt_root_cache_free(struct ckpt_root_cache *cache)
{
	free(cache->image);
	cache->image = NULL;
	cache->len = 0;
}

/* --- sealing a file --- */

int ckpt_file_seal(const struct ckpt_dir *tmpdir, const char *name, uint64_t *size,
		   uint32_t *crc, struct dt_err *err)
{
	unsigned char buf[READ_CHUNK];
	char path[4200];
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%s/%s", tmpdir->path, name);
	fd = ckpt__tmp_file(tmpdir, name, O_RDONLY, "cannot open", err);
	if (fd < 0)
		return fd;
	rc = dt_fsync_fd(fd);
	if (rc) {
		dt_err_add(err, "%s: cannot sync: %s", path, strerror(-rc));
		goto out;
	}
	rc = ckpt__crc_fd(fd, buf, sizeof(buf), size, crc);
	if (rc)
		dt_err_add(err, "%s: cannot read: %s", path, strerror(-rc));
out:
	close(fd);
	return rc;
}
