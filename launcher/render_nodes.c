/*
 * render_nodes.c - the batch script's bad nodes: the probe of every node
 * after a crash, and the nodes left out of the job's next starts (a node
 * that does not answer, one Slurm holds for down after a node failure, one
 * whose replica disagreed, one where two crashes began).
 *
 * Slurm refuses to change a running job's excluded nodes ("Job is no longer
 * pending execution"), and a requeue ends the batch script; but once the
 * requeue is through the job is pending while its allocation completes,
 * and the update is taken then: so the script requeues first and sets the
 * excluded nodes after, through the SIGTERM the requeue brings.
 *
 * Sections: the shell functions, the check at a start, after a crash.
 */
#include "launcher/render.h"
#include "base/str.h"

#include <string.h>

/* --- the shell functions --- */

/* dtrain_usable_nodes: how many nodes of the job's partition it could run
 * on (those with every feature of an "a&b" resources.constraint, with GPUs
 * when it asks for them); nothing when that cannot be told (a constraint
 * with |, [ ], counts or !). */
static void render_usable(struct render *r)
{
	const struct spec_resources *res = &r->spec->resources;
	const char *c = res->constraint ? res->constraint : "";
	char need[260];
	size_t i;

	launch__render_put(r, "dtrain_usable_nodes() {\n");
	if (strlen(c) >= sizeof(need) ||
	    strspn(c, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-&") != strlen(c)) {
		launch__render_put(r, "\t: # resources.constraint is more than features joined by &\n}\n");
		return;
	}
	for (i = 0; c[i]; i++)
		need[i] = c[i] == '&' ? ' ' : c[i];
	need[i] = '\0';
	launch__render_put(r, "\tlocal part=${SLURM_JOB_PARTITION:-}\n"
	                      "\tsinfo -h -N ${part:+-p \"$part\"} -o '%%N %%f %%G' 2>/dev/null | awk -v need=");
	if (!r->rc)
		r->rc = dt_shell_quote(r->b, need);
	launch__render_put(r, " -v gpus=%d '\n"
	                      "\t\t{ ok = 1; n = split(need, w, \" \"); for (i = 1; i <= n; i++) if (!index(\",\" $2 \",\", \",\" w[i] \",\")) ok = 0\n"
	                      "\t\t  if (gpus && $3 == \"(null)\") ok = 0\n"
	                      "\t\t  if (ok) print $1 }' | sort -u | wc -l\n"
	                      "}\n", res->gpus_per_node > 0);
}

/* The record of the nodes left out: recovery/excluded, and its bounds. */
static void render_records(struct render *r)
{
	const struct spec *s = r->spec;

	launch__render_put(r, "# --- bad nodes: left out of the job's next starts ---\n"
	                      "# A node that did not answer the probe after a crash, one that Slurm holds\n"
	                      "# for down after it requeued the job for a node failure, one whose replica\n"
	                      "# disagreed with the others, or one where two crashes began is written down\n"
	                      "# in recovery/excluded (\"NODE WHY\" lines) and the job is requeued without\n"
	                      "# it. Slurm updates a job's excluded nodes (sbatch --exclude) only while it\n"
	                      "# is pending, which it is from its requeue on (its allocation completing):\n"
	                      "# the update follows the requeue, through the SIGTERM that brings. At most\n"
	                      "# recovery.max_excluded_nodes, and never so many that the partition would\n"
	                      "# keep fewer nodes than resources.nodes' minimum (the job would wait for\n"
	                      "# ever).\n"
	                      "dtrain_append() { # FILE LINE: recovery/FILE rewritten whole with LINE added (as dtrain_set)\n"
	                      "\tlocal d=\"$DTRAIN_RUN_DIR/recovery\"\n"
	                      "\t! dtrain_refused \"$d\" -d && mkdir -p \"$d\" && ! dtrain_refused \"$d/$1\" &&\n"
	                      "\t\trm -f \"$d/.$1.tmp\" &&\n"
	                      "\t\t(set -C; { cat \"$d/$1\" 2>/dev/null; echo \"$2\"; } >\"$d/.$1.tmp\") &&\n"
	                      "\t\tmv -fT \"$d/.$1.tmp\" \"$d/$1\"\n"
	                      "}\n"
	                      "dtrain_lines() { # FILE WORD: the lines of recovery/FILE that begin with WORD\n"
	                      "\tawk -v k=\"$2\" '$1 == k { n++ } END { print n + 0 }' \"$DTRAIN_RUN_DIR/recovery/$1\" 2>/dev/null || echo 0\n"
	                      "}\n"
	                      "dtrain_excluded() { # the nodes left out, comma-separated\n"
	                      "\tawk 'NF { printf \"%%s%%s\", n++ ? \",\" : \"\", $1 }' \"$DTRAIN_RUN_DIR/recovery/excluded\" 2>/dev/null\n"
	                      "}\n"
	                      "dtrain_exclude() { # NODE WHY: 0 when NODE is left out from now on\n"
	                      "\tlocal node=$1 why=$2 n total part=${SLURM_JOB_PARTITION:-}\n"
	                      "\tcase $node in '' | *[!A-Za-z0-9._-]*) return 1 ;; esac\n"
	                      "\t[ \"$(dtrain_lines excluded \"$node\")\" -eq 0 ] || return 0\n"
	                      "\tn=$(awk 'NF { k++ } END { print k + 0 }' \"$DTRAIN_RUN_DIR/recovery/excluded\" 2>/dev/null) || n=0\n"
	                      "\tif [ \"$n\" -ge %ld ]; then\n"
	                      "\t\techo \"dtrain: node $node is bad ($why), but stays: $n nodes are left out already (recovery.max_excluded_nodes = %ld)\" >&2\n"
	                      "\t\treturn 1\n"
	                      "\tfi\n"
	                      "\ttotal=$(dtrain_usable_nodes)\n"
	                      "\tif [ -z \"$total\" ]; then\n"
	                      "\t\techo \"dtrain: node $node is bad ($why), but stays: which nodes of partition ${part:-default} match resources.constraint cannot be told here\" >&2\n"
	                      "\t\treturn 1\n"
	                      "\tfi\n"
	                      "\tif [ $((total - n - 1)) -lt %ld ]; then\n"
	                      "\t\techo \"dtrain: node $node is bad ($why), but stays: partition ${part:-default} has $total nodes the job can use, and without it and the $n left out before fewer than the %ld it needs would remain\" >&2\n"
	                      "\t\treturn 1\n"
	                      "\tfi\n"
	                      "\tif ! dtrain_append excluded \"$node $why\"; then\n"
	                      "\t\techo \"dtrain: node $node is bad ($why), but stays: cannot write $DTRAIN_RUN_DIR/recovery/excluded\" >&2\n"
	                      "\t\treturn 1\n"
	                      "\tfi\n"
	                      "\tdtrain_event node_excluded \",\\\"node\\\":\\\"$node\\\",\\\"detail\\\":\\\"$(dtrain_text \"$why\")\\\"\"\n"
	                      "\techo \"dtrain: node $node is left out of the job's next starts: $why (node $((n + 1)) of at most %ld)\" >&2\n"
	                      "}\n",
	                   s->recovery.max_excluded_nodes, s->recovery.max_excluded_nodes, s->resources.nodes.min, s->resources.nodes.min, s->recovery.max_excluded_nodes);
}

/* dtrain_leave_out_list: the job's excluded nodes, read before a requeue;
 * dtrain_leave_out LIST: their update after it. */
static void render_leave_out(struct render *r)
{
	launch__render_put(r, "dtrain_leave_out_list() { # before a requeue: the excluded nodes the job is to have\n"
	                      "\tlocal list had\n"
	                      "\tlist=$(dtrain_excluded)\n"
	                      "\t[ -n \"$list\" ] || return 0\n"
	                      "\t# with those the job had already (sbatch --exclude, the site's)\n"
	                      "\thad=$(scontrol show job -o \"$dtrain_job_id\" 2>/dev/null | sed -n 's/.* ExcNodeList=\\([^ ]*\\).*/\\1/p')\n"
	                      "\tcase $had in '' | '(null)') echo \"$list\" ;; *) { scontrol show hostnames \"$had\" 2>/dev/null; tr ',' '\\n' <<<\"$list\"; } | sort -u | paste -sd, - ;; esac\n"
	                      "}\n"
	                      "dtrain_leave_out() { # LIST, after a requeue: the job's excluded nodes, while it is pending\n"
	                      "\tlocal list=$1\n"
	                      "\t[ -n \"$list\" ] || return 0\n"
	                      "\tfor _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do\n"
	                      "\t\tif (trap '' TERM; exec scontrol update JobId=\"$dtrain_job_id\" ExcNodeList=\"$list\") 2>/dev/null; then\n"
	                      "\t\t\techo \"dtrain: job $dtrain_job_id leaves out $list from its next starts\" >&2\n"
	                      "\t\t\treturn 0\n"
	                      "\t\tfi\n"
	                      "\t\t(trap '' TERM; exec sleep 0.5)\n"
	                      "\tdone\n"
	                      "\techo \"dtrain: scontrol update JobId=$dtrain_job_id ExcNodeList=$list was refused; the next start checks its nodes again\" >&2\n"
	                      "}\n");
}

/* dtrain_probe: which nodes of the allocation answer. */
static void render_probe(struct render *r)
{
	launch__render_put(r, "# dtrain_probe: 0 when every node of the allocation answers; else the nodes\n"
	                      "# that did not in dtrain_silent. One step of one task on each node at once\n"
	                      "# (--overlap: the failed step may still hold the CPUs of a node that\n"
	                      "# answers); a node whose step cannot start within %ld s did not answer\n"
	                      "# (srun retries while a node that is gone still holds the last step). Past\n"
	                      "# 64 nodes one step over all of them, which names none. dtrain_probed: how\n"
	                      "# many nodes were probed one by one.\n"
	                      "dtrain_probe() {\n"
	                      "\tlocal nodes node p pids='' rc=0 step_rc=$dtrain_rc\n"
	                      "\tdtrain_silent= dtrain_probed=0\n"
	                      "\tnodes=$(scontrol show hostnames \"${SLURM_JOB_NODELIST:-}\" 2>/dev/null)\n"
	                      "\tif [ -z \"$nodes\" ] || [ \"$(printf '%%s\\n' \"$nodes\" | wc -l)\" -gt 64 ]; then\n"
	                      "\t\ttimeout -k 5 %ld srun",
	                   (long)LAUNCH__PROBE_S, (long)LAUNCH__PROBE_S);
	launch__render_srun_extra(r);
	launch__render_put(r, " --nodes=\"${SLURM_JOB_NUM_NODES:-1}\" --ntasks=\"${SLURM_JOB_NUM_NODES:-1}\" --ntasks-per-node=1 --cpus-per-task=1 --mpi=none --kill-on-bad-exit=1 true 2>>\"$dtrain_probe_log\"\n"
	                      "\t\treturn\n"
	                      "\tfi\n"
	                      "\tfor node in $nodes; do\n"
	                      "\t\ttimeout -k 5 %ld srun",
	                   (long)LAUNCH__PROBE_S);
	launch__render_srun_extra(r);
	launch__render_put(r, " --nodelist=\"$node\" --nodes=1 --ntasks=1 --ntasks-per-node=1 --cpus-per-task=1 --overlap --mpi=none true 2>>\"$dtrain_probe_log\" &\n"
	                      "\t\tpids=\"$pids $!:$node\"\n"
	                      "\t\tdtrain_probed=$((dtrain_probed + 1))\n"
	                      "\tdone\n"
	                      "\tfor p in $pids; do\n"
	                      "\t\tdtrain_wait \"${p%%%%:*}\"\n"
	                      "\t\t[ \"$dtrain_rc\" -eq 0 ] || { rc=1; dtrain_silent=\"$dtrain_silent${dtrain_silent:+ }${p#*:}\"; }\n"
	                      "\tdone\n"
	                      "\tdtrain_rc=$step_rc\n"
	                      "\treturn $rc\n"
	                      "}\n"
	                      "\n");
}

void launch__render_bad_nodes(struct render *r)
{
	render_usable(r);
	render_records(r);
	render_leave_out(r);
	render_probe(r);
}

/* --- the check at a start --- */

void launch__render_start_check(struct render *r)
{
	launch__render_put(r, "# After a node failure that Slurm requeued the job for (this shell ended\n"
	                      "# with the step): the nodes of the last start that Slurm holds for down,\n"
	                      "# drained or not responding are left out. Then a start on a node left out\n"
	                      "# before (the update after the requeue did not reach Slurm) is requeued\n"
	                      "# again.\n"
	                      "if [ \"$dtrain_new_failure\" -eq 1 ]; then\n"
	                      "\tdtrain_prev=$(sed -n 's/.*\"event\":\"job_start\".*\"nodes\":\"\\([^\"]*\\)\".*/\\1/p' \"$DTRAIN_RUN_DIR/events.jsonl\" 2>/dev/null | tail -n 1)\n"
	                      "\tfor dtrain_n in $(scontrol show hostnames \"$dtrain_prev\" 2>/dev/null); do\n"
	                      "\t\tdtrain_s=$(sinfo -h -n \"$dtrain_n\" -o %%t 2>/dev/null | head -n 1)\n"
	                      "\t\tcase $dtrain_s in\n"
	                      "\t\tdown* | drain* | drng* | fail* | *'*') dtrain_exclude \"$dtrain_n\" \"Slurm requeued the job after a node failure and holds the node for $dtrain_s\" || true ;;\n"
	                      "\t\tesac\n"
	                      "\tdone\n"
	                      "fi\n"
	                      "dtrain_bad_here=$(scontrol show hostnames \"${SLURM_JOB_NODELIST:-}\" 2>/dev/null |\n"
	                      "\tawk 'NR == FNR { if (NF) bad[$1] = 1; next } ($1 in bad)' \"$DTRAIN_RUN_DIR/recovery/excluded\" - 2>/dev/null | paste -sd, -)\n"
	                      "if [ -n \"$dtrain_bad_here\" ] && [ -n \"$dtrain_job_id\" ] && [ \"$dtrain_term\" -eq 0 ]; then\n"
	                      "\techo \"dtrain: this start's nodes include $dtrain_bad_here, left out before; requeueing job $dtrain_job_id without them\" >&2\n"
	                      "\tif dtrain_requeue left_out; then\n"
	                      "\t\texit 0\n"
	                      "\tfi\n"
	                      "\techo \"dtrain: $dtrain_why_not; starting on these nodes all the same\" >&2\n"
	                      "fi\n"
	                      "\n");
}

/* --- after a crash --- */

void launch__render_after_crash(struct render *r)
{
	const struct spec *s = r->spec;

	launch__render_put(r, "\t# Before starting again: does every node of the allocation answer? One\n"
	                      "\t# that does not is left out, and the job requeued to start again where\n"
	                      "\t# every node answers: a node failure, counted here (node_failures) before\n"
	                      "\t# the requeue, so that the next start does not count it again.\n"
	                      "\tif ! dtrain_probe; then\n"
	                      "\t\t[ \"$dtrain_term\" -eq 0 ] || break\n"
	                      "\t\tdtrain_why=$(grep -v '^srun: Job [0-9]* step creation' \"$dtrain_probe_log\" 2>/dev/null | tail -n 1)\n"
	                      "\t\tdtrain_event node_failure \",\\\"node\\\":\\\"$(dtrain_text \"$dtrain_silent\")\\\",\\\"detail\\\":\\\"$(dtrain_text \"no job step could start on ${dtrain_silent:-all nodes}${dtrain_why:+: $dtrain_why}\")\\\"\"\n"
	                      "\t\techo \"dtrain: a node of the allocation does not answer: no job step could start on ${dtrain_silent:-all ${SLURM_JOB_NUM_NODES:-1} nodes} within %ld s${dtrain_why:+ ($dtrain_why)}; requeueing job $dtrain_job_id to start again where every node answers (node failure $(($(dtrain_count node_failures) + 1)) of at most %ld, recovery.max_node_failures)\" >&2\n"
	                      "\t\t# none answering at all is Slurm's trouble more likely than the nodes'\n"
	                      "\t\tif [ \"$(echo $dtrain_silent | wc -w)\" -lt \"$dtrain_probed\" ] || [ \"$dtrain_probed\" -eq 1 ]; then\n"
	                      "\t\t\tfor dtrain_n in $dtrain_silent; do\n"
	                      "\t\t\t\tdtrain_exclude \"$dtrain_n\" \"it did not answer after a crash: no job step could start there within %ld s\" || true\n"
	                      "\t\t\tdone\n"
	                      "\t\tfi\n"
	                      "\t\tif dtrain_requeue node_failures; then\n"
	                      "\t\t\texit 0\n"
	                      "\t\tfi\n"
	                      "\t\techo \"dtrain: $dtrain_why_not; submit the spec again to resume\" >&2\n"
	                      "\t\tbreak\n"
	                      "\tfi\n"
	                      "\t# The crash's own bad node: where the replica that disagreed ran (its\n"
	                      "\t# memory or device corrupts silently), or where a crash began (srun's\n"
	                      "\t# first task to end) the second time. Left out; once the crash is\n"
	                      "\t# counted below, the job is requeued without it. A crash on an error of\n"
	                      "\t# the run's (cause error: a full disk, a refused path) blames no node.\n"
	                      "\t[ \"$dtrain_term\" -eq 0 ] || break\n"
	                      "\tdtrain_bad=\n"
	                      "\tcase $dtrain_cause in\n"
	                      "\treplicas)\n"
	                      "\t\tif dtrain_exclude \"$dtrain_cause_node\" \"its replica disagreed with the others\"; then\n"
	                      "\t\t\tdtrain_bad=$dtrain_cause_node\n"
	                      "\t\tfi ;;\n"
	                      "\tcrash)\n"
	                      "\t\tif [ -n \"$dtrain_cause_node\" ] && dtrain_append crash_nodes \"$dtrain_cause_node\" &&\n"
	                      "\t\t   [ \"$(dtrain_lines crash_nodes \"$dtrain_cause_node\")\" -ge 2 ] &&\n"
	                      "\t\t   dtrain_exclude \"$dtrain_cause_node\" \"two crashes began there\"; then\n"
	                      "\t\t\tdtrain_bad=$dtrain_cause_node\n"
	                      "\t\tfi ;;\n"
	                      "\tesac\n",
	                   (long)LAUNCH__PROBE_S, s->recovery.max_node_failures, (long)LAUNCH__PROBE_S);
}

void launch__render_crash_requeue(struct render *r)
{
	const struct spec *s = r->spec;

	launch__render_put(r, "\tif [ -n \"$dtrain_bad\" ]; then\n"
	                      "\t\techo \"dtrain: requeueing job $dtrain_job_id to start again without node $dtrain_bad (crash $(dtrain_count crashes) of at most %ld)\" >&2\n"
	                      "\t\tif dtrain_requeue left_out; then\n"
	                      "\t\t\texit 0\n"
	                      "\t\tfi\n"
	                      "\t\techo \"dtrain: $dtrain_why_not; starting again on these nodes\" >&2\n"
	                      "\tfi\n",
	                   s->recovery.max_crashes);
}
