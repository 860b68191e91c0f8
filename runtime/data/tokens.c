/*
 * tokens.c - token streams (tokens.h): the HDF5 format both ways, and the
 * importers of text and of pre-tokenized shards.
 *
 * Sections: attributes, reading, writing, importing.
 */
#include "runtime/data/tokens.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "base/h5.h"
#include "base/io.h"
#include "runtime/data/bpe.h"

/* --- attributes (base/h5.h): read leniently, any failure is false --- */

/* Integer attribute name of the root group into *v; false when it is not
 * there or not one integer. */
static bool attr_int(hid_t file, const char *name, int64_t *v)
{
	char why[DT_H5_WHY_MAX];

	return dt_h5_attr_get_i64(file, name, v, why) == 0;
}

/* String attribute name into out [size]; false when it is not there, not
 * one string, or longer than size - 1. */
static bool attr_str(hid_t file, const char *name, char *out, size_t size)
{
	char why[DT_H5_WHY_MAX], *s = NULL;
	bool ok = dt_h5_attr_get_str(file, name, size - 1, &s, why) == 0 && strlen(s) < size;

	if (ok)
		memcpy(out, s, strlen(s) + 1);
	free(s);
	return ok;
}

/* Token streams store integers as int32 and strings as fixed-length ASCII
 * without their NUL. 0 or -EIO. */
static int put_int(hid_t file, const char *name, int32_t v)
{
	char why[DT_H5_WHY_MAX];

	return dt_h5_attr_put_i32(file, name, v, why);
}

static int put_str(hid_t file, const char *name, const char *v)
{
	char why[DT_H5_WHY_MAX];

	return dt_h5_attr_put_str(file, name, v, DT_H5_STR_ASCII, why);
}

/* --- reading --- */

bool rt_tokens_is_stream(const char *path)
{
	struct dt_h5_quiet q;
	hid_t fapl, file = H5I_INVALID_HID;
	char format[64];
	bool yes = false;

	dt_h5_quiet_on(&q);
	fapl = dt_h5_fapl(DT_H5_STRONG_CLOSE);
	if (fapl >= 0 && H5Fis_hdf5(path) > 0 && (file = H5Fopen(path, H5F_ACC_RDONLY, fapl)) >= 0)
		yes = attr_str(file, "format", format, sizeof(format)) && !strcmp(format, RT_TOKENS_FORMAT);
	dt_h5_close(&file, H5Fclose);
	dt_h5_close(&fapl, H5Pclose);
	dt_h5_quiet_off(&q);
	return yes;
}

/* The root attributes of an open stream, each checked before it is trusted;
 * *vocab and *byte_level get theirs. -EINVAL naming the first that is wrong. */
static int check_attrs(struct rt_tokens *t, const char *path, int64_t *vocab, int64_t *byte_level,
		       struct dt_err *err)
{
	char format[64];
	int64_t version = 0;

	if (!attr_str(t->file, "format", format, sizeof(format)) || strcmp(format, RT_TOKENS_FORMAT))
		return dt_err_add(err, "%s: not a dtrain token stream (attribute format must be \"%s\")",
				  path, RT_TOKENS_FORMAT);
	if (!attr_int(t->file, "version", &version) || version != RT_TOKENS_VERSION)
		return dt_err_add(err, "%s: attribute version must be %d (got %" PRId64 ")", path,
				  RT_TOKENS_VERSION, version);
	if (!attr_int(t->file, "vocab_size", vocab) || *vocab < 2 || *vocab > RT_TOKENS_MAX_VOCAB)
		return dt_err_add(err, "%s: attribute vocab_size must be an integer in [2, %d]", path,
				  RT_TOKENS_MAX_VOCAB);
	if (!attr_int(t->file, "byte_level", byte_level) || (*byte_level != 0 && *byte_level != 1) ||
	    (*byte_level && *vocab != 256))
		return dt_err_add(err, "%s: attribute byte_level must be 0, or 1 with vocab_size 256",
				  path);
	if (!attr_str(t->file, "source", t->source, sizeof(t->source)))
		return dt_err_add(err, "%s: attribute source must be a string of at most %zu bytes",
				  path, sizeof(t->source) - 1);
	if (!attr_str(t->file, "tokenizer", t->tokenizer, sizeof(t->tokenizer)))
		t->tokenizer[0] = '\0'; /* optional: streams made by --bpe have it */
	return 0;
}

