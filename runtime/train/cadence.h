/*
 * cadence.h - how often to save when checkpoint.every_steps is "auto":
 * Young/Daly's interval, the save's measured cost against the mean time
 * between interruptions (runtime/train/cadence.c has the trainer's side).
 *
 * Young (1974) and Daly (2006): with a save costing C seconds of training
 * and interruptions every M seconds on average, saving every
 * sqrt(2 C M) seconds loses the least time to saves and to work redone
 * (C much smaller than M).
 */
#ifndef DTRAIN_RUNTIME_TRAIN_CADENCE_H
#define DTRAIN_RUNTIME_TRAIN_CADENCE_H

/* The interval in seconds for a save costing c_s seconds of training and
 * interruptions every m_s seconds: sqrt(2 c_s m_s), bounded below by one
 * save's cost (saves must not follow each other back to back) and one step
 * (step_s), above by m_s (at least one save between interruptions). *why
 * gets "formula", "at least a save's cost", "at least a step" or "at most
 * M". */
double rt_cadence_interval(double c_s, double m_s, double step_s, const char **why);

/* M refined by the run's own history, as a prior of one interruption in
 * m_site seconds updated by k interruptions in run_s seconds of the run:
 * (m_site + run_s) / (1 + k). */
double rt_cadence_mtbi(double m_site, int k, double run_s);

#endif
