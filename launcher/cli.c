/*
 * cli.c - the command line of dtrain-submit: the commands, their options,
 * their --help texts, and a parser that names the argument it cannot use.
 *
 * `dtrain-submit SPEC ...` is `dtrain-submit submit SPEC ...`: a first
 * argument that is not a command name is the start of a submit (a spec file
 * named like a command is reached as ./status or with `submit`).
 *
 * Sections: help texts, option table, parser.
 */
#include "launcher/cli.h"
#include "base/str.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --- help texts --- */

static const char help_program[] =
	"Usage: dtrain-submit [submit] SPEC [--site FILE] [--set KEY=VALUE]... [SLURM OPTIONS] [--dry-run]\n"
	"       dtrain-submit validate SPEC [--site FILE] [--set KEY=VALUE]... [SLURM OPTIONS]\n"
	"       dtrain-submit status [JOB]\n"
	"       dtrain-submit cancel [--now] JOB\n"
	"       dtrain-submit logs [-f] JOB\n"
	"       dtrain-submit report JOB|RUN_DIR [-o FILE] [--spec FILE]\n"
	"       dtrain-submit resume RUN_DIR [--set KEY=VALUE]... [SLURM OPTIONS] [--dry-run]\n"
	"       dtrain-submit sweep SPEC --grid KEY=V1,V2,... [--grid ...] [--seeds N]\n"
	"                           [--max-parallel K] [--set KEY=VALUE]... [--dry-run]\n"
	"       dtrain-submit --help | --version\n"
	"\n"
	"Run a dtrain job spec on Slurm as a batch job, and follow your jobs.\n"
	"\n"
	"commands:\n"
	"  submit    resolve SPEC, create its run dir and sbatch it (the default)\n"
	"  validate  resolve SPEC and print the resolved spec as JSON; submit nothing\n"
	"  status    list your recent jobs, or show one\n"
	"  cancel    ask a job to save and stop, then cancel it\n"
	"  logs      print a job's output; -f follows it\n"
	"  report    write a run's report: one HTML page of its curves, time and life\n"
	"  resume    continue a stopped run in its own run dir, as a new job\n"
	"  sweep     submit every combination of some keys' values as one job array\n"
	"\n"
	"JOB is a Slurm job id or a job name (then the most recent job of that name),\n"
	"of the cluster $SLURM_CONF names; a sweep's task is SWEEP_TASK (12_3, or\n"
	"the sweep's name and the task: lr-sweep_3).\n"
	"`dtrain-submit COMMAND --help` describes a command.\n"
	"\n"
	"files:\n"
	"  site policy   " SITE_DEFAULT_PATH " when it exists; a user's --site FILE,\n"
	"                else $DTRAIN_SITE, only adds defaults, locks, limits and its\n"
	"                runs_root under it (without a system file, it is the policy)\n"
	"  job registry  ${XDG_STATE_HOME:-$HOME/.local/state}/dtrain/jobs.tsv\n"
	"\n"
	"exit codes: 0 ok, 1 failure (Slurm refused, I/O error), 2 usage error,\n"
	"            3 invalid job spec or site file\n";

