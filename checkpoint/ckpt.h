/*
 * ckpt.h - dtrain checkpoints: sharded HDF5 files, an atomic commit, and
 * the checks that make a checkpoint safe to resume from.
 *
 * A checkpoint is one directory, <dir>/step-<8 digits>, holding
 *   shard-<k>.h5   pipeline stage k's blocks: parameters and optimizer
 *                  state, one float32 dataset per tensor, under the model's
 *                  name for it, with its global shape (whole blocks per
 *                  stage, so local = global):
 *                    /model/<name>                 e.g. /model/0.weight
 *                    /optimizer/<state>/<name>     same shape, for each
 *                  state name (sgd: "momentum_buffer"; adamw: "exp_avg",
 *                  "exp_avg_sq", PyTorch's names), written by one
 *                  data-parallel replica;
 *   optim-<k>-<r>.h5  with a sharded optimizer (meta optimizer_shards = D
 *                  > 1): stage k's optimizer state is not in shard-<k>.h5
 *                  but in D pieces, piece r written by data-parallel
 *                  replica r: rows ckpt_piece_rows(r, D) of every tensor
 *                  (its first dimension), at the same paths
 *                  /optimizer/<state>/<name>, shaped [its rows][the rest]
 *                  (a tensor with no rows in a piece is absent from it);
 *   model.h5       the root: the same paths as virtual datasets mapping onto
 *                  the shards and pieces (relative file names, a sharded
 *                  state mapped piece by piece, rows onto rows), so
 *                  `h5ls -r model.h5` or h5py sees the whole model as one
 *                  file;
 *   encoder.json, vocab.bpe  when the run's text was tokenized with GPT-2's
 *                  BPE (or an import found them): the tokenizer's two files
 *                  as given, for `dtrain-ckpt sample` (tokenizer.c);
 *   MANIFEST.json  written last: format, step, layout, meta, the model's
 *                  tensors (name, shape, block), and every other file with
 *                  its size and CRC-32 (zlib's polynomial).
 * Every HDF5 file carries the meta (below) as attributes of its root group,
 * with "format" = CKPT_FORMAT and "format_version" = CKPT_VERSION.
 * <dir>/latest is a symlink to the newest committed checkpoint's name (for
 * people; resume never trusts it, it checks every file).
 *
 * Commit protocol (docs/checkpoints.md, "How a save is committed", has the full story):
 *   0. one rank makes <dir>/.step-<8 digits>.tmp afresh (ckpt_tmp_make);
 *   1. files are written into it, each made new and fsynced;
 *   2. the sizes and checksums are gathered by one rank, which writes
 *      MANIFEST.json there, fsyncs it and the directory, renames the
 *      directory to step-<8 digits>, fsyncs <dir>, repoints latest (symlink
 *      to a temporary name, then rename) and deletes the oldest committed
 *      checkpoints beyond `keep`.
 * The module knows no model: a model is a type, a config (JSON) and a table
 * of tensors in blocks, which the caller gives when writing and the
 * manifest gives back when reading.
 *
 * Format version 1 (before models had an interface: MLPs only) is still
 * read: its manifest's model.widths and model.activation read as model
 * type "mlp" with config {"inputs":I,"hidden":[...],"outputs":O,
 * "activation":"A"}, its layer l as block l with the tensors "<2l>.weight"
 * and "<2l>.bias" (runtime/model/mlp.h's names), stored at /layers/<l>/weight and
 * /layers/<l>/bias. New checkpoints are always written in the current
 * version; `dtrain-ckpt export` converts an old one.
 *
 * A reader that lists step-* directories therefore sees only complete
 * checkpoints; a crash leaves at most a .tmp directory, which the next
 * writer removes (ckpt_clean_tmp).
 *
 * Links: a checkpoint directory is often on a shared file system, where
 * others may plant a symbolic link under a name a save uses. No file of a
 * save is opened, written, renamed or removed through a link the save did
 * not make: the tmp directory is made afresh, its files are opened
 * relative to it with O_NOFOLLOW (and made with O_EXCL), leftovers are
 * removed as links, latest is replaced by rename. A planted link is
 * refused with an error naming it (or, a leftover, removed as a link).
 *
 * Trust: nothing read from a checkpoint is used before it is checked:
 * the manifest's fields and file names, each file's size and CRC, and each
 * dataset's type and shape against what the caller expects. A damaged or
 * hostile file gives an error naming the file, never an out-of-bounds read.
 *
 * This module knows files only: no MPI, no threads of its own. The runtime
 * (runtime/train/checkpointing.c) decides who writes what and when; ckpt_shard_*
 * split a shard's write into a fast part (main thread: write the HDF5
 * metadata, and copy the state unless the copy is deferred) and a slow part
 * (any thread: the deferred copy, the bytes, fsync, CRC) that calls no HDF5
 * function, because the HDF5 library is not thread-safe.
 *
 * Errors: functions return 0 or a negative errno-style code and add a line
 * naming the path to err (base/err.h).
 *
 * Sections: meta, names and hashes, writing a shard, the root file, commit,
 * listing and manifests, verifying, reading tensors, export and inspect.
 */
