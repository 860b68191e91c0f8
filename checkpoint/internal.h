/*
 * internal.h - helpers shared by the files of the checkpoint module (not
 * part of its interface; ckpt.h is).
 *
 * Files: common.c (meta, names, hashes), write.c (shards, root file, seal),
 * commit.c (tmp directories, commit, retention), manifest.c (MANIFEST.json
 * both ways), read.c (list, verify, find, reader), export.c (export,
 * inspect).
 */
#ifndef DTRAIN_CHECKPOINT_INTERNAL_H
#define DTRAIN_CHECKPOINT_INTERNAL_H

#include <hdf5.h>

#include "base/h5.h"
#include "checkpoint/ckpt.h"
#include "base/buf.h"

#define CKPT_LATEST "latest"

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
 * checkpoint/README.md). */
int ckpt__manifest_emit(const struct ckpt_meta *meta, const struct ckpt_tensor *tensors,
			int n_tensors, const struct ckpt_file *files, int n_files,
			struct dt_buf *out);
/* Parses and checks MANIFEST.json text; path names it in messages. */
int ckpt__manifest_parse(const char *text, const char *path, struct ckpt_manifest *m,
			 struct dt_err *err);

/* Silences HDF5's own error stack printing for the calling thread (we
 * report errors ourselves, naming the path). Call before HDF5 work. */
void ckpt__h5_quiet(void);

#endif
