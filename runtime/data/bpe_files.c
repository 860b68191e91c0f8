/*
 * bpe_files.c - a tokenizer found by its files (bpe.h): the files a token
 * stream or a checkpoint records, or those of a model's directory, handed
 * to the loader of their kind (GPT-2's two in bpe.c, tokenizer.json in
 * hf_tokenizer.c).
 */
#include "runtime/data/bpe.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int rt_bpe_load_files(struct rt_bpe **out, const struct rt_bpe_files *f, const char *where,
		      struct dt_err *err)
{
	char name[2][4200];

	*out = NULL;
	for (int i = 0; i < f->n; i++)
		snprintf(name[i], sizeof(name[i]), "%s/%s", where, f->name[i]);
	if (!strcmp(f->kind, RT_BPE_HF_NAME) && f->n == 1)
		return rt_bpe_load_hf_mem(out, f->data[0], f->len[0], name[0], err);
	if (!strcmp(f->kind, RT_BPE_NAME) && f->n == 2)
		return rt_bpe_load_mem(out, f->data[0], f->len[0], name[0], f->data[1], f->len[1],
				       name[1], err);
	return dt_err_add(err, "%s: a tokenizer of kind \"%.40s\" with %d files: not one dtrain reads",
			  where, f->kind, f->n);
}

int rt_bpe_load_dir(struct rt_bpe **out, const char *dir, bool gpt2, struct dt_err *err)
{
	static const char *const names[2][2] = { { "encoder.json", "vocab.bpe" },
						  { "vocab.json", "merges.txt" } };
	char a[4300], b[4300];

	*out = NULL;
	for (int i = 0; gpt2 && i < 2; i++) {
		snprintf(a, sizeof(a), "%s/%s", dir, names[i][0]);
		snprintf(b, sizeof(b), "%s/%s", dir, names[i][1]);
		if (!access(a, F_OK) && !access(b, F_OK))
			return rt_bpe_load(out, a, b, err);
	}
	snprintf(a, sizeof(a), "%s/tokenizer.json", dir);
	return access(a, F_OK) ? -ENOENT : rt_bpe_load_hf(out, a, err);
}
