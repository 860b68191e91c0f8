/*
 * ckpt_cmds.h - dtrain-ckpt's commands on checkpoint files (list, verify,
 * inspect, export), for the program that offers them (ckpt_main.c, which
 * adds the commands that run a model: eval, sample, and the other
 * programs' weights: import, export --format safetensors). They need the
 * checkpoint library alone, which knows no model, so they stop at files.
 */
#ifndef DTRAIN_RUNTIME_CMD_CKPT_CMDS_H
#define DTRAIN_RUNTIME_CMD_CKPT_CMDS_H

#include <stddef.h>

#include "base/cli.h"

/* dtrain-ckpt's usage text: every command, its own and the model's */
extern const char rt_ckpt_usage[];
/* list, verify, inspect, export; each returns the program's exit code */
extern const struct dt_cmd rt_ckpt_cmds[];
extern const size_t rt_ckpt_n_cmds;

#endif
