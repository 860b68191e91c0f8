/*
 * ckpt_model.h - a checkpoint's model in one process: the whole model as
 * one stage, its parameters read by tensor name from a checkpoint of any
 * layout, for the dtrain-ckpt commands that run it (eval here, sample in
 * sample.c; the program is ckpt_main.c).
 */
#ifndef DTRAIN_RUNTIME_CKPT_MODEL_H
#define DTRAIN_RUNTIME_CKPT_MODEL_H

#include <stdint.h>

#include "base/err.h"
#include "jobs/spec.h"
#include "runtime/model/model.h"

struct rt_ckpt_model {
	struct spec s;          /* model.* from the checkpoint's model config; the rest zero */
	struct rt_stage st;     /* the whole model, on the device of the load */
	int64_t step;           /* the checkpoint's step */
	char path[4096];        /* the checkpoint read */
};

/* Verifies the checkpoint ckpt (a step-<n> directory, or a run or
 * checkpoint directory standing for its newest one), builds its model on
 * device dev (borrowed; model/device.h) and reads its parameters. 0 or a
 * negative errno with a message naming the file; rt_ckpt_model_free() in
 * both cases. */
int rt_ckpt_model_load(struct rt_ckpt_model *m, const char *ckpt, struct rt_dev *dev,
		       struct dt_err *err);
void rt_ckpt_model_free(struct rt_ckpt_model *m);

/* dtrain-ckpt eval (here) and sample (sample.c): argv from the command's
 * name on; each returns the program's exit code */
int rt_cmd_eval(int argc, char **argv);
int rt_cmd_sample(int argc, char **argv);

#endif
