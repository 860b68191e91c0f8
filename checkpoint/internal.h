/*
 * internal.h - helpers shared by the files of the checkpoint module (not
 * part of its interface; ckpt.h is).
 *
 * Files: common.c (the meta's fields and checks, names, hashes), write.c
 * (shards, root file, seal), commit.c (tmp directories, commit,
 * retention), manifest.c (MANIFEST.json both ways), read.c (list, verify,
 * find, reader), export.c (export, inspect).
 */
#ifndef DTRAIN_CHECKPOINT_INTERNAL_H
#define DTRAIN_CHECKPOINT_INTERNAL_H

#include <hdf5.h>

#include "base/h5.h"
#include "checkpoint/ckpt.h"
#include "base/buf.h"

#define CKPT_LATEST "latest"

#define CKPT__MAX_COUNT ((int64_t)1 << 62) /* bound for steps, rows, sizes: no overflow downstream */

/* --- the meta's fields, one table (common.c) ---
 *
 * Every field of struct ckpt_meta that a checkpoint stores, once: the meta
 * attributes of every HDF5 file (write.c), and MANIFEST.json both ways
 * (manifest.c). Rows are in the manifest's order; the attributes were
 * always written in another, which each row's attr_at keeps, so that the
 * same meta gives the same bytes.
 */
enum ckpt__kind {
	CKPT__FORMAT,  /* CKPT_FORMAT, no field: what the file is */
	CKPT__VERSION, /* int format_version: CKPT_VERSION written; HDF5 int32 */
	CKPT__I64,     /* int64_t in min..max; HDF5 int64 */
	CKPT__INT,     /* int in min..max; HDF5 int32 */
	CKPT__U64,     /* uint64_t, any but 2^64-1; HDF5 uint64 */
	CKPT__NUM,     /* double, finite and >= 0; HDF5 float64 */
	CKPT__BOOL,    /* bool: JSON true/false; HDF5 int32 0 or 1 */
	CKPT__STR,     /* char[size], no control characters; HDF5 fixed-length
			* NUL-terminated string, as every string here */
	CKPT__HASH,    /* char[17]: 16 lower-case hex digits (ckpt_hash64) */
	CKPT__TIME,    /* char[size]: "2026-11-21T10:00:00Z" (UTC) or "" */
	CKPT__STATES,  /* states[n_states]: a JSON array of names; HDF5 "exp_avg,exp_avg_sq" */
	CKPT__STAGES,  /* stage_first[pipeline + 1]: a JSON array; HDF5 int32 [pipeline + 1] */
	CKPT__CONFIG,  /* model_config: a JSON object in the manifest, its text in HDF5 */
};

/* Read with the model, after every other field: format 1 gives the model
 * in another shape (manifest.c). */
#define CKPT__F_MODEL 1u
/* 0 is written as 1, and a manifest without it reads as 1: it was added
 * later (optimizer.shards). */
#define CKPT__F_ONE 2u

struct ckpt__field {
	const char *json;   /* its path in MANIFEST.json, one level deep at most: "rng.seed" */
	const char *attr;   /* its attribute's name in the HDF5 files: "rng_seed" */
	int attr_at;        /* that attribute's place among them, from 0 */
	enum ckpt__kind kind;
	size_t offset;      /* in struct ckpt_meta (unused: CKPT__FORMAT) */
	size_t size;        /* bytes of the field */
	int64_t min, max;   /* what a manifest may give: an integer's range; of
			     * CKPT__STATES, how many; of CKPT__STAGES, each
			     * element's range */
	unsigned flags;     /* CKPT__F_* */
};

/* The table [*n]: static, never freed. */
const struct ckpt__field *ckpt__meta_fields(int *n);
/* The row whose attribute comes at place at (0..n-1). */
const struct ckpt__field *ckpt__meta_field_at(int at);
/* An integer row's value as both files store it: CKPT__I64, CKPT__INT
 * (CKPT__F_ONE applied), CKPT__BOOL (0 or 1), CKPT__VERSION (CKPT_VERSION). */
