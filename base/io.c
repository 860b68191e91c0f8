/*
 * io.c - file I/O for files we own, with the fault hooks that tests
 * use to make a write or sync fail (io.h, fault.h).
 */
#include "base/io.h"

#include "base/buf.h"
#include "base/fault.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <dirent.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

/* All of fd into *out (NUL-terminated): from offset 0 with pread when
 * positional (an fd whose offset is elsewhere), else with read from where
 * it is (pipes too). */
static int read_all(int fd, bool positional, char **out, size_t *len)
{
	struct dt_buf b = {0};
	char chunk[65536];
	uint64_t at = 0;
	ssize_t n;
	int rc = 0;

	*out = NULL;
	for (;;) {
		n = positional ? pread(fd, chunk, sizeof(chunk), (off_t)at) : read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (n == 0)
			break;
		rc = dt_buf_add(&b, chunk, (size_t)n);
		if (rc)
			break;
		at += (uint64_t)n;
	}
	if (!rc && !b.p)
		rc = dt_buf_add(&b, "", 0);
	if (rc) {
		dt_buf_free(&b);
		return rc;
	}
	*out = b.p;
	if (len)
		*len = b.len;
	return 0;
}

int dt_read_file(const char *path, char **out, size_t *len)
{
	int fd, rc;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = read_all(fd, false, out, len);
	close(fd);
	return rc;
}

/*
 * Every write and fsync of a file we own goes through sys_write() and
 * sys_fsync(), so that tests can make them fail as a full disk would, or
 * make them slow enough to kill a process in the middle (sqlite's
 * aSyscall[] idea), through DTRAIN_FAULT_WRITE (base/fault.h):
 *   "enospc@BYTES"  once this process has written BYTES, writes fail with
 *                   ENOSPC (fsync too);
 *   "slow@MS"       each write call (at most WRITE_CHUNK bytes) sleeps MS first.
 */
#define WRITE_CHUNK (8u << 20)

static _Atomic unsigned long long fault_written;

static int fault_check(size_t len)
{
	unsigned long long full;

	if (dt_fault(DT_FAULT_WRITE, "enospc", -1, &full) && fault_written + len > full)
		return -ENOSPC;
	dt_fault_slow(DT_FAULT_WRITE, -1);
	return 0;
}

static ssize_t sys_write(int fd, const void *p, size_t len, long long off)
{
	ssize_t n;
	int rc = fault_check(len);

	if (rc) {
		errno = -rc;
		return -1;
	}
	n = off < 0 ? write(fd, p, len) : pwrite(fd, p, len, (off_t)off);
	if (n > 0)
		fault_written += (unsigned long long)n;
	return n;
}

static int sys_fsync(int fd)
{
	int rc = fault_check(0);

	if (rc) {
		errno = -rc;
		return -1;
	}
	return fsync(fd);
}

static ssize_t sys_read(int fd, const void *p, size_t len, long long off)
{
	return pread(fd, (void *)p, len, (off_t)off);
}

/* op (a write, a pwrite when off >= 0, or a pread) over all of len,
 * retrying EINTR and short transfers; -EIO when op transfers nothing. */
static int io_loop(ssize_t (*op)(int, const void *, size_t, long long), int fd, const void *data,
		   size_t len, long long off)
{
	const char *p = data;

	while (len > 0) {
		ssize_t n = op(fd, p, len > WRITE_CHUNK ? WRITE_CHUNK : len, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
		if (off >= 0)
			off += n;
	}
	return 0;
}

int dt_write_all(int fd, const void *data, size_t len)
{
	return io_loop(sys_write, fd, data, len, -1);
}

int dt_pwrite_all(int fd, const void *data, size_t len, uint64_t offset)
{
	if (len > (uint64_t)INT64_MAX || offset > (uint64_t)INT64_MAX - len)
		return -EFBIG;
	return io_loop(sys_write, fd, data, len, (long long)offset);
}

int dt_pread_all(int fd, void *buf, size_t len, uint64_t offset)
{
	if (len > (uint64_t)INT64_MAX || offset > (uint64_t)INT64_MAX - len)
		return -EFBIG;
	return io_loop(sys_read, fd, buf, len, (long long)offset);
}

int dt_fsync_fd(int fd)
{
	while (sys_fsync(fd) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

int dt_writeback_start(int fd, uint64_t offset, uint64_t len)
{
#ifdef SYNC_FILE_RANGE_WRITE
	if (offset > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - offset)
		return -EFBIG;
	/* a hint: a file system that cannot do it loses nothing but time */
	while (sync_file_range(fd, (off_t)offset, (off_t)len, SYNC_FILE_RANGE_WRITE) < 0) {
		if (errno == EINTR)
			continue;
		if (errno == EIO || errno == ENOSPC)
			return -errno;
		break;
	}
#else
	(void)fd;
	(void)offset;
	(void)len;
#endif
	return 0;
}

int dt_fsync_path(const char *path, bool dir)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | (dir ? O_DIRECTORY : 0));
	int rc = 0;

	if (fd < 0)
		return -errno;
	rc = dt_fsync_fd(fd);
	if (rc == -EINVAL && dir)
		rc = 0; /* some file systems cannot sync a directory */
	close(fd);
	return rc;
}

int dt_fsync_parent(const char *path)
{
	char *dir = strdup(path), *slash;
	int rc;

	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (!slash)
		strcpy(dir, ".");
	else if (slash == dir)
		slash[1] = '\0';
	else
		*slash = '\0';
	rc = dt_fsync_path(dir, true);
	free(dir);
	return rc;
}

int dt_write_file_atomic(const char *path, const void *data, size_t len, int mode)
{
	struct dt_buf tmp = {0};
	int fd = -1, rc;

	rc = dt_buf_printf(&tmp, "%s.tmp.%ld", path, (long)getpid());
	if (rc)
		goto out;
	/* a leftover of this pid, or a link planted at the predictable name, is
	 * removed (a link as a link); the file is then made new, never
	 * written through a link planted meanwhile (O_EXCL, O_NOFOLLOW) */
	unlink(tmp.p);
	fd = open(tmp.p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	rc = dt_write_all(fd, data, len);
	if (!rc)
		rc = dt_fsync_fd(fd);
	if (close(fd) < 0 && !rc)
		rc = -errno;
	fd = -1;
	if (!rc && rename(tmp.p, path) < 0)
		rc = -errno;
	if (!rc)
		rc = dt_fsync_parent(path);
out:
	if (rc && tmp.p)
		unlink(tmp.p);
	dt_buf_free(&tmp);
	return rc;
}

int dt_mkdirs(const char *path, int mode)
{
	char *p = strdup(path);
	char *s;
	struct stat st;
	int rc = 0;

	if (!p)
		return -ENOMEM;
	for (s = p + 1; ; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;

		*s = '\0';
		if (mkdir(p, (mode_t)mode) < 0 && errno != EEXIST) {
			rc = -errno;
			break;
		}
		*s = c;
		if (c == '\0')
			break;
	}
	if (!rc && (stat(path, &st) < 0 || !S_ISDIR(st.st_mode)))
		rc = -ENOTDIR;
	free(p);
	return rc;
}

int dt_dir_open_at(int dfd, const char *name, int mode)
{
	struct stat st;
	int fd;

	if (mode >= 0 && mkdirat(dfd, name, (mode_t)mode) < 0 && errno != EEXIST)
		return -errno;
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		/* a link fails O_DIRECTORY before O_NOFOLLOW: say which it was */
		fd = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode) ?
			     -ELOOP : -errno;
	return fd;
}

int dt_dir_open_in(const char *dir, const char *name, int mode)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd;

	if (dfd < 0)
		return -errno;
	fd = dt_dir_open_at(dfd, name, mode);
	close(dfd);
	return fd;
}

