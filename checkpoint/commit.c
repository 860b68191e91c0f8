/*
 * commit.c - turning a directory of written files into a committed
 * checkpoint: the tmp and final names, removing a crash's leftovers, the
 * commit itself (manifest, fsync, rename, latest) and retention.
 *
 * The rename of .step-N.tmp to step-N is the commit point: before it, a
 * failure removes the tmp directory and leaves every committed checkpoint
 * as it was; after it, the checkpoint is committed whatever else fails
 * (repointing latest, deleting old checkpoints), and such a failure is
 * reported with a message that says so, and *committed tells the caller
 * which of the two happened. Everything this file leaves behind after a
 * crash is named .step-*.tmp or .latest.tmp, which the next
 * ckpt_clean_tmp() or commit removes.
 *
 * Links: the checkpoint directory may be on a shared file system where
 * others can plant a symbolic link under any name a save uses. A save's
 * tmp directory is made afresh (ckpt_tmp_make); its files are opened
 * relative to it without following a link (ckpt__tmp_file); the commit
 * checks that the directory it renames is the one whose files it checked;
 * leftovers are removed as links (dt_remove_tree); latest is replaced by
 * rename, never followed. A link the save did not make is refused, named.
 *
 * Sections: names, cleaning up, the tmp directory, checking the files, the
 * commit, retention.
 */
#include "checkpoint/internal.h"
#include "base/buf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TMP_PREFIX ".step-"
#define TMP_SUFFIX ".tmp"
#define LATEST_TMP ".latest.tmp"
#define LINK_WHY "a symbolic link, which this save did not make: not followed"

/* --- names --- */

void ckpt_tmp_path(const char *dir, int64_t step, char *out, size_t size)
{
	char name[32];

	ckpt_step_name(step, name, sizeof(name));
	snprintf(out, size, "%s/.%s.tmp", dir, name);
}

void ckpt_final_path(const char *dir, int64_t step, char *out, size_t size)
{
	char name[32];

	ckpt_step_name(step, name, sizeof(name));
	snprintf(out, size, "%s/%s", dir, name);
}

/* dir/name into out; false when it does not fit. */
static bool join(char *out, size_t size, const char *dir, const char *name)
{
	return (size_t)snprintf(out, size, "%s/%s", dir, name) < size;
}

/* --- cleaning up --- */

/* A leftover of an unfinished save: .step-<anything>.tmp. */
static bool is_tmp_name(const char *name)
{
	size_t n = strlen(name);

	return n > strlen(TMP_PREFIX) + strlen(TMP_SUFFIX) &&
	       !strncmp(name, TMP_PREFIX, strlen(TMP_PREFIX)) &&
	       !strcmp(name + n - strlen(TMP_SUFFIX), TMP_SUFFIX);
}

int ckpt_clean_tmp(const char *dir, struct dt_err *err)
{
	char path[4096];
	struct dirent *de;
	struct stat st;
	DIR *d;
	int rc = 0, r;

	d = opendir(dir);
	if (!d) {
		if (errno == ENOENT)
			return 0;
		rc = -errno;
		dt_err_add(err, "%s: cannot list checkpoint directory: %s", dir, strerror(-rc));
		return rc;
	}
	while ((de = readdir(d)) != NULL) {
		if (!is_tmp_name(de->d_name))
			continue;
		/* a directory of an unfinished save, or a link planted under such
		 * a name: removed as a link, its target untouched. A regular file
		 * is not ours to remove (a save's mkdir refuses it) */
		if (!join(path, sizeof(path), dir, de->d_name) || lstat(path, &st) < 0 ||
		    !(S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode)))
			continue;
		r = dt_remove_tree(path);
		if (r && !rc) {
			rc = r;
			dt_err_add(err, "%s: cannot remove unfinished checkpoint: %s", path,
				   strerror(-r));
		}
	}
	closedir(d);
	return rc;
}

/* --- the tmp directory --- */

