/*
 * test_progress.c - a job's progress from its metrics.jsonl, as `status`
 * shows it: launch_progress_read() on files written into a scratch dir, and
 * launch_progress_format().
 *
 * Sections: fixtures, reading, large files, formatting.
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
#include <sys/stat.h>

#include "launcher/cli.h"
#include "base/err.h"
#include "base/buf.h"
#include "tests/testutil.h"

/* --- fixtures --- */

#define START "{\"event\":\"start\",\"total_steps\":9380,\"steps_per_epoch\":938,\"epochs\":10}\n"

/* A step line as dtrain-run writes it (epoch: of the step just done). */
static void add_step(struct dt_buf *b, long long step, double loss)
{
	assert_int_equal(dt_buf_printf(b, "{\"event\":\"step\",\"step\":%lld,\"total_steps\":9380,"
				       "\"epoch\":%lld,\"loss\":%.9g,\"lr\":0.05,\"grad_norm\":1.2,"
				       "\"samples_per_s\":12345.6,\"eta_s\":420}\n",
				       step, (step - 1) / 938 + 1, loss), 0);
}

static void add_eval(struct dt_buf *b, long long step, double acc)
{
	assert_int_equal(dt_buf_printf(b, "{\"event\":\"eval\",\"step\":%lld,\"epoch\":%lld,"
				       "\"test_loss\":0.41,\"test_accuracy\":%.6f}\n",
				       step, step / 938, acc), 0);
}

/* Steps from..to (every one logged) until b holds at least min_len bytes. */
static long long add_steps_until(struct dt_buf *b, long long from, size_t min_len)
{
	long long s = from;

	while (b->len < min_len)
		add_step(b, s++, 0.25);
	return s - 1;
}

/* Write text as <scratch>/name, read it back. */
static int read_text(const char *name, const char *text, struct launch_progress *p,
		     struct dt_err *err)
{
	return launch_progress_read(tu_write(name, text), p, err);
}

static void expect_no_progress(const struct launch_progress *p)
{
	struct launch_progress_text t;

	assert_false(p->has_step);
	assert_false(p->has_eval);
	launch_progress_format(p, true, &t);
	assert_string_equal(t.step, "-");
	assert_string_equal(t.epoch, "-");
	assert_string_equal(t.loss, "-");
	assert_string_equal(t.acc, "-");
	assert_string_equal(t.rate, "-");
	assert_string_equal(t.eta, "-");
}

/* --- reading --- */

static void test_normal(void **state)
{
	struct launch_progress p;
	struct launch_progress_text t;
	struct dt_err err = {0};

	(void)state;
	assert_int_equal(read_text("normal.jsonl",
		START
		"{\"event\":\"step\",\"step\":100,\"total_steps\":9380,\"epoch\":1,\"loss\":0.6,\"lr\":0.05,\"grad_norm\":1.3,\"samples_per_s\":11000,\"eta_s\":500}\n"
		"{\"event\":\"eval\",\"step\":100,\"epoch\":1,\"test_loss\":0.41,\"test_accuracy\":0.8512}\n"
		"{\"event\":\"step\",\"step\":120,\"total_steps\":9380,\"epoch\":1,\"loss\":0.51234,\"lr\":0.05,\"grad_norm\":1.2,\"samples_per_s\":12345.6,\"eta_s\":420}\n",
		&p, &err), 0);
	assert_true(p.has_step);
	assert_int_equal(p.step, 120);
	assert_int_equal(p.total_steps, 9380);
	assert_int_equal(p.epoch, 1);
	assert_int_equal(p.epochs, 10);
	assert_float_equal(p.loss, 0.51234, 1e-12);
	assert_float_equal(p.samples_per_s, 12345.6, 1e-9);
	assert_float_equal(p.eta_s, 420, 0);
	assert_false(p.step_stale);
	assert_false(p.ended);
	assert_true(p.has_eval);
	assert_int_equal(p.eval_step, 100);
	assert_float_equal(p.test_accuracy, 0.8512, 1e-12);
	assert_float_equal(p.test_loss, 0.41, 1e-12);

	launch_progress_format(&p, true, &t);
	assert_string_equal(t.step, "120/9380");
	assert_string_equal(t.epoch, "1/10");
	assert_string_equal(t.loss, "0.5123");
	assert_string_equal(t.acc, "85.12%");
	assert_string_equal(t.rate, "12346");
	assert_string_equal(t.eta, "00:07:00");
	/* Not running (pending, ended in Slurm): no ETA, the rest stays. */
	launch_progress_format(&p, false, &t);
	assert_string_equal(t.eta, "-");
	assert_string_equal(t.step, "120/9380");
	assert_int_equal(err.count, 0);
}

