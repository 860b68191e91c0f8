/*
 * tokenizer.c - the tokenizer a checkpoint may carry (ckpt.h): GPT-2 BPE's
 * two files, encoder.json and vocab.bpe, as they were given to
 * `dtrain-data text --bpe` (recorded in the token file the run trained on)
 * or found beside an imported model. They lie in the checkpoint directory
 * beside the shards, each listed in the manifest (stage -1) with its size
 * and CRC-32, so verify checks them as it checks every file, and
 * `dtrain-ckpt sample` encodes and decodes text with them.
 */
#include "checkpoint/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/io.h"

const char *const ckpt_tokenizer_files[2] = { CKPT_TOKENIZER_ENCODER, CKPT_TOKENIZER_MERGES };

int ckpt_tokenizer_write(const struct ckpt_dir *tmpdir, const struct ckpt_tokenizer *tok,
			 struct ckpt_file files[2], struct dt_err *err)
{
	char path[4200];
	int rc = 0;

	for (int i = 0; i < 2 && !rc; i++) {
		int fd;

		snprintf(path, sizeof(path), "%s/%s", tmpdir->path, ckpt_tokenizer_files[i]);
		fd = ckpt__tmp_file(tmpdir, ckpt_tokenizer_files[i], O_WRONLY | O_CREAT | O_EXCL,
				    "cannot create", err);
		if (fd < 0)
			return fd;
		rc = dt_write_all(fd, tok->data[i], tok->len[i]);
		close(fd);
		if (rc)
			dt_err_add(err, "%s: cannot write: %s", path, strerror(-rc));
		memset(&files[i], 0, sizeof(files[i]));
		snprintf(files[i].name, sizeof(files[i].name), "%s", ckpt_tokenizer_files[i]);
		files[i].stage = -1;
		if (!rc)
			rc = ckpt_file_seal(tmpdir, ckpt_tokenizer_files[i], &files[i].size,
					    &files[i].crc, err);
	}
	return rc;
}

bool ckpt_tokenizer_of(const struct ckpt_manifest *m)
{
	for (int i = 0; i < m->n_files; i++)
		if (!strcmp(m->files[i].name, CKPT_TOKENIZER_ENCODER))
			return true;
	return false;
}
