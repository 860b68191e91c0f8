/*
 * ckpt_internal.h - what the files of dtrain-run's side of checkpoints
 * (checkpointing.h) share: finding the checkpoint to start from
 * (ckpt_find.c), used by resume (checkpointing.c) and init_from.c. Private
 * to runtime/train/.
 */
#ifndef DTRAIN_RUNTIME_TRAIN_CKPT_INTERNAL_H
#define DTRAIN_RUNTIME_TRAIN_CKPT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/train/checkpointing.h"

/* A step every rank took alone, agreed on (world/agree.h): 0, or -EINVAL
 * with the first failing rank's message e moved to err (-EIO when MPI
 * failed). */
int rt__ckpt_agreed(int rc, struct dt_err *e, struct dt_err *err);
/* Prints each line of e as a warning of this rank, then clears e. */
void rt__ckpt_warn_lines(const struct rt_ckpt *c, struct dt_err *e);
/* A line of rank 0 on stdout ("dtrain-run: ..."), unless quiet. */
void rt__ckpt_say(const struct rt_ckpt *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The newest valid checkpoint under dir (older ones when the newer fail
 * verification, each with a warning), into out and *m; *found = false
 * when none, *skipped counts the damaged ones. Collective. */
int rt__ckpt_newest_valid(struct rt_ckpt *c, const char *dir, struct ckpt_manifest *m, char *out,
			  size_t size, bool *found, int *skipped, struct dt_err *err);
/* The checkpoint that the spec's key names (want), verified, into path
 * and its manifest into *m: a checkpoint, or a directory's newest valid
 * one (a run dir's in its checkpoints/). Collective. 0 with *found, or
 * -EINVAL naming key when there is none. */
int rt__ckpt_named_point(struct rt_ckpt *c, const char *want, const char *key,
			 struct ckpt_manifest *m, char *path, size_t size, bool *found,
			 struct dt_err *err);

/* checkpoint.init_from (init_from.c): this stage's tensors from that
 * checkpoint's model, by name, with a fresh optimizer at step 0; m is
 * scratch for its manifest. Collective. 0, or -EINVAL naming what does
 * not fit (another model type, a missing tensor, another shape). */
int rt__ckpt_init_from(struct rt_ckpt *c, struct ckpt_manifest *m, struct dt_err *err);

#endif
