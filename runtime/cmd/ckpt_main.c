/*
 * ckpt_main.c - dtrain-ckpt: the checkpoint library's file commands (list,
 * verify, inspect, export: checkpoint/cmds.h) and the two that run the
 * checkpoint's model (eval, sample: ckpt_model.h), as one program.
 */
#include "base/cli.h"
#include "checkpoint/cmds.h"
#include "runtime/cmd/ckpt_model.h"

#ifndef DTRAIN_VERSION
#define DTRAIN_VERSION "unknown"
#endif

int main(int argc, char **argv)
{
	struct dt_cmd cmds[8];
	size_t i, n = 0;

	for (i = 0; i < ckpt_n_cmds && n < sizeof(cmds) / sizeof(cmds[0]) - 2; i++)
		cmds[n++] = ckpt_cmds[i];
	cmds[n++] = (struct dt_cmd){ "eval", rt_cmd_eval };
	cmds[n++] = (struct dt_cmd){ "sample", rt_cmd_sample };
	return dt_cli_run("dtrain-ckpt", DTRAIN_VERSION, ckpt_usage, cmds, n, argc, argv);
}
