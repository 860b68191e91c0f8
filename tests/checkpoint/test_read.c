/*
 * test_read.c - the read side of checkpoints (checkpoint/ckpt.h): manifests
 * both ways (format 1 still read), verifying, finding the latest usable
 * checkpoint, reading tensors back exactly (also a sharded optimizer's
 * state, in pieces of rows), export and inspect; and every kind of damaged or hostile
 * checkpoint refused with an error naming the file, never read out of
 * bounds (run the sanitizer build too).
 *
 * Checkpoints are written with the module's own write API. Hostile shards
 * are crafted with the raw HDF5 API, and the manifest is then rewritten so
 * that its size and CRC match them: the checks on datasets must hold even
 * when the checksums agree.
 *
 * Sections: helpers, manifests, round trips, damage, finding the latest,
 * hostile shards, export and inspect, main.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <hdf5.h>
#include <json-c/json.h>

#include "checkpoint/ckpt.h"
#include "checkpoint/internal.h"
#include "tests/checkpoint/tmodel.h"
#include "tests/testutil.h"

/* A directory a save works in, by its path (struct ckpt_dir, fd -1: opened
 * at each call, as a one-shot tool does). */
#define AT(p) (&(struct ckpt_dir){ .fd = -1, .path = (p) })

/* --- helpers --- */

/* The test model: an MLP 6 -> 5 -> 4 -> 3 (tmodel.h), stage 0 layers
 * (blocks) 0..1, stage 1 layer 2. */
static const int64_t widths[] = { 6, 5, 4, 3 };
#define N_TENSORS 6

/* The whole model's tensors. */
static int model_tensors(struct ckpt_tensor t[N_TENSORS])
{
	return tm_tensors(widths, 0, 3, t);
}

/* scratch/<formatted name>; caller frees. */
static char *path_of(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *path_of(const char *fmt, ...)
{
	char name[512], *p = NULL;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	assert_true(asprintf(&p, "%s/%s", tu_scratch(), name) > 0);
	return p;
}

/* Element j of layer l's tensor t (0 the parameters, 1.. the states) in a
 * save marked `mark`: distinct and exact in float32. */
static float value(int mark, int t, int l, size_t j)
{
	return (float)(mark * 1000 + t * 100 + l * 10) + (float)(j % 4096) / 4096.0f;
}

static void make_meta(struct ckpt_meta *m, const char *optimizer, int64_t step)
{
	struct dt_err err = { 0 };

	memset(m, 0, sizeof(*m));
	m->step = step;
	m->steps_per_epoch = 5;
	m->epoch = step / 5;
	m->epoch_step = step % 5;
	m->total_steps = 100;
	m->lr = 0.1;
	m->rng_seed = 0xfedcba9876543210ull;
	m->rng_stream = (uint64_t)m->epoch;
	m->shuffle = true;
	m->global_batch = 8;
	m->train_rows = 40;
	snprintf(m->optimizer, sizeof(m->optimizer), "%s", optimizer);
	m->optimizer_step = step;
	if (!strcmp(optimizer, "sgd")) {
		m->n_states = 1;
		snprintf(m->states[0], sizeof(m->states[0]), "momentum_buffer");
	} else {
		m->n_states = 2;
		snprintf(m->states[0], sizeof(m->states[0]), "exp_avg");
		snprintf(m->states[1], sizeof(m->states[1]), "exp_avg_sq");
	}
	tm_model(m, widths, 3, "relu");
	snprintf(m->spec_hash, sizeof(m->spec_hash), "0123456789abcdef");
	m->data = 2;
	m->pipeline = 2;
	m->stage_first[0] = 0;
	m->stage_first[1] = 2;
	m->stage_first[2] = 3;
	snprintf(m->created, sizeof(m->created), "2026-11-21T10:00:00Z");
	snprintf(m->job_id, sizeof(m->job_id), "123");
	assert_int_equal(ckpt_meta_finish(m, &err), 0);
}

/* Writes optimizer piece p of stage k (view v, its states' values in
 * bufs[1..]) into tmp, as a sharded trainer's replica p does: each
 * tensor's rows of the piece, packed. */
static void save_piece(const char *tmp, const struct ckpt_meta *m, const struct ckpt_stage_view *sv,
		       float **bufs, int p, struct ckpt_file *f)
{
	struct ckpt_shard_writer w = { 0 };
	struct ckpt_stage_view v = *sv;
	struct dt_err err = { 0 };
	float *packed[CKPT_MAX_STATES] = { NULL };
	int64_t first, rows;
	size_t at = 0, row;
	int i, t;

	for (t = 0; t < m->n_states; t++)
		assert_non_null(packed[t] = malloc(sv->n * sizeof(float)));
	for (i = 0; i < v.n_tensors; i++) {
		row = ckpt_tensor_floats(&v.tensors[i]) / (size_t)v.tensors[i].shape[0];
		ckpt_piece_rows(v.tensors[i].shape[0], p, m->optimizer_shards, &first, &rows);
		for (t = 0; t < m->n_states; t++)
			memcpy(packed[t] + at, bufs[t + 1] + v.tensors[i].offset + (size_t)first * row,
			       (size_t)rows * row * sizeof(float));
		at += (size_t)rows * row;
	}
	v.is_piece = true;
	v.piece = p;
	v.n = at;
	v.params = NULL;
	for (t = 0; t < m->n_states; t++)
		v.states[t] = packed[t];
	if (ckpt_shard_begin(&w, AT(tmp), m, &v, &err) || ckpt_shard_write(&w, &err))
		fail_msg("piece %d of stage %d: %s", p, v.stage, err.msg);
	memset(f, 0, sizeof(*f));
	ckpt_piece_name(v.stage, p, f->name, sizeof(f->name));
	f->stage = v.stage;
	f->is_piece = true;
	f->piece = p;
	f->size = w.size;
	f->crc = w.crc;
	ckpt_shard_free(&w);
	for (t = 0; t < m->n_states; t++)
		free(packed[t]);
}

/* Saves a checkpoint of meta under dir with the values of `mark`, through
 * the write API and the commit (with m->optimizer_shards > 1, the states
 * in pieces); returns its path (caller frees). */
static char *save(const char *dir, const struct ckpt_meta *m, int mark)
{
	struct ckpt_file files[16] = { 0 }; /* the root, a shard per stage, pieces: 11 at most */
	struct ckpt_tensor all[N_TENSORS];
	struct dt_err err = { 0 };
	char tmp[4096], *final;
	int k, l, t, n_files = 0;

	assert_int_equal(dt_mkdirs(dir, 0755), 0);
	ckpt_tmp_path(dir, m->step, tmp, sizeof(tmp));
	assert_int_equal(dt_mkdirs(tmp, 0755), 0);
	for (k = 0; k < m->pipeline; k++) {
		struct ckpt_shard_writer w = { 0 };
		struct ckpt_stage_view v = { 0 };
		struct ckpt_tensor st[N_TENSORS];
		float *bufs[1 + CKPT_MAX_STATES] = { NULL };
		size_t n = 0, at = 0, j;

		v.stage = k;
		v.first_block = m->stage_first[k];
		v.n_blocks = m->stage_first[k + 1] - m->stage_first[k];
		v.n_tensors = tm_tensors(widths, v.first_block, v.first_block + v.n_blocks, st);
		v.tensors = st;
		n = tm_floats(widths, v.first_block, v.first_block + v.n_blocks);
		v.n = n;
		for (t = 0; t <= m->n_states; t++)
			assert_non_null(bufs[t] = malloc(n * sizeof(float)));
		for (l = v.first_block; l < v.first_block + v.n_blocks; l++) {
			for (j = 0; j < tm_floats(widths, l, l + 1); j++)
				for (t = 0; t <= m->n_states; t++)
					bufs[t][at + j] = value(mark, t, l, j);
			at += tm_floats(widths, l, l + 1);
		}
		v.params = bufs[0];
		for (t = 0; t < m->n_states; t++)
			v.states[t] = bufs[t + 1];
		assert_int_equal(ckpt_shard_begin(&w, AT(tmp), m, &v, &err), 0);
		assert_int_equal(ckpt_shard_write(&w, &err), 0);
		ckpt_shard_name(k, files[n_files].name, sizeof(files[n_files].name));
		files[n_files].stage = k;
		files[n_files].size = w.size;
		files[n_files].crc = w.crc;
		n_files++;
		ckpt_shard_free(&w);
		for (l = 0; m->optimizer_shards > 1 && l < m->optimizer_shards; l++)
			save_piece(tmp, m, &v, bufs, l, &files[n_files++]);
		for (t = 0; t <= m->n_states; t++)
			free(bufs[t]);
	}
	assert_int_equal(ckpt_root_write(AT(tmp), m, all, model_tensors(all), &err), 0);
	snprintf(files[n_files].name, sizeof(files[n_files].name), "%s", CKPT_ROOT);
	files[n_files].stage = -1;
	assert_int_equal(ckpt_file_seal(AT(tmp), CKPT_ROOT, &files[n_files].size, &files[n_files].crc, &err), 0);
	n_files++;
	if (ckpt_commit(AT(dir), AT(tmp), m, all, N_TENSORS, files, n_files, 10, NULL, &err))
		fail_msg("commit: %s", err.msg);
	assert_non_null(final = malloc(4096));
	ckpt_final_path(dir, m->step, final, 4096);
	return final;
}

/* Reads layer l's two tensors (weight, then bias after it) through r into
 * bufs[0] and the states into bufs[1..]. */
static int read_layer(struct ckpt_reader *r, int l, float **bufs, struct dt_err *err)
{
	struct ckpt_tensor t[2];
	float *bias[1 + CKPT_MAX_STATES];
	size_t nw = (size_t)(widths[l + 1] * widths[l]);
	int s, rc;

	tm_tensors(widths, l, l + 1, t);
	for (s = 0; s <= CKPT_MAX_STATES; s++)
		bias[s] = bufs[s] ? bufs[s] + nw : NULL;
	rc = ckpt_read_tensor(r, &t[0], bufs[0], bufs[1] ? bufs + 1 : NULL, err);
	return rc ? rc : ckpt_read_tensor(r, &t[1], bias[0], bufs[1] ? bias + 1 : NULL, err);
}

/* Reads every layer of ckpt and checks it holds the values of `mark`. */
static void check_values(const char *ckpt, const struct ckpt_meta *m, int mark)
{
	struct ckpt_reader r = { 0 };
	struct dt_err err = { 0 };
	float *bufs[1 + CKPT_MAX_STATES] = { NULL };
	size_t j;
	int l, t;

	if (ckpt_reader_open(&r, ckpt, &err))
		fail_msg("%s", err.msg);
	for (l = 0; l < m->n_blocks; l++) {
		size_t n = tm_floats(widths, l, l + 1);

		for (t = 0; t <= m->n_states; t++)
			assert_non_null(bufs[t] = malloc(n * sizeof(float)));
		if (read_layer(&r, l, bufs, &err))
			fail_msg("%s", err.msg);
		for (t = 0; t <= m->n_states; t++)
			for (j = 0; j < n; j++)
				assert_true(bufs[t][j] == value(mark, t, l, j));
		for (t = 0; t <= m->n_states; t++)
			free(bufs[t]);
	}
	ckpt_reader_close(&r);
}

/* Replaces the first `old` in the file by `new`; the test fails if absent. */
static void replace_in(const char *path, const char *old, const char *new)
{
	struct dt_buf b = { 0 };
	size_t len;
	char *text = tu_read(path, &len), *at;

	assert_non_null(text);
	at = strstr(text, old);
	if (!at)
		fail_msg("%s: lacks \"%s\"", path, old);
	assert_int_equal(dt_buf_add(&b, text, (size_t)(at - text)), 0);
	assert_int_equal(dt_buf_puts(&b, new), 0);
	assert_int_equal(dt_buf_puts(&b, at + strlen(old)), 0);
	assert_int_equal(dt_write_file_atomic(path, b.p, b.len, 0644), 0);
	dt_buf_free(&b);
	free(text);
}

static void append(const char *path, const void *data, size_t n)
{
	int fd = open(path, O_WRONLY | O_APPEND);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, n), (ssize_t)n);
	close(fd);
}

