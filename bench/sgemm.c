/*
 * sgemm.c - dtrain-bench-sgemm: the compute peer of `make bench`.
 *
 * Measures what the BLAS dtrain links (OpenBLAS) reaches on this machine:
 *   square N          C[N][N] += A[N][N] B[N][N], the usual peak figure;
 *   mlp BATCH W,...   the matrix products of one training step of an MLP
 *                     with layer widths W0 (inputs) .. Wn (outputs) at that
 *                     batch, with the same shapes and transposes as
 *                     runtime/kernels/kernels.c: forward y = x W^T per layer;
 *                     backward dW += dy^T x per layer and dx = dy W for every
 *                     layer but the first.
 *   gpt B T C L V NH  the products of one training step of dtrain's GPT
 *                     (runtime/model/gpt.c) over B sequences of T positions:
 *                     per block the four linear layers (forward, weight
 *                     gradient, input gradient) and attention one head of
 *                     one sequence at a time (scores, P V; backward: the
 *                     scores again, dV, dP, dQ, dK), whole T x T squares as
 *                     runtime/kernels/transformer.c computes them; then the head.
 * With --lib onednn-f32 or onednn-bf16, `gpt` runs its linear layers' and
 * head's products (no attention) through oneDNN's matmul instead, in
 * float32 or with bf16 inputs (converted once, before timing) and float32
 * results, as train.precision "bf16" computes them (runtime/kernels/bf16.h);
 * --lib openblas --linear runs the same products through OpenBLAS, so
 * that the three compare on the step's own shapes.
 * Each runs repeatedly for --seconds after one warm-up round; it prints one
 * JSON object: {"what":..., "threads":..., "flop":..., "seconds":...,
 * "gflops":...}. Several copies started at once measure how the machine's
 * sgemm rate scales over processes (bench/run.py does that).
 *
 * `mlp` with --part K/L runs block K of L of every product, as replica K of
 * dtrain's "split" way does (runtime/parallel/dp.h): the forward pass and the
 * weight gradient on block K of each layer's outputs, the input gradient on
 * block K of its inputs, over the whole batch; a narrow head (under 2
 * cache lines of outputs per block, rt_part_head_rows) by block K of the
 * rows instead, its weight gradient by block K of its inputs. With
 * --lockstep FILE, the L copies wait for each other where the split way
 * must (after each layer's forward but a head's cut by rows, after each
 * input gradient, and at the end of a step) through a barrier in FILE, a
 * file the copies map shared: what any split step of those products can
 * reach here, without a line of dtrain in it. With --copies L instead of
 * --part, L copies of the whole products (plain data parallelism, each at
 * the BATCH given) meet there once a step, after all of them: what any
 * synchronous data-parallel step of those products can reach.
 *
 * Sections: arguments, the lockstep barrier, the products, main.
 */
#include <cblas.h>
#include <dnnl.h>
#include <errno.h>
#include <omp.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAX_WIDTHS 64

static const char usage[] =
	"usage: dtrain-bench-sgemm [--threads N] [--seconds S] square N\n"
	"       dtrain-bench-sgemm [--threads N] [--seconds S]\n"
	"                          [--part K/L [--lockstep FILE] | --copies L --lockstep FILE]\n"
	"                          mlp BATCH W0,W1,...,Wn\n"
	"       dtrain-bench-sgemm [--threads N] [--seconds S] [--lib LIB] [--linear]\n"
	"                          gpt B T C L V NH\n"
	"\n"
	"Measures OpenBLAS sgemm on square matrices, or on the matrix products of\n"
	"one MLP training step (forward, weight gradients, input gradients), and\n"
	"prints one JSON object with the rate in GFLOP/s.\n"
	"\n"
	"  --threads N       OpenBLAS threads (default 1)\n"
	"  --seconds S       how long to measure after a warm-up (default 2)\n"
	"  --part K/L        mlp: only block K (0..L-1) of every layer, as replica K\n"
	"                    of dtrain's \"split\" way computes it\n"
	"  --lockstep FILE   with --part: the L copies, each started with its own K\n"
	"                    and the same new FILE, wait for each other after every\n"
	"                    layer as the split way does; with --copies: once a step\n"
	"  --copies L        mlp, with --lockstep: this is one of L copies that each\n"
	"                    run the whole products (plain data parallelism)\n"
	"  --lib LIB         gpt: openblas (default), onednn-f32 or onednn-bf16\n"
	"                    (oneDNN's matmul; its runs are the linear layers only)\n"
	"  --linear          gpt: the linear layers' and head's products only\n"
	"  -h, --help        this text\n";

