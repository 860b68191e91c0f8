#!/usr/bin/env bash
# The life of a run in its report (#34), on the local cluster: a 2-node x
# 2-task training job (data 2 x pipeline 2) has a rank killed once (the
# batch script starts the step again in its allocation, from the newest
# checkpoint) and is preempted once (Slurm requeues it; it resumes from the
# state it saved at the SIGTERM), then runs to its end. `dtrain-submit
# report JOB` then tells that story:
#  - events.jsonl and the page: three starts of the ranks in two
#    allocations, the crash naming the killed rank and its node, the
#    preemption, each resume with its step and the steps redone (the crash's:
#    those logged after the checkpoint it resumed from; the preemption's:
#    none, it saved where it stopped);
#  - goodput: productive steps, start-up, saves, work redone and idle add
#    up to the allocated node-time (idle never negative, within 2 %), and
#    that is Slurm's: the job's records in the cluster's jobcomp file
#    (JobCompType=jobcomp/filetxt, site/cluster.sh), within 2 % and the
#    whole seconds Slurm rounds each record's start and end to;
#  - a row per rank of where its step's time went, each on its node.
. "$(dirname "$0")/lib.sh"
: "${SLURM_CONF:?needs the local cluster}"
site=$(write_site)
jobcomp=$(sed -n 's/^JobCompLoc=//p' "$SLURM_CONF")
[ -n "$jobcomp" ] || fail "$SLURM_CONF sets no JobCompLoc (site/cluster.sh writes it)"

"$DTRAIN_BIN/dtrain-data" synthetic "$T/syn.h5" --samples 12000 --features 784 --classes 10 --seed 13 >/dev/null ||
	fail "dtrain-data synthetic"
# 5000 steps: the kill waits for the start and two checkpoints, the
# preemption for the restart and two more (see preempt.sh for the rates)
total=5000
cat >"$T/job.json" <<JSON
{ "name": "life", "model": { "inputs": 784, "hidden": [256, 256], "outputs": 10 },
  "data": { "train": "$T/syn.h5" },
  "resources": { "nodes": 2, "tasks_per_node": 2, "partition": "low" },
  "parallel": { "data": 2, "pipeline": 2, "micro_batches": 2 },
  "train": { "epochs": 50, "max_steps": $total, "global_batch": 120, "log_every": 10,
             "optimizer": { "type": "sgd", "lr": 0.05, "momentum": 0.9 } },
  "checkpoint": { "every_steps": 100, "keep": 2 },
  "recovery": { "step_timeout_seconds": 5, "timeout_seconds": 10 } }
JSON
expect_rc 0 $SUBMIT "$T/job.json" --site "$site"
id=$(cat "$T/out")
dir=$(run_dir_of life)
log=$dir/slurm-$id.out
# two checkpoints after start number $1 of the ranks
two_saves_into() { saves_into "$dir" "$1" || { cat "$log"; fail "start $1: no two checkpoints in 120 s"; }; }
restarts() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p'; }

# --- a rank killed ---
wait_state "$id" 120 RUNNING
two_saves_into 1
sleep "0.$((RANDOM % 10))"
victim=$(pgrep -f "^[^ ]*/dtrain-run $dir/spec.json" | shuf -n 1)
[ -n "$victim" ] || { cat "$log"; fail "no dtrain-run process of job $id"; }
who=$(rank_of_pid "$dir" "$victim")
[ -n "$who" ] || { cat "$dir"/heartbeat/rank-*; fail "no heartbeat names pid $victim"; }
kill -KILL "$victim"
restarted "$log" 1
echo "  $who (pid $victim) killed"

# --- preempted ---
two_saves_into 2
hi=$(sbatch --parsable -p high -N 2 --ntasks-per-node=4 -t 1 -o "$T/high.out" --wrap 'sleep 2') ||
	fail "sbatch of the high-priority job"
for ((i = 0; i < 120; i++)); do
	[ "$(restarts "$id")" = 1 ] && break
	sleep 0.5
done
[ "$(restarts "$id")" = 1 ] || { scontrol show job "$id"; cat "$log"; fail "job $id was not requeued by the preemption"; }
wait_state "$hi" 120 COMPLETED ENDED
wait_state "$id" 300 COMPLETED FAILED CANCELLED TIMEOUT ENDED
state=$(job_state "$id")
[ "$state" = COMPLETED ] || [ "$state" = ENDED ] || { cat "$log"; fail "job ended $state"; }
must_contain "$log" "dtrain-run: done:"

# --- what the files say ---
m=$dir/metrics.jsonl ev=$dir/events.jsonl
jq -e -s '[.[] | select(.event == "job_start") | "\(.restart):\(.crashes)"] == ["0:0", "0:1", "1:1"]' "$ev" >/dev/null ||
	{ cat "$ev"; fail "events.jsonl: not three starts (two in the first allocation, after the crash)"; }