static const char help_submit[] =
	"Usage: dtrain-submit [submit] SPEC [--site FILE] [--set KEY=VALUE]... [SLURM OPTIONS] [--dry-run]\n"
	"\n"
	"Resolve the job spec SPEC (site defaults, SPEC, then --set overrides), render\n"
	"its batch script, create the run dir and submit it with sbatch. Prints the\n"
	"Slurm job id on stdout, the run dir and how to follow the job on stderr.\n"
	"\n"
	"The run dir is the spec's run_dir, else <runs_root>/<name>-<YYYYmmdd-HHMMSS>\n"
	"(-2, -3... when taken); it must not exist. It receives spec.json (the\n"
	"resolved spec), job.sh (the batch script), job_id and the job's output\n"
	"slurm-<id>.out. An invalid spec, or data that does not fit it (checked as\n"
	"validate does), creates nothing; if sbatch refuses the job the run dir is\n"
	"removed again.\n"
	"\n"
	"options:\n"
	"  --site FILE      a site file under " SITE_DEFAULT_PATH " (default: $DTRAIN_SITE);\n"
	"                   it can only add defaults, locks and limits to the system's\n"
	"  --set KEY=VALUE  override one spec key, e.g. --set resources.nodes=2 (repeatable)\n"
	"  --array=0-M[%K]  M + 1 runs of SPEC as one job array, seeds 0..M, at most\n"
	"                   K at once: `sweep SPEC --seeds M+1 --max-parallel K`\n"
	"  --after JOB      start once JOB (an id or a name; a sweep: all its tasks)\n"
	"                   completed; cancelled by Slurm if JOB fails\n"
	"                   (resources.dependency = afterok:<id>)\n"
	"  --dry-run        print the batch script; create and submit nothing\n"
	"  --no-data-check  do not open the data sets here (they are on the compute\n"
	"                   nodes' file systems only); dtrain-run checks them at start\n"
	"  -h, --help       this text\n"
	"\n"
	"Slurm's options, as sbatch spells them: shortcuts of spec keys, taken\n"
	"in order with --set (the last wins); the site's locks and limits apply:\n"
	"  -N, --nodes N      resources.nodes; a range MIN-MAX is elastic (with parallel.data auto)\n"
	"  -n, --ntasks N     tasks in all: resources.tasks_per_node = N / resources.nodes\n"
	"                     (over any --set resources.tasks_per_node)\n"
	"  -p, --partition P  resources.partition\n"
	"  -t, --time T       resources.time (minutes, HH:MM:SS or D-HH:MM:SS)\n"
	"  --time-min T       resources.time_min: backfill may start the job with less\n"
	"  -A, --account A    resources.account\n"
	"  --dependency D     resources.dependency (sbatch's syntax: afterok:1234)\n"
	"\n"
	"exit codes: 0 submitted, 1 sbatch refused or I/O error, 2 usage error,\n"
	"            3 invalid job spec or site file (every problem is listed)\n";

static const char help_validate[] =
	"Usage: dtrain-submit validate SPEC [--site FILE] [--set KEY=VALUE]... [SLURM OPTIONS]\n"
	"\n"
	"Resolve SPEC exactly as submit would, render and check its batch script,\n"
	"open its data sets as dtrain-run would and check them against the model\n"
	"(they exist, are of the kind the model reads, their features, classes or\n"
	"vocabulary fit, they hold a global batch), and print the resolved spec as\n"
	"JSON (the spec.json a submit would write, with the run dir it would use).\n"
	"Creates nothing, runs no Slurm command.\n"
	"\n"
	"options:\n"
	"  --site FILE      a site file under " SITE_DEFAULT_PATH " (default: $DTRAIN_SITE);\n"
	"                   it can only add defaults, locks and limits to the system's\n"
	"  --set KEY=VALUE  override one spec key (repeatable)\n"
	"  --no-data-check  do not open the data sets here (see submit --help)\n"
	"  -h, --help       this text\n"
	"\n"
	"Slurm's options, as sbatch spells them: shortcuts of spec keys, taken\n"
	"in order with --set (the last wins); the site's locks and limits apply:\n"
	"  -N, --nodes N      resources.nodes; a range MIN-MAX is elastic (with parallel.data auto)\n"
	"  -n, --ntasks N     tasks in all: resources.tasks_per_node = N / resources.nodes\n"
	"  -p, --partition P  resources.partition\n"
	"  -t, --time T       resources.time (minutes, HH:MM:SS or D-HH:MM:SS)\n"
	"  --time-min T       resources.time_min: backfill may start the job with less\n"
	"  -A, --account A    resources.account\n"
	"  --dependency D     resources.dependency (sbatch's syntax: afterok:1234)\n"
	"\n"
	"exit codes: 0 valid, 1 I/O error, 2 usage error, 3 invalid spec or site file\n";

