#!/usr/bin/env bash
# The report of a run (#34), on real ranks (mpirun, no cluster needed):
#  - a GPT on 2 pipeline stages, preempted once (SIGTERM: it saves and
#    exits) and run again (it resumes and appends to metrics.jsonl), with an
#    events.jsonl as the batch script will write it (two job starts, a
#    preemption, the end), and an MLP on 2 stages;
#  - `dtrain-submit report RUN_DIR` writes one self-contained page: no
#    http(s) reference, no src or href; rewritten atomically; a line still
#    being written at the end of metrics.jsonl is left out; `status JOB`
#    shows a loss sparkline and the productive seconds;
#  - rendered by a real browser (Debian's chromium, headless): no console
#    message (the check itself is shown to catch a script error), the loss
#    chart holds one point per step event, the timeline lists the stop and
#    the resume step, the goodput the job's allocation, a row per rank of
#    where its step's time went, the GPT's MFU at every step; a screenshot of each
#    page under the build tree for a person to look at;
#  - `report SWEEP` of a sweep of two MLP runs (two learning rates): one
#    page with the table status SWEEP prints and a curve per task on shared
#    axes, rendered without a console message.
. "$(dirname "$0")/lib.sh"

# the browser: Debian's chromium (site/deps.list), headless
command -v chromium >/dev/null || fail "chromium not found: the report is checked in a real browser; hint: site/install-deps.sh --for test installs it (site/deps.list)"
SHOTS=${DTRAIN_BUILD_DIR:-$T}

# --- the runs ---
"$DTRAIN_BIN/dtrain-data" text /usr/share/games/fortunes/riddles "$T/text" >/dev/null || fail "dtrain-data text"
"$DTRAIN_BIN/dtrain-data" synthetic "$T/syn.h5" --samples 1200 --features 32 --classes 5 --seed 3 >/dev/null ||
	fail "dtrain-data synthetic"
"$DTRAIN_BIN/dtrain-data" synthetic "$T/syn-test.h5" --samples 300 --features 32 --classes 5 --seed 3 --stream 1 \
	>/dev/null || fail "dtrain-data synthetic (test set)"
cat >"$T/gpt-base.json" <<JSON
{ "name": "report-gpt", "model": { "type": "gpt", "vocab_size": 256, "context": 32, "layers": 2, "heads": 2, "embd": 32 },
  "data": { "train": "$T/text/train.h5", "test": "$T/text/val.h5" },
  "train": { "epochs": 10, "max_steps": 160, "global_batch": 8, "log_every": 1, "eval_every": 20,
             "optimizer": { "type": "adamw", "lr": 0.003 }, "lr_schedule": { "warmup_steps": 5 }, "grad_clip": 1.0 },
  "checkpoint": { "every_steps": 25, "keep": 2 } }
JSON
cat >"$T/mlp-base.json" <<JSON
{ "name": "report-mlp", "model": { "inputs": 32, "hidden": [48, 24], "outputs": 5, "activation": "gelu" },
  "data": { "train": "$T/syn.h5", "test": "$T/syn-test.h5" },
  "train": { "epochs": 3, "global_batch": 60, "log_every": 1,
             "optimizer": { "type": "adamw", "lr": 0.003 }, "lr_schedule": { "warmup_steps": 5 } },
  "checkpoint": { "every_steps": 20, "keep": 2 } }
JSON
# spec NAME: $T/NAME-base.json on 2 ranks, pipeline 2, into $T/NAME.json; the
# run dir $T/NAME holds it as spec.json, as a submit leaves it
spec() {
	$SUBMIT validate "$T/$1-base.json" --set run_dir="$T/$1" --set resources.tasks_per_node=2 \
		--set parallel.pipeline=2 --set parallel.micro_batches=2 >"$T/$1.json" 2>"$T/$1.err" ||
		{ cat "$T/$1.err"; fail "spec $1"; }
	mkdir -p "$T/$1"
	cp "$T/$1.json" "$T/$1/spec.json"
}
train() { # train NAME: dtrain-run on 2 ranks, output appended to $T/NAME.out
	mpirun --allow-run-as-root --oversubscribe -np 2 "$DTRAIN_BIN/dtrain-run" "$T/$1.json" >>"$T/$1.out" 2>&1
}
steps_logged() {
	local n
	n=$(grep -c '"event":"step"' "$T/$1/metrics.jsonl" 2>/dev/null) || true
	echo "${n:-0}"
}

spec gpt
train gpt &
pid=$!
for _ in $(seq 1000); do
	[ "$(steps_logged gpt)" -ge 30 ] && break
	sleep 0.02
