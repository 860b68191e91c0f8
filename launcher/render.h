/*
 * render.h - private to the batch script's files: render.c (the script,
 * section by section), render_nodes.c (bad nodes: the probe after a crash,
 * the nodes left out of the job's next starts) and render_text.c (writing
 * the text).
 */
#ifndef DTRAIN_LAUNCHER_RENDER_H
#define DTRAIN_LAUNCHER_RENDER_H

#include "base/buf.h"
#include "base/err.h"
#include "jobs/spec.h"

struct site;

/* Seconds a one-task step may take to start on a node after a crash before
 * the batch script takes the node for lost. srun returns once the failed
 * step's tasks are gone (or after KillWait + 2 s), so on a healthy
 * allocation the probe starts at once. */
#define LAUNCH__PROBE_S 20

/* Everything one render needs; rc is sticky so that each line of output
 * needs no check of its own. */
struct render {
	const struct spec *spec;
	const struct site *site;
	const char *site_origin; /* prefix of messages about site values */
	const char *run_dir;
	struct dt_buf *b;
	struct dt_err *err;
	int rc;  /* first -ENOMEM */
	int bad; /* values refused */
};

/* render_text.c: append printf-style text to the script (nothing once r->rc is set). */
void launch__render_put(struct render *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The site's srun options, each one quoted word after a space. */
void launch__render_srun_extra(struct render *r);

/* render_nodes.c: the shell functions that leave bad nodes out (defined
 * before the restart loop), ... */
void launch__render_bad_nodes(struct render *r);
/* ... the check at a start that its allocation holds no node left out, ... */
void launch__render_start_check(struct render *r);
/* ... in the restart loop after a crash, the probe of every node (one
 * that does not answer is left out, and the job requeued) and the crash's
 * own bad node (left out), ... */
void launch__render_after_crash(struct render *r);
/* ... and, once the crash is counted, the requeue without that node. */
void launch__render_crash_requeue(struct render *r);

#endif
