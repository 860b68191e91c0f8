/*
 * test_write.c - the write side of checkpoints (checkpoint/write.c and
 * commit.c): shards, the root file and the commit, checked with plain HDF5
 * and zlib rather than with the module's own readers (which test_read
 * covers), then with ckpt_verify as a reader would.
 *
 * The model: an MLP of widths 5-4-3-2 (tmodel.h: 3 blocks, a weight and a
 * bias each, "0.weight" .. "4.bias") in 2 pipeline stages, blocks 0-1 and
 * 2; sgd (one state) and adamw (two). Every float of a save is distinct and
 * exact, so a value read back names where it came from.
 *
 * Sections: fixtures, reading back, saves, refusals and failures, main.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
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
#include <zlib.h>

#include "checkpoint/ckpt.h"
#include "tests/checkpoint/tmodel.h"
#include "tests/testutil.h"

/* A directory a save works in, by its path (struct ckpt_dir, fd -1: opened
 * at each call, as a one-shot tool does). */
#define AT(p) (&(struct ckpt_dir){ .fd = -1, .path = (p) })

#define N_STAGES 2
#define N_BLOCKS 3
#define N_TENSORS (2 * N_BLOCKS)

/* --- fixtures --- */

static const int64_t widths[4] = { 5, 4, 3, 2 };
static const int stage_first[3] = { 0, 2, 3 };

/* The whole model's tensor table, offsets from the model's start, as the
 * root file and the commit take it. */
static struct ckpt_tensor model[N_TENSORS];

static const struct ckpt_tensor *model_tensors(void)
{
	assert_int_equal(tm_tensors(widths, 0, N_BLOCKS, model), N_TENSORS);
	return model;
}

static void make_meta(struct ckpt_meta *m, const char *optimizer, int64_t step)
{
	struct dt_err err = { 0 };
	int l;

	memset(m, 0, sizeof(*m));
	m->step = step;
	m->steps_per_epoch = 7;
	m->epoch = step / 7;
	m->epoch_step = step % 7;
	m->total_steps = 1000;
	m->lr = 0.0125;
	m->rng_seed = 0xfedcba9876543210ull;
	m->rng_stream = (uint64_t)m->epoch;
	m->shuffle = true;
	m->global_batch = 64;
	m->train_rows = 448;
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
	tm_model(m, widths, N_BLOCKS, "relu");
	snprintf(m->spec_hash, sizeof(m->spec_hash), "0123456789abcdef");
	m->data = 1;
	m->pipeline = N_STAGES;
	for (l = 0; l <= N_STAGES; l++)
		m->stage_first[l] = stage_first[l];
	snprintf(m->created, sizeof(m->created), "2026-11-21T10:00:00Z");
	snprintf(m->job_id, sizeof(m->job_id), "4242");
	if (ckpt_meta_finish(m, &err))
		fail_msg("ckpt_meta_finish: %s", err.msg);
}

/* Float i of part p (0 params, 1.. states) of stage k at step `step`:
 * distinct for every (step, k, p, i) and exact in float32. */
static float value(int64_t step, int k, int p, size_t i)
{
	return (float)(step * 1000 + k * 300 + p * 100) + (float)i / 64.0f;
}

/* One stage's tensors as the runtime holds them: its table (offsets from
 * the stage's start) and its buffers. */
struct stage {
	size_t n;
	float *t[1 + CKPT_MAX_STATES]; /* params, then each state */
	struct ckpt_tensor tensors[N_TENSORS];
	int n_tensors;
};

/* Stage k of an MLP of widths w (N_BLOCKS layers, stage_first's split). */
static void stage_fill_widths(struct stage *st, const struct ckpt_meta *m, const int64_t *w,
			      int k)
{
	size_t i;
	int p;

	memset(st, 0, sizeof(*st));
	st->n_tensors = tm_tensors(w, stage_first[k], stage_first[k + 1], st->tensors);
	st->n = tm_floats(w, stage_first[k], stage_first[k + 1]);
	for (p = 0; p <= m->n_states; p++) {
		st->t[p] = malloc(st->n * sizeof(float));
		assert_non_null(st->t[p]);
		for (i = 0; i < st->n; i++)
			st->t[p][i] = value(m->step, k, p, i);
	}
}

static void stage_fill(struct stage *st, const struct ckpt_meta *m, int k)
{
	stage_fill_widths(st, m, widths, k);
}

static void stage_free(struct stage *st)
{
	int p;

	for (p = 0; p <= CKPT_MAX_STATES; p++) {
		free(st->t[p]);
		st->t[p] = NULL;
	}
}

static struct ckpt_stage_view view_of(const struct stage *st, const struct ckpt_meta *m, int k)
{
	struct ckpt_stage_view v = { 0 };
	int s;

	v.stage = k;
	v.first_block = stage_first[k];
	v.n_blocks = stage_first[k + 1] - stage_first[k];
	v.tensors = st->tensors;
	v.n_tensors = st->n_tensors;
	v.n = st->n;
	v.params = st->t[0];
	for (s = 0; s < m->n_states; s++)
		v.states[s] = st->t[1 + s];
	return v;
}

static char *path2(const char *a, const char *b)
{
	char *p = NULL;

	assert_true(asprintf(&p, "%s/%s", a, b) > 0);
	return p;
}

/* A fresh checkpoint directory under the scratch directory. */
static char *ckpt_dir(const char *name)
{
	char *dir = path2(tu_scratch(), name);

	dt_remove_tree(dir);
	assert_int_equal(dt_mkdirs(dir, 0755), 0);
	return dir;
}

/* Writes every file of a save of m into the tmp directory tmp; files[]
 * gets what the commit needs. */
static void write_files_in(const struct ckpt_dir *tmp, const struct ckpt_meta *m,
			   struct ckpt_file *files)
{
	struct ckpt_shard_writer w = { 0 };
	struct dt_err err = { 0 };
	struct stage st[N_STAGES];
	int k;

	for (k = 0; k < N_STAGES; k++) {
		struct ckpt_stage_view v;

		stage_fill(&st[k], m, k);
		v = view_of(&st[k], m, k);
		if (ckpt_shard_begin(&w, tmp, m, &v, &err) || ckpt_shard_write(&w, &err))
			fail_msg("shard %d: %s", k, err.msg);
		memset(&files[k], 0, sizeof(files[k]));
		ckpt_shard_name(k, files[k].name, sizeof(files[k].name));
		files[k].stage = k;
		files[k].size = w.size;
		files[k].crc = w.crc;
		assert_true(w.write_s >= 0);
		stage_free(&st[k]);
	}
	ckpt_shard_free(&w);
	if (ckpt_root_write(tmp, m, model_tensors(), N_TENSORS, &err))
		fail_msg("ckpt_root_write: %s", err.msg);
	if (ckpt_file_seal(tmp, "model.h5", &files[N_STAGES].size, &files[N_STAGES].crc, &err))
		fail_msg("ckpt_file_seal: %s", err.msg);
	snprintf(files[N_STAGES].name, sizeof(files[N_STAGES].name), "model.h5");
	files[N_STAGES].stage = -1;
	files[N_STAGES].is_piece = false;
}

/* Writes every file of a save of m into its tmp directory under dir
 * (created here, by path); files[] gets what the commit needs. */
static void write_files(const char *dir, const struct ckpt_meta *m, struct ckpt_file *files)
{
	char tmp[4096];

	ckpt_tmp_path(dir, m->step, tmp, sizeof(tmp));
	assert_int_equal(dt_mkdirs(tmp, 0755), 0);
	write_files_in(AT(tmp), m, files);
}

/* A whole save of step `step`, committed with `keep`. */
static void save(const char *dir, const char *optimizer, int64_t step, int keep)
{
	struct ckpt_file files[N_STAGES + 1];
	struct dt_err err = { 0 };
	struct ckpt_meta m;
	char tmp[4096];

	make_meta(&m, optimizer, step);
	write_files(dir, &m, files);
	ckpt_tmp_path(dir, step, tmp, sizeof(tmp));
	if (ckpt_commit(AT(dir), AT(tmp), &m, model_tensors(), N_TENSORS, files, N_STAGES + 1, keep, NULL, &err))
		fail_msg("ckpt_commit: %s", err.msg);
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* The committed steps under dir, as "10,20," (names step-*, ascending). */
static void committed(const char *dir, char *out, size_t size)
{
	char path[4096];
	int64_t s;

	out[0] = '\0';
	for (s = 0; s <= 100; s++) {
		ckpt_final_path(dir, s, path, sizeof(path));
		if (exists(path))
			snprintf(out + strlen(out), size - strlen(out), "%lld,", (long long)s);
	}
}

static void assert_latest(const char *dir, const char *want)
{
	char *latest = path2(dir, "latest"), buf[64];
	ssize_t n = readlink(latest, buf, sizeof(buf) - 1);

	assert_true(n > 0);
	buf[n] = '\0';
	assert_string_equal(buf, want);
	free(latest);
}

/* --- reading back, with plain HDF5 --- */

static hid_t open_h5(const char *path)
{
	hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), f;

	assert_true(fapl >= 0);
	assert_true(H5Pset_file_locking(fapl, 0, 1) >= 0);
	f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
	H5Pclose(fapl);
	if (f < 0)
		fail_msg("cannot open %s with HDF5", path);
	return f;
}

static int64_t attr_int(hid_t f, const char *name)
{
	int64_t v = -1;
	hid_t a = H5Aopen(f, name, H5P_DEFAULT);

	assert_true(a >= 0);
	assert_true(H5Aread(a, H5T_NATIVE_INT64, &v) >= 0);
	H5Aclose(a);
	return v;
}