#ifndef DTRAIN_CHECKPOINT_CKPT_H
#define DTRAIN_CHECKPOINT_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/err.h"
#include "base/io.h"

#define CKPT_FORMAT "dtrain-checkpoint"
#define CKPT_VERSION 2
#define CKPT_MAX_BLOCKS 1025 /* the MLP's model.hidden has at most 1024 entries */
#define CKPT_MAX_FILES 8192 /* the root, a shard per stage, and optimizer pieces */
#define CKPT_MAX_STATES 2
#define CKPT_MAX_TENSORS 8192
#define CKPT_NAME_MAX 96    /* bytes of a tensor name, its NUL included */
#define CKPT_MAX_DIMS 4
#define CKPT_CONFIG_MAX 16384 /* bytes of a model config, its NUL included */
#define CKPT_MAX_FLOATS ((size_t)1 << 56) /* a model's floats: x 4 bytes x (1 + states) fits */

/* --- meta: what a checkpoint says about the run, beyond the tensors --- */

struct ckpt_meta {
	/* position */
	int64_t step;            /* optimizer steps taken; training resumes at this step */
	int64_t epoch;           /* epoch of the next step: step / steps_per_epoch */
	int64_t epoch_step;      /* sampler position: the next step within its epoch */
	int64_t steps_per_epoch;
	int64_t total_steps;     /* the run's length, which the lr schedule depends on */
	double lr;               /* learning rate the next step would use */
	/* data order: the permutation of epoch e comes from dt_rng stream
	 * (rng_seed, e); that pair and epoch_step are the whole RNG state */
	uint64_t rng_seed;       /* train.seed */
	uint64_t rng_stream;     /* = epoch */
	bool shuffle;            /* data.shuffle */
	int64_t global_batch;    /* train.global_batch */
	int64_t train_rows;      /* rows of the training set */
	/* optimizer */
	char optimizer[16];      /* "sgd" | "adamw" */
	int64_t optimizer_step;  /* updates taken (AdamW's bias correction) */
	int optimizer_shards;    /* 1 (0 reads as 1): each stage's states in its
				  * shard; D > 1: in D pieces per stage
				  * (optim-<k>-<r>.h5, ckpt_piece_rows) */
	int n_states;            /* 0..CKPT_MAX_STATES */
	char states[CKPT_MAX_STATES][16]; /* "momentum_buffer"; "exp_avg", "exp_avg_sq" */
	/* model */
	int format_version;      /* of the files it was read from; CKPT_VERSION when written */
	char model_type[16];     /* model.type: "mlp" */
	char model_config[CKPT_CONFIG_MAX]; /* JSON object, the model's own words for
					       what shapes its tensors: compact,
					       as the runtime writes it */
	int n_blocks;            /* 1..CKPT_MAX_BLOCKS */
	/* identity: 16 lower-case hex digits each (ckpt_hash64) */
	char spec_hash[17];      /* the resolved spec, run_dir and name left out */
	char model_hash[17];     /* type and config: what must match to resume */
	/* the layout it was written with */
	int data, pipeline;      /* parallel.data, parallel.pipeline */
	int stage_first[CKPT_MAX_BLOCKS + 1]; /* [pipeline + 1]: stage k owns blocks
						 stage_first[k] .. stage_first[k+1]-1 */
	/* provenance (informational) */
	char created[32];        /* UTC, "2026-11-21T10:00:00Z" */
	char job_id[32];         /* SLURM_JOB_ID, "" when none */
};