/* --- arguments --- */

struct opts {
	int threads;
	double seconds;
	int square;        /* N of `square`, or 0 */
	int batch;         /* `mlp`: rows of the batch */
	int widths[MAX_WIDTHS];
	int n_widths;
	int gpt[6];            /* `gpt`: B T C L V NH, or gpt[0] = 0 */
	int part, parts;       /* --part K/L: block K of L (default 0/1, all) */
	int copies;            /* --copies L: whole products, L copies (default 1) */
	const char *lockstep;  /* --lockstep FILE, or NULL */
	const char *lib;       /* --lib: "openblas", "onednn-f32", "onednn-bf16" */
	bool linear;           /* --linear (always with oneDNN) */
};

static int parse_int(const char *s, const char *what, int *v)
{
	char *end;
	long x;

	errno = 0;
	x = strtol(s, &end, 10);
	if (errno || end == s || *end || x < 1 || x > 1 << 20) {
		fprintf(stderr, "dtrain-bench-sgemm: %s: not a positive integer: \"%s\"\n", what, s);
		return -EINVAL;
	}
	*v = (int)x;
	return 0;
}

static int parse_widths(const char *s, struct opts *o)
{
	char buf[1024], *tok, *save = NULL;

	if (strlen(s) >= sizeof(buf)) {
		fprintf(stderr, "dtrain-bench-sgemm: widths: too long\n");
		return -EINVAL;
	}
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (o->n_widths == MAX_WIDTHS) {
			fprintf(stderr, "dtrain-bench-sgemm: widths: more than %d\n", MAX_WIDTHS);
			return -EINVAL;
		}
		if (parse_int(tok, "widths", &o->widths[o->n_widths++]))
			return -EINVAL;
	}
	if (o->n_widths < 2) {
		fprintf(stderr, "dtrain-bench-sgemm: widths: need at least inputs and outputs (got \"%s\")\n", s);
		return -EINVAL;
	}
	return 0;
}

