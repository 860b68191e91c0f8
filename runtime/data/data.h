/*
 * data.h - dtrain data sets: the HDF5 file format, reading the rows of a
 * batch, and writing new data sets (runtime/data/DATA.md is the user's guide).
 *
 * File format "dtrain-dataset", version 1: one HDF5 file holding
 *
 *   /features  float32 [n][features], chunked by rows (up to 1024 rows a
 *              chunk, no compression); stored already normalised:
 *              stored = (raw - mean) / std
 *   /labels    int32 [n], every label in [0, classes)
 *   attributes of /:
 *     format   string  "dtrain-dataset"
 *     version  integer 1
 *     classes  integer, 2 <= classes <= 1e6
 *     source   string, one line: where the data came from
 *   attributes of /features:
 *     mean, std      float64: what was subtracted and divided by (0 and 1:
 *                    stored as generated); std > 0
 *     normalisation  string: what "raw" was and how mean and std were found
 *
 * Every item above is required. Other attributes and objects may be present
 * (dtrain-data adds a few, `dtrain-data info` prints them) and are ignored.
 * The reader also accepts any HDF5 integer or float type for /features and any
 * integer type for /labels (converted on read), and any storage layout but
 * virtual. Bounds: n >= 1, 1 <= features <= 1e8, n * features <= 2^46.
 *
 * Writing is atomic: rows go to "<path>.tmp.<pid>"; at commit the file is
 * closed, checked with rt_data_open(), fsynced and renamed over path, and the
 * directory fsynced. A file under its final name is always complete; a crash
 * leaves at most the temporary file behind.
 *
 * HDF5 file locking: HDF5 1.10 locks every file it opens (flock) and fails
 * with "unable to lock file" on file systems without lock support, which
 * includes some Lustre and NFS mounts where training data lives. Our files
 * need no lock: a data set is never modified after its rename, and the
 * temporary file has a name no other process uses. So this module opens
 * files with locking off (H5Pset_file_locking, HDF5 >= 1.10.7). The variable
 * HDF5_USE_FILE_LOCKING still overrides that, as HDF5 documents; with an
 * older HDF5, set HDF5_USE_FILE_LOCKING=FALSE where locks fail.
 *
 * Errors: every function returns 0 or a negative errno code and adds lines
 * to err that name the file and the data set: -EINVAL for content that is
 * not a valid data set (or rows out of range), -ENOENT/-EACCES... when the
 * file cannot be opened, -EIO when HDF5 fails to read or write, -ENOMEM.
 * HDF5's own error printing is silenced during our calls; its innermost
 * message is quoted in ours instead.
 *
 * Not thread-safe: one struct rt_data per thread (HDF5 serialises anyway).
 *
 * Sections: reading (life cycle, rows, checks; data.c, finite.c, windows.c),
 * writing (writer.c), sources (fashion_mnist.c, synthetic.c).
 */
#ifndef DTRAIN_RUNTIME_DATA_H
#define DTRAIN_RUNTIME_DATA_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"

#define RT_DATA_FORMAT "dtrain-dataset"
#define RT_DATA_VERSION 1
#define RT_DATA_MAX_FEATURES 100000000LL /* 1e8 */
#define RT_DATA_MAX_ELEMS (1LL << 46)     /* n * features: 256 TiB of float32 */
#define RT_DATA_MAX_CLASSES 1000000
#define RT_DATA_CHUNK_ROWS 1024           /* rows per chunk of /features (fewer when wide) */

/* ======================= reading ======================= */

/* An open data set. Fields are read-only for the caller. */
struct rt_data {
	char *path;          /* as given to rt_data_open(); owned */
	int64_t n;           /* samples (rows) */
	int64_t features;    /* values per sample (columns of /features) */
	int classes;         /* labels are in [0, classes) */
	double mean, std;    /* normalisation already applied (attributes of /features) */
	char *source;        /* the "source" attribute, control characters replaced; owned */
	float *x_all;        /* [n][features] after rt_data_load_all(..., x), else NULL */
	int32_t *y_all;      /* [n] after rt_data_load_all(..., y), else NULL */
	int labels;          /* labels per sample: 1 (a table), or T (token windows) */
	bool byte_level;     /* token windows of byte-level text: bits per byte apply */
	struct rt_tokens *tok; /* token windows: the stream (rt_data_open_windows), else NULL */
	int32_t *tok_all;    /* the whole stream after rt_data_load_all(), else NULL */
	/* private */
	int64_t h_file, h_x, h_y; /* HDF5 handles (hid_t), 0 when closed */
	int fd;                   /* the file again, for direct row reads */
	bool fd_open;
	int64_t x_chunk_rows;     /* rows per chunk of /features for direct reads; 0: off */
	int64_t *x_addr;          /* [chunks] file offset of each chunk, -1 until looked up */
	bool y_direct;            /* /labels is read directly, from offset y_addr */
	int64_t y_addr;
	int64_t tok_bytes;        /* token windows: what load_all takes */
};

