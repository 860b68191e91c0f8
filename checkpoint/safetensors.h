/*
 * safetensors.h - the safetensors format (Hugging Face's weights files),
 * read and written here (#37: import and export of GPT-2 weights).
 *
 * A file is an 8-byte little-endian header length N, N bytes of a JSON
 * object, then the data: the object maps each tensor's name to
 *   { "dtype": "F32" | "F16" | "BF16" | ..., "shape": [d0, d1, ...],
 *     "data_offsets": [begin, end] }
 * (offsets in bytes from the data's start, little-endian elements, row
 * major), and an optional "__metadata__" object of strings.
 *
 * st_open checks the whole header before anything is read: a header
 * longer than the file, offsets past its end or out of order, a size that
 * does not match the shape, tensors that overlap, a dtype other than F32,
 * F16 and BF16: each refused with the file, the tensor and what is wrong.
 * Tensors read as float32 (F16 and BF16 widened exactly).
 */
#ifndef DTRAIN_CHECKPOINT_SAFETENSORS_H
#define DTRAIN_CHECKPOINT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER (100u << 20) /* a header above 100 MiB is refused */

enum st_dtype { ST_F32, ST_F16, ST_BF16 };

struct st_tensor {
	char *name;
	enum st_dtype dtype;
	int ndim;
	uint64_t shape[ST_MAX_DIMS];
	uint64_t numel;
	uint64_t begin, end; /* bytes, from the data's start */
};

/* An open file: its tensors in the header's order, its metadata. */
struct st_file {
	char *path;
	int fd;
	uint64_t data_start; /* 8 + N */
	uint64_t data_size;
	struct st_tensor *t;
	size_t n;
	char **meta_key, **meta_val;
	size_t n_meta;
};

/* Open path and check its header (above). 0, or -EINVAL (a line naming the
 * file and the fault), -errno, -ENOMEM. st_close() in every case. */
int st_open(const char *path, struct st_file *f, struct dt_err *err);
void st_close(struct st_file *f);

/* The tensor of that name, or NULL; the metadata value of key, or NULL. */
const struct st_tensor *st_find(const struct st_file *f, const char *name);
const char *st_meta(const struct st_file *f, const char *key);

/* Tensor t's numel elements as float32 into out. -EIO with a line when the
 * file cannot be read (it changed under us). */
int st_read_f32(const struct st_file *f, const struct st_tensor *t, float *out, struct dt_err *err);

/* One float32 tensor to write. */
struct st_out {
	const char *name;
	const float *data;
	int ndim;
	uint64_t shape[ST_MAX_DIMS];
};

/* Write the n tensors (F32, in this order) and the metadata pairs
 * meta[2 i], meta[2 i + 1] to path, atomically (a temp file, fsync,
 * rename, fsync of the directory); the header is padded to 8 bytes with
 * spaces. 0, or -errno with a line. */
int st_write(const char *path, const struct st_out *t, size_t n, const char *const *meta,
	     size_t n_meta, struct dt_err *err);

#endif