rank=${who#rank } rank=${rank%% *} node=${who##* }
jq -e -s --arg r "$rank" --arg n "$node" '[.[] | select(.event == "job_stop" and .cause == "crash")] | length == 1 and .[0].rank == $r and .[0].node == $n' "$ev" >/dev/null ||
	{ cat "$ev"; fail "events.jsonl: the crash does not name $who"; }
jq -e -s '[.[] | select(.event == "term" or (.event == "job_stop" and .cause == "preempted"))] | length >= 1' "$ev" >/dev/null ||
	{ cat "$ev"; fail "events.jsonl: no SIGTERM or preemption"; }
# each resume's step, and the steps its start logs again: those up to the
# highest step logged before it (logged every 10 steps; after the crash,
# those since the checkpoint it resumed from; after the preemption none,
# its stop saved where it stopped)
mapfile -t resumes < <(jq -r 'select(.event == "step" or .event == "resume") | "\(.event) \(.step)"' "$m" |
	awk '$1 == "step" && $2 > high { high = $2 } $1 == "resume" { print $2 ":" (high > $2 ? high - $2 : 0) }')
[ "${#resumes[@]}" -eq 2 ] || fail "metrics: ${#resumes[@]} resumes, not 2"
[ "${resumes[1]#*:}" -eq 0 ] || fail "the resume after the preemption redoes ${resumes[1]#*:} steps (it saved where it stopped)"
pass "events.jsonl: three starts in two allocations, the crash naming $who, the preemption"

# --- the report ---
expect_rc 0 $SUBMIT report "$id"
page=$dir/report.html
[ "$(cat "$T/out")" = "$page" ] || fail "report printed '$(cat "$T/out")'"
python3 - "$page" "$jobcomp" "$id" "$who" "${resumes[@]}" <<'PY' || fail "the report of job $id (page: $page)"
import re, sys
from datetime import datetime
from html.parser import HTMLParser
page, jobcomp, job, who = sys.argv[1:5]
resumes = sys.argv[5:]
class P(HTMLParser):
    def __init__(self):
        super().__init__(); self.attrs = {}; self.text = []; self.rows = []; self.svg = None
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"): self.attrs[a["id"]] = a
        if tag == "svg": self.svg = a.get("id")
        if tag == "g" and a.get("class") == "rank" and self.svg == "ranks": self.rows.append(a)
    def handle_data(self, d): self.text.append(d)
p = P(); p.feed(open(page).read())
text = " ".join(" ".join(p.text).split())
bad = []
def says(s):
    if s not in text: bad.append(f"the page does not say '{s}'")
says(f"job stopped: crash")
says(who)
for r in resumes:  # STEP:REDONE
    step, redone = r.split(":")
    if not re.search(rf"resumed from step {step}, loaded in [^;]*; {redone} steps redone", text):
        bad.append(f"the page does not say: resumed from step {step} ... {redone} steps redone")
# goodput: the parts and idle make the allocation; Slurm's own records
parts = {k: float(p.attrs[k]["data-node-s"]) for k in ("productive", "startup", "saves", "redone")}
alloc = float(p.attrs["allocated"]["data-node-s"]); idle = float(p.attrs["allocated"]["data-idle-node-s"])
busy = sum(parts.values())
if not busy <= alloc * 1.02: bad.append(f"goodput: the parts ({busy:.2f} node-s) exceed the allocation ({alloc:.2f})")
if abs(busy + idle - alloc) > 0.02 * alloc: bad.append(f"goodput: parts {busy:.2f} + idle {idle:.2f} != allocated {alloc:.2f}")
recs = [l for l in open(jobcomp) if re.search(rf"\bJobId={job}\b", l)]
def field(l, k): return re.search(rf"\b{k}=(\S+)", l).group(1)
t = lambda s: datetime.strptime(s, "%Y-%m-%dT%H:%M:%S").timestamp()
slurm = sum((t(field(l, "EndTime")) - t(field(l, "StartTime"))) * int(field(l, "NodeCnt")) for l in recs)
states = [field(l, "JobState") for l in recs]
if states != ["PREEMPTED", "COMPLETED"]: bad.append(f"jobcomp: records {states}, expected PREEMPTED, COMPLETED")
# each record's start and end are whole seconds: up to 1 s off per record and node
slack = 0.02 * slurm + sum(int(field(l, "NodeCnt")) for l in recs)
print(f"  goodput: allocated {alloc:.1f} node-s (Slurm's records: {slurm:.0f}), productive {parts['productive']:.1f}, "
      f"start-up {parts['startup']:.1f}, saves {parts['saves']:.1f}, redone {parts['redone']:.1f}, idle {idle:.1f}")
if abs(alloc - slurm) > slack: bad.append(f"allocated {alloc:.2f} node-s, Slurm's records {slurm:.0f} (more than {slack:.1f} apart)")
if len(p.rows) != 4: bad.append(f"{len(p.rows)} rank rows, not 4")
for b in bad: print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
pass "report of job $id: the crash of $who, the preemption, the resumes (step:redone ${resumes[*]}); goodput's parts make the allocated node-time, which is Slurm's"