static void flip_byte(const char *path, off_t at)
{
	unsigned char c;
	int fd = open(path, O_RDWR);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &c, 1, at), 1);
	c ^= 0x40;
	assert_int_equal(pwrite(fd, &c, 1, at), 1);
	close(fd);
}

/* Rewrites ckpt's manifest so that file `name` is listed with its present
 * size and CRC (what an attacker who crafted the file would do). */
static void reseal(const char *ckpt, const char *name)
{
	struct ckpt_manifest *m = malloc(sizeof(*m));
	struct dt_err err = { 0 };
	struct dt_buf text = { 0 };
	char path[4200];
	int i;

	assert_non_null(m);
	if (ckpt_manifest_read(ckpt, m, &err))
		fail_msg("%s", err.msg);
	for (i = 0; i < m->n_files; i++)
		if (!strcmp(m->files[i].name, name)) {
			assert_int_equal(ckpt_file_seal(AT(ckpt), name, &m->files[i].size, &m->files[i].crc,
							&err), 0);
		}
	assert_int_equal(ckpt__manifest_emit(&m->meta, m->tensors, m->n_tensors, m->files,
					     m->n_files, &text), 0);
	snprintf(path, sizeof(path), "%s/%s", ckpt, CKPT_MANIFEST);
	assert_int_equal(dt_write_file_atomic(path, text.p, text.len, 0644), 0);
	dt_buf_free(&text);
	free(m);
}

/* --- manifests --- */

/* The standard manifest text, as a JSON tree the tests edit. */
static json_object *manifest_tree(void)
{
	struct ckpt_file files[3] = {
		{ "shard-0.h5", 0, 1000, 0x12345678, false, 0 },
		{ "shard-1.h5", 1, 2000, 0x9abcdef0, false, 0 },
		{ "model.h5", -1, 3000, 0x0fedcba9, false, 0 },
	};
	struct ckpt_tensor t[N_TENSORS];
	struct ckpt_meta m;
	struct dt_buf text = { 0 };
	json_object *root;

	make_meta(&m, "sgd", 7);
	assert_int_equal(ckpt__manifest_emit(&m, t, model_tensors(t), files, 3, &text), 0);
	root = json_tokener_parse(text.p);
	assert_non_null(root);
	dt_buf_free(&text);
	return root;
}

/* The node at "a.b[2].c" under root (NULL when absent). With set, replaces
 * the last part by val (NULL: deletes it). */
static json_object *node(json_object *root, const char *path, bool set, json_object *val)
{
	char part[64];
	const char *p = path;
	json_object *cur = root, *next;

	while (*p) {
		size_t n = strcspn(p, ".[");
		bool last;

		if (*p == '[') {
			size_t i = strtoul(p + 1, NULL, 10);

			p = strchr(p, ']') + 1;
			if (*p == '.')
				p++;
			last = !*p;
			if (last && set) {
				assert_int_equal(json_object_array_put_idx(cur, i, val), 0);
				return NULL;
			}
			cur = json_object_array_get_idx(cur, i);
			continue;
		}
		snprintf(part, sizeof(part), "%.*s", (int)n, p);
		p += n;
		if (*p == '.')
			p++;
		last = !*p;
		if (last && set) {
			if (val)
				assert_int_equal(json_object_object_add(cur, part, val), 0);
			else
				json_object_object_del(cur, part);
			return NULL;
		}
		if (!json_object_object_get_ex(cur, part, &next))
			return NULL;
		cur = next;
	}
	return cur;
}

/* Parses the standard manifest with path set to val; rc, message in err. */
static int parse_edited(const char *path, json_object *val, struct dt_err *err)
{
	struct ckpt_manifest *m = malloc(sizeof(*m));
	json_object *root = manifest_tree();
	int rc;

	assert_non_null(m);
	if (path)
		node(root, path, true, val);
	dt_err_clear(err);
	rc = ckpt__manifest_parse(json_object_to_json_string(root), "D/MANIFEST.json", m, err);
	json_object_put(root);
	free(m);
	return rc;
}

/* Parses the standard manifest's text with the first `old` replaced. */
static int parse_text_edited(const char *old, const char *new, struct dt_err *err)
{
	struct ckpt_manifest *m = malloc(sizeof(*m));
	json_object *root = manifest_tree();
	const char *s = json_object_to_json_string_ext(root, JSON_C_TO_STRING_SPACED |
								     JSON_C_TO_STRING_PRETTY);
	const char *at = strstr(s, old);
	char *text = NULL;
	int rc;

	assert_non_null(m);
	if (!at)
		fail_msg("the manifest lacks \"%s\": %s", old, s);
	assert_true(asprintf(&text, "%.*s%s%s", (int)(at - s), s, new, at + strlen(old)) > 0);
	rc = ckpt__manifest_parse(text, "D/MANIFEST.json", m, err);
	free(text);
	json_object_put(root);
	free(m);
	return rc;
}

static void test_manifest_round_trip(void **state)
{
	struct ckpt_file files[3] = {
		{ "shard-0.h5", 0, 1000, 0x12345678, false, 0 },
		{ "shard-1.h5", 1, 2000, 0x9abcdef0, false, 0 },
		{ "model.h5", -1, 3000, 0x0fedcba9, false, 0 },
	};
	struct ckpt_manifest *p = malloc(sizeof(*p));
	struct ckpt_tensor t[N_TENSORS];
	struct ckpt_meta m;
	struct dt_buf text = { 0 };
	struct dt_err err = { 0 };
	int i, j;

	(void)state;
	assert_non_null(p);
	make_meta(&m, "adamw", 12);
	m.lr = 0.1 / 3.0; /* not exact in few digits: %.17g must carry it */
	assert_int_equal(ckpt__manifest_emit(&m, t, model_tensors(t), files, 3, &text), 0);
	assert_non_null(strstr(text.p, "\"format\": \"dtrain-checkpoint\""));
	if (ckpt__manifest_parse(text.p, "D/MANIFEST.json", p, &err))
		fail_msg("%s\n%s", err.msg, text.p);
	assert_memory_equal(&p->meta, &m, offsetof(struct ckpt_meta, format_version));
	assert_true(p->meta.lr == m.lr);
	assert_int_equal(p->meta.rng_seed, 0xfedcba9876543210ull);
	assert_int_equal(p->meta.format_version, CKPT_VERSION);
	assert_string_equal(p->meta.model_type, "mlp");
	assert_string_equal(p->meta.model_config, m.model_config);
	assert_int_equal(p->meta.n_blocks, 3);
	assert_int_equal(p->n_tensors, N_TENSORS);
	for (i = 0; i < N_TENSORS; i++) {
		assert_string_equal(p->tensors[i].name, t[i].name);
		assert_int_equal(p->tensors[i].ndim, t[i].ndim);
		assert_int_equal(p->tensors[i].block, t[i].block);
		for (j = 0; j < t[i].ndim; j++)
			assert_int_equal(p->tensors[i].shape[j], t[i].shape[j]);
	}
	assert_int_equal(p->meta.pipeline, 2);
	assert_int_equal(p->meta.stage_first[1], 2);
	assert_string_equal(p->meta.model_hash, m.model_hash);
	assert_string_equal(p->meta.spec_hash, m.spec_hash);
	assert_string_equal(p->meta.created, m.created);
	assert_string_equal(p->meta.job_id, "123");
	assert_int_equal(p->n_files, 3);
	for (i = 0; i < 3; i++) {
		assert_string_equal(p->files[i].name, files[i].name);
		assert_int_equal(p->files[i].stage, files[i].stage);
		assert_int_equal(p->files[i].size, files[i].size);
		assert_int_equal(p->files[i].crc, files[i].crc);
	}
	dt_buf_free(&text);
	free(p);
}

