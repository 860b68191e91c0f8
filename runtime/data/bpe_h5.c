/*
 * bpe_h5.c - the tokenizer recorded in a token stream (bpe.h,
 * rt_bpe_load_tokens): `dtrain-data text --bpe` stores encoder.json and
 * vocab.bpe, `--tokenizer` tokenizer.json, byte for byte (tokens.c), so
 * that a later tool decodes with the tokenizer the stream was made with.
 */
#include "runtime/data/bpe.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "base/h5.h"
#include "runtime/data/tokens.h"

/* One uint8 dataset of file, whole, into *out [*len] (malloc'd). */
static int read_bytes(hid_t file, const char *path, const char *set_name, char **out, size_t *len,
		      struct dt_err *err)
{
	hid_t set = H5I_INVALID_HID, type = H5I_INVALID_HID, space = H5I_INVALID_HID;
	hsize_t n = 0;
	int rc = -EINVAL;

	*out = NULL;
	if (H5Lexists(file, RT_BPE_H5_GROUP, H5P_DEFAULT) <= 0 ||
	    H5Lexists(file, set_name, H5P_DEFAULT) <= 0 || (set = H5Dopen2(file, set_name, H5P_DEFAULT)) < 0) {
		dt_err_add(err, "%s: no dataset /%s (the tokenizer is recorded there)", path, set_name);
		goto out;
	}
	type = H5Dget_type(set);
	space = H5Dget_space(set);
	if (type < 0 || H5Tget_class(type) != H5T_INTEGER || H5Tget_size(type) != 1 || space < 0 ||
	    H5Sget_simple_extent_ndims(space) != 1 || H5Sget_simple_extent_dims(space, &n, NULL) != 1 ||
	    n > ((hsize_t)1 << 31)) {
		dt_err_add(err, "%s: /%s must be a one-dimensional uint8 dataset of at most 2 GiB", path,
			   set_name);
		goto out;
	}
	*out = malloc(n ? (size_t)n : 1);
	if (!*out) {
		dt_err_add(err, "%s: out of memory for /%s", path, set_name);
		rc = -ENOMEM;
		goto out;
	}
	if (n && H5Dread(set, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, *out) < 0) {
		dt_err_add(err, "%s: /%s: cannot read", path, set_name);
		rc = -EIO;
		goto out;
	}
	*len = (size_t)n;
	rc = 0;
out:
	if (rc) {
		free(*out);
		*out = NULL;
	}
	dt_h5_close(&space, H5Sclose);
	dt_h5_close(&type, H5Tclose);
	dt_h5_close(&set, H5Dclose);
	return rc;
}

/* The root attributes: a token stream that records a tokenizer, its kind
 * into kind [size] and its vocab_size into *vocab. */
static int check_root(hid_t file, const char *path, char *kind, size_t size, int64_t *vocab,
		      struct dt_err *err)
{
	char why[DT_H5_WHY_MAX], *s = NULL;
	bool stream;

	stream = dt_h5_attr_get_str(file, "format", 64, &s, why) == 0 && !strcmp(s, RT_TOKENS_FORMAT);
	free(s);
	s = NULL;
	if (!stream)
		return dt_err_add(err, "%s: not a dtrain token stream", path);
	if (dt_h5_attr_get_str(file, "tokenizer", 64, &s, why) ||
	    (strcmp(s, RT_BPE_NAME) && strcmp(s, RT_BPE_HF_NAME))) {
		free(s);
		return dt_err_add(err, "%s: records no tokenizer (attribute tokenizer \"%s\" or \"%s\"; made by dtrain-data text --bpe or --tokenizer)",
				  path, RT_BPE_NAME, RT_BPE_HF_NAME), -ENOENT;
	}
	snprintf(kind, size, "%s", s);
	free(s);
	if (dt_h5_attr_get_i64(file, "vocab_size", vocab, why))
		return dt_err_add(err, "%s: attribute vocab_size: %s", path, why);
	return 0;
}

int rt_bpe_load_tokens(struct rt_bpe **out, const char *tokens_h5, struct dt_err *err)
{
	struct dt_h5_quiet q;
	hid_t fapl = H5I_INVALID_HID, file = H5I_INVALID_HID;
	struct rt_bpe_files f = { 0 };
	char *data[2] = { NULL, NULL }, kind[64], set[64], where[4200];
	int64_t vocab = 0;
	int rc = -EINVAL, i;

	*out = NULL;
	dt_h5_quiet_on(&q);
	fapl = dt_h5_fapl(DT_H5_STRONG_CLOSE);
	if (fapl < 0 || H5Fis_hdf5(tokens_h5) <= 0 ||
	    (file = H5Fopen(tokens_h5, H5F_ACC_RDONLY, fapl)) < 0) {
		dt_err_add(err, "%s: cannot open as HDF5", tokens_h5);
		goto out;
	}
	if ((rc = check_root(file, tokens_h5, kind, sizeof(kind), &vocab, err)))
		goto out;
	f.kind = kind;
	f.n = strcmp(kind, RT_BPE_NAME) ? 1 : 2;
	f.name[0] = f.n == 1 ? "tokenizer.json" : "encoder.json";
	f.name[1] = "vocab.bpe";
	for (i = 0; i < f.n && !rc; i++) {
		snprintf(set, sizeof(set), "%s/%s", RT_BPE_H5_GROUP, f.name[i]);
		rc = read_bytes(file, tokens_h5, set, &data[i], &f.len[i], err);
		f.data[i] = data[i];
	}
	snprintf(where, sizeof(where), "%s:/%s", tokens_h5, RT_BPE_H5_GROUP);
	if (!rc)
		rc = rt_bpe_load_files(out, &f, where, err);
	if (!rc && rt_bpe_vocab(*out) != vocab) {
		rc = dt_err_add(err, "%s: the recorded tokenizer has %d tokens but vocab_size is %" PRId64,
				tokens_h5, (int)rt_bpe_vocab(*out), vocab);
		rt_bpe_free(*out);
		*out = NULL;
	}
out:
	free(data[1]);
	free(data[0]);
	dt_h5_close(&file, H5Fclose);
	dt_h5_close(&fapl, H5Pclose);
	dt_h5_quiet_off(&q);
	return rc;
}
