/*
 * bootstrap.c - rank, size and placement of this process, from PMIx, Slurm's
 * or Open MPI's environment, or a singleton default (order and meaning in
 * bootstrap.h); then MPI_Init and the check that MPI agrees.
 *
 * Sections: small helpers, one function per source, the dispatcher, MPI,
 * sharing blobs within groups (PMIx, else MPI).
 */
#include "runtime/world/bootstrap.h"

#include "base/fault.h"
#include "base/cpus.h"
#include "base/io.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <mpi.h>
#include <pmix.h>

/* Bound on each PMIx_Get, so that a launcher that never answers gives an
 * error instead of a hang. The keys we read are local data: they come at
 * once or not at all. */
#define RT_PMIX_GET_TIMEOUT_S 30
/* Bound on the fences (rt_pmix_share's, the one after MPI_Init): every rank
 * must arrive, and a rank may still be loading its data or starting its GPU. */
#define RT_PMIX_FENCE_TIMEOUT_S 300

_Static_assert(sizeof(((struct rt_proc *)0)->pmix_nspace) == PMIX_MAX_NSLEN + 1,
	       "rt_proc.pmix_nspace holds a PMIx namespace");

/* --- helpers --- */

static void copy_name(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src);
}

static int local_hostname(char *buf, size_t size, struct dt_err *err)
{
	int e;

	if (gethostname(buf, size) != 0) {
		e = errno;
		dt_err_add(err, "gethostname: %s", strerror(e));
		return -e;
	}
	buf[size - 1] = '\0';
	return 0;
}

/* An environment variable as an int in [min, max]. -ENOENT when unset (no
 * message: the caller decides), -EINVAL with a message when malformed. */
static int env_int(const char *name, int min, int max, int *out, struct dt_err *err)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s)
		return -ENOENT;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end != '\0' || v < min || v > max)
		return dt_err_add(err, "environment variable %s: want an integer in [%d, %d] (got \"%s\")",
				  name, min, max, s);
	*out = (int)v;
	return 0;
}

static int env_int_required(const char *name, int min, int max, int *out,
			    const char *source, struct dt_err *err)
{
	int rc = env_int(name, min, max, out, err);

	if (rc == -ENOENT)
		return dt_err_add(err, "environment variable %s is not set (needed to bootstrap from %s)",
				  name, source);
	return rc;
}

/*
 * The tasks on node `node_id` from a Slurm tasks-per-node list such as
 * "2(x3),1": counts in node order, "N(xR)" repeating N for R nodes.
 * Returns the count, or -1 when the list is malformed or too short.
 */
static int slurm_tasks_on_node(const char *list, int node_id)
{
	const char *s = list;
	long count, rep;
	char *end;

	while (*s) {
		count = strtol(s, &end, 10);
		if (end == s || count < 0 || count > INT_MAX)
			return -1;
		s = end;
		rep = 1;
		if (s[0] == '(' && s[1] == 'x') {
			rep = strtol(s + 2, &end, 10);
			if (end == s + 2 || rep < 1 || *end != ')')
				return -1;
			s = end + 1;
		}
		if (node_id < rep)
			return (int)count;
		node_id -= (int)(rep < INT_MAX ? rep : INT_MAX);
		if (*s == ',')
			s++;
		else if (*s)
			return -1;
	}
	return -1;
}

/* --- source 1: PMIx --- */

static int pmix_fail(struct dt_err *err, const char *call, const char *key, pmix_status_t st)
{
	if (key)
		dt_err_add(err, "%s(%s): %s", call, key, PMIx_Error_string(st));
	else
		dt_err_add(err, "%s: %s", call, PMIx_Error_string(st));
	return -EIO;
}

/* The integer in v, whatever its integer type (launchers differ: the
 * standard says uint16_t for a local rank, others send uint32_t). */
