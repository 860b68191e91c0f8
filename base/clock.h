/*
 * clock.h - the clocks: monotonic seconds for durations, wall-clock seconds
 * for what is written down (heartbeats, metrics), and a sleep that resumes
 * after signals.
 */
#ifndef DTRAIN_BASE_CLOCK_H
#define DTRAIN_BASE_CLOCK_H


/* CLOCK_MONOTONIC in seconds: for measuring durations and deadlines. */
double dt_mono_s(void);
/* CLOCK_REALTIME in seconds since the epoch: for times written down. */
double dt_wall_s(void);
/* Sleeps ms milliseconds, resumed after signals (the fault hooks' delays). */
void dt_sleep_ms(unsigned long long ms);

#endif