/* A string attribute (fixed-length) into out. */
static void attr_str(hid_t f, const char *name, char *out, size_t size)
{
	hid_t a = H5Aopen(f, name, H5P_DEFAULT), ft, mt;

	assert_true(a >= 0);
	ft = H5Aget_type(a);
	assert_int_equal(H5Tget_class(ft), H5T_STRING);
	assert_false(H5Tis_variable_str(ft));
	assert_true(H5Tget_size(ft) <= size);
	mt = H5Tcopy(ft);
	assert_true(H5Aread(a, mt, out) >= 0);
	H5Tclose(mt);
	H5Tclose(ft);
	H5Aclose(a);
}

/* An integer array attribute of exactly n elements. */
static void attr_ints(hid_t f, const char *name, int64_t *out, hsize_t n)
{
	hid_t a = H5Aopen(f, name, H5P_DEFAULT), sp;
	hsize_t got = 0;

	assert_true(a >= 0);
	sp = H5Aget_space(a);
	assert_int_equal(H5Sget_simple_extent_ndims(sp), 1);
	H5Sget_simple_extent_dims(sp, &got, NULL);
	assert_int_equal(got, n);
	assert_true(H5Aread(a, H5T_NATIVE_INT64, out) >= 0);
	H5Sclose(sp);
	H5Aclose(a);
}

static void check_meta_attrs(hid_t f, const struct ckpt_meta *m)
{
	char s[128], *config = malloc(CKPT_CONFIG_MAX);
	int64_t v[8];
	double lr = 0;
	hid_t a;
	int i;

	attr_str(f, "format", s, sizeof(s));
	assert_string_equal(s, CKPT_FORMAT);
	assert_int_equal(attr_int(f, "format_version"), CKPT_VERSION);
	assert_int_equal(attr_int(f, "step"), m->step);
	assert_int_equal(attr_int(f, "epoch"), m->epoch);
	assert_int_equal(attr_int(f, "epoch_step"), m->epoch_step);
	assert_int_equal(attr_int(f, "steps_per_epoch"), 7);
	assert_int_equal(attr_int(f, "total_steps"), 1000);
	assert_int_equal(attr_int(f, "global_batch"), 64);
	assert_int_equal(attr_int(f, "train_rows"), 448);
	assert_int_equal(attr_int(f, "optimizer_step"), m->step);
	assert_int_equal(attr_int(f, "shuffle"), 1);
	assert_int_equal(attr_int(f, "layout_data"), 1);
	assert_int_equal(attr_int(f, "layout_pipeline"), N_STAGES);
	a = H5Aopen(f, "rng_seed", H5P_DEFAULT);
	{
		uint64_t seed = 0;

		assert_true(H5Aread(a, H5T_NATIVE_UINT64, &seed) >= 0);
		assert_true(seed == 0xfedcba9876543210ull);
	}
	H5Aclose(a);
	a = H5Aopen(f, "lr", H5P_DEFAULT);
	assert_true(H5Aread(a, H5T_NATIVE_DOUBLE, &lr) >= 0);
	H5Aclose(a);
	assert_true(lr == 0.0125);
	attr_str(f, "optimizer", s, sizeof(s));
	assert_string_equal(s, m->optimizer);
	attr_str(f, "optimizer_states", s, sizeof(s));
	assert_string_equal(s, m->n_states == 1 ? "momentum_buffer" : "exp_avg,exp_avg_sq");
	/* the model as the module knows it: a type and a config, no widths */
	attr_str(f, "model_type", s, sizeof(s));
	assert_string_equal(s, "mlp");
	assert_non_null(config);
	attr_str(f, "model_config", config, CKPT_CONFIG_MAX);
	assert_string_equal(config, m->model_config);
	free(config);
	assert_int_equal(attr_int(f, "blocks"), m->n_blocks);
	assert_int_equal(H5Aexists(f, "widths"), 0);
	assert_int_equal(H5Aexists(f, "activation"), 0);
	attr_str(f, "model_hash", s, sizeof(s));
	assert_string_equal(s, m->model_hash);
	attr_str(f, "spec_hash", s, sizeof(s));
	assert_string_equal(s, "0123456789abcdef");
	attr_str(f, "created", s, sizeof(s));
	assert_string_equal(s, "2026-11-21T10:00:00Z");
	attr_str(f, "job_id", s, sizeof(s));
	assert_string_equal(s, "4242");
	attr_ints(f, "stage_first", v, N_STAGES + 1);
	for (i = 0; i <= N_STAGES; i++)
		assert_int_equal(v[i], stage_first[i]);
}

/* Reads the dataset of layer l's tensor `which` ("weight" or "bias", so
 * "<2l>.<which>") for part p in f, checking float32, the shape, then every
 * value against part p of the tensors of the stage holding block l. */
static void check_tensor(hid_t f, const struct ckpt_meta *m, int l, int p, const char *which)
{
	char ds[128];
	float got[64];
	hsize_t dims[2] = { 0, 0 };
	size_t off, n, i;
	int k = l < stage_first[1] ? 0 : 1, j;
	hid_t d, sp, t;

	if (p == 0)
		snprintf(ds, sizeof(ds), "model/%d.%s", 2 * l, which);
	else
		snprintf(ds, sizeof(ds), "optimizer/%s/%d.%s", m->states[p - 1], 2 * l, which);
	d = H5Dopen2(f, ds, H5P_DEFAULT);
	if (d < 0)
		fail_msg("no dataset %s", ds);
	t = H5Dget_type(d);
	assert_true(H5Tequal(t, H5T_IEEE_F32LE) > 0);
	H5Tclose(t);
	sp = H5Dget_space(d);
	j = H5Sget_simple_extent_ndims(sp);
	H5Sget_simple_extent_dims(sp, dims, NULL);
	H5Sclose(sp);
	if (!strcmp(which, "weight")) {
		assert_int_equal(j, 2);
		assert_int_equal(dims[0], widths[l + 1]);
		assert_int_equal(dims[1], widths[l]);
		n = (size_t)(dims[0] * dims[1]);
	} else {
		assert_int_equal(j, 1);
		assert_int_equal(dims[0], widths[l + 1]);
		n = (size_t)dims[0];
	}
	assert_true(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) >= 0);
	H5Dclose(d);
	/* where the tensor starts in the stage's layout: W then b per layer */
	off = tm_floats(widths, stage_first[k], l);
	if (strcmp(which, "weight"))
		off += (size_t)(widths[l + 1] * widths[l]);
	for (i = 0; i < n; i++)
		if (got[i] != value(m->step, k, p, off + i))
			fail_msg("%s[%zu]: got %g, want %g", ds, i, (double)got[i],
				 (double)value(m->step, k, p, off + i));
}

/* Every tensor of the blocks in [first, last] of f. */
static void check_tensors(hid_t f, const struct ckpt_meta *m, int first, int last)
{
	int l, p;

	for (l = first; l <= last; l++)
		for (p = 0; p <= m->n_states; p++) {
			check_tensor(f, m, l, p, "weight");
			check_tensor(f, m, l, p, "bias");
		}
}

/* size and CRC of a file by reading it with zlib (not ckpt_crc32) */
static void file_sum(const char *path, uint64_t *size, uint32_t *crc)
{
	size_t len = 0;
	char *text = tu_read(path, &len);

	assert_non_null(text);
	*size = len;
	*crc = (uint32_t)crc32(0L, (const Bytef *)text, (uInt)len);
	free(text);
}

/* Everything a committed save of m under dir must be. */
static void check_committed(const char *dir, const struct ckpt_meta *m)
{
	char final[4096], tmp[4096], name[32], *path;
	struct ckpt_manifest *man = calloc(1, sizeof(*man));
	const struct ckpt_tensor *t = model_tensors();
	struct dt_err err = { 0 };
	char cwd[PATH_MAX];
	int64_t blocks[2];
	uint64_t size;
	uint32_t crc;
	hid_t f;
	int i, j, k;

	assert_non_null(man);
	ckpt_final_path(dir, m->step, final, sizeof(final));
	ckpt_tmp_path(dir, m->step, tmp, sizeof(tmp));
	ckpt_step_name(m->step, name, sizeof(name));
	assert_true(exists(final));
	assert_false(exists(tmp));
	assert_latest(dir, name);

	/* the manifest lists every file with its real size and CRC */
	if (ckpt_manifest_read(final, man, &err))
		fail_msg("ckpt_manifest_read: %s", err.msg);
	assert_int_equal(man->n_files, N_STAGES + 1);
	assert_int_equal(man->meta.step, m->step);
	for (i = 0; i < man->n_files; i++) {
		path = path2(final, man->files[i].name);
		file_sum(path, &size, &crc);
		assert_int_equal(man->files[i].size, size);
		assert_int_equal(man->files[i].crc, crc);
		free(path);
	}
	/* and the model's tensors, as the save gave them */
	assert_int_equal(man->n_tensors, N_TENSORS);
	for (i = 0; i < N_TENSORS; i++) {
		assert_string_equal(man->tensors[i].name, t[i].name);
		assert_int_equal(man->tensors[i].block, t[i].block);
		assert_int_equal(man->tensors[i].ndim, t[i].ndim);
		for (j = 0; j < t[i].ndim; j++)
			assert_int_equal(man->tensors[i].shape[j], t[i].shape[j]);
	}
	if (ckpt_verify(final, false, &err))
		fail_msg("ckpt_verify: %s", err.msg);

	/* each shard: the meta, its stage and blocks, its tensors (by name,
	 * nothing left at format 1's paths) */
	for (k = 0; k < N_STAGES; k++) {
		char shard[32];

		ckpt_shard_name(k, shard, sizeof(shard));
		path = path2(final, shard);
		f = open_h5(path);
		check_meta_attrs(f, m);
		assert_int_equal(attr_int(f, "stage"), k);
		attr_ints(f, "stage_blocks", blocks, 2);
		assert_int_equal(blocks[0], stage_first[k]);
		assert_int_equal(blocks[1], stage_first[k + 1] - 1);
		assert_int_equal(H5Aexists(f, "layers"), 0);
		assert_int_equal(H5Lexists(f, "layers", H5P_DEFAULT), 0);
		check_tensors(f, m, stage_first[k], stage_first[k + 1] - 1);
		H5Fclose(f);
		free(path);
	}

	/* the root, read from elsewhere: its virtual datasets find the shards
	 * next to it, whatever the current directory */
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir("/"), 0);
	path = path2(final, "model.h5");
	f = open_h5(path);
	check_meta_attrs(f, m);
	check_tensors(f, m, 0, m->n_blocks - 1);
	H5Fclose(f);
	free(path);
	assert_int_equal(chdir(cwd), 0);
	free(man);
}