/* "K/L" with 0 <= K < L <= MAX_WIDTHS */
static int parse_part(const char *s, struct opts *o)
{
	int used = 0;

	if (sscanf(s, "%d/%d%n", &o->part, &o->parts, &used) != 2 || s[used] || o->parts < 1 ||
	    o->parts > MAX_WIDTHS || o->part < 0 || o->part >= o->parts) {
		fprintf(stderr, "dtrain-bench-sgemm: --part: want K/L with 0 <= K < L <= %d (got \"%s\")\n",
			MAX_WIDTHS, s);
		return -EINVAL;
	}
	return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
	int i = 1;

	o->threads = 1;
	o->seconds = 2.0;
	o->parts = 1;
	o->copies = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			fputs(usage, stdout);
			exit(0);
		} else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
			if (parse_int(argv[++i], "--threads", &o->threads))
				return -EINVAL;
		} else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
			char *end;

			o->seconds = strtod(argv[++i], &end);
			if (*end || !(o->seconds > 0 && o->seconds <= 3600)) {
				fprintf(stderr, "dtrain-bench-sgemm: --seconds: want a number in (0, 3600] (got \"%s\")\n", argv[i]);
				return -EINVAL;
			}
		} else if (!strcmp(argv[i], "--part") && i + 1 < argc) {
			if (parse_part(argv[++i], o))
				return -EINVAL;
		} else if (!strcmp(argv[i], "--copies") && i + 1 < argc) {
			if (parse_int(argv[++i], "--copies", &o->copies))
				return -EINVAL;
		} else if (!strcmp(argv[i], "--lockstep") && i + 1 < argc) {
			o->lockstep = argv[++i];
		} else if (!strcmp(argv[i], "--lib") && i + 1 < argc) {
			o->lib = argv[++i];
			if (strcmp(o->lib, "openblas") && strcmp(o->lib, "onednn-f32") &&
			    strcmp(o->lib, "onednn-bf16")) {
				fprintf(stderr, "dtrain-bench-sgemm: --lib: want openblas, onednn-f32 or onednn-bf16 (got \"%s\")\n",
					o->lib);
				return -EINVAL;
			}
			o->linear = o->linear || strcmp(o->lib, "openblas");
		} else if (!strcmp(argv[i], "--linear")) {
			o->linear = true;
		} else {
			fprintf(stderr, "dtrain-bench-sgemm: unknown option or missing value: %s\n%s", argv[i], usage);
			return -EINVAL;
		}
	}
	if (o->linear && !(i + 7 == argc && !strcmp(argv[i], "gpt"))) {
		fprintf(stderr, "dtrain-bench-sgemm: --lib and --linear: with `gpt` only\n");
		return -EINVAL;
	}
	if (o->copies > 1 && (o->parts > 1 || !o->lockstep)) {
		fprintf(stderr, "dtrain-bench-sgemm: --copies: with --lockstep, and not with --part\n");
		return -EINVAL;
	}
	if (i + 2 == argc && !strcmp(argv[i], "square")) {
		if (o->parts > 1 || o->copies > 1 || o->lockstep) {
			fprintf(stderr, "dtrain-bench-sgemm: --part, --copies and --lockstep are for `mlp` only\n");
			return -EINVAL;
		}
		return parse_int(argv[i + 1], "square", &o->square);
	}
	if (i + 3 == argc && !strcmp(argv[i], "mlp")) {
		if (parse_int(argv[i + 1], "BATCH", &o->batch))
			return -EINVAL;
		return parse_widths(argv[i + 2], o);
	}
	if (i + 7 == argc && !strcmp(argv[i], "gpt")) {
		static const char *const names[6] = { "B", "T", "C", "L", "V", "NH" };
		int k;

		for (k = 0; k < 6; k++)
			if (parse_int(argv[i + 1 + k], names[k], &o->gpt[k]))
				return -EINVAL;
		if (o->gpt[2] % o->gpt[5]) {
			fprintf(stderr, "dtrain-bench-sgemm: gpt: NH must divide C\n");
			return -EINVAL;
		}
		return 0;
	}
	fprintf(stderr, "dtrain-bench-sgemm: want `square N`, `mlp BATCH W0,...,Wn` or `gpt B T C L V NH`\n%s", usage);
	return -EINVAL;
}

/* --- the lockstep barrier --- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* In the shared file, zero when created: the copies that have arrived at
 * the current barrier, how many barriers have been passed, and per barrier
 * whether a copy wants to stop, in two slots by the parity of the barrier's
 * number: a copy that has passed barrier g may read slot g % 2 late, after
 * a faster copy has already arrived at g + 1 and set its own stop there
 * (with one barrier a step, --copies, that is the next step's), so the two
 * must not share a flag. */
struct shared_barrier {
	atomic_uint arrived;
	atomic_uint passed;
	atomic_int stop[2];
};

struct lockstep {
	struct shared_barrier *b; /* mapped; NULL: no lockstep */
	int copies;
	double wait_s;            /* time spent in lockstep_wait */
};

static int lockstep_open(struct lockstep *ls, const char *path, int copies)
{
	int fd = open(path, O_RDWR | O_CREAT, 0600), rc = 0;
	void *p = MAP_FAILED;

	if (fd < 0 || ftruncate(fd, (off_t)sizeof(struct shared_barrier)) != 0 ||
	    (p = mmap(NULL, sizeof(struct shared_barrier), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		      0)) == MAP_FAILED) {
		rc = -errno;
		fprintf(stderr, "dtrain-bench-sgemm: --lockstep: \"%s\": %s\n", path, strerror(-rc));
	}
	if (fd >= 0)
		close(fd);
	ls->b = p == MAP_FAILED ? NULL : p;
	ls->copies = copies;
	return rc;
}

/* Every copy's `stop` or'ed: returns when all copies have arrived, like
 * an MPI_Barrier of processes that spin and then yield while they wait
 * (dtrain's ranks under mpi_yield_when_idle). No-op without lockstep
 * (ls NULL, or not mapped). */
