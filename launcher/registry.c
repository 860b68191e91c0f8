/*
 * registry.c - the per-user list of jobs dtrain-submit submitted, so that
 * `status`, `logs` and `cancel` take a job name and find the run dir.
 *
 * File: ${XDG_STATE_HOME:-$HOME/.local/state}/dtrain/jobs.tsv, mode 0600.
 * First line "# dtrain-jobs v1", then one line per job, appended under an
 * flock so that two submits never interleave:
 *   <job id> TAB <name> TAB <run dir> TAB <submit time, UTC ISO 8601> LF
 * A reader skips lines that are not four fields (a line cut by a crash) and
 * refuses a file of another version.
 *
 * Sections: job records, path, append, load, JOB resolution.
 */
#include "launcher/launch.h"
#include "launcher/internal.h"
#include "base/io.h"
#include "base/str.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define REGISTRY_MAGIC "# dtrain-jobs v"
#define REGISTRY_VERSION 1

/* --- job records --- */

void launch_job_free(struct launch_job *j)
{
	free(j->id);
	free(j->name);
	free(j->run_dir);
	free(j->submitted);
	free(j->log_path);
	free(j->cluster);
	*j = (struct launch_job){0};
}

void launch_jobs_free(struct launch_job *jobs, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		launch_job_free(&jobs[i]);
	free(jobs);
}

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/* <run_dir>/slurm-<id>.out, the --output of every batch script we render. */
static int set_log_path(struct launch_job *j)
{
	struct dt_buf b = {0};

	if (!j->run_dir)
		return 0;
	if (dt_buf_printf(&b, "%s/slurm-%s.out", j->run_dir, j->id))
		return -ENOMEM;
	free(j->log_path);
	j->log_path = b.p;
	return 0;
}

/* --- path --- */

int launch_registry_path(char **out, struct dt_err *err)
{
	const char *state = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");
	struct dt_buf b = {0};
	int rc;

	*out = NULL;
	/* The XDG spec says to ignore a relative XDG_STATE_HOME. */
	if (state && state[0] == '/')
		rc = dt_buf_printf(&b, "%s/dtrain/jobs.tsv", state);
	else if (home && home[0] == '/')
		rc = dt_buf_printf(&b, "%s/.local/state/dtrain/jobs.tsv", home);
	else
		return dt_err_add(err, "job registry: neither XDG_STATE_HOME nor HOME is an absolute path; hint: set HOME");
	if (rc) {
		dt_err_add(err, "job registry: out of memory");
		return rc;
	}
	*out = b.p;
	return 0;
}

/* --- append --- */

static bool field_ok(const char *s)
{
	for (; *s; s++)
		if (*s == '\t' || *s == '\n' || *s == '\r')
			return false;
	return true;
}

const char *launch_cluster(void)
{
	const char *conf = getenv("SLURM_CONF");

	return conf && *conf ? conf : "default";
}

void launch_jobs_here(struct launch_job *jobs, size_t *n, size_t *elsewhere)
{
	const char *here = launch_cluster();
	size_t i, kept = 0;

	for (i = 0; i < *n; i++) {
		if (!jobs[i].cluster || !strcmp(jobs[i].cluster, here))
			jobs[kept++] = jobs[i];
		else
			launch_job_free(&jobs[i]);
	}
	if (elsewhere)
		*elsewhere = *n - kept;
	*n = kept;
}

int launch_registry_append(const struct launch_job *j, struct dt_err *err)
{
	const char *cluster = j->cluster ? j->cluster : launch_cluster();
	const char *name = j->name ? j->name : "-";
	const char *run_dir = j->run_dir ? j->run_dir : "-";
	const char *submitted = j->submitted ? j->submitted : "-";
	struct dt_buf line = {0};
	char *path = NULL, *slash;
	struct stat st;
	int fd = -1, rc;

	if (!j->id || !all_digits(j->id) || !field_ok(name) || !field_ok(run_dir) || !field_ok(submitted) ||
	    !field_ok(cluster)) {
		rc = dt_err_add(err, "job registry: job %s: not a job id, or a field holds a tab or line break",
				j->id ? j->id : "(none)");
		goto out;
	}
	rc = launch_registry_path(&path, err);
	if (rc)
		goto out;
	slash = strrchr(path, '/');
	*slash = '\0';
	rc = dt_mkdirs(path, 0700);
	*slash = '/';
	if (rc) {
		dt_err_add(err, "%s: cannot create the directory: %s", path, strerror(-rc));
		goto out;
	}
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		dt_err_add(err, "%s: cannot open: %s", path, strerror(-rc));
		goto out;
	}
	while ((rc = flock(fd, LOCK_EX)) < 0 && errno == EINTR)
		;
	if (rc < 0 || fstat(fd, &st) < 0) {
		rc = -errno;
		dt_err_add(err, "%s: cannot lock: %s", path, strerror(-rc));
		goto out;
	}
	if (st.st_size == 0)
		rc = dt_buf_printf(&line, REGISTRY_MAGIC "%d\tjob_id\tname\trun_dir\tsubmitted\tcluster\n",
				   REGISTRY_VERSION);
	if (!rc)
		rc = dt_buf_printf(&line, "%s\t%s\t%s\t%s\t%s\n", j->id, name, run_dir, submitted, cluster);
	if (!rc)
		rc = dt_write_all(fd, line.p, line.len);
	if (!rc)
		rc = dt_fsync_fd(fd);
	if (rc)
		dt_err_add(err, "%s: cannot write: %s", path, strerror(-rc));
