/*
 * model_cmds.h - the commands of dtrain-ckpt that run a checkpoint's model
 * (eval, sample). The checkpoint library knows no model; the runtime, which
 * does, defines these (runtime/ckpt_model.c) and dtrain-ckpt links it, so
 * that checkpoint/main.c offers them beside its own commands without
 * including the runtime.
 */
#ifndef DTRAIN_CHECKPOINT_MODEL_CMDS_H
#define DTRAIN_CHECKPOINT_MODEL_CMDS_H

#include "base/cli.h"

extern const struct dt_cmd ckpt_model_cmds[];
extern const int ckpt_model_n_cmds;

#endif
