/*
 * test_json.c - dt_json_quote (base/json.h): any string becomes one JSON
 * string that json-c reads back as it was, but bytes of no UTF-8 character,
 * which become U+FFFD, so that a metrics line stays one valid line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "base/json.h"

/* s quoted, then parsed back as the value of {"v": ...} */
static char *round_trip(const char *s)
{
	char *q = dt_json_quote(s), line[512], *back;
	struct json_object *o = NULL, *v;
	struct dt_json_error e;

	assert_non_null(q);
	snprintf(line, sizeof(line), "{\"v\":%s}", q);
	assert_int_equal(dt_json_parse_object(line, strlen(line), 4, &o, &e), 0);
	assert_true(json_object_object_get_ex(o, "v", &v));
	back = strdup(json_object_get_string(v));
	json_object_put(o);
	free(q);
	return back;
}

static void test_forged_event_stays_a_string(void **state)
{
	const char *path = "/runs/c\",\"step\":999999,\"event\":\"stop\\ \n\t\x1b[2J caf\xc3\xa9 \xf0\x9f\x99\x82";
	char *back = round_trip(path);

	(void)state;
	assert_string_equal(back, path);
	free(back);
}

static void test_bytes_of_no_character(void **state)
{
	/* a stray continuation byte, an overlong form, a surrogate, a cut
	 * sequence, 0xff */
	char *back = round_trip("a\x80" "b\xc0\xaf" "c\xed\xa0\x80" "d\xe2\x82" "e\xff");

	(void)state;
	assert_string_equal(back, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd" "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
				  "d\xef\xbf\xbd\xef\xbf\xbd" "e\xef\xbf\xbd");
	free(back);
	assert_null(dt_json_quote(NULL));
	assert_string_equal(dt_json_or_null(NULL), "null");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forged_event_stays_a_string),
		cmocka_unit_test(test_bytes_of_no_character),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
