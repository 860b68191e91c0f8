/*
 * test_tokens.c - token streams (runtime/data/tokens.h): a round trip in both
 * stored widths (uint16 up to a vocabulary of 65536, int32 above), reads of
 * any range, and files refused at open or read with a message naming the
 * file: another format, version or vocabulary, a /tokens of the wrong
 * type or rank, too short, and a token past the vocabulary.
 *
 * Sections: helpers, round trips, refusals, main.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <hdf5.h>

#include "runtime/data/tokens.h"
#include "tests/testutil.h"

/* --- helpers --- */

static char *path_of(const char *name)
{
	char *p = NULL;

	assert_true(asprintf(&p, "%s/%s", tu_scratch(), name) > 0);
	return p;
}

/* A file the way a hostile or buggy tool would make it: /tokens of type
 * `type` and rank, the attributes given (NULL or a negative number: left
 * out). */
static void craft(const char *name, hid_t type, int rank, hsize_t n, const char *format,
		  int version, int vocab, int byte_level)
{
	char *path = path_of(name);
	hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), space, set, a, s;
	hsize_t dims[2] = { n, 2 };
	int32_t *zero = calloc((size_t)n * 2, sizeof(int32_t));

	assert_true(file >= 0);
	assert_non_null(zero);
	space = H5Screate_simple(rank, dims, NULL);
	set = H5Dcreate2(file, "tokens", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	assert_true(set >= 0);
	assert_true(H5Dwrite(set, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, zero) >= 0);
	H5Dclose(set);
	H5Sclose(space);
	s = H5Screate(H5S_SCALAR);
	if (format) {
		hid_t str = H5Tcopy(H5T_C_S1);

		H5Tset_size(str, strlen(format));
		a = H5Acreate2(file, "format", str, s, H5P_DEFAULT, H5P_DEFAULT);
		H5Awrite(a, str, format);
		H5Aclose(a);
		a = H5Acreate2(file, "source", str, s, H5P_DEFAULT, H5P_DEFAULT);
		H5Awrite(a, str, format);
		H5Aclose(a);
		H5Tclose(str);
	}
#define INT_ATTR(name, v)                                                                  \
	if ((v) >= 0) {                                                                    \
		int32_t x_ = (v);                                                          \
		a = H5Acreate2(file, name, H5T_NATIVE_INT32, s, H5P_DEFAULT, H5P_DEFAULT); \
		H5Awrite(a, H5T_NATIVE_INT32, &x_);                                        \
		H5Aclose(a);                                                               \
	}
	INT_ATTR("version", version);
	INT_ATTR("vocab_size", vocab);
	INT_ATTR("byte_level", byte_level);
#undef INT_ATTR
	H5Sclose(s);
	H5Fclose(file);
	free(zero);
	free(path);
}

static void refused(const char *name, const char *want)
{
	struct rt_tokens t;
	struct dt_err err = { 0 };
	char *p = path_of(name);

	assert_int_equal(rt_tokens_open(&t, p, &err), -EINVAL);
	if (!tu_has(&err, p) || !tu_has(&err, want))
		fail_msg("%s: want \"%s\", got \"%s\"", name, want, err.msg);
	free(p);
}

/* --- round trips --- */

