/*
 * util.c - error reports, string buffers, quoting and file helpers.
 *
 * Sections: errors, buffers, strings, files.
 */
#include "base/util.h"

#include "base/fault.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <dirent.h>
#include <stdatomic.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

/* --- errors --- */

int dt_err_addv(struct dt_err *e, const char *fmt, va_list ap)
{
	size_t room;
	int n;

	e->count++;
	if (e->len + 4 >= sizeof(e->msg))
		return -EINVAL;
	if (e->len > 0)
		e->msg[e->len++] = '\n';
	room = sizeof(e->msg) - e->len;
	n = vsnprintf(e->msg + e->len, room, fmt, ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= room) {
		/* Cut: end the report with "..." so nobody mistakes it for whole. */
		e->len = sizeof(e->msg) - 1;
		memcpy(e->msg + e->len - 3, "...", 3);
	} else {
		e->len += (size_t)n;
	}
	e->msg[e->len] = '\0';
	return -EINVAL;
}

int dt_err_add(struct dt_err *e, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = dt_err_addv(e, fmt, ap);
	va_end(ap);
	return rc;
}

void dt_err_clear(struct dt_err *e)
{
	e->msg[0] = '\0';
	e->len = 0;
	e->count = 0;
}

/* --- buffers --- */

void dt_buf_free(struct dt_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

static int buf_reserve(struct dt_buf *b, size_t extra)
{
	size_t need = b->len + extra + 1;
	size_t cap;
	char *p;

	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p)
		return -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

int dt_buf_add(struct dt_buf *b, const char *s, size_t n)
{
	if (buf_reserve(b, n))
		return -ENOMEM;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

int dt_buf_puts(struct dt_buf *b, const char *s)
{
	return dt_buf_add(b, s, strlen(s));
}

int dt_buf_printf(struct dt_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if (buf_reserve(b, (size_t)n))
		return -ENOMEM;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

const char *dt_buf_str(const struct dt_buf *b)
{
	return b->p ? b->p : "";
}

/* --- strings --- */

char *dt_strdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

int dt_edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char row[65];
	size_t i, j;

	/* Hints only compare short keys; anything longer is "far". */
	if (la > 64 || lb > 64)
		return 255;
	for (j = 0; j <= lb; j++)
		row[j] = (unsigned char)j;
	for (i = 1; i <= la; i++) {
		unsigned char diag = row[0];

		row[0] = (unsigned char)i;
		for (j = 1; j <= lb; j++) {
			unsigned char up = row[j];
			unsigned best = diag + (a[i - 1] != b[j - 1]);

			if (up + 1u < best)
				best = up + 1u;
			if (row[j - 1] + 1u < best)
				best = row[j - 1] + 1u;
			row[j] = (unsigned char)(best > 255 ? 255 : best);
			diag = up;
		}
	}
	return row[lb];
}

const char *dt_closest_word(const char *list, char sep, const char *s, int max_d, char *buf,
			    size_t size)
{
	const char *p = list, *best = NULL;
	size_t n;
	int d;

	if (!sep)
		return NULL;
	while (*p) {
		n = strcspn(p, (char[]){ sep, '\0' });
		if (n < size) {
			memcpy(buf, p, n);
			buf[n] = '\0';
			d = strcasecmp(buf, s) ? dt_edit_distance(buf, s) : -1;
			if (d < max_d) {
				max_d = d;
				best = p;
			}
		}
		p += n + (p[n] == sep);
	}
	if (!best)
		return NULL;
	n = strcspn(best, (char[]){ sep, '\0' });
	memcpy(buf, best, n);
	buf[n] = '\0';
	return buf;
}

int dt_shell_quote(struct dt_buf *b, const char *s)
{
	int rc = dt_buf_puts(b, "'");

	for (; !rc && *s; s++) {
		if (*s == '\'')
			rc = dt_buf_puts(b, "'\\''");
		else
			rc = dt_buf_add(b, s, 1);
	}
	return rc ? rc : dt_buf_puts(b, "'");
}

/* --- files --- */

int dt_read_file(const char *path, char **out, size_t *len)
{
	struct dt_buf b = {0};
	char chunk[65536];
	int fd, rc = 0;
	ssize_t n;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		n = read(fd, chunk, sizeof(chunk));
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
	}
	close(fd);
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
	fd = open(tmp.p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
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

int dt_remove_tree(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int rc = 0;

	if (!d)
		return errno == ENOTDIR ? (unlink(path) < 0 ? -errno : 0) : -errno;
	while ((de = readdir(d)) != NULL) {
		struct dt_buf child = {0};
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (dt_buf_printf(&child, "%s/%s", path, de->d_name)) {
			rc = -ENOMEM;
			break;
		}
		if (lstat(child.p, &st) == 0 && S_ISDIR(st.st_mode))
			rc = dt_remove_tree(child.p);
		else if (unlink(child.p) < 0)
			rc = -errno;
		dt_buf_free(&child);
		if (rc)
			break;
	}
	closedir(d);
	if (!rc && rmdir(path) < 0)
		rc = -errno;
	return rc;
}

int dt_cpulist_count(const char *list)
{
	const char *p = list;
	long n = 0, a, b;
	char *end;

	while (*p && *p != '\n') {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		a = b = strtol(p, &end, 10);
		p = end;
		if (*p == '-') {
			if (p[1] < '0' || p[1] > '9')
				return -EINVAL;
			b = strtol(p + 1, &end, 10);
			p = end;
		}
		if (b < a || b - a >= 1L << 20)
			return -EINVAL;
		n += b - a + 1;
		if (*p == ',')
			p++;
		else if (*p && *p != '\n')
			return -EINVAL;
	}
	return n > 0 && n <= INT_MAX ? (int)n : -EINVAL;
}

char *dt_path_join(const char *dir, const char *name)
{
	size_t n = strlen(dir);
	char *out;

	if (n == 0)
		return dt_strdup(name);
	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (n == 1 && dir[0] == '/')
		n = 0;
	if (asprintf(&out, "%.*s/%s", (int)n, dir, name) < 0)
		return NULL;
	return out;
}

char *dt_abspath(const char *path)
{
	struct dt_buf in = {0}, out = {0};
	char cwd[PATH_MAX];
	char *save = NULL, *tok;

	if (path[0] != '/') {
		if (!getcwd(cwd, sizeof(cwd)))
			return NULL;
		if (dt_buf_printf(&in, "%s/%s", cwd, path))
			goto fail;
	} else if (dt_buf_puts(&in, path)) {
		goto fail;
	}
	for (tok = strtok_r(in.p, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
		if (!strcmp(tok, "."))
			continue;
		if (!strcmp(tok, "..")) {
			char *slash = out.p ? strrchr(out.p, '/') : NULL;

			if (slash) {
				*slash = '\0';
				out.len = (size_t)(slash - out.p);
			}
			continue;
		}
		if (dt_buf_printf(&out, "/%s", tok))
			goto fail;
	}
	if (!out.p && dt_buf_puts(&out, "/"))
		goto fail;
	dt_buf_free(&in);
	return out.p;
fail:
	dt_buf_free(&in);
	dt_buf_free(&out);
	return NULL;
}

char *dt_exe_dir(void)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	char *slash;

	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	slash = strrchr(buf, '/');
	if (!slash)
		return NULL;
	*slash = '\0';
	return strdup(buf[0] ? buf : "/");
}

void dt_sleep_ms(unsigned long long ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}
