/*
 * h5.h - the HDF5 helpers that data sets and token streams (runtime/data/)
 * and checkpoints (checkpoint/) share: HDF5's own message for a failed
 * call, closing ids once, keeping HDF5 from printing its error stack, the
 * file access list of every file we open or create, and attributes both
 * ways.
 *
 * A library of its own (dtrain_h5) beside libdtrain, so that the installed
 * library (specs, site policy, launcher) does not depend on HDF5.
 */
#ifndef DTRAIN_BASE_H5_H
#define DTRAIN_BASE_H5_H

#include <stdint.h>

#include <hdf5.h>

#define DT_H5_WHY_MAX 256

/* HDF5's innermost message for the call that just failed, in buf (also
 * returned); "HDF5 error" when the stack says nothing. */
const char *dt_h5_why(char buf[DT_H5_WHY_MAX]);

/* close_fn(*id) when *id is a valid id; then *id = H5I_INVALID_HID. */
void dt_h5_close(hid_t *id, herr_t (*close_fn)(hid_t));

/* HDF5 prints its error stack on every failed call unless told not to: we
 * report errors ourselves, naming the path. dt_h5_quiet_on saves the
 * calling thread's setting and silences it, dt_h5_quiet_off restores it. */
struct dt_h5_quiet {
	H5E_auto2_t fn;
	void *arg;
};
void dt_h5_quiet_on(struct dt_h5_quiet *q);
void dt_h5_quiet_off(const struct dt_h5_quiet *q);

/* A file access list with file locking off (our files live on file
 * systems without locks: FIELD-NOTES), plus: DT_H5_STRONG_CLOSE, H5Fclose
 * closes the file even with an object still open; DT_H5_V110, files in the
 * HDF5 1.10 format (what h5py and older tools read). Caller closes with
 * H5Pclose; H5I_INVALID_HID on failure. */
#define DT_H5_STRONG_CLOSE 1u
#define DT_H5_V110 2u
hid_t dt_h5_fapl(unsigned flags);

/* What a type class is, for messages: "integer", "string", ... (static). */
const char *dt_h5_class_name(H5T_class_t c);

/* --- attributes ---
 *
 * Attributes of loc (a file's root group, a group, a dataset: the
 * caller's id, never closed here), scalar or of one dimension; name and
 * the values are only read during the call. Numbers are stored
 * little-endian whatever the machine. The caller keeps HDF5 quiet
 * (dt_h5_quiet_on) if it wants no error stack printed.
 *
 * Every function returns 0, or a negative errno code with the reason in
 * why [DT_H5_WHY_MAX], worded to follow `attribute "name"` in a message:
 *   -ENOENT  no attribute of that name: "is missing"
 *   -EDOM    not one value of the kind asked for: "must be a single value
 *            (has 3)", "must be an integer (got string)", "is implausibly
 *            long (70000 bytes)"
 *   -EIO     HDF5 failed: HDF5's own message; or a writer found one of
 *            another type or shape there
 *   -ENOMEM  "out of memory"
 * Writers return 0 or -EIO. On success why is left as it was.
 */

/* Writes attribute name of loc: rank 0 (one value; n unused) or rank 1 of
 * n values, stored as file type ftype, from v [n] of memory type mtype.
 * One already there is written over in place, which needs the same type
 * and shape, so that the file keeps its layout (a checkpoint's root file
 * rewritten from a copy); one of another type or shape gives -EIO. */
int dt_h5_attr_put(hid_t loc, const char *name, hid_t ftype, hid_t mtype, int rank, hsize_t n,
		   const void *v, char why[DT_H5_WHY_MAX]);
/* One value, of the file type the name says. */
int dt_h5_attr_put_i32(hid_t loc, const char *name, int32_t v, char why[DT_H5_WHY_MAX]);
int dt_h5_attr_put_i64(hid_t loc, const char *name, int64_t v, char why[DT_H5_WHY_MAX]);
int dt_h5_attr_put_u64(hid_t loc, const char *name, uint64_t v, char why[DT_H5_WHY_MAX]);
int dt_h5_attr_put_f64(hid_t loc, const char *name, double v, char why[DT_H5_WHY_MAX]);

/* How a string attribute is stored. Each file format keeps its own, so
 * that the same content gives the same bytes. */
enum dt_h5_str {
	DT_H5_STR_ASCIIZ, /* fixed length, ASCII, its NUL stored (so "" is one
			   * byte): no heap in the file (checkpoints) */
	DT_H5_STR_ASCII,  /* fixed length, ASCII, the text's bytes without its
			   * NUL ("" is one NUL byte) (token streams) */
	DT_H5_STR_UTF8,   /* variable length, UTF-8: what h5py reads as str
			   * (data sets) */
};
/* Writes v, a NUL-terminated string, as attribute name of loc, one value
 * stored as `how` says; written over in place as dt_h5_attr_put. */
int dt_h5_attr_put_str(hid_t loc, const char *name, const char *v, enum dt_h5_str how,
		       char why[DT_H5_WHY_MAX]);

/* One integer (of any integer type) into *v. */
int dt_h5_attr_get_i64(hid_t loc, const char *name, int64_t *v, char why[DT_H5_WHY_MAX]);
/* One number (integer or float) into *v, as a double: it may be NaN or
 * infinite, the caller's to refuse. */
int dt_h5_attr_get_f64(hid_t loc, const char *name, double *v, char why[DT_H5_WHY_MAX]);
/* One string, fixed or variable length, ASCII or UTF-8, into *out:
 * malloc'ed, the caller frees it (NULL on failure). Its bytes as stored
 * up to the first NUL: it may hold control characters. A fixed-length
 * string of no bytes or more than max is -EDOM ("is implausibly long"). */
int dt_h5_attr_get_str(hid_t loc, const char *name, size_t max, char **out,
		       char why[DT_H5_WHY_MAX]);

#endif