static bool lockstep_wait(struct lockstep *ls, bool stop)
{
	unsigned passed;
	double t0;
	int spins = 0;

	if (!ls || !ls->b)
		return stop;
	t0 = now_s();
	/* read before arriving: the last arrival moves it on */
	passed = atomic_load(&ls->b->passed);
	if (stop)
		atomic_store(&ls->b->stop[passed % 2], 1);
	if (atomic_fetch_add(&ls->b->arrived, 1) + 1 == (unsigned)ls->copies) {
		/* every copy has read the other slot (barrier passed - 1's)
		 * before arriving here, and none writes it before this one
		 * passes: clear it for the next barrier */
		atomic_store(&ls->b->stop[(passed + 1) % 2], 0);
		atomic_store(&ls->b->arrived, 0);
		atomic_fetch_add(&ls->b->passed, 1);
	} else {
		while (atomic_load(&ls->b->passed) == passed)
			if (++spins > 64)
				sched_yield();
	}
	ls->wait_s += now_s() - t0;
	return atomic_load(&ls->b->stop[passed % 2]) != 0;
}

/* --- the products --- */

static float *filled(size_t n)
{
	float *p = malloc((n ? n : 1) * sizeof(float));
	size_t i;

	for (i = 0; p && i < n; i++)
		p[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
	return p;
}

/* Buffers of the mlp case: per layer the weights, gradients and the
 * activations x[l] = input of layer l ([batch][widths[l]]). */
struct mlp {
	float **w, **dw, **act, *dy, *dx;
};

/* Block k of L of a layer `width` wide: [*c0, *c1), on 16-float lines as
 * even as that allows (the split way's blocks, rt_part_cols). */
static void block_of(int width, int k, int L, int *c0, int *c1)
{
	long lines = (width + 15) / 16;

	*c0 = (int)(lines * k / L * 16);
	*c1 = (int)(lines * (k + 1) / L * 16);
	*c0 = *c0 < width ? *c0 : width;
	*c1 = *c1 < width ? *c1 : width;
}

/* The head (the last layer, n - 1) cut by rows: its forward and input
 * gradient on block o->part of the batch's rows, its weight gradient on
 * that block of its inputs; one barrier, after the input gradient (the
 * split way's, runtime/model/model.c). Returns the flop count. */
static double head_rows(const struct opts *o, struct mlp *m, struct lockstep *ls)
{
	int b = o->batch, l = o->n_widths - 2, in = o->widths[l], out = o->widths[l + 1], i0, i1;
	int r0 = b * o->part / o->parts, r1 = b * (o->part + 1) / o->parts;
	size_t ri = (size_t)r0 * (size_t)in, ro = (size_t)r0 * (size_t)out;

	if (r1 > r0) {
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, out, in, 1.0f,
			    m->act[l] + ri, in, m->w[l], in, 1.0f, m->act[l + 1] + ro, out);
		if (l > 0)
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, in, out, 1.0f,
				    m->dy + ro, out, m->w[l], in, 0.0f, m->dx + ri, in);
	}
	lockstep_wait(ls, false);
	block_of(in, o->part, o->parts, &i0, &i1);
	if (i1 > i0)
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, i1 - i0, b, 1.0f, m->dy, out,
			    m->act[l] + i0, in, 1.0f, m->dw[l] + i0, in);
	return 2.0 * (r1 - r0) * out * in * (l > 0 ? 2 : 1) + 2.0 * b * out * (i1 - i0);
}

/* One step's products (block o->part of each, all with 0/1); with --part,
 * a lockstep barrier after each layer's forward and each input gradient,
 * where the split way has one (a narrow head: head_rows); with --copies,
 * only the step's last. Returns the flop count; *stop: a copy wanted to
 * stop (the step's last barrier carries it). */
