/*
 * submit_cmd.c - the commands validate, submit and resume: plan (submit.c),
 * then submit a new run (submit.c) or continue one (resume.c), and print
 * what happened.
 */
#include "launcher/cli.h"
#include "launcher/internal.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/cpus.h"

/* train.precision "bf16" on the CPU where this machine's CPU has no bf16
 * instructions: a warning, not an error (the compute nodes' CPUs may
 * differ), since oneDNN then emulates them, slower than fp32 itself */
static void warn_bf16(const struct spec *s)
{
	char model[160];
	bool native;

	if (!s->train.precision || strcmp(s->train.precision, "bf16") ||
	    !strcmp(s->train.device, "cuda") || !dt_cpu_probe(model, sizeof(model), &native) || native)
		return;
	fprintf(stderr, "dtrain-submit: warning: train.precision \"bf16\": this machine's CPU (%s) has no bf16 instructions (avx512_bf16, amx_bf16), so oneDNN emulates them, slower than fp32 (about 0.4x); hint: train.precision \"fp32\", unless the compute nodes' CPUs have them\n",
		model[0] ? model : "model unknown");
}

int launch_cmd_validate(const struct launch_args *a, struct dt_err *err)
{
	struct launch_plan p;
	int rc = launch_plan(a, &p, err);

	if (!rc) {
		warn_bf16(&p.spec);
		fputs(dt_buf_str(&p.spec_json), stdout);
		fprintf(stderr, "dtrain-submit: %s: valid; it would run in %s\n",
			a->spec_path, p.spec.run_dir);
	}
	launch_plan_free(&p);
	return rc;
}

/* submit, and resume (a new job continuing a run in its run dir) */
int launch_cmd_submit(const struct launch_args *a, struct dt_err *err)
{
	bool resume = a->cmd == LAUNCH_RESUME;
	struct dt_err warn = {0};
	struct launch_job job = {0};
	struct launch_plan p;
	int rc = launch_plan(a, &p, err);

	if (rc)
		goto out;
	warn_bf16(&p.spec);
	if (a->dry_run) {
		fputs(dt_buf_str(&p.script), stdout);
		fprintf(stderr, "dtrain-submit: dry run: nothing written, nothing submitted; the run %s %s\n",
			resume ? "would continue in" : "dir would be", p.spec.run_dir);
		goto out;
	}
	rc = resume ? launch_resume(&p, &job, &warn, err) : launch_submit(&p, &job, &warn, err);
	if (rc)
		goto out;
	launch__print_warnings(&warn);
	printf("%s\n", job.id);
	fflush(stdout);
	fprintf(stderr, "dtrain-submit: submitted job %s (%s)%s\n"
			"  run dir: %s%s\n"
			"  status:  dtrain-submit status %s\n"
			"  logs:    dtrain-submit logs -f %s\n",
		job.id, job.name, resume ? ", continuing its run" : "", job.run_dir,
		resume ? " (dtrain-run resumes from its newest valid checkpoint)" : "", job.id, job.id);
out:
	launch_job_free(&job);
	launch_plan_free(&p);
	return rc;
}
