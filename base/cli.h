/*
 * cli.h - what the main() of every dtrain program shares: the one printer of
 * error reports, usage errors, and the dispatch of programs made of
 * subcommands (dtrain-ckpt, dtrain-data). Every line it writes starts with
 * the program's name ("dtrain-ckpt: ..."), as the programs' own lines do.
 */
#ifndef DTRAIN_BASE_CLI_H
#define DTRAIN_BASE_CLI_H

#include <getopt.h>
#include <stddef.h>

#include "base/err.h"

/* One subcommand: run gets argv from the command's name on (argv[0]) and
 * returns the program's exit code. */
struct dt_cmd {
	const char *name;
	int (*run)(int argc, char **argv);
};

/* Every line of err on stderr as "<prog>: <prefix><line>"; prefix may be
 * "" ("rank 3: "). Nothing when err is empty. */
void dt_err_print(const char *prog, const char *prefix, const struct dt_err *err);

/* "<prog>: <message>" and the first line of usage (the synopsis) on stderr;
 * returns DT_EXIT_USAGE. */
int dt_usage_error(const char *prog, const char *usage, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The usage error of an option that getopt_long did not know: arg is the
 * word the user typed (argv[optind - 1]: "--temprature=0.5"). The hint
 * names the long option of opts (ended by a NULL name) closest to it,
 * within 2 edits, as "--temperature": `unknown option "--temprature"; did
 * you mean "--temperature"?`. Returns DT_EXIT_USAGE. */
int dt_unknown_option(const char *prog, const char *usage, const char *arg,
		      const struct option *opts);

/* main() of a program of subcommands: argv[1] names the command (-h/--help
 * prints usage, -V/--version "<prog> <version>"); an unknown or missing one
 * is a usage error, with the closest name as a hint. Returns the command's
 * exit code, or DT_EXIT_FAIL when its output could not be written. */
int dt_cli_run(const char *prog, const char *version, const char *usage,
	       const struct dt_cmd *cmds, size_t n, int argc, char **argv);

#endif