static double mlp_round(const struct opts *o, struct mlp *m, struct lockstep *ls, bool *stop)
{
	int l, b = o->batch, n = o->n_widths - 1, c0, c1, i0, i1;
	/* rt_part_head_rows: under 2 cache lines of outputs per block */
	bool by_rows = o->parts > 1 && (o->widths[n] + 15) / 16 < 2 * o->parts;
	struct lockstep *per_layer = o->copies > 1 ? NULL : ls;
	double flop = 0;

	for (l = 0; l < n - by_rows; l++) {
		int in = o->widths[l], out = o->widths[l + 1];

		block_of(out, o->part, o->parts, &c0, &c1);
		if (c1 > c0)
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, c1 - c0, in, 1.0f,
				    m->act[l], in, m->w[l] + (size_t)c0 * (size_t)in, in, 1.0f,
				    m->act[l + 1] + c0, out);
		flop += 2.0 * b * (c1 - c0) * in;
		if (per_layer)
			lockstep_wait(per_layer, false);
	}
	if (by_rows)
		flop += head_rows(o, m, per_layer);
	for (l = n - 1 - by_rows; l >= 0; l--) {
		int in = o->widths[l], out = o->widths[l + 1];

		block_of(out, o->part, o->parts, &c0, &c1);
		block_of(in, o->part, o->parts, &i0, &i1);
		if (c1 > c0)
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c1 - c0, in, b, 1.0f,
				    m->dy + c0, out, m->act[l], in, 1.0f,
				    m->dw[l] + (size_t)c0 * (size_t)in, in);
		flop += 2.0 * b * (c1 - c0) * in;
		if (l > 0) {
			if (i1 > i0)
				cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, i1 - i0, out,
					    1.0f, m->dy, out, m->w[l] + i0, in, 0.0f, m->dx + i0, in);
			flop += 2.0 * b * out * (i1 - i0);
			if (per_layer)
				lockstep_wait(per_layer, false);
		}
	}
	*stop = lockstep_wait(ls, *stop);
	return flop;
}

/* C [M][N] = op(A) op(B), op(A) [M][K]: its flops */
/* oneDNN's matmul (--lib onednn-*): a primitive per shape and transposes,
 * made on first use; in bf16 its inputs are the bf16 buffers (any values:
 * only the time counts), its result float32 as in dtrain's bf16 layers. */
#define MAX_DNNL 32
static struct {
	bool on, bf16;
	dnnl_engine_t eng;
	dnnl_stream_t stream;
	unsigned short *a16, *b16; /* bf16 inputs, each as large as any operand */
	int n;
	struct dnnl_mm {
		bool ta, tb;
		int M, N, K;
		dnnl_primitive_t p;
		dnnl_memory_t src, wei, dst;
	} mm[MAX_DNNL];
} dn;

static int dnnl_open(bool bf16, int threads, size_t floats)
{
	size_t i;

	dn.on = true;
	dn.bf16 = bf16;
	omp_set_num_threads(threads);
	if (dnnl_engine_create(&dn.eng, dnnl_cpu, 0) != dnnl_success ||
	    dnnl_stream_create(&dn.stream, dn.eng, dnnl_stream_default_flags) != dnnl_success)
		return -EIO;
	if (!bf16)
		return 0;
	dn.a16 = malloc(floats * sizeof(*dn.a16));
	dn.b16 = malloc(floats * sizeof(*dn.b16));
	if (!dn.a16 || !dn.b16)
		return -ENOMEM;
	for (i = 0; i < floats; i++)
		dn.a16[i] = dn.b16[i] = 0x3f80; /* 1.0 */
	return 0;
}

static struct dnnl_mm *dnnl_mm_of(bool ta, bool tb, int M, int N, int K)
{
	dnnl_data_type_t in = dn.bf16 ? dnnl_bf16 : dnnl_f32;
	dnnl_memory_desc_t src, wei, dst;
	dnnl_dims_t ds = { M, K }, dw = { K, N }, dd = { M, N };
	dnnl_primitive_desc_t pd = NULL;
	dnnl_matmul_desc_t op;
	struct dnnl_mm *m;
	int i;