/* --- life cycle --- */

/* Opens path and checks everything in the format above before trusting it
 * (attributes, ranks, types, shapes, bounds, that the declared rows were
 * all written). Reads no rows: labels are checked when read (or by
 * rt_data_verify()). On success the caller closes d with rt_data_close();
 * on failure d is left closed (rt_data_close() is still safe). */
int rt_data_open(struct rt_data *d, const char *path, struct dt_err *err);

/* A token stream (runtime/data/tokens.h) as a data set of windows, for a
 * language model of context T: sample k is window k of T + 1 tokens
 * (rt_tokens_windows: n = floor((tokens - 1) / T)); its features are its
 * first T token ids as floats (exact: ids are below 2^24), its labels
 * (labels = T per sample) the T tokens after each, the next-token targets.
 * classes is the stream's vocabulary. The rest of this header applies:
 * rt_data_read() gives x [n_idx][T] and y [n_idx][T], rt_data_load_all()
 * keeps the whole stream in memory (4 bytes a token, rt_data_bytes()),
 * rt_data_close() closes it; rt_data_verify() and rt_data_attrs() are for
 * tables only. Errors name the file (runtime/data/tokens.h). */
int rt_data_open_windows(struct rt_data *d, const char *path, int context, struct dt_err *err);

/* Closes the file, frees the cache and zeroes d; safe on a zeroed or closed d. */
void rt_data_close(struct rt_data *d);

/* Reads the whole of /features (x) and/or /labels (y) into memory, checking
 * every label; rt_data_read() then copies from memory. Needs
 * rt_data_bytes() bytes for x and 4 n for y. Calling it again for a part
 * already loaded does nothing. */
int rt_data_load_all(struct rt_data *d, bool x, bool y, struct dt_err *err);

/* --- rows --- */

/* Gathers rows idx[0..n_idx) into x ([n_idx][features], row i = sample
 * idx[i]) and y ([n_idx][labels]). Either may be NULL and is then not read at all
 * (the first pipeline stage needs only x, the last only y). idx may be in
 * any order and repeat rows. Every label read is checked against
 * [0, classes): -EINVAL naming the file and row. Rows outside [0, n): -EINVAL.
 *
 * How: from memory after rt_data_load_all(); else, when the data set is
 * stored as dtrain-data writes it (native float32/int32, no filters, chunks
 * of whole rows or contiguous, no user block), one pread() per run of
 * consecutive rows at the offset HDF5 reports for the chunk (HDF5's own
 * per-call cost is several times that of a row); else through HDF5, one
 * H5Dread per run of consecutive rows, sorted and deduplicated first
 * (runtime/data/DATA.md measures the three). */
int rt_data_read(struct rt_data *d, const int64_t *idx, int n_idx, float *x, int32_t *y,
		 struct dt_err *err);

/* --- checks and queries --- */

/* Features x [rows][features] of d's rows idx[0..rows) (or first.. when idx
 * is NULL) all finite: 0, or -EINVAL naming the first row and column that
 * is not, with a hint to dtrain-data info when hint. rt_data_read and
 * rt_data_load_all check what they read with it (finite.c; its cost per
 * batch: dtrain-data bench). */
int rt_data_check_finite(const struct rt_data *d, const int64_t *idx, int64_t first,
			 int64_t rows, const float *x, bool hint, struct dt_err *err);

/* Reads every row (in blocks of a few MiB) and checks that each label is in
 * [0, classes) and each feature is finite; the first bad row is named.
 * counts, when not NULL, gets the number of samples of each class
 * ([classes]). For `dtrain-data info`. */
int rt_data_verify(struct rt_data *d, int64_t *counts, struct dt_err *err);

/* Bytes of /features as float32 (n * features * 4): what load_all(x) takes. */
int64_t rt_data_bytes(const struct rt_data *d);

/* Calls fn for each attribute of / and then of /features, in name order,
 * with obj "/" or "/features" and the value as text (strings quoted; at
 * most a few hundred characters each). For `dtrain-data info`. */
typedef void rt_data_attr_fn(void *arg, const char *obj, const char *name, const char *value);
int rt_data_attrs(struct rt_data *d, rt_data_attr_fn *fn, void *arg, struct dt_err *err);

/* ======================= writing ======================= */