/* Opens /tokens into t->set (t's to close) once its type and shape are what
 * reads assume: one dimension of integers, 2 .. 2^46 of them (*n). */
static int open_tokens(struct rt_tokens *t, const char *path, hsize_t *n, struct dt_err *err)
{
	hid_t type = H5I_INVALID_HID, space = H5I_INVALID_HID;
	hsize_t dims[2];
	int rc = -EINVAL;

	if (H5Lexists(t->file, "tokens", H5P_DEFAULT) <= 0 ||
	    (t->set = H5Dopen2(t->file, "tokens", H5P_DEFAULT)) < 0) {
		dt_err_add(err, "%s: no dataset /tokens", path);
		goto out;
	}
	type = H5Dget_type(t->set);
	space = H5Dget_space(t->set);
	if (type < 0 || H5Tget_class(type) != H5T_INTEGER || space < 0 ||
	    H5Sget_simple_extent_ndims(space) != 1 || H5Sget_simple_extent_dims(space, dims, NULL) != 1) {
		dt_err_add(err, "%s: /tokens must be a one-dimensional integer dataset", path);
		goto out;
	}
	if (dims[0] < 2 || dims[0] > ((hsize_t)1 << 46)) {
		dt_err_add(err, "%s: /tokens has %llu tokens (2 .. 2^46)", path,
			   (unsigned long long)dims[0]);
		goto out;
	}
	*n = dims[0];
	rc = 0;
out:
	dt_h5_close(&space, H5Sclose);
	dt_h5_close(&type, H5Tclose);
	return rc;
}

int rt_tokens_open(struct rt_tokens *t, const char *path, struct dt_err *err)
{
	struct dt_h5_quiet q;
	hid_t fapl = H5I_INVALID_HID;
	char why[DT_H5_WHY_MAX];
	hsize_t n = 0;
	int64_t vocab = 0, byte_level = 0;
	struct stat st;
	int rc = -EINVAL;

	memset(t, 0, sizeof(*t));
	t->file = t->set = H5I_INVALID_HID;
	if (snprintf(t->path, sizeof(t->path), "%s", path) >= (int)sizeof(t->path))
		return dt_err_add(err, "%s: path too long", path);
	if (stat(path, &st) != 0)
		return dt_err_add(err, "%s: cannot open: %s", path, strerror(errno)), -ENOENT;
	if (!S_ISREG(st.st_mode))
		return dt_err_add(err, "%s: not a regular file", path);
	dt_h5_quiet_on(&q);
	if (H5Fis_hdf5(path) <= 0) {
		dt_err_add(err, "%s: not an HDF5 file (make token streams with dtrain-data text or dtrain-data tokens)",
			   path);
		goto out;
	}
	fapl = dt_h5_fapl(DT_H5_STRONG_CLOSE);
	if (fapl < 0 || (t->file = H5Fopen(path, H5F_ACC_RDONLY, fapl)) < 0) {
		dt_err_add(err, "%s: cannot open: %s", path, dt_h5_why(why));
		goto out;
	}
	rc = check_attrs(t, path, &vocab, &byte_level, err);
	if (!rc)
		rc = open_tokens(t, path, &n, err);
	if (rc)
		goto out;
	t->n = (int64_t)n;
	t->vocab = (int32_t)vocab;
	t->byte_level = byte_level == 1;
out:
	dt_h5_close(&fapl, H5Pclose);
	dt_h5_quiet_off(&q);
	if (rc)
		rt_tokens_close(t);
	return rc;
}

void rt_tokens_close(struct rt_tokens *t)
{
	hid_t set = (hid_t)t->set, file = (hid_t)t->file;

	dt_h5_close(&set, H5Dclose);
	dt_h5_close(&file, H5Fclose);
	t->set = t->file = H5I_INVALID_HID;
}

int rt_tokens_read(struct rt_tokens *t, int64_t first, int64_t count, int32_t *out,
		   struct dt_err *err)
{
	struct dt_h5_quiet q;
	hid_t space = H5I_INVALID_HID, mem = H5I_INVALID_HID;
	hsize_t start = (hsize_t)first, n = (hsize_t)count;
	char why[DT_H5_WHY_MAX];
	int64_t i;
	int rc = 0;