	for (i = 0; i < dn.n; i++) {
		m = &dn.mm[i];
		if (m->ta == ta && m->tb == tb && m->M == M && m->N == N && m->K == K)
			return m;
	}
	if (dn.n == MAX_DNNL)
		return NULL;
	m = &dn.mm[dn.n];
	*m = (struct dnnl_mm){ .ta = ta, .tb = tb, .M = M, .N = N, .K = K };
	if (dnnl_memory_desc_init_by_tag(&src, 2, ds, in, ta ? dnnl_ba : dnnl_ab) != dnnl_success ||
	    dnnl_memory_desc_init_by_tag(&wei, 2, dw, in, tb ? dnnl_ba : dnnl_ab) != dnnl_success ||
	    dnnl_memory_desc_init_by_tag(&dst, 2, dd, dnnl_f32, dnnl_ab) != dnnl_success ||
	    dnnl_matmul_desc_init(&op, &src, &wei, NULL, &dst) != dnnl_success ||
	    dnnl_primitive_desc_create(&pd, &op, NULL, dn.eng, NULL) != dnnl_success ||
	    dnnl_primitive_create(&m->p, pd) != dnnl_success ||
	    dnnl_memory_create(&m->src, &src, dn.eng, DNNL_MEMORY_NONE) != dnnl_success ||
	    dnnl_memory_create(&m->wei, &wei, dn.eng, DNNL_MEMORY_NONE) != dnnl_success ||
	    dnnl_memory_create(&m->dst, &dst, dn.eng, DNNL_MEMORY_NONE) != dnnl_success) {
		if (pd)
			dnnl_primitive_desc_destroy(pd);
		return NULL;
	}
	dnnl_primitive_desc_destroy(pd);
	dn.n++;
	return m;
}

static void dnnl_close(void)
{
	int i;

	for (i = 0; i < dn.n; i++) {
		dnnl_primitive_destroy(dn.mm[i].p);
		dnnl_memory_destroy(dn.mm[i].src);
		dnnl_memory_destroy(dn.mm[i].wei);
		dnnl_memory_destroy(dn.mm[i].dst);
	}
	if (dn.stream)
		dnnl_stream_destroy(dn.stream);
	if (dn.eng)
		dnnl_engine_destroy(dn.eng);
	free(dn.a16);
	free(dn.b16);
}

/* c [M][N] = op(a) op(b) through oneDNN (contiguous operands); exits on a
 * failure (a benchmark: nothing to save) */
static void dnnl_mm_run(bool ta, bool tb, int M, int N, int K, const float *a, const float *b, float *c)
{
	struct dnnl_mm *m = dnnl_mm_of(ta, tb, M, N, K);
	dnnl_exec_arg_t args[3];

	if (!m) {
		fprintf(stderr, "dtrain-bench-sgemm: oneDNN: cannot make a matmul of %d x %d x %d\n", M, N, K);
		exit(1);
	}
	args[0] = (dnnl_exec_arg_t){ DNNL_ARG_SRC, m->src };
	args[1] = (dnnl_exec_arg_t){ DNNL_ARG_WEIGHTS, m->wei };
	args[2] = (dnnl_exec_arg_t){ DNNL_ARG_DST, m->dst };
	if (dnnl_memory_set_data_handle(m->src, dn.bf16 ? (void *)dn.a16 : (void *)a) != dnnl_success ||
	    dnnl_memory_set_data_handle(m->wei, dn.bf16 ? (void *)dn.b16 : (void *)b) != dnnl_success ||
	    dnnl_memory_set_data_handle(m->dst, c) != dnnl_success ||
	    dnnl_primitive_execute(m->p, dn.stream, 3, args) != dnnl_success ||
	    dnnl_stream_wait(dn.stream) != dnnl_success) {
		fprintf(stderr, "dtrain-bench-sgemm: oneDNN: a matmul failed\n");
		exit(1);
	}
}

static size_t largest(size_t a, size_t b, size_t c)
{
	return a > b ? (a > c ? a : c) : (b > c ? b : c);
}

static double mm(bool ta, bool tb, int M, int N, int K, const float *a, int lda, const float *b,
		 int ldb, float *c, int ldc)
{
	if (dn.on) {
		dnnl_mm_run(ta, tb, M, N, K, a, b, c);
		return 2.0 * M * N * (double)K;
	}
	cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
		    K, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
	return 2.0 * M * N * (double)K;
}

/* One GPT step's products (runtime/model/gpt.c, transformer.c): x [N][4C], y
 * [N][max(4C, V)], w and dw [max(4C, V)][C] hold any operand; qkv [N][3C]
 * and o [N][C] are attention's strided views; s, dp [T][T]. */
static bool gpt_linear_only; /* --linear: no attention products */

