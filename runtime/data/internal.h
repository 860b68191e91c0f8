/*
 * internal.h - what the files of runtime/data/ share and no caller sees
 * (the public header is data.h): one error helper, and the token windows'
 * side of the data set functions.
 *
 * Sections: errors, token windows.
 */
#ifndef DTRAIN_RUNTIME_DATA_INTERNAL_H
#define DTRAIN_RUNTIME_DATA_INTERNAL_H

#include <stdint.h>

#include "base/err.h"
#include "runtime/data/data.h"

/* --- errors --- */

/* "path: out of memory" in err; returns -ENOMEM (data.c). */
int rt__data_oom(struct dt_err *err, const char *path);

/* --- token windows (windows.c) --- */

/* rt_data_read, rt_data_load_all and rt_data_close of a data set opened by
 * rt_data_open_windows(). */
int rt__data_windows_read(struct rt_data *d, const int64_t *idx, int n_idx, float *x, int32_t *y,
			  struct dt_err *err);
int rt__data_windows_load(struct rt_data *d, struct dt_err *err);
void rt__data_windows_close(struct rt_data *d);

#endif
