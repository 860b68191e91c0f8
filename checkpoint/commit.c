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
 * others can plant a symbolic link under any name a save uses, the
 * directory's own included. Every name is reached relative to the
 * directory held open (struct ckpt_dir, ckpt__dir_get), never through its
 * path again. A save's tmp directory is made afresh there (ckpt_tmp_make)
 * and held; its files are opened relative to it without following a link
 * (ckpt__tmp_file); the commit checks that the directory it renames is the
 * one whose files it checked; leftovers and old checkpoints are removed as
 * themselves (dt_remove_tree_at: a link as a link); latest is replaced by
 * renameat, never followed. A link the save did not make is refused, named.
 *
 * Sections: names, the directories, cleaning up, the tmp directory,
 * checking the files, the commit, retention.
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

/* ".step-<8 digits>.tmp", the tmp directory's name in the checkpoint
 * directory, into out [48]. */
static void tmp_name(int64_t step, char out[48])
{
	char name[32];

	ckpt_step_name(step, name, sizeof(name));
	snprintf(out, 48, ".%s.tmp", name);
}

/* --- the directories --- */

int ckpt__dir_get(const struct ckpt_dir *d, bool follow)
{
	int fd;

	/* "." of the held directory: the same directory, a fresh offset for
	 * readdir, nothing resolved by its path */
	if (d->fd >= 0)
		fd = openat(d->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	else if (follow)
		fd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	else
		return dt_dir_open_nofollow(d->path);
	return fd < 0 ? -errno : fd;
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

int ckpt_clean_tmp(const struct ckpt_dir *dir, struct dt_err *err)
{
	struct dirent *de;
	struct stat st;
	DIR *d = NULL;
	int dfd, rc = 0, r;

	dfd = ckpt__dir_get(dir, true);
	if (dfd == -ENOENT)
		return 0;
	if (dfd >= 0 && !(d = fdopendir(dfd))) {
		rc = -errno;
		close(dfd);
		dfd = rc;
	}
	if (dfd < 0) {
		dt_err_add(err, "%s: cannot list checkpoint directory: %s", dir->path, strerror(-dfd));
		return dfd;
	}
	while ((de = readdir(d)) != NULL) {
		if (!is_tmp_name(de->d_name))
			continue;
		/* a directory of an unfinished save, or a link planted under such
		 * a name: removed as a link, its target untouched. A regular file
		 * is not ours to remove (a save's mkdir refuses it) */
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !(S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode)))
			continue;
		r = dt_remove_tree_at(dfd, de->d_name);
		if (r && !rc) {
			rc = r;
			dt_err_add(err, "%s/%s: cannot remove unfinished checkpoint: %s", dir->path,
				   de->d_name, strerror(-r));
		}
	}
	closedir(d);
	return rc;
}

/* --- the tmp directory --- */

int ckpt_tmp_make(const struct ckpt_dir *dir, int64_t step, int *fd, struct dt_err *err)
{
	char tmp[4096], name[48];
	int dfd, rc;

	ckpt_tmp_path(dir->path, step, tmp, sizeof(tmp));
	tmp_name(step, name);
	if (strlen(tmp) + 1 >= sizeof(tmp))
		return dt_err_add(err, "%s: path too long", dir->path);
	dfd = ckpt__dir_get(dir, true);
	if (dfd < 0)
		return dt_err_add(err, "%s: cannot create: %s", tmp, strerror(-dfd)), dfd;
	/* this step's leftover (a failed save's): never through a link */
	rc = dt_remove_tree_at(dfd, name);
	if (rc && rc != -ENOENT) {
		dt_err_add(err, "%s: cannot remove an unfinished save: %s", tmp, strerror(-rc));
		goto out;
	}
	/* in the directory held, never made again by its path: one removed
	 * meanwhile is an error, not a save into wherever the path leads now */
	rc = mkdirat(dfd, name, 0755) < 0 ? -errno : 0;
	if (!rc && fd && (*fd = dt_dir_open_at(dfd, name, -1)) < 0)
		rc = *fd;
	if (rc == -EEXIST || rc == -ELOOP)
		dt_err_add(err, "%s: cannot create: something else took the name as this save removed it (refusing to write into what this save did not make)",
			   tmp);
	else if (rc)
		dt_err_add(err, "%s: cannot create: %s", tmp, strerror(-rc));
out:
	close(dfd);
	return rc;
}