	if (first < 0 || count < 0 || first > t->n || count > t->n - first)
		return dt_err_add(err, "%s: tokens [%" PRId64 ", %" PRId64 ") are outside the stream's %" PRId64,
				  t->path, first, first + count, t->n);
	if (count == 0)
		return 0;
	dt_h5_quiet_on(&q);
	space = H5Dget_space((hid_t)t->set);
	mem = H5Screate_simple(1, &n, NULL);
	if (space < 0 || mem < 0 || H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, NULL, &n, NULL) < 0 ||
	    H5Dread((hid_t)t->set, H5T_NATIVE_INT32, mem, space, H5P_DEFAULT, out) < 0) {
		dt_err_add(err, "%s: /tokens: cannot read tokens %" PRId64 "..%" PRId64 ": %s", t->path,
			   first, first + count - 1, dt_h5_why(why));
		rc = -EIO;
	}
	dt_h5_close(&mem, H5Sclose);
	dt_h5_close(&space, H5Sclose);
	dt_h5_quiet_off(&q);
	for (i = 0; !rc && i < count; i++)
		if (out[i] < 0 || out[i] >= t->vocab)
			rc = dt_err_add(err, "%s: /tokens: token %" PRId64 " is %" PRId32 ", outside the vocabulary [0, %" PRId32 ")",
					t->path, first + i, out[i], t->vocab);
	return rc;
}

/* --- windows --- */

int64_t rt_tokens_windows(const struct rt_tokens *t, int context)
{
	return context < 1 || t->n < 2 ? 0 : (t->n - 1) / context;
}

int rt_tokens_read_windows(struct rt_tokens *t, int context, const int64_t *idx, int n,
			   int32_t *out, struct dt_err *err)
{
	int64_t windows = rt_tokens_windows(t, context);
	int i, rc;

	for (i = 0; i < n; i++) {
		if (idx[i] < 0 || idx[i] >= windows)
			return dt_err_add(err, "%s: window %" PRId64 " does not exist (%" PRId64 " windows of %d + 1 tokens)",
					  t->path, idx[i], windows, context);
		rc = rt_tokens_read(t, idx[i] * context, (int64_t)context + 1,
				    out + (size_t)i * ((size_t)context + 1), err);
		if (rc)
			return rc;
	}
	return 0;
}

/* --- writing --- */

/* uint8 dataset name of file holding data [len]; 0 or -EIO. */
static int put_bytes(hid_t file, hid_t dcpl, const char *name, const char *data, size_t len)
{
	hsize_t dims[1] = { len };
	hid_t space = H5Screate_simple(1, dims, NULL), set = H5I_INVALID_HID;
	int rc = -EIO;

	if (space >= 0 &&
	    (set = H5Dcreate2(file, name, H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT)) >= 0 &&
	    (!len || H5Dwrite(set, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0))
		rc = 0;
	dt_h5_close(&set, H5Dclose);
	dt_h5_close(&space, H5Sclose);
	return rc;
}

/* The tokenizer bpe into file (rt_tokens_write_bpe): the attribute and the
 * files' bytes under /tokenizer, each under its name; 0 or -EIO. */
static int put_tokenizer(hid_t file, hid_t dcpl, const struct rt_bpe *bpe)
{
	struct rt_bpe_files f;
	char set[64];
	hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE), group = H5I_INVALID_HID;
	int rc = -EIO, i;

	rt_bpe_files(bpe, &f);
	if (gcpl >= 0 && H5Pset_obj_track_times(gcpl, 0) >= 0 &&
	    (group = H5Gcreate2(file, RT_BPE_H5_GROUP, H5P_DEFAULT, gcpl, H5P_DEFAULT)) >= 0 &&
	    !put_str(file, "tokenizer", f.kind))
		rc = 0;
	for (i = 0; i < f.n && !rc; i++) {
		snprintf(set, sizeof(set), "%s/%s", RT_BPE_H5_GROUP, f.name[i]);
		rc = put_bytes(file, dcpl, set, f.data[i], f.len[i]) ? -EIO : 0;
	}
	dt_h5_close(&group, H5Gclose);
	dt_h5_close(&gcpl, H5Pclose);
	return rc;
}

static int write_stream(const char *path, const int32_t *tok, int64_t n, int32_t vocab,
			bool byte_level, const char *source, const struct rt_bpe *bpe,
			struct dt_err *err)
{
	struct dt_h5_quiet q;
	hid_t fapl = H5I_INVALID_HID, file = H5I_INVALID_HID, space = H5I_INVALID_HID;
	hid_t set = H5I_INVALID_HID, dcpl = H5I_INVALID_HID;
	hsize_t dims[1] = { (hsize_t)n };
	char tmp[4200], why[DT_H5_WHY_MAX];
	uint16_t *u16 = NULL;
	bool wide = vocab > 65536;
	int64_t i;
	int rc = 0;

