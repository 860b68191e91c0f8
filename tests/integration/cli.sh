#!/usr/bin/env bash
# dtrain-submit without a cluster: help and exit codes, validate and
# --dry-run of every example spec, refusals that name file, path and flag.
. "$(dirname "$0")/lib.sh"
site=$(write_site)

# --- help on the program and on every subcommand ---
for sub in "" submit validate status cancel logs; do
	expect_rc 0 $SUBMIT $sub --help
	must_contain "$T/out" "Usage:"
done
pass "--help on every subcommand"
expect_rc 2 $SUBMIT --frobnicate jobs.json
must_contain "$T/err" "--frobnicate"
expect_rc 2 $SUBMIT
pass "usage errors exit 2 and name the flag"

# --- every example spec validates and dry-runs to a script bash accepts ---
for spec in "$DTRAIN_SOURCE_DIR"/jobs/*.json; do
	expect_rc 0 $SUBMIT validate "$spec" --site "$site" --no-data-check
	must_contain "$T/out" '"parallel"'
	expect_rc 0 $SUBMIT "$spec" --site "$site" --dry-run --no-data-check
	bash -n "$T/out" || fail "bash -n rejects the dry-run script of $spec"
	must_contain "$T/out" "#SBATCH --nodes="
	must_contain "$T/out" "#SBATCH --requeue"
	must_contain "$T/out" "#SBATCH --open-mode=append"
	must_contain "$T/out" "#SBATCH --signal="
	must_contain "$T/out" "srun --mpi=pmix"
done
[ ! -e "$T/runs" ] || fail "dry-run created $T/runs"
pass "validate and --dry-run of every spec in jobs/"

# --- the resolved spec reflects site defaults and --set ---
expect_rc 0 $SUBMIT validate "$DTRAIN_SOURCE_DIR/jobs/fashion-mnist-2x2.json" --site "$site" --no-data-check \
	--set train.epochs=7 --set env.EXTRA=x
must_contain "$T/out" '"epochs": 7'
must_contain "$T/out" '"partition": "low"'
must_contain "$T/out" '"EXTRA": "x"'
pass "validate shows the resolved spec"

# --- sbatch's options as shortcuts of spec keys; limits and locks apply ---
fm="$DTRAIN_SOURCE_DIR/jobs/fashion-mnist-2x2.json"
expect_rc 0 $SUBMIT validate "$fm" --site "$site" -N 1 -n 4 -p high -t 20 -A acct --no-data-check
must_contain "$T/out" '"nodes": 1'
must_contain "$T/out" '"tasks_per_node": 4'
must_contain "$T/out" '"partition": "high"'
must_contain "$T/out" '"time": "00:20:00"'
must_contain "$T/out" '"account": "acct"'
expect_rc 3 $SUBMIT validate "$fm" --site "$site" -n 3
must_contain "$T/err" "-n 3: not a multiple of resources.nodes (2"
expect_rc 3 $SUBMIT validate "$fm" --site "$site" -p gpu
must_contain "$T/err" "gpu"
# a site that locks 2 tasks a node: -n may only restate it
sed -e 's/"locked": \["resources.qos"\]/"locked": ["resources.qos", "resources.tasks_per_node"]/' \
	-e 's/"partition": "low",/"partition": "low", "tasks_per_node": 2,/' "$site" >"$T/site-tpn.json"
jq 'del(.resources.tasks_per_node)' "$fm" >"$T/fm-no-tpn.json"
expect_rc 3 $SUBMIT validate "$T/fm-no-tpn.json" --site "$T/site-tpn.json" -n 8
must_contain "$T/err" "-n 8: resources.tasks_per_node is locked by $T/site-tpn.json at 2"
expect_rc 0 $SUBMIT validate "$T/fm-no-tpn.json" --site "$T/site-tpn.json" -n 4 --no-data-check
must_contain "$T/out" '"tasks_per_node": 2'
pass "-N -n -p -t -A set their spec keys; the site's limits and locks apply"

# --- validate opens the data as dtrain-run will: missing, wrong kind, wrong shape ---
"$DTRAIN_BIN/dtrain-data" synthetic "$T/syn.h5" --samples 200 --features 32 --classes 5 --seed 1 >/dev/null ||
	fail "dtrain-data synthetic"
"$DTRAIN_BIN/dtrain-data" text /usr/share/games/fortunes/riddles "$T/text" >/dev/null || fail "dtrain-data text"
gpt="$DTRAIN_SOURCE_DIR/jobs/gpt-tiny-2x2.json"
expect_rc 3 $SUBMIT validate "$gpt" --site "$site" --set data.train="$T/nosuch.h5"
must_contain "$T/err" "gpt-tiny-2x2.json: data: $T/nosuch.h5: cannot open"
must_contain "$T/err" "--no-data-check"
expect_rc 3 $SUBMIT validate "$gpt" --site "$site" --set data.train=null
must_contain "$T/err" "data.train: not set"
expect_rc 3 $SUBMIT validate "$gpt" --site "$site" --set data.train="$T/syn.h5" --set data.test=null
must_contain "$T/err" "$T/syn.h5: not a dtrain token stream"
must_contain "$T/err" 'hint: model.type "gpt" trains on token streams'
expect_rc 3 $SUBMIT validate "$fm" --site "$site" --set data.train="$T/syn.h5" --set data.test=null
must_contain "$T/err" "$T/syn.h5: 32 features per sample but model.inputs is 784"
expect_rc 3 $SUBMIT validate "$fm" --site "$site" --set data.train="$T/text/train.h5" --set data.test=null
must_contain "$T/err" "is a token stream, for a language model"
expect_rc 3 $SUBMIT "$gpt" --site "$site" --set data.train="$T/text/train.h5" --set data.test="$T/text/val.h5" \
	--set model.vocab_size=64
must_contain "$T/err" "a vocabulary of 256 tokens but model.vocab_size is only 64"
[ ! -e "$T/runs" ] || fail "a submit refused for its data left $T/runs"
expect_rc 0 $SUBMIT validate "$gpt" --site "$site" --set data.train="$T/text/train.h5" --set data.test="$T/text/val.h5"
expect_rc 0 $SUBMIT validate "$gpt" --site "$site" --set data.train="$T/nosuch.h5" --no-data-check
pass "validate and submit refuse data that is missing, of the wrong kind or shape (exit 3); --no-data-check skips it"

# --- a mistyped command or option gets a "did you mean", exit 2 ---
expect_rc 2 $SUBMIT stauts
must_contain "$T/err" "unknown command 'stauts' (did you mean 'status'?)"
expect_rc 2 $SUBMIT valdate "$fm"
must_contain "$T/err" "(did you mean 'validate'?)"
expect_rc 2 $SUBMIT "$fm" --dry
must_contain "$T/err" "(did you mean '--dry-run'?)"
# every program's getopt parsers: the closest long option (dt_unknown_option)
expect_rc 2 "$DTRAIN_BIN/dtrain-ckpt" eval "$T/ck" "$T/data.h5" --sampels 3
must_contain "$T/err" 'dtrain-ckpt: unknown option "--sampels"; did you mean "--samples"?'
expect_rc 2 "$DTRAIN_BIN/dtrain-ckpt" import "$T/hf" "$T/ck" --alow-nonfinite
must_contain "$T/err" 'unknown option "--alow-nonfinite"; did you mean "--allow-nonfinite"?'
expect_rc 2 "$DTRAIN_BIN/dtrain-ckpt" list "$T" --verfiy
must_contain "$T/err" 'unknown option "--verfiy"; did you mean "--verify"?'
expect_rc 2 "$DTRAIN_BIN/dtrain-ckpt" export "$T/ck" "$T/out.h5" --forse
must_contain "$T/err" 'unknown option "--forse"; did you mean "--force"?'
expect_rc 2 "$DTRAIN_BIN/dtrain-data" text "$T/a.txt" "$T/out" --val-fracton=0.2
must_contain "$T/err" 'dtrain-data: unknown option "--val-fracton"; did you mean "--val-fraction"?'
expect_rc 2 "$DTRAIN_BIN/dtrain-data" decode "$T/a.h5" --cuont 3
must_contain "$T/err" 'unknown option "--cuont"; did you mean "--count"?'
expect_rc 2 "$DTRAIN_BIN/dtrain-data" synthetic "$T/x.h5" --sampels 3
must_contain "$T/err" 'unknown option "--sampels"; did you mean "--samples"?'
expect_rc 2 "$DTRAIN_BIN/dtrain-run" --quite "$T/spec.json"
must_contain "$T/err" 'dtrain-run: unknown option "--quite"; did you mean "--quiet"?'
expect_rc 2 "$DTRAIN_BIN/dtrain-data" info --bogus "$T/x.h5"
must_not_contain "$T/err" "did you mean"
# --set: a value that is not of its key's type says which type
expect_rc 3 $SUBMIT validate "$fm" --site "$site" --set train.max_steps=ten
must_contain "$T/err" '--set: train.max_steps: expected an integer (got "ten")'
pass "mistyped commands and options are named with the right one, in every program; --set names the type it expected"

# --- invalid specs: exit 3, every problem named with file and JSON path ---
cat >"$T/bad.json" <<'JSON'
{ "name": "bad", "resources": { "nodes": 2, "tasks_per_nod": 2 },
  "parallel": { "data": 3 }, "train": { "global_batch": 10, "optimizer": { "lr": "fast" } } }
JSON
expect_rc 3 $SUBMIT validate "$T/bad.json" --site "$site"
must_contain "$T/err" "$T/bad.json: resources.tasks_per_nod: unknown key; did you mean \"resources.tasks_per_node\"?"
must_contain "$T/err" "$T/bad.json: train.optimizer.lr: expected a number"
expect_rc 3 $SUBMIT "$T/bad.json" --site "$site"
[ ! -e "$T/runs" ] || fail "an invalid spec left $T/runs behind"
expect_rc 3 $SUBMIT validate "$DTRAIN_SOURCE_DIR/jobs/fashion-mnist-2x2.json" --site "$site" --set parallel.data=3
must_contain "$T/err" "must equal resources.nodes x resources.tasks_per_node"
expect_rc 3 $SUBMIT validate "$T/missing.json"
must_contain "$T/err" "$T/missing.json: cannot read"
pass "invalid specs exit 3 naming file and path"
