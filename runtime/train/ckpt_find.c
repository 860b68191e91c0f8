/*
 * ckpt_find.c - finding the checkpoint a run starts from, for
 * checkpointing.c (resume) and init_from.c (checkpoint.init_from): a
 * checkpoint verified with its files spread over the ranks, a directory's
 * newest valid one with fallback, and the lines and agreement both use
 * (ckpt_internal.h).
 *
 * Sections: helpers, finding.
 */
#include "runtime/train/ckpt_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <mpi.h>

#include "runtime/world/agree.h"

/* --- helpers --- */

/* A step every rank took alone, agreed on (world/agree.h): 0, or -EINVAL
 * with the first failing rank's message e moved to err (-EIO when MPI
 * failed). */
int rt__ckpt_agreed(int rc, struct dt_err *e, struct dt_err *err)
{
	rc = rt_agree(rc, e, NULL);
	if (e->count)
		dt_err_add(err, "%s", e->msg);
	return rc == RT_AGREE_BROKEN ? -EIO : rc ? -EINVAL : 0;
}

/* Prints each line of e as a warning of this rank, then clears e. */
void rt__ckpt_warn_lines(const struct rt_ckpt *c, struct dt_err *e)
{
	const char *s = e->msg, *nl;

	while (*s) {
		nl = strchr(s, '\n');
		if (!nl)
			nl = s + strlen(s);
		fprintf(stderr, "dtrain-run: rank %d: warning: %.*s\n", c->g->rank, (int)(nl - s), s);
		s = *nl ? nl + 1 : nl;
	}
	fflush(stderr);
	dt_err_clear(e);
}

void rt__ckpt_say(const struct rt_ckpt *c, const char *fmt, ...)
{
	va_list ap;

	if (c->g->rank != 0 || c->quiet)
		return;
	va_start(ap, fmt);
	fputs("dtrain-run: ", stdout);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}

/* --- finding --- */

/* Is path/CKPT_MANIFEST there: path is meant as one checkpoint. */
static bool is_checkpoint(const char *path)
{
	char m[4200];
	struct stat sb;

	snprintf(m, sizeof(m), "%s/%s", path, CKPT_MANIFEST);
	return stat(m, &sb) == 0;
}

/* Verifies the checkpoint at path with the files spread over the ranks;
 * *ok on every rank. The manifest goes to *m (every rank reads it). A rank
 * that finds a problem prints it as a warning (with prefix) unless
 * keep_err, in which case it goes to err and *reporter names that rank. */
static int verify_spread(struct rt_ckpt *c, const char *path, struct ckpt_manifest *m, bool *ok,
			 bool keep_err, int *reporter, struct dt_err *err)
{
	struct dt_err e = { 0 };
	int rc, i, bad = -1, world = c->g->world;

	rc = ckpt_manifest_read(path, m, &e);
	for (i = c->g->rank; !rc && i < m->n_files; i += world)
		rc = ckpt_verify_file(path, &m->files[i], &e);
	if (rt_agree(rc, &e, &bad) == RT_AGREE_BROKEN)
		return dt_err_add(err, "%s", e.msg), -EIO;
	*ok = bad < 0;
	*reporter = bad;
	if (bad >= 0 && c->g->rank == bad) {
		if (keep_err)
			dt_err_add(err, "%s", e.msg);
		else {
			struct dt_err w = { 0 };

			dt_err_add(&w, "%s: skipped, falling back to an older checkpoint: %s", path, e.msg);
			rt__ckpt_warn_lines(c, &w);
		}
	}
	return 0;
}

/* Rank 0: a line on stderr for each entry of dir that looks like a
 * checkpoint but is not listed (step-12): a run that starts afresh beside
 * it says why it did not resume from it. */
