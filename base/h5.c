/*
 * h5.c - HDF5 helpers (h5.h).
 *
 * Sections: messages and ids, files, attributes.
 */
#include "base/h5.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- messages and ids --- */

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

const char *dt_h5_class_name(H5T_class_t c)
{
	switch (c) {
	case H5T_INTEGER: return "integer";
	case H5T_FLOAT: return "float";
	case H5T_STRING: return "string";
	case H5T_COMPOUND: return "compound";
	case H5T_ARRAY: return "array";
	case H5T_ENUM: return "enum";
	case H5T_VLEN: return "variable-length sequence";
	case H5T_OPAQUE: return "opaque";
	case H5T_BITFIELD: return "bitfield";
	case H5T_REFERENCE: return "reference";
	case H5T_TIME: return "time";
	default: return "unknown type";
	}
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

/* --- files --- */

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

/* --- attributes --- */

/* -EIO with HDF5's reason for the call that just failed. */
static int h5_failed(char *why)
{
	dt_h5_why(why);
	return -EIO;
}

int dt_h5_attr_put(hid_t loc, const char *name, hid_t ftype, hid_t mtype, int rank, hsize_t n,
		   const void *v, char why[DT_H5_WHY_MAX])
{
	hid_t space = H5I_INVALID_HID, attr = H5I_INVALID_HID, type = H5I_INVALID_HID;
	int rc = 0;

	if (H5Aexists(loc, name) > 0) {
		if ((attr = H5Aopen(loc, name, H5P_DEFAULT)) < 0 ||
		    (type = H5Aget_type(attr)) < 0 || (space = H5Aget_space(attr)) < 0) {
			rc = h5_failed(why);
		} else if (H5Tequal(type, ftype) <= 0 ||
			   H5Sget_simple_extent_ndims(space) != rank ||
			   H5Sget_simple_extent_npoints(space) != (rank == 0 ? 1 : (hssize_t)n)) {
			snprintf(why, DT_H5_WHY_MAX, "one of another type or shape is there");
			rc = -EIO;
		} else if (H5Awrite(attr, mtype, v) < 0) {
			rc = h5_failed(why);
		}
		goto out;
	}
	space = rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, NULL);
	if (space < 0 ||
	    (attr = H5Acreate2(loc, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT)) < 0 ||
	    H5Awrite(attr, mtype, v) < 0)
		rc = h5_failed(why);
out:
	dt_h5_close(&type, H5Tclose);
	dt_h5_close(&attr, H5Aclose);
	dt_h5_close(&space, H5Sclose);
	return rc;
}

int dt_h5_attr_put_i32(hid_t loc, const char *name, int32_t v, char why[DT_H5_WHY_MAX])
{
	return dt_h5_attr_put(loc, name, H5T_STD_I32LE, H5T_NATIVE_INT32, 0, 0, &v, why);
}

int dt_h5_attr_put_i64(hid_t loc, const char *name, int64_t v, char why[DT_H5_WHY_MAX])
{
	return dt_h5_attr_put(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, 0, 0, &v, why);
}

int dt_h5_attr_put_u64(hid_t loc, const char *name, uint64_t v, char why[DT_H5_WHY_MAX])
{
	return dt_h5_attr_put(loc, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, 0, 0, &v, why);
}

int dt_h5_attr_put_f64(hid_t loc, const char *name, double v, char why[DT_H5_WHY_MAX])
{
	return dt_h5_attr_put(loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 0, 0, &v, why);
}

int dt_h5_attr_put_str(hid_t loc, const char *name, const char *v, enum dt_h5_str how,
		       char why[DT_H5_WHY_MAX])
{
	hid_t type = H5Tcopy(H5T_C_S1);
	size_t len = strlen(v);
	herr_t set = -1;
	int rc;

	if (type >= 0) {
		switch (how) {
		case DT_H5_STR_ASCIIZ:
			set = H5Tset_size(type, len + 1) < 0 ? -1 :
			      H5Tset_strpad(type, H5T_STR_NULLTERM);
			break;
		case DT_H5_STR_ASCII:
			set = H5Tset_size(type, len ? len : 1);
			break;
		case DT_H5_STR_UTF8:
			set = H5Tset_size(type, H5T_VARIABLE) < 0 ? -1 :
			      H5Tset_cset(type, H5T_CSET_UTF8);
			break;
		}
	}
	if (set < 0)
		rc = h5_failed(why);
	else if (how == DT_H5_STR_UTF8) /* a variable-length string is written from its pointer */
		rc = dt_h5_attr_put(loc, name, type, type, 0, 0, &v, why);
	else
		rc = dt_h5_attr_put(loc, name, type, type, 0, 0, v, why);
	dt_h5_close(&type, H5Tclose);
	return rc;
}

