/*
 * safetensors.c - reading and writing safetensors files (safetensors.h).
 *
 * The header is the only part trusted to describe the rest, so it is
 * checked whole before a byte of data is read: its length against the
 * file's, every tensor's dtype, shape and offsets (with overflow checks),
 * and, sorted by offset, that no two tensors share a byte. Elements are
 * assembled from little-endian bytes, whatever the host's order.
 *
 * Sections: reading the header, reading tensors, writing.
 */
#include "checkpoint/safetensors.h"

#include "base/buf.h"
#include "base/io.h"
#include "base/json.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define READ_CHUNK (1u << 20) /* elements converted per read */

/* --- reading the header --- */

static uint64_t le64(const unsigned char *b)
{
	uint64_t v = 0;
	int i;

	for (i = 7; i >= 0; i--)
		v = v << 8 | b[i];
	return v;
}

static int dtype_of(const char *s, enum st_dtype *d, size_t *size)
{
	if (!strcmp(s, "F32"))
		*d = ST_F32, *size = 4;
	else if (!strcmp(s, "F16"))
		*d = ST_F16, *size = 2;
	else if (!strcmp(s, "BF16"))
		*d = ST_BF16, *size = 2;
	else
		return -1;
	return 0;
}

/* A non-negative JSON integer into *v */
static bool get_u64(json_object *o, uint64_t *v)
{
	int64_t x;

	if (!o || !json_object_is_type(o, json_type_int))
		return false;
	x = json_object_get_int64(o);
	if (x < 0)
		return false;
	*v = (uint64_t)x;
	return true;
}

/* One header entry into t: its dtype, shape and offsets, checked against
 * the data's size. A line naming the tensor when it is wrong. */
static int parse_tensor(const struct st_file *f, const char *name, json_object *o,
			struct st_tensor *t, struct dt_err *err)
{
	json_object *dt = NULL, *shape = NULL, *offs = NULL;
	size_t size = 0, i;

	t->name = strdup(name);
	if (!t->name)
		return -ENOMEM;
	if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, "dtype", &dt) ||
	    !json_object_object_get_ex(o, "shape", &shape) ||
	    !json_object_object_get_ex(o, "data_offsets", &offs) || !json_object_is_type(dt, json_type_string) ||
	    !json_object_is_type(shape, json_type_array) || !json_object_is_type(offs, json_type_array))
		return dt_err_add(err, "%s: tensor \"%s\": expected {\"dtype\", \"shape\", \"data_offsets\"}",
				  f->path, name), -EINVAL;
	if (dtype_of(json_object_get_string(dt), &t->dtype, &size))
		return dt_err_add(err, "%s: tensor \"%s\": dtype %s is not handled (F32, F16 and BF16 are)",
				  f->path, name, json_object_get_string(dt)), -EINVAL;
	if (json_object_array_length(shape) > ST_MAX_DIMS)
		return dt_err_add(err, "%s: tensor \"%s\": more than %d dimensions", f->path, name, ST_MAX_DIMS),
		       -EINVAL;
	t->ndim = (int)json_object_array_length(shape);
	t->numel = 1;
	for (i = 0; i < (size_t)t->ndim; i++) {
		if (!get_u64(json_object_array_get_idx(shape, i), &t->shape[i]))
			return dt_err_add(err, "%s: tensor \"%s\": shape[%zu] is not a non-negative integer",
					  f->path, name, i), -EINVAL;
		if (t->shape[i] && t->numel > UINT64_MAX / 8 / t->shape[i])
			return dt_err_add(err, "%s: tensor \"%s\": its shape overflows", f->path, name), -EINVAL;
		t->numel *= t->shape[i];
	}
	if (json_object_array_length(offs) != 2 || !get_u64(json_object_array_get_idx(offs, 0), &t->begin) ||
	    !get_u64(json_object_array_get_idx(offs, 1), &t->end) || t->begin > t->end)
		return dt_err_add(err, "%s: tensor \"%s\": data_offsets must be [begin, end] with begin <= end",
				  f->path, name), -EINVAL;
	if (t->end > f->data_size)
		return dt_err_add(err, "%s: tensor \"%s\": its data ends at byte %llu, past the file's %llu bytes of data (truncated?)",
				  f->path, name, (unsigned long long)t->end, (unsigned long long)f->data_size),
		       -EINVAL;
	if (t->end - t->begin != t->numel * size)
		return dt_err_add(err, "%s: tensor \"%s\": %llu bytes of data for %llu elements of %zu bytes",
				  f->path, name, (unsigned long long)(t->end - t->begin),
				  (unsigned long long)t->numel, size), -EINVAL;
	return 0;
}