/* A language model's events: tokens/s, and bits per byte with the test loss. */
static void test_language_model(void **state)
{
	struct launch_progress p;
	struct launch_progress_text t;
	struct dt_err err = {0};

	(void)state;
	assert_int_equal(read_text("lm.jsonl",
		START
		"{\"event\":\"step\",\"step\":600,\"total_steps\":600,\"epoch\":1,\"loss\":2.3478,\"lr\":0.0002,\"grad_norm\":1.7,\"samples_per_s\":182.8,\"tokens_per_s\":23402.1,\"eta_s\":0}\n"
		"{\"event\":\"eval\",\"step\":600,\"epoch\":1,\"test_loss\":2.2861,\"test_accuracy\":0.3461,\"bits_per_byte\":3.298111}\n",
		&p, &err), 0);
	assert_float_equal(p.tokens_per_s, 23402.1, 1e-9);
	assert_float_equal(p.bits_per_byte, 3.298111, 1e-12);
	launch_progress_format(&p, true, &t);
	assert_string_equal(t.tokens, "23402");
	assert_string_equal(t.test_loss, "2.286 (step 600), 3.298 bits/byte");
	assert_string_equal(t.acc, "34.61%");
	assert_int_equal(err.count, 0);
}

/* The best evaluation: the lowest test loss over the whole file, not the
 * last; junk and a torn last line skipped; a missing file is none */
static void test_best(void **state)
{
	struct launch_best b;
	struct dt_err err = {0};
	struct dt_buf text = {0};

	(void)state;
	assert_int_equal(dt_buf_puts(&text, START), 0);
	add_step(&text, 1, 5.0);
	assert_int_equal(dt_buf_puts(&text,
		"{\"event\":\"eval\",\"step\":250,\"test_loss\":2.5,\"test_accuracy\":0.2,\"bits_per_byte\":3.6,\"unix_time\":1700000000.5}\n"
		"not json \"eval\"\n"
		"{\"event\":\"eval\",\"step\":500,\"test_loss\":2.25,\"test_accuracy\":0.3,\"bits_per_byte\":3.2,\"unix_time\":1700000100}\n"
		"{\"event\":\"eval\",\"step\":750,\"test_loss\":2.4,\"test_accuracy\":0.31}\n"
		"{\"event\":\"eval\",\"step\":1000,\"test_loss\":1.0"), 0);
	assert_int_equal(launch_progress_best(tu_write("best.jsonl", text.p), &b, &err), 0);
	assert_true(b.has);
	assert_int_equal(b.step, 500);
	assert_float_equal(b.test_loss, 2.25, 0);
	assert_float_equal(b.bits_per_byte, 3.2, 0);
	assert_float_equal(b.test_accuracy, 0.3, 0);
	assert_float_equal(b.unix_time, 1700000100.0, 0);
	assert_int_equal(launch_progress_best(tu_write("none.jsonl", START), &b, &err), 0);
	assert_false(b.has);
	assert_int_equal(launch_progress_best("/nonexistent/metrics.jsonl", &b, &err), 0);
	assert_false(b.has);
	assert_int_equal(err.count, 0);
	dt_buf_free(&text);
}

static void test_torn_last_line(void **state)
{
	struct launch_progress p;
	struct dt_err err = {0};

	(void)state;
	/* Cut mid-object: dtrain-run is writing it now. */
	assert_int_equal(read_text("torn.jsonl",
		START
		"{\"event\":\"step\",\"step\":120,\"total_steps\":9380,\"epoch\":1,\"loss\":0.5}\n"
		"{\"event\":\"step\",\"step\":130,\"total_st",
		&p, &err), 0);
	assert_true(p.has_step);
	assert_int_equal(p.step, 120);
	/* Whole object but no '\n' yet: a line is only complete with its '\n'. */
	assert_int_equal(read_text("torn2.jsonl",
		START
		"{\"event\":\"step\",\"step\":120,\"total_steps\":9380,\"epoch\":1,\"loss\":0.5}\n"
		"{\"event\":\"step\",\"step\":130,\"total_steps\":9380,\"epoch\":1,\"loss\":0.4}",
		&p, &err), 0);
	assert_int_equal(p.step, 120);
	/* Only a torn line. */
	assert_int_equal(read_text("torn3.jsonl", "{\"event\":\"step\",\"step\":1", &p, &err), 0);
	expect_no_progress(&p);
	assert_int_equal(err.count, 0);
}