static void test_manifest_refusals(void **state)
{
	struct ckpt_manifest *m = malloc(sizeof(*m));
	struct dt_err err = { 0 };
	json_object *a;

	(void)state;
	assert_non_null(m);
	assert_int_equal(parse_edited(NULL, NULL, &err), 0);

	assert_int_equal(parse_edited("step", json_object_new_string("7"), &err), -EINVAL);
	assert_true(tu_has(&err, "D/MANIFEST.json: step: must be an integer (got a string)"));
	/* created: a UTC time as dtrain writes it, or "" */
	assert_int_equal(parse_edited("created", json_object_new_string(""), &err), 0);
	assert_int_equal(parse_edited("created", json_object_new_string("2026-02-29T25:00:00Z"), &err),
			 -EINVAL);
	assert_true(tu_has(&err, "D/MANIFEST.json: created: expected a UTC time like \"2026-11-21T10:00:00Z\" or \"\" (got \"2026-02-29T25:00:00Z\")"));
	assert_int_equal(parse_edited("created", json_object_new_string("yesterday"), &err), -EINVAL);
	assert_int_equal(parse_edited("created", json_object_new_string("2026-11-21T10:00:00Z; rm"), &err),
			 -EINVAL);
	assert_int_equal(parse_edited("created", json_object_new_string("2026-13-01T10:00:00Z"), &err),
			 -EINVAL);
	assert_int_equal(parse_edited("created", json_object_new_string("2026-02-31T10:00:00Z"), &err),
			 -EINVAL);
	assert_int_equal(parse_edited("created", json_object_new_string("2028-02-29T23:59:59Z"), &err), 0);
	assert_int_equal(parse_edited("step", json_object_new_int(-1), &err), -EINVAL);
	assert_true(tu_has(&err, "D/MANIFEST.json: step: must be"));
	assert_int_equal(parse_edited("epoch", NULL, &err), -EINVAL);
	assert_true(tu_has(&err, "D/MANIFEST.json: epoch: missing"));
	assert_int_equal(parse_edited("files[2].size", json_object_new_string("x"), &err),
			 -EINVAL);
	assert_true(tu_has(&err, "D/MANIFEST.json: files[2].size: must be an integer"));
	assert_int_equal(parse_edited("rng.seed", json_object_new_double(1.5), &err), -EINVAL);
	assert_true(tu_has(&err, "rng.seed: must be an integer"));
	assert_int_equal(parse_edited("lr", json_object_new_string("0.1"), &err), -EINVAL);
	assert_true(tu_has(&err, "lr: must be a number"));

	/* the model: a plain type, a config object that the hash covers,
	 * blocks in range */
	assert_int_equal(parse_edited("model.type", json_object_new_string("ml/p"), &err), -EINVAL);
	assert_true(tu_has(&err, "D/MANIFEST.json: checkpoint meta: model type must be a plain name"));
	assert_int_equal(parse_edited("model.config", json_object_new_string("{}"), &err), -EINVAL);
	assert_true(tu_has(&err, "model.config: must be an object (got a string)"));
	assert_int_equal(parse_edited("model.config.inputs", json_object_new_int(7), &err), -EINVAL);
	assert_true(tu_has(&err, "model_hash: "));
	assert_true(tu_has(&err, "does not match the model's type and config"));
	assert_int_equal(parse_edited("model.blocks", json_object_new_int(CKPT_MAX_BLOCKS + 1), &err),
			 -EINVAL);
	assert_true(tu_has(&err, "model.blocks: must be 1..1025"));
	assert_int_equal(parse_edited("model.blocks", json_object_new_int(1), &err), -EINVAL);
	assert_true(tu_has(&err, "layout.pipeline: must be 1..1, the number of blocks (got 2)"));

	/* tensors: names that are never paths, shapes in range, blocks in
	 * order, each once */
	assert_int_equal(parse_edited("tensors[1].name", json_object_new_string("../0.bias"), &err),
			 -EINVAL);
	assert_true(tu_has(&err, "checkpoint tensors[1]: name must be letters, digits, '_' and '.'"));
	assert_int_equal(parse_edited("tensors[1].name", json_object_new_string("a/b"), &err),
			 -EINVAL);
	assert_true(tu_has(&err, "checkpoint tensors[1]: name must be"));
	assert_int_equal(parse_edited("tensors[1].name", json_object_new_string("0.weight"), &err),
			 -EINVAL);
	assert_true(tu_has(&err, "checkpoint tensor \"0.weight\": listed twice"));
	assert_int_equal(parse_edited("tensors[0].shape[1]", json_object_new_int64(100000000000ll),
				      &err), -EINVAL);
	assert_true(tu_has(&err, "tensors[0].shape[1]: must be 1..1000000000"));
	assert_int_equal(parse_edited("tensors[0].shape[0]", json_object_new_int(0), &err), -EINVAL);
	assert_true(tu_has(&err, "tensors[0].shape[0]"));
	a = json_object_new_array();
	for (int i = 0; i < CKPT_MAX_DIMS + 1; i++)
		json_object_array_add(a, json_object_new_int(2));
	assert_int_equal(parse_edited("tensors[0].shape", a, &err), -EINVAL);
	assert_true(tu_has(&err, "tensors[0].shape: must have 1..4 elements"));
	a = json_object_new_array();
	for (int i = 0; i < 3; i++)
		json_object_array_add(a, json_object_new_int(1000000000));
	assert_int_equal(parse_edited("tensors[0].shape", a, &err), -EINVAL);
	assert_true(tu_has(&err, "checkpoint tensor \"0.weight\": the model has more than 2^56 floats"));
	a = json_object_new_array();
	for (int i = 0; i < 2; i++)
		json_object_array_add(a, json_object_new_int(300000000));
	assert_int_equal(parse_edited("tensors[0].shape", a, &err), -EINVAL); /* 9e16 > 2^56 */
	assert_true(tu_has(&err, "more than 2^56 floats"));
	assert_int_equal(parse_edited("tensors[2].block", json_object_new_int(2), &err), -EINVAL);
	assert_true(tu_has(&err, "checkpoint tensor \"2.weight\": block 2 out of order"));
	assert_int_equal(parse_edited("tensors[5].block", json_object_new_int(1), &err), -EINVAL);
	assert_true(tu_has(&err, "checkpoint tensor \"4.bias\": block 1 out of order"));
	assert_int_equal(parse_edited("tensors", NULL, &err), -EINVAL);
	assert_true(tu_has(&err, "D/MANIFEST.json: tensors: missing"));
	a = json_object_new_array();
	for (int i = 0; i < 5; i++)
		json_object_array_add(a, json_object_new_string("exp_avg"));
	assert_int_equal(parse_edited("optimizer.states", a, &err), -EINVAL);
	assert_true(tu_has(&err, "optimizer.states: must have 0..2 elements"));
	assert_int_equal(parse_edited("optimizer.type",
				      json_object_new_string("a-very-long-optimizer-name"), &err),
			 -EINVAL);
	assert_true(tu_has(&err, "optimizer.type: too long"));

	/* layout */
	assert_int_equal(parse_edited("layout.pipeline", json_object_new_int(3), &err), -EINVAL);
	assert_true(tu_has(&err, "layout.stage_first: must have pipeline+1 = 4 elements"));
	assert_int_equal(parse_edited("layout.stage_first[1]", json_object_new_int(5), &err),
			 -EINVAL);
	assert_true(tu_has(&err, "stage_first must increase"));
	assert_int_equal(parse_edited("layout.data", json_object_new_int(0), &err), -EINVAL);
	assert_true(tu_has(&err, "layout.data: must be 1..65536"));

	/* files: names are ours, never paths; one per stage plus the root */
	assert_int_equal(parse_edited("files[1].name", json_object_new_string("../x.h5"), &err),
			 -EINVAL);
	assert_true(tu_has(&err, "D/MANIFEST.json: files[1].name: stage 1's file must be named \"shard-1.h5\""));
	assert_int_equal(parse_edited("files[2].name", json_object_new_string("/etc/passwd"),
				      &err), -EINVAL);
	assert_true(tu_has(&err, "files[2].name"));
	assert_int_equal(parse_edited("files[1].stage", json_object_new_int(0), &err), -EINVAL);
	assert_true(tu_has(&err, "files[1].name: stage 0's file must be named \"shard-0.h5\""));
	a = manifest_tree();
	node(a, "files[1].name", true, json_object_new_string("shard-0.h5"));
	node(a, "files[1].stage", true, json_object_new_int(0));
	assert_int_equal(ckpt__manifest_parse(json_object_to_json_string(a), "D/MANIFEST.json", m,
					      &err), -EINVAL);
	assert_true(tu_has(&err, "files[1]: \"shard-0.h5\" is listed twice"));
	json_object_put(a);
	assert_int_equal(parse_edited("files[1].stage", json_object_new_int(2), &err), -EINVAL);
	assert_true(tu_has(&err, "files[1].stage: must be -1..1"));
	a = manifest_tree();
	json_object_array_del_idx(node(a, "files", false, NULL), 1, 1);
	dt_err_clear(&err);
	assert_int_equal(ckpt__manifest_parse(json_object_to_json_string(a), "D/MANIFEST.json", m,
					      &err), -EINVAL);
	assert_true(tu_has(&err, "files: must have 3 elements (the root, the shards and optimizer pieces), or 4 or 5 with the tokenizer's (has 2)"));
	json_object_put(a);
	assert_int_equal(parse_edited("files[0].crc32", json_object_new_string("1234567"), &err),
			 -EINVAL);
	assert_true(tu_has(&err, "files[0].crc32: must be 8 hex digits"));
	assert_int_equal(parse_edited("files[0].crc32", json_object_new_string("1234567g"), &err),
			 -EINVAL);
	assert_int_equal(parse_edited("files[0]", json_object_new_int(1), &err), -EINVAL);
	assert_true(tu_has(&err, "files[0]: must be an object (got an integer)"));

	/* identity */
	assert_int_equal(parse_edited("model_hash", json_object_new_string("0000000000000000"),
				      &err), -EINVAL);
	assert_true(tu_has(&err, "D/MANIFEST.json: model_hash: 0000000000000000 does not match"));
	assert_int_equal(parse_edited("spec_hash", json_object_new_string("XYZ"), &err), -EINVAL);
	assert_true(tu_has(&err, "spec_hash: must be 16 lower-case hex digits"));
	assert_int_equal(parse_edited("created", json_object_new_string("a\nb"), &err), -EINVAL);
	assert_true(tu_has(&err, "created: must not contain control characters"));

	/* format */
	assert_int_equal(parse_edited("format", json_object_new_string("x"), &err), -EINVAL);
	assert_true(tu_has(&err, "D/MANIFEST.json: not a dtrain checkpoint (format \"x\")"));
	assert_int_equal(parse_edited("format", NULL, &err), -EINVAL);
	assert_true(tu_has(&err, "not a dtrain checkpoint"));
	assert_int_equal(parse_edited("format_version", json_object_new_int(7), &err), -EINVAL);
	assert_true(tu_has(&err, "D/MANIFEST.json: format_version 7 is newer than this dtrain reads (2)"));

	/* not JSON, not an object, trailing garbage, numbers beyond 64 bits */
	dt_err_clear(&err);
	assert_int_equal(ckpt__manifest_parse("{\"format\": ", "D/MANIFEST.json", m, &err),
			 -EINVAL);
	assert_true(tu_has(&err, "D/MANIFEST.json: invalid JSON"));
	assert_int_equal(ckpt__manifest_parse("[1, 2]", "D/MANIFEST.json", m, &err), -EINVAL);
	assert_int_equal(ckpt__manifest_parse("{} x", "D/MANIFEST.json", m, &err), -EINVAL);
	/* beyond INT64_MAX json-c keeps integers as uint64, beyond 64 bits it
	 * clamps them to UINT64_MAX: neither may pass as something smaller */
	dt_err_clear(&err);
	assert_int_equal(parse_text_edited("\"step\": 7,", "\"step\": 18446744073709551615,", &err),
			 -EINVAL);
	assert_true(tu_has(&err, "D/MANIFEST.json: step: must be 0.."));
	dt_err_clear(&err);
	assert_int_equal(parse_text_edited("\"seed\": 18364758544493064720",
					   "\"seed\": 99999999999999999999999999", &err), -EINVAL);
	assert_true(tu_has(&err, "D/MANIFEST.json: rng.seed: must be 0..2^64-2"));
	dt_err_clear(&err);
	assert_int_equal(parse_text_edited("\"stream\": 1", "\"stream\": -1", &err), -EINVAL);
	assert_true(tu_has(&err, "D/MANIFEST.json: rng.stream: must be 0..2^64-2"));
	free(m);
}

