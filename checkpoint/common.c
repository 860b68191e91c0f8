/*
 * common.c - what every part of the checkpoint module shares: names of
 * files and tensors, hashes and checksums, the HDF5 settings used for every
 * file, the meta's fields (one table for the HDF5 attributes and the
 * manifest) and its consistency check.
 */
#include "checkpoint/internal.h"
#include "base/buf.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>
#include <zlib.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

/* --- names and hashes --- */

void ckpt_hash64(const void *data, size_t n, char out[17])
{
	/* FNV-1a, 64 bits (Fowler, Noll, Vo): offset basis and prime */
	const unsigned char *p = data;
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	snprintf(out, 17, "%016" PRIx64, h);
}

/* zlib's crc32 over any length (it takes uInt lengths: 1 GiB at a time) */
static uint32_t crc32_zlib(uint32_t crc, const unsigned char *p, size_t n)
{
	uLong c = crc;

	while (n > 0) {
		uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;

		c = crc32(c, p, chunk);
		p += chunk;
		n -= chunk;
	}
	return (uint32_t)c;
}

/*
 * The same CRC-32, folded with carry-less multiplication (PCLMULQDQ) on
 * x86-64: zlib's table-driven loop was the largest CPU cost of a checkpoint
 * write after the copies (checkpoint/README.md, "Where the write time went",
 * has both speeds and how they were measured).
 *
 * Over GF(2), zlib's CRC register (before its final inversion) is
 * M(x) * x^32 mod P(x), bit-reflected, where M is the message with the
 * initial register xored into its first 32 bits: linear in M, and leading
 * zero bits change nothing. A 128-bit block A that lies D bits before a
 * block B therefore contributes exactly what A(x) * x^D mod P would at B's
 * place. With A = H x^64 + L (H, its first 64 bits, is the low quadword in
 * reflected order), A x^D = H (x^(D+64) mod P) + L (x^D mod P) mod P: two
 * carry-less 64 x 64 products of degree < 96 that fit in B. Xor them into B,
 * drop A, and the CRC is unchanged. Four 128-bit lanes fold 64 bytes ahead
 * each step (D = 512), so four products run at once. In reflected order a
 * product's bits come out one degree short of B's, so the constants are
 * x^(D+63) mod P and x^(D-1) mod P, bit-reflected in 64 bits (x^n mod P by
 * n shifts of 1, each reduced by 0x104C11DB7; degree d goes to bit 63 - d).
 * At the end the four lanes are a 64-byte message with the CRC of all that
 * was folded into them, from a zero register; zlib finishes it, then the
 * tail. tests/checkpoint/test_write.c compares it with zlib over lengths,
 * alignments, starting values and splits, and re-sums every file with zlib.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#define CRC_FOLD_MIN 512 /* shorter: zlib (folding has a fixed cost) */

/* One lane's step: x folded 512 bits ahead, onto the 16 bytes at next. */
__attribute__((target("pclmul"))) static inline __m128i fold512(__m128i x, __m128i k,
								const unsigned char *next)
{
	__m128i hi = _mm_clmulepi64_si128(x, k, 0x00); /* H times x^(D+63) mod P */
	__m128i lo = _mm_clmulepi64_si128(x, k, 0x11); /* L times x^(D-1) mod P */

	return _mm_xor_si128(_mm_xor_si128(hi, lo), _mm_loadu_si128((const void *)next));
}

__attribute__((target("pclmul"))) static uint32_t crc32_fold(uint32_t crc,
							       const unsigned char *p, size_t n)
{
	/* low quadword: x^575 mod P, high: x^511 mod P (reflected, see above) */
	const __m128i k = _mm_set_epi64x((long long)0xcad38e8f00000000ull,
					 (long long)0x653d982200000000ull);
	size_t m = n & ~(size_t)63, i;
	unsigned char lanes[64];
	__m128i x0, x1, x2, x3;

	x0 = _mm_loadu_si128((const void *)p);
	x1 = _mm_loadu_si128((const void *)(p + 16));
	x2 = _mm_loadu_si128((const void *)(p + 32));
	x3 = _mm_loadu_si128((const void *)(p + 48));
	x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)~crc));
	for (i = 64; i < m; i += 64) {
		x0 = fold512(x0, k, p + i);
		x1 = fold512(x1, k, p + i + 16);
		x2 = fold512(x2, k, p + i + 32);
		x3 = fold512(x3, k, p + i + 48);
	}
	_mm_storeu_si128((void *)lanes, x0);
	_mm_storeu_si128((void *)(lanes + 16), x1);
	_mm_storeu_si128((void *)(lanes + 32), x2);
	_mm_storeu_si128((void *)(lanes + 48), x3);
	crc = crc32_zlib(0xffffffffu, lanes, sizeof(lanes)); /* from a zero register */
	return crc32_zlib(crc, p + m, n - m);
}
#endif

