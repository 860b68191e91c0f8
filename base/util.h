/*
 * util.h - small pieces every dtrain module uses: error reports, a growable
 * string buffer, and file I/O that is safe to use for files we own.
 *
 * Errors: library functions return 0 or a negative errno-style code and add
 * one line per problem to a caller-supplied struct dt_err, so that a caller can
 * show every problem of a spec at once. Only main() prints and exits.
 *
 * Exit codes shared by all dtrain programs are defined here too, so that the
 * batch script, the tests and the docs use one set of numbers.
 */
#ifndef DTRAIN_UTIL_H
#define DTRAIN_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* --- exit codes (documented in README.md "Exit codes") --- */
enum {
	DT_EXIT_OK = 0,
	DT_EXIT_FAIL = 1,     /* runtime failure: Slurm refused, I/O error, ... */
	DT_EXIT_USAGE = 2,    /* bad command line */
	DT_EXIT_SPEC = 3,     /* the job spec or site file is invalid */
	DT_EXIT_DIVERGED = 4, /* training diverged: NaN or infinite loss */
	DT_EXIT_HUNG = 5,     /* the watchdog ended a rank that waited too long for others */
	DT_EXIT_REQUEUE = 75, /* dtrain-run saved its state: requeue me (EX_TEMPFAIL) */
};

/* --- error reports --- */

/* Collected error lines, each "file: json.path: what is wrong (got X)".
 * Fixed size: a report that overflows ends with "...". Zero-initialise. */
struct dt_err {
	char msg[8192]; /* lines joined by '\n', no trailing newline */
	size_t len;
	int count;      /* lines added, also those cut off */
};

/* Add one line. Returns -EINVAL so that callers can `return dt_err_add(...)`. */
int dt_err_add(struct dt_err *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int dt_err_addv(struct dt_err *e, const char *fmt, va_list ap);
void dt_err_clear(struct dt_err *e);

/* --- growable string buffer (caller frees with dt_buf_free) --- */
struct dt_buf {
	char *p;    /* NUL-terminated, NULL until the first append */
	size_t len;
	size_t cap;
};

void dt_buf_free(struct dt_buf *b);
/* Appends; returns 0 or -ENOMEM. */
int dt_buf_add(struct dt_buf *b, const char *s, size_t n);
int dt_buf_puts(struct dt_buf *b, const char *s);
int dt_buf_printf(struct dt_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The text ("" when empty); valid until the next append. */
const char *dt_buf_str(const struct dt_buf *b);

/* --- strings --- */

/* strdup that treats NULL as NULL; returns NULL only when s is NULL or on ENOMEM. */
char *dt_strdup(const char *s);
/* Levenshtein distance, capped at 255 (for "did you mean" hints). */
int dt_edit_distance(const char *a, const char *b);
/* "Did you mean": the word of `list` (words separated by sep, as in
 * "relu|gelu" or "--site --set") closest to s, copied into buf; a word
 * equal to s but for case wins, else one fewer than max_d edits away.
 * Returns buf, or NULL when no word is close enough (or fits buf), or sep
 * is '\0'. */
const char *dt_closest_word(const char *list, char sep, const char *s, int max_d, char *buf,
			    size_t size);
/* Appends s to b as one POSIX shell word in single quotes ('it'\''s'). */
int dt_shell_quote(struct dt_buf *b, const char *s);

/* --- files --- */

/* Reads a whole file into *out (NUL-terminated, caller frees). 0 or -errno. */
int dt_read_file(const char *path, char **out, size_t *len);
/* fsync a file, or a directory (file systems that cannot sync one are
 * not an error); 0 or -errno. */
int dt_fsync_path(const char *path, bool dir);
/* fsync the directory holding path (after a rename into it); 0 or -errno. */
int dt_fsync_parent(const char *path);
/* write() all of data, retrying on EINTR and short writes. 0 or -errno.
 * This, dt_pwrite_all and dt_fsync_fd are the only places dtrain writes
 * or syncs its files: tests inject failures there (DTRAIN_FAULT_WRITE,
 * base/fault.h). */
int dt_write_all(int fd, const void *data, size_t len);
/* pwrite() all of data at offset, same retries. 0 or -errno. */
int dt_pwrite_all(int fd, const void *data, size_t len, uint64_t offset);
/* fsync(), retrying on EINTR. 0 or -errno. */
int dt_fsync_fd(int fd);
/* pread() of exactly len bytes at offset, retrying on EINTR and short
 * reads. 0, -EIO when the file ends first, or -errno. */
int dt_pread_all(int fd, void *buf, size_t len, uint64_t offset);
/* Starts writing back the dirty pages of [offset, offset + len) of fd
 * without waiting for them (Linux sync_file_range), so that a later fsync
 * has less left to wait for. A hint, not a sync: 0 where the file system
 * or OS cannot; -errno only for an I/O error or a full disk it reports. */
int dt_writeback_start(int fd, uint64_t offset, uint64_t len);
/* Writes data to path atomically: path.tmp.<pid>, fsync, rename, fsync dir.
 * mode is the new file's permission bits. 0 or -errno. */
int dt_write_file_atomic(const char *path, const void *data, size_t len, int mode);
/* mkdir -p; 0 or -errno (EEXIST of a directory is not an error). */
int dt_mkdirs(const char *path, int mode);
/* rm -r of a directory we created; 0 or -errno. */
int dt_remove_tree(const char *path);
/* Absolute, lexically normalised form of path relative to the current
 * directory (no symlink resolution; the path need not exist). Caller frees. */
char *dt_abspath(const char *path);
/* "dir/name" with one slash between them, however many dir ends with
 * ("data/" and "data" give "data/train.h5", "/" gives "/train.h5", ""
 * gives "train.h5"). Caller
 * frees; NULL when out of memory. */
char *dt_path_join(const char *dir, const char *name);

/* The number of CPUs in a Linux CPU list ("0-3,8,10-11\n": 7), as in
 * cpuset.cpus.effective; -EINVAL when malformed or empty. */
int dt_cpulist_count(const char *list);

/* Directory holding the running executable (for finding sibling programs).
 * Caller frees; NULL on failure. */
char *dt_exe_dir(void);

/* Sleeps ms milliseconds, resumed after signals (the fault hooks' delays). */
void dt_sleep_ms(unsigned long long ms);

#endif