out:
	if (fd >= 0)
		close(fd); /* also drops the lock */
	dt_buf_free(&line);
	free(path);
	return rc;
}

/* --- load --- */

/* Split a line into 4 or 5 tab-separated fields, in place (f[4] NULL
 * for 4: a line from before the cluster was recorded). */
static bool split_fields(char *line, char *f[5])
{
	int i;

	f[4] = NULL;
	for (i = 0; i < 5 && line; i++) {
		f[i] = line;
		line = strchr(line, '\t');
		if (line && i < 4)
			*line++ = '\0';
	}
	return i >= 4 && line == NULL && all_digits(f[0]);
}

static char *field_dup(const char *s)
{
	return strcmp(s, "-") ? strdup(s) : NULL;
}

int launch_registry_load(struct launch_job **jobs, size_t *n, struct dt_err *err)
{
	struct launch_job *v = NULL;
	size_t count = 0, cap = 0;
	char *path = NULL, *text = NULL, *line, *save = NULL;
	bool first = true;
	int rc;

	*jobs = NULL;
	*n = 0;
	rc = launch_registry_path(&path, err);
	if (rc)
		goto out;
	rc = dt_read_file(path, &text, NULL);
	if (rc == -ENOENT) {
		rc = 0; /* nothing submitted yet */
		goto out;
	}
	if (rc) {
		dt_err_add(err, "%s: cannot read: %s", path, strerror(-rc));
		goto out;
	}
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct launch_job *j;
		char *f[5];

		if (first) {
			first = false;
			if (strncmp(line, REGISTRY_MAGIC, strlen(REGISTRY_MAGIC)) ||
			    atoi(line + strlen(REGISTRY_MAGIC)) != REGISTRY_VERSION) {
				rc = -EPROTO;
				dt_err_add(err, "%s: not a dtrain job registry of version %d (first line \"%.40s\")",
					   path, REGISTRY_VERSION, line);
				goto out;
			}
			continue;
		}
		if (line[0] == '#' || !split_fields(line, f))
			continue;
		if (count == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct launch_job *nv = realloc(v, ncap * sizeof(*nv));

			if (!nv) {
				rc = -ENOMEM;
				goto out;
			}
			v = nv;
			cap = ncap;
		}
		j = &v[count];
		*j = (struct launch_job){ .id = strdup(f[0]), .name = field_dup(f[1]),
					  .run_dir = field_dup(f[2]), .submitted = field_dup(f[3]),
					  .cluster = f[4] ? strdup(f[4]) : NULL };
		count++;
		if (!j->id || (strcmp(f[1], "-") && !j->name) ||
		    (strcmp(f[2], "-") && !j->run_dir) || (strcmp(f[3], "-") && !j->submitted) ||
		    (f[4] && !j->cluster) || set_log_path(j)) {
			rc = -ENOMEM;
			goto out;
		}
	}
	*jobs = v;
	*n = count;
	v = NULL;
	count = 0;
out:
	if (rc == -ENOMEM)
		dt_err_add(err, "job registry: out of memory");
	launch_jobs_free(v, count);
	free(text);
	free(path);
	return rc;
}

/* --- JOB resolution --- */