static int pmix_value_long(const pmix_value_t *v, long *out)
{
	switch (v->type) {
	case PMIX_INT:       *out = v->data.integer; return 0;
	case PMIX_INT8:      *out = v->data.int8; return 0;
	case PMIX_INT16:     *out = v->data.int16; return 0;
	case PMIX_INT32:     *out = v->data.int32; return 0;
	case PMIX_INT64:     *out = (long)v->data.int64; return 0;
	case PMIX_UINT:      *out = v->data.uint; return 0;
	case PMIX_UINT8:     *out = v->data.uint8; return 0;
	case PMIX_UINT16:    *out = v->data.uint16; return 0;
	case PMIX_UINT32:    *out = v->data.uint32; return 0;
	case PMIX_PROC_RANK: *out = v->data.rank; return 0;
	case PMIX_UINT64:
		if (v->data.uint64 > LONG_MAX)
			return -ERANGE;
		*out = (long)v->data.uint64;
		return 0;
	case PMIX_SIZE:
		if (v->data.size > LONG_MAX)
			return -ERANGE;
		*out = (long)v->data.size;
		return 0;
	default:
		return -EPROTO;
	}
}

static int pmix_get(const pmix_proc_t *who, const char *key, pmix_value_t **val,
		    struct dt_err *err)
{
	pmix_info_t info;
	pmix_status_t st;
	int timeout = RT_PMIX_GET_TIMEOUT_S;

	PMIX_INFO_CONSTRUCT(&info);
	PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &timeout, PMIX_INT);
	*val = NULL;
	st = PMIx_Get(who, key, &info, 1, val);
	PMIX_INFO_DESTRUCT(&info);
	if (st != PMIX_SUCCESS)
		return pmix_fail(err, "PMIx_Get", key, st);
	if (!*val) {
		dt_err_add(err, "PMIx_Get(%s): no value returned", key);
		return -EPROTO;
	}
	return 0;
}

static int pmix_get_int(const pmix_proc_t *who, const char *key, int min, int *out,
			struct dt_err *err)
{
	pmix_value_t *val = NULL;
	long v = 0;
	int rc;

	rc = pmix_get(who, key, &val, err);
	if (rc)
		goto out;
	rc = pmix_value_long(val, &v);
	if (rc) {
		dt_err_add(err, "PMIx_Get(%s): want an integer, got PMIx data type %d",
			   key, (int)val->type);
		goto out;
	}
	if (v < min || v > INT_MAX) {
		rc = dt_err_add(err, "PMIx_Get(%s): value %ld out of range", key, v);
		goto out;
	}
	*out = (int)v;
out:
	if (val)
		PMIX_VALUE_RELEASE(val);
	return rc;
}

static int pmix_get_str(const pmix_proc_t *who, const char *key, char *buf, size_t size,
			struct dt_err *err)
{
	pmix_value_t *val = NULL;
	int rc;

	rc = pmix_get(who, key, &val, err);
	if (rc)
		goto out;
	if (val->type != PMIX_STRING || !val->data.string) {
		rc = dt_err_add(err, "PMIx_Get(%s): want a string, got PMIx data type %d",
				key, (int)val->type);
		goto out;
	}
	copy_name(buf, size, val->data.string);
out:
	if (val)
		PMIX_VALUE_RELEASE(val);
	return rc;
}

static int boot_pmix(struct rt_proc *p, struct dt_err *err)
{
	pmix_proc_t me, job;
	pmix_status_t st;
	int rc;

	PMIX_PROC_CONSTRUCT(&me);
	st = PMIx_Init(&me, NULL, 0);
	if (st != PMIX_SUCCESS) {
		dt_err_add(err, "PMIx_Init: %s (hint: PMIX_NAMESPACE=%s is set but no PMIx server of that job answers; launch with `srun --mpi=pmix` or `mpirun`, or unset PMIX_NAMESPACE)",
			   PMIx_Error_string(st), getenv("PMIX_NAMESPACE"));
		return -EIO;
	}
	p->pmix_up = true;
	p->via = RT_BOOT_PMIX;
	PMIX_LOAD_NSPACE(p->pmix_nspace, me.nspace);

	/* Job- and node-level keys (job size, local size) live under the
	 * wildcard rank, per-process ones under ours; asked the other way,
	 * Slurm's and mpirun's PMIx servers both answer NOT-FOUND. */
	PMIX_PROC_CONSTRUCT(&job);
	PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);

	if (me.rank > INT_MAX)
		return dt_err_add(err, "PMIx_Init: rank %u out of range", me.rank);
	p->rank = (int)me.rank;
	rc = pmix_get_int(&job, PMIX_JOB_SIZE, 1, &p->size, err);
	if (!rc)
		rc = pmix_get_int(&job, PMIX_LOCAL_SIZE, 1, &p->local_size, err);
	if (!rc)
		rc = pmix_get_int(&me, PMIX_LOCAL_RANK, 0, &p->local_rank, err);
	if (!rc)
		rc = pmix_get_int(&me, PMIX_NODEID, 0, &p->node_id, err);
	if (!rc)
		rc = pmix_get_str(&me, PMIX_HOSTNAME, p->hostname, sizeof(p->hostname), err);
	return rc;
}

