#!/usr/bin/env bash
# Hostile strings in specs stay data: names, partitions and paths that a shell
# or an #SBATCH line would interpret are refused; env values are quoted, and
# the rendered script, run with a fake srun, executes none of them.
. "$(dirname "$0")/lib.sh"
site=$(write_site)
marker=$T/pwned

refuse() {
	local what=$1 json=$2
	printf '%s\n' "$json" >"$T/h.json"
	expect_rc 3 $SUBMIT "$T/h.json" --site "$site" --dry-run
	must_contain "$T/err" "$what"
	[ ! -e "$marker" ] || fail "a command ran while refusing $what"
}
refuse "name: character '\$' not allowed" '{"name": "x$(touch '"$marker"')"}'
refuse "name: character '\`' not allowed" '{"name": "x`touch '"$marker"'`"}'
refuse "resources.partition: character ';' not allowed" '{"resources": {"partition": "low;touch '"$marker"'"}}'
refuse "resources.account: character ' ' not allowed" '{"resources": {"account": "a b"}}'
refuse "resources.constraint: character 0x0a not allowed" '{"resources": {"constraint": "a\n#SBATCH --uid=0"}}'
refuse "run_dir: character ''' not allowed" '{"run_dir": "/tmp/a'"'"'$(touch '"$marker"')"}'
refuse "env.X: character 0x0a not allowed" '{"env": {"X": "a\ntouch '"$marker"'"}}'
refuse "env.A;B: not a valid environment variable name" '{"env": {"A;B": "x"}}'
expect_rc 3 $SUBMIT "$DTRAIN_SOURCE_DIR/jobs/single.json" --site "$site" --dry-run --set 'name=a;b'
must_contain "$T/err" "name: character ';' not allowed"
pass "hostile names, partitions, paths and env keys are refused"

# Env values with every shell metacharacter survive as literal data.
hostile='$(touch '"$marker"') `touch '"$marker"'` '"'"'; touch '"$marker"'; '"'"' "q" \ $HOME ~ * ; | & > <'
jq_hostile=$(printf '%s' "$hostile" | sed 's/\\/\\\\/g; s/"/\\"/g')
printf '{"name": "hostile", "env": {"HOSTILE": "%s"}, "resources": {"time": 5}}\n' "$jq_hostile" >"$T/h.json"
expect_rc 0 $SUBMIT "$T/h.json" --site "$site" --dry-run --no-data-check
cp "$T/out" "$T/job.sh"
bash -n "$T/job.sh" || fail "bash -n rejects the script"
# Run the script with fake srun/scontrol that print what they see.
mkdir -p "$T/fake"
cat >"$T/fake/srun" <<'SH'
#!/bin/bash
printf 'HOSTILE=[%s]\n' "$HOSTILE"
printf 'SITE=[%s]\n' "$DTRAIN_SITE_MARK"
exit 0
SH
printf '#!/bin/bash\necho "scontrol $*"\n' >"$T/fake/scontrol"
chmod +x "$T/fake/srun" "$T/fake/scontrol"
(cd "$T" && PATH="$T/fake:$PATH" bash "$T/job.sh") >"$T/run.out" 2>&1 || { cat "$T/run.out"; fail "script failed"; }
[ ! -e "$marker" ] || fail "an env value ran a command"
must_contain "$T/run.out" "HOSTILE=[$hostile]"
must_contain "$T/run.out" "SITE=[site-env]"
must_contain "$T/run.out" "site-setup-ran"
pass "env values stay literal data when the script runs"