static double gpt_round(const int *g, float *x, float *y, float *w, float *dw, float *qkv,
			float *o, float *s, float *dp)
{
	int B = g[0], T = g[1], C = g[2], L = g[3], V = g[4], NH = g[5], N = B * T, hs = C / NH;
	int io[4][2] = { { C, 3 * C }, { C, C }, { C, 4 * C }, { 4 * C, C } }, l, k, b, h;
	double f = 0;

	for (l = 0; l < L; l++) {
		for (k = 0; k < 4; k++) {
			int in = io[k][0], out = io[k][1];

			f += mm(false, true, N, out, in, x, in, w, in, y, out);   /* y = x W^T */
			f += mm(true, false, out, in, N, y, out, x, in, dw, in);  /* dW = dy^T x */
			f += mm(false, false, N, in, out, y, out, w, in, x, in);  /* dx = dy W */
		}
		for (b = 0; b < B && !gpt_linear_only; b++)
			for (h = 0; h < NH; h++) {
				const float *q = qkv + (size_t)b * T * 3 * C + (size_t)h * hs, *kk = q + C, *v = q + 2 * C;
				float *oo = o + (size_t)b * T * C + (size_t)h * hs;

				f += mm(false, true, T, T, hs, q, 3 * C, kk, 3 * C, s, T);  /* S */
				f += mm(false, false, T, hs, T, s, T, v, 3 * C, oo, C);     /* P V */
				f += mm(false, true, T, T, hs, q, 3 * C, kk, 3 * C, s, T);  /* S again */
				f += mm(true, false, T, hs, T, s, T, oo, C, (float *)v, 3 * C); /* dV */
				f += mm(false, true, T, T, hs, oo, C, v, 3 * C, dp, T);     /* dP */
				f += mm(false, false, T, hs, T, s, T, kk, 3 * C, (float *)q, 3 * C); /* dQ */
				f += mm(true, false, T, hs, T, s, T, q, 3 * C, (float *)kk, 3 * C); /* dK */
			}
	}
	f += mm(false, true, N, V, C, x, C, w, C, y, V);  /* logits */
	f += mm(true, false, V, C, N, y, V, x, C, dw, C); /* the head's dW */
	f += mm(false, false, N, C, V, y, V, w, C, x, C); /* its dx */
	return f;
}

static double square_round(int n, const float *a, const float *b, float *c)
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
	return 2.0 * n * n * (double)n;
}

/* --- main --- */

