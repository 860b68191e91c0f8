/*
 * slurm.c - what dtrain-submit asks Slurm after a submit: a job's state
 * (squeue, then scontrol) and the fields of `scontrol show job`. Each query
 * runs the client program without a shell (proc.c), within
 * LAUNCH_SLURM_WAIT_S, and reads its stderr only to tell an unreachable
 * slurmctld: "Invalid job id" from squeue is an answer here, not an error.
 *
 * Sections: scontrol output, job state.
 */
#include "launcher/launch.h"
#include "launcher/internal.h"

#include <ctype.h>
#include <errno.h>
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

/* What a Slurm client wrote when it could not reach slurmctld. */
static bool no_contact(const char *err)
{
	return strstr(err, "Unable to contact slurm controller") ||
	       strstr(err, "Socket timed out") || strstr(err, "Connection refused") ||
	       strstr(err, "Zero Bytes were transmitted");
}

/* Runs a Slurm client (argv) within LAUNCH_SLURM_WAIT_S, its stdout into
 * out. True when it answered (exit 0); false otherwise, with
 * sl->unreachable set when it could not reach slurmctld or timed out. */
static bool ask(struct launch_slurm *sl, const char *const *argv, struct dt_buf *out)
{
	struct dt_buf errtext = {0};
	struct dt_err e = {0};
	int status = -1, rc;

	rc = launch__run(&(struct launch__proc){ .argv = argv, .out = out,
						 .err_mode = LAUNCH__STDERR_CAPTURE, .err = &errtext,
						 .timeout_s = LAUNCH_SLURM_WAIT_S },
			 &status, &e);
	if (rc == -ETIMEDOUT || (!rc && status != 0 && no_contact(dt_buf_str(&errtext)))) {
		sl->unreachable = true;
		const char *said = rc ? e.msg : dt_buf_str(&errtext);
		size_t n = strcspn(said, "\n");

		snprintf(sl->why, sizeof(sl->why), "%.*s", (int)(n < sizeof(sl->why) ? n : sizeof(sl->why) - 1), said);
	}
	dt_buf_free(&errtext);
	return !rc && status == 0;
}

/* squeue's reason a pending job waits, kept when a user should see it. */
static void keep_reason(const char *reason, struct launch_state *st)
{
	static const char *const usual[] = { "None", "Priority", "Resources", "(null)" };
	size_t i;

	for (i = 0; i < sizeof(usual) / sizeof(usual[0]); i++)
		if (!strcmp(reason, usual[i]))
			return;
	snprintf(st->reason, sizeof(st->reason), "%.*s", (int)sizeof(st->reason) - 1, reason);
}

void launch_job_state(struct launch_slurm *sl, const char *id, struct launch_state *st)
{
	const char *squeue[] = { "squeue", "-h", "-j", id, "-o", "%T %r", NULL };
	const char *scontrol[] = { "scontrol", "show", "job", id, NULL };
	struct dt_buf out = {0};
	char *state = NULL, reason[48];
	const char *text;

	memset(st, 0, sizeof(*st));
	snprintf(st->name, sizeof(st->name), sl->unreachable ? "UNKNOWN" : "ENDED");
	if (sl->unreachable)
		return;
	if (ask(sl, squeue, &out) && first_word(dt_buf_str(&out), st->name, sizeof(st->name))) {
		text = dt_buf_str(&out) + strspn(dt_buf_str(&out), " \t");
		text += strcspn(text, " \t");
		/* a job array (a sweep): a line per task or range of pending
		 * tasks; it runs while any of its tasks does */
		if (strstr(dt_buf_str(&out), "\nRUNNING ") && strcmp(st->name, "RUNNING")) {
			snprintf(st->name, sizeof(st->name), "RUNNING");
			goto out;
		}
		if (!strcmp(st->name, "PENDING") && first_word(text, reason, sizeof(reason)))
			keep_reason(reason, st);
		goto out;
	}
	dt_buf_free(&out);
	if (!sl->unreachable && ask(sl, scontrol, &out) &&
	    (state = launch__scontrol_field(dt_buf_str(&out), "JobState")) && *state &&
	    strlen(state) < sizeof(st->name))
		snprintf(st->name, sizeof(st->name), "%s", state);
	else
		snprintf(st->name, sizeof(st->name), sl->unreachable ? "UNKNOWN" : "ENDED");
out:
	free(state);
	dt_buf_free(&out);
}

const char *launch_state_text(const struct launch_state *st, char *buf, size_t size)
{
	if (!strcmp(st->name, "UNKNOWN"))
		snprintf(buf, size, "unknown (Slurm unreachable)");
	else if (st->reason[0])
		snprintf(buf, size, "%s (%s)", st->name, st->reason);
	else
		snprintf(buf, size, "%s", st->name);
	return buf;
}

bool launch_state_active(const char *state)
{
	static const char *const active[] = {
		"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED",
		"REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "SPECIAL_EXIT",
		"RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "UNKNOWN",
	};
	size_t i;

	for (i = 0; i < sizeof(active) / sizeof(active[0]); i++)
		if (!strcmp(state, active[i]))
			return true;
	return false;
}
