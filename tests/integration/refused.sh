#!/usr/bin/env bash
# Specs the site forbids never reach sbatch and leave nothing behind; a spec
# Slurm itself refuses gets Slurm's own error and leaves no run directory.
. "$(dirname "$0")/lib.sh"
: "${SLURM_CONF:?needs the local cluster}"
site=$(write_site)
spec=$DTRAIN_SOURCE_DIR/jobs/fashion-mnist-2x2.json
before=$(squeue -h | wc -l)

expect_rc 3 $SUBMIT "$spec" --site "$site" --set resources.nodes=4 --set parallel.data=4
must_contain "$T/err" "resources.nodes: 4 exceeds the site limit 2 ($site: limits.max_nodes)"
expect_rc 3 $SUBMIT "$spec" --site "$site" --set resources.time=3:00:00
must_contain "$T/err" "resources.time: 03:00:00 exceeds the site limit 02:00:00"
expect_rc 3 $SUBMIT "$spec" --site "$site" --set resources.partition=debug
must_contain "$T/err" "resources.partition: \"debug\" is not allowed by the site"
pass "limit violations refused"

printf '{"name": "locked", "resources": {"qos": "urgent", "time": 5}}\n' >"$T/locked.json"
expect_rc 3 $SUBMIT "$T/locked.json" --site "$site"
must_contain "$T/err" "$T/locked.json: resources.qos: locked by the site ($site: locked: \"resources.qos\")"
expect_rc 3 $SUBMIT "$spec" --site "$site" --set resources.qos=urgent
must_contain "$T/err" "--set: resources.qos: locked by the site"
pass "locked keys refused"

[ ! -e "$T/runs" ] || { ls -R "$T/runs"; fail "a refused spec left a run directory"; }
[ "$(squeue -h | wc -l)" -eq "$before" ] || fail "a refused spec reached Slurm"
[ ! -s "$XDG_STATE_HOME/dtrain/jobs.tsv" ] || fail "a refused spec was registered"
pass "nothing reached sbatch, nothing left behind"

# Slurm refuses a partition it does not know: its message comes through.
printf '{"runs_root": "%s/runs"}\n' "$T" >"$T/open-site.json"
expect_rc 1 $SUBMIT "$spec" --site "$T/open-site.json" --set resources.partition=nosuch --no-data-check
must_contain "$T/err" "nvalid partition"
[ -z "$(ls -A "$T/runs" 2>/dev/null)" ] || { ls -R "$T/runs"; fail "sbatch failure left a run directory"; }
pass "sbatch's own error passed through, run directory removed"