static const char help_status[] =
	"Usage: dtrain-submit status [JOB]\n"
	"\n"
	"Without JOB: your last 20 jobs submitted to this cluster (the one\n"
	"$SLURM_CONF names; jobs of others are counted, not shown), oldest first,\n"
	"one per line:\n"
	"  JOBID      Slurm job id\n"
	"  NAME       job name\n"
	"  STATE      Slurm's state (squeue, else scontrol), with why a pending job\n"
	"             waits when it is not the usual (\"PENDING (JobHeldUser)\"); ENDED\n"
	"             when Slurm no longer knows the job; \"unknown (Slurm\n"
	"             unreachable)\" when Slurm did not answer within 4 s (the\n"
	"             progress columns still come from the run dir); a sweep's:\n"
	"             its tasks' states, \"2 running, 1 done\"\n"
	"  STEP       optimizer steps done/total, e.g. 120/9380\n"
	"  EPOCH      epoch of that step/epochs, e.g. 1/10\n"
	"  LOSS       training loss of that step (4 significant digits)\n"
	"  ACC        test accuracy of the last evaluation, e.g. 85.12%\n"
	"  SAMPLES/S  training samples per second over the last logging interval\n"
	"  ETA        time left (HH:MM:SS) as dtrain-run estimated it; only while\n"
	"             the job is RUNNING and has logged a step since it (re)started\n"
	"  LAST STEP  while RUNNING: how long ago the newest step began (\"3 s ago\"),\n"
	"             \"starting\" or \"restarting\" (a resume) before the first step\n"
	"             of this start, or \"STALLED 40 s\": no progress for that long,\n"
	"             a rank silent or past the watchdog's bound (from <run\n"
	"             dir>/heartbeat/)\n"
	"  RUN_DIR    the job's run dir\n"
	"With JOB (a job id or name): that job's details, and the same progress as\n"
	"the lines progress: (step and epoch), loss:, test loss: (the last\n"
	"evaluation's, its step, and bits per byte for byte-level text), test\n"
	"accuracy: (a language model's: next-token accuracy), samples/s:, tokens/s:\n"
	"(language models) and eta:; once a step is logged, loss curve: (the step\n"
	"losses as a 40-character sparkline, log-scaled when they span a decade)\n"
	"and goodput: (seconds in productive steps, start-up, saves and steps\n"
	"redone, from the whole file; `dtrain-submit report` draws them); while\n"
	"RUNNING also last step: (the newest\n"
	"step and when it began) and, when it makes no progress, a NO PROGRESS:\n"
	"line naming the rank that is silent or overdue and its node; once it\n"
	"ended other than COMPLETED, failure: what the failing rank printed\n"
	"(<run dir>/failure). With a SWEEP: a row per task, labelled SWEEP_k (and\n"
	"the job it runs as after a resume), best validation loss first.\n"
	"Control characters read from files show as \\xNN.\n"
	"\n"
	"Progress comes from <run dir>/metrics.jsonl, which dtrain-run appends to\n"
	"(a requeued job appends more). - means not known: no step logged yet, no\n"
	"evaluation yet. Only the end of the file is read: an evaluation more than\n"
	"1 MiB before its end shows as -.\n"
	"\n"
	"options:\n"
	"  -h, --help  this text\n";

static const char help_cancel[] =
	"Usage: dtrain-submit cancel [--now] JOB\n"
	"\n"
	"Stop JOB (a job id, or the most recent job of that name) so that no work\n"
	"is lost: the ranks of a job that is training get its stop signal\n"
	"(preemption.signal), as before a preemption, save at the next step\n"
	"boundary and exit; its batch script, told by <run dir>/cancel, does not\n"
	"requeue it but cancels it. cancel waits for that up to the spec's\n"
	"preemption.lead_seconds (and 30 s more), then cancels the job anyway. A\n"
	"pending job, or one that has not started training, is cancelled at once.\n"
	"A cancelled job is not requeued; `dtrain-submit resume RUN_DIR` continues\n"
	"it. A job that had already ended is reported as such (exit 1).\n"
	"\n"
	"options:\n"
	"  --now       cancel at once, without asking the job to save\n"
	"  -h, --help  this text\n";

static const char help_resume[] =
	"Usage: dtrain-submit resume RUN_DIR [--site FILE] [--set KEY=VALUE]... [SLURM OPTIONS]\n"
	"                            [--dry-run] [--no-data-check]\n"
	"\n"
	"Continue a stopped run (cancelled, failed, out of requeues or of time) in\n"
	"its own run dir, as a new job: its spec.json under the --set values (more\n"
	"steps: --set train.max_steps=N; the site's locks and limits apply), a new\n"
	"job.sh, and dtrain-run resumes from the run's newest valid checkpoint and\n"
	"appends to its metrics.jsonl. What the previous job used is kept beside:\n"
	"spec-<id>.json, job-<id>.sh and its recovery counters as recovery-<id>/.\n"
	"Refused while the run's job is still pending or running, and (exit 3)\n"
	"when the run completed and the spec's train.epochs and train.max_steps\n"
	"leave nothing to do. Prints the new job id like submit.\n"
	"\n"
	"options:\n"
	"  --site FILE      a site file (as submit)\n"
	"  --set KEY=VALUE  override one spec key (repeatable); run_dir stays RUN_DIR\n"
	"  --after JOB      start once JOB completed (as submit); the previous job's\n"
	"                   resources.dependency is not kept\n"
	"  --dry-run        print the batch script; write and submit nothing\n"
	"  --no-data-check  do not open the data sets here\n"
	"  -h, --help       this text\n"
	"\n"
	"Slurm's options (-N, -n, -p, -t, --time-min, -A, --dependency) as for submit.\n"
	"\n"
	"exit codes: 0 submitted, 1 the job is still active, sbatch refused or I/O\n"
	"            error, 2 usage error, 3 invalid spec or site file, or nothing\n"
	"            left to do\n";