	if (n < 2 || vocab < 2 || vocab > RT_TOKENS_MAX_VOCAB)
		return dt_err_add(err, "%s: a token stream needs 2 tokens or more and a vocabulary in [2, %d]",
				  path, RT_TOKENS_MAX_VOCAB);
	for (i = 0; i < n; i++)
		if (tok[i] < 0 || tok[i] >= vocab)
			return dt_err_add(err, "%s: token %" PRId64 " is %" PRId32 ", outside the vocabulary [0, %" PRId32 ")",
					  path, i, tok[i], vocab);
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp))
		return dt_err_add(err, "%s: path too long", path);
	if (!wide) {
		u16 = malloc((size_t)n * sizeof(*u16));
		if (!u16)
			return dt_err_add(err, "%s: out of memory for %" PRId64 " tokens", path, n), -ENOMEM;
		for (i = 0; i < n; i++)
			u16[i] = (uint16_t)tok[i];
	}
	dt_h5_quiet_on(&q);
	fapl = dt_h5_fapl(DT_H5_STRONG_CLOSE);
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	if (fapl < 0 || dcpl < 0 || H5Pset_obj_track_times(dcpl, 0) < 0 ||
	    (file = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl)) < 0 ||
	    (space = H5Screate_simple(1, dims, NULL)) < 0 ||
	    (set = H5Dcreate2(file, "tokens", wide ? H5T_STD_I32LE : H5T_STD_U16LE, space, H5P_DEFAULT,
			      dcpl, H5P_DEFAULT)) < 0 ||
	    H5Dwrite(set, wide ? H5T_NATIVE_INT32 : H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT,
		     wide ? (const void *)tok : (const void *)u16) < 0 ||
	    put_str(file, "format", RT_TOKENS_FORMAT) || put_int(file, "version", RT_TOKENS_VERSION) ||
	    put_int(file, "vocab_size", vocab) || put_int(file, "byte_level", byte_level ? 1 : 0) ||
	    put_str(file, "source", source) || (bpe && put_tokenizer(file, dcpl, bpe))) {
		dt_err_add(err, "%s: cannot write: %s", tmp, dt_h5_why(why));
		rc = -EIO;
	}
	dt_h5_close(&set, H5Dclose);
	dt_h5_close(&space, H5Sclose);
	dt_h5_close(&dcpl, H5Pclose);
	if (file >= 0 && H5Fclose(file) < 0 && !rc) {
		dt_err_add(err, "%s: cannot write: %s", tmp, dt_h5_why(why));
		rc = -EIO;
	}
	dt_h5_close(&fapl, H5Pclose);
	dt_h5_quiet_off(&q);
	free(u16);
	if (!rc && (rc = dt_fsync_path(tmp, false)))
		dt_err_add(err, "%s: fsync failed: %s", tmp, strerror(-rc));
	if (!rc && rename(tmp, path) != 0) {
		rc = -errno;
		dt_err_add(err, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
	}
	if (!rc && (rc = dt_fsync_parent(path)))
		dt_err_add(err, "%s: fsync of its directory failed: %s", path, strerror(-rc));
	if (rc)
		unlink(tmp);
	return rc;
}

int rt_tokens_write(const char *path, const int32_t *tok, int64_t n, int32_t vocab,
		    bool byte_level, const char *source, struct dt_err *err)
{
	return write_stream(path, tok, n, vocab, byte_level, source, NULL, err);
}

int rt_tokens_write_bpe(const char *path, const int32_t *tok, int64_t n, const struct rt_bpe *bpe,
			const char *source, struct dt_err *err)
{
	return write_stream(path, tok, n, rt_bpe_vocab(bpe), false, source, bpe, err);
}

/* --- importing --- */

/* A growing stream of tokens. */
struct stream {
	int32_t *v;
	int64_t n, cap;
};