/* The rows of a tensor of `rows` rows (its first dimension) that optimizer
 * piece `piece` of `pieces` holds: [*first, *first + *n), rows * piece /
 * pieces up to rows * (piece + 1) / pieces, so the pieces are in order,
 * disjoint, cover every row and differ by at most one row. Row-major, a
 * piece's rows are also one contiguous range of the tensor's floats. */
void ckpt_piece_rows(int64_t rows, int piece, int pieces, int64_t *first, int64_t *n);

/* Writes meta->model_config in its canonical form (json-c's compact
 * serialisation, so that writer and reader hash the same bytes), fills
 * meta->model_hash from model_type and model_config, and checks the meta
 * for internal consistency (n_blocks in range, stage_first increasing from
 * 0 to n_blocks, state and type names that are plain words, a config that
 * is a JSON object). Which states an optimizer has is the caller's to
 * check (runtime/train/checkpointing.c). 0 or -EINVAL naming the first bad
 * field. */
int ckpt_meta_finish(struct ckpt_meta *meta, struct dt_err *err);

/* One tensor of the model, as the caller lays it out and the manifest
 * lists it. */
struct ckpt_tensor {
	char name[CKPT_NAME_MAX]; /* letters, digits, '_' and '.': "0.weight" */
	int ndim;                 /* 1..CKPT_MAX_DIMS */
	int64_t shape[CKPT_MAX_DIMS]; /* row-major; each 1..1e9 */
	int block;                /* the block that declares it; stage_first says
				   * which shard holds it */
	size_t offset;            /* writing: its first float in the stage's
				   * buffers (ckpt_stage_view); reading: unused */
};

/* Floats of a tensor: the product of its shape. */
size_t ckpt_tensor_floats(const struct ckpt_tensor *t);
/* Checks a model's table against meta: names plain and unique, shapes in
 * range (all of them at most CKPT_MAX_FLOATS floats), blocks 0..n_blocks-1
 * in order, every block with a tensor. 0 or -EINVAL naming the tensor. */
int ckpt_tensors_check(const struct ckpt_meta *meta, const struct ckpt_tensor *t, int n_tensors,
		       struct dt_err *err);

/* --- names and hashes --- */

/* 64-bit FNV-1a of n bytes, as 16 lower-case hex digits into out[17]. */
void ckpt_hash64(const void *data, size_t n, char out[17]);
/* CRC-32 (zlib) continued from crc over n bytes; start with crc = 0. */
uint32_t ckpt_crc32(uint32_t crc, const void *data, size_t n);
/* "step-00000120" for 120 into out (at least 32 bytes). */
void ckpt_step_name(int64_t step, char *out, size_t size);
/* "shard-3.h5" for stage 3. */
void ckpt_shard_name(int stage, char *out, size_t size);
/* "optim-3-1.h5" for stage 3's optimizer piece 1. */
void ckpt_piece_name(int stage, int piece, char *out, size_t size);
/* The names of a checkpoint's manifest and root file in its directory. */
#define CKPT_MANIFEST "MANIFEST.json"
#define CKPT_ROOT "model.h5"

/* --- the directories a save works in --- */

/* A directory a save works in: the checkpoint directory, or a save's tmp
 * directory in it. Held open (fd >= 0), every name a save makes, renames
 * or removes is reached relative to fd (openat, mkdirat, renameat,
 * unlinkat, never following a link), so that the directory opened is the
 * one written, whatever is planted at its path later (a link to another
 * directory: docs/checkpoints.md, "Symbolic links"); path then names it in
 * messages only. With fd -1, path is opened at each call instead: a
 * checkpoint directory as given, a tmp directory without following a link
 * at its last component (one-shot callers: tools, tests). The caller owns
 * both. */