int64_t ckpt__meta_int(const struct ckpt__field *f, const struct ckpt_meta *meta);
/* A string row's text: CKPT__STR, CKPT__HASH, CKPT__TIME, CKPT__CONFIG,
 * CKPT__FORMAT (CKPT_FORMAT). Points into meta (or is static). */
const char *ckpt__meta_str(const struct ckpt__field *f, const struct ckpt_meta *meta);

/* HDF5 path of tensor t in a shard or root file of meta's format version:
 * state NULL for the parameter itself ("model/0.weight"), else the
 * state's ("optimizer/exp_avg/0.weight"); format 1: "layers/<block>/weight". */
void ckpt__tensor_path(const struct ckpt_meta *meta, const struct ckpt_tensor *t,
		       const char *state, char *out, size_t size);
/* Its shape as HDF5 dims (t->ndim of them). */
void ckpt__tensor_dims(const struct ckpt_tensor *t, hsize_t dims[CKPT_MAX_DIMS]);

/* The meta is finished (ckpt_meta_finish, checked on a copy: the layout's
 * numbers index arrays) and, when tensors is not NULL, the table [n] fits
 * it (ckpt_tensors_check); else -EINVAL naming the field, then "path:
 * refusing to <doing> a checkpoint ...". */
int ckpt__check_meta(const struct ckpt_meta *meta, const struct ckpt_tensor *tensors, int n,
		     const char *path, const char *doing, struct dt_err *err);

/* The meta as attributes of loc (a file's root group). */
int ckpt__write_meta_attrs(hid_t loc, const struct ckpt_meta *meta, const char *path,
			   struct dt_err *err);

/* MANIFEST.json text for meta, tensors and files (schema:
 * docs/checkpoints.md, "MANIFEST.json"). */
int ckpt__manifest_emit(const struct ckpt_meta *meta, const struct ckpt_tensor *tensors,
			int n_tensors, const struct ckpt_file *files, int n_files,
			struct dt_buf *out);
/* Parses and checks MANIFEST.json text; path names it in messages. */
int ckpt__manifest_parse(const char *text, const char *path, struct ckpt_manifest *m,
			 struct dt_err *err);

/* --- files of a save's tmp directory (commit.c) ---
 *
 * A checkpoint directory often lives on a shared file system where others
 * may plant a symbolic link under a name a save uses. The tmp directory is
 * made afresh by the save (ckpt_tmp_make), and every file of it is opened
 * relative to it, never through a link the save did not make. */

/* A new fd of the directory d names (ckpt.h, struct ckpt_dir): held, its
 * "." opened again (nothing resolved by path); else d->path opened now,
 * followed when follow (a checkpoint directory as given), else not at its
 * last component (a tmp directory: -ELOOP for a link). The caller closes
 * it. -errno on failure. */
int ckpt__dir_get(const struct ckpt_dir *d, bool follow);

/* Opens tmp/name, a file of a save's tmp directory, relative to it (tmp
 * as ckpt__dir_get(tmp, false) gives it) without following a link
 * (O_NOFOLLOW). With O_CREAT in flags the file is made new (O_EXCL): a
 * regular file already there (an earlier attempt's) is removed first. A
 * link at either place is refused with -ELOOP and a message naming it;
 * other failures give -errno and "path: doing: why". Returns the fd (the
 * caller closes it). */
int ckpt__tmp_file(const struct ckpt_dir *tmp, const char *name, int flags, const char *doing,
		   struct dt_err *err);

/* The crc32 (ckpt_crc32) and byte count of what fd holds from its offset
 * to its end, read through buf (cap bytes); a read cut by a signal goes on.
 * 0 or -errno (*size and *crc unset). (common.c) */
int ckpt__crc_fd(int fd, void *buf, size_t cap, uint64_t *size, uint32_t *crc);

/* Silences HDF5's own error stack printing for the calling thread (we
 * report errors ourselves, naming the path). Call before HDF5 work. */
void ckpt__h5_quiet(void);

#endif
