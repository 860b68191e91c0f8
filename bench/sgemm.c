/*
 * sgemm.c - dtrain-bench-sgemm: the compute peer of `make bench`.
 *
 * Measures what the BLAS dtrain links (OpenBLAS) reaches on this machine:
 *   square N          C[N][N] += A[N][N] B[N][N], the usual peak figure;
 *   mlp BATCH W,...   the matrix products of one training step of an MLP
 *                     with layer widths W0 (inputs) .. Wn (outputs) at that
 *                     batch, with the same shapes and transposes as
 *                     runtime/kernels.c: forward y = x W^T per layer;
 *                     backward dW += dy^T x per layer and dx = dy W for every
 *                     layer but the first.
 * Each runs repeatedly for --seconds after one warm-up round; it prints one
 * JSON object: {"what":..., "threads":..., "flop":..., "seconds":...,
 * "gflops":...}. Several copies started at once measure how the machine's
 * sgemm rate scales over processes (bench/run.sh does that).
 *
 * Sections: arguments, the products, main.
 */
#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_WIDTHS 64

static const char usage[] =
	"usage: dtrain-bench-sgemm [--threads N] [--seconds S] square N\n"
	"       dtrain-bench-sgemm [--threads N] [--seconds S] mlp BATCH W0,W1,...,Wn\n"
	"\n"
	"Measures OpenBLAS sgemm on square matrices, or on the matrix products of\n"
	"one MLP training step (forward, weight gradients, input gradients), and\n"
	"prints one JSON object with the rate in GFLOP/s.\n"
	"\n"
	"  --threads N   OpenBLAS threads (default 1)\n"
	"  --seconds S   how long to measure after a warm-up (default 2)\n"
	"  -h, --help    this text\n";

/* --- arguments --- */

struct opts {
	int threads;
	double seconds;
	int square;        /* N of `square`, or 0 */
	int batch;         /* `mlp`: rows of the batch */
	int widths[MAX_WIDTHS];
	int n_widths;
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

static int parse(int argc, char **argv, struct opts *o)
{
	int i = 1;

	o->threads = 1;
	o->seconds = 2.0;
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
		} else {
			fprintf(stderr, "dtrain-bench-sgemm: unknown option or missing value: %s\n%s", argv[i], usage);
			return -EINVAL;
		}
	}
	if (i + 2 == argc && !strcmp(argv[i], "square"))
		return parse_int(argv[i + 1], "square", &o->square);
	if (i + 3 == argc && !strcmp(argv[i], "mlp")) {
		if (parse_int(argv[i + 1], "BATCH", &o->batch))
			return -EINVAL;
		return parse_widths(argv[i + 2], o);
	}
	fprintf(stderr, "dtrain-bench-sgemm: want `square N` or `mlp BATCH W0,...,Wn`\n%s", usage);
	return -EINVAL;
}

/* --- the products --- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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

/* One step's products; returns their flop count. */
static double mlp_round(const struct opts *o, struct mlp *m)
{
	int l, b = o->batch, n = o->n_widths - 1;
	double flop = 0;

	for (l = 0; l < n; l++) {
		int in = o->widths[l], out = o->widths[l + 1];

		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, out, in, 1.0f, m->act[l], in,
			    m->w[l], in, 1.0f, m->act[l + 1], out);
		flop += 2.0 * b * out * in;
	}
	for (l = n - 1; l >= 0; l--) {
		int in = o->widths[l], out = o->widths[l + 1];

		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, b, 1.0f, m->dy, out,
			    m->act[l], in, 1.0f, m->dw[l], in);
		flop += 2.0 * b * out * in;
		if (l > 0) {
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, in, out, 1.0f, m->dy,
				    out, m->w[l], in, 0.0f, m->dx, in);
			flop += 2.0 * b * out * in;
		}
	}
	return flop;
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
	float *a = NULL, *b = NULL, *c = NULL;
	double flop = 0, t0, t = 0;
	int l, n, maxw = 0, rounds = 0, rc = 1;
	char what[1200];

	memset(&o, 0, sizeof(o));
	if (parse(argc, argv, &o))
		return 2;
	openblas_set_num_threads(o.threads);
	n = o.n_widths - 1;
	if (o.square) {
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
	/* warm-up: OpenBLAS starts its threads and sizes its buffers */
	if (o.square)
		square_round(o.square, a, b, c);
	else
		mlp_round(&o, &m);
	t0 = now_s();
	do {
		flop += o.square ? square_round(o.square, a, b, c) : mlp_round(&o, &m);
		rounds++;
		t = now_s() - t0;
	} while (t < o.seconds);
	printf("{\"what\":\"%s\",\"threads\":%d,\"rounds\":%d,\"flop\":%.6g,\"seconds\":%.6f,\"gflops\":%.3f}\n",
	       what, o.threads, rounds, flop, t, flop / t * 1e-9);
	rc = 0;
	goto out;
oom:
	fprintf(stderr, "dtrain-bench-sgemm: out of memory\n");
out:
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
	return rc;
}
