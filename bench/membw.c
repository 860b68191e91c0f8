/*
 * membw.c - dtrain-bench-membw: the memory peer of `make bench`.
 *
 * The optimizer update of a large model does a few flops per parameter
 * against 24 bytes moved: it reads the gradient, the momentum and the
 * weight, and writes all three back (runtime/model/optim.c, rt_optim_step_take:
 * the gradient is left zero). So its floor is the memory's speed, not the
 * core's. This program measures that speed for the same access pattern:
 *   update N   three arrays of N floats, each read and written in place
 *              once per pass (24 bytes per element, like the update),
 *              split in contiguous parts over --threads threads;
 * after one warm-up pass it repeats passes for --seconds and prints one
 * JSON object: {"what":..., "threads":..., "passes":..., "bytes":...,
 * "seconds":..., "mean_pass_s":..., "pass_s":..., "gbps":...}, where pass_s
 * and gbps are the best pass's, as STREAM reports them: on a shared,
 * noisy machine the best pass is the one closest to what the memory can
 * do. Several copies started at once
 * measure how the memory bus is shared between processes (bench/run.py
 * does that, like STREAM's triad run per core, McCalpin 1995).
 *
 * Sections: arguments, the pass, main.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_THREADS 256

static const char usage[] =
	"usage: dtrain-bench-membw [--threads N] [--seconds S] update FLOATS\n"
	"\n"
	"Measures memory bandwidth with the optimizer update's access pattern:\n"
	"three arrays of FLOATS floats, each read and written in place once per\n"
	"pass (24 bytes per element), and prints one JSON object with GB/s.\n"
	"\n"
	"  --threads N   threads sharing each pass (default 1)\n"
	"  --seconds S   how long to measure after a warm-up pass (default 2)\n"
	"  -h, --help    this text\n";

/* --- arguments --- */

struct opts {
	int threads;
	double seconds;
	long long n; /* floats per array */
};

static int parse_count(const char *s, const char *what, long long max, long long *v)
{
	char *end;
	long long x;

	errno = 0;
	x = strtoll(s, &end, 10);
	if (errno || end == s || *end || x < 1 || x > max) {
		fprintf(stderr, "dtrain-bench-membw: %s: want an integer in [1, %lld] (got \"%s\")\n",
			what, max, s);
		return -EINVAL;
	}
	*v = x;
	return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
	long long v;
	int i = 1;

	o->threads = 1;
	o->seconds = 2.0;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			fputs(usage, stdout);
			exit(0);
		} else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
			if (parse_count(argv[++i], "--threads", MAX_THREADS, &v))
				return -EINVAL;
			o->threads = (int)v;
		} else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
			char *end;

			o->seconds = strtod(argv[++i], &end);
			if (*end || !(o->seconds > 0 && o->seconds <= 3600)) {
				fprintf(stderr, "dtrain-bench-membw: --seconds: want a number in (0, 3600] (got \"%s\")\n", argv[i]);
				return -EINVAL;
			}
		} else {
			fprintf(stderr, "dtrain-bench-membw: unknown option or missing value: %s\n%s", argv[i], usage);
			return -EINVAL;
		}
	}
	if (i + 2 == argc && !strcmp(argv[i], "update"))
		return parse_count(argv[i + 1], "FLOATS", 1ll << 32, &o->n);
	fprintf(stderr, "dtrain-bench-membw: want `update FLOATS`\n%s", usage);
	return -EINVAL;
}

/* --- the pass --- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One thread's part of the arrays, and the pass's shared clock. */
struct part {
	float *a, *b, *c;
	size_t n;
	pthread_barrier_t *start, *end;
	const volatile int *stop; /* set by thread 0 between passes */
};

/* A pass over a part: every element of a, b and c read and written back,
 * the values bounded and away from subnormals (a momentum-like
 * recurrence, as the update's; a halving one would slow to a crawl once
 * its values went subnormal). */
static void pass(float *restrict a, float *restrict b, float *restrict c, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		float g = a[i], v = 0.9f * b[i] + g;

		a[i] = 1.0f - 0.5f * g;
		b[i] = v;
		c[i] -= 1e-6f * v;
	}
}

static void *worker(void *arg)
{
	struct part *p = arg;

	for (;;) {
		pthread_barrier_wait(p->start);
		if (*p->stop)
			return NULL;
		pass(p->a, p->b, p->c, p->n);
		pthread_barrier_wait(p->end);
	}
}

/* --- main --- */

int main(int argc, char **argv)
{
	pthread_barrier_t start, end;
	pthread_t tid[MAX_THREADS];
	struct part parts[MAX_THREADS];
	volatile int stop = 0;
	struct opts o;
	float *a = NULL, *b = NULL, *c = NULL;
	double t0, t = 0, tp, best = 0;
	size_t n, i, per;
	long passes = 0;
	int k, started = 0, rc = 1;

	if (parse(argc, argv, &o))
		return 2;
	n = (size_t)o.n;
	a = malloc(n * sizeof(float));
	b = malloc(n * sizeof(float));
	c = malloc(n * sizeof(float));
	if (!a || !b || !c) {
		fprintf(stderr, "dtrain-bench-membw: out of memory for 3 x %zu floats\n", n);
		goto out;
	}
	for (i = 0; i < n; i++) { /* touch every page before timing */
		a[i] = (float)(i % 97) * 1e-3f;
		b[i] = 0.0f;
		c[i] = 1.0f;
	}
	pthread_barrier_init(&start, NULL, (unsigned)o.threads);
	pthread_barrier_init(&end, NULL, (unsigned)o.threads);
	per = (n + (size_t)o.threads - 1) / (size_t)o.threads;
	for (k = 0; k < o.threads; k++) {
		size_t lo = (size_t)k * per < n ? (size_t)k * per : n;
		size_t hi = lo + per < n ? lo + per : n;

		parts[k] = (struct part){ a + lo, b + lo, c + lo, hi - lo, &start, &end, &stop };
	}
	for (k = 1; k < o.threads; k++) {
		if (pthread_create(&tid[k], NULL, worker, &parts[k])) {
			/* the barriers count every thread: no way on without it */
			fprintf(stderr, "dtrain-bench-membw: cannot start thread %d of %d\n", k,
				o.threads);
			exit(1);
		}
		started = k;
	}
	/* thread 0 is this one: a warm-up pass, then timed passes */
	for (t0 = tp = now_s();; passes++) {
		double t1;

		pthread_barrier_wait(&start);
		pass(parts[0].a, parts[0].b, parts[0].c, parts[0].n);
		pthread_barrier_wait(&end);
		t1 = now_s();
		if (passes == 0)
			t0 = t1;
		else if (best == 0 || t1 - tp < best)
			best = t1 - tp;
		tp = t1;
		t = t1 - t0;
		if (passes > 0 && t >= o.seconds)
			break;
	}
	printf("{\"what\":\"update %zu\",\"threads\":%d,\"passes\":%ld,\"bytes\":%.6g,\"seconds\":%.6f,"
	       "\"mean_pass_s\":%.6g,\"pass_s\":%.6g,\"gbps\":%.3f}\n", n, o.threads, passes,
	       24.0 * (double)n * (double)passes, t, t / (double)passes, best,
	       24.0 * (double)n / best * 1e-9);
	rc = 0;
	stop = 1;
	if (started > 0) {
		pthread_barrier_wait(&start); /* the workers see stop and leave */
		for (k = 1; k <= started; k++)
			pthread_join(tid[k], NULL);
	}
	pthread_barrier_destroy(&start);
	pthread_barrier_destroy(&end);
out:
	free(a);
	free(b);
	free(c);
	return rc;
}
