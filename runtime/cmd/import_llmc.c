/*
 * import_llmc.c - an llm.c checkpoint (gpt2_124M.bin, what llm.c's
 * train_gpt2.py writes and its trainers read) into dtrain's GPT
 * (import.h).
 *
 * The file: 256 little-endian int32 (magic 20240326; version 3, float32
 * parameters, or 5, bfloat16; maxT, V, L, NH, C, Vp: the vocabulary padded
 * to Vp rows), then the parameters, each array whole, in this order (the
 * projections [out][in], as nn.Linear and dtrain store them):
 *   wte [Vp][C], wpe [maxT][C], ln_1 weight and bias [L][C],
 *   c_attn weight [L][3C][C] and bias [L][3C], attn c_proj [L][C][C] and
 *   [L][C], ln_2 [L][C] twice, c_fc [L][4C][C] and [L][4C], mlp c_proj
 *   [L][C][4C] and [L][C], ln_f [C] twice.
 * The padded rows of wte (V..Vp-1) are dropped; the head is wte (tied).
 * The file's size must be exactly what the header says.
 *
 * Sections: the header, the tensors.
 */
#include "runtime/cmd/import.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "llm.c files are read as they lie");

#define LLMC_MAGIC 20240326
#define LLMC_HEADER 1024 /* bytes: 256 int32 */

enum { WTE, WPE, LN1W, LN1B, QKVW, QKVB, PROJW, PROJB, LN2W, LN2B, FCW, FCB, FCPW, FCPB, LNFW,
       LNFB, ARRAYS };

/* a layer tensor's name after "transformer.h.<l>." and its array */
static const struct { const char *suffix; int array; } layer_arrays[] = {
	{ "ln_1.weight", LN1W }, { "ln_1.bias", LN1B }, { "attn.c_attn.weight", QKVW },
	{ "attn.c_attn.bias", QKVB }, { "attn.c_proj.weight", PROJW }, { "attn.c_proj.bias", PROJB },
	{ "ln_2.weight", LN2W }, { "ln_2.bias", LN2B }, { "mlp.c_fc.weight", FCW },
	{ "mlp.c_fc.bias", FCB }, { "mlp.c_proj.weight", FCPW }, { "mlp.c_proj.bias", FCPB },
};

struct llmc {
	const char *path;
	int fd;
	size_t elem;              /* bytes of a parameter: 4 or 2 */
	uint64_t start[ARRAYS];   /* each array's first element, from the data's start */
	uint64_t count[ARRAYS];   /* its elements */
	uint64_t layers;          /* L */
};

/* --- the header --- */

static int read_header(struct llmc *f, struct rt_import *im, struct dt_err *err)
{
	int32_t h[256];
	struct stat sb;
	uint64_t C, L, Vp, T, at = 0, want;
	ssize_t got = pread(f->fd, h, sizeof(h), 0);

	if (got != (ssize_t)sizeof(h) || fstat(f->fd, &sb))
		return dt_err_add(err, "%s: shorter than llm.c's 1024-byte header", f->path), -EINVAL;
	if (h[0] != LLMC_MAGIC)
		return dt_err_add(err, "%s: magic %" PRId32 ", not llm.c's %d: not an llm.c GPT-2 checkpoint",
				  f->path, h[0], LLMC_MAGIC), -EINVAL;
	if (h[1] != 3 && h[1] != 5)
		return dt_err_add(err, "%s: llm.c version %" PRId32 ": only 3 (float32) and 5 (bfloat16) are read",
				  f->path, h[1]), -EINVAL;
	for (int i = 2; i <= 7; i++)
		if (h[i] < 1 || h[i] > (1 << 24))
			return dt_err_add(err, "%s: header field %d is %" PRId32 ", out of range", f->path, i,
					  h[i]), -EINVAL;
	/* dtrain's own bounds (model.layers, model.embd) first: the sizes below
	 * then stay far from overflow (L 2^10, C 2^16, Vp and maxT 2^24) */
	if (h[4] > 1023 || h[6] > 65536)
		return dt_err_add(err, "%s: %" PRId32 " layers of width %" PRId32 ": beyond what dtrain's GPT builds (1023 layers, width 65536)",
				  f->path, h[4], h[6]), -EINVAL;
	if (h[7] < h[3])
		return dt_err_add(err, "%s: padded vocabulary %" PRId32 " below the vocabulary %" PRId32,
				  f->path, h[7], h[3]), -EINVAL;
	f->elem = h[1] == 3 ? 4 : 2;
	im->s.model.context = T = (uint64_t)h[2];
	im->s.model.vocab_size = h[3];
	im->s.model.layers = f->layers = L = (uint64_t)h[4];
	im->s.model.heads = h[5];
	im->s.model.embd = C = (uint64_t)h[6];
	Vp = (uint64_t)h[7];
	f->count[WTE] = Vp * C;
	f->count[WPE] = T * C;
	f->count[QKVW] = L * 3 * C * C;
	f->count[QKVB] = L * 3 * C;
	f->count[PROJW] = L * C * C;
	f->count[FCW] = f->count[FCPW] = L * 4 * C * C;
	f->count[FCB] = L * 4 * C;
	f->count[LN1W] = f->count[LN1B] = f->count[PROJB] = f->count[LN2W] = f->count[LN2B] =
		f->count[FCPB] = L * C;
	f->count[LNFW] = f->count[LNFB] = C;
	for (int a = 0; a < ARRAYS; a++) {
		f->start[a] = at;
		at += f->count[a];
	}
	want = LLMC_HEADER + at * f->elem; /* below 2^48: the bounds above */
	if ((uint64_t)sb.st_size != want)
		return dt_err_add(err, "%s: %lld bytes, where its header (V %ld, T %ld, L %ld, C %ld, Vp %llu, %s) says %llu: %s",
				  f->path, (long long)sb.st_size, im->s.model.vocab_size, im->s.model.context, im->s.model.layers, im->s.model.embd,
				  (unsigned long long)Vp, f->elem == 4 ? "float32" : "bfloat16",
				  (unsigned long long)want,
				  (uint64_t)sb.st_size < want ? "truncated" : "not what it says"), -EINVAL;
	return 0;
}

