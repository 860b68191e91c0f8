/*
 * whole.c - a checkpoint written by one process from one buffer: the
 * parameters of a whole model as one stage, no optimizer state, and the
 * tokenizer when there is one (ckpt_write_whole, ckpt.h). What `dtrain-ckpt import` makes of another
 * program's weights; a run starts from it with checkpoint.init_from.
 *
 * The same protocol as a training run's save: a tmp directory made
 * afresh, the shard and the root file made new in it and sealed, then
 * the commit (manifest, rename, latest).
 */
#include "checkpoint/internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int ckpt_write_whole(const char *dir, const struct ckpt_meta *meta,
		     const struct ckpt_tensor *tensors, int n, const float *params,
		     size_t n_params, const struct ckpt_tokenizer *tok, struct dt_err *err)
{
	struct ckpt_shard_writer w = { 0 };
	struct ckpt_file files[4];
	struct ckpt_stage_view v = { 0 };
	struct ckpt_dir d = { .fd = -1, .path = dir }, t = { .fd = -1 };
	char tmp[4200];
	bool committed = false;
	int rc;

	if (meta->pipeline != 1 || meta->n_states != 0 || meta->optimizer_shards > 1)
		return dt_err_add(err, "%s: a whole checkpoint is one stage without optimizer state",
				  dir), -EINVAL;
	rc = ckpt_tensors_check(meta, tensors, n, err);
	if (rc)
		return rc;
	rc = dt_mkdirs(dir, 0755);
	if (!rc)
		rc = (d.fd = ckpt__dir_get(&d, true)) < 0 ? d.fd : 0;
	if (rc)
		return dt_err_add(err, "%s: cannot make the directory: %s", dir, strerror(-rc)), rc;
	ckpt_tmp_path(dir, meta->step, tmp, sizeof(tmp));
	t.path = tmp;
	rc = ckpt_tmp_make(&d, meta->step, &t.fd, err);
	if (rc)
		goto out;
	v = (struct ckpt_stage_view){ .stage = 0, .first_block = 0, .n_blocks = meta->n_blocks,
				      .tensors = tensors, .n_tensors = n, .n = n_params,
				      .params = params, .borrow = true };
	memset(files, 0, sizeof(files));
	rc = ckpt_shard_begin(&w, &t, meta, &v, err);
	if (!rc)
		rc = ckpt_shard_write(&w, err);
	ckpt_shard_name(0, files[0].name, sizeof(files[0].name));
	files[0].size = w.size;
	files[0].crc = w.crc;
	ckpt_shard_free(&w);
	if (!rc)
		rc = ckpt_root_write(&t, meta, tensors, n, err);
	snprintf(files[1].name, sizeof(files[1].name), "%s", CKPT_ROOT);
	files[1].stage = -1;
	if (!rc)
		rc = ckpt_file_seal(&t, CKPT_ROOT, &files[1].size, &files[1].crc, err);
	if (!rc && tok)
		rc = ckpt_tokenizer_write(&t, tok, files + 2, err);
	if (!rc)
		rc = ckpt_commit(&d, &t, meta, tensors, n, files, 2 + (tok ? tok->n : 0), 1000, &committed,
				 err);
	else /* only the directory made and held, never one swapped in */
		ckpt_tmp_remove(&d, &t);
out:
	if (t.fd >= 0)
		close(t.fd);
	close(d.fd);
	return rc ? rc : committed ? 0 : -EIO;
}