struct ckpt_dir {
	int fd;           /* O_DIRECTORY, or -1 */
	const char *path; /* its path as the user gave it */
};

/* --- writing a shard: fast part, then slow part --- */

/* One stage's state as the runtime lays it out (runtime/model/model.h): the
 * tensors of blocks first_block .. first_block + n_blocks - 1, each at its
 * offset; the optimizer states have the same layout. With is_piece, the
 * file is optimizer piece `piece` (optim-<stage>-<piece>.h5 of
 * meta->optimizer_shards): states only, packed: each tensor's rows of the
 * piece (ckpt_piece_rows), in tensor order, n floats in all; params unused.
 * Without, and meta->optimizer_shards > 1, the stage's shard holds the
 * parameters only. */
struct ckpt_stage_view {
	int stage;
	bool is_piece;                       /* false: the stage's shard */
	int piece;                           /* which piece, when is_piece */
	int first_block, n_blocks;
	const struct ckpt_tensor *tensors;   /* [n_tensors]: the stage's, in order,
					      * contiguous from offset 0 */
	int n_tensors;
	size_t n;                            /* floats in params and each state */
	const float *params;                 /* [n] */
	const float *states[CKPT_MAX_STATES]; /* [n] each, meta->n_states of them */
	/* true: the caller leaves params and states unchanged until
	 * ckpt_shard_write returns (a synchronous save), so the shard is
	 * written from them, without the snapshot copy */
	bool borrow;
	/* true (without borrow): ckpt_shard_begin allocates the snapshot but
	 * does not copy; ckpt_shard_copy does, on any thread, and the caller
	 * leaves params and states unchanged until it has returned (an async
	 * save: the copy leaves the training thread) */
	bool defer_copy;
};

/* A shard writer: owns a snapshot buffer that is reused from one save to
 * the next (so a save allocates nothing once warmed up). Zero-initialise;
 * free with ckpt_shard_free(). */
struct ckpt_shard_writer {
	/* the snapshot: (1 + n_states) * n floats, params then each state */
	float *snap;
	size_t snap_cap;         /* floats allocated */
	/* a deferred copy not yet made (view->defer_copy): its sources, each
	 * copy_n floats; copy_parts = 0 when there is none */
	const float *copy_src[1 + CKPT_MAX_STATES];
	size_t copy_n;
	int copy_parts;
	/* the file being written */
	char path[4096];
	bool begun;              /* ckpt_shard_begin succeeded (a piece may have
				  * no tensor bytes to write: no rows of any),
				  * and ckpt_shard_write has not run yet */
	int fd;                  /* the file, made by ckpt_shard_begin and
				  * written through this descriptor (never by
				  * name again); open while begun */
	int n_regions;
	struct ckpt_region {     /* where each tensor's bytes go in the file */
		uint64_t offset;     /* file offset (HDF5 contiguous storage) */
		uint64_t bytes;
		const float *src;    /* into snap */
	} *regions;
	/* results of ckpt_shard_write */
	uint64_t size;           /* bytes of the file */
	uint32_t crc;            /* CRC-32 of the whole file */
	double write_s;          /* seconds spent in ckpt_shard_write */
};

/* Fast part, on the thread that owns HDF5: copies the view's params and
 * states into w's snapshot (the caller may change them as soon as this
 * returns; with view->defer_copy, the snapshot is allocated and the copy
 * left to ckpt_shard_copy: not before that has returned; with view->borrow,
 * no snapshot: not before ckpt_shard_write has returned), then creates
 * tmpdir/shard-<stage>.h5 with the meta attributes, one contiguous dataset
 * per tensor (storage allocated, not written) and records where each
 * tensor's bytes go. tmpdir must exist; the file is made new in it, never
 * through a symbolic link (ckpt.h, links: -ELOOP naming it), and stays
 * open until ckpt_shard_write. The view's pointers are kept until
 * the copy (or, borrowed, the write). 0, -ENOMEM, or -errno / -EIO naming
 * the path (e.g. ENOSPC, EROFS); on failure no copy is left to make. */