done
pkill -TERM -f "dtrain-run $T/gpt.json" || fail "no GPT run to stop"
rc=0
wait "$pid" || rc=$?
[ "$rc" -ne 0 ] || { cat "$T/gpt.out"; fail "the stopped GPT run exited 0 (it ended before the signal?)"; }
stop=$(jq -r 'select(.event == "stop") | .step' "$T/gpt/metrics.jsonl")
[ -n "$stop" ] || { cat "$T/gpt.out"; fail "no stop event after SIGTERM"; }
train gpt || { cat "$T/gpt.out"; fail "the resumed GPT run"; }
must_contain "$T/gpt/metrics.jsonl" '"event":"resume"'
spec mlp
train mlp || { cat "$T/mlp.out"; fail "the MLP run"; }
jq '.name = "report-mlp2" | .train.optimizer.lr = 0.01' "$T/mlp-base.json" >"$T/mlp2-base.json"
spec mlp2
train mlp2 || { cat "$T/mlp2.out"; fail "the second MLP run"; }
echo "  GPT stopped at step $stop and resumed; MLPs trained"

# events.jsonl as the batch script will write it: two starts of the job on
# two nodes, the first preempted, the second done
t() { jq -r "select(.event == \"$1\") | .unix_time" "$T/gpt/metrics.jsonl" | sed -n "$2p"; }
first1=$(t first_step 1) first2=$(t first_step 2) last=$(t step '$')
cat >"$T/gpt/events.jsonl" <<JSON
{"event":"job_start","time":$(awk "BEGIN { printf \"%.3f\", $first1 - 2 }"),"job_id":"4242","restart":0,"nodes":"n[1-2]","layout":"1x2"}
{"event":"job_stop","time":$(awk "BEGIN { printf \"%.3f\", $first2 - 1.5 }"),"cause":"preempted","rank":0,"node":"n1","detail":"SIGTERM <b>from</b> Slurm"}
{"event":"job_start","time":$(awk "BEGIN { printf \"%.3f\", $first2 - 1 }"),"job_id":"4242","restart":1,"nodes":"n[1-2]","layout":"1x2"}
{"event":"job_stop","time":$(awk "BEGIN { printf \"%.3f\", $last + 0.5 }"),"cause":"done","detail":""}
JSON

# --- the pages ---
nsteps=$(grep -c '"event":"step"' "$T/gpt/metrics.jsonl")
# a step line still being written at the end: left out
printf '{"event":"step","step":99999,"loss":' >>"$T/gpt/metrics.jsonl"
ln -s "$T/elsewhere.html" "$T/gpt/report.html" # a planted link is replaced, not written through
expect_rc 0 $SUBMIT report "$T/gpt"
[ "$(cat "$T/out")" = "$T/gpt/report.html" ] || fail "report printed '$(cat "$T/out")', not the page's path"
[ -f "$T/gpt/report.html" ] && [ ! -L "$T/gpt/report.html" ] && [ ! -e "$T/elsewhere.html" ] ||
	fail "the report was written through a link planted at its name"
expect_rc 0 $SUBMIT report "$T/mlp" -o "$T/mlp.html"
expect_rc 2 $SUBMIT report
must_contain "$T/err" "missing JOB or RUN_DIR"
expect_rc 1 $SUBMIT report "$T/text"
must_contain "$T/err" "$T/text/metrics.jsonl: no such file"
for page in "$T/gpt/report.html" "$T/mlp.html"; do
	! grep -Eiq 'https?:' "$page" || fail "$page refers to the network: $(grep -Eio '.{30}https?:.{30}' "$page" | head -n 3)"
	! grep -Eiq '(src|href|xlink:href) *=' "$page" || fail "$page loads something: $(grep -Eio '.{20}(src|href) *=.{30}' "$page" | head -n 3)"
	! grep -q '<b>' "$page" || fail "$page: a value from events.jsonl went in unescaped"
done
# goodput start by start: the GPT's two starts, the second from the stop's step
grep -q '<table class="info" id="per-start">' "$T/gpt/report.html" || fail "no goodput per start"
[ "$(grep -o '<tr><td>[12]</td><td>[0-9]*</td>' "$T/gpt/report.html" | tr '\n' ' ')" = "<tr><td>1</td><td>0</td> <tr><td>2</td><td>$stop</td> " ] ||
	fail "goodput per start: not two starts, from step 0 and from step $stop"
! grep -q 'id="per-start"' "$T/mlp.html" || fail "the MLP run started once: no table per start"
pass "report writes one self-contained page per run (no network, no src or href), replaces a planted link, leaves out a torn line; goodput start by start"