static const char help_sweep[] =
	"Usage: dtrain-submit sweep SPEC --grid KEY=V1,V2,... [--grid KEY=...]... [--seeds N]\n"
	"                           [--max-parallel K] [--after JOB] [--site FILE]\n"
	"                           [--set KEY=VALUE]... [SLURM OPTIONS] [--dry-run] [--no-data-check]\n"
	"\n"
	"Run SPEC once for every combination of the grids' values (and, with\n"
	"--seeds N, each combination with train.seed and model.init_seed 0..N-1),\n"
	"as one Slurm job array: task i is one run, as submit would make it, in\n"
	"its own run dir <sweep dir>/task-<i> with its resolved spec.json and\n"
	"job.sh, and its own preemption, recovery and requeue. Every task is\n"
	"resolved, checked against the site's locks and limits, rendered and its\n"
	"data checked before anything is created: one bad combination refuses the\n"
	"sweep, naming it. The tasks share their #SBATCH lines: a grid over\n"
	"resources.* is refused, and so is a checkpoint.dir of the spec that\n"
	"is not gridded (every task would share it).\n"
	"\n"
	"The sweep dir is the spec's run_dir, else <runs_root>/<name>-<time>; it\n"
	"holds sweep.json (the keys and every task's values), job.sh (the\n"
	"array's script, which starts task i's own job.sh) and job_id. Prints the\n"
	"array's job id; `status SWEEP` shows a row per task, sorted by its best\n"
	"validation loss; cancel and logs take the sweep or one task (SWEEP_TASK).\n"
	"\n"
	"options:\n"
	"  --grid KEY=V1,V2,...  values of one spec key (repeatable; commas inside\n"
	"                        brackets belong to a value: model.hidden=[64,64],[128])\n"
	"  --seeds N             each combination N times, seeds 0..N-1\n"
	"  --max-parallel K      at most K tasks running at once (sbatch --array=...%K)\n"
	"  --array=0-M[%K]       sbatch's spelling: --seeds M+1 [--max-parallel K];\n"
	"                        --array=%K: --max-parallel K\n"
	"  --after JOB           start once JOB completed (as submit)\n"
	"  --site, --set, --dry-run, --no-data-check, Slurm's options: as submit;\n"
	"                        --set applies to every task, before the grids\n"
	"  -h, --help            this text\n"
	"\n"
	"exit codes: 0 submitted, 1 sbatch refused or I/O error, 2 usage error,\n"
	"            3 a combination is invalid (named) or the site file is\n";

static const char help_logs[] =
	"Usage: dtrain-submit logs [-f] JOB\n"
	"\n"
	"Print the output of JOB (<run dir>/slurm-<id>.out: stdout and stderr of\n"
	"every run of the job, requeues appended).\n"
	"\n"
	"options:\n"
	"  -f, --follow  keep printing new output until the job has ended (Ctrl-C stops)\n"
	"  -h, --help    this text\n";

static const char help_report[] =
	"Usage: dtrain-submit report JOB|RUN_DIR [-o FILE] [--spec FILE]\n"
	"\n"
	"Write the report of a run: one self-contained HTML file (SVG and CSS\n"
	"inline, no network, no external script or font: it opens from a file://\n"
	"path) with\n"
	"  - the run's name, model, layout, device and state (and Slurm's, for a JOB);\n"
	"  - goodput: seconds in productive steps, in start-up (each start to its\n"
	"    first step), in saves (training stalled for checkpoints), in work\n"
	"    redone after a restart (steps an earlier start had logged), and, when\n"
	"    <run dir>/events.jsonl records the job's starts and stops, the\n"
	"    allocated node-time and how much of it was idle;\n"
	"  - curves against step and against wall time: training loss, validation\n"
	"    or test loss, bits per byte and accuracy where evaluated, learning\n"
	"    rate, gradient norm, throughput (tokens/s for a GPT, samples/s else);\n"
	"    a log-scale y axis for a loss that spans more than a decade; each\n"
	"    point's value shows on hover;\n"
	"  - where a step's time goes (compute, pipeline wait, gradient wait, data,\n"
	"    optimizer: the medians, stacked) and the pipeline bubble against the\n"
	"    schedule's (p-1)/m;\n"
	"  - the run's timeline: each start, checkpoint (size, stall), stop and its\n"
	"    signal, resume (from which step, steps redone), end, and the job's\n"
	"    starts and stops with their cause from events.jsonl.\n"
	"\n"
	"A SWEEP gets one page: the table status SWEEP prints, and every task's\n"
	"training and validation loss against step and against wall time, on\n"
	"shared axes, a colour per task.\n"
	"\n"
	"JOB is resolved as status does; an argument with a '/' or naming a\n"
	"directory here is a run dir (also one run by hand with dtrain-run). It\n"
	"reads <run dir>/metrics.jsonl, events.jsonl when present and spec.json.\n"
	"The report can be written again while the job runs: a line still being\n"
	"written is left out. The file is replaced atomically. Prints its path.\n"
	"\n"
	"options:\n"
	"  -o, --output FILE  write it there (default: <run dir>/report.html)\n"
	"  --spec FILE        the run's resolved spec when the run dir has no\n"
	"                     spec.json (a run started by hand)\n"
	"  -h, --help         this text\n";