uint32_t ckpt_crc32(uint32_t crc, const void *data, size_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (n >= CRC_FOLD_MIN && __builtin_cpu_supports("pclmul"))
		return crc32_fold(crc, data, n);
#endif
	return crc32_zlib(crc, data, n);
}

int ckpt__crc_fd(int fd, void *buf, size_t cap, uint64_t *size, uint32_t *crc)
{
	uint64_t total = 0;
	uint32_t c = 0;
	ssize_t got;

	for (;;) {
		got = read(fd, buf, cap);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (got == 0)
			break;
		c = ckpt_crc32(c, buf, (size_t)got);
		total += (uint64_t)got;
	}
	*size = total;
	*crc = c;
	return 0;
}

void ckpt_step_name(int64_t step, char *out, size_t size)
{
	snprintf(out, size, "step-%08" PRId64, step);
}

void ckpt_shard_name(int stage, char *out, size_t size)
{
	snprintf(out, size, "shard-%d.h5", stage);
}

void ckpt_piece_name(int stage, int piece, char *out, size_t size)
{
	snprintf(out, size, "optim-%d-%d.h5", stage, piece);
}

void ckpt_piece_rows(int64_t rows, int piece, int pieces, int64_t *first, int64_t *n)
{
	/* rows <= 1e9 and pieces <= 65536 (ckpt_meta_finish): no overflow */
	int64_t a = rows * piece / pieces, b = rows * (piece + 1) / pieces;

	*first = a;
	*n = b - a;
}

size_t ckpt_tensor_floats(const struct ckpt_tensor *t)
{
	size_t n = 1;
	int i;

	for (i = 0; i < t->ndim; i++)
		n *= (size_t)t->shape[i];
	return n;
}

void ckpt__tensor_path(const struct ckpt_meta *meta, const struct ckpt_tensor *t,
		       const char *state, char *out, size_t size)
{
	const char *which = strrchr(t->name, '.');

	if (meta->format_version == 1) /* the MLP's layer l, block l (ckpt.h) */
		snprintf(out, size, "%s%s%slayers/%d/%s", state ? "optimizer/" : "", state ? state : "",
			 state ? "/" : "", t->block, which ? which + 1 : t->name);
	else
		snprintf(out, size, "%s%s%s%s", state ? "optimizer/" : "model/", state ? state : "",
			 state ? "/" : "", t->name);
}

void ckpt__tensor_dims(const struct ckpt_tensor *t, hsize_t dims[CKPT_MAX_DIMS])
{
	int i;

	for (i = 0; i < t->ndim; i++)
		dims[i] = (hsize_t)t->shape[i];
}

/* --- HDF5 settings --- */

