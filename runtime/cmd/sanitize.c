/*
 * sanitize.c - the sanitizer runtime's defaults for the programs that start
 * MPI (dtrain-run, the tests' pmix_share_main): compiled into each of them,
 * not into a library (the sanitizer looks the functions up in the program),
 * and empty unless built with -DDTRAIN_SANITIZE=ON.
 */

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DTRAIN_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(DTRAIN_ASAN)
/*
 * Open MPI, PMIx and hwloc keep some allocations of MPI_Init and PMIx_Init
 * (and of their progress threads) until exit. Part of them come from MCA
 * plugins that MPI_Finalize dlcloses, whose frames cannot be named at exit,
 * so LeakSanitizer gets the whole stack (slow unwinding) and skips a leak
 * only when one of its frames is in these libraries. Ours are still
 * reported; no callback of ours runs inside them yet. ASAN_OPTIONS and
 * LSAN_OPTIONS still override these defaults.
 */
const char *__asan_default_options(void);
const char *__lsan_default_options(void);
const char *__lsan_default_suppressions(void);

const char *__asan_default_options(void)
{
#ifdef DTRAIN_HAVE_CUDA
	/* the CUDA driver maps memory where ASan's shadow gap is */
	return "fast_unwind_on_malloc=0:protect_shadow_gap=0";
#else
	return "fast_unwind_on_malloc=0";
#endif
}

const char *__lsan_default_options(void)
{
	return "print_suppressions=0";
}

const char *__lsan_default_suppressions(void)
{
	return "leak:libmpi.so\n"
	       "leak:libopen-rte.so\n"
	       "leak:libopen-pal.so\n"
	       "leak:libpmix.so\n"
	       "leak:libhwloc.so\n"
	       "leak:libevent\n";
}
#endif