/* --- the tensors --- */

/* n elements from element `at` of the data into dst as float32 */
static int read_floats(const struct llmc *f, uint64_t at, size_t n, float *dst, struct dt_err *err)
{
	size_t bytes = n * f->elem, done = 0;
	char *p = (char *)dst;
	uint16_t *half = (uint16_t *)dst; /* bfloat16: read into dst's second half, widened forward */

	if (f->elem == 2)
		p = (char *)(half + n);
	while (done < bytes) {
		ssize_t r = pread(f->fd, p + done, bytes - done,
				  (off_t)(LLMC_HEADER + at * f->elem + done));

		if (r <= 0)
			return dt_err_add(err, "%s: cannot read: %s", f->path, r ? strerror(errno) : "short file"),
			       -EIO;
		done += (size_t)r;
	}
	for (size_t i = 0; f->elem == 2 && i < n; i++) {
		uint32_t bits = (uint32_t)half[n + i] << 16;

		memcpy(&dst[i], &bits, sizeof(bits));
	}
	return 0;
}

/* where dtrain's tensor c lies in the file: its array's element */
static int locate(const struct llmc *f, const struct ckpt_tensor *c, uint64_t *at)
{
	int l, used = 0;
	size_t i;

	if (!strcmp(c->name, "transformer.wte.weight") || !strcmp(c->name, "lm_head.weight"))
		return *at = f->start[WTE], 0;
	if (!strcmp(c->name, "transformer.wpe.weight"))
		return *at = f->start[WPE], 0;
	if (!strcmp(c->name, "transformer.ln_f.weight"))
		return *at = f->start[LNFW], 0;
	if (!strcmp(c->name, "transformer.ln_f.bias"))
		return *at = f->start[LNFB], 0;
	if (sscanf(c->name, "transformer.h.%d.%n", &l, &used) != 1 || !used)
		return -EINVAL;
	for (i = 0; i < sizeof(layer_arrays) / sizeof(layer_arrays[0]); i++)
		if (!strcmp(c->name + used, layer_arrays[i].suffix)) {
			int a = layer_arrays[i].array;

			if (l < 0 || (uint64_t)l >= f->layers)
				return -EINVAL;
			*at = f->start[a] + (uint64_t)l * (f->count[a] / f->layers);
			return 0;
		}
	return -EINVAL;
}

int rt_import_llmc(const char *bin, struct rt_import *im, struct dt_err *err)
{
	struct llmc f = { .path = bin, .fd = open(bin, O_RDONLY | O_CLOEXEC) };
	int rc = 0;

	if (f.fd < 0)
		return dt_err_add(err, "%s: %s", bin, strerror(errno)), -errno;
	rc = read_header(&f, im, err);
	if (!rc)
		rc = rt_import_table(im, bin, err);
	for (int i = 0; !rc && i < im->n; i++) {
		const struct ckpt_tensor *c = &im->t[i];
		uint64_t at;
		size_t n = (size_t)c->shape[0] * (size_t)(c->ndim > 1 ? c->shape[1] : 1);

		if (locate(&f, c, &at))
			rc = (dt_err_add(err, "%s: dtrain's tensor %s has no place in llm.c's layout", bin,
					c->name), -EINVAL);
		else
			rc = read_floats(&f, at, n, im->params + c->offset, err);
	}
	close(f.fd);
	return rc;
}