/* --- source 2: Slurm's environment --- */

static int boot_slurm(struct rt_proc *p, struct dt_err *err)
{
	const char *list, *name = "SLURM_STEP_TASKS_PER_NODE";
	int rc;

	p->via = RT_BOOT_SLURM;
	rc = env_int_required("SLURM_PROCID", 0, INT_MAX - 1, &p->rank, "Slurm", err);
	if (!rc)
		rc = env_int_required("SLURM_NTASKS", 1, INT_MAX, &p->size, "Slurm", err);
	if (!rc)
		rc = env_int_required("SLURM_LOCALID", 0, INT_MAX - 1, &p->local_rank, "Slurm", err);
	if (!rc)
		rc = env_int_required("SLURM_NODEID", 0, INT_MAX - 1, &p->node_id, "Slurm", err);
	if (rc)
		return rc;

	list = getenv(name);
	if (!list) {
		name = "SLURM_TASKS_PER_NODE";
		list = getenv(name);
	}
	if (!list)
		return dt_err_add(err, "environment variable SLURM_STEP_TASKS_PER_NODE is not set (needed to bootstrap from Slurm)");
	p->local_size = slurm_tasks_on_node(list, p->node_id);
	if (p->local_size < 1)
		return dt_err_add(err, "environment variable %s: no task count for node %d (got \"%s\")",
				  name, p->node_id, list);
	return local_hostname(p->hostname, sizeof(p->hostname), err);
}

/* --- source 3: Open MPI's environment --- */

static int boot_ompi(struct rt_proc *p, struct dt_err *err)
{
	const char *src = "Open MPI's environment";
	int rc;

	p->via = RT_BOOT_MPI;
	rc = env_int_required("OMPI_COMM_WORLD_RANK", 0, INT_MAX - 1, &p->rank, src, err);
	if (!rc)
		rc = env_int_required("OMPI_COMM_WORLD_SIZE", 1, INT_MAX, &p->size, src, err);
	if (!rc)
		rc = env_int_required("OMPI_COMM_WORLD_LOCAL_RANK", 0, INT_MAX - 1,
				      &p->local_rank, src, err);
	if (!rc)
		rc = env_int_required("OMPI_COMM_WORLD_LOCAL_SIZE", 1, INT_MAX,
				      &p->local_size, src, err);
	if (rc)
		return rc;
	/* Open MPI names no node index; it is 0 only when we know there is one node */
	p->node_id = p->local_size == p->size ? 0 : -1;
	return local_hostname(p->hostname, sizeof(p->hostname), err);
}

/* --- source 4: a single process --- */

static int boot_singleton(struct rt_proc *p, struct dt_err *err)
{
	p->via = RT_BOOT_SINGLETON;
	p->rank = 0;
	p->size = 1;
	p->local_rank = 0;
	p->local_size = 1;
	p->node_id = 0;
	return local_hostname(p->hostname, sizeof(p->hostname), err);
}

/* --- the machine's CPUs --- */

/* A small file's text (the caller frees), or NULL. */
static char *read_line(const char *path)
{
	char *s = NULL;
	size_t len;

	return dt_read_file(path, &s, &len) == 0 ? s : NULL;
}

/* A cgroup quota: "QUOTA PERIOD" (v2 cpu.max) or QUOTA and PERIOD in two
 * files (v1), in CPUs rounded up; 0 when there is none ("max", -1). */
static long quota_cpus(const char *quota, const char *period)
{
	long long q, per;

	if (!quota || sscanf(quota, "%lld", &q) != 1 || q <= 0)
		return 0;
	if (period ? sscanf(period, "%lld", &per) != 1 : sscanf(quota, "%*s %lld", &per) != 1)
		return 0;
	return per > 0 ? (long)((q + per - 1) / per) : 0;
}