static int job_copy(struct launch_job *dst, const struct launch_job *src)
{
	*dst = (struct launch_job){ .id = dt_strdup(src->id), .name = dt_strdup(src->name),
				    .run_dir = dt_strdup(src->run_dir),
				    .submitted = dt_strdup(src->submitted),
				    .log_path = dt_strdup(src->log_path),
				    .cluster = dt_strdup(src->cluster) };
	if ((src->id && !dst->id) || (src->name && !dst->name) ||
	    (src->run_dir && !dst->run_dir) || (src->submitted && !dst->submitted) ||
	    (src->log_path && !dst->log_path) || (src->cluster && !dst->cluster)) {
		launch_job_free(dst);
		return -ENOMEM;
	}
	return 0;
}

/* A job id the registry does not know: ask Slurm (a job submitted by hand,
 * or from another machine). */
static int resolve_from_slurm(const char *id, const char *registry,
			      struct launch_job *out, struct dt_err *err)
{
	const char *argv[] = { "scontrol", "show", "job", id, NULL };
	struct dt_buf text = {0};
	struct dt_err ignored = {0};
	int rc, status;

	rc = launch__run(&(struct launch__proc){ .argv = argv, .out = &text,
						 .err_mode = LAUNCH__STDERR_QUIET },
			 &status, &ignored);
	if (rc || status != 0) {
		rc = -ENOENT;
		dt_err_add(err, "job %s: not in %s and unknown to Slurm%s", id, registry,
			   ignored.count ? " (scontrol not found on PATH)" : "");
		goto out;
	}
	*out = (struct launch_job){ .id = strdup(id) };
	out->name = launch__scontrol_field(text.p, "JobName");
	out->run_dir = launch__scontrol_field(text.p, "WorkDir");
	out->log_path = launch__scontrol_field(text.p, "StdOut");
	if (!out->id) {
		rc = -ENOMEM;
		dt_err_add(err, "job %s: out of memory", id);
		launch_job_free(out);
	}
out:
	dt_buf_free(&text);
	return rc;
}

/* The registry's job name closest to a mistyped one, into buf */
static const char *closest_name(const struct launch_job *jobs, size_t n, const char *name,
				char *buf, size_t size)
{
	struct dt_buf names = {0};
	const char *got = NULL;
	size_t i;

	for (i = 0; i < n; i++)
		if (jobs[i].name && !strchr(jobs[i].name, '\n') &&
		    dt_buf_printf(&names, "%s%s", names.len ? "\n" : "", jobs[i].name))
			goto out;
	if (names.len)
		got = dt_closest_word(names.p, '\n', name, 3, buf, size);
out:
	dt_buf_free(&names);
	return got;
}

/* --- a sweep's tasks --- */

bool launch_is_sweep(const char *run_dir)
{
	char path[4200];

	snprintf(path, sizeof(path), "%s/sweep.json", run_dir ? run_dir : "");
	return run_dir && access(path, F_OK) == 0;
}

