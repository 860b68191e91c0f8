/*
 * path.c - paths: joining, normalising, the executable's directory (path.h).
 */
#include "base/path.h"

#include "base/buf.h"
#include "base/str.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