static void test_unknown_events_and_junk(void **state)
{
	struct launch_progress p;
	struct launch_progress_text t;
	struct dt_err err = {0};

	(void)state;
	assert_int_equal(read_text("unknown.jsonl",
		START
		"{\"event\":\"step\",\"step\":120,\"total_steps\":9380,\"epoch\":1,\"loss\":0.5,\"extra\":{\"nested\":[1,2,{\"event\":\"end\"}]},\"samples_per_s\":100}\n"
		"{\"event\":\"checkpoint\",\"step\":120,\"path\":\"ckpt/120\"}\n"
		"{\"event\":\"eval_extra\",\"step\":121,\"test_accuracy\":0.1}\n"
		"{\"step\":999,\"loss\":9}\n"
		"{\"event\":\"step\"}\n"
		"{\"event\":\"step\",\"step\":\"130\"}\n"
		"{\"event\":7,\"step\":140}\n"
		"not json at all\n"
		"[{\"event\":\"step\",\"step\":150}]\n"
		"{\"event\":\"step\",\"step\":160} trailing\n"
		"\n"
		"\r\n",
		&p, &err), 0);
	assert_true(p.has_step);
	assert_int_equal(p.step, 120);
	assert_false(p.has_eval);
	assert_false(p.ended);
	launch_progress_format(&p, true, &t);
	assert_string_equal(t.step, "120/9380");
	assert_string_equal(t.loss, "0.5");
	assert_string_equal(t.acc, "-");
	assert_string_equal(t.rate, "100");
	assert_string_equal(t.eta, "-"); /* the step had no eta_s */
	assert_int_equal(err.count, 0);
}

static void test_empty_and_missing(void **state)
{
	struct launch_progress p;
	struct dt_err err = {0};
	char path[600];

	(void)state;
	assert_int_equal(read_text("empty.jsonl", "", &p, &err), 0);
	expect_no_progress(&p);
	snprintf(path, sizeof(path), "%s/no-such.jsonl", tu_scratch());
	assert_int_equal(launch_progress_read(path, &p, &err), 0);
	expect_no_progress(&p);
	snprintf(path, sizeof(path), "%s/no-such-dir/metrics.jsonl", tu_scratch());
	assert_int_equal(launch_progress_read(path, &p, &err), 0);
	expect_no_progress(&p);
	assert_int_equal(err.count, 0);
}

static void test_only_start(void **state)
{
	struct launch_progress p;
	struct dt_err err = {0};

	(void)state;
	assert_int_equal(read_text("start.jsonl", START, &p, &err), 0);
	expect_no_progress(&p);
	assert_int_equal(p.epochs, 10);
	assert_false(p.ended);
}

static void test_requeued(void **state)
{
	struct launch_progress p;
	struct launch_progress_text t;
	struct dt_buf b = {0};
	struct dt_err err = {0};

	(void)state;
	/* The first run got to step 500 (an eval at 469), was requeued, and the
	 * second run has not logged a step yet: the last step stands, but its
	 * ETA belonged to the first run. */
	assert_int_equal(dt_buf_puts(&b, START), 0);
	add_step(&b, 400, 0.3);
	add_eval(&b, 469, 0.9);
	add_step(&b, 500, 0.2);
	assert_int_equal(dt_buf_puts(&b, START), 0);
	assert_int_equal(read_text("requeued1.jsonl", b.p, &p, &err), 0);
	assert_true(p.has_step);
	assert_int_equal(p.step, 500);
	assert_true(p.step_stale);
	assert_true(p.has_eval);
	assert_int_equal(p.eval_step, 469);
	launch_progress_format(&p, true, &t);
	assert_string_equal(t.step, "500/9380");
	assert_string_equal(t.acc, "90.00%");
	assert_string_equal(t.eta, "-");

	/* The second run resumed from its checkpoint at 400 and went on. */
	add_step(&b, 450, 0.21);
	assert_int_equal(read_text("requeued2.jsonl", b.p, &p, &err), 0);
	assert_int_equal(p.step, 450);
	assert_false(p.step_stale);
	assert_int_equal(p.eval_step, 469); /* the first run's: still the last one */
	launch_progress_format(&p, true, &t);
	assert_string_equal(t.step, "450/9380");
	assert_string_equal(t.eta, "00:07:00");

	/* The first run ended... and a new start makes it not ended. */
	dt_buf_free(&b);
	assert_int_equal(dt_buf_puts(&b, START), 0);
	add_step(&b, 9380, 0.1);
	assert_int_equal(dt_buf_puts(&b, "{\"event\":\"end\",\"step\":9380,\"seconds\":512.3}\n"), 0);
	assert_int_equal(read_text("ended.jsonl", b.p, &p, &err), 0);
	assert_true(p.ended);
	launch_progress_format(&p, true, &t);
	assert_string_equal(t.eta, "-");
	assert_string_equal(t.step, "9380/9380");
	assert_string_equal(t.epoch, "10/10");
	assert_int_equal(dt_buf_puts(&b, "{\"event\":\"start\",\"total_steps\":9380,\"steps_per_epoch\":938,\"epochs\":12}\n"), 0);
	assert_int_equal(read_text("restarted.jsonl", b.p, &p, &err), 0);
	assert_false(p.ended);
	assert_true(p.step_stale);
	assert_int_equal(p.epochs, 12); /* the last start's */
	assert_int_equal(err.count, 0);
	dt_buf_free(&b);
}