int ckpt_tmp_make(const char *dir, int64_t step, struct dt_err *err)
{
	char tmp[4096];
	int rc;

	ckpt_tmp_path(dir, step, tmp, sizeof(tmp));
	if (strlen(tmp) + 1 >= sizeof(tmp))
		return dt_err_add(err, "%s: path too long", dir);
	/* this step's leftover (a failed save's): never through a link */
	rc = dt_remove_tree(tmp);
	if (rc && rc != -ENOENT) {
		dt_err_add(err, "%s: cannot remove an unfinished save: %s", tmp, strerror(-rc));
		return rc;
	}
	rc = mkdir(tmp, 0755) < 0 ? -errno : 0;
	if (rc == -ENOENT) { /* the checkpoint directory went away meanwhile */
		rc = dt_mkdirs(dir, 0755);
		if (!rc)
			rc = mkdir(tmp, 0755) < 0 ? -errno : 0;
	}
	if (rc == -EEXIST)
		dt_err_add(err, "%s: cannot create: something else took the name as this save removed it (refusing to write into what this save did not make)",
			   tmp);
	else if (rc)
		dt_err_add(err, "%s: cannot create: %s", tmp, strerror(-rc));
	return rc;
}

int ckpt__tmp_file(const char *path, int flags, const char *doing, struct dt_err *err)
{
	const char *slash = strrchr(path, '/'), *name;
	char tmp[4096];
	struct stat st;
	int dfd, fd = -1;

	if (!slash || slash == path || (size_t)(slash - path) >= sizeof(tmp) || !slash[1])
		return dt_err_add(err, "%s: %s: not a file of a save's directory", path, doing);
	memcpy(tmp, path, (size_t)(slash - path));
	tmp[slash - path] = '\0';
	name = slash + 1;
	dfd = dt_dir_open_nofollow(tmp);
	if (dfd == -ELOOP)
		return dt_err_add(err, "%s: %s: %s is %s", path, doing, tmp, LINK_WHY), -ELOOP;
	if (dfd < 0) {
		dt_err_add(err, "%s: %s: %s", path, doing, strerror(-dfd));
		return dfd;
	}
	if ((flags & O_CREAT) && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		/* an earlier attempt's file is replaced; a link is not ours */
		if (S_ISLNK(st.st_mode))
			fd = -ELOOP;
		else if (S_ISREG(st.st_mode) && unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
			fd = -errno;
	}
	if (fd == -1) {
		fd = openat(dfd, name, flags | O_NOFOLLOW | O_CLOEXEC | (flags & O_CREAT ? O_EXCL : 0),
			    0644);
		if (fd < 0)
			fd = -errno;
	}
	if (fd == -ELOOP)
		dt_err_add(err, "%s: %s: %s", path, doing, LINK_WHY);
	else if (fd < 0)
		dt_err_add(err, "%s: %s: %s", path, doing, strerror(-fd));
	close(dfd);
	return fd;
}

/* --- checking the files --- */

/* A file name the manifest may list: what this module writes, never a path. */
static bool plain_name(const char *name, size_t cap)
{
	size_t n = strnlen(name, cap);

	return n > 0 && n < cap && !strchr(name, '/') && strcmp(name, ".") &&
	       strcmp(name, "..") && strcmp(name, CKPT_MANIFEST);
}

/* Each listed file is a plain name, listed once, a regular file in tmp
 * (open at tfd) of the listed size; tmp holds nothing else (but a manifest
 * we overwrite). */
static int check_files(const char *tmp, int tfd, const struct ckpt_file *files, int n_files,
		       struct dt_err *err)
{
	char path[4096];
	struct dirent *de;
	struct stat st;
	DIR *d = NULL;
	int i, j, fd, rc = 0;

	if (n_files < 1 || n_files > CKPT_MAX_FILES)
		return dt_err_add(err, "%s: a checkpoint has 1..%d files (got %d)", tmp,
				  CKPT_MAX_FILES, n_files);
	for (i = 0; i < n_files; i++) {
		if (!plain_name(files[i].name, sizeof(files[i].name)))
			return dt_err_add(err, "%s: files[%d]: \"%.64s\" is not a plain file name", tmp,
					  i, files[i].name);
		for (j = 0; j < i; j++)
			if (!strcmp(files[i].name, files[j].name))
				return dt_err_add(err, "%s: files[%d]: \"%s\" is listed twice", tmp, i,
						  files[i].name);
		if (!join(path, sizeof(path), tmp, files[i].name))
			return dt_err_add(err, "%s: path too long", tmp);
		if (fstatat(tfd, files[i].name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = -errno;
			dt_err_add(err, "%s: cannot commit: %s", path, strerror(-rc));
			return rc;
		}
		if (S_ISLNK(st.st_mode))
			return dt_err_add(err, "%s: cannot commit: %s", path, LINK_WHY), -ELOOP;
		if (!S_ISREG(st.st_mode))
			return dt_err_add(err, "%s: cannot commit: not a regular file", path);
		if ((uint64_t)st.st_size != files[i].size)
			return dt_err_add(err, "%s: cannot commit: %lld bytes, but %" PRIu64 " listed",
					  path, (long long)st.st_size, files[i].size);
	}
	fd = dup(tfd);
	d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		dt_err_add(err, "%s: cannot list: %s", tmp, strerror(-rc));
		return rc;
	}
	rewinddir(d);
	while ((de = readdir(d)) != NULL && !rc) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    !strcmp(de->d_name, CKPT_MANIFEST))
			continue;
		for (i = 0; i < n_files && strcmp(de->d_name, files[i].name); i++)
			;
		if (i == n_files)
			rc = dt_err_add(err, "%s/%s: cannot commit: not one of the checkpoint's files",
					tmp, de->d_name);
	}
	closedir(d);
	return rc;
}