static int stream_add(struct stream *s, int64_t more)
{
	int32_t *p;
	int64_t cap = s->cap ? s->cap : 1 << 16;

	while (cap < s->n + more)
		cap *= 2;
	if (cap == s->cap)
		return 0;
	p = realloc(s->v, (size_t)cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	s->v = p;
	s->cap = cap;
	return 0;
}

/* What an import reads and how: the reader of one file, the vocabulary,
 * whether ids are bytes, the BPE (or NULL), the word for the source line. */
struct how;
typedef int (*reader_fn)(const char *path, const struct how *how, struct stream *s,
			 struct dt_err *err);
struct how {
	reader_fn read;
	const char *what;
	int32_t vocab;
	bool byte_level;
	struct rt_bpe *bpe;
};

/* A text file as tokens appended to s: its bytes, or (how->bpe) their
 * encoding, a document of its own (Llama 3's template puts its
 * begin-of-text id before it). */
static int read_text(const char *path, const struct how *how, struct stream *s,
		     struct dt_err *err)
{
	char *text = NULL;
	size_t len = 0, k = 0, i;
	int rc = dt_read_file(path, &text, &len);

	if (rc)
		return dt_err_add(err, "%s: cannot read: %s", path, strerror(-rc)), rc;
	if (stream_add(s, (int64_t)(how->bpe ? rt_bpe_max_ids(how->bpe, len) : len))) {
		free(text);
		return dt_err_add(err, "%s: out of memory for %zu tokens", path, len), -ENOMEM;
	}
	if (how->bpe) {
		rc = rt_bpe_encode(how->bpe, text, len, s->v + s->n, &k, err);
		if (rc)
			dt_err_add(err, "%s: cannot encode", path);
		s->n += (int64_t)k;
	} else {
		for (i = 0; i < len; i++)
			s->v[s->n++] = (unsigned char)text[i];
	}
	free(text);
	return rc;
}

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A pre-tokenized shard (llm.c's, or raw uint16), every token checked,
 * appended to s. */
static int read_shard(const char *path, const struct how *how, struct stream *s,
		      struct dt_err *err)
{
	int32_t vocab = how->vocab;
	unsigned char *b = NULL;
	size_t len = 0, at = 0, i, count;
	char *raw = NULL;
	int rc = dt_read_file(path, &raw, &len);

	if (rc)
		return dt_err_add(err, "%s: cannot read: %s", path, strerror(-rc)), rc;
	b = (unsigned char *)raw;
	if (len >= 4 && le32(b) == RT_LLMC_MAGIC) {
		uint32_t version, ntok;

		if (len < 1024) {
			rc = dt_err_add(err, "%s: an llm.c shard (magic %d) of %zu bytes, shorter than its 1024-byte header",
					path, RT_LLMC_MAGIC, len);
			goto out;
		}
		version = le32(b + 4);
		ntok = le32(b + 8);
		if (version != 1) {
			rc = dt_err_add(err, "%s: offset 4: llm.c shard version %" PRIu32 ", expected 1 (uint16 tokens)",
					path, version);
			goto out;
		}
		if (len != 1024 + 2 * (size_t)ntok) {
			rc = dt_err_add(err, "%s: offset 8: the header says %" PRIu32 " tokens (%zu bytes with the header) but the file has %zu bytes",
					path, ntok, 1024 + 2 * (size_t)ntok, len);
			goto out;
		}
		at = 1024;
	} else if (len % 2) {
		rc = dt_err_add(err, "%s: %zu bytes, an odd size: not uint16 tokens (nanoGPT's .bin) nor an llm.c shard (magic %d)",
				path, len, RT_LLMC_MAGIC);
		goto out;
	}
	count = (len - at) / 2;
	if (count == 0) {
		rc = dt_err_add(err, "%s: holds no tokens", path);
		goto out;
	}
	if (stream_add(s, (int64_t)count)) {
		dt_err_add(err, "%s: out of memory for %zu tokens", path, count);
		rc = -ENOMEM;
		goto out;
	}
	for (i = 0; i < count; i++) {
		int32_t tk = (int32_t)(b[at + 2 * i] | b[at + 2 * i + 1] << 8);

		if (tk >= vocab) {
			rc = dt_err_add(err, "%s: offset %zu: token %" PRId32 " is not below the vocabulary size %" PRId32 " (hint: --vocab)",
					path, at + 2 * i, tk, vocab);
			goto out;
		}
		s->v[s->n++] = tk;
	}
out:
	free(raw);
	return rc;
}


/* Reads files [n] into one stream, checking all before anything is written. */
static int read_all(const struct how *how, const char *const *files, int n, struct stream *s,
		    struct dt_err *err)
{
	int i, rc = 0;

	for (i = 0; i < n && !rc; i++)
		rc = how->read(files[i], how, s, err);
	return rc;
}

/* One stream of an import to path, with the tokenizer when there is one. */
static int write_one(const struct how *how, const char *path, const int32_t *tok, int64_t n,
		     const char *source, struct dt_err *err)
{
	if (how->bpe)
		return rt_tokens_write_bpe(path, tok, n, how->bpe, source, err);
	return rt_tokens_write(path, tok, n, how->vocab, how->byte_level, source, err);
}

/* "3 files: a.txt, b.txt, ..." into out: the source attribute. */
static void describe(const char *what, const char *const *files, int n, char *out, size_t size)
{
	const char *base = strrchr(files[0], '/');
	int at = snprintf(out, size, "%s of %d file%s: %s", what, n, n == 1 ? "" : "s",
			  base ? base + 1 : files[0]);

	if (n > 1 && at > 0 && (size_t)at < size)
		snprintf(out + at, size - (size_t)at, ", ...");
}

static int import(const struct how *how, const char *const *files, int n,
		  const struct rt_tokens_split *split, const char *out_dir, struct dt_err *err)
{
	struct stream train = { 0 }, val = { 0 };
	char path[4200], source[256];
	const int32_t *vp;
	int64_t nv, nt;
	int rc;

	if (n < 1)
		return dt_err_add(err, "no input files");
	if (!split->n_val_files && !(split->val_fraction > 0 && split->val_fraction < 1))
		return dt_err_add(err, "--val-fraction must be in (0, 1) (got %g)", split->val_fraction);
	rc = read_all(how, files, n, &train, err);
	if (!rc && split->n_val_files)
		rc = read_all(how, split->val_files, split->n_val_files, &val, err);
	if (rc)
		goto out;
	if (split->n_val_files) {
		vp = val.v;
		nv = val.n;
		nt = train.n;
	} else {
		nv = (int64_t)((double)train.n * split->val_fraction);
		nt = train.n - nv;
		vp = train.v + nt;
	}
	if (nt < 2 || nv < 2) {
		rc = dt_err_add(err, "%s: %" PRId64 " tokens for training and %" PRId64 " held out: each needs 2 at least",
				files[0], nt, nv);
		goto out;
	}
	if ((rc = dt_mkdirs(out_dir, 0755))) {
		dt_err_add(err, "%s: cannot create: %s", out_dir, strerror(-rc));
		goto out;
	}
	describe(how->what, files, n, source, sizeof(source));
	snprintf(path, sizeof(path), "%s/train.h5", out_dir);
	rc = write_one(how, path, train.v, nt, source, err);
	if (!rc) {
		char held[300];

		if (split->n_val_files)
			describe(how->what, split->val_files, split->n_val_files, held, sizeof(held));
		else
			snprintf(held, sizeof(held), "%.200s, the last %g of it", source, split->val_fraction);
		snprintf(source, sizeof(source), "%.255s", held);
		snprintf(path, sizeof(path), "%s/val.h5", out_dir);
		rc = write_one(how, path, vp, nv, source, err);
	}
out:
	free(train.v);
	free(val.v);
	return rc;
}

int rt_tokens_from_text(const char *const *files, int n, const struct rt_tokens_split *split,
			const char *out_dir, struct dt_err *err)
{
	const struct how how = { read_text, "bytes", 256, true, NULL };

	return import(&how, files, n, split, out_dir, err);
}

int rt_tokens_from_text_bpe(const char *const *files, int n, struct rt_bpe *bpe,
			    const struct rt_tokens_split *split, const char *out_dir,
			    struct dt_err *err)
{
	struct rt_bpe_files f;
	struct how how = { read_text, "GPT-2 BPE tokens", rt_bpe_vocab(bpe), false, bpe };

	rt_bpe_files(bpe, &f);
	if (strcmp(f.kind, RT_BPE_NAME))
		how.what = "tokenizer.json tokens";

	return import(&how, files, n, split, out_dir, err);
}

int rt_tokens_from_shards(const char *const *files, int n, int32_t vocab,
			  const struct rt_tokens_split *split, const char *out_dir,
			  struct dt_err *err)
{
	const struct how how = { read_shard, "tokens", vocab, false, NULL };

	if (vocab < 2 || vocab > 65536)
		return dt_err_add(err, "--vocab must be in [2, 65536] for uint16 shards (got %" PRId32 ")", vocab);
	return import(&how, files, n, split, out_dir, err);
}