static void test_unreadable(void **state)
{
	struct launch_progress p;
	struct dt_err err = {0};
	char path[600];

	(void)state;
	snprintf(path, sizeof(path), "%s/a-dir.jsonl", tu_scratch());
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(launch_progress_read(path, &p, &err), -EISDIR);
	assert_true(tu_has(&err, "a-dir.jsonl: cannot read: Is a directory"));
	assert_false(p.has_step);
}

/* --- large files --- */

static void test_eval_within_scan(void **state)
{
	struct launch_progress p;
	struct dt_buf b = {0};
	struct dt_err err = {0};
	long long last;

	(void)state;
	/* The eval is ~300 KiB before the end: several chunks back, found. */
	assert_int_equal(dt_buf_puts(&b, START), 0);
	add_step(&b, 1, 2.0);
	add_eval(&b, 1, 0.5);
	last = add_steps_until(&b, 2, 300 * 1024);
	assert_int_equal(read_text("eval300k.jsonl", b.p, &p, &err), 0);
	assert_int_equal(p.step, last);
	assert_true(p.has_eval);
	assert_int_equal(p.eval_step, 1);
	assert_int_equal(p.epochs, 10);
	assert_int_equal(err.count, 0);
	dt_buf_free(&b);
}

static void test_eval_older_than_scan(void **state)
{
	struct launch_progress p;
	struct launch_progress_text t;
	struct dt_buf b = {0};
	struct dt_err err = {0};
	char want[64];
	long long last;

	(void)state;
	/* More than LAUNCH_PROGRESS_SCAN_MAX of steps after the eval: it is not
	 * looked for that far, ACC is "-". The start is as far back: the
	 * number of epochs comes from the head of the file. */
	assert_int_equal(dt_buf_puts(&b, START), 0);
	add_eval(&b, 0, 0.5);
	last = add_steps_until(&b, 1, LAUNCH_PROGRESS_SCAN_MAX + 4096);
	assert_int_equal(read_text("evalold.jsonl", b.p, &p, &err), 0);
	assert_true(p.has_step);
	assert_int_equal(p.step, last);
	assert_false(p.has_eval);
	assert_int_equal(p.epochs, 10);
	launch_progress_format(&p, true, &t);
	assert_string_equal(t.acc, "-");
	snprintf(want, sizeof(want), "%lld/10", (last - 1) / 938 + 1);
	assert_string_equal(t.epoch, want);
	assert_string_equal(t.loss, "0.25");
	assert_int_equal(err.count, 0);
	dt_buf_free(&b);
}