/* --- saves --- */

static void test_save_sgd(void **state)
{
	char *dir = ckpt_dir("sgd");
	struct ckpt_meta m;

	(void)state;
	make_meta(&m, "sgd", 10);
	save(dir, "sgd", 10, 3);
	check_committed(dir, &m);
	free(dir);
}

static void test_save_adamw(void **state)
{
	char *dir = ckpt_dir("adamw");
	struct ckpt_meta m;

	(void)state;
	make_meta(&m, "adamw", 20);
	save(dir, "adamw", 20, 3);
	check_committed(dir, &m);
	free(dir);
}

/* The caller may change its tensors once begin returns; the writer's
 * snapshot is reused, not regrown, for a save of the same size. */
static void test_snapshot_is_copy(void **state)
{
	char *dir = ckpt_dir("copy"), tmp[4096], *path;
	struct ckpt_shard_writer w = { 0 };
	struct dt_err err = { 0 };
	struct ckpt_stage_view v;
	struct ckpt_meta m;
	struct stage st;
	float *snap;
	size_t i;
	hid_t f;

	(void)state;
	make_meta(&m, "adamw", 30);
	ckpt_tmp_path(dir, 30, tmp, sizeof(tmp));
	assert_int_equal(dt_mkdirs(tmp, 0755), 0);
	stage_fill(&st, &m, 0);
	v = view_of(&st, &m, 0);
	if (ckpt_shard_begin(&w, AT(tmp), &m, &v, &err))
		fail_msg("ckpt_shard_begin: %s", err.msg);
	for (i = 0; i < st.n; i++)
		st.t[0][i] = st.t[1][i] = st.t[2][i] = -1.0f;
	if (ckpt_shard_write(&w, &err))
		fail_msg("ckpt_shard_write: %s", err.msg);
	path = path2(tmp, "shard-0.h5");
	f = open_h5(path);
	check_tensors(f, &m, 0, 1);
	H5Fclose(f);

	/* again: same buffer; this time the changed values are saved */
	snap = w.snap;
	assert_true(w.snap_cap >= 3 * st.n);
	if (ckpt_shard_begin(&w, AT(tmp), &m, &v, &err) || ckpt_shard_write(&w, &err))
		fail_msg("second save: %s", err.msg);
	assert_ptr_equal(w.snap, snap);
	f = open_h5(path);
	{
		float got[20];
		hid_t d = H5Dopen2(f, "optimizer/exp_avg_sq/0.weight", H5P_DEFAULT);

		assert_true(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) >= 0);
		for (i = 0; i < 20; i++)
			assert_true(got[i] == -1.0f);
		H5Dclose(d);
	}
	H5Fclose(f);
	ckpt_shard_free(&w);
	ckpt_shard_free(&w); /* safe twice, and on a zeroed writer */
	stage_free(&st);
	free(path);
	free(dir);
}

/* An async save's shard: the copy on a writer thread, which tells the
 * trainer when it is made, then writes; the trainer changes its tensors
 * (the next optimizer update) only once told. */
struct deferred {
	struct ckpt_shard_writer w;
	struct dt_err err;
	int rc;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool copied;
};

static void *deferred_writer(void *arg)
{
	struct deferred *d = arg;

	ckpt_shard_copy(&d->w);
	pthread_mutex_lock(&d->lock);
	d->copied = true;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
	d->rc = ckpt_shard_write(&d->w, &d->err);
	return NULL;
}

/* view.defer_copy: ckpt_shard_begin allocates the snapshot but copies
 * nothing (values changed before the copy are the ones saved); the copy
 * takes the tensors as they are when it runs, so that tensors changed once
 * it is made leave the file with the values of the save. */
static void test_deferred_copy(void **state)
{
	char *dir = ckpt_dir("deferred"), tmp[4096], *path;
	struct deferred d;
	struct ckpt_stage_view v;
	struct ckpt_meta m;
	struct stage st;
	pthread_t th;
	size_t i;
	int p;
	hid_t f;

	(void)state;
	memset(&d, 0, sizeof(d));
	make_meta(&m, "adamw", 50);
	ckpt_tmp_path(dir, 50, tmp, sizeof(tmp));
	assert_int_equal(dt_mkdirs(tmp, 0755), 0);
	stage_fill(&st, &m, 0);
	v = view_of(&st, &m, 0);
	v.defer_copy = true;
	for (p = 0; p < 3; p++)       /* what begin would copy if it did */
		for (i = 0; i < st.n; i++)
			st.t[p][i] = -2.0f;
	if (ckpt_shard_begin(&d.w, AT(tmp), &m, &v, &d.err))
		fail_msg("ckpt_shard_begin: %s", d.err.msg);
	assert_non_null(d.w.snap);
	assert_true(d.w.snap_cap >= 3 * st.n);
	assert_int_equal(d.w.copy_parts, 3);
	for (p = 0; p < 3; p++)       /* the state of step 50 */
		for (i = 0; i < st.n; i++)
			st.t[p][i] = value(50, 0, p, i);

	assert_int_equal(pthread_mutex_init(&d.lock, NULL), 0);
	assert_int_equal(pthread_cond_init(&d.cond, NULL), 0);
	assert_int_equal(pthread_create(&th, NULL, deferred_writer, &d), 0);
	pthread_mutex_lock(&d.lock);
	while (!d.copied)
		pthread_cond_wait(&d.cond, &d.lock);
	pthread_mutex_unlock(&d.lock);
	for (p = 0; p < 3; p++)       /* the next update, while the bytes are written */
		for (i = 0; i < st.n; i++)
			st.t[p][i] = -1.0f;
	assert_int_equal(pthread_join(th, NULL), 0);
	if (d.rc)
		fail_msg("ckpt_shard_write: %s", d.err.msg);
	assert_int_equal(d.w.copy_parts, 0);
	path = path2(tmp, "shard-0.h5");
	f = open_h5(path);
	check_tensors(f, &m, 0, 1);
	H5Fclose(f);

	/* a failed begin leaves no copy to make */
	dt_err_clear(&d.err);
	assert_int_equal(ckpt_shard_begin(&d.w, AT("/nonexistent/.step-00000050.tmp"), &m, &v, &d.err),
			 -ENOENT);
	assert_int_equal(d.w.copy_parts, 0);

	pthread_cond_destroy(&d.cond);
	pthread_mutex_destroy(&d.lock);
	ckpt_shard_free(&d.w);
	stage_free(&st);
	free(path);
	free(dir);
}

/* Writes tmpdir/model.h5 of the tensors t [n] with the cache (or without:
 * cache NULL) into a fresh directory under dir; returns the file's bytes
 * (caller frees). */
static char *root_bytes(const char *dir, const char *name, struct ckpt_root_cache *cache,
			const struct ckpt_meta *m, const struct ckpt_tensor *t, int n, size_t *len)
{
	struct dt_err err = { 0 };
	char *tmp = path2(dir, name), *path, *bytes;
	int rc;

	assert_int_equal(dt_mkdirs(tmp, 0755), 0);
	rc = cache ? ckpt_root_write_cached(cache, AT(tmp), m, t, n, &err)
		   : ckpt_root_write(AT(tmp), m, t, n, &err);
	if (rc)
		fail_msg("root file %s: %s", name, err.msg);
	path = path2(tmp, "model.h5");
	bytes = tu_read(path, len);
	assert_non_null(bytes);
	free(path);
	free(tmp);
	return bytes;
}

/* A root file written from the cache of an earlier save (its attributes
 * written over) is bitwise the file a fresh write gives, and reads as one;
 * another model, tensor table or layout, or an attribute of another size,
 * is written afresh. */
static void test_root_cached(void **state)
{
	char *dir = ckpt_dir("rootcache"), *a, *b, *path, *tmp;
	struct ckpt_tensor t[N_TENSORS];
	struct ckpt_root_cache cache;
	struct dt_err err = { 0 };
	struct ckpt_meta m;
	size_t la, lb;
	hid_t f;
	int round;

	(void)state;
	memset(&cache, 0, sizeof(cache));
	make_meta(&m, "adamw", 10);
	free(root_bytes(dir, "first", &cache, &m, model_tensors(), N_TENSORS, &la));
	assert_non_null(cache.image);
	assert_int_equal(cache.meta.step, 10);
	for (round = 0; round < 5; round++) {
		char name[32];

		/* 0: a later save of the same run; 1: another time, job id of
		 * the same length, and lr; 2: a longer job id (written afresh);
		 * 3: sgd, other datasets (afresh); 4: the model, optimizer and
		 * layout of 3 but a tensor of another name, other datasets that
		 * the meta does not tell (afresh: the cache knows its tensors) */
		make_meta(&m, round >= 3 ? "sgd" : "adamw", 20 + round);
		memcpy(t, model_tensors(), sizeof(t));
		if (round == 4)
			snprintf(t[5].name, sizeof(t[5].name), "4.b");
		if (round > 0) /* round 0 keeps what check_meta_attrs expects */
			snprintf(m.created, sizeof(m.created), "2027-01-0%uT23:59:5%uZ",
				 (unsigned)round % 10u, (unsigned)round % 10u);
		if (round == 1) {
			snprintf(m.job_id, sizeof(m.job_id), "9999");
			m.lr = 0.5;
		}
		if (round == 2)
			snprintf(m.job_id, sizeof(m.job_id), "123456789");
		snprintf(name, sizeof(name), "cached-%d", round);
		a = root_bytes(dir, name, &cache, &m, t, N_TENSORS, &la);
		snprintf(name, sizeof(name), "fresh-%d", round);
		b = root_bytes(dir, name, NULL, &m, t, N_TENSORS, &lb);
		assert_int_equal(la, lb);
		if (memcmp(a, b, la))
			fail_msg("round %d: the root file from the cache differs from a fresh one", round);
		/* from the cache: the cache still has the first meta */
		assert_int_equal(cache.meta.step, round < 2 ? 10 : 20 + round);
		tmp = path2(dir, "cached-0");
		path = path2(tmp, "model.h5");
		if (round == 0) {
			f = open_h5(path);
			check_meta_attrs(f, &m);
			H5Fclose(f);
		}
		free(path);
		free(tmp);
		free(a);
		free(b);
	}
	/* a failure to write is reported as without the cache */
	assert_int_equal(ckpt_root_write_cached(&cache, AT("/nonexistent/.step-1.tmp"), &m, t, N_TENSORS,
						&err),
			 -ENOENT);
	assert_true(tu_has(&err, "/nonexistent/.step-1.tmp/model.h5: cannot create checkpoint root file"));
	ckpt_root_cache_free(&cache);
	ckpt_root_cache_free(&cache);
	free(dir);
}