/* --- round trips --- */

static void round_trip(const char *optimizer, int mark)
{
	struct ckpt_manifest *m = malloc(sizeof(*m));
	struct dt_err err = { 0 }, warn = { 0 };
	struct ckpt_meta meta;
	char *dir = path_of("rt-%s", optimizer), *ckpt, found[4096];
	int64_t step;

	assert_non_null(m);
	make_meta(&meta, optimizer, 15);
	ckpt = save(dir, &meta, mark);
	check_values(ckpt, &meta, mark);
	if (ckpt_verify(ckpt, false, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(ckpt_manifest_read(ckpt, m, &err), 0);
	assert_int_equal(m->meta.step, 15);
	assert_int_equal(m->meta.n_states, meta.n_states);
	assert_string_equal(m->meta.states[meta.n_states - 1], meta.states[meta.n_states - 1]);
	assert_int_equal(ckpt_find_latest(dir, found, sizeof(found), &step, &warn, &err), 0);
	assert_int_equal(step, 15);
	assert_string_equal(found, ckpt);
	assert_int_equal(warn.count, 0);
	free(m);
	free(ckpt);
	free(dir);
}

/* A sharded optimizer's checkpoint (optimizer_shards 3: every stage's
 * state in 3 pieces of rows, tensors of 5, 4 and 3 rows): it verifies;
 * the shards hold the parameters only; whole tensors read back through
 * the pieces, and so do rows across pieces' edges, and model.h5's virtual
 * datasets; a piece missing from the manifest, or a piece key on a shard,
 * is refused. */
static json_object *file_entry(const char *name)
{
	json_object *f = json_object_new_object();

	json_object_object_add(f, "name", json_object_new_string(name));
	json_object_object_add(f, "stage", json_object_new_int(-1));
	json_object_object_add(f, "size", json_object_new_int(10));
	json_object_object_add(f, "crc32", json_object_new_string("0000abcd"));
	return f;
}

/* The standard manifest with the files named added; rc, message in err;
 * the count of tokenizer files ckpt_tokenizer_of finds into *tokenizer. */
static int parse_with_files(const char *a, const char *b, int *tokenizer, struct dt_err *err)
{
	const char *names[2];
	struct ckpt_manifest *m = malloc(sizeof(*m));
	json_object *root = manifest_tree();
	int rc;

	assert_non_null(m);
	node(root, "files[3]", true, file_entry(a));
	if (b)
		node(root, "files[4]", true, file_entry(b));
	dt_err_clear(err);
	rc = ckpt__manifest_parse(json_object_to_json_string(root), "D/MANIFEST.json", m, err);
	*tokenizer = rc ? 0 : ckpt_tokenizer_of(m, names);
	if (*tokenizer == 2) /* GPT-2's pair, encoder first */
		assert_string_equal(names[0], "encoder.json");
	json_object_put(root);
	free(m);
	return rc;
}

/* The tokenizer's files (tokenizer.c): GPT-2's pair under their names,
 * tokenizer.json, or none; anything else is refused */
static void test_manifest_tokenizer(void **state)
{
	struct dt_err err = { 0 };
	int tok = 0;

	(void)state;
	assert_int_equal(parse_edited(NULL, NULL, &err), 0);
	assert_int_equal(parse_with_files("vocab.bpe", "encoder.json", &tok, &err), 0);
	assert_int_equal(tok, 2);
	assert_int_equal(parse_with_files("tokenizer.json", NULL, &tok, &err), 0);
	assert_int_equal(tok, 1);
	assert_int_equal(parse_with_files("encoder.json", NULL, &tok, &err), -EINVAL);
	assert_true(tu_has(&err, "D/MANIFEST.json: files[3].name: stage -1's file must be named \"tokenizer.json\""));
	assert_int_equal(parse_with_files("tokenizer.json", "encoder.json", &tok, &err), -EINVAL);
	assert_true(tu_has(&err, "D/MANIFEST.json: files[3].name: stage -1's file must be named \"model.h5\""));
	assert_int_equal(parse_with_files("encoder.json", "encoder.json", &tok, &err), -EINVAL);
	assert_true(tu_has(&err, "\"encoder.json\" is listed twice"));
	assert_int_equal(parse_with_files("encoder.json", "merges.txt", &tok, &err), -EINVAL);
	assert_true(tu_has(&err, "D/MANIFEST.json: files[4].name: stage -1's file must be named \"model.h5\""));
	assert_int_equal(parse_with_files("encoder.json", "../vocab.bpe", &tok, &err), -EINVAL);
}

static void test_sharded_state(void **state)
{
	struct ckpt_meta m;
	struct ckpt_reader r = { 0 };
	struct ckpt_tensor t[N_TENSORS];
	struct dt_err err = { 0 };
	char *dir = path_of("sharded"), *ck, *p;
	float out[30];
	hid_t file, set;
	int64_t i;
	int s;

	(void)state;
	make_meta(&m, "adamw", 20);
	m.data = 3;
	m.optimizer_shards = 3;
	ck = save(dir, &m, 4);
	if (ckpt_verify(ck, false, &err))
		fail_msg("%s", err.msg);
	p = path_of("sharded/step-00000020/optim-1-2.h5");
	assert_int_equal(access(p, F_OK), 0);
	free(p);
	check_values(ck, &m, 4);
	/* rows 1..3 of 0.weight [5][6]: pieces hold rows 0, 1..2, 3..4 */
	tm_tensors(widths, 0, 3, t);
	assert_int_equal(ckpt_reader_open(&r, ck, &err), 0);
	assert_int_equal(r.m->meta.optimizer_shards, 3);
	for (s = -1; s < 2; s++) {
		assert_int_equal(ckpt_read_rows(&r, &t[0], s, 1, 3, out, &err), 0);
		for (i = 0; i < 18; i++)
			if (out[i] != value(4, s + 1, 0, (size_t)(6 + i)))
				fail_msg("state %d: element %lld of rows 1..3: %g", s, (long long)i, out[i]);
	}
	assert_int_equal(ckpt_read_rows(&r, &t[0], 0, 3, 3, out, &err), -EINVAL);
	assert_true(tu_has(&err, "tensor \"0.weight\": no state 0 or rows 3..5 of 5"));
	ckpt_reader_close(&r);
	/* the root's virtual dataset: the whole of a piece-wise state */
	p = path_of("sharded/step-00000020/model.h5");
	file = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT);
	assert_true(file >= 0);
	set = H5Dopen2(file, "/optimizer/exp_avg/2.weight", H5P_DEFAULT);
	assert_true(set >= 0);
	assert_true(H5Dread(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0);
	for (i = 0; i < 20; i++) /* 2.weight [4][5], layer 1 */
		if (out[i] != value(4, 1, 1, (size_t)i))
			fail_msg("model.h5: optimizer/exp_avg/2.weight element %lld: %g", (long long)i, out[i]);
	H5Dclose(set);
	H5Fclose(file);
	free(p);
	/* a piece left out of the manifest: the count is wrong */
	p = path_of("sharded/step-00000020/MANIFEST.json");
	replace_in(p, "\"optim-0-0.h5\"", "\"optim-0-9.h5\"");
	assert_int_equal(ckpt_verify(ck, true, &err), -EINVAL);
	assert_true(tu_has(&err, "must be named \"optim-0-0.h5\""));
	free(p);
	dt_err_clear(&err);
	assert_int_equal(parse_edited("files[1].piece", json_object_new_int(0), &err), -EINVAL);
	assert_true(tu_has(&err, "files[1].piece: only a stage's optimizer pieces have one"));
	free(ck);
	free(dir);
}

static void test_round_trip_sgd(void **state)
{
	(void)state;
	round_trip("sgd", 1);
}

static void test_round_trip_adamw(void **state)
{
	(void)state;
	round_trip("adamw", 2);
}

/* The model's config is kept in one canonical form (json-c's compact
 * one), whatever spacing or escapes the writer used, so that the hash a
 * writer takes is the one a reader recomputes. */
static void test_config_canonical(void **state)
{
	struct ckpt_meta a, b;
	struct dt_err err = { 0 };

	(void)state;
	make_meta(&a, "sgd", 3);
	make_meta(&b, "sgd", 3);
	snprintf(b.model_config, sizeof(b.model_config),
		 "{ \"inputs\": 6,\n  \"hidden\": [ 5, 4 ], \"outputs\": 3, \"activation\": \"\\u0072elu\" }");
	assert_int_equal(ckpt_meta_finish(&b, &err), 0);
	assert_string_equal(b.model_config, a.model_config);
	assert_string_equal(b.model_hash, a.model_hash);
	snprintf(b.model_config, sizeof(b.model_config), "[1, 2]");
	assert_int_equal(ckpt_meta_finish(&b, &err), -EINVAL);
	assert_true(tu_has(&err, "checkpoint meta: model config must be a JSON object"));
	snprintf(b.model_config, sizeof(b.model_config), "{\"a\": ");
	assert_int_equal(ckpt_meta_finish(&b, &err), -EINVAL);
}

/* Tensors read by name in any order, with or without states; the reader
 * keeps one shard open and switches. */
static void test_reader(void **state)
{
	struct ckpt_reader r = { 0 };
	struct dt_err err = { 0 };
	struct ckpt_meta meta;
	struct ckpt_tensor t[N_TENSORS], other;
	char *dir = path_of("reader"), *ckpt;
	float p[35], s[35], *states[1] = { s };
	size_t j;

	(void)state;
	make_meta(&meta, "sgd", 3);
	ckpt = save(dir, &meta, 3);
	model_tensors(t);
	assert_int_equal(ckpt_reader_open(&r, ckpt, &err), 0);
	assert_int_equal(ckpt_read_tensor(&r, &t[4], p, NULL, &err), 0); /* 4.weight [3][4] */
	for (j = 0; j < 12; j++)
		assert_true(p[j] == value(3, 0, 2, j));
	assert_int_equal(r.open_stage, 1);
	assert_int_equal(ckpt_read_tensor(&r, &t[1], p, states, &err), 0); /* 0.bias [5] */
	assert_int_equal(r.open_stage, 0);
	for (j = 0; j < 5; j++) {
		assert_true(p[j] == value(3, 0, 0, 30 + j));
		assert_true(s[j] == value(3, 1, 0, 30 + j));
	}

	/* the caller's model is not the checkpoint's */
	other = t[2];
	other.shape[0] = 7;
	assert_int_equal(ckpt_read_tensor(&r, &other, p, NULL, &err), -EINVAL);
	assert_true(tu_has(&err, ": tensor \"2.weight\" has another shape in the checkpoint than in the model: a checkpoint of another model"));
	dt_err_clear(&err);
	snprintf(other.name, sizeof(other.name), "8.weight");
	assert_int_equal(ckpt_read_tensor(&r, &other, p, NULL, &err), -EINVAL);
	assert_true(tu_has(&err, "has no tensor \"8.weight\": a checkpoint of another model"));
	ckpt_reader_close(&r);
	ckpt_reader_close(&r); /* twice is harmless */
	free(ckpt);
	free(dir);
}

/* --- damage --- */

/* A fresh checkpoint under scratch/name; its path into out[4096]. */
static void fresh(const char *name, char *out)
{
	struct ckpt_meta meta;
	char *dir = path_of("%s", name), *ckpt;

	make_meta(&meta, "sgd", 20);
	ckpt = save(dir, &meta, 4);
	snprintf(out, 4096, "%s", ckpt);
	free(ckpt);
	free(dir);
}

static void test_damage(void **state)
{
	struct dt_err err = { 0 };
	char ckpt[4096], shard[4200], manifest[4200];
	struct stat st;

	(void)state;
	/* a byte flipped in the middle of a shard */
	fresh("dmg-flip", ckpt);
	snprintf(shard, sizeof(shard), "%s/shard-1.h5", ckpt);
	assert_int_equal(stat(shard, &st), 0);
	flip_byte(shard, st.st_size / 2);
	assert_int_equal(ckpt_verify(ckpt, true, &err), -EIO);
	assert_true(tu_has(&err, "/step-00000020/shard-1.h5: checksum mismatch (crc32 "));
	assert_true(tu_has(&err, "the file is damaged"));

	/* truncated */
	fresh("dmg-trunc", ckpt);
	snprintf(shard, sizeof(shard), "%s/shard-0.h5", ckpt);
	assert_int_equal(truncate(shard, 100), 0);
	dt_err_clear(&err);
	assert_int_equal(ckpt_verify(ckpt, true, &err), -EIO);
	assert_true(tu_has(&err, "/shard-0.h5: size 100 bytes, manifest says "));
	assert_true(tu_has(&err, "(truncated or replaced)"));

	/* missing; with stop_at_first false every bad file is reported */
	fresh("dmg-missing", ckpt);
	snprintf(shard, sizeof(shard), "%s/shard-1.h5", ckpt);
	assert_int_equal(unlink(shard), 0);
	snprintf(shard, sizeof(shard), "%s/model.h5", ckpt);
	assert_int_equal(truncate(shard, 10), 0);
	dt_err_clear(&err);
	assert_int_equal(ckpt_verify(ckpt, false, &err), -ENOENT);
	assert_true(tu_has(&err, "/shard-1.h5: missing"));
	assert_true(tu_has(&err, "/model.h5: size 10 bytes"));
	assert_int_equal(err.count, 2);

	/* no manifest: not a checkpoint */
	fresh("dmg-nomanifest", ckpt);
	snprintf(manifest, sizeof(manifest), "%s/%s", ckpt, CKPT_MANIFEST);
	assert_int_equal(unlink(manifest), 0);
	dt_err_clear(&err);
	assert_int_equal(ckpt_verify(ckpt, true, &err), -ENOENT);
	assert_true(tu_has(&err, "/step-00000020: not a dtrain checkpoint (no MANIFEST.json)"));

	/* manifest: bad JSON, a wrong type, a traversal, a tampered hash, a NUL */
	fresh("dmg-json", ckpt);
	snprintf(manifest, sizeof(manifest), "%s/%s", ckpt, CKPT_MANIFEST);
	replace_in(manifest, "\"step\": 20,", "\"step\": 20,,");
	dt_err_clear(&err);
	assert_int_equal(ckpt_verify(ckpt, true, &err), -EINVAL);
	assert_true(tu_has(&err, "/step-00000020/MANIFEST.json: invalid JSON"));

	fresh("dmg-type", ckpt);
	snprintf(manifest, sizeof(manifest), "%s/%s", ckpt, CKPT_MANIFEST);
	replace_in(manifest, "\"global_batch\": 8", "\"global_batch\": [8]");
	dt_err_clear(&err);
	assert_int_equal(ckpt_verify(ckpt, true, &err), -EINVAL);
	assert_true(tu_has(&err, "/MANIFEST.json: global_batch: must be an integer (got an array)"));

	fresh("dmg-shape", ckpt);
	snprintf(manifest, sizeof(manifest), "%s/%s", ckpt, CKPT_MANIFEST);
	replace_in(manifest, "\"shape\": [", "\"shape\": [ 1099511627776,");
	dt_err_clear(&err);
	assert_int_equal(ckpt_verify(ckpt, true, &err), -EINVAL);
	assert_true(tu_has(&err, "/MANIFEST.json: tensors[0].shape[0]: must be 1..1000000000 (got 1099511627776)"));

	fresh("dmg-traversal", ckpt);
	snprintf(manifest, sizeof(manifest), "%s/%s", ckpt, CKPT_MANIFEST);
	replace_in(manifest, "\"shard-1.h5\"", "\"../x.h5\"");
	dt_err_clear(&err);
	assert_int_equal(ckpt_verify(ckpt, true, &err), -EINVAL);
	assert_true(tu_has(&err, "/MANIFEST.json: files[1].name: stage 1's file must be named \"shard-1.h5\""));

	fresh("dmg-hash", ckpt);
	snprintf(manifest, sizeof(manifest), "%s/%s", ckpt, CKPT_MANIFEST);
	replace_in(manifest, "\"model_hash\": \"", "\"model_hash\": \"f");
	dt_err_clear(&err);
	assert_int_equal(ckpt_verify(ckpt, true, &err), -EINVAL);
	assert_true(tu_has(&err, "/MANIFEST.json: model_hash: "));

	fresh("dmg-nul", ckpt);
	snprintf(manifest, sizeof(manifest), "%s/%s", ckpt, CKPT_MANIFEST);
	append(manifest, "\0{}", 3);
	dt_err_clear(&err);
	assert_int_equal(ckpt_verify(ckpt, true, &err), -EINVAL);
	assert_true(tu_has(&err, "/MANIFEST.json: contains a NUL byte"));

	/* a damaged manifest also stops the reader, export and inspect */
	{
		struct ckpt_reader r = { 0 };
		char *out = path_of("dmg-export.h5");

		dt_err_clear(&err);
		assert_int_equal(ckpt_reader_open(&r, ckpt, &err), -EINVAL);
		ckpt_reader_close(&r);
		assert_int_equal(ckpt_inspect(ckpt, stdout, &err), -EINVAL);
		assert_int_equal(ckpt_export(ckpt, out, &err), -EINVAL);
		assert_int_equal(access(out, F_OK), -1);
		free(out);
	}
}

/* A manifest over 16 MiB is refused before it is read. */
static void test_manifest_too_large(void **state)
{
	struct dt_err err = { 0 };
	struct ckpt_manifest *m = malloc(sizeof(*m));
	char *dir = path_of("big"), path[4200];
	int fd;

	(void)state;
	assert_non_null(m);
	assert_int_equal(dt_mkdirs(dir, 0755), 0);
	snprintf(path, sizeof(path), "%s/%s", dir, CKPT_MANIFEST);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)17 << 20), 0);
	close(fd);
	assert_int_equal(ckpt_manifest_read(dir, m, &err), -EINVAL);
	assert_true(tu_has(&err, "too large for a manifest"));
	free(m);
	free(dir);
}

