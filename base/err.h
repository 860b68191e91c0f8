/*
 * err.h - error reports and the exit codes of every dtrain program.
 *
 * Library functions return 0 or a negative errno-style code and add one line
 * per problem to a caller-supplied struct dt_err, so that a caller can show
 * every problem of a spec at once. Only main() prints and exits.
 *
 * The exit codes shared by all dtrain programs are defined here, so that the
 * batch script, the tests and the docs use one set of numbers.
 */
#ifndef DTRAIN_BASE_ERR_H
#define DTRAIN_BASE_ERR_H

#include <stdarg.h>
#include <stddef.h>

/* --- exit codes (documented in README.md "Exit codes") --- */
enum {
	DT_EXIT_OK = 0,
	DT_EXIT_FAIL = 1,     /* runtime failure: Slurm refused, I/O error, ... */
	DT_EXIT_USAGE = 2,    /* bad command line */
	DT_EXIT_SPEC = 3,     /* the job spec or site file is invalid */
	DT_EXIT_DIVERGED = 4, /* training diverged: NaN or infinite loss */
	DT_EXIT_HUNG = 5,     /* the watchdog ended a rank that waited too long for others */
	DT_EXIT_REPLICAS = 6, /* the replicas of a stage disagree: silent corruption */
	DT_EXIT_REQUEUE = 75, /* dtrain-run saved its state: requeue me (EX_TEMPFAIL) */
};

/* --- error reports --- */

/* Collected error lines, each "file: json.path: what is wrong (got X)".
 * Fixed size: a report that overflows ends with "...". Zero-initialise. */
struct dt_err {
	char msg[8192]; /* lines joined by '\n', no trailing newline */
	size_t len;
	int count;      /* lines added, also those cut off */
};

/* Add one line. Returns -EINVAL so that callers can `return dt_err_add(...)`. */
int dt_err_add(struct dt_err *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int dt_err_addv(struct dt_err *e, const char *fmt, va_list ap);
void dt_err_clear(struct dt_err *e);

#endif
