/*
 * export.c - a checkpoint for people and other tools: export to one
 * self-contained HDF5 file, and a human-readable summary.
 *
 * The export holds the same paths and root attributes as the checkpoint's
 * model.h5, but as real contiguous datasets instead of virtual ones, so it
 * can be copied anywhere alone. It is written like every file we own:
 * out.tmp.<pid>, fsync, rename, fsync the directory. The data is read
 * through the checking reader (read.c), a tensor at a time, after the whole
 * checkpoint has been verified; a format-1 checkpoint comes out in the
 * current format.
 *
 * inspect prints the manifest's summary, then verifies every file as
 * `dtrain-ckpt verify` does: a damaged checkpoint gets a status line and
 * an error.
 *
 * Sections: export, inspect.
 */
#include "checkpoint/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


/* --- export --- */

/* Writes tensor t (state NULL for the parameter) from src as a contiguous
 * float32 dataset at its path in the current format (out_meta); tmp names
 * the file in messages. */
static int put_tensor(hid_t file, hid_t lcpl, hid_t dcpl, const struct ckpt_meta *out_meta,
		      const struct ckpt_tensor *t, const char *state, const float *src,
		      const char *tmp, struct dt_err *err)
{
	hid_t space = H5I_INVALID_HID, set = H5I_INVALID_HID;
	char name[CKPT_NAME_MAX + 64], why[DT_H5_WHY_MAX];
	hsize_t dims[CKPT_MAX_DIMS];
	int rc = 0;

	ckpt__tensor_path(out_meta, t, state, name, sizeof(name));
	ckpt__tensor_dims(t, dims);
	space = H5Screate_simple(t->ndim, dims, NULL);
	if (space < 0 ||
	    (set = H5Dcreate2(file, name, H5T_IEEE_F32LE, space, lcpl, dcpl, H5P_DEFAULT)) < 0 ||
	    H5Dwrite(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, src) < 0) {
		rc = -EIO;
		dt_err_add(err, "%s: cannot write %s: %s", tmp, name, dt_h5_why(why));
	}
	dt_h5_close(&set, H5Dclose);
	dt_h5_close(&space, H5Sclose);
	return rc;
}

/* Every tensor's parameters and states from r into file, in the current
 * format (out_meta). */
static int copy_tensors(struct ckpt_reader *r, hid_t file, const struct ckpt_meta *out_meta,
			const char *tmp, struct dt_err *err)
{
	const struct ckpt_manifest *m = r->m;
	float *bufs[1 + CKPT_MAX_STATES] = { NULL };
	hid_t lcpl = H5I_INVALID_HID, dcpl = H5I_INVALID_HID;
	size_t most = 0;
	int i, s, rc = 0;

	for (i = 0; i < m->n_tensors; i++)
		if (ckpt_tensor_floats(&m->tensors[i]) > most)
			most = ckpt_tensor_floats(&m->tensors[i]);
	for (s = 0; s <= m->meta.n_states; s++) {
		bufs[s] = malloc(most * sizeof(float));
		if (!bufs[s]) {
			rc = -ENOMEM;
			dt_err_add(err, "%s: out of memory for a tensor of %zu floats", tmp, most);
			goto out;
		}
	}
	lcpl = H5Pcreate(H5P_LINK_CREATE);
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	/* contiguous (the default layout), no time stamps: same state, same bytes */
	if (lcpl < 0 || dcpl < 0 || H5Pset_create_intermediate_group(lcpl, 1) < 0 ||
	    H5Pset_layout(dcpl, H5D_CONTIGUOUS) < 0 || H5Pset_obj_track_times(dcpl, 0) < 0) {
		rc = -EIO;
		dt_err_add(err, "%s: HDF5 cannot set up dataset creation", tmp);
		goto out;
	}
	for (i = 0; i < m->n_tensors && !rc; i++) {
		rc = ckpt_read_tensor(r, &m->tensors[i], bufs[0], bufs + 1, err);
		for (s = 0; s <= m->meta.n_states && !rc; s++)
			rc = put_tensor(file, lcpl, dcpl, out_meta, &m->tensors[i],
					s ? m->meta.states[s - 1] : NULL, bufs[s], tmp, err);
	}
out:
	dt_h5_close(&dcpl, H5Pclose);
	dt_h5_close(&lcpl, H5Pclose);
	for (s = 0; s <= CKPT_MAX_STATES; s++)
		free(bufs[s]);
	return rc;
}