static void round_trip(int32_t vocab, const char *name)
{
	struct rt_tokens t;
	struct dt_err err = { 0 };
	char *p = path_of(name);
	int32_t tok[1000], got[1000];
	int i;

	for (i = 0; i < 1000; i++)
		tok[i] = (int32_t)(((int64_t)i * 7919) % vocab);
	tok[999] = vocab - 1;
	if (rt_tokens_write(p, tok, 1000, vocab, false, "test: a round trip", &err))
		fail_msg("%s", err.msg);
	if (rt_tokens_open(&t, p, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(t.n, 1000);
	assert_int_equal(t.vocab, vocab);
	assert_false(t.byte_level);
	assert_string_equal(t.source, "test: a round trip");
	assert_int_equal(rt_tokens_read(&t, 0, 1000, got, &err), 0);
	assert_memory_equal(got, tok, sizeof(tok));
	assert_int_equal(rt_tokens_read(&t, 990, 10, got, &err), 0);
	assert_memory_equal(got, tok + 990, 10 * sizeof(int32_t));
	assert_int_equal(rt_tokens_read(&t, 995, 10, got, &err), -EINVAL);
	assert_true(tu_has(&err, "tokens [995, 1005) are outside the stream's 1000"));
	rt_tokens_close(&t);
	rt_tokens_close(&t); /* twice is harmless */
	assert_true(rt_tokens_is_stream(p));
	free(p);
}

static void test_round_trip(void **state)
{
	(void)state;
	round_trip(256, "u16.h5");
	round_trip(65536, "u16max.h5");
	round_trip(100000, "i32.h5"); /* ids past 65535: stored as int32 */
}

static void test_write_refusals(void **state)
{
	struct dt_err err = { 0 };
	int32_t tok[3] = { 1, 2, 300 };
	char *p = path_of("never.h5");

	(void)state;
	assert_int_equal(rt_tokens_write(p, tok, 3, 256, true, "x", &err), -EINVAL);
	assert_true(tu_has(&err, "token 2 is 300, outside the vocabulary [0, 256)"));
	assert_int_equal(rt_tokens_write(p, tok, 1, 256, true, "x", &err), -EINVAL);
	assert_false(rt_tokens_is_stream(p));
	free(p);
}

/* Windows of T + 1 tokens tile the stream with one token of overlap:
 * every token but the last is a target exactly once, the short tail is
 * left out; reading them gives the stream's tokens. */
static void test_windows(void **state)
{
	struct rt_tokens t;
	struct dt_err err = { 0 };
	char *p = path_of("win.h5");
	int32_t tok[103], out[3 * 11];
	int64_t idx[3] = { 9, 0, 4 }, bad = 10;
	int i, k, targets[103] = { 0 };

	(void)state;
	for (i = 0; i < 103; i++)
		tok[i] = (i * 13) % 256;
	assert_int_equal(rt_tokens_write(p, tok, 103, 256, true, "windows", &err), 0);
	assert_int_equal(rt_tokens_open(&t, p, &err), 0);
	assert_int_equal(rt_tokens_windows(&t, 10), 10); /* (103 - 1) / 10 */
	assert_int_equal(rt_tokens_windows(&t, 102), 1);
	assert_int_equal(rt_tokens_windows(&t, 103), 0);
	assert_int_equal(rt_tokens_windows(&t, 0), 0);
	assert_int_equal(rt_tokens_read_windows(&t, 10, idx, 3, out, &err), 0);
	for (k = 0; k < 3; k++)
		assert_memory_equal(out + k * 11, tok + idx[k] * 10, 11 * sizeof(int32_t));
	for (k = 0; k < 10; k++)
		for (i = 1; i <= 10; i++)
			targets[k * 10 + i]++;
	for (i = 1; i <= 100; i++)
		assert_int_equal(targets[i], 1);
	assert_int_equal(rt_tokens_read_windows(&t, 10, &bad, 1, out, &err), -EINVAL);
	assert_true(tu_has(&err, "window 10 does not exist (10 windows of 10 + 1 tokens)"));
	rt_tokens_close(&t);
	free(p);
}

/* --- refusals --- */

static void test_open_refusals(void **state)
{
	struct rt_tokens t;
	struct dt_err err = { 0 };
	int32_t got[4];
	char *p;

	(void)state;
	craft("fmt.h5", H5T_STD_U16LE, 1, 10, "dtrain-dataset", 1, 256, 1);
	refused("fmt.h5", "not a dtrain token stream (attribute format must be \"dtrain-tokens\")");
	craft("nofmt.h5", H5T_STD_U16LE, 1, 10, NULL, 1, 256, 1);
	refused("nofmt.h5", "not a dtrain token stream");
	craft("ver.h5", H5T_STD_U16LE, 1, 10, "dtrain-tokens", 2, 256, 1);
	refused("ver.h5", "attribute version must be 1 (got 2)");
	craft("vocab.h5", H5T_STD_U16LE, 1, 10, "dtrain-tokens", 1, 1, 0);
	refused("vocab.h5", "attribute vocab_size must be an integer in [2, 16777216]");
	craft("novocab.h5", H5T_STD_U16LE, 1, 10, "dtrain-tokens", 1, -1, 0);
	refused("novocab.h5", "attribute vocab_size");
	craft("bytes.h5", H5T_STD_U16LE, 1, 10, "dtrain-tokens", 1, 300, 1);
	refused("bytes.h5", "attribute byte_level must be 0, or 1 with vocab_size 256");
	craft("float.h5", H5T_IEEE_F32LE, 1, 10, "dtrain-tokens", 1, 256, 1);
	refused("float.h5", "/tokens must be a one-dimensional integer dataset");
	craft("rank2.h5", H5T_STD_U16LE, 2, 10, "dtrain-tokens", 1, 256, 1);
	refused("rank2.h5", "/tokens must be a one-dimensional integer dataset");
	craft("one.h5", H5T_STD_U16LE, 1, 1, "dtrain-tokens", 1, 256, 1);
	refused("one.h5", "/tokens has 1 tokens (2 .. 2^46)");
	p = path_of("text.h5");
	tu_write_path(p, "not HDF5\n", 0644);
	refused("text.h5", "not an HDF5 file");
	free(p);
	p = path_of("nothere.h5");
	assert_int_equal(rt_tokens_open(&t, p, &err), -ENOENT);
	assert_true(tu_has(&err, "nothere.h5: cannot open: No such file or directory"));
	free(p);

	/* a token past the vocabulary: refused when read, naming its index */
	craft("wide.h5", H5T_STD_U16LE, 1, 4, "dtrain-tokens", 1, 256, 1);
	{
		hid_t file, set;
		int32_t v[4] = { 1, 2, 999, 3 };

		p = path_of("wide.h5");
		file = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
		set = H5Dopen2(file, "tokens", H5P_DEFAULT);
		assert_true(H5Dwrite(set, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
		H5Dclose(set);
		H5Fclose(file);
	}
	assert_int_equal(rt_tokens_open(&t, p, &err), 0);
	assert_int_equal(rt_tokens_read(&t, 0, 2, got, &err), 0);
	assert_int_equal(rt_tokens_read(&t, 0, 4, got, &err), -EINVAL);
	assert_true(tu_has(&err, "wide.h5: /tokens: token 2 is 999, outside the vocabulary [0, 256)"));
	rt_tokens_close(&t);
	free(p);
}

/* --- main --- */

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_write_refusals),
		cmocka_unit_test(test_windows),
		cmocka_unit_test(test_open_refusals),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	tu_cleanup();
	return rc;
}
