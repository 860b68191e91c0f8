/*
 * main.c - dtrain-submit: parse the command line, run the command, turn its
 * result into an exit code (base/err.h). Every problem is printed as
 * "dtrain-submit: <line>" on stderr.
 */
#include "launcher/cli.h"

#include "base/cli.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#ifndef LAUNCH_VERSION_STR
#define LAUNCH_VERSION_STR "unknown"
#endif

static void print_err(const struct dt_err *err)
{
	dt_err_print("dtrain-submit", "", err);
}

int main(int argc, char **argv)
{
	struct launch_args args;
	struct dt_err err = {0};
	int rc = 0, code = DT_EXIT_OK;

	if (launch_parse_args(argc, argv, &args, &err)) {
		print_err(&err);
		return DT_EXIT_USAGE;
	}
	switch (args.cmd) {
	case LAUNCH_HELP:
		fputs(launch_help(args.help_for), stdout);
		break;
	case LAUNCH_VERSION:
		printf("dtrain-submit %s\n", LAUNCH_VERSION_STR);
		break;
	case LAUNCH_SUBMIT:
	case LAUNCH_VALIDATE:
	case LAUNCH_RESUME:
	case LAUNCH_SWEEP:
		/* submit --array=0-M: a sweep over seeds */
		rc = args.cmd == LAUNCH_VALIDATE ? launch_cmd_validate(&args, &err) :
		     args.cmd == LAUNCH_SWEEP || args.seeds ? launch_cmd_sweep(&args, &err) :
							      launch_cmd_submit(&args, &err);
		/* -EINVAL is reserved for an invalid spec or site file. */
		if (rc)
			code = rc == -EINVAL ? DT_EXIT_SPEC : DT_EXIT_FAIL;
		break;
	case LAUNCH_STATUS:
		rc = launch_cmd_status(&args, &err);
		break;
	case LAUNCH_CANCEL:
		rc = launch_cmd_cancel(&args, &err);
		break;
	case LAUNCH_LOGS:
		rc = launch_cmd_logs(&args, &err);
		break;
	case LAUNCH_REPORT:
		rc = launch_cmd_report(&args, &err);
		break;
	}
	if (rc && code == DT_EXIT_OK)
		code = DT_EXIT_FAIL;
	if (rc && err.count == 0)
		dt_err_add(&err, "%s: %s", launch_cmd_name(args.cmd), strerror(-rc));
	if (rc)
		print_err(&err);
	launch_args_free(&args);
	if (fflush(stdout) != 0 && code == DT_EXIT_OK) {
		fprintf(stderr, "dtrain-submit: cannot write to stdout: %s\n", strerror(errno));
		code = DT_EXIT_FAIL;
	}
	return code;
}
