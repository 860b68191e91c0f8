/*
 * preempt.h - the signals that stop a job for preemption or cancellation:
 * SIGTERM (scancel, Slurm's preemption, KillWait) and the spec's
 * preemption.signal (sent ahead of the time limit: sbatch --signal). The
 * handler only records the first one; rt_ckpt_poll (checkpointing.h) agrees
 * on it over all ranks at the next step boundary, the state is saved and
 * dtrain-run exits 75 ("requeue me"). Process-wide state: the one flag.
 */
#ifndef DTRAIN_RUNTIME_PREEMPT_H
#define DTRAIN_RUNTIME_PREEMPT_H

#include <stdbool.h>

/* Installs the flag-setting handler for SIGTERM and the named signal
 * ("USR1", "USR2", "TERM", "INT", "HUP", "URG", "XCPU", as spec
 * preemption.signal; NULL: SIGTERM only). 0, -EINVAL for an unknown name,
 * or -errno from sigaction. */
int rt_preempt_signals(const char *name);

/* The first stop signal received, 0 if none; once the Unix time in
 * $DTRAIN_STOP_AT (read by rt_preempt_signals) has passed, the named
 * signal as if it had arrived. The batch script sets it lead_seconds before
 * the job's end: the time-limit warning reaches only the step running when
 * Slurm sends it, and a step started again after a crash would miss it.
 * Safe to call any time. */
int rt_preempt_pending(void);

/* Whether the stop pending is DTRAIN_STOP_AT's deadline, not a signal. */
bool rt_preempt_by_deadline(void);

#endif
