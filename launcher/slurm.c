/*
 * slurm.c - what dtrain-submit asks Slurm after a submit: a job's state
 * (squeue, then scontrol) and the fields of `scontrol show job`. Each query
 * runs the client program without a shell (proc.c) and hides its stderr:
 * "Invalid job id" from squeue is an answer here, not an error.
 *
 * Sections: scontrol output, job state.
 */
#include "launcher/launch.h"
#include "launcher/internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- scontrol output --- */

char *launch__scontrol_field(const char *text, const char *key)
{
	size_t klen = strlen(key);
	const char *p;

	/* Fields are "Key=value" separated by spaces or newlines. */
	for (p = text; (p = strstr(p, key)) != NULL; p += klen) {
		size_t n;

		if ((p != text && !isspace((unsigned char)p[-1])) || p[klen] != '=')
			continue;
		p += klen + 1;
		n = strcspn(p, " \t\r\n");
		return strndup(p, n);
	}
	return NULL;
}

/* --- job state --- */

/* The first word of text into buf; false when there is none. */
static bool first_word(const char *text, char *buf, size_t size)
{
	size_t n;

	text += strspn(text, " \t\r\n");
	n = strcspn(text, " \t\r\n");
	if (n == 0 || n >= size)
		return false;
	memcpy(buf, text, n);
	buf[n] = '\0';
	return true;
}

void launch_job_state(const char *id, char *buf, size_t size)
{
	const char *squeue[] = { "squeue", "-h", "-j", id, "-o", "%T", NULL };
	const char *scontrol[] = { "scontrol", "show", "job", id, NULL };
	struct dt_buf out = {0};
	struct dt_err ignored = {0};
	char *state = NULL;
	int status;

	snprintf(buf, size, "ENDED");
	if (launch__run(&(struct launch__proc){ .argv = squeue, .out = &out,
						.err_mode = LAUNCH__STDERR_QUIET },
			&status, &ignored) == 0 &&
	    status == 0 && first_word(dt_buf_str(&out), buf, size))
		goto out;
	dt_buf_free(&out);
	if (launch__run(&(struct launch__proc){ .argv = scontrol, .out = &out,
						.err_mode = LAUNCH__STDERR_QUIET },
			&status, &ignored) == 0 &&
	    status == 0 && (state = launch__scontrol_field(dt_buf_str(&out), "JobState")) &&
	    *state && strlen(state) < size)
		snprintf(buf, size, "%s", state);
	else
		snprintf(buf, size, "ENDED");
out:
	free(state);
	dt_buf_free(&out);
}

bool launch_state_active(const char *state)
{
	static const char *const active[] = {
		"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED",
		"REQUEUED", "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT",
	};
	size_t i;

	for (i = 0; i < sizeof(active) / sizeof(active[0]); i++)
		if (!strcmp(state, active[i]))
			return true;
	return false;
}