int ckpt_shard_begin(struct ckpt_shard_writer *w, const struct ckpt_dir *tmpdir,
		     const struct ckpt_meta *meta, const struct ckpt_stage_view *view,
		     struct dt_err *err);
/* The deferred copy of a shard begun with view->defer_copy, on any thread,
 * no HDF5: the view's params and states into the snapshot, allocated by
 * ckpt_shard_begin (so it cannot fail). A no-op when there is none left. */
void ckpt_shard_copy(struct ckpt_shard_writer *w);
/* Slow part, on any thread, no HDF5: makes a deferred copy still left
 * (ckpt_shard_copy), then writes the tensors' bytes with
 * dt_pwrite_all (starting their write-back as it goes), fsyncs the file,
 * and computes w->size and w->crc over the whole file in the same pass (the
 * tensors' bytes as they are written, from the snapshot or the borrowed
 * tensors; the file for the metadata between them). 0 or -errno naming the
 * path (ENOSPC, EIO, ...). On failure the file stays in the tmp directory
 * (the commit will not happen). Either way the file is closed: a shard is
 * begun again before it is written again. */
int ckpt_shard_write(struct ckpt_shard_writer *w, struct dt_err *err);
/* Frees the snapshot and regions, closes a file begun and not written;
 * safe on a zeroed writer. */
void ckpt_shard_free(struct ckpt_shard_writer *w);

/* --- the root file --- */

/* Writes tmpdir/model.h5, made new, never through a symbolic link (as a
 * shard): the meta attributes and one virtual dataset per
 * tensor of the whole model, tensors [n] (meta's layout says which shard
 * holds which block). Main thread (HDF5). Not fsynced: ckpt_file_seal()
 * does that. */
int ckpt_root_write(const struct ckpt_dir *tmpdir, const struct ckpt_meta *meta,
		    const struct ckpt_tensor *tensors, int n, struct dt_err *err);

/* The last root file written, kept to write the next save's from: HDF5
 * takes tens of milliseconds to create the virtual datasets (about 100 for
 * 25 layers with one state) on the thread that owns HDF5 (for a trainer:
 * training stall); a copy whose meta attributes are written over in place
 * takes a fraction of one, and gives the same bytes as a fresh write.
 * Zero-initialise; free with ckpt_root_cache_free(). */
struct ckpt_root_cache {
	unsigned char *image;    /* the file's bytes, or NULL */
	size_t len;
	struct ckpt_meta meta;   /* what it was written for */
	char tensors_hash[17];   /* and for which tensors */
};

/* ckpt_root_write, from the cache when it holds the root file of the same
 * tensors, stages and states (else, or when that fails, written afresh and
 * kept in the cache). The same results as ckpt_root_write. */
int ckpt_root_write_cached(struct ckpt_root_cache *cache, const struct ckpt_dir *tmpdir,
			   const struct ckpt_meta *meta, const struct ckpt_tensor *tensors,
			   int n, struct dt_err *err);
/* Frees the kept bytes; safe on a zeroed cache. */
void ckpt_root_cache_free(struct ckpt_root_cache *cache);

/* fsync tmpdir/name, a file of a save's tmp directory (opened as ckpt.h's
 * links say: never through a link), and compute its size and CRC-32 by
 * reading it. Any thread. */
int ckpt_file_seal(const struct ckpt_dir *tmpdir, const char *name, uint64_t *size,
		   uint32_t *crc, struct dt_err *err);

/* --- commit --- */

/* One file of a checkpoint, as the manifest lists it. */
struct ckpt_file {
	char name[64];  /* "model.h5", "shard-<k>.h5", "optim-<k>-<r>.h5": a
			 * plain name, no '/' */
	int stage;      /* the shard's or piece's stage; -1 for the root */
	uint64_t size;  /* bytes */
	uint32_t crc;   /* CRC-32 of all of them */
	bool is_piece;  /* an optimizer piece (false: the root or a shard) */
	int piece;      /* which, when is_piece */
};

/* Paths of a save of step `step` under dir (the checkpoint directory):
 * tmp = dir/.step-<8>.tmp, final = dir/step-<8>. Buffers of `size` bytes. */
