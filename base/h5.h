/*
 * h5.h - the HDF5 helpers that data sets (runtime/data/data.c) and checkpoints
 * (checkpoint/) share: HDF5's own message for a failed call, closing ids
 * once, keeping HDF5 from printing its error stack, and the file access
 * list of every file we open or create.
 *
 * A library of its own (dtrain_h5) beside libdtrain, so that the installed
 * library (specs, site policy, launcher) does not depend on HDF5.
 */
#ifndef DTRAIN_BASE_H5_H
#define DTRAIN_BASE_H5_H

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

#endif