# status JOB: the sparkline and goodput (a registry entry for the run; a
# Slurm that knows no job)
mkdir -p "$XDG_STATE_HOME/dtrain" "$T/fake"
printf '# dtrain-jobs v1\n4242\treport-gpt\t%s\t2026-01-01T00:00:00Z\n' "$T/gpt" >"$XDG_STATE_HOME/dtrain/jobs.tsv"
for c in squeue scontrol; do
	printf '#!/bin/sh\necho "slurm_load_jobs error: Invalid job id specified" >&2\nexit 1\n' >"$T/fake/$c"
	chmod +x "$T/fake/$c"
done
PATH=$T/fake:$PATH expect_rc 0 $SUBMIT status 4242
must_contain "$T/out" "loss:          "
grep -Eq '^loss curve:    [▁▂▃▄▅▆▇█]{40} \(' "$T/out" || { cat "$T/out"; fail "status: no 40-wide loss sparkline"; }
grep -Eq '^goodput:       [0-9.]+ (ms|s) in productive steps; start-up ' "$T/out" || { cat "$T/out"; fail "status: no goodput line"; }
expect_rc 0 env PATH="$T/fake:$PATH" $SUBMIT report report-gpt -o "$T/by-name.html"
must_contain "$T/by-name.html" "<td>Slurm</td>"
pass "status JOB shows a loss sparkline and the productive seconds; report takes a JOB"

# report SWEEP: a sweep dir as dtrain-submit sweep leaves it, its two tasks
# the MLP runs (lr 0.003 and 0.01), registered as sweep 4300
sw=$T/sweep-4300
mkdir -p "$sw"
cp -r "$T/mlp" "$sw/task-0"
cp -r "$T/mlp2" "$sw/task-1"
echo 4300_0 >"$sw/task-0/job_id"
echo 4300_1 >"$sw/task-1/job_id"
cat >"$sw/sweep.json" <<JSON
{ "name": "report-mlp", "keys": [ "train.optimizer.lr" ], "seeds": 0, "max_parallel": 0,
  "tasks": [ { "task": 0, "values": [ "0.003" ], "seed": null }, { "task": 1, "values": [ "0.01" ], "seed": null } ] }
JSON
printf '4300\treport-sweep\t%s\t2026-01-01T00:00:00Z\n' "$sw" >>"$XDG_STATE_HOME/dtrain/jobs.tsv"
PATH=$T/fake:$PATH expect_rc 0 $SUBMIT report 4300
[ "$(cat "$T/out")" = "$sw/report.html" ] || fail "report SWEEP printed '$(cat "$T/out")', not $sw/report.html"
must_contain "$sw/report.html" "<td>4300_1</td>"
pass "report SWEEP writes one page in the sweep dir"

# --- in a browser ---
# render URL NAME: chromium's DOM of the page (after its scripts ran) in
# $T/NAME.dom, its log in $T/NAME.log, a screenshot in $SHOTS/NAME.png
render() {
	local url=$1 name=$2 flags
	flags=(--headless --no-sandbox --disable-gpu --disable-dev-shm-usage
		--no-first-run --user-data-dir="$T/chromium-$name" --enable-logging=stderr --v=0)
	timeout 60 chromium "${flags[@]}" --dump-dom "$url" >"$T/$name.dom" 2>"$T/$name.log" ||
		{ rc=$?; cat "$T/$name.log"; fail "chromium could not render $url (exit $rc)"; }
	timeout 60 chromium "${flags[@]}" --screenshot="$SHOTS/$name.png" --window-size=1280,2600 \
		"$url" >>"$T/$name.log" 2>&1 || { cat "$T/$name.log"; fail "chromium could not take a screenshot of $url"; }
	[ -s "$SHOTS/$name.png" ] || fail "chromium wrote no screenshot of $url"
}
# console NAME: the console messages of the page (the page writes none)
console() { grep -E ':CONSOLE[:(]|Uncaught|Not allowed to load' "$T/$1.log" || true; }

# the check can fail: a page with a script error
printf '<!DOCTYPE html><html><body><p>x</p><script>no_such_function();</script></body></html>\n' >"$T/bad.html"
render "file://$T/bad.html" report-bad
[ -n "$(console report-bad)" ] || { cat "$T/report-bad.log"; fail "a script error did not show in chromium's log: the console check would see nothing"; }
rm -f "$SHOTS/report-bad.png"

