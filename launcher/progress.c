/*
 * progress.c - a job's training progress for `dtrain-submit status`, from
 * the metrics.jsonl that dtrain-run appends to (the format is in cli.h).
 *
 * The file grows by one line per logged step for the whole run, so it is
 * read backwards from its end in chunks, newest line first, and the scan
 * stops as soon as the last step and the last eval are known (or after
 * LAUNCH_PROGRESS_SCAN_MAX bytes). Lines are handed to json-c one by one.
 *
 * Sections: reading, one line, backward scan, head, formatting.
 */
#include "launcher/cli.h"
#include "launcher/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#define HEAD_BYTES 4096 /* the first lines, for the number of epochs */

/* --- reading --- */

/* pread until len bytes or the end of the file, retrying EINTR. Bytes read
 * (fewer at the end of the file) or -errno. */
static ssize_t pread_full(int fd, char *buf, size_t len, off_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = pread(fd, buf + got, len - got, off + (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* --- one line --- */

/* State of the backward scan: lines arrive newest first. */
struct scan {
	struct launch_progress *p;
	json_tokener *tok;
	bool seen_start; /* a start newer than everything still to come */
	bool has_epochs;
};

static bool get_num(json_object *o, const char *key, double *v)
{
	json_object *x;

	if (!json_object_object_get_ex(o, key, &x) ||
	    !(json_object_is_type(x, json_type_int) || json_object_is_type(x, json_type_double)))
		return false;
	*v = json_object_get_double(x);
	return true;
}

static long long get_count(json_object *o, const char *key)
{
	double v;

	return get_num(o, key, &v) && v >= 0 && v < 9e18 ? (long long)v : 0;
}

static double get_double(json_object *o, const char *key)
{
	double v;

	return get_num(o, key, &v) ? v : NAN;
}

static const char *event_of(json_object *o)
{
	json_object *x;

	if (!json_object_object_get_ex(o, "event", &x) || !json_object_is_type(x, json_type_string))
		return "";
	return json_object_get_string(x);
}

/* Take in one line, newer than every line still to come. */
static void scan_line(struct scan *s, const char *line, size_t len)
{
	struct launch_progress *p = s->p;
	json_object *o;
	const char *ev;
	double step;

	/* Once the last step is known only an eval or a start can add
	 * anything: skip the step lines that make up most of the file unparsed. */
	if (p->has_step && !memmem(line, len, "\"eval\"", 6) &&
	    (s->has_epochs || !memmem(line, len, "\"start\"", 7)))
		return;
	o = launch__json_line(s->tok, line, len);
	if (!o)
		return;
	ev = event_of(o);
	if (!strcmp(ev, "start")) {
		if (!s->has_epochs && (p->epochs = get_count(o, "epochs")) > 0)
			s->has_epochs = true;
		if (!s->seen_start)
			p->steps_per_epoch = get_count(o, "steps_per_epoch");
		s->seen_start = true;
	} else if (!strcmp(ev, "end")) {
		if (!s->seen_start)
			p->ended = true;
	} else if (!strcmp(ev, "step") && !p->has_step && get_num(o, "step", &step)) {
		p->has_step = true;
		p->step = get_count(o, "step");
		p->total_steps = get_count(o, "total_steps");
		p->epoch = get_count(o, "epoch");
		p->loss = get_double(o, "loss");
		p->samples_per_s = get_double(o, "samples_per_s");
		p->tokens_per_s = get_double(o, "tokens_per_s");
		p->eta_s = get_double(o, "eta_s");
		p->step_stale = s->seen_start;
	} else if (!strcmp(ev, "eval") && !p->has_eval) {
		p->has_eval = true;
		p->eval_step = get_count(o, "step");
		p->test_loss = get_double(o, "test_loss");
		p->test_accuracy = get_double(o, "test_accuracy");
		p->bits_per_byte = get_double(o, "bits_per_byte");
	}
	json_object_put(o);
}

/* --- backward scan --- */

/* Feed the complete lines of buf (file bytes [lo, lo+len)) to the scan,
 * newest first, and return where the next (older) chunk must end. A line is
 * complete when its '\n' is in buf and so is its start (or lo is 0). The
 * bytes after the last '\n' are dropped: at the end of the file a line still
 * being written, elsewhere the rest of a line longer than a chunk. */
static off_t scan_chunk(struct scan *s, const char *buf, size_t len, off_t lo)
{
	const char *first = memchr(buf, '\n', len);
	const char *end, *nl;
	off_t next;

	if (!first)
		return lo; /* inside one over-long line: skip it all */
	end = memrchr(buf, '\n', len);
	/* Lines after the first '\n', newest first. */
	while (end > first) {
		nl = memrchr(first, '\n', (size_t)(end - first));
		scan_line(s, nl + 1, (size_t)(end - nl - 1));
		end = nl;
	}
	/* The line before it is whole only at the start of the file; else the
	 * next chunk reads it again, whole. */
	if (lo == 0) {
		scan_line(s, buf, (size_t)(first - buf));
		return 0;
	}
	next = lo + (off_t)(first - buf) + 1;
	/* One line fills the whole chunk: too long, skip it. */
	return next == lo + (off_t)len ? lo : next;
}

/* --- the best evaluation --- */

static int best_fn(void *ctx, json_object *o)
{
	struct launch_best *out = ctx;
	double loss;

	if (!strcmp(event_of(o), "eval") && get_num(o, "test_loss", &loss) && !isnan(loss) &&
	    (!out->has || loss < out->test_loss)) {
		out->has = true;
		out->step = get_count(o, "step");
		out->test_loss = loss;
		out->bits_per_byte = get_double(o, "bits_per_byte");
		out->test_accuracy = get_double(o, "test_accuracy");
		out->unix_time = get_double(o, "unix_time");
	}
	return 0;
}

int launch_progress_best(const char *path, struct launch_best *out, struct dt_err *err)
{
	int rc;

	*out = (struct launch_best){ .test_loss = NAN, .bits_per_byte = NAN, .test_accuracy = NAN,
				     .unix_time = NAN };
	rc = launch__jsonl_each(path, "\"eval\"", best_fn, out, NULL, err);
	return rc == -ENOENT ? 0 : rc; /* no metrics yet: no best */
}

/* --- head --- */

/* The number of epochs from the first start event in the first lines. */
static int read_epochs_from_head(int fd, struct scan *s)
{
	char buf[HEAD_BYTES];
	const char *line = buf, *nl;
	ssize_t n;

	n = pread_full(fd, buf, sizeof(buf), 0);
	if (n < 0)
		return (int)n;
	while ((nl = memchr(line, '\n', (size_t)(buf + n - line))) != NULL) {
		json_object *o = launch__json_line(s->tok, line, (size_t)(nl - line));

		if (o && !strcmp(event_of(o), "start"))
			s->p->epochs = get_count(o, "epochs");
		json_object_put(o);
		if (s->p->epochs > 0)
			break;
		line = nl + 1;
	}
	return 0;
}

int launch_progress_read(const char *path, struct launch_progress *out, struct dt_err *err)
{
	struct scan s = { .p = out };
	struct stat st;
	char *buf = NULL;
	off_t hi, scanned = 0;
	int fd = -1, rc = 0;

	*out = (struct launch_progress){ .loss = NAN, .samples_per_s = NAN, .eta_s = NAN,
					 .test_loss = NAN, .test_accuracy = NAN,
					 .bits_per_byte = NAN, .tokens_per_s = NAN };
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			goto out; /* no metrics yet: no progress */
		rc = -errno;
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto out;
	}
	buf = malloc(LAUNCH_PROGRESS_CHUNK);
	s.tok = json_tokener_new();
	if (!buf || !s.tok) {
		rc = -ENOMEM;
		goto out;
	}
	hi = st.st_size;
	/* an ended run: on to its newest start, for its steps per epoch (a resume's check) */
	while (hi > 0 && scanned < LAUNCH_PROGRESS_SCAN_MAX &&
	       !(out->has_step && out->has_eval && (s.seen_start || !out->ended))) {
		off_t lo = hi > LAUNCH_PROGRESS_CHUNK ? hi - LAUNCH_PROGRESS_CHUNK : 0;
		ssize_t n = pread_full(fd, buf, (size_t)(hi - lo), lo);

		if (n < 0) {
			rc = (int)n;
			goto out;
		}
		if (n == 0)
			break; /* truncated under us */
		scanned += n;
		hi = scan_chunk(&s, buf, (size_t)n, lo);
	}
	if (hi > 0 && !s.has_epochs)
		rc = read_epochs_from_head(fd, &s);
out:
	if (rc == -ENOMEM)
		dt_err_add(err, "%s: out of memory", path);
	else if (rc)
		dt_err_add(err, "%s: cannot read: %s", path, strerror(-rc));
	if (s.tok)
		json_tokener_free(s.tok);
	free(buf);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* --- formatting --- */

static void fmt_hms(double s, char *buf, size_t size)
{
	long long t = (long long)(s + 0.5);

	snprintf(buf, size, "%02lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
}

void launch_progress_format(const struct launch_progress *p, bool running,
			    struct launch_progress_text *out)
{
	strcpy(out->step, "-");
	strcpy(out->epoch, "-");
	strcpy(out->loss, "-");
	strcpy(out->acc, "-");
	strcpy(out->rate, "-");
	strcpy(out->eta, "-");
	strcpy(out->test_loss, "-");
	strcpy(out->tokens, "-");
	if (p->has_eval && isfinite(p->test_loss) && isfinite(p->bits_per_byte))
		snprintf(out->test_loss, sizeof(out->test_loss), "%.4g (step %lld), %.4g bits/byte",
			 p->test_loss, p->eval_step, p->bits_per_byte);
	else if (p->has_eval && isfinite(p->test_loss))
		snprintf(out->test_loss, sizeof(out->test_loss), "%.4g (step %lld)", p->test_loss,
			 p->eval_step);
	if (!p->has_step)
		return;
	if (p->total_steps > 0)
		snprintf(out->step, sizeof(out->step), "%lld/%lld", p->step, p->total_steps);
	else
		snprintf(out->step, sizeof(out->step), "%lld", p->step);
	if (p->epoch > 0 && p->epochs > 0)
		snprintf(out->epoch, sizeof(out->epoch), "%lld/%lld", p->epoch, p->epochs);
	else if (p->epoch > 0)
		snprintf(out->epoch, sizeof(out->epoch), "%lld", p->epoch);
	if (isfinite(p->loss))
		snprintf(out->loss, sizeof(out->loss), "%.4g", p->loss);
	if (p->has_eval && isfinite(p->test_accuracy))
		snprintf(out->acc, sizeof(out->acc), "%.2f%%", 100.0 * p->test_accuracy);
	if (isfinite(p->samples_per_s) && p->samples_per_s >= 0 && p->samples_per_s < 1e15)
		snprintf(out->rate, sizeof(out->rate), "%.0f", p->samples_per_s);
	if (isfinite(p->tokens_per_s) && p->tokens_per_s >= 0 && p->tokens_per_s < 1e15)
		snprintf(out->tokens, sizeof(out->tokens), "%.0f", p->tokens_per_s);
	/* An ETA is only an ETA while the run it was estimated in goes on. */
	if (running && !p->ended && !p->step_stale && isfinite(p->eta_s) && p->eta_s >= 0 &&
	    p->eta_s < 1e12)
		fmt_hms(p->eta_s, out->eta, sizeof(out->eta));
}