void ckpt_tmp_path(const char *dir, int64_t step, char *out, size_t size);
void ckpt_final_path(const char *dir, int64_t step, char *out, size_t size);

/* Removes every .step-*.tmp directory under dir (leftovers of a crash),
 * and every symbolic link under such a name, as a link (its target is
 * never touched). Call on one rank before anyone starts writing. 0 or
 * -errno. */
int ckpt_clean_tmp(const struct ckpt_dir *dir, struct dt_err *err);

/* Makes the tmp directory of a save of step `step`, dir/.step-<8>.tmp,
 * afresh, on one rank before any rank writes into it: whatever is at that
 * name (a failed attempt's leftover, a planted link) is removed first,
 * never through a link, then mkdir: a name taken again meanwhile (EEXIST)
 * is refused, naming it. So every file in it is this save's. With fd not
 * NULL, *fd gets it open (without following a link; the caller closes
 * it). 0 or -errno naming the path (EROFS, ENOSPC, ...). */
int ckpt_tmp_make(const struct ckpt_dir *dir, int64_t step, int *fd, struct dt_err *err);
/* The tmp directory ckpt_tmp_make made, opened by another writer (made
 * first when missing, so that a shared file system's cached "not there"
 * is not trusted), never through a link: *fd, which the caller closes. 0
 * or -errno naming the path. */
int ckpt_tmp_open(const struct ckpt_dir *dir, int64_t step, int *fd, struct dt_err *err);
/* Removes the tmp directory of a save that failed before its commit
 * (dir/<tmp's last component>), only when this save made it and holds it
 * open (tmp->fd, from ckpt_tmp_make or ckpt_tmp_open) and the name is
 * still that very directory (st_dev, st_ino; never through a link): a
 * name taken by something else (ckpt_tmp_make's EEXIST, tmp->fd -1) or
 * swapped since is left alone. 0, -ESTALE (not this save's: left alone)
 * or -errno. */
int ckpt_tmp_remove(const struct ckpt_dir *dir, const struct ckpt_dir *tmp);

/* The commit (steps 2 above) of the save whose tmp directory is tmp, in
 * the checkpoint directory dir (each held open or not: struct ckpt_dir;
 * every name below is one of dir's, reached relative to it). tmp must be
 * a directory (not a link) that holds exactly the files listed, each a regular file (a link is refused,
 * named). Writes tmp/MANIFEST.json from meta, the model's tensors
 * [n_tensors] and files, fsyncs it and tmp, renames
 * tmp to the final name (an existing final directory of the same step, from
 * an earlier attempt, is replaced; a link there, a checkpoint linked in,
 * is the user's: the commit is refused, -EEXIST naming it), fsyncs dir,
 * repoints dir/latest, then deletes committed checkpoints beyond the
 * newest `keep` (keep >= 1; the new one is never deleted; links under a
 * checkpoint's name neither count nor are deleted). On failure before the rename the tmp directory
 * is removed and the previous checkpoints are untouched. 0 or -errno.
 * *committed (may be NULL) says whether this call's rename committed the
 * checkpoint: true with an error means only latest or retention failed
 * (the message says so); false means this save is not committed, whatever
 * stands at step-<8> (an earlier attempt's, another run's). */
int ckpt_commit(const struct ckpt_dir *dir, const struct ckpt_dir *tmp,
		const struct ckpt_meta *meta, const struct ckpt_tensor *tensors, int n_tensors,
		const struct ckpt_file *files, int n_files, int keep, bool *committed,
		struct dt_err *err);

/* The tokenizer files a checkpoint may carry (tokenizer.c): GPT-2 BPE's
 * encoder.json and vocab.bpe, or Hugging Face's tokenizer.json, listed in
 * the manifest with stage -1. */
#define CKPT_TOKENIZER_ENCODER "encoder.json"
#define CKPT_TOKENIZER_MERGES "vocab.bpe"
#define CKPT_TOKENIZER_HF "tokenizer.json"
struct ckpt_tokenizer {
	int n;               /* 2: encoder.json, vocab.bpe; 1: tokenizer.json */
	const char *name[2]; /* those names */
	const char *data[2]; /* the files' bytes [len] */
	size_t len[2];
};
/* Writes tok's files into a save's tmp directory (made new, never through
 * a link) and fills files[tok->n] for the commit (names, stage -1, size,
 * CRC). Any thread. 0, -EINVAL for names other than those above, or
 * -errno naming the path. */