int ckpt_export(const char *ckpt, const char *out, struct dt_err *err)
{
	struct ckpt_reader r = { .open_stage = -1, .file = H5I_INVALID_HID };
	struct ckpt_meta *out_meta = NULL;
	hid_t fapl = H5I_INVALID_HID, file = H5I_INVALID_HID;
	char tmp[4200], why[DT_H5_WHY_MAX];
	bool created = false;
	int rc;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", out, (long)getpid()) >= sizeof(tmp))
		return dt_err_add(err, "%s: path too long", out);
	rc = ckpt_verify(ckpt, true, err);
	if (rc)
		goto out;
	rc = ckpt_reader_open(&r, ckpt, err);
	if (rc)
		goto out;
	ckpt__h5_quiet();
	fapl = dt_h5_fapl(DT_H5_V110);
	if (fapl < 0) {
		rc = -EIO;
		dt_err_add(err, "%s: HDF5 cannot set up file access: %s", out, dt_h5_why(why));
		goto out;
	}
	/* a leftover of this pid, or a link planted at the name, is removed
	 * (a link as a link); the file is then made new (O_EXCL: one planted
	 * meanwhile fails the create instead of being written through) */
	unlink(tmp);
	created = true; /* a failed create may still leave the file */
	file = H5Fcreate(tmp, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
	if (file < 0) {
		rc = -EIO;
		dt_err_add(err, "%s: cannot create: %s", tmp, dt_h5_why(why));
		goto out;
	}
	out_meta = malloc(sizeof(*out_meta));
	if (!out_meta) {
		dt_err_add(err, "%s: out of memory", out);
		rc = -ENOMEM;
		goto out;
	}
	*out_meta = r.m->meta;
	out_meta->optimizer_shards = 1; /* one file: every state whole */
	out_meta->format_version = CKPT_VERSION; /* a format-1 checkpoint comes out converted */
	rc = ckpt__write_meta_attrs(file, out_meta, tmp, err);
	if (!rc)
		rc = copy_tensors(&r, file, out_meta, tmp, err);
	if (rc)
		goto out;
	/* the close writes the metadata: its failure is a failed export */
	rc = H5Fclose(file) < 0 ? -EIO : 0;
	file = H5I_INVALID_HID;
	if (rc) {
		dt_err_add(err, "%s: closing failed: %s", tmp, dt_h5_why(why));
		goto out;
	}
	rc = dt_fsync_path(tmp, false);
	if (rc) {
		dt_err_add(err, "%s: fsync failed: %s", tmp, strerror(-rc));
		goto out;
	}
	if (rename(tmp, out) != 0) {
		rc = -errno;
		dt_err_add(err, "%s: cannot rename %s into place: %s", out, tmp, strerror(errno));
		goto out;
	}
	created = false;
	rc = dt_fsync_parent(out);
	if (rc)
		dt_err_add(err, "%s: fsync of its directory failed: %s", out, strerror(-rc));
out:
	free(out_meta);
	dt_h5_close(&file, H5Fclose);
	dt_h5_close(&fapl, H5Pclose);
	ckpt_reader_close(&r);
	if (created)
		unlink(tmp);
	return rc;
}

/* --- inspect --- */

static void print_meta(FILE *f, const char *ckpt, const struct ckpt_meta *meta)
{
	int k;

	fprintf(f, "checkpoint    %s\n", ckpt);
	fprintf(f, "format        %s %d\n", CKPT_FORMAT, meta->format_version);
	fprintf(f, "step          %" PRId64 " of %" PRId64 "\n", meta->step, meta->total_steps);
	/* epochs counted from 1 as the progress lines and dtrain-ckpt list do:
	 * that of the last step taken; then where the next step starts */
	fprintf(f, "epoch         %" PRId64 " (of the last step taken); the next step is step %" PRId64
		   " of %" PRId64 " of epoch %" PRId64 "\n",
		meta->step > 0 ? (meta->step - 1) / meta->steps_per_epoch + 1 : 0,
		meta->epoch_step + 1, meta->steps_per_epoch, meta->epoch + 1);
	fprintf(f, "lr            %.9g\n", meta->lr);
	fprintf(f, "optimizer     %s, step %" PRId64 ", states:", meta->optimizer,
		meta->optimizer_step);
	for (k = 0; k < meta->n_states; k++)
		fprintf(f, "%s %s", k ? "," : "", meta->states[k]);
	fprintf(f, "%s\n", meta->n_states ? "" : " none");
	if (meta->optimizer_shards > 1)
		fprintf(f, "              sharded: each stage's state in %d pieces (optim-<stage>-<piece>.h5), one per replica\n",
			meta->optimizer_shards);
	fprintf(f, "model         %s, %d blocks, %s\n", meta->model_type, meta->n_blocks,
		meta->model_config);
	fprintf(f, "layout        data %d x pipeline %d\n", meta->data, meta->pipeline);
	for (k = 0; k < meta->pipeline; k++) {
		if (meta->stage_first[k + 1] - meta->stage_first[k] == 1)
			fprintf(f, "  stage %-5d block %d\n", k, meta->stage_first[k]);
		else
			fprintf(f, "  stage %-5d blocks %d..%d\n", k, meta->stage_first[k],
				meta->stage_first[k + 1] - 1);
	}
	fprintf(f, "global batch  %" PRId64 " (train rows %" PRId64 ", shuffle %s, seed %" PRIu64
		   ", stream %" PRIu64 ")\n",
		meta->global_batch, meta->train_rows, meta->shuffle ? "on" : "off", meta->rng_seed,
		meta->rng_stream);
	fprintf(f, "spec hash     %s\n", meta->spec_hash);
	fprintf(f, "model hash    %s\n", meta->model_hash);
	fprintf(f, "created       %s\n", meta->created[0] ? meta->created : "-");
	fprintf(f, "job           %s\n", meta->job_id[0] ? meta->job_id : "-");
}

static void print_tensors(FILE *f, const struct ckpt_manifest *m)
{
	const struct ckpt_meta *meta = &m->meta;
	char name[CKPT_NAME_MAX + 64], shape[128], shard[64];
	int i, j, s, stage, width = 0, n, at;

	/* first pass: the widest path, so the columns line up */
	for (i = 0; i < m->n_tensors; i++)
		for (s = -1; s < meta->n_states; s++) {
			ckpt__tensor_path(meta, &m->tensors[i], s < 0 ? NULL : meta->states[s], name,
					  sizeof(name));
			n = (int)strlen(name);
			width = n > width ? n : width;
		}
	fprintf(f, "\ntensors (float32)\n");
	for (s = -1; s < meta->n_states; s++)
		for (i = 0, stage = 0; i < m->n_tensors; i++) {
			const struct ckpt_tensor *t = &m->tensors[i];

			while (t->block >= meta->stage_first[stage + 1])
				stage++;
			if (s >= 0 && meta->optimizer_shards > 1)
				snprintf(shard, sizeof(shard), "optim-%d-*.h5", stage);
			else
				ckpt_shard_name(stage, shard, sizeof(shard));
			ckpt__tensor_path(meta, t, s < 0 ? NULL : meta->states[s], name, sizeof(name));
			at = snprintf(shape, sizeof(shape), "[");
			for (j = 0; j < t->ndim; j++)
				at += snprintf(shape + at, sizeof(shape) - (size_t)at, "%s%lld",
					       j ? ", " : "", (long long)t->shape[j]);
			snprintf(shape + at, sizeof(shape) - (size_t)at, "]");
			fprintf(f, "  %-*s  %-20s  %s\n", width, name, shape, shard);
		}
}

/* Every file against the manifest, as ckpt_verify: each problem to err;
 * a damaged checkpoint gets the status line. The first error, or 0. */
static int inspect_status(const char *ckpt, const struct ckpt_manifest *m, FILE *f,
			  struct dt_err *err)
{
	int i, r, rc = 0, bad = 0;

	for (i = 0; i < m->n_files; i++) {
		r = ckpt_verify_file(ckpt, &m->files[i], err);
		if (!r)
			continue;
		fprintf(f, "%s%s", bad++ ? ", " : "status        damaged: ", m->files[i].name);
		if (!rc)
			rc = r;
	}
	if (bad)
		fprintf(f, " (%d of %d files do not match the manifest)\n", bad, m->n_files);
	else
		fprintf(f, "status        ok: every file matches the manifest (size and crc32)\n");
	return rc;
}

int ckpt_inspect(const char *ckpt, FILE *f, struct dt_err *err)
{
	struct ckpt_manifest *m = malloc(sizeof(*m));
	uint64_t total = 0;
	int i, rc;

	if (!m)
		return dt_err_add(err, "%s: out of memory", ckpt), -ENOMEM;
	rc = ckpt_manifest_read(ckpt, m, err);
	if (rc)
		goto out;
	print_meta(f, ckpt, &m->meta);
	print_tensors(f, m);
	fprintf(f, "\nfiles\n");
	for (i = 0; i < m->n_files; i++) {
		fprintf(f, "  %-14s %14" PRIu64 " bytes  crc32 %08" PRIx32 "\n", m->files[i].name,
			m->files[i].size, m->files[i].crc);
		total += m->files[i].size;
	}
	fprintf(f, "  %-14s %14" PRIu64 " bytes\n", "total", total);
	/* what the summary describes must be there: a damaged checkpoint says
	 * so, with verify's words for each file, and fails */
	rc = inspect_status(ckpt, m, f, err);
	if (fflush(f) != 0 || ferror(f)) {
		if (!rc)
			rc = -EIO;
		dt_err_add(err, "%s: cannot write the summary: %s", ckpt, strerror(errno));
	}
out:
	free(m);
	return rc;
}