int ckpt_tmp_open(const struct ckpt_dir *dir, int64_t step, int *fd, struct dt_err *err)
{
	char tmp[4096], name[48];
	int dfd;

	ckpt_tmp_path(dir->path, step, tmp, sizeof(tmp));
	tmp_name(step, name);
	dfd = ckpt__dir_get(dir, true);
	if (dfd < 0)
		return dt_err_add(err, "%s: cannot open: %s", tmp, strerror(-dfd)), dfd;
	*fd = dt_dir_open_at(dfd, name, 0755);
	close(dfd);
	if (*fd < 0)
		dt_err_add(err, "%s: cannot open: %s", tmp, *fd == -ELOOP ? LINK_WHY : strerror(-*fd));
	return *fd < 0 ? *fd : 0;
}

int ckpt_tmp_remove(const struct ckpt_dir *dir, const struct ckpt_dir *tmp)
{
	const char *name = tmp->path ? strrchr(tmp->path, '/') : NULL;
	struct stat mine, there;
	int dfd, rc;

	/* only a directory this save holds: with none (ckpt_tmp_make failed,
	 * e.g. something else took the name), nothing of this save is there */
	if (tmp->fd < 0 || !name || fstat(tmp->fd, &mine) < 0)
		return -ESTALE;
	dfd = ckpt__dir_get(dir, true);
	if (dfd < 0)
		return dfd;
	/* by name in the directory held, and only while the name is still the
	 * very directory held (not followed: a link is never this save's) */
	if (fstatat(dfd, name + 1, &there, AT_SYMLINK_NOFOLLOW) < 0)
		rc = -errno;
	else if (!S_ISDIR(there.st_mode) || there.st_dev != mine.st_dev ||
		 there.st_ino != mine.st_ino)
		rc = -ESTALE;
	else
		rc = dt_remove_tree_at(dfd, name + 1);
	close(dfd);
	return rc;
}

int ckpt__tmp_file(const struct ckpt_dir *tmp, const char *name, int flags, const char *doing,
		   struct dt_err *err)
{
	struct stat st;
	int dfd, fd = -1;

	if (!*name || strchr(name, '/'))
		return dt_err_add(err, "%s/%s: %s: not a file of a save's directory", tmp->path, name,
				  doing);
	dfd = ckpt__dir_get(tmp, false);
	if (dfd == -ELOOP)
		return dt_err_add(err, "%s/%s: %s: %s is %s", tmp->path, name, doing, tmp->path,
				  LINK_WHY), -ELOOP;
	if (dfd < 0) {
		dt_err_add(err, "%s/%s: %s: %s", tmp->path, name, doing, strerror(-dfd));
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
		dt_err_add(err, "%s/%s: %s: %s", tmp->path, name, doing, LINK_WHY);
	else if (fd < 0)
		dt_err_add(err, "%s/%s: %s: %s", tmp->path, name, doing, strerror(-fd));
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
	char tmp[48];        /* .step-<8 digits>.tmp */
	char aside[48];      /* .step-<8 digits>.old.tmp: an earlier commit of the step */
	char final[4096];    /* dir/step-<8 digits>, for messages */
	char manifest[4096]; /* tmp/MANIFEST.json, for messages */
	int dfd;             /* the checkpoint directory; -1 */
	int tfd;             /* tmp, opened without following a link; -1 */
	struct stat tst;     /* its identity: what the rename must move */
};

/* The names of the commit of step from tmp into dir. tmp must be the
 * directory of a save of that step: *ours is set once it is (the commit
 * removes it on failure, so only ever one of ours). */
static int commit_names(const struct ckpt_dir *dir, const char *tmp, int64_t step,
			struct commit_names *n, bool *ours, struct dt_err *err)
{
	const char *base = strrchr(tmp, '/');

