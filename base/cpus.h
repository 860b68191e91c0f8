/*
 * cpus.h - the CPUs a process may use, as Linux lists them.
 */
#ifndef DTRAIN_BASE_CPUS_H
#define DTRAIN_BASE_CPUS_H


/* The number of CPUs in a Linux CPU list ("0-3,8,10-11\n": 7), as in
 * cpuset.cpus.effective; -EINVAL when malformed or empty. */
int dt_cpulist_count(const char *list);

#endif
