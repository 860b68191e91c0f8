/*
 * render.c - the batch script of a job: #SBATCH options, then a bash body
 * that exports the environment, runs the setup lines, starts dtrain-run on
 * every task with srun, and requeues the job when dtrain-run asks for it.
 *
 * Trust: sbatch reads #SBATCH lines without a shell, but a space, quote or
 * newline would still split or end an option, and a newline would start a
 * shell line. So a value in an #SBATCH line or a comment is checked and
 * refused, never escaped. In the body every value is one single-quoted word
 * (dt_shell_quote); only `setup` lines are shell, by definition.
 *
 * Sections: text helpers, checks, #SBATCH header, body, the public function.
 */
#include "launcher/launch.h"
#include "launcher/internal.h"
#include "launcher/render.h"
#include "base/str.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef LAUNCH_VERSION_STR
#define LAUNCH_VERSION_STR "unknown"
#endif

/* Seconds srun may outlive the end of its step by more than the KillWait
 * Slurm gives the step's ranks (slurmctld's value, read when needed). */
#define GUARD_S 5

/* --- text helpers --- */

void launch__print_warnings(const struct dt_err *warn)
{
	const char *p = warn->msg;

	while (warn->count && *p) {
		size_t n = strcspn(p, "\n");

		fprintf(stderr, "dtrain-submit: warning: %.*s\n", (int)n, p);
		p += n + (p[n] == '\n');
	}
}

