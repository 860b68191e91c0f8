/*
 * submit.c - what `dtrain-submit submit` and `validate` do: plan in memory, then
 * create the run dir, sbatch, record.
 *
 * The run dir appears whole or not at all: it is built as a sibling temp dir
 * ".<base>.tmp-<pid>" (spec.json, job.sh, each fsynced), then renamed into
 * place with RENAME_NOREPLACE, so two submits never share a run dir and a
 * crash leaves at most a dot-dir. If sbatch refuses the job the run dir is
 * removed again.
 *
 * Sections: files, syntax check, plan, run dir, submit. The commands that
 * use it are in submit_cmd.c.
 */
#include "launcher/launch.h"
#include "launcher/internal.h"
#include "base/err.h"
#include "base/io.h"
#include "base/path.h"
#include "base/str.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_RUN_DIR_SUFFIX 1000

/* --- files --- */

int launch__write_new(const char *path, const void *data, size_t len, int mode)
{
	int fd, rc;

	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	rc = dt_write_all(fd, data, len);
	if (!rc)
		rc = dt_fsync_fd(fd);
	if (close(fd) < 0 && !rc)
		rc = -errno;
	return rc;
}


/* The parent directory of an absolute path, into a new string. */
static char *parent_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

/* --- syntax check --- */

int launch_check_syntax(const char *script, struct dt_err *err)
{
	const char *argv[] = { "bash", "-n", NULL };
	struct dt_buf msg = {0};
	char *line, *save = NULL;
	int rc, status;

	rc = launch__run(&(struct launch__proc){ .argv = argv, .in = script,
						 .in_len = strlen(script),
						 .err_mode = LAUNCH__STDERR_CAPTURE, .err = &msg },
			 &status, err);
	if (rc)
		goto out;
	if (status == 0)
		goto out; /* at most warnings */
	rc = -EINVAL;
	for (line = msg.p ? strtok_r(msg.p, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		const char *at = strstr(line, "line ");
		long n = at ? strtol(at + 5, NULL, 10) : 0;
		const char *l = script;
		char shown[160];

		dt_err_add(err, "batch script: %s", line);
		/* Show the script line bash means: it is a setup line. */
		while (n > 1 && l && (l = strchr(l, '\n')) != NULL) {
			l++;
			n--;
		}
		if (at && l && n == 1 && strspn(l, " \t") < strcspn(l, "\n")) {
			char *copy = strndup(l, strcspn(l, "\n"));

			if (copy)
				dt_err_add(err, "batch script: the line is: %s",
					   launch__printable(copy, shown, sizeof(shown)));
			free(copy);
		}
	}
	if (!msg.len)
		dt_err_add(err, "batch script: bash -n failed (exit %d)", status);
	dt_err_add(err, "hint: only `setup` lines (of the job spec and the site file) are shell; check their quotes and brackets");
out:
	dt_buf_free(&msg);
	return rc;
}

/* --- plan --- */

int launch_pick_run_dir(const char *runs_root, const char *name, time_t now,
			char **out, struct dt_err *err)
{
	struct dt_buf base = {0}, cand = {0};
	char stamp[32];
	struct tm tm;
	struct stat st;
	int rc = 0, k;

	*out = NULL;
	if (!localtime_r(&now, &tm) || !strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm))
		return dt_err_add(err, "run_dir: cannot format the submit time");
	rc = dt_buf_printf(&base, "%s/%s-%s", runs_root, name, stamp);
	for (k = 1; !rc && k <= MAX_RUN_DIR_SUFFIX; k++) {
		dt_buf_free(&cand);
		rc = k == 1 ? dt_buf_puts(&cand, base.p) : dt_buf_printf(&cand, "%s-%d", base.p, k);
		if (rc)
			break;
		if (lstat(cand.p, &st) < 0 && errno == ENOENT) {
			*out = cand.p;
			cand.p = NULL;
			goto out;
		}
	}
	if (!rc) {
		rc = -EEXIST;
		dt_err_add(err, "run_dir: \"%s\" and %d more like it exist; hint: set run_dir, or clean up %s",
			   base.p, MAX_RUN_DIR_SUFFIX - 1, runs_root);
	}
out:
	if (rc == -ENOMEM)
		dt_err_add(err, "run_dir: out of memory");
	dt_buf_free(&cand);
	dt_buf_free(&base);
	return rc;
}

