/*
 * io.h - file I/O that is safe to use for files we own: whole reads, writes
 * and syncs retried on EINTR and short counts, atomic replacement, mkdir -p,
 * rm -r. The writes and syncs are where tests inject failures (fault.h).
 */
#ifndef DTRAIN_BASE_IO_H
#define DTRAIN_BASE_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
/* Writes data to path atomically: path.tmp.<pid> (made new: a file or a
 * symbolic link already at that name is removed, never written through),
 * fsync, rename (a link at path is replaced, not followed), fsync dir.
 * mode is the new file's permission bits. 0 or -errno. */
int dt_write_file_atomic(const char *path, const void *data, size_t len, int mode);
/* mkdir -p; 0 or -errno (EEXIST of a directory is not an error). */
int dt_mkdirs(const char *path, int mode);
/* The directory name inside dir, made (with mode) when missing, opened
 * without following a symbolic link: a link planted at dir/name is
 * refused (-ELOOP), as is anything but a directory (-ENOTDIR). dir itself
 * is taken as given (the user's). Returns an fd for openat() (the caller
 * closes it), or -errno. */
int dt_dir_open_in(const char *dir, const char *name, int mode);
/* The same relative to the directory open at dfd: name made (with mode)
 * when missing unless mode < 0, then opened without following a link. */
int dt_dir_open_at(int dfd, const char *name, int mode);
/* The directory path, opened without following a symbolic link at its
 * last component: a link there is refused (-ELOOP), as is anything but a
 * directory (-ENOTDIR). The components above it are taken as given (the
 * user's). Nothing is made. Returns an fd for openat() (the caller closes
 * it), or -errno. */
int dt_dir_open_nofollow(const char *path);
/* A name by which code that opens files by name (a library: HDF5) reaches
 * exactly the file open at fd, into out: /proc/self/fd/<fd> where /proc
 * shows that file (checked: the same device and inode), else path when it
 * names that file now (the same check; without /proc, a rename between
 * this check and the library's open is not covered). 0, -ENAMETOOLONG, or
 * -ESTALE when neither names it (path was replaced). */
int dt_fd_name(int fd, const char *path, char *out, size_t size);
/* Reads all of the file open at fd, from offset 0, into *out
 * (NUL-terminated, caller frees). 0 or -errno. */
int dt_read_fd(int fd, char **out, size_t *len);
/* rm -r of path, never through a symbolic link: a link, at path or
 * anywhere below it, is removed as a link and its target left untouched
 * (run and checkpoint directories live on shared file systems where
 * others may plant one). 0 or -errno. */
int dt_remove_tree(const char *path);
/* The same for the entry name of the directory open at dfd (never
 * leaving it: a link at name is removed as a link). */
int dt_remove_tree_at(int dfd, const char *name);

#endif