char *launch__task_output(const char *dir, const char *id)
{
	struct dt_buf b = {0};
	struct dirent *e;
	struct stat st;
	time_t newest = 0;
	DIR *d = opendir(dir);

	while (d && (e = readdir(d)) != NULL) {
		char path[4200];

		if (strncmp(e->d_name, "slurm-", 6) || !strstr(e->d_name, ".out"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (stat(path, &st) == 0 && (!b.p || st.st_mtime >= newest)) {
			newest = st.st_mtime;
			dt_buf_free(&b);
			dt_buf_puts(&b, path);
		}
	}
	if (d)
		closedir(d);
	if (!b.p)
		dt_buf_printf(&b, "%s/slurm-%s.out", dir, id);
	return b.p;
}

/* The job a task's run dir last ran as (<dir>/job_id: "<array>_<k>", or a
 * resume's own id) into *id, when the file says */
static void task_job_id(const char *dir, struct dt_buf *id)
{
	char path[4200], *text = NULL;
	size_t n;

	snprintf(path, sizeof(path), "%s/job_id", dir);
	if (dt_read_file(path, &text, NULL) != 0)
		return;
	n = strspn(text, "0123456789_");
	if (n > 0 && n < 40 && strcmp(text, id->p)) {
		text[n] = '\0';
		dt_buf_free(id);
		dt_buf_puts(id, text);
	}
	free(text);
}

int launch_sweep_task(const struct launch_job *sweep, long k, struct launch_job *out)
{
	struct dt_buf id = {0}, name = {0}, dir = {0};
	struct stat st;

	*out = (struct launch_job){0};
	if (!launch_is_sweep(sweep->run_dir) || k < 0)
		return -ENOENT;
	if (dt_buf_printf(&dir, "%s/task-%ld", sweep->run_dir, k) ||
	    dt_buf_printf(&id, "%s_%ld", sweep->id, k) ||
	    dt_buf_printf(&name, "%s_%ld", sweep->name ? sweep->name : sweep->id, k))
		goto oom;
	if (stat(dir.p, &st) != 0 || !S_ISDIR(st.st_mode)) {
		dt_buf_free(&dir);
		dt_buf_free(&id);
		dt_buf_free(&name);
		return -ENOENT;
	}
	task_job_id(dir.p, &id);
	*out = (struct launch_job){ .id = id.p, .name = name.p, .run_dir = dir.p,
				    .submitted = dt_strdup(sweep->submitted),
				    .cluster = dt_strdup(sweep->cluster) };
	out->log_path = id.p ? launch__task_output(dir.p, id.p) : NULL;
	if (!out->id || !out->log_path || (sweep->submitted && !out->submitted) || (sweep->cluster && !out->cluster)) {
		launch_job_free(out);
		return -ENOMEM;
	}
	return 0;
oom:
	dt_buf_free(&dir);
	dt_buf_free(&id);
	dt_buf_free(&name);
	return -ENOMEM;
}

/* arg "<sweep>_<k>", the sweep an id or a name in jobs: its task k. 1: arg
 * is no task of a sweep there. */
static int resolve_task(const struct launch_job *jobs, size_t n, const char *arg,
			struct launch_job *out, struct dt_err *err)
{
	const char *us = strrchr(arg, '_');
	char *sweep;
	size_t i;
	int rc = 1;

	if (!us || us == arg || !all_digits(us + 1) || strlen(us + 1) > 6)
		return 1;
	sweep = strndup(arg, (size_t)(us - arg));
	if (!sweep) {
		dt_err_add(err, "job %s: out of memory", arg);
		return -ENOMEM;
	}
	for (i = n; i-- > 0;) {
		if (strcmp(jobs[i].id, sweep) && (!jobs[i].name || strcmp(jobs[i].name, sweep)))
			continue;
		if (!launch_is_sweep(jobs[i].run_dir))
			break;
		rc = launch_sweep_task(&jobs[i], atol(us + 1), out);
		if (rc == -ENOENT)
			dt_err_add(err, "%s: sweep %s (%s) has no task %s; hint: `dtrain-submit status %s` lists its tasks",
				   arg, jobs[i].id, jobs[i].run_dir, us + 1, jobs[i].id);
		else if (rc)
			dt_err_add(err, "job %s: out of memory", arg);
		break;
	}
	free(sweep);
	return rc;
}

int launch_resolve_job(const char *arg, struct launch_job *out, struct dt_err *err)
{
	struct launch_job *jobs = NULL;
	size_t n = 0, i;
	char *registry = NULL;
	bool by_id = all_digits(arg);
	char shown[96], hint[96];
	int rc;

	*out = (struct launch_job){0};
	if (!*arg)
		return dt_err_add(err, "JOB: empty; hint: give a Slurm job id or a job name (see `dtrain-submit status`)");
	rc = launch_registry_path(&registry, err);
	if (!rc)
		rc = launch_registry_load(&jobs, &n, err);
	if (rc)
		goto out;
	launch_jobs_here(jobs, &n, NULL); /* job 1 of another cluster is another job */
	/* The most recent entry wins: names repeat, and ids can after a Slurm
	 * controller is reset. */
	for (i = n; i-- > 0;) {
		if (by_id ? !strcmp(jobs[i].id, arg) : (jobs[i].name && !strcmp(jobs[i].name, arg))) {
			rc = job_copy(out, &jobs[i]);
			if (rc)
				dt_err_add(err, "job %s: out of memory", arg);
			goto out;
		}
	}
	if ((rc = resolve_task(jobs, n, arg, out, err)) <= 0)
		goto out;
	if (by_id) {
		rc = resolve_from_slurm(arg, registry, out, err);
		goto out;
	}
	rc = -ENOENT;
	launch__printable(arg, shown, sizeof(shown));
	if (closest_name(jobs, n, arg, hint, sizeof(hint)))
		dt_err_add(err, "\"%s\": no job of that name in %s (did you mean \"%s\"?)", shown, registry,
			   hint);
	else
		dt_err_add(err, "\"%s\": no job of that name in %s; hint: `dtrain-submit status` lists your jobs",
			   shown, registry);
out:
	launch_jobs_free(jobs, n);
	free(registry);
	return rc;
}