void ckpt__h5_quiet(void)
{
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

/* --- meta: its fields, one table --- */

#define F(field) offsetof(struct ckpt_meta, field), sizeof(((struct ckpt_meta *)0)->field)
#define MAX_DATA 65536 /* as ckpt_meta_finish */

/* In the manifest's order (internal.h). The third column is where each
 * attribute comes in an HDF5 file: format, the counters, the RNG, lr and
 * shuffle, the names, hashes and provenance, then the optimizer's states
 * and shards and the layout. */
static const struct ckpt__field fields[] = {
	/* what the file is: checked before anything else is believed */
	{ "format", "format", 0, CKPT__FORMAT, 0, 0, 0, 0, 0 },
	{ "format_version", "format_version", 1, CKPT__VERSION, F(format_version), 1, INT64_MAX, 0 },
	/* position */
	{ "step", "step", 2, CKPT__I64, F(step), 0, CKPT__MAX_COUNT, 0 },
	{ "epoch", "epoch", 3, CKPT__I64, F(epoch), 0, CKPT__MAX_COUNT, 0 },
	{ "epoch_step", "epoch_step", 4, CKPT__I64, F(epoch_step), 0, CKPT__MAX_COUNT, 0 },
	{ "steps_per_epoch", "steps_per_epoch", 5, CKPT__I64, F(steps_per_epoch), 1, CKPT__MAX_COUNT, 0 },
	{ "total_steps", "total_steps", 6, CKPT__I64, F(total_steps), 0, CKPT__MAX_COUNT, 0 },
	{ "lr", "lr", 12, CKPT__NUM, F(lr), 0, 0, 0 },
	/* data order */
	{ "rng.seed", "rng_seed", 10, CKPT__U64, F(rng_seed), 0, 0, 0 },
	{ "rng.stream", "rng_stream", 11, CKPT__U64, F(rng_stream), 0, 0, 0 },
	{ "shuffle", "shuffle", 13, CKPT__BOOL, F(shuffle), 0, 1, 0 },
	{ "global_batch", "global_batch", 7, CKPT__I64, F(global_batch), 1, CKPT__MAX_COUNT, 0 },
	{ "train_rows", "train_rows", 8, CKPT__I64, F(train_rows), 1, CKPT__MAX_COUNT, 0 },
	/* optimizer */
	{ "optimizer.type", "optimizer", 14, CKPT__STR, F(optimizer), 0, 0, 0 },
	{ "optimizer.step", "optimizer_step", 9, CKPT__I64, F(optimizer_step), 0, CKPT__MAX_COUNT, 0 },
	{ "optimizer.states", "optimizer_states", 22, CKPT__STATES, F(states), 0, CKPT_MAX_STATES, 0 },
	{ "optimizer.shards", "optimizer_shards", 23, CKPT__INT, F(optimizer_shards), 1, MAX_DATA, CKPT__F_ONE },
	/* model */
	{ "model.type", "model_type", 15, CKPT__STR, F(model_type), 0, 0, CKPT__F_MODEL },
	{ "model.config", "model_config", 16, CKPT__CONFIG, F(model_config), 0, 0, CKPT__F_MODEL },
	{ "model.blocks", "blocks", 17, CKPT__INT, F(n_blocks), 1, CKPT_MAX_BLOCKS, CKPT__F_MODEL },
	/* identity */
	{ "spec_hash", "spec_hash", 18, CKPT__HASH, F(spec_hash), 0, 0, 0 },
	{ "model_hash", "model_hash", 19, CKPT__HASH, F(model_hash), 0, 0, 0 },
	/* layout: pipeline before stage_first, whose length it gives */
	{ "layout.data", "layout_data", 24, CKPT__INT, F(data), 1, MAX_DATA, 0 },
	{ "layout.pipeline", "layout_pipeline", 25, CKPT__INT, F(pipeline), 1, CKPT_MAX_BLOCKS, 0 },
	{ "layout.stage_first", "stage_first", 26, CKPT__STAGES, F(stage_first), 0, CKPT_MAX_BLOCKS, 0 },
	/* provenance */
	{ "created", "created", 20, CKPT__TIME, F(created), 0, 0, 0 },
	{ "job_id", "job_id", 21, CKPT__STR, F(job_id), 0, 0, 0 },
};

#undef F

const struct ckpt__field *ckpt__meta_fields(int *n)
{
	*n = (int)(sizeof(fields) / sizeof(fields[0]));
	return fields;
}

const struct ckpt__field *ckpt__meta_field_at(int at)
{
	size_t i;

	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (fields[i].attr_at == at)
			return &fields[i];
	return NULL;
}

int64_t ckpt__meta_int(const struct ckpt__field *f, const struct ckpt_meta *meta)
{
	const char *p = (const char *)meta + f->offset;
	int v;

	switch (f->kind) {
	case CKPT__VERSION:
		return CKPT_VERSION;
	case CKPT__I64:
		return *(const int64_t *)p;
	case CKPT__BOOL:
		return *(const bool *)p ? 1 : 0;
	case CKPT__INT:
		v = *(const int *)p;
		return (f->flags & CKPT__F_ONE) && v < 1 ? 1 : v;
	default:
		return 0;
	}
}

const char *ckpt__meta_str(const struct ckpt__field *f, const struct ckpt_meta *meta)
{
	return f->kind == CKPT__FORMAT ? CKPT_FORMAT : (const char *)meta + f->offset;
}

/* --- meta: its consistency --- */

/* A plain word: what we accept as an optimizer, state or model type name. */
static bool plain_word(const char *s, size_t cap)
{
	size_t i, n = strnlen(s, cap);

	if (n == 0 || n == cap)
		return false;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return true;
}

/* A tensor name: letters, digits, '_' and '.', not starting or ending with
 * '.', no ".." (a single HDF5 link name, never a path) */
static bool tensor_name(const char *s, size_t cap)
{
	size_t i, n = strnlen(s, cap);

	if (n == 0 || n == cap || s[0] == '.' || s[n - 1] == '.' || strstr(s, ".."))
		return false;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '.'))
			return false;
	return true;
}

