/*
 * test_io.c - base/io.h: rm -r that never follows a symbolic link (a link
 * planted at the tree's root or anywhere below it is removed as a link, its
 * target left whole), a directory opened in another without following
 * one, and an atomic write that never writes through a planted link.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/io.h"
#include "tests/testutil.h"

static char *path_in(const char *name)
{
	static char buf[4][512];
	static int next;
	char *p = buf[next++ % 4];

	snprintf(p, sizeof(buf[0]), "%s/%s", tu_scratch(), name);
	return p;
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* A victim directory of two files and a subdirectory, outside any tree
 * being removed. */
static void make_victim(const char *dir)
{
	char p[600];

	assert_int_equal(dt_mkdirs(dir, 0755), 0);
	snprintf(p, sizeof(p), "%s/a", dir);
	tu_write_path(p, "keep me", 0644);
	snprintf(p, sizeof(p), "%s/sub", dir);
	assert_int_equal(dt_mkdirs(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/sub/b", dir);
	tu_write_path(p, "keep me too", 0644);
}

static void assert_victim_whole(const char *dir)
{
	char p[600];

	snprintf(p, sizeof(p), "%s/a", dir);
	assert_true(exists(p));
	snprintf(p, sizeof(p), "%s/sub/b", dir);
	assert_true(exists(p));
}

static void test_remove_tree_plain(void **state)
{
	const char *tree = path_in("plain");
	char p[600];

	(void)state;
	snprintf(p, sizeof(p), "%s/x/y/z", tree);
	assert_int_equal(dt_mkdirs(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/x/y/z/f", tree);
	tu_write_path(p, "data", 0644);
	snprintf(p, sizeof(p), "%s/g", tree);
	tu_write_path(p, "data", 0644);
	assert_int_equal(dt_remove_tree(tree), 0);
	assert_false(exists(tree));
	assert_int_equal(dt_remove_tree(tree), -ENOENT);
}

/* The root itself a link to the victim: the link goes, the victim stays. */
static void test_remove_tree_root_link(void **state)
{
	const char *victim = path_in("victim1"), *link = path_in("root-link");

	(void)state;
	make_victim(victim);
	assert_int_equal(symlink(victim, link), 0);
	assert_int_equal(dt_remove_tree(link), 0);
	assert_false(exists(link));
	assert_victim_whole(victim);
}

/* Links below the root, to a directory and to a file: removed as links. */
static void test_remove_tree_inner_links(void **state)
{
	const char *victim = path_in("victim2"), *tree = path_in("tree");
	char p[600], q[600];

	(void)state;
	make_victim(victim);
	snprintf(p, sizeof(p), "%s/d", tree);
	assert_int_equal(dt_mkdirs(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/d/to-dir", tree);
	assert_int_equal(symlink(victim, p), 0);
	snprintf(p, sizeof(p), "%s/to-file", tree);
	snprintf(q, sizeof(q), "%s/a", victim);
	assert_int_equal(symlink(q, p), 0);
	assert_int_equal(dt_remove_tree(tree), 0);
	assert_false(exists(tree));
	assert_victim_whole(victim);
}

static void test_remove_tree_file(void **state)
{
	const char *f = tu_write("lone-file", "x");

	(void)state;
	assert_int_equal(dt_remove_tree(f), 0);
	assert_false(exists(f));
}

/* dt_dir_open_in: made when missing, opened when there, a link refused. */
static void test_dir_open_in(void **state)
{
	const char *victim = path_in("victim3");
	char p[600];
	int fd;

	(void)state;
	make_victim(victim);
	fd = dt_dir_open_in(tu_scratch(), "made", 0755);
	assert_true(fd >= 0);
	close(fd);
	assert_true(exists(path_in("made")));
	fd = dt_dir_open_in(tu_scratch(), "made", 0755);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(symlink(victim, path_in("linked")), 0);
	assert_int_equal(dt_dir_open_in(tu_scratch(), "linked", 0755), -ELOOP);
	tu_write("a-file", "x");
	assert_int_equal(dt_dir_open_in(tu_scratch(), "a-file", 0755), -ENOTDIR);
	snprintf(p, sizeof(p), "%s/missing-parent", tu_scratch());
	assert_int_equal(dt_dir_open_in(p, "x", 0755), -ENOENT);
	assert_victim_whole(victim);
}

/* dt_write_file_atomic: a link planted at its predictable temporary name
 * (path.tmp.<pid>) is not written through; the victim keeps its content. */
static void test_atomic_write_planted_link(void **state)
{
	const char *victim = tu_write("victim-file", "precious\n");
	char path[600], tmp[700], *text;
	size_t len;

	(void)state;
	snprintf(path, sizeof(path), "%s/written", tu_scratch());
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	assert_int_equal(symlink(victim, tmp), 0);
	assert_int_equal(dt_write_file_atomic(path, "new\n", 4, 0644), 0);
	text = tu_read(victim, &len);
	assert_non_null(text);
	assert_string_equal(text, "precious\n");
	free(text);
	text = tu_read(path, &len);
	assert_non_null(text);
	assert_string_equal(text, "new\n");
	free(text);
	assert_false(exists(tmp));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_remove_tree_plain),
		cmocka_unit_test(test_remove_tree_root_link),
		cmocka_unit_test(test_remove_tree_inner_links),
		cmocka_unit_test(test_remove_tree_file),
		cmocka_unit_test(test_dir_open_in),
		cmocka_unit_test(test_atomic_write_planted_link),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	dt_remove_tree(tu_scratch());
	return rc;
}