	ckpt_step_name(step, n->name, sizeof(n->name));
	tmp_name(step, n->tmp);
	snprintf(n->aside, sizeof(n->aside), ".%s.old.tmp", n->name);
	base = base ? base + 1 : tmp;
	if (strcmp(base, n->tmp))
		return dt_err_add(err, "%s: cannot commit: not the directory of a save of step %lld (want %s)",
				  tmp, (long long)step, n->tmp);
	*ours = true;
	if (strlen(dir->path) + 64 >= sizeof(n->final) ||
	    !join(n->manifest, sizeof(n->manifest), tmp, CKPT_MANIFEST))
		return dt_err_add(err, "%s: path too long", dir->path);
	ckpt_final_path(dir->path, step, n->final, sizeof(n->final));
	n->dfd = ckpt__dir_get(dir, true);
	if (n->dfd < 0)
		return dt_err_add(err, "%s: cannot commit: %s", dir->path, strerror(-n->dfd)), n->dfd;
	return 0;
}

/* tmp (its last component not followed), open in n->tfd, its identity in
 * n->tst; a link is refused. */
static int open_tmp(const struct ckpt_dir *tmp, struct commit_names *n, struct dt_err *err)
{
	int fd = ckpt__dir_get(tmp, false), rc = 0;

	if (fd < 0)
		rc = fd;
	else if (fstat(fd, &n->tst) < 0)
		rc = -errno;
	else
		n->tfd = fd;
	if (rc) {
		dt_err_add(err, "%s: cannot commit: %s", tmp->path,
			   rc == -ELOOP ? LINK_WHY : strerror(-rc));
		if (fd >= 0)
			close(fd);
	}
	return rc;
}

/* Is the entry name of the checkpoint directory (not followed) the
 * directory n->tfd holds? */
static bool is_checked_tmp(const char *name, const struct commit_names *n)
{
	struct stat st;

	return fstatat(n->dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
	       st.st_dev == n->tst.st_dev && st.st_ino == n->tst.st_ino;
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

/* fsync of a directory open at fd; some file systems cannot (EINVAL). */
static int sync_dir(int fd)
{
	int rc = dt_fsync_fd(fd);

	return rc == -EINVAL ? 0 : rc;
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
		rc = sync_dir(tfd);
		if (rc)
			dt_err_add(err, "%s: cannot sync: %s", tmp, strerror(-rc));
	}
	dt_buf_free(&text);
	return rc;
}

/* Steps 2 and 3: the same step committed by an earlier attempt (before a
 * requeue) goes aside under a name ckpt_clean_tmp() knows until the new
 * one is in place (a directory, moved and later removed as itself, never
 * followed; a link there is the user's, a checkpoint linked in, and the
 * commit is refused, naming it); then the commit point, the rename of
 * the very directory whose files were checked (*committed), made durable.
 * Every name is one of the checkpoint directory held in n->dfd. */
static int commit_rename(const char *dir, const char *tmp, const struct commit_names *n,
			 bool *committed, struct dt_err *err)
{
	struct stat st;
	bool moved = false;
	int rc, dfd = n->dfd;

	if (!is_checked_tmp(n->tmp, n))
		return dt_err_add(err, "%s: cannot commit: no longer the directory whose files were checked (replaced meanwhile)",
				  tmp);
	if (fstatat(dfd, n->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
		/* a checkpoint linked here (a data-versioning tree): the user's,
		 * neither replaced nor removed */
		return dt_err_add(err, "%s: cannot commit: a symbolic link stands under this step's name (a checkpoint linked here?), which this save leaves alone (hint: move it out of %s)",
				  n->final, dir), -EEXIST;
	if (fstatat(dfd, n->name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		/* an earlier commit of this step; a crash's leftover (usually
		 * none) at the aside name goes as itself */
		rc = dt_remove_tree_at(dfd, n->aside);
		if (rc && rc != -ENOENT) {
			dt_err_add(err, "%s/%s: cannot remove: %s (it stands where the earlier %s goes aside)",
				   dir, n->aside, strerror(-rc), n->name);
			return rc;
		}
		if (renameat(dfd, n->name, dfd, n->aside) < 0) {
			rc = -errno;
			dt_err_add(err, "%s: cannot move the earlier %s aside: %s", n->final, n->name,
				   strerror(-rc));
			return rc;
		}
		moved = true;
	}
	if (renameat(dfd, n->tmp, dfd, n->name) < 0) {
		rc = -errno;
		dt_err_add(err, "%s: cannot commit as %s: %s", tmp, n->final, strerror(-rc));
		if (moved)
			renameat(dfd, n->aside, dfd, n->name); /* put the earlier one back */
		return rc;
	}
	if (!is_checked_tmp(n->name, n)) {
		/* tmp was swapped between the check and the rename: what got
		 * committed is not this save; a link is taken back as a link */
		if (fstatat(dfd, n->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
			unlinkat(dfd, n->name, 0);
		if (moved)
			renameat(dfd, n->aside, dfd, n->name);
		return dt_err_add(err, "%s: cannot commit: replaced as it was renamed to %s (not this save's directory)",
				  tmp, n->final);
	}
	*committed = true;
	rc = sync_dir(dfd);
	if (rc) {
		dt_err_add(err, "%s: cannot sync: %s (%s is committed)", dir, strerror(-rc), n->name);
		return rc;
	}
	if (moved)
		dt_remove_tree_at(dfd, n->aside); /* if this fails, ckpt_clean_tmp() will */
	return 0;
}

/* latest -> name in the checkpoint directory open at dfd: a symlink made
 * under a temporary name, then renamed over the old one, so that latest
 * is always whole. */
static int repoint_latest(int dfd, const char *dir, const char *name, struct dt_err *err)
{
	int rc = 0;

	if ((unlinkat(dfd, LATEST_TMP, 0) < 0 && errno != ENOENT) ||
	    symlinkat(name, dfd, LATEST_TMP) < 0 || renameat(dfd, LATEST_TMP, dfd, CKPT_LATEST) < 0) {
		rc = -errno;
		unlinkat(dfd, LATEST_TMP, 0);
	}
	if (!rc)
		rc = sync_dir(dfd);
	if (rc)
		dt_err_add(err, "%s/%s: cannot point to %s: %s (%s is committed)", dir, CKPT_LATEST,
			   name, strerror(-rc), name);
	return rc;
}

static int retain(int dfd, const char *dir, int64_t step, int keep, struct dt_err *err);

int ckpt_commit(const struct ckpt_dir *dir, const struct ckpt_dir *tmp,
		const struct ckpt_meta *meta, const struct ckpt_tensor *tensors, int n_tensors,
		const struct ckpt_file *files, int n_files, int keep, bool *committed_out,
		struct dt_err *err)
{
	struct commit_names n = { .dfd = -1, .tfd = -1 };
	bool ours = false, committed = false;
	int rc, r;

	if (committed_out)
		*committed_out = false;
	rc = commit_names(dir, tmp->path, meta->step, &n, &ours, err);
	if (!rc && keep < 1)
		rc = dt_err_add(err, "%s: cannot commit: keep must be at least 1 (got %d)", tmp->path,
				keep);
	if (!rc)
		rc = ckpt__check_meta(meta, tensors, n_tensors, tmp->path, "commit", err);
	if (!rc)
		rc = open_tmp(tmp, &n, err);
	if (!rc)
		rc = check_files(tmp->path, n.tfd, files, n_files, err);
	if (!rc)
		rc = commit_manifest(tmp->path, n.tfd, n.manifest, meta, tensors, n_tensors, files,
				     n_files, err);
	if (!rc)
		rc = commit_rename(dir->path, tmp->path, &n, &committed, err);
	if (committed_out)
		*committed_out = committed;
	if (!rc) {
		/* 4. for people: latest; then retention. Both are tried. */
		rc = repoint_latest(n.dfd, dir->path, n.name, err);
		r = retain(n.dfd, dir->path, meta->step, keep, err);
		if (!rc)
			rc = r;
	}
	/* ours, by name in the directory held: only the one whose files were
	 * checked, or, before that, whatever ckpt_tmp_make made there */
	if (rc && ours && !committed && n.dfd >= 0 && (n.tfd < 0 || is_checked_tmp(n.tmp, &n)))
		dt_remove_tree_at(n.dfd, n.tmp);
	if (n.tfd >= 0)
		close(n.tfd);
	if (n.dfd >= 0)
		close(n.dfd);
	return rc;
}

/* --- retention --- */

/* A committed checkpoint found in dir. */
struct entry {
	int64_t step;
	char name[32]; /* step-<digits> */
};

/* The step of a committed checkpoint's name as ckpt_step_name() makes it,
 * step-<8 digits>; -1 if not one (step-12 is not: no save made it). */
static int64_t step_of(const char *name)
{
	const char *p = name + 5;
	char canon[32];
	int64_t v = 0;

	if (strncmp(name, "step-", 5) || !*p || strlen(p) > 18)
		return -1;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
	}
	ckpt_step_name(v, canon, sizeof(canon));
	return strcmp(canon, name) ? -1 : v;
}

static int newest_first(const void *a, const void *b)
{
	int64_t x = ((const struct entry *)a)->step, y = ((const struct entry *)b)->step;

	return x > y ? -1 : x < y;
}

/* The committed checkpoints of the directory listed by d (at dfd) that
 * saves made: its step-<8 digits> directories, not followed, into *all
 * [*n] (caller frees). A link under such a name (a checkpoint linked in
 * from a data-versioning tree, which readers follow) is the user's: it
 * neither counts toward keep nor is deleted. */
static int list_steps(DIR *d, int dfd, const char *dir, struct entry **all, size_t *n,
		      struct dt_err *err)
{
	struct entry *grown;
	struct dirent *de;
	struct stat st;
	size_t cap = 0;
	int64_t s;

	while ((de = readdir(d)) != NULL) {
		s = step_of(de->d_name);
		if (s < 0 || fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode))
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 16;
			grown = realloc(*all, cap * sizeof(**all));
			if (!grown) {
				dt_err_add(err, "%s: cannot list old checkpoints: out of memory", dir);
				return -ENOMEM;
			}
			*all = grown;
		}
		(*all)[*n].step = s;
		memcpy((*all)[*n].name, de->d_name, strlen(de->d_name) + 1); /* step_of: <= 23 */
		(*n)++;
	}
	return 0;
}

/* Deletes the committed checkpoints beyond the newest `keep`, never `step`
 * (just committed): directories of the checkpoint directory held at dfd
 * only, each removed as itself (dt_remove_tree_at: a link is never
 * followed); links are left alone (list_steps).
 * Listed here rather than with ckpt_list() so that a commit depends on
 * nothing that reads checkpoints. */
static int retain(int dfd, const char *dir, int64_t step, int keep, struct dt_err *err)
{
	struct entry *all = NULL;
	size_t n = 0, i;
	DIR *d = NULL;
	int fd, rc, r;

	fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || !(d = fdopendir(fd))) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		dt_err_add(err, "%s: cannot list old checkpoints: %s", dir, strerror(-rc));
		return rc;
	}
	rc = list_steps(d, dfd, dir, &all, &n, err);
	if (rc)
		n = 0;
	qsort(all, n, sizeof(*all), newest_first);
	for (i = (size_t)keep; i < n; i++) {
		if (all[i].step == step)
			continue;
		r = dt_remove_tree_at(dfd, all[i].name);
		if (r && r != -ENOENT && !rc) {
			rc = r;
			dt_err_add(err, "%s/%s: cannot delete old checkpoint: %s", dir, all[i].name,
				   strerror(-r));
		}
	}
	closedir(d);
	free(all);
	return rc;
}