/* config (a NUL-terminated string of CKPT_CONFIG_MAX bytes at most)
 * rewritten as json-c's compact serialisation of the object it holds;
 * -EINVAL when it is not one or its canonical form does not fit. */
static int canonical_config(char *config)
{
	json_object *o = json_tokener_parse(config);
	const char *text = NULL;
	int rc = -EINVAL;

	if (o && json_object_is_type(o, json_type_object))
		text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
							    JSON_C_TO_STRING_NOSLASHESCAPE);
	if (text && strlen(text) < CKPT_CONFIG_MAX) {
		memmove(config, text, strlen(text) + 1);
		rc = 0;
	}
	json_object_put(o);
	return rc;
}

int ckpt_meta_finish(struct ckpt_meta *meta, struct dt_err *err)
{
	char buf[64];
	struct dt_buf b = { 0 };
	size_t clen;
	int k;

	if (meta->n_blocks < 1 || meta->n_blocks > CKPT_MAX_BLOCKS)
		return dt_err_add(err, "checkpoint meta: n_blocks must be 1..%d (got %d)",
				  CKPT_MAX_BLOCKS, meta->n_blocks);
	if (meta->pipeline < 1 || meta->pipeline > meta->n_blocks)
		return dt_err_add(err, "checkpoint meta: pipeline must be 1..%d (got %d)",
				  meta->n_blocks, meta->pipeline);
	if (meta->data < 1 || meta->data > 65536)
		return dt_err_add(err, "checkpoint meta: data must be 1..65536 (got %d)", meta->data);
	if (meta->optimizer_shards == 0)
		meta->optimizer_shards = 1; /* written before optimizers were sharded */
	if (meta->optimizer_shards < 1 || meta->optimizer_shards > meta->data ||
	    (meta->optimizer_shards > 1 &&
	     ((int64_t)meta->pipeline * (meta->optimizer_shards + 1) + 1 > CKPT_MAX_FILES ||
	      meta->n_states < 1)))
		return dt_err_add(err, "checkpoint meta: optimizer_shards must be 1..%d, the data-parallel replicas, with optimizer states and at most %d files (got %d on %d stages, %d states)",
				  meta->data, CKPT_MAX_FILES, meta->optimizer_shards, meta->pipeline,
				  meta->n_states);
	if (meta->stage_first[0] != 0 || meta->stage_first[meta->pipeline] != meta->n_blocks)
		return dt_err_add(err, "checkpoint meta: stage_first must run from 0 to %d",
				  meta->n_blocks);
	for (k = 0; k < meta->pipeline; k++)
		if (meta->stage_first[k + 1] <= meta->stage_first[k])
			return dt_err_add(err, "checkpoint meta: stage_first must increase (stage %d)", k);
	if (!plain_word(meta->optimizer, sizeof(meta->optimizer)))
		return dt_err_add(err, "checkpoint meta: optimizer must be a plain name");
	if (meta->n_states < 0 || meta->n_states > CKPT_MAX_STATES)
		return dt_err_add(err, "checkpoint meta: n_states must be 0..%d (got %d)",
				  CKPT_MAX_STATES, meta->n_states);
	for (k = 0; k < meta->n_states; k++)
		if (!plain_word(meta->states[k], sizeof(meta->states[k])))
			return dt_err_add(err, "checkpoint meta: states[%d] must be a plain name", k);
	if (!plain_word(meta->model_type, sizeof(meta->model_type)))
		return dt_err_add(err, "checkpoint meta: model type must be a plain name");
	clen = strnlen(meta->model_config, sizeof(meta->model_config));
	if (clen == sizeof(meta->model_config) || canonical_config(meta->model_config))
		return dt_err_add(err, "checkpoint meta: model config must be a JSON object of at most %d bytes",
				  CKPT_CONFIG_MAX - 1);
	if (meta->step < 0 || meta->epoch < 0 || meta->epoch_step < 0 || meta->steps_per_epoch < 1 ||
	    meta->total_steps < 0 || meta->global_batch < 1 || meta->train_rows < 1 ||
	    meta->optimizer_step < 0)
		return dt_err_add(err, "checkpoint meta: step, epoch and counts must not be negative");

	/* model hash: exactly what the tensors' shapes and meaning depend on */
	if (dt_buf_printf(&b, "%s\n%s", meta->model_type, meta->model_config)) {
		dt_buf_free(&b);
		return dt_err_add(err, "checkpoint meta: out of memory for the model hash"), -ENOMEM;
	}
	ckpt_hash64(b.p, b.len, buf);
	memcpy(meta->model_hash, buf, 17);
	dt_buf_free(&b);
	return 0;
}