/* The CPUs this machine gives its processes: the online CPUs, fewer where
 * the cgroup that this process sees as the root (a container's, in its own
 * cgroup namespace) limits them by a cpuset or a quota, cgroup v2 or v1.
 * Not the affinity mask: Slurm may bind each rank to its own CPUs, and the
 * question is what all the machine's ranks share. 0: unknown. */
static int machine_cpu_count(void)
{
	static const char *const sets[] = { "/sys/fs/cgroup/cpuset.cpus.effective",
					    "/sys/fs/cgroup/cpuset/cpuset.effective_cpus" };
	long n = sysconf(_SC_NPROCESSORS_ONLN), c[4] = { 0 };
	char *a, *b;
	size_t i;

	if (n <= 0)
		return 0;
	for (i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
		a = read_line(sets[i]);
		c[i] = a ? dt_cpulist_count(a) : 0;
		free(a);
	}
	a = read_line("/sys/fs/cgroup/cpu.max");
	c[2] = quota_cpus(a, NULL);
	free(a);
	a = read_line("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
	b = read_line("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
	c[3] = b ? quota_cpus(a, b) : 0;
	free(a);
	free(b);
	for (i = 0; i < 4; i++) /* 0 or less: that limit is not set */
		if (c[i] > 0 && c[i] < n)
			n = c[i];
	return n > INT_MAX ? INT_MAX : (int)n;
}

/* --- dispatcher --- */

int rt_bootstrap(struct rt_proc *p, struct dt_err *err)
{
	const char *nodename;
	int rc;

	memset(p, 0, sizeof(*p));
	p->node_id = -1;

	if (getenv("PMIX_NAMESPACE"))
		rc = boot_pmix(p, err);
	else if (getenv("SLURM_PROCID"))
		rc = boot_slurm(p, err);
	else if (getenv("OMPI_COMM_WORLD_RANK"))
		rc = boot_ompi(p, err);
	else
		rc = boot_singleton(p, err);
	if (rc)
		goto out;

	if (p->rank >= p->size || p->local_rank >= p->local_size || p->local_size > p->size) {
		rc = dt_err_add(err, "bootstrap via %s: inconsistent placement: rank %d of %d, local rank %d of %d",
				rt_boot_via_name(p->via), p->rank, p->size, p->local_rank,
				p->local_size);
		goto out;
	}
	nodename = getenv("SLURMD_NODENAME");
	copy_name(p->node, sizeof(p->node), nodename && *nodename ? nodename : p->hostname);
	p->machine_size = p->local_size;
	p->machine_cpus = machine_cpu_count();
out:
	if (rc)
		rt_bootstrap_fini(p);
	return rc;
}

void rt_bootstrap_fini(struct rt_proc *p)
{
	if (p->pmix_up)
		PMIx_Finalize(NULL, 0);
	p->pmix_up = false;
	p->pmix_nspace[0] = '\0';
}

const char *rt_boot_via_name(enum rt_boot_via via)
{
	switch (via) {
	case RT_BOOT_PMIX:      return "pmix";
	case RT_BOOT_SLURM:     return "slurm";
	case RT_BOOT_MPI:       return "mpi";
	case RT_BOOT_SINGLETON: return "singleton";
	}
	return "?";
}

/* --- MPI --- */

/* A fence of all the job's ranks that collects the data they put, within
 * RT_PMIX_FENCE_TIMEOUT_S. It collects even with nothing to collect:
 * Slurm's PMIx server (mpi/pmix_v4, 22.05) ends a fence that does not on
 * each node alone, and the other node's ranks go on before a late rank
 * (runtime/README.md, "A fence after MPI_Init"; pmix_srun.sh checks it). */
static pmix_status_t fence_all(const struct rt_proc *p)
{
	pmix_proc_t all;
	pmix_info_t info[2];
	pmix_status_t st;
	int timeout = RT_PMIX_FENCE_TIMEOUT_S;
	bool collect = true;

	PMIX_PROC_CONSTRUCT(&all);
	PMIX_LOAD_PROCID(&all, p->pmix_nspace, PMIX_RANK_WILDCARD);
	PMIX_INFO_CONSTRUCT(&info[0]);
	PMIX_INFO_CONSTRUCT(&info[1]);
	PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
	PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &timeout, PMIX_INT);
	st = PMIx_Fence(&all, 1, info, 2);
	PMIX_INFO_DESTRUCT(&info[0]);
	PMIX_INFO_DESTRUCT(&info[1]);
	return st;
}

/* --- the machine: its ranks and CPUs --- */

#define RT_MACHINE_KEY "dtrain.machine"

bool rt_machine_oversubscribed(const struct rt_proc *p, int threads)
{
	return p->machine_cpus > 0 && (long)p->machine_size * (threads < 1 ? 1 : threads) > p->machine_cpus;
}

/* What names this machine: the running kernel's boot id (one set of CPUs,
 * shared by every container on it), else the host name. */
static void machine_id(char *buf, size_t size)
{
	char *boot = read_line("/proc/sys/kernel/random/boot_id");

	snprintf(buf, size, "%.*s", boot ? (int)strcspn(boot, "\n") : 0, boot ? boot : "");
	free(boot);
	if (!*buf && gethostname(buf, size) != 0)
		snprintf(buf, size, "?");
	buf[size - 1] = '\0';
}

/* p->machine_size under PMIx: every rank puts its machine id, one fence,
 * then every rank reads every other's. Joins the fence even when its put
 * failed (the others wait in it); on any failure the count stays as it was
 * (local_size): it only decides how ranks wait, never what they compute. */
static void count_machine_ranks(struct rt_proc *p)
{
	char id[64], other[64];
	struct dt_err e = { 0 };
	pmix_value_t val;
	pmix_proc_t who;
	pmix_status_t st;
	int r, n = 1;

	machine_id(id, sizeof(id));
	PMIX_VALUE_CONSTRUCT(&val);
	val.type = PMIX_STRING;
	val.data.string = id; /* PMIx_Put copies it */
	st = PMIx_Put(PMIX_GLOBAL, RT_MACHINE_KEY, &val);
	if (st == PMIX_SUCCESS)
		st = PMIx_Commit();
	if (fence_all(p) != PMIX_SUCCESS || st != PMIX_SUCCESS)
		return;
	for (r = 0; r < p->size; r++) {
		if (r == p->rank)
			continue;
		PMIX_PROC_CONSTRUCT(&who);
		PMIX_LOAD_PROCID(&who, p->pmix_nspace, (pmix_rank_t)r);
		if (pmix_get_str(&who, RT_MACHINE_KEY, other, sizeof(other), &e))
			return;
		n += !strcmp(other, id);
	}
	p->machine_size = n;
}

/* SLURM_CPUS_PER_TASK (srun --cpus-per-task), else 1: the threads a rank
 * will run, before the spec that says so is read. */
static int slurm_cpus_per_task(void)
{
	struct dt_err e = { 0 };
	int n = 1;

	return env_int("SLURM_CPUS_PER_TASK", 1, 1 << 20, &n, &e) ? 1 : n;
}

/* Open MPI spins while it waits for a message. With more ranks on a machine
 * than CPUs (local test clusters, oversubscribed nodes) the spinning ranks
 * starve the working ones: 4 ranks on 2 cores trained 20x slower here.
 * mpirun knows when it oversubscribes; under srun only we do, so ask Open
 * MPI to yield then, unless the user chose. */
static void yield_if_oversubscribed(const struct rt_proc *p)
{
	if (rt_machine_oversubscribed(p, slurm_cpus_per_task()))
		setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
}

bool rt_mpi_yields(void)
{
	static const char *const yes[] = { "true", "yes", "enabled", "t", "y" };
	const char *v = getenv("OMPI_MCA_mpi_yield_when_idle");
	size_t i;

	if (!v)
		return false;
	if (*v >= '0' && *v <= '9') /* Open MPI's booleans: a number, true when not 0 */
		return strtol(v, NULL, 10) != 0;
	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		if (!strcasecmp(v, yes[i]))
			return true;
	return false;
}

/* A fence of all the job's ranks, no data: PMIx's own channel, not MPI's.
 * Open MPI 4.1 (Debian 12's) can crash a rank still inside MPI_Init when a
 * faster rank, already out of it, sends it a message over TCP: the
 * message's handler is not yet registered (a call through NULL in
 * mca_btl_tcp: seen here in about 1 of 250 starts of 2 x 2 ranks under
 * srun, also with a fence that held each node only; open-mpi/ompi#13559 is
 * the same race in a later version). So no rank sends anything until every rank has returned from
 * MPI_Init. */
static int fence_after_mpi_init(const struct rt_proc *p, struct dt_err *err)
{
	pmix_status_t st = fence_all(p);

	if (st != PMIX_SUCCESS) {
		dt_err_add(err, "rank %d: PMIx_Fence after MPI_Init: %s", p->rank, PMIx_Error_string(st));
		return -EIO;
	}
	return 0;
}

int rt_mpi_init(struct rt_proc *p, bool *mpi_up, struct dt_err *err)
{
	int rc, n = 0, r = -1, provided = 0;

	*mpi_up = false;
	if (p->pmix_up && p->size > 1)
		count_machine_ranks(p);
	yield_if_oversubscribed(p);
	/* FUNNELED: the checkpoint writer thread never calls MPI */
	rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
	if (rc != MPI_SUCCESS) {
		dt_err_add(err, "MPI_Init failed (MPI error %d)", rc);
		return -EIO;
	}
	*mpi_up = true;
	/* tests make one rank late out of MPI_Init (base/fault.h) */
	dt_fault_slow(DT_FAULT_MPI_INIT, p->rank);
	if (p->pmix_up && p->size > 1 && fence_after_mpi_init(p, err))
		return -EIO;
	/* errors come back as codes; the caller decides to abort */
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	rc = MPI_Comm_size(MPI_COMM_WORLD, &n);
	if (rc == MPI_SUCCESS)
		rc = MPI_Comm_rank(MPI_COMM_WORLD, &r);
	if (rc != MPI_SUCCESS) {
		dt_err_add(err, "MPI_Comm_size/rank failed (MPI error %d)", rc);
		return -EIO;
	}
	if (n != p->size || r != p->rank) {
		dt_err_add(err, "MPI_COMM_WORLD has rank %d of %d but the %s bootstrap says rank %d of %d (hint: start dtrain-run with `srun --mpi=pmix` or `mpirun`, so that MPI sees every task)",
			   r, n, rt_boot_via_name(p->via), p->rank, p->size);
		return -EPROTO;
	}
	return 0;
}

/* --- sharing blobs within groups --- */

static int share_check(const struct rt_proc *p, const struct rt_share *sh, struct dt_err *err)
{
	if (!sh->key || !*sh->key || strlen(sh->key) >= PMIX_MAX_KEYLEN)
		return dt_err_add(err, "rank %d: rt_pmix_share: key \"%s\": want 1 to %d bytes",
				  p->rank, sh->key ? sh->key : "", PMIX_MAX_KEYLEN - 1);
	if (sh->len < 1 || sh->len > INT_MAX || !sh->buf || sh->root < 0 || sh->root >= p->size)
		return dt_err_add(err, "rank %d: rt_pmix_share(%s): bad share (root %d of %d, %zu bytes)",
				  p->rank, sh->key, sh->root, p->size, sh->len);
	return 0;
}

static int share_put(const struct rt_proc *p, const struct rt_share *sh, struct dt_err *err)
{
	pmix_value_t val;
	pmix_status_t st;

	/* PMIx_Put copies the value; the byte object only points at buf */
	PMIX_VALUE_CONSTRUCT(&val);
	val.type = PMIX_BYTE_OBJECT;
	val.data.bo.bytes = sh->buf;
	val.data.bo.size = sh->len;
	st = PMIx_Put(PMIX_GLOBAL, sh->key, &val);
	if (st != PMIX_SUCCESS) {
		dt_err_add(err, "rank %d: PMIx_Put(%s): %s", p->rank, sh->key, PMIx_Error_string(st));
		return -EIO;
	}
	return 0;
}

static int share_get(const struct rt_proc *p, const struct rt_share *sh, struct dt_err *err)
{
	pmix_proc_t root;
	pmix_value_t *val = NULL;
	struct dt_err e = { 0 };
	int rc;

	PMIX_PROC_CONSTRUCT(&root);
	PMIX_LOAD_PROCID(&root, p->pmix_nspace, (pmix_rank_t)sh->root);
	rc = pmix_get(&root, sh->key, &val, &e);
	if (rc) {
		dt_err_add(err, "rank %d: %s (from rank %d)", p->rank, e.msg, sh->root);
		goto out;
	}
	if (val->type != PMIX_BYTE_OBJECT || val->data.bo.size != sh->len) {
		rc = dt_err_add(err, "rank %d: PMIx_Get(%s) from rank %d: want %zu bytes, got PMIx data type %d of %zu bytes",
				p->rank, sh->key, sh->root, sh->len, (int)val->type,
				val->type == PMIX_BYTE_OBJECT ? val->data.bo.size : (size_t)0);
		rc = -EPROTO;
		goto out;
	}
	memcpy(sh->buf, val->data.bo.bytes, sh->len);
out:
	if (val)
		PMIX_VALUE_RELEASE(val);
	return rc;
}

static int share_pmix(const struct rt_proc *p, struct rt_share *shares, int n, struct dt_err *err)
{
	pmix_status_t st;
	int i, rc = 0;

	for (i = 0; i < n && !rc; i++)
		if (shares[i].root == p->rank)
			rc = share_put(p, &shares[i], err);
	if (!rc) {
		st = PMIx_Commit();
		if (st != PMIX_SUCCESS) {
			dt_err_add(err, "rank %d: PMIx_Commit: %s", p->rank, PMIx_Error_string(st));
			rc = -EIO;
		}
	}

	/* Joined even after a failure above: the job's other ranks wait in it */
	st = fence_all(p);
	if (st != PMIX_SUCCESS && !rc) {
		dt_err_add(err, "rank %d: PMIx_Fence: %s", p->rank, PMIx_Error_string(st));
		rc = -EIO;
	}

	for (i = 0; i < n && !rc; i++)
		if (shares[i].root != p->rank)
			rc = share_get(p, &shares[i], err);
	return rc;
}

static int mpi_fail(const struct rt_proc *p, struct dt_err *err, const char *call,
		    const char *key, int code)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	if (MPI_Error_string(code, msg, &len) != MPI_SUCCESS)
		snprintf(msg, sizeof(msg), "MPI error %d", code);
	dt_err_add(err, "rank %d: %s(%s): %s", p->rank, call, key, msg);
	return -EIO;
}