static int by_begin(const void *a, const void *b)
{
	const struct st_tensor *x = *(const struct st_tensor *const *)a, *y = *(const struct st_tensor *const *)b;

	return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* No two tensors share a byte */
static int check_overlaps(const struct st_file *f, struct dt_err *err)
{
	const struct st_tensor **s = malloc((f->n ? f->n : 1) * sizeof(*s));
	size_t i;
	int rc = 0;

	if (!s)
		return -ENOMEM;
	for (i = 0; i < f->n; i++)
		s[i] = &f->t[i];
	qsort(s, f->n, sizeof(*s), by_begin);
	for (i = 1; i < f->n && !rc; i++)
		if (s[i]->begin < s[i - 1]->end && s[i]->end > s[i]->begin) {
			dt_err_add(err, "%s: tensors \"%s\" and \"%s\" overlap (bytes %llu-%llu and %llu-%llu)",
				   f->path, s[i - 1]->name, s[i]->name, (unsigned long long)s[i - 1]->begin,
				   (unsigned long long)s[i - 1]->end, (unsigned long long)s[i]->begin,
				   (unsigned long long)s[i]->end);
			rc = -EINVAL;
		}
	free(s);
	return rc;
}

static int parse_meta(struct st_file *f, json_object *m, struct dt_err *err)
{
	size_t n = 0;

	if (!json_object_is_type(m, json_type_object))
		return dt_err_add(err, "%s: __metadata__ is not an object", f->path), -EINVAL;
	f->meta_key = calloc((size_t)json_object_object_length(m) + 1, sizeof(char *));
	f->meta_val = calloc((size_t)json_object_object_length(m) + 1, sizeof(char *));
	if (!f->meta_key || !f->meta_val)
		return -ENOMEM;
	json_object_object_foreach(m, key, val) {
		if (!json_object_is_type(val, json_type_string))
			return dt_err_add(err, "%s: __metadata__.%s is not a string", f->path, key), -EINVAL;
		f->meta_key[n] = strdup(key);
		f->meta_val[n] = strdup(json_object_get_string(val));
		f->n_meta = ++n;
		if (!f->meta_key[n - 1] || !f->meta_val[n - 1])
			return -ENOMEM;
	}
	return 0;
}

/* The header (N bytes after the first 8) as tensors and metadata */
static int parse_header(struct st_file *f, const char *text, size_t len, struct dt_err *err)
{
	struct dt_json_error je;
	json_object *o = NULL;
	int rc = dt_json_parse_object(text, len, 8, &o, &je);

	if (rc == -ENOMEM)
		return rc;
	if (rc)
		return dt_err_add(err, "%s: the header is not a JSON object (%s at byte %zu)", f->path,
				  je.what ? je.what : "not an object", (size_t)je.offset + 8), -EINVAL;
	f->t = calloc((size_t)json_object_object_length(o) + 1, sizeof(*f->t));
	if (!f->t)
		rc = -ENOMEM;
	{
		json_object_object_foreach(o, name, val) {
			if (rc)
				break;
			if (!strcmp(name, "__metadata__"))
				rc = parse_meta(f, val, err);
			else if (!(rc = parse_tensor(f, name, val, &f->t[f->n], err)))
				f->n++;
			else
				free(f->t[f->n].name), f->t[f->n].name = NULL;
		}
	}
	if (!rc)
		rc = check_overlaps(f, err);
	json_object_put(o);
	return rc;
}

int st_open(const char *path, struct st_file *f, struct dt_err *err)
{
	unsigned char len8[8];
	struct stat st;
	char *header = NULL;
	uint64_t n;
	int rc = 0;

	*f = (struct st_file){ .fd = -1, .path = strdup(path) };
	if (!f->path)
		return -ENOMEM;
	f->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (f->fd < 0 || fstat(f->fd, &st) < 0) {
		rc = -errno;
		return dt_err_add(err, "%s: cannot open: %s", path, strerror(-rc)), rc;
	}
	if (st.st_size < 8 || pread(f->fd, len8, 8, 0) != 8)
		return dt_err_add(err, "%s: not a safetensors file: shorter than its 8-byte header length", path),
		       -EINVAL;
	n = le64(len8);
	if (n > (uint64_t)st.st_size - 8)
		return dt_err_add(err, "%s: the header is %llu bytes long, but the file has %llu after its length (truncated, or not a safetensors file)",
				  path, (unsigned long long)n, (unsigned long long)st.st_size - 8), -EINVAL;
	if (n > ST_MAX_HEADER)
		return dt_err_add(err, "%s: a header of %llu bytes (at most %u)", path, (unsigned long long)n,
				  ST_MAX_HEADER), -EINVAL;
	f->data_start = 8 + n;
	f->data_size = (uint64_t)st.st_size - f->data_start;
	header = malloc(n + 1);
	if (!header)
		return -ENOMEM;
	if (pread(f->fd, header, n, 8) != (ssize_t)n) {
		dt_err_add(err, "%s: cannot read its header", path);
		rc = -EIO;
	} else
		rc = parse_header(f, header, n, err);
	free(header);
	if (rc == -ENOMEM)
		dt_err_add(err, "%s: out of memory", path);
	return rc;
}

void st_close(struct st_file *f)
{
	size_t i;

	if (f->fd >= 0)
		close(f->fd);
	for (i = 0; f->t && i <= f->n; i++)
		free(f->t[i].name);
	for (i = 0; i < f->n_meta; i++) {
		free(f->meta_key[i]);
		free(f->meta_val[i]);
	}
	free(f->t);
	free(f->meta_key);
	free(f->meta_val);
	free(f->path);
	*f = (struct st_file){ .fd = -1 };
}

const struct st_tensor *st_find(const struct st_file *f, const char *name)
{
	size_t i;

	for (i = 0; i < f->n; i++)
		if (!strcmp(f->t[i].name, name))
			return &f->t[i];
	return NULL;
}

const char *st_meta(const struct st_file *f, const char *key)
{
	size_t i;

	for (i = 0; i < f->n_meta; i++)
		if (!strcmp(f->meta_key[i], key))
			return f->meta_val[i];
	return NULL;
}

/* --- reading tensors --- */

/* IEEE binary16 bits as float32, exactly (subnormals, infinities, NaN) */
static float half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
	float v;

	if (exp == 0x1f) {
		bits = sign | 0x7f800000u | man << 13;
	} else if (exp == 0) {
		v = (float)man * 0x1p-24f; /* exact: man < 2^10 */
		return sign ? -v : v;
	} else {
		bits = sign | (exp + 112) << 23 | man << 13;
	}
	memcpy(&v, &bits, sizeof(v));
	return v;
}