/* --- the commit --- */

/* The names a commit works with, and the tmp directory it checked. */
struct commit_names {
	char name[32];       /* step-<8 digits> */
	char final[4096];    /* dir/step-<8 digits> */
	char aside[4096];    /* dir/.step-<8 digits>.old.tmp: an earlier commit of the step */
	char manifest[4096]; /* tmp/MANIFEST.json */
	int tfd;             /* tmp, opened without following a link; -1 */
	struct stat tst;     /* its identity: what the rename must move */
};

/* The names of the commit of step from tmp into dir. tmp must be the
 * directory of a save of that step: *ours is set once it is (the commit
 * removes it on failure, so only ever one of ours). */
static int commit_names(const char *dir, const char *tmp, int64_t step, struct commit_names *n,
			bool *ours, struct dt_err *err)
{
	const char *base = strrchr(tmp, '/');
	char tmp_name[48];

	ckpt_step_name(step, n->name, sizeof(n->name));
	snprintf(tmp_name, sizeof(tmp_name), ".%s.tmp", n->name);
	base = base ? base + 1 : tmp;
	if (strcmp(base, tmp_name))
		return dt_err_add(err, "%s: cannot commit: not the directory of a save of step %lld (want %s)",
				  tmp, (long long)step, tmp_name);
	*ours = true;
	if (strlen(dir) + 64 >= sizeof(n->final) ||
	    !join(n->manifest, sizeof(n->manifest), tmp, CKPT_MANIFEST))
		return dt_err_add(err, "%s: path too long", dir);
	ckpt_final_path(dir, step, n->final, sizeof(n->final));
	snprintf(n->aside, sizeof(n->aside), "%s/.%s.old.tmp", dir, n->name);
	return 0;
}

/* tmp (its last component not followed), open in n->tfd, its identity in
 * n->tst; a link is refused. */
static int open_tmp(const char *tmp, struct commit_names *n, struct dt_err *err)
{
	int fd = dt_dir_open_nofollow(tmp), rc = 0;

	if (fd < 0)
		rc = fd;
	else if (fstat(fd, &n->tst) < 0)
		rc = -errno;
	else
		n->tfd = fd;
	if (rc) {
		dt_err_add(err, "%s: cannot commit: %s", tmp, rc == -ELOOP ? LINK_WHY : strerror(-rc));
		if (fd >= 0)
			close(fd);
	}
	return rc;
}

/* Is the entry at path (not followed) the directory n->tfd holds? */
static bool is_checked_tmp(const char *path, const struct commit_names *n)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_dev == n->tst.st_dev &&
	       st.st_ino == n->tst.st_ino;
}

static int write_manifest(int tfd, const char *path, const struct dt_buf *text,
			  struct dt_err *err)
{
	int fd, rc;

	/* in tmp, never through a link (a stale manifest of ours is replaced) */
	fd = openat(tfd, CKPT_MANIFEST, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = -errno;
		dt_err_add(err, "%s: cannot write: %s", path, rc == -ELOOP ? LINK_WHY : strerror(-rc));
		return rc;
	}
	rc = dt_write_all(fd, text->p, text->len);
	if (!rc)
		rc = dt_fsync_fd(fd);
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (rc)
		dt_err_add(err, "%s: cannot write: %s", path, strerror(-rc));
	return rc;
}

