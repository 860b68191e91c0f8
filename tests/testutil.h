/*
 * testutil.h - helpers shared by the unit tests: a scratch directory per
 * test program and files written into it.
 */
#ifndef DTRAIN_TESTS_TESTUTIL_H
#define DTRAIN_TESTS_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/err.h"
#include "base/io.h"

/* A fresh directory under $TMPDIR (or /tmp), removed by tu_cleanup(). */
static char tu_dir[256];

static inline const char *tu_scratch(void)
{
	if (!tu_dir[0]) {
		const char *tmp = getenv("TMPDIR");

		snprintf(tu_dir, sizeof(tu_dir), "%s/dtrain-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(tu_dir)) {
			perror("mkdtemp");
			abort();
		}
	}
	return tu_dir;
}

/* Writes text to path (any directory) with the given permission bits;
 * aborts the test program on failure. */
static inline void tu_write_path(const char *path, const char *text, int mode)
{
	if (dt_write_file_atomic(path, text, strlen(text), mode) || chmod(path, (mode_t)mode)) {
		perror(path);
		abort();
	}
}

/* The whole file (caller frees), or NULL when it cannot be read. */
static inline char *tu_read(const char *path, size_t *len)
{
	char *text = NULL;

	return dt_read_file(path, &text, len) ? NULL : text;
}

/* Writes text to <scratch>/name and returns the path (static buffer, one
 * per call site is enough for these tests: copy it if you need two). */
static inline const char *tu_write(const char *name, const char *text)
{
	static char path[512];

	snprintf(path, sizeof(path), "%s/%s", tu_scratch(), name);
	tu_write_path(path, text, 0644);
	return path;
}

static inline void tu_cleanup(void)
{
	if (tu_dir[0])
		dt_remove_tree(tu_dir);
	tu_dir[0] = '\0';
}

/* A cmocka group teardown that removes the scratch directory:
 * cmocka_run_group_tests(tests, setup, tu_teardown). */
static inline int tu_teardown(void **state)
{
	(void)state;
	tu_cleanup();
	return 0;
}

/* Does the error report contain this text? Prints the report if not. */
static inline int tu_has(const struct dt_err *e, const char *needle)
{
	if (strstr(e->msg, needle))
		return 1;
	fprintf(stderr, "error report lacks \"%s\"; it reads:\n%s\n", needle, e->msg);
	return 0;
}

#endif