/* keep = 2: only the two newest stay; a commit of an older step (after a
 * rollback) is itself never deleted. */
static void test_retention(void **state)
{
	char *dir = ckpt_dir("keep"), got[256];

	(void)state;
	save(dir, "sgd", 10, 2);
	save(dir, "sgd", 20, 2);
	committed(dir, got, sizeof(got));
	assert_string_equal(got, "10,20,");
	save(dir, "sgd", 30, 2);
	committed(dir, got, sizeof(got));
	assert_string_equal(got, "20,30,");
	save(dir, "sgd", 40, 1);
	committed(dir, got, sizeof(got));
	assert_string_equal(got, "40,");
	assert_latest(dir, "step-00000040");
	save(dir, "sgd", 5, 1);
	committed(dir, got, sizeof(got));
	assert_string_equal(got, "5,40,");
	assert_latest(dir, "step-00000005");
	free(dir);
}

/* A second commit of the same step (a requeued job redoing a save)
 * replaces the first, leaving nothing aside. */
static void test_same_step_twice(void **state)
{
	char *dir = ckpt_dir("twice"), got[256], *aside;
	struct ckpt_meta m;

	(void)state;
	save(dir, "sgd", 10, 3);
	save(dir, "adamw", 10, 3);
	make_meta(&m, "adamw", 10);
	check_committed(dir, &m);
	committed(dir, got, sizeof(got));
	assert_string_equal(got, "10,");
	aside = path2(dir, ".step-00000010.old.tmp");
	assert_false(exists(aside));
	free(aside);
	free(dir);
}

/* The same state saved twice gives the same bytes: no time stamps, no
 * uninitialised bytes in the files. */
static void test_reproducible(void **state)
{
	char *dir = ckpt_dir("again"), tmp[4096];
	struct ckpt_file a[N_STAGES + 1], b[N_STAGES + 1];
	struct ckpt_meta m;
	int i;

	(void)state;
	make_meta(&m, "adamw", 10);
	write_files(dir, &m, a);
	ckpt_tmp_path(dir, 10, tmp, sizeof(tmp));
	assert_int_equal(dt_remove_tree(tmp), 0);
	sleep(1); /* a time stamp, if any, would differ */
	write_files(dir, &m, b);
	for (i = 0; i <= N_STAGES; i++) {
		assert_string_equal(a[i].name, b[i].name);
		assert_int_equal(a[i].size, b[i].size);
		assert_int_equal(a[i].crc, b[i].crc);
	}
	free(dir);
}

static void test_clean_tmp(void **state)
{
	char *dir = ckpt_dir("clean"), *p[6];
	struct dt_err err = { 0 };
	int i;

	(void)state;
	p[0] = path2(dir, ".step-00000010.tmp");
	p[1] = path2(dir, ".step-00000010.old.tmp");
	p[2] = path2(dir, "step-00000005");
	p[3] = path2(dir, ".step-file.tmp"); /* a file: not ours to remove */
	p[4] = path2(dir, "other.tmp");
	p[5] = path2(dir, ".step-00000010.tmp/shard-0.h5");
	for (i = 0; i < 6; i++)
		if (i != 3 && i != 5)
			assert_int_equal(dt_mkdirs(p[i], 0755), 0);
	tu_write_path(p[3], "x", 0644);
	tu_write_path(p[5], "partial", 0644);
	assert_int_equal(ckpt_clean_tmp(AT(dir), &err), 0);
	assert_false(exists(p[0]));
	assert_false(exists(p[1]));
	assert_true(exists(p[2]));
	assert_true(exists(p[3]));
	assert_true(exists(p[4]));
	for (i = 0; i < 6; i++)
		free(p[i]);

	/* a directory that is not there yet has nothing to clean */
	p[0] = path2(dir, "nowhere");
	assert_int_equal(ckpt_clean_tmp(AT(p[0]), &err), 0);
	assert_int_equal(err.count, 0);
	free(p[0]);
	free(dir);
}

static void test_names(void **state)
{
	char out[64];

	(void)state;
	ckpt_tmp_path("/c", 120, out, sizeof(out));
	assert_string_equal(out, "/c/.step-00000120.tmp");
	ckpt_final_path("/c", 120, out, sizeof(out));
	assert_string_equal(out, "/c/step-00000120");
}

/* ckpt_crc32 is zlib's CRC-32 (folded with PCLMULQDQ on x86-64 for long
 * buffers): the same value for every length, alignment, starting value and
 * split of a buffer into calls. */
static void test_crc32(void **state)
{
	size_t n = (3u << 20) + 77, len, off, cut;
	unsigned char *buf = malloc(n);
	uint32_t seed = 12345, c;

	(void)state;
	assert_non_null(buf);
	for (off = 0; off < n; off++) {
		seed = seed * 1103515245u + 12345u;
		buf[off] = (unsigned char)(seed >> 16);
	}
	for (len = 0; len <= 2100; len++)
		for (off = 0; off < 16; off += 5) {
			uint32_t init = len % 3 ? (uint32_t)(len * 2654435761u) : 0;

			assert_int_equal(ckpt_crc32(init, buf + off, len),
					 (uint32_t)crc32(init, buf + off, (uInt)len));
		}
	for (len = n - 64; len <= n - 3; len += 7) {
		c = ckpt_crc32(0, buf + n - len, len);
		assert_int_equal(c, (uint32_t)crc32(0, buf + n - len, (uInt)len));
		for (cut = 1; cut < len; cut = cut * 3 + 17)
			assert_int_equal(ckpt_crc32(ckpt_crc32(0, buf + n - len, cut),
						    buf + n - len + cut, len - cut),
					 c);
	}
	free(buf);
}

/* A shard of tensors of many MiB (written in chunks, handed to the disk
 * as it goes), from a snapshot and from the caller's own tensors
 * (view.borrow, a synchronous save): bitwise the same file, the CRC zlib
 * computes, the tensors as they were; borrowing allocates no snapshot. */
static void test_big_shard(void **state)
{
	static const int64_t big[N_BLOCKS + 1] = { 1500, 1500, 1500, 2 };
	char *dir = ckpt_dir("big"), tmp[2][4096], *path[2], *bytes[2];
	struct ckpt_shard_writer w[2] = { { 0 }, { 0 } };
	struct dt_err err = { 0 };
	struct ckpt_stage_view v;
	struct ckpt_meta m;
	struct stage st;
	size_t len[2], i, n;
	uint64_t size;
	uint32_t crc;
	float *got;
	hid_t f, d;
	int b;

	(void)state;
	make_meta(&m, "sgd", 40);
	tm_model(&m, big, N_BLOCKS, "relu"); /* stage 0: 2 x 1500 x 1501 floats */
	if (ckpt_meta_finish(&m, &err))
		fail_msg("ckpt_meta_finish: %s", err.msg);
	stage_fill_widths(&st, &m, big, 0);
	for (b = 0; b < 2; b++) {
		ckpt_tmp_path(dir, 40 + b, tmp[b], sizeof(tmp[b])); /* the same meta: the same bytes */
		assert_int_equal(dt_mkdirs(tmp[b], 0755), 0);
		v = view_of(&st, &m, 0);
		v.borrow = b == 1;
		if (ckpt_shard_begin(&w[b], AT(tmp[b]), &m, &v, &err) || ckpt_shard_write(&w[b], &err))
			fail_msg("shard (borrow %d): %s", b, err.msg);
		assert_true(b == 1 ? w[b].snap == NULL : w[b].snap != NULL);
		path[b] = path2(tmp[b], "shard-0.h5");
		file_sum(path[b], &size, &crc);
		assert_int_equal(size, w[b].size);
		assert_int_equal(crc, w[b].crc);
		assert_true(size > 2 * st.n * sizeof(float));
		bytes[b] = tu_read(path[b], &len[b]);
		assert_non_null(bytes[b]);
	}
	assert_int_equal(len[0], len[1]);
	assert_true(memcmp(bytes[0], bytes[1], len[0]) == 0);

	/* the largest tensors, read back with HDF5 */
	n = 1500 * 1500;
	got = malloc(n * sizeof(float));
	assert_non_null(got);
	f = open_h5(path[1]);
	d = H5Dopen2(f, "optimizer/momentum_buffer/2.weight", H5P_DEFAULT);
	assert_true(d >= 0);
	assert_true(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) >= 0);
	H5Dclose(d);
	H5Fclose(f);
	for (i = 0; i < n; i++)
		if (got[i] != st.t[1][1500 * 1501 + i])
			fail_msg("momentum_buffer 2.weight[%zu]: got %g, want %g", i,
				 (double)got[i], (double)st.t[1][1500 * 1501 + i]);
	free(got);
	for (b = 0; b < 2; b++) {
		ckpt_shard_free(&w[b]);
		free(bytes[b]);
		free(path[b]);
	}
	stage_free(&st);
	free(dir);
}