/* Render job.sh and spec.json for the run dir now in p->spec.run_dir. */
static int plan_render(struct launch_plan *p, struct dt_err *err)
{
	int rc;

	dt_buf_free(&p->script);
	dt_buf_free(&p->spec_json);
	rc = launch_render_script(&p->spec, &p->site, p->spec.run_dir, p->dtrain_run,
				  &p->script, err);
	if (!rc)
		rc = launch_check_syntax(dt_buf_str(&p->script), err);
	if (!rc && spec_dump(&p->spec, &p->spec_json)) {
		rc = -ENOMEM;
		dt_err_add(err, "spec.json: out of memory");
	}
	return rc;
}

/* A failure of the site or spec module is an invalid input (exit 3) unless
 * it is memory. */
static int input_error(int rc, const char *what, const char *path, struct dt_err *err)
{
	if (err->count == 0)
		dt_err_add(err, "%s: %s: %s", path ? path : what, what, strerror(-rc));
	return rc == -ENOMEM ? rc : -EINVAL;
}

/* The spec's data sets against its model, as dtrain-run would open them
 * (`dtrain-run --check-data`, beside dtrain-submit, given the resolved
 * spec on stdin): files that do not exist or are not readable, data of the
 * wrong kind (a table for a GPT, a token stream for an MLP), features,
 * classes or vocabulary that do not fit, fewer samples than a global
 * batch. Skipped with --no-data-check (data on the compute nodes' file
 * systems only) or where dtrain-run cannot run here (killed, a library it
 * lacks on a login node). 0, or -EINVAL with dtrain-run's lines. */
static int check_data(const struct launch_plan *p, const char *exe_dir, const char *spec_path,
		      struct dt_err *err)
{
	char tool[4200];
	const char *argv[] = { tool, "--check-data", "/dev/stdin", NULL };
	struct dt_buf json = {0}, said = {0};
	struct dt_err ignored = {0};
	const char *line;
	int status = -1, rc = 0;

	snprintf(tool, sizeof(tool), "%s/dtrain-run", exe_dir);
	if (access(tool, X_OK) != 0)
		return 0;
	if (spec_dump(&p->spec, &json)) {
		dt_err_add(err, "%s: out of memory", spec_path);
		return -ENOMEM;
	}
	if (launch__run(&(struct launch__proc){ .argv = argv, .in = json.p, .in_len = json.len,
						.out = &said, .err_mode = LAUNCH__STDERR_CAPTURE,
						.err = &said, .timeout_s = 120 },
			&status, &ignored) == 0 &&
	    (status == DT_EXIT_FAIL || status == DT_EXIT_SPEC)) {
		for (line = dt_buf_str(&said); *line; line += strcspn(line, "\n") + (line[strcspn(line, "\n")] != 0)) {
			int n = (int)strcspn(line, "\n");
			const char *text = !strncmp(line, "dtrain-run: ", 12) ? line + 12 : line;

			n -= (int)(text - line);
			if (n > 0 && !strncmp(text, "hint: ", 6))
				dt_err_add(err, "%.*s", n, text);
			else if (n > 0) /* a line naming its key (checkpoint.init_from) keeps it */
				dt_err_add(err, "%s: %s%.*s", spec_path,
					   strncmp(text, "checkpoint.", 11) ? "data: " : "", n, text);
		}
		if (status == DT_EXIT_FAIL) /* not readable here */
			dt_err_add(err, "hint: the data sets are opened here as dtrain-run will open them; where they are on the compute nodes only, give --no-data-check");
		rc = -EINVAL;
	}
	dt_buf_free(&json);
	dt_buf_free(&said);
	return rc;
}

/* The run dir of a new run: the spec's, which must not exist, else one
 * named after the job under the site's runs_root. */