/* Step 1: the manifest, written last, and the directory made durable. */
static int commit_manifest(const char *tmp, int tfd, const char *path, const struct ckpt_meta *meta,
			   const struct ckpt_tensor *tensors, int n_tensors,
			   const struct ckpt_file *files, int n_files, struct dt_err *err)
{
	struct dt_buf text = { 0 };
	int rc;

	rc = ckpt__manifest_emit(meta, tensors, n_tensors, files, n_files, &text);
	if (rc)
		dt_err_add(err, "%s: cannot write: %s", path,
			   rc == -ENOMEM ? "out of memory" : "the meta cannot be written as JSON");
	else
		rc = write_manifest(tfd, path, &text, err);
	if (!rc) {
		rc = dt_fsync_fd(tfd);
		if (rc == -EINVAL)
			rc = 0; /* some file systems cannot sync a directory */
		if (rc)
			dt_err_add(err, "%s: cannot sync: %s", tmp, strerror(-rc));
	}
	dt_buf_free(&text);
	return rc;
}

/* Steps 2 and 3: the same step committed by an earlier attempt (before a
 * requeue) goes aside under a name ckpt_clean_tmp() knows until the new
 * one is in place (whatever is there, a link included, is moved and later
 * removed as itself, never followed); then the commit point, the rename of
 * the very directory whose files were checked (*committed), made durable. */
static int commit_rename(const char *dir, const char *tmp, const struct commit_names *n,
			 bool *committed, struct dt_err *err)
{
	struct stat st;
	bool moved = false;
	int rc;

	if (!is_checked_tmp(tmp, n))
		return dt_err_add(err, "%s: cannot commit: no longer the directory whose files were checked (replaced meanwhile)",
				  tmp);
	if (lstat(n->final, &st) == 0) {
		/* a crash's leftover (usually none), or a planted link: as itself */
		rc = dt_remove_tree(n->aside);
		if (rc && rc != -ENOENT) {
			dt_err_add(err, "%s: cannot remove: %s (it stands where the earlier %s goes aside)",
				   n->aside, strerror(-rc), n->name);
			return rc;
		}
		if (rename(n->final, n->aside) < 0) {
			rc = -errno;
			dt_err_add(err, "%s: cannot move the earlier %s aside: %s", n->final, n->name,
				   strerror(-rc));
			return rc;
		}
		moved = true;
	}
	if (rename(tmp, n->final) < 0) {
		rc = -errno;
		dt_err_add(err, "%s: cannot commit as %s: %s", tmp, n->final, strerror(-rc));
		if (moved)
			rename(n->aside, n->final); /* put the earlier one back */
		return rc;
	}
	if (!is_checked_tmp(n->final, n)) {
		/* tmp was swapped between the check and the rename: what got
		 * committed is not this save; a link is taken back as a link */
		if (lstat(n->final, &st) == 0 && S_ISLNK(st.st_mode))
			unlink(n->final);
		if (moved)
			rename(n->aside, n->final);
		return dt_err_add(err, "%s: cannot commit: replaced as it was renamed to %s (not this save's directory)",
				  tmp, n->final);
	}
	*committed = true;
	rc = dt_fsync_path(dir, true);
	if (rc) {
		dt_err_add(err, "%s: cannot sync: %s (%s is committed)", dir, strerror(-rc), n->name);
		return rc;
	}
	if (moved)
		dt_remove_tree(n->aside); /* if this fails, ckpt_clean_tmp() will */
	return 0;
}

/* dir/latest -> name: a symlink made under a temporary name, then renamed
 * over the old one, so that latest is always whole. */
static int repoint_latest(const char *dir, const char *name, struct dt_err *err)
{
	char tmp[4096], latest[4096];
	int rc = 0;

	if (!join(tmp, sizeof(tmp), dir, LATEST_TMP) ||
	    !join(latest, sizeof(latest), dir, CKPT_LATEST))
		return dt_err_add(err, "%s: path too long", dir);
	if ((unlink(tmp) < 0 && errno != ENOENT) || symlink(name, tmp) < 0 ||
	    rename(tmp, latest) < 0) {
		rc = -errno;
		unlink(tmp);
	}
	if (!rc)
		rc = dt_fsync_path(dir, true);
	if (rc)
		dt_err_add(err, "%s: cannot point to %s: %s (%s is committed)", latest, name,
			   strerror(-rc), name);
	return rc;
}

