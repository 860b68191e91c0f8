/*
 * locate.c - from what a user names (a checkpoint, a checkpoint dir, a run
 * directory) to a checkpoint: ckpt_dir_of and ckpt_resolve (ckpt.h), for
 * dtrain-ckpt's commands and the runtime's eval and sample.
 */
#include "checkpoint/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "jobs/spec.h"

static bool join(char *out, size_t size, const char *dir, const char *name)
{
	int n = snprintf(out, size, "%s/%s", dir, name);

	return n >= 0 && (size_t)n < size;
}

static bool present(const char *path, bool want_dir)
{
	struct stat st;

	if (want_dir)
		return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
	return lstat(path, &st) == 0;
}

/* Does dir hold step-<digits> directories, committed or not? */
static bool holds_steps(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	bool found = false;

	if (!d)
		return false;
	while (!found && (e = readdir(d)) != NULL)
		found = !strncmp(e->d_name, "step-", 5) && e->d_name[5] >= '0' && e->d_name[5] <= '9';
	closedir(d);
	return found;
}

void ckpt_dir_of(const char *path, char *out, size_t size, struct dt_err *warn)
{
	struct spec s = { 0 };
	char spec_path[PATH_MAX];

	if (holds_steps(path)) {
		snprintf(out, size, "%s", path);
		return;
	}
	if (!join(out, size, path, "checkpoints") ||
	    !join(spec_path, sizeof(spec_path), path, "spec.json") || !present(spec_path, false))
		return;
	if (spec_load(spec_path, &s, warn)) {
		dt_err_add(warn, "warning: looking for checkpoints in %s", out);
		return;
	}
	if (s.checkpoint.dir)
		snprintf(out, size, "%s", s.checkpoint.dir);
	spec_free(&s);
}

int ckpt_resolve(const char *path, char *out, size_t size, bool *newest, struct dt_err *warn,
		 struct dt_err *err)
{
	char dir[PATH_MAX], manifest[PATH_MAX];
	struct dt_err e = { 0 };
	int64_t *steps = NULL;
	int n = 0;

	*newest = false;
	if (!*path)
		return dt_err_add(err, "an empty path names no checkpoint"), -EINVAL;
	snprintf(out, size, "%s", path);
	if (!present(path, false))
		return dt_err_add(err, "%s: %s", path, strerror(ENOENT)), -ENOENT;
	if (!present(path, true) ||
	    (join(manifest, sizeof(manifest), path, CKPT_MANIFEST) && present(manifest, false)))
		return 0;
	ckpt_dir_of(path, dir, sizeof(dir), warn);
	if (ckpt_list(dir, &steps, &n, &e) == 0 && n > 0) {
		char name[32];

		ckpt_step_name(steps[0], name, sizeof(name));
		*newest = join(out, size, dir, name);
		if (!*newest)
			snprintf(out, size, "%s", path);
	}
	free(steps);
	return 0;
}