/* --- refusals and failures --- */

/* A full disk while the tensors are written: -ENOSPC naming the shard. */
static void test_enospc_shard(void **state)
{
	char *dir = ckpt_dir("enospc"), tmp[4096];
	struct ckpt_shard_writer w = { 0 };
	struct dt_err err = { 0 };
	struct ckpt_stage_view v;
	struct ckpt_meta m;
	struct stage st;

	(void)state;
	make_meta(&m, "sgd", 10);
	ckpt_tmp_path(dir, 10, tmp, sizeof(tmp));
	assert_int_equal(dt_mkdirs(tmp, 0755), 0);
	stage_fill(&st, &m, 1);
	v = view_of(&st, &m, 1);
	if (ckpt_shard_begin(&w, AT(tmp), &m, &v, &err))
		fail_msg("ckpt_shard_begin: %s", err.msg);
	setenv("DTRAIN_FAULT_WRITE", "enospc@100", 1);
	assert_int_equal(ckpt_shard_write(&w, &err), -ENOSPC);
	unsetenv("DTRAIN_FAULT_WRITE");
	assert_true(tu_has(&err, "/.step-00000010.tmp/shard-1.h5: cannot write checkpoint shard: No space left on device"));
	ckpt_shard_free(&w);
	stage_free(&st);
	free(dir);
}

/* A commit that fails (full disk writing the manifest) removes its tmp
 * directory and leaves the previous checkpoint and latest as they were. */
static void test_commit_failure(void **state)
{
	char *dir = ckpt_dir("failed"), tmp[4096], got[256];
	struct ckpt_file files[N_STAGES + 1];
	struct dt_err err = { 0 };
	struct ckpt_meta m;
	bool done = true;

	(void)state;
	save(dir, "sgd", 10, 3);
	make_meta(&m, "sgd", 20);
	write_files(dir, &m, files);
	ckpt_tmp_path(dir, 20, tmp, sizeof(tmp));
	setenv("DTRAIN_FAULT_WRITE", "enospc@0", 1);
	assert_int_equal(ckpt_commit(AT(dir), AT(tmp), &m, model_tensors(), N_TENSORS, files, N_STAGES + 1,
				     3, &done, &err),
			 -ENOSPC);
	unsetenv("DTRAIN_FAULT_WRITE");
	assert_false(done);
	assert_true(tu_has(&err, "/.step-00000020.tmp/MANIFEST.json: cannot write: No space left on device"));
	assert_false(exists(tmp));
	committed(dir, got, sizeof(got));
	assert_string_equal(got, "10,");
	make_meta(&m, "sgd", 10);
	check_committed(dir, &m);
	free(dir);
}

/* Files that cannot be created, root or not: a directory that is not
 * there. (A read-only directory does not stop root, which runs the tests.) */
static void test_missing_dir(void **state)
{
	char *dir = ckpt_dir("missing"), *gone = path2(dir, ".step-00000010.tmp"), *p;
	struct ckpt_shard_writer w = { 0 };
	struct dt_err err = { 0 };
	struct ckpt_stage_view v;
	struct ckpt_meta m;
	struct stage st;
	uint64_t size;
	uint32_t crc;

	(void)state;
	make_meta(&m, "sgd", 10);
	stage_fill(&st, &m, 0);
	v = view_of(&st, &m, 0);
	assert_int_equal(ckpt_shard_begin(&w, AT(gone), &m, &v, &err), -ENOENT);
	assert_true(tu_has(&err, "/.step-00000010.tmp/shard-0.h5: cannot create checkpoint shard: No such file or directory"));
	assert_int_equal(ckpt_shard_write(&w, &err), -EINVAL); /* nothing begun */
	dt_err_clear(&err);
	assert_int_equal(ckpt_root_write(AT(gone), &m, model_tensors(), N_TENSORS, &err), -ENOENT);
	assert_true(tu_has(&err, "/.step-00000010.tmp/model.h5: cannot create checkpoint root file: No such file or directory"));
	dt_err_clear(&err);
	p = path2(gone, "model.h5");
	assert_int_equal(ckpt_file_seal(AT(gone), "model.h5", &size, &crc, &err), -ENOENT);
	assert_true(tu_has(&err, "/.step-00000010.tmp/model.h5: cannot open: No such file or directory"));
	ckpt_shard_free(&w);
	stage_free(&st);
	free(p);
	free(gone);
	free(dir);
}

/* A view that does not match the meta, or tensors that do not match the
 * view, and a meta or tensor table not consistent in itself, are refused
 * before any file is made. */
static void test_view_mismatch(void **state)
{
	char *dir = ckpt_dir("mismatch"), tmp[4096], *shard, *root;
	struct ckpt_tensor other[N_TENSORS];
	struct ckpt_shard_writer w = { 0 };
	struct dt_err err = { 0 };
	struct ckpt_stage_view v;
	struct ckpt_meta m;
	struct stage st;

	(void)state;
	make_meta(&m, "adamw", 10);
	ckpt_tmp_path(dir, 10, tmp, sizeof(tmp));
	assert_int_equal(dt_mkdirs(tmp, 0755), 0);
	shard = path2(tmp, "shard-0.h5");
	root = path2(tmp, "model.h5");
	stage_fill(&st, &m, 0);

	v = view_of(&st, &m, 0);
	v.n--;
	assert_int_equal(ckpt_shard_begin(&w, AT(tmp), &m, &v, &err), -EINVAL);
	assert_true(tu_has(&err, "shard-0.h5: stage 0 has 38 parameters but its tensors need 39"));

	dt_err_clear(&err);
	v = view_of(&st, &m, 0);
	v.n_blocks = 1;
	assert_int_equal(ckpt_shard_begin(&w, AT(tmp), &m, &v, &err), -EINVAL);
	assert_true(tu_has(&err, "shard-0.h5: stage 0 holds blocks 0..0 but the meta gives it 0..1"));

	/* tensors: none; one of another stage's block; one not where the
	 * one before it ends (the datasets would take the wrong floats) */
	dt_err_clear(&err);
	v = view_of(&st, &m, 0);
	v.n_tensors = 0;
	assert_int_equal(ckpt_shard_begin(&w, AT(tmp), &m, &v, &err), -EINVAL);
	assert_true(tu_has(&err, "shard-0.h5: stage 0 has no tensors"));

	dt_err_clear(&err);
	v = view_of(&st, &m, 0);
	assert_int_equal(tm_tensors(widths, 1, 3, other), 4); /* blocks 1 and 2 */
	v.tensors = other;
	assert_int_equal(ckpt_shard_begin(&w, AT(tmp), &m, &v, &err), -EINVAL);
	assert_true(tu_has(&err, "shard-0.h5: stage 0: tensor \"4.weight\" is not laid out in its blocks' order"));

	dt_err_clear(&err);
	v = view_of(&st, &m, 0);
	memcpy(other, st.tensors, sizeof(other));
	other[1].offset++;
	v.tensors = other;
	assert_int_equal(ckpt_shard_begin(&w, AT(tmp), &m, &v, &err), -EINVAL);
	assert_true(tu_has(&err, "shard-0.h5: stage 0: tensor \"0.bias\" is not laid out in its blocks' order"));

	dt_err_clear(&err);
	v = view_of(&st, &m, 0);
	v.stage = 2;
	assert_int_equal(ckpt_shard_begin(&w, AT(tmp), &m, &v, &err), -EINVAL);
	assert_true(tu_has(&err, "shard-2.h5: stage 2 is not one of the meta's 2 stages"));

	dt_err_clear(&err);
	v = view_of(&st, &m, 0);
	v.states[1] = NULL;
	assert_int_equal(ckpt_shard_begin(&w, AT(tmp), &m, &v, &err), -EINVAL);
	assert_true(tu_has(&err, "shard-0.h5: stage 0 lacks optimizer state \"exp_avg_sq\""));

	dt_err_clear(&err);
	v = view_of(&st, &m, 0);
	m.model_hash[0] = '\0'; /* ckpt_meta_finish not called */
	assert_int_equal(ckpt_shard_begin(&w, AT(tmp), &m, &v, &err), -EINVAL);
	assert_true(tu_has(&err, "model_hash does not match model type and config"));
	assert_true(tu_has(&err, "shard-0.h5: refusing to write a checkpoint with an inconsistent meta"));
	dt_err_clear(&err);
	assert_int_equal(ckpt_root_write(AT(tmp), &m, model_tensors(), N_TENSORS, &err), -EINVAL);
	assert_true(tu_has(&err, "model.h5: refusing to write a checkpoint with an inconsistent meta"));

	/* a root file of a table that leaves out the meta's last block */
	dt_err_clear(&err);
	make_meta(&m, "adamw", 10);
	assert_int_equal(ckpt_root_write(AT(tmp), &m, model_tensors(), N_TENSORS - 2, &err), -EINVAL);
	assert_true(tu_has(&err, "checkpoint tensors: block 2 has none (the model has 3 blocks)"));
	assert_true(tu_has(&err, "model.h5: refusing to write a checkpoint with an inconsistent meta or tensor table"));
	assert_false(exists(shard));
	assert_false(exists(root));

	ckpt_shard_free(&w);
	stage_free(&st);
	free(root);
	free(shard);
	free(dir);
}

/* After the rename the checkpoint is committed, whatever fails next: a
 * latest that cannot be replaced (here a directory) is an error that says
 * so, and retention still runs. */
