/*
 * h5.c - HDF5 helpers (h5.h).
 */
#include "base/h5.h"

#include <stdio.h>

static herr_t why_walk(unsigned n, const H5E_error2_t *e, void *arg)
{
	if (n == 0 && e->desc && e->desc[0])
		snprintf(arg, DT_H5_WHY_MAX, "%s", e->desc);
	return 0;
}

const char *dt_h5_why(char buf[DT_H5_WHY_MAX])
{
	buf[0] = '\0';
	H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, why_walk, buf);
	if (!buf[0])
		snprintf(buf, DT_H5_WHY_MAX, "HDF5 error");
	return buf;
}

void dt_h5_close(hid_t *id, herr_t (*close_fn)(hid_t))
{
	if (*id > 0)
		close_fn(*id);
	*id = H5I_INVALID_HID;
}

void dt_h5_quiet_on(struct dt_h5_quiet *q)
{
	q->fn = NULL;
	q->arg = NULL;
	H5Eget_auto2(H5E_DEFAULT, &q->fn, &q->arg);
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void dt_h5_quiet_off(const struct dt_h5_quiet *q)
{
	H5Eset_auto2(H5E_DEFAULT, q->fn, q->arg);
}

hid_t dt_h5_fapl(unsigned flags)
{
	hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);

	if (fapl < 0)
		return H5I_INVALID_HID;
#if H5_VERSION_GE(1, 10, 7)
	if (H5Pset_file_locking(fapl, 0, 1) < 0)
		goto fail;
#endif
	if ((flags & DT_H5_STRONG_CLOSE) && H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0)
		goto fail;
	if ((flags & DT_H5_V110) &&
	    H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110) < 0)
		goto fail;
	return fapl;
fail:
	H5Pclose(fapl);
	return H5I_INVALID_HID;
}
