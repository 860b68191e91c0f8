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

/* Installs the flag-setting handler for SIGTERM and the named signal
 * ("USR1", "USR2", "TERM", "INT", "HUP", "URG", "XCPU", as spec
 * preemption.signal; NULL: SIGTERM only). 0, -EINVAL for an unknown name,
 * or -errno from sigaction. */
int rt_preempt_signals(const char *name);

/* The first stop signal received, 0 if none. Safe to call any time. */
int rt_preempt_pending(void);

#endif