static void note_strays(const char *dir)
{
	struct dt_err notes = { 0 };
	const char *s, *nl;

	if (!ckpt_list_strays(dir, &notes))
		return;
	for (s = notes.msg; *s; s = *nl ? nl + 1 : nl) {
		nl = strchr(s, '\n');
		if (!nl)
			nl = s + strlen(s);
		fprintf(stderr, "dtrain-run: note: %.*s\n", (int)(nl - s), s);
	}
	fflush(stderr);
}

/* Picks the checkpoint to resume from: the newest valid one under dir
 * (with fallback); *found = false when none. Collective. */
int rt__ckpt_newest_valid(struct rt_ckpt *c, const char *dir, struct ckpt_manifest *m, char *out,
			size_t size, bool *found, int *skipped, struct dt_err *err)
{
	int64_t *steps = NULL, n64 = 0;
	int n = 0, i, rc = 0, rep;
	struct dt_err e = { 0 };

	*found = false;
	*skipped = 0;
	/* rank 0 lists, so that every rank walks the same candidates; a
	 * directory it cannot list, or a step-<8 digits> entry that is no
	 * checkpoint (a file, a dangling link), stops every rank (-1): a
	 * fresh start would save over what stands there */
	if (c->g->rank == 0)
		note_strays(dir);
	if (c->g->rank == 0 && ckpt_list(dir, &steps, &n, &e)) {
		dt_err_add(err, "%s", e.msg);
		dt_err_add(err, "%s: not starting afresh over it (checkpoint.resume \"never\" starts from step 0 anyway)",
			   dir);
		n = -1;
	}
	n64 = n;
	if (MPI_Bcast(&n64, 1, MPI_INT64_T, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
		return free(steps), dt_err_add(err, "rank %d: MPI_Bcast failed", c->g->rank), -EIO;
	if (n64 < 0)
		return -EINVAL;
	n = (int)n64;
	if (c->g->rank != 0 && n > 0) {
		steps = calloc((size_t)n, sizeof(*steps));
		if (!steps)
			return -ENOMEM; /* the others wait in the Bcast: the job aborts */
	}
	if (n > 0 && MPI_Bcast(steps, n, MPI_INT64_T, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
		free(steps);
		return dt_err_add(err, "rank %d: MPI_Bcast failed", c->g->rank), -EIO;
	}
	for (i = 0; i < n && !*found; i++) {
		char path[4200];
		char name[32];

		ckpt_step_name(steps[i], name, sizeof(name));
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		rc = verify_spread(c, path, m, found, false, &rep, err);
		if (rc)
			break;
		if (*found)
			snprintf(out, size, "%s", path);
		else
			(*skipped)++;
	}
	free(steps);
	return rc;
}

/* The checkpoint that the spec's key names (want): a checkpoint, which
 * must be usable (no silent fresh start), or a directory's newest valid
 * one (a run dir's are in its checkpoints/). Collective. */
int rt__ckpt_named_point(struct rt_ckpt *c, const char *want, const char *key,
		       struct ckpt_manifest *m, char *path, size_t size, bool *found,
		       struct dt_err *err)
{
	char run_ckpts[4200];
	struct stat st;
	int rc, rep = -1, skipped;

	if (is_checkpoint(want)) {
		snprintf(path, size, "%s", want);
		rc = verify_spread(c, path, m, found, true, &rep, err);
		return rc ? rc : *found ? 0 : -EINVAL;
	}
	/* a run dir, as every dtrain-ckpt command takes it: its checkpoints/ */
	if (snprintf(run_ckpts, sizeof(run_ckpts), "%s/checkpoints", want) < (int)sizeof(run_ckpts) &&
	    stat(run_ckpts, &st) == 0 && S_ISDIR(st.st_mode))
		want = run_ckpts;
	rc = rt__ckpt_newest_valid(c, want, m, path, size, found, &skipped, err);
	if (!rc && !*found) {
		if (c->g->rank == 0)
			dt_err_add(err, "%s: %s: no valid checkpoint there%s", key, want,
				   strcmp(key, "checkpoint.resume") ? ""
					: " (hint: \"auto\" starts afresh when there is none)");
		rc = -EINVAL;
	}
	return rc;
}
