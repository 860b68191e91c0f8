/*
 * test_safetensors.c - the safetensors reader and writer (#37's import and
 * export): a written file reads back bitwise with its shapes and metadata
 * and its data 8-byte aligned; F16 and BF16 widen exactly (subnormals,
 * infinities); hostile files are refused naming the fault: shorter than the
 * length field, a header longer than the file, offsets past the end, begin
 * after end, a size that does not match the shape, overlapping tensors, an
 * unhandled dtype, a header that is not JSON.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/safetensors.h"
#include "tests/testutil.h"

/* A file of an 8-byte length (claimed, or the header's own when 0), the
 * header and the data bytes. */
static const char *raw_file(const char *name, const char *header, unsigned long long claimed,
			    const unsigned char *data, size_t n)
{
	static char path[512];
	unsigned long long len = claimed ? claimed : strlen(header);
	unsigned char len8[8];
	FILE *f;
	int i;

	snprintf(path, sizeof(path), "%s/%s", tu_scratch(), name);
	for (i = 0; i < 8; i++)
		len8[i] = (unsigned char)(len >> (8 * i));
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(len8, 1, 8, f), 8);
	assert_int_equal(fwrite(header, 1, strlen(header), f), strlen(header));
	if (n)
		assert_int_equal(fwrite(data, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
	return path;
}

static void expect_refused(const char *path, const char *needle)
{
	struct st_file f;
	struct dt_err err = {0};

	assert_int_equal(st_open(path, &f, &err), -EINVAL);
	if (!strstr(err.msg, needle))
		fprintf(stderr, "expected \"%s\" in: %s\n", needle, err.msg);
	assert_non_null(strstr(err.msg, needle));
	assert_non_null(strstr(err.msg, path));
	st_close(&f);
}

static void test_round_trip(void **state)
{
	float a[6] = { 1.5f, -0.0f, 3e-40f, INFINITY, -7.25f, 1e30f }, b[4] = { 0.1f, 0.2f, 0.3f, 0.4f };
	float got[6];
	struct st_out t[2] = { { "h.0.attn.c_attn.weight", a, 2, { 2, 3 } }, { "wpe.weight", b, 1, { 4 } } };
	const char *meta[] = { "format", "pt", "dtrain", "test" };
	char path[512];
	struct st_file f;
	struct dt_err err = {0};
	const struct st_tensor *x;

	(void)state;
	snprintf(path, sizeof(path), "%s/rt.safetensors", tu_scratch());
	assert_int_equal(st_write(path, t, 2, meta, 2, &err), 0);
	assert_int_equal(st_open(path, &f, &err), 0);
	assert_int_equal(f.n, 2);
	assert_int_equal(f.data_start % 8, 0);
	assert_string_equal(st_meta(&f, "format"), "pt");
	assert_string_equal(st_meta(&f, "dtrain"), "test");
	assert_null(st_meta(&f, "nope"));
	x = st_find(&f, "h.0.attn.c_attn.weight");
	assert_non_null(x);
	assert_int_equal(x->ndim, 2);
	assert_int_equal(x->shape[0], 2);
	assert_int_equal(x->shape[1], 3);
	assert_int_equal(st_read_f32(&f, x, got, &err), 0);
	assert_memory_equal(got, a, sizeof(a));
	x = st_find(&f, "wpe.weight");
	assert_non_null(x);
	assert_int_equal(st_read_f32(&f, x, got, &err), 0);
	assert_memory_equal(got, b, sizeof(b));
	assert_null(st_find(&f, "wte.weight"));
	assert_int_equal(err.count, 0);
	st_close(&f);
}

static void test_half_widths(void **state)
{
	/* F16: 1, -2, 2^-24 (the smallest subnormal), +inf; BF16: 1, -3 */
	const unsigned char data[] = { 0x00, 0x3c, 0x00, 0xc0, 0x01, 0x00, 0x00, 0x7c,
				       0x80, 0x3f, 0x40, 0xc0 };
	const char *path = raw_file("half.safetensors",
				    "{\"a\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]},"
				    "\"b\":{\"dtype\":\"BF16\",\"shape\":[1,2],\"data_offsets\":[8,12]}}",
				    0, data, sizeof(data));
	struct st_file f;
	struct dt_err err = {0};
	float v[4];

	(void)state;
	assert_int_equal(st_open(path, &f, &err), 0);
	assert_int_equal(st_read_f32(&f, st_find(&f, "a"), v, &err), 0);
	assert_true(v[0] == 1.0f && v[1] == -2.0f && v[2] == 0x1p-24f && isinf(v[3]) && v[3] > 0);
	assert_int_equal(st_read_f32(&f, st_find(&f, "b"), v, &err), 0);
	assert_true(v[0] == 1.0f && v[1] == -3.0f);
	st_close(&f);
}

static void test_hostile(void **state)
{
	const unsigned char z[16] = { 0 };
	const char *one = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
	char path[512];
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "%s/short.safetensors", tu_scratch());
	f = fopen(path, "wb");
	assert_non_null(f);
	fputs("abc", f);
	fclose(f);
	expect_refused(path, "shorter than its 8-byte header length");
	expect_refused(raw_file("long.safetensors", one, 4096, z, 8), "the header is 4096 bytes long");
	expect_refused(raw_file("past.safetensors", one, 0, z, 4), "past the file's 4 bytes of data");
	expect_refused(raw_file("order.safetensors",
				"{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 0, z, 8),
		       "begin <= end");
	expect_refused(raw_file("size.safetensors",
				"{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 0, z, 16),
		       "8 bytes of data for 3 elements of 4 bytes");
	expect_refused(raw_file("overlap.safetensors",
				"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
				"\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 0, z, 16),
		       "overlap");
	expect_refused(raw_file("dtype.safetensors",
				"{\"w\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 0, z, 8),
		       "dtype I64 is not handled");
	expect_refused(raw_file("json.safetensors", "{\"w\": [1, 2", 0, z, 8), "not a JSON object");
	expect_refused(raw_file("shape.safetensors",
				"{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 0, z, 8),
		       "shape[0] is not a non-negative integer");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_half_widths),
		cmocka_unit_test(test_hostile),
	};

	return cmocka_run_group_tests(tests, NULL, tu_teardown);
}