static void widen(enum st_dtype d, const unsigned char *b, size_t count, float *out)
{
	size_t i;

	for (i = 0; i < count; i++) {
		uint32_t bits;

		if (d == ST_F32)
			bits = (uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 | (uint32_t)b[4 * i + 2] << 16 |
			       (uint32_t)b[4 * i + 3] << 24;
		else if (d == ST_BF16)
			bits = ((uint32_t)b[2 * i] | (uint32_t)b[2 * i + 1] << 8) << 16;
		else {
			out[i] = half_to_float((uint16_t)(b[2 * i] | b[2 * i + 1] << 8));
			continue;
		}
		memcpy(&out[i], &bits, sizeof(float));
	}
}

int st_read_f32(const struct st_file *f, const struct st_tensor *t, float *out, struct dt_err *err)
{
	size_t size = t->dtype == ST_F32 ? 4 : 2, done = 0;
	unsigned char *buf = malloc((size_t)READ_CHUNK * size);

	if (!buf)
		return dt_err_add(err, "%s: out of memory", f->path), -ENOMEM;
	while (done < t->numel) {
		size_t count = t->numel - done < READ_CHUNK ? (size_t)(t->numel - done) : READ_CHUNK;
		off_t at = (off_t)(f->data_start + t->begin + done * size);

		if (dt_pread_all(f->fd, buf, count * size, at) != 0) {
			free(buf);
			return dt_err_add(err, "%s: tensor \"%s\": cannot read its data (the file changed?)", f->path,
					  t->name), -EIO;
		}
		widen(t->dtype, buf, count, out + done);
		done += count;
	}
	free(buf);
	return 0;
}

/* --- writing --- */

static int header_json(const struct st_out *t, size_t n, const char *const *meta, size_t n_meta,
		       struct dt_buf *out)
{
	json_object *o = json_object_new_object(), *m = n_meta ? json_object_new_object() : NULL;
	uint64_t at = 0;
	size_t i;
	int d, rc = 0;

	for (i = 0; o && i < n_meta; i++)
		json_object_object_add(m, meta[2 * i], json_object_new_string(meta[2 * i + 1]));
	if (m)
		json_object_object_add(o, "__metadata__", m);
	for (i = 0; o && i < n; i++) {
		json_object *e = json_object_new_object(), *shape = json_object_new_array(),
			    *offs = json_object_new_array();
		uint64_t numel = 1;

		for (d = 0; d < t[i].ndim; d++) {
			json_object_array_add(shape, json_object_new_int64((int64_t)t[i].shape[d]));
			numel *= t[i].shape[d];
		}
		json_object_array_add(offs, json_object_new_int64((int64_t)at));
		json_object_array_add(offs, json_object_new_int64((int64_t)(at + 4 * numel)));
		at += 4 * numel;
		json_object_object_add(e, "dtype", json_object_new_string("F32"));
		json_object_object_add(e, "shape", shape);
		json_object_object_add(e, "data_offsets", offs);
		json_object_object_add(o, t[i].name, e);
	}
	if (!o)
		return -ENOMEM;
	rc = dt_buf_puts(out, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	while (!rc && out->len % 8) /* the data starts 8-aligned, as the format's writers do */
		rc = dt_buf_puts(out, " ");
	json_object_put(o);
	return rc;
}

/* The tensors' data, little-endian, after the header */
static int write_data(int fd, const struct st_out *t, size_t n)
{
	unsigned char *buf = malloc((size_t)READ_CHUNK * 4);
	size_t i, k, j;
	int rc = buf ? 0 : -ENOMEM;

	for (i = 0; !rc && i < n; i++) {
		uint64_t numel = 1;
		int d;

		for (d = 0; d < t[i].ndim; d++)
			numel *= t[i].shape[d];
		for (k = 0; !rc && k < numel; k += READ_CHUNK) {
			size_t count = numel - k < READ_CHUNK ? (size_t)(numel - k) : READ_CHUNK;

			for (j = 0; j < count; j++) {
				uint32_t bits;

				memcpy(&bits, &t[i].data[k + j], 4);
				buf[4 * j] = (unsigned char)bits;
				buf[4 * j + 1] = (unsigned char)(bits >> 8);
				buf[4 * j + 2] = (unsigned char)(bits >> 16);
				buf[4 * j + 3] = (unsigned char)(bits >> 24);
			}
			rc = dt_write_all(fd, buf, count * 4);
		}
	}
	free(buf);
	return rc;
}

int st_write(const char *path, const struct st_out *t, size_t n, const char *const *meta,
	     size_t n_meta, struct dt_err *err)
{
	struct dt_buf header = {0}, tmp = {0};
	unsigned char len8[8];
	int fd = -1, rc, i;

	rc = header_json(t, n, meta, n_meta, &header);
	if (!rc)
		rc = dt_buf_printf(&tmp, "%s.tmp.%ld", path, (long)getpid());
	if (rc) {
		dt_err_add(err, "%s: out of memory", path);
		goto out;
	}
	for (i = 0; i < 8; i++)
		len8[i] = (unsigned char)((uint64_t)header.len >> (8 * i));
	unlink(tmp.p); /* a dead writer's; never written through (O_EXCL, O_NOFOLLOW) */
	fd = open(tmp.p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		rc = -errno;
	if (!rc)
		rc = dt_write_all(fd, len8, 8);
	if (!rc)
		rc = dt_write_all(fd, header.p, header.len);
	if (!rc)
		rc = write_data(fd, t, n);
	if (!rc)
		rc = dt_fsync_fd(fd);
	if (fd >= 0 && close(fd) < 0 && !rc)
		rc = -errno;
	if (!rc && rename(tmp.p, path) < 0)
		rc = -errno;
	if (!rc)
		rc = dt_fsync_parent(path);
	if (rc) {
		dt_err_add(err, "%s: cannot write: %s", path, strerror(-rc));
		unlink(tmp.p);
	}
out:
	dt_buf_free(&header);
	dt_buf_free(&tmp);
	return rc;
}