const char *launch_help(enum launch_cmd cmd)
{
	switch (cmd) {
	case LAUNCH_SUBMIT:
		return help_submit;
	case LAUNCH_VALIDATE:
		return help_validate;
	case LAUNCH_STATUS:
		return help_status;
	case LAUNCH_CANCEL:
		return help_cancel;
	case LAUNCH_LOGS:
		return help_logs;
	case LAUNCH_RESUME:
		return help_resume;
	case LAUNCH_SWEEP:
		return help_sweep;
	case LAUNCH_REPORT:
		return help_report;
	default:
		return help_program;
	}
}

/* --- option table --- */

struct cmd_def {
	enum launch_cmd cmd;
	const char *name;
	const char *options; /* the long options it takes, space-separated */
	int min_pos, max_pos; /* positional arguments */
};

#define SLURM_OPTIONS "--nodes --ntasks --partition --time --time-min --account --dependency"

static const struct cmd_def cmds[] = {
	{ LAUNCH_SUBMIT, "submit", "--site --set --after --array --dry-run --no-data-check --help " SLURM_OPTIONS, 1, 1 },
	{ LAUNCH_VALIDATE, "validate", "--site --set --no-data-check --help " SLURM_OPTIONS, 1, 1 },
	{ LAUNCH_STATUS, "status", "--help", 0, 1 },
	{ LAUNCH_CANCEL, "cancel", "--now --help", 1, 1 },
	{ LAUNCH_LOGS, "logs", "--follow --help", 1, 1 },
	{ LAUNCH_REPORT, "report", "--output --spec --help", 1, 1 },
	{ LAUNCH_RESUME, "resume", "--site --set --after --dry-run --no-data-check --help " SLURM_OPTIONS, 1, 1 },
	{ LAUNCH_SWEEP, "sweep", "--site --set --grid --seeds --max-parallel --array --after --dry-run --no-data-check --help " SLURM_OPTIONS, 1, 1 },
};

/* sbatch's one-letter options, and the long ones they stand for */
static const struct {
	char letter;
	const char *name;
} short_options[] = {
	{ 'N', "--nodes" }, { 'n', "--ntasks" }, { 'p', "--partition" }, { 't', "--time" },
	{ 'A', "--account" }, { 'f', "--follow" }, { 'h', "--help" }, { 'o', "--output" },
};

/* the spec key a Slurm option sets (--ntasks is not one: launch_args.ntasks) */
static const struct {
	const char *name, *key;
} slurm_keys[] = {
	{ "--nodes", "resources.nodes" }, { "--partition", "resources.partition" },
	{ "--time", "resources.time" }, { "--account", "resources.account" },
	{ "--dependency", "resources.dependency" }, { "--time-min", "resources.time_min" },
};

const char *launch_cmd_name(enum launch_cmd cmd)
{
	size_t i;

	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (cmds[i].cmd == cmd)
			return cmds[i].name;
	return "dtrain-submit";
}