const char *launch__printable(const char *s, char *buf, size_t size)
{
	size_t i, n = 0;

	if (size == 0)
		return "";
	for (i = 0; s[i] && n + 1 < size; i++) {
		unsigned char c = (unsigned char)s[i];

		buf[n++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
	}
	buf[n] = '\0';
	if (s[i] && size > 4)
		memcpy(buf + size - 4, "...", 4);
	return buf;
}

/* Append s as one single-quoted shell word. */
static void put_quoted(struct render *r, const char *s)
{
	if (!r->rc)
		r->rc = dt_shell_quote(r->b, s);
}

/* --- checks --- */

/* Why v cannot be an #SBATCH value, or NULL when it can. */
static const char *sbatch_refusal(const char *v)
{
	if (!*v)
		return "nothing (it is empty)";
	for (; *v; v++) {
		unsigned char c = (unsigned char)*v;

		if (c == '\n' || c == '\r')
			return "a line break";
		if (c < 0x20 || c == 0x7f)
			return "a control character";
		switch (c) {
		case ' ':
			return "a space";
		case '\'':
		case '"':
			return "a quote";
		case '$':
			return "'$'";
		case '`':
			return "a backtick";
		case ';':
			return "';'";
		case '\\':
			return "a backslash";
		}
	}
	return NULL;
}

/* Refuse (count and report) a value that cannot go into an #SBATCH line.
 * origin is "" for job-spec fields, "<site file>: " for site values. */
static bool sbatch_ok(struct render *r, const char *origin, const char *field, const char *v)
{
	const char *why = sbatch_refusal(v);
	char shown[96];

	if (!why)
		return true;
	r->bad++;
	dt_err_add(r->err, "%s%s: cannot go into an #SBATCH line: contains %s (got \"%s\")",
		   origin, field, why, launch__printable(v, shown, sizeof(shown)));
	return false;
}

/* Environment names: what POSIX export accepts, minus what this script or
 * bash itself owns (bash refuses to assign its read-only variables). */
static const char *env_name_refusal(const char *k)
{
	static const char *const bash_readonly[] = {
		"BASHOPTS", "BASH_VERSINFO", "EUID", "PPID", "SHELLOPTS", "UID",
	};
	const char *p;
	size_t i;

	if (!((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || *k == '_'))
		return "a variable name must match [A-Za-z_][A-Za-z0-9_]*";
	for (p = k + 1; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		      (*p >= '0' && *p <= '9') || *p == '_'))
			return "a variable name must match [A-Za-z_][A-Za-z0-9_]*";
	if (!strncmp(k, "dtrain_", 7))
		return "names starting with dtrain_ belong to the batch script";
	if (!strcmp(k, "DTRAIN_RUN_DIR"))
		return "dtrain-submit sets DTRAIN_RUN_DIR to the run dir";
	for (i = 0; i < sizeof(bash_readonly) / sizeof(bash_readonly[0]); i++)
		if (!strcmp(k, bash_readonly[i]))
			return "bash does not let a script set this variable";
	return NULL;
}

static void check_env(struct render *r, const char *origin, const struct spec_map *env)
{
	char shown[96];
	size_t i;

	for (i = 0; i < env->n; i++) {
		const char *why = env_name_refusal(env->key[i]);

		if (!why)
			continue;
		r->bad++;
		dt_err_add(r->err, "%senv: \"%s\": %s",
			   origin, launch__printable(env->key[i], shown, sizeof(shown)), why);
	}
}

static void check_run_dir(struct render *r)
{
	char shown[96];

	if (!sbatch_ok(r, "", "run_dir", r->run_dir))
		return;
	if (r->run_dir[0] != '/') {
		r->bad++;
		dt_err_add(r->err, "run_dir: must be an absolute path (got \"%s\")",
			   launch__printable(r->run_dir, shown, sizeof(shown)));
	} else if (strchr(r->run_dir, '%')) {
		r->bad++;
		dt_err_add(r->err, "run_dir: contains '%%', which Slurm expands in --output file names (got \"%s\")",
			   launch__printable(r->run_dir, shown, sizeof(shown)));
	}
}

/* --- #SBATCH header --- */

static void sbatch_str(struct render *r, const char *opt, const char *field, const char *v)
{
	if (v && sbatch_ok(r, "", field, v))
		launch__render_put(r, "#SBATCH --%s=%s\n", opt, v);
}

static void render_header(struct render *r)
{
	const struct spec_resources *res = &r->spec->resources;
	const struct spec_preemption *pre = &r->spec->preemption;
	char field[64];
	size_t i;

	launch__render_put(r, "#!/bin/bash\n");
	if (!r->spec->name) {
		r->bad++;
		dt_err_add(r->err, "name: a job needs a name");
	}
	sbatch_str(r, "job-name", "name", r->spec->name);
	if (res->nodes.min == res->nodes.max) {
		launch__render_put(r, "#SBATCH --nodes=%ld\n", res->nodes.min);
		launch__render_put(r, "#SBATCH --ntasks-per-node=%ld\n", res->tasks_per_node);
		launch__render_put(r, "#SBATCH --cpus-per-task=%ld\n", res->cpus_per_task);
	} else {
		/* Slurm grants as many as it can without delaying the start. A
		 * job's task count becomes the one it last ran with and would
		 * hold its next starts to that many nodes: so the CPUs are
		 * asked per node, and srun sets the tasks. */
		launch__render_put(r, "#SBATCH --nodes=%ld-%ld\n", res->nodes.min, res->nodes.max);
		launch__render_put(r, "#SBATCH --mincpus=%ld\n", res->tasks_per_node * res->cpus_per_task);
	}
	if (res->gpus_per_node > 0)
		launch__render_put(r, "#SBATCH --gpus-per-node=%ld\n", res->gpus_per_node);
	if (res->mem_per_node_mb > 0)
		launch__render_put(r, "#SBATCH --mem=%ldM\n", res->mem_per_node_mb);
	if (res->time_s > 0) {
		char t[64];

		spec_format_time(res->time_s, t, sizeof(t));
		sbatch_str(r, "time", "resources.time", t);
	}
	if (res->time_min_s > 0) { /* backfill may start the job with less */
		char t[64];

		spec_format_time(res->time_min_s, t, sizeof(t));
		sbatch_str(r, "time-min", "resources.time_min", t);
	}
	sbatch_str(r, "partition", "resources.partition", res->partition);
	sbatch_str(r, "account", "resources.account", res->account);
	sbatch_str(r, "qos", "resources.qos", res->qos);
	sbatch_str(r, "constraint", "resources.constraint", res->constraint);
	if (res->dependency && sbatch_ok(r, "", "resources.dependency", res->dependency)) {
		launch__render_put(r, "#SBATCH --dependency=%s\n", res->dependency);
		/* a predecessor that failed: end, rather than wait for ever */
		launch__render_put(r, "#SBATCH --kill-on-invalid-dep=yes\n");
	}
	check_run_dir(r);
	launch__render_put(r, "#SBATCH --chdir=%s\n", r->run_dir);
	launch__render_put(r, "#SBATCH --output=%s/slurm-%%j.out\n", r->run_dir);
	launch__render_put(r, "#SBATCH --open-mode=append\n");
	launch__render_put(r, "#SBATCH --requeue\n");
	/* No "B:" prefix: the warning goes to the job steps (dtrain-run), not to
	 * this shell. */
	if (pre->signal && sbatch_ok(r, "", "preemption.signal", pre->signal))
		launch__render_put(r, "#SBATCH --signal=%s@%ld\n", pre->signal, pre->lead_seconds);
	for (i = 0; i < r->site->sbatch_extra.n; i++) {
		const char *opt = r->site->sbatch_extra.v[i];

		snprintf(field, sizeof(field), "sbatch_extra[%zu]", i);
		if (!sbatch_ok(r, r->site_origin, field, opt))
			continue;
		if (opt[0] != '-') {
			r->bad++;
			dt_err_add(r->err, "%s%s: an #SBATCH option starts with '-' (got \"%s\"); hint: write \"--option=value\"",
				   r->site_origin, field, opt);
			continue;
		}
		launch__render_put(r, "#SBATCH %s\n", opt);
	}
}

/* --- body --- */

/* export lines; again: after the setup lines, through the builtin (a
 * setup line may have defined a function "export"), ending the job if one
 * cannot be set (a setup line made it read-only). */
static void render_env(struct render *r, const struct spec_map *env, bool again)
{
	size_t i;

	for (i = 0; i < env->n; i++) {
		if (env_name_refusal(env->key[i]))
			continue; /* reported by check_env() */
		launch__render_put(r, "%sexport %s=", again ? "builtin " : "", env->key[i]);
		put_quoted(r, env->val[i] ? env->val[i] : "");
		if (again)
			launch__render_put(r, " || { echo \"dtrain: a setup line made %s read-only; the site sets it\" >&2; exit 1; }",
			                   env->key[i]);
		launch__render_put(r, "\n");
	}
}

static void render_setup(struct render *r, const char *title, const struct spec_strs *lines)
{
	size_t i;

	if (lines->n == 0)
		return;
	launch__render_put(r, "# %s\n", title);
	for (i = 0; i < lines->n; i++)
		launch__render_put(r, "%s\n", lines->v[i]);
}

/* The site file(s) as the header names them: "<system>, with <user>". */
static void site_files_shown(const struct site *site, char *buf, size_t size)
{
	launch__printable(site->path ? site->path : "none", buf, size);
	if (site->user_path) { /* a user's file under the system's */
		size_t at = strlen(buf);

		snprintf(buf + at, size - at, ", with ");
		at = strlen(buf);
		launch__printable(site->user_path, buf + at, size - at);
	}
}

/* The comment that says where the script came from, so that nobody edits
 * it instead of the spec. */
static void render_preamble(struct render *r)
{
	char site_shown[256], name_shown[96];

	site_files_shown(r->site, site_shown, sizeof(site_shown));
	launch__printable(r->spec->name ? r->spec->name : "", name_shown, sizeof(name_shown));
	launch__render_put(r, "#\n"
	                      "# Generated by dtrain-submit %s for job \"%s\" from the resolved spec\n"
	                      "# %s/spec.json (site policy: %s).\n"
	                      "# Do not edit: change the spec and submit it again.\n"
	                      "#\n"
	                      "# Every value below that comes from the job spec or the site file is one\n"
	                      "# single-quoted shell word, except the `setup` lines, which are shell.\n",
	                   LAUNCH_VERSION_STR, name_shown, r->run_dir, site_shown);
	launch__render_put(r, "set -u\n\n");
}

/* --- the site's locked variables --- */

/* A name, or a name's prefix and '*': safe unquoted in a case pattern
 * (site_load refuses other entries). */
static bool env_word(const char *s)
{
	size_t n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_");

	return n > 0 && (!s[n] || (s[n] == '*' && !s[n + 1]));
}

/* One case line: the words of v (patterns when star, else exact names)
 * that env_word takes, then `then`; nothing when none. */
static void put_case(struct render *r, const struct spec_strs *v, bool locks, bool star,
		     const char *then)
{
	size_t i, n = 0;

	for (i = 0; i < v->n; i++) {
		const char *w = locks ? launch__env_lock(v->v[i]) : v->v[i];

		if (!w || !env_word(w) || (strchr(w, '*') != NULL) != star)
			continue;
		launch__render_put(r, "%s%s", n++ ? " | " : "\tcase $1 in ", w);
	}
	if (n)
		launch__render_put(r, ") %s ;; esac\n", then);
}

/* sbatch copies the submitting shell's environment into the job: every
 * variable the site locks is unset first, so that it comes only from the
 * site (its env, or its defaults in the spec's env). Slurm's own stay.
 * A second layer: dtrain-submit already hands sbatch an environment
 * without them (launch__env_dropped), since BASH_ENV, an exported
 * function or LD_PRELOAD act before this script's first line. */
static void render_shell_locks(struct render *r)
{
	const struct spec_strs *locked = &r->site->locked;
	bool any = false, all = false;
	size_t i;

	for (i = 0; i < locked->n; i++) {
		const char *e = launch__env_lock(locked->v[i]);

		any |= e != NULL;
		all |= e && !*e;
	}
	if (!any)
		return;
	launch__render_put(r, "# --- the site's locked variables: none from the submitting shell ---\n"
	                      "dtrain_locked() { # NAME: 0 when the site locks it (docs/site-admin.md)\n"
	                      "\tcase $1 in SLURM_* | SLURMD_*) return 1 ;; esac\n");
	put_case(r, locked, true, false, "return 0");
	put_case(r, &r->site->env_allow, false, false, "return 1");
	put_case(r, &r->site->env_allow, false, true, "return 1");
	if (all)
		launch__render_put(r, "\t# env.*: all but a login's own\n"
		                      "\tcase $1 in HOME | USER | LOGNAME | PATH | SHELL | TERM | LANG | LC_* | TZ | TMPDIR | PWD | SHLVL | HOSTNAME) return 1 ;; esac\n");
	else
		put_case(r, locked, true, true, "return 0");
	launch__render_put(r, "\treturn %d\n"
	                      "}\n"
	                      "for dtrain_v in $(compgen -e); do\n"
	                      "\t! dtrain_locked \"$dtrain_v\" || unset \"$dtrain_v\" 2>/dev/null || true\n"
	                      "done\n\n", all ? 0 : 1);
}

/* Slurm's variables and the first TERM trap, before the job's env can
 * shadow them or a SIGTERM can go unnoticed. */
static void render_slurm_view(struct render *r)
{
	launch__render_put(r, "# Slurm's view of this run, read before the job's env could shadow it.\n"
	                      "dtrain_job_id=\"${SLURM_JOB_ID:-}\"\n"
	                      "# a task of a job array (a sweep) is <array id>_<task>: one task's own job id\n"
	                      "# is the array's, which would requeue or cancel every task\n"
	                      "[ -z \"${SLURM_ARRAY_JOB_ID:-}\" ] || dtrain_job_id=\"${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID:-}\"\n"
	                      "readonly dtrain_job_id dtrain_restarts=\"${SLURM_RESTART_COUNT:-0}\"\n"
	                      "# when this start of the job began: dtrain-run reports its first step after a\n"
	                      "# resume against it\n"
	                      "export DTRAIN_JOB_START=\"$(date +%%s.%%N)\"\n"
	                      "# A SIGTERM (preemption, scancel) from here on is noted, and acted on\n"
	                      "# where this script can (below); the job step gets its own.\n"
	                      "dtrain_term=0\n"
	                      "trap 'dtrain_term=1' TERM\n\n");
}

/* The job spec's env, then the site's, so that the site wins. */
static void render_environment(struct render *r)
{
	launch__render_put(r, "# --- environment: the job spec's env, then the site's, so the site wins ---\n");
	render_env(r, &r->spec->env, false);
	if (r->site->env.n)
		launch__render_put(r, "# site\n");
	render_env(r, &r->site->env, false);
	launch__render_put(r, "export DTRAIN_RUN_DIR=");
	put_quoted(r, r->run_dir);
	launch__render_put(r, "\n\n");
}

/* The setup lines run with set +u (activate scripts read unset variables);
 * the site's env is set again after them so that they cannot change it. */
static void render_setup_lines(struct render *r)
{
	const struct spec *s = r->spec;
	const struct site *site = r->site;

	if (!site->setup.n && !s->setup.n)
		return;
	launch__render_put(r, "# --- setup: the site's lines, then the job spec's (shell, run as written) ---\n"
	                      "# set -u is off while they run: activate scripts (venv, conda, module)\n"
	                      "# often read variables that are not set.\n"
	                      "set +u\n");
	render_setup(r, "site setup", &site->setup);
	render_setup(r, "job setup", &s->setup);
	/* The empty line ends a last setup line that ends in a backslash. */
	launch__render_put(r, "\nset -u\n\n");
	if (site->env.n) {
		/* a setup line's export must not undo the site's */
		launch__render_put(r, "# --- the site's environment again: setup lines cannot change it ---\n");
		render_env(r, &site->env, true);
		launch__render_put(r, "\n");
	}
}

/* dtrain_run_error: a crash that no node caused, told from dtrain-run's
 * <run dir>/failure. */
static void render_run_error(struct render *r)
{
	launch__render_put(r, "# dtrain_run_error: 0 when the step failed on an error of the run's, which\n"
	                      "# no node caused and any node would meet again: <run dir>/failure, written\n"
	                      "# by dtrain-run since this start, says an invalid spec (exit 3), or a full\n"
	                      "# disk or quota or a path refused (a symbolic link, a directory, no\n"
	                      "# permission) naming a path in the run or checkpoint directory. The same\n"
	                      "# words about a node's own /dev/shm, /tmp or a device are the node's fault:\n"
	                      "# they stay a crash, which may leave that node out. Its text in dtrain_error.\n"
	                      "dtrain_ckpt_dir=");
	put_quoted(r, r->spec->checkpoint.dir ? r->spec->checkpoint.dir : "");
	launch__render_put(r, "\n"
	                      "dtrain_names_run_path() { # TEXT: 0 when it names the run or checkpoint dir\n"
	                      "\tlocal d\n"
	                      "\tfor d in \"$DTRAIN_RUN_DIR\" ${dtrain_ckpt_dir:+\"$dtrain_ckpt_dir\"}; do\n"
	                      "\t\td=${d%%/}\n"
	                      "\t\t# a path starts the text or follows a space or quote: /x/run is not\n"
	                      "\t\t# named by /tmp/x/run/... nor by /x/run2/...\n"
	                      "\t\tcase \" $1\" in *[\\ \\\"\\']\"$d\"/* | *[\\ \\\"\\']\"$d\"[:\\ \\\"\\']* | *[\\ \\\"\\']\"$d\") return 0 ;; esac\n"
	                      "\tdone\n"
	                      "\treturn 1\n"
	                      "}\n"
	                      "dtrain_run_error() {\n"
	                      "\tlocal f=\"$DTRAIN_RUN_DIR/failure\" at\n"
	                      "\tdtrain_error=\n"
	                      "\t[ -f \"$f\" ] && [ ! -L \"$f\" ] || return 1\n"
	                      "\tdtrain_error=$(head -c 1000 \"$f\" 2>/dev/null | head -n 1)\n"
	                      "\tat=$(printf '%%s\\n' \"$dtrain_error\" | sed -n 's/^exit [0-9]* at \\([0-9]\\{1,18\\}\\): .*/\\1/p')\n"
	                      "\t# written in this start: the rank that wrote it may be on another\n"
	                      "\t# node, whose clock may be a few seconds behind this one's\n"
	                      "\tif [ -z \"$at\" ] || [ $((10#$at + 5)) -lt \"${DTRAIN_STEP_START%%%%.*}\" ]; then\n"
	                      "\t\tdtrain_error=\n"
	                      "\t\treturn 1\n"
	                      "\tfi\n"
	                      "\tcase $dtrain_error in\n"
	                      "\t'exit 3 at '*) ;;\n"
	                      "\t*'No space left on device'* | *'Disk quota exceeded'* | *'File too large'* | \\\n"
	                      "\t*'symbolic link'* | *'Is a directory'* | *'Not a directory'* | *'Permission denied'*)\n"
	                      "\t\tdtrain_names_run_path \"${dtrain_error#exit * at *: }\" || { dtrain_error=; return 1; } ;;\n"
	                      "\t*)\n"
	                      "\t\tdtrain_error=\n"
	                      "\t\treturn 1 ;;\n"
	                      "\tesac\n"
	                      "\tdtrain_error=${dtrain_error#exit * at *: }\n"
	                      "}\n\n");
}

/* dtrain_open: the batch script's own files (events.jsonl, srun.err,
 * probe.err) opened once per start after their check, then written and
 * read only through the fd: a link planted later is never followed. */
static void render_open(struct render *r)
{
	launch__render_put(r, "# dtrain_open VAR PATH: VAR holds a new fd that appends to PATH, and each\n"
	                      "# write goes through it: a link planted at PATH after the check (by a rank,\n"
	                      "# mid-run) is never followed, the writes stay with the file checked. PATH\n"
	                      "# must be a regular file, or absent and then made with noclobber (O_EXCL:\n"
	                      "# a link planted since the check makes it fail instead of being followed).\n"
	                      "# After the open, PATH must still be that file: a link won between the\n"
	                      "# check and the open is closed unwritten. 1 when refused.\n"
	                      "dtrain_open() {\n"
	                      "\tlocal fd\n"
	                      "\t[ -z \"${!1:-}\" ] || eval \"exec ${!1}>&-\" # the previous start's\n"
	                      "\tprintf -v \"$1\" %%s ''\n"
	                      "\tif [ -L \"$2\" ] || { [ -e \"$2\" ] && [ ! -f \"$2\" ]; }; then\n"
	                      "\t\treturn 1\n"
	                      "\telif [ -e \"$2\" ]; then\n"
	                      "\t\t{ exec {fd}>>\"$2\"; } 2>/dev/null || return 1\n"
	                      "\telse\n"
	                      "\t\t{ set -C; exec {fd}>\"$2\"; } 2>/dev/null\n"
	                      "\t\tset +C\n"
	                      "\t\t[ -n \"${fd:-}\" ] || return 1\n"
	                      "\tfi\n"
	                      "\tif [ -L \"$2\" ] || [ ! -f \"/dev/fd/$fd\" ] || [ ! \"$2\" -ef \"/dev/fd/$fd\" ]; then\n"
	                      "\t\teval \"exec $fd>&-\"\n"
	                      "\t\treturn 1\n"
	                      "\tfi\n"
	                      "\tprintf -v \"$1\" %%s \"$fd\"\n"
	                      "}\n");
}

/* The run's life as it happens, for dtrain-submit report: <run dir>/
 * events.jsonl, one line at each start and end of the job step, at a
 * SIGTERM (written at once: a preempted job's shell may be killed before
 * its step has saved) and at a node lost, appended across requeues. One short printf to a file opened
 * O_APPEND lands whole; text from Slurm is stripped of quotes, backslashes
 * and control characters to stay JSON. */
static void render_events(struct render *r)
{
	render_open(r);
	launch__render_put(r, "# --- the run's life, for dtrain-submit report: <run dir>/events.jsonl ---\n"
	                      "dtrain_text() { printf '%%s' \"$1\" | tr -d '\"\\\\\\000-\\037' | cut -c1-300; }\n"
	                      "# events.jsonl is opened at the first event and again at each start\n"
	                      "# (dtrain_open); a refused one gets no line\n"
	                      "dtrain_events_fd=\n"
	                      "dtrain_event() { # NAME [,\"key\":value...]\n"
	                      "\t[ -d \"$DTRAIN_RUN_DIR\" ] || return 0\n"
	                      "\t[ -n \"$dtrain_events_fd\" ] || dtrain_open dtrain_events_fd \"$DTRAIN_RUN_DIR/events.jsonl\" || return 0\n"
	                      "\tprintf '{\"event\":\"%%s\",\"time\":%%s,\"job_id\":\"%%s\",\"restart\":%%s%%s}\\n' \"$1\" \"$(date +%%s.%%N)\" \\\n"
	                      "\t\t\"$(dtrain_text \"$dtrain_job_id\")\" \"$((10#${dtrain_restarts:-0}))\" \"${2:-}\" \\\n"
	                      "\t\t>&\"$dtrain_events_fd\" 2>/dev/null || true\n"
	                      "}\n"
	                      "# the end of a start of the step and its cause: done, preempted, cancelled,\n"
	                      "# terminated, time_limit (a saved stop before the limit), refused, diverged,\n"
	                      "# replicas (a replica's state differs: its rank and node), watchdog (a step\n"
	                      "# that stopped making progress), crash (the first rank to die and its node,\n"
	                      "# as srun names them), error (a crash on an error of the run's, the same on\n"
	                      "# any node: dtrain_run_error)\n"
	                      "dtrain_stop_event() {\n"
	                      "\tlocal cause=crash detail='' rank='' node='' e=\"$dtrain_srun_log\"\n"
	                      "\tif [ \"$dtrain_term\" -ne 0 ]; then\n"
	                      "\t\tcause=terminated\n"
	                      "\t\tif [ \"$dtrain_rc\" -eq %d ]; then\n"
	                      "\t\t\tif [ -e \"$DTRAIN_RUN_DIR/cancel\" ]; then cause=cancelled; else cause=preempted; fi\n"
	                      "\t\tfi\n"
	                      "\telif grep -q '^dtrain-run: rank 0: replicas disagree ' \"$e\" 2>/dev/null; then\n"
	                      "\t\t# dtrain-run's rank 0 names the replica that differs and its node (the\n"
	                      "\t\t# step ends with exit %d, or srun's kill of the ranks still ending)\n"
	                      "\t\tcause=replicas\n"
	                      "\t\tdetail=$(sed -n 's/^dtrain-run: rank 0: \\(replicas disagree .*\\)$/\\1/p' \"$e\" 2>/dev/null | head -n 1)\n"
	                      "\t\trank=$(printf '%%s\\n' \"$detail\" | sed -n 's/.*: rank \\([0-9]*\\) on node .*/\\1/p')\n"
	                      "\t\tnode=$(printf '%%s\\n' \"$detail\" | sed -n 's/.*: rank [0-9]* on node \\([^ ]*\\) .*/\\1/p')\n"
	                      "\telse\n"
	                      "\t\tcase \"$dtrain_rc\" in\n"
	                      "\t\t0) cause=done ;;\n"
	                      "\t\t%d) # a saved stop: dtrain-submit cancel's (its marker), else the time limit's\n"
	                      "\t\t\tif [ -e \"$DTRAIN_RUN_DIR/cancel\" ]; then cause=cancelled; else cause=time_limit; fi ;;\n"
	                      "\t\t2 | 3) cause=refused ;;\n"
	                      "\t\t4) cause=diverged ;;\n"
	                      "\t\t*)\n"
	                      "\t\t\t# as the log line below: the watchdog's report, when the first\n"
	                      "\t\t\t# rank to end was the watchdog's exit (%d) or none is named\n"
	                      "\t\t\tdetail=$(sed -n 's/^dtrain-run: watchdog: //p' \"$e\" 2>/dev/null | head -n 1)\n"
	                      "\t\t\tif dtrain_run_error; then\n"
	                      "\t\t\t\tcause=error detail=$dtrain_error\n"
	                      "\t\t\telif [ -n \"$detail\" ] && ! grep -q '^srun: error: [^:]*: tasks\\{0,1\\} [0-9,-]*: ' \"$e\" 2>/dev/null ||\n"
	                      "\t\t\t   grep '^srun: error: [^:]*: tasks\\{0,1\\} [0-9,-]*: ' \"$e\" 2>/dev/null | head -n 1 | grep -q ': Exited with exit code %d$' && [ -n \"$detail\" ]; then\n"
	                      "\t\t\t\tcause=watchdog\n"
	                      "\t\t\telse\n"
	                      "\t\t\t\tnode=$(sed -n 's/^srun: error: \\([^:]*\\): tasks\\{0,1\\} [0-9,-]*: .*$/\\1/p' \"$e\" 2>/dev/null | head -n 1)\n"
	                      "\t\t\t\trank=$(sed -n 's/^srun: error: [^:]*: tasks\\{0,1\\} \\([0-9,-]*\\): .*$/\\1/p' \"$e\" 2>/dev/null | head -n 1)\n"
	                      "\t\t\t\tdetail=$(sed -n 's/^srun: error: [^:]*: tasks\\{0,1\\} [0-9,-]*: \\(.*\\)$/\\1/p' \"$e\" 2>/dev/null | head -n 1)\n"
	                      "\t\t\tfi ;;\n"
	                      "\t\tesac\n"
	                      "\tfi\n"
	                      "\tdtrain_cause=$cause dtrain_cause_node=$node # for the bad nodes' check\n"
	                      "\tdtrain_event job_stop \",\\\"cause\\\":\\\"$cause\\\",\\\"exit\\\":$((10#$dtrain_rc)),\\\"rank\\\":\\\"$(dtrain_text \"$rank\")\\\",\\\"node\\\":\\\"$(dtrain_text \"$node\")\\\",\\\"detail\\\":\\\"$(dtrain_text \"$detail\")\\\"\"\n"
	                      "}\n\n",
	                   DT_EXIT_REQUEUE, DT_EXIT_REPLICAS, DT_EXIT_REQUEUE, DT_EXIT_HUNG, DT_EXIT_HUNG);
	render_run_error(r);
}

/* Counters in the run dir, and the check that no name this script writes
 * is a link or a directory planted there (the job stops: a counter moved
 * into a planted directory would read 0 for ever). */
static void render_counters(struct render *r)
{
	launch__render_put(r, "# --- recovery: counters kept in the run dir across requeues ---\n"
	                      "# Slurm counts every requeue (SLURM_RESTART_COUNT); this script writes down\n"
	                      "# those it asked for (a saved stop before the time limit, a bad node left\n"
	                      "# out, a node that did not answer), the stops it saw (SIGTERM: preemption\n"
	                      "# or scancel) and the crashes it restarted. A requeue none of those\n"
	                      "# explains was Slurm's after a node failed.\n"
	                      "# A counter is a file holding a number; one missing, empty or damaged\n"
	                      "# reads as 0. Written whole (a temporary file, then mv -T), never through\n"
	                      "# a link or into a directory planted in the run dir: such a name is\n"
	                      "# refused, and a counter that cannot be written stops the restart or\n"
	                      "# requeue it would count.\n"
	                      "dtrain_refused() { # PATH [-d]: 0, saying why, when PATH is a link, or\n"
	                      "\t# not a regular file (-d: not a directory) though it exists\n"
	                      "\tlocal what\n"
	                      "\tif [ -L \"$1\" ]; then\n"
	                      "\t\twhat='a symbolic link'\n"
	                      "\telif [ ! -e \"$1\" ] || { [ \"${2:-}\" = -d ] && [ -d \"$1\" ]; } || { [ \"${2:-}\" != -d ] && [ -f \"$1\" ]; }; then\n"
	                      "\t\treturn 1\n"
	                      "\telif [ -d \"$1\" ]; then\n"
	                      "\t\twhat='a directory'\n"
	                      "\telse\n"
	                      "\t\twhat='no regular file'\n"
	                      "\tfi\n"
	                      "\techo \"dtrain: $1 is $what, which dtrain did not make: not written; remove it\" >&2\n"
	                      "}\n"
	                      "dtrain_count() {\n"
	                      "\tlocal v=0 f=\"$DTRAIN_RUN_DIR/recovery/$1\"\n"
	                      "\t[ ! -f \"$f\" ] || [ -L \"$f\" ] || v=$(cat \"$f\" 2>/dev/null) || v=0\n"
	                      "\tcase $v in '' | *[!0-9]* | ?????????*) v=0 ;; esac\n"
	                      "\techo $((10#$v))\n"
	                      "}\n"
	                      "dtrain_set() { # COUNTER VALUE\n"
	                      "\tlocal d=\"$DTRAIN_RUN_DIR/recovery\"\n"
	                      "\t! dtrain_refused \"$d\" -d && mkdir -p \"$d\" && ! dtrain_refused \"$d/$1\" &&\n"
	                      "\t\trm -f \"$d/.$1.tmp\" && (set -C; echo \"$2\" >\"$d/.$1.tmp\") &&\n"
	                      "\t\tmv -fT \"$d/.$1.tmp\" \"$d/$1\"\n"
	                      "}\n"
	                      "dtrain_bump() { dtrain_set \"$1\" \"$(($(dtrain_count \"$1\") + 1))\"; }\n"
	                      "# Every name this script writes in the run dir, checked at each start: one\n"
	                      "# that is a link or a directory stops the job here.\n"
	                      "if [ -d \"$DTRAIN_RUN_DIR\" ]; then\n"
	                      "\tfor dtrain_f in recovery recovery/crashes recovery/crash_nodes recovery/excluded recovery/requeued \\\n"
	                      "\t\trecovery/stopped recovery/left_out recovery/node_failures events.jsonl srun.err probe.err; do\n"
	                      "\t\tdtrain_refused \"$DTRAIN_RUN_DIR/$dtrain_f\" $([ \"$dtrain_f\" != recovery ] || echo -d) || continue\n"
	                      "\t\techo \"dtrain: job ${dtrain_job_id:-none} not started: the batch script writes $DTRAIN_RUN_DIR/$dtrain_f (its recovery counters and records, its events)\" >&2\n"
	                      "\t\texit 1\n"
	                      "\tdone\n"
	                      "fi\n");
}

/* The stops and requeues counted, so that a node failure can be told from
 * the requeues and stops this script caused; then
 * recovery.max_node_failures. */
static void render_recovery(struct render *r)
{
	long max_node_failures = r->spec->recovery.max_node_failures;

	render_counters(r);
	launch__render_put(r, "# A SIGTERM (preemption, scancel, an admin's requeue) is counted as it\n"
	                      "# arrives: a save that outlasts KillWait ends this shell with SIGKILL,\n"
	                      "# and Slurm's requeue would then count as a node failure.\n"
	                      "dtrain_on_term() {\n"
	                      "\t[ \"$dtrain_term\" -eq 0 ] || return 0\n"
	                      "\tdtrain_term=1\n"
	                      "\tdtrain_bump stopped || true\n"
	                      "\tdtrain_event term \",\\\"detail\\\":\\\"SIGTERM: preemption, scancel or a requeue by an admin\\\"\"\n"
	                      "}\n"
	                      "trap dtrain_on_term TERM\n"
	                      "# Its own requeue makes Slurm send this shell SIGTERM too: not a stop.\n"
	                      "# Then the nodes left out (render_nodes.c), set on the job while pending.\n"
	                      "# dtrain_requeue [COUNTER]: COUNTER counts the requeue. It is written, and\n"
	                      "# what the update needs read, before the requeue: its SIGTERM reaches every\n"
	                      "# process of the job (a counter's mv killed would make the requeue a node\n"
	                      "# failure). Not requeued: the reason in dtrain_why_not.\n"
	                      "dtrain_requeue() {\n"
	                      "\tlocal old=0 list\n"
	                      "\tlist=$(dtrain_leave_out_list)\n"
	                      "\tif [ -n \"${1:-}\" ]; then\n"
	                      "\t\told=$(dtrain_count \"$1\")\n"
	                      "\t\tif ! dtrain_set \"$1\" $((old + 1)); then\n"
	                      "\t\t\tdtrain_why_not=\"cannot count the requeue in $DTRAIN_RUN_DIR/recovery/$1\"\n"
	                      "\t\t\treturn 1\n"
	                      "\t\tfi\n"
	                      "\tfi\n"
	                      "\ttrap 'dtrain_term=1' TERM\n"
	                      "\tif ! scontrol requeue \"$dtrain_job_id\"; then\n"
	                      "\t\ttrap dtrain_on_term TERM\n"
	                      "\t\t[ -z \"${1:-}\" ] || dtrain_set \"$1\" \"$old\" || true\n"
	                      "\t\tdtrain_why_not='scontrol requeue failed'\n"
	                      "\t\treturn 1\n"
	                      "\tfi\n"
	                      "\tdtrain_leave_out \"$list\"\n"
	                      "}\n"
	                      "if [ \"$dtrain_term\" -ne 0 ]; then # one before the trap above\n"
	                      "\tdtrain_term=0\n"
	                      "\tdtrain_on_term\n"
	                      "fi\n"
	                      "dtrain_node_failures=$((dtrain_restarts - $(dtrain_count requeued) - $(dtrain_count stopped) - $(dtrain_count left_out)))\n"
	                      "dtrain_new_failure=0\n"
	                      "if [ \"$dtrain_node_failures\" -gt %ld ]; then\n"
	                      "\techo \"dtrain: the job was requeued $dtrain_node_failures times after losing a node (recovery.max_node_failures = %ld); not started again\" >&2\n"
	                      "\texit 1\n"
	                      "elif [ \"$dtrain_node_failures\" -gt \"$(dtrain_count node_failures)\" ]; then\n"
	                      "\techo \"dtrain: started again after losing a node (node failure $dtrain_node_failures of at most %ld)\" >&2\n"
	                      "\tdtrain_set node_failures \"$dtrain_node_failures\" || true\n"
	                      "\tdtrain_new_failure=1\n"
	                      "\tdtrain_event node_failure \",\\\"detail\\\":\\\"Slurm requeued the job after it lost a node\\\"\"\n"
	                      "fi\n\n",
	                   max_node_failures, max_node_failures, max_node_failures);
}

/* dtrain_stop_at: a step started again after a crash misses the time-limit
 * warning, so it is told the job's end instead. */
static void render_stop_at(struct render *r)
{
	/* the batch script's alone: never the submitting shell's */
	launch__render_put(r, "unset DTRAIN_STOP_AT\n"
	                      "# The time-limit warning (--signal) reaches only the job step running when\n"
	                      "# Slurm sends it: a step started again after a crash would miss it. Such a\n"
	                      "# step stops by itself, as if warned, preemption.lead_seconds before the\n"
	                      "# job's end time (squeue's, when the step starts).\n"
	                      "dtrain_stop_at() {\n"
	                      "\tlocal end\n"
	                      "\t[ -n \"$dtrain_job_id\" ] || return 0\n"
	                      "\tend=$(SLURM_TIME_FORMAT=%%s squeue -h -j \"$dtrain_job_id\" -o %%e 2>/dev/null) || return 0\n"
	                      "\tcase \"$end\" in\n"
	                      "\t'' | *[!0-9]*) ;;\n"
	                      "\t*) export DTRAIN_STOP_AT=$((end - %ld)) ;;\n"
	                      "\tesac\n"
	                      "}\n",
	                   r->spec->preemption.lead_seconds);
	if (!r->spec->preemption.signal) /* no warning to miss */
		launch__render_put(r, "dtrain_stop_at() { :; }\n");
	launch__render_put(r, "\n");
}

/* dtrain_wait PID: its exit status in dtrain_rc, through SIGTERMs; and
 * dtrain_guard PID: srun ended when a lost node keeps it waiting. */
static void render_step_guard(struct render *r)
{
	launch__render_put(r, "# --- waiting for a step ---\n"
	                      "# A SIGTERM interrupts wait (status over 128) while the step goes on: wait\n"
	                      "# again while PID lives; an interrupted wait whose PID then ended gets\n"
	                      "# PID's own status from the next wait.\n"
	                      "dtrain_wait() {\n"
	                      "\tlocal again\n"
	                      "\twhile :; do\n"
	                      "\t\twait \"$1\"\n"
	                      "\t\tdtrain_rc=$?\n"
	                      "\t\tkill -0 \"$1\" 2>/dev/null || break\n"
	                      "\tdone\n"
	                      "\tif [ \"$dtrain_rc\" -gt 128 ]; then\n"
	                      "\t\twait \"$1\" 2>/dev/null\n"
	                      "\t\tagain=$?\n"
	                      "\t\t[ \"$again\" -eq 127 ] || dtrain_rc=$again\n"
	                      "\tfi\n"
	                      "}\n"
	                      "# srun returns once every rank of its step is gone. The ranks of a node that\n"
	                      "# is lost (hung, cut off, its slurmd killed) are never reported gone: srun\n"
	                      "# then waits until Slurm takes the node for down (SlurmdTimeout, often\n"
	                      "# minutes), unless a broken connection to the node aborts it first. So once\n"
	                      "# srun reports a rank ended (--kill-on-bad-exit then ends the step), it has\n"
	                      "# Slurm's KillWait + %d s to return; past that it is ended (SIGKILL), and\n"
	                      "# the probe below finds the node that does not answer.\n"
	                      "# Its naps end with it: they hold the pipe to the tee of srun's messages.\n"
	                      "dtrain_guard() {\n"
	                      "\tlocal n=0 kill_wait nap=\n"
	                      "\ttrap 'kill $nap 2>/dev/null; exit 0' TERM\n"
	                      "\twhile kill -0 \"$1\" 2>/dev/null; do\n"
	                      "\t\tgrep -q '^srun: error: [^:]*: tasks\\{0,1\\} [0-9,-]*: ' \"$dtrain_srun_log\" 2>/dev/null && break\n"
	                      "\t\tsleep 1 2>/dev/null &\n"
	                      "\t\tnap=$!\n"
	                      "\t\twait \"$nap\"\n"
	                      "\tdone\n"
	                      "\tkill -0 \"$1\" 2>/dev/null || return 0 # srun returned by itself\n"
	                      "\tkill_wait=$(timeout 4 scontrol show config 2>/dev/null | sed -n 's/^KillWait *= *\\([0-9]*\\).*/\\1/p')\n"
	                      "\tcase $kill_wait in '' | *[!0-9]* | ?????*) kill_wait=30 ;; esac\n"
	                      "\twhile kill -0 \"$1\" 2>/dev/null; do\n"
	                      "\t\tif [ \"$n\" -ge $((10#$kill_wait + %d)) ]; then\n"
	                      "\t\t\techo \"dtrain: srun still waits for the step's ranks $n s after one ended (Slurm's KillWait is $((10#$kill_wait)) s): a node does not answer; srun ended\" >&2\n"
	                      "\t\t\tkill -KILL \"$1\" 2>/dev/null\n"
	                      "\t\t\treturn 0\n"
	                      "\t\tfi\n"
	                      "\t\tsleep 1 2>/dev/null &\n"
	                      "\t\tnap=$!\n"
	                      "\t\twait \"$nap\"\n"
	                      "\t\tn=$((n + 1))\n"
	                      "\tdone\n"
	                      "}\n\n",
	                   GUARD_S, GUARD_S);
}


/* dtrain_layout: data x pipeline of this start, as dtrain-run will lay the
 * ranks out (parallel.data "auto": from the nodes granted). */
static void render_layout(struct render *r)
{
	const struct spec *s = r->spec;

	launch__render_put(r, "# --- the layout of a start: data x pipeline ---\n");
	if (s->parallel.data != SPEC_AUTO)
		launch__render_put(r, "dtrain_layout() { echo %ldx%ld; }\n\n", s->parallel.data, s->parallel.pipeline);
	else
		launch__render_put(r, "# parallel.data \"auto\": the replicas follow the nodes Slurm granted\n"
		                      "dtrain_layout() { echo \"$((10#${SLURM_JOB_NUM_NODES:-1} * %ld / %ld))x%ld\"; }\n\n",
		                   s->resources.tasks_per_node, s->parallel.pipeline, s->parallel.pipeline);
}

/* The head of the restart loop, up to the srun that starts dtrain-run on
 * every task. */
static void render_step_start(struct render *r, const char *dtrain_run_path)
{
	launch__render_put(r, "# --- launch ---\n"
	                      "# On preemption or scancel Slurm sends SIGTERM to this shell and to the job\n"
	                      "# step at once; srun passes it on and dtrain-run saves its state. This shell\n"
	                      "# must outlive srun to see dtrain-run's exit code, so it traps TERM. A trap,\n"
	                      "# not trap '' (children would inherit \"ignored\"). srun runs in a subshell\n"
	                      "# in the background, which traps TERM too; this shell waits for it, so its\n"
	                      "# own trap runs at once. The time-limit warning (--signal) goes to the step\n"
	                      "# only.\n"
	                      "# Since Slurm 22.05 srun does not inherit --cpus-per-task from sbatch: a\n"
	                      "# rank's threads would share one CPU. It is given again.\n"
	                      "# A crash (a rank killed or failed: any exit but 0, 2 usage, 3 invalid\n"
	                      "# spec, 4 diverged, 75 saved; 5 is dtrain-run's watchdog ending a step\n"
	                      "# that stopped making progress) starts the step again in this allocation,\n"
	                      "# from the newest checkpoint, at most recovery.max_crashes times in all.\n"
	                      "# --kill-on-bad-exit: the first rank to fail ends the step (the others\n"
	                      "# would wait for it, or for a rank that hangs, forever).\n"
	                      "dtrain_srun_err=\"$DTRAIN_RUN_DIR/srun.err\" dtrain_probe_err=\"$DTRAIN_RUN_DIR/probe.err\"\n"
	                      "[ -d \"$DTRAIN_RUN_DIR\" ] || dtrain_srun_err=/dev/null dtrain_probe_err=/dev/null\n"
	                      "# written and read through the fds each start opens (dtrain_open)\n"
	                      "dtrain_srun_log=/dev/null dtrain_probe_log=/dev/null dtrain_srun_fd= dtrain_probe_fd=\n"
	                      "dtrain_rc=0\n"
	                      "while [ \"$dtrain_term\" -eq 0 ]; do\n"
	                      "\techo \"dtrain: job ${dtrain_job_id:-none}, restart ${dtrain_restarts}, starting $(date -u +%%FT%%TZ) on ${SLURM_JOB_NODELIST:-this host} (${SLURM_JOB_NUM_NODES:-1} node$([ \"${SLURM_JOB_NUM_NODES:-1}\" = 1 ] || echo s)), layout $(dtrain_layout)\"\n"
	                      "\t# rewritten at each start: a link planted under their names goes first;\n"
	                      "\t# a directory stays, and stops the job\n"
	                      "\tif [ -d \"$DTRAIN_RUN_DIR\" ]; then\n"
	                      "\t\trm -f \"$dtrain_srun_err\" \"$dtrain_probe_err\" 2>/dev/null\n"
	                      "\t\tif dtrain_refused \"$dtrain_srun_err\" || dtrain_refused \"$dtrain_probe_err\" ||\n"
	                      "\t\t   ! dtrain_open dtrain_srun_fd \"$dtrain_srun_err\" || ! dtrain_open dtrain_probe_fd \"$dtrain_probe_err\"; then\n"
	                      "\t\t\techo \"dtrain: not started again: srun's messages cannot be kept in the run dir\" >&2\n"
	                      "\t\t\tbreak\n"
	                      "\t\tfi\n"
	                      "\t\tdtrain_srun_log=/dev/fd/$dtrain_srun_fd dtrain_probe_log=/dev/fd/$dtrain_probe_fd\n"
	                      "\t\t# and events.jsonl, checked again for this start\n"
	                      "\t\tdtrain_open dtrain_events_fd \"$DTRAIN_RUN_DIR/events.jsonl\" || true\n"
	                      "\tfi\n"
	                      "\t# this start of the step, the same for every rank (their heartbeats)\n"
	                      "\texport DTRAIN_STEP_START=\"$(date +%%s.%%N)\"\n"
	                      "\t# what checkpoint.every_steps \"auto\" weighs: this run's interruptions so\n"
	                      "\t# far (Slurm's requeues but this script's own, which saved first; crashes)\n"
	                      "\t# and the seconds it held nodes before this start (events.jsonl: each\n"
	                      "\t# start to the last event before the next; queue waits left out)\n"
	                      "\texport DTRAIN_INTERRUPTIONS=$((10#${dtrain_restarts:-0} - $(dtrain_count requeued) - $(dtrain_count left_out) + $(dtrain_count crashes)))\n"
	                      "\tDTRAIN_RUN_SECONDS=$(awk -F'\"time\":' 'NF > 1 { t = $2 + 0; if ($0 ~ /\"event\":\"job_start\"/) { if (s) sum += last - s; s = t } last = t }\n"
	                      "\t\tEND { if (s) sum += last - s; printf \"%%d\", sum }' \"$DTRAIN_RUN_DIR/events.jsonl\" 2>/dev/null)\n"
	                      "\texport DTRAIN_RUN_SECONDS=${DTRAIN_RUN_SECONDS:-0}\n"
	                      "\tdtrain_event job_start \",\\\"crashes\\\":$(dtrain_count crashes),\\\"nodes\\\":\\\"$(dtrain_text \"${SLURM_JOB_NODELIST:-}\")\\\",\\\"num_nodes\\\":$((10#${SLURM_JOB_NUM_NODES:-1})),\\\"layout\\\":\\\"$(dtrain_layout)\\\"\"\n"
	                      "\t[ \"$dtrain_term\" -eq 0 ] || break # a SIGTERM while this start was set up\n"
	                      "\t(\n"
	                      "\t\ttrap : TERM # outlive a SIGTERM, to report srun's exit (not trap '')\n"
	                      "\t\t{\n"
	                      "\t\t\tdtrain_tee=${!:-} # the tee below (a process substitution)\n"
	                      "\t\t\tsrun --mpi=pmix --kill-on-bad-exit=1 --cpus-per-task=%ld",
	                   r->spec->resources.cpus_per_task);
	if (r->spec->resources.nodes.min != r->spec->resources.nodes.max) /* elastic: see #SBATCH */
		launch__render_put(r, " --nodes=\"${SLURM_JOB_NUM_NODES:-1}\" --ntasks-per-node=%ld --ntasks=$((10#${SLURM_JOB_NUM_NODES:-1} * %ld))",
		                   r->spec->resources.tasks_per_node, r->spec->resources.tasks_per_node);
	launch__render_srun_extra(r);
	launch__render_put(r, " ");
	put_quoted(r, dtrain_run_path);
	launch__render_put(r, " ");
	if (!r->rc) {
		struct dt_buf spec_json = {0};

		r->rc = dt_buf_printf(&spec_json, "%s/spec.json", r->run_dir);
		put_quoted(r, dt_buf_str(&spec_json));
		dt_buf_free(&spec_json);
	}
}

/* The wait for the step (in the background, so that a SIGTERM is noted at
 * once), the exits that end the loop, and what a crash names as its cause. */
static void render_step_wait(struct render *r)
{
	/* srun's messages to the log as they come, and to a file to read the
	 * dead rank from; tee ignores SIGTERM, so that srun's writes still find
	 * it while the step saves after a preemption */
	launch__render_put(r, " &\n"
	                      "\t\t\tdtrain_srun=$!\n"
	                      "\t\t\tdtrain_guard \"$dtrain_srun\" &\n"
	                      "\t\t\tdtrain_guarding=$!\n"
	                      "\t\t\tdtrain_wait \"$dtrain_srun\"\n"
	                      "\t\t\tkill \"$dtrain_guarding\" 2>/dev/null\n"
	                      "\t\t\twait \"$dtrain_guarding\" 2>/dev/null\n"
	                      "\t\t} 2> >(trap '' TERM; exec tee -a \"$dtrain_srun_log\" >&2)\n"
	                      "\t\t[ -z \"$dtrain_tee\" ] || wait \"$dtrain_tee\" # srun's messages, written out\n"
	                      "\t\texit \"$dtrain_rc\"\n"
	                      "\t) &\n"
	                      "\t# waited for in the background, so that a SIGTERM is written down at once\n"
	                      "\tdtrain_wait \"$!\"\n"
	                      "\tdtrain_stop_event\n"
	                      "\t[ \"$dtrain_term\" -eq 0 ] || break\n"
	                      "\tcase \"$dtrain_rc\" in 0|2|3|4|%d) break ;; esac\n"
	                      "\t# srun names the first task that ended and its node; when that was the\n"
	                      "\t# watchdog's exit (5), the watchdog names the ranks it waited for\n"
	                      "\tdtrain_hung=$(sed -n 's/^dtrain-run: watchdog: //p' \"$dtrain_srun_log\" 2>/dev/null | head -n 1)\n"
	                      "\tdtrain_died=$(sed -n 's/^srun: error: \\([^:]*\\): tasks\\{0,1\\} \\([0-9,-]*\\): \\(.*\\)$/rank \\2 on node \\1: \\3/p' \"$dtrain_srun_log\" 2>/dev/null | head -n 1)\n"
	                      "\tdtrain_odd=$(sed -n 's/^dtrain-run: rank 0: replicas disagree //p' \"$dtrain_srun_log\" 2>/dev/null | head -n 1)\n"
	                      "\tif [ -n \"$dtrain_odd\" ]; then # dtrain-run exits %d\n"
	                      "\t\techo \"dtrain: the replicas of a stage disagree (exit $dtrain_rc): $dtrain_odd\" >&2\n"
	                      "\telif [ \"$dtrain_cause\" = error ]; then\n"
	                      "\t\techo \"dtrain: the job step failed (exit $dtrain_rc) on an error of the run's, which no node caused: $dtrain_error\" >&2\n"
	                      "\telif [ -n \"$dtrain_hung\" ] && case \"$dtrain_died\" in '' | *': Exited with exit code %d') true ;; *) false ;; esac; then\n"
	                      "\t\techo \"dtrain: the job step stopped making progress (exit $dtrain_rc); the watchdog: $dtrain_hung\" >&2\n"
	                      "\telse\n"
	                      "\t\techo \"dtrain: the job step failed (exit $dtrain_rc)${dtrain_died:+; first to die: $dtrain_died}\" >&2\n"
	                      "\tfi\n",
	                   DT_EXIT_REQUEUE, DT_EXIT_REPLICAS, DT_EXIT_HUNG);
}

/* The end of the restart loop: count the crash against
 * recovery.max_crashes, then start again from the newest checkpoint. */
static void render_restart(struct render *r)
{
	long max_crashes = r->spec->recovery.max_crashes;

	launch__render_put(r, "\t[ \"$dtrain_term\" -eq 0 ] || break\n"
	                      "\tif [ \"$(dtrain_count crashes)\" -ge %ld ]; then\n"
	                      "\t\techo \"dtrain: not restarted: the job crashed $(dtrain_count crashes) times before (recovery.max_crashes = %ld)\" >&2\n"
	                      "\t\tbreak\n"
	                      "\tfi\n"
	                      "\tif ! dtrain_bump crashes; then\n"
	                      "\t\techo \"dtrain: not restarted: cannot count crashes in $DTRAIN_RUN_DIR/recovery\" >&2\n"
	                      "\t\tbreak\n"
	                      "\tfi\n",
	                   max_crashes, max_crashes);
	launch__render_crash_requeue(r);
	launch__render_put(r, "\techo \"dtrain: restarting from the newest checkpoint (crash $(dtrain_count crashes) of at most %ld)\" >&2\n"
	                      "\tdtrain_stop_at\n"
	                      "done\n\n",
	                   max_crashes);
}

/* After the loop: a saved stop (DT_EXIT_REQUEUE) goes back to the queue,
 * unless a SIGTERM or preemption.max_requeues says otherwise. */
static void render_requeue(struct render *r)
{
	long max_requeues = r->spec->preemption.max_requeues;

	launch__render_put(r, "# --- requeue ---\n"
	                      "# dtrain-run exits %d after saving its state when it must stop early (the\n"
	                      "# time limit is near); the job then goes back to the queue, at most\n"
	                      "# preemption.max_requeues times. After a SIGTERM this shell does not requeue:\n"
	                      "# a cancelled job must stay cancelled, and Slurm requeues a preempted job\n"
	                      "# itself (PreemptMode=REQUEUE). Nor when dtrain-submit cancel asked for the\n"
	                      "# save (it leaves <run dir>/cancel): the job then cancels itself.\n",
	                   DT_EXIT_REQUEUE);
	launch__render_put(r, "if [ \"$dtrain_rc\" -eq %d ]; then\n"
	                      "\tif [ \"$dtrain_term\" -ne 0 ]; then\n"
	                      "\t\techo \"dtrain: state saved; the job was terminated (scancel or preemption), not requeued by this script\" >&2\n"
	                      "\t\texit %d\n"
	                      "\tfi\n"
	                      "\tif [ -e \"$DTRAIN_RUN_DIR/cancel\" ]; then # dtrain-submit cancel asked for the save\n"
	                      "\t\techo \"dtrain: state saved; stopped by dtrain-submit cancel, not requeued (dtrain-submit resume $DTRAIN_RUN_DIR continues it)\" >&2\n"
	                      "\t\tscancel \"$dtrain_job_id\"\n"
	                      "\t\texit %d\n"
	                      "\tfi\n"
	                      "\tif [ \"$(dtrain_count requeued)\" -lt %ld ]; then\n"
	                      "\t\tif ! dtrain_bump requeued; then\n"
	                      "\t\t\techo \"dtrain: state saved, but not requeued: cannot count requeues in $DTRAIN_RUN_DIR/recovery; submit the spec again to resume\" >&2\n"
	                      "\t\t\texit %d\n"
	                      "\t\tfi\n"
	                      "\t\techo \"dtrain: state saved; requeueing job $dtrain_job_id (restart $((dtrain_restarts + 1)), its own requeue $(dtrain_count requeued) of %ld)\" >&2\n"
	                      "\t\tif dtrain_requeue; then\n"
	                      "\t\t\texit 0\n"
	                      "\t\tfi\n"
	                      "\t\techo \"dtrain: scontrol requeue failed; submit the spec again to resume\" >&2\n"
	                      "\t\texit %d\n"
	                      "\tfi\n"
	                      "\techo \"dtrain: state saved, but the job requeued itself $(dtrain_count requeued) times (preemption.max_requeues = %ld); submit the spec again to resume\" >&2\n"
	                      "\texit %d\n"
	                      "fi\n"
	                      "exit \"$dtrain_rc\"\n",
	                   DT_EXIT_REQUEUE, DT_EXIT_REQUEUE, DT_EXIT_REQUEUE, max_requeues, DT_EXIT_REQUEUE,
	                   max_requeues, DT_EXIT_REQUEUE, max_requeues, DT_EXIT_REQUEUE);
}

/* The script after the #SBATCH lines, section by section as it runs. */
static void render_body(struct render *r, const char *dtrain_run_path)
{
	render_preamble(r);
	render_shell_locks(r);
	render_slurm_view(r);
	render_environment(r);
	render_setup_lines(r);
	render_events(r);
	render_recovery(r);
	launch__render_bad_nodes(r);
	launch__render_start_check(r);
	render_stop_at(r);
	render_step_guard(r);
	render_layout(r);
	/* the restart loop: start a step, wait, probe the nodes, restart */
	render_step_start(r, dtrain_run_path);
	render_step_wait(r);
	launch__render_after_crash(r);
	render_restart(r);
	render_requeue(r);
}

/* --- the public function --- */

int launch_render_script(const struct spec *spec, const struct site *site,
			 const char *run_dir, const char *dtrain_run_path,
			 struct dt_buf *out, struct dt_err *err)
{
	static const struct site no_site;
	struct dt_buf b = {0}, origin = {0};
	struct render r = {0};
	int rc = 0;

	if (!site)
		site = &no_site;
	if (!run_dir || !dtrain_run_path)
		return dt_err_add(err, "batch script: %s is not known", run_dir ? "dtrain-run" : "the run dir");
	if (site->path) {
		char shown[256];

		rc = dt_buf_printf(&origin, "%s: ", launch__printable(site->path, shown, sizeof(shown)));
		if (rc)
			goto out;
	} else if ((rc = dt_buf_puts(&origin, "site: ")) != 0) {
		goto out;
	}
	r = (struct render){ .spec = spec, .site = site, .site_origin = origin.p,
			     .run_dir = run_dir, .b = &b, .err = err };
	check_env(&r, "", &spec->env);
	check_env(&r, r.site_origin, &site->env);
	render_header(&r);
	render_body(&r, dtrain_run_path);
	rc = r.rc;
	if (!rc && r.bad)
		rc = -EINVAL;
	if (!rc)
		rc = dt_buf_add(out, dt_buf_str(&b), b.len);
out:
	if (rc == -ENOMEM)
		dt_err_add(err, "batch script: out of memory");
	dt_buf_free(&origin);
	dt_buf_free(&b);
	return rc;
}
