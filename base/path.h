/*
 * path.h - paths: absolute forms, joining, the running program's directory.
 */
#ifndef DTRAIN_BASE_PATH_H
#define DTRAIN_BASE_PATH_H


/* Absolute, lexically normalised form of path relative to the current
 * directory (no symlink resolution; the path need not exist). Caller frees. */
char *dt_abspath(const char *path);
/* "dir/name" with one slash between them, however many dir ends with
 * ("data/" and "data" give "data/train.h5", "/" gives "/train.h5", ""
 * gives "train.h5"). Caller
 * frees; NULL when out of memory. */
char *dt_path_join(const char *dir, const char *name);

/* Directory holding the running executable (for finding sibling programs).
 * Caller frees; NULL on failure. */
char *dt_exe_dir(void);

#endif
