/*
 * ckpt_main.c - dtrain-ckpt: the checkpoint library's file commands (list,
 * verify, inspect, export to HDF5: ckpt_cmds.h), the two that run the
 * checkpoint's model (eval, sample: ckpt_model.h) and the two that know
 * other programs' weights files (import, export --format safetensors:
 * import.h), as one program.
 */
#include <string.h>

#include "base/cli.h"
#include "runtime/cmd/ckpt_cmds.h"
#include "runtime/cmd/ckpt_model.h"
#include "runtime/cmd/import.h"

#ifndef DTRAIN_VERSION
#define DTRAIN_VERSION "unknown"
#endif

int main(int argc, char **argv)
{
	struct dt_cmd cmds[8];
	size_t i, n = 0;

	for (i = 0; i < rt_ckpt_n_cmds && n < sizeof(cmds) / sizeof(cmds[0]) - 3; i++)
		cmds[n++] = strcmp(rt_ckpt_cmds[i].name, "export") ? rt_ckpt_cmds[i]
								: (struct dt_cmd){ "export", rt_cmd_export };
	cmds[n++] = (struct dt_cmd){ "import", rt_cmd_import };
	cmds[n++] = (struct dt_cmd){ "eval", rt_cmd_eval };
	cmds[n++] = (struct dt_cmd){ "sample", rt_cmd_sample };
	return dt_cli_run("dtrain-ckpt", DTRAIN_VERSION, rt_ckpt_usage, cmds, n, argc, argv);
}
