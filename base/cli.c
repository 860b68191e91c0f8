/*
 * cli.c - the error printer, usage errors and subcommand dispatch that every
 * program's main() shares (cli.h).
 */
#include "base/cli.h"
#include "base/str.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void dt_err_print(const char *prog, const char *prefix, const struct dt_err *err)
{
	const char *s = err->msg;
	size_t n;

	while (*s) {
		n = strcspn(s, "\n");
		fprintf(stderr, "%s: %s%.*s\n", prog, prefix, (int)n, s);
		s += n + (s[n] == '\n');
	}
}

int dt_usage_error(const char *prog, const char *usage, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fwrite(usage, 1, strcspn(usage, "\n") + 1, stderr);
	return DT_EXIT_USAGE;
}

int dt_unknown_option(const char *prog, const char *usage, const char *arg,
		      const struct option *opts)
{
	char name[64], best[64] = "", long_name[64];
	int d, min = 3; /* a hint only within 2 edits */

	snprintf(name, sizeof(name), "%.*s", (int)strcspn(arg, "="), arg);
	for (; opts && opts->name; opts++) {
		snprintf(long_name, sizeof(long_name), "--%s", opts->name);
		d = dt_edit_distance(name, long_name);
		if (d < min)
			min = d, snprintf(best, sizeof(best), "%s", long_name);
	}
	if (best[0])
		return dt_usage_error(prog, usage, "unknown option \"%s\"; did you mean \"%s\"?", name,
				      best);
	return dt_usage_error(prog, usage, "unknown option \"%s\"", name);
}

int dt_cli_run(const char *prog, const char *version, const char *usage,
	       const struct dt_cmd *cmds, size_t n, int argc, char **argv)
{
	const char *hint = NULL;
	int code, d, best = 3; /* a hint only within 2 edits */
	size_t i;

	if (argc < 2)
		return dt_usage_error(prog, usage, "missing COMMAND");
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fputs(usage, stdout);
		return DT_EXIT_OK;
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
		printf("%s %s\n", prog, version);
		return DT_EXIT_OK;
	}
	for (i = 0; i < n && strcmp(argv[1], cmds[i].name); i++) {
		d = dt_edit_distance(argv[1], cmds[i].name);
		if (d < best)
			best = d, hint = cmds[i].name;
	}
	if (i == n) {
		if (hint)
			return dt_usage_error(prog, usage, "unknown command \"%s\"; did you mean \"%s\"?",
					      argv[1], hint);
		return dt_usage_error(prog, usage, "unknown command \"%s\"", argv[1]);
	}
	code = cmds[i].run(argc - 1, argv + 1);
	if (fflush(stdout) != 0 && code == DT_EXIT_OK) {
		fprintf(stderr, "%s: cannot write to stdout: %s\n", prog, strerror(errno));
		code = DT_EXIT_FAIL;
	}
	return code;
}