static int retain(const char *dir, int64_t step, int keep, struct dt_err *err);

int ckpt_commit(const char *dir, const char *tmp, const struct ckpt_meta *meta,
		const struct ckpt_tensor *tensors, int n_tensors, const struct ckpt_file *files,
		int n_files, int keep, bool *committed_out, struct dt_err *err)
{
	struct commit_names n = { .tfd = -1 };
	bool ours = false, committed = false;
	int rc, r;

	if (committed_out)
		*committed_out = false;
	rc = commit_names(dir, tmp, meta->step, &n, &ours, err);
	if (!rc && keep < 1)
		rc = dt_err_add(err, "%s: cannot commit: keep must be at least 1 (got %d)", tmp, keep);
	if (!rc)
		rc = ckpt__check_meta(meta, tensors, n_tensors, tmp, "commit", err);
	if (!rc)
		rc = open_tmp(tmp, &n, err);
	if (!rc)
		rc = check_files(tmp, n.tfd, files, n_files, err);
	if (!rc)
		rc = commit_manifest(tmp, n.tfd, n.manifest, meta, tensors, n_tensors, files, n_files,
				     err);
	if (!rc)
		rc = commit_rename(dir, tmp, &n, &committed, err);
	if (n.tfd >= 0)
		close(n.tfd);
	if (committed_out)
		*committed_out = committed;
	if (!rc) {
		/* 4. for people: latest; then retention. Both are tried. */
		rc = repoint_latest(dir, n.name, err);
		r = retain(dir, meta->step, keep, err);
		if (!rc)
			rc = r;
	}
	if (rc && ours && !committed)
		dt_remove_tree(tmp);
	return rc;
}

/* --- retention --- */

/* A committed checkpoint found in dir. */
struct entry {
	int64_t step;
	char name[32]; /* step-<digits> */
};

/* The step of a committed checkpoint's name, step-<digits>; -1 if not one. */
static int64_t step_of(const char *name)
{
	const char *p = name + 5;
	int64_t v = 0;

	if (strncmp(name, "step-", 5) || !*p || strlen(p) > 18)
		return -1;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
	}
	return v;
}

static int newest_first(const void *a, const void *b)
{
	int64_t x = ((const struct entry *)a)->step, y = ((const struct entry *)b)->step;

	return x > y ? -1 : x < y;
}

/* Deletes the committed checkpoints beyond the newest `keep`, never `step`
 * (just committed). Listed here rather than with ckpt_list() so that a
 * commit depends on nothing that reads checkpoints. */
static int retain(const char *dir, int64_t step, int keep, struct dt_err *err)
{
	char path[4096];
	struct entry *all = NULL, *grown;
	size_t n = 0, cap = 0, i;
	struct dirent *de;
	struct stat st;
	DIR *d;
	int64_t s;
	int rc = 0, r;

	d = opendir(dir);
	if (!d) {
		rc = -errno;
		dt_err_add(err, "%s: cannot list old checkpoints: %s", dir, strerror(-rc));
		return rc;
	}
	while ((de = readdir(d)) != NULL) {
		s = step_of(de->d_name);
		if (s < 0 || !join(path, sizeof(path), dir, de->d_name) || lstat(path, &st) < 0 ||
		    !S_ISDIR(st.st_mode))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			grown = realloc(all, cap * sizeof(*all));
			if (!grown) {
				rc = -ENOMEM;
				dt_err_add(err, "%s: cannot list old checkpoints: out of memory", dir);
				goto out;
			}
			all = grown;
		}
		all[n].step = s;
		memcpy(all[n].name, de->d_name, strlen(de->d_name) + 1); /* step_of: <= 23 */
		n++;
	}
	qsort(all, n, sizeof(*all), newest_first);
	for (i = (size_t)keep; i < n; i++) {
		if (all[i].step == step || !join(path, sizeof(path), dir, all[i].name))
			continue;
		r = dt_remove_tree(path);
		if (r && !rc) {
			rc = r;
			dt_err_add(err, "%s: cannot delete old checkpoint: %s", path, strerror(-r));
		}
	}
out:
	closedir(d);
	free(all);
	return rc;
}
