/*
 * heartbeat.h - the heartbeat files of a running job, one per rank:
 * <run_dir>/heartbeat/rank-<r>. dtrain-run's watchdog (runtime/world/watchdog.h)
 * rewrites its rank's file every second or so with what the rank is doing
 * and since when; the watchdogs of the other ranks read them to say whom
 * they wait for, and `dtrain-submit status` to say when the last step began
 * and whether the job still makes progress.
 *
 * Format: one line of text, rewritten whole at offset 0 and always
 * DT_HEARTBEAT_BYTES long (spaces pad it before its '\n'):
 *
 *   dtrain-heartbeat 2 rank R world W pid P node NAME start T0 step S
 *       stepped T1 phase PHASE since T2 at T3 bound B waits WB WE
 *       sum XXXXXXXX
 *
 * (one line). Times are Unix seconds (CLOCK_REALTIME) with 3 decimals:
 * start when this start of the job step began (the batch script's
 * DTRAIN_STEP_START, the same on every rank; else the process's start),
 * stepped when step S began, since when the phase began, at when the line
 * was written. step is the step being worked on (1-based, as the progress
 * lines count; 0 before the first), bound the seconds the phase may last
 * before the watchdog ends the job step (0: no bound), WB and WE the
 * rank's waits on other ranks begun and ended (runtime/world/waits.h), so
 * that a rank alive but outside the collective its peers wait in can be
 * named. Version 1 lines (no waits) are still read. sum is FNV-1a (32
 * bits, hex) of the line before " sum ": a reader that catches a line
 * half rewritten, or mixed from two writes, sees it fail to parse
 * (-EINVAL) and reads again.
 */
#ifndef DTRAIN_BASE_HEARTBEAT_H
#define DTRAIN_BASE_HEARTBEAT_H

#include <stdbool.h>
#include <stddef.h>

#define DT_HEARTBEAT_BYTES 384
#define DT_HEARTBEAT_VERSION 2 /* 1: without "waits" (still read) */

/* What a rank is doing; in the file as its name. */
enum dt_phase {
	DT_PHASE_START, /* start-up and resume, until the first step */
	DT_PHASE_STEP,  /* forward, backward and update of a training step */
	DT_PHASE_SYNC,  /* between steps: agreeing on a stop signal */
	DT_PHASE_EVAL,  /* evaluating the test set */
	DT_PHASE_SAVE,  /* saving a checkpoint */
	DT_PHASE_END,   /* training done (or failed); no bound */
	DT_PHASE_COUNT
};

struct dt_heartbeat {
	int rank, world;
	long pid;
	char node[64];   /* the Slurm node (or host) name; spaces become '?' */
	double start;    /* Unix s: this start of the job step began */
	long long step;  /* the step worked on, 1-based; 0 before the first */
	double stepped;  /* Unix s: that step began; 0 before the first */
	enum dt_phase phase;
	double since;    /* Unix s: the phase began */
	double at;       /* Unix s: the line was written */
	double bound;    /* s the phase may last; 0: no bound */
	long long waits_begun, waits_ended; /* the rank's waits on other ranks (MPI's
			  * blocking calls) begun and ended in this process: one
			  * begun and not ended is a wait in progress; -1: not
			  * known (a version 1 line) */
};

/* Seconds between a rank's heartbeats in a phase of this bound (0: none):
 * a tenth of it, 0.2 to 5 s. */
double dt_heartbeat_period(double bound);

/* Whether h's writer has stopped writing at time now: nothing for three of
 * its periods and a second (its process stopped, hung whole, or gone with
 * its node). A rank in phase "end" is never silent. */
bool dt_heartbeat_silent(const struct dt_heartbeat *h, double now);

/* Whether a and b were written by the same start of a job step: starts
 * within 2 s (ranks under srun share DTRAIN_STEP_START exactly; under
 * mpirun each has its own process start). */
bool dt_heartbeat_same_start(const struct dt_heartbeat *a, const struct dt_heartbeat *b);

/* "start", "step", "sync", "eval", "save", "end" ("?" out of range). */
const char *dt_phase_name(enum dt_phase phase);

/* <dir>/rank-<rank> into buf. 0, or -ENAMETOOLONG when it does not fit. */
int dt_heartbeat_path(const char *dir, int rank, char *buf, size_t size);

/* The line for h, DT_HEARTBEAT_BYTES with its '\n', into buf (at least
 * DT_HEARTBEAT_BYTES + 1 bytes: a NUL follows). 0, or -ENAMETOOLONG when the
 * fields do not fit. */
int dt_heartbeat_format(const struct dt_heartbeat *h, char *buf, size_t size);

/* Parse one line (a NUL-terminated string). 0, or -EINVAL when it is not a
 * heartbeat of this version (torn, damaged, another format). */
int dt_heartbeat_parse(const char *line, struct dt_heartbeat *h);

/* Read rank's file in dir, retrying a torn line a few times. 0; -ENOENT
 * when there is none; -EINVAL when it does not parse; -errno else. */
int dt_heartbeat_read(const char *dir, int rank, struct dt_heartbeat *h);

#endif