/* The root's rank in sh->comm, from its rank in the world. */
static int share_root_in_comm(const struct rt_proc *p, const struct rt_share *sh, int *root,
			      struct dt_err *err)
{
	MPI_Group world = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
	int rc;

	rc = MPI_Comm_group(MPI_COMM_WORLD, &world);
	if (rc == MPI_SUCCESS)
		rc = MPI_Comm_group(sh->comm, &group);
	if (rc == MPI_SUCCESS)
		rc = MPI_Group_translate_ranks(world, 1, &sh->root, group, root);
	if (group != MPI_GROUP_NULL)
		MPI_Group_free(&group);
	if (world != MPI_GROUP_NULL)
		MPI_Group_free(&world);
	if (rc != MPI_SUCCESS)
		return mpi_fail(p, err, "MPI_Group_translate_ranks", sh->key, rc);
	if (*root == MPI_UNDEFINED)
		return dt_err_add(err, "rank %d: rt_pmix_share(%s): root rank %d is not in the group's communicator",
				  p->rank, sh->key, sh->root);
	return 0;
}

static int share_mpi(const struct rt_proc *p, struct rt_share *shares, int n, struct dt_err *err)
{
	int i, root = 0, rc, first = 0;

	/* every broadcast is joined even after a failure, as the peers are */
	for (i = 0; i < n; i++) {
		rc = share_root_in_comm(p, &shares[i], &root, err);
		if (!rc) {
			rc = MPI_Bcast(shares[i].buf, (int)shares[i].len, MPI_BYTE, root,
				       shares[i].comm);
			if (rc != MPI_SUCCESS)
				rc = mpi_fail(p, err, "MPI_Bcast", shares[i].key, rc);
		}
		if (rc && !first)
			first = rc;
	}
	return first;
}

int rt_pmix_share(const struct rt_proc *p, struct rt_share *shares, int n, struct dt_err *err)
{
	int i, rc = 0;

	for (i = 0; i < n && !rc; i++)
		rc = share_check(p, &shares[i], err);
	if (!p->pmix_up)
		return rc ? rc : share_mpi(p, shares, n, err);
	if (rc) {
		/* join the fence that the job's other ranks wait in, then fail */
		share_pmix(p, shares, 0, &(struct dt_err){ 0 });
		return rc;
	}
	return share_pmix(p, shares, n, err);
}