/* --- finding the latest --- */

/* What stands under a checkpoint's name (docs/checkpoints.md, "How a
 * save is committed"): a symbolic link to a checkpoint directory (a
 * data-versioning tree) is listed, found and verified through the link;
 * a regular file, a dangling link or a link to a file is an error naming
 * it, never skipped (a run would start afresh and save over it). */
static void test_list_entries(void **state)
{
	struct dt_err err = { 0 }, warn = { 0 };
	struct ckpt_meta meta;
	char *dir = path_of("entries"), *store = path_of("entries-store"), *c10, *c20;
	char found[4096], path[4200];
	int64_t step, *steps = NULL;
	int n;

	(void)state;
	make_meta(&meta, "sgd", 10);
	c10 = save(dir, &meta, 10);
	make_meta(&meta, "sgd", 20);
	c20 = save(store, &meta, 20); /* elsewhere, linked in as step-20 */
	snprintf(path, sizeof(path), "%s/step-00000020", dir);
	assert_int_equal(symlink(c20, path), 0);
	assert_int_equal(ckpt_list(dir, &steps, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_int_equal(steps[0], 20);
	assert_int_equal(steps[1], 10);
	free(steps);
	assert_int_equal(ckpt_find_latest(dir, found, sizeof(found), &step, &warn, &err), 0);
	assert_int_equal(step, 20);
	assert_string_equal(found, path);
	assert_int_equal(warn.count, 0);
	assert_int_equal(ckpt_verify(path, false, &err), 0);

	/* a regular file, a dangling link, a link to a file: each named */
	snprintf(path, sizeof(path), "%s/step-00000009", dir);
	tu_write_path(path, "x", 0644);
	assert_int_equal(ckpt_list(dir, &steps, &n, &err), -ENOTDIR);
	assert_null(steps);
	assert_int_equal(n, 0);
	assert_true(tu_has(&err, "/entries/step-00000009: a regular file, under a checkpoint's name: not a checkpoint (a checkpoint is a directory step-<8 digits>, or a symbolic link to one; hint: move it out of "));
	dt_err_clear(&err);
	assert_int_equal(ckpt_find_latest(dir, found, sizeof(found), &step, &warn, &err), -ENOTDIR);
	assert_int_equal(step, -1);
	assert_true(tu_has(&err, "/entries/step-00000009: a regular file"));
	dt_err_clear(&err);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink("nowhere", path), 0);
	assert_int_equal(ckpt_list(dir, &steps, &n, &err), -ENOTDIR);
	assert_true(tu_has(&err, "/entries/step-00000009: a symbolic link to nothing, under a checkpoint's name"));
	dt_err_clear(&err);
	assert_int_equal(unlink(path), 0);
	snprintf(found, sizeof(found), "%s/%s", c10, CKPT_MANIFEST);
	assert_int_equal(symlink(found, path), 0);
	assert_int_equal(ckpt_list(dir, &steps, &n, &err), -ENOTDIR);
	assert_true(tu_has(&err, "/entries/step-00000009: a symbolic link to something not a directory, under a checkpoint's name"));
	free(c10);
	free(c20);
	free(store);
	free(dir);
}

/* Names ckpt_list leaves out that a user may take for checkpoints
 * (step-<digits>, not 8 of them as ckpt_step_name writes): a line each,
 * naming it, for dtrain-run's note at resume; other names are not noted. */
static void test_list_strays(void **state)
{
	static const char *const strays[] = { "step-12", "step-000000012", "step-0" };
	static const char *const others[] = { "step-00000012", "step-x", "step-12.bak", "step-",
					      ".step-00000012.tmp", "latest", "stepping-12" };
	struct dt_err notes = { 0 };
	char *dir = path_of("strays"), path[4200], line[4400];
	size_t i;

	(void)state;
	dt_remove_tree(dir);
	assert_int_equal(ckpt_list_strays(dir, &notes), 0); /* not there */
	for (i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, others[i]);
		assert_int_equal(dt_mkdirs(path, 0755), 0);
	}
	assert_int_equal(ckpt_list_strays(dir, &notes), 0);
	assert_int_equal(notes.count, 0);
	for (i = 0; i < sizeof(strays) / sizeof(strays[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, strays[i]);
		if (i == 2)
			tu_write_path(path, "x", 0644); /* a file: noted as well */
		else
			assert_int_equal(dt_mkdirs(path, 0755), 0);
	}
	assert_int_equal(ckpt_list_strays(dir, &notes), 3);
	assert_int_equal(notes.count, 3);
	for (i = 0; i < sizeof(strays) / sizeof(strays[0]); i++) {
		snprintf(line, sizeof(line), "%s/%s is not a checkpoint name dtrain writes (step-<8 digits>): left alone",
			 dir, strays[i]);
		assert_true(tu_has(&notes, line));
	}
	free(dir);
}

static void test_find_latest(void **state)
{
	struct dt_err err = { 0 }, warn = { 0 };
	struct ckpt_meta meta;
	char *dir = path_of("latest"), *c10, *c20, *c30, found[4096], path[4200];
	int64_t step, *steps = NULL;
	int n;

	(void)state;
	/* nothing there (the directory does not even exist) */
	assert_int_equal(ckpt_find_latest(dir, found, sizeof(found), &step, &warn, &err), 0);
	assert_int_equal(step, -1);
	assert_int_equal(warn.count, 0);

	make_meta(&meta, "sgd", 10);
	c10 = save(dir, &meta, 10);
	make_meta(&meta, "sgd", 20);
	c20 = save(dir, &meta, 20);
	make_meta(&meta, "sgd", 30);
	c30 = save(dir, &meta, 30);

	/* not listed: a tmp directory, a non-canonical name, latest (links
	 * and files under a checkpoint's name: test_list_entries) */
	snprintf(path, sizeof(path), "%s/.step-00000040.tmp", dir);
	assert_int_equal(dt_mkdirs(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/step-60", dir);
	assert_int_equal(dt_mkdirs(path, 0755), 0);
	assert_int_equal(ckpt_list(dir, &steps, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_int_equal(steps[0], 30);
	assert_int_equal(steps[1], 20);
	assert_int_equal(steps[2], 10);
	free(steps);

	/* newest damaged: the one before it, with a warning naming the file */
	snprintf(path, sizeof(path), "%s/shard-0.h5", c30);
	flip_byte(path, 2000);
	assert_int_equal(ckpt_find_latest(dir, found, sizeof(found), &step, &warn, &err), 0);
	assert_int_equal(step, 20);
	assert_string_equal(found, c20);
	assert_int_equal(warn.count, 1);
	assert_true(tu_has(&warn, "/step-00000030: skipped: "));
	assert_true(tu_has(&warn, "/step-00000030/shard-0.h5: checksum mismatch"));

	/* a manifest whose step is not its directory's */
	snprintf(path, sizeof(path), "%s/%s", c20, CKPT_MANIFEST);
	replace_in(path, "\"step\": 20,", "\"step\": 25,");
	dt_err_clear(&warn);
	assert_int_equal(ckpt_find_latest(dir, found, sizeof(found), &step, &warn, &err), 0);
	assert_int_equal(step, 10);
	assert_string_equal(found, c10);
	assert_int_equal(warn.count, 2);
	assert_true(tu_has(&warn, "/step-00000020/MANIFEST.json: step is 25, the directory's name says 20"));

	/* all damaged: none, not an error */
	snprintf(path, sizeof(path), "%s/%s", c10, CKPT_MANIFEST);
	assert_int_equal(unlink(path), 0);
	dt_err_clear(&warn);
	assert_int_equal(ckpt_find_latest(dir, found, sizeof(found), &step, &warn, &err), 0);
	assert_int_equal(step, -1);
	assert_int_equal(warn.count, 3);
	assert_true(tu_has(&warn, "/step-00000010: skipped: "));
	assert_true(tu_has(&warn, "not a dtrain checkpoint (no MANIFEST.json)"));
	assert_int_equal(err.count, 0);
	free(c10);
	free(c20);
	free(c30);
	free(dir);
}

/* --- hostile shards --- */

enum craft {
	WRONG_SHAPE, /* [5, 7] for [5, 6] */
	HUGE_DIMS,   /* [2^40, 6] */
	INTEGER,     /* int32 [5, 6] */
	RANK3,       /* [5, 6, 1] */
	SCALAR,      /* a single float */
	EXTERNAL,    /* float [5, 6], its bytes in another file */
	VIRTUAL,     /* float [5, 6], mapped onto another file */
	GROUP,       /* a group where the dataset should be */
	CHUNKED,     /* float [5, 6], chunked and compressed */
	FLOAT16,     /* a 16-bit float type of its own */
	EXT_LINK,    /* an external link to a right dataset in another file */
	SOFT_LINK,   /* model a soft link to a group holding a right weight */
	WEIGHT_ONLY, /* a right weight, no bias */
	NOT_HDF5,    /* not an HDF5 file at all */
};

/* Replaces ckpt/shard-0.h5 by a file whose model/0.weight is crafted. */
static void craft_shard(const char *ckpt, enum craft kind)
{
	hsize_t dims[3] = { 5, 7, 1 };
	hid_t fapl, file, space, dcpl, lcpl, set = H5I_INVALID_HID, type = H5T_IEEE_F32LE;
	char path[4200];

	snprintf(path, sizeof(path), "%s/shard-0.h5", ckpt);
	if (kind == NOT_HDF5) {
		tu_write_path(path, "this is not an HDF5 file, though it ends in .h5\n", 0644);
		return;
	}
	ckpt__h5_quiet();
	assert_true((fapl = dt_h5_fapl(DT_H5_V110)) > 0);
	assert_true((file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl)) > 0);
	assert_true((lcpl = H5Pcreate(H5P_LINK_CREATE)) > 0);
	assert_true(H5Pset_create_intermediate_group(lcpl, 1) >= 0);
	assert_true((dcpl = H5Pcreate(H5P_DATASET_CREATE)) > 0);
	if (kind == HUGE_DIMS)
		dims[0] = (hsize_t)1 << 40;
	if (kind != WRONG_SHAPE)
		dims[1] = 6;
	if (kind == INTEGER)
		type = H5T_STD_I32LE;
	if (kind == FLOAT16) {
		assert_true((type = H5Tcopy(H5T_IEEE_F32LE)) > 0);
		assert_true(H5Tset_fields(type, 15, 10, 5, 0, 10) >= 0);
		assert_true(H5Tset_precision(type, 16) >= 0);
		assert_true(H5Tset_size(type, 2) >= 0);
		assert_true(H5Tset_ebias(type, 15) >= 0);
	}
	if (kind == CHUNKED) {
		hsize_t chunk[2] = { 1, 6 };

		assert_true(H5Pset_chunk(dcpl, 2, chunk) >= 0);
		assert_true(H5Pset_deflate(dcpl, 6) >= 0);
	}
	if (kind == EXTERNAL)
		assert_true(H5Pset_external(dcpl, "raw.bin", 0, 5 * 6 * 4) >= 0);
	if (kind == VIRTUAL) {
		hid_t src = H5Screate_simple(2, dims, NULL);

		assert_true(H5Pset_virtual(dcpl, src, "shard-1.h5", "/model/4.weight", src) >= 0);
		H5Sclose(src);
	}
	if (kind == SCALAR)
		space = H5Screate(H5S_SCALAR);
	else
		space = H5Screate_simple(kind == RANK3 ? 3 : 2, dims, NULL);
	assert_true(space > 0);
	if (kind == EXT_LINK || kind == SOFT_LINK) {
		char other[4200];
		hid_t f2, g, d;

		snprintf(other, sizeof(other), "%s/other.h5", ckpt);
		f2 = kind == EXT_LINK ? H5Fcreate(other, H5F_ACC_TRUNC, H5P_DEFAULT, fapl) : file;
		assert_true(f2 > 0);
		assert_true((g = H5Gcreate2(f2, "elsewhere", H5P_DEFAULT, H5P_DEFAULT,
					    H5P_DEFAULT)) > 0);
		assert_true((d = H5Dcreate2(g, kind == SOFT_LINK ? "0.weight" : "weight", type, space,
					    H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)) > 0);
		H5Dclose(d);
		H5Gclose(g);
		if (kind == EXT_LINK) {
			H5Fclose(f2);
			assert_true(H5Lcreate_external("other.h5", "/elsewhere/weight", file,
						       "model/0.weight", lcpl, H5P_DEFAULT) >= 0);
		} else {
			assert_true(H5Lcreate_soft("/elsewhere", file, "model", lcpl,
						   H5P_DEFAULT) >= 0);
		}
	} else if (kind == GROUP) {
		hid_t g = H5Gcreate2(file, "model/0.weight", lcpl, H5P_DEFAULT, H5P_DEFAULT);

		assert_true(g > 0);
		H5Gclose(g);
	} else {
		set = H5Dcreate2(file, "model/0.weight", type, space, lcpl, dcpl, H5P_DEFAULT);
		assert_true(set > 0);
		H5Dclose(set);
	}
	if (kind == FLOAT16)
		H5Tclose(type);
	H5Sclose(space);
	H5Pclose(dcpl);
	H5Pclose(lcpl);
	assert_true(H5Fclose(file) >= 0);
	H5Pclose(fapl);
}

static void hostile(enum craft kind, const char *expect)
{
	struct ckpt_reader r = { 0 };
	struct dt_err err = { 0 };
	char ckpt[4096], name[64];
	float *p = malloc(35 * sizeof(float));

	assert_non_null(p);
	snprintf(name, sizeof(name), "hostile-%d", (int)kind);
	fresh(name, ckpt);
	craft_shard(ckpt, kind);
	reseal(ckpt, "shard-0.h5");
	if (ckpt_verify(ckpt, true, &err))
		fail_msg("the crafted shard should pass the checksums: %s", err.msg);
	assert_int_equal(ckpt_reader_open(&r, ckpt, &err), 0);
	assert_int_equal(read_layer(&r, 0, (float *[1 + CKPT_MAX_STATES]){ p }, &err),
			 kind == NOT_HDF5 ? -EIO : -EINVAL);
	assert_true(tu_has(&err, "/step-00000020/shard-0.h5: "));
	assert_true(tu_has(&err, expect));
	/* the other shard is still readable through the same reader */
	dt_err_clear(&err);
	assert_int_equal(read_layer(&r, 2, (float *[1 + CKPT_MAX_STATES]){ p }, &err), 0);
	assert_true(p[0] == value(4, 0, 2, 0));
	ckpt_reader_close(&r);
	free(p);
}

static void test_hostile_shapes(void **state)
{
	(void)state;
	hostile(WRONG_SHAPE, "shard-0.h5: model/0.weight: shape [5, 7], expected [5, 6]");
	hostile(HUGE_DIMS, "model/0.weight: shape [1099511627776, 6], expected [5, 6]");
	hostile(RANK3, "model/0.weight: shape [5, 6, 1], expected [5, 6]");
	hostile(SCALAR, "model/0.weight: not an array");
}

static void test_hostile_types(void **state)
{
	(void)state;
	hostile(INTEGER, "shard-0.h5: model/0.weight: not a float32 or float64 dataset");
	hostile(FLOAT16, "shard-0.h5: model/0.weight: not a float32 or float64 dataset");
	hostile(EXTERNAL, "model/0.weight: data stored in external files");
	hostile(VIRTUAL, "model/0.weight: virtual storage, not contiguous");
	hostile(CHUNKED, "model/0.weight: chunked storage, not contiguous");
	hostile(GROUP, "model/0.weight: cannot open as a dataset");
	hostile(EXT_LINK, "shard-0.h5: model/0.weight: \"model/0.weight\" is an external link");
	hostile(SOFT_LINK, "shard-0.h5: model/0.weight: \"model\" is a soft link");
	hostile(NOT_HDF5, "cannot open as HDF5");
}

/* The bias missing from an otherwise right shard. */
static void test_hostile_missing_dataset(void **state)
{
	struct ckpt_reader r = { 0 };
	struct dt_err err = { 0 };
	char ckpt[4096];
	float p[35];

	(void)state;
	fresh("hostile-missing", ckpt);
	craft_shard(ckpt, WEIGHT_ONLY);
	reseal(ckpt, "shard-0.h5");
	assert_int_equal(ckpt_reader_open(&r, ckpt, &err), 0);
	assert_int_equal(read_layer(&r, 0, (float *[1 + CKPT_MAX_STATES]){ p }, &err), -EINVAL);
	assert_true(tu_has(&err, "/shard-0.h5: model/0.bias: missing (model/0.bias)"));
	ckpt_reader_close(&r);
}

/* --- format 1 --- */

/* dset of the HDF5 file at path into buf (floats), or fails the test. */
static void h5_floats(const char *path, const char *dset, float *buf)
{
	hid_t fapl, file, set;

	assert_true((fapl = dt_h5_fapl(DT_H5_V110)) > 0);
	if ((file = H5Fopen(path, H5F_ACC_RDONLY, fapl)) < 0)
		fail_msg("%s: cannot open", path);
	if ((set = H5Dopen2(file, dset, H5P_DEFAULT)) < 0)
		fail_msg("%s: no dataset %s", path, dset);
	assert_true(H5Dread(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
	H5Dclose(set);
	H5Fclose(file);
	H5Pclose(fapl);
}

/* A checkpoint of format 1, written before models had an interface by
 * f6cec4c's dtrain-run (tests/checkpoint/fixtures/format1-step7: an MLP
 * 32-48-40-24-5, gelu, adamw, over 2 stages): it verifies, reads as model
 * "mlp" with the config and tensors a model of those widths has now, each
 * tensor read by name holds what its /layers/<l> dataset holds, and it
 * exports in the current format. */
static void test_format1(void **state)
{
	static const int64_t w1[] = { 32, 48, 40, 24, 5 };
	static const char *const states[2] = { "exp_avg", "exp_avg_sq" };
	const char *src = getenv("DTRAIN_SOURCE_DIR");
	struct ckpt_manifest *m = malloc(sizeof(*m));
	struct ckpt_reader r = { 0 };
	struct ckpt_tensor t[8];
	struct ckpt_meta want;
	struct dt_err err = { 0 };
	char *ckpt = NULL, *out = path_of("format1.h5"), shard[4200], dset[128], hash[17];
	char mh[CKPT_CONFIG_MAX + 8];
	float *a[3], *b = malloc(48 * 40 * sizeof(float));
	int i, s, stage;

	(void)state;
	assert_non_null(src);
	assert_non_null(m);
	assert_non_null(b);
	for (s = 0; s < 3; s++)
		assert_non_null(a[s] = malloc(48 * 40 * sizeof(float)));
	assert_true(asprintf(&ckpt, "%s/tests/checkpoint/fixtures/format1-step7", src) > 0);
	if (ckpt_verify(ckpt, true, &err) || ckpt_manifest_read(ckpt, m, &err))
		fail_msg("%s", err.msg);
	memset(&want, 0, sizeof(want));
	tm_model(&want, w1, 4, "gelu");
	assert_int_equal(m->meta.format_version, 1);
	assert_string_equal(m->meta.model_type, "mlp");
	assert_string_equal(m->meta.model_config, want.model_config);
	snprintf(mh, sizeof(mh), "mlp\n%s", want.model_config);
	ckpt_hash64(mh, strlen(mh), hash);
	assert_string_equal(m->meta.model_hash, hash);
	assert_int_equal(m->meta.n_blocks, 4);
	assert_int_equal(m->n_tensors, tm_tensors(w1, 0, 4, t));
	for (i = 0; i < 8; i++) {
		assert_string_equal(m->tensors[i].name, t[i].name);
		assert_int_equal(m->tensors[i].block, t[i].block);
		assert_int_equal(m->tensors[i].shape[0], t[i].shape[0]);
	}

	assert_int_equal(ckpt_reader_open(&r, ckpt, &err), 0);
	for (i = 0; i < 8; i++) {
		size_t n = ckpt_tensor_floats(&t[i]);

		if (ckpt_read_tensor(&r, &t[i], a[0], a + 1, &err))
			fail_msg("%s", err.msg);
		stage = t[i].block < m->meta.stage_first[1] ? 0 : 1;
		snprintf(shard, sizeof(shard), "%s/shard-%d.h5", ckpt, stage);
		for (s = 0; s < 3; s++) {
			snprintf(dset, sizeof(dset), "%s%s%slayers/%d/%s", s ? "optimizer/" : "",
				 s ? states[s - 1] : "", s ? "/" : "", t[i].block, i % 2 ? "bias" : "weight");
			h5_floats(shard, dset, b);
			assert_memory_equal(a[s], b, n * sizeof(float));
		}
	}
	ckpt_reader_close(&r);

	/* exported: the current format, the same values under the names */
	if (ckpt_export(ckpt, out, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(ckpt_reader_open(&r, ckpt, &err), 0);
	assert_int_equal(ckpt_read_tensor(&r, &t[2], a[0], a + 1, &err), 0);
	ckpt_reader_close(&r);
	h5_floats(out, "model/2.weight", b);
	assert_memory_equal(a[0], b, 48 * 40 * sizeof(float));
	h5_floats(out, "optimizer/exp_avg_sq/2.weight", b);
	assert_memory_equal(a[2], b, 48 * 40 * sizeof(float));
	{
		hid_t fapl = dt_h5_fapl(DT_H5_V110), file = H5Fopen(out, H5F_ACC_RDONLY, fapl), at;
		int32_t v = 0;

		assert_true(file > 0);
		assert_true((at = H5Aopen(file, "format_version", H5P_DEFAULT)) > 0);
		assert_true(H5Aread(at, H5T_NATIVE_INT32, &v) >= 0);
		assert_int_equal(v, CKPT_VERSION);
		H5Aclose(at);
		H5Fclose(file);
		H5Pclose(fapl);
	}
	for (s = 0; s < 3; s++)
		free(a[s]);
	free(b);
	free(out);
	free(ckpt);
	free(m);
}

/* --- export and inspect --- */

static void check_export(const char *out, const struct ckpt_meta *m, int mark)
{
	struct ckpt_tensor tt[N_TENSORS];
	hid_t fapl, file, set, dcpl;
	float buf[64];
	char name[128];
	H5L_info_t li;
	size_t j, n;
	int l, t, w;

	model_tensors(tt);
	assert_true((fapl = dt_h5_fapl(DT_H5_V110)) > 0);
	assert_true((file = H5Fopen(out, H5F_ACC_RDONLY, fapl)) > 0);
	assert_true(H5Aexists(file, "format") > 0);
	assert_true(H5Aexists(file, "model_hash") > 0);
	for (t = 0; t <= m->n_states; t++)
		for (l = 0; l < m->n_blocks; l++)
			for (w = 0; w < 2; w++) {
				ckpt__tensor_path(m, &tt[2 * l + w], t ? m->states[t - 1] : NULL, name,
						  sizeof(name));
				assert_true(H5Lget_info(file, name, &li, H5P_DEFAULT) >= 0);
				assert_int_equal(li.type, H5L_TYPE_HARD);
				assert_true((set = H5Dopen2(file, name, H5P_DEFAULT)) > 0);
				assert_true((dcpl = H5Dget_create_plist(set)) > 0);
				assert_int_equal(H5Pget_layout(dcpl), H5D_CONTIGUOUS);
				assert_int_equal(H5Pget_external_count(dcpl), 0);
				H5Pclose(dcpl);
				n = (size_t)widths[l + 1] * (w ? 1 : (size_t)widths[l]);
				assert_true(n <= 64);
				assert_true(H5Dread(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL,
						    H5P_DEFAULT, buf) >= 0);
				for (j = 0; j < n; j++) {
					size_t at = w ? (size_t)widths[l + 1] * (size_t)widths[l] + j
						      : j;

					assert_true(buf[j] == value(mark, t, l, at));
				}
				H5Dclose(set);
			}
	H5Fclose(file);
	H5Pclose(fapl);
}

static void test_export(void **state)
{
	struct dt_err err = { 0 };
	struct ckpt_meta meta;
	char *dir = path_of("export"), *ckpt, *out = path_of("export.h5"), *tmp;
	char shard[4200];

	(void)state;
	make_meta(&meta, "adamw", 9);
	ckpt = save(dir, &meta, 5);
	if (ckpt_export(ckpt, out, &err))
		fail_msg("%s", err.msg);
	check_export(out, &meta, 5);
	assert_true(asprintf(&tmp, "%s.tmp.%ld", out, (long)getpid()) > 0);
	assert_int_equal(access(tmp, F_OK), -1);

	/* again over the first one: replaced whole */
	assert_int_equal(ckpt_export(ckpt, out, &err), 0);
	check_export(out, &meta, 5);

	/* a damaged checkpoint is not exported, the earlier export is untouched */
	snprintf(shard, sizeof(shard), "%s/shard-1.h5", ckpt);
	flip_byte(shard, 3000);
	assert_int_equal(ckpt_export(ckpt, out, &err), -EIO);
	assert_true(tu_has(&err, "/shard-1.h5: checksum mismatch"));
	check_export(out, &meta, 5);
	assert_int_equal(access(tmp, F_OK), -1);

	/* an unwritable place: the error names it */
	dt_err_clear(&err);
	flip_byte(shard, 3000);
	assert_true(ckpt_export(ckpt, "/nonexistent-dir/x.h5", &err) < 0);
	assert_true(tu_has(&err, "/nonexistent-dir/x.h5"));
	free(tmp);
	free(out);
	free(ckpt);
	free(dir);
}

static void test_inspect(void **state)
{
	struct dt_err err = { 0 };
	struct ckpt_meta meta;
	char *dir = path_of("inspect"), *ckpt, *text = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	make_meta(&meta, "sgd", 17);
	ckpt = save(dir, &meta, 6);
	assert_non_null(f = open_memstream(&text, &len));
	if (ckpt_inspect(ckpt, f, &err))
		fail_msg("%s", err.msg);
	fclose(f);
	assert_non_null(strstr(text, "step          17 of 100"));
	assert_non_null(strstr(text, "epoch         4 (of the last step taken); the next step is step 3 of 5 of epoch 4"));
	assert_non_null(strstr(text, "sgd, step 17, states: momentum_buffer"));
	assert_non_null(strstr(text, "data 2 x pipeline 2"));
	assert_non_null(strstr(text, "stage 0     blocks 0..1"));
	assert_non_null(strstr(text, "stage 1     block 2"));
	assert_non_null(strstr(text, "mlp, 3 blocks, {\"inputs\":6,\"hidden\":[5,4],\"outputs\":3,\"activation\":\"relu\"}"));
	assert_non_null(strstr(text, meta.model_hash));
	assert_non_null(strstr(text, "model/0.weight"));
	assert_non_null(strstr(text, "[5, 6]"));
	assert_non_null(strstr(text, "model/4.bias"));
	assert_non_null(strstr(text, "optimizer/momentum_buffer/4.weight  [3, 4]"));
	assert_non_null(strstr(text, "shard-1.h5"));
	assert_non_null(strstr(text, "model.h5"));
	free(text);

	/* no checkpoint there */
	assert_int_equal(ckpt_inspect(dir, stdout, &err), -ENOENT);
	assert_true(tu_has(&err, "/inspect: not a dtrain checkpoint (no MANIFEST.json)"));
	free(ckpt);
	free(dir);
}

/* --- main --- */

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_manifest_round_trip),
		cmocka_unit_test(test_manifest_refusals),
		cmocka_unit_test(test_manifest_tokenizer),
		cmocka_unit_test(test_round_trip_sgd),
		cmocka_unit_test(test_round_trip_adamw),
		cmocka_unit_test(test_sharded_state),
		cmocka_unit_test(test_reader),
		cmocka_unit_test(test_damage),
		cmocka_unit_test(test_manifest_too_large),
		cmocka_unit_test(test_find_latest),
		cmocka_unit_test(test_list_entries),
		cmocka_unit_test(test_list_strays),
		cmocka_unit_test(test_hostile_shapes),
		cmocka_unit_test(test_hostile_types),
		cmocka_unit_test(test_hostile_missing_dataset),
		cmocka_unit_test(test_export),
		cmocka_unit_test(test_inspect),
		cmocka_unit_test(test_format1),
		cmocka_unit_test(test_config_canonical),
	};

	return cmocka_run_group_tests(tests, NULL, tu_teardown);
}
