/*
 * test_gpu_device.c - the GPU path's device selection (runtime/gpu/gpu.h)
 * and the cuBLAS it computes with, on a real GPU.
 *
 * Without a visible GPU it prints why and exits 77, which ctest counts as
 * skipped (SKIP_RETURN_CODE), never as passed. With one: local rank r gets
 * device r % count and makes it current; a rank that sees no device (run in
 * a child with CUDA_VISIBLE_DEVICES="", before this process touches CUDA)
 * gets the message that names its host; a small cublasSgemm matches the
 * CPU's product.
 *
 * Sections: sanitizer defaults, no device, selection, sgemm, main.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "runtime/gpu/gpu.h"

#define SKIP 77

/* --- sanitizer defaults --- */

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DTRAIN_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(DTRAIN_ASAN)
const char *__asan_default_options(void);

/* the CUDA driver maps memory where ASan's shadow gap is */
const char *__asan_default_options(void)
{
	return "protect_shadow_gap=0";
}
#endif

static struct rt_proc proc_at(int local_rank)
{
	struct rt_proc p = { .rank = local_rank, .size = local_rank + 1,
			     .local_rank = local_rank, .local_size = local_rank + 1 };

	snprintf(p.node, sizeof(p.node), "testnode");
	snprintf(p.hostname, sizeof(p.hostname), "testhost");
	return p;
}

/* --- no device --- */

/* In a child, before CUDA is initialised here: with CUDA_VISIBLE_DEVICES
 * empty, rt_gpu_select fails with the message a user sees. 0: as expected. */
static int child_sees_no_device(void)
{
	struct rt_gpu_device dev;
	struct dt_err err = { 0 };
	struct rt_proc p = proc_at(3);
	int st = 0;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		setenv("CUDA_VISIBLE_DEVICES", "", 1);
		if (rt_gpu_select(&p, &dev, &err) != -ENODEV ||
		    !strstr(err.msg, "rank 3 on host testnode: train.device is \"cuda\" but no GPU is visible (cudaGetDeviceCount: ")) {
			fprintf(stderr, "with CUDA_VISIBLE_DEVICES=\"\": got \"%s\"\n", err.msg);
			_exit(1);
		}
		_exit(0);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* --- selection --- */

static void test_local_rank_modulo_count(void **state)
{
	struct rt_gpu_device dev;
	struct dt_err err = { 0 };
	int n = 0, cur = -1;

	(void)state;
	assert_int_equal(cudaGetDeviceCount(&n), cudaSuccess);
	for (int r = 0; r < 2 * n + 1; r++) {
		struct rt_proc p = proc_at(r);

		assert_int_equal(rt_gpu_select(&p, &dev, &err), 0);
		assert_int_equal(err.count, 0);
		assert_int_equal(dev.count, n);
		assert_int_equal(dev.index, r % n);
		assert_int_equal(cudaGetDevice(&cur), cudaSuccess);
		assert_int_equal(cur, r % n);
		assert_true(dev.name[0] != '\0');
		assert_true(dev.mem_bytes > 0);
		assert_true(dev.cc_major >= 1);
	}
	printf("device 0 of %d: %s, compute capability %d.%d\n", n, dev.name, dev.cc_major,
	       dev.cc_minor);
}

static void test_build_info(void **state)
{
	(void)state;
	assert_non_null(strstr(rt_gpu_build_info(), "CUDA "));
	assert_non_null(strstr(rt_gpu_build_info(), ", NCCL "));
}

/* --- sgemm --- */

/* C = A B in row-major order, A [m][k], B [k][n], with cuBLAS (column-major:
 * it computes C^T = B^T A^T, whose column-major layout is C's row-major one)
 * and on the CPU in double precision. */
static void test_sgemm_matches_cpu(void **state)
{
	enum { M = 37, K = 53, N = 29 };
	float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
	float *c = malloc(sizeof(float) * M * N);
	float *da = NULL, *db = NULL, *dc = NULL, one = 1.0f, zero = 0.0f;
	struct rt_gpu_device dev;
	struct dt_err err = { 0 };
	struct rt_proc p = proc_at(0);
	cublasHandle_t h = NULL;
	double want, scale, worst = 0;
	unsigned s = 12345;

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(c);
	for (int i = 0; i < M * K; i++)
		a[i] = (float)(((s = s * 1103515245u + 12345u) >> 16) & 0xffff) / 32768.0f - 1.0f;
	for (int i = 0; i < K * N; i++)
		b[i] = (float)(((s = s * 1103515245u + 12345u) >> 16) & 0xffff) / 32768.0f - 1.0f;

	assert_int_equal(rt_gpu_select(&p, &dev, &err), 0);
	assert_int_equal(cudaMalloc((void **)&da, sizeof(float) * M * K), cudaSuccess);
	assert_int_equal(cudaMalloc((void **)&db, sizeof(float) * K * N), cudaSuccess);
	assert_int_equal(cudaMalloc((void **)&dc, sizeof(float) * M * N), cudaSuccess);
	assert_int_equal(cudaMemcpy(da, a, sizeof(float) * M * K, cudaMemcpyHostToDevice), cudaSuccess);
	assert_int_equal(cudaMemcpy(db, b, sizeof(float) * K * N, cudaMemcpyHostToDevice), cudaSuccess);
	assert_int_equal(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
	/* full float32, no TF32: the CPU reference is exact to rounding */
	assert_int_equal(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), CUBLAS_STATUS_SUCCESS);
	assert_int_equal(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, db, N, da, K,
				     &zero, dc, N), CUBLAS_STATUS_SUCCESS);
	assert_int_equal(cudaMemcpy(c, dc, sizeof(float) * M * N, cudaMemcpyDeviceToHost), cudaSuccess);

	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			want = scale = 0;
			for (int l = 0; l < K; l++) {
				want += (double)a[i * K + l] * b[l * N + j];
				scale += (double)(a[i * K + l] < 0 ? -a[i * K + l] : a[i * K + l]) *
					 (b[l * N + j] < 0 ? -b[l * N + j] : b[l * N + j]);
			}
			/* float32 sums of K terms: error within K * eps * sum |terms| */
			double e = (c[i * N + j] - want) / (scale > 0 ? scale : 1);
			worst = e < 0 ? (-e > worst ? -e : worst) : (e > worst ? e : worst);
		}
	printf("sgemm %dx%dx%d: worst error %.3g of sum |a b|\n", M, K, N, worst);
	assert_true(worst < K * 1.2e-7);

	cublasDestroy(h);
	cudaFree(dc);
	cudaFree(db);
	cudaFree(da);
	free(c);
	free(b);
	free(a);
}

/* --- main --- */

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_local_rank_modulo_count),
		cmocka_unit_test(test_build_info),
		cmocka_unit_test(test_sgemm_matches_cpu),
	};
	cudaError_t ce;
	int n = 0, rc;

	/* first, while CUDA is untouched here: a child that sees no GPU */
	rc = child_sees_no_device();

	ce = cudaGetDeviceCount(&n);
	if (ce != cudaSuccess || n < 1) {
		printf("test_gpu_device: SKIPPED: no GPU is visible (cudaGetDeviceCount: %s)\n",
		       ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices");
		return SKIP;
	}
	if (rc) {
		fprintf(stderr, "test_gpu_device: a rank that sees no GPU did not get the expected error\n");
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