int main(int argc, char **argv)
{
	struct opts o;
	struct mlp m = { 0 };
	struct lockstep ls = { 0 };
	float *a = NULL, *b = NULL, *c = NULL;
	double flop = 0, t0, t = 0;
	int l, n, maxw = 0, rounds = 0, rc = 1;
	bool stop = false;
	char what[1200];

	memset(&o, 0, sizeof(o));
	if (parse(argc, argv, &o))
		return 2;
	if (o.lockstep && lockstep_open(&ls, o.lockstep, o.parts > 1 ? o.parts : o.copies))
		return 1;
	openblas_set_num_threads(o.threads);
	n = o.n_widths - 1;
	if (o.gpt[0]) {
		int *g = o.gpt;
		size_t N = (size_t)g[0] * (size_t)g[1], wide = (size_t)(4 * g[2] > g[4] ? 4 * g[2] : g[4]);

		a = filled(N * 4 * (size_t)g[2]);     /* x */
		b = filled(N * wide);                 /* y */
		c = filled(wide * (size_t)g[2] * 2);  /* w, dw */
		m.dy = filled(N * 3 * (size_t)g[2]);  /* qkv */
		m.dx = filled(N * (size_t)g[2] + 2 * (size_t)g[1] * (size_t)g[1]); /* o, s, dp */
		if (!a || !b || !c || !m.dy || !m.dx)
			goto oom;
		snprintf(what, sizeof(what), "gpt %d %d %d %d %d %d%s%s", g[0], g[1], g[2], g[3], g[4], g[5],
			 o.linear ? " linear " : "", o.linear ? (o.lib ? o.lib : "openblas") : "");
		gpt_linear_only = o.linear;
		if (o.lib && strcmp(o.lib, "openblas") &&
		    dnnl_open(!strcmp(o.lib, "onednn-bf16"), o.threads, largest(N * 4 * (size_t)g[2], N * wide,
										  wide * (size_t)g[2]))) {
			fprintf(stderr, "dtrain-bench-sgemm: oneDNN: cannot start its engine or allocate\n");
			goto out;
		}
	} else if (o.square) {
		size_t nn = (size_t)o.square * (size_t)o.square;

		a = filled(nn);
		b = filled(nn);
		c = filled(nn);
		if (!a || !b || !c)
			goto oom;
		snprintf(what, sizeof(what), "square %d", o.square);
	} else {
		int len = snprintf(what, sizeof(what), "mlp %d ", o.batch);

		m.w = calloc((size_t)n, sizeof(float *));
		m.dw = calloc((size_t)n, sizeof(float *));
		m.act = calloc((size_t)n + 1, sizeof(float *));
		if (!m.w || !m.dw || !m.act)
			goto oom;
		for (l = 0; l <= n; l++) {
			if (o.widths[l] > maxw)
				maxw = o.widths[l];
			if (!(m.act[l] = filled((size_t)o.batch * (size_t)o.widths[l])))
				goto oom;
			len += snprintf(what + len, sizeof(what) - (size_t)len, "%s%d", l ? "," : "",
					o.widths[l]);
		}
		for (l = 0; l < n; l++) {
			size_t nw = (size_t)o.widths[l] * (size_t)o.widths[l + 1];

			if (!(m.w[l] = filled(nw)) || !(m.dw[l] = filled(nw)))
				goto oom;
		}
		m.dy = filled((size_t)o.batch * (size_t)maxw);
		m.dx = filled((size_t)o.batch * (size_t)maxw);
		if (!m.dy || !m.dx)
			goto oom;
	}
	/* warm-up: OpenBLAS starts its threads and sizes its buffers (with
	 * lockstep, the copies also meet: all start measuring together) */
#define GPT_ROUND()                                                                      \
	gpt_round(o.gpt, a, b, c, c + (size_t)(4 * o.gpt[2] > o.gpt[4] ? 4 * o.gpt[2] : o.gpt[4]) * \
		  (size_t)o.gpt[2], m.dy, m.dx, m.dx + (size_t)o.gpt[0] * o.gpt[1] * o.gpt[2],      \
		  m.dx + (size_t)o.gpt[0] * o.gpt[1] * o.gpt[2] + (size_t)o.gpt[1] * o.gpt[1])
	if (o.gpt[0])
		GPT_ROUND();
	else if (o.square)
		square_round(o.square, a, b, c);
	else
		mlp_round(&o, &m, &ls, &stop);
	ls.wait_s = 0;
	t0 = now_s();
	do {
		if (o.gpt[0]) {
			flop += GPT_ROUND();
		} else if (o.square) {
			flop += square_round(o.square, a, b, c);
		} else {
			stop = now_s() - t0 >= o.seconds;
			flop += mlp_round(&o, &m, &ls, &stop);
		}
		rounds++;
		t = now_s() - t0;
	} while (o.square || o.gpt[0] ? t < o.seconds : !stop);
	printf("{\"what\":\"%s\",\"threads\":%d,\"part\":\"%d/%d\",\"copies\":%d,\"lockstep\":%s,"
	       "\"rounds\":%d,\"flop\":%.0f,\"seconds\":%.6f,\"wait_s\":%.6f,\"gflops\":%.3f}\n",
	       what, o.threads, o.part, o.parts, o.copies, ls.b ? "true" : "false", rounds, flop, t,
	       ls.wait_s, flop / t * 1e-9);
	rc = 0;
	goto out;
oom:
	fprintf(stderr, "dtrain-bench-sgemm: out of memory\n");
out:
	dnnl_close();
	for (l = 0; m.w && l < n; l++) {
		free(m.w[l]);
		free(m.dw[l]);
	}
	for (l = 0; m.act && l <= n; l++)
		free(m.act[l]);
	free(m.w);
	free(m.dw);
	free(m.act);
	free(m.dy);
	free(m.dx);
	free(a);
	free(b);
	free(c);
	if (ls.b)
		munmap(ls.b, sizeof(*ls.b));
	return rc;
}