int dt_dir_open_nofollow(const char *path)
{
	char *dir = strdup(path), *name, *slash;
	struct stat st;
	int dfd, fd;

	if (!dir)
		return -ENOMEM;
	/* "a/b/" names b: trailing slashes would make openat follow a link */
	for (slash = dir + strlen(dir); slash > dir + 1 && slash[-1] == '/'; slash--)
		slash[-1] = '\0';
	slash = strrchr(dir, '/');
	if (!slash) {
		name = dir;
		dfd = AT_FDCWD;
	} else {
		name = slash + 1;
		*slash = '\0';
		dfd = open(slash == dir ? "/" : dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0) {
			fd = -errno;
			goto out;
		}
	}
	if (!*name) { /* "/" itself */
		fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		fd = fd < 0 ? -errno : fd;
		goto out;
	}
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		/* a link fails O_DIRECTORY before O_NOFOLLOW: say which it was */
		fd = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode) ?
			     -ELOOP : -errno;
out:
	if (dfd >= 0)
		close(dfd);
	free(dir);
	return fd;
}

/* Is the file at name (followed) the one open at fd? */
static bool names_fd(const char *name, const struct stat *of_fd)
{
	struct stat st;

	return stat(name, &st) == 0 && st.st_dev == of_fd->st_dev && st.st_ino == of_fd->st_ino;
}

int dt_fd_name(int fd, const char *path, char *out, size_t size)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if ((size_t)snprintf(out, size, "/proc/self/fd/%d", fd) < size && names_fd(out, &st))
		return 0;
	if ((size_t)snprintf(out, size, "%s", path) >= size)
		return -ENAMETOOLONG;
	return names_fd(out, &st) ? 0 : -ESTALE;
}

int dt_read_fd(int fd, char **out, size_t *len)
{
	return read_all(fd, true, out, len);
}

/* Everything inside the directory open at dfd, never leaving it: a link
 * is removed as a link, a directory opened relative to its parent with
 * O_NOFOLLOW (one swapped for a link meanwhile fails to open). Takes dfd. */
static int remove_below(int dfd)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	int rc = 0;

	if (!d) {
		rc = -errno;
		close(dfd);
		return rc;
	}
	while (!rc && (de = readdir(d)) != NULL) {
		struct stat st;
		int sub;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = errno == ENOENT ? 0 : -errno;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (unlinkat(dfd, de->d_name, 0) < 0 && errno != ENOENT)
				rc = -errno;
			continue;
		}
		sub = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		rc = sub < 0 ? -errno : remove_below(sub);
		if (!rc && unlinkat(dfd, de->d_name, AT_REMOVEDIR) < 0)
			rc = -errno;
	}
	closedir(d);
	return rc;
}

int dt_remove_tree_at(int dfd, const char *name)
{
	struct stat st;
	int fd, rc;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dfd, name, 0) < 0 ? -errno : 0;
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = remove_below(fd);
	if (!rc && unlinkat(dfd, name, AT_REMOVEDIR) < 0)
		rc = -errno;
	return rc;
}

int dt_remove_tree(const char *path)
{
	struct stat st;
	int fd, rc;

	if (lstat(path, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return unlink(path) < 0 ? -errno : 0;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = remove_below(fd);
	if (!rc && rmdir(path) < 0)
		rc = -errno;
	return rc;
}