# dom NAME CHECKS...: facts of the rendered DOM, by Python's HTML parser
dom() {
	python3 - "$@" <<'PY'
import sys
from html.parser import HTMLParser
class P(HTMLParser):
    def __init__(self):
        super().__init__(); self.stack = []; self.facts = {}; self.text = []; self.script = None
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "html": self.script = a.get("data-script")
        if tag == "svg" and a.get("id"): self.chart = a["id"]
        if tag == "g" and a.get("class") == "points":
            self.key = (self.chart, a.get("data-series")); self.facts[self.key] = [int(a["data-points"]), 0, 0]
            self.stack.append("points")
        elif tag == "g": self.stack.append("g")
        if tag == "g" and a.get("class") == "rank": self.facts[("rows", self.chart)] = self.facts.get(("rows", self.chart), 0) + 1
        if tag in ("circle", "title") and "points" in self.stack:
            self.facts[self.key][1 if tag == "circle" else 2] += 1
    def handle_endtag(self, tag):
        if tag == "g" and self.stack: self.stack.pop()
    def handle_data(self, d): self.text.append(d)
p = P(); p.feed(open(sys.argv[1]).read())
text = " ".join(" ".join(p.text).split())
bad = []
if p.script != "ran": bad.append("the page's script did not run (no data-script)")
for check in sys.argv[2:]:
    kind, _, arg = check.partition("=")
    if kind == "points":  # points=CHART:N: series 0 of CHART has N points, markers and titles
        chart, n = arg.split(":"); got = p.facts.get((chart, "0"))
        if got != [int(n)] * 3: bad.append(f"{chart}: points/markers/titles {got}, expected {n} each")
    elif kind == "rows":  # rows=SVG:N: SVG draws N ranks (or stages), a row each
        svg, n = arg.split(":"); got = p.facts.get(("rows", svg), 0)
        if got != int(n): bad.append(f"{svg}: {got} rows, expected {n}")
    elif kind == "series":  # series=CHART:N0,N1,...: CHART draws a series per task, N points each
        chart, ns = arg.split(":"); want = [[int(n)] * 3 for n in ns.split(",")]
        got = [p.facts.get((chart, str(k))) for k in range(len(want) + 1)]
        if got != want + [None]: bad.append(f"{chart}: series points/markers/titles {got}, expected {want}")
    elif kind == "text" and arg not in text: bad.append(f"the page does not say '{arg}'")
for b in bad: print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
}

render "file://$T/gpt/report.html" report-screenshot
[ -z "$(console report-screenshot)" ] || fail "console messages in the GPT report: $(console report-screenshot)"
dom "$T/report-screenshot.dom" "points=chart-loss-step:$nsteps" "points=chart-loss-time:$nsteps" \
	"points=chart-throughput:$nsteps" "points=chart-mfu:$nsteps" "text=measured at start" "rows=ranks:2" \
	"text=rank 1 · stage 1 · replica 0" "text=stopped by SIGTERM at step $stop" "text=resumed from step $stop" \
	"text=job 4242 started (restart 1)" "text=job stopped: preempted" "text=rank 0 on node n1" \
	"text=of it in productive steps" "text=ended at step 160 of 160" "text=tokens/s" ||
	fail "the GPT report as the browser shows it (DOM in $T/report-screenshot.dom)"
nmlp=$(grep -c '"event":"step"' "$T/mlp/metrics.jsonl")
render "file://$T/mlp.html" report-screenshot-mlp
[ -z "$(console report-screenshot-mlp)" ] || fail "console messages in the MLP report: $(console report-screenshot-mlp)"
dom "$T/report-screenshot-mlp.dom" "points=chart-loss-step:$nmlp" "rows=ranks:2" "text=samples/s" "text=test accuracy" \
	"text=mlp: 32-48-24-5" || fail "the MLP report as the browser shows it"
! grep -q 'id="chart-mfu"' "$T/mlp.html" || fail "the MLP report shows an MFU (a GPT's only)"
pass "chromium renders both pages without a console message; the loss charts hold all $nsteps and $nmlp steps, the timeline the stop and the resume at step $stop (screenshots: $SHOTS/report-screenshot.png, report-screenshot-mlp.png)"
nmlp2=$(grep -c '"event":"step"' "$T/mlp2/metrics.jsonl")
emlp=$(grep -c '"event":"eval"' "$T/mlp/metrics.jsonl") emlp2=$(grep -c '"event":"eval"' "$T/mlp2/metrics.jsonl")
render "file://$sw/report.html" report-screenshot-sweep
[ -z "$(console report-screenshot-sweep)" ] || fail "console messages in the sweep's report: $(console report-screenshot-sweep)"
dom "$T/report-screenshot-sweep.dom" "series=chart-loss-step:$nmlp,$nmlp2" "series=chart-loss-time:$nmlp,$nmlp2" \
	"series=chart-val-step:$emlp,$emlp2" "text=sweep report-sweep" "text=BEST VAL LOSS" "text=4300_0" "text=4300_1" ||
	fail "the sweep's report as the browser shows it"
pass "chromium renders the sweep's page without a console message: its table, a curve per task on shared axes (screenshot: $SHOTS/report-screenshot-sweep.png)"