int ckpt_tensors_check(const struct ckpt_meta *meta, const struct ckpt_tensor *t, int n_tensors,
		       struct dt_err *err)
{
	size_t n, total = 0;
	int i, j, block = 0;

	if (n_tensors < 1 || n_tensors > CKPT_MAX_TENSORS)
		return dt_err_add(err, "checkpoint tensors: must be 1..%d (got %d)", CKPT_MAX_TENSORS,
				  n_tensors);
	for (i = 0; i < n_tensors; i++) {
		if (!tensor_name(t[i].name, sizeof(t[i].name)))
			return dt_err_add(err, "checkpoint tensors[%d]: name must be letters, digits, '_' and '.' (at most %d bytes)",
					  i, CKPT_NAME_MAX - 1);
		if (t[i].ndim < 1 || t[i].ndim > CKPT_MAX_DIMS)
			return dt_err_add(err, "checkpoint tensor \"%s\": must have 1..%d dimensions (got %d)",
					  t[i].name, CKPT_MAX_DIMS, t[i].ndim);
		for (j = 0, n = 1; j < t[i].ndim; j++) {
			if (t[i].shape[j] < 1 || t[i].shape[j] > 1000000000)
				return dt_err_add(err, "checkpoint tensor \"%s\": shape[%d] must be 1..1e9 (got %lld)",
						  t[i].name, j, (long long)t[i].shape[j]);
			if (__builtin_mul_overflow(n, (size_t)t[i].shape[j], &n) || n > CKPT_MAX_FLOATS)
				break;
		}
		/* every size computed from the shapes fits in a size_t: the
		 * tensors' floats, times the states and 4 bytes each */
		if (j < t[i].ndim || __builtin_add_overflow(total, n, &total) || total > CKPT_MAX_FLOATS)
			return dt_err_add(err, "checkpoint tensor \"%s\": the model has more than 2^56 floats",
					  t[i].name);
		if (t[i].block < block || t[i].block > block + 1 || t[i].block >= meta->n_blocks ||
		    (i == 0 && t[i].block != 0))
			return dt_err_add(err, "checkpoint tensor \"%s\": block %d out of order (blocks 0..%d, each with a tensor, in order)",
					  t[i].name, t[i].block, meta->n_blocks - 1);
		block = t[i].block;
		for (j = 0; j < i; j++)
			if (!strcmp(t[j].name, t[i].name))
				return dt_err_add(err, "checkpoint tensor \"%s\": listed twice", t[i].name);
	}
	if (block != meta->n_blocks - 1)
		return dt_err_add(err, "checkpoint tensors: block %d has none (the model has %d blocks)",
				  block + 1, meta->n_blocks);
	return 0;
}

int ckpt__check_meta(const struct ckpt_meta *meta, const struct ckpt_tensor *tensors, int n,
		     const char *path, const char *doing, struct dt_err *err)
{
	struct ckpt_meta *copy = malloc(sizeof(*copy));
	int rc;

	if (!copy)
		return dt_err_add(err, "%s: out of memory", path), -ENOMEM;
	*copy = *meta;
	rc = ckpt_meta_finish(copy, err);
	if (!rc && strcmp(copy->model_hash, meta->model_hash))
		rc = dt_err_add(err, "checkpoint meta: model_hash does not match model type and config (got \"%.16s\")",
				meta->model_hash);
	if (!rc && tensors)
		rc = ckpt_tensors_check(meta, tensors, n, err);
	if (rc == -EINVAL)
		dt_err_add(err, "%s: refusing to %s a checkpoint with an inconsistent meta or tensor table",
			   path, doing);
	free(copy);
	return rc;
}
