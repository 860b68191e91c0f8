/*
 * tokenizer.c - the tokenizer a checkpoint may carry (ckpt.h): GPT-2 BPE's
 * two files, encoder.json and vocab.bpe, or Hugging Face's tokenizer.json,
 * as they were given to `dtrain-data text --bpe` or `--tokenizer`
 * (recorded in the token file the run trained on) or found beside an
 * imported model. They lie in the checkpoint directory
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

/* Are names [n] a tokenizer's: GPT-2's pair in order, or tokenizer.json? */
static bool known(const char *const *names, int n)
{
	if (n == 2)
		return !strcmp(names[0], CKPT_TOKENIZER_ENCODER) && !strcmp(names[1], CKPT_TOKENIZER_MERGES);
	return n == 1 && !strcmp(names[0], CKPT_TOKENIZER_HF);
}

int ckpt_tokenizer_write(const struct ckpt_dir *tmpdir, const struct ckpt_tokenizer *tok,
			 struct ckpt_file files[2], struct dt_err *err)
{
	char path[4200];
	int rc = 0;

	if (!known(tok->name, tok->n))
		return dt_err_add(err, "%s: a tokenizer is %s and %s, or %s", tmpdir->path,
				  CKPT_TOKENIZER_ENCODER, CKPT_TOKENIZER_MERGES, CKPT_TOKENIZER_HF);
	for (int i = 0; i < tok->n && !rc; i++) {
		int fd;

		snprintf(path, sizeof(path), "%s/%s", tmpdir->path, tok->name[i]);
		fd = ckpt__tmp_file(tmpdir, tok->name[i], O_WRONLY | O_CREAT | O_EXCL, "cannot create",
				    err);
		if (fd < 0)
			return fd;
		rc = dt_write_all(fd, tok->data[i], tok->len[i]);
		close(fd);
		if (rc)
			dt_err_add(err, "%s: cannot write: %s", path, strerror(-rc));
		memset(&files[i], 0, sizeof(files[i]));
		snprintf(files[i].name, sizeof(files[i].name), "%s", tok->name[i]);
		files[i].stage = -1;
		if (!rc)
			rc = ckpt_file_seal(tmpdir, tok->name[i], &files[i].size, &files[i].crc, err);
	}
	return rc;
}

int ckpt_tokenizer_of(const struct ckpt_manifest *m, const char *names[2])
{
	int n = 0;

	for (int i = 0; i < m->n_files; i++)
		if (m->files[i].stage < 0 && strcmp(m->files[i].name, CKPT_ROOT) && n < 2)
			names[n++] = m->files[i].name;
	if (n == 2 && !strcmp(names[0], CKPT_TOKENIZER_MERGES)) { /* encoder.json first */
		const char *t = names[0];

		names[0] = names[1];
		names[1] = t;
	}
	return known(names, n) ? n : 0;
}