/* What a new data set holds; every pointer is borrowed for the call. */
struct rt_data_meta {
	int64_t n;                 /* rows that will be appended, >= 1 */
	int64_t features;          /* values per row */
	int classes;               /* labels in [0, classes) */
	const char *source;        /* one line */
	double mean, std;          /* stored = (raw - mean) / std */
	const char *normalisation; /* one line: what raw is, how mean and std were found */
};

/* A data set being written: rows go to a temporary file until commit. */
struct rt_data_writer {
	char *path;       /* final name; owned */
	char *tmp;        /* "<path>.tmp.<pid>"; owned */
	int64_t n, features, written;
	int classes;
	int64_t h_file, h_x, h_y; /* private: hid_t */
};

/* Creates the temporary file with its data sets and required attributes.
 * Then: rt_data_append() exactly meta->n rows, optionally add attributes,
 * and rt_data_commit(); or rt_data_abort(). On failure nothing is left on
 * disk and w needs no abort. */
int rt_data_create(struct rt_data_writer *w, const char *path, const struct rt_data_meta *meta,
		   struct dt_err *err);

/* Appends rows [written, written + rows): x is [rows][features], y [rows].
 * Refuses non-finite features and labels outside [0, classes) (-EINVAL,
 * naming the row) and more rows than announced. */
int rt_data_append(struct rt_data_writer *w, const float *x, const int32_t *y, int64_t rows,
		   struct dt_err *err);

/* Extra scalar attributes of / (not one of the required names). */
int rt_data_attr_int(struct rt_data_writer *w, const char *name, int64_t v, struct dt_err *err);
int rt_data_attr_num(struct rt_data_writer *w, const char *name, double v, struct dt_err *err);
int rt_data_attr_str(struct rt_data_writer *w, const char *name, const char *v,
		     struct dt_err *err);

/* Requires all n rows; closes, checks (rt_data_open), fsyncs and renames the
 * file into place, fsyncs the directory. Frees w whatever the outcome; on
 * failure the temporary file is removed and path is untouched. */
int rt_data_commit(struct rt_data_writer *w, struct dt_err *err);

/* Drops the temporary file and frees w; safe on a zeroed or finished w. */
void rt_data_abort(struct rt_data_writer *w);

/* The end of a write that went well so far (rc 0: rt_data_commit) or not
 * (rt_data_abort, rc returned as it is): 0 or a negative errno. */
int rt_data_finish(struct rt_data_writer *w, int rc, struct dt_err *err);

/* create + append all + commit, for data already in memory. */
int rt_data_write(const char *path, const struct rt_data_meta *meta, const float *x,
		  const int32_t *y, struct dt_err *err);

/* ======================= sources ======================= */

/* Progress of a conversion: done of total rows of the file path written;
 * done == total exactly once per file, after it was committed. */
typedef void rt_data_progress_fn(void *arg, const char *path, int64_t done, int64_t total);

/* Fashion-MNIST (Xiao et al. 2017) from the IDX files in src_dir
 * ({train,t10k}-{images-idx3,labels-idx1}-ubyte, each gzip-compressed with a
 * ".gz" suffix or not) to out_dir/train.h5 and out_dir/test.h5 (out_dir is
 * created). Pixels become p / 255, then standardised with ONE scalar mean
 * and std over all pixels of the TRAINING set (population std); the test set
 * uses the training statistics. Every input is read and checked (magic
 * numbers, 28 x 28 images, counts that agree, exact sizes, labels 0..9)
 * before anything is written. progress may be NULL. */
int rt_data_make_fashion_mnist(const char *src_dir, const char *out_dir,
			       rt_data_progress_fn *progress, void *arg, struct dt_err *err);

/* A learnable synthetic classification set, deterministic in (seed, stream):
 *   centroid c[k] ~ N(0, 8/features) in each coordinate, k < classes, drawn
 *     from dt_rng stream (seed, 0): two centroids lie about 4 noise standard
 *     deviations apart whatever the width, so the classes overlap a little;
 *   sample i: label ~ uniform over classes, x = c[label] + N(0, 1) noise,
 *     drawn from dt_rng stream (seed, 1 + stream), one sample after another.
 * The same seed with another stream is a held-out set of the same problem
 * (e.g. stream 1 for a test set). Stored as generated (mean 0, std 1).
 * Attributes record seed, stream and the accuracy of the nearest-centroid
 * rule on the set (about the best any model can do). */
struct rt_data_synthetic {
	int64_t samples;  /* >= 1 */
	int64_t features; /* >= 1 */
	int classes;      /* 2..1e6; classes * features <= 1e8 */
	uint64_t seed;
	uint64_t stream;
};
int rt_data_make_synthetic(const char *path, const struct rt_data_synthetic *p,
			   rt_data_progress_fn *progress, void *arg, struct dt_err *err);

#endif