static void test_long_line(void **state)
{
	struct launch_progress p;
	struct dt_buf b = {0};
	struct dt_err err = {0};
	size_t i;

	(void)state;
	/* A line longer than a chunk between the eval and the last step is
	 * skipped whole; lines on either side are read. */
	assert_int_equal(dt_buf_puts(&b, START), 0);
	add_eval(&b, 7, 0.75);
	assert_int_equal(dt_buf_puts(&b, "{\"event\":\"note\",\"text\":\""), 0);
	for (i = 0; i < 3 * LAUNCH_PROGRESS_CHUNK / 2; i++)
		assert_int_equal(dt_buf_puts(&b, "x"), 0);
	assert_int_equal(dt_buf_puts(&b, "\"}\n"), 0);
	add_step(&b, 8, 0.5);
	assert_int_equal(read_text("longline.jsonl", b.p, &p, &err), 0);
	assert_int_equal(p.step, 8);
	assert_true(p.has_eval);
	assert_int_equal(p.eval_step, 7);
	/* A line longer than a chunk at the end: the last chunk holds only
	 * its '\n'. */
	dt_buf_free(&b);
	assert_int_equal(dt_buf_puts(&b, START), 0);
	add_eval(&b, 7, 0.75);
	assert_int_equal(dt_buf_puts(&b, "{\"event\":\"note\",\"text\":\""), 0);
	while (b.len < LAUNCH_PROGRESS_CHUNK * 2 - 3)
		assert_int_equal(dt_buf_puts(&b, "y"), 0);
	assert_int_equal(dt_buf_puts(&b, "\"}\n"), 0);
	assert_int_equal(read_text("chunkline.jsonl", b.p, &p, &err), 0);
	assert_false(p.has_step);
	assert_true(p.has_eval);
	assert_int_equal(err.count, 0);
	dt_buf_free(&b);
}

/* Chunk edges fall at every place in a line: the result never changes. */
static void test_chunk_edges(void **state)
{
	struct launch_progress p;
	struct dt_err err = {0};
	int pad;

	(void)state;
	for (pad = 0; pad < 200; pad += 7) {
		struct dt_buf b = {0};
		long long last;
		int i;

		assert_int_equal(dt_buf_puts(&b, START), 0);
		add_eval(&b, 3, 0.5);
		for (i = 0; i < pad; i++)
			assert_int_equal(dt_buf_puts(&b, " "), 0);
		assert_int_equal(dt_buf_puts(&b, "{\"event\":\"pad\"}\n"), 0);
		last = add_steps_until(&b, 4, 2 * LAUNCH_PROGRESS_CHUNK + (size_t)pad * 13);
		assert_int_equal(read_text("edges.jsonl", b.p, &p, &err), 0);
		assert_int_equal(p.step, last);
		assert_true(p.has_eval);
		assert_int_equal(p.eval_step, 3);
		dt_buf_free(&b);
	}
	assert_int_equal(err.count, 0);
}

/* --- formatting --- */

static void test_format(void **state)
{
	struct launch_progress p = { .has_step = true, .step = 120, .loss = 1.23456,
				     .samples_per_s = NAN, .eta_s = 3725.4, .test_accuracy = NAN,
				     .epoch = 1 };
	struct launch_progress_text t;

	(void)state;
	launch_progress_format(&p, true, &t);
	assert_string_equal(t.step, "120");   /* total unknown */
	assert_string_equal(t.epoch, "1");    /* epochs unknown */
	assert_string_equal(t.loss, "1.235"); /* 4 significant digits */
	assert_string_equal(t.rate, "-");
	assert_string_equal(t.acc, "-");
	assert_string_equal(t.eta, "01:02:05");
	p.loss = 0.000123456;
	p.eta_s = 400000;
	p.has_eval = true;
	p.test_accuracy = 1.0;
	launch_progress_format(&p, true, &t);
	assert_string_equal(t.loss, "0.0001235");
	assert_string_equal(t.eta, "111:06:40");
	assert_string_equal(t.acc, "100.00%");
	p.eta_s = -1;
	p.loss = NAN;
	launch_progress_format(&p, true, &t);
	assert_string_equal(t.eta, "-");
	assert_string_equal(t.loss, "-");
	p.eta_s = 10;
	p.step_stale = true;
	launch_progress_format(&p, true, &t);
	assert_string_equal(t.eta, "-");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_normal),
		cmocka_unit_test(test_language_model),
		cmocka_unit_test(test_best),
		cmocka_unit_test(test_torn_last_line),
		cmocka_unit_test(test_unknown_events_and_junk),
		cmocka_unit_test(test_empty_and_missing),
		cmocka_unit_test(test_only_start),
		cmocka_unit_test(test_requeued),
		cmocka_unit_test(test_unreadable),
		cmocka_unit_test(test_eval_within_scan),
		cmocka_unit_test(test_eval_older_than_scan),
		cmocka_unit_test(test_long_line),
		cmocka_unit_test(test_chunk_edges),
		cmocka_unit_test(test_format),
	};

	return cmocka_run_group_tests(tests, NULL, tu_teardown);
}