/* Does cmd take the long option opt (without "=value")? */
static bool takes(const struct cmd_def *c, const char *opt, size_t len)
{
	const char *p = c->options;

	while ((p = strstr(p, opt)) != NULL) {
		if ((p == c->options || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\0') &&
		    !strncmp(p, opt, len))
			return true;
		p += 1;
	}
	return false;
}

/* --- parser --- */

static int usage_error(struct dt_err *err, const struct cmd_def *c, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int usage_error(struct dt_err *err, const struct cmd_def *c, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	dt_err_add(err, "%s: %s; try 'dtrain-submit %s --help'", c->name, line, c->name);
	return -EINVAL;
}

/* kv into out->sets; owned: kv is ours to free with out (else argv's) */
static int add_set(struct launch_args *out, const char *kv, bool owned, const struct cmd_def *c,
		   struct dt_err *err)
{
	const char **v;
	char **o;

	if (!strchr(kv, '=') || kv[0] == '=')
		return usage_error(err, c, "--set: expected KEY=VALUE (got '%s')", kv);
	v = realloc(out->sets, (out->n_sets + 1) * sizeof(*v));
	if (v)
		out->sets = v;
	o = v && owned ? realloc(out->owned, (out->n_owned + 1) * sizeof(*o)) : NULL;
	if (o)
		out->owned = o;
	if (!v || (owned && !o)) {
		dt_err_add(err, "--set: out of memory for %zu values", out->n_sets + 1);
		return -ENOMEM;
	}
	out->sets[out->n_sets++] = kv;
	if (owned)
		out->owned[out->n_owned++] = (char *)kv;
	return 0;
}

/* sweep --grid KEY=V1,V2,...: checked for its shape here, split by the sweep */
static int add_grid(struct launch_args *out, const char *kv, const struct cmd_def *c,
		    struct dt_err *err)
{
	const char **v;
	const char *eq = strchr(kv, '=');

	if (!eq || eq == kv || !eq[1])
		return usage_error(err, c, "--grid: expected KEY=V1,V2,... (got '%s')", kv);
	v = realloc(out->grids, (out->n_grids + 1) * sizeof(*v));
	if (!v) {
		dt_err_add(err, "--grid: out of memory");
		return -ENOMEM;
	}
	out->grids = v;
	out->grids[out->n_grids++] = kv;
	return 0;
}

/* --seeds N, --max-parallel K: a count from 1 to 1000 */
static int count_option(const char *name, const char *value, long *out, const struct cmd_def *c,
			struct dt_err *err)
{
	char *end;
	long n = strtol(value, &end, 10);

	if (!*value || *end || n < 1 || n > 1000)
		return usage_error(err, c, "%s: expected a number from 1 to 1000 (got '%s')", name, value);
	*out = n;
	return 0;
}

/* --array=0-M[%K] (sbatch's): M + 1 seeds, at most K at once; %K alone
 * (a sweep) the bound only */
static int array_option(const char *value, struct launch_args *out, const struct cmd_def *c,
			struct dt_err *err)
{
	const char *pct = strchr(value, '%');
	char *end;
	long m = -1, k = 0;

	if (pct != value) {
		if (strncmp(value, "0-", 2) || (m = strtol(value + 2, &end, 10)) < 0 || m > 999 ||
		    end == value + 2 || (*end && end != pct))
			m = -2;
	}
	if (pct && ((k = strtol(pct + 1, &end, 10)) < 1 || k > 1000 || *end || end == pct + 1))
		m = -2;
	if (m == -2 || (m == -1 && (!pct || c->cmd != LAUNCH_SWEEP)))
		return usage_error(err, c, "--array: expected 0-M or 0-M%%K (M + 1 runs, seeds 0..M, K at once)%s (got '%s')",
				   c->cmd == LAUNCH_SWEEP ? " or %K" : "", value);
	if (m >= 0)
		out->seeds = m + 1;
	if (k)
		out->max_parallel = k;
	return 0;
}

/* A Slurm option's value: --ntasks into out->ntasks, the others as the
 * --set of their spec key, after the --set options (launch_args.sets). */
static int add_slurm_option(struct launch_args *out, const char *name, const char *value,
			    const struct cmd_def *c, struct dt_err *err)
{
	char *kv, *end;
	size_t i;
	int rc;

	if (!*value)
		return usage_error(err, c, "%s needs a value", name);
	if (!strcmp(name, "--ntasks")) {
		long n = strtol(value, &end, 10);

		if (*end || n < 1 || n > 1000000)
			return usage_error(err, c, "--ntasks: expected the number of tasks in all (got '%s')", value);
		out->ntasks = n;
		return 0;
	}
	for (i = 0; i < sizeof(slurm_keys) / sizeof(slurm_keys[0]); i++)
		if (!strcmp(name, slurm_keys[i].name))
			break;
	if (i == sizeof(slurm_keys) / sizeof(slurm_keys[0]))
		return usage_error(err, c, "%s takes no value", name);
	kv = malloc(strlen(slurm_keys[i].key) + strlen(value) + 2);
	if (!kv) {
		dt_err_add(err, "%s: out of memory", name);
		return -ENOMEM;
	}
	sprintf(kv, "%s=%s", slurm_keys[i].key, value);
	rc = add_set(out, kv, true, c, err);
	if (rc)
		free(kv);
	return rc;
}

/* The option of c that name starts, when only one does ("--dry" for
 * "--dry-run"), into buf */
static const char *unique_prefix(const struct cmd_def *c, const char *name, char *buf, size_t size)
{
	const char *p = c->options, *found = NULL;
	size_t n = strlen(name), len = 0;

	if (n < 3)
		return NULL;
	while (*p) {
		size_t w = strcspn(p, " ");

		if (w > n && !strncmp(p, name, n)) {
			if (found)
				return NULL;
			found = p, len = w;
		}
		p += w + (p[w] == ' ');
	}
	if (!found || len >= size)
		return NULL;
	snprintf(buf, size, "%.*s", (int)len, found);
	return buf;
}

/* A one-letter option (-N 2, -N2) as the long one it stands for: its name
 * into name, a value written with it into *attached. False: none such. */
static bool short_option(const char *a, char *name, size_t size, const char **attached)
{
	size_t k;

	for (k = 0; k < sizeof(short_options) / sizeof(short_options[0]); k++)
		if (a[1] == short_options[k].letter) {
			snprintf(name, size, "%s", short_options[k].name);
			*attached = a[2] ? a + 2 : NULL;
			return true;
		}
	return false;
}

/* One option argument at argv[*i] (it starts with '-'); may consume the next. */
static int parse_option(int argc, char *const argv[], int *i, const struct cmd_def *c,
			struct launch_args *out, struct dt_err *err)
{
	const char *a = argv[*i];
	const char *eq = strchr(a, '=');
	const char *value = NULL, *inline_value = NULL; /* --opt=VALUE, -xVALUE */
	char name[64], hint[32];

	if (a[1] != '-') {
		if (!short_option(a, name, sizeof(name), &inline_value) || !takes(c, name, strlen(name)))
			return usage_error(err, c, "unknown option '%.2s'", a);
	} else {
		snprintf(name, sizeof(name), "%.*s", (int)(eq ? eq - a : (long)strlen(a)), a);
		inline_value = eq ? eq + 1 : NULL;
	}
	if (!takes(c, name, strlen(name))) {
		if (unique_prefix(c, name, hint, sizeof(hint)) ||
		    dt_closest_word(c->options, ' ', name, 4, hint, sizeof(hint)))
			return usage_error(err, c, "unknown option '%s' (did you mean '%s'?)", name, hint);
		return usage_error(err, c, "unknown option '%s'", name);
	}
	if (!strcmp(name, "--dry-run") || !strcmp(name, "--follow") || !strcmp(name, "--no-data-check") ||
	    !strcmp(name, "--now")) {
		/* Flags. */
		if (inline_value)
			return usage_error(err, c, "%s takes no value", name);
		if (!strcmp(name, "--dry-run"))
			out->dry_run = true;
		else if (!strcmp(name, "--follow"))
			out->follow = true;
		else if (!strcmp(name, "--now"))
			out->now = true;
		else
			out->no_data_check = true;
		return 0;
	}
	/* Options with a value: --opt VALUE, --opt=VALUE, -x VALUE, -xVALUE. */
	if (inline_value)
		value = inline_value;
	else if (*i + 1 < argc)
		value = argv[++*i];
	else
		return usage_error(err, c, "%s needs a value", name);
	if (!strcmp(name, "--set"))
		return add_set(out, value, false, c, err);
	if (!strcmp(name, "--grid"))
		return add_grid(out, value, c, err);
	if (!strcmp(name, "--seeds") || !strcmp(name, "--max-parallel"))
		return count_option(name, value, !strcmp(name, "--seeds") ? &out->seeds : &out->max_parallel,
				    c, err);
	if (!strcmp(name, "--array"))
		return array_option(value, out, c, err);
	if (!strcmp(name, "--after")) {
		if (!*value)
			return usage_error(err, c, "--after needs a job id or name");
		out->after = value;
		return 0;
	}
	if (!strcmp(name, "--output") || !strcmp(name, "--spec")) {
		if (!*value)
			return usage_error(err, c, "%s needs a file name", name);
		*(!strcmp(name, "--output") ? &out->output : &out->spec_path) = value;
		return 0;
	}
	if (strcmp(name, "--site"))
		return add_slurm_option(out, name, value, c, err);
	if (!*value)
		return usage_error(err, c, "%s needs a file name", name);
	out->site_path = value;
	return 0;
}

/* A first argument that is no command, no file and no file name, but
 * close to a command: a mistyped command ("stauts"), not a spec */
static bool mistyped_command(const char *a, char *hint, size_t size)
{
	char names[128] = "";
	size_t k;

	if (a[0] == '-' || strchr(a, '/') || strchr(a, '.') || access(a, F_OK) == 0)
		return false;
	for (k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++)
		snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", k ? " " : "",
			 cmds[k].name);
	return dt_closest_word(names, ' ', a, 3, hint, size) != NULL;
}

/* A command's one positional argument (NULL: none given) where it goes */
static int take_positional(const struct cmd_def *c, const char *arg, struct launch_args *out,
			   struct dt_err *err)
{
	if (c->cmd == LAUNCH_SUBMIT || c->cmd == LAUNCH_VALIDATE || c->cmd == LAUNCH_SWEEP) {
		out->spec_path = arg;
		return *arg ? 0 : usage_error(err, c, "SPEC is an empty file name");
	}
	if (c->cmd == LAUNCH_RESUME) {
		out->run_dir = arg;
		return *arg ? 0 : usage_error(err, c, "RUN_DIR is empty");
	}
	out->job = arg;
	return arg && !*arg ? usage_error(err, c, "JOB is empty") : 0;
}

int launch_parse_args(int argc, char *const argv[], struct launch_args *out,
		      struct dt_err *err)
{
	const struct cmd_def *c = &cmds[0];
	const char *pos[2] = { NULL, NULL };
	char hint[32];
	bool only_pos = false;
	int i = 1, n_pos = 0, rc = 0;
	size_t k;

	*out = (struct launch_args){ .cmd = LAUNCH_SUBMIT, .help_for = LAUNCH_HELP };
	if (argc < 2) {
		dt_err_add(err, "no command and no SPEC; try 'dtrain-submit --help'");
		return -EINVAL;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		out->cmd = LAUNCH_HELP;
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		out->cmd = LAUNCH_VERSION;
		return 0;
	}
	for (k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++) {
		if (!strcmp(argv[1], cmds[k].name)) {
			c = &cmds[k];
			i = 2;
			break;
		}
	}
	if (i == 1 && mistyped_command(argv[1], hint, sizeof(hint))) {
		dt_err_add(err, "unknown command '%s' (did you mean '%s'?); a spec file of that name is given as ./%s; try 'dtrain-submit --help'",
			   argv[1], hint, argv[1]);
		return -EINVAL;
	}
	out->cmd = c->cmd;
	/* --help anywhere (before "--") wins over every other problem. */
	for (k = (size_t)i; k < (size_t)argc && strcmp(argv[k], "--"); k++) {
		if (!strcmp(argv[k], "-h") || !strcmp(argv[k], "--help")) {
			out->cmd = LAUNCH_HELP;
			out->help_for = c->cmd;
			return 0;
		}
	}
	for (; i < argc; i++) {
		const char *a = argv[i];

		if (only_pos || a[0] != '-' || !strcmp(a, "-")) {
			if (n_pos >= c->max_pos) {
				rc = usage_error(err, c, "unexpected argument '%s'", a);
				goto out;
			}
			pos[n_pos++] = a;
		} else if (!strcmp(a, "--")) {
			only_pos = true;
		} else if ((rc = parse_option(argc, argv, &i, c, out, err)) != 0) {
			goto out;
		}
	}
	if (n_pos < c->min_pos) {
		rc = usage_error(err, c, "missing %s",
				 c->cmd == LAUNCH_SUBMIT || c->cmd == LAUNCH_VALIDATE ||
				 c->cmd == LAUNCH_SWEEP ? "SPEC" :
				 c->cmd == LAUNCH_RESUME ? "RUN_DIR" :
				 c->cmd == LAUNCH_REPORT ? "JOB or RUN_DIR" : "JOB");
		goto out;
	}
	rc = take_positional(c, pos[0], out, err);
	if (!rc && c->cmd == LAUNCH_SWEEP && out->n_grids == 0 && out->seeds == 0)
		rc = usage_error(err, c, "a sweep needs at least one --grid KEY=V1,V2,... or --seeds N");
out:
	if (rc)
		launch_args_free(out);
	return rc;
}

void launch_args_free(struct launch_args *a)
{
	size_t i;

	for (i = 0; i < a->n_owned; i++)
		free(a->owned[i]);
	free(a->owned);
	free(a->sets);
	free(a->grids);
	a->grids = NULL;
	a->n_grids = 0;
	a->owned = NULL;
	a->n_owned = 0;
	a->sets = NULL;
	a->n_sets = 0;
}