static void test_latest_failure(void **state)
{
	char *dir = ckpt_dir("latest"), *latest = path2(dir, "latest"), *inside, got[256];
	struct ckpt_file files[N_STAGES + 1];
	struct dt_err err = { 0 };
	struct ckpt_meta m;
	char tmp[4096];
	bool done = false;

	(void)state;
	save(dir, "sgd", 10, 1);
	assert_int_equal(unlink(latest), 0);
	inside = path2(latest, "keep-me");
	assert_int_equal(dt_mkdirs(inside, 0755), 0);
	make_meta(&m, "sgd", 20);
	write_files(dir, &m, files);
	ckpt_tmp_path(dir, 20, tmp, sizeof(tmp));
	assert_int_not_equal(ckpt_commit(AT(dir), AT(tmp), &m, model_tensors(), N_TENSORS, files,
					 N_STAGES + 1, 1, &done, &err),
			     0);
	assert_true(done); /* committed, though the call failed */
	assert_true(tu_has(&err, "/latest: cannot point to step-00000020: "));
	assert_true(tu_has(&err, "(step-00000020 is committed)"));
	committed(dir, got, sizeof(got));
	assert_string_equal(got, "20,");
	assert_true(exists(inside));
	free(inside);
	free(latest);
	free(dir);
}

/* What the commit refuses, and that it then removes only its own tmp. */
static void test_commit_refusals(void **state)
{
	char *dir = ckpt_dir("refuse"), tmp[4096], *p;
	struct ckpt_file files[N_STAGES + 1], bad[N_STAGES + 1];
	const struct ckpt_tensor *t = model_tensors();
	struct dt_err err = { 0 };
	struct ckpt_meta m;

	(void)state;
	make_meta(&m, "sgd", 10);
#define REFUSED(want)                                                                   \
	do {                                                                            \
		dt_err_clear(&err);                                                     \
		assert_int_not_equal(ckpt_commit(AT(dir), AT(tmp), &m, t, N_TENSORS, bad, N_STAGES + 1, \
						 2, NULL, &err),                              \
				     0);                                                \
		assert_true(tu_has(&err, want));                                        \
		assert_false(exists(tmp));                                              \
	} while (0)

	ckpt_tmp_path(dir, 10, tmp, sizeof(tmp));
	write_files(dir, &m, files);
	memcpy(bad, files, sizeof(bad));
	snprintf(bad[0].name, sizeof(bad[0].name), "../shard-0.h5");
	REFUSED("files[0]: \"../shard-0.h5\" is not a plain file name");

	write_files(dir, &m, files);
	memcpy(bad, files, sizeof(bad));
	snprintf(bad[1].name, sizeof(bad[1].name), "MANIFEST.json");
	REFUSED("files[1]: \"MANIFEST.json\" is not a plain file name");

	write_files(dir, &m, files);
	memcpy(bad, files, sizeof(bad));
	bad[2].size++;
	REFUSED("model.h5: cannot commit:");

	/* a tensor table that leaves out the last block: the manifest would
	 * not read back */
	write_files(dir, &m, files);
	memcpy(bad, files, sizeof(bad));
	dt_err_clear(&err);
	assert_int_equal(ckpt_commit(AT(dir), AT(tmp), &m, t, N_TENSORS - 2, bad, N_STAGES + 1, 2, NULL, &err),
			 -EINVAL);
	assert_true(tu_has(&err, "checkpoint tensors: block 2 has none (the model has 3 blocks)"));
	assert_true(tu_has(&err, "refusing to commit a checkpoint with an inconsistent meta or tensor table"));
	assert_false(exists(tmp));

	write_files(dir, &m, files);
	memcpy(bad, files, sizeof(bad));
	p = path2(tmp, "stray");
	tu_write_path(p, "x", 0644);
	REFUSED("stray: cannot commit: not one of the checkpoint's files");
	free(p);

	write_files(dir, &m, files);
	memcpy(bad, files, sizeof(bad));
	p = path2(tmp, "shard-1.h5");
	unlink(p);
	REFUSED("shard-1.h5: cannot commit: No such file or directory");
	free(p);

	/* keep must be >= 1 */
	write_files(dir, &m, files);
	dt_err_clear(&err);
	assert_int_equal(ckpt_commit(AT(dir), AT(tmp), &m, t, N_TENSORS, files, N_STAGES + 1, 0, NULL, &err),
			 -EINVAL);
	assert_true(tu_has(&err, "keep must be at least 1"));
	assert_false(exists(tmp));

	/* not a save's tmp directory of this step: refused, and not removed */
	write_files(dir, &m, files);
	m.step = 11;
	dt_err_clear(&err);
	assert_int_equal(ckpt_commit(AT(dir), AT(tmp), &m, t, N_TENSORS, files, N_STAGES + 1, 2, NULL, &err),
			 -EINVAL);
	assert_true(tu_has(&err, "not the directory of a save of step 11"));
	assert_true(exists(tmp));
	m.step = 10;
	assert_int_equal(ckpt_commit(AT(dir), AT(tmp), &m, t, N_TENSORS, files, N_STAGES + 1, 2, NULL, &err), 0);
	check_committed(dir, &m);
#undef REFUSED
	free(dir);
}

/* A commit that fails where a step-N of the same step already stands (an
 * earlier run's, damaged or not: the fallback after a damaged newest
 * checkpoint, or checkpoint.resume "never" over old ones) says that it did
 * not commit: the caller must not take that directory for its save. The
 * one standing is left as it was. */
static void test_commit_failure_over_stale(void **state)
{
	char *dir = ckpt_dir("stale"), tmp[4096], got[256], *shard, *old, *before, *after;
	struct ckpt_file files[N_STAGES + 1];
	struct dt_err err = { 0 };
	struct ckpt_meta m;
	size_t len_before, len_after;
	bool done = true;

	(void)state;
	save(dir, "sgd", 20, 3); /* the earlier run's step 20 */
	old = path2(dir, "step-00000020");
	shard = path2(old, "shard-0.h5");
	assert_int_equal(truncate(shard, 100), 0); /* ... damaged */
	before = tu_read(shard, &len_before);
	make_meta(&m, "sgd", 20);
	write_files(dir, &m, files);
	ckpt_tmp_path(dir, 20, tmp, sizeof(tmp));
	setenv("DTRAIN_FAULT_WRITE", "enospc@0", 1);
	assert_int_equal(ckpt_commit(AT(dir), AT(tmp), &m, model_tensors(), N_TENSORS, files, N_STAGES + 1,
				     3, &done, &err),
			 -ENOSPC);
	unsetenv("DTRAIN_FAULT_WRITE");
	assert_false(done);
	assert_false(exists(tmp));
	committed(dir, got, sizeof(got));
	assert_string_equal(got, "20,");
	after = tu_read(shard, &len_after);
	assert_int_equal(len_after, len_before);
	assert_true(memcmp(before, after, len_after) == 0);
	dt_err_clear(&err);
	assert_int_not_equal(ckpt_verify(old, true, &err), 0);

	/* the same commit, not failing: committed, replacing the stale one */
	write_files(dir, &m, files);
	dt_err_clear(&err);
	assert_int_equal(ckpt_commit(AT(dir), AT(tmp), &m, model_tensors(), N_TENSORS, files, N_STAGES + 1,
				     3, &done, &err),
			 0);
	assert_true(done);
	check_committed(dir, &m);
	free(before);
	free(after);
	free(shard);
	free(old);
	free(dir);
}

/* --- planted symbolic links: nothing is written or removed through them --- */

/* A victim outside the checkpoint directory: a directory of files whose
 * content must survive whatever a save does. */
#define VICTIM_TEXT "precious, not a checkpoint's"
static const char *const victim_files[] = { "shard-0.h5", "shard-1.h5", "model.h5",
					    "MANIFEST.json", "other" };
#define N_VICTIM ((int)(sizeof(victim_files) / sizeof(victim_files[0])))

static char *victim_dir(const char *name)
{
	char *d = path2(tu_scratch(), name), *p;
	int i;

	dt_remove_tree(d);
	assert_int_equal(dt_mkdirs(d, 0755), 0);
	for (i = 0; i < N_VICTIM; i++) {
		p = path2(d, victim_files[i]);
		tu_write_path(p, VICTIM_TEXT, 0644);
		free(p);
	}
	return d;
}

/* Every file of the victim directory as it was, and nothing added. */
static void assert_victim_dir(const char *d)
{
	struct dirent *de;
	size_t len;
	char *p, *text;
	DIR *dd;
	int i, n = 0;

	for (i = 0; i < N_VICTIM; i++) {
		p = path2(d, victim_files[i]);
		len = 0;
		text = tu_read(p, &len);
		if (!text || len != strlen(VICTIM_TEXT) || memcmp(text, VICTIM_TEXT, len))
			fail_msg("%s: changed through a planted link (%zu bytes: %.40s)", p, len,
				 text ? text : "(missing)");
		free(text);
		free(p);
	}
	assert_non_null(dd = opendir(d));
	while ((de = readdir(dd)) != NULL)
		n += de->d_name[0] != '.';
	closedir(dd);
	assert_int_equal(n, N_VICTIM);
}

static void plant(const char *target, const char *at)
{
	unlink(at);
	assert_int_equal(symlink(target, at), 0);
}