static int plan_run_dir(struct launch_plan *p, struct dt_err *err)
{
	const char *root = p->site.runs_root;
	struct dt_buf def = {0};
	struct stat st;
	int rc;

	if (p->spec.run_dir && lstat(p->spec.run_dir, &st) == 0) {
		dt_err_add(err, "run_dir: \"%s\" already exists; hint: every submit needs a new run dir: --set run_dir=<new path>, or leave run_dir unset to get <runs_root>/<name>-<time>; to continue the run in it: dtrain-submit resume %s",
			   p->spec.run_dir, p->spec.run_dir);
		return -EEXIST;
	}
	if (p->spec.run_dir)
		return 0;
	if (!root) {
		/* site.h promises a default; be safe if it is missing. */
		const char *home = getenv("HOME");

		if (!home || dt_buf_printf(&def, "%s/dtrain-runs", home))
			return dt_err_add(err, "run_dir: no runs_root in the site policy and no HOME; hint: set run_dir");
		root = def.p;
	}
	p->run_dir_auto = true;
	rc = launch_pick_run_dir(root, p->spec.name, p->now, &p->spec.run_dir, err);
	dt_buf_free(&def);
	return rc;
}

/* Two paths name the same directory */
static bool same_dir(const char *a, const char *b)
{
	struct stat sa, sb;

	return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

int launch__after_set(const char *after, char **kv, struct dt_err *err)
{
	struct launch_job job;
	int rc;

	*kv = NULL;
	rc = launch_resolve_job(after, &job, err);
	if (rc) {
		dt_err_add(err, "--after %s: no such job to wait for", after);
		return rc == -ENOENT ? -EINVAL : rc;
	}
	{
		struct dt_buf b = {0};

		if (dt_buf_printf(&b, "resources.dependency=afterok:%s", job.id)) {
			dt_err_add(err, "--after: out of memory");
			rc = -ENOMEM;
		}
		*kv = b.p;
	}
	launch_job_free(&job);
	return rc;
}

/* Does a --set give key? */
static bool sets_key(const struct launch_args *a, const char *key)
{
	size_t i, n = strlen(key);

	for (i = 0; i < a->n_sets; i++)
		if (!strncmp(a->sets[i], key, n) && a->sets[i][n] == '=')
			return true;
	return false;
}

/* The --set values, with --after's at the end (the last wins). *owned is
 * what the caller frees (the array and --after's value). */
static int plan_sets(const struct launch_args *a, const char ***sets, size_t *n, char **after,
		     struct dt_err *err)
{
	int rc;

	*sets = a->sets;
	*n = a->n_sets;
	*after = NULL;
	if (!a->after)
		return 0;
	rc = launch__after_set(a->after, after, err);
	if (rc)
		return rc;
	*sets = malloc((a->n_sets + 1) * sizeof(**sets));
	if (!*sets) {
		dt_err_add(err, "--after: out of memory");
		return -ENOMEM;
	}
	if (a->n_sets)
		memcpy(*sets, a->sets, a->n_sets * sizeof(**sets));
	(*sets)[a->n_sets] = *after;
	*n = a->n_sets + 1;
	return 0;
}

int launch_plan(const struct launch_args *a, struct launch_plan *p, struct dt_err *err)
{
	bool resume = a->cmd == LAUNCH_RESUME;
	struct dt_buf resumed = {0};
	const char *spec_path, *site_path, *user_site;
	const char **sets = NULL;
	struct spec_policy policy;
	struct spec_input in;
	char *exe_dir = NULL, *after = NULL;
	size_t n_sets = 0;
	int rc;

	*p = (struct launch_plan){0};
	site_find(a->site_path, &site_path, &user_site);
	rc = site_load_policy(site_path, user_site, &p->site, err);
	if (!site_path)
		site_path = user_site; /* for the message below */
	if (rc) {
		rc = input_error(rc, "site file", site_path, err);
		goto out;
	}
	site_policy(&p->site, &policy);
	if (resume && dt_buf_printf(&resumed, "%s/spec.json", a->run_dir)) {
		rc = -ENOMEM;
		goto out;
	}
	spec_path = resume ? resumed.p : a->spec_path;
	rc = plan_sets(a, &sets, &n_sets, &after, err);
	if (rc)
		goto out;
	/* a run dir's spec.json was resolved (and its env checked) before */
	in = (struct spec_input){ .path = spec_path, .policy = &policy, .sets = sets,
				  .n_sets = n_sets, .resolved = resume, .ntasks = a->ntasks };
	rc = spec_resolve(&in, &p->spec, err);
	if (rc) {
		if (resume && access(spec_path, F_OK) != 0)
			dt_err_add(err, "%s: not a run dir (no spec.json); hint: `dtrain-submit status` lists your jobs' run dirs",
				   a->run_dir);
		rc = input_error(rc, "job spec", spec_path, err);
		goto out;
	}
	if (resume && !same_dir(p->spec.run_dir, a->run_dir)) {
		rc = dt_err_add(err, "%s: run_dir: a resume continues %s; hint: to start a new run from its checkpoints, submit the spec with --set checkpoint.resume=%s",
				spec_path, a->run_dir, a->run_dir);
		goto out;
	}
	/* what the previous job waited for is over (or gone from Slurm) */
	if (resume && !a->after && !sets_key(a, "resources.dependency")) {
		free(p->spec.resources.dependency);
		p->spec.resources.dependency = NULL;
	}
	exe_dir = dt_exe_dir();
	if (!exe_dir || !(p->dtrain_run = malloc(strlen(exe_dir) + sizeof("/dtrain-run")))) {
		rc = -ENOMEM;
		dt_err_add(err, "cannot find the directory of dtrain-submit");
		goto out;
	}
	sprintf(p->dtrain_run, "%s/dtrain-run", exe_dir);
	if (!a->no_data_check)
		rc = check_data(p, exe_dir, spec_path, err);
	if (rc)
		goto out;
	p->now = time(NULL);
	if (!resume) /* a resume continues the run dir that is there */
		rc = plan_run_dir(p, err);
	if (rc)
		goto out;
	rc = plan_render(p, err);
out:
	if (sets != a->sets)
		free(sets);
	free(after);
	free(exe_dir);
	dt_buf_free(&resumed);
	return rc;
}

void launch_plan_free(struct launch_plan *p)
{
	spec_free(&p->spec);
	site_free(&p->site);
	free(p->dtrain_run);
	dt_buf_free(&p->script);
	dt_buf_free(&p->spec_json);
	*p = (struct launch_plan){0};
}

/* --- run dir --- */

/* Build the run dir under a temp name and rename it into place. -EEXIST
 * when the run dir appeared meanwhile. */
static int create_run_dir(const struct launch_plan *p, struct dt_err *err)
{
	const char *run_dir = p->spec.run_dir;
	struct dt_buf tmp = {0}, file = {0};
	char *parent = parent_of(run_dir);
	bool made = false;
	int rc;

	if (!parent) {
		rc = -ENOMEM;
		goto out;
	}
	rc = dt_buf_printf(&tmp, "%s/.%s.tmp-%ld", parent, strrchr(run_dir, '/') + 1, (long)getpid());
	if (rc)
		goto out;
	if (mkdir(tmp.p, 0755) < 0) {
		rc = -errno;
		/* A temp dir with our pid is from a dead process: ours to remove. */
		if (rc == -EEXIST && dt_remove_tree(tmp.p) == 0)
			rc = mkdir(tmp.p, 0755) < 0 ? -errno : 0;
		if (rc) {
			dt_err_add(err, "%s: cannot create: %s", tmp.p, strerror(-rc));
			goto out;
		}
	}
	made = true;
	rc = dt_buf_printf(&file, "%s/spec.json", tmp.p);
	if (!rc)
		rc = launch__write_new(file.p, p->spec_json.p, p->spec_json.len, 0644);
	if (!rc) {
		dt_buf_free(&file);
		rc = dt_buf_printf(&file, "%s/job.sh", tmp.p);
	}
	if (!rc)
		rc = launch__write_new(file.p, p->script.p, p->script.len, 0755);
	if (!rc)
		rc = dt_fsync_path(tmp.p, true);
	if (rc) {
		dt_err_add(err, "%s: cannot write: %s", file.p ? file.p : tmp.p, strerror(-rc));
		goto out;
	}
	if (renameat2(AT_FDCWD, tmp.p, AT_FDCWD, run_dir, RENAME_NOREPLACE) < 0) {
		rc = -errno;
		/* File systems without RENAME_NOREPLACE: check, then rename (the
		 * rename would replace only an empty directory). */
		if (rc == -EINVAL || rc == -ENOSYS) {
			struct stat st;

			if (lstat(run_dir, &st) == 0)
				rc = -EEXIST;
			else
				rc = rename(tmp.p, run_dir) < 0 ? -errno : 0;
		}
		if (rc && rc != -EEXIST)
			dt_err_add(err, "%s: cannot rename into place: %s", run_dir, strerror(-rc));
		if (rc)
			goto out;
	}
	made = false;
	rc = dt_fsync_path(parent, true);
	if (rc)
		dt_err_add(err, "%s: cannot sync: %s", parent, strerror(-rc));
out:
	if (rc == -ENOMEM)
		dt_err_add(err, "%s: out of memory", run_dir);
	if (made)
		dt_remove_tree(tmp.p);
	dt_buf_free(&file);
	dt_buf_free(&tmp);
	free(parent);
	return rc;
}

/* --- submit --- */

/* sbatch --parsable prints "<id>" or "<id>;<cluster>". */
static char *parse_job_id(const char *out)
{
	size_t n = strspn(out, "0123456789");

	if (n == 0 || (out[n] != ';' && out[n] != '\n' && out[n] != '\0'))
		return NULL;
	return strndup(out, n);
}

/* Everything that can be checked before creating anything: sbatch on
 * PATH, dtrain-run runnable, the run dir's parent there. *sbatch and
 * *parent are the caller's to free, also on failure. */
static int check_before_create(const struct launch_plan *p, char **sbatch, char **parent,
			       struct dt_err *err)
{
	int rc;

	*sbatch = launch__which("sbatch");
	if (!*sbatch) {
		dt_err_add(err, "sbatch: not found on PATH; hint: install the Slurm client tools or fix PATH");
		return -ENOENT;
	}
	if (access(p->dtrain_run, X_OK) < 0) {
		rc = -errno;
		dt_err_add(err, "%s: %s; hint: dtrain-run is installed next to dtrain-submit, and every node must see it at that path",
			   p->dtrain_run, strerror(-rc));
		return rc;
	}
	*parent = parent_of(p->spec.run_dir);
	if (!*parent)
		return -ENOMEM;
	rc = dt_mkdirs(*parent, 0755);
	if (rc)
		dt_err_add(err, "%s: cannot create the directory: %s", *parent, strerror(-rc));
	return rc;
}

/* Create the run dir; a run dir that another submit took just now is left
 * to it, and an automatic one moves on to the next free name (the script
 * names the run dir, so it is rendered again). */
static int claim_run_dir(struct launch_plan *p, const char *parent, struct dt_err *err)
{
	int rc, attempt;

	for (attempt = 0; ; attempt++) {
		rc = create_run_dir(p, err);
		if (rc != -EEXIST)
			break;
		if (!p->run_dir_auto || attempt >= MAX_RUN_DIR_SUFFIX) {
			dt_err_add(err, "run_dir: \"%s\" already exists; hint: --set run_dir=<new path>",
				   p->spec.run_dir);
			break;
		}
		/* Another submit took the name just now: take the next one. */
		free(p->spec.run_dir);
		p->spec.run_dir = NULL;
		rc = launch_pick_run_dir(p->site.runs_root ? p->site.runs_root : parent,
					 p->spec.name, p->now, &p->spec.run_dir, err);
		if (!rc)
			rc = plan_render(p, err);
		if (rc)
			break;
	}
	return rc;
}

/* sbatch's words when it reached no controller: no configuration at all
 * (no slurm.conf, no DNS SRV record), or a controller that does not answer */
static bool no_controller(const char *said)
{
	return strstr(said, "Could not establish a configuration source") ||
	       strstr(said, "DNS SRV lookup failed") ||
	       strstr(said, "Unable to contact slurm controller") ||
	       strstr(said, "Unable to establish a connection") || strstr(said, "Connection refused");
}

/* sbatch --parsable <run_dir>/job.sh, the job id into *id (caller frees);
 * the codes of launch__sbatch_record. */
static int run_sbatch(const struct site *site, const char *run_dir, char **id, struct dt_err *err)
{
	struct dt_buf job_sh = {0}, out = {0}, said = {0};
	char *sbatch = launch__which("sbatch"), shown[96];
	int rc, status;

	*id = NULL;
	if (!sbatch) {
		dt_err_add(err, "sbatch: not found on PATH; hint: install the Slurm client tools or fix PATH");
		return -ENOENT;
	}
	rc = dt_buf_printf(&job_sh, "%s/job.sh", run_dir);
	if (rc)
		goto out;
	{
		const char *argv[] = { sbatch, "--parsable", job_sh.p, NULL };

		/* No SBATCH_* or SLURM_* of the submitting shell may override
		 * what the job script says (the site's locks, the resolved
		 * spec); sbatch also passes its environment on to the job,
		 * where bash acts on BASH_ENV, exported functions and the
		 * loader on LD_* before the script's first line: those and
		 * what the site locks stay here (launch__env_dropped). */
		rc = launch__run(&(struct launch__proc){ .argv = argv, .out = &out,
							 .err_mode = LAUNCH__STDERR_CAPTURE,
							 .err = &said, .slurm_env_off = true,
							 .locks = site },
				 &status, err);
	}
	fputs(dt_buf_str(&said), stderr); /* sbatch's own words first */
	if (!rc && status != 0) {
		dt_err_add(err, "sbatch refused the job (exit %d, its message is above); nothing was submitted",
			   status);
		if (no_controller(dt_buf_str(&said)))
			dt_err_add(err, "hint: sbatch reached no Slurm controller (SLURM_CONF=%s); to use the local cluster of this machine: eval \"$(bash site/cluster.sh up)\" in the dtrain source tree (make cluster-up starts it and prints the export SLURM_CONF=... line)",
				   getenv("SLURM_CONF") ? getenv("SLURM_CONF") : "not set");
		rc = -EIO;
	} else if (!rc && !(*id = parse_job_id(dt_buf_str(&out)))) {
		dt_err_add(err, "sbatch: unexpected output \"%s\"; the job may be queued: check squeue; its run dir %s is kept",
			   launch__printable(dt_buf_str(&out), shown, sizeof(shown)), run_dir);
		rc = -EPROTO;
	} else if (rc) {
		rc = -EIO;
	}
out:
	if (rc == -ENOMEM)
		dt_err_add(err, "sbatch: out of memory");
	dt_buf_free(&job_sh);
	dt_buf_free(&out);
	dt_buf_free(&said);
	free(sbatch);
	return rc;
}

/* The job is queued already, so a problem here is a warning, not a failed
 * submit. */
static void record_job(const struct launch_plan *p, struct launch_job *job, struct dt_err *warn)
{
	struct dt_buf path = {0}, line = {0};
	char stamp[32];
	struct tm tm;
	int rc;

	gmtime_r(&p->now, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
	job->name = dt_strdup(p->spec.name);
	job->run_dir = dt_strdup(p->spec.run_dir);
	job->submitted = strdup(stamp);
	if (dt_buf_printf(&path, "%s/slurm-%s.out", p->spec.run_dir, job->id) == 0) {
		job->log_path = path.p;
		path = (struct dt_buf){0};
	}
	if (dt_buf_printf(&path, "%s/job_id", p->spec.run_dir) ||
	    dt_buf_printf(&line, "%s\n", job->id)) {
		dt_err_add(warn, "%s/job_id: out of memory", p->spec.run_dir);
	} else if ((rc = dt_write_file_atomic(path.p, line.p, line.len, 0644)) != 0) {
		dt_err_add(warn, "%s: cannot write: %s", path.p, strerror(-rc));
	}
	if (!job->name || !job->run_dir || !job->submitted)
		dt_err_add(warn, "job %s: out of memory; not recorded in the job registry", job->id);
	else
		launch_registry_append(job, warn);
	dt_buf_free(&line);
	dt_buf_free(&path);
}

int launch__sbatch_record(const struct launch_plan *p, struct launch_job *job,
			  struct dt_err *warn, struct dt_err *err)
{
	char *id = NULL;
	int rc = run_sbatch(&p->site, p->spec.run_dir, &id, err);

	if (rc)
		return rc;
	/* Accepted: from here on problems are warnings. */
	job->id = id;
	record_job(p, job, warn);
	return 0;
}

int launch_submit(struct launch_plan *p, struct launch_job *job,
		  struct dt_err *warn, struct dt_err *err)
{
	char *sbatch = NULL, *parent = NULL;
	int rc;

	*job = (struct launch_job){0};
	rc = check_before_create(p, &sbatch, &parent, err);
	if (!rc)
		rc = claim_run_dir(p, parent, err);
	if (rc)
		goto out;
	rc = launch__sbatch_record(p, job, warn, err);
	if (rc && rc != -EPROTO) /* refused: leave nothing behind */
		dt_remove_tree(p->spec.run_dir);
out:
	if (rc == -ENOMEM)
		dt_err_add(err, "submit: out of memory");
	if (rc)
		launch_job_free(job);
	free(parent);
	free(sbatch);
	return rc;
}