/* Opens attribute name of loc, which must hold one value: *attr and its
 * *type, for the caller to close. */
static int attr_open(hid_t loc, const char *name, hid_t *attr, hid_t *type, char *why)
{
	hid_t space;
	hssize_t points;

	*attr = *type = H5I_INVALID_HID;
	if (H5Aexists(loc, name) <= 0) {
		snprintf(why, DT_H5_WHY_MAX, "is missing");
		return -ENOENT;
	}
	*attr = H5Aopen(loc, name, H5P_DEFAULT);
	if (*attr < 0)
		return h5_failed(why);
	space = H5Aget_space(*attr);
	points = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
	dt_h5_close(&space, H5Sclose);
	if (points != 1) {
		snprintf(why, DT_H5_WHY_MAX, "must be a single value (has %lld)", (long long)points);
		dt_h5_close(attr, H5Aclose);
		return -EDOM;
	}
	*type = H5Aget_type(*attr);
	if (*type < 0) {
		h5_failed(why);
		dt_h5_close(attr, H5Aclose);
		return -EIO;
	}
	return 0;
}

/* -EDOM: the attribute of type is not what was asked for ("an integer"). */
static int wrong_class(char *why, const char *want, hid_t type)
{
	snprintf(why, DT_H5_WHY_MAX, "must be %s (got %s)", want,
		 dt_h5_class_name(H5Tget_class(type)));
	return -EDOM;
}

int dt_h5_attr_get_i64(hid_t loc, const char *name, int64_t *v, char why[DT_H5_WHY_MAX])
{
	hid_t attr, type;
	int rc = attr_open(loc, name, &attr, &type, why);

	if (rc)
		return rc;
	if (H5Tget_class(type) != H5T_INTEGER)
		rc = wrong_class(why, "an integer", type);
	else if (H5Aread(attr, H5T_NATIVE_INT64, v) < 0)
		rc = h5_failed(why);
	H5Tclose(type);
	H5Aclose(attr);
	return rc;
}

int dt_h5_attr_get_f64(hid_t loc, const char *name, double *v, char why[DT_H5_WHY_MAX])
{
	hid_t attr, type;
	H5T_class_t c;
	int rc = attr_open(loc, name, &attr, &type, why);

	if (rc)
		return rc;
	c = H5Tget_class(type);
	if (c != H5T_INTEGER && c != H5T_FLOAT)
		rc = wrong_class(why, "a number", type);
	else if (H5Aread(attr, H5T_NATIVE_DOUBLE, v) < 0)
		rc = h5_failed(why);
	H5Tclose(type);
	H5Aclose(attr);
	return rc;
}

/* The string of attr (of the file type type) into *out, malloc'ed, read
 * in the character set it is stored in. */
static int read_str(hid_t attr, hid_t type, size_t max, char **out, char *why)
{
	hid_t mem = H5Tcopy(H5T_C_S1);
	char *vs = NULL;
	size_t size;
	int rc = 0;

	if (mem < 0 || H5Tset_cset(mem, H5Tget_cset(type)) < 0) {
		rc = h5_failed(why);
	} else if (H5Tis_variable_str(type) > 0) {
		if (H5Tset_size(mem, H5T_VARIABLE) < 0 || H5Aread(attr, mem, &vs) < 0) {
			rc = h5_failed(why);
		} else {
			*out = strdup(vs ? vs : "");
			H5free_memory(vs);
		}
	} else {
		size = H5Tget_size(type);
		if (size == 0 || size > max) {
			snprintf(why, DT_H5_WHY_MAX, "is implausibly long (%zu bytes)", size);
			rc = -EDOM;
		} else if (H5Tset_size(mem, size + 1) < 0 ||
			   H5Tset_strpad(mem, H5T_STR_NULLTERM) < 0) {
			rc = h5_failed(why);
		} else {
			*out = calloc(size + 1, 1);
			if (*out && H5Aread(attr, mem, *out) < 0) {
				rc = h5_failed(why);
				free(*out);
				*out = NULL;
			}
		}
	}
	if (!rc && !*out) {
		snprintf(why, DT_H5_WHY_MAX, "out of memory");
		rc = -ENOMEM;
	}
	dt_h5_close(&mem, H5Tclose);
	return rc;
}

int dt_h5_attr_get_str(hid_t loc, const char *name, size_t max, char **out,
		       char why[DT_H5_WHY_MAX])
{
	hid_t attr, type;
	int rc;

	*out = NULL;
	rc = attr_open(loc, name, &attr, &type, why);
	if (rc)
		return rc;
	if (H5Tget_class(type) != H5T_STRING)
		rc = wrong_class(why, "a string", type);
	else
		rc = read_str(attr, type, max, out, why);
	H5Tclose(type);
	H5Aclose(attr);
	return rc;
}