static bool is_link(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

/* A link planted at a save's tmp name (.step-N.tmp -> elsewhere):
 * ckpt_clean_tmp and ckpt_tmp_make remove it as a link; the writers and
 * the commit refuse it, naming it; the target is never written, and the
 * link is never committed as step-N. */
static void test_planted_tmp_link(void **state)
{
	char *dir = ckpt_dir("planted-tmp"), *victim = victim_dir("victim-tmp"), tmp[4096], got[256];
	char *p, *real;
	struct ckpt_shard_writer w = { 0 };
	struct ckpt_file files[N_STAGES + 1];
	struct dt_err err = { 0 };
	struct ckpt_stage_view v;
	struct ckpt_meta m;
	struct stage st;
	uint64_t size;
	uint32_t crc;
	bool done = true;

	(void)state;
	make_meta(&m, "sgd", 10);
	ckpt_tmp_path(dir, 10, tmp, sizeof(tmp));

	/* a crash's leftovers are cleaned: the link goes, as a link */
	plant(victim, tmp);
	assert_int_equal(ckpt_clean_tmp(AT(dir), &err), 0);
	assert_false(exists(tmp));
	assert_victim_dir(victim);

	/* a save makes its directory afresh over it */
	plant(victim, tmp);
	assert_int_equal(ckpt_tmp_make(AT(dir), 10, NULL, &err), 0);
	assert_false(is_link(tmp));
	assert_true(exists(tmp));
	assert_victim_dir(victim);
	assert_int_equal(dt_remove_tree(tmp), 0);

	/* a link planted after that: the writers refuse it, naming it */
	plant(victim, tmp);
	stage_fill(&st, &m, 0);
	v = view_of(&st, &m, 0);
	assert_int_equal(ckpt_shard_begin(&w, AT(tmp), &m, &v, &err), -ELOOP);
	assert_true(tu_has(&err, "/.step-00000010.tmp/shard-0.h5: cannot create checkpoint shard: "));
	assert_true(tu_has(&err, "/.step-00000010.tmp is a symbolic link, which this save did not make: not followed"));
	dt_err_clear(&err);
	assert_int_equal(ckpt_root_write(AT(tmp), &m, model_tensors(), N_TENSORS, &err), -ELOOP);
	assert_true(tu_has(&err, "/model.h5: cannot create checkpoint root file: "));
	p = path2(tmp, "model.h5");
	dt_err_clear(&err);
	assert_int_equal(ckpt_file_seal(AT(tmp), "model.h5", &size, &crc, &err), -ELOOP);
	free(p);
	assert_victim_dir(victim);
	stage_free(&st);
	ckpt_shard_free(&w);

	/* the commit refuses it too, even when the target holds a whole
	 * save's files: nothing written there, the link not committed */
	real = path2(tu_scratch(), "victim-save");
	dt_remove_tree(real);
	assert_int_equal(unlink(tmp), 0);
	write_files(dir, &m, files);
	assert_int_equal(rename(tmp, real), 0);
	plant(real, tmp);
	dt_err_clear(&err);
	assert_int_equal(ckpt_commit(AT(dir), AT(tmp), &m, model_tensors(), N_TENSORS, files, N_STAGES + 1,
				     3, &done, &err),
			 -ELOOP);
	assert_false(done);
	assert_true(tu_has(&err, "/.step-00000010.tmp: cannot commit: a symbolic link, which this save did not make: not followed"));
	p = path2(real, CKPT_MANIFEST);
	assert_false(exists(p)); /* no manifest written into the target */
	free(p);
	p = path2(real, "shard-0.h5");
	assert_true(exists(p));  /* and nothing removed from it */
	free(p);
	assert_false(exists(tmp)); /* the link removed, as a link */
	committed(dir, got, sizeof(got));
	assert_string_equal(got, "");
	dt_remove_tree(real);
	free(real);
	free(victim);
	free(dir);
}

/* Links planted inside a save's tmp directory, at a file's name: the
 * writers make their files new and refuse a link; the manifest is never
 * written through one, nor a link committed as a shard; the target keeps
 * its content. */
static void test_planted_file_link(void **state)
{
	char *dir = ckpt_dir("planted-file"), *victim = victim_dir("victim-file"), tmp[4096];
	char *target = path2(victim, "other"), *p, got[256];
	struct ckpt_shard_writer w = { 0 };
	struct ckpt_file files[N_STAGES + 1];
	struct dt_err err = { 0 };
	struct ckpt_stage_view v;
	struct ckpt_meta m;
	struct stage st;
	bool done = true;

	(void)state;
	make_meta(&m, "sgd", 10);
	ckpt_tmp_path(dir, 10, tmp, sizeof(tmp));
	assert_int_equal(ckpt_tmp_make(AT(dir), 10, NULL, &err), 0);

	p = path2(tmp, "shard-0.h5");
	plant(target, p);
	stage_fill(&st, &m, 0);
	v = view_of(&st, &m, 0);
	assert_int_equal(ckpt_shard_begin(&w, AT(tmp), &m, &v, &err), -ELOOP);
	assert_true(tu_has(&err, "/.step-00000010.tmp/shard-0.h5: cannot create checkpoint shard: a symbolic link, which this save did not make: not followed"));
	assert_true(is_link(p));
	free(p);
	p = path2(tmp, "model.h5");
	plant(target, p);
	dt_err_clear(&err);
	assert_int_equal(ckpt_root_write(AT(tmp), &m, model_tensors(), N_TENSORS, &err), -ELOOP);
	assert_true(tu_has(&err, "/model.h5: cannot create checkpoint root file: a symbolic link"));
	free(p);
	assert_victim_dir(victim);
	stage_free(&st);
	ckpt_shard_free(&w);
	assert_int_equal(dt_remove_tree(tmp), 0);

	/* a manifest planted as a link beside a whole save's files */
	write_files(dir, &m, files);
	p = path2(tmp, CKPT_MANIFEST);
	plant(target, p);
	dt_err_clear(&err);
	assert_int_equal(ckpt_commit(AT(dir), AT(tmp), &m, model_tensors(), N_TENSORS, files, N_STAGES + 1,
				     3, &done, &err),
			 -ELOOP);
	assert_false(done);
	assert_true(tu_has(&err, "/.step-00000010.tmp/MANIFEST.json: cannot write: a symbolic link, which this save did not make: not followed"));
	assert_false(exists(tmp));
	committed(dir, got, sizeof(got));
	assert_string_equal(got, "");
	free(p);

	/* a shard that is a link is refused by the commit's check */
	write_files(dir, &m, files);
	p = path2(tmp, "shard-1.h5");
	assert_int_equal(unlink(p), 0);
	plant(target, p);
	dt_err_clear(&err);
	assert_int_equal(ckpt_commit(AT(dir), AT(tmp), &m, model_tensors(), N_TENSORS, files, N_STAGES + 1,
				     3, &done, &err),
			 -ELOOP);
	assert_true(tu_has(&err, "/.step-00000010.tmp/shard-1.h5: cannot commit: a symbolic link"));
	free(p);
	assert_victim_dir(victim);
	free(target);
	free(victim);
	free(dir);
}

/* Links planted where the commit moves things: the aside name of an
 * earlier commit of the step (.step-N.old.tmp -> a directory) and latest
 * -> a file are replaced or removed as links; a step-N that is a link is
 * the user's and refuses the commit. The targets keep every file. */
static void test_planted_commit_links(void **state)
{
	char *dir = ckpt_dir("planted-commit"), *victim = victim_dir("victim-commit");
	char *target = path2(victim, "other"), *aside, *final, *latest, link[4096], tmp[4096];
	struct ckpt_file files[N_STAGES + 1];
	struct dt_err err = { 0 };
	struct ckpt_meta m;
	bool done = true;
	ssize_t n;

	(void)state;
	save(dir, "sgd", 20, 3);
	aside = path2(dir, ".step-00000020.old.tmp");
	final = path2(dir, "step-00000020");
	latest = path2(dir, "latest");
	make_meta(&m, "sgd", 20);

	/* step 20 committed again (a requeued job's second attempt) with a
	 * link at the name its earlier commit goes aside under */
	plant(victim, aside);
	save(dir, "sgd", 20, 3);
	check_committed(dir, &m);
	assert_false(exists(aside));
	assert_victim_dir(victim);

	/* step-20 itself a link (a checkpoint linked in): the user's, the
	 * commit refused naming it, the link and its target as they were,
	 * the save's tmp directory removed */
	assert_int_equal(dt_remove_tree(final), 0);
	plant(victim, final);
	write_files(dir, &m, files);
	ckpt_tmp_path(dir, 20, tmp, sizeof(tmp));
	assert_int_equal(ckpt_commit(AT(dir), AT(tmp), &m, model_tensors(), N_TENSORS, files,
				     N_STAGES + 1, 3, &done, &err),
			 -EEXIST);
	assert_false(done);
	assert_true(tu_has(&err, "/step-00000020: cannot commit: a symbolic link stands under this step's name (a checkpoint linked here?), which this save leaves alone (hint: move it out of "));
	dt_err_clear(&err);
	assert_true(is_link(final));
	n = readlink(final, link, sizeof(link) - 1);
	assert_true(n > 0 && (size_t)n == strlen(victim) && !memcmp(link, victim, (size_t)n));
	assert_false(exists(tmp));
	assert_false(exists(aside));
	assert_victim_dir(victim);
	assert_int_equal(unlink(final), 0);
	save(dir, "sgd", 20, 3);

	/* latest a link to a file: replaced, never written through */
	plant(target, latest);
	save(dir, "sgd", 30, 3);
	n = readlink(latest, link, sizeof(link) - 1);
	assert_true(n > 0);
	link[n] = '\0';
	assert_string_equal(link, "step-00000030");
	assert_victim_dir(victim);

	/* a link at a .step-*.old.tmp name left by a crash: cleaned as a link */
	plant(victim, aside);
	assert_int_equal(ckpt_clean_tmp(AT(dir), &err), 0);
	assert_false(exists(aside));
	assert_victim_dir(victim);
	free(latest);
	free(final);
	free(aside);
	free(target);
	free(victim);
	free(dir);
}

/* Links under a checkpoint's name (checkpoints linked in from a
 * data-versioning tree, older and newer than the saves) are the user's:
 * retention neither counts them toward keep nor deletes them, and their
 * targets keep every file. */
static void test_retention_links(void **state)
{
	char *dir = ckpt_dir("keep-links"), *store = ckpt_dir("keep-links-store"), got[256];
	char *old = path2(dir, "step-00000005"), *newer = path2(dir, "step-00000030");
	char *p;

	(void)state;
	save(store, "sgd", 5, 3);
	save(store, "sgd", 30, 3);
	p = path2(store, "step-00000005");
	plant(p, old);
	free(p);
	p = path2(store, "step-00000030");
	plant(p, newer);
	free(p);
	save(dir, "sgd", 10, 2);
	save(dir, "sgd", 20, 2);
	committed(dir, got, sizeof(got));
	assert_string_equal(got, "5,10,20,30,");
	save(dir, "sgd", 40, 2); /* keep 2 of the saves' own: 20 and 40 */
	committed(dir, got, sizeof(got));
	assert_string_equal(got, "5,20,30,40,");
	assert_true(is_link(old));
	assert_true(is_link(newer));
	save(dir, "sgd", 50, 1);
	committed(dir, got, sizeof(got));
	assert_string_equal(got, "5,30,50,");
	committed(store, got, sizeof(got));
	assert_string_equal(got, "5,30,");
	assert_int_equal(ckpt_verify(old, false, &(struct dt_err){ 0 }), 0);
	assert_int_equal(ckpt_verify(newer, false, &(struct dt_err){ 0 }), 0);
	free(newer);
	free(old);
	free(store);
	free(dir);
}

/* A failed save's tmp directory is removed only when it is the one the
 * save made and holds (ckpt_tmp_remove, dtrain-run's path when a rank
 * could not write): a directory that took the name instead (ckpt_tmp_make
 * failed with EEXIST: nothing held; or swapped in after the make), or a
 * link there, keeps every file. */
static void test_tmp_remove(void **state)
{
	char *dir = ckpt_dir("tmp-remove"), *victim = victim_dir("victim-tmp-remove");
	char *moved, *p, tmp[4096];
	struct ckpt_dir t = { .fd = -1, .path = tmp }, none = { .fd = -1, .path = tmp };
	struct dt_err err = { 0 };

	(void)state;
	ckpt_tmp_path(dir, 10, tmp, sizeof(tmp));
	moved = path2(dir, "moved");

	/* rank 0's make failed (another took the name): nothing held, the
	 * other's directory stays */
	assert_int_equal(rename(victim, tmp), 0);
	assert_int_equal(ckpt_tmp_remove(AT(dir), &none), -ESTALE);
	assert_victim_dir(tmp);
	assert_int_equal(rename(tmp, victim), 0);

	/* made and held, then swapped for another directory, then for a link
	 * to the very directory held: neither is removed */
	assert_int_equal(ckpt_tmp_make(AT(dir), 10, &t.fd, &err), 0);
	p = path2(tmp, "shard-0.h5");
	tu_write_path(p, "part of a save", 0644);
	free(p);
	assert_int_equal(rename(tmp, moved), 0);
	assert_int_equal(rename(victim, tmp), 0);
	assert_int_equal(ckpt_tmp_remove(AT(dir), &t), -ESTALE);
	assert_victim_dir(tmp);
	assert_int_equal(rename(tmp, victim), 0);
	plant(moved, tmp);
	assert_int_equal(ckpt_tmp_remove(AT(dir), &t), -ESTALE);
	assert_true(is_link(tmp));
	p = path2(moved, "shard-0.h5");
	assert_true(exists(p));
	free(p);
	assert_int_equal(unlink(tmp), 0);

	/* back at its name: removed, whole */
	assert_int_equal(rename(moved, tmp), 0);
	assert_int_equal(ckpt_tmp_remove(AT(dir), &t), 0);
	assert_false(exists(tmp));
	assert_victim_dir(victim);
	close(t.fd);
	free(moved);
	free(victim);
	free(dir);
}

/* Every name, type, size and CRC-32 under d, and each directory's
 * modification time (a name made and removed again changes it), appended
 * to out: equal before and after means not a byte was touched. */
static void tree_sig(const char *d, char *out, size_t size)
{
	struct dirent **names = NULL;
	struct stat st;
	size_t len;
	char *p, *text;
	int i, n = scandir(d, &names, NULL, alphasort);

	assert_true(n >= 0);
	assert_int_equal(lstat(d, &st), 0);
	snprintf(out + strlen(out), size - strlen(out), "%s %lld.%09ld;", d,
		 (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	for (i = 0; i < n; i++) {
		p = path2(d, names[i]->d_name);
		if (strcmp(names[i]->d_name, ".") && strcmp(names[i]->d_name, "..")) {
			assert_int_equal(lstat(p, &st), 0);
			snprintf(out + strlen(out), size - strlen(out), "%s %o %lld", p,
				 (unsigned)st.st_mode, (long long)st.st_size);
			if (S_ISDIR(st.st_mode))
				tree_sig(p, out, size);
			if (S_ISREG(st.st_mode)) {
				len = 0;
				text = tu_read(p, &len);
				snprintf(out + strlen(out), size - strlen(out), " %08lx;",
					 crc32(0, (const Bytef *)text, (uInt)len));
				free(text);
			} else
				snprintf(out + strlen(out), size - strlen(out), ";");
		}
		free(p);
		free(names[i]);
	}
	free(names);
	assert_true(strlen(out) + 1 < size); /* all of it fitted */
}

/* One save of step into the checkpoint directory held at d, its tmp
 * directory made and held as dtrain-run does; committed with keep. */
static int save_held(const struct ckpt_dir *d, int64_t step, int keep, struct dt_err *err)
{
	struct ckpt_file files[N_STAGES + 1];
	struct ckpt_meta m;
	char tmp[4096];
	struct ckpt_dir t = { .fd = -1, .path = tmp };
	int rc;

	make_meta(&m, "sgd", step);
	ckpt_tmp_path(d->path, step, tmp, sizeof(tmp));
	rc = ckpt_tmp_make(d, step, &t.fd, err);
	if (rc)
		return rc;
	write_files_in(&t, &m, files);
	rc = ckpt_commit(d, &t, &m, model_tensors(), N_TENSORS, files, N_STAGES + 1, keep, NULL,
			 err);
	close(t.fd);
	return rc;
}

/* The checkpoint directory itself replaced by a link mid-run
 * (checkpoints -> a foreign directory holding step-* entries, a link
 * among them, and a .step-N.tmp of its own): every later save, its commit
 * and retention work in the directory the run opened (struct ckpt_dir);
 * the foreign tree keeps every byte, its step-* entries included. */
static void test_planted_dir_link(void **state)
{
	char *run = ckpt_dir("planted-dir"), *dir = path2(run, "checkpoints");
	char *real = path2(run, "moved"), *victim = victim_dir("victim-dir"), *p, *q;
	char before[16384] = "", after[16384] = "", got[256];
	struct ckpt_dir held = { .fd = -1, .path = dir };
	struct dt_err err = { 0 };
	struct ckpt_meta m;

	(void)state;
	p = path2(victim, "step-00000001");
	assert_int_equal(dt_mkdirs(p, 0755), 0);
	q = path2(p, "shard-0.h5");
	tu_write_path(q, VICTIM_TEXT, 0644);
	free(q);
	q = path2(victim, "step-00000002");
	assert_int_equal(symlink("step-00000001", q), 0);
	free(q);
	free(p);
	p = path2(victim, ".step-00000030.tmp");
	assert_int_equal(dt_mkdirs(p, 0755), 0);
	free(p);
	tree_sig(victim, before, sizeof(before));

	assert_int_equal(dt_mkdirs(dir, 0755), 0);
	held.fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(held.fd >= 0);
	assert_int_equal(save_held(&held, 10, 2, &err), 0);
	assert_int_equal(save_held(&held, 20, 2, &err), 0);

	/* mid-run: the directory moves away, a link to the victim takes its name */
	assert_int_equal(rename(dir, real), 0);
	plant(victim, dir);
	if (save_held(&held, 30, 1, &err) || ckpt_clean_tmp(&held, &err))
		fail_msg("a save into the directory held: %s", err.msg);
	tree_sig(victim, after, sizeof(after));
	assert_string_equal(after, before);

	/* the save and retention happened in the directory opened */
	committed(real, got, sizeof(got));
	assert_string_equal(got, "30,");
	assert_latest(real, "step-00000030");
	make_meta(&m, "sgd", 30);
	check_committed(real, &m);
	close(held.fd);
	free(victim);
	free(real);
	free(dir);
	free(run);
}

/* --- main --- */

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_save_sgd),
		cmocka_unit_test(test_save_adamw),
		cmocka_unit_test(test_snapshot_is_copy),
		cmocka_unit_test(test_deferred_copy),
		cmocka_unit_test(test_root_cached),
		cmocka_unit_test(test_crc32),
		cmocka_unit_test(test_big_shard),
		cmocka_unit_test(test_retention),
		cmocka_unit_test(test_retention_links),
		cmocka_unit_test(test_same_step_twice),
		cmocka_unit_test(test_reproducible),
		cmocka_unit_test(test_clean_tmp),
		cmocka_unit_test(test_enospc_shard),
		cmocka_unit_test(test_commit_failure),
		cmocka_unit_test(test_commit_failure_over_stale),
		cmocka_unit_test(test_planted_tmp_link),
		cmocka_unit_test(test_planted_file_link),
		cmocka_unit_test(test_planted_commit_links),
		cmocka_unit_test(test_planted_dir_link),
		cmocka_unit_test(test_tmp_remove),
		cmocka_unit_test(test_missing_dir),
		cmocka_unit_test(test_view_mismatch),
		cmocka_unit_test(test_commit_refusals),
		cmocka_unit_test(test_latest_failure),
	};

	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
	return cmocka_run_group_tests(tests, NULL, tu_teardown);
}