int ckpt_tokenizer_write(const struct ckpt_dir *tmpdir, const struct ckpt_tokenizer *tok,
			 struct ckpt_file files[2], struct dt_err *err);
/* The tokenizer files the checkpoint of manifest m carries (they lie in
 * the checkpoint's directory): their count, 0, 1 or 2, and their names
 * into names (valid as long as m). */
struct ckpt_manifest;
int ckpt_tokenizer_of(const struct ckpt_manifest *m, const char *names[2]);

/* A whole model's parameters as one checkpoint, written by one process
 * (whole.c; what `dtrain-ckpt import` makes): meta of one stage
 * (pipeline 1, stage_first {0, n_blocks}), no optimizer state (n_states
 * 0), finished by ckpt_meta_finish; tensors [n] with their offsets into
 * params [n_params], and the tokenizer's files when tok is not NULL.
 * dir is made when missing; the checkpoint is
 * dir/step-<meta->step>, committed as a run's save is. 0 or -errno with a
 * line naming the path. */
int ckpt_write_whole(const char *dir, const struct ckpt_meta *meta,
		     const struct ckpt_tensor *tensors, int n, const float *params,
		     size_t n_params, const struct ckpt_tokenizer *tok, struct dt_err *err);

/* --- listing and manifests --- */

/* A committed checkpoint's manifest, parsed and checked (format, version,
 * every field's type and range, meta consistency, the tensors
 * (ckpt_tensors_check), file names plain and unique, one shard per stage
 * plus the root, and optimizer_shards pieces per stage when more than 1). */
struct ckpt_manifest {
	struct ckpt_meta meta;
	int n_tensors;
	struct ckpt_tensor tensors[CKPT_MAX_TENSORS];
	int n_files;
	struct ckpt_file files[CKPT_MAX_FILES];
};

/* Reads ckpt/MANIFEST.json into *m (caller's; large, allocate it).
 * 0, -ENOENT (no manifest: not a dtrain checkpoint, the message says so),
 * or -EINVAL naming the file and the field. */
int ckpt_manifest_read(const char *ckpt, struct ckpt_manifest *m, struct dt_err *err);

/* The committed checkpoints under dir, newest first: *steps (caller
 * frees) gets the steps, *n their count. A checkpoint is an entry named
 * step-<8 digits> (ckpt_step_name) that is a directory or a symbolic link
 * to one (followed, as every reader follows links). Anything else under
 * such a name (a regular file, a dangling link, a link to a file) is an
 * error, -ENOTDIR with a line naming each, never skipped: a run must not
 * start afresh and save over it. Other names (latest, .step-*.tmp,
 * step-12) are not checkpoints and are left out. A missing dir gives
 * n = 0 and 0. */
int ckpt_list(const char *dir, int64_t **steps, int *n, struct dt_err *err);
/* The entries of dir that ckpt_list leaves out but a user may take for
 * checkpoints: step-<digits> not as ckpt_step_name writes it (step-12,
 * step-000000012). A line for each into notes ("DIR/NAME is not a
 * checkpoint name dtrain writes (step-<8 digits>): left alone"), for a
 * caller that would otherwise start afresh without a word; returns their
 * number (0 when dir cannot be listed: ckpt_list says why). */
int ckpt_list_strays(const char *dir, struct dt_err *notes);

/* --- verifying --- */

/* Checks one listed file: present, the listed size, the listed CRC.
 * 0, or -ENOENT / -EIO / -EINVAL with "ckpt/name: ..." saying which. */
int ckpt_verify_file(const char *ckpt, const struct ckpt_file *f, struct dt_err *err);
/* Manifest, then every file. stop_at_first: return at the first bad file;
 * else report all. 0 when all is well. */
int ckpt_verify(const char *ckpt, bool stop_at_first, struct dt_err *err);

/* Newest usable checkpoint under dir: walks ckpt_list() newest first and
 * takes the first whose manifest reads and whose files all verify; for
 * each one skipped, a line naming the bad file goes to warn. *step = -1
 * when there is none (not an error). out gets the checkpoint's path. */
int ckpt_find_latest(const char *dir, char *out, size_t size, int64_t *step,
		     struct dt_err *warn, struct dt_err *err);

/* --- finding a checkpoint from what a user names (checkpoint/locate.c) --- */

/* The checkpoint dir of path, a checkpoint dir (it holds step-<n>
 * directories) or a run directory (its spec.json's checkpoint.dir, else
 * path/checkpoints), into out. A spec.json that cannot be read adds its
 * error and "looking for checkpoints in ..." to warn. */
void ckpt_dir_of(const char *path, char *out, size_t size, struct dt_err *warn);
/* The checkpoint that a CKPT argument names, into out: path itself when it
 * is a checkpoint (or nothing recognised: the reader then says why), else
 * the newest committed checkpoint of the run directory or checkpoint dir
 * (*newest set true: the caller may say which it took). 0, or -ENOENT /
 * -EINVAL (an empty path) with a message in err. */
int ckpt_resolve(const char *path, char *out, size_t size, bool *newest, struct dt_err *warn,
		 struct dt_err *err);

/* --- reading tensors (after verifying) --- */

/* An open checkpoint for reading tensors; zero-initialise, ckpt_reader_close(). */
struct ckpt_reader {
	char path[4096];
	struct ckpt_manifest *m; /* owned */
	int64_t open_stage;      /* the stage of the file open now, -1 none */
	int64_t open_piece;      /* and its optimizer piece, -1: its shard */
	int64_t file;            /* its hid_t, -1 none */
};

/* Reads and checks the manifest. 0 or an error as ckpt_manifest_read(). */
int ckpt_reader_open(struct ckpt_reader *r, const char *ckpt, struct dt_err *err);
void ckpt_reader_close(struct ckpt_reader *r);

/* Reads the tensor the caller calls want->name, of want's shape, into
 * params [its floats] and, for each of the manifest's n_states states (in
 * order), into states[s]; states may be NULL to skip them. The manifest
 * must list it with that shape, and each dataset's type class (float),
 * rank and dimensions are checked against it before anything is read.
 * 0, or -EINVAL / -EIO naming the file and the tensor. */
int ckpt_read_tensor(struct ckpt_reader *r, const struct ckpt_tensor *want, float *params,
		     float *const *states, struct dt_err *err);
/* Rows [row0, row0 + rows) of the tensor the caller calls want->name (of
 * want's shape): its parameters (state -1) or state `state` of the
 * manifest's, into out [rows x the rest of the shape], from whichever
 * files hold them: the stage's shard, or the optimizer pieces that
 * overlap them. So a state written in D pieces reads into any other
 * split (a sharded optimizer resumed on another number of replicas, or
 * replicated). The same checks as ckpt_read_tensor. */
int ckpt_read_rows(struct ckpt_reader *r, const struct ckpt_tensor *want, int state,
		   int64_t row0, int64_t rows, float *out, struct dt_err *err);

/* --- export and inspect --- */

/* Writes the whole model of a checkpoint (parameters and optimizer state,
 * the paths and attributes of the current format's model.h5, real
 * datasets, no links) to one self-contained HDF5 file, atomically
 * (out.tmp, fsync, rename); a format-1 checkpoint comes out in the current
 * format. Verifies the checkpoint first. */
int ckpt_export(const char *ckpt, const char *out, struct dt_err *err);

/* Human-readable summary to f: step, epoch, lr, optimizer, model, layout
 * and the split, hashes, then each tensor with its shape and the shard
 * holding it, and the files. Then every file is verified as ckpt_verify
 * does (size and CRC-32): a damaged checkpoint gets a last line
 * "status        damaged: ..." naming the bad files, their problems go to
 * err, and the result is ckpt_verify's error (-ENOENT, -EIO, -EINVAL);
 * an intact one gets nothing more (0). */
int ckpt_inspect(const char *ckpt, FILE *f, struct dt_err *err);

#endif
